//! `ferry bench-kv`: the storage node's raw speed — gets and no-op invocations, at
//! saturation (pipelined closed loops) and at half that load (open loop, for latency).

use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::Serialize;

use ferry_client::Client;
use ferry_func::args::mix64;

use crate::latency::median;
use crate::loadgen::{closed_loop, open_loop, RunResult};
use crate::testbed::{Testbed, TestbedConfig};
use crate::BenchError;

/// Table the benchmark's objects live in.
pub const TABLE: &str = "kv";

/// Settings of one `bench-kv` invocation.
#[derive(Clone, Debug)]
pub struct KvBenchConfig {
    /// Where the two sides run (the node gets one worker core).
    pub testbed: TestbedConfig,
    /// Measured time of each phase.
    pub duration: Duration,
    /// Unmeasured warm-up before each run.
    pub warmup: Duration,
    /// Repetitions; medians are reported.
    pub runs: usize,
    /// Requests in flight in the saturation phases (the pipelining depth).
    pub concurrency: usize,
    /// Objects in the table.
    pub keys: u64,
    /// Size of each value.
    pub value_bytes: usize,
    /// Offered load of the open-loop phases as a fraction of the measured saturation
    /// throughput (0.5 = "half load").
    pub load_fraction: f64,
}

/// One phase of one run.
#[derive(Clone, Debug, Serialize)]
pub struct Phase {
    /// What was measured.
    pub name: String,
    /// Offered rate for open-loop phases (None = saturation).
    pub offered_ops: Option<f64>,
    /// The measurement.
    pub result: RunResult,
    /// Storage-node CPU use during the phase, in CPUs (1.0 = one core busy).
    pub server_cpus_used: Option<f64>,
}

/// Medians over runs of one phase.
#[derive(Clone, Debug, Serialize)]
pub struct PhaseMedian {
    /// Phase name.
    pub name: String,
    /// Median throughput.
    pub throughput_ops: f64,
    /// Median p50.
    pub p50_us: f64,
    /// Median p99.
    pub p99_us: f64,
    /// Median storage-node CPU use.
    pub server_cpus_used: Option<f64>,
}

/// Everything `bench-kv` measured.
#[derive(Clone, Debug, Serialize)]
pub struct KvBenchReport {
    /// Runs, each with its phases.
    pub runs: Vec<Vec<Phase>>,
    /// Medians per phase.
    pub medians: Vec<PhaseMedian>,
    /// Pipelining depth used.
    pub concurrency: usize,
    /// Connections used.
    pub connections: usize,
    /// Node CPUs (empty when an external node was measured).
    pub server_cpus: Vec<usize>,
    /// Load-generator CPUs.
    pub client_cpus: Vec<usize>,
}

fn key_of(i: u64, keys: u64) -> Bytes {
    Bytes::copy_from_slice(&(mix64(i) % keys.max(1)).to_le_bytes())
}

/// Runs the benchmark; `progress` receives one line per step for the person watching.
pub fn run(config: &KvBenchConfig, mut progress: impl FnMut(&str)) -> Result<KvBenchReport, BenchError> {
    let testbed = Testbed::start(&config.testbed)?;
    progress(&format!("storage node at {}", testbed.addr));
    testbed.runtime.block_on(async {
        let client = testbed.connect().await?;
        let value = Bytes::from(vec![0xAB; config.value_bytes]);
        let objects = (0..config.keys)
            .map(|id| (Bytes::copy_from_slice(&id.to_le_bytes()), value.clone()))
            .collect();
        ferry_datasets::load_dataset(&client, TABLE, objects).await?;
        progress(&format!(
            "loaded {} objects of {} bytes",
            config.keys, config.value_bytes
        ));
        let mut runs = Vec::new();
        for run in 0..config.runs {
            progress(&format!("run {}/{}", run + 1, config.runs));
            runs.push(one_run(&client, config, &testbed, &mut progress).await);
        }
        let medians = summarize(&runs);
        Ok(KvBenchReport {
            runs,
            medians,
            concurrency: config.concurrency,
            connections: config.testbed.connections,
            server_cpus: testbed.server_cpus(),
            client_cpus: config.testbed.client_cpus.clone(),
        })
    })
}

async fn measured<Fut: std::future::Future<Output = RunResult>>(
    name: &str,
    offered_ops: Option<f64>,
    testbed: &Testbed,
    phase: Fut,
) -> Phase {
    let cpu_before = testbed.server_cpu_time();
    let started = Instant::now();
    let result = phase.await;
    let wall = started.elapsed().as_secs_f64();
    let cpu_after = testbed.server_cpu_time();
    let server_cpus_used = match (cpu_before, cpu_after) {
        (Some(before), Some(after)) if wall > 0.0 => Some((after - before).as_secs_f64() / wall),
        _ => None,
    };
    Phase {
        name: name.to_string(),
        offered_ops,
        result,
        server_cpus_used,
    }
}

async fn one_run(
    client: &Client,
    config: &KvBenchConfig,
    testbed: &Testbed,
    progress: &mut impl FnMut(&str),
) -> Vec<Phase> {
    let keys = config.keys;
    let get = {
        let client = client.clone();
        move |i: u64| {
            let client = client.clone();
            async move { client.get(TABLE, &key_of(i, keys)).await.map(|_| ()) }
        }
    };
    let invoke = {
        let client = client.clone();
        move |_i: u64| {
            let client = client.clone();
            async move {
                client
                    .invoke_remote(ferry_func::builtins::noop::NAME, Bytes::new())
                    .await
                    .map(|_| ())
            }
        }
    };
    let mut phases = Vec::new();
    phases.extend(saturate_then_load(config, "get", testbed, get, progress).await);
    phases.extend(saturate_then_load(config, "invoke-noop", testbed, invoke, progress).await);
    phases
}

/// Measures `op` at saturation, then open-loop at `load_fraction` of that throughput.
async fn saturate_then_load<F, Fut>(
    config: &KvBenchConfig,
    name: &str,
    testbed: &Testbed,
    op: F,
    progress: &mut impl FnMut(&str),
) -> [Phase; 2]
where
    F: Fn(u64) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<(), ferry_client::ClientError>> + Send + 'static,
{
    closed_loop(config.concurrency, config.warmup, op.clone()).await;
    let saturated = measured(
        name,
        None,
        testbed,
        closed_loop(config.concurrency, config.duration, op.clone()),
    )
    .await;
    let offered = saturated.result.throughput_ops * config.load_fraction;
    progress(&format!(
        "  {name} saturated: {:.0} ops/s",
        saturated.result.throughput_ops
    ));
    let loaded = measured(
        &format!("{name}@load"),
        Some(offered),
        testbed,
        open_loop(offered, config.duration, op),
    )
    .await;
    [saturated, loaded]
}

fn summarize(runs: &[Vec<Phase>]) -> Vec<PhaseMedian> {
    let Some(first) = runs.first() else {
        return Vec::new();
    };
    first
        .iter()
        .enumerate()
        .map(|(index, phase)| {
            let column = |f: &dyn Fn(&Phase) -> f64| {
                let mut values: Vec<f64> = runs.iter().filter_map(|run| run.get(index)).map(f).collect();
                median(&mut values)
            };
            let mut cpus: Vec<f64> = runs.iter().filter_map(|run| run.get(index)?.server_cpus_used).collect();
            PhaseMedian {
                name: phase.name.clone(),
                throughput_ops: column(&|p| p.result.throughput_ops),
                p50_us: column(&|p| p.result.latency.p50_us),
                p99_us: column(&|p| p.result.latency.p99_us),
                server_cpus_used: (!cpus.is_empty()).then(|| median(&mut cpus)),
            }
        })
        .collect()
}
