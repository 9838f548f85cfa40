//! TLS for every listener (the ferry protocol's door, RESP, metrics) and every link between
//! ferry processes, through rustls with the ring provider.
//!
//! Layout:
//! - [`error`]: [`TlsError`], naming the file and what is wrong with it;
//! - [`pem`]: certificates, private keys and trust roots read from PEM files;
//! - [`server`]: [`ServerTls`], a listener's certificate and whom it asks for a client
//!   certificate ([`ClientAuth`]), turned into a rustls server configuration;
//! - [`client`]: [`ClientTls`], the roots a link trusts and the certificate it presents
//!   when asked, turned into a rustls client configuration;
//! - [`accept`]: [`Acceptor`], the handshake of one accepted connection, logged and
//!   counted when it fails;
//! - [`dial`]: the other side: a link's connection, TCP and then the handshake, checked
//!   against the name its address gives.
//!
//! Every configuration is built from [`provider`], never from a process-wide default: a
//! second provider linked in by some dependency cannot change which one ferry uses.

pub mod accept;
pub mod client;
pub mod dial;
pub mod error;
pub mod pem;
pub mod server;
#[cfg(feature = "testing")]
pub mod testing;

use std::sync::Arc;

pub use accept::Acceptor;
pub use client::ClientTls;
pub use dial::{dial, LinkStream};
pub use error::TlsError;
pub use server::{ClientAuth, ServerTls};

/// The crates the configurations are made of, for processes that hold them.
pub use rustls;
pub use tokio_rustls;

/// The cryptography every TLS configuration of ferry uses: ring's.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}
