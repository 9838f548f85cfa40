//! The TLS handshake of an accepted connection, run in the connection's own task (a slow
//! or silent client never holds up the accept loop), and logged with rustls's reason and
//! counted (`tls_handshake_failures`) when it fails.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::connections::Connections;
use crate::preauth::{unauthenticated_over, Ticket};

/// A process's TLS configuration for its listeners, with the counters failures go to.
#[derive(Clone)]
pub struct Acceptor {
    acceptor: TlsAcceptor,
    /// The process's connections: failed handshakes are counted there.
    connections: Arc<Connections>,
}

impl Acceptor {
    /// An acceptor with `config`, counting into `connections`.
    pub fn new(config: Arc<rustls::ServerConfig>, connections: Arc<Connections>) -> Acceptor {
        Acceptor {
            acceptor: TlsAcceptor::from(config),
            connections,
        }
    }

    /// Runs the handshake; `None` when it failed (logged and counted). The caller bounds
    /// how long it may take.
    pub async fn handshake(&self, stream: TcpStream, peer: SocketAddr) -> Option<TlsStream<TcpStream>> {
        match self.acceptor.accept(stream).await {
            Ok(stream) => Some(stream),
            Err(err) => {
                let counters = &self.connections.counters;
                counters.tls_handshake_failures.fetch_add(1, Ordering::Relaxed);
                match rustls_reason(&err) {
                    Some(reason) => tracing::warn!(%peer, "TLS handshake failed: {reason}"),
                    // The peer left or the socket broke: nothing about its TLS to tell.
                    None => tracing::debug!(%peer, "TLS handshake failed: {err}"),
                }
                None
            }
        }
    }

    /// The handshake of a connection that has not authenticated, within its place among
    /// those (`ticket`): it ends like the wait for a hello does, at `deadline` (the hello
    /// timeout) or when a newer connection evicts it, and when the process stops. A
    /// client cannot hold a place longer by stalling its handshake.
    pub async fn handshake_before(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
        ticket: &Ticket,
        deadline: tokio::time::Instant,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Option<TlsStream<TcpStream>> {
        tokio::select! {
            stream = self.handshake(stream, peer) => stream,
            _ = unauthenticated_over(Some(ticket), deadline) => {
                let counters = &self.connections.counters;
                counters.unauthenticated_closed.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(%peer, "TLS handshake not finished before the hello timeout or an eviction");
                None
            }
            _ = shutdown.changed() => None,
        }
    }
}

/// What rustls said, when the handshake failed for a TLS reason (a certificate refused, a
/// protocol error), with a hint for the commonest mistake: a client speaking without TLS.
fn rustls_reason(err: &std::io::Error) -> Option<String> {
    let reason = err.get_ref()?.downcast_ref::<rustls::Error>()?;
    let hint = match reason {
        rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType) => {
            " (is the client speaking without TLS?)"
        }
        _ => "",
    };
    Some(format!("{reason}{hint}"))
}
