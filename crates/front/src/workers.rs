//! The active workers of a compute node: how many invocations it runs at once, resized by
//! the elastic loop (`ferry_control::Elastic`, Pyxis §IV-D) between a minimum and a maximum.
//!
//! Every [`ELASTIC_PERIOD`] the loop is told how many workers were active, how busy they
//! were (the app CPU the invocations reported, per second) and whether invocations had to
//! wait for a worker; it answers with the next size. Invocations beyond the active workers
//! wait, at most [`MAX_WAITING`] of them; past that they are refused `overloaded`.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;

use ferry_control::elastic::ELASTIC_PERIOD;
use ferry_control::{Elastic, ElasticInput};

/// Most invocations waiting for a worker; more are refused.
pub const MAX_WAITING: u32 = 4096;

/// Most workers a compute node may run.
pub const MAX_WORKERS: u32 = 1024;

#[derive(Debug)]
struct Counts {
    active: u32,
    running: u32,
    waiting: u32,
}

/// The gate every invocation passes.
pub struct Workers {
    elastic: Elastic,
    counts: Mutex<Counts>,
    freed: Notify,
    /// App CPU reported by invocations since the last decision, ns.
    busy_ns: AtomicU64,
    /// An invocation waited for a worker since the last decision.
    held_back: AtomicBool,
    /// Invocations refused for want of a place to wait.
    refused: AtomicU64,
}

/// No worker and no place to wait.
#[derive(Debug, PartialEq, Eq)]
pub struct Full;

impl Workers {
    /// Between `min` and `max` active workers, starting with `max` (the loop shrinks it
    /// once it has measured the work).
    pub fn new(min: u32, max: u32) -> Result<Workers, String> {
        if max > MAX_WORKERS {
            return Err(format!("at most {MAX_WORKERS} workers"));
        }
        let elastic = Elastic::new(min, max).map_err(|err| format!("workers: {err}"))?;
        Ok(Workers {
            counts: Mutex::new(Counts {
                active: elastic.initial_cores(),
                running: 0,
                waiting: 0,
            }),
            elastic,
            freed: Notify::new(),
            busy_ns: AtomicU64::new(0),
            held_back: AtomicBool::new(false),
            refused: AtomicU64::new(0),
        })
    }

    /// Runs `work` on a worker once one is free; `work` returns its result and the app CPU
    /// it spent (ns), which sizes the next decision.
    pub async fn run<T>(&self, work: impl Future<Output = (T, u64)>) -> Result<T, Full> {
        self.acquire().await?;
        let _release = Release(self);
        let (result, busy_ns) = work.await;
        self.busy_ns.fetch_add(busy_ns, Ordering::Relaxed);
        Ok(result)
    }

    async fn acquire(&self) -> Result<(), Full> {
        let mut queued = false;
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            {
                let mut counts = self.counts.lock();
                if counts.running < counts.active {
                    counts.running += 1;
                    if queued {
                        counts.waiting -= 1;
                    }
                    return Ok(());
                }
                if !queued {
                    if counts.waiting >= MAX_WAITING {
                        self.refused.fetch_add(1, Ordering::Relaxed);
                        return Err(Full);
                    }
                    counts.waiting += 1;
                    queued = true;
                    self.held_back.store(true, Ordering::Relaxed);
                }
            }
            freed.await;
        }
    }

    /// One decision of the elastic loop over the last `period`; returns the new size.
    pub fn resize(&self, period: Duration) -> u32 {
        let busy_ns = self.busy_ns.swap(0, Ordering::Relaxed);
        let throttled = self.held_back.swap(false, Ordering::Relaxed);
        let mut counts = self.counts.lock();
        let input = ElasticInput {
            active_cores: counts.active,
            busy_cores: busy_ns as f64 / period.as_nanos().max(1) as f64,
            throttled,
        };
        let next = self.elastic.decide(&input);
        if next != counts.active {
            tracing::debug!(
                from = counts.active,
                to = next,
                busy = input.busy_cores,
                throttled,
                "active workers resized"
            );
        }
        let grew = next > counts.active;
        counts.active = next;
        drop(counts);
        if grew {
            self.freed.notify_waiters();
        }
        next
    }

    /// Runs the elastic loop until the task is dropped.
    pub async fn elastic_loop(&self) {
        let period = Duration::from_nanos(ELASTIC_PERIOD.as_nanos());
        let mut ticks = tokio::time::interval(period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            ticks.tick().await;
            self.resize(period);
        }
    }

    /// (active, running, waiting, refused so far).
    pub fn snapshot(&self) -> (u32, u32, u32, u64) {
        let counts = self.counts.lock();
        (
            counts.active,
            counts.running,
            counts.waiting,
            self.refused.load(Ordering::Relaxed),
        )
    }
}

struct Release<'w>(&'w Workers);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.counts.lock().running -= 1;
        self.0.freed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn idle_workers_shrink_to_the_minimum_and_waiting_work_grows_them() {
        let workers = Workers::new(1, 8).unwrap();
        assert_eq!(workers.snapshot().0, 8, "starts with every worker");
        // Nothing ran: the loop shrinks step by step down to the minimum.
        let mut active = 8;
        for _ in 0..20 {
            active = workers.resize(Duration::from_millis(100));
        }
        assert_eq!(active, 1);
        // Two invocations at once with one worker: the second waits, so the loop grows.
        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        let (finish_tx, finish_rx) = tokio::sync::oneshot::channel::<()>();
        let first = workers.run(async {
            let _ = started_tx.send(());
            let _ = finish_rx.await;
            ((), 0)
        });
        let second = async {
            started_rx.await.unwrap();
            let queued = workers.run(async { ((), 0) });
            tokio::pin!(queued);
            // It cannot start while the first holds the only worker.
            assert!(tokio::time::timeout(Duration::from_millis(20), queued.as_mut())
                .await
                .is_err());
            assert_eq!(workers.snapshot().2, 1, "one waiting");
            assert!(
                workers.resize(Duration::from_millis(100)) >= 2,
                "waiting work grows the workers"
            );
            queued.await.unwrap();
            let _ = finish_tx.send(());
        };
        let (first, ()) = tokio::join!(first, second);
        first.unwrap();
        assert_eq!(workers.snapshot().1, 0, "every worker released");
        assert!(Workers::new(0, 4).is_err());
        assert!(Workers::new(4, 2).is_err());
    }
}
