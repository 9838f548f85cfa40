//! What a run reports: the simulator's fields (goodput, latency, X and R over time,
//! convergence), the CPU each side used, and the overheads calibrated before the run.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use ferry_experiment::SteadyState;

use ferry_experiment::timeline::{converge_ms, TimelineRow, CONVERGE_TOLERANCE};

use super::drive::{Drive, DriveSpec};
use crate::latency::LatencySummary;

/// What `ferry bench` measured. Field names and meanings follow `ferry sim`'s report.
#[derive(Clone, Debug, Serialize)]
pub struct PlacementReport {
    /// The run and its steady state, as every placement report gives them.
    #[serde(flatten)]
    pub steady: SteadyState,
    /// Steady-state latency percentiles in full.
    pub latency: LatencySummary,
    /// Requests that succeeded over the whole run.
    pub completed: u64,
    /// Failed requests by kind over the whole run.
    pub errors: BTreeMap<String, u64>,
    /// Admissions dropped because too many requests were outstanding.
    pub dropped: u64,
    /// Share of successful requests that ran remotely, over the whole run.
    pub remote_share: f64,
    /// Storage-node CPU used, in CPUs (1.0 = one CPU busy), over the run.
    pub storage_cpus_used: Option<f64>,
    /// App-side CPU used, in CPUs, over the run: the time this process's app-side threads
    /// spent on a CPU (the load generator, which polls for the next admission when idle, the
    /// client and locally executed functions), not its keep-warm threads nor the threads of
    /// a storage node embedded in it (`ferry demo`). Pinned, it cannot exceed the number of
    /// `client_cpus` (see [`cpus_used`]).
    pub app_cpus_used: Option<f64>,
    /// App-side CPU spent inside locally executed functions, in CPUs.
    pub app_function_cpus_used: f64,
    /// CPUs the node is pinned to: a child node's or an embedded one's; empty when it was
    /// not pinned or was started elsewhere (`--server`, Redis).
    pub server_cpus: Vec<usize>,
    /// CPUs the app side is pinned to; empty when not pinned.
    pub client_cpus: Vec<usize>,
    /// Emulated-work calibration shared by both sides (iterations per ms).
    pub spin_iters_per_ms: u64,
    /// CPU per request beyond what its invocation reports, measured before the run and
    /// added to the costs the policy learns from (see `ferry_client::Overhead`), ns.
    pub overhead: OverheadReport,
    /// Invocations the node handed back (ASFP), per second over the run.
    pub pushbacks_per_s: Option<f64>,
    /// Share of the run's requests that were pushed back.
    pub pushback_share: Option<f64>,
    /// Node CPU spent on attempts it then pushed back, in CPUs (wasted work).
    pub pushback_wasted_storage_cpus: Option<f64>,
    /// YCSB-T only: whether the total of all balances was unchanged at the end (every
    /// acknowledged transfer applied exactly once, nothing else changed a balance).
    pub invariant_ok: Option<bool>,
    /// Per-interval timeline.
    pub timeline: Vec<TimelineRow>,
}

/// [`ferry_client::Overhead`] as the report writes it.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct OverheadReport {
    /// App-side CPU per local request beyond what it reported, ns.
    pub local_app_ns: f64,
    /// Storage-node CPU per local request beyond what it reported, ns.
    pub local_storage_ns: f64,
    /// App-side CPU per remote request beyond what it reported, ns.
    pub remote_app_ns: f64,
    /// Storage-node CPU per remote request beyond what it reported, ns.
    pub remote_storage_ns: f64,
}

/// CPUs a side used over `wall`, from readings of its CPU time taken before and after
/// (1.0 = one CPU busy throughout); `None` without both readings or without wall time. What
/// it includes is what the readings include: the app side's are its own threads' time
/// ([`crate::testbed::Testbed::app_cpu_time`]), so pinned to N CPUs it cannot exceed N
/// (but for /proc's tick rounding over a short run). A reading that went backwards (a
/// thread counted in it exited) counts as nothing used.
pub fn cpus_used(before: Option<Duration>, after: Option<Duration>, wall: Duration) -> Option<f64> {
    match (before, after) {
        (Some(before), Some(after)) if !wall.is_zero() => {
            Some(after.saturating_sub(before).as_secs_f64() / wall.as_secs_f64())
        }
        _ => None,
    }
}

/// The steady-state summary and timeline of a drive.
pub struct Summary {
    /// Per-interval rows.
    pub timeline: Vec<TimelineRow>,
    /// Start of the steady window.
    pub steady_start_ms: f64,
    /// Steady goodput.
    pub throughput_ops: f64,
    /// Steady p99.
    pub p99_us: Option<f64>,
    /// Steady median.
    pub latency_us_p50: Option<f64>,
    /// Steady percentiles.
    pub latency: LatencySummary,
    /// Mean X over the steady window.
    pub rpc_fraction_mean: f64,
    /// Convergence time.
    pub converge_ms: Option<f64>,
}

/// Builds the timeline and the steady-state summary of `drive`.
pub fn summarize(spec: &DriveSpec<'_>, drive: &Drive) -> Summary {
    let recording = &drive.recording;
    let final_state = drive.final_state;
    let interval_ms = spec.interval.as_secs_f64() * 1e3;
    let measured_bins = (spec.duration.as_nanos() as u64).div_ceil(recording.interval_ns) as usize;
    let timeline: Vec<TimelineRow> = (0..measured_bins)
        .map(|i| {
            let bin = recording.bins.get(i);
            let completed = bin.map_or(0, |b| b.completed);
            TimelineRow {
                t_ms: (i + 1) as f64 * interval_ms,
                throughput_ops: completed as f64 / spec.interval.as_secs_f64(),
                p99_us: bin.and_then(|b| b.sketch.quantile(spec.quantile)).map(|ns| ns / 1e3),
                latency_us_mean: bin
                    .filter(|b| b.completed > 0)
                    .map(|b| b.latency_sum_ns / b.completed as f64 / 1e3),
                rpc_fraction: bin.and_then(|b| b.rpc_fraction).unwrap_or(final_state.rpc_fraction),
                rate_ops: bin.and_then(|b| b.rate_ops).unwrap_or(final_state.rate_ops),
                remote_share: bin
                    .filter(|b| b.completed > 0)
                    .map(|b| b.remote as f64 / b.completed as f64),
                // One client process: nothing scales the app side.
                app_cores: None,
            }
        })
        .collect();
    let steady_start_ms = spec.steady_start.as_secs_f64() * 1e3;
    let steady_rows: Vec<&TimelineRow> = timeline.iter().filter(|row| row.t_ms > steady_start_ms).collect();
    let steady_seconds = spec.duration.saturating_sub(spec.steady_start).as_secs_f64().max(1e-9);
    let throughput_ops = drive.steady_completed() as f64 / steady_seconds;
    let rpc_fraction_mean = if steady_rows.is_empty() {
        final_state.rpc_fraction
    } else {
        steady_rows.iter().map(|row| row.rpc_fraction).sum::<f64>() / steady_rows.len() as f64
    };
    // Smooth over ~50 ms, like the simulator.
    let smooth = ((50.0 / interval_ms).round() as usize).max(1);
    let latency = recording.steady.summary();
    let has_latency = latency.count > 0;
    Summary {
        converge_ms: converge_ms(&timeline, 0.0, throughput_ops, CONVERGE_TOLERANCE, smooth),
        timeline,
        steady_start_ms,
        throughput_ops,
        p99_us: has_latency.then_some(latency.p99_us),
        latency_us_p50: has_latency.then_some(latency.p50_us),
        latency,
        rpc_fraction_mean,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpus_used_is_cpu_time_over_wall_time() {
        let s = Duration::from_secs;
        assert_eq!(cpus_used(Some(s(1)), Some(s(3)), s(2)), Some(1.0));
        assert_eq!(cpus_used(Some(s(1)), Some(s(2)), s(4)), Some(0.25));
        assert_eq!(cpus_used(None, Some(s(2)), s(4)), None);
        assert_eq!(cpus_used(Some(s(1)), None, s(4)), None);
        assert_eq!(cpus_used(Some(s(1)), Some(s(2)), Duration::ZERO), None);
        assert_eq!(
            cpus_used(Some(s(3)), Some(s(2)), s(1)),
            Some(0.0),
            "a reading that went backwards is no CPU used, not a panic"
        );
    }
}
