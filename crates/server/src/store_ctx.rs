//! `Ctx` on the storage node: reads local tables, tracks versions, buffers writes.
//!
//! An access yields once when the worker's slice for this poll ([`POLL_SLICE`]) is used
//! up, so the worker regains control within a long function: it can interleave other
//! requests, charge the function's CPU budget, and (ASFP) suspend it by simply not polling
//! it again. A function that fits in its slice runs to completion in one poll, with no
//! trip through the worker's loop per access. Every read is made at the attempt's
//! read version (TL2, see `ferry_store::tenant`'s snapshot reads): it checks only its own
//! object, so a function always sees one consistent snapshot at O(1) per read, a read-only
//! invocation needs no commit at all, and one that writes validates its reads once, at
//! commit.

use ferry_proto::TenantId;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use bytes::Bytes;

use ferry_func::{Ctx, CtxError, CtxFuture, Listed, TxState};
use ferry_proto::{CommitWrite, ReadVersion};
use ferry_store::{ObjectRef, StoreError, WriteRef};

use crate::node::TenantState;
use crate::routing::ClusterRole;

/// How long one poll of an invocation runs before its next data access yields back to the
/// worker. Long enough that a typical function (tens of accesses, each a microsecond or
/// two with the Lua VM) finishes in one poll, short enough that a request queued behind it
/// waits a small fraction of a millisecond-scale latency objective. Measured with FCALL
/// traverse depth 10 at 32 clients (docs/BENCHMARKS.md): 20 µs made most calls yield and
/// interleave, each holding its own VM, at 0.6x the throughput of 200 µs.
pub const POLL_SLICE: Duration = Duration::from_micros(200);

/// Maps a store refusal onto what a function sees.
pub(crate) fn ctx_error(err: StoreError) -> CtxError {
    if err.is_conflict() {
        CtxError::Conflict(err.to_string())
    } else {
        CtxError::Refused(err.to_string())
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
    /// The snapshot every read is made at: the tenant's clock when the attempt started,
    /// moved forward when a read finds a newer object and nothing read so far changed.
    pub(crate) read_version: u64,
    /// When the current poll's slice ends (set by the worker before each poll); `None`
    /// yields at every access.
    pub(crate) slice_ends: Option<Instant>,
    /// When the invocation will have used the node's CPU time limit if this poll runs on
    /// (set by the worker before each poll): a Lua call ends there (`Ctx::slice`).
    pub(crate) cpu_ends: Option<Instant>,
    /// What pauses the attempt's Lua call while it runs (`Ctx::slice`): the watchdog rings
    /// it when the poll outruns its slice.
    pub(crate) bell: ferry_func::Bell,
    /// `immediate` promised the next access completes without yielding (a Lua
    /// `redis.call` then runs it to its end in place): the promise holds for every access
    /// of that command (MSET's several keys), until `immediate` is asked again, even if the
    /// slice ends meanwhile (a preempted thread), since an access that then yielded would
    /// stop the invocation.
    pub(crate) promised_immediate: bool,
    /// The function reached a key another cluster node serves and the client takes it
    /// from here (handoff): the attempt ends in a pushback whatever the function returns.
    pub(crate) handed_off: bool,
    /// The function is flagged `allow-oom`: its commit may pass the tenant's `maxmemory`.
    pub(crate) allow_oom: bool,
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
    /// When the attempt started ([`Ctx::now_us`]).
    now_us: u64,
    /// What stops the invocation from outside (FUNCTION KILL, SCRIPT KILL), if anything can.
    interrupt: Option<ferry_func::Interrupt>,
    /// A Lua call here yields at the end of the worker's slice (`Ctx::slice`).
    preemptible: bool,
}

/// The node's CPU time limit for the invocation whose attempt this is, as `Ctx::slice`
/// gives it.
struct PollLimit(SharedAttempt);

impl ferry_func::TimeLimit for PollLimit {
    fn reached(&self) -> Option<&'static str> {
        let out_of_time = self.0.lock().cpu_ends.is_some_and(|ends| Instant::now() >= ends);
        out_of_time.then_some(TIME_LIMIT_ERROR)
    }
}

/// How a Lua call that used the node's CPU time limit for one invocation (its invoke
/// budget, `--invoke-budget`) ends.
pub(crate) const TIME_LIMIT_ERROR: &str =
    "ERR Script killed: it ran past the node's CPU time limit for one call (--invoke-budget)";

/// The wall clock in microseconds since the Unix epoch: the time a command or an invocation
/// runs at, for expiry and TIME.
pub(crate) fn unix_time_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_micros() as u64)
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
            now_us: unix_time_us(),
            interrupt: None,
            preemptible: false,
        }
    }

    /// The same, stoppable through `interrupt`.
    pub(crate) fn with_interrupt(mut self, interrupt: Option<ferry_func::Interrupt>) -> StoreCtx {
        self.interrupt = interrupt;
        self
    }

    /// The same, its Lua calls paused at the end of each slice when `on`.
    pub(crate) fn preemptible(mut self, on: bool) -> StoreCtx {
        self.preemptible = on;
        self
    }

    /// Stops at keys another node of the cluster serves (reading an empty local table
    /// instead would be a wrong answer): the invocation is handed back to a client that can
    /// reach every node, or fails with `moved` for one that cannot.
    fn check_owned(&self, table: &str, keys: &[&[u8]]) -> Result<(), CtxError> {
        let Some(role) = &self.cluster else { return Ok(()) };
        if ferry_cluster::is_node_local(table) {
            return Ok(()); // every node keeps its own catalog
        }
        let Some(why) = keys.iter().find_map(|key| crate::routing::not_owned(role, key)) else {
            // Its own keys, unless a move is handing them over (a node keeps the slots it
            // moved away frozen too, so that check comes second).
            if let Some(why) = keys.iter().find_map(|key| crate::routing::frozen(role, key)) {
                return Err(CtxError::Unavailable(why));
            }
            // An invocation without a routing key passes routing without a lease check,
            // and one that has may outlive the lease: each access is checked too.
            if role.lease_lapsed() {
                return Err(CtxError::Unavailable(crate::routing::NO_LEASE.to_string()));
            }
            return Ok(());
        };
        if self.handoff {
            self.state.lock().handed_off = true;
            return Err(CtxError::Stopped(format!("handed off: {why}")));
        }
        Err(CtxError::Refused(why))
    }

    /// Counts an access before its yield point, so a worker deciding at that point knows
    /// how many accesses the invocation has made; true when the poll's slice is used up and
    /// the access must yield first.
    fn begin_access(&self) -> bool {
        let mut state = self.state.lock();
        state.accesses += 1;
        if state.promised_immediate {
            return false;
        }
        state.slice_ends.is_none_or(|ends| Instant::now() >= ends)
    }

    /// The yield point of an access: pending once if the slice is used up.
    async fn access_point(&self) {
        if self.begin_access() {
            ferry_func::ctx::yield_once().await;
        }
    }

    /// Reads `keys` of `table` (those not already known to the transaction), validating
    /// the read set atomically with the read.
    fn read(&mut self, table: &str, keys: &[&[u8]]) -> Result<Vec<Option<Bytes>>, CtxError> {
        self.check_owned(table, keys)?;
        let started = Instant::now();
        let mut state = self.state.lock();
        let result = read_into(&self.tenant, &mut state, table, keys);
        state.access_ns += started.elapsed().as_nanos() as u64;
        result
    }

    fn write(&mut self, table: &str, key: &[u8], value: Option<Bytes>) -> Result<(), CtxError> {
        self.check_owned(table, &[key])?;
        let started = Instant::now();
        let mut state = self.state.lock();
        let result = ferry_store::tenant::check_write(table, key, value.as_deref())
            .map_err(ctx_error)
            .and_then(|()| state.tx.buffer_write(table, key, value));
        state.access_ns += started.elapsed().as_nanos() as u64;
        result
    }
}

/// Times one read may move its attempt's snapshot forward before the attempt starts over:
/// each move costs a pass over the read set, and an object rewritten faster than that is a
/// hot spot better served by a retry.
pub(crate) const MAX_SNAPSHOT_EXTENSIONS: u32 = 4;

fn read_into(
    tenant: &TenantState,
    state: &mut AttemptState,
    table: &str,
    keys: &[&[u8]],
) -> Result<Vec<Option<Bytes>>, CtxError> {
    let missing = state.tx.missing(table, keys);
    if !missing.is_empty() {
        let values = read_at_extending(&tenant.store, state, table, &missing)?;
        for (key, value) in missing.iter().zip(values) {
            let (version, value) = match value {
                Some((version, value)) => (version, Some(value)),
                None => (ferry_store::VERSION_ABSENT, None),
            };
            state
                .tx
                .record_read(table, Bytes::copy_from_slice(key), version, value)?;
        }
    }
    state.tx.known(table, keys)
}

/// Reads `keys` at the attempt's read version; when one is newer, moves the snapshot to
/// the clock now if everything read so far is unchanged there (TL2's extension), else
/// fails with a conflict.
fn read_at_extending(
    store: &ferry_store::TenantStore,
    state: &mut AttemptState,
    table: &str,
    keys: &[&[u8]],
) -> Result<Vec<Option<ferry_store::tenant::Versioned>>, CtxError> {
    at_read_version_extending(store, state, |read_version| store.read_at(table, keys, read_version))
}

/// Runs `read` (a read of objects or of a listing) at the attempt's read version, moving it
/// forward as [`read_at_extending`] does.
pub(crate) fn at_read_version_extending<T>(
    store: &ferry_store::TenantStore,
    state: &mut AttemptState,
    mut read: impl FnMut(u64) -> Result<T, StoreError>,
) -> Result<T, CtxError> {
    let mut extensions = 0;
    loop {
        match read(state.read_version) {
            Err(StoreError::Newer { .. }) if extensions < MAX_SNAPSHOT_EXTENSIONS => {
                extensions += 1;
                let moved_to = store.read_version();
                store
                    .still_current(&object_refs(state.tx.read_objects()), moved_to)
                    .map_err(ctx_error)?;
                state.read_version = moved_to;
            }
            result => return result.map_err(ctx_error),
        }
    }
}

/// A transaction's read set as the store takes it.
pub(crate) fn object_refs<'a>(reads: impl IntoIterator<Item = &'a ReadVersion>) -> Vec<ObjectRef<'a>> {
    reads
        .into_iter()
        .map(|read| ObjectRef {
            table: &read.table,
            key: &read.key,
            version: read.version,
        })
        .collect()
}

/// A transaction's write set as the store takes it.
pub(crate) fn write_refs(writes: &[CommitWrite]) -> Vec<WriteRef<'_>> {
    writes
        .iter()
        .map(|write| WriteRef::put_or_delete(&write.table, &write.key, write.value.as_deref()))
        .collect()
}

impl Ctx for StoreCtx {
    fn args(&self) -> &Bytes {
        &self.args
    }

    fn now_us(&self) -> u64 {
        self.now_us
    }

    fn tenant(&self) -> TenantId {
        self.tenant.id
    }

    /// Inside the poll's slice an access reads the local store and does not yield.
    fn immediate(&self) -> bool {
        let mut state = self.state.lock();
        let inside = state.slice_ends.is_some_and(|ends| Instant::now() < ends);
        state.promised_immediate = inside;
        inside
    }

    fn get<'a>(&'a mut self, table: &'a str, key: &'a [u8]) -> CtxFuture<'a, Option<Bytes>> {
        Box::pin(async move {
            self.access_point().await;
            Ok(self.read(table, &[key])?.pop().flatten())
        })
    }

    fn multiget<'a>(&'a mut self, table: &'a str, keys: &'a [Bytes]) -> CtxFuture<'a, Vec<Option<Bytes>>> {
        Box::pin(async move {
            self.access_point().await;
            let keys: Vec<&[u8]> = keys.iter().map(|key| &key[..]).collect();
            self.read(table, &keys)
        })
    }

    fn put<'a>(&'a mut self, table: &'a str, key: &'a [u8], value: Bytes) -> CtxFuture<'a, ()> {
        Box::pin(async move {
            self.access_point().await;
            self.write(table, key, Some(value))
        })
    }

    fn delete<'a>(&'a mut self, table: &'a str, key: &'a [u8]) -> CtxFuture<'a, ()> {
        Box::pin(async move {
            self.access_point().await;
            self.write(table, key, None)
        })
    }

    fn allow_oom(&mut self) {
        self.state.lock().allow_oom = true;
    }

    fn interrupt(&self) -> Option<ferry_func::Interrupt> {
        self.interrupt.clone()
    }

    fn slice(&self) -> Option<ferry_func::Slice> {
        self.preemptible.then(|| {
            let bell = self.state.lock().bell.clone();
            ferry_func::Slice::new(bell, Arc::new(PollLimit(Arc::clone(&self.state))))
        })
    }

    fn info(&mut self) -> CtxFuture<'_, Bytes> {
        Box::pin(async move {
            self.access_point().await;
            Ok(Bytes::from(crate::memory::script_info(
                &self.tenant,
                self.cluster.is_some(),
            )))
        })
    }

    fn list<'a>(&'a mut self, tables: &'a [String]) -> CtxFuture<'a, Vec<Vec<Listed>>> {
        Box::pin(async move {
            self.access_point().await;
            let started = Instant::now();
            let mut state = self.state.lock();
            let result = crate::listing::list_into(&self.tenant.store, self.cluster.as_deref(), &mut state, tables);
            state.access_ns += started.elapsed().as_nanos() as u64;
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::{Context, Poll};

    /// Drives one access to its end, as the worker would (re-polling at the yield).
    fn finish<T>(mut access: CtxFuture<'_, T>) -> Result<T, CtxError> {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        loop {
            if let Poll::Ready(result) = access.as_mut().poll(&mut cx) {
                return result;
            }
        }
    }

    fn put(tenant: &TenantState, pairs: &[(&[u8], &[u8])]) {
        let writes: Vec<WriteRef<'_>> = pairs
            .iter()
            .map(|(key, value)| WriteRef::put("t", key, value))
            .collect();
        tenant.store.commit(&[], &writes).unwrap();
    }

    fn attempt(tenant: &Arc<TenantState>) -> StoreCtx {
        let state = SharedAttempt::default();
        state.lock().read_version = tenant.store.read_version();
        StoreCtx::new(Arc::clone(tenant), None, false, Bytes::new(), state)
    }

    #[test]
    fn a_function_never_reads_past_its_snapshot() {
        // Opacity: a reads 1; a and b then both become 2 in one commit. Reading b now must
        // not answer 2 (a state with a=1, b=2 never existed): the snapshot cannot move
        // because a changed, so the attempt conflicts and is retried.
        let tenant = Arc::new(TenantState::for_test(1, 1 << 20));
        put(&tenant, &[(b"a", b"1"), (b"b", b"1")]);
        let mut ctx = attempt(&tenant);
        assert_eq!(finish(ctx.get("t", b"a")).unwrap(), Some(Bytes::from_static(b"1")));
        put(&tenant, &[(b"a", b"2"), (b"b", b"2")]);
        assert!(matches!(finish(ctx.get("t", b"b")), Err(CtxError::Conflict(_))));
    }

    #[test]
    fn a_snapshot_moves_forward_when_nothing_read_changed() {
        // b changes after the attempt started but a (the only read) did not: b's new value
        // is read at a later snapshot where a is still what was read.
        let tenant = Arc::new(TenantState::for_test(1, 1 << 20));
        put(&tenant, &[(b"a", b"1"), (b"b", b"1")]);
        let mut ctx = attempt(&tenant);
        let started_at = ctx.state.lock().read_version;
        assert_eq!(finish(ctx.get("t", b"a")).unwrap(), Some(Bytes::from_static(b"1")));
        put(&tenant, &[(b"b", b"2")]);
        assert_eq!(finish(ctx.get("t", b"b")).unwrap(), Some(Bytes::from_static(b"2")));
        assert!(ctx.state.lock().read_version > started_at);
        // Reads are repeatable: a is served from the read set, not read again.
        put(&tenant, &[(b"a", b"3")]);
        assert_eq!(finish(ctx.get("t", b"a")).unwrap(), Some(Bytes::from_static(b"1")));
    }

    #[test]
    fn a_listing_sees_its_own_writes_and_a_key_created_since_conflicts() {
        let tenant = Arc::new(TenantState::for_test(1, 1 << 20));
        put(&tenant, &[(b"a", b"1"), (b"b", b"1")]);
        let mut ctx = attempt(&tenant);
        let tables = ["t".to_string()];
        finish(ctx.delete("t", b"b")).unwrap();
        finish(ctx.put("t", b"c", Bytes::from_static(b"1"))).unwrap();
        let listed = finish(ctx.list(&tables)).unwrap();
        assert_eq!(
            crate::listing::keys_of(&listed[0]),
            vec![Bytes::from_static(b"a"), Bytes::from_static(b"c")]
        );
        // A key created by another commit since: the commit of this attempt conflicts.
        put(&tenant, &[(b"d", b"1")]);
        let state = ctx.state.lock();
        let refused = tenant
            .store
            .commit(&object_refs(state.tx.read_objects()), &write_refs(state.tx.writes()));
        assert!(refused.is_err_and(|err| err.is_conflict()));
        drop(state);
        // A new attempt lists it, and commits.
        let mut ctx = attempt(&tenant);
        let listed = finish(ctx.list(&tables)).unwrap();
        assert_eq!(listed[0].len(), 3);
        let state = ctx.state.lock();
        tenant.store.commit(&object_refs(state.tx.read_objects()), &[]).unwrap();
    }

    #[test]
    fn accesses_yield_only_once_the_slice_is_used_up() {
        let tenant = Arc::new(TenantState::for_test(1, 1 << 20));
        let mut ctx = attempt(&tenant);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        ctx.state.lock().slice_ends = Some(Instant::now() + Duration::from_secs(3600));
        assert!(ctx.get("t", b"a").as_mut().poll(&mut cx).is_ready(), "inside the slice");
        ctx.state.lock().slice_ends = Some(Instant::now());
        assert!(ctx.get("t", b"a").as_mut().poll(&mut cx).is_pending(), "slice used up");
        ctx.state.lock().slice_ends = None;
        assert!(ctx.get("t", b"a").as_mut().poll(&mut cx).is_pending(), "no slice given");
        assert_eq!(ctx.state.lock().accesses, 3);
        // An access promised to complete at once does, even if the slice ends before it
        // (the thread was preempted in between): yielding would stop the invocation.
        ctx.state.lock().slice_ends = Some(Instant::now() + Duration::from_millis(20));
        assert!(ctx.immediate());
        std::thread::sleep(Duration::from_millis(40));
        assert!(ctx.get("t", b"a").as_mut().poll(&mut cx).is_ready(), "promised");
        assert!(
            ctx.get("t", b"b").as_mut().poll(&mut cx).is_ready(),
            "the command's next access is promised too"
        );
        assert!(!ctx.immediate(), "the next command asks again, past the slice");
        assert!(
            ctx.get("t", b"a").as_mut().poll(&mut cx).is_pending(),
            "the promise is over"
        );
    }
}
