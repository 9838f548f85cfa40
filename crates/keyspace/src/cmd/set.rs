//! The set commands.

use bytes::Bytes;
use ferry_resp::Reply;

use crate::args::{bulks, int, is, syntax};
use crate::cmd::scan::scan_reply;
use crate::cmd::{random_picks, Outcome};
use crate::keys::{as_type, Keys};
use crate::value::{Entry, Set, Value};

/// SADD key member [member ...].
pub fn sadd(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let set = keys.upsert(&words[1], as_type::set_mut, as_type::new_set)?;
    let added = words[2..].iter().filter(|m| set.insert((*m).clone())).count();
    Ok(Reply::Integer(added as i64))
}

/// SREM key member [member ...].
pub fn srem(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let Some(set) = keys.modify(&words[1], as_type::set_mut)? else {
        return Ok(Reply::Integer(0));
    };
    let removed = words[2..].iter().filter(|m| set.swap_remove(&m[..])).count();
    Ok(Reply::Integer(removed as i64))
}

/// SCARD key.
pub fn scard(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    Ok(Reply::Integer(
        keys.read(&words[1], as_type::set)?.map_or(0, |s| s.len() as i64),
    ))
}

/// SISMEMBER key member.
pub fn sismember(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    Ok(Reply::Integer(i64::from(
        keys.read(&words[1], as_type::set)?
            .is_some_and(|s| s.contains(&words[2][..])),
    )))
}

/// SMISMEMBER key member [member ...].
pub fn smismember(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let set = keys.read(&words[1], as_type::set)?;
    Ok(Reply::Array(
        words[2..]
            .iter()
            .map(|m| Reply::Integer(i64::from(set.is_some_and(|s| s.contains(&m[..])))))
            .collect(),
    ))
}

/// SMEMBERS key.
pub fn smembers(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    Ok(keys
        .read(&words[1], as_type::set)?
        .map_or(Reply::Array(Vec::new()), |s| bulks(s.iter())))
}

#[derive(Clone, Copy, PartialEq)]
enum Algebra {
    Inter,
    Union,
    Diff,
}

/// The sets of `names` combined; every key's type is checked first, as Redis does.
fn combine(keys: &mut Keys, names: &[Bytes], algebra: Algebra) -> Result<Set, Reply> {
    let mut sets: Vec<Option<Set>> = Vec::with_capacity(names.len());
    for name in names {
        sets.push(keys.read(name, as_type::set)?.cloned());
    }
    let mut sets = sets.into_iter();
    let mut result = sets.next().flatten().unwrap_or_default();
    for set in sets {
        match (algebra, set) {
            (Algebra::Inter, None) => result.clear(),
            (Algebra::Inter, Some(set)) => result.retain(|m| set.contains(m)),
            (Algebra::Union, Some(set)) => result.extend(set),
            (Algebra::Diff, Some(set)) => result.retain(|m| !set.contains(m)),
            (_, None) => {}
        }
    }
    Ok(result)
}

fn algebra_of(name: &[u8]) -> Algebra {
    let name = String::from_utf8_lossy(name).to_ascii_lowercase();
    if name.starts_with("sinter") {
        Algebra::Inter
    } else if name.starts_with("sunion") {
        Algebra::Union
    } else {
        Algebra::Diff
    }
}

/// SINTER, SUNION, SDIFF key [key ...].
pub fn algebra(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    Ok(bulks(combine(keys, &words[1..], algebra_of(&words[0]))?.iter()))
}

/// SINTERSTORE, SUNIONSTORE, SDIFFSTORE destination key [key ...].
pub fn algebra_store(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let result = combine(keys, &words[2..], algebra_of(&words[0]))?;
    let len = result.len();
    keys.put(&words[1], (len > 0).then(|| Entry::new(Value::Set(result))))?;
    Ok(Reply::Integer(len as i64))
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit].
pub fn sintercard(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let numkeys = int(&words[1])?;
    if numkeys <= 0 {
        return Err(Reply::err("numkeys should be greater than 0"));
    }
    let numkeys = numkeys as usize;
    if numkeys > words.len() - 2 {
        return Err(Reply::err("Number of keys can't be greater than number of args"));
    }
    let mut limit = 0usize;
    let rest = &words[2 + numkeys..];
    match rest {
        [] => {}
        [option, value] if is(option, "LIMIT") => {
            let n = int(value)?;
            if n < 0 {
                return Err(Reply::err("LIMIT can't be negative"));
            }
            limit = n as usize;
        }
        _ => return Err(syntax()),
    }
    let len = combine(keys, &words[2..2 + numkeys], Algebra::Inter)?.len();
    Ok(Reply::Integer(if limit == 0 { len } else { len.min(limit) } as i64))
}

/// SPOP key [count].
pub fn spop(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    if words.len() > 3 {
        return Err(syntax());
    }
    let count = match words.get(2) {
        None => None,
        Some(count) => match int(count)? {
            n if n < 0 => return Err(Reply::err("value is out of range, must be positive")),
            n => Some(n),
        },
    };
    let Some(len) = keys.read(&words[1], as_type::set)?.map(|s| s.len()) else {
        return Ok(if count.is_some() {
            Reply::Array(Vec::new())
        } else {
            Reply::Null
        });
    };
    let picks = random_picks(keys, len, count.unwrap_or(1))?;
    let set = keys.modify(&words[1], as_type::set_mut)?.expect("read above");
    let mut popped: Vec<Bytes> = picks.iter().filter_map(|&at| set.get_index(at).cloned()).collect();
    for member in &popped {
        set.swap_remove(member);
    }
    Ok(match count {
        None => popped.pop().map_or(Reply::Null, Reply::Bulk),
        Some(_) => Reply::Array(popped.into_iter().map(Reply::Bulk).collect()),
    })
}

/// SRANDMEMBER key [count].
pub fn srandmember(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    if words.len() > 3 {
        return Err(syntax());
    }
    let count = words.get(2).map(|c| int(c)).transpose()?;
    let Some(set) = keys.read(&words[1], as_type::set)?.cloned() else {
        return Ok(if count.is_some() {
            Reply::Array(Vec::new())
        } else {
            Reply::Null
        });
    };
    let picks = random_picks(keys, set.len(), count.unwrap_or(1))?;
    let members = picks
        .iter()
        .filter_map(|&at| set.get_index(at).cloned())
        .map(Reply::Bulk);
    Ok(match count {
        None => members.into_iter().next().unwrap_or(Reply::Null),
        Some(_) => Reply::Array(members.collect()),
    })
}

/// SMOVE source destination member.
pub fn smove(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let (source, destination, member) = (&words[1], &words[2], &words[3]);
    let present = keys
        .read(source, as_type::set)?
        .is_some_and(|s| s.contains(&member[..]));
    keys.read(destination, as_type::set)?;
    if !present {
        return Ok(Reply::Integer(0));
    }
    if source == destination {
        return Ok(Reply::Integer(1));
    }
    keys.modify(source, as_type::set_mut)?
        .expect("read above")
        .swap_remove(&member[..]);
    keys.upsert(destination, as_type::set_mut, as_type::new_set)?
        .insert(member.clone());
    Ok(Reply::Integer(1))
}

/// SSCAN key cursor [MATCH pattern] [COUNT n].
pub fn sscan(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let items = keys
        .read(&words[1], as_type::set)?
        .map(|s| s.iter().map(|m| (m.clone(), None)).collect())
        .unwrap_or_default();
    scan_reply(words, items, false)
}
