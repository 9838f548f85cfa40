//! The recent unloaded latency: the lowest median latency of a decision window over the
//! last [`BASELINE_WINDOW`] (BBR's windowed-min round trip; Envoy's and Netflix Vegas'
//! minRTT, re-measured on a schedule). The window's median, not its minimum: one lucky
//! request says nothing of the typical one, and the median of the gain cycle's drain
//! window (run below the capacity once a cycle) is the schedule that re-measures it.
//!
//! It tells how much of the SLO a request may spend waiting for a slot in the window
//! ([`super::inflight`]). Beside it, the lowest tail (the SLO's quantile of a window) over
//! the same span: the tail the machine has at its lightest recent load, which no margin
//! under the SLO may ask the loop to beat.

use crate::extremum::{Extreme, Stamp, Windowed};
use crate::time::Nanos;

/// How long a low latency is remembered: BBR's 10 s, long enough to span many gain cycles
/// (so each is compared with the lowest of several drains), short enough that a workload
/// whose requests got dearer is re-measured within one benchmark run.
pub const BASELINE_WINDOW: Nanos = Nanos::from_secs(10);

/// The windowed mins of window medians and tails (see the module docs).
#[derive(Clone, Debug)]
pub struct Baseline {
    median: Windowed,
    tail: Windowed,
}

impl Default for Baseline {
    fn default() -> Self {
        let window = || {
            Windowed::new(
                Extreme::Min,
                Stamp {
                    time: BASELINE_WINDOW.0,
                    count: 0,
                },
            )
        };
        Baseline {
            median: window(),
            tail: window(),
        }
    }
}

impl Baseline {
    /// Learns one decision window's median latency and tail at `now`.
    pub fn learn(&mut self, now: Nanos, median_ns: f64, tail_ns: f64) {
        let at = Stamp { time: now.0, count: 0 };
        for (w, v) in [(&mut self.median, median_ns), (&mut self.tail, tail_ns)] {
            if v > 0.0 {
                w.push(at, v);
            } else {
                w.expire(at);
            }
        }
    }

    /// The recent unloaded latency, ns.
    pub fn latency_ns(&self) -> Option<f64> {
        self.median.get()
    }

    /// The lowest recent tail, ns.
    pub fn tail_ns(&self) -> Option<f64> {
        self.tail.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_the_lowest_recent_median_and_is_re_measured_after_its_window() {
        let mut b = Baseline::default();
        b.learn(Nanos::from_ms(0), 300_000.0, 900_000.0);
        b.learn(Nanos::from_ms(100), 120_000.0, 800_000.0);
        b.learn(Nanos::from_ms(200), 500_000.0, 2_000_000.0);
        assert_eq!(b.latency_ns(), Some(120_000.0));
        assert_eq!(b.tail_ns(), Some(800_000.0));
        // The workload got dearer: after the window, the old low is forgotten.
        b.learn(BASELINE_WINDOW + Nanos::from_ms(200), 400_000.0, 1_500_000.0);
        assert_eq!(b.latency_ns(), Some(400_000.0));
        assert_eq!(b.tail_ns(), Some(1_500_000.0));
    }
}
