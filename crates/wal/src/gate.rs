//! When a reply may leave the node. A reply can reveal a write (its own acknowledgement,
//! or a read of the value) only once the log holds that write as durably as the node's
//! fsync mode promises. Every commit is appended to the log before it becomes visible, so
//! a reply about to be sent can reveal nothing appended after this moment: waiting until
//! everything appended so far is released covers every write it could reveal.
//!
//! With replica acknowledgements required (`--ack replica`), "released" also means a
//! replica has logged it: the release is the lower of this node's log and the replica's.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{OnceLock, Weak};

use thiserror::Error;
use tokio::sync::watch;

/// What writes the log out, for a reply that would otherwise wait for someone to.
pub trait Flush: Send + Sync {
    /// Writes (and syncs, as the mode asks) everything appended, then releases the gate;
    /// false if another flush is running (its release wakes the waiters).
    fn try_flush(&self) -> bool;
}

/// The log's write position and how far it has been made as durable as promised.
pub struct ReplyGate {
    /// End of the last record appended (a log offset).
    appended: AtomicU64,
    /// End of the records this node's log holds as promised: written (fsync `everysec`,
    /// `no`) or synced (`always`). What a primary may send its replicas.
    logged: watch::Sender<u64>,
    /// End of the records a replica has logged (reported by replication).
    replica_logged: AtomicU64,
    /// Whether replies wait for a replica too.
    replica_required: AtomicBool,
    /// End of the records released: `logged`, or the lower of it and `replica_logged`.
    released: watch::Sender<u64>,
    /// The log can no longer make anything durable.
    failed: AtomicBool,
    /// The log's flush, run by a waiting reply (none: wait for a release).
    flusher: OnceLock<Weak<dyn Flush>>,
}

impl std::fmt::Debug for ReplyGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplyGate")
            .field("appended", &self.appended_lsn())
            .field("released", &self.released_lsn())
            .finish_non_exhaustive()
    }
}

/// The log failed: the replies waiting may reveal writes it will never hold.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
#[error("the write-ahead log failed: replies that may reveal unlogged writes are withheld")]
pub struct LogFailed;

impl ReplyGate {
    /// A gate over a log that ends (all of it durable) at `lsn`.
    pub fn new(lsn: u64) -> ReplyGate {
        ReplyGate {
            appended: AtomicU64::new(lsn),
            logged: watch::Sender::new(lsn),
            replica_logged: AtomicU64::new(0),
            replica_required: AtomicBool::new(false),
            released: watch::Sender::new(lsn),
            failed: AtomicBool::new(false),
            flusher: OnceLock::new(),
        }
    }

    /// Lets replies that wait run `flusher` themselves.
    pub(crate) fn flush_with(&self, flusher: Weak<dyn Flush>) {
        let _ = self.flusher.set(flusher);
    }

    /// The log now ends at `lsn` (called by the appender, in log order; public so tests of
    /// what waits at a gate can drive one).
    pub fn appended(&self, lsn: u64) {
        self.appended.store(lsn, Ordering::Release);
    }

    /// Everything up to `lsn` is as durable as promised (called by the log's writer).
    pub fn release(&self, lsn: u64) {
        self.logged.send_if_modified(|logged| {
            let moved = lsn > *logged;
            *logged = (*logged).max(lsn);
            moved
        });
        self.update_released();
    }

    /// A replica has logged everything up to `lsn` (called by replication).
    pub fn replica_logged(&self, lsn: u64) {
        self.replica_logged.fetch_max(lsn, Ordering::AcqRel);
        self.update_released();
    }

    /// Whether replies also wait for a replica to have logged what they may reveal.
    pub fn require_replica(&self, required: bool) {
        self.replica_required.store(required, Ordering::Release);
        self.update_released();
    }

    /// Moves the release to what the log and, when required, a replica hold. It only
    /// rises: a reply once released stays released.
    fn update_released(&self) {
        // Computed under the release's lock: of two updates racing (the writer's and a
        // replica's), the later one sees both, so neither is lost.
        self.released.send_if_modified(|released| {
            let logged = *self.logged.borrow();
            let target = if self.replica_required.load(Ordering::Acquire) {
                logged.min(self.replica_logged.load(Ordering::Acquire))
            } else {
                logged
            };
            let moved = target > *released;
            *released = (*released).max(target);
            moved
        });
    }

    /// How far this node's log holds records as promised, as a channel that changes when
    /// it grows: what replication may send.
    pub fn logged(&self) -> watch::Receiver<u64> {
        self.logged.subscribe()
    }

    /// Nothing more will be released: wakes every waiter with [`LogFailed`].
    pub(crate) fn fail(&self) {
        self.failed.store(true, Ordering::Release);
        self.released.send_modify(|_| {});
    }

    /// Where the log ends now.
    pub fn appended_lsn(&self) -> u64 {
        self.appended.load(Ordering::Acquire)
    }

    /// How far the log is released.
    pub fn released_lsn(&self) -> u64 {
        *self.released.borrow()
    }

    /// Waits until every record appended before the call is released, flushing the log
    /// itself when no other flush runs. Call it after a reply is produced and before it is
    /// sent.
    pub async fn pass(&self) -> Result<(), LogFailed> {
        let target = self.appended_lsn();
        let mut released = self.released.subscribe();
        loop {
            if *released.borrow_and_update() >= target {
                return Ok(());
            }
            if self.failed.load(Ordering::Acquire) {
                return Err(LogFailed);
            }
            // Flushing helps only while this node's log is behind; waiting for a replica,
            // a flush would find nothing to do and the loop would spin.
            let local_behind = *self.logged.borrow() < target;
            let flushed = local_behind
                && self
                    .flusher
                    .get()
                    .and_then(Weak::upgrade)
                    .is_some_and(|flusher| flusher.try_flush());
            if !flushed && released.changed().await.is_err() {
                return Err(LogFailed);
            }
        }
    }
}

/// The listeners' view of the gate: every reply batch passes it before it is written.
impl ferry_net::gate::ReplyGate for ReplyGate {
    fn pass(&self) -> ferry_net::gate::Passing<'_> {
        Box::pin(async move {
            ReplyGate::pass(self)
                .await
                .map_err(|LogFailed| ferry_net::gate::Withheld)
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn a_reply_waits_for_what_was_appended_before_it_and_not_for_later_appends() {
        runtime().block_on(async {
            let gate = Arc::new(ReplyGate::new(100));
            gate.pass().await.unwrap();
            gate.appended(150);
            let waiting = tokio::spawn({
                let gate = Arc::clone(&gate);
                async move { gate.pass().await }
            });
            tokio::time::sleep(Duration::from_millis(20)).await;
            assert!(!waiting.is_finished(), "passed before its writes were released");
            gate.appended(400);
            gate.release(150);
            tokio::time::timeout(Duration::from_secs(10), waiting)
                .await
                .expect("released")
                .unwrap()
                .unwrap();
        });
    }

    #[test]
    fn with_a_replica_required_a_reply_waits_for_the_replica_too() {
        runtime().block_on(async {
            let gate = Arc::new(ReplyGate::new(0));
            gate.require_replica(true);
            gate.appended(100);
            gate.release(100);
            let waiting = tokio::spawn({
                let gate = Arc::clone(&gate);
                async move { gate.pass().await }
            });
            tokio::time::sleep(Duration::from_millis(20)).await;
            assert!(!waiting.is_finished(), "passed before a replica logged its writes");
            assert_eq!(*gate.logged().borrow(), 100, "the log itself holds them");
            gate.replica_logged(60);
            tokio::time::sleep(Duration::from_millis(20)).await;
            assert!(!waiting.is_finished(), "passed with the replica short of its writes");
            gate.replica_logged(100);
            tokio::time::timeout(Duration::from_secs(10), waiting)
                .await
                .expect("released")
                .unwrap()
                .unwrap();
            // Without the requirement, the log alone releases.
            gate.require_replica(false);
            gate.appended(200);
            gate.release(200);
            tokio::time::timeout(Duration::from_secs(10), gate.pass())
                .await
                .expect("released by the log alone")
                .unwrap();
        });
    }

    #[test]
    fn a_failed_log_withholds_waiting_replies() {
        runtime().block_on(async {
            let gate = Arc::new(ReplyGate::new(0));
            gate.appended(10);
            let waiting = tokio::spawn({
                let gate = Arc::clone(&gate);
                async move { gate.pass().await }
            });
            tokio::task::yield_now().await;
            gate.fail();
            let result = tokio::time::timeout(Duration::from_secs(10), waiting)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(result, Err(LogFailed));
        });
    }
}
