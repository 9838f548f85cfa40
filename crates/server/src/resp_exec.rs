//! RESP data commands against a tenant's tables: GET, SET (NX, XX, GET), DEL, EXISTS,
//! MGET, MSET and INCR/DECR[BY] as read-modify-write transactions.
//!
//! Each runs to completion on the connection's I/O thread: they are bounded (one key, or
//! one multi-key transaction under the store's ordered shard locks), as the data
//! operations the node runs inline for the ferry protocol are. The selected database `n`
//! is the table `db<n>`, so `ferry kv get db0 KEY` sees what `SET KEY` wrote.

use bytes::Bytes;

use ferry_resp::command::{expiry_refused, incr_delta, incremented, SetCondition};
use ferry_resp::{Command, Reply};
use ferry_store::{ObjectRef, StoreError, WriteRef};

use crate::node::TenantState;

/// Attempts of one conditional SET or INCR before it gives up under contention.
pub const MAX_RMW_ATTEMPTS: u32 = 16;

fn store_error(err: StoreError) -> Reply {
    Reply::err(err)
}

/// Runs a data command (the caller answers the session commands itself).
pub(crate) fn execute(tenant: &TenantState, table: &str, command: Command) -> Reply {
    let store = &tenant.store;
    match command {
        Command::Get(key) => match store.get(table, &key) {
            Ok(Some((_, value))) => Reply::Bulk(value),
            Ok(None) => Reply::Null,
            Err(err) => store_error(err),
        },
        Command::Set {
            key,
            value,
            condition,
            get,
            expiry,
        } => {
            if let Some(option) = expiry {
                return expiry_refused(&option);
            }
            set(tenant, table, &key, &value, condition, get)
        }
        Command::Del(keys) => {
            let mut removed = 0;
            for key in &keys {
                match store.delete(table, key) {
                    Ok(Some(_)) => removed += 1,
                    Ok(None) => {}
                    Err(err) => return store_error(err),
                }
            }
            Reply::Integer(removed)
        }
        Command::Exists(keys) => {
            let mut found = 0;
            for key in &keys {
                match store.get(table, key) {
                    Ok(Some(_)) => found += 1,
                    Ok(None) => {}
                    Err(err) => return store_error(err),
                }
            }
            Reply::Integer(found)
        }
        Command::MGet(keys) => {
            let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
            match store.read_validated(table, &refs, &[]) {
                Ok(values) => Reply::Array(
                    values
                        .into_iter()
                        .map(|value| value.map_or(Reply::Null, |(_, v)| Reply::Bulk(v)))
                        .collect(),
                ),
                Err(err) => store_error(err),
            }
        }
        Command::MSet(pairs) => {
            let writes: Vec<WriteRef<'_>> = pairs
                .iter()
                .map(|(key, value)| WriteRef {
                    table,
                    key,
                    value: Some(value),
                })
                .collect();
            match store.commit(&[], &writes) {
                Ok(_) => Reply::ok(),
                Err(err) => store_error(err),
            }
        }
        Command::IncrBy { key, delta, negate } => incr_by(tenant, table, &key, &delta, negate),
        _ => Reply::err("not a data command"),
    }
}

/// SET with its condition as one transaction: the key's version read, then the write
/// committed only if that version still holds.
fn set(
    tenant: &TenantState,
    table: &str,
    key: &Bytes,
    value: &Bytes,
    condition: Option<SetCondition>,
    get: bool,
) -> Reply {
    let store = &tenant.store;
    if condition.is_none() && !get {
        return match store.put(table, key, value) {
            Ok(_) => Reply::ok(),
            Err(err) => store_error(err),
        };
    }
    for _ in 0..MAX_RMW_ATTEMPTS {
        let old = match store.get(table, key) {
            Ok(old) => old,
            Err(err) => return store_error(err),
        };
        let allowed = SetCondition::allows(condition, old.is_some());
        let previous = || old.clone().map_or(Reply::Null, |(_, v)| Reply::Bulk(v));
        if !allowed {
            return if get { previous() } else { Reply::Null };
        }
        let version = old
            .as_ref()
            .map_or(ferry_store::VERSION_ABSENT, |(version, _)| *version);
        let read = [ObjectRef { table, key, version }];
        let write = [WriteRef {
            table,
            key,
            value: Some(value),
        }];
        match store.commit(&read, &write) {
            Ok(_) => return if get { previous() } else { Reply::ok() },
            Err(StoreError::Conflict { .. }) => continue,
            Err(err) => return store_error(err),
        }
    }
    Reply::err(format!(
        "SET gave up after {MAX_RMW_ATTEMPTS} conflicting attempts; retry"
    ))
}

/// INCRBY as a read-modify-write transaction, retried on conflict.
fn incr_by(tenant: &TenantState, table: &str, key: &Bytes, delta: &Bytes, negate: bool) -> Reply {
    let delta = match incr_delta(delta, negate) {
        Ok(delta) => delta,
        Err(reply) => return reply,
    };
    let store = &tenant.store;
    for _ in 0..MAX_RMW_ATTEMPTS {
        let (version, current) = match store.get(table, key) {
            Ok(Some((version, value))) => (version, Some(value)),
            Ok(None) => (ferry_store::VERSION_ABSENT, None),
            Err(err) => return store_error(err),
        };
        let next = match incremented(current.as_deref(), delta) {
            Ok(next) => next,
            Err(reply) => return reply,
        };
        let text = next.to_string();
        let read = [ObjectRef { table, key, version }];
        let write = [WriteRef {
            table,
            key,
            value: Some(text.as_bytes()),
        }];
        match store.commit(&read, &write) {
            Ok(_) => return Reply::Integer(next),
            Err(StoreError::Conflict { .. }) => continue,
            Err(err) => return store_error(err),
        }
    }
    Reply::err(format!(
        "INCR gave up after {MAX_RMW_ATTEMPTS} conflicting attempts; retry"
    ))
}
