//! The upper bound: for each fixed X, the largest rate whose p99 meets the SLO, found by
//! bisection over fixed-rate runs (Kayak §2.2's parameter sweep).
//!
//! Every run of a sweep uses the same seed (common random numbers): the arrival gaps are
//! the same exponentials scaled by 1/R, so p99(R) is a near-monotone function of R and the
//! bisection converges to a well-defined root rather than chasing noise. A run stops early
//! once it has seen more SLO violations than the quantile allows, or a runaway backlog.

use ferry_control::{FixedRate, Nanos};
use serde::Serialize;

use crate::engine::{self, Abort, Arrivals, EngineConfig};
use crate::error::ExperimentError;
use crate::model::{ClusterModel, Workload};
use crate::scenario::Slo;

/// Default warm-up before measuring: 10 ms is ≥ 50× the SLO-bound latencies of the paper's
/// workloads, so the queues have forgotten the empty start.
pub const WARMUP_DEFAULT: Nanos = Nanos::from_ms(10);

/// Default measurement span: 50 ms gives ≥ 25 000 completions at 0.5 Mops, i.e. ≥ 250
/// samples beyond the p99.
pub const MEASURE_DEFAULT: Nanos = Nanos::from_ms(50);

/// Default bisection steps: 10 halvings of [0, capacity] pin the rate to 0.1 % of capacity.
pub const BISECTION_STEPS_DEFAULT: u32 = 10;

/// Most bisection steps accepted (2⁻³⁰ is below any meaningful rate difference).
pub const BISECTION_STEPS_MAX: u32 = 30;

/// Default X step of a sweep (the 0.02).
pub const X_STEP_DEFAULT: f64 = 0.02;

/// Relative slack on the violation count before a run is cut short: a run stops only once
/// the violations exceed what the quantile allows by 10 %, so borderline rates are measured
/// in full.
const ABORT_VIOLATION_SLACK: f64 = 1.1;

/// A run whose backlog exceeds this many multiples of `R × SLO` (Little's law bound on the
/// in-flight count of a run that meets the SLO) is overloaded beyond doubt.
const ABORT_BACKLOG_FACTOR: f64 = 10.0;

/// Fixed extra allowance of in-flight requests and violations, so tiny rates never abort
/// on a handful of requests.
const ABORT_FLOOR: u64 = 1_000;

/// What a sweep's coordinate means.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Axis {
    /// One RPC fraction X for every function (Kayak's space).
    #[default]
    Fraction,
    /// Pyxis' turning point α: functions sent remote whole in the order of their costs,
    /// each with a slice of α as wide as its share (so α is the share sent remote); the
    /// per-function upper bound (Theorem IV.1).
    TurningPoint,
    /// One given split, whatever X says (a cell of [`grid`]).
    Given(Vec<f64>),
}

/// What a sweep measures with.
#[derive(Clone, Debug)]
pub struct SweepConfig {
    /// Nodes, network, costs.
    pub cluster: ClusterModel,
    /// A single-phase workload.
    pub workload: Workload,
    /// The objective.
    pub slo: Slo,
    /// Seed shared by every run.
    pub seed: u64,
    /// Arrival process.
    pub arrivals: Arrivals,
    /// Warm-up per run.
    pub warmup: Nanos,
    /// Measurement span per run.
    pub measure: Nanos,
    /// Start of the measured span; None: right after the warm-up from time 0. Set it to a
    /// policy run's steady window (with the run's seed) to judge the bound on the very span
    /// the policy is judged on: the nodes' stalls are the same there, so the two p99s differ
    /// only by what the policy did. Requests are released from `measure_from − warmup`.
    pub measure_from: Option<Nanos>,
    /// Bisection steps per X.
    pub bisection_steps: u32,
    /// What X means.
    pub axis: Axis,
    /// Worker threads (results do not depend on it).
    pub threads: usize,
}

impl SweepConfig {
    /// Defaults for everything but the scenario.
    pub fn new(cluster: ClusterModel, workload: Workload, slo: Slo, seed: u64) -> Self {
        SweepConfig {
            cluster,
            workload,
            slo,
            seed,
            arrivals: Arrivals::Poisson,
            warmup: WARMUP_DEFAULT,
            measure: MEASURE_DEFAULT,
            measure_from: None,
            bisection_steps: BISECTION_STEPS_DEFAULT,
            axis: Axis::Fraction,
            threads: 1,
        }
    }

    /// Rejects configurations a sweep cannot run.
    pub fn validate(&self) -> Result<(), ExperimentError> {
        self.cluster.validate()?;
        self.workload.validate()?;
        if self.cluster.placement_groups != 1 || self.cluster.elastic.is_some() || self.workload.demand.is_some() {
            return Err(ExperimentError::Unsupported(
                "a sweep runs the whole cluster at fixed rates on all its cores: it takes no placement \
                 groups, elastic range or demand"
                    .into(),
            ));
        }
        if self.workload.phases.len() != 1 {
            return Err(ExperimentError::Unsupported(
                "a sweep needs a single-phase workload: sweep each phase of a bimodal workload \
                 separately (e.g. --workload medium, then --workload light)"
                    .into(),
            ));
        }
        if self.measure == Nanos::ZERO {
            return Err(ExperimentError::OutOfRange {
                name: "measure".into(),
                range: "(0, ∞)",
                value: self.measure.to_string(),
            });
        }
        if self.bisection_steps == 0 || self.bisection_steps > BISECTION_STEPS_MAX {
            return Err(ExperimentError::OutOfRange {
                name: "bisection steps".into(),
                range: "[1, 30]",
                value: self.bisection_steps.to_string(),
            });
        }
        Ok(())
    }
}

/// One fixed-(X, R) run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Measurement {
    /// RPC fraction.
    pub rpc_fraction: f64,
    /// Offered rate.
    pub rate_ops: f64,
    /// Completions per second in the measurement span.
    pub throughput_ops: f64,
    /// p99 (the SLO quantile) of those completions, µs.
    pub p99_us: Option<f64>,
    /// Mean latency, µs.
    pub latency_us_mean: Option<f64>,
    /// Mean queueing delay at the storage node, µs.
    pub storage_wait_us_mean: Option<f64>,
    /// App CPU utilisation.
    pub app_utilization: f64,
    /// Storage CPU utilisation.
    pub storage_utilization: f64,
    /// The run was cut short (overloaded).
    pub aborted: bool,
    /// p99 ≤ SLO and not aborted.
    pub feasible: bool,
}

/// Runs the workload at fixed X and rate, measuring after the warm-up.
pub fn measure(cfg: &SweepConfig, x: f64, rate_ops: f64) -> Result<Measurement, ExperimentError> {
    let seed = cfg.seed ^ 0x5eed;
    let mut policy = match &cfg.axis {
        Axis::Fraction => FixedRate::new(x, rate_ops, seed)?,
        Axis::TurningPoint | Axis::Given(_) => FixedRate::with_split(x, cfg.split_at(x), rate_ops, seed)?,
    };
    let start = cfg.measure_from.unwrap_or(cfg.warmup);
    let end = start + cfg.measure;
    let expected = rate_ops * cfg.measure.as_secs_f64();
    let abort = Abort {
        latency_ns: cfg.slo.latency.0,
        violations_max: ((1.0 - cfg.slo.quantile) * expected * ABORT_VIOLATION_SLACK) as u64 + ABORT_FLOOR,
        in_flight_max: (ABORT_BACKLOG_FACTOR * rate_ops * cfg.slo.latency.as_secs_f64()) as usize
            + ABORT_FLOOR as usize,
    };
    let ecfg = EngineConfig {
        cluster: &cfg.cluster,
        workload: &cfg.workload,
        seed: cfg.seed,
        duration: end,
        arrivals: cfg.arrivals,
        timeline_interval: None,
        windows: vec![(start, end)],
        abort: Some(abort),
        arrivals_from: start.saturating_sub(cfg.warmup),
        slo: Some(cfg.slo.latency),
    };
    let out = engine::run(&ecfg, &mut policy);
    let w = &out.windows[0];
    let win_s = cfg.measure.as_secs_f64();
    let p99 = w.latency.quantile(cfg.slo.quantile);
    let feasible = !out.aborted && crate::judge::slo_ratio(&cfg.workload, &cfg.slo, w).is_some_and(|r| r <= 1.0);
    Ok(Measurement {
        rpc_fraction: x,
        rate_ops,
        throughput_ops: w.latency.count() as f64 / win_s,
        p99_us: p99.map(|v| v / 1e3),
        latency_us_mean: w.latency.mean().map(|v| v / 1e3),
        storage_wait_us_mean: (w.storage.count > 0).then(|| w.storage.wait_ns as f64 / w.storage.count as f64 / 1e3),
        app_utilization: w.app.busy_ns as f64 / (cfg.cluster.app_cores_total() as f64 * win_s * 1e9),
        storage_utilization: w.storage.busy_ns as f64 / (cfg.cluster.storage_cores_total() as f64 * win_s * 1e9),
        aborted: out.aborted,
        feasible,
    })
}

/// The result for one X: the largest feasible rate found.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SweepRow {
    /// RPC fraction.
    pub rpc_fraction: f64,
    /// Largest rate found meeting the SLO (0 if none).
    pub rate_ops: f64,
    /// Measured throughput at that rate.
    pub throughput_ops: f64,
    /// p99 at that rate, µs.
    pub p99_us: Option<f64>,
    /// Mean latency at that rate, µs.
    pub latency_us_mean: Option<f64>,
    /// The analytic CPU capacity at this X (upper end of the bisection).
    pub capacity_ops: f64,
}

impl Axis {
    /// The name in reports.
    pub fn name(&self) -> &'static str {
        match self {
            Axis::Fraction => "x",
            Axis::TurningPoint => "turning-point",
            Axis::Given(_) => "given",
        }
    }
}

impl SweepConfig {
    /// Each function's share sent remote at coordinate `x`.
    pub fn split_at(&self, x: f64) -> Vec<f64> {
        match &self.axis {
            Axis::Fraction => vec![x; self.workload.functions.len()],
            Axis::TurningPoint => self.workload.turning_point_split(&self.cluster, 0, x),
            Axis::Given(split) => split.clone(),
        }
    }

    /// The analytic CPU capacity at coordinate `x`.
    pub fn capacity_ops(&self, x: f64) -> f64 {
        self.workload.capacity_split_ops(&self.cluster, 0, &self.split_at(x))
    }
}

/// Bisection of the rate in [0, capacity(X)] to the SLO.
pub fn max_rate(cfg: &SweepConfig, x: f64) -> Result<SweepRow, ExperimentError> {
    max_rate_between(cfg, x, 0.0, cfg.capacity_ops(x))
}

/// Bisection of the rate in [`lo_ops`, `hi_ops`] to the SLO, taking `lo_ops` as feasible
/// and `hi_ops` as not. A narrow bracket around a known estimate (a coarser sweep's rate)
/// reaches the same precision in fewer runs; if no rate inside it is feasible, `lo_ops`
/// itself is measured (and the row has rate 0 if it fails too).
pub fn max_rate_between(cfg: &SweepConfig, x: f64, lo_ops: f64, hi_ops: f64) -> Result<SweepRow, ExperimentError> {
    let capacity = cfg.capacity_ops(x);
    let (mut lo, mut hi) = (lo_ops.max(0.0), hi_ops.max(0.0));
    let mut best: Option<Measurement> = None;
    for _ in 0..cfg.bisection_steps {
        let mid = 0.5 * (lo + hi);
        if mid <= 0.0 {
            break;
        }
        let m = measure(cfg, x, mid)?;
        if m.feasible {
            lo = mid;
            best = Some(m);
        } else {
            hi = mid;
        }
    }
    if best.is_none() && lo > 0.0 {
        let m = measure(cfg, x, lo)?;
        if m.feasible {
            best = Some(m);
        }
    }
    Ok(match best {
        Some(m) => SweepRow {
            rpc_fraction: x,
            rate_ops: m.rate_ops,
            throughput_ops: m.throughput_ops,
            p99_us: m.p99_us,
            latency_us_mean: m.latency_us_mean,
            capacity_ops: capacity,
        },
        None => SweepRow {
            rpc_fraction: x,
            rate_ops: 0.0,
            throughput_ops: 0.0,
            p99_us: None,
            latency_us_mean: None,
            capacity_ops: capacity,
        },
    })
}

/// A whole sweep: one row per X and the best of them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SweepReport {
    /// Workload spec.
    pub workload: String,
    /// App nodes.
    pub app_nodes: u32,
    /// Storage nodes.
    pub storage_nodes: u32,
    /// Cores of each app node.
    pub app_cores: u32,
    /// Storage-node cores.
    pub storage_cores: u32,
    /// Network RTT.
    pub rtt_us: f64,
    /// SLO latency.
    pub slo_p99_us: f64,
    /// Seed.
    pub seed: u64,
    /// What X means: `x` (one RPC fraction for every function) or `turning-point` (Pyxis'
    /// α, cut by the functions' shares: the share of requests sent remote).
    pub axis: &'static str,
    /// Highest throughput over all X.
    pub best_throughput_ops: f64,
    /// The X achieving it.
    pub best_rpc_fraction: f64,
    /// The rate at that X.
    pub best_rate_ops: f64,
    /// One row per X, in increasing X.
    pub rows: Vec<SweepRow>,
}

/// `0, step, 2·step, …, 1` (1 always included).
pub fn x_grid(step: f64) -> Vec<f64> {
    let n = (1.0 / step).round().max(1.0) as usize;
    (0..=n).map(|i| (i as f64 / n as f64 * 1e6).round() / 1e6).collect()
}

/// Sweeps the given X values (in parallel over `cfg.threads`; the result does not depend
/// on the thread count).
pub fn sweep(cfg: &SweepConfig, xs: &[f64]) -> Result<SweepReport, ExperimentError> {
    let rows = rows_in_parallel(cfg, xs, |x| max_rate(cfg, x))?;
    let best = rows.iter().enumerate().fold(0, |b, (i, r)| {
        if r.throughput_ops > rows[b].throughput_ops {
            i
        } else {
            b
        }
    });
    Ok(SweepReport {
        workload: cfg.workload.label.clone(),
        app_nodes: cfg.cluster.app_nodes,
        storage_nodes: cfg.cluster.storage_nodes,
        app_cores: cfg.cluster.app_cores,
        storage_cores: cfg.cluster.storage_cores,
        rtt_us: cfg.cluster.rtt.as_us_f64(),
        slo_p99_us: cfg.slo.latency.as_us_f64(),
        seed: cfg.seed,
        axis: cfg.axis.name(),
        best_throughput_ops: rows.get(best).map_or(0.0, |r| r.throughput_ops),
        best_rpc_fraction: rows.get(best).map_or(0.0, |r| r.rpc_fraction),
        best_rate_ops: rows.get(best).map_or(0.0, |r| r.rate_ops),
        rows,
    })
}

/// Rows at `xs` bisected between `bracket.0` and `bracket.1` × the rate of `coarse`'s row
/// nearest each X: a finer or differently measured sweep (another window, more bisection
/// steps) that starts from what a coarse sweep found, at a fraction of its cost. This is how
/// a policy run's *same-window bound* is taken: `cfg.measure_from` and `cfg.measure` set
/// to the run's steady window, so the bound is judged by the very p99 the run is (same seed,
/// hence the same node stalls).
pub fn refine(
    cfg: &SweepConfig,
    coarse: &SweepReport,
    xs: &[f64],
    bracket: (f64, f64),
) -> Result<Vec<SweepRow>, ExperimentError> {
    rows_in_parallel(cfg, xs, |x| {
        let near_ops = coarse
            .rows
            .iter()
            .min_by(|a, b| (a.rpc_fraction - x).abs().total_cmp(&(b.rpc_fraction - x).abs()))
            .map_or(0.0, |r| r.rate_ops);
        max_rate_between(cfg, x, bracket.0 * near_ops, bracket.1 * near_ops)
    })
}

/// `row(x)` for every X (validated to lie in [0, 1]), over `cfg.threads` workers, in the
/// order of `xs`.
fn rows_in_parallel(
    cfg: &SweepConfig,
    xs: &[f64],
    row: impl Fn(f64) -> Result<SweepRow, ExperimentError> + Sync,
) -> Result<Vec<SweepRow>, ExperimentError> {
    cfg.validate()?;
    for &x in xs {
        if !(0.0..=1.0).contains(&x) {
            return Err(ExperimentError::OutOfRange {
                name: "rpc fraction".into(),
                range: "[0, 1]",
                value: x.to_string(),
            });
        }
    }
    crate::parallel::map_indexed(xs.len(), cfg.threads, |i| row(xs[i]))
        .into_iter()
        .collect()
}

/// One cell of a two-function grid: each function's share sent remote, and the largest
/// rate meeting the SLO there.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GridCell {
    /// The first function's share sent remote.
    pub x_a: f64,
    /// The second function's.
    pub x_b: f64,
    /// The largest rate found meeting the SLO (0 if none).
    pub rate_ops: f64,
    /// Measured throughput at that rate.
    pub throughput_ops: f64,
}

/// A sweep over both functions' splits of a two-function mix (`ferry sim-sweep --grid`):
/// where Pyxis' Theorem IV.1 is checked, since its optimum has one of them at 0 or 1.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GridReport {
    /// Workload spec.
    pub workload: String,
    /// The grid's step.
    pub step: f64,
    /// Every cell, x_a major.
    pub cells: Vec<GridCell>,
    /// The best cell's split.
    pub best_x_a: f64,
    /// The best cell's split.
    pub best_x_b: f64,
    /// The best cell's throughput.
    pub best_throughput_ops: f64,
}

/// The grid sweep over `(x_a, x_b)` in `x_grid(step)`², for a mix of exactly two functions.
pub fn grid(cfg: &SweepConfig, step: f64) -> Result<GridReport, ExperimentError> {
    cfg.validate()?;
    if cfg.workload.functions.len() != 2 {
        return Err(ExperimentError::Unsupported(format!(
            "a grid sweep needs a mix of two functions; this workload has {}",
            cfg.workload.functions.len()
        )));
    }
    let xs = x_grid(step);
    let pairs: Vec<(f64, f64)> = xs.iter().flat_map(|&a| xs.iter().map(move |&b| (a, b))).collect();
    let cells = crate::parallel::map_indexed(pairs.len(), cfg.threads, |i| {
        let (x_a, x_b) = pairs[i];
        let cell = SweepConfig {
            axis: Axis::Given(vec![x_a, x_b]),
            threads: 1,
            ..cfg.clone()
        };
        max_rate(&cell, x_a).map(|row| GridCell {
            x_a,
            x_b,
            rate_ops: row.rate_ops,
            throughput_ops: row.throughput_ops,
        })
    })
    .into_iter()
    .collect::<Result<Vec<_>, _>>()?;
    let best = cells
        .iter()
        .max_by(|a, b| a.throughput_ops.total_cmp(&b.throughput_ops))
        .cloned()
        // Invariant: x_grid has at least two points, so the grid is never empty.
        .expect("a grid has cells");
    Ok(GridReport {
        workload: cfg.workload.label.clone(),
        step,
        cells,
        best_x_a: best.x_a,
        best_x_b: best.x_b,
        best_throughput_ops: best.throughput_ops,
    })
}

impl GridReport {
    /// Throughput (kops) by x_a (rows) and x_b (columns), and the best cell.
    pub fn table(&self) -> String {
        let xs = x_grid(self.step);
        let mut out = format!("{:>8}", "xA \\ xB");
        for b in &xs {
            out.push_str(&format!(" {b:>8.2}"));
        }
        out.push('\n');
        for (i, a) in xs.iter().enumerate() {
            out.push_str(&format!("{a:>8.2}"));
            for cell in &self.cells[i * xs.len()..(i + 1) * xs.len()] {
                out.push_str(&format!(" {:>8.0}", cell.throughput_ops / 1e3));
            }
            out.push('\n');
        }
        out.push_str(&format!(
            "best: xA = {:.2}, xB = {:.2}, throughput {:.0} ops/s (kops in the table)\n",
            self.best_x_a, self.best_x_b, self.best_throughput_ops
        ));
        out
    }
}

impl SweepReport {
    /// The table `ferry sim-sweep` prints.
    pub fn table(&self) -> String {
        let coordinate = if self.axis == Axis::TurningPoint.name() {
            "alpha"
        } else {
            "X"
        };
        let mut out = format!(
            "{:>6} {:>14} {:>14} {:>10} {:>10}\n",
            coordinate, "rate_ops", "throughput_ops", "p99_us", "mean_us"
        );
        for r in &self.rows {
            let opt = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.1}"));
            out.push_str(&format!(
                "{:>6.2} {:>14.0} {:>14.0} {:>10} {:>10}\n",
                r.rpc_fraction,
                r.rate_ops,
                r.throughput_ops,
                opt(r.p99_us),
                opt(r.latency_us_mean)
            ));
        }
        out.push_str(&format!(
            "best: {coordinate} = {:.2}, throughput {:.0} ops/s at p99 <= {} us\n",
            self.best_rpc_fraction, self.best_throughput_ops, self.slo_p99_us
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_includes_both_ends() {
        let g = x_grid(0.02);
        assert_eq!(g.len(), 51);
        assert_eq!(g[0], 0.0);
        assert_eq!(g[50], 1.0);
        assert_eq!(g[20], 0.4);
        assert_eq!(x_grid(0.25), vec![0.0, 0.25, 0.5, 0.75, 1.0]);
    }

    #[test]
    fn the_engine_charges_per_byte_costs_as_the_closed_form_counts_them() {
        use crate::model::FunctionSpec;
        use ferry_control::Placement;
        let mut cl = ClusterModel {
            app_cores: 2,
            storage_cores: 2,
            stall_rate_hz: 0.0,
            ..ClusterModel::default()
        };
        cl.costs.app_byte_ns = 0.5;
        cl.costs.storage_byte_ns = 0.25;
        let mut f = FunctionSpec::traverse("big", 2, Nanos::from_us(1));
        f.object_bytes = 8_192;
        let w = Workload::single("big", f.clone());
        let mut cfg = SweepConfig::new(cl.clone(), w, Slo::p99(Nanos::from_secs(1)), 3);
        cfg.measure = Nanos::from_ms(200);
        // All local, at 100 k/s: each side's busy share is the rate times its closed-form
        // cost per request over its cores.
        let rate = 100_000.0;
        let m = measure(&cfg, 0.0, rate).unwrap();
        let app = rate * f.app_cost_ns(&cl.costs, Placement::Local) / 2e9;
        let storage = rate * f.storage_cost_ns(&cl.costs, Placement::Local) / 2e9;
        assert!(
            (m.app_utilization / app - 1.0).abs() < 0.03,
            "{} vs {app}",
            m.app_utilization
        );
        assert!(
            (m.storage_utilization / storage - 1.0).abs() < 0.03,
            "{} vs {storage}",
            m.storage_utilization
        );
        // Without the byte costs each side does visibly less.
        cl.costs.app_byte_ns = 0.0;
        cl.costs.storage_byte_ns = 0.0;
        cfg.cluster = cl;
        let bare = measure(&cfg, 0.0, rate).unwrap();
        assert!(bare.app_utilization < 0.8 * m.app_utilization);
        assert!(bare.storage_utilization < 0.8 * m.storage_utilization);
    }
}
