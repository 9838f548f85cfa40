//! Regression: a ship-data run on a compute node cost the storage nodes CPU (its gets and
//! commit) in several round trips, but the compute node answered with one number, its own
//! CPU, and the gateway booked that as the app side's, the storage side's as zero and the
//! run as one round trip. Its policy then saw ship data as free for the storage nodes and
//! as cheap in round trips as ship compute. Now the compute node answers a gateway with its
//! costs record, and the gateway's policy learns what an embedded client would measure.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use ferry_client::{ClientConfig, ClientError, ClusterClient, Invocation, Placement};
use ferry_control::{Completion, FixedFraction, FnId, Nanos, Policy, PolicyState, RateLoopConfig};
use ferry_front::PolicyFactory;
use ferry_func::builtins::traverse;
use ferry_proto::Status;
use parking_lot::Mutex;

/// Graph nodes loaded.
const GRAPH_NODES: u64 = 100;

/// Hops of each traversal: that many gets when run over fetched data.
const DEPTH: u32 = 10;

fn walk(start: u64) -> Bytes {
    traverse::TraverseArgs {
        start,
        depth: DEPTH,
        compute_ns: 0,
    }
    .encode()
}

/// The gateway's policy: "kv" (everything shipped to the compute node), keeping every
/// completion it is told about.
struct Recording {
    inner: FixedFraction,
    seen: Arc<Mutex<Vec<Completion>>>,
}

impl Policy for Recording {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn place(&mut self, now: Nanos, fn_id: FnId) -> Placement {
        self.inner.place(now, fn_id)
    }
    fn on_completion(&mut self, now: Nanos, completion: &Completion) {
        self.seen.lock().push(*completion);
        self.inner.on_completion(now, completion);
    }
    fn tick(&mut self, now: Nanos) {
        self.inner.tick(now)
    }
    fn next_tick(&self) -> Nanos {
        self.inner.next_tick()
    }
    fn rate_ops(&self) -> f64 {
        self.inner.rate_ops()
    }
    fn state(&self) -> PolicyState {
        self.inner.state()
    }
}

/// Invokes through the gateway asking for the costs record, waiting out its limiter.
async fn invoke_with_costs(gateway: &ferry_client::Client, args: Bytes) -> Invocation {
    for _ in 0..1000 {
        match gateway.invoke_with_costs(traverse::NAME, args.clone()).await {
            Ok(invocation) => return invocation,
            Err(ClientError::Server {
                status: Status::Overloaded,
                ..
            }) => tokio::time::sleep(Duration::from_millis(2)).await,
            Err(err) => panic!("traverse: {err}"),
        }
    }
    panic!("traverse: never admitted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ship_data_run_through_the_gateway_reports_both_sides_costs() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorded = Arc::clone(&seen);
    let policy: PolicyFactory = Arc::new(move || {
        let kv =
            FixedFraction::new("kv", 0.0, RateLoopConfig::new(5e6), Nanos::ZERO, 1).map_err(|err| err.to_string())?;
        Ok(Box::new(Recording {
            inner: kv,
            seen: Arc::clone(&recorded),
        }) as Box<dyn Policy>)
    });
    let cluster = tokio::task::spawn_blocking(move || cluster_with(2, policy, front_config(), front_config()))
        .await
        .unwrap();
    let gateway = client(cluster.gateway.local_addr()).await;
    for (key, value) in traverse::dataset(GRAPH_NODES, 48, 5) {
        gateway.put(traverse::TABLE, &key, &value).await.unwrap();
    }
    // The reference: the same runs by an embedded client over the same cluster.
    let mut config = ClientConfig::new("", ferry_proto::TenantId(TENANT), TOKEN);
    config.registry = ferry_lua::registry();
    let embedded = ClusterClient::connect(cluster.map.clone(), config).await.unwrap();

    let starts: Vec<u64> = (0..GRAPH_NODES).step_by(7).collect();
    let mut references = Vec::new();
    for &start in &starts {
        let reference = embedded.invoke_local(traverse::NAME, walk(start)).await.unwrap();
        // A get per node not read yet (a walk may come back to one it read).
        assert!(
            reference.cost.round_trips > DEPTH / 2,
            "a local traversal is a get per hop: {:?}",
            reference.cost
        );
        // A client asking the gateway for the costs record gets the run as the compute
        // node measured it.
        let through = invoke_with_costs(&gateway, walk(start)).await;
        assert_eq!(through.result, reference.result, "from {start}");
        assert_eq!(through.placement, Placement::Local, "shipped to the compute node");
        assert!(!through.pushed_back);
        assert!(
            through.cost.app_cpu_ns > 0,
            "the compute node's CPU: {:?}",
            through.cost
        );
        assert!(
            through.cost.storage_cpu_ns > 0,
            "its gets' storage CPU: {:?}",
            through.cost
        );
        assert_eq!(through.cost.round_trips, reference.cost.round_trips, "from {start}");
        assert_eq!(
            through.cost.bytes_returned, reference.cost.bytes_returned,
            "from {start}"
        );
        assert_eq!(through.cost.attempts, 1);
        references.push(reference);
    }

    // What the gateway's policy learned of those runs: both sides' CPU and every round
    // trip of each, as the embedded client measured them.
    let seen = seen.lock().clone();
    assert_eq!(seen.len(), starts.len(), "one completion per run");
    for (completion, reference) in seen.iter().zip(&references) {
        assert_eq!(completion.placement, Placement::Local);
        assert!(completion.costs.app_cpu_ns > 0, "{completion:?}");
        assert!(
            completion.costs.storage_cpu_ns > 0,
            "the storage CPU of a ship-data run was booked as zero: {completion:?}"
        );
        assert_eq!(
            completion.costs.round_trips, reference.cost.round_trips,
            "a ship-data run was booked as one round trip: {completion:?}"
        );
    }

    // The compute node itself: asked for its costs it answers with the record; asked as
    // before (a client of an older build) it answers as before, one CPU figure, no record.
    let compute = client(cluster.compute.local_addr()).await;
    let asked = compute.invoke_with_costs(traverse::NAME, walk(3)).await.unwrap();
    assert_eq!(asked.placement, Placement::Local);
    assert!(
        asked.cost.storage_cpu_ns > 0 && asked.cost.app_cpu_ns > 0,
        "{:?}",
        asked.cost
    );
    assert!(asked.cost.round_trips > DEPTH / 2, "{:?}", asked.cost);
    let plain = compute.invoke_remote(traverse::NAME, walk(3)).await.unwrap();
    assert_eq!(plain.result, asked.result);
    assert_eq!((plain.placement, plain.cost.round_trips), (Placement::Remote, 1));
    assert_eq!(plain.cost.app_cpu_ns, 0, "no record: the header's one figure");

    // A storage node ignores the question: its own CPU, in the header, is all a run there
    // costs. (One hop, so the walk stays on the node that serves its start.)
    let storage = client(&cluster.map.owner(&traverse::key(3)).addr).await;
    let one_hop = traverse::TraverseArgs {
        start: 3,
        depth: 1,
        compute_ns: 0,
    }
    .encode();
    let remote = storage.invoke_with_costs(traverse::NAME, one_hop).await.unwrap();
    assert_eq!((remote.placement, remote.cost.round_trips), (Placement::Remote, 1));
    assert!(
        remote.cost.storage_cpu_ns > 0 && remote.cost.app_cpu_ns == 0,
        "{:?}",
        remote.cost
    );
}
