//! The nodes, the network between them and the CPU cost of each message.

use std::ops::Range;

use ferry_control::Nanos;

use super::*;
use crate::error::ExperimentError;

/// Where a request's data lives: which storage nodes a function's requests go to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Sharding {
    /// Keys hash evenly over the storage nodes: each request's node is uniform over all.
    #[default]
    Hash,
    /// Pyxis §VI-F's skew: function i (0-based, in the workload's order) touches only the
    /// first i + 1 storage nodes, evenly, so the load on the nodes descends from the first.
    Staircase,
}

/// Per-message CPU costs, in nanoseconds of one core.
#[derive(Clone, Debug, PartialEq)]
pub struct CostModel {
    /// App CPU to handle one message: send an invoke or a get, or receive a response.
    pub app_msg_ns: u64,
    /// App CPU to start a function locally, on top of sending its first get.
    pub app_invoke_ns: u64,
    /// Storage CPU to handle one request message (get or invoke) and send its reply.
    pub storage_msg_ns: u64,
    /// Storage CPU to dispatch an invoke to its function.
    pub storage_invoke_ns: u64,
    /// Storage CPU for one table lookup.
    pub storage_get_ns: u64,
    /// App CPU per payload byte received (the objects of a local execution's reads): copying
    /// and decoding a 16 KiB object is not free where the stack is not zero-copy.
    pub app_byte_ns: f64,
    /// Storage CPU per payload byte sent (the objects a local execution reads).
    pub storage_byte_ns: f64,
    /// Bytes of a message without payload.
    pub header_bytes: u64,
    /// Multiplier on function compute when it runs on the storage node.
    pub storage_compute_factor: f64,
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel {
            app_msg_ns: APP_MSG_NS_DEFAULT,
            app_invoke_ns: APP_INVOKE_NS_DEFAULT,
            storage_msg_ns: STORAGE_MSG_NS_DEFAULT,
            storage_invoke_ns: STORAGE_INVOKE_NS_DEFAULT,
            storage_get_ns: STORAGE_GET_NS_DEFAULT,
            app_byte_ns: APP_BYTE_NS_DEFAULT,
            storage_byte_ns: STORAGE_BYTE_NS_DEFAULT,
            header_bytes: HEADER_BYTES_DEFAULT,
            storage_compute_factor: STORAGE_COMPUTE_FACTOR_DEFAULT,
        }
    }
}

impl CostModel {
    /// App CPU to receive an object of `bytes`, ns (rounded as the engine charges it).
    pub fn app_bytes_ns(&self, bytes: u64) -> u64 {
        (bytes as f64 * self.app_byte_ns).round() as u64
    }

    /// Storage CPU to send an object of `bytes`, ns (rounded as the engine charges it).
    pub fn storage_bytes_ns(&self, bytes: u64) -> u64 {
        (bytes as f64 * self.storage_byte_ns).round() as u64
    }
}

/// The nodes and the network between them.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterModel {
    /// App nodes (compute nodes): requests are spread over them in turn.
    pub app_nodes: u32,
    /// Storage nodes, over which the data is sharded.
    pub storage_nodes: u32,
    /// Cores of each app node (local execution, message handling).
    pub app_cores: u32,
    /// Cores of each storage node (gets, invokes, storage functions).
    pub storage_cores: u32,
    /// Which storage node each request's data lives on.
    pub sharding: Sharding,
    /// Placement groups (Pyxis §IV-E): the nodes split into this many groups, each with
    /// its own policy; at most one per storage node and one per app node.
    pub placement_groups: u32,
    /// Elastic compute (Pyxis §IV-D): the app cores each placement group runs with scale
    /// between these two (None: all of them, always).
    pub elastic: Option<(u32, u32)>,
    /// Round-trip propagation and stack latency of the network, excluding transfer time.
    pub rtt: Nanos,
    /// Bandwidth of each node's link to the switch, in Gb/s: a node sends one message at a
    /// time at this rate (so shipping data can saturate a storage node's link).
    pub bandwidth_gbps: f64,
    /// CPU costs.
    pub costs: CostModel,
    /// Rate of node-wide stalls per node, per second. A stall freezes every core of the node
    /// for a random time (interrupt storms, allocator or OS pauses; see `stall_length_cv`):
    /// without them, deterministic CPU costs keep p99 flat until ~99 % load (M/D/c), which no
    /// measured server shows. 0 disables them (queueing validation).
    pub stall_rate_hz: f64,
    /// Mean length of one stall.
    pub stall_mean: Nanos,
    /// Spread of the stalls' lengths, standard deviation over mean, in [0, 1]: 1 draws them
    /// exponential, less draws `mean (1 − cv) + an exponential of mean · cv` (0: all of the
    /// mean). A VM's scheduler stalls are far less variable than exponential (`ferry
    /// calibrate` measures it).
    pub stall_length_cv: f64,
}

impl Default for ClusterModel {
    fn default() -> Self {
        ClusterModel {
            app_nodes: 1,
            storage_nodes: 1,
            app_cores: CORES_DEFAULT,
            storage_cores: CORES_DEFAULT,
            sharding: Sharding::Hash,
            placement_groups: 1,
            elastic: None,
            rtt: RTT_DEFAULT,
            bandwidth_gbps: BANDWIDTH_GBPS_DEFAULT,
            costs: CostModel::default(),
            stall_rate_hz: STALL_RATE_HZ_DEFAULT,
            stall_mean: STALL_MEAN_DEFAULT,
            stall_length_cv: STALL_LENGTH_CV_DEFAULT,
        }
    }
}

impl ClusterModel {
    /// Rejects configurations the simulator does not support.
    pub fn validate(&self) -> Result<(), ExperimentError> {
        for (name, n) in [("--app-nodes", self.app_nodes), ("--storage-nodes", self.storage_nodes)] {
            if n == 0 || n > NODES_MAX {
                return Err(out_of_range(name, "[1, 1024]", n));
            }
        }
        if self.placement_groups == 0 || self.placement_groups > self.storage_nodes.min(self.app_nodes) {
            return Err(ExperimentError::Groups {
                groups: self.placement_groups,
                storage_nodes: self.storage_nodes,
                app_nodes: self.app_nodes,
            });
        }
        if let Some((min, max)) = self.elastic {
            // The smallest group's app cores bound every group's range.
            let limit = (0..self.placement_groups)
                .map(|g| self.group(g).app_cores_total())
                .min()
                .unwrap_or(0);
            if min == 0 || min > max || max > limit {
                return Err(ExperimentError::Elastic { min, max, limit });
            }
        }
        for (which, n) in [("--app-cores", self.app_cores), ("--storage-cores", self.storage_cores)] {
            if n == 0 || n > CORES_MAX {
                return Err(ExperimentError::Cores {
                    which,
                    value: n as i64,
                    max: CORES_MAX,
                });
            }
        }
        if self.rtt > RTT_MAX {
            return Err(out_of_range("--rtt", "[0, 1s]", self.rtt));
        }
        if self.bandwidth_gbps.is_nan() || self.bandwidth_gbps <= 0.0 {
            return Err(out_of_range("--bandwidth-gbps", "(0, inf]", self.bandwidth_gbps));
        }
        if self.stall_rate_hz.is_nan() || !(0.0..=STALL_RATE_HZ_MAX).contains(&self.stall_rate_hz) {
            return Err(out_of_range("stall rate", "[0, 100000] per second", self.stall_rate_hz));
        }
        if self.stall_mean > STALL_MEAN_MAX {
            return Err(out_of_range("stall mean", "[0, 10ms]", self.stall_mean));
        }
        if self.stall_length_cv.is_nan() || !(0.0..=1.0).contains(&self.stall_length_cv) {
            return Err(out_of_range("stall length cv", "[0, 1]", self.stall_length_cv));
        }
        let c = &self.costs;
        for (name, v) in [
            ("app message cost", c.app_msg_ns),
            ("app invoke cost", c.app_invoke_ns),
            ("storage message cost", c.storage_msg_ns),
            ("storage invoke cost", c.storage_invoke_ns),
            ("storage get cost", c.storage_get_ns),
        ] {
            if v > MSG_COST_MAX.0 {
                return Err(out_of_range(name, "[0, 10ms]", Nanos(v)));
            }
        }
        for (name, v) in [
            ("app byte cost", c.app_byte_ns),
            ("storage byte cost", c.storage_byte_ns),
        ] {
            if v.is_nan() || !(0.0..=BYTE_COST_NS_MAX).contains(&v) {
                return Err(out_of_range(name, "[0, 100] ns per byte", v));
            }
        }
        if c.storage_compute_factor.is_nan() || !(0.0..=STORAGE_COMPUTE_FACTOR_MAX).contains(&c.storage_compute_factor)
        {
            return Err(out_of_range(
                "storage compute factor",
                "[0, 100]",
                c.storage_compute_factor,
            ));
        }
        if c.header_bytes > OBJECT_BYTES_MAX {
            return Err(out_of_range("header bytes", "[0, 64MiB]", c.header_bytes));
        }
        Ok(())
    }

    /// App cores over all app nodes.
    pub fn app_cores_total(&self) -> u32 {
        self.app_nodes * self.app_cores
    }

    /// Storage cores over all storage nodes.
    pub fn storage_cores_total(&self) -> u32 {
        self.storage_nodes * self.storage_cores
    }

    /// How many storage nodes function `fn_idx`'s requests spread over (the first ones).
    pub fn storage_nodes_of(&self, fn_idx: usize) -> u32 {
        match self.sharding {
            Sharding::Hash => self.storage_nodes,
            Sharding::Staircase => (fn_idx as u32).saturating_add(1).min(self.storage_nodes),
        }
    }

    /// The cores of each side, as a placement policy's load model sees them: the whole
    /// cluster's, since requests spread over every node of a kind.
    pub fn capacity(&self) -> ferry_control::placement::load_model::Capacity {
        use ferry_control::placement::load_model::{Capacity, Links};
        Capacity {
            app_cores: self.app_cores_total() as f64,
            storage_cores: self.storage_cores_total() as f64,
            links: (!self.bandwidth_gbps.is_infinite()).then(|| Links {
                count: self.storage_nodes as f64,
                bytes_per_sec: self.link_bytes_per_sec(),
            }),
        }
    }

    /// Bytes per second one node's link sends.
    pub fn link_bytes_per_sec(&self) -> f64 {
        self.bandwidth_gbps * 1e9 / 8.0
    }

    /// The cluster's shape for reports: `8+8` for one node of each kind, `64x8+8x8` (nodes
    /// x cores per node) otherwise.
    pub fn shape(&self) -> String {
        if self.is_pair() {
            format!("{}+{}", self.app_cores, self.storage_cores)
        } else {
            format!(
                "{}x{}+{}x{}",
                self.app_nodes, self.app_cores, self.storage_nodes, self.storage_cores
            )
        }
    }

    /// Placement group `g`'s share of the cluster: its nodes, as one cluster of one group
    /// (what its policy's load model sees).
    pub fn group(&self, g: u32) -> ClusterModel {
        let count = |n| nodes_of_group(n, self.placement_groups, g).len() as u32;
        ClusterModel {
            app_nodes: count(self.app_nodes),
            storage_nodes: count(self.storage_nodes),
            placement_groups: 1,
            elastic: self.elastic,
            ..self.clone()
        }
    }

    /// Whether this is the classic pair: one app node and one storage node.
    pub fn is_pair(&self) -> bool {
        self.app_nodes == 1 && self.storage_nodes == 1
    }

    /// One-way delay of a message of `bytes`: half the RTT plus transfer time.
    pub fn one_way_ns(&self, bytes: u64) -> u64 {
        let transfer = if self.bandwidth_gbps.is_infinite() {
            0.0
        } else {
            bytes as f64 * 8.0 / self.bandwidth_gbps
        };
        self.rtt.0 / 2 + transfer.round() as u64
    }
}

/// Which of `count` nodes group `g` of `groups` holds: a contiguous, near-equal share.
pub fn nodes_of_group(count: u32, groups: u32, g: u32) -> Range<u32> {
    let (count, groups, g) = (u64::from(count), u64::from(groups), u64::from(g));
    (g * count / groups) as u32..((g + 1) * count / groups) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_split_the_nodes_contiguously() {
        assert_eq!(nodes_of_group(4, 1, 0), 0..4);
        assert_eq!(nodes_of_group(4, 4, 2), 2..3);
        assert_eq!(nodes_of_group(8, 3, 0), 0..2);
        assert_eq!(nodes_of_group(8, 3, 1), 2..5);
        assert_eq!(nodes_of_group(8, 3, 2), 5..8);
    }
}
