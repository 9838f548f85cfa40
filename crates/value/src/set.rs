//! A set: distinct members. All-integer sets up to `set-max-intset-entries` are a sorted
//! array of integers (Redis's `intset`); other small sets one [`Pack`] of members in
//! insertion order (`listpack`, up to `set-max-listpack-entries` members of at most
//! `set-max-listpack-value` bytes); larger ones a hash table (`hashtable`) whose order is
//! insertion order with removals filled from the end.

use std::borrow::Cow;

use indexmap::IndexSet;

use crate::encodings::Encodings;
use crate::pack::Pack;
use crate::{spilled_bytes, Blob, Hasher, BLOB_BYTES};

/// A set's members.
#[derive(Clone, Debug)]
pub enum Set {
    /// Sorted integers.
    Ints(Vec<i64>),
    /// Members in insertion order.
    Pack(Pack),
    /// A table, with the bytes of members too long to sit inline.
    Table(IndexSet<Blob, Hasher>, usize),
}

/// Bytes a table member costs besides spilled strings (entry and index share).
const TABLE_ENTRY_BYTES: usize = 8 + BLOB_BYTES + 10;

/// The integer a member is, if Redis would store it as one: the canonical decimal form
/// of an `i64` (no sign but a leading `-`, no leading zeros, no `-0`).
pub fn as_integer(member: &[u8]) -> Option<i64> {
    if member.is_empty() || member.len() > 20 {
        return None;
    }
    let text = std::str::from_utf8(member).ok()?;
    let value: i64 = text.parse().ok()?;
    (value.to_string().as_bytes() == member).then_some(value)
}

impl Default for Set {
    fn default() -> Set {
        Set::Pack(Pack::new())
    }
}

impl PartialEq for Set {
    /// The same members, in any order and encoding.
    fn eq(&self, other: &Set) -> bool {
        self.len() == other.len() && self.iter().all(|m| other.contains(&m))
    }
}

impl Set {
    /// An empty set in the encoding its first member `first` calls for.
    pub fn for_member(first: &[u8], encodings: &Encodings) -> Set {
        if encodings.set_max_intset_entries > 0 && as_integer(first).is_some() {
            Set::Ints(Vec::new())
        } else if encodings.set_max_listpack_entries > 0 && first.len() <= encodings.set_max_listpack_value {
            Set::Pack(Pack::new())
        } else {
            Set::Table(IndexSet::default(), 0)
        }
    }

    /// A set of `members` (distinct or not), in the encoding they call for.
    pub fn from_members<'a>(members: impl Iterator<Item = &'a [u8]> + Clone, encodings: &Encodings) -> Set {
        let count = members.clone().count();
        let all_integers = members.clone().all(|m| as_integer(m).is_some());
        let mut set = if all_integers && count <= encodings.set_max_intset_entries {
            Set::Ints(Vec::with_capacity(count))
        } else if count <= encodings.set_max_listpack_entries
            && members.clone().all(|m| m.len() <= encodings.set_max_listpack_value)
        {
            Set::Pack(Pack::new())
        } else {
            Set::Table(IndexSet::with_capacity_and_hasher(count, Hasher::default()), 0)
        };
        for member in members {
            set.insert(member, encodings);
        }
        set
    }

    /// Members.
    pub fn len(&self) -> usize {
        match self {
            Set::Ints(ints) => ints.len(),
            Set::Pack(pack) => pack.len(),
            Set::Table(table, _) => table.len(),
        }
    }

    /// Whether it has no member.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// OBJECT ENCODING's name for how it is held.
    pub fn encoding(&self) -> &'static str {
        match self {
            Set::Ints(_) => "intset",
            Set::Pack(_) => "listpack",
            Set::Table(..) => "hashtable",
        }
    }

    /// Bytes it holds in memory, estimated from its encoding and contents.
    pub fn memory_bytes(&self) -> usize {
        match self {
            Set::Ints(ints) => ints.len() * 8,
            Set::Pack(pack) => pack.byte_len(),
            Set::Table(table, spilled) => table.len() * TABLE_ENTRY_BYTES + spilled,
        }
    }

    /// Whether `member` is in it.
    pub fn contains(&self, member: &[u8]) -> bool {
        match self {
            Set::Ints(ints) => as_integer(member).is_some_and(|n| ints.binary_search(&n).is_ok()),
            Set::Pack(pack) => pack.iter().any(|m| m == member),
            Set::Table(table, _) => table.contains(member),
        }
    }

    /// Adds `member`; whether it was new. Moves to a larger encoding when the current one
    /// no longer fits `encodings`.
    pub fn insert(&mut self, member: &[u8], encodings: &Encodings) -> bool {
        if let Set::Ints(ints) = self {
            match as_integer(member) {
                Some(n) => match ints.binary_search(&n) {
                    Ok(_) => return false,
                    Err(at) if ints.len() < encodings.set_max_intset_entries => {
                        ints.insert(at, n);
                        return true;
                    }
                    Err(_) => self.convert(false),
                },
                None => {
                    let widest = ints.iter().map(|n| n.to_string().len()).max().unwrap_or(0);
                    let packs = ints.len() < encodings.set_max_listpack_entries
                        && widest.max(member.len()) <= encodings.set_max_listpack_value;
                    self.convert(packs);
                }
            }
        }
        if let Set::Pack(pack) = self {
            if pack.iter().any(|m| m == member) {
                return false;
            }
            if pack.len() < encodings.set_max_listpack_entries && member.len() <= encodings.set_max_listpack_value {
                pack.push_back(member);
                return true;
            }
            self.convert(false);
        }
        let Set::Table(table, spilled) = self else {
            unreachable!("converted above")
        };
        let added = table.insert(Blob::from_slice(member));
        if added {
            *spilled += spilled_bytes(member);
        }
        added
    }

    /// Removes `member`; whether it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self {
            Set::Ints(ints) => match as_integer(member).map(|n| ints.binary_search(&n)) {
                Some(Ok(at)) => {
                    ints.remove(at);
                    true
                }
                _ => false,
            },
            Set::Pack(pack) => match pack.position(|m| m == member) {
                Some(at) => {
                    pack.remove(at);
                    true
                }
                None => false,
            },
            Set::Table(table, spilled) => {
                let removed = table.swap_remove(member);
                if removed {
                    *spilled -= spilled_bytes(member);
                }
                removed
            }
        }
    }

    /// The member at `index` (below `len`) in iteration order: what a random pick reads.
    pub fn get_index(&self, index: usize) -> Option<Cow<'_, [u8]>> {
        match self {
            Set::Ints(ints) => ints.get(index).map(|n| Cow::Owned(n.to_string().into_bytes())),
            Set::Pack(pack) => pack.get(index).map(Cow::Borrowed),
            Set::Table(table, _) => table.get_index(index).map(|m| Cow::Borrowed(&m[..])),
        }
    }

    /// One step of SSCAN from `cursor` (0: the start), visiting about `count` members:
    /// the members visited and the next cursor (0: done); see [`crate::Hash::scan`].
    pub fn scan(&self, cursor: u64, count: usize) -> (u64, Vec<Cow<'_, [u8]>>) {
        match self {
            Set::Ints(_) | Set::Pack(_) => (0, self.iter().collect()),
            Set::Table(table, _) => {
                let (next, positions) = crate::scan::downwards(cursor, count, table.len());
                let members = positions
                    .filter_map(|at| table.get_index(at))
                    .map(|m| Cow::Borrowed(&m[..]))
                    .collect();
                (next, members)
            }
        }
    }

    /// Members, in order (integers ascending; others in insertion order).
    pub fn iter(&self) -> Iter<'_> {
        match self {
            Set::Ints(ints) => Iter::Ints(ints.iter()),
            Set::Pack(pack) => Iter::Pack(pack.iter()),
            Set::Table(table, _) => Iter::Table(table.iter()),
        }
    }

    /// Moves to packed (`packs`) or to the table.
    fn convert(&mut self, packs: bool) {
        let members: Vec<Vec<u8>> = self.iter().map(Cow::into_owned).collect();
        *self = if packs {
            let mut pack = Pack::new();
            for member in &members {
                pack.push_back(member);
            }
            Set::Pack(pack)
        } else {
            let spilled = members.iter().map(|m| spilled_bytes(m)).sum();
            Set::Table(members.iter().map(|m| Blob::from_slice(m)).collect(), spilled)
        };
    }
}

/// A set's members.
pub enum Iter<'a> {
    /// Of an integer set.
    Ints(std::slice::Iter<'a, i64>),
    /// Of a packed set.
    Pack(crate::pack::Iter<'a>),
    /// Of a table.
    Table(indexmap::set::Iter<'a, Blob>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = Cow<'a, [u8]>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Ints(ints) => ints.next().map(|n| Cow::Owned(n.to_string().into_bytes())),
            Iter::Pack(members) => members.next().map(Cow::Borrowed),
            Iter::Table(members) => members.next().map(|m| Cow::Borrowed(&m[..])),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use proptest::prelude::*;

    use super::*;
    use crate::encodings::DEFAULT_ENCODINGS;

    #[test]
    fn integers_are_redis_canonical_ones() {
        assert_eq!(as_integer(b"12"), Some(12));
        assert_eq!(as_integer(b"-7"), Some(-7));
        for not in [&b"012"[..], b"+1", b"-0", b"", b"1.0", b" 1", b"99999999999999999999"] {
            assert_eq!(as_integer(not), None, "{not:?}");
        }
    }

    #[test]
    fn a_set_moves_from_intset_to_listpack_to_hashtable() {
        let small = Encodings {
            set_max_intset_entries: 3,
            set_max_listpack_entries: 4,
            set_max_listpack_value: 5,
            ..DEFAULT_ENCODINGS
        };
        let mut set = Set::for_member(b"1", &small);
        for m in [&b"3"[..], b"1", b"2"] {
            set.insert(m, &small);
        }
        assert_eq!(set.encoding(), "intset");
        assert_eq!(
            set.iter().map(Cow::into_owned).collect::<Vec<_>>(),
            vec![b"1".to_vec(), b"2".to_vec(), b"3".to_vec()]
        );
        set.insert(b"a", &small);
        assert_eq!(set.encoding(), "listpack");
        set.insert(b"b", &small);
        assert_eq!(set.encoding(), "hashtable");
        assert_eq!(set.len(), 5);
        // Too many integers go straight to the table.
        let mut ints = Set::for_member(b"1", &small);
        for n in 0..4 {
            ints.insert(n.to_string().as_bytes(), &small);
        }
        assert_eq!(ints.encoding(), "hashtable");
        assert_eq!(Set::for_member(b"too long", &small).encoding(), "hashtable");
    }

    proptest! {
        /// Every encoding behaves as a set of byte strings.
        #[test]
        fn a_set_is_a_set(ops in proptest::collection::vec((any::<bool>(), prop_oneof![(0i64..30).prop_map(|n| n.to_string().into_bytes()), proptest::collection::vec(b'a'..b'e', 0..8)]), 0..300)) {
            let encodings = Encodings { set_max_intset_entries: 10, set_max_listpack_entries: 12, set_max_listpack_value: 6, ..DEFAULT_ENCODINGS };
            let mut set: Option<Set> = None;
            let mut model: HashSet<Vec<u8>> = HashSet::new();
            for (insert, member) in ops {
                let set = set.get_or_insert_with(|| Set::for_member(&member, &encodings));
                if insert {
                    prop_assert_eq!(set.insert(&member, &encodings), model.insert(member.clone()));
                } else {
                    prop_assert_eq!(set.remove(&member), model.remove(&member));
                }
                prop_assert_eq!(set.len(), model.len());
                prop_assert_eq!(set.contains(&member), model.contains(&member));
                let members: HashSet<Vec<u8>> = set.iter().map(Cow::into_owned).collect();
                prop_assert_eq!(&members, &model);
                let indexed: HashSet<Vec<u8>> = (0..set.len()).map(|i| set.get_index(i).unwrap().into_owned()).collect();
                prop_assert_eq!(&indexed, &model);
            }
        }
    }
}
