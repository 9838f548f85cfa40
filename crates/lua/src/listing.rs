//! The commands over a whole database inside a script: KEYS, SCAN, DBSIZE and RANDOMKEY
//! over the listing of the script's database, FLUSHDB and FLUSHALL as a delete of every key
//! listed. The listing comes from the invocation's `Ctx` (`Ctx::list`), so it shows the
//! script's own writes and joins its read set: a key another client creates or removes
//! meanwhile makes the invocation conflict and run again, as a changed key does. A flush
//! deletes within the transaction, so it is bounded by the keys one invocation may write
//! (`ferry_func::tx::MAX_TX_ENTRIES`).

use bytes::Bytes;

use ferry_func::{Ctx, CtxError, Listed};
use ferry_keyspace::database;
use ferry_resp::config::{database_table, DATABASES};
use ferry_resp::Reply;
use ferry_value::{Entry, DEFAULT_ENCODINGS};

/// Runs the database command `words` (arity checked by the command table) for a script
/// over `table`; `None` for one that has no meaning in a script (OBJECT, MEMORY).
pub async fn run(ctx: &mut dyn Ctx, table: &str, words: &[Bytes]) -> Result<Option<Reply>, CtxError> {
    let name = String::from_utf8_lossy(&words[0]).to_ascii_lowercase();
    match name.as_str() {
        "keys" | "scan" | "dbsize" | "randomkey" => {
            let listed = ctx.list(&[table.to_string()]).await?;
            let keys: Vec<database::Listed> = listed.into_iter().flatten().map(shown).collect();
            let now_us = ctx.now_us();
            let seed = ferry_keyspace::keys::fresh_seed(now_us);
            Ok(Some(database::run(words, &keys, now_us / 1000, seed)))
        }
        "flushdb" | "flushall" => {
            match &words[1..] {
                [] => {}
                [mode] if mode.eq_ignore_ascii_case(b"ASYNC") || mode.eq_ignore_ascii_case(b"SYNC") => {}
                _ => return Ok(Some(Reply::err("syntax error"))),
            }
            let tables: Vec<String> = if name == "flushdb" {
                vec![table.to_string()]
            } else {
                (0..DATABASES).map(database_table).collect()
            };
            let listed = ctx.list(&tables).await?;
            for (table, keys) in tables.iter().zip(listed) {
                for key in keys {
                    ctx.delete(table, key.key()).await?;
                }
            }
            Ok(Some(Reply::ok()))
        }
        _ => Ok(None),
    }
}

/// A listed key as the database commands take it: a value's type and expiry read from its
/// bytes when the listing carries them.
fn shown(listed: Listed) -> database::Listed {
    match listed {
        Listed::Known(known) => database::Listed {
            key: known.key,
            type_name: known.type_name,
            expires_at_ms: known.expires_at_ms,
        },
        Listed::Value { key, value } => {
            let entry = Entry::decode(&value, &DEFAULT_ENCODINGS);
            database::Listed {
                key,
                type_name: entry.value.type_name(),
                expires_at_ms: entry.expires_at_ms,
            }
        }
    }
}
