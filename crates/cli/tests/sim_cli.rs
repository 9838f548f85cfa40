//! `ferry sim` / `ferry sim-sweep` as a user runs them: bad input gets a clear message and a
//! non-zero exit (never a panic), good input writes the contracted JSON, deterministically.

use std::process::{Command, Output};

fn ferry(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(args)
        .output()
        .expect("run ferry")
}

/// Runs `ferry sim` with a short duration plus `extra`, expecting failure with `needle` in
/// stderr.
fn sim_fails(extra: &[&str], needle: &str) {
    let mut args = vec!["sim", "--duration", "50ms"];
    args.extend_from_slice(extra);
    let out = ferry(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{extra:?} should fail");
    assert!(stderr.contains(needle), "{extra:?}: stderr was {stderr}");
    assert!(!stderr.contains("panicked"), "{extra:?} panicked: {stderr}");
}

#[test]
fn bad_cores_are_rejected() {
    sim_fails(
        &["--app-cores", "0"],
        "--app-cores must be an integer in [1, 256], got 0",
    );
    sim_fails(
        &["--storage-cores", "-3"],
        "--storage-cores must be an integer in [1, 256], got -3",
    );
    sim_fails(&["--app-cores", "100000"], "--app-cores must be");
}

#[test]
fn unknown_workload_and_policy_are_rejected() {
    sim_fails(&["--workload", "gigantic"], "unknown workload 'gigantic'");
    sim_fails(&["--workload", "traverse:depth=2"], "needs parameter 'compute'");
    sim_fails(&["--policy", "asfp"], "does not model ASFP");
    sim_fails(&["--policy", "turbo"], "unknown policy 'turbo'");
    sim_fails(&["--policy", "fixed:1.5"], "out of range");
    sim_fails(&["--policy", "kayak:r-hz=20,x-hz=200"], "must run faster");
}

#[test]
fn bad_cluster_shapes_are_rejected() {
    sim_fails(&["--storage-nodes", "0"], "--storage-nodes must be in [1, 1024], got 0");
    sim_fails(&["--app-nodes", "-2"], "--app-nodes must be in [1, 1024], got -2");
    sim_fails(
        &["--storage-nodes", "2", "--app-nodes", "4", "--placement-groups", "3"],
        "--placement-groups 3: each group needs a storage node and an app node of its own, and there are 2 storage nodes",
    );
    sim_fails(&["--placement-groups", "0"], "--placement-groups 0");
    sim_fails(&["--stall-length-cv", "2"], "stall length cv must be in [0, 1], got 2");
    sim_fails(
        &["--stall-length-cv", "-0.5"],
        "stall length cv must be in [0, 1], got -0.5",
    );
    // Eight app cores on one node: 16 cannot be reached; MIN above MAX is no range.
    sim_fails(
        &["--elastic", "4..16"],
        "--elastic 4..16 is infeasible: it needs 1 <= MIN <= MAX <= 8",
    );
    sim_fails(&["--elastic", "6..2"], "--elastic 6..2 is infeasible");
    sim_fails(&["--elastic", "0..4"], "--elastic 0..4 is infeasible");
    sim_fails(&["--elastic", "8"], "not of the form MIN..MAX");
    sim_fails(&["--demand", "1k,2k"], "give how long each lasts");
    sim_fails(&["--demand", "lots"], "--demand");
    sim_fails(
        &["--slo-slowdown", "1"],
        "--slo-slowdown must be in (1, 1000000], got 1",
    );
    sim_fails(&["--slo-slowdown", "5", "--slo-p99", "1ms"], "cannot be used with");
    // A sweep runs at fixed rates on the whole cluster.
    let out = ferry(&["sim-sweep", "--storage-nodes", "2", "--skew", "--x-step", "0.5"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn slo_below_no_load_latency_is_rejected() {
    sim_fails(&["--slo-p99", "5us"], "below the no-load latency");
    // Local-only needs two round trips: 20 µs is below it even though RPC could make it.
    sim_fails(&["--policy", "kv", "--slo-p99", "20us"], "on the local path");
}

#[test]
fn unparsable_durations_are_rejected() {
    for (flag, value, needle) in [
        ("--duration", "5x", "unknown unit 'x'"),
        ("--duration", "-1s", "negative"),
        ("--rtt", "10", "no unit"),
        ("--slo-p99", "fast", "not a number"),
    ] {
        let out = ferry(&["sim", flag, value]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{flag} {value}: {stderr}");
        assert!(stderr.contains(needle), "{flag} {value}: {stderr}");
    }
}

#[test]
fn sweep_rejects_bimodal_and_bad_steps() {
    let out = ferry(&["sim-sweep", "--workload", "bimodal:a=medium,b=light,period=1s"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("single-phase"));
    let out = ferry(&["sim-sweep", "--x-step", "0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--x-step"));
}

#[test]
fn sim_writes_the_contracted_json_deterministically() {
    let scratch = tempfile::Builder::new().prefix("ferry-sim-cli-").tempdir().unwrap();
    let dir = scratch.path();
    let run = |name: &str| {
        let json = dir.join(name);
        let csv = dir.join(format!("{name}.csv"));
        let out = ferry(&[
            "sim",
            "--app-cores",
            "8",
            "--storage-cores",
            "8",
            "--rtt",
            "10us",
            "--workload",
            "traverse:depth=2,compute=10us",
            "--policy",
            "balance",
            "--slo-p99",
            "200us",
            "--duration",
            "300ms",
            "--seed",
            "1",
            "--json",
            json.to_str().unwrap(),
            "--timeline-csv",
            csv.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        (
            std::fs::read_to_string(json).unwrap(),
            std::fs::read_to_string(csv).unwrap(),
        )
    };
    let (a, a_csv) = run("a.json");
    let (b, b_csv) = run("b.json");
    assert_eq!(a, b, "same seed, same bytes");
    assert_eq!(a_csv, b_csv);
    let v: serde_json::Value = serde_json::from_str(&a).unwrap();
    for key in [
        "throughput_ops",
        "p99_us",
        "rpc_fraction",
        "rate_ops",
        "latency_us_mean",
    ] {
        assert!(v[key].is_number(), "{key} missing: {a}");
    }
    assert!(v["converge_ms"].is_number() || v["converge_ms"].is_null());
    let timeline = v["timeline"].as_array().unwrap();
    assert_eq!(timeline.len(), 30, "300 ms at 10 ms per row");
    for key in ["t_ms", "throughput_ops", "p99_us", "rpc_fraction", "rate_ops"] {
        assert!(timeline[29].get(key).is_some(), "timeline row lacks {key}");
    }
    // The loop climbs out of its first rate (10k/s) within the run: its first window is a
    // full one (2,000 completions, 200 ms at 10k/s), then startup doubles per window
    // (measured 72k/s over the 300 ms; the node serves ~350k/s).
    assert!(v["throughput_ops"].as_f64().unwrap() > 40_000.0);
    assert!(a_csv.starts_with("t_ms,throughput_ops,p99_us"));
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn sweep_writes_best_and_rows() {
    let scratch = tempfile::Builder::new().prefix("ferry-sweep-cli-").tempdir().unwrap();
    let dir = scratch.path();
    let json = dir.join("sweep.json");
    let out = ferry(&[
        "sim-sweep",
        "--workload",
        "heavy",
        "--x-step",
        "0.5",
        "--bisection-steps",
        "5",
        "--measure",
        "20ms",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("best: X ="), "{stdout}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(v["best_throughput_ops"].as_f64().unwrap() > 0.0);
    assert!(v["best_rpc_fraction"].is_number());
    assert_eq!(v["rows"].as_array().unwrap().len(), 3);
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_turning_point_sweep_places_each_function_of_a_mix() {
    let scratch = tempfile::Builder::new().prefix("ferry-tp-cli-").tempdir().unwrap();
    let dir = scratch.path();
    let json = dir.join("tp.json");
    let mix = "task:accesses=4,size=49152,compute=50ns@0.2+task:accesses=1,size=64,compute=50us@0.8";
    let out = ferry(&[
        "sim-sweep",
        "--app-cores",
        "16",
        "--storage-cores",
        "4",
        "--slo-p99",
        "1ms",
        "--workload",
        mix,
        "--turning-point",
        "--x-step",
        "0.1",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("best: alpha ="), "{stdout}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["axis"], "turning-point");
    // A (a fifth of the requests) goes remote first, and some of B after it.
    assert!(v["best_rpc_fraction"].as_f64().unwrap() > 0.2, "{v}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_grid_sweep_finds_the_all_or_nothing_optimum_of_two_functions() {
    let scratch = tempfile::Builder::new().prefix("ferry-grid-cli-").tempdir().unwrap();
    let dir = scratch.path();
    let json = dir.join("grid.json");
    let mix = "task:accesses=4,size=49152,compute=50ns@0.2+task:accesses=1,size=64,compute=50us@0.8";
    let args = [
        "sim-sweep",
        "--app-cores",
        "16",
        "--storage-cores",
        "4",
        "--slo-p99",
        "1ms",
        "--grid",
    ];
    let out = ferry(
        &[
            &args[..],
            &["--workload", mix, "--x-step", "0.5", "--json", json.to_str().unwrap()],
        ]
        .concat(),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["cells"].as_array().unwrap().len(), 9);
    // Theorem IV.1: A (cheaper remote on both sides) all remote at the optimum.
    assert_eq!(v["best_x_a"], 1.0, "{v}");
    let out = ferry(&[&args[..], &["--workload", "heavy"]].concat());
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("two functions"));
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn sweep_measures_a_given_window() {
    // The bound on a policy run's steady window: same span, same seed.
    let out = ferry(&[
        "sim-sweep",
        "--workload",
        "heavy",
        "--x-step",
        "1",
        "--bisection-steps",
        "3",
        "--measure-from",
        "100ms",
        "--measure",
        "20ms",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("best: X ="));
    let out = ferry(&["sim-sweep", "--measure-from", "soon"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--measure-from"));
    // `--duration` means what it means for `ferry sim`: the steady window of such a run.
    let out = ferry(&[
        "sim-sweep",
        "--workload",
        "heavy",
        "--x-step",
        "1",
        "--bisection-steps",
        "3",
        "--duration",
        "200ms",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for (args, needle) in [
        (vec!["--duration", "0s"], "--duration"),
        (vec!["--duration", "1s", "--measure", "10ms"], "cannot be used with"),
    ] {
        let mut full = vec!["sim-sweep"];
        full.extend_from_slice(&args);
        let out = ferry(&full);
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(needle), "{args:?}");
    }
}
