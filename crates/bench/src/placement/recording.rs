//! What a drive records while it runs: per-interval bins for the timeline, the steady
//! window's latencies, and the run's totals.

use std::collections::BTreeMap;
use std::time::Duration;

use ferry_client::{ClientError, Invocation, Placement};
use ferry_control::LatencySketch;

use crate::latency::Recorder;
use crate::loadgen::error_kind;

/// One timeline interval's completions.
#[derive(Default)]
pub(super) struct Bin {
    /// Requests that succeeded in the interval.
    pub(super) completed: u64,
    /// Of those, the ones that ran remotely.
    pub(super) remote: u64,
    /// Their latencies, for the interval's quantile.
    pub(super) sketch: LatencySketch,
    /// Sum of their latencies, for the interval's mean.
    pub(super) latency_sum_ns: f64,
    /// Policy state sampled at the end of the interval.
    pub(super) rpc_fraction: Option<f64>,
    /// The policy's R sampled at the end of the interval.
    pub(super) rate_ops: Option<f64>,
}

/// Everything recorded while the run goes on.
pub(super) struct Recording {
    /// Timeline resolution (at least 1 ns).
    pub(super) interval_ns: u64,
    /// Completions from here on count into `steady`.
    pub(super) steady_start: Duration,
    /// Per-interval completions, indexed by completion time.
    pub(super) bins: Vec<Bin>,
    /// Latencies of the steady window (refusals at [`Recording::refused_latency`]).
    pub(super) steady: Recorder,
    /// Requests of the steady window refused for want of a slot.
    pub(super) steady_refused: u64,
    /// What a refused request counts as in the quantiles: twice the SLO, over it.
    refused_latency: Duration,
    /// Requests that succeeded over the whole run.
    pub(super) completed: u64,
    /// Of those, the ones that ran remotely.
    pub(super) remote: u64,
    /// Failed requests by kind.
    pub(super) errors: BTreeMap<String, u64>,
    /// App CPU the locally run functions reported.
    pub(super) app_function_ns: u64,
}

impl Recording {
    /// An empty recording of `interval` bins, under an SLO of `slo`.
    pub(super) fn new(interval: Duration, steady_start: Duration, slo: Duration) -> Recording {
        Recording {
            interval_ns: (interval.as_nanos() as u64).max(1),
            steady_start,
            bins: Vec::new(),
            steady: Recorder::new(),
            steady_refused: 0,
            refused_latency: 2 * slo,
            completed: 0,
            remote: 0,
            errors: BTreeMap::new(),
            app_function_ns: 0,
        }
    }

    /// The bin of the interval `at` falls into (created if needed).
    pub(super) fn bin(&mut self, at: Duration) -> &mut Bin {
        let index = (at.as_nanos() as u64 / self.interval_ns) as usize;
        if self.bins.len() <= index {
            self.bins.resize_with(index + 1, Bin::default);
        }
        &mut self.bins[index]
    }

    /// Records one request's outcome, completed `done_at` into the run.
    pub(super) fn note(&mut self, done_at: Duration, outcome: &Result<Invocation, ClientError>) {
        match outcome {
            Ok(invocation) => {
                self.completed += 1;
                self.app_function_ns += invocation.cost.app_cpu_ns;
                let remote = invocation.placement == Placement::Remote;
                self.remote += u64::from(remote);
                if done_at >= self.steady_start {
                    self.steady.record(invocation.latency);
                }
                let latency_ns = invocation.latency.as_nanos() as f64;
                let bin = self.bin(done_at);
                bin.completed += 1;
                bin.remote += u64::from(remote);
                bin.sketch.record(latency_ns);
                bin.latency_sum_ns += latency_ns;
            }
            Err(err) => {
                *self.errors.entry(error_kind(err)).or_default() += 1;
                if matches!(err, ClientError::Refused { .. }) {
                    // Refusing is never a way to look fast: the request missed the SLO.
                    if done_at >= self.steady_start {
                        self.steady.record(self.refused_latency);
                        self.steady_refused += 1;
                    }
                    let latency_ns = self.refused_latency.as_nanos() as f64;
                    self.bin(done_at).sketch.record(latency_ns);
                }
            }
        }
    }
}
