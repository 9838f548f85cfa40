//! Request counts and latency histograms by operation and status, in the Prometheus
//! histogram form (`_bucket{le=…}`, `_sum`, `_count`).
//!
//! Fixed buckets (a few per decade from 50 µs to 1 s) keep recording one atomic add per
//! bucket search, with no allocation and no lock on the request path.

use std::fmt::Write as _;
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

    /// The histograms as the family `{prefix}_request_latency_us` (series with no request
    /// are left out) and the counts as `{prefix}_requests`.
    pub fn render(&self, prefix: &str, out: &mut String) {
        let family = format!("{prefix}_request_latency_us");
        let _ = writeln!(out, "# TYPE {family} histogram");
        let mut counts = String::new();
        for (op_index, opcode) in OPCODES.iter().enumerate() {
            for (status_index, status) in STATUSES.iter().enumerate() {
                let series = &self.series[op_index * STATUSES.len() + status_index];
                let total: u64 = series.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum();
                if total == 0 {
                    continue;
                }
                let labels = format!("op=\"{}\",status=\"{}\"", opcode.name(), status.name());
                let mut cumulative = 0;
                for (bound, bucket) in BUCKET_BOUNDS_US.iter().zip(&series.buckets) {
                    cumulative += bucket.load(Ordering::Relaxed);
                    let _ = writeln!(out, "{family}_bucket{{{labels},le=\"{bound}\"}} {cumulative}");
                }
                let _ = writeln!(out, "{family}_bucket{{{labels},le=\"+Inf\"}} {total}");
                let _ = writeln!(
                    out,
                    "{family}_sum{{{labels}}} {}",
                    series.sum_us.load(Ordering::Relaxed)
                );
                let _ = writeln!(out, "{family}_count{{{labels}}} {total}");
                let _ = writeln!(counts, "{prefix}_requests{{{labels}}} {total}");
            }
        }
        let _ = writeln!(out, "# TYPE {prefix}_requests counter");
        out.push_str(&counts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_empty_series_are_left_out() {
        let histograms = LatencyHistograms::default();
        histograms.observe(Opcode::Get, Status::Ok, 40);
        histograms.observe(Opcode::Get, Status::Ok, 700);
        histograms.observe(Opcode::Get, Status::Ok, 5_000_000);
        histograms.observe(Opcode::Invoke, Status::Overloaded, 120);
        let mut text = String::new();
        histograms.render("ferry_gateway", &mut text);
        let get = "op=\"get\",status=\"ok\"";
        assert!(
            text.contains(&format!(
                "ferry_gateway_request_latency_us_bucket{{{get},le=\"50\"}} 1\n"
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "ferry_gateway_request_latency_us_bucket{{{get},le=\"500\"}} 1\n"
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "ferry_gateway_request_latency_us_bucket{{{get},le=\"1000\"}} 2\n"
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "ferry_gateway_request_latency_us_bucket{{{get},le=\"+Inf\"}} 3\n"
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!("ferry_gateway_request_latency_us_sum{{{get}}} 5000740\n")),
            "{text}"
        );
        assert!(
            text.contains("ferry_gateway_requests{op=\"invoke\",status=\"overloaded\"} 1\n"),
            "{text}"
        );
        assert!(!text.contains("op=\"put\""), "{text}");
    }
}
