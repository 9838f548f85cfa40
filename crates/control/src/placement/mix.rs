//! A mixed workload's costs per function, and Pyxis' turning point over them (§IV-B, C).
//!
//! Each function keeps its own [`CostProfile`], and the mix keeps how often each one
//! completes. Moving one request of function i from local to remote saves the app side
//! `Δa_i = a_L − a_R` of CPU and costs the storage side `Δs_i = s_R − s_L`; Pyxis'
//! Theorem IV.1 (there with `c_i` and `s_i` for the two sides' costs) says an optimum sends
//! the functions with the lowest `Δs_i / Δa_i` remote *all*, the highest *none*, and
//! splits only the one in between: the turning point. One real number α ∈ [0, 1] then
//! places every function. Where the network can bind, the bytes a remote request saves
//! count as app-side cost too, weighted by how much of the links a byte takes against how
//! much of the app cores a nanosecond takes (Pyxis §VII's weighted sum: its own c_i *is*
//! the bytes moved).
//!
//! How α maps to the functions is a choice ([`Slicing`]). Pyxis' equation (14) gives each
//! function an equal-width slice of α, whatever its share of the requests. ferry's default
//! gives each function a slice as wide as its share, so α *is* the share of requests sent
//! remote, the same X as a workload of one function, and every other part of the placement
//! (the load model, change detection, feed-forward of R) works on a mix unchanged: with
//! one function the mix is exactly its cost profile.
//!
//! The order is a model's, from measured means: two functions whose costs differ by less
//! than their noise may swap places between ticks, which moves nothing of consequence
//! (they are equally good uses of either side, Theorem IV.1's tie).

use crate::placement::costs::{CostProfile, MeanCost, MeanCosts};
use crate::policy::{Completion, FnId};

/// Most functions the profile tells apart: a bound on the memory of every policy. Ids at
/// or beyond it share the last slot (their costs average together).
pub const FUNCTIONS_MAX: usize = 64;

/// Completions the shares remember: the counts halve when their sum reaches twice this, so
/// a change of mix shows within a few ten thousand requests.
pub const MIX_MEMORY: f64 = 10_000.0;

/// Completions a mix of two or more functions needs before its shares place anything: a
/// share p estimated from n completions is off by sqrt(p (1 − p) / n), 1.1 % at p = 0.5
/// here. Shares read from the first few dozen completions moved the balanced α by more
/// than change detection tolerates, and every policy run on a mix re-profiled twice.
pub const MIX_SAMPLES_MIN: f64 = 2_000.0;

/// How α is cut into the functions' slices.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Slicing {
    /// A slice as wide as the function's share of requests: α is the share sent remote.
    #[default]
    Share,
    /// Equal slices, 1/n each (Pyxis' equation (14)).
    Equal,
}

impl Slicing {
    /// The name in policy specs.
    pub fn name(self) -> &'static str {
        match self {
            Slicing::Share => "share",
            Slicing::Equal => "equal",
        }
    }
}

/// Per-function costs and shares (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct MixProfile {
    costs: Vec<CostProfile>,
    counts: Vec<f64>,
    total: f64,
    slicing: Slicing,
    /// App CPU a byte moved counts as in the order (0: the network never binds).
    app_ns_per_byte: f64,
}

/// Where a function without its samples runs: half each way, so that it gathers the costs
/// of both placements while it is left out of the decision.
pub const UNREADY_X: f64 = 0.5;

/// The slot a function's statistics live in.
fn slot(fn_id: FnId) -> usize {
    (fn_id.0 as usize).min(FUNCTIONS_MAX - 1)
}

impl MixProfile {
    /// An empty profile cutting α by `slicing`, a byte moved counting as
    /// `app_ns_per_byte` of app CPU in the order (see
    /// [`crate::placement::load_model::Capacity::app_ns_per_byte`]).
    pub fn new(slicing: Slicing, app_ns_per_byte: f64) -> Self {
        MixProfile {
            slicing,
            app_ns_per_byte,
            ..MixProfile::default()
        }
    }

    /// The slot of `fn_id`, made if it is new.
    fn slot_mut(&mut self, fn_id: FnId) -> usize {
        let i = slot(fn_id);
        if self.costs.len() <= i {
            self.costs.resize(i + 1, CostProfile::default());
            self.counts.resize(i + 1, 0.0);
        }
        i
    }

    /// Counts one request of `fn_id` toward its function's share. Shares are counted as
    /// requests arrive, not as they complete: after a change of mix the requests still in
    /// flight complete in the old mix (the slow ones last), and shares read from the
    /// first completions after a change were 0.70 / 0.30 for a 0.80 / 0.20 mix.
    pub fn arrive(&mut self, fn_id: FnId) {
        let i = self.slot_mut(fn_id);
        self.counts[i] += 1.0;
        self.total += 1.0;
        if self.total >= 2.0 * MIX_MEMORY {
            self.counts.iter_mut().for_each(|n| *n *= 0.5);
            self.total *= 0.5;
        }
    }

    /// Learns one completion's costs.
    pub fn learn(&mut self, c: &Completion) {
        let i = self.slot_mut(c.fn_id);
        self.costs[i].learn(c);
    }

    /// Whether slot `i` has its samples: both placements' costs. A function that is not
    /// ready is left out of the decision and placed at [`UNREADY_X`]: one that was called
    /// a few times and never again must not hold the others at the profiling split.
    pub fn ready(&self, i: usize) -> bool {
        self.costs
            .get(i)
            .is_some_and(|costs| costs.local.known() && costs.remote.known())
    }

    /// Slot `i`'s cost profile, if it was seen.
    pub fn function_at(&self, i: usize) -> Option<&CostProfile> {
        self.costs.get(i)
    }

    /// Sets the weight of a byte in the order (the deployment's capacities changed).
    pub fn set_app_ns_per_byte(&mut self, app_ns_per_byte: f64) {
        self.app_ns_per_byte = app_ns_per_byte;
    }

    /// Function slots seen so far.
    pub fn functions(&self) -> usize {
        self.costs.len()
    }

    /// One function's cost profile, if it was seen.
    pub fn function(&self, fn_id: FnId) -> Option<&CostProfile> {
        self.costs.get(slot(fn_id))
    }

    /// Each function's share of the requests (all zero before any).
    pub fn shares(&self) -> Vec<f64> {
        let total = self.total.max(f64::MIN_POSITIVE);
        self.counts.iter().map(|n| n / total).collect()
    }

    /// Each slot as the turning point sees it, from the costs learned.
    pub fn slices(&self) -> Vec<Slice> {
        let shares = self.shares();
        self.costs
            .iter()
            .zip(shares)
            .enumerate()
            .map(|(i, (c, share))| Slice {
                share,
                app_saved_ns: c.local.app_ns - c.remote.app_ns
                    + self.app_ns_per_byte * (c.local.bytes - c.remote.bytes),
                storage_added_ns: c.remote.storage_ns - c.local.storage_ns,
                known: self.ready(i),
            })
            .collect()
    }

    /// The slots in the order they go remote as α grows (ties by id).
    pub fn order(&self) -> Vec<usize> {
        order(&self.slices())
    }

    /// Each slot's share sent remote at turning point `alpha`.
    pub fn split(&self, alpha: f64) -> Vec<f64> {
        split(&self.slices(), self.slicing, alpha)
    }

    /// The share of requests sent remote at turning point `alpha`.
    pub fn remote_share(&self, alpha: f64) -> f64 {
        self.remote_share_at(&self.split(alpha))
    }

    /// The share of requests sent remote at `split`.
    pub fn remote_share_at(&self, split: &[f64]) -> f64 {
        self.shares().iter().zip(split).map(|(p, x)| x * p).sum()
    }
}

/// One function as the turning point sees it: its share of the requests and what sending
/// one of its requests remote instead of local does to each side.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slice {
    /// Share of the requests.
    pub share: f64,
    /// App-side cost a remote request saves against a local one (`a_L − a_R`, plus the
    /// bytes saved at their weight where the network can bind).
    pub app_saved_ns: f64,
    /// Storage CPU a remote request adds against a local one (`s_R − s_L`).
    pub storage_added_ns: f64,
    /// Whether the function is ready (see [`MixProfile::ready`]).
    pub known: bool,
}

impl Slice {
    /// Storage CPU added per app CPU saved: the order key (lower goes remote first). A
    /// function remote costs no more of either side than local goes first; one local
    /// costs no more goes last; one whose placements are not both known yet sits between
    /// the two kinds.
    fn order_key(&self) -> f64 {
        if !self.known {
            return f64::MAX;
        }
        match (self.app_saved_ns > 0.0, self.storage_added_ns > 0.0) {
            (true, true) => self.storage_added_ns / self.app_saved_ns,
            (true, false) => f64::NEG_INFINITY,
            (false, true) => f64::INFINITY,
            // Remote relieves the storage side and loads the app side: the other way round
            // from every other function, so it has no place on the spectrum; it stays local
            // until everything else went remote, as the least useful move.
            (false, false) => f64::INFINITY,
        }
    }
}

/// The functions in the order they go remote as α grows (ties by index).
pub fn order(slices: &[Slice]) -> Vec<usize> {
    let keys: Vec<f64> = slices.iter().map(Slice::order_key).collect();
    let mut order: Vec<usize> = (0..slices.len()).collect();
    order.sort_by(|&a, &b| keys[a].total_cmp(&keys[b]).then(a.cmp(&b)));
    order
}

/// Each function's share sent remote at turning point `alpha`, α cut by `slicing` over
/// the known functions; the others are placed at [`UNREADY_X`] and take no part of α.
pub fn split(slices: &[Slice], slicing: Slicing, alpha: f64) -> Vec<f64> {
    let alpha = alpha.clamp(0.0, 1.0);
    let n = slices.len();
    let mut x = vec![UNREADY_X; n];
    let known = slices.iter().filter(|s| s.known).count();
    let known_share: f64 = slices.iter().filter(|s| s.known).map(|s| s.share).sum();
    let mut start = 0.0;
    for i in order(slices) {
        if !slices[i].known {
            continue;
        }
        let width = match slicing {
            Slicing::Share if known_share > 0.0 => slices[i].share / known_share,
            Slicing::Share => 0.0,
            Slicing::Equal => 1.0 / known as f64,
        };
        x[i] = if width > 0.0 {
            ((alpha - start) / width).clamp(0.0, 1.0)
        } else if alpha > start {
            1.0
        } else {
            0.0
        };
        start += width;
    }
    x
}

impl MeanCosts for MixProfile {
    fn split_at(&self, x: f64) -> Vec<f64> {
        self.split(x)
    }

    /// The mean cost of a request when function i sends `split[i]` remote, if some
    /// function is ready and, on a mix, the shares are known ([`MIX_SAMPLES_MIN`]).
    ///
    /// Functions that are not ready are left out, the others' shares scaled up to the
    /// whole: the mean is the ready functions' mix, which the unready ones are taken to
    /// cost like until they have their samples.
    fn mean_at_split(&self, split: &[f64]) -> Option<MeanCost> {
        if self.functions() > 1 && self.total < MIX_SAMPLES_MIN {
            return None;
        }
        let shares = self.shares();
        let ready: f64 = (0..shares.len()).filter(|&i| self.ready(i)).map(|i| shares[i]).sum();
        if ready <= 0.0 {
            return None;
        }
        let mut mean = MeanCost::default();
        for (i, (costs, share)) in self.costs.iter().zip(shares).enumerate() {
            if share <= 0.0 || !self.ready(i) {
                continue;
            }
            mean.add_scaled(share / ready, &costs.mean_at(*split.get(i)?)?);
        }
        Some(mean)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Placement;

    fn learn(m: &mut MixProfile, f: u32, n: usize, local: (u64, u64), remote: (u64, u64)) {
        for _ in 0..n {
            for (placement, (app, storage)) in [(Placement::Local, local), (Placement::Remote, remote)] {
                m.arrive(FnId(f));
                m.learn(&Completion::of(FnId(f), placement, 10_000, app, storage));
            }
        }
    }

    /// Pyxis §IV-B's example: A (1, 0.1), B (1, 1), C (0.1, 1) as (app saved, storage
    /// added): A goes remote first, then B, then C.
    fn example(slicing: Slicing, shares: [usize; 3]) -> MixProfile {
        let mut m = MixProfile::new(slicing, 0.0);
        learn(&mut m, 2, shares[2], (1_100, 0), (1_000, 1_000));
        learn(&mut m, 0, shares[0], (2_000, 0), (1_000, 100));
        learn(&mut m, 1, shares[1], (2_000, 0), (1_000, 1_000));
        m
    }

    #[test]
    fn functions_go_remote_in_the_order_of_storage_added_per_app_saved() {
        let m = example(Slicing::Share, [100, 100, 100]);
        assert_eq!(m.order(), vec![0, 1, 2]);
        let x = m.split(0.5);
        assert_eq!(x[0], 1.0);
        assert!((x[1] - 0.5).abs() < 1e-9, "{x:?}");
        assert_eq!(x[2], 0.0);
        assert_eq!(m.split(0.0), vec![0.0; 3]);
        assert_eq!(m.split(1.0), vec![1.0; 3]);
    }

    #[test]
    fn share_slicing_makes_alpha_the_remote_share_and_equal_slicing_does_not() {
        let share = example(Slicing::Share, [200, 100, 100]);
        let equal = example(Slicing::Equal, [200, 100, 100]);
        for alpha in [0.1, 0.3, 0.5, 0.8] {
            assert!((share.remote_share(alpha) - alpha).abs() < 1e-9);
        }
        // A is half the requests: its equal slice [0, 1/3] sends all of it by α = 1/3.
        assert!((equal.split(1.0 / 3.0)[0] - 1.0).abs() < 1e-9);
        assert!((equal.remote_share(1.0 / 3.0) - 0.5).abs() < 1e-9);
        assert!((share.split(1.0 / 3.0)[0] - 2.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn dominant_placements_sit_at_the_ends_and_unknown_costs_in_the_middle() {
        let mut m = MixProfile::new(Slicing::Share, 0.0);
        learn(&mut m, 0, 50, (1_000, 0), (2_000, 500)); // local cheaper on both sides
        learn(&mut m, 1, 50, (2_000, 800), (1_000, 500)); // remote cheaper on both sides
        learn(&mut m, 2, 50, (2_000, 0), (1_000, 1_000));
        learn(&mut m, 3, 5, (2_000, 0), (1_000, 1_000)); // too few samples to know
        assert_eq!(m.order(), vec![1, 2, 3, 0]);
    }

    #[test]
    fn one_function_is_its_own_cost_profile() {
        let mut m = MixProfile::new(Slicing::Equal, 0.0);
        learn(&mut m, 0, 100, (9_000, 2_000), (600, 12_000));
        let single = m.function(FnId(0)).copied().unwrap();
        for x in [0.0, 0.25, 0.7, 1.0] {
            assert_eq!(m.mean_at(x), single.mean_at(x));
            assert_eq!(m.split(x), vec![x]);
        }
    }

    #[test]
    fn the_mean_weighs_each_function_by_its_share_at_its_own_split() {
        assert_eq!(
            example(Slicing::Share, [300, 100, 100]).mean_at(0.6),
            None,
            "shares not known yet"
        );
        let m = example(Slicing::Share, [1_500, 500, 500]);
        // α = 0.6: A (share 0.6) all remote, B and C local.
        let mean = m.mean_at(0.6).unwrap();
        let (a, s) = (mean.app_ns, mean.storage_ns);
        assert!(
            (a - (0.6 * 1_000.0 + 0.2 * 2_000.0 + 0.2 * 1_100.0)).abs() < 1e-6,
            "{a}"
        );
        assert!((s - 0.6 * 100.0).abs() < 1e-6, "{s}");
        assert_eq!(MixProfile::default().mean_at(0.5), None);
    }

    #[test]
    fn shares_follow_a_changed_mix_and_ids_beyond_the_limit_share_a_slot() {
        let mut m = MixProfile::new(Slicing::Share, 0.0);
        learn(&mut m, 0, 5_000, (2_000, 0), (1_000, 100));
        learn(&mut m, 1, 30_000, (2_000, 0), (1_000, 1_000));
        assert!(m.shares()[1] > 0.9, "{:?}", m.shares());
        learn(&mut m, 999, 10, (2_000, 0), (1_000, 1_000));
        assert_eq!(m.functions(), FUNCTIONS_MAX);
    }
}
