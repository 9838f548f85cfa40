//! Redis's data commands and MULTI/EXEC run on the stored values themselves
//! (`ferry_store::TenantStore::update`): the command's keys are locked (for writing if
//! it may write), the one executor of data commands (`ferry_keyspace::run`) reads and
//! changes the entries in place, and the changes are logged and installed at one
//! version. A push on a long list costs the push, not the list. A read-only command runs
//! under read locks; if it meets an expired key it may delete, it runs again under write
//! locks so the key goes at a version, as any delete.
//!
//! Scripts and functions keep their transactions over `Ctx` (reads at a read version,
//! writes committed with OCC): they may run on an app node and yield between accesses.

use bytes::Bytes;

use ferry_keyspace::{Keys, Slot};
use ferry_lua::resp::error_reply;
use ferry_resp::command::Transaction;
use ferry_resp::table::{lookup, WRITE};
use ferry_resp::{Command, Reply};
use ferry_store::{Updated, Watched};
use ferry_value::Encodings;

use crate::node::TenantState;
use crate::routing::ClusterRole;

/// A command's refusal as a reply: Redis's words where it has them (`OOM` past the
/// memory limit, a replica's `READONLY`).
fn refusal(err: &ferry_store::StoreError) -> Reply {
    error_reply(&crate::memory::refusal_text(err))
}

/// Refuses keys this node does not own or may not write now (a slot on the move).
fn check_keys(cluster: Option<&ClusterRole>, keys: &[Bytes]) -> Result<(), Reply> {
    let Some(role) = cluster else { return Ok(()) };
    for key in keys {
        if let Some(why) = crate::routing::not_owned(role, key).or_else(|| crate::routing::frozen(role, key)) {
            return Err(Reply::err(why));
        }
    }
    Ok(())
}

/// The keys `words` names, by the command table.
fn keys_of(words: &[Bytes]) -> Vec<Bytes> {
    ferry_resp::table::keys_of(words)
}

/// Runs `command` over `slots` (every key it names): its reply, and whether it met an
/// expired key it left in place. A command that errs is taken back alone, as in Redis's
/// EXEC.
fn run_one(
    command: &Command,
    slots: &mut [Slot],
    encodings: &Encodings,
    now_us: u64,
    write: bool,
    deletes_expired: bool,
) -> (Reply, bool) {
    let seed = ferry_keyspace::keys::fresh_seed(now_us);
    let mut keys = if write {
        Keys::new(slots, now_us, seed, *encodings, deletes_expired)
    } else {
        Keys::read_only(slots, now_us, seed, *encodings)
    };
    let reply = match command {
        Command::Ping(None) => Reply::Simple("PONG".into()),
        Command::Ping(Some(message)) | Command::Echo(message) => Reply::Bulk(message.clone()),
        Command::Data(words) => ferry_keyspace::run(words, &mut keys),
        // Inside a transaction a blocking pop runs its step once and does not wait.
        Command::Blocking(blocking) => match ferry_keyspace::run(&blocking.step, &mut keys) {
            empty @ (Reply::Null | Reply::NullArray) => empty,
            popped => blocking.shape.reply(popped),
        },
        _ => Reply::err("this command is not a data command"),
    };
    (reply, keys.expired_met())
}

/// Runs one data command; `cluster`: the ownership its keys are checked against (none:
/// not checked); `writes_allowed`: whether it may delete the expired keys it meets (a
/// replica's read may not).
pub(crate) fn data_command(
    cluster: Option<&ClusterRole>,
    tenant: &TenantState,
    table: &str,
    command: &Command,
    writes_allowed: bool,
) -> Reply {
    let words = match command {
        Command::Ping(_) | Command::Echo(_) => {
            return run_one(command, &mut [], &Encodings::default(), 0, false, false).0;
        }
        Command::Data(words) => words,
        _ => return Reply::err("this command is not a data command"),
    };
    let Some(spec) = lookup(&words[0]) else {
        return ferry_resp::command::unknown(words);
    };
    let keys: smallvec::SmallVec<[Bytes; 2]> = spec.keys(words).into_iter().cloned().collect();
    if let Err(refused) = check_keys(cluster, &keys) {
        return refused;
    }
    let now_us = crate::store_ctx::unix_time_us();
    let mut write = spec.is(WRITE) && writes_allowed;
    loop {
        let updated = tenant
            .store
            .update(table, &keys, write, &[], now_us / 1000, |slots, encodings| {
                let seed = ferry_keyspace::keys::fresh_seed(now_us);
                let mut keys = if write {
                    Keys::new(slots, now_us, seed, *encodings, writes_allowed)
                } else {
                    Keys::read_only(slots, now_us, seed, *encodings)
                };
                (
                    ferry_keyspace::exec::run_spec(spec, words, &mut keys),
                    keys.expired_met(),
                )
            });
        match updated {
            Ok(Some(Updated {
                outcome: (reply, expired_met),
                ..
            })) => {
                if expired_met && !write && writes_allowed {
                    // Again under write locks, so the expired key it met is deleted.
                    write = true;
                    continue;
                }
                return reply;
            }
            Ok(None) => return Reply::err("internal error: a command without WATCH was refused as watched"),
            Err(err) => return refusal(&err),
        }
    }
}

/// EXEC: the replies of the queued commands as an array, run as one step under the
/// locks of every key they name, or null when a watched key changed.
pub(crate) fn exec(cluster: Option<&ClusterRole>, tenant: &TenantState, table: &str, tx: &Transaction) -> Reply {
    let mut keys: Vec<Bytes> = Vec::new();
    for command in &tx.commands {
        match command {
            Command::Data(words) => keys.extend(keys_of(words)),
            Command::Blocking(blocking) => keys.extend(keys_of(&blocking.step)),
            _ => {}
        }
    }
    if let Err(refused) = check_keys(cluster, &keys) {
        return refused;
    }
    let watched: Vec<Watched<'_>> = tx
        .watched
        .iter()
        .map(|watched| Watched {
            table: &watched.table,
            key: &watched.key,
            token: watched.token,
        })
        .collect();
    let now_us = crate::store_ctx::unix_time_us();
    let updated = tenant
        .store
        .update(table, &keys, true, &watched, now_us / 1000, |slots, encodings| {
            tx.commands
                .iter()
                .map(|command| run_one(command, slots, encodings, now_us, true, true).0)
                .collect::<Vec<Reply>>()
        });
    match updated {
        Ok(Some(Updated { outcome, .. })) => Reply::Array(outcome),
        // A watched key changed: EXEC's null array, as Redis answers.
        Ok(None) => Reply::NullArray,
        Err(err) => refusal(&err),
    }
}

/// WATCH: each key's token (its version if it exists and has not expired), an integer or
/// null, in order.
pub(crate) fn watch(cluster: Option<&ClusterRole>, tenant: &TenantState, table: &str, keys: &[Bytes]) -> Reply {
    if let Err(refused) = check_keys(cluster, keys) {
        return refused;
    }
    let now_ms = crate::store_ctx::unix_time_us() / 1000;
    let mut tokens = Vec::with_capacity(keys.len());
    for key in keys {
        match tenant.store.watch_token(table, key, now_ms) {
            Ok(Some(version)) => tokens.push(Reply::Integer(version as i64)),
            Ok(None) => tokens.push(Reply::Null),
            Err(err) => return refusal(&err),
        }
    }
    Reply::Array(tokens)
}
