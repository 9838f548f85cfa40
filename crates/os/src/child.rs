//! A ferry process (storage node, compute node, gateway) run as a child process, pinned
//! to its own CPUs, for benchmarks and `ferry cluster up`.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use thiserror::Error;

use crate::startup::{StartupKind, StartupLine};

/// How long the child may take to print each of its start-up lines: a node without a data
/// dir loads nothing at start, so this only bounds a hung start-up.
pub const START_TIMEOUT: Duration = Duration::from_secs(20);

/// The same for the first line of a storage node with a data dir, which it prints once it
/// has recovered: about 140 GB of snapshots and log at the measured 240 MiB/s on one CPU.
pub const RECOVERY_START_TIMEOUT: Duration = Duration::from_secs(600);

/// How long the child gets to exit after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a child process did not come up.
#[derive(Debug, Error)]
pub enum ChildError {
    /// The executable could not be started.
    #[error("cannot start the {what}: {source}")]
    Spawn {
        /// Which process (`storage node`, `gateway`, ...).
        what: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// Its standard output could not be read.
    #[error("cannot read the {what}'s output: {source}")]
    Output {
        /// Which process.
        what: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// It printed something other than the address line expected next.
    #[error("unexpected line from the {what}: {line:?}")]
    UnexpectedLine {
        /// Which process.
        what: String,
        /// The line it printed.
        line: String,
    },
    /// It exited before printing its addresses.
    #[error("the {what} exited before listening ({status:?})")]
    Exited {
        /// Which process.
        what: String,
        /// How it exited, if that could be read.
        status: Option<std::process::ExitStatus>,
    },
    /// It printed nothing within [`START_TIMEOUT`], or [`RECOVERY_START_TIMEOUT`] for a
    /// recovering node's first line (it is killed).
    #[error("the {what} did not start within {timeout:?}")]
    Timeout {
        /// Which process.
        what: String,
        /// How long it was given.
        timeout: Duration,
    },
}

/// How to start the child node.
#[derive(Clone, Debug)]
pub struct ChildSpec {
    /// The `ferry` executable.
    pub exe: PathBuf,
    /// CPUs to pin it to (its `--cpu-set`).
    pub cpus: Vec<usize>,
    /// Worker threads (`--cores`).
    pub cores: usize,
    /// Tenants as `ID:TOKEN`.
    pub tenants: Vec<String>,
    /// Emulated-work calibration to share with the client.
    pub spin_iters_per_ms: u64,
    /// Whether the node keeps its CPUs from idling (`--keep-warm`; see
    /// [`crate::keep_warm::KeepWarm`]).
    pub keep_warm: bool,
    /// Further `ferry server` flags, passed through unchanged.
    pub extra_args: Vec<String>,
}

/// A running child process; stopped (SIGTERM, then kill) when dropped.
pub struct ChildServer {
    child: Child,
    addr: String,
    metrics_addr: Option<String>,
    resp_addr: Option<String>,
    recovered: Option<String>,
}

impl ChildServer {
    /// Starts the node and waits for its address.
    pub fn spawn(spec: &ChildSpec) -> Result<ChildServer, ChildError> {
        let cpus: Vec<String> = spec.cpus.iter().map(usize::to_string).collect();
        let mut command = Command::new(&spec.exe);
        command
            .arg("server")
            .args(["--listen", "127.0.0.1:0"])
            .args(["--cores", &spec.cores.to_string()])
            .args(["--cpu-set", &cpus.join(",")])
            .args(["--spin-iters-per-ms", &spec.spin_iters_per_ms.to_string()]);
        for tenant in &spec.tenants {
            command.args(["--tenant", tenant]);
        }
        if spec.keep_warm {
            command.arg("--keep-warm");
        }
        command.args(&spec.extra_args);
        ChildServer::start(command, "storage node", false)
    }

    /// Like [`ChildServer::start`] for a process (storage node, gateway) started with `--resp` and
    /// `--metrics`: it prints `resp on HOST:PORT` between the two.
    pub fn start_resp(command: Command, what: &str) -> Result<ChildServer, ChildError> {
        Self::start_lines(command, what, &[StartupKind::Resp, StartupKind::Metrics], START_TIMEOUT)
    }

    /// Like [`ChildServer::start_resp`] for a storage node started with `--data-dir`: it
    /// prints `recovered N objects from S snapshots ... and C commits ...` after its
    /// addresses (see [`ChildServer::recovered`]).
    pub fn start_resp_recovering(command: Command, what: &str) -> Result<ChildServer, ChildError> {
        Self::start_lines(
            command,
            what,
            &[StartupKind::Resp, StartupKind::Metrics, StartupKind::Recovered],
            RECOVERY_START_TIMEOUT,
        )
    }

    /// Starts `command` (a `ferry` subcommand that prints `listening on HOST:PORT` first,
    /// then `metrics on HOST:PORT` if `metrics` says it serves them) and waits for its
    /// addresses. `what` names it in errors.
    pub fn start(command: Command, what: &str, metrics: bool) -> Result<ChildServer, ChildError> {
        let lines: &[StartupKind] = if metrics { &[StartupKind::Metrics] } else { &[] };
        Self::start_lines(command, what, lines, START_TIMEOUT)
    }

    /// Starts `command` and reads `listening on HOST:PORT` (within `first_line_timeout`),
    /// then one line of each kind of `more` (`resp on`, `metrics on`), in that order,
    /// reading past informational ones.
    fn start_lines(
        mut command: Command,
        what: &str,
        more: &[StartupKind],
        first_line_timeout: Duration,
    ) -> Result<ChildServer, ChildError> {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|source| ChildError::Spawn {
                what: what.to_string(),
                source,
            })?;
        let stdout = child.stdout.take().expect("stdout was piped");
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                // Keep draining after the receiver is gone, so the child never blocks on a
                // full pipe.
                let _ = sender.send(line);
            }
        });
        let what = what.to_string();
        let mut next_line = |kind: StartupKind, timeout: Duration| loop {
            break match receiver.recv_timeout(timeout) {
                Ok(Ok(line)) => match StartupLine::parse(&line) {
                    Some(startup) if startup.kind == kind => Ok(startup),
                    Some(startup) if startup.kind.is_informational() => continue,
                    _ => Err(ChildError::UnexpectedLine {
                        what: what.clone(),
                        line,
                    }),
                },
                Ok(Err(source)) => Err(ChildError::Output {
                    what: what.clone(),
                    source,
                }),
                Err(mpsc::RecvTimeoutError::Disconnected) => Err(ChildError::Exited {
                    what: what.clone(),
                    status: child.wait().ok(),
                }),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let _ = child.kill();
                    Err(ChildError::Timeout {
                        what: what.clone(),
                        timeout,
                    })
                }
            };
        };
        let addr = next_line(StartupKind::Listening, first_line_timeout)?.value;
        let (mut resp_addr, mut metrics_addr, mut recovered) = (None, None, None);
        for &kind in more {
            let line = next_line(kind, START_TIMEOUT)?;
            match kind {
                StartupKind::Resp => resp_addr = Some(line.value),
                StartupKind::Recovered => recovered = Some(line.to_string()),
                _ => metrics_addr = Some(line.value),
            }
        }
        Ok(ChildServer {
            child,
            addr,
            metrics_addr,
            resp_addr,
            recovered,
        })
    }

    /// Its `recovered N objects from S snapshots (…) and C commits (…) in T ms` line, if
    /// it was started with [`ChildServer::start_resp_recovering`].
    pub fn recovered(&self) -> Option<&str> {
        self.recovered.as_deref()
    }

    /// `host:port` of its RESP listener, if it has one.
    pub fn resp_addr(&self) -> Option<&str> {
        self.resp_addr.as_deref()
    }

    /// `host:port` of its metrics, if it serves them.
    pub fn metrics_addr(&self) -> Option<&str> {
        self.metrics_addr.as_deref()
    }

    /// `host:port` the child listens on.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Process id, for CPU accounting.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it has exited (and how), without waiting.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        // Already reaped (seen by `exited`): its pid may belong to another process by now.
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        // SAFETY: kill(2) on our own child's pid has no memory-safety preconditions.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = std::time::Instant::now() + STOP_TIMEOUT;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
