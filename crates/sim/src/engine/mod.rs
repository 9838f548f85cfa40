//! The discrete-event engine: virtual time, an event heap, seeded randomness.
//!
//! The cluster is `app_nodes` app nodes and `storage_nodes` storage nodes, each with its
//! own link to a non-blocking switch. Requests go to the app nodes in turn; each request's
//! data lives on one storage node (drawn by the cluster's sharding), which serves its gets
//! and runs it when it is placed remote.
//!
//! Each node is a FCFS multi-core server with one shared queue (work stealing makes a
//! per-core-queue node behave like one). Because service times are known when a job
//! arrives, a node needs no events of its own: with jobs arriving in time order, job n
//! starts at `max(arrival, earliest core free time)` and takes that core (the
//! Kiefer–Wolfowitz recursion for FCFS G/G/c). A link is the same recursion with one
//! server, in the order messages are sent, so each message hop takes two events: the send
//! when the job that sends it finishes, and the arrival at the next node. Node-wide stalls
//! (see `ClusterModel::stall_rate_hz`) push the start and finish of the jobs they overlap,
//! as a preempt-resume interruption of every core.
//!
//! Ties in time are broken by insertion order, every random draw comes from a seeded
//! ChaCha stream, and no clock is read: a run is a pure function of its inputs.

mod group;
mod hops;
mod node;
mod scale;
mod stats;

use std::collections::BinaryHeap;

use ferry_control::elastic::ELASTIC_PERIOD;
use ferry_control::rate::inflight::refuse_on_arrival;
use ferry_control::{Busy, Completion, Costs, FnId, LatencySketch, Nanos, Placement, Policy};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::model::{ClusterModel, Workload};
use group::{combined_state, Group};
use node::{Link, Node, Stalls};
use stats::Interval;
pub use stats::{CoreJobs, EngineOutput, IntervalSample, WindowStats};

/// Most requests in flight at once; arrivals beyond it are dropped (counted, as the paper's
/// rate limiter drops overflow). 10⁶ requests is seconds of backlog at any rate the
/// controllers leave running, so it only stops a pathological overload from eating memory.
pub const IN_FLIGHT_MAX: usize = 1_000_000;

/// How often each group's policy is told its sides' busy CPU: the real drivers' period.
pub const BUSY_PERIOD: Nanos = Nanos::from_ms(200);

/// Random stream ids: one independent ChaCha stream per purpose, so changing how one is
/// used (e.g. the policy's X) never shifts the draws of another (common random numbers).
const STREAM_ARRIVALS: u64 = 1;
/// Stream for choosing which function a request runs.
const STREAM_FUNCTIONS: u64 = 2;
/// Stream for compute-time draws.
const STREAM_SERVICE: u64 = 3;
/// Stream for app node i's stalls: 4 + 2i (node 0 keeps the stream of the two-node days).
const STREAM_STALLS_APP: u64 = 4;
/// Stream for storage node j's stalls: 5 + 2j.
const STREAM_STALLS_STORAGE: u64 = 5;
/// Stream for choosing each request's storage node (far above the stall streams).
const STREAM_SHARDS: u64 = 1 << 40;
/// Streams of placement group g > 0: arrivals 2^41 + 2g, functions 2^41 + 2g + 1 (group 0
/// keeps [`STREAM_ARRIVALS`] and [`STREAM_FUNCTIONS`]).
const STREAM_GROUPS: u64 = 1 << 41;

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
    pub cluster: &'a ClusterModel,
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
    /// The SLO the windows are judged by: a refused request counts as twice it (None:
    /// refusals count at the wait they were allowed, twice over).
    pub slo: Option<Nanos>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Arrival,
    /// A message of the request leaves its app node.
    AppSend,
    /// A message of the request leaves its storage node.
    StorageSend,
    AppArrive,
    StorageArrive,
    Done,
    Tick,
    Sample,
    /// A placement group's elastic-compute decision.
    Scale,
    /// Every group's policy learns its sides' busy CPU.
    Busy,
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

/// One request in flight.
#[derive(Clone, Copy)]
struct Req {
    admit: u64,
    fn_idx: u32,
    /// Its placement group.
    group: u32,
    /// The app node serving it.
    app_node: u32,
    /// The storage node holding its data.
    storage_node: u32,
    /// Bytes of the message being sent (between a send and its arrival).
    sending: u64,
    /// Hops done: even stages run on the app node, odd ones on the storage node.
    stage: u32,
    placement: Placement,
    app_cpu: u64,
    storage_cpu: u64,
    bytes: u64,
}

struct Engine<'a, 'p> {
    cfg: &'a EngineConfig<'a>,
    /// The placement groups, each with its policy (one group: the whole cluster).
    groups: Vec<Group<'p>>,
    heap: BinaryHeap<Event>,
    seq: u64,
    reqs: Vec<Req>,
    free: Vec<u32>,
    in_flight: usize,
    /// The app nodes and their links.
    apps: Vec<(Node, Link)>,
    /// The storage nodes and their links.
    storages: Vec<(Node, Link)>,
    /// Active cores of each app node (elastic compute).
    app_active: Vec<u32>,
    rng_shards: ChaCha8Rng,
    rng_service: ChaCha8Rng,
    windows: Vec<WindowStats>,
    interval: Interval,
    samples: Vec<IntervalSample>,
    completed: u64,
    dropped: u64,
    refused: u64,
    violations: u64,
    aborted: bool,
    events: u64,
}

fn stream(seed: u64, id: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    r.set_stream(id);
    r
}

/// `count` nodes of `cores` cores with their links; node i's stalls draw from stream
/// `first_stream + 2i`.
fn nodes(cfg: &EngineConfig<'_>, count: u32, cores: u32, first_stream: u64) -> Vec<(Node, Link)> {
    let cl = cfg.cluster;
    (0..u64::from(count))
        .map(|i| {
            let stalls = Stalls::new(
                cl.stall_rate_hz,
                cl.stall_mean,
                cl.stall_length_cv,
                stream(cfg.seed, first_stream + 2 * i),
            );
            (Node::new(cores, stalls), Link::new(cl.bandwidth_gbps, cl.rtt))
        })
        .collect()
}

/// Runs one simulation with `policy` in control of the whole cluster.
pub fn run(cfg: &EngineConfig<'_>, policy: &mut dyn Policy) -> EngineOutput {
    run_groups(cfg, vec![policy])
}

/// Runs one simulation with the cluster split into `policies.len()` placement groups
/// ([`nodes_of_group`]), policy g in control of group g. The caller makes sure every group
/// has at least one node of each kind.
pub fn run_groups(cfg: &EngineConfig<'_>, policies: Vec<&mut dyn Policy>) -> EngineOutput {
    let count = policies.len() as u32;
    let groups = policies
        .into_iter()
        .enumerate()
        .map(|(g, policy)| {
            let g = g as u64;
            let (arrivals, functions) = if g == 0 {
                (STREAM_ARRIVALS, STREAM_FUNCTIONS)
            } else {
                (STREAM_GROUPS + 2 * g, STREAM_GROUPS + 2 * g + 1)
            };
            Group::new(
                cfg.cluster,
                cfg.workload,
                (g as u32, count),
                policy,
                cfg.arrivals == Arrivals::Paced,
                stream(cfg.seed, arrivals),
                stream(cfg.seed, functions),
            )
        })
        .collect();
    let mut e = Engine {
        cfg,
        groups,
        app_active: vec![cfg.cluster.app_cores; cfg.cluster.app_nodes as usize],
        heap: BinaryHeap::with_capacity(1 << 12),
        seq: 0,
        reqs: Vec::with_capacity(1 << 12),
        free: Vec::new(),
        in_flight: 0,
        apps: nodes(cfg, cfg.cluster.app_nodes, cfg.cluster.app_cores, STREAM_STALLS_APP),
        storages: nodes(
            cfg,
            cfg.cluster.storage_nodes,
            cfg.cluster.storage_cores,
            STREAM_STALLS_STORAGE,
        ),
        rng_shards: stream(cfg.seed, STREAM_SHARDS),
        rng_service: stream(cfg.seed, STREAM_SERVICE),
        windows: cfg
            .windows
            .iter()
            .map(|&(s, t)| WindowStats::new(s, t, cfg.workload.functions.len()))
            .collect(),
        interval: Interval::default(),
        samples: Vec::new(),
        completed: 0,
        dropped: 0,
        refused: 0,
        violations: 0,
        aborted: false,
        events: 0,
    };
    e.main_loop();
    let end = Nanos(e.heap.peek().map_or(cfg.duration.0, |ev| ev.time().min(cfg.duration.0)));
    let final_state = e.state();
    EngineOutput {
        samples: e.samples,
        windows: e.windows,
        completed: e.completed,
        dropped: e.dropped,
        refused: e.refused,
        aborted: e.aborted,
        end: if e.aborted { end } else { cfg.duration },
        final_state,
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

    /// The groups' policies' states as one.
    fn state(&self) -> ferry_control::PolicyState {
        let states: Vec<_> = self.groups.iter().map(|g| g.policy.state()).collect();
        combined_state(&states)
    }

    fn schedule_tick(&mut self, now: u64, g: u32) {
        let group = &mut self.groups[g as usize];
        let next = group.policy.next_tick().0.max(now + 1);
        if next < self.cfg.duration.0 && next != group.tick_scheduled {
            group.tick_scheduled = next;
            self.push(next, Kind::Tick, g);
        }
    }

    fn main_loop(&mut self) {
        for g in 0..self.groups.len() as u32 {
            if self.cfg.arrivals_from < self.cfg.duration {
                self.push(self.cfg.arrivals_from.0, Kind::Arrival, g);
            }
            self.schedule_tick(0, g);
            if let Some(elastic) = self.groups[g as usize].elastic {
                self.resize(0, g, elastic.initial_cores());
                self.push(ELASTIC_PERIOD.0, Kind::Scale, g);
            }
        }
        if let Some(iv) = self.cfg.timeline_interval {
            self.push(iv.0.max(1), Kind::Sample, 0);
        }
        self.push(BUSY_PERIOD.0, Kind::Busy, 0);
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
                Kind::Arrival => self.arrival(t, ev.req),
                Kind::AppSend => self.app_send(t, ev.req),
                Kind::StorageSend => self.storage_send(t, ev.req),
                Kind::AppArrive => self.app_job(t, ev.req),
                Kind::StorageArrive => self.storage_job(t, ev.req),
                Kind::Done => self.done(t, ev.req),
                Kind::Tick => {
                    let demand = self.demand_ops(t, ev.req);
                    let group = &mut self.groups[ev.req as usize];
                    group.tick_scheduled = u64::MAX;
                    group.policy.tick(Nanos(t));
                    let rate = group.admit_ops(demand);
                    if let Some(b) = group.bucket.as_mut() {
                        b.set_rate(Nanos(t), rate);
                    }
                    self.schedule_tick(t, ev.req);
                }
                Kind::Scale => {
                    self.scale(t, ev.req);
                    self.push(t + ELASTIC_PERIOD.0, Kind::Scale, ev.req);
                }
                Kind::Busy => {
                    self.report_busy(t);
                    self.push(t + BUSY_PERIOD.0, Kind::Busy, 0);
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

    /// Group `g`'s limiter releases a request at `t`.
    fn arrival(&mut self, t: u64, g: u32) {
        let demand = self.demand_ops(t, g);
        let next = self.groups[g as usize].next_arrival(t, demand);
        if next < self.cfg.duration.0 {
            self.push(next.max(t), Kind::Arrival, g);
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
        let group = &mut self.groups[g as usize];
        let Some(fn_idx) = group.draw_function(phase) else {
            // No function of this phase has data in the group.
            return;
        };
        self.interval.admitted += 1;
        if let Some(w) = self.window_at(t) {
            w.admitted += 1;
        }
        // The policy's window: beyond it a request waits, first come first served, or is
        // refused when its wait would break the SLO (as the client runtime does).
        let group = &mut self.groups[g as usize];
        let admission = group.policy.admission();
        if group.in_flight < admission.inflight_max && group.waiting.is_empty() {
            self.dispatch(t, t, g, fn_idx);
        } else if refuse_on_arrival(group.waiting.len(), admission.rate_ops, admission.wait_max) {
            self.refuse(t, g, fn_idx, admission.wait_max);
        } else {
            group.waiting.push_back((t, fn_idx));
        }
    }

    /// Sends group `g`'s request for function `fn_idx`, due at `due`, at `t`.
    fn dispatch(&mut self, t: u64, due: u64, g: u32, fn_idx: u32) {
        let group = &mut self.groups[g as usize];
        group.in_flight += 1;
        let placement = group.policy.place(Nanos(t), FnId(fn_idx));
        let (app_node, storage_node) = group.draw_nodes(self.cfg.cluster, fn_idx as usize, &mut self.rng_shards);
        let req = Req {
            admit: due,
            fn_idx,
            group: g,
            app_node,
            storage_node,
            sending: 0,
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
        if placement == Placement::Remote {
            self.interval.admitted_remote += 1;
        }
        self.app_job(t, id);
    }

    /// Group `g` refuses a request for function `fn_idx` at `t`: it counts, in every
    /// window it falls in, as twice the SLO.
    fn refuse(&mut self, t: u64, g: u32, fn_idx: u32, wait_max: Nanos) {
        self.refused += 1;
        self.groups[g as usize].policy.on_refused(Nanos(t), FnId(fn_idx));
        let latency_ns = match self.cfg.slo {
            Some(slo) => 2 * slo.0,
            None => 2 * wait_max.0.min(u64::MAX / 4),
        } as f64;
        if self.cfg.timeline_interval.is_some() {
            self.interval
                .latency
                .get_or_insert_with(LatencySketch::new)
                .record(latency_ns);
        }
        if let Some(w) = self.window_at(t) {
            w.latency.record(latency_ns);
            w.fn_latency[fn_idx as usize].record(latency_ns);
        }
    }

    /// A slot of group `g`'s window freed at `t`: the oldest waiters take the free slots
    /// (or are refused, if their wait has already outlasted what the SLO left them).
    fn release(&mut self, t: u64, g: u32) {
        let group = &mut self.groups[g as usize];
        group.in_flight -= 1;
        loop {
            let group = &mut self.groups[g as usize];
            let admission = group.policy.admission();
            if group.in_flight >= admission.inflight_max {
                break;
            }
            let Some((due, fn_idx)) = group.waiting.pop_front() else {
                break;
            };
            if t - due > admission.wait_max.0 {
                self.refuse(t, g, fn_idx, admission.wait_max);
            } else {
                self.dispatch(t, due, g, fn_idx);
            }
        }
    }

    /// Tells every group's policy its sides' busy CPU over the last [`BUSY_PERIOD`].
    fn report_busy(&mut self, t: u64) {
        for group in &mut self.groups {
            let busy = Busy {
                span_ns: BUSY_PERIOD.0,
                app_ns: Some(std::mem::take(&mut group.busy_app_ns)),
                storage_ns: Some(std::mem::take(&mut group.busy_storage_ns)),
            };
            group.policy.on_busy(Nanos(t), &busy);
        }
    }

    fn done(&mut self, t: u64, id: u32) {
        let r = self.reqs[id as usize];
        self.free.push(id);
        self.in_flight -= 1;
        self.completed += 1;
        self.release(t, r.group);
        let latency_ns = t - r.admit;
        let completion = Completion {
            fn_id: FnId(r.fn_idx),
            placement: r.placement,
            latency_ns,
            costs: Costs {
                app_cpu_ns: r.app_cpu,
                storage_cpu_ns: r.storage_cpu,
                bytes_moved: r.bytes,
                round_trips: r.stage / 2,
            },
            pushed_back: false,
        };
        self.groups[r.group as usize]
            .policy
            .on_completion(Nanos(t), &completion);
        if self.cfg.timeline_interval.is_some() {
            self.interval.completed += 1;
            self.interval
                .latency
                .get_or_insert_with(LatencySketch::new)
                .record(latency_ns as f64);
        }
        let abort = self.cfg.abort;
        // A function with an SLO of its own is judged by it.
        let own_slo = self.cfg.workload.functions[r.fn_idx as usize].slo;
        if let Some(w) = self.window_at(t) {
            w.latency.record(latency_ns as f64);
            w.fn_latency[r.fn_idx as usize].record(latency_ns as f64);
            if r.placement == Placement::Remote {
                w.remote_completed += 1;
            }
            if let Some(a) = abort {
                if latency_ns > own_slo.map_or(a.latency_ns, |s| s.0) {
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
            state: self.state(),
            app_cores: self.app_active.iter().sum(),
            groups: if self.groups.len() > 1 {
                self.groups.iter().map(|g| g.policy.state()).collect()
            } else {
                Vec::new()
            },
            admitted: iv.admitted,
            admitted_remote: iv.admitted_remote,
        });
    }
}
