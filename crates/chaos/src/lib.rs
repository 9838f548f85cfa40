//! Randomized concurrency runs against a real storage node, with faults, whose recorded
//! history must be strictly serializable (checked by `ferry-check`).
//!
//! A run starts a node in this process and many clients that invoke [`program::NAME`]
//! (random reads, writes and read-modify-writes of a few hot keys, so OCC conflicts are
//! constant; the keys hold strings, hashes, sorted sets and lists) remotely, locally and with pushback allowed, all at once. Faults: a proxy
//! cuts connections at random byte offsets (mid-request, mid-answer, so mid-commit too),
//! and some remote invocations stall without yielding until the watchdog replaces their
//! worker. Every invocation is recorded with the versions it read and installed; at the
//! end one more reads every key, so a lost acknowledged write shows up as a cycle.
//!
//! With crashes ([`run_with_crashes`], `ferry check --crash`) the node is a child process
//! on a data dir that [`crash`]'s nemesis kills with SIGKILL at random and restarts; the
//! history across every restart is judged as one.
//!
//! Layout: [`program`] (the function), [`proxy`] (the cutting proxy), [`link`] (a proxy the
//! nemesis opens, cuts or makes one-way), [`partition`] (a node's links to the config
//! group), [`typed`] (the keys of Redis's types), [`record`] (records
//! to history), [`crash`] (the node process and its nemesis), [`run`] here.

pub mod cluster;
pub mod crash;
pub mod link;
pub mod nemesis;
pub mod partition;
pub mod program;
pub mod proxy;
pub mod record;
pub mod typed;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use ferry_client::{Client, ClientConfig, ClientError};
use ferry_func::Registry;
use ferry_server::{PushbackConfig, ServerConfig, TenantConfig};

use program::{Program, Step};
use record::{Finished, Record, Seen};

/// Tenant the run acts as.
const TENANT: u32 = 1;

/// Its token.
const TOKEN: &str = "chaos";

/// CPU budget of one invocation on the chaos node: short, so a stall trips the watchdog
/// quickly.
const INVOKE_BUDGET: Duration = Duration::from_millis(20);

/// How long a stalled invocation blocks its worker: past the budget and the watchdog's
/// grace (two periods of a quarter budget).
const STALL_MS: u16 = 60;

/// Most stalls in one run: each replaces a worker thread, and a node replaces at most
/// `ferry_server::MAX_WORKER_REPLACEMENTS` over its life.
pub const MAX_STALLS_PER_RUN: u64 = 24;

/// Longest a client waits for one answer: a lost request becomes an unknown outcome
/// after this, so it bounds how long a run can hang on one.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// Most hot keys.
pub const MAX_KEYS: u8 = 64;

/// Most clients.
pub const MAX_CLIENTS: usize = 256;

/// What a run does.
#[derive(Clone, Debug, PartialEq)]
pub struct ChaosConfig {
    /// Seeds every random choice (the node's interleavings are not reproducible).
    pub seed: u64,
    /// How long clients keep invoking.
    pub duration: Duration,
    /// Concurrent clients, each with its own connection.
    pub clients: usize,
    /// Hot keys they share.
    pub keys: u8,
    /// Node workers.
    pub workers: usize,
    /// Mean bytes a connection carries each way before the proxy cuts it; `None`: no proxy.
    pub cut_mean_bytes: Option<u64>,
    /// Chance that a remote invocation stalls its worker until the watchdog replaces it.
    pub stall_probability: f64,
}

impl ChaosConfig {
    /// Every fault on, 12 clients on 6 keys, a 2-worker node.
    pub fn new(seed: u64, duration: Duration) -> ChaosConfig {
        ChaosConfig {
            seed,
            duration,
            clients: 12,
            keys: 6,
            workers: 2,
            cut_mean_bytes: Some(32 * 1024),
            stall_probability: 0.002,
        }
    }

    fn validate(&self) -> Result<(), ChaosError> {
        let bad = |why: String| Err(ChaosError::Invalid(why));
        if self.clients == 0 || self.clients > MAX_CLIENTS {
            return bad(format!("clients must be 1..={MAX_CLIENTS}, not {}", self.clients));
        }
        if self.keys < 4 || self.keys > MAX_KEYS {
            return bad(format!("keys must be 4..={MAX_KEYS}, not {}", self.keys));
        }
        if !(0.0..=1.0).contains(&self.stall_probability) {
            return bad(format!("stall probability {} is not in 0..=1", self.stall_probability));
        }
        if self.cut_mean_bytes == Some(0) {
            return bad("a mean of 0 bytes to a cut leaves nothing to run".into());
        }
        Ok(())
    }
}

/// What a run did and what the checker found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChaosReport {
    /// Invocations recorded (the final read included).
    pub invocations: usize,
    /// Acknowledged as committed.
    pub committed: usize,
    /// Failed, with nothing applied.
    pub failed: usize,
    /// Outcome unknown to the client.
    pub unknown: usize,
    /// Committed invocations by where they finished: on the node, here, here after a pushback.
    pub remote: usize,
    /// See `remote`.
    pub local: usize,
    /// See `remote`.
    pub pushed_back: usize,
    /// Attempts beyond the first (OCC conflicts retried, on either side).
    pub retries: u64,
    /// Connections the proxy cut.
    pub cuts: u64,
    /// Workers the watchdog replaced (in a crash run: by the last node process).
    pub worker_replacements: u64,
    /// Times the node was killed with SIGKILL and restarted (crash runs; in a cluster run,
    /// storage nodes killed).
    pub crashes: u64,
    /// Slot moves of the hot keys' slot (cluster runs).
    pub moves: u64,
    /// Failovers: the hot slot's primary stopped until its replica took over (cluster runs).
    pub failovers: u64,
    /// Partitions: the hot slot's primary cut off the config group, its clients still
    /// reaching it, until its replica took over (cluster runs).
    pub partitions: u64,
    /// The hot slot's primary cut off its clients, both ways (cluster runs).
    pub client_partitions: u64,
    /// The link between the hot slot's primary and its clients open one way only: the
    /// requests arrive and no answer comes back, or the reverse (cluster runs).
    pub one_way_partitions: u64,
    /// The hot slot's primary cut off its replicas, both ways or one way (cluster runs).
    pub replication_partitions: u64,
    /// Storage nodes killed with their data dir deleted (a lost disk; cluster runs).
    pub disks_lost: u64,
    /// Acknowledged writes the final read does not see (each would also be a violation).
    pub lost_writes: usize,
    /// Invocations the checker placed in its graph.
    pub judged: usize,
    /// Why the history is not strictly serializable, if it is not.
    pub violation: Option<String>,
}

impl ChaosReport {
    /// The faults of a cluster run, counted, for a line of output.
    pub fn cluster_faults(&self) -> String {
        format!(
            "{} slot moves, {} failovers, {} partitions from the config group, {} from the clients, {} one-way, \
             {} from the replicas, {} storage nodes killed, {} disks lost",
            self.moves,
            self.failovers,
            self.partitions,
            self.client_partitions,
            self.one_way_partitions,
            self.replication_partitions,
            self.crashes,
            self.disks_lost
        )
    }

    /// Adds `other`'s counts to this one's (the totals of several runs).
    pub fn add(&mut self, other: &ChaosReport) {
        self.invocations += other.invocations;
        self.committed += other.committed;
        self.failed += other.failed;
        self.unknown += other.unknown;
        self.judged += other.judged;
        self.crashes += other.crashes;
        self.moves += other.moves;
        self.failovers += other.failovers;
        self.partitions += other.partitions;
        self.client_partitions += other.client_partitions;
        self.one_way_partitions += other.one_way_partitions;
        self.replication_partitions += other.replication_partitions;
        self.disks_lost += other.disks_lost;
        self.lost_writes += other.lost_writes;
    }
}

/// A run could not be carried out (not a verdict on the history).
#[derive(Debug, thiserror::Error)]
pub enum ChaosError {
    /// A configuration value out of range.
    #[error("invalid chaos configuration: {0}")]
    Invalid(String),
    /// The node, the proxy or a runtime could not start.
    #[error("cannot start the run: {0}")]
    Start(String),
    /// The client runtime answered something it never should.
    #[error("client bug: {0}")]
    Client(String),
    /// The node process of a crash run exited without being killed.
    #[error("{0}")]
    NodeDied(String),
    /// The records contradict themselves.
    #[error(transparent)]
    Record(#[from] record::RecordError),
}

/// The node configuration of a chaos run (its own process in a crash run: `check-node`):
/// a short invocation budget, so a stall trips the watchdog quickly, and pushback always
/// allowed, so the pushback path runs as often as the other two.
pub fn node_config(workers: usize) -> ServerConfig {
    let mut server_config = ServerConfig::new(
        "127.0.0.1:0".parse().expect("loopback address"),
        workers,
        vec![TenantConfig {
            id: TENANT,
            token: TOKEN.into(),
            quota_bytes: 64 << 20,
            home_core: None,
            maxmemory_policy: Default::default(),
        }],
    );
    server_config.invoke_budget = INVOKE_BUDGET;
    server_config.spin_iters_per_ms = Some(ferry_func::work::DEFAULT_ITERS_PER_MS);
    // Every worker counts as overloaded, so each compute-bound invocation that allows it
    // is pushed back.
    server_config.pushback = PushbackConfig {
        old_invocations_min: 0,
        new_invocations_min: 0,
        keep_min: 0,
        ..PushbackConfig::default()
    };
    server_config
}

/// The functions of a chaos node and its clients: the builtins and [`program::NAME`].
pub fn registry() -> Result<Registry, ChaosError> {
    let mut registry = Registry::with_builtins();
    registry
        .register(program::NAME, program::run)
        .map_err(|e| ChaosError::Start(e.to_string()))?;
    Ok(registry)
}

/// Runs one chaos run against a node in this process and checks its history.
pub fn run(config: &ChaosConfig) -> Result<ChaosReport, ChaosError> {
    config.validate()?;
    let start = |e: &dyn std::fmt::Display| ChaosError::Start(e.to_string());
    let registry = registry()?;
    let server = ferry_server::start(node_config(config.workers), registry.clone()).map_err(|e| start(&e))?;
    let runtime = client_runtime()?;
    let shared = Shared::new(config.duration);
    let outcome = runtime.block_on(drive(config, server.local_addr(), registry.clone(), &shared));
    let outcome = outcome.and_then(|(mut records, cuts)| {
        records.push(runtime.block_on(final_read(config, server.local_addr(), registry, &shared))?);
        Ok((records, cuts))
    });
    let replacements = server_replacements(&runtime, server.local_addr());
    drop(runtime);
    server.shutdown();
    let (records, cuts) = outcome?;
    judge(&records, cuts, replacements, 0)
}

/// Runs one chaos run against a node process that `crash` kills and restarts at random,
/// then one last time right before the final read, and checks the history of the whole
/// run across the restarts.
pub fn run_with_crashes(config: &ChaosConfig, crash: &crash::CrashConfig) -> Result<ChaosReport, ChaosError> {
    config.validate()?;
    let registry = registry()?;
    let nemesis = Arc::new(crash::Nemesis::start(crash.clone(), config.seed ^ 0x5eed_c4a5)?);
    let node = nemesis.addr()?;
    let runtime = client_runtime()?;
    let shared = Shared::new(config.duration);
    let killer = std::thread::spawn({
        let (nemesis, deadline) = (Arc::clone(&nemesis), shared.deadline);
        move || nemesis.run_until(deadline)
    });
    let outcome = runtime.block_on(drive(config, node, registry.clone(), &shared));
    let killed = killer
        .join()
        .map_err(|_| ChaosError::Client("the nemesis thread panicked".into()))?;
    let (mut records, cuts) = outcome?;
    killed?;
    nemesis.crash_and_restart()?;
    records.push(runtime.block_on(final_read(config, node, registry, &shared))?);
    let replacements = server_replacements(&runtime, node);
    drop(runtime);
    let crashes = nemesis.crashes();
    drop(nemesis);
    judge(&records, cuts, replacements, crashes)
}

fn client_runtime() -> Result<tokio::runtime::Runtime, ChaosError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| ChaosError::Start(e.to_string()))
}

/// The report of a run's records, with the checker's verdict.
fn judge(records: &[Record], cuts: u64, replacements: u64, crashes: u64) -> Result<ChaosReport, ChaosError> {
    let mut report = summarize(records);
    report.cuts = cuts;
    report.worker_replacements = replacements;
    report.crashes = crashes;
    report.lost_writes = record::lost_writes(records);
    let history = record::history(records)?;
    let verdict = ferry_check::check(&history);
    report.judged = verdict.judged;
    report.violation = verdict.violation.map(|v| v.to_string());
    Ok(report)
}

/// The node's count of replaced workers, from its stats (0 if it cannot be read).
fn server_replacements(runtime: &tokio::runtime::Runtime, addr: std::net::SocketAddr) -> u64 {
    runtime.block_on(async {
        let Ok(client) = Client::connect(ClientConfig::new(addr.to_string(), TENANT, TOKEN)).await else {
            return 0;
        };
        client
            .stats()
            .await
            .ok()
            .and_then(|s| s.into_iter().find(|e| e.name == "node.worker_replacements"))
            .map_or(0, |e| e.value)
    })
}

fn summarize(records: &[Record]) -> ChaosReport {
    let mut report = ChaosReport {
        invocations: records.len(),
        ..ChaosReport::default()
    };
    for r in records {
        match r.seen {
            Seen::Committed { finished, retries, .. } => {
                report.committed += 1;
                report.retries += u64::from(retries);
                match finished {
                    Finished::Remote => report.remote += 1,
                    Finished::Local => report.local += 1,
                    Finished::PushedBack => report.pushed_back += 1,
                }
            }
            Seen::Failed => report.failed += 1,
            Seen::Unknown => report.unknown += 1,
        }
    }
    report
}

/// Where a client sends an invocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    Remote,
    Local,
    Pushable,
}

/// What all clients share while running.
struct Shared {
    started: Instant,
    deadline: Instant,
    stalls: AtomicU64,
}

impl Shared {
    fn new(duration: Duration) -> Arc<Shared> {
        let started = Instant::now();
        Arc::new(Shared {
            started,
            deadline: started + duration,
            stalls: AtomicU64::new(0),
        })
    }
}

/// The clients' invocations until the deadline, through the cutting proxy if any; returns
/// their records and the cuts.
async fn drive(
    config: &ChaosConfig,
    node: std::net::SocketAddr,
    registry: Registry,
    shared: &Arc<Shared>,
) -> Result<(Vec<Record>, u64), ChaosError> {
    let proxy = match config.cut_mean_bytes {
        Some(mean) => Some(
            proxy::CuttingProxy::start(node, mean, config.seed ^ 0x9e37_79b9)
                .await
                .map_err(|e| ChaosError::Start(e.to_string()))?,
        ),
        None => None,
    };
    let addr = proxy.as_ref().map_or(node, |p| p.addr());
    let mut tasks = Vec::new();
    for client in 0..config.clients as u64 {
        let mut client_config = ClientConfig::new(addr.to_string(), TENANT, TOKEN);
        client_config.registry = registry.clone();
        client_config.trace = true;
        client_config.request_timeout = REQUEST_TIMEOUT;
        let rng = ChaCha8Rng::seed_from_u64(config.seed.wrapping_mul(1_000_003).wrapping_add(client));
        tasks.push(tokio::spawn(client_loop(
            client,
            client_config,
            rng,
            config.clone(),
            Arc::clone(shared),
        )));
    }
    let mut records = Vec::new();
    for task in tasks {
        records.extend(task.await.map_err(|e| ChaosError::Client(e.to_string()))??);
    }
    let cuts = proxy.as_ref().map_or(0, |p| p.cuts());
    Ok((records, cuts))
}

/// The final read, directly (no cuts): every key, after every other invocation ended.
async fn final_read(
    config: &ChaosConfig,
    node: std::net::SocketAddr,
    registry: Registry,
    shared: &Shared,
) -> Result<Record, ChaosError> {
    let mut final_config = ClientConfig::new(node.to_string(), TENANT, TOKEN);
    final_config.registry = registry;
    final_config.trace = true;
    let client = Client::connect(final_config)
        .await
        .map_err(|e| ChaosError::Start(format!("final read: {e}")))?;
    let program = Program {
        tag: u64::MAX,
        steps: (0..config.keys).map(Step::Read).collect(),
    };
    let record = invoke(u64::MAX, &client, &program, Route::Remote, shared).await?;
    if !matches!(record.seen, Seen::Committed { .. }) {
        return Err(ChaosError::Client(format!("the final read failed: {:?}", record.seen)));
    }
    Ok(record)
}

async fn client_loop(
    client_id: u64,
    config: ClientConfig,
    mut rng: ChaCha8Rng,
    chaos: ChaosConfig,
    shared: Arc<Shared>,
) -> Result<Vec<Record>, ChaosError> {
    let mut records = Vec::new();
    let mut client: Option<Client> = None;
    let mut seq = 0u64;
    while Instant::now() < shared.deadline {
        let connected = match &client {
            Some(c) => c.clone(),
            None => match Client::connect(config.clone()).await {
                Ok(c) => {
                    client = Some(c.clone());
                    c
                }
                // The proxy may cut the hello itself: try again.
                Err(_) => continue,
            },
        };
        seq += 1;
        let route = random_route(&mut rng);
        let program = random_program(&mut rng, (client_id + 1) << 32 | seq, route, &chaos, &shared);
        records.push(invoke(client_id, &connected, &program, route, &shared).await?);
    }
    Ok(records)
}

/// Where an invocation goes: remote, local or pushable, equally often.
fn random_route(rng: &mut impl Rng) -> Route {
    match rng.gen_range(0..3) {
        0 => Route::Remote,
        1 => Route::Local,
        _ => Route::Pushable,
    }
}

fn random_program(rng: &mut ChaCha8Rng, tag: u64, route: Route, chaos: &ChaosConfig, shared: &Shared) -> Program {
    let mut keys: Vec<u8> = (0..chaos.keys).collect();
    let touched = rng.gen_range(1..=4);
    let mut steps = Vec::new();
    for _ in 0..touched {
        let k = keys.swap_remove(rng.gen_range(0..keys.len()));
        steps.push(match rng.gen_range(0..10) {
            0..=3 => Step::Read(k),
            4..=5 if typed::kind(k) == typed::Kind::Str => Step::Write(k),
            _ => Step::Rmw(k),
        });
        if rng.gen_bool(0.2) {
            steps.push(Step::Compute(rng.gen_range(10..=200)));
        }
    }
    if route == Route::Remote
        && rng.gen_bool(chaos.stall_probability)
        && shared.stalls.fetch_add(1, Ordering::Relaxed) < MAX_STALLS_PER_RUN
    {
        let at = rng.gen_range(0..=steps.len());
        steps.insert(at, Step::Stall(STALL_MS));
    }
    Program { tag, steps }
}

/// Runs one invocation and records what the client saw.
async fn invoke<B: ferry_client::Backend + ?Sized>(
    client_id: u64,
    client: &B,
    program: &Program,
    route: Route,
    shared: &Shared,
) -> Result<Record, ChaosError> {
    let args = program.encode();
    let invoke_ns = shared.started.elapsed().as_nanos() as u64;
    let result = match route {
        Route::Remote => client.invoke_remote(program::NAME, args).await,
        Route::Local => client.invoke_local(program::NAME, args).await,
        Route::Pushable => client.invoke_pushable(program::NAME, args).await,
    };
    let complete_ns = shared.started.elapsed().as_nanos() as u64;
    let seen = match result {
        Ok(done) => {
            let finished = match (done.placement, done.pushed_back) {
                (_, true) => Finished::PushedBack,
                (ferry_client::Placement::Remote, false) => Finished::Remote,
                _ => Finished::Local,
            };
            let trace = done
                .trace
                .ok_or_else(|| ChaosError::Client("a traced invocation came back without its trace".into()))?;
            let tags = program::decode_result(&done.result)
                .ok_or_else(|| ChaosError::Client(format!("result of {} bytes is not tags", done.result.len())))?;
            Seen::Committed {
                trace,
                tags,
                finished,
                retries: done.cost.attempts.saturating_sub(1),
            }
        }
        Err(ClientError::CommitOutcomeUnknown(_)) => Seen::Unknown,
        Err(
            ClientError::Server { .. }
            | ClientError::Disconnected(_)
            | ClientError::Connect { .. }
            | ClientError::Timeout(_),
        ) => Seen::Failed,
        Err(other) => return Err(ChaosError::Client(other.to_string())),
    };
    Ok(Record {
        client: client_id,
        program: program.clone(),
        invoke_ns,
        complete_ns,
        seen,
    })
}
