//! `ferry demo`, `ferry bench` and `ferry sweep` as users run them.

use std::process::{Command, Output};

fn ferry() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn scratch_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ferry-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn demo_quick_compares_the_policies_on_both_parts_and_writes_a_report() {
    let out = scratch_dir("demo");
    let output = ferry().args(["demo", "--quick", "--out"]).arg(&out).output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let table = stdout(&output);
    assert!(
        table.contains("social:vertices=500 at p99"),
        "the mixed part ran: {table}"
    );
    for policy in ["kv ", "rpc ", "balance ", "kayak ", "pyxis "] {
        let line = table
            .lines()
            .find(|line| line.starts_with(policy))
            .unwrap_or_else(|| panic!("no row for {policy} in {table}"));
        let goodput: f64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert!(goodput > 0.0, "{line}");
    }
    // One sentence per part on the default against the better static policy.
    let verdicts = table
        .lines()
        .filter(|line| line.starts_with("balance ") && line.contains("the SLO"))
        .count();
    assert_eq!(verdicts, 2, "a verdict per part: {table}");
    let report = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        report.contains("<svg") && report.contains("balance") && report.contains("pyxis on social"),
        "the report holds the charts of both parts"
    );
    // Regression: the report listed the embedded node's pinning as `[]` and charged the
    // node's threads to the app side too (1.69 app CPUs on a side pinned to one CPU).
    if std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2 {
        assert!(
            report.contains("pinning (node / app): [0] / [1]"),
            "the report states the real pinning"
        );
        let app_cpus: Vec<f64> = report
            .split("CPU used (node / app): ")
            .skip(1)
            .filter_map(|rest| rest.split(';').next()?.split(" / ").nth(1)?.trim().parse().ok())
            .collect();
        assert!(!app_cpus.is_empty(), "the report gives the app side's CPU");
        // One CPU, and /proc's 10 ms ticks over a one-second run.
        const APP_CPUS_MAX: f64 = 1.1;
        for cpus in app_cpus {
            assert!(cpus <= APP_CPUS_MAX, "{cpus} app CPUs on a side pinned to one CPU");
        }
    }
    let _ = std::fs::remove_dir_all(out);
}

#[test]
fn bench_writes_the_simulators_fields() {
    let dir = scratch_dir("bench");
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("bench.json");
    let csv = dir.join("timeline.csv");
    let output = ferry()
        .args([
            "bench",
            "--workload",
            "light",
            "--policy",
            "rpc",
            "--duration",
            "800ms",
            "--nodes",
            "2000",
            // Both sides' CPUs kept warm: the node child gets `--keep-warm` too.
            "--keep-warm",
        ])
        .args(["--timeline-interval", "100ms", "--json"])
        .arg(&json)
        .arg("--timeline-csv")
        .arg(&csv)
        .arg("--report")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for field in ["throughput_ops", "p99_us", "rpc_fraction", "converge_ms", "timeline"] {
        assert!(report.get(field).is_some(), "JSON lacks {field}");
    }
    assert!(report["throughput_ops"].as_f64().unwrap() > 0.0);
    assert_eq!(report["rpc_fraction"].as_f64(), Some(1.0));
    let timeline = report["timeline"].as_array().unwrap();
    assert_eq!(timeline.len(), 8);
    for field in ["t_ms", "throughput_ops", "p99_us", "rpc_fraction", "rate_ops"] {
        assert!(timeline[0].get(field).is_some(), "timeline rows lack {field}");
    }
    let csv = std::fs::read_to_string(&csv).unwrap();
    assert!(csv.starts_with("t_ms,throughput_ops,p99_us"));
    assert_eq!(csv.lines().count(), 9);
    assert!(std::fs::read_to_string(dir.join("report.html"))
        .unwrap()
        .contains("<svg"));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn bad_placement_flags_fail_with_a_message() {
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["bench", "--workload", "nonsense"], "--workload"),
        (vec!["bench", "--policy", "magic"], "--policy"),
        (
            vec!["bench", "--slo-p99", "0ms"],
            "for '--slo-p99 <SLO_P99>': an SLO must be positive",
        ),
        (vec!["bench", "--slo-p99", "fast"], "--slo-p99"),
        (
            vec!["bench", "--server", "127.0.0.1:1", "--duration", "1s"],
            "cannot connect",
        ),
        (
            vec!["bench", "--client-cpus", "4000", "--duration", "1s"],
            "does not exist",
        ),
        (vec!["bench", "--server-cpus", "1", "--client-cpus", "1"], "overlap"),
        (vec!["bench", "--target", "http://example.com"], "redis://"),
        (
            vec!["bench", "--target", "redis://127.0.0.1:1", "--duration", "1s"],
            "cannot connect",
        ),
        (vec!["sweep", "--step", "0"], "step"),
        (vec!["sweep", "--workload", "bimodal:a=nothing"], "--workload"),
        (vec!["demo", "--policies", "kv,??"], "--policies"),
        (vec!["demo", "--slo-p99", "0s"], "--slo-p99"),
    ];
    for (args, expected) in cases {
        let output = ferry().args(&args).output().unwrap();
        assert!(!output.status.success(), "{args:?} should fail");
        let message = stderr(&output);
        assert!(
            message.contains(expected),
            "{args:?}: expected {expected:?} in {message:?}"
        );
        assert!(!message.contains("panicked"), "{args:?} panicked: {message}");
    }
}
