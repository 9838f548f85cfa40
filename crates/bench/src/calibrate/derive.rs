//! From what `ferry calibrate` measured to the model's costs: each figure is a difference
//! of two measured operations that differ in exactly the thing it prices, so the costs
//! every operation shares (the pacer, the runtime, the message itself) cancel out.
//!
//! - storage per byte, app per byte: a get of a large object less a get of a small one,
//!   over the bytes between them;
//! - storage per lookup: the slope of a remote traversal's node CPU over its depth;
//! - storage per message: a small get less its lookup and its bytes;
//! - storage per invoke: a no-op invocation less a message;
//! - app per message: half a remote no-op invocation (one send, one receive);
//! - app per local start: what local traversals cost beyond their messages and bytes,
//!   averaged over their depths;
//! - storage compute factor: a remote traversal with compute less one without, over the
//!   compute;
//! - RTT: the median of an unpipelined get less both sides' CPU for it;
//! - stalls: the gaps the stall estimator saw, split evenly over the model's two nodes.
//!
//! A difference of noisy measurements can come out slightly negative; it is clamped to 0
//! with a note, and every value is kept within the model's limits, so the profile written
//! always loads.

use ferry_experiment::model::{
    BYTE_COST_NS_MAX, MSG_COST_MAX, RTT_MAX, STALL_LENGTH_CV_DEFAULT, STALL_MEAN_MAX, STALL_RATE_HZ_MAX,
    STORAGE_COMPUTE_FACTOR_MAX,
};
use ferry_experiment::profile::{Profile, PROFILE_FORMAT, PROFILE_VERSION};
use serde::Serialize;

/// Nodes of the simulated pair that each have a stall process: a request waits out a stall
/// of either, so the gaps one stream of requests sees are both nodes' stalls together.
pub const STALLING_NODES: f64 = 2.0;

/// A local traversal's app CPU per access may differ from the per-message figure (the read
/// set it carries) by this factor either way before the profile notes it: the model prices
/// both with one figure.
const MISMATCH_NOTED: f64 = 1.33;

/// CPU per operation on each side, ns, with the idle baseline taken off.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Side {
    /// App side (this process's app threads).
    pub app_ns: f64,
    /// Storage node (the child's threads).
    pub node_ns: f64,
}

/// Everything measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Raw {
    /// Object bytes of the small gets.
    pub small_bytes: u64,
    /// Object bytes of the large gets.
    pub large_bytes: u64,
    /// Object bytes of the traversals' graph nodes.
    pub graph_bytes: u64,
    /// A get of a small object.
    pub get_small: Side,
    /// A get of a large object.
    pub get_large: Side,
    /// A remote no-op invocation.
    pub noop: Side,
    /// Remote traversals without compute: (depth, cost), two depths.
    pub remote: [(u32, Side); 2],
    /// A remote traversal of depth 1 with compute: (compute ns, cost).
    pub remote_compute: (u64, Side),
    /// Local traversals without compute: (depth, cost), two depths.
    pub local: [(u32, Side); 2],
    /// Median latency of an unpipelined small get, ns.
    pub get_p50_ns: f64,
    /// Stalls per second one stream of requests saw (both sides together).
    pub stalls_seen_hz: f64,
    /// Their mean length, ns.
    pub stall_mean_ns: f64,
    /// Spread of their lengths (None under two stalls).
    pub stall_length_cv: Option<f64>,
}

/// Collects what had to be adjusted.
struct Notes(Vec<String>);

impl Notes {
    /// `value` clamped into [0, max] (NaN to 0), with a note when it was outside.
    fn clamp(&mut self, name: &str, value: f64, max: f64) -> f64 {
        if value.is_nan() {
            self.0.push(format!("{name} could not be measured (NaN); set to 0"));
            0.0
        } else if value < 0.0 {
            self.0.push(format!("{name} measured {value:.3}, clamped to 0"));
            0.0
        } else if value > max {
            self.0.push(format!(
                "{name} measured {value:.3}, clamped to the model's limit {max}"
            ));
            max
        } else {
            value
        }
    }

    /// As [`Notes::clamp`], rounded to whole nanoseconds.
    fn nanos(&mut self, name: &str, value: f64, max: u64) -> u64 {
        self.clamp(name, value, max as f64).round() as u64
    }
}

/// The profile the measurements make (see the module docs).
pub fn derive(raw: &Raw, measured_on: String, measured_at: String) -> Profile {
    let mut notes = Notes(Vec::new());
    let spread = (raw.large_bytes - raw.small_bytes).max(1) as f64;
    let storage_byte = notes.clamp(
        "storage CPU per byte (ns)",
        (raw.get_large.node_ns - raw.get_small.node_ns) / spread,
        BYTE_COST_NS_MAX,
    );
    let app_byte = notes.clamp(
        "app CPU per byte (ns)",
        (raw.get_large.app_ns - raw.get_small.app_ns) / spread,
        BYTE_COST_NS_MAX,
    );
    let [(d0, r0), (d1, r1)] = raw.remote;
    let depth_gap = (f64::from(d1) - f64::from(d0)).max(1.0);
    let storage_get = notes.clamp(
        "storage CPU per lookup (ns)",
        (r1.node_ns - r0.node_ns) / depth_gap,
        MSG_COST_MAX.0 as f64,
    );
    let small = raw.small_bytes as f64;
    let storage_msg = notes.clamp(
        "storage CPU per message (ns)",
        raw.get_small.node_ns - storage_get - small * storage_byte,
        MSG_COST_MAX.0 as f64,
    );
    let storage_invoke = notes.nanos(
        "storage CPU per invoke (ns)",
        raw.noop.node_ns - storage_msg,
        MSG_COST_MAX.0,
    );
    let app_msg = notes.clamp("app CPU per message (ns)", raw.noop.app_ns / 2.0, MSG_COST_MAX.0 as f64);
    let graph = raw.graph_bytes as f64;
    // Local traversal of depth d: start + (1 + d) messages + d objects received.
    let starts: Vec<f64> = raw
        .local
        .iter()
        .map(|&(d, side)| {
            let d = f64::from(d);
            side.app_ns - (1.0 + d) * app_msg - d * graph * app_byte
        })
        .collect();
    let app_invoke = notes.nanos(
        "app CPU per local start (ns)",
        starts.iter().sum::<f64>() / starts.len() as f64,
        MSG_COST_MAX.0,
    );
    let [(l0, s0), (l1, s1)] = raw.local;
    let local_slope = (s1.app_ns - s0.app_ns) / (f64::from(l1) - f64::from(l0)).max(1.0);
    let per_access = app_msg + graph * app_byte;
    if per_access > 0.0 && !(1.0 / MISMATCH_NOTED..=MISMATCH_NOTED).contains(&(local_slope / per_access)) {
        notes.0.push(format!(
            "a local access costs the app {local_slope:.0} ns, a message {per_access:.0} ns: the model \
             prices both as one message, fitted to the remote call"
        ));
    }
    let (compute_ns, with_compute) = raw.remote_compute;
    let factor = notes.clamp(
        "storage compute factor",
        (with_compute.node_ns - r0.node_ns) / compute_ns.max(1) as f64,
        STORAGE_COMPUTE_FACTOR_MAX,
    );
    let service = raw.get_small.app_ns + raw.get_small.node_ns;
    let rtt = notes.nanos("RTT (ns)", raw.get_p50_ns - service, RTT_MAX.0);
    let stall_rate = notes.clamp(
        "stall rate per node (Hz)",
        raw.stalls_seen_hz / STALLING_NODES,
        STALL_RATE_HZ_MAX,
    );
    let stall_mean = notes.nanos("mean stall (ns)", raw.stall_mean_ns, STALL_MEAN_MAX.0);
    if stall_rate == 0.0 {
        notes.0.push("no stall was seen: the profile has none".into());
    }
    // The model draws lengths no more variable than exponential; fewer than two stalls
    // say nothing of their spread, and keep the exponential.
    let stall_length_cv = match raw.stall_length_cv {
        Some(cv) => notes.clamp("stall length spread", cv, 1.0),
        None => STALL_LENGTH_CV_DEFAULT,
    };
    Profile {
        format: PROFILE_FORMAT.into(),
        version: PROFILE_VERSION,
        measured_on,
        measured_at,
        rtt_ns: rtt,
        app_msg_ns: app_msg.round() as u64,
        app_invoke_ns: app_invoke,
        app_byte_ns: round_to(app_byte, BYTE_DIGITS),
        storage_msg_ns: storage_msg.round() as u64,
        storage_invoke_ns: storage_invoke,
        storage_get_ns: storage_get.round() as u64,
        storage_byte_ns: round_to(storage_byte, BYTE_DIGITS),
        storage_compute_factor: round_to(factor, FACTOR_DIGITS),
        stall_rate_hz: round_to(stall_rate, FACTOR_DIGITS),
        stall_mean_ns: if stall_rate == 0.0 { 0 } else { stall_mean },
        stall_length_cv: round_to(stall_length_cv, FACTOR_DIGITS),
        notes: notes.0,
    }
}

/// Decimal digits kept of a per-byte cost: a thousandth of a nanosecond a byte is 16 ns
/// on a 16 KiB object, below what the measurement resolves.
const BYTE_DIGITS: i32 = 4;

/// Decimal digits kept of the compute factor and the stall rate.
const FACTOR_DIGITS: i32 = 3;

fn round_to(v: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (v * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a machine with known costs would measure: app msg 3000, start 1000, 0.5 ns a
    /// byte received; node msg 2000, invoke 1500, lookup 400, 0.25 ns a byte sent,
    /// compute factor 1.2; RTT 40 µs; stalls seen 6/s of 2 ms.
    fn ideal() -> Raw {
        let (small, large, graph) = (64u64, 16_384u64, 64u64);
        let get = |bytes: u64| Side {
            app_ns: 6_000.0 + 0.5 * bytes as f64,
            node_ns: 2_400.0 + 0.25 * bytes as f64,
        };
        let remote = |depth: u32| Side {
            app_ns: 6_000.0,
            node_ns: 3_500.0 + 400.0 * f64::from(depth),
        };
        let local = |depth: u32| {
            let d = f64::from(depth);
            Side {
                app_ns: 1_000.0 + 3_000.0 * (1.0 + d) + 0.5 * graph as f64 * d,
                node_ns: d * (2_400.0 + 0.25 * graph as f64),
            }
        };
        let get_small = get(small);
        Raw {
            small_bytes: small,
            large_bytes: large,
            graph_bytes: graph,
            get_small,
            get_large: get(large),
            noop: Side {
                app_ns: 6_000.0,
                node_ns: 3_500.0,
            },
            remote: [(1, remote(1)), (4, remote(4))],
            remote_compute: (
                20_000,
                Side {
                    app_ns: 6_000.0,
                    node_ns: remote(1).node_ns + 1.2 * 20_000.0,
                },
            ),
            local: [(1, local(1)), (4, local(4))],
            get_p50_ns: 40_000.0 + get_small.app_ns + get_small.node_ns,
            stalls_seen_hz: 6.0,
            stall_mean_ns: 2e6,
            stall_length_cv: Some(0.25),
        }
    }

    #[test]
    fn known_costs_come_back_out() {
        let p = derive(&ideal(), "here".into(), "now".into());
        assert_eq!(
            (
                p.app_msg_ns,
                p.app_invoke_ns,
                p.storage_msg_ns,
                p.storage_invoke_ns,
                p.storage_get_ns
            ),
            (3_000, 1_000, 2_000, 1_500, 400)
        );
        assert_eq!((p.app_byte_ns, p.storage_byte_ns), (0.5, 0.25));
        assert_eq!(p.storage_compute_factor, 1.2);
        assert_eq!(p.rtt_ns, 40_000);
        assert_eq!((p.stall_rate_hz, p.stall_mean_ns), (3.0, 2_000_000));
        assert_eq!(p.stall_length_cv, 0.25);
        assert!(p.notes.is_empty(), "{:?}", p.notes);
        assert!(p.check().is_ok());
    }

    #[test]
    fn noise_below_zero_is_clamped_with_a_note_and_the_profile_still_loads() {
        let mut raw = ideal();
        // Large gets measured a hair cheaper on the node than small ones; the deeper remote
        // traversal cheaper than the shallow one; a latency below the CPU it needs; no stalls.
        raw.get_large.node_ns = raw.get_small.node_ns - 50.0;
        raw.remote[1].1.node_ns = raw.remote[0].1.node_ns - 30.0;
        raw.get_p50_ns = 100.0;
        raw.stalls_seen_hz = 0.0;
        raw.stall_mean_ns = 0.0;
        raw.stall_length_cv = None;
        let p = derive(&raw, "here".into(), "now".into());
        assert_eq!(p.stall_length_cv, STALL_LENGTH_CV_DEFAULT);
        assert_eq!((p.storage_byte_ns, p.storage_get_ns, p.rtt_ns), (0.0, 0, 0));
        assert_eq!((p.stall_rate_hz, p.stall_mean_ns), (0.0, 0));
        for needle in [
            "storage CPU per byte",
            "storage CPU per lookup",
            "RTT",
            "no stall was seen",
        ] {
            assert!(p.notes.iter().any(|n| n.contains(needle)), "{needle}: {:?}", p.notes);
        }
        let text = p.to_json();
        assert!(Profile::parse(&text, std::path::Path::new("p.json")).is_ok());
    }

    #[test]
    fn absurd_values_are_kept_within_the_models_limits() {
        let mut raw = ideal();
        raw.remote_compute.1.node_ns = 1e12;
        raw.stall_mean_ns = f64::NAN;
        raw.get_p50_ns = 1e13;
        let p = derive(&raw, "here".into(), "now".into());
        assert_eq!(p.storage_compute_factor, STORAGE_COMPUTE_FACTOR_MAX);
        assert_eq!(p.rtt_ns, RTT_MAX.0);
        assert_eq!(p.stall_mean_ns, 0);
        assert!(p.check().is_ok());
    }

    #[test]
    fn a_local_access_dearer_than_a_message_is_noted() {
        let mut raw = ideal();
        raw.local[1].1.app_ns += 3.0 * 3_000.0;
        let p = derive(&raw, "here".into(), "now".into());
        assert!(
            p.notes.iter().any(|n| n.contains("a local access costs the app")),
            "{:?}",
            p.notes
        );
    }
}
