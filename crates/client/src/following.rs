//! A process's view of the config group: the cluster's configuration and its routing
//! map, kept current by a watch of their own for as long as the view is held. Storage
//! nodes, gateways, compute nodes and the admin commands each follow the group through
//! it.

use std::sync::Arc;
use std::time::Duration;

use ferry_cluster::ClusterMap;
use ferry_config::ClusterConfig;
use tokio::sync::watch;

use crate::config_group::{follow_routes, ConfigClient, ConfigGroupError};

/// Longest a node, gateway or compute node waits at start for the cluster's first
/// configuration (the config group forming and loading its map).
pub const FIRST_CONFIG_WAIT: Duration = Duration::from_secs(120);

/// The config group's members, from `HOST:PORT,HOST:PORT,…`.
pub fn parse_group(text: &str) -> Result<Vec<String>, ConfigGroupError> {
    let members: Vec<String> = text
        .split(',')
        .map(str::trim)
        .filter(|addr| !addr.is_empty())
        .map(str::to_string)
        .collect();
    if members.is_empty() || members.len() > MAX_MEMBERS {
        return Err(ConfigGroupError::Start(format!(
            "1 to {MAX_MEMBERS} members, as HOST:PORT separated by commas"
        )));
    }
    Ok(members)
}

/// A process's view of the config group: the configuration and its routing map, kept
/// current by tasks on a runtime of their own (one thread) for as long as it is held.
pub struct Following {
    client: ConfigClient,
    configs: watch::Receiver<Arc<ClusterConfig>>,
    routes: watch::Receiver<Arc<ClusterMap>>,
    /// Runs the watch tasks; dropped last.
    _runtime: tokio::runtime::Runtime,
}

impl Following {
    /// Starts following the group at `group` (`--config-group`), over TLS with `tls`, and
    /// waits for the first configuration.
    pub fn start(group: &str, tls: Option<&ferry_net::tls::ClientTls>) -> Result<Following, ConfigGroupError> {
        let client = group_client(group, tls)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("ferry-config-watch")
            .enable_all()
            .build()
            .map_err(|err| ConfigGroupError::Start(format!("cannot start the watch's thread: {err}")))?;
        let configs = runtime.block_on(async { client.follow() });
        tracing::info!("waiting for the cluster configuration from the config group at {group}");
        let routes = runtime.block_on(follow_routes(configs.clone(), FIRST_CONFIG_WAIT))?;
        Ok(Following {
            client,
            configs,
            routes,
            _runtime: runtime,
        })
    }

    /// The routing map of the newest configuration.
    pub fn routes(&self) -> watch::Receiver<Arc<ClusterMap>> {
        self.routes.clone()
    }

    /// The newest configuration.
    pub fn configs(&self) -> watch::Receiver<Arc<ClusterConfig>> {
        self.configs.clone()
    }

    /// The config group, to report to and propose to.
    pub fn client(&self) -> ConfigClient {
        self.client.clone()
    }
}

/// A client of the config group at `group`, over TLS with `tls`.
pub fn group_client(group: &str, tls: Option<&ferry_net::tls::ClientTls>) -> Result<ConfigClient, ConfigGroupError> {
    let client = ConfigClient::new(parse_group(group)?);
    match tls {
        None => Ok(client),
        Some(tls) => Ok(client.with_tls(
            tls.load()
                .map_err(|err| ConfigGroupError::Start(format!("TLS: {err}")))?,
        )),
    }
}

/// Most members of a config group (Raft needs a majority of them for every decision).
pub const MAX_MEMBERS: usize = 9;
