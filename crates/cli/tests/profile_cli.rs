//! `ferry calibrate` and `--profile` as a user runs them: a short calibration writes a
//! profile the simulator accepts; `ferry sim`, `sim-sweep`, `sim-suite` and `plan` run as
//! the profiled machine, explicit flags still win, and a missing, garbled or out-of-range
//! profile gets a clear message and exit code 1, never a panic.

use std::path::Path;
use std::process::{Command, Output};

fn ferry(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(args)
        .output()
        .expect("run ferry")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A fresh directory for one test, removed when the returned guard drops.
fn scratch(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("ferry-profile-{name}-"))
        .tempdir()
        .unwrap()
}

/// A profile of a made-up machine, as `ferry calibrate` writes one.
fn profile_json() -> serde_json::Value {
    serde_json::json!({
        "format": "ferry-profile",
        "version": 1,
        "measured_on": "a test machine",
        "measured_at": "2026-01-01 00:00:00 UTC",
        "rtt_ns": 41000,
        "app_msg_ns": 3000,
        "app_invoke_ns": 900,
        "app_byte_ns": 0.125,
        "storage_msg_ns": 2500,
        "storage_invoke_ns": 1200,
        "storage_get_ns": 300,
        "storage_byte_ns": 0.0625,
        "storage_compute_factor": 1.0,
        "stall_rate_hz": 2.5,
        "stall_mean_ns": 1500000,
        "notes": []
    })
}

fn write_profile(dir: &Path, name: &str, value: &serde_json::Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, value.to_string()).unwrap();
    path.to_str().unwrap().to_string()
}

/// `ferry sim` on one core each with a 20 ms SLO (above any profile's unloaded latency).
fn sim_with(extra: &[&str]) -> Output {
    let mut args = vec![
        "sim",
        "--app-cores",
        "1",
        "--storage-cores",
        "1",
        "--workload",
        "light",
        "--slo-p99",
        "20ms",
        "--duration",
        "300ms",
    ];
    args.extend_from_slice(extra);
    ferry(&args)
}

#[test]
fn calibrate_writes_a_profile_the_simulator_runs_as() {
    let dir = scratch("calibrate");
    let dir = dir.path();
    let path = dir.join("p.json");
    let out = ferry(&["calibrate", "--duration", "1s", "--out", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let table = stdout(&out);
    for row in [
        "rtt",
        "app per message",
        "storage per lookup",
        "storage per byte",
        "stalls per node",
    ] {
        assert!(table.contains(row), "no {row} row in {table}");
    }
    assert!(table.contains("profile written to"), "{table}");
    let profile: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(profile["version"], 1);
    // A one-second calibration on a busy machine can measure a per-message cost below zero
    // (a difference of two noisy figures): it is then clamped to 0, and the profile says so.
    let storage_msg_ns = profile["storage_msg_ns"].as_u64().unwrap();
    let noted = profile["notes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n.as_str().unwrap().contains("storage CPU per message"));
    assert!(storage_msg_ns > 0 || noted, "{profile}");
    assert!(profile["rtt_ns"].is_u64() && profile["stall_rate_hz"].is_number());
    let sim = sim_with(&["--profile", path.to_str().unwrap()]);
    assert!(sim.status.success(), "{}", stderr(&sim));
    assert!(stdout(&sim).contains("steady state"), "{}", stdout(&sim));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn bad_calibrate_flags_fail_before_measuring() {
    for (args, needle) in [
        (vec!["calibrate", "--duration", "10ms"], "duration must be between"),
        (vec!["calibrate", "--rate", "0"], "rate must be in"),
        (
            vec!["calibrate", "--out", "/nonexistent-dir/p.json"],
            "cannot write /nonexistent-dir/p.json",
        ),
        (vec!["calibrate", "--duration", "soon"], "--duration"),
    ] {
        let out = ferry(&args);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"), "{args:?}");
    }
}

#[test]
fn a_profile_sets_the_machine_and_explicit_flags_still_win() {
    let dir = scratch("flags");
    let dir = dir.path();
    let good = write_profile(dir, "good.json", &profile_json());
    let sim = sim_with(&["--profile", &good]);
    assert!(sim.status.success(), "{}", stderr(&sim));
    let text = stdout(&sim);
    assert!(text.contains("rtt 41us") && text.contains("profile "), "{text}");
    let sim = sim_with(&["--profile", &good, "--rtt", "20us"]);
    assert!(stdout(&sim).contains("rtt 20us"), "{}", stdout(&sim));
    // The same machine by flags gives the same bytes.
    let (a, b) = (dir.join("a.json"), dir.join("b.json"));
    let by_profile = sim_with(&["--profile", &good, "--json", a.to_str().unwrap()]);
    let by_flags = sim_with(&[
        "--rtt",
        "41us",
        "--app-msg-cost",
        "3us",
        "--app-invoke-cost",
        "900ns",
        "--app-byte-cost",
        "0.125",
        "--storage-msg-cost",
        "2.5us",
        "--storage-invoke-cost",
        "1.2us",
        "--storage-get-cost",
        "300ns",
        "--storage-byte-cost",
        "0.0625",
        "--storage-compute-factor",
        "1",
        "--stall-rate-hz",
        "2.5",
        "--stall-mean",
        "1.5ms",
        "--json",
        b.to_str().unwrap(),
    ]);
    assert!(by_profile.status.success() && by_flags.status.success());
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    let sweep = ferry(&[
        "sim-sweep",
        "--profile",
        &good,
        "--app-cores",
        "1",
        "--storage-cores",
        "1",
        "--workload",
        "light",
        "--slo-p99",
        "20ms",
        "--x",
        "0.5",
    ]);
    assert!(sweep.status.success(), "{}", stderr(&sweep));
    assert_eq!(
        stdout(&sweep)
            .lines()
            .filter(|l| l.trim_start().starts_with("0.50"))
            .count(),
        1
    );
    // The suite's 1+1 scenarios take the profile, and their flags spell it out.
    let json = dir.join("suite.json");
    let suite = ferry(&[
        "sim-suite",
        "--space",
        "1+1",
        "--scenarios",
        "1",
        "--duration",
        "300ms",
        "--profile",
        &good,
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(suite.status.success(), "{}", stderr(&suite));
    assert!(
        stdout(&suite).contains("with the profile of a test machine"),
        "{}",
        stdout(&suite)
    );
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let flags = report["scenarios"][0]["flags"].as_str().unwrap();
    for needle in [
        "--rtt 41us",
        "--storage-msg-cost 2.5us",
        "--app-byte-cost 0.125",
        "--stall-mean 1.5ms",
    ] {
        assert!(flags.contains(needle), "{needle} in {flags}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn bad_profiles_say_what_is_wrong() {
    let dir = scratch("bad");
    let dir = dir.path();
    let garbage = dir.join("garbage.json");
    std::fs::write(&garbage, "this is not json").unwrap();
    let garbage = garbage.to_str().unwrap().to_string();
    let mut value = profile_json();
    value["storage_msg_ns"] = serde_json::json!(50_000_000u64);
    let range = write_profile(dir, "range.json", &value);
    let mut value = profile_json();
    value["version"] = serde_json::json!(99);
    let version = write_profile(dir, "version.json", &value);
    let mut value = profile_json();
    value["rtt_ns"] = serde_json::json!("fast");
    let kind = write_profile(dir, "kind.json", &value);
    let missing = dir.join("missing.json").to_str().unwrap().to_string();
    let cases = [
        (missing.as_str(), "cannot read profile"),
        (garbage.as_str(), "is not a JSON profile"),
        (range.as_str(), "storage_msg_ns = 50000000 is outside [0, 10ms]"),
        (version.as_str(), "version 99; this ferry reads"),
        (
            kind.as_str(),
            "`rtt_ns` = \"fast\" is not a whole, non-negative number of nanoseconds",
        ),
    ];
    for (path, needle) in cases {
        for command in [
            vec!["sim", "--duration", "100ms", "--profile", path],
            vec!["sim-sweep", "--x", "1", "--profile", path],
            vec!["sim-suite", "--scenarios", "1", "--profile", path],
            vec![
                "plan",
                "--workload",
                "light",
                "--slo-p99",
                "1ms",
                "--demand",
                "1k",
                "--profile",
                path,
            ],
        ] {
            let out = ferry(&command);
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(1), "{command:?}: {err}");
            assert!(err.contains(needle), "{command:?}: {err}");
            assert!(!err.contains("panicked"), "{command:?}: {err}");
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}
