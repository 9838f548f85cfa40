//! A function run on the app side reads part of a large collection in one round trip that
//! moves that part, not the collection (`read_part`): HGET of one field of a 10,000-field
//! hash, LRANGE 0 9 of a 10,000-item list. The key still joins the read set at the version
//! the part was read at, so a later write of it in the same call (which needs the whole
//! value) sees that version, and concurrent read-modify-writes stay serializable.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use ferry_lua::fcall::reply_of;
use ferry_lua::FcallArgs;
use ferry_resp::Reply;

const LIBRARY: &str = "#!lua name=parts
redis.register_function('field', function(keys, args) return redis.call('HGET', keys[1], args[1]) end)
redis.register_function('head', function(keys) return redis.call('LRANGE', keys[1], 0, 9) end)
redis.register_function('bump', function(keys)
  local n = tonumber(redis.call('HGET', keys[1], 'n') or '0')
  redis.call('HSET', keys[1], 'n', n + 1)
  return n
end)";

/// Fields of the hash and items of the list.
const ELEMENTS: usize = 10_000;

fn call(function: &str, key: &str, args: &[&str]) -> (String, Bytes) {
    let call = FcallArgs {
        function: function.into(),
        table: "db0".into(),
        keys: vec![Bytes::copy_from_slice(key.as_bytes())],
        args: args.iter().map(|a| Bytes::copy_from_slice(a.as_bytes())).collect(),
        read_only: false,
    };
    (call.invocation_name(), call.encode().unwrap())
}

#[test]
fn a_function_on_the_app_side_moves_the_part_it_reads_not_the_collection() {
    let server = resp_node();
    let mut con = resp_connect(&server, TENANT_A, TOKEN_A);
    let _: String = redis::cmd("FUNCTION").arg("LOAD").arg(LIBRARY).query(&mut con).unwrap();
    let fields: Vec<(String, String)> = (0..ELEMENTS)
        .map(|i| (format!("field:{i}"), format!("value-of-field-{i}")))
        .collect();
    let items: Vec<String> = (0..ELEMENTS).map(|i| format!("item-number-{i}")).collect();
    for chunk in fields.chunks(1000) {
        let _: i64 = redis::cmd("HSET").arg("big").arg(chunk).query(&mut con).unwrap();
    }
    for chunk in items.chunks(1000) {
        let _: i64 = redis::cmd("RPUSH").arg("long").arg(chunk).query(&mut con).unwrap();
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let app = runtime.block_on(client_a(&server));

    let (name, args) = call("field", "big", &["field:4321"]);
    let local = runtime.block_on(app.invoke_local(&name, args)).unwrap();
    assert_eq!(
        reply_of(&local.result),
        Reply::Bulk(Bytes::from_static(b"value-of-field-4321"))
    );
    // The field, not the hash (about 300 KB when a run fetches it whole).
    assert!(
        local.cost.bytes_returned < 1_000,
        "HGET moved {} bytes",
        local.cost.bytes_returned
    );

    let (name, args) = call("head", "long", &[]);
    let local = runtime.block_on(app.invoke_local(&name, args)).unwrap();
    let Reply::Array(head) = reply_of(&local.result) else {
        panic!("{:?}", reply_of(&local.result))
    };
    assert_eq!(head.len(), 10);
    assert_eq!(head[9], Reply::Bulk(Bytes::from_static(b"item-number-9")));
    assert!(
        local.cost.bytes_returned < 1_000,
        "LRANGE 0 9 moved {} bytes",
        local.cost.bytes_returned
    );
}

#[test]
fn a_part_read_then_written_in_one_call_stays_serializable() {
    // Each call reads counter n by HGET (a part), then HSETs n + 1 (which fetches the
    // whole hash, at the version the part was read at). Serializable calls see 0, 1, 2, …
    // each once.
    const CALLERS: usize = 3;
    const CALLS_EACH: usize = 40;
    let server = resp_node();
    let mut con = resp_connect(&server, TENANT_A, TOKEN_A);
    let _: String = redis::cmd("FUNCTION").arg("LOAD").arg(LIBRARY).query(&mut con).unwrap();
    let _: i64 = redis::cmd("HSET")
        .arg("counter")
        .arg("other")
        .arg("x")
        .query(&mut con)
        .unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let app = runtime.block_on(client_a(&server));
    let seen: Vec<i64> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..CALLERS)
            .map(|_| {
                let (runtime, app) = (&runtime, &app);
                scope.spawn(move || {
                    let mut seen = Vec::new();
                    for _ in 0..CALLS_EACH {
                        let (name, args) = call("bump", "counter", &[]);
                        // A caller that conflicted more often than the client retries tries again.
                        let local = loop {
                            match runtime.block_on(app.invoke_local(&name, args.clone())) {
                                Ok(local) => break local,
                                Err(ferry_client::ClientError::Server {
                                    status: ferry_proto::Status::TxAbort,
                                    ..
                                }) => std::thread::sleep(Duration::from_millis(1)),
                                Err(err) => panic!("{err}"),
                            }
                        };
                        match reply_of(&local.result) {
                            Reply::Integer(n) => seen.push(n),
                            other => panic!("{other:?}"),
                        }
                    }
                    seen
                })
            })
            .collect();
        handles.into_iter().flat_map(|handle| handle.join().unwrap()).collect()
    });
    let distinct: BTreeSet<i64> = seen.iter().copied().collect();
    assert_eq!(distinct.len(), CALLERS * CALLS_EACH, "two calls saw one count");
    let n: i64 = redis::cmd("HGET").arg("counter").arg("n").query(&mut con).unwrap();
    assert_eq!(n, (CALLERS * CALLS_EACH) as i64);
}
