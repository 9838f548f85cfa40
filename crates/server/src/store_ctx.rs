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

use bytes::Bytes;

use ferry_func::tx::TxRead;
use ferry_func::{Ctx, CtxError, CtxFuture, TxState, TxWrite};
use ferry_store::{ObjectRef, StoreError, WriteRef};

use crate::node::TenantState;

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

/// The storage-node side of one invocation attempt.
pub(crate) struct StoreCtx {
    args: Bytes,
    tenant: Arc<TenantState>,
    /// Read set and write buffer, committed by the worker when the function returns.
    pub(crate) tx: TxState,
    /// Data accesses made (for profiling and pushback decisions).
    pub(crate) accesses: u64,
}

impl StoreCtx {
    pub(crate) fn new(tenant: Arc<TenantState>, args: Bytes) -> StoreCtx {
        StoreCtx {
            args,
            tenant,
            tx: TxState::new(),
            accesses: 0,
        }
    }

    /// Reads `keys` of `table` (those not already known to the transaction), validating
    /// the read set atomically with the read.
    fn read(&mut self, table: &str, keys: &[&[u8]]) -> Result<Vec<Option<Bytes>>, CtxError> {
        self.accesses += 1;
        let missing = self.tx.missing(table, keys);
        if !missing.is_empty() {
            let validate = object_refs(self.tx.reads());
            let values = self
                .tenant
                .store
                .read_validated(table, &missing, &validate)
                .map_err(ctx_error)?;
            for (key, value) in missing.iter().zip(values) {
                let (version, value) = match value {
                    Some((version, value)) => (version, Some(value)),
                    None => (ferry_store::VERSION_ABSENT, None),
                };
                self.tx
                    .record_read(table, Bytes::copy_from_slice(key), version, value)?;
            }
        }
        self.tx.known(table, keys)
    }
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

    fn get<'a>(&'a mut self, table: &'a str, key: &'a [u8]) -> CtxFuture<'a, Option<Bytes>> {
        Box::pin(async move {
            yield_once().await;
            Ok(self.read(table, &[key])?.pop().flatten())
        })
    }

    fn multiget<'a>(&'a mut self, table: &'a str, keys: &'a [Bytes]) -> CtxFuture<'a, Vec<Option<Bytes>>> {
        Box::pin(async move {
            yield_once().await;
            let keys: Vec<&[u8]> = keys.iter().map(|key| &key[..]).collect();
            self.read(table, &keys)
        })
    }

    fn put<'a>(&'a mut self, table: &'a str, key: &'a [u8], value: Bytes) -> CtxFuture<'a, ()> {
        Box::pin(async move {
            yield_once().await;
            self.accesses += 1;
            ferry_store::tenant::check_write(table, key, Some(&value)).map_err(ctx_error)?;
            self.tx.buffer_write(table, key, Some(value))
        })
    }

    fn delete<'a>(&'a mut self, table: &'a str, key: &'a [u8]) -> CtxFuture<'a, ()> {
        Box::pin(async move {
            yield_once().await;
            self.accesses += 1;
            ferry_store::tenant::check_write(table, key, None).map_err(ctx_error)?;
            self.tx.buffer_write(table, key, None)
        })
    }
}
