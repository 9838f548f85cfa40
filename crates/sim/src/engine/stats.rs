//! What a run measures: per-window statistics, timeline samples and the run's output.

use ferry_control::{LatencySketch, Nanos, PolicyState};

/// Running statistics of the current timeline interval.
#[derive(Default)]
pub(super) struct Interval {
    pub(super) completed: u64,
    pub(super) latency: Option<LatencySketch>,
    pub(super) admitted: u64,
    pub(super) admitted_remote: u64,
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
    /// The same, per function (by index).
    pub fn_latency: Vec<LatencySketch>,
    /// Completions that were placed remote.
    pub remote_completed: u64,
    /// Requests admitted in the window.
    pub admitted: u64,
    /// The app cores' jobs that arrived in the window.
    pub app: CoreJobs,
    /// The storage cores' jobs that arrived in the window.
    pub storage: CoreJobs,
}

/// The jobs one side's cores took on in a window.
#[derive(Clone, Copy, Debug, Default)]
pub struct CoreJobs {
    /// Their CPU time.
    pub busy_ns: u64,
    /// The sum of their queueing delays.
    pub wait_ns: u64,
    /// How many.
    pub count: u64,
}

impl CoreJobs {
    /// One job of `service_ns` that waited `wait_ns` for a core.
    pub(super) fn record(&mut self, service_ns: u64, wait_ns: u64) {
        self.busy_ns += service_ns;
        self.wait_ns += wait_ns;
        self.count += 1;
    }
}

impl WindowStats {
    pub(super) fn new(start: Nanos, end: Nanos, functions: usize) -> Self {
        WindowStats {
            start,
            end,
            latency: LatencySketch::new(),
            fn_latency: (0..functions).map(|_| LatencySketch::new()).collect(),
            remote_completed: 0,
            admitted: 0,
            app: CoreJobs::default(),
            storage: CoreJobs::default(),
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
    /// The policy's state at the end of the interval (with placement groups: theirs
    /// combined, rates summed and X weighted by rate).
    pub state: PolicyState,
    /// App cores active at the end of the interval (elastic compute), over all app nodes.
    pub app_cores: u32,
    /// With placement groups, each group's policy state; empty otherwise.
    pub groups: Vec<PolicyState>,
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
    /// Requests the policy's window refused (their wait for a slot would have broken the
    /// SLO); each counts in the windows' latencies as twice the SLO.
    pub refused: u64,
    /// Whether the abort condition fired.
    pub aborted: bool,
    /// Simulated time reached.
    pub end: Nanos,
    /// The policy's state at the end.
    pub final_state: PolicyState,
    /// Events processed (for performance reporting).
    pub events: u64,
}
