//! What every listening ferry process (storage node, gateway, compute node) shares:
//!
//! - [`accept`]: the one accept loop of every listener, and its back-off;
//! - [`config_frame`]: the config group's frames on a stream, for its members and its
//!   clients alike;
//! - [`connections`]: a process's connections — counters, authenticated seats and the
//!   pre-authentication bound — shared by its listeners;
//! - [`gate`]: the gate replies pass before they are written (the write-ahead log's);
//! - [`door`]: the ferry protocol's front door (framing, hello, seats, per-connection
//!   bounds, the outbox) in front of a process's [`door::Door`];
//! - [`preauth`]: connections that have not said hello yet, bounded in number and time;
//! - [`metrics`]: `GET /metrics` in the Prometheus text format on a listener of its own;
//! - [`histogram`]: request counts and latency histograms by operation and status;
//! - [`resp`]: a RESP listener (connections, pipelining, AUTH and the session commands) in
//!   front of a process's [`resp::RespService`]; [`resp_multi`]: a connection's MULTI,
//!   EXEC and WATCH; [`resp_blocking`]: the blocking pops;
//!   [`resp_clients`]: CLIENT over the tenant's own connections; [`resp_sign_in`]: who a
//!   connection signs in as;
//! - [`place`]: where a new connection's task runs (the shared I/O runtime, or a core's);
//! - [`signal`]: waiting for SIGINT or SIGTERM;
//! - [`tls`]: TLS for all three listeners and for the links between processes (rustls,
//!   ring), with optional or required client certificates.

pub mod accept;
pub mod config_frame;
pub mod connections;
pub mod door;
pub mod gate;
pub mod histogram;
pub mod metrics;
pub mod place;
pub mod preauth;
pub mod resp;
pub mod resp_blocking;
pub mod resp_clients;
pub mod resp_multi;
pub mod resp_sign_in;
pub mod signal;
pub mod tls;
