//! The metrics listener of a node started with a metrics address: `GET /metrics` holds the
//! samples of every tenant as typed families (OpenMetrics text), `/healthz` and `/readyz`
//! answer the probes, and anything else gets a clear answer (never a panic or a hang).

use crate::common;

use std::time::Duration;

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub(crate) async fn http(addr: std::net::SocketAddr, request: &[u8]) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .expect("the metrics port answers and closes")
        .unwrap();
    String::from_utf8(answer).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrape_shows_every_tenants_counters_and_bad_requests_get_errors() {
    let mut config = config(2);
    config.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    let server = start_with(config);
    let metrics = server.metrics_addr().expect("a metrics address");
    let a = client_a(&server).await;
    let b = client_b(&server).await;
    for i in 0..10u32 {
        a.put("t", &i.to_le_bytes(), b"value").await.unwrap();
    }
    b.put("t", b"k", b"v").await.unwrap();

    let scrape = http(metrics, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert!(scrape.starts_with("HTTP/1.1 200 OK\r\n"), "{scrape}");
    assert!(
        scrape
            .to_lowercase()
            .contains("content-type: application/openmetrics-text"),
        "{scrape}"
    );
    let body = scrape.split("\r\n\r\n").nth(1).unwrap();
    let value = |series: &str| -> u64 {
        body.lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {series} in\n{body}"))
    };
    assert_eq!(value("ferry_tenant_objects{tenant=\"1\"}"), 10);
    assert_eq!(value("ferry_tenant_objects{tenant=\"2\"}"), 1);
    assert!(value("ferry_tenant_cpu_ns_total{tenant=\"1\"}") > 0);
    assert_eq!(value("ferry_node_workers"), 2);
    assert_eq!(value("ferry_node_connections_open"), 2);
    assert_eq!(value("ferry_node_is_primary"), 1, "a node alone is a primary");
    let _ = value("ferry_worker_queue_len{worker=\"1\"}");
    // Every request ran somewhere: taken from a core's queue (own or stolen) or inline on
    // the core that read it.
    let tasks: u64 = ["own", "stolen", "inline"]
        .iter()
        .flat_map(|kind| (0..2).map(move |worker| format!("ferry_worker_tasks_{kind}_total{{worker=\"{worker}\"}}")))
        .map(|series| value(&series))
        .sum();
    assert!(tasks >= 11, "{tasks} tasks counted for 11 puts");
    assert!(body.contains("# TYPE ferry_tenant_objects gauge"), "{body}");
    assert!(body.contains("# TYPE ferry_tenant_cpu_ns counter"), "{body}");
    // Each family's TYPE line appears once.
    assert_eq!(body.matches("# TYPE ferry_node_workers ").count(), 1);
    // Latency histograms by operation and status: the eleven puts, each in some bucket.
    assert_eq!(value("ferry_node_requests_total{op=\"put\",status=\"ok\"}"), 11);
    assert_eq!(
        value("ferry_node_request_latency_us_bucket{le=\"+Inf\",op=\"put\",status=\"ok\"}"),
        11
    );
    assert!(
        body.contains("# TYPE ferry_node_request_latency_us histogram"),
        "{body}"
    );

    for probe in ["/healthz", "/readyz"] {
        let answer = http(metrics, format!("GET {probe} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{probe}: {answer}");
    }
    assert!(http(metrics, b"GET / HTTP/1.1\r\n\r\n")
        .await
        .starts_with("HTTP/1.1 404"));
    assert!(http(metrics, b"POST /metrics HTTP/1.1\r\n\r\n")
        .await
        .starts_with("HTTP/1.1 405"));
    assert!(http(metrics, b"\x00\x01garbage\r\n\r\n")
        .await
        .starts_with("HTTP/1.1 400"));
    // Empty lines before a request are skipped (RFC 9112); with nothing after them the
    // connection is closed at the request's time limit, unanswered.
    assert_eq!(http(metrics, b"\r\n\r\n").await, "");
    let huge = vec![b'a'; 20_000];
    assert!(http(metrics, &huge).await.starts_with("HTTP/1.1 431"));
    // The data port is unaffected.
    assert_eq!(
        &a.get("t", &0u32.to_le_bytes()).await.unwrap().unwrap().value[..],
        b"value"
    );
    server.shutdown();
}
