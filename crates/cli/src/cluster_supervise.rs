//! Watching the children of `ferry cluster up`: a child that exits is started again on the
//! same listening sockets (the configuration, the clients and the gateway know their
//! addresses, so they must come back on them), a storage node or config member on its data
//! dir. A storage node whose data dir
//! is gone is started on an empty one, as on a replaced disk: the config group does not let
//! it serve a shard its replica holds more of, and it comes back as a replica that copies
//! the shard's primary. A child that fails to start is tried again every
//! [`RESTART_RETRY`]; one whose restarts are spent (it crashes on every start, its data dir
//! is unusable) is reported down, and the watch goes on: the rest of the cluster (the dead
//! primary's replica, the other shards, the config group) is still serving, and stopping it
//! would throw that away. A config member's data dir is never made up: its Raft log holds
//! its votes, and starting it empty could elect two leaders in one term. The gateway and
//! the compute nodes hold nothing, and are restarted the same way. Only SIGINT/SIGTERM
//! ends the watch. When the configuration changes (a new epoch), the watch reports it too.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::Write;
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_config::ClusterConfig;
use ferry_os::{ChildError, ChildServer};
use tokio::sync::watch;

use crate::CmdResult;

/// Most restarts of one child within [`RESTART_WINDOW`]; it exiting once more leaves
/// it down, so a node that crashes on every start does not spin.
pub const MAX_RESTARTS_PER_MINUTE: usize = 5;

/// The window [`MAX_RESTARTS_PER_MINUTE`] counts restarts in.
const RESTART_WINDOW: Duration = Duration::from_secs(60);

/// How long after a failed start a child is tried again (each try counts against
/// [`MAX_RESTARTS_PER_MINUTE`]).
pub const RESTART_RETRY: Duration = Duration::from_secs(1);

/// How often the children are checked for having exited.
const CHILD_POLL: Duration = Duration::from_millis(200);

/// The restarts of one node within the last [`RESTART_WINDOW`], and how many are allowed.
struct RestartBudget {
    times: VecDeque<Instant>,
    max: usize,
}

impl Default for RestartBudget {
    fn default() -> RestartBudget {
        RestartBudget {
            times: VecDeque::new(),
            max: MAX_RESTARTS_PER_MINUTE,
        }
    }
}

impl RestartBudget {
    /// Whether a restart at `now` is within the budget (and if so, counts it).
    fn take(&mut self, now: Instant) -> bool {
        while self
            .times
            .front()
            .is_some_and(|&at| now.saturating_duration_since(at) >= RESTART_WINDOW)
        {
            self.times.pop_front();
        }
        if self.times.len() >= self.max {
            return false;
        }
        self.times.push_back(now);
        true
    }
}

/// A storage node's listening sockets, bound by `cluster up` so the configuration can name
/// them before the node starts and a restart serves the same ones.
pub struct NodeListeners {
    /// The ferry protocol's.
    pub ferry: TcpListener,
    /// RESP's.
    pub resp: TcpListener,
    /// Replication's (nodes of a cluster with replicas).
    pub replication: Option<TcpListener>,
}

impl NodeListeners {
    /// Three (or two, without replication) on loopback ports the OS picks.
    pub fn bind(replication: bool) -> std::io::Result<NodeListeners> {
        let bind = || TcpListener::bind("127.0.0.1:0");
        Ok(NodeListeners {
            ferry: bind()?,
            resp: bind()?,
            replication: if replication { Some(bind()?) } else { None },
        })
    }

    /// `HOST:PORT` of the ferry protocol's, RESP's and replication's.
    pub fn addrs(&self) -> std::io::Result<(String, String, Option<String>)> {
        Ok((
            self.ferry.local_addr()?.to_string(),
            self.resp.local_addr()?.to_string(),
            match &self.replication {
                Some(listener) => Some(listener.local_addr()?.to_string()),
                None => None,
            },
        ))
    }
}

/// What a supervised child is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `ferry server`: prints its RESP and metrics addresses, recovers before its first line.
    StorageNode,
    /// `ferry config`: prints its address only.
    ConfigMember,
    /// `ferry gateway`: prints its RESP and metrics addresses; holds no data.
    Gateway,
    /// `ferry compute`: prints its metrics address; holds no data.
    ComputeNode,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::StorageNode => "storage node",
            Kind::ConfigMember => "config member",
            Kind::Gateway => "gateway",
            Kind::ComputeNode => "compute node",
        }
    }
}

/// A child of `cluster up`, with what it takes to start it again.
pub struct Supervised {
    kind: Kind,
    id: String,
    /// Where a storage node or config member keeps its log (the gateway and the compute
    /// nodes have none).
    data_dir: Option<PathBuf>,
    exe: PathBuf,
    /// Its whole command line (the descriptors of `listeners` included: they keep their
    /// numbers, so a restart runs the very same command).
    args: Vec<OsString>,
    /// Its listeners (a storage node's ferry-protocol, RESP and replication ones, a
    /// member's one, ...), held here as well as by the child: while it is down its ports
    /// stay bound (a client's connection waits in the backlog instead of being refused,
    /// and no other process can take the port), and its restart serves the same sockets.
    listeners: Vec<TcpListener>,
    child: ChildServer,
    restarts: RestartBudget,
    /// A start that failed: when to try again, and why it is not running.
    retry: Option<(Instant, String)>,
    /// Why it is down, once its restarts are spent (it is not tried again).
    down: Option<String>,
}

/// Why a restart did not leave the child running.
enum NotRestarted {
    /// The start failed; it is tried again after [`RESTART_RETRY`] while the budget lasts.
    Failed(String),
    /// The budget is spent: it stays down.
    Down(String),
}

impl Supervised {
    /// Starts storage node `id` serving `listeners` (ferry protocol, RESP, and
    /// replication if given) with its log in `data_dir`; `args` are its other `ferry
    /// server` flags.
    pub fn storage_node(
        exe: &Path,
        id: &str,
        listeners: NodeListeners,
        data_dir: PathBuf,
        args: Vec<String>,
    ) -> Result<Supervised, ChildError> {
        let mut flags = vec![
            ("--node-id", OsString::from(id)),
            ("--listen-fd", listeners.ferry.as_raw_fd().to_string().into()),
            ("--resp-fd", listeners.resp.as_raw_fd().to_string().into()),
            ("--data-dir", data_dir.clone().into()),
        ];
        let mut held = vec![listeners.ferry, listeners.resp];
        if let Some(replication) = listeners.replication {
            flags.push(("--replication-fd", replication.as_raw_fd().to_string().into()));
            held.push(replication);
        }
        Self::start(Kind::StorageNode, exe, id, held, Some(data_dir), args, flags)
    }

    /// Starts config member `id` serving `listener` with its Raft log in `data_dir`;
    /// `args` are its other `ferry config` flags.
    pub fn config_member(
        exe: &Path,
        id: u64,
        listener: TcpListener,
        data_dir: PathBuf,
        args: Vec<String>,
    ) -> Result<Supervised, ChildError> {
        let flags = vec![
            ("--id", OsString::from(id.to_string())),
            ("--listen-fd", listener.as_raw_fd().to_string().into()),
            ("--data-dir", data_dir.clone().into()),
        ];
        Self::start(
            Kind::ConfigMember,
            exe,
            &id.to_string(),
            vec![listener],
            Some(data_dir),
            args,
            flags,
        )
    }

    /// Starts the gateway serving `ferry` (the ferry protocol) and `resp`; `args` are its
    /// other `ferry gateway` flags.
    pub fn gateway(
        exe: &Path,
        ferry: TcpListener,
        resp: TcpListener,
        args: Vec<String>,
    ) -> Result<Supervised, ChildError> {
        let flags = vec![
            ("--listen-fd", OsString::from(ferry.as_raw_fd().to_string())),
            ("--resp-fd", resp.as_raw_fd().to_string().into()),
        ];
        Self::start(Kind::Gateway, exe, "", vec![ferry, resp], None, args, flags)
    }

    /// Starts compute node `id` serving `listener`; `args` are its other `ferry compute`
    /// flags.
    pub fn compute_node(
        exe: &Path,
        id: usize,
        listener: TcpListener,
        args: Vec<String>,
    ) -> Result<Supervised, ChildError> {
        let flags = vec![("--listen-fd", OsString::from(listener.as_raw_fd().to_string()))];
        Self::start(
            Kind::ComputeNode,
            exe,
            &id.to_string(),
            vec![listener],
            None,
            args,
            flags,
        )
    }

    fn start(
        kind: Kind,
        exe: &Path,
        id: &str,
        listeners: Vec<TcpListener>,
        data_dir: Option<PathBuf>,
        args: Vec<String>,
        flags: Vec<(&str, OsString)>,
    ) -> Result<Supervised, ChildError> {
        let mut args: Vec<OsString> = args.into_iter().map(OsString::from).collect();
        for (flag, value) in flags {
            args.extend([flag.into(), value]);
        }
        let child = spawn(kind, exe, &args, &listeners, id)?;
        Ok(Supervised {
            kind,
            id: id.to_string(),
            data_dir,
            exe: exe.to_path_buf(),
            args,
            listeners,
            child,
            restarts: RestartBudget::default(),
            retry: None,
            down: None,
        })
    }

    /// What it is.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Its id (in the cluster map, in the config group, or a compute node's number; the
    /// gateway's is empty).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// What it is called in the output: its kind and id.
    fn label(&self) -> String {
        match self.id.is_empty() {
            true => self.kind.name().to_string(),
            false => format!("{} {}", self.kind.name(), self.id),
        }
    }

    /// Where it keeps its log (a storage node or config member).
    pub fn data_dir(&self) -> Option<&Path> {
        self.data_dir.as_deref()
    }

    /// The running process (the last one, if it is down).
    pub fn child(&self) -> &ChildServer {
        &self.child
    }

    /// Allows `per_minute` restarts a minute instead of [`MAX_RESTARTS_PER_MINUTE`].
    pub fn set_restart_budget(&mut self, per_minute: usize) {
        self.restarts.max = per_minute;
    }

    /// Why it is down, if it could not be started again.
    pub fn down(&self) -> Option<&str> {
        self.down.as_deref()
    }

    /// Starts it again, for `reason` (it exited, or its last start failed): a note on how
    /// (a storage node on an empty data dir), or why not.
    fn restart(&mut self, now: Instant, reason: &str) -> Result<Option<String>, NotRestarted> {
        if !self.restarts.take(now) {
            return Err(NotRestarted::Down(format!(
                "{} {reason} after {} restarts within {}s; not restarted again",
                self.label(),
                self.restarts.max,
                RESTART_WINDOW.as_secs()
            )));
        }
        let missing = self.data_dir.as_ref().filter(|dir| !dir.exists());
        if let (Kind::ConfigMember, Some(dir)) = (self.kind, missing) {
            return Err(NotRestarted::Down(format!(
                "config member {} {reason} and its data dir {} is gone: started empty it could vote twice in \
                 one term; not restarted",
                self.id,
                dir.display()
            )));
        }
        let label = self.label();
        let failed = |why: String| NotRestarted::Failed(format!("{label} {reason}; it could not be restarted: {why}"));
        // A storage node's lost disk is replaced by an empty one (a config member's is not:
        // it returned above).
        let note = match missing {
            Some(dir) => {
                std::fs::create_dir_all(dir)
                    .map_err(|err| failed(format!("cannot create {}: {err}", dir.display())))?;
                Some(format!(
                    "its data dir was gone: started on an empty {} (a node behind its shard's replica copies \
                     the shard's primary)",
                    dir.display()
                ))
            }
            None => None,
        };
        // The old process is reaped: replacing (dropping) it signals nothing.
        self.child = spawn(self.kind, &self.exe, &self.args, &self.listeners, &self.id)
            .map_err(|err| failed(err.to_string()))?;
        Ok(note)
    }
}

fn spawn(
    kind: Kind,
    exe: &Path,
    args: &[OsString],
    listeners: &[TcpListener],
    id: &str,
) -> Result<ChildServer, ChildError> {
    let mut command = Command::new(exe);
    command.args(args);
    let passed: Vec<&TcpListener> = listeners.iter().collect();
    ferry_os::inherit::pass_listeners(&mut command, &passed);
    let what = match id.is_empty() {
        true => kind.name().to_string(),
        false => format!("{} {id}", kind.name()),
    };
    match kind {
        Kind::StorageNode => ChildServer::start_resp_recovering(command, &what),
        Kind::Gateway => ChildServer::start_resp(command, &what),
        Kind::ConfigMember | Kind::ComputeNode => ChildServer::start(command, &what, true),
    }
}

/// Watches the children until SIGINT or SIGTERM. A child that exits is restarted, a line
/// printed, and `changed` called with every child (to rewrite the JSON), as it is when
/// `configs` reaches a new epoch; one that fails to start is tried again after
/// [`RESTART_RETRY`] (a line each time), and one whose restarts are spent is left down,
/// with a line and a call of `changed` as well, and the watch goes on. A restart blocks
/// the watch while the child starts (a storage node's first line within
/// [`ferry_os::child::RECOVERY_START_TIMEOUT`], as it recovers first); a signal meanwhile
/// is handled after it.
pub fn supervise(
    children: &mut [Supervised],
    mut configs: Option<watch::Receiver<Arc<ClusterConfig>>>,
    mut changed: impl FnMut(&[Supervised]) -> CmdResult,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let terminated = ferry_net::signal::terminated();
        tokio::pin!(terminated);
        loop {
            tokio::select! {
                result = &mut terminated => return result.map_err(Into::into),
                _ = tokio::time::sleep(CHILD_POLL) => {}
            }
            for index in 0..children.len() {
                let node = &mut children[index];
                if node.down.is_some() {
                    continue;
                }
                let now = Instant::now();
                let reason = match (&node.retry, node.child.exited()) {
                    (Some((at, _)), _) if now < *at => continue,
                    (Some((_, why)), _) => why.clone(),
                    (None, Some(status)) => format!("exited ({status})"),
                    (None, None) => continue,
                };
                let mut stdout = std::io::stdout();
                let note = match node.restart(now, &reason) {
                    Ok(note) => note,
                    Err(NotRestarted::Failed(why)) => {
                        writeln!(stdout, "{why}; trying again in {}s", RESTART_RETRY.as_secs())?;
                        stdout.flush()?;
                        node.retry = Some((now + RESTART_RETRY, "did not start".to_string()));
                        continue;
                    }
                    Err(NotRestarted::Down(why)) => {
                        writeln!(stdout, "{why}; it stays down, the rest of the cluster goes on")?;
                        stdout.flush()?;
                        node.down = Some(why);
                        changed(children)?;
                        continue;
                    }
                };
                node.retry = None;
                let detail = match node.kind {
                    Kind::StorageNode => format!(
                        ", metrics {}, {}",
                        node.child.metrics_addr().unwrap_or("-"),
                        node.child.recovered().unwrap_or("recovered nothing")
                    ),
                    Kind::Gateway | Kind::ComputeNode => {
                        format!(", metrics {}", node.child.metrics_addr().unwrap_or("-"))
                    }
                    Kind::ConfigMember => String::new(),
                };
                let data = match &node.data_dir {
                    Some(dir) => format!(" on {}", dir.display()),
                    None => String::new(),
                };
                writeln!(
                    stdout,
                    "{} {reason}; restarted{data} (pid {}{detail}){}",
                    node.label(),
                    node.child.pid(),
                    note.map_or(String::new(), |note| format!("; {note}")),
                )?;
                stdout.flush()?;
                changed(children)?;
            }
            if configs
                .as_mut()
                .is_some_and(|configs| configs.has_changed().unwrap_or(false))
            {
                if let Some(configs) = configs.as_mut() {
                    configs.borrow_and_update();
                }
                changed(children)?;
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restarts_are_limited_per_window_and_allowed_again_after_it() {
        let mut budget = RestartBudget::default();
        let start = Instant::now();
        for i in 0..MAX_RESTARTS_PER_MINUTE {
            assert!(budget.take(start + Duration::from_secs(i as u64)), "restart {i}");
        }
        assert!(!budget.take(start + Duration::from_secs(30)));
        // The first restart leaves the window: one more is allowed, then none again.
        assert!(budget.take(start + RESTART_WINDOW));
        assert!(!budget.take(start + RESTART_WINDOW));
    }
}
