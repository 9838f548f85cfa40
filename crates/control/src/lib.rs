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
//! - [`extremum`]: windowed max and min filters (BBR's `minmax`).
//! - [`limiter`]: the token-bucket rate limiter and the send schedule driven by R.
//! - [`arbiter`]: Bernoulli(X) choice of local or remote per request.
//! - [`rate`]: the R loop and the window on requests in flight, shared by every policy:
//!   a capacity remembered as a rate, a margin, a proportional cut, a gain cycle.
//! - [`placement`]: placement from measured costs and CPU: cost profiles, capture ratios,
//!   Pyxis' load model, X stepping toward balanced utilisation (`balance`), and Pyxis'
//!   Algorithm 1 (`pyxis`).
//! - [`policy`]: the [`Policy`] trait every policy implements and the values it is
//!   driven with; [`fixed`]: the static policies (a fixed X with the R loop, or at a
//!   fixed rate).
//! - [`kayak`]: Kayak's dual loop (R-X and X-R orderings) as a `Policy`, the baseline.
//! - [`elastic`]: Pyxis' elastic-compute loop, sizing the app side to the demand.
//! - [`slo`]: SLOs per function on one policy (Pyxis' slowdown SLO).
//! - [`fairness`]: Jain's index of how evenly tenants share a resource.
//! - [`error`]: typed configuration errors.

pub mod arbiter;
pub mod elastic;
pub mod error;
pub mod extremum;
pub mod fairness;
pub mod fixed;
pub mod kayak;
pub mod limiter;
pub mod placement;
pub mod policy;
pub mod quantile;
pub mod rate;
pub mod slo;
pub mod time;

pub use arbiter::Arbiter;
pub use elastic::{Elastic, ElasticInput};
pub use error::ControlError;
pub use fairness::jain_index;
pub use fixed::{FixedFraction, FixedRate};
pub use kayak::{Kayak, KayakConfig, LoopOrder};
pub use limiter::{Due, Schedule, TokenBucket};
pub use placement::balance::{Balance, BalanceConfig};
pub use placement::pyxis::{Pyxis, PyxisConfig};
pub use policy::{Busy, Completion, Costs, FnId, Placement, Policy, PolicyState};
pub use quantile::{LatencySketch, QuantileWindow};
pub use rate::{Admission, RateLoop, RateLoopConfig};
pub use time::Nanos;
