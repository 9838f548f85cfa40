//! The ferry protocol's front door, one for every process that serves it (the storage
//! node, the gateway, the compute node): accepting, TLS when the process has it (generic
//! over the stream, so plain TCP keeps its lock-free owned halves), framing, hello against the process's
//! tenants, the pre-authentication bound and the authenticated seats ([`Connections`]), a
//! bound on each connection's requests in flight and unsent answers, and the [`Outbox`]
//! that writes answers in as few system calls as possible. A process keeps only its
//! dispatch ([`Door::dispatch`]).
//!
//! Requests may be answered out of order, from any thread; the request id in each answer
//! says which request it answers. A connection with [`MAX_INFLIGHT_PER_CONNECTION`]
//! unanswered requests, or [`MAX_OUTBOX_BYTES`] of unsent answers, is not read until they
//! drain: a client cannot queue unbounded work or memory by pipelining without reading.

use ferry_proto::TenantId;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::BytesMut;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};

use ferry_proto::{
    encode_unknown_opcode_response, Decoded, Frame, FrameDecoder, FrameError, FrameKind, Header, Opcode, Request,
    Response, Status,
};

use crate::connections::{Connections, Seat};
use crate::gate::ReplyGate;
use crate::preauth::{unauthenticated_over, Ticket, MAX_FAILED_HELLOS};
use crate::tls::Acceptor;

/// Requests one connection may have in flight (accepted, not yet answered).
pub const MAX_INFLIGHT_PER_CONNECTION: usize = 512;

/// Encoded answers a connection may hold unsent before it is no longer read (a client
/// that does not read its answers stalls only itself).
pub const MAX_OUTBOX_BYTES: usize = 8 * 1024 * 1024;

/// Bytes requested from the socket per read: enough for hundreds of pipelined small
/// requests in one system call.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// What a process serves behind the door.
pub trait Door: Send + Sync + 'static {
    /// A signed-in tenant.
    type Tenant: Send + Sync + 'static;

    /// The process's connections, shared with its other listeners.
    fn connections(&self) -> &Arc<Connections>;

    /// The tenant `id` if `token` is its token.
    fn sign_in(&self, id: TenantId, token: &[u8]) -> Option<Self::Tenant>;

    /// The answer to a tenant's successful hello.
    fn welcome(&self, tenant: &Self::Tenant) -> Response;

    /// Runs one request (never a hello) of the connection's signed-in tenant and answers it
    /// with [`Outbox::respond`], exactly once, now or later, from any thread. Must not
    /// panic on any request.
    fn dispatch(self: &Arc<Self>, tenant: &Self::Tenant, header: Header, request: Request, outbox: &Arc<Outbox>);

    /// The gate answers pass before they are sent, when the process has a write-ahead log:
    /// an answer must not reveal a write before the log holds it.
    fn reply_gate(&self) -> Option<Arc<dyn ReplyGate>> {
        None
    }

    /// Whether new connections run on runtimes of the process's own (a storage node's
    /// core loops); only then are their first bytes awaited to choose one.
    fn places_connections(&self) -> bool {
        false
    }

    /// The runtime a new connection's task runs on, given the tenant its hello names (if
    /// its first bytes held one); `None`: the listener's own.
    fn runtime_for_connection(&self, _hello_tenant: Option<TenantId>) -> Option<tokio::runtime::Handle> {
        None
    }
}

/// Accepts connections until `shutdown` turns true; with `tls`, each speaks TLS (the
/// handshake in the connection's task, within its hello timeout).
pub async fn serve<D: Door>(
    door: Arc<D>,
    listener: TcpListener,
    tls: Option<Acceptor>,
    shutdown: watch::Receiver<bool>,
) {
    let connections_shutdown = shutdown.clone();
    crate::accept::accept_loop(listener, "ferry listener", shutdown, |stream, peer| {
        if door.connections().full() {
            tracing::debug!(%peer, "connection refused: every authenticated seat is taken");
            return std::future::ready(());
        }
        tracing::debug!(%peer, "connection accepted");
        let open = door.connections().open();
        let door = Arc::clone(&door);
        let shutdown = connections_shutdown.clone();
        let tls = tls.clone();
        // Without TLS the hello's header names the tenant, so the connection starts on its
        // home core.
        let placing = Arc::clone(&door);
        let choose = move |first: &[u8]| placing.runtime_for_connection(ferry_proto::Header::peek_tenant(first));
        crate::place::spawn_placed(stream, door.places_connections(), choose, move |stream| async move {
            connection(door, stream, peer, tls, shutdown).await;
            drop(open);
        });
        std::future::ready(())
    })
    .await;
}

/// Answers waiting to be written to one connection.
pub struct Outbox {
    /// Encoded frames not yet written.
    buf: Mutex<BytesMut>,
    /// Wakes the writer when `buf` goes from empty to non-empty.
    ready: Notify,
    /// Wakes the reader when in-flight requests or buffered bytes drop.
    space: Notify,
    /// Requests accepted but not yet answered.
    inflight: AtomicUsize,
    /// The writer cannot write any more (peer gone): answers are dropped.
    closed: AtomicBool,
    /// The reader stopped: the writer exits once everything in flight is answered.
    reader_done: AtomicBool,
}

impl Outbox {
    fn new() -> Outbox {
        Outbox {
            buf: Mutex::new(BytesMut::with_capacity(READ_CHUNK_BYTES)),
            ready: Notify::new(),
            space: Notify::new(),
            inflight: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            reader_done: AtomicBool::new(false),
        }
    }

    /// Registers a request that will be answered with [`Outbox::respond`].
    fn accept(&self) {
        self.inflight.fetch_add(1, Ordering::AcqRel);
    }

    fn has_space(&self) -> bool {
        self.inflight.load(Ordering::Acquire) < MAX_INFLIGHT_PER_CONNECTION && self.buf.lock().len() < MAX_OUTBOX_BYTES
    }

    /// Appends the answer to one accepted request. Callable from any thread.
    pub fn respond(&self, opcode: Opcode, tenant: TenantId, request_id: u64, response: &Response) {
        if !self.closed.load(Ordering::Acquire) {
            let mut buf = self.buf.lock();
            let was_empty = buf.is_empty();
            if let Err(err) = response.encode_frame(opcode, tenant, request_id, &mut buf) {
                // Only an oversized result gets here: answer with why instead.
                let fallback = Response::error(Status::TooLarge, format!("response cannot be encoded: {err}"));
                fallback
                    .encode_frame(opcode, tenant, request_id, &mut buf)
                    .expect("a short error response always encodes");
            }
            drop(buf);
            if was_empty {
                self.ready.notify_one();
            }
        }
        if self.inflight.fetch_sub(1, Ordering::AcqRel) == 1 {
            // The writer may be waiting for the last answer before closing.
            self.ready.notify_one();
        }
    }

    fn respond_unknown_opcode(&self, raw_opcode: u8, tenant: TenantId, request_id: u64) {
        {
            let mut buf = self.buf.lock();
            encode_unknown_opcode_response(raw_opcode, tenant, request_id, &mut buf)
                .expect("a short error response always encodes");
        }
        self.ready.notify_one();
    }
}

/// What the reader knows about the connection's peer.
struct Session<T> {
    /// The tenant it said hello as, and its id.
    tenant: Option<(TenantId, T)>,
    failed_hellos: u32,
    /// Held from a successful hello until the connection closes.
    seat: Option<Seat>,
}

/// Whether the reader keeps going after a frame.
enum Next {
    Continue,
    Close,
}

/// Serves one connection until the peer leaves, framing breaks or the process stops.
async fn connection<D: Door>(
    door: Arc<D>,
    stream: TcpStream,
    peer: std::net::SocketAddr,
    tls: Option<Acceptor>,
    mut shutdown: watch::Receiver<bool>,
) {
    // Small answers must not wait for Nagle's algorithm.
    let _ = stream.set_nodelay(true);
    let connections = door.connections();
    // Held until the connection authenticates: bounds how long and how many may wait, a
    // TLS handshake included.
    let ticket = connections.preauth.admit();
    let hello_deadline = tokio::time::Instant::now() + connections.hello_timeout;
    match tls {
        // Plain TCP keeps its owned halves: no lock between the reader and the writer.
        None => {
            let (reader, writer) = stream.into_split();
            halves(door, reader, writer, ticket, hello_deadline, shutdown).await;
        }
        Some(tls) => {
            let Some(stream) = tls
                .handshake_before(stream, peer, &ticket, hello_deadline, &mut shutdown)
                .await
            else {
                return;
            };
            let (reader, writer) = tokio::io::split(stream);
            halves(door, reader, writer, ticket, hello_deadline, shutdown).await;
        }
    }
}

/// Serves a connection's two halves: the reader here, the writer in a task of its own.
async fn halves<D, R, W>(
    door: Arc<D>,
    reader: R,
    writer: W,
    ticket: Ticket,
    hello_deadline: tokio::time::Instant,
    shutdown: watch::Receiver<bool>,
) where
    D: Door,
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let outbox = Arc::new(Outbox::new());
    let writer_task = tokio::spawn(write_loop(writer, Arc::clone(&outbox), door.reply_gate()));
    read_loop(&door, reader, &outbox, ticket, hello_deadline, shutdown).await;
    outbox.reader_done.store(true, Ordering::Release);
    outbox.ready.notify_one();
    let _ = writer_task.await;
}

async fn read_loop<D: Door, R: AsyncRead + Unpin>(
    door: &Arc<D>,
    mut reader: R,
    outbox: &Arc<Outbox>,
    ticket: Ticket,
    hello_deadline: tokio::time::Instant,
    mut shutdown: watch::Receiver<bool>,
) {
    let connections = door.connections();
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let mut decoder = FrameDecoder::new();
    let mut session = Session {
        tenant: None,
        failed_hellos: 0,
        seat: None,
    };
    // Dropped once the connection authenticates.
    let mut ticket = Some(ticket);
    loop {
        while !outbox.has_space() {
            tokio::select! {
                _ = outbox.space.notified() => {}
                _ = shutdown.changed() => return,
            }
        }
        buf.reserve(READ_CHUNK_BYTES);
        let read = tokio::select! {
            read = reader.read_buf(&mut buf) => read,
            _ = shutdown.changed() => return,
            _ = unauthenticated_over(ticket.as_ref(), hello_deadline) => {
                connections.counters.unauthenticated_closed.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        match read {
            Ok(0) | Err(_) => return, // peer left; a partial frame is simply dropped
            Ok(_) => {}
        }
        loop {
            match decoder.decode(&mut buf) {
                Ok(None) => break,
                Ok(Some(Decoded::Frame(frame))) => {
                    if let Next::Close = handle_frame(door, &mut session, outbox, frame) {
                        return;
                    }
                    if session.tenant.is_some() {
                        ticket = None;
                    }
                }
                Ok(Some(Decoded::UnknownOpcode(unknown))) => {
                    outbox.respond_unknown_opcode(unknown.opcode, unknown.tenant, unknown.request_id);
                }
                Err(err) => {
                    connections.counters.framing_errors.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!("closing a connection: {err}");
                    if let FrameError::BodyTooLarge { request_id, .. } = err {
                        // The length is known to be hostile or broken: answer, then close.
                        outbox.accept();
                        outbox.respond(
                            Opcode::Stats,
                            TenantId(0),
                            request_id,
                            &Response::error(Status::TooLarge, err.to_string()),
                        );
                    }
                    return;
                }
            }
        }
    }
}

fn handle_frame<D: Door>(door: &Arc<D>, session: &mut Session<D::Tenant>, outbox: &Arc<Outbox>, frame: Frame) -> Next {
    let header = frame.header;
    outbox.accept();
    let reply = |response: Response| outbox.respond(header.opcode, header.tenant, header.request_id, &response);
    if header.kind != FrameKind::Request {
        reply(Response::error(Status::BadRequest, "expected a request frame"));
        return Next::Continue;
    }
    if header.opcode == Opcode::Hello {
        let (answer, next) = hello(door.as_ref(), session, header.tenant, frame);
        reply(answer);
        return next;
    }
    let Some((id, tenant)) = &session.tenant else {
        reply(Response::error(Status::Unauthorized, "say hello first"));
        return Next::Continue;
    };
    if header.tenant != *id {
        reply(Response::error(
            Status::Unauthorized,
            format!("this connection belongs to tenant {id}, not {}", header.tenant),
        ));
        return Next::Continue;
    }
    match Request::decode(header.opcode, frame.body) {
        Ok(Request::Hello { .. }) => unreachable!("a hello opcode is answered above"),
        Ok(request) => door.dispatch(tenant, header, request, outbox),
        Err(err) => reply(Response::error(Status::BadRequest, err.to_string())),
    }
    Next::Continue
}

fn hello<D: Door>(door: &D, session: &mut Session<D::Tenant>, tenant_id: TenantId, frame: Frame) -> (Response, Next) {
    if session.tenant.is_some() {
        let refusal = Response::error(Status::BadRequest, "connection already authenticated");
        return (refusal, Next::Continue);
    }
    let token = match Request::decode(Opcode::Hello, frame.body) {
        Ok(Request::Hello { token }) => token,
        Ok(_) | Err(_) => return (Response::error(Status::BadRequest, "malformed hello"), Next::Continue),
    };
    let Some(tenant) = door.sign_in(tenant_id, &token) else {
        // Unknown tenant and wrong token look the same, so tenant ids cannot be probed.
        session.failed_hellos += 1;
        let next = if session.failed_hellos >= MAX_FAILED_HELLOS {
            Next::Close
        } else {
            Next::Continue
        };
        return (
            Response::error(Status::Unauthorized, "unknown tenant or wrong token"),
            next,
        );
    };
    match door.connections().take_seat() {
        Ok(seat) => {
            let answer = door.welcome(&tenant);
            session.seat = Some(seat);
            session.tenant = Some((tenant_id, tenant));
            (answer, Next::Continue)
        }
        Err(why) => (Response::error(Status::Overloaded, why), Next::Close),
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(mut writer: W, outbox: Arc<Outbox>, gate: Option<Arc<dyn ReplyGate>>) {
    let mut spare = BytesMut::with_capacity(READ_CHUNK_BYTES);
    loop {
        {
            let mut buf = outbox.buf.lock();
            if !buf.is_empty() {
                std::mem::swap(&mut *buf, &mut spare);
            }
        }
        if !spare.is_empty() {
            let passed = match &gate {
                Some(gate) => gate.pass().await.is_ok(),
                None => true,
            };
            // The flush is free on plain TCP; TLS may hold written bytes back without it.
            if !passed || writer.write_all(&spare).await.is_err() || writer.flush().await.is_err() {
                outbox.closed.store(true, Ordering::Release);
                outbox.buf.lock().clear();
                outbox.space.notify_one();
                return;
            }
            spare.clear();
            outbox.space.notify_one();
            continue;
        }
        if outbox.reader_done.load(Ordering::Acquire) && outbox.inflight.load(Ordering::Acquire) == 0 {
            let _ = writer.shutdown().await;
            return;
        }
        outbox.ready.notified().await;
    }
}
