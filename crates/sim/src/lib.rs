//! ferry's deterministic discrete-event simulator: app and storage nodes with cores and
//! queues, a network with RTT and bandwidth, a workload of storage functions, and the very
//! same `ferry-control` policies the real client runs, fed with virtual time.
//!
//! The experiment's definitions (cluster and workload model, flag grammar, policy
//! factory, timelines, plots) live in `ferry-experiment`, beneath both this crate and the
//! real benchmarks. Here:
//! - [`engine`]: the event loop (event heap, FCFS multi-core nodes, queued links, placement
//!   groups, elastic compute, seeded random streams).
//! - [`scenario`]: one policy run end to end, and its report (timeline, summary, JSON, CSV).
//! - [`sweep`]: fixed-X runs and the bisection of the rate to the SLO: the upper bound,
//!   measurable on any span of a run (a policy run's steady window).
//! - [`suite`]: `ferry sim-suite`: scenarios drawn from a documented space, each policy run
//!   judged against its same-window bound.
//! - [`plan`]: `ferry plan`: the cheapest cluster that serves a demand within a p99 SLO
//!   with ferry's placement, searched by cost over simulated candidates.
//! - [`judge`]: whether a window met its SLO, pooled or per function.
//! - [`parallel`]: independent runs spread over threads, results in a fixed order.
//! - [`queueing`]: closed-form M/M/1, M/D/1 and M/M/c results for validation.

pub mod engine;
pub mod judge;
pub mod parallel;
pub mod plan;
pub mod queueing;
pub mod scenario;
pub mod suite;
pub mod sweep;

// The experiment's definitions, under the paths this crate's modules name them by.
use ferry_experiment::{error, model, spec};

pub use engine::Arrivals;
pub use scenario::{Scenario, SimReport, Slo, PAPER_SLO};
pub use sweep::{SweepConfig, SweepReport};
