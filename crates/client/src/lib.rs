//! The client runtime of an app node: talks to storage nodes and runs storage functions
//! either remotely (ship compute) or locally (ship data).
//!
//! Layout:
//! - [`adaptive`]: [`Adaptive`] — placement by a control-plane policy, admission at its
//!   rate, loops ticked on a timer.
//! - [`client`]: [`Client`] and [`ClientConfig`] — a pool of multiplexed, pipelined
//!   connections and the operations get/put/delete/multiget/commit/stats/invoke.
//! - [`cluster`]: [`ClusterClient`] — one client per node of a sharded cluster, each
//!   data operation routed to the node serving its keys.
//! - [`config_group`]: [`config_group::ConfigClient`] — watching the cluster's
//!   configuration in the config group, proposing changes, heartbeats.
//! - [`gateway`]: a client of a gateway — the admission rate R the gateway reports on
//!   every answer, and [`FollowGateway`], the policy that admits at it (one rate loop per
//!   tenant, the gateway's), with [`ViaGateway`] asking for each run's costs.
//! - `gate`: the window on requests in flight and the refusal of a request whose wait
//!   would break the SLO.
//! - `conn`: one connection: request ids, the outbox its writer task flushes, the reader
//!   task that routes answers to waiters in any order.
//! - `local`: local execution — the network-backed `Ctx`, OCC commit, bounded retries.
//! - `route`: where a local invocation's requests go (one node, or each key's node).
//! - TLS: [`ClientConfig::tls`] turns it on; the dial is `ferry_net::tls`'s, like every
//!   link's.
//! - [`error`]: the client's error type, [`ClientError`].

pub mod adaptive;
pub mod client;
pub mod cluster;
pub mod config_group;
mod conn;
pub mod error;
pub mod gate;
pub mod gateway;
mod local;
mod route;

use std::time::{Duration, Instant};

use bytes::Bytes;

pub use adaptive::{Adaptive, Backend, BackendFuture, BusyMeter, Overhead};
pub use client::{Client, ClientConfig, Versioned};
pub use cluster::ClusterClient;
pub use conn::MAX_PENDING_PER_CONNECTION;
pub use error::ClientError;
pub use ferry_proto::InvokeTrace;
pub use gateway::{FollowGateway, GatewayRate, ViaGateway};
pub use local::MAX_LOCAL_ATTEMPTS;

/// Where an invocation runs: the control plane's decision, shared by every layer.
pub use ferry_control::Placement;

/// What an invocation cost, as measured by the client and reported by the node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InvokeCost {
    /// Storage-node CPU time, summed over every request the invocation made.
    pub storage_cpu_ns: u64,
    /// Object bytes the node returned.
    pub bytes_returned: u64,
    /// Round trips to the node.
    pub round_trips: u32,
    /// Attempts (more than one after OCC conflicts).
    pub attempts: u32,
    /// App-node time spent running the function itself (local execution only).
    pub app_cpu_ns: u64,
}

impl From<ferry_proto::InvokeCosts> for InvokeCost {
    /// The costs a compute node or gateway reported for a run it made.
    fn from(record: ferry_proto::InvokeCosts) -> InvokeCost {
        InvokeCost {
            storage_cpu_ns: record.storage_cpu_ns,
            bytes_returned: record.bytes_returned,
            round_trips: record.round_trips,
            attempts: record.attempts,
            app_cpu_ns: record.app_cpu_ns,
        }
    }
}

impl InvokeCost {
    /// Adds the network costs of `other` (attempts and app CPU are tracked separately).
    pub(crate) fn absorb(&mut self, other: &InvokeCost) {
        self.storage_cpu_ns += other.storage_cpu_ns;
        self.bytes_returned += other.bytes_returned;
        self.round_trips += other.round_trips;
    }
}

/// A finished invocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invocation {
    /// The function's result bytes.
    pub result: Bytes,
    /// Where it ran.
    pub placement: Placement,
    /// End-to-end latency seen by the caller.
    pub latency: Duration,
    /// What it cost.
    pub cost: InvokeCost,
    /// The storage node started it and handed it back (ASFP pushback); it finished here.
    pub pushed_back: bool,
    /// What it read and installed, when [`ClientConfig::trace`] is on.
    pub trace: Option<InvokeTrace>,
}

impl Invocation {
    /// Its costs and where it ran as the costs record a compute node or gateway answers
    /// with (docs/PROTOCOL.md, "Costs").
    pub fn costs_record(&self) -> ferry_proto::InvokeCosts {
        ferry_proto::InvokeCosts {
            app_cpu_ns: self.cost.app_cpu_ns,
            storage_cpu_ns: self.cost.storage_cpu_ns,
            bytes_returned: self.cost.bytes_returned,
            round_trips: self.cost.round_trips,
            attempts: self.cost.attempts,
            shipped_data: self.placement == Placement::Local,
            pushed_back: self.pushed_back,
        }
    }
}

/// Calibrates emulated compute for this process with the real clock (see
/// `ferry_func::work`); returns iterations per millisecond.
pub fn calibrate_spin() -> u64 {
    ferry_func::work::calibrate(|work| {
        let started = Instant::now();
        work();
        started.elapsed().as_nanos() as u64
    })
}
