//! Which placement cannot meet the SLO at any load: each placement's share of completions
//! over the loop's target, per period.
//!
//! A mix's p99 is set by any placement that carries more than the quantile's allowance of
//! calls. A placement whose runs wait on many dependent round trips (each a visit to both
//! sides' queues and their stalls), or move large objects, may sit near or over the SLO at
//! any load: the R loop then cuts and cuts, and the CPUs, idle, say nothing. So each
//! period measures each placement's share of completions over the SLO; a placement
//! whose share is over the quantile's allowance and [`CONTRAST`] times the other's, in
//! each of the last [`PERIODS`] periods, is hopeless and carries only the minority share
//! ([`super::x_step::bounds`]). Where both are over (a load both share) or both under,
//! neither is: the R loop answers a load, this answers a placement.
//!
//! "At any load" is also asked of the loads the R loop met the SLO at: a placement slow
//! only where the loop overloaded a side (a probe past the capacity, which the next
//! decision cuts) is that side's load, not the placement's. So where a period's windows
//! that met the SLO hold enough completions of both placements, the hopeless one must be
//! the slow one there too, by the same contrast (the policy's profile is one period, and
//! a startup probe that overloaded the app CPU once made local look hopeless there and
//! held it at the minority share for good).

use crate::policy::{Completion, Placement};

/// Periods in a row a placement must be hopeless in: at whatever loads the R loop tried
/// meanwhile.
pub const PERIODS: u32 = 3;

/// How many times the other placement's share of slow completions a hopeless one's must
/// be: a load that both placements share makes their shares alike, within the noise of a
/// few hundred completions (a factor of two at most).
pub const CONTRAST: f64 = 4.0;

/// Completions of each placement a period needs to say anything: at a 1 % allowance, 500
/// completions hold five slow ones, enough for a factor of four to mean something.
pub const SAMPLES_MIN: u64 = 500;

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
}

/// Each placement's slow share, per period (see the module docs).
#[derive(Clone, Debug)]
pub struct ClassTails {
    /// The latency a completion is slow beyond, ns.
    target_ns: f64,
    /// The quantile's allowance of slow completions.
    allowance: f64,
    period: [Count; 2],
    /// Completions since the R loop's last decision.
    window: [Count; 2],
    /// Completions of the period's windows that met the SLO.
    met: [Count; 2],
    /// Periods in a row each placement was hopeless in.
    streak: [u32; 2],
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
    /// Slow beyond `target_ns` (the SLO), under an SLO on the `quantile`.
    pub fn new(target_ns: f64, quantile: f64) -> Self {
        ClassTails {
            target_ns,
            allowance: 1.0 - quantile,
            period: [Count::default(); 2],
            window: [Count::default(); 2],
            met: [Count::default(); 2],
            streak: [0; 2],
            held: None,
        }
    }

    /// Counts one completion.
    pub fn learn(&mut self, c: &Completion) {
        if !c.pushed_back {
            let slow = u64::from(c.latency_ns as f64 > self.target_ns);
            for count in [
                &mut self.period[index(c.placement)],
                &mut self.window[index(c.placement)],
            ] {
                count.all += 1;
                count.slow += slow;
            }
        }
    }

    /// Ends an R-loop window; `met` says whether the loop judged it within the SLO.
    pub fn end_window(&mut self, met: bool) {
        if met {
            for (pool, window) in self.met.iter_mut().zip(self.window) {
                pool.all += window.all;
                pool.slow += window.slow;
            }
        }
        self.window = [Count::default(); 2];
    }

    /// The placement the period under way says is hopeless, if it says so.
    pub fn hopeless_now(&self) -> Option<Placement> {
        let [local, remote] = self.period;
        if local.all < SAMPLES_MIN || remote.all < SAMPLES_MIN {
            return None;
        }
        let says = |slow: Count, other: Count| slow.share() > self.allowance && slow.share() > CONTRAST * other.share();
        let [met_local, met_remote] = self.met;
        let met_told = met_local.all >= SAMPLES_MIN && met_remote.all >= SAMPLES_MIN;
        let slow_at_met = |slow: Count, other: Count| !met_told || slow.share() > CONTRAST * other.share();
        if says(local, remote) && slow_at_met(met_local, met_remote) {
            Some(Placement::Local)
        } else if says(remote, local) && slow_at_met(met_remote, met_local) {
            Some(Placement::Remote)
        } else {
            None
        }
    }

    /// Holds `placement` to the minority share from now on (the profile saw it hopeless).
    pub fn hold(&mut self, placement: Placement) {
        self.held = Some(placement);
    }

    /// Ends a period; `missed` says whether the R loop judged a window of it over the SLO.
    /// A period in which a placement carried too few completions to say anything (a held
    /// one, at its minority share, may) leaves its streak as it was; one in which the loop
    /// missed nothing says no placement is hopeless (the mix met the SLO at that load),
    /// whatever their shares: under a load both share, the placement with more round trips
    /// is the slower, hopeless or not.
    pub fn end_period(&mut self, missed: bool) {
        let enough = self.period.iter().all(|c| c.all >= SAMPLES_MIN);
        let now = if missed { self.hopeless_now() } else { None };
        if enough {
            for p in PLACEMENTS {
                let i = index(p);
                self.streak[i] = if now == Some(p) { self.streak[i] + 1 } else { 0 };
            }
            if self.held.is_some() && now != self.held {
                self.held = None;
            }
        }
        if let Some(p) = PLACEMENTS.into_iter().find(|&p| self.streak[index(p)] >= PERIODS) {
            self.held = Some(p);
        }
        self.period = [Count::default(); 2];
        self.met = [Count::default(); 2];
    }

    /// The placement held to the minority share: hopeless in each of [`PERIODS`] periods
    /// in a row (or in the profile), and in every period since that could tell.
    pub fn hopeless(&self) -> Option<Placement> {
        self.held
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::FnId;

    /// One period of 1,000 completions per placement, the given shares of each slow, the
    /// loop missing the SLO in it.
    fn period(t: &mut ClassTails, local_slow: f64, remote_slow: f64) {
        for i in 0..1_000u64 {
            for (placement, share) in [(Placement::Local, local_slow), (Placement::Remote, remote_slow)] {
                let slow = (i as f64) < share * 1_000.0;
                let latency = if slow { 200_000 } else { 50_000 };
                t.learn(&Completion::of(FnId(0), placement, latency, 1, 1));
            }
        }
        t.end_period(true);
    }

    #[test]
    fn a_placement_slow_alone_in_every_recent_period_is_hopeless() {
        let mut t = ClassTails::new(100_000.0, 0.99);
        for _ in 0..PERIODS {
            assert_eq!(t.hopeless(), None);
            period(&mut t, 0.05, 0.002);
        }
        assert_eq!(t.hopeless(), Some(Placement::Local));
        // A period too thin to tell keeps it held; one where it is not (a lighter load)
        // lets it go.
        t.end_period(true);
        assert_eq!(t.hopeless(), Some(Placement::Local));
        period(&mut t, 0.004, 0.002);
        assert_eq!(t.hopeless(), None);
        // Slow alone, but in periods the loop met the SLO in: not hopeless.
        for _ in 0..PERIODS {
            for i in 0..1_000u64 {
                for (placement, slow) in [(Placement::Local, i < 50), (Placement::Remote, false)] {
                    let latency = if slow { 200_000 } else { 50_000 };
                    t.learn(&Completion::of(FnId(0), placement, latency, 1, 1));
                }
            }
            t.end_period(false);
        }
        assert_eq!(t.hopeless(), None);
    }

    /// One R-loop window of 1,000 completions per placement, the given shares slow.
    fn window(t: &mut ClassTails, local_slow: f64, remote_slow: f64, met: bool) {
        for i in 0..1_000u64 {
            for (placement, share) in [(Placement::Local, local_slow), (Placement::Remote, remote_slow)] {
                let latency = if (i as f64) < share * 1_000.0 { 200_000 } else { 50_000 };
                t.learn(&Completion::of(FnId(0), placement, latency, 1, 1));
            }
        }
        t.end_window(met);
    }

    #[test]
    fn a_placement_slow_only_in_an_overload_is_not_hopeless() {
        // A profile: windows met at low loads with neither placement slow, then a probe
        // past the capacity that overloaded the app side, local slow alone in it.
        let mut t = ClassTails::new(100_000.0, 0.99);
        window(&mut t, 0.0, 0.0, true);
        window(&mut t, 0.0, 0.0, true);
        window(&mut t, 0.3, 0.01, false);
        assert_eq!(t.hopeless_now(), None);
        // The same probe without the met windows (or with too few of their completions to
        // tell) says what the period alone says.
        t.end_period(true);
        window(&mut t, 0.3, 0.01, false);
        assert_eq!(t.hopeless_now(), Some(Placement::Local));
        // Slow alone at the loads met too: hopeless.
        t.end_period(true);
        window(&mut t, 0.008, 0.0, true);
        window(&mut t, 0.03, 0.001, false);
        assert_eq!(t.hopeless_now(), Some(Placement::Local));
    }

    #[test]
    fn a_load_both_placements_share_makes_neither_hopeless() {
        let mut t = ClassTails::new(100_000.0, 0.99);
        for _ in 0..2 * PERIODS {
            period(&mut t, 0.05, 0.03);
        }
        assert_eq!(t.hopeless(), None);
    }
}
