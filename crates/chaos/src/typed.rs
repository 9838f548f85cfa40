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
//!
//! RESP clients (`crate::resp`) send the same reads ([`read_command`], understood by
//! [`seen`]) and writes that keep the same meaning ([`queued_write`]), inside MULTI/EXEC.

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
    if kind == Kind::Str {
        return Err(FnError::Failed("a string key is read with get".into()));
    }
    let words = read_command(kind, key);
    let words: Vec<&[u8]> = words.iter().map(|word| &word[..]).collect();
    seen(kind, &call(ctx, &words).await?)
}

/// The command that reads the last writer's tag of hot key `key` of kind `kind`: what
/// [`read`] runs, and what a RESP transaction queues (`ferry_chaos::resp`).
pub fn read_command(kind: Kind, key: &[u8]) -> Vec<Bytes> {
    let key = Bytes::copy_from_slice(key);
    let words: &[&'static [u8]] = match kind {
        Kind::Str => &[b"GET"],
        Kind::Hash => &[b"HGET", b"w"],
        Kind::Leaderboard => &[b"ZREVRANGE", b"0", b"0", b"WITHSCORES"],
        Kind::Queue => &[b"LINDEX", b"-1"],
    };
    let mut command = vec![Bytes::from_static(words[0]), key];
    command.extend(words[1..].iter().map(|word| Bytes::from_static(word)));
    command
}

/// What the reply to [`read_command`] says, in whichever form it came: in the process
/// (sorted-set pairs with double scores) or over RESP2 (a flat array, scores as text).
pub fn seen(kind: Kind, reply: &Reply) -> Result<Seen, FnError> {
    let absent = Seen {
        tag: TAG_ABSENT,
        top: 0.0,
    };
    match (kind, reply) {
        (Kind::Str | Kind::Hash | Kind::Queue, Reply::Null) => Ok(absent),
        (Kind::Str | Kind::Hash | Kind::Queue, reply) => Ok(Seen {
            tag: tag_of(reply)?,
            top: 0.0,
        }),
        // An absent key answers an empty array, as Redis does (no pairs to type).
        (Kind::Leaderboard, Reply::Array(empty)) if empty.is_empty() => Ok(absent),
        (Kind::Leaderboard, Reply::Pairs(pairs)) if pairs.is_empty() => Ok(absent),
        (Kind::Leaderboard, Reply::Pairs(pairs)) => top_of(&pairs[0].0, &pairs[0].1),
        (Kind::Leaderboard, Reply::Array(flat)) if flat.len() == 2 => top_of(&flat[0], &flat[1]),
        (Kind::Leaderboard, reply) => Err(unexpected("ZREVRANGE", reply)),
    }
}

/// The leaderboard's top member and its score (a double, or its text over RESP2).
fn top_of(member: &Reply, score: &Reply) -> Result<Seen, FnError> {
    let top = match score {
        Reply::Double(top) => *top,
        Reply::Bulk(text) => std::str::from_utf8(text)
            .ok()
            .and_then(|text| text.parse().ok())
            .ok_or_else(|| unexpected("ZREVRANGE's score", score))?,
        other => return Err(unexpected("ZREVRANGE's score", other)),
    };
    Ok(Seen {
        tag: tag_of(member)?,
        top,
    })
}

/// What the reply to a queued write must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// `+OK`.
    Ok,
    /// An integer (a count).
    Integer,
}

/// The commands a RESP transaction queues to make `tag` the last writer's tag of hot key
/// `key` of kind `kind`, with the answer each must get. Unlike [`write`] they cannot
/// depend on what the transaction read (MULTI queues every command before any runs), so
/// the leaderboard does not score one above the top it read: it keeps its best
/// `MAX_MEMBERS - 1`, scores them all 0 and adds the tag at 1 (the top, as for a
/// function's write, which then scores above it).
pub fn queued_write(kind: Kind, key: &[u8], tag: u64) -> Vec<(Vec<Bytes>, Answer)> {
    let key = Bytes::copy_from_slice(key);
    let tag = Bytes::copy_from_slice(&tag.to_le_bytes());
    let word = |text: &'static str| Bytes::from_static(text.as_bytes());
    let number = |n: i64| Bytes::from(n.to_string());
    match kind {
        Kind::Str => vec![(vec![word("SET"), key, tag], Answer::Ok)],
        Kind::Hash => vec![
            (vec![word("HSET"), key.clone(), word("w"), tag], Answer::Integer),
            (vec![word("HINCRBY"), key, word("n"), word("1")], Answer::Integer),
        ],
        Kind::Leaderboard => vec![
            (
                vec![word("ZREMRANGEBYRANK"), key.clone(), word("0"), number(-MAX_MEMBERS)],
                Answer::Integer,
            ),
            (
                vec![
                    word("ZUNIONSTORE"),
                    key.clone(),
                    word("1"),
                    key.clone(),
                    word("WEIGHTS"),
                    word("0"),
                ],
                Answer::Integer,
            ),
            (vec![word("ZADD"), key, word("1"), tag], Answer::Integer),
        ],
        Kind::Queue => vec![
            (vec![word("RPUSH"), key.clone(), tag], Answer::Integer),
            (vec![word("LTRIM"), key, number(-MAX_MEMBERS), word("-1")], Answer::Ok),
        ],
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

    /// Runs a queued write as EXEC would, checking each answer.
    fn run_queued(ctx: &mut MemoryCtx, kind: Kind, key: &[u8], tag: u64) {
        for (command, answer) in queued_write(kind, key, tag) {
            let words: Vec<&[u8]> = command.iter().map(|word| &word[..]).collect();
            let reply = block_on(call(ctx, &words)).unwrap();
            match answer {
                Answer::Ok => assert_eq!(reply, Reply::Simple("OK".into()), "{kind:?}"),
                Answer::Integer => assert!(matches!(reply, Reply::Integer(_)), "{kind:?}: {reply:?}"),
            }
        }
    }

    #[test]
    fn queued_writes_and_function_writes_agree_on_the_last_writer_and_stay_bounded() {
        for kind in [Kind::Str, Kind::Hash, Kind::Leaderboard, Kind::Queue] {
            let mut ctx = MemoryCtx::default();
            let key = b"{hot}k";
            for tag in 1..=30u64 {
                let words = read_command(kind, key);
                let words: Vec<&[u8]> = words.iter().map(|word| &word[..]).collect();
                let before = seen(kind, &block_on(call(&mut ctx, &words)).unwrap()).unwrap();
                assert_eq!(before.tag, if tag == 1 { TAG_ABSENT } else { tag - 1 }, "{kind:?}");
                // Every third write comes over RESP; a function puts a string whole.
                if tag % 3 == 0 {
                    run_queued(&mut ctx, kind, key, tag);
                } else if kind == Kind::Str {
                    let value = Bytes::copy_from_slice(&tag.to_le_bytes());
                    block_on(ctx.put(TABLE, key, value)).unwrap();
                } else {
                    block_on(write(&mut ctx, kind, key, tag, before)).unwrap();
                }
            }
            let size = match kind {
                Kind::Str | Kind::Hash => continue,
                Kind::Leaderboard => block_on(call(&mut ctx, &[b"ZCARD", key])).unwrap(),
                Kind::Queue => block_on(call(&mut ctx, &[b"LLEN", key])).unwrap(),
            };
            assert_eq!(size, Reply::Integer(MAX_MEMBERS), "{kind:?}");
        }
    }

    #[test]
    fn a_leaderboard_read_over_resp2_means_what_it_means_in_the_process() {
        let tag = Reply::Bulk(Bytes::copy_from_slice(&7u64.to_le_bytes()));
        let pairs = Reply::Pairs(vec![(tag.clone(), Reply::Double(3.0))]);
        let flat = Reply::Array(vec![tag, Reply::Bulk(Bytes::from_static(b"3"))]);
        let expected = Seen { tag: 7, top: 3.0 };
        assert_eq!(seen(Kind::Leaderboard, &pairs).unwrap(), expected);
        assert_eq!(seen(Kind::Leaderboard, &flat).unwrap(), expected);
        assert_eq!(seen(Kind::Leaderboard, &Reply::Array(vec![])).unwrap().tag, TAG_ABSENT);
        assert!(seen(Kind::Leaderboard, &Reply::Integer(3)).is_err());
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
