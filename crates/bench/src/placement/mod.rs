//! `ferry bench`: adaptive placement on real processes.
//!
//! The storage node runs as a child pinned to its CPUs, the app side (this process: load
//! generator and local execution) on its own. The workload is the simulator's
//! ([`ferry_experiment::model::Workload`], parsed from the same flag values), each function run as
//! the built-in `traverse` with its depth and compute. A saturating backlog is released
//! through the policy's rate limiter: a request is due the moment the limiter admits it, and
//! its latency is measured from then. The report has the simulator's fields and meanings.
//!
//! Layout: `mod.rs` holds the settings and their check; `requests` turns the workload into
//! requests (storage function and arguments); `drive` releases them through the policy,
//! `recording` keeps what completes and `progress` draws the terminal line; `calibrate`
//! measures the per-request overheads before a run; `report` is what a run reports and the
//! summary of a drive; `run` puts these together against a ferry node or Redis. The data
//! sets a workload reads are loaded by `crate::workload_data`.

use std::time::Duration;

use ferry_experiment::model::Workload;
use ferry_func::builtins::traverse;
use ferry_spec::PolicySpec;

use crate::testbed::TestbedConfig;
use crate::BenchError;

mod calibrate;
mod drive;
mod progress;
mod recording;
mod report;
mod requests;
mod run;

pub use drive::{drive, Drive, DriveSpec, MAX_OUTSTANDING, SCHEDULE_LAG_MAX};
pub use report::{cpus_used, summarize, OverheadReport, PlacementReport, Summary};
pub use run::{run, run_on, run_redis};

/// Default number of graph nodes loaded: large enough that accesses spread over the table,
/// small enough to load in a second or two.
pub const DEFAULT_GRAPH_NODES: u64 = 100_000;

/// Settings of one `ferry bench` run.
#[derive(Clone, Debug)]
pub struct PlacementBenchConfig {
    /// Where the two sides run.
    pub testbed: TestbedConfig,
    /// What to run.
    pub workload: Workload,
    /// Who places and admits.
    pub policy: PolicySpec,
    /// Latency objective.
    pub slo: Duration,
    /// Quantile the objective constrains.
    pub quantile: f64,
    /// Length of the run.
    pub duration: Duration,
    /// Seed of the policy and of the request stream.
    pub seed: u64,
    /// Graph nodes loaded for `traverse`.
    pub graph_nodes: u64,
    /// Timeline resolution.
    pub timeline_interval: Duration,
    /// Draw a progress line on stderr (when it is a terminal).
    pub progress: bool,
}

/// Checks the settings before anything starts.
pub fn validate(config: &PlacementBenchConfig) -> Result<(), BenchError> {
    if config.duration.is_zero() || config.timeline_interval.is_zero() {
        return Err(BenchError::Invalid(
            "duration and timeline interval must be positive".into(),
        ));
    }
    if config.slo.is_zero() {
        return Err(BenchError::Invalid("the SLO must be positive".into()));
    }
    if config.graph_nodes == 0 {
        return Err(BenchError::Invalid("the graph needs at least one node".into()));
    }
    for function in &config.workload.functions {
        if function.compute.0 > ferry_func::builtins::MAX_COMPUTE_NS_PER_ACCESS {
            return Err(BenchError::Invalid(format!(
                "{}: compute of {} ns per access exceeds the built-in limit of {} ns",
                function.name,
                function.compute.0,
                ferry_func::builtins::MAX_COMPUTE_NS_PER_ACCESS
            )));
        }
        if function.accesses > traverse::MAX_DEPTH {
            return Err(BenchError::Invalid(format!(
                "{}: depth above {}",
                function.name,
                traverse::MAX_DEPTH
            )));
        }
    }
    Ok(())
}
