//! The upper bound a suite scenario's policy run is judged against: the best fixed (X, R)
//! whose p99 over the run's own steady window (same seed, hence the same node stalls) meets
//! the SLO. It is the same-window bound of docs/SIMULATION.md, found without a prior sweep:
//! a coarse grid of X, each rate bisected over [0, capacity], then a shrinking bracket of X
//! around the best grid point (R(X) is unimodal on this model), each rate bisected around
//! its neighbours'.

use ferry_control::Nanos;
use serde::{Deserialize, Serialize};

use crate::error::ExperimentError;
use crate::sweep::{self, SweepConfig, SweepRow};

/// The coarse grid of X.
pub const COARSE_XS: [f64; 5] = [0.0, 0.25, 0.5, 0.75, 1.0];
/// Half-widths of the refinement around the best X so far: X ends within 1/32 of the
/// bound's best (R(X) moves by a percent or two per 0.03 of X near its peak).
pub const REFINE_STEPS: [f64; 3] = [0.125, 0.0625, 0.03125];
/// Bisection steps of the coarse rows: [0, capacity] to 0.4 % of capacity.
pub const COARSE_BISECTION_STEPS: u32 = 8;
/// Bisection steps of the refined rows, inside their neighbours' bracket (to < 1 %).
pub const REFINE_BISECTION_STEPS: u32 = 7;
/// A refined row's rate is bisected between these multiples of its neighbours' lower and
/// higher rate: by unimodality it lies above the lower; the higher may sit below the peak.
const REFINE_BRACKET: (f64, f64) = (0.9, 1.3);
/// Shortest warm-up before the window; the warm-up is at least this many SLOs too, so
/// millisecond SLOs get queues that have forgotten the empty start.
const WARMUP_MIN: Nanos = Nanos::from_ms(10);
/// Warm-up in multiples of the SLO.
const WARMUP_SLOS: u64 = 20;

/// The bound of one scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bound {
    /// The X of the best row.
    pub rpc_fraction: f64,
    /// Its throughput over the window.
    pub throughput_ops: f64,
    /// Its fixed rate.
    pub rate_ops: f64,
    /// Fixed-rate runs it took.
    pub rows_measured: usize,
}

/// The best fixed (X, R) meeting `cfg.slo` over `window`, with `cfg`'s seed and model.
pub fn same_window_bound(cfg: &SweepConfig, window: (Nanos, Nanos)) -> Result<Bound, ExperimentError> {
    let mut cfg = cfg.clone();
    cfg.measure_from = Some(window.0);
    cfg.measure = window.1.saturating_sub(window.0);
    cfg.warmup = WARMUP_MIN.max(Nanos(cfg.slo.latency.0.saturating_mul(WARMUP_SLOS)));
    cfg.threads = 1;
    let mut rows: Vec<SweepRow> = Vec::new();
    cfg.bisection_steps = COARSE_BISECTION_STEPS;
    for x in COARSE_XS {
        rows.push(sweep::max_rate(&cfg, x)?);
    }
    cfg.bisection_steps = REFINE_BISECTION_STEPS;
    for h in REFINE_STEPS {
        let centre = best(&rows).rpc_fraction;
        for x in [centre - h, centre + h] {
            if !(0.0..=1.0).contains(&x) || rows.iter().any(|r| (r.rpc_fraction - x).abs() < 1e-9) {
                continue;
            }
            let (below, above) = neighbours(&rows, x);
            let lo = REFINE_BRACKET.0 * below.rate_ops.min(above.rate_ops);
            let hi = (REFINE_BRACKET.1 * below.rate_ops.max(above.rate_ops)).max(2.0 * lo);
            rows.push(sweep::max_rate_between(&cfg, x, lo, hi)?);
        }
    }
    let b = best(&rows);
    Ok(Bound {
        rpc_fraction: b.rpc_fraction,
        throughput_ops: b.throughput_ops,
        rate_ops: b.rate_ops,
        rows_measured: rows.len(),
    })
}

fn best(rows: &[SweepRow]) -> &SweepRow {
    // Invariant: called after the coarse grid filled `rows`.
    rows.iter()
        .max_by(|a, b| a.throughput_ops.total_cmp(&b.throughput_ops))
        .expect("coarse rows exist")
}

/// The measured rows nearest below and above `x` (the coarse grid spans [0, 1]).
fn neighbours(rows: &[SweepRow], x: f64) -> (&SweepRow, &SweepRow) {
    let below = rows
        .iter()
        .filter(|r| r.rpc_fraction < x)
        .max_by(|a, b| a.rpc_fraction.total_cmp(&b.rpc_fraction));
    let above = rows
        .iter()
        .filter(|r| r.rpc_fraction > x)
        .min_by(|a, b| a.rpc_fraction.total_cmp(&b.rpc_fraction));
    // Invariant: 0 < x < 1 here would have both; x at an end is never refined (the coarse
    // grid holds 0 and 1), so both exist.
    (
        below.or(above).expect("a neighbour"),
        above.or(below).expect("a neighbour"),
    )
}
