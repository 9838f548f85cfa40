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
//! `R X / (1 − ρ)` slow requests, X = (D − h)⁺, and the stalls of a judged window of length
//! T the share `S / ((1 − ρ) T)`, S the sum of their X.
//!
//! **The headroom.** The SLO is judged per window, and the stalls a window meets vary: S is
//! a compound Poisson sum, of mean `λ T E[X]` and standard deviation `√(λ T E[X²])`, and
//! all but the unluckiest tenth of windows stay within `z` ([`WINDOWS_COVERED_Z`]) standard
//! deviations above the mean. The tail budget (see [`super::tail_budget`]) cannot keep
//! room for them: it holds the share of slow requests pooled over the run, through a proxy
//! (the p90) that stays flat until the knee while a stall's backlog grows as 1/(1 − ρ). So
//! the guard caps the load itself: a bad window's stalls may spend the budget's share b
//! (the rest of the allowance, 1 − q − b, is the window's ordinary tail), which holds while
//! `(λ E[X] + z √(λ E[X²] / T)) / (1 − ρ) ≤ b`, i.e.
//! `ρ ≤ 1 − (λ E[X] + z √(λ E[X²] / T)) / b`. R stays at or under that share of the
//! capacity the costs predict. A stall whose excess alone is `b T` or more breaks its
//! window at any load: no headroom buys it back, so it counts with no excess (the tail the
//! rate loop measures answers for it). Where no stall is longer than the slack the guard never
//! binds; the longer and rarer the stalls against the slack, the more room it keeps. The
//! stall process is the machine's, measured; nothing in the derivation is fitted to one.

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

/// Least share of the capacity the guard leaves: where stalls alone break a bad window at
/// any load no rate meets the SLO there, and the rate loop, not this guard, must find that
/// out from the tail it measures.
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

    /// Mean over the stalls of their length beyond `slack_ns`, ns: E[(D − h)⁺] per stall.
    pub fn mean_excess_ns(&self, slack_ns: f64) -> f64 {
        self.excess_moment(slack_ns, 1, f64::INFINITY)
    }

    /// Mean over the stalls of the `power`-th power of their length beyond `slack_ns`,
    /// counting only the excesses below `excess_max_ns` (see [`Self::rho_max`]).
    fn excess_moment(&self, slack_ns: f64, power: i32, excess_max_ns: f64) -> f64 {
        if self.episodes.is_empty() {
            return 0.0;
        }
        self.episodes
            .iter()
            .map(|(_, d)| (d - slack_ns).max(0.0))
            .filter(|&x| x < excess_max_ns)
            .map(|x| x.powi(power))
            .sum::<f64>()
            / self.episodes.len() as f64
    }

    /// The highest utilisation at which the stalls of a bad judged window of length
    /// `window` (the unluckiest tenth) cost at most `share` of its requests, requests having
    /// `slack_ns` before the SLO: `1 − (λ E[X] + z √(λ E[X²] / T)) / share` (see the module
    /// docs), never under [`RHO_FLOOR`]; 1 if no stall matters. A stall whose excess alone
    /// is `share · T` or more breaks its window at any load: no headroom buys it back, so it
    /// is left out (one 50 ms stall of this VM otherwise held R at its floor for the whole
    /// memory of the estimator).
    pub fn rho_max(&mut self, now: Nanos, slack_ns: f64, window: Nanos, share: f64) -> f64 {
        let window_s = window.as_secs_f64();
        let lambda = self.rate_hz(now);
        let slack_ns = slack_ns.max(0.0);
        let hopeless_ns = share * window.0 as f64;
        let (mean_s, second_s2) = (
            self.excess_moment(slack_ns, 1, hopeless_ns) / 1e9,
            self.excess_moment(slack_ns, 2, hopeless_ns) / 1e18,
        );
        if lambda <= 0.0 || window_s <= 0.0 || mean_s <= 0.0 {
            return 1.0;
        }
        if share <= 0.0 {
            return RHO_FLOOR;
        }
        let stalled = lambda * mean_s + WINDOWS_COVERED_Z * (lambda * second_s2 / window_s).sqrt();
        (1.0 - stalled / share).clamp(RHO_FLOOR, 1.0)
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
        // Five 2.01 ms stalls a second against a 1.9 ms slack: X = 0.11 ms each, so a bad
        // 1 s window stalls 5 · 0.11 + 1.28 √(5 · 0.11²) = 0.865 ms past the slack: under
        // a 0.8 % share that leaves ρ ≤ 1 − 0.108.
        let rho = est.rho_max(now, 1_900_000.0, w, 0.008);
        assert!((rho - (1.0 - 0.000_865 / 0.008)).abs() < 0.01, "{rho}");
        // A shorter slack costs more; a longer one nothing.
        assert!(est.rho_max(now, 1_500_000.0, w, 0.008) < rho - 0.2);
        assert_eq!(est.rho_max(now, 3_000_000.0, w, 0.008), 1.0);
        // Stalls longer than any slack leave the floor, not less.
        assert_eq!(est.rho_max(now, 0.0, w, 0.008), RHO_FLOOR);
        // A stall that alone breaks its window at any load buys nothing and is left out:
        // 0.8 % of a 200 ms window is 1.6 ms, less than these 2 ms stalls.
        assert_eq!(est.rho_max(now, 0.0, Nanos::from_ms(200), 0.008), 1.0);
        // And stalls are forgotten after their memory.
        assert_eq!(est.rho_max(Nanos::from_secs(30), 1_900_000.0, w, 0.008), 1.0);
    }
}
