//! ferry's deterministic discrete-event simulator: app and storage nodes with cores and
//! queues, a network with RTT and bandwidth, a workload of storage functions, and the very
//! same `ferry-control` policies the real client runs, fed with virtual time.
//!
//! Layout:
//! - [`model`]: the cluster (cores, RTT, bandwidth, per-message CPU costs) and the workload
//!   (functions, mixes, phases), with their closed-form capacities and unloaded latencies.
//! - [`spec`]: parsers for the duration and workload flag values (shared with
//!   `ferry bench`), with typed errors; [`tasks`]: Pyxis' randomly sampled task mixes;
//!   [`phases`]: mixes that change over time.
//! - [`scaling`]: elastic compute's inputs: the demand over time and the app-core range.
//! - [`policy_spec`]: the policy flag value and the factory that builds the policy.
//! - [`engine`]: the event loop (event heap, FCFS multi-core nodes, seeded random streams).
//! - [`scenario`]: one policy run end to end, and its report (timeline, summary, JSON, CSV).
//! - [`sweep`]: fixed-X runs and the bisection of the rate to the SLO: the upper bound,
//!   measurable on any span of a run (a policy run's steady window).
//! - [`suite`]: `ferry sim-suite`: scenarios drawn from a documented space, each policy run
//!   judged against its same-window bound.
//! - [`parallel`]: independent runs spread over threads, results in a fixed order.
//! - [`queueing`]: closed-form M/M/1, M/D/1 and M/M/c results for validation.
//! - [`plot`]: a dependency-free SVG line/scatter chart writer.
//! - [`error`]: typed scenario errors.

pub mod engine;
pub mod error;
pub mod model;
pub mod parallel;
pub mod phases;
pub mod plot;
pub mod policy_spec;
pub mod queueing;
pub mod scaling;
pub mod scenario;
pub mod spec;
pub mod suite;
pub mod sweep;
pub mod tasks;

pub use engine::Arrivals;
pub use error::SimError;
pub use model::{ClusterConfig, CostModel, FunctionSpec, Workload};
pub use scenario::{Scenario, SimReport, Slo, PAPER_SLO};
pub use spec::{parse_duration, parse_policy, parse_workload, PolicySpec, SpecError};
pub use sweep::{SweepConfig, SweepReport};
