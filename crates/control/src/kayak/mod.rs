//! Kayak's dual loop as one [`Policy`], the paper's algorithm kept as a baseline.
//!
//! Two orderings, as in the paper:
//! - [`LoopOrder::RateThenFraction`] (Algorithm II, the one Kayak ships): the fast inner R
//!   loop (ferry's, see [`crate::rate`]) holds the tail at the SLO, the slow outer X loop
//!   ([`gradient`], Pseudocode 2) climbs the rate it reaches;
//! - [`LoopOrder::FractionThenRate`] (Algorithm I, the strawman): the fast inner X loop
//!   ([`latency_x`]) descends the sampled tail at the current rate, the slow outer R loop
//!   moves R.
//!
//! Kayak+ (`kayak-plus`, Pyxis' baseline for mixes) is Algorithm II with one X per
//! function, climbed one function at a time ([`coordinate`]).
//!
//! The loops exchange values: each R-loop tick reports its decision (the rate it heads
//! for), the X loop's step returns the X to apply, and in Algorithm II a move of X tells
//! the R loop that its curve moved (its evidence restarts, see [`RateLoop::restart`]). In both orderings
//! the inner loop must run faster than the outer: [`Kayak::new`] rejects it otherwise
//! ([`ControlError::InnerNotFaster`]).

pub mod coordinate;
pub mod gradient;
pub mod latency_x;

use crate::arbiter::Arbiter;
use crate::error::{check_range, ControlError};
use crate::policy::{Completion, FnId, Placement, Policy, PolicyState};
use crate::rate::{RateLoop, RateLoopConfig, RATE_PERIOD_DEFAULT};
use crate::time::Nanos;

use self::coordinate::{CoordinateAscent, STEPS_PER_FUNCTION_DEFAULT};
use self::gradient::{GradientAscent, ETA_DEFAULT};
use self::latency_x::{LatencyDescent, LATENCY_ETA_DEFAULT};

/// Default X-loop period: 20 Hz, the paper's slow-loop frequency (§4.3).
pub const X_PERIOD_DEFAULT: Nanos = Nanos::from_ms(50);

/// Default start X: everything remote, where ASFP starts too.
pub const X_INIT_DEFAULT: f64 = 1.0;

/// Which loop is inner (fast) and which is outer (slow).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoopOrder {
    /// R inner, X outer: Algorithm II (`kayak`).
    RateThenFraction,
    /// X inner, R outer: Algorithm I (`kayak-xr`).
    FractionThenRate,
}

/// Everything a Kayak policy needs.
#[derive(Clone, Debug, PartialEq)]
pub struct KayakConfig {
    /// Which ordering of the two loops.
    pub order: LoopOrder,
    /// The R loop (its period is the R loop's frequency).
    pub rate: RateLoopConfig,
    /// Time between two X steps.
    pub x_period: Nanos,
    /// X before the first step.
    pub x_init: f64,
    /// The X loop's step size.
    pub eta: f64,
    /// Seed of the arbiter's draws.
    pub seed: u64,
    /// Kayak+: one X per function, each climbed for this many X-loop steps in turn (with
    /// [`LoopOrder::RateThenFraction`] only); None: one X for the workload.
    pub steps_per_function: Option<u32>,
}

impl KayakConfig {
    /// Algorithm II with the paper's frequencies: R at 200 Hz inside X at 20 Hz.
    pub fn rate_then_fraction(rate: RateLoopConfig, seed: u64) -> Self {
        KayakConfig {
            order: LoopOrder::RateThenFraction,
            rate,
            x_period: X_PERIOD_DEFAULT,
            x_init: X_INIT_DEFAULT,
            eta: ETA_DEFAULT,
            seed,
            steps_per_function: None,
        }
    }

    /// Kayak+: Algorithm II with one X per function, climbed in turn.
    pub fn per_function(rate: RateLoopConfig, seed: u64) -> Self {
        KayakConfig {
            steps_per_function: Some(STEPS_PER_FUNCTION_DEFAULT),
            ..KayakConfig::rate_then_fraction(rate, seed)
        }
    }

    /// Algorithm I with the frequencies swapped: X at 200 Hz inside R at 20 Hz.
    pub fn fraction_then_rate(mut rate: RateLoopConfig, seed: u64) -> Self {
        rate.period = X_PERIOD_DEFAULT;
        KayakConfig {
            order: LoopOrder::FractionThenRate,
            rate,
            x_period: RATE_PERIOD_DEFAULT,
            x_init: X_INIT_DEFAULT,
            eta: LATENCY_ETA_DEFAULT,
            seed,
            steps_per_function: None,
        }
    }

    /// Rejects inconsistent configurations, including an inner loop that is not faster.
    pub fn validate(&self) -> Result<(), ControlError> {
        self.rate.validate()?;
        check_range("X-loop period", "[1 µs, ∞)", self.x_period.0 as f64, 1e3, f64::MAX)?;
        check_range("start X", "[0, 1]", self.x_init, 0.0, 1.0)?;
        if self.steps_per_function.is_some() && self.order != LoopOrder::RateThenFraction {
            return Err(ControlError::Unknown {
                what: "per-function loop order",
                name: "fraction-then-rate".into(),
                allowed: "rate-then-fraction (Kayak+ is Algorithm II per function)",
            });
        }
        let (inner, outer, inner_period, outer_period) = match self.order {
            LoopOrder::RateThenFraction => ("R loop", "X loop", self.rate.period, self.x_period),
            LoopOrder::FractionThenRate => ("X loop", "R loop", self.x_period, self.rate.period),
        };
        if inner_period >= outer_period {
            return Err(ControlError::InnerNotFaster {
                inner,
                outer,
                inner_period_ns: inner_period.0,
                outer_period_ns: outer_period.0,
            });
        }
        Ok(())
    }
}

/// The X loop of either ordering.
enum XLoop {
    /// Algorithm II: gradient ascent of R(X).
    Rate(GradientAscent),
    /// Algorithm I: gradient descent of the tail in X.
    Latency(LatencyDescent),
    /// Kayak+: Algorithm II's ascent on one function's X at a time.
    PerFunction(CoordinateAscent),
}

/// Kayak's dual loop (see the module docs).
pub struct Kayak {
    arbiter: Arbiter,
    rate: RateLoop,
    x_loop: XLoop,
    x_period: Nanos,
    next_x_tick: Nanos,
    name: &'static str,
}

impl Kayak {
    /// A policy starting at `now`.
    pub fn new(cfg: KayakConfig, now: Nanos) -> Result<Self, ControlError> {
        cfg.validate()?;
        let (x_loop, name) = match (cfg.order, cfg.steps_per_function) {
            (LoopOrder::RateThenFraction, Some(steps)) => (
                XLoop::PerFunction(CoordinateAscent::new(cfg.x_init, cfg.eta, steps)?),
                "kayak-plus",
            ),
            (LoopOrder::RateThenFraction, None) => (XLoop::Rate(GradientAscent::new(cfg.x_init, cfg.eta)?), "kayak"),
            (LoopOrder::FractionThenRate, _) => (
                XLoop::Latency(LatencyDescent::new(cfg.x_init, cfg.rate.quantile, cfg.eta)),
                "kayak-xr",
            ),
        };
        Ok(Kayak {
            arbiter: Arbiter::new(cfg.x_init, cfg.seed)?,
            rate: RateLoop::new(cfg.rate, now)?,
            x_loop,
            x_period: cfg.x_period,
            next_x_tick: now.saturating_add(cfg.x_period),
            name,
        })
    }
}

impl Policy for Kayak {
    fn name(&self) -> String {
        self.name.into()
    }
    fn place(&mut self, _now: Nanos, fn_id: FnId) -> Placement {
        match &self.x_loop {
            XLoop::PerFunction(c) => self.arbiter.draw(c.x(fn_id.0)),
            _ => self.arbiter.place(),
        }
    }
    fn on_completion(&mut self, now: Nanos, completion: &Completion) {
        self.rate.on_completion(now, completion.latency_ns);
        match &mut self.x_loop {
            XLoop::Latency(l) => l.observe(completion.latency_ns),
            XLoop::PerFunction(c) => c.completed(completion.fn_id.0),
            XLoop::Rate(_) => {}
        }
    }
    fn tick(&mut self, now: Nanos) {
        if now >= self.rate.next_tick() {
            let report = self.rate.tick(now);
            match (&mut self.x_loop, report.decision) {
                (XLoop::Rate(g), Some(d)) => g.observe(d.heading_ops),
                (XLoop::PerFunction(c), Some(d)) => c.observe(d.heading_ops),
                _ => {}
            }
        }
        if now >= self.next_x_tick {
            while self.next_x_tick <= now {
                self.next_x_tick = self.next_x_tick.saturating_add(self.x_period);
            }
            let x = match &mut self.x_loop {
                XLoop::Rate(g) => g.step(),
                XLoop::Latency(l) => l.step(),
                XLoop::PerFunction(c) => {
                    if c.step() {
                        // One function's X moved: the R loop's curve did.
                        self.rate.restart(now);
                    }
                    // The arbiter's X is the share sent remote: the capacity bound and
                    // reports read it.
                    c.remote_share()
                }
            };
            if let XLoop::PerFunction(_) = self.x_loop {
                self.arbiter.set_x(x);
            } else if (x - self.arbiter.x()).abs() > 1e-12 {
                self.arbiter.set_x(x);
                if matches!(self.x_loop, XLoop::Rate(_)) {
                    // The outer loop moved the inner loop's curve: the R loop's evidence
                    // restarts at the new X. (In Algorithm I the R loop is the outer one and
                    // measures across the inner X loop's moves.)
                    self.rate.restart(now);
                }
            }
        }
    }
    fn next_tick(&self) -> Nanos {
        self.rate.next_tick().min(self.next_x_tick)
    }
    fn rate_loop(&self) -> Option<&RateLoop> {
        Some(&self.rate)
    }
    fn on_refused(&mut self, now: Nanos, _fn_id: FnId) {
        self.rate.on_refused(now);
    }
    fn state(&self) -> PolicyState {
        PolicyState::of_rate_loop(&self.rate, self.arbiter.x(), None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_inner_loop_must_be_faster() {
        let mut cfg = KayakConfig::rate_then_fraction(RateLoopConfig::new(200_000.0), 1);
        assert!(cfg.validate().is_ok());
        cfg.x_period = Nanos::from_ms(5);
        assert!(matches!(cfg.validate(), Err(ControlError::InnerNotFaster { .. })));
        let xr = KayakConfig::fraction_then_rate(RateLoopConfig::new(200_000.0), 1);
        assert!(xr.validate().is_ok());
        assert!(xr.x_period < xr.rate.period);
    }

    #[test]
    fn kayak_plus_places_each_function_by_its_own_x() {
        let cfg = KayakConfig::per_function(RateLoopConfig::new(200_000.0), 1);
        let mut p = Kayak::new(cfg.clone(), Nanos::ZERO).unwrap();
        assert_eq!(p.name(), "kayak-plus");
        // Before any step every function sits at the start X (1: all remote).
        assert_eq!(p.place(Nanos::ZERO, FnId(3)), Placement::Remote);
        let per_function_xr = KayakConfig {
            steps_per_function: Some(10),
            ..KayakConfig::fraction_then_rate(RateLoopConfig::new(200_000.0), 1)
        };
        assert!(per_function_xr.validate().is_err());
    }
}
