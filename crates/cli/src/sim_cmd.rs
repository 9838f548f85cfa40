//! `ferry sim` and `ferry sim-sweep`: thin glue over `ferry_sim`.
//!
//! Every flag value goes through `ferry_sim::spec` (the parsers `ferry bench` shares), and
//! every bad value comes back as a typed error that `main` prints as `error: ...` with exit
//! code 1 — never a panic.

use std::path::PathBuf;

use ferry_control::Nanos;
use ferry_experiment::ExperimentError;
use ferry_sim::scenario::TIMELINE_INTERVAL_DEFAULT;
use ferry_sim::sweep::{self, SweepConfig};
use ferry_sim::Scenario;
use ferry_spec::parse_policy;

pub use crate::scenario_args::parse_x_list;
use crate::scenario_args::{duration, ScenarioArgs};
use crate::CmdResult;

/// Flags of `ferry sim`.
#[derive(clap::Args, Debug)]
pub struct SimArgs {
    #[command(flatten)]
    scenario: ScenarioArgs,
    /// Policy: balance[:slicing=share|equal,without=PART+...] (the default: X from each
    /// side's measured CPU) | pyxis[:alpha0=F,slicing=...,m=M] | kv | rpc | fixed:X |
    /// kayak[:x0=F,r-hz=F,x-hz=F] | kayak-xr[:...] | kayak-plus[:...]. `without=` parts:
    /// window, capacity-filter, proportional-cut, margin; for balance also capture,
    /// feed-forward.
    #[arg(long, default_value = "balance", allow_hyphen_values = true)]
    policy: String,
    /// Simulated time (e.g. 5s).
    #[arg(long, default_value = "5s", allow_hyphen_values = true)]
    duration: String,
    /// Placement groups (Pyxis §IV-E): split the nodes into this many groups, each with
    /// its own storage and app nodes and its own policy (rate and placement); a request
    /// belongs to the group holding its data. At most the number of storage nodes and of
    /// app nodes.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    placement_groups: i64,
    /// Elastic compute (Pyxis §IV-D): scale each placement group's active app cores
    /// between MIN and MAX with the demand (e.g. 16..128); the timeline's app_cores column
    /// shows the cores in use.
    #[arg(long, allow_hyphen_values = true)]
    elastic: Option<String>,
    /// The demand offered to the cluster, requests per second: RATE, or RATE,RATE,...@STEP
    /// stepping through the rates every STEP (e.g. 250k,500k,750k,1M@5s). Without it the
    /// backlog saturates and the rate limiter alone sets the load.
    #[arg(long, allow_hyphen_values = true)]
    demand: Option<String>,
    /// Timeline resolution (e.g. 10ms).
    #[arg(long, allow_hyphen_values = true)]
    timeline_interval: Option<String>,
    /// Write the JSON report here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write the timeline as CSV here.
    #[arg(long)]
    timeline_csv: Option<PathBuf>,
}

/// Flags of `ferry sim-sweep`.
#[derive(clap::Args, Debug)]
pub struct SimSweepArgs {
    #[command(flatten)]
    scenario: ScenarioArgs,
    /// Step of the RPC fraction X from 0 to 1.
    #[arg(long, default_value_t = sweep::X_STEP_DEFAULT, allow_negative_numbers = true)]
    x_step: f64,
    /// Sweep only these X values instead of the steps (e.g. `0.5` or `0,0.5,1`).
    #[arg(long, conflicts_with_all = ["x_step", "grid"], allow_hyphen_values = true)]
    x: Option<String>,
    /// Sweep Pyxis' turning point α instead of one X for every function: the functions of
    /// a mix go remote whole, in the order of storage CPU added per app CPU saved, each
    /// with a slice of α as wide as its share (α is the share sent remote). This is the
    /// per-function upper bound; on one function it is the X sweep.
    #[arg(long)]
    turning_point: bool,
    /// For a mix of two functions: sweep both functions' shares sent remote over a grid of
    /// `--x-step`, to check Pyxis' all-or-nothing structure (the best cell has one function
    /// all remote or all local). Prints throughput by the two shares.
    #[arg(long, conflicts_with = "turning_point")]
    grid: bool,
    /// Warm-up of each fixed-rate run.
    #[arg(long, default_value = "10ms", allow_hyphen_values = true)]
    warmup: String,
    /// Measured span of each fixed-rate run.
    #[arg(long, default_value = "50ms", allow_hyphen_values = true)]
    measure: String,
    /// Start of the measured span (default: right after the warm-up). Give a policy run's
    /// steady window (e.g. `--measure-from 1.5s --measure 500ms` for `ferry sim --duration
    /// 2s`, same seed) to judge the bound by the same p99 as the run: over the same span,
    /// with the same node stalls.
    #[arg(long, allow_hyphen_values = true, conflicts_with = "duration")]
    measure_from: Option<String>,
    /// As `ferry sim --duration`: measure over the steady window (the last quarter) of a
    /// policy run this long with the same seed, the span the run is judged on (the same as
    /// `--measure-from 0.75·D --measure 0.25·D`).
    #[arg(long, allow_hyphen_values = true, conflicts_with = "measure")]
    duration: Option<String>,
    /// Bisection steps of the rate per X.
    #[arg(long, default_value_t = sweep::BISECTION_STEPS_DEFAULT)]
    bisection_steps: u32,
    /// Worker threads (0: one per CPU); the output does not depend on it.
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Write the JSON report here.
    #[arg(long)]
    json: Option<PathBuf>,
}

fn write(path: &PathBuf, text: &str) -> CmdResult {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()).into())
}

/// `ferry sim`: run one policy and report.
pub fn run_sim(args: SimArgs) -> CmdResult {
    let s = &args.scenario;
    let mut cluster = s.cluster()?;
    cluster.placement_groups = u32::try_from(args.placement_groups).map_err(|_| ExperimentError::OutOfRange {
        name: "--placement-groups".into(),
        range: "[1, storage nodes]",
        value: args.placement_groups.to_string(),
    })?;
    if let Some(e) = &args.elastic {
        cluster.elastic =
            Some(
                ferry_experiment::scaling::parse_elastic(e).map_err(|source| ExperimentError::Spec {
                    flag: "--elastic".into(),
                    source,
                })?,
            );
    }
    cluster.validate()?;
    let mut workload = s.workload()?;
    let slo = s.slos(&cluster, &mut workload)?;
    if let Some(d) = &args.demand {
        workload.demand = Some(
            ferry_experiment::scaling::parse_demand(d).map_err(|source| ExperimentError::Spec {
                flag: "--demand".into(),
                source,
            })?,
        );
    }
    let scenario = Scenario {
        cluster,
        workload,
        policy: parse_policy(&args.policy).map_err(|source| ExperimentError::Spec {
            flag: "--policy".into(),
            source,
        })?,
        slo,
        duration: duration("--duration", &args.duration)?,
        seed: s.seed(),
        arrivals: s.arrivals()?,
        timeline_interval: match &args.timeline_interval {
            Some(v) => duration("--timeline-interval", v)?,
            None => TIMELINE_INTERVAL_DEFAULT,
        },
    };
    let report = scenario.run()?;
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.1}"));
    println!(
        "seed {} policy {} workload {} on {} cores, rtt {}, SLO p99 <= {}us, {}{}",
        report.steady.seed,
        report.steady.policy,
        report.steady.workload,
        scenario.cluster.shape(),
        scenario.cluster.rtt,
        report.steady.slo_p99_us,
        scenario.duration,
        s.profile_path()
            .map_or(String::new(), |p| format!(", profile {}", p.display()))
    );
    println!(
        "steady state (from {:.0} ms): throughput {:.0} ops/s, p99 {} us, mean {} us, X {:.3} (final {:.3}), R {:.0} ops/s",
        report.steady.steady_start_ms,
        report.steady.throughput_ops,
        opt(report.steady.p99_us),
        opt(report.latency_us_mean),
        report.steady.rpc_fraction_mean,
        report.steady.rpc_fraction,
        report.steady.rate_ops
    );
    println!(
        "converged after {} ms; utilisation app {:.2} storage {:.2}; {} completed, {} dropped",
        report
            .steady
            .converge_ms
            .map_or("never".to_string(), |c| format!("{c:.0}")),
        report.app_utilization,
        report.storage_utilization,
        report.completed,
        report.dropped
    );
    if scenario.workload.has_function_slos() {
        let worst = report.slo_ratio.map_or("-".to_string(), |r| format!("{r:.2}"));
        println!("per-function SLOs (slowdown): worst p99 / SLO {worst}");
        for t in &report.functions {
            println!(
                "  {}: p99 {} us against {:.1} us ({} completions)",
                t.name,
                opt(t.p99_us),
                t.slo_us,
                t.completions
            );
        }
    }
    if scenario.cluster.elastic.is_some() {
        println!(
            "elastic compute: {:.1} app cores active on average in the steady state",
            report.app_cores_active_mean
        );
    }
    if !report.group_rpc_fractions.is_empty() {
        let xs: Vec<String> = report.group_rpc_fractions.iter().map(|x| format!("{x:.3}")).collect();
        println!("placement groups: steady X per group {}", xs.join(" "));
    }
    if let Some(p) = &args.json {
        write(p, &report.to_json())?;
    }
    if let Some(p) = &args.timeline_csv {
        write(p, &report.timeline_csv())?;
    }
    Ok(())
}

/// `ferry sim-sweep`: fixed X (or turning point α) from 0 to 1, each at the largest rate
/// meeting the SLO.
pub fn run_sweep(args: SimSweepArgs) -> CmdResult {
    let s = &args.scenario;
    if !(args.x_step > 0.0 && args.x_step <= 1.0) {
        return Err(ExperimentError::OutOfRange {
            name: "--x-step".into(),
            range: "(0, 1]",
            value: args.x_step.to_string(),
        }
        .into());
    }
    let cluster = s.cluster()?;
    let mut workload = s.workload()?;
    let slo = s.slos(&cluster, &mut workload)?;
    let mut cfg = SweepConfig::new(cluster, workload, slo, s.seed());
    cfg.arrivals = s.arrivals()?;
    cfg.warmup = duration("--warmup", &args.warmup)?;
    cfg.measure = duration("--measure", &args.measure)?;
    cfg.measure_from = args
        .measure_from
        .as_deref()
        .map(|v| duration("--measure-from", v))
        .transpose()?;
    if let Some(d) = &args.duration {
        let run = duration("--duration", d)?;
        let steady = Nanos((run.0 as f64 * ferry_sim::scenario::STEADY_FRACTION) as u64);
        if steady == Nanos::ZERO {
            return Err(ExperimentError::OutOfRange {
                name: "--duration".into(),
                range: "(0, 1000000s]",
                value: d.clone(),
            }
            .into());
        }
        cfg.measure_from = Some(run - steady);
        cfg.measure = steady;
    }
    cfg.bisection_steps = args.bisection_steps;
    if args.turning_point {
        cfg.axis = sweep::Axis::TurningPoint;
    }
    cfg.threads = if args.threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        args.threads
    };
    cfg.validate()?;
    // The same SLO check `ferry sim` applies: below the faster path's unloaded latency no
    // X can meet it.
    let probe = Scenario {
        cluster: cfg.cluster.clone(),
        workload: cfg.workload.clone(),
        policy: ferry_spec::default_policy(),
        slo: cfg.slo,
        duration: Nanos::from_secs(1),
        seed: cfg.seed,
        arrivals: cfg.arrivals,
        timeline_interval: TIMELINE_INTERVAL_DEFAULT,
    };
    probe.validate()?;
    if args.grid {
        let report = sweep::grid(&cfg, args.x_step)?;
        print!("{}", report.table());
        if let Some(p) = &args.json {
            // Invariant: the report holds only numbers, strings and vectors.
            write(p, &serde_json::to_string_pretty(&report).expect("report serialises"))?;
        }
        return Ok(());
    }
    let xs = match &args.x {
        Some(list) => parse_x_list(list)?,
        None => sweep::x_grid(args.x_step),
    };
    let report = sweep::sweep(&cfg, &xs)?;
    print!("{}", report.table());
    if let Some(p) = &args.json {
        // Invariant: the report holds only numbers, strings and vectors.
        write(p, &serde_json::to_string_pretty(&report).expect("report serialises"))?;
    }
    Ok(())
}
