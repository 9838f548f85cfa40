//! The window on requests in flight and the wait a request may spend for a slot in it.
//!
//! A rate alone lets a stall of length D or an overshoot queue R·D requests at the node,
//! and the loop is blind while they drain. The window bounds them by Little's law: a
//! machine delivering the capacity C completes C × SLO requests within one SLO, so more in
//! flight than that cannot all meet it. W = [`WINDOW_SLO_SHARE`] × C × SLO, the requests
//! the capacity completes in half the SLO: it never binds while the SLO holds (the mean
//! latency is far under the p99) and binds as soon as a stall or an overshoot queues what
//! the SLO cannot absorb. BBR's cwnd (2 × bandwidth × minimum RTT) is the same law for a
//! pipe, whose delay at full bandwidth is its minimum RTT; a server's latency at load is
//! many unloaded latencies, and 2 × C × L₀ bound below the load the SLO allows (measured:
//! it held medium's `rpc` at 57k/s where 80k/s met the SLO, its refusals feeding the
//! collapse they were meant to stop). Requests beyond W wait at the client, their latency
//! counted from their due time; a request whose wait alone would break the SLO (the SLO
//! less the recent unloaded latency, [`super::baseline`]) is refused at once (Breakwater
//! drops a request once its queueing delay passes a bound), so a backlog never grows past
//! what can still be served in time, and the caller sees why.

use crate::time::Nanos;

/// The share of the SLO whose completions at the capacity the window holds: half, so the
/// window binds only once the mean latency is half the SLO, past any p99 that meets it.
pub const WINDOW_SLO_SHARE: f64 = 0.5;

/// Fewest requests the window allows: at low rates and short latencies the product is a
/// request or two, and a window that small refuses the bursts of Poisson arrivals the
/// machine would overlap (a floor of 2 held an 8 + 8-core simulated node at 20k/s under a
/// 200 µs SLO, where it serves 300k/s).
pub const WINDOW_MIN: usize = 16;

/// The window before the loop has measured a latency (TCP's initial window): the first
/// rate is a guess, and one far over the capacity queued thousands of requests at a node
/// serving 1,500/s, whose first completions came back after 2 s, blinding the loop that
/// long. 64 in flight do not hold back the first rate of a fast machine (10k/s at 0.2 ms
/// keeps 2 in flight) and drain in tens of milliseconds on a slow one.
pub const WINDOW_INITIAL: usize = 64;

/// The window when nothing bounds it: the driver's own bound.
pub const WINDOW_UNKNOWN: usize = usize::MAX;

/// What the driver admits by: the rate, the window, the longest wait for a slot.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Admission {
    /// Requests per second the limiter releases.
    pub rate_ops: f64,
    /// Requests in flight at most; those beyond wait for a slot.
    pub inflight_max: usize,
    /// The longest a request may wait for a slot: a request whose wait would be longer is
    /// refused at once (its latency would break the SLO by the wait alone).
    pub wait_max: Nanos,
}

impl Admission {
    /// A rate with no window (static or open-loop policies).
    pub fn rate_only(rate_ops: f64) -> Self {
        Admission {
            rate_ops,
            inflight_max: WINDOW_UNKNOWN,
            wait_max: Nanos::MAX,
        }
    }
}

/// The window for a capacity of `capacity_ops` under an SLO of `slo_ns` where an unloaded
/// request takes `latency_ns`: what the capacity completes in half the SLO, and never less
/// than what it holds in flight with no queue at all (C × L₀, Little's law), plus one, so
/// that a latency near the SLO does not cap the rate under the capacity.
pub fn window(capacity_ops: f64, slo_ns: f64, latency_ns: f64) -> usize {
    let served = capacity_ops * (WINDOW_SLO_SHARE * slo_ns).max(latency_ns) / 1e9;
    if !served.is_finite() || served <= 0.0 {
        return WINDOW_UNKNOWN;
    }
    (served.ceil() as usize + usize::from(latency_ns > WINDOW_SLO_SHARE * slo_ns)).max(WINDOW_MIN)
}

/// The longest wait for a slot under an SLO of `slo_ns` when an unloaded request takes
/// `latency_ns`: what the SLO leaves once the request itself has run.
pub fn wait_max(slo_ns: f64, latency_ns: f64) -> Nanos {
    Nanos((slo_ns - latency_ns).max(0.0) as u64)
}

/// Whether a request that finds `queued` requests waiting ahead of it, with slots freed
/// at `drain_ops` per second, would wait longer than `wait_max`: refused at once. Drivers
/// pass R, the rate the loop admits at (timed by the remembered capacity instead, fewer
/// requests were refused and the simulator's elastic app tier sized itself to the queue:
/// 125 cores where 64 serve the demand).
pub fn refuse_on_arrival(queued: usize, drain_ops: f64, wait_max: Nanos) -> bool {
    if drain_ops <= 0.0 || !drain_ops.is_finite() {
        return false;
    }
    let wait_ns = (queued as f64 + 1.0) / drain_ops * 1e9;
    wait_ns > wait_max.0 as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_is_what_the_capacity_completes_in_half_the_slo() {
        // 50k/s under a 2 ms SLO: 50 complete in 1 ms.
        assert_eq!(window(50_000.0, 2e6, 1e5), 50);
        assert_eq!(window(1_000.0, 1e6, 1e5), WINDOW_MIN);
        // An unloaded latency of 4 ms holds 40 in flight at 10k/s: the window allows them
        // and one more, though half the SLO would complete only 25.
        assert_eq!(window(10_000.0, 5e6, 4e6), 41);
        assert_eq!(window(f64::NAN, 1.0, 0.0), WINDOW_UNKNOWN);
        assert_eq!(wait_max(5e6, 1e6), Nanos::from_ms(4));
        assert_eq!(wait_max(1e6, 5e6), Nanos::ZERO);
    }

    #[test]
    fn a_request_is_refused_when_the_queue_ahead_would_outlast_the_slo() {
        // 10k/s frees a slot every 100 µs: 39 ahead is a 4 ms wait, 40 ahead 4.1 ms.
        let wait = Nanos::from_ms(4);
        assert!(!refuse_on_arrival(39, 10_000.0, wait));
        assert!(refuse_on_arrival(40, 10_000.0, wait));
        assert!(!refuse_on_arrival(1_000, 0.0, wait));
    }
}
