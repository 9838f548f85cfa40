//! Flags shared by every command that talks to a running storage node.

use ferry_proto::TenantId;
use std::time::Duration;

use ferry_client::{Client, ClientConfig};

/// Where the node is and who we are.
#[derive(clap::Args, Clone, Debug)]
pub struct ConnectArgs {
    /// Storage node address (host:port).
    #[arg(long, default_value = "127.0.0.1:7700")]
    pub server: String,
    /// Tenant id.
    #[arg(long, default_value_t = TenantId(1))]
    pub tenant: TenantId,
    /// Tenant token.
    #[arg(long, default_value = "ferry")]
    pub token: String,
    /// Longest wait for any one answer (e.g. 10s).
    #[arg(long, default_value = "10s", value_parser = crate::flag_values::duration)]
    pub timeout: Duration,
    #[command(flatten)]
    pub tls: crate::tls_args::DialTlsArgs,
}

impl ConnectArgs {
    /// Connects with `connections` pipelined connections.
    pub async fn connect(&self, connections: usize) -> Result<Client, Box<dyn std::error::Error + Send + Sync>> {
        let mut config = ClientConfig::new(self.server.clone(), self.tenant, self.token.clone());
        config.connections = connections;
        config.request_timeout = self.timeout;
        config.connect_timeout = self.timeout.min(ferry_client::config::DEFAULT_CONNECT_TIMEOUT);
        if let Some(tls) = self.tls.client_tls()? {
            config.tls = Some(tls.load().map_err(|err| format!("TLS: {err}"))?);
        }
        Ok(Client::connect(config).await?)
    }
}
