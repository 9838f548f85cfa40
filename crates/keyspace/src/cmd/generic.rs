//! Commands on keys of any type: DEL, UNLINK, EXISTS, TYPE, TOUCH, RENAME, RENAMENX, COPY;
//! and TIME, which reads the command's own time (so a script sees one time throughout).

use bytes::Bytes;
use ferry_resp::Reply;

use crate::args::{is, syntax};
use crate::cmd::Outcome;
use crate::keys::Keys;

/// DEL and UNLINK key [key ...] (UNLINK frees nothing later: a value is freed when its
/// last reader drops it, off the command's path already).
pub fn del(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let mut removed = 0;
    for key in &words[1..] {
        removed += i64::from(keys.take(key)?.is_some());
    }
    Ok(Reply::Integer(removed))
}

/// EXISTS key [key ...]: a key named twice counts twice, as in Redis.
pub fn exists(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let mut found = 0;
    for key in &words[1..] {
        found += i64::from(keys.exists(key)?);
    }
    Ok(Reply::Integer(found))
}

/// TIME: seconds and microseconds since the Unix epoch, as bulk strings.
pub fn time(keys: &mut Keys, _words: &[Bytes]) -> Outcome {
    let now_us = keys.now_us();
    Ok(Reply::Array(vec![
        Reply::Bulk(Bytes::from((now_us / 1_000_000).to_string())),
        Reply::Bulk(Bytes::from((now_us % 1_000_000).to_string())),
    ]))
}

/// TOUCH key [key ...]: how many exist (ferry keeps no access times to update).
pub fn touch(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    exists(keys, words)
}

/// TYPE key.
pub fn type_of(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    Ok(Reply::Simple(
        keys.entry(&words[1])?
            .map_or("none", |entry| entry.value.type_name())
            .into(),
    ))
}

/// RENAME and RENAMENX source destination: the value and its expiry move.
pub fn rename(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let nx = is(&words[0], "renamenx");
    let (source, destination) = (&words[1], &words[2]);
    if !keys.exists(source)? {
        return Err(Reply::err("no such key"));
    }
    if source == destination {
        return Ok(if nx { Reply::Integer(0) } else { Reply::ok() });
    }
    if nx && keys.exists(destination)? {
        return Ok(Reply::Integer(0));
    }
    let entry = keys.take(source)?;
    keys.put(destination, entry)?;
    Ok(if nx { Reply::Integer(1) } else { Reply::ok() })
}

/// COPY source destination [DB n] [REPLACE].
pub fn copy(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let mut replace = false;
    let mut i = 3;
    while i < words.len() {
        if is(&words[i], "REPLACE") {
            replace = true;
        } else if is(&words[i], "DB") && i + 1 < words.len() {
            // Databases are the connection's table; COPY stays within it.
            return Err(Reply::err("COPY to another database is not supported by ferry"));
        } else {
            return Err(syntax());
        }
        i += 1;
    }
    let (source, destination) = (&words[1], &words[2]);
    let Some(entry) = keys.entry(source)?.cloned() else {
        return Ok(Reply::Integer(0));
    };
    if source == destination {
        return Err(Reply::err("source and destination objects are the same"));
    }
    if keys.exists(destination)? && !replace {
        return Ok(Reply::Integer(0));
    }
    keys.put(destination, Some(entry))?;
    Ok(Reply::Integer(1))
}
