//! Storage functions over a two-node cluster on loopback: an invocation starts on the node
//! serving its routing key and, when it reaches the other node's keys, is handed back and
//! finished by the client over both nodes. Results must equal a single node's; a snapshot
//! spanning both nodes must be consistent while transfers run, and must never see a later
//! write on one node without an earlier one on the other; an invocation writing on both
//! nodes is refused with nothing applied.

use crate::common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use common::*;
use ferry_client::{Client, ClientConfig, ClusterClient, Invocation};
use ferry_cluster::ClusterMap;
use ferry_func::builtins::{aggregate, auth, social, traverse, ycsbt};
use ferry_proto::Status;

const GRAPH_NODES: u64 = 300;
const ACCOUNTS: u64 = 32;
const SOCIAL_VERTICES: u64 = 40;

async fn cluster_client(map: &ClusterMap) -> ClusterClient {
    let mut config = ClientConfig::new("", ferry_proto::TenantId(TENANT_A), TOKEN_A);
    config.registry = registry();
    config.request_timeout = std::time::Duration::from_secs(20);
    ClusterClient::connect(map.clone(), config).await.unwrap()
}

async fn direct(addr: &str) -> Client {
    let mut config = ClientConfig::new(addr, ferry_proto::TenantId(TENANT_A), TOKEN_A);
    config.registry = registry();
    Client::connect(config).await.unwrap()
}

/// Loads the graph, the metrics samples and the accounts through `put`.
async fn load<F, Fut>(put: F)
where
    F: Fn(&'static str, Bytes, Bytes) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for (key, value) in traverse::dataset(GRAPH_NODES, 64, 7) {
        put(traverse::TABLE, key, value).await;
    }
    for (key, value) in aggregate::dataset(200, 16, 7) {
        put(aggregate::TABLE, key, value).await;
    }
    for (key, value) in ycsbt::dataset(ACCOUNTS, 16, 7) {
        put(ycsbt::TABLE, key, value).await;
    }
    for (table, key, value) in social::dataset(SOCIAL_VERTICES, 7) {
        put(table, key, value).await;
    }
    for user in auth::dataset(SOCIAL_VERTICES, auth::DEFAULT_LOG_N, 7) {
        let (key, value) = user.unwrap();
        put(auth::TABLE, key, value).await;
    }
}

/// The social application's requests for vertex `v`: (function, arguments).
fn social_requests(v: u64) -> [(&'static str, Bytes); 4] {
    let args = |k| {
        social::VertexArgs {
            vertex: v,
            k,
            compute_ns: 0,
        }
        .encode()
    };
    let check = auth::AuthArgs {
        user: auth::username(v),
        password: auth::password(v),
    };
    [
        (social::AGGR_V, args(0)),
        (social::TOP_K, args(5)),
        (social::AGGR_S, args(0)),
        (auth::NAME, check.encode()),
    ]
}

/// Two nodes with every data set loaded through a cluster client.
async fn loaded_cluster() -> (Vec<ferry_server::ServerHandle>, ClusterMap, ClusterClient) {
    let (servers, map) = two_nodes();
    let cluster = cluster_client(&map).await;
    load(|table, key, value| {
        let cluster = cluster.clone();
        async move {
            cluster.put(table, &key, &value).await.unwrap();
        }
    })
    .await;
    (servers, map, cluster)
}

async fn handoffs(map: &ClusterMap) -> u64 {
    let mut total = 0;
    for node in map.nodes() {
        let stats = direct(&node.addr).await.stats().await.unwrap();
        total += stats
            .iter()
            .find(|entry| entry.name == format!("tenant.{TENANT_A}.handoffs"))
            .map_or(0, |entry| entry.value);
    }
    total
}

fn walk(start: u64) -> Bytes {
    traverse::TraverseArgs {
        start,
        depth: 12,
        compute_ns: 0,
    }
    .encode()
}

fn transfer(from: u64, to: u64) -> Bytes {
    ycsbt::YcsbtArgs::Transfer {
        from,
        to,
        amount: 1,
        compute_ns: 0,
    }
    .encode()
}

fn account_key(id: u64) -> Bytes {
    traverse::key(id)
}

async fn total_balance(cluster: &ClusterClient) -> u64 {
    let mut sum = 0;
    for id in 0..ACCOUNTS {
        let value = cluster
            .get(ycsbt::TABLE, &account_key(id))
            .await
            .unwrap()
            .unwrap()
            .value;
        sum += u64::from_le_bytes(value[..8].try_into().unwrap());
    }
    sum
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn functions_across_nodes_give_the_single_node_results() {
    let single = start(2);
    let one = client_a(&single).await;
    load(|table, key, value| {
        let one = one.clone();
        async move {
            one.put(table, &key, &value).await.unwrap();
        }
    })
    .await;
    let (_servers, map, cluster) = loaded_cluster().await;

    let mut handed_back = 0;
    for start in (0..GRAPH_NODES).step_by(7) {
        let expected = one.invoke_remote("traverse", walk(start)).await.unwrap().result;
        let ways: [Invocation; 3] = [
            cluster.invoke_remote("traverse", walk(start)).await.unwrap(),
            cluster.invoke_pushable("traverse", walk(start)).await.unwrap(),
            cluster.invoke_local("traverse", walk(start)).await.unwrap(),
        ];
        for invocation in &ways {
            assert_eq!(invocation.result, expected, "traverse from {start}");
        }
        handed_back += u64::from(ways[0].pushed_back);
    }
    // 12 hops over two nodes nearly always leave the first one.
    assert!(handed_back > 0, "no traversal was handed back");
    assert!(handoffs(&map).await >= handed_back);

    let samples = aggregate::AggregateArgs {
        keys: (0..150).collect(),
        compute_ns: 0,
    }
    .encode();
    let expected = one.invoke_remote("aggregate", samples.clone()).await.unwrap().result;
    assert_eq!(
        cluster
            .invoke_remote("aggregate", samples.clone())
            .await
            .unwrap()
            .result,
        expected
    );
    assert_eq!(
        cluster.invoke_local("aggregate", samples).await.unwrap().result,
        expected
    );

    // The social application: top-k reads neighbours on both nodes (handed off), the
    // others stay on the vertex's node.
    for v in (0..SOCIAL_VERTICES).step_by(3) {
        for (function, args) in social_requests(v) {
            let expected = one.invoke_remote(function, args.clone()).await.unwrap().result;
            assert_eq!(one.invoke_local(function, args.clone()).await.unwrap().result, expected);
            assert_eq!(
                cluster.invoke_remote(function, args.clone()).await.unwrap().result,
                expected
            );
            assert_eq!(cluster.invoke_local(function, args).await.unwrap().result, expected);
        }
    }

    // A transfer on one node runs there, with no handoff, and applies.
    let (a, b) = same_node_pair(&map);
    let moved = cluster.invoke_remote("ycsbt", transfer(a, b)).await.unwrap();
    assert!(!moved.pushed_back);
    assert_eq!(moved.result[0], ycsbt::TRANSFER_APPLIED);
}

/// Two accounts the same node serves.
fn same_node_pair(map: &ClusterMap) -> (u64, u64) {
    (1..ACCOUNTS)
        .find(|&id| map.owner(&account_key(id)).id == map.owner(&account_key(0)).id)
        .map(|id| (0, id))
        .expect("32 accounts over two nodes put two on one node")
}

/// Two accounts on different nodes.
fn cross_node_pair(map: &ClusterMap) -> (u64, u64) {
    (1..ACCOUNTS)
        .find(|&id| map.owner(&account_key(id)).id != map.owner(&account_key(0)).id)
        .map(|id| (0, id))
        .expect("32 accounts over two nodes use both")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invocation_writing_on_two_nodes_is_refused_and_applies_nothing() {
    let (_servers, map, cluster) = loaded_cluster().await;
    let (from, to) = cross_node_pair(&map);
    for attempt in [
        cluster.invoke_remote("ycsbt", transfer(from, to)).await,
        cluster.invoke_pushable("ycsbt", transfer(from, to)).await,
        cluster.invoke_local("ycsbt", transfer(from, to)).await,
    ] {
        let err = attempt.expect_err("a transfer across nodes must be refused");
        assert_eq!(err.status(), Some(Status::CrossSlot), "{err}");
        assert!(err.to_string().contains("one node"), "{err}");
    }
    assert_eq!(total_balance(&cluster).await, ACCOUNTS * ycsbt::INITIAL_BALANCE);
    for id in [from, to] {
        let value = cluster.get(ycsbt::TABLE, &account_key(id)).await.unwrap().unwrap();
        assert_eq!(
            u64::from_le_bytes(value.value[..8].try_into().unwrap()),
            ycsbt::INITIAL_BALANCE
        );
    }

    // Without the handoff flag (a plain client of one node), reaching the other node's key
    // fails the invocation with `moved` instead of reading an empty table there.
    let home = direct(&map.owner(&account_key(from)).addr).await;
    let err = home.invoke_remote("ycsbt", transfer(from, to)).await.unwrap_err();
    assert_eq!(err.status(), Some(Status::FunctionFailed), "{err}");
    assert!(err.to_string().contains("moved"), "{err}");
    // And an invocation whose routing key the node does not serve is refused before it runs.
    let other = direct(&map.owner(&account_key(to)).addr).await;
    let err = other.invoke_remote("ycsbt", transfer(from, to)).await.unwrap_err();
    assert_eq!(err.status(), Some(Status::Moved), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ycsbt_across_two_nodes_keeps_its_total_in_every_snapshot() {
    const WRITERS: u64 = 4;
    const TRANSFERS_PER_WRITER: u64 = 150;
    let (_servers, _map, cluster) = loaded_cluster().await;
    let total = ACCOUNTS * ycsbt::INITIAL_BALANCE;
    let applied = Arc::new(AtomicU64::new(0));
    let refused = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let mut writers = Vec::new();
    for writer in 0..WRITERS {
        let (cluster, applied, refused, done) = (cluster.clone(), applied.clone(), refused.clone(), done.clone());
        writers.push(tokio::spawn(async move {
            let mut state = writer * 7919 + 1;
            for i in 0..TRANSFERS_PER_WRITER {
                state = ferry_func::args::mix64(state);
                let (from, to) = (state % ACCOUNTS, (state >> 20) % ACCOUNTS);
                let args = transfer(from, to);
                let outcome = match i % 3 {
                    0 => cluster.invoke_remote("ycsbt", args).await,
                    1 => cluster.invoke_pushable("ycsbt", args).await,
                    _ => cluster.invoke_local("ycsbt", args).await,
                };
                match outcome {
                    Ok(_) => applied.fetch_add(1, Ordering::Relaxed),
                    Err(err) if err.status() == Some(Status::CrossSlot) => refused.fetch_add(1, Ordering::Relaxed),
                    // Contention may exhaust the retries; that applies nothing either.
                    Err(err) if err.status() == Some(Status::TxAbort) => 0,
                    Err(err) => panic!("transfer {from} -> {to}: {err}"),
                };
            }
            done.fetch_add(1, Ordering::Relaxed);
        }));
    }
    // Snapshots of every balance, read across both nodes while the transfers run.
    let sum_args = Bytes::copy_from_slice(&ACCOUNTS.to_le_bytes());
    let mut snapshots = 0;
    let mut turn = 0u64;
    while done.load(Ordering::Relaxed) < WRITERS || snapshots < 20 {
        turn += 1;
        let outcome = if turn.is_multiple_of(2) {
            cluster.invoke_remote("test.sum_accounts", sum_args.clone()).await
        } else {
            cluster.invoke_local("test.sum_accounts", sum_args.clone()).await
        };
        match outcome {
            Ok(invocation) => {
                let sum = u64::from_le_bytes(invocation.result[..8].try_into().unwrap());
                assert_eq!(sum, total, "a snapshot across nodes saw a transfer half done");
                snapshots += 1;
            }
            Err(err) => assert_eq!(err.status(), Some(Status::TxAbort), "{err}"),
        }
    }
    for writer in writers {
        writer.await.unwrap();
    }
    let (applied, refused) = (applied.load(Ordering::Relaxed), refused.load(Ordering::Relaxed));
    println!("applied {applied}, refused as cross-node {refused}, snapshots {snapshots}");
    assert!(applied > 0 && refused > 0, "applied {applied}, refused {refused}");
    assert_eq!(total_balance(&cluster).await, total);
}

/// A writer sets `first` (on one node) to i, then `second` (on the other) to i, for i = 1..;
/// a reader running one invocation that reads `first` and then `second` must never see
/// `second` ahead of `first`: that would be a write observed without one that finished
/// before it started (the reads validated once more after the last one rule it out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_across_nodes_never_sees_a_later_write_without_an_earlier_one() {
    const ROUNDS: u64 = 400;
    let (_servers, map) = two_nodes();
    let cluster = cluster_client(&map).await;
    let names: Vec<String> = (0..64).map(|i| format!("counter{i}")).collect();
    let first = names[0].clone();
    let second = names
        .iter()
        .find(|name| map.owner(name.as_bytes()).id != map.owner(first.as_bytes()).id)
        .expect("64 keys use both nodes")
        .clone();
    let writer = {
        let (cluster, first, second) = (cluster.clone(), first.clone(), second.clone());
        tokio::spawn(async move {
            for i in 1..=ROUNDS {
                cluster.put("pair", first.as_bytes(), &i.to_le_bytes()).await.unwrap();
                cluster.put("pair", second.as_bytes(), &i.to_le_bytes()).await.unwrap();
                // Room for snapshots to finish between rounds (they abort while one runs).
                if i % 2 == 0 {
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                }
            }
        })
    };
    let args = Bytes::from(format!("{first}|{second}"));
    let (mut seen, mut turn) = (0, 0u64);
    while !writer.is_finished() {
        turn += 1;
        let outcome = if turn % 2 == 0 {
            cluster.invoke_remote("test.reads_pair", args.clone()).await
        } else {
            cluster.invoke_local("test.reads_pair", args.clone()).await
        };
        match outcome {
            Ok(invocation) => {
                let a = u64::from_le_bytes(invocation.result[..8].try_into().unwrap());
                let b = u64::from_le_bytes(invocation.result[8..16].try_into().unwrap());
                assert!(b <= a && a <= b + 1, "read {first} = {a} and then {second} = {b}");
                seen += 1;
            }
            Err(err) => assert_eq!(err.status(), Some(Status::TxAbort), "{err}"),
        }
    }
    writer.await.unwrap();
    assert!(seen > 10, "only {seen} snapshots finished");
}
