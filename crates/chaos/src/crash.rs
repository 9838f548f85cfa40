//! Crashes for the soak (`ferry check --crash`): the node runs as a child process on a
//! data dir, and a nemesis kills it with SIGKILL at random moments, mid-request,
//! mid-commit, mid-snapshot or mid-recovery, and starts it again on the same data dir.
//!
//! The nemesis binds the node's listening sockets (ferry's protocol and RESP) once and
//! hands them to every incarnation (as `cluster up` does), so the addresses never change:
//! clients that reconnect while the node is down wait in the sockets' backlogs for the
//! next one. The history of the whole
//! run, across every restart, goes to the checker, and the final read comes after one
//! last crash, so what the last incarnation acknowledged must have survived too.

use std::fs::OpenOptions;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::ChaosError;

/// Builds the command that starts one node process serving the listeners inherited as
/// the given descriptors, on the given data dir (`ferry check` runs its hidden
/// `check-node`).
pub type Launcher = Arc<dyn Fn(NodeFds, &Path) -> Command + Send + Sync>;

/// The listening sockets a node process inherits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeFds {
    /// ferry's protocol.
    pub listen: RawFd,
    /// RESP.
    pub resp: RawFd,
}

/// Shortest time a node runs before it may be killed: long enough to recover and serve.
pub const MIN_UPTIME: Duration = Duration::from_millis(200);

/// How often the nemesis looks whether the node died by itself.
const POLL: Duration = Duration::from_millis(20);

/// File in the data dir that collects the node processes' standard error.
pub const NODE_STDERR_FILE: &str = "node-stderr.txt";

/// How crashes happen.
#[derive(Clone)]
pub struct CrashConfig {
    /// Starts a node.
    pub launcher: Launcher,
    /// Its data dir (must exist).
    pub data_dir: PathBuf,
    /// Mean time a node runs before it is killed (exponentially distributed, at least
    /// [`MIN_UPTIME`]).
    pub mean_uptime: Duration,
}

impl std::fmt::Debug for CrashConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrashConfig")
            .field("data_dir", &self.data_dir)
            .field("mean_uptime", &self.mean_uptime)
            .finish_non_exhaustive()
    }
}

/// The node process and the one who kills it.
pub(crate) struct Nemesis {
    listener: TcpListener,
    resp: TcpListener,
    config: CrashConfig,
    child: Mutex<Child>,
    crashes: AtomicU64,
    rng: Mutex<ChaCha8Rng>,
}

impl Nemesis {
    /// Binds the node's addresses and starts its first incarnation.
    pub(crate) fn start(config: CrashConfig, seed: u64) -> Result<Nemesis, ChaosError> {
        let bind = || TcpListener::bind("127.0.0.1:0").map_err(|e| ChaosError::Start(format!("bind: {e}")));
        let (listener, resp) = (bind()?, bind()?);
        let child = spawn(&config, &listener, &resp)?;
        Ok(Nemesis {
            listener,
            resp,
            config,
            child: Mutex::new(child),
            crashes: AtomicU64::new(0),
            rng: Mutex::new(ChaCha8Rng::seed_from_u64(seed)),
        })
    }

    /// The node's address, the same for every incarnation.
    pub(crate) fn addr(&self) -> Result<SocketAddr, ChaosError> {
        self.listener.local_addr().map_err(|e| ChaosError::Start(e.to_string()))
    }

    /// The node's RESP address, the same for every incarnation.
    pub(crate) fn resp_addr(&self) -> Result<SocketAddr, ChaosError> {
        self.resp.local_addr().map_err(|e| ChaosError::Start(e.to_string()))
    }

    /// Kills the node with SIGKILL, waits for it, and starts it again on its data dir.
    pub(crate) fn crash_and_restart(&self) -> Result<(), ChaosError> {
        let mut child = self.child.lock();
        if let Some(status) = child.try_wait().map_err(|e| ChaosError::Start(e.to_string()))? {
            return Err(self.died(status));
        }
        let _ = child.kill();
        let _ = child.wait();
        self.crashes.fetch_add(1, Ordering::Relaxed);
        *child = spawn(&self.config, &self.listener, &self.resp)?;
        Ok(())
    }

    /// Crashes the node at random moments until `deadline`. A node that exits by itself
    /// (a recovery that failed, a panic) ends the run with an error.
    pub(crate) fn run_until(&self, deadline: Instant) -> Result<(), ChaosError> {
        loop {
            let uptime = self.next_uptime();
            let crash_at = Instant::now() + uptime;
            while Instant::now() < crash_at.min(deadline) {
                std::thread::sleep(POLL);
                if let Some(status) = self
                    .child
                    .lock()
                    .try_wait()
                    .map_err(|e| ChaosError::Start(e.to_string()))?
                {
                    return Err(self.died(status));
                }
            }
            if Instant::now() >= deadline {
                return Ok(());
            }
            self.crash_and_restart()?;
        }
    }

    /// Crashes survived so far.
    pub(crate) fn crashes(&self) -> u64 {
        self.crashes.load(Ordering::Relaxed)
    }

    fn next_uptime(&self) -> Duration {
        // Exponential: crashes come at no particular phase of the node's work.
        let u: f64 = self.rng.lock().gen_range(f64::EPSILON..1.0);
        let mean = self.config.mean_uptime.as_secs_f64();
        Duration::from_secs_f64(-u.ln() * mean).max(MIN_UPTIME)
    }

    fn died(&self, status: std::process::ExitStatus) -> ChaosError {
        ChaosError::NodeDied(format!(
            "the node exited by itself ({status}) after {} crashes; its stderr is in {}",
            self.crashes(),
            self.config.data_dir.join(NODE_STDERR_FILE).display()
        ))
    }
}

impl Drop for Nemesis {
    fn drop(&mut self) {
        let mut child = self.child.lock();
        let _ = child.kill();
        let _ = child.wait();
    }
}

fn spawn(config: &CrashConfig, listener: &TcpListener, resp: &TcpListener) -> Result<Child, ChaosError> {
    let stderr_path = config.data_dir.join(NODE_STDERR_FILE);
    let stderr = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&stderr_path)
        .map_err(|e| ChaosError::Start(format!("{}: {e}", stderr_path.display())))?;
    let fds = NodeFds {
        listen: listener.as_raw_fd(),
        resp: resp.as_raw_fd(),
    };
    let mut command = (config.launcher)(fds, &config.data_dir);
    ferry_os::inherit::pass_listeners(&mut command, &[listener, resp]);
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .map_err(|e| ChaosError::Start(format!("cannot start the node: {e}")))
}
