//! What an experiment is, shared by the simulator, the real benchmarks and (soon) the
//! gateway: the deployment and workload model, the flag grammar that builds them, the
//! policy factory, timelines and plots. No I/O, no clock: everything here is a value.
//!
//! Layout:
//! - [`model`]: the cluster (nodes, cores, links, per-message CPU costs, placement groups,
//!   elastic range) and the workload (functions, mixes, phases, demand), with their
//!   closed-form capacities and unloaded latencies.
//! - [`spec`]: parsers for the duration and workload flag values, with typed errors;
//!   [`tasks`]: Pyxis' randomly sampled task mixes; [`phases`]: mixes that change over time;
//!   [`scaling`]: the demand over time and the elastic range.
//! - [`policy_spec`]: the policy flag value and the factory that builds the policy.
//! - [`profile`]: a machine's measured costs (`ferry calibrate`), loaded and checked, and
//!   applied to a cluster so the simulator runs as that machine.
//! - [`timeline`]: a run's timeline rows, their CSV and convergence.
//! - [`plot`]: a dependency-free SVG line/scatter chart writer.
//! - [`error`]: typed errors of a bad experiment.

pub mod error;
pub mod model;
pub mod phases;
pub mod plot;
pub mod policy_spec;
pub mod profile;
pub mod scaling;
pub mod social;
pub mod spec;
pub mod tasks;
pub mod timeline;

pub use error::ExperimentError;
pub use model::{ClusterModel, CostModel, FunctionSpec, Workload};
pub use spec::{parse_duration, parse_policy, parse_workload, PolicySpec, SpecError};
pub use timeline::TimelineRow;
