//! `--resp` on the gateway through a real Redis client crate (redis-rs): data commands and
//! FUNCTION/FCALL sent on as invocations, FCALL placed by the policy (on the storage node
//! under `rpc`, on the compute node under `kv`) with the same replies and state, and
//! FUNCTION STATS saying where each function ran.

use crate::common;

use common::*;
use redis::{RedisResult, Value};

fn gateway(policy: &'static str) -> (Cluster, redis::Connection) {
    let mut front = front_config();
    front.resp_listen = Some("127.0.0.1:0".parse().unwrap());
    // One storage node: a tenant's Lua catalog lives on one node (docs/ARCHITECTURE.md).
    let cluster = cluster_of(1, policy, front, front_config());
    let addr = cluster.gateway.resp_addr().expect("RESP listener");
    let client = redis::Client::open(format!("redis://{TENANT}:{TOKEN}@{addr}/")).unwrap();
    let con = client
        .get_connection_with_timeout(std::time::Duration::from_secs(10))
        .unwrap();
    (cluster, con)
}

fn error_text<T: std::fmt::Debug>(result: RedisResult<T>) -> String {
    let err = result.expect_err("an error reply");
    format!("{} {}", err.code().unwrap_or(""), err.detail().unwrap_or(""))
}

/// The value under `name` in a RESP2 map (a flat array of keys and values).
fn field<'a>(map: &'a Value, name: &str) -> &'a Value {
    let Value::Array(items) = map else {
        panic!("not a map: {map:?}")
    };
    items
        .chunks(2)
        .find(|pair| pair[0] == Value::BulkString(name.as_bytes().to_vec()))
        .map(|pair| &pair[1])
        .unwrap_or_else(|| panic!("no {name} in {map:?}"))
}

const LIBRARY: &str = r#"#!lua name=bank
redis.register_function('deposit', function(keys, args)
  local balance = redis.call('INCRBY', keys[1], args[1])
  redis.call('SET', keys[2], 'last ' .. args[1])
  return {balance, redis.call('GET', keys[2])}
end)
"#;

/// Runs the same session through a gateway placing by `policy`; returns every reply and
/// where the gateway says `deposit` ran (storage node, compute node).
fn session(policy: &'static str) -> (Vec<Value>, (i64, i64)) {
    let (_cluster, mut con) = gateway(policy);
    let mut replies = Vec::new();
    let mut cmd = |args: &[&str]| -> Value {
        let mut command = redis::cmd(args[0]);
        for arg in &args[1..] {
            command.arg(*arg);
        }
        command.query(&mut con).unwrap_or_else(|err| panic!("{args:?}: {err}"))
    };
    replies.push(cmd(&["SET", "greeting", "hello"]));
    replies.push(cmd(&["GET", "greeting"]));
    replies.push(cmd(&["SET", "greeting", "again", "NX", "GET"]));
    replies.push(cmd(&["INCRBY", "n", "7"]));
    replies.push(cmd(&["MSET", "a", "1", "b", "2"]));
    replies.push(cmd(&["MGET", "a", "b", "missing"]));
    replies.push(cmd(&["EXISTS", "a", "b", "missing"]));
    replies.push(cmd(&["DEL", "a", "missing"]));
    replies.push(cmd(&["FUNCTION", "LOAD", LIBRARY]));
    for amount in ["5", "-2", "40"] {
        replies.push(cmd(&["FCALL", "deposit", "2", "balance", "log", amount]));
    }
    replies.push(cmd(&["GET", "balance"]));
    replies.push(cmd(&["GET", "log"]));
    let stats = cmd(&["FUNCTION", "STATS"]);
    let deposit = field(field(&stats, "functions"), "deposit");
    let count = |name: &str| match field(deposit, name) {
        Value::Int(n) => *n,
        other => panic!("{name}: {other:?}"),
    };
    (replies, (count("calls_on_storage_node"), count("calls_on_compute")))
}

#[test]
fn fcall_through_the_gateway_is_placed_by_the_policy_with_the_same_results() {
    let (remote, remote_counts) = session("rpc");
    let (local, local_counts) = session("kv");
    assert_eq!(remote, local, "the same replies wherever the functions ran");
    assert_eq!(
        remote_counts,
        (3, 0),
        "rpc ships compute: every deposit on the storage node"
    );
    assert_eq!(local_counts, (0, 3), "kv ships data: every deposit on the compute node");
    // Spot-check the replies themselves.
    assert_eq!(remote[1], Value::BulkString(b"hello".to_vec()));
    assert_eq!(
        remote[2],
        Value::BulkString(b"hello".to_vec()),
        "NX refused, GET gave the old value"
    );
    assert_eq!(remote[6], Value::Int(2));
    assert_eq!(remote[7], Value::Int(1));
    assert_eq!(
        remote[11],
        Value::Array(vec![Value::Int(43), Value::BulkString(b"last 40".to_vec())])
    );
}

#[test]
fn the_gateway_serves_redis_types_and_expiry_through_its_storage_nodes() {
    let (_cluster, mut con) = gateway("rpc");
    let set: String = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .arg("EX")
        .arg(100)
        .query(&mut con)
        .unwrap();
    assert_eq!(set, "OK");
    let ttl: i64 = redis::cmd("TTL").arg("k").query(&mut con).unwrap();
    assert!((1..=100).contains(&ttl), "TTL {ttl}");
    let added: i64 = redis::cmd("HSET")
        .arg("h")
        .arg("a")
        .arg(1)
        .arg("b")
        .arg(2)
        .query(&mut con)
        .unwrap();
    assert_eq!(added, 2);
    let fields: Vec<String> = redis::cmd("HKEYS").arg("h").query(&mut con).unwrap();
    assert_eq!(fields, ["a", "b"]);
    assert!(error_text(redis::cmd("LPUSH").arg("h").arg("x").query::<Value>(&mut con)).contains("WRONGTYPE"));
    let pushed: i64 = redis::cmd("RPUSH").arg("l").arg("x").arg("y").query(&mut con).unwrap();
    assert_eq!(pushed, 2);
    let popped: String = redis::cmd("LPOP").arg("l").query(&mut con).unwrap();
    assert_eq!(popped, "x");
}

#[test]
fn the_gateway_refuses_what_it_does_not_serve_clearly() {
    let (_cluster, mut con) = gateway("rpc");
    assert!(error_text(redis::cmd("CLUSTER").arg("SLOTS").query::<Value>(&mut con)).contains("gateway"));
    assert!(error_text(redis::cmd("SAVE").query::<Value>(&mut con)).contains("each storage node"));
    assert!(error_text(redis::cmd("FLUSHALL").query::<Value>(&mut con)).contains("each storage node"));
    assert!(error_text(redis::cmd("BGREWRITEAOF").query::<Value>(&mut con)).contains("unknown command"));
    assert!(error_text(redis::cmd("FCALL").arg("nope").arg(0).query::<Value>(&mut con)).contains("Function not found"));
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
    // A wrong password is refused like Redis refuses it.
    let addr = _cluster.gateway.resp_addr().unwrap();
    let bad = redis::Client::open(format!("redis://{TENANT}:wrong@{addr}/")).unwrap();
    assert!(bad
        .get_connection_with_timeout(std::time::Duration::from_secs(5))
        .is_err());
}

/// The same scripts through a gateway placing by `policy`: their replies.
fn script_session(policy: &'static str) -> Vec<Value> {
    let (_cluster, mut con) = gateway(policy);
    let script = "local n = redis.call('HINCRBY', KEYS[1], 'visits', ARGV[1]) \
                  redis.call('ZADD', KEYS[2], n, ARGV[2]) \
                  return {n, redis.call('ZSCORE', KEYS[2], ARGV[2]), redis.call('HLEN', KEYS[1])}";
    let mut replies = Vec::new();
    for _ in 0..3 {
        let reply: Value = redis::cmd("EVAL")
            .arg(script)
            .arg(2)
            .arg("page{1}")
            .arg("top{1}")
            .arg(2)
            .arg("home")
            .query(&mut con)
            .unwrap();
        replies.push(reply);
    }
    let sha = ferry_lua::script::sha1_hex(script.as_bytes());
    let by_sha: Value = redis::cmd("EVALSHA")
        .arg(&sha)
        .arg(2)
        .arg("page{1}")
        .arg("top{1}")
        .arg(1)
        .arg("home")
        .query(&mut con)
        .unwrap();
    replies.push(by_sha);
    replies
}

#[test]
fn eval_through_the_gateway_gives_the_same_results_on_the_node_and_on_the_compute_side() {
    let remote = script_session("rpc");
    let local = script_session("kv");
    assert_eq!(remote, local, "the same replies wherever the scripts ran");
    assert_eq!(
        remote[3],
        Value::Array(vec![Value::Int(7), Value::BulkString(b"7".to_vec()), Value::Int(1)])
    );
}
