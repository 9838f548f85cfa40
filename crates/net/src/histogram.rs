//! Request counts and latency histograms by operation and status (encoded for Prometheus
//! by `metrics::families`).
//!
//! Fixed buckets (a few per decade from 50 µs to 1 s) keep recording one atomic add per
//! bucket search, with no allocation and no lock on the request path.

use std::sync::atomic::{AtomicU64, Ordering};

use ferry_proto::{Opcode, Status};

/// Upper bounds of the buckets, µs (the last, +Inf, is implicit).
pub const BUCKET_BOUNDS_US: [u64; 14] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000,
];

/// Operations tracked (the opcodes a client sends), in wire order.
const OPCODES: [Opcode; 8] = [
    Opcode::Hello,
    Opcode::Get,
    Opcode::Put,
    Opcode::Delete,
    Opcode::MultiGet,
    Opcode::Invoke,
    Opcode::Commit,
    Opcode::Stats,
];

/// Statuses tracked: all of them.
const STATUSES: [Status; Status::ALL.len()] = Status::ALL;

struct Series {
    /// Requests with latency at most each bound, then the overflow bucket.
    buckets: [AtomicU64; BUCKET_BOUNDS_US.len() + 1],
    sum_us: AtomicU64,
}

/// Latency histograms of one process, one per (operation, status).
pub struct LatencyHistograms {
    series: Vec<Series>,
}

impl Default for LatencyHistograms {
    fn default() -> Self {
        LatencyHistograms {
            series: (0..OPCODES.len() * STATUSES.len())
                .map(|_| Series {
                    buckets: Default::default(),
                    sum_us: AtomicU64::new(0),
                })
                .collect(),
        }
    }
}

fn index_of<T: PartialEq>(all: &[T], item: &T) -> usize {
    all.iter().position(|x| x == item).unwrap_or(all.len() - 1)
}

impl LatencyHistograms {
    /// Records one answered request.
    pub fn observe(&self, opcode: Opcode, status: Status, latency_us: u64) {
        let series = &self.series[index_of(&OPCODES, &opcode) * STATUSES.len() + index_of(&STATUSES, &status)];
        let bucket = BUCKET_BOUNDS_US
            .iter()
            .position(|bound| latency_us <= *bound)
            .unwrap_or(BUCKET_BOUNDS_US.len());
        series.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        series.sum_us.fetch_add(latency_us, Ordering::Relaxed);
    }

    /// The series that saw a request, as they are now (for the metrics endpoint).
    pub fn snapshot(&self) -> Vec<HistogramSeries> {
        let mut out = Vec::new();
        for (op_index, opcode) in OPCODES.iter().enumerate() {
            for (status_index, status) in STATUSES.iter().enumerate() {
                let series = &self.series[op_index * STATUSES.len() + status_index];
                let counts: Vec<u64> = series.buckets.iter().map(|b| b.load(Ordering::Relaxed)).collect();
                let count: u64 = counts.iter().sum();
                if count == 0 {
                    continue;
                }
                let bounds = BUCKET_BOUNDS_US
                    .iter()
                    .map(|&bound| bound as f64)
                    .chain([f64::INFINITY]);
                out.push(HistogramSeries {
                    op: opcode.name(),
                    status: status.name(),
                    sum_us: series.sum_us.load(Ordering::Relaxed),
                    count,
                    buckets: bounds.zip(counts).collect(),
                });
            }
        }
        out
    }
}

/// One (operation, status) series at a moment.
#[derive(Clone, Debug, PartialEq)]
pub struct HistogramSeries {
    /// The operation's name.
    pub op: &'static str,
    /// The status's name.
    pub status: &'static str,
    /// Sum of the latencies, µs.
    pub sum_us: u64,
    /// Requests.
    pub count: u64,
    /// Each bucket's upper bound (µs; the last is infinite) and its own count (not
    /// cumulative).
    pub buckets: Vec<(f64, u64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_holds_each_bucket_and_leaves_empty_series_out() {
        let histograms = LatencyHistograms::default();
        histograms.observe(Opcode::Get, Status::Ok, 40);
        histograms.observe(Opcode::Get, Status::Ok, 700);
        histograms.observe(Opcode::Get, Status::Ok, 5_000_000);
        histograms.observe(Opcode::Invoke, Status::Overloaded, 120);
        let snapshot = histograms.snapshot();
        assert_eq!(snapshot.len(), 2, "{snapshot:?}");
        let get = snapshot.iter().find(|s| s.op == "get").expect("get");
        assert_eq!((get.status, get.count, get.sum_us), ("ok", 3, 5_000_740));
        assert_eq!(get.buckets.len(), BUCKET_BOUNDS_US.len() + 1);
        assert_eq!(get.buckets[0], (50.0, 1));
        assert_eq!(get.buckets[4], (1_000.0, 1));
        assert_eq!(get.buckets.last(), Some(&(f64::INFINITY, 1)));
        assert_eq!(get.buckets.iter().map(|b| b.1).sum::<u64>(), 3);
        let invoke = snapshot.iter().find(|s| s.op == "invoke").expect("invoke");
        assert_eq!((invoke.status, invoke.count), ("overloaded", 1));
    }
}
