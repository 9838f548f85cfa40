//! `ferry server`: run a storage node until SIGINT or SIGTERM.

use ferry_os::{StartupKind, StartupLine};
use ferry_server::config::ServerConfig;
use ferry_server::{Ack, Durability};
use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};

use crate::server_settings::{ReplicationSettings, ServerSettings};
use crate::CmdResult;

/// Address used when neither the flag nor the config file gives one.
const DEFAULT_LISTEN: &str = "127.0.0.1:7700";

/// The node's replication settings, if it replicates.
fn replication(
    settings: &ReplicationSettings,
    tls: &crate::tls_args::ServeTlsArgs,
) -> Result<Option<ferry_server::Replication>, String> {
    let serves = settings.replication_listen.is_some() || settings.replication_fd.is_some();
    if !serves && settings.replica_of.is_none() {
        if settings.replication_token.is_some() || settings.ack.is_some_and(|ack| ack != Ack::Primary) {
            return Err("--replication-token and --ack need --replication-listen or --replica-of".into());
        }
        return Ok(None);
    }
    let token = settings
        .replication_token
        .clone()
        .ok_or("replication needs --replication-token (the same on the primary and its replicas)")?;
    let listen = match &settings.replication_listen {
        Some(addr) => Some(resolve("--replication-listen", addr)?),
        None => None,
    };
    Ok(Some(ferry_server::Replication {
        listen,
        primary: settings.replica_of.clone(),
        token,
        ack: settings.ack.unwrap_or_default(),
        tls: settings.tls_ca.as_ref().map(|ca| ferry_net::tls::ClientTls {
            ca: ca.clone(),
            identity: tls.identity(),
        }),
        primary_epoch: 0,
    }))
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

/// The data dir and log settings.
fn durability(settings: &ServerSettings) -> Result<Option<Durability>, String> {
    let Some(data_dir) = settings.data_dir.clone() else {
        if settings.fsync.is_some() || settings.max_log_bytes.is_some() || settings.snapshot_log_bytes.is_some() {
            return Err(
                "--fsync, --max-log-bytes and --snapshot-log-bytes need --data-dir (or data_dir in the config file)"
                    .into(),
            );
        }
        return Ok(None);
    };
    if settings.snapshot_log_bytes == Some(0) {
        return Err("--snapshot-log-bytes must be above 0".into());
    }
    let mut durability = Durability::new(data_dir);
    durability.wal.max_log_bytes = settings.max_log_bytes;
    if let Some(bytes) = settings.snapshot_log_bytes {
        durability.snapshot_log_bytes = bytes;
    }
    if let Some(mode) = settings.fsync {
        durability.wal.fsync = mode;
    }
    Ok(Some(durability))
}

/// The node's configuration from its settings (flags over the config file).
fn server_config(args: &ServerSettings) -> Result<ServerConfig, String> {
    let listen = resolve("--listen", args.listen.as_deref().unwrap_or(DEFAULT_LISTEN))?;
    let mut config = ServerConfig::new(listen, args.cores.unwrap_or(1), args.tenants.clone());
    if let Some(threads) = args.io_threads {
        config.io_threads = threads;
    }
    if let Some(capacity) = args.queue_capacity {
        config.queue_capacity = capacity;
    }
    if let Some(budget) = args.invoke_budget {
        config.invoke_budget = budget;
    }
    if let Some(max) = args.limits.max_connections {
        config.max_connections = max;
    }
    if let Some(timeout) = args.limits.hello_timeout {
        config.hello_timeout = timeout;
    }
    if let Some(max) = args.limits.max_unauthenticated {
        config.max_unauthenticated = max;
    }
    config.spin_iters_per_ms = args.spin_iters_per_ms;
    let pushback = &mut config.pushback;
    if let Some(credit) = args.pushback_credit {
        pushback.credit_per_access = credit;
    }
    if let Some(min) = args.pushback_old_min {
        pushback.old_invocations_min = min;
    }
    if let Some(min) = args.pushback_new_min {
        pushback.new_invocations_min = min;
    }
    if let Some(min) = args.pushback_keep_min {
        pushback.keep_min = min;
    }
    config.inline_data_ops = !args.no_inline_data_ops;
    if let Some(resp) = &args.resp {
        config.resp_listen = Some(resolve("--resp", resp)?);
    }
    config.resp_default_tenant = args.default_tenant;
    if config.resp_default_tenant.is_some() && config.resp_listen.is_none() && args.resp_fd.is_none() {
        return Err("--default-tenant needs --resp".into());
    }
    if let Some(metrics) = &args.metrics {
        config.metrics_listen = Some(resolve("--metrics", metrics)?);
    }
    if let (Some(path), Some(node_id)) = (&args.cluster_map, &args.node_id) {
        let text = std::fs::read_to_string(path)
            .map_err(|err| format!("cannot read --cluster-map {}: {err}", path.display()))?;
        let map = ferry_cluster::ClusterMap::parse(&text)
            .map_err(|err| format!("--cluster-map {}: {err}", path.display()))?;
        config.cluster = Some(ferry_server::routing::ClusterRole::fixed(map, node_id.clone()));
    }
    config.durability = durability(args)?;
    config.replication = replication(&args.replication, &args.tls)?;
    config.tls = args.tls.server_tls()?;
    Ok(config)
}

pub fn run(flags: ServerSettings) -> CmdResult {
    let args = crate::server_settings::layered(&flags)?;
    if args.keep_warm && args.cpu_set.is_none() {
        return Err("--keep-warm needs --cpu-set".into());
    }
    let mut _warm = None;
    if let Some(cpu_set) = &args.cpu_set {
        // Before any thread starts, so every worker and I/O thread inherits the mask.
        let cpus = ferry_os::parse_cpu_set(cpu_set)?;
        ferry_os::pin_current_thread(&cpus)?;
        if args.keep_warm {
            _warm = Some(ferry_os::KeepWarm::start(&cpus)?);
        }
    }
    let mut config = server_config(&args)?;
    // Runs the config group's watch for the process's life.
    let mut _following = None;
    if let (Some(group), Some(node_id)) = (&args.config_group, &args.node_id) {
        let group_tls = args.replication.tls_ca.as_ref().map(|ca| ferry_net::tls::ClientTls {
            ca: ca.clone(),
            identity: args.tls.identity(),
        });
        let following = crate::config_cmd::follow(group, group_tls.as_ref())?;
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
    // The start-up lines are a contract: tools and tests read the addresses from them.
    let mut lines = vec![StartupLine::new(StartupKind::Listening, handle.local_addr())];
    let addresses = [
        (StartupKind::Resp, handle.resp_addr()),
        (StartupKind::Metrics, handle.metrics_addr()),
        (StartupKind::Replication, handle.replication_addr()),
    ];
    lines.extend(
        addresses
            .into_iter()
            .filter_map(|(kind, addr)| addr.map(|addr| StartupLine::new(kind, addr))),
    );
    if let Some(copied) = handle.copied() {
        lines.push(StartupLine::new(
            StartupKind::Copied,
            format_args!(
                "{} snapshots ({} bytes) and {} bytes of log from offset {}",
                copied.snapshots, copied.snapshot_bytes, copied.log_bytes, copied.log_from
            ),
        ));
    }
    if let Some((restored, recovered, took)) = handle.recovered() {
        lines.push(StartupLine::new(
            StartupKind::Recovered,
            format_args!(
                "{} objects from {} snapshots ({} bytes) and {} commits ({} bytes of log) in {} ms",
                restored.objects,
                restored.covers.len(),
                restored.bytes,
                recovered.records,
                recovered.bytes,
                took.as_millis()
            ),
        ));
        if let Some(cut) = &recovered.cut {
            lines.push(StartupLine::new(
                StartupKind::Cut,
                format_args!("{} bytes of log at offset {}: {}", cut.bytes, cut.lsn, cut.why),
            ));
        }
    }
    let mut stdout = std::io::stdout();
    for line in lines {
        writeln!(stdout, "{line}")?;
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
#[cfg(feature = "lab")]
fn registry(args: &ServerSettings) -> Result<ferry_func::Registry, String> {
    let mut registry = ferry_lua::registry();
    if args.chaos_functions {
        registry
            .register(ferry_chaos::program::NAME, ferry_chaos::program::run)
            .map_err(|err| err.to_string())?;
    }
    Ok(registry)
}

/// The functions the node serves: the builtins and Lua's (a production build has no soak).
#[cfg(not(feature = "lab"))]
fn registry(_args: &ServerSettings) -> Result<ferry_func::Registry, String> {
    Ok(ferry_lua::registry())
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
