//! The table `ferry calibrate` prints: each value of the profile and what it came from.

use super::provenance::human;
use super::stalls::STALL_STREAM_RATE_OPS;
use super::Calibration;

impl Calibration {
    /// The table `ferry calibrate` prints: each value of the profile and what it came from.
    pub fn table(&self) -> String {
        let (p, r) = (&self.profile, &self.raw);
        let us = |ns: f64| format!("{:.2} us", ns / 1e3);
        let ns_u = |ns: u64| us(ns as f64);
        let mut rows: Vec<(&str, String, String)> = vec![
            (
                "rtt",
                ns_u(p.rtt_ns),
                format!("median unpipelined 64 B get {}, less its CPU", us(r.get_p50_ns)),
            ),
            (
                "app per message",
                ns_u(p.app_msg_ns),
                format!("half a remote no-op invocation's app CPU {}", us(r.noop.app_ns)),
            ),
            (
                "app per local start",
                ns_u(p.app_invoke_ns),
                format!(
                    "local traversals of depth {} / {}: app {} / {}",
                    r.local[0].0,
                    r.local[1].0,
                    us(r.local[0].1.app_ns),
                    us(r.local[1].1.app_ns)
                ),
            ),
            (
                "app per byte",
                format!("{:.4} ns", p.app_byte_ns),
                format!(
                    "64 B / 16 KiB get: app {} / {}",
                    us(r.get_small.app_ns),
                    us(r.get_large.app_ns)
                ),
            ),
            (
                "storage per message",
                ns_u(p.storage_msg_ns),
                format!(
                    "64 B get: node {}, less a lookup and its bytes",
                    us(r.get_small.node_ns)
                ),
            ),
            (
                "storage per invoke",
                ns_u(p.storage_invoke_ns),
                format!("no-op invocation: node {}, less a message", us(r.noop.node_ns)),
            ),
            (
                "storage per lookup",
                ns_u(p.storage_get_ns),
                format!(
                    "remote traversals of depth {} / {}: node {} / {}",
                    r.remote[0].0,
                    r.remote[1].0,
                    us(r.remote[0].1.node_ns),
                    us(r.remote[1].1.node_ns)
                ),
            ),
            (
                "storage per byte",
                format!("{:.4} ns", p.storage_byte_ns),
                format!(
                    "64 B / 16 KiB get: node {} / {}",
                    us(r.get_small.node_ns),
                    us(r.get_large.node_ns)
                ),
            ),
            (
                "storage compute factor",
                format!("{:.3}", p.storage_compute_factor),
                format!(
                    "remote traversal with {} of compute: node {}",
                    us(r.remote_compute.0 as f64),
                    us(r.remote_compute.1.node_ns)
                ),
            ),
            (
                "stalls per node",
                format!("{:.2} /s", p.stall_rate_hz),
                format!(
                    "{:.2} /s seen by one stream of {:.0} gets/s (both nodes), from {:.1} ms on",
                    self.stalls.rate_hz,
                    STALL_STREAM_RATE_OPS,
                    self.stalls.resolution_ns / 1e6
                ),
            ),
            (
                "mean stall",
                format!("{:.2} ms", p.stall_mean_ns as f64 / 1e6),
                format!(
                    "over {} completions, whose p99 was {:.2} ms",
                    self.stalls.completed,
                    self.stalls.p99_us / 1e3
                ),
            ),
            (
                "stall length spread",
                format!("{:.2}", p.stall_length_cv),
                match self.stalls.length_cv {
                    Some(cv) => format!("standard deviation over mean of the lengths seen: {cv:.2}"),
                    None => "under two stalls seen: exponential (1)".to_string(),
                },
            ),
        ];
        let mut out = format!(
            "calibrate: {}\n  CPU phases of {} at {:.0} requests/s; stalls over {}\n",
            p.measured_on,
            human(self.phase),
            self.rate_ops,
            human(self.stall_window)
        );
        out.push_str(&format!("{:<24} {:>12}  {}\n", "cost", "profile", "measured from"));
        for (name, value, from) in rows.drain(..) {
            out.push_str(&format!("{name:<24} {value:>12}  {from}\n"));
        }
        for note in &p.notes {
            out.push_str(&format!("note: {note}\n"));
        }
        out
    }
}
