//! Which placement cannot meet the SLO at any load: each placement's share of completions
//! over the loop's target, weighed by a sequential test.
//!
//! A mix's p99 is set by any placement that carries more than the quantile's allowance of
//! calls. A placement whose runs wait on many dependent round trips (each a visit to both
//! sides' queues and their stalls), or move large objects, may sit near or over the SLO at
//! any load: the R loop then cuts and cuts, and the CPUs, idle, say nothing. So each
//! period counts each placement's completions and the slow ones among them. A period in
//! which the loop missed and one placement's slow share is [`CONTRAST`] times the other's
//! (a load both share raises both alike) is evidence against that placement; its weight is
//! the log-likelihood ratio of the period's counts under a share of [`ALTERNATIVE`] × the
//! allowance against a share of the allowance (Wald's sequential test). Page's CUSUM sums
//! the evidence over such periods, back to zero at any period that speaks for the
//! placement (the loop met the SLO, or the contrast is gone), counts a period for at most
//! half of what it needs (a period's completions share one load), and holds the placement to
//! a tenth of the allowance ([`super::x_step::hopeless_bounds`]) once the sum passes [`EVIDENCE`]. At tens
//! of thousands of completions a second, or at a few hundred (a slow traversal, which a
//! fixed count of 500 completions a period could not reach within a run), two periods of
//! clear contrast decide, and doubtful ones wait for more. A changed mix forgets it all.

use crate::policy::{Completion, Placement};

/// How many times the other placement's slow share a hopeless one's must be, in the same
/// period (so at the same load): a load both placements share makes their shares alike,
/// within the noise of a few hundred completions (a factor of two at most).
pub const CONTRAST: f64 = 4.0;

/// The slow share the evidence weighs against the allowance, in allowances: a placement
/// carrying half the calls with twice the allowance slow puts the mix at its allowance
/// alone (the loop, holding the mix there, leaves a hopeless placement near this).
pub const ALTERNATIVE: f64 = 2.0;

/// Evidence (natural log of the likelihood ratio) at which a placement is held: ln 10³,
/// odds of a thousand to one that its slow share is [`ALTERNATIVE`] × the allowance, not
/// the allowance. At a 1 % allowance that is ~10 slow completions beyond the allowance's
/// share; a placement whose share is under ~1.44 % (where the two hypotheses' likelihoods
/// cross) gathers none.
pub const EVIDENCE: f64 = 6.91;

/// Periods the evidence needs at least: one period's completions share its load and its
/// stalls (a transient overload, a mix just changed), so they are not the independent
/// draws the test assumes, and a period counts for at most 1 / this of [`EVIDENCE`].
pub const PERIODS_MIN: f64 = 2.0;

/// Completions of each placement a period needs to count: the other placement's share is
/// known no finer than one in this many (2 %, so a contrast of four needs 8 %), and fewer
/// completions than this cannot tell a placement held to the minority share is well again.
pub const SAMPLES_MIN: u64 = 50;

/// Completions and slow ones of one placement in the period under way.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Count {
    all: u64,
    slow: u64,
}

impl Count {
    fn share(&self) -> f64 {
        self.slow as f64 / self.all.max(1) as f64
    }

    /// The share with one slow completion added: an upper estimate that a period of few
    /// completions and none slow cannot put at zero.
    fn share_upper(&self) -> f64 {
        (self.slow + 1) as f64 / (self.all + 1) as f64
    }
}

/// Each placement's slow share and the evidence against it (see the module docs).
#[derive(Clone, Debug)]
pub struct ClassTails {
    /// The latency a completion is slow beyond (the R loop's target), ns.
    target_ns: f64,
    /// The quantile's allowance of slow completions.
    allowance: f64,
    period: [Count; 2],
    /// The evidence against each placement so far (Page's CUSUM).
    evidence: [f64; 2],
    /// The placement held to the minority share, until a period with enough of its
    /// completions says it is hopeless no more.
    held: Option<Placement>,
}

fn index(placement: Placement) -> usize {
    match placement {
        Placement::Local => 0,
        Placement::Remote => 1,
    }
}

const PLACEMENTS: [Placement; 2] = [Placement::Local, Placement::Remote];

impl ClassTails {
    /// Slow beyond `target_ns` (the loop's target, which [`ClassTails::end_period`]
    /// follows), under an SLO on the `quantile`.
    pub fn new(target_ns: f64, quantile: f64) -> Self {
        ClassTails {
            target_ns,
            allowance: (1.0 - quantile).clamp(1e-6, 0.5 / ALTERNATIVE),
            period: [Count::default(); 2],
            evidence: [0.0; 2],
            held: None,
        }
    }

    /// Counts one completion.
    pub fn learn(&mut self, c: &Completion) {
        if !c.pushed_back {
            let count = &mut self.period[index(c.placement)];
            count.all += 1;
            count.slow += u64::from(c.latency_ns as f64 > self.target_ns);
        }
    }

    /// The log-likelihood ratio of `count` under a slow share of [`ALTERNATIVE`] × the
    /// allowance against one of the allowance.
    fn weight(&self, count: Count) -> f64 {
        let (p0, p1) = (self.allowance, ALTERNATIVE * self.allowance);
        let fast = count.all - count.slow;
        count.slow as f64 * (p1 / p0).ln() + fast as f64 * ((1.0 - p1) / (1.0 - p0)).ln()
    }

    /// Whether the period under way has enough completions of both placements to count.
    fn can_tell(&self) -> bool {
        self.period.iter().all(|c| c.all >= SAMPLES_MIN)
    }

    /// The evidence against each placement with the period under way added, `missed`
    /// saying whether the loop judged a window of it over its target, a period counting
    /// for at most `cap`; a period too thin to count leaves it as it was.
    fn evidence_with_period(&self, missed: bool, cap: f64) -> [f64; 2] {
        if !self.can_tell() {
            return self.evidence;
        }
        let [local, remote] = self.period;
        let against = |slow: Count, other: Count, sum: f64| {
            let contrast = slow.share() > CONTRAST * other.share_upper();
            if missed && contrast {
                (sum + self.weight(slow).min(cap)).max(0.0)
            } else {
                0.0
            }
        };
        [
            against(local, remote, self.evidence[0]),
            against(remote, local, self.evidence[1]),
        ]
    }

    /// The placement the evidence, with the profile's period under way as if the loop
    /// missed in it, says is hopeless, if it says so. The profile's one period spans the
    /// R loop's whole startup, doubling and bisecting, so many loads: it counts in full.
    pub fn hopeless_now(&self) -> Option<Placement> {
        let evidence = self.evidence_with_period(true, f64::INFINITY);
        PLACEMENTS.into_iter().find(|&p| evidence[index(p)] >= EVIDENCE)
    }

    /// Forgets the evidence and the hold: the mix changed, and what held for the old one
    /// says nothing of the new one.
    pub fn forget(&mut self) {
        self.period = [Count::default(); 2];
        self.evidence = [0.0; 2];
        self.held = None;
    }

    /// Holds `placement` to its bound from now on (the profile saw it hopeless).
    pub fn hold(&mut self, placement: Placement) {
        self.held = Some(placement);
    }

    /// Ends a period; `missed` says whether the R loop judged a window of it over its
    /// target, and the next period's completions are slow beyond `target_ns` (the loop's
    /// target now: a placement hopeless is one that cannot meet what the loop judges by).
    /// A period in which a placement carried too few completions to say anything (a held
    /// one, at its minority share, may) leaves the evidence and the hold as they were. One
    /// in which the loop missed nothing clears the evidence (the mix met the SLO at that
    /// load), whatever the shares: under a load both share, the placement with more round
    /// trips is the slower, hopeless or not. A held placement is let go only by a period
    /// whose counts speak for it (their likelihood favours the allowance): a mix that meets
    /// the SLO because the placement carries almost nothing says nothing about it.
    pub fn end_period(&mut self, missed: bool, target_ns: f64) {
        if self.can_tell() {
            self.evidence = self.evidence_with_period(missed, EVIDENCE / PERIODS_MIN);
            if let Some(held) = self.held {
                if self.weight(self.period[index(held)]) < 0.0 {
                    self.held = None;
                    self.evidence[index(held)] = 0.0;
                }
            }
        }
        if let Some(p) = PLACEMENTS.into_iter().find(|&p| self.evidence[index(p)] >= EVIDENCE) {
            self.held = Some(p);
        }
        self.period = [Count::default(); 2];
        self.target_ns = target_ns;
    }

    /// The placement held to the minority share: the evidence against it passed
    /// [`EVIDENCE`] (or the profile saw it hopeless), and no period since that could tell
    /// spoke for it.
    pub fn hopeless(&self) -> Option<Placement> {
        self.held
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::FnId;

    /// One period of `n` completions per placement, the given shares of each slow, the
    /// loop missing the SLO in it or not.
    fn period(t: &mut ClassTails, n: u64, local_slow: f64, remote_slow: f64, missed: bool) {
        for i in 0..n {
            for (placement, share) in [(Placement::Local, local_slow), (Placement::Remote, remote_slow)] {
                let slow = (i as f64) < share * n as f64;
                let latency = if slow { 200_000 } else { 50_000 };
                t.learn(&Completion::of(FnId(0), placement, latency, 1, 1));
            }
        }
        t.end_period(missed, 100_000.0);
    }

    fn tails() -> ClassTails {
        ClassTails::new(100_000.0, 0.99)
    }

    #[test]
    fn a_clear_contrast_decides_in_two_periods_at_any_rate() {
        // Tens of thousands of completions a second, or a slow traversal's hundred: a
        // placement slow alone is held after two periods in which the loop missed, never
        // after one (a transient), and a changed mix forgets it.
        for n in [10_000, 100] {
            let mut t = tails();
            period(&mut t, n, 0.12, 0.0, true);
            assert_eq!(t.hopeless(), None, "{n} completions");
            period(&mut t, n, 0.12, 0.0, true);
            assert_eq!(t.hopeless(), Some(Placement::Local), "{n} completions");
            t.forget();
            assert_eq!(t.hopeless(), None);
        }
    }

    #[test]
    fn a_doubtful_contrast_waits_for_more_periods() {
        // 4 % slow of a hundred against none: evidence for, but not enough in one period.
        let mut t = tails();
        period(&mut t, 100, 0.04, 0.0, true);
        assert_eq!(t.hopeless(), None);
        for _ in 0..3 {
            period(&mut t, 100, 0.04, 0.0, true);
        }
        assert_eq!(t.hopeless(), Some(Placement::Local));
    }

    #[test]
    fn a_share_near_the_allowance_gathers_no_evidence() {
        // 1.2 % slow, twelve times the other's, period after period: under the share where
        // the two hypotheses cross, so never held.
        let mut t = tails();
        for _ in 0..20 {
            period(&mut t, 1_000, 0.012, 0.001, true);
        }
        assert_eq!(t.hopeless(), None);
    }

    #[test]
    fn a_load_both_placements_share_makes_neither_hopeless() {
        let mut t = tails();
        for _ in 0..10 {
            period(&mut t, 1_000, 0.05, 0.03, true);
            period(&mut t, 1_000, 0.6, 0.5, true);
        }
        assert_eq!(t.hopeless(), None);
    }

    #[test]
    fn periods_the_loop_met_clear_the_evidence() {
        // Slow alone, but the loop met the SLO: the mix can carry it at that load.
        let mut t = tails();
        for _ in 0..10 {
            period(&mut t, 100, 0.04, 0.0, true);
            period(&mut t, 100, 0.04, 0.0, false);
        }
        assert_eq!(t.hopeless(), None);
    }

    #[test]
    fn a_held_placement_is_let_go_only_by_counts_that_speak_for_it() {
        let mut t = tails();
        period(&mut t, 1_000, 0.12, 0.0, true);
        period(&mut t, 1_000, 0.12, 0.0, true);
        assert_eq!(t.hopeless(), Some(Placement::Local));
        // Too thin to tell (the minority share), or a met period in which it is still
        // slow: held.
        period(&mut t, 10, 0.5, 0.0, false);
        period(&mut t, 100, 0.1, 0.0, false);
        assert_eq!(t.hopeless(), Some(Placement::Local));
        // Its share at the allowance: let go.
        period(&mut t, 1_000, 0.01, 0.0, false);
        assert_eq!(t.hopeless(), None);
    }

    #[test]
    fn the_profile_sees_the_period_under_way_in_full() {
        let mut t = tails();
        for i in 0..100 {
            let local = if i < 12 { 200_000 } else { 50_000 };
            t.learn(&Completion::of(FnId(0), Placement::Local, local, 1, 1));
            t.learn(&Completion::of(FnId(0), Placement::Remote, 50_000, 1, 1));
        }
        assert_eq!(t.hopeless_now(), Some(Placement::Local));
        assert_eq!(t.hopeless(), None);
    }
}
