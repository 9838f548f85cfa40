//! `ferry calibrate`: measure this machine's costs (per message, invoke, lookup, byte,
//! the round trip and the stalls) and write them as a profile for `ferry sim --profile`.

use std::path::PathBuf;
use std::time::Duration;

use ferry_bench::calibrate::{CalibrateConfig, RATE_OPS_DEFAULT};
use ferry_bench::testbed::{NodeSite, TestbedConfig};

use crate::CmdResult;

/// Flags of `ferry calibrate`.
#[derive(clap::Args)]
pub struct CalibrateArgs {
    /// Write the profile here.
    #[arg(long, default_value = "ferry-profile.json")]
    out: PathBuf,
    /// Total measuring time, shared out over the phases: ten CPU phases of 1/16 each and
    /// the stall stream of 6/16 (plus a second or two to start the node and load data).
    /// Shorter runs are noisier; at least 500ms.
    #[arg(long, default_value = "24s", value_parser = crate::flag_values::duration)]
    duration: Duration,
    /// Offered rate of each CPU phase, requests/s: moderate, so nothing queues.
    #[arg(long, default_value_t = RATE_OPS_DEFAULT, allow_negative_numbers = true)]
    rate: f64,
    /// CPUs of the storage node (a child of this process).
    #[arg(long, default_value = "0")]
    server_cpus: String,
    /// CPUs of the app side (this process).
    #[arg(long, default_value = "1")]
    client_cpus: String,
}

/// `ferry calibrate`.
pub fn run(args: CalibrateArgs) -> CmdResult {
    let config = CalibrateConfig {
        testbed: TestbedConfig {
            exe: std::env::current_exe()?,
            node: NodeSite::Child,
            tenant: ferry_proto::TenantId(1),
            token: "ferry".into(),
            server_cpus: ferry_os::parse_cpu_set(&args.server_cpus)?,
            client_cpus: ferry_os::parse_cpu_set(&args.client_cpus)?,
            // The model's 1 + 1 pair: one worker on the node, as `ferry bench` runs it.
            server_cores: 1,
            server_flags: Vec::new(),
            connections: 1,
            keep_warm: false,
        },
        duration: args.duration,
        rate_ops: args.rate,
    };
    // Fail on an unwritable --out before measuring for half a minute (appending nothing,
    // so an existing profile survives a calibration that fails).
    let existed = args.out.exists();
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.out)
        .map_err(|e| format!("cannot write {}: {e}", args.out.display()))?;
    let calibration = match ferry_bench::calibrate::run(&config, |line| eprintln!("{line}")) {
        Ok(c) => c,
        Err(e) => {
            if !existed {
                let _ = std::fs::remove_file(&args.out);
            }
            return Err(e.into());
        }
    };
    print!("{}", calibration.table());
    std::fs::write(&args.out, calibration.profile.to_json())
        .map_err(|e| format!("cannot write {}: {e}", args.out.display()))?;
    println!(
        "profile written to {}; run the simulator as this machine with `ferry sim --profile {}`",
        args.out.display(),
        args.out.display()
    );
    Ok(())
}
