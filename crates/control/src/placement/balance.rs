//! `balance`: ferry's placement, X from each side's measured CPU (Pyxis §IV-A's load
//! model on costs scaled to what the CPUs really spend), under the R loop every policy
//! shares.
//!
//! 1. **Profile.** Requests go half each way ([`PROFILE_X`], Pyxis §V) until every
//!    function that could set the tail has both placements' costs, the R loop has found
//!    a capacity to cruise under (the sides' CPU is measured near it, not on a ramp, where
//!    waking idle CPUs costs more than the work), and, where the driver measures the sides'
//!    CPU, a span of it has passed since (at most [`PROFILE_MAX`] in all).
//! 2. **Predict.** X jumps to the load model's balance on the capture-scaled costs, within
//!    [`x_step::bounds`], and R is fed forward by the capacities' ratio.
//! 3. **Step.** Every [`X_PERIOD`] a placement that cannot meet the SLO at any load
//!    ([`super::class_tail`]: many dependent round trips, large objects) is left the
//!    minority share; otherwise X steps toward balancing the sides' measured utilisation
//!    ([`super::x_step`]) where the CPUs and the model agree on the way, and stays where
//!    they do not. Each move feeds R forward by the model's ratio of capacities. The R loop is never reset: its remembered capacity moves with the predicted ratio and its
//!    windows correct the rest. A steady workload is never profiled again; a function the
//!    split has not placed (a new one, or one that got its samples) is placed at the same
//!    X, and everything learned stays.

use crate::error::{check_range, ControlError};
use crate::placement::class_tail::ClassTails;
use crate::placement::load_model::Capacity;
use crate::placement::mix::Slicing;
use crate::placement::placing::Placing;
use crate::placement::x_step::{self, Utilisation, X_PERIOD};
use crate::policy::{Busy, Completion, FnId, Placement, Policy, PolicyState};
use crate::rate::{RateLoop, RateLoopConfig};
use crate::time::Nanos;

/// The split while profiling: Pyxis' 50 %.
pub const PROFILE_X: f64 = 0.5;

/// Longest the profile lasts: the R loop's startup takes a few hundred milliseconds, a
/// CPU span a fifth of a second; a driver that measures no CPU, or a loop that cannot
/// settle, is not waited for longer.
pub const PROFILE_MAX: Nanos = Nanos::from_ms(1_500);

/// The policy's own parts that `without=` switches off.
pub const PART_NAMES: &str = "capture, feed-forward";

/// Which of the policy's own parts run; the R loop's are in its configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parts {
    /// Scale each side's costs by its capture ratio (without: the costs as measured).
    pub capture: bool,
    /// Move the R loop's rate and memory by the predicted capacities' ratio when X moves
    /// (without: the R loop starts afresh at each move, as a re-profile did).
    pub feed_forward: bool,
}

impl Default for Parts {
    fn default() -> Self {
        Parts {
            capture: true,
            feed_forward: true,
        }
    }
}

impl Parts {
    /// The default parts but those named in `names` (the R loop's part names are skipped).
    pub fn without(names: &[String]) -> Result<Parts, ControlError> {
        let mut p = Parts::default();
        for name in names {
            match name.as_str() {
                "capture" => p.capture = false,
                "feed-forward" => p.feed_forward = false,
                other if crate::rate::PART_NAMES.split(", ").any(|g| g == other) => {}
                other => {
                    return Err(ControlError::Unknown {
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
    /// Which of the policy's own parts run.
    pub parts: Parts,
    /// How the turning point is cut into the functions' slices.
    pub slicing: Slicing,
    /// Seed of the arbiter's draws.
    pub seed: u64,
}

impl BalanceConfig {
    /// Defaults for an SLO of `slo_latency_ns` on a deployment with `capacity`.
    pub fn new(slo_latency_ns: f64, capacity: Capacity, seed: u64) -> Self {
        BalanceConfig {
            rate: RateLoopConfig::new(slo_latency_ns),
            capacity,
            parts: Parts::default(),
            slicing: Slicing::default(),
            seed,
        }
    }

    /// Rejects values the policy is not defined for.
    pub fn validate(&self) -> Result<(), ControlError> {
        self.rate.validate()?;
        check_range("app cores", "[0.001, 1e6]", self.capacity.app_cores, 1e-3, 1e6)?;
        check_range("storage cores", "[0.001, 1e6]", self.capacity.storage_cores, 1e-3, 1e6)?;
        Ok(())
    }
}

/// Where the policy is.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Stage {
    /// At [`PROFILE_X`]; the R loop cruises since `cruising`, and `spans` CPU spans were
    /// measured since.
    Profiling { cruising: Option<Nanos>, spans: u32 },
    /// Holding a split; X steps next at `next_step`.
    Placing { next_step: Nanos },
}

/// Busy CPU summed over the spans since the last step.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct BusySum {
    span_ns: u64,
    app_ns: Option<u64>,
    storage_ns: Option<u64>,
}

impl BusySum {
    fn add(&mut self, busy: &Busy) {
        self.span_ns += busy.span_ns;
        let add = |sum: Option<u64>, v: Option<u64>| v.map(|v| sum.unwrap_or(0) + v);
        self.app_ns = add(self.app_ns, busy.app_ns);
        self.storage_ns = add(self.storage_ns, busy.storage_ns);
    }

    /// Each side's busy share of its cores, if both were measured.
    fn utilisation(&self, capacity: Capacity) -> Option<Utilisation> {
        let span = self.span_ns as f64;
        if span <= 0.0 {
            return None;
        }
        Some(Utilisation {
            app: self.app_ns? as f64 / (span * capacity.app_cores),
            storage: self.storage_ns? as f64 / (span * capacity.storage_cores),
        })
    }
}

/// The policy (see the module docs).
pub struct Balance {
    cfg: BalanceConfig,
    placing: Placing,
    rate: RateLoop,
    stage: Stage,
    busy: BusySum,
    /// Placements taken from the model (1 after profiling; never more on a steady workload).
    searches: u64,
    /// When the policy started.
    started: Nanos,
    /// The driver reports the sides' CPU.
    metered: bool,
    /// Each placement's tail, to tell one that cannot meet the SLO.
    tails: ClassTails,
    /// The R loop judged a window over the SLO since the last X period ended.
    missed: bool,
}

impl Balance {
    /// A policy starting at `now`.
    pub fn new(cfg: BalanceConfig, now: Nanos) -> Result<Self, ControlError> {
        cfg.validate()?;
        Ok(Balance {
            placing: Placing::new(PROFILE_X, cfg.slicing, cfg.capacity, cfg.parts.capture, cfg.seed)?,
            rate: RateLoop::new(cfg.rate.clone(), now)?,
            stage: Stage::Profiling {
                cruising: None,
                spans: 0,
            },
            busy: BusySum::default(),
            searches: 0,
            started: now,
            metered: false,
            tails: ClassTails::new(cfg.rate.slo_latency_ns, cfg.rate.quantile),
            missed: false,
            cfg,
        })
    }

    /// The share of requests under which a function is rare: the SLO quantile's allowance
    /// (1 % under a p99). A rare function cannot set the tail even if all its requests are
    /// slow, so the profile does not wait for its samples.
    fn rare_share(&self) -> f64 {
        1.0 - self.cfg.rate.quantile
    }

    /// The model's balanced X, within the bounds that keep both placements measured.
    fn predicted_x(&self) -> Option<f64> {
        let (lo, hi) = x_step::bounds(self.cfg.rate.quantile);
        self.placing.model().balanced_x(lo, hi)
    }

    /// The bound X is held at while one placement cannot meet the SLO at any load.
    fn hopeless_x(&self) -> Option<f64> {
        let (lo, hi) = x_step::bounds(self.cfg.rate.quantile);
        match self.tails.hopeless()? {
            Placement::Local => Some(hi),
            Placement::Remote => Some(lo),
        }
    }

    /// Holds the split `x` names and moves the R loop with it.
    fn move_to(&mut self, now: Nanos, x: f64) {
        let factor = self.placing.move_to(x);
        if self.cfg.parts.feed_forward {
            self.rate.rescale(now, factor);
        } else if let Ok(fresh) = RateLoop::new(self.cfg.rate.clone(), now) {
            // The ablation: a move forgets what the loop learned, as a re-profile did.
            self.rate = fresh;
        }
    }

    /// Moves the policy on after an R-loop tick.
    fn advance(&mut self, now: Nanos) {
        match self.stage {
            Stage::Profiling { cruising, spans } => {
                let cruising = cruising.or(self.rate.cruising().then_some(now));
                self.stage = Stage::Profiling { cruising, spans };
                let settled = cruising.is_some() && (spans >= 1 || !self.metered);
                // A placement hopeless already in the profile's completions ends it: the R
                // loop cannot cruise while it sets the tail (and one that cruises has none).
                let hopeless = self.tails.hopeless_now().filter(|_| cruising.is_none());
                let ready = self.placing.profiled(self.rare_share()) && (settled || hopeless.is_some());
                if !ready && now.saturating_sub(self.started) < PROFILE_MAX {
                    return;
                }
                if let Some(p) = hopeless {
                    self.tails.hold(p);
                }
                self.tails.end_period(std::mem::take(&mut self.missed));
                let x = self.hopeless_x().or_else(|| self.predicted_x()).unwrap_or(PROFILE_X);
                self.searches += 1;
                self.move_to(now, x);
                self.busy = BusySum::default();
                self.stage = Stage::Placing {
                    next_step: now.saturating_add(X_PERIOD),
                };
            }
            Stage::Placing { next_step } => {
                if self.placing.mix_changed() {
                    // The costs of each function stand; the mix they weigh moved: the model
                    // places it again, no profile.
                    let x = self.placing.x();
                    let next = self.hopeless_x().or_else(|| self.predicted_x()).unwrap_or(x);
                    self.move_to(now, next);
                }
                if now < next_step {
                    return;
                }
                let x = self.placing.x();
                let utilisation = self.busy.utilisation(self.placing.capacity());
                let bounds = x_step::bounds(self.cfg.rate.quantile);
                self.tails.end_period(std::mem::take(&mut self.missed));
                let next = match self.hopeless_x() {
                    Some(bound) => bound,
                    None => utilisation
                        .and_then(|u| x_step::step(x, self.predicted_x(), u, bounds))
                        .unwrap_or(x),
                };
                if (next - x).abs() > 1e-12 {
                    self.move_to(now, next);
                }
                self.busy = BusySum::default();
                self.stage = Stage::Placing {
                    next_step: now.saturating_add(X_PERIOD),
                };
            }
        }
    }

    /// The capture ratios (app, storage), for reports and tests.
    pub fn capture_ratios(&self) -> (f64, f64) {
        self.placing.capture_ratios()
    }
}

impl Policy for Balance {
    fn name(&self) -> String {
        "balance".into()
    }
    /// The costs stand when only the app side's size changed: X moves at the next step,
    /// by the utilisations the new size gives.
    fn set_app_cores(&mut self, _now: Nanos, app_cores: f64) {
        self.placing.set_app_cores(app_cores);
    }
    fn place(&mut self, _now: Nanos, fn_id: FnId) -> Placement {
        self.placing.place(fn_id)
    }
    fn on_completion(&mut self, now: Nanos, completion: &Completion) {
        self.rate.on_completion(now, completion.latency_ns);
        self.placing.learn(completion);
        self.tails.learn(completion);
    }
    fn on_refused(&mut self, now: Nanos, _fn_id: FnId) {
        self.rate.on_refused(now);
    }
    fn on_busy(&mut self, _now: Nanos, busy: &Busy) {
        self.metered = true;
        self.placing.busy(busy);
        self.busy.add(busy);
        if let Stage::Profiling {
            cruising: Some(since),
            spans,
        } = self.stage
        {
            self.stage = Stage::Profiling {
                cruising: Some(since),
                spans: spans + 1,
            };
        }
    }
    fn tick(&mut self, now: Nanos) {
        if now < self.rate.next_tick() {
            return;
        }
        let report = self.rate.tick(now);
        if let Some(decision) = report.decision {
            self.missed |= !decision.met;
            self.tails.end_window(decision.met);
        }
        self.advance(now);
    }
    fn rate_loop(&self) -> Option<&RateLoop> {
        Some(&self.rate)
    }
    fn state(&self) -> PolicyState {
        PolicyState::of_rate_loop(&self.rate, self.placing.remote_share(), Some(self.searches))
    }
}

#[cfg(test)]
mod tests;
