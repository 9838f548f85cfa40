//! The Raft log on disk. Every change (entries appended, a vote, the commit point, a
//! truncation or purge) is one checksummed frame appended to one file and synced before
//! openraft is told it happened, so a vote or an entry acknowledged to a peer survives a
//! crash. On open the file is replayed into memory; a torn last frame (a crash mid-append,
//! never acknowledged) is cut off. The file is rewritten compactly when it has grown well
//! past what it holds: the config log is small and rare, so simplicity beats throughput.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ferry_wal::record::{frame, next_frame};
use openraft::storage::{LogFlushed, LogState, RaftLogReader, RaftLogStorage};
use openraft::{RaftLogId, StorageIOError};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::types::{ConfigRaft, Entry, LogId, StorageError, Vote};

/// The log file's name in a member's data dir.
pub const LOG_FILE: &str = "raft.log";

/// Rewrite the file once it has grown to this many times its size after the last rewrite
/// (and at least [`COMPACT_MIN_BYTES`]): purged entries and superseded votes are dead weight.
const COMPACT_RATIO: u64 = 4;

/// Below this size the file is never rewritten.
const COMPACT_MIN_BYTES: u64 = 1024 * 1024;

/// One change to the log's state, as written to the file.
#[derive(Serialize, Deserialize)]
enum Change {
    Vote(Vote),
    Committed(Option<LogId>),
    Append(Vec<Entry>),
    /// Remove the entries from this index on.
    TruncateFrom(u64),
    /// Remove the entries up to and including this one.
    Purge(LogId),
}

#[derive(Default)]
struct State {
    vote: Option<Vote>,
    committed: Option<LogId>,
    last_purged: Option<LogId>,
    entries: BTreeMap<u64, Entry>,
}

impl State {
    fn apply(&mut self, change: Change) {
        match change {
            Change::Vote(vote) => self.vote = Some(vote),
            Change::Committed(committed) => self.committed = committed,
            Change::Append(entries) => {
                for entry in entries {
                    self.entries.insert(entry.get_log_id().index, entry);
                }
            }
            Change::TruncateFrom(index) => {
                self.entries.split_off(&index);
            }
            Change::Purge(log_id) => {
                self.entries = self.entries.split_off(&(log_id.index + 1));
                self.last_purged = Some(log_id);
            }
        }
    }

    /// The changes that rebuild this state, for a compacted file.
    fn as_changes(&self) -> Vec<Change> {
        let mut changes = Vec::new();
        if let Some(vote) = self.vote {
            changes.push(Change::Vote(vote));
        }
        if let Some(purged) = self.last_purged {
            changes.push(Change::Purge(purged));
        }
        changes.push(Change::Committed(self.committed));
        if !self.entries.is_empty() {
            changes.push(Change::Append(self.entries.values().cloned().collect()));
        }
        changes
    }
}

struct Inner {
    path: PathBuf,
    file: File,
    file_bytes: u64,
    /// Rewrite the file when it reaches this size.
    compact_at: u64,
    state: State,
}

/// The log store openraft drives; clones share one log.
#[derive(Clone)]
pub struct FileLogStore {
    inner: Arc<Mutex<Inner>>,
}

fn io_error(path: &Path, what: &str, err: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(format!("{}: {what}: {err}", path.display()))
}

fn encode(change: &Change) -> Vec<u8> {
    let mut out = Vec::new();
    frame(&mut out, |payload| {
        // Serialising plain values into a Vec does not fail.
        serde_json::to_writer(payload, change).expect("JSON of a log change")
    });
    out
}

impl FileLogStore {
    /// Opens (or creates) the log in `dir`.
    pub fn open(dir: &Path) -> std::io::Result<FileLogStore> {
        let path = dir.join(LOG_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .map_err(|err| io_error(&path, "cannot open", err))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|err| io_error(&path, "cannot read", err))?;
        let mut state = State::default();
        let mut offset = 0;
        while offset < bytes.len() {
            let Ok((payload, len)) = next_frame(&bytes[offset..]) else {
                break;
            };
            let change: Change = serde_json::from_slice(payload)
                .map_err(|err| io_error(&path, &format!("frame at offset {offset} does not parse"), err))?;
            state.apply(change);
            offset += len;
        }
        if offset < bytes.len() {
            // A torn last frame: written by a crash mid-append and never acknowledged.
            tracing::warn!(path = %path.display(), offset, "cutting a torn frame off the Raft log");
            file.set_len(offset as u64)
                .and_then(|()| file.sync_all())
                .map_err(|err| io_error(&path, "cannot cut a torn frame", err))?;
        }
        let inner = Inner {
            path,
            file,
            file_bytes: offset as u64,
            compact_at: (offset as u64).saturating_mul(COMPACT_RATIO).max(COMPACT_MIN_BYTES),
            state,
        };
        Ok(FileLogStore {
            inner: Arc::new(Mutex::new(inner)),
        })
    }

    fn write(&self, change: Change) -> Result<(), std::io::Error> {
        let mut inner = self.inner.lock();
        let bytes = encode(&change);
        let path = inner.path.clone();
        inner
            .file
            .write_all(&bytes)
            .and_then(|()| inner.file.sync_data())
            .map_err(|err| io_error(&path, "cannot append", err))?;
        inner.file_bytes += bytes.len() as u64;
        inner.state.apply(change);
        if inner.file_bytes >= inner.compact_at {
            compact(&mut inner)?;
        }
        Ok(())
    }
}

/// Rewrites the file with only what the state holds: a temporary file, synced, renamed
/// over the log, and the directory synced.
fn compact(inner: &mut Inner) -> std::io::Result<()> {
    let temp = inner.path.with_extension("tmp");
    let mut bytes = Vec::new();
    for change in inner.state.as_changes() {
        bytes.extend_from_slice(&encode(&change));
    }
    let mut file = File::create(&temp).map_err(|err| io_error(&temp, "cannot create", err))?;
    file.write_all(&bytes)
        .and_then(|()| file.sync_all())
        .map_err(|err| io_error(&temp, "cannot write", err))?;
    std::fs::rename(&temp, &inner.path).map_err(|err| io_error(&inner.path, "cannot replace", err))?;
    if let Some(dir) = inner.path.parent() {
        File::open(dir)
            .and_then(|dir| dir.sync_all())
            .map_err(|err| io_error(dir, "cannot sync", err))?;
    }
    inner.file = OpenOptions::new()
        .append(true)
        .open(&inner.path)
        .map_err(|err| io_error(&inner.path, "cannot reopen", err))?;
    inner.file_bytes = bytes.len() as u64;
    inner.compact_at = inner.file_bytes.saturating_mul(COMPACT_RATIO).max(COMPACT_MIN_BYTES);
    Ok(())
}

impl RaftLogReader<ConfigRaft> for FileLogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let inner = self.inner.lock();
        Ok(inner
            .state
            .entries
            .range(range)
            .map(|(_, entry)| entry.clone())
            .collect())
    }
}

impl RaftLogStorage<ConfigRaft> for FileLogStore {
    type LogReader = FileLogStore;

    async fn get_log_state(&mut self) -> Result<LogState<ConfigRaft>, StorageError> {
        let inner = self.inner.lock();
        let last_purged_log_id = inner.state.last_purged;
        let last_log_id = inner
            .state
            .entries
            .values()
            .next_back()
            .map(|entry| *entry.get_log_id())
            .or(last_purged_log_id);
        Ok(LogState {
            last_purged_log_id,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        self.write(Change::Vote(*vote))
            .map_err(|err| StorageIOError::write_vote(&err).into())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(self.inner.lock().state.vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        self.write(Change::Committed(committed))
            .map_err(|err| StorageIOError::write_logs(&err).into())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self.inner.lock().state.committed)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<ConfigRaft>) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        match self.write(Change::Append(entries)) {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(err) => {
                let message = err.to_string();
                callback.log_io_completed(Err(err));
                Err(StorageIOError::write_logs(&std::io::Error::other(message)).into())
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.write(Change::TruncateFrom(log_id.index))
            .map_err(|err| StorageIOError::write_logs(&err).into())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.write(Change::Purge(log_id))
            .map_err(|err| StorageIOError::write_logs(&err).into())
    }
}
