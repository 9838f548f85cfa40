//! WATCH and EXEC on the storage node. A watched key's token is its version when it exists
//! and has not expired (`None` otherwise). EXEC runs the queued commands as one OCC
//! transaction over one [`CommandCtx`], as a script's `redis.call`s run: the watched keys
//! are read first, and any whose token differs makes EXEC answer null. The watched keys
//! are in the transaction's read set, so a change between that check and the commit is a
//! conflict, and the retry sees it. A runtime error of one command (WRONGTYPE) is that
//! command's reply and the rest still run, as in Redis.

use ferry_func::ctx::poll_now;
use ferry_func::CtxError;
use ferry_lua::resp::error_reply;
use ferry_resp::command::Transaction;
use ferry_resp::Reply;

use crate::command_ctx::CommandCtx;
use crate::node::TenantState;
use crate::resp_job::MAX_COMMAND_ATTEMPTS;
use crate::routing::ClusterRole;

/// WATCH: each key's token, an integer or null, in order.
pub(crate) fn watch(cluster: Option<&ClusterRole>, tenant: &TenantState, table: &str, keys: &[bytes::Bytes]) -> Reply {
    let mut ctx = CommandCtx::new(&tenant.store, tenant.id, table, cluster);
    let mut tokens = Vec::with_capacity(keys.len());
    for key in keys {
        match ctx.watch_token(key) {
            Ok(Some(version)) => tokens.push(Reply::Integer(version as i64)),
            Ok(None) => tokens.push(Reply::Null),
            Err(err) => return Reply::err(err_text(err)),
        }
    }
    Reply::Array(tokens)
}

fn err_text(err: CtxError) -> String {
    match err {
        CtxError::Conflict(message)
        | CtxError::Refused(message)
        | CtxError::Unavailable(message)
        | CtxError::Stopped(message) => message,
    }
}

/// EXEC: the replies of the queued commands as an array, or null when a watched key
/// changed.
pub(crate) fn exec(cluster: Option<&ClusterRole>, tenant: &TenantState, table: &str, tx: &Transaction) -> Reply {
    'attempt: for _ in 0..MAX_COMMAND_ATTEMPTS {
        let mut ctx = CommandCtx::new(&tenant.store, tenant.id, table, cluster);
        for watched in &tx.watched {
            match ctx.watch_token(&watched.key) {
                Ok(token) if token == watched.token => {}
                Ok(_) => return Reply::Null,
                Err(CtxError::Conflict(_)) => continue 'attempt,
                Err(err) => return Reply::err(err_text(err)),
            }
        }
        let mut replies = Vec::with_capacity(tx.commands.len());
        for command in &tx.commands {
            match poll_now(ferry_lua::call::run_with(&mut ctx, table, command, true)) {
                None => replies.push(Reply::err("internal error: the command waited on something")),
                Some(Ok(Some(reply))) => replies.push(reply),
                Some(Ok(None)) => replies.push(Reply::err("this command is not a data command")),
                Some(Err(CtxError::Conflict(_))) => continue 'attempt,
                Some(Err(err)) => replies.push(error_reply(&err_text(err))),
            }
        }
        match ctx.commit() {
            Ok(()) => return Reply::Array(replies),
            Err(err) if err.is_conflict() => continue,
            Err(err) => return crate::resp_job::commit_error(&err),
        }
    }
    Reply::err(format!(
        "the transaction gave up after {MAX_COMMAND_ATTEMPTS} conflicting attempts; retry"
    ))
}
