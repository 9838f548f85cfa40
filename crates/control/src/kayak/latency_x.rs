//! Algorithm I's X step (Kayak §4.2, the strawman ordering): gradient *descent* of the
//! sampled tail latency in X at the current rate, X ← X − η dT/dX.
//!
//! Each (fast) period the loop takes the tail of the completions that finished in it and
//! the secant to the previous period's, with the same probe and step bound as the X loop
//! of Algorithm II (see [`super::gradient`]). Under sampled tails this loop chases noise:
//! Kayak's Fig. 7 shows it oscillating, and reproducing that is what it is for.

use crate::kayak::gradient::{PROBE_STEP, STEP_MAX};
use crate::quantile::LatencySketch;

/// Default step size, in X per unit of relative latency gradient.
pub const LATENCY_ETA_DEFAULT: f64 = 0.2;

/// The X-R ordering's X loop.
#[derive(Clone)]
pub struct LatencyDescent {
    /// η.
    eta: f64,
    /// The quantile of the tail it descends.
    quantile: f64,
    /// The X applied.
    x: f64,
    /// This period's completions.
    period: LatencySketch,
    /// The previous period's (X, tail).
    last: Option<(f64, f64)>,
    /// Side of the next probe.
    probe_side: f64,
}

impl LatencyDescent {
    /// Starts at `x`, descending the `quantile` latency with step size `eta`.
    pub fn new(x: f64, quantile: f64, eta: f64) -> Self {
        LatencyDescent {
            eta,
            quantile,
            x: x.clamp(0.0, 1.0),
            period: LatencySketch::new(),
            last: None,
            probe_side: 1.0,
        }
    }

    /// The X to apply.
    pub fn x(&self) -> f64 {
        self.x
    }

    /// One completion's latency.
    pub fn observe(&mut self, latency_ns: u64) {
        self.period.record(latency_ns as f64);
    }

    /// Ends a period: steps X down the latency's secant slope.
    pub fn step(&mut self) -> f64 {
        let Some(t) = self.period.quantile(self.quantile) else {
            return self.x;
        };
        self.period.clear();
        let raw = match self.last {
            Some((x0, t0)) if (self.x - x0).abs() > 1e-9 => -self.eta * (t - t0) / (self.x - x0) / t,
            _ => 0.0,
        };
        let mut dx = raw.clamp(-STEP_MAX, STEP_MAX);
        if dx.abs() < PROBE_STEP {
            dx = self.probe_side * PROBE_STEP;
            self.probe_side = -self.probe_side;
        }
        self.last = Some((self.x, t));
        self.x = (self.x + dx).clamp(0.0, 1.0);
        self.x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descends_a_convex_latency() {
        let t = |x: f64| 100_000.0 * (1.0 + 4.0 * (x - 0.3) * (x - 0.3));
        let mut d = LatencyDescent::new(1.0, 0.99, LATENCY_ETA_DEFAULT);
        let mut late = Vec::new();
        for period in 0..300 {
            d.observe(t(d.x()) as u64);
            let x = d.step();
            if period >= 250 {
                late.push(x);
            }
        }
        let mean = late.iter().sum::<f64>() / late.len() as f64;
        assert!((mean - 0.3).abs() < 0.1, "mean X {mean}");
    }
}
