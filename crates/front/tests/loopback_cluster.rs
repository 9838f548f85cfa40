//! A loopback cluster (two storage nodes, a compute node, the gateway) driven through the
//! gateway with a plain ferry client: routing and `moved`, hash tags and `cross_slot`,
//! invocations placed either way with the single-node results, a node killed mid-run,
//! and a metrics scrape.

use crate::common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use ferry_client::ClientError;
use ferry_func::builtins::{traverse, ycsbt};
use ferry_proto::{CommitWrite, Status};

const GRAPH_NODES: u64 = 200;
/// YCSB-T accounts (enough that both nodes serve some).
const ACCOUNTS: u64 = 64;

fn walk(start: u64) -> Bytes {
    traverse::TraverseArgs {
        start,
        depth: 10,
        compute_ns: 0,
    }
    .encode()
}

fn write(key: &str, value: &str) -> CommitWrite {
    CommitWrite {
        table: "t".into(),
        key: Bytes::copy_from_slice(key.as_bytes()),
        value: Some(Bytes::copy_from_slice(value.as_bytes())),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_operations_through_the_gateway_land_on_their_owners() {
    let cluster = default_cluster("rpc").await;
    let gateway = client(cluster.gateway.local_addr()).await;
    let nodes = [
        client(&cluster.map.nodes()[0].addr).await,
        client(&cluster.map.nodes()[1].addr).await,
    ];
    for i in 0..100 {
        let key = format!("key{i}");
        gateway.put("t", key.as_bytes(), key.as_bytes()).await.unwrap();
        assert_eq!(
            &gateway.get("t", key.as_bytes()).await.unwrap().unwrap().value[..],
            key.as_bytes()
        );
        let owner = usize::from(cluster.map.owner(key.as_bytes()).id != "s1");
        assert!(nodes[owner].get("t", key.as_bytes()).await.unwrap().is_some());
        let err = nodes[1 - owner].get("t", key.as_bytes()).await.unwrap_err();
        assert_eq!(err.status(), Some(Status::Moved), "{err}");
    }
    // A commit whose keys share a hash tag goes to one node and applies; one spanning
    // nodes is refused and applies nothing.
    let together = vec![write("{user7}.name", "ada"), write("{user7}.email", "ada@example.com")];
    gateway.commit(Vec::new(), together).await.unwrap();
    assert!(gateway.get("t", b"{user7}.email").await.unwrap().is_some());
    let (a, b) = spanning_pair(&cluster);
    let err = gateway
        .commit(Vec::new(), vec![write(&a, "1"), write(&b, "2")])
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(Status::CrossSlot), "{err}");
    assert!(gateway.get("t", a.as_bytes()).await.unwrap().is_none());
    assert!(gateway.get("t", b.as_bytes()).await.unwrap().is_none());
    // A read validating objects on the other node (what a function run by a client
    // through the gateway sends): served while they are current, `tx_abort` once one changed.
    gateway.put("t", a.as_bytes(), b"1").await.unwrap();
    let version = gateway.get("t", a.as_bytes()).await.unwrap().unwrap().version;
    let read_b = |version: u64| ferry_proto::Request::Get {
        table: "t".into(),
        key: Bytes::copy_from_slice(b.as_bytes()),
        validate: vec![ferry_proto::ReadVersion {
            table: "t".into(),
            key: Bytes::copy_from_slice(a.as_bytes()),
            version,
        }],
    };
    assert_eq!(gateway.call(&read_b(version)).await.unwrap().status, Status::NotFound);
    gateway.put("t", a.as_bytes(), b"2").await.unwrap();
    assert_eq!(gateway.call(&read_b(version)).await.unwrap().status, Status::TxAbort);
    // Not found and a multiget of one node's keys pass through as the node answered.
    assert_eq!(gateway.get("t", b"never-written").await.unwrap(), None);
    let keys = vec![
        Bytes::from_static(b"{user7}.name"),
        Bytes::from_static(b"{user7}.email"),
    ];
    let values = gateway.multiget("t", &keys).await.unwrap();
    assert_eq!(&values[0].as_ref().unwrap().value[..], b"ada");
}

/// Two fresh keys on different nodes.
fn spanning_pair(cluster: &Cluster) -> (String, String) {
    let first = "fresh0".to_string();
    let second = (1..100)
        .map(|i| format!("fresh{i}"))
        .find(|key| cluster.map.owner(key.as_bytes()).id != cluster.map.owner(first.as_bytes()).id)
        .unwrap();
    (first, second)
}

async fn load_graph(gateway: &ferry_client::Client) {
    for (key, value) in traverse::dataset(GRAPH_NODES, 48, 11) {
        gateway.put(traverse::TABLE, &key, &value).await.unwrap();
    }
    for (key, value) in ycsbt::dataset(ACCOUNTS, 16, 11) {
        gateway.put(ycsbt::TABLE, &key, &value).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invocations_placed_either_way_give_the_single_node_results() {
    // The reference: one storage node with the same data.
    let reference = tokio::task::spawn_blocking(|| {
        let tenant = ferry_server::TenantConfig {
            id: ferry_proto::TenantId(TENANT),
            token: TOKEN.into(),
            quota_bytes: 64 << 20,
            home_core: None,
            maxmemory_policy: Default::default(),
        };
        let mut config = ferry_server::ServerConfig::new("127.0.0.1:0".parse().unwrap(), 1, vec![tenant]);
        config.spin_iters_per_ms = Some(ferry_func::work::DEFAULT_ITERS_PER_MS);
        ferry_server::start(config, ferry_lua::registry()).unwrap()
    })
    .await
    .unwrap();
    let one = client(reference.local_addr()).await;
    load_graph(&one).await;
    for policy in ["rpc", "kv", "fixed:0.5"] {
        let cluster = default_cluster(policy).await;
        let gateway = client(cluster.gateway.local_addr()).await;
        load_graph(&gateway).await;
        for start in (0..GRAPH_NODES).step_by(9) {
            let expected = one.invoke_remote("traverse", walk(start)).await.unwrap().result;
            // The gateway places it; to the client it is one remote invocation.
            let placed = invoke_admitted(&gateway, "traverse", walk(start)).await;
            assert_eq!(placed, expected, "{policy}: traverse from {start}");
            // Run by the client itself, each access through the gateway.
            let here = gateway.invoke_local("traverse", walk(start)).await.unwrap().result;
            assert_eq!(here, expected, "{policy}: local traverse from {start}");
        }
        let compute = client(cluster.compute.local_addr()).await;
        let ran_on_compute = stat(&compute, "compute.invocations").await;
        let remote_calls = stat(&gateway, "function.traverse.calls_remote").await;
        let local_calls = stat(&gateway, "function.traverse.calls_local").await;
        let counts = format!("{policy}: compute ran {ran_on_compute}, remote {remote_calls}, local {local_calls}");
        match policy {
            "rpc" => assert!(ran_on_compute == 0 && local_calls == 0 && remote_calls > 0, "{counts}"),
            "kv" => assert!(
                ran_on_compute > 0 && ran_on_compute == local_calls && remote_calls == 0,
                "{counts}"
            ),
            _ => assert!(ran_on_compute > 0 && remote_calls > 0, "{counts}"),
        }
        // A transfer on one node applies; one across nodes is refused through either path.
        let cross = (1..ACCOUNTS)
            .find(|&id| cluster.map.owner(&traverse::key(id)).id != cluster.map.owner(&traverse::key(0)).id)
            .unwrap();
        let args = ycsbt::YcsbtArgs::Transfer {
            from: 0,
            to: cross,
            amount: 5,
            compute_ns: 0,
        }
        .encode();
        let err = loop {
            match gateway.invoke_remote("ycsbt", args.clone()).await {
                Err(ClientError::Server {
                    status: Status::Overloaded,
                    ..
                }) => tokio::time::sleep(Duration::from_millis(5)).await,
                other => break other.expect_err("a transfer across nodes is refused"),
            }
        };
        assert_eq!(err.status(), Some(Status::CrossSlot), "{policy}: {err}");
    }
}

/// Invokes through the gateway, waiting out its rate limiter (an admission refused as
/// `overloaded` is retried, as a client would).
async fn invoke_admitted(gateway: &ferry_client::Client, function: &str, args: Bytes) -> Bytes {
    for _ in 0..2000 {
        match gateway.invoke_remote(function, args.clone()).await {
            Ok(invocation) => return invocation.result,
            Err(ClientError::Server {
                status: Status::Overloaded,
                ..
            }) => tokio::time::sleep(Duration::from_millis(2)).await,
            Err(err) => panic!("{function}: {err}"),
        }
    }
    panic!("{function}: never admitted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storage_node_killed_behind_the_gateway_fails_only_its_keys() {
    let mut cluster = default_cluster("rpc").await;
    let gateway = client(cluster.gateway.local_addr()).await;
    let keys: Vec<String> = (0..60).map(|i| format!("k{i}")).collect();
    for key in &keys {
        gateway.put("t", key.as_bytes(), key.as_bytes()).await.unwrap();
    }
    let dead = cluster.storage.remove(1);
    let dead_id = cluster.map.nodes()[1].id.clone();
    dead.shutdown();
    for key in &keys {
        let read = gateway.get("t", key.as_bytes()).await;
        if cluster.map.owner(key.as_bytes()).id == dead_id {
            let err = read.unwrap_err();
            assert_eq!(err.status(), Some(Status::Unavailable), "{err}");
            let write = gateway.put("t", key.as_bytes(), b"again").await.unwrap_err();
            assert!(
                matches!(write, ClientError::CommitOutcomeUnknown(_)) || write.status() == Some(Status::Unavailable),
                "{write}"
            );
        } else {
            // Every acknowledged write on the survivor is still there, and it keeps serving.
            assert_eq!(&read.unwrap().unwrap().value[..], key.as_bytes());
            gateway.put("t", key.as_bytes(), b"again").await.unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_and_compute_node_serve_metrics() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let (gateway_front, compute_front) = {
        let (mut g, mut c) = (front_config(), front_config());
        g.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
        c.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
        (g, c)
    };
    let cluster = tokio::task::spawn_blocking(move || cluster("kv", gateway_front, compute_front))
        .await
        .unwrap();
    let gateway = client(cluster.gateway.local_addr()).await;
    load_graph(&gateway).await;
    for start in 0..20 {
        invoke_admitted(&gateway, "traverse", walk(start)).await;
    }
    let scrape = |addr: std::net::SocketAddr| async move {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).await.unwrap();
        text
    };
    let text = scrape(cluster.gateway.metrics_addr().unwrap()).await;
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    for needle in [
        "ferry_gateway_request_latency_us_bucket{le=\"+Inf\",op=\"invoke\",status=\"ok\"}",
        "ferry_gateway_requests_total{op=\"put\",status=\"ok\"}",
        "ferry_tenant_rate_ops{tenant=\"1\"}",
        "ferry_tenant_rpc_fraction_ppm{tenant=\"1\"} 0",
        "ferry_function_calls_local_total{function=\"traverse\"} 20",
        "ferry_function_app_cpu_ns_mean{function=\"traverse\"}",
        "ferry_gateway_connections_authenticated 1",
    ] {
        assert!(text.contains(needle), "missing {needle} in\n{text}");
    }
    let text = scrape(cluster.compute.metrics_addr().unwrap()).await;
    for needle in [
        "# TYPE ferry_compute_active_workers gauge",
        "ferry_compute_invocations_total 20",
        "ferry_compute_request_latency_us_count{op=\"invoke\",status=\"ok\"} 20",
    ] {
        assert!(text.contains(needle), "missing {needle} in\n{text}");
    }
}

/// YCSB-T through the gateway, placed half on the storage nodes and half on the compute
/// node, from several clients at once: transfers on one node apply, transfers across nodes
/// are refused with nothing applied, and the total of all balances never changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ycsbt_through_the_gateway_keeps_the_total_across_two_nodes() {
    const CLIENTS: u64 = 4;
    const TRANSFERS: u64 = 120;
    let cluster = default_cluster("fixed:0.5").await;
    let gateway = client(cluster.gateway.local_addr()).await;
    for (key, value) in ycsbt::dataset(ACCOUNTS, 16, 3) {
        gateway.put(ycsbt::TABLE, &key, &value).await.unwrap();
    }
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let gateway = gateway.clone();
        tasks.push(tokio::spawn(async move {
            let (mut applied, mut refused, mut state) = (0u64, 0u64, c * 7919 + 5);
            for _ in 0..TRANSFERS {
                state = ferry_func::args::mix64(state);
                let (from, to) = (state % ACCOUNTS, (state >> 24) % ACCOUNTS);
                let args = ycsbt::YcsbtArgs::Transfer {
                    from,
                    to,
                    amount: 3,
                    compute_ns: 0,
                }
                .encode();
                match gateway.invoke_remote("ycsbt", args).await {
                    Ok(_) => applied += 1,
                    Err(err) => match err.status() {
                        Some(Status::CrossSlot) => refused += 1,
                        // Admission refused, or contention exhausted the retries: nothing applied.
                        Some(Status::Overloaded | Status::TxAbort) => {}
                        _ => panic!("transfer {from} -> {to}: {err}"),
                    },
                }
            }
            (applied, refused)
        }));
    }
    let (mut applied, mut refused) = (0, 0);
    for task in tasks {
        let (a, r) = task.await.unwrap();
        applied += a;
        refused += r;
    }
    assert!(applied > 0 && refused > 0, "applied {applied}, refused {refused}");
    let mut total = 0;
    for id in 0..ACCOUNTS {
        let value = gateway
            .get(ycsbt::TABLE, &traverse::key(id))
            .await
            .unwrap()
            .unwrap()
            .value;
        total += u64::from_le_bytes(value[..8].try_into().unwrap());
    }
    assert_eq!(total, ACCOUNTS * ycsbt::INITIAL_BALANCE);
    // Both placements ran transfers.
    let compute = client(cluster.compute.local_addr()).await;
    assert!(stat(&compute, "compute.invocations").await > 0);
    assert!(stat(&gateway, "function.ycsbt.calls_remote").await > 0);
}
