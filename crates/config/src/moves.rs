//! Slot moves as configuration changes. A move is two commits with the copy between them:
//!
//! 1. [`ConfigChange::BeginMove`](crate::ConfigChange::BeginMove) records the range, its source and
//!    destination shard. Routing is unchanged: the source serves the range while the
//!    destination copies it (a consistent scan, then the source's log from the scan's mark).
//! 2. When the destination has caught up it asks the source to stop taking writes to the
//!    range; the source answers with where its log ends, under the epoch `E` it knows. The
//!    destination copies up to there, makes it durable, and proposes
//!    [`ConfigChange::FinishMove`](crate::ConfigChange::FinishMove) at `E`.
//!
//! The hand-over is the commit point: `FinishMove` applies only if the configuration is
//! still at `E`, so every other change (a failover, an abort, another assignment) makes
//! it fail. That is what lets the source decide alone when to take writes again: once it
//! sees an epoch past `E` in which it still serves the range, the move can no longer
//! finish.

use crate::state::{add_range, remove_range, valid_range, ClusterConfig, Epoch, SlotMove};
use crate::Refusal;

impl ClusterConfig {
    /// The shard serving every slot of `first..=last`, if one shard serves them all.
    pub fn serving_shard(&self, first: u16, last: u16) -> Option<crate::ShardId> {
        self.shards
            .iter()
            .find(|(_, shard)| shard.slots.iter().any(|&(lo, hi)| lo <= first && last <= hi))
            .map(|(id, _)| *id)
    }

    pub(crate) fn begin_move(&mut self, first: u16, last: u16, to: &str) -> Result<Epoch, Refusal> {
        if !valid_range(first, last) {
            return Err(Refusal::Invalid(format!(
                "slots {first}-{last} are not a range of slots"
            )));
        }
        if let Some(moving) = &self.moving {
            return Err(Refusal::Invalid(format!(
                "slots {}-{} are being moved (since epoch {}): one move at a time",
                moving.first, moving.last, moving.begun_at
            )));
        }
        let Some((target, target_shard)) = self.shard_led_by(to) else {
            return Err(Refusal::Invalid(format!("{to:?} is not the primary of a shard")));
        };
        let Some(source) = self.serving_shard(first, last) else {
            return Err(Refusal::Invalid(format!(
                "slots {first}-{last} are not all served by one shard: move each shard's part on its own"
            )));
        };
        if source == target {
            return Err(Refusal::Invalid(format!("{to:?} already serves slots {first}-{last}")));
        }
        let source_shard = &self.shards[&source];
        if source_shard.fenced_at.is_some() || target_shard.fenced_at.is_some() {
            return Err(Refusal::Invalid("a failover is under way: move after it".into()));
        }
        for shard in [source_shard, target_shard] {
            let primary = &shard.primary;
            if self
                .nodes
                .get(primary)
                .and_then(|node| node.replication.as_ref())
                .is_none()
            {
                return Err(Refusal::Invalid(format!(
                    "{primary:?} has no replication address: slot moves copy over replication links"
                )));
            }
        }
        self.epoch += 1;
        self.moving = Some(SlotMove {
            first,
            last,
            from: source,
            to: target,
            begun_at: self.epoch,
        });
        self.last_move_failure = None;
        Ok(self.epoch)
    }

    pub(crate) fn finish_move(&mut self, begun_at: Epoch) -> Result<Epoch, Refusal> {
        let Some(moving) = self.moving.clone().filter(|moving| moving.begun_at == begun_at) else {
            return Err(Refusal::Invalid(format!(
                "no move begun at epoch {begun_at} is under way"
            )));
        };
        let mut next = self.clone();
        for (id, shard) in next.shards.iter_mut() {
            if *id == moving.to {
                shard.slots = add_range(&shard.slots, moving.first, moving.last);
            } else if *id == moving.from {
                shard.slots = remove_range(&shard.slots, moving.first, moving.last);
            }
        }
        next.moving = None;
        next.epoch += 1;
        // Only slots between two shards moved, so coverage holds; checked anyway.
        next.routing_map().map_err(|err| Refusal::Invalid(err.to_string()))?;
        *self = next;
        Ok(self.epoch)
    }

    pub(crate) fn abort_move(&mut self, begun_at: Epoch, why: &str) -> Result<Epoch, Refusal> {
        if self.moving.as_ref().is_none_or(|moving| moving.begun_at != begun_at) {
            return Ok(self.epoch);
        }
        self.moving = None;
        self.last_move_failure = Some(why.chars().take(MAX_FAILURE_CHARS).collect());
        self.epoch += 1;
        Ok(self.epoch)
    }
}

/// Longest reason for a failed move kept in the configuration.
pub const MAX_FAILURE_CHARS: usize = 1024;

#[cfg(test)]
mod tests {
    use crate::{ClusterConfig, ConfigChange, Outcome, Refusal, StorageNode};
    use ferry_cluster::{ClusterMap, NodeEntry};

    /// Two shards of one primary each, with replication addresses.
    fn two_shards() -> ClusterConfig {
        let addrs: Vec<String> = (1..=2).map(|i| format!("127.0.0.1:770{i}")).collect();
        let nodes: Vec<NodeEntry> = ClusterMap::even(&addrs)
            .unwrap()
            .nodes()
            .iter()
            .enumerate()
            .map(|(i, node)| NodeEntry {
                replication: Some(format!("127.0.0.1:780{i}")),
                ..node.clone()
            })
            .collect();
        let mut config = ClusterConfig::default();
        assert_eq!(
            config.apply(&ConfigChange::Bootstrap { nodes }),
            Outcome::Applied { epoch: 1 }
        );
        config
    }

    fn begin(config: &mut ClusterConfig, first: u16, last: u16, to: &str) -> Outcome {
        config.apply(&ConfigChange::BeginMove {
            first,
            last,
            to: to.into(),
            expected_epoch: config.epoch,
        })
    }

    fn invalid(outcome: Outcome) -> String {
        match outcome {
            Outcome::Refused(Refusal::Invalid(why)) => why,
            other => panic!("not refused as invalid: {other:?}"),
        }
    }

    #[test]
    fn a_move_changes_routing_only_when_it_finishes() {
        let mut config = two_shards();
        assert_eq!(begin(&mut config, 100, 199, "s2"), Outcome::Applied { epoch: 2 });
        let moving = config.moving.clone().unwrap();
        assert_eq!((moving.from, moving.to, moving.begun_at), (1, 2, 2));
        assert_eq!(config.routing_map().unwrap().owner_of_slot(150).id, "s1");
        let finish = |expected_epoch| ConfigChange::FinishMove {
            begun_at: 2,
            expected_epoch,
        };
        assert_eq!(
            config.apply(&finish(3)),
            Outcome::Refused(Refusal::StaleEpoch {
                expected: 3,
                current: 2
            })
        );
        assert_eq!(config.apply(&finish(2)), Outcome::Applied { epoch: 3 });
        let map = config.routing_map().unwrap();
        assert_eq!(map.owner_of_slot(150).id, "s2");
        assert_eq!(map.owner_of_slot(99).id, "s1");
        assert_eq!(map.owner_of_slot(200).id, "s1");
        assert_eq!(config.moving, None);
    }

    #[test]
    fn any_change_after_the_source_stopped_makes_the_hand_over_fail() {
        let mut config = two_shards();
        begin(&mut config, 0, 9, "s2");
        let stopped_at = config.epoch;
        // Something else commits meanwhile (here another node joins).
        let join = ConfigChange::AddNode {
            id: "s3".into(),
            node: StorageNode {
                addr: "127.0.0.1:7703".into(),
                resp: None,
                replication: None,
            },
            expected_epoch: config.epoch,
        };
        assert!(matches!(config.apply(&join), Outcome::Applied { .. }));
        let finish = ConfigChange::FinishMove {
            begun_at: 2,
            expected_epoch: stopped_at,
        };
        assert!(matches!(
            config.apply(&finish),
            Outcome::Refused(Refusal::StaleEpoch { .. })
        ));
        assert_eq!(config.routing_map().unwrap().owner_of_slot(5).id, "s1");
        // The destination gives up; a second abort of the same move changes nothing.
        let abort = ConfigChange::AbortMove {
            begun_at: 2,
            why: "the configuration changed".into(),
        };
        let aborted = config.apply(&abort);
        assert_eq!(aborted, Outcome::Applied { epoch: 4 });
        assert_eq!(config.apply(&abort), Outcome::Applied { epoch: 4 });
        assert_eq!(config.moving, None);
        assert_eq!(config.last_move_failure.as_deref(), Some("the configuration changed"));
    }

    #[test]
    fn moves_that_cannot_be_done_are_refused() {
        let mut config = two_shards();
        assert!(invalid(begin(&mut config, 8000, 8300, "s2")).contains("not all served by one shard"));
        assert!(invalid(begin(&mut config, 0, 9, "s1")).contains("already serves"));
        assert!(invalid(begin(&mut config, 0, 9, "s9")).contains("not the primary"));
        assert!(invalid(begin(&mut config, 9, 0, "s2")).contains("not a range"));
        assert_eq!(begin(&mut config, 0, 9, "s2"), Outcome::Applied { epoch: 2 });
        assert!(invalid(begin(&mut config, 20, 29, "s2")).contains("one move at a time"));
        let mut plain = two_shards();
        plain.nodes.get_mut("s2").unwrap().replication = None;
        assert!(invalid(begin(&mut plain, 0, 9, "s2")).contains("no replication address"));
    }
}
