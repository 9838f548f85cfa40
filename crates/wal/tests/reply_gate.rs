//! Replies wait at the log's reply gate: with a write appended to the log and not yet
//! released, no reply leaves, on either listener's connection (`ferry_net`'s RESP and
//! ferry-protocol listeners, which see the gate through their `ReplyGate` trait); once
//! released, it does.

use std::sync::Arc;
use std::time::Duration;

use ferry_net::connections::Connections;
use ferry_net::resp::{Queued, RespFuture, RespService};
use ferry_resp::Reply;
use ferry_wal::ReplyGate;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A RESP service that only has a gate: every command is a session command (PING) here.
struct Gated {
    connections: Arc<Connections>,
    gate: ReplyGate,
}

impl RespService for Gated {
    type Tenant = ();

    fn sign_in(&self, _id: ferry_proto::TenantId, _password: &[u8]) -> Option<()> {
        None
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

    fn reply_gate(&self) -> Option<&dyn ferry_net::gate::ReplyGate> {
        Some(&self.gate)
    }
}

#[tokio::test]
async fn a_resp_reply_waits_until_the_log_releases_what_was_appended_before_it() {
    let service = Arc::new(Gated {
        connections: Connections::new(16, 16, Duration::from_secs(30)),
        gate: ReplyGate::new(0),
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (_stop, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(ferry_net::resp::serve(Arc::clone(&service), listener, None, stop_rx));

    let mut stream = TcpStream::connect(addr).await.unwrap();
    // Released: answered at once.
    stream.write_all(b"PING\r\n").await.unwrap();
    let mut reply = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut reply))
        .await
        .unwrap()
        .unwrap();
    assert!(n > 0);

    // A write appended and not yet durable: the next reply is held back.
    service.gate.appended(100);
    stream.write_all(b"PING\r\n").await.unwrap();
    let held = tokio::time::timeout(Duration::from_millis(300), stream.read(&mut reply)).await;
    assert!(held.is_err(), "a reply left before the log released what it may reveal");
    service.gate.release(100);
    let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut reply))
        .await
        .unwrap()
        .unwrap();
    assert!(n > 0, "released, the reply is sent");
}

/// A ferry-protocol door with only a gate: every hello is refused (an answer all the same).
struct GatedDoor {
    connections: Arc<Connections>,
    gate: Arc<ReplyGate>,
}

impl ferry_net::door::Door for GatedDoor {
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

    fn reply_gate(&self) -> Option<Arc<dyn ferry_net::gate::ReplyGate>> {
        Some(Arc::clone(&self.gate) as Arc<dyn ferry_net::gate::ReplyGate>)
    }
}

#[tokio::test]
async fn a_ferry_protocol_answer_waits_until_the_log_releases_what_was_appended_before_it() {
    let door = Arc::new(GatedDoor {
        connections: Connections::new(16, 16, Duration::from_secs(30)),
        gate: Arc::new(ReplyGate::new(0)),
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (_stop, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(ferry_net::door::serve(Arc::clone(&door), listener, None, stop_rx));

    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut hello = bytes::BytesMut::new();
    ferry_proto::Request::Hello {
        token: bytes::Bytes::from_static(b"wrong"),
    }
    .encode_frame(ferry_proto::TenantId(1), 1, &mut hello)
    .unwrap();
    door.gate.appended(100);
    stream.write_all(&hello).await.unwrap();
    let mut answer = [0u8; 256];
    let held = tokio::time::timeout(Duration::from_millis(300), stream.read(&mut answer)).await;
    assert!(
        held.is_err(),
        "an answer left before the log released what it may reveal"
    );
    door.gate.release(100);
    let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut answer))
        .await
        .unwrap()
        .unwrap();
    assert!(n > 0, "released, the answer is sent");
}
