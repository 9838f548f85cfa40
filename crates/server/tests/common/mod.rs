//! Shared set-up for the storage-node integration tests: a node on port 0 with two
//! tenants and a registry holding the built-ins plus misbehaving test functions.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_client::{Client, ClientConfig};
use ferry_cluster::ClusterMap;
use ferry_func::{Ctx, FnError, FnFuture, Registry};
use ferry_server::routing::ClusterRole;
use ferry_server::{ServerConfig, ServerHandle, TenantConfig};

pub const TENANT_A: u32 = 1;
pub const TOKEN_A: &str = "alpha-secret";
pub const TENANT_B: u32 = 2;
pub const TOKEN_B: &str = "beta-secret";

/// Budget of test nodes: short, so budget tests are quick, yet far above any honest call.
pub const TEST_BUDGET: Duration = Duration::from_millis(50);

/// Panics inside a storage function.
fn panics(_ctx: &mut dyn Ctx) -> FnFuture<'_> {
    Box::pin(async move { panic!("deliberate panic in a storage function") })
}

/// Returns an error of its own.
fn fails(_ctx: &mut dyn Ctx) -> FnFuture<'_> {
    Box::pin(async move { Err(FnError::Failed("deliberate failure".into())) })
}

/// Spins without ever calling its Ctx for the number of milliseconds in its args (u64).
fn spins(ctx: &mut dyn Ctx) -> FnFuture<'_> {
    let millis = u64::from_le_bytes(ctx.args()[..8].try_into().unwrap_or([0; 8]));
    Box::pin(async move {
        let until = Instant::now() + Duration::from_millis(millis);
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        Ok(Bytes::from_static(b"spun"))
    })
}

/// Calls its Ctx forever (yielding each time), so only the CPU budget can stop it.
fn loops(ctx: &mut dyn Ctx) -> FnFuture<'_> {
    Box::pin(async move {
        loop {
            ctx.get("nothing", b"here").await?;
            ferry_func::work::spin_ns(20_000);
        }
    })
}

/// Writes its args under key "echo" of table "scratch" and returns them.
fn writes(ctx: &mut dyn Ctx) -> FnFuture<'_> {
    Box::pin(async move {
        let args = ctx.args().clone();
        ctx.put("scratch", b"echo", args.clone()).await?;
        Ok(args)
    })
}

/// Reads `pushback.a`, burns its args' u64 of nanoseconds, reads `pushback.b`, and returns
/// both values joined: compute-bound between its two accesses, so a node with a small
/// pushback credit hands it back at the second one.
fn reads_two(ctx: &mut dyn Ctx) -> FnFuture<'_> {
    let spin = u64::from_le_bytes(ctx.args()[..8].try_into().unwrap_or([0; 8]));
    Box::pin(async move {
        let a = ctx.get("pushback", b"a").await?.unwrap_or_default();
        ferry_func::work::spin_ns(spin);
        let b = ctx.get("pushback", b"b").await?.unwrap_or_default();
        Ok(Bytes::from([&a[..], b"|", &b[..]].concat()))
    })
}

/// Sums the balances of YCSB-T accounts `0..n` (`n` in the arguments) in one multiget: a
/// snapshot spanning the nodes of a cluster.
fn sums_accounts(ctx: &mut dyn Ctx) -> FnFuture<'_> {
    let n = u64::from_le_bytes(ctx.args()[..8].try_into().unwrap_or([0; 8]));
    Box::pin(async move {
        let keys: Vec<Bytes> = (0..n).map(ferry_func::builtins::traverse::key).collect();
        let values = ctx.multiget(ferry_func::builtins::ycsbt::TABLE, &keys).await?;
        let mut sum = 0u64;
        for value in values.iter().flatten() {
            sum += u64::from_le_bytes(
                value[..8]
                    .try_into()
                    .map_err(|_| FnError::Failed("short account".into()))?,
            );
        }
        Ok(Bytes::copy_from_slice(&sum.to_le_bytes()))
    })
}

/// Reads two counters of table `pair` one after the other (keys `A|B` in the arguments)
/// and returns both values (u64 each, 0 when absent).
fn reads_pair(ctx: &mut dyn Ctx) -> FnFuture<'_> {
    let args = ctx.args().clone();
    Box::pin(async move {
        let split = args
            .iter()
            .position(|b| *b == b'|')
            .ok_or_else(|| FnError::BadArgs("A|B".into()))?;
        let mut out = Vec::with_capacity(16);
        for key in [&args[..split], &args[split + 1..]] {
            let value = ctx
                .get("pair", key)
                .await?
                .unwrap_or_else(|| Bytes::from_static(&[0; 8]));
            out.extend_from_slice(&value[..8]);
        }
        Ok(Bytes::from(out))
    })
}

pub fn registry() -> Registry {
    let mut registry = ferry_lua::registry();
    registry.register("test.panic", panics).unwrap();
    registry.register("test.fail", fails).unwrap();
    registry.register("test.spin", spins).unwrap();
    registry.register("test.loop", loops).unwrap();
    registry.register("test.write", writes).unwrap();
    registry.register("test.reads_two", reads_two).unwrap();
    registry.register("test.sum_accounts", sums_accounts).unwrap();
    registry.register("test.reads_pair", reads_pair).unwrap();
    registry
}

pub fn tenants() -> Vec<TenantConfig> {
    vec![
        TenantConfig {
            id: ferry_proto::TenantId(TENANT_A),
            token: TOKEN_A.into(),
            quota_bytes: 64 << 20,
            home_core: None,
            maxmemory_policy: Default::default(),
        },
        TenantConfig {
            id: ferry_proto::TenantId(TENANT_B),
            token: TOKEN_B.into(),
            quota_bytes: 64 << 20,
            home_core: None,
            maxmemory_policy: Default::default(),
        },
    ]
}

pub fn config(cores: usize) -> ServerConfig {
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), cores, tenants());
    config.invoke_budget = TEST_BUDGET;
    // A fixed rate: tests do not need calibration and must not pay for it.
    config.spin_iters_per_ms = Some(ferry_func::work::DEFAULT_ITERS_PER_MS);
    config
}

pub fn start(cores: usize) -> ServerHandle {
    start_with(config(cores))
}

pub fn start_with(config: ServerConfig) -> ServerHandle {
    ferry_server::start(config, registry()).expect("test node starts")
}

/// A one-core test node with a RESP port.
pub fn resp_node() -> ServerHandle {
    let mut config = config(1);
    config.resp_listen = Some("127.0.0.1:0".parse().unwrap());
    start_with(config)
}

/// A Redis client of `server`'s RESP port, signed in as `tenant`.
pub fn resp_connect(server: &ServerHandle, tenant: u32, token: &str) -> redis::Connection {
    let addr = server.resp_addr().unwrap();
    let client = redis::Client::open(format!("redis://{tenant}:{token}@{addr}/")).unwrap();
    client.get_connection_with_timeout(Duration::from_secs(10)).unwrap()
}

pub async fn client(server: &ServerHandle, tenant: u32, token: &str) -> Client {
    let mut config = ClientConfig::new(server.local_addr().to_string(), ferry_proto::TenantId(tenant), token);
    config.registry = registry();
    config.request_timeout = Duration::from_secs(20);
    Client::connect(config).await.expect("client connects")
}

pub async fn client_a(server: &ServerHandle) -> Client {
    client(server, TENANT_A, TOKEN_A).await
}

pub async fn client_b(server: &ServerHandle) -> Client {
    client(server, TENANT_B, TOKEN_B).await
}

/// A connection speaking raw frames, for tests of what a well-behaved client never sends.
pub struct RawConn {
    stream: tokio::net::TcpStream,
    buf: bytes::BytesMut,
    decoder: ferry_proto::FrameDecoder,
}

impl RawConn {
    pub async fn connect(server: &ServerHandle) -> RawConn {
        RawConn {
            stream: tokio::net::TcpStream::connect(server.local_addr()).await.unwrap(),
            buf: bytes::BytesMut::new(),
            decoder: ferry_proto::FrameDecoder::new(),
        }
    }

    pub async fn send_bytes(&mut self, bytes: &[u8]) {
        use tokio::io::AsyncWriteExt;
        self.stream.write_all(bytes).await.unwrap();
    }

    pub async fn send(&mut self, tenant: u32, request_id: u64, request: &ferry_proto::Request) {
        let mut out = bytes::BytesMut::new();
        request
            .encode_frame(ferry_proto::TenantId(tenant), request_id, &mut out)
            .unwrap();
        self.send_bytes(&out).await;
    }

    /// The next frame, or `None` once the node closed the connection. Fails the test after
    /// 20 s of silence rather than hanging.
    pub async fn recv(&mut self) -> Option<ferry_proto::Frame> {
        match self.recv_decoded().await? {
            ferry_proto::Decoded::Frame(frame) => Some(frame),
            ferry_proto::Decoded::UnknownOpcode(unknown) => panic!("unexpected {unknown:?}"),
        }
    }

    /// The next frame, including one with an opcode this build does not know.
    pub async fn recv_decoded(&mut self) -> Option<ferry_proto::Decoded> {
        use tokio::io::AsyncReadExt;
        loop {
            if let Some(decoded) = self.decoder.decode(&mut self.buf).expect("node frames are valid") {
                return Some(decoded);
            }
            let read = tokio::time::timeout(Duration::from_secs(20), self.stream.read_buf(&mut self.buf))
                .await
                .expect("node answers within 20 s");
            match read {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
        }
    }

    /// The next response, decoded.
    pub async fn recv_response(&mut self) -> (u64, ferry_proto::Response) {
        let frame = self.recv().await.expect("a response, not a closed connection");
        let id = frame.header.request_id;
        (id, ferry_proto::Response::decode(&frame.header, frame.body).unwrap())
    }

    pub async fn hello(&mut self, tenant: u32, token: &str) -> ferry_proto::Response {
        self.send(
            tenant,
            0,
            &ferry_proto::Request::Hello {
                token: Bytes::copy_from_slice(token.as_bytes()),
            },
        )
        .await;
        self.recv_response().await.1
    }
}

/// Two nodes on loopback ports the OS gave (bound before the map is built: the map must
/// name the addresses before the nodes start) and their map.
pub fn two_nodes() -> (Vec<ServerHandle>, ClusterMap) {
    let listeners: Vec<ferry_server::Listeners> = (0..2)
        .map(|_| ferry_server::Listeners::loopback(false).unwrap())
        .collect();
    let addrs: Vec<String> = listeners.iter().map(|bound| bound.addr().to_string()).collect();
    let map = ClusterMap::even(&addrs).unwrap();
    let servers = map
        .nodes()
        .iter()
        .zip(listeners)
        .map(|(node, listeners)| {
            let mut config = config(1);
            config.cluster = Some(ClusterRole::fixed(map.clone(), node.id.clone()));
            ferry_server::start_on(config, registry(), listeners).expect("test node starts")
        })
        .collect();
    (servers, map)
}
