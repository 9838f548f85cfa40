//! The measurement set-up every real-system benchmark shares: this process pinned to the
//! app CPUs, emulated work calibrated once, a storage node started as a child pinned to its
//! own CPUs (or embedded in this process on its own CPUs, or an external one), and a
//! single-threaded runtime for the app side.

use ferry_proto::TenantId;
use std::path::PathBuf;
use std::time::Duration;

use ferry_client::{Client, ClientConfig};
use ferry_os::cpu_time::{busy_cpu_time, threads_on_cpu_time};
use ferry_os::{ChildServer, ChildSpec, KeepWarm};
use ferry_server::ServerHandle;

use crate::accounting::{app_side_cpu_time, embedded_node_cpu_time, thread_side, ThreadSide};
use crate::embedded::{start_embedded_node, EmbeddedNode};
use crate::BenchError;

/// Where the storage node a testbed measures runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeSite {
    /// A child process the testbed starts from `exe`, pinned to `server_cpus`.
    Child,
    /// Inside this process, started by the testbed with its threads pinned to `server_cpus`
    /// (`ferry demo`: one binary and nothing else to find).
    Embedded,
    /// Already running at this `host:port` (`--server`, Redis): how it is pinned is not the
    /// testbed's to know.
    External(String),
}

impl NodeSite {
    /// A node at `server` if one is given (`--server`), else a child.
    pub fn child_unless(server: Option<String>) -> NodeSite {
        server.map_or(NodeSite::Child, NodeSite::External)
    }
}

/// Where the two sides run and how to reach the node.
#[derive(Clone, Debug)]
pub struct TestbedConfig {
    /// The `ferry` executable to start a child node from.
    pub exe: PathBuf,
    /// Where the node runs.
    pub node: NodeSite,
    /// Tenant to act as.
    pub tenant: TenantId,
    /// Its token.
    pub token: String,
    /// CPUs of the node (a child or an embedded node; empty: not pinned).
    pub server_cpus: Vec<usize>,
    /// CPUs of this process (load generator and local execution); empty: not pinned.
    pub client_cpus: Vec<usize>,
    /// Worker threads of the child or embedded node.
    pub server_cores: usize,
    /// Further flags for the child node (an embedded node takes none).
    pub server_flags: Vec<String>,
    /// Pipelined connections the client opens.
    pub connections: usize,
    /// Keep the pinned CPUs of both sides from idling ([`KeepWarm`]): the app side's here,
    /// a child node's with its `--keep-warm`, an embedded node's here too. Only pinned CPUs
    /// are kept warm.
    pub keep_warm: bool,
}

impl TestbedConfig {
    /// The cores of each side as a placement policy's load model sees them: the app side
    /// runs on one thread (see [`Testbed::runtime`]); the node's workers (a node started
    /// elsewhere is taken to have `server_cores` of them) on its pinned CPUs.
    pub fn capacity(&self) -> Option<ferry_control::placement::load_model::Capacity> {
        let external = matches!(self.node, NodeSite::External(_));
        let workers = if external || self.server_cpus.is_empty() {
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

/// A running set-up. Dropping it stops the child or embedded node.
pub struct Testbed {
    child: Option<ChildServer>,
    /// Keeps the app side's CPUs (and an embedded node's) awake while the testbed lives.
    _warm: Vec<KeepWarm>,
    /// `host:port` of the node.
    pub addr: String,
    /// Emulated-work calibration shared by both sides (iterations per ms).
    pub spin_iters_per_ms: u64,
    /// The app side's runtime: one thread, because the app side has one CPU and cross-
    /// thread wake-ups would only add latency to what is measured.
    pub runtime: tokio::runtime::Runtime,
    /// The embedded node; after `runtime`, so the app side's connections are gone when it
    /// stops.
    _embedded: Option<ServerHandle>,
    config: TestbedConfig,
}

impl Testbed {
    /// Pins this process, calibrates, starts the node.
    pub fn start(config: &TestbedConfig) -> Result<Testbed, BenchError> {
        // An empty CPU list means "do not pin" (e.g. a one-CPU machine).
        if !config.client_cpus.is_empty() {
            ferry_os::pin_current_thread(&config.client_cpus)?;
        }
        let external = matches!(config.node, NodeSite::External(_));
        if !external && config.server_cpus.iter().any(|cpu| config.client_cpus.contains(cpu)) {
            return Err(BenchError::Invalid(
                "server and client CPUs overlap: the two sides must not share a CPU".into(),
            ));
        }
        let spin_iters_per_ms = ferry_client::calibrate_spin();
        let mut warm = Vec::new();
        if config.keep_warm && !config.client_cpus.is_empty() {
            warm.push(KeepWarm::start(&config.client_cpus)?);
        }
        if config.keep_warm && config.node == NodeSite::Embedded && !config.server_cpus.is_empty() {
            warm.push(KeepWarm::start(&config.server_cpus)?);
        }
        let child = match &config.node {
            NodeSite::External(_) | NodeSite::Embedded => None,
            NodeSite::Child => Some(ChildServer::spawn(&ChildSpec {
                exe: config.exe.clone(),
                cpus: config.server_cpus.clone(),
                cores: config.server_cores,
                tenants: vec![format!("{}:{}", config.tenant, config.token)],
                spin_iters_per_ms,
                keep_warm: config.keep_warm && !config.server_cpus.is_empty(),
                extra_args: config.server_flags.clone(),
            })?),
        };
        let embedded = match config.node {
            NodeSite::Embedded => Some(start_embedded_node(&EmbeddedNode {
                cpus: &config.server_cpus,
                cores: config.server_cores,
                tenant: config.tenant,
                token: &config.token,
                spin_iters_per_ms,
            })?),
            NodeSite::External(_) | NodeSite::Child => None,
        };
        let addr = match (&config.node, &child, &embedded) {
            (NodeSite::External(addr), _, _) => addr.clone(),
            (_, Some(child), _) => child.addr().to_string(),
            (_, _, Some(node)) => node.local_addr().to_string(),
            (_, None, None) => unreachable!("a child or an embedded node is started unless the node is external"),
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
            _embedded: embedded,
            config: config.clone(),
        })
    }

    /// A client of the node (call inside [`Testbed::runtime`]).
    pub async fn connect(&self) -> Result<Client, BenchError> {
        let mut client_config = ClientConfig::new(self.addr.clone(), self.config.tenant, self.config.token.clone());
        client_config.connections = self.config.connections;
        Ok(Client::connect(client_config).await?)
    }

    /// CPU time the node has used so far: the child's (but for its keep-warm threads), or
    /// for a node embedded in this process the sum of its threads; `None` for a node
    /// elsewhere.
    pub fn server_cpu_time(&self) -> Option<Duration> {
        match (&self.child, &self.config.node) {
            (Some(child), _) => busy_cpu_time(child.pid()),
            (None, NodeSite::Embedded) => embedded_node_cpu_time(std::process::id()),
            (None, _) => None,
        }
    }

    /// CPU time the app side has used so far: this process's, but for its keep-warm
    /// threads and the threads of an embedded node (see
    /// [`crate::accounting::app_side_cpu_time`]).
    pub fn app_cpu_time(&self) -> Option<Duration> {
        app_side_cpu_time(std::process::id())
    }

    /// Time the app side's threads spent on a CPU so far, to the nanosecond: this process
    /// but its keep-warm threads and the threads of a node it embeds.
    pub fn app_on_cpu_time(&self) -> Option<Duration> {
        threads_on_cpu_time(std::process::id(), |name| thread_side(name) == ThreadSide::App)
    }

    /// Time the node's threads spent on a CPU so far, to the nanosecond (but for its
    /// keep-warm threads); `None` for a node elsewhere.
    pub fn node_on_cpu_time(&self) -> Option<Duration> {
        match (&self.child, &self.config.node) {
            (Some(child), _) => threads_on_cpu_time(child.pid(), |name| thread_side(name) != ThreadSide::KeepWarm),
            (None, NodeSite::Embedded) => {
                threads_on_cpu_time(std::process::id(), |name| thread_side(name) == ThreadSide::Node)
                    .filter(|t| !t.is_zero())
            }
            (None, _) => None,
        }
    }

    /// Each side's busy CPU as the policy is told it ([`ferry_client::BusyMeter`]): the
    /// node's threads' on-CPU time (but for keep-warm threads) and the app side's, less
    /// what the load generator's pacer spun idle.
    pub fn busy_meter(&self) -> std::sync::Arc<dyn ferry_client::BusyMeter> {
        std::sync::Arc::new(TestbedMeter {
            child: self.child.as_ref().map(|c| c.pid()),
            embedded: self.config.node == NodeSite::Embedded,
        })
    }

    /// CPUs the node is pinned to: a child's or an embedded node's (empty when not pinned,
    /// and for an external node, whose pinning is not the testbed's to know).
    pub fn server_cpus(&self) -> Vec<usize> {
        match self.config.node {
            NodeSite::Child | NodeSite::Embedded => self.config.server_cpus.clone(),
            NodeSite::External(_) => Vec::new(),
        }
    }
}

/// What [`Testbed::busy_meter`] reads.
struct TestbedMeter {
    /// The child node's pid, if the node is a child.
    child: Option<u32>,
    /// The node runs in this process.
    embedded: bool,
}

impl ferry_client::BusyMeter for TestbedMeter {
    fn busy(&self) -> (Option<Duration>, Option<Duration>) {
        let pid = std::process::id();
        let app = threads_on_cpu_time(pid, |name| thread_side(name) == ThreadSide::App)
            .map(|t| t.saturating_sub(crate::loadgen::spin_idle_time()));
        let node = match (self.child, self.embedded) {
            (Some(child), _) => threads_on_cpu_time(child, |name| thread_side(name) != ThreadSide::KeepWarm),
            (None, true) => threads_on_cpu_time(pid, |name| thread_side(name) == ThreadSide::Node),
            (None, false) => None,
        };
        (app, node)
    }
}
