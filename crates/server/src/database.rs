//! The commands over a whole database on the node that holds it: KEYS, SCAN, DBSIZE and
//! RANDOMKEY read the table's objects and answer with `ferry_keyspace::database`;
//! FLUSHDB and FLUSHALL delete the tenant's own objects (FLUSHALL: of every database,
//! the tables `db0` … `db1023`; the function libraries stay, as in Redis).
//!
//! A flush is a series of commits of at most [`FLUSH_BATCH_KEYS`] deletions, each logged
//! and replicated like any commit: a write that lands during a flush of a large database
//! may survive it (Redis's flush is one atomic step; this one is not). In a cluster a key
//! of a slot being moved refuses the flush with the move's error, and a key this node no
//! longer owns is left to the move that removes it.

use bytes::Bytes;

use ferry_keyspace::database::Listed;
use ferry_resp::Reply;
use ferry_store::WriteRef;

use crate::node::TenantState;
use crate::routing::ClusterRole;

/// Most deletions of one commit of a flush (well under the store's transaction bound).
pub const FLUSH_BATCH_KEYS: usize = 1024;

/// Runs the database command `words` (arity checked by the command table) over `table`.
pub(crate) fn run(cluster: Option<&ClusterRole>, tenant: &TenantState, table: &str, words: &[Bytes]) -> Reply {
    let name = String::from_utf8_lossy(&words[0]).to_ascii_lowercase();
    match name.as_str() {
        "flushdb" | "flushall" => {
            match &words[1..] {
                [] => {}
                [mode] if mode.eq_ignore_ascii_case(b"ASYNC") || mode.eq_ignore_ascii_case(b"SYNC") => {}
                _ => return Reply::err("syntax error"),
            }
            let tables = if name == "flushdb" {
                vec![table.to_string()]
            } else {
                tenant
                    .store
                    .table_names()
                    .into_iter()
                    .filter(|t| is_database(t))
                    .collect()
            };
            for table in &tables {
                if let Err(reply) = flush(cluster, tenant, table) {
                    return reply;
                }
            }
            Reply::ok()
        }
        _ => {
            let now_us = crate::store_ctx::unix_time_us();
            let listed: Vec<Listed> = tenant
                .store
                .objects(table)
                .into_iter()
                .map(|info| Listed {
                    key: info.key,
                    type_name: info.type_name,
                    expires_at_ms: info.expires_at_ms,
                })
                .collect();
            ferry_keyspace::database::run(words, &listed, now_us / 1000, now_us.rotate_left(17))
        }
    }
}

/// Whether `table` is one of RESP's databases (`db<n>`, n < 1024, as SELECT names them).
pub(crate) fn is_database(table: &str) -> bool {
    table
        .strip_prefix("db")
        .and_then(|n| n.parse::<u32>().ok())
        .is_some_and(|n| n < ferry_net::resp::MAX_DATABASES && table == ferry_net::resp::table_of(n))
}

/// Deletes every object of `table` this node owns.
fn flush(cluster: Option<&ClusterRole>, tenant: &TenantState, table: &str) -> Result<(), Reply> {
    let mut keys: Vec<Bytes> = tenant.store.objects(table).into_iter().map(|info| info.key).collect();
    if let Some(role) = cluster {
        if let Some(why) = keys.iter().find_map(|key| crate::routing::frozen(role, key)) {
            return Err(Reply::Error(why));
        }
        keys.retain(|key| crate::routing::not_owned(role, key).is_none());
    }
    for batch in keys.chunks(FLUSH_BATCH_KEYS) {
        let writes: Vec<WriteRef<'_>> = batch.iter().map(|key| WriteRef::delete(table, key)).collect();
        // No reads: deleting what is there, whatever its version, cannot conflict.
        tenant
            .store
            .commit(&[], &writes)
            .map_err(|err| ferry_lua::resp::error_reply(&err.to_string()))?;
    }
    Ok(())
}
