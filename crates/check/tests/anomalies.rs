//! The checker on hand-made histories: each anomaly class is caught and explained, and
//! serializable histories (including ones with aborts and unknown outcomes) pass.

use ferry_check::{check, History, Invocation, Outcome, Violation};

fn inv(client: u64, span: (u64, u64), outcome: Outcome, reads: &[(&str, u64)], writes: &[(&str, u64)]) -> Invocation {
    Invocation {
        client,
        invoke_ns: span.0,
        complete_ns: span.1,
        outcome,
        reads: reads.iter().map(|&(k, v)| (k.to_string(), v)).collect(),
        writes: writes.iter().map(|&(k, v)| (k.to_string(), Some(v))).collect(),
    }
}

fn committed(client: u64, span: (u64, u64), reads: &[(&str, u64)], writes: &[(&str, u64)]) -> Invocation {
    inv(client, span, Outcome::Committed, reads, writes)
}

fn cycle_of(h: &History) -> Vec<String> {
    match check(h).violation {
        Some(Violation::Cycle(edges)) => edges,
        other => panic!("expected a cycle, got {other:?}"),
    }
}

#[test]
fn a_serial_history_passes() {
    let h = History {
        invocations: vec![
            committed(1, (0, 10), &[("x", 0)], &[("x", 1)]),
            committed(2, (20, 30), &[("x", 1)], &[("x", 2)]),
            committed(1, (40, 50), &[("x", 2), ("y", 0)], &[]),
            // Concurrent with the first, reading what was there before it: serializable.
            committed(3, (5, 15), &[("x", 0)], &[]),
            // An abort that nobody saw.
            inv(3, (60, 70), Outcome::Aborted, &[("x", 2)], &[("x", 9)]),
        ],
    };
    let v = check(&h);
    assert_eq!(v.violation, None);
    assert_eq!(v.judged, 4);
}

#[test]
fn a_lost_update_is_a_ww_rw_cycle() {
    // Both read x at 1 and both install a successor: one update is lost.
    let h = History {
        invocations: vec![
            committed(1, (0, 10), &[], &[("x", 1)]),
            committed(2, (20, 40), &[("x", 1)], &[("x", 2)]),
            committed(3, (25, 45), &[("x", 1)], &[("x", 3)]),
        ],
    };
    let cycle = cycle_of(&h);
    assert_eq!(cycle.len(), 2, "{cycle:?}");
    let text = cycle.join(" | ");
    assert!(text.contains("(ww)") && text.contains("(rw)"), "{text}");
    assert!(text.contains("T1") && text.contains("T2"), "{text}");
}

#[test]
fn write_skew_is_an_rw_rw_cycle() {
    // Each reads both x and y and writes one of them: both constraints held alone.
    let h = History {
        invocations: vec![
            committed(1, (0, 10), &[], &[("x", 1), ("y", 2)]),
            committed(2, (20, 40), &[("x", 1), ("y", 2)], &[("x", 3)]),
            committed(3, (20, 40), &[("x", 1), ("y", 2)], &[("y", 4)]),
        ],
    };
    let cycle = cycle_of(&h);
    assert_eq!(cycle.len(), 2, "{cycle:?}");
    assert!(cycle.iter().all(|e| e.ends_with("(rw)")), "{cycle:?}");
}

#[test]
fn a_stale_read_after_the_write_completed_breaks_real_time() {
    // T1 installs x = 2 and completes at 10; T2 begins at 20 and still reads x at 1. Without
    // real time it would serialize (T2 before T1); with it, it cannot.
    let h = History {
        invocations: vec![
            committed(1, (0, 5), &[], &[("x", 1)]),
            committed(1, (6, 10), &[("x", 1)], &[("x", 2)]),
            committed(2, (20, 30), &[("x", 1)], &[]),
        ],
    };
    let cycle = cycle_of(&h);
    let text = cycle.join(" | ");
    assert!(text.contains("(rt)") && text.contains("(rw)"), "{text}");
    assert!(
        text.contains("T1 (client 1, 6–10 ns) completed before T2 (client 2, 20–30 ns) began"),
        "{text}"
    );
}

#[test]
fn an_aborted_write_that_is_visible_is_caught() {
    let h = History {
        invocations: vec![
            inv(1, (0, 10), Outcome::Aborted, &[], &[("x", 7)]),
            committed(2, (20, 30), &[("x", 7)], &[]),
        ],
    };
    match check(&h).violation {
        Some(v @ Violation::AbortedRead { .. }) => {
            assert!(v.to_string().contains("read x at version 7, written by T0"), "{v}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_version_nobody_wrote_is_caught_and_an_unknown_outcome_can_explain_one() {
    let read_phantom = History {
        invocations: vec![committed(1, (0, 10), &[("x", 5)], &[])],
    };
    assert!(matches!(
        check(&read_phantom).violation,
        Some(Violation::PhantomVersion { .. })
    ));
    // A commit whose reply was lost wrote x; a later read of x at 5 shows it committed,
    // and it then takes part in the graph (here: consistently).
    let mut unknown = inv(1, (0, 0), Outcome::Unknown, &[("x", 0)], &[]);
    unknown.writes = vec![("x".into(), None)];
    let h = History {
        invocations: vec![unknown, committed(2, (100, 110), &[("x", 5)], &[])],
    };
    let v = check(&h);
    assert_eq!(v.violation, None);
    assert_eq!(v.judged, 2);
}

#[test]
fn an_unknown_outcome_seen_to_commit_is_judged_without_a_completion() {
    // The recorder learned (from a value read) that T0, whose reply was lost, installed
    // x at 5. T0 then counts as a writer: T2, which read x at 0 and began after T1 read
    // x at 5, is a stale read. T0 has no completion time, so real time orders nothing after it.
    let mut seen = inv(1, (0, 0), Outcome::Unknown, &[], &[("x", 5)]);
    seen.complete_ns = u64::MAX;
    let h = History {
        invocations: vec![
            seen.clone(),
            committed(2, (10, 20), &[("x", 5)], &[]),
            committed(3, (30, 40), &[("x", 0)], &[]),
        ],
    };
    let v = check(&h);
    assert_eq!(v.judged, 3);
    assert!(matches!(v.violation, Some(Violation::Cycle(_))), "{:?}", v.violation);
    // Reading x at 0 concurrently with it, before anything was seen of it, is fine.
    let fine = History {
        invocations: vec![
            seen,
            committed(3, (1, 2), &[("x", 0)], &[]),
            committed(2, (10, 20), &[("x", 5)], &[]),
        ],
    };
    assert_eq!(check(&fine).violation, None);
}

#[test]
fn two_writers_of_one_version_are_caught() {
    let h = History {
        invocations: vec![
            committed(1, (0, 10), &[], &[("x", 1)]),
            committed(2, (0, 10), &[], &[("x", 1)]),
        ],
    };
    assert!(matches!(check(&h).violation, Some(Violation::DuplicateVersion { .. })));
}

/// A long serial history of read-modify-writes on a few hot keys passes, and the same
/// history with one read made stale fails: the checker scales to the randomized test's
/// histories (tens of thousands of invocations) and finds one bad read among them.
#[test]
fn a_long_history_passes_and_one_stale_read_in_it_is_found() {
    let keys = ["a", "b", "c", "d"];
    let mut version = [0u64; 4];
    let mut clock = 0u64;
    let mut invocations = Vec::new();
    for i in 0..20_000u64 {
        let k = (i * 7 % 4) as usize;
        clock += 1;
        let read = version[k];
        version[k] = clock;
        invocations.push(committed(
            i % 8,
            (clock * 10, clock * 10 + 5),
            &[(keys[k], read)],
            &[(keys[k], clock)],
        ));
    }
    let mut h = History { invocations };
    let v = check(&h);
    assert_eq!(v.violation, None);
    assert_eq!(v.judged, 20_000);
    // Invocation 10 000 now reads the version before the one it overwrote.
    let (k, _) = h.invocations[10_000].reads[0].clone();
    let older = h.invocations[..10_000]
        .iter()
        .rev()
        .filter(|inv| inv.writes[0].0 == k)
        .nth(1)
        .map(|inv| inv.writes[0].1.unwrap())
        .unwrap();
    h.invocations[10_000].reads[0].1 = older;
    assert!(matches!(check(&h).violation, Some(Violation::Cycle(_))));
}
