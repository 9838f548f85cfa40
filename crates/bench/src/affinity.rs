//! CPU pinning: the two sides of the trade-off must not share a CPU in a measurement; and
//! keeping the pinned CPUs from going idle ([`KeepWarm`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use thiserror::Error;

/// Most CPUs a CPU-set may name (the size of the kernel's `cpu_set_t`).
pub const MAX_CPUS: usize = libc::CPU_SETSIZE as usize;

/// Why a CPU set could not be applied.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum AffinityError {
    /// The text is not a CPU list.
    #[error("invalid CPU set {0:?}: expected a list like 0 or 0,2 or 1-3")]
    Parse(String),
    /// A CPU this machine does not have.
    #[error("CPU {cpu} does not exist on this machine (it has CPUs 0-{last})")]
    NoSuchCpu {
        /// The CPU asked for.
        cpu: usize,
        /// Highest CPU available.
        last: usize,
    },
    /// The kernel refused.
    #[error("cannot pin to CPUs {cpus:?}: {message}")]
    Kernel {
        /// The CPUs asked for.
        cpus: Vec<usize>,
        /// The error.
        message: String,
    },
}

/// Parses `0`, `0,2`, `1-3` into a sorted list of CPUs.
pub fn parse_cpu_set(text: &str) -> Result<Vec<usize>, AffinityError> {
    let parse_error = || AffinityError::Parse(text.to_string());
    let mut cpus = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse::<usize>(), b.trim().parse::<usize>()),
            None => (part.parse::<usize>(), part.parse::<usize>()),
        };
        let (first, last) = (first.map_err(|_| parse_error())?, last.map_err(|_| parse_error())?);
        if first > last {
            return Err(parse_error());
        }
        cpus.extend(first..=last);
    }
    cpus.sort_unstable();
    cpus.dedup();
    if cpus.is_empty() {
        return Err(parse_error());
    }
    Ok(cpus)
}

/// CPUs online on this machine.
pub fn online_cpus() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// Pins the calling thread, and every thread it creates afterwards, to `cpus`. Call it
/// before starting runtimes or workers so the whole process lands on those CPUs.
pub fn pin_current_thread(cpus: &[usize]) -> Result<(), AffinityError> {
    let online = configured_cpus().min(MAX_CPUS);
    if let Some(&cpu) = cpus.iter().find(|&&cpu| cpu >= online) {
        return Err(AffinityError::NoSuchCpu {
            cpu,
            last: online.saturating_sub(1),
        });
    }
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET only write inside it, and every
    // index was checked above to be below the CPU count, itself capped at MAX_CPUS.
    let result = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        for &cpu in cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if result != 0 {
        return Err(AffinityError::Kernel {
            cpus: cpus.to_vec(),
            message: std::io::Error::last_os_error().to_string(),
        });
    }
    Ok(())
}

/// Name prefix of the [`KeepWarm`] threads: CPU accounting leaves them out.
pub const KEEP_WARM_THREAD_PREFIX: &str = "ferry-warm";

/// Keeps CPUs from going idle while it lives: one thread per CPU, pinned to it, spinning at
/// `SCHED_IDLE` priority. Such a thread runs only when nothing else on its CPU wants to, and
/// any waking thread preempts it at once, so it takes no CPU time from the process's own
/// threads — but the CPU never halts (kernel-bypass stores poll for the same reason). It is
/// for VMs whose halted vCPUs wake slowly: in one sitting on the 2-vCPU VMs ferry is measured
/// on, a loopback `get` at 1 % load had a p99 of 1.3–3.6 ms with idle CPUs and 0.3–0.8 ms
/// with them kept warm, and rate loops that lower R on a bad tail walked R down to its floor.
/// Where halted vCPUs wake fast (the guest's halt-polling catches the wake-up), it costs
/// instead: every wake-up then needs an IPI (docs/BENCHMARKS.md has both measurements).
pub struct KeepWarm {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl KeepWarm {
    /// Starts one spinning thread on each of `cpus`; an error if a CPU does not exist or the
    /// kernel refuses the pinning or the idle priority (then nothing keeps spinning).
    pub fn start(cpus: &[usize]) -> Result<KeepWarm, AffinityError> {
        let mut warm = KeepWarm {
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::with_capacity(cpus.len()),
        };
        let (started_tx, started_rx) = mpsc::channel();
        for &cpu in cpus {
            let stop = Arc::clone(&warm.stop);
            let started = started_tx.clone();
            let thread = std::thread::Builder::new()
                .name(format!("{KEEP_WARM_THREAD_PREFIX}-{cpu}"))
                .spawn(move || {
                    let ready = pin_current_thread(&[cpu]).and_then(|()| set_idle_priority(cpu));
                    let ok = ready.is_ok();
                    // The receiver waits for every thread; it cannot be gone yet.
                    let _ = started.send(ready);
                    drop(started);
                    if ok {
                        // A plain load, not spin_loop(): a PAUSE loop makes the hypervisor
                        // deschedule the vCPU (pause-loop exiting), the very idling avoided.
                        while !stop.load(Ordering::Relaxed) {}
                    }
                })
                .map_err(|err| AffinityError::Kernel {
                    cpus: vec![cpu],
                    message: format!("cannot start a keep-warm thread: {err}"),
                })?;
            warm.threads.push(thread);
        }
        drop(started_tx);
        for _ in 0..warm.threads.len() {
            // On an error `warm` is dropped, which stops the threads already spinning.
            started_rx.recv().map_err(|_| AffinityError::Kernel {
                cpus: cpus.to_vec(),
                message: "a keep-warm thread died while starting".into(),
            })??;
        }
        Ok(warm)
    }
}

impl Drop for KeepWarm {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Gives the calling thread `SCHED_IDLE` priority (lowering a priority needs no privilege).
fn set_idle_priority(cpu: usize) -> Result<(), AffinityError> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler reads `param`, a valid sched_param, and pid 0 names the
    // calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } != 0 {
        return Err(AffinityError::Kernel {
            cpus: vec![cpu],
            message: format!("cannot lower to idle priority: {}", std::io::Error::last_os_error()),
        });
    }
    Ok(())
}

/// CPUs the machine has (not only those this process may use).
fn configured_cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    let count = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
    if count > 0 {
        count as usize
    } else {
        online_cpus()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_sets_parse_and_bad_ones_are_refused() {
        assert_eq!(parse_cpu_set("0").unwrap(), vec![0]);
        assert_eq!(parse_cpu_set("3,1-2, 1").unwrap(), vec![1, 2, 3]);
        assert_eq!(
            parse_cpu_set("99999").unwrap(),
            vec![99999],
            "existence is checked when pinning"
        );
        for bad in ["", "x", "2-1", "-1", "1,,2"] {
            assert!(parse_cpu_set(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn keep_warm_spins_at_idle_priority_and_stops_when_dropped() {
        let warm = KeepWarm::start(&[0]).unwrap();
        let name = format!("{KEEP_WARM_THREAD_PREFIX}-0");
        assert_eq!(warm.threads[0].thread().name(), Some(name.as_str()));
        // The scheduling policy of this test's thread (by its exact name: other tests may
        // start keep-warm threads of their own), None once it is gone.
        let policy_of_warm = || {
            std::fs::read_dir("/proc/self/task")
                .unwrap()
                .flatten()
                .find_map(|task| {
                    let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
                    let tid: i32 = task.file_name().to_string_lossy().parse().ok()?;
                    // SAFETY: sched_getscheduler has no memory preconditions.
                    (comm.trim_end() == name).then(|| unsafe { libc::sched_getscheduler(tid) })
                })
        };
        assert_eq!(policy_of_warm(), Some(libc::SCHED_IDLE));
        let pid = std::process::id();
        assert!(
            crate::child::named_threads_cpu_time(pid, &[KEEP_WARM_THREAD_PREFIX]).is_some(),
            "CPU accounting must find the thread by its name to leave it out"
        );
        drop(warm);
        // Joined, the thread may still be listed for a moment while the kernel releases it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while policy_of_warm().is_some() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(policy_of_warm(), None, "the thread must be gone after drop");
    }

    #[test]
    fn keep_warm_on_a_missing_cpu_is_a_clear_error() {
        let err = KeepWarm::start(&[MAX_CPUS - 1]).err().unwrap();
        assert!(matches!(err, AffinityError::NoSuchCpu { .. }), "{err}");
    }

    #[test]
    fn pinning_to_a_missing_cpu_is_a_clear_error() {
        let err = pin_current_thread(&[MAX_CPUS - 1]).unwrap_err();
        assert!(matches!(err, AffinityError::NoSuchCpu { .. }), "{err}");
        assert!(err.to_string().contains("does not exist"));
    }
}
