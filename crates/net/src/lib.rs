//! What every listening ferry process (storage node, gateway, compute node) shares:
//!
//! - [`preauth`]: connections that have not said hello yet, bounded in number and time;
//! - [`metrics`]: `GET /metrics` in the Prometheus text format on a listener of its own;
//! - [`histogram`]: request counts and latency histograms by operation and status;
//! - [`resp`]: a RESP listener (connections, pipelining, AUTH and the session commands) in
//!   front of a process's [`resp::RespService`];
//! - [`signal`]: waiting for SIGINT or SIGTERM.

pub mod histogram;
pub mod metrics;
pub mod preauth;
pub mod resp;
pub mod signal;
