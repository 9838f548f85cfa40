//! RESP transactions placed among the versions: exact where a function read them, one
//! above what they read otherwise, and judged with the rest.

use ferry_check::{check, Violation};
use ferry_client::InvokeTrace;
use ferry_proto::message::ReadVersion;

use crate::program::{key, Program, Step, TABLE, TAG_ABSENT};
use crate::record::{history, lost_writes, resp_judged, Finished, Record, RecordError, RespJudged, Seen, Via};

/// The hot key every test uses (a string).
const K: u8 = 0;

fn at(version: u64) -> ReadVersion {
    ReadVersion {
        table: TABLE.into(),
        key: bytes::Bytes::copy_from_slice(&key(K)),
        version,
    }
}

/// One invocation, sent at `time` and answered one later.
fn record(time: u64, tag: u64, steps: Vec<Step>, seen: Seen, via: Via) -> Record {
    Record {
        client: tag,
        program: Program { tag, steps },
        invoke_ns: time,
        complete_ns: time + 1,
        seen,
        via,
    }
}

/// A function that committed: it read K (seeing `read`, a tag at a version) and, if
/// `wrote` gives a version, wrote it there.
fn function(time: u64, tag: u64, read: (u64, u64), wrote: Option<u64>) -> Record {
    let step = if wrote.is_some() { Step::Rmw(K) } else { Step::Read(K) };
    let seen = Seen::Committed {
        trace: InvokeTrace {
            reads: vec![at(read.1)],
            writes: wrote.into_iter().map(at).collect(),
        },
        tags: vec![read.0],
        finished: Finished::Remote,
        retries: 0,
    };
    record(time, tag, vec![step], seen, Via::Function)
}

/// A RESP transaction that read K and wrote it, seeing `read` (`None`: no answer).
fn resp(time: u64, tag: u64, seen: Seen) -> Record {
    record(time, tag, vec![Step::Rmw(K)], seen, Via::Resp)
}

fn executed(read: u64) -> Seen {
    Seen::Executed { tags: vec![read] }
}

/// The versions the history gives each invocation's reads and writes of K.
fn placed(records: &[Record]) -> Vec<(Vec<u64>, Vec<Option<u64>>)> {
    history(records)
        .unwrap()
        .invocations
        .into_iter()
        .map(|inv| {
            (
                inv.reads.into_iter().map(|(_, v)| v).collect(),
                inv.writes.into_iter().map(|(_, v)| v).collect(),
            )
        })
        .collect()
}

#[test]
fn a_chain_of_resp_writes_follows_what_it_read_and_is_exact_where_a_function_read_it() {
    let records = vec![
        function(0, 1, (TAG_ABSENT, 0), Some(10)),
        resp(2, 2, executed(1)),
        resp(4, 3, executed(2)),
        // The final read: a function that sees the second RESP write at 13.
        function(6, 4, (3, 13), None),
    ];
    let placed = placed(&records);
    assert_eq!(placed[1], (vec![10], vec![Some(11)]), "one above what it read");
    assert_eq!(placed[2], (vec![11], vec![Some(13)]), "exact: a function read it");
    let history = history(&records).unwrap();
    assert_eq!(check(&history).violation, None);
    assert_eq!(check(&history).judged, 4);
    assert_eq!(lost_writes(&history), 0);
    assert_eq!(resp_judged(&records, &history), RespJudged { judged: 2, unplaced: 0 });
}

#[test]
fn two_resp_writes_that_read_the_same_version_are_a_lost_update() {
    // Both read the function's write at 10; the second is read at 12. Without the first
    // placed one above what it read, nothing would order it, and nothing would be found.
    let records = vec![
        function(0, 1, (TAG_ABSENT, 0), Some(10)),
        resp(2, 2, executed(1)),
        resp(2, 3, executed(1)),
        function(6, 4, (3, 12), None),
    ];
    let verdict = check(&history(&records).unwrap());
    assert!(matches!(verdict.violation, Some(Violation::Cycle(_))), "{verdict:?}");
}

#[test]
fn an_acknowledged_resp_write_the_final_read_misses_is_lost() {
    // Acknowledged, then (say) a crash, and the final read finds what it overwrote.
    let records = vec![
        function(0, 1, (TAG_ABSENT, 0), Some(10)),
        resp(2, 2, executed(1)),
        function(6, 3, (1, 10), None),
    ];
    let history = history(&records).unwrap();
    assert_eq!(lost_writes(&history), 1);
    assert!(check(&history).violation.is_some());
}

#[test]
fn a_read_of_a_failed_resp_write_is_a_read_of_an_aborted_write() {
    let records = vec![resp(0, 1, Seen::Failed), resp(2, 2, executed(1))];
    let verdict = check(&history(&records).unwrap());
    assert!(
        matches!(verdict.violation, Some(Violation::AbortedRead { .. })),
        "{verdict:?}"
    );
}

#[test]
fn a_write_of_unknown_outcome_only_resp_read_stays_out_of_the_graph() {
    let records = vec![
        resp(0, 1, Seen::Unknown),
        resp(2, 2, executed(1)),
        resp(4, 3, executed(TAG_ABSENT)),
    ];
    let history = history(&records).unwrap();
    // The second's read and write have no place; the third read the key absent.
    assert_eq!(resp_judged(&records, &history), RespJudged { judged: 2, unplaced: 2 });
    assert_eq!(placed(&records)[2], (vec![0], vec![Some(1)]));
}

#[test]
fn contradictions_between_tags_and_versions_are_refused() {
    // One transaction read at two versions.
    let split = vec![
        resp(0, 1, executed(TAG_ABSENT)),
        function(2, 2, (1, 5), None),
        function(4, 3, (1, 6), None),
    ];
    assert!(matches!(history(&split), Err(RecordError::SplitVersion { .. })));
    // A tag nobody wrote.
    let phantom = vec![resp(0, 1, executed(99))];
    assert!(matches!(history(&phantom), Err(RecordError::UnwrittenTag { .. })));
    // Each read the other's write.
    let cycle = vec![resp(0, 1, executed(2)), resp(2, 2, executed(1))];
    assert!(matches!(history(&cycle), Err(RecordError::TagCycle { .. })));
    // Tags for a program with another number of reads.
    let miscounted = vec![resp(0, 1, Seen::Executed { tags: vec![] })];
    assert!(matches!(history(&miscounted), Err(RecordError::TagCount { .. })));
}
