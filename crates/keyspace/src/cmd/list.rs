//! The list commands (LMPOP, and the blocking pops' step, are `mpop`'s).

use bytes::Bytes;
use ferry_resp::Reply;

use crate::args::{bulk, index_range, int, is, syntax};
use crate::cmd::Outcome;
use crate::keys::{as_type, Keys};

/// LPUSH, RPUSH, LPUSHX, RPUSHX key element [element ...].
pub fn push(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let name = String::from_utf8_lossy(&words[0]).to_ascii_lowercase();
    let left = name.starts_with('l');
    if name.ends_with('x') && keys.read(&words[1], as_type::list)?.is_none() {
        return Ok(Reply::Integer(0));
    }
    keys.push(&words[1], left, words[2..].to_vec())?;
    Ok(Reply::Integer(list_len(keys, &words[1])? as i64))
}

/// A list's length (0 if absent).
fn list_len(keys: &mut Keys, key: &[u8]) -> Result<usize, Reply> {
    Ok(keys.read(key, as_type::list)?.map_or(0, |list| list.len()))
}

/// LPOP and RPOP key [count].
pub fn pop(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    if words.len() > 3 {
        return Err(ferry_resp::command::wrong_arity(if is(&words[0], "lpop") {
            "lpop"
        } else {
            "rpop"
        }));
    }
    let left = is(&words[0], "lpop");
    let count = match words.get(2) {
        None => None,
        Some(count) => match int(count)? {
            n if n < 0 => return Err(Reply::err("value is out of range, must be positive")),
            n => Some(n as usize),
        },
    };
    if keys.read(&words[1], as_type::list)?.is_none() {
        // With a count, Redis answers a missing key with the null array.
        return Ok(if count.is_some() { Reply::NullArray } else { Reply::Null });
    }
    let popped = keys.pop(&words[1], left, count.unwrap_or(1))?;
    Ok(match count {
        None => popped.into_iter().next().map_or(Reply::Null, Reply::Bulk),
        Some(_) => Reply::Array(popped.into_iter().map(Reply::Bulk).collect()),
    })
}

/// LLEN key.
pub fn llen(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    Ok(Reply::Integer(
        keys.read(&words[1], as_type::list)?.map_or(0, |l| l.len() as i64),
    ))
}

/// LRANGE key start stop.
pub fn lrange(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let (start, stop) = (int(&words[2])?, int(&words[3])?);
    let Some(list) = keys.read(&words[1], as_type::list)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    Ok(Reply::Array(match index_range(start, stop, list.len()) {
        Some((from, to)) => list.iter_from(from).take(to - from + 1).map(bulk).collect(),
        None => Vec::new(),
    }))
}

fn resolve(index: i64, len: usize) -> Option<usize> {
    let at = if index < 0 { len as i64 + index } else { index };
    (0..len as i64).contains(&at).then_some(at as usize)
}

/// LINDEX key index.
pub fn lindex(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let index = int(&words[2])?;
    Ok(keys
        .read(&words[1], as_type::list)?
        .and_then(|list| resolve(index, list.len()).and_then(|at| list.get(at)))
        .map_or(Reply::Null, bulk))
}

/// LSET key index element.
pub fn lset(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let index = int(&words[2])?;
    let Some(list) = keys.read(&words[1], as_type::list)? else {
        return Err(Reply::err("no such key"));
    };
    let at = resolve(index, list.len()).ok_or_else(|| Reply::err("index out of range"))?;
    keys.list_set(&words[1], at, words[3].clone())?;
    Ok(Reply::ok())
}

/// LINSERT key BEFORE|AFTER pivot element.
pub fn linsert(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let after = if is(&words[2], "AFTER") {
        true
    } else if is(&words[2], "BEFORE") {
        false
    } else {
        return Err(syntax());
    };
    let Some(list) = keys.read(&words[1], as_type::list)? else {
        return Ok(Reply::Integer(0));
    };
    let Some(at) = list.iter().position(|item| item == &words[3][..]) else {
        return Ok(Reply::Integer(-1));
    };
    keys.list_insert(&words[1], at + usize::from(after), words[4].clone())?;
    Ok(Reply::Integer(list_len(keys, &words[1])? as i64))
}

/// LREM key count element.
pub fn lrem(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let count = int(&words[2])?;
    let element = &words[3];
    let Some(list) = keys.read(&words[1], as_type::list)? else {
        return Ok(Reply::Integer(0));
    };
    let limit = if count == 0 {
        usize::MAX
    } else {
        count.unsigned_abs() as usize
    };
    let mut positions: Vec<usize> = list
        .iter()
        .enumerate()
        .filter(|(_, i)| *i == &element[..])
        .map(|(at, _)| at)
        .collect();
    if count < 0 {
        positions.reverse();
    }
    positions.truncate(limit);
    if positions.is_empty() {
        return Ok(Reply::Integer(0));
    }
    positions.sort_unstable();
    for at in positions.iter().rev() {
        keys.list_remove(&words[1], *at)?;
    }
    Ok(Reply::Integer(positions.len() as i64))
}

/// LTRIM key start stop.
pub fn ltrim(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let (start, stop) = (int(&words[2])?, int(&words[3])?);
    let Some(len) = keys.read(&words[1], as_type::list)?.map(|list| list.len()) else {
        return Ok(Reply::ok());
    };
    // Kept: items from..=to; the rest pops from both ends.
    let (head, tail) = match index_range(start, stop, len) {
        Some((from, to)) => (from, len - 1 - to),
        None => (len, 0),
    };
    if head > 0 {
        keys.pop(&words[1], true, head)?;
    }
    if tail > 0 {
        keys.pop(&words[1], false, tail)?;
    }
    Ok(Reply::ok())
}

/// LPOS key element [RANK rank] [COUNT num] [MAXLEN len].
pub fn lpos(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let (mut rank, mut count, mut maxlen) = (1i64, None, 0usize);
    let mut i = 3;
    while i < words.len() {
        let value = words.get(i + 1).ok_or_else(syntax)?;
        if is(&words[i], "RANK") {
            rank = int(value)?;
            if rank == 0 {
                return Err(Reply::err(
                    "RANK can't be zero: use 1 to start from the first match, 2 from the second ... \
                     or use negative to start from the end of the list",
                ));
            }
            if rank == i64::MIN {
                return Err(Reply::err("value is out of range"));
            }
        } else if is(&words[i], "COUNT") {
            let n = int(value)?;
            if n < 0 {
                return Err(Reply::err("COUNT can't be negative"));
            }
            count = Some(n as usize);
        } else if is(&words[i], "MAXLEN") {
            let n = int(value)?;
            if n < 0 {
                return Err(Reply::err("MAXLEN can't be negative"));
            }
            maxlen = n as usize;
        } else {
            return Err(syntax());
        }
        i += 2;
    }
    let list = keys.read(&words[1], as_type::list)?;
    let len = list.map_or(0, |l| l.len());
    let scanned = if maxlen == 0 { len } else { maxlen.min(len) };
    let mut skip = rank.unsigned_abs() - 1;
    let want = match count {
        Some(0) => usize::MAX,
        Some(n) => n,
        None => 1,
    };
    let mut found = Vec::new();
    if let Some(list) = list {
        // Walked from the end the search starts at, item by item (not by index).
        let items: Box<dyn Iterator<Item = (usize, &[u8])>> = if rank > 0 {
            Box::new(list.iter().enumerate().take(scanned))
        } else {
            Box::new(
                list.iter()
                    .rev()
                    .enumerate()
                    .map(|(i, item)| (len - 1 - i, item))
                    .take(scanned),
            )
        };
        for (at, item) in items {
            if item == &words[2][..] {
                if skip > 0 {
                    skip -= 1;
                    continue;
                }
                found.push(Reply::Integer(at as i64));
                if found.len() == want {
                    break;
                }
            }
        }
    }
    Ok(match count {
        Some(_) => Reply::Array(found),
        None => found.pop().unwrap_or(Reply::Null),
    })
}

/// LMOVE source destination LEFT|RIGHT LEFT|RIGHT, and RPOPLPUSH source destination.
pub fn lmove(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let side = |word: &Bytes| {
        if is(word, "LEFT") {
            Ok(true)
        } else if is(word, "RIGHT") {
            Ok(false)
        } else {
            Err(syntax())
        }
    };
    let (from_left, to_left) = if is(&words[0], "rpoplpush") {
        (false, true)
    } else {
        (side(&words[3])?, side(&words[4])?)
    };
    let (source, destination) = (&words[1], &words[2]);
    if keys.read(source, as_type::list)?.is_none() {
        return Ok(Reply::Null);
    }
    // The destination's type is checked before anything moves.
    keys.read(destination, as_type::list)?;
    let Some(item) = keys.pop(source, from_left, 1)?.pop() else {
        return Ok(Reply::Null);
    };
    keys.push(destination, to_left, vec![item.clone()])?;
    Ok(Reply::Bulk(item))
}
