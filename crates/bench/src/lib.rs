//! Measuring ferry: load generation, benchmark orchestration and their reports. Pinning
//! and child processes are `ferry-os`'s, data sets `ferry-datasets`' (the production
//! commands use those two without this crate).
//!
//! Layout:
//! - [`latency`]: HDR-histogram latency recording and medians over runs.
//! - [`loadgen`]: closed-loop (saturation) and open-loop (fixed rate, no coordinated
//!   omission) load generation over any async operation.
//! - [`testbed`]: the shared set-up — pinning, calibration, the node (a pinned child, an
//!   embedded one or an external one), app runtime.
//! - [`embedded`]: a storage node inside this process, its threads on their own CPUs.
//! - [`accounting`]: which side a thread's CPU time counts for (app, embedded node,
//!   keep-warm), so each side's figure is its own threads'.
//! - [`placement`]: `ferry bench` — a policy placing and admitting a workload on real
//!   processes, with a timeline and the simulator's report fields (request synthesis,
//!   driving, calibration and the report each in their own file).
//! - [`redis`]: the Redis peer — a RESP client and `traverse` as a Redis Function (FCALL)
//!   and as client logic over pipelined GETs, both as a `Backend` for the same generator.
//! - [`report`]: timelines as CSV, HTML pages with SVG charts.
//! - [`sweep`]: `ferry sweep` — the measured upper bound over fixed X.
//! - [`demo`]: `ferry demo` — an embedded node and every policy on one box.
//! - [`fairness`]: `ferry fairness` — tenants' CPU shares on a multi-core node, Jain's
//!   index, and work conservation when one tenant stops.
//! - [`zipf`]: YCSB's Zipfian key generator.
//! - [`workload_data`]: what a workload's functions read, loaded before a run
//!   ([`workload_data::load_for_workload`]).
//! - [`kv`]: `ferry bench-kv`, the node's raw get and invoke speed.
//! - [`calibrate`]: `ferry calibrate`, this machine's costs in the simulator's terms, as
//!   a profile `ferry sim --profile` runs as.

pub mod accounting;
pub mod calibrate;
pub mod demo;
pub mod embedded;
pub mod fairness;
pub mod kv;
pub mod latency;
pub mod loadgen;
pub mod placement;
pub mod redis;
pub mod report;
pub mod sweep;
pub mod testbed;
pub mod workload_data;
pub mod zipf;

use thiserror::Error;

/// Why a benchmark could not run.
#[derive(Debug, Error)]
pub enum BenchError {
    /// Pinning failed (e.g. a CPU that does not exist).
    #[error(transparent)]
    Affinity(#[from] ferry_os::AffinityError),
    /// The client failed.
    #[error(transparent)]
    Client(#[from] ferry_client::ClientError),
    /// A child node did not come up.
    #[error(transparent)]
    Child(#[from] ferry_os::ChildError),
    /// A data set could not be built, loaded or checked.
    #[error(transparent)]
    Dataset(#[from] ferry_datasets::DatasetError),
    /// The storage node could not be started or stopped.
    #[error("storage node: {0}")]
    Server(String),
    /// Local I/O or runtime failure.
    #[error("{0}")]
    Io(String),
    /// A benchmark setting is invalid.
    #[error("invalid benchmark setting: {0}")]
    Invalid(String),
    /// A calibration measurement failed (requests failed, CPU time unreadable).
    #[error("calibration: {0}")]
    Calibration(String),
}
