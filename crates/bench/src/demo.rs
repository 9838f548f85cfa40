//! `ferry demo`: everything on one box. An embedded storage node pinned to CPU 0, the app
//! side on CPU 1, the same workload under each policy in turn, a comparison table and an
//! HTML report.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ferry_experiment::model::Workload;
use ferry_spec::PolicySpec;

use crate::placement::{run_on, PlacementBenchConfig, PlacementReport};
use crate::report::{bench_facts, html_page, timeline_figure, write_into};
use crate::testbed::{NodeSite, Testbed, TestbedConfig};
use crate::BenchError;

/// Tenant the demo acts as.
const DEMO_TENANT: u32 = 1;
/// Its token (the node is bound to loopback only).
const DEMO_TOKEN: &str = "ferry";
/// The policy the demo judges against the static ones: ferry's default.
pub const DEFAULT_POLICY: &str = "balance";
/// The CPU the embedded node is pinned to (when the machine has two).
const NODE_CPU: usize = 0;
/// The CPU the app side is pinned to (when the machine has two).
const APP_CPU: usize = 1;

/// One part of a demo: a workload run under each of its policies.
#[derive(Clone, Debug)]
pub struct DemoPart {
    /// Workload run under every policy of the part.
    pub workload: Workload,
    /// Policies, in order.
    pub policies: Vec<PolicySpec>,
}

/// Settings of a demo.
#[derive(Clone, Debug)]
pub struct DemoConfig {
    /// The parts, in order (each loads its workload's data first).
    pub parts: Vec<DemoPart>,
    /// Latency objective.
    pub slo: Duration,
    /// Length of each policy's run.
    pub duration_each: Duration,
    /// Seed.
    pub seed: u64,
    /// Graph nodes loaded.
    pub graph_nodes: u64,
    /// Directory the report goes to.
    pub out_dir: PathBuf,
    /// Pin the node to CPU 0 and the app side to CPU 1 (when the machine has two CPUs).
    pub pin: bool,
    /// Draw progress lines.
    pub progress: bool,
}

/// What the demo measured.
pub struct DemoReport {
    /// Per part, one report per policy, in order.
    pub runs: Vec<Vec<PlacementReport>>,
    /// Where the HTML report is.
    pub report_path: PathBuf,
    /// Whether the two sides were pinned apart.
    pub pinned: bool,
}

/// Runs the demo.
pub fn run(config: &DemoConfig, mut progress: impl FnMut(&str)) -> Result<DemoReport, BenchError> {
    let pinned = config.pin && ferry_os::online_cpus() >= 2;
    // The node's CPUs are the testbed's to pin and to report (an embedded node, not one
    // "elsewhere" whose pinning is unknown).
    let testbed_config = TestbedConfig {
        exe: PathBuf::new(),
        node: NodeSite::Embedded,
        tenant: ferry_proto::TenantId(DEMO_TENANT),
        token: DEMO_TOKEN.into(),
        server_cpus: if pinned { vec![NODE_CPU] } else { Vec::new() },
        client_cpus: if pinned { vec![APP_CPU] } else { Vec::new() },
        server_cores: 1,
        server_flags: Vec::new(),
        connections: 1,
        keep_warm: false,
    };
    let testbed = Testbed::start(&testbed_config)?;
    progress(&format!(
        "embedded storage node at {}{}",
        testbed.addr,
        if pinned {
            format!(" (node on CPU {NODE_CPU}, app side on CPU {APP_CPU})")
        } else {
            " (not pinned: fewer than 2 CPUs)".to_string()
        }
    ));
    let total: usize = config.parts.iter().map(|part| part.policies.len()).sum();
    let mut done = 0;
    let mut runs = Vec::new();
    for part in &config.parts {
        let mut part_runs = Vec::new();
        for (index, policy) in part.policies.iter().enumerate() {
            done += 1;
            progress(&format!(
                "[{done}/{total}] {} on {} for {:?}",
                policy.name(),
                part.workload.label,
                config.duration_each
            ));
            let bench = PlacementBenchConfig {
                testbed: testbed_config.clone(),
                workload: part.workload.clone(),
                policy: policy.clone(),
                slo: config.slo,
                quantile: 0.99,
                duration: config.duration_each,
                seed: config.seed,
                graph_nodes: config.graph_nodes,
                timeline_interval: Duration::from_millis(50),
                progress: config.progress,
            };
            crate::placement::validate(&bench)?;
            // A part's data is loaded once, by its first run.
            let report = testbed.runtime.block_on(run_on(&testbed, &bench, index == 0))?;
            part_runs.push(report);
        }
        runs.push(part_runs);
    }
    // Stops the embedded node after the app side's connections.
    drop(testbed);
    let report_path = write_report(&config.out_dir, config, &runs, pinned)?;
    Ok(DemoReport {
        runs,
        report_path,
        pinned,
    })
}

fn write_report(
    dir: &Path,
    config: &DemoConfig,
    runs: &[Vec<PlacementReport>],
    pinned: bool,
) -> Result<PathBuf, BenchError> {
    let labels: Vec<&str> = config.parts.iter().map(|part| part.workload.label.as_str()).collect();
    let verdicts: Vec<(String, String)> = config
        .parts
        .iter()
        .zip(runs)
        .filter_map(|(part, runs)| {
            Some((
                format!("verdict on {}", part.workload.label),
                verdict(runs, DEFAULT_POLICY)?,
            ))
        })
        .collect();
    let runs: Vec<&PlacementReport> = runs.iter().flatten().collect();
    let mut facts = vec![
        ("workloads".to_string(), labels.join(", ")),
        (
            "SLO".to_string(),
            format!("p99 ≤ {:.0} µs", config.slo.as_secs_f64() * 1e6),
        ),
        (
            "pinning".to_string(),
            if pinned {
                format!("node on CPU {NODE_CPU}, app side on CPU {APP_CPU}")
            } else {
                "none".to_string()
            },
        ),
    ];
    facts.extend(verdicts);
    for run in &runs {
        facts.push((
            format!("{} on {}", run.steady.policy, run.steady.workload),
            format!(
                "{:.0} ops/s, p99 {} µs, X {:.2}",
                run.steady.throughput_ops,
                run.steady.p99_us.map_or("-".into(), |p| format!("{p:.0}")),
                run.steady.rpc_fraction_mean
            ),
        ));
    }
    let mut figures = Vec::new();
    for run in &runs {
        let details: Vec<String> = bench_facts(run).iter().map(|(k, v)| format!("{k}: {v}")).collect();
        figures.push((
            format!(
                "{} on {} — {}",
                run.steady.policy,
                run.steady.workload,
                details.join("; ")
            ),
            timeline_figure(&run.steady.policy, &run.timeline, run.steady.slo_p99_us).to_svg(),
        ));
    }
    let page = html_page("ferry demo: ship compute or ship data?", &facts, &figures);
    write_into(dir, "report.html", &page)
}

/// Whether a run's steady p99 met the objective (a goodput over it does not count).
pub fn within_slo(run: &PlacementReport) -> bool {
    run.steady.p99_us.is_some_and(|p| p <= run.steady.slo_p99_us)
}

/// How near a policy's X must be to a static policy's to have placed like it.
const SAME_PLACEMENT_X: f64 = 0.05;

/// One sentence on the default policy (`default`) against the better static policy of a
/// part, from what the runs measured: ahead, or why not.
pub fn verdict(runs: &[PlacementReport], default: &str) -> Option<String> {
    let run = runs.iter().find(|run| run.steady.policy == default)?;
    let best = runs
        .iter()
        .filter(|r| (r.steady.policy == "kv" || r.steady.policy == "rpc") && within_slo(r))
        .max_by(|a, b| a.steady.throughput_ops.total_cmp(&b.steady.throughput_ops));
    let Some(best) = best else {
        return Some(if within_slo(run) {
            format!("{default} met the SLO and neither kv nor rpc did.")
        } else {
            format!("{default} missed the SLO, and so did kv and rpc: no policy kept it here.")
        });
    };
    let ratio = run.steady.throughput_ops / best.steady.throughput_ops.max(1.0);
    Some(if !within_slo(run) {
        format!(
            "{default} missed the SLO (p99 {:.0} µs), so its goodput does not count; {} met it.",
            run.steady.p99_us.unwrap_or(f64::NAN),
            best.steady.policy
        )
    } else if ratio >= 1.0 {
        format!(
            "{default} met the SLO at {ratio:.2}× {}, the better static policy.",
            best.steady.policy
        )
    } else if (run.steady.rpc_fraction_mean - best.steady.rpc_fraction_mean).abs() <= SAME_PLACEMENT_X {
        format!(
            "{default} placed as {} does (X {:.2}) and met the SLO at {ratio:.2}× its goodput: \
             its rate loop held R under what {} reached in this run.",
            best.steady.policy, run.steady.rpc_fraction_mean, best.steady.policy
        )
    } else {
        format!(
            "{default} met the SLO at {ratio:.2}× {}: the X its CPU balance chose ({:.2}) served \
             less here than {}'s X of {:.0}.",
            best.steady.policy, run.steady.rpc_fraction_mean, best.steady.policy, best.steady.rpc_fraction_mean
        )
    })
}
