//! Running `ferry bench`: a testbed, the workload's data, the overheads calibrated, a
//! policy built and driven, and the report with each side's CPU; against a ferry node or
//! against Redis.

use std::sync::Arc;
use std::time::Duration;

use crate::workload_data::{load_for_workload, object_bytes, ycsbt_accounts};
use ferry_client::{Adaptive, Backend, FollowGateway, Overhead, ViaGateway};
use ferry_control::{Nanos, Policy};
use ferry_datasets::ycsbt_total_is_conserved;
use ferry_experiment::model::FunctionKind;
use ferry_experiment::timeline::STEADY_FRACTION;
use ferry_experiment::SteadyState;

use super::calibrate::calibrate_overhead;
use super::drive::{drive, DriveSpec};
use super::report::{cpus_used, summarize, OverheadReport, PlacementReport};
use super::{validate, PlacementBenchConfig};
use crate::testbed::{NodeSite, Testbed, TestbedConfig};
use crate::BenchError;

/// Runs the benchmark.
pub fn run(config: &PlacementBenchConfig) -> Result<PlacementReport, BenchError> {
    validate(config)?;
    let testbed = Testbed::start(&config.testbed)?;
    testbed.runtime.block_on(run_on(&testbed, config, true))
}

/// Runs the benchmark on an existing testbed (inside its runtime), loading the graph first
/// when `load` is set (a series of runs on one node loads it once).
pub async fn run_on(
    testbed: &Testbed,
    config: &PlacementBenchConfig,
    load: bool,
) -> Result<PlacementReport, BenchError> {
    let client = testbed.connect().await?;
    if load {
        load_for_workload(&client, &config.workload, config.graph_nodes, config.seed).await?;
    }
    let counters = |name: &'static str| {
        let client = client.clone();
        async move { node_counter(&client, name).await }
    };
    let (pushbacks_before, wasted_before) = (counters("pushbacks").await, counters("pushback_wasted_cpu_ns").await);
    let mut report = if client.gateway_rate_ops().is_some() {
        // Through a gateway the tenant's loops run there: this side follows its rate and
        // sends every invocation for it to place, so no request is throttled twice.
        let policy = Box::new(FollowGateway::of(&client)?);
        let mut report = run_backend(testbed, config, ViaGateway(client.clone()), Some(policy), || {
            testbed.server_cpu_time()
        })
        .await?;
        report.steady.policy = format!("gateway ({})", config.policy.name());
        report.steady.rpc_fraction_mean = report.remote_share;
        report.steady.rpc_fraction = report.remote_share;
        report
    } else {
        run_backend(testbed, config, client.clone(), None, || testbed.server_cpu_time()).await?
    };
    if let (Some(before), Some(after)) = (pushbacks_before, counters("pushbacks").await) {
        let seconds = report.steady.duration_ms / 1e3;
        let pushbacks = after.saturating_sub(before) as f64;
        report.pushbacks_per_s = Some(pushbacks / seconds);
        report.pushback_share = Some(pushbacks / (report.completed as f64).max(1.0));
        if let (Some(before), Some(after)) = (wasted_before, counters("pushback_wasted_cpu_ns").await) {
            report.pushback_wasted_storage_cpus = Some(after.saturating_sub(before) as f64 / 1e9 / seconds);
        }
    }
    if let Some(accounts) = ycsbt_accounts(&config.workload) {
        report.invariant_ok = Some(ycsbt_total_is_conserved(&client, accounts).await?);
    }
    Ok(report)
}

/// Runs the benchmark against Redis at `target` (`redis://HOST:PORT`): the same generator,
/// policy and pinning of this side, with `traverse` as a Redis Function or as GETs.
pub fn run_redis(config: &PlacementBenchConfig, target: &str) -> Result<PlacementReport, BenchError> {
    validate(config)?;
    if config
        .workload
        .functions
        .iter()
        .any(|f| f.kind != FunctionKind::Traverse)
    {
        return Err(BenchError::Invalid(
            "the Redis peer implements traverse workloads only (light, medium, heavy, traverse:..., bimodal)".into(),
        ));
    }
    let addr = crate::redis::parse_target(target)?;
    // Redis runs where scripts/redis.sh pinned it (the server CPUs): keep those CPUs as warm as
    // a ferry node keeps its own, so both systems are measured alike.
    let _server_warm = if config.testbed.keep_warm && !config.testbed.server_cpus.is_empty() {
        Some(ferry_os::KeepWarm::start(&config.testbed.server_cpus)?)
    } else {
        None
    };
    let testbed = Testbed::start(&TestbedConfig {
        node: NodeSite::External(addr.clone()),
        ..config.testbed.clone()
    })?;
    testbed.runtime.block_on(async {
        let setup = crate::redis::RespConn::connect(&addr).await?;
        crate::redis::install_library(&setup).await?;
        let lua_iterations_per_ns = crate::redis::calibrate_lua(&setup).await?;
        crate::redis::load_graph(&setup, config.graph_nodes, object_bytes(&config.workload), config.seed).await?;
        let pid = crate::redis::server_pid(&setup).await;
        let backend =
            crate::redis::RedisBackend::new(crate::redis::RespConn::connect(&addr).await?, lua_iterations_per_ns);
        let mut report = run_backend(&testbed, config, backend, None, || {
            pid.and_then(ferry_os::cpu_time::process_cpu_time)
        })
        .await?;
        report.steady.policy = format!("redis/{}", report.steady.policy);
        Ok(report)
    })
}

/// This tenant's counter `tenant.<id>.<name>` on the node, if it reports it.
async fn node_counter(client: &ferry_client::Client, name: &str) -> Option<u64> {
    let suffix = format!(".{name}");
    let stats = client.stats().await.ok()?;
    stats
        .iter()
        .find(|stat| stat.name.starts_with("tenant.") && stat.name.ends_with(&suffix))
        .map(|stat| stat.value)
}

/// Drives `backend` under `policy` (by default the configured one, with the overheads of
/// each placement calibrated first) and builds the report; `storage_cpu_time` reads the
/// storage side's CPU time so far.
async fn run_backend<B: Backend>(
    testbed: &Testbed,
    config: &PlacementBenchConfig,
    backend: B,
    policy: Option<Box<dyn Policy>>,
    storage_cpu_time: impl Fn() -> Option<Duration>,
) -> Result<PlacementReport, BenchError> {
    let calibrate = policy.is_none();
    let policy = match policy {
        Some(policy) => policy,
        None => config
            .policy
            .build(
                Nanos(config.slo.as_nanos() as u64),
                config.quantile,
                config.testbed.capacity(),
                config.seed,
            )
            .map_err(|err| BenchError::Invalid(format!("policy: {err}")))?,
    };
    let steady_start = config.duration.mul_f64(1.0 - STEADY_FRACTION);
    let spec = DriveSpec {
        workload: &config.workload,
        graph_nodes: config.graph_nodes,
        seed: config.seed,
        duration: config.duration,
        steady_start,
        interval: config.timeline_interval,
        quantile: config.quantile,
        slo: config.slo,
        progress: config.progress,
    };
    let overhead = if calibrate {
        calibrate_overhead(testbed, &backend, &spec).await?
    } else {
        Overhead::default()
    };
    let adaptive = Arc::new(Adaptive::with_overhead(backend, policy, overhead)?);
    adaptive.set_busy_meter(testbed.busy_meter());
    let server_cpu_before = storage_cpu_time();
    let app_cpu_before = testbed.app_cpu_time();
    let drive = drive(&adaptive, &spec).await?;
    let wall = drive.wall.as_secs_f64();
    let storage_cpus_used = cpus_used(server_cpu_before, storage_cpu_time(), drive.wall);
    let app_cpus_used = cpus_used(app_cpu_before, testbed.app_cpu_time(), drive.wall);
    let summary = summarize(&spec, &drive);
    Ok(PlacementReport {
        steady: SteadyState {
            policy: adaptive.policy_name(),
            workload: config.workload.label.clone(),
            seed: config.seed,
            slo_p99_us: config.slo.as_secs_f64() * 1e6,
            slo_quantile: config.quantile,
            duration_ms: config.duration.as_secs_f64() * 1e3,
            steady_start_ms: summary.steady_start_ms,
            throughput_ops: summary.throughput_ops,
            p99_us: summary.p99_us,
            latency_us_p50: summary.latency_us_p50,
            rpc_fraction: drive.final_state.rpc_fraction,
            rpc_fraction_mean: summary.rpc_fraction_mean,
            rate_ops: drive.final_state.rate_ops,
            converge_ms: summary.converge_ms,
        },
        latency: summary.latency,
        completed: drive.recording.completed,
        errors: drive.recording.errors.clone(),
        dropped: drive.dropped,
        remote_share: if drive.recording.completed > 0 {
            drive.recording.remote as f64 / drive.recording.completed as f64
        } else {
            0.0
        },
        storage_cpus_used,
        app_cpus_used,
        app_function_cpus_used: drive.recording.app_function_ns as f64 / 1e9 / wall,
        server_cpus: testbed.server_cpus(),
        client_cpus: config.testbed.client_cpus.clone(),
        spin_iters_per_ms: testbed.spin_iters_per_ms,
        overhead: OverheadReport {
            local_app_ns: overhead.local_app_ns,
            local_storage_ns: overhead.local_storage_ns,
            remote_app_ns: overhead.remote_app_ns,
            remote_storage_ns: overhead.remote_storage_ns,
        },
        pushbacks_per_s: None,
        pushback_share: None,
        pushback_wasted_storage_cpus: None,
        invariant_ok: None,
        timeline: summary.timeline,
    })
}
