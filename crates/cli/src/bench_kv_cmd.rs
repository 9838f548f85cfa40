//! `ferry bench-kv`: gets and no-op invocations against a pinned storage node.

use ferry_proto::TenantId;
use std::path::PathBuf;
use std::time::Duration;

use ferry_bench::kv::{KvBenchConfig, KvBenchReport};
use ferry_bench::testbed::{NodeSite, TestbedConfig};

use crate::CmdResult;

/// Most repetitions accepted.
const MAX_RUNS: usize = 100;

/// Most requests in flight accepted.
const MAX_CONCURRENCY: usize = 65_536;

/// Flags of `ferry bench-kv`.
#[derive(clap::Args)]
pub struct BenchKvArgs {
    /// Measure this running node instead of starting one (then --server-cpus is ignored).
    #[arg(long)]
    server: Option<String>,
    /// Tenant id (for --server).
    #[arg(long, default_value_t = TenantId(1))]
    tenant: TenantId,
    /// Tenant token (for --server).
    #[arg(long, default_value = "ferry")]
    token: String,
    /// CPUs of the storage node.
    #[arg(long, default_value = "0")]
    server_cpus: String,
    /// CPUs of the load generator (this process).
    #[arg(long, default_value = "1")]
    client_cpus: String,
    /// Measured time of each phase.
    #[arg(long, default_value = "3s", value_parser = crate::flag_values::duration)]
    duration: Duration,
    /// Warm-up before each saturation phase.
    #[arg(long, default_value = "500ms", value_parser = crate::flag_values::duration)]
    warmup: Duration,
    /// Repetitions (medians are reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Requests in flight at saturation (pipelining depth).
    #[arg(long, default_value_t = 128)]
    concurrency: usize,
    /// Connections to spread them over (fewer, deeper pipelines batch better).
    #[arg(long, default_value_t = 1)]
    connections: usize,
    /// Objects in the table.
    #[arg(long, default_value_t = 100_000)]
    keys: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// A further flag for the started node, e.g. --server-flag=--no-inline-data-ops
    /// (repeatable).
    #[arg(long = "server-flag", allow_hyphen_values = true)]
    server_flags: Vec<String>,
    /// Keep the pinned CPUs from idling (idle-priority spinning threads, as `ferry bench
    /// --keep-warm`).
    #[arg(long)]
    keep_warm: bool,
    /// Offered load of the open-loop phases, as a fraction of the saturation throughput.
    #[arg(long, default_value_t = 0.5)]
    load_fraction: f64,
    /// Write the full report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

pub fn run(args: BenchKvArgs) -> CmdResult {
    if args.runs == 0 || args.runs > MAX_RUNS {
        return Err(format!("--runs must be 1..={MAX_RUNS}").into());
    }
    if args.concurrency == 0 || args.concurrency > MAX_CONCURRENCY {
        return Err(format!("--concurrency must be 1..={MAX_CONCURRENCY}").into());
    }
    if !(args.load_fraction > 0.0 && args.load_fraction <= 1.0) {
        return Err("--load-fraction must be in (0, 1]".into());
    }
    if args.keys == 0 || args.duration.is_zero() {
        return Err("--keys and --duration must be positive".into());
    }
    let config = KvBenchConfig {
        testbed: TestbedConfig {
            exe: std::env::current_exe()?,
            node: NodeSite::child_unless(args.server.clone()),
            tenant: args.tenant,
            token: args.token.clone(),
            server_cpus: ferry_os::parse_cpu_set(&args.server_cpus)?,
            client_cpus: ferry_os::parse_cpu_set(&args.client_cpus)?,
            server_cores: 1,
            server_flags: args.server_flags.clone(),
            connections: args.connections,
            keep_warm: args.keep_warm,
        },
        duration: args.duration,
        warmup: args.warmup,
        runs: args.runs,
        concurrency: args.concurrency,
        keys: args.keys,
        value_bytes: args.value_size,
        load_fraction: args.load_fraction,
    };
    let report = ferry_bench::kv::run(&config, |line| eprintln!("{line}"))?;
    print_report(&report);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
        eprintln!("report written to {}", path.display());
    }
    Ok(())
}

fn print_report(report: &KvBenchReport) {
    println!(
        "bench-kv: node on CPUs {:?}, load generator on CPUs {:?}, {} in flight over {} connections, medians of {} runs",
        report.server_cpus,
        report.client_cpus,
        report.concurrency,
        report.connections,
        report.runs.len()
    );
    println!(
        "{:<18} {:>14} {:>10} {:>10} {:>10}",
        "phase", "throughput/s", "p50 µs", "p99 µs", "node CPUs"
    );
    for phase in &report.medians {
        let cpus = phase.server_cpus_used.map_or("-".to_string(), |c| format!("{c:.2}"));
        println!(
            "{:<18} {:>14.0} {:>10.1} {:>10.1} {:>10}",
            phase.name, phase.throughput_ops, phase.p50_us, phase.p99_us, cpus
        );
    }
}
