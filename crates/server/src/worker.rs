//! Worker threads ("cores"): one bounded queue each, work stealing, and the watchdog.
//!
//! Every tenant has a home worker whose queue receives all its requests (Kayak's static
//! pin-request-to-core allocation, which makes per-tenant CPU shares enforceable). A worker
//! with nothing in its own queue and no suspended invocation steals the oldest task from
//! the longest other queue (ZygOS-style, from every other core), so no core idles while
//! work waits anywhere: the node is work-conserving.
//!
//! A Lua call is paused from here (`ferry_func::Bell`, `ferry_lua::pause`): the watchdog
//! rings a poll past its slice at its looks (every [`PAUSE_LOOK_PERIOD`] while Lua calls
//! run), and another tenant's work queued behind it has it paused at its slice's end
//! (`Pool::pause_for`). A native storage function that spins without ever calling its
//! `Ctx` cannot be preempted inside the process. The watchdog notices a worker stuck in one poll past the invocation budget,
//! answers that request `function_failed`, and starts a replacement thread for the queue
//! (Splinter's approach); the stuck thread discards its result and exits if it ever returns.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle, Thread};
use std::time::Duration;

use parking_lot::Mutex;

use ferry_proto::{Opcode, Request, Response, Status};

use crate::config::Scheduling;
use crate::conn::Answer;
use crate::exec::{self, Invocation};
use crate::fair::FairQueue;
use crate::node::{Node, TenantState};
use crate::stats::{TenantCounters, WorkerCounters};

/// Most invocations one worker keeps suspended at a time. Past it the worker finishes
/// those before taking new tasks, so its queue (bounded) absorbs the rest and then the
/// node answers `overloaded`: memory stays bounded however many invocations arrive.
pub const MAX_RUNNING_PER_WORKER: usize = 1024;

/// Longest an idle worker sleeps before looking at the queues again: a safety net under
/// the explicit wake-ups, short enough that a missed one costs little.
const IDLE_PARK: Duration = Duration::from_millis(5);

/// Most worker threads the watchdog replaces over the node's life. Each replaced thread
/// may still be spinning, so past this the node stops adding threads and lets the other
/// workers steal the stuck worker's queue.
pub const MAX_WORKER_REPLACEMENTS: u64 = 64;

/// Shortest watchdog period.
const WATCHDOG_PERIOD_MIN: Duration = Duration::from_millis(1);

/// Longest watchdog period.
const WATCHDOG_PERIOD_MAX: Duration = Duration::from_millis(50);

/// Time between two of the watchdog's looks for Lua calls past their slice while such
/// calls run (with preemption on). New work for a worker pauses its call at once
/// (`dispatch`); these looks share a core between long calls alone and see kills and time
/// limits, so a slice between two pauses lasts from `poll_slice` to this much more. A
/// look wakes a thread on the node's core: once per slice cost the short calls of a
/// busy node a tenth of their rate.
const PAUSE_LOOK_PERIOD: Duration = Duration::from_millis(1);

/// Looks in a row that find no pausable poll before the watchdog goes back to its long
/// period (until a pausable poll starts and wakes it).
const PAUSE_LOOKS_BEFORE_IDLE: u32 = 16;

/// Name prefix of worker threads (the panic hook recognises them by it).
pub(crate) const WORKER_THREAD_PREFIX: &str = "ferry-worker-";

/// Work waiting for a worker, for one tenant.
pub(crate) struct Task {
    /// Who asked.
    pub(crate) tenant: Arc<TenantState>,
    /// When the I/O thread received it (latency is measured from here).
    pub(crate) received: std::time::Instant,
    /// What to do.
    pub(crate) work: Work,
}

/// What a task asks of a worker.
pub(crate) enum Work {
    /// A ferry-protocol request (a data operation or an invocation), answered to its
    /// connection's outbox under its opcode and id.
    Request {
        outbox: Arc<dyn Answer>,
        opcode: Opcode,
        request_id: u64,
        request: Request,
    },
    /// Commands of one RESP connection, run in order, answered together.
    Resp(crate::resp_job::RespJob),
}

/// The invocation a worker is polling right now, as the watchdog sees it.
pub(crate) struct CurrentPoll {
    pub(crate) outbox: Arc<dyn Answer>,
    pub(crate) tenant: Arc<TenantState>,
    pub(crate) request_id: u64,
    /// When the poll started (node clock, ns).
    pub(crate) started_ns: u64,
    /// The worker thread's generation: a replaced thread that wakes up must not mistake
    /// its replacement's poll for its own.
    pub(crate) generation: u64,
    /// Pauses the invocation's Lua call (`Scheduling::preemption`): rung by the watchdog
    /// once the poll has outrun its slice.
    pub(crate) pause: Option<ferry_func::Bell>,
}

struct Queue {
    /// Waiting tasks, handed out fairly between the tenants homed here.
    tasks: Mutex<FairQueue<Task>>,
    /// Mirror of `tasks.len()` readable without the lock (stealing, sleeping checks).
    len: AtomicUsize,
    /// How many of the queued tasks are invocations (ASFP's "new tasks arriving").
    invokes: AtomicUsize,
}

/// Whether a task runs a storage function (ASFP counts queued invocations as new work).
fn is_invoke(task: &Task) -> bool {
    match &task.work {
        Work::Request { request, .. } => matches!(request, Request::Invoke { .. }),
        Work::Resp(job) => job.has_functions(),
    }
}

/// Per-worker state other threads need to see.
pub(crate) struct Slot {
    /// The thread to unpark; replaced when the watchdog replaces the worker.
    thread: Mutex<Option<Thread>>,
    /// True while parked (or about to park).
    sleeping: AtomicBool,
    /// Held by whichever thread executes for this worker: the worker itself while awake,
    /// or an I/O thread running a data operation inline while the worker sleeps. At most
    /// one thread per worker executes at a time, so `cores` stays the node's parallelism.
    seat: AtomicBool,
    /// Bumped when the watchdog replaces the worker: the old thread exits when it sees it.
    pub(crate) generation: AtomicU64,
    /// Suspended invocations, resumed round-robin. Shared so a replacement adopts them.
    pub(crate) running: Mutex<VecDeque<Invocation>>,
    /// The invocation being polled, if any.
    pub(crate) current: Mutex<Option<CurrentPoll>>,
    /// Counters.
    pub(crate) counters: WorkerCounters,
}

/// The workers' queues and shared state.
pub(crate) struct Pool {
    queues: Box<[Queue]>,
    pub(crate) slots: Box<[Slot]>,
    capacity: usize,
    scheduling: Scheduling,
    shutdown: AtomicBool,
    /// Workers currently parked.
    idle: AtomicUsize,
    /// The watchdog thread, to wake when a pausable poll starts while it sleeps long.
    watchdog: Mutex<Option<Thread>>,
    /// The watchdog sleeps its long period (no pausable poll seen for a while).
    watchdog_idle: AtomicBool,
    /// Node-clock time (ns) of the earliest pause asked for by another tenant's work
    /// (`u64::MAX`: none): the watchdog wakes for it rather than at its next look.
    pause_at_ns: AtomicU64,
}

impl Pool {
    pub(crate) fn new(workers: usize, capacity: usize, scheduling: Scheduling) -> Pool {
        Pool {
            queues: (0..workers)
                .map(|_| Queue {
                    tasks: Mutex::new(FairQueue::new()),
                    len: AtomicUsize::new(0),
                    invokes: AtomicUsize::new(0),
                })
                .collect(),
            slots: (0..workers)
                .map(|_| Slot {
                    thread: Mutex::new(None),
                    sleeping: AtomicBool::new(false),
                    seat: AtomicBool::new(false),
                    generation: AtomicU64::new(0),
                    running: Mutex::new(VecDeque::new()),
                    current: Mutex::new(None),
                    counters: WorkerCounters::default(),
                })
                .collect(),
            capacity,
            scheduling,
            shutdown: AtomicBool::new(false),
            idle: AtomicUsize::new(0),
            watchdog: Mutex::new(None),
            watchdog_idle: AtomicBool::new(false),
            pause_at_ns: AtomicU64::new(u64::MAX),
        }
    }

    /// The scheduling mechanisms in force.
    pub(crate) fn scheduling(&self) -> Scheduling {
        self.scheduling
    }

    /// A poll of a pausable Lua call started: the watchdog, if it sleeps its long period,
    /// wakes to look once per slice again.
    pub(crate) fn poll_started(&self) {
        if self.watchdog_idle.swap(false, Ordering::SeqCst) {
            if let Some(thread) = self.watchdog.lock().as_ref() {
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
    pub(crate) fn pause_for(&self, index: usize, tenant: u32, now_ns: u64, slice_ns: u64) {
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
        if self.pause_at_ns.fetch_min(ends_ns, Ordering::SeqCst) > ends_ns {
            if let Some(thread) = self.watchdog.lock().as_ref() {
                thread.unpark();
            }
        }
    }

    /// Number of workers.
    pub(crate) fn workers(&self) -> usize {
        self.queues.len()
    }

    /// Tasks waiting in worker `index`'s queue.
    pub(crate) fn queue_len(&self, index: usize) -> usize {
        self.queues[index].len.load(Ordering::SeqCst)
    }

    /// Charges `ns` of CPU to `tenant` in the fair queue of its home worker `home`.
    pub(crate) fn charge(&self, home: usize, tenant: u32, ns: u64) {
        if self.scheduling.fair_queueing {
            self.queues[home].tasks.lock().charge(tenant, ns);
        }
    }

    /// Invocations waiting in worker `index`'s queue.
    pub(crate) fn queued_invokes(&self, index: usize) -> usize {
        self.queues[index].invokes.load(Ordering::SeqCst)
    }

    /// Queues `task` on worker `home`; gives it back (boxed: the refusal path only) when
    /// that queue is full.
    pub(crate) fn submit(&self, home: usize, task: Task) -> Result<(), Box<Task>> {
        let queue = &self.queues[home];
        {
            let mut tasks = queue.tasks.lock();
            if tasks.len() >= self.capacity {
                return Err(Box::new(task));
            }
            if is_invoke(&task) {
                queue.invokes.fetch_add(1, Ordering::SeqCst);
            }
            // Without fair queueing every task shares one lane: arrival order.
            let lane = if self.scheduling.fair_queueing {
                task.tenant.id
            } else {
                0
            };
            tasks.push(lane, task);
            queue.len.fetch_add(1, Ordering::SeqCst);
        }
        // `swap` so that of many submitters only the first pays for the wake-up system call;
        // the rest see the worker already woken.
        if self.slots[home].sleeping.swap(false, Ordering::SeqCst) {
            self.unpark(home);
        } else if self.scheduling.work_stealing && self.idle.load(Ordering::SeqCst) > 0 {
            // The home worker is busy: wake an idle one to steal (work conservation).
            if let Some(other) =
                (0..self.workers()).find(|&i| i != home && self.slots[i].sleeping.swap(false, Ordering::SeqCst))
            {
                self.unpark(other);
            }
        }
        Ok(())
    }

    /// Takes worker `index`'s seat for an inline execution if the worker sleeps with an
    /// empty queue (so nothing queued is overtaken). Release with [`Pool::release_seat`].
    pub(crate) fn try_take_seat(&self, index: usize) -> bool {
        let slot = &self.slots[index];
        self.queue_len(index) == 0
            && slot.sleeping.load(Ordering::SeqCst)
            && slot
                .seat
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
    }

    /// Gives back a seat taken with [`Pool::try_take_seat`].
    pub(crate) fn release_seat(&self, index: usize) {
        self.slots[index].seat.store(false, Ordering::SeqCst);
    }

    fn unpark(&self, index: usize) {
        if let Some(thread) = self.slots[index].thread.lock().as_ref() {
            thread.unpark();
        }
    }

    pub(crate) fn pop(&self, index: usize) -> Option<Task> {
        let queue = &self.queues[index];
        if queue.len.load(Ordering::SeqCst) == 0 {
            return None;
        }
        let mut tasks = queue.tasks.lock();
        let task = tasks.pop();
        if let Some(task) = &task {
            queue.len.fetch_sub(1, Ordering::SeqCst);
            if is_invoke(task) {
                queue.invokes.fetch_sub(1, Ordering::SeqCst);
            }
        }
        task
    }

    /// The next task for worker `index`: its own queue first, else the oldest task of the
    /// longest other queue. The flag says whether it was stolen.
    fn next_task(&self, index: usize) -> Option<(Task, bool)> {
        if let Some(task) = self.pop(index) {
            return Some((task, false));
        }
        if !self.scheduling.work_stealing {
            return None;
        }
        let victim = (0..self.workers())
            .filter(|&i| i != index)
            .max_by_key(|&i| self.queues[i].len.load(Ordering::SeqCst))?;
        self.pop(victim).map(|task| (task, true))
    }

    /// Whether worker `index` has a task it may take: anywhere when it may steal.
    fn any_runnable(&self, index: usize) -> bool {
        if self.scheduling.work_stealing {
            self.any_queued()
        } else {
            self.queue_len(index) > 0
        }
    }

    fn any_queued(&self) -> bool {
        self.queues.iter().any(|queue| queue.len.load(Ordering::SeqCst) > 0)
    }

    /// Asks every worker to finish what is queued and exit.
    pub(crate) fn begin_shutdown(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
        for index in 0..self.workers() {
            self.unpark(index);
        }
        if let Some(thread) = self.watchdog.lock().as_ref() {
            thread.unpark();
        }
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }
}

/// Hands `task` to its tenant's home worker. A task that runs no storage function is run
/// right here, in that worker's seat, when the worker sleeps with nothing queued: it is
/// charged exactly as the worker would charge it (the tenant's CPU, its fair-queue share,
/// the worker's busy time) and saves a hand-off. Gives the task back when the queue is
/// full.
pub(crate) fn dispatch(node: &Node, task: Task) -> Result<(), Box<Task>> {
    let home = task.tenant.home;
    if node.inline_data_ops && !is_invoke(&task) && node.pool.try_take_seat(home) {
        // Data operations are bounded (microseconds), so running them here cannot stall
        // this thread's other connections the way a storage function could.
        TenantCounters::bump(&node.pool.slots[home].counters.tasks_inline);
        exec::execute(node, home, task);
        node.pool.release_seat(home);
        return Ok(());
    }
    let tenant = task.tenant.id;
    node.pool.submit(home, task)?;
    // New work waits behind the home worker's poll: another tenant's Lua call there is
    // paused at its slice's end, not at the watchdog's next look.
    node.pool
        .pause_for(home, tenant, node.now_ns(), node.poll_slice.as_nanos() as u64);
    Ok(())
}

/// Starts the thread of worker `index` at the slot's current generation.
pub(crate) fn spawn_worker(node: Arc<Node>, index: usize) -> std::io::Result<JoinHandle<()>> {
    let generation = node.pool.slots[index].generation.load(Ordering::SeqCst);
    let slot_node = Arc::clone(&node);
    let handle = thread::Builder::new()
        .name(format!("{WORKER_THREAD_PREFIX}{index}"))
        .spawn(move || worker_loop(&slot_node, index, generation))?;
    *node.pool.slots[index].thread.lock() = Some(handle.thread().clone());
    Ok(handle)
}

fn worker_loop(node: &Node, index: usize, generation: u64) {
    let pool = &node.pool;
    let slot = &pool.slots[index];
    take_seat(slot);
    loop {
        if slot.generation.load(Ordering::SeqCst) != generation {
            return;
        }
        let mut worked = false;

        let (resumed, running) = {
            let mut running = slot.running.lock();
            (running.pop_front(), running.len())
        };
        if let Some(invocation) = resumed {
            worked = true;
            match exec::step(node, index, invocation) {
                exec::Stepped::Suspended(invocation) => slot.running.lock().push_back(invocation),
                exec::Stepped::Finished => {}
                exec::Stepped::Abandoned => return,
            }
        }

        if running < MAX_RUNNING_PER_WORKER {
            if let Some((task, stolen)) = pool.next_task(index) {
                worked = true;
                let counter = if stolen {
                    &slot.counters.tasks_stolen
                } else {
                    &slot.counters.tasks_own
                };
                TenantCounters::bump(counter);
                match exec::execute(node, index, task) {
                    Some(exec::Stepped::Suspended(invocation)) => slot.running.lock().push_back(invocation),
                    Some(exec::Stepped::Abandoned) => return,
                    Some(exec::Stepped::Finished) | None => {}
                }
            }
        }

        if !worked {
            if pool.is_shutting_down() && !pool.any_queued() && slot.running.lock().is_empty() {
                return;
            }
            park(pool, index, slot);
        }
    }
}

/// Waits until no I/O thread is executing inline for this worker, then holds the seat.
fn take_seat(slot: &Slot) {
    while slot.seat.swap(true, Ordering::SeqCst) {
        thread::yield_now();
    }
}

fn park(pool: &Pool, index: usize, slot: &Slot) {
    slot.seat.store(false, Ordering::SeqCst);
    slot.sleeping.store(true, Ordering::SeqCst);
    pool.idle.fetch_add(1, Ordering::SeqCst);
    // Re-check after announcing sleep: a submitter that pushed before seeing `sleeping`
    // left its task in a queue we can now see (SeqCst on both sides).
    if !pool.any_runnable(index) && !pool.is_shutting_down() {
        thread::park_timeout(IDLE_PARK);
    }
    pool.idle.fetch_sub(1, Ordering::SeqCst);
    slot.sleeping.store(false, Ordering::SeqCst);
    take_seat(slot);
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
    *pool_node.pool.watchdog.lock() = Some(handle.thread().clone());
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
    let preempting = pool.scheduling.preemption;
    let mut quiet_looks = PAUSE_LOOKS_BEFORE_IDLE;
    while !pool.is_shutting_down() {
        if preempting && quiet_looks < PAUSE_LOOKS_BEFORE_IDLE {
            // Until the next look, or a pause another tenant's work asked for, if sooner.
            let asked_ns = pool.pause_at_ns.load(Ordering::SeqCst);
            let until_asked = Duration::from_nanos(asked_ns.saturating_sub(node.now_ns()));
            thread::park_timeout(until_asked.min(PAUSE_LOOK_PERIOD));
        } else {
            // Announce the long sleep before looking at the polls once more, so a poll
            // that starts in between wakes it (SeqCst on both sides).
            pool.watchdog_idle.store(true, Ordering::SeqCst);
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
            pool.watchdog_idle.store(false, Ordering::SeqCst);
        }
        let now = node.now_ns();
        // The pauses asked for by now are rung below; a later one stays asked.
        let _ = pool
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
    // The stuck thread sees the new generation (or the emptied `current`) and exits
    // without touching the seat, which passes to its replacement.
    slot.generation.fetch_add(1, Ordering::SeqCst);
    slot.seat.store(false, Ordering::SeqCst);
    let replaced = node.counters.worker_replacements.fetch_add(1, Ordering::SeqCst);
    if replaced >= MAX_WORKER_REPLACEMENTS {
        tracing::error!(
            worker = index,
            "worker stuck in a runaway function and the replacement limit ({MAX_WORKER_REPLACEMENTS}) is reached; \
             other workers will steal its queue"
        );
        *slot.thread.lock() = None;
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
