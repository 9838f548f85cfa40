//! What the Kubernetes deployment (`deploy/`) relies on, checked on a real cluster: every
//! process answers `/healthz` and `/readyz`, every metric the Grafana dashboard queries is
//! exported, and a replica joins as the manifests add one (`cluster add-node`, then a
//! `ferry server` that follows the config group).

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Duration;

use crate::cluster_cli::{eventually, ferry, text, ClusterUp};

/// `GET path` on `addr`: the status code and the body.
fn get(addr: &str, path: &str) -> Result<(u16, String), String> {
    let mut stream = std::net::TcpStream::connect(addr).map_err(|err| format!("{addr}: {err}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .map_err(|err| err.to_string())?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).map_err(|err| err.to_string())?;
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("not HTTP: {answer}"))?;
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, body)| body).to_string();
    Ok((status, body))
}

/// The sample names of an exposition (`ferry_x_total`, `ferry_y_bucket`, ...).
fn sample_names(exposition: &str) -> BTreeSet<String> {
    exposition
        .lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .filter_map(|line| line.split(['{', ' ']).next())
        .map(str::to_string)
        .collect()
}

/// Every `ferry_…` name in the dashboard's queries.
fn dashboard_names() -> BTreeSet<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/grafana/ferry.json");
    let dashboard: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut exprs = Vec::new();
    fn walk(value: &serde_json::Value, out: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, value) in map {
                    match (key.as_str(), value) {
                        ("expr" | "query", serde_json::Value::String(expr)) => out.push(expr.clone()),
                        _ => walk(value, out),
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|item| walk(item, out)),
            _ => {}
        }
    }
    walk(&dashboard, &mut exprs);
    let mut names = BTreeSet::new();
    for expr in &exprs {
        let bytes = expr.as_bytes();
        let mut at = 0;
        while let Some(found) = expr[at..].find("ferry_") {
            let start = at + found;
            let end = start
                + bytes[start..]
                    .iter()
                    .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
                    .count();
            names.insert(expr[start..end].to_string());
            at = end;
        }
    }
    assert!(names.len() > 10, "the dashboard queries ferry's metrics: {names:?}");
    names
}

/// The replication token `cluster up` gave its storage nodes (from a node's command line).
fn replication_token(pid: u64) -> String {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let words: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    let at = words
        .iter()
        .position(|w| *w == b"--replication-token")
        .expect("a token flag");
    String::from_utf8(words[at + 1].to_vec()).unwrap()
}

#[test]
fn every_process_answers_the_probes_and_exports_what_the_dashboard_queries() {
    let scratch = tempfile::Builder::new().prefix("ferry-deploy-cli-").tempdir().unwrap();
    let dir = scratch.path();
    let up = ClusterUp::start(
        dir,
        &["--storage-nodes", "2", "--replicas", "1", "--compute-nodes", "1"],
    );
    let cluster = up.json();
    let gateway = cluster["gateway"].as_str().unwrap().to_string();
    let mut metrics: Vec<String> = vec![cluster["gateway_metrics"].as_str().unwrap().to_string()];
    for group in ["storage_nodes", "compute_nodes", "config_members"] {
        for process in cluster[group].as_array().unwrap() {
            metrics.push(process["metrics"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(metrics.len(), 1 + 4 + 1 + 3);
    for addr in &metrics {
        assert_eq!(get(addr, "/healthz").unwrap().0, 200, "{addr}");
        eventually(Duration::from_secs(30), || match get(addr, "/readyz")? {
            (200, _) => Ok(()),
            (status, body) => Err(format!("{addr}: {status} {body}")),
        });
    }

    // Traffic through the gateway, so per-tenant and per-function series exist.
    let load = ferry()
        .args(["load", "--server", &gateway, "traverse", "--keys", "500"])
        .output()
        .unwrap();
    assert!(load.status.success(), "{}", text(&load));
    // The gateway admits at the rate its loop sets, and on a loaded machine that rate may
    // sit at its floor: a throttled call is the gateway working, and is tried again.
    const MAX_THROTTLED_TRIES: usize = 100;
    for _ in 0..30 {
        let mut tries = 0;
        loop {
            let invoke = ferry()
                .args(["kv", "--server", &gateway, "invoke", "traverse", "start=5,depth=4"])
                .output()
                .unwrap();
            if invoke.status.success() {
                break;
            }
            tries += 1;
            assert!(
                text(&invoke).contains("throttled") && tries < MAX_THROTTLED_TRIES,
                "{}",
                text(&invoke)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let mut exported = BTreeSet::new();
    for addr in &metrics {
        let (status, body) = get(addr, "/metrics").unwrap();
        assert_eq!(status, 200, "{addr}: {body}");
        assert!(body.ends_with("# EOF\n"), "{addr}: {body}");
        exported.extend(sample_names(&body));
    }
    let missing: Vec<String> = dashboard_names()
        .into_iter()
        .filter(|name| !exported.contains(name))
        .collect();
    assert!(
        missing.is_empty(),
        "the dashboard queries names no process exports: {missing:?}"
    );

    // A replica joins as the manifests add one: add-node (twice: a restarted pod runs it
    // again), then a server that follows the group and copies its primary.
    let group = cluster["config_group"].as_str().unwrap().to_string();
    let storage = cluster["storage_nodes"].as_array().unwrap();
    let token = replication_token(storage[0]["pid"].as_u64().unwrap());
    // The replica's listeners are bound here and handed to it (`--listen-fd` and its
    // siblings, as `cluster up` starts its nodes), so its addresses are in the
    // configuration before it starts without a port let go in between; its metrics
    // listener binds port 0 and the replica reports what it got.
    let bind = || std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let (listen, resp, replication) = (bind(), bind(), bind());
    let address = |listener: &std::net::TcpListener| listener.local_addr().unwrap().to_string();
    let (addr, resp_addr, replication_addr) = (address(&listen), address(&resp), address(&replication));
    for _ in 0..2 {
        let added = ferry()
            .args(["cluster", "add-node", "--config-group", &group, "--id", "s1r9"])
            .args(["--addr", &addr, "--resp", &resp_addr])
            .args(["--replication", &replication_addr])
            .args(["--replica-of", "s1"])
            .output()
            .unwrap();
        assert!(added.status.success(), "{}", text(&added));
        assert!(text(&added).contains("s1r9 is a replica in shard"), "{}", text(&added));
    }
    let unknown = ferry()
        .args(["cluster", "add-node", "--config-group", &group, "--id", "x1"])
        .args(["--addr", "127.0.0.1:1", "--replica-of", "no-such-primary"])
        .output()
        .unwrap();
    assert!(!unknown.status.success(), "{}", text(&unknown));
    let data_dir = dir.join("node-s1r9");
    std::fs::create_dir_all(&data_dir).unwrap();
    let fd = |listener: &std::net::TcpListener| listener.as_raw_fd().to_string();
    let mut command = ferry();
    command
        .args(["server", "--config-group", &group, "--node-id", "s1r9"])
        .args(["--tenant", "1:ferry"])
        .args(["--listen-fd", &fd(&listen), "--resp-fd", &fd(&resp)])
        .args(["--replication-fd", &fd(&replication)])
        .args(["--replication-token", &token, "--metrics", "127.0.0.1:0"])
        .arg("--data-dir")
        .arg(&data_dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    ferry_os::inherit::pass_listeners(&mut command, &[&listen, &resp, &replication]);
    let mut replica = command.spawn().unwrap();
    drop((listen, resp, replication));
    // Read on a thread of its own: a replica that never gets as far as its start-up lines
    // fails the test after a bound instead of hanging it.
    let (reported, metrics_addr) = std::sync::mpsc::channel();
    let stdout = replica.stdout.take().unwrap();
    std::thread::spawn(move || {
        let found = BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .find_map(|line| line.strip_prefix("metrics on ").map(str::to_string));
        let _ = reported.send(found);
    });
    let node_metrics = metrics_addr
        .recv_timeout(Duration::from_secs(60))
        .ok()
        .flatten()
        .expect("the replica reports its metrics address within a minute");
    eventually(Duration::from_secs(60), || {
        let (status, body) = get(&node_metrics, "/readyz")?;
        let (_, samples) = get(&node_metrics, "/metrics")?;
        match status == 200
            && samples.contains("\nferry_node_is_primary 0\n")
            && samples.contains("\nferry_node_primary_connected 1\n")
        {
            true => Ok(()),
            false => Err(format!("{status} {body}")),
        }
    });
    let _ = replica.kill();
    let _ = replica.wait();
    drop(up);
    let _ = std::fs::remove_dir_all(dir);
}
