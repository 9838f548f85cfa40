//! The keys one command names, loaded before it runs: the command reads and changes them
//! here, typed, and what it changed becomes the writes of its transaction afterwards. A
//! key's bytes are decoded on first use; an expired key reads as absent and, where the
//! caller may write, is deleted by the same transaction (so an expiry is a deletion at a
//! version, like any other).

use bytes::Bytes;
use ferry_resp::Reply;

use crate::value::{Entry, Value, WRONGTYPE};

/// One loaded key.
struct Slot {
    key: Bytes,
    /// The object's bytes as loaded.
    stored: Option<Bytes>,
    /// The decoded entry, once used (`Some(None)`: absent or expired).
    entry: Option<Option<Entry>>,
    /// The command changed it.
    dirty: bool,
    /// It was loaded present but had expired.
    expired: bool,
}

/// A write a command leaves: the key's new object bytes, or `None` to delete it.
pub type KeyWrite = (Bytes, Option<Bytes>);

/// The keys of one command, at one time.
pub struct Keys {
    slots: Vec<Slot>,
    now_us: u64,
    rng: u64,
}

/// The reply for a stored value this crate cannot read.
fn corrupt(key: &[u8]) -> Reply {
    Reply::err(format!(
        "the stored value of key '{}' is not a Redis value ferry wrote",
        String::from_utf8_lossy(&key[..key.len().min(64)])
    ))
}

/// A key the command did not declare: a bug of this crate, reported, never a panic.
fn undeclared(key: &[u8]) -> Reply {
    Reply::err(format!(
        "internal error: key '{}' was not loaded for this command",
        String::from_utf8_lossy(&key[..key.len().min(64)])
    ))
}

impl Keys {
    /// The keys as loaded (duplicates kept once), at `now_us` (microseconds since the Unix
    /// epoch), with `seed` for the commands that choose at random.
    pub fn new(loaded: impl IntoIterator<Item = (Bytes, Option<Bytes>)>, now_us: u64, seed: u64) -> Keys {
        let mut slots: Vec<Slot> = Vec::new();
        for (key, stored) in loaded {
            if slots.iter().all(|slot| slot.key != key) {
                slots.push(Slot {
                    key,
                    stored,
                    entry: None,
                    dirty: false,
                    expired: false,
                });
            }
        }
        Keys {
            slots,
            now_us,
            rng: seed | 1,
        }
    }

    /// The time the command runs at, in milliseconds since the Unix epoch (expiry's unit).
    pub fn now_ms(&self) -> u64 {
        self.now_us / 1000
    }

    /// The time the command runs at, in microseconds since the Unix epoch (TIME's).
    pub fn now_us(&self) -> u64 {
        self.now_us
    }

    /// A pseudo-random number (xorshift64*): enough to pick members, not for secrets.
    pub fn random(&mut self) -> u64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A pseudo-random index below `n` (`n` > 0).
    pub fn random_below(&mut self, n: usize) -> usize {
        (self.random() % n as u64) as usize
    }

    fn slot(&mut self, key: &[u8]) -> Result<&mut Slot, Reply> {
        let now_ms = self.now_ms();
        let slot = self
            .slots
            .iter_mut()
            .find(|slot| slot.key[..] == *key)
            .ok_or_else(|| undeclared(key))?;
        if slot.entry.is_none() {
            let entry = match &slot.stored {
                None => None,
                Some(bytes) => Some(Entry::decode(bytes).map_err(|_| corrupt(key))?),
            };
            let expired = entry.as_ref().is_some_and(|entry| entry.expired(now_ms));
            slot.expired = expired;
            slot.entry = Some(if expired { None } else { entry });
        }
        Ok(slot)
    }

    /// The key's entry, if it exists (and has not expired).
    pub fn entry(&mut self, key: &[u8]) -> Result<Option<&Entry>, Reply> {
        Ok(self.slot(key)?.entry.as_ref().and_then(Option::as_ref))
    }

    /// The key's entry to change, if it exists: the command's writes will store it.
    pub fn entry_mut(&mut self, key: &[u8]) -> Result<Option<&mut Entry>, Reply> {
        let slot = self.slot(key)?;
        slot.dirty = true;
        Ok(slot.entry.as_mut().and_then(Option::as_mut))
    }

    /// Whether the key exists.
    pub fn exists(&mut self, key: &[u8]) -> Result<bool, Reply> {
        Ok(self.entry(key)?.is_some())
    }

    /// Replaces the key's entry (`None`: deletes it).
    pub fn put(&mut self, key: &[u8], entry: Option<Entry>) -> Result<(), Reply> {
        let slot = self.slot(key)?;
        slot.dirty = true;
        slot.entry = Some(entry);
        Ok(())
    }

    /// Removes the key's entry; what it was.
    pub fn take(&mut self, key: &[u8]) -> Result<Option<Entry>, Reply> {
        let slot = self.slot(key)?;
        let entry = slot.entry.take().flatten();
        slot.entry = Some(None);
        if entry.is_some() {
            slot.dirty = true;
        }
        Ok(entry)
    }

    /// The key's value as the type `project` picks out: `None` if absent, WRONGTYPE if of
    /// another type.
    pub fn read<T>(&mut self, key: &[u8], project: fn(&Value) -> Option<&T>) -> Result<Option<&T>, Reply> {
        match self.entry(key)? {
            None => Ok(None),
            Some(entry) => project(&entry.value).map(Some).ok_or_else(wrong_type),
        }
    }

    /// The key's value of that type to change, if it exists.
    pub fn modify<T>(
        &mut self,
        key: &[u8],
        project: fn(&mut Value) -> Option<&mut T>,
    ) -> Result<Option<&mut T>, Reply> {
        // Checked before it is marked changed, so a WRONGTYPE writes nothing.
        if let Some(entry) = self.entry(key)? {
            if !matches_type(&entry.value, project) {
                return Err(wrong_type());
            }
        }
        match self.entry_mut(key)? {
            None => Ok(None),
            Some(entry) => Ok(project(&mut entry.value)),
        }
    }

    /// The key's value of that type to change, created empty (`empty`) if absent.
    pub fn upsert<T>(
        &mut self,
        key: &[u8],
        project: fn(&mut Value) -> Option<&mut T>,
        empty: fn() -> Value,
    ) -> Result<&mut T, Reply> {
        if !self.exists(key)? {
            self.put(key, Some(Entry::new(empty())))?;
        }
        match self.modify(key, project)? {
            Some(value) => Ok(value),
            None => Err(wrong_type()),
        }
    }

    /// What the command changed, as writes: a changed key's new bytes, a delete for a key
    /// it removed or left an empty collection; with `delete_expired`, also a delete for
    /// each expired key it came across. A key a command wrote is written even when its
    /// bytes are what it held: in Redis that is a change (`SET k v` twice fails a WATCH).
    pub fn writes(self, delete_expired: bool) -> Vec<KeyWrite> {
        let mut writes = Vec::new();
        for slot in self.slots {
            let Some(entry) = slot.entry else { continue };
            if !slot.dirty {
                if delete_expired && slot.expired {
                    writes.push((slot.key, None));
                }
                continue;
            }
            match entry.filter(|entry| !entry.value.is_empty_collection()) {
                Some(entry) => writes.push((slot.key, Some(entry.encode()))),
                None if slot.stored.is_some() => writes.push((slot.key, None)),
                None => {}
            }
        }
        writes
    }
}

fn matches_type<T>(value: &Value, project: fn(&mut Value) -> Option<&mut T>) -> bool {
    // A projection only looks at the variant; run it on a cheap value of the same type.
    let mut probe = match value {
        Value::Str(_) => Value::Str(Bytes::new()),
        Value::Hash(_) => Value::Hash(Default::default()),
        Value::List(_) => Value::List(Default::default()),
        Value::Set(_) => Value::Set(Default::default()),
        Value::ZSet(_) => Value::ZSet(Default::default()),
    };
    project(&mut probe).is_some()
}

/// WRONGTYPE.
pub fn wrong_type() -> Reply {
    Reply::Error(WRONGTYPE.into())
}

/// Projections of a value onto its types, for [`Keys::read`] and [`Keys::modify`].
pub mod as_type {
    use super::*;
    use crate::value::{Hash, List, Set};
    use crate::zset::ZSet;

    /// A string.
    pub fn str(value: &Value) -> Option<&Bytes> {
        match value {
            Value::Str(bytes) => Some(bytes),
            _ => None,
        }
    }
    /// A string, to change.
    pub fn str_mut(value: &mut Value) -> Option<&mut Bytes> {
        match value {
            Value::Str(bytes) => Some(bytes),
            _ => None,
        }
    }
    /// A hash.
    pub fn hash(value: &Value) -> Option<&Hash> {
        match value {
            Value::Hash(hash) => Some(hash),
            _ => None,
        }
    }
    /// A hash, to change.
    pub fn hash_mut(value: &mut Value) -> Option<&mut Hash> {
        match value {
            Value::Hash(hash) => Some(hash),
            _ => None,
        }
    }
    /// A list.
    pub fn list(value: &Value) -> Option<&List> {
        match value {
            Value::List(list) => Some(list),
            _ => None,
        }
    }
    /// A list, to change.
    pub fn list_mut(value: &mut Value) -> Option<&mut List> {
        match value {
            Value::List(list) => Some(list),
            _ => None,
        }
    }
    /// A set.
    pub fn set(value: &Value) -> Option<&Set> {
        match value {
            Value::Set(set) => Some(set),
            _ => None,
        }
    }
    /// A set, to change.
    pub fn set_mut(value: &mut Value) -> Option<&mut Set> {
        match value {
            Value::Set(set) => Some(set),
            _ => None,
        }
    }
    /// A sorted set.
    pub fn zset(value: &Value) -> Option<&ZSet> {
        match value {
            Value::ZSet(zset) => Some(zset),
            _ => None,
        }
    }
    /// A sorted set, to change.
    pub fn zset_mut(value: &mut Value) -> Option<&mut ZSet> {
        match value {
            Value::ZSet(zset) => Some(zset),
            _ => None,
        }
    }
    /// An empty hash.
    pub fn new_hash() -> Value {
        Value::Hash(Hash::default())
    }
    /// An empty list.
    pub fn new_list() -> Value {
        Value::List(List::new())
    }
    /// An empty set.
    pub fn new_set() -> Value {
        Value::Set(Set::default())
    }
    /// An empty sorted set.
    pub fn new_zset() -> Value {
        Value::ZSet(ZSet::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(text: &str) -> Bytes {
        Bytes::copy_from_slice(text.as_bytes())
    }

    #[test]
    fn an_expired_key_reads_absent_and_is_deleted_only_where_writes_are_allowed() {
        let expired = Entry {
            value: Value::Str(b("v")),
            expires_at_ms: Some(100),
        }
        .encode();
        let load = || Keys::new([(b("k"), Some(expired.clone()))], 100_000, 1);
        let mut keys = load();
        assert!(!keys.exists(b"k").unwrap());
        assert_eq!(keys.writes(true), vec![(b("k"), None)]);
        let mut keys = load();
        assert!(!keys.exists(b"k").unwrap());
        assert!(keys.writes(false).is_empty());
        let mut keys = Keys::new([(b("k"), Some(expired))], 99_999, 1);
        assert!(keys.exists(b"k").unwrap());
    }

    #[test]
    fn wrong_types_are_refused_and_write_nothing() {
        let mut keys = Keys::new([(b("s"), Some(b("text"))), (b("n"), None)], 0, 1);
        assert_eq!(keys.modify(b"s", as_type::hash_mut).unwrap_err(), wrong_type());
        assert_eq!(keys.read(b"s", as_type::list).unwrap_err(), wrong_type());
        assert_eq!(keys.read(b"n", as_type::list).unwrap(), None);
        assert!(
            keys.read(b"missing", as_type::list).is_err(),
            "an undeclared key is an error"
        );
        assert!(keys.writes(true).is_empty());
    }

    #[test]
    fn an_emptied_collection_is_deleted_and_a_new_one_stored() {
        let mut keys = Keys::new([(b("h"), None)], 0, 1);
        keys.upsert(b"h", as_type::hash_mut, as_type::new_hash)
            .unwrap()
            .insert(b("f"), b("v"));
        let writes = keys.writes(true);
        assert_eq!(writes.len(), 1);
        let stored = writes[0].1.clone();
        let mut keys = Keys::new([(b("h"), stored)], 0, 1);
        keys.modify(b"h", as_type::hash_mut)
            .unwrap()
            .unwrap()
            .shift_remove(&b("f")[..]);
        assert_eq!(keys.writes(true), vec![(b("h"), None)]);
    }
}
