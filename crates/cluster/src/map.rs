//! The cluster map: which node serves which slots. Every process of a cluster reads the
//! same map (a TOML file):
//!
//! ```toml
//! [[node]]
//! id = "s1"
//! addr = "127.0.0.1:7701"
//! slots = ["0-8191"]
//!
//! [[node]]
//! id = "s2"
//! addr = "127.0.0.1:7702"
//! slots = ["8192-16383"]
//! ```
//!
//! A map is accepted only if every one of the 16,384 slots has exactly one owner.

use serde::{Deserialize, Serialize};

use crate::slot::{key_slot, SLOTS};

/// Most nodes in one map (Redis Cluster's own recommended ceiling).
pub const MAX_NODES: usize = 1_000;

/// Longest node id.
pub const MAX_NODE_ID_BYTES: usize = 64;

/// Whether `addr` is `HOST:PORT` with a non-empty host and a port above 0.
pub fn is_host_port(addr: &str) -> bool {
    addr.rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0))
}

/// One node of the map.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeEntry {
    /// Its name in the map and in `moved` answers.
    pub id: String,
    /// `host:port` clients reach it at.
    pub addr: String,
    /// The slot ranges it serves, inclusive, as written.
    pub slots: Vec<(u16, u16)>,
    /// `host:port` of its RESP listener, if it has one: what Redis clients are sent to by
    /// `-MOVED` and `CLUSTER SLOTS`.
    pub resp: Option<String>,
    /// `host:port` where its replicas pull its log, if it serves replication.
    #[serde(default)]
    pub replication: Option<String>,
}

/// Why a map was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MapError {
    /// The text is not TOML of the expected shape.
    #[error("cluster map: {0}")]
    Syntax(String),
    /// A node entry is malformed.
    #[error("cluster map, node {node:?}: {why}")]
    Node {
        /// The node's id (or its position, when the id itself is the problem).
        node: String,
        /// What is wrong.
        why: String,
    },
    /// A slot served by two nodes.
    #[error("cluster map: slot {slot} is served by both {first:?} and {second:?}")]
    Overlap {
        /// The slot.
        slot: u16,
        /// One owner.
        first: String,
        /// The other.
        second: String,
    },
    /// Slots no node serves.
    #[error("cluster map: slots {from}-{to} are served by no node")]
    Uncovered {
        /// First uncovered slot of the first gap.
        from: u16,
        /// Last slot of that gap.
        to: u16,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MapFile {
    #[serde(default, rename = "node")]
    nodes: Vec<NodeFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeFile {
    id: String,
    addr: String,
    slots: Vec<String>,
    #[serde(default)]
    resp: Option<String>,
    #[serde(default)]
    replication: Option<String>,
}

/// Keys that live on more than one node (Redis's CROSSSLOT).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the keys live on different nodes ({first} and {second}); use {{hash tags}} to keep them together")]
pub struct Spread {
    /// The first key's node.
    pub first: String,
    /// Another key's node.
    pub second: String,
}

/// A checked cluster map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterMap {
    /// The configuration epoch it belongs to (0 for a map read from a file).
    epoch: u64,
    nodes: Vec<NodeEntry>,
    /// Slot → index into `nodes`.
    owner: Vec<u16>,
}

fn parse_range(text: &str) -> Option<(u16, u16)> {
    let (lo, hi) = match text.split_once('-') {
        Some((lo, hi)) => (lo.trim().parse().ok()?, hi.trim().parse().ok()?),
        None => {
            let slot = text.trim().parse().ok()?;
            (slot, slot)
        }
    };
    (lo <= hi && hi < SLOTS).then_some((lo, hi))
}

impl ClusterMap {
    /// Parses and checks a map's text.
    pub fn parse(text: &str) -> Result<ClusterMap, MapError> {
        let file: MapFile = toml::from_str(text).map_err(|err| MapError::Syntax(err.to_string()))?;
        let nodes = file
            .nodes
            .into_iter()
            .map(|node| {
                let bad = |why: String| MapError::Node {
                    node: node.id.clone(),
                    why,
                };
                let slots = node
                    .slots
                    .iter()
                    .map(|range| {
                        parse_range(range)
                            .ok_or_else(|| bad(format!("slot range {range:?} is not N or N-M with N ≤ M < {SLOTS}")))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(NodeEntry {
                    id: node.id.clone(),
                    addr: node.addr.clone(),
                    slots,
                    resp: node.resp.clone(),
                    replication: node.replication.clone(),
                })
            })
            .collect::<Result<Vec<_>, MapError>>()?;
        ClusterMap::new(nodes)
    }

    /// Checks a map given as values.
    pub fn new(nodes: Vec<NodeEntry>) -> Result<ClusterMap, MapError> {
        if nodes.is_empty() || nodes.len() > MAX_NODES {
            return Err(MapError::Syntax(format!(
                "a map has 1 to {MAX_NODES} nodes, not {}",
                nodes.len()
            )));
        }
        const NOBODY: u16 = u16::MAX;
        let mut owner = vec![NOBODY; usize::from(SLOTS)];
        for (index, node) in nodes.iter().enumerate() {
            let bad = |why: &str| MapError::Node {
                node: if node.id.is_empty() {
                    format!("#{index}")
                } else {
                    node.id.clone()
                },
                why: why.to_string(),
            };
            if node.id.is_empty() || node.id.len() > MAX_NODE_ID_BYTES || node.id.chars().any(char::is_whitespace) {
                return Err(bad("the id must be 1 to 64 bytes without spaces"));
            }
            if nodes[..index].iter().any(|other| other.id == node.id) {
                return Err(bad("the id is used twice"));
            }
            let host_port = is_host_port;
            if !host_port(&node.addr) {
                return Err(bad("addr must be HOST:PORT"));
            }
            if node.resp.as_deref().is_some_and(|resp| !host_port(resp)) {
                return Err(bad("resp must be HOST:PORT"));
            }
            if node.replication.as_deref().is_some_and(|addr| !host_port(addr)) {
                return Err(bad("replication must be HOST:PORT"));
            }
            for &(lo, hi) in &node.slots {
                if lo > hi || hi >= SLOTS {
                    return Err(bad("a slot range is out of order or past the last slot"));
                }
                for slot in lo..=hi {
                    let held = &mut owner[usize::from(slot)];
                    if *held != NOBODY {
                        return Err(MapError::Overlap {
                            slot,
                            first: nodes[usize::from(*held)].id.clone(),
                            second: node.id.clone(),
                        });
                    }
                    *held = index as u16;
                }
            }
        }
        if let Some(from) = owner.iter().position(|&o| o == NOBODY) {
            let to = owner[from..]
                .iter()
                .position(|&o| o != NOBODY)
                .map_or(SLOTS - 1, |len| (from + len - 1) as u16);
            return Err(MapError::Uncovered { from: from as u16, to });
        }
        Ok(ClusterMap { epoch: 0, nodes, owner })
    }

    /// The map as the configuration at `epoch` gives it.
    pub fn with_epoch(mut self, epoch: u64) -> ClusterMap {
        self.epoch = epoch;
        self
    }

    /// The configuration epoch this map belongs to: a map with a higher epoch is newer
    /// (0 for a map read from a file, which never changes).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The nodes, in the order of the map.
    pub fn nodes(&self) -> &[NodeEntry] {
        &self.nodes
    }

    /// The node serving `slot` (which must be below [`SLOTS`]).
    pub fn owner_of_slot(&self, slot: u16) -> &NodeEntry {
        &self.nodes[usize::from(self.owner[usize::from(slot % SLOTS)])]
    }

    /// The node serving `key`.
    pub fn owner(&self, key: &[u8]) -> &NodeEntry {
        self.owner_of_slot(key_slot(key))
    }

    /// The one node serving every key of `keys` (`None` for no keys), or the two nodes
    /// that show they span several.
    pub fn single_owner<'k>(&self, keys: impl IntoIterator<Item = &'k [u8]>) -> Result<Option<&NodeEntry>, Spread> {
        let mut owner: Option<&NodeEntry> = None;
        for key in keys {
            let this = self.owner(key);
            match owner {
                None => owner = Some(this),
                Some(first) if first.id != this.id => {
                    return Err(Spread {
                        first: first.id.clone(),
                        second: this.id.clone(),
                    })
                }
                Some(_) => {}
            }
        }
        Ok(owner)
    }

    /// The node named `id`.
    pub fn node(&self, id: &str) -> Option<&NodeEntry> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// The map in the file format [`ClusterMap::parse`] reads.
    pub fn to_toml(&self) -> String {
        let mut out = String::new();
        for node in &self.nodes {
            let ranges: Vec<String> = node.slots.iter().map(|(lo, hi)| format!("\"{lo}-{hi}\"")).collect();
            out.push_str(&format!(
                "[[node]]\nid = {:?}\naddr = {:?}\nslots = [{}]\n",
                node.id,
                node.addr,
                ranges.join(", ")
            ));
            if let Some(resp) = &node.resp {
                out.push_str(&format!("resp = {resp:?}\n"));
            }
            if let Some(replication) = &node.replication {
                out.push_str(&format!("replication = {replication:?}\n"));
            }
            out.push('\n');
        }
        out
    }

    /// A map of `addrs.len()` nodes named `s1`, `s2`, … splitting the slots into equal
    /// contiguous ranges (what `ferry cluster up` writes).
    pub fn even(addrs: &[String]) -> Result<ClusterMap, MapError> {
        let n = addrs.len().max(1) as u32;
        let nodes = addrs
            .iter()
            .enumerate()
            .map(|(i, addr)| {
                let lo = (u32::from(SLOTS) * i as u32 / n) as u16;
                let hi = (u32::from(SLOTS) * (i as u32 + 1) / n - 1) as u16;
                NodeEntry {
                    id: format!("s{}", i + 1),
                    addr: addr.clone(),
                    slots: vec![(lo, hi)],
                    resp: None,
                    replication: None,
                }
            })
            .collect();
        ClusterMap::new(nodes)
    }
}
