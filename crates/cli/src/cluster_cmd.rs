//! `ferry cluster up`: a whole cluster on this machine's loopback — storage nodes (each
//! with its own data dir), compute nodes and a gateway as child processes, pinned, until
//! SIGINT or SIGTERM. Watching them and restarting them is `cluster_supervise`.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use ferry_cluster::ClusterMap;
use ferry_config::ClusterConfig;
use ferry_os::ChildServer;
use ferry_server::Ack;
use ferry_wal::FsyncMode;

use crate::cluster_supervise::{supervise, Kind, NodeListeners, Supervised, MAX_RESTARTS_PER_MINUTE};
use crate::CmdResult;

/// Most processes of one kind `cluster up` starts.
const MAX_NODES: usize = 64;

/// Flags of `ferry cluster`.
#[derive(clap::Args)]
pub struct ClusterArgs {
    #[command(subcommand)]
    command: ClusterCommand,
}

#[derive(clap::Subcommand)]
enum ClusterCommand {
    /// Start a config group, storage nodes, compute nodes and a gateway on loopback; prints
    /// their addresses and runs until SIGINT or SIGTERM. Loads nothing. Each storage node
    /// keeps its log in DIR/node-<id>, each config member its Raft log in DIR/config-<id>.
    /// Any process that exits is restarted on the same addresses (and data dir), at most 5
    /// times a minute; a failed start is tried again after 1 s. A storage node whose data
    /// dir is gone is started on an empty one and rejoins as a replica of its shard's
    /// primary; one that cannot be restarted (its restarts spent, a config member's data
    /// dir gone) is reported down in the output and the JSON, and the rest goes on. Only
    /// SIGINT or SIGTERM stops the cluster.
    Up(Box<UpArgs>),
    /// Show the configuration the config group holds (epoch, shards, slots), each member's
    /// view of the group (leader, term), and each storage node as the leader last heard it
    /// (up, or down and why).
    Status(crate::cluster_admin_cmd::StatusArgs),
    /// Add a storage node to the configuration: as a replica of a primary's shard
    /// (--replica-of), or as the primary of a new shard with no slots. Done at once if it
    /// is there already; start the node (`ferry server --config-group ... --node-id ID`)
    /// after.
    AddNode(crate::cluster_admin_cmd::AddNodeArgs),
    /// Give a slot range to a shard (by its primary's id). Only routing changes: keys in
    /// those slots stay where they are (invisible until the slots come back), so this is
    /// for ranges without keys. The old owner refuses the slots once it has seen the new
    /// epoch (a watch round trip; until then both may serve them).
    AssignSlots(crate::cluster_admin_cmd::AssignArgs),
    /// Move a slot range and its keys to another shard, online: the destination copies
    /// the range from the source (a consistent scan, then the source's log), the source
    /// stops writes to the range for the hand-over (clients get TRYAGAIN for that long),
    /// and the next epoch routes it to the destination (-MOVED from the source). Waits
    /// until the move is done or given up; one move at a time.
    Reshard(crate::cluster_admin_cmd::ReshardArgs),
    /// Restart the storage nodes one at a time, with no acknowledged write lost (a rolling
    /// restart, or an upgrade once the new binary is in place): each replica is asked to
    /// stop, and whoever runs it (`cluster up`, Kubernetes, systemd) starts it again; the
    /// command waits until it is back and ready. Then each primary hands its shard over to
    /// its most caught-up ready replica (writes are refused until the replica is promoted)
    /// and restarts as a replica. A shard without a replica is unavailable while its node
    /// restarts.
    Restart(crate::cluster_restart_cmd::RestartArgs),
    /// Hand a primary's shard over to its most caught-up ready replica and wait until the
    /// replica is promoted (writes are refused meanwhile; nothing acknowledged is lost);
    /// nothing to do for a replica. The old primary, demoted, stops, and copies the new one
    /// when started again. What a storage pod runs before it stops (its preStop hook).
    HandOver(crate::cluster_restart_cmd::HandOverArgs),
}

#[derive(clap::Args)]
struct UpArgs {
    /// Storage nodes, sharing the 16,384 slots evenly.
    #[arg(long, default_value_t = 2)]
    storage_nodes: usize,
    /// Members of the config group that holds the cluster's configuration (each keeps its
    /// Raft log in DIR/config-<id> and is restarted like a storage node); 0 gives every
    /// process the static map file instead.
    #[arg(long, default_value_t = 3)]
    config_members: usize,
    /// Replicas of each storage node (each copies its primary's log, and the config group
    /// promotes one when the primary misses its lease); needs the config group.
    #[arg(long, default_value_t = 0)]
    replicas: usize,
    /// When the storage nodes acknowledge a write: `primary` (once its log holds it) or
    /// `replica` (once a replica's log holds it too); with --replicas.
    #[arg(long, value_parser = crate::flag_values::choice::<Ack>(), default_value = "primary")]
    ack: Ack,
    /// Compute nodes behind the gateway.
    #[arg(long, default_value_t = 1)]
    compute_nodes: usize,
    /// The tenant every process lets in, as ID:TOKEN.
    #[arg(long, default_value = "1:ferry")]
    tenant: String,
    /// The gateway's placement policy (the specs of `ferry bench --policy`).
    #[arg(long, default_value = "balance")]
    policy: String,
    /// Worker threads of each storage node.
    #[arg(long, default_value_t = 1)]
    cores: usize,
    /// Storage nodes also serve the soak's function (`ferry check --cluster`).
    #[cfg(feature = "lab")]
    #[arg(long, hide = true)]
    chaos_functions: bool,
    /// `ID=HOST:PORT,...`: storage node ID dials the config group at these addresses (one
    /// per member, in member order) instead of the members' own; repeatable. For
    /// `ferry check --cluster`, which puts proxies there to cut a node off the group. The
    /// members' own addresses are written to DIR/config-group as soon as they are bound.
    #[arg(long, hide = true, value_name = "ID=ADDRS")]
    node_config_group: Vec<String>,
    /// `ID=HOST:PORT`: the configuration names this address as storage node ID's
    /// replication listener (where its replicas and slot moves pull its log) instead of
    /// the one `cluster up` binds; repeatable. For `ferry check --cluster`, which puts a
    /// proxy there to cut a primary off its replicas. The addresses bound are appended to
    /// DIR/replication-listeners (`ID=HOST:PORT` lines) before each node starts.
    #[arg(long, hide = true, value_name = "ID=ADDR")]
    node_replication_via: Vec<String>,
    /// Restarts allowed per process per minute before it is left down. For `ferry check
    /// --cluster`, whose nemesis fails nodes far more often than anything real does.
    #[arg(long, hide = true, default_value_t = MAX_RESTARTS_PER_MINUTE)]
    max_restarts_per_minute: usize,
    /// Most active workers of each compute node.
    #[arg(long, default_value_t = 2)]
    max_workers: u32,
    /// Write the addresses as JSON here once everything listens (`gateway`,
    /// `gateway_pid`, `gateway_metrics`, `gateway_resp`, `gateway_down` (why, if it could
    /// not be restarted), `cluster_map`, `epoch`,
    /// `config_group` (the members' addresses, comma-separated; empty without one), and
    /// `storage_nodes` / `compute_nodes` / `config_members`: arrays of `{addr, pid,
    /// metrics}`; storage nodes also `resp`, their RESP address, `data_dir`, `role`
    /// (primary or replica) and `slots` (the ranges they serve), config members `id` and
    /// `data_dir`, compute nodes `id` (their number); one that could not be restarted also
    /// `down`, why).
    /// Rewritten whole when a child is restarted (its new `pid` and `metrics`) or goes down,
    /// and when the configuration changes (a new `epoch`).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Directory for the cluster map and the storage nodes' data dirs (`node-<id>`; a
    /// later `cluster up` on the same DIR recovers their data). Default: a fresh one under
    /// the system's temp dir.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// When the storage nodes sync their log to disk (`ferry server --fsync`): always,
    /// everysec (the server's default) or no.
    #[arg(long, value_parser = crate::flag_values::choice::<FsyncMode>())]
    fsync: Option<FsyncMode>,
    /// Every process's listeners speak TLS (the certificate must name 127.0.0.1): passed
    /// on to each storage node, compute node and the gateway.
    #[command(flatten)]
    tls: crate::tls_args::ServeTlsArgs,
    /// The CAs (PEM) the gateway and the compute nodes trust when they dial the storage
    /// and compute nodes; needed with --tls-cert, which they present when asked for a
    /// client certificate.
    #[arg(long, value_name = "FILE")]
    tls_ca: Option<PathBuf>,
}

/// One started process, as the JSON names it.
#[derive(Serialize)]
struct ProcessInfo {
    addr: String,
    pid: u32,
    metrics: String,
    /// Its RESP address (storage nodes).
    #[serde(skip_serializing_if = "Option::is_none")]
    resp: Option<String>,
    /// Where it keeps its log (storage nodes, config members).
    #[serde(skip_serializing_if = "Option::is_none")]
    data_dir: Option<PathBuf>,
    /// Its id (storage nodes, config members; a compute node's number).
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    /// `primary` or `replica` (storage nodes).
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    /// The slot ranges it serves, as `N-M` (storage nodes).
    #[serde(skip_serializing_if = "Option::is_none")]
    slots: Option<Vec<String>>,
    /// Why it is down: it exited and could not be started again.
    #[serde(skip_serializing_if = "Option::is_none")]
    down: Option<String>,
}

#[derive(Serialize)]
struct ClusterInfo {
    gateway: String,
    gateway_pid: u32,
    gateway_metrics: String,
    gateway_resp: String,
    /// Why the gateway is down, if its restarts are spent.
    #[serde(skip_serializing_if = "Option::is_none")]
    gateway_down: Option<String>,
    storage_nodes: Vec<ProcessInfo>,
    compute_nodes: Vec<ProcessInfo>,
    config_members: Vec<ProcessInfo>,
    config_group: String,
    epoch: u64,
    cluster_map: PathBuf,
}

impl ClusterInfo {
    /// Fills in every child's addresses, pid and state, as `map` (or the newest
    /// configuration) routes.
    fn update(&mut self, children: &[Supervised], map: &ClusterMap, config: Option<&ClusterConfig>) {
        if let Some(gateway) = children.iter().find(|child| child.kind() == Kind::Gateway) {
            let process = info(gateway.child());
            self.gateway = process.addr;
            self.gateway_pid = process.pid;
            self.gateway_metrics = process.metrics;
            self.gateway_resp = process.resp.unwrap_or_default();
            self.gateway_down = gateway.down().map(str::to_string);
        }
        self.compute_nodes = supervised_info(children, Kind::ComputeNode, map, config);
        self.storage_nodes = supervised_info(children, Kind::StorageNode, map, config);
        self.config_members = supervised_info(children, Kind::ConfigMember, map, None);
        self.epoch = config.map_or(0, |config| config.epoch);
    }
}

fn info(child: &ChildServer) -> ProcessInfo {
    ProcessInfo {
        addr: child.addr().to_string(),
        pid: child.pid(),
        metrics: child.metrics_addr().unwrap_or_default().to_string(),
        resp: child.resp_addr().map(str::to_string),
        data_dir: None,
        id: None,
        role: None,
        slots: None,
        down: None,
    }
}

/// The JSON of the children of `kind`, as `map` (or the newest configuration) routes.
fn supervised_info(
    children: &[Supervised],
    kind: Kind,
    map: &ClusterMap,
    config: Option<&ClusterConfig>,
) -> Vec<ProcessInfo> {
    children
        .iter()
        .filter(|child| child.kind() == kind)
        .map(|child| {
            let mut process = ProcessInfo {
                data_dir: child.data_dir().map(Path::to_path_buf),
                id: Some(child.id().to_string()).filter(|id| !id.is_empty()),
                down: child.down().map(str::to_string),
                ..info(child.child())
            };
            if kind == Kind::StorageNode {
                let primary = config.is_none_or(|config| config.shard_led_by(child.id()).is_some());
                process.role = Some(if primary { "primary" } else { "replica" });
                let ranges = match config.and_then(|config| config.shard_of(child.id())) {
                    Some((_, shard)) => shard.slots.clone(),
                    None => map.node(child.id()).map(|node| node.slots.clone()).unwrap_or_default(),
                };
                process.slots = Some(ranges.iter().map(|(lo, hi)| format!("{lo}-{hi}")).collect());
            }
            process
        })
        .collect()
}

/// Most replicas per storage node `cluster up` starts.
const MAX_REPLICAS: usize = 4;

/// How long `cluster up` waits for a replica's addition to show in the configuration.
const ADD_REPLICA_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The `ID=VALUE` entries of a repeatable hidden flag, by id.
fn id_flags<'a>(entries: &'a [String], flag: &str) -> Result<std::collections::BTreeMap<&'a str, &'a str>, String> {
    entries
        .iter()
        .map(|entry| {
            entry
                .split_once('=')
                .ok_or_else(|| format!("{flag} {entry:?}: expected ID=HOST:PORT"))
        })
        .collect()
}

/// DIR/replication-listeners: the replication listeners bound for nodes whose
/// configuration names another address (`--node-replication-via`), one `ID=HOST:PORT`
/// line each, appended before the node starts.
struct ReplicationListened {
    path: PathBuf,
}

impl ReplicationListened {
    fn new(dir: &Path) -> ReplicationListened {
        ReplicationListened {
            path: dir.join("replication-listeners"),
        }
    }

    fn record(&self, id: &str, addr: &str) -> Result<(), String> {
        use std::io::Write as _;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .and_then(|mut file| writeln!(file, "{id}={addr}"))
            .map_err(|err| format!("cannot write {}: {err}", self.path.display()))
    }
}

/// Writes the JSON whole, then renames it into place: a reader never sees half a file.
fn write_json(path: &Path, cluster: &ClusterInfo) -> CmdResult {
    write_whole(path, serde_json::to_string_pretty(cluster)?.as_bytes())
}

/// Writes a file others poll for: whole, then renamed into place, so a reader that finds
/// the file never reads it half written.
fn write_whole(path: &Path, contents: &[u8]) -> CmdResult {
    let partial = path.with_extension("partial");
    std::fs::write(&partial, contents)
        .and_then(|()| std::fs::rename(&partial, path))
        .map_err(|err| format!("cannot write {}: {err}", path.display()).into())
}

/// CPUs for the storage side and for the rest: the first half of the machine's CPUs
/// serve the storage nodes, the second half compute and gateway (on two CPUs: CPU 0 and
/// CPU 1, as the benchmarks pin them); one CPU is not split.
fn cpu_halves() -> (Vec<usize>, Vec<usize>) {
    let cpus = ferry_os::online_cpus();
    if cpus < 2 {
        return (Vec::new(), Vec::new());
    }
    let storage = (0..cpus / 2).collect();
    let rest = (cpus / 2..cpus).collect();
    (storage, rest)
}

/// `--cpu-set` for the `index`-th process of a side (round robin over its CPUs).
fn cpu_flag(cpus: &[usize], index: usize) -> Vec<String> {
    match cpus.len() {
        0 => Vec::new(),
        n => vec!["--cpu-set".into(), cpus[index % n].to_string()],
    }
}

pub fn run(args: ClusterArgs) -> CmdResult {
    match args.command {
        ClusterCommand::Up(args) => up(*args),
        ClusterCommand::Status(args) => crate::cluster_admin_cmd::status(args),
        ClusterCommand::AddNode(args) => crate::cluster_admin_cmd::add_node_cmd(args),
        ClusterCommand::AssignSlots(args) => crate::cluster_admin_cmd::assign_slots(args),
        ClusterCommand::Reshard(args) => crate::cluster_admin_cmd::reshard(args),
        ClusterCommand::Restart(args) => crate::cluster_restart_cmd::restart(args),
        ClusterCommand::HandOver(args) => crate::cluster_restart_cmd::hand_over_cmd(args),
    }
}

fn up(args: UpArgs) -> CmdResult {
    if !(1..=MAX_NODES).contains(&args.storage_nodes) || args.compute_nodes > MAX_NODES {
        return Err(format!("--storage-nodes must be 1 to {MAX_NODES} and --compute-nodes at most {MAX_NODES}").into());
    }
    if args.replicas > MAX_REPLICAS {
        return Err(format!("--replicas must be at most {MAX_REPLICAS}").into());
    }
    if args.replicas > 0 && args.config_members == 0 {
        return Err("--replicas needs the config group (--config-members 1 or more): it decides failovers".into());
    }
    if args.replicas == 0 && args.ack != Ack::Primary {
        return Err("--ack replica needs --replicas 1 or more".into());
    }
    ferry_server::config::parse_tenant_flag(&args.tenant)?;
    ferry_spec::parse_policy(&args.policy).map_err(|err| format!("--policy: {err}"))?;
    args.tls.server_tls()?;
    if args.tls.tls_cert.is_some() != args.tls_ca.is_some() {
        return Err("--tls-cert and --tls-ca go together: the gateway and the compute nodes dial TLS listeners".into());
    }
    let exe = std::env::current_exe().map_err(|err| format!("cannot find the ferry executable: {err}"))?;
    let dir = match &args.dir {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir().join(format!("ferry-cluster-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir).map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
    // The map names the storage nodes' addresses before they start: bind their listeners
    // here and hand each node its own sockets (no port is chosen free and let go).
    let bind = || std::net::TcpListener::bind("127.0.0.1:0");
    // With a config group every storage node serves replication links: its replicas
    // copy over them, and so do slot moves.
    let replicated = args.config_members > 0;
    let listeners = (0..args.storage_nodes)
        .map(|_| NodeListeners::bind(replicated))
        .collect::<std::io::Result<Vec<_>>>()?;
    let addrs = listeners
        .iter()
        .map(|listeners| Ok(listeners.addrs()?.0))
        .collect::<std::io::Result<Vec<String>>>()?;
    // Every storage node speaks RESP too, and the map says where (for -MOVED and CLUSTER
    // SLOTS), and where its replicas copy from.
    let mut nodes = ClusterMap::even(&addrs)?.nodes().to_vec();
    for (node, listeners) in nodes.iter_mut().zip(&listeners) {
        let (_, resp, replication) = listeners.addrs()?;
        node.resp = Some(resp);
        node.replication = replication;
    }
    // One secret for every replication link of this cluster.
    let replication_flags: Vec<String> = match replicated {
        true => vec![
            "--replication-token".into(),
            format!("{:032x}", rand::random::<u128>()),
            "--ack".into(),
            args.ack.name().into(),
        ],
        false => Vec::new(),
    };
    let replication_via = id_flags(&args.node_replication_via, "--node-replication-via")?;
    let listened = ReplicationListened::new(&dir);
    for node in nodes.iter_mut() {
        if let (Some(bound), Some(via)) = (&node.replication, replication_via.get(node.id.as_str())) {
            listened.record(&node.id, bound)?;
            node.replication = Some(via.to_string());
        }
    }
    let map = ClusterMap::new(nodes)?;
    let map_path = dir.join("cluster.toml");
    std::fs::write(&map_path, map.to_toml()).map_err(|err| format!("cannot write {}: {err}", map_path.display()))?;
    // The config group: its members' sockets are bound here too, and each loads the map
    // file as the first configuration once the group has formed.
    let member_listeners = (0..args.config_members)
        .map(|_| bind())
        .collect::<std::io::Result<Vec<_>>>()?;
    let group = member_listeners
        .iter()
        .map(|listener| Ok(listener.local_addr()?.to_string()))
        .collect::<std::io::Result<Vec<String>>>()?;
    if !group.is_empty() {
        write_whole(&dir.join("config-group"), group.join(",").as_bytes())?;
    }
    let node_groups = id_flags(&args.node_config_group, "--node-config-group")?;
    let members_flag: Vec<String> = group
        .iter()
        .enumerate()
        .map(|(index, addr)| format!("{}={addr}", index + 1))
        .collect();
    let mut children = Vec::new();
    for (index, listener) in member_listeners.into_iter().enumerate() {
        let id = index as u64 + 1;
        let mut member_args = vec![
            "config".to_string(),
            "--members".into(),
            members_flag.join(","),
            "--cluster-map".into(),
            map_path.display().to_string(),
            "--metrics".into(),
            "127.0.0.1:0".into(),
        ];
        member_args.extend(args.tls.to_args());
        if let Some(ca) = &args.tls_ca {
            member_args.extend(["--tls-ca".to_string(), ca.display().to_string()]);
        }
        let data_dir = dir.join(format!("config-{id}"));
        children.push(Supervised::config_member(&exe, id, listener, data_dir, member_args)?);
    }
    let routing: Vec<String> = match group.is_empty() {
        true => vec!["--cluster-map".into(), map_path.display().to_string()],
        false => vec!["--config-group".into(), group.join(",")],
    };
    let mut common: Vec<String> = routing;
    common.extend([
        "--tenant".into(),
        args.tenant.clone(),
        "--metrics".into(),
        "127.0.0.1:0".into(),
    ]);
    common.extend(args.tls.to_args());
    // What the gateway, the compute nodes and the storage nodes add: they dial other nodes
    // (and the config group).
    let links: Vec<String> = match &args.tls_ca {
        Some(ca) => vec!["--tls-ca".into(), ca.display().to_string()],
        None => Vec::new(),
    };
    let (storage_cpus, other_cpus) = cpu_halves();
    // The `ferry server` flags of the `index`-th storage node (primary or replica), and
    // its data dir, created.
    let storage_node = |index: usize, id: &str| -> Result<(Vec<String>, PathBuf), String> {
        let data_dir = dir.join(format!("node-{id}"));
        std::fs::create_dir_all(&data_dir).map_err(|err| format!("cannot create {}: {err}", data_dir.display()))?;
        let mut server_args = vec!["server".to_string()];
        server_args.extend(common.iter().cloned());
        server_args.extend(["--cores".to_string(), args.cores.to_string()]);
        server_args.extend(cpu_flag(&storage_cpus, index));
        if let Some(fsync) = &args.fsync {
            server_args.extend(["--fsync".to_string(), fsync.name().to_string()]);
        }
        server_args.extend(replication_flags.iter().cloned());
        #[cfg(feature = "lab")]
        if args.chaos_functions {
            server_args.push("--chaos-functions".into());
        }
        if let Some(addrs) = node_groups.get(id) {
            if let Some(at) = server_args.iter().position(|arg| arg == "--config-group") {
                server_args[at + 1] = addrs.to_string();
            }
        }
        server_args.extend(links.iter().cloned());
        Ok((server_args, data_dir))
    };

    for (index, (node, listeners)) in map.nodes().iter().zip(listeners).enumerate() {
        let (server_args, data_dir) = storage_node(index, &node.id)?;
        children.push(Supervised::storage_node(
            &exe,
            &node.id,
            listeners,
            data_dir,
            server_args,
        )?);
    }
    // The compute nodes and the gateway hold nothing, but clients (and the gateway, for
    // a compute node) know their addresses: their sockets are bound here too, so that a
    // restart serves the same ones.
    let front_args = |subcommand: &str| {
        let mut flags = vec![subcommand.to_string()];
        flags.extend(common.iter().cloned());
        flags.extend(links.iter().cloned());
        flags
    };
    let mut compute_addrs = Vec::new();
    for index in 0..args.compute_nodes {
        let listener = bind()?;
        compute_addrs.push(listener.local_addr()?.to_string());
        let mut flags = front_args("compute");
        flags.extend(["--max-workers".to_string(), args.max_workers.to_string()]);
        flags.extend(cpu_flag(&other_cpus, index));
        children.push(Supervised::compute_node(&exe, index + 1, listener, flags)?);
    }
    let mut flags = front_args("gateway");
    flags.extend([
        "--policy".to_string(),
        args.policy.clone(),
        "--cores".into(),
        format!(
            "{},{}",
            args.storage_nodes * args.cores,
            (args.compute_nodes as u32 * args.max_workers).max(1)
        ),
    ]);
    flags.extend(cpu_flag(&other_cpus, args.compute_nodes));
    for addr in &compute_addrs {
        flags.extend(["--compute".to_string(), addr.clone()]);
    }
    children.push(Supervised::gateway(&exe, bind()?, bind()?, flags)?);
    // The configuration as it changes, for the JSON (the nodes have seen the first one).
    let following = match group.is_empty() {
        true => None,
        false => {
            let tls = args.tls_ca.as_ref().map(|ca| ferry_net::tls::ClientTls {
                ca: ca.clone(),
                identity: args.tls.identity(),
            });
            Some(crate::config_cmd::follow(&group.join(","), tls.as_ref())?)
        }
    };
    // Replicas: each is added to the configuration (as a replica of its primary's
    // shard), then started; it copies its primary before it serves.
    if let Some(following) = &following {
        let mut index = args.storage_nodes;
        for node in map.nodes() {
            for replica in 1..=args.replicas {
                let id = format!("{}r{replica}", node.id);
                let listeners = NodeListeners::bind(true)?;
                let (addr, resp, mut replication) = listeners.addrs()?;
                if let (Some(bound), Some(via)) = (&replication, replication_via.get(id.as_str())) {
                    listened.record(&id, bound)?;
                    replication = Some(via.to_string());
                }
                let entry = ferry_config::StorageNode {
                    addr,
                    resp: Some(resp),
                    replication,
                };
                crate::cluster_admin_cmd::add_node(following, &id, entry, Some(&node.id), ADD_REPLICA_WAIT)?;
                let (server_args, data_dir) = storage_node(index, &id)?;
                children.push(Supervised::storage_node(&exe, &id, listeners, data_dir, server_args)?);
                index += 1;
            }
        }
    }
    let config = following.as_ref().map(|following| following.configs().borrow().clone());

    let mut cluster = ClusterInfo {
        gateway: String::new(),
        gateway_pid: 0,
        gateway_metrics: String::new(),
        gateway_resp: String::new(),
        gateway_down: None,
        storage_nodes: Vec::new(),
        compute_nodes: Vec::new(),
        config_members: Vec::new(),
        config_group: group.join(","),
        epoch: 0,
        cluster_map: map_path.clone(),
    };
    cluster.update(&children, &map, config.as_deref());
    let mut stdout = std::io::stdout();
    writeln!(
        stdout,
        "gateway on {} (metrics {}, resp {})",
        cluster.gateway, cluster.gateway_metrics, cluster.gateway_resp
    )?;
    for process in &cluster.config_members {
        writeln!(
            stdout,
            "config member {} on {} (pid {}, metrics {}, data {})",
            process.id.as_deref().unwrap_or("-"),
            process.addr,
            process.pid,
            process.metrics,
            process
                .data_dir
                .as_ref()
                .map_or("-".into(), |dir| dir.display().to_string()),
        )?;
    }
    for process in &cluster.storage_nodes {
        writeln!(
            stdout,
            "storage node {} on {} (pid {}, metrics {}, resp {}, data {})",
            process.id.as_deref().unwrap_or("-"),
            process.addr,
            process.pid,
            process.metrics,
            process.resp.as_deref().unwrap_or("-"),
            process
                .data_dir
                .as_ref()
                .map_or("-".into(), |dir| dir.display().to_string()),
        )?;
    }
    for (index, process) in cluster.compute_nodes.iter().enumerate() {
        writeln!(
            stdout,
            "compute node {} on {} (pid {}, metrics {})",
            index + 1,
            process.addr,
            process.pid,
            process.metrics
        )?;
    }
    writeln!(stdout, "cluster map {}", map_path.display())?;
    stdout.flush()?;
    if let Some(path) = &args.json {
        write_json(path, &cluster)?;
    }
    tracing::info!(
        "try: ferry kv --server {} put t k v; a process that exits is restarted (at most \
         {MAX_RESTARTS_PER_MINUTE} times a minute, else it is reported down and the rest goes \
         on); SIGINT or SIGTERM stops the cluster",
        cluster.gateway
    );
    for child in &mut children {
        child.set_restart_budget(args.max_restarts_per_minute);
    }
    let configs = following.as_ref().map(|following| following.configs());
    let ended = supervise(&mut children, configs.clone(), |children| {
        let config = configs.as_ref().map(|configs| configs.borrow().clone());
        cluster.update(children, &map, config.as_deref());
        match &args.json {
            Some(path) => write_json(path, &cluster),
            None => Ok(()),
        }
    });
    // Dropping the children stops them, in this order: the gateway first, the storage
    // nodes and the config group last.
    children.sort_by_key(|child| match child.kind() {
        Kind::Gateway => 0,
        Kind::ComputeNode => 1,
        Kind::StorageNode => 2,
        Kind::ConfigMember => 3,
    });
    drop(children);
    ended
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_help_names_the_restart_limit() {
        let command = <ClusterArgs as clap::Args>::augment_args(clap::Command::new("cluster"));
        let up = command.find_subcommand("up").expect("cluster up");
        let about = up.get_about().map(ToString::to_string).unwrap_or_default();
        assert!(
            about.contains(&format!("at most {MAX_RESTARTS_PER_MINUTE} times a minute")),
            "{about}"
        );
    }
}
