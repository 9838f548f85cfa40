//! Multi-tenant fairness: tenants pinned to home cores with work stealing share the node's
//! CPU evenly when their demand is equal (the benchmark reports the real figures).

mod common;

use std::time::{Duration, Instant};

use common::*;
use ferry_client::Client;
use ferry_control::jain_index;
use ferry_func::builtins::traverse;

async fn load_graph(client: &Client) {
    for (key, value) in traverse::dataset(1000, 32, 1) {
        client.put(traverse::TABLE, &key, &value).await.unwrap();
    }
}

/// Keeps `concurrency` invocations of `compute_ns` per access in flight until `until`.
async fn keep_busy(client: Client, concurrency: u64, compute_ns: u64, until: Instant) -> u64 {
    let loops: Vec<_> = (0..concurrency)
        .map(|lane| {
            let client = client.clone();
            tokio::spawn(async move {
                let mut done = 0u64;
                let mut start = lane;
                while Instant::now() < until {
                    start = (start * 7 + 13) % 1000;
                    let args = traverse::TraverseArgs {
                        start,
                        depth: 2,
                        compute_ns,
                    }
                    .encode();
                    client.invoke_remote(traverse::NAME, args).await.unwrap();
                    done += 1;
                }
                done
            })
        })
        .collect();
    let mut total = 0;
    for lane in loops {
        total += lane.await.unwrap();
    }
    total
}

async fn cpu_ns(client: &Client, tenant: u32) -> u64 {
    let stats = client.stats().await.unwrap();
    stats
        .iter()
        .find(|s| s.name == format!("tenant.{tenant}.cpu_ns"))
        .unwrap()
        .value
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_equal_tenants_get_equal_shares_of_the_node() {
    let server = start(2);
    let a = client_a(&server).await;
    let b = client_b(&server).await;
    load_graph(&a).await;
    load_graph(&b).await;
    let (a_before, b_before) = (cpu_ns(&a, TENANT_A).await, cpu_ns(&b, TENANT_B).await);
    let until = Instant::now() + Duration::from_millis(800);
    let (done_a, done_b) = tokio::join!(
        keep_busy(a.clone(), 8, 20_000, until),
        keep_busy(b.clone(), 8, 20_000, until)
    );
    let share_a = (cpu_ns(&a, TENANT_A).await - a_before) as f64;
    let share_b = (cpu_ns(&b, TENANT_B).await - b_before) as f64;
    assert!(done_a > 0 && done_b > 0);
    let index = jain_index(&[share_a, share_b]);
    assert!(
        index >= 0.9,
        "Jain index {index:.3} of storage CPU {share_a:.0} vs {share_b:.0} ns"
    );
    server.shutdown();
}
