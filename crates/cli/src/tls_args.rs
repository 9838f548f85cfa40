//! The TLS flags: of the processes that listen (`ferry server`, `gateway`, `compute`,
//! `config`, and `cluster up`, which passes them on), and of the commands that dial a node
//! (`kv`, `load`, `fn`) or the config group (`cluster status`, `cluster assign-slots`). Files are read when the process starts, and a bad one stops it with an
//! error naming the file.

use std::path::PathBuf;

use ferry_net::tls::pem::Identity;
use ferry_net::tls::{ClientAuth, ClientTls, ServerTls};

/// TLS on every listener of a process.
#[derive(clap::Args, Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct ServeTlsArgs {
    /// Speak TLS on every listener (the ferry protocol, --resp, --metrics) with this
    /// certificate chain (PEM); needs --tls-key.
    #[arg(long, value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// Ask clients for a certificate and verify it against these CAs (PEM); a client that
    /// presents none is still let in (it proves itself with its token) unless
    /// --tls-require-client-cert.
    #[arg(long, value_name = "FILE")]
    pub tls_client_ca: Option<PathBuf>,
    /// Refuse every client that presents no certificate signed by a --tls-client-ca CA.
    #[arg(long)]
    pub tls_require_client_cert: bool,
}

impl ServeTlsArgs {
    /// The listeners' TLS, if asked for.
    pub fn server_tls(&self) -> Result<Option<ServerTls>, String> {
        server_tls(
            self.tls_cert.clone(),
            self.tls_key.clone(),
            self.tls_client_ca.clone(),
            self.tls_require_client_cert,
        )
    }

    /// The same flags, for a child process (`cluster up`).
    pub fn to_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        let mut file = |flag: &str, path: &Option<PathBuf>| {
            if let Some(path) = path {
                args.extend([flag.to_string(), path.display().to_string()]);
            }
        };
        file("--tls-cert", &self.tls_cert);
        file("--tls-key", &self.tls_key);
        file("--tls-client-ca", &self.tls_client_ca);
        if self.tls_require_client_cert {
            args.push("--tls-require-client-cert".into());
        }
        args
    }

    /// The certificate and key, to present when a node dialled asks for a certificate.
    pub fn identity(&self) -> Option<Identity> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(Identity {
                cert: cert.clone(),
                key: key.clone(),
            }),
            _ => None,
        }
    }
}

/// TLS of a command that dials (`kv`, `load`, `fn`, `cluster status`, …).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct DialTlsArgs {
    /// Speak TLS, trusting only these CAs (PEM); the certificate of what is dialled must
    /// name the host of its address.
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// A client certificate (PEM) to present when asked for one; needs --tls-ca and
    /// --tls-key.
    #[arg(long, value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
}

impl DialTlsArgs {
    /// The TLS the flags ask for, if any.
    pub fn client_tls(&self) -> Result<Option<ClientTls>, String> {
        let identity = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(Identity {
                cert: cert.clone(),
                key: key.clone(),
            }),
            (None, None) => None,
            _ => return Err("--tls-cert and --tls-key go together".into()),
        };
        match &self.tls_ca {
            Some(ca) => Ok(Some(ClientTls {
                ca: ca.clone(),
                identity,
            })),
            None if identity.is_some() => Err("--tls-cert and --tls-key need --tls-ca".into()),
            None => Ok(None),
        }
    }
}

/// A listener's TLS from its four settings (flags, or a config file's keys), or why they
/// do not go together.
pub fn server_tls(
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    client_ca: Option<PathBuf>,
    require_client_cert: bool,
) -> Result<Option<ServerTls>, String> {
    let (cert, key) = match (cert, key) {
        (Some(cert), Some(key)) => (cert, key),
        (None, None) if client_ca.is_none() && !require_client_cert => return Ok(None),
        (None, None) => {
            return Err("--tls-client-ca and --tls-require-client-cert need --tls-cert and --tls-key".into())
        }
        _ => return Err("--tls-cert and --tls-key go together".into()),
    };
    let client_auth = match (client_ca, require_client_cert) {
        (None, false) => ClientAuth::None,
        (None, true) => return Err("--tls-require-client-cert needs --tls-client-ca".into()),
        (Some(ca), false) => ClientAuth::Optional { ca },
        (Some(ca), true) => ClientAuth::Required { ca },
    };
    Ok(Some(ServerTls {
        identity: Identity { cert, key },
        client_auth,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_that_do_not_go_together_are_refused() {
        let path = |name: &str| Some(PathBuf::from(name));
        assert_eq!(server_tls(None, None, None, false), Ok(None));
        assert!(server_tls(path("c"), None, None, false)
            .unwrap_err()
            .contains("go together"));
        assert!(server_tls(None, None, path("ca"), false)
            .unwrap_err()
            .contains("need --tls-cert"));
        assert!(server_tls(path("c"), path("k"), None, true)
            .unwrap_err()
            .contains("needs --tls-client-ca"));
        let required = server_tls(path("c"), path("k"), path("ca"), true).unwrap().unwrap();
        assert_eq!(required.client_auth, ClientAuth::Required { ca: "ca".into() });
        let optional = server_tls(path("c"), path("k"), path("ca"), false).unwrap().unwrap();
        assert_eq!(optional.client_auth, ClientAuth::Optional { ca: "ca".into() });
    }
}
