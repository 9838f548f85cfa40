//! FUNCTION and FCALL on the RESP front end. Each becomes an invocation of a Lua storage
//! function (`ferry_lua`): queued to the tenant's home worker like any invocation over
//! the ferry protocol (fair queueing, budgets, the watchdog), and answered to the waiting
//! connection instead of an outbox. FUNCTION LOAD, DELETE and LIST are the storage
//! functions `lua.load`, `lua.delete` and `lua.list`, so `ferry fn load` over the ferry
//! protocol does exactly what FUNCTION LOAD does here.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::oneshot;

use ferry_lua::resp::{error_reply, FunctionCall, FunctionStat};
use ferry_proto::{Opcode, Request, Response, ResponseBody, Status};
use ferry_resp::Reply;

use crate::conn::Answer;
use crate::node::{Node, TenantState};
use crate::stats::TenantCounters;
use crate::worker::Task;

/// Runs a FUNCTION or FCALL command on this node and turns its answer into the reply.
pub(crate) async fn run(call: FunctionCall, node: &Node, tenant: &Arc<TenantState>) -> Reply {
    let (function, args) = match call.invocation() {
        Ok(invocation) => invocation,
        Err(refusal) => return refusal,
    };
    match invoke(node, tenant, function, args).await {
        Ok(result) => call.reply(&result, || stats_of(tenant)),
        Err(reply) => reply,
    }
}

/// What this node saw of the tenant's Lua functions, for FUNCTION STATS.
fn stats_of(tenant: &TenantState) -> Vec<FunctionStat> {
    let int = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    tenant
        .functions
        .summaries(ferry_lua::fcall::FAMILY)
        .into_iter()
        .map(|f| FunctionStat {
            figures: vec![
                ("calls", int(f.calls)),
                ("ran_on_node", int(f.calls - f.failed - f.handed_back)),
                ("handed_back", int(f.handed_back)),
                ("failed", int(f.failed)),
                ("node_cpu_us_mean", int(f.cpu_ns_mean / 1_000)),
                ("latency_us_p50", int(f.latency_us_p50)),
                ("latency_us_p99", int(f.latency_us_p99)),
            ],
            name: f.name,
        })
        .collect()
}

/// Hands the one answer of a queued invocation to the connection waiting for it.
struct Waiter(Mutex<Option<oneshot::Sender<Response>>>);

impl Answer for Waiter {
    fn respond(&self, _opcode: Opcode, _tenant: u32, _request_id: u64, response: &Response) {
        if let Some(sender) = self.0.lock().take() {
            // The connection may be gone; then nobody needs the answer.
            let _ = sender.send(response.clone());
        }
    }
}

/// Queues the invocation to the tenant's home worker and waits for its result.
async fn invoke(node: &Node, tenant: &Arc<TenantState>, function: String, args: Bytes) -> Result<Bytes, Reply> {
    let (sender, receiver) = oneshot::channel();
    let task = Task {
        received: Instant::now(),
        outbox: Arc::new(Waiter(Mutex::new(Some(sender)))),
        tenant: Arc::clone(tenant),
        opcode: Opcode::Invoke,
        request_id: 0,
        request: Request::Invoke {
            function,
            args,
            allow_pushback: false,
            trace: false,
            handoff: false,
            costs: false,
        },
    };
    if node.pool.submit(tenant.home, task).is_err() {
        TenantCounters::bump(&tenant.counters.overloaded);
        return Err(Reply::Error("BUSY storage node queues are full; retry later".into()));
    }
    let response = receiver
        .await
        .map_err(|_| Reply::err("the storage node stopped before the function finished"))?;
    match response.body {
        ResponseBody::Invoke { result, .. } if response.status == Status::Ok => Ok(result),
        ResponseBody::Error { message } => Err(error_reply(&message)),
        _ => Err(Reply::err(format!("unexpected answer ({:?})", response.status))),
    }
}
