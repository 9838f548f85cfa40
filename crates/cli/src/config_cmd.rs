//! `ferry config`: one member of the config group, the Raft group that holds the cluster's
//! configuration (slot ranges, primaries, epoch). Run three (or five) with the same
//! `--members`; each keeps its Raft log in its own `--data-dir`. Given `--cluster-map`,
//! they load that map as the first configuration once the group has formed.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use ferry_client::config_group::ConfigClient;
use ferry_client::following::{Following, MAX_MEMBERS};
use ferry_confignode::{Member, MemberConfig};
use ferry_os::{StartupKind, StartupLine};

use crate::CmdResult;

/// A process's view of the config group at `group` (`--config-group`), over TLS with
/// `tls`, once it holds the first configuration; errors name the flag.
pub fn follow(group: &str, tls: Option<&ferry_net::tls::ClientTls>) -> Result<Following, String> {
    Following::start(group, tls).map_err(|err| format!("--config-group {group}: {err}"))
}

/// A client of the config group at `group` (`--config-group`), over TLS with `tls`.
pub fn group_client(group: &str, tls: Option<&ferry_net::tls::ClientTls>) -> Result<ConfigClient, String> {
    ferry_client::following::group_client(group, tls).map_err(|err| format!("--config-group {group}: {err}"))
}

/// Flags of `ferry config`.
#[derive(clap::Args)]
pub struct ConfigArgs {
    /// This member's id: its key in --members (a number, never reused for another member).
    #[arg(long)]
    id: u64,
    /// Every member, as ID=HOST:PORT separated by commas, the same on all members
    /// (e.g. 1=10.0.0.1:7800,2=10.0.0.2:7800,3=10.0.0.3:7800).
    #[arg(long)]
    members: String,
    /// Where this member keeps its Raft log and snapshot (created if missing; held
    /// exclusively while it runs).
    #[arg(long)]
    data_dir: PathBuf,
    /// Address to listen on; default: this member's own address in --members.
    #[arg(long)]
    listen: Option<String>,
    /// Serve on this inherited listening socket instead of binding --listen (how
    /// `ferry cluster up` hands a member its socket).
    #[arg(long, hide = true)]
    listen_fd: Option<i32>,
    /// A cluster map (TOML) to load as the first configuration, if the group has none yet.
    #[arg(long)]
    cluster_map: Option<PathBuf>,
    /// Serve Prometheus metrics (`GET /metrics`) and the probes `GET /healthz` and
    /// `GET /readyz` (ready while a leader is known) on this address (printed as
    /// `metrics on HOST:PORT` after the `listening on` line).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// TLS on the member's listener (for peers and clients alike).
    #[command(flatten)]
    tls: crate::tls_args::ServeTlsArgs,
    /// Dial the other members over TLS, trusting only these CAs (PEM), presenting
    /// --tls-cert when asked; needed with --tls-cert (the members' listeners all speak
    /// TLS then).
    #[arg(long, value_name = "FILE")]
    tls_ca: Option<PathBuf>,
}

/// Parses `ID=HOST:PORT,...`.
pub fn parse_members(text: &str) -> Result<BTreeMap<u64, String>, String> {
    let mut members = BTreeMap::new();
    for part in text.split(',').map(str::trim).filter(|part| !part.is_empty()) {
        let (id, addr) = part
            .split_once('=')
            .ok_or_else(|| format!("--members: {part:?} is not ID=HOST:PORT"))?;
        let id: u64 = id
            .trim()
            .parse()
            .map_err(|_| format!("--members: {id:?} is not a member id (a number)"))?;
        let addr = addr.trim();
        if !ferry_cluster::map::is_host_port(addr) {
            return Err(format!("--members: {addr:?} is not HOST:PORT"));
        }
        if members.insert(id, addr.to_string()).is_some() {
            return Err(format!("--members: member {id} is named twice"));
        }
    }
    if members.is_empty() || members.len() > MAX_MEMBERS {
        return Err(format!(
            "--members: a group has 1 to {MAX_MEMBERS} members, not {}",
            members.len()
        ));
    }
    Ok(members)
}

pub fn run(args: ConfigArgs) -> CmdResult {
    let members = parse_members(&args.members)?;
    let server_tls = args.tls.server_tls()?.map(|tls| tls.load()).transpose()?;
    if server_tls.is_some() != args.tls_ca.is_some() {
        return Err("--tls-cert and --tls-ca go together: a member's peers speak TLS if it does".into());
    }
    let peer_tls = args
        .tls_ca
        .as_ref()
        .map(|ca| {
            ferry_net::tls::ClientTls {
                ca: ca.clone(),
                identity: args.tls.identity(),
            }
            .load()
        })
        .transpose()?;
    let Some(own) = members.get(&args.id).cloned() else {
        return Err(format!("--id {} is not in --members", args.id).into());
    };
    let bootstrap = match &args.cluster_map {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|err| format!("cannot read --cluster-map {}: {err}", path.display()))?;
            Some(ferry_cluster::ClusterMap::parse(&text)?.nodes().to_vec())
        }
        None => None,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let result: CmdResult = runtime.block_on(async move {
        let listener = match args.listen_fd {
            Some(fd) => {
                let listener =
                    ferry_os::inherit::inherited_listener(fd).map_err(|err| format!("--listen-fd {fd}: {err}"))?;
                listener.set_nonblocking(true)?;
                tokio::net::TcpListener::from_std(listener)?
            }
            None => {
                let addr = args.listen.clone().unwrap_or(own);
                tokio::net::TcpListener::bind(&addr)
                    .await
                    .map_err(|err| format!("cannot listen on {addr}: {err}"))?
            }
        };
        let member = Member::start(MemberConfig {
            id: args.id,
            members,
            data_dir: args.data_dir.clone(),
            bootstrap,
            peer_tls,
        })
        .await?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let acceptor = server_tls.map(|tls| {
            let connections = ferry_net::connections::Connections::new(
                ferry_confignode::server::MAX_CONNECTIONS,
                ferry_confignode::server::MAX_CONNECTIONS,
                ferry_confignode::server::HANDSHAKE_TIMEOUT,
            );
            ferry_net::tls::Acceptor::new(tls, connections)
        });
        let mut metrics_addr = None;
        if let Some(addr) = &args.metrics {
            let metrics = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|err| format!("--metrics: cannot listen on {addr}: {err}"))?;
            metrics_addr = Some(metrics.local_addr()?);
            tokio::spawn(ferry_net::metrics::serve(
                metrics,
                ferry_confignode::metrics::endpoints(member.clone()),
                acceptor.clone(),
                stopped.clone(),
            ));
        }
        let serving = tokio::spawn(ferry_confignode::server::serve(
            member.clone(),
            listener,
            acceptor,
            stopped,
        ));
        // The first stdout line is a contract: tools and tests read the address from it.
        let mut stdout = std::io::stdout();
        writeln!(stdout, "{}", StartupLine::new(StartupKind::Listening, addr))?;
        if let Some(metrics) = metrics_addr {
            writeln!(stdout, "{}", StartupLine::new(StartupKind::Metrics, metrics))?;
        }
        stdout.flush()?;
        tracing::info!("config member {}: SIGINT or SIGTERM stops it", args.id);
        ferry_net::signal::terminated().await?;
        let _ = stop.send(true);
        let _ = serving.await;
        member.shutdown().await;
        Ok(())
    });
    result
}
