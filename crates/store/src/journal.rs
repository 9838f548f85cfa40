//! Where a tenant's committed write sets go before anyone can see them: the node's
//! write-ahead log, when it has one. The store only calls it; the journal does the I/O.

use thiserror::Error;

use crate::tenant::WriteRef;

/// Receives every committed write set of one tenant.
pub trait Journal: Send + Sync {
    /// Records the write set of the commit `version`.
    ///
    /// Called while the commit holds the write locks of every object in `writes` and before
    /// any of them is visible, so commits of one object reach the journal in version order
    /// and a reader that sees a write sees it after the journal has it. `writes` names each
    /// object once (the transaction's last write to it). An error refuses the commit:
    /// nothing is installed and the caller is told why.
    fn record(&self, version: u64, writes: &[WriteRef<'_>]) -> Result<(), JournalRefusal>;
}

/// Why a journal refused a commit (the log is full, failed, or the write set too large).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{0}")]
pub struct JournalRefusal(pub String);

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use parking_lot::Mutex;

    use super::*;
    use crate::{ObjectRef, StoreError, TenantStore};

    /// A write as the recorder keeps it: table, key, value (none: a delete).
    type OwnedWrite = (String, Vec<u8>, Option<Vec<u8>>);

    /// Keeps what it is given, or refuses everything.
    #[derive(Default)]
    struct Recorder {
        refuse: bool,
        commits: Mutex<Vec<(u64, Vec<OwnedWrite>)>>,
    }

    impl Journal for Recorder {
        fn record(&self, version: u64, writes: &[WriteRef<'_>]) -> Result<(), JournalRefusal> {
            if self.refuse {
                return Err(JournalRefusal("disk full".into()));
            }
            let writes = writes
                .iter()
                .map(|w| {
                    (
                        w.table.to_string(),
                        w.key.to_vec(),
                        match w.write {
                            crate::Write::Put(value) => Some(value.to_vec()),
                            _ => None,
                        },
                    )
                })
                .collect();
            self.commits.lock().push((version, writes));
            Ok(())
        }
    }

    fn put<'a>(table: &'a str, key: &'a [u8], value: &'a [u8]) -> WriteRef<'a> {
        WriteRef::put_or_delete(table, key, Some(value))
    }

    #[test]
    fn a_commit_journals_its_last_write_to_each_object_with_its_version() {
        let store = TenantStore::new(1 << 20);
        let journal = Arc::new(Recorder::default());
        store.attach_journal(journal.clone()).ok().unwrap();
        let version = store
            .commit(&[], &[put("t", b"a", b"1"), put("t", b"b", b"2"), put("t", b"a", b"3")])
            .unwrap();
        let commits = journal.commits.lock();
        assert_eq!(commits.len(), 1);
        assert_eq!(commits[0].0, version);
        let mut writes = commits[0].1.clone();
        writes.sort();
        assert_eq!(
            writes,
            vec![
                ("t".to_string(), b"a".to_vec(), Some(b"3".to_vec())),
                ("t".to_string(), b"b".to_vec(), Some(b"2".to_vec())),
            ]
        );
        drop(commits);
        // A read-only commit and a refused one journal nothing.
        let stale = ObjectRef {
            table: "t",
            key: b"a",
            version: version + 1,
        };
        assert!(store.commit(&[stale], &[put("t", b"c", b"x")]).is_err());
        store.commit(&[], &[]).unwrap();
        assert_eq!(journal.commits.lock().len(), 1);
    }

    #[test]
    fn a_refused_record_installs_nothing_and_charges_nothing() {
        let store = TenantStore::new(1 << 20);
        store.put("t", b"kept", b"v").unwrap();
        let before = store.stats();
        store
            .attach_journal(Arc::new(Recorder {
                refuse: true,
                ..Default::default()
            }))
            .ok()
            .unwrap();
        let err = store.put("t", b"new", b"value").unwrap_err();
        assert!(
            matches!(err, StoreError::Journal(ref why) if why == "disk full"),
            "{err:?}"
        );
        assert_eq!(store.get("t", b"new").unwrap(), None);
        let after = store.stats();
        assert_eq!(
            (after.used_bytes, after.objects, after.commits),
            (before.used_bytes, before.objects, before.commits)
        );
        // Reads are still served.
        assert_eq!(store.get("t", b"kept").unwrap().unwrap().1.as_ref(), b"v");
    }

    #[test]
    fn recovered_commits_come_back_at_their_versions_and_the_clock_resumes_above_them() {
        let store = TenantStore::new(1 << 20);
        store
            .recover_commit(7, &[put("t", b"a", b"1"), put("u", b"b", b"2")])
            .unwrap();
        store.recover_commit(9, &[WriteRef::delete("u", b"b")]).unwrap();
        assert_eq!(
            store.get("t", b"a").unwrap(),
            Some((7, bytes::Bytes::from_static(b"1")))
        );
        assert_eq!(store.get("u", b"b").unwrap(), None);
        assert_eq!(store.table_names(), vec!["t".to_string(), "u".to_string()]);
        assert_eq!(store.stats().objects, 1);
        assert!(store.put("t", b"c", b"3").unwrap() > 9);
        // A record a check would refuse is an error, not a silent install.
        assert!(store.recover_commit(10, &[put("bad name", b"k", b"v")]).is_err());
    }
}
