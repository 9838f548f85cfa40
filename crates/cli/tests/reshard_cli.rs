//! `ferry cluster reshard` on a running cluster: a slot range and its keys move from one
//! primary to another while clients keep writing them, and every write acknowledged
//! before, during or after the move is there afterwards (the hand-over: the source stops
//! writes to the range at a log offset, the destination copies up to it, and only then
//! does the new epoch route the range to it).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cluster_cli::{eventually, ferry, text, ClusterUp};

/// Writers, each with its own keys.
const WRITERS: usize = 2;
/// Most keys a writer sets (its time is bounded anyway).
const MAX_KEYS_PER_WRITER: usize = 100_000;
/// The range moved: the top of s2's slots.
const FIRST: u16 = 16000;
const LAST: u16 = 16383;

/// A RESP connection that follows -MOVED and retries -TRYAGAIN.
struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Client {
    fn connect(addr: &str) -> Client {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut client = Client {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
        };
        assert_eq!(client.call("AUTH ferry"), "+OK");
        client
    }

    fn call(&mut self, command: &str) -> String {
        self.writer.write_all(format!("{command}\r\n").as_bytes()).unwrap();
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        if line.starts_with('$') && !line.starts_with("$-1") {
            let mut value = String::new();
            self.reader.read_line(&mut value).unwrap();
            return value.trim_end().to_string();
        }
        line.trim_end().to_string()
    }

    /// Runs `command` until it is served, following the cluster's redirections.
    fn call_routed(&mut self, command: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            assert!(Instant::now() < deadline, "{command} not served within 60 s");
            let reply = self.call(command);
            if let Some(moved) = reply.strip_prefix("-MOVED ") {
                let addr = moved.split(' ').nth(1).unwrap().to_string();
                *self = Client::connect(&addr);
            } else if reply.starts_with("-TRYAGAIN") {
                std::thread::sleep(Duration::from_millis(5));
            } else {
                return reply;
            }
        }
    }
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
    let dir = std::env::temp_dir().join(format!("ferry-reshard-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let up = ClusterUp::start(&dir, &["--storage-nodes", "2", "--compute-nodes", "0"]);
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
                let mut client = Client::connect(&s2);
                // Found as they are needed: hashing a writer's every key first took longer
                // than the run on a loaded machine.
                let mut keys = (0..)
                    .map(|i| format!("w{w}-{i}"))
                    .filter(|key| (FIRST..=LAST).contains(&ferry_cluster::key_slot(key.as_bytes())));
                let mut acknowledged = Vec::new();
                while !stop.load(Ordering::Relaxed) && acknowledged.len() < MAX_KEYS_PER_WRITER {
                    let key = keys.next().unwrap();
                    assert_eq!(client.call_routed(&format!("SET {key} {key}")), "+OK");
                    acknowledged.push(key);
                }
                acknowledged
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let reshard = ferry()
        .args([
            "cluster",
            "reshard",
            "--config-group",
            &group,
            "--slots",
            &format!("{FIRST}-{LAST}"),
            "--to",
            "s1",
        ])
        .output()
        .unwrap();
    assert!(reshard.status.success(), "{}", text(&reshard));
    assert!(text(&reshard).contains("are served by s1"), "{}", text(&reshard));
    // Writes go on against the new owner for a while.
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let mut s1_client = Client::connect(&s1);
    let mut checked = 0;
    for writer in writers {
        for key in writer.join().unwrap() {
            let found = s1_client.call(&format!("GET {key}"));
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
        let reply = Client::connect(&s2).call(&format!("GET {key}"));
        (reply == format!("-MOVED {slot} {s1}")).then_some(()).ok_or(reply)
    });
    // A range split between shards is refused with the reason.
    let refused = ferry()
        .args([
            "cluster",
            "reshard",
            "--config-group",
            &group,
            "--slots",
            "8000-8300",
            "--to",
            "s1",
        ])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("not all served by one shard"),
        "{}",
        text(&refused)
    );
    drop(up);
    let _ = std::fs::remove_dir_all(&dir);
}
