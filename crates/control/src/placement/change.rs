//! Telling a changed workload from a noisy one, from costs alone.
//!
//! A placement search disturbs the system, so it must not run again while the workload
//! stays what it was: the previous controllers rescanned every ~2.4 s on a steady
//! workload, because a node stall looks, in throughput, just like heavier work. Costs do
//! not: a stall delays requests but leaves the CPU each one takes unchanged. So a search
//! starts again only when the load model, fed with the costs measured now, says the X the
//! last search started from gives away more than [`REGRET_MAX`] of the capacity its
//! balanced X now reaches, for [`CHANGE_PERSIST_DECISIONS`] R-loop decisions in a row.
//!
//! The test is what a new search could gain, not how far the model's numbers moved: where
//! the two placements cost about the same, the balanced X swings with every percent of
//! noise while the capacity does not, and a workload that changes only the capacity needs
//! no search (the rate loop follows it).
//!
//! What this does not fix: on real processes the measured costs inflate while a backlog
//! drains (every request then waits, and the CPU it reports includes cache and scheduler
//! churn), which the load model, built on constant costs, can read as a regret. Outside
//! backlogs the costs hold (a light request's local app CPU read 1.9 µs on average at
//! X = 0.4 under normal load), and with the backlog guard a real 1 + 1 run profiles again
//! zero to two times in 5 s (docs/BENCHMARKS.md).

use crate::placement::load_model::LoadModel;

/// The capacity share the X in use may give away to the model's balanced X before a new
/// search is worth its disruption. The simulator's bimodal phases need it below 5.5 %
/// (medium's X = 0.2 run on light work gives away that much of light's capacity at X = 1);
/// steady costs in the simulator give none, whatever their noise.
pub const REGRET_MAX: f64 = 0.03;

/// R-loop decisions in a row the model must see the regret before it counts as a new
/// workload: a change lasts, a transient does not. On real processes costs measured
/// through a collapse moved the model for a few decisions; 20 decisions are ~0.1 s at the
/// rates where that happened.
pub const CHANGE_PERSIST_DECISIONS: u32 = 20;

/// What the model said when the last search started.
#[derive(Clone, Debug, PartialEq)]
pub struct Reference {
    /// The split the balanced X named then. A split, not the coordinate: on a mix the
    /// coordinate's meaning moves with the functions' shares as they are estimated (α =
    /// 0.18 sent all of a 0.18-share function remote, and 90 % of it once its share read
    /// 0.20), which read as a regret of 3.5 % on 128 + 4 cores.
    split: Vec<f64>,
    /// Decisions in a row the model has seen a regret above [`REGRET_MAX`].
    differing: u32,
}

impl Reference {
    /// What `model` says now, when a search starts.
    pub fn take(model: &LoadModel<'_>) -> Option<Reference> {
        Some(Reference {
            split: model.costs.split_at(model.balanced_x(0.0, 1.0)?),
            differing: 0,
        })
    }

    /// The capacity share the reference's balanced X gives away to the balanced X of
    /// `model` (0 when the costs are not known).
    pub fn regret(&self, model: &LoadModel<'_>) -> f64 {
        let Some(best) = model.balanced_x(0.0, 1.0) else {
            return 0.0;
        };
        match (model.usable_capacity_ops(best), model.usable_capacity_at(&self.split)) {
            (Some(best), Some(old)) if best.is_finite() && best > 0.0 => 1.0 - old / best,
            _ => 0.0,
        }
    }

    /// Whether `model` says a new search is worth it.
    pub fn differs(&self, model: &LoadModel<'_>) -> bool {
        self.regret(model) > REGRET_MAX
    }

    /// Judges one R-loop decision's model: whether the workload has now changed (the
    /// regret lasted [`CHANGE_PERSIST_DECISIONS`] decisions in a row).
    pub fn changed(&mut self, model: &LoadModel<'_>) -> bool {
        self.differing = if self.differs(model) { self.differing + 1 } else { 0 };
        self.differing >= CHANGE_PERSIST_DECISIONS
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::costs::CostProfile;
    use crate::placement::load_model::Capacity;
    use crate::policy::{Completion, FnId, Placement};

    fn profile(local: (u64, u64), remote: (u64, u64), jitter: u64) -> CostProfile {
        let mut p = CostProfile::default();
        for i in 0..2_000u64 {
            let j = (i % 7) * jitter;
            for (placement, (app, storage)) in [(Placement::Local, local), (Placement::Remote, remote)] {
                p.learn(&Completion::of(FnId(0), placement, 1, app + j, storage + j));
            }
        }
        p
    }

    const CORES: Capacity = Capacity {
        app_cores: 8.0,
        storage_cores: 8.0,
        links: None,
    };

    #[test]
    fn noisy_costs_are_no_change_and_a_heavier_workload_is() {
        // Medium work: local app 2.6 µs, storage 2.2 µs; remote app 0.6 µs, storage 4.3 µs.
        let base = profile((2_600, 2_200), (600, 4_300), 0);
        let mut reference = Reference::take(&LoadModel::new(&base, CORES)).unwrap();
        // The same costs with ±10 % per-request noise (a real process): no change.
        let noisy = profile((2_600, 2_200), (600, 4_300), 100);
        assert!(!reference.differs(&LoadModel::new(&noisy, CORES)));
        // Everything twice as dear: the capacity halves, but the same X stays right, and
        // the rate loop follows the capacity on its own.
        let dearer = profile((5_200, 4_400), (1_200, 8_600), 0);
        assert!(reference.regret(&LoadModel::new(&dearer, CORES)) < 0.01);
        // Heavy work (10 µs per access): the old X gives away a third of the capacity, and
        // that is a change once it lasts.
        let heavy = profile((20_500, 2_200), (600, 26_600), 0);
        let regret = reference.regret(&LoadModel::new(&heavy, CORES));
        assert!(regret > 0.3, "{regret}");
        for _ in 1..CHANGE_PERSIST_DECISIONS {
            assert!(!reference.changed(&LoadModel::new(&heavy, CORES)));
        }
        assert!(reference.changed(&LoadModel::new(&heavy, CORES)));
        // A transient (differing, then not) starts the count again.
        let mut reference = Reference::take(&LoadModel::new(&base, CORES)).unwrap();
        for _ in 0..2 * CHANGE_PERSIST_DECISIONS {
            reference.changed(&LoadModel::new(&heavy, CORES));
            assert!(!reference.changed(&LoadModel::new(&base, CORES)));
        }
    }

    #[test]
    fn a_balanced_x_that_moves_where_placement_barely_matters_is_no_change() {
        // Both placements cost nearly the same: local app 4.0 µs, storage 4.0 µs; remote
        // app 3.8 µs, storage 4.2 µs. The balanced X is 0.
        let one = Capacity {
            app_cores: 1.0,
            storage_cores: 1.0,
            links: None,
        };
        let base = profile((4_000, 4_000), (3_800, 4_200), 0);
        let reference = Reference::take(&LoadModel::new(&base, one)).unwrap();
        // Local app work 2.5 % dearer: the balanced X moves to 0.2, but X = 0 still reaches
        // 98.5 % of its capacity, and a new search is not worth its disruption.
        let dearer = profile((4_100, 4_000), (3_800, 4_200), 0);
        let model = LoadModel::new(&dearer, one);
        assert!(model.balanced_x(0.0, 1.0).unwrap() - reference.split[0] > 0.15);
        let regret = reference.regret(&model);
        assert!(regret > 0.01 && regret < REGRET_MAX, "{regret}");
        assert!(!reference.differs(&model));
    }
}
