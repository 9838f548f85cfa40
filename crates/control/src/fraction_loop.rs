//! The X loop: choose the RPC fraction X (Kayak §4.3, Pseudocode 2), and Algorithm I's
//! latency-minimising X step for the X-R ordering.
//!
//! [`FractionLoop`] (R-X, Algorithm II) does gradient ascent on R(X), the rate the R loop
//! achieves at fraction X, where R̄ is the mean rate over the settled part of a period.
//! Pseudocode 2 takes the gradient as the secant of the last two (X, R̄) points; R̄ carries
//! the noise of every sampled p99 the R loop reacted to, and a two-point secant over a
//! small ΔX amplifies it, so to keep the ascent usable:
//! - **Regression gradient.** The gradient is the least-squares slope of ln R̄ against X over
//!   the last [`X_HISTORY_DEFAULT`] points — the two-point secant when only two exist. Over
//!   points spaced by Δ this cuts the gradient's noise several-fold; taking ln R̄ makes it a
//!   *relative* gradient, so one step size fits workloads from 10⁴ to 10⁷ ops/s.
//! - **Settling.** The first [`SETTLE_FRACTION_DEFAULT`] of a period after X moved is left
//!   out of R̄: the R loop is still catching up with the new X then.
//! - **Adaptive, bounded steps.** Pseudocode 2 moves X by η × gradient; under sampled p99s
//!   the gradient's magnitude is mostly noise, so the step is the smaller of η·|g| and an
//!   adaptive size that grows by [`X_STEP_GROWTH`] while successive gradients agree in sign
//!   and shrinks by [`X_STEP_SHRINK`] when the sign flips (Rprop-style; Pyxis §IV-C makes the
//!   same point that the sign is the robust part). |ΔX| ≤ [`X_STEP_MAX_DEFAULT`], so one
//!   noisy gradient cannot throw X across the range.
//! - **Minimum probe step.** |ΔX| ≥ [`X_STEP_MIN_DEFAULT`]: X always moves enough for the
//!   next secant to see a rate difference above the noise; near the optimum X dithers by
//!   this much, where R(X) is flat.
//! - **Boundaries.** X is clamped to [0, 1]. When the gradient pushes X against a boundary
//!   (light work's optimum is X = 1) X stays there for a dwell of 1, 2, 4, …,
//!   [`BOUNDARY_DWELL_MAX_DEFAULT`] periods between single inward probes, so the loop sits at
//!   the optimum most of the time yet notices within a few periods when the optimum leaves
//!   the boundary.

use crate::error::{check_range, ConfigError};
use crate::time::Nanos;

/// Default X-loop period: 20 Hz, the paper's slow-loop frequency (§4.3).
pub const FRACTION_PERIOD_DEFAULT: Nanos = Nanos::from_ms(50);

/// Default starting X: 1 (all remote), as in the paper's experiments (§6).
pub const X_INIT_DEFAULT: f64 = 1.0;

/// Default gradient step size η: ΔX = η · (relative rate change per unit X). A workload
/// whose rate doubles across the whole X range has a relative gradient ≈ 1, so far from
/// the optimum X moves by about one tenth of the range per period.
pub const X_GAIN_DEFAULT: f64 = 0.1;

/// Default smallest step (the probe): 2 % of requests, enough to move R̄ by more than its
/// noise on the workloads of the paper, small enough that dithering around the optimum
/// costs well under 1 % of throughput.
pub const X_STEP_MIN_DEFAULT: f64 = 0.02;

/// Default largest step per period: crossing the whole range takes ≥ 10 periods (0.5 s),
/// and a single bad gradient moves X by at most 0.1.
pub const X_STEP_MAX_DEFAULT: f64 = 0.1;

/// Default part of a period discarded after X moves while the R loop re-converges: 40 % of
/// 50 ms is four R-loop periods.
pub const SETTLE_FRACTION_DEFAULT: f64 = 0.4;

/// Longest stay at a boundary between two inward probes, in periods: 4 × 50 ms bounds the
/// delay before the loop notices that the optimum moved inside the range.
pub const BOUNDARY_DWELL_MAX_DEFAULT: u32 = 4;

/// Default number of recent (X, R̄) points the gradient is fitted over: 4 periods (200 ms)
/// average out R̄'s noise yet forget a changed workload within a quarter second.
pub const X_HISTORY_DEFAULT: usize = 4;

/// Largest accepted history length.
pub const X_HISTORY_MAX: usize = 64;

/// Growth of the step size per period while successive gradients agree in sign: from the
/// probe step to the largest in 6 periods (0.3 s).
pub const X_STEP_GROWTH: f64 = 1.5;

/// Shrink of the step size when the gradient's sign flips: halving (bisection of the last
/// step, which straddled the optimum or was a noise-made turn).
pub const X_STEP_SHRINK: f64 = 0.5;

/// Algorithm I's default X step size on the relative latency gradient.
pub const LATENCY_X_GAIN_DEFAULT: f64 = 0.1;

/// Tolerance for "X is at a boundary" and "X did not move".
const X_EPS: f64 = 1e-9;

/// How the X loop runs.
#[derive(Clone, Debug, PartialEq)]
pub struct FractionLoopConfig {
    /// Time between two updates of X.
    pub period: Nanos,
    /// X before the first update.
    pub x_init: f64,
    /// Gradient step size η.
    pub gain: f64,
    /// Smallest |ΔX| (the probe step).
    pub step_min: f64,
    /// Largest |ΔX|.
    pub step_max: f64,
    /// Part of each period ignored after X moved.
    pub settle_fraction: f64,
    /// Longest dwell at a boundary between probes, in periods.
    pub dwell_max_periods: u32,
    /// Points the gradient is fitted over (2 = Pseudocode 2's plain secant).
    pub history: usize,
}

impl Default for FractionLoopConfig {
    fn default() -> Self {
        FractionLoopConfig {
            period: FRACTION_PERIOD_DEFAULT,
            x_init: X_INIT_DEFAULT,
            gain: X_GAIN_DEFAULT,
            step_min: X_STEP_MIN_DEFAULT,
            step_max: X_STEP_MAX_DEFAULT,
            settle_fraction: SETTLE_FRACTION_DEFAULT,
            dwell_max_periods: BOUNDARY_DWELL_MAX_DEFAULT,
            history: X_HISTORY_DEFAULT,
        }
    }
}

impl FractionLoopConfig {
    /// Rejects values the loop is not defined for.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_range("X-loop period", "[1 µs, ∞)", self.period.0 as f64, 1e3, f64::MAX)?;
        check_range("initial rpc fraction", "[0, 1]", self.x_init, 0.0, 1.0)?;
        check_range("X-loop gain", "(0, 10]", self.gain, 1e-9, 10.0)?;
        check_range("X probe step", "(0, 0.5]", self.step_min, 1e-6, 0.5)?;
        check_range("X maximum step", "[probe step, 1]", self.step_max, self.step_min, 1.0)?;
        check_range("X settle fraction", "[0, 0.9]", self.settle_fraction, 0.0, 0.9)?;
        check_range(
            "X gradient history",
            "[2, 64] points",
            self.history as f64,
            2.0,
            X_HISTORY_MAX as f64,
        )?;
        check_range(
            "X boundary dwell",
            "[0, 1000] periods",
            self.dwell_max_periods as f64,
            0.0,
            1000.0,
        )?;
        Ok(())
    }
}

/// Bounds a raw step: at most `step_max`, at least `step_min` in the direction of `raw`
/// (or of `fallback_dir` when `raw` is zero).
fn bounded_step(raw: f64, step_min: f64, step_max: f64, fallback_dir: f64) -> f64 {
    let dir = if raw > 0.0 {
        1.0
    } else if raw < 0.0 {
        -1.0
    } else {
        fallback_dir
    };
    dir * raw.abs().clamp(step_min, step_max)
}

/// Direction of a probe from `x`: inward at a boundary, else `dir`.
fn probe_dir(x: f64, dir: f64) -> f64 {
    if x >= 1.0 - X_EPS {
        -1.0
    } else if x <= X_EPS {
        1.0
    } else {
        dir
    }
}

/// Gradient ascent of X on the rate the R loop achieves (Algorithm II's outer loop).
#[derive(Clone, Debug)]
pub struct FractionLoop {
    /// Tuning.
    cfg: FractionLoopConfig,
    /// The fraction currently applied.
    x: f64,
    /// When the next update is due.
    next_tick: Nanos,
    /// When X last changed (start of the current settling).
    changed_at: Nanos,
    /// Rates reported by the R loop since X last changed, with their times.
    samples: Vec<(Nanos, f64)>,
    /// Recent (X, ln R̄) points, oldest first.
    history: std::collections::VecDeque<(f64, f64)>,
    /// Sign of the last move, the direction of the next probe.
    direction: f64,
    /// Periods left to stay at the boundary.
    dwell_left: u32,
    /// Length of the last dwell (doubles up to the cap).
    dwell_len: u32,
    /// Current adaptive step size, in [step_min, step_max].
    step: f64,
}

impl FractionLoop {
    /// A loop starting at `cfg.x_init`, first updating one period after `now`.
    pub fn new(cfg: FractionLoopConfig, now: Nanos) -> Result<Self, ConfigError> {
        cfg.validate()?;
        Ok(FractionLoop {
            x: cfg.x_init,
            next_tick: now.saturating_add(cfg.period),
            changed_at: now,
            samples: Vec::new(),
            history: std::collections::VecDeque::with_capacity(cfg.history + 1),
            direction: -1.0,
            dwell_left: 0,
            dwell_len: 0,
            // The first move is a large probe: near a boundary R(X) can be flat enough that a
            // probe-sized move is lost in the noise, and the loop would never leave it.
            step: cfg.step_max,
            cfg,
        })
    }

    /// The fraction to apply now.
    pub fn x(&self) -> f64 {
        self.x
    }

    /// When `tick` is next due.
    pub fn next_tick(&self) -> Nanos {
        self.next_tick
    }

    /// Feeds the rate the R loop set at `now`.
    pub fn observe_rate(&mut self, now: Nanos, rate_ops: f64) {
        if rate_ops.is_finite() {
            self.samples.push((now, rate_ops));
        }
    }

    /// Mean rate over the settled part of the current period.
    fn settled_rate(&self, now: Nanos) -> Option<f64> {
        let since = now.saturating_sub(self.changed_at).as_nanos() as f64;
        let settle_at = self.changed_at.0 + (self.cfg.settle_fraction * since) as u64;
        let settled: Vec<f64> = self
            .samples
            .iter()
            .filter(|(t, _)| t.0 > settle_at)
            .map(|&(_, r)| r)
            .collect();
        let use_all = settled.is_empty();
        let (sum, n) = if use_all {
            self.samples
                .iter()
                .fold((0.0, 0usize), |(s, n), &(_, r)| (s + r, n + 1))
        } else {
            (settled.iter().sum::<f64>(), settled.len())
        };
        (n > 0).then(|| sum / n as f64)
    }

    /// Skips the update due at `now`, keeping X, and drops the rates seen so far.
    pub fn hold(&mut self, now: Nanos) {
        while self.next_tick <= now {
            self.next_tick = self.next_tick.saturating_add(self.cfg.period);
        }
        self.samples.clear();
        self.changed_at = now;
    }

    /// Least-squares slope of ln R̄ against X over the history; None without two distinct X
    /// values or when the newest point shares its X with all others (nothing to compare).
    fn gradient(&self) -> Option<f64> {
        let n = self.history.len() as f64;
        if n < 2.0 {
            return None;
        }
        let mx = self.history.iter().map(|p| p.0).sum::<f64>() / n;
        let my = self.history.iter().map(|p| p.1).sum::<f64>() / n;
        let sxx: f64 = self.history.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
        let sxy: f64 = self.history.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        // The newest point must differ from the mean, or the fit says nothing about where
        // the current X stands (e.g. the first period after a long boundary dwell).
        let newest = self.history.back().map_or(mx, |p| p.0);
        if sxx <= X_EPS * X_EPS || (newest - mx).abs() <= X_EPS {
            return None;
        }
        Some(sxy / sxx)
    }

    /// Updates X from the rates seen since the last update. Returns the new X.
    pub fn tick(&mut self, now: Nanos) -> f64 {
        while self.next_tick <= now {
            self.next_tick = self.next_tick.saturating_add(self.cfg.period);
        }
        let Some(r) = self.settled_rate(now) else {
            return self.x;
        };
        self.history.push_back((self.x, r.max(f64::MIN_POSITIVE).ln()));
        while self.history.len() > self.cfg.history {
            self.history.pop_front();
        }
        if self.dwell_left > 0 {
            // Sitting at a boundary the gradient confirmed: keep measuring it.
            self.dwell_left -= 1;
            self.samples.clear();
            self.changed_at = now;
            return self.x;
        }
        let (step, probing) = match self.gradient() {
            Some(g) => {
                // Step size from the agreement of successive gradient signs: it grows while
                // the sign holds (far from the optimum) and shrinks when it flips (around
                // the optimum, or when noise flipped it).
                let dir = if g > 0.0 {
                    1.0
                } else if g < 0.0 {
                    -1.0
                } else {
                    self.direction
                };
                self.step = if dir == self.direction {
                    (self.step * X_STEP_GROWTH).min(self.cfg.step_max)
                } else {
                    (self.step * X_STEP_SHRINK).max(self.cfg.step_min)
                };
                // ...and never beyond what the gradient's magnitude asks for.
                let by_value = (self.cfg.gain * g.abs()).max(self.cfg.step_min);
                (dir * self.step.min(by_value), false)
            }
            None => {
                let probe = probe_dir(self.x, self.direction) * self.step;
                self.step = self.cfg.step_min;
                (probe, true)
            }
        };
        let next = (self.x + step).clamp(0.0, 1.0);
        if (next - self.x).abs() <= X_EPS {
            // The gradient pushes against the boundary: stay, and probe inward later — by
            // the probe step only, not by the size the climb had grown to.
            self.step = self.cfg.step_min;
            self.dwell_len = (self.dwell_len * 2).clamp(1, self.cfg.dwell_max_periods.max(1));
            self.dwell_left = self.dwell_len.min(self.cfg.dwell_max_periods);
            self.samples.clear();
            self.changed_at = now;
            return self.x;
        }
        if !probing && next.min(1.0 - next) > self.cfg.step_min + X_EPS {
            // Left the boundary region on the gradient's word: forget the dwell history.
            self.dwell_len = 0;
        }
        self.direction = if step > 0.0 { 1.0 } else { -1.0 };
        self.x = next;
        self.samples.clear();
        self.changed_at = now;
        self.x
    }
}

/// Gradient descent of X on the measured tail latency at a fixed rate: Algorithm I's inner
/// loop (X-R ordering), kept to reproduce the instability the paper reports (§4.2).
#[derive(Clone, Debug)]
pub struct LatencyFractionLoop {
    /// Tuning (`gain` applies to the relative latency gradient; no dwell, no settling).
    cfg: FractionLoopConfig,
    /// The fraction currently applied.
    x: f64,
    /// When the next update is due.
    next_tick: Nanos,
    /// The previous (X, T) point.
    prev: Option<(f64, f64)>,
    /// Sign of the last move.
    direction: f64,
}

impl LatencyFractionLoop {
    /// A loop starting at `cfg.x_init`, first updating one period after `now`.
    pub fn new(cfg: FractionLoopConfig, now: Nanos) -> Result<Self, ConfigError> {
        cfg.validate()?;
        Ok(LatencyFractionLoop {
            x: cfg.x_init,
            next_tick: now.saturating_add(cfg.period),
            prev: None,
            direction: -1.0,
            cfg,
        })
    }

    /// The fraction to apply now.
    pub fn x(&self) -> f64 {
        self.x
    }

    /// When `tick` is next due.
    pub fn next_tick(&self) -> Nanos {
        self.next_tick
    }

    /// Updates X from the tail latency `t_ns` measured over the last period (None: no
    /// samples, X holds). Returns the new X.
    pub fn tick(&mut self, now: Nanos, t_ns: Option<f64>) -> f64 {
        while self.next_tick <= now {
            self.next_tick = self.next_tick.saturating_add(self.cfg.period);
        }
        let Some(t) = t_ns else {
            return self.x;
        };
        let step = match self.prev {
            Some((xp, tp)) if (self.x - xp).abs() > X_EPS && tp + t > 0.0 => {
                let gradient = ((t - tp) / (0.5 * (t + tp))) / (self.x - xp);
                bounded_step(
                    -self.cfg.gain * gradient,
                    self.cfg.step_min,
                    self.cfg.step_max,
                    self.direction,
                )
            }
            _ => probe_dir(self.x, self.direction) * self.cfg.step_min,
        };
        self.prev = Some((self.x, t));
        let next = (self.x + step).clamp(0.0, 1.0);
        self.direction = if step > 0.0 { 1.0 } else { -1.0 };
        self.x = next;
        self.x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the ascent against a deterministic concave R(X), feeding one rate per 5 ms.
    fn ascend(x_init: f64, r_of_x: impl Fn(f64) -> f64, periods: u64) -> Vec<f64> {
        let cfg = FractionLoopConfig {
            x_init,
            ..FractionLoopConfig::default()
        };
        let mut fl = FractionLoop::new(cfg, Nanos::ZERO).unwrap();
        let mut xs = Vec::new();
        for k in 1..=periods * 10 {
            let now = Nanos::from_ms(5 * k);
            fl.observe_rate(now, r_of_x(fl.x()));
            if now >= fl.next_tick() {
                xs.push(fl.tick(now));
            }
        }
        xs
    }

    #[test]
    fn climbs_to_an_interior_optimum_from_either_side() {
        // R(X) = 1e6 (1 − 2 (X − 0.4)²): optimum at 0.4.
        let r = |x: f64| 1e6 * (1.0 - 2.0 * (x - 0.4) * (x - 0.4));
        for x0 in [0.0, 0.25, 0.75, 1.0] {
            let xs = ascend(x0, r, 40);
            let tail = &xs[20..];
            let mean = tail.iter().sum::<f64>() / tail.len() as f64;
            assert!((mean - 0.4).abs() < 0.05, "x0={x0}: mean {mean}, {xs:?}");
        }
    }

    #[test]
    fn stays_at_the_boundary_when_it_is_the_optimum() {
        // Increasing R(X): optimum X = 1.
        let xs = ascend(0.5, |x| 1e6 * (1.0 + x), 60);
        let tail = &xs[30..];
        let at_one = tail.iter().filter(|&&x| x == 1.0).count();
        assert!(at_one * 10 >= tail.len() * 7, "{tail:?}");
        assert!(tail.iter().all(|&x| x >= 1.0 - 2.0 * X_STEP_MIN_DEFAULT));
    }

    #[test]
    fn every_step_is_bounded_and_probes_are_taken() {
        let xs = ascend(1.0, |x| 1e6 * (2.0 - x), 30);
        let mut prev = 1.0;
        for &x in &xs {
            assert!((x - prev).abs() <= X_STEP_MAX_DEFAULT + 1e-12, "{xs:?}");
            prev = x;
        }
        // Optimum at 0: it gets there.
        assert!(*xs.last().unwrap() <= 2.0 * X_STEP_MIN_DEFAULT, "{xs:?}");
    }

    #[test]
    fn latency_loop_descends_a_convex_latency() {
        let cfg = FractionLoopConfig {
            x_init: 1.0,
            period: Nanos::from_ms(5),
            ..FractionLoopConfig::default()
        };
        let mut fl = LatencyFractionLoop::new(cfg, Nanos::ZERO).unwrap();
        for k in 1..=400u64 {
            let x = fl.x();
            let t = 100e3 * (1.0 + 4.0 * (x - 0.3) * (x - 0.3));
            fl.tick(Nanos::from_ms(5 * k), Some(t));
        }
        assert!((fl.x() - 0.3).abs() < 0.1, "{}", fl.x());
    }

    #[test]
    fn rejects_bad_config() {
        let cfg = FractionLoopConfig {
            step_min: 0.2,
            step_max: 0.1,
            ..FractionLoopConfig::default()
        };
        assert!(FractionLoop::new(cfg, Nanos::ZERO).is_err());
        let cfg = FractionLoopConfig {
            x_init: 1.5,
            ..FractionLoopConfig::default()
        };
        assert!(FractionLoop::new(cfg, Nanos::ZERO).is_err());
    }
}
