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
    assert!(resp_judged(last) > 10, "{stdout}");
}

#[test]
fn a_short_crash_run_survives_its_kills_with_nothing_acknowledged_lost() {
    let (stdout, last) = nothing_lost(&["--crash", "--duration", "6s", "--seed", "11", "--mean-uptime", "1s"]);
    // The nemesis kills at least once during the run, and once more before the final read.
    assert!(count(&last, " crashes survived") >= 2, "{stdout}");
    // RESP transactions, whose changes the node logs at base versions and replays after
    // each kill, were judged across the crashes with the invocations.
    assert!(resp_judged(&last) > 100, "{stdout}");
}

/// How many RESP transactions a summary line says were judged (`N of M RESP transactions`).
fn resp_judged(last: &str) -> u64 {
    last.split(", ")
        .find(|part| part.contains(" RESP transactions"))
        .and_then(|part| part.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no count of RESP transactions in {last}"))
}

#[test]
fn a_short_cluster_run_through_every_kind_of_fault_is_strictly_serializable() {
    let (stdout, last) = nothing_lost(&[
        "--cluster",
        "--duration",
        "15s",
        "--seed",
        "13",
        "--mean-fault-interval",
        "2s",
    ]);
    // Faults come every 2 s on average and each settles first: some happen in 15 s.
    let faults: u64 = [
        " slot moves",
        " failovers",
        " partitions from the config group",
        " from the clients",
        " one-way",
        " from the replicas",
        " storage nodes killed",
        " disks lost",
    ]
    .iter()
    .map(|kind| count(&last, kind))
    .sum();
    assert!(faults >= 1, "{stdout}");
}

#[test]
fn a_short_cluster_run_through_cut_links_and_lost_disks_is_strictly_serializable() {
    let (stdout, last) = nothing_lost(&[
        "--cluster",
        "--duration",
        "20s",
        "--seed",
        "17",
        "--mean-fault-interval",
        "1s",
        "--faults",
        "clients,one-way,replicas,lose-disk",
    ]);
    let faults = count(&last, " from the clients")
        + count(&last, " one-way")
        + count(&last, " from the replicas")
        + count(&last, " disks lost");
    assert!(faults >= 1, "{stdout}");
    // Only the faults asked for.
    assert_eq!(
        count(&last, " slot moves")
            + count(&last, " partitions from the config group")
            + count(&last, " storage nodes killed"),
        0,
        "{stdout}"
    );
}

#[test]
fn cluster_faults_are_checked() {
    refused(&["--cluster", "--faults", "move,meteor"], "unknown fault \"meteor\"");
    refused(
        &["--cluster", "--ack", "primary", "--faults", "lose-disk"],
        "--faults lose-disk: it may lose writes --ack primary acknowledged",
    );
}

#[test]
fn under_ack_primary_a_primary_cut_off_the_config_group_stops_serving_before_it_is_replaced() {
    // Only moves and partitions here: the cut-off primary's clients keep reaching it, half
    // of them without news from the group, and its lease alone keeps their reads fresh and
    // the writes it acknowledged in its successor's log.
    let (stdout, last) = nothing_lost(&[
        "--cluster",
        "--ack",
        "primary",
        "--duration",
        "15s",
        "--seed",
        "8",
        "--mean-fault-interval",
        "2s",
    ]);
    assert_eq!(
        count(&last, " failovers") + count(&last, " storage nodes killed"),
        0,
        "{stdout}"
    );
    assert!(count(&last, " partitions from the config group") >= 1, "{stdout}");
}

/// Runs `ferry check ARGS`, which must pass with nothing acknowledged lost; its output
/// and last line.
fn nothing_lost(args: &[&str]) -> (String, String) {
    let out = ferry(args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let last = stdout.lines().last().unwrap_or_default().to_string();
    assert!(
        last.contains(" 0 acknowledged writes lost") && last.ends_with("strictly serializable"),
        "{stdout}"
    );
    (stdout, last)
}

/// The number before `what` in a summary line's comma-separated parts.
fn count(last: &str, what: &str) -> u64 {
    last.split(", ")
        .find_map(|part| part.strip_suffix(what))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of{what} in {last}"))
}

#[test]
fn crash_flags_need_crash() {
    refused(&["--duration", "1s", "--fsync", "always"], "--crash");
}
