//! `ferry gateway`: run the scheduler tier until SIGINT or SIGTERM.

use std::time::Duration;

use std::sync::Arc;

use ferry_control::Nanos;
use ferry_front::{start_gateway, GatewayConfig};
use ferry_spec::parse_policy;

use crate::front_args::{serve_until_signal, FrontArgs};
use crate::CmdResult;

/// Flags of `ferry gateway`.
#[derive(clap::Args)]
pub struct GatewayArgs {
    /// Address to listen on; port 0 picks a free port (printed on the first line).
    #[arg(long, default_value = "127.0.0.1:7800")]
    listen: String,
    /// Compute nodes' HOST:PORT; repeatable. A host that resolves to several addresses
    /// (a headless Service) stands for a node at each, looked up again every 10 s.
    /// Without any, ship-data runs happen in the gateway itself.
    #[arg(long = "compute", value_name = "HOST:PORT")]
    compute_nodes: Vec<String>,
    /// Placement policy of every tenant: balance (default), pyxis, kayak, kv, rpc,
    /// fixed:X, asfp, ... (the specs of `ferry bench --policy`).
    #[arg(long, default_value = "balance")]
    policy: String,
    /// p99 latency objective the rate limiter keeps.
    #[arg(long, default_value = "5ms", value_parser = crate::flag_values::slo)]
    slo_p99: Duration,
    /// Storage cores and app cores the placement's load model assumes (`balance` needs
    /// them): STORAGE,APP.
    #[arg(long, value_name = "STORAGE,APP", default_value = "1,1")]
    cores: String,
    /// Seed of the policies.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Also speak RESP (Redis clients) on this address (port 0: any free one; printed as
    /// `resp on HOST:PORT` right after the `listening on` line). FCALL is placed by the
    /// policy like any invocation.
    #[arg(long, value_name = "ADDR")]
    resp: Option<String>,
    /// Serve RESP on this inherited listening socket instead of binding --resp.
    #[arg(long, value_name = "FD", conflicts_with = "resp")]
    resp_fd: Option<i32>,
    #[command(flatten)]
    front: FrontArgs,
}

/// Parses `STORAGE,APP` core counts.
fn parse_cores(text: &str) -> Result<ferry_control::placement::load_model::Capacity, String> {
    let parse = |part: Option<&str>| -> Result<f64, String> {
        let value: f64 = part
            .ok_or("--cores: expected STORAGE,APP")?
            .trim()
            .parse()
            .map_err(|_| format!("--cores {text:?}: expected numbers"))?;
        if !(value > 0.0 && value <= 4096.0) {
            return Err(format!("--cores {text:?}: each must be in (0, 4096]"));
        }
        Ok(value)
    };
    let mut parts = text.split(',');
    let storage_cores = parse(parts.next())?;
    let app_cores = parse(parts.next())?;
    if parts.next().is_some() {
        return Err("--cores: expected STORAGE,APP".into());
    }
    Ok(ferry_control::placement::load_model::Capacity {
        app_cores,
        storage_cores,
        links: None,
    })
}

pub fn run(args: GatewayArgs) -> CmdResult {
    args.front.pin()?;
    let spec = parse_policy(&args.policy).map_err(|err| format!("--policy: {err}"))?;
    let slo_p99 = args.slo_p99;
    let slo = Nanos(slo_p99.as_nanos() as u64);
    let capacity = parse_cores(&args.cores)?;
    let seed = args.seed;
    // Checked once here, so a bad combination fails at start rather than per tenant.
    spec.build(slo, 0.99, Some(capacity), seed)
        .map_err(|err| format!("--policy: {err}"))?;
    let policy_name = spec.name();
    let mut front = args.front.front_config(&args.listen)?;
    let (routes, _following) = args.front.cluster_routes()?;
    if let Some(resp) = &args.resp {
        front.resp_listen = Some(crate::server_cmd::resolve("--resp", resp)?);
    }
    if let Some(fd) = args.resp_fd {
        let listener = crate::front_args::inherited(fd, "--resp-fd")?;
        front.resp_listen = Some(listener.local_addr().map_err(|err| format!("--resp-fd {fd}: {err}"))?);
        front.adopted.resp = Some(listener);
    }
    let config = GatewayConfig {
        front,
        cluster: routes,
        compute_nodes: args.compute_nodes.clone(),
        slo_p99,
        policy: Arc::new(move || {
            spec.build(slo, 0.99, Some(capacity), seed)
                .map_err(|err| err.to_string())
        }),
        registry: ferry_lua::registry(),
    };
    let handle = start_gateway(config)?;
    let what = format!(
        "gateway: policy {policy_name}, {} compute nodes",
        args.compute_nodes.len()
    );
    serve_until_signal(handle, &what)
}
