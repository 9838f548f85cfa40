//! Driving: releasing a saturating backlog of requests through a policy's limiter for a
//! while, timing each from its due time, and recording what completes.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use ferry_client::{Adaptive, Backend};
use ferry_control::{FnId, Nanos, PolicyState, Schedule};
use ferry_experiment::model::Workload;

use super::progress::show_progress;
use super::recording::Recording;
use super::requests::{choose, Requests};
use crate::latency::LatencySummary;
use crate::loadgen::wait_until;
use crate::BenchError;

/// Requests in flight at most. A policy's limiter keeps far fewer outstanding when it
/// works; past this the node is hopelessly behind and further admissions are dropped
/// (counted) rather than piling up tasks.
pub const MAX_OUTSTANDING: usize = 16_384;

/// Most a request may fall behind its due time before it is given up and counted as
/// dropped: 20× the default 5 ms SLO, so every request the R loop could still bring within
/// the SLO is sent and timed from its due time (no coordinated omission), while a stall
/// (a collapse, a starved generator) cannot queue unbounded work.
pub const SCHEDULE_LAG_MAX: Nanos = Nanos::from_ms(100);

/// Longest the generator waits for the next due time before re-reading the rate: one R-loop
/// period, so a raised rate applies to the pending gap within a period.
const RATE_RECHECK: Duration = Duration::from_millis(5);

/// Longest wait for outstanding requests after the run.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// One stretch of load through a policy, as recorded.
pub struct Drive {
    /// The policy's state when admissions stopped.
    pub final_state: PolicyState,
    /// Per-interval bins and the steady-window recorder.
    pub(super) recording: Recording,
    /// Admissions dropped (too many outstanding).
    pub dropped: u64,
    /// Wall time including the drain.
    pub wall: Duration,
}

impl Drive {
    /// Latency of the requests of the steady window: those served, and those refused
    /// counted at twice the SLO.
    pub fn steady_latency(&self) -> LatencySummary {
        self.recording.steady.summary()
    }

    /// Successful requests completed in the steady window.
    pub fn steady_completed(&self) -> u64 {
        self.recording.steady.count() - self.recording.steady_refused
    }

    /// Requests refused in the steady window (their wait for a slot would have broken the
    /// SLO).
    pub fn steady_refused(&self) -> u64 {
        self.recording.steady_refused
    }

    /// Failed requests over the drive.
    pub fn errors(&self) -> u64 {
        self.recording.errors.values().sum()
    }
}

/// What to drive.
pub struct DriveSpec<'a> {
    /// The workload.
    pub workload: &'a Workload,
    /// Graph nodes to pick start nodes from.
    pub graph_nodes: u64,
    /// Seed of the request stream.
    pub seed: u64,
    /// How long to admit requests.
    pub duration: Duration,
    /// Completions from here on count into the steady window.
    pub steady_start: Duration,
    /// Timeline resolution.
    pub interval: Duration,
    /// Quantile the timeline reports.
    pub quantile: f64,
    /// The latency objective: a request refused for want of a slot in the policy's window
    /// counts as twice it (over it, as it should) in every quantile reported.
    pub slo: Duration,
    /// Draw the progress line.
    pub progress: bool,
}

/// Releases a saturating backlog of `spec.workload` through `adaptive`'s limiter for
/// `spec.duration`, then waits for the stragglers.
pub async fn drive<B: Backend>(adaptive: &Arc<Adaptive<B>>, spec: &DriveSpec<'_>) -> Result<Drive, BenchError> {
    let requests = Requests::new(spec.workload)?;
    let recording = Arc::new(Mutex::new(Recording::new(spec.interval, spec.steady_start, spec.slo)));
    let start = Instant::now();
    let sampler = tokio::spawn(sample_states(
        Arc::clone(adaptive),
        Arc::clone(&recording),
        start,
        spec.interval,
    ));
    let progress = tokio::spawn(show_progress(
        Arc::clone(adaptive),
        Arc::clone(&recording),
        start,
        spec.duration,
        spec.progress && std::io::stderr().is_terminal(),
    ));

    let outstanding = Arc::new(AtomicUsize::new(0));
    let mut dropped = 0u64;
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed ^ REQUEST_STREAM_SALT);
    let deadline = start + spec.duration;
    // The saturating backlog's send times: one interval at the current R after the previous
    // one, however late the generator gets to it (when local execution starves this CPU,
    // that lateness is latency the policy must see).
    let mut schedule = Schedule::new(adaptive.now(), adaptive.admission_rate_ops(), SCHEDULE_LAG_MAX)
        .map_err(|err| BenchError::Invalid(format!("send schedule: {err}")))?;
    loop {
        schedule.set_rate(adaptive.admission_rate_ops());
        let now = adaptive.now();
        let Some(next) = schedule.take(now) else {
            let at = adaptive.instant_at(schedule.next_due());
            if at >= deadline {
                break;
            }
            wait_until(at.min(Instant::now() + RATE_RECHECK)).await;
            continue;
        };
        dropped += next.skipped;
        let due = adaptive.instant_at(next.at).max(start);
        if due >= deadline {
            break;
        }
        if outstanding.load(Ordering::Relaxed) >= MAX_OUTSTANDING {
            dropped += 1;
            continue;
        }
        let t = Nanos((due - start).as_nanos() as u64);
        let index = choose(spec.workload, t, &mut rng);
        let (function, args) = requests.make(spec, index, &mut rng);
        outstanding.fetch_add(1, Ordering::Relaxed);
        let adaptive = Arc::clone(adaptive);
        let recording = Arc::clone(&recording);
        let outstanding = Arc::clone(&outstanding);
        tokio::spawn(async move {
            let outcome = adaptive
                .invoke_admitted_as(due, FnId(index as u32), function, args)
                .await;
            let done_at = start.elapsed();
            recording.lock().note(done_at, &outcome);
            outstanding.fetch_sub(1, Ordering::Relaxed);
        });
    }
    let final_state = adaptive.state();
    let drain_deadline = Instant::now() + DRAIN_TIMEOUT;
    while outstanding.load(Ordering::Relaxed) > 0 && Instant::now() < drain_deadline {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    sampler.abort();
    progress.abort();
    if spec.progress && std::io::stderr().is_terminal() {
        eprintln!();
    }
    let wall = start.elapsed();
    // The spawned requests are finished (or abandoned after the drain timeout); take what
    // they recorded.
    let recording = std::mem::replace(
        &mut *recording.lock(),
        Recording::new(spec.interval, spec.steady_start, spec.slo),
    );
    Ok(Drive {
        final_state,
        recording,
        dropped,
        wall,
    })
}

/// Salt of the request stream's generator, so it is independent of the policy's.
const REQUEST_STREAM_SALT: u64 = 0x5eed_0f10_ad00;

/// Records the policy's X and R at the end of every timeline interval.
async fn sample_states<B: Backend>(
    adaptive: Arc<Adaptive<B>>,
    recording: Arc<Mutex<Recording>>,
    start: Instant,
    interval: Duration,
) {
    let mut next = start + interval;
    loop {
        tokio::time::sleep_until(tokio::time::Instant::from_std(next)).await;
        let state = adaptive.state();
        let at = next - start - Duration::from_nanos(1);
        let mut recording = recording.lock();
        let bin = recording.bin(at);
        bin.rpc_fraction = Some(state.rpc_fraction);
        bin.rate_ops = Some(state.rate_ops);
        next += interval;
    }
}
