//! The evidence one rate decision rests on: the completions of requests admitted since
//! the last change of R, gathered until there are enough of them to estimate the quantile
//! the core controls.
//!
//! Two rules make a measurement mean something:
//! - **It measures the rate it was made at.** A completion counts only if its request was
//!   admitted after the last change of R (its admission time is its completion time minus
//!   its latency). Requests admitted before measure the old rate and any backlog it built.
//! - **It holds enough completions, over long enough.** A q-quantile estimated from n
//!   completions rests on the (1 − q)·n of them above it; with 100 completions a p99 is one
//!   sample. A decision waits for [`TAIL_SAMPLES`] completions beyond the controlled
//!   quantile and for at least one period (node stalls make the tail of a shorter span a
//!   matter of luck, however many completions it holds), unless the evidence is already
//!   decisive: [`TAIL_SAMPLES`] completions slower than the SLO at [`OVERLOAD_FACTOR`] times
//!   the share allowed. After [`SPAN_MAX_PERIODS`] periods it decides on what it has.

use crate::quantile::LatencySketch;
use crate::time::Nanos;

/// Completions beyond the controlled quantile a decision waits for: the tail share of a
/// window is then known to ±1/√20 ≈ ±22 %, which moves a p99 by a few percent.
pub const TAIL_SAMPLES: f64 = 20.0;

/// An early decision on slow completions alone needs their share to exceed the target by
/// this factor: stopping as soon as [`TAIL_SAMPLES`] slow ones arrived would otherwise
/// stop early on luck near the target and bias the estimate up (at the target share,
/// 20 slow among 2 500/4 completions has a chance of ~10⁻⁶).
pub const OVERLOAD_FACTOR: f64 = 4.0;

/// Most periods a decision may wait for enough completions: 64 periods (0.32 s at 200 Hz);
/// then it decides on what it has, if it has anything.
pub const SPAN_MAX_PERIODS: u64 = 64;

/// A window whose stale completions are at least this share of all its completions
/// measured a backlog draining, not the current rate: in steady state the stale
/// completions of a window are the requests in flight at its start (Little: R × latency),
/// ~2 % of a 5 ms window at the simulator's latencies.
pub const STALE_SHARE_MAX: f64 = 0.1;

/// What a window needs to know.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WindowConfig {
    /// The SLO latency, ns.
    pub slo_ns: f64,
    /// The share of completions allowed over the SLO that the loop aims for.
    pub target_share: f64,
    /// The quantile the core controls.
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
    /// Those slower than the SLO. The pooled share of slow completions counts them: a slow
    /// request is far likelier than a fast one to finish after the decision following its
    /// admission, and leaving them out hid most slow completions from the tail budget.
    pub stale_slow: u64,
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

    /// All completions (fresh and stale) per second over the span: what the node delivered.
    pub fn delivered_ops(&self) -> f64 {
        self.completions() as f64 / self.span.as_secs_f64().max(1e-9)
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

    /// Fresh completions so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Whether the evidence is enough for a decision at `now` (see the module docs).
    pub fn ready(&self, now: Nanos) -> bool {
        let span = now.saturating_sub(self.since);
        if self.overloaded() || (self.count >= self.cfg.samples_min() && span >= self.cfg.period) {
            return true;
        }
        self.count > 0 && span.0 >= self.cfg.period.0.saturating_mul(SPAN_MAX_PERIODS)
    }

    fn overloaded(&self) -> bool {
        self.slow as f64 >= TAIL_SAMPLES
            && self.slow as f64 >= OVERLOAD_FACTOR * self.cfg.target_share * self.count as f64
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
            target_share: 0.008,
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
