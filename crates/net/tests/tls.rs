//! TLS on the listeners: client certificates required, optional or not asked for; a
//! certificate from an unknown CA, a missing one and a client speaking without TLS refused
//! and counted; a stalled handshake bounded by the hello timeout; the ferry protocol's door
//! and the metrics endpoint over TLS too.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ferry_net::connections::Connections;
use ferry_net::resp::{Queued, RespFuture, RespService};
use ferry_net::tls::pem::Identity;
use ferry_net::tls::testing::Pki;
use ferry_net::tls::{Acceptor, ClientAuth, ClientTls, ServerTls};
use ferry_resp::Reply;
use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// Longest any step of these tests waits: far above a loopback handshake.
const PATIENCE: Duration = Duration::from_secs(10);

/// A test PKI in a directory of its own, removed when the test ends.
struct Certs(Pki);

impl std::ops::Deref for Certs {
    type Target = Pki;
    fn deref(&self) -> &Pki {
        &self.0
    }
}

impl Drop for Certs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0.dir);
    }
}

fn pki(name: &str) -> Certs {
    let dir = std::env::temp_dir().join(format!("ferry-net-tls-{name}-{}", std::process::id()));
    Certs(Pki::generate(&dir).unwrap())
}

/// A RESP service that lets tenant 1 in with the token `ferry` and answers OK to the rest.
struct Tenant1 {
    connections: Arc<Connections>,
}

impl RespService for Tenant1 {
    type Tenant = ();

    fn sign_in(&self, id: ferry_proto::TenantId, password: &[u8]) -> Option<()> {
        (id == ferry_proto::TenantId(1) && password == b"ferry").then_some(())
    }

    fn connections(&self) -> &Arc<Connections> {
        &self.connections
    }

    fn execute<'a>(&'a self, _tenant: &'a (), _table: &'a str, batch: Vec<Queued>) -> RespFuture<'a> {
        Box::pin(async move { batch.iter().map(|_| Reply::ok()).collect() })
    }

    fn charge(&self, _tenant: &(), _cpu_ns: u64) {}

    fn mode(&self) -> &'static str {
        "standalone"
    }
}

/// A RESP listener with `client_auth`, serving until the returned sender drops.
async fn resp_listener(
    pki: &Pki,
    client_auth: ClientAuth,
    hello_timeout: Duration,
) -> (SocketAddr, Arc<Connections>, watch::Sender<bool>) {
    let connections = Connections::new(16, 16, hello_timeout);
    let tls = ServerTls {
        identity: pki.node.clone(),
        client_auth,
    };
    let acceptor = Acceptor::new(tls.load().unwrap(), Arc::clone(&connections));
    let service = Arc::new(Tenant1 {
        connections: Arc::clone(&connections),
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stop_rx) = watch::channel(false);
    tokio::spawn(ferry_net::resp::serve(service, listener, Some(acceptor), stop_rx));
    (addr, connections, stop)
}

/// A TLS connection to `addr` trusting `ca`, presenting `identity` if asked. The handshake
/// itself may succeed where the listener refuses the certificate afterwards (TLS 1.3
/// clients finish first): the refusal then comes as the first read's error.
async fn dial(
    addr: SocketAddr,
    ca: &Path,
    identity: Option<&Identity>,
) -> std::io::Result<impl AsyncRead + AsyncWrite> {
    let config = ClientTls {
        ca: ca.to_path_buf(),
        identity: identity.cloned(),
    }
    .load()
    .unwrap();
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from("127.0.0.1").unwrap();
    tokio::time::timeout(PATIENCE, tokio_rustls::TlsConnector::from(config).connect(name, tcp))
        .await
        .expect("the handshake ends")
}

/// Sends `AUTH ferry` and reads the reply: `Ok("+OK\r\n")` when the listener let the
/// client in, the error that ended the connection otherwise.
async fn auth(addr: SocketAddr, ca: &Path, identity: Option<&Identity>) -> Result<String, String> {
    let mut stream = dial(addr, ca, identity).await.map_err(|err| err.to_string())?;
    stream
        .write_all(b"AUTH ferry\r\n")
        .await
        .map_err(|err| err.to_string())?;
    stream.flush().await.map_err(|err| err.to_string())?;
    let mut reply = vec![0u8; 64];
    let n = tokio::time::timeout(PATIENCE, stream.read(&mut reply))
        .await
        .expect("an answer or an error, not silence")
        .map_err(|err| err.to_string())?;
    if n == 0 {
        return Err("closed without a reply".into());
    }
    Ok(String::from_utf8_lossy(&reply[..n]).into_owned())
}

fn failures(connections: &Connections) -> u64 {
    connections.counters.tls_handshake_failures.load(Ordering::Relaxed)
}

/// Waits until `count` failed handshakes are counted (the listener counts right after it
/// closes the connection, so a client may see the close first), then checks no more are.
async fn wait_for_failures(connections: &Connections, count: u64) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while failures(connections) < count && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(failures(connections), count, "failed handshakes counted");
}

#[tokio::test]
async fn a_required_client_certificate_lets_in_the_cas_clients_only() {
    let pki = pki("required");
    let required = ClientAuth::Required { ca: pki.ca.clone() };
    let (addr, connections, _stop) = resp_listener(&pki, required, PATIENCE).await;

    assert_eq!(auth(addr, &pki.ca, Some(&pki.client)).await.unwrap(), "+OK\r\n");
    assert_eq!(failures(&connections), 0);

    let none = auth(addr, &pki.ca, None).await.unwrap_err();
    assert!(
        none.contains("CertificateRequired"),
        "refused for want of a certificate: {none}"
    );
    let stranger = auth(addr, &pki.ca, Some(&pki.stranger)).await.unwrap_err();
    assert!(
        stranger.contains("UnknownCA") || stranger.contains("BadCertificate"),
        "refused for its CA: {stranger}"
    );
    wait_for_failures(&connections, 2).await;
}

#[tokio::test]
async fn an_optional_client_certificate_lets_in_clients_without_one_but_not_strangers() {
    let pki = pki("optional");
    let optional = ClientAuth::Optional { ca: pki.ca.clone() };
    let (addr, connections, _stop) = resp_listener(&pki, optional, PATIENCE).await;

    assert_eq!(auth(addr, &pki.ca, Some(&pki.client)).await.unwrap(), "+OK\r\n");
    assert_eq!(auth(addr, &pki.ca, None).await.unwrap(), "+OK\r\n");
    let stranger = auth(addr, &pki.ca, Some(&pki.stranger)).await.unwrap_err();
    assert!(
        stranger.contains("UnknownCA") || stranger.contains("BadCertificate"),
        "a certificate offered is checked even where none is required: {stranger}"
    );
    wait_for_failures(&connections, 1).await;
}

#[tokio::test]
async fn without_client_auth_anyone_trusting_the_node_gets_in_and_no_one_else() {
    let pki = pki("none");
    let (addr, connections, _stop) = resp_listener(&pki, ClientAuth::None, PATIENCE).await;
    assert_eq!(auth(addr, &pki.ca, None).await.unwrap(), "+OK\r\n");
    // A client presenting a certificate where none is asked for: it is simply not sent.
    assert_eq!(auth(addr, &pki.ca, Some(&pki.stranger)).await.unwrap(), "+OK\r\n");

    // A client that does not trust the node's CA refuses the node.
    let distrust = dial(addr, &pki.other_ca, None).await.err().expect("the client refuses");
    assert!(distrust.to_string().contains("UnknownIssuer"), "{distrust}");

    // The node sees the client's refusal as a failed handshake.
    wait_for_failures(&connections, 1).await;

    // A client speaking without TLS gets no reply, and the failure is counted.
    let mut plain = TcpStream::connect(addr).await.unwrap();
    plain.write_all(b"AUTH ferry\r\n").await.unwrap();
    let mut reply = Vec::new();
    let _ = tokio::time::timeout(PATIENCE, plain.read_to_end(&mut reply))
        .await
        .expect("the listener closes the connection");
    assert!(!reply.starts_with(b"+OK"), "a plain-text client was served: {reply:?}");
    wait_for_failures(&connections, 2).await;
}

#[tokio::test]
async fn a_stalled_handshake_ends_at_the_hello_timeout() {
    let pki = pki("stalled");
    let (addr, connections, _stop) = resp_listener(&pki, ClientAuth::None, Duration::from_millis(300)).await;
    let mut silent = TcpStream::connect(addr).await.unwrap();
    let mut byte = [0u8; 1];
    let closed = tokio::time::timeout(PATIENCE, silent.read(&mut byte))
        .await
        .expect("the listener closes a connection that never starts its handshake");
    assert!(matches!(closed, Ok(0) | Err(_)), "{closed:?}");
    assert_eq!(
        connections.counters.unauthenticated_closed.load(Ordering::Relaxed),
        1,
        "closed as a connection that did not authenticate in time"
    );
}

/// A ferry-protocol door that knows no tenant: every hello is refused, with an answer.
struct NoTenants {
    connections: Arc<Connections>,
}

impl ferry_net::door::Door for NoTenants {
    type Tenant = ();

    fn connections(&self) -> &Arc<Connections> {
        &self.connections
    }

    fn sign_in(&self, _id: ferry_proto::TenantId, _token: &[u8]) -> Option<()> {
        None
    }

    fn welcome(&self, _tenant: &()) -> ferry_proto::Response {
        unreachable!("nobody signs in")
    }

    fn dispatch(
        self: &Arc<Self>,
        _tenant: &(),
        _header: ferry_proto::Header,
        _request: ferry_proto::Request,
        _outbox: &Arc<ferry_net::door::Outbox>,
    ) {
        unreachable!("nobody signs in")
    }
}

#[tokio::test]
async fn the_ferry_protocol_door_and_the_metrics_endpoint_speak_tls() {
    let pki = pki("door");
    let connections = Connections::new(16, 16, PATIENCE);
    let tls = ServerTls {
        identity: pki.node.clone(),
        client_auth: ClientAuth::Required { ca: pki.ca.clone() },
    };
    let acceptor = Acceptor::new(tls.load().unwrap(), Arc::clone(&connections));
    let (_stop, stop_rx) = watch::channel(false);

    let door = Arc::new(NoTenants {
        connections: Arc::clone(&connections),
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let door_addr = listener.local_addr().unwrap();
    tokio::spawn(ferry_net::door::serve(
        door,
        listener,
        Some(acceptor.clone()),
        stop_rx.clone(),
    ));
    let mut stream = dial(door_addr, &pki.ca, Some(&pki.client)).await.unwrap();
    let mut hello = bytes::BytesMut::new();
    ferry_proto::Request::Hello {
        token: bytes::Bytes::from_static(b"wrong"),
    }
    .encode_frame(ferry_proto::TenantId(1), 7, &mut hello)
    .unwrap();
    stream.write_all(&hello).await.unwrap();
    stream.flush().await.unwrap();
    let mut answer = bytes::BytesMut::new();
    let mut decoder = ferry_proto::FrameDecoder::new();
    let frame = loop {
        if let Some(ferry_proto::Decoded::Frame(frame)) = decoder.decode(&mut answer).unwrap() {
            break frame;
        }
        let n = tokio::time::timeout(PATIENCE, stream.read_buf(&mut answer))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "the door closed before answering");
    };
    assert_eq!(frame.header.request_id, 7);
    let response = ferry_proto::Response::decode(&frame.header, frame.body).unwrap();
    assert_eq!(response.status, ferry_proto::Status::Unauthorized, "{response:?}");

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let metrics_addr = listener.local_addr().unwrap();
    let endpoints = ferry_net::metrics::Endpoints::always_ready(Arc::new(|| "ferry_test_up 1\n".to_string()));
    tokio::spawn(ferry_net::metrics::serve(listener, endpoints, Some(acceptor), stop_rx));
    let mut scrape = dial(metrics_addr, &pki.ca, Some(&pki.client)).await.unwrap();
    scrape
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    scrape.flush().await.unwrap();
    let mut page = Vec::new();
    // The endpoint closes after its answer (with or without a TLS close_notify).
    let _ = tokio::time::timeout(PATIENCE, scrape.read_to_end(&mut page))
        .await
        .unwrap();
    let page = String::from_utf8_lossy(&page);
    assert!(
        page.starts_with("HTTP/1.1 200 OK") && page.ends_with("ferry_test_up 1\n"),
        "{page}"
    );

    let refused = dial(metrics_addr, &pki.ca, None).await;
    if let Ok(mut refused) = refused {
        let _ = refused.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").await;
        let _ = refused.flush().await;
        let mut page = Vec::new();
        let read = tokio::time::timeout(PATIENCE, refused.read_to_end(&mut page))
            .await
            .unwrap();
        assert!(
            read.is_err() || page.is_empty(),
            "scraped without a certificate: {page:?}"
        );
    }
}
