//! A fixed offered rate whose pacer sleeps: every [`TICK`] it sends the requests that fell
//! due since the last tick, so between ticks the app thread idles and its CPU time is the
//! requests' (plus a tick's wake-up, which the idle baseline measures and takes off).
//! `loadgen::open_loop` paces exactly by yielding in a loop, which keeps the app CPU fully
//! busy whatever the load, so CPU time per request means nothing there.
//!
//! The requests of a tick leave together (R/1000 of them at R per second), as a loaded
//! client's requests batch in its connection: the costs measured are those of a node and a
//! client under load, not of one request at a time.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::time::MissedTickBehavior;

use ferry_client::ClientError;

/// The pacer's period: tokio's timer resolution, so a tick is never rounded up.
pub const TICK: Duration = Duration::from_millis(1);

/// Requests in flight at most; beyond it the run is not at the rate it claims, and the
/// excess is counted as failed.
pub const OUTSTANDING_MAX: usize = 4_096;

/// How long the end of a run waits for its last requests.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// What a paced run did.
#[derive(Clone, Debug, Default)]
pub struct Paced {
    /// Requests that succeeded.
    pub completed: u64,
    /// Requests that failed, or were not sent because too many were in flight.
    pub failed: u64,
    /// The first failure, for the error message.
    pub first_error: Option<String>,
    /// Wall time of the run, from the first tick to the last completion.
    pub wall: Duration,
}

#[derive(Default)]
struct Tally {
    completed: u64,
    failed: u64,
    first_error: Option<String>,
    outstanding: usize,
}

/// Offers `op(i)` at `rate_ops` per second for `duration` (see the module docs); a rate of
/// 0 sends nothing and measures the pacer alone.
pub async fn paced<F, Fut>(rate_ops: f64, duration: Duration, op: F) -> Paced
where
    F: Fn(u64) -> Fut,
    Fut: Future<Output = Result<(), ClientError>> + Send + 'static,
{
    let tally = Arc::new(Mutex::new(Tally::default()));
    let started = Instant::now();
    let mut ticker = tokio::time::interval(TICK);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut sent = 0u64;
    loop {
        ticker.tick().await;
        let elapsed = started.elapsed();
        if elapsed >= duration {
            break;
        }
        let due = (elapsed.as_secs_f64() * rate_ops) as u64;
        while sent < due {
            let mut t = tally.lock();
            if t.outstanding >= OUTSTANDING_MAX {
                t.failed += 1;
                t.first_error
                    .get_or_insert_with(|| format!("more than {OUTSTANDING_MAX} requests in flight"));
            } else {
                t.outstanding += 1;
                drop(t);
                let request = op(sent);
                let tally = Arc::clone(&tally);
                tokio::spawn(async move {
                    let outcome = request.await;
                    let mut t = tally.lock();
                    t.outstanding -= 1;
                    match outcome {
                        Ok(()) => t.completed += 1,
                        Err(err) => {
                            t.failed += 1;
                            t.first_error.get_or_insert_with(|| err.to_string());
                        }
                    }
                });
            }
            sent += 1;
        }
    }
    let drain_deadline = Instant::now() + DRAIN_TIMEOUT;
    while tally.lock().outstanding > 0 && Instant::now() < drain_deadline {
        tokio::time::sleep(TICK).await;
    }
    let wall = started.elapsed();
    let t = tally.lock();
    Paced {
        completed: t.completed,
        failed: t.failed + t.outstanding as u64,
        first_error: t.first_error.clone(),
        wall,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_paced_run_offers_its_rate_and_counts_failures() {
        let run = paced(5_000.0, Duration::from_millis(200), |i| async move {
            if i % 100 == 0 {
                Err(ClientError::Timeout(Duration::from_secs(1)))
            } else {
                Ok(())
            }
        })
        .await;
        // ~1000 due; generous bounds for a loaded machine.
        let total = run.completed + run.failed;
        assert!((800..=1_050).contains(&total), "{total}");
        assert!(run.failed >= 8 && run.first_error.is_some(), "{run:?}");
        let idle = paced(0.0, Duration::from_millis(20), |_| async { Ok(()) }).await;
        assert_eq!(idle.completed + idle.failed, 0);
        assert!(idle.wall >= Duration::from_millis(20));
    }
}
