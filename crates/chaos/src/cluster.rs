//! The soak against a cluster (`ferry check --cluster`): `ferry cluster up` with three
//! primaries, a replica each and `--ack replica`, the chaos program registered on the
//! storage nodes, and clients that follow the config group. Every hot key carries one
//! hashtag, so each program runs on the one node serving that slot, and a nemesis works
//! on exactly that: it moves the slot to another primary (`BeginMove`, then the nodes'
//! copy and hand-over), stops its primary with SIGSTOP until its replica is promoted (a
//! failover), cuts its primary off the config group while its clients still reach it (a
//! partition: the primary's lease lapses, so it must stop serving before its replica is
//! promoted), or kills a storage node with SIGKILL (`cluster up` restarts it). The whole
//! history, across moves and failovers, must be strictly serializable, and the final read
//! must see every acknowledged write. That works because a key keeps its versions when it
//! moves or its replica is promoted.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::sync::watch;

use ferry_client::config_group::{follow_routes, ConfigClient};
use ferry_client::{ClientConfig, ClusterClient};
use ferry_cluster::ClusterMap;
use ferry_config::{ClusterConfig, Command as ConfigCommand, Outcome};

use crate::partition::GroupLink;
use crate::program::{self, Program, Step};
use crate::record::{Record, Seen};
use crate::{
    client_runtime, invoke, judge, random_program, random_route, registry, ChaosConfig, ChaosError, ChaosReport, Route,
    Shared, REQUEST_TIMEOUT, TENANT, TOKEN,
};

/// Builds the `ferry cluster up` command for a data dir and the JSON file it writes.
pub type ClusterLauncher = Arc<dyn Fn(&Path, &Path) -> Command + Send + Sync>;

/// Longest wait for the cluster to start, a fault to settle, or the final read.
const SETTLE: Duration = Duration::from_secs(60);

/// How long a stopped primary stays stopped, and a cut-off one cut off: past the leader's
/// fence (1.1 s of silence) and the promotion.
const STOPPED_FOR: Duration = Duration::from_secs(3);

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
    /// primaries off the group: the lease alone must then keep every acknowledged write.
    pub ack_replica: bool,
}

/// `cluster up`, stopped with SIGTERM when dropped.
struct Up {
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

    /// The pid of storage node `id`, by the newest JSON.
    fn pid_of(&self, id: &str) -> Result<u32, ChaosError> {
        let json = self.json()?;
        json["storage_nodes"]
            .as_array()
            .and_then(|nodes| nodes.iter().find(|node| node["id"] == id))
            .and_then(|node| node["pid"].as_u64())
            .map(|pid| pid as u32)
            .ok_or_else(|| ChaosError::Start(format!("no storage node {id} in cluster.json")))
    }

    fn alive(&mut self) -> Result<(), ChaosError> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(ChaosError::NodeDied(format!("cluster up exited: {status}"))),
            Err(e) => Err(ChaosError::Start(e.to_string())),
        }
    }
}

fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) with a pid of the cluster's JSON and a signal number.
    unsafe { libc::kill(pid as libc::pid_t, signal) };
}

/// The faults a cluster run made.
#[derive(Clone, Copy, Debug, Default)]
struct Faults {
    moves: u64,
    failovers: u64,
    partitions: u64,
    kills: u64,
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
    let mut command = (cluster.launcher)(&cluster.dir, &json);
    for (id, link) in &links {
        let addrs: Vec<String> = link.addrs().iter().map(ToString::to_string).collect();
        command
            .arg("--node-config-group")
            .arg(format!("{id}={}", addrs.join(",")));
    }
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
    let routes = runtime
        .block_on(async { follow_routes(group.follow(), SETTLE).await })
        .map_err(|e| start(&e))?;
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
    let client_routes = [routes.clone(), routes_behind_link];
    let registry = registry()?;
    let mut client_config = ClientConfig::new(routes.borrow().nodes()[0].addr.clone(), TENANT, TOKEN);
    client_config.registry = registry;
    client_config.trace = true;
    client_config.request_timeout = REQUEST_TIMEOUT;
    let shared = Shared::new(config.duration);

    let (records, faults) = {
        let (handle, nemesis_group, nemesis_shared) = (runtime.handle().clone(), group.clone(), Arc::clone(&shared));
        let (interval, seed, up, links, client_link, ack_replica) = (
            cluster.mean_fault_interval,
            config.seed,
            &up,
            &links,
            &client_link,
            cluster.ack_replica,
        );
        std::thread::scope(|scope| {
            let faults = scope.spawn(move || {
                let cluster = Cluster {
                    up,
                    links,
                    client_link,
                    ack_replica,
                };
                nemesis(&handle, &nemesis_group, &cluster, &nemesis_shared, interval, seed)
            });
            let records = runtime.block_on(drive(config, &client_routes, &client_config, &shared));
            (records, faults.join())
        })
    };
    let faults = faults.map_err(|_| ChaosError::Client("the nemesis panicked".into()))??;
    let mut records = records?;
    up.alive()?;
    records.push(runtime.block_on(final_read(config, &routes, &client_config, &shared))?);
    let mut report = judge(&records, 0, 0, faults.kills)?;
    report.moves = faults.moves;
    report.failovers = faults.failovers;
    report.partitions = faults.partitions;
    Ok(report)
}

/// Waits until the configuration satisfies `done`.
async fn until(group: &ConfigClient, done: impl Fn(&ClusterConfig) -> bool) -> Result<ClusterConfig, ChaosError> {
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

/// The slot every hot key is in.
fn hot_slot() -> u16 {
    ferry_cluster::key_slot(&program::key(0))
}

/// What the nemesis works on: the processes, each storage node's link to the group, and
/// the link half the clients follow the group through.
struct Cluster<'a> {
    up: &'a Up,
    links: &'a [(&'static str, GroupLink)],
    client_link: &'a GroupLink,
    ack_replica: bool,
}

/// Faults until the clients' deadline, each settled before the next.
fn nemesis(
    runtime: &tokio::runtime::Handle,
    group: &ConfigClient,
    cluster: &Cluster,
    shared: &Shared,
    mean_interval: Duration,
    seed: u64,
) -> Result<Faults, ChaosError> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed_f417);
    let mut faults = Faults::default();
    loop {
        let wait = -mean_interval.as_secs_f64() * (1.0 - rng.gen::<f64>()).ln();
        std::thread::sleep(Duration::from_secs_f64(wait.min(4.0 * mean_interval.as_secs_f64())));
        if Instant::now() >= shared.deadline {
            return Ok(faults);
        }
        let config = runtime
            .block_on(group.current())
            .map_err(|e| ChaosError::Start(e.to_string()))?;
        let slot = hot_slot();
        let Some(serving) = config.serving_shard(slot, slot) else {
            return Err(ChaosError::Client(format!("no shard serves slot {slot}")));
        };
        let primary = config.shards[&serving].primary.clone();
        let up = cluster.up;
        // Moves and partitions always; stops and kills only where no acknowledged write
        // may go with them.
        let fault = match cluster.ack_replica {
            true => rng.gen_range(0..4),
            false => [0, 2][rng.gen_range(0..2)],
        };
        match fault {
            0 => {
                let others: Vec<&String> = config
                    .shards
                    .iter()
                    .filter(|(id, _)| **id != serving)
                    .map(|(_, shard)| &shard.primary)
                    .collect();
                let to = others[rng.gen_range(0..others.len())].clone();
                let begin = ConfigCommand::BeginMove {
                    first: slot,
                    last: slot,
                    to,
                    expected_epoch: config.epoch,
                };
                if let Ok(Outcome::Applied { epoch }) = runtime.block_on(group.propose(begin)) {
                    runtime.block_on(until(group, |config| config.epoch > epoch && config.moving.is_none()))?;
                    faults.moves += 1;
                }
            }
            1 => {
                let pid = up.pid_of(&primary)?;
                signal(pid, libc::SIGSTOP);
                std::thread::sleep(STOPPED_FOR);
                signal(pid, libc::SIGCONT);
                faults.failovers += 1;
                // The old primary, demoted, restarts and copies its successor.
                runtime.block_on(until(group, |config| {
                    config.shards.values().all(|shard| shard.fenced_at.is_none())
                }))?;
                wait_restarted(up, &primary, pid)?;
            }
            2 => {
                let Some((_, link)) = cluster.links.iter().find(|(id, _)| *id == primary) else {
                    return Err(ChaosError::Start(format!("no link to the config group for {primary}")));
                };
                let pid = up.pid_of(&primary)?;
                link.cut();
                cluster.client_link.cut();
                std::thread::sleep(STOPPED_FOR);
                link.heal();
                cluster.client_link.heal();
                faults.partitions += 1;
                let settled = runtime.block_on(until(group, |config| {
                    config.shards.values().all(|shard| shard.fenced_at.is_none())
                }))?;
                // Demoted, the old primary restarts and copies its successor.
                if settled.shards[&serving].primary != primary {
                    wait_restarted(up, &primary, pid)?;
                }
            }
            _ => {
                let nodes: Vec<&String> = config.nodes.keys().collect();
                let victim = nodes[rng.gen_range(0..nodes.len())].clone();
                let pid = up.pid_of(&victim)?;
                signal(pid, libc::SIGKILL);
                faults.kills += 1;
                wait_restarted(up, &victim, pid)?;
            }
        }
    }
}

/// Waits until `cluster up` runs `node` again under another pid than `old`.
fn wait_restarted(up: &Up, node: &str, old: u32) -> Result<(), ChaosError> {
    let deadline = Instant::now() + SETTLE;
    loop {
        if up.pid_of(node).is_ok_and(|pid| pid != old) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(ChaosError::NodeDied(format!("{node} was not restarted within 60 s")));
        }
        std::thread::sleep(Duration::from_millis(50));
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
                seq += 1;
                let route = random_route(&mut rng);
                let program = random_program(&mut rng, (client + 1) << 32 | seq, route, &chaos, &shared);
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
        if let Ok(cluster) = ClusterClient::follow(routes.clone(), client_config.clone()).await {
            let record = invoke(u64::MAX, &cluster, &program, Route::Remote, shared).await?;
            if matches!(record.seen, Seen::Committed { .. }) {
                return Ok(record);
            }
        }
        if Instant::now() > deadline {
            return Err(ChaosError::Client("the final read did not commit within 60 s".into()));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
