//! The workload: functions (Pyxis' tasks), their mixes and phases, and the closed-form
//! costs and capacities of placing them.

use ferry_control::placement::mix::{split, Slice, Slicing};
use ferry_control::{Nanos, Placement};

use super::*;
use crate::error::ExperimentError;

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
    /// One of the social application's functions on a graph of `vertices` vertices
    /// (uniformly chosen).
    Social {
        /// Which function.
        op: SocialOp,
        /// Vertices in the graph.
        vertices: u64,
    },
}

/// The social application's functions (Pyxis §VI-C).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SocialOp {
    /// Aggregation over one vertex's vectors: IO-heavy, compute-light.
    AggrV,
    /// Nearest neighbours by embedding distance: IO-heavy, compute-heavy.
    TopK,
    /// Aggregation over one vertex's scalars: IO-light, compute-light.
    AggrS,
    /// scrypt password check: IO-light, compute-heavy.
    Auth,
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
    /// This function's own latency SLO (None: the experiment's one SLO).
    pub slo: Option<Nanos>,
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
            slo: None,
        }
    }

    /// Storage round trips of a local execution: one per read, plus the commit if it writes.
    pub fn local_round_trips(&self) -> u32 {
        self.accesses + u32::from(self.writes > 0)
    }

    /// Rejects functions outside the supported ranges.
    pub fn validate(&self) -> Result<(), ExperimentError> {
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
                    + d * c.app_bytes_ns(self.object_bytes) as f64
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
                    + d * c.storage_bytes_ns(self.object_bytes) as f64
            }
        }
    }

    /// Bytes per request placed this way that (the app node, the storage node) sends: the
    /// app side sends a header per request message, the storage side a header per reply
    /// and the objects a local execution reads.
    pub fn sent_bytes(&self, c: &CostModel, p: Placement) -> (f64, f64) {
        let h = c.header_bytes as f64;
        match p {
            Placement::Remote => (h, h),
            Placement::Local => {
                let trips = self.local_round_trips() as f64;
                (trips * h, trips * h + self.accesses as f64 * self.object_bytes as f64)
            }
        }
    }

    /// Latency of one request placed this way on an idle cluster (mean compute).
    pub fn no_load_latency_ns(&self, cl: &ClusterModel, p: Placement) -> f64 {
        let c = &cl.costs;
        let h = c.header_bytes;
        match p {
            Placement::Remote => {
                2.0 * c.app_msg_ns as f64 + 2.0 * cl.one_way_ns(h) as f64 + self.storage_cost_ns(c, Placement::Remote)
            }
            Placement::Local => {
                let per_access = (cl.one_way_ns(h) + cl.one_way_ns(h + self.object_bytes)) as f64
                    + (c.storage_msg_ns + c.storage_get_ns) as f64;
                self.app_cost_ns(c, Placement::Local)
                    + self.local_round_trips() as f64 * per_access
                    + self.accesses as f64 * c.storage_bytes_ns(self.object_bytes) as f64
            }
        }
    }
}

/// The least service time a slowdown SLO is taken over: Pyxis (§VI, note 5) uses 5 µs for
/// tasks whose mean service time is below it, whose tails are hard to bound.
pub const SLOWDOWN_FLOOR: Nanos = Nanos::from_us(5);

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
    /// The demand offered (None: a saturating backlog, the limiter alone sets the load).
    pub demand: Option<crate::scaling::Demand>,
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
            demand: None,
        }
    }

    /// Rejects workloads outside the supported ranges.
    pub fn validate(&self) -> Result<(), ExperimentError> {
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
            demand: self.demand.clone(),
        }
    }

    /// Mean (app, storage) CPU per request of phase `phase` at RPC fraction `x`.
    pub fn mean_costs_ns(&self, cl: &ClusterModel, phase: usize, x: f64) -> (f64, f64) {
        self.mean_costs_split_ns(cl, phase, &vec![x; self.functions.len()])
    }

    /// Mean (app, storage) CPU per request of phase `phase` when function i sends the
    /// share `split[i]` remote.
    pub fn mean_costs_split_ns(&self, cl: &ClusterModel, phase: usize, split: &[f64]) -> (f64, f64) {
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
    pub fn capacity_ops(&self, cl: &ClusterModel, phase: usize, x: f64) -> f64 {
        self.capacity_split_ops(cl, phase, &vec![x; self.functions.len()])
    }

    /// Each function's share sent remote at Pyxis' turning point `alpha` over phase
    /// `phase`, the functions ordered by their exact costs and α cut by their shares (so α
    /// is the share of requests sent remote): what `balance` learns to do, with nothing
    /// left to learn.
    pub fn turning_point_split(&self, cl: &ClusterModel, phase: usize, alpha: f64) -> Vec<f64> {
        let c = &cl.costs;
        let per_byte = cl.capacity().app_ns_per_byte();
        let bytes = |f: &FunctionSpec, p| {
            let (app, storage) = f.sent_bytes(c, p);
            app + storage
        };
        let mut slices: Vec<Slice> = self
            .functions
            .iter()
            .map(|f| Slice {
                share: 0.0,
                app_saved_ns: f.app_cost_ns(c, Placement::Local) - f.app_cost_ns(c, Placement::Remote)
                    + per_byte * (bytes(f, Placement::Local) - bytes(f, Placement::Remote)),
                storage_added_ns: f.storage_cost_ns(c, Placement::Remote) - f.storage_cost_ns(c, Placement::Local),
                known: true,
            })
            .collect();
        for &(i, w) in &self.phases[phase].entries {
            slices[i].share += w;
        }
        split(&slices, Slicing::Share, alpha)
    }

    /// Mean bytes per request (the app nodes send, the storage nodes send) of phase
    /// `phase` when function i sends the share `split[i]` remote.
    pub fn mean_sent_bytes_split(&self, cl: &ClusterModel, phase: usize, split: &[f64]) -> (f64, f64) {
        let c = &cl.costs;
        self.phases[phase].entries.iter().fold((0.0, 0.0), |(a, s), &(i, w)| {
            let f = &self.functions[i];
            let x = split[i];
            let (ra, rs) = f.sent_bytes(c, Placement::Remote);
            let (la, ls) = f.sent_bytes(c, Placement::Local);
            (a + w * (x * ra + (1.0 - x) * la), s + w * (x * rs + (1.0 - x) * ls))
        })
    }

    /// Throughput at which the busiest resource (the app cores, the storage cores, the
    /// app nodes' links or the storage nodes' links, data spread evenly) is fully busy in
    /// phase `phase` when function i sends the share `split[i]` remote: an upper bound on
    /// any rate that meets an SLO.
    pub fn capacity_split_ops(&self, cl: &ClusterModel, phase: usize, split: &[f64]) -> f64 {
        let (sent_app, sent_storage) = self.mean_sent_bytes_split(cl, phase, split);
        let link = |nodes: u32, bytes: f64| {
            if bytes > 0.0 && !cl.bandwidth_gbps.is_infinite() {
                nodes as f64 * cl.link_bytes_per_sec() / bytes
            } else {
                f64::INFINITY
            }
        };
        let links = link(cl.app_nodes, sent_app).min(link(cl.storage_nodes, sent_storage));
        let (a, s) = self.mean_costs_split_ns(cl, phase, split);
        let app = if a > 0.0 {
            cl.app_cores_total() as f64 * 1e9 / a
        } else {
            f64::INFINITY
        };
        let sto = if s > 0.0 {
            cl.storage_cores_total() as f64 * 1e9 / s
        } else {
            f64::INFINITY
        };
        app.min(sto).min(links)
    }

    /// Gives each function the SLO `k` times its service time (Pyxis §VI's slowdown SLO):
    /// its mean unloaded latency on the faster placement, at least [`SLOWDOWN_FLOOR`].
    pub fn set_slowdown_slo(&mut self, cl: &ClusterModel, k: f64) {
        for f in &mut self.functions {
            let service = [Placement::Local, Placement::Remote]
                .into_iter()
                .map(|p| f.no_load_latency_ns(cl, p))
                .fold(f64::INFINITY, f64::min)
                .max(SLOWDOWN_FLOOR.0 as f64);
            f.slo = Some(Nanos((k * service).round() as u64));
        }
    }

    /// Whether any function has an SLO of its own.
    pub fn has_function_slos(&self) -> bool {
        self.functions.iter().any(|f| f.slo.is_some())
    }

    /// Worst unloaded latency over all functions of all phases for a placement.
    pub fn no_load_latency_ns(&self, cl: &ClusterModel, p: Placement) -> f64 {
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
        let cl = ClusterModel::default();
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
    fn per_byte_costs_charge_the_objects_a_local_execution_reads() {
        let mut cl = ClusterModel::default();
        let mut f = FunctionSpec::traverse("big", 3, Nanos::from_us(1));
        f.object_bytes = 16_384;
        let before = [Placement::Local, Placement::Remote].map(|p| {
            (
                f.app_cost_ns(&cl.costs, p),
                f.storage_cost_ns(&cl.costs, p),
                f.no_load_latency_ns(&cl, p),
            )
        });
        cl.costs.app_byte_ns = 0.5;
        cl.costs.storage_byte_ns = 0.25;
        // Local: three reads of 16 KiB, each 8192 ns of app CPU and 4096 of storage CPU.
        let (app, storage, latency) = before[0];
        assert_eq!(f.app_cost_ns(&cl.costs, Placement::Local), app + 3.0 * 8_192.0);
        assert_eq!(f.storage_cost_ns(&cl.costs, Placement::Local), storage + 3.0 * 4_096.0);
        let grown = f.no_load_latency_ns(&cl, Placement::Local) - latency;
        assert!((grown - 3.0 * (8_192.0 + 4_096.0)).abs() < 1e-6, "{grown}");
        // Remote: the objects never leave the storage node.
        let (app, storage, latency) = before[1];
        assert_eq!(f.app_cost_ns(&cl.costs, Placement::Remote), app);
        assert_eq!(f.storage_cost_ns(&cl.costs, Placement::Remote), storage);
        assert_eq!(f.no_load_latency_ns(&cl, Placement::Remote), latency);
        cl.costs.storage_byte_ns = -1.0;
        assert!(cl.validate().is_err());
        cl.costs.storage_byte_ns = f64::NAN;
        assert!(cl.validate().is_err());
    }

    #[test]
    fn capacity_is_the_tighter_node() {
        let cl = ClusterModel::default();
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
        let cl = ClusterModel::default();
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
