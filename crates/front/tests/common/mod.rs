//! A loopback cluster for the tests: two storage nodes, a compute node and a gateway.

#![allow(dead_code)]

use std::time::Duration;

use ferry_client::{Client, ClientConfig};
use ferry_cluster::ClusterMap;
use ferry_control::Nanos;
use ferry_front::{
    start_compute, start_gateway, ComputeConfig, FrontConfig, FrontHandle, FrontTenant, GatewayConfig, PolicyFactory,
};
use ferry_server::routing::ClusterRole;
use ferry_server::{Listeners, ServerConfig, ServerHandle, TenantConfig};

pub const TENANT: u32 = 1;
pub const TOKEN: &str = "ferry";

/// The processes of one test cluster; dropping it stops them.
pub struct Cluster {
    pub map: ClusterMap,
    pub storage: Vec<ServerHandle>,
    pub compute: FrontHandle,
    pub gateway: FrontHandle,
}

pub fn front_config() -> FrontConfig {
    FrontConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        vec![FrontTenant {
            id: ferry_proto::TenantId(TENANT),
            token: TOKEN.into(),
        }],
    )
}

/// Two storage nodes, one compute node (1–2 workers) and a gateway placing by `policy`
/// (a `--policy` spec). Call from outside async code, or from `spawn_blocking`.
pub fn cluster(policy: &str, gateway_front: FrontConfig, compute_front: FrontConfig) -> Cluster {
    cluster_of(2, policy, gateway_front, compute_front)
}

/// Like [`cluster`] with `storage_nodes` storage nodes.
pub fn cluster_of(
    storage_nodes: usize,
    policy: &str,
    gateway_front: FrontConfig,
    compute_front: FrontConfig,
) -> Cluster {
    let spec = ferry_spec::parse_policy(policy).expect("policy spec");
    let policy: PolicyFactory = std::sync::Arc::new(move || {
        spec.build(Nanos::from_ms(5), 0.99, None, 1)
            .map_err(|err| err.to_string())
    });
    cluster_with(storage_nodes, policy, gateway_front, compute_front)
}

/// Like [`cluster_of`], the gateway's tenant policies made by `policy`.
pub fn cluster_with(
    storage_nodes: usize,
    policy: PolicyFactory,
    gateway_front: FrontConfig,
    compute_front: FrontConfig,
) -> Cluster {
    // Bound first, so the map names ports the nodes already hold.
    let listeners: Vec<Listeners> = (0..storage_nodes)
        .map(|_| Listeners::loopback(false).expect("loopback listeners"))
        .collect();
    let addrs: Vec<String> = listeners.iter().map(|bound| bound.addr().to_string()).collect();
    let map = ClusterMap::even(&addrs).unwrap();
    let storage = map
        .nodes()
        .iter()
        .zip(listeners)
        .map(|(node, listeners)| {
            let tenant = TenantConfig {
                id: ferry_proto::TenantId(TENANT),
                token: TOKEN.into(),
                quota_bytes: 64 << 20,
                home_core: None,
                maxmemory_policy: Default::default(),
            };
            let mut config = ServerConfig::new(node.addr.parse().unwrap(), 1, vec![tenant]);
            config.spin_iters_per_ms = Some(ferry_func::work::DEFAULT_ITERS_PER_MS);
            config.cluster = Some(ClusterRole::fixed(map.clone(), node.id.clone()));
            ferry_server::start_on(config, ferry_lua::registry(), listeners).expect("storage node starts")
        })
        .collect();
    let compute = start_compute(ComputeConfig {
        front: compute_front,
        cluster: ferry_client::cluster::fixed_routes(map.clone()),
        min_workers: 1,
        max_workers: 2,
        registry: ferry_lua::registry(),
    })
    .expect("compute node starts");
    let gateway = start_gateway(GatewayConfig {
        front: gateway_front,
        cluster: ferry_client::cluster::fixed_routes(map.clone()),
        compute_nodes: vec![compute.local_addr().to_string()],
        slo_p99: std::time::Duration::from_millis(5),
        policy,
        registry: ferry_lua::registry(),
    })
    .expect("gateway starts");
    Cluster {
        map,
        storage,
        compute,
        gateway,
    }
}

/// A cluster with default limits, started off the async context.
pub async fn default_cluster(policy: &'static str) -> Cluster {
    tokio::task::spawn_blocking(move || cluster(policy, front_config(), front_config()))
        .await
        .unwrap()
}

/// A plain ferry client of one process (gateway, compute or storage node).
pub async fn client(addr: impl ToString) -> Client {
    let mut config = ClientConfig::new(addr.to_string(), ferry_proto::TenantId(TENANT), TOKEN);
    config.registry = ferry_lua::registry();
    config.request_timeout = Duration::from_secs(20);
    Client::connect(config).await.expect("client connects")
}

/// The value of a `stats` counter.
pub async fn stat(client: &Client, name: &str) -> u64 {
    let stats = client.stats().await.unwrap();
    stats
        .iter()
        .find(|entry| entry.name == name)
        .unwrap_or_else(|| panic!("no {name} in {stats:?}"))
        .value
}
