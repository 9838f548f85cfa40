//! The configuration a config group agrees on: the storage nodes, the shards (each a set of
//! slot ranges with one primary and its replicas), and the epoch, which rises with every
//! change so that anyone holding two configurations knows which is newer.

use std::collections::BTreeMap;

use ferry_cluster::{ClusterMap, MapError, NodeEntry, SLOTS};
use serde::{Deserialize, Serialize};

/// The number of every configuration: 0 before bootstrap, then one more per change.
pub type Epoch = u64;

/// A shard's number, stable for the cluster's life.
pub type ShardId = u32;

/// Where a storage node listens.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorageNode {
    /// `host:port` of its ferry-protocol listener.
    pub addr: String,
    /// `host:port` of its RESP listener, if it has one.
    pub resp: Option<String>,
    /// `host:port` where replicas pull its log, if it serves replication.
    #[serde(default)]
    pub replication: Option<String>,
}

/// A set of slot ranges and the nodes that hold them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// The node that serves the shard's reads and writes.
    pub primary: String,
    /// Nodes that keep a copy (none until replication is configured).
    pub replicas: Vec<String>,
    /// Inclusive slot ranges, sorted and not touching each other.
    pub slots: Vec<(u16, u16)>,
    /// The epoch at which `primary` was appointed: what fences an older primary.
    pub primary_epoch: Epoch,
    /// Set (to the epoch it happened at) while a new primary is being chosen because this
    /// one missed its lease: replicas stop copying from it, it gets no lease, and each
    /// member of the shard reports how far its log goes.
    #[serde(default)]
    pub fenced_at: Option<Epoch>,
    /// Set with `fenced_at` when the change of primary is a planned hand-over to this
    /// replica ([`crate::ConfigChange::HandOver`]): it goes on copying until it holds all the
    /// stopped primary holds, and is promoted then.
    #[serde(default)]
    pub hand_over_to: Option<String>,
    /// Set once the primary has reported acting on a configuration in which the shard has
    /// replicas: it then serves only under a lease, so fencing it cannot leave two
    /// primaries serving. The leader fences only a leased shard.
    #[serde(default)]
    pub leased: bool,
}

impl Shard {
    /// The shard's nodes: its primary first, then its replicas.
    pub fn members(&self) -> impl Iterator<Item = &String> {
        std::iter::once(&self.primary).chain(&self.replicas)
    }
}

/// The cluster's configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterConfig {
    /// Rises by one with every change; 0 means not bootstrapped yet.
    pub epoch: Epoch,
    /// Storage nodes by id.
    pub nodes: BTreeMap<String, StorageNode>,
    /// Shards by number.
    pub shards: BTreeMap<ShardId, Shard>,
    /// The slot range being copied to another shard, if any (one at a time).
    #[serde(default)]
    pub moving: Option<SlotMove>,
    /// Why the last slot move was given up, until the next one begins.
    #[serde(default)]
    pub last_move_failure: Option<String>,
}

/// A slot range on its way from one shard to another: the source serves it until the
/// destination has copied it and the hand-over commits ([`crate::ConfigChange::FinishMove`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotMove {
    /// First slot.
    pub first: u16,
    /// Last slot (inclusive).
    pub last: u16,
    /// The shard that serves it now.
    pub from: ShardId,
    /// The shard it goes to.
    pub to: ShardId,
    /// The epoch the move began at: names the move.
    pub begun_at: Epoch,
}

impl ClusterConfig {
    /// Whether a map has been loaded (every slot then has an owner).
    pub fn is_bootstrapped(&self) -> bool {
        self.epoch > 0
    }

    /// The shard `node` belongs to, as its primary or a replica.
    pub fn shard_of(&self, node: &str) -> Option<(ShardId, &Shard)> {
        self.shards
            .iter()
            .find(|(_, shard)| shard.members().any(|member| member == node))
            .map(|(id, shard)| (*id, shard))
    }

    /// The shard whose primary is `node`.
    pub fn shard_led_by(&self, node: &str) -> Option<(ShardId, &Shard)> {
        self.shards
            .iter()
            .find(|(_, shard)| shard.primary == node)
            .map(|(id, shard)| (*id, shard))
    }

    /// Which node serves which slots, in the form every router reads. Fails before
    /// bootstrap, and for a configuration that leaves a slot without exactly one owner
    /// (which [`ClusterConfig::apply`](crate::command) never produces, but a configuration
    /// read from the network is checked, not trusted).
    pub fn routing_map(&self) -> Result<ClusterMap, MapError> {
        let mut entries = Vec::with_capacity(self.shards.len());
        for shard in self.shards.values() {
            let Some(node) = self.nodes.get(&shard.primary) else {
                return Err(MapError::Node {
                    node: shard.primary.clone(),
                    why: "a shard's primary is not among the nodes".into(),
                });
            };
            entries.push(NodeEntry {
                id: shard.primary.clone(),
                addr: node.addr.clone(),
                slots: shard.slots.clone(),
                resp: node.resp.clone(),
                replication: node.replication.clone(),
            });
        }
        Ok(ClusterMap::new(entries)?.with_epoch(self.epoch))
    }
}

/// `ranges` without the slots `first..=last`.
pub(crate) fn remove_range(ranges: &[(u16, u16)], first: u16, last: u16) -> Vec<(u16, u16)> {
    let mut out = Vec::with_capacity(ranges.len() + 1);
    for &(lo, hi) in ranges {
        if hi < first || lo > last {
            out.push((lo, hi));
            continue;
        }
        if lo < first {
            out.push((lo, first - 1));
        }
        if hi > last {
            out.push((last + 1, hi));
        }
    }
    out
}

/// `ranges` with the slots `first..=last` added, sorted, touching ranges merged.
pub(crate) fn add_range(ranges: &[(u16, u16)], first: u16, last: u16) -> Vec<(u16, u16)> {
    let mut all: Vec<(u16, u16)> = ranges.to_vec();
    all.push((first, last));
    all.sort_unstable();
    let mut out: Vec<(u16, u16)> = Vec::with_capacity(all.len());
    for (lo, hi) in all {
        match out.last_mut() {
            Some(prev) if u32::from(lo) <= u32::from(prev.1) + 1 => prev.1 = prev.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

/// Whether `first..=last` is a valid slot range.
pub(crate) fn valid_range(first: u16, last: u16) -> bool {
    first <= last && last < SLOTS
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn slots_of(ranges: &[(u16, u16)]) -> Vec<u16> {
        ranges.iter().flat_map(|&(lo, hi)| lo..=hi).collect()
    }

    proptest! {
        #[test]
        fn range_arithmetic_matches_sets(
            ranges in proptest::collection::vec((0u16..200, 0u16..20), 0..6),
            first in 0u16..220,
            len in 0u16..30,
        ) {
            let mut normal = Vec::new();
            for (lo, len) in ranges {
                normal = add_range(&normal, lo, lo + len);
            }
            let last = first + len;
            let mut expected: Vec<u16> = slots_of(&normal);
            let removed = remove_range(&normal, first, last);
            expected.retain(|s| !(first..=last).contains(s));
            prop_assert_eq!(slots_of(&removed), expected.clone());
            let added = add_range(&removed, first, last);
            expected.extend(first..=last);
            expected.sort_unstable();
            prop_assert_eq!(slots_of(&added), expected);
            // Normal form: sorted, not touching.
            for pair in added.windows(2) {
                prop_assert!(u32::from(pair[0].1) + 1 < u32::from(pair[1].0));
            }
        }
    }

    #[test]
    fn an_empty_configuration_has_no_routing_map() {
        assert!(ClusterConfig::default().routing_map().is_err());
        assert!(!ClusterConfig::default().is_bootstrapped());
    }
}
