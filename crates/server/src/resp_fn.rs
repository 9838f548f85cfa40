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

use ferry_lua::catalog::{self, ListArgs, LoadArgs};
use ferry_lua::fcall::reply_of;
use ferry_lua::FcallArgs;
use ferry_proto::{Opcode, Request, Response, ResponseBody, Status};
use ferry_resp::command::FunctionCommand;
use ferry_resp::Reply;

use crate::conn::Answer;
use crate::function_stats::FunctionSummary;
use crate::node::{Node, TenantState};
use crate::stats::TenantCounters;
use crate::worker::Task;

/// A FUNCTION or FCALL command, ready to run.
pub(crate) enum FunctionCall {
    FCall(FcallArgs),
    Load(LoadArgs),
    Delete(String),
    List(ListArgs),
    Stats,
}

impl FunctionCall {
    /// The call for a FUNCTION subcommand.
    pub(crate) fn function(command: FunctionCommand) -> FunctionCall {
        match command {
            FunctionCommand::Load { replace, code } => FunctionCall::Load(LoadArgs { replace, code }),
            FunctionCommand::Delete(library) => FunctionCall::Delete(String::from_utf8_lossy(&library).into_owned()),
            FunctionCommand::List { pattern, with_code } => FunctionCall::List(ListArgs {
                pattern: pattern
                    .map(|p| String::from_utf8_lossy(&p).into_owned())
                    .unwrap_or_default(),
                with_code,
            }),
            FunctionCommand::Stats => FunctionCall::Stats,
        }
    }

    /// The call for FCALL / FCALL_RO over `table`.
    pub(crate) fn fcall(
        function: Bytes,
        keys: Vec<Bytes>,
        args: Vec<Bytes>,
        read_only: bool,
        table: &str,
    ) -> FunctionCall {
        FunctionCall::FCall(FcallArgs {
            function: String::from_utf8_lossy(&function).into_owned(),
            table: table.to_string(),
            keys,
            args,
            read_only,
        })
    }

    /// Runs the call on this node and turns its answer into the reply.
    pub(crate) async fn run(self, node: &Node, tenant: &Arc<TenantState>) -> Reply {
        let (function, args) = match &self {
            FunctionCall::FCall(call) => {
                if !ferry_lua::library::valid_name(&call.function) {
                    return Reply::err("Function not found");
                }
                match call.encode() {
                    Some(args) => (call.invocation_name(), args),
                    None => return Reply::err("too many keys or arguments"),
                }
            }
            FunctionCall::Load(load) => {
                if load.code.len() > ferry_lua::library::MAX_LIBRARY_BYTES {
                    return Reply::err(format!(
                        "library of {} bytes exceeds the limit of {}",
                        load.code.len(),
                        ferry_lua::library::MAX_LIBRARY_BYTES
                    ));
                }
                (catalog::LOAD.to_string(), load.encode())
            }
            FunctionCall::Delete(library) => {
                if !ferry_lua::library::valid_name(library) {
                    return Reply::err("Library not found");
                }
                (catalog::DELETE.to_string(), catalog::delete_args(library))
            }
            FunctionCall::List(list) => (catalog::LIST.to_string(), list.encode()),
            FunctionCall::Stats => (catalog::LIST.to_string(), ListArgs::default().encode()),
        };
        let result = match invoke(node, tenant, function, args).await {
            Ok(result) => result,
            Err(reply) => return reply,
        };
        match self {
            FunctionCall::FCall(_) | FunctionCall::List(_) => reply_of(&result),
            FunctionCall::Load(_) => Reply::Bulk(result),
            FunctionCall::Delete(_) => Reply::ok(),
            FunctionCall::Stats => stats(
                &reply_of(&result),
                &tenant.functions.summaries(ferry_lua::fcall::FAMILY),
            ),
        }
    }
}

/// The function descriptions of one library in FUNCTION LIST's reply.
fn library_functions(library: &Reply) -> &[Reply] {
    let Reply::Map(fields) = library else { return &[] };
    match fields.iter().find(|(key, _)| *key == Reply::text("functions")) {
        Some((_, Reply::Array(items))) => items,
        _ => &[],
    }
}

/// FUNCTION STATS in Redis's shape (no script is ever "running" from the client's view:
/// calls are bounded by their budget, not killed by hand; the Lua engine's counts), plus
/// `functions`: per function loaded now, what this node saw of its calls.
fn stats(list: &Reply, functions: &[FunctionSummary]) -> Reply {
    let Reply::Array(libraries) = list else {
        return list.clone();
    };
    let described = || libraries.iter().flat_map(library_functions);
    let loaded = |name: &str| {
        described().any(|f| matches!(f, Reply::Map(pairs) if pairs.contains(&(Reply::text("name"), Reply::text(name)))))
    };
    let lua = Reply::Map(vec![
        (Reply::text("libraries_count"), Reply::Integer(libraries.len() as i64)),
        (
            Reply::text("functions_count"),
            Reply::Integer(described().count() as i64),
        ),
    ]);
    let int = |n: u64| Reply::Integer(i64::try_from(n).unwrap_or(i64::MAX));
    let per_function = functions
        .iter()
        .filter_map(|f| {
            let name = f.name.strip_prefix(ferry_lua::fcall::FAMILY)?;
            loaded(name).then_some((name, f))
        })
        .map(|(name, f)| {
            let fields = vec![
                (Reply::text("calls"), int(f.calls)),
                (Reply::text("ran_on_node"), int(f.calls - f.failed - f.handed_back)),
                (Reply::text("handed_back"), int(f.handed_back)),
                (Reply::text("failed"), int(f.failed)),
                (Reply::text("node_cpu_us_mean"), int(f.cpu_ns_mean / 1_000)),
                (Reply::text("latency_us_p50"), int(f.latency_us_p50)),
                (Reply::text("latency_us_p99"), int(f.latency_us_p99)),
            ];
            (Reply::text(name), Reply::Map(fields))
        })
        .collect();
    Reply::Map(vec![
        (Reply::text("running_script"), Reply::Null),
        (Reply::text("engines"), Reply::Map(vec![(Reply::text("LUA"), lua)])),
        (Reply::text("functions"), Reply::Map(per_function)),
    ])
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

/// An error from the node as a RESP error: kept as is if it starts with an error code
/// (`ERR`, `BUSY`, …, as the Lua functions write them), `ERR ` put in front otherwise.
fn error_reply(message: &str) -> Reply {
    let code = message.split(' ').next().unwrap_or("");
    if !code.is_empty() && code.bytes().all(|b| b.is_ascii_uppercase()) {
        Reply::Error(message.to_string())
    } else {
        Reply::err(message)
    }
}
