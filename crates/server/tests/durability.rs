//! A node with a data dir: what it acknowledged is there after a restart (RESP writes,
//! ferry-protocol writes, Lua libraries and what they wrote), another node cannot take
//! its data dir, and a full log refuses writes while reads go on; every Redis type and its
//! expiry come back, and a key that expired while the node was down does not.

use crate::common;

use std::time::Duration;

use common::*;
use ferry_server::{Durability, ServerError, ServerHandle};
use ferry_wal::{FsyncMode, WalConfig, WalError};

/// A fresh directory for one test, removed when the returned guard drops.
fn data_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("ferry-durable-{name}-"))
        .tempdir()
        .unwrap()
}

fn durable_config(dir: &std::path::Path, wal: WalConfig) -> ferry_server::ServerConfig {
    let mut config = config(1);
    config.resp_listen = Some("127.0.0.1:0".parse().unwrap());
    let mut durability = Durability::new(dir.to_path_buf());
    durability.wal = wal;
    config.durability = Some(durability);
    config
}

fn always() -> WalConfig {
    WalConfig {
        fsync: FsyncMode::Always,
        ..WalConfig::default()
    }
}

fn connect(server: &ServerHandle) -> redis::Connection {
    let addr = server.resp_addr().unwrap();
    let client = redis::Client::open(format!("redis://{TENANT_A}:{TOKEN_A}@{addr}/")).unwrap();
    client.get_connection_with_timeout(Duration::from_secs(10)).unwrap()
}

const LIBRARY: &str = r#"#!lua name=counter
local function bump(keys)
  return redis.call('INCR', keys[1])
end
redis.register_function('bump', bump)
"#;

fn bump(con: &mut redis::Connection) -> i64 {
    redis::cmd("FCALL").arg("bump").arg(1).arg("hits").query(con).unwrap()
}

#[test]
fn what_a_node_acknowledged_is_there_after_a_restart() {
    let dir = data_dir("restart");
    let dir = dir.path();
    let server = start_with(durable_config(dir, always()));
    assert_eq!(server.recovered().unwrap().1.records, 0);
    let mut con = connect(&server);
    let _: () = redis::cmd("SET").arg("greeting").arg("hello").query(&mut con).unwrap();
    let _: () = redis::cmd("SET").arg("gone").arg("soon").query(&mut con).unwrap();
    let _: i64 = redis::cmd("DEL").arg("gone").query(&mut con).unwrap();
    let _: String = redis::cmd("FUNCTION").arg("LOAD").arg(LIBRARY).query(&mut con).unwrap();
    assert_eq!((bump(&mut con), bump(&mut con)), (1, 2));
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let client = client_b(&server).await;
        client.put("t", b"k", b"ferry protocol").await.unwrap();
    });
    drop(con);
    server.shutdown();

    let server = start_with(durable_config(dir, always()));
    let (_, recovered, _) = server.recovered().unwrap();
    assert!(recovered.records >= 6, "{recovered:?}");
    assert_eq!(recovered.cut, None);
    let mut con = connect(&server);
    let greeting: Option<String> = redis::cmd("GET").arg("greeting").query(&mut con).unwrap();
    assert_eq!(greeting.as_deref(), Some("hello"));
    let gone: Option<String> = redis::cmd("GET").arg("gone").query(&mut con).unwrap();
    assert_eq!(gone, None, "a delete is recovered too");
    assert_eq!(bump(&mut con), 3, "the Lua library and its counter came back");
    rt.block_on(async {
        let client = client_b(&server).await;
        let got = client.get("t", b"k").await.unwrap().expect("recovered");
        assert_eq!(&got.value[..], b"ferry protocol");
    });
}

#[test]
fn a_data_dir_held_by_a_running_node_or_missing_is_refused() {
    let dir = data_dir("locked");
    let dir = dir.path();
    let first = start_with(durable_config(dir, WalConfig::default()));
    let refused = ferry_server::start(durable_config(dir, WalConfig::default()), registry());
    match refused {
        Err(ServerError::DataDir(WalError::Locked { holder, .. })) => {
            assert_eq!(holder, std::process::id().to_string());
        }
        Err(other) => panic!("wrong error: {other}"),
        Ok(_) => panic!("a second node took a data dir in use"),
    }
    drop(first);
    let missing = dir.join("not-created");
    let refused = ferry_server::start(durable_config(&missing, WalConfig::default()), registry());
    assert!(
        matches!(refused, Err(ServerError::DataDir(WalError::Io { .. }))),
        "a missing dir is an error"
    );
}

#[test]
fn a_full_log_refuses_writes_with_a_clear_error_and_still_serves_reads() {
    let dir = data_dir("full");
    let dir = dir.path();
    let wal = WalConfig {
        max_log_bytes: Some(4096),
        ..WalConfig::default()
    };
    let server = start_with(durable_config(dir, wal.clone()));
    let mut con = connect(&server);
    let mut acknowledged = 0;
    let refusal = loop {
        let set: redis::RedisResult<()> = redis::cmd("SET")
            .arg(format!("key{acknowledged}"))
            .arg("a value of some thirty bytes..")
            .query(&mut con);
        match set {
            Ok(()) => acknowledged += 1,
            Err(err) => break err,
        }
        assert!(acknowledged < 1000, "the log never filled");
    };
    assert!(refusal.to_string().contains("log is full"), "{refusal}");
    let first: Option<String> = redis::cmd("GET").arg("key0").query(&mut con).unwrap();
    assert!(first.is_some(), "reads are still served");
    drop(con);
    server.shutdown();

    let server = start_with(durable_config(dir, wal));
    let mut con = connect(&server);
    let last: Option<String> = redis::cmd("GET")
        .arg(format!("key{}", acknowledged - 1))
        .query(&mut con)
        .unwrap();
    assert!(last.is_some(), "every acknowledged write survived");
    let refused: Option<String> = redis::cmd("GET")
        .arg(format!("key{acknowledged}"))
        .query(&mut con)
        .unwrap();
    assert_eq!(refused, None, "the refused write was never applied");
}

#[test]
fn save_and_bgsave_take_snapshots_a_restart_recovers_from() {
    let dir = data_dir("save");
    let dir = dir.path();
    let server = start_with(durable_config(dir, always()));
    let mut con = connect(&server);
    let _: String = redis::cmd("FUNCTION").arg("LOAD").arg(LIBRARY).query(&mut con).unwrap();
    for i in 0..200 {
        let _: () = redis::cmd("SET").arg(format!("k{i}")).arg(i).query(&mut con).unwrap();
    }
    assert_eq!(bump(&mut con), 1);
    // SAVE answers once its snapshot is named: the commands before it are in it.
    let saved: String = redis::cmd("SAVE").query(&mut con).unwrap();
    assert_eq!(saved, "OK");
    let (taken, last) = server.snapshots().unwrap();
    assert_eq!(taken, 1);
    let report = last.unwrap().unwrap();
    assert!(report.objects >= 201, "{report:?}");
    let _: () = redis::cmd("SET").arg("after").arg("save").query(&mut con).unwrap();
    let started: String = redis::cmd("BGSAVE").query(&mut con).unwrap();
    assert_eq!(started, "Background saving started");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while server.snapshots().unwrap().0 < 2 {
        assert!(std::time::Instant::now() < deadline, "BGSAVE never finished");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(bump(&mut con), 2);
    drop(con);
    server.shutdown();

    let server = start_with(durable_config(dir, always()));
    let (restored, recovered, _) = server.recovered().unwrap();
    assert_eq!(restored.covers.len(), 2, "one snapshot per tenant: {restored:?}");
    assert!(restored.objects >= 202, "{restored:?}");
    // Only what followed the last snapshot came from the log.
    assert!(recovered.records <= 2, "{recovered:?}");
    let mut con = connect(&server);
    let value: Option<String> = redis::cmd("GET").arg("k199").query(&mut con).unwrap();
    assert_eq!(value.as_deref(), Some("199"));
    let value: Option<String> = redis::cmd("GET").arg("after").query(&mut con).unwrap();
    assert_eq!(value.as_deref(), Some("save"));
    assert_eq!(bump(&mut con), 3);
}

#[test]
fn save_without_a_data_dir_is_a_clear_error() {
    let mut config = config(1);
    config.resp_listen = Some("127.0.0.1:0".parse().unwrap());
    let server = start_with(config);
    let mut con = connect(&server);
    for command in ["SAVE", "BGSAVE"] {
        let err = redis::cmd(command).query::<String>(&mut con).unwrap_err();
        assert!(err.to_string().contains("--data-dir"), "{command}: {err}");
    }
}

#[test]
fn every_type_and_expiry_survive_a_restart_and_an_expired_key_stays_gone() {
    let dir = data_dir("types");
    let dir = dir.path();
    let server = start_with(durable_config(dir, always()));
    let mut con = connect(&server);
    let _: i64 = redis::cmd("HSET").arg("h").arg("f").arg("v").query(&mut con).unwrap();
    let _: i64 = redis::cmd("RPUSH").arg("l").arg("a").arg("b").query(&mut con).unwrap();
    let _: i64 = redis::cmd("SADD").arg("s").arg("m").query(&mut con).unwrap();
    let _: i64 = redis::cmd("ZADD").arg("z").arg(2.5).arg("m").query(&mut con).unwrap();
    let _: () = redis::cmd("SET")
        .arg("kept")
        .arg("v")
        .arg("EX")
        .arg(3600)
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("brief")
        .arg("v")
        .arg("PX")
        .arg(300)
        .query(&mut con)
        .unwrap();
    // Half in the snapshot, half in the log after it.
    let _: String = redis::cmd("SAVE").query(&mut con).unwrap();
    let _: i64 = redis::cmd("HSET").arg("h").arg("g").arg("w").query(&mut con).unwrap();
    let _: i64 = redis::cmd("PEXPIRE").arg("s").arg(300).query(&mut con).unwrap();
    drop(con);
    server.shutdown();
    // Long past both expiries; nobody read the keys meanwhile, so nothing deleted them.
    std::thread::sleep(Duration::from_millis(600));

    let server = start_with(durable_config(dir, always()));
    let mut con = connect(&server);
    let hash: Vec<(String, String)> = redis::cmd("HGETALL").arg("h").query(&mut con).unwrap();
    assert_eq!(hash, [("f".into(), "v".into()), ("g".into(), "w".into())]);
    let list: Vec<String> = redis::cmd("LRANGE").arg("l").arg(0).arg(-1).query(&mut con).unwrap();
    assert_eq!(list, ["a", "b"]);
    let score: f64 = redis::cmd("ZSCORE").arg("z").arg("m").query(&mut con).unwrap();
    assert_eq!(score, 2.5);
    let ttl: i64 = redis::cmd("TTL").arg("kept").query(&mut con).unwrap();
    assert!((3000..=3600).contains(&ttl), "the expiry came back: {ttl}");
    // Expired while the node was down: absent, from the snapshot and from the log alike.
    for key in ["brief", "s"] {
        let exists: i64 = redis::cmd("EXISTS").arg(key).query(&mut con).unwrap();
        assert_eq!(exists, 0, "{key} came back after its expiry");
    }
    assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut con).unwrap(), 4);
}

/// Large collections are logged as their changes, not their values: a list, hash, set
/// and sorted set of thousands of elements, changed element by element before and after a
/// snapshot, come back whole after a restart, in the same order and encodings.
#[test]
fn large_collections_logged_as_changes_come_back_whole() {
    const ELEMENTS: usize = 3_000;
    let dir = data_dir("large");
    let dir = dir.path();
    let server = start_with(durable_config(dir, always()));
    let mut con = connect(&server);
    let mut pipe = redis::pipe();
    for i in 0..ELEMENTS {
        pipe.cmd("RPUSH").arg("l").arg(format!("item-{i}")).ignore();
        pipe.cmd("HSET").arg("h").arg(format!("f{i}")).arg(i).ignore();
        pipe.cmd("SADD").arg("s").arg(format!("m{i}")).ignore();
        pipe.cmd("ZADD").arg("z").arg(i % 97).arg(format!("m{i}")).ignore();
    }
    let () = pipe.query(&mut con).unwrap();
    let _: String = redis::cmd("SAVE").query(&mut con).unwrap();
    // After the snapshot: changes in the middle, at both ends, and removals.
    let _: () = redis::cmd("LSET")
        .arg("l")
        .arg(1500)
        .arg("middle")
        .query(&mut con)
        .unwrap();
    let _: i64 = redis::cmd("LPUSH").arg("l").arg("head").query(&mut con).unwrap();
    let _: String = redis::cmd("RPOP").arg("l").query(&mut con).unwrap();
    let _: i64 = redis::cmd("HDEL").arg("h").arg("f7").query(&mut con).unwrap();
    let _: i64 = redis::cmd("SREM").arg("s").arg("m9").query(&mut con).unwrap();
    let _: f64 = redis::cmd("ZINCRBY")
        .arg("z")
        .arg(1000)
        .arg("m3")
        .query(&mut con)
        .unwrap();
    let read_all = |con: &mut redis::Connection| {
        let list: Vec<String> = redis::cmd("LRANGE").arg("l").arg(0).arg(-1).query(con).unwrap();
        let hash: Vec<(String, String)> = redis::cmd("HGETALL").arg("h").query(con).unwrap();
        let mut set: Vec<String> = redis::cmd("SMEMBERS").arg("s").query(con).unwrap();
        set.sort();
        let zset: Vec<(String, f64)> = redis::cmd("ZRANGE")
            .arg("z")
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query(con)
            .unwrap();
        let encodings: Vec<String> = ["l", "h", "s", "z"]
            .iter()
            .map(|key| redis::cmd("OBJECT").arg("ENCODING").arg(key).query(con).unwrap())
            .collect();
        (list, hash, set, zset, encodings)
    };
    let before = read_all(&mut con);
    assert_eq!(before.0.len(), ELEMENTS);
    assert_eq!(before.0[0], "head");
    assert_eq!(before.4, ["quicklist", "hashtable", "hashtable", "skiplist"]);
    drop(con);
    server.shutdown();

    let server = start_with(durable_config(dir, always()));
    let mut con = connect(&server);
    assert_eq!(read_all(&mut con), before);
    drop(con);
    server.shutdown();
}
