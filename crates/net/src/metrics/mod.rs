//! What a process tells Prometheus and its orchestrator, on a listener of its own
//! (`--metrics ADDR`, so scraping never competes with a data port's limits):
//! `GET /metrics` (OpenMetrics text), `GET /healthz` (the process answers) and
//! `GET /readyz` (it is ready for traffic: recovered, caught up, configured).
//!
//! - [`sample`]: a counter's or gauge's value with its scope and type, as the process
//!   reports it; the same values answer the protocol's `stats` request.
//! - [`families`]: the samples and the latency histograms encoded as typed metric
//!   families by the Prometheus client library.
//! - [`http`]: the three endpoints on an HTTP library, over TLS when the process speaks it.

pub mod families;
pub mod http;
pub mod sample;

pub use families::exposition;
pub use http::{serve, Endpoints, Readiness};
pub use sample::{Kind, Sample, Scope};
