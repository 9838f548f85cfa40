//! `ferry sim` and `ferry sim-sweep` (placeholder until the simulator lands).

use crate::CmdResult;

/// Flags of `ferry sim`.
#[derive(clap::Args)]
pub struct SimArgs {}

/// Flags of `ferry sim-sweep`.
#[derive(clap::Args)]
pub struct SimSweepArgs {}

pub fn run_sim(_args: SimArgs) -> CmdResult {
    Err("the simulator is not built yet".into())
}

pub fn run_sweep(_args: SimSweepArgs) -> CmdResult {
    Err("the simulator is not built yet".into())
}
