//! The changes that take a key's value from one version to the next: what a command
//! does to a value, what the log records instead of the value, and what a replay and a
//! replica apply. Applying one gives back the change that undoes it, so a command run on
//! the stored value itself can be taken back when its commit is refused.
//!
//! A change names elements, never a whole collection (but [`Change::Replace`], which
//! stores a new value), so a push on a list of a million items logs the item, not the
//! list. Applying is total on the values a command sees; on others (a replay of a damaged
//! log) it is an error, never a panic.

use std::sync::Arc;

use bytes::{BufMut, Bytes};

use crate::codec::{put_bytes, put_len, Corrupt, Reader};
use crate::encodings::Encodings;
use crate::entry::{Entry, Value};
use crate::{Hash, List, Set, ZSet};

/// One change to a key.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// The key holds this entry now (a string set, a value built whole, a type replaced).
    Replace(Entry),
    /// The key is gone.
    Delete,
    /// The key's expiry is this (none: it persists).
    Expire(Option<u64>),
    /// These bytes go at the end of the key's string (created empty if absent).
    Append(Bytes),
    /// A hash field is set (the hash created if absent).
    HashSet(Bytes, Bytes),
    /// A hash field is removed.
    HashDel(Bytes),
    /// Items are pushed one by one at the head (`left`) or the tail (the list created if
    /// absent).
    ListPush {
        /// At the head.
        left: bool,
        /// In push order.
        items: Vec<Bytes>,
    },
    /// Up to `count` items are popped from the head (`left`) or the tail.
    ListPop {
        /// From the head.
        left: bool,
        /// How many.
        count: u64,
    },
    /// Item `index` is replaced.
    ListSet(u64, Bytes),
    /// An item is inserted to become item `index`.
    ListInsert(u64, Bytes),
    /// Item `index` is removed.
    ListRemove(u64),
    /// A member is added to a set (created if absent).
    SetAdd(Bytes),
    /// A member is removed from a set.
    SetRem(Bytes),
    /// A sorted set's member gets this score (the sorted set created if absent).
    ZAdd(Bytes, f64),
    /// A member is removed from a sorted set.
    ZRem(Bytes),
}

/// Why a change does not apply to a value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChangeError {
    /// The key holds another type than the change is for.
    #[error("the change is for another type than the key holds")]
    WrongType,
    /// The change needs the key and it is absent.
    #[error("the change needs a key that is absent")]
    Absent,
    /// A list index past the end.
    #[error("the change names a list index past the end")]
    OutOfRange,
}

fn hash_of(slot: &mut Option<Entry>) -> Result<Option<&mut Hash>, ChangeError> {
    match slot {
        None => Ok(None),
        Some(Entry {
            value: Value::Hash(hash),
            ..
        }) => Ok(Some(Arc::make_mut(hash))),
        Some(_) => Err(ChangeError::WrongType),
    }
}

fn list_of(slot: &mut Option<Entry>) -> Result<Option<&mut List>, ChangeError> {
    match slot {
        None => Ok(None),
        Some(Entry {
            value: Value::List(list),
            ..
        }) => Ok(Some(Arc::make_mut(list))),
        Some(_) => Err(ChangeError::WrongType),
    }
}

fn set_of(slot: &mut Option<Entry>) -> Result<Option<&mut Set>, ChangeError> {
    match slot {
        None => Ok(None),
        Some(Entry {
            value: Value::Set(set), ..
        }) => Ok(Some(Arc::make_mut(set))),
        Some(_) => Err(ChangeError::WrongType),
    }
}

fn zset_of(slot: &mut Option<Entry>) -> Result<Option<&mut ZSet>, ChangeError> {
    match slot {
        None => Ok(None),
        Some(Entry {
            value: Value::ZSet(zset),
            ..
        }) => Ok(Some(Arc::make_mut(zset))),
        Some(_) => Err(ChangeError::WrongType),
    }
}

fn owned(bytes: &[u8]) -> Bytes {
    Bytes::copy_from_slice(bytes)
}

impl Change {
    /// Applies the change to a key's `slot` (`None`: absent), under `encodings`; the
    /// change that undoes it (none when it changed nothing).
    pub fn apply(&self, slot: &mut Option<Entry>, encodings: &Encodings) -> Result<Option<Change>, ChangeError> {
        let created = slot.is_none();
        let undo = match self {
            Change::Replace(entry) => Some(slot.replace(entry.clone()).map_or(Change::Delete, Change::Replace)),
            Change::Delete => slot.take().map(Change::Replace),
            Change::Expire(at) => {
                let entry = slot.as_mut().ok_or(ChangeError::Absent)?;
                Some(Change::Expire(std::mem::replace(&mut entry.expires_at_ms, *at)))
            }
            Change::Append(tail) => match slot {
                None => {
                    *slot = Some(Entry::string(tail.clone()));
                    Some(Change::Delete)
                }
                Some(entry) => {
                    let Some(head) = entry.value.string_bytes() else {
                        return Err(ChangeError::WrongType);
                    };
                    let mut joined = Vec::with_capacity(head.len() + tail.len());
                    joined.extend_from_slice(&head);
                    joined.extend_from_slice(tail);
                    let before = std::mem::replace(&mut entry.value, Value::Str(Bytes::from(joined)));
                    Some(Change::Replace(Entry {
                        value: before,
                        expires_at_ms: entry.expires_at_ms,
                    }))
                }
            },
            Change::HashSet(field, value) => {
                if slot.is_none() {
                    *slot = Some(Entry::new(Value::Hash(Arc::new(Hash::new(encodings)))));
                }
                let hash = hash_of(slot)?.ok_or(ChangeError::Absent)?;
                match hash.insert(field, value, encodings) {
                    Some(old) => Some(Change::HashSet(field.clone(), owned(&old))),
                    None => Some(Change::HashDel(field.clone())),
                }
            }
            Change::HashDel(field) => match hash_of(slot)? {
                None => None,
                Some(hash) => hash
                    .remove(field)
                    .map(|old| Change::HashSet(field.clone(), owned(&old))),
            },
            Change::ListPush { left, items } => {
                if slot.is_none() {
                    *slot = Some(Entry::new(Value::List(Arc::new(List::new()))));
                }
                let list = list_of(slot)?.ok_or(ChangeError::Absent)?;
                for item in items {
                    list.push(*left, item, encodings);
                }
                Some(Change::ListPop {
                    left: *left,
                    count: items.len() as u64,
                })
            }
            Change::ListPop { left, count } => match list_of(slot)? {
                None => None,
                Some(list) => {
                    let mut popped: Vec<Bytes> = (0..*count)
                        .map_while(|_| list.pop(*left, encodings))
                        .map(|item| owned(&item))
                        .collect();
                    popped.reverse();
                    Some(Change::ListPush {
                        left: *left,
                        items: popped,
                    })
                }
            },
            Change::ListSet(index, item) => {
                let list = list_of(slot)?.ok_or(ChangeError::Absent)?;
                let at = usize::try_from(*index)
                    .ok()
                    .filter(|&at| at < list.len())
                    .ok_or(ChangeError::OutOfRange)?;
                Some(Change::ListSet(*index, owned(&list.set(at, item, encodings))))
            }
            Change::ListInsert(index, item) => {
                let list = list_of(slot)?.ok_or(ChangeError::Absent)?;
                let at = usize::try_from(*index)
                    .ok()
                    .filter(|&at| at <= list.len())
                    .ok_or(ChangeError::OutOfRange)?;
                list.insert(at, item, encodings);
                Some(Change::ListRemove(*index))
            }
            Change::ListRemove(index) => {
                let list = list_of(slot)?.ok_or(ChangeError::Absent)?;
                let at = usize::try_from(*index)
                    .ok()
                    .filter(|&at| at < list.len())
                    .ok_or(ChangeError::OutOfRange)?;
                Some(Change::ListInsert(*index, owned(&list.remove(at, encodings))))
            }
            Change::SetAdd(member) => {
                if slot.is_none() {
                    *slot = Some(Entry::new(Value::Set(Arc::new(Set::for_member(member, encodings)))));
                }
                let set = set_of(slot)?.ok_or(ChangeError::Absent)?;
                set.insert(member, encodings).then(|| Change::SetRem(member.clone()))
            }
            Change::SetRem(member) => match set_of(slot)? {
                None => None,
                Some(set) => set.remove(member).then(|| Change::SetAdd(member.clone())),
            },
            Change::ZAdd(member, score) => {
                if slot.is_none() {
                    *slot = Some(Entry::new(Value::ZSet(Arc::new(ZSet::for_member(member, encodings)))));
                }
                let zset = zset_of(slot)?.ok_or(ChangeError::Absent)?;
                match zset.insert(member, *score, encodings) {
                    Some(old) => Some(Change::ZAdd(member.clone(), old)),
                    None => Some(Change::ZRem(member.clone())),
                }
            }
            Change::ZRem(member) => match zset_of(slot)? {
                None => None,
                Some(zset) => zset.remove(member).map(|old| Change::ZAdd(member.clone(), old)),
            },
        };
        // A change that created the key is undone by deleting it, whatever it did after.
        Ok(if created && slot.is_some() {
            Some(Change::Delete)
        } else {
            undo
        })
    }
}

const OP_REPLACE: u8 = 1;
const OP_DELETE: u8 = 2;
const OP_EXPIRE: u8 = 3;
const OP_APPEND: u8 = 4;
const OP_HASH_SET: u8 = 5;
const OP_HASH_DEL: u8 = 6;
const OP_LIST_PUSH: u8 = 7;
const OP_LIST_POP: u8 = 8;
const OP_LIST_SET: u8 = 9;
const OP_LIST_INSERT: u8 = 10;
const OP_LIST_REMOVE: u8 = 11;
const OP_SET_ADD: u8 = 12;
const OP_SET_REM: u8 = 13;
const OP_ZADD: u8 = 14;
const OP_ZREM: u8 = 15;

/// Appends the log form of `changes` to `out`: per change an op byte and its fields
/// (lengths and indexes LEB128, strings length-prefixed, scores and times eight bytes
/// little-endian).
pub fn encode(changes: &[Change], out: &mut impl BufMut) {
    put_len(out, changes.len());
    for change in changes {
        match change {
            Change::Replace(entry) => {
                out.put_u8(OP_REPLACE);
                put_len(out, entry.encoded_len());
                entry.encode_into(out);
            }
            Change::Delete => out.put_u8(OP_DELETE),
            Change::Expire(at) => {
                out.put_u8(OP_EXPIRE);
                out.put_u8(u8::from(at.is_some()));
                out.put_u64_le(at.unwrap_or(0));
            }
            Change::Append(tail) => {
                out.put_u8(OP_APPEND);
                put_bytes(out, tail);
            }
            Change::HashSet(field, value) => {
                out.put_u8(OP_HASH_SET);
                put_bytes(out, field);
                put_bytes(out, value);
            }
            Change::HashDel(field) => {
                out.put_u8(OP_HASH_DEL);
                put_bytes(out, field);
            }
            Change::ListPush { left, items } => {
                out.put_u8(OP_LIST_PUSH);
                out.put_u8(u8::from(*left));
                put_len(out, items.len());
                for item in items {
                    put_bytes(out, item);
                }
            }
            Change::ListPop { left, count } => {
                out.put_u8(OP_LIST_POP);
                out.put_u8(u8::from(*left));
                out.put_u64_le(*count);
            }
            Change::ListSet(index, item) | Change::ListInsert(index, item) => {
                out.put_u8(if matches!(change, Change::ListSet(..)) {
                    OP_LIST_SET
                } else {
                    OP_LIST_INSERT
                });
                out.put_u64_le(*index);
                put_bytes(out, item);
            }
            Change::ListRemove(index) => {
                out.put_u8(OP_LIST_REMOVE);
                out.put_u64_le(*index);
            }
            Change::SetAdd(member) | Change::SetRem(member) | Change::ZRem(member) => {
                out.put_u8(match change {
                    Change::SetAdd(_) => OP_SET_ADD,
                    Change::SetRem(_) => OP_SET_REM,
                    _ => OP_ZREM,
                });
                put_bytes(out, member);
            }
            Change::ZAdd(member, score) => {
                out.put_u8(OP_ZADD);
                put_bytes(out, member);
                out.put_f64_le(*score);
            }
        }
    }
}

/// The changes [`encode`] wrote in `bytes`; replaced entries take the encodings
/// `encodings` gives their size.
pub fn decode(bytes: &Bytes, encodings: &Encodings) -> Result<Vec<Change>, Corrupt> {
    let mut reader = Reader::new(bytes.clone(), 0);
    let count = reader.count(1)?;
    let mut changes = Vec::with_capacity(count);
    for _ in 0..count {
        changes.push(match reader.u8()? {
            OP_REPLACE => Change::Replace(Entry::try_decode(&reader.bytes()?, encodings)?),
            OP_DELETE => Change::Delete,
            OP_EXPIRE => {
                let has = reader.u8()?;
                let at = reader.u64()?;
                Change::Expire((has != 0).then_some(at))
            }
            OP_APPEND => Change::Append(reader.bytes()?),
            OP_HASH_SET => Change::HashSet(reader.bytes()?, reader.bytes()?),
            OP_HASH_DEL => Change::HashDel(reader.bytes()?),
            OP_LIST_PUSH => {
                let left = reader.u8()? != 0;
                let n = reader.count(1)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(reader.bytes()?);
                }
                Change::ListPush { left, items }
            }
            OP_LIST_POP => Change::ListPop {
                left: reader.u8()? != 0,
                count: reader.u64()?,
            },
            OP_LIST_SET => Change::ListSet(reader.u64()?, reader.bytes()?),
            OP_LIST_INSERT => Change::ListInsert(reader.u64()?, reader.bytes()?),
            OP_LIST_REMOVE => Change::ListRemove(reader.u64()?),
            OP_SET_ADD => Change::SetAdd(reader.bytes()?),
            OP_SET_REM => Change::SetRem(reader.bytes()?),
            OP_ZADD => Change::ZAdd(reader.bytes()?, reader.f64()?),
            OP_ZREM => Change::ZRem(reader.bytes()?),
            _ => return Err(Corrupt),
        });
    }
    if !reader.is_done() {
        return Err(Corrupt);
    }
    Ok(changes)
}

/// One key a command names, with its entry as tracked while commands change it: what the
/// storage node hands a command (its stored entry, taken out under the shard's lock) and
/// what a transaction over `Ctx` builds from what it read.
#[derive(Debug)]
pub struct Slot {
    /// The key.
    pub key: Bytes,
    /// Its entry and the changes made to it.
    pub tracked: Tracked,
}

impl Slot {
    /// A key holding `entry` (`None`: absent).
    pub fn new(key: Bytes, entry: Option<Entry>) -> Slot {
        Slot {
            key,
            tracked: Tracked::new(entry),
        }
    }
}

/// A key's entry while a command changes it: the changes made, in order, and for each
/// the change that takes it back.
#[derive(Debug, Default)]
pub struct Tracked {
    entry: Option<Entry>,
    /// Most commands make one change to a key: held inline, no allocation.
    redo: smallvec::SmallVec<[Change; 1]>,
    /// Parallel to `redo`: what takes each back.
    undo: smallvec::SmallVec<[Change; 1]>,
}

impl Tracked {
    /// A key holding `entry` (`None`: absent), unchanged so far.
    pub fn new(entry: Option<Entry>) -> Tracked {
        Tracked {
            entry,
            redo: smallvec::SmallVec::new(),
            undo: smallvec::SmallVec::new(),
        }
    }

    /// What the key holds now.
    pub fn entry(&self) -> Option<&Entry> {
        self.entry.as_ref()
    }

    /// Applies `change`; the change that undoes it. A change that changed nothing (a
    /// member already there, a field not there) has none and is not kept, so it is
    /// neither logged nor a new version; one that does not apply changes nothing.
    pub fn apply(&mut self, change: Change, encodings: &Encodings) -> Result<Option<&Change>, ChangeError> {
        let Some(undo) = change.apply(&mut self.entry, encodings)? else {
            return Ok(None);
        };
        self.redo.push(change);
        self.undo.push(undo);
        Ok(self.undo.last())
    }

    /// Whether a change was made.
    pub fn changed(&self) -> bool {
        !self.redo.is_empty()
    }

    /// The changes made, in order.
    pub fn changes(&self) -> &[Change] {
        &self.redo
    }

    /// Takes back the changes after the first `kept`: the key holds what it held then.
    pub fn rollback_to(&mut self, kept: usize, encodings: &Encodings) {
        while self.redo.len() > kept {
            self.redo.pop();
            if let Some(undo) = self.undo.pop() {
                // Invariant: an undo applies to the value its change left.
                undo.apply(&mut self.entry, encodings)
                    .expect("an undo applies to what its change left");
            }
        }
    }

    /// Takes every change back: the key holds what it held when tracking began.
    pub fn rollback(&mut self, encodings: &Encodings) {
        self.rollback_to(0, encodings);
    }

    /// The entry it holds and the changes made.
    pub fn into_parts(self) -> (Option<Entry>, Vec<Change>) {
        (self.entry, self.redo.into_vec())
    }

    /// Takes the entry out (the key reads as absent to this tracker afterwards).
    pub fn take_entry(&mut self) -> Option<Entry> {
        self.entry.take()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::encodings::DEFAULT_ENCODINGS;

    fn small() -> Encodings {
        Encodings {
            hash_max_listpack_entries: 4,
            set_max_intset_entries: 4,
            set_max_listpack_entries: 4,
            zset_max_listpack_entries: 4,
            list_max_listpack_size: 3,
            ..DEFAULT_ENCODINGS
        }
    }

    fn b(bytes: &[u8]) -> Bytes {
        Bytes::copy_from_slice(bytes)
    }

    fn change() -> impl Strategy<Value = Change> {
        let word = proptest::collection::vec(b'a'..b'f', 0..4).prop_map(Bytes::from);
        prop_oneof![
            word.clone().prop_map(|w| Change::Replace(Entry::string(w))),
            Just(Change::Delete),
            proptest::option::of(0u64..1000).prop_map(Change::Expire),
            word.clone().prop_map(Change::Append),
            (word.clone(), word.clone()).prop_map(|(f, v)| Change::HashSet(f, v)),
            word.clone().prop_map(Change::HashDel),
            (any::<bool>(), proptest::collection::vec(word.clone(), 1..4))
                .prop_map(|(left, items)| Change::ListPush { left, items }),
            (any::<bool>(), 0u64..4).prop_map(|(left, count)| Change::ListPop { left, count }),
            (0u64..6, word.clone()).prop_map(|(i, w)| Change::ListSet(i, w)),
            (0u64..6, word.clone()).prop_map(|(i, w)| Change::ListInsert(i, w)),
            (0u64..6).prop_map(Change::ListRemove),
            prop_oneof![word.clone(), (0u8..9).prop_map(|n| Bytes::from(n.to_string()))].prop_map(Change::SetAdd),
            word.clone().prop_map(Change::SetRem),
            (word.clone(), -3i32..3).prop_map(|(m, s)| Change::ZAdd(m, s.into())),
            word.prop_map(Change::ZRem),
        ]
    }

    proptest! {
        /// Whatever changes apply, the log form reads back, replaying the logged changes
        /// on the first value gives the last, and taking them back gives the first.
        #[test]
        fn changes_replay_and_roll_back(start in change(), changes in proptest::collection::vec(change(), 0..40)) {
            let encodings = small();
            let mut first = None;
            let _ = start.apply(&mut first, &encodings);
            let mut tracked = Tracked::new(first.clone());
            for change in changes {
                let _ = tracked.apply(change, &encodings);
            }
            let mut logged = Vec::new();
            encode(tracked.changes(), &mut logged);
            let read = decode(&Bytes::from(logged), &encodings).unwrap();
            prop_assert_eq!(&read, &tracked.changes().to_vec());
            let mut replayed = first.clone();
            for change in &read {
                change.apply(&mut replayed, &encodings).unwrap();
            }
            prop_assert_eq!(replayed.as_ref(), tracked.entry());
            tracked.rollback(&encodings);
            prop_assert_eq!(tracked.entry(), first.as_ref());
        }
    }

    #[test]
    fn a_refused_change_changes_nothing_and_is_not_logged() {
        let mut tracked = Tracked::new(Some(Entry::string(b(b"text"))));
        assert_eq!(
            tracked.apply(Change::HashSet(b(b"f"), b(b"v")), &DEFAULT_ENCODINGS),
            Err(ChangeError::WrongType)
        );
        assert!(!tracked.changed());
        let mut list = Tracked::new(None);
        list.apply(
            Change::ListPush {
                left: true,
                items: vec![b(b"a")],
            },
            &DEFAULT_ENCODINGS,
        )
        .unwrap();
        assert_eq!(
            list.apply(Change::ListSet(5, b(b"x")), &DEFAULT_ENCODINGS),
            Err(ChangeError::OutOfRange)
        );
        assert_eq!(list.changes().len(), 1);
    }

    #[test]
    fn damaged_log_forms_are_refused() {
        for bad in [&b"\x01\x63"[..], b"\x01", b"\x02\x01\x02", b"\x01\x0e\x01m"] {
            assert!(decode(&b(bad), &DEFAULT_ENCODINGS).is_err(), "{bad:?}");
        }
    }
}
