//! The Raft log and state machine against openraft's own storage conformance suite, and
//! what survives closing and reopening them.

use std::path::PathBuf;

use ferry_confignode::log_store::{FileLogStore, LOG_FILE};
use ferry_confignode::state_machine::ConfigStateMachine;
use ferry_confignode::types::{ConfigRaft, Entry, LogId, StorageError, Vote};
use openraft::storage::{RaftLogReader, RaftLogStorage, RaftLogStorageExt};
use openraft::testing::{StoreBuilder, Suite};
use openraft::{CommittedLeaderId, EntryPayload};

/// A fresh directory per call, removed when the guard drops.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch(name: &str) -> Scratch {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "ferry-confignode-{name}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

struct Builder;

impl StoreBuilder<ConfigRaft, FileLogStore, ConfigStateMachine, Scratch> for Builder {
    async fn build(&self) -> Result<(Scratch, FileLogStore, ConfigStateMachine), StorageError> {
        let dir = scratch("suite");
        let log = FileLogStore::open(&dir.0).unwrap();
        let machine = ConfigStateMachine::open(&dir.0).unwrap();
        Ok((dir, log, machine))
    }
}

#[test]
fn the_storage_passes_openrafts_conformance_suite() {
    Suite::test_all(Builder).unwrap();
}

fn blank(term: u64, index: u64) -> Entry {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
        payload: EntryPayload::Blank,
    }
}

#[tokio::test]
async fn votes_entries_truncations_and_purges_survive_a_reopen_and_a_torn_tail_is_cut() {
    let dir = scratch("reopen");
    {
        let mut log = FileLogStore::open(&dir.0).unwrap();
        log.save_vote(&Vote::new(3, 2)).await.unwrap();
        log.blocking_append((1..=10).map(|i| blank(1, i))).await.unwrap();
        log.truncate(LogId::new(CommittedLeaderId::new(1, 1), 8)).await.unwrap();
        log.purge(LogId::new(CommittedLeaderId::new(1, 1), 3)).await.unwrap();
        log.save_committed(Some(LogId::new(CommittedLeaderId::new(1, 1), 6)))
            .await
            .unwrap();
    }
    // A crash in the middle of the next append leaves half a frame.
    let path = dir.0.join(LOG_FILE);
    let mut bytes = std::fs::read(&path).unwrap();
    let whole = bytes.len();
    bytes.extend_from_slice(&[40, 0, 0, 0, 1, 2, 3]);
    std::fs::write(&path, &bytes).unwrap();

    let mut log = FileLogStore::open(&dir.0).unwrap();
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        whole as u64,
        "the torn frame is cut"
    );
    assert_eq!(log.read_vote().await.unwrap(), Some(Vote::new(3, 2)));
    assert_eq!(log.read_committed().await.unwrap().map(|id| id.index), Some(6));
    let state = log.get_log_state().await.unwrap();
    assert_eq!(state.last_purged_log_id.map(|id| id.index), Some(3));
    assert_eq!(state.last_log_id.map(|id| id.index), Some(7));
    let indexes: Vec<u64> = log
        .try_get_log_entries(0..100)
        .await
        .unwrap()
        .iter()
        .map(|e| e.log_id.index)
        .collect();
    assert_eq!(indexes, vec![4, 5, 6, 7]);
}
