//! What a well-behaved client never sends, sent to the gateway and the compute node: each
//! costs only its own connection. And the pre-authentication bound: idle connections that
//! never say hello cannot lock a client out.

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use common::*;
use ferry_proto::{Decoded, Frame, FrameDecoder, Request, Response, Status, HEADER_LEN, MAX_BODY_BYTES};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct RawConn {
    stream: TcpStream,
    buf: BytesMut,
    decoder: FrameDecoder,
}

impl RawConn {
    async fn connect(addr: SocketAddr) -> RawConn {
        RawConn {
            stream: TcpStream::connect(addr).await.unwrap(),
            buf: BytesMut::new(),
            decoder: FrameDecoder::new(),
        }
    }

    async fn send_bytes(&mut self, bytes: &[u8]) {
        // The peer may already have closed: that is an answer too, read by `recv`.
        let _ = self.stream.write_all(bytes).await;
    }

    async fn send(&mut self, tenant: u32, request_id: u64, request: &Request) {
        let mut out = BytesMut::new();
        request
            .encode_frame(ferry_proto::TenantId(tenant), request_id, &mut out)
            .unwrap();
        self.send_bytes(&out).await;
    }

    /// The next frame, or `None` once the peer closed.
    async fn recv_decoded(&mut self) -> Option<Decoded> {
        loop {
            if let Some(decoded) = self.decoder.decode(&mut self.buf).expect("answers are valid frames") {
                return Some(decoded);
            }
            let read = tokio::time::timeout(Duration::from_secs(20), self.stream.read_buf(&mut self.buf))
                .await
                .expect("an answer within 20 s");
            match read {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
        }
    }

    async fn recv(&mut self) -> Option<Frame> {
        match self.recv_decoded().await? {
            Decoded::Frame(frame) => Some(frame),
            Decoded::UnknownOpcode(unknown) => panic!("unexpected {unknown:?}"),
        }
    }

    async fn response(&mut self) -> (u64, Response) {
        let frame = self.recv().await.expect("an answer, not a close");
        let id = frame.header.request_id;
        (id, Response::decode(&frame.header, frame.body).unwrap())
    }

    async fn hello(&mut self, token: &str) -> Status {
        self.send(
            TENANT,
            0,
            &Request::Hello {
                token: Bytes::copy_from_slice(token.as_bytes()),
            },
        )
        .await;
        self.response().await.1.status
    }
}

/// Everything below against one process; `is_compute` says which answers to expect.
async fn misbehave(addr: SocketAddr, is_compute: bool) {
    let legit = client(addr).await;

    // Random garbage: that connection is closed.
    let mut state = 0x1234_5678_9abc_def0u64;
    for round in 0..20 {
        let mut raw = RawConn::connect(addr).await;
        let garbage: Vec<u8> = (0..(64 + round * 37))
            .map(|_| {
                state = ferry_func::args::mix64(state);
                state as u8
            })
            .collect();
        raw.send_bytes(&garbage).await;
        assert!(raw.recv().await.is_none(), "garbage must end in a clean close");
    }

    // Requests before hello are refused; three wrong tokens close the connection.
    let mut raw = RawConn::connect(addr).await;
    raw.send(TENANT, 1, &Request::Stats).await;
    assert_eq!(raw.response().await.1.status, Status::Unauthorized);
    for _ in 0..2 {
        assert_eq!(raw.hello("wrong").await, Status::Unauthorized);
    }
    assert_eq!(raw.hello("wrong").await, Status::Unauthorized);
    assert!(raw.recv().await.is_none(), "closed after three failed hellos");

    // After hello: a truncated body, an unknown opcode, another tenant's id, a response
    // frame, and (on a compute node) a data operation are answered, and the connection
    // keeps working.
    let mut raw = RawConn::connect(addr).await;
    assert_eq!(raw.hello(TOKEN).await, Status::Ok);
    let mut frame = BytesMut::new();
    Request::Get {
        table: "t".into(),
        key: Bytes::from_static(b"key"),
        validate: vec![],
    }
    .encode_frame(ferry_proto::TenantId(TENANT), 7, &mut frame)
    .unwrap();
    let body_len = frame.len() - HEADER_LEN - 2;
    frame.truncate(frame.len() - 2);
    frame[20..24].copy_from_slice(&(body_len as u32).to_le_bytes());
    raw.send_bytes(&frame).await;
    let (id, answer) = raw.response().await;
    assert_eq!((id, answer.status), (7, Status::BadRequest));
    let mut frame = BytesMut::new();
    Request::Stats
        .encode_frame(ferry_proto::TenantId(TENANT), 8, &mut frame)
        .unwrap();
    frame[3] = 250;
    raw.send_bytes(&frame).await;
    match raw.recv_decoded().await.unwrap() {
        Decoded::UnknownOpcode(answer) => assert_eq!((answer.opcode, answer.status), (250, Status::BadRequest)),
        other => panic!("expected the unknown opcode echoed, got {other:?}"),
    }
    raw.send(TENANT + 1, 9, &Request::Stats).await;
    assert_eq!(raw.response().await.1.status, Status::Unauthorized);
    let mut frame = BytesMut::new();
    Request::Stats
        .encode_frame(ferry_proto::TenantId(TENANT), 10, &mut frame)
        .unwrap();
    frame[4] = 1; // the response flag
    raw.send_bytes(&frame).await;
    assert_eq!(raw.response().await.1.status, Status::BadRequest);
    let put = Request::Put {
        table: "t".into(),
        key: Bytes::from_static(b"k"),
        value: Bytes::from_static(b"v"),
    };
    raw.send(TENANT, 11, &put).await;
    let expected = if is_compute { Status::BadRequest } else { Status::Ok };
    assert_eq!(raw.response().await.1.status, expected);
    raw.send(TENANT, 12, &Request::Stats).await;
    assert_eq!(raw.response().await.1.status, Status::Ok);

    // A header announcing more than the largest body: answered too_large, then closed.
    let mut frame = BytesMut::new();
    Request::Stats
        .encode_frame(ferry_proto::TenantId(TENANT), 13, &mut frame)
        .unwrap();
    frame[20..24].copy_from_slice(&(MAX_BODY_BYTES + 1).to_le_bytes());
    raw.send_bytes(&frame).await;
    assert_eq!(raw.response().await.1.status, Status::TooLarge);
    assert!(raw.recv().await.is_none());

    // Half a frame, then gone; a pipelined burst, then gone before reading.
    let mut raw = RawConn::connect(addr).await;
    assert_eq!(raw.hello(TOKEN).await, Status::Ok);
    let mut frame = BytesMut::new();
    put.encode_frame(ferry_proto::TenantId(TENANT), 1, &mut frame).unwrap();
    raw.send_bytes(&frame[..frame.len() / 2]).await;
    drop(raw);
    let mut raw = RawConn::connect(addr).await;
    assert_eq!(raw.hello(TOKEN).await, Status::Ok);
    let mut burst = BytesMut::new();
    for id in 0..600u64 {
        Request::Stats
            .encode_frame(ferry_proto::TenantId(TENANT), id, &mut burst)
            .unwrap();
    }
    raw.send_bytes(&burst).await;
    drop(raw);

    // The well-behaved client never noticed.
    let process = if is_compute { "compute" } else { "gateway" };
    assert!(stat(&legit, &format!("{process}.framing_errors")).await >= 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_costs_only_its_connection_on_gateway_and_compute_node() {
    let cluster = default_cluster("rpc").await;
    misbehave(cluster.gateway.local_addr(), false).await;
    misbehave(cluster.compute.local_addr(), true).await;
    // Both still serve.
    let gateway = client(cluster.gateway.local_addr()).await;
    gateway.put("t", b"after", b"ok").await.unwrap();
    assert_eq!(&gateway.get("t", b"after").await.unwrap().unwrap().value[..], b"ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_unauthenticated_connections_cannot_lock_a_client_out() {
    let limited = || {
        let mut config = front_config();
        config.max_connections = 64;
        config.max_unauthenticated = 16;
        config.hello_timeout = Duration::from_millis(500);
        config
    };
    let (gateway_front, compute_front) = (limited(), limited());
    let cluster = tokio::task::spawn_blocking(move || cluster("rpc", gateway_front, compute_front))
        .await
        .unwrap();
    for addr in [cluster.gateway.local_addr(), cluster.compute.local_addr()] {
        let mut idle = Vec::new();
        for _ in 0..300 {
            idle.push(TcpStream::connect(addr).await.unwrap());
        }
        // A client gets in (retrying, as the listen backlog may let late idle connects
        // evict its first try) and is served.
        let mut tries = 0;
        let legit = loop {
            tries += 1;
            let mut config = ferry_client::ClientConfig::new(addr.to_string(), ferry_proto::TenantId(TENANT), TOKEN);
            config.registry = ferry_lua::registry();
            match ferry_client::Client::connect(config).await {
                Ok(client) => break client,
                Err(err) if tries < 5 => eprintln!("try {tries}: {err}"),
                Err(err) => panic!("the client never got in: {err}"),
            }
        };
        legit.stats().await.unwrap();
        for mut socket in idle {
            let mut byte = [0u8; 1];
            let read = tokio::time::timeout(Duration::from_secs(5), socket.read(&mut byte))
                .await
                .expect("an idle unauthenticated connection is closed");
            assert!(matches!(read, Ok(0) | Err(_)), "an idle connection got data: {read:?}");
        }
        // One that sends nothing is closed by the timeout, not sooner.
        let started = Instant::now();
        let mut late = TcpStream::connect(addr).await.unwrap();
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(5), late.read(&mut byte)).await;
        assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "{read:?}");
        assert!(
            started.elapsed() >= Duration::from_millis(250),
            "closed before its timeout"
        );
        legit.stats().await.unwrap();
    }
}
