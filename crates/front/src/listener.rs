//! The ferry protocol in front of a [`Service`]: framing, hello against the tenant table,
//! the pre-authentication bound, a bound on each connection's requests in flight, and the
//! answers written back in as few system calls as possible.
//!
//! Each request of an authenticated connection runs as a task of its own, so a slow
//! invocation does not hold up the requests behind it; answers go back in completion
//! order, matched by request id. A connection with [`MAX_INFLIGHT_PER_CONNECTION`]
//! unanswered requests is not read until one is answered.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch, Semaphore};

use ferry_net::histogram::LatencyHistograms;
use ferry_net::preauth::{token_matches, unauthenticated_over, PreAuth, MAX_FAILED_HELLOS};
use ferry_proto::{
    encode_unknown_opcode_response, Decoded, Frame, FrameDecoder, FrameError, FrameKind, HelloInfo, Opcode, Request,
    Response, ResponseBody, StatEntry, Status,
};

use crate::config::FrontConfig;

/// Requests one connection may have in flight before it is no longer read.
pub const MAX_INFLIGHT_PER_CONNECTION: usize = 512;

/// Bytes requested from the socket per read.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Future of one answer.
pub type ServiceFuture = Pin<Box<dyn Future<Output = Response> + Send>>;

/// What a process does with the requests of authenticated tenants.
pub trait Service: Send + Sync + 'static {
    /// Answers one request of `tenant` (never `hello` or `stats`, which the listener
    /// answers). Must not panic on any request.
    fn call(self: Arc<Self>, tenant: u32, request: Request) -> ServiceFuture;

    /// Workers to announce in the hello answer.
    fn workers(&self) -> u32;

    /// The admission rate R (requests/s, at least 1) `tenant`'s requests are admitted at,
    /// for a process that admits them (a gateway); 0 for one that does not. Every answer
    /// to the tenant carries it in its header, so its clients follow it without asking.
    fn admission_rate_ops(&self, _tenant: u32) -> u32 {
        0
    }

    /// Appends the process's counters (`stats` answers and metrics), `PROCESS.NAME` or
    /// `SCOPE.ID.NAME` (see `ferry_net::metrics`).
    fn stats(&self, out: &mut Vec<StatEntry>);
}

/// Counters of the listener itself.
#[derive(Default)]
pub struct ListenerCounters {
    /// Connections open now.
    pub connections_open: AtomicU64,
    /// Connections authenticated now.
    pub connections_authenticated: AtomicU64,
    /// Hellos refused because `max_connections` were authenticated.
    pub connections_refused: AtomicU64,
    /// Connections closed for not authenticating in time (or evicted by newer ones).
    pub connections_unauthenticated_closed: AtomicU64,
    /// Connections closed because their framing broke.
    pub framing_errors: AtomicU64,
}

/// What every connection of one listener shares.
pub(crate) struct Shared<S> {
    pub(crate) service: Arc<S>,
    pub(crate) config: FrontConfig,
    pub(crate) preauth: PreAuth,
    pub(crate) counters: ListenerCounters,
    pub(crate) latency: LatencyHistograms,
    /// Prefix of this process's metric families (`ferry_gateway`, `ferry_compute`).
    pub(crate) process: &'static str,
}

impl<S: Service> Shared<S> {
    /// Every counter: the listener's, the service's, and the preauth bound's.
    pub(crate) fn stats(&self) -> Vec<StatEntry> {
        let process = self.process.trim_start_matches("ferry_");
        let c = &self.counters;
        let mut out: Vec<StatEntry> = [
            ("connections_open", &c.connections_open),
            ("connections_authenticated", &c.connections_authenticated),
            ("connections_refused", &c.connections_refused),
            (
                "connections_unauthenticated_closed",
                &c.connections_unauthenticated_closed,
            ),
            ("framing_errors", &c.framing_errors),
        ]
        .into_iter()
        .map(|(name, counter)| StatEntry {
            name: format!("{process}.{name}"),
            value: counter.load(Ordering::Relaxed),
        })
        .collect();
        out.push(StatEntry {
            name: format!("{process}.connections_waiting_hello"),
            value: self.preauth.waiting() as u64,
        });
        self.service.stats(&mut out);
        out
    }
}

/// Keeps `connections_open` (and, once set, `connections_authenticated`) true on drop.
struct Open<'s> {
    counters: &'s ListenerCounters,
    authenticated: bool,
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        self.counters.connections_open.fetch_sub(1, Ordering::AcqRel);
        if self.authenticated {
            self.counters.connections_authenticated.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// An encoded answer on its way to the writer.
type Answer = BytesMut;

fn encode(opcode: Opcode, tenant: u32, request_id: u64, response: &Response) -> Answer {
    let mut out = BytesMut::new();
    if let Err(err) = response.encode_frame(opcode, tenant, request_id, &mut out) {
        out.clear();
        Response::error(Status::TooLarge, format!("response cannot be encoded: {err}"))
            .encode_frame(opcode, tenant, request_id, &mut out)
            .expect("a short error response always encodes");
    }
    out
}

/// Serves one connection until the peer leaves, framing breaks or the process stops.
pub(crate) async fn serve<S: Service>(shared: Arc<Shared<S>>, stream: TcpStream, mut shutdown: watch::Receiver<bool>) {
    let _ = stream.set_nodelay(true);
    shared.counters.connections_open.fetch_add(1, Ordering::AcqRel);
    let mut open = Open {
        counters: &shared.counters,
        authenticated: false,
    };
    let (mut reader, writer) = stream.into_split();
    // Every request holds a permit until its answer is queued, so the queue never holds
    // more than the permits allow and the channel's bound is never what blocks.
    let (answers, queued) = mpsc::channel::<Answer>(MAX_INFLIGHT_PER_CONNECTION + 8);
    let writer_task = tokio::spawn(write_loop(writer, queued));
    let inflight = Arc::new(Semaphore::new(MAX_INFLIGHT_PER_CONNECTION));
    let mut ticket = Some(shared.preauth.admit());
    let hello_deadline = tokio::time::Instant::now() + shared.config.hello_timeout;
    let mut tenant: Option<u32> = None;
    let mut failed_hellos = 0;
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let mut decoder = FrameDecoder::new();
    'read: loop {
        buf.reserve(READ_CHUNK_BYTES);
        let read = tokio::select! {
            read = reader.read_buf(&mut buf) => read,
            _ = shutdown.changed() => break,
            _ = unauthenticated_over(ticket.as_ref(), hello_deadline) => {
                shared.counters.connections_unauthenticated_closed.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(process = shared.process, "closed a connection that did not authenticate in time");
                break;
            }
        };
        match read {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        loop {
            let frame = match decoder.decode(&mut buf) {
                Ok(None) => break,
                Ok(Some(Decoded::Frame(frame))) => frame,
                Ok(Some(Decoded::UnknownOpcode(unknown))) => {
                    let mut out = BytesMut::new();
                    encode_unknown_opcode_response(unknown.opcode, unknown.tenant, unknown.request_id, &mut out)
                        .expect("a short error response always encodes");
                    let _ = answers.send(out).await;
                    continue;
                }
                Err(err) => {
                    shared.counters.framing_errors.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(process = shared.process, "closing a connection: {err}");
                    if let FrameError::BodyTooLarge { request_id, .. } = err {
                        let refusal = Response::error(Status::TooLarge, err.to_string());
                        let _ = answers.send(encode(Opcode::Stats, 0, request_id, &refusal)).await;
                    }
                    break 'read;
                }
            };
            let header = frame.header;
            let reply = |response: Response| encode(header.opcode, header.tenant, header.request_id, &response);
            if header.kind != FrameKind::Request {
                let _ = answers
                    .send(reply(Response::error(Status::BadRequest, "expected a request frame")))
                    .await;
                continue;
            }
            if header.opcode == Opcode::Hello {
                let (answer, close) = hello(
                    &shared,
                    &mut open,
                    &mut tenant,
                    &mut failed_hellos,
                    header.tenant,
                    frame,
                );
                let _ = answers.send(reply(answer)).await;
                if tenant.is_some() {
                    ticket = None;
                }
                if close {
                    break 'read;
                }
                continue;
            }
            let refusal = match tenant {
                None => Some("say hello first".to_string()),
                Some(id) if id != header.tenant => {
                    Some(format!("this connection belongs to tenant {id}, not {}", header.tenant))
                }
                Some(_) => None,
            };
            if let Some(why) = refusal {
                let _ = answers.send(reply(Response::error(Status::Unauthorized, why))).await;
                continue;
            }
            let request = match Request::decode(header.opcode, frame.body) {
                Ok(request) => request,
                Err(err) => {
                    let _ = answers
                        .send(reply(Response::error(Status::BadRequest, err.to_string())))
                        .await;
                    continue;
                }
            };
            if let Request::Stats = request {
                let mut answer = Response::ok(ResponseBody::Stats(shared.stats()));
                answer.admission_rate_ops = shared.service.admission_rate_ops(header.tenant);
                let _ = answers.send(reply(answer)).await;
                continue;
            }
            let permit = tokio::select! {
                permit = Arc::clone(&inflight).acquire_owned() => permit.expect("the semaphore is never closed"),
                _ = shutdown.changed() => break 'read,
            };
            let (shared, answers) = (Arc::clone(&shared), answers.clone());
            tokio::spawn(async move {
                let started = Instant::now();
                let mut response = Arc::clone(&shared.service).call(header.tenant, request).await;
                // The rate as of the answer, not the request: the freshest the client can get.
                response.admission_rate_ops = shared.service.admission_rate_ops(header.tenant);
                let latency_us = started.elapsed().as_micros() as u64;
                shared.latency.observe(header.opcode, response.status, latency_us);
                let _ = answers
                    .send(encode(header.opcode, header.tenant, header.request_id, &response))
                    .await;
                drop(permit);
            });
        }
    }
    drop(answers);
    // The writer ends once every task holding a sender has queued its answer.
    let _ = writer_task.await;
}

/// Answers a hello; the flag says whether to close the connection afterwards.
fn hello<S: Service>(
    shared: &Shared<S>,
    open: &mut Open<'_>,
    tenant: &mut Option<u32>,
    failed_hellos: &mut u32,
    tenant_id: u32,
    frame: Frame,
) -> (Response, bool) {
    if tenant.is_some() {
        return (
            Response::error(Status::BadRequest, "connection already authenticated"),
            false,
        );
    }
    let token = match Request::decode(Opcode::Hello, frame.body) {
        Ok(Request::Hello { token }) => token,
        Ok(_) | Err(_) => return (Response::error(Status::BadRequest, "malformed hello"), false),
    };
    let known = shared
        .config
        .tenants
        .iter()
        .any(|t| t.id == tenant_id && token_matches(t.token.as_bytes(), &token));
    if !known {
        // Unknown tenant and wrong token look the same, so tenant ids cannot be probed.
        *failed_hellos += 1;
        let answer = Response::error(Status::Unauthorized, "unknown tenant or wrong token");
        return (answer, *failed_hellos >= MAX_FAILED_HELLOS);
    }
    let counters = &shared.counters;
    let max = shared.config.max_connections as u64;
    let admitted = counters
        .connections_authenticated
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1))
        .is_ok();
    if !admitted {
        counters.connections_refused.fetch_add(1, Ordering::Relaxed);
        let why = format!("this process serves at most {max} authenticated connections");
        return (Response::error(Status::Overloaded, why), true);
    }
    open.authenticated = true;
    *tenant = Some(tenant_id);
    let info = HelloInfo {
        workers: shared.service.workers(),
        home_core: 0,
    };
    let mut answer = Response::ok(ResponseBody::Hello(info));
    // A gateway says so at hello: its clients know the rate before their first request.
    answer.admission_rate_ops = shared.service.admission_rate_ops(tenant_id);
    (answer, false)
}

/// Writes queued answers, batching whatever has accumulated into one write.
async fn write_loop(mut writer: OwnedWriteHalf, mut queued: mpsc::Receiver<Answer>) {
    let mut batch = BytesMut::with_capacity(READ_CHUNK_BYTES);
    while let Some(first) = queued.recv().await {
        batch.extend_from_slice(&first);
        while batch.len() < READ_CHUNK_BYTES {
            match queued.try_recv() {
                Ok(more) => batch.extend_from_slice(&more),
                Err(_) => break,
            }
        }
        if writer.write_all(&batch).await.is_err() {
            // The peer is gone: drain so that no task waits on a full queue.
            while queued.recv().await.is_some() {}
            return;
        }
        batch.clear();
    }
    let _ = writer.shutdown().await;
}
