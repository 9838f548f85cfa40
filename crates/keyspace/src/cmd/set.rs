//! The set commands.

use bytes::Bytes;
use ferry_resp::Reply;

use std::sync::Arc;

use ferry_value::{Entry, Set, Value};
use indexmap::IndexSet;

use crate::args::{bulk, int, is, owned, positive, syntax};
use crate::cmd::scan::{scan_args, scan_reply};
use crate::cmd::{random_picks, Outcome};
use crate::keys::{as_type, Keys};

/// SADD key member [member ...].
pub fn sadd(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let mut added = 0;
    for member in &words[2..] {
        added += i64::from(keys.sadd(&words[1], member)?);
    }
    Ok(Reply::Integer(added))
}

/// SREM key member [member ...].
pub fn srem(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let mut removed = 0;
    for member in &words[2..] {
        removed += i64::from(keys.srem(&words[1], member)?);
    }
    Ok(Reply::Integer(removed))
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
        .map_or(Reply::Array(Vec::new()), |s| {
            Reply::Array(s.iter().map(|m| bulk(&m)).collect())
        }))
}

#[derive(Clone, Copy, PartialEq)]
enum Algebra {
    Inter,
    Union,
    Diff,
}

/// The members of the sets of `names` combined; every key's type is checked first, as
/// Redis does.
fn combine(keys: &mut Keys, names: &[Bytes], algebra: Algebra) -> Result<IndexSet<Bytes>, Reply> {
    for name in names {
        keys.read(name, as_type::set)?;
    }
    let sets: Vec<Option<&Set>> = names.iter().map(|name| keys.view(name, as_type::set)).collect();
    let others = || sets.iter().skip(1);
    let first = sets.first().copied().flatten();
    Ok(match algebra {
        Algebra::Inter if others().any(Option::is_none) => IndexSet::new(),
        Algebra::Inter => first
            .into_iter()
            .flat_map(Set::iter)
            .filter(|m| others().flatten().all(|set| set.contains(m)))
            .map(|m| owned(&m))
            .collect(),
        Algebra::Union => sets
            .iter()
            .flatten()
            .flat_map(|set| set.iter())
            .map(|m| owned(&m))
            .collect(),
        Algebra::Diff => first
            .into_iter()
            .flat_map(Set::iter)
            .filter(|m| !others().flatten().any(|set| set.contains(m)))
            .map(|m| owned(&m))
            .collect(),
    })
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
    Ok(Reply::Array(
        combine(keys, &words[1..], algebra_of(&words[0]))?
            .into_iter()
            .map(Reply::Bulk)
            .collect(),
    ))
}

/// SINTERSTORE, SUNIONSTORE, SDIFFSTORE destination key [key ...].
pub fn algebra_store(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let result = combine(keys, &words[2..], algebra_of(&words[0]))?;
    let len = result.len();
    let set = Set::from_members(result.iter().map(|m| &m[..]), keys.encodings());
    keys.put(&words[1], (len > 0).then(|| Entry::new(Value::Set(Arc::new(set)))))?;
    Ok(Reply::Integer(len as i64))
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit].
pub fn sintercard(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let numkeys = positive(&words[1], "numkeys")?;
    if numkeys > words.len() - 2 {
        return Err(Reply::err("Number of keys can't be greater than number of args"));
    }
    let limit = match &words[2 + numkeys..] {
        [] => 0,
        [option, value] if is(option, "LIMIT") => crate::args::limit(value)?,
        _ => return Err(syntax()),
    };
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
    let set = keys.view(&words[1], as_type::set).ok_or_else(crate::keys::wrong_type)?;
    let mut popped: Vec<Bytes> = picks
        .iter()
        .filter_map(|&at| set.get_index(at))
        .map(|m| owned(&m))
        .collect();
    for member in &popped {
        keys.srem(&words[1], member)?;
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
    let Some(len) = keys.read(&words[1], as_type::set)?.map(|s| s.len()) else {
        return Ok(if count.is_some() {
            Reply::Array(Vec::new())
        } else {
            Reply::Null
        });
    };
    let picks = random_picks(keys, len, count.unwrap_or(1))?;
    let set = keys.view(&words[1], as_type::set).ok_or_else(crate::keys::wrong_type)?;
    let members = picks.iter().filter_map(|&at| set.get_index(at)).map(|m| bulk(&m));
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
    keys.srem(source, member)?;
    keys.sadd(destination, member)?;
    Ok(Reply::Integer(1))
}

/// SSCAN key cursor [MATCH pattern] [COUNT n].
pub fn sscan(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let args = scan_args(words, false)?;
    let Some(set) = keys.read(&words[1], as_type::set)? else {
        return Ok(scan_reply(&args, 0, std::iter::empty()));
    };
    let (next, members) = set.scan(args.cursor, args.count);
    Ok(scan_reply(&args, next, members.iter().map(|m| (&m[..], None))))
}
