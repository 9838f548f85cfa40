//! `ferry`: the one binary users run.
//!
//! Layout: `main.rs` parses the command line and maps errors to exit codes; each
//! subcommand lives in its own module (`server_cmd`, `kv_cmd`, `load_cmd`, `bench_cmd`,
//! `sim_cmd`) and is thin glue over the library crates.

use clap::{Parser, Subcommand};

mod sim_cmd;

/// What every subcommand returns: a human-readable error ends the process with exit code 1.
pub type CmdResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

#[derive(Parser)]
#[command(name = "ferry", version, about = "Ship compute to the data, or data to the compute — decided per request.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the discrete-event simulator for one policy.
    Sim(sim_cmd::SimArgs),
    /// Sweep fixed RPC fractions in the simulator: the upper bound policies are judged against.
    SimSweep(sim_cmd::SimSweepArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Sim(args) => sim_cmd::run_sim(args),
        Command::SimSweep(args) => sim_cmd::run_sweep(args),
    };
    if let Err(err) = result {
        eprintln!("error: {err}");
        std::process::exit(1);
    }
}
