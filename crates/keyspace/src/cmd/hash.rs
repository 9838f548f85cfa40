//! The hash commands.

use bytes::Bytes;
use ferry_resp::Reply;

use crate::args::{bulk, owned};
use crate::args::{float, int, is, parse_f64, parse_i64};
use crate::cmd::scan::{scan_args, scan_reply};
use crate::cmd::{random_picks, Outcome};
use crate::keys::{as_type, Keys};

fn wrong_arity(name: &Bytes) -> Reply {
    ferry_resp::command::wrong_arity(&String::from_utf8_lossy(name))
}

/// HSET key field value [field value ...] (and HMSET, which replies OK).
pub fn hset(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    if !words.len().is_multiple_of(2) {
        return Err(wrong_arity(&words[0]));
    }
    let mut added = 0;
    for pair in words[2..].chunks(2) {
        added += i64::from(keys.hset(&words[1], &pair[0], &pair[1])?);
    }
    Ok(if is(&words[0], "hmset") {
        Reply::ok()
    } else {
        Reply::Integer(added)
    })
}

/// HSETNX key field value.
pub fn hsetnx(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    if keys
        .read(&words[1], as_type::hash)?
        .is_some_and(|hash| hash.contains(&words[2]))
    {
        return Ok(Reply::Integer(0));
    }
    keys.hset(&words[1], &words[2], &words[3])?;
    Ok(Reply::Integer(1))
}

/// HGET key field.
pub fn hget(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    Ok(keys
        .read(&words[1], as_type::hash)?
        .and_then(|hash| hash.get(&words[2]))
        .map_or(Reply::Null, bulk))
}

/// HMGET key field [field ...].
pub fn hmget(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let hash = keys.read(&words[1], as_type::hash)?;
    Ok(Reply::Array(
        words[2..]
            .iter()
            .map(|field| hash.and_then(|h| h.get(field)).map_or(Reply::Null, bulk))
            .collect(),
    ))
}

/// HDEL key field [field ...].
pub fn hdel(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let mut removed = 0;
    for field in &words[2..] {
        removed += i64::from(keys.hdel(&words[1], field)?);
    }
    Ok(Reply::Integer(removed))
}

/// HLEN key.
pub fn hlen(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    Ok(Reply::Integer(
        keys.read(&words[1], as_type::hash)?.map_or(0, |h| h.len() as i64),
    ))
}

/// HSTRLEN key field.
pub fn hstrlen(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    Ok(Reply::Integer(
        keys.read(&words[1], as_type::hash)?
            .and_then(|h| h.get(&words[2]))
            .map_or(0, |v| v.len() as i64),
    ))
}

/// HEXISTS key field.
pub fn hexists(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    Ok(Reply::Integer(i64::from(
        keys.read(&words[1], as_type::hash)?
            .is_some_and(|h| h.contains(&words[2])),
    )))
}

/// HGETALL, HKEYS, HVALS key.
pub fn hgetall(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let Some(hash) = keys.read(&words[1], as_type::hash)? else {
        return Ok(if is(&words[0], "hgetall") {
            Reply::Map(Vec::new())
        } else {
            Reply::Array(Vec::new())
        });
    };
    Ok(if is(&words[0], "hkeys") {
        Reply::Array(hash.iter().map(|(f, _)| bulk(f)).collect())
    } else if is(&words[0], "hvals") {
        Reply::Array(hash.iter().map(|(_, v)| bulk(v)).collect())
    } else {
        Reply::Map(hash.iter().map(|(f, v)| (bulk(f), bulk(v))).collect())
    })
}

/// HINCRBY key field increment.
pub fn hincrby(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let delta = int(&words[3])?;
    let current = match keys.read(&words[1], as_type::hash)?.and_then(|h| h.get(&words[2])) {
        None => 0,
        Some(text) => parse_i64(text).ok_or_else(|| Reply::err("hash value is not an integer"))?,
    };
    let next = current
        .checked_add(delta)
        .ok_or_else(|| Reply::err("increment or decrement would overflow"))?;
    keys.hset(&words[1], &words[2], &Bytes::from(next.to_string()))?;
    Ok(Reply::Integer(next))
}

/// HINCRBYFLOAT key field increment.
pub fn hincrbyfloat(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let delta = float(&words[3])?;
    if !delta.is_finite() {
        return Err(Reply::err("value is NaN or Infinity"));
    }
    let current = match keys.read(&words[1], as_type::hash)?.and_then(|h| h.get(&words[2])) {
        None => 0.0,
        Some(text) => parse_f64(text).ok_or_else(|| Reply::err("hash value is not a float"))?,
    };
    let next = current + delta;
    if !next.is_finite() {
        return Err(Reply::err("increment would produce NaN or Infinity"));
    }
    let text = crate::args::format_human(next);
    keys.hset(&words[1], &words[2], &text)?;
    Ok(Reply::Bulk(text))
}

/// HRANDFIELD key [count [WITHVALUES]].
pub fn hrandfield(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    if words.len() > 4 || (words.len() == 4 && !is(&words[3], "WITHVALUES")) {
        return Err(crate::args::syntax());
    }
    let count = words.get(2).map(|c| int(c)).transpose()?;
    let with_values = words.len() == 4;
    let Some(len) = keys.read(&words[1], as_type::hash)?.map(|h| h.len()) else {
        return Ok(if count.is_some() {
            Reply::Array(Vec::new())
        } else {
            Reply::Null
        });
    };
    let picks = match count {
        None => vec![keys.random_below(len)],
        Some(count) => random_picks(keys, len, count)?,
    };
    let hash = keys
        .read(&words[1], as_type::hash)?
        .ok_or_else(crate::keys::wrong_type)?;
    let picked = picks.into_iter().filter_map(|at| hash.get_index(at));
    // With values, pairs (nested in RESP3, as Redis answers).
    Ok(match (count, with_values) {
        (None, _) => picked.map(|(field, _)| bulk(field)).next().unwrap_or(Reply::Null),
        (Some(_), true) => Reply::Pairs(picked.map(|(field, value)| (bulk(field), bulk(value))).collect()),
        (Some(_), false) => Reply::Array(picked.map(|(field, _)| bulk(field)).collect()),
    })
}

/// HSCAN key cursor [MATCH pattern] [COUNT n] [NOVALUES].
pub fn hscan(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let args = scan_args(words, true)?;
    let Some(hash) = keys.read(&words[1], as_type::hash)? else {
        return Ok(scan_reply(&args, 0, std::iter::empty()));
    };
    let (next, pairs) = hash.scan(args.cursor, args.count);
    Ok(scan_reply(
        &args,
        next,
        pairs.into_iter().map(|(f, v)| (f, Some(owned(v)))),
    ))
}
