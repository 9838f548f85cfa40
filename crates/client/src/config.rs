//! How a client reaches and identifies itself to a storage node, with its defaults.

use ferry_proto::TenantId;
use std::sync::Arc;
use std::time::Duration;

use ferry_func::Registry;

/// Default request timeout: far above any healthy round trip (≈ 0.1 ms here), short enough
/// that a dead node is reported while a person is still watching.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Default time to establish a connection and say hello.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How a client reaches and identifies itself to a storage node.
#[derive(Clone)]
pub struct ClientConfig {
    /// `host:port` of the storage node.
    pub addr: String,
    /// Tenant id.
    pub tenant: TenantId,
    /// Tenant token.
    pub token: String,
    /// Connections to spread requests over (each is pipelined).
    pub connections: usize,
    /// Longest wait for any one answer.
    pub request_timeout: Duration,
    /// Longest wait to connect and say hello.
    pub connect_timeout: Duration,
    /// Functions available for local execution (must match the node's).
    pub registry: Registry,
    /// Record what every invocation read and installed in [`crate::Invocation::trace`]
    /// (remote ones ask the node for it), for checking a history. Off by default: it
    /// costs a copy of the read and write sets per invocation.
    pub trace: bool,
    /// Speak TLS to the node with this configuration (the roots trusted, the certificate
    /// presented if asked; `ferry_net::tls::ClientTls` builds one from PEM files), the
    /// node's name taken from the host part of `addr`; `None` speaks plain TCP.
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

impl ClientConfig {
    /// One connection, default timeouts, the built-in functions.
    pub fn new(addr: impl Into<String>, tenant: TenantId, token: impl Into<String>) -> ClientConfig {
        ClientConfig {
            addr: addr.into(),
            tenant,
            token: token.into(),
            connections: 1,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            registry: ferry_lua::registry(),
            trace: false,
            tls: None,
        }
    }
}
