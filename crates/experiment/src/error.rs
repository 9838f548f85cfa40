//! Typed errors of the simulator: bad scenarios are rejected before anything runs.

use ferry_control::ControlError;
use thiserror::Error;

use ferry_spec::SpecError;

/// Why a scenario cannot be simulated.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ExperimentError {
    /// A flag value could not be parsed.
    #[error("{flag}: {source}")]
    Spec {
        /// The flag or field the value came from (e.g. `--duration`).
        flag: String,
        /// What was wrong with it.
        #[source]
        source: SpecError,
    },
    /// A core count is zero, negative or beyond the supported maximum.
    #[error("{which} must be an integer in [1, {max}], got {value}")]
    Cores {
        /// `--app-cores` or `--storage-cores`.
        which: &'static str,
        /// The rejected value.
        value: i64,
        /// The largest supported count.
        max: u32,
    },
    /// A model parameter lies outside its supported range.
    #[error("{name} must be in {range}, got {value}")]
    OutOfRange {
        /// Parameter name as the user knows it.
        name: String,
        /// Human-readable allowed range.
        range: &'static str,
        /// The rejected value, as text.
        value: String,
    },
    /// More placement groups than a group needs nodes for.
    #[error(
        "--placement-groups {groups}: each group needs a storage node and an app node of its own, \
         and there are {storage_nodes} storage nodes and {app_nodes} app nodes"
    )]
    Groups {
        /// The rejected group count.
        groups: u32,
        /// Storage nodes of the cluster.
        storage_nodes: u32,
        /// App nodes of the cluster.
        app_nodes: u32,
    },
    /// An elastic range no group can run.
    #[error(
        "--elastic {min}..{max} is infeasible: it needs 1 <= MIN <= MAX <= {limit}, the app cores \
         of a placement group (app nodes x app cores, divided among the groups)"
    )]
    Elastic {
        /// The lower end given.
        min: u32,
        /// The upper end given.
        max: u32,
        /// The app cores of the smallest group.
        limit: u32,
    },
    /// No rate can meet the SLO: even an idle system is slower.
    #[error(
        "SLO p{quantile_pct} {slo_us:.1}us is below the no-load latency of this workload \
         ({no_load_us:.1}us {detail}); no request rate can meet it"
    )]
    SloBelowNoLoad {
        /// The quantile, in percent (99 for p99).
        quantile_pct: f64,
        /// The SLO.
        slo_us: f64,
        /// The best achievable unloaded latency for the policy.
        no_load_us: f64,
        /// Which path that is.
        detail: String,
    },
    /// The controller rejected its configuration.
    #[error("policy configuration: {0}")]
    Control(#[from] ControlError),
    /// The requested operation does not apply to this scenario.
    #[error("{0}")]
    Unsupported(String),
}
