//! A gateway or compute node behind the ferry protocol's front door (`ferry_net::door`):
//! hello against the tenant table, and each request of an authenticated connection run as
//! a task of its own, so a slow invocation does not hold up the requests behind it; answers
//! go back in completion order, matched by request id.

use ferry_proto::TenantId;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use ferry_net::connections::Connections;
use ferry_net::door::{Door, Outbox};
use ferry_net::histogram::LatencyHistograms;
use ferry_net::metrics::{Sample, Scope};
use ferry_net::preauth::token_matches;
use ferry_proto::{Header, HelloInfo, Request, Response, ResponseBody};

use crate::config::FrontConfig;

/// Future of one answer.
pub type ServiceFuture = Pin<Box<dyn Future<Output = Response> + Send>>;

/// What a process does with the requests of authenticated tenants.
pub trait Service: Send + Sync + 'static {
    /// Answers one request of `tenant` (never `hello` or `stats`, which the listener
    /// answers). Must not panic on any request.
    fn call(self: Arc<Self>, tenant: TenantId, request: Request) -> ServiceFuture;

    /// Workers to announce in the hello answer.
    fn workers(&self) -> u32;

    /// The admission rate R (requests/s, at least 1) `tenant`'s requests are admitted at,
    /// for a process that admits them (a gateway); 0 for one that does not. Every answer
    /// to the tenant carries it in its header, so its clients follow it without asking.
    fn admission_rate_ops(&self, _tenant: TenantId) -> u32 {
        0
    }

    /// Appends the process's samples (`stats` answers and metrics; see
    /// `ferry_net::metrics::sample`).
    fn stats(&self, out: &mut Vec<Sample>);
}

/// What every connection of one process shares.
pub(crate) struct Shared<S> {
    pub(crate) service: Arc<S>,
    pub(crate) config: FrontConfig,
    /// Its connections over both listeners (ferry protocol and RESP).
    pub(crate) connections: Arc<Connections>,
    pub(crate) latency: LatencyHistograms,
    /// Prefix of this process's metric families (`ferry_gateway`, `ferry_compute`).
    pub(crate) process: &'static str,
}

impl<S: Service> Shared<S> {
    /// Every counter: the connections', the service's, and the preauth bound's.
    pub(crate) fn stats(&self) -> Vec<Sample> {
        let process = Scope::Process(self.process.trim_start_matches("ferry_"));
        let mut out = self.connections.counters.samples(&process).to_vec();
        out.push(Sample::gauge(
            process,
            "connections_waiting_hello",
            self.connections.preauth.waiting() as u64,
        ));
        self.service.stats(&mut out);
        out
    }

    /// Whether `token` is tenant `id`'s.
    pub(crate) fn signs_in(&self, id: TenantId, token: &[u8]) -> bool {
        self.config
            .tenants
            .iter()
            .any(|t| t.id == id && token_matches(t.token.as_bytes(), token))
    }
}

impl<S: Service> Door for Shared<S> {
    type Tenant = TenantId;

    fn connections(&self) -> &Arc<Connections> {
        &self.connections
    }

    fn sign_in(&self, id: TenantId, token: &[u8]) -> Option<TenantId> {
        self.signs_in(id, token).then_some(id)
    }

    fn welcome(&self, tenant: &TenantId) -> Response {
        let info = HelloInfo {
            workers: self.service.workers(),
            home_core: 0,
        };
        let mut answer = Response::ok(ResponseBody::Hello(info));
        // A gateway says so at hello: its clients know the rate before their first request.
        answer.admission_rate_ops = self.service.admission_rate_ops(*tenant);
        answer
    }

    fn dispatch(self: &Arc<Self>, tenant: &TenantId, header: Header, request: Request, outbox: &Arc<Outbox>) {
        let tenant = *tenant;
        if let Request::Stats = request {
            let mut answer = Response::ok(ResponseBody::Stats(ferry_net::metrics::sample::stats(&self.stats())));
            answer.admission_rate_ops = self.service.admission_rate_ops(tenant);
            outbox.respond(header.opcode, tenant, header.request_id, &answer);
            return;
        }
        let (shared, outbox) = (Arc::clone(self), Arc::clone(outbox));
        tokio::spawn(async move {
            let started = Instant::now();
            let mut response = Arc::clone(&shared.service).call(tenant, request).await;
            // The rate as of the answer, not the request: the freshest the client can get.
            response.admission_rate_ops = shared.service.admission_rate_ops(tenant);
            let latency_us = started.elapsed().as_micros() as u64;
            shared.latency.observe(header.opcode, response.status, latency_us);
            outbox.respond(header.opcode, tenant, header.request_id, &response);
        });
    }
}
