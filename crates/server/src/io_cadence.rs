//! How often a busy core looks at its sockets. The worker loop gives the core's other
//! tasks their turn after every batch (a granted turn's connection runs next). Tokio's
//! `yield_now` wakes the yielding task only after the runtime has polled its I/O driver:
//! one `epoll_wait` per batch, which on a core busy with short turns is a system call per
//! request (measured: 1.15 per FCALL). Redis polls once per loop and serves every ready
//! client in between. [`IoCadence`] does the same within a bound: a yield lets the ready
//! tasks run at once, and goes through the driver only when it was last polled a slice
//! ago (the runtime also polls it every `event_interval` tasks), so a connection that
//! becomes readable waits for at most about one slice more than before.

use std::future::poll_fn;
use std::task::Poll;
use std::time::{Duration, Instant};

/// When the core last let its I/O driver run, and how often it must.
pub(crate) struct IoCadence {
    every: Duration,
    polled: Instant,
}

impl IoCadence {
    /// Polls the driver at least `every` (the node's poll slice).
    pub(crate) fn new(every: Duration, now: Instant) -> Self {
        IoCadence { every, polled: now }
    }

    /// Whether the next yield must go through the driver (`now` is past the cadence).
    pub(crate) fn driver_due(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.polled) >= self.every
    }

    /// Lets the core's other ready tasks run; through the I/O driver when it is due.
    pub(crate) async fn yield_now(&mut self) {
        if self.driver_due(Instant::now()) {
            tokio::task::yield_now().await;
            self.polled = Instant::now();
        } else {
            ready_tasks_first().await;
        }
    }
}

/// Returns after the tasks already ready on this thread have run, without waiting for the
/// I/O driver: the task wakes itself, so it queues behind them.
async fn ready_tasks_first() {
    let mut yielded = false;
    poll_fn(|cx| {
        if yielded {
            return Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    #[test]
    fn the_driver_is_due_once_a_slice_has_passed_since_it_ran() {
        let start = Instant::now();
        let cadence = IoCadence::new(Duration::from_micros(200), start);
        assert!(!cadence.driver_due(start));
        assert!(!cadence.driver_due(start + Duration::from_micros(199)));
        assert!(cadence.driver_due(start + Duration::from_micros(200)));
        // A clock that went backwards is no reason to skip the driver forever.
        assert!(!cadence.driver_due(start - Duration::from_micros(1)));
    }

    #[test]
    fn a_yield_lets_the_ready_tasks_run_first_without_the_driver() {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(async {
            // As on a core: the worker loop is a task, and the task it made ready (a granted
            // turn's connection) runs before its yield returns.
            tokio::spawn(async {
                let ran = Arc::new(AtomicBool::new(false));
                let other = tokio::spawn({
                    let ran = Arc::clone(&ran);
                    async move { ran.store(true, Ordering::SeqCst) }
                });
                let mut cadence = IoCadence::new(Duration::from_secs(3600), Instant::now());
                let polled = cadence.polled;
                cadence.yield_now().await;
                assert!(
                    ran.load(Ordering::SeqCst),
                    "the ready task ran before the yield returned"
                );
                assert_eq!(cadence.polled, polled, "the driver was not due");
                other.await.unwrap();
            })
            .await
            .unwrap();
        });
    }
}
