//! `ferry sim-suite`: a policy judged on scenarios nobody tuned it for.
//!
//! N scenarios are drawn from a documented space ([`space`]); for each, the policy runs
//! once and the same-window bound ([`bound`]) is measured on the run's steady window (the
//! last quarter, same seed); the suite reports per scenario and in summary:
//! - `gap` = (bound − policy throughput) / bound, both over the steady window;
//! - `p99_over_slo` = the run's steady p99 / SLO, and `slo_met` = p99 ≤ SLO;
//! - `converge_ms`: time after which the trailing mean of throughput stays within 5 % of
//!   its steady value, the mean taken over at least 50 ms and at least
//!   [`CONVERGE_SAMPLES`] completions (so counting noise alone cannot leave the band);
//! - `searches`: how many placement searches the policy started (1 for a policy that
//!   searched once; more are rescans, which a steady workload should not need).
//!
//! The bound depends on the scenario only, never on the policy, so it can be cached in a
//! file (`--bound-cache`) and the suite re-run for another policy in a fraction of the time.

pub mod bound;
pub mod space;

use std::collections::BTreeMap;

use ferry_control::Nanos;
use serde::{Deserialize, Serialize};

use crate::engine::Arrivals;
use crate::error::ExperimentError;
use crate::model::ClusterModel;
use crate::scenario::{converge_ms, Scenario, SimReport, CONVERGE_SMOOTHING, CONVERGE_TOLERANCE, STEADY_FRACTION};
use crate::sweep::SweepConfig;
use ferry_experiment::profile::Profile;
use ferry_spec::PolicySpec;

pub use bound::{same_window_bound, Bound};
pub use space::{draw, draw_with, Space, SuiteScenario};

/// Most scenarios one suite may draw.
pub const SCENARIOS_MAX: usize = 10_000;

/// Completions the trailing mean of `converge_ms` spans at least: counting noise of a mean
/// over 4000 completions is 1.6 %, a third of the 5 % band.
pub const CONVERGE_SAMPLES: f64 = 4_000.0;

/// "Converged within 1 s", the suite's convergence criterion.
pub const CONVERGE_TARGET_MS: f64 = 1_000.0;

/// Timeline resolution of the policy runs.
const TIMELINE_INTERVAL: Nanos = Nanos::from_ms(10);

/// What to run.
#[derive(Clone, Debug)]
pub struct SuiteConfig {
    /// Scenarios to draw.
    pub scenarios: usize,
    /// Seed of the draws (and, through them, of every run).
    pub seed: u64,
    /// Where scenarios come from.
    pub space: Space,
    /// The policy judged.
    pub policy: PolicySpec,
    /// Length of each policy run.
    pub duration: Nanos,
    /// Worker threads (the results do not depend on it).
    pub threads: usize,
    /// Instead of `policy`, run each scenario at the fixed X of its bound with the R loop
    /// (`fixed:X*`, with the R-loop parameters of `policy`): how much of the gap the rate
    /// loop alone leaves.
    pub at_bound_x: bool,
    /// A measured machine whose costs, RTT and stalls every scenario takes (see
    /// [`space`]); None: the space's own.
    pub profile: Option<Profile>,
}

/// One scenario's outcome.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScenarioResult {
    /// Position in the suite.
    pub index: usize,
    /// The `ferry sim` flags that reproduce the scenario.
    pub flags: String,
    /// The cluster's shape (`8+8`, or `4x8+2x8` for several nodes).
    pub cluster: String,
    /// App cores per node.
    pub app_cores: u32,
    /// Storage cores.
    pub storage_cores: u32,
    /// RTT, µs.
    pub rtt_us: f64,
    /// The workload spec.
    pub workload: String,
    /// The SLO, µs.
    pub slo_us: f64,
    /// The unloaded p99 of the better side, µs (the SLO is 3–20× this).
    pub unloaded_p99_us: f64,
    /// The bound's X.
    pub bound_x: f64,
    /// The bound's throughput over the steady window.
    pub bound_ops: f64,
    /// The policy's throughput over the steady window.
    pub policy_ops: f64,
    /// The policy's mean X over the steady window.
    pub policy_x: f64,
    /// (bound − policy) / bound.
    pub gap: f64,
    /// The policy's steady p99, µs (null if nothing completed).
    pub p99_us: Option<f64>,
    /// p99 / SLO.
    pub p99_over_slo: Option<f64>,
    /// p99 ≤ SLO.
    pub slo_met: bool,
    /// Convergence time (see the module docs); null if never.
    pub converge_ms: Option<f64>,
    /// Placement searches the policy started (null for policies without a search).
    pub searches: Option<u64>,
}

/// The suite's summary.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Scenarios run.
    pub scenarios: usize,
    /// Median gap.
    pub gap_median: f64,
    /// 90th-percentile gap (nearest rank).
    pub gap_p90: f64,
    /// Largest gap.
    pub gap_max: f64,
    /// Share of scenarios whose steady p99 met the SLO.
    pub slo_met_share: f64,
    /// Share of scenarios converged within 1 s.
    pub converged_within_1s_share: f64,
    /// Searches beyond the first, summed over scenarios (null for policies without one).
    pub rescans: Option<u64>,
}

/// What `ferry sim-suite --json` writes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SuiteReport {
    /// The space drawn from.
    pub space: Space,
    /// Where the profile the scenarios took was measured (absent without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// The suite seed.
    pub seed: u64,
    /// The policy judged.
    pub policy: String,
    /// Length of each policy run, ms.
    pub duration_ms: f64,
    /// One per scenario.
    pub scenarios: Vec<ScenarioResult>,
    /// Over all of them.
    pub summary: Summary,
}

/// Bounds already measured, by scenario key (see [`bound_key`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct BoundCache {
    /// Key to bound.
    pub bounds: BTreeMap<String, Bound>,
}

/// The key a scenario's bound is cached under: the flags that reproduce it and the window.
pub fn bound_key(s: &SuiteScenario, window: (Nanos, Nanos)) -> String {
    format!("{} --window {}..{}", s.flags(), window.0, window.1)
}

impl SuiteConfig {
    /// Rejects suites that cannot run.
    pub fn validate(&self) -> Result<(), ExperimentError> {
        if self.scenarios == 0 || self.scenarios > SCENARIOS_MAX {
            return Err(ExperimentError::OutOfRange {
                name: "--scenarios".into(),
                range: "[1, 10000]",
                value: self.scenarios.to_string(),
            });
        }
        if self.duration < Nanos::from_ms(100) || self.duration > Nanos::from_secs(600) {
            return Err(ExperimentError::OutOfRange {
                name: "--duration".into(),
                range: "[100ms, 600s]",
                value: self.duration.to_string(),
            });
        }
        if self.policy.fixed_x().is_none() {
            // Building validates the policy's own configuration.
            let cores = ClusterModel::default().capacity();
            self.policy.build(Nanos::from_us(100), 0.99, Some(cores), 0)?;
        } else if matches!(self.policy, PolicySpec::Asfp) {
            return Err(ExperimentError::Unsupported(
                "the simulator does not model ASFP's pushback; run `ferry bench --policy asfp` on the real system"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The steady window of every policy run.
    pub fn window(&self) -> (Nanos, Nanos) {
        let len = (self.duration.0 as f64 * STEADY_FRACTION) as u64;
        (Nanos(self.duration.0 - len), self.duration)
    }
}

/// Runs the suite. `cache` supplies bounds measured before and receives the new ones.
pub fn run(cfg: &SuiteConfig, cache: &mut BoundCache) -> Result<SuiteReport, ExperimentError> {
    cfg.validate()?;
    let window = cfg.window();
    let known = cache.bounds.clone();
    let results = crate::parallel::map_indexed(cfg.scenarios, cfg.threads, |i| run_one(cfg, i, window, &known));
    let mut scenarios = Vec::with_capacity(cfg.scenarios);
    for r in results {
        let (result, key, b) = r?;
        cache.bounds.insert(key, b);
        scenarios.push(result);
    }
    Ok(SuiteReport {
        space: cfg.space,
        profile: cfg.profile.as_ref().map(|p| p.measured_on.clone()),
        seed: cfg.seed,
        policy: if cfg.at_bound_x {
            "fixed:X*".to_string()
        } else {
            cfg.policy.name()
        },
        duration_ms: cfg.duration.as_ms_f64(),
        summary: summarize(&scenarios),
        scenarios,
    })
}

fn run_one(
    cfg: &SuiteConfig,
    index: usize,
    window: (Nanos, Nanos),
    known: &BTreeMap<String, Bound>,
) -> Result<(ScenarioResult, String, Bound), ExperimentError> {
    let s = draw_with(cfg.space, cfg.profile.as_ref(), cfg.seed, index)?;
    let key = bound_key(&s, window);
    let b = match known.get(&key) {
        Some(b) => b.clone(),
        None => {
            let mut sweep = SweepConfig::new(s.cluster.clone(), s.workload.clone(), s.slo, s.seed);
            if s.workload.functions.len() > 1 {
                // A mix's optimum is per function: the turning-point bound.
                sweep.axis = crate::sweep::Axis::TurningPoint;
            }
            same_window_bound(&sweep, window)?
        }
    };
    let policy = if cfg.at_bound_x {
        PolicySpec::Fixed(b.rpc_fraction, cfg.policy.rate_params())
    } else {
        cfg.policy.clone()
    };
    let report = Scenario {
        cluster: s.cluster.clone(),
        workload: s.workload.clone(),
        policy,
        slo: s.slo,
        duration: cfg.duration,
        seed: s.seed,
        arrivals: Arrivals::Poisson,
        timeline_interval: TIMELINE_INTERVAL,
    }
    .run()?;
    Ok((result(&s, &b, &report), key, b))
}

fn result(s: &SuiteScenario, b: &Bound, r: &SimReport) -> ScenarioResult {
    let slo_us = s.slo.latency.as_us_f64();
    let smoothing_s = CONVERGE_SMOOTHING
        .as_secs_f64()
        .max(CONVERGE_SAMPLES / r.steady.throughput_ops.max(1.0));
    let rows = (smoothing_s / TIMELINE_INTERVAL.as_secs_f64()).ceil() as usize;
    ScenarioResult {
        index: s.index,
        flags: s.flags(),
        cluster: s.cluster.shape(),
        app_cores: s.cluster.app_cores,
        storage_cores: s.cluster.storage_cores,
        rtt_us: s.cluster.rtt.as_us_f64(),
        workload: s.workload_spec.clone(),
        slo_us,
        unloaded_p99_us: s.unloaded_p99_ns / 1e3,
        bound_x: b.rpc_fraction,
        bound_ops: b.throughput_ops,
        policy_ops: r.steady.throughput_ops,
        policy_x: r.steady.rpc_fraction_mean,
        gap: if b.throughput_ops > 0.0 {
            (b.throughput_ops - r.steady.throughput_ops) / b.throughput_ops
        } else {
            0.0
        },
        p99_us: r.steady.p99_us,
        p99_over_slo: r.steady.p99_us.map(|p| p / slo_us),
        slo_met: r.steady.p99_us.is_some_and(|p| p <= slo_us),
        converge_ms: converge_ms(&r.timeline, 0.0, r.steady.throughput_ops, CONVERGE_TOLERANCE, rows),
        searches: r.searches,
    }
}

/// The nearest-rank `q`-quantile of `v` (sorted in place).
fn nearest_rank(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

fn summarize(rs: &[ScenarioResult]) -> Summary {
    let n = rs.len().max(1) as f64;
    let mut gaps: Vec<f64> = rs.iter().map(|r| r.gap).collect();
    let searches: Option<u64> = rs.iter().map(|r| r.searches.map(|s| s.saturating_sub(1))).sum();
    Summary {
        scenarios: rs.len(),
        gap_median: nearest_rank(&mut gaps, 0.5),
        gap_p90: nearest_rank(&mut gaps, 0.9),
        gap_max: nearest_rank(&mut gaps, 1.0),
        slo_met_share: rs.iter().filter(|r| r.slo_met).count() as f64 / n,
        converged_within_1s_share: rs
            .iter()
            .filter(|r| r.converge_ms.is_some_and(|c| c <= CONVERGE_TARGET_MS))
            .count() as f64
            / n,
        rescans: searches,
    }
}

impl SuiteReport {
    /// The table `ferry sim-suite` prints: one line per scenario, then the summary.
    pub fn table(&self) -> String {
        let opt = |v: Option<f64>, d: usize| v.map_or("-".to_string(), |x| format!("{x:.d$}"));
        let mut out = format!(
            "{:>3} {:>5} {:>5} {:<42} {:>8} {:>10} {:>5} {:>10} {:>5} {:>7} {:>6} {:>8} {:>4}\n",
            "#",
            "cores",
            "rtt",
            "workload",
            "slo_us",
            "bound_ops",
            "X*",
            "policy_ops",
            "X",
            "gap%",
            "p99/s",
            "conv_ms",
            "srch"
        );
        for r in &self.scenarios {
            out.push_str(&format!(
                "{:>3} {:>5} {:>5.1} {:<42} {:>8.0} {:>10.0} {:>5.2} {:>10.0} {:>5.2} {:>7.1} {:>6} {:>8} {:>4}\n",
                r.index,
                r.cluster.clone(),
                r.rtt_us,
                r.workload,
                r.slo_us,
                r.bound_ops,
                r.bound_x,
                r.policy_ops,
                r.policy_x,
                r.gap * 100.0,
                opt(r.p99_over_slo, 2),
                opt(r.converge_ms, 0),
                r.searches.map_or("-".to_string(), |s| s.to_string()),
            ));
        }
        let s = &self.summary;
        out.push_str(&format!(
            "policy {} on {} {} scenarios{} (seed {}): gap median {:.1} %, p90 {:.1} %, max {:.1} %; \
             SLO met {:.0} %; converged within 1 s {:.0} %; rescans {}\n",
            self.policy,
            s.scenarios,
            self.space.name(),
            self.profile
                .as_ref()
                .map_or(String::new(), |p| format!(" with the profile of {p}")),
            self.seed,
            s.gap_median * 100.0,
            s.gap_p90 * 100.0,
            s.gap_max * 100.0,
            s.slo_met_share * 100.0,
            s.converged_within_1s_share * 100.0,
            s.rescans.map_or("-".to_string(), |r| r.to_string())
        ));
        out
    }

    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        // Invariant: the report holds only numbers, strings, options and vectors.
        serde_json::to_string_pretty(self).expect("suite report serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_quantiles() {
        let mut v = vec![5.0, 1.0, 4.0, 2.0, 3.0, 6.0, 7.0, 8.0, 9.0, 10.0];
        assert_eq!(nearest_rank(&mut v, 0.5), 5.0);
        assert_eq!(nearest_rank(&mut v, 0.9), 9.0);
        assert_eq!(nearest_rank(&mut v, 1.0), 10.0);
        assert_eq!(nearest_rank(&mut [3.0], 0.9), 3.0);
    }
}
