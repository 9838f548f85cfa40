//! Typed errors of the simulator: bad scenarios are rejected before anything runs.

use ferry_control::ConfigError;
use thiserror::Error;

use crate::spec::SpecError;

/// Why a scenario cannot be simulated.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SimError {
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
    Control(#[from] ConfigError),
    /// The requested operation does not apply to this scenario.
    #[error("{0}")]
    Unsupported(String),
}
