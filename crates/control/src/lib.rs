//! ferry's control plane: placement policies and rate control as pure state machines.
//!
//! Nothing here performs I/O, reads a clock or spawns a task. A driver — the discrete-event
//! simulator (`ferry-sim`) or the real client runtime — passes the time in as [`Nanos`],
//! feeds completions, calls `tick` when the policy's `next_tick` comes, and applies the
//! decisions. Randomness comes from seeded ChaCha generators, so a run is reproducible.
//!
//! Layout:
//! - [`time`]: `Nanos`, the caller-supplied time.
//! - [`quantile`]: DDSketch-based latency sketch and sliding time window of sketches.
//! - [`limiter`]: the token-bucket rate limiter driven by the R loop's rate.
//! - [`arbiter`]: Bernoulli(X) choice of local or remote per request.
//! - [`rate_loop`]: the R loop (safeguarded Newton step on a p90 proxy, whose setpoint a
//!   tail-budget integrator calibrates so the pooled p99 meets the SLO).
//! - [`fraction_loop`]: the X loop (coarse scan, then antithetic-probe gradient ascent on
//!   R(X)) and Algorithm I's X step.
//! - [`policy`]: the [`Policy`] trait every policy implements, and the static policies.
//! - [`kayak`]: Kayak's dual loop (R-X and X-R orderings) as a `Policy`.
//! - [`fairness`]: Jain's index of how evenly tenants share a resource.
//! - [`error`]: typed configuration errors.

pub mod arbiter;
pub mod error;
pub mod fairness;
pub mod fraction_loop;
pub mod kayak;
pub mod limiter;
pub mod policy;
pub mod quantile;
pub mod rate_loop;
pub mod time;

pub use arbiter::Arbiter;
pub use error::ConfigError;
pub use fairness::jain_index;
pub use fraction_loop::{FractionLoop, FractionLoopConfig, LatencyFractionLoop};
pub use kayak::{Kayak, KayakConfig, LoopOrder};
pub use limiter::{Due, Schedule, TokenBucket};
pub use policy::{Completion, Costs, FixedFraction, FixedRate, FnId, Placement, Policy, PolicyState};
pub use quantile::{LatencySketch, QuantileWindow};
pub use rate_loop::{RateLoop, RateLoopConfig};
pub use time::Nanos;
