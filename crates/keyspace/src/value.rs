//! A key's value as Redis types it, and its encoding in the bytes of a ferry object.
//!
//! An object's bytes are one of:
//! - a string with no expiry whose first byte is not [`TAG`]: the bytes themselves, so a
//!   string set over RESP is the object a storage function reads and writes, unchanged;
//! - [`TAG`], a header byte (the type in its low bits, [`HAS_EXPIRY`]), the expiry as
//!   milliseconds since the Unix epoch (eight bytes, little-endian) if the header says so,
//!   then the payload: a string's bytes; a hash's count and field/value pairs; a list's
//!   count and items; a set's count and members; a sorted set's count and (score, member)
//!   pairs in order (a score as its eight IEEE-754 bytes).
//!
//! `0xFF` never starts UTF-8 text, so only binary strings that start with it pay for the
//! two header bytes. Because a value is an object's bytes, the write-ahead log, snapshots,
//! replication, slot moves and OCC carry every type without knowing it.

use bytes::{BufMut, Bytes, BytesMut};
use indexmap::{IndexMap, IndexSet};

use crate::codec::{bytes_len, len_len, put_bytes, put_len, Corrupt, Reader};
use crate::zset::ZSet;

/// First byte of every encoding with a header.
pub const TAG: u8 = 0xFF;
/// Header bit: an expiry follows the header.
pub const HAS_EXPIRY: u8 = 0x10;
const KIND_MASK: u8 = 0x0F;

/// Hash maps of fields and members from clients: aHash with per-process random keys.
pub type Hasher = ahash::RandomState;
/// A hash's fields, in insertion order (as Redis's small hashes keep them).
pub type Hash = IndexMap<Bytes, Bytes, Hasher>;
/// A set's members, in insertion order.
pub type Set = IndexSet<Bytes, Hasher>;
/// A list's items.
pub type List = std::collections::VecDeque<Bytes>;

/// A key's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A string.
    Str(Bytes),
    /// A hash.
    Hash(Hash),
    /// A list.
    List(List),
    /// A set.
    Set(Set),
    /// A sorted set.
    ZSet(ZSet),
}

/// Redis's error for a command on a key of another type.
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

impl Value {
    /// TYPE's answer.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::Hash(_) => "hash",
            Value::List(_) => "list",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
        }
    }

    fn kind(&self) -> u8 {
        match self {
            Value::Str(_) => 0,
            Value::Hash(_) => 1,
            Value::List(_) => 2,
            Value::Set(_) => 3,
            Value::ZSet(_) => 4,
        }
    }

    /// Whether it is a collection with nothing in it (Redis deletes such a key).
    pub fn is_empty_collection(&self) -> bool {
        match self {
            Value::Str(_) => false,
            Value::Hash(hash) => hash.is_empty(),
            Value::List(list) => list.is_empty(),
            Value::Set(set) => set.is_empty(),
            Value::ZSet(zset) => zset.is_empty(),
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

    /// Whether it has expired at `now_ms` (Redis: expired once the time is past the expiry).
    pub fn expired(&self, now_ms: u64) -> bool {
        self.expires_at_ms.is_some_and(|at| at <= now_ms)
    }

    /// The object bytes that store it.
    pub fn encode(&self) -> Bytes {
        if let (Value::Str(bytes), None) = (&self.value, self.expires_at_ms) {
            if bytes.first() != Some(&TAG) {
                return bytes.clone();
            }
        }
        let mut out = BytesMut::with_capacity(self.encoded_len());
        let expiry = if self.expires_at_ms.is_some() { HAS_EXPIRY } else { 0 };
        out.put_u8(TAG);
        out.put_u8(self.value.kind() | expiry);
        if let Some(at) = self.expires_at_ms {
            out.put_u64_le(at);
        }
        match &self.value {
            Value::Str(bytes) => out.put_slice(bytes),
            Value::Hash(hash) => {
                put_len(&mut out, hash.len());
                for (field, value) in hash {
                    put_bytes(&mut out, field);
                    put_bytes(&mut out, value);
                }
            }
            Value::List(list) => {
                put_len(&mut out, list.len());
                for item in list {
                    put_bytes(&mut out, item);
                }
            }
            Value::Set(set) => {
                put_len(&mut out, set.len());
                for member in set {
                    put_bytes(&mut out, member);
                }
            }
            Value::ZSet(zset) => {
                put_len(&mut out, zset.len());
                for (score, member) in zset.iter() {
                    out.put_f64_le(score);
                    put_bytes(&mut out, member);
                }
            }
        }
        out.freeze()
    }

    /// How many bytes [`Entry::encode`] makes: what the store will hold, checked against its
    /// value limit before a command writes.
    pub fn encoded_len(&self) -> usize {
        let header = 2 + if self.expires_at_ms.is_some() { 8 } else { 0 };
        let payload = match &self.value {
            Value::Str(bytes) => {
                if self.expires_at_ms.is_none() && bytes.first() != Some(&TAG) {
                    return bytes.len();
                }
                bytes.len()
            }
            Value::Hash(hash) => {
                len_len(hash.len()) + hash.iter().map(|(f, v)| bytes_len(f) + bytes_len(v)).sum::<usize>()
            }
            Value::List(list) => len_len(list.len()) + list.iter().map(|i| bytes_len(i)).sum::<usize>(),
            Value::Set(set) => len_len(set.len()) + set.iter().map(|m| bytes_len(m)).sum::<usize>(),
            Value::ZSet(zset) => len_len(zset.len()) + zset.iter().map(|(_, m)| 8 + bytes_len(m)).sum::<usize>(),
        };
        header + payload
    }

    /// The type name and expiry an object's bytes store, read from the header alone (what
    /// SCAN's TYPE filter and the keyspace-wide commands need); `None` if the header is
    /// corrupt.
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

    /// The entry an object's bytes store.
    pub fn decode(bytes: &Bytes) -> Result<Entry, Corrupt> {
        if bytes.first() != Some(&TAG) {
            return Ok(Entry::new(Value::Str(bytes.clone())));
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
            0 => Value::Str(reader.rest()),
            1 => {
                let count = reader.count(2)?;
                let mut hash = Hash::with_capacity_and_hasher(count, Hasher::new());
                for _ in 0..count {
                    let field = reader.bytes()?;
                    hash.insert(field, reader.bytes()?);
                }
                Value::Hash(hash)
            }
            2 => {
                let count = reader.count(1)?;
                let mut list = List::with_capacity(count);
                for _ in 0..count {
                    list.push_back(reader.bytes()?);
                }
                Value::List(list)
            }
            3 => {
                let count = reader.count(1)?;
                let mut set = Set::with_capacity_and_hasher(count, Hasher::new());
                for _ in 0..count {
                    set.insert(reader.bytes()?);
                }
                Value::Set(set)
            }
            4 => {
                let count = reader.count(9)?;
                let mut zset = ZSet::default();
                for _ in 0..count {
                    let score = f64::from_bits(reader.u64()?);
                    if score.is_nan() {
                        return Err(Corrupt);
                    }
                    zset.insert(reader.bytes()?, score);
                }
                Value::ZSet(zset)
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

    fn b(text: &str) -> Bytes {
        Bytes::copy_from_slice(text.as_bytes())
    }

    fn round_trip(entry: Entry) {
        let bytes = entry.encode();
        assert_eq!(bytes.len(), entry.encoded_len(), "{entry:?}");
        assert_eq!(Entry::decode(&bytes).unwrap(), entry);
    }

    #[test]
    fn a_plain_string_is_its_own_bytes() {
        let entry = Entry::new(Value::Str(b("hello")));
        assert_eq!(entry.encode(), b("hello"));
        assert_eq!(Entry::decode(&b("")).unwrap(), Entry::new(Value::Str(b(""))));
        round_trip(entry);
    }

    #[test]
    fn every_type_reads_back_with_and_without_expiry() {
        let mut hash = Hash::default();
        hash.insert(b("f"), b("v"));
        hash.insert(b(""), b(""));
        let mut set = Set::default();
        set.insert(b("a"));
        let mut zset = ZSet::default();
        zset.insert(b("m"), 1.5);
        zset.insert(b("n"), f64::NEG_INFINITY);
        let values = [
            Value::Str(Bytes::from_static(b"\xffbinary")),
            Value::Str(b("text")),
            Value::Hash(hash),
            Value::List([b("x"), b("y")].into_iter().collect()),
            Value::Set(set),
            Value::ZSet(zset),
            Value::List(List::new()),
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
    fn corrupt_encodings_are_refused_not_panicked_on() {
        for bad in [
            &b"\xff"[..],
            b"\xff\x09",
            b"\xff\x01\x05",
            b"\xff\x12\x01",
            b"\xff\x02\x01\x05ab",
            b"\xff\x01\x00extra",
        ] {
            assert_eq!(Entry::decode(&Bytes::copy_from_slice(bad)), Err(Corrupt), "{bad:?}");
        }
    }

    #[test]
    fn expiry_is_at_or_after_its_millisecond() {
        let entry = Entry {
            value: Value::Str(b("v")),
            expires_at_ms: Some(1000),
        };
        assert!(!entry.expired(999));
        assert!(entry.expired(1000));
    }
}
