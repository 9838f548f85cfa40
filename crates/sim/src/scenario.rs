//! A scenario (cluster, workload, policy, SLO, duration, seed) and the report of its run:
//! a timeline of throughput, p99, X and R, and a summary over the steady state.

use ferry_control::slo::PerFunctionSlo;
use ferry_control::{Nanos, Placement};
use serde::Serialize;

use ferry_experiment::SteadyState;

use crate::engine::{self, Arrivals, EngineConfig, EngineOutput};
use crate::error::ExperimentError;
use crate::model::{ClusterModel, Workload};
pub use ferry_experiment::timeline::{converge_ms, timeline_csv, TimelineRow, CONVERGE_TOLERANCE, STEADY_FRACTION};
use ferry_spec::{PolicySpec, DURATION_MAX};

/// Default timeline interval: 10 ms, two R-loop periods. Per-interval throughput is a count
/// of completions; at the slowest workload (~0.5 Mops) 10 ms holds ~5000 of them, so counting
/// noise (~1.4 %) stays well inside the 5 % convergence band.
pub const TIMELINE_INTERVAL_DEFAULT: Nanos = Nanos::from_ms(10);

/// Span of the trailing mean of throughput that `converge_ms` tests against the 5 % band:
/// one X-loop period, so the X loop's deliberate probe steps and the counting noise of
/// single intervals do not count as "not converged".
pub const CONVERGE_SMOOTHING: Nanos = Nanos::from_ms(50);

/// Smallest timeline interval: 100 µs keeps a 10 s run under 10⁵ rows.
pub const TIMELINE_INTERVAL_MIN: Nanos = Nanos::from_us(100);

/// Salt mixed into the scenario seed for the policy's own generator, so the policy's draws
/// and the simulator's are independent streams.
const POLICY_SEED_SALT: u64 = 0x9e37_79b9_7f4a_7c15;

/// A latency objective: `quantile` of latency ≤ `latency`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slo {
    /// The target latency.
    pub latency: Nanos,
    /// The quantile it constrains (0.99 for p99).
    pub quantile: f64,
}

impl Slo {
    /// A p99 objective.
    pub fn p99(latency: Nanos) -> Self {
        Slo {
            latency,
            quantile: 0.99,
        }
    }
}

/// Everything that defines one simulated run.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Nodes, network, CPU costs.
    pub cluster: ClusterModel,
    /// The requests.
    pub workload: Workload,
    /// Who decides placement and rate.
    pub policy: PolicySpec,
    /// The objective.
    pub slo: Slo,
    /// Simulated time.
    pub duration: Nanos,
    /// Seed of all randomness (simulator and policy).
    pub seed: u64,
    /// Arrival process behind the limiter.
    pub arrivals: Arrivals,
    /// Timeline resolution.
    pub timeline_interval: Nanos,
}

/// Summary of one phase occurrence (one for single-phase workloads).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PhaseReport {
    /// Which phase of the workload (index into its phases).
    pub phase: usize,
    /// Functions active in that phase.
    pub functions: String,
    /// Start, ms.
    pub start_ms: f64,
    /// End, ms.
    pub end_ms: f64,
    /// Steady-state throughput (last quarter of the phase).
    pub throughput_ops: f64,
    /// Steady-state p99.
    pub p99_us: Option<f64>,
    /// Mean X over the steady state.
    pub rpc_fraction: f64,
    /// Time from the phase start after which throughput stays within 5 % of its steady
    /// value (null if it never does).
    pub converge_ms: Option<f64>,
}

/// The report of a run: the JSON `ferry sim --json` writes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SimReport {
    /// The run and its steady state, as every placement report gives them.
    #[serde(flatten)]
    pub steady: SteadyState,
    /// App nodes.
    pub app_nodes: u32,
    /// Storage nodes.
    pub storage_nodes: u32,
    /// Cores of each app node.
    pub app_cores: u32,
    /// Storage-node cores.
    pub storage_cores: u32,
    /// Network RTT.
    pub rtt_us: f64,
    /// Arrival process.
    pub arrivals: Arrivals,
    /// Steady-state mean latency.
    pub latency_us_mean: Option<f64>,
    /// Share of timeline intervals in the steady state whose p99 exceeded the SLO.
    pub slo_violation_share: f64,
    /// Unloaded latency of the local path (worst function).
    pub no_load_latency_us_local: f64,
    /// Unloaded latency of the remote path (worst function).
    pub no_load_latency_us_remote: f64,
    /// App-node CPU utilisation in the steady state.
    pub app_utilization: f64,
    /// Storage-node CPU utilisation in the steady state.
    pub storage_utilization: f64,
    /// Placement searches the policy started over the run (null for policies without one).
    pub searches: Option<u64>,
    /// With placement groups, each group's mean X (its share sent remote; Pyxis' α with
    /// share slicing) over the steady window; empty without groups.
    pub group_rpc_fractions: Vec<f64>,
    /// The steady window's quantile over its SLO: pooled, or the worst function's where
    /// functions have SLOs of their own (`--slo-slowdown`); at most 1 is met.
    pub slo_ratio: Option<f64>,
    /// Each function's tail over the steady window against its SLO.
    pub functions: Vec<crate::judge::FunctionTail>,
    /// App cores active on average over the steady window (all of them unless elastic).
    pub app_cores_active_mean: f64,
    /// Requests completed over the run.
    pub completed: u64,
    /// Requests dropped because too many were in flight.
    pub dropped: u64,
    /// Events simulated.
    pub events: u64,
    /// Per phase occurrence.
    pub phases: Vec<PhaseReport>,
    /// The timeline.
    pub timeline: Vec<TimelineRow>,
}

impl SimReport {
    /// The timeline as CSV (see [`timeline_csv`]).
    pub fn timeline_csv(&self) -> String {
        timeline_csv(&self.timeline)
    }

    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        // Invariant: the report holds only numbers, strings, options and vectors, which
        // serde_json always serialises (non-finite floats become null).
        serde_json::to_string_pretty(self).expect("report serialises")
    }
}

/// Phase occurrences of a run: `(phase index, start, end)`.
fn phase_spans(w: &Workload, duration: Nanos) -> Vec<(usize, Nanos, Nanos)> {
    if w.phases.len() == 1 {
        return vec![(0, Nanos::ZERO, duration)];
    }
    let mut out = Vec::new();
    let mut k = 0u64;
    while k * w.phase_period.0 < duration.0 {
        let s = Nanos(k * w.phase_period.0);
        let e = Nanos(((k + 1) * w.phase_period.0).min(duration.0));
        out.push(((k % w.phases.len() as u64) as usize, s, e));
        k += 1;
    }
    out
}

fn steady_window(s: Nanos, e: Nanos) -> (Nanos, Nanos) {
    let len = (e - s).0 as f64;
    (Nanos(e.0 - (len * STEADY_FRACTION) as u64), e)
}

/// The SLO of the paper's experiments reproduced in docs/SIMULATION.md: p99 ≤ 200 µs.
pub const PAPER_SLO: Nanos = Nanos::from_us(200);

impl Scenario {
    /// The setup of the paper's experiments as docs/SIMULATION.md reproduces them (the
    /// tests of issue 3 and the figures both run it): the default 8 + 8-core cluster with
    /// 10 µs RTT, p99 ≤ [`PAPER_SLO`], Poisson arrivals, a 10 ms timeline.
    pub fn paper(workload: Workload, policy: PolicySpec, duration: Nanos, seed: u64) -> Scenario {
        Scenario {
            cluster: ClusterModel::default(),
            workload,
            policy,
            slo: Slo::p99(PAPER_SLO),
            duration,
            seed,
            arrivals: Arrivals::Poisson,
            timeline_interval: Nanos::from_ms(10),
        }
    }

    /// Unloaded latency of the local and remote paths (worst function of the workload).
    pub fn no_load_latencies_ns(&self) -> (f64, f64) {
        (
            self.workload.no_load_latency_ns(&self.cluster, Placement::Local),
            self.workload.no_load_latency_ns(&self.cluster, Placement::Remote),
        )
    }

    /// Rejects scenarios that cannot run or cannot possibly meet their SLO.
    pub fn validate(&self) -> Result<(), ExperimentError> {
        self.cluster.validate()?;
        self.workload.validate()?;
        if matches!(self.policy, PolicySpec::Asfp) {
            return Err(ExperimentError::Unsupported(
                "the simulator does not model ASFP's pushback; run `ferry bench --policy asfp` on the real system"
                    .into(),
            ));
        }
        if self.duration == Nanos::ZERO || self.duration > DURATION_MAX {
            return Err(ExperimentError::OutOfRange {
                name: "--duration".into(),
                range: "(0, 1000000s]",
                value: self.duration.to_string(),
            });
        }
        if self.timeline_interval < TIMELINE_INTERVAL_MIN {
            return Err(ExperimentError::OutOfRange {
                name: "--timeline-interval".into(),
                range: "[100us, ∞)",
                value: self.timeline_interval.to_string(),
            });
        }
        let (local, remote) = self.no_load_latencies_ns();
        let (no_load, detail) = match self.policy.fixed_x() {
            Some(x) if x <= 0.0 => (local, "on the local path"),
            Some(x) if x >= 1.0 => (remote, "on the remote path"),
            Some(_) => (local.max(remote), "on the slower of the two paths it uses"),
            None if local <= remote => (local, "on the faster, local path"),
            None => (remote, "on the faster, remote path"),
        };
        // Functions with SLOs of their own (a slowdown over their service time, more than 1)
        // are above their unloaded latency by construction.
        if !self.workload.has_function_slos() && (self.slo.latency.0 as f64) <= no_load {
            return Err(ExperimentError::SloBelowNoLoad {
                quantile_pct: self.slo.quantile * 100.0,
                slo_us: self.slo.latency.as_us_f64(),
                no_load_us: no_load / 1e3,
                detail: detail.to_string(),
            });
        }
        // Building the policy validates its configuration (e.g. loop frequencies).
        self.policy
            .build(self.slo.latency, self.slo.quantile, Some(self.cluster.capacity()), 0)
            .map(|_| ())
            .map_err(ExperimentError::from)
    }

    /// Validates and runs the scenario.
    pub fn run(&self) -> Result<SimReport, ExperimentError> {
        self.validate()?;
        // One policy per placement group, each over its group's nodes; group 0's seed is
        // the one a run without groups uses.
        let mut policies = (0..self.cluster.placement_groups)
            .map(|g| {
                let policy = self.policy.build(
                    self.slo.latency,
                    self.slo.quantile,
                    Some(self.cluster.group(g).capacity()),
                    (self.seed ^ POLICY_SEED_SALT).wrapping_add(u64::from(g)),
                )?;
                Ok(if self.workload.has_function_slos() {
                    let slos: Vec<f64> = self
                        .workload
                        .functions
                        .iter()
                        .map(|f| f.slo.unwrap_or(self.slo.latency).0 as f64)
                        .collect();
                    Box::new(PerFunctionSlo::new(policy, self.slo.latency.0 as f64, &slos))
                } else {
                    policy
                })
            })
            .collect::<Result<Vec<Box<dyn ferry_control::Policy>>, ExperimentError>>()?;
        let spans = phase_spans(&self.workload, self.duration);
        let windows: Vec<(Nanos, Nanos)> = spans.iter().map(|&(_, s, e)| steady_window(s, e)).collect();
        let cfg = EngineConfig {
            cluster: &self.cluster,
            workload: &self.workload,
            seed: self.seed,
            duration: self.duration,
            arrivals: self.arrivals,
            timeline_interval: Some(self.timeline_interval),
            windows,
            abort: None,
            arrivals_from: Nanos::ZERO,
            slo: Some(self.slo.latency),
        };
        let name = policies[0].name();
        let out = engine::run_groups(
            &cfg,
            policies
                .iter_mut()
                .map(|p| p.as_mut() as &mut dyn ferry_control::Policy)
                .collect(),
        );
        Ok(self.report(name, &spans, out))
    }

    fn report(&self, policy: String, spans: &[(usize, Nanos, Nanos)], out: EngineOutput) -> SimReport {
        let iv_s = self.timeline_interval.as_secs_f64();
        let timeline: Vec<TimelineRow> = out
            .samples
            .iter()
            .map(|s| TimelineRow {
                t_ms: s.t.as_ms_f64(),
                throughput_ops: s.completed as f64 / iv_s,
                p99_us: s.latency_ns_p99.map(|v| v / 1e3),
                latency_us_mean: s.latency_ns_mean.map(|v| v / 1e3),
                rpc_fraction: s.state.rpc_fraction,
                rate_ops: s.state.rate_ops,
                remote_share: (s.admitted > 0).then(|| s.admitted_remote as f64 / s.admitted as f64),
                app_cores: Some(s.app_cores),
            })
            .collect();
        let mean_x = |from: Nanos, to: Nanos| {
            let xs: Vec<f64> = timeline
                .iter()
                .filter(|r| r.t_ms > from.as_ms_f64() && r.t_ms <= to.as_ms_f64())
                .map(|r| r.rpc_fraction)
                .collect();
            if xs.is_empty() {
                out.final_state.rpc_fraction
            } else {
                xs.iter().sum::<f64>() / xs.len() as f64
            }
        };
        let phases: Vec<PhaseReport> = spans
            .iter()
            .zip(&out.windows)
            .map(|(&(phase, s, e), w)| {
                let rows: Vec<TimelineRow> = timeline
                    .iter()
                    .filter(|r| r.t_ms > s.as_ms_f64() && r.t_ms <= e.as_ms_f64())
                    .cloned()
                    .collect();
                let thr = w.throughput_ops();
                let functions = self.workload.phases[phase]
                    .entries
                    .iter()
                    .map(|&(i, _)| self.workload.functions[i].name.clone())
                    .collect::<Vec<_>>()
                    .join("+");
                PhaseReport {
                    phase,
                    functions,
                    start_ms: s.as_ms_f64(),
                    end_ms: e.as_ms_f64(),
                    throughput_ops: thr,
                    p99_us: w.latency.quantile(0.99).map(|v| v / 1e3),
                    rpc_fraction: mean_x(w.start, w.end),
                    converge_ms: converge_ms(
                        &rows,
                        s.as_ms_f64(),
                        thr,
                        CONVERGE_TOLERANCE,
                        (CONVERGE_SMOOTHING.0 / self.timeline_interval.0.max(1)) as usize,
                    ),
                }
            })
            .collect();
        // Invariant: there is at least one phase span (duration > 0 was validated), and the
        // engine returns one window per span.
        let last = out.windows.last().expect("at least one steady window");
        let converge = phases
            .iter()
            .map(|p| p.converge_ms)
            .try_fold(0.0f64, |acc, c| c.map(|c| acc.max(c)));
        let steady_rows: Vec<&TimelineRow> = timeline.iter().filter(|r| r.t_ms > last.start.as_ms_f64()).collect();
        let slo_us = self.slo.latency.as_us_f64();
        let violations = steady_rows
            .iter()
            .filter(|r| r.p99_us.is_some_and(|p| p > slo_us))
            .count();
        let win_s = (last.end - last.start).as_secs_f64();
        let (local, remote) = self.no_load_latencies_ns();
        let steady_samples: Vec<_> = out.samples.iter().filter(|s| s.t > last.start).collect();
        let group_rpc_fractions = (0..out.samples.first().map_or(0, |s| s.groups.len()))
            .map(|g| {
                let n = steady_samples.len().max(1) as f64;
                steady_samples.iter().map(|s| s.groups[g].rpc_fraction).sum::<f64>() / n
            })
            .collect();
        SimReport {
            steady: SteadyState {
                policy,
                workload: self.workload.label.clone(),
                seed: self.seed,
                slo_p99_us: slo_us,
                slo_quantile: self.slo.quantile,
                duration_ms: self.duration.as_ms_f64(),
                steady_start_ms: last.start.as_ms_f64(),
                throughput_ops: last.throughput_ops(),
                p99_us: last.latency.quantile(self.slo.quantile).map(|v| v / 1e3),
                latency_us_p50: last.latency.quantile(0.5).map(|v| v / 1e3),
                rpc_fraction: out.final_state.rpc_fraction,
                rpc_fraction_mean: mean_x(last.start, last.end),
                rate_ops: out.final_state.rate_ops,
                converge_ms: converge,
            },
            app_nodes: self.cluster.app_nodes,
            storage_nodes: self.cluster.storage_nodes,
            app_cores: self.cluster.app_cores,
            storage_cores: self.cluster.storage_cores,
            rtt_us: self.cluster.rtt.as_us_f64(),
            arrivals: self.arrivals,
            latency_us_mean: last.latency.mean().map(|v| v / 1e3),
            slo_violation_share: if steady_rows.is_empty() {
                0.0
            } else {
                violations as f64 / steady_rows.len() as f64
            },
            no_load_latency_us_local: local / 1e3,
            no_load_latency_us_remote: remote / 1e3,
            app_utilization: last.app.busy_ns as f64 / (self.cluster.app_cores_total() as f64 * win_s * 1e9),
            storage_utilization: last.storage.busy_ns as f64
                / (self.cluster.storage_cores_total() as f64 * win_s * 1e9),
            searches: out.final_state.searches,
            group_rpc_fractions,
            slo_ratio: crate::judge::slo_ratio(&self.workload, &self.slo, last),
            functions: crate::judge::function_tails(&self.workload, &self.slo, last),
            app_cores_active_mean: if steady_samples.is_empty() {
                self.cluster.app_cores_total() as f64
            } else {
                steady_samples.iter().map(|s| s.app_cores as f64).sum::<f64>() / steady_samples.len() as f64
            },
            completed: out.completed,
            dropped: out.dropped,
            events: out.events,
            phases,
            timeline,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_cover_the_run() {
        let w = crate::spec::parse_workload("bimodal:a=medium,b=light,period=2s").unwrap();
        let spans = phase_spans(&w, Nanos::from_secs(5));
        assert_eq!(spans.len(), 3);
        assert_eq!(spans[2], (0, Nanos::from_secs(4), Nanos::from_secs(5)));
    }
}
