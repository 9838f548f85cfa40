//! `ferry server --replication-listen` and `--replica-of` as real processes: a new replica
//! copies its primary's snapshot and log, follows every later write, serves reads and
//! refuses writes (READONLY), and after a kill -9 catches up from its own log; with
//! `--ack replica` a write is not acknowledged until a replica has it.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::durability_cli::{command, connect, read_line};
use crate::server_cli::Server;

const TOKEN: &str = "replication-test-token";

/// A fresh directory for one test, removed when the returned guard drops.
fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("ferry-cli-repl-{name}-"))
        .tempdir()
        .unwrap()
}

/// A node and the addresses it printed (`resp`, `replication`), and its other lines up to
/// the recovery line.
struct Node {
    /// Killed (SIGKILL) when the node is dropped.
    _server: Server,
    resp: String,
    replication: Option<String>,
    lines: Vec<String>,
}

fn start(dir: &Path, extra: &[&str]) -> Node {
    let mut args = vec!["--resp", "127.0.0.1:0", "--data-dir", dir.to_str().unwrap()];
    args.extend_from_slice(&["--replication-token", TOKEN]);
    args.extend_from_slice(extra);
    let mut server = Server::start(&args);
    let (mut resp, mut replication, mut lines) = (None, None, Vec::new());
    loop {
        let line = server.stdout.next().expect("a line").unwrap();
        if let Some(addr) = line.strip_prefix("resp on ") {
            resp = Some(addr.trim().to_string());
        } else if let Some(addr) = line.strip_prefix("replication on ") {
            replication = Some(addr.trim().to_string());
        }
        let done = line.starts_with("recovered ");
        lines.push(line);
        if done {
            break;
        }
    }
    Node {
        _server: server,
        resp: resp.expect("resp line"),
        replication,
        lines,
    }
}

/// Sends SETs of `key{from..to}` in one pipeline and checks every acknowledgement.
fn set_range(stream: &mut TcpStream, from: usize, to: usize) {
    let pipeline: String = (from..to)
        .map(|i| command(&["SET", &format!("key{i}"), &format!("value{i}")]))
        .collect();
    stream.write_all(pipeline.as_bytes()).unwrap();
    for _ in from..to {
        assert_eq!(read_line(stream), "+OK");
    }
}

/// GET of `key`: the value, or none.
fn get(stream: &mut TcpStream, key: &str) -> Option<String> {
    stream.write_all(command(&["GET", key]).as_bytes()).unwrap();
    let head = read_line(stream);
    if head == "$-1" || head == "_" {
        return None;
    }
    assert!(head.starts_with('$'), "{head}");
    Some(read_line(stream))
}

/// Waits (generously: a loaded machine) until the replica has `key{to - 1}` and checks
/// every key of the range.
fn wait_for_range(stream: &mut TcpStream, from: usize, to: usize) {
    let last = format!("key{}", to - 1);
    let deadline = Instant::now() + Duration::from_secs(30);
    while get(stream, &last).is_none() {
        assert!(Instant::now() < deadline, "the replica never received {last}");
        std::thread::sleep(Duration::from_millis(20));
    }
    for i in from..to {
        assert_eq!(get(stream, &format!("key{i}")), Some(format!("value{i}")), "key{i}");
    }
}

#[test]
fn a_new_replica_copies_its_primary_then_follows_it_and_refuses_writes() {
    let primary_dir = temp_dir("primary");
    let primary = start(primary_dir.path(), &["--replication-listen", "127.0.0.1:0"]);
    let source = primary.replication.clone().expect("replication line");
    let mut writes = connect(&primary.resp);
    set_range(&mut writes, 0, 300);
    // A snapshot, so the log before it is removed and a new replica must copy the
    // snapshot; then writes after it.
    writes.write_all(command(&["SAVE"]).as_bytes()).unwrap();
    assert_eq!(read_line(&mut writes), "+OK");
    set_range(&mut writes, 300, 400);

    let replica_dir = temp_dir("replica");

    let replica_dir = replica_dir.path();
    let replica = start(replica_dir, &["--replica-of", &source]);
    assert!(
        replica
            .lines
            .iter()
            .any(|line| line.starts_with("copied the primary: 1 snapshots")),
        "{:?}",
        replica.lines
    );
    let mut reads = connect(&replica.resp);
    wait_for_range(&mut reads, 0, 400);

    // Writes are refused as Redis replicas refuse them.
    reads.write_all(command(&["SET", "mine", "1"]).as_bytes()).unwrap();
    let refused = read_line(&mut reads);
    assert!(refused.starts_with("-READONLY "), "{refused}");
    assert_eq!(get(&mut reads, "mine"), None);

    // Later writes arrive.
    set_range(&mut writes, 400, 500);
    wait_for_range(&mut reads, 400, 500);

    // Killed, with writes while it is down: it comes back from its own log (no copy)
    // and catches up.
    drop(reads);
    drop(replica);
    set_range(&mut writes, 500, 600);
    let replica = start(replica_dir, &["--replica-of", &source]);
    assert!(
        !replica.lines.iter().any(|line| line.starts_with("copied")),
        "{:?}",
        replica.lines
    );
    let mut reads = connect(&replica.resp);
    wait_for_range(&mut reads, 0, 600);
    drop(primary);
}

#[test]
fn with_ack_replica_a_write_waits_for_a_replica() {
    let (primary_dir, replica_dir) = (temp_dir("ack-primary"), temp_dir("ack-replica"));
    let primary = start(
        primary_dir.path(),
        &["--replication-listen", "127.0.0.1:0", "--ack", "replica"],
    );
    let mut writes = connect(&primary.resp);
    writes.set_read_timeout(Some(Duration::from_millis(1500))).unwrap();
    writes.write_all(command(&["SET", "k", "v"]).as_bytes()).unwrap();
    let mut byte = [0u8; 1];
    let early = writes.read(&mut byte);
    assert!(
        matches!(&early, Err(err) if matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)),
        "acknowledged with no replica: {early:?}"
    );
    let _replica = start(
        replica_dir.path(),
        &["--replica-of", primary.replication.as_deref().unwrap()],
    );
    writes.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    writes.read_exact(&mut byte).unwrap();
    assert_eq!(byte[0], b'+');
    assert_eq!(read_line(&mut writes), "OK");
}

#[test]
fn replication_flags_are_checked() {
    let run = |args: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_ferry"))
            .args(["server", "--listen", "127.0.0.1:0", "--tenant", "1:ferry"])
            .args(args)
            .output()
            .unwrap();
        assert!(!output.status.success());
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    assert!(run(&["--replica-of", "127.0.0.1:1", "--replication-token", "t"]).contains("needs a data dir"));
    let dir = temp_dir("flags");
    let dir = dir.path();
    let dir = dir.to_str().unwrap();
    assert!(run(&["--data-dir", dir, "--replica-of", "127.0.0.1:1"]).contains("--replication-token"));
    assert!(run(&["--data-dir", dir, "--ack", "replica"]).contains("need --replication-listen or --replica-of"));
}
