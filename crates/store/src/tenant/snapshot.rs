//! Reads at a read version (TL2): an invocation takes the tenant's clock when it starts,
//! and each read checks only its own object against it, so a read costs O(1) whatever the
//! invocation read before, and the read set is validated once, at commit.
//!
//! Why a read at read version `rv` sees the state as of `rv`: a commit takes its version
//! from the clock while it holds the write locks of every object it writes and installs
//! them before letting go. So a commit of version `v <= rv` took its locks before `rv` was
//! read, and any later read of one of its objects waits for it and sees it; a read that
//! finds a version newer than `rv` (or, for an absent object, a delete newer than `rv` in
//! its shard) cannot know the object's value at `rv` and answers [`StoreError::Newer`].
//! Every value a reader accepts was therefore the object's value at `rv`: the reads of one
//! invocation are one consistent snapshot (opacity), and a read-only invocation is
//! serialized at `rv` with no validation at all.
//!
//! A reader told `Newer` may extend its snapshot instead of starting over: take the clock
//! again as `rv2` and check, with [`TenantStore::still_current`], that everything read so
//! far is unchanged at `rv2`; the reads then stand at `rv2`, and the read is tried there.

use std::sync::atomic::Ordering;

use super::{check_key, hex, TenantStore, Versioned};
use crate::error::StoreError;
use crate::locks::shard_of;
use crate::tenant::ObjectRef;
use crate::VERSION_ABSENT;

/// Times [`TenantStore::read_now`] takes the clock again before it gives up on a key
/// rewritten faster than it can be read (answered as a conflict).
pub const MAX_FRESH_SNAPSHOT_ATTEMPTS: u32 = 8;

impl TenantStore {
    /// The name of this store's version clock: a read version means something only to the
    /// clock it was taken from.
    pub fn clock_id(&self) -> u64 {
        self.clock_id
    }

    /// Reads `keys` at a snapshot that starts now: the clock taken again if a key changes
    /// between taking it and reading (a busy writer), so the reads are one consistent
    /// snapshot, returned with its read version.
    pub fn read_now(&self, table: &str, keys: &[&[u8]]) -> Result<(Vec<Option<Versioned>>, u64), StoreError> {
        let mut attempts = 0;
        loop {
            let read_version = self.read_version();
            match self.read_at(table, keys, read_version) {
                Err(StoreError::Newer { .. }) if attempts < MAX_FRESH_SNAPSHOT_ATTEMPTS => attempts += 1,
                result => return result.map(|values| (values, read_version)),
            }
        }
    }

    /// The tenant's clock now: the read version of an invocation that starts now (every
    /// commit of a version up to it is installed for any reader that looks afterwards).
    pub fn read_version(&self) -> u64 {
        self.clock.load(Ordering::Acquire)
    }

    /// Reads `keys` of `table` as of `read_version`: each under its own shard's lock,
    /// checked against `read_version` alone. [`StoreError::Newer`] if one changed after it.
    pub fn read_at(
        &self,
        table: &str,
        keys: &[&[u8]],
        read_version: u64,
    ) -> Result<Vec<Option<Versioned>>, StoreError> {
        Ok(super::encoded(self.read_entries_at(table, keys, read_version)?))
    }

    /// [`TenantStore::read_at`], giving the entries themselves (a collection's shared, not
    /// copied): what a command run over them at the read version takes.
    pub fn read_entries_at(
        &self,
        table: &str,
        keys: &[&[u8]],
        read_version: u64,
    ) -> Result<Vec<Option<super::VersionedEntry>>, StoreError> {
        for key in keys {
            check_key(key)?;
        }
        let tables = self.tables.read();
        let Some(found) = tables.get(table) else {
            // A table that does not exist was never written: absent at every version.
            return Ok(vec![None; keys.len()]);
        };
        let entries: Vec<Option<(u64, ferry_value::Entry)>> = keys
            .iter()
            .map(|key| {
                let shard = found.shards[shard_of(key)].read();
                let object = shard.get(*key);
                let changed_at = shard.changed_at_of(object);
                if changed_at > read_version {
                    return Err(StoreError::Newer {
                        table: table.to_string(),
                        key_hex: hex(key),
                        read_version,
                        changed_at,
                    });
                }
                Ok(object.map(|object| {
                    self.touch(object);
                    (object.version, object.entry.clone())
                }))
            })
            .collect::<Result<_, _>>()?;
        Ok(entries)
    }

    /// Whether every object of `reads` still has the version it was read at, as of
    /// `read_version` (a read as absent also needs no delete in its shard after it): the
    /// check that lets a reader move its snapshot forward. `Conflict` names the first one
    /// that changed.
    pub fn still_current(&self, reads: &[ObjectRef<'_>], read_version: u64) -> Result<(), StoreError> {
        let tables = self.tables.read();
        for read in reads {
            if read.is_listing() {
                self.listing_still_current(tables.get(read.table).map(|table| &**table), read)?;
                continue;
            }
            let (current, changed_at) = match tables.get(read.table) {
                Some(table) => {
                    let shard = table.shards[shard_of(read.key)].read();
                    let object = shard.get(read.key);
                    let current = object.map_or(VERSION_ABSENT, |object| object.version);
                    (current, shard.changed_at_of(object))
                }
                None => (VERSION_ABSENT, VERSION_ABSENT),
            };
            if current != read.version || changed_at > read_version {
                self.conflicts.fetch_add(1, Ordering::Relaxed);
                return Err(StoreError::Conflict {
                    table: read.table.to_string(),
                    key_hex: hex(read.key),
                    read_version: read.version,
                    current_version: current,
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tenant::WriteRef;

    const QUOTA: u64 = 1 << 20;

    fn value(store: &TenantStore, key: &[u8], read_version: u64) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(store
            .read_at("t", &[key], read_version)?
            .pop()
            .flatten()
            .map(|(_, value)| value.to_vec()))
    }

    #[test]
    fn a_read_past_its_read_version_is_refused() {
        // The opacity rule itself: a value installed after the read version is never
        // returned, and one installed before it is.
        let store = TenantStore::new(QUOTA);
        store.put("t", b"a", b"1").unwrap();
        let rv = store.read_version();
        assert_eq!(value(&store, b"a", rv).unwrap(), Some(b"1".to_vec()));
        store.put("t", b"a", b"2").unwrap();
        assert!(matches!(value(&store, b"a", rv), Err(StoreError::Newer { .. })));
        assert_eq!(value(&store, b"a", store.read_version()).unwrap(), Some(b"2".to_vec()));
        // Keys never written, and tables never created, are absent at any version.
        assert_eq!(value(&store, b"never", rv).unwrap(), None);
        assert_eq!(store.read_at("none", &[b"k"], 0).unwrap(), vec![None]);
    }

    #[test]
    fn a_delete_after_the_read_version_is_not_read_as_absent() {
        // Without the shard's delete version, `b` would read as absent at a version where
        // it still existed: a state that never was (a was already 2 when b went away).
        let store = TenantStore::new(QUOTA);
        store.put("t", b"b", b"here").unwrap();
        let rv = store.read_version();
        store.delete("t", b"b").unwrap();
        assert!(matches!(value(&store, b"b", rv), Err(StoreError::Newer { .. })));
        assert_eq!(value(&store, b"b", store.read_version()).unwrap(), None);
    }

    #[test]
    fn a_snapshot_extends_only_over_unchanged_reads() {
        let store = TenantStore::new(QUOTA);
        let a_version = store.put("t", b"a", b"1").unwrap();
        let rv = store.read_version();
        let reads = [
            ObjectRef {
                table: "t",
                key: b"a",
                version: a_version,
            },
            ObjectRef {
                table: "t",
                key: b"gone",
                version: VERSION_ABSENT,
            },
        ];
        store.put("t", b"other", b"x").unwrap();
        assert_eq!(store.still_current(&reads, store.read_version()), Ok(()));
        store.commit(&[], &[WriteRef::put("t", b"a", b"2")]).unwrap();
        assert!(matches!(
            store.still_current(&reads, store.read_version()),
            Err(StoreError::Conflict { .. })
        ));
        assert!(rv < store.read_version());
    }

    #[test]
    fn an_absent_read_does_not_extend_to_a_version_where_the_object_existed() {
        // `gone` was read as absent, then created; the snapshot moves to rv2, where it
        // exists, and it is deleted after: absent now, but not at rv2, so the read cannot
        // stand there. Without the shard's delete version this would pass.
        let store = TenantStore::new(QUOTA);
        let read = [ObjectRef {
            table: "t",
            key: b"gone",
            version: VERSION_ABSENT,
        }];
        store.put("t", b"gone", b"briefly").unwrap();
        let rv2 = store.read_version();
        store.delete("t", b"gone").unwrap();
        assert!(store.still_current(&read, rv2).is_err());
        // At a version after the delete it is absent again, and the read stands there.
        assert_eq!(store.still_current(&read, store.read_version()), Ok(()));
    }
}
