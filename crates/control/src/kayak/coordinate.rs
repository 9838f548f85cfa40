//! Kayak+ (Pyxis §II and §VI's baseline): Kayak's gradient ascent of R, one function's
//! split at a time. The X loop climbs function k's share sent remote for
//! [`STEPS_PER_FUNCTION_DEFAULT`] steps while every other function's share stays, then
//! moves on to function k + 1, round robin over the functions seen. It can reach any split,
//! the optimum's included, but its search space grows with the number of functions, which
//! is what Pyxis' turning point avoids.

use crate::error::{check_range, ControlError};
use crate::kayak::gradient::GradientAscent;
use crate::placement::mix::FUNCTIONS_MAX;

/// Default X-loop steps spent on one function before the next: half a second at the
/// paper's 20 Hz, a few probes and climbing steps of [`super::gradient`].
pub const STEPS_PER_FUNCTION_DEFAULT: u32 = 10;

/// The per-function X loop (see the module docs).
#[derive(Clone, Debug)]
pub struct CoordinateAscent {
    /// Each function's share sent remote.
    split: Vec<f64>,
    /// Completions seen per function, for the remote share reported.
    counts: Vec<u64>,
    /// The function being climbed.
    current: usize,
    /// The climb of that function's share.
    ascent: GradientAscent,
    steps: u32,
    steps_per_function: u32,
    x_init: f64,
    eta: f64,
}

impl CoordinateAscent {
    /// Every function starts at `x_init`; steps of size `eta` (as Kayak's), moving on to
    /// the next function every `steps_per_function` steps.
    pub fn new(x_init: f64, eta: f64, steps_per_function: u32) -> Result<Self, ControlError> {
        check_range("steps per function", "[1, 1e6]", steps_per_function as f64, 1.0, 1e6)?;
        Ok(CoordinateAscent {
            split: Vec::new(),
            counts: Vec::new(),
            current: 0,
            ascent: GradientAscent::new(x_init, eta)?,
            steps: 0,
            steps_per_function,
            x_init,
            eta,
        })
    }

    fn slot(fn_idx: u32) -> usize {
        (fn_idx as usize).min(FUNCTIONS_MAX - 1)
    }

    /// Function `fn_idx`'s share sent remote.
    pub fn x(&self, fn_idx: u32) -> f64 {
        self.split.get(Self::slot(fn_idx)).copied().unwrap_or(self.x_init)
    }

    /// Counts a completion of function `fn_idx`.
    pub fn completed(&mut self, fn_idx: u32) {
        let i = Self::slot(fn_idx);
        if self.split.len() <= i {
            self.split.resize(i + 1, self.x_init);
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += 1;
    }

    /// The share of the completions seen that was sent remote, by the split in use.
    pub fn remote_share(&self) -> f64 {
        let total: u64 = self.counts.iter().sum();
        if total == 0 {
            return self.x_init;
        }
        self.split
            .iter()
            .zip(&self.counts)
            .map(|(x, &n)| x * n as f64)
            .sum::<f64>()
            / total as f64
    }

    /// A rate the R loop heads for at the split in use.
    pub fn observe(&mut self, rate_ops: f64) {
        self.ascent.observe(rate_ops);
    }

    /// One X-loop step on the current function; whether the split moved.
    pub fn step(&mut self) -> bool {
        if self.split.is_empty() {
            return false;
        }
        let before = self.split[self.current];
        self.split[self.current] = self.ascent.step();
        let moved = (self.split[self.current] - before).abs() > 1e-12;
        self.steps += 1;
        if self.steps >= self.steps_per_function {
            self.steps = 0;
            self.current = (self.current + 1) % self.split.len();
            // Invariant: the share is in [0, 1] and eta was checked at construction.
            self.ascent = GradientAscent::new(self.split[self.current], self.eta).expect("valid ascent");
        }
        moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// R peaks where function 0 is all remote and function 1 at 0.3.
    fn rate(c: &CoordinateAscent) -> f64 {
        100_000.0 * (2.0 - (1.0 - c.x(0)).abs() - (c.x(1) - 0.3).abs())
    }

    #[test]
    fn climbs_one_function_at_a_time_toward_the_joint_optimum() {
        let mut c = CoordinateAscent::new(0.5, 0.3, 10).unwrap();
        c.completed(0);
        c.completed(1);
        for step in 0..200 {
            c.observe(rate(&c));
            let before = (c.x(0), c.x(1));
            c.step();
            // Only the function being climbed moves.
            let which = (step / 10) % 2;
            assert_eq!(
                if which == 0 { before.1 } else { before.0 },
                if which == 0 { c.x(1) } else { c.x(0) }
            );
        }
        assert!(c.x(0) > 0.9, "{}", c.x(0));
        assert!((c.x(1) - 0.3).abs() < 0.1, "{}", c.x(1));
        assert!(CoordinateAscent::new(0.5, 0.3, 0).is_err());
        let fresh = CoordinateAscent::new(0.25, 0.3, 10).unwrap();
        assert_eq!((fresh.x(7), fresh.remote_share()), (0.25, 0.25));
    }
}
