//! What a run reached, the same for the simulator (`ferry sim`, the suite's scenarios) and
//! the real system (`ferry bench`, `ferry demo`): which run, its SLO, and the steady
//! state's goodput, latency, X and R. Each report embeds it (flattened in its JSON), so a
//! simulated and a measured run are read and compared field for field.

use serde::Serialize;

/// A run's steady state, as every report of a placement run gives it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SteadyState {
    /// Policy name.
    pub policy: String,
    /// Workload spec.
    pub workload: String,
    /// Seed of the run.
    pub seed: u64,
    /// The SLO latency.
    pub slo_p99_us: f64,
    /// The SLO quantile.
    pub slo_quantile: f64,
    /// Length of the run (simulated or measured).
    pub duration_ms: f64,
    /// Where the steady-state summary starts.
    pub steady_start_ms: f64,
    /// Steady-state goodput (successful completions per second).
    pub throughput_ops: f64,
    /// Steady-state p99 latency.
    pub p99_us: Option<f64>,
    /// Steady-state median latency.
    pub latency_us_p50: Option<f64>,
    /// X at the end of the run.
    pub rpc_fraction: f64,
    /// Mean X over the steady state.
    pub rpc_fraction_mean: f64,
    /// R at the end of the run.
    pub rate_ops: f64,
    /// Time after which throughput stays within 5 % of its steady value (the simulator:
    /// the latest over its phases, each from its own start); null if it never does.
    pub converge_ms: Option<f64>,
}
