//! `GET /metrics` of a storage node (served by `ferry_net::metrics`): its counters in the
//! Prometheus text format.
//!
//! The values are the ones `stats` reports (the same functions build them), for every tenant: a
//! dotted name `tenant.ID.NAME`, `worker.INDEX.NAME` or `node.NAME` becomes the family
//! `ferry_tenant_NAME{tenant="ID"}`, `ferry_worker_NAME{worker="INDEX"}` or
//! `ferry_node_NAME`; then the latency histograms by operation and status, from a request's
//! decoding to its answer (`ferry_node_request_latency_us`, `ferry_node_requests`).

use crate::node::Node;

/// Families that go up and down; every other one only grows.
const GAUGES: &[&str] = &[
    "home_core",
    "tables",
    "objects",
    "used_bytes",
    "quota_bytes",
    "workers",
    "connections_open",
    "connections_authenticated",
    "connections_waiting_hello",
    "queue_len",
    "log_appended_lsn",
    "replicas_connected",
    "replica_acked_lsn",
    "primary_connected",
    "primary_end_lsn",
];

/// The exposition of every counter of `node`.
pub(crate) fn exposition(node: &Node) -> String {
    let mut entries = Vec::new();
    crate::server::node_stats(node, &mut entries);
    for tenant in node.tenants.values() {
        crate::server::tenant_stats(tenant, &mut entries);
        tenant.counters.report(tenant.id, &mut entries);
    }
    let mut text = ferry_net::metrics::exposition(entries, GAUGES);
    node.latency.render("ferry_node", &mut text);
    text
}
