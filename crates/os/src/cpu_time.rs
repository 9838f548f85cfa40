//! CPU time from /proc: how much a process, or some of its threads, has used, so that a
//! measurement can charge each side of the trade-off with its own threads' work.

use std::time::Duration;

use crate::keep_warm::KEEP_WARM_THREAD_PREFIX;

/// CPU time (user + system) a process has used so far, from /proc; `None` if unreadable.
pub fn process_cpu_time(pid: u32) -> Option<Duration> {
    stat_cpu_time(&format!("/proc/{pid}/stat"))
}

/// CPU time a process has spent on its own work: all of it but its keep-warm threads', which
/// only ever run when the CPU would otherwise idle.
pub fn busy_cpu_time(pid: u32) -> Option<Duration> {
    let warm = named_threads_cpu_time(pid, &[KEEP_WARM_THREAD_PREFIX]).unwrap_or_default();
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

/// utime + stime of a `/proc/.../stat` file.
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
