//! Keeping pinned CPUs from going idle ([`KeepWarm`]): on VMs whose halted vCPUs wake
//! slowly, an idle CPU turns into milliseconds of latency.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use crate::affinity::{pin_current_thread, AffinityError};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::affinity::MAX_CPUS;

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
        // The new thread names itself and lowers its priority when it first runs, which may
        // be a moment after the start returns on a loaded machine (a full-suite run saw it
        // not listed yet).
        let named_by = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while policy_of_warm() != Some(libc::SCHED_IDLE) && std::time::Instant::now() < named_by {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(policy_of_warm(), Some(libc::SCHED_IDLE));
        let pid = std::process::id();
        assert!(
            crate::cpu_time::named_threads_cpu_time(pid, &[KEEP_WARM_THREAD_PREFIX]).is_some(),
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
}
