//! What an experiment is, shared by the simulator and the real benchmarks: the deployment
//! and workload model, the workload flag that builds them, timelines and plots (the flag
//! grammar and the policy factory the production processes need too are `ferry-spec`'s).
//! No I/O, no clock: everything here is a value.
//!
//! Layout:
//! - [`model`]: the cluster (nodes, cores, links, per-message CPU costs, placement groups,
//!   elastic range) and the workload (functions, mixes, phases, demand), with their
//!   closed-form capacities and unloaded latencies.
//! - [`spec`]: the workload flag value's parser (its mixes' elements in [`mix`]), with
//!   `ferry_spec`'s typed errors;
//!   [`tasks`]: Pyxis' randomly sampled task mixes; [`phases`]: mixes that change over time;
//!   [`scaling`]: the demand over time and the elastic range.
//! - [`profile`]: a machine's measured costs (`ferry calibrate`), loaded and checked, and
//!   applied to a cluster so the simulator runs as that machine.
//! - [`steady`]: [`SteadyState`], what a run reached, embedded in the simulator's and the
//!   real system's reports alike.
//! - [`timeline`]: a run's timeline rows, their CSV and convergence.
//! - [`plot`]: a dependency-free SVG line/scatter chart writer.
//! - [`error`]: typed errors of a bad experiment.

pub mod error;
pub mod mix;
pub mod model;
pub mod phases;
pub mod plot;
pub mod profile;
pub mod scaling;
pub mod social;
pub mod spec;
pub mod steady;
pub mod tasks;
pub mod timeline;

pub use error::ExperimentError;
pub use model::{ClusterModel, CostModel, FunctionSpec, Workload};
pub use spec::parse_workload;
pub use steady::SteadyState;
pub use timeline::TimelineRow;
