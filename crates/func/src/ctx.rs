//! The interface a storage function is written against.
//!
//! A function receives `&mut dyn Ctx` and calls it for every data access. On the storage
//! node the implementation reads local tables; on the app node it fetches over the network.
//! Either way reads are tracked with their versions and writes are buffered until the
//! function returns, then committed with OCC, so the function's code never changes.

use ferry_proto::TenantId;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use ferry_proto::ListedKey;
use thiserror::Error;

/// Future returned by every data access. Boxed so that `Ctx` is object-safe and one
/// compiled function serves both implementations.
pub type CtxFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, CtxError>> + Send + 'a>>;

/// Why a data access failed. Functions normally propagate it with `?`.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CtxError {
    /// Something this transaction read has changed: the whole invocation will be retried.
    #[error("transaction conflict: {0}")]
    Conflict(String),
    /// The store refused the access (bad table name, key or value too large, quota).
    #[error("storage refused the access: {0}")]
    Refused(String),
    /// The storage node could not be reached or answered nonsense (local execution only).
    #[error("storage node unavailable: {0}")]
    Unavailable(String),
    /// The invocation was stopped by its runtime (budget exceeded or handed back).
    #[error("invocation stopped: {0}")]
    Stopped(String),
}

/// Data access for a storage function. Every call may be a yield point.
pub trait Ctx: Send {
    /// The invocation's arguments, exactly as the caller passed them.
    fn args(&self) -> &Bytes;

    /// The tenant the invocation runs for. Anything a function's runtime keeps from one
    /// invocation to the next (loaded code, a VM's state) must be kept per tenant.
    fn tenant(&self) -> TenantId;

    /// Whether the accesses made now, until this is asked again (one command's: MSET's
    /// several keys), complete without waiting on anything outside this thread (each may
    /// still ask once to be polled again). A runtime may then drive them to their end on
    /// the spot instead of suspending the function around them, as the Lua VM does with
    /// `redis.call`. The default, false, is always correct.
    fn immediate(&self) -> bool {
        false
    }

    /// The time the invocation runs at, in microseconds since the Unix epoch, read once
    /// when it starts: Redis freezes time for a script, so every expiry decision and TIME
    /// within one invocation agree (and the function's code reads no clock of its own).
    fn now_us(&self) -> u64;

    /// Reads one object; `None` if it does not exist.
    fn get<'a>(&'a mut self, table: &'a str, key: &'a [u8]) -> CtxFuture<'a, Option<Bytes>>;

    /// Reads several objects of one table in one access (one round trip when local).
    fn multiget<'a>(&'a mut self, table: &'a str, keys: &'a [Bytes]) -> CtxFuture<'a, Vec<Option<Bytes>>>;

    /// Buffers a write; it becomes visible to others only when the invocation commits.
    fn put<'a>(&'a mut self, table: &'a str, key: &'a [u8], value: Bytes) -> CtxFuture<'a, ()>;

    /// Buffers a delete; it takes effect when the invocation commits.
    fn delete<'a>(&'a mut self, table: &'a str, key: &'a [u8]) -> CtxFuture<'a, ()>;

    /// Lists the keys of each of `tables` as this invocation sees them (what KEYS, SCAN,
    /// DBSIZE, RANDOMKEY and FLUSHDB read): the stored keys at its snapshot with its own
    /// writes over them. Each listing joins the read set, so the invocation conflicts with
    /// a commit that creates, removes, retypes or re-expires a key of those tables
    /// meanwhile. The default refuses: a runtime that cannot list.
    fn list<'a>(&'a mut self, tables: &'a [String]) -> CtxFuture<'a, Vec<Vec<Listed>>> {
        let _ = tables;
        Box::pin(async { Err(CtxError::Refused("this runtime cannot list keys".into())) })
    }

    /// Runs the read-only data command `command` (its words; `key` its one key) where
    /// `key`'s value is and gives its reply (ferry's lossless RESP form), with `key`
    /// joining the read set at the version it ran over: one round trip that moves the
    /// part the command reads (HGET's field, LRANGE 0 9's items), not the value. `None`
    /// when the caller should run it over the value itself: the default, and what a
    /// runtime next to the data (or one that knows the key already) answers.
    fn read_part<'a>(
        &'a mut self,
        table: &'a str,
        key: &'a [u8],
        command: &'a [Bytes],
    ) -> CtxFuture<'a, Option<Bytes>> {
        let _ = (table, key, command);
        Box::pin(async { Ok(None) })
    }

    /// Says the running function is flagged `allow-oom` (Redis's flag): its commit may
    /// take the tenant past the memory limit in force (`maxmemory`), never past its quota.
    /// The default ignores it: the limit holds.
    fn allow_oom(&mut self) {}

    /// The flag that stops this invocation from outside (FUNCTION KILL, SCRIPT KILL), for
    /// a runtime that can end a call midway (the Lua VM checks it as it counts
    /// instructions). `None`, the default: nothing can stop it.
    fn interrupt(&self) -> Option<crate::Interrupt> {
        None
    }

    /// The call's slice of a thread other work shares (a storage node's core), for a
    /// runtime that can pause a call midway (the Lua VM yields it when the slice's bell
    /// rings and resumes it when polled again). `None`, the default: the call has the
    /// thread to itself, and its runtime bounds it by its own limit (the VM's instruction
    /// budget).
    fn slice(&self) -> Option<crate::Slice> {
        None
    }

    /// The storage node's INFO text as the invocation's tenant sees it (INFO in a script):
    /// a description of the server, not a read of the data, so it joins no read set (as in
    /// Redis, where INFO is no part of a script's effects). The default refuses.
    fn info(&mut self) -> CtxFuture<'_, Bytes> {
        Box::pin(async { Err(CtxError::Refused("this runtime has no server to describe".into())) })
    }
}

/// A key of a table as a listing shows it to a function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listed {
    /// A stored key with its type and expiry.
    Known(ListedKey),
    /// A key with the bytes of its value (the invocation's own write, or a store that
    /// keeps no types): the reader takes the type and expiry from them.
    Value {
        /// The key.
        key: Bytes,
        /// Its value's bytes.
        value: Bytes,
    },
}

impl Listed {
    /// The key.
    pub fn key(&self) -> &Bytes {
        match self {
            Listed::Known(known) => &known.key,
            Listed::Value { key, .. } => key,
        }
    }
}

/// Polls of an access [`Ctx::immediate`] promised before it is given up on: it may ask once
/// to be polled again.
pub const MAX_IMMEDIATE_POLLS: usize = 2;

/// A future pending exactly once, then ready: a yield point (an access of a storage node's
/// invocation, a Lua call paused at the end of its slice). It wakes its waker as it
/// yields, so a runtime that waits for wake-ups polls it again; a storage node's worker
/// re-polls every pending invocation itself.
pub fn yield_once() -> YieldOnce {
    YieldOnce { yielded: false }
}

/// The future of [`yield_once`].
#[derive(Debug)]
pub struct YieldOnce {
    yielded: bool,
}

impl Future for YieldOnce {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// Drives a future over an immediate `Ctx` (a `redis.call` inside a slice, a RESP data
/// command) to its end on the spot; `None` if it does not finish within
/// [`MAX_IMMEDIATE_POLLS`].
pub fn poll_now<F: Future>(future: F) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    (0..MAX_IMMEDIATE_POLLS).find_map(|_| match future.as_mut().poll(&mut cx) {
        Poll::Ready(output) => Some(output),
        Poll::Pending => None,
    })
}
