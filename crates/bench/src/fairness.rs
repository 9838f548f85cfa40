//! `ferry fairness`: how a multi-core node shares its CPU between tenants (Kayak §3.2,
//! §6.3). Several tenants, each pinned to a home core, run different workloads at once with
//! more demand than their share; the node's per-tenant CPU counters give each tenant's share
//! and Jain's index. Then the last tenant stops, and the others' throughput must rise as idle
//! cores steal their work (work conservation).

use ferry_proto::TenantId;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::Serialize;

use ferry_client::{Client, ClientConfig};
use ferry_control::jain_index;
use ferry_experiment::model::FunctionSpec;
use ferry_func::builtins::traverse::{self, TraverseArgs};

use crate::BenchError;
use ferry_os::{ChildServer, ChildSpec};

/// Most tenants one fairness run may have.
pub const MAX_TENANTS: usize = 16;

/// Graph nodes each tenant loads.
const GRAPH_NODES: u64 = 10_000;

/// Settings of a fairness run.
#[derive(Clone, Debug)]
pub struct FairnessConfig {
    /// The `ferry` executable.
    pub exe: std::path::PathBuf,
    /// One workload function per tenant (tenant ids 1, 2, ...).
    pub tenants: Vec<FunctionSpec>,
    /// Worker threads of the node.
    pub cores: usize,
    /// CPUs of the node.
    pub server_cpus: Vec<usize>,
    /// CPUs of the load generator (empty: not pinned).
    pub client_cpus: Vec<usize>,
    /// Length of each phase.
    pub phase: Duration,
    /// Invocations each tenant keeps in flight.
    pub concurrency: usize,
}

/// One tenant's results.
#[derive(Clone, Debug, Serialize)]
pub struct TenantRow {
    /// Tenant id.
    pub tenant: TenantId,
    /// Its workload.
    pub workload: String,
    /// Its home core.
    pub home_core: u64,
    /// Throughput with every tenant running.
    pub together_ops: f64,
    /// Its share of the node CPU used by tenants then.
    pub together_cpu_share: f64,
    /// Throughput after the last tenant stopped (None for that tenant).
    pub after_stop_ops: Option<f64>,
    /// Its CPU share then.
    pub after_stop_cpu_share: Option<f64>,
}

/// What the run measured.
#[derive(Clone, Debug, Serialize)]
pub struct FairnessReport {
    /// Per tenant.
    pub tenants: Vec<TenantRow>,
    /// Jain's index of CPU shares with every tenant running.
    pub jain_together: f64,
    /// Jain's index of CPU shares among the remaining tenants after one stopped.
    pub jain_after_stop: f64,
    /// Node CPU used by tenants while all ran, in CPUs.
    pub node_cpus_together: f64,
    /// Worker threads of the node.
    pub cores: usize,
    /// CPUs of the node.
    pub server_cpus: Vec<usize>,
    /// CPUs of the load generator.
    pub client_cpus: Vec<usize>,
}

fn token(tenant: TenantId) -> String {
    format!("tenant-{tenant}")
}

async fn counter(client: &Client, name: &str) -> Result<u64, BenchError> {
    let stats = client.stats().await?;
    stats
        .iter()
        .find(|stat| stat.name == name)
        .map(|stat| stat.value)
        .ok_or_else(|| BenchError::Server(format!("the node reports no {name}")))
}

/// Keeps `concurrency` invocations of `function` in flight until `until`; returns how many
/// completed.
async fn keep_busy(
    client: Client,
    function: FunctionSpec,
    concurrency: usize,
    until: Instant,
) -> Result<u64, BenchError> {
    let lanes: Vec<_> = (0..concurrency as u64)
        .map(|lane| {
            let client = client.clone();
            let function = function.clone();
            tokio::spawn(async move {
                let mut done = 0u64;
                let mut node = lane;
                while Instant::now() < until {
                    node = ferry_func::args::mix64(node) % GRAPH_NODES;
                    let args = TraverseArgs {
                        start: node,
                        depth: function.accesses,
                        compute_ns: function.compute.0,
                    }
                    .encode();
                    client.invoke_remote(traverse::NAME, args).await?;
                    done += 1;
                }
                Ok::<u64, ferry_client::ClientError>(done)
            })
        })
        .collect();
    let mut total = 0;
    for lane in lanes {
        total += lane.await.map_err(|err| BenchError::Io(err.to_string()))??;
    }
    Ok(total)
}

/// Runs one phase with `clients` busy; returns (throughput, CPU ns) per client.
async fn phase(
    clients: &[(u32, Client, FunctionSpec)],
    concurrency: usize,
    length: Duration,
) -> Result<Vec<(f64, u64)>, BenchError> {
    let mut before = Vec::new();
    for (tenant, client, _) in clients {
        before.push(counter(client, &format!("tenant.{tenant}.cpu_ns")).await?);
    }
    let started = Instant::now();
    let until = started + length;
    let runs: Vec<_> = clients
        .iter()
        .map(|(_, client, function)| tokio::spawn(keep_busy(client.clone(), function.clone(), concurrency, until)))
        .collect();
    let mut done = Vec::new();
    for run in runs {
        done.push(run.await.map_err(|err| BenchError::Io(err.to_string()))??);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let mut out = Vec::new();
    for ((tenant, client, _), (done, before)) in clients.iter().zip(done.into_iter().zip(before)) {
        let after = counter(client, &format!("tenant.{tenant}.cpu_ns")).await?;
        out.push((done as f64 / elapsed, after.saturating_sub(before)));
    }
    Ok(out)
}

fn shares(cpu: &[u64]) -> Vec<f64> {
    let total: u64 = cpu.iter().sum();
    cpu.iter()
        .map(|&ns| if total == 0 { 0.0 } else { ns as f64 / total as f64 })
        .collect()
}

/// Runs the fairness benchmark.
pub fn run(config: &FairnessConfig, mut progress: impl FnMut(&str)) -> Result<FairnessReport, BenchError> {
    if config.tenants.len() < 2 || config.tenants.len() > MAX_TENANTS {
        return Err(BenchError::Invalid(format!("fairness needs 2..={MAX_TENANTS} tenants")));
    }
    if config.phase.is_zero() || config.concurrency == 0 {
        return Err(BenchError::Invalid("phase and concurrency must be positive".into()));
    }
    if !config.client_cpus.is_empty() {
        ferry_os::pin_current_thread(&config.client_cpus)?;
    }
    let spin = ferry_client::calibrate_spin();
    let ids: Vec<u32> = (1..=config.tenants.len() as u32).collect();
    let child = ChildServer::spawn(&ChildSpec {
        exe: config.exe.clone(),
        cpus: config.server_cpus.clone(),
        cores: config.cores,
        tenants: ids.iter().map(|id| format!("{id}:{}", token(TenantId(*id)))).collect(),
        spin_iters_per_ms: spin,
        // Closed-loop saturation: the CPUs never idle, so there is nothing to keep warm.
        keep_warm: false,
        extra_args: Vec::new(),
    })?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|err| BenchError::Io(err.to_string()))?;
    runtime.block_on(async {
        let mut clients = Vec::new();
        let mut homes = Vec::new();
        for (id, function) in ids.iter().zip(&config.tenants) {
            let client = Client::connect(ClientConfig::new(
                child.addr().to_string(),
                TenantId(*id),
                token(TenantId(*id)),
            ))
            .await?;
            let graph: Vec<(Bytes, Bytes)> =
                traverse::dataset(GRAPH_NODES, function.object_bytes.max(8) as usize, 1).collect();
            ferry_datasets::load_dataset(&client, traverse::TABLE, graph).await?;
            homes.push(counter(&client, &format!("tenant.{id}.home_core")).await?);
            clients.push((*id, client, function.clone()));
        }
        progress(&format!(
            "{} tenants on a {}-core node at {}",
            clients.len(),
            config.cores,
            child.addr()
        ));
        let together = phase(&clients, config.concurrency, config.phase).await?;
        progress("all tenants measured; stopping the last one");
        let remaining = &clients[..clients.len() - 1];
        let after = phase(remaining, config.concurrency, config.phase).await?;
        let together_cpu: Vec<u64> = together.iter().map(|(_, cpu)| *cpu).collect();
        let after_cpu: Vec<u64> = after.iter().map(|(_, cpu)| *cpu).collect();
        let together_shares = shares(&together_cpu);
        let after_shares = shares(&after_cpu);
        let tenants = clients
            .iter()
            .enumerate()
            .map(|(index, (id, _, function))| TenantRow {
                tenant: TenantId(*id),
                workload: format!(
                    "{} (depth {}, {} ns/access)",
                    function.name, function.accesses, function.compute.0
                ),
                home_core: homes[index],
                together_ops: together[index].0,
                together_cpu_share: together_shares[index],
                after_stop_ops: after.get(index).map(|(ops, _)| *ops),
                after_stop_cpu_share: after_shares.get(index).copied(),
            })
            .collect();
        Ok(FairnessReport {
            tenants,
            jain_together: jain_index(&together_shares),
            jain_after_stop: jain_index(&after_shares),
            node_cpus_together: together_cpu.iter().sum::<u64>() as f64 / 1e9 / config.phase.as_secs_f64(),
            cores: config.cores,
            server_cpus: config.server_cpus.clone(),
            client_cpus: config.client_cpus.clone(),
        })
    })
}
