//! `ferry gateway`: Pyxis' scheduler tier (§III, Fig. 5). Clients send it invocations and
//! data operations over the ferry protocol, with none of ferry's runtime of their own.
//!
//! - Data operations go to the storage node serving their keys, answered as that node
//!   answered (`cross_slot` for keys spanning nodes).
//! - Each invocation passes the tenant's rate limiter and is placed by its policy (the same
//!   state machine the embedded client and the simulator run): ship compute sends it to the
//!   storage node serving its routing key; ship data sends it to a compute node (round
//!   robin over every address the `--compute` names resolve to, `compute_set`), or runs
//!   it here if there is none.
//! - A ship-data run on a compute node comes back with the compute node's costs record:
//!   its CPU is the app side's, the gets and commit it sent are the storage side's CPU and
//!   round trips, so the policy learns the same costs an embedded client measures.
//! - Every answer carries the tenant's current R in its header, so a client admits at the
//!   gateway's rate (`ferry_client::FollowGateway`) and the tenant has one rate loop.
//! - Its metrics carry each tenant's R and X and each function's measured c_i (app CPU
//!   per local run) and s_i (storage CPU per remote run).

use ferry_proto::TenantId;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;

use ferry_client::{Adaptive, Backend, BackendFuture, ClientConfig, ClientError, ClusterClient, Invocation};
use ferry_cluster::ClusterMap;
use ferry_control::{Placement, Policy};
use ferry_func::Registry;
use ferry_net::metrics::{Sample, Scope};
use ferry_proto::{Request, Response, Status};
use tokio::sync::watch;

use crate::compute::STORAGE_REQUEST_TIMEOUT;
use crate::compute_set::ComputeSet;
use crate::config::FrontConfig;
use crate::forward::{error_response, invocation_response, not_served};
use crate::handle::FrontHandle;
use crate::listener::{Service, ServiceFuture};
use crate::FrontError;

/// Builds one tenant's placement policy (each tenant gets its own loops).
pub type PolicyFactory = Arc<dyn Fn() -> Result<Box<dyn Policy>, String> + Send + Sync>;

/// Most distinct functions whose costs the gateway reports (the rest are still placed).
pub const MAX_REPORTED_FUNCTIONS: usize = 256;

/// Weight of the newest sample in a function's moving cost means.
const COST_EWMA_WEIGHT: f64 = 0.05;

/// What a gateway needs.
#[derive(Clone)]
pub struct GatewayConfig {
    /// Listening, tenants, limits.
    pub front: FrontConfig,
    /// The storage nodes and their slots: the newest map (`fixed_routes` for a map that
    /// never changes).
    pub cluster: watch::Receiver<Arc<ClusterMap>>,
    /// `HOST:PORT` of the compute nodes, each standing for every address its host
    /// resolves to, looked up again and again (none: ship-data runs happen in the gateway).
    pub compute_nodes: Vec<String>,
    /// The p99 latency the tenants' policies keep (reported with the metrics).
    pub slo_p99: Duration,
    /// The placement policy of every tenant.
    pub policy: PolicyFactory,
    /// The functions (and their routes) it can place.
    pub registry: Registry,
}

/// Where a tenant's invocations go, for the policy's two placements.
struct Placer {
    cluster: ClusterClient,
    compute: Arc<ComputeSet>,
}

impl Placer {
    /// Ship data: on a compute node (round robin), or here if there is none.
    async fn run_on_compute(&self, function: &str, args: Bytes) -> Result<Invocation, ClientError> {
        let Some(node) = self.compute.pick() else {
            return self.cluster.invoke_local(function, args).await;
        };
        // The compute node's costs record: its own CPU as the app side's, the storage CPU
        // and round trips of the requests it made, as an embedded client's local run.
        let mut invocation = node.invoke_with_costs(function, args).await?;
        invocation.placement = Placement::Local;
        Ok(invocation)
    }
}

impl Backend for Placer {
    fn invoke_remote<'a>(&'a self, function: &'a str, args: Bytes) -> BackendFuture<'a> {
        Box::pin(self.cluster.invoke_remote(function, args))
    }
    fn invoke_local<'a>(&'a self, function: &'a str, args: Bytes) -> BackendFuture<'a> {
        Box::pin(self.run_on_compute(function, args))
    }
    fn invoke_pushable<'a>(&'a self, function: &'a str, args: Bytes) -> BackendFuture<'a> {
        Box::pin(self.cluster.invoke_pushable(function, args))
    }
}

/// Measured costs of one function.
#[derive(Default)]
struct FunctionCosts {
    calls_remote: u64,
    calls_local: u64,
    /// c_i: app CPU per local run, moving mean, ns.
    app_cpu_ns_mean: f64,
    /// s_i: storage CPU per remote run, moving mean, ns.
    storage_cpu_ns_mean: f64,
}

impl FunctionCosts {
    fn record(&mut self, invocation: &Invocation) {
        let mean = |old: f64, new: u64, first: bool| {
            if first {
                new as f64
            } else {
                old + COST_EWMA_WEIGHT * (new as f64 - old)
            }
        };
        // A remote invocation handed back (pushback, or a handoff at another node's key)
        // finished here but was placed remote: it counts, and costs, as remote.
        let placement = if invocation.pushed_back {
            Placement::Remote
        } else {
            invocation.placement
        };
        match placement {
            Placement::Local => {
                self.app_cpu_ns_mean = mean(self.app_cpu_ns_mean, invocation.cost.app_cpu_ns, self.calls_local == 0);
                self.calls_local += 1;
            }
            Placement::Remote => {
                let first = self.calls_remote == 0;
                self.storage_cpu_ns_mean = mean(self.storage_cpu_ns_mean, invocation.cost.storage_cpu_ns, first);
                self.calls_remote += 1;
            }
        }
    }
}

/// A rate as the header's `admission_rate_ops`: whole requests per second, at least 1 (0
/// would say "not a gateway").
fn wire_rate_ops(rate_ops: f64) -> u32 {
    if rate_ops.is_nan() {
        return 1;
    }
    rate_ops.round().clamp(1.0, f64::from(u32::MAX)) as u32
}

struct Gateway {
    tenants: HashMap<TenantId, Adaptive<Placer>>,
    functions: Mutex<HashMap<String, FunctionCosts>>,
    throttled: AtomicU64,
    /// Every tenant's compute nodes (the same names, one set of links per tenant).
    compute: Vec<Arc<ComputeSet>>,
    slo_p99: Duration,
}

/// Starts a gateway: connects to every storage and compute node as every tenant, then
/// listens.
pub fn start_gateway(config: GatewayConfig) -> Result<FrontHandle, FrontError> {
    let front = config.front.clone();
    crate::handle::start(front, "ferry_gateway", move || async move {
        let link_tls = config.front.link_tls.as_ref().map(|tls| tls.load()).transpose()?;
        let mut tenants = HashMap::new();
        let mut compute_sets = Vec::new();
        for tenant in &config.front.tenants {
            let mut client = ClientConfig::new("", tenant.id, tenant.token.clone());
            client.registry = config.registry.clone();
            client.request_timeout = STORAGE_REQUEST_TIMEOUT;
            client.tls = link_tls.clone();
            let backend =
                |what: &str, err: ClientError| FrontError::Backend(format!("tenant {}: {what}: {err}", tenant.id));
            let cluster = ClusterClient::follow(config.cluster.clone(), client.clone())
                .await
                .map_err(|err| backend("storage nodes", err))?;
            let compute = ComputeSet::connect(config.compute_nodes.clone(), client.clone())
                .await
                .map_err(|err| FrontError::Backend(format!("tenant {}: {err}", tenant.id)))?;
            let compute = Arc::new(compute);
            compute_sets.push(Arc::clone(&compute));
            let placer = Placer { cluster, compute };
            let policy = (config.policy)().map_err(FrontError::Config)?;
            let adaptive = Adaptive::new(placer, policy).map_err(|err| FrontError::Config(err.to_string()))?;
            tenants.insert(tenant.id, adaptive);
        }
        if !config.compute_nodes.is_empty() {
            tokio::spawn(crate::compute_set::keep_resolving(compute_sets.clone()));
        }
        Ok(Gateway {
            tenants,
            functions: Mutex::new(HashMap::new()),
            throttled: AtomicU64::new(0),
            compute: compute_sets,
            slo_p99: config.slo_p99,
        })
    })
}

impl Gateway {
    /// The compute nodes it ships data to now (the first tenant's links; every tenant
    /// resolves the same names).
    fn compute_nodes(&self) -> usize {
        self.compute.first().map_or(0, |set| set.len())
    }

    /// Admits, places and runs one invocation; `with_costs`: the client asked for the
    /// costs record.
    async fn invoke(&self, placer: &Adaptive<Placer>, function: String, args: Bytes, with_costs: bool) -> Response {
        match placer.invoke(&function, args).await {
            Ok(invocation) => {
                let mut functions = self.functions.lock();
                if functions.len() < MAX_REPORTED_FUNCTIONS || functions.contains_key(&function) {
                    functions.entry(function).or_default().record(&invocation);
                }
                drop(functions);
                invocation_response(invocation, with_costs)
            }
            Err(err @ ClientError::Throttled { .. }) => {
                self.throttled.fetch_add(1, Ordering::Relaxed);
                error_response(err)
            }
            Err(err) => error_response(err),
        }
    }
}

impl Service for Gateway {
    fn call(self: Arc<Self>, tenant: TenantId, request: Request) -> ServiceFuture {
        Box::pin(async move {
            let Some(placer) = self.tenants.get(&tenant) else {
                return Response::error(Status::Unauthorized, "unknown tenant");
            };
            match request {
                Request::Invoke { trace: true, .. } => not_served("the gateway does not record traces yet"),
                // What changes the catalog reaches every storage node: each keeps its own.
                Request::Invoke { function, args, .. }
                    if [
                        ferry_lua::catalog::LOAD,
                        ferry_lua::catalog::DELETE,
                        ferry_lua::catalog::FLUSH,
                        ferry_lua::catalog::RESTORE,
                        ferry_lua::script::LOAD,
                        ferry_lua::script::FLUSH,
                    ]
                    .contains(&function.as_str()) =>
                {
                    match placer.backend().cluster.invoke_on_every_node(&function, args).await {
                        Ok(invocation) => invocation_response(invocation, false),
                        Err(err) => error_response(err),
                    }
                }
                Request::Invoke {
                    function, args, costs, ..
                } => self.invoke(placer, function, args, costs).await,
                request @ (Request::Get { .. }
                | Request::Put { .. }
                | Request::Delete { .. }
                | Request::MultiGet { .. }
                | Request::ReadPart { .. }
                | Request::Commit { .. }) => match placer.backend().cluster.forward(&request).await {
                    Ok(response) => response,
                    Err(err) => error_response(err),
                },
                Request::Hello { .. } | Request::Stats => not_served("answered by the listener"),
                Request::List { .. } => Response::error(Status::CrossSlot, ferry_proto::LISTING_NEEDS_ONE_NODE),
                Request::Info => not_served("INFO in a function run through the gateway"),
            }
        })
    }

    fn workers(&self) -> u32 {
        self.compute_nodes() as u32
    }

    fn admission_rate_ops(&self, tenant: TenantId) -> u32 {
        self.tenants
            .get(&tenant)
            .map_or(0, |placer| wire_rate_ops(placer.admission_rate_ops()))
    }

    fn stats(&self, out: &mut Vec<Sample>) {
        const GATEWAY: Scope = Scope::Process("gateway");
        out.push(Sample::gauge(GATEWAY, "compute_nodes", self.compute_nodes() as u64));
        out.push(Sample::counter(
            GATEWAY,
            "throttled",
            self.throttled.load(Ordering::Relaxed),
        ));
        out.push(Sample::gauge(GATEWAY, "slo_p99_us", self.slo_p99.as_micros() as u64));
        for (&id, placer) in &self.tenants {
            let state = placer.state();
            out.push(Sample::gauge(
                Scope::Tenant(id),
                "rate_ops",
                state.rate_ops.min(u64::MAX as f64) as u64,
            ));
            out.push(Sample::gauge(
                Scope::Tenant(id),
                "rpc_fraction_ppm",
                (state.rpc_fraction * 1e6) as u64,
            ));
            if let Some(estimate) = state.latency_ns_estimate {
                out.push(Sample::gauge(Scope::Tenant(id), "latency_estimate_ns", estimate as u64));
            }
        }
        for (name, costs) in self.functions.lock().iter() {
            let scope = || Scope::Function(name.clone());
            out.extend([
                Sample::counter(scope(), "calls_remote", costs.calls_remote),
                Sample::counter(scope(), "calls_local", costs.calls_local),
                Sample::gauge(scope(), "app_cpu_ns_mean", costs.app_cpu_ns_mean as u64),
                Sample::gauge(scope(), "storage_cpu_ns_mean", costs.storage_cpu_ns_mean as u64),
            ]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gateway_never_reports_a_rate_of_zero() {
        // 0 in the header means "not a gateway": the lowest rate a gateway sends is 1.
        assert_eq!(wire_rate_ops(0.0), 1);
        assert_eq!(wire_rate_ops(0.4), 1);
        assert_eq!(wire_rate_ops(f64::NAN), 1);
        assert_eq!(wire_rate_ops(299.6), 300);
        assert_eq!(wire_rate_ops(f64::INFINITY), u32::MAX);
        assert_eq!(wire_rate_ops(1e12), u32::MAX);
    }
}
