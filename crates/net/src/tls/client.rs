//! A link's side of TLS (a gateway or compute node reaching storage nodes, a `ferry`
//! command reaching any process): the roots it trusts, and the certificate it presents
//! when the listener asks for one.

use std::path::PathBuf;
use std::sync::Arc;

use crate::tls::pem::{self, Identity};
use crate::tls::{provider, TlsError};

/// What a link needs to speak TLS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientTls {
    /// The CA certificates (PEM) the listener's certificate must chain to. Only these:
    /// the system's roots are not trusted, since ferry's nodes carry certificates of the
    /// deployment's own CA.
    pub ca: PathBuf,
    /// The certificate presented when the listener asks for one; without it, none is.
    pub identity: Option<Identity>,
}

impl ClientTls {
    /// The rustls configuration: the files read and checked. Built once and shared by
    /// every connection of the process.
    pub fn load(&self) -> Result<Arc<rustls::ClientConfig>, TlsError> {
        let roots = pem::roots(&self.ca)?;
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|err| TlsError::Versions(err.to_string()))?
            .with_root_certificates(roots);
        let config = match &self.identity {
            None => builder.with_no_client_auth(),
            Some(identity) => {
                let (chain, key) = identity.load()?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|err| identity.refused(err))?
            }
        };
        Ok(Arc::new(config))
    }
}
