//! `ferry cluster reshard` on a running cluster: a slot range and its keys move from one
//! primary to another while clients keep writing them, and every write acknowledged
//! before, during or after the move is there afterwards (the hand-over: the source stops
//! writes to the range at a log offset, the destination copies up to it, and only then
//! does the new epoch route the range to it).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cluster_cli::{eventually, ferry, text, ClusterUp, Resp};

/// Writers, each with its own keys.
const WRITERS: usize = 2;
/// Most keys a writer sets (its time is bounded anyway).
const MAX_KEYS_PER_WRITER: usize = 100_000;
/// The range moved: the top of s2's slots.
const FIRST: u16 = 16000;
const LAST: u16 = 16383;

/// Runs `words` until it is served, following the cluster's redirections: -MOVED to the
/// node named, -TRYAGAIN again shortly.
fn call_routed(client: &mut Resp, words: &[&str]) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "{words:?} not served within 60 s");
        let reply = client.call(words);
        if let Some(moved) = reply.strip_prefix("-MOVED ") {
            *client = Resp::connect(moved.split(' ').nth(1).unwrap());
        } else if reply.starts_with("-TRYAGAIN") {
            std::thread::sleep(Duration::from_millis(5));
        } else {
            return reply;
        }
    }
}

/// `ferry cluster reshard --slots SLOTS --to TO` against the config group `group`.
fn reshard(group: &str, slots: &str, to: &str) -> std::process::Output {
    ferry()
        .args([
            "cluster",
            "reshard",
            "--config-group",
            group,
            "--slots",
            slots,
            "--to",
            to,
        ])
        .output()
        .unwrap()
}

/// `count` keys whose slots are in the moved range, with `prefix`.
fn keys_in_range(prefix: &str, count: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("{prefix}{i}"))
        .filter(|key| (FIRST..=LAST).contains(&ferry_cluster::key_slot(key.as_bytes())))
        .take(count)
        .collect()
}

#[test]
fn a_slot_range_moves_under_writes_and_loses_no_acknowledged_write() {
    let scratch = tempfile::Builder::new().prefix("ferry-reshard-cli-").tempdir().unwrap();
    let dir = scratch.path();
    let up = ClusterUp::start(dir, &["--storage-nodes", "2", "--compute-nodes", "0"]);
    let cluster = up.json();
    let group = cluster["config_group"].as_str().unwrap().to_string();
    let resp = |i: usize| cluster["storage_nodes"][i]["resp"].as_str().unwrap().to_string();
    let (s1, s2) = (resp(0), resp(1));

    // Each writer sets new keys of the range, one after another: every key acknowledged
    // must be found after the move (a write the source took after the destination's copy
    // ended would be missing).
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let stop = Arc::clone(&stop);
            let s2 = s2.clone();
            std::thread::spawn(move || {
                let mut client = Resp::connect(&s2);
                // Found as they are needed: hashing a writer's every key first took longer
                // than the run on a loaded machine.
                let mut keys = (0..)
                    .map(|i| format!("w{w}-{i}"))
                    .filter(|key| (FIRST..=LAST).contains(&ferry_cluster::key_slot(key.as_bytes())));
                let mut acknowledged = Vec::new();
                while !stop.load(Ordering::Relaxed) && acknowledged.len() < MAX_KEYS_PER_WRITER {
                    let key = keys.next().unwrap();
                    assert_eq!(call_routed(&mut client, &["SET", &key, &key]), "+OK");
                    acknowledged.push(key);
                }
                acknowledged
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let moved = reshard(&group, &format!("{FIRST}-{LAST}"), "s1");
    assert!(moved.status.success(), "{}", text(&moved));
    assert!(text(&moved).contains("are served by s1"), "{}", text(&moved));
    // Writes go on against the new owner for a while.
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let mut s1_client = Resp::connect(&s1);
    let mut checked = 0;
    for writer in writers {
        for key in writer.join().unwrap() {
            let found = s1_client.call(&["GET", &key]);
            assert_eq!(found, key, "{key} was acknowledged; s1 has {found:?}");
            checked += 1;
        }
    }
    assert!(checked > 100, "only {checked} writes were made");
    eprintln!("{checked} acknowledged writes found after the move");
    // The source sends clients on once it has seen the hand-over's epoch.
    let key = keys_in_range("w0-", 1).remove(0);
    let slot = ferry_cluster::key_slot(key.as_bytes());
    eventually(Duration::from_secs(30), || {
        let reply = Resp::connect(&s2).call(&["GET", &key]);
        (reply == format!("-MOVED {slot} {s1}")).then_some(()).ok_or(reply)
    });
    // A range split between shards is refused with the reason.
    let refused = reshard(&group, "8000-8300", "s1");
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("not all served by one shard"),
        "{}",
        text(&refused)
    );
    drop(up);
    let _ = std::fs::remove_dir_all(dir);
}
