//! `--resp ADDR` on the gateway: Redis clients, with each command sent on as the
//! invocation it is, so the gateway's placement decides where it runs. FCALL is the
//! invocation `fcall.<name>` (placed by the tenant's policy like any function: on the
//! storage node serving its first key, or on a compute node); FUNCTION LOAD/LIST/DELETE
//! are `lua.*`; a data command (GET, SET, INCR, …) is `resp.command`, one short
//! transaction. FUNCTION STATS adds, per function, where the gateway placed its calls and
//! their measured c_i and s_i.

use ferry_proto::TenantId;
use std::sync::Arc;
use std::time::Duration;

use ferry_lua::fcall::reply_of;
use ferry_lua::resp::{command_args, error_reply, FunctionCall, FunctionStat, COMMAND};
use ferry_net::connections::Connections;
use ferry_net::resp::{Queued, RespFuture, RespService};
use ferry_proto::{Request, ResponseBody, Status};
use ferry_resp::{Command, Reply};

use crate::listener::{Service, Shared};

/// Longest a command waits for the tenant's rate limiter (or an overloaded node) to admit
/// it before the client gets `-BUSY`. Redis clients have no notion of "throttled, try
/// again", so the gateway holds the command briefly instead of failing it at once.
pub const MAX_ADMISSION_WAIT: Duration = Duration::from_millis(200);

/// Pause between two attempts at admission.
const ADMISSION_RETRY: Duration = Duration::from_millis(1);

/// The RESP face of a gateway (or any front service): the listener's shared state.
pub(crate) struct RespFront<S>(pub(crate) Arc<Shared<S>>);

impl<S: Service> RespFront<S> {
    /// Sends one invocation through the service and returns its result bytes or the reply
    /// explaining the failure.
    async fn invoke(&self, tenant: TenantId, function: String, args: bytes::Bytes) -> Result<bytes::Bytes, Reply> {
        let deadline = tokio::time::Instant::now() + MAX_ADMISSION_WAIT;
        loop {
            let request = Request::Invoke {
                function: function.clone(),
                args: args.clone(),
                allow_pushback: false,
                trace: false,
                handoff: false,
                costs: false,
            };
            let response = Arc::clone(&self.0.service).call(tenant, request).await;
            match response.body {
                ResponseBody::Invoke { result, .. } if response.status == Status::Ok => return Ok(result),
                ResponseBody::Error { .. }
                    if response.status == Status::Overloaded && tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(ADMISSION_RETRY).await;
                }
                ResponseBody::Error { message } if response.status == Status::Overloaded => {
                    return Err(Reply::Error(format!("BUSY {message}")))
                }
                ResponseBody::Error { message } => return Err(error_reply(&message)),
                _ => return Err(Reply::err(format!("unexpected answer ({:?})", response.status))),
            }
        }
    }

    /// The service's figures per Lua function (`function.fcall.<name>.<figure>`).
    fn function_stats(&self) -> Vec<FunctionStat> {
        let mut samples = Vec::new();
        self.0.service.stats(&mut samples);
        let mut stats: Vec<FunctionStat> = Vec::new();
        for sample in samples {
            let ferry_net::metrics::Scope::Function(name) = &sample.scope else {
                continue;
            };
            if !name.starts_with(ferry_lua::fcall::FAMILY) {
                continue;
            }
            let value = i64::try_from(sample.value).unwrap_or(i64::MAX);
            let figure: &'static str = match sample.name {
                "calls_remote" => "calls_on_storage_node",
                "calls_local" => "calls_on_compute",
                "app_cpu_ns_mean" => "c_i_ns",
                "storage_cpu_ns_mean" => "s_i_ns",
                _ => continue,
            };
            match stats.iter_mut().find(|s| &s.name == name) {
                Some(stat) => stat.figures.push((figure, value)),
                None => stats.push(FunctionStat {
                    name: name.to_string(),
                    figures: vec![(figure, value)],
                }),
            }
        }
        stats
    }

    /// Runs one command of a signed-in connection.
    async fn run(&self, tenant: TenantId, table: &str, command: Command) -> Reply {
        match FunctionCall::of(command, table) {
            Ok(FunctionCall::Kill(_)) => {
                Reply::err("this is the gateway: send FUNCTION KILL and SCRIPT KILL to the storage node's RESP address")
            }
            Ok(call) => {
                let (function, args) = match call.invocation() {
                    Ok(invocation) => invocation,
                    Err(refusal) => return refusal,
                };
                match self.invoke(tenant, function, args).await {
                    Ok(result) => call.reply(&result, || self.function_stats()),
                    Err(reply) => reply,
                }
            }
            Err(Command::Cluster(_)) => {
                Reply::err("this is the gateway: it sends each key to its storage node itself (no CLUSTER commands)")
            }
            Err(Command::Save { .. }) => Reply::err(
                "this is the gateway: it keeps no data; send SAVE or BGSAVE to each storage node's RESP address \
                 (ferry admin snapshot --resp ADDR)",
            ),
            Err(Command::Database(_)) => Reply::err(
                "this is the gateway: it keeps no data; send KEYS, SCAN, DBSIZE, RANDOMKEY and the flushes to \
                 each storage node's RESP address",
            ),
            Err(Command::Watch(_) | Command::Transaction(_)) => Reply::err(
                "this is the gateway: MULTI/EXEC and WATCH are served by each storage node's RESP address, \
                 not yet by the gateway",
            ),
            Err(data) => {
                let Some(args) = data.into_words().and_then(|words| command_args(table, &words)) else {
                    return Reply::err("this command is not served by the gateway");
                };
                match self.invoke(tenant, COMMAND.to_string(), args).await {
                    Ok(result) => reply_of(&result),
                    Err(reply) => reply,
                }
            }
        }
    }
}

impl<S: Service> RespService for RespFront<S> {
    type Tenant = TenantId;

    fn tenant_label(&self, tenant: &TenantId) -> String {
        tenant.to_string()
    }

    fn sign_in(&self, id: TenantId, password: &[u8]) -> Option<TenantId> {
        self.0.signs_in(id, password).then_some(id)
    }

    fn connections(&self) -> &Arc<Connections> {
        &self.0.connections
    }

    fn execute<'a>(&'a self, tenant: &'a TenantId, table: &'a str, batch: Vec<Queued>) -> RespFuture<'a> {
        Box::pin(async move {
            let mut replies = Vec::with_capacity(batch.len());
            for queued in batch {
                replies.push(self.run(*tenant, table, queued.command).await);
            }
            replies
        })
    }

    fn charge(&self, _tenant: &TenantId, _cpu_ns: u64) {}

    fn mode(&self) -> &'static str {
        "standalone"
    }
}
