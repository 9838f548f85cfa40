//! maxmemory and eviction through a Redis client: CONFIG sets the tenant's limit (never
//! above its quota) and policy; past the limit an evicting policy makes room and counts
//! it in INFO and /metrics, noeviction answers Redis's OOM, and ferry's own tables (the
//! function catalog) are never evicted.

use crate::common;

use common::*;
use redis::Commands;

fn info_field(con: &mut redis::Connection, field: &str) -> u64 {
    let info: String = redis::cmd("INFO").query(con).unwrap();
    let line = info
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("INFO has {field}: {info}"));
    line.trim().parse().unwrap()
}

fn scrape(addr: std::net::SocketAddr) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

fn config_get(con: &mut redis::Connection, name: &str) -> String {
    let got: Vec<String> = redis::cmd("CONFIG").arg("GET").arg(name).query(con).unwrap();
    got[1].clone()
}

#[test]
fn past_maxmemory_an_evicting_policy_makes_room_and_noeviction_answers_oom() {
    let mut config = config(1);
    config.resp_listen = Some("127.0.0.1:0".parse().unwrap());
    config.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    let server = start_with(config);
    let mut con = resp_connect(&server, TENANT_A, TOKEN_A);
    assert_eq!(
        config_get(&mut con, "maxmemory"),
        (64u64 << 20).to_string(),
        "the quota"
    );
    let err = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("1gb")
        .query::<()>(&mut con);
    assert!(
        err.unwrap_err().to_string().contains("quota"),
        "above the quota is refused"
    );
    let library = "#!lua name=lib\nredis.register_function('echo', function(keys, args) return args[1] end)";
    let _: String = redis::cmd("FUNCTION").arg("LOAD").arg(library).query(&mut con).unwrap();

    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("200kb")
        .arg("maxmemory-policy")
        .arg("allkeys-lru")
        .query(&mut con)
        .unwrap();
    assert_eq!(config_get(&mut con, "maxmemory-policy"), "allkeys-lru");
    let value = "v".repeat(100);
    for batch in 0..50 {
        let mut pipe = redis::pipe();
        for i in 0..100 {
            pipe.set(format!("key:{}", batch * 100 + i), &value).ignore();
        }
        let () = pipe.query(&mut con).expect("every write fits after evictions");
    }
    let evicted = info_field(&mut con, "evicted_keys");
    let keys: u64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert!(evicted > 0 && keys < 5000, "evicted {evicted}, {keys} keys left");
    assert_eq!(keys + evicted, 5000, "each key is either there or was evicted");
    assert!(info_field(&mut con, "used_memory") <= 200 * 1024);
    // The newest write is there, and the library survived.
    assert_eq!(con.get::<_, String>("key:4999").unwrap(), value);
    let echoed: String = redis::cmd("FCALL")
        .arg("echo")
        .arg(0)
        .arg("hi")
        .query(&mut con)
        .unwrap();
    assert_eq!(echoed, "hi");
    let metrics = scrape(server.metrics_addr().unwrap());
    let line = format!("ferry_tenant_evicted_keys_total{{tenant=\"{TENANT_A}\"}} {evicted}");
    assert!(metrics.contains(&line), "{line} in {metrics}");

    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg("noeviction")
        .query(&mut con)
        .unwrap();
    let err = con.set::<_, _, ()>("one-more", &value).unwrap_err();
    assert_eq!(err.code(), Some("OOM"), "{err}");
    // 0 restores the quota: the write fits again.
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("0")
        .query(&mut con)
        .unwrap();
    let () = con.set("one-more", &value).unwrap();
}

#[test]
fn past_the_limit_under_noeviction_growing_commands_are_refused_before_they_run() {
    let mut config = config(1);
    config.resp_listen = Some("127.0.0.1:0".parse().unwrap());
    let server = start_with(config);
    let mut con = resp_connect(&server, TENANT_A, TOKEN_A);
    let mut other = resp_connect(&server, TENANT_A, TOKEN_A);
    let () = con.set("x", "value").unwrap();
    // A transaction of reads queued before the limit still runs.
    let () = redis::cmd("MULTI").query(&mut con).unwrap();
    let () = redis::cmd("GET").arg("x").query(&mut con).unwrap();
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("1")
        .query(&mut other)
        .unwrap();
    let got: Vec<String> = redis::cmd("EXEC").query(&mut con).unwrap();
    assert_eq!(got, vec!["value".to_string()]);
    // Outside MULTI: writes that grow are refused, reads and deletes run.
    let err = con.set::<_, _, ()>("y", "1").unwrap_err();
    assert_eq!(err.code(), Some("OOM"), "{err}");
    assert_eq!(con.get::<_, String>("x").unwrap(), "value");
    // Inside MULTI anything but EXEC and DISCARD is refused, and dooms the transaction.
    let () = redis::cmd("MULTI").query(&mut con).unwrap();
    let err = redis::cmd("GET").arg("x").query::<()>(&mut con).unwrap_err();
    assert_eq!(err.code(), Some("OOM"), "{err}");
    let err = redis::cmd("EXEC").query::<()>(&mut con).unwrap_err();
    assert_eq!(err.code(), Some("EXECABORT"), "{err}");
    // A queued write makes EXEC itself refused while out of memory; nothing ran.
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("0")
        .query(&mut other)
        .unwrap();
    let () = redis::cmd("MULTI").query(&mut con).unwrap();
    let () = redis::cmd("SET").arg("z").arg("1").query(&mut con).unwrap();
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("1")
        .query(&mut other)
        .unwrap();
    let err = redis::cmd("EXEC").query::<()>(&mut con).unwrap_err();
    assert!(
        err.code() == Some("EXECABORT") && err.to_string().contains("OOM"),
        "{err}"
    );
    // A library's commit past the limit is Redis's OOM too.
    let library = "#!lua name=lib\nredis.register_function('one', function() return 1 end)";
    let err = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(library)
        .query::<()>(&mut con)
        .unwrap_err();
    assert_eq!(err.code(), Some("OOM"), "{err}");
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("0")
        .query(&mut other)
        .unwrap();
    assert!(!con.exists::<_, bool>("z").unwrap());
    let () = con.del("x").unwrap();
}

#[test]
fn info_keyspace_counts_each_database_s_keys_and_expiries() {
    let mut config = config(1);
    config.resp_listen = Some("127.0.0.1:0".parse().unwrap());
    let server = start_with(config);
    let mut con = resp_connect(&server, TENANT_A, TOKEN_A);
    let () = con.set("a", "1").unwrap();
    let () = con.set_ex("b", "2", 100).unwrap();
    let () = redis::cmd("SELECT").arg(3).query(&mut con).unwrap();
    let () = con.set("c", "3").unwrap();
    let keyspace: String = redis::cmd("INFO").arg("keyspace").query(&mut con).unwrap();
    assert_eq!(
        keyspace,
        "# Keyspace\r\ndb0:keys=2,expires=1,avg_ttl=0\r\ndb3:keys=1,expires=0,avg_ttl=0\r\n"
    );
    let memory: String = redis::cmd("INFO").arg("MEMORY").query(&mut con).unwrap();
    assert!(
        memory.starts_with("# Memory\r\nused_memory:") && !memory.contains("# Keyspace"),
        "{memory}"
    );
}

#[test]
fn a_function_flagged_allow_oom_writes_past_maxmemory_and_others_get_oom() {
    let server = resp_node();
    let mut con = resp_connect(&server, TENANT_A, TOKEN_A);
    let library = "#!lua name=oom
redis.register_function{function_name='allowed', callback=function(keys) return redis.call('SET', keys[1], '1') end, flags={'allow-oom'}}
redis.register_function('denied', function(keys) return redis.call('SET', keys[1], '1') end)";
    let _: String = redis::cmd("FUNCTION").arg("LOAD").arg(library).query(&mut con).unwrap();
    let _: String = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(1)
        .query(&mut con)
        .unwrap();
    let refused = redis::cmd("FCALL")
        .arg("denied")
        .arg(1)
        .arg("d")
        .query::<String>(&mut con);
    assert!(format!("{refused:?}").contains("OOM"), "{refused:?}");
    let allowed: String = redis::cmd("FCALL")
        .arg("allowed")
        .arg(1)
        .arg("a")
        .query(&mut con)
        .unwrap();
    assert_eq!(allowed, "OK");
    let _: String = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(0)
        .query(&mut con)
        .unwrap();
    assert_eq!(con.get::<_, Option<String>>("a").unwrap().as_deref(), Some("1"));
    assert_eq!(con.get::<_, Option<String>>("d").unwrap(), None);
}
