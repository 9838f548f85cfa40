//! A step up goes at most halfway toward a rate known to miss: the safeguard of a
//! safeguarded Newton root-finder (rtsafe), applied to a noisy curve that moves.
//!
//! On a cliff-like knee the tail below the cliff says nothing about how near it is: the
//! simulator's 10 + 10-core light work had a window p99.2 of ~100 µs up to 3.9 Mops and a
//! collapse just above, and every approach from the flat part ended in a collapse (a
//! burst of slow completions larger than a judged window's whole allowance). Two rates are
//! known to miss without trying them again:
//! - the lowest rate recently seen missing the target, from a window that measured it (not
//!   a backlog from before draining, see [`Measurement::measured_backlog`]: such a miss,
//!   recorded at the rate R had been cut to, held R 25 % under the knee for seconds); it
//!   relaxes upward by [`MISS_RELAX`] per second, so a miss that was luck, or a curve that
//!   moved, stops binding;
//! - the capacity the costs predict: a side whose cores are full misses any SLO.
//!
//! A step up from R goes at most to √(R · end), the geometric midpoint, and never above the
//! capacity.

use crate::rate::window::Measurement;

/// Relative upward relaxation of the remembered miss per second: a miss stops binding
/// after a few seconds, and until then approaches halve the distance to it.
pub const MISS_RELAX: f64 = 0.1;

/// The rates known to miss.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bracket {
    /// Lowest rate recently seen missing the target (∞: none).
    miss_ops: f64,
}

impl Default for Bracket {
    fn default() -> Self {
        Bracket {
            miss_ops: f64::INFINITY,
        }
    }
}

impl Bracket {
    /// Raises the known miss to at least `miss_ops`: an outer loop predicts the curve
    /// crosses the target no lower (a miss measured on another curve is no evidence
    /// against that).
    pub fn at_least(&mut self, miss_ops: f64) {
        self.miss_ops = self.miss_ops.max(miss_ops);
    }

    /// The lowest rate recently seen missing (∞ if none).
    pub fn miss_ops(&self) -> f64 {
        self.miss_ops
    }

    /// Learns from window `m`, measured at `rate_ops`, whether that rate `missed`.
    pub fn learn(&mut self, m: &Measurement, rate_ops: f64, missed: bool) {
        self.miss_ops *= 1.0 + MISS_RELAX * m.span.as_secs_f64();
        if missed && !m.measured_backlog() {
            self.miss_ops = self.miss_ops.min(rate_ops);
        }
    }

    /// The curve moved by `factor` for another reason than R (X moved).
    pub fn scale(&mut self, factor: f64) {
        self.miss_ops *= factor;
    }

    /// `proposal` from `rate_ops`, a step up going at most halfway toward the nearer of the
    /// known miss and `capacity_ops`.
    pub fn limit(&self, rate_ops: f64, proposal: f64, capacity_ops: f64) -> f64 {
        let end = self.miss_ops.min(capacity_ops);
        let limited = if proposal <= rate_ops {
            proposal
        } else if end > rate_ops {
            proposal.min((rate_ops * end).sqrt())
        } else {
            rate_ops
        };
        limited.min(capacity_ops)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quantile::LatencySketch;
    use crate::time::Nanos;

    /// A 5 ms window of 1000 fresh completions and `stale` ones.
    fn window(stale: u64) -> Measurement {
        Measurement {
            now: Nanos::ZERO,
            span: Nanos::from_ms(5),
            count: 1_000,
            slow: 0,
            latency: LatencySketch::new(),
            stale,
            stale_slow: 0,
            full: true,
        }
    }

    /// The worst overshoot of a wall at 1 Mops after the first 50 decisions of a loop that
    /// always wants to double (and halves when over), with or without the bracket.
    fn worst_late_overshoot(with_bracket: bool) -> f64 {
        let mut b = Bracket::default();
        let mut r = 100_000.0f64;
        let mut worst = 0.0f64;
        for i in 0..400 {
            let missed = r > 1e6;
            if i >= 50 {
                worst = worst.max(r / 1e6 - 1.0);
            }
            b.learn(&window(0), r, missed);
            let proposal = if missed { r / 2.0 } else { 2.0 * r };
            r = if with_bracket {
                b.limit(r, proposal, f64::INFINITY)
            } else {
                proposal
            };
        }
        worst
    }

    #[test]
    fn a_cliff_once_hit_is_approached_by_bisection() {
        // Without the bracket every other step doubles past the wall; with it, once the wall
        // was hit, approaches bisect toward it and overshoot it by less than 1 %.
        assert!(worst_late_overshoot(false) >= 0.5);
        let worst = worst_late_overshoot(true);
        assert!(worst < 0.01, "worst overshoot {worst}");
    }

    #[test]
    fn capacity_is_a_miss_known_without_measuring_it() {
        let b = Bracket::default();
        assert!((b.limit(1e6, 2e6, 1.21e6) - 1.1e6).abs() < 1.0);
        assert_eq!(b.limit(2e6, 4e6, 1.5e6), 1.5e6);
        // Steps down are the core's business.
        assert_eq!(b.limit(1e6, 0.5e6, 1.21e6), 0.5e6);
    }

    #[test]
    fn a_miss_relaxes_and_moves_with_the_curve() {
        let mut b = Bracket::default();
        b.learn(&window(0), 1e6, true);
        let mut second = window(0);
        second.span = Nanos::from_secs(1);
        b.learn(&second, 0.5e6, false);
        assert!((b.miss_ops() - 1.1e6).abs() < 1.0, "{}", b.miss_ops());
        b.scale(2.0);
        assert!((b.miss_ops() - 2.2e6).abs() < 1.0);
    }

    #[test]
    fn a_backlog_draining_is_no_miss_of_the_current_rate() {
        let mut b = Bracket::default();
        // A window where a third of the completions were admitted before the last change.
        b.learn(&window(500), 1e6, true);
        assert_eq!(b.miss_ops(), f64::INFINITY);
        b.learn(&window(50), 1e6, true);
        assert_eq!(b.miss_ops(), 1e6);
    }
}
