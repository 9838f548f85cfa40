//! The storage function a chaos run invokes, [`NAME`]: a short program of reads, blind
//! writes and read-modify-writes on a few hot keys, with emulated compute and, on the
//! storage node only, a stall that makes the watchdog replace the worker. Some hot keys
//! hold strings, the rest a hash, a sorted set or a list ([`typed`]), which are only read
//! or read-modify-written.
//!
//! Every write stores the invocation's unique tag, and the result lists the tag each read
//! saw, so a history can be checked on values as well as on versions. A program touches
//! each key at most once, so every read is a storage read (never the invocation's own
//! buffered write) and the result lines up with the versions the trace reports.

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use ferry_func::{Ctx, FnError, FnFuture};

use crate::typed::{self, Kind};

/// Registered name.
pub const NAME: &str = "chaos.ops";

/// Table the hot keys live in: RESP's database 0 (`ferry_net::resp::table_of(0)`), so
/// RESP clients and storage functions share them.
pub const TABLE: &str = "db0";

/// Most steps in one program.
pub const MAX_STEPS: usize = 16;

/// Longest emulated compute of one step.
pub const MAX_COMPUTE_US: u16 = 1_000;

/// Longest stall of one step: well past any budget a chaos node runs with, not so long
/// that a run's stalled threads pile up.
pub const MAX_STALL_MS: u16 = 500;

/// Tag value meaning "the key was absent".
pub const TAG_ABSENT: u64 = 0;

/// One step of a program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Read a key.
    Read(u8),
    /// Write the tag to a key without reading it.
    Write(u8),
    /// Read a key, then write the tag to it.
    Rmw(u8),
    /// Burn CPU for this many µs (makes a remote invocation a candidate for pushback).
    Compute(u16),
    /// Block the thread for this many ms without yielding (a runaway function).
    Stall(u16),
}

const KIND_READ: u8 = 0;
const KIND_WRITE: u8 = 1;
const KIND_RMW: u8 = 2;
const KIND_COMPUTE: u8 = 3;
const KIND_STALL: u8 = 4;

/// One invocation's program and its unique tag (never [`TAG_ABSENT`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    /// Written as the value of every key the program writes.
    pub tag: u64,
    /// The steps, in order.
    pub steps: Vec<Step>,
}

/// First byte of a value ferry reads as a typed value's byte form
/// (`ferry_value::entry::TAG`): a function's put of bytes that start with it may be
/// stored as another value (8 bytes `FF 00 …` are a 6-byte string to RESP's GET).
const BYTE_FORM_TAG: u8 = 0xFF;

/// The tag of `client`'s next invocation or transaction, after `seq` (advanced): unique
/// per client, never [`TAG_ABSENT`], and never starting (little-endian, as stored) with
/// the byte-form byte, so every client reads back exactly the 8 bytes it wrote.
pub fn next_tag(client: u64, seq: &mut u64) -> u64 {
    *seq += 1;
    if (*seq & 0xFF) as u8 == BYTE_FORM_TAG {
        *seq += 1;
    }
    (client + 1) << 32 | *seq
}

/// The key of hot key `index`, as stored: every one under the hashtag `{hot}`, so in a
/// cluster they share a slot and a program runs on one node.
pub fn key(index: u8) -> [u8; 6] {
    [b'{', b'h', b'o', b't', b'}', index]
}

impl Program {
    /// The arguments of an invocation running this program.
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(8 + 3 * self.steps.len());
        out.put_u64_le(self.tag);
        for step in &self.steps {
            let (kind, arg) = match *step {
                Step::Read(k) => (KIND_READ, u16::from(k)),
                Step::Write(k) => (KIND_WRITE, u16::from(k)),
                Step::Rmw(k) => (KIND_RMW, u16::from(k)),
                Step::Compute(us) => (KIND_COMPUTE, us),
                Step::Stall(ms) => (KIND_STALL, ms),
            };
            out.put_u8(kind);
            out.put_u16_le(arg);
        }
        out.freeze()
    }

    /// Parses arguments; refuses anything [`Program::encode`] would not produce.
    pub fn decode(args: &[u8]) -> Result<Program, FnError> {
        let bad = |why: &str| FnError::BadArgs(why.to_string());
        if args.len() < 8 || !(args.len() - 8).is_multiple_of(3) {
            return Err(bad("expected an 8-byte tag and 3-byte steps"));
        }
        let tag = u64::from_le_bytes(args[..8].try_into().expect("8 bytes"));
        if tag == TAG_ABSENT {
            return Err(bad("tag 0 means absent"));
        }
        let steps: Vec<Step> = args[8..]
            .chunks_exact(3)
            .map(|c| {
                let arg = u16::from_le_bytes([c[1], c[2]]);
                let key = u8::try_from(arg).map_err(|_| bad("key index above 255"));
                Ok(match c[0] {
                    KIND_READ => Step::Read(key?),
                    KIND_WRITE => Step::Write(key?),
                    KIND_RMW => Step::Rmw(key?),
                    KIND_COMPUTE if arg <= MAX_COMPUTE_US => Step::Compute(arg),
                    KIND_STALL if arg <= MAX_STALL_MS => Step::Stall(arg),
                    KIND_COMPUTE | KIND_STALL => return Err(bad("compute or stall too long")),
                    _ => return Err(bad("unknown step kind")),
                })
            })
            .collect::<Result<_, _>>()?;
        if steps.len() > MAX_STEPS {
            return Err(bad("too many steps"));
        }
        if steps
            .iter()
            .any(|s| matches!(*s, Step::Write(k) if typed::kind(k) != Kind::Str))
        {
            return Err(bad("a typed key written without a read"));
        }
        let mut touched = [false; 256];
        for step in &steps {
            if let Step::Read(k) | Step::Write(k) | Step::Rmw(k) = *step {
                if std::mem::replace(&mut touched[usize::from(k)], true) {
                    return Err(bad("a key touched twice"));
                }
            }
        }
        Ok(Program { tag, steps })
    }

    /// The keys it reads, in order.
    pub fn reads(&self) -> impl Iterator<Item = u8> + '_ {
        self.steps.iter().filter_map(|s| match *s {
            Step::Read(k) | Step::Rmw(k) => Some(k),
            _ => None,
        })
    }

    /// The keys it writes, in order.
    pub fn writes(&self) -> impl Iterator<Item = u8> + '_ {
        self.steps.iter().filter_map(|s| match *s {
            Step::Write(k) | Step::Rmw(k) => Some(k),
            _ => None,
        })
    }
}

/// The tag a read returned: the 8 bytes a program wrote, or [`TAG_ABSENT`].
fn tag_of(value: Option<Bytes>) -> Result<u64, FnError> {
    match value {
        None => Ok(TAG_ABSENT),
        Some(v) => v[..]
            .try_into()
            .map(u64::from_le_bytes)
            .map_err(|_| FnError::Failed(format!("a chaos key holds {} bytes, not a tag", v.len()))),
    }
}

/// Decodes a result: the tag each read saw, in the order of [`Program::reads`].
pub fn decode_result(result: &[u8]) -> Option<Vec<u64>> {
    result.len().is_multiple_of(8).then(|| {
        result
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect()
    })
}

/// The function.
pub fn run(ctx: &mut dyn Ctx) -> FnFuture<'_> {
    Box::pin(async move {
        let program = Program::decode(ctx.args())?;
        let value = Bytes::copy_from_slice(&program.tag.to_le_bytes());
        let mut seen = BytesMut::new();
        for step in &program.steps {
            match *step {
                Step::Read(k) | Step::Rmw(k) if typed::kind(k) != Kind::Str => {
                    let read = typed::read(ctx, typed::kind(k), &key(k)).await?;
                    seen.put_u64_le(read.tag);
                    if matches!(step, Step::Rmw(_)) {
                        typed::write(ctx, typed::kind(k), &key(k), program.tag, read).await?;
                    }
                }
                Step::Read(k) => seen.put_u64_le(tag_of(ctx.get(TABLE, &key(k)).await?)?),
                Step::Write(k) => ctx.put(TABLE, &key(k), value.clone()).await?,
                Step::Rmw(k) => {
                    seen.put_u64_le(tag_of(ctx.get(TABLE, &key(k)).await?)?);
                    ctx.put(TABLE, &key(k), value.clone()).await?;
                }
                Step::Compute(us) => ferry_func::work::spin_ns(u64::from(us) * 1_000),
                Step::Stall(ms) => std::thread::sleep(Duration::from_millis(u64::from(ms))),
            }
        }
        Ok(seen.freeze())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_round_trip_and_bad_ones_are_refused() {
        let program = Program {
            tag: 7,
            steps: vec![
                Step::Read(1),
                Step::Rmw(2),
                Step::Compute(30),
                Step::Write(4),
                Step::Stall(5),
            ],
        };
        assert_eq!(Program::decode(&program.encode()).unwrap(), program);
        assert_eq!(program.reads().collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(program.writes().collect::<Vec<_>>(), vec![2, 4]);
        let blind = Program {
            tag: 7,
            steps: vec![Step::Write(1)],
        };
        assert!(Program::decode(&blind.encode()).is_err(), "key 1 holds a hash");
        let twice = Program {
            tag: 7,
            steps: vec![Step::Read(1), Step::Write(1)],
        };
        assert!(Program::decode(&twice.encode()).is_err());
        let mut seq = 0;
        let tags: Vec<u64> = (0..1_000).map(|_| next_tag(3, &mut seq)).collect();
        assert!(tags
            .iter()
            .all(|tag| tag.to_le_bytes()[0] != BYTE_FORM_TAG && *tag != TAG_ABSENT));
        assert!(tags.windows(2).all(|pair| pair[0] < pair[1]));
        let absent = Program { tag: 0, steps: vec![] };
        assert!(Program::decode(&absent.encode()).is_err());
        assert!(Program::decode(b"short").is_err());
        assert!(Program::decode(&[1, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0]).is_err());
        assert!(Program::decode(&[1, 0, 0, 0, 0, 0, 0, 0, KIND_STALL, 0xff, 0xff]).is_err());
    }
}
