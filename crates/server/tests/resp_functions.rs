//! Lua functions through a real Redis client crate (redis-rs): FUNCTION LOAD, LIST,
//! DELETE and STATS, FCALL and FCALL_RO; the same library run remotely (FCALL on the
//! node) and locally (the Rust client) giving the same results and the same state; and
//! runaway or memory-hungry functions stopped while other clients are served.

use crate::common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use ferry_lua::fcall::reply_of;
use ferry_lua::FcallArgs;
use ferry_resp::Reply;
use redis::{RedisResult, Value};

fn node() -> ferry_server::ServerHandle {
    let mut config = config(1);
    config.resp_listen = Some("127.0.0.1:0".parse().unwrap());
    // The node's default: the Lua budget must end a runaway inside it.
    config.invoke_budget = ferry_server::config::DEFAULT_INVOKE_BUDGET;
    start_with(config)
}

fn connect(server: &ferry_server::ServerHandle) -> redis::Connection {
    let addr = server.resp_addr().unwrap();
    let url = format!("redis://{TENANT_A}:{TOKEN_A}@{addr}/");
    let client = redis::Client::open(url).unwrap();
    client.get_connection_with_timeout(Duration::from_secs(10)).unwrap()
}

fn error_text<T: std::fmt::Debug>(result: RedisResult<T>) -> String {
    let err = result.expect_err("an error reply");
    format!("{} {}", err.code().unwrap_or(""), err.detail().unwrap_or(""))
}

const LIBRARY: &str = r#"#!lua name=accounts
local function deposit(keys, args)
  local balance = redis.call('INCRBY', keys[1], args[1])
  redis.call('SET', keys[2], 'deposit ' .. args[1] .. ' -> ' .. balance)
  return {balance, redis.call('GET', keys[2]), redis.call('EXISTS', keys[1], keys[2], 'nothing')}
end
local function balance(keys)
  return redis.call('GET', keys[1])
end
redis.register_function('deposit', deposit)
redis.register_function{function_name = 'balance', callback = balance, flags = {'no-writes'}}
"#;

fn fcall(con: &mut redis::Connection, function: &str, keys: &[&str], args: &[&str]) -> RedisResult<Value> {
    let mut cmd = redis::cmd("FCALL");
    cmd.arg(function).arg(keys.len()).arg(keys).arg(args);
    cmd.query(con)
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

fn value_of(reply: Reply) -> Value {
    match reply {
        Reply::Integer(n) => Value::Int(n),
        Reply::Bulk(bytes) => Value::BulkString(bytes.to_vec()),
        Reply::Null => Value::Nil,
        Reply::Array(items) => Value::Array(items.into_iter().map(value_of).collect()),
        other => panic!("unexpected reply {other:?}"),
    }
}

#[test]
fn function_load_then_fcall_gives_the_same_result_and_state_remotely_and_locally() {
    let server = node();
    let mut con = connect(&server);
    let name: String = redis::cmd("FUNCTION").arg("LOAD").arg(LIBRARY).query(&mut con).unwrap();
    assert_eq!(name, "accounts");
    let again = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(LIBRARY)
        .query::<String>(&mut con);
    assert!(error_text(again).contains("Library 'accounts' already exists"));
    let replaced: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(LIBRARY)
        .query(&mut con)
        .unwrap();
    assert_eq!(replaced, "accounts");

    // The same calls, remotely over RESP on keys r*, locally through the Rust client on
    // keys l*: the same replies, and the same objects left behind.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client = runtime.block_on(client_a(&server));
    for amount in ["5", "-2", "40"] {
        let remote = fcall(&mut con, "deposit", &["r_balance", "r_log"], &[amount]).unwrap();
        let call = FcallArgs {
            function: "deposit".into(),
            table: "db0".into(),
            keys: vec![Bytes::from_static(b"l_balance"), Bytes::from_static(b"l_log")],
            args: vec![Bytes::copy_from_slice(amount.as_bytes())],
            read_only: false,
        };
        let local = runtime
            .block_on(client.invoke_local(&call.invocation_name(), call.encode().unwrap()))
            .unwrap();
        assert_eq!(local.placement, ferry_client::Placement::Local);
        assert_eq!(value_of(reply_of(&local.result)), remote, "deposit {amount}");
    }
    for (remote_key, local_key) in [("r_balance", "l_balance"), ("r_log", "l_log")] {
        let remote = runtime
            .block_on(client.get("db0", remote_key.as_bytes()))
            .unwrap()
            .unwrap();
        let local = runtime
            .block_on(client.get("db0", local_key.as_bytes()))
            .unwrap()
            .unwrap();
        assert_eq!(remote.value, local.value, "{remote_key} vs {local_key}");
    }
    let balance: i64 = redis::cmd("FCALL_RO")
        .arg("balance")
        .arg(1)
        .arg("l_balance")
        .query(&mut con)
        .unwrap();
    assert_eq!(balance, 43);
    let refused = redis::cmd("FCALL_RO")
        .arg("deposit")
        .arg(2)
        .arg("a")
        .arg("b")
        .arg(1)
        .query::<Value>(&mut con);
    assert!(error_text(refused).contains("write flag using *_ro"));
    assert!(error_text(fcall(&mut con, "nope", &[], &[])).contains("Function not found"));

    // LIST, STATS, DELETE.
    let list: Value = redis::cmd("FUNCTION")
        .arg("LIST")
        .arg("WITHCODE")
        .query(&mut con)
        .unwrap();
    let text = format!("{list:?}");
    assert!(
        text.contains("accounts") && text.contains("deposit") && text.contains("no-writes"),
        "{text}"
    );
    assert!(text.contains("register_function"), "WITHCODE includes the text: {text}");
    let stats: Value = redis::cmd("FUNCTION").arg("STATS").query(&mut con).unwrap();
    let text = format!("{stats:?}");
    assert!(
        text.contains("libraries_count") && text.contains("int(1)") && text.contains("int(2)"),
        "{text}"
    );
    // Per function, what the node saw: three deposits run here and one refused FCALL_RO
    // (the client's local runs are not the node's), one balance.
    let deposit = field(field(&stats, "functions"), "deposit");
    assert_eq!(field(deposit, "calls"), &Value::Int(4), "{text}");
    assert_eq!(field(deposit, "ran_on_node"), &Value::Int(3), "{text}");
    assert_eq!(field(deposit, "failed"), &Value::Int(1), "{text}");
    assert!(
        matches!(field(deposit, "latency_us_p99"), Value::Int(n) if *n > 0),
        "{text}"
    );
    let balance = field(field(&stats, "functions"), "balance");
    assert_eq!(field(balance, "calls"), &Value::Int(1), "{text}");
    let _: () = redis::cmd("FUNCTION")
        .arg("DELETE")
        .arg("accounts")
        .query(&mut con)
        .unwrap();
    assert!(error_text(fcall(&mut con, "deposit", &["a", "b"], &["1"])).contains("Function not found"));
    let gone = redis::cmd("FUNCTION")
        .arg("DELETE")
        .arg("accounts")
        .query::<()>(&mut con);
    assert!(error_text(gone).contains("Library not found"));
    let bad = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("#!lua name=x\nnot lua")
        .query::<String>(&mut con);
    assert!(error_text(bad).contains("Error compiling function"));
    server.shutdown();
}

const HOSTILE: &str = include_str!("../../../examples/lua/hostile.lua");

#[test]
fn runaway_and_memory_hungry_functions_stop_while_other_clients_are_served() {
    let server = node();
    let mut con = connect(&server);
    let _: String = redis::cmd("FUNCTION").arg("LOAD").arg(HOSTILE).query(&mut con).unwrap();
    // Another client keeps reading and writing the whole time.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let other = {
        let mut other = connect(&server);
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut served = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let n: i64 = redis::cmd("INCR").arg("other").query(&mut other).unwrap();
                assert_eq!(n as u64, served + 1);
                served += 1;
            }
            served
        })
    };
    let mut expected = 0;
    for _round in 0..3 {
        for function in ["spin", "sneaky", "hog"] {
            let started = Instant::now();
            let err = error_text(fcall(&mut con, function, &[], &[]));
            assert!(
                err.contains("Script killed") || err.contains("memory"),
                "{function}: {err}"
            );
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{function} took {:?}",
                started.elapsed()
            );
            expected += 1;
            let after = fcall(&mut con, "fine", &["k"], &[]).unwrap();
            assert_eq!(after, Value::Int(expected), "served after {function}");
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let served = other.join().unwrap();
    assert!(served > 0, "the other client was served");
    // Each call ended on its own: no worker thread was replaced.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let stats = runtime.block_on(async { client_a(&server).await.stats().await.unwrap() });
    let replaced = stats
        .iter()
        .find(|s| s.name == "node.worker_replacements")
        .unwrap()
        .value;
    assert_eq!(replaced, 0);
    server.shutdown();
}
