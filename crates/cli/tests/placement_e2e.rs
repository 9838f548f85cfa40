//! Kayak on real processes moves X the right way: its own test binary, so no other pinned
//! benchmark competes for the two CPUs while it runs.
//!
//! The workloads are chosen so that the right way is unambiguous on any machine: a deep,
//! compute-free traversal (shipping compute saves seven of eight round trips; measured 2×
//! the goodput of shipping data here) and the heavy preset (10 µs per access; shipping all
//! of it to the one node core is worse than sharing it). Each starts at the wrong extreme.
//! Bars are generous: X must leave the start and stay away over the steady window; where
//! exactly it settles is a benchmark question (docs/BENCHMARKS.md). On these VMs the R loop
//! sometimes never settles in a short run, and the X loop holds while it does not (seen: heavy
//! kept at X = 1 in about one run of five), so each workload gets up to three runs and must
//! move the right way in one of them. A controller that never moves X, or moves it the wrong
//! way, fails all three.

use std::process::Command;

fn steady_x(workload: &str, x0: &str) -> f64 {
    let json = std::env::temp_dir().join(format!("ferry-e2e-{}-{x0}.json", std::process::id()));
    let output = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["bench", "--workload", workload, "--policy", &format!("kayak:x0={x0}")])
        .args(["--duration", "5s", "--slo-p99", "5ms", "--nodes", "20000", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(json);
    assert!(report["throughput_ops"].as_f64().unwrap() > 0.0);
    report["rpc_fraction_mean"].as_f64().unwrap()
}

/// Runs per workload at most: the first that moves X the right way passes.
const RUNS_MAX: usize = 3;

/// The steady X of up to RUNS_MAX runs of `workload` from `x0`, until one satisfies
/// `right_way`; all of them when none does.
fn steady_xs(workload: &str, x0: &str, right_way: impl Fn(f64) -> bool) -> Vec<f64> {
    let mut xs = Vec::new();
    for _ in 0..RUNS_MAX {
        let x = steady_x(workload, x0);
        xs.push(x);
        if right_way(x) {
            break;
        }
    }
    xs
}

#[test]
fn kayak_moves_x_toward_rpc_for_light_work_and_toward_kv_for_heavy_work() {
    let toward_rpc = |x: f64| x > 0.2;
    let light = steady_xs("traverse:depth=8,compute=0ns", "0", toward_rpc);
    assert!(
        light.iter().any(|&x| toward_rpc(x)),
        "light work started all-local must move toward RPC; steady X of each run {light:.2?}"
    );
    let toward_kv = |x: f64| x < 0.8;
    let heavy = steady_xs("heavy", "1", toward_kv);
    assert!(
        heavy.iter().any(|&x| toward_kv(x)),
        "heavy work started all-remote must move toward KV; steady X of each run {heavy:.2?}"
    );
    eprintln!("steady X per run: light {light:.2?}, heavy {heavy:.2?}");
}
