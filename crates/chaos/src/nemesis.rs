//! The cluster soak's nemesis: one fault at a time on the hot keys' slot or its primary,
//! each settled before the next, at exponentially distributed moments. The faults:
//!
//! - a slot move of the hot slot to another primary;
//! - a failover: the primary stopped (SIGSTOP) until its replica is promoted;
//! - a partition from the config group: the primary's links to every member cut while its
//!   clients still reach it (its lease lapses, so it must stop serving before its replica
//!   is promoted);
//! - a partition from its clients: the proxies in front of the primary for the clients
//!   cut both ways;
//! - a one-way partition from its clients: requests reach the primary and are executed but
//!   no answer comes back, or nothing reaches it while its end looks alive;
//! - a partition from its replicas: the proxy in front of its replication listener cut
//!   both ways or one way (a replica's pulls arrive and their answers do not, or the
//!   reverse); under `--ack replica` writes then wait for a replica; half the time the
//!   isolated primary is then stopped too, so a replica that missed the cut's writes is
//!   promoted;
//! - a storage node killed with SIGKILL (`cluster up` restarts it), or killed with its
//!   data dir deleted (a lost disk: it comes back empty and rejoins as a replica).
//!
//! Stops, kills and lost disks only under `--ack replica`: under `--ack primary` they may
//! take acknowledged writes with them, as that mode allows. A run may draw from fewer
//! (`ferry check --cluster --faults`).

use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use ferry_client::config_group::ConfigClient;
use ferry_config::{ClusterConfig, ConfigChange, Outcome};

use crate::cluster::{until, Up, SETTLE};
use crate::link::{Flow, Link};
use crate::partition::GroupLink;
use crate::{program, ChaosError, ChaosReport, Shared};

/// How long a stopped primary stays stopped, and a cut-off one cut off: past the leader's
/// fence (1.1 s of silence) and the promotion.
const STOPPED_FOR: Duration = Duration::from_secs(3);

/// The kinds of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// A slot move of the hot slot.
    Move,
    /// Its primary stopped until its replica is promoted.
    Stop,
    /// Its primary cut off the config group.
    GroupPartition,
    /// Its primary cut off its clients, both ways.
    ClientPartition,
    /// Its primary's link with its clients open one way only.
    OneWayClientPartition,
    /// Its primary cut off its replicas (both ways or one way), and half the time stopped
    /// meanwhile, so a replica that missed the writes of the cut is promoted.
    ReplicaPartition,
    /// A storage node killed.
    Kill,
    /// A storage node killed with its data dir deleted.
    LoseDisk,
}

impl Fault {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Fault::Move => "move",
            Fault::Stop => "stop",
            Fault::GroupPartition => "group",
            Fault::ClientPartition => "clients",
            Fault::OneWayClientPartition => "one-way",
            Fault::ReplicaPartition => "replicas",
            Fault::Kill => "kill",
            Fault::LoseDisk => "lose-disk",
        }
    }

    /// The fault called `name`.
    pub fn parse(name: &str) -> Option<Fault> {
        ALL.into_iter().find(|fault| fault.name() == name)
    }

    /// Whether it can lose a write `--ack primary` acknowledged (as that mode allows).
    pub fn needs_ack_replica(self) -> bool {
        !UNDER_ACK_PRIMARY.contains(&self)
    }
}

/// Every fault.
pub const ALL: [Fault; 8] = [
    Fault::Move,
    Fault::Stop,
    Fault::GroupPartition,
    Fault::ClientPartition,
    Fault::OneWayClientPartition,
    Fault::ReplicaPartition,
    Fault::Kill,
    Fault::LoseDisk,
];

/// The faults that cannot lose a write `--ack primary` acknowledged.
pub const UNDER_ACK_PRIMARY: [Fault; 5] = [
    Fault::Move,
    Fault::GroupPartition,
    Fault::ClientPartition,
    Fault::OneWayClientPartition,
    Fault::ReplicaPartition,
];

/// What the nemesis works on: the processes, each storage node's link to the group, the
/// link half the clients follow the group through, and the proxies in front of each
/// storage node for its clients and for its replicas.
pub(crate) struct Cluster<'a> {
    pub(crate) up: &'a Up,
    pub(crate) links: &'a [(&'static str, GroupLink)],
    pub(crate) client_link: &'a GroupLink,
    pub(crate) client_proxies: &'a [(&'static str, Link)],
    pub(crate) replication_proxies: &'a [(&'static str, Link)],
    /// The faults drawn from (none that need `--ack replica` without it).
    pub(crate) faults: &'a [Fault],
    /// Whether a primary may be stopped (`--ack replica`: no acknowledged write goes
    /// with it).
    pub(crate) stops_allowed: bool,
}

impl Cluster<'_> {
    fn proxy<'b>(proxies: &'b [(&'static str, Link)], node: &str) -> Result<&'b Link, ChaosError> {
        proxies
            .iter()
            .find(|(id, _)| *id == node)
            .map(|(_, link)| link)
            .ok_or_else(|| ChaosError::Start(format!("no proxy in front of {node}")))
    }
}

fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) with a pid of the cluster's JSON and a signal number.
    unsafe { libc::kill(pid as libc::pid_t, signal) };
}

/// The slot every hot key is in.
fn hot_slot() -> u16 {
    ferry_cluster::key_slot(&program::key(0))
}

/// Faults until the clients' deadline, each settled before the next; returns their counts.
pub(crate) fn nemesis(
    runtime: &tokio::runtime::Handle,
    group: &ConfigClient,
    cluster: &Cluster,
    shared: &Shared,
    mean_interval: Duration,
    seed: u64,
) -> Result<ChaosReport, ChaosError> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed_f417);
    let mut faults = ChaosReport::default();
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
        let fault = cluster.faults[rng.gen_range(0..cluster.faults.len())];
        match fault {
            Fault::Move => {
                let others: Vec<&String> = config
                    .shards
                    .iter()
                    .filter(|(id, _)| **id != serving)
                    .map(|(_, shard)| &shard.primary)
                    .collect();
                let to = others[rng.gen_range(0..others.len())].clone();
                let begin = ConfigChange::BeginMove {
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
            Fault::Stop => {
                let pid = up.pid_of(&primary)?;
                signal(pid, libc::SIGSTOP);
                std::thread::sleep(STOPPED_FOR);
                signal(pid, libc::SIGCONT);
                faults.failovers += 1;
                // The old primary, demoted, restarts and copies its successor.
                runtime.block_on(until(group, unfenced))?;
                wait_restarted(up, &primary, pid)?;
            }
            Fault::GroupPartition => {
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
                let settled = runtime.block_on(until(group, unfenced))?;
                // Demoted, the old primary restarts and copies its successor.
                if settled.shards[&serving].primary != primary {
                    wait_restarted(up, &primary, pid)?;
                }
            }
            Fault::ClientPartition | Fault::OneWayClientPartition => {
                let flow = match fault {
                    Fault::ClientPartition => Flow::Cut,
                    _ => [Flow::OnlyToUpstream, Flow::OnlyFromUpstream][rng.gen_range(0..2)],
                };
                let proxy = Cluster::proxy(cluster.client_proxies, &primary)?;
                proxy.set(flow);
                std::thread::sleep(STOPPED_FOR);
                proxy.set(Flow::Open);
                match fault {
                    Fault::ClientPartition => faults.client_partitions += 1,
                    _ => faults.one_way_partitions += 1,
                }
            }
            Fault::ReplicaPartition => {
                let flow = [Flow::Cut, Flow::OnlyToUpstream, Flow::OnlyFromUpstream][rng.gen_range(0..3)];
                let proxy = Cluster::proxy(cluster.replication_proxies, &primary)?;
                let pid = up.pid_of(&primary)?;
                proxy.set(flow);
                // Half the time (under --ack replica) the isolated primary then
                // stops, and a replica that missed the writes of the cut is promoted: none
                // of them may have been acknowledged.
                let stop = cluster.stops_allowed && rng.gen_bool(0.5);
                std::thread::sleep(STOPPED_FOR / 3);
                if stop {
                    signal(pid, libc::SIGSTOP);
                    std::thread::sleep(STOPPED_FOR);
                    signal(pid, libc::SIGCONT);
                    faults.failovers += 1;
                } else {
                    std::thread::sleep(STOPPED_FOR);
                }
                proxy.set(Flow::Open);
                faults.replication_partitions += 1;
                let settled = runtime.block_on(until(group, unfenced))?;
                if settled.shards[&serving].primary != primary {
                    wait_restarted(up, &primary, pid)?;
                }
                // The replicas catch up before the next fault.
                runtime.block_on(until_ready(group, &settled))?;
            }
            Fault::Kill | Fault::LoseDisk => {
                // Any node is killed; a disk is lost under the hot slot's shard (its
                // primary half the time), where the history sees what it held.
                let nodes: Vec<&String> = match fault {
                    Fault::Kill => config.nodes.keys().collect(),
                    _ if rng.gen_bool(0.5) => vec![&config.shards[&serving].primary],
                    _ => config.shards[&serving].replicas.iter().collect(),
                };
                let victim = nodes[rng.gen_range(0..nodes.len())].clone();
                let pid = up.pid_of(&victim)?;
                if fault == Fault::LoseDisk {
                    let dir = up.data_dir_of(&victim)?;
                    std::fs::remove_dir_all(&dir)
                        .map_err(|e| ChaosError::Start(format!("cannot delete {}: {e}", dir.display())))?;
                    faults.disks_lost += 1;
                } else {
                    faults.crashes += 1;
                }
                signal(pid, libc::SIGKILL);
                wait_restarted(up, &victim, pid)?;
                if fault == Fault::LoseDisk {
                    // An emptied primary is fenced, and restarts again as a replica that
                    // copies its successor: the shard is whole again before the next fault.
                    runtime.block_on(until(group, unfenced))?;
                    runtime.block_on(until_ready(group, &config))?;
                }
            }
        }
    }
}

/// Whether no shard is choosing a new primary.
fn unfenced(config: &ClusterConfig) -> bool {
    config.shards.values().all(|shard| shard.fenced_at.is_none())
}

/// Waits until the config group's leader has heard every storage node of `config` say it
/// is ready (a replica caught up with its primary).
async fn until_ready(group: &ConfigClient, config: &ClusterConfig) -> Result<(), ChaosError> {
    let deadline = Instant::now() + SETTLE;
    let mut not_ready = String::from("no leader");
    loop {
        for member in group.members() {
            let Ok(status) = group.status(member).await else {
                continue;
            };
            if status.leader != Some(status.id) {
                continue;
            }
            let waiting: Vec<String> = config
                .nodes
                .keys()
                .filter_map(|node| match status.nodes.get(node) {
                    Some(health) if health.ready && health.down().is_none() => None,
                    Some(health) => Some(format!("{node} ({health:?})")),
                    None => Some(format!("{node} (not heard)")),
                })
                .collect();
            if waiting.is_empty() {
                return Ok(());
            }
            not_ready = waiting.join(", ");
        }
        if Instant::now() > deadline {
            return Err(ChaosError::NodeDied(format!(
                "the storage nodes were not all ready within 60 s: {not_ready}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
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
