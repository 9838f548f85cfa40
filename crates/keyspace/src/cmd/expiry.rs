//! Expiry: SET's and GETEX's options, EXPIRE and its forms, TTL and its forms, PERSIST.
//! Times are absolute milliseconds since the Unix epoch, stored with the value, so a
//! replica, a restarted node and a slot's new owner agree on when a key ends.

use bytes::Bytes;
use ferry_resp::Reply;

use crate::args::{int, is, syntax};
use crate::cmd::Outcome;
use crate::keys::Keys;

/// An expiry a write asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpiryOption {
    /// At this time (ms since the epoch).
    At(u64),
    /// KEEPTTL: as it was.
    Keep,
}

fn invalid(command: &str) -> Reply {
    Reply::err(format!("invalid expire time in '{command}' command"))
}

/// An absolute time in ms from `amount` of `unit` (EX, PX, EXAT, PXAT), relative ones
/// from `now_ms`; `Ok(None)` if `unit` is not one of them.
pub fn expiry_option(unit: &[u8], amount: &Bytes, now_ms: u64, command: &str) -> Result<Option<ExpiryOption>, Reply> {
    let (scale, relative) = if is(unit, "EX") {
        (1000, true)
    } else if is(unit, "PX") {
        (1, true)
    } else if is(unit, "EXAT") {
        (1000, false)
    } else if is(unit, "PXAT") {
        (1, false)
    } else {
        return Ok(None);
    };
    let amount = int(amount)?;
    if amount <= 0 {
        return Err(invalid(command));
    }
    let ms = amount.checked_mul(scale).ok_or_else(|| invalid(command))?;
    let at = if relative {
        (now_ms as i64).checked_add(ms).ok_or_else(|| invalid(command))?
    } else {
        ms
    };
    Ok(Some(ExpiryOption::At(at as u64)))
}

/// EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT key time [NX|XX|GT|LT].
pub fn expire(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let name = String::from_utf8_lossy(&words[0]).to_ascii_lowercase();
    let (scale, relative) = match name.as_str() {
        "expire" => (1000, true),
        "pexpire" => (1, true),
        "expireat" => (1000, false),
        _ => (1, false),
    };
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for option in &words[3..] {
        if is(option, "NX") {
            nx = true;
        } else if is(option, "XX") {
            xx = true;
        } else if is(option, "GT") {
            gt = true;
        } else if is(option, "LT") {
            lt = true;
        } else {
            return Err(Reply::err(format!(
                "Unsupported option {}",
                String::from_utf8_lossy(option)
            )));
        }
    }
    if nx && (xx || gt || lt) {
        return Err(Reply::err(
            "NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if gt && lt {
        return Err(Reply::err("GT and LT options at the same time are not compatible"));
    }
    let amount = int(&words[2])?;
    let at = amount
        .checked_mul(scale)
        .and_then(|ms| {
            if relative {
                ms.checked_add(keys.now_ms() as i64)
            } else {
                Some(ms)
            }
        })
        .ok_or_else(|| invalid(&name))?;
    let key = &words[1];
    let Some(entry) = keys.entry(key)? else {
        return Ok(Reply::Integer(0));
    };
    let current = entry.expires_at_ms;
    let refused = (nx && current.is_some())
        || (xx && current.is_none())
        || (gt && current.is_none_or(|c| at <= c as i64))
        || (lt && current.is_some_and(|c| at >= c as i64));
    if refused {
        return Ok(Reply::Integer(0));
    }
    if at <= keys.now_ms() as i64 {
        keys.take(key)?;
    } else {
        keys.set_expiry(key, Some(at as u64))?;
    }
    Ok(Reply::Integer(1))
}

/// TTL, PTTL, EXPIRETIME, PEXPIRETIME key.
pub fn ttl(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let name = String::from_utf8_lossy(&words[0]).to_ascii_lowercase();
    let now_ms = keys.now_ms();
    let Some(entry) = keys.entry(&words[1])? else {
        return Ok(Reply::Integer(-2));
    };
    let Some(at) = entry.expires_at_ms else {
        return Ok(Reply::Integer(-1));
    };
    let left_ms = at.saturating_sub(now_ms) as i64;
    Ok(Reply::Integer(match name.as_str() {
        "ttl" => (left_ms + 500) / 1000,
        "pttl" => left_ms,
        "expiretime" => (at / 1000) as i64,
        _ => at as i64,
    }))
}

/// PERSIST key.
pub fn persist(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let has_expiry = keys
        .entry(&words[1])?
        .is_some_and(|entry| entry.expires_at_ms.is_some());
    if !has_expiry {
        return Ok(Reply::Integer(0));
    }
    keys.set_expiry(&words[1], None)?;
    Ok(Reply::Integer(1))
}

/// Refuses options after a command's last word where it takes none.
pub fn no_more(words: &[Bytes], from: usize) -> Result<(), Reply> {
    if words.len() > from {
        Err(syntax())
    } else {
        Ok(())
    }
}
