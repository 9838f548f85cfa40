//! The R loop: the admission rate R and the window W on requests in flight that keep the
//! SLO's quantile within the SLO, for every policy, on the laws the field has proven under
//! noise (TCP BBR, Breakwater, Netflix concurrency-limits, Envoy adaptive concurrency).
//!
//! The law, written once in [`RateLoop::tick`]: each decision judges one window of
//! completions against the SLO, less a margin ([`LATENCY_TARGET`]). Capacity C is the highest rate a recent window delivered
//! within it ([`capacity`]); the loop cruises at γ·C and, once per gain cycle ([`cycle`]),
//! probes at C or above (whichever of C and the probe's gain over the cruise is higher) and
//! drains after. A window over the SLO cuts R in proportion to the
//! overshoot, never below half the cruise ([`cut`]), and a cruising window over it lowers
//! the margin γ once per episode ([`margin`]), which windows within the SLO raise back
//! slowly: the only slow state, and a bounded one. W = C·max(SLO/2, L₀) (Little's law: what the capacity completes in half the SLO)
//! bounds what a stall or an overshoot can queue, and a request whose wait for a slot would
//! outlast what the SLO leaves after the recent unloaded latency ([`baseline`]) is refused
//! ([`inflight`]). Before any capacity is known, startup
//! doubles R and bisects the first bracket ([`startup`]). Nothing is a debt: what the loop
//! learned of a window ages out of a filter, so a collapse that has passed costs one step.
//!
//! Parts, each in its own file with a test that fails without it, and each switchable off
//! for the ablation (`without=`): `window`, `capacity-filter`, `proportional-cut`,
//! `margin`.

pub mod baseline;
pub mod capacity;
pub mod cut;
pub mod cycle;
pub mod inflight;
pub mod margin;
pub mod startup;
pub mod window;

use crate::error::{check_range, ControlError};
use crate::time::Nanos;

use self::baseline::Baseline;
use self::capacity::CapacityFilter;
use self::cycle::GainCycle;
pub use self::inflight::Admission;
use self::margin::Margin;
use self::startup::{Startup, Step};
use self::window::{Window, WindowConfig};

/// Default R-loop period: 200 Hz, the paper's fast-loop frequency (§4.3). A decision is
/// made at the first tick at which its evidence is enough (see [`window`]); where that is
/// expected sooner, the loop ticks sooner, down to [`TICK_MIN`].
pub const RATE_PERIOD_DEFAULT: Nanos = Nanos::from_ms(5);

/// Shortest time between two ticks: at Mops rates a window fills in a fraction of a
/// millisecond, and a window past the knee is a burst as long as the wait for a tick.
pub const TICK_MIN: Nanos = Nanos::from_ms(1);

/// Default starting rate: low enough to be feasible on the slowest setup ferry targets
/// (the 1+1-core loopback machine does ~10⁴ ops/s), and ~9 doublings away from the
/// multi-Mops rates of an 8+8-core cluster.
pub const RATE_INIT_OPS_DEFAULT: f64 = 10_000.0;

/// Floor on R: below ~100 requests/s a decision waits for its evidence for seconds.
pub const RATE_MIN_OPS_DEFAULT: f64 = 100.0;

/// Ceiling on R: one request per nanosecond, far above anything a node can serve.
pub const RATE_MAX_OPS_DEFAULT: f64 = 1e9;

/// The share of the SLO's latency a window's quantile may reach and still meet it: a
/// window is judged against 0.8 × the SLO, and the fifth left is the margin for what the
/// windows do not see (the windows that fail, a stall between them, the luck of the span
/// the SLO is judged over). Judged against the SLO itself, a loop whose windows all met it
/// sat on the knee with a queue (`rpc` on medium: p50 1 ms, per-window p99s of 3–5 ms),
/// and one run in two ended a few percent over the SLO. Where the machine's tail at its
/// lightest recent load is already most of the SLO, the target is never below
/// [`UNLOADED_HEADROOM`] times that tail (and never above the SLO): a target no load can
/// reach would hold R at its floor (a remote run at 80 µs unloaded under a 97 µs SLO did).
pub const LATENCY_TARGET: f64 = 0.8;

/// How far above the lowest recent tail the target stays at least: room for the load to
/// add a tenth.
pub const UNLOADED_HEADROOM: f64 = 1.1;

/// A window within the SLO that delivered less than this share of the rate it was offered
/// was limited by its demand (fewer requests came than R admits), not by the machine
/// (BBR's "application-limited" samples): a machine short of its offered rate queues,
/// and its window fails. R is then not lowered to a margin under it, and startup ends:
/// doubling a rate no demand fills finds nothing. A tenth, well clear of the percent or
/// two a window's delivered rate wanders by (at 3 % the wander itself read as demand-bound
/// and R ratcheted up past the knee).
pub const DEMAND_LIMITED_SHARE: f64 = 0.9;

/// Windows over the SLO in a row after which the overload is no passing stall: what the
/// capacity filter remembers from the highest rate those windows delivered up is
/// disproved. A stall of a few hundred milliseconds fails a window or two (nothing is
/// delivered through it, and its backlog comes after); a capacity that really fell (a
/// heavier workload, a mix that flipped) fails every window, and a memory left to age for
/// three seconds held R at half a cruise the machine no longer had.
pub const EPISODE_DISPROOF: u32 = 4;

/// The parts `without=` switches off, for the ablation.
pub const PART_NAMES: &str = "window, capacity-filter, proportional-cut, margin";

/// Which parts of the loop run (all by default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parts {
    /// The window on requests in flight, with refusals (without: a rate alone).
    pub window: bool,
    /// The windowed max of delivered rates (without: the last met window's rate alone).
    pub capacity_filter: bool,
    /// The cut in proportion to the overshoot (without: halving, whatever the overshoot).
    pub proportional_cut: bool,
    /// γ learned from the windows (without: γ stays at its initial value).
    pub margin: bool,
}

impl Default for Parts {
    fn default() -> Self {
        Parts {
            window: true,
            capacity_filter: true,
            proportional_cut: true,
            margin: true,
        }
    }
}

impl Parts {
    /// Switches off the part called `name`.
    pub fn disable(&mut self, name: &str) -> Result<(), ControlError> {
        match name {
            "window" => self.window = false,
            "capacity-filter" => self.capacity_filter = false,
            "proportional-cut" => self.proportional_cut = false,
            "margin" => self.margin = false,
            _ => {
                return Err(ControlError::Unknown {
                    what: "R-loop part",
                    name: name.to_string(),
                    allowed: PART_NAMES,
                })
            }
        }
        Ok(())
    }
}

/// What the R loop aims for and how it runs.
#[derive(Clone, Debug, PartialEq)]
pub struct RateLoopConfig {
    /// The latency target (e.g. 5 ms for "p99 ≤ 5 ms").
    pub slo_latency_ns: f64,
    /// Which quantile the SLO constrains (0.99 for p99).
    pub quantile: f64,
    /// Time between two ticks (a decision needs enough evidence besides).
    pub period: Nanos,
    /// R before the first decision.
    pub rate_init_ops: f64,
    /// Floor on R.
    pub rate_min_ops: f64,
    /// Ceiling on R.
    pub rate_max_ops: f64,
    /// Which parts run.
    pub parts: Parts,
}

impl RateLoopConfig {
    /// Defaults for a p99 target of `slo_latency_ns`.
    pub fn new(slo_latency_ns: f64) -> Self {
        RateLoopConfig {
            slo_latency_ns,
            quantile: 0.99,
            period: RATE_PERIOD_DEFAULT,
            rate_init_ops: RATE_INIT_OPS_DEFAULT,
            rate_min_ops: RATE_MIN_OPS_DEFAULT,
            rate_max_ops: RATE_MAX_OPS_DEFAULT,
            parts: Parts::default(),
        }
    }

    /// Rejects values the loop is not defined for.
    pub fn validate(&self) -> Result<(), ControlError> {
        check_range("SLO latency", "(0, ∞) ns", self.slo_latency_ns, 1.0, f64::MAX)?;
        check_range("SLO quantile", "(0, 1)", self.quantile, 1e-9, 1.0 - 1e-9)?;
        check_range("R-loop period", "[1 µs, ∞)", self.period.0 as f64, 1e3, f64::MAX)?;
        check_range("minimum rate", "(0, 1e9] ops/s", self.rate_min_ops, 1e-9, 1e9)?;
        check_range(
            "maximum rate",
            "[minimum rate, 1e9] ops/s",
            self.rate_max_ops,
            self.rate_min_ops,
            1e9,
        )?;
        check_range(
            "initial rate",
            "[minimum rate, maximum rate]",
            self.rate_init_ops,
            self.rate_min_ops,
            self.rate_max_ops,
        )?;
        Ok(())
    }

    fn window(&self, target_ns: f64) -> WindowConfig {
        WindowConfig {
            slo_ns: target_ns,
            quantile: self.quantile,
            period: self.period,
        }
    }
}

/// What one decision saw, for an outer loop and for reports.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Decision {
    /// The rate the evidence was gathered at.
    pub rate_ops: f64,
    /// The SLO quantile of the evidence, ns.
    pub tail_ns: f64,
    /// Whether it met the SLO with the margin (see [`LATENCY_TARGET`]).
    pub met: bool,
    /// Completions per second over the evidence's span (fresh and stale).
    pub delivered_ops: f64,
    /// Completions it rested on.
    pub count: u64,
    /// The rate the loop cruises at after it (γ × the remembered capacity; during startup
    /// the rate it tries next): where R is heading at this X, without the cycle's probes.
    pub heading_ops: f64,
}

/// What a tick tells an outer loop.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateReport {
    /// The rate to admit at from now.
    pub rate_ops: f64,
    /// The decision made at this tick, if the evidence was enough for one.
    pub decision: Option<Decision>,
}

/// Where the loop is.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    /// No capacity known yet.
    Startup(Startup),
    /// Cruising under the remembered capacity.
    Cycle(GainCycle),
}

/// The R loop (see the module docs).
#[derive(Clone)]
pub struct RateLoop {
    cfg: RateLoopConfig,
    window: Window,
    phase: Phase,
    capacity: CapacityFilter,
    baseline: Baseline,
    margin: Margin,
    /// The last met window's delivered rate: the capacity without the filter (ablation).
    last_met_ops: Option<f64>,
    rate_ops: f64,
    next_tick: Nanos,
    /// The SLO quantile of the last decision's evidence, for reports.
    estimate_ns: Option<f64>,
    /// The last decision's window was over the SLO.
    failing: bool,
    /// Windows over the SLO in a row, and the highest rate they delivered.
    episode: (u32, f64),
}

impl RateLoop {
    /// A loop starting at `cfg.rate_init_ops`, first ticking one period after `now`.
    pub fn new(cfg: RateLoopConfig, now: Nanos) -> Result<Self, ControlError> {
        cfg.validate()?;
        Ok(RateLoop {
            window: Window::new(cfg.window(LATENCY_TARGET * cfg.slo_latency_ns), now),
            phase: Phase::Startup(Startup::default()),
            capacity: CapacityFilter::default(),
            baseline: Baseline::default(),
            margin: Margin::default(),
            last_met_ops: None,
            rate_ops: cfg.rate_init_ops,
            next_tick: now.saturating_add(cfg.period),
            estimate_ns: None,
            failing: false,
            episode: (0, 0.0),
            cfg,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &RateLoopConfig {
        &self.cfg
    }

    /// The rate to admit at now.
    pub fn rate_ops(&self) -> f64 {
        self.rate_ops
    }

    /// When `tick` is next due.
    pub fn next_tick(&self) -> Nanos {
        self.next_tick
    }

    /// The SLO quantile of the last decision's evidence, or of the evidence gathered so far
    /// before the first decision, for reports.
    pub fn latency_ns_estimate(&self) -> Option<f64> {
        self.estimate_ns.or_else(|| self.window.quantile())
    }

    /// The capacity the loop remembers, requests per second.
    pub fn capacity_ops(&self) -> Option<f64> {
        if self.cfg.parts.capacity_filter {
            self.capacity.capacity_ops()
        } else {
            self.last_met_ops
        }
    }

    /// The latency a window's quantile is judged against (see [`LATENCY_TARGET`]), ns.
    pub fn target_ns(&self) -> f64 {
        let slo = self.cfg.slo_latency_ns;
        let floor = self.baseline.tail_ns().map_or(0.0, |t| UNLOADED_HEADROOM * t);
        (LATENCY_TARGET * slo).max(floor).min(slo)
    }

    /// Whether the loop knows a capacity and cruises under it (startup is over).
    pub fn cruising(&self) -> bool {
        matches!(self.phase, Phase::Cycle(_))
    }

    /// The margin γ the loop cruises at under the capacity.
    pub fn gamma(&self) -> f64 {
        self.margin.gamma()
    }

    /// What the driver admits by: R, the window and the longest wait for a slot in it.
    pub fn admission(&self) -> Admission {
        if !self.cfg.parts.window {
            return Admission::rate_only(self.rate_ops);
        }
        let Some(latency_ns) = self.baseline.latency_ns() else {
            return Admission {
                inflight_max: inflight::WINDOW_INITIAL,
                ..Admission::rate_only(self.rate_ops)
            };
        };
        let capacity = self.capacity_ops().unwrap_or(self.rate_ops);
        Admission {
            rate_ops: self.rate_ops,
            inflight_max: inflight::window(capacity, self.cfg.slo_latency_ns, latency_ns),
            wait_max: inflight::wait_max(self.cfg.slo_latency_ns, latency_ns),
        }
    }

    /// Feeds one completion.
    pub fn on_completion(&mut self, now: Nanos, latency_ns: u64) {
        self.window.record(now, latency_ns);
    }

    /// Feeds one request the driver refused because its wait for a slot would have broken
    /// the SLO: it counts as a completion over the SLO.
    pub fn on_refused(&mut self, now: Nanos) {
        self.window.record_refused(now);
    }

    /// Multiplies R by `factor` at `now`: an outer loop moved the curve on purpose (X) and
    /// predicts the capacity's ratio. The remembered capacity moves by the same factor (the
    /// memory is kept, not thrown away), and the evidence restarts.
    pub fn rescale(&mut self, now: Nanos, factor: f64) {
        if factor.is_finite() && factor > 0.0 {
            self.capacity.scale(factor);
            self.last_met_ops = self.last_met_ops.map(|r| r * factor);
            if let Phase::Startup(s) = &mut self.phase {
                s.scale(factor);
            }
            self.set_rate(now, self.rate_ops * factor);
        }
    }

    /// Restarts the evidence at `now` without moving R: an outer loop moved the curve a
    /// little (Kayak's X step), so the next decision must measure it anew.
    pub fn restart(&mut self, now: Nanos) {
        self.set_rate(now, self.rate_ops);
    }

    fn set_rate(&mut self, now: Nanos, rate_ops: f64) {
        self.rate_ops = rate_ops.clamp(self.cfg.rate_min_ops, self.cfg.rate_max_ops);
        self.window = Window::new(self.cfg.window(self.target_ns()), now);
        // After a failure, and all through startup, a window only has to show there is
        // room: a clean few hundred completions decide (see `window::QUIET_SAMPLES`).
        if self.failing || matches!(self.phase, Phase::Startup(_)) {
            self.window = self.window.clone().quick();
        }
    }

    /// The next tick: when the window is expected to be full, within [TICK_MIN, period].
    fn schedule_tick(&mut self, now: Nanos) {
        let missing = self
            .cfg
            .window(self.target_ns())
            .samples_min()
            .saturating_sub(self.window.count()) as f64;
        let expected = Nanos::from_secs_f64(missing / self.rate_ops.max(1.0));
        self.next_tick = now.saturating_add(expected.clamp(TICK_MIN.min(self.cfg.period), self.cfg.period));
    }

    /// Runs the loop at `now`: if the evidence since R last changed is enough, decides.
    pub fn tick(&mut self, now: Nanos) -> RateReport {
        if !self.window.ready(now) {
            self.schedule_tick(now);
            return RateReport {
                rate_ops: self.rate_ops,
                decision: None,
            };
        }
        let m = self.window.take(now);
        let offered = self.rate_ops;
        let target = self.target_ns();
        let tail_ns = m.latency.quantile(self.cfg.quantile).unwrap_or(0.0);
        let met = tail_ns <= target;
        let delivered = m.delivered_ops();
        let demand_limited = delivered < DEMAND_LIMITED_SHARE * offered;
        self.estimate_ns = Some(tail_ns);
        self.failing = !met;
        self.episode = if met {
            (0, 0.0)
        } else {
            (self.episode.0 + 1, self.episode.1.max(delivered))
        };
        if self.episode.0 == EPISODE_DISPROOF && self.cfg.parts.capacity_filter {
            self.capacity.disproved(self.episode.1);
        }
        // The estimators first: what this window proved.
        if let Some(median) = m.latency.quantile(0.5) {
            self.baseline.learn(now, median, tail_ns);
        }
        let capacity_before = self.capacity_ops();
        self.capacity.learn(now, met.then_some(delivered));
        if met {
            self.last_met_ops = Some(delivered);
        }
        // Then the law.
        let (next, heading) = match &mut self.phase {
            Phase::Startup(startup) => match startup.learn(offered, m.served_ops(), met, m.measured_backlog()) {
                Step::Try(rate) if !(met && demand_limited) => (rate, rate),
                Step::Try(_) | Step::Done => {
                    self.phase = Phase::Cycle(GainCycle::cruising());
                    let cruise = self.cruise_ops().unwrap_or(offered);
                    (cruise, cruise)
                }
            },
            Phase::Cycle(cycle) => {
                // γ is the cruise's margin: a probe over the SLO says the memory was too
                // high (the filter forgets what no probe confirms), not that the cruise is.
                if cycle.probing() {
                    let step = cycle.step();
                    cycle.probed(met && capacity_before.is_some_and(|c| delivered >= c * (1.0 + step / 2.0)));
                    if !met && self.cfg.parts.capacity_filter {
                        self.capacity.disproved(offered);
                    }
                } else if self.cfg.parts.margin {
                    self.margin.learn(met);
                }
                let gain = if met {
                    cycle.advance()
                } else {
                    cycle.restart_cruise();
                    1.0
                };
                let probe_next = cycle.probing();
                match self.cruise_ops() {
                    // A probe tests at least the remembered capacity: one under it (a low γ)
                    // would never refresh the memory, which would then age down to it.
                    Some(cruise) if met && probe_next => {
                        let capacity = self.capacity_ops().unwrap_or(cruise);
                        ((gain * cruise).max(capacity), cruise)
                    }
                    // Limited by its demand: R stays where it is (and the cycle's probes may
                    // still raise it), never a margin under a rate the demand set.
                    Some(cruise) if met && demand_limited => ((gain * cruise).max(offered), cruise),
                    Some(cruise) if met => (gain * cruise, cruise),
                    // Consecutive windows over the SLO cut again, each in proportion to its
                    // own overshoot, so a slight overload is left in a few small steps; but
                    // never below the floor's share of the cruise, so a collapse of many
                    // windows costs no more than one deep cut, whatever its length.
                    Some(cruise) => {
                        let cut = cut::cut(
                            offered.min(cruise),
                            delivered,
                            tail_ns,
                            target,
                            self.cfg.parts.proportional_cut,
                        );
                        (cut.max(cut::CUT_FLOOR * cruise), cruise)
                    }
                    // The memory aged out under a lasting overload: cut from what was
                    // delivered, and look for the capacity again.
                    None => {
                        self.phase = Phase::Startup(Startup::default());
                        let cut = cut::cut(offered, delivered, tail_ns, target, self.cfg.parts.proportional_cut);
                        (if met { offered } else { cut }, offered)
                    }
                }
            }
        };
        self.set_rate(now, next);
        self.schedule_tick(now);
        RateReport {
            rate_ops: self.rate_ops,
            decision: Some(Decision {
                rate_ops: offered,
                tail_ns,
                met,
                delivered_ops: delivered,
                count: m.count,
                heading_ops: heading,
            }),
        }
    }

    /// γ × the remembered capacity.
    fn cruise_ops(&self) -> Option<f64> {
        self.capacity_ops().map(|c| self.margin.gamma() * c)
    }
}

#[cfg(test)]
mod tests;
