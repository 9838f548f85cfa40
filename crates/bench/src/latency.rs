//! Latency recording: an HDR histogram per measurement, reported as percentiles.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Largest latency recorded exactly (60 s); longer ones are clamped to it, which only a
/// broken run produces and which the max then shows.
const MAX_TRACKABLE_NS: u64 = 60_000_000_000;

/// Significant decimal digits kept: 0.1% relative error, ample for p99 reporting.
const SIGNIFICANT_DIGITS: u8 = 3;

/// Latencies of one measurement.
#[derive(Clone)]
pub struct Recorder {
    histogram: Histogram<u64>,
}

impl Default for Recorder {
    fn default() -> Recorder {
        Recorder::new()
    }
}

impl Recorder {
    /// An empty recorder.
    pub fn new() -> Recorder {
        Recorder {
            // Invariant: the bounds are constants known to be valid.
            histogram: Histogram::new_with_bounds(1, MAX_TRACKABLE_NS, SIGNIFICANT_DIGITS)
                .expect("valid histogram bounds"),
        }
    }

    /// Records one latency.
    pub fn record(&mut self, latency: Duration) {
        let ns = (latency.as_nanos() as u64).clamp(1, MAX_TRACKABLE_NS);
        // Invariant: clamped into the histogram's range.
        self.histogram.record(ns).expect("value within bounds");
    }

    /// Adds another recorder's samples.
    pub fn merge(&mut self, other: &Recorder) {
        // Invariant: both histograms share the same bounds.
        self.histogram.add(&other.histogram).expect("same bounds");
    }

    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    /// Percentiles of what was recorded.
    pub fn summary(&self) -> LatencySummary {
        let us = |ns: u64| ns as f64 / 1e3;
        if self.histogram.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            count: self.histogram.len(),
            mean_us: self.histogram.mean() / 1e3,
            p50_us: us(self.histogram.value_at_quantile(0.50)),
            p99_us: us(self.histogram.value_at_quantile(0.99)),
            p999_us: us(self.histogram.value_at_quantile(0.999)),
            max_us: us(self.histogram.max()),
        }
    }
}

/// Latency percentiles in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Samples.
    pub count: u64,
    /// Mean.
    pub mean_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Maximum.
    pub max_us: f64,
}

/// The median of some values (the mean of the middle two for an even count); 0 when empty.
pub fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(|a, b| a.total_cmp(b));
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_medians() {
        let mut recorder = Recorder::new();
        for us in 1..=100u64 {
            recorder.record(Duration::from_micros(us));
        }
        let summary = recorder.summary();
        assert_eq!(summary.count, 100);
        assert!((summary.p50_us - 50.0).abs() < 0.5, "{summary:?}");
        assert!((summary.p99_us - 99.0).abs() < 0.5, "{summary:?}");
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&mut []), 0.0);
    }
}
