//! `ferry server --data-dir`: writes acknowledged under `--fsync always` survive kill -9,
//! a data dir in use is refused with a clear error, and log flags need a data dir.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::server_cli::Server;

fn ferry() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
}

/// A node on `dir` speaking RESP (killed with SIGKILL when dropped), and its RESP address.
fn start(dir: &Path, fsync: &str) -> (Server, String) {
    let dir = dir.to_str().unwrap();
    let mut server = Server::start(&["--resp", "127.0.0.1:0", "--fsync", fsync, "--data-dir", dir]);
    let resp = server.stdout.next().unwrap().unwrap();
    let addr = resp.strip_prefix("resp on ").expect("resp line").trim().to_string();
    let recovered = server.stdout.next().unwrap().unwrap();
    assert!(recovered.starts_with("recovered "), "{recovered}");
    (server, addr)
}

pub(crate) fn connect(addr: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    stream.write_all(command(&["AUTH", "1", "ferry"]).as_bytes()).unwrap();
    assert_eq!(read_line(&mut stream), "+OK");
    stream
}

/// One command as a RESP array.
pub(crate) fn command(args: &[&str]) -> String {
    let mut out = format!("*{}\r\n", args.len());
    for arg in args {
        out.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
    }
    out
}

pub(crate) fn read_line(stream: &mut TcpStream) -> String {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        stream.read_exact(&mut byte).unwrap();
        line.push(byte[0]);
    }
    String::from_utf8(line[..line.len() - 2].to_vec()).unwrap()
}

#[test]
fn writes_acknowledged_with_fsync_always_survive_kill_9() {
    let scratch = tempfile::Builder::new().prefix("ferry-cli-kill9-").tempdir().unwrap();
    let dir = scratch.path();
    let (server, addr) = start(dir, "always");
    let mut stream = connect(&addr);
    const WRITES: usize = 2000;
    let pipeline: String = (0..WRITES)
        .map(|i| command(&["SET", &format!("key{i}"), &format!("value{i}")]))
        .collect();
    stream.write_all(pipeline.as_bytes()).unwrap();
    for _ in 0..WRITES {
        assert_eq!(read_line(&mut stream), "+OK");
    }
    // Killed (SIGKILL, on drop) the moment the last acknowledgement is in.
    drop(server);

    let (_server, addr) = start(dir, "always");
    let mut stream = connect(&addr);
    let gets: String = (0..WRITES).map(|i| command(&["GET", &format!("key{i}")])).collect();
    stream.write_all(gets.as_bytes()).unwrap();
    for i in 0..WRITES {
        assert!(read_line(&mut stream).starts_with('$'), "key{i} lost");
        assert_eq!(read_line(&mut stream), format!("value{i}"));
    }
}

#[test]
fn a_second_node_on_a_data_dir_in_use_is_refused() {
    let scratch = tempfile::Builder::new().prefix("ferry-cli-locked-").tempdir().unwrap();
    let dir = scratch.path();
    let (server, _) = start(dir, "everysec");
    let second = ferry()
        .args(["server", "--listen", "127.0.0.1:0", "--tenant", "1:ferry", "--data-dir"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(!second.status.success());
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(stderr.contains("in use by another ferry server"), "{stderr}");
    drop(server);

    let no_dir = ferry()
        .args([
            "server",
            "--listen",
            "127.0.0.1:0",
            "--tenant",
            "1:ferry",
            "--fsync",
            "always",
        ])
        .output()
        .unwrap();
    assert!(!no_dir.status.success());
    assert!(String::from_utf8_lossy(&no_dir.stderr).contains("need --data-dir"));
}

#[test]
fn admin_snapshot_takes_one_and_a_kill_9_restart_recovers_from_it() {
    let scratch = tempfile::Builder::new()
        .prefix("ferry-cli-snapshot-")
        .tempdir()
        .unwrap();
    let dir = scratch.path();
    let (server, addr) = start(dir, "everysec");
    let mut stream = connect(&addr);
    let sets: String = (0..300)
        .map(|i| command(&["SET", &format!("k{i}"), "before"]))
        .collect();
    stream.write_all(sets.as_bytes()).unwrap();
    for _ in 0..300 {
        assert_eq!(read_line(&mut stream), "+OK");
    }
    let snapshot = ferry()
        .args(["admin", "snapshot", "--resp", &addr, "--tenant", "1:ferry"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&snapshot.stdout);
    assert!(
        snapshot.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&snapshot.stderr)
    );
    assert_eq!(stdout.trim(), "snapshot taken");
    let snapshots = std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".snap"))
        .count();
    assert_eq!(snapshots, 1);
    stream.write_all(command(&["SET", "k0", "after"]).as_bytes()).unwrap();
    assert_eq!(read_line(&mut stream), "+OK");
    drop(server);

    let mut server = Server::start(&["--resp", "127.0.0.1:0", "--data-dir", dir.to_str().unwrap()]);
    let addr = server
        .stdout
        .next()
        .unwrap()
        .unwrap()
        .strip_prefix("resp on ")
        .unwrap()
        .to_string();
    let recovered = server.stdout.next().unwrap().unwrap();
    assert!(
        recovered.starts_with("recovered 300 objects from 1 snapshots") && recovered.contains(" and 1 commits "),
        "{recovered}"
    );
    let mut stream = connect(&addr);
    stream.write_all(command(&["GET", "k0"]).as_bytes()).unwrap();
    assert_eq!(read_line(&mut stream), "$5");
    assert_eq!(read_line(&mut stream), "after");

    let no_node = ferry()
        .args(["admin", "snapshot", "--resp", "127.0.0.1:1", "--timeout", "5s"])
        .output()
        .unwrap();
    assert!(!no_node.status.success());
    assert!(String::from_utf8_lossy(&no_node.stderr).contains("cannot connect"));
}
