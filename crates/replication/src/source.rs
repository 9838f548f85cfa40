//! The primary's side of replication: a listener for replicas. Each replica's link asks
//! for records from the end of its log (which acknowledges everything before it: the reply
//! gate then releases replies waiting for a replica), for the snapshot files, and for
//! their bytes. Records are read back from the log's segment files up to how far the log
//! holds them as promised ([`ferry_wal::ReplyGate::logged`]), never from memory, so a
//! replica never receives a record the primary could still lose on a crash of its own.

use ferry_proto::TenantId;
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use ferry_wal::{read_frames, TailError, Wal, MAX_TAIL_READ_BYTES};

use crate::link::{self, Link, MAX_REQUEST_BYTES};
use crate::slots::{SlotSource, SCAN_BATCHES_IN_FLIGHT};
use crate::wire::{Message, ObjectBatch, SnapshotFile, MAX_LISTED_SNAPSHOTS};

/// Most replica links a primary serves at once (each holds a task and a buffer).
pub const MAX_REPLICA_LINKS: usize = 64;

/// Longest a pull waits for a record before answering with none.
pub const MAX_PULL_WAIT: Duration = Duration::from_secs(1);

/// Longest a link may go without a request before it is closed: a replica pulls again
/// within a second, so a silent link is one whose requests no longer arrive (a one-way
/// partition); closing it frees its place among the [`MAX_REPLICA_LINKS`] for the link the
/// replica dials instead.
pub const IDLE_LINK_TIMEOUT: Duration = Duration::from_secs(60);

/// Bytes of a snapshot file sent in one chunk.
pub const SNAPSHOT_CHUNK_BYTES: usize = 1024 * 1024;

/// What a primary serves replicas from.
pub struct Source {
    wal: Arc<Wal>,
    token: Bytes,
    tls: Option<ferry_net::tls::Acceptor>,
    links: Arc<Semaphore>,
    /// Replica links open now.
    pub replicas: AtomicUsize,
    /// The highest log offset a replica has acknowledged.
    pub replica_acked_lsn: AtomicU64,
    /// What serves slot moves out of this node, once the node has set it.
    slots: OnceLock<Arc<dyn SlotSource>>,
}

impl Source {
    /// Serves `wal`'s records to replicas that present `token`, over TLS if `tls`.
    pub fn new(wal: Arc<Wal>, token: Bytes, tls: Option<ferry_net::tls::Acceptor>) -> Source {
        Source {
            wal,
            token,
            tls,
            links: Arc::new(Semaphore::new(MAX_REPLICA_LINKS)),
            replicas: AtomicUsize::new(0),
            replica_acked_lsn: AtomicU64::new(0),
            slots: OnceLock::new(),
        }
    }

    /// Serves slot moves from `slots` too (once; a second call is ignored).
    pub fn serve_slots(&self, slots: Arc<dyn SlotSource>) {
        let _ = self.slots.set(slots);
    }
}

/// Accepts replicas on `listener` until `shutdown` turns true.
pub async fn serve(listener: TcpListener, source: Arc<Source>, shutdown: watch::Receiver<bool>) {
    let links_shutdown = shutdown.clone();
    ferry_net::accept::accept_loop(listener, "replication listener", shutdown, |stream, peer| {
        let Ok(permit) = Arc::clone(&source.links).try_acquire_owned() else {
            tracing::warn!(%peer, "replication link refused: {MAX_REPLICA_LINKS} links open");
            return std::future::ready(());
        };
        let source = Arc::clone(&source);
        let mut shutdown = links_shutdown.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let Some(link) = link::accept(stream, peer, source.tls.as_ref(), &source.token).await else {
                return;
            };
            source.replicas.fetch_add(1, Ordering::Relaxed);
            tracing::info!(%peer, "replica connected");
            tokio::select! {
                ended = serve_link(&source, link) => {
                    if let Err(why) = ended {
                        tracing::info!(%peer, "replica link ended: {why}");
                    }
                }
                _ = shutdown.wait_for(|stop| *stop) => {}
            }
            source.replicas.fetch_sub(1, Ordering::Relaxed);
        });
        std::future::ready(())
    })
    .await;
}

/// Answers one replica's requests until it leaves or breaks the protocol.
async fn serve_link(source: &Source, mut link: Link) -> Result<(), String> {
    loop {
        let request = tokio::time::timeout(IDLE_LINK_TIMEOUT, link.receive(MAX_REQUEST_BYTES))
            .await
            .map_err(|_| format!("no request within {} s", IDLE_LINK_TIMEOUT.as_secs()))?
            .map_err(|err| err.to_string())?;
        let answer = match request {
            Message::Pull { from, wait_ms } => pull(source, from, wait_ms, true).await,
            Message::Tail { from, wait_ms } => pull(source, from, wait_ms, false).await,
            Message::ScanSlots { first, last } => Message::ScanDone {
                log_from: scan_slots(source, &mut link, first, last).await?,
            },
            Message::Freeze { first, last, epoch } => freeze(source, first, last, epoch).await,
            Message::ListSnapshots => list_snapshots(source),
            Message::ReadSnapshot { tenant, lsn, offset } => read_snapshot(source, tenant, lsn, offset).await,
            other => Message::Refused {
                why: format!("not a request: {other:?}").chars().take(80).collect(),
            },
        };
        let refused = matches!(answer, Message::Refused { .. });
        link.send(&answer).await.map_err(|err| err.to_string())?;
        if refused {
            return Err(format!("refused: {answer:?}"));
        }
    }
}

/// What serves slot moves, or the refusal when nothing does.
fn slot_source(source: &Source) -> Result<Arc<dyn SlotSource>, Message> {
    source.slots.get().cloned().ok_or_else(|| Message::Refused {
        why: "this node does not serve slot moves (it is not in a config group)".into(),
    })
}

/// Streams the objects of `first..=last` to a move's destination; the log offset to
/// replay from. On an error the refusal is sent and the link ends.
async fn scan_slots(source: &Source, link: &mut Link, first: u16, last: u16) -> Result<u64, String> {
    let slots = match slot_source(source) {
        Ok(slots) => slots,
        Err(refused) => {
            link.send(&refused).await.map_err(|err| err.to_string())?;
            return Err("refused a scan".into());
        }
    };
    let (batches, mut received) = tokio::sync::mpsc::channel::<ObjectBatch>(SCAN_BATCHES_IN_FLIGHT);
    let (scanned, scan) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("ferry-move-out".into())
        .spawn(move || {
            // The copy must not take CPU from the requests this node serves meanwhile.
            let _ = ferry_os::priority::lower_to_background();
            let result = slots.scan(first, last, &mut |batch| {
                batches
                    .blocking_send(batch)
                    .map_err(|_| "the destination left".to_string())
            });
            let _ = scanned.send(result);
        })
        .map_err(|err| format!("cannot start a scan: {err}"))?;
    while let Some(batch) = received.recv().await {
        link.send(&Message::Objects(batch))
            .await
            .map_err(|err| err.to_string())?;
    }
    match scan.await {
        Ok(Ok(log_from)) => Ok(log_from),
        Ok(Err(why)) => {
            link.send(&Message::Refused { why: why.clone() })
                .await
                .map_err(|err| err.to_string())?;
            Err(why)
        }
        Err(_) => Err("the scan failed".to_string()),
    }
}

/// Stops writes to `first..=last` for a move's hand-over.
async fn freeze(source: &Source, first: u16, last: u16, epoch: u64) -> Message {
    let slots = match slot_source(source) {
        Ok(slots) => slots,
        Err(refused) => return refused,
    };
    match tokio::task::spawn_blocking(move || slots.freeze(first, last, epoch)).await {
        Ok(Ok(end)) => Message::Frozen { end },
        Ok(Err(why)) => Message::Refused { why },
        Err(join) => Message::Refused {
            why: format!("the freeze failed: {join}"),
        },
    }
}

/// The records after `from`, once there are some (or none after the wait). A replica's
/// pull (`ack`) acknowledges everything before `from`; a move's tail read does not.
async fn pull(source: &Source, from: u64, wait_ms: u32, ack: bool) -> Message {
    let gate = source.wal.gate();
    let mut logged = gate.logged();
    let end = *logged.borrow_and_update();
    if from > end {
        return Message::Ahead { end };
    }
    if ack {
        // The replica holds everything before `from`: replies waiting for a replica may go.
        gate.replica_logged(from);
        source.replica_acked_lsn.fetch_max(from, Ordering::Relaxed);
    }
    if from == end {
        let wait = Duration::from_millis(u64::from(wait_ms)).min(MAX_PULL_WAIT);
        let _ = tokio::time::timeout(wait, logged.wait_for(|logged| *logged > from)).await;
    }
    let end = *logged.borrow();
    if from == end {
        return Message::Records {
            from,
            bytes: Bytes::new(),
        };
    }
    let wal = Arc::clone(&source.wal);
    let read = tokio::task::spawn_blocking(move || read_frames(wal.data_dir(), from, end, MAX_TAIL_READ_BYTES)).await;
    match read {
        Ok(Ok(bytes)) => Message::Records {
            from,
            bytes: Bytes::from(bytes),
        },
        // Trimmed only if this node removed the records itself (a checkpoint): a segment
        // gone from under it (its disk deleted while it runs) is no reason for a replica
        // to throw its copy away, so the replica is refused and asks again.
        Ok(Err(TailError::Trimmed { oldest, from })) if from < source.wal.oldest_lsn() => Message::Trimmed { oldest },
        Ok(Err(TailError::Trimmed { from, .. })) => Message::Refused {
            why: format!("the log segment holding offset {from} is gone, but this node did not remove it"),
        },
        Ok(Err(TailError::Ahead { end, .. })) => Message::Ahead { end },
        Ok(Err(err)) => Message::Refused { why: err.to_string() },
        Err(join) => Message::Refused {
            why: format!("reading the log failed: {join}"),
        },
    }
}

/// The newest snapshot of each tenant, and where the log kept starts.
fn list_snapshots(source: &Source) -> Message {
    let dir = source.wal.data_dir();
    let listed = dir.snapshots().and_then(|snapshots| Ok((snapshots, dir.segments()?)));
    let (snapshots, segments) = match listed {
        Ok(listed) => listed,
        Err(err) => return Message::Refused { why: err.to_string() },
    };
    let mut files: Vec<SnapshotFile> = Vec::new();
    for (tenant, lsn, path) in snapshots {
        let Ok(meta) = std::fs::metadata(&path) else {
            continue; // removed by a checkpoint meanwhile: a newer one is listed
        };
        // Sorted by (tenant, lsn): a tenant's newest comes last.
        if files.last().is_some_and(|last| last.tenant == tenant) {
            files.pop();
        }
        files.push(SnapshotFile {
            tenant,
            lsn,
            bytes: meta.len(),
        });
    }
    if files.len() > MAX_LISTED_SNAPSHOTS {
        return Message::Refused {
            why: format!("more than {MAX_LISTED_SNAPSHOTS} snapshot files"),
        };
    }
    let log_from = segments
        .first()
        .map_or_else(|| source.wal.appended_lsn(), |(start, _)| *start);
    Message::Snapshots { log_from, files }
}

/// Up to [`SNAPSHOT_CHUNK_BYTES`] of one snapshot file from `offset`.
async fn read_snapshot(source: &Source, tenant: TenantId, lsn: u64, offset: u64) -> Message {
    let path = source.wal.data_dir().snapshot_path(tenant, lsn);
    let read = tokio::task::spawn_blocking(move || -> std::io::Result<Vec<u8>> {
        let file = std::fs::File::open(&path)?;
        let mut bytes = vec![0u8; SNAPSHOT_CHUNK_BYTES];
        let mut filled = 0;
        while filled < bytes.len() {
            match file.read_at(&mut bytes[filled..], offset + filled as u64) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(err) if err.kind() == ErrorKind::Interrupted => {}
                Err(err) => return Err(err),
            }
        }
        bytes.truncate(filled);
        Ok(bytes)
    })
    .await;
    match read {
        Ok(Ok(bytes)) => Message::Chunk {
            bytes: Bytes::from(bytes),
        },
        Ok(Err(err)) if err.kind() == ErrorKind::NotFound => Message::Refused {
            why: format!("snapshot of tenant {tenant} at {lsn} is gone (a newer one replaced it)"),
        },
        Ok(Err(err)) => Message::Refused {
            why: format!("reading snapshot of tenant {tenant} at {lsn}: {err}"),
        },
        Err(join) => Message::Refused {
            why: format!("reading a snapshot failed: {join}"),
        },
    }
}
