//! `Ctx` on the storage node: reads local tables, tracks versions, buffers writes.
//!
//! Every access first yields once, so the worker regains control between the accesses of a
//! long function: it can interleave other requests, charge the function's CPU budget, and
//! (ASFP) suspend it by simply not polling it again. Every read validates the read set so
//! far atomically with the new read, so a function always sees a consistent snapshot, and
//! a read-only invocation needs no commit at all.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use parking_lot::Mutex;

use bytes::Bytes;

use ferry_func::tx::TxRead;
use ferry_func::{Ctx, CtxError, CtxFuture, TxState, TxWrite};
use ferry_store::{ObjectRef, StoreError, WriteRef};

use crate::node::TenantState;
use crate::routing::ClusterRole;

/// A future that is pending exactly once: the yield point of every access.
struct YieldOnce {
    yielded: bool,
}

impl Future for YieldOnce {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        // The worker re-polls every pending invocation itself; waking keeps any other
        // executor (tests) honest too.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

fn yield_once() -> YieldOnce {
    YieldOnce { yielded: false }
}

/// Maps a store refusal onto what a function sees.
pub(crate) fn ctx_error(err: StoreError) -> CtxError {
    match err {
        StoreError::Conflict { .. } => CtxError::Conflict(err.to_string()),
        other => CtxError::Refused(other.to_string()),
    }
}

/// What the worker sees of an attempt from outside its future: the transaction state (to
/// commit it, or to hand it back on pushback) and the profile that classifies the
/// invocation as compute- or data-bound.
#[derive(Debug, Default)]
pub(crate) struct AttemptState {
    /// Read set and write buffer.
    pub(crate) tx: TxState,
    /// Data accesses made so far, counting the one an invocation is yielding at.
    pub(crate) accesses: u64,
    /// Time spent inside data accesses; the rest of the poll time is the function's own
    /// compute.
    pub(crate) access_ns: u64,
    /// The function reached a key another cluster node serves and the client takes it
    /// from here (handoff): the attempt ends in a pushback whatever the function returns.
    pub(crate) handed_off: bool,
}

/// An attempt's state, shared by its `StoreCtx` (inside the future) and the worker.
pub(crate) type SharedAttempt = Arc<Mutex<AttemptState>>;

/// The storage-node side of one invocation attempt.
pub(crate) struct StoreCtx {
    args: Bytes,
    tenant: Arc<TenantState>,
    /// The node's place in a cluster: a function may touch only this node's keys.
    cluster: Option<Arc<ClusterRole>>,
    /// The client finishes the invocation if it reaches another node's key.
    handoff: bool,
    /// Shared with the worker, which commits it when the function returns.
    pub(crate) state: SharedAttempt,
}

impl StoreCtx {
    pub(crate) fn new(
        tenant: Arc<TenantState>,
        cluster: Option<Arc<ClusterRole>>,
        handoff: bool,
        args: Bytes,
        state: SharedAttempt,
    ) -> StoreCtx {
        StoreCtx {
            args,
            tenant,
            cluster,
            handoff,
            state,
        }
    }

    /// Stops at keys another node of the cluster serves (reading an empty local table
    /// instead would be a wrong answer): the invocation is handed back to a client that can
    /// reach every node, or fails with `moved` for one that cannot.
    fn check_owned(&self, keys: &[&[u8]]) -> Result<(), CtxError> {
        let Some(role) = &self.cluster else { return Ok(()) };
        let Some(why) = keys.iter().find_map(|key| crate::routing::not_owned(role, key)) else {
            return Ok(());
        };
        if self.handoff {
            self.state.lock().handed_off = true;
            return Err(CtxError::Stopped(format!("handed off: {why}")));
        }
        Err(CtxError::Refused(why))
    }

    /// Counts an access before its yield point, so a worker deciding at that point knows
    /// how many accesses the invocation has made.
    fn begin_access(&self) {
        self.state.lock().accesses += 1;
    }

    /// Reads `keys` of `table` (those not already known to the transaction), validating
    /// the read set atomically with the read.
    fn read(&mut self, table: &str, keys: &[&[u8]]) -> Result<Vec<Option<Bytes>>, CtxError> {
        self.check_owned(keys)?;
        let started = Instant::now();
        let mut state = self.state.lock();
        let result = read_into(&self.tenant, &mut state.tx, table, keys);
        state.access_ns += started.elapsed().as_nanos() as u64;
        result
    }

    fn write(&mut self, table: &str, key: &[u8], value: Option<Bytes>) -> Result<(), CtxError> {
        self.check_owned(&[key])?;
        let started = Instant::now();
        let mut state = self.state.lock();
        let result = ferry_store::tenant::check_write(table, key, value.as_deref())
            .map_err(ctx_error)
            .and_then(|()| state.tx.buffer_write(table, key, value));
        state.access_ns += started.elapsed().as_nanos() as u64;
        result
    }
}

fn read_into(
    tenant: &TenantState,
    tx: &mut TxState,
    table: &str,
    keys: &[&[u8]],
) -> Result<Vec<Option<Bytes>>, CtxError> {
    let missing = tx.missing(table, keys);
    if !missing.is_empty() {
        let validate = object_refs(tx.reads());
        let values = tenant
            .store
            .read_validated(table, &missing, &validate)
            .map_err(ctx_error)?;
        for (key, value) in missing.iter().zip(values) {
            let (version, value) = match value {
                Some((version, value)) => (version, Some(value)),
                None => (ferry_store::VERSION_ABSENT, None),
            };
            tx.record_read(table, Bytes::copy_from_slice(key), version, value)?;
        }
    }
    tx.known(table, keys)
}

/// A transaction's read set as the store takes it.
pub(crate) fn object_refs(reads: &[TxRead]) -> Vec<ObjectRef<'_>> {
    reads
        .iter()
        .map(|read| ObjectRef {
            table: &read.table,
            key: &read.key,
            version: read.version,
        })
        .collect()
}

/// A transaction's write set as the store takes it.
pub(crate) fn write_refs(writes: &[TxWrite]) -> Vec<WriteRef<'_>> {
    writes
        .iter()
        .map(|write| WriteRef {
            table: &write.table,
            key: &write.key,
            value: write.value.as_deref(),
        })
        .collect()
}

impl Ctx for StoreCtx {
    fn args(&self) -> &Bytes {
        &self.args
    }

    fn tenant(&self) -> u32 {
        self.tenant.id
    }

    fn get<'a>(&'a mut self, table: &'a str, key: &'a [u8]) -> CtxFuture<'a, Option<Bytes>> {
        Box::pin(async move {
            self.begin_access();
            yield_once().await;
            Ok(self.read(table, &[key])?.pop().flatten())
        })
    }

    fn multiget<'a>(&'a mut self, table: &'a str, keys: &'a [Bytes]) -> CtxFuture<'a, Vec<Option<Bytes>>> {
        Box::pin(async move {
            self.begin_access();
            yield_once().await;
            let keys: Vec<&[u8]> = keys.iter().map(|key| &key[..]).collect();
            self.read(table, &keys)
        })
    }

    fn put<'a>(&'a mut self, table: &'a str, key: &'a [u8], value: Bytes) -> CtxFuture<'a, ()> {
        Box::pin(async move {
            self.begin_access();
            yield_once().await;
            self.write(table, key, Some(value))
        })
    }

    fn delete<'a>(&'a mut self, table: &'a str, key: &'a [u8]) -> CtxFuture<'a, ()> {
        Box::pin(async move {
            self.begin_access();
            yield_once().await;
            self.write(table, key, None)
        })
    }
}
