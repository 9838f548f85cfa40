//! One client connection: framing, authentication, dispatch to workers, and the outbox
//! that carries responses back.
//!
//! The reader task decodes frames and hands data operations to the tenant's home worker;
//! workers append encoded responses to the connection's [`Outbox`]; the writer task writes
//! whatever has accumulated in one system call. Requests may complete out of order; the
//! request id in each response says which request it answers.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::BytesMut;
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{watch, Notify};

use ferry_proto::{
    encode_unknown_opcode_response, Decoded, Frame, FrameDecoder, FrameError, FrameKind, HelloInfo, Opcode, Request,
    Response, ResponseBody, Status,
};

use crate::node::{Node, TenantState};
use crate::stats::TenantCounters;
use crate::worker::Task;
use ferry_net::preauth::unauthenticated_over;

/// Requests one connection may have in flight (dispatched, not yet answered). Past it the
/// node stops reading from that connection until answers drain: a client cannot queue
/// unbounded work or memory by pipelining without reading.
pub const MAX_INFLIGHT_PER_CONNECTION: usize = 512;

/// Encoded responses a connection may hold unsent before the node stops reading from it
/// (a client that does not read its responses stalls only itself).
pub const MAX_OUTBOX_BYTES: usize = 8 * 1024 * 1024;

/// Bytes requested from the socket per read: enough for hundreds of pipelined small
/// requests in one system call.
const READ_CHUNK_BYTES: usize = 64 * 1024;

pub use ferry_net::preauth::MAX_FAILED_HELLOS;

/// Where the answer to a request goes: a ferry-protocol connection's [`Outbox`], or a
/// RESP connection waiting for the invocation its FCALL became.
pub(crate) trait Answer: Send + Sync {
    /// Answers one accepted request. Callable from any thread.
    fn respond(&self, opcode: Opcode, tenant: u32, request_id: u64, response: &Response);
}

/// Responses waiting to be written to one connection.
pub(crate) struct Outbox {
    /// Encoded frames not yet written.
    buf: Mutex<BytesMut>,
    /// Wakes the writer when `buf` goes from empty to non-empty.
    ready: Notify,
    /// Wakes the reader when in-flight requests or buffered bytes drop.
    space: Notify,
    /// Requests accepted but not yet answered.
    inflight: AtomicUsize,
    /// The writer cannot write any more (peer gone): responses are dropped.
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

    fn respond_raw_unknown_opcode(&self, raw_opcode: u8, tenant: u32, request_id: u64) {
        {
            let mut buf = self.buf.lock();
            encode_unknown_opcode_response(raw_opcode, tenant, request_id, &mut buf)
                .expect("a short error response always encodes");
        }
        self.ready.notify_one();
    }

    fn has_space(&self) -> bool {
        self.inflight.load(Ordering::Acquire) < MAX_INFLIGHT_PER_CONNECTION && self.buf.lock().len() < MAX_OUTBOX_BYTES
    }
}

impl Answer for Outbox {
    fn respond(&self, opcode: Opcode, tenant: u32, request_id: u64, response: &Response) {
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
}

/// What the reader knows about the connection's peer.
struct Session<'n> {
    tenant: Option<Arc<TenantState>>,
    failed_hellos: u32,
    /// Counts the connection among the authenticated ones until it closes.
    authenticated: Option<AuthenticatedSlot<'n>>,
}

/// One of the node's `max_connections` authenticated connections, given back on drop.
struct AuthenticatedSlot<'n>(&'n Node);

impl Drop for AuthenticatedSlot<'_> {
    fn drop(&mut self) {
        self.0.counters.connections_authenticated.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Whether the reader keeps going after a frame.
enum Next {
    Continue,
    Close,
}

/// Serves one connection until the peer leaves, framing breaks or the node shuts down.
pub(crate) async fn serve(node: Arc<Node>, stream: TcpStream, shutdown: watch::Receiver<bool>) {
    // Small responses must not wait for Nagle's algorithm.
    let _ = stream.set_nodelay(true);
    let (reader, writer) = stream.into_split();
    let outbox = Arc::new(Outbox::new());
    let writer_task = tokio::spawn(write_loop(writer, Arc::clone(&outbox)));
    read_loop(&node, reader, &outbox, shutdown).await;
    outbox.reader_done.store(true, Ordering::Release);
    outbox.ready.notify_one();
    let _ = writer_task.await;
}

async fn read_loop(node: &Node, mut reader: OwnedReadHalf, outbox: &Arc<Outbox>, mut shutdown: watch::Receiver<bool>) {
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let mut decoder = FrameDecoder::new();
    let mut session = Session {
        tenant: None,
        failed_hellos: 0,
        authenticated: None,
    };
    // Held until the connection authenticates: bounds how long and how many may wait.
    let mut ticket = Some(node.preauth.admit());
    let hello_deadline = tokio::time::Instant::now() + node.hello_timeout;
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
                TenantCounters::bump(&node.counters.connections_unauthenticated_closed);
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
                    if let Next::Close = handle_frame(node, &mut session, outbox, frame) {
                        return;
                    }
                    if session.tenant.is_some() {
                        ticket = None;
                    }
                }
                Ok(Some(Decoded::UnknownOpcode(unknown))) => {
                    outbox.respond_raw_unknown_opcode(unknown.opcode, unknown.tenant, unknown.request_id);
                }
                Err(err) => {
                    TenantCounters::bump(&node.counters.framing_errors);
                    if let FrameError::BodyTooLarge { request_id, .. } = err {
                        // The length is known to be hostile or broken: answer, then close.
                        outbox.accept();
                        outbox.respond(
                            Opcode::Stats,
                            0,
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

fn handle_frame<'n>(node: &'n Node, session: &mut Session<'n>, outbox: &Arc<Outbox>, frame: Frame) -> Next {
    let header = frame.header;
    outbox.accept();
    let reply = |response: Response| outbox.respond(header.opcode, header.tenant, header.request_id, &response);
    if header.kind != FrameKind::Request {
        reply(Response::error(Status::BadRequest, "expected a request frame"));
        return Next::Continue;
    }
    if header.opcode == Opcode::Hello {
        return hello(node, session, header.tenant, frame, reply);
    }
    let Some(tenant) = session.tenant.clone() else {
        reply(Response::error(Status::Unauthorized, "say hello first"));
        return Next::Continue;
    };
    if header.tenant != tenant.id {
        reply(Response::error(
            Status::Unauthorized,
            format!("this connection belongs to tenant {}, not {}", tenant.id, header.tenant),
        ));
        return Next::Continue;
    }
    let request = match Request::decode(header.opcode, frame.body) {
        Ok(request) => request,
        Err(err) => {
            reply(Response::error(Status::BadRequest, err.to_string()));
            return Next::Continue;
        }
    };
    if let Some(refusal) = node.cluster.as_ref().and_then(|role| {
        let route = match &request {
            Request::Invoke { function, args, .. } => node.registry.route(function, args),
            _ => None,
        };
        crate::routing::misrouted(role, &request, route.as_deref())
    }) {
        reply(refusal);
        return Next::Continue;
    }
    match &request {
        Request::Stats => {
            reply(Response::ok(ResponseBody::Stats(crate::server::stats_for(
                node, &tenant,
            ))));
            return Next::Continue;
        }
        Request::Invoke { function, .. } if node.registry.get(function).is_none() => {
            reply(Response::error(
                Status::UnknownFunction,
                format!("no function named {function:?}"),
            ));
            return Next::Continue;
        }
        _ => {}
    }
    let task = Task {
        received: std::time::Instant::now(),
        outbox: Arc::clone(outbox) as Arc<dyn Answer>,
        tenant: Arc::clone(&tenant),
        opcode: header.opcode,
        request_id: header.request_id,
        request,
    };
    let inline = node.inline_data_ops && !matches!(task.request, Request::Invoke { .. });
    if inline && node.pool.try_take_seat(tenant.home) {
        // Data operations are bounded (microseconds), so running one here cannot stall
        // this thread's other connections the way a storage function could.
        TenantCounters::bump(&node.pool.slots[tenant.home].counters.tasks_inline);
        crate::exec::execute(node, tenant.home, task);
        node.pool.release_seat(tenant.home);
        return Next::Continue;
    }
    if let Err(task) = node.pool.submit(tenant.home, task) {
        TenantCounters::bump(&tenant.counters.overloaded);
        TenantCounters::bump(&tenant.counters.requests);
        task.outbox.respond(
            task.opcode,
            tenant.id,
            task.request_id,
            &Response::error(Status::Overloaded, "storage node queues are full; retry later"),
        );
    }
    Next::Continue
}

fn hello<'n>(
    node: &'n Node,
    session: &mut Session<'n>,
    tenant_id: u32,
    frame: Frame,
    reply: impl Fn(Response),
) -> Next {
    if session.tenant.is_some() {
        reply(Response::error(Status::BadRequest, "connection already authenticated"));
        return Next::Continue;
    }
    let token = match Request::decode(Opcode::Hello, frame.body) {
        Ok(Request::Hello { token }) => token,
        Ok(_) => unreachable!("a hello body decodes to a hello"),
        Err(err) => {
            reply(Response::error(Status::BadRequest, err.to_string()));
            return Next::Continue;
        }
    };
    match node.tenants.get(&tenant_id) {
        Some(tenant) if tenant.token_matches(&token) => {
            let counters = &node.counters;
            let admitted = counters
                .connections_authenticated
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                    (n < node.max_connections as u64).then_some(n + 1)
                })
                .is_ok();
            if !admitted {
                counters.connections_refused.fetch_add(1, Ordering::Relaxed);
                reply(Response::error(
                    Status::Overloaded,
                    format!(
                        "the node serves at most {} authenticated connections",
                        node.max_connections
                    ),
                ));
                return Next::Close;
            }
            session.authenticated = Some(AuthenticatedSlot(node));
            reply(Response::ok(ResponseBody::Hello(HelloInfo {
                workers: node.pool.workers() as u32,
                home_core: tenant.home as u32,
            })));
            session.tenant = Some(Arc::clone(tenant));
            Next::Continue
        }
        _ => {
            // Unknown tenant and wrong token look the same, so tenant ids cannot be probed.
            reply(Response::error(Status::Unauthorized, "unknown tenant or wrong token"));
            session.failed_hellos += 1;
            if session.failed_hellos >= MAX_FAILED_HELLOS {
                Next::Close
            } else {
                Next::Continue
            }
        }
    }
}

async fn write_loop(mut writer: OwnedWriteHalf, outbox: Arc<Outbox>) {
    let mut spare = BytesMut::with_capacity(READ_CHUNK_BYTES);
    loop {
        {
            let mut buf = outbox.buf.lock();
            if !buf.is_empty() {
                std::mem::swap(&mut *buf, &mut spare);
            }
        }
        if !spare.is_empty() {
            if writer.write_all(&spare).await.is_err() {
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
