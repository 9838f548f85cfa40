//! The request arbiter: per request, a Bernoulli(X) draw picks remote or local (Kayak §3.2).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::error::{check_range, ControlError};
use crate::policy::Placement;

/// Draws `Remote` with probability X from a seeded generator, so runs are reproducible.
#[derive(Clone, Debug)]
pub struct Arbiter {
    /// Probability of `Remote`.
    x: f64,
    /// Seeded source of the draws.
    rng: ChaCha8Rng,
}

impl Arbiter {
    /// An arbiter sending fraction `x` remote, seeded with `seed`.
    pub fn new(x: f64, seed: u64) -> Result<Self, ControlError> {
        check_range("rpc fraction", "[0, 1]", x, 0.0, 1.0)?;
        Ok(Arbiter {
            x,
            rng: ChaCha8Rng::seed_from_u64(seed),
        })
    }

    /// The current remote probability X.
    pub fn x(&self) -> f64 {
        self.x
    }

    /// Sets X, clamped to [0, 1] (NaN keeps the old value).
    pub fn set_x(&mut self, x: f64) {
        if !x.is_nan() {
            self.x = x.clamp(0.0, 1.0);
        }
    }

    /// One Bernoulli(X) draw. X = 0 and X = 1 never consume randomness-dependent outcomes:
    /// `gen::<f64>()` is in [0, 1), so `< 0` is never and `< 1` is always true.
    pub fn place(&mut self) -> Placement {
        self.draw(self.x)
    }

    /// Draws with probability `x` of remote instead of X (one function's share of a mix).
    pub fn draw(&mut self, x: f64) -> Placement {
        if self.rng.gen::<f64>() < x {
            Placement::Remote
        } else {
            Placement::Local
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fraction_matches_x_and_extremes_are_exact() {
        let mut a = Arbiter::new(0.3, 7).unwrap();
        let n = 100_000;
        let remote = (0..n).filter(|_| a.place() == Placement::Remote).count();
        let frac = remote as f64 / n as f64;
        assert!((frac - 0.3).abs() < 0.01, "{frac}");
        a.set_x(1.0);
        assert!((0..1000).all(|_| a.place() == Placement::Remote));
        a.set_x(0.0);
        assert!((0..1000).all(|_| a.place() == Placement::Local));
        a.set_x(7.0);
        assert_eq!(a.x(), 1.0);
        assert!(Arbiter::new(-0.1, 1).is_err());
    }

    #[test]
    fn same_seed_same_draws() {
        let mut a = Arbiter::new(0.5, 42).unwrap();
        let mut b = Arbiter::new(0.5, 42).unwrap();
        for _ in 0..1000 {
            assert_eq!(a.place(), b.place());
        }
    }
}
