//! Integral action on what the SLO is judged by: the pooled share of slow completions.
//!
//! The core holds a proxy of the tail (the p90 of each window) at a setpoint s. The SLO is
//! judged on the p99 of *every* completion over a span, which is met exactly when the
//! pooled share of completions slower than the SLO stays at or below 1 − q. How the proxy
//! relates to that share differs between workloads, placements and machines, and slow
//! completions come in bursts (a node stall; near a cliff-like knee, a window just past
//! it), so the pooled share is the *mean* of the windows' shares, far above a typical one.
//!
//! So s moves by integral action on the overspend: a decision whose k of n completions
//! (all of them: fresh and stale, see [`Measurement::stale_slow`]) were slow adds `(k − b n) / (b n_p)` budget-periods to a debt (b the share aimed for,
//! n_p the completions of one period at the current rate), and the debt is paid into
//! `ln s` at `κ` per budget-period, at most [`PAY_MAX`] per decision. The update is linear
//! in k, so its only fixed point is E\[k\] = b E\[n\]: whatever the windows' luck, the
//! pooled share settles at b. Paying in instalments spreads a burst's correction over the
//! following decisions instead of dropping s at once.

use crate::rate::window::Measurement;

/// Default gain κ per budget-period: a period spending twice the budget lowers the
/// setpoint by 0.3 %, a period without a slow completion raises it by 0.3 %. Slow enough
/// that a burst (tens of budget-periods) moves R by a few percent, fast enough to correct
/// the setpoint's prior within a second at 200 periods a second.
pub const BUDGET_GAIN_DEFAULT: f64 = 0.003;

/// Most budget-periods paid into the setpoint per decision.
pub const PAY_MAX: f64 = 2.0;

/// Starting setpoint, as a share of the SLO: the p90 sits at 0.4–0.6 of the SLO where the
/// pooled p99 meets it on the simulator's workloads.
pub const SETPOINT_SHARE_INIT: f64 = 0.5;

/// Lowest setpoint, as a share of the SLO: below it the proxy no longer tracks the tail.
pub const SETPOINT_SHARE_MIN: f64 = 0.02;

/// The setpoint's integral action (see the module docs).
#[derive(Clone, Debug)]
pub struct TailBudget {
    /// κ.
    gain: f64,
    /// The share of slow completions aimed for (b).
    target_share: f64,
    /// Budget-periods overspent and not yet paid into the setpoint (negative: credit).
    debt: f64,
    /// ln(s / SLO), in [ln SETPOINT_SHARE_MIN, 0].
    ln_share: f64,
}

impl TailBudget {
    /// Aims for `target_share` slow completions.
    pub fn new(gain: f64, target_share: f64) -> Self {
        TailBudget {
            gain,
            target_share,
            debt: 0.0,
            ln_share: SETPOINT_SHARE_INIT.ln(),
        }
    }

    /// The setpoint for the core's tail, as a share of the SLO.
    pub fn setpoint_share(&self) -> f64 {
        self.ln_share.exp()
    }

    /// Charges one decision's evidence against the budget, a period holding
    /// `period_completions` completions at the current rate, and pays an instalment,
    /// keeping the setpoint at or above `floor_share` of the SLO (a setpoint the proxy
    /// cannot reach at any load would only wind the integral up).
    pub fn learn(&mut self, m: &Measurement, period_completions: f64, floor_share: f64) {
        let budget = self.target_share * period_completions.max(1.0);
        self.debt += (m.slow_completions() as f64 - self.target_share * m.completions() as f64) / budget;
        let pay = self.debt.clamp(-PAY_MAX, PAY_MAX);
        self.debt -= pay;
        let floor = floor_share.clamp(SETPOINT_SHARE_MIN, 1.0).ln();
        self.ln_share = (self.ln_share - self.gain * pay).clamp(floor, 0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quantile::LatencySketch;
    use crate::time::Nanos;

    fn window(count: u64, slow: u64) -> Measurement {
        Measurement {
            now: Nanos::ZERO,
            span: Nanos::from_ms(5),
            count,
            slow,
            latency: LatencySketch::new(),
            stale: 0,
            stale_slow: 0,
            full: true,
        }
    }

    #[test]
    fn the_pooled_share_not_the_typical_window_sets_the_setpoint() {
        // Periods on budget leave the setpoint alone, however many.
        let mut b = TailBudget::new(BUDGET_GAIN_DEFAULT, 0.008);
        for _ in 0..100 {
            b.learn(&window(2_500, 20), 2_500.0, 0.0);
        }
        assert!((b.setpoint_share() - SETPOINT_SHARE_INIT).abs() < 1e-12);
        // Nine quiet periods and one with ten budgets: the same pooled share, 0.8 %.
        for _ in 0..20 {
            for _ in 0..9 {
                b.learn(&window(2_500, 0), 2_500.0, 0.0);
            }
            b.learn(&window(2_500, 200), 2_500.0, 0.0);
        }
        // (Periods on budget pay what is still owed in instalments.)
        for _ in 0..10 {
            b.learn(&window(2_500, 20), 2_500.0, 0.0);
        }
        let settled = b.setpoint_share();
        assert!((settled / SETPOINT_SHARE_INIT - 1.0).abs() < 0.01, "{settled}");
        // Bursts twice as frequent overspend and lower it.
        for _ in 0..20 {
            for _ in 0..4 {
                b.learn(&window(2_500, 0), 2_500.0, 0.0);
            }
            b.learn(&window(2_500, 200), 2_500.0, 0.0);
        }
        assert!(b.setpoint_share() < 0.9 * settled, "{}", b.setpoint_share());
    }

    #[test]
    fn a_burst_is_paid_in_instalments() {
        let mut b = TailBudget::new(BUDGET_GAIN_DEFAULT, 0.008);
        // One period all slow: 124 budget-periods over, paid 2 per decision.
        b.learn(&window(2_500, 2_500), 2_500.0, 0.0);
        let first = b.setpoint_share() / SETPOINT_SHARE_INIT;
        assert!((first - (-2.0 * BUDGET_GAIN_DEFAULT).exp()).abs() < 1e-9, "{first}");
        for _ in 0..61 {
            b.learn(&window(2_500, 20), 2_500.0, 0.0);
        }
        let paid = b.setpoint_share() / SETPOINT_SHARE_INIT;
        assert!((paid - (-124.0 * BUDGET_GAIN_DEFAULT).exp()).abs() < 1e-9, "{paid}");
    }
}
