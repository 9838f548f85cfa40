//! Preemption of Lua calls on a node's core: a long call of one tenant is paused at the
//! end of each slice (its VM's hook yields it), so another tenant's commands are answered
//! while it runs on the same single core; a call may run long (Redis's semantics: bounded by
//! the node's CPU time limit and stopped by FUNCTION KILL), not cut at an instruction count.
//! With `Scheduling::preemption` off both tests fail: the call holds the core to its end
//! and is bounded by the VM's instruction budget.

use crate::common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use redis::Value;

/// Longest a test waits for a state that a working node reaches in milliseconds.
const PATIENCE: Duration = Duration::from_secs(30);

/// Tenant A's CPU the node must have charged while the call still runs: it is charged a
/// slice at a time only if the call is paused and resumed (several hundred slices).
const CPU_CHARGED_WHILE_RUNNING_NS: u64 = 100_000_000;

const LIBRARY: &str = r#"#!lua name=long
redis.register_function('spin', function() while true do end end)
redis.register_function('count', function(keys, args)
  local total = 0
  for i = 1, tonumber(args[1]) do
    local x = i * 3 + 1
    if x % 2 == 0 then total = total + x // 2 else total = total - (i % 5) end
  end
  return total
end)
"#;

fn node(preemption: bool) -> ferry_server::ServerHandle {
    let mut config = config(1);
    config.resp_listen = Some("127.0.0.1:0".parse().unwrap());
    // A long call is bounded by the node's CPU time limit, not by instructions.
    config.invoke_budget = ferry_server::config::MAX_INVOKE_BUDGET;
    config.scheduling.preemption = preemption;
    start_with(config)
}

fn tenant_cpu_ns(server: &ferry_server::ServerHandle, tenant: u32) -> u64 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let stats = runtime.block_on(async { client_a(server).await.stats().await.unwrap() });
    stats
        .iter()
        .find(|stat| stat.name == format!("tenant.{tenant}.cpu_ns"))
        .map_or(0, |stat| stat.value)
}

#[test]
fn a_tenants_commands_are_answered_while_another_tenants_long_lua_call_runs_on_the_one_core() {
    let server = node(true);
    let mut loader = resp_connect(&server, TENANT_A, TOKEN_A);
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(LIBRARY)
        .query(&mut loader)
        .unwrap();
    let cpu_before = tenant_cpu_ns(&server, TENANT_A);
    let mut runner = resp_connect(&server, TENANT_A, TOKEN_A);
    let running = std::thread::spawn(move || {
        redis::cmd("FCALL")
            .arg("spin")
            .arg(0)
            .query::<Value>(&mut runner)
            .map_or_else(|err| err.to_string(), |value| format!("{value:?}"))
    });
    // The call is running once the node has charged tenant A CPU for it a slice at a time.
    let waiting = Instant::now();
    while tenant_cpu_ns(&server, TENANT_A) < cpu_before + CPU_CHARGED_WHILE_RUNNING_NS {
        assert!(!running.is_finished(), "the call ended: {:?}", running.join());
        assert!(
            waiting.elapsed() < PATIENCE,
            "tenant A was never charged for its running call"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Tenant B is served on the same core while the call runs.
    let mut other = resp_connect(&server, TENANT_B, TOKEN_B);
    let answered = Arc::new(AtomicU64::new(0));
    for round in 1..=50i64 {
        let value: i64 = redis::cmd("INCR").arg("b").query(&mut other).unwrap();
        assert_eq!(value, round);
        answered.fetch_add(1, Ordering::Relaxed);
    }
    assert!(
        !running.is_finished(),
        "the call still runs after tenant B's 50 commands"
    );
    // It runs until stopped, as in Redis.
    let mut killer = resp_connect(&server, TENANT_A, TOKEN_A);
    let killed: String = redis::cmd("FUNCTION").arg("KILL").query(&mut killer).unwrap();
    assert_eq!(killed, "OK");
    let error = running.join().unwrap();
    assert!(error.contains("killed by user"), "{error}");
    assert_eq!(answered.load(Ordering::Relaxed), 50);
    server.shutdown();
}

/// More instructions than the VM's budget for a call with no slice: the node's CPU time
/// limit (here a minute) bounds it instead.
#[test]
fn a_lua_call_of_a_million_iterations_runs_to_its_end() {
    let server = node(true);
    let mut con = resp_connect(&server, TENANT_A, TOKEN_A);
    let _: String = redis::cmd("FUNCTION").arg("LOAD").arg(LIBRARY).query(&mut con).unwrap();
    const ITERATIONS: i64 = 1_000_000;
    let total: i64 = redis::cmd("FCALL")
        .arg("count")
        .arg(0)
        .arg(ITERATIONS)
        .query(&mut con)
        .unwrap();
    let expected: i64 = (1..=ITERATIONS)
        .map(|i| {
            let x = i * 3 + 1;
            if x % 2 == 0 {
                x / 2
            } else {
                -(i % 5)
            }
        })
        .sum();
    assert_eq!(total, expected);
    server.shutdown();
}
