//! A table's listing as a read of a transaction: what lets a script run KEYS, SCAN,
//! DBSIZE, RANDOMKEY or FLUSHDB under OCC without phantoms.
//!
//! A listing is every key of the table with what a listing shows of it (type, expiry), made
//! at a read version `rv` like any TL2 read (`tenant/snapshot.rs`): each shard is read under
//! its lock, and a shard whose listing changed after `rv` (its `listed_at`: a key created or
//! removed, a type or expiry changed) answers [`StoreError::Newer`]. So a listing shows the
//! table as of `rv`. The transaction keeps it in its read set as an [`ObjectRef`] with the
//! empty key (no object has it: keys are never empty) and version `rv`; it is still valid
//! while no shard of the table has changed its listing since `rv`. A commit validates it
//! under the read locks of every shard of the table, so no commit that would change the
//! listing is half done meanwhile: a key created by a concurrent commit is a conflict, as a
//! changed object is for an ordinary read (Silo's node-set validation, with the table's
//! shards as its nodes).
//!
//! Changes to values (HSET on an existing hash) do not change a listing, so a script that
//! lists keys conflicts only with commits that add, remove, retype or re-expire keys.

use super::{KeyInfo, ObjectRef, TenantStore};
use crate::error::StoreError;
use crate::locks::{LockedShards, Shard, Table};

/// What a conflict on a listing names as the object (the key of a listing read is empty).
const LISTING_NAME: &str = "(its keys)";

impl<'a> ObjectRef<'a> {
    /// A read of `table`'s listing made at `read_version`.
    pub fn listing(table: &'a str, read_version: u64) -> ObjectRef<'a> {
        ObjectRef {
            table,
            key: b"",
            version: read_version,
        }
    }

    /// Whether this is a read of a table's listing rather than of one object.
    pub fn is_listing(&self) -> bool {
        self.key.is_empty()
    }
}

/// The latest change a listing shows among `shards`.
fn listed_at<'s>(shards: impl Iterator<Item = &'s Shard>) -> u64 {
    shards.map(|shard| shard.listed_at).max().unwrap_or(0)
}

impl TenantStore {
    /// Every key of `table` with its type and expiry, as of `read_version`;
    /// [`StoreError::Newer`] if a shard's listing changed after it. A missing table lists
    /// nothing. O(n) in the table's objects, each shard under its lock in turn.
    pub fn list_at(&self, table: &str, read_version: u64) -> Result<Vec<KeyInfo>, StoreError> {
        let tables = self.tables.read();
        let Some(found) = tables.get(table) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for shard in &found.shards {
            let shard = shard.read();
            if shard.listed_at > read_version {
                return Err(StoreError::Newer {
                    table: table.to_string(),
                    key_hex: LISTING_NAME.to_string(),
                    read_version,
                    changed_at: shard.listed_at,
                });
            }
            out.extend(shard.iter().map(|(key, object)| super::listing::info_of(key, object)));
        }
        Ok(out)
    }

    /// Checks the listing read `read` against the locked shards of its table (every one of
    /// them, see [`crate::locks::LockPlan::add_table`]).
    pub(super) fn validate_listing(&self, locked: &LockedShards<'_>, read: &ObjectRef<'_>) -> Result<(), StoreError> {
        self.check_listing(read, listed_at(locked.shards_of(read.table)))
    }

    /// Checks the listing read `read` shard by shard, each under its own lock: what
    /// [`TenantStore::still_current`] does for it.
    pub(super) fn listing_still_current(&self, table: Option<&Table>, read: &ObjectRef<'_>) -> Result<(), StoreError> {
        let changed_at = table.map_or(0, |table| {
            table
                .shards
                .iter()
                .map(|shard| shard.read().listed_at)
                .max()
                .unwrap_or(0)
        });
        self.check_listing(read, changed_at)
    }

    fn check_listing(&self, read: &ObjectRef<'_>, changed_at: u64) -> Result<(), StoreError> {
        if changed_at <= read.version {
            return Ok(());
        }
        self.conflicts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Err(StoreError::Conflict {
            table: read.table.to_string(),
            key_hex: LISTING_NAME.to_string(),
            read_version: read.version,
            current_version: changed_at,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::{ObjectRef, StoreError, TenantStore, WriteRef};
    use ferry_value::{Entry, Value};

    const QUOTA: u64 = 1 << 20;

    fn keys(store: &TenantStore, read_version: u64) -> Result<Vec<Vec<u8>>, StoreError> {
        let mut keys: Vec<Vec<u8>> = store
            .list_at("t", read_version)?
            .into_iter()
            .map(|info| info.key.to_vec())
            .collect();
        keys.sort();
        Ok(keys)
    }

    fn expiring(at_ms: u64) -> bytes::Bytes {
        Entry {
            value: Value::Str(bytes::Bytes::from_static(b"v")),
            expires_at_ms: Some(at_ms),
        }
        .encode()
    }

    #[test]
    fn a_listing_is_made_at_its_read_version_or_refused() {
        let store = TenantStore::new(QUOTA);
        assert_eq!(keys(&store, 0).unwrap(), Vec::<Vec<u8>>::new(), "no table");
        store.put("t", b"a", b"1").unwrap();
        let rv = store.read_version();
        assert_eq!(keys(&store, rv).unwrap(), vec![b"a".to_vec()]);
        // A new value of a listed key changes no listing.
        store.put("t", b"a", b"2").unwrap();
        assert_eq!(keys(&store, rv).unwrap(), vec![b"a".to_vec()]);
        // A new key does.
        store.put("t", b"b", b"1").unwrap();
        assert!(matches!(keys(&store, rv), Err(StoreError::Newer { .. })));
        assert_eq!(keys(&store, store.read_version()).unwrap().len(), 2);
    }

    #[test]
    fn a_commit_after_a_key_came_or_went_conflicts() {
        let store = TenantStore::new(QUOTA);
        store.put("t", b"a", b"1").unwrap();
        let rv = store.read_version();
        let listing = [ObjectRef::listing("t", rv)];
        // Unchanged: the commit goes through, and so does a change of a value.
        store.commit(&listing, &[WriteRef::put("u", b"x", b"1")]).unwrap();
        store.put("t", b"a", b"2").unwrap();
        store.commit(&listing, &[WriteRef::put("u", b"x", b"2")]).unwrap();
        store.still_current(&listing, store.read_version()).unwrap();
        // A key created since: a phantom, refused.
        store.put("t", b"b", b"1").unwrap();
        let refused = store.commit(&listing, &[WriteRef::put("u", b"x", b"3")]);
        assert!(matches!(refused, Err(StoreError::Conflict { .. })), "{refused:?}");
        assert!(store.still_current(&listing, store.read_version()).is_err());
        // A key removed since, the same.
        let rv = store.read_version();
        store.delete("t", b"a").unwrap();
        assert!(store.commit(&[ObjectRef::listing("t", rv)], &[]).is_err());
        // A listing of a table that did not exist conflicts once it gets a key.
        let rv = store.read_version();
        store.commit(&[ObjectRef::listing("new", rv)], &[]).unwrap();
        store.put("new", b"k", b"1").unwrap();
        assert!(store.commit(&[ObjectRef::listing("new", rv)], &[]).is_err());
    }

    #[test]
    fn a_changed_type_or_expiry_changes_the_listing() {
        let store = TenantStore::new(QUOTA);
        store.put("t", b"a", b"1").unwrap();
        let rv = store.read_version();
        store.put("t", b"a", &expiring(u64::MAX)).unwrap();
        assert!(store.commit(&[ObjectRef::listing("t", rv)], &[]).is_err(), "expiry");
        // The same type and expiry again: no change.
        let rv = store.read_version();
        store.put("t", b"a", &expiring(u64::MAX)).unwrap();
        store.commit(&[ObjectRef::listing("t", rv)], &[]).unwrap();
        let hash = Entry {
            value: Value::Hash(std::sync::Arc::new(ferry_value::Hash::from_pairs(
                [(&b"f"[..], &b"v"[..])].into_iter(),
                &ferry_value::DEFAULT_ENCODINGS,
            ))),
            expires_at_ms: Some(u64::MAX),
        };
        store.put("t", b"a", &hash.encode()).unwrap();
        assert!(store.commit(&[ObjectRef::listing("t", rv)], &[]).is_err(), "type");
    }
}
