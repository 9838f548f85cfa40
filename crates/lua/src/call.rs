//! `redis.call` inside a function: the data commands, run against the invocation's `Ctx`,
//! so reads join its read set and writes its buffered write set wherever it runs. The
//! command's own failures (wrong arity, not an integer) are replies the script sees;
//! conflicts, refusals of the runtime and lost storage nodes end the invocation.

use bytes::Bytes;

use ferry_func::{Ctx, CtxError};
use ferry_resp::command::{expiry_refused, incr_delta, incremented, SetCondition};
use ferry_resp::table::{lookup, NO_SCRIPT, WRITE};
use ferry_resp::{Command, Reply};

/// Runs one command for a script over `table`. `writes_allowed` is false in functions
/// flagged `no-writes`.
pub async fn execute(
    ctx: &mut dyn Ctx,
    table: &str,
    args: Vec<Bytes>,
    writes_allowed: bool,
) -> Result<Reply, CtxError> {
    // What a script may call is the command table's to say.
    if let Some(spec) = args.first().and_then(|name| lookup(name)) {
        if spec.is(NO_SCRIPT) {
            return Ok(Reply::err("This Redis command is not allowed from script"));
        }
        if spec.is(WRITE) && !writes_allowed {
            return Ok(Reply::err("Write commands are not allowed from read-only scripts."));
        }
    }
    let command = match Command::parse(args) {
        Ok(command) => command,
        Err(reply) => return Ok(reply),
    };
    match run(ctx, table, &command).await? {
        Some(reply) => Ok(reply),
        None => Ok(Reply::err("This Redis command is not allowed from script")),
    }
}

/// Runs one data command over `ctx`: the one executor of Redis's data commands, for a
/// script's `redis.call` and for a RESP client's command alike (the storage node runs the
/// latter as a one-command transaction in the tenant's seat). `None` for a command that is
/// not a data command.
pub async fn run(ctx: &mut dyn Ctx, table: &str, command: &Command) -> Result<Option<Reply>, CtxError> {
    let reply = match command {
        Command::Ping(None) => Reply::Simple("PONG".into()),
        Command::Ping(Some(message)) | Command::Echo(message) => Reply::Bulk(message.clone()),
        Command::Get(key) => ctx.get(table, key).await?.map_or(Reply::Null, Reply::Bulk),
        Command::Set {
            key,
            value,
            condition,
            get,
            expiry,
        } => {
            if let Some(option) = expiry {
                return Ok(Some(expiry_refused(option)));
            }
            let old = if condition.is_some() || *get {
                ctx.get(table, key).await?
            } else {
                None
            };
            let allowed = SetCondition::allows(*condition, old.is_some());
            if allowed {
                ctx.put(table, key, value.clone()).await?;
            }
            match (get, allowed) {
                (true, _) => old.map_or(Reply::Null, Reply::Bulk),
                (false, true) => Reply::ok(),
                (false, false) => Reply::Null,
            }
        }
        Command::Del(keys) => {
            let mut removed = 0;
            for key in keys {
                if ctx.get(table, key).await?.is_some() {
                    ctx.delete(table, key).await?;
                    removed += 1;
                }
            }
            Reply::Integer(removed)
        }
        Command::Exists(keys) => {
            let mut found = 0;
            for key in keys {
                found += i64::from(ctx.get(table, key).await?.is_some());
            }
            Reply::Integer(found)
        }
        Command::MGet(keys) => {
            let values = ctx.multiget(table, keys).await?;
            Reply::Array(values.into_iter().map(|v| v.map_or(Reply::Null, Reply::Bulk)).collect())
        }
        Command::MSet(pairs) => {
            for (key, value) in pairs {
                ctx.put(table, key, value.clone()).await?;
            }
            Reply::ok()
        }
        Command::IncrBy { key, delta, negate } => {
            let delta = match incr_delta(delta, *negate) {
                Ok(delta) => delta,
                Err(reply) => return Ok(Some(reply)),
            };
            let current = ctx.get(table, key).await?;
            match incremented(current.as_deref(), delta) {
                Ok(next) => {
                    ctx.put(table, key, Bytes::from(next.to_string())).await?;
                    Reply::Integer(next)
                }
                Err(reply) => reply,
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(reply))
}
