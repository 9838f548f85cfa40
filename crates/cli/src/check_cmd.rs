//! `ferry check`: the soak — randomized invocations against an embedded node with
//! connections cut and workers replaced, every history checked for strict serializability.

use std::time::{Duration, Instant};

use ferry_chaos::{ChaosConfig, ChaosReport};

use crate::bench_cmd::duration_flag;
use crate::CmdResult;

/// Longest single run: a fresh node per run keeps each history (and the checker's graph)
/// bounded and lets every run use its full quota of worker replacements.
const RUN_MAX: Duration = Duration::from_secs(30);

/// Flags of `ferry check`.
#[derive(clap::Args)]
pub struct CheckArgs {
    /// Total time spent invoking, split into runs of at most 30 s, each on a fresh node.
    #[arg(long, default_value = "60s")]
    duration: String,
    /// Seed of the first run (each further run adds one).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Concurrent clients.
    #[arg(long, default_value_t = 12)]
    clients: usize,
    /// Hot keys they share (4 to 64).
    #[arg(long, default_value_t = 6)]
    keys: u8,
    /// Worker threads of the node.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Do not cut connections.
    #[arg(long)]
    no_cuts: bool,
    /// Do not stall workers into replacement by the watchdog.
    #[arg(long)]
    no_stalls: bool,
}

pub fn run(args: CheckArgs) -> CmdResult {
    let total = duration_flag("--duration", &args.duration)?;
    if total < Duration::from_secs(1) {
        return Err("--duration must be at least 1s".into());
    }
    let runs = total.as_secs_f64() / RUN_MAX.as_secs_f64();
    let runs = runs.ceil() as u64;
    let per_run = total / runs as u32;
    let started = Instant::now();
    let mut totals = ChaosReport::default();
    for i in 0..runs {
        let mut config = ChaosConfig::new(args.seed + i, per_run);
        config.clients = args.clients;
        config.keys = args.keys;
        config.workers = args.workers;
        if args.no_cuts {
            config.cut_mean_bytes = None;
        }
        if args.no_stalls {
            config.stall_probability = 0.0;
        }
        let report = ferry_chaos::run(&config)?;
        println!(
            "run {}/{runs} (seed {}): {} invocations: {} committed ({} remote, {} local, {} pushed back), \
             {} failed, {} unknown; {} retries, {} cuts, {} workers replaced; {} judged: {}",
            i + 1,
            config.seed,
            report.invocations,
            report.committed,
            report.remote,
            report.local,
            report.pushed_back,
            report.failed,
            report.unknown,
            report.retries,
            report.cuts,
            report.worker_replacements,
            report.judged,
            report.violation.as_deref().unwrap_or("strictly serializable"),
        );
        if let Some(violation) = &report.violation {
            return Err(format!("seed {}: NOT strictly serializable: {violation}", config.seed).into());
        }
        add(&mut totals, &report);
    }
    println!(
        "checked {} invocations ({} judged, {} of unknown outcome) in {runs} runs, {:.0} s: strictly serializable",
        totals.invocations,
        totals.judged,
        totals.unknown,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn add(totals: &mut ChaosReport, r: &ChaosReport) {
    totals.invocations += r.invocations;
    totals.committed += r.committed;
    totals.failed += r.failed;
    totals.unknown += r.unknown;
    totals.judged += r.judged;
}
