//! Certificates for tests, generated when the test runs (no key is ever committed): a CA,
//! a node certificate it signed, a client certificate it signed, and a second CA with a
//! client certificate of its own, which the first CA's listeners must refuse.
//!
//! Behind the `testing` feature: the crates that test TLS enable it as a dev-dependency.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};

use crate::tls::pem::Identity;

/// The names every node certificate is valid for: the loopback addresses tests listen on.
pub const NODE_NAMES: &[&str] = &["127.0.0.1", "::1", "localhost"];

/// The files of a test PKI, all in one directory.
#[derive(Clone, Debug)]
pub struct Pki {
    /// Where the files are.
    pub dir: PathBuf,
    /// The CA certificate every listener and client of the tests trusts.
    pub ca: PathBuf,
    /// A node certificate signed by `ca`, for [`NODE_NAMES`], usable both to serve and to
    /// present as a client (a gateway presents its own certificate to storage nodes).
    pub node: Identity,
    /// A client certificate signed by `ca`.
    pub client: Identity,
    /// Another CA's certificate, trusted by nobody in the tests unless a test says so.
    pub other_ca: PathBuf,
    /// A client certificate signed by `other_ca`: refused wherever `ca` is the client CA.
    pub stranger: Identity,
}

fn failed(err: rcgen::Error) -> std::io::Error {
    std::io::Error::other(err.to_string())
}

/// A CA: its self-signed certificate (PEM) and what signs with its key.
fn authority(name: &str) -> std::io::Result<(String, Issuer<'static, KeyPair>)> {
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(failed)?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let key = KeyPair::generate().map_err(failed)?;
    let certificate = params.self_signed(&key).map_err(failed)?;
    Ok((certificate.pem(), Issuer::new(params, key)))
}

/// A leaf certificate signed by `issuer`, written as `NAME.pem` and `NAME.key` in `dir`.
fn leaf(
    dir: &Path,
    name: &str,
    names: &[&str],
    usages: &[ExtendedKeyUsagePurpose],
    issuer: &Issuer<'static, KeyPair>,
) -> std::io::Result<Identity> {
    let names: Vec<String> = names.iter().map(|name| name.to_string()).collect();
    let mut params = CertificateParams::new(names).map_err(failed)?;
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = usages.to_vec();
    let key = KeyPair::generate().map_err(failed)?;
    let certificate = params.signed_by(&key, issuer).map_err(failed)?;
    let identity = Identity {
        cert: dir.join(format!("{name}.pem")),
        key: dir.join(format!("{name}.key")),
    };
    std::fs::write(&identity.cert, certificate.pem())?;
    std::fs::write(&identity.key, key.serialize_pem())?;
    Ok(identity)
}

impl Pki {
    /// Generates the files into `dir` (created if missing).
    pub fn generate(dir: &Path) -> std::io::Result<Pki> {
        use ExtendedKeyUsagePurpose::{ClientAuth, ServerAuth};
        std::fs::create_dir_all(dir)?;
        let (ca_pem, ca) = authority("ferry test CA")?;
        let (other_pem, other) = authority("another test CA")?;
        let pki = Pki {
            dir: dir.to_path_buf(),
            ca: dir.join("ca.pem"),
            node: leaf(dir, "node", NODE_NAMES, &[ServerAuth, ClientAuth], &ca)?,
            client: leaf(dir, "client", &["ferry-client"], &[ClientAuth], &ca)?,
            other_ca: dir.join("other-ca.pem"),
            stranger: leaf(dir, "stranger", &["stranger"], &[ClientAuth], &other)?,
        };
        std::fs::write(&pki.ca, ca_pem)?;
        std::fs::write(&pki.other_ca, other_pem)?;
        Ok(pki)
    }
}
