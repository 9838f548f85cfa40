//! `ferry compute`: run a compute node until SIGINT or SIGTERM.

use ferry_front::{start_compute, ComputeConfig};

use crate::front_args::{serve_until_signal, FrontArgs};
use crate::CmdResult;

/// Flags of `ferry compute`.
#[derive(clap::Args)]
pub struct ComputeArgs {
    /// Address to listen on; port 0 picks a free port (printed on the first line).
    #[arg(long, default_value = "127.0.0.1:7900")]
    listen: String,
    /// Fewest active workers (invocations run at once) when demand is low.
    #[arg(long, default_value_t = 1)]
    min_workers: u32,
    /// Most active workers; the node starts with all of them and sizes to demand.
    #[arg(long, default_value_t = 4)]
    max_workers: u32,
    #[command(flatten)]
    front: FrontArgs,
}

pub fn run(args: ComputeArgs) -> CmdResult {
    args.front.pin()?;
    let (routes, _following) = args.front.cluster_routes()?;
    let config = ComputeConfig {
        front: args.front.front_config(&args.listen)?,
        cluster: routes,
        min_workers: args.min_workers,
        max_workers: args.max_workers,
        registry: ferry_lua::registry(),
    };
    let handle = start_compute(config)?;
    let what = format!("compute node: {}–{} workers", args.min_workers, args.max_workers);
    serve_until_signal(handle, &what)
}
