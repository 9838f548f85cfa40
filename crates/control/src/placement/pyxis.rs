//! `pyxis`: Pyxis as published (§IV-C, §V), the baseline for mixes: profile at 50 %,
//! then Algorithm 1 ([`super::bracket`]) over the whole of [0, 1] from α0 with M
//! segments, α cut by equal slices (equation (14)) unless told otherwise, no model's
//! prediction to start from; then hold. Each point is measured by the goodput the R loop
//! reaches there: after [`SETTLE_DECISIONS`] decisions, the mean over the next
//! [`MEASURE_DECISIONS`] of what each delivered within the SLO (0 for a window over it).
//! R is fed forward by the load model's capacities when α moves, as `balance` does.

use crate::error::{check_range, ControlError};
use crate::placement::bracket::{BracketSearch, SEGMENTS_DEFAULT};
use crate::placement::load_model::Capacity;
use crate::placement::mix::Slicing;
use crate::placement::placing::Placing;
use crate::policy::{Busy, Completion, FnId, Placement, Policy, PolicyState};
use crate::rate::{RateLoop, RateLoopConfig, RateReport};
use crate::time::Nanos;

/// The split while profiling: Pyxis' 50 %.
pub const PROFILE_X: f64 = 0.5;

/// Bracket width at which the search ends (twice this): R(α) moves by a percent or two
/// per 0.03 of α near its peak, about what an averaged measurement resolves.
pub const RESOLUTION: f64 = 0.02;

/// Decisions after a move of α before its goodput is measured: the feed-forward puts R
/// near its new level, a decision or two closes the rest.
pub const SETTLE_DECISIONS: u32 = 3;

/// Decisions averaged per point: five windows average a window's luck down to a few
/// percent.
pub const MEASURE_DECISIONS: u32 = 5;

/// Where Algorithm 1 starts by default: the middle of [0, 1], where it profiles.
pub const ALPHA0_DEFAULT: f64 = 0.5;

/// What a Pyxis policy needs.
#[derive(Clone, Debug, PartialEq)]
pub struct PyxisConfig {
    /// The R loop.
    pub rate: RateLoopConfig,
    /// The cores of each side (for the feed-forward).
    pub capacity: Capacity,
    /// Where the search starts.
    pub alpha0: f64,
    /// Grid segments per bracket (Algorithm 1's M).
    pub segments: u32,
    /// How α is cut into the functions' slices.
    pub slicing: Slicing,
    /// Seed of the arbiter's draws.
    pub seed: u64,
}

impl PyxisConfig {
    /// Pyxis as published for an SLO of `slo_latency_ns`.
    pub fn new(slo_latency_ns: f64, capacity: Capacity, seed: u64) -> Self {
        PyxisConfig {
            rate: RateLoopConfig::new(slo_latency_ns),
            capacity,
            alpha0: ALPHA0_DEFAULT,
            segments: SEGMENTS_DEFAULT,
            slicing: Slicing::Equal,
            seed,
        }
    }
}

/// Where the policy is.
#[derive(Clone, Debug)]
enum Stage {
    Profiling,
    Searching {
        search: BracketSearch,
        decisions: u32,
        goodput: f64,
    },
    Holding,
}

/// The policy (see the module docs).
pub struct Pyxis {
    cfg: PyxisConfig,
    placing: Placing,
    rate: RateLoop,
    stage: Stage,
    searches: u64,
}

impl Pyxis {
    /// A policy starting at `now`.
    pub fn new(cfg: PyxisConfig, now: Nanos) -> Result<Self, ControlError> {
        cfg.rate.validate()?;
        check_range("search start", "[0, 1]", cfg.alpha0, 0.0, 1.0)?;
        check_range("segments", "[3, 100]", cfg.segments as f64, 3.0, 100.0)?;
        Ok(Pyxis {
            placing: Placing::new(PROFILE_X, cfg.slicing, cfg.capacity, false, cfg.seed)?,
            rate: RateLoop::new(cfg.rate.clone(), now)?,
            stage: Stage::Profiling,
            searches: 0,
            cfg,
        })
    }

    fn move_to(&mut self, now: Nanos, alpha: f64) {
        let factor = self.placing.move_to(alpha);
        self.rate.rescale(now, factor);
    }

    fn advance(&mut self, now: Nanos, report: RateReport) {
        match &mut self.stage {
            Stage::Profiling => {
                if !self.placing.profiled(1.0 - self.cfg.rate.quantile) {
                    return;
                }
                self.searches += 1;
                let search = BracketSearch::new(self.cfg.alpha0, 0.0, 1.0, (0.0, 1.0), self.cfg.segments, RESOLUTION);
                let start = search.point();
                self.stage = Stage::Searching {
                    search,
                    decisions: 0,
                    goodput: 0.0,
                };
                self.move_to(now, start);
            }
            Stage::Holding => {
                if self.placing.mix_changed() {
                    let alpha = self.placing.x();
                    self.move_to(now, alpha);
                }
            }
            Stage::Searching {
                search,
                decisions,
                goodput,
            } => {
                let Some(decision) = report.decision else {
                    return;
                };
                *decisions += 1;
                if *decisions <= SETTLE_DECISIONS {
                    return;
                }
                if decision.met {
                    *goodput += decision.delivered_ops;
                }
                if *decisions < SETTLE_DECISIONS + MEASURE_DECISIONS {
                    return;
                }
                search.report(*goodput / f64::from(MEASURE_DECISIONS));
                let (next, done) = (search.point(), search.result().is_some());
                *decisions = 0;
                *goodput = 0.0;
                if done {
                    self.stage = Stage::Holding;
                }
                self.move_to(now, next);
            }
        }
    }
}

impl Policy for Pyxis {
    fn name(&self) -> String {
        "pyxis".into()
    }
    fn set_app_cores(&mut self, _now: Nanos, app_cores: f64) {
        self.placing.set_app_cores(app_cores);
    }
    fn place(&mut self, _now: Nanos, fn_id: FnId) -> Placement {
        self.placing.place(fn_id)
    }
    fn on_completion(&mut self, now: Nanos, completion: &Completion) {
        self.rate.on_completion(now, completion.latency_ns);
        self.placing.learn(completion);
    }
    fn on_refused(&mut self, now: Nanos, _fn_id: FnId) {
        self.rate.on_refused(now);
    }
    fn on_busy(&mut self, _now: Nanos, busy: &Busy) {
        self.placing.busy(busy);
    }
    fn tick(&mut self, now: Nanos) {
        if now < self.rate.next_tick() {
            return;
        }
        let report = self.rate.tick(now);
        self.advance(now, report);
    }
    fn rate_loop(&self) -> Option<&RateLoop> {
        Some(&self.rate)
    }
    fn state(&self) -> PolicyState {
        PolicyState::of_rate_loop(&self.rate, self.placing.remote_share(), Some(self.searches))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_searches_and_holds() {
        let cores = Capacity::cores(8.0, 8.0);
        let mut p = Pyxis::new(PyxisConfig::new(200_000.0, cores, 1), Nanos::ZERO).unwrap();
        // Local 3.1 µs app, 2.2 µs storage; remote 0.6 and 4.3 (Kayak's medium work).
        for k in 1..=4_000u64 {
            let now = Nanos::from_ms(5 * k);
            for i in 0..200u64 {
                let at = Nanos(now.0 - 4_000_000 + i * 10_000);
                let placement = p.place(at, FnId(0));
                let (app, storage) = match placement {
                    Placement::Local => (3_100, 2_200),
                    Placement::Remote => (600, 4_300),
                };
                p.on_completion(at, &Completion::of(FnId(0), placement, 50_000, app, storage));
            }
            p.tick(now);
        }
        assert!(matches!(p.stage, Stage::Holding), "the search ended");
        assert_eq!(p.state().searches, Some(1));
        assert!(Pyxis::new(
            PyxisConfig {
                alpha0: 2.0,
                ..PyxisConfig::new(1.0, cores, 1)
            },
            Nanos::ZERO
        )
        .is_err());
    }
}
