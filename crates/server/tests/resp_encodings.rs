//! Collections in their compact and large encodings over RESP: OBJECT ENCODING answers
//! what holds each, a tenant's CONFIG SET of the thresholds moves its own collections
//! (and not another tenant's), and OBJECT's other subcommands answer as Redis's do.

use crate::common::{resp_connect, resp_node, TENANT_A, TENANT_B, TOKEN_A, TOKEN_B};

fn encoding(con: &mut redis::Connection, key: &str) -> Option<String> {
    redis::cmd("OBJECT").arg("ENCODING").arg(key).query(con).unwrap()
}

fn config_set(con: &mut redis::Connection, name: &str, value: &str) {
    let () = redis::cmd("CONFIG").arg("SET").arg(name).arg(value).query(con).unwrap();
}

#[test]
fn collections_leave_their_compact_encoding_at_the_tenant_s_thresholds() {
    let server = resp_node();
    let mut con = resp_connect(&server, TENANT_A, TOKEN_A);
    let mut other = resp_connect(&server, TENANT_B, TOKEN_B);
    config_set(&mut con, "hash-max-listpack-entries", "4");
    config_set(&mut con, "set-max-intset-entries", "3");
    config_set(&mut con, "set-max-listpack-entries", "4");
    config_set(&mut con, "zset-max-ziplist-entries", "2");
    config_set(&mut con, "list-max-listpack-size", "3");
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("zset-max-listpack-entries")
        .query(&mut con)
        .unwrap();
    assert_eq!(got, ["zset-max-listpack-entries", "2"]);
    let theirs: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("zset-max-listpack-entries")
        .query(&mut other)
        .unwrap();
    assert_eq!(
        theirs,
        ["zset-max-listpack-entries", "128"],
        "another tenant's own value"
    );

    for i in 0..4 {
        let _: i64 = redis::cmd("HSET")
            .arg("h")
            .arg(format!("f{i}"))
            .arg(i)
            .query(&mut con)
            .unwrap();
    }
    assert_eq!(encoding(&mut con, "h").as_deref(), Some("listpack"));
    let _: i64 = redis::cmd("HSET").arg("h").arg("f4").arg(4).query(&mut con).unwrap();
    assert_eq!(encoding(&mut con, "h").as_deref(), Some("hashtable"));

    let _: i64 = redis::cmd("SADD")
        .arg("s")
        .arg(1)
        .arg(2)
        .arg(3)
        .query(&mut con)
        .unwrap();
    assert_eq!(encoding(&mut con, "s").as_deref(), Some("intset"));
    let _: i64 = redis::cmd("SADD").arg("s").arg("text").query(&mut con).unwrap();
    assert_eq!(encoding(&mut con, "s").as_deref(), Some("listpack"));
    let _: i64 = redis::cmd("SADD").arg("s").arg("more").query(&mut con).unwrap();
    assert_eq!(encoding(&mut con, "s").as_deref(), Some("hashtable"));

    let _: i64 = redis::cmd("ZADD")
        .arg("z")
        .arg(1)
        .arg("a")
        .arg(2)
        .arg("b")
        .query(&mut con)
        .unwrap();
    assert_eq!(encoding(&mut con, "z").as_deref(), Some("listpack"));
    let _: i64 = redis::cmd("ZADD").arg("z").arg(3).arg("c").query(&mut con).unwrap();
    assert_eq!(encoding(&mut con, "z").as_deref(), Some("skiplist"));
    let ranked: i64 = redis::cmd("ZRANK").arg("z").arg("c").query(&mut con).unwrap();
    assert_eq!(ranked, 2);

    let _: i64 = redis::cmd("RPUSH")
        .arg("l")
        .arg("a")
        .arg("b")
        .arg("c")
        .query(&mut con)
        .unwrap();
    assert_eq!(encoding(&mut con, "l").as_deref(), Some("listpack"));
    let _: i64 = redis::cmd("RPUSH").arg("l").arg("d").query(&mut con).unwrap();
    assert_eq!(encoding(&mut con, "l").as_deref(), Some("quicklist"));
    let items: Vec<String> = redis::cmd("LRANGE").arg("l").arg(0).arg(-1).query(&mut con).unwrap();
    assert_eq!(items, ["a", "b", "c", "d"]);
    // Shrunk to one node at half the limit, a list is a listpack again (Redis 7.2).
    let _: Vec<String> = redis::cmd("RPOP").arg("l").arg(3).query(&mut con).unwrap();
    assert_eq!(encoding(&mut con, "l").as_deref(), Some("listpack"));

    // The other tenant's collections keep Redis's defaults.
    for i in 0..10 {
        let _: i64 = redis::cmd("HSET")
            .arg("h")
            .arg(format!("f{i}"))
            .arg(i)
            .query(&mut other)
            .unwrap();
    }
    assert_eq!(encoding(&mut other, "h").as_deref(), Some("listpack"));

    // Refused values (Redis takes any 32-bit integer here) change nothing.
    let refused = redis::cmd("CONFIG")
        .arg("SET")
        .arg("list-max-listpack-size")
        .arg("4294967296")
        .query::<()>(&mut con);
    assert!(refused.is_err());
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("list-max-listpack-size")
        .query(&mut con)
        .unwrap();
    assert_eq!(got, ["list-max-listpack-size", "3"]);
}

#[test]
fn object_answers_as_redis_does() {
    let server = resp_node();
    let mut con = resp_connect(&server, TENANT_A, TOKEN_A);
    let () = redis::cmd("SET").arg("k").arg("v").query(&mut con).unwrap();
    assert_eq!(encoding(&mut con, "k").as_deref(), Some("raw"));
    assert_eq!(encoding(&mut con, "absent"), None);
    let idle: i64 = redis::cmd("OBJECT").arg("IDLETIME").arg("k").query(&mut con).unwrap();
    assert!((0..5).contains(&idle), "{idle}");
    let refcount: i64 = redis::cmd("OBJECT").arg("REFCOUNT").arg("k").query(&mut con).unwrap();
    assert_eq!(refcount, 1);
    let err = redis::cmd("OBJECT")
        .arg("FREQ")
        .arg("k")
        .query::<i64>(&mut con)
        .unwrap_err();
    assert!(
        err.to_string().contains("An LFU maxmemory policy is not selected"),
        "{err}"
    );
    config_set(&mut con, "maxmemory-policy", "allkeys-lfu");
    let freq: i64 = redis::cmd("OBJECT").arg("FREQ").arg("k").query(&mut con).unwrap();
    assert!(freq >= 0, "{freq}");
    let err = redis::cmd("OBJECT")
        .arg("IDLETIME")
        .arg("k")
        .query::<i64>(&mut con)
        .unwrap_err();
    assert!(err.to_string().contains("An LFU maxmemory policy is selected"), "{err}");
    let help: Vec<String> = redis::cmd("OBJECT").arg("HELP").query(&mut con).unwrap();
    assert!(help.len() > 4 && help[0].starts_with("OBJECT <subcommand>"), "{help:?}");
    let err = redis::cmd("OBJECT")
        .arg("NOPE")
        .arg("k")
        .query::<()>(&mut con)
        .unwrap_err();
    assert!(err.to_string().contains("Try OBJECT HELP"), "{err}");
}
