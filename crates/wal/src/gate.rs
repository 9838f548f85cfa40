//! When a reply may leave the node. A reply can reveal a write (its own acknowledgement,
//! or a read of the value) only once the log holds that write as durably as the node's
//! fsync mode promises. Every commit is appended to the log before it becomes visible, so
//! a reply about to be sent can reveal nothing appended after this moment: waiting until
//! everything appended so far is released covers every write it could reveal.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use thiserror::Error;
use tokio::sync::watch;

/// The log's write position and how far it has been made as durable as promised.
#[derive(Debug)]
pub struct ReplyGate {
    /// End of the last record appended (a log offset).
    appended: AtomicU64,
    /// End of the records released: written (fsync `everysec`, `no`) or synced (`always`).
    released: watch::Sender<u64>,
    /// The log can no longer make anything durable.
    failed: AtomicBool,
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
        }
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

    /// Waits until every record appended before the call is released. Call it after a
    /// reply is produced and before it is sent.
    pub async fn pass(&self) -> Result<(), LogFailed> {
        let target = self.appended_lsn();
        if self.released_lsn() >= target {
            return Ok(());
        }
        let mut released = self.released.subscribe();
        let failed = &self.failed;
        let passed = match released
            .wait_for(|&lsn| lsn >= target || failed.load(Ordering::Acquire))
            .await
        {
            Ok(lsn) => *lsn >= target,
            Err(_) => false,
        };
        if passed {
            Ok(())
        } else {
            Err(LogFailed)
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
