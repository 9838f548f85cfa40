//! A replica installing its primary's commits while it serves reads (`READONLY`). Unlike
//! recovery, which runs alone, a replicated commit is installed the way a commit is: every
//! object it writes under its shard's write lock at once, so a reader sees all of it or
//! none. Its record goes to the replica's own log first, under the tenant's `installing`
//! lock, so a snapshot's mark on the replica sees it installed or not logged (the same
//! argument as for commits, `scan.rs`).

use std::sync::atomic::Ordering;

use super::{check_write_ref, last_writes, TenantStore};
use crate::error::StoreError;
use crate::limits::MAX_TX_OBJECTS;
use crate::locks::LockPlan;
use crate::tenant::WriteRef;

/// Why a replicated commit was not installed.
#[derive(Debug, thiserror::Error)]
pub enum ReplicateError<E> {
    /// The commit breaks the store's limits (a primary with other limits, or damage the
    /// checksum missed).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The replica's log refused the record: nothing was installed.
    #[error("the replica's log refused the record: {0}")]
    Log(E),
}

impl TenantStore {
    /// Installs the primary's commit `version` after `log` has put its record in this
    /// node's log: atomically for readers, at the primary's version, with the clock moved
    /// past it. The quota is charged without refusing (the primary already admitted it).
    pub fn replicate<E>(
        &self,
        version: u64,
        writes: &[WriteRef<'_>],
        log: impl FnOnce() -> Result<(), E>,
    ) -> Result<(), ReplicateError<E>> {
        if writes.len() > MAX_TX_OBJECTS {
            return Err(StoreError::TooManyObjects(writes.len()).into());
        }
        for write in writes {
            check_write_ref(write)?;
        }
        for write in writes {
            self.ensure_table(write.table)?;
        }
        let writes = last_writes(writes);
        let tables = self.tables.read();
        let mut plan = LockPlan::with_capacity(writes.len());
        for write in writes.iter() {
            // Invariant: ensure_table created every written table and tables are never
            // removed.
            let (name, table) = tables.get_key_value(write.table).expect("written table exists");
            plan.add(name, table, write.key, true);
        }
        let mut locked = plan.lock();
        let _installing = self.installing.read();
        log().map_err(ReplicateError::Log)?;
        let encodings = self.encodings();
        for write in writes.iter() {
            self.replay_write(locked.shard_mut(write.table, write.key), write, version, &encodings)?;
        }
        self.clock.fetch_max(version, Ordering::AcqRel);
        self.commits.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put<'a>(table: &'a str, key: &'a [u8], value: &'a [u8]) -> WriteRef<'a> {
        WriteRef::put(table, key, value)
    }

    #[test]
    fn installs_at_the_primarys_version_after_logging() {
        let store = TenantStore::new(1 << 20);
        let mut logged = Vec::new();
        store
            .replicate::<()>(7, &[put("t", b"a", b"1"), put("t", b"b", b"2")], || {
                logged.push(7);
                Ok(())
            })
            .unwrap();
        assert_eq!(logged, vec![7]);
        assert_eq!(store.get("t", b"a").unwrap().unwrap().0, 7);
        assert_eq!(store.get("t", b"b").unwrap().unwrap().1.as_ref(), b"2");
        // The replica's clock is past the primary's commit: a promoted replica's next
        // commit gets a higher version.
        let next = store.put("t", b"c", b"3").unwrap();
        assert!(next > 7, "{next}");
    }

    #[test]
    fn a_refused_record_installs_nothing() {
        let store = TenantStore::new(1 << 20);
        let refused = store.replicate(3, &[put("t", b"a", b"1")], || Err("disk full"));
        assert!(matches!(refused, Err(ReplicateError::Log("disk full"))));
        assert_eq!(store.get("t", b"a").unwrap(), None);
        assert_eq!(store.stats().objects, 0);
    }

    #[test]
    fn deletes_and_overwrites_keep_the_counts() {
        let store = TenantStore::new(1 << 20);
        store.replicate::<()>(1, &[put("t", b"a", b"1")], || Ok(())).unwrap();
        store.replicate::<()>(2, &[put("t", b"a", b"22")], || Ok(())).unwrap();
        let delete = WriteRef::delete("t", b"a");
        store.replicate::<()>(3, &[delete], || Ok(())).unwrap();
        assert_eq!(store.get("t", b"a").unwrap(), None);
        let stats = store.stats();
        assert_eq!(stats.objects, 0);
        assert_eq!(stats.used_bytes, 0);
    }
}
