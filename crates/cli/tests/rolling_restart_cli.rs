//! `ferry cluster restart` on real processes: under `cluster up --replicas 1 --ack
//! replica`, with a writer setting keys through the gateway all along, every storage node
//! is restarted one at a time (the replicas, then each primary after a hand-over), writes
//! go on being acknowledged while it runs, and every acknowledged key reads back after.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cluster_cli::{eventually, ferry, text};
use crate::failover_cli::{ask, connect, node, replicated_cluster, wait_until_leased};

/// Sets keys `w0`, `w1`, … through `gateway` until `stop`; returns each acknowledged key
/// with when it was acknowledged.
fn write_until(gateway: &str, stop: &AtomicBool) -> Vec<(String, Instant)> {
    let mut acked = Vec::new();
    let mut stream = None;
    for i in 0.. {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let key = format!("w{i}");
        let connection = match &mut stream {
            Some(connection) => connection,
            None => match connect(gateway, Duration::from_secs(10)) {
                Ok(connection) => stream.insert(connection),
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            },
        };
        match ask(connection, &format!("SET {key} v")) {
            Ok(reply) if reply == "+OK" => acked.push((key, Instant::now())),
            // Refused for the moment (a hand-over): the next key is tried.
            Ok(_) => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => stream = None,
        }
    }
    acked
}

#[test]
fn a_rolling_restart_restarts_every_storage_node_and_loses_no_acknowledged_write() {
    let scratch = tempfile::Builder::new()
        .prefix("ferry-rolling-restart-")
        .tempdir()
        .unwrap();
    let dir = scratch.path();
    let up = replicated_cluster(dir);
    let before = up.json();
    let group = before["config_group"].as_str().unwrap().to_string();
    let gateway = before["gateway_resp"].as_str().unwrap().to_string();
    wait_until_leased(&group);

    let unknown = ferry()
        .args(["cluster", "restart", "--config-group", &group, "--node", "s9"])
        .output()
        .unwrap();
    assert!(
        !unknown.status.success() && text(&unknown).contains("\"s9\" is not a storage node"),
        "{}",
        text(&unknown)
    );

    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (gateway, stop) = (gateway.clone(), Arc::clone(&stop));
        std::thread::spawn(move || write_until(&gateway, &stop))
    };
    std::thread::sleep(Duration::from_millis(500));
    let began = Instant::now();
    let restart = ferry()
        .args(["cluster", "restart", "--config-group", &group])
        .output()
        .unwrap();
    let ended = Instant::now();
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let acked = writer.join().unwrap();
    let shown = text(&restart);
    assert!(restart.status.success(), "{shown}");
    for line in [
        "node s1r1: asked to restart",
        "node s1: handing shard 1 over to s1r1",
        "node s2: handing shard 2 over to s2r1",
        "restarted 4 storage nodes",
    ] {
        assert!(shown.contains(line), "no {line:?} in {shown}");
    }
    // Writes were acknowledged while it ran, not only before and after.
    let during = acked.iter().filter(|(_, at)| (began..ended).contains(at)).count();
    assert!(
        during > 0,
        "no write acknowledged during the restart ({} in all)",
        acked.len()
    );

    // Every storage node is a new process; the replicas lead now.
    let after = up.json();
    for id in ["s1", "s2", "s1r1", "s2r1"] {
        assert_ne!(
            node(&after, id)["pid"],
            node(&before, id)["pid"],
            "{id} was not restarted"
        );
    }
    let status = ferry()
        .args(["cluster", "status", "--json", "--config-group", &group])
        .output()
        .unwrap();
    let config: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(
        (&config["shards"]["1"]["primary"], &config["shards"]["2"]["primary"]),
        (&serde_json::json!("s1r1"), &serde_json::json!("s2r1")),
        "{config}"
    );

    // Nothing acknowledged is lost.
    let mut reader = None;
    for (key, _) in &acked {
        eventually(Duration::from_secs(30), || {
            let stream = match &mut reader {
                Some(stream) => stream,
                None => reader.insert(connect(&gateway, Duration::from_secs(10)).map_err(|err| err.to_string())?),
            };
            match ask(stream, &format!("GET {key}")) {
                Ok(value) if value == "v" => Ok(()),
                Ok(other) => Err(format!("{key}: {other}")),
                Err(err) => {
                    reader = None;
                    Err(format!("{key}: {err}"))
                }
            }
        });
    }
    drop(up);
    let _ = std::fs::remove_dir_all(dir);
}
