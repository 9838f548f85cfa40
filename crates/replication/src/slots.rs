//! A slot move's copy, over a replication link: the destination asks the source for a
//! consistent scan of the range (every tenant marked first, then scanned, as a snapshot
//! is), installs it, replays the source's log from the marks on (keeping only the range's
//! writes) until it has nearly caught up, asks the source to stop taking writes to the
//! range, and replays up to where the source's log ended then. The source's side is a
//! [`SlotSource`], the destination's a [`SlotSink`]; both are the storage node's (slots,
//! tenants and commits are its business), this module only moves the bytes.
//!
//! Why the copy is the range's state at the freeze: the scan plus a replay of every
//! record from the mark on, in order, sets each object to its last logged value (see
//! `ferry_store`'s scan), and the source logs no write to the range after the end it
//! reports with [`Message::Frozen`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_wal::record::next_frame;

use crate::link::Link;
use crate::wire::{Message, ObjectBatch, MAX_MESSAGE_BYTES};
use crate::{ReplicationError, Upstream};

/// Bytes of keys and values in one [`Message::Objects`] (one object may take it past).
pub const MOVE_BATCH_BYTES: usize = 1024 * 1024;

/// Objects in one [`Message::Objects`] (each becomes one commit at the destination).
pub const MOVE_BATCH_OBJECTS: usize = 4096;

/// Batches received ahead of the one being installed.
pub const INSTALLS_IN_FLIGHT: usize = 4;

/// Batches a source's scan runs ahead of the link.
pub const SCAN_BATCHES_IN_FLIGHT: usize = 4;

/// Catch-up rounds before the source is asked to stop writes however far behind the
/// destination is (writes faster than the copy would otherwise never let it finish).
pub const MAX_CATCH_UP_ROUNDS: u32 = 64;

/// A tail read this short means the destination has caught up: freeze now.
pub const CAUGHT_UP_BYTES: usize = 256 * 1024;

/// Longest a tail read waits for records after the freeze.
const TAIL_WAIT_MS: u32 = 1000;

/// Longest the source may take to deliver the log up to its freeze point.
pub const MAX_DRAIN: Duration = Duration::from_secs(30);

/// The source's side of a move, served on its replication listener.
pub trait SlotSource: Send + Sync + 'static {
    /// Marks every tenant, then hands over every object whose key's slot is in
    /// `first..=last`, in batches of at most [`MOVE_BATCH_BYTES`] and
    /// [`MOVE_BATCH_OBJECTS`]. Returns the log offset a replay must start from. An error
    /// from `each` stops the scan and is returned.
    fn scan(
        &self,
        first: u16,
        last: u16,
        each: &mut dyn FnMut(ObjectBatch) -> Result<(), String>,
    ) -> Result<u64, String>;

    /// Stops taking writes to `first..=last` until a configuration newer than `epoch`
    /// shows whether the range moved; returns where the log ends (no later record
    /// writes the range).
    fn freeze(&self, first: u16, last: u16, epoch: u64) -> Result<u64, String>;
}

/// A future a [`SlotSink`] returns.
pub type SinkFuture<'a> = Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>>;

/// The destination's side of a move.
pub trait SlotSink: Send + Sync + 'static {
    /// Deletes what this node holds of `first..=last` (left by an earlier, failed move);
    /// returns how many objects.
    fn clear(&self, first: u16, last: u16) -> Result<u64, String>;

    /// Writes a batch of the source's objects.
    fn install(&self, batch: &ObjectBatch) -> Result<(), String>;

    /// Applies the writes to `first..=last` of the source's record at `lsn` (a whole
    /// frame); returns whether it held any.
    fn apply(&self, lsn: u64, frame: &[u8], first: u16, last: u16) -> Result<bool, String>;

    /// Waits until everything written so far is as durable as this node's acks promise.
    fn durable(&self) -> SinkFuture<'_>;
}

/// What a move's copy did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// Objects of the range this node held before, deleted.
    pub cleared: u64,
    /// Objects the scan copied.
    pub objects: u64,
    /// Their keys' and values' bytes.
    pub bytes: u64,
    /// Records of the source's log that wrote the range.
    pub records: u64,
    /// The epoch the source stopped writes at (the hand-over must commit at it).
    pub frozen_epoch: u64,
    /// Time from the start to the freeze.
    pub copy_time: Duration,
    /// Time from the freeze to the end (writes to the range wait this long, plus the
    /// hand-over's commit).
    pub frozen_time: Duration,
}

/// Copies `first..=last` from the source `upstream`: scan, log tail, freeze, the rest of
/// the tail, durable. `epoch` gives the newest configuration epoch this node knows, read
/// when the source is asked to freeze.
pub async fn import(
    upstream: &Upstream,
    first: u16,
    last: u16,
    epoch: &(dyn Fn() -> u64 + Send + Sync),
    sink: Arc<dyn SlotSink>,
) -> Result<ImportReport, ReplicationError> {
    let started = Instant::now();
    let mut link = upstream.connect().await?;
    let mut report = ImportReport {
        cleared: blocking(&sink, move |sink| sink.clear(first, last)).await?,
        ..ImportReport::default()
    };
    link.send(&Message::ScanSlots { first, last })
        .await
        .map_err(|err| upstream.broken(err))?;
    // Installing runs beside receiving: the link reads the next batches while one is
    // committed.
    let (batches, mut to_install) = tokio::sync::mpsc::channel::<ObjectBatch>(INSTALLS_IN_FLIGHT);
    let (installed_tx, installed_rx) = tokio::sync::oneshot::channel();
    let installer_sink = Arc::clone(&sink);
    std::thread::Builder::new()
        .name("ferry-move-in".into())
        .spawn(move || {
            // The copy must not take CPU from the requests this node serves meanwhile.
            let _ = ferry_os::priority::lower_to_background();
            let mut result = Ok(());
            while let Some(batch) = to_install.blocking_recv() {
                if let Err(why) = installer_sink.install(&batch) {
                    result = Err(why);
                    break;
                }
            }
            let _ = installed_tx.send(result);
        })
        .map_err(|err| ReplicationError::Local(format!("cannot start the copy's installer: {err}")))?;
    let received = async {
        loop {
            match link
                .receive(MAX_MESSAGE_BYTES)
                .await
                .map_err(|err| upstream.broken(err))?
            {
                Message::Objects(batch) => {
                    report.objects += batch.objects.len() as u64;
                    report.bytes += batch.bytes() as u64;
                    if batches.send(batch).await.is_err() {
                        // The installer stopped on an error: it is reported below.
                        return Ok(None);
                    }
                }
                Message::ScanDone { log_from } => return Ok(Some(log_from)),
                other => return Err(upstream.unexpected(&other, "objects")),
            }
        }
    }
    .await;
    drop(batches);
    let installed = installed_rx
        .await
        .map_err(|_| ReplicationError::Local("the copy's installer failed".into()))?
        .map_err(ReplicationError::Local);
    let mut from = match (received?, installed) {
        (_, Err(err)) => return Err(err),
        (Some(log_from), Ok(())) => log_from,
        (None, Ok(())) => return Err(ReplicationError::Local("the installer stopped".into())),
    };
    // Catch up while the source still takes writes, so the freeze is short.
    for _ in 0..MAX_CATCH_UP_ROUNDS {
        let read = tail(upstream, &mut link, from, 0).await?;
        let len = read.len();
        from = apply_records(&sink, from, read, first, last, &mut report).await?;
        if len < CAUGHT_UP_BYTES {
            break;
        }
    }
    report.frozen_epoch = epoch();
    link.send(&Message::Freeze {
        first,
        last,
        epoch: report.frozen_epoch,
    })
    .await
    .map_err(|err| upstream.broken(err))?;
    let end = match link
        .receive(MAX_MESSAGE_BYTES)
        .await
        .map_err(|err| upstream.broken(err))?
    {
        Message::Frozen { end } => end,
        other => return Err(upstream.unexpected(&other, "frozen")),
    };
    report.copy_time = started.elapsed();
    let frozen = Instant::now();
    while from < end {
        if frozen.elapsed() > MAX_DRAIN {
            return Err(ReplicationError::Local(format!(
                "the source's log did not reach {end} within {MAX_DRAIN:?} (at {from})"
            )));
        }
        let read = tail(upstream, &mut link, from, TAIL_WAIT_MS).await?;
        from = apply_records(&sink, from, read, first, last, &mut report).await?;
    }
    sink.durable().await.map_err(ReplicationError::Local)?;
    report.frozen_time = frozen.elapsed();
    Ok(report)
}

/// The source's records from `from` (none if there are none within `wait_ms`).
async fn tail(upstream: &Upstream, link: &mut Link, from: u64, wait_ms: u32) -> Result<Bytes, ReplicationError> {
    link.send(&Message::Tail { from, wait_ms })
        .await
        .map_err(|err| upstream.broken(err))?;
    match link
        .receive(MAX_MESSAGE_BYTES)
        .await
        .map_err(|err| upstream.broken(err))?
    {
        Message::Records { from: at, bytes } if at == from => Ok(bytes),
        Message::Trimmed { oldest } => Err(ReplicationError::Local(format!(
            "the source removed the log the move needs (it starts at {oldest} now, the copy is at {from}): \
             a snapshot ran during the move; move again"
        ))),
        other => Err(upstream.unexpected(&other, "records")),
    }
}

/// Applies the whole records in `bytes` (at `from` in the source's log); returns where
/// they end.
async fn apply_records(
    sink: &Arc<dyn SlotSink>,
    from: u64,
    bytes: Bytes,
    first: u16,
    last: u16,
    report: &mut ImportReport,
) -> Result<u64, ReplicationError> {
    let end = from + bytes.len() as u64;
    if bytes.is_empty() {
        return Ok(end);
    }
    let applied = blocking(sink, move |sink| {
        let mut offset = 0;
        let mut applied = 0u64;
        while offset < bytes.len() {
            let lsn = from + offset as u64;
            let (_, len) = next_frame(&bytes[offset..]).map_err(|bad| format!("a bad record at {lsn}: {bad}"))?;
            if sink.apply(lsn, &bytes[offset..offset + len], first, last)? {
                applied += 1;
            }
            offset += len;
        }
        Ok(applied)
    })
    .await?;
    report.records += applied;
    Ok(end)
}

/// Runs `work` on the sink off the async threads (installs and commits take CPU).
async fn blocking<T: Send + 'static>(
    sink: &Arc<dyn SlotSink>,
    work: impl FnOnce(&dyn SlotSink) -> Result<T, String> + Send + 'static,
) -> Result<T, ReplicationError> {
    let sink = Arc::clone(sink);
    tokio::task::spawn_blocking(move || work(sink.as_ref()))
        .await
        .map_err(|join| ReplicationError::Local(format!("the copy's worker failed: {join}")))?
        .map_err(ReplicationError::Local)
}
