//! The R loop's guards: rules beyond the core, each in its own file with its constants and
//! a test that fails without it, each switchable off for the ablation of docs/SIMULATION.md
//! (`ferry sim-suite --policy 'P:without=GUARD'`). [`RateLoop::tick`](super::RateLoop::tick)
//! applies them in one written order.
//!
//! - [`tail_budget`]: integral action that moves the core's setpoint so that the pooled
//!   share of slow completions, what the SLO is judged by, settles at the budget;
//! - [`bracket`]: a step up goes at most halfway toward the lowest rate recently seen
//!   missing the target, or toward the capacity the costs predict.

pub mod bracket;
pub mod tail_budget;

use crate::error::ConfigError;

/// Which guards run (all by default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Guards {
    /// See [`tail_budget`].
    pub tail_budget: bool,
    /// See [`bracket`].
    pub bracket: bool,
}

impl Default for Guards {
    fn default() -> Self {
        Guards {
            tail_budget: true,
            bracket: true,
        }
    }
}

/// The guards' names, as `without=` takes them.
pub const GUARD_NAMES: &str = "tail-budget, bracket";

impl Guards {
    /// Switches off the guard called `name`.
    pub fn disable(&mut self, name: &str) -> Result<(), ConfigError> {
        match name {
            "tail-budget" => self.tail_budget = false,
            "bracket" => self.bracket = false,
            _ => {
                return Err(ConfigError::Unknown {
                    what: "R-loop guard",
                    name: name.to_string(),
                    allowed: GUARD_NAMES,
                })
            }
        }
        Ok(())
    }
}
