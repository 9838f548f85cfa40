//! The blocking pops (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP)
//! as the non-blocking data command each repeats (LMPOP, ZMPOP, LMOVE, RPOPLPUSH), its
//! timeout, and how its reply is made from the step's.

use bytes::Bytes;

use crate::Reply;

/// A blocking pop, as the data command it repeats.
#[derive(Clone, Debug, PartialEq)]
pub struct Blocking {
    /// The step: LMPOP, ZMPOP, LMOVE or RPOPLPUSH words.
    pub step: Vec<Bytes>,
    /// Longest wait in milliseconds; `None`: forever (a timeout of 0).
    pub timeout_ms: Option<u64>,
    /// How the step's reply becomes the command's.
    pub shape: BlockingShape,
}

/// How a blocking pop's reply is made from its step's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockingShape {
    /// The step's reply as it is (BLMPOP, BZMPOP, BLMOVE, BRPOPLPUSH).
    Same,
    /// `[key, [element]]` becomes `[key, element]` (BLPOP, BRPOP).
    KeyAndElement,
    /// `[key, [[member, score]]]` becomes `[key, member, score]` (BZPOPMIN, BZPOPMAX).
    KeyMemberScore,
}

impl BlockingShape {
    /// The command's reply for the step's `reply` (a null stays null).
    pub fn reply(self, reply: Reply) -> Reply {
        let Reply::Array(mut parts) = reply else { return reply };
        match (self, parts.pop()) {
            (BlockingShape::Same, Some(last)) => {
                parts.push(last);
                Reply::Array(parts)
            }
            (BlockingShape::KeyAndElement, Some(Reply::Array(mut elements))) if !elements.is_empty() => {
                parts.push(elements.swap_remove(0));
                Reply::Array(parts)
            }
            (BlockingShape::KeyMemberScore, Some(Reply::Array(mut pairs))) if !pairs.is_empty() => {
                if let Reply::Array(pair) = pairs.swap_remove(0) {
                    parts.extend(pair);
                }
                Reply::Array(parts)
            }
            (_, other) => {
                parts.extend(other);
                Reply::Array(parts)
            }
        }
    }
}

impl Blocking {
    /// The TYPE a key must have for the pop to take from it: `zset` for ZMPOP, `list`
    /// for the others.
    pub fn source_type(&self) -> &'static str {
        if self.step[0].eq_ignore_ascii_case(b"ZMPOP") {
            "zset"
        } else {
            "list"
        }
    }

    /// The keys it pops from, as the command table names the step's keys: all of them,
    /// but for LMOVE and RPOPLPUSH only the first (the other is the destination).
    pub fn sources(&self) -> Vec<Bytes> {
        let Some(spec) = crate::table::lookup(&self.step[0]) else {
            return Vec::new();
        };
        let keys = spec.keys(&self.step);
        let moves = self.step[0].eq_ignore_ascii_case(b"LMOVE") || self.step[0].eq_ignore_ascii_case(b"RPOPLPUSH");
        let sources = if moves { &keys[..keys.len().min(1)] } else { &keys[..] };
        sources.iter().map(|key| (*key).clone()).collect()
    }
}

/// Most a blocking pop may wait: bounds the timeout's arithmetic (about 31 years).
pub const MAX_BLOCKING_TIMEOUT_MS: u64 = 1 << 40;

/// A number as C's `strtold` reads it, which Redis's timeouts go through: a decimal
/// float, or a hexadecimal integer (`0x…`).
fn read_seconds(text: &str) -> Option<f64> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if let Some(hex) = digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        let value = u128::from_str_radix(hex, 16).ok()? as f64;
        return Some(if negative { -value } else { value });
    }
    text.parse::<f64>().ok()
}

/// A blocking pop's timeout in seconds (a float, as Redis 6+ takes it).
fn blocking_timeout(word: &Bytes) -> Result<Option<u64>, Reply> {
    let seconds = std::str::from_utf8(word)
        .ok()
        .and_then(read_seconds)
        .filter(|seconds| seconds.is_finite())
        .ok_or_else(|| Reply::err("timeout is not a float or out of range"))?;
    if seconds < 0.0 {
        return Err(Reply::err("timeout is negative"));
    }
    let ms = (seconds * 1000.0).round() as u64;
    if ms > MAX_BLOCKING_TIMEOUT_MS {
        return Err(Reply::err("timeout is out of range"));
    }
    Ok((ms > 0).then_some(ms))
}

/// The blocking pop `name` of `words` (the name first) as its step.
pub(crate) fn parse(name: &str, words: Vec<Bytes>) -> Result<Blocking, Reply> {
    let n = words.len();
    let word = |text: &'static str| Bytes::from_static(text.as_bytes());
    let count = |n: usize| Bytes::from(n.to_string());
    let (step, timeout, shape) = match name {
        "blpop" | "brpop" | "bzpopmin" | "bzpopmax" => {
            let keys = &words[1..n - 1];
            let (command, side, shape) = match name {
                "blpop" => ("LMPOP", "LEFT", BlockingShape::KeyAndElement),
                "brpop" => ("LMPOP", "RIGHT", BlockingShape::KeyAndElement),
                "bzpopmin" => ("ZMPOP", "MIN", BlockingShape::KeyMemberScore),
                _ => ("ZMPOP", "MAX", BlockingShape::KeyMemberScore),
            };
            let mut step = vec![word(command), count(keys.len())];
            step.extend(keys.iter().cloned());
            step.push(word(side));
            (step, &words[n - 1], shape)
        }
        "blmpop" | "bzmpop" => {
            let command = if name == "blmpop" { "LMPOP" } else { "ZMPOP" };
            let mut step = vec![word(command)];
            step.extend(words[2..].iter().cloned());
            (step, &words[1], BlockingShape::Same)
        }
        "blmove" => {
            let mut step = vec![word("LMOVE")];
            step.extend(words[1..5].iter().cloned());
            (step, &words[5], BlockingShape::Same)
        }
        _ => {
            // brpoplpush source destination timeout
            let step = vec![word("RPOPLPUSH"), words[1].clone(), words[2].clone()];
            (step, &words[3], BlockingShape::Same)
        }
    };
    Ok(Blocking {
        timeout_ms: blocking_timeout(timeout)?,
        step,
        shape,
    })
}
