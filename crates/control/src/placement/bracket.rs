//! Pyxis' Algorithm 1: a search for the maximum of a unimodal function over a bracket,
//! stepping by a grid of M segments and shrinking the bracket at each local maximum.
//!
//! The search walks one grid step at a time in the direction the last two measurements
//! rose. When the sign of that slope flips, the maximum lies between the point two steps
//! back and the current one: the bracket shrinks to those two steps and the step to the
//! bracket over 2M, and the walk turns. It ends when the bracket is at most twice the
//! resolution asked for, at the best point measured inside it. One departure from the
//! paper's pseudocode: after a shrink the walk resumes from the middle point (the local
//! maximum just found) rather than from the far end, which halves the steps per level. Only the *sign* of each
//! slope is used, which is what makes it robust to noisy measurements (Pyxis §IV-C); a
//! start near the maximum (the load model's prediction) makes it short.
//!
//! Both ends of [0, 1]-style domains are handled as the paper's clamp: a step that would
//! leave the domain stops at its edge, and a walk pressing against an edge it already
//! stands on ends there (the maximum is the edge).

/// Default number of grid segments per bracket: the paper's M = 5 (§VI-G finds it the
/// fastest of 3–9).
pub const SEGMENTS_DEFAULT: u32 = 5;

/// One point measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Probe {
    /// Where.
    pub x: f64,
    /// What was measured there.
    pub value: f64,
}

/// Algorithm 1 (see the module docs).
#[derive(Clone, Debug)]
pub struct BracketSearch {
    /// The domain the search may step in.
    domain: (f64, f64),
    /// The current bracket.
    lo: f64,
    hi: f64,
    /// Grid segments per bracket.
    segments: f64,
    /// The current step.
    step: f64,
    /// The bracket width at which the search ends.
    resolution: f64,
    /// The point to measure next.
    next: f64,
    /// The last three points measured, newest last.
    history: Vec<Probe>,
    /// Points measured in all.
    measured: u32,
    /// Where the search ended.
    result: Option<f64>,
}

impl BracketSearch {
    /// A search of [`lo`, `hi`] (inside `domain`) starting at `start`, ending once the
    /// bracket is at most twice `resolution`.
    pub fn new(start: f64, lo: f64, hi: f64, domain: (f64, f64), segments: u32, resolution: f64) -> Self {
        let (lo, hi) = (lo.max(domain.0), hi.min(domain.1));
        let segments = segments.max(3) as f64;
        BracketSearch {
            domain,
            lo,
            hi,
            segments,
            step: (hi - lo) / segments,
            resolution,
            next: start.clamp(lo, hi),
            history: Vec::with_capacity(3),
            measured: 0,
            result: None,
        }
    }

    /// The point to measure now (the result once the search ended).
    pub fn point(&self) -> f64 {
        self.result.unwrap_or(self.next)
    }

    /// Where the search ended, if it did.
    pub fn result(&self) -> Option<f64> {
        self.result
    }

    /// Points measured so far.
    pub fn measured(&self) -> u32 {
        self.measured
    }

    /// The current bracket.
    pub fn bracket(&self) -> (f64, f64) {
        (self.lo, self.hi)
    }

    /// Records `value` measured at [`Self::point`] and chooses the next point.
    pub fn report(&mut self, value: f64) {
        if self.result.is_some() {
            return;
        }
        self.measured += 1;
        let x = self.next;
        if self.history.len() == 3 {
            self.history.remove(0);
        }
        self.history.push(Probe { x, value });
        let n = self.history.len();
        if n == 1 {
            // The first step goes toward the side with more room.
            let dir = if self.hi - x >= x - self.lo { 1.0 } else { -1.0 };
            return self.walk(x, dir);
        }
        let (a, b) = (self.history[n - 2], self.history[n - 1]);
        let slope = slope_sign(a, b);
        if n == 3 {
            let earlier = slope_sign(self.history[0], a);
            if earlier * slope < 0.0 {
                // A local maximum within the three points' span: between the point two
                // steps back and this one, or, when the walk turned back over its last
                // step (noise flipped the slope there), within that step.
                let xs = self.history.iter().map(|p| p.x);
                let (first, last) = xs.fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(x), hi.max(x)));
                self.lo = first.max(self.domain.0);
                self.hi = last.min(self.domain.1);
                self.step = (self.hi - self.lo) / (2.0 * self.segments);
                if self.hi - self.lo <= 2.0 * self.resolution {
                    return self.finish();
                }
                // Resume from the local maximum, toward the side the last slope came from.
                let middle = self.history[1];
                self.history.clear();
                self.history.push(middle);
                return self.walk(middle.x, -slope);
            }
        }
        self.walk(b.x, slope);
    }

    /// Steps from `x` in direction `dir`, ending at an edge the walk presses against.
    fn walk(&mut self, x: f64, dir: f64) {
        let target = (x + dir * self.step).clamp(self.domain.0, self.domain.1);
        if (target - x).abs() < 1e-12 {
            return self.finish();
        }
        self.next = target;
    }

    /// Ends at the best point measured inside the bracket (or its middle, if none is).
    fn finish(&mut self) {
        let best = self
            .history
            .iter()
            .filter(|p| p.x >= self.lo - 1e-12 && p.x <= self.hi + 1e-12)
            .max_by(|a, b| a.value.total_cmp(&b.value))
            .map_or(0.5 * (self.lo + self.hi), |p| p.x);
        self.result = Some(best);
    }
}

/// The sign of the slope from `a` to `b` (0 if flat or at the same x).
fn slope_sign(a: Probe, b: Probe) -> f64 {
    let dx = b.x - a.x;
    let dv = b.value - a.value;
    if dx == 0.0 || dv == 0.0 {
        0.0
    } else {
        (dv * dx).signum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a search on `f` until it ends (or 100 points), returning (result, points).
    fn run(f: impl Fn(f64) -> f64, start: f64, lo: f64, hi: f64) -> (f64, u32) {
        let mut s = BracketSearch::new(start, lo, hi, (0.0, 1.0), SEGMENTS_DEFAULT, 0.02);
        for _ in 0..100 {
            if s.result().is_some() {
                break;
            }
            let x = s.point();
            s.report(f(x));
        }
        (s.result().expect("the search ends"), s.measured())
    }

    #[test]
    fn finds_an_interior_maximum_from_a_nearby_start() {
        let tent = |x: f64| 1.0 - (x - 0.37).abs();
        let (x, points) = run(tent, 0.42, 0.22, 0.62);
        assert!((x - 0.37).abs() <= 0.02, "{x}");
        assert!(points <= 12, "{points} points");
    }

    #[test]
    fn finds_an_interior_maximum_from_anywhere_in_the_domain() {
        for start in [0.0, 0.3, 0.7, 1.0] {
            let (x, _) = run(|x| -(x - 0.61) * (x - 0.61), start, 0.0, 1.0);
            assert!((x - 0.61).abs() <= 0.03, "from {start}: {x}");
        }
    }

    #[test]
    fn ends_at_an_edge_that_is_the_maximum() {
        let (x, points) = run(|x| x, 0.9, 0.7, 1.0);
        assert_eq!(x, 1.0);
        assert!(points <= 6, "{points} points");
        let (x, _) = run(|x| 1.0 - x, 0.2, 0.0, 0.4);
        assert_eq!(x, 0.0);
    }

    #[test]
    fn noise_on_a_revisited_point_does_not_end_the_search_there() {
        // From 0.5 the first step finds 0.7 lower and walks back; the second measurement
        // of 0.5 comes out lower still (noise). The maximum lies within [0.5, 0.7]'s
        // neighbourhood, not at 0.5 alone: the search goes on, toward 0.62.
        let mut s = BracketSearch::new(0.5, 0.0, 1.0, (0.0, 1.0), SEGMENTS_DEFAULT, 0.02);
        let mut visits_of_half = 0;
        for _ in 0..100 {
            if s.result().is_some() {
                break;
            }
            let x = s.point();
            let mut value = 1.0 - (x - 0.62).abs();
            if (x - 0.5).abs() < 1e-9 {
                visits_of_half += 1;
                value = if visits_of_half == 1 { 0.95 } else { 0.80 };
            }
            s.report(value);
        }
        let x = s.result().expect("the search ends");
        assert!((x - 0.62).abs() <= 0.05, "{x}");
    }

    #[test]
    fn a_reported_point_after_the_end_changes_nothing() {
        let mut s = BracketSearch::new(1.0, 0.8, 1.0, (0.0, 1.0), SEGMENTS_DEFAULT, 0.02);
        while s.result().is_none() {
            let x = s.point();
            s.report(x);
        }
        let before = (s.result(), s.measured());
        s.report(100.0);
        assert_eq!((s.result(), s.measured()), before);
    }
}
