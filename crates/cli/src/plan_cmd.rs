//! `ferry plan`: the cheapest cluster that serves a demand within a p99 SLO with ferry's
//! placement, searched in the (calibrated) simulator (`ferry_sim::plan`).

use std::path::PathBuf;

use ferry_control::Nanos;
use ferry_experiment::model::ClusterModel;
use ferry_experiment::scaling::parse_rate;
use ferry_experiment::{parse_workload, ExperimentError};
use ferry_sim::plan::{self, PlanConfig, Shape, MAX_CORES_DEFAULT};
use ferry_sim::Slo;
use ferry_spec::parse_duration;

use crate::scenario_args::{duration, load_profile};
use crate::CmdResult;

/// Flags of `ferry plan`.
#[derive(clap::Args, Debug)]
pub struct PlanArgs {
    /// Workload to serve (as for `ferry sim`).
    #[arg(long, allow_hyphen_values = true)]
    workload: String,
    /// The p99 latency objective (e.g. 200us, 5ms).
    #[arg(long, allow_hyphen_values = true)]
    slo_p99: String,
    /// The demand to serve, requests per second (e.g. 250000, 250k, 1.5M).
    #[arg(long, allow_hyphen_values = true)]
    demand: String,
    /// A machine profile written by `ferry calibrate`: plan for that machine's costs, RTT
    /// and stalls (default: the paper-scale model).
    #[arg(long)]
    profile: Option<PathBuf>,
    /// Most cores the cluster may have, app and storage together.
    #[arg(long, default_value_t = i64::from(MAX_CORES_DEFAULT), allow_negative_numbers = true)]
    max_cores: i64,
    /// Cores of every app node, if fixed (1: compute-node workers); default: the fewest
    /// nodes of up to 64 cores.
    #[arg(long, allow_negative_numbers = true)]
    app_node_cores: Option<i64>,
    /// Cores of every storage node, if fixed; default: the fewest nodes of up to 64 cores.
    #[arg(long, allow_negative_numbers = true)]
    storage_node_cores: Option<i64>,
    /// Simulated time of each candidate's run; the last quarter is judged [default: long
    /// enough that it holds 10 stalls of a node and 10 000 completions, at least 2s, at
    /// most 60s: 2s on the paper-scale model, 10-20s on a VM's profile].
    #[arg(long, allow_hyphen_values = true)]
    duration: Option<String>,
    /// Seed of every run; the same seed gives the same plan.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Worker threads (0: one per CPU); the plan does not depend on it.
    #[arg(long, default_value_t = 0)]
    threads: usize,
}

/// A count flag as a `u32`, or the range error naming the flag.
fn count(name: &str, value: i64, range: &'static str) -> Result<u32, ExperimentError> {
    u32::try_from(value).map_err(|_| ExperimentError::OutOfRange {
        name: name.into(),
        range,
        value: value.to_string(),
    })
}

/// Quotes a flag value for a POSIX shell.
fn quoted(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

/// `ferry plan`.
pub fn run(args: PlanArgs) -> CmdResult {
    let workload = parse_workload(&args.workload).map_err(|source| ExperimentError::Spec {
        flag: "--workload".into(),
        source,
    })?;
    workload.validate()?;
    let slo = duration("--slo-p99", &args.slo_p99)?;
    let demand_ops = parse_rate(&args.demand).map_err(|source| ExperimentError::Spec {
        flag: "--demand".into(),
        source,
    })?;
    let profile = load_profile(args.profile.as_deref())?;
    let mut machine = ClusterModel::default();
    if let Some(p) = &profile {
        p.apply(&mut machine);
    }
    let run_length = match &args.duration {
        Some(d) => parse_duration(d).map_err(|source| ExperimentError::Spec {
            flag: "--duration".into(),
            source,
        })?,
        None => plan::duration_for(&machine, demand_ops),
    };
    let cfg = PlanConfig {
        machine,
        workload,
        slo: Slo::p99(slo),
        demand_ops,
        max_cores: count("--max-cores", args.max_cores, "[2, 4096]")?,
        app_node_cores: args
            .app_node_cores
            .map(|c| count("--app-node-cores", c, "[1, 256]"))
            .transpose()?,
        storage_node_cores: args
            .storage_node_cores
            .map(|c| count("--storage-node-cores", c, "[1, 256]"))
            .transpose()?,
        policy: ferry_spec::default_policy(),
        duration: run_length,
        seed: args.seed,
        threads: if args.threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            args.threads
        },
    };
    cfg.validate()?;
    println!(
        "plan: {} at p99 <= {} for {:.0} requests/s on {}, up to {} cores",
        args.workload,
        slo,
        demand_ops,
        args.profile
            .as_ref()
            .map_or("the paper-scale model".to_string(), |p| format!(
                "the machine of {}",
                p.display()
            )),
        cfg.max_cores
    );
    let plan = plan::plan(&cfg)?;
    let t = &plan.chosen;
    let s = t.shape;
    println!(
        "searched by cost: {} simulated ({} each, the last quarter judged), {} ruled out by capacity",
        candidates(plan.simulated),
        run_length,
        candidates(plan.ruled_out)
    );
    println!("cheapest: {} = {} cores", s.describe(), s.cores());
    println!(
        "  predicted: {:.0} ops/s at p99 {} (X {:.2}); utilisation app {:.2}, storage {:.2}",
        t.throughput_ops,
        t.p99_us.map_or("-".into(), |p| format!("{p:.1}us")),
        t.rpc_fraction,
        t.utilization.0,
        t.utilization.1
    );
    let slack = t.p99_us.map_or(0.0, |p| 1.0 - p / slo.as_us_f64());
    println!(
        "  headroom: meets up to {:.0} requests/s ({:.2}x the demand); p99 {:.0} % under the SLO",
        plan.headroom_ops,
        plan.headroom_ops / demand_ops,
        slack * 100.0
    );
    println!("reproduce: {}", sim_command(&args, s, demand_ops, run_length));
    // A plan for this machine at its own scale can be checked on it.
    if profile.is_some() && s.cores() == 2 && s.app_nodes == 1 && s.storage_nodes == 1 {
        println!(
            "check on real processes (1 + 1): ferry bench --workload {} --slo-p99 {} --duration 10s \
             (meets it if the steady goodput is at least {:.0} ops/s within the SLO)",
            quoted(&args.workload),
            args.slo_p99,
            demand_ops
        );
    }
    Ok(())
}

/// `n candidates`, singular for one.
fn candidates(n: usize) -> String {
    format!("{n} candidate{}", if n == 1 { "" } else { "s" })
}

/// The `ferry sim` command that runs the chosen cluster at the demand.
fn sim_command(args: &PlanArgs, s: Shape, demand_ops: f64, run_length: Nanos) -> String {
    let mut cmd = String::from("ferry sim");
    if s.app_nodes != 1 || s.storage_nodes != 1 {
        cmd.push_str(&format!(
            " --app-nodes {} --storage-nodes {}",
            s.app_nodes, s.storage_nodes
        ));
    }
    cmd.push_str(&format!(
        " --app-cores {} --storage-cores {} --workload {} --slo-p99 {} --demand {:.0} --duration {} --seed {}",
        s.app_cores,
        s.storage_cores,
        quoted(&args.workload),
        args.slo_p99,
        demand_ops,
        run_length,
        args.seed
    ));
    if let Some(p) = &args.profile {
        cmd.push_str(&format!(" --profile {}", quoted(&p.display().to_string())));
    }
    cmd
}
