//! `ferry check`: the soak — randomized invocations against an embedded node with
//! connections cut and workers replaced, every history checked for strict serializability.
//! One client in four sends MULTI/EXEC transactions over RESP instead (`--no-resp`: none),
//! judged in the same history.
//! With `--crash`, the node is a process of its own (`ferry check-node`, hidden) on a data
//! dir, killed with SIGKILL at random and restarted, and the history is judged across the
//! restarts.
//! With `--cluster`, it runs against `ferry cluster up` (three primaries, a replica each,
//! `--ack replica`) while a nemesis moves the hot keys' slot, fails its primary over, cuts
//! it off the config group, off its clients (both ways or one way) and off its replicas,
//! and kills storage nodes, some with their data dir deleted (`ferry_chaos::nemesis`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_chaos::crash::{CrashConfig, NodeFds};
use ferry_chaos::{ChaosConfig, ChaosReport};
use ferry_server::Ack;
use ferry_wal::FsyncMode;

use crate::CmdResult;

/// Longest single run: a fresh node per run keeps each history (and the checker's graph)
/// bounded and lets every run use its full quota of worker replacements.
const RUN_MAX: Duration = Duration::from_secs(30);

/// Flags of `ferry check`.
#[derive(clap::Args)]
pub struct CheckArgs {
    /// Total time spent invoking, split into runs of at most 30 s, each on a fresh node.
    #[arg(long, default_value = "60s", value_parser = crate::flag_values::duration)]
    duration: Duration,
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
    /// No RESP clients: every client invokes the storage function (by default one in
    /// four sends MULTI/EXEC transactions of Redis commands to the node's RESP port,
    /// judged with the invocations).
    #[arg(long)]
    no_resp: bool,
    /// Run the node as a process on a data dir, kill it with SIGKILL at random moments and
    /// restart it on its data; the history is judged across the restarts, and every
    /// acknowledged write must survive.
    #[arg(long)]
    crash: bool,
    /// With --crash: mean time between kills (exponential; at least 200ms).
    #[arg(long, default_value = "1s", requires = "crash", value_parser = crate::flag_values::duration)]
    mean_uptime: Duration,
    /// With --crash: the node's fsync mode (a kill -9 loses nothing acknowledged in any).
    #[arg(long, default_value = "everysec", value_parser = crate::flag_values::choice::<FsyncMode>(), requires = "crash")]
    fsync: FsyncMode,
    /// With --crash: the node snapshots each time its log grows this much (small, so
    /// kills land in snapshots and recoveries read them).
    #[arg(long, default_value_t = 256 * 1024, requires = "crash")]
    snapshot_log_bytes: u64,
    /// Run against a cluster of processes instead (`cluster up` with 3 primaries, two
    /// replicas each and `--ack replica`), while a nemesis moves the hot keys' slot
    /// between primaries, stops its primary until its replica takes over, cuts that
    /// primary (through proxies) off the config group, off its clients (both ways, or one
    /// way: requests arrive and answers do not, or the reverse) and off its replicas (then
    /// half the time stops it, so a replica that missed the cut's writes takes over), and
    /// kills storage nodes, some with their data dir deleted (a lost disk); the history
    /// across all of it is judged, every acknowledged write must be read at the end, and
    /// each fault's count is printed.
    #[arg(long, conflicts_with = "crash")]
    cluster: bool,
    /// With --cluster: mean time between faults (exponential; each settles first).
    #[arg(long, default_value = "3s", requires = "cluster", value_parser = crate::flag_values::duration)]
    mean_fault_interval: Duration,
    /// With --cluster: when a storage node acknowledges a write: `replica` (once a
    /// replica has logged it) or `primary`. With `primary`, a stopped or killed primary
    /// may take acknowledged writes with it, so the nemesis only moves slots and cuts
    /// primaries off the config group, and the primaries' leases alone must keep every
    /// acknowledged write and every read fresh.
    #[arg(long, default_value = "replica", value_parser = crate::flag_values::choice::<Ack>(), requires = "cluster")]
    ack: Ack,
    /// With --cluster: draw only these faults, separated by commas: move, stop, group
    /// (cut off the config group), clients (cut off its clients), one-way (its clients'
    /// link one way only), replicas (cut off its replicas), kill, lose-disk. Default:
    /// every one the --ack mode allows (stop, kill and lose-disk need --ack replica).
    #[arg(long, value_name = "LIST", requires = "cluster")]
    faults: Option<String>,
}

/// Flags of the hidden `ferry check-node`.
#[derive(clap::Args)]
pub struct CheckNodeArgs {
    /// The inherited listening socket.
    #[arg(long)]
    listen_fd: i32,
    /// The inherited RESP listening socket.
    #[arg(long)]
    resp_fd: i32,
    /// The data dir.
    #[arg(long)]
    data_dir: PathBuf,
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// fsync mode.
    #[arg(long, default_value = "everysec", value_parser = crate::flag_values::choice::<FsyncMode>())]
    fsync: FsyncMode,
    /// Snapshot every this many bytes of log.
    #[arg(long)]
    snapshot_log_bytes: u64,
}

/// Runs a chaos node until killed.
pub fn run_node(args: CheckNodeArgs) -> CmdResult {
    let mut config = ferry_chaos::node_config(args.workers);
    let mut durability = ferry_server::Durability::new(args.data_dir);
    durability.wal.fsync = args.fsync;
    durability.snapshot_log_bytes = args.snapshot_log_bytes.max(1);
    config.durability = Some(durability);
    let inherited =
        |fd: i32, flag: &str| ferry_os::inherit::inherited_listener(fd).map_err(|err| format!("{flag} {fd}: {err}"));
    let listener = inherited(args.listen_fd, "--listen-fd")?;
    let resp = inherited(args.resp_fd, "--resp-fd")?;
    config.listen = listener.local_addr()?;
    config.resp_listen = Some(resp.local_addr()?);
    let listeners = ferry_server::Listeners::adopt(&config, listener, Some(resp))?;
    let handle = ferry_server::start_on(config, ferry_chaos::registry()?, listeners)?;
    handle.wait_for_signal()?;
    handle.shutdown();
    Ok(())
}

/// How `--crash` starts a node: this executable's `check-node`.
fn crash_config(args: &CheckArgs, data_dir: PathBuf) -> Result<CrashConfig, String> {
    let exe = std::env::current_exe().map_err(|err| format!("cannot find the ferry executable: {err}"))?;
    let (workers, fsync, snapshot_log_bytes) = (args.workers, args.fsync, args.snapshot_log_bytes);
    let mean_uptime = args.mean_uptime;
    Ok(CrashConfig {
        launcher: Arc::new(move |fds: NodeFds, dir: &Path| {
            let mut command = std::process::Command::new(&exe);
            command
                .arg("check-node")
                .args(["--listen-fd", &fds.listen.to_string()])
                .args(["--resp-fd", &fds.resp.to_string()])
                .arg("--data-dir")
                .arg(dir)
                .args(["--workers", &workers.to_string()])
                .args(["--fsync", fsync.name()])
                .args(["--snapshot-log-bytes", &snapshot_log_bytes.to_string()]);
            command
        }),
        data_dir,
        mean_uptime,
    })
}

/// How `--cluster` starts its cluster: this executable's `cluster up`.
fn cluster_chaos(args: &CheckArgs, dir: PathBuf) -> Result<ferry_chaos::cluster::ClusterChaos, String> {
    let exe = std::env::current_exe().map_err(|err| format!("cannot find the ferry executable: {err}"))?;
    let mean_fault_interval = args.mean_fault_interval;
    let ack = args.ack;
    let faults = match &args.faults {
        None => Vec::new(),
        Some(list) => list
            .split(',')
            .map(|name| {
                ferry_chaos::nemesis::Fault::parse(name.trim()).ok_or_else(|| {
                    let known: Vec<&str> = ferry_chaos::nemesis::ALL.iter().map(|fault| fault.name()).collect();
                    format!("--faults: unknown fault {name:?} (known: {})", known.join(", "))
                })
            })
            .collect::<Result<_, _>>()?,
    };
    if let Some(fault) = faults
        .iter()
        .find(|fault| args.ack == Ack::Primary && fault.needs_ack_replica())
    {
        return Err(format!(
            "--faults {}: it may lose writes --ack primary acknowledged, as that mode allows; it needs --ack replica",
            fault.name()
        ));
    }
    Ok(ferry_chaos::cluster::ClusterChaos {
        launcher: Arc::new(move |dir: &Path, json: &Path| {
            let mut command = std::process::Command::new(&exe);
            command
                .args([
                    "cluster",
                    "up",
                    "--storage-nodes",
                    "3",
                    "--replicas",
                    "2",
                    "--ack",
                    ack.name(),
                ])
                .args(["--compute-nodes", "0", "--tenant", "1:chaos", "--chaos-functions"])
                // The nemesis restarts the hot shard's nodes far more often than five a
                // minute (every failover restarts the old primary and the other replicas).
                .args(["--max-restarts-per-minute", "1000"])
                .arg("--dir")
                .arg(dir)
                .arg("--json")
                .arg(json);
            command
        }),
        dir,
        mean_fault_interval,
        ack_replica: args.ack == Ack::Replica,
        faults,
    })
}

/// A fresh dir for one crash or cluster run (removed once its history passed).
fn crash_dir(seed: u64) -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("ferry-check-crash-{}-{seed}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
    Ok(dir)
}

/// The RESP part of a count of judged invocations (nothing if the run had no RESP
/// clients): of the RESP transactions sent, how many were judged, and how many of their
/// reads and writes had no version to be judged at.
fn resp_judged(resp: bool, report: &ChaosReport) -> String {
    if !resp {
        return String::new();
    }
    let unplaced = match report.resp_unplaced {
        0 => String::new(),
        n => format!(" ({n} of their reads and writes unplaced)"),
    };
    format!(
        ", {} of {} RESP transactions{unplaced}",
        report.resp_judged, report.resp
    )
}

pub fn run(args: CheckArgs) -> CmdResult {
    let total = args.duration;
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
        if args.no_resp || args.cluster {
            config.resp = false;
        }
        if args.cluster {
            config.cut_mean_bytes = None;
            config.stall_probability = 0.0;
        }
        let (report, dir) = if args.crash {
            let dir = crash_dir(config.seed)?;
            let crash = crash_config(&args, dir.clone())?;
            (ferry_chaos::run_with_crashes(&config, &crash)?, Some(dir))
        } else if args.cluster {
            let dir = crash_dir(config.seed)?;
            let cluster = cluster_chaos(&args, dir.clone())?;
            (ferry_chaos::cluster::run_cluster(&config, &cluster)?, Some(dir))
        } else {
            (ferry_chaos::run(&config)?, None)
        };
        let crashed = match (args.crash, args.cluster) {
            (true, _) => format!(
                "{} crashes survived, {} acknowledged writes lost; ",
                report.crashes, report.lost_writes
            ),
            (_, true) => format!(
                "{}, {} acknowledged writes lost; ",
                report.cluster_faults(),
                report.lost_writes
            ),
            _ => String::new(),
        };
        println!(
            "run {}/{runs} (seed {}): {} invocations: {} committed ({} remote, {} local, {} pushed back{}), \
             {} failed, {} unknown; {} retries, {} cuts, {} workers replaced; {crashed}{} judged{}: {}",
            i + 1,
            config.seed,
            report.invocations,
            report.committed,
            report.remote,
            report.local,
            report.pushed_back,
            if config.resp {
                format!(", {} over RESP", report.resp_committed)
            } else {
                String::new()
            },
            report.failed,
            report.unknown,
            report.retries,
            report.cuts,
            report.worker_replacements,
            report.judged,
            resp_judged(config.resp, &report),
            report.violation.as_deref().unwrap_or("strictly serializable"),
        );
        if let Some(violation) = &report.violation {
            return Err(format!("seed {}: NOT strictly serializable: {violation}", config.seed).into());
        }
        if report.lost_writes > 0 {
            return Err(format!("seed {}: {} acknowledged writes lost", config.seed, report.lost_writes).into());
        }
        if let Some(dir) = dir {
            let _ = std::fs::remove_dir_all(dir);
        }
        totals.add(&report);
    }
    let crashed = match (args.crash, args.cluster) {
        (true, _) => format!(
            ", {} crashes survived, {} acknowledged writes lost",
            totals.crashes, totals.lost_writes
        ),
        (_, true) => format!(
            ", {}, {} acknowledged writes lost",
            totals.cluster_faults(),
            totals.lost_writes
        ),
        _ => String::new(),
    };
    println!(
        "checked {} invocations ({} judged{}, {} of unknown outcome) in {runs} runs, {:.0} s{crashed}: strictly serializable",
        totals.invocations,
        totals.judged,
        resp_judged(!args.no_resp && !args.cluster, &totals),
        totals.unknown,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
