//! The storage node behind the ferry protocol's front door (`ferry_net::door`): the hello
//! answer, and the dispatch of a signed-in tenant's requests to its home core (run inline
//! when the connection is on that core; see `worker::dispatch`). Cores answer through the
//! connection's outbox, in any order; the request id in each answer says which request it
//! answers.

use ferry_proto::TenantId;
use std::sync::Arc;

use ferry_net::connections::Connections;
use ferry_net::door::{Door, Outbox};
use ferry_proto::{Header, HelloInfo, Opcode, Request, Response, ResponseBody, Status};

use crate::node::{Node, TenantState};
use crate::stats::TenantCounters;
use crate::worker::{Task, Work};

/// Where the answer to a request goes: a ferry-protocol connection's [`Outbox`], or a
/// RESP connection waiting for the invocation its FCALL became.
pub(crate) trait Answer: Send + Sync {
    /// Answers one accepted request. Callable from any thread.
    fn respond(&self, opcode: Opcode, tenant: TenantId, request_id: u64, response: &Response);
}

impl Answer for Outbox {
    fn respond(&self, opcode: Opcode, tenant: TenantId, request_id: u64, response: &Response) {
        Outbox::respond(self, opcode, tenant, request_id, response);
    }
}

impl Door for Node {
    type Tenant = Arc<TenantState>;

    fn connections(&self) -> &Arc<Connections> {
        &self.connections
    }

    fn sign_in(&self, id: TenantId, token: &[u8]) -> Option<Arc<TenantState>> {
        self.tenants
            .get(&id)
            .filter(|tenant| tenant.token_matches(token))
            .cloned()
    }

    fn places_connections(&self) -> bool {
        true
    }

    /// On the home core of the tenant its hello names, else the next core in turn.
    fn runtime_for_connection(&self, hello_tenant: Option<TenantId>) -> Option<tokio::runtime::Handle> {
        let home = hello_tenant
            .and_then(|id| self.tenants.get(&id))
            .map(|tenant| tenant.home);
        self.pool.runtime_for_connection(home)
    }

    fn welcome(&self, tenant: &Arc<TenantState>) -> Response {
        Response::ok(ResponseBody::Hello(HelloInfo {
            workers: self.pool.cores() as u32,
            home_core: tenant.home as u32,
        }))
    }

    fn dispatch(self: &Arc<Self>, tenant: &Arc<TenantState>, header: Header, request: Request, outbox: &Arc<Outbox>) {
        let node = self.as_ref();
        let reply = |response: Response| outbox.respond(header.opcode, header.tenant, header.request_id, &response);
        if let Some(refusal) = node.cluster.as_ref().and_then(|role| {
            let route = match &request {
                Request::Invoke { function, args, .. } => node.registry.route(function, args),
                _ => None,
            };
            crate::routing::misrouted(role, &request, route.as_deref())
        }) {
            reply(refusal);
            return;
        }
        match &request {
            Request::Stats => {
                reply(Response::ok(ResponseBody::Stats(crate::server::stats_for(
                    node, tenant,
                ))));
                return;
            }
            Request::Invoke { function, .. } if node.registry.get(function).is_none() => {
                reply(Response::error(
                    Status::UnknownFunction,
                    format!("no function named {function:?}"),
                ));
                return;
            }
            _ => {}
        }
        let outbox = Arc::clone(outbox) as Arc<dyn Answer>;
        let task = Task {
            received: std::time::Instant::now(),
            tenant: Arc::clone(tenant),
            work: Work::Request {
                outbox: Arc::clone(&outbox),
                opcode: header.opcode,
                request_id: header.request_id,
                request,
            },
        };
        if crate::worker::dispatch(node, task).is_err() {
            TenantCounters::bump(&tenant.counters.overloaded);
            TenantCounters::bump(&tenant.counters.requests);
            outbox.respond(
                header.opcode,
                tenant.id,
                header.request_id,
                &Response::error(Status::Overloaded, "storage node queues are full; retry later"),
            );
        }
    }

    fn reply_gate(&self) -> Option<Arc<dyn ferry_net::gate::ReplyGate>> {
        Node::reply_gate(self).map(|gate| Arc::clone(gate) as Arc<dyn ferry_net::gate::ReplyGate>)
    }
}
