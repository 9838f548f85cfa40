//! Watching the children of `ferry cluster up`: a storage node that exits is started again
//! on its data dir and on the same listening sockets (the cluster map names its addresses,
//! so it must come back on them); the exit of any other child, a storage node restarting
//! too often, or SIGINT/SIGTERM ends the watch.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::Write;
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use ferry_os::{ChildError, ChildServer};

use crate::CmdResult;

/// Most restarts of one storage node within [`RESTART_WINDOW`]; it exiting once more stops
/// the cluster, so a node that crashes on every start does not spin.
pub const MAX_RESTARTS_PER_MINUTE: usize = 5;

/// The window [`MAX_RESTARTS_PER_MINUTE`] counts restarts in.
const RESTART_WINDOW: Duration = Duration::from_secs(60);

/// How often the children are checked for having exited.
const CHILD_POLL: Duration = Duration::from_millis(200);

/// The restarts of one node within the last [`RESTART_WINDOW`].
#[derive(Default)]
struct RestartBudget {
    times: VecDeque<Instant>,
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
        if self.times.len() >= MAX_RESTARTS_PER_MINUTE {
            return false;
        }
        self.times.push_back(now);
        true
    }
}

/// A storage node of the cluster, with what it takes to start it again.
pub struct StorageNode {
    id: String,
    data_dir: PathBuf,
    exe: PathBuf,
    /// Its whole `ferry server` command line (the descriptors of `listeners` included:
    /// they keep their numbers, so a restart runs the very same command).
    args: Vec<OsString>,
    /// Its ferry-protocol and RESP listeners, held here as well as by the node: while the
    /// node is down its ports stay bound (a client's connection waits in the backlog instead
    /// of being refused, and no other process can take the port), and its restart serves
    /// the same sockets.
    listeners: [TcpListener; 2],
    child: ChildServer,
    restarts: RestartBudget,
}

impl StorageNode {
    /// Starts node `id` of the cluster map serving `listeners` (ferry protocol, RESP) with
    /// its log in `data_dir`; `args` are its other `ferry server` flags.
    pub fn start(
        exe: &Path,
        id: &str,
        listeners: [TcpListener; 2],
        data_dir: PathBuf,
        args: Vec<String>,
    ) -> Result<StorageNode, ChildError> {
        let mut args: Vec<OsString> = args.into_iter().map(OsString::from).collect();
        let [ferry, resp] = &listeners;
        for (flag, value) in [
            ("--node-id", OsString::from(id)),
            ("--listen-fd", ferry.as_raw_fd().to_string().into()),
            ("--resp-fd", resp.as_raw_fd().to_string().into()),
            ("--data-dir", data_dir.clone().into()),
        ] {
            args.extend([flag.into(), value]);
        }
        let child = spawn(exe, &args, &listeners, id)?;
        Ok(StorageNode {
            id: id.to_string(),
            data_dir,
            exe: exe.to_path_buf(),
            args,
            listeners,
            child,
            restarts: RestartBudget::default(),
        })
    }

    /// Its id in the cluster map.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Where it keeps its log.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The running process.
    pub fn child(&self) -> &ChildServer {
        &self.child
    }

    /// Starts it again after it exited with `status`; why not, if it may not or cannot.
    fn restart(&mut self, status: ExitStatus) -> Result<(), String> {
        if !self.restarts.take(Instant::now()) {
            return Err(format!(
                "storage node {} exited ({status}) after {MAX_RESTARTS_PER_MINUTE} restarts within {}s; \
                 not restarted again",
                self.id,
                RESTART_WINDOW.as_secs()
            ));
        }
        // The old process is reaped: replacing (dropping) it signals nothing.
        self.child = spawn(&self.exe, &self.args, &self.listeners, &self.id).map_err(|err| {
            format!(
                "storage node {} exited ({status}) and could not be restarted: {err}",
                self.id
            )
        })?;
        Ok(())
    }
}

fn spawn(exe: &Path, args: &[OsString], listeners: &[TcpListener; 2], id: &str) -> Result<ChildServer, ChildError> {
    let mut command = Command::new(exe);
    command.args(args);
    ferry_os::inherit::pass_listeners(&mut command, &[&listeners[0], &listeners[1]]);
    ChildServer::start_resp_recovering(command, &format!("storage node {id}"))
}

/// Watches the children until SIGINT or SIGTERM (`None`) or until the cluster cannot go on
/// (why). A storage node that exits is restarted, a line printed, and `restarted` called
/// with every storage node (to rewrite the JSON); the exit of any of `others` (named by
/// their first element) ends the watch. A restart blocks the watch while the node starts
/// (its first line within [`ferry_os::child::RECOVERY_START_TIMEOUT`], as it recovers
/// first); a signal meanwhile is handled after it.
pub fn supervise(
    others: &mut [(String, ChildServer)],
    storage: &mut [StorageNode],
    mut restarted: impl FnMut(&[StorageNode]) -> CmdResult,
) -> Result<Option<String>, Box<dyn std::error::Error + Send + Sync>> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let terminated = ferry_net::signal::terminated();
        tokio::pin!(terminated);
        loop {
            tokio::select! {
                result = &mut terminated => return result.map(|()| None).map_err(Into::into),
                _ = tokio::time::sleep(CHILD_POLL) => {}
            }
            for (what, child) in others.iter_mut() {
                if let Some(status) = child.exited() {
                    return Ok(Some(format!("the {what} on {} exited ({status})", child.addr())));
                }
            }
            for index in 0..storage.len() {
                let node = &mut storage[index];
                let Some(status) = node.child.exited() else {
                    continue;
                };
                if let Err(why) = node.restart(status) {
                    return Ok(Some(why));
                }
                let mut stdout = std::io::stdout();
                writeln!(
                    stdout,
                    "storage node {} exited ({status}); restarted on {} (pid {}, metrics {}, {})",
                    node.id,
                    node.data_dir.display(),
                    node.child.pid(),
                    node.child.metrics_addr().unwrap_or("-"),
                    node.child.recovered().unwrap_or("recovered nothing")
                )?;
                stdout.flush()?;
                restarted(storage)?;
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
