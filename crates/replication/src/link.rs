//! A replication link: a TCP connection, TLS when the cluster uses it, and a hello that
//! carries the cluster's replication token (compared in constant time). A replica dials
//! ([`Upstream::connect`]); a primary accepts ([`accept`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{BufReader, BufWriter, ReadHalf, WriteHalf};
use tokio::net::TcpStream;

use ferry_net::tls::LinkStream as Stream;

use crate::wire::{self, Message, WireError, MAX_MESSAGE_BYTES};

/// Longest a connection, its TLS handshake and its hello may take.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// Largest request a primary reads (requests are small; records only go the other way).
pub const MAX_REQUEST_BYTES: usize = 4096;

/// One side of an established link.
pub struct Link {
    reader: BufReader<ReadHalf<Box<dyn Stream>>>,
    writer: BufWriter<WriteHalf<Box<dyn Stream>>>,
    /// Who is at the other end (for logs and errors).
    pub peer: String,
}

impl Link {
    fn new(stream: Box<dyn Stream>, peer: String) -> Link {
        let (reader, writer) = tokio::io::split(stream);
        Link {
            reader: BufReader::with_capacity(64 * 1024, reader),
            writer: BufWriter::with_capacity(64 * 1024, writer),
            peer,
        }
    }

    /// Sends one message.
    pub async fn send(&mut self, message: &Message) -> Result<(), WireError> {
        wire::write(&mut self.writer, message).await
    }

    /// Receives one message of at most `max_bytes`.
    pub async fn receive(&mut self, max_bytes: usize) -> Result<Message, WireError> {
        wire::read(&mut self.reader, max_bytes).await
    }
}

/// Why replication could not go on.
#[derive(Debug, thiserror::Error)]
pub enum ReplicationError {
    /// The primary could not be reached, or the link broke.
    #[error("primary {addr}: {why}")]
    Link {
        /// The primary's replication address.
        addr: String,
        /// What happened.
        why: String,
    },
    /// The primary refused (a wrong token, a snapshot gone, …).
    #[error("primary {addr} refused: {why}")]
    Refused {
        /// The primary's replication address.
        addr: String,
        /// Its reason.
        why: String,
    },
    /// The primary answered something the protocol does not allow there.
    #[error("primary {addr} answered {got} where {expected} was expected")]
    Unexpected {
        /// The primary's replication address.
        addr: String,
        /// What it sent.
        got: String,
        /// What was expected.
        expected: &'static str,
    },
    /// This node's log or data dir failed.
    #[error("this node's log: {0}")]
    Local(String),
}

/// Where a replica copies from, and how it proves it may.
#[derive(Clone)]
pub struct Upstream {
    /// The primary's replication address (`HOST:PORT`).
    pub addr: String,
    /// The cluster's replication token.
    pub token: Bytes,
    /// TLS for the link (the CA the primary's certificate must chain to, and this node's
    /// certificate if the primary asks for one); `None`: plain TCP.
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("addr", &self.addr)
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

impl Upstream {
    /// Dials the primary, runs the TLS handshake if any, and says hello.
    pub async fn connect(&self) -> Result<Link, ReplicationError> {
        let link_error = |why: String| ReplicationError::Link {
            addr: self.addr.clone(),
            why,
        };
        let connect = async {
            let stream = ferry_net::tls::dial(&self.addr, self.tls.as_ref(), HELLO_TIMEOUT)
                .await
                .map_err(|err| link_error(err.to_string()))?;
            let mut link = Link::new(stream, self.addr.clone());
            link.send(&Message::Hello {
                token: self.token.clone(),
            })
            .await
            .map_err(|err| link_error(err.to_string()))?;
            match link.receive(MAX_MESSAGE_BYTES).await {
                Ok(Message::Welcome) => Ok(link),
                Ok(Message::Refused { why }) => Err(ReplicationError::Refused {
                    addr: self.addr.clone(),
                    why,
                }),
                Ok(other) => Err(self.unexpected(&other, "a welcome")),
                Err(err) => Err(link_error(err.to_string())),
            }
        };
        tokio::time::timeout(HELLO_TIMEOUT, connect)
            .await
            .unwrap_or_else(|_| Err(link_error(format!("no welcome within {HELLO_TIMEOUT:?}"))))
    }

    /// The error for an answer out of place.
    pub(crate) fn unexpected(&self, got: &Message, expected: &'static str) -> ReplicationError {
        let got = match got {
            Message::Refused { why } => {
                return ReplicationError::Refused {
                    addr: self.addr.clone(),
                    why: why.clone(),
                }
            }
            other => format!("{other:?}").chars().take(80).collect(),
        };
        ReplicationError::Unexpected {
            addr: self.addr.clone(),
            got,
            expected,
        }
    }

    /// The error for a broken link.
    pub(crate) fn broken(&self, err: WireError) -> ReplicationError {
        ReplicationError::Link {
            addr: self.addr.clone(),
            why: err.to_string(),
        }
    }
}

/// Accepts a replica's connection: the TLS handshake (if `tls`), then its hello, which
/// must carry `token`. `None` (logged) when either fails or takes over [`HELLO_TIMEOUT`].
pub async fn accept(
    stream: TcpStream,
    peer: SocketAddr,
    tls: Option<&ferry_net::tls::Acceptor>,
    token: &[u8],
) -> Option<Link> {
    let _ = stream.set_nodelay(true);
    let hello = async {
        let stream: Box<dyn Stream> = match tls {
            None => Box::new(stream),
            Some(acceptor) => Box::new(acceptor.handshake(stream, peer).await?),
        };
        let mut link = Link::new(stream, peer.to_string());
        match link.receive(MAX_REQUEST_BYTES).await {
            Ok(Message::Hello { token: given }) if ferry_net::preauth::token_matches(token, &given) => {
                link.send(&Message::Welcome).await.ok()?;
                Some(link)
            }
            Ok(Message::Hello { .. }) => {
                tracing::warn!(%peer, "replication link refused: wrong replication token");
                let why = "wrong replication token".to_string();
                let _ = link.send(&Message::Refused { why }).await;
                None
            }
            Ok(_) => {
                tracing::warn!(%peer, "replication link refused: no hello");
                None
            }
            Err(err) => {
                tracing::debug!(%peer, "replication link closed before its hello: {err}");
                None
            }
        }
    };
    tokio::time::timeout(HELLO_TIMEOUT, hello).await.ok().flatten()
}
