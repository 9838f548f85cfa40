//! Timelines, as every experiment reports them (the simulator and the real benchmarks alike):
//! one row per interval, the CSV they are written as, and when a run converged.

use serde::Serialize;

/// The part of a run (or of each phase) at its end over which the summary is taken: the last
/// quarter, long after the loops converged in every scenario of SIMULATION.md.
pub const STEADY_FRACTION: f64 = 0.25;

/// A run has converged once throughput stays within this fraction of its final value
/// (the definition of `converge_ms`).
pub const CONVERGE_TOLERANCE: f64 = 0.05;

/// One row of the timeline (the contract: `t_ms`, `throughput_ops`, `p99_us`,
/// `rpc_fraction`, `rate_ops`; the rest is extra).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimelineRow {
    /// End of the interval, ms since start.
    pub t_ms: f64,
    /// Completions per second in the interval.
    pub throughput_ops: f64,
    /// p99 latency of those completions (null if none).
    pub p99_us: Option<f64>,
    /// Mean latency of those completions (null if none).
    pub latency_us_mean: Option<f64>,
    /// The policy's X at the end of the interval.
    pub rpc_fraction: f64,
    /// The policy's R at the end of the interval.
    pub rate_ops: f64,
    /// Share of requests admitted in the interval that were placed remote (null if none).
    pub remote_share: Option<f64>,
    /// App cores active at the end of the interval (null where nothing scales them).
    pub app_cores: Option<u32>,
}

/// A timeline as CSV: a header and one line per row, empty fields for nulls. The real
/// benchmarks write their timelines with it too, so both read alike.
pub fn timeline_csv(rows: &[TimelineRow]) -> String {
    use std::fmt::Write as _;
    let mut out =
        String::from("t_ms,throughput_ops,p99_us,latency_us_mean,rpc_fraction,rate_ops,remote_share,app_cores\n");
    let opt = |v: Option<f64>| v.map(|x| x.to_string()).unwrap_or_default();
    for r in rows {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{}",
            r.t_ms,
            r.throughput_ops,
            opt(r.p99_us),
            opt(r.latency_us_mean),
            r.rpc_fraction,
            r.rate_ops,
            opt(r.remote_share),
            r.app_cores.map(|c| c.to_string()).unwrap_or_default()
        );
    }
    out
}

/// Time from `start_ms` after which the trailing mean of `smooth` rows of throughput stays
/// within `tol` of `final_ops`; None if the last one itself is outside.
pub fn converge_ms(rows: &[TimelineRow], start_ms: f64, final_ops: f64, tol: f64, smooth: usize) -> Option<f64> {
    let band = tol * final_ops;
    let smooth = smooth.max(1);
    let trailing: Vec<f64> = (0..rows.len())
        .map(|i| {
            let lo = (i + 1).saturating_sub(smooth);
            rows[lo..=i].iter().map(|r| r.throughput_ops).sum::<f64>() / (i + 1 - lo) as f64
        })
        .collect();
    match trailing.iter().rposition(|v| (v - final_ops).abs() > band) {
        None => Some(0.0),
        Some(i) if i + 1 == rows.len() => None,
        Some(i) => Some(rows[i].t_ms - start_ms),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(t_ms: f64, thr: f64) -> TimelineRow {
        TimelineRow {
            t_ms,
            throughput_ops: thr,
            p99_us: None,
            latency_us_mean: None,
            rpc_fraction: 1.0,
            rate_ops: thr,
            remote_share: None,
            app_cores: None,
        }
    }

    #[test]
    fn converge_is_the_end_of_the_last_excursion() {
        let rows: Vec<TimelineRow> = [50.0, 90.0, 101.0, 120.0, 99.0, 100.0, 102.0]
            .iter()
            .enumerate()
            .map(|(i, &v)| row(10.0 * (i + 1) as f64, v))
            .collect();
        // Row at 40 ms (120) is the last one outside ±5 % of 100.
        assert_eq!(converge_ms(&rows, 0.0, 100.0, 0.05, 1), Some(40.0));
        assert_eq!(converge_ms(&rows[4..], 40.0, 100.0, 0.05, 1), Some(0.0));
        let mut bad = rows.clone();
        bad.push(row(80.0, 10.0));
        assert_eq!(converge_ms(&bad, 0.0, 100.0, 0.05, 1), None);
        // Smoothed over two rows, the single spike of 120 averages to 110 with 101, then
        // (120 + 99) / 2 = 109.5 is still out; (99 + 100) / 2 is in from 50 ms on.
        assert_eq!(converge_ms(&rows, 0.0, 100.0, 0.05, 2), Some(50.0));
    }
}
