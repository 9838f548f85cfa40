//! `ferry sim-suite`: a policy judged on randomly drawn scenarios against each one's
//! same-window bound (`ferry_sim::suite`).

use std::path::PathBuf;

use ferry_experiment::ExperimentError;
use ferry_sim::suite::{self, BoundCache, Space, SuiteConfig};
use ferry_spec::{parse_duration, parse_policy};

use crate::CmdResult;

/// Flags of `ferry sim-suite`.
#[derive(clap::Args, Debug)]
pub struct SimSuiteArgs {
    /// Scenarios to draw.
    #[arg(long, default_value_t = 30, allow_negative_numbers = true)]
    scenarios: i64,
    /// Seed of the draws; the same seed gives the same scenarios and byte-identical output.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The policy judged: kv | rpc | fixed:X | balance[:...] | pyxis[:...] | kayak[:...] |
    /// kayak-xr[:...] | kayak-plus[:...]
    /// (default: balance, ferry's default).
    #[arg(long, allow_hyphen_values = true)]
    policy: Option<String>,
    /// Scenario space: `default` (1–16 + 1–16 cores, RTT 2–50 us, traverse depth 1–8,
    /// compute 0–50 us, objects 64 B–4 KiB, SLO 3–20x the better side's unloaded p99),
    /// `1+1` (one core each, costs calibrated to the real loopback machine, VM stalls),
    /// `mixed` (1–4 app nodes and 1–4 storage nodes of the default space's cores, a mix of
    /// 2–16 such functions with objects up to 64 KiB, judged against the turning-point
    /// bound) or `wide` (the default space with objects of 64 B–64 KiB and SLOs of 2–20x).
    #[arg(long, default_value = "default")]
    space: String,
    /// A machine profile written by `ferry calibrate`: every drawn scenario takes its CPU
    /// costs, RTT and stalls (with `--space 1+1` in place of the built-in calibration);
    /// each scenario's printed flags spell them out, so it reproduces without the file.
    #[arg(long)]
    profile: Option<PathBuf>,
    /// Length of each policy run; the last quarter is the steady window judged (default:
    /// 2s for the default and mixed spaces, 8s for 1+1).
    #[arg(long, allow_hyphen_values = true)]
    duration: Option<String>,
    /// Worker threads (0: one per CPU); the output does not depend on it.
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Diagnostic: run each scenario with X fixed at its bound's X and the R loop setting
    /// the rate (`fixed:X*`, with the `without` of --policy), which shows the
    /// part of the gap the rate loop alone leaves.
    #[arg(long)]
    at_bound_x: bool,
    /// Read bounds measured before from this JSON file and add the new ones to it (a bound
    /// depends on the scenario, never on the policy).
    #[arg(long)]
    bound_cache: Option<PathBuf>,
    /// Write the JSON report here (`scenarios` and `summary`).
    #[arg(long)]
    json: Option<PathBuf>,
}

/// `ferry sim-suite`.
pub fn run(args: SimSuiteArgs) -> CmdResult {
    let space = Space::parse(&args.space)?;
    let policy = match &args.policy {
        Some(p) => parse_policy(p).map_err(|source| ExperimentError::Spec {
            flag: "--policy".into(),
            source,
        })?,
        None => ferry_spec::default_policy(),
    };
    let duration = match &args.duration {
        Some(d) => parse_duration(d).map_err(|source| ExperimentError::Spec {
            flag: "--duration".into(),
            source,
        })?,
        None => space.duration_default(),
    };
    if args.scenarios < 1 || args.scenarios > suite::SCENARIOS_MAX as i64 {
        return Err(ExperimentError::OutOfRange {
            name: "--scenarios".into(),
            range: "[1, 10000]",
            value: args.scenarios.to_string(),
        }
        .into());
    }
    let cfg = SuiteConfig {
        scenarios: args.scenarios as usize,
        seed: args.seed,
        space,
        policy,
        duration,
        threads: if args.threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            args.threads
        },
        at_bound_x: args.at_bound_x,
        profile: crate::scenario_args::load_profile(args.profile.as_deref())?,
    };
    cfg.validate()?;
    let mut cache = match &args.bound_cache {
        Some(path) if path.exists() => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            serde_json::from_str(&text).map_err(|e| format!("{} is not a bound cache: {e}", path.display()))?
        }
        _ => BoundCache::default(),
    };
    let report = suite::run(&cfg, &mut cache)?;
    print!("{}", report.table());
    if let Some(path) = &args.bound_cache {
        // Invariant: the cache holds only strings and numbers.
        let text = serde_json::to_string_pretty(&cache).expect("bound cache serialises");
        std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    if let Some(path) = &args.json {
        std::fs::write(path, report.to_json()).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}
