//! One rate loop per tenant. Regression: a client running its own rate loop in front of a
//! gateway (`ferry bench --server GATEWAY`) stacked two. The gateway refused what its R did
//! not admit, the refusals came back fast, and the client's loop, reading them as a healthy
//! node, kept admitting above the gateway's R: a large share of the client's requests were
//! refused. A client that follows the gateway's R (`Adaptive::through_gateway`) admits at
//! the pace the gateway's loop sets and is almost never refused.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use ferry_client::gateway::FOLLOW_HEADROOM;
use ferry_client::{Adaptive, Backend, ClientError};
use ferry_control::{FixedFraction, Nanos, Policy, RateLoopConfig};
use ferry_front::PolicyFactory;
use ferry_func::builtins::traverse;
use ferry_proto::Status;

/// Graph nodes loaded.
const GRAPH_NODES: u64 = 100;

/// The gateway's R before its loop's first decision, requests/s: low enough for a loaded
/// two-CPU test machine.
const GATEWAY_RATE_INIT_OPS: f64 = 300.0;

/// The ceiling of the gateway's R, so its pace stays bounded whatever the machine.
const GATEWAY_RATE_MAX_OPS: f64 = 600.0;

/// The p99 both loops aim for: loose, so that the machine's hiccups do not steer the test.
const SLO_NS: f64 = 20e6;

/// Length of each drive.
const DRIVE: Duration = Duration::from_secs(3);

/// How often the test compares the client's admission rate with the gateway's R.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// Most requests the driver keeps in flight.
const MAX_OUTSTANDING: u64 = 256;

fn walk(start: u64) -> Bytes {
    traverse::TraverseArgs {
        start,
        depth: 4,
        compute_ns: 0,
    }
    .encode()
}

/// A rate loop with everything shipped to the storage nodes ("rpc"), starting at `init`.
fn rpc_loop(init: f64, max: f64) -> Result<Box<dyn Policy>, String> {
    let mut rate = RateLoopConfig::new(SLO_NS);
    rate.rate_init_ops = init;
    rate.rate_max_ops = max;
    let policy = FixedFraction::new("rpc", 1.0, rate, Nanos::ZERO, 1).map_err(|err| err.to_string())?;
    Ok(Box::new(policy))
}

/// What one drive saw.
#[derive(Debug, Default)]
struct Tally {
    ok: AtomicU64,
    /// Refused by the gateway's limiter (`overloaded`).
    throttled: AtomicU64,
    other: AtomicU64,
    outstanding: AtomicU64,
}

impl Tally {
    fn sent(&self) -> u64 {
        self.ok.load(Ordering::Relaxed) + self.throttled.load(Ordering::Relaxed) + self.other.load(Ordering::Relaxed)
    }
    fn throttled_share(&self) -> f64 {
        self.throttled.load(Ordering::Relaxed) as f64 / self.sent().max(1) as f64
    }
}

/// A saturating backlog admitted by `adaptive`'s limiter for [`DRIVE`]; every
/// [`SAMPLE_EVERY`] the client's admission rate and the gateway's R (from its stats) side by
/// side.
async fn drive<B: Backend>(adaptive: Arc<Adaptive<B>>, stats: &ferry_client::Client) -> (Arc<Tally>, Vec<(f64, f64)>) {
    let tally = Arc::new(Tally::default());
    let start = Instant::now();
    let mut samples = Vec::new();
    let mut next_sample = start + SAMPLE_EVERY;
    let mut index = 0u64;
    while start.elapsed() < DRIVE {
        if Instant::now() >= next_sample {
            let gateway_rate = stat(stats, &format!("tenant.{TENANT}.rate_ops")).await as f64;
            samples.push((adaptive.admission_rate_ops(), gateway_rate));
            next_sample += SAMPLE_EVERY;
        }
        if tally.outstanding.load(Ordering::Relaxed) >= MAX_OUTSTANDING || !adaptive.try_admit() {
            tokio::time::sleep(Duration::from_micros(250)).await;
            continue;
        }
        index += 1;
        tally.outstanding.fetch_add(1, Ordering::Relaxed);
        let (adaptive, tally) = (Arc::clone(&adaptive), Arc::clone(&tally));
        tokio::spawn(async move {
            let outcome = adaptive
                .invoke_admitted(Instant::now(), traverse::NAME, walk(index % GRAPH_NODES))
                .await;
            let counter = match outcome {
                Ok(_) => &tally.ok,
                Err(ClientError::Server {
                    status: Status::Overloaded,
                    ..
                }) => &tally.throttled,
                Err(_) => &tally.other,
            };
            counter.fetch_add(1, Ordering::Relaxed);
            tally.outstanding.fetch_sub(1, Ordering::Relaxed);
        });
    }
    while tally.outstanding.load(Ordering::Relaxed) > 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    (tally, samples)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_following_the_gateway_is_paced_by_its_loop_and_almost_never_refused() {
    let policy: PolicyFactory = Arc::new(|| rpc_loop(GATEWAY_RATE_INIT_OPS, GATEWAY_RATE_MAX_OPS));
    let cluster = tokio::task::spawn_blocking(move || cluster_with(2, policy, front_config(), front_config()))
        .await
        .unwrap();
    let gateway = client(cluster.gateway.local_addr()).await;
    for (key, value) in traverse::dataset(GRAPH_NODES, 48, 7) {
        gateway.put(traverse::TABLE, &key, &value).await.unwrap();
    }
    // A gateway says so at hello; a storage node does not.
    let rate = gateway
        .gateway_rate_ops()
        .expect("the gateway's hello carries its rate");
    assert!(rate as f64 >= 100.0 && rate as f64 <= GATEWAY_RATE_MAX_OPS, "{rate}");
    let storage = client(&cluster.map.nodes()[0].addr).await;
    assert_eq!(storage.gateway_rate_ops(), None);
    assert!(matches!(
        Adaptive::through_gateway(storage),
        Err(ClientError::Invalid(_))
    ));

    // One loop: the client follows the gateway's R.
    let follower = Arc::new(Adaptive::through_gateway(gateway.clone()).unwrap());
    assert_eq!(follower.policy_name(), "gateway");
    let throttled_before = stat(&gateway, "gateway.throttled").await;
    let (tally, samples) = drive(Arc::clone(&follower), &gateway).await;
    let throttled_at_gateway = stat(&gateway, "gateway.throttled").await - throttled_before;
    let summary =
        format!("follower: {tally:?}, gateway refused {throttled_at_gateway}, (client, gateway R) {samples:?}");
    eprintln!("{summary}");
    assert_eq!(tally.other.load(Ordering::Relaxed), 0, "{summary}");
    // The gateway's loop set the pace: the client sent about what its R admits.
    let sent = tally.sent() as f64;
    assert!(
        sent >= 0.4 * 100.0 * DRIVE.as_secs_f64() && sent <= 1.2 * GATEWAY_RATE_MAX_OPS * DRIVE.as_secs_f64(),
        "{summary}"
    );
    assert!(
        tally.throttled_share() <= 0.03,
        "the gateway refused the follower: {summary}"
    );
    // The client's admission rate tracked the gateway's R, less the headroom, in almost
    // every sample (one may straddle a change of R).
    let tracked = samples
        .iter()
        .filter(|(client, gateway)| (client - gateway * (1.0 - FOLLOW_HEADROOM)).abs() <= 0.1 * gateway)
        .count();
    assert!(samples.len() >= 10, "{summary}");
    assert!(tracked as f64 >= 0.8 * samples.len() as f64, "{summary}");
    drop(follower);

    // Two loops: the same backlog admitted by a rate loop of the client's own, as a client
    // of a single node runs. Its loop cannot see the gateway's R: refused requests come back
    // fast, so it keeps admitting above it, and the gateway refuses the difference.
    // (Its ceiling only keeps the flood of refusals within what a test machine bears.)
    let own_loop = rpc_loop(2.0 * GATEWAY_RATE_MAX_OPS, 10.0 * GATEWAY_RATE_MAX_OPS).unwrap();
    let own = Arc::new(Adaptive::new(gateway.clone(), own_loop).unwrap());
    let (tally, samples) = drive(Arc::clone(&own), &gateway).await;
    let summary = format!("own loop: {tally:?}, (client, gateway R) {samples:?}");
    eprintln!("{summary}");
    assert!(tally.throttled_share() >= 0.3, "no double throttling: {summary}");
    assert!(
        samples.iter().all(|(client, gateway)| client > gateway),
        "the client's loop stayed above the gateway's R: {summary}"
    );
}
