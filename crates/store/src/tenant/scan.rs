//! A consistent copy of a tenant taken while it serves (a snapshot for the node's data
//! dir), without stopping it: a mark, then a scan one shard at a time.
//!
//! Why the mark plus a log replay gives back the state: a commit holds `installing` for
//! reading from the moment it hands its write set to the journal until its writes are
//! visible, and [`TenantStore::mark`] takes it for writing. So when the mark runs, every
//! commit the journal already holds is installed, and the scan (which starts after the
//! mark) sees it. A commit that reaches the journal after the mark may or may not be seen
//! by the scan, on some shards and not others; replaying every journal record from the
//! mark on, in order, sets each object it touched to its last logged value whatever the
//! scan saw, so the copy plus that replay is the state at the end of the replayed log.
//! Between marks and scans the node goes on committing; a shard is read-locked only for
//! as long as copying its objects' handles takes (values are shared, not copied).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use super::TenantStore;

/// What [`TenantStore::mark`] saw: the caller's value (the log's end) and the tenant's
/// clock, which is at least the version of every commit the caller's value covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanMark<T> {
    /// What the closure returned.
    pub at: T,
    /// The clock when it ran.
    pub clock: u64,
}

/// Objects the scan hands over at most at once (a shard can hold more).
pub const SCAN_BATCH_OBJECTS: usize = 4096;

impl TenantStore {
    /// Runs `at` (reading the journal's end) while no commit is between its journal
    /// record and its writes being visible. Commits wait for it, briefly: `at` must not
    /// block.
    pub fn mark<T>(&self, at: impl FnOnce() -> T) -> ScanMark<T> {
        let _no_commit_half_done = self.installing.write();
        ScanMark {
            at: at(),
            clock: self.clock.load(Ordering::Acquire),
        }
    }

    /// Hands every object to `each`, by table and in batches of at most
    /// [`SCAN_BATCH_OBJECTS`] of (key, version, value), holding no lock while `each` runs.
    /// Returns the objects handed over. An error from `each` stops the scan.
    pub fn scan<E>(&self, mut each: impl FnMut(&str, &[(Bytes, u64, Bytes)]) -> Result<(), E>) -> Result<u64, E> {
        // The table list is copied out: holding the tables' lock while `each` does I/O
        // would stop every operation behind a table creation waiting for it.
        let mut tables: Vec<(String, Arc<crate::locks::Table>)> = self
            .tables
            .read()
            .iter()
            .map(|(name, table)| (name.clone(), Arc::clone(table)))
            .collect();
        tables.sort_by(|a, b| a.0.cmp(&b.0));
        let mut handed = 0u64;
        let mut batch = Vec::with_capacity(SCAN_BATCH_OBJECTS);
        for (name, table) in &tables {
            for shard in table.shards.iter() {
                // Handles under the lock, byte forms after it.
                let copied: Vec<(Bytes, u64, ferry_value::Entry)> = shard
                    .read()
                    .iter()
                    .map(|(key, object)| (key.clone(), object.version, object.entry.clone()))
                    .collect();
                for (key, version, entry) in copied {
                    batch.push((key, version, entry.encode()));
                    if batch.len() == SCAN_BATCH_OBJECTS {
                        each(name, &batch)?;
                        handed += batch.len() as u64;
                        batch.clear();
                    }
                }
            }
            if !batch.is_empty() {
                each(name, &batch)?;
                handed += batch.len() as u64;
                batch.clear();
            }
        }
        Ok(handed)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use parking_lot::Mutex;

    use super::*;
    use crate::journal::{Journal, JournalRefusal};
    use crate::tenant::WriteRef;

    const QUOTA: u64 = 64 << 20;

    fn all(store: &TenantStore) -> Vec<(String, Bytes, u64, Bytes)> {
        let mut out = Vec::new();
        store
            .scan(|table, batch| {
                out.extend(
                    batch
                        .iter()
                        .map(|(k, v, x)| (table.to_string(), k.clone(), *v, x.clone())),
                );
                Ok::<(), ()>(())
            })
            .unwrap();
        out.sort();
        out
    }

    #[test]
    fn a_scan_hands_over_every_object_in_batches() {
        let store = TenantStore::new(QUOTA);
        for i in 0..(SCAN_BATCH_OBJECTS as u32 + 10) {
            store.put("a", &i.to_le_bytes(), b"v").unwrap();
        }
        store.put("b", b"k", b"w").unwrap();
        let mut batches = Vec::new();
        let handed = store
            .scan(|table, batch| {
                batches.push((table.to_string(), batch.len()));
                Ok::<(), ()>(())
            })
            .unwrap();
        assert_eq!(handed, SCAN_BATCH_OBJECTS as u64 + 11);
        assert!(batches.iter().all(|(_, n)| *n <= SCAN_BATCH_OBJECTS));
        assert_eq!(batches.last().unwrap(), &("b".to_string(), 1));
    }

    #[test]
    fn recovered_objects_equal_the_scanned_ones_with_the_clock_past_them() {
        let store = TenantStore::new(QUOTA);
        store.put("t", b"x", b"1").unwrap();
        store.put("t", b"y", b"22").unwrap();
        store.put("t", b"x", b"333").unwrap();
        store.delete("t", b"y").unwrap();
        let mark = store.mark(|| ());
        let copy = TenantStore::new(QUOTA);
        for (table, key, version, value) in all(&store) {
            copy.recover_object(&table, &key, version, &value).unwrap();
        }
        copy.recover_clock(mark.clock);
        assert_eq!(all(&copy), all(&store));
        assert_eq!(copy.stats().used_bytes, store.stats().used_bytes);
        assert_eq!(copy.stats().objects, 1);
        assert!(copy.put("t", b"z", b"").unwrap() > mark.clock);
    }

    /// A journal that counts records and can stall one commit between its record and its
    /// writes being visible.
    #[derive(Default)]
    struct Counting {
        records: Mutex<u64>,
        stall: AtomicBool,
        stalled: AtomicBool,
    }

    impl Journal for Counting {
        fn record(&self, _version: u64, _writes: &[WriteRef<'_>]) -> Result<(), JournalRefusal> {
            *self.records.lock() += 1;
            if self.stall.swap(false, Ordering::AcqRel) {
                self.stalled.store(true, Ordering::Release);
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            Ok(())
        }
    }

    #[test]
    fn a_mark_waits_for_a_commit_between_its_record_and_its_writes() {
        let store = Arc::new(TenantStore::new(QUOTA));
        let journal = Arc::new(Counting::default());
        assert!(store.attach_journal(journal.clone()).is_ok());
        journal.stall.store(true, Ordering::Release);
        let writer = std::thread::spawn({
            let store = Arc::clone(&store);
            move || store.put("t", b"k", b"v").unwrap()
        });
        while !journal.stalled.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        // The commit is in the journal but not yet visible: the mark must wait for it, or
        // a scan after the mark could miss a commit a replay from the mark would skip.
        let mark = store.mark(|| (*journal.records.lock(), store.stats().objects));
        assert_eq!(
            mark.at,
            (1, 1),
            "the mark ran while a journalled commit was not visible"
        );
        assert_eq!(mark.clock, writer.join().unwrap());
    }
}
