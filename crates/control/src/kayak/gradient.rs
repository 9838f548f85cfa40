//! Kayak's X loop (Pseudocode 2): gradient ascent of the rate the R loop reaches, R(X).
//!
//! Each X period the loop averages what the R loop reported (each decision's heading:
//! the rate R is heading for at this X), takes the secant slope to the previous period's average,
//! and steps `ΔX = η · (dR/dX) / R` (the paper's step on the relative gradient, so that η
//! does not depend on the rate's scale), clamped to [0, 1] as Pseudocode 2 clamps.
//! Two named parts make it run on measured rates at all:
//! - **probe**: a secant needs two different X; when the last step was smaller than
//!   [`PROBE_STEP`], the next one is a probe of that size, alternating sides;
//! - **step bound**: one step moves X by at most [`STEP_MAX`]: a secant across two noisy
//!   rate averages can be arbitrarily steep.

use crate::error::{check_range, ControlError};

/// Default step size η, in X per unit of relative gradient (a rate 10 % higher per 0.1 of
/// X is a relative gradient of 1).
pub const ETA_DEFAULT: f64 = 0.3;

/// Size of a probe: smaller moves leave the secant to noise.
pub const PROBE_STEP: f64 = 0.03;

/// Largest move of X per period.
pub const STEP_MAX: f64 = 0.1;

/// The X loop's state (see the module docs).
#[derive(Clone, Debug)]
pub struct GradientAscent {
    /// η.
    eta: f64,
    /// The X applied.
    x: f64,
    /// The previous period's (X, mean rate).
    last: Option<(f64, f64)>,
    /// Sum and count of the rates reported this period.
    sum: f64,
    count: u32,
    /// The side of the next probe.
    probe_side: f64,
}

impl GradientAscent {
    /// A loop starting at `x` with step size `eta`.
    pub fn new(x: f64, eta: f64) -> Result<Self, ControlError> {
        check_range("start X", "[0, 1]", x, 0.0, 1.0)?;
        check_range("X step size", "(0, 10]", eta, 1e-9, 10.0)?;
        Ok(GradientAscent {
            eta,
            x,
            last: None,
            sum: 0.0,
            count: 0,
            probe_side: -1.0,
        })
    }

    /// The X to apply.
    pub fn x(&self) -> f64 {
        self.x
    }

    /// One rate the R loop reported at the current X.
    pub fn observe(&mut self, rate_ops: f64) {
        if rate_ops.is_finite() && rate_ops > 0.0 {
            self.sum += rate_ops;
            self.count += 1;
        }
    }

    /// Ends a period: steps X from what the period measured (holds if it measured nothing).
    pub fn step(&mut self) -> f64 {
        if self.count == 0 {
            return self.x;
        }
        let r = self.sum / self.count as f64;
        self.sum = 0.0;
        self.count = 0;
        let raw = match self.last {
            Some((x0, r0)) if (self.x - x0).abs() > 1e-9 => self.eta * (r - r0) / (self.x - x0) / r,
            _ => 0.0,
        };
        let mut dx = raw.clamp(-STEP_MAX, STEP_MAX);
        if dx.abs() < PROBE_STEP {
            dx = self.probe_side * PROBE_STEP;
            self.probe_side = -self.probe_side;
        }
        self.last = Some((self.x, r));
        self.x = (self.x + dx).clamp(0.0, 1.0);
        self.x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn climbs_to_an_interior_optimum_and_stays_near_it() {
        let r = |x: f64| 1e6 * (1.0 - 0.8 * (x - 0.35) * (x - 0.35));
        let mut g = GradientAscent::new(1.0, ETA_DEFAULT).unwrap();
        let mut late = Vec::new();
        for period in 0..200 {
            g.observe(r(g.x()));
            let x = g.step();
            if period >= 150 {
                late.push(x);
            }
        }
        let mean = late.iter().sum::<f64>() / late.len() as f64;
        assert!((mean - 0.35).abs() < 0.1, "mean X {mean}");
    }

    #[test]
    fn without_probes_a_flat_start_never_moves_and_steps_are_bounded() {
        // The first step has no secant: it is a probe.
        let mut g = GradientAscent::new(0.5, ETA_DEFAULT).unwrap();
        g.observe(1e6);
        assert!((g.step() - 0.47).abs() < 1e-12);
        // A wildly steep secant moves X by at most STEP_MAX.
        g.observe(10e6);
        assert!((g.step() - 0.37).abs() < 1e-12);
        // A period without a report holds X.
        assert!((g.step() - 0.37).abs() < 1e-12);
    }
}
