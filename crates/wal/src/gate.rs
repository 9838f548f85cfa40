//! When a reply may leave the node. A reply can reveal a write (its own acknowledgement,
//! or a read of the value) only once the log holds that write as durably as the node's
//! fsync mode promises. Every commit is appended to the log before it becomes visible, so
//! a reply about to be sent can reveal nothing appended after this moment: waiting until
//! everything appended so far is released covers every write it could reveal.

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
    /// End of the records released: written (fsync `everysec`, `no`) or synced (`always`).
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
        self.released.send_if_modified(|released| {
            let moved = lsn > *released;
            *released = (*released).max(lsn);
            moved
        });
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
            let flushed = self
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
