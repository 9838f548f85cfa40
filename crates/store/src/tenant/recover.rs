//! Putting back what a node's data dir holds, on start, before anyone is served: objects
//! of a snapshot and commits of the log, each at the version it had, with the clock moved
//! past them. One path for both, [`TenantStore::recover_write`]: one shard lock and one
//! hash operation per object. Recovery runs alone, so a commit's writes need not be
//! installed together (no lock plan, no validation), and nothing is journalled again.
//! The quota is charged without refusing: recovered data is never dropped (a quota
//! lowered since may show as exceeded).

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::{charge, check_write, TenantStore};
use crate::error::StoreError;
use crate::limits::MAX_TX_OBJECTS;
use crate::locks::{shard_of, Object};
use crate::tenant::WriteRef;

impl TenantStore {
    /// Replays one commit read back from the log: each write at `version`.
    pub fn recover_commit(&self, version: u64, writes: &[WriteRef<'_>]) -> Result<(), StoreError> {
        if writes.len() > MAX_TX_OBJECTS {
            return Err(StoreError::TooManyObjects(writes.len()));
        }
        // Checked whole first: a commit is replayed entirely or not at all.
        for write in writes {
            check_write(write.table, write.key, write.value)?;
        }
        for write in writes {
            self.recover_write(write.table, write.key, version, write.value)?;
        }
        Ok(())
    }

    /// Installs one object read back from a snapshot at its version.
    pub fn recover_object(&self, table: &str, key: &[u8], version: u64, value: &[u8]) -> Result<(), StoreError> {
        check_write(table, key, Some(value))?;
        self.recover_write(table, key, version, Some(value))
    }

    /// Moves the clock to at least `version` (a snapshot's clock: deletes it covers leave
    /// no object to carry their version).
    pub fn recover_clock(&self, version: u64) {
        self.clock.fetch_max(version, Ordering::AcqRel);
    }

    /// Sets `key` of `table` to `value` (none: deleted) at `version`. The caller checked
    /// the write.
    fn recover_write(&self, table: &str, key: &[u8], version: u64, value: Option<&[u8]>) -> Result<(), StoreError> {
        let found = self.tables.read().get(table).cloned();
        let table = match found {
            Some(table) => table,
            None => {
                self.ensure_table(table)?;
                self.tables.read().get(table).cloned().expect("ensure_table created it")
            }
        };
        let mut shard = table.shards[shard_of(key)].write();
        let old = match value {
            Some(value) => {
                let access = self.stamp_of_write(shard.get(key));
                let object = Object::new(version, Bytes::copy_from_slice(value), access);
                shard.insert(Bytes::copy_from_slice(key), object)
            }
            None => {
                let removed = shard.remove(key);
                if removed.is_some() {
                    shard.deleted_at = shard.deleted_at.max(version);
                }
                removed
            }
        };
        let new_bytes = value.map_or(0, |value| charge(key, value));
        let old_bytes = old.as_ref().map_or(0, |old| charge(key, &old.value));
        if new_bytes >= old_bytes {
            self.used_bytes.fetch_add(new_bytes - old_bytes, Ordering::AcqRel);
        } else {
            self.used_bytes.fetch_sub(old_bytes - new_bytes, Ordering::AcqRel);
        }
        match (old.is_some(), value.is_some()) {
            (false, true) => {
                self.objects.fetch_add(1, Ordering::Relaxed);
            }
            (true, false) => {
                self.objects.fetch_sub(1, Ordering::Relaxed);
            }
            _ => {}
        }
        self.clock.fetch_max(version, Ordering::AcqRel);
        Ok(())
    }
}
