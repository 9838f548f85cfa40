//! The R loop: find the largest admission rate R whose tail latency meets the SLO
//! (Kayak §4.3, Pseudocode 1).
//!
//! Every period the loop reads the p99 T of the completions of the last window and takes a
//! Newton (secant) step toward T = SLO: `ΔR = (t0 − T) / s`, where Pseudocode 1 takes the
//! slope s from the last two points, `s = (T − T_prev) / (R − R_prev)`; when `R + ΔR ≤ 0`
//! it halves R instead (the paper's safeguard, M = 2). Sampled p99s are noisy, a secant
//! through two noisy points is noisier still, and above capacity T measures a growing
//! backlog rather than R. So on top of the paper the step is made robust:
//! 1. **Slow start.** Until T first reaches [`SLOW_START_EXIT`] × SLO, R doubles every
//!    period: down there T(R) is flat, its secants are noise, and Newton would crawl.
//! 2. **Distinguishable points.** The secant is taken against the last *anchor* point, which
//!    only moves once R has changed by [`SECANT_MIN_REL_DR`]; closer points differ by noise
//!    more than by R. A secant counts only if T rose with R (Observation 1) and neither
//!    point was saturated (T > [`SLOPE_SATURATION_FACTOR`] × SLO).
//! 3. **Slope in elasticity form, smoothed and bounded.** A secant is recorded as an
//!    elasticity e = Δln T / Δln R (dimensionless, so it stays meaningful as R moves by
//!    orders of magnitude), averaged over secants ([`ELASTICITY_EWMA_WEIGHT`]) and bounded
//!    to [[`ELASTICITY_MIN`], [`ELASTICITY_MAX`]]; the step uses the slope s = e·T/R.
//!    Before the first secant e = [`ELASTICITY_PRIOR`].
//! 4. **Under-relaxation over a window.** The quantile is taken over a window of several
//!    periods (pooling enough completions that its p99 is the SLO's p99, not the median of
//!    short-window p99s), and each period takes [`RATE_GAIN_DEFAULT`] of the Newton step, so
//!    a latency spike, which stays in the window for several periods, moves R about once.
//!    In a saturated window (T > [`SLOPE_SATURATION_FACTOR`] × SLO) R is halved outright,
//!    once per window length (the window shows the same backlog for several periods).
//! 5. **Trust region.** R grows by at most [`RATE_STEP_UP_NEAR`] per period once T is
//!    within reach of the SLO (doubling below), and never drops by more than half (the
//!    paper's safeguard applied to every step).
//! 6. **Decaying bracket.** The loop remembers the lowest rate seen violating the SLO and
//!    the highest seen meeting it, and a step goes at most [`BRACKET_STEP_FRACTION`] of the
//!    way to the bracket's edge (safeguarded Newton: bisection when Newton overshoots). The
//!    bracket widens by [`BRACKET_DECAY`] per period, so a stale or noise-made bracket
//!    dissolves within a few hundred milliseconds.

use std::collections::VecDeque;

use crate::error::{check_range, ConfigError};
use crate::quantile::QuantileWindow;
use crate::time::Nanos;

/// Default R-loop period: 200 Hz, the paper's fast-loop frequency (§4.3).
pub const RATE_PERIOD_DEFAULT: Nanos = Nanos::from_ms(5);

/// Default starting rate: low enough to be feasible on the slowest setup ferry targets
/// (the 1+1-core loopback machine does ~10⁴ ops/s), and ~9 doublings (< 50 ms at 200 Hz)
/// away from the multi-Mops rates of an 8+8-core cluster.
pub const RATE_INIT_OPS_DEFAULT: f64 = 10_000.0;

/// Floor on R: below ~100 requests/s a 5 ms window holds no sample at all, the loop would be
/// blind, and could never climb back.
pub const RATE_MIN_OPS_DEFAULT: f64 = 100.0;

/// Ceiling on R: one request per nanosecond, far above anything a node can serve.
pub const RATE_MAX_OPS_DEFAULT: f64 = 1e9;

/// Default fraction of the Newton step taken per period (under-relaxation). A deviation of
/// T stays in the default window for [`RATE_WINDOW_PERIODS_DEFAULT`] periods, so R moves by
/// about half a Newton step on it in total: in the simulator this halves R's wander (its
/// coefficient of variation at a mixed X drops from ~4 % at 0.25 to ~2 %) and R still
/// settles within ~0.15 s from a cold start.
pub const RATE_GAIN_DEFAULT: f64 = 0.125;

/// Default quantile window, in R-loop periods: 4 × 5 ms = 20 ms pools ~10⁴ completions at
/// 0.5 Mops, so the window's p99 rests on ~100 tail samples and stall bursts average out.
pub const RATE_WINDOW_PERIODS_DEFAULT: u64 = 4;

/// Largest relative increase of R in one period while T < SLO·[`RATE_NEAR_FRACTION`]:
/// doubling reaches any rate from the initial one in a few dozen milliseconds.
pub const RATE_STEP_UP_FAR: f64 = 1.0;

/// Largest relative increase of R in one period once T ≥ SLO·[`RATE_NEAR_FRACTION`]: near
/// capacity T(R) is so steep that 10 % more load can multiply the p99, so the loop
/// approaches the knee in small steps instead of overshooting into a backlog.
pub const RATE_STEP_UP_NEAR: f64 = 0.1;

/// Where "near the SLO" starts for the trust region, as a fraction of the SLO.
pub const RATE_NEAR_FRACTION: f64 = 0.5;

/// Slow start ends the first time T reaches this fraction of the SLO: above the unloaded
/// p99 of the paper's workloads (≤ 0.6 × 200 µs with stalls) so noise cannot end it early,
/// low enough that the last doubling overshoots capacity by at most 2×.
pub const SLOW_START_EXIT: f64 = 0.75;

/// Largest relative decrease of R in one period: halving is the paper's safeguard (M = 2).
pub const RATE_STEP_DOWN_MAX: f64 = 0.5;

/// Smallest relative change of R between two points for their secant to be trusted: a
/// window's p99 is uncertain by ~10–20 %, so only over a ≥ 5 % change of R does the
/// resulting elasticity estimate carry more signal than noise.
pub const SECANT_MIN_REL_DR: f64 = 0.05;

/// Weight of a new valid secant in the moving average of elasticities (in log space).
pub const ELASTICITY_EWMA_WEIGHT: f64 = 0.5;

/// Elasticity assumed before any secant: a moderately loaded queue (T roughly ∝ R²).
pub const ELASTICITY_PRIOR: f64 = 2.0;

/// A point with T above this multiple of the SLO is saturated: its latency measures the
/// backlog built while overloaded, not the rate, so no slope is learned from it.
pub const SLOPE_SATURATION_FACTOR: f64 = 3.0;

/// Smallest elasticity d ln T / d ln R assumed. Below the knee the true elasticity is
/// lower, but there the trust region, not the slope, limits the step.
pub const ELASTICITY_MIN: f64 = 1.0;

/// Largest elasticity assumed: at a p99 SLO 3–20× the unloaded latency, queueing curves
/// have elasticities of ~2–20; a larger estimate is a noise artefact and would freeze R
/// (overestimating it only slows the approach, which the bracket then finishes).
pub const ELASTICITY_MAX: f64 = 20.0;

/// Relative widening of the remembered bracket per period: 2 % per 5 ms lets a stale edge
/// fade by 2.7× in 250 ms.
pub const BRACKET_DECAY: f64 = 0.02;

/// Largest part of the distance to the bracket edge covered by one step: one half is
/// bisection, the step that cannot overshoot a known violating rate.
pub const BRACKET_STEP_FRACTION: f64 = 0.5;

/// Fewest completions a window needs before its quantile is trusted; with fewer, R holds.
pub const SAMPLES_MIN_DEFAULT: u64 = 20;

/// What the R loop aims for and how it runs.
#[derive(Clone, Debug, PartialEq)]
pub struct RateLoopConfig {
    /// The latency target t0 (e.g. 200 µs for "p99 ≤ 200 µs").
    pub slo_latency_ns: f64,
    /// Which quantile the SLO constrains (0.99 for p99).
    pub quantile: f64,
    /// Time between two updates of R.
    pub period: Nanos,
    /// Span of completions the quantile is estimated over (rounded up to whole periods).
    pub window: Nanos,
    /// R before the first update.
    pub rate_init_ops: f64,
    /// Floor on R.
    pub rate_min_ops: f64,
    /// Ceiling on R.
    pub rate_max_ops: f64,
    /// Fraction of each Newton step taken, in (0, 1].
    pub gain: f64,
    /// Completions a window needs before R is updated from it.
    pub samples_min: u64,
}

impl RateLoopConfig {
    /// Defaults (200 Hz, four-period window, p99) for a latency target in nanoseconds.
    pub fn new(slo_latency_ns: f64) -> Self {
        RateLoopConfig {
            slo_latency_ns,
            quantile: 0.99,
            period: RATE_PERIOD_DEFAULT,
            window: Nanos(RATE_PERIOD_DEFAULT.0 * RATE_WINDOW_PERIODS_DEFAULT),
            rate_init_ops: RATE_INIT_OPS_DEFAULT,
            rate_min_ops: RATE_MIN_OPS_DEFAULT,
            rate_max_ops: RATE_MAX_OPS_DEFAULT,
            gain: RATE_GAIN_DEFAULT,
            samples_min: SAMPLES_MIN_DEFAULT,
        }
    }

    /// Rejects values the loop is not defined for.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_range("SLO latency", "(0, ∞) ns", self.slo_latency_ns, 1.0, f64::MAX)?;
        check_range("SLO quantile", "(0, 1)", self.quantile, 1e-9, 1.0 - 1e-9)?;
        check_range("R-loop period", "[1 µs, ∞)", self.period.0 as f64, 1e3, f64::MAX)?;
        check_range("R-loop window", "[1 ns, ∞)", self.window.0 as f64, 1.0, f64::MAX)?;
        check_range("minimum rate", "(0, 1e9] ops/s", self.rate_min_ops, 1e-9, 1e9)?;
        check_range(
            "maximum rate",
            "[minimum rate, 1e9] ops/s",
            self.rate_max_ops,
            self.rate_min_ops,
            1e9,
        )?;
        check_range(
            "initial rate",
            "[minimum rate, maximum rate]",
            self.rate_init_ops,
            self.rate_min_ops,
            self.rate_max_ops,
        )?;
        check_range("R-loop gain", "(0, 1]", self.gain, 1e-6, 1.0)?;
        Ok(())
    }

    fn window_slots(&self) -> usize {
        (self.window.0.div_ceil(self.period.0).max(1)) as usize
    }
}

/// Kayak's R loop (Pseudocode 1) with the robustness described in the module docs.
#[derive(Clone)]
pub struct RateLoop {
    /// Target and tuning.
    cfg: RateLoopConfig,
    /// Completions' latencies, one slot per period.
    latencies: QuantileWindow,
    /// The rate currently applied.
    rate_ops: f64,
    /// Rates applied during the most recent periods (newest last), to pair a window's
    /// quantile with the rate that produced it.
    applied: VecDeque<f64>,
    /// The anchor (R, T) point the next secant is taken against.
    anchor: Option<(f64, f64)>,
    /// Lowest rate recently seen violating the SLO (upper edge of the bracket).
    rate_hi_ops: f64,
    /// Highest rate recently seen meeting the SLO (lower edge of the bracket).
    rate_lo_ops: f64,
    /// Smoothed elasticity d ln T / d ln R, once a valid secant was seen.
    elasticity: Option<f64>,
    /// When the next update is due.
    next_tick: Nanos,
    /// The latest quantile estimate, for reports.
    estimate_ns: Option<f64>,
    /// Periods since R was last halved on a saturated window.
    since_halving: u32,
    /// Whether T has ever come within reach of the SLO (≥ [`RATE_NEAR_FRACTION`] × SLO).
    reached: bool,
}

impl RateLoop {
    /// A loop starting at `cfg.rate_init_ops`, first updating one period after `now`.
    pub fn new(cfg: RateLoopConfig, now: Nanos) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let latencies = QuantileWindow::new(cfg.period, cfg.window_slots())?;
        Ok(RateLoop {
            rate_ops: cfg.rate_init_ops,
            next_tick: now.saturating_add(cfg.period),
            applied: VecDeque::with_capacity(cfg.window_slots() + 1),
            latencies,
            anchor: None,
            rate_hi_ops: f64::INFINITY,
            rate_lo_ops: 0.0,
            elasticity: None,
            estimate_ns: None,
            reached: false,
            since_halving: u32::MAX,
            cfg,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &RateLoopConfig {
        &self.cfg
    }

    /// The rate to admit at now.
    pub fn rate_ops(&self) -> f64 {
        self.rate_ops
    }

    /// When `tick` is next due.
    pub fn next_tick(&self) -> Nanos {
        self.next_tick
    }

    /// The latest tail-latency estimate.
    pub fn latency_ns_estimate(&self) -> Option<f64> {
        self.estimate_ns
    }

    /// Whether the loop has climbed to the SLO's neighbourhood: before that R is still
    /// ramping, and an outer loop reading R would mistake the ramp for a gradient.
    pub fn has_reached_slo(&self) -> bool {
        self.reached
    }

    /// Feeds one completion's latency.
    pub fn on_completion(&mut self, now: Nanos, latency_ns: u64) {
        self.latencies.record(now, latency_ns as f64);
    }

    /// Forgets the anchor point and the bracket: call when something other than R changed
    /// the latency curve (X moved, the workload changed), so no secant or bracket spans the
    /// change. The smoothed elasticity is kept: the curve's shape changes less than its
    /// position.
    pub fn forget_secant(&mut self) {
        self.anchor = None;
        self.rate_hi_ops = f64::INFINITY;
        self.rate_lo_ops = 0.0;
    }

    /// Updates R from the latencies of the last window. Returns the new rate.
    pub fn tick(&mut self, now: Nanos) -> f64 {
        while self.next_tick <= now {
            self.next_tick = self.next_tick.saturating_add(self.cfg.period);
        }
        self.applied.push_back(self.rate_ops);
        while self.applied.len() > self.cfg.window_slots() {
            self.applied.pop_front();
        }
        let window = self.latencies.merged(now, self.latencies.span());
        if window.count() < self.cfg.samples_min {
            return self.rate_ops;
        }
        let Some(t) = window.quantile(self.cfg.quantile) else {
            return self.rate_ops;
        };
        self.estimate_ns = Some(t);
        if !self.reached {
            if t < SLOW_START_EXIT * self.cfg.slo_latency_ns {
                // Slow start: far below the SLO the latency curve is flat and its secants
                // are noise, so double R until the SLO comes within reach.
                self.rate_ops =
                    (self.rate_ops * (1.0 + RATE_STEP_UP_FAR)).clamp(self.cfg.rate_min_ops, self.cfg.rate_max_ops);
                return self.rate_ops;
            }
            self.reached = true;
        }
        let r = self.applied.iter().sum::<f64>() / self.applied.len() as f64;
        let r_max = self.applied.iter().copied().fold(r, f64::max);
        self.rate_ops = self.newton_step(r, r_max, t);
        self.rate_ops
    }

    /// One safeguarded, damped secant step from the point (r, t); `r_max` is the highest
    /// rate applied during the window.
    fn newton_step(&mut self, r: f64, r_max: f64, t: f64) -> f64 {
        let t0 = self.cfg.slo_latency_ns;
        // Age the bracket, then tighten it with this observation (the latest one wins).
        self.rate_hi_ops *= 1.0 + BRACKET_DECAY;
        self.rate_lo_ops *= 1.0 - BRACKET_DECAY;
        if t > t0 {
            // A saturated window still holds the backlog of the highest rate it saw: blame
            // that rate, not the (already lowered) mean, or the bracket would cap R below
            // rates that are perfectly feasible once the backlog drains.
            let culprit = if t > SLOPE_SATURATION_FACTOR * t0 { r_max } else { r };
            self.rate_hi_ops = culprit;
            self.rate_lo_ops = self.rate_lo_ops.min(culprit);
        } else {
            self.rate_lo_ops = r;
            self.rate_hi_ops = self.rate_hi_ops.max(r);
        }
        self.learn_elasticity(r, t);

        // Newton with the slope s = e·T/R of the smoothed, bounded elasticity.
        let e = self
            .elasticity
            .unwrap_or(ELASTICITY_PRIOR)
            .clamp(ELASTICITY_MIN, ELASTICITY_MAX);
        let slope = e * t / r;
        let mut next = r + self.cfg.gain * (t0 - t) / slope;
        self.since_halving = self.since_halving.saturating_add(1);
        if t > SLOPE_SATURATION_FACTOR * t0 {
            // A saturated window: the full Newton step is negative whatever the slope (only
            // the under-relaxation hides it), so the safeguard applies — once per window,
            // since the window keeps showing the same backlog for several periods.
            if self.since_halving as usize >= self.cfg.window_slots() {
                self.since_halving = 0;
                return (self.rate_ops / 2.0).clamp(self.cfg.rate_min_ops, self.cfg.rate_max_ops);
            }
            return self.rate_ops.min(r);
        }
        if next <= 0.0 {
            // Pseudocode 1's safeguard: discard the step and halve R.
            next = r / 2.0;
        }
        let up = if t < RATE_NEAR_FRACTION * t0 {
            RATE_STEP_UP_FAR
        } else {
            RATE_STEP_UP_NEAR
        };
        next = next.clamp(r * (1.0 - RATE_STEP_DOWN_MAX), r * (1.0 + up));
        // Stay inside the bracket: go at most halfway to an edge (bisection) per step.
        if next > r && r < self.rate_hi_ops {
            next = next.min(r + BRACKET_STEP_FRACTION * (self.rate_hi_ops - r));
        } else if next < r && r > self.rate_lo_ops {
            next = next.max(r - BRACKET_STEP_FRACTION * (r - self.rate_lo_ops));
        }
        next.clamp(self.cfg.rate_min_ops, self.cfg.rate_max_ops)
    }

    /// Updates the smoothed elasticity from the secant between the anchor and (r, t).
    fn learn_elasticity(&mut self, r: f64, t: f64) {
        let Some((ra, ta)) = self.anchor else {
            self.anchor = Some((r, t));
            return;
        };
        let dlr = (r / ra).ln();
        if dlr.abs() < SECANT_MIN_REL_DR {
            return;
        }
        let dlt = (t / ta).ln();
        let saturated = SLOPE_SATURATION_FACTOR * self.cfg.slo_latency_ns;
        if dlt / dlr > 0.0 && t <= saturated && ta <= saturated {
            let e = (dlt / dlr).clamp(ELASTICITY_MIN, ELASTICITY_MAX);
            self.elasticity = Some(match self.elasticity {
                None => e,
                Some(old) => ((1.0 - ELASTICITY_EWMA_WEIGHT) * old.ln() + ELASTICITY_EWMA_WEIGHT * e.ln()).exp(),
            });
        }
        self.anchor = Some((r, t));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drives a loop against a synthetic system whose p99 is `curve(R)`, completing
    /// `R · period` requests per period, all at that latency.
    fn drive(cfg: RateLoopConfig, curve: impl Fn(f64) -> f64, periods: usize) -> Vec<f64> {
        let mut rl = RateLoop::new(cfg.clone(), Nanos::ZERO).unwrap();
        let mut rates = Vec::new();
        for k in 1..=periods {
            let now = Nanos(cfg.period.0 * k as u64);
            let r = rl.rate_ops();
            let n = (r * cfg.period.as_secs_f64()).max(1.0) as u64;
            let lat = curve(r);
            for i in 0..n.min(5_000) {
                // Spread completions over the period just ended.
                let at = Nanos(now.0 - cfg.period.0 + 1 + i * cfg.period.0 / n.min(5_000));
                rl.on_completion(at, lat as u64);
            }
            rl.tick(now);
            rates.push(rl.rate_ops());
        }
        rates
    }

    /// M/M/1-like curve: T = base / (1 − R/cap), steep near capacity.
    fn mm1(base_ns: f64, cap_ops: f64) -> impl Fn(f64) -> f64 {
        move |r| {
            if r >= cap_ops {
                1e9
            } else {
                base_ns / (1.0 - r / cap_ops)
            }
        }
    }

    #[test]
    fn converges_to_the_rate_at_the_slo_from_below() {
        // Root: 10 µs / (1 − R/1M) = 200 µs → R* = 950 kops.
        let cfg = RateLoopConfig::new(200_000.0);
        let rates = drive(cfg, mm1(10_000.0, 1e6), 80);
        let last = *rates.last().unwrap();
        assert!((last - 950_000.0).abs() / 950_000.0 < 0.01, "{last}");
        // Within 40 periods (0.2 s at 200 Hz) it is already there.
        assert!((rates[40] - 950_000.0).abs() / 950_000.0 < 0.02, "{}", rates[40]);
    }

    #[test]
    fn converges_from_far_above_using_the_halving_safeguard() {
        let mut cfg = RateLoopConfig::new(200_000.0);
        cfg.rate_init_ops = 5e6;
        let rates = drive(cfg, mm1(10_000.0, 1e6), 80);
        // First step from saturation (almost exactly) halves.
        assert!((rates[0] - 2.5e6).abs() / 2.5e6 < 0.01, "{}", rates[0]);
        let last = *rates.last().unwrap();
        assert!((last - 950_000.0).abs() / 950_000.0 < 0.01, "{last}");
    }

    #[test]
    fn holds_rate_without_enough_samples() {
        let cfg = RateLoopConfig::new(200_000.0);
        let mut rl = RateLoop::new(cfg, Nanos::ZERO).unwrap();
        rl.on_completion(Nanos(10), 1_000);
        rl.tick(Nanos::from_ms(5));
        assert_eq!(rl.rate_ops(), RATE_INIT_OPS_DEFAULT);
        assert_eq!(rl.next_tick(), Nanos::from_ms(10));
    }

    #[test]
    fn rejects_bad_config() {
        let mut cfg = RateLoopConfig::new(200_000.0);
        cfg.gain = 0.0;
        assert!(RateLoop::new(cfg, Nanos::ZERO).is_err());
        let cfg = RateLoopConfig::new(-1.0);
        assert!(RateLoop::new(cfg, Nanos::ZERO).is_err());
        let mut cfg = RateLoopConfig::new(1000.0);
        cfg.rate_init_ops = 1.0;
        assert!(RateLoop::new(cfg, Nanos::ZERO).is_err());
    }
}
