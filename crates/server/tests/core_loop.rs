//! A core loop per CPU: a connection starts on its tenant's home core (chosen from its
//! first bytes: the hello's tenant, the AUTH's user), and its data commands and Lua calls
//! run there, on the thread that read them, with no hand-off to another thread
//! (`/metrics`: `tasks_handed` stays 0). A native function, which could hold its thread,
//! runs on the worker beside the core instead. A RESP connection placed on another core
//! (it signed in only later) runs its commands on that core, in its tenant's lane there.

use crate::common;

use std::time::Duration;

use bytes::Bytes;
use common::*;

const LIBRARY: &str = r#"#!lua name=corelib
redis.register_function('bump', function(keys)
  return redis.call('INCR', keys[1])
end)
"#;

/// Commands of each kind each connection sends.
const ROUNDS: usize = 20;

async fn scrape(addr: std::net::SocketAddr) -> String {
    crate::metrics::http(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await
}

fn series(body: &str, name: &str, worker: usize) -> u64 {
    let prefix = format!("ferry_worker_{name}_total{{worker=\"{worker}\"}} ");
    body.lines()
        .find_map(|line| line.strip_prefix(&prefix)?.parse().ok())
        .unwrap_or_else(|| panic!("no {prefix} in\n{body}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_and_lua_calls_run_on_their_tenants_core_without_a_hand_off() {
    // Two cores: tenant A is homed on core 0, tenant B on core 1 (native workers 2 and 3).
    let mut config = config(2);
    config.resp_listen = Some("127.0.0.1:0".parse().unwrap());
    config.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    let server = start_with(config);
    let metrics = server.metrics_addr().unwrap();

    // Over RESP, signed in as B by the connection's first command.
    let addr = server.resp_addr().unwrap();
    let resp = tokio::task::spawn_blocking(move || {
        let client = redis::Client::open(format!("redis://{TENANT_B}:{TOKEN_B}@{addr}/")).unwrap();
        let mut conn = client.get_connection_with_timeout(Duration::from_secs(10)).unwrap();
        let _: String = redis::cmd("FUNCTION")
            .arg("LOAD")
            .arg(LIBRARY)
            .query(&mut conn)
            .unwrap();
        for round in 0..ROUNDS {
            let _: () = redis::cmd("SET")
                .arg(format!("k{round}"))
                .arg("v")
                .query(&mut conn)
                .unwrap();
            let value: String = redis::cmd("GET").arg(format!("k{round}")).query(&mut conn).unwrap();
            assert_eq!(value, "v");
            let count: i64 = redis::cmd("FCALL")
                .arg("bump")
                .arg(1)
                .arg("counter")
                .query(&mut conn)
                .unwrap();
            assert_eq!(count, round as i64 + 1);
        }
    });
    resp.await.unwrap();

    // Over the ferry protocol, said hello as B.
    let b = client_b(&server).await;
    for round in 0..ROUNDS as u32 {
        b.put("t", &round.to_le_bytes(), b"value").await.unwrap();
        assert!(b.get("t", &round.to_le_bytes()).await.unwrap().is_some());
    }
    // A native function: on the worker beside B's core, not on the core.
    b.invoke_remote("test.write", Bytes::from_static(b"native"))
        .await
        .unwrap();

    let body = scrape(metrics).await;
    for worker in 0..4 {
        assert_eq!(
            series(&body, "tasks_handed", worker),
            u64::from(worker == 3),
            "worker {worker}: only the native call crosses threads\n{body}"
        );
    }
    // B's core ran every command the connections read (and its own expiry cycles), most
    // of them inline (one that arrives while the core's worker loop has work waits in
    // B's lane on the same thread); A's core, with nothing of A's, ran nothing.
    let commands = (1 + 3 * ROUNDS + 2 * ROUNDS) as u64;
    let ran = series(&body, "tasks_inline", 1) + series(&body, "tasks_own", 1);
    assert!(ran >= commands, "{ran} tasks for {commands} commands\n{body}");
    assert!(series(&body, "tasks_inline", 1) > 0, "{body}");
    assert_eq!(
        series(&body, "tasks_inline", 0) + series(&body, "tasks_own", 0),
        0,
        "{body}"
    );
    assert_eq!(series(&body, "tasks_own", 3), 1, "{body}");
    server.shutdown();
}

/// Sends one RESP command on `stream` and reads its (short, single-packet) reply.
async fn ask(stream: &mut tokio::net::TcpStream, words: &[&str]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut command = format!("*{}\r\n", words.len());
    for word in words {
        command.push_str(&format!("${}\r\n{word}\r\n", word.len()));
    }
    stream.write_all(command.as_bytes()).await.unwrap();
    let mut reply = vec![0u8; 256];
    let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut reply))
        .await
        .expect("a reply")
        .unwrap();
    String::from_utf8_lossy(&reply[..n]).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_signs_in_later_runs_its_commands_on_its_own_core() {
    // Two cores: tenant A homed on core 0, tenant B on core 1; no default RESP tenant.
    let mut config = config(2);
    config.resp_listen = Some("127.0.0.1:0".parse().unwrap());
    config.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    let server = start_with(config);
    let metrics = server.metrics_addr().unwrap();

    // Its first command names no tenant (and is refused: nobody signed in): the connection
    // goes to the first core in turn, core 0, and then signs in as B, whose home is core 1.
    let mut stream = tokio::net::TcpStream::connect(server.resp_addr().unwrap())
        .await
        .unwrap();
    assert!(ask(&mut stream, &["PING"]).await.starts_with("-NOAUTH"));
    let b = TENANT_B.to_string();
    assert_eq!(ask(&mut stream, &["AUTH", &b, TOKEN_B]).await, "+OK\r\n");
    for round in 0..ROUNDS {
        let key = format!("late{round}");
        assert_eq!(ask(&mut stream, &["SET", &key, "v"]).await, "+OK\r\n");
        assert_eq!(ask(&mut stream, &["GET", &key]).await, "$1\r\nv\r\n");
    }

    let body = scrape(metrics).await;
    for core in 0..2 {
        assert_eq!(
            series(&body, "tasks_handed", core),
            0,
            "core {core}: B's commands were handed across threads\n{body}"
        );
    }
    // Core 0 (A's home; A has no data, so no expiry of its own) ran B's commands, in
    // turns of B's lane there.
    let ran = series(&body, "tasks_inline", 0) + series(&body, "tasks_own", 0);
    assert!(ran >= 2 * ROUNDS as u64, "{ran} turns on core 0\n{body}");
    server.shutdown();
}
