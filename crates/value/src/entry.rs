//! A key's value as Redis types it, its expiry, and its byte form.
//!
//! The byte form is one of:
//! - a string with no expiry whose first byte is not [`TAG`]: the bytes themselves, so a
//!   string set over RESP is the object a storage function reads and writes, unchanged;
//! - [`TAG`], a header byte (the type in its low bits, [`HAS_EXPIRY`]), the expiry as
//!   milliseconds since the Unix epoch (eight bytes, little-endian) if the header says so,
//!   then the payload: a string's bytes; a hash's count and field/value pairs; a list's
//!   count and items; a set's count and members; a sorted set's count and (score, member)
//!   pairs in order (a score as its eight IEEE-754 bytes).
//!
//! A string that is the canonical decimal form of a 64-bit integer is held as the integer
//! ([`Value::Int`], Redis's `int` encoding: eight bytes, no allocation) and written out
//! as its digits, so its byte form is the same.
//!
//! `0xFF` never starts UTF-8 text, so only binary strings that start with it pay for the
//! two header bytes. Bytes that start with [`TAG`] but are not this form (a storage
//! function may write any bytes) are kept as they came ([`Value::Raw`]), so reading a key
//! always gives back what was written.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{bytes_len, len_len, put_bytes, put_len, Corrupt, Reader};
use crate::encodings::Encodings;
use crate::{Hash, List, Set, ZSet};

/// First byte of every byte form with a header.
pub const TAG: u8 = 0xFF;
/// Header bit: an expiry follows the header.
pub const HAS_EXPIRY: u8 = 0x10;
const KIND_MASK: u8 = 0x0F;

/// Bytes an [`Entry`] costs besides its value's own (the value's handle and the expiry).
pub const ENTRY_BYTES: usize = 16;

/// A key's value. Collections are shared (a reader holds one while the key's shard is
/// unlocked); a change to one held by nobody else is made in place.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A string.
    Str(Bytes),
    /// A string that is an integer's canonical decimal form, held as the integer.
    Int(i64),
    /// A hash.
    Hash(Arc<Hash>),
    /// A list.
    List(Arc<List>),
    /// A set.
    Set(Arc<Set>),
    /// A sorted set.
    ZSet(Arc<ZSet>),
    /// Bytes that start with [`TAG`] but are no value's byte form: kept as written, and a
    /// Redis command on them is refused.
    Raw(Bytes),
}

/// Redis's error for a command on a key of another type.
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

impl Value {
    /// A string value: held as an integer when it is one's canonical decimal form (what
    /// Redis holds as `int`: no sign but `-`, no leading zeros, within `i64`).
    pub fn string(bytes: Bytes) -> Value {
        match crate::set::as_integer(&bytes) {
            Some(n) => Value::Int(n),
            None => Value::Str(bytes),
        }
    }

    /// A string value's bytes (an integer's digits); `None` for other types.
    pub fn string_bytes(&self) -> Option<Bytes> {
        match self {
            Value::Str(bytes) => Some(bytes.clone()),
            Value::Int(n) => Some(Bytes::from(n.to_string())),
            _ => None,
        }
    }

    /// TYPE's answer.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) | Value::Int(_) | Value::Raw(_) => "string",
            Value::Hash(_) => "hash",
            Value::List(_) => "list",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
        }
    }

    /// OBJECT ENCODING's answer: for a collection, which of its two (or three) encodings
    /// holds it; a string is `int` when held as an integer, else one buffer (`raw`).
    pub fn encoding(&self) -> &'static str {
        match self {
            Value::Int(_) => "int",
            Value::Str(_) | Value::Raw(_) => "raw",
            Value::Hash(hash) => hash.encoding(),
            Value::List(list) => list.encoding(),
            Value::Set(set) => set.encoding(),
            Value::ZSet(zset) => zset.encoding(),
        }
    }

    fn kind(&self) -> u8 {
        match self {
            Value::Str(_) | Value::Int(_) | Value::Raw(_) => 0,
            Value::Hash(_) => 1,
            Value::List(_) => 2,
            Value::Set(_) => 3,
            Value::ZSet(_) => 4,
        }
    }

    /// Elements of a collection (0 for a string).
    pub fn elements(&self) -> usize {
        match self {
            Value::Str(_) | Value::Int(_) | Value::Raw(_) => 0,
            Value::Hash(hash) => hash.len(),
            Value::List(list) => list.len(),
            Value::Set(set) => set.len(),
            Value::ZSet(zset) => zset.len(),
        }
    }

    /// Whether it is a collection with nothing in it (Redis deletes such a key).
    pub fn is_empty_collection(&self) -> bool {
        !matches!(self, Value::Str(_) | Value::Int(_) | Value::Raw(_)) && self.elements() == 0
    }

    /// Bytes it holds in memory, estimated: a string's length, a collection's encoding's.
    pub fn memory_bytes(&self) -> usize {
        match self {
            Value::Str(bytes) | Value::Raw(bytes) => bytes.len(),
            Value::Int(_) => 8,
            Value::Hash(hash) => hash.memory_bytes(),
            Value::List(list) => list.memory_bytes(),
            Value::Set(set) => set.memory_bytes(),
            Value::ZSet(zset) => zset.memory_bytes(),
        }
    }
}

/// A key's value with its expiry.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// The value.
    pub value: Value,
    /// When it expires, in milliseconds since the Unix epoch.
    pub expires_at_ms: Option<u64>,
}

impl Entry {
    /// A value that does not expire.
    pub fn new(value: Value) -> Entry {
        Entry {
            value,
            expires_at_ms: None,
        }
    }

    /// A string that does not expire (held as an integer when it is one).
    pub fn string(bytes: Bytes) -> Entry {
        Entry::new(Value::string(bytes))
    }

    /// Whether it has expired at `now_ms` (Redis: expired once the time is past the expiry).
    pub fn expired(&self, now_ms: u64) -> bool {
        self.expires_at_ms.is_some_and(|at| at <= now_ms)
    }

    /// Bytes it holds in memory, estimated.
    pub fn memory_bytes(&self) -> usize {
        ENTRY_BYTES + self.value.memory_bytes()
    }

    /// The string a plain, non-expiring string entry is, without copying: what a read of
    /// its bytes returns as it is stored.
    pub fn plain_bytes(&self) -> Option<&Bytes> {
        match (&self.value, self.expires_at_ms) {
            (Value::Str(bytes), None) if bytes.first() != Some(&TAG) => Some(bytes),
            (Value::Raw(bytes), _) => Some(bytes),
            _ => None,
        }
    }

    /// Its byte form. A plain string is its own bytes (no copy); a collection is written
    /// out whole, O(n).
    pub fn encode(&self) -> Bytes {
        if let Some(bytes) = self.plain_bytes() {
            return bytes.clone();
        }
        if let (Value::Int(n), None) = (&self.value, self.expires_at_ms) {
            return Bytes::from(n.to_string());
        }
        let mut out = BytesMut::with_capacity(self.encoded_len());
        self.encode_into(&mut out);
        out.freeze()
    }

    /// Appends its byte form to `out`.
    pub fn encode_into(&self, out: &mut impl BufMut) {
        if let Some(bytes) = self.plain_bytes() {
            return out.put_slice(bytes);
        }
        if let (Value::Int(n), None) = (&self.value, self.expires_at_ms) {
            return out.put_slice(n.to_string().as_bytes());
        }
        let expiry = if self.expires_at_ms.is_some() { HAS_EXPIRY } else { 0 };
        out.put_u8(TAG);
        out.put_u8(self.value.kind() | expiry);
        if let Some(at) = self.expires_at_ms {
            out.put_u64_le(at);
        }
        match &self.value {
            Value::Str(bytes) | Value::Raw(bytes) => out.put_slice(bytes),
            Value::Int(n) => out.put_slice(n.to_string().as_bytes()),
            Value::Hash(hash) => {
                put_len(out, hash.len());
                for (field, value) in hash.iter() {
                    put_bytes(out, field);
                    put_bytes(out, value);
                }
            }
            Value::List(list) => {
                put_len(out, list.len());
                for item in list.iter() {
                    put_bytes(out, item);
                }
            }
            Value::Set(set) => {
                put_len(out, set.len());
                for member in set.iter() {
                    put_bytes(out, &member);
                }
            }
            Value::ZSet(zset) => {
                put_len(out, zset.len());
                for (score, member) in zset.iter() {
                    out.put_f64_le(score);
                    put_bytes(out, member);
                }
            }
        }
    }

    /// How many bytes [`Entry::encode`] makes.
    pub fn encoded_len(&self) -> usize {
        if let Some(bytes) = self.plain_bytes() {
            return bytes.len();
        }
        let digits = |n: &i64| n.to_string().len();
        if let (Value::Int(n), None) = (&self.value, self.expires_at_ms) {
            return digits(n);
        }
        let header = 2 + if self.expires_at_ms.is_some() { 8 } else { 0 };
        let payload = match &self.value {
            Value::Str(bytes) | Value::Raw(bytes) => bytes.len(),
            Value::Int(n) => digits(n),
            Value::Hash(hash) => {
                len_len(hash.len()) + hash.iter().map(|(f, v)| bytes_len(f) + bytes_len(v)).sum::<usize>()
            }
            Value::List(list) => len_len(list.len()) + list.iter().map(bytes_len).sum::<usize>(),
            Value::Set(set) => len_len(set.len()) + set.iter().map(|m| bytes_len(&m)).sum::<usize>(),
            Value::ZSet(zset) => len_len(zset.len()) + zset.iter().map(|(_, m)| 8 + bytes_len(m)).sum::<usize>(),
        };
        header + payload
    }

    /// The type name and expiry a byte form holds, read from its header alone; `None`
    /// if the header is no value's.
    pub fn peek(bytes: &[u8]) -> Option<(&'static str, Option<u64>)> {
        if bytes.first() != Some(&TAG) {
            return Some(("string", None));
        }
        let header = *bytes.get(1)?;
        let name = match header & KIND_MASK {
            0 => "string",
            1 => "hash",
            2 => "list",
            3 => "set",
            4 => "zset",
            _ => return None,
        };
        if header & !(KIND_MASK | HAS_EXPIRY) != 0 {
            return None;
        }
        let expires_at_ms = match header & HAS_EXPIRY {
            0 => None,
            _ => Some(u64::from_le_bytes(bytes.get(2..10)?.try_into().ok()?)),
        };
        Some((name, expires_at_ms))
    }

    /// The entry a byte form holds, each collection in the encoding its size calls for
    /// under `encodings`; bytes that are no value's byte form are a [`Value::Raw`].
    pub fn decode(bytes: &Bytes, encodings: &Encodings) -> Entry {
        match Entry::try_decode(bytes, encodings) {
            Ok(entry) => entry,
            Err(Corrupt) => Entry::new(Value::Raw(bytes.clone())),
        }
    }

    /// [`Entry::decode`], or why the bytes are no value's byte form.
    pub fn try_decode(bytes: &Bytes, encodings: &Encodings) -> Result<Entry, Corrupt> {
        if bytes.first() != Some(&TAG) {
            return Ok(Entry::string(bytes.clone()));
        }
        let header = *bytes.get(1).ok_or(Corrupt)?;
        if header & !(KIND_MASK | HAS_EXPIRY) != 0 {
            return Err(Corrupt);
        }
        let mut reader = Reader::new(bytes.clone(), 2);
        let expires_at_ms = if header & HAS_EXPIRY != 0 {
            Some(reader.u64()?)
        } else {
            None
        };
        let value = match header & KIND_MASK {
            // Only a string that needs the header has one: the same bytes otherwise are
            // not this form (a storage function's binary data), so they stay as written.
            0 if expires_at_ms.is_none() && reader.rest_starts_with() != Some(TAG) => return Err(Corrupt),
            0 => Value::string(reader.rest()),
            1 => {
                let count = reader.count(2)?;
                let mut pairs = Vec::with_capacity(count);
                for _ in 0..count {
                    pairs.push((reader.bytes()?, reader.bytes()?));
                }
                Value::Hash(Arc::new(Hash::from_pairs(
                    pairs.iter().map(|(f, v)| (&f[..], &v[..])),
                    encodings,
                )))
            }
            2 => {
                let count = reader.count(1)?;
                let mut items = Vec::with_capacity(count);
                for _ in 0..count {
                    items.push(reader.bytes()?);
                }
                Value::List(Arc::new(List::from_items(items.iter().map(|i| &i[..]), encodings)))
            }
            3 => {
                let count = reader.count(1)?;
                let mut members = Vec::with_capacity(count);
                for _ in 0..count {
                    members.push(reader.bytes()?);
                }
                Value::Set(Arc::new(Set::from_members(members.iter().map(|m| &m[..]), encodings)))
            }
            4 => {
                let count = reader.count(9)?;
                let mut pairs = Vec::with_capacity(count);
                for _ in 0..count {
                    let score = reader.f64()?;
                    pairs.push((score, reader.bytes()?));
                }
                Value::ZSet(Arc::new(ZSet::from_pairs(
                    pairs.iter().map(|(s, m)| (*s, &m[..])),
                    encodings,
                )))
            }
            _ => return Err(Corrupt),
        };
        if !reader.is_done() {
            return Err(Corrupt);
        }
        Ok(Entry { value, expires_at_ms })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encodings::DEFAULT_ENCODINGS;

    fn b(text: &str) -> Bytes {
        Bytes::copy_from_slice(text.as_bytes())
    }

    fn round_trip(entry: Entry) {
        let bytes = entry.encode();
        assert_eq!(bytes.len(), entry.encoded_len(), "{entry:?}");
        assert_eq!(Entry::try_decode(&bytes, &DEFAULT_ENCODINGS).unwrap(), entry);
    }

    #[test]
    fn a_plain_string_is_its_own_bytes() {
        let entry = Entry::string(b("hello"));
        assert_eq!(entry.encode(), b("hello"));
        assert_eq!(Entry::decode(&b(""), &DEFAULT_ENCODINGS), Entry::string(b("")));
        round_trip(entry);
    }

    #[test]
    fn every_type_reads_back_with_and_without_expiry() {
        let e = &DEFAULT_ENCODINGS;
        let mut hash = Hash::new(e);
        hash.insert(b"f", b"v", e);
        hash.insert(b"", b"", e);
        let set = Set::from_members([&b"a"[..], b"7"].into_iter(), e);
        let zset = ZSet::from_pairs([(1.5, &b"m"[..]), (f64::NEG_INFINITY, b"n")].into_iter(), e);
        let values = [
            Value::Str(Bytes::from_static(b"\xffbinary")),
            Value::Str(b("text")),
            Value::Int(-42),
            Value::Hash(Arc::new(hash)),
            Value::List(Arc::new(List::from_items([&b"x"[..], b"y"].into_iter(), e))),
            Value::Set(Arc::new(set)),
            Value::ZSet(Arc::new(zset)),
            Value::List(Arc::new(List::new())),
        ];
        for value in values {
            round_trip(Entry::new(value.clone()));
            round_trip(Entry {
                value,
                expires_at_ms: Some(1_700_000_000_123),
            });
        }
    }

    #[test]
    fn bytes_that_are_no_value_are_kept_as_written() {
        for bad in [
            &b"\xff"[..],
            b"\xff\x00text",
            b"\xff\x00\x00\x00\x00\x00\x00\x00",
            b"\xff\x09",
            b"\xff\x01\x05",
            b"\xff\x12\x01",
            b"\xff\x02\x01\x05ab",
            b"\xff\x01\x00extra",
        ] {
            let bytes = Bytes::copy_from_slice(bad);
            assert_eq!(Entry::try_decode(&bytes, &DEFAULT_ENCODINGS), Err(Corrupt), "{bad:?}");
            let entry = Entry::decode(&bytes, &DEFAULT_ENCODINGS);
            assert_eq!(entry.value, Value::Raw(bytes.clone()));
            assert_eq!(entry.encode(), bytes);
        }
    }

    #[test]
    fn a_big_collection_decodes_into_its_large_encoding() {
        let members: Vec<Vec<u8>> = (0..1000).map(|i| format!("m{i}").into_bytes()).collect();
        let set = Set::from_members(members.iter().map(|m| &m[..]), &DEFAULT_ENCODINGS);
        let entry = Entry::new(Value::Set(Arc::new(set)));
        let back = Entry::decode(&entry.encode(), &DEFAULT_ENCODINGS);
        assert_eq!(back.value.encoding(), "hashtable");
        assert_eq!(back, entry);
    }
}
