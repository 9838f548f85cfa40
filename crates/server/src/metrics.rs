//! `GET /metrics`: the node's counters in the Prometheus text format, on a listener of its
//! own (`--metrics ADDR`), so scraping never competes with the data port's limits.
//!
//! The values are the ones `stats` reports (the same functions build them), for every tenant: a
//! dotted name `tenant.ID.NAME`, `worker.INDEX.NAME` or `node.NAME` becomes the family
//! `ferry_tenant_NAME{tenant="ID"}`, `ferry_worker_NAME{worker="INDEX"}` or
//! `ferry_node_NAME`. Not yet exported: latency histograms by operation and status, and
//! the placement controller's state (issue 16).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};

use crate::node::Node;

/// Longest request head a scrape may send.
const MAX_REQUEST_BYTES: usize = 8 * 1024;

/// Longest a scraper may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Scrapes served at once; more wait for a place.
const MAX_CONCURRENT_SCRAPES: usize = 16;

/// Families that go up and down; every other one only grows.
const GAUGES: &[&str] = &[
    "home_core",
    "tables",
    "objects",
    "used_bytes",
    "quota_bytes",
    "workers",
    "connections_open",
    "connections_waiting_hello",
    "queue_len",
];

/// The exposition of every counter of `node`.
pub(crate) fn exposition(node: &Node) -> String {
    let mut entries = Vec::new();
    crate::server::node_stats(node, &mut entries);
    for tenant in node.tenants.values() {
        crate::server::tenant_stats(tenant, &mut entries);
        tenant.counters.report(tenant.id, &mut entries);
    }
    // Family → (labels → value).
    let mut families: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for entry in entries {
        let mut parts = entry.name.splitn(3, '.');
        let (family, labels) = match (parts.next(), parts.next(), parts.next()) {
            (Some(scope @ ("tenant" | "worker")), Some(id), Some(name)) => {
                (format!("ferry_{scope}_{name}"), format!("{{{scope}=\"{id}\"}}"))
            }
            (Some("node"), Some(name), None) => (format!("ferry_node_{name}"), String::new()),
            _ => continue,
        };
        families.entry(family).or_default().insert(labels, entry.value);
    }
    let mut out = String::new();
    for (family, series) in &families {
        let gauge = GAUGES.iter().any(|g| family.ends_with(&format!("_{g}")));
        let kind = if gauge { "gauge" } else { "counter" };
        let _ = writeln!(out, "# TYPE {family} {kind}");
        for (labels, value) in series {
            let _ = writeln!(out, "{family}{labels} {value}");
        }
    }
    out
}

/// Serves scrapes until the node shuts down.
pub(crate) async fn serve(node: Arc<Node>, listener: TcpListener, mut shutdown: watch::Receiver<bool>) {
    let places = Arc::new(Semaphore::new(MAX_CONCURRENT_SCRAPES));
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.changed() => return,
        };
        let Ok((stream, _)) = accepted else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let Ok(place) = Arc::clone(&places).acquire_owned().await else {
            return;
        };
        let node = Arc::clone(&node);
        tokio::spawn(async move {
            let _ = tokio::time::timeout(REQUEST_TIMEOUT, scrape(&node, stream)).await;
            drop(place);
        });
    }
}

/// Answers one HTTP/1.x request and closes.
async fn scrape(node: &Node, mut stream: TcpStream) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&chunk[..n]);
        if head.len() > MAX_REQUEST_BYTES {
            return respond(
                &mut stream,
                "431 Request Header Fields Too Large",
                "request head too large\n",
            )
            .await;
        }
    }
    let line = head.split(|&b| b == b'\r' || b == b'\n').next().unwrap_or_default();
    let mut words = line.split(|&b| b == b' ');
    match (words.next(), words.next()) {
        (Some(b"GET"), Some(b"/metrics")) => respond(&mut stream, "200 OK", &exposition(node)).await,
        (Some(b"GET"), Some(_)) => respond(&mut stream, "404 Not Found", "only /metrics is served\n").await,
        (Some(method), Some(_)) if !method.is_empty() => {
            respond(&mut stream, "405 Method Not Allowed", "only GET is served\n").await
        }
        _ => respond(&mut stream, "400 Bad Request", "not an HTTP request\n").await,
    }
}

async fn respond(stream: &mut TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}
