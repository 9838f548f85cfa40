//! `ferry bench`: a placement policy on real processes, with the flags of `ferry sim`.

use ferry_proto::TenantId;
use std::path::PathBuf;
use std::time::Duration;

use ferry_bench::placement::{PlacementBenchConfig, PlacementReport, DEFAULT_GRAPH_NODES};
use ferry_bench::testbed::{NodeSite, TestbedConfig};
use ferry_experiment::spec::parse_workload;
use ferry_spec::parse_policy;

use crate::CmdResult;

/// Shortest run accepted: the loops need a few hundred milliseconds to say anything.
const MIN_DURATION: Duration = Duration::from_millis(100);

/// Longest run accepted.
const MAX_DURATION: Duration = Duration::from_secs(3600);

/// Flags shared by `ferry bench` and `ferry sweep`: where the two sides run.
#[derive(clap::Args, Clone, Debug)]
pub struct TestbedArgs {
    /// Use this running storage node or gateway (tenant/token below) instead of starting
    /// a node.
    #[arg(long)]
    pub server: Option<String>,
    /// Tenant id.
    #[arg(long, default_value_t = TenantId(1))]
    pub tenant: TenantId,
    /// Tenant token.
    #[arg(long, default_value = "ferry")]
    pub token: String,
    /// CPUs of the storage node.
    #[arg(long, default_value = "0")]
    pub server_cpus: String,
    /// CPUs of the app side (load generator and local execution).
    #[arg(long, default_value = "1")]
    pub client_cpus: String,
    /// Worker threads of the storage node (with --server: that node's cores; the default
    /// policy's load model divides the node's load by them).
    #[arg(long, default_value_t = 1)]
    pub server_cores: usize,
    /// Pipelined connections to the node.
    #[arg(long, default_value_t = 1)]
    pub connections: usize,
    /// A further flag for the started node (repeatable).
    #[arg(long = "server-flag", allow_hyphen_values = true)]
    pub server_flags: Vec<String>,
    /// Graph nodes loaded for `traverse`.
    #[arg(long, default_value_t = DEFAULT_GRAPH_NODES)]
    pub nodes: u64,
    /// Keep the pinned CPUs of both sides from idling: an idle-priority spinning thread per
    /// CPU. For VMs whose halted vCPUs take milliseconds to wake (which the rate loop reads as
    /// overload); where they wake fast it costs wake-up IPIs (see docs/BENCHMARKS.md).
    #[arg(long)]
    pub keep_warm: bool,
}

impl TestbedArgs {
    /// The testbed these flags describe.
    pub fn testbed(&self) -> Result<TestbedConfig, Box<dyn std::error::Error + Send + Sync>> {
        Ok(TestbedConfig {
            exe: std::env::current_exe()?,
            node: NodeSite::child_unless(self.server.clone()),
            tenant: self.tenant,
            token: self.token.clone(),
            server_cpus: ferry_os::parse_cpu_set(&self.server_cpus)?,
            client_cpus: ferry_os::parse_cpu_set(&self.client_cpus)?,
            server_cores: self.server_cores,
            server_flags: self.server_flags.clone(),
            connections: self.connections,
            keep_warm: self.keep_warm,
        })
    }
}

/// Flags of `ferry bench`.
#[derive(clap::Args)]
pub struct BenchArgs {
    /// Workload: light, medium, heavy, traverse:depth=D,compute=C, bimodal:a=..,b=..,period=..,
    /// ycsbt:accounts=N,transfer=F,compute=C
    #[arg(long, default_value = "medium")]
    workload: String,
    /// Policy: balance[:slicing=share|equal,without=PART+...] (ferry's default: X from
    /// each side's measured CPU), pyxis[:alpha0=F,slicing=...,m=M] (Pyxis' Algorithm 1),
    /// kv, rpc, fixed:X, kayak[:x0=F,r-hz=F,x-hz=F] (the paper's dual loop),
    /// kayak-xr[:...], kayak-plus[:...] (one X per function), asfp. `without=` parts:
    /// window, capacity-filter, proportional-cut, margin; for balance also capture,
    /// feed-forward.
    #[arg(long, default_value = "balance")]
    policy: String,
    /// p99 latency objective. Default 5 ms: on these VMs a loopback round trip alone has a
    /// p99 of 0.3–0.6 ms and a p99.9 of several ms, so tighter SLOs leave no room to control.
    #[arg(long, default_value = "5ms", value_parser = crate::flag_values::slo)]
    slo_p99: Duration,
    /// Length of the run.
    #[arg(long, default_value = "5s", value_parser = crate::flag_values::duration)]
    duration: Duration,
    /// Seed of the policy and the request stream.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Timeline resolution.
    #[arg(long, default_value = "50ms", value_parser = crate::flag_values::duration)]
    timeline_interval: Duration,
    /// Write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write the timeline as CSV here.
    #[arg(long)]
    timeline_csv: Option<PathBuf>,
    /// Write a self-contained HTML report (with SVG charts) into this directory.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Benchmark another store instead of ferry: `redis://HOST:PORT` (a Redis 7 started by
    /// scripts/redis.sh, pinned to the node's CPU). Only traverse workloads apply.
    #[arg(long)]
    target: Option<String>,
    #[command(flatten)]
    testbed: TestbedArgs,
}

pub fn run(args: BenchArgs) -> CmdResult {
    let workload = parse_workload(&args.workload).map_err(|err| format!("--workload: {err}"))?;
    let policy = parse_policy(&args.policy).map_err(|err| format!("--policy: {err}"))?;
    let slo = args.slo_p99;
    let duration = args.duration;
    if !(MIN_DURATION..=MAX_DURATION).contains(&duration) {
        return Err(format!("--duration must be between {MIN_DURATION:?} and {MAX_DURATION:?}").into());
    }
    let timeline_interval = args.timeline_interval;
    let config = PlacementBenchConfig {
        testbed: args.testbed.testbed()?,
        workload,
        policy,
        slo,
        quantile: 0.99,
        duration,
        seed: args.seed,
        graph_nodes: args.testbed.nodes,
        timeline_interval,
        progress: true,
    };
    let report = match &args.target {
        Some(target) => ferry_bench::placement::run_redis(&config, target)?,
        None => ferry_bench::placement::run(&config)?,
    };
    print_report(&report);
    if let Some(path) = &args.json {
        write(path, &serde_json::to_string_pretty(&report)?)?;
    }
    if let Some(path) = &args.timeline_csv {
        write(path, &ferry_bench::report::timeline_csv(&report.timeline))?;
    }
    if let Some(dir) = &args.report {
        let path = ferry_bench::report::write_bench_report(dir, &report)?;
        println!("report: {}", path.display());
    }
    Ok(())
}

fn write(path: &PathBuf, text: &str) -> CmdResult {
    std::fs::write(path, text).map_err(|err| format!("cannot write {}: {err}", path.display()).into())
}

fn print_report(report: &PlacementReport) {
    let opt = |v: Option<f64>, digits: usize| v.map_or("-".to_string(), |v| format!("{v:.digits$}"));
    println!(
        "bench: {} on {}, SLO p99 {:.0} µs, {:.1} s, node CPUs {:?}, app CPUs {:?}",
        report.steady.policy,
        report.steady.workload,
        report.steady.slo_p99_us,
        report.steady.duration_ms / 1e3,
        report.server_cpus,
        report.client_cpus
    );
    println!("  goodput (steady)    {:>10.0} ops/s", report.steady.throughput_ops);
    println!(
        "  latency (steady)    p50 {} µs   p99 {} µs",
        opt(report.steady.latency_us_p50, 0),
        opt(report.steady.p99_us, 0)
    );
    println!(
        "  final X / R         {:.3} / {:.0} ops/s   (mean X in steady state {:.3})",
        report.steady.rpc_fraction, report.steady.rate_ops, report.steady.rpc_fraction_mean
    );
    println!("  converged after     {} ms", opt(report.steady.converge_ms, 0));
    println!(
        "  CPU used            node {}   app {} (of which in functions {:.2})",
        opt(report.storage_cpus_used, 2),
        opt(report.app_cpus_used, 2),
        report.app_function_cpus_used
    );
    if let (Some(rate), Some(share)) = (report.pushbacks_per_s, report.pushback_share) {
        if rate > 0.0 {
            println!(
                "  pushbacks           {rate:.0}/s ({:.1}% of requests), wasted node CPU {}",
                share * 100.0,
                opt(report.pushback_wasted_storage_cpus, 3)
            );
        }
    }
    if let Some(ok) = report.invariant_ok {
        println!(
            "  YCSB-T invariant    {}",
            if ok {
                "ok: the total of all balances is unchanged"
            } else {
                "VIOLATED: balances do not add up"
            }
        );
    }
    let errors: u64 = report.errors.values().sum();
    println!(
        "  requests            {} ok, {} failed {:?}, {} dropped",
        report.completed, errors, report.errors, report.dropped
    );
}
