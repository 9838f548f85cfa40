//! `ferry kv`: poke a storage node by hand, like redis-cli.

use std::time::Instant;

use bytes::Bytes;

use ferry_func::builtins::{aggregate, auth, noop, social, traverse, ycsbt};

use crate::connect::ConnectArgs;
use crate::CmdResult;

/// Flags of `ferry kv`.
#[derive(clap::Args)]
#[command(after_help = "Keys and values are text; write 0x... for hex bytes or u64:N for an \
8-byte little-endian number (the built-ins' keys, e.g. `get graph u64:5`).\n\
Built-in invoke arguments: traverse 'start=0,depth=2,compute=1us'; ycsbt 'read,account=3' or \
'transfer,from=1,to=2,amount=5'; aggregate 'keys=0..10,compute=100ns' (or keys=1+2+3); \
auth 'user=user1,password=password-1'; social.aggrv, social.aggrs 'vertex=3'; social.topk \
'vertex=3,k=5,compute=5us'; noop ''. Other functions take raw text or 0x... hex.")]
pub struct KvArgs {
    #[command(flatten)]
    connect: ConnectArgs,
    #[command(subcommand)]
    command: KvCommand,
}

#[derive(clap::Subcommand)]
enum KvCommand {
    /// Write an object (creates the table if needed).
    Put { table: String, key: String, value: String },
    /// Read an object.
    Get { table: String, key: String },
    /// Delete an object.
    Delete { table: String, key: String },
    /// Read several objects of one table at once.
    Multiget {
        table: String,
        #[arg(required = true)]
        keys: Vec<String>,
    },
    /// Run a storage function.
    Invoke {
        /// Function name.
        function: String,
        /// Arguments (see below).
        #[arg(default_value = "")]
        args: String,
        /// Run it here, fetching data over the network (ship data).
        #[arg(long, conflicts_with = "remote")]
        local: bool,
        /// Run it on the storage node (ship compute; the default).
        #[arg(long)]
        remote: bool,
    },
    /// Show the node's counters for this tenant.
    Stats,
}

/// Parses key/value text: `0x...` hex, `u64:N` little-endian, else the UTF-8 bytes.
pub fn parse_bytes(text: &str) -> Result<Bytes, String> {
    if let Some(hex) = text.strip_prefix("0x") {
        if hex.len() % 2 != 0 {
            return Err(format!("{text:?}: hex needs an even number of digits"));
        }
        return (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).map_err(|_| format!("{text:?}: not hex")))
            .collect::<Result<Vec<u8>, String>>()
            .map(Bytes::from);
    }
    if let Some(number) = text.strip_prefix("u64:") {
        let n: u64 = number.parse().map_err(|_| format!("{text:?}: not a u64"))?;
        return Ok(Bytes::copy_from_slice(&n.to_le_bytes()));
    }
    Ok(Bytes::copy_from_slice(text.as_bytes()))
}

/// Shows bytes as text when printable, else hex.
pub fn show_bytes(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) if text.chars().all(|c| !c.is_control() || c == '\n' || c == '\t') => text.to_string(),
        _ => format!("0x{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()),
    }
}

fn params(text: &str) -> Result<Vec<(&str, &str)>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .map(|part| part.split_once('=').ok_or_else(|| format!("{part:?} is not key=value")))
        .collect()
}

fn number(value: &str, what: &str) -> Result<u64, String> {
    value
        .parse()
        .map_err(|_| format!("{what} must be a non-negative integer, got {value:?}"))
}

fn compute_ns(value: &str) -> Result<u64, String> {
    ferry_spec::parse_duration(value)
        .map(|nanos| nanos.as_nanos())
        .map_err(|err| err.to_string())
}

fn unknown(key: &str, function: &str) -> String {
    format!("unknown argument {key:?} for {function}")
}

/// Encodes the human form of a built-in's arguments; other functions get raw bytes.
pub fn invoke_args(function: &str, text: &str) -> Result<Bytes, String> {
    match function {
        traverse::NAME => {
            let mut args = traverse::TraverseArgs {
                start: 0,
                depth: 2,
                compute_ns: 0,
            };
            for (key, value) in params(text)? {
                match key {
                    "start" => args.start = number(value, key)?,
                    "depth" => {
                        args.depth = u32::try_from(number(value, key)?).map_err(|_| "depth too large".to_string())?
                    }
                    "compute" => args.compute_ns = compute_ns(value)?,
                    _ => return Err(unknown(key, function)),
                }
            }
            Ok(args.encode())
        }
        ycsbt::NAME => {
            let (op, rest) = text.split_once(',').unwrap_or((text, ""));
            let (mut account, mut from, mut to, mut amount, mut compute) = (0, 0, 1, 1, 0);
            for (key, value) in params(rest)? {
                match key {
                    "account" => account = number(value, key)?,
                    "from" => from = number(value, key)?,
                    "to" => to = number(value, key)?,
                    "amount" => amount = number(value, key)?,
                    "compute" => compute = compute_ns(value)?,
                    _ => return Err(unknown(key, function)),
                }
            }
            match op.trim() {
                "read" => Ok(ycsbt::YcsbtArgs::Read {
                    account,
                    compute_ns: compute,
                }
                .encode()),
                "transfer" => Ok(ycsbt::YcsbtArgs::Transfer {
                    from,
                    to,
                    amount,
                    compute_ns: compute,
                }
                .encode()),
                other => Err(format!("ycsbt takes 'read,...' or 'transfer,...', not {other:?}")),
            }
        }
        aggregate::NAME => {
            let mut args = aggregate::AggregateArgs {
                keys: Vec::new(),
                compute_ns: 0,
            };
            for (key, value) in params(text)? {
                match key {
                    "keys" => {
                        args.keys = match value.split_once("..") {
                            Some((a, b)) => (number(a, "range start")?..number(b, "range end")?).collect(),
                            None => value.split('+').map(|k| number(k, "key")).collect::<Result<_, _>>()?,
                        };
                        if args.keys.len() > aggregate::MAX_KEYS {
                            return Err(format!("at most {} keys", aggregate::MAX_KEYS));
                        }
                    }
                    "compute" => args.compute_ns = compute_ns(value)?,
                    _ => return Err(unknown(key, function)),
                }
            }
            Ok(args.encode())
        }
        auth::NAME => {
            let mut args = auth::AuthArgs {
                user: Bytes::new(),
                password: Bytes::new(),
            };
            for (key, value) in params(text)? {
                match key {
                    "user" => args.user = Bytes::copy_from_slice(value.as_bytes()),
                    "password" => args.password = Bytes::copy_from_slice(value.as_bytes()),
                    _ => return Err(unknown(key, function)),
                }
            }
            Ok(args.encode())
        }
        social::AGGR_V | social::TOP_K | social::AGGR_S => {
            let mut args = social::VertexArgs {
                vertex: 0,
                k: if function == social::TOP_K { 5 } else { 0 },
                compute_ns: if function == social::TOP_K {
                    social::TOP_K_SCORE_NS_DEFAULT
                } else {
                    0
                },
            };
            for (key, value) in params(text)? {
                match key {
                    "vertex" => args.vertex = number(value, key)?,
                    "k" if function == social::TOP_K => {
                        args.k = u32::try_from(number(value, key)?).map_err(|_| "k too large".to_string())?
                    }
                    "compute" => args.compute_ns = compute_ns(value)?,
                    _ => return Err(unknown(key, function)),
                }
            }
            Ok(args.encode())
        }
        noop::NAME => Ok(Bytes::new()),
        _ => parse_bytes(text),
    }
}

fn u64_at(bytes: &[u8], index: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        bytes.get(index * 8..index * 8 + 8)?.try_into().ok()?,
    ))
}

/// Describes a built-in's result in words; other results are shown as bytes.
pub fn describe_result(function: &str, result: &[u8]) -> String {
    let described = match function {
        traverse::NAME => u64_at(result, 0)
            .zip(u64_at(result, 1))
            .map(|(node, bytes)| format!("reached node {node} after reading {bytes} bytes")),
        ycsbt::NAME if result.len() == 8 => u64_at(result, 0).map(|b| format!("balance {b}")),
        ycsbt::NAME if result.len() == 17 => {
            let outcome = if result[0] == ycsbt::TRANSFER_APPLIED {
                "applied"
            } else {
                "insufficient funds"
            };
            u64_at(&result[1..], 0)
                .zip(u64_at(&result[1..], 1))
                .map(|(from, to)| format!("transfer {outcome}: balances now {from} and {to}"))
        }
        aggregate::NAME => match (
            u64_at(result, 0),
            u64_at(result, 1),
            u64_at(result, 2),
            u64_at(result, 3),
        ) {
            (Some(sum), Some(min), Some(max), Some(found)) => {
                Some(format!("sum={sum} min={min} max={max} found={found}"))
            }
            _ => None,
        },
        auth::NAME if result.len() == 1 => Some(
            if result[0] == auth::AUTH_OK {
                "password ok"
            } else {
                "denied"
            }
            .to_string(),
        ),
        noop::NAME if result.is_empty() => Some("(no result)".to_string()),
        _ => None,
    };
    described.unwrap_or_else(|| show_bytes(result))
}

pub fn run(args: KvArgs) -> CmdResult {
    // Bad arguments are reported before any connection attempt.
    if let KvCommand::Invoke {
        function, args: text, ..
    } = &args.command
    {
        invoke_args(function, text)?;
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async move {
        let client = args.connect.connect(1).await?;
        let started = Instant::now();
        let elapsed_us = |started: Instant| started.elapsed().as_secs_f64() * 1e6;
        match args.command {
            KvCommand::Put { table, key, value } => {
                let version = client.put(&table, &parse_bytes(&key)?, &parse_bytes(&value)?).await?;
                println!("OK version {version} ({:.0} µs)", elapsed_us(started));
            }
            KvCommand::Get { table, key } => match client.get(&table, &parse_bytes(&key)?).await? {
                Some(object) => println!(
                    "{}\n(version {}, {} bytes, {:.0} µs)",
                    show_bytes(&object.value),
                    object.version,
                    object.value.len(),
                    elapsed_us(started)
                ),
                None => {
                    println!("(not found, {:.0} µs)", elapsed_us(started));
                    return Err("not found".into());
                }
            },
            KvCommand::Delete { table, key } => {
                if client.delete(&table, &parse_bytes(&key)?).await? {
                    println!("deleted ({:.0} µs)", elapsed_us(started));
                } else {
                    println!("(not found, {:.0} µs)", elapsed_us(started));
                    return Err("not found".into());
                }
            }
            KvCommand::Multiget { table, keys } => {
                let keys: Vec<Bytes> = keys.iter().map(|k| parse_bytes(k)).collect::<Result<_, _>>()?;
                let objects = client.multiget(&table, &keys).await?;
                for (key, object) in keys.iter().zip(objects) {
                    match object {
                        Some(object) => println!(
                            "{} = {} (version {})",
                            show_bytes(key),
                            show_bytes(&object.value),
                            object.version
                        ),
                        None => println!("{} (not found)", show_bytes(key)),
                    }
                }
                println!("({:.0} µs)", elapsed_us(started));
            }
            KvCommand::Invoke {
                function,
                args: text,
                local,
                remote: _,
            } => {
                let encoded = invoke_args(&function, &text)?;
                if local {
                    ferry_client::calibrate_spin();
                }
                let invocation = if local {
                    client.invoke_local(&function, encoded).await?
                } else {
                    client.invoke_remote(&function, encoded).await?
                };
                println!("{}", describe_result(&function, &invocation.result));
                let cost = invocation.cost;
                println!(
                    "({:?}, {:.0} µs, {} round trips, storage CPU {:.1} µs, app CPU {:.1} µs, {} attempts)",
                    invocation.placement,
                    invocation.latency.as_secs_f64() * 1e6,
                    cost.round_trips,
                    cost.storage_cpu_ns as f64 / 1e3,
                    cost.app_cpu_ns as f64 / 1e3,
                    cost.attempts
                );
            }
            KvCommand::Stats => {
                for stat in client.stats().await? {
                    println!("{} {}", stat.name, stat.value);
                }
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_and_builtin_args_parse() {
        assert_eq!(parse_bytes("abc").unwrap(), Bytes::from_static(b"abc"));
        assert_eq!(parse_bytes("0x00ff").unwrap(), Bytes::from_static(&[0, 255]));
        assert_eq!(
            parse_bytes("u64:1").unwrap(),
            Bytes::copy_from_slice(&1u64.to_le_bytes())
        );
        assert!(parse_bytes("0xabc").is_err());
        assert!(parse_bytes("u64:-1").is_err());
        let encoded = invoke_args("traverse", "start=3,depth=4,compute=1us").unwrap();
        assert_eq!(
            traverse::TraverseArgs::decode(&encoded).unwrap(),
            traverse::TraverseArgs {
                start: 3,
                depth: 4,
                compute_ns: 1000
            }
        );
        assert!(invoke_args("traverse", "bogus=1").is_err());
        assert!(invoke_args("ycsbt", "steal,from=1").is_err());
        let encoded = invoke_args("aggregate", "keys=2..5").unwrap();
        assert_eq!(aggregate::AggregateArgs::decode(&encoded).unwrap().keys, vec![2, 3, 4]);
        assert_eq!(describe_result("auth", &[auth::AUTH_OK]), "password ok");
    }
}
