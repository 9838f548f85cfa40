//! Starting, running and stopping a storage node.

use ferry_proto::TenantId;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use thiserror::Error;
use tokio::net::TcpListener;
use tokio::sync::watch;

use ferry_func::Registry;
use ferry_net::metrics::{Sample, Scope};
use ferry_proto::StatEntry;

use crate::config::{ConfigError, ServerConfig};
use crate::listeners::Listeners;
use crate::node::{Node, TenantState};
use crate::worker;

/// How long a graceful shutdown waits for queued work and unsent answers, beyond the
/// invocation budget, before it stops anyway.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Why a node could not start.
#[derive(Debug, Error)]
pub enum ServerError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// Address asked for.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Threads or the I/O runtime could not be started.
    #[error("cannot start the node: {0}")]
    Start(std::io::Error),
    /// The data dir cannot be used, or its log cannot be replayed.
    #[error("{0}")]
    DataDir(#[from] ferry_wal::WalError),
    /// The TLS certificate, key or client CA cannot be used.
    #[error("TLS: {0}")]
    Tls(#[from] ferry_net::tls::TlsError),
}

/// A running storage node. Dropping it shuts the node down.
pub struct ServerHandle {
    local_addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    resp_addr: Option<SocketAddr>,
    replication_addr: Option<SocketAddr>,
    node: Arc<Node>,
    runtime: Option<tokio::runtime::Runtime>,
    shutdown: watch::Sender<bool>,
    /// Why the node cannot go on serving (a replica that can no longer follow its
    /// primary), once that happens.
    fatal: watch::Receiver<Option<String>>,
}

/// Starts a storage node: binds, starts the cores, the native workers, the watchdog and the
/// I/O threads.
/// Returns once the node accepts connections.
pub fn start(config: ServerConfig, registry: Registry) -> Result<ServerHandle, ServerError> {
    config.validate()?;
    let listeners = Listeners::bind(&config)?;
    start_on(config, registry, listeners)
}

/// Starts a storage node on listeners already bound (the addresses in `config` are not
/// used). Returns once the node accepts connections.
pub fn start_on(config: ServerConfig, registry: Registry, listeners: Listeners) -> Result<ServerHandle, ServerError> {
    config.validate()?;
    // Read first: a bad certificate fails the start before any thread or data dir.
    let tls = config.tls.as_ref().map(|tls| tls.load()).transpose()?;
    install_worker_panic_hook();
    match config.spin_iters_per_ms {
        Some(rate) => ferry_func::work::set_iters_per_ms(rate),
        None => {
            ferry_func::work::calibrate(|work| {
                let started = Instant::now();
                work();
                started.elapsed().as_nanos() as u64
            });
        }
    }
    let Listeners {
        ferry: listener,
        resp: resp_listener,
        metrics: metrics_listener,
        replication: replication_listener,
    } = listeners;
    let replication_listener = match replication_listener {
        Some(listener) => Some(listener),
        None => crate::listeners::replication_listen(&config)
            .map(crate::listeners::bind)
            .transpose()?,
    };
    let replication_addr = match &replication_listener {
        Some(listener) => Some(listener.local_addr().map_err(ServerError::Start)?),
        None => None,
    };
    let local_addr = listener.local_addr().map_err(ServerError::Start)?;
    let resp_addr = match &resp_listener {
        Some(listener) => Some(listener.local_addr().map_err(ServerError::Start)?),
        None => None,
    };
    let metrics_addr = match &metrics_listener {
        Some(listener) => Some(listener.local_addr().map_err(ServerError::Start)?),
        None => None,
    };
    let node = Arc::new(Node::open(&config, registry)?);
    let tls = tls.map(|tls| ferry_net::tls::Acceptor::new(tls, Arc::clone(&node.connections)));
    for index in 0..node.pool.workers() {
        worker::spawn_worker(Arc::clone(&node), index).map_err(ServerError::Start)?;
    }
    crate::watchdog::spawn_watchdog(Arc::clone(&node)).map_err(ServerError::Start)?;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.io_threads)
        .thread_name("ferry-io")
        .enable_all()
        .build()
        .map_err(ServerError::Start)?;
    let (shutdown, shutdown_rx) = watch::channel(false);
    let (fatal_tx, fatal) = watch::channel(None);
    let fatal_tx = Arc::new(fatal_tx);
    if let Some(replication) = &config.replication {
        let listener = match replication_listener {
            Some(listener) => {
                let _guard = runtime.enter();
                Some(TcpListener::from_std(listener).map_err(ServerError::Start)?)
            }
            None => None,
        };
        let (state, follower) = crate::replica::start(
            replication,
            &node,
            listener,
            tls.clone(),
            &runtime,
            shutdown_rx.clone(),
            Arc::clone(&fatal_tx),
        )?;
        let source = state.source.clone();
        let _ = node.replication.set(state);
        let membership = node
            .cluster
            .as_ref()
            .and_then(|role| Some((role.node_id.clone(), role.membership.clone()?, Arc::clone(&role.frozen))));
        if let (Some((node_id, membership, frozen)), Some(durable)) = (membership, &node.durable) {
            // Slots being handed to another node are refused at the log too, so a commit
            // routed before the freeze cannot land after it; and so is every write once
            // the lease has lapsed, so a commit admitted under the lease cannot land after
            // it either (and after it, the group may have promoted a replica).
            let filter_frozen = Arc::clone(&frozen);
            let lease = Arc::clone(&membership.lease);
            durable.wal.set_key_filter(Arc::new(move |key: &[u8]| {
                filter_frozen
                    .refusal(key)
                    .or_else(|| lease.lapsed().then(|| crate::routing::NO_LEASE.to_string()))
            }));
            let mut tenants: Vec<_> = node.tenants.iter().map(|(id, t)| (*id, Arc::clone(t))).collect();
            tenants.sort_by_key(|(id, _)| *id);
            let mover = Arc::new(crate::moves::Mover {
                node_id: node_id.clone(),
                tenants,
                wal: Arc::clone(&durable.wal),
                frozen,
                configs: membership.configs.clone(),
                client: membership.client.clone(),
                replication: replication.clone(),
                freezes: Default::default(),
                importing: Default::default(),
            });
            if let Some(source) = &source {
                source.serve_slots(Arc::clone(&mover) as _);
            }
            let member = crate::membership::Member {
                node_id,
                client: membership.client,
                configs: membership.configs,
                lease: membership.lease,
                wal: Arc::clone(&durable.wal),
                follower,
                ack_replica: replication.ack == crate::replica::Ack::Replica,
                fatal: Arc::clone(&fatal_tx),
                mover: Some(mover),
                node: Arc::downgrade(&node),
                incarnation: rand::random::<u64>().max(1),
            };
            runtime.spawn(member.run(shutdown_rx.clone()));
        }
    }
    let listener = {
        let _guard = runtime.enter();
        TcpListener::from_std(listener).map_err(ServerError::Start)?
    };
    if let Some(listener) = metrics_listener {
        let listener = {
            let _guard = runtime.enter();
            TcpListener::from_std(listener).map_err(ServerError::Start)?
        };
        runtime.spawn(ferry_net::metrics::serve(
            listener,
            crate::metrics::endpoints(&node),
            tls.clone(),
            shutdown_rx.clone(),
        ));
    }
    if let Some(listener) = resp_listener {
        let listener = {
            let _guard = runtime.enter();
            TcpListener::from_std(listener).map_err(ServerError::Start)?
        };
        runtime.spawn(ferry_net::resp::serve(
            Arc::clone(&node),
            listener,
            tls.clone(),
            shutdown_rx.clone(),
        ));
    }
    runtime.spawn(ferry_net::door::serve(Arc::clone(&node), listener, tls, shutdown_rx));
    Ok(ServerHandle {
        local_addr,
        metrics_addr,
        resp_addr,
        replication_addr,
        node,
        runtime: Some(runtime),
        shutdown,
        fatal,
    })
}

/// Makes a panic on a worker thread (a storage function's bug, caught and answered
/// `function_failed`) print one line instead of a backtrace: symbolising a backtrace takes
/// longer than an invocation's budget and would stall the worker. Panics on any other
/// thread still reach the previous hook unchanged.
fn install_worker_panic_hook() {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let thread = std::thread::current();
            match thread.name() {
                Some(name) if name.starts_with(worker::WORKER_THREAD_PREFIX) => {
                    let location = info
                        .location()
                        .map(|l| format!(" at {}:{}", l.file(), l.line()))
                        .unwrap_or_default();
                    tracing::warn!(
                        thread = name,
                        "storage function panicked{location}: {}",
                        ferry_func::registry::panic_text(info.payload())
                    );
                }
                _ => previous(info),
            }
        }));
    });
}

/// The counters a tenant may see: its own, and the node's (never another tenant's).
pub(crate) fn stats_for(node: &Node, tenant: &TenantState) -> Vec<StatEntry> {
    let mut out = Vec::new();
    tenant_stats(tenant, &mut out);
    node_stats(node, &mut out);
    tenant.counters.report(tenant.id, &mut out);
    ferry_net::metrics::sample::stats(&out)
}

/// One tenant's store counters (`tenant.ID.…`; the request counters come from
/// `TenantCounters::report`).
pub(crate) fn tenant_stats(tenant: &TenantState, out: &mut Vec<Sample>) {
    let scope = || Scope::Tenant(tenant.id);
    let store = tenant.store.stats();
    out.extend([
        Sample::gauge(scope(), "home_core", tenant.home as u64),
        Sample::gauge(scope(), "tables", store.tables),
        Sample::gauge(scope(), "objects", store.objects),
        Sample::gauge(scope(), "used_bytes", store.used_bytes),
        Sample::gauge(scope(), "quota_bytes", store.quota_bytes),
        Sample::counter(scope(), "commits", store.commits),
        Sample::counter(scope(), "conflicts", store.conflicts),
        Sample::counter(scope(), "evicted_keys", store.evicted_keys),
    ]);
}

/// The node's and its workers' counters (`node.…`, `worker.INDEX.…`).
pub(crate) fn node_stats(node: &Node, out: &mut Vec<Sample>) {
    const NODE: Scope = Scope::Process("node");
    out.push(Sample::gauge(NODE, "workers", node.pool.cores() as u64));
    out.push(Sample::counter(NODE, "uptime_ns", node.now_ns()));
    out.extend(node.connections.counters.samples(&NODE));
    out.push(Sample::gauge(
        NODE,
        "connections_waiting_hello",
        node.connections.preauth.waiting() as u64,
    ));
    out.push(Sample::counter(
        NODE,
        "worker_replacements",
        node.counters.worker_replacements.load(Ordering::Relaxed),
    ));
    out.push(Sample::gauge(
        NODE,
        "is_primary",
        u64::from(crate::metrics::is_primary(node)),
    ));
    if let Some(role) = &node.cluster {
        let map = role.map();
        out.push(Sample::gauge(NODE, "epoch", map.epoch()));
        let slots = map.node(&role.node_id).map_or(0, |entry| {
            entry
                .slots
                .iter()
                .map(|&(first, last)| u64::from(last - first) + 1)
                .sum()
        });
        out.push(Sample::gauge(NODE, "slots", slots));
    }
    if let Some(durable) = &node.durable {
        out.push(Sample::gauge(NODE, "log_appended_lsn", durable.wal.appended_lsn()));
    }
    if let Some(replication) = node.replication.get() {
        if let Some(source) = &replication.source {
            out.push(Sample::gauge(
                NODE,
                "replicas_connected",
                source.replicas.load(Ordering::Relaxed) as u64,
            ));
            out.push(Sample::gauge(
                NODE,
                "replica_acked_lsn",
                source.replica_acked_lsn.load(Ordering::Relaxed),
            ));
        }
        if let Some(follower) = &replication.follower {
            out.push(Sample::gauge(
                NODE,
                "primary_connected",
                u64::from(follower.connected.load(Ordering::Relaxed)),
            ));
            out.push(Sample::gauge(
                NODE,
                "primary_end_lsn",
                follower.primary_end_lsn.load(Ordering::Relaxed),
            ));
        }
    }
    for (index, slot) in node.pool.slots.iter().enumerate() {
        let counters = &slot.counters;
        out.extend([
            Sample::gauge(Scope::Worker(index), "queue_len", node.pool.queue_len(index) as u64),
            Sample::counter(
                Scope::Worker(index),
                "tasks_own",
                counters.tasks_own.load(Ordering::Relaxed),
            ),
            Sample::counter(
                Scope::Worker(index),
                "tasks_stolen",
                counters.tasks_stolen.load(Ordering::Relaxed),
            ),
            // Run by the connection that read them, on its core: no hand-off.
            Sample::counter(
                Scope::Worker(index),
                "tasks_inline",
                counters.tasks_inline.load(Ordering::Relaxed),
            ),
            // Queued here from another thread (tasks_own counts every queued task run).
            Sample::counter(
                Scope::Worker(index),
                "tasks_handed",
                counters.tasks_handed.load(Ordering::Relaxed),
            ),
            Sample::counter(
                Scope::Worker(index),
                "busy_ns",
                counters.busy_ns.load(Ordering::Relaxed),
            ),
        ]);
    }
}

impl ServerHandle {
    /// The address the node listens on (with the real port when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Where `GET /metrics` is served, if it is.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// Where RESP is served, if it is.
    pub fn resp_addr(&self) -> Option<SocketAddr> {
        self.resp_addr
    }

    /// Where replicas pull this node's log, if it serves them.
    pub fn replication_addr(&self) -> Option<SocketAddr> {
        self.replication_addr
    }

    /// What a replica copied from its primary before it started (none: nothing needed
    /// copying, or the node is no replica).
    pub fn copied(&self) -> Option<&ferry_replication::BootstrapReport> {
        self.node.copied.as_ref()
    }

    /// Blocks until SIGINT or SIGTERM arrives.
    pub fn wait_for_signal(&self) -> std::io::Result<()> {
        let runtime = self.runtime.as_ref().expect("runtime lives until shutdown");
        runtime.block_on(ferry_net::signal::terminated())
    }

    /// Blocks until SIGINT or SIGTERM arrives (`Ok(None)`) or the node cannot go on
    /// (`Ok(Some(why))`: a replica that must copy its primary again on its next start).
    pub fn wait_for_signal_or_failure(&self) -> std::io::Result<Option<String>> {
        let runtime = self.runtime.as_ref().expect("runtime lives until shutdown");
        let mut fatal = self.fatal.clone();
        runtime.block_on(async move {
            tokio::select! {
                signalled = ferry_net::signal::terminated() => signalled.map(|()| None),
                failed = async {
                    match fatal.wait_for(Option::is_some).await {
                        Ok(why) => why.clone(),
                        // Nothing can fail the node (no follower): wait for the signal.
                        Err(_) => std::future::pending().await,
                    }
                } => Ok(failed),
            }
        })
    }

    /// Every object of a tenant's table, sorted by key, as (key, version, value): lets
    /// in-process tests compare state directly.
    pub fn table_snapshot(&self, tenant: TenantId, table: &str) -> Vec<(Bytes, u64, Bytes)> {
        self.node
            .tenants
            .get(&tenant)
            .map(|state| state.store.table_snapshot(table))
            .unwrap_or_default()
    }

    /// Graceful shutdown: stop accepting and reading, finish every queued request and
    /// suspended invocation, send their answers, then stop.
    pub fn shutdown(mut self) {
        self.stop(true);
    }

    fn stop(&mut self, graceful: bool) {
        let Some(runtime) = self.runtime.take() else {
            return;
        };
        let _ = self.shutdown.send(true);
        self.node.pool.begin_shutdown();
        if graceful {
            let deadline = Instant::now() + SHUTDOWN_GRACE + Duration::from_nanos(self.node.invoke_budget_ns);
            while Instant::now() < deadline && !self.drained() {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        if tokio::runtime::Handle::try_current().is_ok() {
            // Called from async code (e.g. a test): blocking on the runtime is not allowed.
            runtime.shutdown_background();
        } else {
            runtime.shutdown_timeout(Duration::from_millis(100));
        }
        self.close_log();
    }

    /// Writes and syncs the log and lets go of the data dir (a restart may take it now).
    fn close_log(&self) {
        if let Some(durable) = &self.node.durable {
            durable.close();
        }
    }

    /// What the node recovered from its data dir on start (the snapshots, the log), and
    /// how long it took.
    pub fn recovered(&self) -> Option<(&ferry_wal::Restored, &ferry_wal::Recovered, Duration)> {
        self.node
            .durable
            .as_ref()
            .map(|durable| (&durable.restored, &durable.recovered, durable.recovery_time))
    }

    /// Snapshots finished since the node started, and the last one's result (none without
    /// a data dir).
    pub fn snapshots(&self) -> Option<(u64, Option<ferry_wal::CheckpointResult>)> {
        self.node.durable.as_ref().map(|durable| durable.checkpointer.last())
    }

    /// Nothing queued, nothing running, every connection closed after its last answer.
    fn drained(&self) -> bool {
        let pool = &self.node.pool;
        let idle = (0..pool.workers()).all(|index| {
            pool.queue_len(index) == 0
                && pool.slots[index].suspended.load(Ordering::SeqCst) == 0
                && pool.slots[index].current.lock().is_none()
        });
        idle && self.node.connections.counters.open.load(Ordering::SeqCst) == 0
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        // Dropping must not block an async caller for long: no grace period here.
        if let Some(runtime) = self.runtime.take() {
            let _ = self.shutdown.send(true);
            self.node.pool.begin_shutdown();
            runtime.shutdown_background();
            self.close_log();
        }
    }
}
