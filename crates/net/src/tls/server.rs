//! A listener's side of TLS: its certificate, and whom it asks for a client certificate.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::server::WebPkiClientVerifier;

use crate::tls::pem::{self, Identity};
use crate::tls::{provider, TlsError};

/// Whether a listener asks its clients for a certificate, and which CAs it trusts for them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    /// No client certificate is asked for: clients prove who they are with their tenant's
    /// token alone.
    None,
    /// A certificate is asked for: a client that presents one signed by a CA of `ca` gets
    /// in, one that presents any other is refused, and one that presents none gets in too
    /// (and proves itself with its token).
    Optional {
        /// The CA certificates (PEM) client certificates must chain to.
        ca: PathBuf,
    },
    /// Every client must present a certificate signed by a CA of `ca`; the handshake of one
    /// that does not fails before any request is read.
    Required {
        /// The CA certificates (PEM) client certificates must chain to.
        ca: PathBuf,
    },
}

/// What a listener needs to speak TLS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerTls {
    /// The certificate chain it presents and its key.
    pub identity: Identity,
    /// Whom it asks for a client certificate.
    pub client_auth: ClientAuth,
}

impl ServerTls {
    /// The rustls configuration: the files read and checked (the key must match the
    /// certificate, every CA must be a usable trust root). Built once per process and
    /// shared by its listeners.
    pub fn load(&self) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let provider = provider();
        let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|err| TlsError::Versions(err.to_string()))?;
        let builder = match &self.client_auth {
            ClientAuth::None => builder.with_no_client_auth(),
            ClientAuth::Optional { ca } | ClientAuth::Required { ca } => {
                let roots = Arc::new(pem::roots(ca)?);
                let mut verifier = WebPkiClientVerifier::builder_with_provider(roots, Arc::clone(&provider));
                if matches!(self.client_auth, ClientAuth::Optional { .. }) {
                    verifier = verifier.allow_unauthenticated();
                }
                let verifier = verifier.build().map_err(|err| TlsError::Verifier {
                    path: ca.clone(),
                    why: err.to_string(),
                })?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let (chain, key) = self.identity.load()?;
        let config = builder
            .with_single_cert(chain, key)
            .map_err(|err| self.identity.refused(err))?;
        Ok(Arc::new(config))
    }
}
