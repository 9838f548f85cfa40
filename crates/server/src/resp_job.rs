//! RESP commands in a turn of the connection's core (`turn`): the connection's task runs
//! its pipelined commands itself, on the core's thread, inline when the core is idle or
//! when the fair queue comes to its tenant's lane, so fair queueing, the core's busy time
//! and the tenant's counters see every command, and a pipeline of many commands is one
//! turn.
//!
//! A data command is the one executor of Redis's data commands (`ferry_keyspace::run`)
//! run on the stored values themselves under their keys' locks (`in_place`), so a command
//! on a large collection costs what it touches; `redis.call` in a script runs the same
//! executor over the script's transaction. FUNCTION and FCALL are invocations of the Lua storage
//! functions, like any invocation over the ferry protocol; one that does not finish in its
//! first step (it outran its slice) waits in the tenant's lane for its next, and the turn
//! ends there: the connection waits for its reply and runs the commands after it in a
//! next turn, so replies keep their order and nothing runs ahead of a write it should
//! see. A turn also ends once it has run for a slice (the node's `poll_slice`,
//! [`crate::store_ctx::POLL_SLICE`] by default), like a poll of an invocation: a tenant's
//! long pipeline queues again behind other tenants' work instead of holding the core.

use ferry_proto::TenantId;
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use tokio::sync::oneshot;

use ferry_lua::resp::{error_reply, FunctionCall, FunctionStat};
use ferry_proto::{Opcode, Response, ResponseBody, Status};
use ferry_resp::{Command, Reply};

use crate::conn::Answer;
use crate::invocation::{self, Call, Stepped};
use crate::node::{Node, TenantState};
use crate::stats::TenantCounters;

/// One command of a connection's pipeline.
pub(crate) enum Step {
    /// Answered by the connection already (a refusal, CLUSTER): passed through in order.
    Answered(Reply),
    /// A data command.
    Data(Command),
    /// A command over the whole database (KEYS, SCAN, FLUSHDB, …).
    Database(Vec<bytes::Bytes>),
    /// WATCH: the keys' tokens.
    Watch(Vec<bytes::Bytes>),
    /// EXEC of a MULTI.
    Transaction(ferry_resp::command::Transaction),
    /// A plain read a replica serves from its copy of another node's shard (READONLY).
    ReplicaRead(Command),
    /// FUNCTION or FCALL.
    Function(FunctionCall),
    /// SAVE or BGSAVE: run when the pipeline reaches it, so it covers the commands before it.
    Save {
        /// BGSAVE.
        background: bool,
    },
}

/// Whether `steps` call storage functions.
pub(crate) fn has_functions(steps: &VecDeque<Step>) -> bool {
    steps.iter().any(|step| matches!(step, Step::Function(_)))
}

/// What one turn did.
pub(crate) struct Ran {
    /// Replies to the commands it ran, in order.
    pub(crate) replies: Vec<Reply>,
    /// It stopped at a command still running (an invocation waiting in its tenant's lane
    /// for its next step, a background save): that command's reply, to come next.
    pub(crate) pending: Option<oneshot::Receiver<Reply>>,
}

/// Runs commands from the front of `steps` over `table`, in a turn of core `core` (the
/// calling thread), until they are done, one is left running, or the turn has run for a
/// slice; what is not run stays in `steps` for the next turn.
pub(crate) fn run(
    node: &Node,
    core: usize,
    tenant: &Arc<TenantState>,
    table: &str,
    steps: &mut VecDeque<Step>,
    received: Instant,
) -> Ran {
    let mut replies = Vec::with_capacity(steps.len());
    // The turn's own CPU: all of it but its invocations', which charge themselves. Two
    // clock reads per turn, not per command (a command costs about a microsecond).
    let started = Instant::now();
    let mut invocations_ns = 0;
    let data_ns = |invocations_ns: u64| (started.elapsed().as_nanos() as u64).saturating_sub(invocations_ns);
    let mut pending = None;
    while let Some(step) = steps.pop_front() {
        if started.elapsed() >= node.poll_slice {
            // A turn holds the core no longer than a poll of an invocation: the rest
            // queues again, behind other tenants' work.
            steps.push_front(step);
            break;
        }
        match step {
            Step::Answered(reply) => replies.push(reply),
            Step::Data(command) => replies.push(guarded(tenant, || {
                data_command(node.cluster.as_deref(), tenant, table, &command, true)
            })),
            // Its keys were routed to this replica's shard already; its log refuses writes,
            // so an expired key it meets is read as absent, left for the primary to delete.
            Step::ReplicaRead(command) => {
                replies.push(guarded(tenant, || data_command(None, tenant, table, &command, false)))
            }
            Step::Database(words) => replies.push(guarded(tenant, || {
                crate::database::run(node.cluster.as_deref(), tenant, table, &words)
            })),
            Step::Watch(keys) => replies.push(guarded(tenant, || {
                crate::in_place::watch(node.cluster.as_deref(), tenant, table, &keys)
            })),
            Step::Transaction(tx) => replies.push(guarded(tenant, || {
                if crate::exec_listing::lists(&tx) {
                    crate::exec_listing::exec(node.cluster.as_ref(), tenant, table, &tx)
                } else {
                    crate::in_place::exec(node.cluster.as_deref(), tenant, table, &tx)
                }
            })),
            Step::Save { background } => match crate::save::save(node, background) {
                Ok(reply) => replies.push(reply),
                Err(running) => {
                    pending = Some(running);
                    break;
                }
            },
            Step::Function(call) => match timed(&mut invocations_ns, || {
                function_call(node, core, tenant, call, received)
            }) {
                Ok(reply) => replies.push(reply),
                Err(waiting) => {
                    let (reply, stepped) = *waiting;
                    // Suspended: its next step waits in the tenant's lane of this core.
                    // Abandoned: the watchdog answered for it and replaced this core.
                    if let Stepped::Suspended(invocation) = stepped {
                        node.pool.requeue(core, invocation);
                    }
                    pending = Some(reply);
                    break;
                }
            },
        }
    }
    crate::turn::charge(node, core, tenant, data_ns(invocations_ns));
    // A blocking pop of the tenant's may find what this turn wrote.
    tenant.written.notify_waiters();
    Ran { replies, pending }
}

/// Runs `f`, adding the time it took to `total_ns`.
fn timed<T>(total_ns: &mut u64, f: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let result = f();
    *total_ns += started.elapsed().as_nanos() as u64;
    result
}

/// Runs one command, counted; a panic (a bug: the store never panics on input) costs
/// that command, not the worker.
fn guarded(tenant: &TenantState, run: impl FnOnce() -> Reply) -> Reply {
    let reply = catch_unwind(AssertUnwindSafe(run))
        .unwrap_or_else(|_| Reply::err("internal error while executing the command"));
    TenantCounters::bump(&tenant.counters.requests);
    reply
}

pub(crate) use crate::in_place::data_command;

/// Starts the invocation a FUNCTION or FCALL command is; its reply if it finished in its
/// first step, else the receiver of its reply and what became of it.
fn function_call(
    node: &Node,
    worker: usize,
    tenant: &Arc<TenantState>,
    call: FunctionCall,
    received: Instant,
) -> Result<Reply, Box<(oneshot::Receiver<Reply>, Stepped)>> {
    let (name, args) = match call.invocation() {
        Ok(invocation) => invocation,
        Err(refusal) => return Ok(refusal),
    };
    let (sender, mut receiver) = oneshot::channel();
    let waiter = Waiter {
        call,
        tenant: Arc::clone(tenant),
        sender: Mutex::new(Some(sender)),
    };
    let started = invocation::start(
        node,
        worker,
        Arc::clone(tenant),
        Call {
            outbox: Arc::new(waiter),
            request_id: 0,
            received,
            name,
            args,
            allow_pushback: false,
            trace: false,
            handoff: false,
        },
    );
    match started {
        None | Some(Stepped::Finished) => Ok(receiver
            .try_recv()
            .unwrap_or_else(|_| Reply::err("the function finished without an answer"))),
        Some(stepped) => Err(Box::new((receiver, stepped))),
    }
}

/// Turns the answer to a FUNCTION or FCALL invocation into its reply.
struct Waiter {
    call: FunctionCall,
    tenant: Arc<TenantState>,
    sender: Mutex<Option<oneshot::Sender<Reply>>>,
}

impl Answer for Waiter {
    fn respond(&self, _opcode: Opcode, _tenant: TenantId, _request_id: u64, response: &Response) {
        let Some(sender) = self.sender.lock().take() else {
            return;
        };
        let reply = match &response.body {
            ResponseBody::Invoke { result, .. } if response.status == Status::Ok => {
                self.call.reply(result, || stats_of(&self.tenant))
            }
            ResponseBody::Error { message } => error_reply(message),
            _ => Reply::err(format!("unexpected answer ({:?})", response.status)),
        };
        // The connection may be gone; then nobody needs the reply.
        let _ = sender.send(reply);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ServerConfig, TenantConfig};
    use bytes::Bytes;

    const PIPELINED_SETS: usize = 200;

    fn tenant(id: u32) -> TenantConfig {
        TenantConfig {
            id: TenantId(id),
            token: format!("token-{id}"),
            quota_bytes: 1 << 20,
            home_core: Some(0),
            maxmemory_policy: Default::default(),
        }
    }

    /// One core, tenants 1 and 2 both homed on it, and no threads: the test plays the
    /// core.
    fn node() -> Node {
        let config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), 1, vec![tenant(1), tenant(2)]);
        Node::new(&config, ferry_func::Registry::new())
    }

    fn set(key: usize) -> Step {
        let words = ["SET".to_string(), format!("key-{key}"), "value".to_string()];
        Step::Data(Command::parse(words.into_iter().map(Bytes::from).collect()).unwrap())
    }

    /// A ferry-protocol read of tenant `id`, to queue behind the job.
    fn read_task(node: &Node, id: u32) -> crate::worker::Task {
        struct Nowhere;
        impl Answer for Nowhere {
            fn respond(&self, _: Opcode, _: TenantId, _: u64, _: &Response) {}
        }
        crate::worker::Task {
            tenant: Arc::clone(&node.tenants[&TenantId(id)]),
            received: Instant::now(),
            work: crate::worker::Work::Request {
                outbox: Arc::new(Nowhere),
                opcode: Opcode::Get,
                request_id: 0,
                request: ferry_proto::Request::Get {
                    table: "db0".into(),
                    key: Bytes::from_static(b"key-0"),
                    validate: Vec::new(),
                },
            },
        }
    }

    /// Runs turns as the connection would, until every command has run.
    fn run_to_the_end(node: &Node, tenant: &Arc<TenantState>, mut steps: VecDeque<Step>) -> Vec<Reply> {
        let mut replies = Vec::new();
        while !steps.is_empty() {
            let ran = run(node, 0, tenant, "db0", &mut steps, Instant::now());
            assert!(ran.pending.is_none(), "data commands answer at once");
            replies.extend(ran.replies);
        }
        replies
    }

    #[test]
    fn a_turn_holds_the_core_for_a_slice_and_leaves_the_rest_for_the_next() {
        const COMMANDS: usize = 100_000;
        let node = node();
        let tenant = Arc::clone(&node.tenants[&TenantId(1)]);
        let mut steps = (0..COMMANDS).map(set).collect();
        let ran = run(&node, 0, &tenant, "db0", &mut steps, Instant::now());
        // A hundred thousand commands take far longer than one 200 µs slice.
        assert!(!steps.is_empty(), "the turn ran past its slice");
        assert!(!ran.replies.is_empty(), "a turn always makes progress");
        assert_eq!(ran.replies.len() + steps.len(), COMMANDS);
    }

    #[test]
    fn pipelined_sets_are_charged_to_their_tenant_in_its_workers_fair_queue() {
        let node = node();
        let busy = Arc::clone(&node.tenants[&TenantId(1)]);
        let replies = run_to_the_end(&node, &busy, (0..PIPELINED_SETS).map(set).collect());
        assert_eq!(replies.len(), PIPELINED_SETS);
        assert!(replies.iter().all(|reply| *reply == Reply::ok()), "{replies:?}");
        assert_eq!(
            busy.store.get("db0", b"key-7").unwrap().unwrap().1,
            Bytes::from_static(b"value")
        );

        // The tenant's counters…
        let counters = |id: u32| {
            let counters = &node.tenants[&TenantId(id)].counters;
            (
                counters.requests.load(std::sync::atomic::Ordering::Relaxed),
                counters.cpu_ns.load(std::sync::atomic::Ordering::Relaxed),
            )
        };
        let (requests, cpu_ns) = counters(1);
        assert_eq!(requests, PIPELINED_SETS as u64);
        assert!(cpu_ns > 0);
        assert_eq!(counters(2), (0, 0), "nothing is charged to the other tenant");

        // …and its share of the worker: queued after the busy tenant, the other one's
        // request is served first, because the SETs used the busy tenant's CPU share.
        // (Run outside the fair queue, they would not be, and the worker would take
        // requests in arrival order.)
        node.pool.submit(0, read_task(&node, 1)).ok().unwrap();
        node.pool.submit(0, read_task(&node, 2)).ok().unwrap();
        let first = node.pool.pop(0).unwrap();
        assert_eq!(first.tenant.id, TenantId(2));
    }

    #[test]
    fn commands_of_a_job_run_in_order_and_a_refused_one_says_why() {
        let node = node();
        let tenant = Arc::clone(&node.tenants[&TenantId(1)]);
        let incr = |key: &str| {
            let words = ["INCR".to_string(), key.to_string()];
            Step::Data(Command::parse(words.into_iter().map(Bytes::from).collect()).unwrap())
        };
        let steps: VecDeque<Step> = vec![incr("n"), incr("n"), set(1), incr("key-1")].into();
        let replies = run_to_the_end(&node, &tenant, steps);
        assert_eq!(replies[0], Reply::Integer(1));
        assert_eq!(replies[1], Reply::Integer(2), "each command sees the one before it");
        assert_eq!(replies[2], Reply::ok());
        assert!(
            matches!(&replies[3], Reply::Error(message) if message.contains("not an integer")),
            "{:?}",
            replies[3]
        );
    }
}
