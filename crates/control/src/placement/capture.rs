//! Each side's capture ratio: how much of its measured busy CPU the per-request costs
//! account for (the utilisation law, U = X · D: busy time over a span is the completions
//! times their demand).
//!
//! The costs a completion carries are what the request's own accounting saw: the node's
//! worker time, the app side's function time plus a calibrated overhead. They leave out
//! what each side spends outside a request (the node's I/O thread and its hand-off to the
//! worker, the client runtime and the load generator on the app CPU), which on loopback is
//! about half of it: a model on those costs put the capacity ~2× too high. The driver
//! measures each side's busy CPU per span; the ratio of that to the sum of the costs
//! completed in the span says by how much the costs must be scaled for the model's load
//! to be the CPU's. The model divides each side's cores by its ratio (the same as
//! multiplying every cost), so placement and capacity read what the CPUs really do.

use crate::placement::load_model::Capacity;
use crate::policy::{Busy, Completion};

/// Lowest ratio believed: the costs may overstate the CPU a little (a request's own clock
/// counts time it was descheduled), not by half.
pub const RATIO_MIN: f64 = 0.5;

/// Highest ratio believed: a side whose costs explain a quarter of its CPU is busy with
/// something else (a neighbour, a spinning thread), and scaling its costs by more would
/// let that dominate the placement.
pub const RATIO_MAX: f64 = 4.0;

/// What each span's sums keep of the sums before it: the ratio is one of sums decayed by
/// this per span (~five spans, a second, of memory), so each span counts by the CPU its
/// requests accounted for. A lightly loaded span (a ramp, where waking idle CPUs costs more
/// per request than the work) then moves the ratio by little, a loaded one by much.
pub const SPAN_DECAY: f64 = 0.8;

/// Least CPU a span's costs must account for before its ratio counts: 10 ms, a tick of
/// the coarsest CPU clock (`/proc`), so that rounding cannot make a ratio.
pub const ACCOUNTED_MIN_NS: f64 = 1e7;

/// One side's ratio.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Side {
    /// Costs of the completions since the last span, ns.
    accounted_ns: f64,
    /// Decayed sums of busy CPU and of accounted costs over the spans measured, ns.
    busy_sum: f64,
    accounted_sum: f64,
}

impl Side {
    fn span(&mut self, busy_ns: Option<u64>) {
        if let Some(busy) = busy_ns {
            if self.accounted_ns >= ACCOUNTED_MIN_NS {
                self.busy_sum = SPAN_DECAY * self.busy_sum + busy as f64;
                self.accounted_sum = SPAN_DECAY * self.accounted_sum + self.accounted_ns;
            }
        }
        self.accounted_ns = 0.0;
    }

    /// The ratio, once a span counted.
    fn ratio(&self) -> Option<f64> {
        (self.accounted_sum > 0.0).then(|| (self.busy_sum / self.accounted_sum).clamp(RATIO_MIN, RATIO_MAX))
    }
}

/// Both sides' capture ratios (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Capture {
    app: Side,
    storage: Side,
}

impl Capture {
    /// Counts one completion's costs toward the span under way.
    pub fn learn(&mut self, c: &Completion) {
        self.app.accounted_ns += c.costs.app_cpu_ns as f64;
        self.storage.accounted_ns += c.costs.storage_cpu_ns as f64;
    }

    /// Ends a span with the busy CPU the driver measured over it.
    pub fn span(&mut self, busy: &Busy) {
        self.app.span(busy.app_ns);
        self.storage.span(busy.storage_ns);
    }

    /// The app side's ratio (1 before any span counted).
    pub fn app_ratio(&self) -> f64 {
        self.app.ratio().unwrap_or(1.0)
    }

    /// The storage side's ratio (1 before any span counted).
    pub fn storage_ratio(&self) -> f64 {
        self.storage.ratio().unwrap_or(1.0)
    }

    /// Whether both sides' ratios are measured.
    pub fn measured(&self) -> bool {
        self.app.ratio().is_some() && self.storage.ratio().is_some()
    }

    /// `capacity` with each side's cores divided by its ratio: the cores the costs, as
    /// measured, may be divided by.
    pub fn effective(&self, capacity: Capacity) -> Capacity {
        Capacity {
            app_cores: capacity.app_cores / self.app_ratio(),
            storage_cores: capacity.storage_cores / self.storage_ratio(),
            links: capacity.links,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::costs::CostProfile;
    use crate::placement::load_model::LoadModel;
    use crate::policy::{FnId, Placement};

    #[test]
    fn costs_that_miss_half_the_cpu_are_scaled_to_it_and_the_capacity_with_them() {
        // Remote requests report 10 µs of node CPU; the node is really busy 20 µs each.
        let (mut capture, mut costs) = (Capture::default(), CostProfile::default());
        for _ in 0..4 {
            for _ in 0..10_000 {
                let c = Completion::of(FnId(0), Placement::Remote, 1, 1_000, 10_000);
                capture.learn(&c);
                costs.learn(&c);
            }
            capture.span(&Busy {
                span_ns: 250_000_000,
                app_ns: Some(20_000_000),
                storage_ns: Some(200_000_000),
            });
        }
        assert!((capture.storage_ratio() - 2.0).abs() < 1e-9);
        assert!((capture.app_ratio() - 2.0).abs() < 1e-9);
        let cores = Capacity::cores(1.0, 1.0);
        let naive = LoadModel::new(&costs, cores).capacity_ops(1.0).unwrap();
        let measured = LoadModel::new(&costs, capture.effective(cores))
            .capacity_ops(1.0)
            .unwrap();
        // 100k/s from the costs alone, 50k/s from the CPU it really takes.
        assert!((naive / measured - 2.0).abs() < 1e-9, "{naive} vs {measured}");
    }

    #[test]
    fn a_span_counts_by_the_work_it_measured() {
        // A light span (1k requests) whose CPU is 5× its costs, then a loaded one (20k) at
        // 2×: the ratio is the loaded span's, nearly.
        let mut capture = Capture::default();
        let span = |capture: &mut Capture, requests: u64, busy_per_request_ns: u64| {
            for _ in 0..requests {
                capture.learn(&Completion::of(FnId(0), Placement::Remote, 1, 10_000, 10_000));
            }
            let busy = requests * busy_per_request_ns;
            capture.span(&Busy {
                span_ns: 200_000_000,
                app_ns: Some(busy),
                storage_ns: Some(busy),
            });
        };
        span(&mut capture, 1_000, 50_000);
        span(&mut capture, 20_000, 20_000);
        let r = capture.storage_ratio();
        assert!(r > 2.0 && r < 2.25, "{r}");
    }

    #[test]
    fn a_span_with_too_little_work_or_no_measurement_counts_nothing() {
        let mut capture = Capture::default();
        capture.learn(&Completion::of(FnId(0), Placement::Remote, 1, 1_000, 10_000));
        capture.span(&Busy {
            span_ns: 250_000_000,
            app_ns: Some(100_000_000),
            storage_ns: None,
        });
        assert!(!capture.measured());
        assert_eq!((capture.app_ratio(), capture.storage_ratio()), (1.0, 1.0));
    }
}
