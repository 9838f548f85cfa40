//! Kayak's dual loop as one [`Policy`]: R loop + X loop + Bernoulli arbiter.
//!
//! Two orderings, as in the paper:
//! - [`LoopOrder::RateThenFraction`] (Algorithm II, the one Kayak ships): the fast inner R
//!   loop holds the pooled p99 at the SLO, the slow outer X loop climbs the rate it
//!   achieves. X holds while R is not settled (ramping, or re-approaching after a collapse):
//!   the paper's reason for nesting the loops is that X may only climb a converged R. The
//!   two loops are coupled through hooks (`outer_x_tick`): the X loop reads the R loop's
//!   rate-equivalent, feeds the moves of its centre forward into R, re-opens the R loop's
//!   gain while travelling, and scans a coarse grid when the R loop reports a workload
//!   change, moving R to each grid point's rate.
//! - [`LoopOrder::FractionThenRate`] (Algorithm I, the strawman): the fast inner X loop
//!   minimises the sampled p99 at the current rate, the slow outer loop moves R toward the
//!   SLO. Under sampled p99s this one oscillates (§4.2, Fig. 7). The outer R step is the
//!   same safeguarded Newton loop as in Algorithm II (run slowly) rather than Algorithm I's
//!   fixed-η gradient step, so a comparison of the two orderings isolates the ordering: a
//!   fixed η is itself unstable unless η < 1/β (Theorem 1), whatever X does.
//!
//! In both, the inner loop must run faster than the outer: [`Kayak::new`] rejects a
//! configuration where it does not with [`ConfigError::InnerNotFaster`].

use crate::arbiter::Arbiter;
use crate::error::ConfigError;
use crate::fraction_loop::{
    FractionLoop, FractionLoopConfig, LatencyFractionLoop, FRACTION_PERIOD_DEFAULT, LATENCY_X_GAIN_DEFAULT,
    LATENCY_X_STEP_MIN,
};
use crate::policy::{Completion, FnId, Placement, Policy, PolicyState};
use crate::quantile::QuantileWindow;
use crate::rate_loop::{RateLoop, RateLoopConfig, RATE_PERIOD_DEFAULT};
use crate::time::Nanos;

/// Largest |d ln R / dX| the feed-forward applies: relative slopes of R(X) on the paper's
/// workloads are ~0.2–1.5; beyond 1 the estimate is more likely noise, and a feed-forward
/// that overshoots the achievable rate builds a backlog, while one that falls short only
/// leaves the R loop some climbing.
pub const FEED_FORWARD_GRADIENT_MAX: f64 = 1.0;

/// Share of a predicted *increase* of the achievable rate the feed-forward applies.
pub const FEED_FORWARD_UP_SHARE: f64 = 0.5;

/// Largest |Δ ln R| one feed-forward applies: ~10 %, the R loop's own largest step up.
pub const FEED_FORWARD_STEP_MAX: f64 = 0.1;

/// A move of the X loop's centre at least this large re-opens the R loop's gain: 0.03 of X
/// moves the achievable rate by 1.5–4 % on the paper's workloads.
pub const CENTRE_MOVE_REOPEN: f64 = 0.03;

/// The R-loop gain a travelling centre re-opens to: a fifth of the Newton step per period
/// follows a 5–10 % drift of the achievable rate per X period.
pub const REOPEN_GAIN: f64 = 0.2;

/// Largest factor a scan's retarget moves R by: the rate-equivalent extrapolated from far
/// below a knee is only good to a few tens of percent.
pub const SCAN_RETARGET_MAX: f64 = 1.3;

/// After a scan, R resumes at this share of the best point's rate-equivalent: it was
/// extrapolated from the scan's lower load, where the proxy says less about the knee.
pub const SCAN_RESUME_SHARE: f64 = 0.95;

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
    /// The R loop (target, period, tuning). Inner in R-X, outer in X-R.
    pub rate: RateLoopConfig,
    /// The X loop (period, start, steps). Outer in R-X, inner in X-R.
    pub fraction: FractionLoopConfig,
    /// Seed of the arbiter's Bernoulli draws.
    pub seed: u64,
}

impl KayakConfig {
    /// Algorithm II with the paper's frequencies: R at 200 Hz inside X at 20 Hz.
    pub fn rate_then_fraction(slo_latency_ns: f64, seed: u64) -> Self {
        KayakConfig {
            order: LoopOrder::RateThenFraction,
            rate: RateLoopConfig::new(slo_latency_ns),
            fraction: FractionLoopConfig::default(),
            seed,
        }
    }

    /// Algorithm I with the frequencies swapped: X at 200 Hz inside R at 20 Hz.
    pub fn fraction_then_rate(slo_latency_ns: f64, seed: u64) -> Self {
        let mut rate = RateLoopConfig::new(slo_latency_ns);
        rate.period = FRACTION_PERIOD_DEFAULT;
        rate.window = FRACTION_PERIOD_DEFAULT;
        // The same R loop, run ten times slower: with ten times the gain per period, so its
        // time constant (not its per-period step) matches the R-X ordering's, and the
        // comparison of the two orderings isolates the ordering.
        let slowdown = FRACTION_PERIOD_DEFAULT.0 as f64 / RATE_PERIOD_DEFAULT.0 as f64;
        rate.gain = (rate.gain * slowdown).min(1.0);
        KayakConfig {
            order: LoopOrder::FractionThenRate,
            rate,
            fraction: FractionLoopConfig {
                period: RATE_PERIOD_DEFAULT,
                gain: LATENCY_X_GAIN_DEFAULT,
                step_min: LATENCY_X_STEP_MIN,
                ..FractionLoopConfig::default()
            },
            seed,
        }
    }

    /// Rejects inconsistent configurations, including an inner loop that is not faster.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.rate.validate()?;
        self.fraction.validate()?;
        let (inner, outer, inner_p, outer_p) = match self.order {
            LoopOrder::RateThenFraction => ("R loop", "X loop", self.rate.period, self.fraction.period),
            LoopOrder::FractionThenRate => ("X loop", "R loop", self.fraction.period, self.rate.period),
        };
        if inner_p >= outer_p {
            return Err(ConfigError::InnerNotFaster {
                inner,
                outer,
                inner_period_ns: inner_p.0,
                outer_period_ns: outer_p.0,
            });
        }
        Ok(())
    }
}

/// One update of R-X's outer loop at `now`, with its hooks into the inner loop: a workload
/// change starts a scan; a scan's first period at a grid point moves R to that point's
/// rate, its end resumes R at the best point's; a travelling centre re-opens the R loop's
/// gain; every move of the centre is fed forward into R along the averaged slope.
fn outer_x_tick(rate: &mut RateLoop, fraction: &mut FractionLoop, arbiter: &mut Arbiter, now: Nanos) {
    if rate.take_regime_change() {
        // The workload changed (or the node stalled: the X loop tells the two apart where
        // it must): bracket the new optimum before searching.
        fraction.report_change();
    }
    let before = arbiter.x();
    let centre_before = fraction.centre();
    let was_scanning = fraction.is_scanning();
    let x = fraction.tick(now);
    let scanning = was_scanning || fraction.is_scanning();
    // A scan disturbs the system on purpose: its violations are not charged to the budget.
    rate.set_budget_paused(fraction.is_scanning());
    // Where a period's rate wanders by more than NOISE_MAX (real processes), the scan's
    // rates are rough: a resume at the best point's doubled R (20k to 42k), and R collapsed
    // at once. There the scan moves R only down, and the R loop climbs by itself.
    let up_max = if fraction.is_noisy() { 1.0 } else { f64::INFINITY };
    if let Some(r) = fraction.take_scan_retarget() {
        rate.rescale((r / rate.rate_ops()).clamp(1.0 / SCAN_RETARGET_MAX, SCAN_RETARGET_MAX.min(up_max)));
    }
    if let Some((_, r)) = fraction.take_scan_result() {
        // Resume R where the scan measured the best point, with a margin.
        rate.rescale((SCAN_RESUME_SHARE * r / rate.rate_ops()).min(up_max));
        rate.reopen(REOPEN_GAIN);
    }
    if (fraction.centre() - centre_before).abs() >= CENTRE_MOVE_REOPEN {
        // The centre is travelling: the achievable rate moves with it faster than the R
        // loop's averaging gain follows.
        rate.reopen(REOPEN_GAIN);
    }
    if x == before {
        return;
    }
    arbiter.set_x(x);
    // Feed-forward: move R with the centre along the X loop's slope, so the R loop does not
    // have to find every move by feedback. (Not with the probes around the centre: a rate
    // held across a probe pair costs only the tail's convexity, a wrong feed-forward a
    // backlog.)
    if let (Some(g), false) = (fraction.slope(), scanning) {
        let g = g.clamp(-FEED_FORWARD_GRADIENT_MAX, FEED_FORWARD_GRADIENT_MAX);
        let change = g * (fraction.centre() - centre_before);
        // Asymmetric: a decrease is applied in full (a rate left above the new knee builds a
        // backlog), an increase only in part (one left below costs a little throughput while
        // the R loop climbs).
        let change = if change > 0.0 {
            FEED_FORWARD_UP_SHARE * change
        } else {
            change
        };
        rate.rescale(change.clamp(-FEED_FORWARD_STEP_MAX, FEED_FORWARD_STEP_MAX).exp());
    }
    // The latency curve just changed: no secant across it.
    rate.forget_secant();
}

/// The loops of one ordering.
enum Loops {
    /// Algorithm II.
    RateThenFraction {
        /// Inner: Newton rate control.
        rate: RateLoop,
        /// Outer: gradient ascent on R(X) (boxed: it is most of the policy's size).
        fraction: Box<FractionLoop>,
    },
    /// Algorithm I.
    FractionThenRate {
        /// Outer: the same Newton rate control, at the slow frequency.
        rate: RateLoop,
        /// Inner: gradient descent on T(X).
        fraction: LatencyFractionLoop,
        /// Latencies over the inner period, for the inner loop's T.
        window: QuantileWindow,
        /// The SLO quantile.
        quantile: f64,
    },
}

/// Kayak: one RPC fraction X for all requests, found by a dual control loop.
pub struct Kayak {
    /// Report name.
    name: &'static str,
    /// Bernoulli(X) per request.
    arbiter: Arbiter,
    /// The two loops.
    loops: Loops,
}

impl Kayak {
    /// Builds the policy; `now` is when its clock starts.
    pub fn new(cfg: KayakConfig, now: Nanos) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let arbiter = Arbiter::new(cfg.fraction.x_init, cfg.seed)?;
        let (name, loops) = match cfg.order {
            LoopOrder::RateThenFraction => (
                "kayak",
                Loops::RateThenFraction {
                    rate: RateLoop::new(cfg.rate.clone(), now)?,
                    fraction: Box::new(FractionLoop::new(cfg.fraction.clone(), now)?),
                },
            ),
            LoopOrder::FractionThenRate => (
                "kayak-xr",
                Loops::FractionThenRate {
                    rate: RateLoop::new(cfg.rate.clone(), now)?,
                    fraction: LatencyFractionLoop::new(cfg.fraction.clone(), now)?,
                    window: QuantileWindow::new(cfg.fraction.period, 1)?,
                    quantile: cfg.rate.quantile,
                },
            ),
        };
        Ok(Kayak { name, arbiter, loops })
    }
}

impl Policy for Kayak {
    fn name(&self) -> String {
        self.name.to_string()
    }

    fn place(&mut self, _now: Nanos, _fn_id: FnId) -> Placement {
        self.arbiter.place()
    }

    fn on_completion(&mut self, now: Nanos, completion: &Completion) {
        match &mut self.loops {
            Loops::RateThenFraction { rate, .. } => rate.on_completion(now, completion.latency_ns),
            Loops::FractionThenRate { rate, window, .. } => {
                rate.on_completion(now, completion.latency_ns);
                window.record(now, completion.latency_ns as f64);
            }
        }
    }

    fn tick(&mut self, now: Nanos) {
        match &mut self.loops {
            Loops::RateThenFraction { rate, fraction } => {
                // Inner first: the outer loop reads what the inner loop just measured.
                if now >= rate.next_tick() {
                    rate.tick(now);
                    if let Some(r) = rate.equivalent_rate_ops() {
                        fraction.observe(now, rate.rate_ops(), r);
                    }
                }
                if now >= fraction.next_tick() && !rate.is_settled() {
                    // R is still ramping up, or re-approaching after a collapse (a workload
                    // change): hold X — the paper's reason for nesting the loops is that X
                    // may only climb a converged R.
                    fraction.hold(now);
                } else if now >= fraction.next_tick() {
                    outer_x_tick(rate, fraction, &mut self.arbiter, now);
                }
            }
            Loops::FractionThenRate {
                rate,
                fraction,
                window,
                quantile,
            } => {
                if now >= fraction.next_tick() {
                    let t = window.quantile(now, window.span(), *quantile);
                    let x = fraction.tick(now, t);
                    self.arbiter.set_x(x);
                }
                if now >= rate.next_tick() {
                    rate.tick(now);
                }
            }
        }
    }

    fn next_tick(&self) -> Nanos {
        match &self.loops {
            Loops::RateThenFraction { rate, fraction } => rate.next_tick().min(fraction.next_tick()),
            Loops::FractionThenRate { rate, fraction, .. } => rate.next_tick().min(fraction.next_tick()),
        }
    }

    fn rate_ops(&self) -> f64 {
        match &self.loops {
            Loops::RateThenFraction { rate, .. } => rate.rate_ops(),
            Loops::FractionThenRate { rate, .. } => rate.rate_ops(),
        }
    }

    fn state(&self) -> PolicyState {
        let latency_ns_estimate = match &self.loops {
            Loops::RateThenFraction { rate, .. } => rate.latency_ns_estimate(),
            Loops::FractionThenRate { rate, .. } => rate.latency_ns_estimate(),
        };
        let searches = match &self.loops {
            Loops::RateThenFraction { fraction, .. } => Some(fraction.scans()),
            Loops::FractionThenRate { .. } => None,
        };
        PolicyState {
            rate_ops: self.rate_ops(),
            rpc_fraction: self.arbiter.x(),
            latency_ns_estimate,
            searches,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fraction_loop::test_support::{centred, Luck};

    /// A rate loop holding its initial rate (10k/s) in Hold: completions sit just above its
    /// proxy setpoint (half the 5 ms SLO).
    fn held_rate_loop() -> RateLoop {
        let mut rate = RateLoop::new(RateLoopConfig::new(5e6), Nanos::ZERO).unwrap();
        for k in 1..=100u64 {
            let now = Nanos::from_ms(5 * k);
            for i in 0..100 {
                rate.on_completion(Nanos(now.0 - 5_000_000 + 1 + i * 50_000), 2_600_000);
            }
            rate.tick(now);
            if rate.is_settled() {
                return rate;
            }
        }
        panic!("the rate loop never settled");
    }

    /// R before a rescan at 5 s, and the highest R after it, when the X loop sees rates
    /// whose luck changes every X period by up to ±40 % (log-uniform; `noisy`) or not at
    /// all, and the grid point X = 0 looks three times as fast as the rate held. Asserts
    /// that the scan ran.
    fn r_around_a_scan(noisy: bool) -> (f64, f64) {
        let mut luck = Luck::new();
        let mut rate = held_rate_loop();
        let mut fraction = centred();
        let mut arbiter = Arbiter::new(0.5, 1).unwrap();
        let mut before = None;
        let mut max_after: f64 = 0.0;
        let mut scanned = false;
        for k in 1..=2_000u64 {
            let now = Nanos::from_ms(5 * k);
            let point = if arbiter.x() == 0.0 { 3.0 } else { 1.0 };
            // (On real processes R itself wanders with the luck: the R loop follows it.)
            fraction.observe(now, rate.rate_ops() * luck.now, rate.rate_ops() * luck.now * point);
            if now >= fraction.next_tick() {
                if k == 1_000 {
                    before = Some(rate.rate_ops());
                    fraction.rescan();
                }
                outer_x_tick(&mut rate, &mut fraction, &mut arbiter, now);
                if noisy {
                    luck.draw();
                }
                if before.is_some() {
                    max_after = max_after.max(rate.rate_ops());
                    scanned |= fraction.is_scanning();
                }
            }
        }
        assert!(scanned, "the rescan did not run");
        (before.unwrap(), max_after)
    }

    // Regression (real processes): a scan's best point, measured on rates that wander by
    // 12–60 %, looked twice as fast as the rate held; R resumed there and collapsed at once.
    #[test]
    fn a_scan_on_a_noisy_system_moves_r_only_down() {
        let (before, max_after) = r_around_a_scan(true);
        assert!(max_after <= before * (1.0 + 1e-9), "{before:.0} -> {max_after:.0}");
        // Where rates are steady the scan does move R up to what it measured.
        let (before, max_after) = r_around_a_scan(false);
        assert!(max_after >= 1.5 * before, "{before:.0} -> {max_after:.0}");
    }

    #[test]
    fn inner_loop_must_be_faster() {
        let mut cfg = KayakConfig::rate_then_fraction(200e3, 1);
        cfg.fraction.period = cfg.rate.period;
        let err = Kayak::new(cfg, Nanos::ZERO).err().unwrap();
        assert!(matches!(err, ConfigError::InnerNotFaster { .. }), "{err}");
        assert!(err.to_string().contains("must run faster"));

        let mut cfg = KayakConfig::fraction_then_rate(200e3, 1);
        cfg.rate.period = Nanos::from_ms(1);
        assert!(matches!(
            Kayak::new(cfg, Nanos::ZERO),
            Err(ConfigError::InnerNotFaster { .. })
        ));

        assert!(Kayak::new(KayakConfig::rate_then_fraction(200e3, 1), Nanos::ZERO).is_ok());
        assert!(Kayak::new(KayakConfig::fraction_then_rate(200e3, 1), Nanos::ZERO).is_ok());
    }

    #[test]
    fn next_tick_is_the_earlier_loop() {
        let k = Kayak::new(KayakConfig::rate_then_fraction(200e3, 1), Nanos::ZERO).unwrap();
        assert_eq!(k.next_tick(), RATE_PERIOD_DEFAULT);
        let k = Kayak::new(KayakConfig::fraction_then_rate(200e3, 1), Nanos::ZERO).unwrap();
        assert_eq!(k.next_tick(), RATE_PERIOD_DEFAULT);
    }
}
