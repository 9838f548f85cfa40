//! The latency model: for each function and each placement, its latency at a predicted
//! load, the tail of the mix they make, and the split that serves the most requests whose
//! predicted p99 fits the SLO.
//!
//! The load model ([`super::load_model`]) balances the sides' CPU. The SLO measures
//! latency, and the two part ways where a placement's requests wait in many queues (seven
//! dependent round trips of a local traversal each wait at both sides) or carry a floor of
//! their own (64 KiB fetched over a link): there, equal load is far from the most
//! throughput within the SLO. So this model predicts latency:
//!
//! 1. **Loads.** At rate R and split x each side's utilisation is the load model's ρ
//!    (CPU per request over cores; the storage links too, where they can bind).
//! 2. **Waits per visit.** A side serves *visits*: a local run visits the storage node once
//!    per round trip k and the app side k + 1 times, a remote run each once per round trip
//!    and twice. The mean wait of a visit is that of an M/G/c queue: Sakasegawa's
//!    approximation of M/M/c, `W = τ ρ^(√(2(c+1)) − 1) / (c (1 − ρ))` (exact for c = 1,
//!    defined for the fractional cores elastic compute gives), times `(1 + cv²) / 2` for the
//!    variance of the visits' service times (Pollaczek–Khinchine): a remote invocation
//!    holding a core for hundreds of µs makes every get behind it wait, which a model of
//!    load alone cannot see. τ and cv² come from the classes' mean costs per visit.
//! 3. **Each class's latency** (one function placed one way) is its measured floor plus an
//!    exponential spread (see [`super::tail`]): its own spread, which the queues do not
//!    explain, plus k (or k + 1) times each side's predicted wait.
//! 4. **The mix's tail** is the quantile of the mixture of the classes weighted by the
//!    requests they carry ([`super::tail::mixture_quantile`]): a class carrying more than
//!    1 − q of the requests sets it.
//! 5. **The decision.** For each turning point α, the largest R whose predicted quantile
//!    fits the SLO (bisection: the prediction grows with R); the α with the largest such R
//!    wins. The order of the functions along α stays Pyxis' (Theorem IV.1, from costs), so
//!    every function but one is placed all one way: where the tail rules, a function split
//!    across placements pays for the slower one with 1 % of its requests.
//!
//! The rate loop still finds R; this model only chooses where requests run, so its
//! absolute error matters less than its ranking of splits.

use crate::placement::costs::MeanCost;
use crate::placement::load_model::{Capacity, LoadModel};
use crate::placement::mix::MixProfile;
use crate::placement::tail::{mixture_quantile, Predicted, Weighted};
use crate::policy::Placement;

/// Points of the coarse grid of α: 0.01 apart.
const ALPHA_GRID: usize = 100;

/// Points of the refinement around the coarse grid's best: 0.001 apart over ±0.01.
const ALPHA_REFINE: usize = 20;

/// Bisection steps of the rate at the SLO: 2⁻³⁰ of the capacity.
const RATE_STEPS: u32 = 30;

/// Most of a side's capacity a prediction goes to: at ρ → 1 the waits are unbounded, and a
/// rate the rate loop could reach only at 99.9 % load is none.
const RHO_MAX: f64 = 0.999;

/// A split within this share of the best predicted rate is as good: neighbouring points
/// whose predictions differ by less than this are a tie, and the lower α wins (fewer
/// requests on the storage node, which other tenants share).
const TIE_SHARE: f64 = 1e-3;

/// Each side's mean wait per visit at some load, ns, and its utilisation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Waits {
    /// Per visit to the app side.
    pub app_ns: f64,
    /// Per visit to a storage node.
    pub storage_ns: f64,
    /// Per message on a storage node's link.
    pub link_ns: f64,
    /// The app side's utilisation.
    pub app_rho: f64,
    /// The storage side's utilisation.
    pub storage_rho: f64,
}

/// Visits to the app side of a request placed `placement` with `round_trips` round trips.
fn app_visits(placement: Placement, round_trips: f64) -> f64 {
    match placement {
        Placement::Local => round_trips + 1.0,
        Placement::Remote => 2.0,
    }
}

impl Waits {
    /// The wait a request placed `placement` with `round_trips` round trips sees in all.
    pub fn of_request(&self, placement: Placement, round_trips: f64) -> f64 {
        app_visits(placement, round_trips) * self.app_ns + round_trips * (self.storage_ns + self.link_ns)
    }

    /// How much the load amplifies an interruption a request of this kind meets: a stall of
    /// D at a side loaded ρ leaves a backlog that takes D ρ / (1 − ρ) more to drain, so the
    /// delay it causes is D / (1 − ρ); averaged over the request's visits to each side.
    pub fn amplification(&self, placement: Placement, round_trips: f64) -> f64 {
        let gain = |rho: f64| 1.0 / (1.0 - rho.clamp(0.0, RHO_MAX));
        let app = app_visits(placement, round_trips);
        let visits = app + round_trips;
        if visits <= 0.0 {
            return 1.0;
        }
        (app * gain(self.app_rho) + round_trips * gain(self.storage_rho)) / visits
    }

    /// What the model predicts for a request of this kind at this load.
    pub fn predicted(&self, placement: Placement, round_trips: f64) -> Predicted {
        Predicted {
            wait_ns: self.of_request(placement, round_trips),
            amplification: self.amplification(placement, round_trips),
        }
    }
}

/// Mean wait per visit to `cores` servers at utilisation `rho`, visits taking `service_ns`
/// on average with squared coefficient of variation `cv2` (see the module docs).
pub fn wait_ns(cores: f64, rho: f64, service_ns: f64, cv2: f64) -> f64 {
    if rho <= 0.0 || service_ns <= 0.0 {
        return 0.0;
    }
    if rho >= 1.0 {
        return f64::INFINITY;
    }
    let c = cores.max(1e-9);
    let mmc = service_ns * rho.powf((2.0 * (c + 1.0)).sqrt() - 1.0) / (c * (1.0 - rho));
    mmc * (1.0 + cv2.max(0.0)) / 2.0
}

/// The latency model over a mix's costs and tails (see the module docs).
pub struct LatencyModel<'a> {
    /// Costs, shares and tails per function.
    pub mix: &'a MixProfile,
    /// The cores (and links) of each side.
    pub capacity: Capacity,
    /// The SLO latency, ns.
    pub slo_ns: f64,
    /// The SLO quantile.
    pub quantile: f64,
}

/// Mean and second moment of the service time of one side's visits, ns and ns².
#[derive(Clone, Copy, Default)]
struct VisitMoments {
    visits: f64,
    busy_ns: f64,
    busy_sq: f64,
}

impl VisitMoments {
    /// Adds `visits` visits sharing `total_ns` of service equally, at weight `w`.
    fn add(&mut self, w: f64, visits: f64, total_ns: f64) {
        if visits <= 0.0 {
            return;
        }
        let each = total_ns / visits;
        self.visits += w * visits;
        self.busy_ns += w * total_ns;
        self.busy_sq += w * visits * each * each;
    }

    fn mean_and_cv2(&self) -> (f64, f64) {
        if self.visits <= 0.0 || self.busy_ns <= 0.0 {
            return (0.0, 0.0);
        }
        let mean = self.busy_ns / self.visits;
        let second = self.busy_sq / self.visits;
        (mean, (second / (mean * mean) - 1.0).max(0.0))
    }
}

impl<'a> LatencyModel<'a> {
    /// The model over `mix` on `capacity`, for an SLO of `slo_ns` at `quantile`.
    pub fn new(mix: &'a MixProfile, capacity: Capacity, slo_ns: f64, quantile: f64) -> Self {
        LatencyModel {
            mix,
            capacity,
            slo_ns,
            quantile,
        }
    }

    fn load(&self) -> LoadModel<'a> {
        LoadModel::new(self.mix, self.capacity)
    }

    /// Each included function's (index, weight, placement, mean cost) at `split`, weights
    /// over the included functions summing to 1: the ready ones (costs and tails known), or,
    /// with `costs_only`, every one whose costs are known for the placements it uses.
    fn classes(&self, split: &[f64], costs_only: bool) -> Vec<(usize, f64, Placement, MeanCost)> {
        let shares = self.mix.shares();
        let included = |i: usize| {
            let x = split.get(i).copied().unwrap_or(0.0);
            match (costs_only, self.mix.function_at(i)) {
                (false, _) => self.mix.ready(i),
                (true, Some(c)) => (x >= 1.0 || c.local.known()) && (x <= 0.0 || c.remote.known()),
                (true, None) => false,
            }
        };
        let total: f64 = (0..shares.len())
            .filter(|&i| shares[i] > 0.0 && included(i))
            .map(|i| shares[i])
            .sum();
        let mut out = Vec::new();
        if total <= 0.0 {
            return out;
        }
        for (i, &share) in shares.iter().enumerate() {
            if share <= 0.0 || !included(i) {
                continue;
            }
            let Some(costs) = self.mix.function_at(i) else {
                continue;
            };
            let x = split.get(i).copied().unwrap_or(0.0);
            for (placement, w, side) in [
                (Placement::Local, 1.0 - x, &costs.local),
                (Placement::Remote, x, &costs.remote),
            ] {
                if w > 0.0 {
                    out.push((i, share / total * w, placement, side.mean()));
                }
            }
        }
        out
    }

    /// Each side's mean wait per visit at rate `rate_ops` and `split` (infinite past a
    /// side's capacity), over every function whose costs are known: what the policy records
    /// with each completion, before the functions' tails are known.
    pub fn waits_at(&self, split: &[f64], rate_ops: f64) -> Option<Waits> {
        self.waits_over(&self.classes(split, true), rate_ops)
    }

    /// The waits of [`Self::waits_at`] over `classes`, if there are any.
    fn waits_over(&self, classes: &[(usize, f64, Placement, MeanCost)], rate_ops: f64) -> Option<Waits> {
        if classes.is_empty() {
            return None;
        }
        let mut mean = MeanCost::default();
        let (mut app, mut storage, mut link) = (
            VisitMoments::default(),
            VisitMoments::default(),
            VisitMoments::default(),
        );
        for &(_, w, placement, m) in classes {
            mean.add_scaled(w, &m);
            app.add(w, app_visits(placement, m.round_trips), m.app_ns);
            storage.add(w, m.round_trips, m.storage_ns);
            link.add(w, m.round_trips, m.bytes);
        }
        let cap = &self.capacity;
        let side = |moments: &VisitMoments, cores: f64, rho: f64| {
            let (service, cv2) = moments.mean_and_cv2();
            wait_ns(cores, rho, service, cv2)
        };
        let app_rho = rate_ops * mean.app_ns / (cap.app_cores * 1e9);
        let storage_rho = rate_ops * mean.storage_ns / (cap.storage_cores * 1e9);
        let link_ns = match cap.links {
            Some(l) if l.bytes_per_sec > 0.0 && l.count > 0.0 => {
                let (mean_bytes, cv2) = link.mean_and_cv2();
                let link_rho = rate_ops * mean.bytes / (l.count * l.bytes_per_sec);
                wait_ns(1.0, link_rho, mean_bytes * 1e9 / l.bytes_per_sec, cv2)
            }
            _ => 0.0,
        };
        Some(Waits {
            app_ns: side(&app, cap.app_cores, app_rho),
            storage_ns: side(&storage, cap.storage_cores, storage_rho),
            link_ns,
            app_rho,
            storage_rho,
        })
    }

    /// The mix's predicted SLO quantile at rate `rate_ops` and `split`, ns, if every
    /// class used there has its costs and tail (infinite past a side's capacity).
    pub fn quantile_at(&self, split: &[f64], rate_ops: f64) -> Option<f64> {
        let classes = self.classes(split, false);
        let waits = self.waits_over(&classes, rate_ops)?;
        if !(waits.app_ns.is_finite() && waits.storage_ns.is_finite() && waits.link_ns.is_finite()) {
            return Some(f64::INFINITY);
        }
        let mut weighted = Vec::new();
        for (i, w, placement, m) in classes {
            let shape = self.mix.tail(i, placement)?;
            weighted.push(Weighted {
                weight: w,
                floor_ns: shape.floor_ns,
                spread_ns: shape.own_spread_at_ns(waits.amplification(placement, m.round_trips))
                    + waits.of_request(placement, m.round_trips),
            });
        }
        if weighted.is_empty() {
            return None;
        }
        Some(mixture_quantile(&weighted, self.quantile))
    }

    /// The largest rate at `split` whose predicted quantile fits the SLO (0 if none does),
    /// if the model can predict there.
    pub fn slo_rate_at(&self, split: &[f64]) -> Option<f64> {
        let capacity = self.load().capacity_at(split)?;
        if !capacity.is_finite() || capacity <= 0.0 {
            return None;
        }
        let fits = |rate: f64| self.quantile_at(split, rate).map(|q| q <= self.slo_ns);
        let (mut lo, mut hi) = (0.0, RHO_MAX * capacity);
        if !fits(hi * 1e-6)? {
            return Some(0.0);
        }
        if fits(hi)? {
            return Some(hi);
        }
        for _ in 0..RATE_STEPS {
            let mid = 0.5 * (lo + hi);
            if fits(mid)? {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Some(lo)
    }

    /// The turning point whose split serves the most requests within the SLO, and that
    /// rate, if the model can predict and some split fits the SLO at all.
    pub fn best_x(&self) -> Option<(f64, f64)> {
        let rate_at = |alpha: f64| self.slo_rate_at(&self.mix.split(alpha));
        let mut best: Option<(f64, f64)> = None;
        let consider = |alpha: f64, rate: f64, best: &mut Option<(f64, f64)>| {
            if best.is_none_or(|(_, b)| rate > b * (1.0 + TIE_SHARE)) {
                *best = Some((alpha, rate));
            }
        };
        for k in 0..=ALPHA_GRID {
            let alpha = k as f64 / ALPHA_GRID as f64;
            consider(alpha, rate_at(alpha)?, &mut best);
        }
        let (centre, _) = best?;
        let step = 1.0 / ALPHA_GRID as f64;
        for k in 0..=ALPHA_REFINE {
            let alpha = centre - step + 2.0 * step * k as f64 / ALPHA_REFINE as f64;
            if (0.0..=1.0).contains(&alpha) {
                consider(alpha, rate_at(alpha)?, &mut best);
            }
        }
        best.filter(|&(_, rate)| rate > 0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::mix::Slicing;
    use crate::policy::{Completion, Costs, FnId};

    #[test]
    fn waits_follow_the_textbook_queues() {
        // M/M/1 at ρ = 0.5, τ = 1 µs: 1 µs; deterministic visits wait half as long.
        assert!((wait_ns(1.0, 0.5, 1_000.0, 1.0) - 1_000.0).abs() < 1e-9);
        assert!((wait_ns(1.0, 0.5, 1_000.0, 0.0) - 500.0).abs() < 1e-9);
        // M/M/2 at ρ = 0.5: Erlang C gives C = 1/3, W = C τ / (c (1 − ρ)) = 333 ns;
        // Sakasegawa's approximation is within 10 %.
        let w = wait_ns(2.0, 0.5, 1_000.0, 1.0);
        assert!((w / 333.3 - 1.0).abs() < 0.1, "{w}");
        // More cores at the same load wait less; no load, no wait; full, unbounded.
        assert!(wait_ns(8.0, 0.5, 1_000.0, 1.0) < w / 4.0);
        assert_eq!(wait_ns(4.0, 0.0, 1_000.0, 1.0), 0.0);
        assert!(wait_ns(4.0, 1.0, 1_000.0, 1.0).is_infinite());
    }

    /// A profile of one function whose local runs take `k` round trips, each class with
    /// latencies `floor + Exp(spread)` (deterministic quantiles of it, in order).
    fn one_function(local: (u64, u64, u32, f64, f64), remote: (u64, u64, f64, f64)) -> MixProfile {
        let mut mix = MixProfile::new(Slicing::Share, 0.0);
        mix.set_tail_samples_min(crate::placement::tail::TAIL_SAMPLES_MIN);
        let n = 2_000;
        for i in 0..n {
            let u = (i as f64 + 0.5) / n as f64;
            for (placement, app, storage, k, floor, spread) in [
                (Placement::Local, local.0, local.1, local.2, local.3, local.4),
                (Placement::Remote, remote.0, remote.1, 1, remote.2, remote.3),
            ] {
                mix.arrive(FnId(0));
                let c = Completion {
                    fn_id: FnId(0),
                    placement,
                    latency_ns: (floor - spread * (1.0 - u).ln()) as u64,
                    costs: Costs {
                        app_cpu_ns: app,
                        storage_cpu_ns: storage,
                        bytes_moved: 0,
                        round_trips: k,
                    },
                    pushed_back: false,
                };
                mix.learn(&c, Some(Predicted::NONE));
            }
        }
        mix
    }

    #[test]
    fn many_dependent_round_trips_lose_to_their_tail_not_their_load() {
        // The first shape: a local run of seven reads costs about what a remote run
        // does on each side, so the load model balances near the middle; but its eight
        // round trips each wait at both sides, its floor is three times the remote one's,
        // and under a tight SLO the local share is what fills the tail.
        let mix = one_function((7_000, 8_000, 8, 35_000.0, 15_000.0), (600, 12_000, 12_000.0, 3_000.0));
        let capacity = Capacity::cores(3.0, 4.0);
        let load = LoadModel::new(&mix, capacity);
        let balanced = load.balanced_x(0.0, 1.0).unwrap();
        assert!(balanced < 0.6, "the load model shares the work: {balanced}");
        let model = LatencyModel::new(&mix, capacity, 117_000.0, 0.99);
        let (x, rate) = model.best_x().unwrap();
        assert!(x > 0.99, "all remote: {x}");
        let at_balanced = model.slo_rate_at(&mix.split(balanced)).unwrap();
        assert!(rate > 1.2 * at_balanced, "{rate} vs {at_balanced} at {balanced}");
    }

    #[test]
    fn a_placement_with_a_floor_near_the_slo_carries_nothing() {
        // The second shape: a local run's floor (64 KiB over the link) is near the SLO; a
        // 5 % local share alone would set the p99 above it.
        let mix = one_function((2_000, 6_000, 4, 85_000.0, 10_000.0), (600, 12_000, 20_000.0, 4_000.0));
        let model = LatencyModel::new(&mix, Capacity::cores(12.0, 8.0), 97_000.0, 0.99);
        let (x, _) = model.best_x().unwrap();
        assert!(x > 0.99, "{x}");
        assert!(model.quantile_at(&[0.95], 1_000.0).unwrap() > 97_000.0);
    }

    #[test]
    fn where_both_placements_are_quick_the_latency_model_spreads_the_load() {
        // Medium work with a loose SLO: both classes are fast; the cores decide.
        let mix = one_function((3_100, 2_200, 2, 30_000.0, 3_000.0), (600, 4_300, 15_000.0, 2_000.0));
        let model = LatencyModel::new(&mix, Capacity::cores(8.0, 8.0), 1_000_000.0, 0.99);
        let (x, rate) = model.best_x().unwrap();
        let load = LoadModel::new(&mix, Capacity::cores(8.0, 8.0));
        assert!(x > 0.05 && x < 0.6, "{x}");
        assert!(rate > 0.9 * load.capacity_ops(x).unwrap(), "{rate}");
    }
}
