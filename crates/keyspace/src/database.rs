//! The commands over a whole database (KEYS, SCAN, DBSIZE, RANDOMKEY) as pure functions
//! of its keys at a given time: the caller hands over every key with its type and expiry
//! ([`Listed`]), in any order. Expired keys are left out (the commands that meet them on their
//! own keys delete them).
//!
//! SCAN's cursor is a position in the order of a fixed 63-bit hash of the key: a call
//! returns the keys whose hash is at or after the cursor, fewest first, at least COUNT of
//! them (all keys of the last hash reached, so a collision never splits), and the next
//! cursor is one past the last hash returned (0 when none is left). A key present for the
//! whole scan keeps its hash, so exactly one call returns it, whatever else is added or
//! removed meanwhile; this is the guarantee Redis gives. Each call reads every key of the
//! database (O(n)), which Redis avoids by walking its own hash table.

use bytes::Bytes;
use ferry_resp::Reply;

use crate::args::{int, is, syntax};
use ferry_resp::glob;

/// A key of a database as the commands over a whole database see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    /// The key.
    pub key: Bytes,
    /// Its TYPE.
    pub type_name: &'static str,
    /// When it expires (ms since the Unix epoch).
    pub expires_at_ms: Option<u64>,
}

/// SCAN's COUNT when none is given (Redis's).
pub const DEFAULT_SCAN_COUNT: usize = 10;

/// Most keys one SCAN call returns however large its COUNT, which bounds its reply.
pub const MAX_SCAN_COUNT: usize = 100_000;

/// The keys' hash for SCAN's order: fixed seeds, so a cursor means the same on every call.
fn scan_hash(key: &[u8]) -> u64 {
    ahash::RandomState::with_seeds(0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344).hash_one(key) >> 1
}

/// The live keys of `objects` at `now_ms` with their type names.
fn live(objects: &[Listed], now_ms: u64) -> impl Iterator<Item = (&Bytes, &'static str)> {
    objects.iter().filter_map(move |listed| match listed.expires_at_ms {
        Some(at) if at <= now_ms => None,
        _ => Some((&listed.key, listed.type_name)),
    })
}

/// Runs the database command `words` (KEYS, SCAN, DBSIZE or RANDOMKEY; arity checked by
/// the command table) over `objects` at `now_ms`; `seed` picks RANDOMKEY's key.
pub fn run(words: &[Bytes], objects: &[Listed], now_ms: u64, seed: u64) -> Reply {
    let name = String::from_utf8_lossy(&words[0]).to_ascii_lowercase();
    let outcome = match name.as_str() {
        "keys" => Ok(Reply::Array(
            live(objects, now_ms)
                .filter(|(key, _)| glob::matches(&words[1], key))
                .map(|(key, _)| Reply::Bulk(key.clone()))
                .collect(),
        )),
        "dbsize" => Ok(Reply::Integer(live(objects, now_ms).count() as i64)),
        "randomkey" => {
            let keys: Vec<&Bytes> = live(objects, now_ms).map(|(key, _)| key).collect();
            Ok(match keys.len() {
                0 => Reply::Null,
                n => Reply::Bulk(keys[(seed % n as u64) as usize].clone()),
            })
        }
        "scan" => scan(words, objects, now_ms),
        _ => Err(Reply::err(format!("'{name}' is not a database command"))),
    };
    outcome.unwrap_or_else(|error| error)
}

/// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type].
fn scan(words: &[Bytes], objects: &[Listed], now_ms: u64) -> Result<Reply, Reply> {
    let cursor = std::str::from_utf8(&words[1])
        .ok()
        .and_then(|c| c.parse::<u64>().ok())
        .ok_or_else(|| Reply::err("invalid cursor"))?;
    let (mut pattern, mut count, mut type_name) = (None, DEFAULT_SCAN_COUNT, None);
    let mut options = words[2..].chunks(2);
    for pair in &mut options {
        let [option, value] = pair else { return Err(syntax()) };
        if is(option, "MATCH") {
            pattern = Some(value);
        } else if is(option, "COUNT") {
            count = usize::try_from(int(value)?)
                .ok()
                .filter(|c| *c >= 1)
                .ok_or_else(syntax)?
                .min(MAX_SCAN_COUNT);
        } else if is(option, "TYPE") {
            type_name = Some(String::from_utf8_lossy(value).to_ascii_lowercase());
        } else {
            return Err(syntax());
        }
    }
    let mut ahead: Vec<(u64, &Bytes, &'static str)> = live(objects, now_ms)
        .map(|(key, type_name)| (scan_hash(key), key, type_name))
        .filter(|(hash, _, _)| *hash >= cursor)
        .collect();
    let next = if ahead.len() > count {
        ahead.select_nth_unstable_by_key(count - 1, |(hash, _, _)| *hash);
        let last = ahead[..count].iter().map(|(hash, _, _)| *hash).max().unwrap_or(cursor);
        let ahead_before = ahead.len();
        ahead.retain(|(hash, _, _)| *hash <= last);
        // Every key of hash `last` is in this batch, so the next call starts past it.
        if ahead.len() < ahead_before {
            last + 1
        } else {
            0
        }
    } else {
        0
    };
    let keys = ahead
        .into_iter()
        .filter(|(_, key, _)| pattern.is_none_or(|p| glob::matches(p, key)))
        .filter(|(_, _, t)| type_name.as_deref().is_none_or(|wanted| wanted == *t))
        .map(|(_, key, _)| Reply::Bulk(key.clone()))
        .collect();
    Ok(Reply::Array(vec![
        Reply::Bulk(Bytes::from(next.to_string())),
        Reply::Array(keys),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn b(text: &str) -> Bytes {
        Bytes::copy_from_slice(text.as_bytes())
    }

    fn words(text: &str) -> Vec<Bytes> {
        text.split(' ').map(b).collect()
    }

    fn listed(key: &str, type_name: &'static str, expires_at_ms: Option<u64>) -> Listed {
        Listed {
            key: b(key),
            type_name,
            expires_at_ms,
        }
    }

    fn objects(n: usize) -> Vec<Listed> {
        (0..n).map(|i| listed(&format!("key:{i}"), "string", None)).collect()
    }

    /// Every key a full scan of `objects` returns, and how many calls it took.
    fn full_scan(objects: &[Listed], count: usize) -> (Vec<Bytes>, usize) {
        let (mut cursor, mut seen, mut calls) = ("0".to_string(), Vec::new(), 0);
        loop {
            calls += 1;
            let reply = run(&words(&format!("SCAN {cursor} COUNT {count}")), objects, 0, 0);
            let Reply::Array(parts) = reply else {
                panic!("{reply:?}")
            };
            let (Reply::Bulk(next), Reply::Array(keys)) = (&parts[0], &parts[1]) else {
                panic!()
            };
            seen.extend(keys.iter().map(|k| match k {
                Reply::Bulk(k) => k.clone(),
                other => panic!("{other:?}"),
            }));
            cursor = String::from_utf8(next.to_vec()).unwrap();
            if cursor == "0" {
                return (seen, calls);
            }
        }
    }

    #[test]
    fn a_full_scan_returns_every_key_once_in_batches() {
        let objects = objects(1000);
        let (seen, calls) = full_scan(&objects, 10);
        let unique: BTreeSet<&Bytes> = seen.iter().collect();
        assert_eq!(seen.len(), 1000);
        assert_eq!(unique.len(), 1000);
        assert!((90..=110).contains(&calls), "{calls} calls");
    }

    #[test]
    fn keys_present_throughout_are_returned_while_others_come_and_go() {
        let mut objects = objects(500);
        let (mut cursor, mut seen) = ("0".to_string(), BTreeSet::new());
        for round in 0.. {
            // Churn: a key added and one removed between every two calls.
            objects.push(listed(&format!("new:{round}"), "string", None));
            if round % 2 == 0 {
                objects.retain(|o| o.key != b(&format!("new:{}", round / 2)));
            }
            let reply = run(&words(&format!("SCAN {cursor}")), &objects, 0, 0);
            let Reply::Array(parts) = reply else { panic!() };
            let (Reply::Bulk(next), Reply::Array(keys)) = (&parts[0], &parts[1]) else {
                panic!()
            };
            seen.extend(keys.iter().map(|k| format!("{k:?}")));
            cursor = String::from_utf8(next.to_vec()).unwrap();
            if cursor == "0" {
                break;
            }
        }
        for i in 0..500 {
            assert!(
                seen.contains(&format!("{:?}", Reply::Bulk(b(&format!("key:{i}"))))),
                "key:{i} missed"
            );
        }
    }

    #[test]
    fn expired_keys_are_left_out_and_filters_apply() {
        let objects = vec![
            listed("s", "string", None),
            listed("h", "hash", None),
            listed("gone", "string", Some(100)),
        ];
        assert_eq!(run(&words("DBSIZE"), &objects, 50, 0), Reply::Integer(3));
        assert_eq!(run(&words("DBSIZE"), &objects, 100, 0), Reply::Integer(2));
        assert_eq!(
            run(&words("KEYS *"), &objects, 100, 0),
            Reply::Array(vec![Reply::Bulk(b("s")), Reply::Bulk(b("h"))])
        );
        assert_eq!(run(&words("KEYS g*"), &objects, 100, 0), Reply::Array(vec![]));
        let Reply::Array(parts) = run(&words("SCAN 0 COUNT 100 TYPE hash"), &objects, 100, 0) else {
            panic!()
        };
        assert_eq!(parts[1], Reply::Array(vec![Reply::Bulk(b("h"))]));
        assert_eq!(run(&words("RANDOMKEY"), &[], 0, 7), Reply::Null);
        assert!(matches!(run(&words("RANDOMKEY"), &objects, 100, 7), Reply::Bulk(k) if k != b("gone")));
    }

    #[test]
    fn bad_cursors_and_options_are_refused() {
        let objects = objects(3);
        for bad in ["SCAN x", "SCAN -1", "SCAN 0 COUNT 0", "SCAN 0 COUNT", "SCAN 0 LIMIT 3"] {
            assert!(matches!(run(&words(bad), &objects, 0, 0), Reply::Error(_)), "{bad}");
        }
    }
}
