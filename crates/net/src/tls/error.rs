//! Why a TLS configuration could not be made: each error names the file and what is wrong.

use std::path::PathBuf;

use thiserror::Error;

/// A TLS configuration that cannot be used; the process refuses to start with it.
#[derive(Debug, Error)]
pub enum TlsError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is larger than any certificate or key file (a wrong path, most likely).
    #[error("{path} is {bytes} bytes, more than the {max} a PEM certificate or key file may have")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        bytes: u64,
        /// The most accepted.
        max: u64,
    },
    /// The file is not valid PEM.
    #[error("{path} is not valid PEM: {why}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What the PEM reader said.
        why: String,
    },
    /// The file holds no certificate where one or more were expected.
    #[error("{path} holds no PEM certificate (-----BEGIN CERTIFICATE-----)")]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// The file holds no private key.
    #[error("{path} holds no PEM private key (PKCS#8, PKCS#1 or SEC1)")]
    NoKey {
        /// The file.
        path: PathBuf,
    },
    /// A certificate of a CA file cannot be a trust root.
    #[error("{path}: certificate {index} cannot be a trust root: {why}")]
    BadRoot {
        /// The CA file.
        path: PathBuf,
        /// Which certificate of the file (from 1).
        index: usize,
        /// What rustls said.
        why: String,
    },
    /// rustls refused the certificate and key together (the key does not match the
    /// certificate, or its algorithm is not supported).
    #[error("certificate {cert} with key {key}: {why}")]
    Identity {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// What rustls said.
        why: String,
    },
    /// The client-certificate verifier could not be built from the CA file.
    #[error("client CA {path}: {why}")]
    Verifier {
        /// The CA file.
        path: PathBuf,
        /// What rustls said.
        why: String,
    },
    /// The protocol versions could not be set (the provider supports none of them).
    #[error("TLS protocol versions: {0}")]
    Versions(String),
}
