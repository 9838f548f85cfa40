//! Three members on loopback: the group forms, loads the bootstrap map, decides changes
//! through whichever member is asked, keeps deciding when its leader dies, and a member
//! that comes back catches up.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ferry_client::config_group::ConfigClient;
use ferry_cluster::ClusterMap;
use ferry_config::lease::{Heartbeat, EXPIRY_MS, HEARTBEAT_MS, SERVE_MS};
use ferry_config::{ClusterConfig, ConfigChange, Outcome, Refusal, StorageNode};
use ferry_confignode::{Member, MemberConfig};
use ferry_net::tls::pem::Identity;
use ferry_net::tls::testing::Pki;
use ferry_net::tls::{Acceptor, ClientAuth, ClientTls, ServerTls};
use tokio::net::TcpListener;
use tokio::sync::watch;

fn client_tls(pki: &Pki, identity: Option<Identity>) -> Arc<ferry_net::tls::rustls::ClientConfig> {
    ClientTls {
        ca: pki.ca.clone(),
        identity,
    }
    .load()
    .unwrap()
}

/// Generous for a loaded 2-CPU machine: an election takes about a second.
const SETTLE: Duration = Duration::from_secs(30);

struct Running {
    member: Arc<Member>,
    stop: watch::Sender<bool>,
}

impl Running {
    async fn kill(self) {
        let _ = self.stop.send(true);
        self.member.shutdown().await;
    }
}

async fn start(id: u64, members: &BTreeMap<u64, String>, dir: &Path, listener: TcpListener) -> Running {
    start_with(id, members, dir, listener, None).await
}

/// A member, over TLS with `pki`'s node certificate (client certificates required).
async fn start_with(
    id: u64,
    members: &BTreeMap<u64, String>,
    dir: &Path,
    listener: TcpListener,
    pki: Option<&Pki>,
) -> Running {
    let addrs: Vec<String> = (1..=2).map(|i| format!("127.0.0.1:1770{i}")).collect();
    let member = Member::start(MemberConfig {
        id,
        members: members.clone(),
        data_dir: dir.join(format!("member-{id}")),
        bootstrap: Some(ClusterMap::even(&addrs).unwrap().nodes().to_vec()),
        peer_tls: pki.map(|pki| client_tls(pki, Some(pki.node.clone()))),
    })
    .await
    .unwrap();
    let (stop, stopped) = watch::channel(false);
    let acceptor = pki.map(|pki| {
        let server = ServerTls {
            identity: pki.node.clone(),
            client_auth: ClientAuth::Required { ca: pki.ca.clone() },
        };
        let connections = ferry_net::connections::Connections::new(64, 64, Duration::from_secs(10));
        Acceptor::new(server.load().unwrap(), connections)
    });
    tokio::spawn(ferry_confignode::server::serve(
        member.clone(),
        listener,
        acceptor,
        stopped,
    ));
    Running { member, stop }
}

async fn until_epoch(configs: &mut watch::Receiver<Arc<ClusterConfig>>, epoch: u64) -> Arc<ClusterConfig> {
    tokio::time::timeout(SETTLE, configs.wait_for(|config| config.epoch >= epoch))
        .await
        .unwrap_or_else(|_| panic!("no configuration at epoch {epoch} within {SETTLE:?}"))
        .unwrap()
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_decides_through_a_leader_failure_and_a_returning_member_catches_up() {
    let scratch = tempfile::Builder::new()
        .prefix("ferry-confignode-group-")
        .tempdir()
        .unwrap();
    let dir = scratch.path();
    let mut listeners = Vec::new();
    let mut members = BTreeMap::new();
    for id in 1..=3u64 {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        members.insert(id, listener.local_addr().unwrap().to_string());
        listeners.push(listener);
    }
    let mut running = BTreeMap::new();
    for (id, listener) in (1..=3u64).zip(listeners) {
        running.insert(id, start(id, &members, dir, listener).await);
    }
    let client = ConfigClient::new(members.values().cloned().collect());
    let mut followed = client.follow();

    // Every member was given the map; it is loaded once.
    let config = until_epoch(&mut followed, 1).await;
    assert_eq!(config.routing_map().unwrap().owner_of_slot(0).id, "s1");
    assert_eq!(
        client
            .propose(ConfigChange::Bootstrap { nodes: Vec::new() })
            .await
            .unwrap(),
        Outcome::Refused(Refusal::AlreadyBootstrapped { epoch: 1 })
    );

    let assign = |expected_epoch| ConfigChange::AssignSlots {
        first: 0,
        last: 99,
        to: "s2".into(),
        expected_epoch,
    };
    assert_eq!(client.propose(assign(1)).await.unwrap(), Outcome::Applied { epoch: 2 });
    let config = until_epoch(&mut followed, 2).await;
    assert_eq!(config.routing_map().unwrap().owner_of_slot(99).id, "s2");

    // Kill the leader; the other two elect one and keep deciding.
    let status = client.status(&members[&1]).await.unwrap();
    let leader = status.leader.expect("a leader after a commit");
    running.remove(&leader).unwrap().kill().await;
    let give_back = ConfigChange::AssignSlots {
        first: 0,
        last: 99,
        to: "s1".into(),
        expected_epoch: 2,
    };
    assert_eq!(client.propose(give_back).await.unwrap(), Outcome::Applied { epoch: 3 });
    let config = until_epoch(&mut followed, 3).await;
    assert_eq!(config.routing_map().unwrap().owner_of_slot(99).id, "s1");
    // A decision taken at an old epoch is refused.
    assert_eq!(
        client.propose(assign(2)).await.unwrap(),
        Outcome::Refused(Refusal::StaleEpoch {
            expected: 2,
            current: 3
        })
    );

    // The old leader comes back on its data dir and catches up with what it missed.
    let listener = TcpListener::bind(&members[&leader]).await.unwrap();
    let back = start(leader, &members, dir, listener).await;
    let mut its_configs = back.member.configs();
    let config = until_epoch(&mut its_configs, 3).await;
    assert_eq!(config.routing_map().unwrap().owner_of_slot(99).id, "s1");
    running.insert(leader, back);

    for (_, member) in running {
        member.kill().await;
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// A node's heartbeat loop, as a storage node runs it: every interval, its id, the epoch
/// it follows and its log end; stops when told.
fn heartbeats(
    client: ConfigClient,
    node: &'static str,
    mut configs: watch::Receiver<Arc<ClusterConfig>>,
) -> watch::Sender<bool> {
    let (stop, mut stopped) = watch::channel(false);
    tokio::spawn(async move {
        loop {
            let epoch = configs.borrow_and_update().epoch;
            let beat = Heartbeat {
                node: node.into(),
                epoch,
                // A primary's log is never behind its replicas' (they copy it).
                log_end: match node {
                    "s1" => 30,
                    "r2" => 20,
                    _ => 10,
                },
                ..Heartbeat::default()
            };
            let _ = client.heartbeat(beat, Duration::from_millis(HEARTBEAT_MS)).await;
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(HEARTBEAT_MS)) => {}
                _ = stopped.wait_for(|stop| *stop) => return,
            }
        }
    });
    stop
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_that_stops_reporting_is_replaced_by_the_replica_with_the_longest_log() {
    let scratch = tempfile::Builder::new()
        .prefix("ferry-confignode-failover-")
        .tempdir()
        .unwrap();
    let dir = scratch.path();
    let mut members = BTreeMap::new();
    let mut listeners = Vec::new();
    for id in 1..=3u64 {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        members.insert(id, listener.local_addr().unwrap().to_string());
        listeners.push(listener);
    }
    let mut running = Vec::new();
    for (id, listener) in (1..=3u64).zip(listeners) {
        running.push(start(id, &members, dir, listener).await);
    }
    let client = ConfigClient::new(members.values().cloned().collect());
    let mut followed = client.follow();
    until_epoch(&mut followed, 1).await;
    for (epoch, id) in [(1, "r1"), (2, "r2")] {
        let add = ConfigChange::AddReplica {
            id: id.into(),
            node: StorageNode {
                addr: "127.0.0.1:17799".into(),
                resp: None,
                replication: None,
            },
            primary: "s1".into(),
            expected_epoch: epoch,
        };
        assert_eq!(
            client.propose(add).await.unwrap(),
            Outcome::Applied { epoch: epoch + 1 }
        );
    }
    until_epoch(&mut followed, 3).await;

    // Only the primaries are granted leases.
    let beat = |node: &str| Heartbeat {
        node: node.into(),
        epoch: 3,
        log_end: 0,
        ..Heartbeat::default()
    };
    let wait = Duration::from_secs(10);
    // (The replicas report first: a leader grants a primary once it knows how far its
    // replicas' logs go, or has waited for them.)
    assert_eq!(client.heartbeat(beat("r1"), wait).await.unwrap().serve_ms, None);
    assert_eq!(client.heartbeat(beat("r2"), wait).await.unwrap().serve_ms, None);
    assert_eq!(
        client.heartbeat(beat("s1"), wait).await.unwrap().serve_ms,
        Some(SERVE_MS)
    );

    let s1 = heartbeats(client.clone(), "s1", client.follow());
    let _others: Vec<_> = ["s2", "r1", "r2"]
        .into_iter()
        .map(|node| heartbeats(client.clone(), node, client.follow()))
        .collect();
    // Once s1 reports having acted on its replicas, its shard is leased (epoch 4); while
    // it reports, nothing else changes.
    tokio::time::sleep(Duration::from_millis(3 * EXPIRY_MS)).await;
    assert_eq!(followed.borrow().epoch, 4);
    assert!(followed.borrow().shards[&1].leased);

    let silent = std::time::Instant::now();
    s1.send(true).unwrap();
    let config = tokio::time::timeout(SETTLE, followed.wait_for(|config| config.shards[&1].primary != "s1"))
        .await
        .expect("no failover")
        .unwrap()
        .clone();
    let took = silent.elapsed();
    let shard = &config.shards[&1];
    assert_eq!(shard.primary, "r2", "the longest log takes over: {shard:?}");
    assert!(shard.replicas.contains(&"s1".to_string()), "{shard:?}");
    assert!(
        took >= Duration::from_millis(EXPIRY_MS),
        "replaced after {took:?}, before its lease lapsed"
    );
    println!("failover decided {took:?} after the primary fell silent");
    assert_eq!(
        client.heartbeat(beat("s1"), wait).await.unwrap().serve_ms,
        None,
        "the old primary is fenced"
    );

    for member in running {
        member.kill().await;
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_the_group_forms_and_serves_clients_with_certificates_only() {
    let scratch = tempfile::Builder::new()
        .prefix("ferry-confignode-tls-")
        .tempdir()
        .unwrap();
    let dir = scratch.path();
    let pki = Pki::generate(&dir.join("pki")).unwrap();
    let mut listeners = Vec::new();
    let mut members = BTreeMap::new();
    for id in 1..=3u64 {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        members.insert(id, listener.local_addr().unwrap().to_string());
        listeners.push(listener);
    }
    let mut running = Vec::new();
    for (id, listener) in (1..=3u64).zip(listeners) {
        running.push(start_with(id, &members, dir, listener, Some(&pki)).await);
    }
    let addrs: Vec<String> = members.values().cloned().collect();
    // Peers elect a leader and commit the bootstrap map over TLS; a client with a
    // certificate follows it.
    let client = ConfigClient::new(addrs.clone()).with_tls(client_tls(&pki, Some(pki.client.clone())));
    let mut followed = client.follow();
    let config = until_epoch(&mut followed, 1).await;
    assert_eq!(config.routing_map().unwrap().owner_of_slot(0).id, "s1");
    // Without a certificate, or in plain TCP, nothing is answered.
    let anonymous = ConfigClient::new(addrs.clone()).with_tls(client_tls(&pki, None));
    assert!(anonymous.current().await.is_err());
    assert!(ConfigClient::new(addrs).current().await.is_err());
    for member in running {
        member.kill().await;
    }
}
