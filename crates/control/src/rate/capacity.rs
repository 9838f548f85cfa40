//! The capacity the loop remembers: the highest rate delivered by a recent decision whose
//! window met the SLO (BBR's windowed-max bandwidth filter, judged by the SLO instead of
//! by loss).
//!
//! A rate, never a debt: a cruising window over the SLO does not lower it (the margin and
//! the cut answer that), a probe over it at the remembered rate disproves that rate (the
//! filter's max of noisy windows is a lucky one's, and a probe that keeps testing a rate
//! the machine meets one time in two keeps breaking the SLO), and what it holds ages out
//! once it is older than [`CAPACITY_WINDOW`] and [`CAPACITY_DECISIONS`] decisions both, so a capacity the machine no longer has is
//! forgotten within a few seconds and gain cycles, while one stall or overload (however
//! many quick decisions it makes) never erases what the windows around it proved.

use crate::extremum::{Extreme, Stamp, Windowed};
use crate::time::Nanos;

/// Decisions the filter remembers a delivered rate for, at least: three gain cycles
/// ([`super::cycle::PHASES`]), so each probe's result is held until two more probes have
/// refreshed it (BBR keeps its bandwidth for ten round trips, about one gain cycle and a
/// quarter: its probes do not break a latency target, ours may, so one failed probe must
/// not cost the memory).
pub const CAPACITY_DECISIONS: u64 = 3 * super::cycle::PHASES as u64;

/// Time the filter remembers a delivered rate for, at least: a stall or an overload
/// decides quickly and often, and must not age the memory by its decisions alone.
pub const CAPACITY_WINDOW: Nanos = Nanos::from_secs(3);

/// A failed probe disproves what the filter holds from this share under its rate up: a
/// window's delivered rate is its offered rate within a percent or two of noise.
pub const DISPROOF_TOLERANCE: f64 = 0.02;

/// The windowed max of delivered rates (see the module docs).
#[derive(Clone, Debug)]
pub struct CapacityFilter {
    max: Windowed,
    /// Decisions counted so far: the filter's second clock.
    decisions: u64,
}

impl Default for CapacityFilter {
    fn default() -> Self {
        CapacityFilter {
            max: Windowed::new(
                Extreme::Max,
                Stamp {
                    time: CAPACITY_WINDOW.0,
                    count: CAPACITY_DECISIONS,
                },
            ),
            decisions: 0,
        }
    }
}

impl CapacityFilter {
    /// Counts one decision at `now`; `delivered_ops` is what it delivered if its window
    /// met the SLO.
    pub fn learn(&mut self, now: Nanos, delivered_ops: Option<f64>) {
        self.decisions += 1;
        let at = Stamp {
            time: now.0,
            count: self.decisions,
        };
        match delivered_ops {
            Some(rate) if rate > 0.0 => self.max.push(at, rate),
            _ => self.max.expire(at),
        }
    }

    /// The capacity remembered, requests per second.
    pub fn capacity_ops(&self) -> Option<f64> {
        self.max.get()
    }

    /// Forgets the rates a probe at `offered_ops` failed to meet the SLO at: what it
    /// remembered at or above that rate was a lucky window's, or the machine's no longer.
    pub fn disproved(&mut self, offered_ops: f64) {
        self.max.forget_beyond(offered_ops * (1.0 - DISPROOF_TOLERANCE));
    }

    /// Moves what it remembers by `factor`: an outer loop moved the curve by a ratio it
    /// predicts (X moved), and the memory follows instead of being thrown away.
    pub fn scale(&mut self, factor: f64) {
        self.max.scale(factor);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_the_best_met_rate_through_failures_and_forgets_it_in_time() {
        let mut f = CapacityFilter::default();
        let mut now = Nanos::ZERO;
        let mut step = |f: &mut CapacityFilter, ms: u64, rate: Option<f64>| {
            now = now.saturating_add(Nanos::from_ms(ms));
            f.learn(now, rate);
        };
        step(&mut f, 100, Some(50_000.0));
        // Windows over the SLO (None) and lower rates do not lower it.
        for _ in 0..5 {
            step(&mut f, 100, None);
            step(&mut f, 100, Some(40_000.0));
        }
        assert_eq!(f.capacity_ops(), Some(50_000.0));
        // A burst of quick decisions (a stall deciding every millisecond) keeps it.
        for _ in 0..100 {
            step(&mut f, 1, None);
        }
        assert_eq!(f.capacity_ops(), Some(50_000.0));
        // Three seconds and CAPACITY_DECISIONS decisions later it holds only what they
        // delivered.
        for _ in 0..CAPACITY_DECISIONS.max(30) {
            step(&mut f, 100, Some(40_000.0));
        }
        assert_eq!(f.capacity_ops(), Some(40_000.0));
        f.scale(1.5);
        assert_eq!(f.capacity_ops(), Some(60_000.0));
        // A probe at 60k that failed disproves it; what was proven below stays.
        step(&mut f, 100, Some(50_000.0));
        f.disproved(60_000.0);
        assert_eq!(f.capacity_ops(), Some(50_000.0));
    }
}
