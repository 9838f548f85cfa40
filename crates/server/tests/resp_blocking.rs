//! The blocking pops through a Redis client: they answer at once when there is something
//! to pop, wait for another connection's push otherwise, and time out with nil.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use redis::{Commands, Value};

fn node() -> ferry_server::ServerHandle {
    resp_node()
}

fn connect(server: &ferry_server::ServerHandle) -> redis::Connection {
    resp_connect(server, TENANT_A, TOKEN_A)
}

#[test]
fn blocking_pops_answer_at_once_when_there_is_something_to_pop() {
    let server = node();
    let mut con = connect(&server);
    let _: i64 = con.rpush("l", &["a", "b", "c"]).unwrap();
    let popped: (String, String) = redis::cmd("BLPOP")
        .arg("empty")
        .arg("l")
        .arg(0)
        .query(&mut con)
        .unwrap();
    assert_eq!(popped, ("l".into(), "a".into()));
    let popped: (String, String) = redis::cmd("BRPOP").arg("l").arg(1).query(&mut con).unwrap();
    assert_eq!(popped, ("l".into(), "c".into()));
    let moved: String = redis::cmd("BLMOVE")
        .arg("l")
        .arg("m")
        .arg("LEFT")
        .arg("RIGHT")
        .arg(1)
        .query(&mut con)
        .unwrap();
    assert_eq!(moved, "b");
    let _: i64 = con.zadd_multiple("z", &[(2, "two"), (1, "one")]).unwrap();
    let popped: (String, String, f64) = redis::cmd("BZPOPMAX").arg("z").arg(1).query(&mut con).unwrap();
    assert_eq!(popped, ("z".into(), "two".into(), 2.0));
    let popped: Value = redis::cmd("BLMPOP")
        .arg(1)
        .arg(2)
        .arg("nothing")
        .arg("m")
        .arg("LEFT")
        .arg("COUNT")
        .arg(5)
        .query(&mut con)
        .unwrap();
    assert_eq!(
        popped,
        Value::Array(vec![
            Value::BulkString(b"m".to_vec()),
            Value::Array(vec![Value::BulkString(b"b".to_vec())])
        ])
    );
}

#[test]
fn a_blocking_pop_waits_for_another_connections_push_and_times_out_with_nil() {
    let server = node();
    let mut con = connect(&server);
    let started = Instant::now();
    let timed_out: Value = redis::cmd("BLPOP").arg("queue").arg(0.2).query(&mut con).unwrap();
    assert_eq!(timed_out, Value::Nil);
    assert!(started.elapsed() >= Duration::from_millis(200), "waited its timeout");
    let mut pusher = connect(&server);
    let waiter = std::thread::spawn(move || {
        let popped: (String, String) = redis::cmd("BLPOP").arg("queue").arg(30).query(&mut con).unwrap();
        popped
    });
    std::thread::sleep(Duration::from_millis(100));
    let _: i64 = pusher.lpush("queue", "job").unwrap();
    assert_eq!(waiter.join().unwrap(), ("queue".into(), "job".into()));
    assert_eq!(pusher.llen::<_, i64>("queue").unwrap(), 0, "popped once");
}

#[test]
fn bad_timeouts_are_refused_and_blocking_pops_in_transactions_or_scripts_do_not_wait() {
    let server = node();
    let mut con = connect(&server);
    let err = redis::cmd("BLPOP")
        .arg("l")
        .arg(-1)
        .query::<Value>(&mut con)
        .unwrap_err();
    assert!(err.to_string().contains("timeout is negative"), "{err}");
    let err = redis::cmd("BLPOP")
        .arg("l")
        .arg("soon")
        .query::<Value>(&mut con)
        .unwrap_err();
    assert!(err.to_string().contains("not a float"), "{err}");
    // In a script a blocking pop runs once: what is there, or nil at once (as in Redis).
    let started = Instant::now();
    let popped: Value = redis::cmd("EVAL")
        .arg("return redis.call('BLPOP', KEYS[1], 0)")
        .arg(1)
        .arg("nothing")
        .query(&mut con)
        .unwrap();
    assert_eq!(popped, Value::Nil);
    assert!(started.elapsed() < Duration::from_secs(30), "did not wait forever");
    let () = redis::cmd("RPUSH").arg("s").arg("a").arg("b").query(&mut con).unwrap();
    let popped: Vec<String> = redis::cmd("EVAL")
        .arg("return redis.call('BRPOP', KEYS[1], 0)")
        .arg(1)
        .arg("s")
        .query(&mut con)
        .unwrap();
    assert_eq!(popped, ["s", "b"]);
    let moved: String = redis::cmd("EVAL")
        .arg("return redis.call('BLMOVE', KEYS[1], KEYS[2], 'LEFT', 'RIGHT', 0)")
        .arg(2)
        .arg("s")
        .arg("t")
        .query(&mut con)
        .unwrap();
    assert_eq!(moved, "a");
    // Inside a transaction a blocking pop does not block: it pops or answers nil, as in
    // Redis.
    let () = redis::cmd("MULTI").query(&mut con).unwrap();
    let () = redis::cmd("BLPOP").arg("empty").arg(0).query(&mut con).unwrap();
    let () = redis::cmd("RPUSH").arg("l").arg("x").query(&mut con).unwrap();
    let () = redis::cmd("BRPOP").arg("l").arg(0).query(&mut con).unwrap();
    let replies: Vec<Value> = redis::cmd("EXEC").query(&mut con).unwrap();
    assert_eq!(
        replies,
        vec![
            Value::Nil,
            Value::Int(1),
            Value::Array(vec![Value::BulkString(b"l".to_vec()), Value::BulkString(b"x".to_vec())])
        ]
    );
}

/// The `field:value` of INFO's `field`, as a number.
fn info_field(con: &mut redis::Connection, field: &str) -> i64 {
    let info: String = redis::cmd("INFO").arg("clients").query(con).unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("{field} in {info}"))
        .trim()
        .parse()
        .unwrap()
}

/// Waits (generously) until `count` of the tenant's connections block.
fn wait_for_blocked(con: &mut redis::Connection, count: i64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_field(con, "blocked_clients") != count {
        assert!(Instant::now() < deadline, "{count} blocked clients");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_blocked_client_is_counted_listed_and_can_be_unblocked() {
    let server = node();
    let mut watcher = connect(&server);
    assert_eq!(info_field(&mut watcher, "blocked_clients"), 0);
    for (how, expected) in [("TIMEOUT", Ok(Value::Nil)), ("ERROR", Err("UNBLOCKED"))] {
        let mut waiter = connect(&server);
        let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut waiter).unwrap();
        let popping = std::thread::spawn(move || redis::cmd("BLPOP").arg("none").arg(0).query::<Value>(&mut waiter));
        wait_for_blocked(&mut watcher, 1);
        let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut watcher).unwrap();
        let line = list
            .lines()
            .find(|line| line.starts_with(&format!("id={id} ")))
            .unwrap();
        assert!(line.contains(" flags=b "), "{line}");
        let unblocked: i64 = redis::cmd("CLIENT")
            .arg("UNBLOCK")
            .arg(id)
            .arg(how)
            .query(&mut watcher)
            .unwrap();
        assert_eq!(unblocked, 1);
        match (popping.join().unwrap(), expected) {
            (Ok(reply), Ok(want)) => assert_eq!(reply, want),
            (Err(err), Err(code)) => assert_eq!(err.code(), Some(code), "{err}"),
            (got, want) => panic!("{how}: {got:?}, wanted {want:?}"),
        }
        wait_for_blocked(&mut watcher, 0);
        // A client that is not blocked is not unblocked.
        let unblocked: i64 = redis::cmd("CLIENT").arg("UNBLOCK").arg(id).query(&mut watcher).unwrap();
        assert_eq!(unblocked, 0);
    }
    // The waiters have hung up; only the watcher is left (once the node sees them go).
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_field(&mut watcher, "connected_clients") != 1 {
        assert!(Instant::now() < deadline, "the closed connections leave the count");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_client_that_hangs_up_while_blocked_pops_nothing_later() {
    use std::io::Write;
    let server = node();
    let mut watcher = connect(&server);
    let mut raw = std::net::TcpStream::connect(server.resp_addr().unwrap()).unwrap();
    let auth = format!(
        "*3\r\n$4\r\nAUTH\r\n${}\r\n{TENANT_A}\r\n${}\r\n{TOKEN_A}\r\n",
        TENANT_A.to_string().len(),
        TOKEN_A.len()
    );
    raw.write_all(auth.as_bytes()).unwrap();
    raw.write_all(b"*3\r\n$5\r\nBLPOP\r\n$5\r\nqueue\r\n$1\r\n0\r\n")
        .unwrap();
    wait_for_blocked(&mut watcher, 1);
    drop(raw);
    wait_for_blocked(&mut watcher, 0);
    let _: i64 = watcher.rpush("queue", "job").unwrap();
    // Time for a pop left waiting to take it, were there one.
    std::thread::sleep(Duration::from_millis(300));
    let left: i64 = watcher.llen("queue").unwrap();
    assert_eq!(left, 1, "the element waits for a client that is there");
}

#[test]
fn a_key_of_another_type_keeps_a_pop_waiting_but_a_destination_of_another_type_ends_it() {
    let server = node();
    let mut other = connect(&server);

    // The key a BLPOP waits on becomes a string: the pop goes on waiting (as in Redis),
    // and takes the list pushed after.
    let mut waiter = connect(&server);
    let popping = std::thread::spawn(move || redis::cmd("BLPOP").arg("q").arg(0).query::<Value>(&mut waiter));
    wait_for_blocked(&mut other, 1);
    let _: () = other.set("q", "now a string").unwrap();
    std::thread::sleep(Duration::from_millis(300)); // a few of the waiter's tries
    assert_eq!(info_field(&mut other, "blocked_clients"), 1, "still waiting");
    let _: i64 = other.del("q").unwrap();
    let _: i64 = other.rpush("q", "item").unwrap();
    let popped: Vec<String> = redis::from_redis_value(&popping.join().unwrap().unwrap()).unwrap();
    assert_eq!(popped, ["q", "item"]);

    // A BLMOVE whose destination is a string: the push to its source ends it with
    // WRONGTYPE, and the element stays where it was.
    let _: () = other.set("dst", "a string").unwrap();
    let mut waiter = connect(&server);
    let moving = std::thread::spawn(move || {
        redis::cmd("BLMOVE")
            .arg("src")
            .arg("dst")
            .arg("LEFT")
            .arg("RIGHT")
            .arg(0)
            .query::<Value>(&mut waiter)
    });
    wait_for_blocked(&mut other, 1);
    let _: i64 = other.rpush("src", "kept").unwrap();
    let err = moving.join().unwrap().unwrap_err();
    assert_eq!(err.code(), Some("WRONGTYPE"), "{err}");
    let src: Vec<String> = other.lrange("src", 0, -1).unwrap();
    assert_eq!(src, ["kept"]);
}
