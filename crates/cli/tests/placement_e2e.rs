//! The default policy on real processes places work the right way: its own test binary, so
//! no other pinned benchmark competes for the two CPUs while it runs.
//!
//! The workloads are chosen so that the right way is unambiguous on any machine: a deep,
//! compute-free traversal of 16 KiB objects (shipping compute saves seven of eight round
//! trips and 128 KiB of transfer per request; `ferry sweep --workload
//! traverse:depth=8,compute=0ns,size=16384 --nodes 20000 --slo-p99 5ms --step 0.5` measured
//! 18.1k / 27.2k / 41.6k at X = 0 / 0.5 / 1 here) and the heavy preset (10 µs per access;
//! shipping all of it to the one node core is worse than sharing it). With 100-byte objects
//! the same traversal is no longer a test of direction: the client pipelines the gets of
//! many requests, and the sweep measured 60.0k at X = 0 against 49.2k at X = 1. The policy
//! profiles at X = 0.5 and then places by the costs it measured. Bars are generous: X must
//! stay on the right side of 0.5's neighbourhood over the steady window; where exactly it
//! settles is a benchmark question (docs/BENCHMARKS.md). Real costs are noisy on these VMs,
//! so each workload gets up to three runs and must go the right way in one of them. A
//! policy that never moves X, or moves it the wrong way, fails all three.

use std::process::Command;

fn steady_x(workload: &str) -> f64 {
    let json = std::env::temp_dir().join(format!("ferry-e2e-{}.json", std::process::id()));
    let output = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["bench", "--workload", workload])
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

/// The steady X of up to RUNS_MAX runs of `workload`, until one satisfies `right_way`; all
/// of them when none does.
fn steady_xs(workload: &str, right_way: impl Fn(f64) -> bool) -> Vec<f64> {
    let mut xs = Vec::new();
    for _ in 0..RUNS_MAX {
        let x = steady_x(workload);
        xs.push(x);
        if right_way(x) {
            break;
        }
    }
    xs
}

#[test]
fn the_default_policy_ships_compute_for_light_work_and_shares_heavy_work() {
    let toward_rpc = |x: f64| x > 0.6;
    let light = steady_xs("traverse:depth=8,compute=0ns,size=16384", toward_rpc);
    assert!(
        light.iter().any(|&x| toward_rpc(x)),
        "light work must go mostly remote; steady X of each run {light:.2?}"
    );
    let toward_kv = |x: f64| x < 0.8;
    let heavy = steady_xs("heavy", toward_kv);
    assert!(
        heavy.iter().any(|&x| toward_kv(x)),
        "heavy work must not all go to the one node core; steady X of each run {heavy:.2?}"
    );
    eprintln!("steady X per run: light {light:.2?}, heavy {heavy:.2?}");
}
