//! Server-side invocations, step by step: an attempt of the function against a fresh
//! `StoreCtx` polled in slices, its commit, retries on conflict, ASFP pushback, and the
//! answer.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use bytes::Bytes;

use ferry_func::{CtxError, FnError, StorageFn};
use ferry_proto::{Opcode, PushbackState, Response, ResponseBody, Snapshot, Status, MAX_BODY_BYTES};
use ferry_store::StoreError;

use crate::conn::Answer;
use crate::exec::{answer, charge_cpu, store_error};
use crate::node::{Node, TenantState};
use crate::routing::ClusterRole;
use crate::stats::TenantCounters;
use crate::store_ctx::{object_refs, write_refs, SharedAttempt, StoreCtx};
use crate::worker::CurrentPoll;

/// Attempts of one server-side invocation before it is answered `tx_abort`: conflicts are
/// retried immediately on the node, where a retry costs no round trip, but a hot spot must
/// not make one request retry forever.
pub const MAX_SERVER_ATTEMPTS: u32 = 8;

/// Wall-clock time an invocation may stay unfinished, as a multiple of its CPU budget. Its
/// CPU budget only counts time spent in polls; this catches a function awaiting something
/// that never completes.
pub const WALL_DEADLINE_BUDGETS: u64 = 10;

type AttemptFuture = Pin<Box<dyn Future<Output = (StoreCtx, Result<Bytes, FnError>)> + Send>>;

/// A server-side invocation in progress.
pub(crate) struct Invocation {
    outbox: Arc<dyn Answer>,
    pub(crate) tenant: Arc<TenantState>,
    request_id: u64,
    /// The function's registered name (per-function statistics are kept by name).
    name: String,
    function: StorageFn,
    args: Bytes,
    /// The current attempt: the function running against a fresh `StoreCtx`.
    attempt: AttemptFuture,
    /// The current attempt's transaction state and profile, shared with its `StoreCtx`.
    state: SharedAttempt,
    /// The client accepts a pushback answer (ASFP).
    allow_pushback: bool,
    /// The client wants the versions read and installed with the result.
    trace: bool,
    /// The client finishes the invocation if it reaches another cluster node's key.
    handoff: bool,
    /// The node's place in a cluster, for the attempts' key checks.
    cluster: Option<Arc<ClusterRole>>,
    /// Attempts started so far.
    attempts: u32,
    /// Worker time spent on all attempts, ns.
    cpu_ns: u64,
    /// When the request was decoded (its latency is measured from here).
    pub(crate) received: Instant,
    /// Node clock time after which the invocation is failed.
    deadline_ns: u64,
    /// Its registration among the tenant's running Lua calls (FUNCTION KILL, SCRIPT KILL
    /// stop it through its interrupt), for as long as it lives.
    running: Option<ferry_lua::kill::Running>,
    /// Its attempts' calls may be paused at the end of a slice (`Scheduling::preemption`).
    preemptible: bool,
}

/// What became of an invocation after one step.
pub(crate) enum Stepped {
    /// It yielded; resume it later.
    Suspended(Invocation),
    /// It was answered.
    Finished,
    /// The watchdog answered for it and replaced this thread, which must exit.
    Abandoned,
}

fn start_attempt(
    tenant: Arc<TenantState>,
    cluster: Option<Arc<ClusterRole>>,
    handoff: bool,
    function: StorageFn,
    args: Bytes,
    interrupt: Option<ferry_func::Interrupt>,
    preemptible: bool,
) -> (AttemptFuture, SharedAttempt) {
    // The attempt's snapshot starts now (TL2): every read is checked against it alone.
    let state = SharedAttempt::default();
    state.lock().read_version = tenant.store.read_version();
    let ctx_state = Arc::clone(&state);
    let future = Box::pin(async move {
        let mut ctx = StoreCtx::new(tenant, cluster, handoff, args, ctx_state)
            .with_interrupt(interrupt)
            .preemptible(preemptible);
        let result = function(&mut ctx).await;
        (ctx, result)
    });
    (future, state)
}

/// An invocation as it is asked for, before its first attempt.
pub(crate) struct Call {
    /// Where the answer goes.
    pub(crate) outbox: Arc<dyn Answer>,
    pub(crate) request_id: u64,
    /// When it was received (its latency is measured from here).
    pub(crate) received: Instant,
    /// The registered name of the function.
    pub(crate) name: String,
    pub(crate) args: Bytes,
    pub(crate) allow_pushback: bool,
    pub(crate) trace: bool,
    pub(crate) handoff: bool,
}

/// Starts an invocation and takes its first step; `None` once it is answered (an unknown
/// function is answered at once), else what the step left.
pub(crate) fn start(node: &Node, worker: usize, tenant: Arc<TenantState>, call: Call) -> Option<Stepped> {
    let Some(function) = node.registry.get(&call.name) else {
        answer(
            call.outbox.as_ref(),
            &tenant,
            Opcode::Invoke,
            call.request_id,
            call.received,
            &Response::error(Status::UnknownFunction, format!("no function named {:?}", call.name)),
        );
        return None;
    };
    let running = ferry_lua::kill::CallKind::of(&call.name).map(|kind| tenant.calls.start(kind));
    let (attempt, state) = start_attempt(
        Arc::clone(&tenant),
        node.cluster.clone(),
        call.handoff,
        function,
        call.args.clone(),
        running.as_ref().map(|running| running.interrupt().clone()),
        node.pool.scheduling().preemption,
    );
    let invocation = Invocation {
        preemptible: node.pool.scheduling().preemption,
        attempt,
        state,
        allow_pushback: call.allow_pushback,
        trace: call.trace,
        handoff: call.handoff,
        cluster: node.cluster.clone(),
        outbox: call.outbox,
        tenant,
        request_id: call.request_id,
        name: call.name,
        function,
        args: call.args,
        attempts: 1,
        cpu_ns: 0,
        received: call.received,
        deadline_ns: node.now_ns() + node.invoke_budget_ns * WALL_DEADLINE_BUDGETS,
        running,
    };
    Some(step(node, worker, invocation))
}

/// Polls an invocation once and deals with the outcome.
pub(crate) fn step(node: &Node, worker: usize, mut invocation: Invocation) -> Stepped {
    let slot = &node.pool.slots[worker];
    let generation = slot.generation.load(std::sync::atomic::Ordering::SeqCst);
    let started_ns = node.now_ns();
    *slot.current.lock() = Some(CurrentPoll {
        outbox: Arc::clone(&invocation.outbox),
        tenant: Arc::clone(&invocation.tenant),
        request_id: invocation.request_id,
        started_ns,
        generation,
        pause: invocation.preemptible.then(|| invocation.state.lock().bell.clone()),
    });
    if invocation.preemptible {
        node.pool.poll_started();
        // A call that outran a slice before, or of a function whose calls outrun one on
        // average, will likely outrun this one: it is paused at the slice's end, not at the
        // watchdog's next look. Short calls ask nothing (a wake-up per slice costs them).
        let slice_ns = node.poll_slice.as_nanos() as u64;
        let long = invocation.cpu_ns > 0
            || invocation
                .tenant
                .functions
                .cpu_ns_mean(&invocation.name)
                .is_some_and(|mean| mean > slice_ns);
        if long {
            node.pool.pause_at_slice_end(started_ns, slice_ns);
        }
    }
    let started = Instant::now();
    {
        let mut state = invocation.state.lock();
        state.slice_ends = Some(started + node.poll_slice);
        let cpu_left_ns = node.invoke_budget_ns.saturating_sub(invocation.cpu_ns);
        state.cpu_ends = Some(started + std::time::Duration::from_nanos(cpu_left_ns));
    }
    let mut cx = Context::from_waker(Waker::noop());
    let polled = catch_unwind(AssertUnwindSafe(|| invocation.attempt.as_mut().poll(&mut cx)));
    let still_ours = {
        let mut current = slot.current.lock();
        match current.as_ref() {
            Some(poll) if poll.generation == generation => current.take(),
            _ => None,
        }
    };
    if still_ours.is_none() {
        // The watchdog declared this poll stuck and already answered for it; what is in
        // `current` now, if anything, is the replacement thread's poll.
        return Stepped::Abandoned;
    }
    let elapsed = started.elapsed().as_nanos() as u64;
    invocation.cpu_ns += elapsed;
    charge_cpu(node, worker, &invocation.tenant, elapsed);

    match polled {
        Err(payload) => fail(
            invocation,
            format!(
                "function panicked: {}",
                ferry_func::registry::panic_text(payload.as_ref())
            ),
        ),
        Ok(Poll::Pending) => {
            if invocation.cpu_ns > node.invoke_budget_ns {
                let budget_ms = node.invoke_budget_ns as f64 / 1e6;
                let error = if invocation.running.is_some() {
                    // A Lua call: Redis's words, as when its VM sees the limit at a pause.
                    crate::store_ctx::TIME_LIMIT_ERROR.to_string()
                } else {
                    format!("function exceeded its CPU budget of {budget_ms:.1} ms")
                };
                fail(invocation, error)
            } else if node.now_ns() > invocation.deadline_ns {
                fail(
                    invocation,
                    "function did not finish before its wall-clock deadline".to_string(),
                )
            } else if invocation.allow_pushback && should_push_back(node, worker, &invocation) {
                TenantCounters::bump(&invocation.tenant.counters.pushbacks);
                push_back(invocation)
            } else {
                Stepped::Suspended(invocation)
            }
        }
        Ok(Poll::Ready((ctx, result))) => complete(node, worker, invocation, ctx, result),
    }
}

/// Largest pushback answer, in bytes of values: a bigger read set is not handed back (the
/// node finishes the invocation instead), so a pushback always fits in one frame.
const MAX_PUSHBACK_VALUE_BYTES: usize = MAX_BODY_BYTES as usize / 2;

/// ASFP's decision at a yield point: the worker is overloaded and this invocation is
/// compute-bound (see `PushbackConfig`).
fn should_push_back(node: &Node, worker: usize, invocation: &Invocation) -> bool {
    let config = &node.pushback;
    // The invocation being stepped is out of the queue: `others` does not count it, the
    // old tasks do (it has outrun its slice, so it is old work itself).
    let others = node.pool.slots[worker]
        .suspended
        .load(std::sync::atomic::Ordering::SeqCst);
    let new = node.pool.queued_invokes(worker);
    let overloaded = others + 1 >= config.old_invocations_min
        && new >= config.new_invocations_min
        && others + new >= config.keep_min;
    if !overloaded {
        return false;
    }
    let state = invocation.state.lock();
    let compute_ns = invocation.cpu_ns.saturating_sub(state.access_ns);
    let credit_ns = state
        .accesses
        .saturating_mul(config.credit_per_access.as_nanos() as u64);
    let value_bytes: usize = state
        .tx
        .reads()
        .iter()
        .filter_map(|read| read.value.as_ref())
        .map(|v| v.len())
        .sum();
    compute_ns > credit_ns && value_bytes <= MAX_PUSHBACK_VALUE_BYTES
}

/// Suspends the invocation for good and hands its read set (with values, so the client
/// need not fetch them again) and write set back to the client. A read set too large for
/// one frame is left out: the client then starts over, which is correct, only slower.
fn push_back(invocation: Invocation) -> Stepped {
    let (mut reads, mut writes, read_version) = {
        let state = invocation.state.lock();
        (
            state.tx.reads_with_values(),
            state.tx.commit_writes(),
            state.read_version,
        )
    };
    // The client reads on at the snapshot the reads were made at.
    let snapshot = Some(Snapshot {
        clock: invocation.tenant.store.clock_id(),
        version: read_version,
    });
    let read_bytes: usize = reads
        .iter()
        .filter_map(|read| read.value.as_ref())
        .map(|v| v.len())
        .sum();
    let write_bytes: usize = writes
        .iter()
        .filter_map(|write| write.value.as_ref())
        .map(|v| v.len())
        .sum();
    if read_bytes + write_bytes > MAX_PUSHBACK_VALUE_BYTES {
        reads.clear();
        writes.clear();
    }
    let counters = &invocation.tenant.counters;
    counters
        .pushback_wasted_cpu_ns
        .fetch_add(invocation.cpu_ns, std::sync::atomic::Ordering::Relaxed);
    let bytes_returned: usize = reads
        .iter()
        .filter_map(|read| read.value.as_ref())
        .map(|v| v.len())
        .sum();
    let response = Response {
        status: Status::Pushback,
        cpu_ns: 0,
        bytes_returned: u32::try_from(bytes_returned).unwrap_or(u32::MAX),
        admission_rate_ops: 0,
        body: ResponseBody::Pushback(PushbackState {
            reads,
            writes,
            snapshot,
        }),
    };
    invocation.finish(response)
}

impl Invocation {
    /// Answers the invocation with `response`, charging it every attempt's CPU time.
    fn finish(self, mut response: Response) -> Stepped {
        response.cpu_ns = self.cpu_ns;
        let latency_us = self.received.elapsed().as_micros() as u64;
        self.tenant
            .functions
            .record(&self.name, response.status, self.cpu_ns, latency_us);
        answer(
            self.outbox.as_ref(),
            &self.tenant,
            Opcode::Invoke,
            self.request_id,
            self.received,
            &response,
        );
        Stepped::Finished
    }
}

fn fail(invocation: Invocation, message: String) -> Stepped {
    TenantCounters::bump(&invocation.tenant.counters.invocation_failures);
    invocation.finish(Response::error(Status::FunctionFailed, message))
}

fn complete(
    node: &Node,
    worker: usize,
    mut invocation: Invocation,
    ctx: StoreCtx,
    result: Result<Bytes, FnError>,
) -> Stepped {
    if ctx.state.lock().handed_off {
        TenantCounters::bump(&invocation.tenant.counters.handoffs);
        return push_back(invocation);
    }
    let result = match result {
        Ok(result) => result,
        Err(FnError::Ctx(CtxError::Conflict(_))) => return retry(invocation),
        Err(err) => return fail(invocation, err.to_string()),
    };
    // Every read was made at the attempt's read version, so a read-only invocation is
    // serialized there with no validation; one that wrote validates its reads once and
    // installs.
    let wrote = !ctx.state.lock().tx.writes().is_empty();
    let mut installed = ferry_store::VERSION_ABSENT;
    if wrote {
        let started = Instant::now();
        let state = ctx.state.lock();
        let reads = object_refs(state.tx.read_objects());
        let writes = write_refs(state.tx.writes());
        let store = &invocation.tenant.store;
        let committed = if state.allow_oom {
            store.commit_allow_oom(&reads, &writes)
        } else {
            store.commit(&reads, &writes)
        };
        let elapsed = started.elapsed().as_nanos() as u64;
        invocation.cpu_ns += elapsed;
        charge_cpu(node, worker, &invocation.tenant, elapsed);
        match committed {
            Ok(version) => installed = version,
            Err(StoreError::Conflict { .. }) => return retry(invocation),
            Err(err) => {
                TenantCounters::bump(&invocation.tenant.counters.invocation_failures);
                return invocation.finish(store_error(err));
            }
        }
    }
    TenantCounters::bump(&invocation.tenant.counters.invocations);
    let bytes_returned = u32::try_from(result.len()).unwrap_or(u32::MAX);
    let trace = invocation.trace.then(|| ctx.state.lock().tx.trace(installed));
    let mut response = Response::ok(ResponseBody::Invoke {
        result,
        costs: None,
        trace,
    });
    response.bytes_returned = bytes_returned;
    invocation.finish(response)
}

fn retry(mut invocation: Invocation) -> Stepped {
    if invocation.attempts >= MAX_SERVER_ATTEMPTS {
        return invocation.finish(Response::error(
            Status::TxAbort,
            format!("invocation conflicted {MAX_SERVER_ATTEMPTS} times in a row; retry later"),
        ));
    }
    TenantCounters::bump(&invocation.tenant.counters.invocation_retries);
    invocation.attempts += 1;
    (invocation.attempt, invocation.state) = start_attempt(
        Arc::clone(&invocation.tenant),
        invocation.cluster.clone(),
        invocation.handoff,
        invocation.function,
        invocation.args.clone(),
        invocation.running.as_ref().map(|running| running.interrupt().clone()),
        invocation.preemptible,
    );
    Stepped::Suspended(invocation)
}
