//! Local execution (ship data): the function runs here, against a `Ctx` that fetches over
//! the network.
//!
//! Reads are TL2 reads at a snapshot of each node (a read version of its tenant clock):
//! the first read on a node starts one, the node answers with it, and every later read
//! carries it (O(1) on the wire and on the node, whatever was read before); an object
//! changed after it is answered `tx_abort`, never read. So the function only ever sees a
//! consistent snapshot of each node, and a read-only invocation on one node is serialized
//! at that snapshot without a commit round trip. Writes are buffered and committed with OCC
//! at the end (the read set validated once). A conflict anywhere restarts the invocation,
//! up to [`MAX_LOCAL_ATTEMPTS`] times with jittered exponential backoff.
//!
//! Over a sharded cluster each read goes to its key's node with the snapshots so far (the
//! node picks its own, so this works through a gateway too). Every read a node accepts was
//! the object's current value when it was read (it had not changed since the snapshot). A
//! read-only invocation whose reads span nodes then validates every node's reads once more
//! after its last read: each object read was current from its read to that validation, and
//! all reads came before all validations, so all were current together at the last read,
//! where the invocation is serialized. An invocation that writes commits on
//! one node, so its reads and writes must all live there (`cross_slot` otherwise, before
//! anything is sent): a commit is never half-applied, and reads on a node it does not commit
//! on could not be kept valid until the commit.

use ferry_proto::TenantId;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;

use ferry_func::registry::panic_text;
use ferry_func::{Ctx, CtxError, CtxFuture, FnError, FnFuture, Listed, TxState};
use ferry_proto::{
    PushbackState, ReadVersion, Request, Response, ResponseBody, Snapshot, Status, LISTING_NEEDS_ONE_NODE,
    MAX_SNAPSHOTS,
};

use crate::error::check_status;
use crate::error::ClientError;
use crate::invocation::{Invocation, InvokeCost};
use crate::route::Route;
use ferry_control::Placement;

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
    /// The snapshot of each node read from so far.
    snapshots: Vec<Snapshot>,
    /// When the attempt started, in microseconds since the Unix epoch ([`Ctx::now_us`]).
    now_us: u64,
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
    /// Sends `request` to the node serving `key` of `table`.
    async fn fetch(&mut self, table: &str, key: &[u8], request: Request) -> Result<Response, CtxError> {
        self.cost.round_trips += 1;
        let response = self
            .route
            .client_for(table, key)
            .map_err(ctx_error)?
            .call(&request)
            .await
            .map_err(ctx_error)?;
        self.cost.storage_cpu_ns += response.cpu_ns;
        self.cost.bytes_returned += u64::from(response.bytes_returned);
        Ok(response)
    }

    async fn read(&mut self, table: &str, keys: &[&[u8]]) -> Result<Vec<Option<Bytes>>, CtxError> {
        let missing = self.tx.missing(table, keys);
        // One request per node, in the order the nodes first appear.
        let mut by_node: Vec<(&'c str, Vec<Bytes>)> = Vec::new();
        for key in missing {
            let node = self.route.node_of(table, key);
            match by_node.iter_mut().find(|(n, _)| *n == node) {
                Some((_, group)) => group.push(Bytes::copy_from_slice(key)),
                None => by_node.push((node, vec![Bytes::copy_from_slice(key)])),
            }
        }
        for (_, group) in by_node {
            self.read_on_node(table, group).await?;
        }
        self.tx.known(table, keys)
    }

    /// Reads `missing` (all served by one node) at this attempt's snapshot of that node, or
    /// at a new one the answer names.
    async fn read_on_node(&mut self, table: &str, missing: Vec<Bytes>) -> Result<(), CtxError> {
        let Some(first) = missing.first().cloned() else {
            return Ok(());
        };
        let request = Request::MultiGet {
            table: table.to_string(),
            keys: missing.clone(),
            validate: Vec::new(),
            snapshots: self.snapshots.clone(),
        };
        let response = check_status(self.fetch(table, &first, request).await?).map_err(ctx_error)?;
        let ResponseBody::MultiGet { entries, snapshot } = response.body else {
            return Err(CtxError::Unavailable("unexpected multiget answer".into()));
        };
        if entries.len() != missing.len() {
            return Err(CtxError::Unavailable(format!(
                "multiget of {} keys answered with {} entries",
                missing.len(),
                entries.len()
            )));
        }
        if let Some(snapshot) = snapshot {
            self.remember(snapshot)?;
        }
        for (key, entry) in missing.into_iter().zip(entries) {
            self.tx.record_read(table, key, entry.version, entry.value)?;
        }
        Ok(())
    }

    /// Keeps a node's snapshot for the attempt's later reads there (the first one a node
    /// gives stands: later reads there carry it).
    fn remember(&mut self, snapshot: Snapshot) -> Result<(), CtxError> {
        if self.snapshots.iter().any(|known| known.clock == snapshot.clock) {
            return Ok(());
        }
        if self.snapshots.len() >= MAX_SNAPSHOTS {
            return Err(CtxError::Refused(format!(
                "invocation read from more than {MAX_SNAPSHOTS} storage nodes"
            )));
        }
        self.snapshots.push(snapshot);
        Ok(())
    }

    /// Runs a read-only command of one key on its node (`Ctx::read_part`), unless the key's
    /// value is known here already (then the caller runs it over that).
    async fn read_part_remote(
        &mut self,
        table: &str,
        key: &[u8],
        command: &[Bytes],
    ) -> Result<Option<Bytes>, CtxError> {
        if self.tx.lookup(table, key).is_some() {
            return Ok(None);
        }
        let request = Request::ReadPart {
            table: table.to_string(),
            key: Bytes::copy_from_slice(key),
            command: command.to_vec(),
            snapshots: self.snapshots.clone(),
        };
        let response = check_status(self.fetch(table, key, request).await?).map_err(ctx_error)?;
        let ResponseBody::ReadPart {
            version,
            reply,
            snapshot,
        } = response.body
        else {
            return Err(CtxError::Unavailable("unexpected read_part answer".into()));
        };
        self.remember(snapshot)?;
        self.tx.record_partial(table, key, version)?;
        Ok(Some(reply))
    }

    /// Lists `tables` at this attempt's snapshot of the node (or at a new one the answer
    /// names), one round trip; a cluster's tables span nodes, so there it is refused.
    async fn list_tables(&mut self, tables: &[String]) -> Result<Vec<Vec<Listed>>, CtxError> {
        let Route::Node(client) = self.route else {
            return Err(CtxError::Refused(LISTING_NEEDS_ONE_NODE.to_string()));
        };
        let request = Request::List {
            tables: tables.to_vec(),
            snapshots: self.snapshots.clone(),
        };
        self.cost.round_trips += 1;
        let response = client.call(&request).await.map_err(ctx_error)?;
        self.cost.storage_cpu_ns += response.cpu_ns;
        self.cost.bytes_returned += u64::from(response.bytes_returned);
        let ResponseBody::List {
            tables: listed,
            snapshot,
        } = check_status(response).map_err(ctx_error)?.body
        else {
            return Err(CtxError::Unavailable("unexpected list answer".into()));
        };
        if listed.len() != tables.len() {
            return Err(CtxError::Unavailable(format!(
                "list of {} tables answered with {}",
                tables.len(),
                listed.len()
            )));
        }
        self.remember(snapshot)?;
        let mut out = Vec::with_capacity(tables.len());
        for (table, keys) in tables.iter().zip(listed) {
            self.tx.record_listing(table, snapshot.version)?;
            out.push(self.tx.overlay(table, keys));
        }
        Ok(out)
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
        Route::Cluster(..) => reads
            .into_iter()
            .filter(|read| route.node_of(&read.table, &read.key) == node)
            .collect(),
    }
}

impl Ctx for RemoteCtx<'_> {
    fn args(&self) -> &Bytes {
        &self.args
    }

    fn now_us(&self) -> u64 {
        self.now_us
    }

    fn tenant(&self) -> TenantId {
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

    fn read_part<'a>(
        &'a mut self,
        table: &'a str,
        key: &'a [u8],
        command: &'a [Bytes],
    ) -> CtxFuture<'a, Option<Bytes>> {
        Box::pin(async move { self.read_part_remote(table, key, command).await })
    }

    fn info(&mut self) -> CtxFuture<'_, Bytes> {
        Box::pin(async move {
            // The node-local table routes to the home node (the one the catalog was read on).
            let response = self
                .fetch(ferry_cluster::NODE_LOCAL_TABLE, b"info", Request::Info)
                .await?;
            match check_status(response).map_err(ctx_error)?.body {
                ResponseBody::Info { text } => Ok(text),
                _ => Err(CtxError::Unavailable("unexpected info answer".into())),
            }
        })
    }

    fn list<'a>(&'a mut self, tables: &'a [String]) -> CtxFuture<'a, Vec<Vec<Listed>>> {
        Box::pin(async move { self.list_tables(tables).await })
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
        Start::default(),
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
    state: &PushbackState,
    started: Instant,
    cost: InvokeCost,
) -> Result<Invocation, ClientError> {
    let preloaded = TxState::preloaded(&state.reads)
        .map_err(|err| ClientError::Protocol(format!("pushed-back read set: {err}")))?;
    // Reads on that node go on at the snapshot its reads were made at.
    let start = Start {
        tx: preloaded,
        snapshots: state.snapshot.into_iter().collect(),
    };
    run_local(route, function_name, args, start, started, cost, true).await
}

/// What the first attempt of a local run starts from: nothing, or a pushed-back attempt's
/// reads and snapshot.
#[derive(Default)]
struct Start {
    tx: TxState,
    snapshots: Vec<Snapshot>,
}

async fn run_local(
    route: Route<'_>,
    function_name: &str,
    args: Bytes,
    first: Start,
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
    let mut next = Some(first);
    let mut local_attempts = 0;
    loop {
        local_attempts += 1;
        cost.attempts += 1;
        let start = next.take().unwrap_or_default();
        let mut ctx = RemoteCtx {
            route,
            args: args.clone(),
            tx: start.tx,
            cost: InvokeCost::default(),
            snapshots: start.snapshots,
            now_us: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_micros() as u64),
        };
        let (result, app_cpu_ns) = TimedAttempt {
            inner: function(&mut ctx),
            busy_ns: 0,
        }
        .await;
        cost.app_cpu_ns += app_cpu_ns;
        cost.absorb(&ctx.cost);
        let conflict = match result {
            Ok(result) => match commit(route, &ctx.tx, ctx.snapshots.len(), &mut cost).await {
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
/// attempt on one node is serialized at its snapshot there and needs nothing more; one
/// that read on several nodes (`nodes_read` snapshots) validates every node's reads once
/// now.
async fn commit(route: Route<'_>, tx: &TxState, nodes_read: usize, cost: &mut InvokeCost) -> Result<u64, ClientError> {
    if tx.writes().is_empty() {
        if nodes_read > 1 {
            validate_across_nodes(route, tx, cost).await?;
        }
        return Ok(ferry_store::VERSION_ABSENT);
    }
    let request = Request::Commit {
        reads: tx.read_versions(),
        writes: tx.commit_writes(),
    };
    let client = match route {
        Route::Node(client) => client,
        Route::Cluster(..) if tx.read_objects().any(|read| read.key.is_empty()) => {
            // A listing (pushed back by a node of the cluster) covers that node alone.
            return Err(ClientError::server(Status::CrossSlot, LISTING_NEEDS_ONE_NODE));
        }
        Route::Cluster(cluster, home) => {
            // The catalog was read on the home node: the commit goes there with the rest.
            let sharded = |table: &str| !ferry_cluster::is_node_local(table);
            let keys = tx.read_objects().filter(|r| sharded(&r.table)).map(|r| &r.key[..]);
            let keys = keys.chain(tx.writes().iter().filter(|w| sharded(&w.table)).map(|w| &w.key[..]));
            let keys: Vec<&[u8]> = keys.collect();
            let touched_catalog = keys.len() < tx.reads().len() + tx.writes().len();
            let node = match cluster.map().single_owner(keys.iter().copied()) {
                Ok(Some(owner)) if touched_catalog && owner.id != home => Err(ClientError::server(
                    Status::CrossSlot,
                    format!("keys of node {} and the catalog read on node {home}", owner.id),
                )),
                Ok(_) if keys.is_empty() => cluster.client(home),
                Ok(_) => cluster.node_for_all(keys.iter().copied()),
                Err(spread) => Err(ClientError::server(Status::CrossSlot, spread.to_string())),
            };
            node.map_err(|err| match err {
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

/// Validates the reads of a read-only attempt that read on several nodes: each node's part
/// in an empty multiget to it, or, through a gateway (which knows the nodes), the whole
/// read set in one that the gateway splits. A changed object answers `tx_abort`, which
/// retries the attempt.
async fn validate_across_nodes(route: Route<'_>, tx: &TxState, cost: &mut InvokeCost) -> Result<(), ClientError> {
    let Some(first) = tx.read_objects().next() else {
        return Ok(());
    };
    let parts: Vec<Vec<ReadVersion>> = match route {
        Route::Node(_) => vec![tx.read_versions()],
        Route::Cluster(..) => {
            let mut nodes: Vec<&str> = tx
                .read_objects()
                .map(|read| route.node_of(&read.table, &read.key))
                .collect();
            nodes.sort_unstable();
            nodes.dedup();
            nodes
                .into_iter()
                .map(|node| reads_on(route, node, tx.read_versions()))
                .collect()
        }
    };
    for validate in parts {
        let Some(part_first) = validate.first() else { continue };
        let client = route.client_for(&part_first.table, &part_first.key)?;
        let request = Request::MultiGet {
            table: first.table.clone(),
            keys: Vec::new(),
            validate,
            snapshots: Vec::new(),
        };
        cost.round_trips += 1;
        let response = check_status(client.call(&request).await?)?;
        cost.storage_cpu_ns += response.cpu_ns;
    }
    Ok(())
}
