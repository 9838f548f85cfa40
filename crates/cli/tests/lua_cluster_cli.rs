//! Lua functions in a cluster of two storage nodes: FUNCTION LOAD through the gateway
//! reaches every primary (each keeps its own catalog, a node-local table), FCALL works on
//! the keys of either node, run on the node that serves them (sent there directly) or on
//! the compute node (the gateway's `kv` policy ships the data), and a slot move carries
//! the keys but leaves each node's catalog where it is.

use std::time::Duration;

use crate::cluster_cli::{ferry, text, ClusterUp, Resp};

const LIBRARY: &str = "#!lua name=counters\n\
    redis.register_function('bump', function(keys, args)\n\
      local value = tonumber(redis.call('GET', keys[1]) or '0') + 1\n\
      redis.call('SET', keys[1], tostring(value))\n\
      return value\n\
    end)\n";

/// FUNCTION LIST's reply, every line of it (the library names are in there).
fn function_list(addr: &str) -> String {
    let mut resp = Resp::connect(addr);
    resp.send(b"*2\r\n$8\r\nFUNCTION\r\n$4\r\nLIST\r\n*1\r\n$4\r\nPING\r\n");
    resp.lines_until("+PONG")
}

/// A key whose slot is in `range`.
fn key_in(range: std::ops::RangeInclusive<u16>, prefix: &str) -> String {
    (0..)
        .map(|i| format!("{prefix}{i}"))
        .find(|key| range.contains(&ferry_cluster::key_slot(key.as_bytes())))
        .unwrap()
}

#[test]
fn a_library_loaded_through_the_gateway_runs_on_every_node_and_on_the_compute_node() {
    let scratch = tempfile::Builder::new()
        .prefix("ferry-lua-cluster-cli-")
        .tempdir()
        .unwrap();
    let dir = scratch.path();
    let up = ClusterUp::start(dir, &["--storage-nodes", "2", "--compute-nodes", "1", "--policy", "kv"]);
    let cluster = up.json();
    let gateway = cluster["gateway_resp"].as_str().unwrap().to_string();
    let node = |i: usize| cluster["storage_nodes"][i]["resp"].as_str().unwrap().to_string();
    let (s1, s2) = (node(0), node(1));
    let group = cluster["config_group"].as_str().unwrap().to_string();

    let mut through_gateway = Resp::connect(&gateway);
    assert_eq!(through_gateway.call(&["FUNCTION", "LOAD", LIBRARY]), "counters");
    // Each primary has its own catalog now.
    for addr in [&s1, &s2] {
        let listed = function_list(addr);
        assert!(listed.contains("counters"), "{addr}: {listed}");
    }

    let k1 = key_in(0..=8191, "a");
    let k2 = key_in(8192..=16383, "b");
    // Through the gateway, whose `kv` policy runs FCALL on the compute node: the catalog
    // is read on the node serving the key, and the commit goes there too.
    for key in [&k1, &k2] {
        assert_eq!(through_gateway.call(&["FCALL", "bump", "1", key]), ":1");
        assert_eq!(through_gateway.call(&["FCALL", "bump", "1", key]), ":2");
    }
    // On each node, for its own keys; another node's key is sent on.
    assert_eq!(Resp::connect(&s1).call(&["FCALL", "bump", "1", &k1]), ":3");
    assert_eq!(Resp::connect(&s2).call(&["FCALL", "bump", "1", &k2]), ":3");
    let moved = Resp::connect(&s1).call(&["FCALL", "bump", "1", &k2]);
    assert!(moved.starts_with("-MOVED "), "{moved}");

    // A slot move carries k2 to s1 and leaves each node's catalog in place.
    let slot = ferry_cluster::key_slot(k2.as_bytes()).to_string();
    let reshard = ferry()
        .args([
            "cluster",
            "reshard",
            "--config-group",
            &group,
            "--slots",
            &slot,
            "--to",
            "s1",
        ])
        .output()
        .unwrap();
    assert!(reshard.status.success(), "{}", text(&reshard));
    crate::cluster_cli::eventually(Duration::from_secs(30), || {
        let answer = Resp::connect(&s1).call(&["FCALL", "bump", "1", &k2]);
        (answer == ":4").then_some(()).ok_or(answer)
    });
    assert!(function_list(&s2).contains("counters"));
    // The compute node learns the move from the config group in its own time (an access
    // answered `moved` waits up to `MOVED_WAIT` for a newer map, and on a loaded machine
    // that can pass first): until then the call is refused whole, having committed
    // nothing, and is sent again. Any other answer is final.
    crate::cluster_cli::eventually(Duration::from_secs(30), || {
        let answer = through_gateway.call(&["FCALL", "bump", "1", &k2]);
        if answer.contains("moved") {
            return Err(answer);
        }
        assert_eq!(answer, ":5");
        Ok(())
    });

    // DELETE through the gateway reaches every primary too.
    assert_eq!(through_gateway.call(&["FUNCTION", "DELETE", "counters"]), "+OK");
    for addr in [&s1, &s2] {
        let listed = function_list(addr);
        assert!(!listed.contains("counters"), "{addr}: {listed}");
    }
    drop(up);
    let _ = std::fs::remove_dir_all(dir);
}
