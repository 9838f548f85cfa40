//! The evidence one rate decision rests on: the completions of requests admitted since
//! the last change of R, gathered until there are enough of them to estimate the SLO's
//! quantile.
//!
//! Two rules make a measurement mean something:
//! - **It measures the rate it was made at.** A completion counts only if its request was
//!   admitted after the last change of R (its admission time is its completion time minus
//!   its latency). Requests admitted before measure the old rate and any backlog it built.
//! - **It holds enough completions, over long enough.** A q-quantile estimated from n
//!   completions rests on the (1 − q)·n of them above it; with 100 completions a p99 is one
//!   sample. A decision waits for [`TAIL_SAMPLES`] completions beyond the SLO's quantile
//!   and for at least one period (node stalls make the tail of a shorter span a
//!   matter of luck, however many completions it holds), unless the evidence is already
//!   decisive: [`TAIL_SAMPLES`] completions slower than the SLO at [`OVERLOAD_FACTOR`] times
//!   the share allowed. After [`SPAN_MAX_PERIODS`] periods it decides on what it has.
//!
//! A request the driver refused (its wait for a slot would have broken the SLO) counts as
//! a fresh completion slower than the SLO: refusing is never a way to look fast.

use crate::quantile::LatencySketch;
use crate::time::Nanos;

/// Completions beyond the SLO's quantile a decision waits for: the tail share of a
/// window is then known to ±1/√20 ≈ ±22 %, which moves a p99 by a few percent.
pub const TAIL_SAMPLES: f64 = 20.0;

/// An early decision on slow completions alone needs their share to exceed the target by
/// this factor: stopping as soon as [`TAIL_SAMPLES`] slow ones arrived would otherwise
/// stop early on luck near the target and bias the estimate up (at the target share,
/// 20 slow among 2 500/4 completions has a chance of ~10⁻⁶).
pub const OVERLOAD_FACTOR: f64 = 4.0;

/// Completions beyond the SLO's quantile whose worth a window after a failure needs,
/// none of them slow, to decide the overload has passed: at a slow share of 1 − q (a tail
/// at the SLO), 5 / (1 − q) completions hold none slow by chance with probability e⁻⁵
/// (< 1 %). Waiting for a full window instead held R at the cut for a third of a second
/// after a 200 ms stall had passed, and made startup from a low rate take seconds.
pub const QUIET_SAMPLES: f64 = 5.0;

/// Most periods a decision may wait for enough completions: 64 periods (0.32 s at 200 Hz);
/// then it decides on what it has, if it has anything.
pub const SPAN_MAX_PERIODS: u64 = 64;

/// A window whose stale completions are at least this share of all its completions
/// measured a backlog draining, not the current rate: in steady state the stale
/// completions of a window are the requests in flight at its start (Little: R × latency),
/// ~2 % of a 5 ms window at the simulator's latencies.
pub const STALE_SHARE_MAX: f64 = 0.1;

/// The latency a refused request is recorded at, as a multiple of the SLO: over it, so
/// the window's tail sees the refusal, and by as much as a tail whose cut is the floor.
pub const REFUSED_LATENCY_FACTOR: f64 = 2.0;

/// What a window needs to know.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WindowConfig {
    /// The latency a completion is slow beyond: the SLO less the loop's margin, ns.
    pub slo_ns: f64,
    /// The SLO's quantile.
    pub quantile: f64,
    /// The R-loop period: the shortest span of a decision.
    pub period: Nanos,
}

impl WindowConfig {
    /// Completions a full decision waits for.
    pub fn samples_min(&self) -> u64 {
        (TAIL_SAMPLES / (1.0 - self.quantile) - 1e-9).ceil() as u64
    }
}

/// One decision's evidence.
#[derive(Clone)]
pub struct Measurement {
    /// When the decision is made.
    pub now: Nanos,
    /// How long the evidence was gathered (since the last change of R).
    pub span: Nanos,
    /// Fresh completions.
    pub count: u64,
    /// Those slower than the SLO.
    pub slow: u64,
    /// Their latencies.
    pub latency: LatencySketch,
    /// Completions of requests admitted before the last change, over the same span: the
    /// backlog the old rate left, still draining.
    pub stale: u64,
    /// Those slower than the SLO: a slow request is far likelier than a fast one to finish
    /// after the decision following its admission, so they say how slow the last rate was.
    pub stale_slow: u64,
    /// Fresh requests refused for want of a slot (counted in `count` and `slow`: they were
    /// not served, and the node delivered none of them).
    pub refused: u64,
    /// Whether it holds a full window's completions (otherwise the evidence was decisive
    /// early, or the span ran out, and its quantile rests on fewer samples than it should).
    pub full: bool,
}

impl Measurement {
    /// The share of fresh completions slower than the SLO.
    pub fn slow_share(&self) -> f64 {
        self.slow as f64 / self.count.max(1) as f64
    }

    /// Whether it measured a backlog from before the last change draining (see
    /// [`STALE_SHARE_MAX`]) rather than the current rate.
    pub fn measured_backlog(&self) -> bool {
        self.stale as f64 >= STALE_SHARE_MAX * self.completions() as f64
    }

    /// All completions over the span, fresh and stale.
    pub fn completions(&self) -> u64 {
        self.count + self.stale
    }

    /// All completions over the span slower than the SLO, fresh and stale.
    pub fn slow_completions(&self) -> u64 {
        self.slow + self.stale_slow
    }

    /// All requests answered (fresh and stale, served or refused) per second over the
    /// span: the rate the loop's cuts and memory work from. Refusals count, so a stall's
    /// window, whose arrivals were refused, does not disprove the capacity the node has.
    pub fn delivered_ops(&self) -> f64 {
        self.completions() as f64 / self.span.as_secs_f64().max(1e-9)
    }

    /// Requests served (not refused) per second over the span: what the node delivered.
    /// An overloaded node that refuses what it cannot serve still answers every request
    /// offered, so overload shows here, not in [`Measurement::delivered_ops`].
    pub fn served_ops(&self) -> f64 {
        self.completions().saturating_sub(self.refused) as f64 / self.span.as_secs_f64().max(1e-9)
    }
}

/// Completions gathered toward the next decision.
#[derive(Clone)]
pub struct Window {
    cfg: WindowConfig,
    /// When R last changed: completions of requests admitted before are stale.
    since: Nanos,
    count: u64,
    slow: u64,
    stale: u64,
    stale_slow: u64,
    /// Refusals counted among the fresh slow ones.
    refused: u64,
    /// It decides on clean evidence early (see [`Window::quick`]).
    recovering: bool,
    latency: LatencySketch,
}

impl Window {
    /// An empty window whose evidence starts at `now`.
    pub fn new(cfg: WindowConfig, now: Nanos) -> Self {
        Window {
            cfg,
            since: now,
            count: 0,
            slow: 0,
            stale: 0,
            stale_slow: 0,
            refused: 0,
            recovering: false,
            latency: LatencySketch::new(),
        }
    }

    /// Counts one completion at `now` of a request that took `latency_ns`.
    pub fn record(&mut self, now: Nanos, latency_ns: u64) {
        let slow = u64::from(latency_ns as f64 > self.cfg.slo_ns);
        if now.saturating_sub(Nanos(latency_ns)) < self.since {
            self.stale += 1;
            self.stale_slow += slow;
            return;
        }
        self.count += 1;
        self.slow += slow;
        self.latency.record(latency_ns as f64);
    }

    /// Counts one request refused at `now` before it was sent: fresh, and over the SLO.
    pub fn record_refused(&mut self, _now: Nanos) {
        self.count += 1;
        self.slow += 1;
        self.refused += 1;
        self.latency.record(REFUSED_LATENCY_FACTOR * self.cfg.slo_ns);
    }

    /// The SLO quantile of the evidence so far, if there is any.
    pub fn quantile(&self) -> Option<f64> {
        self.latency.quantile(self.cfg.quantile)
    }

    /// Fresh completions served so far (refusals are not).
    pub fn count(&self) -> u64 {
        self.count - self.refused
    }

    /// A window that only has to show whether there is room (one after a window over the
    /// SLO, or one of startup's): it may decide as soon as its evidence is clean (see
    /// [`QUIET_SAMPLES`]).
    pub fn quick(mut self) -> Self {
        self.recovering = true;
        self
    }

    /// Whether the evidence is enough for a decision at `now` (see the module docs).
    pub fn ready(&self, now: Nanos) -> bool {
        let span = now.saturating_sub(self.since);
        let served = self.count();
        if self.overloaded() || (span >= self.cfg.period && (served >= self.cfg.samples_min() || self.quiet())) {
            return true;
        }
        self.count > 0 && span.0 >= self.cfg.period.0.saturating_mul(SPAN_MAX_PERIODS)
    }

    /// Decisive early: enough served completions over the SLO, far over the share allowed
    /// (refusals count in the share). It waits for served ones: during a stall nothing
    /// completes and every arrival is refused, and a decision on refusals alone would be
    /// taken before anything came back to judge by, and again at every tick.
    fn overloaded(&self) -> bool {
        let served_slow = self.slow - self.refused;
        served_slow as f64 >= TAIL_SAMPLES
            && self.slow as f64 >= OVERLOAD_FACTOR * (1.0 - self.cfg.quantile) * self.count as f64
    }

    /// Decisive early for a quick window: [`QUIET_SAMPLES`] completions' worth of the
    /// SLO's allowance served and none of them slow.
    fn quiet(&self) -> bool {
        self.recovering && self.slow == 0 && self.count() as f64 >= QUIET_SAMPLES / (1.0 - self.cfg.quantile)
    }

    /// Takes the evidence gathered so far and starts a new window at `now` (R changes now).
    pub fn take(&mut self, now: Nanos) -> Measurement {
        let m = Measurement {
            now,
            span: now.saturating_sub(self.since),
            count: self.count,
            slow: self.slow,
            latency: std::mem::take(&mut self.latency),
            stale: self.stale,
            stale_slow: self.stale_slow,
            refused: self.refused,
            full: self.count >= self.cfg.samples_min(),
        };
        *self = Window::new(self.cfg, now);
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> WindowConfig {
        WindowConfig {
            slo_ns: 1_000.0,
            quantile: 0.9,
            period: Nanos::from_ms(5),
        }
    }

    #[test]
    fn waits_for_enough_tail_samples_over_a_period() {
        let mut w = Window::new(cfg(), Nanos::ZERO);
        assert_eq!(cfg().samples_min(), 200);
        for i in 0..199u64 {
            w.record(Nanos(10_000 + i), 600);
        }
        assert!(!w.ready(Nanos::from_ms(5)));
        w.record(Nanos(20_000), 600);
        // Enough completions, but not yet a period.
        assert!(!w.ready(Nanos::from_ms(4)));
        assert!(w.ready(Nanos::from_ms(5)));
        let m = w.take(Nanos::from_ms(5));
        assert_eq!((m.count, m.slow, m.full), (200, 0, true));
        assert_eq!(w.count(), 0);
    }

    #[test]
    fn decisive_evidence_decides_early_and_a_long_wait_decides_anyway() {
        let cfg = || WindowConfig {
            quantile: 0.99,
            ..super::tests::cfg()
        };
        // Twenty slow completions among a hundred: the tail is over, whatever the rest.
        let mut w = Window::new(cfg(), Nanos::ZERO);
        for i in 0..100u64 {
            w.record(Nanos(10_000 + i), if i < 20 { 5_000 } else { 100 });
        }
        assert!(w.ready(Nanos::from_ms(1)));
        // Twenty slow among thousands is luck near the target, not decisive.
        let mut w = Window::new(cfg(), Nanos::ZERO);
        for i in 0..2_000u64 {
            w.record(Nanos(10_000 + i), if i < 20 { 5_000 } else { 100 });
        }
        assert!(!w.ready(Nanos::from_ms(1)));
        // After SPAN_MAX_PERIODS periods it decides on what it has.
        let mut w = Window::new(cfg(), Nanos::ZERO);
        w.record(Nanos(10_000), 100);
        assert!(!w.ready(Nanos::from_ms(5 * SPAN_MAX_PERIODS - 1)));
        assert!(w.ready(Nanos::from_ms(5 * SPAN_MAX_PERIODS)));
        assert!(!w.take(Nanos::from_ms(5 * SPAN_MAX_PERIODS)).full);
    }

    #[test]
    fn a_refused_request_is_a_fresh_completion_over_the_slo() {
        let mut w = Window::new(cfg(), Nanos::ZERO);
        for i in 0..9u64 {
            w.record(Nanos(10_000 + i), 100);
        }
        w.record_refused(Nanos(20_000));
        let m = w.take(Nanos::from_ms(5));
        assert_eq!((m.count, m.slow), (10, 1));
        // It is in the evidence's latencies, over the SLO.
        assert!(m.latency.max().unwrap() > cfg().slo_ns);
        // It was answered, but the node did not serve it: 9 served in 5 ms.
        assert!((m.delivered_ops() - 2_000.0).abs() < 1e-6, "{}", m.delivered_ops());
        assert!((m.served_ops() - 1_800.0).abs() < 1e-6, "{}", m.served_ops());
    }

    #[test]
    fn requests_admitted_before_the_change_are_stale() {
        let mut w = Window::new(cfg(), Nanos::from_ms(10));
        // Completes after the change but was admitted 2 ms before it.
        w.record(Nanos::from_ms(11), 3_000_000);
        w.record(Nanos::from_ms(11), 500);
        let m = w.take(Nanos::from_ms(15));
        assert_eq!((m.count, m.stale, m.slow), (1, 1, 0));
        assert_eq!((m.completions(), m.slow_completions()), (2, 1));
        assert!((m.delivered_ops() - 400.0).abs() < 1e-6);
    }
}
