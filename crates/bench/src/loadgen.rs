//! Load generation: closed loops (saturation) and open loops (a fixed offered rate, with
//! latency measured from each request's intended send time, so a stalled server cannot
//! hide its queueing behind the generator: no coordinated omission).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::Serialize;

use ferry_client::ClientError;

use crate::latency::{LatencySummary, Recorder};

/// Requests an open loop keeps outstanding at most. Past it the server is hopelessly
/// behind; further sends are counted as dropped instead of piling up tasks and memory.
pub const MAX_OUTSTANDING: usize = 65_536;

/// How long the end of a run waits for outstanding requests before giving up on them.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Gap to the next send above which the pacer sleeps instead of yielding, and how early
/// before the send that sleep is set to end: the tokio timer rounds a sleep up to the next
/// millisecond tick, so ending it only half this early made sends at low rates ~1 ms late,
/// and the R loop read that lateness as latency.
const PACER_SLEEP_ABOVE: Duration = Duration::from_millis(2);

/// What one load run measured.
#[derive(Clone, Debug, Serialize)]
pub struct RunResult {
    /// Requests that succeeded.
    pub completed: u64,
    /// Failed requests by error kind.
    pub errors: BTreeMap<String, u64>,
    /// Sends skipped because too many were outstanding (open loop only).
    pub dropped: u64,
    /// Wall time of the run.
    pub elapsed_s: f64,
    /// Successful requests per second.
    pub throughput_ops: f64,
    /// Latency of successful requests.
    pub latency: LatencySummary,
}

/// The name a failure is counted under: the status for node errors, else the error kind.
pub fn error_kind(err: &ClientError) -> String {
    match err {
        ClientError::Server { status, .. } => status.name().to_string(),
        ClientError::Connect { .. } => "connect".into(),
        ClientError::Disconnected(_) => "disconnected".into(),
        ClientError::Timeout(_) => "timeout".into(),
        ClientError::CommitOutcomeUnknown(_) => "commit_outcome_unknown".into(),
        ClientError::Protocol(_) => "protocol".into(),
        ClientError::Throttled { .. } => "throttled".into(),
        ClientError::Refused { .. } => "refused".into(),
        ClientError::Encode(_) | ClientError::Invalid(_) => "invalid".into(),
    }
}

#[derive(Default)]
struct Tally {
    recorder: Recorder,
    completed: u64,
    errors: BTreeMap<String, u64>,
}

impl Tally {
    fn note(&mut self, outcome: Result<(), ClientError>, latency: Duration) {
        match outcome {
            Ok(()) => {
                self.completed += 1;
                self.recorder.record(latency);
            }
            Err(err) => *self.errors.entry(error_kind(&err)).or_default() += 1,
        }
    }

    fn finish(self, elapsed: Duration, dropped: u64) -> RunResult {
        let elapsed_s = elapsed.as_secs_f64().max(1e-9);
        RunResult {
            completed: self.completed,
            errors: self.errors,
            dropped,
            elapsed_s,
            throughput_ops: self.completed as f64 / elapsed_s,
            latency: self.recorder.summary(),
        }
    }
}

/// Saturation: `concurrency` loops each send a request, wait for it, and send the next,
/// for `duration`. `op(i)` performs request number `i`.
pub async fn closed_loop<F, Fut>(concurrency: usize, duration: Duration, op: F) -> RunResult
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), ClientError>> + Send + 'static,
{
    let op = Arc::new(op);
    let counter = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let deadline = started + duration;
    let loops: Vec<_> = (0..concurrency.max(1))
        .map(|_| {
            let op = Arc::clone(&op);
            let counter = Arc::clone(&counter);
            tokio::spawn(async move {
                let mut tally = Tally::default();
                while Instant::now() < deadline {
                    let i = counter.fetch_add(1, Ordering::Relaxed);
                    let sent = Instant::now();
                    let outcome = op(i).await;
                    tally.note(outcome, sent.elapsed());
                }
                tally
            })
        })
        .collect();
    let mut total = Tally::default();
    for handle in loops {
        if let Ok(tally) = handle.await {
            total.recorder.merge(&tally.recorder);
            total.completed += tally.completed;
            for (kind, count) in tally.errors {
                *total.errors.entry(kind).or_default() += count;
            }
        }
    }
    total.finish(started.elapsed(), 0)
}

/// A yield that came back within this long found nothing else to run: the pacer spun
/// through it idle (a yield with nothing ready, and the runtime's periodic poll of its
/// I/O driver, take well under it; a task that ran in between almost always takes more).
const SPIN_IDLE_MAX: Duration = Duration::from_micros(5);

/// Time the pacer spent spinning with nothing else to run, over the process's life, ns.
static SPIN_IDLE_NS: AtomicU64 = AtomicU64::new(0);

/// CPU time the pacer has spun idle so far: busy on the CPU clock, idle in fact (the
/// app side's busy CPU is its threads' time less this, as the keep-warm threads' spin is
/// left out).
pub fn spin_idle_time() -> Duration {
    Duration::from_nanos(SPIN_IDLE_NS.load(Ordering::Relaxed))
}

/// Returns at `at`: sleeps on the (millisecond) timer while far from it, then yields to the
/// runtime (which keeps serving responses and local executions) until it has passed,
/// counting the yields that found nothing to run as idle ([`spin_idle_time`]).
pub async fn wait_until(at: Instant) {
    loop {
        let now = Instant::now();
        if now >= at {
            return;
        }
        if at - now > PACER_SLEEP_ABOVE {
            tokio::time::sleep(at - now - PACER_SLEEP_ABOVE).await;
        } else {
            tokio::task::yield_now().await;
            let spun = now.elapsed();
            if spun < SPIN_IDLE_MAX {
                SPIN_IDLE_NS.fetch_add(spun.as_nanos() as u64, Ordering::Relaxed);
            }
        }
    }
}

/// A fixed offered rate: request `i` is due at `start + i / rate_ops` and its latency is
/// measured from that moment, whenever it was actually sent.
pub async fn open_loop<F, Fut>(rate_ops: f64, duration: Duration, op: F) -> RunResult
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), ClientError>> + Send + 'static,
{
    let op = Arc::new(op);
    let tally = Arc::new(Mutex::new(Tally::default()));
    let outstanding = Arc::new(AtomicUsize::new(0));
    let mut dropped = 0u64;
    let interval_s = 1.0 / rate_ops.max(1e-3);
    let started = Instant::now();
    let mut i = 0u64;
    loop {
        let due = started + Duration::from_secs_f64(i as f64 * interval_s);
        if due.duration_since(started) >= duration {
            break;
        }
        wait_until(due).await;
        if outstanding.load(Ordering::Relaxed) >= MAX_OUTSTANDING {
            dropped += 1;
        } else {
            outstanding.fetch_add(1, Ordering::Relaxed);
            let op = Arc::clone(&op);
            let tally = Arc::clone(&tally);
            let outstanding = Arc::clone(&outstanding);
            tokio::spawn(async move {
                let outcome = op(i).await;
                tally.lock().note(outcome, due.elapsed());
                outstanding.fetch_sub(1, Ordering::Relaxed);
            });
        }
        i += 1;
    }
    let drain_deadline = Instant::now() + DRAIN_TIMEOUT;
    while outstanding.load(Ordering::Relaxed) > 0 && Instant::now() < drain_deadline {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let elapsed = started.elapsed();
    let tally = std::mem::take(&mut *tally.lock());
    tally.finish(elapsed, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn open_loop_offers_the_rate_it_is_asked_for() {
        let result = open_loop(2000.0, Duration::from_millis(300), |_| async { Ok(()) }).await;
        // 600 requests are due; generous bounds for a loaded machine.
        assert!((550..=650).contains(&result.completed), "{}", result.completed);
        assert_eq!(result.dropped, 0);
    }

    #[tokio::test]
    async fn closed_loop_counts_errors_by_kind() {
        let result = closed_loop(2, Duration::from_millis(50), |i| async move {
            tokio::task::yield_now().await;
            if i % 2 == 0 {
                Ok(())
            } else {
                Err(ClientError::Timeout(Duration::from_secs(1)))
            }
        })
        .await;
        assert!(result.completed > 0);
        assert!(result.errors["timeout"] > 0);
    }
}
