//! The commands over a whole database through a Redis client: KEYS, SCAN, DBSIZE,
//! RANDOMKEY, FLUSHDB, FLUSHALL (each tenant's own data only), TIME, and FUNCTION FLUSH.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;
use redis::Commands;

fn node() -> ferry_server::ServerHandle {
    resp_node()
}

use common::resp_connect as connect;

#[test]
fn keys_scan_dbsize_and_randomkey_see_the_database() {
    let server = node();
    let mut con = connect(&server, TENANT_A, TOKEN_A);
    for i in 0..250 {
        let () = con.set(format!("user:{i}"), i).unwrap();
    }
    let _: i64 = con.hset("profile", "name", "x").unwrap();
    let () = redis::cmd("SET")
        .arg("brief")
        .arg("v")
        .arg("PX")
        .arg(1)
        .query(&mut con)
        .unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        redis::cmd("DBSIZE").query::<i64>(&mut con).unwrap(),
        251,
        "the expired key is not counted"
    );
    let mut keys: Vec<String> = con.keys("user:1?").unwrap();
    keys.sort();
    assert_eq!(keys, (10..20).map(|i| format!("user:{i}")).collect::<Vec<_>>());
    // A whole SCAN returns every key once, in several calls.
    let (mut cursor, mut seen, mut calls) = (0u64, Vec::new(), 0);
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(20)
            .query(&mut con)
            .unwrap();
        seen.extend(batch);
        calls += 1;
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    let unique: BTreeSet<&String> = seen.iter().collect();
    assert_eq!((seen.len(), unique.len()), (251, 251));
    assert!(calls > 5, "{calls} calls");
    // redis-rs's own iterator, with MATCH and TYPE.
    let hashes: Vec<String> = redis::cmd("SCAN")
        .cursor_arg(0)
        .arg("TYPE")
        .arg("hash")
        .clone()
        .iter(&mut con)
        .unwrap()
        .collect();
    assert_eq!(hashes, ["profile"]);
    let random: String = redis::cmd("RANDOMKEY").query(&mut con).unwrap();
    assert!(unique.contains(&random), "{random}");
    // Another database of the same tenant is empty.
    let () = redis::cmd("SELECT").arg(3).query(&mut con).unwrap();
    assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut con).unwrap(), 0);
    assert_eq!(redis::cmd("RANDOMKEY").query::<Option<String>>(&mut con).unwrap(), None);
    let err = redis::cmd("SCAN")
        .arg("nope")
        .query::<redis::Value>(&mut con)
        .unwrap_err();
    assert!(err.to_string().contains("invalid cursor"), "{err}");
}

#[test]
fn flushes_remove_only_the_callers_data() {
    let server = node();
    let mut a = connect(&server, TENANT_A, TOKEN_A);
    let mut b = connect(&server, TENANT_B, TOKEN_B);
    for i in 0..3000 {
        let () = a.set(format!("k{i}"), i).unwrap();
    }
    let () = b.set("theirs", 1).unwrap();
    let () = redis::cmd("SELECT").arg(1).query(&mut a).unwrap();
    let () = a.set("in-db1", 1).unwrap();
    let () = redis::cmd("FLUSHDB").query(&mut a).unwrap();
    assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut a).unwrap(), 0);
    let () = redis::cmd("SELECT").arg(0).query(&mut a).unwrap();
    assert_eq!(
        redis::cmd("DBSIZE").query::<i64>(&mut a).unwrap(),
        3000,
        "FLUSHDB left db0 alone"
    );
    let () = redis::cmd("FLUSHALL").arg("ASYNC").query(&mut a).unwrap();
    assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut a).unwrap(), 0);
    assert_eq!(b.get::<_, i64>("theirs").unwrap(), 1, "another tenant's data stays");
    let err = redis::cmd("FLUSHALL").arg("LATER").query::<()>(&mut a).unwrap_err();
    assert!(err.to_string().contains("syntax error"), "{err}");
}

#[test]
fn time_and_function_flush_answer_as_redis_does() {
    let server = node();
    let mut con = connect(&server, TENANT_A, TOKEN_A);
    let (seconds, micros): (u64, u64) = redis::cmd("TIME").query(&mut con).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(seconds.abs_diff(now) < 60 && micros < 1_000_000, "{seconds} {micros}");
    // The Redis Functions tutorial's function: TIME and HSET from a script.
    let library = "#!lua name=mylib\n\
        local function my_hset(keys, args)\n\
          local hash = keys[1]\n\
          local time = redis.call('TIME')[1]\n\
          return redis.call('HSET', hash, '_last_modified_', time, unpack(args))\n\
        end\n\
        redis.register_function('my_hset', my_hset)\n";
    let loaded: String = redis::cmd("FUNCTION").arg("LOAD").arg(library).query(&mut con).unwrap();
    assert_eq!(loaded, "mylib");
    let added: i64 = redis::cmd("FCALL")
        .arg("my_hset")
        .arg(1)
        .arg("myhash")
        .arg("myfield")
        .arg("some value")
        .query(&mut con)
        .unwrap();
    assert_eq!(added, 2);
    let stamped: u64 = con.hget("myhash", "_last_modified_").unwrap();
    assert!(stamped.abs_diff(now) < 60);
    let () = redis::cmd("FUNCTION").arg("FLUSH").query(&mut con).unwrap();
    let err = redis::cmd("FCALL")
        .arg("my_hset")
        .arg(1)
        .arg("myhash")
        .query::<i64>(&mut con)
        .unwrap_err();
    assert!(err.to_string().contains("Function not found"), "{err}");
}

/// Active expiry deletes expired keys no command meets: the stored objects go (read over
/// the ferry protocol, which sees the raw objects), keys with no TTL or a later one stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_no_command_meets_are_deleted_by_active_expiry() {
    let server = node();
    let mut con = tokio::task::block_in_place(|| connect(&server, TENANT_A, TOKEN_A));
    tokio::task::block_in_place(|| {
        for i in 0..100 {
            let () = redis::cmd("SET")
                .arg(format!("brief:{i}"))
                .arg("v")
                .arg("PX")
                .arg(50)
                .query(&mut con)
                .unwrap();
        }
        let () = con.set("lasting", "v").unwrap();
        let () = con.set_ex("later", "v", 3600).unwrap();
    });
    let client = client_a(&server).await;
    // Generous: a cycle every 100 ms clears these in one or two; a loaded machine is slower.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mut left = 0;
        for i in 0..100 {
            if client
                .get("db0", format!("brief:{i}").as_bytes())
                .await
                .unwrap()
                .is_some()
            {
                left += 1;
            }
        }
        if left == 0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{left} expired keys still stored");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(client.get("db0", b"lasting").await.unwrap().is_some());
    assert!(client.get("db0", b"later").await.unwrap().is_some());
}
