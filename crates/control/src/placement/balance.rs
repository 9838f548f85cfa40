//! `balance`: ferry's placement from measured costs (Pyxis §IV-A and Algorithm 1, for one
//! X over the workload).
//!
//! 1. **Profile.** Requests go half remote, half local until both placements' costs are
//!    known (Pyxis §V profiles at a 50 % split); every completion carries its costs.
//! 2. **Predict.** The load model turns the costs and each side's cores into the X that
//!    balances both sides' load (see [`super::load_model`]). On the suite's scenarios that
//!    prediction is within 0.05 of the optimum; it is off where the sides' tails differ at
//!    equal load (cores, round trips).
//! 3. **Refine.** Algorithm 1 searches a bracket of ±[`BRACKET_HALF_WIDTH_DEFAULT`] around
//!    the prediction. At each point X moves, R is fed forward by the ratio of the
//!    capacities the model predicts at the old and new X, and after
//!    [`SETTLE_DECISIONS_DEFAULT`] R-loop decisions the next [`MEASURE_DECISIONS_DEFAULT`]
//!    are averaged: not R itself but each decision's Newton root (where R is heading).
//!    While the search moves X on purpose, its slow completions are not charged to the R
//!    loop's tail budget.
//! 4. **Hold.** X stays at the search's result until the costs say the workload changed
//!    (see [`super::change`]): a node stall changes throughput, never costs, so it never
//!    starts a search. On a change the costs are forgotten and profiled again at the 50 %
//!    split, as Pyxis resets: at X = 1 no local request runs, and the local costs of the
//!    old workload would otherwise stay in the model for good (after a switch from medium
//!    to light work they put light work at X = 0). The R loop forgets what it learned of
//!    the old workload's curve too (see `RateLoop::new_workload`): light work's setpoint
//!    held medium work's R 25 % under its knee for a second.
//!
//! The R loop (see [`crate::rate`]) runs throughout, with the capacity the model predicts
//! at the current X as the bracket's known miss.

use crate::arbiter::Arbiter;
use crate::error::{check_range, ConfigError};
use crate::placement::bracket::{BracketSearch, SEGMENTS_DEFAULT};
use crate::placement::change::Reference;
use crate::placement::latency_model::{LatencyModel, Waits};
use crate::placement::load_model::{Capacity, LoadModel};
use crate::placement::mix::{MixProfile, Slicing, UNREADY_X};
use crate::placement::tail::{Predicted, TAIL_SAMPLES_MIN};
use crate::policy::{Completion, FnId, Placement, Policy, PolicyState};
use crate::rate::{RateInput, RateLoop, RateLoopConfig, RateReport};
use crate::time::Nanos;

/// Default half-width of the bracket around the model's prediction: four times the
/// prediction's error on the suite, so the search can correct a model that is off on real
/// processes (costs measured there leave out kernel and I/O-thread time).
pub const BRACKET_HALF_WIDTH_DEFAULT: f64 = 0.2;

/// Default bracket width at which the search ends (twice this): R(X) moves by a percent
/// or two per 0.03 of X near its peak, about what an averaged measurement resolves.
pub const RESOLUTION_DEFAULT: f64 = 0.02;

/// Default R-loop decisions after a move of X before its rate is measured: the feed-
/// forward puts R near its new root, the re-opened gain closes the rest in a few.
pub const SETTLE_DECISIONS_DEFAULT: u32 = 3;

/// Default R-loop decisions averaged per point: five roots average a window's luck down to
/// a percent or two, which is what neighbouring points near the peak differ by.
pub const MEASURE_DECISIONS_DEFAULT: u32 = 5;

/// The split while profiling: Pyxis' 50 %.
pub const PROFILE_X: f64 = 0.5;

/// The most of its split's capacity the profile loads the sides to, when the latency model
/// reads its completions: at half load a queue's wait is about one service time, which the
/// model predicts well, so the shapes measured are the classes', not a ramp's backlog (a
/// profile whose rate ramped to 97 % of its split's capacity read a 3.8 ms spread into
/// runs of 0.17 ms, and sent a compute-heavy function to two storage cores).
pub const PROFILE_LOAD: f64 = 0.5;

/// The policy's own parts that `without=` switches off.
pub const PART_NAMES: &str = "latency, staffing, feed-forward";

/// Which of the policy's parts run; the R loop's guards are in its configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parts {
    /// Choose the split by the latency model (the most throughput whose predicted p99
    /// fits the SLO); without: by the load model (the sides' usable capacity balanced).
    pub latency: bool,
    /// Refine the model's prediction by Algorithm 1 (off by default: on the suite it lost
    /// to the prediction it starts from; see the module docs).
    pub search: bool,
    /// Balance the sides' usable capacity by square-root staffing (without: their raw
    /// capacity).
    pub staffing: bool,
    /// Feed R forward by the predicted capacities' ratio when X moves.
    pub feed_forward: bool,
}

impl Default for Parts {
    fn default() -> Self {
        Parts {
            latency: true,
            search: false,
            staffing: true,
            feed_forward: true,
        }
    }
}

impl Parts {
    /// The default parts but those named in `names` (names of the R loop's guards are
    /// skipped).
    pub fn without(names: &[String]) -> Result<Parts, ConfigError> {
        let mut p = Parts::default();
        for name in names {
            match name.as_str() {
                "latency" => p.latency = false,
                "staffing" => p.staffing = false,
                "feed-forward" => p.feed_forward = false,
                other if crate::rate::guards::GUARD_NAMES.split(", ").any(|g| g == other) => {}
                other => {
                    return Err(ConfigError::Unknown {
                        what: "balance part",
                        name: other.to_string(),
                        allowed: PART_NAMES,
                    })
                }
            }
        }
        Ok(p)
    }
}

/// What a balance policy needs.
#[derive(Clone, Debug, PartialEq)]
pub struct BalanceConfig {
    /// The R loop.
    pub rate: RateLoopConfig,
    /// The cores of each side.
    pub capacity: Capacity,
    /// Half-width of the search's bracket around the prediction.
    pub bracket_half_width: f64,
    /// Grid segments per bracket (Algorithm 1's M).
    pub segments: u32,
    /// Bracket width (halved) at which the search ends.
    pub resolution: f64,
    /// Decisions after a move before measuring.
    pub settle_decisions: u32,
    /// Decisions averaged per point.
    pub measure_decisions: u32,
    /// Which of the policy's own parts run.
    pub parts: Parts,
    /// How the turning point is cut into the functions' slices.
    pub slicing: Slicing,
    /// Where the search starts: `None` at the load model's prediction; `Some(α)` at α,
    /// as Pyxis does (which searches without a model; give it a bracket half-width of 1).
    pub search_start: Option<f64>,
    /// The name in reports (`balance`, or `pyxis` for Pyxis' configuration).
    pub name: &'static str,
    /// Seed of the arbiter's draws.
    pub seed: u64,
}

impl BalanceConfig {
    /// Defaults for an SLO of `slo_latency_ns` on a deployment with `capacity`.
    pub fn new(slo_latency_ns: f64, capacity: Capacity, seed: u64) -> Self {
        BalanceConfig {
            bracket_half_width: BRACKET_HALF_WIDTH_DEFAULT,
            measure_decisions: MEASURE_DECISIONS_DEFAULT,
            settle_decisions: SETTLE_DECISIONS_DEFAULT,
            resolution: RESOLUTION_DEFAULT,
            rate: RateLoopConfig::new(slo_latency_ns),
            capacity,
            segments: SEGMENTS_DEFAULT,
            parts: Parts::default(),
            slicing: Slicing::default(),
            search_start: None,
            name: "balance",
            seed,
        }
    }

    /// Pyxis as published (§IV-C, §V): profile at 50 %, then Algorithm 1 over the whole of
    /// [0, 1] from `alpha0` with `segments` segments, α cut by `slicing`, no prediction.
    pub fn pyxis(slo_latency_ns: f64, capacity: Capacity, alpha0: f64, slicing: Slicing, seed: u64) -> Self {
        BalanceConfig {
            bracket_half_width: 1.0,
            slicing,
            search_start: Some(alpha0),
            name: "pyxis",
            parts: Parts {
                search: true,
                ..Parts::default()
            },
            ..BalanceConfig::new(slo_latency_ns, capacity, seed)
        }
    }

    /// Rejects values the policy is not defined for.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.rate.validate()?;
        check_range("app cores", "[0.001, 1e6]", self.capacity.app_cores, 1e-3, 1e6)?;
        check_range("storage cores", "[0.001, 1e6]", self.capacity.storage_cores, 1e-3, 1e6)?;
        check_range("bracket half-width", "(0, 1]", self.bracket_half_width, 1e-6, 1.0)?;
        check_range("segments", "[3, 100]", self.segments as f64, 3.0, 100.0)?;
        check_range("resolution", "(0, 0.5]", self.resolution, 1e-6, 0.5)?;
        if let Some(alpha0) = self.search_start {
            check_range("search start", "[0, 1]", alpha0, 0.0, 1.0)?;
        }
        check_range(
            "measured decisions",
            "[1, 1000]",
            self.measure_decisions as f64,
            1.0,
            1e3,
        )?;
        check_range(
            "settling decisions",
            "[0, 1000]",
            self.settle_decisions as f64,
            0.0,
            1e3,
        )?;
        Ok(())
    }
}

/// Where the policy is.
#[derive(Clone, Debug)]
enum Stage {
    /// At [`PROFILE_X`] until both placements' costs are known.
    Profiling,
    /// Measuring the rate at the search's current point.
    Searching {
        /// Algorithm 1.
        search: BracketSearch,
        /// Decisions since X moved there.
        decisions: u32,
        /// Sum of the measured decisions' roots.
        roots: f64,
    },
    /// X at the search's result.
    Holding,
}

/// The policy (see the module docs).
pub struct Balance {
    cfg: BalanceConfig,
    arbiter: Arbiter,
    rate: RateLoop,
    costs: MixProfile,
    /// Each function's share sent remote, as the last move of X named it: held until X
    /// moves again, so that the shares' estimates moving later do not move the placement.
    split: Vec<f64>,
    /// Which functions were ready when the split was taken.
    placed: Vec<bool>,
    /// Which functions had requests when the split was taken.
    seen: Vec<bool>,
    stage: Stage,
    /// What the model said when the last search started.
    reference: Option<Reference>,
    /// The capacity at the X in use when a change was detected, before the costs were
    /// forgotten: the first move after profiling again feeds R forward from it.
    capacity_before: Option<f64>,
    /// Searches started.
    searches: u64,
    /// Each side's wait per visit the latency model predicts at the rate and split in use,
    /// updated every tick: each completion's latency is learned with the wait predicted
    /// for it, which its class's shape then leaves out. None while the model sees a side
    /// past its capacity: completions then measure a backlog, not their class's shape, and
    /// are left out of it (a profile ramping R past the capacity of its even split read a
    /// 5 ms spread into a class whose runs take 0.4 ms).
    waits: Option<Waits>,
}

impl Balance {
    /// A policy starting at `now`.
    pub fn new(cfg: BalanceConfig, now: Nanos) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let mut costs = MixProfile::new(cfg.slicing, cfg.capacity.app_ns_per_byte());
        costs.set_tail_samples_min(if cfg.parts.latency { TAIL_SAMPLES_MIN } else { 0 });
        Ok(Balance {
            arbiter: Arbiter::new(PROFILE_X, cfg.seed)?,
            rate: RateLoop::new(cfg.rate.clone(), now)?,
            costs,
            waits: None,
            split: Vec::new(),
            placed: Vec::new(),
            seen: Vec::new(),
            stage: Stage::Profiling,
            reference: None,
            capacity_before: None,
            searches: 0,
            cfg,
        })
    }

    fn model(&self) -> LoadModel<'_> {
        LoadModel {
            staffing: self.cfg.parts.staffing,
            ..LoadModel::new(&self.costs, self.cfg.capacity)
        }
    }

    /// The split the policy predicts is best: the latency model's, or where it sees no
    /// split meeting the SLO (or is switched off), the load model's balance.
    fn predict(&self) -> Option<f64> {
        let latency = self.cfg.parts.latency.then(|| {
            LatencyModel::new(
                &self.costs,
                self.cfg.capacity,
                self.cfg.rate.slo_latency_ns,
                self.cfg.rate.quantile,
            )
            .best_x()
        });
        match latency.flatten() {
            Some((x, _)) => Some(x),
            None => self.model().balanced_x(0.0, 1.0),
        }
    }

    /// The highest rate the profile runs at: [`PROFILE_LOAD`] of the capacity of its split,
    /// from the costs known so far (none before any).
    fn profile_rate_max(&self) -> Option<f64> {
        let model = LatencyModel::new(
            &self.costs,
            self.cfg.capacity,
            self.cfg.rate.slo_latency_ns,
            self.cfg.rate.quantile,
        );
        let waits = model.waits_at(&self.split_in_use(), 1.0)?;
        let load_per_rate = waits.app_rho.max(waits.storage_rho);
        (load_per_rate > 0.0).then(|| PROFILE_LOAD / load_per_rate)
    }

    /// The share of requests under which a function is rare: the SLO quantile's allowance
    /// (1 % under a p99). A rare function cannot set the tail even if all its requests are
    /// slow, so the decision neither waits for its samples nor starts again when they come
    /// (a library's loader called ten times held every FCALL at the profile for whole runs).
    fn rare_share(&self) -> f64 {
        1.0 - self.cfg.rate.quantile
    }

    /// Whether a function that is not rare still lacks its samples.
    fn unready_but_not_rare(&self) -> bool {
        let rare = self.rare_share();
        let shares = self.costs.shares();
        (0..shares.len()).any(|i| shares[i] >= rare && !self.costs.ready(i))
    }

    /// The split in use: the held one, or the profile's.
    fn split_in_use(&self) -> Vec<f64> {
        if self.split.is_empty() || matches!(self.stage, Stage::Profiling) {
            vec![self.arbiter.x(); self.costs.functions()]
        } else {
            self.split.clone()
        }
    }

    /// The capacity the model predicts for the split in use.
    fn capacity_held(&self, model: &LoadModel<'_>) -> Option<f64> {
        if self.split.is_empty() {
            model.capacity_ops(self.arbiter.x())
        } else {
            model.capacity_at(&self.split)
        }
    }

    /// Moves X to `x` and holds the split it names, feeding R forward by the ratio of the
    /// predicted capacities.
    fn move_to(&mut self, now: Nanos, x: f64) {
        let from = self.arbiter.x();
        let model = self.model();
        let before = self.capacity_before.or_else(|| self.capacity_held(&model));
        let split = model.costs.split_at(x);
        // Staying at the profiling X still moves from the profile's even split to the
        // split X names on a mix.
        if (x - from).abs() < 1e-12 && self.capacity_before.is_none() && split == self.split {
            return;
        }
        let after = model.capacity_at(&split);
        let factor = match (before, after) {
            (Some(a), Some(b)) if a > 0.0 && self.cfg.parts.feed_forward => b / a,
            _ => 1.0,
        };
        // A rate seen missing the SLO is a point of the old split's latency curve, moved to
        // the new one by the capacities' ratio; but where the latency model says the old
        // split could not meet the SLO at any rate, that miss says little of the new curve,
        // and the known miss is raised to the model's rate at the SLO for the new split (a
        // profile whose local half set the tail missed at a tenth of what all remote
        // serves, and the moved miss held R there for seconds).
        let old_hopeless = self.slo_rate(&self.split_in_use()) == Some(0.0);
        let predicted_miss = self
            .slo_rate(&split)
            .filter(|&r| r > 0.0 && old_hopeless && self.cfg.parts.feed_forward);
        if after.is_some() {
            self.capacity_before = None;
        }
        self.split = split;
        self.placed = self.costs.slices().iter().map(|s| s.known).collect();
        self.seen = self.costs.shares().iter().map(|&share| share > 0.0).collect();
        self.rate.rescale(now, factor);
        if let Some(miss) = predicted_miss {
            self.rate.predict_miss(miss);
        }
        self.arbiter.set_x(x);
    }

    /// The latency model's rate at the SLO for `split`, where it predicts one.
    fn slo_rate(&self, split: &[f64]) -> Option<f64> {
        if !self.cfg.parts.latency {
            return None;
        }
        LatencyModel::new(
            &self.costs,
            self.cfg.capacity,
            self.cfg.rate.slo_latency_ns,
            self.cfg.rate.quantile,
        )
        .slo_rate_at(split)
    }

    /// Starts a search around the model's prediction.
    fn search(&mut self, now: Nanos, predicted: f64) {
        self.searches += 1;
        let w = self.cfg.bracket_half_width;
        let search = BracketSearch::new(
            predicted,
            predicted - w,
            predicted + w,
            (0.0, 1.0),
            self.cfg.segments,
            self.cfg.resolution,
        );
        self.reference = Reference::take(&self.model());
        self.move_to(now, search.point());
        self.stage = if self.cfg.parts.search {
            Stage::Searching {
                search,
                decisions: 0,
                roots: 0.0,
            }
        } else {
            Stage::Holding
        };
    }

    /// Moves the policy on after an R-loop tick.
    fn advance(&mut self, now: Nanos, report: RateReport) {
        match &mut self.stage {
            Stage::Profiling => {
                // Every function that could set the tail has its samples, or the profile
                // goes on: deciding without one only to profile again when it has them
                // ships a mix's data at the profile's split twice.
                if self.unready_but_not_rare() {
                    return;
                }
                if let Some(predicted) = self.predict() {
                    self.search(now, self.cfg.search_start.unwrap_or(predicted));
                }
            }
            Stage::Holding => {
                if report.decision.is_none() {
                    return;
                }
                // `self.model()` built from fields: it borrows only the costs, so the
                // reference below can be borrowed mutably beside it.
                let model = LoadModel {
                    staffing: self.cfg.parts.staffing,
                    ..LoadModel::new(&self.costs, self.cfg.capacity)
                };
                // A function the split never saw is a new mix by definition (Pyxis §V resets
                // on a new set of tasks), and so is one that was left out of the decision
                // for want of samples and has them now, unless it is rare; the regret cannot
                // see either, having no costs to weigh them by.
                let shares = self.costs.shares();
                let rare = self.rare_share();
                let flag = |v: &[bool], i: usize| v.get(i).copied().unwrap_or(false);
                let unplaced = (0..shares.len()).any(|i| {
                    shares[i] > 0.0
                        && (!flag(&self.seen, i)
                            || (shares[i] >= rare && self.costs.ready(i) && !flag(&self.placed, i)))
                });
                if unplaced || self.reference.as_mut().is_some_and(|r| r.changed(&model)) {
                    self.capacity_before = self.capacity_held(&self.model());
                    self.costs.reset();
                    self.rate.new_workload(now);
                    self.move_to(now, PROFILE_X);
                    self.stage = Stage::Profiling;
                }
            }
            Stage::Searching {
                search,
                decisions,
                roots,
            } => {
                let Some(decision) = report.decision else {
                    return;
                };
                *decisions += 1;
                if *decisions <= self.cfg.settle_decisions {
                    return;
                }
                *roots += decision.root_ops;
                if *decisions < self.cfg.settle_decisions + self.cfg.measure_decisions {
                    return;
                }
                search.report(*roots / self.cfg.measure_decisions as f64);
                let (next, done) = (search.point(), search.result().is_some());
                *decisions = 0;
                *roots = 0.0;
                if done {
                    self.stage = Stage::Holding;
                }
                self.move_to(now, next);
            }
        }
    }
}

impl Policy for Balance {
    fn name(&self) -> String {
        self.cfg.name.into()
    }
    /// The costs stand when only the app side's size changed: a held split moves straight
    /// to the model's balance for the new capacity, R fed forward by the capacities before
    /// and after (no re-profile, which the regret would otherwise ask for).
    fn set_app_cores(&mut self, now: Nanos, app_cores: f64) {
        if !(app_cores.is_finite() && app_cores > 0.0) || app_cores == self.cfg.capacity.app_cores {
            return;
        }
        let before = self.capacity_held(&self.model());
        self.cfg.capacity.app_cores = app_cores;
        self.costs.set_app_ns_per_byte(self.cfg.capacity.app_ns_per_byte());
        if matches!(self.stage, Stage::Holding) {
            if let Some(x) = self.predict() {
                self.capacity_before = before;
                self.reference = Reference::take(&self.model());
                self.move_to(now, x);
            }
        }
    }
    fn place(&mut self, _now: Nanos, fn_id: FnId) -> Placement {
        self.costs.arrive(fn_id);
        match (&self.stage, self.split.get(fn_id.0 as usize)) {
            (Stage::Profiling, _) => self.arbiter.place(),
            // A function the held split does not know yet gathers its samples both ways.
            (_, None) => self.arbiter.draw(UNREADY_X),
            (_, Some(&x)) => self.arbiter.draw(x),
        }
    }
    fn on_completion(&mut self, now: Nanos, completion: &Completion) {
        self.rate.on_completion(now, completion.latency_ns);
        let seen = match (self.cfg.parts.latency, self.waits) {
            (true, Some(w)) => Some(w.predicted(completion.placement, f64::from(completion.costs.round_trips))),
            (true, None) => None,
            (false, _) => Some(Predicted::NONE),
        };
        self.costs.learn(completion, seen);
    }
    fn tick(&mut self, now: Nanos) {
        if now < self.rate.next_tick() {
            return;
        }
        let capacity_ops = match self.stage {
            Stage::Profiling if self.cfg.parts.latency => self.profile_rate_max(),
            _ => self.capacity_held(&self.model()),
        };
        let input = RateInput {
            capacity_ops,
            budget_paused: matches!(self.stage, Stage::Searching { .. }),
        };
        let report = self.rate.tick(now, input);
        self.advance(now, report);
        if self.cfg.parts.latency {
            let model = LatencyModel::new(
                &self.costs,
                self.cfg.capacity,
                self.cfg.rate.slo_latency_ns,
                self.cfg.rate.quantile,
            );
            self.waits = model
                .waits_at(&self.split_in_use(), self.rate.rate_ops())
                .filter(|w| w.app_ns.is_finite() && w.storage_ns.is_finite() && w.link_ns.is_finite());
        }
    }
    fn next_tick(&self) -> Nanos {
        self.rate.next_tick()
    }
    fn rate_ops(&self) -> f64 {
        self.rate.rate_ops()
    }
    fn state(&self) -> PolicyState {
        PolicyState {
            rate_ops: self.rate.rate_ops(),
            rpc_fraction: match self.stage {
                Stage::Profiling => self.arbiter.x(),
                _ if self.split.is_empty() => self.arbiter.x(),
                _ => self.costs.remote_share_at(&self.split),
            },
            latency_ns_estimate: self.rate.latency_ns_estimate(),
            searches: Some(self.searches),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::costs::CostProfile;
    use crate::policy::Costs;

    const CORES: Capacity = Capacity {
        app_cores: 8.0,
        storage_cores: 8.0,
        links: None,
    };

    /// The policy placing by the load model alone: these tests are about how it profiles,
    /// holds and moves, which the latency model (tested below) does not change.
    fn load_only() -> BalanceConfig {
        let mut cfg = BalanceConfig::new(200_000.0, CORES, 1);
        cfg.parts.latency = false;
        cfg
    }

    /// Drives `policy` for `periods` of 5 ms at 200 requests each, every request costing
    /// what `costs(placement)` says and taking `latency_ns`.
    fn drive(policy: &mut Balance, from: u64, periods: u64, costs: impl Fn(Placement) -> (u64, u64), latency_ns: u64) {
        drive_mix(policy, from, periods, 1, |_, p| costs(p), latency_ns);
    }

    /// [`drive`] for a mix of `functions` functions taking turns, function f's request
    /// costing `costs(f, placement)`.
    fn drive_mix(
        policy: &mut Balance,
        from: u64,
        periods: u64,
        functions: u64,
        costs: impl Fn(FnId, Placement) -> (u64, u64),
        latency_ns: u64,
    ) {
        for k in from..from + periods {
            let now = Nanos::from_ms(5 * k);
            for i in 0..200u64 {
                let at = Nanos(now.0.saturating_sub(4_000_000) + i * 10_000);
                let fn_id = FnId((i % functions) as u32);
                let placement = policy.place(at, fn_id);
                let (app, storage) = costs(fn_id, placement);
                policy.on_completion(
                    at,
                    &Completion::of(fn_id, placement, latency_ns + i % 7 * 1_000, app, storage),
                );
            }
            policy.tick(now);
        }
    }

    /// Medium work (Kayak §2) on the simulator's costs: local 3.1 µs app and 2.2 µs
    /// storage, remote 0.6 µs app and 4.3 µs storage.
    fn medium(p: Placement) -> (u64, u64) {
        match p {
            Placement::Local => (3_100, 2_200),
            Placement::Remote => (600, 4_300),
        }
    }

    /// Light work: remote is cheaper on both sides.
    fn light(p: Placement) -> (u64, u64) {
        match p {
            Placement::Local => (1_300, 2_200),
            Placement::Remote => (600, 2_050),
        }
    }

    /// A cost profile that has learned `costs` for both placements.
    fn profile(costs: impl Fn(Placement) -> (u64, u64)) -> CostProfile {
        let mut profile = CostProfile::default();
        for placement in [Placement::Local, Placement::Remote] {
            let (app, storage) = costs(placement);
            for _ in 0..100 {
                profile.learn(&Completion::of(FnId(0), placement, 1, app, storage));
            }
        }
        profile
    }

    fn predicted(costs: impl Fn(Placement) -> (u64, u64)) -> f64 {
        let profile = profile(costs);
        LoadModel::new(&profile, CORES).balanced_x(0.0, 1.0).unwrap()
    }

    #[test]
    fn profiles_at_half_then_places_where_the_model_balances_the_sides() {
        let mut p = Balance::new(load_only(), Nanos::ZERO).unwrap();
        assert_eq!(p.state().rpc_fraction, PROFILE_X);
        drive(&mut p, 1, 20, medium, 50_000);
        let x = p.state().rpc_fraction;
        assert!((x - predicted(medium)).abs() < 1e-9, "{x}");
        assert!(x > 0.1 && x < 0.5, "medium balances inside: {x}");
        assert_eq!(p.state().searches, Some(1));
    }

    #[test]
    fn a_new_workload_is_profiled_again_but_noisy_latency_is_no_change() {
        let mut p = Balance::new(load_only(), Nanos::ZERO).unwrap();
        drive(&mut p, 1, 40, medium, 50_000);
        // Latency alone swinging (a stall) changes nothing.
        drive(&mut p, 41, 40, medium, 190_000);
        assert_eq!(p.state().searches, Some(1));
        // Light work: the costs move, the policy profiles again and goes all remote.
        drive(&mut p, 81, 40, light, 50_000);
        assert_eq!(p.state().searches, Some(2));
        assert_eq!(p.state().rpc_fraction, 1.0);
        // And back: local costs of medium are measured afresh, not remembered from light.
        drive(&mut p, 121, 40, medium, 50_000);
        assert_eq!(p.state().searches, Some(3));
        assert!((p.state().rpc_fraction - predicted(medium)).abs() < 1e-9);
    }

    #[test]
    fn with_the_search_x_is_refined_around_the_prediction_and_then_holds() {
        let mut cfg = load_only();
        cfg.parts.search = true;
        let mut p = Balance::new(cfg, Nanos::ZERO).unwrap();
        drive(&mut p, 1, 400, medium, 50_000);
        let x = p.state().rpc_fraction;
        let start = predicted(medium);
        assert!((x - start).abs() <= BRACKET_HALF_WIDTH_DEFAULT + 1e-9, "{x} vs {start}");
        assert!(matches!(p.stage, Stage::Holding), "the search ended");
        assert_eq!(p.state().searches, Some(1));
    }

    #[test]
    fn a_move_of_x_feeds_r_forward_by_the_predicted_capacities() {
        // Profiling ends with X moving from 0.5 to the prediction; R follows the ratio of
        // the capacities the model predicts at the two (and stays put without the part).
        let rate_after_profiling = |feed_forward: bool| {
            let mut cfg = load_only();
            cfg.parts.feed_forward = feed_forward;
            let mut p = Balance::new(cfg, Nanos::ZERO).unwrap();
            let mut before = p.rate_ops();
            for k in 1..40 {
                before = p.rate_ops();
                drive(&mut p, k, 1, medium, 50_000);
                if (p.state().rpc_fraction - PROFILE_X).abs() > 1e-9 {
                    break;
                }
            }
            (before, p.rate_ops(), p.state().rpc_fraction)
        };
        let (before, after, x) = rate_after_profiling(true);
        let model_costs = profile(medium);
        let model = LoadModel::new(&model_costs, CORES);
        let ratio = model.capacity_ops(x).unwrap() / model.capacity_ops(PROFILE_X).unwrap();
        assert!(ratio > 1.1, "medium is worth moving for: {ratio}");
        // The same run without the part takes the same R-loop decisions up to the move.
        let (before_without, after_without, _) = rate_after_profiling(false);
        assert_eq!(before, before_without);
        assert!(
            (after / after_without / ratio - 1.0).abs() < 0.01,
            "{after} vs {after_without}, ratio {ratio}"
        );
    }

    /// Pyxis' polarized pair: an I/O task remote is cheaper on both sides; a compute task
    /// remote moves 19.5 µs of CPU to the storage side.
    fn polarized(f: FnId, p: Placement) -> (u64, u64) {
        match (f.0, p) {
            (0, Placement::Local) => (3_000, 2_000),
            (0, Placement::Remote) => (600, 1_500),
            (_, Placement::Local) => (20_000, 500),
            (_, Placement::Remote) => (600, 20_000),
        }
    }

    #[test]
    fn a_mix_sends_whole_functions_remote_in_the_order_of_their_costs() {
        let mut p = Balance::new(load_only(), Nanos::ZERO).unwrap();
        drive_mix(&mut p, 0, 40, 2, polarized, 100_000);
        // Equal shares: α = 0.5 sends the I/O task, and the load balances where the compute
        // task's share x solves 10 300 − 9 700 x = 1 000 + 9 750 x (x ≈ 0.48, α ≈ 0.74).
        let alpha = p.state().rpc_fraction;
        assert!((alpha - 0.739).abs() < 0.02, "{alpha}");
        let remote = |p: &mut Balance, f: u32| {
            (0..2_000)
                .filter(|_| p.place(Nanos::from_ms(200), FnId(f)) == Placement::Remote)
                .count() as f64
                / 2_000.0
        };
        assert_eq!(remote(&mut p, 0), 1.0);
        let compute = remote(&mut p, 1);
        assert!((compute - 0.478).abs() < 0.05, "{compute}");
    }

    /// Drives a mix where each function's latency depends on where it runs.
    fn drive_latency(
        policy: &mut Balance,
        from: u64,
        periods: u64,
        functions: u64,
        costs: impl Fn(FnId, Placement) -> (u64, u64),
        latency_ns: impl Fn(FnId, Placement) -> u64,
        calls: impl Fn(u64, u64, FnId) -> bool,
    ) {
        for k in from..from + periods {
            let now = Nanos::from_ms(5 * k);
            for i in 0..200u64 {
                let at = Nanos(now.0.saturating_sub(4_000_000) + i * 10_000);
                let fn_id = FnId((i % functions) as u32);
                if !calls(k, i, fn_id) {
                    continue;
                }
                let placement = policy.place(at, fn_id);
                let (app, storage) = costs(fn_id, placement);
                policy.on_completion(
                    at,
                    &Completion {
                        fn_id,
                        placement,
                        latency_ns: latency_ns(fn_id, placement) + i % 7 * 2_000,
                        costs: Costs {
                            app_cpu_ns: app,
                            storage_cpu_ns: storage,
                            bytes_moved: 0,
                            round_trips: if placement == Placement::Local { 8 } else { 1 },
                        },
                        pushed_back: false,
                    },
                );
            }
            policy.tick(now);
        }
    }

    #[test]
    fn where_local_runs_sit_near_the_slo_everything_runs_remote() {
        // Medium's costs, but local runs take eight round trips and 100 µs against remote's
        // 20 µs under a 117 µs p99: the load model shares the work; any local share above
        // 1 % would set the tail.
        let slow_local = |_: FnId, p: Placement| match p {
            Placement::Local => 100_000,
            Placement::Remote => 20_000,
        };
        let all = |_: u64, _: u64, _: FnId| true;
        let mut p = Balance::new(BalanceConfig::new(117_000.0, CORES, 1), Nanos::ZERO).unwrap();
        drive_latency(&mut p, 1, 20, 1, |_, pl| medium(pl), slow_local, all);
        assert_eq!(p.state().rpc_fraction, 1.0);
        let mut cfg = BalanceConfig::new(117_000.0, CORES, 1);
        cfg.parts.latency = false;
        let mut without = Balance::new(cfg, Nanos::ZERO).unwrap();
        drive_latency(&mut without, 1, 20, 1, |_, pl| medium(pl), slow_local, all);
        assert!(without.state().rpc_fraction < 0.5, "{}", without.state().rpc_fraction);
    }

    #[test]
    fn a_function_called_a_few_times_does_not_hold_the_others_at_the_profile() {
        // Regression: FCALL through the gateway stayed at the profiling split for whole
        // runs because a library's loader ran ten times and never again, and the mix waited
        // for its costs. Function 1 runs ten times, in the first period only.
        let once = |k: u64, i: u64, f: FnId| f.0 == 0 || (k == 1 && i < 20);
        let same = |_: FnId, p: Placement| match p {
            Placement::Local => 60_000,
            Placement::Remote => 30_000,
        };
        let mut p = Balance::new(BalanceConfig::new(200_000.0, CORES, 1), Nanos::ZERO).unwrap();
        drive_latency(&mut p, 1, 60, 2, |_, pl| medium(pl), same, once);
        assert!(!matches!(p.stage, Stage::Profiling), "left the profile");
        assert_eq!(
            p.state().searches,
            Some(1),
            "and was not re-profiled by the rare function"
        );
        // The rare function is placed half each way, the other by the model.
        assert!(p.costs.ready(0) && !p.costs.ready(1));
        assert_eq!(p.split[1], UNREADY_X);
        assert!(
            (p.state().rpc_fraction - PROFILE_X).abs() > 0.01,
            "{}",
            p.state().rpc_fraction
        );
    }

    #[test]
    fn bad_config_is_rejected() {
        let mut cfg = BalanceConfig::new(200_000.0, CORES, 1);
        cfg.capacity.app_cores = 0.0;
        assert!(Balance::new(cfg, Nanos::ZERO).is_err());
        assert!(Parts::without(&["nonsense".to_string()]).is_err());
        assert!(!Parts::without(&["staffing".to_string()]).unwrap().staffing);
        assert!(!Parts::without(&["latency".to_string()]).unwrap().latency);
    }
}
