//! Leases and failover, decided by the config group's leader. Every storage node sends a
//! [`Heartbeat`] every [`HEARTBEAT_MS`]; a primary that gets a [`Grant`] may serve until
//! its own clock, started when it *sent* the heartbeat, has run [`LEASE_MS`] less the
//! drift margin. The [`Lessor`] fences a shard whose primary has not been heard from for a
//! lease plus the margin (so any lease it holds has lapsed), collects how far each member's
//! log goes once it has stopped copying, and promotes the member with the longest log.
//!
//! A primary whose log ends before a live replica's has lost records the replica holds
//! (its disk was replaced, or an OS crash took an unsynced tail): it is not granted a
//! lease, and once every lease it held has lapsed it is fenced like a silent one, so the
//! longest log takes over instead of the replicas copying the loss. A replica's log never
//! passes its primary's otherwise: it copies it.
//!
//! Time is milliseconds of the caller's monotonic clock, passed in: no clock is read here.
//! Clocks need not agree between machines, only run at rates within the margin.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::command::ConfigChange;
use crate::state::{ClusterConfig, Epoch, Shard, ShardId};

/// How often a storage node reports to the config leader.
pub const HEARTBEAT_MS: u64 = 200;

/// How long a grant lets a primary serve, from when it sent the heartbeat.
pub const LEASE_MS: u64 = 1_000;

/// Clock-rate drift allowed between a node and the leader, in percent of a lease: the
/// node serves for a lease less this, the leader waits a lease plus this.
pub const DRIFT_PERCENT: u64 = 10;

/// How long after its last heartbeat a primary is taken for dead (every lease it can
/// hold has lapsed by then).
pub const EXPIRY_MS: u64 = LEASE_MS + LEASE_MS * DRIFT_PERCENT / 100;

/// How long a new leader waits to hear every replica of a shard before it grants the
/// shard's primary a lease without knowing how far their logs go (a replica heard of
/// nothing by then is taken for gone). The predecessor's grant covers the wait.
pub const REPLICAS_HEARD_WITHIN_MS: u64 = 2 * HEARTBEAT_MS;

/// Most restart requests a leader holds at once (one per node is all a rolling restart
/// asks).
pub const MAX_RESTART_REQUESTS: usize = 1024;

/// How long a node may serve on a grant, counted from when it sent the heartbeat.
pub const SERVE_MS: u64 = LEASE_MS - LEASE_MS * DRIFT_PERCENT / 100;

// A node stops serving before the lease ends, and the leader waits past its end.
const _: () = assert!(SERVE_MS < LEASE_MS && LEASE_MS < EXPIRY_MS && HEARTBEAT_MS < SERVE_MS);
// A new leader's wait for the replicas ends while a predecessor's grant still runs, and
// well before it may fence.
const _: () = assert!(REPLICAS_HEARD_WITHIN_MS + HEARTBEAT_MS < SERVE_MS);

/// What a storage node reports.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heartbeat {
    /// Its id.
    pub node: String,
    /// The newest configuration epoch it has applied.
    pub epoch: Epoch,
    /// Where its log ends (for a replica: how far it has copied and logged).
    pub log_end: u64,
    /// A number its process drew at start: a restart shows as a new one.
    #[serde(default)]
    pub incarnation: u64,
    /// Whether it is ready for traffic, as its `/readyz` says (a primary holding its lease,
    /// a replica linked to its primary and caught up).
    #[serde(default)]
    pub ready: bool,
}

/// The leader's answer to a heartbeat.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// The epoch the leader's configuration is at (a node behind it should fetch it).
    pub epoch: Epoch,
    /// For a primary that may serve: how long, from when it sent the heartbeat. `None`
    /// for a replica, a fenced primary, or a node the configuration does not know.
    pub serve_ms: Option<u64>,
    /// The process that sent the heartbeat is asked to stop, so whoever runs it starts
    /// it again (a rolling restart: [`Lessor::request_restart`]).
    #[serde(default)]
    pub restart: bool,
}

/// What the leader last heard from a storage node (for `ferry cluster status`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeHealth {
    /// How long ago its last heartbeat came.
    pub heard_ms_ago: u64,
    /// The epoch it had applied then.
    pub epoch: Epoch,
    /// Where its log ended then.
    pub log_end: u64,
    /// As a primary, it was refused a lease: a replica's log is longer than its own.
    pub behind: bool,
    /// The incarnation of the process that sent it (a restart draws a new one).
    #[serde(default)]
    pub incarnation: u64,
    /// Whether it said it was ready for traffic.
    #[serde(default)]
    pub ready: bool,
}

impl NodeHealth {
    /// Why the leader takes it for down, if it does.
    pub fn down(&self) -> Option<String> {
        if self.heard_ms_ago > EXPIRY_MS {
            return Some(format!("not heard from for {:.1} s", self.heard_ms_ago as f64 / 1000.0));
        }
        self.behind
            .then(|| "refused a lease: its log ends before its replica's (it lost records)".to_string())
    }
}

#[derive(Clone, Debug)]
struct Seen {
    at_ms: u64,
    epoch: Epoch,
    log_end: u64,
    /// When it was last granted a lease (by this leader).
    granted_at_ms: Option<u64>,
    /// Its last heartbeat, as a primary, was refused because a replica's log is longer.
    behind: bool,
    incarnation: u64,
    ready: bool,
}

/// The leader's view of the nodes' heartbeats, and the failover decisions it leads to.
#[derive(Debug)]
pub struct Lessor {
    /// When this member became leader: a lease granted by a predecessor may run until a
    /// lease after that, so nothing is taken for dead before.
    leader_since_ms: u64,
    seen: HashMap<String, Seen>,
    /// Processes asked to stop: node id and incarnation, until its next heartbeat.
    restarts: HashMap<String, u64>,
    /// When this leader first saw each hand-over (shard and its fence epoch).
    hand_overs_seen: HashMap<(ShardId, Epoch), u64>,
}

impl Lessor {
    /// A lessor for a leader elected at `now_ms`.
    pub fn new(now_ms: u64) -> Lessor {
        Lessor {
            leader_since_ms: now_ms,
            seen: HashMap::new(),
            restarts: HashMap::new(),
            hand_overs_seen: HashMap::new(),
        }
    }

    /// Asks the process `incarnation` of `node` to stop (its answer to the next heartbeat
    /// says so); whoever runs it starts it again, with a new incarnation. Kept by this
    /// leader only: a request lost with a change of leader is asked again.
    pub fn request_restart(&mut self, node: &str, incarnation: u64) {
        if self.restarts.len() < MAX_RESTART_REQUESTS {
            self.restarts.insert(node.to_string(), incarnation);
        }
    }

    /// Records a heartbeat and answers it. The caller grants only while it is sure it is
    /// still the leader (a deposed leader's grants would overlap its successor's).
    pub fn on_heartbeat(&mut self, now_ms: u64, heartbeat: &Heartbeat, config: &ClusterConfig) -> Grant {
        // A node that has applied a newer configuration than this leader has may have
        // been fenced in it: nothing is granted until the leader catches up.
        let shard = config
            .shard_led_by(&heartbeat.node)
            .map(|(_, shard)| shard)
            .filter(|shard| {
                shard.fenced_at.is_none() && heartbeat.epoch >= shard.primary_epoch && heartbeat.epoch <= config.epoch
            });
        let restart = self
            .restarts
            .get(&heartbeat.node)
            .is_some_and(|&incarnation| incarnation == heartbeat.incarnation);
        if restart {
            self.restarts.remove(&heartbeat.node);
        }
        let behind = shard.is_some_and(|shard| self.behind_a_replica(now_ms, heartbeat.log_end, shard));
        let serves = shard.is_some_and(|shard| !behind && self.replicas_heard(now_ms, shard));
        let granted_before = self.seen.get(&heartbeat.node).and_then(|seen| seen.granted_at_ms);
        self.seen.insert(
            heartbeat.node.clone(),
            Seen {
                at_ms: now_ms,
                epoch: heartbeat.epoch,
                log_end: heartbeat.log_end,
                granted_at_ms: if serves { Some(now_ms) } else { granted_before },
                behind,
                incarnation: heartbeat.incarnation,
                ready: heartbeat.ready,
            },
        );
        Grant {
            epoch: config.epoch,
            // A process asked to stop serves no more.
            serve_ms: (serves && !restart).then_some(SERVE_MS),
            restart,
        }
    }

    /// What this leader last heard from each storage node.
    pub fn health(&self, now_ms: u64) -> BTreeMap<String, NodeHealth> {
        self.seen
            .iter()
            .map(|(node, seen)| {
                let health = NodeHealth {
                    heard_ms_ago: now_ms.saturating_sub(seen.at_ms),
                    epoch: seen.epoch,
                    log_end: seen.log_end,
                    behind: seen.behind,
                    incarnation: seen.incarnation,
                    ready: seen.ready,
                };
                (node.clone(), health)
            })
            .collect()
    }

    /// Whether a live replica of `shard` reported a longer log than `log_end`, its
    /// primary's: the primary lost records the replica holds.
    fn behind_a_replica(&self, now_ms: u64, log_end: u64, shard: &Shard) -> bool {
        shard.replicas.iter().any(|replica| {
            self.alive(now_ms, replica) && self.seen.get(replica).is_some_and(|seen| seen.log_end > log_end)
        })
    }

    /// Whether this leader knows how far the logs of `shard`'s replicas go, or has waited
    /// [`REPLICAS_HEARD_WITHIN_MS`] for them since it was elected.
    fn replicas_heard(&self, now_ms: u64, shard: &Shard) -> bool {
        now_ms.saturating_sub(self.leader_since_ms) > REPLICAS_HEARD_WITHIN_MS
            || shard.replicas.iter().all(|replica| self.seen.contains_key(replica))
    }

    /// Whether the primary `node` is gone: silent for a lease and the margin, or refused
    /// for a shorter log than a replica's since before every lease it held lapsed.
    fn primary_gone(&self, now_ms: u64, node: &str) -> bool {
        let Some(seen) = self.seen.get(node) else {
            return true;
        };
        let lapsed = |at_ms: u64| now_ms.saturating_sub(at_ms) > EXPIRY_MS;
        lapsed(seen.at_ms) || (seen.behind && seen.granted_at_ms.is_none_or(lapsed))
    }

    /// The next failover step the configuration needs, if any: a fence for a shard whose
    /// primary is gone, or a promotion for a fenced shard once every live member has
    /// reported its log after the fence.
    pub fn decide(&mut self, now_ms: u64, config: &ClusterConfig) -> Option<ConfigChange> {
        self.hand_overs_seen
            .retain(|(id, fenced_at), _| config.shards.get(id).is_some_and(|s| s.fenced_at == Some(*fenced_at)));
        for (id, shard) in &config.shards {
            let decision = match (shard.fenced_at, &shard.hand_over_to) {
                (None, _) if !shard.leased => self.leased_if_acted(config, *id, shard),
                (None, _) => self.fence_if_gone(now_ms, *id, shard),
                (Some(fenced_at), Some(to)) => {
                    let since = *self.hand_overs_seen.entry((*id, fenced_at)).or_insert(now_ms);
                    self.promote_handed_over(now_ms, *id, shard, fenced_at, to, since)
                }
                (Some(fenced_at), None) => self.promote_if_collected(now_ms, *id, shard, fenced_at),
            };
            if decision.is_some() {
                return decision;
            }
        }
        None
    }

    /// How far `node`'s log went in its last report, if that came once it had applied
    /// `epoch`.
    pub(crate) fn reported_since(&self, node: &str, epoch: Epoch) -> Option<u64> {
        self.seen
            .get(node)
            .filter(|seen| seen.epoch >= epoch)
            .map(|seen| seen.log_end)
    }

    pub(crate) fn alive(&self, now_ms: u64, node: &str) -> bool {
        self.seen
            .get(node)
            .is_some_and(|seen| now_ms.saturating_sub(seen.at_ms) <= EXPIRY_MS)
    }

    /// A shard with replicas whose primary has reported acting on the newest
    /// configuration (in which the shard has them) serves under leases from now on.
    /// Until then it may serve without one (it may not know it has replicas), so it is
    /// never fenced.
    fn leased_if_acted(&self, config: &ClusterConfig, id: ShardId, shard: &Shard) -> Option<ConfigChange> {
        if shard.replicas.is_empty() {
            return None;
        }
        let acted = self.seen.get(&shard.primary)?.epoch >= config.epoch;
        acted.then_some(ConfigChange::Leased {
            shard: id,
            primary_epoch: shard.primary_epoch,
        })
    }

    fn fence_if_gone(&self, now_ms: u64, id: ShardId, shard: &Shard) -> Option<ConfigChange> {
        if shard.replicas.is_empty() || now_ms.saturating_sub(self.leader_since_ms) <= EXPIRY_MS {
            return None;
        }
        if !self.primary_gone(now_ms, &shard.primary) {
            return None;
        }
        // Nothing to promote to: fencing would only stop the shard.
        if !shard.replicas.iter().any(|replica| self.alive(now_ms, replica)) {
            return None;
        }
        Some(ConfigChange::Fence {
            shard: id,
            primary_epoch: shard.primary_epoch,
        })
    }

    pub(crate) fn promote_if_collected(
        &self,
        now_ms: u64,
        id: ShardId,
        shard: &Shard,
        fenced_at: Epoch,
    ) -> Option<ConfigChange> {
        let mut best: Option<(&String, u64)> = None;
        for member in shard.members() {
            if !self.alive(now_ms, member) {
                continue;
            }
            let seen = &self.seen[member];
            // Reported before it saw the fence: it may still have been copying.
            if seen.epoch < fenced_at {
                return None;
            }
            // The longest log wins; ties go to the lowest id, so every leader picks alike.
            if best.is_none_or(|(name, end)| seen.log_end > end || (seen.log_end == end && member < name)) {
                best = Some((member, seen.log_end));
            }
        }
        let (new_primary, _) = best?;
        Some(ConfigChange::Promote {
            shard: id,
            primary_epoch: shard.primary_epoch,
            new_primary: new_primary.clone(),
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::state::StorageNode;
    use crate::Outcome;
    use ferry_cluster::ClusterMap;

    /// Two shards (s1, s2), s1 with replicas r1 and r2.
    fn config() -> ClusterConfig {
        let addrs: Vec<String> = (1..=2).map(|i| format!("127.0.0.1:770{i}")).collect();
        let mut config = ClusterConfig::default();
        config.apply(&ConfigChange::Bootstrap {
            nodes: ClusterMap::even(&addrs).unwrap().nodes().to_vec(),
        });
        for id in ["r1", "r2"] {
            let add = ConfigChange::AddReplica {
                id: id.into(),
                node: StorageNode {
                    addr: "127.0.0.1:7799".into(),
                    resp: None,
                    replication: None,
                },
                primary: "s1".into(),
                expected_epoch: config.epoch,
            };
            assert!(matches!(config.apply(&add), Outcome::Applied { .. }));
        }
        config
    }

    /// [`config`] once s1 has acted on having replicas.
    pub(crate) fn leased_config() -> ClusterConfig {
        let mut config = config();
        let leased = ConfigChange::Leased {
            shard: 1,
            primary_epoch: 1,
        };
        assert!(matches!(config.apply(&leased), Outcome::Applied { .. }));
        config
    }

    fn beat(lessor: &mut Lessor, now_ms: u64, node: &str, epoch: Epoch, log_end: u64, config: &ClusterConfig) -> Grant {
        lessor.on_heartbeat(
            now_ms,
            &Heartbeat {
                node: node.into(),
                epoch,
                log_end,
                ..Heartbeat::default()
            },
            config,
        )
    }

    #[test]
    fn only_an_unfenced_primary_at_its_epoch_is_granted_a_lease() {
        let config = config();
        let mut lessor = Lessor::new(0);
        for replica in ["r1", "r2"] {
            beat(&mut lessor, 0, replica, config.epoch, 0, &config);
        }
        assert_eq!(
            beat(&mut lessor, 0, "s1", config.epoch, 0, &config).serve_ms,
            Some(SERVE_MS)
        );
        assert_eq!(beat(&mut lessor, 0, "r1", config.epoch, 0, &config).serve_ms, None);
        assert_eq!(beat(&mut lessor, 0, "s9", config.epoch, 0, &config).serve_ms, None);
        // A node that has not applied the epoch of its own appointment is not granted.
        assert_eq!(beat(&mut lessor, 0, "s2", 0, 0, &config).serve_ms, None);
    }

    #[test]
    fn a_silent_primary_is_fenced_then_the_longest_log_takes_over() {
        let mut config = leased_config();
        let epoch = config.epoch;
        let mut lessor = Lessor::new(0);
        let mut now = 0;
        // Everyone alive: nothing to decide, however long it runs.
        while now < 3 * LEASE_MS {
            for node in ["s1", "s2", "r1", "r2"] {
                beat(&mut lessor, now, node, epoch, 100, &config);
            }
            assert_eq!(lessor.decide(now, &config), None);
            now += HEARTBEAT_MS;
        }
        // s1 falls silent; its replicas go on.
        let silent_since = now - HEARTBEAT_MS;
        let fence = loop {
            for node in ["s2", "r1", "r2"] {
                beat(&mut lessor, now, node, epoch, 100, &config);
            }
            if let Some(decision) = lessor.decide(now, &config) {
                break decision;
            }
            now += 10;
        };
        assert!(now - silent_since > EXPIRY_MS, "fenced while a lease could still run");
        assert_eq!(
            fence,
            ConfigChange::Fence {
                shard: 1,
                primary_epoch: 1
            }
        );
        assert!(matches!(config.apply(&fence), Outcome::Applied { .. }));
        let fenced = config.epoch;
        // Reports from before the fence do not count.
        assert_eq!(lessor.decide(now, &config), None);
        beat(&mut lessor, now, "r1", fenced, 180, &config);
        assert_eq!(lessor.decide(now, &config), None, "r2 has not reported since the fence");
        beat(&mut lessor, now, "r2", fenced, 250, &config);
        let promote = lessor.decide(now, &config).unwrap();
        assert_eq!(
            promote,
            ConfigChange::Promote {
                shard: 1,
                primary_epoch: 1,
                new_primary: "r2".into()
            }
        );
        assert!(matches!(config.apply(&promote), Outcome::Applied { .. }));
        assert_eq!(
            beat(&mut lessor, now, "r2", config.epoch, 250, &config).serve_ms,
            Some(SERVE_MS)
        );
        assert_eq!(beat(&mut lessor, now, "r1", config.epoch, 250, &config).serve_ms, None);
        assert_eq!(lessor.decide(now, &config), None);
    }

    #[test]
    fn a_new_leader_grants_once_it_knows_the_replicas_logs_or_has_waited_for_them() {
        let config = config();
        let mut lessor = Lessor::new(1_000);
        assert_eq!(beat(&mut lessor, 1_000, "s1", config.epoch, 50, &config).serve_ms, None);
        beat(&mut lessor, 1_010, "r1", config.epoch, 50, &config);
        assert_eq!(
            beat(&mut lessor, 1_020, "s1", config.epoch, 50, &config).serve_ms,
            None,
            "r2 not heard yet"
        );
        beat(&mut lessor, 1_030, "r2", config.epoch, 40, &config);
        assert_eq!(
            beat(&mut lessor, 1_040, "s1", config.epoch, 50, &config).serve_ms,
            Some(SERVE_MS)
        );
        // A replica that never reports does not hold the primary up for long.
        let mut lessor = Lessor::new(1_000);
        beat(&mut lessor, 1_000, "r1", config.epoch, 50, &config);
        let waited = 1_000 + REPLICAS_HEARD_WITHIN_MS + 1;
        assert_eq!(
            beat(&mut lessor, waited, "s1", config.epoch, 50, &config).serve_ms,
            Some(SERVE_MS)
        );
    }

    #[test]
    fn a_primary_that_lost_its_log_is_refused_then_fenced_and_the_replica_promoted() {
        let mut config = leased_config();
        let epoch = config.epoch;
        let mut lessor = Lessor::new(0);
        let mut now = 3 * LEASE_MS;
        // Steady: replicas copy behind the primary, which is granted every time.
        for node in ["r1", "r2"] {
            beat(&mut lessor, now, node, epoch, 900, &config);
        }
        assert_eq!(
            beat(&mut lessor, now, "s1", epoch, 1_000, &config).serve_ms,
            Some(SERVE_MS)
        );
        let last_grant = now;
        // s1 comes back on an empty disk: it goes on reporting, from 0.
        let fence = loop {
            now += HEARTBEAT_MS;
            for node in ["r1", "r2"] {
                beat(
                    &mut lessor,
                    now,
                    node,
                    epoch,
                    if node == "r1" { 900 } else { 700 },
                    &config,
                );
            }
            assert_eq!(beat(&mut lessor, now, "s1", epoch, 0, &config).serve_ms, None);
            if let Some(decision) = lessor.decide(now, &config) {
                break decision;
            }
            assert!(now < last_grant + 10 * EXPIRY_MS, "never fenced");
        };
        assert!(
            now - last_grant > EXPIRY_MS,
            "fenced while its last lease could still run"
        );
        assert!(matches!(fence, ConfigChange::Fence { shard: 1, .. }));
        assert!(matches!(config.apply(&fence), Outcome::Applied { .. }));
        for (node, end) in [("s1", 0), ("r1", 900), ("r2", 700)] {
            beat(&mut lessor, now, node, config.epoch, end, &config);
        }
        assert_eq!(
            lessor.decide(now, &config),
            Some(ConfigChange::Promote {
                shard: 1,
                primary_epoch: 1,
                new_primary: "r1".into()
            })
        );
    }

    #[test]
    fn a_primary_ahead_of_its_replicas_is_never_refused() {
        let config = leased_config();
        let mut lessor = Lessor::new(0);
        let mut now = 3 * LEASE_MS;
        for step in 0..20u64 {
            beat(&mut lessor, now, "r1", config.epoch, step * 100, &config);
            beat(&mut lessor, now, "r2", config.epoch, step * 90, &config);
            // Equal to the furthest replica (it has copied everything) is not behind.
            let end = if step % 2 == 0 { step * 100 } else { step * 100 + 50 };
            assert_eq!(
                beat(&mut lessor, now, "s1", config.epoch, end, &config).serve_ms,
                Some(SERVE_MS)
            );
            assert_eq!(lessor.decide(now, &config), None);
            now += HEARTBEAT_MS;
        }
    }

    #[test]
    fn a_primary_that_never_acted_on_having_replicas_is_never_fenced() {
        let mut config = config();
        let mut lessor = Lessor::new(0);
        // s1 last reported an epoch from before its replicas were added, then fell
        // silent: it may be serving without a lease, so fencing it could make two
        // primaries. The replicas wait.
        beat(&mut lessor, 0, "s1", 1, 0, &config);
        let later = 10 * EXPIRY_MS;
        beat(&mut lessor, later, "r1", config.epoch, 0, &config);
        assert_eq!(lessor.decide(later, &config), None);
        // Once it reports the newest epoch, its shard is leased, and fenced when silent.
        beat(&mut lessor, later, "s1", config.epoch, 0, &config);
        let leased = lessor.decide(later, &config).unwrap();
        assert_eq!(
            leased,
            ConfigChange::Leased {
                shard: 1,
                primary_epoch: 1
            }
        );
        assert!(matches!(config.apply(&leased), Outcome::Applied { .. }));
        assert_eq!(lessor.decide(later, &config), None);
        let silent = later + EXPIRY_MS + 1;
        beat(&mut lessor, silent, "r1", config.epoch, 0, &config);
        assert!(matches!(
            lessor.decide(silent, &config),
            Some(ConfigChange::Fence { shard: 1, .. })
        ));
    }

    #[test]
    fn a_new_leader_waits_a_lease_before_taking_anyone_for_dead() {
        let config = leased_config();
        let mut lessor = Lessor::new(5_000);
        // It has heard nobody, but a predecessor's grant may still run.
        assert_eq!(lessor.decide(5_000 + EXPIRY_MS, &config), None);
        beat(&mut lessor, 5_000 + EXPIRY_MS, "r1", config.epoch, 0, &config);
        assert!(matches!(
            lessor.decide(5_000 + EXPIRY_MS + 1, &config),
            Some(ConfigChange::Fence { shard: 1, .. })
        ));
    }

    #[test]
    fn no_fence_without_a_live_replica_to_take_over() {
        let config = config();
        let mut lessor = Lessor::new(0);
        let now = 10 * LEASE_MS;
        beat(&mut lessor, now, "s2", config.epoch, 0, &config);
        // s1 and both its replicas are silent: fencing would only stop the shard.
        assert_eq!(lessor.decide(now, &config), None);
    }

    #[test]
    fn a_restart_is_asked_of_the_named_process_only_and_once() {
        let config = leased_config();
        let mut lessor = Lessor::new(0);
        let with = |incarnation: u64| Heartbeat {
            node: "s1".into(),
            epoch: config.epoch,
            log_end: 0,
            incarnation,
            ready: true,
        };
        for replica in ["r1", "r2"] {
            beat(&mut lessor, 0, replica, config.epoch, 0, &config);
        }
        lessor.request_restart("s1", 7);
        // Another process of s1 (already restarted) is not asked.
        let grant = lessor.on_heartbeat(0, &with(8), &config);
        assert!(!grant.restart && grant.serve_ms.is_some());
        let grant = lessor.on_heartbeat(0, &with(7), &config);
        assert!(grant.restart && grant.serve_ms.is_none(), "{grant:?}");
        assert!(!lessor.on_heartbeat(0, &with(7), &config).restart, "asked once");
        let health = lessor.health(0);
        assert_eq!((health["s1"].incarnation, health["s1"].ready), (7, true));
    }

    #[test]
    fn a_primary_ahead_of_the_leaders_configuration_is_not_granted() {
        let config = leased_config();
        let mut lessor = Lessor::new(0);
        for replica in ["r1", "r2"] {
            beat(&mut lessor, 0, replica, config.epoch, 0, &config);
        }
        // It may have applied a fence this leader has not applied yet.
        assert_eq!(beat(&mut lessor, 0, "s1", config.epoch + 1, 0, &config).serve_ms, None);
        assert!(beat(&mut lessor, 0, "s1", config.epoch, 0, &config).serve_ms.is_some());
    }
}
