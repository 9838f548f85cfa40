//! The soak against a cluster (`ferry check --cluster`): `ferry cluster up` with three
//! primaries, a replica each and `--ack replica`, the chaos program registered on the
//! storage nodes, and clients that follow the config group. Every hot key carries one
//! hashtag, so each program runs on the one node serving that slot, and a nemesis works
//! on exactly that ([`crate::nemesis`]: slot moves, failovers, partitions from the config
//! group, from the clients and from the replicas, both ways and one way, kills and lost
//! disks). Every storage node is reached by the clients and by its replicas through
//! proxies the nemesis controls ([`Link`]): the clients' routes name the proxies, and so
//! does the configuration for each node's replication listener (`cluster up
//! --node-replication-via`). The whole history, across every fault, must be strictly
//! serializable, and the final read must see every acknowledged write. That works because
//! a key keeps its versions when it moves or its replica is promoted.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tokio::sync::watch;

use ferry_client::config_group::{follow_routes, ConfigClient};
use ferry_client::{ClientConfig, ClusterClient};
use ferry_cluster::{ClusterMap, NodeEntry};
use ferry_config::ClusterConfig;

use crate::invoke::{invoke, random_program, random_route, Route};
use crate::link::Link;
use crate::nemesis::{nemesis, Cluster, Fault, ALL, UNDER_ACK_PRIMARY};
use crate::partition::GroupLink;
use crate::program::{Program, Step};
use crate::record::{Record, Seen};
use crate::report::judge;
use crate::{client_runtime, registry, ChaosConfig, ChaosError, ChaosReport, Shared, REQUEST_TIMEOUT, TENANT, TOKEN};

/// Builds the `ferry cluster up` command for a data dir and the JSON file it writes.
pub type ClusterLauncher = Arc<dyn Fn(&Path, &Path) -> Command + Send + Sync>;

/// Longest wait for the cluster to start, a fault to settle, or the final read.
pub(crate) const SETTLE: Duration = Duration::from_secs(60);

/// The storage nodes the launcher's `cluster up` starts (three primaries, two replicas
/// each), each of which dials the config group through a [`GroupLink`]. Two replicas:
/// while a cut-off primary cannot follow its successor, the other replica acknowledges
/// the successor's writes (`--ack replica`), so writes go on beside the cut-off primary.
const STORAGE_NODES: [&str; 9] = ["s1", "s2", "s3", "s1r1", "s2r1", "s3r1", "s1r2", "s2r2", "s3r2"];

/// Members of the config group `cluster up` starts (its default).
const CONFIG_MEMBERS: usize = 3;

/// A cluster run.
#[derive(Clone)]
pub struct ClusterChaos {
    /// Starts `cluster up` with three primaries, two replicas each and the default three
    /// config members (the run adds `--node-config-group` for each storage node).
    pub launcher: ClusterLauncher,
    /// Its dir (must exist).
    pub dir: PathBuf,
    /// Mean time between faults (exponential; each fault settles before the next).
    pub mean_fault_interval: Duration,
    /// The launcher starts the storage nodes with `--ack replica` (true) or `--ack
    /// primary`. Under `--ack primary` a primary stopped or killed may take acknowledged
    /// writes with it, as that mode allows, so the nemesis only moves slots and cuts
    /// links: the lease alone must then keep every acknowledged write.
    pub ack_replica: bool,
    /// The faults the nemesis draws from (empty: every one the ack mode allows).
    pub faults: Vec<Fault>,
}

/// `cluster up`, stopped with SIGTERM when dropped.
pub(crate) struct Up {
    child: Child,
    json: PathBuf,
}

impl Drop for Up {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + SETTLE;
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Up {
    fn json(&self) -> Result<serde_json::Value, ChaosError> {
        let text = std::fs::read_to_string(&self.json).map_err(|e| ChaosError::Start(format!("cluster.json: {e}")))?;
        serde_json::from_str(&text).map_err(|e| ChaosError::Start(format!("cluster.json: {e}")))
    }

    /// Storage node `id`'s entry in the newest JSON.
    fn node(&self, id: &str) -> Result<serde_json::Value, ChaosError> {
        let json = self.json()?;
        json["storage_nodes"]
            .as_array()
            .and_then(|nodes| nodes.iter().find(|node| node["id"] == id))
            .cloned()
            .ok_or_else(|| ChaosError::Start(format!("no storage node {id} in cluster.json")))
    }

    /// The pid of storage node `id`, by the newest JSON.
    pub(crate) fn pid_of(&self, id: &str) -> Result<u32, ChaosError> {
        self.node(id)?["pid"]
            .as_u64()
            .map(|pid| pid as u32)
            .ok_or_else(|| ChaosError::Start(format!("no pid for {id} in cluster.json")))
    }

    /// Where storage node `id` keeps its data.
    pub(crate) fn data_dir_of(&self, id: &str) -> Result<PathBuf, ChaosError> {
        self.node(id)?["data_dir"]
            .as_str()
            .map(PathBuf::from)
            .ok_or_else(|| ChaosError::Start(format!("no data dir for {id} in cluster.json")))
    }

    fn alive(&mut self) -> Result<(), ChaosError> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(ChaosError::NodeDied(format!("cluster up exited: {status}"))),
            Err(e) => Err(ChaosError::Start(e.to_string())),
        }
    }
}

/// Runs one chaos run against a cluster of processes and checks its history.
pub fn run_cluster(config: &ChaosConfig, cluster: &ClusterChaos) -> Result<ChaosReport, ChaosError> {
    config.validate()?;
    let start = |e: &dyn std::fmt::Display| ChaosError::Start(e.to_string());
    let json = cluster.dir.join("cluster.json");
    let stderr = std::fs::File::create(cluster.dir.join("cluster-stderr.txt")).map_err(|e| start(&e))?;
    let runtime = client_runtime()?;
    let links: Vec<(&str, GroupLink)> = runtime
        .block_on(async {
            let mut links = Vec::new();
            for id in STORAGE_NODES {
                links.push((id, GroupLink::start(CONFIG_MEMBERS).await?));
            }
            Ok::<_, std::io::Error>(links)
        })
        .map_err(|e| start(&e))?;
    // In front of each storage node: a proxy for its clients, one for its replicas.
    let proxies = || {
        runtime.block_on(async {
            let mut proxies = Vec::new();
            for id in STORAGE_NODES {
                proxies.push((id, Link::start().await?));
            }
            Ok::<_, std::io::Error>(proxies)
        })
    };
    let client_proxies = proxies().map_err(|e| start(&e))?;
    let replication_proxies = proxies().map_err(|e| start(&e))?;
    let mut command = (cluster.launcher)(&cluster.dir, &json);
    for (id, link) in &links {
        let addrs: Vec<String> = link.addrs().iter().map(ToString::to_string).collect();
        command
            .arg("--node-config-group")
            .arg(format!("{id}={}", addrs.join(",")));
    }
    for (id, proxy) in &replication_proxies {
        command
            .arg("--node-replication-via")
            .arg(format!("{id}={}", proxy.addr()));
    }
    // The replication listeners `cluster up` binds, as it writes them (a replica copies
    // its primary through the proxy before `cluster up` goes on).
    let upstreams_learned = runtime.spawn(learn_replication_upstreams(
        cluster.dir.join("replication-listeners"),
        replication_proxies
            .iter()
            .map(|(id, proxy)| (id.to_string(), proxy.upstream_setter()))
            .collect(),
    ));
    let child = command
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .map_err(|e| start(&e))?;
    let mut up = Up { child, json };
    let deadline = Instant::now() + SETTLE;
    // The members' addresses, written as soon as they are bound: the links' upstreams.
    let members_file = cluster.dir.join("config-group");
    let members: Vec<String> = loop {
        up.alive()?;
        if let Ok(text) = std::fs::read_to_string(&members_file) {
            break text.trim().split(',').map(str::to_string).collect();
        }
        if Instant::now() > deadline {
            return Err(ChaosError::Start(
                "cluster up wrote no config-group file within 60 s".into(),
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let upstreams: Vec<std::net::SocketAddr> = members
        .iter()
        .map(|member| member.parse())
        .collect::<Result<_, _>>()
        .map_err(|e| start(&e))?;
    for (_, link) in &links {
        link.set_upstreams(upstreams.clone());
    }
    while !up.json.exists() {
        up.alive()?;
        if Instant::now() > deadline {
            return Err(ChaosError::Start("no cluster.json within 60 s".into()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let group = ConfigClient::new(members);
    runtime.block_on(until(&group, |config| {
        config.is_bootstrapped() && config.shards.values().all(|shard| shard.leased)
    }))?;
    upstreams_learned.abort();
    let routes = runtime
        .block_on(async { follow_routes(group.follow(), SETTLE).await })
        .map_err(|e| start(&e))?;
    // Every storage node, replicas too (a map names only the primaries).
    let nodes = runtime.block_on(group.current()).map_err(|e| start(&e))?.nodes;
    for (id, proxy) in &client_proxies {
        let node = nodes
            .get(*id)
            .ok_or_else(|| ChaosError::Start(format!("no storage node {id} in the configuration")))?;
        proxy.set_upstream(node.addr.parse().map_err(|e| start(&e))?);
    }
    let via: HashMap<String, String> = client_proxies
        .iter()
        .map(|(id, proxy)| (id.to_string(), proxy.addr().to_string()))
        .collect();
    // Half the clients follow the group through a link of their own, cut with the
    // primary's: they keep routing to it while cut off, which is when only its lease
    // keeps it from answering them with what the promoted replica has overwritten.
    let client_link = runtime
        .block_on(GroupLink::start(CONFIG_MEMBERS))
        .map_err(|e| start(&e))?;
    client_link.set_upstreams(upstreams.clone());
    let behind_link: Vec<String> = client_link.addrs().iter().map(ToString::to_string).collect();
    let routes_behind_link = runtime
        .block_on(async { follow_routes(ConfigClient::new(behind_link).follow(), SETTLE).await })
        .map_err(|e| start(&e))?;
    // Every client reaches the storage nodes through their proxies.
    let client_routes = {
        let _guard = runtime.enter();
        [through(routes.clone(), via.clone()), through(routes_behind_link, via)]
    };
    let registry = registry()?;
    let mut client_config = ClientConfig::new(
        routes.borrow().nodes()[0].addr.clone(),
        ferry_proto::TenantId(TENANT),
        TOKEN,
    );
    client_config.registry = registry;
    client_config.trace = true;
    client_config.request_timeout = REQUEST_TIMEOUT;
    let shared = Shared::new(config.duration);

    let (records, faults) = {
        let (handle, nemesis_group, nemesis_shared) = (runtime.handle().clone(), group.clone(), Arc::clone(&shared));
        let (interval, seed) = (cluster.mean_fault_interval, config.seed);
        let faults: Vec<Fault> = match (cluster.faults.is_empty(), cluster.ack_replica) {
            (false, _) => cluster.faults.clone(),
            (true, true) => ALL.to_vec(),
            (true, false) => UNDER_ACK_PRIMARY.to_vec(),
        };
        if let Some(fault) = faults
            .iter()
            .find(|fault| !cluster.ack_replica && fault.needs_ack_replica())
        {
            return Err(ChaosError::Invalid(format!(
                "the {} fault may lose writes --ack primary acknowledged: it needs --ack replica",
                fault.name()
            )));
        }
        let cluster = Cluster {
            up: &up,
            links: &links,
            client_link: &client_link,
            client_proxies: &client_proxies,
            replication_proxies: &replication_proxies,
            faults: &faults,
            stops_allowed: cluster.ack_replica,
        };
        std::thread::scope(|scope| {
            let faults = scope.spawn(|| nemesis(&handle, &nemesis_group, &cluster, &nemesis_shared, interval, seed));
            let records = runtime.block_on(drive(config, &client_routes, &client_config, &shared));
            (records, faults.join())
        })
    };
    let faults = faults.map_err(|_| ChaosError::Client("the nemesis panicked".into()))??;
    let mut records = records?;
    up.alive()?;
    records.push(runtime.block_on(final_read(config, &routes, &client_config, &shared))?);
    let mut report = judge(&records, 0, 0, faults.crashes)?;
    report.moves = faults.moves;
    report.failovers = faults.failovers;
    report.partitions = faults.partitions;
    report.client_partitions = faults.client_partitions;
    report.one_way_partitions = faults.one_way_partitions;
    report.replication_partitions = faults.replication_partitions;
    report.disks_lost = faults.disks_lost;
    Ok(report)
}

/// Sets each proxy's upstream from `path`'s `ID=HOST:PORT` lines as they appear (until
/// aborted).
async fn learn_replication_upstreams(path: PathBuf, proxies: Vec<(String, crate::link::UpstreamSetter)>) {
    loop {
        // A small file, read in a blink: no need for an async read.
        if let Ok(text) = std::fs::read_to_string(&path) {
            // Only whole lines: the last one may be half written.
            for line in text.split_inclusive('\n').filter(|line| line.ends_with('\n')) {
                let Some((id, addr)) = line.trim().split_once('=') else {
                    continue;
                };
                let (Some((_, set)), Ok(addr)) = (proxies.iter().find(|(node, _)| node == id), addr.parse()) else {
                    continue;
                };
                set.set(addr);
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `routes` with each node's address replaced by its proxy's in `via` (a task, on the
/// current runtime, follows the changes).
fn through(
    mut routes: watch::Receiver<Arc<ClusterMap>>,
    via: HashMap<String, String>,
) -> watch::Receiver<Arc<ClusterMap>> {
    let rewrite = move |map: &ClusterMap| -> Arc<ClusterMap> {
        let nodes = map
            .nodes()
            .iter()
            .map(|node| NodeEntry {
                addr: via.get(&node.id).cloned().unwrap_or_else(|| node.addr.clone()),
                ..node.clone()
            })
            .collect();
        // The same nodes and slots with other addresses: valid if the map was.
        Arc::new(
            ClusterMap::new(nodes)
                .map(|rewritten| rewritten.with_epoch(map.epoch()))
                .unwrap_or_else(|_| map.clone()),
        )
    };
    let first = rewrite(&routes.borrow_and_update());
    let (sender, receiver) = watch::channel(first);
    tokio::spawn(async move {
        while routes.changed().await.is_ok() {
            let next = rewrite(&routes.borrow_and_update());
            if sender.send(next).is_err() {
                return;
            }
        }
    });
    receiver
}

/// Waits until the configuration satisfies `done`.
pub(crate) async fn until(
    group: &ConfigClient,
    done: impl Fn(&ClusterConfig) -> bool,
) -> Result<ClusterConfig, ChaosError> {
    let deadline = Instant::now() + SETTLE;
    let mut known = 0;
    loop {
        if let Ok(config) = group.watch(known, Duration::from_millis(500)).await {
            known = config.epoch;
            if done(&config) {
                return Ok(config);
            }
        }
        if Instant::now() > deadline {
            return Err(ChaosError::Start(
                "the cluster's configuration did not settle within 60 s".into(),
            ));
        }
    }
}

/// The clients' invocations until the deadline; client `i` routes by `routes[i % len]`.
async fn drive(
    config: &ChaosConfig,
    routes: &[watch::Receiver<Arc<ClusterMap>>],
    client_config: &ClientConfig,
    shared: &Arc<Shared>,
) -> Result<Vec<Record>, ChaosError> {
    let mut tasks = Vec::new();
    for client in 0..config.clients as u64 {
        let rng = ChaCha8Rng::seed_from_u64(config.seed.wrapping_mul(1_000_003).wrapping_add(client));
        let (routes, client_config, chaos, shared) = (
            routes[client as usize % routes.len()].clone(),
            client_config.clone(),
            config.clone(),
            Arc::clone(shared),
        );
        tasks.push(tokio::spawn(async move {
            let mut rng = rng;
            let mut records = Vec::new();
            let mut cluster: Option<ClusterClient> = None;
            let mut seq = 0u64;
            while Instant::now() < shared.deadline {
                let connected = match &cluster {
                    Some(connected) => connected.clone(),
                    None => match ClusterClient::follow(routes.clone(), client_config.clone()).await {
                        Ok(connected) => {
                            cluster = Some(connected.clone());
                            connected
                        }
                        Err(_) => {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    },
                };
                let route = random_route(&mut rng);
                let tag = crate::program::next_tag(client, &mut seq);
                let program = random_program(&mut rng, tag, route, &chaos, &shared);
                let record = invoke(client, &connected, &program, route, &shared).await?;
                if !matches!(record.seen, Seen::Committed { .. }) {
                    // A node may have been restarted: connect afresh.
                    cluster = None;
                }
                records.push(record);
            }
            Ok::<_, ChaosError>(records)
        }));
    }
    let mut records = Vec::new();
    for task in tasks {
        records.extend(task.await.map_err(|e| ChaosError::Client(e.to_string()))??);
    }
    Ok(records)
}

/// The final read of every hot key, once the faults have settled (retried until it
/// commits: a node may still be catching up).
async fn final_read(
    config: &ChaosConfig,
    routes: &watch::Receiver<Arc<ClusterMap>>,
    client_config: &ClientConfig,
    shared: &Shared,
) -> Result<Record, ChaosError> {
    let program = Program {
        tag: u64::MAX,
        steps: (0..config.keys).map(Step::Read).collect(),
    };
    let deadline = Instant::now() + SETTLE;
    loop {
        let last = match ClusterClient::follow(routes.clone(), client_config.clone()).await {
            Ok(cluster) => {
                let record = invoke(u64::MAX, &cluster, &program, Route::Remote, shared).await?;
                if matches!(record.seen, Seen::Committed { .. }) {
                    return Ok(record);
                }
                format!("{:?}", record.seen)
            }
            Err(err) => err.to_string(),
        };
        if Instant::now() > deadline {
            return Err(ChaosError::Client(format!(
                "the final read did not commit within 60 s (last: {last})"
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
