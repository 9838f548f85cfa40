//! MULTI / EXEC / DISCARD / WATCH / UNWATCH and CONFIG through a Redis client: a
//! transaction's commands run as one, a watched key changed by another connection makes
//! EXEC answer null, a queueing error aborts it, and CONFIG reports and keeps parameters.

use crate::common;

use std::time::Duration;

use common::*;
use redis::{Commands, Value};

fn node() -> ferry_server::ServerHandle {
    resp_node()
}

fn connect(server: &ferry_server::ServerHandle) -> redis::Connection {
    resp_connect(server, TENANT_A, TOKEN_A)
}

fn text(con: &mut redis::Connection, words: &[&str]) -> redis::RedisResult<Value> {
    let mut cmd = redis::cmd(words[0]);
    for word in &words[1..] {
        cmd.arg(*word);
    }
    cmd.query(con)
}

#[test]
fn multi_exec_runs_the_queued_commands_as_one_and_keeps_runtime_errors_per_command() {
    let server = node();
    let mut con = connect(&server);
    let () = con.set("s", "text").unwrap();
    assert_eq!(text(&mut con, &["MULTI"]).unwrap(), Value::Okay);
    for words in [&["INCR", "n"][..], &["INCR", "n"], &["LPUSH", "s", "x"], &["GET", "n"]] {
        assert_eq!(text(&mut con, words).unwrap(), Value::SimpleString("QUEUED".into()));
    }
    // redis-rs gives an array holding an error as that error; the other commands ran.
    let err = text(&mut con, &["EXEC"]).unwrap_err();
    assert_eq!(err.code(), Some("WRONGTYPE"), "{err}");
    assert_eq!(con.get::<_, i64>("n").unwrap(), 2);
    assert_eq!(con.get::<_, String>("s").unwrap(), "text");
    text(&mut con, &["MULTI"]).unwrap();
    text(&mut con, &["INCR", "n"]).unwrap();
    text(&mut con, &["GET", "n"]).unwrap();
    assert_eq!(
        text(&mut con, &["EXEC"]).unwrap(),
        Value::Array(vec![Value::Int(3), Value::BulkString(b"3".to_vec())])
    );
    // Through redis-rs's own pipeline-as-transaction.
    let (a, b): (i64, i64) = redis::pipe()
        .atomic()
        .incr("n", 1)
        .incr("n", 1)
        .query(&mut con)
        .unwrap();
    assert_eq!((a, b), (4, 5));
    // DISCARD drops the queue.
    text(&mut con, &["MULTI"]).unwrap();
    text(&mut con, &["SET", "n", "0"]).unwrap();
    assert_eq!(text(&mut con, &["DISCARD"]).unwrap(), Value::Okay);
    assert_eq!(con.get::<_, i64>("n").unwrap(), 5);
    assert!(text(&mut con, &["EXEC"]).is_err(), "EXEC without MULTI");
}

#[test]
fn a_queueing_error_aborts_exec_and_nothing_runs() {
    let server = node();
    let mut con = connect(&server);
    text(&mut con, &["MULTI"]).unwrap();
    text(&mut con, &["SET", "k", "v"]).unwrap();
    assert!(text(&mut con, &["NOSUCHCOMMAND"]).is_err());
    assert!(text(&mut con, &["GET"]).is_err(), "wrong arity");
    let err = text(&mut con, &["EXEC"]).unwrap_err();
    assert_eq!(err.code(), Some("EXECABORT"), "{err}");
    assert_eq!(con.get::<_, Option<String>>("k").unwrap(), None);
    // A command a transaction cannot hold aborts it too, and nesting is refused.
    text(&mut con, &["MULTI"]).unwrap();
    assert!(text(&mut con, &["MULTI"]).is_err());
    assert!(text(&mut con, &["FUNCTION", "FLUSH"]).is_err());
    assert_eq!(text(&mut con, &["EXEC"]).unwrap_err().code(), Some("EXECABORT"));
}

#[test]
fn a_watched_key_changed_by_another_connection_makes_exec_answer_null() {
    let server = node();
    let mut con = connect(&server);
    let mut other = connect(&server);
    let () = con.set("balance", 10).unwrap();
    // Unchanged: EXEC runs.
    assert_eq!(text(&mut con, &["WATCH", "balance", "absent"]).unwrap(), Value::Okay);
    text(&mut con, &["MULTI"]).unwrap();
    text(&mut con, &["DECRBY", "balance", "3"]).unwrap();
    assert_eq!(text(&mut con, &["EXEC"]).unwrap(), Value::Array(vec![Value::Int(7)]));
    // Changed by another connection (even to the same value): null, nothing run.
    text(&mut con, &["WATCH", "balance"]).unwrap();
    let () = other.set("balance", 7).unwrap();
    text(&mut con, &["MULTI"]).unwrap();
    text(&mut con, &["DECRBY", "balance", "3"]).unwrap();
    assert_eq!(text(&mut con, &["EXEC"]).unwrap(), Value::Nil);
    assert_eq!(con.get::<_, i64>("balance").unwrap(), 7);
    // EXEC unwatched it: the next transaction runs.
    let () = other.set("balance", 8).unwrap();
    text(&mut con, &["MULTI"]).unwrap();
    text(&mut con, &["DECRBY", "balance", "3"]).unwrap();
    assert_eq!(text(&mut con, &["EXEC"]).unwrap(), Value::Array(vec![Value::Int(5)]));
    // A key created meanwhile changed; UNWATCH forgets.
    text(&mut con, &["WATCH", "fresh"]).unwrap();
    let () = other.set("fresh", 1).unwrap();
    text(&mut con, &["UNWATCH"]).unwrap();
    text(&mut con, &["MULTI"]).unwrap();
    text(&mut con, &["INCR", "fresh"]).unwrap();
    assert_eq!(text(&mut con, &["EXEC"]).unwrap(), Value::Array(vec![Value::Int(2)]));
    // A watched key that expires while watched has changed.
    text(&mut con, &["SET", "brief", "v", "PX", "50"]).unwrap();
    text(&mut con, &["WATCH", "brief"]).unwrap();
    std::thread::sleep(Duration::from_millis(120));
    text(&mut con, &["MULTI"]).unwrap();
    text(&mut con, &["PING"]).unwrap();
    assert_eq!(text(&mut con, &["EXEC"]).unwrap(), Value::Nil);
    assert!(text(&mut con, &["MULTI"]).is_ok());
    assert!(text(&mut con, &["WATCH", "x"]).is_err(), "WATCH inside MULTI");
    text(&mut con, &["DISCARD"]).unwrap();
}

#[test]
fn concurrent_watch_multi_increments_lose_no_update() {
    let server = node();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let mut con = connect(&server);
            std::thread::spawn(move || {
                let mut done = 0;
                while done < 50 {
                    text(&mut con, &["WATCH", "counter"]).unwrap();
                    let now: Option<i64> = con.get("counter").unwrap();
                    text(&mut con, &["MULTI"]).unwrap();
                    let next = (now.unwrap_or(0) + 1).to_string();
                    text(&mut con, &["SET", "counter", &next]).unwrap();
                    if text(&mut con, &["EXEC"]).unwrap() != Value::Nil {
                        done += 1;
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let mut con = connect(&server);
    assert_eq!(con.get::<_, i64>("counter").unwrap(), 200);
}

#[test]
fn config_get_and_set_report_and_keep_parameters() {
    let server = node();
    let mut con = connect(&server);
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory*")
        .query(&mut con)
        .unwrap();
    // The tenant's limit: its quota until CONFIG SET lowers it.
    let quota = (64u64 << 20).to_string();
    assert_eq!(got, vec!["maxmemory", quota.as_str(), "maxmemory-policy", "noeviction"]);
    assert_eq!(
        text(&mut con, &["CONFIG", "SET", "hash-max-listpack-entries", "16"]).unwrap(),
        Value::Okay
    );
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("hash-max-listpack-entries")
        .query(&mut con)
        .unwrap();
    assert_eq!(got, vec!["hash-max-listpack-entries", "16"]);
    assert!(text(&mut con, &["CONFIG", "SET", "maxmemory", "1gb"]).is_err());
    assert!(text(&mut con, &["CONFIG", "SET", "no-such-parameter", "1"]).is_err());
}

#[test]
fn a_transaction_holds_the_database_commands_and_watch_sees_a_flush() {
    let server = node();
    let mut con = connect(&server);
    let () = con.set("before", "1").unwrap();
    assert_eq!(text(&mut con, &["MULTI"]).unwrap(), Value::Okay);
    for words in [
        &["SET", "inside", "1"][..],
        &["DBSIZE"],
        &["KEYS", "*"],
        &["FLUSHDB"],
        &["DBSIZE"],
        &["SET", "after", "1"],
    ] {
        assert_eq!(
            text(&mut con, words).unwrap(),
            Value::SimpleString("QUEUED".into()),
            "{words:?}"
        );
    }
    let Value::Array(replies) = text(&mut con, &["EXEC"]).unwrap() else {
        panic!("EXEC answers an array")
    };
    assert_eq!(replies[1], Value::Int(2), "the transaction's own write is counted");
    let Value::Array(mut listed) = replies[2].clone() else {
        panic!("{:?}", replies[2])
    };
    listed.sort_by_key(|key| format!("{key:?}"));
    assert_eq!(
        listed,
        vec![
            Value::BulkString(b"before".to_vec()),
            Value::BulkString(b"inside".to_vec())
        ]
    );
    assert_eq!(replies[4], Value::Int(0));
    let left: Vec<String> = con.keys("*").unwrap();
    assert_eq!(
        left,
        vec!["after".to_string()],
        "the flush and the write after it, as one"
    );

    // A key watched and then flushed by another connection: EXEC answers null.
    let mut other = connect(&server);
    assert_eq!(text(&mut con, &["WATCH", "after"]).unwrap(), Value::Okay);
    assert_eq!(text(&mut other, &["FLUSHALL"]).unwrap(), Value::Okay);
    assert_eq!(text(&mut con, &["MULTI"]).unwrap(), Value::Okay);
    text(&mut con, &["DBSIZE"]).unwrap();
    assert_eq!(text(&mut con, &["EXEC"]).unwrap(), Value::Nil);
    // Redis's "Flushall while watching several keys by one client".
    let () = con.set("a", "1").unwrap();
    assert_eq!(text(&mut con, &["WATCH", "a", "b"]).unwrap(), Value::Okay);
    assert_eq!(text(&mut con, &["FLUSHALL"]).unwrap(), Value::Okay);
    assert_eq!(text(&mut con, &["PING"]).unwrap(), Value::SimpleString("PONG".into()));
}
