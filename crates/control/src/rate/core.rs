//! The core of the R loop: Kayak's Pseudocode 1, a safeguarded Newton iteration on the
//! root of T(R) = s, T the proxy quantile of a [`Measurement`] and s the setpoint the tail
//! budget calibrates (see [`super::guards::tail_budget`]).
//!
//! Pseudocode 1 steps `ΔR = (R − R') (s − T) / (T − T')` along the secant through the last
//! two points and, when the step would make R non-positive, halves R instead (M = 2). Here
//! the same iteration runs in log space on the part of the tail that load causes,
//! `Δ ln R = g · ln((s − T₀) / (T − T₀)) / e`, with T₀ the unloaded tail (the lowest tail
//! measured) and e = Δ ln(T − T₀) / Δ ln R the elasticity of the secant: queueing delay is
//! close to a power law of the rate near the knee, rates span five orders of magnitude,
//! and where the unloaded latency is most of the SLO (many round trips, a tight SLO) the
//! whole tail barely moves until the knee, so steps on T itself crawled (5 % a decision
//! at 3 % load). The safeguard becomes a bound on the step: R at most halves (the paper's
//! M = 2) and at most doubles per decision.
//!
//! The gain g follows a stochastic-approximation schedule: 1 (Pseudocode 1's full step)
//! until the proxy first reaches the setpoint, then [`GAIN_HOLD_MAX`] falling as 1/k to
//! [`GAIN_DEFAULT`]. Near the knee the proxy of a window moves with the luck of a few node
//! stalls as much as with R: full steps followed that luck in a limit cycle (±13 % of R),
//! a small constant gain took seconds to get anywhere, and the decaying gain does both —
//! each late step averages the windows before it. A caller that moved the curve on
//! purpose (X) re-opens the schedule.
//!
//! The secant is trusted only where it measures the curve: between full windows whose rates
//! differ by at least [`SECANT_MIN_REL_DR`] (closer, they differ by noise more than by R),
//! neither of them saturated (a backlog's latency measures the backlog, not the rate); it
//! is averaged in log space and bounded to [[`ELASTICITY_MIN`], [`ELASTICITY_MAX`]].

use crate::rate::window::Measurement;

/// Largest factor by which one decision raises R (and its inverse, the safeguard's M = 2,
/// the largest by which one lowers it).
pub const STEP_FACTOR_MAX: f64 = 2.0;

/// Default floor of the gain schedule: each late step averages ~20 windows, so a window's
/// luck moves R by a fraction of a percent.
pub const GAIN_DEFAULT: f64 = 0.05;

/// Where the schedule starts once the proxy reached the setpoint (and where it re-opens):
/// half a Newton step closes what the approach left within a few decisions.
pub const GAIN_HOLD_MAX: f64 = 0.5;

/// Decisions over which the schedule halves: 1/k decay from [`GAIN_HOLD_MAX`].
pub const GAIN_HALF_DECISIONS: f64 = 8.0;

/// Elasticity assumed before any secant: a moderately loaded queue (T ∝ R²).
pub const ELASTICITY_PRIOR: f64 = 2.0;

/// Smallest elasticity used: below the knee the curve is flatter, but there the step bound
/// limits the step, and a smaller value would only make noise look like distance.
pub const ELASTICITY_MIN: f64 = 1.0;

/// Largest elasticity used: queueing curves reach ~10 at their knee; beyond 20 an estimate
/// is noise and would freeze R.
pub const ELASTICITY_MAX: f64 = 20.0;

/// Weight of a new secant in the average of ln e.
pub const ELASTICITY_WEIGHT: f64 = 0.5;

/// Smallest relative change of R between two points for their secant to count.
pub const SECANT_MIN_REL_DR: f64 = 0.05;

/// A point whose tail exceeds this multiple of the SLO is saturated: it measures a backlog.
pub const SATURATION_FACTOR: f64 = 3.0;

/// The setpoint is kept at least this multiple of the unloaded proxy: one the proxy cannot
/// reach at any load would walk R to its floor, and within a few tens of percent of it the
/// proxy's rise is too small to steer by.
pub const UNLOADED_MARGIN: f64 = 1.5;

/// Smallest queueing part of a tail, as a share of the setpoint's: below it the tail is
/// the unloaded one within noise, and the step is the bound's.
const EXCESS_FLOOR_SHARE: f64 = 0.01;

/// Pseudocode 1 in log space (see the module docs).
#[derive(Clone, Debug)]
pub struct NewtonCore {
    /// The quantile controlled (1 − the share of slow completions aimed for).
    quantile: f64,
    /// Floor of the gain schedule, in (0, 1].
    gain: f64,
    /// Decisions since the proxy first reached the setpoint (or the schedule re-opened);
    /// None while approaching.
    hold_decisions: Option<u32>,
    /// The last point the next secant is taken against: (ln R, ln T).
    last: Option<(f64, f64)>,
    /// Smoothed ln e.
    ln_elasticity: f64,
    /// The lowest tail measured: the unloaded tail T₀, ns.
    unloaded_ns: f64,
}

impl NewtonCore {
    /// A core controlling the `quantile` of latency with step share `gain`.
    pub fn new(quantile: f64, gain: f64) -> Self {
        NewtonCore {
            quantile,
            gain,
            hold_decisions: None,
            last: None,
            ln_elasticity: ELASTICITY_PRIOR.ln(),
            unloaded_ns: f64::INFINITY,
        }
    }

    /// The lowest proxy measured (∞ before any), ns: the unloaded proxy.
    pub fn unloaded_ns(&self) -> f64 {
        self.unloaded_ns
    }

    /// Learns the unloaded proxy from `m`.
    pub fn observe(&mut self, m: &Measurement) {
        self.unloaded_ns = self.unloaded_ns.min(self.tail_ns(m).max(1.0));
    }

    /// The current elasticity estimate.
    pub fn elasticity(&self) -> f64 {
        self.ln_elasticity.exp().clamp(ELASTICITY_MIN, ELASTICITY_MAX)
    }

    /// The curve moved for another reason than R (X moved), or a backlog showed it is not
    /// where the late steps assumed: no secant spans the move, and the gain schedule
    /// re-opens.
    pub fn curve_moved(&mut self) {
        self.forget_secant();
        if self.hold_decisions.is_some() {
            self.hold_decisions = Some(0);
        }
    }

    /// No secant spans what happens next (the curve moved a little).
    pub fn forget_secant(&mut self) {
        self.last = None;
    }

    /// The share of the Newton step the next decision takes.
    pub fn gain(&self) -> f64 {
        match self.hold_decisions {
            None => 1.0,
            Some(k) => (GAIN_HOLD_MAX / (1.0 + k as f64 / GAIN_HALF_DECISIONS)).max(self.gain),
        }
    }

    /// The proxy `m` measured: its controlled quantile.
    pub fn tail_ns(&self, m: &Measurement) -> f64 {
        // Invariant: a window decides only with at least one completion.
        m.latency
            .quantile(self.quantile)
            .expect("a measurement holds completions")
    }

    /// Where a full Newton step from `m`, measured at `rate_ops`, toward `setpoint_ns` would
    /// put R (at most ×/÷ [`STEP_FACTOR_MAX`] away), with the slope learned so far.
    pub fn root_ops(&self, m: &Measurement, rate_ops: f64, setpoint_ns: f64) -> f64 {
        let t = self.tail_ns(m).max(1.0);
        let t0 = self.unloaded_ns.min(setpoint_ns / UNLOADED_MARGIN);
        let target = setpoint_ns - t0;
        let excess = (t - t0).max(EXCESS_FLOOR_SHARE * target);
        let bound = STEP_FACTOR_MAX.ln();
        rate_ops * ((target / excess).ln() / self.elasticity()).clamp(-bound, bound).exp()
    }

    /// The next rate after measuring `m` at rate `rate_ops`, aiming the tail at
    /// `setpoint_ns`, with saturation judged against the SLO `slo_ns`.
    pub fn step(&mut self, m: &Measurement, rate_ops: f64, setpoint_ns: f64, slo_ns: f64) -> f64 {
        self.observe(m);
        let t = self.tail_ns(m).max(1.0);
        let t0 = self.unloaded_ns.min(setpoint_ns / UNLOADED_MARGIN);
        let target = setpoint_ns - t0;
        let (lr, lt) = (rate_ops.ln(), (t - t0).max(EXCESS_FLOOR_SHARE * target).ln());
        let saturation = (SATURATION_FACTOR * slo_ns - t0).ln();
        // Only full windows teach the slope: an early one's quantile rests on few samples.
        if let (Some((r0, t0)), true) = (self.last, m.full) {
            if (lr - r0).abs() >= SECANT_MIN_REL_DR && lt < saturation && t0 < saturation {
                let e = ((lt - t0) / (lr - r0)).clamp(ELASTICITY_MIN, ELASTICITY_MAX);
                self.ln_elasticity += ELASTICITY_WEIGHT * (e.ln() - self.ln_elasticity);
            }
        }
        if m.full {
            self.last = Some((lr, lt));
        }
        let gain = self.gain();
        self.hold_decisions = match self.hold_decisions {
            None if t >= setpoint_ns => Some(0),
            None => None,
            Some(k) => Some(k.saturating_add(1)),
        };
        let bound = STEP_FACTOR_MAX.ln();
        let step = (gain * (target.ln() - lt) / self.elasticity()).clamp(-bound, bound);
        rate_ops * step.exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quantile::LatencySketch;
    use crate::time::Nanos;

    const SLO: f64 = 200_000.0;
    const QUANTILE: f64 = 0.992;

    /// A window of 1000 completions whose controlled quantile is `tail`.
    fn window(tail: f64) -> Measurement {
        let mut latency = LatencySketch::new();
        for _ in 0..990 {
            latency.record(tail / 2.0);
        }
        for _ in 0..10 {
            latency.record(tail);
        }
        Measurement {
            now: Nanos::ZERO,
            span: Nanos::from_ms(5),
            count: 1_000,
            slow: if tail > SLO { 1_000 } else { 0 },
            latency,
            stale: 0,
            stale_slow: 0,
            full: true,
        }
    }

    #[test]
    fn newton_learns_the_slope_and_finds_the_root_of_a_power_law() {
        // T = 100 µs × (R / 1 Mops)^4 meets the SLO of 200 µs at 1.189 Mops.
        let curve = |r: f64| 100_000.0 * (r / 1e6).powi(4);
        let mut core = NewtonCore::new(QUANTILE, GAIN_DEFAULT);
        let mut r = 200_000.0;
        for _ in 0..30 {
            r = core.step(&window(curve(r)), r, SLO, SLO);
        }
        assert!((r / 1.189e6 - 1.0).abs() < 0.01, "{r}");
        assert!((2.5..4.5).contains(&core.elasticity()), "{}", core.elasticity());
    }

    #[test]
    fn the_gain_is_full_until_the_setpoint_then_decays_and_reopens() {
        let mut core = NewtonCore::new(QUANTILE, GAIN_DEFAULT);
        assert_eq!(core.gain(), 1.0);
        core.step(&window(100_000.0), 1e6, SLO, SLO);
        assert_eq!(core.gain(), 1.0);
        core.step(&window(1.1 * SLO), 1e6, SLO, SLO);
        assert_eq!(core.gain(), GAIN_HOLD_MAX);
        for _ in 0..1_000 {
            core.step(&window(SLO), 1e6, SLO, SLO);
        }
        assert_eq!(core.gain(), GAIN_DEFAULT);
        core.curve_moved();
        assert_eq!(core.gain(), GAIN_HOLD_MAX);
    }

    #[test]
    fn the_safeguard_at_most_halves_and_a_step_at_most_doubles() {
        let mut core = NewtonCore::new(QUANTILE, 1.0);
        assert_eq!(core.step(&window(1_000.0), 1e6, SLO, SLO), 2e6);
        assert_eq!(core.step(&window(100.0 * SLO), 2e6, SLO, SLO), 1e6);
    }

    #[test]
    fn a_tail_mostly_unloaded_latency_is_climbed_fast() {
        // 290 µs unloaded, the SLO 447 µs: the tail rises by 1 µs per kops.
        let curve = |r: f64| 290_000.0 + r / 1_000.0 * 1_000.0;
        let mut core = NewtonCore::new(QUANTILE, GAIN_DEFAULT);
        let mut r = 10_000.0;
        let mut decisions = 0;
        while curve(r) < 0.9 * 447_000.0 && decisions < 50 {
            r = core.step(&window(curve(r)), r, 447_000.0, 447_000.0);
            decisions += 1;
        }
        // On T itself the first steps were 5 % each; on T − T₀ the ramp doubles.
        assert!(decisions <= 10, "{decisions} decisions to get near the knee");
    }

    #[test]
    fn saturated_points_teach_no_slope() {
        let mut core = NewtonCore::new(QUANTILE, GAIN_DEFAULT);
        core.step(&window(100_000.0), 1e6, SLO, SLO);
        core.step(&window(10.0 * SLO), 2e6, SLO, SLO);
        assert_eq!(core.elasticity(), ELASTICITY_PRIOR);
    }
}
