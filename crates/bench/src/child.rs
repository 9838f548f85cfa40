//! A ferry process (storage node, compute node, gateway) run as a child process, pinned
//! to its own CPUs, for benchmarks and `ferry cluster up`.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::BenchError;

/// How long the child may take to print its `listening on` line.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// How long the child gets to exit after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

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
    /// [`crate::affinity::KeepWarm`]).
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
}

impl ChildServer {
    /// Starts the node and waits for its address.
    pub fn spawn(spec: &ChildSpec) -> Result<ChildServer, BenchError> {
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
    pub fn start_resp(command: Command, what: &str) -> Result<ChildServer, BenchError> {
        Self::start_lines(command, what, &["resp on ", "metrics on "])
    }

    /// Starts `command` (a `ferry` subcommand that prints `listening on HOST:PORT` first,
    /// then `metrics on HOST:PORT` if `metrics` says it serves them) and waits for its
    /// addresses. `what` names it in errors.
    pub fn start(command: Command, what: &str, metrics: bool) -> Result<ChildServer, BenchError> {
        let lines: &[&str] = if metrics { &["metrics on "] } else { &[] };
        Self::start_lines(command, what, lines)
    }

    /// Starts `command` and reads `listening on HOST:PORT`, then one line per prefix of
    /// `more` (`resp on `, `metrics on `), in that order.
    fn start_lines(mut command: Command, what: &str, more: &[&str]) -> Result<ChildServer, BenchError> {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|err| BenchError::Server(format!("cannot start the {what}: {err}")))?;
        let stdout = child.stdout.take().expect("stdout was piped");
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                // Keep draining after the receiver is gone, so the child never blocks on a
                // full pipe.
                let _ = sender.send(line);
            }
        });
        let mut next_line = |prefix: &str| match receiver.recv_timeout(START_TIMEOUT) {
            Ok(Ok(line)) => line
                .strip_prefix(prefix)
                .map(|addr| addr.trim().to_string())
                .ok_or_else(|| format!("unexpected line from the {what}: {line:?}")),
            Ok(Err(err)) => Err(format!("cannot read the {what}'s output: {err}")),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = child.wait().ok();
                Err(format!("the {what} exited before listening ({status:?})"))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                Err(format!("the {what} did not start within {START_TIMEOUT:?}"))
            }
        };
        let addr = next_line("listening on ").map_err(BenchError::Server)?;
        let (mut resp_addr, mut metrics_addr) = (None, None);
        for prefix in more {
            let value = next_line(prefix).map_err(BenchError::Server)?;
            match *prefix {
                "resp on " => resp_addr = Some(value),
                _ => metrics_addr = Some(value),
            }
        }
        Ok(ChildServer {
            child,
            addr,
            metrics_addr,
            resp_addr,
        })
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

/// CPU time (user + system) a process has used so far, from /proc; `None` if unreadable.
pub fn process_cpu_time(pid: u32) -> Option<Duration> {
    stat_cpu_time(&format!("/proc/{pid}/stat"))
}

/// CPU time a process has spent on its own work: all of it but its keep-warm threads', which
/// only ever run when the CPU would otherwise idle.
pub fn busy_cpu_time(pid: u32) -> Option<Duration> {
    let warm = named_threads_cpu_time(pid, &[crate::affinity::KEEP_WARM_THREAD_PREFIX]).unwrap_or_default();
    Some(process_cpu_time(pid)?.saturating_sub(warm))
}

/// CPU time of the threads of a process whose names start with one of `prefixes`; `None` if
/// there are none (or /proc is unreadable).
pub fn named_threads_cpu_time(pid: u32, prefixes: &[&str]) -> Option<Duration> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut total = Duration::ZERO;
    let mut found = false;
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if prefixes.iter().any(|prefix| comm.starts_with(prefix)) {
            let tid: u32 = task.file_name().to_string_lossy().parse().ok()?;
            total += thread_cpu_time(pid, tid)?;
            found = true;
        }
    }
    found.then_some(total)
}

/// Time the threads of a process spent on a CPU so far, to the nanosecond (the scheduler's
/// own account, `/proc/PID/task/TID/schedstat`; /proc's stat counts in 10 ms ticks), over
/// the threads whose names `keep` accepts; `None` if /proc is unreadable.
pub fn threads_on_cpu_time(pid: u32, keep: impl Fn(&str) -> bool) -> Option<Duration> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut total = 0u64;
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !keep(comm.trim_end()) {
            continue;
        }
        let schedstat = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
        total += schedstat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(Duration::from_nanos(total))
}

/// CPU time (user + system) one thread of a process has used so far.
pub fn thread_cpu_time(pid: u32, tid: u32) -> Option<Duration> {
    stat_cpu_time(&format!("/proc/{pid}/task/{tid}/stat"))
}

fn stat_cpu_time(path: &str) -> Option<Duration> {
    let stat = std::fs::read_to_string(path).ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let after = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let ticks = if ticks > 0 { ticks as u64 } else { 100 };
    Some(Duration::from_nanos((utime + stime) * 1_000_000_000 / ticks))
}
