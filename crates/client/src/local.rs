//! Local execution (ship data): the function runs here, against a `Ctx` that fetches over
//! the network.
//!
//! Each read carries the read set so far, which the node validates atomically with the
//! read; so the function only ever sees a consistent snapshot, and a read-only invocation
//! is serialized at its last read without a commit round trip. Writes are buffered and
//! committed with OCC at the end. A conflict anywhere restarts the invocation, up to
//! [`MAX_LOCAL_ATTEMPTS`] times with jittered exponential backoff.
//!
//! Over a sharded cluster each read goes to its key's node, carrying the reads made on that
//! node. A read-only invocation whose reads span nodes then validates, after its last read,
//! every other node's reads once more: each object read was current from its read to that
//! validation, and all reads came before all validations, so all were current together at
//! the last read, where the invocation is serialized. An invocation that writes commits on
//! one node, so its reads and writes must all live there (`cross_slot` otherwise, before
//! anything is sent): a commit is never half-applied, and reads on a node it does not commit
//! on could not be kept valid until the commit.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;

use ferry_func::registry::panic_text;
use ferry_func::{Ctx, CtxError, CtxFuture, FnError, FnFuture, TxState};
use ferry_proto::{PushbackRead, ReadVersion, Request, Response, ResponseBody, Status};

use crate::client::check_status;
use crate::error::ClientError;
use crate::route::Route;
use crate::{Invocation, InvokeCost, Placement};

/// Attempts of one local invocation before it gives up with `tx_abort`.
pub const MAX_LOCAL_ATTEMPTS: u32 = 8;

/// First backoff after a conflict: about one loopback round trip here, so the conflicting
/// writer has likely committed by the time we retry.
const BACKOFF_BASE: Duration = Duration::from_micros(50);

/// Longest backoff between attempts.
const BACKOFF_MAX: Duration = Duration::from_millis(5);

/// The app-node side of one invocation attempt.
struct RemoteCtx<'c> {
    route: Route<'c>,
    args: Bytes,
    tx: TxState,
    cost: InvokeCost,
    /// Node of the last read (its reads were validated then), if any.
    last_node: Option<&'c str>,
}

fn ctx_error(err: ClientError) -> CtxError {
    match err {
        ClientError::Server {
            status: Status::TxAbort,
            message,
        } => CtxError::Conflict(message),
        ClientError::Server { message, .. } => CtxError::Refused(message),
        other => CtxError::Unavailable(other.to_string()),
    }
}

impl<'c> RemoteCtx<'c> {
    /// Sends `request` to the node serving `key`.
    async fn fetch(&mut self, key: &[u8], request: Request) -> Result<Response, CtxError> {
        self.cost.round_trips += 1;
        let response = self.route.client_for(key).call(&request).await.map_err(ctx_error)?;
        self.cost.storage_cpu_ns += response.cpu_ns;
        self.cost.bytes_returned += u64::from(response.bytes_returned);
        Ok(response)
    }

    async fn read(&mut self, table: &str, keys: &[&[u8]]) -> Result<Vec<Option<Bytes>>, CtxError> {
        let missing = self.tx.missing(table, keys);
        // One request per node, in the order the nodes first appear.
        let mut by_node: Vec<(&'c str, Vec<Bytes>)> = Vec::new();
        for key in missing {
            let node = self.route.node_of(key);
            match by_node.iter_mut().find(|(n, _)| *n == node) {
                Some((_, group)) => group.push(Bytes::copy_from_slice(key)),
                None => by_node.push((node, vec![Bytes::copy_from_slice(key)])),
            }
        }
        for (node, group) in by_node {
            self.read_on_node(table, node, group).await?;
            self.last_node = Some(node);
        }
        self.tx.known(table, keys)
    }

    /// Reads `missing` (all served by `node`), validating the reads made on that node.
    async fn read_on_node(&mut self, table: &str, node: &str, missing: Vec<Bytes>) -> Result<(), CtxError> {
        let validate = reads_on(self.route, node, self.tx.read_versions());
        if missing.len() == 1 {
            let request = Request::Get {
                table: table.to_string(),
                key: missing[0].clone(),
                validate,
            };
            let response = self.fetch(&missing[0], request).await?;
            let (version, value) = match response.status {
                Status::NotFound => (ferry_store::VERSION_ABSENT, None),
                _ => match check_status(response).map_err(ctx_error)?.body {
                    ResponseBody::Get { version, value } => (version, Some(value)),
                    other => return Err(CtxError::Unavailable(format!("unexpected get answer {other:?}"))),
                },
            };
            self.tx.record_read(table, missing[0].clone(), version, value)?;
        } else if !missing.is_empty() {
            let request = Request::MultiGet {
                table: table.to_string(),
                keys: missing.clone(),
                validate,
            };
            let response = check_status(self.fetch(&missing[0], request).await?).map_err(ctx_error)?;
            let ResponseBody::MultiGet(entries) = response.body else {
                return Err(CtxError::Unavailable("unexpected multiget answer".into()));
            };
            if entries.len() != missing.len() {
                return Err(CtxError::Unavailable(format!(
                    "multiget of {} keys answered with {} entries",
                    missing.len(),
                    entries.len()
                )));
            }
            for (key, entry) in missing.into_iter().zip(entries) {
                self.tx.record_read(table, key, entry.version, entry.value)?;
            }
        }
        Ok(())
    }

    fn buffer(&mut self, table: &str, key: &[u8], value: Option<Bytes>) -> Result<(), CtxError> {
        ferry_store::tenant::check_write(table, key, value.as_deref())
            .map_err(|err| CtxError::Refused(err.to_string()))?;
        self.tx.buffer_write(table, key, value)
    }
}

/// The reads of `reads` that `node` serves.
fn reads_on(route: Route<'_>, node: &str, reads: Vec<ReadVersion>) -> Vec<ReadVersion> {
    match route {
        Route::Node(_) => reads,
        Route::Cluster(_) => reads
            .into_iter()
            .filter(|read| route.node_of(&read.key) == node)
            .collect(),
    }
}

impl Ctx for RemoteCtx<'_> {
    fn args(&self) -> &Bytes {
        &self.args
    }

    fn tenant(&self) -> u32 {
        self.route.config().tenant
    }

    fn get<'a>(&'a mut self, table: &'a str, key: &'a [u8]) -> CtxFuture<'a, Option<Bytes>> {
        Box::pin(async move { Ok(self.read(table, &[key]).await?.pop().flatten()) })
    }

    fn multiget<'a>(&'a mut self, table: &'a str, keys: &'a [Bytes]) -> CtxFuture<'a, Vec<Option<Bytes>>> {
        Box::pin(async move {
            let keys: Vec<&[u8]> = keys.iter().map(|key| &key[..]).collect();
            self.read(table, &keys).await
        })
    }

    fn put<'a>(&'a mut self, table: &'a str, key: &'a [u8], value: Bytes) -> CtxFuture<'a, ()> {
        Box::pin(async move { self.buffer(table, key, Some(value)) })
    }

    fn delete<'a>(&'a mut self, table: &'a str, key: &'a [u8]) -> CtxFuture<'a, ()> {
        Box::pin(async move { self.buffer(table, key, None) })
    }
}

/// Runs one attempt of a function, measuring the time spent inside `poll` (the app-node
/// CPU it costs, excluding network waits) and turning a panic into the same
/// `function panicked` failure the storage node reports.
struct TimedAttempt<'a> {
    inner: FnFuture<'a>,
    busy_ns: u64,
}

impl Future for TimedAttempt<'_> {
    type Output = (Result<Bytes, FnError>, u64);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let started = Instant::now();
        let polled = catch_unwind(AssertUnwindSafe(|| self.inner.as_mut().poll(cx)));
        self.busy_ns += started.elapsed().as_nanos() as u64;
        let polled = polled.unwrap_or_else(|payload| {
            Poll::Ready(Err(FnError::Failed(format!(
                "function panicked: {}",
                panic_text(payload.as_ref())
            ))))
        });
        polled.map(|output| (output, self.busy_ns))
    }
}

/// Seeds each invocation's jitter differently, so clients retrying together spread out.
static JITTER_SEED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0x5eed);

/// A cheap jitter source (xorshift) seeded per invocation: backoff only needs spreading,
/// not statistical quality, and the client must not depend on a global RNG.
fn jitter(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn backoff(attempt: u32, state: &mut u64) -> Duration {
    let exp = BACKOFF_BASE.saturating_mul(1u32 << attempt.min(16)).min(BACKOFF_MAX);
    let nanos = exp.as_nanos() as u64;
    Duration::from_nanos(nanos / 2 + jitter(state) % (nanos / 2 + 1))
}

pub(crate) async fn invoke_local(
    route: Route<'_>,
    function_name: &str,
    args: Bytes,
) -> Result<Invocation, ClientError> {
    run_local(
        route,
        function_name,
        args,
        TxState::new(),
        Instant::now(),
        InvokeCost::default(),
        false,
    )
    .await
}

/// Finishes an invocation the storage node pushed back: runs it here from the start, with
/// the node's reads preloaded (served without fetching them again, validated again by the
/// next read or the commit), and commits with OCC. `cost` holds what the node attempt cost.
pub(crate) async fn finish_pushed_back(
    route: Route<'_>,
    function_name: &str,
    args: Bytes,
    reads: &[PushbackRead],
    started: Instant,
    cost: InvokeCost,
) -> Result<Invocation, ClientError> {
    let preloaded =
        TxState::preloaded(reads).map_err(|err| ClientError::Protocol(format!("pushed-back read set: {err}")))?;
    run_local(route, function_name, args, preloaded, started, cost, true).await
}

async fn run_local(
    route: Route<'_>,
    function_name: &str,
    args: Bytes,
    first_tx: TxState,
    started: Instant,
    mut cost: InvokeCost,
    pushed_back: bool,
) -> Result<Invocation, ClientError> {
    let function =
        route.config().registry.get(function_name).ok_or_else(|| {
            ClientError::server(Status::UnknownFunction, format!("no function named {function_name:?}"))
        })?;
    let mut rng = ferry_func::args::mix64(JITTER_SEED.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) | 1;
    // Only the first attempt may start from preloaded reads: after a conflict they are stale.
    let mut next_tx = Some(first_tx);
    let mut local_attempts = 0;
    loop {
        local_attempts += 1;
        cost.attempts += 1;
        let mut ctx = RemoteCtx {
            route,
            args: args.clone(),
            tx: next_tx.take().unwrap_or_default(),
            cost: InvokeCost::default(),
            last_node: None,
        };
        let (result, app_cpu_ns) = TimedAttempt {
            inner: function(&mut ctx),
            busy_ns: 0,
        }
        .await;
        cost.app_cpu_ns += app_cpu_ns;
        cost.absorb(&ctx.cost);
        let conflict = match result {
            Ok(result) => match commit(route, &ctx.tx, ctx.last_node, &mut cost).await {
                Ok(installed) => {
                    return Ok(Invocation {
                        result,
                        placement: Placement::Local,
                        latency: started.elapsed(),
                        cost,
                        pushed_back,
                        trace: route.config().trace.then(|| ctx.tx.trace(installed)),
                    })
                }
                Err(ClientError::Server {
                    status: Status::TxAbort,
                    message,
                }) => message,
                Err(err) => return Err(err),
            },
            Err(FnError::Ctx(CtxError::Conflict(message))) => message,
            Err(FnError::Ctx(CtxError::Unavailable(message))) => return Err(ClientError::Disconnected(message)),
            Err(err) => return Err(ClientError::server(Status::FunctionFailed, err.to_string())),
        };
        if local_attempts >= MAX_LOCAL_ATTEMPTS {
            return Err(ClientError::server(
                Status::TxAbort,
                format!("invocation conflicted {MAX_LOCAL_ATTEMPTS} times in a row; last: {conflict}"),
            ));
        }
        tokio::time::sleep(backoff(local_attempts, &mut rng)).await;
    }
}

/// Commits the writes of a finished attempt; returns the version installed. A read-only
/// attempt was validated at its last read on that node (`last_node`) and needs nothing
/// more unless it read on other nodes too: those are validated again now.
async fn commit(
    route: Route<'_>,
    tx: &TxState,
    last_node: Option<&str>,
    cost: &mut InvokeCost,
) -> Result<u64, ClientError> {
    if tx.writes().is_empty() {
        validate_other_nodes(route, tx, last_node, cost).await?;
        return Ok(ferry_store::VERSION_ABSENT);
    }
    let request = Request::Commit {
        reads: tx.read_versions(),
        writes: tx.commit_writes(),
    };
    let client = match route {
        Route::Node(client) => client,
        Route::Cluster(cluster) => {
            let keys = tx.reads().iter().map(|r| &r.key[..]);
            let keys = keys.chain(tx.writes().iter().map(|w| &w.key[..]));
            cluster.node_for_all(keys).map_err(|err| match err {
                ClientError::Server { status, message } => ClientError::server(
                    status,
                    format!("an invocation that writes must read and write on one node: {message}"),
                ),
                other => other,
            })?
        }
    };
    cost.round_trips += 1;
    let response = match client.call(&request).await {
        Ok(response) => response,
        // Sent but unanswered: it may have been applied. Never retried blindly.
        Err(err @ (ClientError::Disconnected(_) | ClientError::Timeout(_))) => {
            return Err(ClientError::CommitOutcomeUnknown(err.to_string()))
        }
        Err(err) => return Err(err),
    };
    cost.storage_cpu_ns += response.cpu_ns;
    match check_status(response)?.body {
        ResponseBody::Commit { version } => Ok(version),
        other => Err(ClientError::Protocol(format!("unexpected commit answer {other:?}"))),
    }
}

/// Validates the reads a read-only attempt made on nodes other than `last_node` (an empty
/// multiget carrying them); a changed object answers `tx_abort`, which retries the attempt.
async fn validate_other_nodes(
    route: Route<'_>,
    tx: &TxState,
    last_node: Option<&str>,
    cost: &mut InvokeCost,
) -> Result<(), ClientError> {
    let Route::Cluster(_) = route else { return Ok(()) };
    let mut nodes: Vec<&str> = tx.reads().iter().map(|read| route.node_of(&read.key)).collect();
    nodes.sort_unstable();
    nodes.dedup();
    for node in nodes.into_iter().filter(|node| Some(*node) != last_node) {
        let validate = reads_on(route, node, tx.read_versions());
        let Some(first) = validate.first() else { continue };
        let client = route.client_for(&first.key);
        let request = Request::MultiGet {
            table: first.table.clone(),
            keys: Vec::new(),
            validate,
        };
        cost.round_trips += 1;
        let response = check_status(client.call(&request).await?)?;
        cost.storage_cpu_ns += response.cpu_ns;
    }
    Ok(())
}
