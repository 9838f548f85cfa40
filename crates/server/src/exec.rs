//! Executing a task on a core or native worker: a data operation of the ferry protocol
//! answered at once (`data_op`), an invocation started or stepped (`invocation`), a turn
//! granted; and the answer and the charge every one of them ends with.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use ferry_proto::{Opcode, Request, Response, Status};
use ferry_store::StoreError;

use crate::conn::Answer;
use crate::data_op::data_operation;
use crate::invocation::{start, step, Call, Stepped};
use crate::node::{Node, TenantState};
use crate::stats::TenantCounters;
use crate::worker::{Task, Work};

/// Protocol status of a store refusal.
pub(crate) fn status_of(err: &StoreError) -> Status {
    match err {
        _ if err.is_conflict() => Status::TxAbort,
        StoreError::EmptyKey | StoreError::BadTableName(_) => Status::BadRequest,
        // Nothing was applied: a retry may succeed once the log has room again.
        StoreError::Journal(_) => Status::Unavailable,
        _ if err.is_limit() => Status::TooLarge,
        _ => Status::BadRequest,
    }
}

pub(crate) fn store_error(err: StoreError) -> Response {
    Response::error(status_of(&err), crate::memory::refusal_text(&err))
}

/// Sends the answer to one request and charges it to its tenant.
pub(crate) fn answer(
    outbox: &dyn Answer,
    tenant: &TenantState,
    opcode: Opcode,
    request_id: u64,
    received: Instant,
    response: &Response,
) {
    let latency_us = received.elapsed().as_micros() as u64;
    tenant.latency.observe(opcode, response.status, latency_us);
    let counters = &tenant.counters;
    TenantCounters::bump(&counters.requests);
    counters
        .bytes_returned
        .fetch_add(u64::from(response.bytes_returned), std::sync::atomic::Ordering::Relaxed);
    if response.status == Status::TxAbort {
        TenantCounters::bump(&counters.tx_aborts);
    }
    outbox.respond(opcode, tenant.id, request_id, response);
}

pub(crate) fn charge_cpu(node: &Node, worker: usize, tenant: &TenantState, ns: u64) {
    use std::sync::atomic::Ordering::Relaxed;
    tenant.counters.cpu_ns.fetch_add(ns, Relaxed);
    node.pool.slots[worker].counters.busy_ns.fetch_add(ns, Relaxed);
    // Every task of a tenant waits in its home queue (of the core or the native worker
    // beside it), so that is where its share is kept.
    node.pool
        .charge(node.pool.home_in_group(worker, tenant.home), tenant.id, ns);
}

/// Runs one task. Data operations are answered here; an invocation takes its first step
/// and is returned if it yielded; a turn is granted (its task runs its work).
pub(crate) fn execute(node: &Node, worker: usize, task: Task) -> Option<Stepped> {
    let Task { tenant, received, work } = task;
    let (outbox, opcode, request_id, request) = match work {
        Work::Turn { turn, .. } => {
            // The waiting task runs its work next, on this thread.
            turn.grant();
            return None;
        }
        Work::Resume(invocation) => return Some(step(node, worker, invocation)),
        Work::Request {
            outbox,
            opcode,
            request_id,
            request,
        } => (outbox, opcode, request_id, request),
    };
    if let Request::Invoke {
        function,
        args,
        allow_pushback,
        trace,
        handoff,
        // A storage node's own CPU, in the header, is all a run here costs: it answers
        // without a costs record (docs/PROTOCOL.md, "Costs").
        costs: _,
    } = request
    {
        let call = Call {
            outbox,
            request_id,
            received,
            name: function,
            args,
            allow_pushback,
            trace,
            handoff,
        };
        return start(node, worker, tenant, call);
    }

    let started = Instant::now();
    // The store never panics on input, but a bug must cost one request, not a worker.
    let cluster = node.cluster.is_some();
    let mut response = catch_unwind(AssertUnwindSafe(|| data_operation(&tenant, cluster, request)))
        .unwrap_or_else(|_| Response::error(Status::BadRequest, "internal error while executing the request"));
    let cpu_ns = started.elapsed().as_nanos() as u64;
    response.cpu_ns = cpu_ns;
    charge_cpu(node, worker, &tenant, cpu_ns);
    answer(outbox.as_ref(), &tenant, opcode, request_id, received, &response);
    None
}
