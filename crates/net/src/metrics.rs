//! `GET /metrics` in the Prometheus text format, on a listener of its own (`--metrics
//! ADDR`), so scraping never competes with a data port's limits.
//!
//! A process reports its counters as dotted `stats` names; [`exposition`] turns
//! `SCOPE.ID.NAME` into the family `ferry_SCOPE_NAME{SCOPE="ID"}` and `node.NAME` (or any
//! other two-part name `PROCESS.NAME`) into `ferry_PROCESS_NAME`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use ferry_proto::StatEntry;

use crate::tls::Acceptor;

/// Longest request head a scrape may send.
const MAX_REQUEST_BYTES: usize = 8 * 1024;

/// Longest a scraper may take to send its request (and, over TLS, its handshake).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Scrapes served at once; more wait for a place.
const MAX_CONCURRENT_SCRAPES: usize = 16;

/// Scopes whose entries carry an id (`tenant.1.cpu_ns`): the id becomes a label.
const LABELLED_SCOPES: &[&str] = &["tenant", "worker", "function"];

/// The exposition of `entries`; a family whose name ends in `_G` for a `G` of `gauges` is
/// typed a gauge, every other one a counter.
pub fn exposition(entries: Vec<StatEntry>, gauges: &[&str]) -> String {
    // Family → (labels → value).
    let mut families: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for entry in entries {
        // SCOPE.ID.NAME: the scope and the name hold no dots, the id may (function names).
        let (head, name) = match entry.name.rsplit_once('.') {
            Some(split) => split,
            None => continue,
        };
        let (family, labels) = match head.split_once('.') {
            Some((scope, id)) if LABELLED_SCOPES.contains(&scope) => {
                (format!("ferry_{scope}_{name}"), format!("{{{scope}=\"{id}\"}}"))
            }
            Some(_) => continue,
            None => (format!("ferry_{head}_{name}"), String::new()),
        };
        families.entry(family).or_default().insert(labels, entry.value);
    }
    let mut out = String::new();
    for (family, series) in &families {
        let gauge = gauges.iter().any(|g| family.ends_with(&format!("_{g}")));
        let kind = if gauge { "gauge" } else { "counter" };
        let _ = writeln!(out, "# TYPE {family} {kind}");
        for (labels, value) in series {
            let _ = writeln!(out, "{family}{labels} {value}");
        }
    }
    out
}

/// What a scrape answers: the current exposition, built when asked.
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// Serves scrapes of `render` on `listener` until `shutdown` changes; with `tls`, over
/// HTTPS (the handshake within the scrape's time limit).
pub async fn serve(listener: TcpListener, render: Render, tls: Option<Acceptor>, mut shutdown: watch::Receiver<bool>) {
    let places = Arc::new(Semaphore::new(MAX_CONCURRENT_SCRAPES));
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.changed() => return,
        };
        let Ok((stream, peer)) = accepted else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let Ok(place) = Arc::clone(&places).acquire_owned().await else {
            return;
        };
        let render = Arc::clone(&render);
        let tls = tls.clone();
        tokio::spawn(async move {
            let served = async {
                match tls {
                    None => scrape(&*render, stream).await,
                    Some(tls) => match tls.handshake(stream, peer).await {
                        Some(stream) => scrape(&*render, stream).await,
                        None => Ok(()),
                    },
                }
            };
            let _ = tokio::time::timeout(REQUEST_TIMEOUT, served).await;
            drop(place);
        });
    }
}

/// Answers one HTTP/1.x request and closes.
async fn scrape<IO: AsyncRead + AsyncWrite + Unpin>(
    render: &(dyn Fn() -> String + Send + Sync),
    mut stream: IO,
) -> std::io::Result<()> {
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
        (Some(b"GET"), Some(b"/metrics")) => respond(&mut stream, "200 OK", &render()).await,
        (Some(b"GET"), Some(_)) => respond(&mut stream, "404 Not Found", "only /metrics is served\n").await,
        (Some(method), Some(_)) if !method.is_empty() => {
            respond(&mut stream, "405 Method Not Allowed", "only GET is served\n").await
        }
        _ => respond(&mut stream, "400 Bad Request", "not an HTTP request\n").await,
    }
}

async fn respond<IO: AsyncWrite + Unpin>(stream: &mut IO, status: &str, body: &str) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, value: u64) -> StatEntry {
        StatEntry {
            name: name.into(),
            value,
        }
    }

    #[test]
    fn dotted_names_become_labelled_families() {
        let text = exposition(
            vec![
                entry("tenant.1.requests", 5),
                entry("tenant.2.requests", 7),
                entry("gateway.active_workers", 3),
                entry("odd.three.part.name", 1),
                entry("function.chaos.ops.calls", 4),
            ],
            &["active_workers"],
        );
        assert!(text.contains("# TYPE ferry_tenant_requests counter\n"), "{text}");
        assert!(text.contains("ferry_tenant_requests{tenant=\"1\"} 5\n"), "{text}");
        assert!(text.contains("ferry_tenant_requests{tenant=\"2\"} 7\n"), "{text}");
        assert!(
            text.contains("# TYPE ferry_gateway_active_workers gauge\nferry_gateway_active_workers 3\n"),
            "{text}"
        );
        assert!(!text.contains("odd"), "an unknown scope is left out: {text}");
        assert!(
            text.contains("ferry_function_calls{function=\"chaos.ops\"} 4\n"),
            "{text}"
        );
    }
}
