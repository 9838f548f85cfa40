//! `ferry bench`: adaptive placement on real processes.
//!
//! The storage node runs as a child pinned to its CPUs, the app side (this process: load
//! generator and local execution) on its own. The workload is the simulator's
//! ([`ferry_experiment::model::Workload`], parsed from the same flag values), each function run as
//! the built-in `traverse` with its depth and compute. A saturating backlog is released
//! through the policy's rate limiter: a request is due the moment the limiter admits it, and
//! its latency is measured from then. The report has the simulator's fields and meanings.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use ferry_client::{Adaptive, Backend, ClientError, Invocation, Overhead, Placement};
use ferry_control::{FnId, LatencySketch, Nanos, PolicyState, Schedule};
use ferry_experiment::model::{ComputeDist, FunctionKind, Workload};
use ferry_experiment::spec::PolicySpec;
use ferry_experiment::timeline::{converge_ms, TimelineRow, CONVERGE_TOLERANCE, STEADY_FRACTION};
use ferry_func::builtins::traverse;
use ferry_func::builtins::ycsbt;

use crate::latency::{LatencySummary, Recorder};
use crate::loadgen::{error_kind, wait_until};
use crate::testbed::{Testbed, TestbedConfig};
use crate::zipf::{Zipf, YCSB_THETA};
use crate::BenchError;

/// Requests in flight at most. A policy's limiter keeps far fewer outstanding when it
/// works; past this the node is hopelessly behind and further admissions are dropped
/// (counted) rather than piling up tasks.
pub const MAX_OUTSTANDING: usize = 16_384;

/// Most a request may fall behind its due time before it is given up and counted as
/// dropped: 20× the default 5 ms SLO, so every request the R loop could still bring within
/// the SLO is sent and timed from its due time (no coordinated omission), while a stall
/// (a collapse, a starved generator) cannot queue unbounded work.
pub const SCHEDULE_LAG_MAX: Nanos = Nanos::from_ms(100);

/// Longest the generator waits for the next due time before re-reading the rate: one R-loop
/// period, so a raised rate applies to the pending gap within a period.
const RATE_RECHECK: Duration = Duration::from_millis(5);

/// Longest wait for outstanding requests after the run.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Default number of graph nodes loaded: large enough that accesses spread over the table,
/// small enough to load in a second or two.
pub const DEFAULT_GRAPH_NODES: u64 = 100_000;

/// How often the progress line is refreshed.
const PROGRESS_PERIOD: Duration = Duration::from_millis(250);

/// Settings of one `ferry bench` run.
#[derive(Clone, Debug)]
pub struct PlacementBenchConfig {
    /// Where the two sides run.
    pub testbed: TestbedConfig,
    /// What to run.
    pub workload: Workload,
    /// Who places and admits.
    pub policy: PolicySpec,
    /// Latency objective.
    pub slo: Duration,
    /// Quantile the objective constrains.
    pub quantile: f64,
    /// Length of the run.
    pub duration: Duration,
    /// Seed of the policy and of the request stream.
    pub seed: u64,
    /// Graph nodes loaded for `traverse`.
    pub graph_nodes: u64,
    /// Timeline resolution.
    pub timeline_interval: Duration,
    /// Draw a progress line on stderr (when it is a terminal).
    pub progress: bool,
}

/// What `ferry bench` measured. Field names and meanings follow `ferry sim`'s report.
#[derive(Clone, Debug, Serialize)]
pub struct PlacementReport {
    /// Policy name.
    pub policy: String,
    /// Workload spec.
    pub workload: String,
    /// Seed.
    pub seed: u64,
    /// The SLO latency.
    pub slo_p99_us: f64,
    /// The SLO quantile.
    pub slo_quantile: f64,
    /// Length of the run.
    pub duration_ms: f64,
    /// Where the steady-state summary starts (the last quarter of the run).
    pub steady_start_ms: f64,
    /// Steady-state goodput (successful completions per second).
    pub throughput_ops: f64,
    /// Steady-state p99 latency.
    pub p99_us: Option<f64>,
    /// Steady-state median latency.
    pub latency_us_p50: Option<f64>,
    /// Steady-state latency percentiles in full.
    pub latency: LatencySummary,
    /// X at the end of the run.
    pub rpc_fraction: f64,
    /// Mean X over the steady state.
    pub rpc_fraction_mean: f64,
    /// R at the end of the run.
    pub rate_ops: f64,
    /// Time after which throughput stays within 5% of its steady value; null if never.
    pub converge_ms: Option<f64>,
    /// Requests that succeeded over the whole run.
    pub completed: u64,
    /// Failed requests by kind over the whole run.
    pub errors: BTreeMap<String, u64>,
    /// Admissions dropped because too many requests were outstanding.
    pub dropped: u64,
    /// Share of successful requests that ran remotely, over the whole run.
    pub remote_share: f64,
    /// Storage-node CPU used, in CPUs (1.0 = one CPU busy), over the run.
    pub storage_cpus_used: Option<f64>,
    /// App-side process CPU used, in CPUs, over the run (includes the load generator,
    /// which polls for the next admission when idle).
    pub app_cpus_used: Option<f64>,
    /// App-side CPU spent inside locally executed functions, in CPUs.
    pub app_function_cpus_used: f64,
    /// CPUs of the node.
    pub server_cpus: Vec<usize>,
    /// CPUs of the app side.
    pub client_cpus: Vec<usize>,
    /// Emulated-work calibration shared by both sides (iterations per ms).
    pub spin_iters_per_ms: u64,
    /// CPU per request beyond what its invocation reports, measured before the run and
    /// added to the costs the policy learns from (see `ferry_client::Overhead`), ns.
    pub overhead: OverheadReport,
    /// Invocations the node handed back (ASFP), per second over the run.
    pub pushbacks_per_s: Option<f64>,
    /// Share of the run's requests that were pushed back.
    pub pushback_share: Option<f64>,
    /// Node CPU spent on attempts it then pushed back, in CPUs (wasted work).
    pub pushback_wasted_storage_cpus: Option<f64>,
    /// YCSB-T only: whether the total of all balances was unchanged at the end (every
    /// acknowledged transfer applied exactly once, nothing else changed a balance).
    pub invariant_ok: Option<bool>,
    /// Per-interval timeline.
    pub timeline: Vec<TimelineRow>,
}

/// One timeline interval's completions.
#[derive(Default)]
struct Bin {
    completed: u64,
    remote: u64,
    sketch: LatencySketch,
    latency_sum_ns: f64,
    /// Policy state sampled at the end of the interval.
    rpc_fraction: Option<f64>,
    rate_ops: Option<f64>,
}

/// Everything recorded while the run goes on.
struct Recording {
    interval_ns: u64,
    steady_start: Duration,
    bins: Vec<Bin>,
    steady: Recorder,
    completed: u64,
    remote: u64,
    errors: BTreeMap<String, u64>,
    app_function_ns: u64,
}

impl Recording {
    fn new(interval: Duration, steady_start: Duration) -> Recording {
        Recording {
            interval_ns: (interval.as_nanos() as u64).max(1),
            steady_start,
            bins: Vec::new(),
            steady: Recorder::new(),
            completed: 0,
            remote: 0,
            errors: BTreeMap::new(),
            app_function_ns: 0,
        }
    }

    fn bin(&mut self, at: Duration) -> &mut Bin {
        let index = (at.as_nanos() as u64 / self.interval_ns) as usize;
        if self.bins.len() <= index {
            self.bins.resize_with(index + 1, Bin::default);
        }
        &mut self.bins[index]
    }

    fn note(&mut self, done_at: Duration, outcome: &Result<Invocation, ClientError>) {
        match outcome {
            Ok(invocation) => {
                self.completed += 1;
                self.app_function_ns += invocation.cost.app_cpu_ns;
                let remote = invocation.placement == Placement::Remote;
                self.remote += u64::from(remote);
                if done_at >= self.steady_start {
                    self.steady.record(invocation.latency);
                }
                let latency_ns = invocation.latency.as_nanos() as f64;
                let bin = self.bin(done_at);
                bin.completed += 1;
                bin.remote += u64::from(remote);
                bin.sketch.record(latency_ns);
                bin.latency_sum_ns += latency_ns;
            }
            Err(err) => *self.errors.entry(error_kind(err)).or_default() += 1,
        }
    }
}

/// Picks a function of the phase active at `t` by its weight.
fn choose(workload: &Workload, t: Nanos, rng: &mut ChaCha8Rng) -> usize {
    let phase = &workload.phases[workload.phase_at(t)];
    let mut draw: f64 = rng.gen();
    for &(index, weight) in &phase.entries {
        if draw < weight {
            return index;
        }
        draw -= weight;
    }
    phase.entries.last().map_or(0, |&(index, _)| index)
}

fn compute_ns(mean: Nanos, dist: ComputeDist, rng: &mut ChaCha8Rng) -> u64 {
    match dist {
        ComputeDist::Fixed => mean.0,
        ComputeDist::Exp => {
            let u: f64 = rng.gen_range(f64::EPSILON..1.0);
            ((-u.ln()) * mean.0 as f64).min(ferry_func::builtins::MAX_COMPUTE_NS_PER_ACCESS as f64) as u64
        }
    }
}

/// Runs the benchmark.
pub fn run(config: &PlacementBenchConfig) -> Result<PlacementReport, BenchError> {
    validate(config)?;
    let testbed = Testbed::start(&config.testbed)?;
    testbed.runtime.block_on(run_on(&testbed, config, true))
}

/// Checks the settings before anything starts.
pub fn validate(config: &PlacementBenchConfig) -> Result<(), BenchError> {
    if config.duration.is_zero() || config.timeline_interval.is_zero() {
        return Err(BenchError::Invalid(
            "duration and timeline interval must be positive".into(),
        ));
    }
    if config.slo.is_zero() {
        return Err(BenchError::Invalid("the SLO must be positive".into()));
    }
    if config.graph_nodes == 0 {
        return Err(BenchError::Invalid("the graph needs at least one node".into()));
    }
    for function in &config.workload.functions {
        if function.compute.0 > ferry_func::builtins::MAX_COMPUTE_NS_PER_ACCESS {
            return Err(BenchError::Invalid(format!(
                "{}: compute of {} ns per access exceeds the built-in limit of {} ns",
                function.name,
                function.compute.0,
                ferry_func::builtins::MAX_COMPUTE_NS_PER_ACCESS
            )));
        }
        if function.accesses > traverse::MAX_DEPTH {
            return Err(BenchError::Invalid(format!(
                "{}: depth above {}",
                function.name,
                traverse::MAX_DEPTH
            )));
        }
    }
    Ok(())
}

/// Loads what the workload's functions read: the graph `traverse` walks (`nodes` nodes,
/// values as large as the largest object), for YCSB-T the accounts, and for the social
/// application its graph and users.
pub async fn load_graph(
    client: &ferry_client::Client,
    workload: &Workload,
    nodes: u64,
    seed: u64,
) -> Result<(), BenchError> {
    let bytes = object_bytes(workload);
    if workload.functions.iter().any(|f| f.kind == FunctionKind::Traverse) {
        let graph: Vec<(Bytes, Bytes)> = traverse::dataset(nodes, bytes, seed).collect();
        crate::load::load_dataset(client, traverse::TABLE, graph).await?;
    }
    if let Some(accounts) = ycsbt_accounts(workload) {
        let data: Vec<(Bytes, Bytes)> = ycsbt::dataset(accounts, bytes, seed).collect();
        crate::load::load_dataset(client, ycsbt::TABLE, data).await?;
    }
    if let Some(vertices) = crate::social::social_vertices(workload) {
        let log_n = ferry_func::builtins::auth::DEFAULT_LOG_N;
        crate::load::load_social(client, vertices, log_n, seed).await?;
    }
    Ok(())
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

/// The YCSB-T account count of a workload, if it has YCSB-T functions.
pub fn ycsbt_accounts(workload: &Workload) -> Option<u64> {
    workload.functions.iter().find_map(|f| match f.kind {
        FunctionKind::YcsbtRead { accounts } | FunctionKind::YcsbtTransfer { accounts } => Some(accounts),
        FunctionKind::Traverse | FunctionKind::Social { .. } => None,
    })
}

/// Balances summed per multiget when checking the closed economy.
const BALANCE_CHUNK: u64 = ferry_proto::MAX_MULTIGET_KEYS as u64;

/// YCSB-T's invariant: transfers move units, never create or destroy them, so the total of
/// all balances is what the data set started with.
pub async fn ycsbt_total_is_conserved(client: &ferry_client::Client, accounts: u64) -> Result<bool, BenchError> {
    let mut total = 0u64;
    let mut first = 0;
    while first < accounts {
        let last = (first + BALANCE_CHUNK).min(accounts);
        let keys: Vec<Bytes> = (first..last)
            .map(|a| Bytes::copy_from_slice(&a.to_le_bytes()))
            .collect();
        for object in client.multiget(ycsbt::TABLE, &keys).await? {
            let value = object
                .ok_or_else(|| BenchError::Server("an account vanished".into()))?
                .value;
            let balance = value
                .get(..8)
                .map(|head| u64::from_le_bytes(head.try_into().expect("8 bytes")))
                .ok_or_else(|| BenchError::Server("an account value is shorter than 8 bytes".into()))?;
            total += balance;
        }
        first = last;
    }
    Ok(total == accounts * ycsbt::INITIAL_BALANCE)
}

/// Builds the request for workload function `index`: its storage function and arguments.
struct Requests {
    /// Per function: the Zipfian key chooser of YCSB-T functions.
    zipf: Vec<Option<Zipf>>,
}

impl Requests {
    fn new(workload: &Workload) -> Result<Requests, BenchError> {
        let zipf = workload
            .functions
            .iter()
            .map(|f| match f.kind {
                FunctionKind::YcsbtRead { accounts } | FunctionKind::YcsbtTransfer { accounts } => {
                    Zipf::new(accounts, YCSB_THETA).map(Some).map_err(BenchError::Invalid)
                }
                FunctionKind::Traverse | FunctionKind::Social { .. } => Ok(None),
            })
            .collect::<Result<_, _>>()?;
        Ok(Requests { zipf })
    }

    fn make(&self, spec: &DriveSpec<'_>, index: usize, rng: &mut ChaCha8Rng) -> (&'static str, Bytes) {
        let function = &spec.workload.functions[index];
        let compute_ns = compute_ns(function.compute, function.dist, rng);
        let zipf = self.zipf[index].as_ref();
        match (function.kind, zipf) {
            (FunctionKind::Social { op, vertices }, _) => crate::social::request(op, vertices, rng),
            (FunctionKind::YcsbtRead { .. }, Some(zipf)) => (
                ycsbt::NAME,
                ycsbt::YcsbtArgs::Read {
                    account: zipf.key(rng),
                    compute_ns,
                }
                .encode(),
            ),
            (FunctionKind::YcsbtTransfer { accounts }, Some(zipf)) => {
                let from = zipf.key(rng);
                let mut to = zipf.key(rng);
                if to == from {
                    to = (from + 1) % accounts;
                }
                let args = ycsbt::YcsbtArgs::Transfer {
                    from,
                    to,
                    amount: 1,
                    compute_ns,
                };
                (ycsbt::NAME, args.encode())
            }
            _ => (
                traverse::NAME,
                traverse::TraverseArgs {
                    start: rng.gen_range(0..spec.graph_nodes),
                    depth: function.accesses,
                    compute_ns,
                }
                .encode(),
            ),
        }
    }
}

/// One stretch of load through a policy, as recorded.
pub struct Drive {
    /// The policy's state when admissions stopped.
    pub final_state: PolicyState,
    /// Per-interval bins and the steady-window recorder.
    recording: Recording,
    /// Admissions dropped (too many outstanding).
    pub dropped: u64,
    /// Wall time including the drain.
    pub wall: Duration,
}

impl Drive {
    /// Latency of successful requests completed in the steady window.
    pub fn steady_latency(&self) -> LatencySummary {
        self.recording.steady.summary()
    }

    /// Successful requests completed in the steady window.
    pub fn steady_completed(&self) -> u64 {
        self.recording.steady.count()
    }

    /// Failed requests over the drive.
    pub fn errors(&self) -> u64 {
        self.recording.errors.values().sum()
    }
}

/// What to drive.
pub struct DriveSpec<'a> {
    /// The workload.
    pub workload: &'a Workload,
    /// Graph nodes to pick start nodes from.
    pub graph_nodes: u64,
    /// Seed of the request stream.
    pub seed: u64,
    /// How long to admit requests.
    pub duration: Duration,
    /// Completions from here on count into the steady window.
    pub steady_start: Duration,
    /// Timeline resolution.
    pub interval: Duration,
    /// Quantile the timeline reports.
    pub quantile: f64,
    /// Draw the progress line.
    pub progress: bool,
}

/// Releases a saturating backlog of `spec.workload` through `adaptive`'s limiter for
/// `spec.duration`, then waits for the stragglers.
pub async fn drive<B: Backend>(adaptive: &Arc<Adaptive<B>>, spec: &DriveSpec<'_>) -> Result<Drive, BenchError> {
    let requests = Requests::new(spec.workload)?;
    let recording = Arc::new(Mutex::new(Recording::new(spec.interval, spec.steady_start)));
    let start = Instant::now();
    let sampler = tokio::spawn(sample_states(
        Arc::clone(adaptive),
        Arc::clone(&recording),
        start,
        spec.interval,
    ));
    let progress = tokio::spawn(show_progress(
        Arc::clone(adaptive),
        Arc::clone(&recording),
        start,
        spec.duration,
        spec.progress && std::io::stderr().is_terminal(),
    ));

    let outstanding = Arc::new(AtomicUsize::new(0));
    let mut dropped = 0u64;
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed ^ REQUEST_STREAM_SALT);
    let deadline = start + spec.duration;
    // The saturating backlog's send times: one interval at the current R after the previous
    // one, however late the generator gets to it (when local execution starves this CPU,
    // that lateness is latency the policy must see).
    let mut schedule = Schedule::new(adaptive.now(), adaptive.admission_rate_ops(), SCHEDULE_LAG_MAX)
        .map_err(|err| BenchError::Invalid(format!("send schedule: {err}")))?;
    loop {
        schedule.set_rate(adaptive.admission_rate_ops());
        let now = adaptive.now();
        let Some(next) = schedule.take(now) else {
            let at = adaptive.instant_at(schedule.next_due());
            if at >= deadline {
                break;
            }
            wait_until(at.min(Instant::now() + RATE_RECHECK)).await;
            continue;
        };
        dropped += next.skipped;
        let due = adaptive.instant_at(next.at).max(start);
        if due >= deadline {
            break;
        }
        if outstanding.load(Ordering::Relaxed) >= MAX_OUTSTANDING {
            dropped += 1;
            continue;
        }
        let t = Nanos((due - start).as_nanos() as u64);
        let index = choose(spec.workload, t, &mut rng);
        let (function, args) = requests.make(spec, index, &mut rng);
        outstanding.fetch_add(1, Ordering::Relaxed);
        let adaptive = Arc::clone(adaptive);
        let recording = Arc::clone(&recording);
        let outstanding = Arc::clone(&outstanding);
        tokio::spawn(async move {
            let outcome = adaptive
                .invoke_admitted_as(due, FnId(index as u32), function, args)
                .await;
            let done_at = start.elapsed();
            recording.lock().note(done_at, &outcome);
            outstanding.fetch_sub(1, Ordering::Relaxed);
        });
    }
    let final_state = adaptive.state();
    let drain_deadline = Instant::now() + DRAIN_TIMEOUT;
    while outstanding.load(Ordering::Relaxed) > 0 && Instant::now() < drain_deadline {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    sampler.abort();
    progress.abort();
    if spec.progress && std::io::stderr().is_terminal() {
        eprintln!();
    }
    let wall = start.elapsed();
    // The spawned requests are finished (or abandoned after the drain timeout); take what
    // they recorded.
    let recording = std::mem::replace(&mut *recording.lock(), Recording::new(spec.interval, spec.steady_start));
    Ok(Drive {
        final_state,
        recording,
        dropped,
        wall,
    })
}

/// Salt of the request stream's generator, so it is independent of the policy's.
const REQUEST_STREAM_SALT: u64 = 0x5eed_0f10_ad00;

/// Runs the benchmark on an existing testbed (inside its runtime), loading the graph first
/// when `load` is set (a series of runs on one node loads it once).
pub async fn run_on(
    testbed: &Testbed,
    config: &PlacementBenchConfig,
    load: bool,
) -> Result<PlacementReport, BenchError> {
    let client = testbed.connect().await?;
    if load {
        load_graph(&client, &config.workload, config.graph_nodes, config.seed).await?;
    }
    let counters = |name: &'static str| {
        let client = client.clone();
        async move { node_counter(&client, name).await }
    };
    let (pushbacks_before, wasted_before) = (counters("pushbacks").await, counters("pushback_wasted_cpu_ns").await);
    let mut report = run_backend(testbed, config, client.clone(), || testbed.server_cpu_time()).await?;
    if let (Some(before), Some(after)) = (pushbacks_before, counters("pushbacks").await) {
        let seconds = report.duration_ms / 1e3;
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
        Some(crate::affinity::KeepWarm::start(&config.testbed.server_cpus)?)
    } else {
        None
    };
    let testbed = Testbed::start(&TestbedConfig {
        server: Some(addr.clone()),
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
        let mut report = run_backend(&testbed, config, backend, || {
            pid.and_then(crate::child::process_cpu_time)
        })
        .await?;
        report.policy = format!("redis/{}", report.policy);
        Ok(report)
    })
}

/// Size of the graph's objects: the largest any function of the workload reads.
fn object_bytes(workload: &Workload) -> usize {
    workload
        .functions
        .iter()
        .map(|f| f.object_bytes as usize)
        .max()
        .unwrap_or(64)
        .max(8)
}

/// Invocations of each placement the overheads are calibrated over (a few hundred
/// milliseconds of them on the loopback machine).
const CALIBRATION_CALLS: usize = 5_000;

/// Invocations kept in flight while calibrating: a loaded run's, where messages batch.
/// Measured one at a time, a round trip cost ~23 µs of app CPU here (each one a wake-up);
/// the capacity built on that held every policy at ~40 k/s, a third of the node's.
const CALIBRATION_IN_FLIGHT: usize = 32;

/// Runs `CALIBRATION_CALLS` invocations of the workload's first function placed `placement`,
/// `CALIBRATION_IN_FLIGHT` at a time, and returns the CPU each side spent per invocation
/// beyond what the invocations reported: (app, storage), ns.
async fn calibrate_placement<B: Backend>(
    testbed: &Testbed,
    backend: &B,
    spec: &DriveSpec<'_>,
    placement: Placement,
) -> Result<(f64, f64), BenchError> {
    let requests = Requests::new(spec.workload)?;
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed ^ CALIBRATION_SALT);
    let (app_before, node_before) = (testbed.app_on_cpu_time(), testbed.node_on_cpu_time());
    let (mut app_reported, mut node_reported, mut done) = (0u64, 0u64, 0u64);
    let mut started = 0usize;
    let mut in_flight: Vec<ferry_client::BackendFuture<'_>> = Vec::with_capacity(CALIBRATION_IN_FLIGHT);
    std::future::poll_fn(|cx| loop {
        while in_flight.len() < CALIBRATION_IN_FLIGHT && started < CALIBRATION_CALLS {
            let (function, args) = requests.make(spec, 0, &mut rng);
            in_flight.push(match placement {
                Placement::Local => backend.invoke_local(function, args),
                Placement::Remote => backend.invoke_remote(function, args),
            });
            started += 1;
        }
        let before = in_flight.len();
        in_flight.retain_mut(|call| match call.as_mut().poll(cx) {
            std::task::Poll::Ready(outcome) => {
                if let Ok(invocation) = outcome {
                    app_reported += invocation.cost.app_cpu_ns;
                    node_reported += invocation.cost.storage_cpu_ns;
                    done += 1;
                }
                false
            }
            std::task::Poll::Pending => true,
        });
        if in_flight.is_empty() && started >= CALIBRATION_CALLS {
            return std::task::Poll::Ready(());
        }
        if in_flight.len() == before {
            return std::task::Poll::Pending;
        }
    })
    .await;
    let per_call = |before: Option<Duration>, after: Option<Duration>, reported: u64| match (before, after) {
        (Some(before), Some(after)) if done > 0 => {
            ((after - before).as_nanos() as f64 - reported as f64).max(0.0) / done as f64
        }
        _ => 0.0,
    };
    Ok((
        per_call(app_before, testbed.app_on_cpu_time(), app_reported),
        per_call(node_before, testbed.node_on_cpu_time(), node_reported),
    ))
}

/// Measures the [`Overhead`] of each placement (see [`calibrate_placement`]).
async fn calibrate_overhead<B: Backend>(
    testbed: &Testbed,
    backend: &B,
    spec: &DriveSpec<'_>,
) -> Result<Overhead, BenchError> {
    let (local_app_ns, local_storage_ns) = calibrate_placement(testbed, backend, spec, Placement::Local).await?;
    let (remote_app_ns, remote_storage_ns) = calibrate_placement(testbed, backend, spec, Placement::Remote).await?;
    Ok(Overhead {
        local_app_ns,
        local_storage_ns,
        remote_app_ns,
        remote_storage_ns,
    })
}

/// [`Overhead`] as the report writes it.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct OverheadReport {
    /// App-side CPU per local request beyond what it reported, ns.
    pub local_app_ns: f64,
    /// Storage-node CPU per local request beyond what it reported, ns.
    pub local_storage_ns: f64,
    /// App-side CPU per remote request beyond what it reported, ns.
    pub remote_app_ns: f64,
    /// Storage-node CPU per remote request beyond what it reported, ns.
    pub remote_storage_ns: f64,
}

/// Salt of the calibration's request stream.
const CALIBRATION_SALT: u64 = 0xca1_1b7a7e;

/// Drives `backend` under the configured policy and builds the report; `storage_cpu_time`
/// reads the storage side's CPU time so far.
async fn run_backend<B: Backend>(
    testbed: &Testbed,
    config: &PlacementBenchConfig,
    backend: B,
    storage_cpu_time: impl Fn() -> Option<Duration>,
) -> Result<PlacementReport, BenchError> {
    let policy = config
        .policy
        .build(
            Nanos(config.slo.as_nanos() as u64),
            config.quantile,
            config.testbed.capacity(),
            config.seed,
        )
        .map_err(|err| BenchError::Invalid(format!("policy: {err}")))?;
    let steady_start = config.duration.mul_f64(1.0 - STEADY_FRACTION);
    let spec = DriveSpec {
        workload: &config.workload,
        graph_nodes: config.graph_nodes,
        seed: config.seed,
        duration: config.duration,
        steady_start,
        interval: config.timeline_interval,
        quantile: config.quantile,
        progress: config.progress,
    };
    let overhead = calibrate_overhead(testbed, &backend, &spec).await?;
    let adaptive = Arc::new(Adaptive::with_overhead(backend, policy, overhead)?);
    let server_cpu_before = storage_cpu_time();
    let client_cpu_before = testbed.client_cpu_time();
    let drive = drive(&adaptive, &spec).await?;
    let wall = drive.wall.as_secs_f64();
    let cpus = |before: Option<Duration>, after: Option<Duration>| match (before, after) {
        (Some(before), Some(after)) => Some((after - before).as_secs_f64() / wall),
        _ => None,
    };
    let storage_cpus_used = cpus(server_cpu_before, storage_cpu_time());
    let app_cpus_used = cpus(client_cpu_before, testbed.client_cpu_time());
    let summary = summarize(&spec, &drive);
    Ok(PlacementReport {
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
        latency: summary.latency,
        rpc_fraction: drive.final_state.rpc_fraction,
        rpc_fraction_mean: summary.rpc_fraction_mean,
        rate_ops: drive.final_state.rate_ops,
        converge_ms: summary.converge_ms,
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

/// The steady-state summary and timeline of a drive.
pub struct Summary {
    /// Per-interval rows.
    pub timeline: Vec<TimelineRow>,
    /// Start of the steady window.
    pub steady_start_ms: f64,
    /// Steady goodput.
    pub throughput_ops: f64,
    /// Steady p99.
    pub p99_us: Option<f64>,
    /// Steady median.
    pub latency_us_p50: Option<f64>,
    /// Steady percentiles.
    pub latency: LatencySummary,
    /// Mean X over the steady window.
    pub rpc_fraction_mean: f64,
    /// Convergence time.
    pub converge_ms: Option<f64>,
}

/// Builds the timeline and the steady-state summary of `drive`.
pub fn summarize(spec: &DriveSpec<'_>, drive: &Drive) -> Summary {
    let recording = &drive.recording;
    let final_state = drive.final_state;
    let interval_ms = spec.interval.as_secs_f64() * 1e3;
    let measured_bins = (spec.duration.as_nanos() as u64).div_ceil(recording.interval_ns) as usize;
    let timeline: Vec<TimelineRow> = (0..measured_bins)
        .map(|i| {
            let bin = recording.bins.get(i);
            let completed = bin.map_or(0, |b| b.completed);
            TimelineRow {
                t_ms: (i + 1) as f64 * interval_ms,
                throughput_ops: completed as f64 / spec.interval.as_secs_f64(),
                p99_us: bin.and_then(|b| b.sketch.quantile(spec.quantile)).map(|ns| ns / 1e3),
                latency_us_mean: bin
                    .filter(|b| b.completed > 0)
                    .map(|b| b.latency_sum_ns / b.completed as f64 / 1e3),
                rpc_fraction: bin.and_then(|b| b.rpc_fraction).unwrap_or(final_state.rpc_fraction),
                rate_ops: bin.and_then(|b| b.rate_ops).unwrap_or(final_state.rate_ops),
                remote_share: bin
                    .filter(|b| b.completed > 0)
                    .map(|b| b.remote as f64 / b.completed as f64),
                // One client process: nothing scales the app side.
                app_cores: None,
            }
        })
        .collect();
    let steady_start_ms = spec.steady_start.as_secs_f64() * 1e3;
    let steady_rows: Vec<&TimelineRow> = timeline.iter().filter(|row| row.t_ms > steady_start_ms).collect();
    let steady_seconds = spec.duration.saturating_sub(spec.steady_start).as_secs_f64().max(1e-9);
    let throughput_ops = recording.steady.count() as f64 / steady_seconds;
    let rpc_fraction_mean = if steady_rows.is_empty() {
        final_state.rpc_fraction
    } else {
        steady_rows.iter().map(|row| row.rpc_fraction).sum::<f64>() / steady_rows.len() as f64
    };
    // Smooth over ~50 ms, like the simulator.
    let smooth = ((50.0 / interval_ms).round() as usize).max(1);
    let latency = recording.steady.summary();
    let has_latency = latency.count > 0;
    Summary {
        converge_ms: converge_ms(&timeline, 0.0, throughput_ops, CONVERGE_TOLERANCE, smooth),
        timeline,
        steady_start_ms,
        throughput_ops,
        p99_us: has_latency.then_some(latency.p99_us),
        latency_us_p50: has_latency.then_some(latency.p50_us),
        latency,
        rpc_fraction_mean,
    }
}

/// Records the policy's X and R at the end of every timeline interval.
async fn sample_states<B: Backend>(
    adaptive: Arc<Adaptive<B>>,
    recording: Arc<Mutex<Recording>>,
    start: Instant,
    interval: Duration,
) {
    let mut next = start + interval;
    loop {
        tokio::time::sleep_until(tokio::time::Instant::from_std(next)).await;
        let state = adaptive.state();
        let at = next - start - Duration::from_nanos(1);
        let mut recording = recording.lock();
        let bin = recording.bin(at);
        bin.rpc_fraction = Some(state.rpc_fraction);
        bin.rate_ops = Some(state.rate_ops);
        next += interval;
    }
}

/// Redraws a one-line progress bar with goodput, p99, X and R.
async fn show_progress<B: Backend>(
    adaptive: Arc<Adaptive<B>>,
    recording: Arc<Mutex<Recording>>,
    start: Instant,
    duration: Duration,
    enabled: bool,
) {
    if !enabled {
        return;
    }
    const WIDTH: usize = 30;
    let mut last_completed = 0u64;
    let mut last = Instant::now();
    loop {
        tokio::time::sleep(PROGRESS_PERIOD).await;
        let elapsed = start.elapsed();
        let done = ((elapsed.as_secs_f64() / duration.as_secs_f64()).min(1.0) * WIDTH as f64) as usize;
        let (completed, p99_us) = {
            let recording = recording.lock();
            let p99 = recording
                .bins
                .iter()
                .rev()
                .find(|bin| bin.completed > 0)
                .and_then(|bin| bin.sketch.quantile(0.99))
                .map_or(0.0, |ns| ns / 1e3);
            (recording.completed, p99)
        };
        let rate = (completed - last_completed) as f64 / last.elapsed().as_secs_f64();
        last_completed = completed;
        last = Instant::now();
        let state = adaptive.state();
        eprint!(
            "\r[{}{}] {:5.1}s  goodput {:>8.0}/s  p99 {:>8.0} µs  X {:.2}  R {:>8.0}/s ",
            "=".repeat(done),
            " ".repeat(WIDTH - done),
            elapsed.as_secs_f64(),
            rate,
            p99_us,
            state.rpc_fraction,
            state.rate_ops
        );
        let _ = std::io::stderr().flush();
    }
}
