//! Two storage nodes sharing the slots of a cluster map, on loopback: keys land on their
//! owners, a node refuses keys it does not serve with `moved` naming the owner, hash tags
//! keep keys together, and a commit spanning nodes is refused before anything is applied.
//! (Invocations across nodes: `cluster_functions.rs`.)

use crate::common;

use bytes::Bytes;
use common::*;
use ferry_client::{Client, ClientConfig, ClientError, ClusterClient};
use ferry_proto::{CommitWrite, Status};

async fn direct(addr: &str) -> Client {
    let mut config = ClientConfig::new(addr, ferry_proto::TenantId(TENANT_A), TOKEN_A);
    config.registry = registry();
    Client::connect(config).await.unwrap()
}

fn write(key: &[u8], value: &[u8]) -> CommitWrite {
    CommitWrite {
        table: "t".into(),
        key: Bytes::copy_from_slice(key),
        value: Some(Bytes::copy_from_slice(value)),
    }
}

fn status(err: ClientError) -> Option<Status> {
    err.status()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_are_routed_to_their_owner_and_refused_elsewhere() {
    let (servers, map) = two_nodes();
    let mut config = ClientConfig::new("", ferry_proto::TenantId(TENANT_A), TOKEN_A);
    config.registry = registry();
    let cluster = ClusterClient::connect(map.clone(), config).await.unwrap();
    let keys: Vec<Vec<u8>> = (0..200u32).map(|i| format!("key{i}").into_bytes()).collect();
    for key in &keys {
        cluster.put("t", key, key).await.unwrap();
    }
    let s1 = direct(&map.nodes()[0].addr).await;
    let s2 = direct(&map.nodes()[1].addr).await;
    let mut on = [0, 0];
    for key in &keys {
        assert_eq!(&cluster.get("t", key).await.unwrap().unwrap().value[..], &key[..]);
        let (owner, other) = if map.owner(key).id == "s1" {
            (&s1, &s2)
        } else {
            (&s2, &s1)
        };
        on[usize::from(map.owner(key).id == "s2")] += 1;
        assert!(owner.get("t", key).await.unwrap().is_some());
        let refused = other.get("t", key).await.unwrap_err();
        assert_eq!(status(refused.clone()), Some(Status::Moved), "{refused}");
        let owner_entry = map.owner(key);
        assert!(
            refused
                .to_string()
                .contains(&format!("{} {}", owner_entry.id, owner_entry.addr)),
            "{refused}"
        );
    }
    assert!(on[0] > 50 && on[1] > 50, "keys spread over both nodes: {on:?}");
    // A function reads `a` and then `b`, which live on different nodes: each node refuses
    // the access to the other's key rather than answering from its own empty table.
    assert_ne!(map.owner(b"a").id, map.owner(b"b").id);
    for node in [&s1, &s2] {
        let args = Bytes::copy_from_slice(&0u64.to_le_bytes());
        let refused = node.invoke_remote("test.reads_two", args).await.unwrap_err();
        assert_eq!(status(refused.clone()), Some(Status::FunctionFailed), "{refused}");
        assert!(refused.to_string().contains("moved"), "{refused}");
    }
    for server in servers {
        server.shutdown();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hash_tags_keep_a_commit_on_one_node_and_a_cross_node_commit_applies_nothing() {
    let (servers, map) = two_nodes();
    let mut config = ClientConfig::new("", ferry_proto::TenantId(TENANT_A), TOKEN_A);
    config.registry = registry();
    let cluster = ClusterClient::connect(map.clone(), config).await.unwrap();
    // Tagged keys share a slot, so one node commits both.
    cluster
        .commit(
            Vec::new(),
            vec![write(b"{user1}.name", b"ann"), write(b"{user1}.age", b"41")],
        )
        .await
        .unwrap();
    assert_eq!(
        &cluster.get("t", b"{user1}.age").await.unwrap().unwrap().value[..],
        b"41"
    );
    let tagged = cluster
        .multiget(
            "t",
            &[Bytes::from_static(b"{user1}.name"), Bytes::from_static(b"{user1}.age")],
        )
        .await
        .unwrap();
    assert!(tagged.iter().all(Option::is_some));
    // "hello" (slot 866) and "foo" (slot 12182) live on different nodes.
    assert_ne!(map.owner(b"hello").id, map.owner(b"foo").id);
    let spanning = vec![write(b"hello", b"1"), write(b"foo", b"2")];
    let refused = cluster.commit(Vec::new(), spanning.clone()).await.unwrap_err();
    assert_eq!(status(refused), Some(Status::CrossSlot));
    // Sent to a node directly, the node refuses it too.
    for node in map.nodes() {
        let refused = direct(&node.addr)
            .await
            .commit(Vec::new(), spanning.clone())
            .await
            .unwrap_err();
        assert_eq!(status(refused), Some(Status::CrossSlot));
    }
    assert_eq!(cluster.get("t", b"hello").await.unwrap(), None, "nothing half-applied");
    assert_eq!(cluster.get("t", b"foo").await.unwrap(), None, "nothing half-applied");
    let multiget = cluster
        .multiget("t", &[Bytes::from_static(b"hello"), Bytes::from_static(b"foo")])
        .await
        .unwrap_err();
    assert_eq!(status(multiget), Some(Status::CrossSlot));
    for server in servers {
        server.shutdown();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_mid_run_fails_its_slots_clearly_and_the_other_keeps_everything() {
    let (mut servers, map) = two_nodes();
    let mut config = ClientConfig::new("", ferry_proto::TenantId(TENANT_A), TOKEN_A);
    config.registry = registry();
    config.connect_timeout = std::time::Duration::from_secs(2);
    config.request_timeout = std::time::Duration::from_secs(5);
    let cluster = ClusterClient::connect(map.clone(), config).await.unwrap();
    let s2_addr = map.node("s2").unwrap().addr.clone();
    // Writers on keys of both nodes; s2 is shut down while they run.
    let writer = {
        let cluster = cluster.clone();
        tokio::spawn(async move {
            let mut acknowledged = Vec::new();
            let mut failed_on_s2 = Vec::new();
            for i in 0..400u32 {
                let key = format!("k{i}").into_bytes();
                match cluster.put("t", &key, &i.to_le_bytes()).await {
                    Ok(_) => acknowledged.push((key, i)),
                    Err(err) => failed_on_s2.push((key, err)),
                }
                tokio::task::yield_now().await;
            }
            (acknowledged, failed_on_s2)
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let s2 = servers.pop().unwrap();
    tokio::task::spawn_blocking(move || s2.shutdown()).await.unwrap();
    let (acknowledged, failed) = writer.await.unwrap();
    // Only s2's keys failed, each with an error that names the lost connection or address.
    for (key, err) in &failed {
        assert_eq!(map.owner(key).id, "s2", "a key of the surviving node failed: {err}");
        let text = err.to_string();
        assert!(
            text.contains(&s2_addr) || text.contains("connection") || text.contains("unknown"),
            "unclear error for a dead node: {text}"
        );
    }
    assert!(!failed.is_empty(), "the writer never saw s2 go");
    // Everything acknowledged by the survivor is there; its keys keep being served.
    let mut survivors = 0;
    for (key, i) in &acknowledged {
        if map.owner(key).id == "s1" {
            survivors += 1;
            let stored = cluster.get("t", key).await.unwrap().unwrap();
            assert_eq!(&stored.value[..], &i.to_le_bytes());
        }
    }
    assert!(survivors > 100, "{survivors}");
    cluster.put("t", b"hello", b"still here").await.unwrap();
    let dead = cluster.get("t", b"foo").await.unwrap_err();
    assert!(
        dead.to_string().contains(&s2_addr) || dead.to_string().contains("connection"),
        "{dead}"
    );
    for server in servers {
        server.shutdown();
    }
}
