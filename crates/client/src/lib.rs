//! The client runtime of an app node: talks to storage nodes and runs storage functions
//! either remotely (ship compute) or locally (ship data).
//!
//! Layout:
//! - [`adaptive`]: [`Adaptive`] — placement by a control-plane policy, admission at its
//!   rate, loops ticked on a timer.
//! - [`config`]: [`ClientConfig`] — how a client reaches and identifies itself to a node.
//! - [`client`]: [`Client`] — a pool of multiplexed, pipelined connections and the data
//!   operations get/put/delete/multiget/commit/stats.
//! - [`cluster`]: [`ClusterClient`] — one client per node of a sharded cluster, each
//!   data operation routed to the node serving its keys.
//! - [`config_group`]: [`config_group::ConfigClient`] — watching the cluster's
//!   configuration in the config group, proposing changes, heartbeats.
//! - [`following`]: [`following::Following`] — a process's view of the config group (the
//!   configuration and its routing map, kept current), what nodes and gateways follow.
//! - [`gateway`]: a client of a gateway — the admission rate R the gateway reports on
//!   every answer, and [`FollowGateway`], the policy that admits at it (one rate loop per
//!   tenant, the gateway's), with [`ViaGateway`] asking for each run's costs.
//! - `gate`: the window on requests in flight and the refusal of a request whose wait
//!   would break the SLO.
//! - `conn`: one connection: request ids, the outbox its writer task flushes, the reader
//!   task that routes answers to waiters in any order.
//! - `invoke`: running a function on a [`Client`]'s node or a [`ClusterClient`]'s cluster,
//!   remotely or here; `gateway_rate`: the rate a gateway reports on every answer.
//! - `local`: local execution — the network-backed `Ctx`, OCC commit, bounded retries.
//! - `route`: where a local invocation's requests go (one node, or each key's node).
//! - TLS: [`ClientConfig::tls`] turns it on; the dial is `ferry_net::tls`'s, like every
//!   link's.
//! - `invocation`: a finished invocation ([`Invocation`]) and what it cost
//!   ([`InvokeCost`]).
//! - [`error`]: the client's error type, [`ClientError`].

pub mod adaptive;
pub mod client;
pub mod cluster;
pub mod config;
pub mod config_group;
mod conn;
pub mod error;
pub mod following;
pub mod gate;
pub mod gateway;
mod gateway_rate;
mod invocation;
mod invoke;
mod local;
mod route;

use std::time::Instant;

pub use adaptive::{Adaptive, Backend, BackendFuture, BusyMeter, Overhead};
pub use client::{Client, Versioned};
pub use cluster::ClusterClient;
pub use config::ClientConfig;
pub use conn::MAX_PENDING_PER_CONNECTION;
pub use error::ClientError;
pub use ferry_proto::InvokeTrace;
pub use gateway::{FollowGateway, ViaGateway};
pub use gateway_rate::GatewayRate;
pub use invocation::{Invocation, InvokeCost};
pub use local::MAX_LOCAL_ATTEMPTS;

/// Where an invocation runs: the control plane's decision, shared by every layer.
pub use ferry_control::Placement;

/// Calibrates emulated compute for this process with the real clock (see
/// `ferry_func::work`); returns iterations per millisecond.
pub fn calibrate_spin() -> u64 {
    ferry_func::work::calibrate(|work| {
        let started = Instant::now();
        work();
        started.elapsed().as_nanos() as u64
    })
}
