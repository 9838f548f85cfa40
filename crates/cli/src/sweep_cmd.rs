//! `ferry sweep`: the measured upper bound over fixed RPC fractions.

use std::time::Duration;

use std::path::PathBuf;

use ferry_bench::sweep::{SweepConfig, SweepReport};
use ferry_experiment::spec::parse_workload;

use crate::bench_cmd::TestbedArgs;
use crate::CmdResult;

/// Most bisection steps accepted.
const MAX_BISECTION_STEPS: u32 = 20;

/// Flags of `ferry sweep`.
#[derive(clap::Args)]
pub struct SweepArgs {
    /// Workload (as for `ferry bench`).
    #[arg(long, default_value = "medium")]
    workload: String,
    /// p99 latency objective. Default 5 ms: on these VMs a loopback round trip alone has a
    /// p99 of 0.3–0.6 ms and a p99.9 of several ms, so tighter SLOs leave no room to control.
    #[arg(long, default_value = "5ms", value_parser = crate::flag_values::slo)]
    slo_p99: Duration,
    /// X step from 0 to 1.
    #[arg(long, default_value_t = 0.1)]
    step: f64,
    /// Measure only these X values instead of the steps (e.g. `0.5` or `0,0.5,1`).
    #[arg(long, conflicts_with = "step", allow_hyphen_values = true)]
    x: Option<String>,
    /// Measured length of each probe. Default 1.5 s: the judged window (the last quarter)
    /// of the 6 s runs the real A/B judges the policies by.
    #[arg(long, default_value = "1.5s", value_parser = crate::flag_values::duration)]
    probe: Duration,
    /// Unmeasured start of each probe.
    #[arg(long, default_value = "300ms", value_parser = crate::flag_values::duration)]
    warmup: Duration,
    /// Bisection steps per X after bracketing.
    #[arg(long, default_value_t = 5)]
    bisection_steps: u32,
    /// First rate tried (requests/s).
    #[arg(long, default_value_t = 10_000.0)]
    start_rate: f64,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write sweep.html (goodput against X) into this directory.
    #[arg(long)]
    report: Option<PathBuf>,
    /// A `ferry bench --json` file whose operating point to mark on the report (repeatable).
    #[arg(long = "mark")]
    marks: Vec<PathBuf>,
    #[command(flatten)]
    testbed: TestbedArgs,
}

fn mark(path: &PathBuf) -> Result<(String, f64, f64), String> {
    let text = std::fs::read_to_string(path).map_err(|err| format!("--mark {}: {err}", path.display()))?;
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|err| format!("--mark {}: not JSON: {err}", path.display()))?;
    let field = |name: &str| {
        json[name]
            .as_f64()
            .ok_or_else(|| format!("--mark {}: no {name}", path.display()))
    };
    let policy = json["policy"].as_str().unwrap_or("policy").to_string();
    Ok((policy, field("rpc_fraction_mean")?, field("throughput_ops")?))
}

pub fn run(args: SweepArgs) -> CmdResult {
    let workload = parse_workload(&args.workload).map_err(|err| format!("--workload: {err}"))?;
    let slo = args.slo_p99;
    if args.bisection_steps > MAX_BISECTION_STEPS {
        return Err(format!("--bisection-steps must be at most {MAX_BISECTION_STEPS}").into());
    }
    let marks: Vec<(String, f64, f64)> = args.marks.iter().map(mark).collect::<Result<_, _>>()?;
    let config = SweepConfig {
        testbed: args.testbed.testbed()?,
        workload,
        slo,
        quantile: 0.99,
        fractions: match &args.x {
            Some(list) => crate::sim_cmd::parse_x_list(list)?,
            None => ferry_bench::sweep::fractions(args.step)?,
        },
        warmup: args.warmup,
        probe: args.probe,
        bisection_steps: args.bisection_steps,
        start_rate_ops: args.start_rate,
        seed: args.seed,
        graph_nodes: args.testbed.nodes,
    };
    let report = ferry_bench::sweep::run(&config, |line| eprintln!("{line}"))?;
    print_table(&report);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .map_err(|err| format!("cannot write {}: {err}", path.display()))?;
    }
    if let Some(dir) = &args.report {
        let path = ferry_bench::report::write_sweep_report(dir, &report, &marks)?;
        println!("report: {}", path.display());
    }
    Ok(())
}

fn print_table(report: &SweepReport) {
    println!("sweep: {} at p99 ≤ {:.0} µs", report.workload, report.slo_p99_us);
    println!(
        "{:>6} {:>14} {:>14} {:>19} {:>10} {:>10}",
        "X", "rate/s", "goodput/s", "goodput min–max", "p99 µs", "p99 max"
    );
    let us = |p: Option<f64>| p.map_or("-".to_string(), |p| format!("{p:.0}"));
    for row in &report.rows {
        let spread = format!("{:.0}–{:.0}", row.throughput_ops_min, row.throughput_ops_max);
        println!(
            "{:>6.2} {:>14.0} {:>14.0} {:>19} {:>10} {:>10}",
            row.rpc_fraction,
            row.rate_ops,
            row.throughput_ops,
            spread,
            us(row.p99_us),
            us(row.p99_us_max)
        );
    }
    println!(
        "best: {:.0} ops/s at X = {:.2}",
        report.best_throughput_ops, report.best_rpc_fraction
    );
}
