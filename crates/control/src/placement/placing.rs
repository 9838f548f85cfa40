//! What a policy placing by measured costs holds, whatever law moves its X: each
//! function's costs (the mix), each side's capture ratio, the split in use, and the
//! feed-forward that moves the R loop with X.
//!
//! A split is each function's share sent remote; X names it (one function: X itself; a
//! mix: the turning point). While profiling every function runs at the profile's X; once a
//! split is held, a function it never saw (or one that had too few samples when it was
//! taken) runs half each way until it has its samples; then, as when the functions'
//! shares moved, the mix changed, and the policy places it again from the costs it has:
//! nothing is forgotten, nothing is profiled again.

use crate::arbiter::Arbiter;
use crate::error::ControlError;
use crate::placement::capture::Capture;
use crate::placement::load_model::{Capacity, LoadModel};
use crate::placement::mix::{MixProfile, Slicing, UNREADY_X};
use crate::policy::{Busy, Completion, FnId, Placement};

/// The most one move of X scales R by, either way: the model's capacities are estimates,
/// and the R loop's next windows correct what a bounded step leaves. Four: a mix whose
/// shares flip can change the capacity by three times and more (the polarized pair's
/// 80:20 and 20:80 mixes, 1.37M against 0.41M), and a memory left 1.7× too high by a bound
/// of two held the loop over the SLO for the whole phase.
pub const FEED_FORWARD_MAX: f64 = 4.0;

/// How far a function's share of the requests may move from what it was when the split
/// was taken before the mix counts as changed: a tenth, far beyond what the shares'
/// estimates wander by (a share from thousands of requests is known to a percent).
pub const MIX_SHIFT: f64 = 0.1;

/// The split in use and what it rests on (see the module docs).
pub struct Placing {
    arbiter: Arbiter,
    costs: MixProfile,
    capture: Capture,
    capacity: Capacity,
    /// Scale the costs by the capture ratios (the ablation turns it off).
    use_capture: bool,
    /// Each function's share sent remote; empty while profiling.
    split: Vec<f64>,
    /// Which functions had requests and were ready when the split was taken.
    placed: Vec<bool>,
    /// The functions' shares of the requests when the split was taken.
    shares: Vec<f64>,
}

impl Placing {
    /// Profiling at `x`, cutting X by `slicing` on a deployment with `capacity` cores.
    pub fn new(
        x: f64,
        slicing: Slicing,
        capacity: Capacity,
        use_capture: bool,
        seed: u64,
    ) -> Result<Self, ControlError> {
        Ok(Placing {
            arbiter: Arbiter::new(x, seed)?,
            costs: MixProfile::new(slicing, capacity.app_ns_per_byte()),
            capture: Capture::default(),
            capacity,
            use_capture,
            split: Vec::new(),
            placed: Vec::new(),
            shares: Vec::new(),
        })
    }

    /// Where the request for `fn_id` runs.
    pub fn place(&mut self, fn_id: FnId) -> Placement {
        self.costs.arrive(fn_id);
        if self.split.is_empty() {
            return self.arbiter.place();
        }
        match self.split.get(fn_id.0 as usize) {
            Some(&x) if self.placed.get(fn_id.0 as usize).copied().unwrap_or(false) => self.arbiter.draw(x),
            _ => self.arbiter.draw(UNREADY_X),
        }
    }

    /// Learns one completion's costs.
    pub fn learn(&mut self, c: &Completion) {
        self.costs.learn(c);
        self.capture.learn(c);
    }

    /// Learns each side's busy CPU over a span.
    pub fn busy(&mut self, busy: &Busy) {
        self.capture.span(busy);
    }

    /// Whether both sides' capture ratios are measured.
    pub fn capture_measured(&self) -> bool {
        self.capture.measured()
    }

    /// The capture ratios (app, storage), for reports.
    pub fn capture_ratios(&self) -> (f64, f64) {
        (self.capture.app_ratio(), self.capture.storage_ratio())
    }

    /// The cores the model divides the measured costs by.
    pub fn effective_capacity(&self) -> Capacity {
        if self.use_capture {
            self.capture.effective(self.capacity)
        } else {
            self.capacity
        }
    }

    /// The deployment's cores.
    pub fn capacity(&self) -> Capacity {
        self.capacity
    }

    /// The deployment's app side changed size.
    pub fn set_app_cores(&mut self, app_cores: f64) {
        self.capacity.app_cores = app_cores;
        self.costs.set_app_ns_per_byte(self.capacity.app_ns_per_byte());
    }

    /// The load model over the costs and the effective cores (raw capacity: the sides are
    /// balanced by their measured utilisation, which staffing does not describe).
    pub fn model(&self) -> LoadModel<'_> {
        LoadModel {
            staffing: false,
            ..LoadModel::new(&self.costs, self.effective_capacity())
        }
    }

    /// The profile's costs.
    pub fn costs(&self) -> &MixProfile {
        &self.costs
    }

    /// Whether every function that could set the tail has both placements' costs (a
    /// function with a share under `rare_share` of the requests cannot, and is not waited
    /// for).
    pub fn profiled(&self, rare_share: f64) -> bool {
        let shares = self.costs.shares();
        !shares.is_empty() && (0..shares.len()).all(|i| shares[i] < rare_share || self.costs.ready(i))
    }

    /// Whether the mix changed since the split was taken: a function it does not place
    /// (new, or ready since), or a function's share moved by [`MIX_SHIFT`] or more.
    pub fn mix_changed(&self) -> bool {
        if self.split.is_empty() {
            return false;
        }
        let shares = self.costs.shares();
        (0..shares.len()).any(|i| {
            let unplaced = shares[i] > 0.0 && self.costs.ready(i) && !self.placed.get(i).copied().unwrap_or(false);
            let moved = (shares[i] - self.shares.get(i).copied().unwrap_or(0.0)).abs() >= MIX_SHIFT;
            unplaced || moved
        })
    }

    /// X in use.
    pub fn x(&self) -> f64 {
        self.arbiter.x()
    }

    /// The split in use (the profile's: every function at X).
    fn split_in_use(&self) -> Vec<f64> {
        if self.split.is_empty() {
            vec![self.arbiter.x(); self.costs.functions()]
        } else {
            self.split.clone()
        }
    }

    /// The capacity the model predicts at the split in use.
    pub fn capacity_ops(&self) -> Option<f64> {
        self.model().capacity_at(&self.split_in_use())
    }

    /// The share of requests sent remote now.
    pub fn remote_share(&self) -> f64 {
        if self.split.is_empty() {
            self.arbiter.x()
        } else {
            self.costs.remote_share_at(&self.split)
        }
    }

    /// Holds the split `x` names, and returns the factor the model predicts the capacity
    /// moved by (1 where it cannot say), bounded by [`FEED_FORWARD_MAX`].
    pub fn move_to(&mut self, x: f64) -> f64 {
        let before = self.capacity_ops();
        let split = self.costs.split(x);
        self.placed = (0..self.costs.functions()).map(|i| self.costs.ready(i)).collect();
        self.shares = self.costs.shares();
        self.split = split;
        self.arbiter.set_x(x);
        match (before, self.capacity_ops()) {
            (Some(a), Some(b)) if a > 0.0 && a.is_finite() && b.is_finite() => {
                (b / a).clamp(1.0 / FEED_FORWARD_MAX, FEED_FORWARD_MAX)
            }
            _ => 1.0,
        }
    }
}
