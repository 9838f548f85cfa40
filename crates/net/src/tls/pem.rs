//! Certificates, private keys and trust roots read from PEM files.
//!
//! A file is read whole (it is small) and parsed from memory, so a missing file, a file
//! that is not PEM and a PEM file without the expected item are three different errors.

use std::io::Read;
use std::path::{Path, PathBuf};

use rustls::RootCertStore;
use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::tls::TlsError;

/// A certificate chain and its private key, as PEM files: what a listener presents, and
/// what a client presents when the listener asks for a certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The chain, end entity first.
    pub cert: PathBuf,
    /// The end entity's private key.
    pub key: PathBuf,
}

impl Identity {
    /// The chain and the key, read (whether they match is checked where they are used).
    pub fn load(&self) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
        Ok((certificates(&self.cert)?, private_key(&self.key)?))
    }

    /// rustls's refusal of this pair, as an error naming both files.
    pub(crate) fn refused(&self, why: rustls::Error) -> TlsError {
        let why = match why {
            // rustls says "keys may not be consistent: KeyMismatch": say what to fix.
            rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
                "the key is not the certificate's (its public key differs)".to_string()
            }
            other => other.to_string(),
        };
        TlsError::Identity {
            cert: self.cert.clone(),
            key: self.key.clone(),
            why,
        }
    }
}

/// Largest PEM file read: a system CA bundle is a few hundred KiB, a certificate chain or
/// a key a few KiB; anything far larger is a wrong path, not read into memory.
pub const MAX_PEM_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// The bytes of `path`, at most [`MAX_PEM_FILE_BYTES`].
fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    let failed = |source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(failed)?;
    let mut bytes = Vec::new();
    // One byte past the limit tells a file at the limit from a larger one.
    file.take(MAX_PEM_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(failed)?;
    if bytes.len() as u64 > MAX_PEM_FILE_BYTES {
        let bytes = std::fs::metadata(path).map_or(bytes.len() as u64, |meta| meta.len());
        return Err(TlsError::TooLarge {
            path: path.to_path_buf(),
            bytes,
            max: MAX_PEM_FILE_BYTES,
        });
    }
    Ok(bytes)
}

fn pem_error(path: &Path, err: pem::Error) -> TlsError {
    TlsError::Pem {
        path: path.to_path_buf(),
        why: err.to_string(),
    }
}

/// Every certificate of `path`, in order (a chain: the end entity first); at least one.
pub fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read(path)?;
    let certificates = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| pem_error(path, err))?;
    if certificates.is_empty() {
        return Err(TlsError::NoCertificate {
            path: path.to_path_buf(),
        });
    }
    Ok(certificates)
}

/// The first private key of `path`.
pub fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = read(path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|err| match err {
        pem::Error::NoItemsFound => TlsError::NoKey {
            path: path.to_path_buf(),
        },
        err => pem_error(path, err),
    })
}

/// The certificates of `path` as trust roots; at least one.
pub fn roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut store = RootCertStore::empty();
    for (index, certificate) in certificates(path)?.into_iter().enumerate() {
        store.add(certificate).map_err(|err| TlsError::BadRoot {
            path: path.to_path_buf(),
            index: index + 1,
            why: err.to_string(),
        })?;
    }
    Ok(store)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> PathBuf {
        std::env::temp_dir().join(format!("ferry-tls-pem-{}", std::process::id()))
    }

    fn file(name: &str, text: &[u8]) -> PathBuf {
        std::fs::create_dir_all(dir()).unwrap();
        let path = dir().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn each_bad_file_is_its_own_error_naming_the_file() {
        let missing = Path::new("/nonexistent/ferry/cert.pem");
        let err = certificates(missing).unwrap_err();
        assert!(matches!(err, TlsError::Read { .. }), "{err}");
        assert!(err.to_string().contains("/nonexistent/ferry/cert.pem"), "{err}");

        let empty = file("empty.pem", b"just words, no PEM\n");
        let err = certificates(&empty).unwrap_err();
        assert!(matches!(err, TlsError::NoCertificate { .. }), "{err}");
        let err = private_key(&empty).unwrap_err();
        assert!(matches!(err, TlsError::NoKey { .. }), "{err}");
        assert!(err.to_string().contains("empty.pem"), "{err}");

        let broken = file(
            "broken.pem",
            b"-----BEGIN CERTIFICATE-----\nnot base64 at all!\n-----END CERTIFICATE-----\n",
        );
        let err = certificates(&broken).unwrap_err();
        assert!(matches!(err, TlsError::Pem { .. }), "{err}");

        let huge = file("huge.pem", &vec![b'A'; MAX_PEM_FILE_BYTES as usize + 10]);
        let err = roots(&huge).unwrap_err();
        assert!(matches!(err, TlsError::TooLarge { .. }), "{err}");
        let _ = std::fs::remove_dir_all(dir());
    }
}
