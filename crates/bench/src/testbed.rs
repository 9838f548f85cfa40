//! The measurement set-up every real-system benchmark shares: this process pinned to the
//! app CPUs, emulated work calibrated once, a storage node started as a child pinned to its
//! own CPUs (or an external one), and a single-threaded runtime for the app side.

use std::path::PathBuf;
use std::time::Duration;

use ferry_client::{Client, ClientConfig};

use ferry_os::cpu_time::{busy_cpu_time, named_threads_cpu_time, threads_on_cpu_time};
use ferry_os::{ChildServer, ChildSpec, KeepWarm};

use crate::BenchError;

/// Name prefixes of the storage node's threads (workers, I/O, watchdog).
const NODE_THREAD_PREFIXES: [&str; 2] = ["ferry-worker", "ferry-io"];

/// CPU time of this process's storage-node threads, if it embeds a node.
fn embedded_node_cpu_time() -> Option<Duration> {
    named_threads_cpu_time(std::process::id(), &NODE_THREAD_PREFIXES)
}

/// Where the two sides run and how to reach the node.
#[derive(Clone, Debug)]
pub struct TestbedConfig {
    /// The `ferry` executable to start the node from.
    pub exe: PathBuf,
    /// An already running node to use instead of starting one.
    pub server: Option<String>,
    /// Tenant to act as.
    pub tenant: u32,
    /// Its token.
    pub token: String,
    /// CPUs of the node (child only).
    pub server_cpus: Vec<usize>,
    /// CPUs of this process (load generator and local execution); empty: not pinned.
    pub client_cpus: Vec<usize>,
    /// Worker threads of the child node.
    pub server_cores: usize,
    /// Further flags for the child node.
    pub server_flags: Vec<String>,
    /// Pipelined connections the client opens.
    pub connections: usize,
    /// Keep the pinned CPUs of both sides from idling ([`KeepWarm`]): the app side's here,
    /// the child node's with its `--keep-warm`. Only pinned CPUs are kept warm.
    pub keep_warm: bool,
}

impl TestbedConfig {
    /// The cores of each side as a placement policy's load model sees them: the app side
    /// runs on one thread (see [`Testbed::runtime`]); the node's workers (a node started
    /// elsewhere is taken to have `server_cores` of them) on its pinned CPUs.
    pub fn capacity(&self) -> Option<ferry_control::placement::load_model::Capacity> {
        let workers = if self.server.is_some() || self.server_cpus.is_empty() {
            self.server_cores
        } else {
            self.server_cores.min(self.server_cpus.len())
        };
        // Loopback moves bytes far faster than the CPUs handle messages: no link binds.
        Some(ferry_control::placement::load_model::Capacity::cores(
            1.0,
            workers.max(1) as f64,
        ))
    }
}

/// A running set-up. Dropping it stops the child node.
pub struct Testbed {
    child: Option<ChildServer>,
    /// Keeps the app side's CPUs awake while the testbed lives.
    _warm: Option<KeepWarm>,
    /// `host:port` of the node.
    pub addr: String,
    /// Emulated-work calibration shared by both sides (iterations per ms).
    pub spin_iters_per_ms: u64,
    /// The app side's runtime: one thread, because the app side has one CPU and cross-
    /// thread wake-ups would only add latency to what is measured.
    pub runtime: tokio::runtime::Runtime,
    config: TestbedConfig,
}

impl Testbed {
    /// Pins this process, calibrates, starts the node.
    pub fn start(config: &TestbedConfig) -> Result<Testbed, BenchError> {
        // An empty CPU list means "do not pin" (e.g. a one-CPU machine).
        if !config.client_cpus.is_empty() {
            ferry_os::pin_current_thread(&config.client_cpus)?;
        }
        if config.server.is_none() && config.server_cpus.iter().any(|cpu| config.client_cpus.contains(cpu)) {
            return Err(BenchError::Invalid(
                "server and client CPUs overlap: the two sides must not share a CPU".into(),
            ));
        }
        let spin_iters_per_ms = ferry_client::calibrate_spin();
        let warm = if config.keep_warm && !config.client_cpus.is_empty() {
            Some(KeepWarm::start(&config.client_cpus)?)
        } else {
            None
        };
        let child = match &config.server {
            Some(_) => None,
            None => Some(ChildServer::spawn(&ChildSpec {
                exe: config.exe.clone(),
                cpus: config.server_cpus.clone(),
                cores: config.server_cores,
                tenants: vec![format!("{}:{}", config.tenant, config.token)],
                spin_iters_per_ms,
                keep_warm: config.keep_warm && !config.server_cpus.is_empty(),
                extra_args: config.server_flags.clone(),
            })?),
        };
        let addr = match (&config.server, &child) {
            (Some(addr), _) => addr.clone(),
            (None, Some(child)) => child.addr().to_string(),
            (None, None) => unreachable!("a child is started when no server is given"),
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|err| BenchError::Io(err.to_string()))?;
        Ok(Testbed {
            child,
            _warm: warm,
            addr,
            spin_iters_per_ms,
            runtime,
            config: config.clone(),
        })
    }

    /// A client of the node (call inside [`Testbed::runtime`]).
    pub async fn connect(&self) -> Result<Client, BenchError> {
        let mut client_config = ClientConfig::new(self.addr.clone(), self.config.tenant, self.config.token.clone());
        client_config.connections = self.config.connections;
        Ok(Client::connect(client_config).await?)
    }

    /// CPU time the node has used so far: the child's, or for a node embedded in this
    /// process the sum of its threads; `None` for a node elsewhere.
    pub fn server_cpu_time(&self) -> Option<Duration> {
        match &self.child {
            Some(child) => busy_cpu_time(child.pid()),
            None => embedded_node_cpu_time(),
        }
    }

    /// CPU time this process has used so far (but for its keep-warm threads).
    pub fn client_cpu_time(&self) -> Option<Duration> {
        busy_cpu_time(std::process::id())
    }

    /// Time the app side's threads spent on a CPU so far, to the nanosecond: this process
    /// but its keep-warm threads and the threads of a node it embeds.
    pub fn app_on_cpu_time(&self) -> Option<Duration> {
        threads_on_cpu_time(std::process::id(), |name| {
            !name.starts_with(ferry_os::KEEP_WARM_THREAD_PREFIX)
                && !NODE_THREAD_PREFIXES.iter().any(|p| name.starts_with(p))
        })
    }

    /// Time the node's threads spent on a CPU so far, to the nanosecond (but for its
    /// keep-warm threads); `None` for a node elsewhere.
    pub fn node_on_cpu_time(&self) -> Option<Duration> {
        match &self.child {
            Some(child) => {
                threads_on_cpu_time(child.pid(), |name| !name.starts_with(ferry_os::KEEP_WARM_THREAD_PREFIX))
            }
            None => threads_on_cpu_time(std::process::id(), |name| {
                NODE_THREAD_PREFIXES.iter().any(|p| name.starts_with(p))
            })
            .filter(|t| !t.is_zero()),
        }
    }

    /// CPUs the node runs on (empty for an external node).
    pub fn server_cpus(&self) -> Vec<usize> {
        if self.child.is_some() {
            self.config.server_cpus.clone()
        } else {
            Vec::new()
        }
    }
}
