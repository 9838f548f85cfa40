//! Startup: finding the capacity before there is one to remember (BBR's Startup, which
//! doubles until the delivered rate stops growing).
//!
//! R doubles while windows meet the SLO. The first window over the SLO brackets the capacity between the last rate
//! that met it and the one that did not, and the search bisects that bracket (in log space)
//! until it is narrower than [`RESOLUTION`]; the gain cycle takes over from there. A
//! window over the SLO is confirmed by a second one at the same rate before it bounds the
//! search: one window's failure may be a cold start or a stall; a window that measured
//! the previous window's backlog draining says even less of its own rate and is measured
//! up to [`RETRIES_MAX`] times.

/// The bracket's ratio at which startup ends: within 15 %, which the probes of the gain
/// cycle close.
pub const RESOLUTION: f64 = 1.15;

/// Factor per window while nothing has failed: BBR's Startup doubles per round trip.
pub const GROWTH: f64 = 2.0;

/// Halvings startup makes while nothing has met the SLO: where the first rate fails, a
/// lower one may not (a cold start, an overload); where a quarter of it fails too, the
/// load is not what breaks the SLO (a placement whose runs are slow at any load), and
/// halving further would only starve the loop of evidence (at 100/s a window waits a
/// third of a second for a few dozen completions).
pub const HALVINGS_MAX: u32 = 2;

/// A failed window that delivered less than this share of the rate it was offered found
/// the machine overloaded: what it delivered is what the machine serves (BBR's delivery
/// rate), so the next try is no higher, and it is not one of the [`HALVINGS_MAX`] (the
/// load is what breaks the SLO there). Held above its capacity, a node whose first rates
/// all failed queued for good (a traversal of 8 accesses × 60 µs at a held 2,500/s
/// against ~1,500 served: p99 of 10–30 ms under every policy).
pub const OVERLOAD_SHARE: f64 = 0.9;

/// Windows measured again at one rate when they failed seeing a backlog draining (one
/// otherwise).
pub const RETRIES_MAX: u32 = 2;

/// What startup knows.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Startup {
    /// The highest rate that met the SLO.
    met_ops: Option<f64>,
    /// The lowest rate that did not.
    failed_ops: Option<f64>,
    /// Retries of the rate being tried.
    retries: u32,
    /// Halvings made with nothing met.
    halvings: u32,
}

/// What startup decides after a window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Step {
    /// Try this rate next.
    Try(f64),
    /// The bracket is narrow enough: the capacity is known, the cycle starts.
    Done,
}

impl Startup {
    /// Learns that a window at `offered_ops`, which delivered `delivered_ops`, met the SLO
    /// (`met`), whether it measured a backlog, and returns what to do.
    pub fn learn(&mut self, offered_ops: f64, delivered_ops: f64, met: bool, measured_backlog: bool) -> Step {
        let overloaded = !met && delivered_ops < OVERLOAD_SHARE * offered_ops;
        // A failure is confirmed by a second window at the same rate before it bounds
        // the search (a cold start, a stall, the last window's backlog draining all fail
        // one window at a rate the machine serves); one that saw a backlog gets a third.
        let retries = if measured_backlog { RETRIES_MAX } else { 1 };
        if !met && self.retries < retries {
            self.retries += 1;
            return Step::Try(offered_ops);
        }
        self.retries = 0;
        if met {
            self.met_ops = Some(self.met_ops.map_or(offered_ops, |m| m.max(offered_ops)));
        } else {
            self.failed_ops = Some(self.failed_ops.map_or(offered_ops, |f| f.min(offered_ops)));
        }
        match (self.met_ops, self.failed_ops) {
            (Some(lo), Some(hi)) if hi <= lo * RESOLUTION => Step::Done,
            (Some(lo), Some(hi)) => Step::Try((lo * hi).sqrt()),
            (Some(lo), None) => Step::Try(lo * GROWTH),
            // Nothing met yet, and the machine did not serve what it was offered: no
            // higher than what it served, however many times.
            (None, Some(hi)) if overloaded => {
                self.failed_ops = None;
                Step::Try((hi / GROWTH).min(delivered_ops).max(f64::MIN_POSITIVE))
            }
            // Nothing met yet: halve until something does, a few times at most.
            (None, Some(hi)) if self.halvings < HALVINGS_MAX => {
                self.halvings += 1;
                self.failed_ops = None;
                Step::Try(hi / GROWTH)
            }
            (None, Some(hi)) => {
                self.failed_ops = None;
                Step::Try(hi)
            }
            (None, None) => Step::Try(offered_ops),
        }
    }

    /// Moves what it knows by `factor` (an outer loop moved the curve).
    pub fn scale(&mut self, factor: f64) {
        self.met_ops = self.met_ops.map(|r| r * factor);
        self.failed_ops = self.failed_ops.map(|r| r * factor);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs startup against a machine that meets the SLO below `knee` ops/s.
    fn search(knee: f64) -> (f64, u32) {
        let mut s = Startup::default();
        let mut rate = 1_000.0;
        for windows in 1..100 {
            match s.learn(rate, rate, rate < knee, false) {
                Step::Try(next) => rate = next,
                Step::Done => return (s.met_ops.unwrap(), windows),
            }
        }
        panic!("startup never ended");
    }

    #[test]
    fn doubles_then_bisects_to_within_the_resolution() {
        let (found, windows) = search(50_000.0);
        assert!(found < 50_000.0 && found * RESOLUTION >= 50_000.0, "{found}");
        assert!(windows <= 14, "{windows} windows");
    }

    #[test]
    fn where_nothing_meets_it_halves_a_few_times_and_holds() {
        let mut s = Startup::default();
        let mut rate = 8_000.0;
        for _ in 0..20 {
            match s.learn(rate, rate, false, false) {
                Step::Try(next) => rate = next,
                Step::Done => panic!("nothing met"),
            }
        }
        assert_eq!(rate, 2_000.0);
    }

    #[test]
    fn an_overloaded_machine_is_not_held_above_what_it_delivered() {
        // Every window fails; the machine serves 900/s whatever it is offered.
        let mut s = Startup::default();
        let mut rate: f64 = 8_000.0;
        for _ in 0..20 {
            let delivered = rate.min(900.0);
            match s.learn(rate, delivered, false, false) {
                Step::Try(next) => rate = next,
                Step::Done => panic!("nothing met"),
            }
        }
        assert!(rate <= 900.0, "held at {rate}/s above the 900/s served");
        // Once at what it serves the failures are not overload: a few halvings, then hold.
        assert!(rate >= 900.0 / 4.0 - 1.0, "{rate}");
    }

    #[test]
    fn a_failure_is_confirmed_before_it_bounds_the_search() {
        let mut s = Startup::default();
        assert_eq!(s.learn(1_000.0, 1_000.0, true, false), Step::Try(2_000.0));
        assert_eq!(s.learn(2_000.0, 2_000.0, false, true), Step::Try(2_000.0));
        assert_eq!(s.learn(2_000.0, 2_000.0, true, false), Step::Try(4_000.0));
        // A failure without a backlog is measured once more; confirmed, it bounds.
        assert_eq!(s.learn(4_000.0, 4_000.0, false, false), Step::Try(4_000.0));
        assert!(matches!(s.learn(4_000.0, 4_000.0, false, false), Step::Try(r) if r < 4_000.0));
    }
}
