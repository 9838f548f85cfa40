//! The watchdog thread: it pauses Lua calls past their slice and replaces a core stuck
//! in a call that cannot be paused.
//!
//! A Lua call is paused from here (`ferry_func::Bell`, `ferry_lua::pause`): the watchdog
//! rings a poll past its slice at its looks (every [`PAUSE_LOOK_PERIOD`] while Lua calls
//! run), and another tenant's work queued behind it has it paused at its slice's end
//! (`Pool::pause_for`). A native storage function that spins without ever calling its
//! `Ctx` cannot be preempted inside the process: the watchdog notices a core stuck in one
//! poll past the invocation budget, answers that request `function_failed`, and starts a
//! replacement thread for the core's queue (Splinter's approach); the stuck thread
//! discards its result and exits if it ever returns.

use ferry_proto::TenantId;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle, Thread};
use std::time::Duration;

use parking_lot::Mutex;

use ferry_proto::{Opcode, Response, Status};

use crate::node::Node;
use crate::stats::TenantCounters;
use crate::worker::{spawn_worker, CurrentPoll, Pool, MAX_WORKER_REPLACEMENTS};

/// Shortest watchdog period.
const WATCHDOG_PERIOD_MIN: Duration = Duration::from_millis(1);

/// Longest watchdog period.
const WATCHDOG_PERIOD_MAX: Duration = Duration::from_millis(50);

/// Time between two of the watchdog's looks for Lua calls past their slice while such
/// calls run (with preemption on). New work for a core pauses its call at once
/// (`dispatch`); these looks share a core between long calls alone, pause a call that
/// holds the core's own connections (they cannot queue work while it runs), and see
/// kills and time limits, so a slice between two pauses lasts from `poll_slice` to this
/// much more. A look wakes a thread on the node's core: once per slice cost the short
/// calls of a busy node a tenth of their rate.
const PAUSE_LOOK_PERIOD: Duration = Duration::from_millis(1);

/// Looks in a row that find no pausable poll before the watchdog goes back to its long
/// period (until a pausable poll starts and wakes it).
const PAUSE_LOOKS_BEFORE_IDLE: u32 = 16;

/// What the cores share with the watchdog about pauses.
pub(crate) struct Pauses {
    /// The watchdog thread, to wake when a pausable poll starts while it sleeps long.
    watchdog: Mutex<Option<Thread>>,
    /// The watchdog sleeps its long period (no pausable poll seen for a while).
    watchdog_idle: AtomicBool,
    /// Node-clock time (ns) of the earliest pause asked for by another tenant's work
    /// (`u64::MAX`: none): the watchdog wakes for it rather than at its next look.
    pause_at_ns: AtomicU64,
}

impl Pauses {
    pub(crate) fn new() -> Pauses {
        Pauses {
            watchdog: Mutex::new(None),
            watchdog_idle: AtomicBool::new(false),
            pause_at_ns: AtomicU64::new(u64::MAX),
        }
    }

    /// Wakes the watchdog (shutdown).
    pub(crate) fn wake(&self) {
        if let Some(thread) = self.watchdog.lock().as_ref() {
            thread.unpark();
        }
    }
}

impl Pool {
    /// A poll of a pausable Lua call started: the watchdog, if it sleeps its long period,
    /// wakes to look once per slice again.
    pub(crate) fn poll_started(&self) {
        if self.pauses.watchdog_idle.swap(false, Ordering::SeqCst) {
            if let Some(thread) = self.pauses.watchdog.lock().as_ref() {
                thread.unpark();
            }
        }
    }

    /// Pauses the Lua call worker `index` is polling if the poll has had its slice
    /// (`slice_ns` by `now_ns`); whether it polls a pausable call at all.
    pub(crate) fn pause_if_overdue(&self, index: usize, now_ns: u64, slice_ns: u64) -> bool {
        let current = self.slots[index].current.lock();
        let Some(pause) = current
            .as_ref()
            .and_then(|poll| Some((poll.started_ns, poll.pause.as_ref()?)))
        else {
            return false;
        };
        let (started_ns, bell) = pause;
        if now_ns.saturating_sub(started_ns) >= slice_ns {
            bell.ring();
        }
        true
    }

    /// Work of `tenant` now waits for worker `index`: if the worker polls another
    /// tenant's Lua call, that call is paused at the end of its slice (at once if it has
    /// had it; else the watchdog is woken for that moment), so the tenant waits about one
    /// slice, not a look period. A tenant's own work behind its own call asks nothing:
    /// pausing isolates tenants, and a busy tenant's short calls would pay for it.
    pub(crate) fn pause_for(&self, index: usize, tenant: TenantId, now_ns: u64, slice_ns: u64) {
        let ends_ns = {
            let current = self.slots[index].current.lock();
            let Some(poll) = current.as_ref() else { return };
            let Some(bell) = poll.pause.as_ref() else { return };
            if poll.tenant.id == tenant {
                return;
            }
            let ends_ns = poll.started_ns.saturating_add(slice_ns);
            if now_ns >= ends_ns {
                bell.ring();
                return;
            }
            ends_ns
        };
        self.pause_at(ends_ns);
    }

    /// A Lua call paused before is polled again from `started_ns`: it is paused at the end
    /// of this slice, not at the watchdog's next look (a call that outran one slice will
    /// likely outrun the next, and the core's other connections wait on it unread).
    pub(crate) fn pause_at_slice_end(&self, started_ns: u64, slice_ns: u64) {
        self.pause_at(started_ns.saturating_add(slice_ns));
    }

    /// Wakes the watchdog at `at_ns` (node clock) to ring the polls past their slice then.
    fn pause_at(&self, at_ns: u64) {
        if self.pauses.pause_at_ns.fetch_min(at_ns, Ordering::SeqCst) > at_ns {
            if let Some(thread) = self.pauses.watchdog.lock().as_ref() {
                thread.unpark();
            }
        }
    }
}

/// Starts the watchdog thread; it exits when the pool shuts down.
/// Also pauses Lua calls: with preemption on, while pausable polls run, it looks every
/// [`PAUSE_LOOK_PERIOD`] and rings the pause of every poll past its slice
/// (`ferry_func::Bell`).
pub(crate) fn spawn_watchdog(node: Arc<Node>) -> std::io::Result<JoinHandle<()>> {
    let pool_node = Arc::clone(&node);
    let handle = thread::Builder::new()
        .name("ferry-watchdog".into())
        .spawn(move || watchdog_loop(&node))?;
    *pool_node.pool.pauses.watchdog.lock() = Some(handle.thread().clone());
    Ok(handle)
}

fn watchdog_loop(node: &Arc<Node>) {
    let pool = &node.pool;
    let budget_ns = node.invoke_budget_ns;
    let period = Duration::from_nanos(budget_ns / 4).clamp(WATCHDOG_PERIOD_MIN, WATCHDOG_PERIOD_MAX);
    // A poll is stuck once it has run past the whole budget plus two watchdog periods (so a
    // poll that ends just after the budget is caught by the budget check instead).
    let stuck_after_ns = budget_ns + 2 * period.as_nanos() as u64;
    let slice_ns = node.poll_slice.as_nanos() as u64;
    let preempting = pool.scheduling().preemption;
    let mut quiet_looks = PAUSE_LOOKS_BEFORE_IDLE;
    while !pool.is_shutting_down() {
        if preempting && quiet_looks < PAUSE_LOOKS_BEFORE_IDLE {
            // Until the next look, or a pause another tenant's work asked for, if sooner.
            let asked_ns = pool.pauses.pause_at_ns.load(Ordering::SeqCst);
            let until_asked = Duration::from_nanos(asked_ns.saturating_sub(node.now_ns()));
            thread::park_timeout(until_asked.min(PAUSE_LOOK_PERIOD));
        } else {
            // Announce the long sleep before looking at the polls once more, so a poll
            // that starts in between wakes it (SeqCst on both sides).
            pool.pauses.watchdog_idle.store(true, Ordering::SeqCst);
            let pausable = (0..pool.workers()).any(|index| {
                pool.slots[index]
                    .current
                    .lock()
                    .as_ref()
                    .is_some_and(|poll| poll.pause.is_some())
            });
            if !pausable {
                thread::park_timeout(period);
            }
            pool.pauses.watchdog_idle.store(false, Ordering::SeqCst);
        }
        let now = node.now_ns();
        // The pauses asked for by now are rung below; a later one stays asked.
        let _ = pool
            .pauses
            .pause_at_ns
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |at| (at <= now).then_some(u64::MAX));
        let mut pausable = false;
        for index in 0..pool.workers() {
            let stuck = {
                let mut current = pool.slots[index].current.lock();
                match current.as_ref() {
                    Some(poll) if now.saturating_sub(poll.started_ns) > stuck_after_ns => current.take(),
                    _ => None,
                }
            };
            if let Some(poll) = stuck {
                replace_worker(node, index, poll);
            } else if pool.pause_if_overdue(index, now, slice_ns) {
                pausable = true;
            }
        }
        quiet_looks = if pausable { 0 } else { quiet_looks.saturating_add(1) };
    }
}

fn replace_worker(node: &Arc<Node>, index: usize, poll: CurrentPoll) {
    let budget_ms = node.invoke_budget_ns as f64 / 1e6;
    TenantCounters::bump(&poll.tenant.counters.invocation_failures);
    TenantCounters::bump(&poll.tenant.counters.requests);
    poll.outbox.respond(
        Opcode::Invoke,
        poll.tenant.id,
        poll.request_id,
        &Response::error(
            Status::FunctionFailed,
            format!("function ran past its CPU budget of {budget_ms:.1} ms without yielding; its worker was replaced"),
        ),
    );
    let slot = &node.pool.slots[index];
    // The stuck thread sees the new generation (or the emptied `current`) and exits once
    // its poll returns, its core loop's connections with it; its queue and suspended
    // invocations pass to the replacement.
    slot.generation.fetch_add(1, Ordering::SeqCst);
    let replaced = node.counters.worker_replacements.fetch_add(1, Ordering::SeqCst);
    if replaced >= MAX_WORKER_REPLACEMENTS {
        tracing::error!(
            worker = index,
            "worker stuck in a runaway function and the replacement limit ({MAX_WORKER_REPLACEMENTS}) is reached; \
             other workers will steal its queue"
        );
        *slot.runtime.lock() = None;
        return;
    }
    tracing::warn!(
        worker = index,
        replaced = replaced + 1,
        "worker stuck past its budget; replaced"
    );
    if let Err(err) = spawn_worker(Arc::clone(node), index) {
        tracing::error!(worker = index, "cannot start a replacement worker: {err}");
    }
}
