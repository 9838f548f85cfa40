//! One multiplexed connection to a storage node, over plain TCP or TLS (the code is
//! generic over the stream's halves, so plain TCP pays nothing for TLS).
//!
//! Any number of tasks may send requests on one connection at once: each request gets a
//! fresh id, its frame is appended to a shared outbox that a writer task flushes in as few
//! system calls as possible, and a reader task routes every response to its waiter by id,
//! in whatever order the node answers.

use ferry_proto::TenantId;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{oneshot, Notify, Semaphore};
use tokio::task::JoinHandle;

use ferry_proto::{Decoded, FrameDecoder, HelloInfo, Request, Response, ResponseBody, Status};

use crate::config::ClientConfig;
use crate::error::ClientError;
use crate::gateway_rate::GatewayRate;

/// Requests one connection may have in flight; more wait for a slot. Bounds the client's
/// memory and matches the node's per-connection limit order of magnitude.
pub const MAX_PENDING_PER_CONNECTION: usize = 1024;

/// Bytes requested from the socket per read.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// How often a connection looks for requests past their deadline. Timeouts are checked by
/// one sweeper per connection instead of a timer per request, which would cost a timer
/// insertion and removal on every call; a timeout may thus fire up to this much late.
const TIMEOUT_SWEEP_PERIOD: Duration = Duration::from_millis(50);

/// Who waits for an answer, and until when.
struct Waiter {
    sender: oneshot::Sender<Result<Response, ClientError>>,
    deadline: Instant,
    timeout: Duration,
}

/// State shared by the connection handle and its reader and writer tasks.
struct Shared {
    /// Encoded requests not yet written.
    outbox: Mutex<BytesMut>,
    /// Wakes the writer.
    ready: Notify,
    /// Waiters by request id.
    pending: Mutex<HashMap<u64, Waiter>>,
    /// Set once the connection is unusable; every later request fails fast.
    dead: AtomicBool,
    /// Why it died.
    death: Mutex<Option<String>>,
}

impl Shared {
    /// Marks the connection dead and fails everything waiting on it.
    fn die(&self, why: String) {
        if !self.dead.swap(true, Ordering::SeqCst) {
            tracing::debug!("connection lost: {why}");
        }
        self.death.lock().get_or_insert(why.clone());
        let waiters: Vec<Waiter> = self.pending.lock().drain().map(|(_, waiter)| waiter).collect();
        for waiter in waiters {
            let _ = waiter.sender.send(Err(ClientError::Disconnected(why.clone())));
        }
        self.ready.notify_one();
    }
}

/// The first two bytes of a TLS alert record (content type 21, protocol version 3.x):
/// what a TLS listener sends a client that spoke to it without TLS.
const TLS_ALERT_RECORD: u8 = 0x15;
const TLS_MAJOR_VERSION: u8 = 0x03;

/// Who says hello, to whom, and how long the node may take to answer.
struct HelloAs<'a> {
    addr: &'a str,
    tenant: TenantId,
    token: &'a [u8],
    timeout: Duration,
    /// Whether the stream is TLS (for a clearer error when a plain one meets a TLS node).
    tls: bool,
}

/// A live connection, authenticated as one tenant.
pub(crate) struct Connection {
    shared: Arc<Shared>,
    tenant: TenantId,
    next_id: AtomicU64,
    slots: Semaphore,
    hello: HelloInfo,
    tasks: [JoinHandle<()>; 3],
}

impl Drop for Connection {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Connection {
    /// Connects (over TLS if `config.tls`), says hello and starts the reader and writer
    /// tasks. Every answer that carries a gateway's admission rate (the hello's too)
    /// updates `rate`.
    pub(crate) async fn open(config: &ClientConfig, rate: &GatewayRate) -> Result<Connection, ClientError> {
        let addr = config.addr.as_str();
        let connect_timeout = config.connect_timeout;
        let connect_error = |message: String| ClientError::Connect {
            addr: addr.to_string(),
            message,
        };
        let stream = tokio::time::timeout(connect_timeout, ferry_net::tls::dial::connect_tcp(addr))
            .await
            .map_err(|_| connect_error(format!("timed out after {connect_timeout:?}")))?
            .map_err(|err| connect_error(err.to_string()))?;
        let hello = HelloAs {
            addr,
            tenant: config.tenant,
            token: config.token.as_bytes(),
            timeout: connect_timeout,
            tls: config.tls.is_some(),
        };
        match &config.tls {
            // Plain TCP keeps its owned halves: no lock between the reader and the writer.
            None => {
                let (reader, writer) = stream.into_split();
                Connection::start(reader, writer, hello, rate).await
            }
            Some(tls) => {
                let handshake = ferry_net::tls::dial::handshake(stream, addr, tls);
                let stream = tokio::time::timeout(connect_timeout, handshake)
                    .await
                    .map_err(|_| connect_error(format!("no TLS handshake within {connect_timeout:?}")))?
                    .map_err(|err| connect_error(err.to_string()))?;
                let (reader, writer) = tokio::io::split(stream);
                Connection::start(reader, writer, hello, rate).await
            }
        }
    }

    /// Says hello on a connected stream's halves, then starts the reader, writer and
    /// timeout tasks.
    async fn start<R, W>(
        mut reader: R,
        mut writer: W,
        hello: HelloAs<'_>,
        rate: &GatewayRate,
    ) -> Result<Connection, ClientError>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let HelloAs {
            addr,
            tenant,
            token,
            timeout: connect_timeout,
            tls,
        } = hello;
        let connect_error = |message: String| ClientError::Connect {
            addr: addr.to_string(),
            message,
        };

        // Hello is a plain request/response exchange before the tasks take over.
        let mut frame = BytesMut::new();
        Request::Hello {
            token: bytes::Bytes::copy_from_slice(token),
        }
        .encode_frame(tenant, 0, &mut frame)?;
        let sent = async {
            writer.write_all(&frame).await?;
            writer.flush().await
        };
        sent.await.map_err(|err| connect_error(err.to_string()))?;
        let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
        let mut decoder = FrameDecoder::new();
        let hello = tokio::time::timeout(connect_timeout, async {
            loop {
                if let Some(decoded) = decoder
                    .decode(&mut buf)
                    .map_err(|err| ClientError::Protocol(err.to_string()))?
                {
                    return response_of(decoded);
                }
                // Over TLS, a listener that refuses this client's certificate says so here
                // (TLS 1.3 finishes the client's handshake before the listener checks it).
                let read = reader
                    .read_buf(&mut buf)
                    .await
                    .map_err(|err| connect_error(err.to_string()))?;
                if read == 0 {
                    // A TLS listener answers a plain-text hello with an alert record.
                    let why = if !tls && buf.starts_with(&[TLS_ALERT_RECORD, TLS_MAJOR_VERSION]) {
                        "the node speaks TLS and this client does not (give it the node's CA)"
                    } else {
                        "the node closed the connection during hello"
                    };
                    return Err(connect_error(why.into()));
                }
            }
        })
        .await
        .map_err(|_| connect_error(format!("no hello answer within {connect_timeout:?}")))??;
        rate.observe(hello.admission_rate_ops);
        let hello = match hello {
            Response {
                status: Status::Ok,
                body: ResponseBody::Hello(info),
                ..
            } => info,
            Response {
                status,
                body: ResponseBody::Error { message },
                ..
            } => return Err(ClientError::server(status, message)),
            other => return Err(ClientError::Protocol(format!("unexpected hello answer {other:?}"))),
        };

        let shared = Arc::new(Shared {
            outbox: Mutex::new(BytesMut::with_capacity(READ_CHUNK_BYTES)),
            ready: Notify::new(),
            pending: Mutex::new(HashMap::new()),
            dead: AtomicBool::new(false),
            death: Mutex::new(None),
        });
        let reader_task = tokio::spawn(read_loop(reader, buf, decoder, Arc::clone(&shared), rate.clone()));
        let writer_task = tokio::spawn(write_loop(writer, Arc::clone(&shared)));
        let sweeper_task = tokio::spawn(sweep_timeouts(Arc::clone(&shared)));
        Ok(Connection {
            shared,
            tenant,
            next_id: AtomicU64::new(1),
            slots: Semaphore::new(MAX_PENDING_PER_CONNECTION),
            hello,
            tasks: [reader_task, writer_task, sweeper_task],
        })
    }

    /// What the node said at hello.
    pub(crate) fn hello(&self) -> &HelloInfo {
        &self.hello
    }

    /// True once the connection broke.
    pub(crate) fn is_dead(&self) -> bool {
        self.shared.dead.load(Ordering::SeqCst)
    }

    /// Sends a request and waits for its answer (any status) up to `timeout`.
    pub(crate) async fn call(&self, request: &Request, timeout: Duration) -> Result<Response, ClientError> {
        let _slot = self
            .slots
            .acquire()
            .await
            .map_err(|_| ClientError::Disconnected("connection closed".into()))?;
        if self.is_dead() {
            return Err(ClientError::Disconnected(self.death()));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = oneshot::channel();
        let waiter = Waiter {
            sender,
            deadline: Instant::now() + timeout,
            timeout,
        };
        self.shared.pending.lock().insert(id, waiter);
        let was_empty = {
            let mut outbox = self.shared.outbox.lock();
            let was_empty = outbox.is_empty();
            if let Err(err) = request.encode_frame(self.tenant, id, &mut outbox) {
                drop(outbox);
                self.shared.pending.lock().remove(&id);
                return Err(err.into());
            }
            was_empty
        };
        if was_empty {
            self.shared.ready.notify_one();
        }
        // The connection may have died between the check above and the insert.
        if self.is_dead() {
            if let Some(waiter) = self.shared.pending.lock().remove(&id) {
                drop(waiter);
                return Err(ClientError::Disconnected(self.death()));
            }
        }
        match receiver.await {
            Ok(result) => result,
            Err(_) => Err(ClientError::Disconnected(self.death())),
        }
    }

    fn death(&self) -> String {
        self.shared
            .death
            .lock()
            .clone()
            .unwrap_or_else(|| "connection closed".into())
    }
}

fn response_of(decoded: Decoded) -> Result<Response, ClientError> {
    match decoded {
        Decoded::Frame(frame) => {
            Response::decode(&frame.header, frame.body).map_err(|err| ClientError::Protocol(err.to_string()))
        }
        Decoded::UnknownOpcode(unknown) => Err(ClientError::Protocol(format!(
            "answer with unknown opcode {} for request {}",
            unknown.opcode, unknown.request_id
        ))),
    }
}

fn request_id_of(decoded: &Decoded) -> u64 {
    match decoded {
        Decoded::Frame(frame) => frame.header.request_id,
        Decoded::UnknownOpcode(unknown) => unknown.request_id,
    }
}

async fn read_loop<R: AsyncRead + Unpin>(
    mut reader: R,
    mut buf: BytesMut,
    mut decoder: FrameDecoder,
    shared: Arc<Shared>,
    rate: GatewayRate,
) {
    loop {
        loop {
            match decoder.decode(&mut buf) {
                Ok(None) => break,
                Ok(Some(decoded)) => {
                    if let Decoded::Frame(frame) = &decoded {
                        // Even an answer nobody waits for tells the gateway's current rate.
                        rate.observe(frame.header.admission_rate_ops);
                    }
                    let id = request_id_of(&decoded);
                    // An answer nobody waits for (its request timed out) is dropped.
                    let waiter = shared.pending.lock().remove(&id);
                    if let Some(waiter) = waiter {
                        let _ = waiter.sender.send(response_of(decoded));
                    }
                }
                Err(err) => {
                    shared.die(format!("broken framing from the node: {err}"));
                    return;
                }
            }
        }
        buf.reserve(READ_CHUNK_BYTES);
        match reader.read_buf(&mut buf).await {
            Ok(0) => {
                shared.die("the node closed the connection".into());
                return;
            }
            Ok(_) => {}
            Err(err) => {
                shared.die(err.to_string());
                return;
            }
        }
    }
}

async fn sweep_timeouts(shared: Arc<Shared>) {
    loop {
        tokio::time::sleep(TIMEOUT_SWEEP_PERIOD).await;
        if shared.dead.load(Ordering::SeqCst) {
            return;
        }
        let now = Instant::now();
        let expired: Vec<Waiter> = {
            let mut pending = shared.pending.lock();
            let ids: Vec<u64> = pending
                .iter()
                .filter(|(_, w)| w.deadline <= now)
                .map(|(id, _)| *id)
                .collect();
            ids.iter().filter_map(|id| pending.remove(id)).collect()
        };
        for waiter in expired {
            let timeout = waiter.timeout;
            let _ = waiter.sender.send(Err(ClientError::Timeout(timeout)));
        }
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(mut writer: W, shared: Arc<Shared>) {
    let mut spare = BytesMut::with_capacity(READ_CHUNK_BYTES);
    loop {
        {
            let mut outbox = shared.outbox.lock();
            if !outbox.is_empty() {
                std::mem::swap(&mut *outbox, &mut spare);
            }
        }
        if !spare.is_empty() {
            // The flush is free on plain TCP; TLS may hold written bytes back without it.
            let written = async {
                writer.write_all(&spare).await?;
                writer.flush().await
            };
            if let Err(err) = written.await {
                shared.die(err.to_string());
                return;
            }
            spare.clear();
            continue;
        }
        if shared.dead.load(Ordering::SeqCst) {
            return;
        }
        shared.ready.notified().await;
    }
}
