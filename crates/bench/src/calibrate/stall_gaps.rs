//! A machine's stalls, seen in a stream of completions: a gap between completions many
//! mean gaps long, ended by a request that was in flight all through it (its latency is at
//! least half the gap, so the gap is not an idle spell), is a stall of that length. The
//! calibration measures the stall process the simulator models this way.

use std::collections::VecDeque;

use ferry_control::Nanos;

/// A gap between completions counts as a stall when it is this many mean gaps long at the
/// rate completions arrive: at a Poisson rate, e⁻²⁰ of gaps are that long by chance.
pub const GAP_COMPLETIONS: f64 = 20.0;

/// The shortest gap that counts as a stall, whatever the rate: below a microsecond a gap is
/// the scheduler's grain, not a stall that queues anything.
pub const GAP_MIN: Nanos = Nanos::from_us(1);

/// Stalls remembered: their mean excess over the slack rests on up to this many.
pub const EPISODES_MAX: usize = 256;

/// How far back stalls are remembered: a VM's stall process changes over minutes, and ten
/// seconds hold ~50 of this VM's 5/s stalls.
pub const STALL_MEMORY: Nanos = Nanos::from_secs(10);

/// The stalls seen (see the module docs).
#[derive(Clone, Debug)]
pub struct StallEstimator {
    /// When the estimator started watching.
    started: Nanos,
    /// Time of the last completion.
    last: Option<Nanos>,
    /// (when it ended, its length in ns), oldest first.
    episodes: VecDeque<(Nanos, f64)>,
}

impl StallEstimator {
    /// An estimator watching from `now`.
    pub fn new(now: Nanos) -> Self {
        StallEstimator {
            started: now,
            last: None,
            episodes: VecDeque::new(),
        }
    }

    /// Learns a completion at `now` of a request that took `latency_ns`, completions
    /// arriving at about `completions_per_sec`.
    pub fn on_completion(&mut self, now: Nanos, latency_ns: u64, completions_per_sec: f64) {
        if let Some(last) = self.last {
            let gap = now.0.saturating_sub(last.0);
            let expected = if completions_per_sec > 0.0 {
                GAP_COMPLETIONS * 1e9 / completions_per_sec
            } else {
                f64::INFINITY
            };
            let long = gap as f64 > expected.max(GAP_MIN.0 as f64);
            // A request in flight all through the gap was held by it; an idle spell ends
            // with a request that just started.
            if long && 2 * latency_ns >= gap {
                if self.episodes.len() == EPISODES_MAX {
                    self.episodes.pop_front();
                }
                self.episodes.push_back((now, gap as f64));
            }
        }
        self.last = Some(self.last.map_or(now, |l| l.max(now)));
    }

    fn forget_old(&mut self, now: Nanos) {
        while self
            .episodes
            .front()
            .is_some_and(|(t, _)| now.0.saturating_sub(t.0) > STALL_MEMORY.0)
        {
            self.episodes.pop_front();
        }
    }

    /// Stalls per second, over what is remembered.
    pub fn rate_hz(&mut self, now: Nanos) -> f64 {
        self.forget_old(now);
        let span = now.0.saturating_sub(self.started.0).min(STALL_MEMORY.0);
        if span == 0 {
            return 0.0;
        }
        self.episodes.len() as f64 / (span as f64 / 1e9)
    }

    /// Mean stall length, ns (0 if none).
    pub fn mean_length_ns(&self) -> f64 {
        if self.episodes.is_empty() {
            return 0.0;
        }
        self.episodes.iter().map(|(_, d)| d).sum::<f64>() / self.episodes.len() as f64
    }

    /// Spread of the stalls' lengths, standard deviation over mean; None under two stalls.
    pub fn length_cv(&self) -> Option<f64> {
        let n = self.episodes.len();
        let mean = self.mean_length_ns();
        if n < 2 || mean <= 0.0 {
            return None;
        }
        let var = self.episodes.iter().map(|(_, d)| (d - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        Some(var.sqrt() / mean)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Completions every 10 µs (100 k/s) for `secs`, with a stall of `stall` every
    /// `every`: nothing completes during a stall, and the first completion after it has
    /// waited through it.
    fn feed(est: &mut StallEstimator, secs: u64, every: Nanos, stall: Nanos) {
        let mut t = 0u64;
        let mut next_stall = every.0;
        while t < secs * 1_000_000_000 {
            let mut latency = 50_000;
            if t >= next_stall {
                t += stall.0;
                latency += stall.0;
                next_stall += every.0;
            }
            t += 10_000;
            est.on_completion(Nanos(t), latency, 100_000.0);
        }
    }

    #[test]
    fn stalls_are_seen_as_gaps_with_their_rate_and_length() {
        let mut est = StallEstimator::new(Nanos::ZERO);
        feed(&mut est, 5, Nanos::from_ms(200), Nanos::from_ms(2));
        let now = Nanos::from_secs(5);
        let rate = est.rate_hz(now);
        assert!((rate - 5.0).abs() < 0.5, "{rate}/s");
        let mean = est.mean_length_ns();
        assert!((mean / 2_010_000.0 - 1.0).abs() < 0.01, "{mean} ns");
        // Stalls all of one length have no spread.
        assert!(est.length_cv().unwrap() < 0.01, "{:?}", est.length_cv());
    }

    #[test]
    fn an_idle_spell_is_no_stall() {
        let mut est = StallEstimator::new(Nanos::ZERO);
        est.on_completion(Nanos::from_ms(1), 50_000, 100_000.0);
        // 5 ms without requests, then one that took 50 µs.
        est.on_completion(Nanos::from_ms(6), 50_000, 100_000.0);
        assert_eq!(est.rate_hz(Nanos::from_secs(1)), 0.0);
    }
}
