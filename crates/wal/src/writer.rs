//! The log's one writer thread: takes everything appended since its last turn, writes it
//! (switching segment files where appenders opened new ones), syncs as the fsync mode
//! asks, and releases the reply gate. While it syncs, appends gather for its next turn:
//! that is the group commit.

use std::fs::File;
use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use crate::error::WalError;
use crate::log::{FsyncMode, Shared, EVERYSEC_INTERVAL};

/// Runs the writer until the log closes or an I/O error stops it. On an error the log is
/// failed for good: appends are refused and replies waiting at the gate are withheld
/// (their connections close), since what they reveal may never reach the disk.
pub(crate) fn run(shared: Arc<Shared>, file: File, start_lsn: u64) {
    if let Err(err) = write_loop(&shared, file, start_lsn) {
        tracing::error!(error = %err, "the write-ahead log failed; writes are refused until the node restarts");
        shared.pending.lock().failed = Some(err.to_string());
        shared.gate.fail();
    }
}

fn write_loop(shared: &Shared, mut file: File, mut written_lsn: u64) -> Result<(), WalError> {
    let mode = shared.config.fsync;
    let mut synced_lsn = written_lsn;
    let mut last_sync = Instant::now();
    let mut batch = Vec::new();
    loop {
        let (segments, end_lsn, stopping) = {
            let mut pending = shared.pending.lock();
            while pending.bytes.is_empty() && !pending.stopping {
                if mode == FsyncMode::EverySec && synced_lsn < written_lsn {
                    let due = last_sync + EVERYSEC_INTERVAL;
                    if Instant::now() >= due {
                        break;
                    }
                    shared.wake.wait_until(&mut pending, due);
                } else {
                    shared.wake.wait(&mut pending);
                }
            }
            std::mem::swap(&mut pending.bytes, &mut batch);
            (
                std::mem::take(&mut pending.new_segments),
                pending.appended_lsn,
                pending.stopping,
            )
        };
        debug_assert_eq!(batch.len() as u64, end_lsn - written_lsn);
        let batch_start = written_lsn;
        let mut offset = 0usize;
        for (segment_start, next) in segments {
            let upto = (segment_start - batch_start) as usize;
            write(shared, &mut file, &batch[offset..upto])?;
            // The old segment is whole on disk before the new one holds anything, so what
            // survives a crash is a prefix of the log.
            sync(shared, &file)?;
            shared.dir.sync()?;
            file = next;
            offset = upto;
        }
        write(shared, &mut file, &batch[offset..])?;
        written_lsn = end_lsn;
        batch.clear();
        let sync_due = match mode {
            FsyncMode::Always => true,
            FsyncMode::EverySec => last_sync.elapsed() >= EVERYSEC_INTERVAL,
            FsyncMode::No => false,
        };
        if (sync_due || stopping) && synced_lsn < written_lsn {
            sync(shared, &file)?;
            synced_lsn = written_lsn;
            last_sync = Instant::now();
        }
        shared.gate.release(if mode == FsyncMode::Always {
            synced_lsn
        } else {
            written_lsn
        });
        if stopping {
            return Ok(());
        }
    }
}

fn write(shared: &Shared, file: &mut File, bytes: &[u8]) -> Result<(), WalError> {
    if bytes.is_empty() {
        return Ok(());
    }
    file.write_all(bytes)
        .map_err(|err| WalError::io(shared.dir.path(), "cannot write the log in", err))
}

fn sync(shared: &Shared, file: &File) -> Result<(), WalError> {
    file.sync_data()
        .map_err(|err| WalError::io(shared.dir.path(), "cannot sync the log in", err))
}
