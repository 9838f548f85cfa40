//! `ferry plan` as a user runs it: a small problem gets a configuration, its prediction and
//! the `ferry sim` command that reproduces it (which does); an impossible demand and bad
//! flags get a clear message and exit code 1, never a panic.

use std::process::{Command, Output};

fn ferry(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(args)
        .output()
        .expect("run ferry")
}

/// `ferry plan` with `extra`, the candidates run for 1 s unless `extra` says otherwise.
fn plan(extra: &[&str]) -> Output {
    let mut args = vec!["plan"];
    if !extra.contains(&"--duration") {
        args.extend_from_slice(&["--duration", "1s"]);
    }
    args.extend_from_slice(extra);
    ferry(&args)
}

#[test]
fn a_small_problem_gets_a_small_cluster_and_a_command_that_reproduces_it() {
    let out = plan(&[
        "--workload",
        "light",
        "--slo-p99",
        "200us",
        "--demand",
        "300k",
        "--max-cores",
        "8",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("cheapest: 1 app node x "), "{text}");
    assert!(text.contains("headroom: meets up to"), "{text}");
    let cores: u32 = text
        .lines()
        .find(|l| l.starts_with("cheapest: "))
        .and_then(|l| l.rsplit("= ").next())
        .and_then(|n| n.trim_end_matches(" cores").parse().ok())
        .unwrap_or_else(|| panic!("no core count in {text}"));
    // Light work costs a storage core ~2 µs: 300 k/s needs one or two, never eight.
    assert!((2..=4).contains(&cores), "{cores} cores: {text}");
    let command = text
        .lines()
        .find_map(|l| l.strip_prefix("reproduce: ferry "))
        .unwrap_or_else(|| panic!("no command in {text}"));
    assert!(
        command.contains("--demand 300000") && command.contains("--seed 1"),
        "{command}"
    );
    // The command runs the very scenario the plan judged: the demand is served.
    let args: Vec<String> = command
        .split_whitespace()
        .map(|a| a.trim_matches('\'').to_string())
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let sim = ferry(&args);
    let sim_text = String::from_utf8_lossy(&sim.stdout);
    assert!(sim.status.success(), "{}", String::from_utf8_lossy(&sim.stderr));
    let throughput: f64 = sim_text
        .split("throughput ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no throughput in {sim_text}"));
    assert!(throughput > 0.95 * 300_000.0, "{sim_text}");
}

#[test]
fn an_impossible_demand_and_bad_flags_say_what_is_wrong() {
    let base = ["--workload", "light", "--slo-p99", "200us"];
    for (extra, needle) in [
        (
            vec!["--demand", "50M", "--max-cores", "8"],
            "no configuration up to --max-cores 8 can serve 50000000 requests/s",
        ),
        (vec!["--demand", "lots"], "--demand"),
        (vec!["--demand", "0"], "(0, 1e9]"),
        (
            vec!["--demand", "1k", "--max-cores", "1"],
            "--max-cores must be in [2, 4096], got 1",
        ),
        (
            vec!["--demand", "1k", "--max-cores", "-3"],
            "--max-cores must be in [2, 4096], got -3",
        ),
        (
            vec!["--demand", "1k", "--app-node-cores", "0"],
            "--app-node-cores must be in [1, 256]",
        ),
        (
            vec!["--demand", "1k", "--duration", "1ms"],
            "--duration must be in [100ms, 600s]",
        ),
        (
            vec!["--demand", "1k", "--profile", "/nonexistent/p.json"],
            "cannot read profile",
        ),
    ] {
        let mut args: Vec<&str> = base.to_vec();
        args.extend_from_slice(&extra);
        let out = plan(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{extra:?}: {err}");
        assert!(err.contains(needle), "{extra:?}: {err}");
        assert!(!err.contains("panicked"), "{extra:?}: {err}");
    }
    let out = plan(&["--workload", "light", "--slo-p99", "2us", "--demand", "1k"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("below the no-load latency"));
    let out = plan(&["--slo-p99", "1ms", "--demand", "1k"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--workload"));
}
