//! What a storage node tells Prometheus and its orchestrator (served by
//! `ferry_net::metrics`): its samples (the ones `stats` reports, for every tenant) and
//! its latency histograms on `GET /metrics`, and whether it is ready for traffic on
//! `GET /readyz`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use ferry_net::metrics::{Endpoints, Readiness};

use crate::node::Node;

/// Furthest (log bytes) a replica may trail the end its primary last reported and
/// still be ready: a replica a reader may be sent to is one that has caught up.
const READY_MAX_LAG_BYTES: u64 = 1 << 20;

/// The metrics listener's endpoints for `node`.
pub(crate) fn endpoints(node: &Arc<Node>) -> Endpoints {
    let scraped = Arc::clone(node);
    let asked = Arc::clone(node);
    Endpoints {
        metrics: Arc::new(move || exposition(&scraped)),
        ready: Arc::new(move || readiness(&asked)),
    }
}

/// The exposition of every sample of `node` and of its latency histograms.
pub(crate) fn exposition(node: &Node) -> String {
    let mut samples = Vec::new();
    crate::server::node_stats(node, &mut samples);
    for tenant in node.tenants.values() {
        crate::server::tenant_stats(tenant, &mut samples);
        tenant.counters.report(tenant.id, &mut samples);
    }
    ferry_net::metrics::exposition(samples, Some(("ferry_node", &node.latency)))
}

/// Whether `node` serves as a primary: in a cluster, whether the map it routes by lists
/// it (a replica's shard is listed under its primary); alone, whether it copies no one.
pub(crate) fn is_primary(node: &Node) -> bool {
    match &node.cluster {
        Some(role) => role.in_map(),
        None => node
            .replication
            .get()
            .is_none_or(|replication| replication.follower.is_none()),
    }
}

/// Ready (the node has recovered before it listens at all) unless it is a primary that
/// needs a lease and holds none, or a replica that is not linked to its primary or
/// trails it by more than [`READY_MAX_LAG_BYTES`].
pub(crate) fn readiness(node: &Node) -> Readiness {
    if let Some(role) = &node.cluster {
        if role.in_map() && role.lease_lapsed() {
            return Readiness::NotReady("a primary without its lease from the config group".into());
        }
    }
    if is_primary(node) {
        return Readiness::Ready;
    }
    let follower = node
        .replication
        .get()
        .and_then(|replication| replication.follower.as_ref());
    let Some(follower) = follower else {
        return Readiness::Ready;
    };
    if !follower.connected.load(Ordering::Relaxed) {
        return Readiness::NotReady("a replica not linked to its primary".into());
    }
    let appended = node.durable.as_ref().map_or(0, |durable| durable.wal.appended_lsn());
    let lag = follower
        .primary_end_lsn
        .load(Ordering::Relaxed)
        .saturating_sub(appended);
    match lag > READY_MAX_LAG_BYTES {
        true => Readiness::NotReady(format!("a replica {lag} log bytes behind its primary")),
        false => Readiness::Ready,
    }
}
