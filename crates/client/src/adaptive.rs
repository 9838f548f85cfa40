//! Placement in the client runtime: a control-plane [`Policy`] decides where each
//! invocation runs, a token bucket admits requests at the policy's rate, a window keeps
//! at most the policy's W of them in flight (the rest wait, and are refused when their
//! wait would break the SLO: [`crate::gate`]), the policy's loops tick on their own timer,
//! and, where a [`BusyMeter`] says how busy each side's CPU is, the policy learns it every
//! [`BUSY_PERIOD`].
//!
//! The policy is the very state machine the simulator drives; this module only supplies
//! time (nanoseconds since the runtime started), completions and ticks. Latency is measured
//! from the *intended* start of a request — for a load generator, the moment the limiter
//! admitted it — so time spent queueing in the client is never hidden from the loops.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::task::JoinHandle;

use ferry_control::{Busy, Completion, Costs, FnId, Nanos, Placement, Policy, PolicyState, TokenBucket};

use crate::client::Client;
use crate::error::ClientError;
use crate::gate::Gate;
use crate::invocation::Invocation;

/// Each side's busy CPU time so far, as a deployment measures it (the storage node: all of
/// its threads; the app side: its whole process, less whatever only spins while idle):
/// cumulative, read every [`BUSY_PERIOD`].
pub trait BusyMeter: Send + Sync + 'static {
    /// (app side, storage side) busy CPU time so far; None for a side not measured.
    fn busy(&self) -> (Option<Duration>, Option<Duration>);
}

/// How often the busy CPU is read and reported: the per-thread clocks read here count in
/// nanoseconds, so a fifth of a second gives each span thousands of requests and several
/// R-loop decisions, and an X step (once a second) several spans.
pub const BUSY_PERIOD: Duration = Duration::from_millis(200);

/// Future of one invocation on a backend.
pub type BackendFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<Invocation, ClientError>> + Send + 'a>>;

/// What a policy places requests on: a store that can run a function remotely (ship
/// compute) or have it run here over its data (ship data). ferry's [`Client`] is one;
/// benchmarks implement it for other stores so the same generator and policy drive them.
pub trait Backend: Send + Sync + 'static {
    /// Runs `function` on the store, one round trip.
    fn invoke_remote<'a>(&'a self, function: &'a str, args: Bytes) -> BackendFuture<'a>;
    /// Runs `function` here, fetching what it reads from the store.
    fn invoke_local<'a>(&'a self, function: &'a str, args: Bytes) -> BackendFuture<'a>;
    /// Runs `function` on the store but accepts a pushback (ASFP); stores without the
    /// mechanism just run it remotely.
    fn invoke_pushable<'a>(&'a self, function: &'a str, args: Bytes) -> BackendFuture<'a> {
        self.invoke_remote(function, args)
    }
}

impl Backend for Client {
    fn invoke_remote<'a>(&'a self, function: &'a str, args: Bytes) -> BackendFuture<'a> {
        Box::pin(Client::invoke_remote(self, function, args))
    }
    fn invoke_local<'a>(&'a self, function: &'a str, args: Bytes) -> BackendFuture<'a> {
        Box::pin(Client::invoke_local(self, function, args))
    }
    fn invoke_pushable<'a>(&'a self, function: &'a str, args: Bytes) -> BackendFuture<'a> {
        Box::pin(Client::invoke_pushable(self, function, args))
    }
}

/// CPU a request placed one way costs each side beyond what its invocation's costs carry:
/// the client's sending, receiving, waking and bookkeeping, and the node's I/O thread and
/// hand-offs. On loopback that is much of what a request costs (a remote light request
/// took 1.6 µs of app CPU and reported none), so the costs a completion reports to the
/// policy add it, by placement, and a policy weighing the two sides' loads (`balance`) sees
/// what requests really cost. Measured by the benchmarks on the testbed (see
/// `ferry_bench::placement`); zero by default.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Overhead {
    /// App-side CPU per local request, ns.
    pub local_app_ns: f64,
    /// Storage-node CPU per local request not charged to it, ns.
    pub local_storage_ns: f64,
    /// App-side CPU per remote request, ns.
    pub remote_app_ns: f64,
    /// Storage-node CPU per remote request not charged to it, ns.
    pub remote_storage_ns: f64,
}

/// Tokens the admission bucket may accumulate: a small burst absorbs timer jitter of the
/// generator without letting an idle period turn into a flood.
pub const ADMISSION_BURST: f64 = 4.0;

/// How long the ticker sleeps when the policy wants no tick at all (static policies).
const IDLE_TICK: Duration = Duration::from_millis(100);

/// Most distinct function names one runtime tracks (each gets a `FnId`).
pub const MAX_FUNCTIONS: usize = 4096;

struct Shared<B> {
    backend: B,
    policy: Mutex<Box<dyn Policy>>,
    limiter: Mutex<TokenBucket>,
    /// Time zero of the policy's clock.
    epoch: Instant,
    /// Remote invocations accept pushback (the ASFP policy).
    pushback: bool,
    /// Function names to the ids the policy knows them by.
    functions: Mutex<HashMap<String, FnId>>,
    /// Added to each completion's costs, by placement.
    overhead: Overhead,
    /// The window on requests in flight.
    gate: Gate,
    /// Each side's busy CPU, if the deployment measures it.
    meter: Mutex<Option<Arc<dyn BusyMeter>>>,
}

impl<B> Shared<B> {
    fn now(&self) -> Nanos {
        Nanos(self.epoch.elapsed().as_nanos() as u64)
    }
}

/// A backend (by default ferry's [`Client`]) whose invocations are placed by a policy and
/// admitted at its rate.
pub struct Adaptive<B: Backend = Client> {
    shared: Arc<Shared<B>>,
    ticker: JoinHandle<()>,
}

impl<B: Backend> Drop for Adaptive<B> {
    fn drop(&mut self) {
        self.ticker.abort();
    }
}

impl<B: Backend> Adaptive<B> {
    /// Wraps `backend` with `policy`. Must be called inside a tokio runtime: it starts the
    /// task that ticks the policy's loops (200 Hz / 20 Hz for Kayak by default).
    /// Remote invocations accept pushback when the policy says so (ASFP).
    pub fn new(backend: B, policy: Box<dyn Policy>) -> Result<Adaptive<B>, ClientError> {
        Self::with_overhead(backend, policy, Overhead::default())
    }

    /// Like [`Adaptive::new`], adding `overhead` (by placement) to the costs each completion
    /// reports to the policy.
    pub fn with_overhead(backend: B, policy: Box<dyn Policy>, overhead: Overhead) -> Result<Adaptive<B>, ClientError> {
        let pushback = policy.allows_pushback();
        let limiter = TokenBucket::new(Nanos::ZERO, policy.rate_ops(), ADMISSION_BURST)
            .map_err(|err| ClientError::Invalid(format!("rate limiter: {err}")))?;
        let gate = Gate::new(policy.admission());
        let shared = Arc::new(Shared {
            backend,
            policy: Mutex::new(policy),
            limiter: Mutex::new(limiter),
            epoch: Instant::now(),
            pushback,
            functions: Mutex::new(HashMap::new()),
            overhead,
            gate,
            meter: Mutex::new(None),
        });
        let ticker = tokio::spawn(tick_loop(Arc::clone(&shared)));
        Ok(Adaptive { shared, ticker })
    }

    /// Reports each side's busy CPU, as `meter` reads it, to the policy every
    /// [`BUSY_PERIOD`] from now on.
    pub fn set_busy_meter(&self, meter: Arc<dyn BusyMeter>) {
        *self.shared.meter.lock() = Some(meter);
    }

    /// Requests in flight now.
    pub fn in_flight(&self) -> usize {
        self.shared.gate.in_flight()
    }

    /// The window in force now: requests in flight at most.
    pub fn inflight_max(&self) -> usize {
        self.shared.policy.lock().admission().inflight_max
    }

    /// The wrapped backend.
    pub fn backend(&self) -> &B {
        &self.shared.backend
    }

    /// Nanoseconds on the policy's clock.
    pub fn now(&self) -> Nanos {
        self.shared.now()
    }

    /// The instant a policy time corresponds to.
    pub fn instant_at(&self, t: Nanos) -> Instant {
        self.shared.epoch + Duration::from_nanos(t.as_nanos())
    }

    /// The policy's state: rate, X and latency estimate.
    pub fn state(&self) -> PolicyState {
        self.shared.policy.lock().state()
    }

    /// The policy's name.
    pub fn policy_name(&self) -> String {
        self.shared.policy.lock().name()
    }

    /// The id the policy knows `function` by (assigned on first use).
    pub fn fn_id(&self, function: &str) -> Result<FnId, ClientError> {
        let mut functions = self.shared.functions.lock();
        if let Some(id) = functions.get(function) {
            return Ok(*id);
        }
        if functions.len() >= MAX_FUNCTIONS {
            return Err(ClientError::Invalid(format!(
                "more than {MAX_FUNCTIONS} distinct functions"
            )));
        }
        let id = FnId(functions.len() as u32);
        functions.insert(function.to_string(), id);
        Ok(id)
    }

    /// The rate the limiter admits at now (the policy's R after its last tick).
    pub fn admission_rate_ops(&self) -> f64 {
        self.shared.limiter.lock().rate_ops()
    }

    /// Admits one request now if the rate allows.
    pub fn try_admit(&self) -> bool {
        let now = self.now();
        self.shared.limiter.lock().try_admit(now)
    }

    /// Runs `function` where the policy says, if the rate limiter admits it now; above
    /// the rate it fails fast with [`ClientError::Throttled`].
    pub async fn invoke(&self, function: &str, args: Bytes) -> Result<Invocation, ClientError> {
        if !self.try_admit() {
            let rate = self.shared.limiter.lock().rate_ops();
            return Err(ClientError::Throttled { rate_ops: rate as u64 });
        }
        self.invoke_admitted(Instant::now(), function, args).await
    }

    /// Runs an already admitted request, measuring latency from `intended` (when it was
    /// admitted or due), and reports the completion to the policy.
    pub async fn invoke_admitted(
        &self,
        intended: Instant,
        function: &str,
        args: Bytes,
    ) -> Result<Invocation, ClientError> {
        let fn_id = self.fn_id(function)?;
        self.invoke_admitted_as(intended, fn_id, function, args).await
    }

    /// Like [`Adaptive::invoke_admitted`], with the caller naming the class the policy
    /// tracks the request under (e.g. one per workload function, even when several run the
    /// same storage function with different arguments). The request waits for a slot in
    /// the policy's window first, and is refused ([`ClientError::Refused`]) if its wait
    /// would break the SLO.
    pub async fn invoke_admitted_as(
        &self,
        intended: Instant,
        fn_id: FnId,
        function: &str,
        args: Bytes,
    ) -> Result<Invocation, ClientError> {
        let _slot = match self.shared.gate.acquire(intended).await {
            Ok(slot) => slot,
            Err(refused) => {
                let now = self.now();
                self.shared.policy.lock().on_refused(now, fn_id);
                return Err(ClientError::Refused {
                    waited_us: refused.waited.as_micros() as u64,
                });
            }
        };
        let now = self.now();
        let placement = self.shared.policy.lock().place(now, fn_id);
        let args_len = args.len() as u64;
        let outcome = match placement {
            Placement::Remote if self.shared.pushback => self.shared.backend.invoke_pushable(function, args).await,
            Placement::Remote => self.shared.backend.invoke_remote(function, args).await,
            Placement::Local => self.shared.backend.invoke_local(function, args).await,
        };
        let latency = intended.elapsed();
        let overhead = self.shared.overhead;
        let (app_extra, storage_extra) = match placement {
            Placement::Local => (overhead.local_app_ns, overhead.local_storage_ns),
            Placement::Remote => (overhead.remote_app_ns, overhead.remote_storage_ns),
        };
        let costs = match &outcome {
            Ok(invocation) => Costs {
                app_cpu_ns: invocation.cost.app_cpu_ns + app_extra as u64,
                storage_cpu_ns: invocation.cost.storage_cpu_ns + storage_extra as u64,
                bytes_moved: invocation.cost.bytes_returned + args_len,
                round_trips: invocation.cost.round_trips,
            },
            Err(_) => Costs::default(),
        };
        // Failures are reported too: a timeout or an overloaded node is exactly the
        // latency the rate loop must see.
        let completion = Completion {
            fn_id,
            placement,
            latency_ns: latency.as_nanos() as u64,
            costs,
            pushed_back: outcome.as_ref().is_ok_and(|invocation| invocation.pushed_back),
        };
        let done = self.now();
        self.shared.policy.lock().on_completion(done, &completion);
        outcome.map(|mut invocation| {
            invocation.latency = latency;
            invocation
        })
    }
}

/// What the busy meter read at the start of the span under way.
struct BusyMark {
    at: Instant,
    app: Option<Duration>,
    storage: Option<Duration>,
}

async fn tick_loop<B>(shared: Arc<Shared<B>>) {
    let mut mark: Option<BusyMark> = None;
    loop {
        let next = shared.policy.lock().next_tick();
        let wake = if next == Nanos::MAX {
            Instant::now() + IDLE_TICK
        } else {
            shared.epoch + Duration::from_nanos(next.as_nanos())
        };
        // Without a meter there is nothing to report: the ticks alone wake the loop.
        let metered = shared.meter.lock().is_some();
        let busy_due = match (&mark, metered) {
            (_, false) => None,
            (Some(mark), true) => Some(mark.at + BUSY_PERIOD),
            (None, true) => Some(Instant::now()),
        };
        let until = busy_due.map_or(wake, |due| wake.min(due));
        tokio::time::sleep_until(tokio::time::Instant::from_std(until)).await;
        if busy_due.is_some_and(|due| Instant::now() >= due) {
            mark = report_busy(&shared, mark);
        }
        let now = shared.now();
        let (rate, admission) = {
            let mut policy = shared.policy.lock();
            if now >= next {
                policy.tick(now);
            }
            (policy.rate_ops(), policy.admission())
        };
        shared.limiter.lock().set_rate(now, rate);
        shared.gate.set(admission);
    }
}

/// Reads the busy meter, reports the span since `mark` to the policy, and returns the new
/// mark (None without a meter).
fn report_busy<B>(shared: &Shared<B>, mark: Option<BusyMark>) -> Option<BusyMark> {
    let meter = shared.meter.lock().clone()?;
    let (app, storage) = meter.busy();
    let at = Instant::now();
    if let Some(mark) = mark {
        let spent = |now: Option<Duration>, then: Option<Duration>| match (now, then) {
            (Some(now), Some(then)) => Some(now.saturating_sub(then).as_nanos() as u64),
            _ => None,
        };
        let busy = Busy {
            span_ns: (at - mark.at).as_nanos() as u64,
            app_ns: spent(app, mark.app),
            storage_ns: spent(storage, mark.storage),
        };
        let now = shared.now();
        shared.policy.lock().on_busy(now, &busy);
    }
    Some(BusyMark { at, app, storage })
}
