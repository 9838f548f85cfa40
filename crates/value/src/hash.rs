//! A hash: fields and their values. Small ones are one [`Pack`] of field, value, field,
//! value… in insertion order (Redis's `listpack`); past `hash-max-listpack-entries`
//! fields, or with a field or value longer than `hash-max-listpack-value`, a hash table
//! whose order is insertion order with removals filled from the end (Redis's
//! `hashtable`). A hash never goes back to packed while it lives; built from its byte
//! form it takes the encoding its size calls for.

use indexmap::IndexMap;

use crate::encodings::Encodings;
use crate::pack::Pack;
use crate::{spilled_bytes, Blob, Hasher, BLOB_BYTES};

/// A field and its value, as a hash holds them.
pub type Pair<'a> = (&'a [u8], &'a [u8]);

/// A hash's fields.
#[derive(Clone, Debug)]
pub enum Hash {
    /// Field, value, field, value…
    Pack(Pack),
    /// A table, with the bytes of fields and values too long to sit inline.
    Table(IndexMap<Blob, Blob, Hasher>, usize),
}

/// Bytes a table entry costs besides spilled strings: the entry (hash, field, value) and
/// its share of the index (a slot and a control byte at the table's load).
const TABLE_ENTRY_BYTES: usize = 8 + 2 * BLOB_BYTES + 10;

impl Default for Hash {
    fn default() -> Hash {
        Hash::Pack(Pack::new())
    }
}

impl PartialEq for Hash {
    /// The same fields with the same values, in any order and encoding.
    fn eq(&self, other: &Hash) -> bool {
        self.len() == other.len() && self.iter().all(|(f, v)| other.get(f) == Some(v))
    }
}

impl Hash {
    /// An empty hash in the encoding `encodings` starts one in.
    pub fn new(encodings: &Encodings) -> Hash {
        if encodings.hash_max_listpack_entries == 0 {
            Hash::Table(IndexMap::default(), 0)
        } else {
            Hash::default()
        }
    }

    /// A hash of `pairs`, in the encoding their number and sizes call for.
    pub fn from_pairs<'a>(pairs: impl ExactSizeIterator<Item = (&'a [u8], &'a [u8])>, encodings: &Encodings) -> Hash {
        let mut hash = if pairs.len() > encodings.hash_max_listpack_entries {
            Hash::Table(IndexMap::with_capacity_and_hasher(pairs.len(), Hasher::default()), 0)
        } else {
            Hash::new(encodings)
        };
        for (field, value) in pairs {
            hash.insert(field, value, encodings);
        }
        hash
    }

    /// Fields.
    pub fn len(&self) -> usize {
        match self {
            Hash::Pack(pack) => pack.len() / 2,
            Hash::Table(table, _) => table.len(),
        }
    }

    /// Whether it has no field.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// OBJECT ENCODING's name for how it is held.
    pub fn encoding(&self) -> &'static str {
        match self {
            Hash::Pack(_) => "listpack",
            Hash::Table(..) => "hashtable",
        }
    }

    /// Bytes it holds in memory, estimated from its encoding and contents.
    pub fn memory_bytes(&self) -> usize {
        match self {
            Hash::Pack(pack) => pack.byte_len(),
            Hash::Table(table, spilled) => table.len() * TABLE_ENTRY_BYTES + spilled,
        }
    }

    /// The position of `field`'s entry in a packed hash.
    fn packed_index(pack: &Pack, field: &[u8]) -> Option<usize> {
        let mut entries = pack.iter();
        let mut index = 0;
        while let Some(entry) = entries.next() {
            if entry == field {
                return Some(index);
            }
            entries.next();
            index += 2;
        }
        None
    }

    /// A field's value.
    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match self {
            Hash::Pack(pack) => {
                let mut entries = pack.iter();
                while let Some(entry) = entries.next() {
                    let value = entries.next();
                    if entry == field {
                        return value;
                    }
                }
                None
            }
            Hash::Table(table, _) => table.get(field).map(|v| &v[..]),
        }
    }

    /// Whether it has `field`.
    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// Sets `field` to `value`; its old value if it had one. Moves to the table once
    /// packed no longer fits `encodings`.
    pub fn insert(&mut self, field: &[u8], value: &[u8], encodings: &Encodings) -> Option<Blob> {
        if let Hash::Pack(pack) = self {
            let fits =
                field.len() <= encodings.hash_max_listpack_value && value.len() <= encodings.hash_max_listpack_value;
            match Hash::packed_index(pack, field) {
                Some(at) if fits => return Some(pack.replace(at + 1, value)),
                None if fits && pack.len() / 2 < encodings.hash_max_listpack_entries => {
                    pack.push_back(field);
                    pack.push_back(value);
                    return None;
                }
                _ => self.make_table(),
            }
        }
        let Hash::Table(table, spilled) = self else {
            unreachable!("converted above")
        };
        *spilled += spilled_bytes(value);
        match table.get_mut(field) {
            Some(old) => {
                *spilled -= spilled_bytes(old);
                Some(std::mem::replace(old, Blob::from_slice(value)))
            }
            None => {
                *spilled += spilled_bytes(field);
                table.insert(Blob::from_slice(field), Blob::from_slice(value));
                None
            }
        }
    }

    /// Removes `field`; its value if it had one.
    pub fn remove(&mut self, field: &[u8]) -> Option<Blob> {
        match self {
            Hash::Pack(pack) => {
                let at = Hash::packed_index(pack, field)?;
                pack.remove(at);
                Some(pack.remove(at))
            }
            Hash::Table(table, spilled) => {
                let (field, value) = table.swap_remove_entry(field)?;
                *spilled -= spilled_bytes(&field) + spilled_bytes(&value);
                Some(value)
            }
        }
    }

    /// Field and value of the pair at `index` (below `len`), in iteration order: what a
    /// random pick reads.
    pub fn get_index(&self, index: usize) -> Option<(&[u8], &[u8])> {
        match self {
            Hash::Pack(pack) => {
                let mut entries = pack.iter_from(2 * index);
                Some((entries.next()?, entries.next()?))
            }
            Hash::Table(table, _) => table.get_index(index).map(|(f, v)| (&f[..], &v[..])),
        }
    }

    /// One step of HSCAN from `cursor` (0: the start), visiting about `count` fields:
    /// the pairs visited and the next cursor (0: done). A packed hash is visited whole,
    /// as Redis does; a table from its last position down, so a field moved by a
    /// removal (the last one fills the hole) only moves down and is never skipped: a
    /// field present for the whole scan is returned at least once.
    pub fn scan(&self, cursor: u64, count: usize) -> (u64, Vec<Pair<'_>>) {
        match self {
            Hash::Pack(_) => (0, self.iter().collect()),
            Hash::Table(table, _) => {
                let (next, positions) = crate::scan::downwards(cursor, count, table.len());
                let pairs = positions
                    .filter_map(|at| table.get_index(at))
                    .map(|(f, v)| (&f[..], &v[..]))
                    .collect();
                (next, pairs)
            }
        }
    }

    /// (field, value) pairs, in order.
    pub fn iter(&self) -> Iter<'_> {
        match self {
            Hash::Pack(pack) => Iter::Pack(pack.iter()),
            Hash::Table(table, _) => Iter::Table(table.iter()),
        }
    }

    fn make_table(&mut self) {
        let Hash::Pack(pack) = self else { return };
        let mut table = IndexMap::with_capacity_and_hasher(pack.len() / 2 + 1, Hasher::default());
        let mut spilled = 0;
        let mut entries = pack.iter();
        while let (Some(field), Some(value)) = (entries.next(), entries.next()) {
            spilled += spilled_bytes(field) + spilled_bytes(value);
            table.insert(Blob::from_slice(field), Blob::from_slice(value));
        }
        *self = Hash::Table(table, spilled);
    }
}

/// A hash's pairs.
pub enum Iter<'a> {
    /// Of a packed hash.
    Pack(crate::pack::Iter<'a>),
    /// Of a table.
    Table(indexmap::map::Iter<'a, Blob, Blob>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Pack(entries) => Some((entries.next()?, entries.next()?)),
            Iter::Table(entries) => entries.next().map(|(f, v)| (&f[..], &v[..])),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;
    use crate::encodings::DEFAULT_ENCODINGS;

    #[test]
    fn a_hash_leaves_its_pack_past_either_threshold() {
        let small = Encodings {
            hash_max_listpack_entries: 2,
            hash_max_listpack_value: 4,
            ..DEFAULT_ENCODINGS
        };
        let mut hash = Hash::new(&small);
        hash.insert(b"a", b"1", &small);
        hash.insert(b"b", b"2", &small);
        assert_eq!(hash.encoding(), "listpack");
        assert_eq!(hash.insert(b"a", b"one", &small).as_deref(), Some(&b"1"[..]));
        hash.insert(b"c", b"3", &small);
        assert_eq!(hash.encoding(), "hashtable");
        let mut hash = Hash::new(&small);
        hash.insert(b"a", b"too long", &small);
        assert_eq!(hash.encoding(), "hashtable");
        assert_eq!(hash.get(b"a"), Some(&b"too long"[..]));
        // Built from pairs, the encoding is what the size calls for.
        let rebuilt = Hash::from_pairs([(&b"a"[..], &b"1"[..])].into_iter(), &small);
        assert_eq!(rebuilt.encoding(), "listpack");
    }

    proptest! {
        /// Either encoding behaves as a map from field to value.
        #[test]
        fn a_hash_is_a_map(ops in proptest::collection::vec((any::<bool>(), 0u8..40, proptest::collection::vec(any::<u8>(), 0..70)), 0..300)) {
            let encodings = Encodings { hash_max_listpack_entries: 16, hash_max_listpack_value: 32, ..DEFAULT_ENCODINGS };
            let mut hash = Hash::new(&encodings);
            let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
            for (insert, field, value) in ops {
                let field = vec![field];
                if insert {
                    let old = hash.insert(&field, &value, &encodings).map(|b| b.to_vec());
                    prop_assert_eq!(old, model.insert(field.clone(), value));
                } else {
                    prop_assert_eq!(hash.remove(&field).map(|b| b.to_vec()), model.remove(&field));
                }
                prop_assert_eq!(hash.len(), model.len());
                prop_assert_eq!(hash.get(&field).map(<[u8]>::to_vec), model.get(&field).cloned());
            }
            let pairs: HashMap<Vec<u8>, Vec<u8>> = hash.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
            prop_assert_eq!(&pairs, &model);
            for i in 0..hash.len() {
                let (f, v) = hash.get_index(i).unwrap();
                prop_assert_eq!(model.get(f).map(Vec::as_slice), Some(v));
            }
        }
    }
}
