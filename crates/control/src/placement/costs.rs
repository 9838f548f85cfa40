//! What a request costs each side, learned from completions (Pyxis' c_i and s_i).
//!
//! Every completion carries the app CPU and storage CPU it took and the bytes it moved over
//! the network. The profile keeps, per placement, a moving average of each: a plain mean over the first [`COST_MEMORY`]
//! completions, then an exponential average over about that many. Costs are far steadier
//! than latencies (in the simulator they are exact; on real processes they wander by a few
//! percent), which is why placement is computed from them rather than from throughput.

use crate::policy::{Completion, Costs, Placement};

/// Completions the averages remember: enough to average a real system's per-request noise
/// to a percent, few enough to follow a changed workload within a fraction of a second at
/// the rates ferry runs at.
pub const COST_MEMORY: f64 = 1_000.0;

/// Completions of a placement before its averages are used: costs are steady enough that
/// ten give the capacity to ~10 % on real processes (exactly in the simulator), and the
/// rate loop needs it before its ramp reaches the knee.
pub const COST_SAMPLES_MIN: u64 = 10;

/// What a request takes of each resource, on average.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MeanCost {
    /// App CPU, ns.
    pub app_ns: f64,
    /// Storage CPU, ns.
    pub storage_ns: f64,
    /// Bytes over the network, both ways.
    pub bytes: f64,
    /// Round trips to a storage node (each a visit to both sides' queues).
    pub round_trips: f64,
}

impl MeanCost {
    /// `self + w · other`.
    pub fn add_scaled(&mut self, w: f64, other: &MeanCost) {
        self.app_ns += w * other.app_ns;
        self.storage_ns += w * other.storage_ns;
        self.bytes += w * other.bytes;
        self.round_trips += w * other.round_trips;
    }
}

/// Mean costs per request placed one way.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SideCosts {
    /// App CPU per request, ns.
    pub app_ns: f64,
    /// Storage CPU per request, ns.
    pub storage_ns: f64,
    /// Bytes moved over the network per request.
    pub bytes: f64,
    /// Round trips to a storage node per request.
    pub round_trips: f64,
    /// Completions averaged.
    pub samples: u64,
}

impl SideCosts {
    fn learn(&mut self, c: &Costs) {
        self.samples += 1;
        let w = (1.0 / self.samples as f64).max(1.0 / COST_MEMORY);
        self.app_ns += w * (c.app_cpu_ns as f64 - self.app_ns);
        self.storage_ns += w * (c.storage_cpu_ns as f64 - self.storage_ns);
        self.bytes += w * (c.bytes_moved as f64 - self.bytes);
        self.round_trips += w * (f64::from(c.round_trips) - self.round_trips);
    }

    /// The means as one cost.
    pub fn mean(&self) -> MeanCost {
        MeanCost {
            app_ns: self.app_ns,
            storage_ns: self.storage_ns,
            bytes: self.bytes,
            round_trips: self.round_trips,
        }
    }

    /// Whether enough completions were averaged to trust the means.
    pub fn known(&self) -> bool {
        self.samples >= COST_SAMPLES_MIN
    }
}

/// Mean costs of local and remote requests.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CostProfile {
    /// Requests run on the app node (ship data).
    pub local: SideCosts,
    /// Requests run on the storage node (ship compute).
    pub remote: SideCosts,
}

impl CostProfile {
    /// Learns from one completion. Pushed-back invocations cost both sides and are neither
    /// placement's typical cost, so they are left out.
    pub fn learn(&mut self, c: &Completion) {
        if c.pushed_back {
            return;
        }
        let side = match c.placement {
            Placement::Local => &mut self.local,
            Placement::Remote => &mut self.remote,
        };
        side.learn(&c.costs);
    }

    /// Forgets everything: the workload changed, and a placement not in use would keep the
    /// old workload's costs for good.
    pub fn reset(&mut self) {
        *self = CostProfile::default();
    }
}

/// Mean cost per request at a placement split, as the load model reads it:
/// one function's [`CostProfile`] at a share `x` remote, or a mix's at a turning point.
///
/// A *split* is what a placement decides: each function's share sent remote. A coordinate
/// x in [0, 1] names one split (one function: x itself; a mix: Pyxis' turning point).
pub trait MeanCosts: std::fmt::Debug {
    /// The split coordinate `x` names.
    fn split_at(&self, x: f64) -> Vec<f64> {
        vec![x]
    }

    /// Mean cost per request at `split`, if the placements used there are known.
    fn mean_at_split(&self, split: &[f64]) -> Option<MeanCost>;

    /// Mean cost per request at coordinate `x`.
    fn mean_at(&self, x: f64) -> Option<MeanCost> {
        self.mean_at_split(&self.split_at(x))
    }
}

impl MeanCosts for CostProfile {
    /// Mean cost per request when a share `split[0]` runs remote, if the placements used
    /// are known.
    fn mean_at_split(&self, split: &[f64]) -> Option<MeanCost> {
        let x = *split.first()?;
        let (l, r) = (&self.local, &self.remote);
        let need_local = x < 1.0;
        let need_remote = x > 0.0;
        if (need_local && !l.known()) || (need_remote && !r.known()) {
            return None;
        }
        let mut mean = MeanCost::default();
        if need_local {
            mean.add_scaled(1.0 - x, &l.mean());
        }
        if need_remote {
            mean.add_scaled(x, &r.mean());
        }
        Some(mean)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::FnId;

    fn completion(placement: Placement, app: u64, storage: u64) -> Completion {
        Completion::of(FnId(0), placement, 10_000, app, storage)
    }

    #[test]
    fn averages_each_placement_and_mixes_them_by_x() {
        let mut p = CostProfile::default();
        for i in 0..200 {
            // Local: app 9–11 µs, storage 2 µs; remote: app 0.6 µs, storage 12 µs.
            p.learn(&completion(Placement::Local, 9_000 + (i % 3) * 1_000, 2_000));
            p.learn(&completion(Placement::Remote, 600, 12_000));
        }
        assert!((p.local.app_ns - 10_000.0).abs() < 20.0, "{}", p.local.app_ns);
        let m = p.mean_at(0.5).unwrap();
        let (a, s) = (m.app_ns, m.storage_ns);
        assert!((a - 5_300.0).abs() < 20.0 && (s - 7_000.0).abs() < 1.0, "{a} {s}");
        // At X = 1 only remote costs matter.
        let mut only_remote = CostProfile::default();
        for _ in 0..100 {
            only_remote.learn(&completion(Placement::Remote, 600, 12_000));
        }
        assert_eq!(
            only_remote.mean_at(1.0),
            Some(MeanCost {
                app_ns: 600.0,
                storage_ns: 12_000.0,
                bytes: 0.0,
                round_trips: 1.0,
            })
        );
        assert_eq!(only_remote.mean_at(0.9), None);
    }

    #[test]
    fn a_changed_workload_is_followed() {
        let mut p = CostProfile::default();
        for _ in 0..5_000 {
            p.learn(&completion(Placement::Remote, 600, 12_000));
        }
        for _ in 0..3_000 {
            p.learn(&completion(Placement::Remote, 600, 24_000));
        }
        // Three memories later the average is within 5 % of the new cost.
        assert!(
            (p.remote.storage_ns / 24_000.0 - 1.0).abs() < 0.05,
            "{}",
            p.remote.storage_ns
        );
    }
}
