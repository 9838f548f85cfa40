//! The replica's side: pull the primary's records after the end of this node's log, log
//! each byte for byte at its offset and install it (both through [`Apply`]), wait until
//! this node's log holds them as its mode promises, and pull again from the new end,
//! which acknowledges them. A broken link is dialled again; a primary whose log no longer
//! reaches this one's end (trimmed) ends following with [`FollowerExit::Resync`]: the node
//! must start over from the primary's snapshots ([`crate::bootstrap`]). A primary whose log
//! is shorter than this one's (this log holds records the primary does not) is answered as
//! [`OnAhead`] says: a replica on its own starts over, but one whose shard's config group
//! can promote it keeps its log and waits, because then it is the primary that lost them
//! (its disk was replaced) and this log may be the only one that holds acknowledged
//! writes.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use ferry_wal::record::next_frame;
use ferry_wal::Wal;

use crate::link::{Link, ReplicationError, Upstream};
use crate::wire::{Message, MAX_MESSAGE_BYTES};

/// How long one pull asks the primary to wait for a record.
pub const PULL_WAIT_MS: u32 = 500;

/// How long a pull's answer may take beyond [`PULL_WAIT_MS`] (a full message on a slow
/// link) before the link is taken for broken and dialled again. Without it, a link that
/// silently stops carrying the answers (a one-way partition, a dropped NAT entry) would
/// hold the replica, and under `--ack replica` every reply of its primary, forever.
pub const PULL_ANSWER_MARGIN: Duration = Duration::from_secs(5);

/// First wait before dialling a primary again; doubled up to [`MAX_REDIAL_WAIT`].
pub const FIRST_REDIAL_WAIT: Duration = Duration::from_millis(50);

/// Longest wait between dials.
pub const MAX_REDIAL_WAIT: Duration = Duration::from_secs(1);

/// How long a replica whose log is past its primary's waits before it asks again.
pub const AHEAD_RETRY: Duration = Duration::from_millis(200);

/// What a replica does when its primary's log ends before its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnAhead {
    /// Start over from the primary's snapshots: no one else will ever want this log.
    Resync,
    /// Keep the log and ask again every [`AHEAD_RETRY`]: in a config group the primary
    /// that lost its records is not granted a lease while a replica's log is longer, and
    /// the longest log is promoted in its place.
    Hold,
}

/// Logs and installs one record copied from the primary.
pub trait Apply: Send + Sync + 'static {
    /// `frame` is one whole record (checked) that belongs at log offset `lsn`, the end of
    /// this node's log: append it there and install its commit, or say why not.
    fn apply(&self, lsn: u64, frame: &[u8]) -> Result<(), String>;
}

/// Why following ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FollowerExit {
    /// Asked to stop.
    Stopped,
    /// The primary's log no longer continues this one: start over from its snapshots.
    Resync(String),
    /// This node cannot log or install what it receives.
    Failed(String),
}

/// What a follower shows the node's metrics.
#[derive(Debug, Default)]
pub struct FollowerStatus {
    /// Linked to the primary now.
    pub connected: AtomicBool,
    /// Where the primary's log ended at the last answer (as far as it may send).
    pub primary_end_lsn: AtomicU64,
}

/// Follows `upstream` into `wal` (through `apply`) until `stop` turns true or the logs
/// part.
pub async fn follow(
    upstream: Upstream,
    wal: Arc<Wal>,
    apply: Arc<dyn Apply>,
    status: Arc<FollowerStatus>,
    on_ahead: OnAhead,
    mut stop: watch::Receiver<bool>,
) -> FollowerExit {
    let mut redial_wait = FIRST_REDIAL_WAIT;
    let mut said_unreachable = false;
    loop {
        let linked = tokio::select! {
            linked = upstream.connect() => linked,
            _ = stop.wait_for(|stop| *stop) => return FollowerExit::Stopped,
        };
        let ended = match linked {
            Ok(link) => {
                tracing::info!(primary = %upstream.addr, from = wal.appended_lsn(), "following the primary");
                said_unreachable = false;
                redial_wait = FIRST_REDIAL_WAIT;
                status.connected.store(true, Ordering::Relaxed);
                let ended = tokio::select! {
                    ended = pull_loop(&upstream, link, &wal, apply.as_ref(), &status, on_ahead) => ended,
                    _ = stop.wait_for(|stop| *stop) => Ok(FollowerExit::Stopped),
                };
                status.connected.store(false, Ordering::Relaxed);
                ended
            }
            Err(err) => Err(err),
        };
        match ended {
            Ok(exit) => return exit,
            Err(ReplicationError::Local(why)) => return FollowerExit::Failed(why),
            Err(err) => {
                if said_unreachable {
                    tracing::debug!("replication: {err}");
                } else {
                    tracing::warn!("replication: {err}; dialling again");
                    said_unreachable = true;
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(redial_wait) => {}
            _ = stop.wait_for(|stop| *stop) => return FollowerExit::Stopped,
        }
        redial_wait = (redial_wait * 2).min(MAX_REDIAL_WAIT);
    }
}

/// Pulls over one link until it breaks (an error) or the logs part (an exit).
async fn pull_loop(
    upstream: &Upstream,
    mut link: Link,
    wal: &Wal,
    apply: &dyn Apply,
    status: &FollowerStatus,
    on_ahead: OnAhead,
) -> Result<FollowerExit, ReplicationError> {
    let mut said_ahead = false;
    loop {
        // Everything appended is installed; once it is logged as promised, the pull from
        // its end acknowledges it.
        if wal.gate().pass().await.is_err() {
            return Err(ReplicationError::Local("the log failed".into()));
        }
        let from = wal.appended_lsn();
        link.send(&Message::Pull {
            from,
            wait_ms: PULL_WAIT_MS,
        })
        .await
        .map_err(|err| upstream.broken(err))?;
        let answer_within = Duration::from_millis(u64::from(PULL_WAIT_MS)) + PULL_ANSWER_MARGIN;
        let answer = match tokio::time::timeout(answer_within, link.receive(MAX_MESSAGE_BYTES)).await {
            Ok(answer) => answer.map_err(|err| upstream.broken(err))?,
            Err(_) => {
                return Err(ReplicationError::Link {
                    addr: upstream.addr.clone(),
                    why: format!("no answer to a pull within {} ms", answer_within.as_millis()),
                })
            }
        };
        match answer {
            Message::Records { from: at, bytes } if at == from => {
                status
                    .primary_end_lsn
                    .fetch_max(from + bytes.len() as u64, Ordering::Relaxed);
                let mut offset = 0usize;
                while offset < bytes.len() {
                    let (_, len) = next_frame(&bytes[offset..]).map_err(|bad| ReplicationError::Unexpected {
                        addr: upstream.addr.clone(),
                        got: format!("a bad record at offset {}: {bad}", from + offset as u64),
                        expected: "whole records",
                    })?;
                    apply
                        .apply(from + offset as u64, &bytes[offset..offset + len])
                        .map_err(ReplicationError::Local)?;
                    offset += len;
                }
            }
            Message::Trimmed { oldest } => {
                return Ok(FollowerExit::Resync(format!(
                    "the primary's log now starts at offset {oldest}, after this replica's end ({from})"
                )))
            }
            Message::Ahead { end } => {
                let why = format!(
                    "this replica's log ends at {from}, past the primary's ({end}): it holds records the primary does not"
                );
                if on_ahead == OnAhead::Resync {
                    return Ok(FollowerExit::Resync(why));
                }
                if !said_ahead {
                    tracing::warn!("{why}; keeping them until the config group promotes the longest log");
                    said_ahead = true;
                }
                tokio::time::sleep(AHEAD_RETRY).await;
            }
            other => return Err(upstream.unexpected(&other, "records")),
        }
    }
}
