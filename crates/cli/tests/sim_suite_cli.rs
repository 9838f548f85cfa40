//! `ferry sim-suite` as a user runs it: a small suite writes the contracted JSON, the same
//! seed gives the same bytes (with or without a bound cache), and bad input gets a clear
//! message and exit code 1, never a panic.

use std::path::Path;
use std::process::{Command, Output};

fn ferry(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(args)
        .output()
        .expect("run ferry")
}

/// Runs a two-scenario suite of short runs, writing JSON to `json`, with `extra` flags.
fn small_suite(json: &Path, extra: &[&str]) -> String {
    let mut args = vec![
        "sim-suite",
        "--scenarios",
        "2",
        "--seed",
        "11",
        "--duration",
        "600ms",
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = ferry(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_small_suite_writes_scenarios_and_summary_and_repeats_exactly() {
    let scratch = tempfile::Builder::new().prefix("ferry-suite-cli-").tempdir().unwrap();
    let dir = scratch.path();
    let (a, b, cache) = (dir.join("a.json"), dir.join("b.json"), dir.join("bounds.json"));
    let table = small_suite(&a, &["--bound-cache", cache.to_str().unwrap()]);
    assert!(
        table.contains("policy balance on 2 default scenarios (seed 11)"),
        "{table}"
    );
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&a).unwrap()).unwrap();
    let scenarios = v["scenarios"].as_array().unwrap();
    assert_eq!(scenarios.len(), 2);
    for s in scenarios {
        assert!(s["gap"].is_number(), "{s}");
        assert!(s["p99_over_slo"].is_number(), "{s}");
        assert!(s["converge_ms"].is_number() || s["converge_ms"].is_null(), "{s}");
        assert!(s["bound_ops"].as_f64().unwrap() > 0.0, "{s}");
        assert!(s["flags"].as_str().unwrap().contains("--workload traverse:"), "{s}");
        // A policy that searches reports its searches: one, on a steady workload.
        assert_eq!(s["searches"].as_u64(), Some(1), "{s}");
    }
    for key in ["gap_median", "gap_p90", "slo_met_share", "converged_within_1s_share"] {
        assert!(v["summary"][key].is_number(), "summary lacks {key}: {}", v["summary"]);
    }
    // The same seed again, the bounds now from the cache: the same bytes.
    small_suite(&b, &["--bound-cache", cache.to_str().unwrap()]);
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    let cached: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&cache).unwrap()).unwrap();
    assert_eq!(cached["bounds"].as_object().unwrap().len(), 2);
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn the_wide_space_runs_and_draws_its_slo_within_two_to_twenty_times_unloaded() {
    let json = std::env::temp_dir().join(format!("ferry-suite-wide-{}.json", std::process::id()));
    let out = ferry(&[
        "sim-suite",
        "--space",
        "wide",
        "--scenarios",
        "1",
        "--seed",
        "1",
        "--duration",
        "400ms",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("policy balance on 1 wide scenarios (seed 1)"), "{table}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["space"], "wide");
    for s in v["scenarios"].as_array().unwrap() {
        let factor = s["slo_us"].as_f64().unwrap() / s["unloaded_p99_us"].as_f64().unwrap();
        assert!((1.99..=20.1).contains(&factor), "{s}");
        assert!(s["bound_ops"].as_f64().unwrap() > 0.0, "{s}");
    }
    std::fs::remove_file(json).ok();
}

#[test]
fn bad_suite_input_says_what_is_wrong() {
    let bad_cache = std::env::temp_dir().join(format!("ferry-suite-bad-{}.json", std::process::id()));
    std::fs::write(&bad_cache, "not json").unwrap();
    for (args, needle) in [
        (vec!["--scenarios", "0"], "--scenarios must be in [1, 10000]"),
        (vec!["--scenarios", "-4"], "--scenarios must be in [1, 10000]"),
        (vec!["--space", "2+2"], "--space must be in {default, 1+1, mixed, wide}"),
        (vec!["--policy", "turbo"], "unknown policy 'turbo'"),
        (vec!["--policy", "asfp"], "does not model ASFP"),
        (vec!["--policy", "balance:without=nothing"], "unknown part 'nothing'"),
        (vec!["--duration", "1ms"], "--duration must be in [100ms, 600s]"),
        (vec!["--duration", "soon"], "not a number"),
        (
            vec!["--bound-cache", bad_cache.to_str().unwrap()],
            "is not a bound cache",
        ),
    ] {
        let mut full = vec!["sim-suite"];
        full.extend_from_slice(&args);
        let out = ferry(&full);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    std::fs::remove_file(bad_cache).ok();
}
