//! The backlog guard: a window whose proxy is beyond [`SATURATION_FACTOR`] × the SLO
//! measured a queue, not the rate, and R at least halves (Pseudocode 1's safeguard, M = 2).
//!
//! Near such a window the Newton step means nothing: the proxy grows with the backlog's
//! age, not with R. In the simulator a backlog drains as soon as R falls below the
//! capacity, so the core's own steps get out of it and this guard never binds on the
//! suite; it does on a workload switch that finds R far over the new capacity, where it
//! helps (docs/SIMULATION.md, (c)). On real processes a backlog does not drain by itself: thousands of requests in
//! flight make each one dearer (a light request's local app CPU doubled), the throughput
//! falls below what R was cut to, and the late gain schedule's steps of a few percent
//! left a 1 + 1 run at a p50 of 70–170 ms for seconds (docs/BENCHMARKS.md has the runs
//! with and without the guard). Halving R until the proxy comes back gets out in a few
//! decisions, and the gain schedule re-opens, since the curve is not where the late steps
//! assumed it was.

pub use crate::rate::core::SATURATION_FACTOR;

/// Whether a window whose proxy was `proxy_ns` measured a backlog under the SLO `slo_ns`.
pub fn is_backlog(proxy_ns: f64, slo_ns: f64) -> bool {
    proxy_ns >= SATURATION_FACTOR * slo_ns
}

/// The next rate after a window measured at `measured_ops` with proxy `proxy_ns`, given
/// the rate the core proposed: at most half the measured rate after a backlog.
pub fn limit(measured_ops: f64, proposal_ops: f64, proxy_ns: f64, slo_ns: f64) -> f64 {
    if is_backlog(proxy_ns, slo_ns) {
        proposal_ops.min(measured_ops / 2.0)
    } else {
        proposal_ops
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backlog_halves_r_whatever_the_core_proposed_and_nothing_else_is_touched() {
        let slo = 5_000_000.0;
        // The core's late gain proposed a 3 % cut from 200k against a p90 of 140 ms.
        assert_eq!(limit(200_000.0, 194_000.0, 140_000_000.0, slo), 100_000.0);
        // A deeper cut than half stays as proposed.
        assert_eq!(limit(200_000.0, 80_000.0, 140_000_000.0, slo), 80_000.0);
        // Below the saturation level (even over the SLO) the core's step stands.
        assert_eq!(limit(200_000.0, 194_000.0, 14_000_000.0, slo), 194_000.0);
        assert_eq!(limit(200_000.0, 250_000.0, 1_000_000.0, slo), 250_000.0);
    }
}
