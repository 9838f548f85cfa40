//! The RESP front end through a real Redis client crate (redis-rs): every supported
//! command, errors for the rest, AUTH and tenant isolation, pipelining, and what a
//! well-behaved client never sends.

use crate::common;

use std::io::{Read, Write};
use std::time::Duration;

use common::*;
use redis::{Commands, RedisResult};

fn node() -> ferry_server::ServerHandle {
    let mut config = config(1);
    config.resp_listen = Some("127.0.0.1:0".parse().unwrap());
    // Short, so a garbage connection that never authenticates is closed quickly.
    config.hello_timeout = Duration::from_secs(1);
    start_with(config)
}

fn connect(server: &ferry_server::ServerHandle, tenant: u32, token: &str) -> redis::Connection {
    let addr = server.resp_addr().unwrap();
    let url = format!("redis://{tenant}:{token}@{addr}/");
    let client = redis::Client::open(url).unwrap();
    client.get_connection_with_timeout(Duration::from_secs(10)).unwrap()
}

fn error_text<T: std::fmt::Debug>(result: RedisResult<T>) -> String {
    let err = result.expect_err("an error reply");
    format!("{} {}", err.code().unwrap_or(""), err.detail().unwrap_or(""))
}

#[test]
fn every_supported_command_works_and_the_rest_are_refused() {
    let server = node();
    let mut con = connect(&server, TENANT_A, TOKEN_A);
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
    let echo: String = redis::cmd("ECHO").arg("hi").query(&mut con).unwrap();
    assert_eq!(echo, "hi");

    let () = con.set("k", "v1").unwrap();
    assert_eq!(con.get::<_, String>("k").unwrap(), "v1");
    assert_eq!(con.get::<_, Option<String>>("missing").unwrap(), None);
    // NX on an existing key does nothing; XX on a missing one neither; GET returns the old.
    let nx: Option<String> = redis::cmd("SET").arg("k").arg("v2").arg("NX").query(&mut con).unwrap();
    assert_eq!(nx, None);
    let xx: Option<String> = redis::cmd("SET")
        .arg("nope")
        .arg("v")
        .arg("XX")
        .query(&mut con)
        .unwrap();
    assert_eq!(xx, None);
    let old: Option<String> = redis::cmd("SET").arg("k").arg("v3").arg("GET").query(&mut con).unwrap();
    assert_eq!(old.as_deref(), Some("v1"));
    assert_eq!(con.get::<_, String>("k").unwrap(), "v3");
    let () = redis::cmd("SET")
        .arg("k")
        .arg("v3")
        .arg("EX")
        .arg(100)
        .query(&mut con)
        .unwrap();
    let ttl: i64 = con.ttl("k").unwrap();
    assert!((99..=100).contains(&ttl), "{ttl}");

    let () = con.mset(&[("a", "1"), ("b", "2")]).unwrap();
    let values: Vec<Option<String>> = con.mget(&["a", "b", "c"]).unwrap();
    assert_eq!(values, vec![Some("1".into()), Some("2".into()), None]);
    assert_eq!(con.exists::<_, u32>(&["a", "b", "c"]).unwrap(), 2);
    assert_eq!(con.del::<_, u32>(&["a", "c"]).unwrap(), 1);
    assert_eq!(con.exists::<_, u32>("a").unwrap(), 0);

    assert_eq!(con.incr::<_, _, i64>("n", 1).unwrap(), 1);
    assert_eq!(con.incr::<_, _, i64>("n", 41).unwrap(), 42);
    assert_eq!(con.decr::<_, _, i64>("n", 2).unwrap(), 40);
    let decr: i64 = redis::cmd("DECR").arg("n").query(&mut con).unwrap();
    assert_eq!(decr, 39);
    let not_a_number = error_text(con.incr::<_, _, i64>("k", 1));
    assert!(not_a_number.contains("not an integer"), "{not_a_number}");

    // SELECT picks a table of its own.
    let () = redis::cmd("SELECT").arg(3).query(&mut con).unwrap();
    assert_eq!(con.get::<_, Option<String>>("k").unwrap(), None);
    let () = redis::cmd("SELECT").arg(0).query(&mut con).unwrap();
    assert_eq!(con.get::<_, String>("k").unwrap(), "v3");
    assert!(error_text(redis::cmd("SELECT").arg(99999).query::<()>(&mut con)).contains("out of range"));

    let count: i64 = redis::cmd("COMMAND").arg("COUNT").query(&mut con).unwrap();
    assert!(count >= 15);
    // COMMAND INFO from the command table, in Redis's shape: name, arity, flags, first key,
    // last key, step; nil for a command not served.
    let info: redis::Value = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("mset")
        .arg("nosuch")
        .query(&mut con)
        .unwrap();
    let redis::Value::Array(entries) = info else {
        panic!("{info:?}")
    };
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[1], redis::Value::Nil);
    let redis::Value::Array(mset) = &entries[0] else {
        panic!("{entries:?}")
    };
    assert_eq!(mset[1], redis::Value::Int(-3));
    assert_eq!(
        &mset[3..],
        &[redis::Value::Int(1), redis::Value::Int(-1), redis::Value::Int(2)]
    );
    let info: String = redis::cmd("INFO").query(&mut con).unwrap();
    assert!(info.contains("redis_version"), "{info}");
    let () = redis::cmd("CLIENT").arg("SETNAME").arg("me").query(&mut con).unwrap();

    let unknown = error_text(redis::cmd("BGREWRITEAOF").query::<()>(&mut con));
    assert!(unknown.contains("unknown command 'BGREWRITEAOF'"), "{unknown}");
    let arity = error_text(redis::cmd("GET").query::<()>(&mut con));
    assert!(arity.contains("wrong number of arguments for 'get'"), "{arity}");
}

#[test]
fn auth_maps_users_to_tenants_and_tenants_stay_apart() {
    let server = node();
    let addr = server.resp_addr().unwrap();
    // Nothing before AUTH.
    let anonymous = redis::Client::open(format!("redis://{addr}/")).unwrap();
    let mut con = anonymous.get_connection().unwrap();
    let refused = error_text(con.get::<_, Option<String>>("k"));
    assert!(refused.contains("NOAUTH"), "{refused}");
    let wrong = error_text(redis::cmd("AUTH").arg("1").arg("nope").query::<()>(&mut con));
    assert!(wrong.contains("WRONGPASS"), "{wrong}");

    let mut a = connect(&server, TENANT_A, TOKEN_A);
    let mut b = connect(&server, TENANT_B, TOKEN_B);
    let () = a.set("shared", "from a").unwrap();
    assert_eq!(b.get::<_, Option<String>>("shared").unwrap(), None);
    let () = b.set("shared", "from b").unwrap();
    assert_eq!(a.get::<_, String>("shared").unwrap(), "from a");
    // The same data through the ferry protocol: database 0 is the table `db0`.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let seen = runtime.block_on(async {
        let client = client_a(&server).await;
        client.get("db0", b"shared").await.unwrap().unwrap().value
    });
    assert_eq!(&seen[..], b"from a");
}

#[test]
fn a_pipeline_of_increments_applies_each_once_in_order() {
    let server = node();
    let mut con = connect(&server, TENANT_A, TOKEN_A);
    let mut pipe = redis::pipe();
    for _ in 0..1000 {
        pipe.incr("counter", 1);
    }
    let values: Vec<i64> = pipe.query(&mut con).unwrap();
    assert_eq!(values, (1..=1000).collect::<Vec<i64>>());
}

/// Raw bytes: a reply, then `None` once the node closed the connection.
fn exchange(addr: std::net::SocketAddr, input: &[u8]) -> (String, bool) {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream.write_all(input).unwrap();
    let mut reply = Vec::new();
    let mut chunk = [0u8; 4096];
    let closed = loop {
        match stream.read(&mut chunk) {
            Ok(0) => break true,
            Ok(n) => {
                reply.extend_from_slice(&chunk[..n]);
                if reply.ends_with(b"\r\n") && reply.len() > 2 {
                    // Give a close a moment to arrive after the last reply.
                    stream.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
                }
            }
            Err(_) => break false,
        }
    };
    (String::from_utf8_lossy(&reply).into_owned(), closed)
}

#[test]
fn garbage_and_truncated_resp_cost_only_their_connection() {
    let server = node();
    let addr = server.resp_addr().unwrap();
    let auth = format!("AUTH {TENANT_A} {TOKEN_A}\r\n");
    for (input, expect) in [
        (format!("{auth}*1\r\n+PING\r\n"), "Protocol error"),
        (format!("{auth}*99999999999\r\n"), "exceeds"),
        (format!("{auth}*1\r\n$99999999999\r\n"), "exceeds"),
        (format!("{auth}*1\r\n$2\r\nabcd\r\n"), "CRLF"),
        (format!("{auth}SET \"unbalanced\r\n"), "quotes"),
    ] {
        let (reply, closed) = exchange(addr, input.as_bytes());
        assert!(
            reply.starts_with("+OK\r\n-ERR") && reply.contains(expect),
            "{input:?}: {reply:?}"
        );
        assert!(closed, "{input:?}: the connection must close after a protocol error");
    }
    // Truncated: half a command, then gone; the node carries on.
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .write_all(format!("{auth}*3\r\n$3\r\nSET\r\n$4\r\nhalf").as_bytes())
        .unwrap();
    drop(stream);
    // Random bytes: error replies, a close, or (with no line end) the hello timeout.
    let mut state = 0x5eed_u64;
    for round in 0..8 {
        let garbage: Vec<u8> = (0..64 + round * 31)
            .map(|_| {
                state = ferry_func::args::mix64(state);
                state as u8
            })
            .collect();
        let _ = exchange(addr, &garbage);
    }
    // HELLO 3 switches to RESP3: the reply is a map.
    let (reply, _) = exchange(
        addr,
        format!("HELLO 3 AUTH {TENANT_A} {TOKEN_A}\r\nQUIT\r\n").as_bytes(),
    );
    assert!(reply.starts_with("%7\r\n"), "{reply:?}");
    let mut con = connect(&server, TENANT_A, TOKEN_A);
    assert_eq!(con.get::<_, Option<String>>("half").unwrap(), None);
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
}

#[test]
fn a_cluster_sends_redis_clients_to_the_owner_and_describes_its_slots() {
    use ferry_cluster::ClusterMap;
    // Bound first, so the map names ports the nodes already hold.
    let listeners: Vec<_> = (0..2)
        .map(|_| ferry_server::Listeners::loopback(true).unwrap())
        .collect();
    let addrs: Vec<String> = listeners.iter().map(|bound| bound.addr().to_string()).collect();
    let mut nodes = ClusterMap::even(&addrs).unwrap().nodes().to_vec();
    for (node, bound) in nodes.iter_mut().zip(&listeners) {
        node.resp = Some(bound.resp_addr().unwrap().to_string());
    }
    let map = ClusterMap::new(nodes).unwrap();
    let servers: Vec<_> = map
        .nodes()
        .iter()
        .zip(listeners)
        .map(|(node, listeners)| {
            let mut config = config(1);
            config.cluster = Some(ferry_server::routing::ClusterRole::fixed(map.clone(), node.id.clone()));
            ferry_server::start_on(config, registry(), listeners).expect("test node starts")
        })
        .collect();
    let mut s1 = connect(&servers[0], TENANT_A, TOKEN_A);
    // hello → slot 866 (s1), foo → slot 12182 (s2).
    let () = s1.set("hello", "here").unwrap();
    let err = s1.set::<_, _, ()>("foo", "there").unwrap_err();
    assert_eq!(err.kind(), redis::ErrorKind::Moved, "{err}");
    let (addr, slot) = err.redirect_node().unwrap();
    assert_eq!((addr, slot), (map.nodes()[1].resp.as_deref().unwrap(), 12182));
    let spread = error_text(s1.mget::<_, Vec<Option<String>>>(&["hello", "foo"]));
    assert!(spread.contains("CROSSSLOT"), "{spread}");
    // Following the redirection works.
    let mut s2 = connect(&servers[1], TENANT_A, TOKEN_A);
    let () = s2.set("foo", "there").unwrap();
    // CLUSTER SLOTS: each node's range with its RESP address and id.
    let slots: Vec<(i64, i64, (String, i64, String))> = redis::cmd("CLUSTER").arg("SLOTS").query(&mut s1).unwrap();
    assert_eq!(slots.len(), 2);
    assert_eq!((slots[0].0, slots[0].1, slots[0].2 .2.as_str()), (0, 8191, "s1"));
    assert_eq!((slots[1].0, slots[1].1), (8192, 16383));
    let resp2 = map.nodes()[1].resp.clone().unwrap();
    assert_eq!(format!("{}:{}", slots[1].2 .0, slots[1].2 .1), resp2);
    let shards: redis::Value = redis::cmd("CLUSTER").arg("SHARDS").query(&mut s1).unwrap();
    assert!(
        matches!(&shards, redis::Value::Array(items) if items.len() == 2),
        "{shards:?}"
    );
}

#[test]
fn hashes_lists_sets_sorted_sets_and_expiry_work_over_resp() {
    let server = node();
    let mut con = connect(&server, TENANT_A, TOKEN_A);
    let added: i64 = redis::cmd("HSET")
        .arg("h")
        .arg("f1")
        .arg("1")
        .arg("f2")
        .arg("2")
        .query(&mut con)
        .unwrap();
    assert_eq!(added, 2);
    assert_eq!(con.hget::<_, _, String>("h", "f2").unwrap(), "2");
    assert_eq!(con.hincr::<_, _, _, i64>("h", "f1", 10).unwrap(), 11);
    let all: Vec<(String, String)> = con.hgetall("h").unwrap();
    assert_eq!(all, vec![("f1".into(), "11".into()), ("f2".into(), "2".into())]);
    assert_eq!(con.hdel::<_, _, i64>("h", &["f1", "f2"]).unwrap(), 2);
    assert_eq!(con.exists::<_, i64>("h").unwrap(), 0, "an emptied hash is deleted");

    assert_eq!(con.rpush::<_, _, i64>("l", &["a", "b", "c"]).unwrap(), 3);
    assert_eq!(con.lpush::<_, _, i64>("l", "z").unwrap(), 4);
    assert_eq!(con.lrange::<_, Vec<String>>("l", 0, -1).unwrap(), ["z", "a", "b", "c"]);
    assert_eq!(con.rpop::<_, Option<String>>("l", None).unwrap().as_deref(), Some("c"));

    assert_eq!(con.sadd::<_, _, i64>("s", &["x", "y", "x"]).unwrap(), 2);
    assert!(con.sismember::<_, _, bool>("s", "y").unwrap());
    assert_eq!(con.scard::<_, i64>("s").unwrap(), 2);

    assert_eq!(
        con.zadd_multiple::<_, _, _, i64>("z", &[(2.5, "b"), (1.0, "a")])
            .unwrap(),
        2
    );
    let ranked: Vec<(String, f64)> = con.zrange_withscores("z", 0, -1).unwrap();
    assert_eq!(ranked, vec![("a".into(), 1.0), ("b".into(), 2.5)]);
    assert_eq!(con.zrank::<_, _, Option<i64>>("z", "b").unwrap(), Some(1));

    let wrong = error_text(con.lpush::<_, _, i64>("s", "v"));
    assert!(wrong.starts_with("WRONGTYPE"), "{wrong}");
    let kind: String = redis::cmd("TYPE").arg("z").query(&mut con).unwrap();
    assert_eq!(kind, "zset");

    // An expired key reads as absent, whatever its type.
    let () = redis::cmd("PEXPIRE")
        .arg("s")
        .arg(1)
        .query::<i64>(&mut con)
        .map(|_| ())
        .unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(con.exists::<_, i64>("s").unwrap(), 0);
    assert_eq!(con.ttl::<_, i64>("s").unwrap(), -2);
    assert_eq!(con.ttl::<_, i64>("z").unwrap(), -1);
}

#[test]
fn a_default_tenant_serves_connections_that_send_no_auth() {
    let mut config = config(1);
    config.resp_listen = Some("127.0.0.1:0".parse().unwrap());
    config.resp_default_tenant = Some(ferry_proto::TenantId(TENANT_A));
    let server = start_with(config);
    let addr = server.resp_addr().unwrap();
    let client = redis::Client::open(format!("redis://{addr}/")).unwrap();
    let mut anonymous = client.get_connection_with_timeout(Duration::from_secs(10)).unwrap();
    let () = anonymous.set("shared", "from-default").unwrap();
    // It is tenant A's data, not another tenant's.
    let mut a = connect(&server, TENANT_A, TOKEN_A);
    assert_eq!(a.get::<_, String>("shared").unwrap(), "from-default");
    let mut b = connect(&server, TENANT_B, TOKEN_B);
    assert_eq!(b.get::<_, Option<String>>("shared").unwrap(), None);
    // AUTH on the anonymous connection still switches tenants.
    let () = redis::cmd("AUTH")
        .arg(TENANT_B.to_string())
        .arg(TOKEN_B)
        .query(&mut anonymous)
        .unwrap();
    assert_eq!(anonymous.get::<_, Option<String>>("shared").unwrap(), None);

    // Without one, a connection that sends no AUTH is refused as before.
    let server = node();
    let addr = server.resp_addr().unwrap();
    let client = redis::Client::open(format!("redis://{addr}/")).unwrap();
    let mut anonymous = client.get_connection_with_timeout(Duration::from_secs(10)).unwrap();
    assert!(error_text(anonymous.get::<_, Option<String>>("shared")).contains("NOAUTH"));
}

#[test]
fn a_default_tenant_must_be_one_of_the_nodes_tenants() {
    let mut config = config(1);
    config.resp_default_tenant = Some(ferry_proto::TenantId(9_999));
    let err = config.validate().unwrap_err().to_string();
    assert!(err.contains("default tenant 9999"), "{err}");
}

#[test]
fn resp3_gives_scores_as_doubles_and_withscores_as_pairs_like_redis() {
    let server = node();
    let addr = server.resp_addr().unwrap();
    let session = |hello: &str| {
        let input = format!(
            "{hello}DEL z\r\nZADD z 1.5 a 2 b\r\nZSCORE z a\r\nZRANGE z 0 -1 WITHSCORES\r\nZPOPMIN z\r\nQUIT\r\n"
        );
        exchange(addr, input.as_bytes()).0
    };
    let resp3 = session(&format!("HELLO 3 AUTH {TENANT_A} {TOKEN_A}\r\n"));
    let after_hello = &resp3[resp3.find(":0\r\n:2\r\n").expect("DEL and ZADD replies")..];
    assert_eq!(
        after_hello,
        ":0\r\n:2\r\n,1.5\r\n*2\r\n*2\r\n$1\r\na\r\n,1.5\r\n*2\r\n$1\r\nb\r\n,2\r\n*2\r\n$1\r\na\r\n,1.5\r\n+OK\r\n"
    );
    let resp2 = session(&format!("AUTH {TENANT_A} {TOKEN_A}\r\n"));
    assert_eq!(
        resp2,
        // The first session left `b`: DEL removes the key.
        "+OK\r\n:1\r\n:2\r\n$3\r\n1.5\r\n*4\r\n$1\r\na\r\n$3\r\n1.5\r\n$1\r\nb\r\n$1\r\n2\r\n*2\r\n$1\r\na\r\n$3\r\n1.5\r\n+OK\r\n"
    );
}
