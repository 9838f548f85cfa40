//! Flags shared by `ferry gateway` and `ferry compute`, and their common run loop.

use ferry_os::{StartupKind, StartupLine};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::watch;

use ferry_cluster::ClusterMap;
use ferry_front::{FrontConfig, FrontHandle, FrontTenant};

use crate::CmdResult;
use ferry_client::following::Following;

/// How a process in front of the storage nodes listens, whom it lets in, and where the
/// storage nodes are.
#[derive(clap::Args)]
pub struct FrontArgs {
    /// The cluster map every process reads (TOML: [[node]] id, addr, slots = ["0-8191"]).
    #[arg(long, required_unless_present = "config_group", conflicts_with = "config_group")]
    cluster_map: Option<PathBuf>,
    /// Follow the configuration the config group holds instead (`ferry config` members, as
    /// HOST:PORT separated by commas): wait for the first one, then route by each new
    /// epoch's map.
    #[arg(long)]
    config_group: Option<String>,
    /// A tenant as ID:TOKEN; repeatable. The same pair authenticates this process to the
    /// nodes behind it.
    #[arg(long = "tenant", value_name = "ID:TOKEN", required = true)]
    tenants: Vec<String>,
    /// Serve Prometheus metrics (`GET /metrics`) and the probes `GET /healthz` and
    /// `GET /readyz` on this address (port 0: any free one;
    /// printed as `metrics on HOST:PORT` after the `listening on` line).
    #[arg(long)]
    metrics: Option<String>,
    /// Serve the ferry protocol on this inherited listening socket (a file descriptor)
    /// instead of binding --listen: how `ferry cluster up` hands the process the socket
    /// it keeps across restarts.
    #[arg(long, value_name = "FD")]
    listen_fd: Option<i32>,
    /// Threads of its runtime.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    #[command(flatten)]
    limits: crate::limits_args::ConnectionLimitArgs,
    /// Pin the process to these CPUs (e.g. 1 or 1-3).
    #[arg(long)]
    cpu_set: Option<String>,
    #[command(flatten)]
    tls: crate::tls_args::ServeTlsArgs,
    /// Dial the storage nodes (and a gateway's compute nodes, and the config group) over
    /// TLS, trusting only these CAs (PEM); --tls-cert and --tls-key are presented when a
    /// node asks for a client certificate.
    #[arg(long, value_name = "FILE")]
    tls_ca: Option<PathBuf>,
}

impl FrontArgs {
    /// Pins the process (before any thread starts, so every thread inherits the mask).
    pub fn pin(&self) -> CmdResult {
        if let Some(cpu_set) = &self.cpu_set {
            let cpus = ferry_os::parse_cpu_set(cpu_set)?;
            ferry_os::pin_current_thread(&cpus)?;
        }
        Ok(())
    }

    /// The storage nodes' map: read from --cluster-map, or followed in --config-group
    /// (keep the [`Following`] as long as the process runs: it keeps the map current).
    pub fn cluster_routes(&self) -> Result<(watch::Receiver<Arc<ClusterMap>>, Option<Following>), String> {
        if let Some(group) = &self.config_group {
            let tls = self.tls_ca.as_ref().map(|ca| ferry_net::tls::ClientTls {
                ca: ca.clone(),
                identity: self.tls.identity(),
            });
            let following = crate::config_cmd::follow(group, tls.as_ref())?;
            return Ok((following.routes(), Some(following)));
        }
        let path = self
            .cluster_map
            .as_ref()
            .ok_or("--cluster-map or --config-group is needed")?;
        let text = std::fs::read_to_string(path)
            .map_err(|err| format!("cannot read --cluster-map {}: {err}", path.display()))?;
        let map = ClusterMap::parse(&text).map_err(|err| format!("--cluster-map {}: {err}", path.display()))?;
        Ok((ferry_client::cluster::fixed_routes(map), None))
    }

    /// The listening configuration for `listen`.
    pub fn front_config(&self, listen: &str) -> Result<FrontConfig, String> {
        let mut tenants = Vec::new();
        for flag in &self.tenants {
            let tenant = ferry_server::config::parse_tenant_flag(flag).map_err(|err| err.to_string())?;
            tenants.push(FrontTenant {
                id: tenant.id,
                token: tenant.token,
            });
        }
        let mut config = FrontConfig::new(crate::server_cmd::resolve("--listen", listen)?, tenants);
        if let Some(fd) = self.listen_fd {
            let listener = inherited(fd, "--listen-fd")?;
            config.listen = listener
                .local_addr()
                .map_err(|err| format!("--listen-fd {fd}: {err}"))?;
            config.adopted.ferry = Some(listener);
        }
        if let Some(metrics) = &self.metrics {
            let addr = crate::server_cmd::resolve("--metrics", metrics)?;
            config.metrics_listen = Some(addr);
        }
        config.threads = self.threads;
        if let Some(max) = self.limits.max_connections {
            config.max_connections = max;
        }
        if let Some(timeout) = self.limits.hello_timeout {
            config.hello_timeout = timeout;
        }
        if let Some(max) = self.limits.max_unauthenticated {
            config.max_unauthenticated = max;
        }
        config.tls = self.tls.server_tls()?;
        config.link_tls = self.tls_ca.as_ref().map(|ca| ferry_net::tls::ClientTls {
            ca: ca.clone(),
            identity: self.tls.identity(),
        });
        Ok(config)
    }
}

/// The listening socket inherited as descriptor `fd` (given as `flag`).
pub fn inherited(fd: i32, flag: &str) -> Result<Arc<std::net::TcpListener>, String> {
    ferry_os::inherit::inherited_listener(fd)
        .map(Arc::new)
        .map_err(|err| format!("{flag} {fd}: {err}"))
}

/// Prints the addresses (the first stdout line is a contract: tools read the port from
/// it), then serves until SIGINT or SIGTERM.
pub fn serve_until_signal(handle: FrontHandle, what: &str) -> CmdResult {
    let mut stdout = std::io::stdout();
    writeln!(
        stdout,
        "{}",
        StartupLine::new(StartupKind::Listening, handle.local_addr())
    )?;
    if let Some(resp) = handle.resp_addr() {
        writeln!(stdout, "{}", StartupLine::new(StartupKind::Resp, resp))?;
    }
    if let Some(metrics) = handle.metrics_addr() {
        writeln!(stdout, "{}", StartupLine::new(StartupKind::Metrics, metrics))?;
    }
    stdout.flush()?;
    tracing::info!("{what}; SIGINT or SIGTERM stops it");
    handle.wait_for_signal()?;
    tracing::info!("stopping");
    handle.shutdown();
    Ok(())
}
