//! The bit commands over strings: SETBIT, GETBIT, BITCOUNT, BITPOS and BITOP. Bit 0 is the
//! most significant bit of byte 0, as in Redis; a missing key reads as an endless run of
//! zero bits.

use bytes::{Bytes, BytesMut};
use ferry_resp::Reply;
use ferry_value::{Entry, Value};

use crate::args::{int, is, syntax};
use crate::cmd::string::MAX_STRING_BYTES;
use crate::cmd::Outcome;
use crate::keys::Keys;

/// Highest bit offset SETBIT and GETBIT take: the last bit of the longest string.
pub const MAX_BIT_OFFSET: u64 = MAX_STRING_BYTES as u64 * 8 - 1;

fn offset_of(word: &[u8]) -> Result<u64, Reply> {
    int(word)
        .ok()
        .and_then(|offset| u64::try_from(offset).ok())
        .filter(|&offset| offset <= MAX_BIT_OFFSET)
        .ok_or_else(|| Reply::err("bit offset is not an integer or out of range"))
}

fn bit_at(bytes: &[u8], offset: u64) -> bool {
    bytes
        .get((offset / 8) as usize)
        .is_some_and(|byte| byte & (0x80 >> (offset % 8)) != 0)
}

/// SETBIT key offset 0|1: the bit it held.
pub fn setbit(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let offset = offset_of(&words[2])?;
    let on = match &words[3][..] {
        b"1" => true,
        b"0" => false,
        _ => return Err(Reply::err("bit is not an integer or out of range")),
    };
    let old_entry = keys.entry(&words[1])?.cloned();
    let old = match &old_entry {
        Some(entry) => entry.value.string_bytes().ok_or_else(crate::keys::wrong_type)?,
        None => Bytes::new(),
    };
    let was = bit_at(&old, offset);
    let byte = (offset / 8) as usize;
    let mut value = BytesMut::from(&old[..]);
    if value.len() <= byte {
        value.resize(byte + 1, 0);
    }
    let mask = 0x80 >> (offset % 8);
    if on {
        value[byte] |= mask;
    } else {
        value[byte] &= !mask;
    }
    let expires_at_ms = old_entry.and_then(|entry| entry.expires_at_ms);
    // A string the bits built is raw bytes, never an integer (as in Redis).
    let entry = Entry {
        value: Value::Str(value.freeze()),
        expires_at_ms,
    };
    keys.put(&words[1], Some(entry))?;
    Ok(Reply::Integer(i64::from(was)))
}

/// GETBIT key offset.
pub fn getbit(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let offset = offset_of(&words[2])?;
    let value = keys.string(&words[1])?.unwrap_or_default();
    Ok(Reply::Integer(i64::from(bit_at(&value, offset))))
}

/// The bits `[first, last]` a BITCOUNT or BITPOS range names in a string of `len` bytes,
/// with negative indexes from the end, in bytes or (`in_bits`) bits; `None` if empty.
fn bit_range(start: i64, end: i64, len: usize, in_bits: bool) -> Option<(u64, u64)> {
    if start < 0 && end < 0 && start > end {
        return None;
    }
    let total = if in_bits { len as i64 * 8 } else { len as i64 };
    let from_end = |index: i64| if index < 0 { (total + index).max(0) } else { index };
    let (start, end) = (from_end(start), from_end(end).min(total - 1));
    if start > end {
        return None;
    }
    let (start, end) = (start as u64, end as u64);
    Some(if in_bits {
        (start, end)
    } else {
        (start * 8, end * 8 + 7)
    })
}

/// The BYTE|BIT word of a range, if given: whether the range is in bits.
fn unit(word: Option<&Bytes>) -> Result<bool, Reply> {
    match word {
        None => Ok(false),
        Some(word) if is(word, "BIT") => Ok(true),
        Some(word) if is(word, "BYTE") => Ok(false),
        Some(_) => Err(syntax()),
    }
}

/// Set bits in `[first, last]` of `bytes`.
fn count_ones(bytes: &[u8], first: u64, last: u64) -> u64 {
    let (first_byte, last_byte) = ((first / 8) as usize, (last / 8) as usize);
    let mut count: u64 = bytes[first_byte..=last_byte]
        .iter()
        .map(|byte| u64::from(byte.count_ones()))
        .sum();
    // Take off the bits of the edge bytes outside the range.
    let before = bytes[first_byte] & !(0xFFu8 >> (first % 8));
    let after = bytes[last_byte] & (0x7Fu8 >> (last % 8));
    count -= u64::from(before.count_ones()) + u64::from(after.count_ones());
    count
}

/// The first bit in `[first, last]` of `bytes` that is `want`, skipping whole bytes
/// that cannot hold it.
fn first_bit(bytes: &[u8], first: u64, last: u64, want: bool) -> Option<u64> {
    let skip = if want { 0x00 } else { 0xFF };
    let mut bit = first;
    while bit <= last {
        if bit.is_multiple_of(8) && bit + 7 <= last && bytes[(bit / 8) as usize] == skip {
            bit += 8;
            continue;
        }
        if bit_at(bytes, bit) == want {
            return Some(bit);
        }
        bit += 1;
    }
    None
}

/// BITCOUNT key [start end [BYTE|BIT]].
pub fn bitcount(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let value = keys.string(&words[1])?;
    let range = match words.len() {
        2 => None,
        4 | 5 => Some((int(&words[2])?, int(&words[3])?, unit(words.get(4))?)),
        _ => return Err(syntax()),
    };
    let Some(value) = value else {
        return Ok(Reply::Integer(0));
    };
    let bits = match range {
        None if value.is_empty() => None,
        None => Some((0, value.len() as u64 * 8 - 1)),
        Some((start, end, in_bits)) => bit_range(start, end, value.len(), in_bits),
    };
    Ok(Reply::Integer(
        bits.map_or(0, |(first, last)| count_ones(&value, first, last) as i64),
    ))
}

/// BITPOS key bit [start [end [BYTE|BIT]]]: the first bit set to `bit` in the range, or
/// -1. Looking for a 0 with no end given, the string counts as followed by zeros (the bit
/// after its end), as in Redis.
pub fn bitpos(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let want = match int(&words[2])? {
        0 => false,
        1 => true,
        _ => return Err(Reply::err("The bit argument must be 1 or 0.")),
    };
    if words.len() > 6 {
        return Err(syntax());
    }
    let Some(value) = keys.string(&words[1])? else {
        return Ok(Reply::Integer(if want { -1 } else { 0 }));
    };
    let start = words.get(3).map(|word| int(word)).transpose()?.unwrap_or(0);
    let end_given = words.len() >= 5;
    let end = if end_given { int(&words[4])? } else { -1 };
    let Some((first, last)) = bit_range(start, end, value.len(), unit(words.get(5))?) else {
        return Ok(Reply::Integer(-1));
    };
    let found = first_bit(&value, first, last, want);
    Ok(Reply::Integer(match found {
        Some(bit) => bit as i64,
        None if !want && !end_given => last as i64 + 1,
        None => -1,
    }))
}

/// BITOP AND|OR|XOR|NOT destkey key [key ...]: the length of the string stored.
pub fn bitop(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let op = String::from_utf8_lossy(&words[1]).to_ascii_uppercase();
    if !["AND", "OR", "XOR", "NOT"].contains(&op.as_str()) {
        return Err(syntax());
    }
    let sources = &words[3..];
    if op == "NOT" && sources.len() != 1 {
        return Err(Reply::err("BITOP NOT must be called with a single source key."));
    }
    let mut strings = Vec::with_capacity(sources.len());
    for key in sources {
        strings.push(keys.string(key)?.unwrap_or_default());
    }
    let len = strings.iter().map(Bytes::len).max().unwrap_or(0);
    let byte_at = |string: &Bytes, i: usize| string.get(i).copied().unwrap_or(0);
    let result: Vec<u8> = (0..len)
        .map(|i| {
            let mut bytes = strings.iter().map(|string| byte_at(string, i));
            let first = bytes.next().unwrap_or(0);
            match op.as_str() {
                "AND" => bytes.fold(first, |acc, byte| acc & byte),
                "OR" => bytes.fold(first, |acc, byte| acc | byte),
                "XOR" => bytes.fold(first, |acc, byte| acc ^ byte),
                _ => !first,
            }
        })
        .collect();
    let stored = (!result.is_empty()).then(|| Entry::new(Value::Str(Bytes::from(result))));
    keys.put(&words[2], stored)?;
    Ok(Reply::Integer(len as i64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_counts_follow_redis() {
        let bytes = b"foobar";
        // Redis's documented answers for "foobar".
        let count = |start, end, in_bits| {
            bit_range(start, end, bytes.len(), in_bits).map_or(0, |(first, last)| count_ones(bytes, first, last))
        };
        assert_eq!(count(0, -1, false), 26);
        assert_eq!(count(0, 0, false), 4);
        assert_eq!(count(1, 1, false), 6);
        assert_eq!(count(1, 1, true), 1);
        assert_eq!(count(5, 30, true), 17);
        assert_eq!(count(-1, -2, false), 0);
        assert_eq!(count(-100, -200, false), 0);
        assert!(bit_at(b"\x80", 0) && !bit_at(b"\x80", 1) && !bit_at(b"", 100));
        // BITPOS's scan: "\xff\xf0\x00" has its first 0 at bit 12, its first 1 at 0.
        let bytes = b"\xff\xf0\x00";
        assert_eq!(first_bit(bytes, 0, 23, false), Some(12));
        assert_eq!(first_bit(bytes, 0, 23, true), Some(0));
        assert_eq!(first_bit(bytes, 16, 23, true), None);
        assert_eq!(first_bit(bytes, 13, 14, true), None);
    }
}
