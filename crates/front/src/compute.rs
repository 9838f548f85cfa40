//! `ferry compute`: a compute node. It runs the invocations sent to it here, over the
//! cluster's data (ship data): today's local runtime, every access going to its key's
//! storage node, writes committed with OCC. Its active workers follow demand between a
//! minimum and a maximum (`workers`).
//!
//! It serves `invoke` (and `hello`, `stats`); data operations belong to the gateway or the
//! storage nodes and are refused. An invocation that asks for its costs (a gateway's) is
//! answered with the costs record: this node's CPU as the app side's, and the storage CPU,
//! round trips and bytes of the gets and commit it sent the storage nodes.

use ferry_proto::TenantId;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ferry_client::{ClientConfig, ClusterClient};
use ferry_cluster::ClusterMap;
use ferry_func::Registry;
use ferry_net::metrics::{Sample, Scope};
use ferry_proto::{Request, Response, Status};
use tokio::sync::watch;

use crate::config::FrontConfig;
use crate::forward::{error_response, invocation_response, not_served};
use crate::handle::FrontHandle;
use crate::listener::{Service, ServiceFuture};
use crate::workers::Workers;
use crate::FrontError;

/// Longest a compute node waits for a storage node's answer.
pub const STORAGE_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// What a compute node needs.
#[derive(Clone)]
pub struct ComputeConfig {
    /// Listening, tenants, limits.
    pub front: FrontConfig,
    /// The storage nodes and their slots: the newest map (`fixed_routes` for a map that
    /// never changes).
    pub cluster: watch::Receiver<Arc<ClusterMap>>,
    /// Fewest active workers.
    pub min_workers: u32,
    /// Most active workers.
    pub max_workers: u32,
    /// The functions it can run.
    pub registry: Registry,
}

struct Compute {
    /// A client of the whole cluster per tenant, authenticated as that tenant.
    tenants: HashMap<TenantId, ClusterClient>,
    workers: Arc<Workers>,
    invocations: AtomicU64,
    failures: AtomicU64,
}

/// Starts a compute node: connects to every storage node as every tenant, then listens.
pub fn start_compute(config: ComputeConfig) -> Result<FrontHandle, FrontError> {
    let workers = Arc::new(Workers::new(config.min_workers, config.max_workers).map_err(FrontError::Config)?);
    let front = config.front.clone();
    crate::handle::start(front, "ferry_compute", move || async move {
        let link_tls = config.front.link_tls.as_ref().map(|tls| tls.load()).transpose()?;
        let mut tenants = HashMap::new();
        for tenant in &config.front.tenants {
            let mut client = ClientConfig::new("", tenant.id, tenant.token.clone());
            client.registry = config.registry.clone();
            client.request_timeout = STORAGE_REQUEST_TIMEOUT;
            client.tls = link_tls.clone();
            let cluster = ClusterClient::follow(config.cluster.clone(), client)
                .await
                .map_err(|err| FrontError::Backend(format!("tenant {}: {err}", tenant.id)))?;
            tenants.insert(tenant.id, cluster);
        }
        let elastic = Arc::clone(&workers);
        tokio::spawn(async move { elastic.elastic_loop().await });
        Ok(Compute {
            tenants,
            workers,
            invocations: AtomicU64::new(0),
            failures: AtomicU64::new(0),
        })
    })
}

impl Service for Compute {
    fn call(self: Arc<Self>, tenant: TenantId, request: Request) -> ServiceFuture {
        Box::pin(async move {
            let Request::Invoke {
                function,
                args,
                trace,
                costs,
                ..
            } = request
            else {
                return not_served("a compute node runs invocations only; send data operations to the gateway");
            };
            if trace {
                return not_served("a compute node does not record traces");
            }
            let Some(cluster) = self.tenants.get(&tenant) else {
                return Response::error(Status::Unauthorized, "unknown tenant");
            };
            let ran = self
                .workers
                .run(async {
                    let outcome = cluster.invoke_local(&function, args).await;
                    let busy_ns = outcome.as_ref().map_or(0, |invocation| invocation.cost.app_cpu_ns);
                    (outcome, busy_ns)
                })
                .await;
            match ran {
                Ok(Ok(invocation)) => {
                    self.invocations.fetch_add(1, Ordering::Relaxed);
                    invocation_response(invocation, costs)
                }
                Ok(Err(err)) => {
                    self.failures.fetch_add(1, Ordering::Relaxed);
                    error_response(err)
                }
                Err(_) => Response::error(Status::Overloaded, "every worker is busy and the wait queue is full"),
            }
        })
    }

    fn workers(&self) -> u32 {
        self.workers.snapshot().0
    }

    fn stats(&self, out: &mut Vec<Sample>) {
        const COMPUTE: Scope = Scope::Process("compute");
        let (active, running, waiting, refused) = self.workers.snapshot();
        out.extend([
            Sample::gauge(COMPUTE, "active_workers", u64::from(active)),
            Sample::gauge(COMPUTE, "running", u64::from(running)),
            Sample::gauge(COMPUTE, "waiting", u64::from(waiting)),
            Sample::counter(COMPUTE, "refused", refused),
            Sample::counter(COMPUTE, "invocations", self.invocations.load(Ordering::Relaxed)),
            Sample::counter(COMPUTE, "invocation_failures", self.failures.load(Ordering::Relaxed)),
        ]);
    }
}
