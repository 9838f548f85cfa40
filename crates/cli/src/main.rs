//! `ferry`: the one binary users run.
//!
//! Layout: `main.rs` parses the command line and maps errors to exit codes; each
//! subcommand lives in its own module and is thin glue over the library crates:
//! `server_cmd` (storage node), `compute_cmd` and `gateway_cmd` (the tier in front of it,
//! sharing `front_args`), `cluster_cmd` (`cluster up`; its children watched by `cluster_supervise`;
//! `cluster status` and the configuration changes in `cluster_admin_cmd`, `cluster restart`
//! and `hand-over` in `cluster_restart_cmd`), `kv_cmd` (redis-cli-like poking), `load_cmd` (data sets),
//! `bench_kv_cmd` (raw node speed), `sim_cmd` (simulator; its scenario flags in `scenario_args`),
//! `sim_suite_cmd` (the randomized scenario suite), `plan_cmd` (the cheapest cluster for a
//! demand), `calibrate_cmd` (this machine's costs as a profile); `connect` holds the flags shared
//! by commands that talk to a node, and `tls_args` the TLS flags of those and of the
//! processes that listen; `flag_values` parses every duration and SLO flag. The production
//! commands (server, compute, gateway, cluster, config, kv, load, fn, admin) take pinning
//! and child processes from `ferry-os`, data sets from `ferry-datasets` and flag values
//! from `ferry-spec`. The measuring and testing ones (demo, bench, sweep, fairness,
//! bench-kv, calibrate, sim, sim-sweep, sim-suite, plan, check) and the soak's storage
//! function come with the `lab` feature, on by default; a production build
//! (`--no-default-features`) links none of `ferry-bench`, `ferry-chaos`,
//! `ferry-experiment` or `ferry-sim`.

use clap::{Parser, Subcommand};

mod admin_cmd;
#[cfg(feature = "lab")]
mod bench_cmd;
#[cfg(feature = "lab")]
mod bench_kv_cmd;
#[cfg(feature = "lab")]
mod calibrate_cmd;
#[cfg(feature = "lab")]
mod check_cmd;
mod cluster_admin_cmd;
mod cluster_cmd;
mod cluster_restart_cmd;
mod cluster_supervise;
mod compute_cmd;
mod config_cmd;
mod connect;
#[cfg(feature = "lab")]
mod demo_cmd;
#[cfg(feature = "lab")]
mod fairness_cmd;
mod flag_values;
mod fn_cmd;
mod front_args;
mod gateway_cmd;
mod kv_cmd;
mod limits_args;
mod load_cmd;
#[cfg(feature = "lab")]
mod plan_cmd;
#[cfg(feature = "lab")]
mod scenario_args;
mod server_cmd;
mod server_settings;
mod settings_file;
#[cfg(feature = "lab")]
mod sim_cmd;
#[cfg(feature = "lab")]
mod sim_suite_cmd;
#[cfg(feature = "lab")]
mod sweep_cmd;
mod tls_args;

/// What every subcommand returns: a human-readable error ends the process with exit code 1.
pub type CmdResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

#[derive(Parser)]
#[command(
    name = "ferry",
    version,
    about = "Ship compute to the data, or data to the compute — decided per request."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The main job: an embedded node, and kv, rpc and kayak compared on this machine.
    #[cfg(feature = "lab")]
    Demo(demo_cmd::DemoArgs),
    /// Run a storage node (prints `listening on HOST:PORT` first).
    Server(Box<server_settings::ServerSettings>),
    /// Run a compute node: invocations over the cluster's data, elastic workers.
    Compute(compute_cmd::ComputeArgs),
    /// Run the gateway: rate limiter and placement in front of a cluster.
    Gateway(gateway_cmd::GatewayArgs),
    /// A cluster: a whole one on this machine (`up`), and the configuration its config
    /// group holds (`status`, `add-node`, `assign-slots`, `reshard`).
    Cluster(cluster_cmd::ClusterArgs),
    /// Run one member of the config group: the Raft group that holds the cluster's
    /// configuration (slots, primaries, epoch). Run three with the same --members.
    Config(config_cmd::ConfigArgs),
    /// Talk to a storage node by hand: put, get, delete, multiget, invoke, stats.
    Kv(kv_cmd::KvArgs),
    /// Load a built-in function's data set into a storage node.
    Load(load_cmd::LoadArgs),
    /// Lua function libraries: load, list, delete, call (FUNCTION and FCALL).
    Fn(fn_cmd::FnArgs),
    /// Run a placement policy on real processes: node on CPU 0, app side on CPU 1.
    #[cfg(feature = "lab")]
    Bench(bench_cmd::BenchArgs),
    /// Measure the upper bound: the best goodput within the SLO for each fixed X.
    #[cfg(feature = "lab")]
    Sweep(sweep_cmd::SweepArgs),
    /// Tenants' shares of a multi-core node (Jain's index) and work conservation.
    #[cfg(feature = "lab")]
    Fairness(fairness_cmd::FairnessArgs),
    /// Benchmark raw gets and no-op invocations against a pinned storage node.
    #[cfg(feature = "lab")]
    BenchKv(bench_kv_cmd::BenchKvArgs),
    /// Measure this machine's costs and write them as a profile for `ferry sim --profile`.
    #[cfg(feature = "lab")]
    Calibrate(calibrate_cmd::CalibrateArgs),
    /// Run the discrete-event simulator for one policy.
    #[cfg(feature = "lab")]
    Sim(sim_cmd::SimArgs),
    /// Sweep fixed RPC fractions in the simulator: the upper bound policies are judged against.
    #[cfg(feature = "lab")]
    SimSweep(sim_cmd::SimSweepArgs),
    /// Judge a policy on randomly drawn simulator scenarios against each one's bound.
    #[cfg(feature = "lab")]
    SimSuite(sim_suite_cmd::SimSuiteArgs),
    /// The cheapest cluster that serves a demand within a p99 SLO with ferry's placement,
    /// searched in the (calibrated) simulator.
    #[cfg(feature = "lab")]
    Plan(plan_cmd::PlanArgs),
    /// Soak: random invocations with connections cut and workers replaced (and with
    /// --crash, the node killed with SIGKILL and restarted on its data dir), each run's
    /// history checked for strict serializability.
    #[cfg(feature = "lab")]
    Check(check_cmd::CheckArgs),
    /// Operations on a running storage node: `admin snapshot` (SAVE / BGSAVE).
    Admin(admin_cmd::AdminArgs),
    /// The node of a `check --crash` run, as a process of its own (started by it).
    #[cfg(feature = "lab")]
    #[command(hide = true)]
    CheckNode(check_cmd::CheckNodeArgs),
}

/// Logs go to stderr through `tracing`, filtered by `RUST_LOG` (e.g.
/// `RUST_LOG=ferry_server=debug`); by default warnings and errors, and the services' info
/// lines.
fn init_logs() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("warn,ferry=info,ferry_server=info,ferry_front=info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

fn main() {
    let cli = Cli::parse();
    init_logs();
    let result = match cli.command {
        #[cfg(feature = "lab")]
        Command::Demo(args) => demo_cmd::run(args),
        Command::Server(args) => server_cmd::run(*args),
        Command::Compute(args) => compute_cmd::run(args),
        Command::Gateway(args) => gateway_cmd::run(args),
        Command::Cluster(args) => cluster_cmd::run(args),
        Command::Config(args) => config_cmd::run(args),
        Command::Kv(args) => kv_cmd::run(args),
        Command::Load(args) => load_cmd::run(args),
        Command::Fn(args) => fn_cmd::run(args),
        #[cfg(feature = "lab")]
        Command::Bench(args) => bench_cmd::run(args),
        #[cfg(feature = "lab")]
        Command::Sweep(args) => sweep_cmd::run(args),
        #[cfg(feature = "lab")]
        Command::Fairness(args) => fairness_cmd::run(args),
        #[cfg(feature = "lab")]
        Command::BenchKv(args) => bench_kv_cmd::run(args),
        #[cfg(feature = "lab")]
        Command::Calibrate(args) => calibrate_cmd::run(args),
        #[cfg(feature = "lab")]
        Command::Sim(args) => sim_cmd::run_sim(args),
        #[cfg(feature = "lab")]
        Command::SimSweep(args) => sim_cmd::run_sweep(args),
        #[cfg(feature = "lab")]
        Command::SimSuite(args) => sim_suite_cmd::run(args),
        #[cfg(feature = "lab")]
        Command::Plan(args) => plan_cmd::run(args),
        #[cfg(feature = "lab")]
        Command::Check(args) => check_cmd::run(args),
        #[cfg(feature = "lab")]
        Command::CheckNode(args) => check_cmd::run_node(args),
        Command::Admin(args) => admin_cmd::run(args),
    };
    if let Err(err) = result {
        eprintln!("error: {err}");
        std::process::exit(1);
    }
}
