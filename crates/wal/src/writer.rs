//! Writing the log: a flush takes everything appended since the last one, writes it with
//! one system call per segment (switching files where appenders opened new ones), syncs
//! as the fsync mode asks, and releases the reply gate.
//!
//! In `everysec` and `no`, whoever needs a flush runs it: a connection about to send
//! replies that wait at the gate writes the log on its own thread, as Redis writes its AOF
//! before it answers, instead of waking a writer thread and waiting for it (two context
//! switches per batch cost up to half the throughput on one core). In `always` the
//! background thread flushes when a reply asks, because an fdatasync on the replying
//! thread would stop it from reading the requests that should join the group. Appends
//! made while one flush writes or syncs are taken by the next: that is the group commit.
//! The background thread also flushes what no reply waits for and, in `everysec`, syncs
//! once a second, outside the writer's lock, so replies go on being written meanwhile.

use std::fs::File;
use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use crate::error::WalError;
use crate::log::{FsyncMode, Shared, EVERYSEC_INTERVAL};

/// The file being written and how far it is written and synced; one flush at a time.
pub(crate) struct WriterState {
    /// Shared so the once-a-second sync of `everysec` runs outside the lock.
    file: Arc<File>,
    written_lsn: u64,
    synced_lsn: u64,
    /// The buffer swapped with the appenders' (kept to reuse its allocation).
    batch: Vec<u8>,
}

impl WriterState {
    pub(crate) fn new(file: File, start_lsn: u64) -> WriterState {
        WriterState {
            file: Arc::new(file),
            written_lsn: start_lsn,
            synced_lsn: start_lsn,
            batch: Vec::new(),
        }
    }
}

/// When a flush syncs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sync {
    /// As the mode asks: `always` every flush, otherwise never (`everysec` syncs in the
    /// background, outside the lock: [`run`]).
    AsTheModeAsks,
    /// Now, whatever the mode (closing, or the background thread's second in `everysec`).
    Now,
}

/// Flushes if no other flush runs; false if one does (its release will wake the caller).
pub(crate) fn try_flush(shared: &Shared) -> bool {
    let Some(mut state) = shared.writer.try_lock() else {
        return false;
    };
    flush_or_fail(shared, &mut state, Sync::AsTheModeAsks);
    true
}

/// Flushes; on an I/O error the log is failed for good: appends are refused and replies
/// waiting at the gate are withheld (their connections close), since what they reveal may
/// never reach the disk.
pub(crate) fn flush_or_fail(shared: &Shared, state: &mut WriterState, sync: Sync) {
    if let Err(err) = flush(shared, state, sync) {
        fail(shared, err);
    }
}

fn fail(shared: &Shared, err: WalError) {
    tracing::error!(error = %err, "the write-ahead log failed; writes are refused until the node restarts");
    shared.pending.lock().failed = Some(err.to_string());
    shared.gate.fail();
}

fn flush(shared: &Shared, state: &mut WriterState, sync: Sync) -> Result<(), WalError> {
    let (segments, end_lsn) = {
        let mut pending = shared.pending.lock();
        if pending.failed.is_some() {
            return Ok(());
        }
        std::mem::swap(&mut pending.bytes, &mut state.batch);
        (std::mem::take(&mut pending.new_segments), pending.appended_lsn)
    };
    debug_assert_eq!(state.batch.len() as u64, end_lsn - state.written_lsn);
    let batch_start = state.written_lsn;
    let mut offset = 0usize;
    for (segment_start, next) in segments {
        let upto = (segment_start - batch_start) as usize;
        write(shared, &state.file, &state.batch[offset..upto])?;
        // The old segment is whole on disk before the new one holds anything, so what
        // survives a crash is a prefix of the log.
        sync_file(shared, &state.file)?;
        shared.dir.sync()?;
        state.file = Arc::new(next);
        offset = upto;
    }
    write(shared, &state.file, &state.batch[offset..])?;
    state.written_lsn = end_lsn;
    state.batch.clear();
    let mode = shared.config.fsync;
    let sync_due = sync == Sync::Now || mode == FsyncMode::Always;
    if sync_due && state.synced_lsn < state.written_lsn {
        sync_file(shared, &state.file)?;
        state.synced_lsn = state.written_lsn;
    }
    shared.gate.release(if mode == FsyncMode::Always {
        state.synced_lsn
    } else {
        state.written_lsn
    });
    Ok(())
}

/// The background flusher: when a reply asks (`always`), once a second, and when the log
/// closes, it flushes; syncing as the mode asks, every second in `everysec`, and in every
/// mode when closing.
pub(crate) fn run(shared: Arc<Shared>) {
    // Requests to flush (replies in `always`, a full buffer) do not move the second's
    // sync of `everysec` later: it is due at fixed times.
    let mut due = Instant::now() + EVERYSEC_INTERVAL;
    loop {
        let stopping = {
            let mut pending = shared.pending.lock();
            while !pending.flush_requested && !pending.stopping {
                if shared.wake.wait_until(&mut pending, due).timed_out() {
                    break;
                }
            }
            pending.flush_requested = false;
            pending.stopping
        };
        if stopping {
            flush_or_fail(&shared, &mut shared.writer.lock(), Sync::Now);
            return;
        }
        flush_or_fail(&shared, &mut shared.writer.lock(), Sync::AsTheModeAsks);
        if Instant::now() < due {
            continue;
        }
        due = Instant::now() + EVERYSEC_INTERVAL;
        if shared.config.fsync == FsyncMode::EverySec {
            sync_in_background(&shared);
        }
    }
}

/// `everysec`'s sync: what is written so far, synced outside the writer's lock, so
/// replies flushing meanwhile do not wait for the disk (holding the lock through the sync
/// held every reply of a pipelined load for it, 0.57× of the in-memory SET rate).
fn sync_in_background(shared: &Shared) {
    let (file, written_lsn) = {
        let state = shared.writer.lock();
        if state.synced_lsn >= state.written_lsn {
            return;
        }
        (Arc::clone(&state.file), state.written_lsn)
    };
    // A segment switch since then synced the old file whole, and the new one only holds
    // later records: syncing this file covers everything up to `written_lsn`.
    if let Err(err) = sync_file(shared, &file) {
        fail(shared, err);
        return;
    }
    let mut state = shared.writer.lock();
    state.synced_lsn = state.synced_lsn.max(written_lsn);
}

fn write(shared: &Shared, file: &File, bytes: &[u8]) -> Result<(), WalError> {
    if bytes.is_empty() {
        return Ok(());
    }
    let mut file = file;
    file.write_all(bytes)
        .map_err(|err| WalError::io(shared.dir.path(), "cannot write the log in", err))
}

fn sync_file(shared: &Shared, file: &File) -> Result<(), WalError> {
    file.sync_data()
        .map_err(|err| WalError::io(shared.dir.path(), "cannot sync the log in", err))
}
