//! How X moves once a placement is held: toward balancing the two sides' measured
//! utilisation, by a step the load model sizes, inside a dead band that noise cannot
//! cross, and far slower than the R loop settles.
//!
//! The capacity at X is the rate at which the busier side is full; it is highest where
//! both are equally busy (Pyxis §IV-A). So the side the CPUs say is busier tells the
//! direction (storage busier: ship less compute, lower X), and the model's balanced X on
//! the capture-scaled costs tells how far. Where the two disagree X stays: the model
//! weighs what the CPUs do not (the network links, which a mix near its turning point may
//! be bound by: a step the CPUs asked for there crossed a peak narrower than the step and
//! halved R). Inside the
//! dead band X stays (Kubernetes' autoscaler leaves a 10 % tolerance band for the same
//! reason); a climb along the measured goodput there (Kayak's X loop) is not built. X stays
//! inside [`bounds`] so that both placements keep running and both costs stay measured (a
//! placement not in use would keep an old workload's costs), and no further: the minority
//! placement carries at most half the SLO quantile's allowance of calls, so its latency
//! never sets the tail (at 2 % of calls a placement whose runs take many round trips set
//! the p99 of a mix that was otherwise all remote).

use crate::time::Nanos;

/// Time between two steps: ten R-loop settlings (a decision or two of 50–100 ms each)
/// and more, so each step sees the rate loop settled at the X before it.
pub const X_PERIOD: Nanos = Nanos::from_secs(1);

/// Utilisation gap (busier side less the other, in shares of their cores) under which X
/// stays: a span's utilisations are known to a few percent, and at a balance within 10 %
/// the capacity is within 5 % of its peak.
pub const DEAD_BAND: f64 = 0.1;

/// Largest step: 0.1 of X moves the capacity by 10–30 % on the workloads measured, which
/// the R loop's feed-forward can follow in one decision.
pub const STEP_MAX: f64 = 0.1;

/// Smallest step: the resolution a period's measurement can tell apart.
pub const STEP_MIN: f64 = 0.02;

/// The share of the SLO quantile's allowance of calls (1 % under a p99) the minority
/// placement may carry: half, so it cannot set the tail even if every one of its calls is
/// slow.
pub const MINORITY_SHARE: f64 = 0.5;

/// The range X stays in under an SLO on the `quantile`: (1 − q) / 2 from either end.
pub fn bounds(quantile: f64) -> (f64, f64) {
    let edge = (1.0 - quantile).clamp(0.0, 1.0) * MINORITY_SHARE;
    (edge, 1.0 - edge)
}

/// Each side's busy share of its cores over one period.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Utilisation {
    /// The app side's.
    pub app: f64,
    /// The storage side's.
    pub storage: f64,
}

/// The X after one period at `x` whose utilisations were `u`, `target` being the
/// model's balanced X (if it has one), X staying within `(lo, hi)`; None inside the dead
/// band, where the CPUs do not say which way, and where the model
/// says the other way.
pub fn step(x: f64, target: Option<f64>, u: Utilisation, (lo, hi): (f64, f64)) -> Option<f64> {
    let gap = u.storage - u.app;
    if !gap.is_finite() || gap.abs() <= DEAD_BAND {
        return None;
    }
    // Storage busier: less remote.
    let direction = -gap.signum();
    let size = match target {
        Some(t) if (t - x) * direction > 0.0 => (t - x).abs().clamp(STEP_MIN, STEP_MAX),
        Some(_) => return None,
        None => STEP_MIN,
    };
    Some((x + direction * size).clamp(lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn u(app: f64, storage: f64) -> Utilisation {
        Utilisation { app, storage }
    }

    #[test]
    fn moves_toward_the_idler_side_by_the_models_step_within_bounds() {
        let b = bounds(0.99);
        assert!((b.0 - 0.005).abs() < 1e-12 && (b.1 - 0.995).abs() < 1e-12, "{b:?}");
        let step = |x, t, u| step(x, t, u, b).unwrap();
        // Storage busier: X falls by the model's distance, at most STEP_MAX.
        assert!((step(0.5, Some(0.45), u(0.6, 0.9)) - 0.45).abs() < 1e-12);
        assert!((step(0.5, Some(0.1), u(0.6, 0.9)) - 0.4).abs() < 1e-12);
        // The model says X is close: the smallest step. Where it disagrees (the links
        // bind, say), X stays.
        assert!((step(0.5, Some(0.49), u(0.6, 0.9)) - 0.48).abs() < 1e-12);
        assert_eq!(super::step(0.5, Some(0.7), u(0.6, 0.9), b), None);
        // App busier: X rises, never past the bound.
        assert_eq!(step(0.98, Some(1.0), u(0.95, 0.3)), b.1);
        // Inside the dead band the CPUs say nothing.
        assert_eq!(super::step(0.5, Some(0.1), u(0.8, 0.85), b), None);
    }
}
