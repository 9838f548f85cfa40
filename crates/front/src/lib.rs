//! The processes in front of ferry's storage nodes, both speaking the ferry protocol:
//!
//! - [`gateway`]: Pyxis' scheduler — rate limiter and placement policy per tenant; ship
//!   compute to the storage node serving an invocation's routing key, or ship data to a
//!   compute node; data operations routed to their keys' nodes.
//! - [`compute`]: a compute node — invocations run over the cluster's data with an elastic
//!   number of active workers ([`workers`]).
//! - `listener`: either process behind the ferry protocol's front door (`ferry_net::door`,
//!   which frames, says hello and bounds connections for every ferry process);
//!   `handle`: starting and stopping a process, its metrics endpoint, TLS on its listeners
//!   ([`FrontConfig::tls`]) and on its links to the nodes behind it
//!   ([`FrontConfig::link_tls`]).
//! - [`forward`]: the client runtime's outcomes turned back into protocol answers.
//! - `resp`: `--resp` on the gateway: Redis commands sent on as the invocations they are
//!   (FCALL placed by the policy).

pub mod compute;
mod compute_set;
pub mod config;
pub mod forward;
pub mod gateway;
mod handle;
mod listener;
mod resp;
pub mod workers;

use std::net::SocketAddr;

use thiserror::Error;

pub use compute::{start_compute, ComputeConfig};
pub use config::{AdoptedListeners, FrontConfig, FrontTenant};
pub use ferry_net::door::MAX_INFLIGHT_PER_CONNECTION;
pub use gateway::{start_gateway, GatewayConfig, PolicyFactory};
pub use handle::FrontHandle;
pub use listener::{Service, ServiceFuture};

/// Why a gateway or compute node could not start.
#[derive(Debug, Error)]
pub enum FrontError {
    /// The configuration is invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// Address asked for.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// A node behind it could not be reached.
    #[error("cannot reach the nodes behind it: {0}")]
    Backend(String),
    /// The runtime could not be started.
    #[error("cannot start: {0}")]
    Start(std::io::Error),
    /// A TLS certificate, key or CA file cannot be used.
    #[error("TLS: {0}")]
    Tls(#[from] ferry_net::tls::TlsError),
}
