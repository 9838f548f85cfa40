//! The metrics listener's three endpoints, on hyper (HTTP/1.1, one request per
//! connection, over TLS when the process speaks it):
//! - `GET /metrics`: the exposition, built when asked;
//! - `GET /healthz`: 200 while the process answers (a liveness probe);
//! - `GET /readyz`: 200 when the process is ready for traffic, else 503 with the reason
//!   (a readiness probe: recovered, caught up, configured, as each process defines it).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use crate::tls::Acceptor;

/// Longest a client may take over its request and our answer (over TLS, with the
/// handshake).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Requests served at once; more wait for a place.
const MAX_CONCURRENT_REQUESTS: usize = 16;

/// Largest request head read (hyper's smallest buffer limit).
const MAX_REQUEST_HEAD_BYTES: usize = 8 * 1024;

/// The OpenMetrics text format, as Prometheus negotiates it.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Whether a process is ready for traffic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// It is.
    Ready,
    /// It is not yet (or no longer), and why.
    NotReady(String),
}

/// What the endpoints answer, asked at each request.
#[derive(Clone)]
pub struct Endpoints {
    /// The exposition (`GET /metrics`).
    pub metrics: Arc<dyn Fn() -> String + Send + Sync>,
    /// Readiness (`GET /readyz`).
    pub ready: Arc<dyn Fn() -> Readiness + Send + Sync>,
}

impl Endpoints {
    /// Endpoints of a process that is ready whenever it answers.
    pub fn always_ready(metrics: Arc<dyn Fn() -> String + Send + Sync>) -> Endpoints {
        Endpoints {
            metrics,
            ready: Arc::new(|| Readiness::Ready),
        }
    }
}

/// Serves `endpoints` on `listener` until `shutdown` changes; with `tls`, over HTTPS.
pub async fn serve(
    listener: TcpListener,
    endpoints: Endpoints,
    tls: Option<Acceptor>,
    shutdown: watch::Receiver<bool>,
) {
    let places = Arc::new(Semaphore::new(MAX_CONCURRENT_REQUESTS));
    crate::accept::accept_loop(listener, "metrics listener", shutdown, |stream, peer| {
        let places = Arc::clone(&places);
        let endpoints = endpoints.clone();
        let tls = tls.clone();
        async move {
            // At most so many requests at once: the next accept waits for a place.
            let Ok(place) = places.acquire_owned().await else {
                return;
            };
            tokio::spawn(async move {
                let served = async {
                    match tls {
                        None => connection(endpoints, stream).await,
                        Some(tls) => {
                            if let Some(stream) = tls.handshake(stream, peer).await {
                                connection(endpoints, stream).await;
                            }
                        }
                    }
                };
                let _ = tokio::time::timeout(REQUEST_TIMEOUT, served).await;
                drop(place);
            });
        }
    })
    .await;
}

/// One connection, one request.
async fn connection<IO: AsyncRead + AsyncWrite + Unpin + Send + 'static>(endpoints: Endpoints, stream: IO) {
    let service = hyper::service::service_fn(move |request| {
        let endpoints = endpoints.clone();
        async move { Ok::<_, Infallible>(answer(&endpoints, &request)) }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .keep_alive(false)
        .max_buf_size(MAX_REQUEST_HEAD_BYTES)
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

fn answer(endpoints: &Endpoints, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET is served\n".into());
    }
    match request.uri().path() {
        "/metrics" => {
            let mut response = text(StatusCode::OK, (endpoints.metrics)());
            response
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static(OPENMETRICS));
            response
        }
        "/healthz" => text(StatusCode::OK, "ok\n".into()),
        "/readyz" => match (endpoints.ready)() {
            Readiness::Ready => text(StatusCode::OK, "ready\n".into()),
            Readiness::NotReady(why) => text(StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {why}\n")),
        },
        _ => text(StatusCode::NOT_FOUND, "served: /metrics, /healthz, /readyz\n".into()),
    }
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    async fn get(addr: std::net::SocketAddr, request: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        stream.write_all(request.as_bytes()).await.expect("write");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.expect("read");
        answer
    }

    #[tokio::test]
    async fn the_endpoints_answer_metrics_health_and_readiness_as_it_changes() {
        let ready = Arc::new(AtomicBool::new(false));
        let readiness = Arc::clone(&ready);
        let endpoints = Endpoints {
            metrics: Arc::new(|| "ferry_node_epoch 3\n# EOF\n".to_string()),
            ready: Arc::new(move || match readiness.load(Ordering::Relaxed) {
                true => Readiness::Ready,
                false => Readiness::NotReady("catching up".into()),
            }),
        };
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (_stop, stopped) = watch::channel(false);
        tokio::spawn(serve(listener, endpoints, None, stopped));

        let metrics = get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(metrics.starts_with("HTTP/1.1 200 OK\r\n"), "{metrics}");
        assert!(metrics.contains("application/openmetrics-text"), "{metrics}");
        assert!(metrics.ends_with("ferry_node_epoch 3\n# EOF\n"), "{metrics}");
        let health = get(addr, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(health.starts_with("HTTP/1.1 200 OK\r\n"), "{health}");
        let not_ready = get(addr, "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(not_ready.starts_with("HTTP/1.1 503"), "{not_ready}");
        assert!(not_ready.ends_with("not ready: catching up\n"), "{not_ready}");
        ready.store(true, Ordering::Relaxed);
        let now_ready = get(addr, "GET /readyz HTTP/1.0\r\n\r\n").await;
        assert!(now_ready.starts_with("HTTP/1.0 200 OK\r\n"), "{now_ready}");
        let missing = get(addr, "GET /other HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
        let post = get(addr, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n").await;
        assert!(post.starts_with("HTTP/1.1 405"), "{post}");
        let garbage = get(addr, "\u{1}\u{2}nonsense\r\n\r\n").await;
        assert!(garbage.is_empty() || garbage.starts_with("HTTP/1.1 400"), "{garbage}");
    }
}
