//! The discrete-event engine: virtual time, an event heap, seeded randomness.
//!
//! Each node is a FCFS multi-core server with one shared queue (work stealing makes a
//! per-core-queue node behave like one). Because service times are known when a job
//! arrives, a node needs no events of its own: with jobs arriving in time order, job n
//! starts at `max(arrival, earliest core free time)` and takes that core (the
//! Kiefer–Wolfowitz recursion for FCFS G/G/c), so one event per message hop suffices —
//! the arrival at the next node, scheduled at `finish + network delay`. The network is a
//! pure delay per message (half the RTT plus size over bandwidth, no link queueing).
//! Node-wide stalls (see `ClusterConfig::stall_rate_hz`) push the start and finish of the
//! jobs they overlap, as a preempt-resume interruption of every core.
//!
//! Ties in time are broken by insertion order, every random draw comes from a seeded
//! ChaCha stream, and no clock is read: a run is a pure function of its inputs.

use std::collections::BinaryHeap;

use ferry_control::{Completion, Costs, FnId, LatencySketch, Nanos, Placement, Policy, PolicyState, TokenBucket};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::model::{ClusterConfig, ComputeDist, Workload};

/// Most requests in flight at once; arrivals beyond it are dropped (counted, as the paper's
/// rate limiter drops overflow). 10⁶ requests is seconds of backlog at any rate the
/// controllers leave running, so it only stops a pathological overload from eating memory.
pub const IN_FLIGHT_MAX: usize = 1_000_000;

/// Burst of the token bucket in paced mode: one request, i.e. evenly spaced arrivals.
const PACED_BURST: f64 = 1.0;

/// Random stream ids: one independent ChaCha stream per purpose, so changing how one is
/// used (e.g. the policy's X) never shifts the draws of another (common random numbers).
const STREAM_ARRIVALS: u64 = 1;
/// Stream for choosing which function a request runs.
const STREAM_FUNCTIONS: u64 = 2;
/// Stream for compute-time draws.
const STREAM_SERVICE: u64 = 3;
/// Stream for the app node's stalls.
const STREAM_STALLS_APP: u64 = 4;
/// Stream for the storage node's stalls.
const STREAM_STALLS_STORAGE: u64 = 5;

/// How the rate limiter releases requests from the saturating backlog at rate R.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Arrivals {
    /// Exponential gaps with mean 1/R: many independent clients behind one limiter.
    Poisson,
    /// A token bucket (burst 1) with the backlog always waiting: one request every 1/R.
    Paced,
}

/// Stop a run early once its answer is known (used by sweeps).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Abort {
    /// A completion slower than this inside a measurement window is a violation.
    pub latency_ns: u64,
    /// Stop once this many violations were seen.
    pub violations_max: u64,
    /// Stop once this many requests are in flight (a runaway backlog).
    pub in_flight_max: usize,
}

/// What to run.
pub struct EngineConfig<'a> {
    /// The nodes and network.
    pub cluster: &'a ClusterConfig,
    /// The requests.
    pub workload: &'a Workload,
    /// Seed of every random stream of the run.
    pub seed: u64,
    /// Simulated time to run for.
    pub duration: Nanos,
    /// Arrival process behind the limiter.
    pub arrivals: Arrivals,
    /// Emit a timeline row every this often (None: no timeline).
    pub timeline_interval: Option<Nanos>,
    /// Time windows `[start, end)` over which to collect detailed statistics; sorted and
    /// disjoint.
    pub windows: Vec<(Nanos, Nanos)>,
    /// Early stop condition.
    pub abort: Option<Abort>,
    /// No request is released before this time (the nodes' stall processes run from 0
    /// regardless, so a run released late sees the very stalls a run from 0 sees then).
    pub arrivals_from: Nanos,
}

/// Statistics over one measurement window.
#[derive(Clone)]
pub struct WindowStats {
    /// Window start.
    pub start: Nanos,
    /// Window end (exclusive).
    pub end: Nanos,
    /// Latencies of the completions in the window, ns.
    pub latency: LatencySketch,
    /// Completions that were placed remote.
    pub remote_completed: u64,
    /// Requests admitted in the window.
    pub admitted: u64,
    /// App CPU time of jobs started in the window.
    pub app_busy_ns: u64,
    /// Storage CPU time of jobs started in the window.
    pub storage_busy_ns: u64,
    /// Sum of queueing delays of storage jobs arriving in the window.
    pub storage_wait_ns: u64,
    /// Storage jobs arriving in the window.
    pub storage_jobs: u64,
    /// Sum of queueing delays of app jobs arriving in the window.
    pub app_wait_ns: u64,
    /// App jobs arriving in the window.
    pub app_jobs: u64,
}

impl WindowStats {
    fn new(start: Nanos, end: Nanos) -> Self {
        WindowStats {
            start,
            end,
            latency: LatencySketch::new(),
            remote_completed: 0,
            admitted: 0,
            app_busy_ns: 0,
            storage_busy_ns: 0,
            storage_wait_ns: 0,
            storage_jobs: 0,
            app_wait_ns: 0,
            app_jobs: 0,
        }
    }

    /// Completions per second over the window.
    pub fn throughput_ops(&self) -> f64 {
        let secs = (self.end - self.start).as_secs_f64();
        if secs > 0.0 {
            self.latency.count() as f64 / secs
        } else {
            0.0
        }
    }
}

/// One timeline interval as measured.
#[derive(Clone, Debug, PartialEq)]
pub struct IntervalSample {
    /// End of the interval.
    pub t: Nanos,
    /// Completions in the interval.
    pub completed: u64,
    /// p99 of those completions, ns.
    pub latency_ns_p99: Option<f64>,
    /// Mean of those completions, ns.
    pub latency_ns_mean: Option<f64>,
    /// The policy's state at the end of the interval.
    pub state: PolicyState,
    /// Requests admitted in the interval.
    pub admitted: u64,
    /// Of those, placed remote.
    pub admitted_remote: u64,
}

/// Everything a run measured.
pub struct EngineOutput {
    /// Timeline, if requested.
    pub samples: Vec<IntervalSample>,
    /// The requested windows, filled.
    pub windows: Vec<WindowStats>,
    /// Completions over the whole run.
    pub completed: u64,
    /// Arrivals dropped because `IN_FLIGHT_MAX` requests were in flight.
    pub dropped: u64,
    /// Whether the abort condition fired.
    pub aborted: bool,
    /// Simulated time reached.
    pub end: Nanos,
    /// The policy's state at the end.
    pub final_state: PolicyState,
    /// Events processed (for performance reporting).
    pub events: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Arrival,
    AppArrive,
    StorageArrive,
    Done,
    Tick,
    Sample,
}

/// A heap entry; `key` is `(time << 64) | seq`, so ties keep insertion order.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Event {
    key: u128,
    req: u32,
    kind: Kind,
}

impl Event {
    fn time(&self) -> u64 {
        (self.key >> 64) as u64
    }
}

impl Ord for Event {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        // Reversed: BinaryHeap is a max-heap, the engine wants the earliest event.
        other.key.cmp(&self.key)
    }
}

impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Node-wide stalls: a Poisson process of intervals during which no core of the node runs.
/// Intervals are generated lazily, in time order, and dropped once in the past.
struct Stalls {
    /// Mean gap between stalls in ns (0: no stalls).
    gap_mean_ns: f64,
    /// Mean stall length in ns.
    len_mean_ns: f64,
    /// Generated intervals `[a, b)`, sorted, non-overlapping.
    intervals: std::collections::VecDeque<(u64, u64)>,
    /// End of the last generated interval.
    last_end: u64,
    /// Source of the gaps and lengths.
    rng: ChaCha8Rng,
}

impl Stalls {
    fn new(rate_hz: f64, mean: Nanos, rng: ChaCha8Rng) -> Self {
        Stalls {
            gap_mean_ns: if rate_hz > 0.0 && mean.0 > 0 {
                1e9 / rate_hz
            } else {
                0.0
            },
            len_mean_ns: mean.0 as f64,
            intervals: std::collections::VecDeque::new(),
            last_end: 0,
            rng,
        }
    }

    fn exp(&mut self, mean: f64) -> u64 {
        let u: f64 = self.rng.gen();
        (-(1.0 - u).ln() * mean).round() as u64
    }

    /// Makes sure intervals are generated past `t`.
    fn ensure(&mut self, t: u64) {
        while self.last_end <= t {
            let a = self.last_end + self.exp(self.gap_mean_ns).max(1);
            let b = a + self.exp(self.len_mean_ns).max(1);
            self.intervals.push_back((a, b));
            self.last_end = b;
        }
    }

    /// Runs `work` ns of CPU starting no earlier than `s` (with `now <= s`): returns the
    /// actual (start, finish), pushed back by any stall overlapping the job.
    fn run(&mut self, now: u64, s: u64, work: u64) -> (u64, u64) {
        if self.gap_mean_ns == 0.0 {
            return (s, s + work);
        }
        while self.intervals.front().is_some_and(|&(_, b)| b <= now) {
            self.intervals.pop_front();
        }
        let mut t = s;
        let mut left = work;
        let mut start = None;
        let mut i = 0;
        loop {
            if i == self.intervals.len() {
                self.ensure(t + left);
            }
            let (a, b) = self.intervals[i];
            i += 1;
            if b <= t {
                continue;
            }
            if a <= t {
                // Inside a stall: nothing runs until it ends.
                t = b;
                continue;
            }
            let st = *start.get_or_insert(t);
            if t + left <= a {
                return (st, t + left);
            }
            left -= a - t;
            t = b;
        }
    }
}

/// A FCFS node with `free_at.len()` cores sharing one queue, subject to node-wide stalls.
struct Node {
    /// When each core becomes free.
    free_at: Vec<u64>,
    /// The node's stall process.
    stalls: Stalls,
}

impl Node {
    fn new(cores: u32, stalls: Stalls) -> Self {
        Node {
            free_at: vec![0; cores as usize],
            stalls,
        }
    }

    /// Serves a job arriving at `t` needing `service` ns: returns (start, finish).
    fn serve(&mut self, t: u64, service: u64) -> (u64, u64) {
        let mut best = 0;
        let mut best_at = self.free_at[0];
        for (i, &f) in self.free_at.iter().enumerate().skip(1) {
            if f < best_at {
                best = i;
                best_at = f;
            }
        }
        // Stalls hit every core alike, so the earliest-free core is still the one to use.
        let (start, finish) = self.stalls.run(t, t.max(best_at), service);
        self.free_at[best] = finish;
        (start, finish)
    }
}

/// One request in flight.
#[derive(Clone, Copy)]
struct Req {
    admit: u64,
    fn_idx: u32,
    /// Hops done: even stages run on the app node, odd ones on the storage node.
    stage: u32,
    placement: Placement,
    app_cpu: u64,
    storage_cpu: u64,
    bytes: u64,
}

/// Running statistics of the current timeline interval.
#[derive(Default)]
struct Interval {
    completed: u64,
    latency: Option<LatencySketch>,
    admitted: u64,
    admitted_remote: u64,
}

struct Engine<'a, 'p> {
    cfg: &'a EngineConfig<'a>,
    policy: &'p mut dyn Policy,
    heap: BinaryHeap<Event>,
    seq: u64,
    reqs: Vec<Req>,
    free: Vec<u32>,
    in_flight: usize,
    app: Node,
    storage: Node,
    rng_arrivals: ChaCha8Rng,
    rng_functions: ChaCha8Rng,
    rng_service: ChaCha8Rng,
    bucket: Option<TokenBucket>,
    /// Cumulative weights of each phase's mix, for function draws.
    phase_cdf: Vec<Vec<(f64, u32)>>,
    windows: Vec<WindowStats>,
    interval: Interval,
    samples: Vec<IntervalSample>,
    tick_scheduled: u64,
    completed: u64,
    dropped: u64,
    violations: u64,
    aborted: bool,
    events: u64,
}

fn stream(seed: u64, id: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    r.set_stream(id);
    r
}

/// Runs one simulation with `policy` in control.
pub fn run(cfg: &EngineConfig<'_>, policy: &mut dyn Policy) -> EngineOutput {
    let phase_cdf = cfg
        .workload
        .phases
        .iter()
        .map(|p| {
            let mut acc = 0.0;
            p.entries
                .iter()
                .map(|&(i, w)| {
                    acc += w;
                    (acc, i as u32)
                })
                .collect()
        })
        .collect();
    let bucket = match cfg.arrivals {
        Arrivals::Poisson => None,
        Arrivals::Paced => Some(
            TokenBucket::new(Nanos::ZERO, policy.rate_ops().max(1e-3), PACED_BURST)
                // Invariant: the rate is clamped positive and the burst is a valid constant.
                .expect("valid token bucket parameters"),
        ),
    };
    let mut e = Engine {
        cfg,
        policy,
        heap: BinaryHeap::with_capacity(1 << 12),
        seq: 0,
        reqs: Vec::with_capacity(1 << 12),
        free: Vec::new(),
        in_flight: 0,
        app: Node::new(
            cfg.cluster.app_cores,
            Stalls::new(
                cfg.cluster.stall_rate_hz,
                cfg.cluster.stall_mean,
                stream(cfg.seed, STREAM_STALLS_APP),
            ),
        ),
        storage: Node::new(
            cfg.cluster.storage_cores,
            Stalls::new(
                cfg.cluster.stall_rate_hz,
                cfg.cluster.stall_mean,
                stream(cfg.seed, STREAM_STALLS_STORAGE),
            ),
        ),
        rng_arrivals: stream(cfg.seed, STREAM_ARRIVALS),
        rng_functions: stream(cfg.seed, STREAM_FUNCTIONS),
        rng_service: stream(cfg.seed, STREAM_SERVICE),
        bucket,
        phase_cdf,
        windows: cfg.windows.iter().map(|&(s, t)| WindowStats::new(s, t)).collect(),
        interval: Interval::default(),
        samples: Vec::new(),
        tick_scheduled: u64::MAX,
        completed: 0,
        dropped: 0,
        violations: 0,
        aborted: false,
        events: 0,
    };
    e.main_loop();
    let end = Nanos(e.heap.peek().map_or(cfg.duration.0, |ev| ev.time().min(cfg.duration.0)));
    EngineOutput {
        samples: e.samples,
        windows: e.windows,
        completed: e.completed,
        dropped: e.dropped,
        aborted: e.aborted,
        end: if e.aborted { end } else { cfg.duration },
        final_state: e.policy.state(),
        events: e.events,
    }
}

impl Engine<'_, '_> {
    fn push(&mut self, t: u64, kind: Kind, req: u32) {
        self.seq += 1;
        self.heap.push(Event {
            key: ((t as u128) << 64) | self.seq as u128,
            req,
            kind,
        });
    }

    fn schedule_tick(&mut self, now: u64) {
        let next = self.policy.next_tick().0.max(now + 1);
        if next < self.cfg.duration.0 && next != self.tick_scheduled {
            self.tick_scheduled = next;
            self.push(next, Kind::Tick, 0);
        }
    }

    fn main_loop(&mut self) {
        if self.cfg.arrivals_from < self.cfg.duration {
            self.push(self.cfg.arrivals_from.0, Kind::Arrival, 0);
        }
        self.schedule_tick(0);
        if let Some(iv) = self.cfg.timeline_interval {
            self.push(iv.0.max(1), Kind::Sample, 0);
        }
        let end = self.cfg.duration.0;
        while let Some(ev) = self.heap.pop() {
            let t = ev.time();
            if t > end {
                // The heap is ordered: everything left is later still.
                break;
            }
            if t == end {
                // Only a sample due exactly at the end still runs: it closes the last interval.
                if ev.kind == Kind::Sample {
                    self.sample(t);
                }
                continue;
            }
            self.events += 1;
            match ev.kind {
                Kind::Arrival => self.arrival(t),
                Kind::AppArrive => self.app_job(t, ev.req),
                Kind::StorageArrive => self.storage_job(t, ev.req),
                Kind::Done => self.done(t, ev.req),
                Kind::Tick => {
                    self.tick_scheduled = u64::MAX;
                    self.policy.tick(Nanos(t));
                    if let Some(b) = self.bucket.as_mut() {
                        b.set_rate(Nanos(t), self.policy.rate_ops());
                    }
                    self.schedule_tick(t);
                }
                Kind::Sample => {
                    self.sample(t);
                    if let Some(iv) = self.cfg.timeline_interval {
                        self.push(t + iv.0.max(1), Kind::Sample, 0);
                    }
                }
            }
            if self.aborted {
                break;
            }
        }
    }

    fn window_at(&mut self, t: u64) -> Option<&mut WindowStats> {
        // Few windows (one per phase at most): a scan is cheapest.
        self.windows.iter_mut().find(|w| w.start.0 <= t && t < w.end.0)
    }

    fn arrival(&mut self, t: u64) {
        // Next release from the limiter.
        let next = match self.bucket.as_mut() {
            None => {
                let rate = self.policy.rate_ops().max(1e-3);
                let u: f64 = self.rng_arrivals.gen();
                let gap = -(1.0 - u).ln() * 1e9 / rate;
                // Round, not truncate: flooring would shorten every gap by 0.5 ns on average,
                // a visible rate bias at Mops rates (0.3 % at 6.4 Mops).
                t.saturating_add(gap.min(u64::MAX as f64 / 2.0).round() as u64)
            }
            Some(b) => {
                b.try_admit(Nanos(t));
                b.next_admit_at(Nanos(t)).0
            }
        };
        if next < self.cfg.duration.0 {
            self.push(next.max(t), Kind::Arrival, 0);
        }
        if self.in_flight >= IN_FLIGHT_MAX {
            self.dropped += 1;
            return;
        }
        if let Some(a) = self.cfg.abort {
            if self.in_flight >= a.in_flight_max {
                self.aborted = true;
                return;
            }
        }
        let phase = self.cfg.workload.phase_at(Nanos(t));
        let cdf = &self.phase_cdf[phase];
        let fn_idx = if cdf.len() == 1 {
            cdf[0].1
        } else {
            let u: f64 = self.rng_functions.gen();
            cdf.iter()
                .find(|&&(c, _)| u < c)
                .map_or(cdf[cdf.len() - 1].1, |&(_, i)| i)
        };
        let placement = self.policy.place(Nanos(t), FnId(fn_idx));
        let req = Req {
            admit: t,
            fn_idx,
            stage: 0,
            placement,
            app_cpu: 0,
            storage_cpu: 0,
            bytes: 0,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.reqs[id as usize] = req;
                id
            }
            None => {
                self.reqs.push(req);
                (self.reqs.len() - 1) as u32
            }
        };
        self.in_flight += 1;
        self.interval.admitted += 1;
        if placement == Placement::Remote {
            self.interval.admitted_remote += 1;
        }
        if let Some(w) = self.window_at(t) {
            w.admitted += 1;
        }
        self.app_job(t, id);
    }

    fn compute_ns(&mut self, fn_idx: u32) -> u64 {
        let f = &self.cfg.workload.functions[fn_idx as usize];
        match f.dist {
            ComputeDist::Fixed => f.compute.0,
            ComputeDist::Exp => {
                let u: f64 = self.rng_service.gen();
                (-(1.0 - u).ln() * f.compute.0 as f64).round() as u64
            }
        }
    }

    /// A message of request `id` reaches the app node at `t`.
    fn app_job(&mut self, t: u64, id: u32) {
        let cl = self.cfg.cluster;
        let c = &cl.costs;
        let r = self.reqs[id as usize];
        let f = &self.cfg.workload.functions[r.fn_idx as usize];
        let (accesses, round_trips) = (f.accesses, f.local_round_trips());
        // (service time, bytes of the message sent at the end, or None if the request ends)
        let (service, send) = match (r.placement, r.stage) {
            (Placement::Remote, 0) => (c.app_msg_ns, Some(c.header_bytes)),
            (Placement::Remote, _) => (c.app_msg_ns, None),
            (Placement::Local, 0) => (c.app_invoke_ns + c.app_msg_ns, Some(c.header_bytes)),
            (Placement::Local, s) => {
                // After read k = s / 2 the function computes; after the commit reply
                // (k = accesses + 1) it only finishes.
                let compute = if s / 2 <= accesses {
                    self.compute_ns(r.fn_idx)
                } else {
                    0
                };
                let more = s / 2 < round_trips;
                (c.app_msg_ns + compute, more.then_some(c.header_bytes))
            }
        };
        let (start, finish) = self.app.serve(t, service);
        if let Some(w) = self.window_at(t) {
            w.app_busy_ns += service;
            w.app_wait_ns += start - t;
            w.app_jobs += 1;
        }
        let req = &mut self.reqs[id as usize];
        req.app_cpu += service;
        req.stage += 1;
        match send {
            Some(bytes) => {
                req.bytes += bytes;
                let at = finish + cl.one_way_ns(bytes);
                self.push(at, Kind::StorageArrive, id);
            }
            None => self.push(finish, Kind::Done, id),
        }
    }

    /// A message of request `id` reaches the storage node at `t`.
    fn storage_job(&mut self, t: u64, id: u32) {
        let cl = self.cfg.cluster;
        let c = &cl.costs;
        let r = self.reqs[id as usize];
        let f = &self.cfg.workload.functions[r.fn_idx as usize];
        let (accesses, writes, object_bytes) = (f.accesses, f.writes, f.object_bytes);
        let (service, reply_bytes) = match r.placement {
            Placement::Remote => {
                let mut s = c.storage_msg_ns + c.storage_invoke_ns;
                let factor = c.storage_compute_factor;
                for _ in 0..accesses {
                    let compute = (self.compute_ns(r.fn_idx) as f64 * factor).round() as u64;
                    s += c.storage_get_ns + compute;
                }
                (s + u64::from(writes) * c.storage_get_ns, c.header_bytes)
            }
            // The reads of a local execution, then (for a writing function) its commit,
            // which installs every written object.
            Placement::Local if r.stage / 2 < accesses => {
                (c.storage_msg_ns + c.storage_get_ns, c.header_bytes + object_bytes)
            }
            Placement::Local => (c.storage_msg_ns + u64::from(writes) * c.storage_get_ns, c.header_bytes),
        };
        let (start, finish) = self.storage.serve(t, service);
        if let Some(w) = self.window_at(t) {
            w.storage_busy_ns += service;
            w.storage_wait_ns += start - t;
            w.storage_jobs += 1;
        }
        let req = &mut self.reqs[id as usize];
        req.storage_cpu += service;
        req.stage += 1;
        req.bytes += reply_bytes;
        let at = finish + cl.one_way_ns(reply_bytes);
        self.push(at, Kind::AppArrive, id);
    }

    fn done(&mut self, t: u64, id: u32) {
        let r = self.reqs[id as usize];
        self.free.push(id);
        self.in_flight -= 1;
        self.completed += 1;
        let latency_ns = t - r.admit;
        let completion = Completion {
            fn_id: FnId(r.fn_idx),
            placement: r.placement,
            latency_ns,
            costs: Costs {
                app_cpu_ns: r.app_cpu,
                storage_cpu_ns: r.storage_cpu,
                bytes_moved: r.bytes,
            },
            pushed_back: false,
        };
        self.policy.on_completion(Nanos(t), &completion);
        if self.cfg.timeline_interval.is_some() {
            self.interval.completed += 1;
            self.interval
                .latency
                .get_or_insert_with(LatencySketch::new)
                .record(latency_ns as f64);
        }
        let abort = self.cfg.abort;
        if let Some(w) = self.window_at(t) {
            w.latency.record(latency_ns as f64);
            if r.placement == Placement::Remote {
                w.remote_completed += 1;
            }
            if let Some(a) = abort {
                if latency_ns > a.latency_ns {
                    self.violations += 1;
                    if self.violations >= a.violations_max {
                        self.aborted = true;
                    }
                }
            }
        }
    }

    fn sample(&mut self, t: u64) {
        let iv = std::mem::take(&mut self.interval);
        let (p99, mean) = match &iv.latency {
            Some(s) => (s.quantile(0.99), s.mean()),
            None => (None, None),
        };
        self.samples.push(IntervalSample {
            t: Nanos(t),
            completed: iv.completed,
            latency_ns_p99: p99,
            latency_ns_mean: mean,
            state: self.policy.state(),
            admitted: iv.admitted,
            admitted_remote: iv.admitted_remote,
        });
    }
}
