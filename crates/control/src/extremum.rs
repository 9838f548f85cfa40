//! Windowed extremes: the largest (or smallest) value seen over the last stretch of a
//! clock, the estimator TCP BBR keeps its bandwidth and its round trip in (Linux
//! `include/linux/win_minmax.h`). A value that ages out of the window is forgotten, so a
//! passed event leaves no trace beyond the window; nothing grows with history.
//!
//! Each sample is stamped with two clocks, time and a count of events (decisions), and
//! ages out once it is older than the window on both: a window of "three seconds and
//! three gain cycles" keeps a rate through a burst of quick decisions and through slow
//! ones alike. A monotone queue holds only the samples that can still become the extreme,
//! so reading it is O(1) and a push amortised O(1).

use std::collections::VecDeque;

/// Most samples a window keeps: far more than a window of decisions ever holds (a
/// monotone queue holds only a decreasing run), so it bounds memory without ever binding
/// in use; past it the oldest, which is the extreme, goes first.
pub const SAMPLES_MAX: usize = 256;

/// Which extreme a window keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extreme {
    /// The largest value (a delivered rate, BBR's bandwidth filter).
    Max,
    /// The smallest value (a latency, BBR's min-RTT filter).
    Min,
}

/// When a sample was taken, on both clocks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stamp {
    /// Time, ns.
    pub time: u64,
    /// Events counted (decisions).
    pub count: u64,
}

/// The extreme of the samples within the window (see the module docs).
#[derive(Clone, Debug)]
pub struct Windowed {
    extreme: Extreme,
    /// A sample ages out once it is older than this on both clocks.
    span: Stamp,
    /// (stamp, value), stamps increasing; values strictly worse than the front toward the
    /// back (a later sample that beats an earlier one removes it).
    samples: VecDeque<(Stamp, f64)>,
}

impl Windowed {
    /// A window of the `extreme` whose samples age out once older than `span` on both
    /// clocks (a count of 0: time alone).
    pub fn new(extreme: Extreme, span: Stamp) -> Self {
        Windowed {
            extreme,
            span,
            samples: VecDeque::new(),
        }
    }

    fn beats(&self, a: f64, b: f64) -> bool {
        match self.extreme {
            Extreme::Max => a >= b,
            Extreme::Min => a <= b,
        }
    }

    /// Adds `value` stamped `at` (stamps never decrease; NaN is ignored).
    pub fn push(&mut self, at: Stamp, value: f64) {
        if !value.is_finite() {
            return;
        }
        while let Some(&(_, last)) = self.samples.back() {
            if self.beats(value, last) {
                self.samples.pop_back();
            } else {
                break;
            }
        }
        self.samples.push_back((at, value));
        if self.samples.len() > SAMPLES_MAX {
            self.samples.pop_front();
        }
        self.expire(at);
    }

    /// Forgets the samples older than the window at `now`.
    pub fn expire(&mut self, now: Stamp) {
        while let Some(&(at, _)) = self.samples.front() {
            let old = now.time.saturating_sub(at.time) > self.span.time
                && now.count.saturating_sub(at.count) >= self.span.count;
            if old {
                self.samples.pop_front();
            } else {
                break;
            }
        }
    }

    /// The extreme of the samples in the window, if any.
    pub fn get(&self) -> Option<f64> {
        self.samples.front().map(|&(_, v)| v)
    }

    /// Multiplies every sample by `factor` (> 0): what the window knew, moved to a curve
    /// that an outer loop moved by a known ratio.
    pub fn scale(&mut self, factor: f64) {
        if factor.is_finite() && factor > 0.0 {
            for (_, v) in &mut self.samples {
                *v *= factor;
            }
        }
    }

    /// Forgets the samples at least as extreme as `bound` (for a max: those ≥ it): what
    /// later evidence disproved.
    pub fn forget_beyond(&mut self, bound: f64) {
        while let Some(&(_, v)) = self.samples.front() {
            if self.beats(v, bound) {
                self.samples.pop_front();
            } else {
                break;
            }
        }
    }

    /// Forgets every sample.
    pub fn clear(&mut self) {
        self.samples.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(time: u64) -> Stamp {
        Stamp { time, count: 0 }
    }

    #[test]
    fn keeps_the_max_of_the_window_and_forgets_what_ages_out() {
        let mut w = Windowed::new(Extreme::Max, at(10));
        assert_eq!(w.get(), None);
        w.push(at(0), 5.0);
        w.push(at(3), 9.0);
        w.push(at(6), 7.0);
        assert_eq!(w.get(), Some(9.0));
        // 9 was stamped 3: at 14 it is 11 old and gone; 7 (stamped 6) is the max.
        w.push(at(14), 2.0);
        assert_eq!(w.get(), Some(7.0));
        w.expire(at(30));
        assert_eq!(w.get(), None);
    }

    #[test]
    fn a_sample_ages_out_only_once_old_on_both_clocks() {
        let mut w = Windowed::new(Extreme::Max, Stamp { time: 10, count: 3 });
        w.push(Stamp { time: 0, count: 0 }, 9.0);
        // Long ago in time, but only two events since.
        w.expire(Stamp { time: 100, count: 2 });
        assert_eq!(w.get(), Some(9.0));
        // Many events, but recent.
        w.expire(Stamp { time: 5, count: 50 });
        assert_eq!(w.get(), Some(9.0));
        w.expire(Stamp { time: 100, count: 3 });
        assert_eq!(w.get(), None);
    }

    #[test]
    fn keeps_the_min_and_scales() {
        let mut w = Windowed::new(Extreme::Min, at(100));
        for (t, v) in [(0, 8.0), (1, 3.0), (2, 6.0), (3, f64::NAN)] {
            w.push(at(t), v);
        }
        assert_eq!(w.get(), Some(3.0));
        w.scale(2.0);
        assert_eq!(w.get(), Some(6.0));
        // 3 removed the 8 before it; the 6 after it stayed behind it: [6, 12] now, and
        // forgetting what is at or below 6 leaves 12.
        w.forget_beyond(6.0);
        assert_eq!(w.get(), Some(12.0));
        w.clear();
        assert_eq!(w.get(), None);
    }

    #[test]
    fn memory_is_bounded_however_many_samples_come() {
        let mut w = Windowed::new(Extreme::Max, at(u64::MAX));
        // A falling run is the worst case: every sample could still become the max.
        for t in 0..10_000u64 {
            w.push(at(t), 1e6 - t as f64);
        }
        assert!(w.samples.len() <= SAMPLES_MAX);
    }
}
