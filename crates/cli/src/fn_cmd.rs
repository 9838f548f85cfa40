//! `ferry fn`: Lua function libraries over the ferry protocol, as FUNCTION LOAD, LIST,
//! DELETE and FCALL do over RESP (they are the same storage functions).

use bytes::Bytes;

use ferry_lua::catalog::{self, ListArgs, LoadArgs};
use ferry_lua::fcall::reply_of;
use ferry_lua::FcallArgs;
use ferry_resp::Reply;

use crate::connect::ConnectArgs;
use crate::kv_cmd::show_bytes;
use crate::CmdResult;

/// Flags of `ferry fn`.
#[derive(clap::Args)]
#[command(after_help = "A library is Lua in the Redis Functions format: a first line \
`#!lua name=LIB`, then `redis.register_function('f', function(keys, args) ... end)` calls. \
Example: examples/lua/traverse.lua.")]
pub struct FnArgs {
    #[command(flatten)]
    connect: ConnectArgs,
    #[command(subcommand)]
    command: FnCommand,
}

#[derive(clap::Subcommand)]
enum FnCommand {
    /// Load a library from a file (FUNCTION LOAD).
    Load {
        /// The library's file.
        file: std::path::PathBuf,
        /// Replace a library of the same name.
        #[arg(long)]
        replace: bool,
    },
    /// List the libraries and their functions (FUNCTION LIST).
    List {
        /// Only libraries whose name matches this pattern (`*`, `?`).
        #[arg(long, default_value = "")]
        pattern: String,
        /// Show each library's code too.
        #[arg(long)]
        with_code: bool,
    },
    /// Delete a library and its functions (FUNCTION DELETE).
    Delete {
        /// The library's name.
        library: String,
    },
    /// Call a function (FCALL), on the storage node or, with --local, here.
    Call {
        /// The function's name.
        function: String,
        /// Its keys, comma-separated (KEYS).
        #[arg(long, default_value = "", value_delimiter = ',')]
        keys: Vec<String>,
        /// Its other arguments (ARGV).
        args: Vec<String>,
        /// The database its commands use (the RESP SELECT index: table `db<N>`).
        #[arg(long, default_value_t = 0)]
        db: u32,
        /// Run it here over remote reads with OCC (ship data).
        #[arg(long)]
        local: bool,
        /// FCALL_RO: refuse a function not flagged no-writes.
        #[arg(long)]
        read_only: bool,
    },
}

/// A reply as redis-cli shows it.
fn show(reply: &Reply, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match reply {
        Reply::Simple(text) => out.push_str(&format!("{pad}{text}\n")),
        Reply::Error(text) => out.push_str(&format!("{pad}(error) {text}\n")),
        Reply::Integer(n) => out.push_str(&format!("{pad}(integer) {n}\n")),
        Reply::Bulk(bytes) => out.push_str(&format!("{pad}{}\n", show_bytes(bytes))),
        Reply::Null | Reply::NullArray => out.push_str(&format!("{pad}(nil)\n")),
        Reply::Array(items) if items.is_empty() => out.push_str(&format!("{pad}(empty array)\n")),
        Reply::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                out.push_str(&format!("{pad}{})\n", i + 1));
                show(item, indent + 2, out);
            }
        }
        Reply::Map(pairs) | Reply::Pairs(pairs) => {
            for (key, value) in pairs {
                show(key, indent, out);
                show(value, indent + 2, out);
            }
        }
        Reply::Double(value) => out.push_str(&format!("{pad}(double) {}\n", ferry_resp::reply::format_double(*value))),
    }
}

fn print(reply: &Reply) {
    let mut out = String::new();
    show(reply, 0, &mut out);
    print!("{out}");
}

/// Runs `ferry fn`.
pub fn run(args: FnArgs) -> CmdResult {
    // Bad input is reported before any connection attempt.
    let request = match &args.command {
        FnCommand::Load { file, replace } => {
            let code = std::fs::read(file).map_err(|err| format!("{}: {err}", file.display()))?;
            let code = String::from_utf8(code).map_err(|_| format!("{}: not UTF-8 text", file.display()))?;
            // Checked here too, so a bad library is explained without a round trip.
            ferry_lua::vm::Vm::load(&code).map_err(|err| format!("{}: {err}", file.display()))?;
            let load = LoadArgs {
                replace: *replace,
                code: Bytes::from(code),
            };
            (catalog::LOAD.to_string(), load.encode(), false)
        }
        FnCommand::List { pattern, with_code } => {
            let list = ListArgs {
                pattern: pattern.clone(),
                with_code: *with_code,
            };
            (catalog::LIST.to_string(), list.encode(), false)
        }
        FnCommand::Delete { library } => {
            if !ferry_lua::library::valid_name(library) {
                return Err(format!("{library:?} is not a library name").into());
            }
            (catalog::DELETE.to_string(), catalog::delete_args(library), false)
        }
        FnCommand::Call {
            function,
            keys,
            args: argv,
            db,
            local,
            read_only,
        } => {
            if !ferry_lua::library::valid_name(function) {
                return Err(format!("{function:?} is not a function name").into());
            }
            let call = FcallArgs {
                function: function.clone(),
                table: format!("db{db}"),
                keys: keys
                    .iter()
                    .filter(|k| !k.is_empty())
                    .map(|k| Bytes::from(k.clone()))
                    .collect(),
                args: argv.iter().map(|a| Bytes::from(a.clone())).collect(),
                read_only: *read_only,
            };
            let encoded = call.encode().ok_or("too many keys or arguments")?;
            (call.invocation_name(), encoded, *local)
        }
    };
    let (function, invoke_args, local) = request;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async move {
        let client = args.connect.connect(1).await?;
        let invocation = if local {
            client.invoke_local(&function, invoke_args).await?
        } else {
            client.invoke_remote(&function, invoke_args).await?
        };
        match args.command {
            FnCommand::Load { .. } => println!("{}", show_bytes(&invocation.result)),
            FnCommand::Delete { .. } => println!("OK"),
            FnCommand::List { .. } | FnCommand::Call { .. } => print(&reply_of(&invocation.result)),
        }
        Ok(())
    })
}
