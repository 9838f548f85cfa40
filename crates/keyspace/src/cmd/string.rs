//! The string commands.

use bytes::{Bytes, BytesMut};
use ferry_resp::Reply;
use ferry_value::{Change, Entry, Value};

use crate::args::{float, int, is, syntax};
use crate::cmd::expiry::{expiry_option, ExpiryOption};
use crate::cmd::Outcome;
use crate::keys::Keys;

/// Longest string a command may build (Redis's `proto-max-bulk-len` default); the store's
/// own value limit refuses less.
pub const MAX_STRING_BYTES: usize = 512 * 1024 * 1024;

fn too_long() -> Reply {
    Reply::err("string exceeds maximum allowed size (proto-max-bulk-len)")
}

fn string_of(keys: &mut Keys, key: &[u8]) -> Result<Option<Bytes>, Reply> {
    keys.string(key)
}

fn bulk_or_null(value: Option<Bytes>) -> Reply {
    value.map_or(Reply::Null, Reply::Bulk)
}

/// GET key.
pub fn get(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    Ok(bulk_or_null(string_of(keys, &words[1])?))
}

/// SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL].
pub fn set(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let (key, value) = (&words[1], &words[2]);
    let (mut nx, mut xx, mut get) = (false, false, false);
    let mut expiry: Option<ExpiryOption> = None;
    let mut i = 3;
    while i < words.len() {
        let word = &words[i];
        if is(word, "NX") && !xx {
            nx = true;
        } else if is(word, "XX") && !nx {
            xx = true;
        } else if is(word, "GET") {
            get = true;
        } else if expiry.is_none() && is(word, "KEEPTTL") {
            expiry = Some(ExpiryOption::Keep);
        } else if expiry.is_none() && i + 1 < words.len() {
            match expiry_option(word, &words[i + 1], keys.now_ms(), "set")? {
                Some(option) => expiry = Some(option),
                None => return Err(syntax()),
            }
            i += 1;
        } else {
            return Err(syntax());
        }
        i += 1;
    }
    let old = keys.entry(key)?.cloned();
    let old_string = match old.as_ref().map(|entry| entry.value.string_bytes()) {
        Some(Some(bytes)) => Some(bytes),
        Some(None) if get => return Err(crate::keys::wrong_type()),
        _ => None,
    };
    let allowed = !(nx && old.is_some() || xx && old.is_none());
    if allowed {
        let expires_at_ms = match expiry {
            Some(ExpiryOption::Keep) => old.as_ref().and_then(|entry| entry.expires_at_ms),
            Some(ExpiryOption::At(at)) => Some(at),
            None => None,
        };
        keys.put(
            key,
            Some(Entry {
                value: Value::string(value.clone()),
                expires_at_ms,
            }),
        )?;
    }
    Ok(match (get, allowed) {
        (true, _) => bulk_or_null(old_string),
        (false, true) => Reply::ok(),
        (false, false) => Reply::Null,
    })
}

/// SETNX key value.
pub fn setnx(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    if keys.exists(&words[1])? {
        return Ok(Reply::Integer(0));
    }
    keys.put(&words[1], Some(Entry::string(words[2].clone())))?;
    Ok(Reply::Integer(1))
}

/// SETEX key seconds value, PSETEX key milliseconds value.
pub fn setex(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let unit = if is(&words[0], "psetex") { "PX" } else { "EX" };
    let name = String::from_utf8_lossy(&words[0]).to_ascii_lowercase();
    let Some(ExpiryOption::At(at)) = expiry_option(unit.as_bytes(), &words[2], keys.now_ms(), &name)? else {
        return Err(syntax());
    };
    keys.put(
        &words[1],
        Some(Entry {
            value: Value::string(words[3].clone()),
            expires_at_ms: Some(at),
        }),
    )?;
    Ok(Reply::ok())
}

/// GETSET key value.
pub fn getset(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let old = string_of(keys, &words[1])?;
    keys.put(&words[1], Some(Entry::string(words[2].clone())))?;
    Ok(bulk_or_null(old))
}

/// GETDEL key.
pub fn getdel(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let old = string_of(keys, &words[1])?;
    if old.is_some() {
        keys.take(&words[1])?;
    }
    Ok(bulk_or_null(old))
}

/// GETEX key [EX s|PX ms|EXAT s|PXAT ms|PERSIST].
pub fn getex(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let key = &words[1];
    let mut change: Option<Option<u64>> = None;
    let mut i = 2;
    while i < words.len() {
        if change.is_none() && is(&words[i], "PERSIST") {
            change = Some(None);
        } else if change.is_none() && i + 1 < words.len() {
            match expiry_option(&words[i], &words[i + 1], keys.now_ms(), "getex")? {
                Some(ExpiryOption::At(at)) => change = Some(Some(at)),
                _ => return Err(syntax()),
            }
            i += 1;
        } else {
            return Err(syntax());
        }
        i += 1;
    }
    let value = string_of(keys, key)?;
    if let (Some(_), Some(expires_at_ms)) = (&value, change) {
        let now_ms = keys.now_ms();
        if expires_at_ms.is_some_and(|at| at <= now_ms) {
            keys.take(key)?;
        } else {
            keys.set_expiry(key, expires_at_ms)?;
        }
    }
    Ok(bulk_or_null(value))
}

/// MGET key [key ...]: a key of another type reads as null.
pub fn mget(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let mut values = Vec::with_capacity(words.len() - 1);
    for key in &words[1..] {
        values.push(match keys.entry(key)?.and_then(|entry| entry.value.string_bytes()) {
            Some(bytes) => Reply::Bulk(bytes),
            None => Reply::Null,
        });
    }
    Ok(Reply::Array(values))
}

/// MSET key value [key value ...].
pub fn mset(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    if words.len().is_multiple_of(2) {
        return Err(ferry_resp::command::wrong_arity("mset"));
    }
    for pair in words[1..].chunks(2) {
        keys.put(&pair[0], Some(Entry::string(pair[1].clone())))?;
    }
    Ok(Reply::ok())
}

/// MSETNX key value [key value ...]: all or none.
pub fn msetnx(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    if words.len().is_multiple_of(2) {
        return Err(ferry_resp::command::wrong_arity("msetnx"));
    }
    for pair in words[1..].chunks(2) {
        if keys.exists(&pair[0])? {
            return Ok(Reply::Integer(0));
        }
    }
    mset(keys, words)?;
    Ok(Reply::Integer(1))
}

/// APPEND key value.
pub fn append(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let len = string_of(keys, &words[1])?.map_or(0, |old| old.len()) + words[2].len();
    if len > MAX_STRING_BYTES {
        return Err(too_long());
    }
    // Logged as the bytes appended, not the string.
    keys.change(&words[1], Change::Append(words[2].clone()))?;
    Ok(Reply::Integer(len as i64))
}

/// Stores a string, keeping the key's expiry (SETRANGE, INCR and the others keep it in
/// Redis).
fn set_keeping_expiry(keys: &mut Keys, key: &[u8], value: Value) -> Result<(), Reply> {
    let expires_at_ms = keys.entry(key)?.and_then(|entry| entry.expires_at_ms);
    keys.put(key, Some(Entry { value, expires_at_ms }))
}

/// STRLEN key.
pub fn strlen(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    Ok(Reply::Integer(
        string_of(keys, &words[1])?.map_or(0, |v| v.len() as i64),
    ))
}

/// GETRANGE key start end (and SUBSTR, its old name).
pub fn getrange(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let (start, end) = (int(&words[2])?, int(&words[3])?);
    let value = string_of(keys, &words[1])?.unwrap_or_default();
    // Redis: a negative start past a negative end selects nothing, even when clamped.
    if start < 0 && end < 0 && start > end {
        return Ok(Reply::Bulk(Bytes::new()));
    }
    Ok(Reply::Bulk(match crate::args::index_range(start, end, value.len()) {
        Some((from, to)) => value.slice(from..=to),
        None => Bytes::new(),
    }))
}

/// SETRANGE key offset value.
pub fn setrange(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let offset = int(&words[2])?;
    if offset < 0 {
        return Err(Reply::err("offset is out of range"));
    }
    let offset = offset as usize;
    let patch = &words[3];
    let old = string_of(keys, &words[1])?;
    if patch.is_empty() {
        return Ok(Reply::Integer(old.map_or(0, |v| v.len() as i64)));
    }
    if offset.saturating_add(patch.len()) > MAX_STRING_BYTES {
        return Err(too_long());
    }
    let old = old.unwrap_or_default();
    let mut value = BytesMut::from(&old[..]);
    if value.len() < offset + patch.len() {
        value.resize(offset + patch.len(), 0);
    }
    value[offset..offset + patch.len()].copy_from_slice(patch);
    let len = value.len();
    // SETRANGE leaves a buffer (`raw`), whatever its bytes, as in Redis.
    set_keeping_expiry(keys, &words[1], Value::Str(value.freeze()))?;
    Ok(Reply::Integer(len as i64))
}

/// INCR, DECR, INCRBY, DECRBY.
pub fn incrby(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let name = &words[0];
    let delta = if is(name, "incr") {
        1
    } else if is(name, "decr") {
        -1
    } else if is(name, "incrby") {
        int(&words[2])?
    } else {
        int(&words[2])?
            .checked_neg()
            .ok_or_else(|| Reply::err("decrement would overflow"))?
    };
    let current = match string_of(keys, &words[1])? {
        None => 0,
        Some(text) => crate::args::parse_i64(&text).ok_or_else(crate::args::not_integer)?,
    };
    let next = current
        .checked_add(delta)
        .ok_or_else(|| Reply::err("increment or decrement would overflow"))?;
    set_keeping_expiry(keys, &words[1], Value::Int(next))?;
    Ok(Reply::Integer(next))
}

/// INCRBYFLOAT key increment.
pub fn incrbyfloat(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let delta = float(&words[2])?;
    let current = match string_of(keys, &words[1])? {
        None => 0.0,
        Some(text) => crate::args::parse_f64(&text).ok_or_else(crate::args::not_float)?,
    };
    let next = current + delta;
    if !next.is_finite() {
        return Err(Reply::err("increment would produce NaN or Infinity"));
    }
    let text = crate::args::format_human(next);
    set_keeping_expiry(keys, &words[1], Value::Str(text.clone()))?;
    Ok(Reply::Bulk(text))
}
