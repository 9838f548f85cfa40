//! `ferry fairness`: tenants' shares of a multi-core node and work conservation.

use std::path::PathBuf;
use std::time::Duration;

use ferry_bench::fairness::{FairnessConfig, FairnessReport};
use ferry_experiment::spec::parse_workload;

use crate::CmdResult;

/// Flags of `ferry fairness`.
#[derive(clap::Args)]
pub struct FairnessArgs {
    /// One workload per tenant, comma-separated (2 to 16 tenants), e.g. heavy,medium,light,heavy.
    #[arg(long, default_value = "heavy,medium,light,heavy")]
    workloads: String,
    /// Worker threads of the node (tenants get home cores round-robin).
    #[arg(long, default_value_t = 2)]
    cores: usize,
    /// CPUs of the node. This machine has two, so by default the node gets both and the
    /// load generator (light: every request runs remotely) shares CPU 1.
    #[arg(long, default_value = "0-1")]
    server_cpus: String,
    /// CPUs of the load generator.
    #[arg(long, default_value = "1")]
    client_cpus: String,
    /// Length of each phase (all tenants; then all but the last).
    #[arg(long, default_value = "4s", value_parser = crate::flag_values::duration)]
    phase: Duration,
    /// Invocations each tenant keeps in flight.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

pub fn run(args: FairnessArgs) -> CmdResult {
    let tenants = args
        .workloads
        .split(',')
        .map(|w| {
            let workload = parse_workload(w.trim()).map_err(|err| format!("--workloads {w:?}: {err}"))?;
            workload
                .functions
                .first()
                .cloned()
                .ok_or_else(|| format!("--workloads {w:?} has no function"))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let config = FairnessConfig {
        exe: std::env::current_exe()?,
        tenants,
        cores: args.cores,
        server_cpus: ferry_os::parse_cpu_set(&args.server_cpus)?,
        client_cpus: ferry_os::parse_cpu_set(&args.client_cpus)?,
        phase: args.phase.max(Duration::from_millis(100)),
        concurrency: args.concurrency,
    };
    let report = ferry_bench::fairness::run(&config, |line| eprintln!("{line}"))?;
    print_report(&report);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .map_err(|err| format!("cannot write {}: {err}", path.display()))?;
    }
    Ok(())
}

fn print_report(report: &FairnessReport) {
    println!(
        "fairness: {}-core node on CPUs {:?}, load generator on CPUs {:?}",
        report.cores, report.server_cpus, report.client_cpus
    );
    println!(
        "{:>6} {:<34} {:>5} {:>12} {:>8} {:>14} {:>8}",
        "tenant", "workload", "home", "together/s", "share", "after stop/s", "share"
    );
    for row in &report.tenants {
        let after = row
            .after_stop_ops
            .map_or("stopped".to_string(), |ops| format!("{ops:.0}"));
        let after_share = row
            .after_stop_cpu_share
            .map_or("-".to_string(), |s| format!("{:.3}", s));
        println!(
            "{:>6} {:<34} {:>5} {:>12.0} {:>8.3} {:>14} {:>8}",
            row.tenant, row.workload, row.home_core, row.together_ops, row.together_cpu_share, after, after_share
        );
    }
    println!(
        "Jain's index of CPU shares: {:.4} with all tenants, {:.4} after the last stopped; node CPUs used by tenants {:.2}",
        report.jain_together, report.jain_after_stop, report.node_cpus_together
    );
}
