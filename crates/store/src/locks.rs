//! Shard locks taken in one global order.
//!
//! A transaction names the objects it reads and writes; the plan maps each to its table's
//! shard, sorts the shards by (table name, shard index), merges duplicates (write wins) and
//! locks them in that order. Every multi-object operation in the store locks this way, so
//! two transactions can never wait on each other in a cycle.

use std::collections::HashMap;
use std::sync::atomic::AtomicU32;

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use bytes::Bytes;
use ferry_value::Entry;

use crate::limits::SHARDS_PER_TABLE;

/// One stored object.
#[derive(Debug)]
pub(crate) struct Object {
    /// Version of the commit that wrote it (never 0).
    pub(crate) version: u64,
    /// Its value and expiry, in allocations of their own (never a slice of a request
    /// buffer, which would pin the whole request in memory).
    pub(crate) entry: Entry,
    /// When it was last used (LRU), or how often under an LFU policy (LFU), for eviction
    /// and OBJECT IDLETIME / FREQ (`crate::eviction`).
    /// Atomic: readers stamp it under the shard's read lock.
    pub(crate) access: AtomicU32,
}

impl Object {
    /// A new object with its first access stamp.
    pub(crate) fn new(version: u64, entry: Entry, access: u32) -> Object {
        Object {
            version,
            entry,
            access: AtomicU32::new(access),
        }
    }
}

/// What a listing of a table (KEYS, SCAN, DBSIZE, RANDOMKEY) shows of an object besides
/// its key: its type and its expiry.
pub(crate) type Shown = (&'static str, Option<u64>);

/// What a listing shows of `entry`.
pub(crate) fn shown(entry: &Entry) -> Shown {
    (entry.value.type_name(), entry.expires_at_ms)
}

/// One lock shard of a table: the objects whose key hashes to it, and the versions of the
/// latest delete among them and of the latest change a listing shows. An absent object
/// carries no version of its own, so a reader at a read version older than `deleted_at`
/// cannot tell whether what it reads as absent was still there at its read version (see
/// `tenant::snapshot`); a listing at a read version older than `listed_at` cannot be made
/// (see `tenant::membership`).
#[derive(Debug, Default)]
pub(crate) struct Shard {
    /// By key, hashed with aHash: every read pays for the hash, and its random per-process
    /// keys keep clients from choosing colliding keys.
    pub(crate) objects: HashMap<Bytes, Object, ahash::RandomState>,
    /// Version of the latest commit that removed an object of this shard (0: none).
    pub(crate) deleted_at: u64,
    /// Version of the latest commit that created or removed an object of this shard, or
    /// changed its type or expiry (0: none).
    pub(crate) listed_at: u64,
}

impl Shard {
    /// Notes that the commit `version` took an object from `before` to `after` as a
    /// listing shows it (`None`: absent).
    pub(crate) fn note_listing(&mut self, before: Option<Shown>, after: Option<Shown>, version: u64) {
        if before != after {
            self.listed_at = self.listed_at.max(version);
        }
    }

    /// When the object a reader found under a key (`None`: absent) last changed: its
    /// version, or for an absent one the shard's last delete (a bound: the object may have
    /// been absent for longer).
    pub(crate) fn changed_at_of(&self, object: Option<&Object>) -> u64 {
        object.map_or(self.deleted_at, |object| object.version)
    }
}

impl std::ops::Deref for Shard {
    type Target = HashMap<Bytes, Object, ahash::RandomState>;

    fn deref(&self) -> &Self::Target {
        &self.objects
    }
}

impl std::ops::DerefMut for Shard {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.objects
    }
}

/// A table: its objects split over [`SHARDS_PER_TABLE`] independently locked shards.
pub(crate) struct Table {
    pub(crate) shards: Box<[RwLock<Shard>]>,
}

impl Table {
    pub(crate) fn new() -> Table {
        Table {
            shards: (0..SHARDS_PER_TABLE).map(|_| RwLock::new(Shard::default())).collect(),
        }
    }
}

/// Shard of a key: FNV-1a, cheap and stable across processes (the hash maps inside a shard
/// use a randomly seeded hasher, so this choice does not expose them to flooding).
pub(crate) fn shard_of(key: &[u8]) -> usize {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in key {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    (hash % SHARDS_PER_TABLE as u64) as usize
}

/// A shard to lock and how.
struct Want<'t> {
    table_name: &'t str,
    table: &'t Table,
    shard: usize,
    write: bool,
}

enum Guard<'t> {
    Read(RwLockReadGuard<'t, Shard>),
    Write(RwLockWriteGuard<'t, Shard>),
}

/// The shard locks of one transaction, held until dropped.
pub(crate) struct LockedShards<'t> {
    /// Sorted by (table name, shard); parallel to `guards`.
    keys: Vec<(&'t str, usize)>,
    guards: Vec<Guard<'t>>,
}

/// Builds a lock plan incrementally.
pub(crate) struct LockPlan<'t> {
    wants: Vec<Want<'t>>,
}

impl<'t> LockPlan<'t> {
    pub(crate) fn with_capacity(capacity: usize) -> LockPlan<'t> {
        LockPlan {
            wants: Vec::with_capacity(capacity),
        }
    }

    /// Adds the shard of `key` in `table`.
    pub(crate) fn add(&mut self, table_name: &'t str, table: &'t Table, key: &[u8], write: bool) {
        self.wants.push(Want {
            table_name,
            table,
            shard: shard_of(key),
            write,
        });
    }

    /// Adds every shard of `table` for reading: what a read of its listing validates.
    pub(crate) fn add_table(&mut self, table_name: &'t str, table: &'t Table) {
        self.wants.extend((0..table.shards.len()).map(|shard| Want {
            table_name,
            table,
            shard,
            write: false,
        }));
    }

    /// Takes every lock in global order.
    pub(crate) fn lock(mut self) -> LockedShards<'t> {
        self.wants
            .sort_unstable_by(|a, b| (a.table_name, a.shard).cmp(&(b.table_name, b.shard)));
        let mut keys: Vec<(&'t str, usize)> = Vec::with_capacity(self.wants.len());
        let mut merged: Vec<Want<'t>> = Vec::with_capacity(self.wants.len());
        for want in self.wants {
            match merged.last_mut() {
                Some(last) if last.table_name == want.table_name && last.shard == want.shard => {
                    last.write |= want.write;
                }
                _ => {
                    keys.push((want.table_name, want.shard));
                    merged.push(want);
                }
            }
        }
        let guards = merged
            .iter()
            .map(|want| {
                let lock = &want.table.shards[want.shard];
                if want.write {
                    Guard::Write(lock.write())
                } else {
                    Guard::Read(lock.read())
                }
            })
            .collect();
        LockedShards { keys, guards }
    }
}

impl LockedShards<'_> {
    fn index(&self, table_name: &str, key: &[u8]) -> usize {
        let shard = shard_of(key);
        // Invariant: callers only look up objects they added to the plan.
        self.keys
            .binary_search_by(|probe| (probe.0, probe.1).cmp(&(table_name, shard)))
            .expect("object was added to the lock plan")
    }

    /// The object under `key`, if present. The shard must be in the plan.
    pub(crate) fn get(&self, table_name: &str, key: &[u8]) -> Option<&Object> {
        let shard: &Shard = match &self.guards[self.index(table_name, key)] {
            Guard::Read(guard) => guard,
            Guard::Write(guard) => guard,
        };
        shard.get(key)
    }

    /// The locked shards of `table_name` (all of them if the plan added the table).
    pub(crate) fn shards_of<'s>(&'s self, table_name: &'s str) -> impl Iterator<Item = &'s Shard> + 's {
        self.keys
            .iter()
            .zip(&self.guards)
            .filter(move |((name, _), _)| *name == table_name)
            .map(|(_, guard)| match guard {
                Guard::Read(guard) => &**guard,
                Guard::Write(guard) => &**guard,
            })
    }

    /// Mutable access to the shard of `key`. The shard must be in the plan for writing.
    pub(crate) fn shard_mut(&mut self, table_name: &str, key: &[u8]) -> &mut Shard {
        let index = self.index(table_name, key);
        match &mut self.guards[index] {
            Guard::Write(guard) => guard,
            // Invariant: every written object's shard is planned with write = true.
            Guard::Read(_) => panic!("shard of a written object was locked for reading"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_of_is_stable_and_spread() {
        assert_eq!(shard_of(b"k"), shard_of(b"k"));
        let mut used = std::collections::HashSet::new();
        for i in 0..1000u32 {
            used.insert(shard_of(&i.to_le_bytes()));
        }
        assert!(used.len() > SHARDS_PER_TABLE / 2, "keys should spread over shards");
    }

    #[test]
    fn duplicate_shards_are_locked_once_with_write_winning() {
        let table = Table::new();
        let mut plan = LockPlan::with_capacity(3);
        plan.add("t", &table, b"a", false);
        plan.add("t", &table, b"a", true);
        plan.add("t", &table, b"a", false);
        let mut locked = plan.lock();
        assert_eq!(locked.guards.len(), 1);
        // Would panic if the merged lock were a read lock.
        locked.shard_mut("t", b"a");
    }
}
