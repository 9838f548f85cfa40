//! The static policies: a fixed RPC fraction with the R loop setting the rate (`kv`,
//! `rpc`, `fixed:X`, ASFP), and a fixed fraction at a fixed rate (what a sweep measures).

use crate::arbiter::Arbiter;
use crate::error::{check_range, ControlError};
use crate::policy::{Completion, FnId, Placement, Policy, PolicyState};
use crate::rate::{RateLoop, RateLoopConfig};
use crate::time::Nanos;

/// A fixed RPC fraction X with the R loop setting the rate: `kv` (X = 0), `rpc` (X = 1),
/// `fixed:X`. With X fixed this is Kayak's "fast loop only" configuration (§6.1). With
/// pushback allowed and X = 1 it is ASFP (ATC '20): everything is shipped to the storage
/// node, which reactively hands compute-bound invocations back when it is overloaded.
pub struct FixedFraction {
    /// Name shown in reports.
    name: String,
    /// Remote invocations accept pushback (ASFP).
    pushback: bool,
    /// Picks local or remote per request with probability X.
    arbiter: Arbiter,
    /// The rate loop that meets the SLO at this X.
    rate: RateLoop,
}

impl FixedFraction {
    /// A policy that sends fraction `x` remote and lets `rate` find the rate at the SLO.
    pub fn new(
        name: impl Into<String>,
        x: f64,
        rate: RateLoopConfig,
        now: Nanos,
        seed: u64,
    ) -> Result<Self, ControlError> {
        Ok(FixedFraction {
            name: name.into(),
            pushback: false,
            arbiter: Arbiter::new(x, seed)?,
            rate: RateLoop::new(rate, now)?,
        })
    }
}

impl FixedFraction {
    /// ASFP: all remote, with pushback, the R loop setting the rate.
    pub fn asfp(rate: RateLoopConfig, now: Nanos, seed: u64) -> Result<Self, ControlError> {
        let mut policy = FixedFraction::new("asfp", 1.0, rate, now, seed)?;
        policy.pushback = true;
        Ok(policy)
    }
}

impl Policy for FixedFraction {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn allows_pushback(&self) -> bool {
        self.pushback
    }
    fn place(&mut self, _now: Nanos, _fn_id: FnId) -> Placement {
        self.arbiter.place()
    }
    fn on_completion(&mut self, now: Nanos, completion: &Completion) {
        self.rate.on_completion(now, completion.latency_ns);
    }
    fn on_refused(&mut self, now: Nanos, _fn_id: FnId) {
        self.rate.on_refused(now);
    }
    fn tick(&mut self, now: Nanos) {
        if now >= self.rate.next_tick() {
            self.rate.tick(now);
        }
    }
    fn rate_loop(&self) -> Option<&RateLoop> {
        Some(&self.rate)
    }
    fn state(&self) -> PolicyState {
        PolicyState::of_rate_loop(&self.rate, self.arbiter.x(), None)
    }
}

/// A fixed X at a fixed rate, no feedback at all: what a parameter sweep measures.
pub struct FixedRate {
    /// Picks local or remote per request with probability X.
    arbiter: Arbiter,
    /// Each function's own share sent remote, if they differ (a turning point); X then
    /// only names the point in reports.
    split: Vec<f64>,
    /// The constant admission rate.
    rate_ops: f64,
}

impl FixedRate {
    /// Sends fraction `x` remote at a constant `rate_ops`.
    pub fn new(x: f64, rate_ops: f64, seed: u64) -> Result<Self, ControlError> {
        check_range("rate", "(0, 1e9] ops/s", rate_ops, f64::MIN_POSITIVE, 1e9)?;
        Ok(FixedRate {
            arbiter: Arbiter::new(x, seed)?,
            split: Vec::new(),
            rate_ops,
        })
    }

    /// Sends the share `split[i]` of function i's requests remote at a constant
    /// `rate_ops`, reporting `x` as its X.
    pub fn with_split(x: f64, split: Vec<f64>, rate_ops: f64, seed: u64) -> Result<Self, ControlError> {
        for &share in &split {
            check_range("function's rpc fraction", "[0, 1]", share, 0.0, 1.0)?;
        }
        Ok(FixedRate {
            split,
            ..FixedRate::new(x, rate_ops, seed)?
        })
    }
}

impl Policy for FixedRate {
    fn name(&self) -> String {
        format!("fixed-rate:{:.2}@{:.0}", self.arbiter.x(), self.rate_ops)
    }
    fn place(&mut self, _now: Nanos, fn_id: FnId) -> Placement {
        match self.split.get(fn_id.0 as usize) {
            Some(&x) => self.arbiter.draw(x),
            None => self.arbiter.place(),
        }
    }
    fn on_completion(&mut self, _now: Nanos, _completion: &Completion) {}
    fn tick(&mut self, _now: Nanos) {}
    fn next_tick(&self) -> Nanos {
        Nanos::MAX
    }
    fn rate_ops(&self) -> f64 {
        self.rate_ops
    }
    fn state(&self) -> PolicyState {
        PolicyState {
            rate_ops: self.rate_ops,
            rpc_fraction: self.arbiter.x(),
            latency_ns_estimate: None,
            searches: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixed_split_places_each_function_by_its_own_share() {
        let mut p = FixedRate::with_split(0.3, vec![1.0, 0.0, 0.25], 1_000.0, 7).unwrap();
        let remote = |p: &mut FixedRate, f: u32| {
            (0..10_000)
                .filter(|_| p.place(Nanos::ZERO, FnId(f)) == Placement::Remote)
                .count() as f64
                / 10_000.0
        };
        assert_eq!(remote(&mut p, 0), 1.0);
        assert_eq!(remote(&mut p, 1), 0.0);
        assert!((remote(&mut p, 2) - 0.25).abs() < 0.02);
        // A function the split does not name is placed by X, which is what reports show.
        assert!((remote(&mut p, 9) - 0.3).abs() < 0.02);
        assert_eq!(p.state().rpc_fraction, 0.3);
        assert!(FixedRate::with_split(0.3, vec![1.5], 1_000.0, 7).is_err());
    }
}
