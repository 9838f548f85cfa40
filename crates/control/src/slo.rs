//! SLOs per function on one policy (Pyxis §VI: each task's p99 over its mean service time
//! stays under one constant, so a 5 µs task and a 500 µs task have SLOs 100× apart).
//!
//! The policy keeps one SLO, the reference; every completion's latency is scaled by the
//! reference over its own function's SLO before the policy sees it, so "slower than the SLO"
//! means slower than the function's own, and the R loop judges exactly the completions that
//! broke theirs. What it does not do: the window pools them over the functions, so a function with a small share of the requests may miss its own p99 while
//! the pooled share holds (the report shows each function's p99 against its SLO).

use crate::policy::{Busy, Completion, FnId, Placement, Policy, PolicyState};
use crate::rate::Admission;
use crate::time::Nanos;

/// A policy whose completions are judged against each function's own SLO.
pub struct PerFunctionSlo {
    inner: Box<dyn Policy>,
    /// Reference SLO over each function's SLO, by function id (1 beyond the end).
    scale: Vec<f64>,
}

impl PerFunctionSlo {
    /// Wraps `inner`, whose SLO is `reference_ns`; function i's SLO is `slos_ns[i]`.
    pub fn new(inner: Box<dyn Policy>, reference_ns: f64, slos_ns: &[f64]) -> Self {
        let scale = slos_ns
            .iter()
            .map(|&s| {
                if s > 0.0 && s.is_finite() {
                    reference_ns / s
                } else {
                    1.0
                }
            })
            .collect();
        PerFunctionSlo { inner, scale }
    }

    fn scaled(&self, fn_id: FnId, latency_ns: u64) -> u64 {
        let k = self.scale.get(fn_id.0 as usize).copied().unwrap_or(1.0);
        (latency_ns as f64 * k).round() as u64
    }
}

impl Policy for PerFunctionSlo {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn place(&mut self, now: Nanos, fn_id: FnId) -> Placement {
        self.inner.place(now, fn_id)
    }
    fn on_completion(&mut self, now: Nanos, completion: &Completion) {
        let scaled = Completion {
            latency_ns: self.scaled(completion.fn_id, completion.latency_ns),
            ..*completion
        };
        self.inner.on_completion(now, &scaled);
    }
    fn tick(&mut self, now: Nanos) {
        self.inner.tick(now)
    }
    fn next_tick(&self) -> Nanos {
        self.inner.next_tick()
    }
    fn rate_ops(&self) -> f64 {
        self.inner.rate_ops()
    }
    fn admission(&self) -> Admission {
        self.inner.admission()
    }
    fn on_refused(&mut self, now: Nanos, fn_id: FnId) {
        self.inner.on_refused(now, fn_id)
    }
    fn on_busy(&mut self, now: Nanos, busy: &Busy) {
        self.inner.on_busy(now, busy)
    }
    fn state(&self) -> PolicyState {
        self.inner.state()
    }
    fn set_app_cores(&mut self, now: Nanos, app_cores: f64) {
        self.inner.set_app_cores(now, app_cores)
    }
    fn allows_pushback(&self) -> bool {
        self.inner.allows_pushback()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Costs;

    /// Records the latencies it is fed.
    struct Recorder(std::sync::Arc<std::sync::Mutex<Vec<u64>>>);

    impl Policy for Recorder {
        fn name(&self) -> String {
            "recorder".into()
        }
        fn place(&mut self, _: Nanos, _: FnId) -> Placement {
            Placement::Local
        }
        fn on_completion(&mut self, _: Nanos, c: &Completion) {
            self.0.lock().unwrap().push(c.latency_ns);
        }
        fn tick(&mut self, _: Nanos) {}
        fn next_tick(&self) -> Nanos {
            Nanos::MAX
        }
        fn rate_ops(&self) -> f64 {
            1.0
        }
        fn state(&self) -> PolicyState {
            PolicyState {
                rate_ops: 1.0,
                rpc_fraction: 0.0,
                latency_ns_estimate: None,
                searches: None,
            }
        }
    }

    #[test]
    fn each_latency_is_judged_against_its_own_function_s_slo() {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        // Reference 100 µs; function 0's SLO 50 µs, function 1's 1 ms.
        let mut p = PerFunctionSlo::new(Box::new(Recorder(seen.clone())), 100e3, &[50e3, 1e6]);
        for (f, latency) in [(0, 40_000), (1, 400_000), (7, 30_000)] {
            p.on_completion(
                Nanos::ZERO,
                &Completion {
                    fn_id: FnId(f),
                    placement: Placement::Local,
                    latency_ns: latency,
                    costs: Costs::default(),
                    pushed_back: false,
                },
            );
        }
        // 40 µs of a 50 µs SLO reads as 80 µs of 100; 400 µs of 1 ms as 40 µs; an unknown
        // function keeps its latency.
        assert_eq!(*seen.lock().unwrap(), vec![80_000, 40_000, 30_000]);
    }
}
