//! A planned change of primary, as a rolling restart needs one: [`ConfigChange::HandOver`]
//! fences the shard like a failover does, but names the replica that takes over. The
//! primary stops serving as soon as it has applied the hand-over (it drops its lease at
//! once instead of letting it run out), so from its next report on its log end is final;
//! the named replica goes on copying; and the lessor promotes it once it has reported a
//! log at least as long as that final end. Nothing the primary acknowledged is lost, and
//! writes are refused only from the primary's stop to the promotion (a few heartbeats),
//! not for the lease and margin a silent primary costs.
//!
//! If the hand-over cannot finish (the replica dies or does not catch up within
//! [`HAND_OVER_MS`], or the primary falls silent), the lessor chooses as after any fence:
//! the longest log among the live members, once each has reported after the fence. The
//! safety of a promotion is the fence's either way: the old primary serves no more once it
//! has reported after the fence, or once it has been silent past every lease.

use crate::command::{ConfigChange, Refusal};
use crate::lease::Lessor;
use crate::state::{ClusterConfig, Epoch, Shard, ShardId};

/// How long a hand-over waits for its replica to hold all the primary holds before the
/// lessor falls back to choosing the longest log (a replica that died or cannot copy must
/// not leave the shard refusing writes).
pub const HAND_OVER_MS: u64 = 5_000;

impl ClusterConfig {
    /// Applies [`ConfigChange::HandOver`]: fences `shard` for a hand-over to its replica `to`.
    pub(crate) fn hand_over(&mut self, shard: ShardId, primary_epoch: Epoch, to: &str) -> Result<Epoch, Refusal> {
        let found = self.shard_at(shard, primary_epoch)?;
        if found.fenced_at.is_some() {
            return match found.hand_over_to.as_deref() == Some(to) {
                // Asked again (a retry): it is under way.
                true => Ok(self.epoch),
                false => Err(Refusal::Invalid(format!(
                    "shard {shard} is already choosing a new primary"
                ))),
            };
        }
        if !found.replicas.iter().any(|replica| replica == to) {
            return Err(Refusal::Invalid(format!("{to:?} is not a replica of shard {shard}")));
        }
        self.epoch += 1;
        let epoch = self.epoch;
        let entry = self.shards.get_mut(&shard).expect("found above");
        entry.fenced_at = Some(epoch);
        entry.hand_over_to = Some(to.to_string());
        Ok(epoch)
    }
}

impl Lessor {
    /// The promotion a shard handed over to `to` at `fenced_at` (first seen by this
    /// leader at `seen_since_ms`) is ready for, if any.
    pub(crate) fn promote_handed_over(
        &self,
        now_ms: u64,
        id: ShardId,
        shard: &Shard,
        fenced_at: Epoch,
        to: &str,
        seen_since_ms: u64,
    ) -> Option<ConfigChange> {
        let old = &shard.primary;
        let timed_out = now_ms.saturating_sub(seen_since_ms) > HAND_OVER_MS;
        if timed_out || !self.alive(now_ms, old) || !self.alive(now_ms, to) {
            return self.promote_if_collected(now_ms, id, shard, fenced_at);
        }
        let (stopped, copied) = (
            self.reported_since(old, fenced_at)?,
            self.reported_since(to, fenced_at)?,
        );
        (copied >= stopped).then(|| ConfigChange::Promote {
            shard: id,
            primary_epoch: shard.primary_epoch,
            new_primary: to.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::{Heartbeat, EXPIRY_MS, HEARTBEAT_MS};
    use crate::Outcome;

    /// Shards s1 (replicas r1, r2; leased) and s2.
    use crate::lease::tests::leased_config as config;

    fn hand_over(to: &str) -> ConfigChange {
        ConfigChange::HandOver {
            shard: 1,
            primary_epoch: 1,
            to: to.into(),
        }
    }

    fn beat(lessor: &mut Lessor, now_ms: u64, node: &str, epoch: Epoch, log_end: u64, config: &ClusterConfig) {
        let heartbeat = Heartbeat {
            node: node.into(),
            epoch,
            log_end,
            ..Heartbeat::default()
        };
        lessor.on_heartbeat(now_ms, &heartbeat, config);
    }

    #[test]
    fn a_hand_over_names_a_replica_of_the_shard_and_is_refused_while_another_change_runs() {
        let mut config = config();
        assert!(matches!(
            config.apply(&hand_over("s9")),
            Outcome::Refused(Refusal::Invalid(_))
        ));
        assert!(matches!(
            config.apply(&hand_over("s1")),
            Outcome::Refused(Refusal::Invalid(_))
        ));
        let Outcome::Applied { epoch } = config.apply(&hand_over("r1")) else {
            panic!("refused");
        };
        let shard = &config.shards[&1];
        assert_eq!(
            (shard.fenced_at, shard.hand_over_to.as_deref()),
            (Some(epoch), Some("r1"))
        );
        // The same again is a retry; another one is refused.
        assert_eq!(config.apply(&hand_over("r1")), Outcome::Applied { epoch });
        assert!(matches!(
            config.apply(&hand_over("r2")),
            Outcome::Refused(Refusal::Invalid(_))
        ));
        let promote = ConfigChange::Promote {
            shard: 1,
            primary_epoch: 1,
            new_primary: "r1".into(),
        };
        assert!(matches!(config.apply(&promote), Outcome::Applied { .. }));
        let shard = &config.shards[&1];
        assert_eq!(
            (shard.primary.as_str(), shard.fenced_at, shard.hand_over_to.as_deref()),
            ("r1", None, None)
        );
    }

    #[test]
    fn the_named_replica_is_promoted_once_it_holds_what_the_stopped_primary_holds() {
        let mut config = config();
        let mut lessor = Lessor::new(0);
        let mut now = EXPIRY_MS + 1;
        for node in ["s1", "r1", "r2"] {
            beat(&mut lessor, now, node, config.epoch, 100, &config);
        }
        assert!(matches!(config.apply(&hand_over("r2")), Outcome::Applied { .. }));
        let fenced = config.epoch;
        // Nothing before the primary has reported stopping.
        beat(&mut lessor, now, "r2", fenced, 100, &config);
        assert_eq!(lessor.decide(now, &config), None);
        // It stopped at 180; r2 has copied 150 so far, r1 (paused) 100.
        beat(&mut lessor, now, "s1", fenced, 180, &config);
        beat(&mut lessor, now, "r1", fenced, 100, &config);
        beat(&mut lessor, now, "r2", fenced, 150, &config);
        assert_eq!(
            lessor.decide(now, &config),
            None,
            "r2 does not hold all of s1's log yet"
        );
        now += HEARTBEAT_MS;
        beat(&mut lessor, now, "r2", fenced, 180, &config);
        assert_eq!(
            lessor.decide(now, &config),
            Some(ConfigChange::Promote {
                shard: 1,
                primary_epoch: 1,
                new_primary: "r2".into()
            })
        );
    }

    #[test]
    fn a_hand_over_that_cannot_finish_falls_back_to_the_longest_log() {
        let mut config = config();
        let mut lessor = Lessor::new(0);
        let mut now = EXPIRY_MS + 1;
        assert!(matches!(config.apply(&hand_over("r2")), Outcome::Applied { .. }));
        let fenced = config.epoch;
        let started = now;
        // r2 never reports after the fence (it cannot copy); s1 stopped at 180, r1 at 100.
        while now <= started + HAND_OVER_MS {
            beat(&mut lessor, now, "s1", fenced, 180, &config);
            beat(&mut lessor, now, "r1", fenced, 100, &config);
            beat(&mut lessor, now, "r2", fenced - 1, 120, &config);
            assert_eq!(lessor.decide(now, &config), None, "at {now} ms");
            now += HEARTBEAT_MS;
        }
        // Past the wait, r2 still reports from before the fence: nothing is chosen over
        // a member that may still be copying; once it falls silent, s1 is the longest.
        now += EXPIRY_MS;
        beat(&mut lessor, now, "s1", fenced, 180, &config);
        beat(&mut lessor, now, "r1", fenced, 100, &config);
        assert_eq!(
            lessor.decide(now, &config),
            Some(ConfigChange::Promote {
                shard: 1,
                primary_epoch: 1,
                new_primary: "s1".into()
            })
        );
    }
}
