//! Randomized concurrency runs against a real storage node, with faults, whose recorded
//! history must be strictly serializable (checked by `ferry-check`).
//!
//! A run starts a node in this process and many clients that invoke [`program::NAME`]
//! (random reads, writes and read-modify-writes of a few hot keys, so OCC conflicts are
//! constant; the keys hold strings, hashes, sorted sets and lists) remotely, locally and
//! with pushback allowed, all at once; one client in four ([`resp::RESP_CLIENT_EVERY`])
//! instead sends MULTI/EXEC transactions of Redis commands to the node's RESP port, which
//! runs them in place on the stored values. Faults: a proxy cuts connections at random
//! byte offsets (mid-request, mid-answer, so mid-commit too), and some remote
//! invocations stall without yielding until the watchdog replaces their worker. Every invocation is recorded with the versions it read and installed (a RESP
//! transaction with the tags it read, placed among the versions by [`resolve`]); at the
//! end one more reads every key, so a lost acknowledged write shows up as a cycle.
//!
//! With crashes ([`run_with_crashes`], `ferry check --crash`) the node is a child process
//! on a data dir that [`crash`]'s nemesis kills with SIGKILL at random and restarts; the
//! history across every restart is judged as one.
//!
//! Layout: [`program`] (the function), [`invoke`] (the clients that invoke it), [`resp`]
//! (the clients that speak RESP), [`proxy`] (the cutting proxy), [`link`] (a proxy the
//! nemesis opens, cuts or makes one-way), [`partition`] (a node's links to the config
//! group), [`typed`] (the keys of Redis's types), [`record`] (records to history),
//! [`resolve`] (RESP transactions' versions), [`report`] (what a run did and the
//! verdict), [`crash`] (the node process and its nemesis), [`run`] here.

pub mod cluster;
pub mod crash;
pub mod invoke;
pub mod link;
pub mod nemesis;
pub mod partition;
pub mod program;
pub mod proxy;
pub mod record;
pub mod report;
pub mod resolve;
pub mod resp;
pub mod typed;

use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use ferry_client::{Client, ClientConfig};
use ferry_func::Registry;
use ferry_server::{PushbackConfig, ServerConfig, TenantConfig};

use invoke::{invoke, Route};
use program::{Program, Step};
use record::{Record, Seen};
use report::judge;
pub use report::ChaosReport;

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
    /// Whether one client in [`resp::RESP_CLIENT_EVERY`] speaks RESP (runs on one node,
    /// with or without crashes; cluster runs invoke functions only).
    pub resp: bool,
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
            resp: true,
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
            id: ferry_proto::TenantId(TENANT),
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
    let mut node_config = node_config(config.workers);
    node_config.resp_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    let server = ferry_server::start(node_config, registry.clone()).map_err(|e| start(&e))?;
    let node = Node {
        ferry: server.local_addr(),
        resp: server
            .resp_addr()
            .ok_or_else(|| ChaosError::Start("the node serves no RESP".into()))?,
    };
    let runtime = client_runtime()?;
    let shared = Shared::new(config.duration);
    let outcome = runtime.block_on(drive(config, node, registry.clone(), &shared));
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
    let node = Node {
        ferry: nemesis.addr()?,
        resp: nemesis.resp_addr()?,
    };
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
    records.push(runtime.block_on(final_read(config, node.ferry, registry, &shared))?);
    let replacements = server_replacements(&runtime, node.ferry);
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

/// The node's count of replaced workers, from its stats (0 if it cannot be read).
fn server_replacements(runtime: &tokio::runtime::Runtime, addr: std::net::SocketAddr) -> u64 {
    runtime.block_on(async {
        let Ok(client) = Client::connect(ClientConfig::new(
            addr.to_string(),
            ferry_proto::TenantId(TENANT),
            TOKEN,
        ))
        .await
        else {
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

/// Where the node under test listens.
#[derive(Clone, Copy, Debug)]
struct Node {
    /// ferry's protocol.
    ferry: SocketAddr,
    /// RESP.
    resp: SocketAddr,
}

/// A cutting proxy to `upstream` if the run cuts connections (seeded apart by `stream`),
/// and the address clients then connect to.
async fn cut(
    config: &ChaosConfig,
    upstream: SocketAddr,
    stream: u64,
) -> Result<(Option<proxy::CuttingProxy>, SocketAddr), ChaosError> {
    let Some(mean) = config.cut_mean_bytes else {
        return Ok((None, upstream));
    };
    let proxy = proxy::CuttingProxy::start(upstream, mean, config.seed ^ 0x9e37_79b9 ^ stream)
        .await
        .map_err(|e| ChaosError::Start(e.to_string()))?;
    let addr = proxy.addr();
    Ok((Some(proxy), addr))
}

/// The clients' invocations and RESP transactions until the deadline, through the cutting
/// proxies if any; returns their records and the cuts.
async fn drive(
    config: &ChaosConfig,
    node: Node,
    registry: Registry,
    shared: &Arc<Shared>,
) -> Result<(Vec<Record>, u64), ChaosError> {
    let (proxy, addr) = cut(config, node.ferry, 0).await?;
    let (resp_proxy, resp_addr) = cut(config, node.resp, 0x7265_7370).await?;
    let mut tasks = Vec::new();
    for client in 0..config.clients as u64 {
        let rng = ChaCha8Rng::seed_from_u64(config.seed.wrapping_mul(1_000_003).wrapping_add(client));
        if config.resp && resp::speaks_resp(client) {
            let task = resp::client_loop(client, resp_addr, rng, config.clone(), Arc::clone(shared));
            tasks.push(tokio::spawn(task));
            continue;
        }
        let mut client_config = ClientConfig::new(addr.to_string(), ferry_proto::TenantId(TENANT), TOKEN);
        client_config.registry = registry.clone();
        client_config.trace = true;
        client_config.request_timeout = REQUEST_TIMEOUT;
        tasks.push(tokio::spawn(invoke::client_loop(
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
    let cuts = [proxy, resp_proxy].iter().flatten().map(|p| p.cuts()).sum();
    Ok((records, cuts))
}

/// The final read, directly (no cuts): every key, after every other invocation ended.
async fn final_read(
    config: &ChaosConfig,
    node: SocketAddr,
    registry: Registry,
    shared: &Shared,
) -> Result<Record, ChaosError> {
    let mut final_config = ClientConfig::new(node.to_string(), ferry_proto::TenantId(TENANT), TOKEN);
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
