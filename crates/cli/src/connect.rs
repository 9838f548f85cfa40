//! Flags shared by every command that talks to a running storage node.

use std::path::PathBuf;
use std::time::Duration;

use ferry_client::{Client, ClientConfig};
use ferry_net::tls::pem::Identity;
use ferry_net::tls::ClientTls;

/// Where the node is and who we are.
#[derive(clap::Args, Clone, Debug)]
pub struct ConnectArgs {
    /// Storage node address (host:port).
    #[arg(long, default_value = "127.0.0.1:7700")]
    pub server: String,
    /// Tenant id.
    #[arg(long, default_value_t = 1)]
    pub tenant: u32,
    /// Tenant token.
    #[arg(long, default_value = "ferry")]
    pub token: String,
    /// Longest wait for any one answer (e.g. 10s).
    #[arg(long, default_value = "10s", value_parser = crate::parse_std_duration)]
    pub timeout: Duration,
    /// Speak TLS to the node, trusting only these CAs (PEM); the node's certificate must
    /// name the host of --server.
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// A client certificate (PEM) to present when the node asks for one; needs --tls-ca
    /// and --tls-key.
    #[arg(long, value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
}

impl ConnectArgs {
    /// The TLS the flags ask for, if any.
    fn tls(&self) -> Result<Option<ClientTls>, String> {
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

    /// Connects with `connections` pipelined connections.
    pub async fn connect(&self, connections: usize) -> Result<Client, Box<dyn std::error::Error + Send + Sync>> {
        let mut config = ClientConfig::new(self.server.clone(), self.tenant, self.token.clone());
        config.connections = connections;
        config.request_timeout = self.timeout;
        config.connect_timeout = self.timeout.min(ferry_client::client::DEFAULT_CONNECT_TIMEOUT);
        if let Some(tls) = self.tls()? {
            config.tls = Some(tls.load().map_err(|err| format!("TLS: {err}"))?);
        }
        Ok(Client::connect(config).await?)
    }
}
