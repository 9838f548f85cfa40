//! A node's listening sockets, bound before the node starts. A cluster's map must name
//! every node's address before any node starts; binding port 0 first and building the map
//! from the addresses the OS gave leaves no window in which another process can take a
//! port between choosing it and binding it.

use std::net::{SocketAddr, TcpListener};

use crate::config::ServerConfig;
use crate::server::ServerError;

/// The ferry-protocol listener, and the RESP, metrics and replication ones if the node
/// serves them.
#[derive(Debug)]
pub struct Listeners {
    pub(crate) ferry: TcpListener,
    pub(crate) resp: Option<TcpListener>,
    pub(crate) metrics: Option<TcpListener>,
    pub(crate) replication: Option<TcpListener>,
}

pub(crate) fn replication_listen(config: &ServerConfig) -> Option<SocketAddr> {
    config.replication.as_ref().and_then(|replication| replication.listen)
}

pub(crate) fn bind(addr: SocketAddr) -> Result<TcpListener, ServerError> {
    let listener = TcpListener::bind(addr).map_err(|source| ServerError::Bind { addr, source })?;
    listener.set_nonblocking(true).map_err(ServerError::Start)?;
    Ok(listener)
}

impl Listeners {
    /// Binds the addresses `config` names.
    pub fn bind(config: &ServerConfig) -> Result<Listeners, ServerError> {
        Ok(Listeners {
            ferry: bind(config.listen)?,
            resp: config.resp_listen.map(bind).transpose()?,
            metrics: config.metrics_listen.map(bind).transpose()?,
            replication: replication_listen(config).map(bind).transpose()?,
        })
    }

    /// Listeners bound elsewhere (inherited from the parent process): the ferry protocol's
    /// and RESP's; the metrics one, if any, bound from `config`, and the replication one
    /// when the node starts.
    pub fn adopt(
        config: &ServerConfig,
        ferry: TcpListener,
        resp: Option<TcpListener>,
    ) -> Result<Listeners, ServerError> {
        ferry.set_nonblocking(true).map_err(ServerError::Start)?;
        if let Some(resp) = &resp {
            resp.set_nonblocking(true).map_err(ServerError::Start)?;
        }
        Ok(Listeners {
            ferry,
            resp,
            metrics: config.metrics_listen.map(bind).transpose()?,
            // Bound at start unless an inherited one is given (`with_replication`).
            replication: None,
        })
    }

    /// Serves replication on this inherited listener instead of binding its address.
    pub fn with_replication(mut self, listener: TcpListener) -> Result<Listeners, ServerError> {
        listener.set_nonblocking(true).map_err(ServerError::Start)?;
        self.replication = Some(listener);
        Ok(self)
    }

    /// The replication listener's address, if the node serves replicas.
    pub fn replication_addr(&self) -> Option<SocketAddr> {
        self.replication
            .as_ref()
            .and_then(|listener| listener.local_addr().ok())
    }

    /// Loopback listeners on ports the OS picks: the ferry protocol's, and RESP's if `resp`.
    pub fn loopback(resp: bool) -> Result<Listeners, ServerError> {
        let any = SocketAddr::from(([127, 0, 0, 1], 0));
        Ok(Listeners {
            ferry: bind(any)?,
            resp: resp.then(|| bind(any)).transpose()?,
            metrics: None,
            replication: None,
        })
    }

    /// The ferry protocol's address.
    pub fn addr(&self) -> SocketAddr {
        // Invariant: a bound TCP listener has a local address.
        self.ferry.local_addr().expect("a bound listener has an address")
    }

    /// RESP's address, if the node serves it.
    pub fn resp_addr(&self) -> Option<SocketAddr> {
        self.resp.as_ref().and_then(|listener| listener.local_addr().ok())
    }
}
