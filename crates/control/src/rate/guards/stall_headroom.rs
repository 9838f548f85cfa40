//! Headroom for the stalls the machine has: the operating point stays where a stall's
//! backlog still drains inside the allowance of every judged window.
//!
//! **The stalls.** A stall (a VM descheduled, an interrupt storm, a pause of the process)
//! freezes a node: nothing completes while it lasts. So the estimator watches the gaps
//! between completions: a gap of g longer than [`GAP_COMPLETIONS`] mean gaps at the rate
//! completions arrive, ended by a completion that was in flight all through it (its
//! latency is at least half the gap, so the gap is not an idle spell), is a stall of
//! length g. It keeps the last [`EPISODES_MAX`] stalls of the last [`STALL_MEMORY`]: their
//! rate λ and their lengths D.
//!
//! **Their price.** A stall of length D at a node loaded ρ holds every request that
//! arrives while it lasts or while its backlog drains: a request arriving t after it began
//! waits `D − (1 − ρ) t`. With slack h (the SLO less a typical request's latency) the
//! requests that miss are those arriving in the first `(D − h) / (1 − ρ)`: a stall costs
//! `R (D − h)⁺ / (1 − ρ)` slow requests, and the stalls of a window of length T a share
//! `N (D − h)⁺ / ((1 − ρ) T)`, N their number there.
//!
//! **The headroom.** The tail budget (see [`super::tail_budget`]) holds the *pooled* share
//! of slow requests at the budget b of the quantile's allowance 1 − q, stalls included, so
//! a window with the mean number of stalls λT is on budget. The SLO is judged per window,
//! though, and windows with more stalls than the mean break it. A window meets the SLO as
//! long as its stalls beyond the mean fit in what the budget leaves, `1 − q − b`. With N
//! Poisson, the number beyond the mean that all but a tenth of windows stay within is
//! `z √(λT)` ([`WINDOWS_COVERED_Z`]), so
//! `z √(λT) E[(D − h)⁺] / ((1 − ρ) T) ≤ 1 − q − b`, i.e.
//! `ρ ≤ 1 − z √(λT) E[(D − h)⁺] / ((1 − q − b) T)`.
//! R stays at or under that share of the capacity the costs predict. Where no stall is
//! longer than the slack, the guard never binds; the bigger and rarer the stalls, the more
//! room it keeps.

use std::collections::VecDeque;

use crate::time::Nanos;

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

/// The span the SLO is judged over, unless configured: `ferry bench` and the suite judge
/// their steady window, the last quarter of a run (0.5–2 s).
pub const JUDGED_WINDOW_DEFAULT: Nanos = Nanos::from_secs(1);

/// Standard normal quantile of the windows covered: 1.28, all but the unluckiest tenth.
pub const WINDOWS_COVERED_Z: f64 = 1.28;

/// Least share of the capacity the guard leaves: where stalls alone break a window at any
/// load no rate meets the SLO, and the rate loop, not this guard, must find that out.
pub const RHO_FLOOR: f64 = 0.1;

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

    /// Mean over the stalls of their length beyond `slack_ns`, ns: E[(D − h)⁺] per stall.
    pub fn mean_excess_ns(&self, slack_ns: f64) -> f64 {
        if self.episodes.is_empty() {
            return 0.0;
        }
        self.episodes
            .iter()
            .map(|(_, d)| (d - slack_ns).max(0.0))
            .sum::<f64>()
            / self.episodes.len() as f64
    }

    /// The highest utilisation at which a judged window of `window` with more stalls than
    /// the mean still keeps its slow share within `spare_share` (1 − q − b), requests
    /// having `slack_ns` before the SLO (see the module docs); 1 if no stall matters.
    pub fn rho_max(&mut self, now: Nanos, slack_ns: f64, window: Nanos, spare_share: f64) -> f64 {
        let excess_ns = self.mean_excess_ns(slack_ns.max(0.0));
        let window_s = window.as_secs_f64();
        let lambda = self.rate_hz(now);
        if excess_ns <= 0.0 || lambda <= 0.0 || window_s <= 0.0 {
            return 1.0;
        }
        if spare_share <= 0.0 {
            return RHO_FLOOR;
        }
        let beyond_mean = WINDOWS_COVERED_Z * (lambda * window_s).sqrt();
        let free = beyond_mean * excess_ns / 1e9 / (spare_share * window_s);
        (1.0 - free).clamp(RHO_FLOOR, 1.0)
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
        // A 4 ms slack leaves nothing of a 2 ms stall; a 1 ms slack leaves 1 ms.
        assert_eq!(est.mean_excess_ns(4_000_000.0), 0.0);
        assert!((est.mean_excess_ns(1_000_000.0) - 1_010_000.0).abs() < 1_000.0);
    }

    #[test]
    fn an_idle_spell_is_no_stall() {
        let mut est = StallEstimator::new(Nanos::ZERO);
        est.on_completion(Nanos::from_ms(1), 50_000, 100_000.0);
        // 5 ms without requests, then one that took 50 µs.
        est.on_completion(Nanos::from_ms(6), 50_000, 100_000.0);
        assert_eq!(est.rate_hz(Nanos::from_secs(1)), 0.0);
    }

    #[test]
    fn the_headroom_grows_with_the_stalls_beyond_the_slack() {
        let mut est = StallEstimator::new(Nanos::ZERO);
        feed(&mut est, 5, Nanos::from_ms(200), Nanos::from_ms(2));
        let now = Nanos::from_secs(5);
        let w = Nanos::from_secs(1);
        // 5 stalls a second, 1 ms beyond a 1 ms slack: 1.28 √5 · 1 ms / (0.2 % · 1 s) is
        // far beyond any load: the guard leaves its floor.
        assert_eq!(est.rho_max(now, 1_000_000.0, w, 0.002), RHO_FLOOR);
        // A slack of 1.9 ms leaves 0.11 ms a stall: 1 − 2.86 · 0.11 ms / 2 ms ≈ 0.84.
        let rho = est.rho_max(now, 1_900_000.0, w, 0.002);
        assert!((rho - 0.84).abs() < 0.02, "{rho}");
        // Stalls shorter than the slack cost nothing.
        assert_eq!(est.rho_max(now, 3_000_000.0, w, 0.002), 1.0);
        // And stalls forgotten after their memory.
        assert_eq!(est.rho_max(Nanos::from_secs(30), 1_900_000.0, w, 0.002), 1.0);
    }
}
