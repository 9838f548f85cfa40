//! The commands over a whole database on the node that holds it: KEYS, SCAN, DBSIZE and
//! RANDOMKEY read the table's objects and answer with `ferry_keyspace::database`; OBJECT
//! reads one stored object's encoding and access stamp;
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
        "object" => object(cluster, tenant, table, words),
        "memory" => memory(cluster, tenant, table, words),
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
            ferry_keyspace::database::run(words, &listed, now_us / 1000, mixed(now_us))
        }
    }
}

/// Redis's words for OBJECT FREQ when no LFU policy is in force.
const NO_LFU: &str = "An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";

/// Redis's words for OBJECT IDLETIME under an LFU policy.
const LFU: &str = "An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";

/// OBJECT ENCODING|FREQ|IDLETIME|REFCOUNT key, and OBJECT HELP.
fn object(cluster: Option<&ClusterRole>, tenant: &TenantState, table: &str, words: &[Bytes]) -> Reply {
    let sub = String::from_utf8_lossy(&words[1]).to_ascii_uppercase();
    if sub == "HELP" && words.len() == 2 {
        return Reply::Array(
            [
                "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "ENCODING <key>",
                "    Return the kind of internal representation used in order to store the value",
                "    associated with a <key>.",
                "FREQ <key>",
                "    Return the access frequency index of the <key>. The returned integer is",
                "    proportional to the logarithm of the recent access frequency of the key.",
                "IDLETIME <key>",
                "    Return the idle time of the <key>, that is the approximated number of",
                "    seconds elapsed since the last access to the key.",
                "REFCOUNT <key>",
                "    Return the number of references of the value associated with the specified",
                "    <key>.",
                "HELP",
                "    Print this help.",
            ]
            .into_iter()
            .map(|line| Reply::Simple(line.into()))
            .collect(),
        );
    }
    let known = ["ENCODING", "FREQ", "IDLETIME", "REFCOUNT"].contains(&sub.as_str());
    if !known || words.len() != 3 {
        return Reply::err(format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try OBJECT HELP.",
            String::from_utf8_lossy(&words[1]).chars().take(64).collect::<String>()
        ));
    }
    let key = &words[2];
    if let Some(role) = cluster {
        if let Some(why) = crate::routing::not_owned(role, key) {
            return Reply::err(why);
        }
    }
    let now_ms = crate::store_ctx::unix_time_us() / 1000;
    let info = match tenant.store.object_info(table, key, now_ms) {
        Ok(Some(info)) => info,
        Ok(None) => return Reply::Null,
        Err(err) => return ferry_lua::resp::error_reply(&err.to_string()),
    };
    match sub.as_str() {
        "ENCODING" => Reply::text(info.encoding),
        "FREQ" => info
            .frequency
            .map_or_else(|| Reply::err(NO_LFU), |f| Reply::Integer(i64::from(f))),
        "IDLETIME" => info
            .idle_ms
            .map_or_else(|| Reply::err(LFU), |ms| Reply::Integer((ms / 1000) as i64)),
        _ => Reply::Integer(info.refcount as i64),
    }
}

/// MEMORY USAGE key [SAMPLES count], and MEMORY HELP: what a key costs against the
/// tenant's memory limit (its key, its value as held, the per-object overhead; ferry
/// counts a collection's encoding whole, so SAMPLES changes nothing).
fn memory(cluster: Option<&ClusterRole>, tenant: &TenantState, table: &str, words: &[Bytes]) -> Reply {
    let sub = String::from_utf8_lossy(&words[1]).to_ascii_uppercase();
    match (sub.as_str(), &words[2..]) {
        ("HELP", []) => Reply::Array(
            [
                "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "USAGE <key> [SAMPLES <count>]",
                "    Return memory in bytes used by <key> and its value, as counted against the tenant's limit.",
                "HELP",
                "    Print this help.",
            ]
            .into_iter()
            .map(|line| Reply::Simple(line.into()))
            .collect(),
        ),
        ("USAGE", [key, rest @ ..]) => {
            match rest {
                [] => {}
                [option, count] if option.eq_ignore_ascii_case(b"SAMPLES") => {
                    let count = std::str::from_utf8(count).ok().and_then(|c| c.parse::<i64>().ok());
                    if count.is_none_or(|c| c < 0) {
                        return Reply::err("value is out of range, must be positive");
                    }
                }
                _ => return ferry_resp::command::syntax_error(),
            }
            if let Some(role) = cluster {
                if let Some(why) = crate::routing::not_owned(role, key) {
                    return Reply::err(why);
                }
            }
            let now_ms = crate::store_ctx::unix_time_us() / 1000;
            match tenant.store.object_info(table, key, now_ms) {
                Ok(Some(info)) => Reply::Integer(info.memory_bytes as i64),
                Ok(None) => Reply::Null,
                Err(err) => ferry_lua::resp::error_reply(&err.to_string()),
            }
        }
        _ => Reply::err(format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try MEMORY HELP.",
            String::from_utf8_lossy(&words[1]).chars().take(64).collect::<String>()
        )),
    }
}

/// A well-spread seed from the time (splitmix64's finalizer): RANDOMKEY picks by it, and
/// the microseconds' low bits alone pick the same key call after call.
fn mixed(now_us: u64) -> u64 {
    let mut z = now_us.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
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
