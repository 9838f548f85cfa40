//! Which side of a measurement a thread's CPU time counts for. A process holds the app
//! side's threads, may hold the threads of a storage node embedded in it (`ferry demo`),
//! and may hold keep-warm threads that spin only when their CPU would idle; each side is
//! charged with its own threads alone, so a side pinned to N CPUs never shows more than N.

use std::time::Duration;

use ferry_os::cpu_time::{busy_cpu_time, named_threads_cpu_time};
use ferry_os::KEEP_WARM_THREAD_PREFIX;

/// Name prefixes of a storage node's threads (workers, I/O, watchdog; `ferry-server` names
/// them so).
pub const NODE_THREAD_PREFIXES: [&str; 3] = ["ferry-worker", "ferry-io", "ferry-watchdog"];

/// Who a thread of this process works for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadSide {
    /// The app side: load generator, client, locally executed functions.
    App,
    /// A storage node embedded in the process.
    Node,
    /// A [`ferry_os::KeepWarm`] thread: its spinning is idle time, charged to no one.
    KeepWarm,
}

/// The side a thread named `name` works for.
pub fn thread_side(name: &str) -> ThreadSide {
    if name.starts_with(KEEP_WARM_THREAD_PREFIX) {
        ThreadSide::KeepWarm
    } else if NODE_THREAD_PREFIXES.iter().any(|prefix| name.starts_with(prefix)) {
        ThreadSide::Node
    } else {
        ThreadSide::App
    }
}

/// CPU time the threads of a storage node embedded in process `pid` have used; `None` if
/// it has none.
pub fn embedded_node_cpu_time(pid: u32) -> Option<Duration> {
    named_threads_cpu_time(pid, &NODE_THREAD_PREFIXES)
}

/// CPU time the app side of process `pid` has used so far: the process's own work (all but
/// its keep-warm threads, including threads that have exited) less what the threads of a
/// storage node embedded in it used. Those run on the node's CPUs; counted here, `ferry
/// demo` showed 1.69 app CPUs for an app side pinned to one CPU.
pub fn app_side_cpu_time(pid: u32) -> Option<Duration> {
    let node = embedded_node_cpu_time(pid).unwrap_or_default();
    Some(busy_cpu_time(pid)?.saturating_sub(node))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_are_told_apart_by_name() {
        assert_eq!(thread_side("ferry-worker-0"), ThreadSide::Node);
        assert_eq!(thread_side("ferry-io"), ThreadSide::Node);
        assert_eq!(thread_side("ferry-watchdog"), ThreadSide::Node);
        assert_eq!(thread_side("ferry-warm-1"), ThreadSide::KeepWarm);
        assert_eq!(thread_side("ferry"), ThreadSide::App);
        assert_eq!(thread_side("tokio-runtime-w"), ThreadSide::App);
    }

    /// CPU time the calling thread has used.
    fn own_thread_cpu_time() -> Duration {
        let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes one timespec, which `now` is.
        let result = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
        assert_eq!(result, 0, "the thread CPU clock exists on Linux");
        Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
    }

    // Regression: `ferry demo` reported the whole process's CPU time as the app side's, so
    // the embedded node's threads counted too and an app side pinned to one CPU showed 1.69
    // CPUs. A thread named like a node worker spins; the app side must not be charged.
    #[test]
    fn an_embedded_nodes_threads_are_not_charged_to_the_app_side() {
        const NODE_SPIN: Duration = Duration::from_millis(300);
        let pid = std::process::id();
        let (process_before, app_before) = (busy_cpu_time(pid).unwrap(), app_side_cpu_time(pid).unwrap());
        let (spun_tx, spun_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let node = std::thread::Builder::new()
            .name("ferry-worker-test".into())
            .spawn(move || {
                while own_thread_cpu_time() < NODE_SPIN {}
                spun_tx.send(()).unwrap();
                // Alive while measured: a thread's time leaves the named count when it exits.
                let _ = done_rx.recv();
            })
            .unwrap();
        spun_rx.recv().unwrap();
        let (process_after, app_after) = (busy_cpu_time(pid).unwrap(), app_side_cpu_time(pid).unwrap());
        done_tx.send(()).unwrap();
        node.join().unwrap();
        let process = process_after - process_before;
        let app = app_after.saturating_sub(app_before);
        // /proc counts in 10 ms ticks: a generous margin under the 300 ms spun.
        let margin = Duration::from_millis(50);
        assert!(process >= NODE_SPIN - margin, "the process spent {process:?}");
        assert!(
            process.saturating_sub(app) >= NODE_SPIN - margin,
            "the node thread's {NODE_SPIN:?} was charged to the app side: process {process:?}, app {app:?}"
        );
    }
}
