//! A storage node of a cluster whose configuration the config group holds, with
//! replication: it reports to the group's leader every [`HEARTBEAT_MS`] (its applied epoch
//! and where its log ends), serves as a primary only while it holds a lease the leader
//! granted, and acts on the roles each new configuration gives it:
//!
//! - a replica whose shard is fenced stops copying (its log end is then final, and its
//!   next report tells the leader so), unless the fence is a hand-over to it: then it
//!   copies on, to take over all its primary holds;
//! - a primary whose shard is fenced (handed over, or fenced while it was cut off) stops
//!   serving at once instead of when its lease runs out;
//! - a replica promoted to primary stops copying and starts taking writes, in place;
//! - a primary demoted to replica, or a replica whose primary changed, stops the node: it
//!   may hold records the new primary never had, so on its next start it copies the new
//!   primary whole (crash-only: one path for every way of falling out of line);
//! - a node whose heartbeat is answered with a restart request (`ferry cluster restart`)
//!   stops the same way, so whoever runs it starts it again.
//!
//! What the node followed last is kept in its data dir ([`ROLE_FILE`]: the appointment
//! epoch of the primary it served as or copied from), so a restart knows whether its log
//! still continues the shard's.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use ferry_client::config_group::ConfigClient;
use ferry_config::lease::{Heartbeat, HEARTBEAT_MS};
use ferry_config::{ClusterConfig, Epoch};
use ferry_wal::Wal;

/// The file that records the appointment epoch of the primary the node's log follows.
pub const ROLE_FILE: &str = "ROLE";

/// Longest a heartbeat waits for the leader's answer.
const HEARTBEAT_DEADLINE: Duration = Duration::from_millis(500);

/// How long the node may serve as a primary: until a deadline its own monotonic clock
/// sets from when it sent the heartbeat a grant answered.
#[derive(Debug)]
pub struct Lease {
    origin: Instant,
    /// Nanoseconds since `origin` until which it may serve (0: never granted).
    until_ns: AtomicU64,
    /// Whether the node needs the lease to serve: only a primary whose shard has replicas
    /// (nothing can be promoted over any other). Until the first configuration is acted
    /// on, it does.
    required: AtomicBool,
}

impl Default for Lease {
    fn default() -> Lease {
        Lease {
            origin: Instant::now(),
            until_ns: AtomicU64::new(0),
            required: AtomicBool::new(true),
        }
    }
}

impl Lease {
    /// Whether the node must refuse its keys now: it needs a lease and holds none.
    pub fn lapsed(&self) -> bool {
        self.required.load(Ordering::Acquire) && !self.valid()
    }

    /// Whether the node needs a lease to serve.
    pub(crate) fn set_required(&self, required: bool) {
        self.required.store(required, Ordering::Release);
    }

    /// Whether the node may serve now.
    pub fn valid(&self) -> bool {
        (self.origin.elapsed().as_nanos() as u64) < self.until_ns.load(Ordering::Acquire)
    }

    /// A grant of `serve_ms` for the heartbeat sent at `sent`.
    fn extend(&self, sent: Instant, serve_ms: u64) {
        let until = sent.saturating_duration_since(self.origin) + Duration::from_millis(serve_ms);
        self.until_ns.fetch_max(until.as_nanos() as u64, Ordering::AcqRel);
    }

    /// Ends the lease at once (a fenced or demoted primary).
    fn revoke(&self) {
        self.until_ns.store(0, Ordering::Release);
    }
}

/// What the node is in a configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Place {
    /// The primary of its shard, appointed at this epoch.
    Primary {
        /// The appointment epoch.
        primary_epoch: Epoch,
        /// The shard is fenced (a new primary is being chosen): serve nothing.
        fenced: bool,
    },
    /// A replica of its shard's primary.
    Replica {
        /// The primary's appointment epoch.
        primary_epoch: Epoch,
        /// Where the primary serves replication (none: it serves none).
        primary_addr: Option<String>,
        /// The shard is fenced: copy nothing.
        fenced: bool,
    },
    /// Not a member of any shard.
    Absent,
}

/// Where `node` stands in `config`.
pub fn place_of(config: &ClusterConfig, node: &str) -> Place {
    match config.shard_of(node) {
        None => Place::Absent,
        Some((_, shard)) if shard.primary == node => Place::Primary {
            primary_epoch: shard.primary_epoch,
            fenced: shard.fenced_at.is_some(),
        },
        Some((_, shard)) => Place::Replica {
            primary_epoch: shard.primary_epoch,
            primary_addr: config.nodes.get(&shard.primary).and_then(|n| n.replication.clone()),
            // The replica a hand-over names copies on.
            fenced: shard.fenced_at.is_some() && shard.hand_over_to.as_deref() != Some(node),
        },
    }
}

/// The appointment epoch the data dir's log last followed, if recorded.
pub fn followed_epoch(data_dir: &Path) -> Option<Epoch> {
    std::fs::read_to_string(data_dir.join(ROLE_FILE))
        .ok()
        .and_then(|text| text.trim().parse().ok())
}

/// Records that the data dir's log follows the primary appointed at `primary_epoch`
/// (written whole and synced, then renamed into place).
pub fn record_followed(data_dir: &Path, primary_epoch: Epoch) -> std::io::Result<()> {
    let partial = data_dir.join(format!("{ROLE_FILE}.tmp"));
    let file = std::fs::File::create(&partial)?;
    std::io::Write::write_all(&mut &file, format!("{primary_epoch}\n").as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&partial, data_dir.join(ROLE_FILE))?;
    std::fs::File::open(data_dir)?.sync_all()
}

/// Before the node starts: whether its data dir must be copied from the primary because
/// its log followed another appointment than the one `place` names (a demoted primary, or
/// a replica whose primary changed while it was down). A node that followed nothing yet
/// has nothing to lose.
pub fn must_copy(place: &Place, followed: Option<Epoch>) -> bool {
    match (place, followed) {
        (Place::Replica { primary_epoch, .. }, Some(followed)) => *primary_epoch != followed,
        _ => false,
    }
}

/// What the membership task works with.
pub(crate) struct Member {
    pub(crate) node_id: String,
    pub(crate) client: ConfigClient,
    pub(crate) configs: watch::Receiver<Arc<ClusterConfig>>,
    pub(crate) lease: Arc<Lease>,
    pub(crate) wal: Arc<Wal>,
    /// Stops the follower and waits for it (none: not following).
    pub(crate) follower: Option<crate::replica::FollowerHandle>,
    /// Set on promotion: replies then wait for a replica (`--ack replica`).
    pub(crate) ack_replica: bool,
    pub(crate) fatal: Arc<watch::Sender<Option<String>>>,
    /// Moves slots in and out of this node as the configurations ask.
    pub(crate) mover: Option<Arc<crate::moves::Mover>>,
    /// The node, for the readiness each heartbeat reports (weak: the task must not keep
    /// a stopped node alive).
    pub(crate) node: std::sync::Weak<crate::node::Node>,
    /// Drawn at start: a restart shows the leader a new one.
    pub(crate) incarnation: u64,
}

/// What a heartbeat's answer asks.
enum Asked {
    /// Nothing beyond the lease.
    Nothing,
    /// Stop, to be started again.
    Restart,
}

impl Member {
    /// Heartbeats and role changes until `shutdown`.
    pub(crate) async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        let mut acted: Epoch = 0;
        let mut ticker = tokio::time::interval(Duration::from_millis(HEARTBEAT_MS));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let config = self.configs.borrow_and_update().clone();
            if config.epoch > acted {
                match self.act(&config).await {
                    Ok(()) => {
                        if let Some(mover) = &self.mover {
                            mover.on_config(&config, acted == 0);
                        }
                        acted = config.epoch;
                    }
                    Err(why) => {
                        self.lease.revoke();
                        tracing::error!("{why}");
                        let _ = self.fatal.send(Some(why));
                        return;
                    }
                }
            }
            tokio::select! {
                _ = ticker.tick() => {
                    if let Asked::Restart = self.heartbeat(acted).await {
                        self.lease.revoke();
                        let why = "asked by the config group to restart (ferry cluster restart): stopping";
                        tracing::warn!("{why}");
                        let _ = self.fatal.send(Some(why.to_string()));
                        return;
                    }
                }
                changed = self.configs.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
                _ = async { shutdown.wait_for(|stop| *stop).await.is_ok() } => return,
            }
        }
    }

    /// One report to the leader, and the lease its grant gives.
    async fn heartbeat(&self, acted: Epoch) -> Asked {
        let sent = Instant::now();
        let ready = self
            .node
            .upgrade()
            .is_some_and(|node| matches!(crate::metrics::readiness(&node), ferry_net::metrics::Readiness::Ready));
        let heartbeat = Heartbeat {
            node: self.node_id.clone(),
            epoch: acted,
            log_end: self.wal.appended_lsn(),
            incarnation: self.incarnation,
            ready,
        };
        match self.client.heartbeat(heartbeat, HEARTBEAT_DEADLINE).await {
            Ok(grant) if grant.restart => return Asked::Restart,
            Ok(grant) => {
                if let Some(serve_ms) = grant.serve_ms {
                    self.lease.extend(sent, serve_ms);
                }
            }
            Err(err) => tracing::debug!("heartbeat: {err}"),
        }
        Asked::Nothing
    }

    /// Does what `config` asks of this node; an error stops the node.
    async fn act(&mut self, config: &ClusterConfig) -> Result<(), String> {
        let data_dir = self.wal.data_dir().path().to_path_buf();
        // Only a primary whose shard has replicas can be failed over, so only it serves
        // under a lease (the leader fences a shard only once its primary has acted on
        // having replicas: `ConfigChange::Leased`).
        self.lease.set_required(
            config
                .shard_led_by(&self.node_id)
                .is_none_or(|(_, shard)| !shard.replicas.is_empty()),
        );
        match place_of(config, &self.node_id) {
            Place::Absent => Ok(()),
            Place::Primary { primary_epoch, fenced } => {
                if fenced {
                    // A new primary is being chosen: what this one would still accept
                    // could be lost, and refusing it now shortens a hand-over to the
                    // replica's catching up.
                    self.lease.revoke();
                }
                if let Some(follower) = self.follower.take() {
                    // Promoted: nothing more comes from the old primary; take writes.
                    follower.stop().await;
                    record_followed(&data_dir, primary_epoch)
                        .map_err(|err| format!("cannot record the promotion in {}: {err}", data_dir.display()))?;
                    self.wal.set_read_only(None);
                    if self.ack_replica {
                        self.wal.gate().require_replica(true);
                    }
                    tracing::info!(
                        epoch = config.epoch,
                        log_end = self.wal.appended_lsn(),
                        "promoted to primary"
                    );
                    return Ok(());
                }
                match followed_epoch(&data_dir) {
                    Some(followed) if followed == primary_epoch => Ok(()),
                    _ => record_followed(&data_dir, primary_epoch)
                        .map_err(|err| format!("cannot record the role in {}: {err}", data_dir.display())),
                }
            }
            Place::Replica {
                primary_epoch, fenced, ..
            } => {
                let Some(follower) = &self.follower else {
                    // Was this shard's primary: its log may hold writes the new primary
                    // never had.
                    self.lease.revoke();
                    let _ = ferry_replication::request_copy(&data_dir);
                    return Err(format!(
                        "demoted to replica at epoch {}: stopping; the next start copies the new primary",
                        config.epoch
                    ));
                };
                if primary_epoch != follower.primary_epoch {
                    let _ = ferry_replication::request_copy(&data_dir);
                    return Err(format!(
                        "the shard has a new primary (epoch {primary_epoch}): stopping; the next start copies it"
                    ));
                }
                if fenced {
                    // The leader is choosing a new primary: stop copying, so the log end
                    // reported from now on is final.
                    if let Some(follower) = self.follower.as_mut() {
                        follower.pause().await;
                    }
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_config::{Shard, StorageNode};

    fn config() -> ClusterConfig {
        let node = |replication: &str| StorageNode {
            addr: "127.0.0.1:1".into(),
            resp: None,
            replication: Some(replication.into()),
        };
        let mut config = ClusterConfig {
            epoch: 5,
            ..ClusterConfig::default()
        };
        config.nodes.insert("s1".into(), node("127.0.0.1:9001"));
        config.nodes.insert("r1".into(), node("127.0.0.1:9002"));
        config.shards.insert(
            1,
            Shard {
                primary: "s1".into(),
                replicas: vec!["r1".into()],
                slots: vec![(0, ferry_cluster::SLOTS - 1)],
                primary_epoch: 3,
                fenced_at: None,
                hand_over_to: None,
                leased: true,
            },
        );
        config
    }

    #[test]
    fn each_node_finds_its_place() {
        let config = config();
        assert_eq!(
            place_of(&config, "s1"),
            Place::Primary {
                primary_epoch: 3,
                fenced: false
            }
        );
        assert_eq!(
            place_of(&config, "r1"),
            Place::Replica {
                primary_epoch: 3,
                primary_addr: Some("127.0.0.1:9001".into()),
                fenced: false
            }
        );
        assert_eq!(place_of(&config, "x"), Place::Absent);
    }

    #[test]
    fn a_log_that_followed_another_appointment_is_copied_again() {
        let replica = place_of(&config(), "r1");
        assert!(
            !must_copy(&replica, None),
            "a new replica copies only if its dir is empty"
        );
        assert!(!must_copy(&replica, Some(3)));
        assert!(
            must_copy(&replica, Some(1)),
            "a demoted primary or a replica of an old primary"
        );
        assert!(!must_copy(&place_of(&config(), "s1"), Some(1)));
    }

    #[test]
    fn the_followed_epoch_survives_a_restart() {
        let scratch = tempfile::Builder::new().prefix("ferry-role-").tempdir().unwrap();
        let dir = scratch.path();
        assert_eq!(followed_epoch(dir), None);
        record_followed(dir, 7).unwrap();
        assert_eq!(followed_epoch(dir), Some(7));
        record_followed(dir, 9).unwrap();
        assert_eq!(followed_epoch(dir), Some(9));
    }

    #[test]
    fn a_lease_runs_from_the_heartbeat_it_answers() {
        let lease = Lease::default();
        assert!(!lease.valid(), "no grant, no lease");
        lease.extend(Instant::now(), 60_000);
        assert!(lease.valid());
        lease.revoke();
        assert!(!lease.valid());
        // A grant for a heartbeat sent long ago has already lapsed.
        let long_ago = Instant::now() - Duration::from_millis(50);
        let lease = Lease {
            origin: long_ago,
            until_ns: AtomicU64::new(0),
            required: AtomicBool::new(true),
        };
        lease.extend(long_ago, 10);
        assert!(!lease.valid());
    }
}
