//! Whether a measured window met its SLO: the pooled quantile against the one SLO, or, where
//! functions have SLOs of their own (Pyxis' slowdown SLO), every function's quantile against
//! its own.

use serde::Serialize;

use crate::engine::WindowStats;
use crate::model::Workload;
use crate::scenario::Slo;

/// One function's tail over a window, against its SLO.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FunctionTail {
    /// The function's name.
    pub name: String,
    /// Its SLO, µs.
    pub slo_us: f64,
    /// Its quantile over the window (null if it had no completions).
    pub p99_us: Option<f64>,
    /// Completions in the window.
    pub completions: u64,
}

/// Each function's tail in window `w` (only functions with completions there).
pub fn function_tails(workload: &Workload, slo: &Slo, w: &WindowStats) -> Vec<FunctionTail> {
    workload
        .functions
        .iter()
        .zip(&w.fn_latency)
        .filter(|(_, sketch)| sketch.count() > 0)
        .map(|(f, sketch)| FunctionTail {
            name: f.name.clone(),
            slo_us: f.slo.unwrap_or(slo.latency).as_us_f64(),
            p99_us: sketch.quantile(slo.quantile).map(|v| v / 1e3),
            completions: sketch.count(),
        })
        .collect()
}

/// The window's quantile over its SLO: pooled, or the worst function's where functions
/// have SLOs of their own (None without completions). At most 1 is met.
pub fn slo_ratio(workload: &Workload, slo: &Slo, w: &WindowStats) -> Option<f64> {
    if !workload.has_function_slos() {
        return w.latency.quantile(slo.quantile).map(|p| p / slo.latency.0 as f64);
    }
    function_tails(workload, slo, w)
        .iter()
        .filter_map(|t| t.p99_us.map(|p| p / t.slo_us))
        .reduce(f64::max)
}
