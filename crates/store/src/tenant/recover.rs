//! Putting back what a node's data dir holds, on start, before anyone is served: objects
//! of a snapshot and commits of the log, each at the version it had, with the clock moved
//! past them. One path for both, [`TenantStore::recover_write`]: one shard lock and one
//! hash operation per object. Recovery runs alone, so a commit's writes need not be
//! installed together (no lock plan, no validation), and nothing is journalled again.
//! The quota is charged without refusing: recovered data is never dropped (a quota
//! lowered since may show as exceeded).

use std::sync::atomic::Ordering;

use super::{check_write, check_write_ref, TenantStore};
use crate::error::StoreError;
use crate::limits::MAX_TX_OBJECTS;
use crate::locks::shard_of;
use crate::tenant::WriteRef;

impl TenantStore {
    /// Replays one commit read back from the log: each write at `version` (a write of
    /// changes only where the object is at its base, `tenant/replay.rs`).
    pub fn recover_commit(&self, version: u64, writes: &[WriteRef<'_>]) -> Result<(), StoreError> {
        if writes.len() > MAX_TX_OBJECTS {
            return Err(StoreError::TooManyObjects(writes.len()));
        }
        // Checked whole first: a commit is replayed entirely or not at all.
        for write in writes {
            check_write_ref(write)?;
        }
        for write in writes {
            self.recover_write(write, version)?;
        }
        Ok(())
    }

    /// Installs one object read back from a snapshot at its version.
    pub fn recover_object(&self, table: &str, key: &[u8], version: u64, value: &[u8]) -> Result<(), StoreError> {
        check_write(table, key, Some(value))?;
        self.recover_write(&WriteRef::put(table, key, value), version)
    }

    /// Moves the clock to at least `version` (a snapshot's clock: deletes it covers leave
    /// no object to carry their version).
    pub fn recover_clock(&self, version: u64) {
        self.clock.fetch_max(version, Ordering::AcqRel);
    }

    /// Replays `write` at `version`. The caller checked the write.
    fn recover_write(&self, write: &WriteRef<'_>, version: u64) -> Result<(), StoreError> {
        let found = self.tables.read().get(write.table).cloned();
        let table = match found {
            Some(table) => table,
            None => {
                self.ensure_table(write.table)?;
                self.tables
                    .read()
                    .get(write.table)
                    .cloned()
                    .expect("ensure_table created it")
            }
        };
        let encodings = self.encodings();
        let mut shard = table.shards[shard_of(write.key)].write();
        self.replay_write(&mut shard, write, version, &encodings)
    }
}
