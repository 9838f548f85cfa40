//! Failover of real processes: `ferry cluster up --replicas 1 --ack replica`; a replica
//! serves its shard's reads to a READONLY connection; a primary
//! stopped (SIGSTOP: alive but silent, as a partition leaves it) is fenced and its replica
//! promoted by the config group; the old primary, continued, serves nothing without its
//! lease, finds itself demoted, restarts and copies the new primary as its replica; writes
//! through the gateway resume on the new primary and no acknowledged write is lost. A
//! primary killed with its data dir deleted (a lost disk) comes back empty, is not let
//! serve over its replica's longer log, and rejoins as a replica that copies it: every
//! acknowledged key is served again and the other shard never stops.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::cluster_cli::{eventually, ClusterUp};

/// A RESP connection (tenant 1, token ferry) that gives up on a reply after `timeout`.
pub(crate) fn connect(addr: &str, timeout: Duration) -> std::io::Result<TcpStream> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.write_all(b"AUTH ferry\r\n")?;
    let reply = read_line(&mut stream)?;
    if reply != "+OK" {
        return Err(std::io::Error::other(reply));
    }
    Ok(stream)
}

fn read_line(stream: &mut TcpStream) -> std::io::Result<String> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        stream.read_exact(&mut byte)?;
        line.push(byte[0]);
    }
    Ok(String::from_utf8_lossy(&line[..line.len() - 2]).into_owned())
}

/// One command and its first reply line (a bulk string's value for GET).
pub(crate) fn ask(stream: &mut TcpStream, command: &str) -> std::io::Result<String> {
    stream.write_all(format!("{command}\r\n").as_bytes())?;
    let head = read_line(stream)?;
    if head.starts_with('$') && head != "$-1" {
        return read_line(stream);
    }
    Ok(head)
}

/// Keys of shard 1 (slots 0-8191 of two nodes).
pub(crate) fn shard1_keys(count: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("key{i}"))
        .filter(|key| ferry_cluster::key_slot(key.as_bytes()) <= 8191)
        .take(count)
        .collect()
}

/// Keys of shard 2 (slots 8192-16383 of two nodes).
pub(crate) fn shard2_keys(count: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("key{i}"))
        .filter(|key| ferry_cluster::key_slot(key.as_bytes()) > 8191)
        .take(count)
        .collect()
}

/// The status line of an HTTP GET of `path`.
fn http_status(addr: &str, path: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())?;
    read_line(&mut stream)
}

/// Two shards with a replica each, `--ack replica`, no compute node.
pub(crate) fn replicated_cluster(dir: &std::path::Path) -> ClusterUp {
    ClusterUp::start(
        dir,
        &[
            "--storage-nodes",
            "2",
            "--replicas",
            "1",
            "--ack",
            "replica",
            "--compute-nodes",
            "0",
        ],
    )
}

/// Until the config group leases shard 1 (its primary has acted on having replicas: from
/// then on the leader may fence it).
pub(crate) fn wait_until_leased(group: &str) {
    eventually(Duration::from_secs(60), || {
        let status = crate::cluster_cli::ferry()
            .args(["cluster", "status", "--json", "--config-group", group])
            .output()
            .unwrap();
        let config: serde_json::Value = serde_json::from_slice(&status.stdout).map_err(|err| err.to_string())?;
        (config["shards"]["1"]["leased"] == true)
            .then_some(())
            .ok_or(format!("{config}"))
    });
}

pub(crate) fn node<'a>(cluster: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    cluster["storage_nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|node| node["id"] == id)
        .unwrap_or_else(|| panic!("no node {id} in {cluster}"))
}

fn signal(pid: u64, signal: libc::c_int) {
    // SAFETY: kill(2) with a pid and a signal number.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, signal) }, 0);
}

#[test]
fn a_silent_primary_is_replaced_by_its_replica_and_rejoins_as_one() {
    let scratch = tempfile::Builder::new()
        .prefix("ferry-failover-cli-")
        .tempdir()
        .unwrap();
    let dir = scratch.path();
    let up = replicated_cluster(dir);
    let cluster = up.json();
    assert_eq!(node(&cluster, "s1")["role"], "primary", "{cluster}");
    assert_eq!(node(&cluster, "s1r1")["role"], "replica", "{cluster}");
    assert_eq!(node(&cluster, "s1r1")["slots"][0], "0-8191", "{cluster}");
    let gateway = cluster["gateway_resp"].as_str().unwrap().to_string();
    let old_primary = node(&cluster, "s1")["pid"].as_u64().unwrap();
    let old_primary_resp = node(&cluster, "s1")["resp"].as_str().unwrap().to_string();

    // Acknowledged writes: under --ack replica each is on s1r1 before its +OK.
    let keys = shard1_keys(50);
    let mut writes = connect(&gateway, Duration::from_secs(20)).unwrap();
    for key in &keys {
        assert_eq!(ask(&mut writes, &format!("SET {key} acked")).unwrap(), "+OK");
    }

    // The replica serves reads of its shard to a connection that asks (READONLY), and
    // sends others to the primary.
    let replica_resp = node(&cluster, "s1r1")["resp"].as_str().unwrap().to_string();
    let mut replica = connect(&replica_resp, Duration::from_secs(20)).unwrap();
    let moved = ask(&mut replica, &format!("GET {}", keys[0])).unwrap();
    assert!(moved.starts_with("-MOVED "), "{moved}");
    assert_eq!(ask(&mut replica, "READONLY").unwrap(), "+OK");
    assert_eq!(ask(&mut replica, &format!("GET {}", keys[0])).unwrap(), "acked");
    let refused = ask(&mut replica, &format!("SET {} no", keys[0])).unwrap();
    assert!(refused.starts_with("-MOVED "), "a write is the primary's: {refused}");
    assert_eq!(ask(&mut replica, "READWRITE").unwrap(), "+OK");
    let moved = ask(&mut replica, &format!("GET {}", keys[0])).unwrap();
    assert!(moved.starts_with("-MOVED "), "{moved}");
    drop(replica);

    // The leader fences only a primary that has acted on having replicas (it serves
    // under a lease from then on): wait for that, as an operator would see it.
    wait_until_leased(cluster["config_group"].as_str().unwrap());
    signal(old_primary, libc::SIGSTOP);
    let stopped = Instant::now();
    eventually(Duration::from_secs(60), || {
        let cluster = up.json();
        match node(&cluster, "s1r1")["role"].as_str() {
            Some("primary") => Ok(()),
            other => Err(format!("s1r1 is {other:?}")),
        }
    });
    eprintln!("s1r1 promoted {:?} after s1 stopped", stopped.elapsed());

    // The old primary, continued, holds no lease: whatever it answers, it does not take
    // the write.
    signal(old_primary, libc::SIGCONT);
    if let Ok(mut stream) = connect(&old_primary_resp, Duration::from_secs(5)) {
        let reply = ask(&mut stream, &format!("SET {} from-the-old-primary", keys[1]));
        assert!(reply.as_deref().map_or(true, |reply| reply != "+OK"), "{reply:?}");
    }

    // Under --ack replica the new primary acknowledges a write once a replica has it:
    // once the old primary has restarted and copied it. A request stuck on the stopped
    // node, or waiting for that, is sent again on a new connection.
    let mut resumed = None;
    while stopped.elapsed() < Duration::from_secs(90) {
        let attempt = connect(&gateway, Duration::from_secs(2))
            .and_then(|mut stream| ask(&mut stream, &format!("SET {} after", keys[0])));
        if attempt.as_deref().is_ok_and(|reply| reply == "+OK") {
            resumed = Some(stopped.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let resumed = resumed.expect("writes to the stopped primary's slots never resumed");
    eprintln!("writes resumed {resumed:?} after the primary stopped");

    // No acknowledged write is lost.
    let mut reads = connect(&gateway, Duration::from_secs(20)).unwrap();
    assert_eq!(ask(&mut reads, &format!("GET {}", keys[0])).unwrap(), "after");
    for key in &keys[1..] {
        assert_eq!(ask(&mut reads, &format!("GET {key}")).unwrap(), "acked", "{key}");
    }

    // It found itself demoted, exited, was restarted, copied the new primary, and
    // follows it.
    eventually(Duration::from_secs(60), || {
        let cluster = up.json();
        let s1 = node(&cluster, "s1");
        match (s1["role"].as_str(), s1["pid"].as_u64()) {
            (Some("replica"), Some(pid)) if pid != old_primary => Ok(()),
            other => Err(format!("s1 is {other:?}")),
        }
    });
    let mut writes = connect(&gateway, Duration::from_secs(30)).unwrap();
    assert_eq!(ask(&mut writes, &format!("SET {} later", keys[2])).unwrap(), "+OK");
    assert_eq!(ask(&mut writes, &format!("GET {}", keys[2])).unwrap(), "later");
    // Four data dirs of preallocated log segments: not left behind.
    drop(up);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_primary_whose_disk_is_gone_comes_back_as_a_replica_and_nothing_acknowledged_is_lost() {
    let scratch = tempfile::Builder::new()
        .prefix("ferry-lost-disk-cli-")
        .tempdir()
        .unwrap();
    let dir = scratch.path();
    let up = replicated_cluster(dir);
    let cluster = up.json();
    let gateway = cluster["gateway_resp"].as_str().unwrap().to_string();
    let victim = node(&cluster, "s1")["pid"].as_u64().unwrap();
    let other = node(&cluster, "s2")["pid"].as_u64().unwrap();
    let (keys, others) = (shard1_keys(50), shard2_keys(5));
    let mut writes = connect(&gateway, Duration::from_secs(20)).unwrap();
    for key in keys.iter().chain(&others) {
        assert_eq!(ask(&mut writes, &format!("SET {key} acked")).unwrap(), "+OK");
    }
    drop(writes);
    wait_until_leased(cluster["config_group"].as_str().unwrap());
    // The other shard is read directly, all through the event: it must never stop.
    let mut shard2 = connect(node(&cluster, "s2")["resp"].as_str().unwrap(), Duration::from_secs(5)).unwrap();
    let mut read_shard2 = || {
        for key in &others {
            assert_eq!(
                ask(&mut shard2, &format!("GET {key}")).unwrap(),
                "acked",
                "shard 2 stopped"
            );
        }
    };

    // The disk and the process are gone. The node is frozen first: a running node may
    // create a file (a log segment, a snapshot) while its directory is being removed,
    // which fails the removal with "Directory not empty".
    signal(victim, libc::SIGSTOP);
    std::fs::remove_dir_all(dir.join("node-s1")).unwrap();
    signal(victim, libc::SIGKILL);
    let killed = Instant::now();
    eventually(Duration::from_secs(90), || {
        read_shard2();
        let attempt = connect(&gateway, Duration::from_secs(2)).and_then(|mut stream| {
            keys.iter()
                .map(|key| ask(&mut stream, &format!("GET {key}")))
                .collect::<std::io::Result<Vec<String>>>()
        });
        match attempt {
            Ok(values) if values.iter().all(|value| value == "acked") => Ok(()),
            Ok(values) => Err(format!("not all served: {values:?}")),
            Err(err) => Err(err.to_string()),
        }
    });
    eprintln!(
        "every acknowledged key served again {:?} after the kill",
        killed.elapsed()
    );
    let cluster = up.json();
    assert_eq!(node(&cluster, "s1r1")["role"], "primary", "{cluster}");

    // s1 copied the new primary and follows it, caught up (ready).
    eventually(Duration::from_secs(90), || {
        read_shard2();
        let cluster = up.json();
        let s1 = node(&cluster, "s1");
        if s1.get("down").is_some() || s1["role"] != "replica" {
            return Err(format!("s1: {s1}"));
        }
        let ready =
            http_status(s1["metrics"].as_str().unwrap_or_default(), "/readyz").map_err(|err| err.to_string())?;
        ready
            .contains(" 200 ")
            .then_some(())
            .ok_or(format!("s1 /readyz: {ready}"))
    });
    eprintln!("s1 a caught-up replica {:?} after the kill", killed.elapsed());
    let mut replica = connect(
        node(&up.json(), "s1")["resp"].as_str().unwrap(),
        Duration::from_secs(20),
    )
    .unwrap();
    assert_eq!(ask(&mut replica, "READONLY").unwrap(), "+OK");
    for key in &keys {
        assert_eq!(
            ask(&mut replica, &format!("GET {key}")).unwrap(),
            "acked",
            "{key} on s1"
        );
    }
    let line = std::iter::from_fn(|| up.lines.try_recv().ok())
        .find(|line| line.contains("its data dir was gone"))
        .expect("no line about the empty data dir");
    assert!(line.starts_with("storage node s1 exited"), "{line}");
    assert!(crate::cluster_cli::alive(other), "s2 was stopped");
    assert_eq!(node(&up.json(), "s2")["pid"].as_u64(), Some(other), "s2 was restarted");
    drop(up);
    let _ = std::fs::remove_dir_all(dir);
}
