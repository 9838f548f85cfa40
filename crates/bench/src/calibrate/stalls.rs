//! The machine's stall process, seen as the rate loop sees it: a steady stream of small
//! gets, paced exactly as `ferry bench` paces (latency from each request's due time, so a
//! stall of the app side counts too), every completion fed to a
//! [`StallEstimator`]: a gap between completions many mean gaps long, ended by a request
//! that was in flight all through it, is a stall.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::stall_gaps::{StallEstimator, GAP_COMPLETIONS};
use ferry_client::ClientError;
use ferry_control::Nanos;

use crate::latency::Recorder;
use crate::loadgen::wait_until;

/// The stream's rate: the estimator counts a gap as a stall from [`GAP_COMPLETIONS`] mean
/// gaps on, so at 20 000 requests per second every stall from 1 ms on is seen (a VM's are
/// milliseconds), while a node serving ~100 000 small gets a second stays lightly loaded and
/// its queue makes no gaps of its own.
pub const STALL_STREAM_RATE_OPS: f64 = 20_000.0;

/// Requests in flight at most: past it the node is stalled for good, and the stream stops
/// sending rather than pile up tasks.
const OUTSTANDING_MAX: usize = 65_536;

/// How long the end of the stream waits for its last requests.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// What the stream saw.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StallsSeen {
    /// Stalls per second.
    pub rate_hz: f64,
    /// Their mean length, ns.
    pub mean_ns: f64,
    /// Spread of their lengths, standard deviation over mean (None under two stalls).
    pub length_cv: Option<f64>,
    /// Requests completed.
    pub completed: u64,
    /// Requests failed or not sent.
    pub failed: u64,
    /// The smallest stall the stream could see, ns.
    pub resolution_ns: f64,
    /// The stream's latency p99 (from each request's due time), µs: what its stalls did to
    /// the tail.
    pub p99_us: f64,
}

struct Watch {
    estimator: StallEstimator,
    latency: Recorder,
    completed: u64,
    failed: u64,
    outstanding: usize,
}

/// Sends `op(i)` at `rate_ops` for `duration` and returns the stalls its completions show.
pub async fn watch<F, Fut>(rate_ops: f64, duration: Duration, op: F) -> StallsSeen
where
    F: Fn(u64) -> Fut,
    Fut: Future<Output = Result<(), ClientError>> + Send + 'static,
{
    let watch = Arc::new(Mutex::new(Watch {
        estimator: StallEstimator::new(Nanos::ZERO),
        latency: Recorder::new(),
        completed: 0,
        failed: 0,
        outstanding: 0,
    }));
    let started = Instant::now();
    let rate_ops = rate_ops.max(1.0);
    let mut i = 0u64;
    loop {
        let due = started + Duration::from_secs_f64(i as f64 / rate_ops);
        if due - started >= duration {
            break;
        }
        wait_until(due).await;
        {
            let mut w = watch.lock();
            if w.outstanding >= OUTSTANDING_MAX {
                w.failed += 1;
                i += 1;
                continue;
            }
            w.outstanding += 1;
        }
        let request = op(i);
        let watch = Arc::clone(&watch);
        tokio::spawn(async move {
            let outcome = request.await;
            let now = Instant::now();
            let mut w = watch.lock();
            w.outstanding -= 1;
            match outcome {
                Ok(()) => {
                    w.completed += 1;
                    let at = Nanos(now.duration_since(started).as_nanos() as u64);
                    let latency = now.duration_since(due);
                    w.latency.record(latency);
                    w.estimator.on_completion(at, latency.as_nanos() as u64, rate_ops);
                }
                Err(_) => w.failed += 1,
            }
        });
        i += 1;
    }
    let drain_deadline = Instant::now() + DRAIN_TIMEOUT;
    while watch.lock().outstanding > 0 && Instant::now() < drain_deadline {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let end = Nanos(started.elapsed().as_nanos() as u64);
    let mut w = watch.lock();
    StallsSeen {
        rate_hz: w.estimator.rate_hz(end),
        mean_ns: w.estimator.mean_length_ns(),
        length_cv: w.estimator.length_cv(),
        completed: w.completed,
        failed: w.failed + w.outstanding as u64,
        resolution_ns: GAP_COMPLETIONS * 1e9 / rate_ops,
        p99_us: w.latency.summary().p99_us,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_pause_of_the_served_requests_is_seen_as_a_stall() {
        // Requests complete at once, except that every request sent in [100, 130) ms
        // waits until 130 ms: one 30 ms stall in 300 ms. Those and the ones sent while
        // the backlog drains complete in the order they were sent (a tenth of their
        // spacing apart), as a stalled node serves them.
        let started = Instant::now();
        let (stall, drained) = (
            (Duration::from_millis(100), Duration::from_millis(130)),
            Duration::from_millis(140),
        );
        let seen = watch(5_000.0, Duration::from_millis(300), move |_| async move {
            let now = started.elapsed();
            if now >= stall.0 && now < drained {
                let until = stall.1 + (now - stall.0) / 10;
                tokio::time::sleep(until.saturating_sub(now)).await;
            }
            Ok(())
        })
        .await;
        assert!(seen.completed > 1_000, "{seen:?}");
        // The time stalled, rate × span × mean length, holds the 30 ms (a loaded test
        // machine may add stalls of its own; without the pause a quiet one shows none).
        let stalled_ns = seen.rate_hz * 0.3 * seen.mean_ns;
        assert!(stalled_ns >= 25e6, "{stalled_ns} ns stalled: {seen:?}");
        assert_eq!(seen.resolution_ns, 4e6);
    }
}
