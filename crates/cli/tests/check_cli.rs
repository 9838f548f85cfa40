//! `ferry check` from the command line: bad flags are refused with a clear message, and a
//! short run prints how many invocations it checked.

use std::process::{Command, Output};

fn ferry(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
        .arg("check")
        .args(args)
        .output()
        .expect("ferry runs")
}

fn refused(args: &[&str], needle: &str) {
    let out = ferry(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} was accepted");
    assert!(stderr.contains(needle), "{args:?}: {stderr}");
}

#[test]
fn bad_flags_are_refused() {
    refused(&["--duration", "0s"], "at least 1s");
    refused(&["--duration", "soon"], "--duration");
    refused(&["--duration", "1s", "--keys", "2"], "keys must be 4..=64");
    refused(&["--duration", "1s", "--clients", "0"], "clients must be");
}

#[test]
fn a_short_run_reports_what_it_checked() {
    let out = ferry(&["--duration", "1s", "--seed", "3", "--no-stalls"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("checked ") && last.ends_with("strictly serializable"),
        "{stdout}"
    );
    let checked: u64 = last.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(checked > 100, "{stdout}");
}
