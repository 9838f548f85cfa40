//! Randomized concurrency against a real node, with faults: every run's recorded history
//! must be strictly serializable, and the faults must actually have happened (a run in
//! which no connection was cut or no outcome was unknown would prove nothing). RESP
//! clients' MULTI/EXEC transactions are judged in the same histories.
//!
//! Seeded; the node's interleavings are not reproducible, so a failure prints the seed and
//! the checker's explanation. The longer soak is `ferry check --duration 60s --seed S`.

use std::time::Duration;

use ferry_chaos::{run, ChaosConfig};

/// How long each run invokes: the two runs and their checks stay well under a minute on
/// a loaded 2-core machine.
const RUN: Duration = Duration::from_secs(8);

#[test]
fn histories_under_connection_cuts_and_worker_replacement_are_strictly_serializable() {
    let config = ChaosConfig::new(11, RUN);
    let report = run(&config).expect("the run completes");
    println!("{report:#?}");
    assert_eq!(report.violation, None, "seed {}", config.seed);
    assert!(report.committed > 500, "too little work to judge: {report:?}");
    assert!(
        report.remote > 0 && report.local > 0 && report.pushed_back > 0,
        "{report:?}"
    );
    assert!(report.retries > 0, "no OCC conflict was forced: {report:?}");
    assert!(report.cuts > 0, "the proxy never cut a connection: {report:?}");
    assert!(report.unknown > 0, "no cut left an outcome unknown: {report:?}");
    assert!(
        report.worker_replacements > 0,
        "no stall reached the watchdog: {report:?}"
    );
    assert!(report.judged >= report.committed, "{report:?}");
    // RESP transactions ran in place beside the invocations, and were judged with them.
    assert!(report.resp_committed > 100, "too few RESP transactions: {report:?}");
    assert!(report.resp_judged >= report.resp_committed, "{report:?}");
}

#[test]
fn histories_without_faults_are_strictly_serializable_and_all_decided() {
    let mut config = ChaosConfig::new(12, RUN / 2);
    config.cut_mean_bytes = None;
    config.stall_probability = 0.0;
    let report = run(&config).expect("the run completes");
    println!("{report:#?}");
    assert_eq!(report.violation, None, "seed {}", config.seed);
    // With nothing cut, every outcome is known.
    assert_eq!(report.unknown, 0, "{report:?}");
    assert_eq!(report.judged, report.committed, "{report:?}");
    assert!(report.committed > 500, "{report:?}");
    // Every RESP transaction committed, and each of its reads and writes has its place
    // among the versions (only a writer of unknown outcome leaves one without).
    assert!(report.resp > 100, "{report:?}");
    assert_eq!(report.resp_judged, report.resp, "{report:?}");
    assert_eq!(report.resp_unplaced, 0, "{report:?}");
}
