//! A checkpoint: a snapshot of every tenant taken while the node serves, then the log
//! segments no snapshot needs any more removed.
//!
//! Per tenant: mark the log's end while no commit of the tenant is half installed
//! ([`TenantStore::mark`]), scan its objects a shard at a time into a snapshot file,
//! sync the log up to everything appended so far, then sync and name the snapshot.
//! Recovery loads the snapshot and replays the tenant's records from the mark on. The log
//! is synced before the snapshot is named because the scan may have seen commits logged
//! after the mark that no reply has revealed yet; with their records durable, a recovery
//! replays each of them whole, so a snapshot never holds half of a transaction whose
//! record the crash lost.
//!
//! When every tenant has its snapshot, a segment is removed once the next one starts at
//! or before the oldest mark: no recovery reads it again.

use ferry_proto::TenantId;
use std::time::{Duration, Instant};

use ferry_store::TenantStore;

use crate::error::WalError;
use crate::log::Wal;
use crate::snapshot::{SnapshotHead, SnapshotWriter};

/// The tenants a checkpoint snapshots: every tenant of the node.
pub trait Tenants: Send + Sync {
    /// Calls `each` with every tenant id and its store, stopping at the first error.
    fn each(&self, each: &mut dyn FnMut(TenantId, &TenantStore) -> Result<(), WalError>) -> Result<(), WalError>;
}

/// What a checkpoint did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckpointReport {
    /// Tenants snapshotted.
    pub tenants: usize,
    /// Objects written, over all snapshots.
    pub objects: u64,
    /// Bytes of snapshot written.
    pub snapshot_bytes: u64,
    /// The oldest mark: recovery replays the log from here on.
    pub log_from: u64,
    /// Segment files removed, and their bytes.
    pub segments_removed: usize,
    /// Bytes of log removed.
    pub log_bytes_removed: u64,
    /// How long it took.
    pub took: Duration,
}

impl Wal {
    /// Snapshots every tenant of `tenants` and removes the log they no longer need. One
    /// runs at a time (a second call waits). `keep_going` is asked between batches of
    /// objects; when it says no (the node is stopping), the snapshot under way is
    /// abandoned and [`WalError::Stopping`] returned.
    pub fn checkpoint(
        &self,
        tenants: &dyn Tenants,
        keep_going: &dyn Fn() -> bool,
    ) -> Result<CheckpointReport, WalError> {
        let _one_at_a_time = self.checkpointing.lock();
        let started = Instant::now();
        let dir = &self.shared.dir;
        let mut report = CheckpointReport {
            log_from: u64::MAX,
            ..CheckpointReport::default()
        };
        // Marks after a segment boundary let every older segment go. Without the new
        // segment (a full disk) the checkpoint still runs; it frees less.
        if let Err(err) = self.rotate() {
            tracing::warn!(error = %err, "cannot start a new log segment for the snapshot");
        }
        // The snapshots this checkpoint replaces: listed once, not once per tenant.
        let older = dir.snapshots()?;
        tenants.each(&mut |tenant, store| {
            let mark = store.mark(|| self.appended_lsn());
            let head = SnapshotHead {
                tenant,
                lsn: mark.at,
                clock: mark.clock,
            };
            let mut writer = SnapshotWriter::create(dir.snapshot_path(tenant, mark.at), head)?;
            store.scan(|table, batch| {
                if !keep_going() {
                    return Err(WalError::Stopping);
                }
                writer.add(table, batch)
            })?;
            let durable_to = self.sync_now()?;
            let (objects, bytes) = writer.finish(durable_to)?;
            dir.sync()?;
            for (other, lsn, path) in &older {
                if *other == tenant && *lsn < mark.at {
                    std::fs::remove_file(path).map_err(|err| WalError::io(path, "cannot remove", err))?;
                }
            }
            report.tenants += 1;
            report.objects += objects;
            report.snapshot_bytes += bytes;
            report.log_from = report.log_from.min(mark.at);
            Ok(())
        })?;
        if report.tenants == 0 {
            report.log_from = self.appended_lsn();
        }
        self.remove_segments_before(report.log_from, &mut report)?;
        report.took = started.elapsed();
        Ok(report)
    }

    /// Removes the segments, oldest first, that end at or before `lsn` (the next one
    /// starts there or earlier) and are written whole up to the next; the newest segment
    /// is never removed.
    fn remove_segments_before(&self, lsn: u64, report: &mut CheckpointReport) -> Result<(), WalError> {
        let dir = &self.shared.dir;
        let segments = dir.segments()?;
        let mut oldest_kept = None;
        for pair in segments.windows(2) {
            let ((start, path), (next_start, _)) = (&pair[0], &pair[1]);
            let bytes = std::fs::metadata(path).map_or(0, |meta| meta.len());
            // Only a segment written whole up to the next one: anything else is a gap
            // recovery must see, not a segment to drop.
            if *next_start > lsn || start + bytes != *next_start {
                oldest_kept.get_or_insert(*start);
                if *next_start <= lsn {
                    tracing::warn!(
                        segment = start,
                        bytes,
                        next_start,
                        "kept a log segment that does not reach the next"
                    );
                }
                // Removing a later one would open a gap after this one.
                break;
            }
            std::fs::remove_file(path).map_err(|err| WalError::io(path, "cannot remove", err))?;
            report.segments_removed += 1;
            report.log_bytes_removed += bytes;
        }
        if report.segments_removed > 0 {
            dir.sync()?;
        }
        let oldest = oldest_kept.or_else(|| segments.last().map(|(start, _)| *start));
        if let Some(oldest) = oldest {
            let mut pending = self.shared.pending.lock();
            pending.oldest_lsn = pending.oldest_lsn.max(oldest);
        }
        Ok(())
    }
}
