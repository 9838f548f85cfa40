//! One tenant's data: tables, memory quota, version clock, and the operations on them.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use ferry_value::{Encodings, Entry};
use parking_lot::RwLock;

use crate::error::StoreError;
use crate::journal::Journal;
use crate::limits::{
    MAX_KEY_BYTES, MAX_TABLES_PER_TENANT, MAX_TABLE_NAME_BYTES, MAX_TX_OBJECTS, MAX_VALUE_BYTES, OBJECT_OVERHEAD_BYTES,
};
use crate::locks::{shown, LockPlan, LockedShards, Object, Shown, Table};
use crate::VERSION_ABSENT;

mod evict;
mod listing;
mod membership;
mod object;
mod recover;
mod replay;
mod replicate;
mod scan;
mod snapshot;
mod update;

pub use listing::{KeyInfo, TableKeys};
pub use object::ObjectInfo;
pub use replicate::ReplicateError;
pub use scan::{ScanMark, SCAN_BATCH_OBJECTS};
pub use snapshot::MAX_FRESH_SNAPSHOT_ATTEMPTS;
pub use update::{Updated, Watched};

/// An object a transaction read, with the version it saw (0 = absent).
#[derive(Clone, Copy, Debug)]
pub struct ObjectRef<'a> {
    /// Table of the object.
    pub table: &'a str,
    /// Key of the object.
    pub key: &'a [u8],
    /// Version seen.
    pub version: u64,
}

/// What a transaction does to one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Write<'a> {
    /// Sets its value to these bytes: a value's byte form (`ferry_value::Entry::encode`),
    /// or any bytes a storage function writes.
    Put(&'a [u8]),
    /// Deletes it.
    Delete,
    /// Applies changes (`ferry_value::change::encode`'s form) to the value it had at
    /// version `base` (0: absent): what the log records of a command run in place, so a
    /// push on a long list logs the item, not the list.
    Changes {
        /// The version the changes apply to.
        base: u64,
        /// The changes, encoded.
        changes: &'a [u8],
    },
}

/// An object a transaction writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteRef<'a> {
    /// Table (created if it does not exist).
    pub table: &'a str,
    /// Key.
    pub key: &'a [u8],
    /// What happens to it.
    pub write: Write<'a>,
}

impl<'a> WriteRef<'a> {
    /// Sets `key` of `table` to `value`.
    pub fn put(table: &'a str, key: &'a [u8], value: &'a [u8]) -> WriteRef<'a> {
        WriteRef {
            table,
            key,
            write: Write::Put(value),
        }
    }

    /// Deletes `key` of `table`.
    pub fn delete(table: &'a str, key: &'a [u8]) -> WriteRef<'a> {
        WriteRef {
            table,
            key,
            write: Write::Delete,
        }
    }

    /// Sets `key` of `table` to `value`, or deletes it (`None`).
    pub fn put_or_delete(table: &'a str, key: &'a [u8], value: Option<&'a [u8]>) -> WriteRef<'a> {
        match value {
            Some(value) => WriteRef::put(table, key, value),
            None => WriteRef::delete(table, key),
        }
    }
}

/// A value as read: its version and bytes.
pub type Versioned = (u64, Bytes);

/// A value as read, typed: its version and entry (a collection's handle, not a copy).
pub type VersionedEntry = (u64, Entry);

/// Values read as entries, in their byte form: encoded once no lock is held (a large
/// collection takes a while to write out).
fn encoded(values: Vec<Option<VersionedEntry>>) -> Vec<Option<Versioned>> {
    values
        .into_iter()
        .map(|value| value.map(|(version, entry)| (version, entry.encode())))
        .collect()
}

/// Counters of one tenant, for `stats`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TenantStats {
    /// Tables created.
    pub tables: u64,
    /// Objects stored.
    pub objects: u64,
    /// Bytes charged against the quota.
    pub used_bytes: u64,
    /// The memory limit in force (Redis's `maxmemory` for this tenant): the quota, or
    /// less if lowered at run time.
    pub quota_bytes: u64,
    /// Transactions with writes that committed.
    pub commits: u64,
    /// Transactions refused by validation.
    pub conflicts: u64,
    /// Keys removed by the eviction policy to make room for writes.
    pub evicted_keys: u64,
}

/// All data of one tenant. Shared by every worker; all methods take `&self`.
pub struct TenantStore {
    /// Tables by name. Held for reading during every operation; taken for writing only to
    /// create a table, which is also what makes "this table does not exist" a stable fact
    /// for the duration of a validation.
    /// Keyed with aHash like the shards: SipHash cost more than the rest of a lookup.
    tables: RwLock<HashMap<String, Arc<Table>, ahash::RandomState>>,
    /// Memory quota (keys + values + per-object overhead), as configured: the highest
    /// limit the tenant may set itself.
    ceiling_bytes: u64,
    /// The memory limit in force (`maxmemory`): at most `ceiling_bytes`.
    limit_bytes: AtomicU64,
    /// The eviction policy's code (`EvictionPolicy::code`).
    eviction: AtomicU8,
    /// The LRU clock the access stamps are taken from (`eviction::lru_clock`), advanced by
    /// the caller (`set_clock_ms`).
    lru_clock: AtomicU32,
    /// Keys evicted.
    evicted_keys: AtomicU64,
    /// When collections leave their compact encodings (Redis's `*-max-listpack-*`).
    encodings: RwLock<Encodings>,
    /// Bytes charged against the quota.
    used_bytes: AtomicU64,
    /// Objects stored.
    objects: AtomicU64,
    /// Last version handed out; versions of one tenant strictly increase.
    clock: AtomicU64,
    /// Which clock this is, for readers that carry snapshots of several (see
    /// [`TenantStore::clock_id`]).
    clock_id: u64,
    /// Write transactions committed.
    commits: AtomicU64,
    /// Transactions refused by validation.
    conflicts: AtomicU64,
    /// Where committed write sets go before they are visible; attached once, after any
    /// recovery (recovered commits are not journalled again).
    journal: OnceLock<Arc<dyn Journal>>,
    /// Held for reading by a commit from its journal record to its writes being visible,
    /// and for writing by [`TenantStore::mark`]: so a mark sees no commit half done (see
    /// `tenant/scan.rs`).
    installing: RwLock<()>,
}

/// What a commit's growth may fill: the memory limit in force (`maxmemory`), or, for a
/// function flagged `allow-oom`, the whole quota.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Room {
    Limit,
    Quota,
}

/// What an object costs against the quota: its key, its value as held in memory (a
/// string's bytes, a collection's encoding) and the per-object overhead.
fn charge(key: &[u8], entry: &Entry) -> u64 {
    key.len() as u64 + entry.value.memory_bytes() as u64 + OBJECT_OVERHEAD_BYTES
}

/// Checks a table name: non-empty, short, and printable in logs and stats names.
pub fn check_table_name(name: &str) -> Result<(), StoreError> {
    let valid_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-';
    if name.is_empty() || name.len() > MAX_TABLE_NAME_BYTES || !name.chars().all(valid_char) {
        return Err(StoreError::BadTableName(
            name.chars().take(MAX_TABLE_NAME_BYTES).collect(),
        ));
    }
    Ok(())
}

/// Checks a key's length.
pub fn check_key(key: &[u8]) -> Result<(), StoreError> {
    if key.is_empty() {
        Err(StoreError::EmptyKey)
    } else if key.len() > MAX_KEY_BYTES {
        Err(StoreError::KeyTooLarge(key.len()))
    } else {
        Ok(())
    }
}

/// Checks a value's length.
pub fn check_value(value: &[u8]) -> Result<(), StoreError> {
    if value.len() > MAX_VALUE_BYTES {
        Err(StoreError::ValueTooLarge(value.len()))
    } else {
        Ok(())
    }
}

/// Checks a write the way a commit will, so a runtime can refuse it when the function
/// makes it rather than at commit.
pub fn check_write(table: &str, key: &[u8], value: Option<&[u8]>) -> Result<(), StoreError> {
    check_table_name(table)?;
    check_key(key)?;
    if let Some(value) = value {
        check_value(value)?;
    }
    Ok(())
}

/// Checks one write of a transaction.
pub(crate) fn check_write_ref(write: &WriteRef<'_>) -> Result<(), StoreError> {
    match write.write {
        Write::Put(value) => check_write(write.table, write.key, Some(value)),
        Write::Delete => check_write(write.table, write.key, None),
        Write::Changes { changes, .. } => check_write(write.table, write.key, Some(changes)),
    }
}

fn hex(bytes: &[u8]) -> String {
    const SHOWN_BYTES: usize = 32;
    let mut out: String = bytes.iter().take(SHOWN_BYTES).map(|b| format!("{b:02x}")).collect();
    if bytes.len() > SHOWN_BYTES {
        out.push('…');
    }
    out
}

/// The effective writes of a transaction: its last write to each object, in the order of
/// those last writes. Borrowed when no object is written twice (the usual case).
fn last_writes<'w, 'a>(writes: &'w [WriteRef<'a>]) -> Cow<'w, [WriteRef<'a>]> {
    if writes.len() <= 1 {
        return Cow::Borrowed(writes);
    }
    let mut last_write: HashMap<(&str, &[u8]), usize, ahash::RandomState> =
        HashMap::with_capacity_and_hasher(writes.len(), ahash::RandomState::new());
    for (index, write) in writes.iter().enumerate() {
        last_write.insert((write.table, write.key), index);
    }
    if last_write.len() == writes.len() {
        return Cow::Borrowed(writes);
    }
    Cow::Owned(
        writes
            .iter()
            .enumerate()
            .filter(|(index, write)| last_write[&(write.table, write.key)] == *index)
            .map(|(_, write)| *write)
            .collect(),
    )
}

impl TenantStore {
    /// An empty tenant with a memory quota, its clock named 0 (a store no reader combines
    /// with another's: tests, a single process).
    pub fn new(quota_bytes: u64) -> TenantStore {
        TenantStore::with_clock_id(quota_bytes, 0)
    }

    /// An empty tenant with a memory quota whose clock is named `clock_id`: unique among
    /// the stores one reader may read from (a cluster's nodes, and their restarts).
    pub fn with_clock_id(quota_bytes: u64, clock_id: u64) -> TenantStore {
        TenantStore {
            clock_id,
            tables: RwLock::new(HashMap::default()),
            ceiling_bytes: quota_bytes,
            limit_bytes: AtomicU64::new(quota_bytes),
            eviction: AtomicU8::new(0),
            lru_clock: AtomicU32::new(0),
            evicted_keys: AtomicU64::new(0),
            encodings: RwLock::new(Encodings::default()),
            used_bytes: AtomicU64::new(0),
            objects: AtomicU64::new(0),
            clock: AtomicU64::new(VERSION_ABSENT),
            commits: AtomicU64::new(0),
            conflicts: AtomicU64::new(0),
            journal: OnceLock::new(),
            installing: RwLock::new(()),
        }
    }

    /// Sends every later commit's write set to `journal` before it is visible. Attach it
    /// after recovery and before serving; a second journal is refused (returned).
    pub fn attach_journal(&self, journal: Arc<dyn Journal>) -> Result<(), Arc<dyn Journal>> {
        self.journal.set(journal)
    }

    /// Reads one object; a missing table reads as a missing object.
    pub fn get(&self, table: &str, key: &[u8]) -> Result<Option<Versioned>, StoreError> {
        check_key(key)?;
        let tables = self.tables.read();
        let Some(table) = tables.get(table) else {
            return Ok(None);
        };
        let read = {
            let shard = table.shards[crate::locks::shard_of(key)].read();
            shard.get(key).map(|object| {
                self.touch(object);
                (object.version, object.entry.clone())
            })
        };
        Ok(read.map(|(version, entry)| (version, entry.encode())))
    }

    /// Reads objects of one table as one consistent snapshot, after checking that every
    /// object of `validate` still has the version listed (all under the same locks).
    pub fn read_validated(
        &self,
        table: &str,
        keys: &[&[u8]],
        validate: &[ObjectRef<'_>],
    ) -> Result<Vec<Option<Versioned>>, StoreError> {
        let reads: Vec<(&str, &[u8])> = keys.iter().map(|key| (table, *key)).collect();
        let (values, _) = self.transact(validate, &reads, &[], Room::Limit)?;
        Ok(encoded(values))
    }

    /// Writes one object, creating its table if needed; returns the new version.
    pub fn put(&self, table: &str, key: &[u8], value: &[u8]) -> Result<u64, StoreError> {
        Ok(self
            .transact(&[], &[], &[WriteRef::put(table, key, value)], Room::Limit)?
            .1)
    }

    /// When collections leave their compact encodings.
    pub fn encodings(&self) -> Encodings {
        *self.encodings.read()
    }

    /// Sets when collections leave their compact encodings (CONFIG SET
    /// `hash-max-listpack-entries` and the others); values stored already keep theirs.
    pub fn set_encodings(&self, encodings: Encodings) {
        *self.encodings.write() = encodings;
    }

    /// Deletes one object; `Ok(None)` when it did not exist (nothing is written then).
    pub fn delete(&self, table: &str, key: &[u8]) -> Result<Option<u64>, StoreError> {
        check_key(key)?;
        check_table_name(table)?;
        if !self.tables.read().contains_key(table) {
            return Ok(None);
        }
        // Read the current version and delete under the same lock, conditionally: a delete
        // of an object that a concurrent writer re-creates must not report "not found".
        loop {
            let Some((version, _)) = self.get(table, key)? else {
                return Ok(None);
            };
            let read = ObjectRef { table, key, version };
            let write = WriteRef::delete(table, key);
            match self.transact(&[read], &[], &[write], Room::Limit) {
                Ok((_, version)) => return Ok(Some(version)),
                Err(StoreError::Conflict { .. }) => continue,
                Err(err) => return Err(err),
            }
        }
    }

    /// OCC commit: validates `reads`, then installs `writes` atomically. Returns the commit
    /// version (0 for a read-only commit, which installs nothing).
    pub fn commit(&self, reads: &[ObjectRef<'_>], writes: &[WriteRef<'_>]) -> Result<u64, StoreError> {
        Ok(self.transact(reads, &[], writes, Room::Limit)?.1)
    }

    /// [`TenantStore::commit`] for a Redis function flagged `allow-oom`: its writes may take
    /// the tenant past its `maxmemory` (the limit in force), never past its quota.
    pub fn commit_allow_oom(&self, reads: &[ObjectRef<'_>], writes: &[WriteRef<'_>]) -> Result<u64, StoreError> {
        Ok(self.transact(reads, &[], writes, Room::Quota)?.1)
    }

    /// The one transaction routine every operation goes through: [`TenantStore::transact_once`],
    /// and when its writes do not fit and the eviction policy evicts, again after making
    /// room (`tenant/evict.rs`).
    fn transact(
        &self,
        validate: &[ObjectRef<'_>],
        reads: &[(&str, &[u8])],
        writes: &[WriteRef<'_>],
        room: Room,
    ) -> Result<(Vec<Option<VersionedEntry>>, u64), StoreError> {
        let mut outcome = self.transact_once(validate, reads, writes, room);
        for _ in 0..evict::MAX_ROOM_ROUNDS {
            match outcome {
                Err(StoreError::QuotaExceeded { needed_bytes, .. }) if self.make_room(needed_bytes) => {
                    outcome = self.transact_once(validate, reads, writes, room);
                }
                _ => break,
            }
        }
        outcome
    }

    /// Checks limits, creates written tables, locks every touched shard in global order,
    /// validates `validate`, reads `reads`, installs `writes`.
    fn transact_once(
        &self,
        validate: &[ObjectRef<'_>],
        reads: &[(&str, &[u8])],
        writes: &[WriteRef<'_>],
        room: Room,
    ) -> Result<(Vec<Option<VersionedEntry>>, u64), StoreError> {
        let touched = validate.len() + reads.len() + writes.len();
        if touched > MAX_TX_OBJECTS {
            return Err(StoreError::TooManyObjects(touched));
        }
        for object in validate.iter().filter(|object| !object.is_listing()) {
            check_key(object.key)?;
        }
        for (_, key) in reads {
            check_key(key)?;
        }
        for write in writes {
            check_write_ref(write)?;
        }
        for write in writes {
            self.ensure_table(write.table)?;
        }

        let tables = self.tables.read();
        let mut plan = LockPlan::with_capacity(touched);
        for object in validate {
            if let Some((name, table)) = tables.get_key_value(object.table) {
                if object.is_listing() {
                    plan.add_table(name, table);
                } else {
                    plan.add(name, table, object.key, false);
                }
            }
        }
        for (table_name, key) in reads {
            if let Some((name, table)) = tables.get_key_value(*table_name) {
                plan.add(name, table, key, false);
            }
        }
        for write in writes {
            // Invariant: ensure_table created every written table and tables are never
            // removed, so the lookup succeeds.
            let (name, table) = tables.get_key_value(write.table).expect("written table exists");
            plan.add(name, table, write.key, true);
        }
        let mut locked = plan.lock();

        for object in validate {
            if object.is_listing() {
                self.validate_listing(&locked, object)?;
                continue;
            }
            let current = if tables.contains_key(object.table) {
                locked
                    .get(object.table, object.key)
                    .map_or(VERSION_ABSENT, |o| o.version)
            } else {
                VERSION_ABSENT
            };
            if current != object.version {
                self.conflicts.fetch_add(1, Ordering::Relaxed);
                return Err(StoreError::Conflict {
                    table: object.table.to_string(),
                    key_hex: hex(object.key),
                    read_version: object.version,
                    current_version: current,
                });
            }
        }

        let values = reads
            .iter()
            .map(|(table, key)| {
                if tables.contains_key(*table) {
                    locked.get(table, key).map(|o| {
                        self.touch(o);
                        (o.version, o.entry.clone())
                    })
                } else {
                    None
                }
            })
            .collect();

        if writes.is_empty() {
            return Ok((values, VERSION_ABSENT));
        }
        let version = self.install(&mut locked, writes, room)?;
        Ok((values, version))
    }

    /// Installs writes under the held locks: charges the quota, takes a version, hands the
    /// write set to the journal, then makes it visible. A refusal at any step changes nothing.
    fn install(&self, locked: &mut LockedShards<'_>, writes: &[WriteRef<'_>], room: Room) -> Result<u64, StoreError> {
        let writes = last_writes(writes);
        let entries = self.entries_after(locked, &writes)?;
        let bound_bytes = match room {
            Room::Limit => self.limit_bytes(),
            Room::Quota => self.ceiling_bytes,
        };
        let net_grow = self.charge(locked, &writes, &entries, Some(bound_bytes))?;
        let _installing = self.installing.read();
        let version = self.clock.fetch_add(1, Ordering::AcqRel) + 1;
        if let Some(journal) = self.journal.get() {
            if let Err(refusal) = journal.record(version, &writes) {
                self.uncharge(net_grow);
                return Err(StoreError::Journal(refusal.0));
            }
        }
        self.apply(locked, version, &writes, entries);
        self.commits.fetch_add(1, Ordering::Relaxed);
        Ok(version)
    }

    /// The entry each write leaves (`None`: deleted), built before anything changes: a
    /// put's bytes decoded, changes applied to a copy of the value at their base (which
    /// must still be the object's version).
    fn entries_after(
        &self,
        locked: &LockedShards<'_>,
        writes: &[WriteRef<'_>],
    ) -> Result<Vec<Option<Entry>>, StoreError> {
        let encodings = self.encodings();
        writes
            .iter()
            .map(|write| {
                let current = locked.get(write.table, write.key);
                replay::entry_after(write, current.map(|o| (o.version, &o.entry)), &encodings)
            })
            .collect()
    }

    /// Charges the quota for `writes` (each object once), leaving `entries`, against what
    /// they replace; returns the net growth charged. With `bound_bytes`, growth past it is
    /// refused.
    fn charge(
        &self,
        locked: &LockedShards<'_>,
        writes: &[WriteRef<'_>],
        entries: &[Option<Entry>],
        bound_bytes: Option<u64>,
    ) -> Result<u64, StoreError> {
        let mut grow: u64 = 0;
        let mut shrink: u64 = 0;
        for (write, entry) in writes.iter().zip(entries) {
            let old = locked
                .get(write.table, write.key)
                .map_or(0, |o| charge(write.key, &o.entry));
            let new = entry.as_ref().map_or(0, |entry| charge(write.key, entry));
            if new >= old {
                grow += new - old;
            } else {
                shrink += old - new;
            }
        }
        self.charge_net(grow, shrink, bound_bytes)
    }

    /// Charges `grow` bytes and gives back `shrink`; returns the net growth charged. With
    /// `bound_bytes`, growth past it is refused and nothing is charged.
    fn charge_net(&self, grow: u64, shrink: u64, bound_bytes: Option<u64>) -> Result<u64, StoreError> {
        let net_grow = grow.saturating_sub(shrink);
        if let (true, Some(bound_bytes)) = (net_grow > 0, bound_bytes) {
            self.used_bytes
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                    (used + net_grow <= bound_bytes).then_some(used + net_grow)
                })
                .map_err(|used| StoreError::QuotaExceeded {
                    quota_bytes: bound_bytes,
                    used_bytes: used,
                    needed_bytes: net_grow,
                })?;
        } else if net_grow > 0 {
            self.used_bytes.fetch_add(net_grow, Ordering::AcqRel);
        } else {
            self.used_bytes.fetch_sub(shrink - grow, Ordering::AcqRel);
        }
        Ok(net_grow)
    }

    /// Gives back a growth [`TenantStore::charge`] took for a commit that did not happen.
    fn uncharge(&self, net_grow: u64) {
        self.used_bytes.fetch_sub(net_grow, Ordering::AcqRel);
    }

    /// Makes `writes` (each object once) visible at `version`, leaving `entries`.
    fn apply(&self, locked: &mut LockedShards<'_>, version: u64, writes: &[WriteRef<'_>], entries: Vec<Option<Entry>>) {
        for (write, entry) in writes.iter().zip(entries) {
            let shard = locked.shard_mut(write.table, write.key);
            self.place(shard, write.key, version, entry);
        }
    }

    /// Sets `key` in `shard` to `entry` (`None`: removed) at `version`.
    pub(crate) fn place(&self, shard: &mut crate::locks::Shard, key: &[u8], version: u64, entry: Option<Entry>) {
        let before = shard.get(key).map(|object| shown(&object.entry));
        self.place_after(shard, key, version, entry, before);
    }

    /// [`TenantStore::place`] for an object whose entry was taken out of its shard to be
    /// changed in place: `before` is what a listing showed of it then.
    pub(crate) fn place_after(
        &self,
        shard: &mut crate::locks::Shard,
        key: &[u8],
        version: u64,
        entry: Option<Entry>,
        before: Option<Shown>,
    ) {
        shard.note_listing(before, entry.as_ref().map(shown), version);
        match entry {
            Some(entry) => {
                if let Some(object) = shard.get_mut(key) {
                    let stamp = self.stamp_of_write(Some(object));
                    object.access.store(stamp, Ordering::Relaxed);
                    object.version = version;
                    object.entry = entry;
                } else {
                    let access = self.stamp_of_write(None);
                    shard.insert(Bytes::copy_from_slice(key), Object::new(version, entry, access));
                    self.objects.fetch_add(1, Ordering::Relaxed);
                }
            }
            None => {
                if shard.remove(key).is_some() {
                    self.objects.fetch_sub(1, Ordering::Relaxed);
                    shard.deleted_at = shard.deleted_at.max(version);
                }
            }
        }
    }

    fn ensure_table(&self, name: &str) -> Result<(), StoreError> {
        if self.tables.read().contains_key(name) {
            return Ok(());
        }
        let mut tables = self.tables.write();
        if tables.contains_key(name) {
            return Ok(());
        }
        if tables.len() >= MAX_TABLES_PER_TENANT {
            return Err(StoreError::TooManyTables);
        }
        tables.insert(name.to_string(), Arc::new(Table::new()));
        Ok(())
    }

    /// Every object of a table, sorted by key: for tests and state comparisons, not for the
    /// request path (it locks the table's shards one at a time).
    pub fn table_snapshot(&self, table: &str) -> Vec<(Bytes, u64, Bytes)> {
        let tables = self.tables.read();
        let Some(table) = tables.get(table) else {
            return Vec::new();
        };
        let mut out: Vec<(Bytes, u64, Bytes)> = table
            .shards
            .iter()
            .flat_map(|shard| {
                shard
                    .read()
                    .iter()
                    .map(|(key, object)| (key.clone(), object.version, object.entry.encode()))
                    .collect::<Vec<_>>()
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Names of the tenant's tables, sorted.
    pub fn table_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.tables.read().keys().cloned().collect();
        names.sort();
        names
    }

    /// Current counters.
    pub fn stats(&self) -> TenantStats {
        TenantStats {
            tables: self.tables.read().len() as u64,
            objects: self.objects.load(Ordering::Relaxed),
            used_bytes: self.used_bytes.load(Ordering::Relaxed),
            quota_bytes: self.limit_bytes(),
            commits: self.commits.load(Ordering::Relaxed),
            conflicts: self.conflicts.load(Ordering::Relaxed),
            evicted_keys: self.evicted_keys.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUOTA: u64 = 1 << 20;

    #[test]
    fn put_get_delete_and_versions_grow() {
        let store = TenantStore::new(QUOTA);
        assert_eq!(store.get("t", b"k").unwrap(), None);
        let v1 = store.put("t", b"k", b"one").unwrap();
        let v2 = store.put("t", b"k", b"two").unwrap();
        assert!(v2 > v1 && v1 > VERSION_ABSENT);
        assert_eq!(store.get("t", b"k").unwrap(), Some((v2, Bytes::from_static(b"two"))));
        let v3 = store.delete("t", b"k").unwrap().unwrap();
        assert!(v3 > v2);
        assert_eq!(store.get("t", b"k").unwrap(), None);
        assert_eq!(store.delete("t", b"k").unwrap(), None);
        assert_eq!(store.delete("missing_table", b"k").unwrap(), None);
        assert_eq!(store.stats().objects, 0);
        assert_eq!(store.stats().used_bytes, 0);
    }

    #[test]
    fn limits_are_enforced() {
        let store = TenantStore::new(QUOTA);
        let big_key = vec![b'k'; MAX_KEY_BYTES + 1];
        assert_eq!(
            store.put("t", &big_key, b"v"),
            Err(StoreError::KeyTooLarge(MAX_KEY_BYTES + 1))
        );
        assert_eq!(store.put("t", b"", b"v"), Err(StoreError::EmptyKey));
        let big_value = vec![0u8; MAX_VALUE_BYTES + 1];
        assert_eq!(
            store.put("t", b"k", &big_value),
            Err(StoreError::ValueTooLarge(MAX_VALUE_BYTES + 1))
        );
        assert!(matches!(
            store.put("bad name", b"k", b"v"),
            Err(StoreError::BadTableName(_))
        ));
        assert!(matches!(store.put("", b"k", b"v"), Err(StoreError::BadTableName(_))));
        // Nothing above created a table.
        assert!(store.table_names().is_empty());
    }

    #[test]
    fn quota_refuses_writes_that_do_not_fit_and_changes_nothing() {
        let store = TenantStore::new(1000);
        store.put("t", b"a", &[0u8; 500]).unwrap();
        let err = store.put("t", b"b", &[0u8; 500]).unwrap_err();
        assert!(matches!(err, StoreError::QuotaExceeded { .. }), "{err}");
        assert_eq!(store.get("t", b"b").unwrap(), None);
        // Overwriting with a smaller value frees room.
        store.put("t", b"a", &[0u8; 10]).unwrap();
        store.put("t", b"b", &[0u8; 500]).unwrap();
    }

    #[test]
    fn too_many_tables_is_refused() {
        let store = TenantStore::new(u64::MAX);
        for i in 0..MAX_TABLES_PER_TENANT {
            store.put(&format!("t{i}"), b"k", b"v").unwrap();
        }
        assert_eq!(store.put("one_more", b"k", b"v"), Err(StoreError::TooManyTables));
    }

    #[test]
    fn commit_validates_reads_and_installs_writes_atomically() {
        let store = TenantStore::new(QUOTA);
        let va = store.put("acct", b"a", b"10").unwrap();
        let vb = store.put("acct", b"b", b"0").unwrap();
        let reads = [
            ObjectRef {
                table: "acct",
                key: b"a",
                version: va,
            },
            ObjectRef {
                table: "acct",
                key: b"b",
                version: vb,
            },
        ];
        let writes = [WriteRef::put("acct", b"a", b"9"), WriteRef::put("acct", b"b", b"1")];
        let version = store.commit(&reads, &writes).unwrap();
        assert_eq!(
            store.get("acct", b"a").unwrap().unwrap(),
            (version, Bytes::from_static(b"9"))
        );
        assert_eq!(
            store.get("acct", b"b").unwrap().unwrap(),
            (version, Bytes::from_static(b"1"))
        );
        // The same transaction again is stale: nothing changes.
        let err = store.commit(&reads, &writes).unwrap_err();
        assert!(matches!(err, StoreError::Conflict { .. }), "{err}");
        assert_eq!(store.stats().conflicts, 1);
        assert_eq!(store.get("acct", b"a").unwrap().unwrap().0, version);
    }

    #[test]
    fn absent_reads_conflict_with_later_creation() {
        let store = TenantStore::new(QUOTA);
        let absent = [ObjectRef {
            table: "new",
            key: b"k",
            version: VERSION_ABSENT,
        }];
        assert_eq!(store.commit(&absent, &[]).unwrap(), VERSION_ABSENT);
        store.put("new", b"k", b"v").unwrap();
        assert!(matches!(store.commit(&absent, &[]), Err(StoreError::Conflict { .. })));
    }

    #[test]
    fn read_validated_reads_after_validation() {
        let store = TenantStore::new(QUOTA);
        let va = store.put("t", b"a", b"x").unwrap();
        store.put("t", b"b", b"y").unwrap();
        let ok = store
            .read_validated(
                "t",
                &[b"b", b"zz"],
                &[ObjectRef {
                    table: "t",
                    key: b"a",
                    version: va,
                }],
            )
            .unwrap();
        assert_eq!(ok[0].as_ref().unwrap().1, Bytes::from_static(b"y"));
        assert_eq!(ok[1], None);
        store.put("t", b"a", b"x2").unwrap();
        let stale = store.read_validated(
            "t",
            &[b"b"],
            &[ObjectRef {
                table: "t",
                key: b"a",
                version: va,
            }],
        );
        assert!(matches!(stale, Err(StoreError::Conflict { .. })));
    }

    #[test]
    fn duplicate_writes_in_one_commit_keep_the_last() {
        let store = TenantStore::new(QUOTA);
        let writes = [WriteRef::put("t", b"k", b"first"), WriteRef::put("t", b"k", b"last")];
        store.commit(&[], &writes).unwrap();
        assert_eq!(store.get("t", b"k").unwrap().unwrap().1, Bytes::from_static(b"last"));
        assert_eq!(store.stats().objects, 1);
        assert_eq!(
            store.stats().used_bytes,
            charge(b"k", &Entry::string(Bytes::from_static(b"last")))
        );
    }

    /// Concurrent transfers between accounts under OCC with retries keep the total: the
    /// store-level version of the closed-economy invariant.
    #[test]
    fn concurrent_transfers_conserve_the_total() {
        const ACCOUNTS: u64 = 8;
        const THREADS: u64 = 4;
        const TRANSFERS: u64 = 2000;
        let store = Arc::new(TenantStore::new(QUOTA));
        for account in 0..ACCOUNTS {
            store
                .put("acct", &account.to_le_bytes(), &100u64.to_le_bytes())
                .unwrap();
        }
        let threads: Vec<_> = (0..THREADS)
            .map(|thread| {
                let store = Arc::clone(&store);
                std::thread::spawn(move || {
                    for i in 0..TRANSFERS {
                        let from = (thread + i) % ACCOUNTS;
                        let to = (thread * 3 + i * 7 + 1) % ACCOUNTS;
                        if from == to {
                            continue;
                        }
                        loop {
                            let (vf, bf) = store.get("acct", &from.to_le_bytes()).unwrap().unwrap();
                            let (vt, bt) = store.get("acct", &to.to_le_bytes()).unwrap().unwrap();
                            let bf = u64::from_le_bytes(bf[..].try_into().unwrap());
                            let bt = u64::from_le_bytes(bt[..].try_into().unwrap());
                            if bf == 0 {
                                break;
                            }
                            let (kf, kt) = (from.to_le_bytes(), to.to_le_bytes());
                            let (nf, nt) = ((bf - 1).to_le_bytes(), (bt + 1).to_le_bytes());
                            let reads = [
                                ObjectRef {
                                    table: "acct",
                                    key: &kf,
                                    version: vf,
                                },
                                ObjectRef {
                                    table: "acct",
                                    key: &kt,
                                    version: vt,
                                },
                            ];
                            let writes = [WriteRef::put("acct", &kf, &nf), WriteRef::put("acct", &kt, &nt)];
                            match store.commit(&reads, &writes) {
                                Ok(_) => break,
                                Err(StoreError::Conflict { .. }) => continue,
                                Err(err) => panic!("{err}"),
                            }
                        }
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        let total: u64 = store
            .table_snapshot("acct")
            .iter()
            .map(|(_, _, value)| u64::from_le_bytes(value[..].try_into().unwrap()))
            .sum();
        assert_eq!(total, ACCOUNTS * 100);
    }
}
