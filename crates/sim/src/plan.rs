//! `ferry plan`: the cheapest cluster that serves a demand within a p99 SLO with ferry's
//! placement (Redy's question, asked at p99 and with placement).
//!
//! A candidate is `a` app nodes of `c` cores and `s` storage nodes of `k` cores; its cost
//! is its cores, `a·c + s·k`. Candidates are enumerated by cost, from 2 up to the bound
//! given: at each cost every split of the cores between the two sides, each side as the
//! fewest equal nodes of at most [`NODE_CORES_MAX`] cores (or of a node size given: app
//! nodes of one core are compute-node workers) whose links the closed-form capacity still
//! finds enough. A candidate whose closed-form capacity at its best turning point is below
//! the demand cannot meet it and is ruled out without a run; the others of one cost are
//! simulated in parallel, each with the default policy for a run long enough to hold the
//! machine's stalls ([`duration_for`]: 2 s on the paper-scale model), and judged
//! on the steady window (the last quarter): throughput at least the demand (less counting
//! noise) and p99 within the SLO. The search stops at the first cost where one meets both;
//! of those, the lowest p99 wins (then the fewest nodes).
//!
//! The headroom of the plan is the largest demand it still meets, found by bisection
//! between the demand and its closed-form capacity.

use ferry_control::Nanos;
use thiserror::Error;

use crate::error::ExperimentError;
use crate::model::{ClusterModel, Workload};
use crate::scenario::{Scenario, SimReport, Slo, STEADY_FRACTION};
use ferry_experiment::scaling::{Demand, DEMAND_OPS_MAX};
use ferry_spec::PolicySpec;

/// Largest node a plan builds from unless told otherwise: a large server's cores; a side
/// needing more gets more nodes.
pub const NODE_CORES_MAX: u32 = 64;

/// Most nodes of one kind a plan considers: the paper's largest cluster has 64 compute
/// nodes.
pub const NODES_PER_SIDE_MAX: u32 = 64;

/// Default bound on a plan's cores (both sides together).
pub const MAX_CORES_DEFAULT: u32 = 64;

/// Largest bound accepted: the simulator's time per run grows with the demand a cluster
/// this large serves, and past it a plan would take hours.
pub const MAX_CORES_LIMIT: u32 = 4_096;

/// Shortest default run of a candidate: a suite run's, whose steady window (the last
/// quarter) starts after the 1 s convergence target.
pub const DURATION_DEFAULT: Nanos = Nanos::from_secs(2);

/// Stalls of a node the judged window should hold by default: a window with two or three
/// of a VM's rare, long stalls is luck, and the rate loop needs several to find its level
/// (the suite's 1+1 space runs 8 s for 5 stalls a second: the same ten).
pub const STALLS_PER_WINDOW: f64 = 10.0;

/// Completions the judged window should hold by default: its p99 then rests on 100 slow
/// ones.
pub const COMPLETIONS_PER_WINDOW: f64 = 10_000.0;

/// Longest default run: beyond it a plan of a few levels takes many minutes.
pub const DURATION_AUTO_MAX: Nanos = Nanos::from_secs(60);

/// What a default run length may exceed a whole second by and still round down to it: the
/// float error of the division, not a real microsecond.
const ROUNDING_SLACK_S: f64 = 1e-6;

/// Share of the demand a run may fall short of beyond counting noise and still meet it:
/// the policy's rate loop settles a little under a demand it could serve.
pub const DEMAND_SHORTFALL: f64 = 0.01;

/// Standard deviations of a Poisson count the steady throughput may fall short by: at
/// three, a cluster that serves the demand fails the test by chance once in 700 runs.
const NOISE_SIGMAS: f64 = 3.0;

/// Bisection steps of the headroom: 5 halvings resolve it to 3 % of the bracket.
pub const HEADROOM_STEPS: u32 = 5;

/// Points of the turning-point grid the closed-form capacity is maximised over.
const CAPACITY_GRID: u32 = 100;

/// Timeline resolution of the candidates' runs (only the steady window is judged).
const TIMELINE_INTERVAL: Nanos = Nanos::from_ms(10);

/// What to plan for.
#[derive(Clone, Debug)]
pub struct PlanConfig {
    /// The machine: costs, RTT, stalls, links (the shape is the plan's to choose).
    pub machine: ClusterModel,
    /// The workload (its demand is set by the plan).
    pub workload: Workload,
    /// The objective.
    pub slo: Slo,
    /// Requests per second to serve.
    pub demand_ops: f64,
    /// Most cores the plan may use.
    pub max_cores: u32,
    /// Cores of every app node, if fixed (1: compute-node workers); else the fewest nodes.
    pub app_node_cores: Option<u32>,
    /// Cores of every storage node, if fixed.
    pub storage_node_cores: Option<u32>,
    /// The placement policy (ferry's default).
    pub policy: PolicySpec,
    /// Simulated time of each run.
    pub duration: Nanos,
    /// Seed of every run.
    pub seed: u64,
    /// Worker threads (the plan does not depend on it).
    pub threads: usize,
}

/// A cluster shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// App nodes.
    pub app_nodes: u32,
    /// Cores per app node.
    pub app_cores: u32,
    /// Storage nodes.
    pub storage_nodes: u32,
    /// Cores per storage node.
    pub storage_cores: u32,
}

impl Shape {
    /// Its cost: every core of both sides.
    pub fn cores(&self) -> u32 {
        self.app_nodes * self.app_cores + self.storage_nodes * self.storage_cores
    }

    /// `machine` with this shape.
    pub fn cluster(&self, machine: &ClusterModel) -> ClusterModel {
        ClusterModel {
            app_nodes: self.app_nodes,
            app_cores: self.app_cores,
            storage_nodes: self.storage_nodes,
            storage_cores: self.storage_cores,
            placement_groups: 1,
            elastic: None,
            ..machine.clone()
        }
    }

    /// As people say it: `1 app node x 4 cores + 2 storage nodes x 8 cores`.
    pub fn describe(&self) -> String {
        let plural = |n: u32, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
        format!(
            "{} x {} + {} x {}",
            plural(self.app_nodes, "app node"),
            plural(self.app_cores, "core"),
            plural(self.storage_nodes, "storage node"),
            plural(self.storage_cores, "core")
        )
    }
}

/// One simulated candidate.
#[derive(Clone, Debug, PartialEq)]
pub struct Trial {
    /// The shape.
    pub shape: Shape,
    /// Steady throughput.
    pub throughput_ops: f64,
    /// Steady p99, µs.
    pub p99_us: Option<f64>,
    /// Steady mean X.
    pub rpc_fraction: f64,
    /// Steady utilisation of the app and storage cores.
    pub utilization: (f64, f64),
    /// Whether it met the demand and the SLO.
    pub meets: bool,
}

/// The answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The cheapest candidate that met both.
    pub chosen: Trial,
    /// The largest demand it still meets (at least the one asked).
    pub headroom_ops: f64,
    /// Candidates simulated.
    pub simulated: usize,
    /// Candidates ruled out by their closed-form capacity.
    pub ruled_out: usize,
}

/// Why no plan.
#[derive(Debug, Error)]
pub enum PlanError {
    /// A bad scenario (workload, SLO, machine).
    #[error(transparent)]
    Experiment(#[from] ExperimentError),
    /// A setting of the plan itself is out of range.
    #[error("{name} must be in {range}, got {value}")]
    OutOfRange {
        /// The flag.
        name: &'static str,
        /// Its range.
        range: &'static str,
        /// The value.
        value: String,
    },
    /// Even the largest cluster allowed lacks the capacity.
    #[error(
        "no configuration up to --max-cores {max_cores} can serve {demand_ops:.0} requests/s: the \
         best has a capacity of {best_ops:.0} requests/s with every core busy; raise --max-cores"
    )]
    NoCapacity {
        /// The bound.
        max_cores: u32,
        /// The demand.
        demand_ops: f64,
        /// The best closed-form capacity within the bound.
        best_ops: f64,
    },
    /// Clusters with the capacity were simulated, and none met the demand within the SLO.
    #[error(
        "no configuration up to --max-cores {max_cores} meets {demand_ops:.0} requests/s at p99 <= \
         {slo}: {simulated} simulated, the closest ({closest}) served {closest_ops:.0} requests/s at \
         p99 {closest_p99}; raise --max-cores or relax the SLO"
    )]
    NoneMeets {
        /// The bound.
        max_cores: u32,
        /// The demand.
        demand_ops: f64,
        /// The SLO.
        slo: Nanos,
        /// Candidates simulated.
        simulated: usize,
        /// The closest candidate's shape.
        closest: String,
        /// Its throughput.
        closest_ops: f64,
        /// Its p99.
        closest_p99: String,
    },
}

impl PlanConfig {
    /// Rejects plans that cannot be searched.
    pub fn validate(&self) -> Result<(), PlanError> {
        if !(self.demand_ops.is_finite() && self.demand_ops > 0.0 && self.demand_ops <= DEMAND_OPS_MAX) {
            return Err(PlanError::OutOfRange {
                name: "--demand",
                range: "(0, 1e9] requests per second",
                value: self.demand_ops.to_string(),
            });
        }
        if !(2..=MAX_CORES_LIMIT).contains(&self.max_cores) {
            return Err(PlanError::OutOfRange {
                name: "--max-cores",
                range: "[2, 4096]",
                value: self.max_cores.to_string(),
            });
        }
        for (name, size) in [
            ("--app-node-cores", self.app_node_cores),
            ("--storage-node-cores", self.storage_node_cores),
        ] {
            if let Some(c) = size.filter(|c| !(1..=crate::model::CORES_MAX).contains(c)) {
                return Err(PlanError::OutOfRange {
                    name,
                    range: "[1, 256]",
                    value: c.to_string(),
                });
            }
        }
        if self.duration < Nanos::from_ms(100) || self.duration > Nanos::from_secs(600) {
            return Err(PlanError::OutOfRange {
                name: "--duration",
                range: "[100ms, 600s]",
                value: self.duration.to_string(),
            });
        }
        // The machine and the workload on the smallest shape: the same checks `ferry sim`
        // makes, the SLO against the unloaded latency included (it does not depend on the
        // cores).
        let one = Shape {
            app_nodes: 1,
            app_cores: 1,
            storage_nodes: 1,
            storage_cores: 1,
        };
        self.scenario(one, self.demand_ops).validate()?;
        Ok(())
    }

    fn scenario(&self, shape: Shape, demand_ops: f64) -> Scenario {
        let mut workload = self.workload.clone();
        workload.demand = Some(Demand {
            rates_ops: vec![demand_ops],
            step: Nanos::ZERO,
        });
        Scenario {
            cluster: shape.cluster(&self.machine),
            workload,
            policy: self.policy.clone(),
            slo: self.slo,
            duration: self.duration,
            seed: self.seed,
            arrivals: crate::Arrivals::Poisson,
            timeline_interval: TIMELINE_INTERVAL,
        }
    }

    /// The closed-form capacity of `shape`: the best over the turning point of the
    /// throughput at which its busiest resource is full, in the workload's worst phase.
    pub fn capacity_ops(&self, shape: Shape) -> f64 {
        let cl = shape.cluster(&self.machine);
        let w = &self.workload;
        (0..=CAPACITY_GRID)
            .map(|i| {
                let alpha = f64::from(i) / f64::from(CAPACITY_GRID);
                (0..w.phases.len())
                    .map(|p| w.capacity_split_ops(&cl, p, &w.turning_point_split(&cl, p, alpha)))
                    .fold(f64::INFINITY, f64::min)
            })
            .fold(0.0, f64::max)
    }

    /// Whether a run's steady window served `demand_ops` within the SLO.
    fn judge(&self, shape: Shape, demand_ops: f64, r: &SimReport) -> Trial {
        let window_s = self.duration.as_secs_f64() * STEADY_FRACTION;
        let noise = NOISE_SIGMAS * (demand_ops * window_s).sqrt() / window_s;
        let enough = r.steady.throughput_ops >= demand_ops * (1.0 - DEMAND_SHORTFALL) - noise;
        let within = r.steady.p99_us.is_some_and(|p| p <= self.slo.latency.as_us_f64());
        Trial {
            shape,
            throughput_ops: r.steady.throughput_ops,
            p99_us: r.steady.p99_us,
            rpc_fraction: r.steady.rpc_fraction_mean,
            utilization: (r.app_utilization, r.storage_utilization),
            meets: enough && within,
        }
    }

    fn trial(&self, shape: Shape, demand_ops: f64) -> Result<Trial, ExperimentError> {
        let report = self.scenario(shape, demand_ops).run()?;
        Ok(self.judge(shape, demand_ops, &report))
    }

    /// The ways to build `total` cores of one side, fewest nodes first: equal nodes of
    /// `size` cores if given, else of at most [`NODE_CORES_MAX`].
    fn side_shapes(total: u32, size: Option<u32>) -> Vec<(u32, u32)> {
        match size {
            Some(c) if total.is_multiple_of(c) && total / c <= NODES_PER_SIDE_MAX => vec![(total / c, c)],
            Some(_) => Vec::new(),
            None => (1..=NODES_PER_SIDE_MAX.min(total))
                .filter(|n| total.is_multiple_of(*n) && total / n <= NODE_CORES_MAX)
                .map(|n| (n, total / n))
                .collect(),
        }
    }

    /// The candidates of cost `cores` that have the capacity, one per split of the cores
    /// (the fewest nodes that do), and the best capacity seen at that cost.
    fn candidates(&self, cores: u32) -> (Vec<Shape>, f64) {
        let mut out = Vec::new();
        let mut best = 0.0f64;
        for app_total in 1..cores {
            let apps = Self::side_shapes(app_total, self.app_node_cores);
            let storages = Self::side_shapes(cores - app_total, self.storage_node_cores);
            let mut shapes: Vec<Shape> = apps
                .iter()
                .flat_map(|&(a, c)| {
                    storages.iter().map(move |&(s, k)| Shape {
                        app_nodes: a,
                        app_cores: c,
                        storage_nodes: s,
                        storage_cores: k,
                    })
                })
                .collect();
            shapes.sort_by_key(|s| (s.app_nodes + s.storage_nodes, s.storage_nodes));
            for shape in shapes {
                let capacity = self.capacity_ops(shape);
                best = best.max(capacity);
                if capacity >= self.demand_ops {
                    out.push(shape);
                    break;
                }
            }
        }
        (out, best)
    }

    /// The largest demand `shape` meets, between `self.demand_ops` (met) and its capacity.
    fn headroom(&self, shape: Shape) -> Result<f64, ExperimentError> {
        let (mut low, mut high) = (self.demand_ops, self.capacity_ops(shape));
        for _ in 0..HEADROOM_STEPS {
            let mid = 0.5 * (low + high);
            if self.trial(shape, mid)?.meets {
                low = mid;
            } else {
                high = mid;
            }
        }
        Ok(low)
    }
}

/// The default run length for `machine` at `demand_ops`: long enough that the judged
/// window holds [`STALLS_PER_WINDOW`] stalls of a node and [`COMPLETIONS_PER_WINDOW`]
/// completions, at least [`DURATION_DEFAULT`], at most [`DURATION_AUTO_MAX`]. The
/// paper-scale model (5000 stalls/s) gets 2 s; a VM's profile (a few stalls a second) 10–20 s.
pub fn duration_for(machine: &ClusterModel, demand_ops: f64) -> Nanos {
    let window = |events: f64, rate: f64| {
        if rate > 0.0 {
            events / rate / STEADY_FRACTION
        } else {
            0.0
        }
    };
    let secs = window(STALLS_PER_WINDOW, machine.stall_rate_hz)
        .max(window(COMPLETIONS_PER_WINDOW, demand_ops))
        .max(DURATION_DEFAULT.as_secs_f64())
        .min(DURATION_AUTO_MAX.as_secs_f64());
    // Whole seconds (less a float's error), so the printed command reads plainly.
    Nanos::from_secs((secs - ROUNDING_SLACK_S).ceil() as u64)
}

/// Searches for the plan (see the module docs).
pub fn plan(cfg: &PlanConfig) -> Result<Plan, PlanError> {
    cfg.validate()?;
    let (mut simulated, mut ruled_out) = (0usize, 0usize);
    let mut best_capacity = 0.0f64;
    let mut closest: Option<Trial> = None;
    for cores in 2..=cfg.max_cores {
        let (shapes, best) = cfg.candidates(cores);
        best_capacity = best_capacity.max(best);
        ruled_out += (cores - 1) as usize - shapes.len();
        if shapes.is_empty() {
            continue;
        }
        let trials = crate::parallel::map_indexed(shapes.len(), cfg.threads, |i| cfg.trial(shapes[i], cfg.demand_ops));
        simulated += trials.len();
        let trials = trials.into_iter().collect::<Result<Vec<Trial>, ExperimentError>>()?;
        let by_p99 = |t: &Trial| t.p99_us.unwrap_or(f64::INFINITY);
        let chosen = trials
            .iter()
            .filter(|t| t.meets)
            .min_by(|a, b| {
                by_p99(a)
                    .total_cmp(&by_p99(b))
                    .then((a.shape.app_nodes + a.shape.storage_nodes).cmp(&(b.shape.app_nodes + b.shape.storage_nodes)))
            })
            .cloned();
        if let Some(chosen) = chosen {
            let headroom_ops = cfg.headroom(chosen.shape)?;
            return Ok(Plan {
                chosen,
                headroom_ops,
                simulated,
                ruled_out,
            });
        }
        // The nearest miss: the most throughput, then the lowest p99.
        for t in trials {
            let better = closest
                .as_ref()
                .is_none_or(|c| (t.throughput_ops, -by_p99(&t)) > (c.throughput_ops, -by_p99(c)));
            if better {
                closest = Some(t);
            }
        }
    }
    match closest {
        None => Err(PlanError::NoCapacity {
            max_cores: cfg.max_cores,
            demand_ops: cfg.demand_ops,
            best_ops: best_capacity,
        }),
        Some(c) => Err(PlanError::NoneMeets {
            max_cores: cfg.max_cores,
            demand_ops: cfg.demand_ops,
            slo: cfg.slo.latency,
            simulated,
            closest: c.shape.describe(),
            closest_ops: c.throughput_ops,
            closest_p99: c.p99_us.map_or("-".into(), |p| format!("{p:.0}us")),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::parse_workload;

    fn config(workload: &str, slo: Nanos, demand_ops: f64) -> PlanConfig {
        PlanConfig {
            machine: ClusterModel::default(),
            workload: parse_workload(workload).unwrap(),
            slo: Slo::p99(slo),
            demand_ops,
            max_cores: 16,
            app_node_cores: None,
            storage_node_cores: None,
            policy: ferry_spec::default_policy(),
            duration: Nanos::from_secs(1),
            seed: 1,
            threads: 2,
        }
    }

    #[test]
    fn sides_are_built_from_the_fewest_equal_nodes_or_the_node_size_given() {
        assert_eq!(PlanConfig::side_shapes(6, None)[0], (1, 6));
        assert_eq!(PlanConfig::side_shapes(6, None).len(), 4);
        // 130 cores: two nodes would need 65 each, so five of 26.
        assert_eq!(PlanConfig::side_shapes(130, None)[0], (5, 26));
        assert_eq!(PlanConfig::side_shapes(6, Some(1)), vec![(6, 1)]);
        assert!(PlanConfig::side_shapes(6, Some(4)).is_empty());
    }

    #[test]
    fn a_small_demand_gets_a_small_cluster_that_the_simulator_confirms() {
        // Light work, 300 k/s: a storage core serves ~490 k/s remote, so 2-3 cores do.
        let cfg = config("light", Nanos::from_us(200), 300_000.0);
        let plan = plan(&cfg).unwrap();
        let shape = plan.chosen.shape;
        assert!(shape.cores() <= 4, "{shape:?}");
        assert!(plan.chosen.meets && plan.chosen.p99_us.unwrap() <= 200.0);
        assert!(plan.chosen.throughput_ops > 0.95 * 300_000.0);
        assert!(plan.headroom_ops >= 300_000.0 && plan.headroom_ops <= cfg.capacity_ops(shape));
        // One core fewer lacks the capacity or the SLO: nothing cheaper was feasible.
        assert!(plan.simulated >= 1);
    }

    #[test]
    fn runs_are_long_enough_to_hold_the_machines_stalls() {
        let paper = ClusterModel::default();
        assert_eq!(duration_for(&paper, 1e6), DURATION_DEFAULT);
        // Few completions: 10 000 in the last quarter at 1000/s.
        assert_eq!(duration_for(&paper, 1_000.0), Nanos::from_secs(40));
        // A VM's 2 stalls a second: 10 in the last quarter.
        let vm = ClusterModel {
            stall_rate_hz: 2.0,
            ..ClusterModel::default()
        };
        assert_eq!(duration_for(&vm, 1e5), Nanos::from_secs(20));
        let rare = ClusterModel {
            stall_rate_hz: 0.1,
            ..ClusterModel::default()
        };
        assert_eq!(duration_for(&rare, 1e5), DURATION_AUTO_MAX);
    }

    #[test]
    fn impossible_plans_say_why() {
        let cfg = config("heavy", Nanos::from_us(400), 5e6);
        let err = plan(&cfg).unwrap_err().to_string();
        assert!(
            err.contains("no configuration up to --max-cores 16 can serve 5000000"),
            "{err}"
        );
        let cfg = config("light", Nanos::from_us(5), 1e4);
        let err = plan(&cfg).unwrap_err().to_string();
        assert!(err.contains("below the no-load latency"), "{err}");
        let mut cfg = config("light", Nanos::from_us(200), 1e4);
        cfg.max_cores = 1;
        assert!(plan(&cfg)
            .unwrap_err()
            .to_string()
            .contains("--max-cores must be in [2, 4096]"));
        cfg.max_cores = 8;
        cfg.demand_ops = -1.0;
        assert!(plan(&cfg).unwrap_err().to_string().contains("--demand must be in"));
    }
}
