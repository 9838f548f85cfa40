//! The keys one command names, as the command sees them: each a [`Slot`] holding the
//! key's entry, which the command reads in place and changes only through
//! [`ferry_value::Change`]s (so the caller can log the changes, or take them back). An
//! expired key reads as absent and, where the caller lets commands delete (a write
//! lock, a primary), is deleted by the command that meets it, so an expiry is a
//! deletion at a version like any other.
//!
//! The slots belong to the caller: the storage node's in-place executor (the stored
//! entries themselves, under their shards' locks) or a transaction over `Ctx` (entries
//! decoded from what it read).

use bytes::Bytes;
use ferry_resp::Reply;
pub use ferry_value::Slot;
use ferry_value::{Change, ChangeError, Encodings, Entry, Hash, List, Set, Value, ZSet};

/// The keys of one command, at one time.
pub struct Keys<'s> {
    slots: &'s mut [Slot],
    now_us: u64,
    rng: u64,
    encodings: Encodings,
    /// Whether a command may delete the expired keys it meets (a read under read locks,
    /// a replica's read and a read-only script may not).
    deletes_expired: bool,
    /// An expired key was met and left (it reads as absent).
    expired_met: bool,
    /// Changes are refused (a read-only command under read locks).
    read_only: bool,
}

/// A key the command did not declare: a bug of this crate, reported, never a panic.
fn undeclared(key: &[u8]) -> Reply {
    Reply::err(format!(
        "internal error: key '{}' was not loaded for this command",
        String::from_utf8_lossy(&key[..key.len().min(64)])
    ))
}

/// The reply for a change refused by the value.
fn refused(error: ChangeError) -> Reply {
    match error {
        ChangeError::WrongType => wrong_type(),
        other => Reply::err(format!("internal error: {other}")),
    }
}

/// The reply for a key holding bytes no Redis command wrote.
fn raw(key: &[u8]) -> Reply {
    Reply::err(format!(
        "the stored value of key '{}' is not a Redis value ferry wrote",
        String::from_utf8_lossy(&key[..key.len().min(64)])
    ))
}

/// Where each slot's changes stood: a command that errs is taken back to here.
pub struct Mark(smallvec::SmallVec<[usize; 4]>);

impl<'s> Keys<'s> {
    /// The keys of `slots` (each named once) at `now_us` (microseconds since the Unix
    /// epoch), with `seed` for the commands that choose at random, collections encoded
    /// under `encodings`; `deletes_expired`: whether an expired key met is deleted.
    pub fn new(slots: &'s mut [Slot], now_us: u64, seed: u64, encodings: Encodings, deletes_expired: bool) -> Keys<'s> {
        Keys {
            slots,
            now_us,
            rng: spread(seed) | 1,
            encodings,
            deletes_expired,
            expired_met: false,
            read_only: false,
        }
    }

    /// The same, refusing every change: for a read-only command run under read locks.
    pub fn read_only(slots: &'s mut [Slot], now_us: u64, seed: u64, encodings: Encodings) -> Keys<'s> {
        let mut keys = Keys::new(slots, now_us, seed, encodings, false);
        keys.read_only = true;
        keys
    }

    /// Whether an expired key was met and left in place (the caller may run the command
    /// again where it can delete it).
    pub fn expired_met(&self) -> bool {
        self.expired_met
    }

    /// The encodings collections are kept in.
    pub fn encodings(&self) -> &Encodings {
        &self.encodings
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
    /// Seeded through [`spread`], so nearby seeds (consecutive clock readings) start far
    /// apart and a single pick is not skewed.
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

    /// Where every slot's changes stand now.
    pub fn mark(&self) -> Mark {
        Mark(self.slots.iter().map(|slot| slot.tracked.changes().len()).collect())
    }

    /// Takes back every change made since `mark`.
    pub fn rollback_to(&mut self, mark: &Mark) {
        for (slot, &at) in self.slots.iter_mut().zip(&mark.0) {
            slot.tracked.rollback_to(at, &self.encodings);
        }
    }

    /// Deletes the collections the command left empty (Redis deletes such a key).
    pub fn settle(&mut self) {
        for slot in self.slots.iter_mut() {
            if slot
                .tracked
                .entry()
                .is_some_and(|entry| entry.value.is_empty_collection())
            {
                // Invariant: deleting a present key always applies.
                slot.tracked
                    .apply(Change::Delete, &self.encodings)
                    .expect("a delete applies to a present key");
            }
        }
    }

    fn index(&self, key: &[u8]) -> Result<usize, Reply> {
        self.slots
            .iter()
            .position(|slot| slot.key[..] == *key)
            .ok_or_else(|| undeclared(key))
    }

    /// The slot of `key`, with an expired entry dealt with: deleted where allowed, else
    /// noted (it then reads as absent).
    fn live(&mut self, key: &[u8]) -> Result<usize, Reply> {
        let at = self.index(key)?;
        let now_ms = self.now_ms();
        if self.slots[at]
            .tracked
            .entry()
            .is_some_and(|entry| entry.expired(now_ms))
        {
            if self.deletes_expired && !self.read_only {
                self.slots[at]
                    .tracked
                    .apply(Change::Delete, &self.encodings)
                    .map_err(refused)?;
            } else {
                self.expired_met = true;
            }
        }
        Ok(at)
    }

    /// The key's entry, if it exists (and has not expired).
    pub fn entry(&mut self, key: &[u8]) -> Result<Option<&Entry>, Reply> {
        let at = self.live(key)?;
        let now_ms = self.now_ms();
        Ok(self.slots[at].tracked.entry().filter(|entry| !entry.expired(now_ms)))
    }

    /// Whether the key exists.
    pub fn exists(&mut self, key: &[u8]) -> Result<bool, Reply> {
        Ok(self.entry(key)?.is_some())
    }

    /// The key's value as the type `project` picks out: `None` if absent, WRONGTYPE if of
    /// another type.
    pub fn read<T>(&mut self, key: &[u8], project: fn(&Value) -> Option<&T>) -> Result<Option<&T>, Reply> {
        match self.entry(key)? {
            None => Ok(None),
            Some(Entry {
                value: Value::Raw(_), ..
            }) => Err(raw(key)),
            Some(entry) => project(&entry.value).map(Some).ok_or_else(wrong_type),
        }
    }

    /// The key's value as the type `project` picks out, for a key this command already
    /// read (its type checked and its expiry dealt with): borrows the keys immutably, so
    /// several keys' values can be read together. `None` if absent or of another type.
    pub fn view<T>(&self, key: &[u8], project: fn(&Value) -> Option<&T>) -> Option<&T> {
        let now_ms = self.now_ms();
        self.slots
            .iter()
            .find(|slot| slot.key[..] == *key)?
            .tracked
            .entry()
            .filter(|entry| !entry.expired(now_ms))
            .and_then(|entry| project(&entry.value))
    }

    /// The key's string (an integer's digits), if it exists; WRONGTYPE for another type.
    pub fn string(&mut self, key: &[u8]) -> Result<Option<Bytes>, Reply> {
        match self.entry(key)? {
            None => Ok(None),
            Some(Entry {
                value: Value::Raw(_), ..
            }) => Err(raw(key)),
            Some(entry) => entry.value.string_bytes().map(Some).ok_or_else(wrong_type),
        }
    }

    /// Applies `change` to `key`: the change that undoes it, from which a command reads
    /// what was there (an old value, whether a member was new). WRONGTYPE if the key holds
    /// another type; a change to a key holding bytes no Redis command wrote is refused.
    pub fn change(&mut self, key: &[u8], change: Change) -> Result<Option<&Change>, Reply> {
        if self.read_only {
            return Err(Reply::err("internal error: a read-only command changed a key"));
        }
        let at = self.live(key)?;
        if let Some(Entry {
            value: Value::Raw(_), ..
        }) = self.slots[at].tracked.entry()
        {
            if !matches!(change, Change::Replace(_) | Change::Delete) {
                return Err(raw(key));
            }
        }
        self.slots[at].tracked.apply(change, &self.encodings).map_err(refused)
    }

    /// Replaces the key's entry (`None`: deletes it).
    pub fn put(&mut self, key: &[u8], entry: Option<Entry>) -> Result<(), Reply> {
        match entry {
            Some(entry) => self.change(key, Change::Replace(entry))?,
            None => self.change(key, Change::Delete)?,
        };
        Ok(())
    }

    /// Removes the key; what it held.
    pub fn take(&mut self, key: &[u8]) -> Result<Option<Entry>, Reply> {
        if !self.exists(key)? {
            return Ok(None);
        }
        Ok(match self.change(key, Change::Delete)? {
            Some(Change::Replace(entry)) => Some(entry.clone()),
            _ => None,
        })
    }

    /// Sets the key's expiry (none: it persists). The key must exist.
    pub fn set_expiry(&mut self, key: &[u8], at_ms: Option<u64>) -> Result<(), Reply> {
        self.change(key, Change::Expire(at_ms))?;
        Ok(())
    }

    /// Sets a hash field; whether it was new.
    pub fn hset(&mut self, key: &[u8], field: &Bytes, value: &Bytes) -> Result<bool, Reply> {
        Ok(matches!(
            self.change(key, Change::HashSet(field.clone(), value.clone()))?,
            Some(Change::HashDel(_) | Change::Delete)
        ))
    }

    /// Removes a hash field; whether it was there.
    pub fn hdel(&mut self, key: &[u8], field: &Bytes) -> Result<bool, Reply> {
        Ok(self.change(key, Change::HashDel(field.clone()))?.is_some())
    }

    /// Pushes items one by one at the head (`left`) or tail.
    pub fn push(&mut self, key: &[u8], left: bool, items: Vec<Bytes>) -> Result<(), Reply> {
        self.change(key, Change::ListPush { left, items })?;
        Ok(())
    }

    /// Pops up to `count` items from the head (`left`) or tail, in the order popped.
    pub fn pop(&mut self, key: &[u8], left: bool, count: usize) -> Result<Vec<Bytes>, Reply> {
        match self.change(
            key,
            Change::ListPop {
                left,
                count: count as u64,
            },
        )? {
            Some(Change::ListPush { items, .. }) => Ok(items.iter().rev().cloned().collect()),
            _ => Ok(Vec::new()),
        }
    }

    /// Replaces list item `index` (below the length).
    pub fn list_set(&mut self, key: &[u8], index: usize, item: Bytes) -> Result<(), Reply> {
        self.change(key, Change::ListSet(index as u64, item))?;
        Ok(())
    }

    /// Inserts a list item to become item `index` (at most the length).
    pub fn list_insert(&mut self, key: &[u8], index: usize, item: Bytes) -> Result<(), Reply> {
        self.change(key, Change::ListInsert(index as u64, item))?;
        Ok(())
    }

    /// Removes list item `index` (below the length).
    pub fn list_remove(&mut self, key: &[u8], index: usize) -> Result<(), Reply> {
        self.change(key, Change::ListRemove(index as u64))?;
        Ok(())
    }

    /// Adds a set member; whether it was new.
    pub fn sadd(&mut self, key: &[u8], member: &Bytes) -> Result<bool, Reply> {
        Ok(self.change(key, Change::SetAdd(member.clone()))?.is_some())
    }

    /// Removes a set member; whether it was there.
    pub fn srem(&mut self, key: &[u8], member: &Bytes) -> Result<bool, Reply> {
        Ok(self.change(key, Change::SetRem(member.clone()))?.is_some())
    }

    /// Sets a sorted-set member's score; its old score if it had one.
    pub fn zadd(&mut self, key: &[u8], member: &Bytes, score: f64) -> Result<Option<f64>, Reply> {
        Ok(match self.change(key, Change::ZAdd(member.clone(), score))? {
            Some(Change::ZAdd(_, old)) => Some(*old),
            _ => None,
        })
    }

    /// Removes a sorted-set member; its score if it was there.
    pub fn zrem(&mut self, key: &[u8], member: &Bytes) -> Result<Option<f64>, Reply> {
        Ok(match self.change(key, Change::ZRem(member.clone()))? {
            Some(Change::ZAdd(_, old)) => Some(*old),
            _ => None,
        })
    }
}

/// WRONGTYPE.
pub fn wrong_type() -> Reply {
    Reply::Error(ferry_value::entry::WRONGTYPE.into())
}

/// Projections of a value onto its types, for [`Keys::read`].
pub mod as_type {
    use super::*;

    /// A hash.
    pub fn hash(value: &Value) -> Option<&Hash> {
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
    /// A set.
    pub fn set(value: &Value) -> Option<&Set> {
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
}

/// Where seeds for random picks come from: the time mixed with a count of the seeds
/// handed out, so two commands in the same microsecond still pick independently.
pub fn fresh_seed(now_us: u64) -> u64 {
    static HANDED_OUT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = HANDED_OUT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    now_us ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// splitmix64's finaliser: every bit of `seed` reaches every bit of the result.
fn spread(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use ferry_value::DEFAULT_ENCODINGS;

    use super::*;

    fn b(text: &str) -> Bytes {
        Bytes::copy_from_slice(text.as_bytes())
    }

    fn expired() -> Entry {
        Entry {
            value: Value::Str(b("v")),
            expires_at_ms: Some(100),
        }
    }

    #[test]
    fn an_expired_key_reads_absent_and_is_deleted_only_where_allowed() {
        let mut slots = [Slot::new(b("k"), Some(expired()))];
        let mut keys = Keys::new(&mut slots, 100_000, 1, DEFAULT_ENCODINGS, true);
        assert!(!keys.exists(b"k").unwrap());
        assert!(!keys.expired_met());
        assert_eq!(slots[0].tracked.changes(), &[Change::Delete]);
        let mut slots = [Slot::new(b("k"), Some(expired()))];
        let mut keys = Keys::new(&mut slots, 100_000, 1, DEFAULT_ENCODINGS, false);
        assert!(!keys.exists(b"k").unwrap());
        assert!(keys.expired_met());
        assert!(!slots[0].tracked.changed());
        let mut slots = [Slot::new(b("k"), Some(expired()))];
        let mut keys = Keys::new(&mut slots, 99_999, 1, DEFAULT_ENCODINGS, true);
        assert!(keys.exists(b"k").unwrap());
    }

    #[test]
    fn wrong_types_are_refused_and_change_nothing() {
        let mut slots = [
            Slot::new(b("s"), Some(Entry::string(b("text")))),
            Slot::new(b("n"), None),
        ];
        let mut keys = Keys::new(&mut slots, 0, 1, DEFAULT_ENCODINGS, true);
        assert_eq!(keys.hset(b"s", &b("f"), &b("v")).unwrap_err(), wrong_type());
        assert_eq!(keys.read(b"s", as_type::list).unwrap_err(), wrong_type());
        assert_eq!(keys.read(b"n", as_type::list).unwrap(), None);
        assert!(
            keys.read(b"missing", as_type::list).is_err(),
            "an undeclared key is an error"
        );
        assert!(slots.iter().all(|slot| !slot.tracked.changed()));
    }

    #[test]
    fn an_emptied_collection_is_deleted_and_a_rolled_back_command_changes_nothing() {
        let mut slots = [Slot::new(b("h"), None)];
        let mut keys = Keys::new(&mut slots, 0, 1, DEFAULT_ENCODINGS, true);
        assert!(keys.hset(b"h", &b("f"), &b("v")).unwrap());
        let mark = keys.mark();
        assert!(keys.hdel(b"h", &b("f")).unwrap());
        keys.settle();
        assert!(!keys.exists(b"h").unwrap());
        keys.rollback_to(&mark);
        assert_eq!(
            keys.read(b"h", as_type::hash).unwrap().unwrap().get(b"f"),
            Some(&b"v"[..])
        );
        // A read-only command may not change anything.
        let mut slots = [Slot::new(b("h"), None)];
        let mut keys = Keys::read_only(&mut slots, 0, 1, DEFAULT_ENCODINGS);
        assert!(keys.hset(b"h", &b("f"), &b("v")).is_err());
    }

    #[test]
    fn first_picks_of_commands_at_one_clock_reading_are_spread_evenly() {
        // Commands of one pipelined batch may all run at one clock reading.
        let now_us = 1_765_000_000_000_000u64;
        let mut counts = [0u32; 3];
        for _ in 0..3000 {
            let mut slots: Vec<Slot> = Vec::new();
            let mut keys = Keys::new(&mut slots, now_us, fresh_seed(now_us), DEFAULT_ENCODINGS, true);
            counts[keys.random_below(3)] += 1;
        }
        assert!(counts.iter().all(|&count| (850..=1150).contains(&count)), "{counts:?}");
    }
}
