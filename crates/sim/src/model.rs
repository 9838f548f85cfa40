//! What is simulated: the cluster (cores, network, per-message CPU costs) and the workload
//! (functions with accesses, object size, compute per access, mix fraction; phases).
//!
//! Also the closed-form facts the rest of the crate needs about a model: mean CPU cost per
//! request on each side, the capacity at a given X, and the unloaded latency of each path.

use ferry_control::placement::mix::{split, Slice, Slicing};
use ferry_control::{Nanos, Placement};

use crate::error::SimError;

/// Largest supported core count per node: the simulator scans cores linearly per job.
pub const CORES_MAX: u32 = 256;

/// Largest supported storage accesses per function (depth of a traversal).
pub const ACCESSES_MAX: u32 = 1024;

/// Largest supported object size: 64 MiB, beyond any single get a storage node serves.
pub const OBJECT_BYTES_MAX: u64 = 64 << 20;

/// Largest supported compute per access: 1 s, far beyond any microsecond-scale function.
pub const COMPUTE_MAX: Nanos = Nanos::from_secs(1);

/// Largest supported round-trip time: 1 s (a WAN link is ~100 ms).
pub const RTT_MAX: Nanos = Nanos::from_secs(1);

/// Largest supported per-message CPU cost: 10 ms.
pub const MSG_COST_MAX: Nanos = Nanos::from_ms(10);

/// Most functions one workload may mix (each gets its own `FnId`).
pub const FUNCTIONS_MAX: usize = 256;

/// Most phases one workload may cycle through.
pub const PHASES_MAX: usize = 64;

/// Default app-node CPU per message handled (receive one message, send the next): RPC
/// endpoint and client-side KV stack cost on the Kayak testbed scale (see SIMULATION.md).
pub const APP_MSG_NS_DEFAULT: u64 = 300;

/// Default app-node CPU to start a function locally (context, read/write set setup).
pub const APP_INVOKE_NS_DEFAULT: u64 = 200;

/// Default storage-node CPU per request message handled (receive, parse, reply): the
/// dominant per-request cost of a kernel-bypass KV server at ~1 Mops per core.
pub const STORAGE_MSG_NS_DEFAULT: u64 = 1_000;

/// Default storage-node CPU to dispatch an invocation to a storage function.
pub const STORAGE_INVOKE_NS_DEFAULT: u64 = 600;

/// Default storage-node CPU per table lookup, whether it comes from a get or a function.
pub const STORAGE_GET_NS_DEFAULT: u64 = 100;

/// Default slowdown of function compute on the storage node relative to the app node.
/// Storage cores also poll the NIC and serve gets, and function code and the store's index
/// evict each other from the caches; Kayak's §6.3 finds X* = 0.4 on equal 4 + 4 cores, which
/// needs storage-side compute to cost more than app-side compute. 1.25 reproduces it.
pub const STORAGE_COMPUTE_FACTOR_DEFAULT: f64 = 1.25;

/// Largest accepted storage compute factor.
pub const STORAGE_COMPUTE_FACTOR_MAX: f64 = 100.0;

/// Default bytes of a message without payload (framing, key, status).
pub const HEADER_BYTES_DEFAULT: u64 = 64;

/// Default object size read per access: small graph nodes, as in the paper's traversal.
pub const OBJECT_BYTES_DEFAULT: u64 = 128;

/// Default link bandwidth: the 25 Gb/s NICs of the Kayak testbed.
pub const BANDWIDTH_GBPS_DEFAULT: f64 = 25.0;

/// Default round-trip time: 10 µs (the Kayak testbed measured 9.2 µs).
pub const RTT_DEFAULT: Nanos = Nanos::from_us(10);

/// Default rate of node-wide stalls ("hiccups") per node. See [`ClusterConfig::stall_rate_hz`].
pub const STALL_RATE_HZ_DEFAULT: f64 = 5_000.0;

/// Default mean length of one stall.
pub const STALL_MEAN_DEFAULT: Nanos = Nanos::from_us(16);

/// Largest supported stall rate: 10⁵/s, beyond which a node would be stalled most of the time.
pub const STALL_RATE_HZ_MAX: f64 = 1e5;

/// Largest supported mean stall: 10 ms.
pub const STALL_MEAN_MAX: Nanos = Nanos::from_ms(10);

/// Default cores per node: the paper's 8-core configuration.
pub const CORES_DEFAULT: u32 = 8;

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
            header_bytes: HEADER_BYTES_DEFAULT,
            storage_compute_factor: STORAGE_COMPUTE_FACTOR_DEFAULT,
        }
    }
}

/// The two nodes and the network between them.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterConfig {
    /// Cores of the app node (local execution, message handling).
    pub app_cores: u32,
    /// Cores of the storage node (gets, invokes, storage functions).
    pub storage_cores: u32,
    /// Round-trip propagation and stack latency of the network, excluding transfer time.
    pub rtt: Nanos,
    /// Link bandwidth in Gb/s; each message is delayed by its size over this bandwidth.
    pub bandwidth_gbps: f64,
    /// CPU costs.
    pub costs: CostModel,
    /// Rate of node-wide stalls per node, per second. A stall freezes every core of the node
    /// for an exponentially distributed time (interrupt storms, allocator or OS pauses):
    /// without them, deterministic CPU costs keep p99 flat until ~99 % load (M/D/c), which no
    /// measured server shows. 0 disables them (queueing validation).
    pub stall_rate_hz: f64,
    /// Mean length of one stall.
    pub stall_mean: Nanos,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            app_cores: CORES_DEFAULT,
            storage_cores: CORES_DEFAULT,
            rtt: RTT_DEFAULT,
            bandwidth_gbps: BANDWIDTH_GBPS_DEFAULT,
            costs: CostModel::default(),
            stall_rate_hz: STALL_RATE_HZ_DEFAULT,
            stall_mean: STALL_MEAN_DEFAULT,
        }
    }
}

fn out_of_range(name: &str, range: &'static str, value: impl ToString) -> SimError {
    SimError::OutOfRange {
        name: name.to_string(),
        range,
        value: value.to_string(),
    }
}

impl ClusterConfig {
    /// Rejects configurations the simulator does not support.
    pub fn validate(&self) -> Result<(), SimError> {
        for (which, n) in [("--app-cores", self.app_cores), ("--storage-cores", self.storage_cores)] {
            if n == 0 || n > CORES_MAX {
                return Err(SimError::Cores {
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

    /// The cores of each side, as a placement policy's load model sees them.
    pub fn capacity(&self) -> ferry_control::placement::load_model::Capacity {
        ferry_control::placement::load_model::Capacity {
            app_cores: self.app_cores as f64,
            storage_cores: self.storage_cores as f64,
        }
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

/// How the compute after each access is distributed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ComputeDist {
    /// Exactly the configured time (the paper's calibrated busy-wait).
    Fixed,
    /// Exponential with the configured mean (for M/M/c validation).
    Exp,
}

/// Which real storage function a workload function stands for, so the real-system benchmark
/// runs what the simulator models.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FunctionKind {
    /// `traverse`: pointer chasing through a graph of nodes.
    Traverse,
    /// `ycsbt` read of one of `accounts` accounts (Zipfian).
    YcsbtRead {
        /// Accounts in the table.
        accounts: u64,
    },
    /// `ycsbt` transfer between two of `accounts` accounts (Zipfian).
    YcsbtTransfer {
        /// Accounts in the table.
        accounts: u64,
    },
}

/// One storage function of the workload (Pyxis' task: accesses, object size, computation).
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionSpec {
    /// Name in reports (`light`, `traverse`, ...).
    pub name: String,
    /// What it runs on the real system.
    pub kind: FunctionKind,
    /// Storage accesses (reads) per invocation (traversal depth).
    pub accesses: u32,
    /// Objects written per invocation: a local execution that writes pays one more round
    /// trip (the OCC commit), the storage node one install per object.
    pub writes: u32,
    /// Bytes of each object read.
    pub object_bytes: u64,
    /// Compute after each access.
    pub compute: Nanos,
    /// Distribution of that compute.
    pub dist: ComputeDist,
}

impl FunctionSpec {
    /// A graph traversal of `depth` accesses with `compute` after each (Kayak §2).
    pub fn traverse(name: &str, depth: u32, compute: Nanos) -> Self {
        FunctionSpec {
            name: name.to_string(),
            kind: FunctionKind::Traverse,
            accesses: depth,
            writes: 0,
            object_bytes: OBJECT_BYTES_DEFAULT,
            compute,
            dist: ComputeDist::Fixed,
        }
    }

    /// Storage round trips of a local execution: one per read, plus the commit if it writes.
    pub fn local_round_trips(&self) -> u32 {
        self.accesses + u32::from(self.writes > 0)
    }

    /// Rejects functions outside the supported ranges.
    pub fn validate(&self) -> Result<(), SimError> {
        if self.accesses == 0 || self.accesses > ACCESSES_MAX {
            return Err(out_of_range("depth", "[1, 1024]", self.accesses));
        }
        if self.writes > ACCESSES_MAX {
            return Err(out_of_range("writes", "[0, 1024]", self.writes));
        }
        if self.object_bytes > OBJECT_BYTES_MAX {
            return Err(out_of_range("size", "[0, 64MiB]", self.object_bytes));
        }
        if self.compute > COMPUTE_MAX {
            return Err(out_of_range("compute", "[0, 1s]", self.compute));
        }
        Ok(())
    }

    /// Mean app-node CPU per request placed this way.
    pub fn app_cost_ns(&self, c: &CostModel, p: Placement) -> f64 {
        let d = self.accesses as f64;
        match p {
            Placement::Remote => 2.0 * c.app_msg_ns as f64,
            Placement::Local => {
                let commit = f64::from(u32::from(self.writes > 0));
                (c.app_invoke_ns + c.app_msg_ns) as f64
                    + d * (c.app_msg_ns as f64 + self.compute.0 as f64)
                    + commit * c.app_msg_ns as f64
            }
        }
    }

    /// Mean storage-node CPU per request placed this way.
    pub fn storage_cost_ns(&self, c: &CostModel, p: Placement) -> f64 {
        let d = self.accesses as f64;
        match p {
            Placement::Remote => {
                (c.storage_msg_ns + c.storage_invoke_ns) as f64
                    + d * (c.storage_get_ns as f64 + c.storage_compute_factor * self.compute.0 as f64)
                    + self.writes as f64 * c.storage_get_ns as f64
            }
            Placement::Local => {
                self.local_round_trips() as f64 * (c.storage_msg_ns + c.storage_get_ns) as f64
                    + self.writes as f64 * c.storage_get_ns as f64
            }
        }
    }

    /// Latency of one request placed this way on an idle cluster (mean compute).
    pub fn no_load_latency_ns(&self, cl: &ClusterConfig, p: Placement) -> f64 {
        let c = &cl.costs;
        let h = c.header_bytes;
        match p {
            Placement::Remote => {
                2.0 * c.app_msg_ns as f64 + 2.0 * cl.one_way_ns(h) as f64 + self.storage_cost_ns(c, Placement::Remote)
            }
            Placement::Local => {
                let per_access = (cl.one_way_ns(h) + cl.one_way_ns(h + self.object_bytes)) as f64
                    + (c.storage_msg_ns + c.storage_get_ns) as f64;
                self.app_cost_ns(c, Placement::Local) + self.local_round_trips() as f64 * per_access
            }
        }
    }
}

/// One phase of a workload: which functions run, in which proportions.
#[derive(Clone, Debug, PartialEq)]
pub struct PhaseMix {
    /// (index into `Workload::functions`, weight), weights normalised to sum 1.
    pub entries: Vec<(usize, f64)>,
}

/// The requests the backlog holds: a mix of functions, possibly alternating phases.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    /// The spec it was parsed from, for reports.
    pub label: String,
    /// Every function that appears in any phase; the index is its `FnId`.
    pub functions: Vec<FunctionSpec>,
    /// The phases, cycled through in order.
    pub phases: Vec<PhaseMix>,
    /// How long each phase lasts (irrelevant with one phase).
    pub phase_period: Nanos,
}

impl Workload {
    /// A workload of one function.
    pub fn single(label: &str, f: FunctionSpec) -> Self {
        Workload {
            label: label.to_string(),
            functions: vec![f],
            phases: vec![PhaseMix {
                entries: vec![(0, 1.0)],
            }],
            phase_period: Nanos::MAX,
        }
    }

    /// Rejects workloads outside the supported ranges.
    pub fn validate(&self) -> Result<(), SimError> {
        if self.functions.is_empty() || self.functions.len() > FUNCTIONS_MAX {
            return Err(out_of_range("functions", "[1, 256]", self.functions.len()));
        }
        if self.phases.is_empty() || self.phases.len() > PHASES_MAX {
            return Err(out_of_range("phases", "[1, 64]", self.phases.len()));
        }
        for f in &self.functions {
            f.validate()?;
        }
        for p in &self.phases {
            let total: f64 = p.entries.iter().map(|e| e.1).sum();
            if p.entries.is_empty()
                || (total - 1.0).abs() > 1e-6
                || p.entries
                    .iter()
                    .any(|&(i, w)| i >= self.functions.len() || w.is_nan() || w <= 0.0)
            {
                return Err(out_of_range("mix weights", "positive, summing to 1", total));
            }
        }
        if self.phases.len() > 1 && self.phase_period == Nanos::ZERO {
            return Err(out_of_range("period", "(0, inf)", self.phase_period));
        }
        Ok(())
    }

    /// Which phase is active at `t`.
    pub fn phase_at(&self, t: Nanos) -> usize {
        if self.phases.len() == 1 {
            0
        } else {
            ((t.0 / self.phase_period.0) % self.phases.len() as u64) as usize
        }
    }

    /// A workload holding only phase `i` (for per-phase sweeps and capacities).
    pub fn phase_only(&self, i: usize) -> Workload {
        Workload {
            label: format!("{} (phase {})", self.label, i),
            functions: self.functions.clone(),
            phases: vec![self.phases[i].clone()],
            phase_period: Nanos::MAX,
        }
    }

    /// Mean (app, storage) CPU per request of phase `phase` at RPC fraction `x`.
    pub fn mean_costs_ns(&self, cl: &ClusterConfig, phase: usize, x: f64) -> (f64, f64) {
        self.mean_costs_split_ns(cl, phase, &vec![x; self.functions.len()])
    }

    /// Mean (app, storage) CPU per request of phase `phase` when function i sends the
    /// share `split[i]` remote.
    pub fn mean_costs_split_ns(&self, cl: &ClusterConfig, phase: usize, split: &[f64]) -> (f64, f64) {
        let c = &cl.costs;
        self.phases[phase].entries.iter().fold((0.0, 0.0), |(a, s), &(i, w)| {
            let f = &self.functions[i];
            let x = split[i];
            (
                a + w * (x * f.app_cost_ns(c, Placement::Remote) + (1.0 - x) * f.app_cost_ns(c, Placement::Local)),
                s + w
                    * (x * f.storage_cost_ns(c, Placement::Remote)
                        + (1.0 - x) * f.storage_cost_ns(c, Placement::Local)),
            )
        })
    }

    /// Throughput at which one node's cores are fully busy in phase `phase` at fraction `x`.
    pub fn capacity_ops(&self, cl: &ClusterConfig, phase: usize, x: f64) -> f64 {
        self.capacity_split_ops(cl, phase, &vec![x; self.functions.len()])
    }

    /// Each function's share sent remote at Pyxis' turning point `alpha` over phase
    /// `phase`, the functions ordered by their exact costs and α cut by their shares (so α
    /// is the share of requests sent remote): what `balance` learns to do, with nothing
    /// left to learn.
    pub fn turning_point_split(&self, cl: &ClusterConfig, phase: usize, alpha: f64) -> Vec<f64> {
        let c = &cl.costs;
        let mut slices: Vec<Slice> = self
            .functions
            .iter()
            .map(|f| Slice {
                share: 0.0,
                app_saved_ns: f.app_cost_ns(c, Placement::Local) - f.app_cost_ns(c, Placement::Remote),
                storage_added_ns: f.storage_cost_ns(c, Placement::Remote) - f.storage_cost_ns(c, Placement::Local),
                known: true,
            })
            .collect();
        for &(i, w) in &self.phases[phase].entries {
            slices[i].share += w;
        }
        split(&slices, Slicing::Share, alpha)
    }

    /// Throughput at which one node's cores are fully busy in phase `phase` when function
    /// i sends the share `split[i]` remote.
    pub fn capacity_split_ops(&self, cl: &ClusterConfig, phase: usize, split: &[f64]) -> f64 {
        let (a, s) = self.mean_costs_split_ns(cl, phase, split);
        let app = if a > 0.0 {
            cl.app_cores as f64 * 1e9 / a
        } else {
            f64::INFINITY
        };
        let sto = if s > 0.0 {
            cl.storage_cores as f64 * 1e9 / s
        } else {
            f64::INFINITY
        };
        app.min(sto)
    }

    /// Worst unloaded latency over all functions of all phases for a placement.
    pub fn no_load_latency_ns(&self, cl: &ClusterConfig, p: Placement) -> f64 {
        self.functions
            .iter()
            .map(|f| f.no_load_latency_ns(cl, p))
            .fold(0.0, f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_follow_the_paths() {
        let cl = ClusterConfig::default();
        let f = FunctionSpec::traverse("medium", 2, Nanos::from_us(1));
        let c = &cl.costs;
        // Remote: two app messages; storage: message + invoke + 2 × (get + 1.25 × 1 µs).
        assert_eq!(f.app_cost_ns(c, Placement::Remote), 600.0);
        assert_eq!(f.storage_cost_ns(c, Placement::Remote), 1_600.0 + 2.0 * 1_350.0);
        // Local: invoke + msg + 2 × (msg + 1 µs); storage: 2 × (msg + get).
        assert_eq!(f.app_cost_ns(c, Placement::Local), 500.0 + 2.0 * 1_300.0);
        assert_eq!(f.storage_cost_ns(c, Placement::Local), 2_200.0);
        // Unloaded: local pays two round trips, remote one.
        let remote = f.no_load_latency_ns(&cl, Placement::Remote);
        let local = f.no_load_latency_ns(&cl, Placement::Local);
        assert!(remote > 10_000.0 && remote < 20_000.0, "{remote}");
        assert!(local > 20_000.0 && local < 35_000.0, "{local}");
    }

    #[test]
    fn capacity_is_the_tighter_node() {
        let cl = ClusterConfig::default();
        let w = Workload::single("light", FunctionSpec::traverse("light", 2, Nanos(100)));
        // X = 1: storage-bound at 8 cores / 2.05 µs.
        assert!((w.capacity_ops(&cl, 0, 1.0) - 8e9 / 2_050.0).abs() < 1.0);
        assert!(w.validate().is_ok());
        let mut bad = w.clone();
        bad.functions[0].accesses = 0;
        assert!(bad.validate().is_err());
    }

    #[test]
    fn the_turning_point_sends_the_cheaper_remote_function_first_and_alpha_is_the_remote_share() {
        let cl = ClusterConfig::default();
        // Pyxis' polarized pair: I/O-bound A (remote cheaper on both sides here) at 20 %,
        // compute-bound B at 80 %.
        let w = crate::spec::parse_workload(
            "task:accesses=4,size=49152,compute=50ns@0.2+task:accesses=1,size=64,compute=50us@0.8",
        )
        .unwrap();
        assert_eq!(w.turning_point_split(&cl, 0, 0.1), vec![0.5, 0.0]);
        let at = w.turning_point_split(&cl, 0, 0.6);
        assert_eq!(at[0], 1.0);
        assert!((at[1] - 0.5).abs() < 1e-12, "{at:?}");
        // One function: the turning point is X.
        let one = Workload::single("heavy", FunctionSpec::traverse("heavy", 2, Nanos::from_us(10)));
        assert_eq!(one.turning_point_split(&cl, 0, 0.37), vec![0.37]);
        assert_eq!(one.capacity_split_ops(&cl, 0, &[0.37]), one.capacity_ops(&cl, 0, 0.37));
    }
}
