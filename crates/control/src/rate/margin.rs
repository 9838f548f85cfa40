//! γ, the margin the loop cruises at under the remembered capacity: the loop's only slow
//! state, and a bounded one.
//!
//! The capacity filter holds the best rate a window met the SLO at, which on a noisy
//! machine is a lucky window's; how far under it the SLO holds *reliably* depends on the
//! machine's stalls and the knee's sharpness, which no formula knows. γ learns it: each
//! episode over the SLO (a run of consecutive windows over it: a collapse counts once, as
//! it should, whatever its length) multiplies γ by [`GAMMA_CUT`]; each window within the
//! SLO raises it by [`GAMMA_RISE`]; it stays in [[`GAMMA_MIN`], [`GAMMA_MAX`]]. A knee
//! that keeps failing (or a machine whose stalls keep breaking windows) keeps γ low; a
//! collapse that has passed costs one step, repaid in a few dozen windows. The rise is per
//! window, not per second: a window is a fixed count of completions, so γ settles where a
//! fixed share of the *requests* falls in windows over the SLO, which is what the SLO
//! counts (a rise per second let a loop with millisecond windows fail a hundred of them a
//! second at the floor of γ).

/// γ before anything is known: a tenth under the capacity, where a queue's wait is a few
/// service times.
pub const GAMMA_INIT: f64 = 0.9;

/// Highest γ: 5 % of headroom under the best window, about what a window's luck moves its
/// delivered rate by.
pub const GAMMA_MAX: f64 = 0.95;

/// Lowest γ: half the capacity the machine delivered within the SLO; lower would say the
/// filter's memory is wrong, which its window answers by forgetting it.
pub const GAMMA_MIN: f64 = 0.5;

/// Factor per episode over the SLO: one step takes 5 % off the cruise.
pub const GAMMA_CUT: f64 = 0.95;

/// Rise per window within the SLO: one cut (≈ 0.045) is repaid in ~22 windows, so γ
/// settles where about one window in 23 (4 % of the requests) fails; those windows are
/// over the SLO by a share or two, the rest under it, and the pooled share stays under
/// the quantile's allowance.
pub const GAMMA_RISE: f64 = 0.002;

/// The margin (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Margin {
    gamma: f64,
    /// The last window was over the SLO: a further one continues the episode.
    failing: bool,
}

impl Default for Margin {
    fn default() -> Self {
        Margin {
            gamma: GAMMA_INIT,
            failing: false,
        }
    }
}

impl Margin {
    /// Learns whether a window met the SLO.
    pub fn learn(&mut self, met: bool) {
        if met {
            self.gamma = (self.gamma + GAMMA_RISE).min(GAMMA_MAX);
        } else if !self.failing {
            self.gamma = (self.gamma * GAMMA_CUT).max(GAMMA_MIN);
        }
        self.failing = !met;
    }

    /// The share of the remembered capacity to cruise at.
    pub fn gamma(&self) -> f64 {
        self.gamma
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_episode_costs_one_step_and_a_knee_that_keeps_failing_keeps_gamma_low() {
        let mut m = Margin::default();
        // A collapse of five windows in a row: one step.
        for _ in 0..5 {
            m.learn(false);
        }
        assert!((m.gamma() - GAMMA_INIT * GAMMA_CUT).abs() < 1e-12);
        // Repaid in time.
        for _ in 0..40 {
            m.learn(true);
        }
        assert!(m.gamma() > GAMMA_INIT);
        // A failure every third window: each is an episode, γ sinks to its floor.
        for _ in 0..200 {
            m.learn(true);
            m.learn(true);
            m.learn(false);
        }
        assert!((m.gamma() - GAMMA_MIN).abs() < 1e-9, "{}", m.gamma());
        for _ in 0..1_000 {
            m.learn(true);
        }
        assert_eq!(m.gamma(), GAMMA_MAX);
    }
}
