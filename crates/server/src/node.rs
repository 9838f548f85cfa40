//! State shared by every thread of the storage node.

use ferry_net::histogram::LatencyHistograms;
use ferry_proto::TenantId;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use ferry_func::Registry;
use ferry_store::TenantStore;

use crate::config::{ServerConfig, TenantConfig};
use crate::stats::{NodeCounters, TenantCounters};
use crate::worker::Pool;

/// One tenant: its data, credentials, home core and counters.
pub(crate) struct TenantState {
    /// Tenant id.
    pub(crate) id: TenantId,
    /// Secret token for `hello`.
    token: Vec<u8>,
    /// Worker whose queue receives this tenant's requests.
    pub(crate) home: usize,
    /// Its tables.
    pub(crate) store: TenantStore,
    /// Its counters.
    pub(crate) counters: TenantCounters,
    /// The node's latency histograms (shared by every tenant: one set per node).
    pub(crate) latency: Arc<LatencyHistograms>,
    /// Its invocations by function, for FUNCTION STATS.
    pub(crate) functions: crate::function_stats::FunctionStats,
    /// Told after each RESP turn, which may have written: blocking pops try again.
    pub(crate) written: tokio::sync::Notify,
    /// Its Lua calls running now, for FUNCTION KILL and SCRIPT KILL.
    pub(crate) calls: Arc<ferry_lua::kill::RunningCalls>,
}

impl TenantState {
    /// A tenant outside any node, for unit tests of what runs over its store.
    #[cfg(test)]
    pub(crate) fn for_test(id: u32, quota_bytes: u64) -> TenantState {
        TenantState {
            id: TenantId(id),
            token: Vec::new(),
            home: 0,
            store: TenantStore::new(quota_bytes),
            counters: TenantCounters::default(),
            latency: Arc::default(),
            functions: Default::default(),
            written: tokio::sync::Notify::new(),
            calls: Arc::default(),
        }
    }

    /// Compares tokens in time independent of where they differ, so response timing does
    /// not leak a token byte by byte.
    pub(crate) fn token_matches(&self, token: &[u8]) -> bool {
        ferry_net::preauth::token_matches(&self.token, token)
    }
}

/// A name for a tenant's version clock on this node that no other node, and no restart of
/// this one, gives it: readers carrying snapshots of several nodes tell them apart by it.
fn clock_id(tenant: TenantId) -> u64 {
    let started_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64);
    let process = u64::from(std::process::id());
    ferry_func::args::mix64(started_ns ^ (process << 32) ^ ferry_func::args::mix64(u64::from(tenant.0)))
}

/// Everything the threads of one node share.
pub(crate) struct Node {
    /// Tenants by id; fixed at start.
    pub(crate) tenants: HashMap<TenantId, Arc<TenantState>>,
    /// Storage functions by name.
    pub(crate) registry: Registry,
    /// The cores and native workers: queues and threads.
    pub(crate) pool: Pool,
    /// Node-wide counters.
    pub(crate) counters: NodeCounters,
    /// CPU budget of one invocation.
    pub(crate) invoke_budget_ns: u64,
    /// How long one poll runs before its next access yields.
    pub(crate) poll_slice: std::time::Duration,
    /// Its connections over both listeners: counters, authenticated seats (at most
    /// `max_connections`), and those waiting to authenticate.
    pub(crate) connections: Arc<ferry_net::connections::Connections>,
    /// This node's place in a cluster, if any.
    pub(crate) cluster: Option<Arc<crate::routing::ClusterRole>>,
    /// ASFP pushback thresholds.
    pub(crate) pushback: crate::config::PushbackConfig,
    /// Whether an idle core runs a request at once, on the connection that read it.
    pub(crate) inline_data_ops: bool,
    /// Start time; worker timestamps are nanoseconds since it.
    pub(crate) epoch: Instant,
    /// Latency from a request's decoding to its answer, by operation and status.
    pub(crate) latency: Arc<LatencyHistograms>,
    /// The write-ahead log, when the node has a data dir.
    pub(crate) durable: Option<crate::durable::Durable>,
    /// Replication's state, once started (a node with a log and `replication` set).
    pub(crate) replication: std::sync::OnceLock<crate::replica::ReplicationState>,
    /// The tenant a RESP connection starts signed in as, if any.
    pub(crate) resp_default_tenant: Option<TenantId>,
    /// What a replica copied from its primary before it opened its data dir.
    pub(crate) copied: Option<ferry_replication::BootstrapReport>,
}

impl Node {
    pub(crate) fn new(config: &ServerConfig, registry: Registry) -> Node {
        let latency = Arc::new(LatencyHistograms::default());
        let tenants = config
            .tenants
            .iter()
            .enumerate()
            .map(|(index, tenant)| {
                let state = TenantState {
                    id: tenant.id,
                    token: tenant.token.as_bytes().to_vec(),
                    home: config.home_core(index),
                    store: tenant_store(tenant),
                    counters: TenantCounters::default(),
                    latency: Arc::clone(&latency),
                    functions: Default::default(),
                    written: tokio::sync::Notify::new(),
                    calls: Arc::default(),
                };
                (tenant.id, Arc::new(state))
            })
            .collect();
        Node {
            tenants,
            registry,
            pool: Pool::new(config.cores, config.queue_capacity, config.scheduling),
            counters: NodeCounters::default(),
            invoke_budget_ns: config.invoke_budget.as_nanos() as u64,
            poll_slice: config.poll_slice,
            connections: ferry_net::connections::Connections::new(
                config.max_connections,
                config.max_unauthenticated,
                config.hello_timeout,
            ),
            cluster: config.cluster.clone().map(Arc::new),
            inline_data_ops: config.inline_data_ops,
            pushback: config.pushback.clone(),
            epoch: Instant::now(),
            latency,
            durable: None,
            replication: std::sync::OnceLock::new(),
            resp_default_tenant: config.resp_default_tenant,
            copied: None,
        }
    }

    /// A node over `config`'s data dir, if it has one: the log replayed into the tenants'
    /// stores and journalling their commits.
    pub(crate) fn open(config: &ServerConfig, registry: Registry) -> Result<Node, ferry_wal::WalError> {
        let mut node = Node::new(config, registry);
        if let Some(durability) = &config.durability {
            let mut read_only = None;
            if let Some(replication) = &config.replication {
                node.copied = crate::replica::copy_if_needed(replication, durability)?;
                read_only = replication.primary.as_ref().map(|primary| format!("of {primary}"));
            }
            node.durable = Some(crate::durable::open(durability, &node.tenants, read_only)?);
        }
        Ok(node)
    }

    /// The gate replies pass, when the node has a log.
    pub(crate) fn reply_gate(&self) -> Option<&Arc<ferry_wal::ReplyGate>> {
        self.durable.as_ref().map(|durable| durable.wal.gate())
    }

    /// Nanoseconds since the node started.
    pub(crate) fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }
}

/// A configured tenant's empty store, with its eviction policy.
fn tenant_store(tenant: &TenantConfig) -> TenantStore {
    let store = TenantStore::with_clock_id(tenant.quota_bytes, clock_id(tenant.id));
    store.set_eviction(tenant.maxmemory_policy);
    store.set_clock_ms(crate::store_ctx::unix_time_us() / 1000);
    store
}
