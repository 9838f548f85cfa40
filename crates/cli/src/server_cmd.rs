//! `ferry server`: run a storage node until SIGINT or SIGTERM.

use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use ferry_server::config::{parse_tenant_flag, ConfigFile, ServerConfig};
use ferry_server::Durability;
use ferry_wal::FsyncMode;

use crate::CmdResult;

/// Address used when neither the flag nor the config file gives one.
const DEFAULT_LISTEN: &str = "127.0.0.1:7700";

/// Flags of `ferry server`. Flags override the config file.
#[derive(clap::Args)]
pub struct ServerArgs {
    /// Address to listen on; port 0 picks a free port (printed on the first line).
    #[arg(long)]
    listen: Option<String>,
    /// Worker threads ("cores"), each with its own queue.
    #[arg(long)]
    cores: Option<usize>,
    /// TOML config file (listen, cores, io_threads, queue_capacity, invoke_budget_ms,
    /// max_connections, hello_timeout_ms, max_unauthenticated, default_tenant, data_dir, fsync,
    /// max_log_bytes, snapshot_log_bytes, tls_cert, tls_key, tls_client_ca,
    /// tls_require_client_cert, [[tenant]] id/token/quota_bytes/home_core/maxmemory_policy).
    #[arg(long)]
    config: Option<PathBuf>,
    /// A tenant as ID:TOKEN; repeatable. Added to those of the config file.
    #[arg(long = "tenant", value_name = "ID:TOKEN")]
    tenants: Vec<String>,
    /// Threads that accept connections (then handed to the cores) and serve the metrics,
    /// replication and config-group links.
    #[arg(long)]
    io_threads: Option<usize>,
    /// Also serve the soak's storage function (`ferry check --cluster` starts its
    /// cluster so).
    #[arg(long, hide = true)]
    chaos_functions: bool,
    /// Depth of each worker's queue before requests are refused with `overloaded`.
    #[arg(long)]
    queue_capacity: Option<usize>,
    /// CPU-time budget of one server-side invocation, a Lua call's time limit too (e.g.
    /// 100ms; 1ms to 60s).
    #[arg(long, value_parser = crate::parse_std_duration)]
    invoke_budget: Option<Duration>,
    #[command(flatten)]
    limits: crate::limits_args::ConnectionLimitArgs,
    /// Pin the whole node to these CPUs (e.g. 0 or 0-1).
    #[arg(long)]
    cpu_set: Option<String>,
    /// Keep the --cpu-set CPUs from idling: one idle-priority spinning thread per CPU, which
    /// runs only when the node does not (on VMs a halted vCPU takes milliseconds to wake).
    #[arg(long, requires = "cpu_set")]
    keep_warm: bool,
    /// Emulated-work calibration to use instead of measuring (iterations per ms).
    #[arg(long)]
    spin_iters_per_ms: Option<u64>,
    /// ASFP pushback: compute credit D per data access (e.g. 5us); an invocation that
    /// allows pushback is handed back when its compute so far exceeds accesses × D.
    #[arg(long, value_parser = crate::parse_std_duration)]
    pushback_credit: Option<Duration>,
    /// ASFP pushback: suspended invocations a worker must hold before pushing back.
    #[arg(long)]
    pushback_old_min: Option<usize>,
    /// ASFP pushback: invocations that must be waiting in the worker's queue.
    #[arg(long)]
    pushback_new_min: Option<usize>,
    /// ASFP pushback: invocations a worker keeps after pushing one back.
    #[arg(long)]
    pushback_keep_min: Option<usize>,
    /// Queue every request in its tenant's lane of its core, even when the core is idle
    /// (by default an idle core runs it at once, on the connection; for measurements).
    #[arg(long)]
    no_inline_data_ops: bool,
    /// Serve as one node of a sharded cluster: the cluster map (TOML: [[node]] id, addr,
    /// slots = ["0-8191", ...]); keys of other nodes' slots are refused with `moved`.
    #[arg(long, requires = "node_id", conflicts_with = "config_group")]
    cluster_map: Option<PathBuf>,
    /// Serve as one node of a cluster whose configuration the config group holds (`ferry
    /// config` members, as HOST:PORT separated by commas): the node waits for the first
    /// configuration, then follows each new epoch's map.
    #[arg(long, requires = "node_id")]
    config_group: Option<String>,
    /// Serve Prometheus metrics (`GET /metrics`) and the probes `GET /healthz` and
    /// `GET /readyz` on this address (port 0: any free one;
    /// printed as `metrics on HOST:PORT` after the `listening on` line).
    #[arg(long)]
    metrics: Option<String>,
    /// Speak RESP (redis-cli, redis-benchmark, Redis clients) on this address too (port 0:
    /// any free one; printed as `resp on HOST:PORT` right after the `listening on` line).
    #[arg(long)]
    resp: Option<String>,
    /// Sign RESP connections in as this tenant before any AUTH (Redis's `default` user
    /// with no password), for clients and test suites that send none; off by default.
    #[arg(long, value_name = "ID")]
    default_tenant: Option<u32>,
    /// Serve the ferry protocol on this inherited listening socket (a file descriptor)
    /// instead of binding --listen: how `ferry cluster up` hands each node the socket it
    /// bound for the cluster map.
    #[arg(long)]
    listen_fd: Option<i32>,
    /// Serve RESP on this inherited listening socket instead of binding --resp.
    #[arg(long)]
    resp_fd: Option<i32>,
    /// This node's id in --cluster-map or in the config group's configuration.
    #[arg(long)]
    node_id: Option<String>,
    /// Keep a write-ahead log of every commit in this directory (it must exist) and recover
    /// from it on start; without it the node keeps everything in memory only.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// When the log is synced to disk: `always` (before any reply that reveals a write:
    /// survives power loss), `everysec` (written before the reply, synced each second:
    /// survives kill -9, power loss may lose about a second) or `no` (written before the
    /// reply, synced by the OS: survives kill -9). Default everysec.
    #[arg(long, value_parser = ["always", "everysec", "no"])]
    fsync: Option<String>,
    /// Most bytes of log on disk; commits past it are refused (reads are still served).
    #[arg(long)]
    max_log_bytes: Option<u64>,
    /// Take a snapshot of every tenant, and remove the log it makes unneeded, each time
    /// the log grows by this many bytes (default 256 MiB; at most half of
    /// --max-log-bytes). BGSAVE and SAVE take one on demand.
    #[arg(long)]
    snapshot_log_bytes: Option<u64>,
    #[command(flatten)]
    tls: crate::tls_args::ServeTlsArgs,
    #[command(flatten)]
    replication: ReplicationArgs,
}

/// Log shipping between a primary and its replicas (both need --data-dir).
#[derive(clap::Args)]
struct ReplicationArgs {
    /// Serve this node's log to replicas on this address (port 0: any free one; printed
    /// as `replication on HOST:PORT`). Over TLS when the node's listeners are.
    #[arg(long, value_name = "ADDR")]
    replication_listen: Option<String>,
    /// Serve replication on this inherited listening socket instead of binding
    /// --replication-listen (how `ferry cluster up` hands it over).
    #[arg(long, hide = true)]
    replication_fd: Option<i32>,
    /// Be a replica of the primary whose replication address this is: copy its snapshots
    /// and log when this data dir holds nothing yet, then every record it logs. The node
    /// serves reads and refuses writes (READONLY). Over TLS with --tls-ca. With
    /// --config-group the configuration says whom a node copies instead.
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "config_group")]
    replica_of: Option<String>,
    /// The secret every replication link of the cluster presents (1-1024 bytes); needed
    /// with --replication-listen and --replica-of.
    #[arg(long, value_name = "TOKEN")]
    replication_token: Option<String>,
    /// When a write is acknowledged: `primary` (once this node's log holds it as --fsync
    /// promises) or `replica` (once a replica's log holds it too; with no replica
    /// following, replies that may reveal a write wait).
    #[arg(long, value_parser = ["primary", "replica"], default_value = "primary")]
    ack: String,
    /// Dial the primary (--replica-of) and the config group (--config-group) over TLS,
    /// trusting only these CAs (PEM); --tls-cert and --tls-key are presented when asked
    /// for a client certificate.
    #[arg(long, value_name = "FILE")]
    tls_ca: Option<PathBuf>,
}

impl ReplicationArgs {
    /// The node's replication settings, if it replicates.
    fn replication(&self, tls: &crate::tls_args::ServeTlsArgs) -> Result<Option<ferry_server::Replication>, String> {
        let serves = self.replication_listen.is_some() || self.replication_fd.is_some();
        if !serves && self.replica_of.is_none() {
            if self.replication_token.is_some() || self.ack != "primary" {
                return Err("--replication-token and --ack need --replication-listen or --replica-of".into());
            }
            return Ok(None);
        }
        let token = self
            .replication_token
            .clone()
            .ok_or("replication needs --replication-token (the same on the primary and its replicas)")?;
        let listen = match &self.replication_listen {
            Some(addr) => Some(resolve("--replication-listen", addr)?),
            None => None,
        };
        Ok(Some(ferry_server::Replication {
            listen,
            primary: self.replica_of.clone(),
            token,
            ack: self.ack.parse()?,
            tls: self.tls_ca.as_ref().map(|ca| ferry_net::tls::ClientTls {
                ca: ca.clone(),
                identity: tls.identity(),
            }),
            primary_epoch: 0,
        }))
    }
}

/// A node with replication in a config group: what the configuration makes it (the
/// primary of its shard, or a replica copying the primary's replication address), and
/// whether its log must be copied again first (it followed another primary than the
/// shard's current one: a demoted primary, or a replica whose primary changed while it
/// was down).
fn take_place(
    config: &ferry_config::ClusterConfig,
    node_id: &str,
    replication: &mut ferry_server::Replication,
    durability: &Durability,
) -> Result<(), String> {
    use ferry_server::membership::{followed_epoch, must_copy, place_of, record_followed, Place};
    let place = place_of(config, node_id);
    let data_dir = &durability.data_dir;
    let followed = followed_epoch(data_dir);
    let primary_epoch = match &place {
        Place::Absent => {
            return Err(format!(
                "node {node_id} is in no shard of the cluster configuration (epoch {})",
                config.epoch
            ))
        }
        Place::Primary { primary_epoch, .. } => *primary_epoch,
        Place::Replica {
            primary_epoch,
            primary_addr,
            ..
        } => {
            let addr = primary_addr
                .clone()
                .ok_or_else(|| format!("node {node_id}'s primary serves no replication address"))?;
            replication.primary = Some(addr);
            replication.primary_epoch = *primary_epoch;
            *primary_epoch
        }
    };
    if must_copy(&place, followed) {
        tracing::info!(
            followed = followed.unwrap_or_default(),
            primary_epoch,
            "this node's log followed another primary: copying the shard's primary first"
        );
        ferry_replication::request_copy(data_dir).map_err(|err| format!("{}: {err}", data_dir.display()))?;
    }
    if followed != Some(primary_epoch) {
        record_followed(data_dir, primary_epoch).map_err(|err| format!("{}: {err}", data_dir.display()))?;
    }
    Ok(())
}

/// The address flag `flag` (`--listen`, `--resp`, …) names; its errors name the flag.
pub(crate) fn resolve(flag: &str, addr: &str) -> Result<SocketAddr, String> {
    addr.to_socket_addrs()
        .map_err(|err| format!("cannot resolve {flag} {addr:?}: {err}"))?
        .next()
        .ok_or_else(|| format!("{flag} {addr:?} resolves to no address"))
}

/// The data dir and log settings of the flags and the config file (flags win).
fn durability(args: &ServerArgs, file: &ConfigFile) -> Result<Option<Durability>, String> {
    let fsync = args.fsync.clone().or(file.fsync.clone());
    let max_log_bytes = args.max_log_bytes.or(file.max_log_bytes);
    let snapshot_log_bytes = args.snapshot_log_bytes.or(file.snapshot_log_bytes);
    let Some(data_dir) = args.data_dir.clone().or(file.data_dir.clone()) else {
        if fsync.is_some() || max_log_bytes.is_some() || snapshot_log_bytes.is_some() {
            return Err(
                "--fsync, --max-log-bytes and --snapshot-log-bytes need --data-dir (or data_dir in the config file)"
                    .into(),
            );
        }
        return Ok(None);
    };
    if snapshot_log_bytes == Some(0) {
        return Err("--snapshot-log-bytes must be above 0".into());
    }
    let mut durability = Durability::new(data_dir);
    durability.wal.max_log_bytes = max_log_bytes;
    if let Some(bytes) = snapshot_log_bytes {
        durability.snapshot_log_bytes = bytes;
    }
    if let Some(mode) = fsync {
        durability.wal.fsync = mode.parse::<FsyncMode>()?;
    }
    Ok(Some(durability))
}

pub fn run(args: ServerArgs) -> CmdResult {
    let mut _warm = None;
    if let Some(cpu_set) = &args.cpu_set {
        // Before any thread starts, so every worker and I/O thread inherits the mask.
        let cpus = ferry_os::parse_cpu_set(cpu_set)?;
        ferry_os::pin_current_thread(&cpus)?;
        if args.keep_warm {
            _warm = Some(ferry_os::KeepWarm::start(&cpus)?);
        }
    }
    let file = match &args.config {
        Some(path) => ConfigFile::load(path)?,
        None => ConfigFile::default(),
    };
    let listen = match (&args.listen, file.listen) {
        (Some(listen), _) => resolve("--listen", listen)?,
        (None, Some(addr)) => addr,
        (None, None) => resolve("--listen", DEFAULT_LISTEN)?,
    };
    let mut tenants = file.tenants.clone();
    for flag in &args.tenants {
        tenants.push(parse_tenant_flag(flag)?);
    }
    let mut config = ServerConfig::new(listen, args.cores.or(file.cores).unwrap_or(1), tenants);
    if let Some(threads) = args.io_threads.or(file.io_threads) {
        config.io_threads = threads;
    }
    if let Some(capacity) = args.queue_capacity.or(file.queue_capacity) {
        config.queue_capacity = capacity;
    }
    if let Some(budget) = args.invoke_budget.or(file.invoke_budget_ms.map(Duration::from_millis)) {
        config.invoke_budget = budget;
    }
    if let Some(max) = args.limits.max_connections.or(file.max_connections) {
        config.max_connections = max;
    }
    if let Some(timeout) = args
        .limits
        .hello_timeout
        .or(file.hello_timeout_ms.map(Duration::from_millis))
    {
        config.hello_timeout = timeout;
    }
    if let Some(max) = args.limits.max_unauthenticated.or(file.max_unauthenticated) {
        config.max_unauthenticated = max;
    }
    config.spin_iters_per_ms = args.spin_iters_per_ms;
    let pushback = &mut config.pushback;
    if let Some(credit) = args
        .pushback_credit
        .or(file.pushback_credit_ns.map(Duration::from_nanos))
    {
        pushback.credit_per_access = credit;
    }
    if let Some(min) = args.pushback_old_min.or(file.pushback_old_min) {
        pushback.old_invocations_min = min;
    }
    if let Some(min) = args.pushback_new_min.or(file.pushback_new_min) {
        pushback.new_invocations_min = min;
    }
    if let Some(min) = args.pushback_keep_min.or(file.pushback_keep_min) {
        pushback.keep_min = min;
    }
    config.inline_data_ops = !args.no_inline_data_ops;
    if let Some(resp) = &args.resp {
        config.resp_listen = Some(resolve("--resp", resp)?);
    }
    config.resp_default_tenant = args.default_tenant.or(file.default_tenant);
    if config.resp_default_tenant.is_some() && config.resp_listen.is_none() && args.resp_fd.is_none() {
        return Err("--default-tenant needs --resp".into());
    }
    if let Some(metrics) = &args.metrics {
        config.metrics_listen = Some(resolve("--metrics", metrics)?);
    }
    if let (Some(path), Some(node_id)) = (&args.cluster_map, &args.node_id) {
        let text = std::fs::read_to_string(path)
            .map_err(|err| format!("cannot read --cluster-map {}: {err}", path.display()))?;
        let map = ferry_cluster::ClusterMap::parse(&text)?;
        config.cluster = Some(ferry_server::routing::ClusterRole::fixed(map, node_id.clone()));
    }
    config.durability = durability(&args, &file)?;
    config.replication = args.replication.replication(&args.tls)?;
    // Runs the config group's watch for the process's life.
    let mut _following = None;
    if let (Some(group), Some(node_id)) = (&args.config_group, &args.node_id) {
        let group_tls = args.replication.tls_ca.as_ref().map(|ca| ferry_net::tls::ClientTls {
            ca: ca.clone(),
            identity: args.tls.identity(),
        });
        let following = crate::config_cmd::Following::start(group, group_tls.as_ref())?;
        let mut role = ferry_server::routing::ClusterRole::following(following.routes(), node_id.clone());
        if let (Some(replication), Some(durability)) = (&mut config.replication, &config.durability) {
            take_place(&following.configs().borrow(), node_id, replication, durability)?;
            role = role.with_membership(following.client(), following.configs());
        }
        config.cluster = Some(role);
        _following = Some(following);
    }
    if args.node_id.is_some() && config.cluster.is_none() {
        return Err("--node-id needs --cluster-map or --config-group".into());
    }
    // Flags win over the config file, setting by setting.
    config.tls = crate::tls_args::server_tls(
        args.tls.tls_cert.clone().or(file.tls_cert.clone()),
        args.tls.tls_key.clone().or(file.tls_key.clone()),
        args.tls.tls_client_ca.clone().or(file.tls_client_ca.clone()),
        args.tls.tls_require_client_cert || file.tls_require_client_cert.unwrap_or(false),
    )?;
    let replication_fd = args
        .replication
        .replication_fd
        .map(|fd| ferry_os::inherit::inherited_listener(fd).map_err(|err| format!("--replication-fd {fd}: {err}")))
        .transpose()?;
    if let (Some(listener), Some(replication)) = (&replication_fd, &mut config.replication) {
        replication.listen = Some(listener.local_addr()?);
    }
    let handle = match args.listen_fd {
        None if args.resp_fd.is_some() => return Err("--resp-fd needs --listen-fd".into()),
        None if replication_fd.is_some() => return Err("--replication-fd needs --listen-fd".into()),
        None => ferry_server::start(config.clone(), registry(&args)?)?,
        Some(fd) => {
            let inherited = |fd: i32, flag: &str| {
                ferry_os::inherit::inherited_listener(fd).map_err(|err| format!("{flag} {fd}: {err}"))
            };
            let ferry = inherited(fd, "--listen-fd")?;
            let resp = args.resp_fd.map(|fd| inherited(fd, "--resp-fd")).transpose()?;
            config.listen = ferry.local_addr()?;
            config.resp_listen = resp.as_ref().map(|l| l.local_addr()).transpose()?;
            let mut listeners = ferry_server::Listeners::adopt(&config, ferry, resp)?;
            if let Some(listener) = replication_fd {
                listeners = listeners.with_replication(listener)?;
            }
            ferry_server::start_on(config.clone(), registry(&args)?, listeners)?
        }
    };
    // The first stdout line is a contract: tools and tests read the port from it.
    let mut stdout = std::io::stdout();
    writeln!(stdout, "listening on {}", handle.local_addr())?;
    if let Some(resp) = handle.resp_addr() {
        writeln!(stdout, "resp on {resp}")?;
    }
    if let Some(metrics) = handle.metrics_addr() {
        writeln!(stdout, "metrics on {metrics}")?;
    }
    if let Some(replication) = handle.replication_addr() {
        writeln!(stdout, "replication on {replication}")?;
    }
    if let Some(copied) = handle.copied() {
        writeln!(
            stdout,
            "copied the primary: {} snapshots ({} bytes) and {} bytes of log from offset {}",
            copied.snapshots, copied.snapshot_bytes, copied.log_bytes, copied.log_from
        )?;
    }
    if let Some((restored, recovered, took)) = handle.recovered() {
        writeln!(
            stdout,
            "recovered {} objects from {} snapshots ({} bytes) and {} commits ({} bytes of log) in {} ms",
            restored.objects,
            restored.covers.len(),
            restored.bytes,
            recovered.records,
            recovered.bytes,
            took.as_millis()
        )?;
        if let Some(cut) = &recovered.cut {
            writeln!(
                stdout,
                "cut {} bytes of log at offset {}: {}",
                cut.bytes, cut.lsn, cut.why
            )?;
        }
    }
    stdout.flush()?;
    tracing::info!(
        "storage node: {} cores, {} tenants, invoke budget {:?}; SIGINT or SIGTERM stops it",
        config.cores,
        config.tenants.len(),
        config.invoke_budget
    );
    match handle.wait_for_signal_or_failure()? {
        None => {
            tracing::info!("shutting down: finishing queued requests");
            handle.shutdown();
            Ok(())
        }
        // Nothing to finish: what it would answer came from a log it must give up.
        Some(why) => {
            drop(handle);
            Err(why.into())
        }
    }
}

/// The functions the node serves: the builtins and Lua's, and with `--chaos-functions` the
/// soak's program.
fn registry(args: &ServerArgs) -> Result<ferry_func::Registry, String> {
    let mut registry = ferry_lua::registry();
    if args.chaos_functions {
        registry
            .register(ferry_chaos::program::NAME, ferry_chaos::program::run)
            .map_err(|err| err.to_string())?;
    }
    Ok(registry)
}

#[cfg(test)]
mod tests {
    use super::resolve;

    #[test]
    fn an_address_that_does_not_resolve_is_refused_in_the_name_of_its_flag() {
        // No port: refused before any name lookup.
        let err = resolve("--metrics", "127.0.0.1").unwrap_err();
        assert!(err.starts_with("cannot resolve --metrics \"127.0.0.1\""), "{err}");
        assert_eq!(resolve("--resp", "127.0.0.1:7").unwrap().port(), 7);
    }
}
