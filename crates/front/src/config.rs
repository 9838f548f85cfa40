//! What a gateway or compute node listens on and whom it lets in.

use ferry_proto::TenantId;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

use ferry_net::preauth::{DEFAULT_HELLO_TIMEOUT, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_UNAUTHENTICATED};

use crate::FrontError;

/// Most tenants one process serves (each holds connections to every node behind it).
pub const MAX_TENANTS: usize = 1024;

/// Longest tenant token accepted.
pub const MAX_TOKEN_BYTES: usize = 1024;

/// A tenant: its id and the token it proves itself with. The same pair authenticates the
/// process to the nodes behind it, so clients and processes share one tenant table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrontTenant {
    /// Tenant id, as sent in every frame header.
    pub id: TenantId,
    /// Secret of the tenant.
    pub token: String,
}

/// Listeners handed to the process already bound (a supervisor's, held across restarts so
/// that a restarted gateway or compute node serves the very same sockets): each is served
/// instead of binding its address.
#[derive(Clone, Debug, Default)]
pub struct AdoptedListeners {
    /// The ferry protocol's (instead of [`FrontConfig::listen`]).
    pub ferry: Option<Arc<TcpListener>>,
    /// RESP's (instead of [`FrontConfig::resp_listen`]).
    pub resp: Option<Arc<TcpListener>>,
}

/// The listening side of a gateway or compute node, and how it reaches the nodes behind it.
#[derive(Clone, Debug)]
pub struct FrontConfig {
    /// Address of the ferry protocol listener (port 0: any free port).
    pub listen: SocketAddr,
    /// Address of `GET /metrics`, if served.
    pub metrics_listen: Option<SocketAddr>,
    /// Address of the RESP listener (Redis clients), if served.
    pub resp_listen: Option<SocketAddr>,
    /// Tenants let in.
    pub tenants: Vec<FrontTenant>,
    /// Most simultaneous authenticated connections.
    pub max_connections: usize,
    /// Longest a connection may take to authenticate before it is closed.
    pub hello_timeout: Duration,
    /// Most connections waiting to authenticate at once (a new one evicts the oldest).
    pub max_unauthenticated: usize,
    /// Threads of the process's runtime.
    pub threads: usize,
    /// TLS on every listener (ferry protocol, RESP, metrics); `None` serves plain TCP.
    pub tls: Option<ferry_net::tls::ServerTls>,
    /// TLS on the links to the nodes behind it (storage nodes; a gateway's compute nodes
    /// too); `None` dials plain TCP.
    pub link_tls: Option<ferry_net::tls::ClientTls>,
    /// Listeners already bound, served instead of binding `listen` / `resp_listen`.
    pub adopted: AdoptedListeners,
}

impl FrontConfig {
    /// Defaults for everything but the address and the tenants.
    pub fn new(listen: SocketAddr, tenants: Vec<FrontTenant>) -> FrontConfig {
        FrontConfig {
            listen,
            metrics_listen: None,
            resp_listen: None,
            tenants,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            hello_timeout: DEFAULT_HELLO_TIMEOUT,
            max_unauthenticated: DEFAULT_MAX_UNAUTHENTICATED,
            threads: 1,
            tls: None,
            link_tls: None,
            adopted: AdoptedListeners::default(),
        }
    }

    /// Refuses configurations that cannot work.
    pub fn validate(&self) -> Result<(), FrontError> {
        let invalid = |why: String| Err(FrontError::Config(why));
        if self.tenants.is_empty() {
            return invalid("at least one tenant is needed".into());
        }
        if self.tenants.len() > MAX_TENANTS {
            return invalid(format!("at most {MAX_TENANTS} tenants"));
        }
        for (i, tenant) in self.tenants.iter().enumerate() {
            if tenant.token.is_empty() || tenant.token.len() > MAX_TOKEN_BYTES {
                return invalid(format!(
                    "tenant {}: the token must be 1 to {MAX_TOKEN_BYTES} bytes",
                    tenant.id
                ));
            }
            if self.tenants[..i].iter().any(|other| other.id == tenant.id) {
                return invalid(format!("tenant {} is given twice", tenant.id));
            }
        }
        if self.max_connections == 0 || self.max_unauthenticated == 0 {
            return invalid("max_connections and max_unauthenticated must be at least 1".into());
        }
        if self.hello_timeout.is_zero() {
            return invalid("hello_timeout must be positive".into());
        }
        if self.threads == 0 || self.threads > 1024 {
            return invalid("threads must be 1 to 1024".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(id: u32, token: &str) -> FrontTenant {
        FrontTenant {
            id: TenantId(id),
            token: token.into(),
        }
    }

    #[test]
    fn bad_configurations_are_refused() {
        let addr = "127.0.0.1:0".parse().unwrap();
        assert!(FrontConfig::new(addr, vec![tenant(1, "ferry")]).validate().is_ok());
        assert!(FrontConfig::new(addr, vec![]).validate().is_err());
        assert!(FrontConfig::new(addr, vec![tenant(1, "")]).validate().is_err());
        assert!(FrontConfig::new(addr, vec![tenant(1, "a"), tenant(1, "b")])
            .validate()
            .is_err());
        let mut config = FrontConfig::new(addr, vec![tenant(1, "ferry")]);
        config.max_unauthenticated = 0;
        assert!(config.validate().is_err());
    }
}
