//! A cluster whose configuration lives in the config group (`ferry cluster up` starts
//! three `ferry config` members by default): the JSON, `ferry cluster status`, a slot range
//! given to another shard with `ferry cluster assign-slots` and followed by the gateway,
//! the storage nodes (-MOVED) and the JSON, and the group deciding on after its leader is
//! killed.

use std::io::{Read, Write};
use std::time::Duration;

use crate::cluster_cli::{alive, eventually, ferry, text, ClusterUp};

/// A key whose slot is in `range` (found by trying `k0`, `k1`, …).
fn key_in(range: std::ops::RangeInclusive<u16>) -> String {
    (0..)
        .map(|i| format!("k{i}"))
        .find(|key| range.contains(&ferry_cluster::key_slot(key.as_bytes())))
        .unwrap()
}

/// RESP commands to `addr` (tenant 1, token ferry), and everything answered.
fn redis(addr: &str, commands: &str) -> String {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream
        .write_all(format!("AUTH ferry\r\n{commands}QUIT\r\n").as_bytes())
        .unwrap();
    let mut replies = String::new();
    stream.read_to_string(&mut replies).unwrap();
    replies
}

#[test]
fn the_cluster_follows_the_config_group_through_a_slot_assignment_and_a_lost_leader() {
    let scratch = tempfile::Builder::new()
        .prefix("ferry-config-group-cli-")
        .tempdir()
        .unwrap();
    let dir = scratch.path();
    let up = ClusterUp::start(dir, &["--storage-nodes", "2", "--compute-nodes", "0"]);
    let cluster = up.json();
    assert_eq!(cluster["epoch"], 1, "{cluster}");
    let members = cluster["config_members"].as_array().unwrap().clone();
    assert_eq!(members.len(), 3);
    let storage = cluster["storage_nodes"].as_array().unwrap().clone();
    let roles: Vec<(String, String, String)> = storage
        .iter()
        .map(|n| {
            (
                n["id"].as_str().unwrap().into(),
                n["role"].as_str().unwrap().into(),
                n["slots"][0].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        roles,
        vec![
            ("s1".into(), "primary".into(), "0-8191".into()),
            ("s2".into(), "primary".into(), "8192-16383".into())
        ]
    );
    let group = cluster["config_group"].as_str().unwrap().to_string();
    let gateway = cluster["gateway"].as_str().unwrap().to_string();
    let resp = |i: usize| storage[i]["resp"].as_str().unwrap().to_string();

    let status = ferry()
        .args(["cluster", "status", "--config-group", &group])
        .output()
        .unwrap();
    assert!(status.status.success(), "{}", text(&status));
    assert!(
        text(&status).contains("epoch 1\nshard 1: primary s1"),
        "{}",
        text(&status)
    );

    // A key of s2's slots, put through the gateway.
    let key = key_in(16000..=16383);
    let kv = |args: &[&str]| ferry().args(["kv", "--server", &gateway]).args(args).output().unwrap();
    assert!(kv(&["put", "t", &key, "before"]).status.success());
    let slot = ferry_cluster::key_slot(key.as_bytes());
    assert_eq!(
        redis(&resp(0), &format!("GET {key}\r\n")),
        format!("+OK\r\n-MOVED {slot} {}\r\n+OK\r\n", resp(1))
    );

    // The range goes to s1: routing only, so the key written before is not there.
    let assign = |to: &str| {
        ferry()
            .args([
                "cluster",
                "assign-slots",
                "--config-group",
                &group,
                "--slots",
                "16000-16383",
                "--to",
                to,
            ])
            .output()
            .unwrap()
    };
    let assigned = assign("s1");
    assert!(text(&assigned).contains("epoch 2"), "{}", text(&assigned));
    eventually(Duration::from_secs(30), || {
        let json = up.json();
        let slots = &json["storage_nodes"][0]["slots"];
        (json["epoch"] == 2 && slots.as_array().unwrap().iter().any(|s| s == "16000-16383"))
            .then_some(())
            .ok_or(format!("{json}"))
    });
    // s2 sends Redis clients to s1 once it has seen the epoch; the gateway writes there.
    eventually(Duration::from_secs(30), || {
        let answer = redis(&resp(1), &format!("GET {key}\r\n"));
        (answer == format!("+OK\r\n-MOVED {slot} {}\r\n+OK\r\n", resp(0)))
            .then_some(())
            .ok_or(answer)
    });
    let get = kv(&["get", "t", &key]);
    assert!(text(&get).contains("not found"), "{}", text(&get));
    assert!(kv(&["put", "t", &key, "after"]).status.success());
    // It went to s1.
    let s1 = storage[0]["addr"].as_str().unwrap();
    let direct = ferry().args(["kv", "--server", s1, "get", "t", &key]).output().unwrap();
    assert!(text(&direct).starts_with("after"), "{}", text(&direct));

    // Kill the group's leader: the others elect one, the range goes back, and
    // `cluster up` restarts the member on its Raft log.
    let status = text(
        &ferry()
            .args(["cluster", "status", "--config-group", &group])
            .output()
            .unwrap(),
    );
    let leader: usize = status
        .split("leader ")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("no leader in {status}"));
    let pid = members[leader - 1]["pid"].as_u64().unwrap();
    // SAFETY: kill(2) on a pid the cluster's JSON names.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    let back = assign("s2");
    assert!(back.status.success(), "{}", text(&back));
    assert!(text(&back).contains("epoch 3"), "{}", text(&back));
    eventually(Duration::from_secs(30), || {
        let json = up.json();
        let restarted = json["config_members"][leader - 1]["pid"].as_u64() != Some(pid);
        (json["epoch"] == 3 && restarted && !alive(pid))
            .then_some(())
            .ok_or(format!("{json}"))
    });
    let get = kv(&["get", "t", &key]);
    assert!(text(&get).starts_with("before"), "{}", text(&get));
    drop(up);
    let _ = std::fs::remove_dir_all(dir);
}
