//! The commands that change a [`ClusterConfig`]. Each one names the epoch it was decided
//! at (except bootstrap, which is allowed only once), so a decision made on an old
//! configuration is refused rather than applied to a newer one; and each one is applied
//! whole or not at all. Every change raises the epoch by one.

use ferry_cluster::map::MAX_NODES;
use ferry_cluster::{ClusterMap, NodeEntry};
use serde::{Deserialize, Serialize};

use crate::state::{add_range, remove_range, valid_range, ClusterConfig, Epoch, Shard, ShardId, StorageNode};

/// A change to the configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConfigChange {
    /// Loads the first configuration from a cluster map: one shard per map node, which is
    /// its primary. Refused once the cluster is bootstrapped, so every config member may
    /// propose the same map and the first one committed wins.
    Bootstrap {
        /// The map's nodes.
        nodes: Vec<NodeEntry>,
    },
    /// Adds a storage node as the primary of a new shard with no slots yet.
    AddNode {
        /// Its id.
        id: String,
        /// Where it listens.
        node: StorageNode,
        /// The epoch this was decided at.
        expected_epoch: Epoch,
    },
    /// Adds a storage node as a replica of the shard whose primary is `primary`.
    AddReplica {
        /// Its id.
        id: String,
        /// Where it listens.
        node: StorageNode,
        /// The primary it copies.
        primary: String,
        /// The epoch this was decided at.
        expected_epoch: Epoch,
    },
    /// The shard's primary missed its lease: stop its replicas copying from it and collect
    /// how far each member's log goes, before choosing who leads (the lessor decides this).
    Fence {
        /// The shard.
        shard: ShardId,
        /// The primary's appointment epoch, as the decision saw it.
        primary_epoch: Epoch,
    },
    /// A planned change of primary (a rolling restart's): the primary stops serving as
    /// soon as it sees this, `to` (one of its replicas) goes on copying, the other
    /// replicas stop as under a fence, and once `to` holds everything the primary holds it
    /// is promoted (the lessor decides; [`crate::hand_over`]).
    HandOver {
        /// The shard.
        shard: ShardId,
        /// The primary's appointment epoch, as the decision saw it.
        primary_epoch: Epoch,
        /// The replica that takes over.
        to: String,
    },
    /// A fenced shard gets a new primary (the member with the longest log); the old one
    /// becomes a replica, and rejoins by dropping what its log holds past the new
    /// primary's start.
    Promote {
        /// The shard.
        shard: ShardId,
        /// The old primary's appointment epoch, as the decision saw it.
        primary_epoch: Epoch,
        /// The new primary (the old one or one of the replicas).
        new_primary: String,
    },
    /// Gives the slots `first..=last` to the shard whose primary is `to`. Only routing
    /// changes: no keys move (so this is for ranges without keys; a slot move copies them).
    AssignSlots {
        /// First slot.
        first: u16,
        /// Last slot (inclusive).
        last: u16,
        /// The primary of the shard that gets them.
        to: String,
        /// The epoch this was decided at.
        expected_epoch: Epoch,
    },
    /// Starts copying the slots `first..=last` (all served by one shard now) to the shard
    /// whose primary is `to`. Routing does not change until [`ConfigChange::FinishMove`].
    BeginMove {
        /// First slot.
        first: u16,
        /// Last slot (inclusive).
        last: u16,
        /// The primary of the shard that gets them.
        to: String,
        /// The epoch this was decided at.
        expected_epoch: Epoch,
    },
    /// The hand-over: the destination holds every write the source acknowledged for the
    /// moving slots (the source stopped taking them at `expected_epoch`), so they are its
    /// own from now on. Refused if anything changed since the source stopped.
    FinishMove {
        /// The move (its `begun_at`).
        begun_at: Epoch,
        /// The epoch the source stopped taking writes to the range at.
        expected_epoch: Epoch,
    },
    /// Gives up the move begun at `begun_at` (nothing if another move or none is under
    /// way): the source keeps the slots.
    AbortMove {
        /// The move (its `begun_at`).
        begun_at: Epoch,
        /// Why, for whoever asked for the move.
        why: String,
    },
    /// The shard's primary has acted on a configuration in which the shard has replicas:
    /// from now on it serves only under a lease, so it may be fenced.
    Leased {
        /// The shard.
        shard: ShardId,
        /// The primary's appointment epoch, as the decision saw it.
        primary_epoch: Epoch,
    },
}

/// What applying a command did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// The command took effect; the configuration is now at `epoch` (unchanged for a
    /// command that asked for what already held).
    Applied {
        /// The epoch after the command.
        epoch: Epoch,
    },
    /// The command was refused and nothing changed.
    Refused(Refusal),
}

/// Why a command was refused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum Refusal {
    /// Bootstrap on a bootstrapped cluster.
    #[error("the cluster is already bootstrapped (epoch {epoch})")]
    AlreadyBootstrapped {
        /// The current epoch.
        epoch: Epoch,
    },
    /// A change before bootstrap.
    #[error("the cluster is not bootstrapped yet")]
    NotBootstrapped,
    /// The command was decided at another epoch.
    #[error("decided at epoch {expected}, but the configuration is at epoch {current}")]
    StaleEpoch {
        /// The epoch the command names.
        expected: Epoch,
        /// The configuration's epoch.
        current: Epoch,
    },
    /// The map, node or range is not acceptable.
    #[error("{0}")]
    Invalid(String),
}

impl ClusterConfig {
    /// Applies `command`: the outcome says what happened, and on a refusal the
    /// configuration is unchanged.
    pub fn apply(&mut self, command: &ConfigChange) -> Outcome {
        match self.try_apply(command) {
            Ok(epoch) => Outcome::Applied { epoch },
            Err(refusal) => Outcome::Refused(refusal),
        }
    }

    fn try_apply(&mut self, command: &ConfigChange) -> Result<Epoch, Refusal> {
        match command {
            ConfigChange::Bootstrap { nodes } => self.bootstrap(nodes),
            ConfigChange::AddNode {
                id,
                node,
                expected_epoch,
            } => {
                self.check_epoch(*expected_epoch)?;
                self.add_node(id, node)
            }
            ConfigChange::AssignSlots {
                first,
                last,
                to,
                expected_epoch,
            } => {
                self.check_epoch(*expected_epoch)?;
                self.assign_slots(*first, *last, to)
            }
            ConfigChange::AddReplica {
                id,
                node,
                primary,
                expected_epoch,
            } => {
                self.check_epoch(*expected_epoch)?;
                self.add_replica(id, node, primary)
            }
            ConfigChange::Fence { shard, primary_epoch } => self.fence(*shard, *primary_epoch),
            ConfigChange::HandOver {
                shard,
                primary_epoch,
                to,
            } => self.hand_over(*shard, *primary_epoch, to),
            ConfigChange::Promote {
                shard,
                primary_epoch,
                new_primary,
            } => self.promote(*shard, *primary_epoch, new_primary),
            ConfigChange::BeginMove {
                first,
                last,
                to,
                expected_epoch,
            } => {
                self.check_epoch(*expected_epoch)?;
                self.begin_move(*first, *last, to)
            }
            ConfigChange::FinishMove {
                begun_at,
                expected_epoch,
            } => {
                self.check_epoch(*expected_epoch)?;
                self.finish_move(*begun_at)
            }
            ConfigChange::AbortMove { begun_at, why } => self.abort_move(*begun_at, why),
            ConfigChange::Leased { shard, primary_epoch } => {
                self.shard_at(*shard, *primary_epoch)?;
                let entry = self.shards.get_mut(shard).expect("found above");
                if entry.leased {
                    return Ok(self.epoch);
                }
                entry.leased = true;
                self.epoch += 1;
                Ok(self.epoch)
            }
        }
    }

    /// The shard `id` as it was when a decision saw its primary appointed at
    /// `primary_epoch`: a later appointment makes the decision stale.
    pub(crate) fn shard_at(&self, id: ShardId, primary_epoch: Epoch) -> Result<&Shard, Refusal> {
        if !self.is_bootstrapped() {
            return Err(Refusal::NotBootstrapped);
        }
        let shard = self
            .shards
            .get(&id)
            .ok_or_else(|| Refusal::Invalid(format!("there is no shard {id}")))?;
        if shard.primary_epoch != primary_epoch {
            return Err(Refusal::StaleEpoch {
                expected: primary_epoch,
                current: shard.primary_epoch,
            });
        }
        Ok(shard)
    }

    fn add_replica(&mut self, id: &str, node: &StorageNode, primary: &str) -> Result<Epoch, Refusal> {
        if self.nodes.contains_key(id) {
            return Err(Refusal::Invalid(format!("node {id:?} is already in the cluster")));
        }
        if self.nodes.len() >= MAX_NODES {
            return Err(Refusal::Invalid(format!("a cluster has at most {MAX_NODES} nodes")));
        }
        let Some((shard_id, _)) = self.shard_led_by(primary) else {
            return Err(Refusal::Invalid(format!("{primary:?} is not the primary of a shard")));
        };
        let mut next = self.clone();
        next.epoch += 1;
        next.nodes.insert(id.to_string(), node.clone());
        next.shards
            .get_mut(&shard_id)
            .expect("found above")
            .replicas
            .push(id.to_string());
        // The same checks a map file gets (id and address forms).
        next.check_node(id)?;
        *self = next;
        Ok(self.epoch)
    }

    fn fence(&mut self, shard: ShardId, primary_epoch: Epoch) -> Result<Epoch, Refusal> {
        let found = self.shard_at(shard, primary_epoch)?;
        if found.fenced_at.is_some() {
            return Ok(self.epoch);
        }
        if found.replicas.is_empty() {
            return Err(Refusal::Invalid(format!("shard {shard} has no replica to take over")));
        }
        self.epoch += 1;
        let epoch = self.epoch;
        self.shards.get_mut(&shard).expect("found above").fenced_at = Some(epoch);
        Ok(epoch)
    }

    fn promote(&mut self, shard: ShardId, primary_epoch: Epoch, new_primary: &str) -> Result<Epoch, Refusal> {
        let found = self.shard_at(shard, primary_epoch)?;
        if found.fenced_at.is_none() {
            return Err(Refusal::Invalid(format!(
                "shard {shard} is not fenced: its members' logs were not collected"
            )));
        }
        if !found.members().any(|member| member == new_primary) {
            return Err(Refusal::Invalid(format!(
                "{new_primary:?} is not a member of shard {shard}"
            )));
        }
        self.epoch += 1;
        let epoch = self.epoch;
        let entry = self.shards.get_mut(&shard).expect("found above");
        let old = std::mem::replace(&mut entry.primary, new_primary.to_string());
        entry.replicas.retain(|replica| replica != new_primary);
        if old != new_primary {
            entry.replicas.push(old);
        }
        entry.primary_epoch = epoch;
        entry.fenced_at = None;
        entry.hand_over_to = None;
        Ok(epoch)
    }

    /// Checks a node's id and addresses as a map file's are checked.
    fn check_node(&self, id: &str) -> Result<(), Refusal> {
        let node = &self.nodes[id];
        ClusterMap::new(vec![NodeEntry {
            id: id.to_string(),
            addr: node.addr.clone(),
            slots: vec![(0, ferry_cluster::SLOTS - 1)],
            resp: node.resp.clone(),
            replication: node.replication.clone(),
        }])
        .map(|_| ())
        .map_err(|err| Refusal::Invalid(err.to_string()))
    }

    pub(crate) fn check_epoch(&self, expected: Epoch) -> Result<(), Refusal> {
        if !self.is_bootstrapped() {
            return Err(Refusal::NotBootstrapped);
        }
        if expected != self.epoch {
            return Err(Refusal::StaleEpoch {
                expected,
                current: self.epoch,
            });
        }
        Ok(())
    }

    fn bootstrap(&mut self, nodes: &[NodeEntry]) -> Result<Epoch, Refusal> {
        if self.is_bootstrapped() {
            return Err(Refusal::AlreadyBootstrapped { epoch: self.epoch });
        }
        // The map's own checks: ids, addresses, every slot owned exactly once.
        let map = ClusterMap::new(nodes.to_vec()).map_err(|err| Refusal::Invalid(err.to_string()))?;
        let epoch = 1;
        let mut next = ClusterConfig {
            epoch,
            ..ClusterConfig::default()
        };
        for (index, entry) in map.nodes().iter().enumerate() {
            next.nodes.insert(
                entry.id.clone(),
                StorageNode {
                    addr: entry.addr.clone(),
                    resp: entry.resp.clone(),
                    replication: entry.replication.clone(),
                },
            );
            let mut slots = Vec::new();
            for &(lo, hi) in &entry.slots {
                slots = add_range(&slots, lo, hi);
            }
            next.shards.insert(
                index as u32 + 1,
                Shard {
                    primary: entry.id.clone(),
                    replicas: Vec::new(),
                    slots,
                    primary_epoch: epoch,
                    fenced_at: None,
                    hand_over_to: None,
                    leased: false,
                },
            );
        }
        *self = next;
        Ok(epoch)
    }

    fn add_node(&mut self, id: &str, node: &StorageNode) -> Result<Epoch, Refusal> {
        if self.nodes.contains_key(id) {
            return Err(Refusal::Invalid(format!("node {id:?} is already in the cluster")));
        }
        if self.nodes.len() >= MAX_NODES {
            return Err(Refusal::Invalid(format!("a cluster has at most {MAX_NODES} nodes")));
        }
        let epoch = self.epoch + 1;
        let mut next = self.clone();
        next.epoch = epoch;
        next.nodes.insert(id.to_string(), node.clone());
        let shard_id = next.shards.keys().next_back().map_or(1, |last| last + 1);
        next.shards.insert(
            shard_id,
            Shard {
                primary: id.to_string(),
                replicas: Vec::new(),
                slots: Vec::new(),
                primary_epoch: epoch,
                fenced_at: None,
                hand_over_to: None,
                leased: false,
            },
        );
        next.check_node(id)?;
        *self = next;
        Ok(epoch)
    }

    fn assign_slots(&mut self, first: u16, last: u16, to: &str) -> Result<Epoch, Refusal> {
        if !valid_range(first, last) {
            return Err(Refusal::Invalid(format!(
                "slots {first}-{last} are not a range of slots"
            )));
        }
        let Some((target, _)) = self.shard_led_by(to) else {
            return Err(Refusal::Invalid(format!("{to:?} is not the primary of a shard")));
        };
        let mut next = self.clone();
        for (id, shard) in next.shards.iter_mut() {
            shard.slots = if *id == target {
                add_range(&shard.slots, first, last)
            } else {
                remove_range(&shard.slots, first, last)
            };
        }
        if next.shards == self.shards {
            return Ok(self.epoch);
        }
        next.epoch += 1;
        // Assignment only moves slots between shards, so coverage holds; checked anyway.
        next.routing_map().map_err(|err| Refusal::Invalid(err.to_string()))?;
        *self = next;
        Ok(self.epoch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_cluster::SLOTS;
    use proptest::prelude::*;

    fn three_nodes() -> Vec<NodeEntry> {
        let addrs: Vec<String> = (1..=3).map(|i| format!("127.0.0.1:770{i}")).collect();
        ClusterMap::even(&addrs).unwrap().nodes().to_vec()
    }

    fn bootstrapped() -> ClusterConfig {
        let mut config = ClusterConfig::default();
        assert_eq!(
            config.apply(&ConfigChange::Bootstrap { nodes: three_nodes() }),
            Outcome::Applied { epoch: 1 }
        );
        config
    }

    #[test]
    fn bootstrap_loads_the_map_once() {
        let mut config = bootstrapped();
        let map = config.routing_map().unwrap();
        assert_eq!(map.nodes().len(), 3);
        assert_eq!(map.owner_of_slot(0).id, "s1");
        assert_eq!(map.owner_of_slot(SLOTS - 1).id, "s3");
        let again = config.apply(&ConfigChange::Bootstrap { nodes: three_nodes() });
        assert_eq!(again, Outcome::Refused(Refusal::AlreadyBootstrapped { epoch: 1 }));
    }

    #[test]
    fn a_map_with_a_gap_is_refused_and_changes_nothing() {
        let mut nodes = three_nodes();
        nodes[1].slots = vec![(5461, 5461)];
        let mut config = ClusterConfig::default();
        assert!(matches!(
            config.apply(&ConfigChange::Bootstrap { nodes }),
            Outcome::Refused(Refusal::Invalid(_))
        ));
        assert_eq!(config, ClusterConfig::default());
    }

    #[test]
    fn a_stale_decision_is_refused() {
        let mut config = bootstrapped();
        let assign = |expected_epoch| ConfigChange::AssignSlots {
            first: 0,
            last: 99,
            to: "s2".into(),
            expected_epoch,
        };
        assert_eq!(config.apply(&assign(1)), Outcome::Applied { epoch: 2 });
        assert_eq!(config.routing_map().unwrap().owner_of_slot(50).id, "s2");
        let before = config.clone();
        assert_eq!(
            config.apply(&assign(1)),
            Outcome::Refused(Refusal::StaleEpoch {
                expected: 1,
                current: 2
            })
        );
        assert_eq!(config, before);
        // Asking for what already holds changes nothing, not even the epoch.
        assert_eq!(config.apply(&assign(2)), Outcome::Applied { epoch: 2 });
    }

    #[test]
    fn a_new_node_gets_an_empty_shard_then_slots() {
        let mut config = bootstrapped();
        let node = StorageNode {
            addr: "127.0.0.1:7704".into(),
            resp: None,
            replication: None,
        };
        let add = ConfigChange::AddNode {
            id: "s4".into(),
            node: node.clone(),
            expected_epoch: 1,
        };
        assert_eq!(config.apply(&add), Outcome::Applied { epoch: 2 });
        assert!(matches!(
            config.apply(&ConfigChange::AddNode {
                id: "s4".into(),
                node,
                expected_epoch: 2
            }),
            Outcome::Refused(Refusal::Invalid(_))
        ));
        let assign = ConfigChange::AssignSlots {
            first: 16000,
            last: 16383,
            to: "s4".into(),
            expected_epoch: 2,
        };
        assert_eq!(config.apply(&assign), Outcome::Applied { epoch: 3 });
        let map = config.routing_map().unwrap();
        assert_eq!(map.owner_of_slot(16383).id, "s4");
        assert_eq!(map.owner_of_slot(15999).id, "s3");
        let unknown = ConfigChange::AssignSlots {
            first: 0,
            last: 0,
            to: "s9".into(),
            expected_epoch: 3,
        };
        assert!(matches!(config.apply(&unknown), Outcome::Refused(Refusal::Invalid(_))));
    }

    fn replica(id: &str, primary: &str, expected_epoch: Epoch) -> ConfigChange {
        ConfigChange::AddReplica {
            id: id.into(),
            node: StorageNode {
                addr: "127.0.0.1:7790".into(),
                resp: None,
                replication: None,
            },
            primary: primary.into(),
            expected_epoch,
        }
    }

    #[test]
    fn a_fenced_shard_gets_a_new_primary_and_the_old_one_rejoins_as_a_replica() {
        let mut config = bootstrapped();
        assert!(
            matches!(
                config.apply(&ConfigChange::Fence {
                    shard: 1,
                    primary_epoch: 1
                }),
                Outcome::Refused(Refusal::Invalid(_))
            ),
            "no replica to take over"
        );
        assert_eq!(config.apply(&replica("r1", "s1", 1)), Outcome::Applied { epoch: 2 });
        assert_eq!(config.shard_of("r1").unwrap().0, 1);
        let promote = |primary_epoch, new_primary: &str| ConfigChange::Promote {
            shard: 1,
            primary_epoch,
            new_primary: new_primary.into(),
        };
        assert!(
            matches!(config.apply(&promote(1, "r1")), Outcome::Refused(Refusal::Invalid(_))),
            "promoted without collecting the logs first"
        );
        let fence = ConfigChange::Fence {
            shard: 1,
            primary_epoch: 1,
        };
        assert_eq!(config.apply(&fence), Outcome::Applied { epoch: 3 });
        assert_eq!(config.shards[&1].fenced_at, Some(3));
        assert_eq!(
            config.apply(&fence),
            Outcome::Applied { epoch: 3 },
            "fencing twice changes nothing"
        );
        assert!(matches!(
            config.apply(&promote(1, "s2")),
            Outcome::Refused(Refusal::Invalid(_))
        ));
        assert_eq!(config.apply(&promote(1, "r1")), Outcome::Applied { epoch: 4 });
        let shard = &config.shards[&1];
        assert_eq!(
            (shard.primary.as_str(), shard.replicas.clone()),
            ("r1", vec!["s1".to_string()])
        );
        assert_eq!((shard.primary_epoch, shard.fenced_at), (4, None));
        assert_eq!(config.routing_map().unwrap().owner_of_slot(0).id, "r1");
        // The decision about the old appointment is stale now.
        assert_eq!(
            config.apply(&fence),
            Outcome::Refused(Refusal::StaleEpoch {
                expected: 1,
                current: 4
            })
        );
    }

    fn command() -> impl Strategy<Value = ConfigChange> {
        let nodes = prop::sample::select(vec!["s1", "s2", "s3", "s4", "s5"]);
        prop_oneof![
            (0u16..SLOTS, 0u16..3000, nodes.clone(), 0u64..8).prop_map(|(first, len, to, expected_epoch)| {
                ConfigChange::AssignSlots {
                    first,
                    last: first.saturating_add(len).min(SLOTS - 1),
                    to: to.into(),
                    expected_epoch,
                }
            }),
            (
                nodes.clone(),
                prop::sample::select(vec!["s1", "s2", "s3", "r1"]),
                0u64..8
            )
                .prop_map(|(id, primary, expected_epoch)| replica(id, primary, expected_epoch)),
            (1u32..5, 0u64..8).prop_map(|(shard, primary_epoch)| ConfigChange::Fence { shard, primary_epoch }),
            (1u32..5, 0u64..8, nodes.clone()).prop_map(|(shard, primary_epoch, new_primary)| ConfigChange::Promote {
                shard,
                primary_epoch,
                new_primary: new_primary.into()
            }),
            (nodes, 0u64..8).prop_map(|(id, expected_epoch)| ConfigChange::AddNode {
                id: id.into(),
                node: StorageNode {
                    addr: "127.0.0.1:7799".into(),
                    resp: None,
                    replication: None,
                },
                expected_epoch,
            }),
        ]
    }

    proptest! {
        /// Whatever sequence of decisions arrives, every slot keeps exactly one owner, the
        /// epoch rises by one per change and never otherwise, and replaying the same log
        /// gives the same configuration.
        #[test]
        fn any_log_keeps_the_map_whole_and_epochs_rising(commands in proptest::collection::vec(command(), 0..40)) {
            let mut config = bootstrapped();
            let mut replay = bootstrapped();
            for command in &commands {
                let before = config.clone();
                let outcome = config.apply(command);
                prop_assert_eq!(&replay.apply(command), &outcome);
                match outcome {
                    Outcome::Applied { epoch } if before == config => prop_assert_eq!(epoch, before.epoch),
                    Outcome::Applied { epoch } => prop_assert_eq!(epoch, before.epoch + 1),
                    Outcome::Refused(_) => prop_assert_eq!(&config, &before),
                }
                prop_assert!(config.routing_map().is_ok());
                // Every node belongs to exactly one shard, and no shard lists a node twice.
                for node in config.nodes.keys() {
                    let memberships: usize = config
                        .shards
                        .values()
                        .map(|shard| shard.members().filter(|member| *member == node).count())
                        .sum();
                    prop_assert_eq!(memberships, 1, "{} in {:?}", node, config.shards);
                }
            }
            prop_assert_eq!(config, replay);
        }
    }
}
