//! The hot keys that hold Redis's types: a hash with a field counter, a sorted-set
//! leaderboard and a list queue, read and written through the one executor of Redis's
//! data commands (`ferry_lua::call`, as RESP clients and `redis.call` use it), so the
//! checker judges those commands wherever an invocation runs.
//!
//! Each keeps the tag of its last writer where a read finds it, so the history can be
//! checked on values as it is for strings: the hash's field `w`, the leaderboard's top
//! member (each writer scores one above the top it read), the queue's tail. Every write to
//! one of them reads it first (a command on a collection loads it), so programs only read
//! or read-modify-write these keys, never write them blind.

use bytes::Bytes;
use ferry_func::{Ctx, FnError};
use ferry_resp::Reply;

use crate::program::{TABLE, TAG_ABSENT};

/// Most members the leaderboard and the queue keep (each write trims them back).
pub const MAX_MEMBERS: i64 = 8;

/// What hot key `index` holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The tag itself, as the object's bytes.
    Str,
    /// A hash: field `w` the last writer's tag, field `n` how many writes it had.
    Hash,
    /// A sorted set whose top member is the last writer's tag.
    Leaderboard,
    /// A list whose tail is the last writer's tag.
    Queue,
}

/// The kind of hot key `index`: the four in turn, so any run of four keys or more has
/// each (a chaos run has at least four).
pub fn kind(index: u8) -> Kind {
    match index % 4 {
        0 => Kind::Str,
        1 => Kind::Hash,
        2 => Kind::Leaderboard,
        _ => Kind::Queue,
    }
}

/// What a read of a typed key saw: the last writer's tag, and the leaderboard's top score.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Seen {
    /// [`TAG_ABSENT`] if the key is absent.
    pub tag: u64,
    /// The top score (the leaderboard only; 0 otherwise).
    pub top: f64,
}

/// Reads typed key `key` of kind `kind` (not [`Kind::Str`]).
pub async fn read(ctx: &mut dyn Ctx, kind: Kind, key: &[u8]) -> Result<Seen, FnError> {
    let key = Bytes::copy_from_slice(key);
    let absent = Seen {
        tag: TAG_ABSENT,
        top: 0.0,
    };
    match kind {
        Kind::Str => Err(FnError::Failed("a string key is read with get".into())),
        Kind::Hash => match call(ctx, &[b"HGET", &key, b"w"]).await? {
            Reply::Null => Ok(absent),
            reply => Ok(Seen {
                tag: tag_of(&reply)?,
                top: 0.0,
            }),
        },
        Kind::Leaderboard => match call(ctx, &[b"ZREVRANGE", &key, b"0", b"0", b"WITHSCORES"]).await? {
            // An absent key answers an empty array, as Redis does (no pairs to type).
            Reply::Array(empty) if empty.is_empty() => Ok(absent),
            Reply::Pairs(pairs) if pairs.is_empty() => Ok(absent),
            Reply::Pairs(pairs) => {
                let (member, score) = &pairs[0];
                let Reply::Double(top) = score else {
                    return Err(unexpected("ZREVRANGE's score", score));
                };
                Ok(Seen {
                    tag: tag_of(member)?,
                    top: *top,
                })
            }
            reply => Err(unexpected("ZREVRANGE", &reply)),
        },
        Kind::Queue => match call(ctx, &[b"LINDEX", &key, b"-1"]).await? {
            Reply::Null => Ok(absent),
            reply => Ok(Seen {
                tag: tag_of(&reply)?,
                top: 0.0,
            }),
        },
    }
}

/// Writes `tag` to typed key `key` of kind `kind`, which the invocation read as `seen`.
pub async fn write(ctx: &mut dyn Ctx, kind: Kind, key: &[u8], tag: u64, seen: Seen) -> Result<(), FnError> {
    let key = Bytes::copy_from_slice(key);
    let tag = tag.to_le_bytes();
    match kind {
        Kind::Str => return Err(FnError::Failed("a string key is written with put".into())),
        Kind::Hash => {
            expect_integer(call(ctx, &[b"HSET", &key, b"w", &tag]).await?)?;
            expect_integer(call(ctx, &[b"HINCRBY", &key, b"n", b"1"]).await?)?;
        }
        Kind::Leaderboard => {
            let score = ferry_resp::reply::format_double(seen.top + 1.0);
            expect_integer(call(ctx, &[b"ZADD", &key, score.as_bytes(), &tag]).await?)?;
            let keep = format!("-{}", MAX_MEMBERS + 1);
            expect_integer(call(ctx, &[b"ZREMRANGEBYRANK", &key, b"0", keep.as_bytes()]).await?)?;
        }
        Kind::Queue => {
            let length = expect_integer(call(ctx, &[b"RPUSH", &key, &tag]).await?)?;
            if length > MAX_MEMBERS {
                call(ctx, &[b"LPOP", &key]).await?;
            }
        }
    }
    Ok(())
}

/// Runs one data command; its error replies end the invocation (none is expected).
async fn call(ctx: &mut dyn Ctx, words: &[&[u8]]) -> Result<Reply, FnError> {
    let args = words.iter().map(|word| Bytes::copy_from_slice(word)).collect();
    match ferry_lua::call::execute(ctx, TABLE, args, true).await? {
        Reply::Error(text) => Err(FnError::Failed(format!(
            "{}: {text}",
            String::from_utf8_lossy(words[0])
        ))),
        reply => Ok(reply),
    }
}

fn tag_of(reply: &Reply) -> Result<u64, FnError> {
    match reply {
        Reply::Bulk(bytes) => bytes[..]
            .try_into()
            .map(u64::from_le_bytes)
            .map_err(|_| FnError::Failed(format!("a typed chaos key holds {} bytes, not a tag", bytes.len()))),
        other => Err(unexpected("a tag", other)),
    }
}

fn expect_integer(reply: Reply) -> Result<i64, FnError> {
    match reply {
        Reply::Integer(n) => Ok(n),
        other => Err(unexpected("an integer", &other)),
    }
}

fn unexpected(what: &str, reply: &Reply) -> FnError {
    FnError::Failed(format!("expected {what}, got {reply:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    use ferry_func::memory::{block_on, MemoryCtx};

    #[test]
    fn each_typed_key_reads_back_its_last_writer_and_stays_bounded() {
        for kind in [Kind::Hash, Kind::Leaderboard, Kind::Queue] {
            let mut ctx = MemoryCtx::default();
            let key = b"{hot}k";
            let first = block_on(read(&mut ctx, kind, key)).unwrap();
            assert_eq!(first.tag, TAG_ABSENT, "{kind:?}");
            for tag in 1..=20u64 {
                let seen = block_on(read(&mut ctx, kind, key)).unwrap();
                assert_eq!(seen.tag, if tag == 1 { TAG_ABSENT } else { tag - 1 }, "{kind:?}");
                block_on(write(&mut ctx, kind, key, tag, seen)).unwrap();
            }
            let last = block_on(read(&mut ctx, kind, key)).unwrap();
            assert_eq!(last.tag, 20, "{kind:?}");
            let size = match kind {
                Kind::Hash => block_on(call(&mut ctx, &[b"HGET", key, b"n"])).unwrap(),
                Kind::Leaderboard => block_on(call(&mut ctx, &[b"ZCARD", key])).unwrap(),
                _ => block_on(call(&mut ctx, &[b"LLEN", key])).unwrap(),
            };
            let expected = match kind {
                Kind::Hash => Reply::Bulk(Bytes::from_static(b"20")),
                _ => Reply::Integer(MAX_MEMBERS),
            };
            assert_eq!(size, expected, "{kind:?}");
        }
    }

    #[test]
    fn every_run_of_four_keys_has_each_kind() {
        for start in 0..8u8 {
            let kinds: Vec<Kind> = (start..start + 4).map(kind).collect();
            for wanted in [Kind::Str, Kind::Hash, Kind::Leaderboard, Kind::Queue] {
                assert!(kinds.contains(&wanted), "{kinds:?}");
            }
        }
    }
}
