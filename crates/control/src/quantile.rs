//! Latency quantiles from a DDSketch, over everything recorded or over a sliding time window.
//!
//! Never a sort: a sketch has bounded memory and O(1) insertion, and its quantiles carry
//! a relative-error guarantee, which is what a p99 compared against an SLO needs.

use sketches_ddsketch::{Config, DDSketch};

use crate::error::{check_range, ControlError};
use crate::time::Nanos;

/// Relative accuracy of every latency quantile: 0.5 % keeps a 200 µs p99 within ±1 µs, well
/// inside the noise of any p99 estimated from a few thousand samples.
pub const SKETCH_RELATIVE_ACCURACY: f64 = 0.005;

/// Bin budget of one sketch: at 0.5 % accuracy, 4096 bins span 1 ns to beyond an hour, so
/// no realistic latency is ever collapsed into an edge bin.
pub const SKETCH_BINS_MAX: u32 = 4096;

/// Smallest value the sketch distinguishes from zero, in the unit recorded (nanoseconds).
const SKETCH_MIN_VALUE: f64 = 1.0;

/// Upper bound on the number of slots of a [`QuantileWindow`]: each slot is one sketch,
/// and a query merges all of them, so this bounds a query's cost.
pub const WINDOW_SLOTS_MAX: usize = 1024;

fn sketch_config() -> Config {
    Config::new(SKETCH_RELATIVE_ACCURACY, SKETCH_BINS_MAX, SKETCH_MIN_VALUE)
}

/// A latency distribution summary (DDSketch) with count and mean.
///
/// Values are plain `f64`s; ferry records latencies in nanoseconds.
#[derive(Clone)]
pub struct LatencySketch {
    /// The quantile sketch proper.
    sketch: DDSketch,
}

impl std::fmt::Debug for LatencySketch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LatencySketch")
            .field("count", &self.count())
            .field("mean", &self.mean())
            .finish()
    }
}

impl Default for LatencySketch {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencySketch {
    /// An empty sketch with ferry's accuracy settings.
    pub fn new() -> Self {
        LatencySketch {
            sketch: DDSketch::new(sketch_config()),
        }
    }

    /// Adds one observation.
    pub fn record(&mut self, value: f64) {
        self.sketch.add(value);
    }

    /// Number of observations.
    pub fn count(&self) -> u64 {
        self.sketch.count() as u64
    }

    /// Mean of the observations, if any.
    pub fn mean(&self) -> Option<f64> {
        let n = self.count();
        self.sketch.sum().map(|s| s / n as f64)
    }

    /// Largest observation, if any.
    pub fn max(&self) -> Option<f64> {
        self.sketch.max()
    }

    /// The `q`-quantile (0 ≤ q ≤ 1), if any observation was recorded.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        // The only error DDSketch reports is q outside [0, 1]: clamp instead of failing.
        self.sketch.quantile(q.clamp(0.0, 1.0)).ok().flatten()
    }

    /// Adds every observation of `other` to this sketch.
    pub fn merge(&mut self, other: &LatencySketch) {
        // Invariant: every LatencySketch is built from the same `sketch_config()`, and a
        // merge fails only on a config mismatch.
        self.sketch
            .merge(&other.sketch)
            .expect("all LatencySketch instances share one config");
    }

    /// Forgets every observation.
    pub fn clear(&mut self) {
        *self = LatencySketch::new();
    }
}

/// One slot of a sliding window: the sketch of one `slot_ns`-long epoch.
#[derive(Clone)]
struct Slot {
    /// Which epoch (`time / slot_ns`) this slot currently holds.
    epoch: u64,
    /// Observations recorded during that epoch.
    sketch: LatencySketch,
}

/// Quantiles of the observations of the last `slots × slot_ns` of time.
///
/// Time is cut into epochs of `slot_ns`; each epoch has its own sketch in a ring of
/// `slots + 1` (the extra one is the epoch in progress). A query merges the sketches of the
/// epochs that fall inside the requested span, so a query made on an epoch boundary —
/// which is when periodic controllers run — covers exactly the span asked for.
#[derive(Clone)]
pub struct QuantileWindow {
    /// Length of one epoch.
    slot_ns: u64,
    /// Number of whole epochs the window spans.
    slots: usize,
    /// Ring of `slots + 1` epoch sketches.
    ring: Vec<Slot>,
}

impl QuantileWindow {
    /// A window spanning `slots` epochs of `slot_ns` each.
    pub fn new(slot_ns: Nanos, slots: usize) -> Result<Self, ControlError> {
        check_range("window slot", "[1 ns, ∞)", slot_ns.0 as f64, 1.0, f64::MAX)?;
        check_range("window slots", "[1, 1024]", slots as f64, 1.0, WINDOW_SLOTS_MAX as f64)?;
        let ring = (0..=slots)
            .map(|_| Slot {
                epoch: u64::MAX,
                sketch: LatencySketch::new(),
            })
            .collect();
        Ok(QuantileWindow {
            slot_ns: slot_ns.0,
            slots,
            ring,
        })
    }

    /// The full span the window covers.
    pub fn span(&self) -> Nanos {
        Nanos(self.slot_ns * self.slots as u64)
    }

    /// Records `value` observed at `now` (which must not go backwards by more than the window).
    pub fn record(&mut self, now: Nanos, value: f64) {
        let epoch = now.0 / self.slot_ns;
        let idx = (epoch % self.ring.len() as u64) as usize;
        let slot = &mut self.ring[idx];
        if slot.epoch != epoch {
            slot.epoch = epoch;
            slot.sketch.clear();
        }
        slot.sketch.record(value);
    }

    /// Merged sketch of the observations in the last `span` (rounded up to whole epochs,
    /// capped at the window) before `now`.
    pub fn merged(&self, now: Nanos, span: Nanos) -> LatencySketch {
        let cur = now.0 / self.slot_ns;
        let want = span.0.div_ceil(self.slot_ns).clamp(1, self.slots as u64);
        // Epochs `cur - want ..= cur`: `want` whole epochs plus the one in progress, which
        // is empty when `now` sits on an epoch boundary.
        let oldest = cur.saturating_sub(want);
        let mut out = LatencySketch::new();
        for slot in &self.ring {
            if slot.epoch != u64::MAX && slot.epoch >= oldest && slot.epoch <= cur {
                out.merge(&slot.sketch);
            }
        }
        out
    }

    /// The `q`-quantile of the last `span` before `now`, if anything was recorded then.
    pub fn quantile(&self, now: Nanos, span: Nanos, q: f64) -> Option<f64> {
        self.merged(now, span).quantile(q)
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        for slot in &mut self.ring {
            slot.epoch = u64::MAX;
            slot.sketch.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sketch_quantiles_are_within_relative_accuracy() {
        let mut s = LatencySketch::new();
        for v in 1..=10_000u32 {
            s.record(v as f64);
        }
        for &(q, exact) in &[(0.5, 5_000.0), (0.99, 9_900.0), (0.999, 9_990.0)] {
            let got = s.quantile(q).unwrap();
            assert!(
                (got - exact).abs() / exact <= 2.0 * SKETCH_RELATIVE_ACCURACY,
                "q{q}: {got} vs {exact}"
            );
        }
        assert_eq!(s.count(), 10_000);
        assert!((s.mean().unwrap() - 5_000.5).abs() < 1e-6);
        assert!(LatencySketch::new().quantile(0.99).is_none());
    }

    #[test]
    fn window_forgets_old_epochs() {
        let slot = Nanos::from_ms(1);
        let mut w = QuantileWindow::new(slot, 4).unwrap();
        // 4 ms of large values, then 4 ms of small ones.
        for t in 0..4_000u64 {
            w.record(Nanos(t * 1_000), 1_000.0);
        }
        for t in 4_000..8_000u64 {
            w.record(Nanos(t * 1_000), 10.0);
        }
        let now = Nanos::from_ms(8);
        // The whole window (last 4 ms) holds only small values.
        let p = w.quantile(now, w.span(), 0.99).unwrap();
        assert!((p - 10.0).abs() < 0.2, "{p}");
        // A query just after recording big values again sees them in the current epoch.
        w.record(Nanos::from_ms(8), 1_000.0);
        assert_eq!(w.merged(now, Nanos::from_ms(1)).count(), 1_001);
    }

    #[test]
    fn window_span_selects_recent_epochs_only() {
        let mut w = QuantileWindow::new(Nanos::from_ms(5), 10).unwrap();
        for t in 0..50u64 {
            w.record(Nanos::from_ms(t), t as f64 + 1.0);
        }
        let now = Nanos::from_ms(50);
        // Last 5 ms: values 46..=50 → count 5.
        assert_eq!(w.merged(now, Nanos::from_ms(5)).count(), 5);
        // Whole 50 ms.
        assert_eq!(w.merged(now, Nanos::from_ms(50)).count(), 50);
        // Asking for more than the window is capped at the window.
        assert_eq!(w.merged(now, Nanos::from_secs(1)).count(), 50);
    }

    #[test]
    fn window_rejects_bad_shapes() {
        assert!(QuantileWindow::new(Nanos::ZERO, 4).is_err());
        assert!(QuantileWindow::new(Nanos(1), 0).is_err());
        assert!(QuantileWindow::new(Nanos(1), WINDOW_SLOTS_MAX + 1).is_err());
    }
}
