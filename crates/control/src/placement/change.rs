//! Telling a changed workload from a noisy one, from costs alone.
//!
//! A placement search disturbs the system, so it must not run again while the workload
//! stays what it was: the previous controllers rescanned every ~2.4 s on a steady
//! workload, because a node stall looks, in throughput, just like heavier work. Costs do
//! not: a stall delays requests but leaves the CPU each one takes unchanged. So a search
//! starts again only when the load model, fed with the costs measured now, tells a
//! different story from the one the last search started from: its balanced X moved by
//! more than [`X_SHIFT_MAX`], or the capacity at the X in use moved by more than
//! [`CAPACITY_SHIFT_MAX`].

use crate::placement::load_model::LoadModel;

/// A move of the model's balanced X that is a new workload: the search's bracket is
/// ±0.2 around it, and the model's own error on the suite's scenarios is within ±0.05.
pub const X_SHIFT_MAX: f64 = 0.1;

/// A relative move of the capacity at the X in use that is a new workload: the costs'
/// averages wander by a few percent on real processes, and the simulator's workloads
/// differ by 2× and more.
pub const CAPACITY_SHIFT_MAX: f64 = 0.25;

/// What the model said when the last search started.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reference {
    /// The balanced X.
    balanced_x: f64,
    /// The capacity at the X in use then.
    capacity_ops: f64,
}

impl Reference {
    /// What `model` says now, for a search at `x`.
    pub fn take(model: &LoadModel<'_>, x: f64) -> Option<Reference> {
        Some(Reference {
            balanced_x: model.balanced_x(0.0, 1.0)?,
            capacity_ops: model.capacity_ops(x)?,
        })
    }

    /// Whether `model`, at the X in use `x`, tells a different story.
    pub fn changed(&self, model: &LoadModel<'_>, x: f64) -> bool {
        let (Some(balanced), Some(capacity)) = (model.balanced_x(0.0, 1.0), model.capacity_ops(x)) else {
            return false;
        };
        let shift = (capacity / self.capacity_ops).ln().abs();
        (balanced - self.balanced_x).abs() > X_SHIFT_MAX || shift > (1.0 + CAPACITY_SHIFT_MAX).ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::costs::CostProfile;
    use crate::placement::load_model::Capacity;
    use crate::policy::{Completion, Costs, FnId, Placement};

    fn profile(local: (u64, u64), remote: (u64, u64), jitter: u64) -> CostProfile {
        let mut p = CostProfile::default();
        for i in 0..2_000u64 {
            let j = (i % 7) * jitter;
            for (placement, (app, storage)) in [(Placement::Local, local), (Placement::Remote, remote)] {
                p.learn(&Completion {
                    fn_id: FnId(0),
                    placement,
                    latency_ns: 1,
                    costs: Costs {
                        app_cpu_ns: app + j,
                        storage_cpu_ns: storage + j,
                        bytes_moved: 0,
                    },
                    pushed_back: false,
                });
            }
        }
        p
    }

    const CORES: Capacity = Capacity {
        app_cores: 8.0,
        storage_cores: 8.0,
    };

    #[test]
    fn noisy_costs_are_no_change_and_a_heavier_workload_is() {
        // Medium work: local app 2.6 µs, storage 2.2 µs; remote app 0.6 µs, storage 4.3 µs.
        let base = profile((2_600, 2_200), (600, 4_300), 0);
        let reference = Reference::take(&LoadModel::new(&base, CORES), 0.3).unwrap();
        // The same costs with ±10 % per-request noise (a real process): no change.
        let noisy = profile((2_600, 2_200), (600, 4_300), 100);
        assert!(!reference.changed(&LoadModel::new(&noisy, CORES), 0.3));
        // Heavy work (10 µs per access): a change.
        let heavy = profile((20_500, 2_200), (600, 26_600), 0);
        assert!(reference.changed(&LoadModel::new(&heavy, CORES), 0.3));
    }
}
