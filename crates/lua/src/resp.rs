//! RESP's FUNCTION and FCALL commands, and data commands, as invocations of storage
//! functions, for any RESP front end (the storage node runs them on its workers, the
//! gateway places FCALL by its policy): the invocation to send, and the reply to give.

use bytes::{Bytes, BytesMut};

use ferry_func::args::reader;
use ferry_func::{Ctx, FnError, FnFuture};
use ferry_proto::wire::{put_bytes16, put_bytes32, put_count};
use ferry_resp::command::{FunctionCommand, ScriptCommand};
use ferry_resp::{Command, Protocol, Reply};

use crate::catalog::{self, ListArgs, LoadArgs};
use crate::fcall::{reply_of, FcallArgs, MAX_FCALL_ARGS};
use crate::library::{valid_name, MAX_LIBRARY_BYTES};
use crate::script::{self, ScriptArgs};

/// `resp.command`: one data command (GET, SET, …) run as a transaction over the `Ctx`, as
/// `redis.call` runs it; lets a front end without tables of its own (the gateway) serve
/// them over remote reads with OCC. Arguments: [`command_args`]; result: the reply.
pub const COMMAND: &str = "resp.command";

/// A FUNCTION or FCALL command, ready to run.
#[derive(Clone, Debug, PartialEq)]
pub enum FunctionCall {
    /// FCALL / FCALL_RO.
    FCall(FcallArgs),
    /// FUNCTION LOAD.
    Load(LoadArgs),
    /// FUNCTION DELETE.
    Delete(String),
    /// FUNCTION LIST.
    List(ListArgs),
    /// FUNCTION STATS (the library list, then the caller's own statistics).
    Stats,
    /// FUNCTION FLUSH.
    Flush,
    /// FUNCTION DUMP.
    Dump,
    /// FUNCTION RESTORE.
    Restore(ferry_resp::command::RestorePolicy, Bytes),
    /// EVAL / EVALSHA and their `_RO` forms.
    Eval(ScriptArgs),
    /// SCRIPT LOAD.
    ScriptLoad(Bytes),
    /// SCRIPT EXISTS.
    ScriptExists(Vec<String>),
    /// SCRIPT FLUSH.
    ScriptFlush,
    /// FUNCTION KILL (a function) or SCRIPT KILL (a script): answered where the tenant's
    /// running calls are known, never run as an invocation.
    Kill(crate::kill::CallKind),
}

impl FunctionCall {
    /// The call for a FUNCTION or FCALL command over `table`; any other command is given
    /// back.
    pub fn of(command: Command, table: &str) -> Result<FunctionCall, Command> {
        Ok(match command {
            Command::Function(FunctionCommand::Load { replace, code }) => {
                FunctionCall::Load(LoadArgs { replace, code })
            }
            Command::Function(FunctionCommand::Delete(library)) => {
                FunctionCall::Delete(String::from_utf8_lossy(&library).into_owned())
            }
            Command::Function(FunctionCommand::List { pattern, with_code }) => FunctionCall::List(ListArgs {
                pattern: pattern
                    .map(|p| String::from_utf8_lossy(&p).into_owned())
                    .unwrap_or_default(),
                with_code,
            }),
            Command::Function(FunctionCommand::Stats) => FunctionCall::Stats,
            Command::Function(FunctionCommand::Flush) => FunctionCall::Flush,
            Command::Function(FunctionCommand::Dump) => FunctionCall::Dump,
            Command::Function(FunctionCommand::Restore { payload, policy }) => FunctionCall::Restore(policy, payload),
            Command::FCall {
                function,
                keys,
                args,
                read_only,
            } => FunctionCall::FCall(FcallArgs {
                function: String::from_utf8_lossy(&function).into_owned(),
                table: table.to_string(),
                keys,
                args,
                read_only,
            }),
            Command::Eval {
                script,
                by_sha,
                keys,
                args,
                read_only,
            } => {
                let (sha, text) = if by_sha {
                    (String::from_utf8_lossy(&script).to_ascii_lowercase(), None)
                } else {
                    (script::sha1_hex(&script), Some(script))
                };
                FunctionCall::Eval(ScriptArgs {
                    sha,
                    text,
                    table: table.to_string(),
                    keys,
                    args,
                    read_only,
                })
            }
            Command::Script(ScriptCommand::Load(text)) => FunctionCall::ScriptLoad(text),
            Command::Script(ScriptCommand::Exists(shas)) => FunctionCall::ScriptExists(
                shas.iter()
                    .map(|sha| String::from_utf8_lossy(sha).into_owned())
                    .collect(),
            ),
            Command::Script(ScriptCommand::Flush) => FunctionCall::ScriptFlush,
            Command::Script(ScriptCommand::Kill) => FunctionCall::Kill(crate::kill::CallKind::Script),
            Command::Function(FunctionCommand::Kill) => FunctionCall::Kill(crate::kill::CallKind::Function),
            other => return Err(other),
        })
    }

    /// The invocation to run (function name and arguments), or the reply refusing it.
    pub fn invocation(&self) -> Result<(String, Bytes), Reply> {
        Ok(match self {
            FunctionCall::FCall(call) => {
                if !valid_name(&call.function) {
                    return Err(Reply::err("Function not found"));
                }
                let args = call.encode().ok_or_else(|| Reply::err("too many keys or arguments"))?;
                (call.invocation_name(), args)
            }
            FunctionCall::Load(load) => {
                if load.code.len() > MAX_LIBRARY_BYTES {
                    return Err(Reply::err(format!(
                        "library of {} bytes exceeds the limit of {MAX_LIBRARY_BYTES}",
                        load.code.len()
                    )));
                }
                (catalog::LOAD.to_string(), load.encode())
            }
            FunctionCall::Delete(library) => {
                if !valid_name(library) {
                    return Err(Reply::err("Library not found"));
                }
                (catalog::DELETE.to_string(), catalog::delete_args(library))
            }
            FunctionCall::List(list) => (catalog::LIST.to_string(), list.encode()),
            FunctionCall::Stats => (catalog::LIST.to_string(), ListArgs::default().encode()),
            FunctionCall::Flush => (catalog::FLUSH.to_string(), Bytes::new()),
            FunctionCall::Dump => (catalog::DUMP.to_string(), Bytes::new()),
            FunctionCall::Restore(policy, payload) => {
                let args =
                    catalog::restore_args(*policy, payload).ok_or_else(|| Reply::err("the payload is too long"))?;
                (catalog::RESTORE.to_string(), args)
            }
            FunctionCall::Eval(call) => {
                if !script::valid_sha(&call.sha) {
                    return Err(Reply::Error(script::NO_SCRIPT.into()));
                }
                let args = call.encode().ok_or_else(|| Reply::err("too many keys or arguments"))?;
                (call.invocation_name(), args)
            }
            FunctionCall::ScriptLoad(text) => {
                let args = script::load_args(text).ok_or_else(|| Reply::err("the script is too long"))?;
                (script::LOAD.to_string(), args)
            }
            FunctionCall::ScriptExists(shas) => {
                let args = script::exists_args(shas).ok_or_else(|| Reply::err("too many scripts named"))?;
                (script::EXISTS.to_string(), args)
            }
            FunctionCall::ScriptFlush => (script::FLUSH.to_string(), Bytes::new()),
            FunctionCall::Kill(_) => return Err(Reply::err("a kill is answered by the front end, not run")),
        })
    }

    /// The reply for the invocation's result; FUNCTION STATS adds `functions()`, the
    /// caller's statistics per function (by invocation name; those of functions not loaded
    /// now are left out), gathered only for it.
    pub fn reply(&self, result: &Bytes, functions: impl FnOnce() -> Vec<FunctionStat>) -> Reply {
        match self {
            FunctionCall::FCall(_) | FunctionCall::List(_) | FunctionCall::Eval(_) | FunctionCall::ScriptExists(_) => {
                reply_of(result)
            }
            FunctionCall::Load(_) | FunctionCall::ScriptLoad(_) | FunctionCall::Dump => Reply::Bulk(result.clone()),
            FunctionCall::Delete(_)
            | FunctionCall::Flush
            | FunctionCall::Restore(..)
            | FunctionCall::ScriptFlush
            | FunctionCall::Kill(_) => Reply::ok(),
            FunctionCall::Stats => stats(&reply_of(result), &functions()),
        }
    }
}

/// What a front end knows about one function's calls, for FUNCTION STATS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionStat {
    /// The invocation name (`fcall.<name>`).
    pub name: String,
    /// Named figures, in the order shown.
    pub figures: Vec<(&'static str, i64)>,
}

/// The function descriptions of one library in FUNCTION LIST's reply.
fn library_functions(library: &Reply) -> &[Reply] {
    let Reply::Map(fields) = library else { return &[] };
    match fields.iter().find(|(key, _)| *key == Reply::text("functions")) {
        Some((_, Reply::Array(items))) => items,
        _ => &[],
    }
}

/// FUNCTION STATS in Redis's shape (no script is ever "running" from the client's view:
/// calls are bounded by their budget, not killed by hand; the Lua engine's counts), plus
/// `functions`: per function loaded now, the caller's figures.
fn stats(list: &Reply, functions: &[FunctionStat]) -> Reply {
    let Reply::Array(libraries) = list else {
        return list.clone();
    };
    let described = || libraries.iter().flat_map(library_functions);
    let loaded = |name: &str| {
        described().any(|f| matches!(f, Reply::Map(pairs) if pairs.contains(&(Reply::text("name"), Reply::text(name)))))
    };
    let lua = Reply::Map(vec![
        (Reply::text("libraries_count"), Reply::Integer(libraries.len() as i64)),
        (
            Reply::text("functions_count"),
            Reply::Integer(described().count() as i64),
        ),
    ]);
    let per_function: Vec<(Reply, Reply)> = functions
        .iter()
        .filter_map(|f| {
            let name = f.name.strip_prefix(crate::fcall::FAMILY)?;
            loaded(name).then_some((name, f))
        })
        .map(|(name, f)| {
            let fields = f
                .figures
                .iter()
                .map(|(key, value)| (Reply::text(*key), Reply::Integer(*value)));
            (Reply::text(name), Reply::Map(fields.collect()))
        })
        .collect();
    let mut fields = vec![
        (Reply::text("running_script"), Reply::Null),
        (Reply::text("engines"), Reply::Map(vec![(Reply::text("LUA"), lua)])),
    ];
    // ferry's own field, left out when there is nothing in it, so the reply is Redis's
    // exactly for a client that compares it whole.
    if !per_function.is_empty() {
        fields.push((Reply::text("functions"), Reply::Map(per_function)));
    }
    Reply::Map(fields)
}

/// A storage node's error message as a RESP error: kept as is if it starts with an error
/// code (`ERR`, `BUSY`, …, as the Lua functions write them), `ERR ` put in front otherwise.
pub fn error_reply(message: &str) -> Reply {
    let code = message.split(' ').next().unwrap_or("");
    if !code.is_empty() && code.bytes().all(|b| b.is_ascii_uppercase()) {
        Reply::Error(message.to_string())
    } else {
        Reply::err(message)
    }
}

/// `resp.command`'s arguments: u16-prefixed table, then the command's words.
pub fn command_args(table: &str, words: &[Bytes]) -> Option<Bytes> {
    if words.is_empty() || words.len() > MAX_FCALL_ARGS {
        return None;
    }
    let mut out = BytesMut::new();
    put_bytes16(&mut out, table.as_bytes(), "table").ok()?;
    put_count(&mut out, words.len(), "words").ok()?;
    for word in words {
        put_bytes32(&mut out, word, "word").ok()?;
    }
    Some(out.freeze())
}

/// `resp.command`: runs one data command against the `Ctx` (see [`COMMAND`]).
pub fn command(ctx: &mut dyn Ctx) -> FnFuture<'_> {
    Box::pin(async move {
        let mut r = reader(ctx.args());
        let table = r.string16("table")?;
        let count = r.count(MAX_FCALL_ARGS, "words")?;
        let mut words = Vec::with_capacity(count);
        for _ in 0..count {
            words.push(r.bytes32("word")?);
        }
        r.finish()?;
        if words.is_empty() {
            return Err(FnError::BadArgs("no command".into()));
        }
        let reply = crate::call::execute(ctx, &table, words, true).await?;
        let mut out = BytesMut::with_capacity(64);
        reply.encode(Protocol::Ferry, &mut out);
        Ok(out.freeze())
    })
}
