//! A replica that holds nothing yet, or that fell behind the log its primary keeps,
//! starts by copying the primary: its newest snapshot of each tenant, then its log from
//! the oldest segment kept, into this node's data dir, before the node recovers from it
//! as from its own. Recovery then gives exactly the state the primary's own recovery
//! would, and the follower goes on from the log's end.
//!
//! The copy is crash-safe by a marker: [`RESYNC_MARKER`] is written (and synced) before
//! anything is removed and removed only after the copy is complete and synced, so a crash
//! in between leaves the marker, and the next start copies again. A follower that finds
//! its primary's log no longer continues its own leaves the marker too, so the node
//! restarts into a copy.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use ferry_wal::DataDir;

use crate::link::{Link, ReplicationError, Upstream};
use crate::wire::{Message, SnapshotFile, MAX_MESSAGE_BYTES};

/// The file whose presence says "this data dir must be copied from the primary".
pub const RESYNC_MARKER: &str = "RESYNC";

/// Most attempts at a copy (a checkpoint on the primary can remove what is being copied;
/// each attempt starts over).
pub const MAX_COPY_ATTEMPTS: usize = 5;

/// What a copy brought.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BootstrapReport {
    /// Snapshot files copied.
    pub snapshots: usize,
    /// Their bytes.
    pub snapshot_bytes: u64,
    /// The log offset the copied log starts at.
    pub log_from: u64,
    /// Bytes of log copied.
    pub log_bytes: u64,
    /// Attempts it took.
    pub attempts: usize,
}

/// Whether `dir` must be copied from the primary before the node starts: it holds no
/// log and no snapshot (a new replica), or a copy is due or was interrupted (the marker).
pub fn needs_copy(dir: &DataDir) -> Result<bool, ReplicationError> {
    let local = |err: ferry_wal::WalError| ReplicationError::Local(err.to_string());
    Ok(dir.path().join(RESYNC_MARKER).exists()
        || (dir.segments().map_err(local)?.is_empty() && dir.snapshots().map_err(local)?.is_empty()))
}

/// Leaves the marker: the next start of the node copies the primary again.
pub fn request_copy(dir: &Path) -> std::io::Result<()> {
    let marker = File::create(dir.join(RESYNC_MARKER))?;
    marker.sync_all()?;
    File::open(dir)?.sync_all()
}

/// Replaces whatever `dir` holds with a copy of `upstream`'s snapshots and log.
pub async fn copy_from_primary(dir: &DataDir, upstream: &Upstream) -> Result<BootstrapReport, ReplicationError> {
    let io = |what: &str, err: std::io::Error| ReplicationError::Local(format!("{what}: {err}"));
    request_copy(dir.path()).map_err(|err| io("writing the resync marker", err))?;
    let mut last_error = None;
    for attempt in 1..=MAX_COPY_ATTEMPTS {
        wipe(dir)?;
        match copy_once(dir, upstream).await {
            Ok(mut report) => {
                report.attempts = attempt;
                std::fs::remove_file(dir.path().join(RESYNC_MARKER)).map_err(|err| io("removing the marker", err))?;
                dir.sync().map_err(|err| ReplicationError::Local(err.to_string()))?;
                return Ok(report);
            }
            Err(ReplicationError::Local(why)) => return Err(ReplicationError::Local(why)),
            Err(err) => {
                tracing::warn!(attempt, "copying the primary: {err}; starting over");
                last_error = Some(err);
                tokio::time::sleep(std::time::Duration::from_millis(100 * attempt as u64)).await;
            }
        }
    }
    Err(last_error.expect("at least one attempt failed"))
}

/// Removes the log segments, snapshots and unfinished copies of `dir`.
fn wipe(dir: &DataDir) -> Result<(), ReplicationError> {
    let local = |err: String| ReplicationError::Local(err);
    let segments = dir.segments().map_err(|err| local(err.to_string()))?;
    let snapshots = dir.snapshots().map_err(|err| local(err.to_string()))?;
    let paths = segments
        .into_iter()
        .map(|(_, path)| path)
        .chain(snapshots.into_iter().map(|(_, _, path)| path));
    for path in paths {
        std::fs::remove_file(&path).map_err(|err| local(format!("removing {}: {err}", path.display())))?;
    }
    let entries = std::fs::read_dir(dir.path()).map_err(|err| local(err.to_string()))?;
    for entry in entries.flatten() {
        if entry.file_name().to_str().is_some_and(|name| name.ends_with(".tmp")) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    dir.sync().map_err(|err| local(err.to_string()))
}

async fn copy_once(dir: &DataDir, upstream: &Upstream) -> Result<BootstrapReport, ReplicationError> {
    let mut link = upstream.connect().await?;
    let (log_from, files) = match ask(upstream, &mut link, Message::ListSnapshots).await? {
        Message::Snapshots { log_from, files } => (log_from, files),
        other => return Err(upstream.unexpected(&other, "the snapshot list")),
    };
    if let Some(oldest_mark) = files.iter().map(|file| file.lsn).min() {
        if log_from > oldest_mark {
            // A checkpoint trimmed the log between the two listings.
            return Err(ReplicationError::Refused {
                addr: upstream.addr.clone(),
                why: format!("its log starts at {log_from}, after a snapshot's mark ({oldest_mark})"),
            });
        }
    }
    let mut report = BootstrapReport {
        log_from,
        ..BootstrapReport::default()
    };
    for file in &files {
        report.snapshot_bytes += copy_snapshot(dir, upstream, &mut link, file).await?;
        report.snapshots += 1;
    }
    report.log_bytes = copy_log(dir, upstream, &mut link, log_from).await?;
    dir.sync().map_err(|err| ReplicationError::Local(err.to_string()))?;
    Ok(report)
}

async fn ask(upstream: &Upstream, link: &mut Link, request: Message) -> Result<Message, ReplicationError> {
    link.send(&request).await.map_err(|err| upstream.broken(err))?;
    link.receive(MAX_MESSAGE_BYTES)
        .await
        .map_err(|err| upstream.broken(err))
}

/// Copies one snapshot file as `….tmp`, synced, then renamed; returns its bytes.
async fn copy_snapshot(
    dir: &DataDir,
    upstream: &Upstream,
    link: &mut Link,
    file: &SnapshotFile,
) -> Result<u64, ReplicationError> {
    let path = dir.snapshot_path(file.tenant, file.lsn);
    let temp = path.with_extension("snap.tmp");
    let io = |err: std::io::Error| ReplicationError::Local(format!("{}: {err}", temp.display()));
    let mut out = File::create(&temp).map_err(io)?;
    let mut offset = 0u64;
    loop {
        let request = Message::ReadSnapshot {
            tenant: file.tenant,
            lsn: file.lsn,
            offset,
        };
        let bytes = match ask(upstream, link, request).await? {
            Message::Chunk { bytes } => bytes,
            other => return Err(upstream.unexpected(&other, "a snapshot chunk")),
        };
        if bytes.is_empty() {
            break;
        }
        out.write_all(&bytes).map_err(io)?;
        offset += bytes.len() as u64;
    }
    out.sync_all().map_err(io)?;
    drop(out);
    std::fs::rename(&temp, &path).map_err(io)?;
    Ok(offset)
}

/// Copies the log from `from` to the primary's end into one segment file; returns bytes.
async fn copy_log(dir: &DataDir, upstream: &Upstream, link: &mut Link, from: u64) -> Result<u64, ReplicationError> {
    let path = dir.segment_path(from);
    let io = |err: std::io::Error| ReplicationError::Local(format!("{}: {err}", path.display()));
    let mut out = File::create(&path).map_err(io)?;
    let mut at = from;
    loop {
        match ask(upstream, link, Message::Pull { from: at, wait_ms: 0 }).await? {
            Message::Records { from: got, bytes } if got == at => {
                if bytes.is_empty() {
                    break;
                }
                out.write_all(&bytes).map_err(io)?;
                at += bytes.len() as u64;
            }
            Message::Trimmed { oldest } => {
                return Err(ReplicationError::Refused {
                    addr: upstream.addr.clone(),
                    why: format!("its log was trimmed to {oldest} while being copied"),
                })
            }
            other => return Err(upstream.unexpected(&other, "records")),
        }
    }
    out.sync_all().map_err(io)?;
    Ok(at - from)
}
