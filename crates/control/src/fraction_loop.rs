//! The X loop: choose the RPC fraction X (Kayak §4.3, Pseudocode 2), and Algorithm I's
//! latency-minimising X step for the X-R ordering.
//!
//! [`FractionLoop`] (R-X, Algorithm II) does stochastic gradient ascent on R(X), the rate the
//! R loop achieves at fraction X. Pseudocode 2 steps X by η times the secant of the last two
//! (X, R) points. In a system with a sampled tail that secant is mostly noise and lag: over
//! 50 ms the rate the tail allows wanders by ±4–7 %, while a few percent of X change it by
//! 1–3 %; and the R loop needs time to follow X, so R read right after a move still reflects
//! the old X (the ascent then overshoots the optimum by the lag). So:
//! - **Read the R loop's rate-equivalent, not R.** Every R-loop period reports
//!   `R_eq = R̄ · (s / T)^(1/e)`: the rate at which its tail proxy T would sit on its
//!   setpoint s (e: the proxy's elasticity). It says where R should be at this X without
//!   waiting for R to get there. Per X period the loop averages ln R_eq over the part after
//!   [`SETTLE_FRACTION_DEFAULT`] (while the R loop's window still holds the previous X).
//! - **Antithetic probes.** X alternates between c + δ and c − δ around a centre c, one
//!   period each ([`X_PROBE_DEFAULT`]). Each pair of adjacent periods gives a secant; the last
//!   [`X_HISTORY_DEFAULT`] are averaged, and since consecutive secants see a drift (of the
//!   setpoint, of the workload) with opposite signs, a linear drift cancels.
//! - **Kesten's step schedule.** The centre moves by η·g (bounded by
//!   [`X_STEP_MAX_DEFAULT`]) with η = η₀ / (1 + flips / [`FLIPS_HALF`]), where flips counts
//!   the sign changes of g: sign changes mean the centre straddles the optimum and what the
//!   loop sees is noise, to be averaged with ever smaller steps; far from the optimum the
//!   sign holds and the full step travels. When the last [`REOPEN_RUN`] gradients agree in
//!   sign and average more than [`REOPEN_GRADIENT`] (the optimum moved: a workload change),
//!   the schedule re-opens.
//! - **Probe amplitude with the step.** δ = max(probe, |step|), at most [`X_PROBE_MAX`]:
//!   while travelling, larger probes see the slope clearly; near the optimum they shrink to
//!   the probe scale, whose cost is about slope × δ ≈ 1–2 % of throughput.
//! - **Boundaries.** The centre is clamped to [0, 1]; at a boundary the probes are 0 and 2δ
//!   (or 1 and 1 − 2δ), so a boundary optimum (light work: X = 1) is held with one probe
//!   pair beside it, and a move of the optimum inside shows within two periods.
//! - **Coarse scans.** At start, and when the workload changes, X visits 0, 0.5 and 1
//!   ([`SCAN_POINTS`]) and the local search starts near the best. A change shows as a jump of
//!   the rate away from its moving level ([`LEVEL_JUMP`]) or as the R loop's report (also a
//!   switch to lighter work, which the R loop climbs to gradually). A node stall collapses
//!   the rate too, and on one app and one storage core a needless scan costs a collapse or
//!   two, so: scans are at
//!   least [`RESCAN_COOLDOWN_PERIODS`] apart, doubled after each scan that found the optimum
//!   where it was ([`RESCAN_BACKOFF_MAX`]); and where the rate is noisy (real processes), a
//!   jump or report starts a scan only if the rate is still away (on the jump's side)
//!   [`RESCAN_CONFIRM_PERIODS`] later — the R loop's stall recovery brings it back by then.
//!   Such a jump within the cooldown, and any report within it, is kept the same way and
//!   judged when the cooldown ends, so a change during a long cooldown is not lost.
//!
//! The loop exposes a slowly averaged slope, so the policy can move R with the centre
//! (feed-forward) instead of letting the R loop find every move by feedback.

use std::collections::VecDeque;

use crate::error::{check_range, ConfigError};
use crate::time::Nanos;

/// Default X-loop period: 20 Hz, the paper's slow-loop frequency (§4.3).
pub const FRACTION_PERIOD_DEFAULT: Nanos = Nanos::from_ms(50);

/// Default starting X: 1 (all remote), as in the paper's experiments (§6).
pub const X_INIT_DEFAULT: f64 = 1.0;

/// Default gradient step size η₀: the centre moves by η₀ × (relative rate gradient) before
/// the schedule shrinks it. A workload whose rate doubles across the whole X range has a
/// relative gradient ≈ 1, so far from the optimum X travels a tenth of the range per period.
pub const X_GAIN_DEFAULT: f64 = 0.1;

/// Default smallest move of the centre that still widens the probes (a floor on the step
/// the probe amplitude follows).
pub const X_STEP_MIN_DEFAULT: f64 = 0.005;

/// Default largest move of the centre per period: crossing the whole range takes ≥ 10
/// periods (0.5 s), and a single bad gradient moves X by at most 0.1.
pub const X_STEP_MAX_DEFAULT: f64 = 0.1;

/// Default smallest probe half-amplitude δ: 0.03 moves the rate by 1–3 % on the paper's
/// workloads — about the noise of one X period's rate-equivalent — and costs about 1–2 % of
/// throughput at the optimum.
pub const X_PROBE_DEFAULT: f64 = 0.03;

/// Largest probe half-amplitude: ±0.05 moves the achievable rate by up to ±5 % (R(X) is
/// tent-shaped: a probe across the peak lands on the steep side), which the R loop absorbs
/// without a backlog.
pub const X_PROBE_MAX: f64 = 0.05;

/// Default part of an X period left out of its average: the R loop's proxy window (10 ms)
/// still holds completions of the previous X during the first fifth of a 50 ms period.
pub const SETTLE_FRACTION_DEFAULT: f64 = 0.2;

/// Default number of adjacent-period secants averaged into the gradient: two, one of each
/// probe order, so a linear drift cancels; more would average secants taken around older
/// centres and make the ascent overshoot.
pub const X_HISTORY_DEFAULT: usize = 2;

/// Largest accepted history length.
pub const X_HISTORY_MAX: usize = 64;

/// Sign flips that halve the step size η: after two flips around the optimum the centre
/// moves a third as far, after ten a tenth.
pub const FLIPS_HALF: f64 = 1.0;

/// Gradients that must agree in sign to re-open the step schedule: six periods (0.3 s) of
/// one-signed noise are rare (~3 %) at the optimum.
pub const REOPEN_RUN: usize = 6;

/// ...and their mean must exceed this relative gradient (the rate changing 6 % per 0.1 of
/// X), so noise around the optimum does not re-open it.
pub const REOPEN_GRADIENT: f64 = 0.6;

/// Points of the coarse scan that brackets the optimum first (at start and after a workload
/// change): X = 0, 0.5 and 1. R(X) is unimodal and, on the paper's workloads, tent-shaped;
/// the best of the three is within 0.25 of the optimum (heavy: 0.5 vs 0.4; medium: 0 vs
/// 0.2; light: 1), and the local search starts there with full steps — where a local
/// search alone, on a shallow stretch (medium work between X = 0.4 and 1: ~4 % per 0.1),
/// needs ~1 s to trust the sign of its gradient.
pub const SCAN_POINTS: usize = 3;

/// X periods spent at each grid point of the scan (0.1 s): neighbouring grid points differ
/// by 6–30 % in rate, about twice the noise of the average of two periods.
pub const SCAN_PERIODS_PER_POINT: usize = 2;

/// A period whose mean ln rate is this far from the moving average of the local search
/// (a 16 % jump; probes move it by ≤ 5 %, noise by ~5 %) means the workload changed, and
/// starts a new scan.
pub const LEVEL_JUMP: f64 = 0.15;

/// X periods after a scan before another may start (see `may_rescan`): 20 periods is a
/// second at the default 20 Hz, shorter than the workload phases ferry is tested on (1.5 s
/// and 5 s) and long next to a scan. On real processes a scan costs a collapse or two (its
/// grid points move capacity by up to 2×), and with half a second X spent much of a run
/// scanning.
pub const RESCAN_COOLDOWN_PERIODS: u64 = 20;

/// Doublings of that cooldown after rescans that found nothing new, at most (8 s at the
/// default 20 Hz). A rescan whose best grid point is within half a grid step of the centre
/// it left was a false alarm: on real processes a node stall collapses R and looks like a workload change,
/// and on the 1 + 1 loopback cluster each such scan costs a collapse or two (its grid points
/// move capacity by 2×). Each false alarm doubles the cooldown, a scan that moved the
/// optimum resets it, so a system whose workload does change keeps rescanning every second.
/// (On a noisy system the scans' best points look new by chance, and the confirmation
/// below does the work.)
pub const RESCAN_BACKOFF_MAX: u32 = 3;

/// X periods after a jump of the rate (or the R loop's report of a workload change) at
/// which the rate must still be away from the level before it (0.2 s) for a scan to start:
/// a node stall collapses R too, and the R loop's stall recovery brings the rate back within
/// a few periods, where a changed workload keeps it away (or, after a switch to lighter
/// work, climbing). Reports are judged from the update after them, jumps from the update that saw them.
pub const RESCAN_CONFIRM_PERIODS: u64 = 4;

/// "Still away" is more than this share of the jump threshold at the time of the jump: the
/// R loop climbs to lighter work's knee at its averaging pace, and 0.2 s after the switch
/// the rate can still be short of a full jump.
pub const RESCAN_CONFIRM_SHARE: f64 = 0.5;

/// Weight of a new period in the moving average of the periods' rates, the level a jump is
/// judged against (~5 periods).
pub const LEVEL_EWMA_WEIGHT: f64 = 0.2;

/// Weight of a new period in the moving average of the squared deviation from the level
/// (~20 periods): how much a period's rate wanders on this system.
pub const LEVEL_VAR_EWMA_WEIGHT: f64 = 0.1;

/// A jump must also exceed this many standard deviations of a period's rate
/// around the level: in the simulator a period's rate wanders by ~5 % and the fixed
/// thresholds govern; on real processes it wanders by 20–50 % (hiccups, a node whose
/// capacity moves), and the fixed thresholds started a scan every half second.
pub const LEVEL_SIGMAS: f64 = 3.0;

/// Rate noise (standard deviation of a period's ln rate around the level) beyond which the
/// local search holds its centre: the simulator's periods wander by 2–8 %, real processes'
/// on this 2-vCPU VM by 12–60 % (VM stalls), where X moved by noise alone and each move
/// cost tail latency.
pub const NOISE_MAX: f64 = 0.1;

/// Largest |ln(rate-equivalent / rate)| the local search takes from one R-loop period: the
/// R loop holds R within a few percent of the knee, and a larger correction is mostly the
/// proxy's noise.
pub const CORRECTION_MAX: f64 = 0.05;

/// Largest |secant| d ln R / dX taken from two periods: the steepest relative slopes of
/// R(X) on the paper's workloads are ~1–1.5; a secant far beyond comes from a collapse or a
/// noise-made difference and would otherwise dominate the average.
pub const SECANT_MAX: f64 = 3.0;

/// Weight of a new secant in the slowly averaged slope used for feed-forward: ~5 secants,
/// so one noisy secant moves the feed-forward by a fifth of its error.
pub const SLOPE_EWMA_WEIGHT: f64 = 0.2;

/// Algorithm I's default X step size on the relative latency gradient.
pub const LATENCY_X_GAIN_DEFAULT: f64 = 0.1;

/// Algorithm I's smallest X step (its probe): 2 % of requests, enough for the next latency
/// secant to see a difference.
pub const LATENCY_X_STEP_MIN: f64 = 0.02;

/// Tolerance for "X is at a boundary" and "X did not move".
const X_EPS: f64 = 1e-9;

/// How the X loop runs.
#[derive(Clone, Debug, PartialEq)]
pub struct FractionLoopConfig {
    /// Time between two updates of X.
    pub period: Nanos,
    /// X before the first update.
    pub x_init: f64,
    /// Gradient step size η₀.
    pub gain: f64,
    /// Smallest step the probe amplitude follows (Algorithm I: smallest X step).
    pub step_min: f64,
    /// Largest move of the centre per period.
    pub step_max: f64,
    /// Smallest probe half-amplitude δ.
    pub probe: f64,
    /// Part of each period ignored after X moved.
    pub settle_fraction: f64,
    /// Adjacent-period secants averaged into the gradient (1 = Pseudocode 2's plain secant).
    pub history: usize,
}

impl Default for FractionLoopConfig {
    fn default() -> Self {
        FractionLoopConfig {
            period: FRACTION_PERIOD_DEFAULT,
            x_init: X_INIT_DEFAULT,
            gain: X_GAIN_DEFAULT,
            step_min: X_STEP_MIN_DEFAULT,
            step_max: X_STEP_MAX_DEFAULT,
            probe: X_PROBE_DEFAULT,
            settle_fraction: SETTLE_FRACTION_DEFAULT,
            history: X_HISTORY_DEFAULT,
        }
    }
}

impl FractionLoopConfig {
    /// Rejects values the loop is not defined for.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_range("X-loop period", "[1 µs, ∞)", self.period.0 as f64, 1e3, f64::MAX)?;
        check_range("initial rpc fraction", "[0, 1]", self.x_init, 0.0, 1.0)?;
        check_range("X-loop gain", "(0, 10]", self.gain, 1e-9, 10.0)?;
        check_range("X minimum step", "(0, 0.5]", self.step_min, 1e-6, 0.5)?;
        check_range("X maximum step", "[minimum step, 1]", self.step_max, self.step_min, 1.0)?;
        check_range("X probe", "(0, 0.25]", self.probe, 1e-6, 0.25)?;
        check_range("X settle fraction", "[0, 0.9]", self.settle_fraction, 0.0, 0.9)?;
        check_range(
            "X gradient history",
            "[1, 64] secants",
            self.history as f64,
            1.0,
            X_HISTORY_MAX as f64,
        )?;
        Ok(())
    }
}

/// Bounds a raw step: at most `step_max`, at least `step_min` in the direction of `raw`
/// (or of `fallback_dir` when `raw` is zero).
fn bounded_step(raw: f64, step_min: f64, step_max: f64, fallback_dir: f64) -> f64 {
    let dir = if raw > 0.0 {
        1.0
    } else if raw < 0.0 {
        -1.0
    } else {
        fallback_dir
    };
    dir * raw.abs().clamp(step_min, step_max)
}

/// Direction of a probe from `x`: inward at a boundary, else `dir`.
fn probe_dir(x: f64, dir: f64) -> f64 {
    if x >= 1.0 - X_EPS {
        -1.0
    } else if x <= X_EPS {
        1.0
    } else {
        dir
    }
}

/// A coarse scan of X over a grid (see [`SCAN_POINTS`]).
#[derive(Clone, Debug)]
struct Scan {
    /// The X periods left, in order (each grid point [`SCAN_PERIODS_PER_POINT`] times), nearest
    /// to the starting X first, so a scan starts where X is and ends at the far side.
    left: Vec<f64>,
    /// Sum of the mean ln rates measured at the current grid point.
    sum: f64,
    /// Periods measured at the current grid point.
    count: u32,
    /// The best (X, mean ln rate) so far.
    best: Option<(f64, f64)>,
    /// Every grid point's (X, mean ln rate).
    points: Vec<(f64, f64)>,
    /// The centre the local search had when this scan started (None for the first scan).
    origin: Option<f64>,
}

/// A jump of the rate (or a report of a workload change) that starts a scan only if the
/// rate is still away later: a node stall looks the same at first.
#[derive(Clone, Copy, Debug)]
struct Suspect {
    /// When it was seen (for a report: the update it was seen before).
    since: Nanos,
    /// The level before it.
    level: f64,
    /// The jump threshold then: "still away" is more than RESCAN_CONFIRM_SHARE of it.
    threshold: f64,
    /// The jump's direction (+1 up, −1 down; 0 for a report, which has none): the rate must
    /// still be away on that side. A stall's recovery can overshoot the other way.
    sign: f64,
}

impl Suspect {
    /// Whether `y` (a period's mean ln rate) is still away from the level before.
    fn still_away(&self, y: f64) -> bool {
        let d = y - self.level;
        d.abs() > RESCAN_CONFIRM_SHARE * self.threshold && (self.sign == 0.0 || d.signum() == self.sign)
    }
}

impl Scan {
    fn new(x: f64, origin: Option<f64>) -> Self {
        let mut grid: Vec<f64> = (0..SCAN_POINTS).map(|i| i as f64 / (SCAN_POINTS - 1) as f64).collect();
        grid.sort_by(|a, b| (a - x).abs().total_cmp(&(b - x).abs()));
        let left = grid
            .iter()
            .flat_map(|&p| std::iter::repeat_n(p, SCAN_PERIODS_PER_POINT))
            .collect();
        Scan {
            left,
            sum: 0.0,
            count: 0,
            best: None,
            points: Vec::with_capacity(SCAN_POINTS),
            origin,
        }
    }
}

/// The X of the peak of the least-squares parabola through `points`, if it opens downward
/// (with three points, the parabola through them).
fn parabola_peak(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 3 {
        return None;
    }
    // Normal equations of y = a x² + b x + c.
    let n = points.len() as f64;
    let s = |k: i32| points.iter().map(|p| p.0.powi(k)).sum::<f64>();
    let t = |k: i32| points.iter().map(|p| p.0.powi(k) * p.1).sum::<f64>();
    let m = [[s(4), s(3), s(2)], [s(3), s(2), s(1)], [s(2), s(1), n]];
    let v = [t(2), t(1), t(0)];
    let det = |m: [[f64; 3]; 3]| {
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    };
    let d = det(m);
    if d.abs() < 1e-12 {
        return None;
    }
    let with = |col: usize| {
        let mut mm = m;
        for (row, &vv) in mm.iter_mut().zip(&v) {
            row[col] = vv;
        }
        det(mm) / d
    };
    let (a, b) = (with(0), with(1));
    (a < 0.0).then(|| -b / (2.0 * a))
}

/// The X of the probe on `side` (+1 or −1) of `centre` at half-amplitude `delta`, the pair
/// kept inside [0, 1] by sliding it off a boundary.
fn probe_x(centre: f64, side: f64, delta: f64) -> f64 {
    let lo = (centre - delta).clamp(0.0, 1.0 - 2.0 * delta);
    if side > 0.0 {
        lo + 2.0 * delta
    } else {
        lo
    }
}

/// Stochastic gradient ascent of X on the rate the R loop achieves (Algorithm II's outer
/// loop), with antithetic probes and Kesten's step schedule; see the module docs.
#[derive(Clone, Debug)]
pub struct FractionLoop {
    /// Tuning.
    cfg: FractionLoopConfig,
    /// Coarse scans started (the one at start included).
    scans: u64,
    /// The centre of the probes: the loop's estimate of the best X.
    centre: f64,
    /// The fraction currently applied.
    x: f64,
    /// Which probe is applied (+1: above the centre, −1: below).
    side: f64,
    /// When the next update is due.
    next_tick: Nanos,
    /// When X last changed (start of the current settling).
    changed_at: Nanos,
    /// ln of the rates reported since X last changed, with their times.
    samples: Vec<(Nanos, f64)>,
    /// The (X, mean ln rate) of the last period.
    last: Option<(f64, f64)>,
    /// The most recent adjacent-period secants of ln rate against X.
    secants: VecDeque<f64>,
    /// Sign of the last gradient (0 before the first).
    direction: f64,
    /// Size of the last move of the centre, floored at `step_min`: the probes follow it.
    step: f64,
    /// Sign flips of the gradient since the step schedule (re)started.
    flips: u32,
    /// The most recent gradients, to see a consistent one (re-open the schedule).
    recent: VecDeque<f64>,
    /// Slowly averaged secant, for the policy's feed-forward.
    slope: Option<f64>,
    /// The coarse scan in progress, if any.
    scan: Option<Scan>,
    /// When the last scan ended: scans are at least RESCAN_COOLDOWN_PERIODS apart...
    scan_ended_at: Option<Nanos>,
    /// ...doubled this many times (false alarms in a row, up to RESCAN_BACKOFF_MAX).
    rescan_backoff: u32,
    /// A suspected workload change, confirmed or dropped once RESCAN_CONFIRM_PERIODS have
    /// passed and a scan may start.
    suspect: Option<Suspect>,
    /// Time of the latest update.
    last_tick: Nanos,
    /// Moving average of the periods' mean ln rate during the local search (None right
    /// after a scan): a jump away from it means the workload changed.
    level: Option<f64>,
    /// Moving average of the squared deviation of a period's ln rate from `level`.
    level_var: f64,
    /// The rate a scan's first period at a grid point measured, until the policy takes it.
    retarget: Option<f64>,
    /// The best point of the scan that just ended, until the policy takes it.
    scan_best: Option<(f64, f64)>,
}

impl FractionLoop {
    /// A loop starting at `cfg.x_init`, first updating one period after `now`.
    pub fn new(cfg: FractionLoopConfig, now: Nanos) -> Result<Self, ConfigError> {
        cfg.validate()?;
        Ok(FractionLoop {
            centre: cfg.x_init,
            x: cfg.x_init,
            side: 1.0,
            next_tick: now.saturating_add(cfg.period),
            changed_at: now,
            samples: Vec::new(),
            last: None,
            secants: VecDeque::with_capacity(cfg.history + 1),
            direction: 0.0,
            // The first probes are wide: before the first gradient the loop does not know
            // whether it sits on a slope, and wide probes see a slope through the noise.
            step: cfg.step_max,
            flips: 0,
            recent: VecDeque::with_capacity(REOPEN_RUN + 1),
            slope: None,
            scan: Some(Scan::new(cfg.x_init, None)),
            scans: 1,
            scan_best: None,
            scan_ended_at: None,
            rescan_backoff: 0,
            suspect: None,
            last_tick: Nanos::ZERO,
            retarget: None,
            level: None,
            level_var: 0.0,
            cfg,
        })
    }

    /// Starts a coarse scan of X at the next update (the workload changed: the optimum may
    /// be anywhere, and a local search would walk there slowly), unless one ran within the
    /// cooldown.
    pub fn rescan(&mut self) {
        if self.scan.is_none() && self.may_rescan(self.last_tick) {
            self.start_scan();
        }
    }

    /// Another loop saw the workload change (the R loop's report): a scan starts at the next
    /// update, or — where the rate is noisy (real processes, whose node stalls collapse R
    /// as a workload change would) or within the cooldown — only if the rate is still away
    /// from its level [`RESCAN_CONFIRM_PERIODS`] from now, once a scan may start.
    pub fn report_change(&mut self) {
        if self.scan.is_some() {
            return;
        }
        if !self.is_noisy() && self.may_rescan(self.last_tick) {
            self.start_scan();
            return;
        }
        if self.suspect.is_none() {
            self.suspect = self.suspect_from(self.next_tick, 0.0);
        }
    }

    /// A suspect seen at `since` on side `sign` (0: either), against the current level and
    /// threshold; none before the level is known.
    fn suspect_from(&self, since: Nanos, sign: f64) -> Option<Suspect> {
        self.level.map(|level| Suspect {
            since,
            level,
            threshold: self.jump_threshold(),
            sign,
        })
    }

    /// Starts a scan from the current X and centre, dropping any suspect.
    fn start_scan(&mut self) {
        self.scans += 1;
        self.suspect = None;
        self.level = None;
        self.scan = Some(Scan::new(self.x, Some(self.centre)));
    }

    /// Whether a new scan may start at `now`: not within RESCAN_COOLDOWN_PERIODS of the
    /// last one, doubled per false alarm in a row (see [`RESCAN_BACKOFF_MAX`]). A scan
    /// disturbs the system on purpose; on a noisy system the evidence of a workload change
    /// (a jump of the achievable rate) recurs by chance, and back-to-back scans would keep X
    /// at the grid's extremes instead of near the optimum.
    fn may_rescan(&self, now: Nanos) -> bool {
        let periods = RESCAN_COOLDOWN_PERIODS << self.rescan_backoff;
        let cooldown = Nanos(self.cfg.period.0.saturating_mul(periods));
        self.scan_ended_at
            .is_none_or(|ended| now.saturating_sub(ended) >= cooldown)
    }

    /// The rate a scan's first period at a grid point measured, once: the policy moves R
    /// there so the point's second period measures near its knee.
    pub fn take_scan_retarget(&mut self) -> Option<f64> {
        self.retarget.take()
    }

    /// How far a period's mean ln rate must sit from the level to suggest a workload change:
    /// [`LEVEL_JUMP`], or more where the rate wanders more (see [`LEVEL_SIGMAS`]).
    fn jump_threshold(&self) -> f64 {
        LEVEL_JUMP.max(LEVEL_SIGMAS * self.level_var.sqrt())
    }

    /// Whether a period's rate wanders by more than [`NOISE_MAX`] around the level: then the
    /// local search holds its centre, and the rates a scan measures are rough.
    pub fn is_noisy(&self) -> bool {
        self.level_var.sqrt() > NOISE_MAX
    }

    /// Coarse scans started so far, the one at start included.
    pub fn scans(&self) -> u64 {
        self.scans
    }

    /// Whether a coarse scan is in progress.
    pub fn is_scanning(&self) -> bool {
        self.scan.is_some()
    }

    /// The best (X, rate) of the scan that just ended, once: the policy resumes R there.
    pub fn take_scan_result(&mut self) -> Option<(f64, f64)> {
        self.scan_best.take().map(|(x, y)| (x, y.exp()))
    }

    /// The fraction to apply now.
    pub fn x(&self) -> f64 {
        self.x
    }

    /// The centre of the probes: the loop's current estimate of the best X.
    pub fn centre(&self) -> f64 {
        self.centre
    }

    /// When `tick` is next due.
    pub fn next_tick(&self) -> Nanos {
        self.next_tick
    }

    /// A slowly averaged gradient d ln R / dX (an exponential average of the secants, weight
    /// [`SLOPE_EWMA_WEIGHT`]): how the achievable rate moves with X, for feed-forward.
    pub fn slope(&self) -> Option<f64> {
        self.slope
    }

    /// The averaged gradient d ln R / dX the loop steps on, once two periods were compared.
    pub fn gradient(&self) -> Option<f64> {
        (!self.secants.is_empty()).then(|| self.secants.iter().sum::<f64>() / self.secants.len() as f64)
    }

    /// Feeds the rate the R loop achieves at `now` (its rate-equivalent, see the module
    /// docs).
    pub fn observe_rate(&mut self, now: Nanos, rate_ops: f64) {
        if rate_ops.is_finite() && rate_ops > 0.0 {
            self.samples.push((now, rate_ops.ln()));
        }
    }

    /// Feeds the R loop's rate-equivalent `equivalent_ops` at `now` together with the rate
    /// `rate_ops` it applies. Outside a scan the correction ln(equivalent / rate) is bounded
    /// to ±[`CORRECTION_MAX`]: near the optimum R sits close to the knee and a larger
    /// correction is the proxy's noise amplified by an elasticity estimate that may be too
    /// low; during a scan the full correction is kept, since R is far from the grid points'
    /// knees by design.
    pub fn observe(&mut self, now: Nanos, rate_ops: f64, equivalent_ops: f64) {
        if !(rate_ops.is_finite() && rate_ops > 0.0 && equivalent_ops.is_finite() && equivalent_ops > 0.0) {
            return;
        }
        let y = if self.scan.is_some() {
            equivalent_ops.ln()
        } else {
            rate_ops.ln() + (equivalent_ops / rate_ops).ln().clamp(-CORRECTION_MAX, CORRECTION_MAX)
        };
        self.samples.push((now, y));
    }

    /// Mean ln rate over the settled part of the current period.
    fn settled_log_rate(&self, now: Nanos) -> Option<f64> {
        let since = now.saturating_sub(self.changed_at).as_nanos() as f64;
        let settle_at = self.changed_at.0 + (self.cfg.settle_fraction * since) as u64;
        let settled = self.samples.iter().filter(|(t, _)| t.0 > settle_at);
        let (sum, n) = settled.fold((0.0, 0usize), |(s, n), &(_, y)| (s + y, n + 1));
        (n > 0).then(|| sum / n as f64)
    }

    /// Skips the update due at `now`, keeping X, and drops the rates seen so far.
    pub fn hold(&mut self, now: Nanos) {
        while self.next_tick <= now {
            self.next_tick = self.next_tick.saturating_add(self.cfg.period);
        }
        self.samples.clear();
        self.changed_at = now;
    }

    /// Records the secant between the last period and this one; true if there was one.
    fn record_secant(&mut self, y: f64) -> bool {
        let fresh = match self.last {
            // Secants over less than a probe's width are noise over a small difference;
            // the few that are still wild (a collapse in one of the periods) are bounded.
            Some((xp, yp)) if (self.x - xp).abs() >= self.cfg.probe - X_EPS => {
                let secant = ((y - yp) / (self.x - xp)).clamp(-SECANT_MAX, SECANT_MAX);
                self.secants.push_back(secant);
                while self.secants.len() > self.cfg.history {
                    self.secants.pop_front();
                }
                self.slope = Some(match self.slope {
                    None => secant,
                    Some(old) => (1.0 - SLOPE_EWMA_WEIGHT) * old + SLOPE_EWMA_WEIGHT * secant,
                });
                true
            }
            _ => false,
        };
        self.last = Some((self.x, y));
        fresh
    }

    /// One period of the coarse scan: records `y` for the current X and returns the next X,
    /// or None when no scan runs (the last point of a scan sets the centre and returns
    /// the first probe around it).
    fn scan_step(&mut self, y: f64) -> Option<f64> {
        let mut scan = self.scan.take()?;
        if scan.left.first().is_some_and(|&p| (p - self.x).abs() <= X_EPS) {
            scan.left.remove(0);
            if scan.left.first().is_some_and(|&p| (p - self.x).abs() <= X_EPS) {
                // The first period at a grid point only finds its rate: R was set for another
                // X and the rate-equivalent extrapolates far. The policy moves R there, and
                // the next period measures near the knee.
                self.retarget = Some(y.exp());
            } else {
                scan.sum += y;
                scan.count += 1;
            }
            if scan.left.first().is_none_or(|&p| (p - self.x).abs() > X_EPS) {
                // Done with this grid point.
                let mean = scan.sum / scan.count.max(1) as f64;
                if scan.best.is_none_or(|(_, yb)| mean > yb) {
                    scan.best = Some((self.x, mean));
                }
                scan.points.push((self.x, mean));
                scan.sum = 0.0;
                scan.count = 0;
            }
        }
        if let Some(&next) = scan.left.first() {
            self.scan = Some(scan);
            return Some(next);
        }
        // The scan is over: search locally from the peak of the parabola through the grid
        // points (kept within a grid step of the best point), from scratch.
        let (bx, by) = scan.best.unwrap_or((self.x, y));
        // A rescan whose best grid point is within half a grid step of the centre it left found
        // nothing new: the next needs stronger evidence, i.e. waits longer.
        let half = 0.5 / (SCAN_POINTS - 1) as f64;
        self.rescan_backoff = match scan.origin {
            Some(origin) if (bx - origin).abs() <= half => (self.rescan_backoff + 1).min(RESCAN_BACKOFF_MAX),
            _ => 0,
        };
        self.level = None;
        self.centre = parabola_peak(&scan.points).map_or(bx, |p| p.clamp(bx - half, bx + half).clamp(0.0, 1.0));
        self.scan_best = Some((bx, by));
        self.flips = 0;
        self.direction = 0.0;
        self.recent.clear();
        self.secants.clear();
        self.last = None;
        self.step = self.cfg.step_max;
        self.side = 1.0;
        Some(probe_x(self.centre, self.side, X_PROBE_MAX))
    }

    /// Moves the centre along the gradient `g` with Kesten's schedule.
    fn step_centre(&mut self, g: f64) {
        let dir = if g >= 0.0 { 1.0 } else { -1.0 };
        if self.direction != 0.0 && dir != self.direction {
            self.flips = self.flips.saturating_add(1);
        }
        self.direction = dir;
        self.recent.push_back(g);
        while self.recent.len() > REOPEN_RUN {
            self.recent.pop_front();
        }
        let mean = self.recent.iter().sum::<f64>() / self.recent.len() as f64;
        if self.recent.len() == REOPEN_RUN
            && mean.abs() > REOPEN_GRADIENT
            && self.recent.iter().all(|&v| v * mean > 0.0)
        {
            // A consistent, steep gradient: the optimum is elsewhere (the workload changed,
            // or the loop started far away). Travel again.
            self.flips = 0;
        }
        // On a system whose periods' rates wander by more than NOISE_MAX, a probe pair's
        // secant is noise (its spread is ~0.7 σ / δ, ten times a real slope), and the
        // hundreds of pairs it would take to average it out are seconds the workload does
        // not stand still for: the centre holds where the scan put it.
        let eta = if self.is_noisy() {
            0.0
        } else {
            self.cfg.gain / (1.0 + self.flips as f64 / FLIPS_HALF)
        };
        let delta = (eta * g).clamp(-self.cfg.step_max, self.cfg.step_max);
        let before = self.centre;
        self.centre = (self.centre + delta).clamp(0.0, 1.0);
        // The probes follow the move actually made: pushing against a boundary is no move,
        // and the probes there shrink to the probe scale.
        self.step = (self.centre - before).abs().max(self.cfg.step_min);
    }

    /// Updates X from the rates seen since the last update. Returns the new X.
    pub fn tick(&mut self, now: Nanos) -> f64 {
        while self.next_tick <= now {
            self.next_tick = self.next_tick.saturating_add(self.cfg.period);
        }
        self.last_tick = now;
        let Some(y) = self.settled_log_rate(now) else {
            return self.x;
        };
        if let Some(x) = self.scan_step(y) {
            if self.scan.is_none() {
                self.scan_ended_at = Some(now);
            }
            return self.apply_x(now, x);
        }
        let may_rescan = self.may_rescan(now);
        // The threshold grows with this system's noise (see LEVEL_SIGMAS).
        let jump = self.jump_threshold();
        let jumped = self.level.map(|level| y - level).filter(|d| d.abs() > jump);
        let noisy = self.is_noisy();
        // A jump on a noisy system (within the cooldown too) is a suspect: confirmed by the
        // rate once RESCAN_CONFIRM_PERIODS have passed and a scan may start. On a quiet
        // system a jump starts a scan at once, and one within the cooldown is ignored: after
        // a scan the level moves as the search climbs, and a suspect judged seconds later
        // against the level before it started a needless scan (heavy, seed 2: −20 %).
        let suspected = jumped.is_some() && self.suspect.is_none() && noisy;
        if let Some(d) = jumped.filter(|_| suspected) {
            self.suspect = self.suspect_from(now, d.signum());
        }
        let confirm = Nanos(self.cfg.period.0.saturating_mul(RESCAN_CONFIRM_PERIODS));
        let confirmed = match self.suspect {
            Some(suspect) if may_rescan && now.saturating_sub(suspect.since) >= confirm => {
                self.suspect = None;
                suspect.still_away(y)
            }
            _ => false,
        };
        let immediate = jumped.is_some() && !noisy && may_rescan;
        if confirmed || immediate {
            // The workload changed: the achievable rate jumped far beyond what probes and
            // noise move it by (and stayed there, where stalls are common). Bracket the new
            // optimum again rather than wait.
            self.start_scan();
            let x = self.scan_step(y).unwrap_or(self.x);
            return self.apply_x(now, x);
        }
        if let Some(level) = self.level.filter(|_| !suspected) {
            // (A suspected jump is not the system's usual wander: learning from it would
            // raise the thresholds, and mark a quiet system noisy.)
            let d = y - level;
            self.level_var = (1.0 - LEVEL_VAR_EWMA_WEIGHT) * self.level_var + LEVEL_VAR_EWMA_WEIGHT * d * d;
        }
        self.level = Some(
            self.level
                .map_or(y, |l| (1.0 - LEVEL_EWMA_WEIGHT) * l + LEVEL_EWMA_WEIGHT * y),
        );
        if self.record_secant(y) {
            if let Some(g) = self.gradient() {
                self.step_centre(g);
            }
        }
        self.side = -self.side;
        let delta = self.cfg.probe.max(self.step).min(X_PROBE_MAX);
        let mut next = probe_x(self.centre, self.side, delta);
        if (next - self.x).abs() < self.cfg.probe - X_EPS {
            // The centre moved by about the probe width: this side lands where the last
            // period was, which would waste the period (no secant); take the other side.
            self.side = -self.side;
            next = probe_x(self.centre, self.side, delta);
        }
        self.apply_x(now, next)
    }

    /// Applies `x` from `now`: the rates seen so far belong to the previous X.
    fn apply_x(&mut self, now: Nanos, x: f64) -> f64 {
        self.x = x;
        self.samples.clear();
        self.changed_at = now;
        self.x
    }
}

/// Gradient descent of X on the measured tail latency at a fixed rate: Algorithm I's inner
/// loop (X-R ordering), kept to reproduce the instability the paper reports (§4.2).
#[derive(Clone, Debug)]
pub struct LatencyFractionLoop {
    /// Tuning (`gain` applies to the relative latency gradient; no dwell, no settling).
    cfg: FractionLoopConfig,
    /// The fraction currently applied.
    x: f64,
    /// When the next update is due.
    next_tick: Nanos,
    /// The previous (X, T) point.
    prev: Option<(f64, f64)>,
    /// Sign of the last move.
    direction: f64,
}

impl LatencyFractionLoop {
    /// A loop starting at `cfg.x_init`, first updating one period after `now`.
    pub fn new(cfg: FractionLoopConfig, now: Nanos) -> Result<Self, ConfigError> {
        cfg.validate()?;
        Ok(LatencyFractionLoop {
            x: cfg.x_init,
            next_tick: now.saturating_add(cfg.period),
            prev: None,
            direction: -1.0,
            cfg,
        })
    }

    /// The fraction to apply now.
    pub fn x(&self) -> f64 {
        self.x
    }

    /// When `tick` is next due.
    pub fn next_tick(&self) -> Nanos {
        self.next_tick
    }

    /// Updates X from the tail latency `t_ns` measured over the last period (None: no
    /// samples, X holds). Returns the new X.
    pub fn tick(&mut self, now: Nanos, t_ns: Option<f64>) -> f64 {
        while self.next_tick <= now {
            self.next_tick = self.next_tick.saturating_add(self.cfg.period);
        }
        let Some(t) = t_ns else {
            return self.x;
        };
        let step = match self.prev {
            Some((xp, tp)) if (self.x - xp).abs() > X_EPS && tp + t > 0.0 => {
                let gradient = ((t - tp) / (0.5 * (t + tp))) / (self.x - xp);
                bounded_step(
                    -self.cfg.gain * gradient,
                    self.cfg.step_min,
                    self.cfg.step_max,
                    self.direction,
                )
            }
            _ => probe_dir(self.x, self.direction) * self.cfg.step_min,
        };
        self.prev = Some((self.x, t));
        let next = (self.x + step).clamp(0.0, 1.0);
        self.direction = if step > 0.0 { 1.0 } else { -1.0 };
        self.x = next;
        self.x
    }
}

/// What the X-loop tests here and in `kayak` share.
#[cfg(test)]
pub(crate) mod test_support {
    use rand::{Rng, SeedableRng};

    use super::{FractionLoop, FractionLoopConfig};
    use crate::time::Nanos;

    /// An X loop starting from X = 0.5, mid-range, at time 0.
    pub(crate) fn centred() -> FractionLoop {
        let cfg = FractionLoopConfig {
            x_init: 0.5,
            ..FractionLoopConfig::default()
        };
        FractionLoop::new(cfg, Nanos::ZERO).unwrap()
    }

    /// A rate's luck, redrawn per X period: up to ±40 %, log-uniform, from a fixed seed.
    pub(crate) struct Luck {
        rng: rand_chacha::ChaCha8Rng,
        /// The current factor (1 until the first draw).
        pub(crate) now: f64,
    }

    impl Luck {
        pub(crate) fn new() -> Self {
            Luck {
                rng: rand_chacha::ChaCha8Rng::seed_from_u64(3),
                now: 1.0,
            }
        }

        pub(crate) fn draw(&mut self) {
            self.now = (self.rng.gen::<f64>() * 0.8 - 0.4).exp();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the ascent against a deterministic concave R(X), feeding one rate per 5 ms.
    fn ascend(x_init: f64, r_of_x: impl Fn(f64) -> f64, periods: u64) -> Vec<f64> {
        let cfg = FractionLoopConfig {
            x_init,
            ..FractionLoopConfig::default()
        };
        let mut fl = FractionLoop::new(cfg, Nanos::ZERO).unwrap();
        let mut xs = Vec::new();
        for k in 1..=periods * 10 {
            let now = Nanos::from_ms(5 * k);
            fl.observe_rate(now, r_of_x(fl.x()));
            if now >= fl.next_tick() {
                xs.push(fl.tick(now));
            }
        }
        xs
    }

    /// Scans the stalls of the noisy-system test may start by chance (a period after the
    /// stall lucky enough to look like a lasting change).
    const STALL_SCANS_MAX: usize = 2;

    /// Periods the initial coarse scan takes.
    const SCAN_PERIODS: usize = SCAN_POINTS * SCAN_PERIODS_PER_POINT;

    #[test]
    fn climbs_to_an_interior_optimum_from_either_side() {
        // R(X) = 1e6 (1 − 2 (X − 0.4)²): optimum at 0.4.
        let r = |x: f64| 1e6 * (1.0 - 2.0 * (x - 0.4) * (x - 0.4));
        for x0 in [0.0, 0.25, 0.75, 1.0] {
            let xs = ascend(x0, r, 40);
            let tail = &xs[20..];
            let mean = tail.iter().sum::<f64>() / tail.len() as f64;
            assert!((mean - 0.4).abs() < 0.05, "x0={x0}: mean {mean}, {xs:?}");
        }
    }

    #[test]
    fn the_scan_brackets_then_the_search_climbs_a_tent() {
        // A tent peaking at 0.2 with a shallow right side (medium work's shape): the scan
        // brackets it (its best grid point is 0.5; the parabola through the grid points
        // moves the start toward the peak) and the local search walks the rest of the way.
        let r = |x: f64| {
            if x < 0.2 {
                1e6 * (1.0 - 0.8 * (0.2 - x))
            } else {
                1e6 * (1.0 - 0.4 * (x - 0.2))
            }
        };
        let xs = ascend(1.0, r, 40);
        let first_probe = xs[SCAN_PERIODS - 1];
        assert!(first_probe < 0.5 && first_probe > 0.25 - X_PROBE_MAX, "{xs:?}");
        let tail = &xs[25..];
        let mean = tail.iter().sum::<f64>() / tail.len() as f64;
        assert!((mean - 0.2).abs() < 0.05, "mean {mean}, {xs:?}");
    }

    #[test]
    fn stays_at_the_boundary_when_it_is_the_optimum() {
        // Increasing R(X): optimum X = 1. The centre sits on it, the probes beside it.
        let xs = ascend(0.5, |x| 1e6 * (1.0 + x), 60);
        let tail = &xs[30..];
        assert!(
            tail.iter().all(|&x| x >= 1.0 - 2.0 * X_PROBE_DEFAULT - 1e-9),
            "{tail:?}"
        );
        let mean = tail.iter().sum::<f64>() / tail.len() as f64;
        assert!(mean >= 1.0 - X_PROBE_DEFAULT - 1e-9, "{mean}");
    }

    #[test]
    fn every_step_is_bounded_and_the_optimum_at_zero_is_reached() {
        let xs = ascend(1.0, |x| 1e6 * (2.0 - x), 30);
        let mut prev = xs[SCAN_PERIODS - 1];
        for &x in &xs[SCAN_PERIODS..] {
            // A move of the centre plus the swing from one probe to the other.
            assert!(
                (x - prev).abs() <= X_STEP_MAX_DEFAULT + 2.0 * X_PROBE_MAX + 1e-9,
                "{xs:?}"
            );
            prev = x;
        }
        assert!(*xs.last().unwrap() <= 2.0 * X_PROBE_DEFAULT + 1e-9, "{xs:?}");
    }

    // Regression (real processes): each 50 ms period's rate there is off by 20–50 % at
    // random, so a probe pair's secant is mostly noise; X wandered over [0.2, 0.9] on a
    // flat R(X), and each move cost tail latency.
    #[test]
    fn noise_does_not_move_the_centre() {
        let mut fl = test_support::centred();
        let mut luck = test_support::Luck::new();
        let mut centres = Vec::new();
        for k in 1..=2_000u64 {
            let now = Nanos::from_ms(5 * k);
            // A flat R(X); each X period has its own luck, ±40 % (log-uniform).
            fl.observe_rate(now, 1e5 * luck.now);
            if now >= fl.next_tick() {
                fl.tick(now);
                luck.draw();
                if !fl.is_scanning() {
                    centres.push(fl.centre());
                }
            }
        }
        // Once the noise is learned (~10 periods), the centre stays put.
        let settled = &centres[20..];
        let (lo, hi) = settled.iter().fold((1.0f64, 0.0f64), |(a, b), &c| (a.min(c), b.max(c)));
        assert!(hi - lo <= 0.1, "the centre wandered over [{lo:.2}, {hi:.2}]");
    }

    #[test]
    fn the_parabola_peak_of_three_points() {
        let p = parabola_peak(&[(0.0, 1.0), (0.5, 2.0), (1.0, 1.5)]).unwrap();
        // y = −3x² + 3.5x + 1: peak at 3.5 / 6.
        assert!((p - 3.5 / 6.0).abs() < 1e-9, "{p}");
        assert!(parabola_peak(&[(0.0, 1.0), (0.5, 0.5), (1.0, 1.0)]).is_none());
        assert!(parabola_peak(&[(0.0, 1.0), (1.0, 2.0)]).is_none());
    }

    #[test]
    fn a_linear_drift_does_not_move_the_centre() {
        // R(X) flat, but the rate drifts upward by 1 % per period: the antithetic secants
        // see the drift with opposite signs, so the centre stays near where it started.
        let mut fl = test_support::centred();
        for k in 1..=400u64 {
            let now = Nanos::from_ms(5 * k);
            fl.observe_rate(now, 1e6 * (0.002 * k as f64).exp());
            if now >= fl.next_tick() {
                fl.tick(now);
            }
        }
        // The scan picks the last grid point it saw (the drift favours it); from there the
        // centre must not run away.
        let centre = fl.centre();
        let (xs, _) = (0..40).fold((Vec::new(), 400u64), |(mut v, k), _| {
            for j in 1..=10 {
                let now = Nanos::from_ms(5 * (k + j));
                fl.observe_rate(now, 1e6 * (0.002 * (k + j) as f64).exp());
                if now >= fl.next_tick() {
                    v.push(fl.tick(now));
                }
            }
            (v, k + 10)
        });
        assert!(
            (fl.centre() - centre).abs() <= 0.1,
            "{centre} → {}: {xs:?}",
            fl.centre()
        );
    }

    #[test]
    fn a_jump_of_the_rate_starts_a_new_scan() {
        let mut fl = test_support::centred();
        let mut level = 1e6;
        // The jump comes at 2 s: after the first scan (0.3 s) and its cooldown (1 s).
        for k in 1..=600u64 {
            if k == 400 {
                level = 1.5e6;
            }
            let now = Nanos::from_ms(5 * k);
            fl.observe_rate(now, level);
            if now >= fl.next_tick() {
                fl.tick(now);
                if k > 400 && k <= 420 {
                    assert!(fl.is_scanning(), "no scan after the jump at {k}");
                }
            }
        }
    }

    /// When the workload changes in the stall tests (ms).
    const CHANGE_MS: u64 = 30_000;

    /// What disturbs the rescan tests' X loop, every `Scenario::every_ms`.
    #[derive(Clone, Copy, PartialEq)]
    enum Disturbance {
        /// A node stall cuts the rate to 30 % for two X periods: a jump of the rate.
        Stall,
        /// Something outside calls for a rescan (as a false report of a change would).
        Rescan,
    }

    /// One run of the rescan tests: an X loop from X = 0.5 against R(X) = 1e6 × a tent
    /// peaking at 0.2 (medium work) until `change_ms`, then `after` × a tent peaking at
    /// `after_peak`, with `disturbance` every `every_ms`. Each X period's rate is multiplied
    /// by its luck raised to `noise_power` (0: none; 0.6: ±24 %, log-uniform).
    struct Scenario {
        disturbance: Disturbance,
        every_ms: u64,
        change_ms: u64,
        after: f64,
        after_peak: f64,
        noise_power: f64,
        duration_ms: u64,
    }

    impl Scenario {
        /// The stall tests' scenario: the change at CHANGE_MS, a disturbance every 1.5 s.
        fn every_1_5_s(
            disturbance: Disturbance,
            after: f64,
            after_peak: f64,
            noise_power: f64,
            duration_ms: u64,
        ) -> Self {
            Scenario {
                disturbance,
                every_ms: 1_500,
                change_ms: CHANGE_MS,
                after,
                after_peak,
                noise_power,
                duration_ms,
            }
        }

        /// Runs it. Returns the loop, the times at which scans started, and whether the
        /// loop was noisy just before the change.
        fn run(&self) -> (FractionLoop, Vec<u64>, bool) {
            let tent = |x: f64, peak: f64| 1.0 - 0.5 * (x - peak).abs();
            let mut fl = test_support::centred();
            let mut luck = test_support::Luck::new();
            let mut scan_starts = Vec::new();
            let mut scanning = fl.is_scanning();
            let mut noisy_before_change = false;
            let period_ms = FRACTION_PERIOD_DEFAULT.0 / 1_000_000;
            for k in 1..=self.duration_ms / 5 {
                let t_ms = 5 * k;
                let r = if t_ms >= self.change_ms {
                    self.after * tent(fl.x(), self.after_peak)
                } else {
                    1e6 * tent(fl.x(), 0.2)
                };
                let stalled = self.disturbance == Disturbance::Stall && t_ms % self.every_ms < 2 * period_ms;
                let now = Nanos::from_ms(t_ms);
                fl.observe_rate(now, luck.now.powf(self.noise_power) * if stalled { 0.3 * r } else { r });
                if now >= fl.next_tick() {
                    if self.disturbance == Disturbance::Rescan && t_ms % self.every_ms == 0 {
                        fl.rescan();
                    }
                    fl.tick(now);
                    luck.draw();
                    if fl.is_scanning() && !scanning {
                        scan_starts.push(t_ms);
                    }
                    scanning = fl.is_scanning();
                    if t_ms + period_ms == self.change_ms {
                        noisy_before_change = fl.is_noisy();
                    }
                }
            }
            (fl, scan_starts, noisy_before_change)
        }
    }

    /// The latest a change may be rescanned: the longest cooldown, and a stall's spacing.
    fn latest_rescan_ms() -> u64 {
        let period_ms = FRACTION_PERIOD_DEFAULT.0 / 1_000_000;
        CHANGE_MS + period_ms * (RESCAN_COOLDOWN_PERIODS << RESCAN_BACKOFF_MAX) + 1_500
    }

    #[test]
    fn false_alarms_back_off_and_a_moved_optimum_resets_the_cooldown() {
        // No noise, no stalls: every 1.5 s something calls for a rescan, and until 30 s
        // every scan finds the optimum where it was. At 30 s the workload does change: R(X)
        // doubles and peaks at X = 1 (light work).
        let (fl, scan_starts, noisy) = Scenario::every_1_5_s(Disturbance::Rescan, 2e6, 1.0, 0.0, 60_000).run();
        assert!(!noisy);
        let before = scan_starts.iter().filter(|&&t| t < CHANGE_MS).count();
        // Cooldowns of 1, 2, 4 and 8 s: scans at 1.5, 4.5, 9, 18 and 27 s. Without the
        // backoff every call starts one (19 in 30 s).
        assert!(before <= 7, "false alarms: {scan_starts:?}");
        // The change comes within the longest cooldown (a quiet system ignores a jump there);
        // the first call after it rescans, and X ends at 1.
        let found = scan_starts.iter().copied().find(|&t| t >= CHANGE_MS);
        assert!(
            found.is_some_and(|t| t <= latest_rescan_ms()),
            "change not rescanned: {scan_starts:?}"
        );
        assert!(fl.centre() >= 0.75, "centre {} after the change", fl.centre());
    }

    #[test]
    fn a_rescan_that_moves_the_optimum_resets_the_backoff() {
        // Rescans are called for every 0.5 s. The one at 1.5 s finds the optimum (0.2)
        // where it was: the cooldown doubles to 2 s. At 4 s the workload changes (R(X)
        // doubles, peaking at X = 1) as a rescan is called: that scan moves the optimum, so
        // the cooldown is back to 1 s and the call at 5.5 s starts a scan (with the cooldown
        // still doubled, the first would be at 6.5 s).
        let (_, scan_starts, _) = Scenario {
            disturbance: Disturbance::Rescan,
            every_ms: 500,
            change_ms: 4_000,
            after: 2e6,
            after_peak: 1.0,
            noise_power: 0.0,
            duration_ms: 8_000,
        }
        .run();
        assert!(
            scan_starts.starts_with(&[1_500, 4_000]) && scan_starts.get(2).is_some_and(|&t| t <= 6_000),
            "{scan_starts:?}"
        );
    }

    #[test]
    fn on_a_noisy_system_a_stall_does_not_rescan_but_a_lasting_change_does() {
        // Each X period's rate has its own luck, ±24 % (real processes). At 30 s the
        // workload changes for good: a third of the rate, peaking at X = 0.9.
        let (fl, scan_starts, noisy) = Scenario::every_1_5_s(Disturbance::Stall, 0.33e6, 0.9, 0.6, 45_000).run();
        assert!(noisy);
        let before = scan_starts.iter().filter(|&&t| t < CHANGE_MS).count();
        // Measured: none (the change's scan starts at 30.25 s). Without the confirmation 14
        // stalls start scans: the noise makes each scan's best point look new, so the
        // backoff does not space them.
        assert!(before <= STALL_SCANS_MAX, "stalls rescanned: {scan_starts:?}");
        let found = scan_starts.iter().copied().find(|&t| t >= CHANGE_MS);
        assert!(
            found.is_some_and(|t| t <= latest_rescan_ms()),
            "change not rescanned: {scan_starts:?}"
        );
        assert!(fl.centre() >= 0.6, "centre {} after the change", fl.centre());
    }

    #[test]
    fn latency_loop_descends_a_convex_latency() {
        let cfg = FractionLoopConfig {
            x_init: 1.0,
            period: Nanos::from_ms(5),
            ..FractionLoopConfig::default()
        };
        let mut fl = LatencyFractionLoop::new(cfg, Nanos::ZERO).unwrap();
        for k in 1..=400u64 {
            let x = fl.x();
            let t = 100e3 * (1.0 + 4.0 * (x - 0.3) * (x - 0.3));
            fl.tick(Nanos::from_ms(5 * k), Some(t));
        }
        assert!((fl.x() - 0.3).abs() < 0.1, "{}", fl.x());
    }

    #[test]
    fn rejects_bad_config() {
        let cfg = FractionLoopConfig {
            step_min: 0.2,
            step_max: 0.1,
            ..FractionLoopConfig::default()
        };
        assert!(FractionLoop::new(cfg, Nanos::ZERO).is_err());
        let cfg = FractionLoopConfig {
            x_init: 1.5,
            ..FractionLoopConfig::default()
        };
        assert!(FractionLoop::new(cfg, Nanos::ZERO).is_err());
    }
}
