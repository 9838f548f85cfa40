//! EXEC of a transaction that holds a command over the whole database (KEYS, SCAN,
//! DBSIZE, RANDOMKEY, FLUSHDB, FLUSHALL). Such a command reads the table's listing, which
//! the in-place path (the locks of the keys the commands name, `in_place`) cannot hold
//! still, so the transaction runs as a script's does: over a `StoreCtx` (reads at one read
//! version, the listing in the read set, writes buffered, a command that errs taken back
//! alone) and one OCC commit. A watched key that changed since WATCH answers the null
//! array; a conflict with another commit runs the transaction again, at most
//! [`MAX_EXEC_ATTEMPTS`] times.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use ferry_func::ctx::poll_now;
use ferry_func::{Ctx, CtxError};
use ferry_lua::resp::error_reply;
use ferry_resp::command::Transaction;
use ferry_resp::Reply;
use ferry_store::StoreError;

use crate::node::TenantState;
use crate::routing::ClusterRole;
use crate::store_ctx::{object_refs, unix_time_us, write_refs, SharedAttempt, StoreCtx};

/// Times a transaction runs again after a conflict before EXEC gives up with an error.
pub(crate) const MAX_EXEC_ATTEMPTS: u32 = 8;

/// Whether `tx` holds a command over the whole database.
pub(crate) fn lists(tx: &Transaction) -> bool {
    tx.commands
        .iter()
        .any(|command| matches!(command, ferry_resp::Command::Database(_)))
}

/// Whether every key `tx` watches still has the token it had at WATCH.
fn watched_unchanged(tenant: &TenantState, tx: &Transaction) -> Result<bool, Reply> {
    let now_ms = unix_time_us() / 1000;
    for watched in &tx.watched {
        match tenant.store.watch_token(&watched.table, &watched.key, now_ms) {
            Ok(token) if token == watched.token => {}
            Ok(_) => return Ok(false),
            Err(err) => return Err(error_reply(&crate::memory::refusal_text(&err))),
        }
    }
    Ok(true)
}

/// One attempt: the replies, or why it must run again.
fn attempt(
    cluster: Option<&Arc<ClusterRole>>,
    tenant: &Arc<TenantState>,
    table: &str,
    tx: &Transaction,
) -> Result<Reply, CtxError> {
    let state = SharedAttempt::default();
    {
        let mut state = state.lock();
        state.read_version = tenant.store.read_version();
        // The whole transaction runs in this one step: no access yields.
        state.slice_ends = Some(Instant::now() + Duration::from_secs(3600));
    }
    let mut ctx = StoreCtx::new(
        Arc::clone(tenant),
        cluster.cloned(),
        false,
        Bytes::new(),
        Arc::clone(&state),
    );
    let stuck = || CtxError::Unavailable("a transaction's command waited inside EXEC".into());
    // The watched keys join the read set: one changed before the commit is a conflict,
    // told apart from others below.
    for watched in &tx.watched {
        poll_now(ctx.get(&watched.table, &watched.key)).ok_or_else(stuck)??;
    }
    let mut replies = Vec::with_capacity(tx.commands.len());
    for command in &tx.commands {
        let reply = match poll_now(ferry_lua::call::run_with(&mut ctx, table, command, true)).ok_or_else(stuck)? {
            Ok(Some(reply)) => reply,
            Ok(None) => Reply::err("this command is not a data command"),
            // A command the store refuses errs alone, as a command's error does in EXEC.
            Err(CtxError::Refused(why)) => Reply::err(why),
            Err(other) => return Err(other),
        };
        replies.push(reply);
    }
    let state = state.lock();
    match tenant
        .store
        .commit(&object_refs(state.tx.read_objects()), &write_refs(state.tx.writes()))
    {
        Ok(_) => Ok(Reply::Array(replies)),
        Err(err) if err.is_conflict() => Err(CtxError::Conflict(err.to_string())),
        Err(err @ StoreError::QuotaExceeded { .. }) => Ok(error_reply(&crate::memory::refusal_text(&err))),
        Err(err) => Err(CtxError::Refused(crate::memory::refusal_text(&err))),
    }
}

/// EXEC of `tx` (which [`lists`]) over `table`.
pub(crate) fn exec(
    cluster: Option<&Arc<ClusterRole>>,
    tenant: &Arc<TenantState>,
    table: &str,
    tx: &Transaction,
) -> Reply {
    let mut last = String::new();
    for _ in 0..MAX_EXEC_ATTEMPTS {
        match watched_unchanged(tenant, tx) {
            Ok(true) => {}
            Ok(false) => return Reply::NullArray,
            Err(refused) => return refused,
        }
        match attempt(cluster, tenant, table, tx) {
            Ok(reply) => return reply,
            Err(CtxError::Conflict(why)) => last = why,
            Err(other) => return Reply::err(other.to_string()),
        }
    }
    match watched_unchanged(tenant, tx) {
        Ok(false) => Reply::NullArray,
        _ => Reply::err(format!(
            "the transaction conflicted {MAX_EXEC_ATTEMPTS} times in a row; last: {last}"
        )),
    }
}
