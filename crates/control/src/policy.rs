//! The one interface every placement policy implements, and the values it is driven
//! with (the static policies are in [`crate::fixed`]).
//!
//! A policy is driven by three calls with the time passed in — `place` per request,
//! `on_completion` per finished request, `tick` when `next_tick` says so — and exposes the
//! rate its limiter should run at. Kayak's dual loop, ASFP pushback, Pyxis' turning point
//! and Kayak+ all fit this shape: they differ only in what state they keep per function
//! and what they learn from completions.

use crate::rate::{Admission, RateLoop};
use crate::time::Nanos;

/// Identifies a storage function (the index the driver assigns to each function it runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FnId(pub u32);

/// Where one request runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Placement {
    /// On the app node, fetching data with get/put round trips ("KV", ship data).
    Local,
    /// On the storage node, one invoke round trip ("RPC", ship compute).
    Remote,
}

/// What one request cost, as measured by the data plane (Pyxis' c_i and s_i inputs).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Costs {
    /// App-node CPU time spent on the request.
    pub app_cpu_ns: u64,
    /// Storage-node CPU time spent on the request (reported back in the response).
    pub storage_cpu_ns: u64,
    /// Payload bytes that crossed the network for the request, both directions.
    pub bytes_moved: u64,
    /// Messages the request sent to a storage node and waited for (1 for a remote run; a
    /// local run's gets and commit): each is a visit to both sides' queues, which is what
    /// the latency model multiplies their waits by.
    pub round_trips: u32,
}

/// One finished request, as reported to the policy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Completion {
    /// The function that ran.
    pub fn_id: FnId,
    /// Where the policy placed it.
    pub placement: Placement,
    /// End-to-end latency from the *intended* send time (so client queueing is not hidden).
    pub latency_ns: u64,
    /// What it cost each side.
    pub costs: Costs,
    /// The storage node pushed the invocation back to run locally (ASFP); false otherwise.
    pub pushed_back: bool,
}

#[cfg(test)]
impl Completion {
    /// A test's completion of one round trip that moved no bytes and was not pushed back.
    pub(crate) fn of(fn_id: FnId, placement: Placement, latency_ns: u64, app_cpu_ns: u64, storage_cpu_ns: u64) -> Self {
        Completion {
            fn_id,
            placement,
            latency_ns,
            costs: Costs {
                app_cpu_ns,
                storage_cpu_ns,
                bytes_moved: 0,
                round_trips: 1,
            },
            pushed_back: false,
        }
    }
}

/// Each side's busy CPU over one span, as the driver measured it (the node: all of its
/// threads, I/O included; the app side: its whole process), with the completions of that
/// span: the utilisation law (busy = throughput × demand) says what a request costs each
/// side, including what the per-request costs leave out.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Busy {
    /// The span measured, ns.
    pub span_ns: u64,
    /// CPU the app side was busy over it, ns (None: not measured).
    pub app_ns: Option<u64>,
    /// CPU the storage side was busy over it, ns (None: not measured).
    pub storage_ns: Option<u64>,
}

/// A read-only view of a policy's control state, for timelines and reports.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PolicyState {
    /// The rate the limiter should admit requests at.
    pub rate_ops: f64,
    /// The fraction of requests the policy currently sends remote (X).
    pub rpc_fraction: f64,
    /// The policy's latest tail-latency estimate, if it keeps one.
    pub latency_ns_estimate: Option<f64>,
    /// Placement searches started so far, for policies that search (the first is the
    /// initial one; later ones are rescans); None for policies that do not.
    pub searches: Option<u64>,
}

impl PolicyState {
    /// The state of a policy whose rate its R loop `rate` sets, sending `rpc_fraction`
    /// remote.
    pub fn of_rate_loop(rate: &RateLoop, rpc_fraction: f64, searches: Option<u64>) -> PolicyState {
        PolicyState {
            rate_ops: rate.rate_ops(),
            rpc_fraction,
            latency_ns_estimate: rate.latency_ns_estimate(),
            searches,
        }
    }
}

/// A placement policy with its rate control: a pure state machine fed with time.
///
/// Contract for drivers: call `place` for every admitted request, `on_completion` for every
/// finished one, and `tick(now)` once `now >= next_tick()`; admit requests at `rate_ops()`
/// (re-read it after every tick). Times passed in never decrease.
pub trait Policy: Send {
    /// Short name for reports (`kayak`, `rpc`, `fixed:0.40`, ...).
    fn name(&self) -> String;

    /// Decides where the request for `fn_id` admitted at `now` runs.
    fn place(&mut self, now: Nanos, fn_id: FnId) -> Placement;

    /// Learns from a request that finished at `now`.
    fn on_completion(&mut self, now: Nanos, completion: &Completion);

    /// Runs the control work due at `now` (rate and fraction updates).
    fn tick(&mut self, now: Nanos);

    /// The R loop that sets this policy's rate, if one does: unless the policy says
    /// otherwise, its ticks, its rate and its admission are the loop's.
    fn rate_loop(&self) -> Option<&RateLoop> {
        None
    }

    /// When the policy next wants `tick` called; `Nanos::MAX` if never.
    fn next_tick(&self) -> Nanos {
        self.rate_loop().map_or(Nanos::MAX, RateLoop::next_tick)
    }

    /// The rate the limiter should admit requests at, in requests per second (a policy
    /// without an R loop must say).
    fn rate_ops(&self) -> f64 {
        self.rate_loop().map_or(0.0, RateLoop::rate_ops)
    }

    /// What the driver admits by: the rate, the window on requests in flight, and the
    /// longest a request may wait for a slot before it is refused. Policies without a
    /// window admit by the rate alone.
    fn admission(&self) -> Admission {
        match self.rate_loop() {
            Some(rate) => rate.admission(),
            None => Admission::rate_only(self.rate_ops()),
        }
    }

    /// Learns that the driver refused a request at `now` (its wait for a slot in the
    /// window would have broken the SLO): a rate loop counts it as over the SLO.
    fn on_refused(&mut self, _now: Nanos, _fn_id: FnId) {}

    /// Learns each side's measured busy CPU over the last span (see [`Busy`]): policies
    /// that weigh the sides' loads scale the per-request costs they measure to it.
    fn on_busy(&mut self, _now: Nanos, _busy: &Busy) {}

    /// The current control state, for timelines.
    fn state(&self) -> PolicyState;

    /// The app side now runs on `app_cores` cores (elastic compute resized it at `now`).
    /// Policies that place by a load model move their split; the others adapt through the
    /// latencies they measure.
    fn set_app_cores(&mut self, _now: Nanos, _app_cores: f64) {}

    /// Whether remote invocations accept being handed back by an overloaded storage node
    /// (ASFP pushback). Only reactive policies built around it say yes.
    fn allows_pushback(&self) -> bool {
        false
    }
}
