//! The write-ahead log. Committing workers append records to one buffer, in log order,
//! while they hold the locks of what they write; a flush ([`crate::writer`]), run by the
//! first reply that needs it or by a background thread, writes all of it with one system
//! call and, as the fsync mode asks, one fdatasync: group commit for every worker and
//! tenant at once.
//!
//! Space is reserved (fallocate) before a record is appended, a segment at a time, so a
//! full disk refuses the commit that would not fit instead of failing a write whose
//! commit is already visible. `max_log_bytes` caps the log the same way.

use ferry_proto::TenantId;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::str::FromStr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use thiserror::Error;

use ferry_store::{Journal, JournalRefusal, WriteRef};

use crate::dir::DataDir;
use crate::error::WalError;
use crate::gate::ReplyGate;
use crate::record::{self, MAX_RECORD_BYTES};
use crate::recover::Recovered;

/// Bytes reserved for a segment when it is opened; a segment is closed once a record no
/// longer fits, so segments are about this size (one larger record gets its own).
pub const DEFAULT_SEGMENT_BYTES: u64 = 64 * 1024 * 1024;

/// Appended bytes no flush has taken after which the writer thread is woken to flush them
/// (replies flush the log themselves; this bounds the buffer when none asks).
pub const FLUSH_AHEAD_BYTES: usize = 16 * 1024 * 1024;

/// How often `everysec` syncs the log, at most.
pub const EVERYSEC_INTERVAL: Duration = Duration::from_secs(1);

/// When the log is made durable, and so what an acknowledged write survives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FsyncMode {
    /// fdatasync before any reply that reveals a write: it survives power loss.
    Always,
    /// Written before the reply, fdatasync once a second: survives kill -9; power loss
    /// loses at most about the last second.
    #[default]
    EverySec,
    /// Written before the reply, synced when the OS chooses: survives kill -9 only.
    No,
}

impl FsyncMode {
    /// Every mode, in the order `--help` lists them.
    pub const ALL: [FsyncMode; 3] = [FsyncMode::Always, FsyncMode::EverySec, FsyncMode::No];

    /// The name used by `--fsync` and the config file.
    pub fn name(self) -> &'static str {
        match self {
            FsyncMode::Always => "always",
            FsyncMode::EverySec => "everysec",
            FsyncMode::No => "no",
        }
    }
}

impl FromStr for FsyncMode {
    type Err = String;

    fn from_str(name: &str) -> Result<FsyncMode, String> {
        FsyncMode::ALL
            .into_iter()
            .find(|mode| mode.name() == name)
            .ok_or_else(|| format!("unknown fsync mode {name:?}: use always, everysec or no"))
    }
}

/// How the log is kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WalConfig {
    /// When records are synced.
    pub fsync: FsyncMode,
    /// Bytes reserved per segment.
    pub segment_bytes: u64,
    /// Most bytes of log kept on disk; a commit that would go past it is refused.
    pub max_log_bytes: Option<u64>,
}

impl Default for WalConfig {
    fn default() -> WalConfig {
        WalConfig {
            fsync: FsyncMode::default(),
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            max_log_bytes: None,
        }
    }
}

/// Why a record was not appended (the commit is refused; nothing was installed).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum AppendError {
    /// The commit's record would exceed [`MAX_RECORD_BYTES`].
    #[error("a commit of {0} bytes exceeds the log's {MAX_RECORD_BYTES}-byte record limit")]
    TooLarge(usize),
    /// The log reached `max_log_bytes`.
    #[error("the log is full ({0} bytes, max_log_bytes); reads are still served")]
    Full(u64),
    /// No disk space could be reserved for the record.
    #[error("no disk space for the log ({0}); reads are still served")]
    DiskFull(String),
    /// The writer failed; nothing more can be made durable.
    #[error("the log failed ({0}); restart the node")]
    Failed(String),
    /// This node is a replica: its log takes records only from its primary.
    #[error("READONLY this node is a replica ({0}): write to its primary")]
    ReadOnly(String),
    /// A key of the commit is one this node may not write now (its slot is being handed
    /// to another node); the text carries its own error code.
    #[error("{0}")]
    KeyRefused(String),
    /// Copied records do not start where this log ends.
    #[error("records copied from offset {given} do not continue this log, which ends at {end}")]
    NotAtEnd {
        /// Where the records start.
        given: u64,
        /// Where this log ends.
        end: u64,
    },
    /// Copied bytes that are not whole, valid records.
    #[error("copied log bytes at offset {lsn} are not a valid record: {why}")]
    BadRecord {
        /// The offset of the first bad record.
        lsn: u64,
        /// What is wrong.
        why: record::BadRecord,
    },
}

/// What appenders share with the writer, under one lock.
pub(crate) struct Pending {
    /// Records appended, not yet taken by the writer.
    pub(crate) bytes: Vec<u8>,
    /// End of the last record appended.
    pub(crate) appended_lsn: u64,
    /// Start of the oldest segment on disk (for `max_log_bytes`).
    pub(crate) oldest_lsn: u64,
    /// Start of the newest segment, and the bytes reserved in it.
    segment_start: u64,
    segment_reserved: u64,
    /// A handle on the newest segment, for reserving more space in it.
    segment: File,
    /// Segments opened by appenders that the writer has not reached, by start.
    pub(crate) new_segments: Vec<(u64, File)>,
    /// Why the writer stopped, once it has failed.
    pub(crate) failed: Option<String>,
    /// Set by [`Wal::close`]: write what is left, sync, stop.
    pub(crate) stopping: bool,
    /// A reply waits for the background thread to flush (`always`).
    pub(crate) flush_requested: bool,
    /// Set on a replica: commits of its own are refused, copied records are taken.
    pub(crate) read_only: Option<String>,
}

pub(crate) struct Shared {
    pub(crate) dir: DataDir,
    pub(crate) config: WalConfig,
    pub(crate) pending: Mutex<Pending>,
    /// The file and how far it is written: held by the one flush running.
    pub(crate) writer: Mutex<crate::writer::WriterState>,
    /// Wakes the background flusher (to close).
    pub(crate) wake: Condvar,
    pub(crate) gate: Arc<ReplyGate>,
    /// Set once by the node: which keys commits may not write now.
    pub(crate) key_filter: std::sync::OnceLock<KeyFilter>,
}

/// Says why a key may not be written now, or `None` if it may. Called under the log's
/// append lock, so a change to what it refuses followed by [`Wal::appended_lsn`] is a
/// barrier: no record appended after that offset writes a key refused before it.
pub type KeyFilter = Arc<dyn Fn(&[u8]) -> Option<String> + Send + Sync>;

impl crate::gate::Flush for Shared {
    fn try_flush(&self) -> bool {
        if self.config.fsync == FsyncMode::Always {
            // The background thread syncs, so the thread replying goes on reading requests
            // whose commits join the next group; syncing on it made every group one commit.
            self.pending.lock().flush_requested = true;
            self.wake.notify_one();
            return false;
        }
        crate::writer::try_flush(self)
    }
}

/// An open log: appends, its reply gate, and its writer thread.
pub struct Wal {
    pub(crate) shared: Arc<Shared>,
    /// Held by the one checkpoint running.
    pub(crate) checkpointing: Mutex<()>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

impl Wal {
    /// Opens the log of `dir` for appending after `recovered` (what [`crate::replay`]
    /// found): a new segment starts where the log ends, and the writer thread starts.
    pub fn open(dir: DataDir, config: WalConfig, recovered: &Recovered) -> Result<Wal, WalError> {
        let start = recovered.end_lsn;
        let segments = dir.segments()?;
        if let Some((later, _)) = segments.iter().find(|(first, _)| *first > start) {
            // Replay cuts everything after the end of the log; one left is not ours to drop.
            return Err(WalError::Inconsistent {
                path: dir.path().to_path_buf(),
                why: format!("a segment starts at {later}, after the end of the log at {start}"),
            });
        }
        let oldest_lsn = segments.first().map_or(start, |(first, _)| *first);
        let path = dir.segment_path(start);
        // A segment named for the end of the log holds no record (replay ended at its
        // start): it is replaced.
        if path.exists() {
            std::fs::remove_file(&path).map_err(|err| WalError::io(&path, "cannot replace", err))?;
        }
        let file = create_segment(&dir, start, config.segment_bytes)
            .map_err(|err| WalError::io(&path, "cannot create", err))?;
        dir.sync()?;
        let segment = file
            .try_clone()
            .map_err(|err| WalError::io(&path, "cannot open", err))?;
        let gate = Arc::new(ReplyGate::new(start));
        let shared = Arc::new(Shared {
            dir,
            pending: Mutex::new(Pending {
                bytes: Vec::new(),
                appended_lsn: start,
                oldest_lsn,
                segment_start: start,
                segment_reserved: config.segment_bytes,
                segment,
                new_segments: Vec::new(),
                failed: None,
                stopping: false,
                flush_requested: false,
                read_only: None,
            }),
            config,
            writer: Mutex::new(crate::writer::WriterState::new(file, start)),
            wake: Condvar::new(),
            gate,
            key_filter: std::sync::OnceLock::new(),
        });
        let flusher: std::sync::Weak<dyn crate::gate::Flush> = Arc::downgrade(&shared) as _;
        shared.gate.flush_with(flusher);
        let writer = std::thread::Builder::new()
            .name("ferry-wal".into())
            .spawn({
                let shared = Arc::clone(&shared);
                move || crate::writer::run(shared)
            })
            .map_err(|err| WalError::io(std::path::Path::new("ferry-wal"), "cannot start the writer thread", err))?;
        Ok(Wal {
            shared,
            checkpointing: Mutex::new(()),
            writer: Mutex::new(Some(writer)),
        })
    }

    /// The gate replies pass before they leave the node.
    pub fn gate(&self) -> &Arc<ReplyGate> {
        &self.shared.gate
    }

    /// The data dir it writes in (for reading records back: [`crate::read_frames`]).
    pub fn data_dir(&self) -> &DataDir {
        &self.shared.dir
    }

    /// The fsync mode.
    pub fn fsync(&self) -> FsyncMode {
        self.shared.config.fsync
    }

    /// The log's configuration.
    pub fn config(&self) -> &WalConfig {
        &self.shared.config
    }

    /// Where the next record goes (the end of everything appended).
    pub fn appended_lsn(&self) -> u64 {
        self.shared.pending.lock().appended_lsn
    }

    /// Where the log this node keeps starts: the oldest segment it found at open or kept
    /// at its last checkpoint. A segment before it was removed by this node; one after it
    /// that is missing was taken from under it (a failing or deleted disk).
    pub fn oldest_lsn(&self) -> u64 {
        self.shared.pending.lock().oldest_lsn
    }

    /// Bytes of log on disk (from the oldest segment kept to the end).
    pub fn log_bytes(&self) -> u64 {
        let pending = self.shared.pending.lock();
        pending.appended_lsn - pending.oldest_lsn
    }

    /// Writes and syncs everything appended so far, whatever the mode; returns the log
    /// offset it is durable up to (at least).
    pub fn sync_now(&self) -> Result<u64, WalError> {
        let appended = self.appended_lsn();
        crate::writer::flush_or_fail(&self.shared, &mut self.shared.writer.lock(), crate::writer::Sync::Now);
        match &self.shared.pending.lock().failed {
            Some(why) => Err(WalError::Failed(why.clone())),
            None => Ok(appended),
        }
    }

    /// Makes this log a replica's (`Some(why)`: its own commits are refused with `why`,
    /// records copied from the primary are taken) or a primary's again (`None`).
    pub fn set_read_only(&self, why: Option<String>) {
        self.shared.pending.lock().read_only = why;
    }

    /// Installs the filter every commit's keys pass (once: a second call is ignored and
    /// returns false). Records copied from a primary are not filtered.
    pub fn set_key_filter(&self, filter: KeyFilter) -> bool {
        self.shared.key_filter.set(filter).is_ok()
    }

    /// Starts a new segment at the end of the log if the newest holds any record, so a
    /// checkpoint's marks fall after a segment boundary and everything before can go
    /// (with one segment larger than `max_log_bytes`, nothing could otherwise).
    pub(crate) fn rotate(&self) -> Result<(), AppendError> {
        let mut pending = self.shared.pending.lock();
        if pending.appended_lsn == pending.segment_start {
            return Ok(());
        }
        self.start_segment(&mut pending, self.shared.config.segment_bytes)
    }

    /// Appends the record of a commit. Called by the store while the commit holds its
    /// write locks, before the writes are visible.
    pub fn append(&self, tenant: TenantId, version: u64, writes: &[WriteRef<'_>]) -> Result<(), AppendError> {
        let frame = record::frame_len(writes);
        if frame > MAX_RECORD_BYTES {
            return Err(AppendError::TooLarge(frame));
        }
        let mut pending = self.shared.pending.lock();
        if let Some(why) = &pending.failed {
            return Err(AppendError::Failed(why.clone()));
        }
        if pending.stopping {
            return Err(AppendError::Failed("the node is shutting down".into()));
        }
        if let Some(why) = &pending.read_only {
            return Err(AppendError::ReadOnly(why.clone()));
        }
        if let Some(filter) = self.shared.key_filter.get() {
            if let Some(why) = writes.iter().find_map(|write| filter(write.key)) {
                return Err(AppendError::KeyRefused(why));
            }
        }
        if let Some(cap) = self.shared.config.max_log_bytes {
            if pending.appended_lsn - pending.oldest_lsn + frame as u64 > cap {
                return Err(AppendError::Full(cap));
            }
        }
        self.reserve(&mut pending, frame as u64)?;
        record::encode(&mut pending.bytes, tenant, version, writes);
        pending.appended_lsn += frame as u64;
        self.shared.gate.appended(pending.appended_lsn);
        // Each unflushed segment holds open files; both are bounded.
        if (pending.bytes.len() >= FLUSH_AHEAD_BYTES || !pending.new_segments.is_empty()) && !pending.flush_requested {
            pending.flush_requested = true;
            self.shared.wake.notify_one();
        }
        Ok(())
    }

    /// Appends records copied from another node's log (a primary's, on its replica) byte
    /// for byte, so each record sits at the same offset in both logs. `start_lsn` must be
    /// where this log ends, and `frames` whole, valid records (checked first). Records are
    /// appended in order; on an error the ones before it stay appended
    /// ([`Wal::appended_lsn`] says how far).
    pub fn append_frames(&self, start_lsn: u64, frames: &[u8]) -> Result<(), AppendError> {
        let mut lens = Vec::new();
        let mut at = 0;
        while at < frames.len() {
            let bad = |why| AppendError::BadRecord {
                lsn: start_lsn + at as u64,
                why,
            };
            let (payload, len) = record::next_frame(&frames[at..]).map_err(bad)?;
            record::decode(payload).map_err(bad)?;
            lens.push(len);
            at += len;
        }
        let mut pending = self.shared.pending.lock();
        if let Some(why) = &pending.failed {
            return Err(AppendError::Failed(why.clone()));
        }
        if pending.stopping {
            return Err(AppendError::Failed("the node is shutting down".into()));
        }
        if pending.appended_lsn != start_lsn {
            return Err(AppendError::NotAtEnd {
                given: start_lsn,
                end: pending.appended_lsn,
            });
        }
        if let Some(cap) = self.shared.config.max_log_bytes {
            if pending.appended_lsn - pending.oldest_lsn + frames.len() as u64 > cap {
                return Err(AppendError::Full(cap));
            }
        }
        let mut at = 0;
        for len in lens {
            self.reserve(&mut pending, len as u64)?;
            pending.bytes.extend_from_slice(&frames[at..at + len]);
            pending.appended_lsn += len as u64;
            self.shared.gate.appended(pending.appended_lsn);
            at += len;
        }
        // As for a commit: the caller waits at the gate (which flushes) before it reports
        // the records logged; a large backlog or a new segment wakes the writer sooner.
        if (pending.bytes.len() >= FLUSH_AHEAD_BYTES || !pending.new_segments.is_empty()) && !pending.flush_requested {
            pending.flush_requested = true;
            self.shared.wake.notify_one();
        }
        Ok(())
    }

    /// Makes room for a record of `frame` bytes: in the newest segment, or in a new one.
    fn reserve(&self, pending: &mut Pending, frame: u64) -> Result<(), AppendError> {
        let used = pending.appended_lsn - pending.segment_start;
        if used + frame <= pending.segment_reserved {
            return Ok(());
        }
        let disk_full = |err: std::io::Error| AppendError::DiskFull(err.to_string());
        if used == 0 {
            // A record larger than a segment, first in its segment: reserve what it needs.
            reserve(&pending.segment, 0, frame).map_err(disk_full)?;
            pending.segment_reserved = frame;
            return Ok(());
        }
        self.start_segment(pending, self.shared.config.segment_bytes.max(frame))
    }

    /// Opens a segment of `size` reserved bytes at the end of the log; the writer
    /// switches to it when its batch reaches there.
    fn start_segment(&self, pending: &mut Pending, size: u64) -> Result<(), AppendError> {
        let disk_full = |err: std::io::Error| AppendError::DiskFull(err.to_string());
        let start = pending.appended_lsn;
        let file = create_segment(&self.shared.dir, start, size).map_err(disk_full)?;
        pending.segment = match file.try_clone() {
            Ok(handle) => handle,
            Err(err) => {
                // Not left behind: the next append creates the segment again.
                let _ = std::fs::remove_file(self.shared.dir.segment_path(start));
                return Err(disk_full(err));
            }
        };
        pending.segment_start = start;
        pending.segment_reserved = size;
        pending.new_segments.push((start, file));
        Ok(())
    }

    /// The journal of one tenant's store: its commits go to this log.
    pub fn journal(self: &Arc<Wal>, tenant: TenantId) -> Arc<dyn Journal> {
        Arc::new(TenantLog {
            wal: Arc::clone(self),
            tenant,
        })
    }

    /// Writes and syncs what is appended, stops the writer and lets go of the data dir:
    /// after it, every commit acknowledged so far is on disk whatever the fsync mode.
    /// Later appends are refused.
    pub fn close(&self) {
        self.shared.pending.lock().stopping = true;
        self.shared.wake.notify_one();
        if let Some(writer) = self.writer.lock().take() {
            let _ = writer.join();
        }
        self.shared.dir.release();
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        self.close();
    }
}

/// One tenant's commits into the node's log.
struct TenantLog {
    wal: Arc<Wal>,
    tenant: TenantId,
}

impl Journal for TenantLog {
    fn record(&self, version: u64, writes: &[WriteRef<'_>]) -> Result<(), JournalRefusal> {
        self.wal
            .append(self.tenant, version, writes)
            .map_err(|err| JournalRefusal(err.to_string()))
    }
}

/// Creates the segment starting at `start` with `size` bytes reserved.
fn create_segment(dir: &DataDir, start: u64, size: u64) -> std::io::Result<File> {
    let path = dir.segment_path(start);
    let file = OpenOptions::new().write(true).create_new(true).open(&path)?;
    if let Err(err) = reserve(&file, 0, size) {
        let _ = std::fs::remove_file(&path);
        return Err(err);
    }
    Ok(file)
}

/// Reserves disk blocks for `offset..offset + len` of `file` without changing its length,
/// so later writes there cannot run out of space. A file system that cannot reserve is
/// used without: its writes may still find the disk full, as any write may.
fn reserve(file: &File, offset: u64, len: u64) -> std::io::Result<()> {
    // SAFETY: fallocate on an open descriptor we own, with plain integer arguments.
    let result = unsafe { libc::fallocate(file.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, offset as i64, len as i64) };
    if result == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => Ok(()),
        _ => Err(err),
    }
}
