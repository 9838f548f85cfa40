//! The R loop's guards: rules beyond the core, each in its own file with its constants and
//! a test that fails without it, each switchable off for the ablation of docs/SIMULATION.md
//! (`ferry sim-suite --policy 'P:without=GUARD'`). [`RateLoop::tick`](super::RateLoop::tick)
//! applies them in one written order.
//!
//! - [`tail_budget`]: integral action that moves the core's setpoint so that the pooled
//!   share of slow completions, what the SLO is judged by, settles at the budget;
//! - [`backlog`]: a window that measured a backlog (its proxy beyond 3 × the SLO) at
//!   least halves R, and re-opens the core's gain schedule;
//! - [`bracket`]: a step up goes at most halfway toward the lowest rate recently seen
//!   missing the target, or toward the capacity the costs predict;
//! - [`stall_headroom`]: R stays where the backlog of the stalls the machine has drains
//!   inside the allowance of every judged window, not only of the run.

pub mod backlog;
pub mod bracket;
pub mod stall_headroom;
pub mod tail_budget;

use crate::error::ConfigError;

/// Which guards run (all by default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Guards {
    /// See [`tail_budget`].
    pub tail_budget: bool,
    /// See [`backlog`].
    pub backlog: bool,
    /// See [`bracket`].
    pub bracket: bool,
    /// See [`stall_headroom`].
    pub stall_headroom: bool,
}

impl Default for Guards {
    fn default() -> Self {
        Guards {
            tail_budget: true,
            backlog: true,
            bracket: true,
            stall_headroom: true,
        }
    }
}

/// The guards' names, as `without=` takes them.
pub const GUARD_NAMES: &str = "tail-budget, backlog, bracket, stall-headroom";

impl Guards {
    /// Switches off the guard called `name`.
    pub fn disable(&mut self, name: &str) -> Result<(), ConfigError> {
        match name {
            "tail-budget" => self.tail_budget = false,
            "backlog" => self.backlog = false,
            "bracket" => self.bracket = false,
            "stall-headroom" => self.stall_headroom = false,
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
