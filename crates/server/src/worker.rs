//! The cores: one thread per core, each a loop that owns connections and a bounded
//! queue, with work stealing between them.
//!
//! A core's thread runs a single-threaded async runtime: the connections placed on it
//! (`Pool::runtime_for_connection`: the RESP default tenant's home, else in turn) are
//! read, executed and answered on it, and its worker loop (a task of the same runtime)
//! runs what was queued for it and resumes its suspended invocations. A request of a
//! tenant homed on the connection's core runs right there, inline, when the core's queue
//! is empty (so nothing queued is overtaken): no thread hand-off, no wait for an answer
//! ([`dispatch`]). Anything else is queued on the tenant's home core, and counted as
//! handed across threads when it came from another thread.
//!
//! Every tenant has a home core whose queue receives all its requests (Kayak's static
//! pin-request-to-core allocation, which makes per-tenant CPU shares enforceable). A core
//! with nothing in its own queue and no suspended invocation steals the oldest task from
//! the longest other queue (ZygOS-style, from every other core), so no core idles while
//! work waits anywhere: the node is work-conserving. Pauses of Lua calls and the
//! replacement of a stuck core are the `watchdog`'s.

use ferry_proto::TenantId;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::runtime::Handle;
use tokio::sync::Notify;

use ferry_proto::{Opcode, Request};

use crate::config::Scheduling;
use crate::conn::Answer;
use crate::exec;
use crate::fair::FairQueue;
use crate::invocation::{self, Invocation};
use crate::node::{Node, TenantState};
use crate::stats::TenantCounters;
use crate::stats::WorkerCounters;
use crate::watchdog::Pauses;

/// Most invocations one core (or native worker) keeps suspended at a time. Past it the
/// node answers its new work `overloaded` until some finish: memory stays bounded however
/// many invocations arrive.
pub const MAX_RUNNING_PER_WORKER: usize = 1024;

/// Longest an idle worker loop sleeps before looking at the queues again: a safety net
/// under the explicit wake-ups, short enough that a missed one costs little.
const IDLE_PARK: Duration = Duration::from_millis(5);

/// Most core threads the watchdog replaces over the node's life. Each replaced thread
/// may still be spinning, so past this the node stops adding threads and lets the other
/// cores steal the stuck core's queue.
pub const MAX_WORKER_REPLACEMENTS: u64 = 64;

/// Longest a core waits, once the node is stopping and its queue is done, for the
/// connections it owns to close (they close on the shutdown signal after their last
/// reply; one whose client does not read is dropped).
const CONNECTIONS_CLOSE_GRACE: Duration = Duration::from_secs(5);

/// Name prefix of core threads (the panic hook recognises them by it).
pub(crate) const WORKER_THREAD_PREFIX: &str = "ferry-worker-";

thread_local! {
    /// The core this thread is (its index and the generation it runs), if it is one.
    static THIS_CORE: Cell<Option<(usize, u64)>> = const { Cell::new(None) };
}

/// Work waiting for a worker, for one tenant.
pub(crate) struct Task {
    /// Who asked.
    pub(crate) tenant: Arc<TenantState>,
    /// When its connection received it (latency is measured from here).
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
    /// A turn of work that runs in a task of the core's own (a RESP connection's commands,
    /// a cycle of expiry), granted when the fair queue comes to the tenant's lane.
    Turn {
        turn: Arc<crate::turn::Turn>,
        /// The work calls storage functions (an arriving invocation, to ASFP).
        functions: bool,
    },
    /// An invocation paused or suspended at an access, waiting in its tenant's lane for its
    /// next step: the core serves other tenants' lanes meanwhile, by their CPU time.
    Resume(Invocation),
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
        Work::Turn { functions, .. } => *functions,
        // Old work, not an arrival.
        Work::Resume(_) => false,
    }
}

/// Per-worker state other threads need to see.
pub(crate) struct Slot {
    /// The core loop's runtime, where connections placed on this core run; replaced
    /// with the thread when the watchdog replaces the core.
    pub(crate) runtime: Mutex<Option<Handle>>,
    /// Wakes the worker loop (new work, a suspended invocation to resume, shutdown).
    wake: Notify,
    /// True while the worker loop sleeps (or is about to).
    sleeping: AtomicBool,
    /// Bumped when the watchdog replaces the worker: the old thread exits when it sees it.
    pub(crate) generation: AtomicU64,
    /// Invocations waiting in this queue for their next step (`Work::Resume`).
    pub(crate) suspended: AtomicUsize,
    /// The invocation being polled, if any.
    pub(crate) current: Mutex<Option<CurrentPoll>>,
    /// Counters.
    pub(crate) counters: WorkerCounters,
}

impl Slot {
    /// Takes the core's idleness for a turn run inline, if its worker loop sleeps: from
    /// now on the core is busy, and work arriving meanwhile queues.
    pub(crate) fn take_idleness(&self) -> bool {
        self.sleeping.swap(false, Ordering::SeqCst)
    }

    /// The worker loop's wake-up.
    pub(crate) fn wake(&self) -> &Notify {
        &self.wake
    }
}

/// The workers' queues and shared state.
pub(crate) struct Pool {
    /// Slots `0..cores` are the cores; `cores..2 * cores` the native workers, worker
    /// `cores + i` beside core `i`.
    cores: usize,
    queues: Box<[Queue]>,
    pub(crate) slots: Box<[Slot]>,
    capacity: usize,
    scheduling: Scheduling,
    shutdown: AtomicBool,
    /// Workers currently parked.
    idle: AtomicUsize,
    /// What the cores and the watchdog share about pausing Lua calls.
    pub(crate) pauses: Pauses,
    /// The next core a connection is placed on when it has no preferred one.
    next_placement: AtomicUsize,
}

impl Pool {
    /// A pool of `cores` cores and as many native workers.
    pub(crate) fn new(cores: usize, capacity: usize, scheduling: Scheduling) -> Pool {
        let workers = 2 * cores;
        Pool {
            cores,
            queues: (0..workers)
                .map(|_| Queue {
                    tasks: Mutex::new(FairQueue::new()),
                    len: AtomicUsize::new(0),
                    invokes: AtomicUsize::new(0),
                })
                .collect(),
            slots: (0..workers)
                .map(|_| Slot {
                    runtime: Mutex::new(None),
                    wake: Notify::new(),
                    sleeping: AtomicBool::new(false),
                    generation: AtomicU64::new(0),
                    suspended: AtomicUsize::new(0),
                    current: Mutex::new(None),
                    counters: WorkerCounters::default(),
                })
                .collect(),
            capacity,
            scheduling,
            shutdown: AtomicBool::new(false),
            idle: AtomicUsize::new(0),
            pauses: Pauses::new(),
            next_placement: AtomicUsize::new(0),
        }
    }

    /// The scheduling mechanisms in force.
    pub(crate) fn scheduling(&self) -> Scheduling {
        self.scheduling
    }

    /// Number of cores (as many native workers run beside them).
    pub(crate) fn cores(&self) -> usize {
        self.cores
    }

    /// The native worker beside core `home`: it runs the functions that may hold a
    /// thread (`Registry::bounded` false), so a spinning one stalls no connection.
    pub(crate) fn native_worker(&self, home: usize) -> usize {
        self.cores + home
    }

    /// The workers `index` shares stealing with: the cores, or the native workers.
    fn group(&self, index: usize) -> std::ops::Range<usize> {
        if index < self.cores {
            0..self.cores
        } else {
            self.cores..self.workers()
        }
    }

    /// Where `tenant`'s share is kept for work run by worker `worker`: the tenant's home
    /// core, or the native worker beside it.
    pub(crate) fn home_in_group(&self, worker: usize, home: usize) -> usize {
        if worker < self.cores {
            home
        } else {
            self.native_worker(home)
        }
    }

    /// Number of cores and native workers.
    pub(crate) fn workers(&self) -> usize {
        self.queues.len()
    }

    /// Tasks waiting in worker `index`'s queue.
    pub(crate) fn queue_len(&self, index: usize) -> usize {
        self.queues[index].len.load(Ordering::SeqCst)
    }

    /// Charges `ns` of CPU to `tenant` in the fair queue of its home worker `home`.
    pub(crate) fn charge(&self, home: usize, tenant: TenantId, ns: u64) {
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
            let suspended = self.slots[home].suspended.load(Ordering::SeqCst);
            if tasks.len() >= self.capacity || suspended >= MAX_RUNNING_PER_WORKER {
                return Err(Box::new(task));
            }
            if is_invoke(&task) {
                queue.invokes.fetch_add(1, Ordering::SeqCst);
            }
            // Without fair queueing every task shares one lane: arrival order.
            let lane = if self.scheduling.fair_queueing {
                task.tenant.id
            } else {
                TenantId(0)
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
            if let Some(other) = self
                .group(home)
                .find(|&i| i != home && self.slots[i].sleeping.swap(false, Ordering::SeqCst))
            {
                self.unpark(other);
            }
        }
        Ok(())
    }

    /// Puts a suspended invocation back in its tenant's lane of worker `index`'s queue, to
    /// be stepped again when the fair queue comes to it (never refused: it was admitted).
    pub(crate) fn requeue(&self, index: usize, invocation: Invocation) {
        let lane = if self.scheduling.fair_queueing {
            invocation.tenant.id
        } else {
            TenantId(0)
        };
        let task = Task {
            tenant: Arc::clone(&invocation.tenant),
            received: invocation.received,
            work: Work::Resume(invocation),
        };
        let queue = &self.queues[index];
        self.slots[index].suspended.fetch_add(1, Ordering::SeqCst);
        queue.tasks.lock().push(lane, task);
        queue.len.fetch_add(1, Ordering::SeqCst);
    }

    /// The runtime a new connection runs on: core `preferred`'s (the home of the tenant
    /// it will most likely sign in as), else the next core in turn; `None` if that core
    /// has no thread (its replacements ran out).
    pub(crate) fn runtime_for_connection(&self, preferred: Option<usize>) -> Option<Handle> {
        let index = preferred.unwrap_or_else(|| self.next_placement.fetch_add(1, Ordering::Relaxed) % self.cores);
        self.slots[..self.cores].get(index)?.runtime.lock().clone()
    }

    /// The core the calling thread is (of its current generation), if it is one.
    pub(crate) fn this_core(&self) -> Option<usize> {
        let (core, _) = THIS_CORE.get()?;
        (core < self.cores && self.on_core(core)).then_some(core)
    }

    /// Whether the calling thread is core `index` (of its current generation).
    pub(crate) fn on_core(&self, index: usize) -> bool {
        THIS_CORE.get().is_some_and(|(core, generation)| {
            core == index && self.slots[index].generation.load(Ordering::SeqCst) == generation
        })
    }

    fn unpark(&self, index: usize) {
        self.slots[index].wake.notify_one();
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
            if matches!(task.work, Work::Resume(_)) {
                self.slots[index].suspended.fetch_sub(1, Ordering::SeqCst);
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
        let victim = self
            .group(index)
            .filter(|&i| i != index)
            .max_by_key(|&i| self.queues[i].len.load(Ordering::SeqCst))?;
        self.pop(victim).map(|task| (task, true))
    }

    /// Whether worker `index` has a task it may take: anywhere in its group when it may
    /// steal.
    fn any_runnable(&self, index: usize) -> bool {
        if self.scheduling.work_stealing {
            self.group(index).any(|i| self.queue_len(i) > 0)
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
        self.pauses.wake();
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }
}

/// Runs `task` on its tenant's home core: right here, inline, when this thread is that
/// core and the core is idle (its worker loop sleeps with nothing queued), else queued in
/// the tenant's lane there. Running inline takes the core's idleness for the turn (the
/// worker loop is woken, and the tasks its connections dispatch meanwhile queue in their
/// lanes), so a busy core serves its tenants by fair queueing, and an idle one answers
/// without a queue or a wait. An invocation that does not finish in its first step is
/// resumed by the worker loop. An invocation of a native function that may hold its
/// thread (`Registry::bounded` false) goes to the native worker beside the home core
/// instead: the watchdog may replace that thread, and no connection waits on it. A task
/// queued from another thread counts as handed across threads. Gives the task back when
/// the queue is full.
pub(crate) fn dispatch(node: &Node, task: Task) -> Result<(), Box<Task>> {
    let pool = &node.pool;
    let home = match &task.work {
        Work::Request {
            request: Request::Invoke { function, .. },
            ..
        } if !node.registry.bounded(function) => pool.native_worker(task.tenant.home),
        _ => task.tenant.home,
    };
    let slot = &pool.slots[home];
    let on_home = pool.on_core(home);
    if on_home && node.inline_data_ops && pool.queue_len(home) == 0 && slot.sleeping.swap(false, Ordering::SeqCst) {
        TenantCounters::bump(&slot.counters.tasks_inline);
        if let Some(invocation::Stepped::Suspended(invocation)) = exec::execute(node, home, task) {
            pool.requeue(home, invocation);
        }
        // `Abandoned`: the watchdog replaced this core while the task ran; its worker
        // loop exits at its next turn.
        slot.wake.notify_one();
        return Ok(());
    }
    let tenant = task.tenant.id;
    pool.submit(home, task)?;
    if !on_home {
        TenantCounters::bump(&slot.counters.tasks_handed);
    }
    // New work waits behind the home core's poll: another tenant's Lua call there is
    // paused at its slice's end, not at the watchdog's next look.
    pool.pause_for(home, tenant, node.now_ns(), node.poll_slice.as_nanos() as u64);
    Ok(())
}

/// Starts the thread of core `index` at the slot's current generation: its runtime, and
/// its worker loop as a task of it (so the core's connections wake it without a system
/// call).
pub(crate) fn spawn_worker(node: Arc<Node>, index: usize) -> std::io::Result<JoinHandle<()>> {
    let generation = node.pool.slots[index].generation.load(Ordering::SeqCst);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    *node.pool.slots[index].runtime.lock() = Some(runtime.handle().clone());
    thread::Builder::new()
        .name(format!("{WORKER_THREAD_PREFIX}{index}"))
        .spawn(move || {
            THIS_CORE.set(Some((index, generation)));
            let _ = runtime.block_on(async move {
                if index < node.pool.cores() {
                    tokio::spawn(crate::expiry::run(Arc::clone(&node), index));
                }
                tokio::spawn(worker_loop(node, index, generation)).await
            });
            // Dropping the runtime ends the connections still on it (a replaced core's).
        })
}

async fn worker_loop(node: Arc<Node>, index: usize, generation: u64) {
    let node = &*node;
    let pool = &node.pool;
    let slot = &pool.slots[index];
    let mut stopping_since: Option<Instant> = None;
    let mut io = crate::io_cadence::IoCadence::new(node.poll_slice, Instant::now());
    loop {
        if slot.generation.load(Ordering::SeqCst) != generation {
            return;
        }
        let mut worked = false;
        let batch_started = Instant::now();
        while let Some((task, stolen)) = pool.next_task(index) {
            worked = true;
            let counter = if stolen {
                &slot.counters.tasks_stolen
            } else {
                &slot.counters.tasks_own
            };
            TenantCounters::bump(counter);
            let turn = matches!(task.work, Work::Turn { .. });
            let finished = match exec::execute(node, index, task) {
                Some(invocation::Stepped::Suspended(invocation)) => {
                    pool.requeue(index, invocation);
                    false
                }
                Some(invocation::Stepped::Abandoned) => return,
                Some(invocation::Stepped::Finished) | None => true,
            };
            // The core's connections run between batches of its tasks, as Redis writes
            // its replies before it sleeps: a batch of short tasks ends when the queue is
            // empty or it has run a slice, so the answers it made leave in few writes. A
            // granted turn (its task runs next) or a call left running ends it at once.
            if turn || !finished || batch_started.elapsed() >= node.poll_slice {
                break;
            }
        }

        if worked {
            io.yield_now().await;
            continue;
        }
        if pool.is_shutting_down() && !pool.any_queued() {
            let since = *stopping_since.get_or_insert_with(Instant::now);
            let open = node.connections.counters.open.load(Ordering::SeqCst);
            if open == 0 || since.elapsed() >= CONNECTIONS_CLOSE_GRACE {
                return;
            }
        }
        park(pool, index, slot).await;
    }
}

async fn park(pool: &Pool, index: usize, slot: &Slot) {
    slot.sleeping.store(true, Ordering::SeqCst);
    pool.idle.fetch_add(1, Ordering::SeqCst);
    // Re-check after announcing sleep: a submitter that pushed before seeing `sleeping`
    // left its task in a queue we can now see (SeqCst on both sides). A wake-up sent
    // meanwhile is kept by the `Notify` and ends the wait at once.
    let nothing_to_do = !pool.any_runnable(index);
    if nothing_to_do && !pool.is_shutting_down() {
        let _ = tokio::time::timeout(IDLE_PARK, slot.wake.notified()).await;
    } else if nothing_to_do {
        // Stopping: wait for the core's connections to close, a little at a time.
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    pool.idle.fetch_sub(1, Ordering::SeqCst);
    slot.sleeping.store(false, Ordering::SeqCst);
}
