//! The RESP front end of a storage node (`--resp ADDR`): redis-cli, redis-benchmark and the
//! Redis client of any language can use ferry's tables. The listener and the session
//! commands are `ferry_net::resp`'s; this is what the node serves behind them. A
//! connection's pipelined commands run in turns of its core, by the connection's own task
//! (`turn`, `resp_job`): data commands, FUNCTION and FCALL, all charged to the tenant. In a cluster
//! it answers Redis Cluster's `-MOVED slot host:port` for keys of other nodes, `-CROSSSLOT`
//! for keys on several, and CLUSTER SLOTS/SHARDS, on the connection's core from the map.
//! Connections share the node's pre-authentication bound, hello timeout and connection
//! limit.

use ferry_proto::TenantId;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use ferry_cluster::key_slot;
use ferry_lua::resp::FunctionCall;
use ferry_net::connections::Connections;
use ferry_net::resp::{Queued, RespFuture, RespService};
use ferry_resp::{Command, Reply};

use crate::node::{Node, TenantState};
use crate::resp_job::Step;
use crate::stats::TenantCounters;

impl RespService for Node {
    type Tenant = Arc<TenantState>;

    fn sign_in(&self, id: TenantId, password: &[u8]) -> Option<Arc<TenantState>> {
        ferry_net::door::Door::sign_in(self, id, password)
    }

    fn connections(&self) -> &Arc<Connections> {
        &self.connections
    }

    fn default_tenant(&self) -> Option<Arc<TenantState>> {
        self.tenants.get(&self.resp_default_tenant?).cloned()
    }

    fn tenant_label(&self, tenant: &Arc<TenantState>) -> String {
        tenant.id.to_string()
    }

    fn routes_by_key(&self) -> bool {
        self.cluster.is_some()
    }

    fn tenant_param(&self, tenant: &Arc<TenantState>, name: &str) -> Option<String> {
        crate::memory::param(tenant, name)
    }

    fn set_tenant_params(&self, tenant: &Arc<TenantState>, pairs: &[(&'static str, String)]) -> Result<(), String> {
        crate::memory::set_params(tenant, pairs)
    }

    fn tenant_info(&self, tenant: &Arc<TenantState>) -> String {
        crate::memory::info(tenant)
    }

    fn out_of_memory(&self, tenant: &Arc<TenantState>) -> bool {
        tenant.store.out_of_memory()
    }

    /// Runs the commands in turns of the connection's core (`turn`), in the connection's
    /// own task: no hand-off, no channel but for a call left running.
    fn execute<'a>(&'a self, tenant: &'a Arc<TenantState>, table: &'a str, batch: Vec<Queued>) -> RespFuture<'a> {
        Box::pin(async move {
            let received = Instant::now();
            let count = batch.len();
            let mut steps: VecDeque<Step> = batch
                .into_iter()
                .map(|queued| self.step_of(tenant, table, queued))
                .collect();
            let mut replies = Vec::with_capacity(count);
            // Connections are placed on cores; one on no core (none had a thread left
            // to take it) has nowhere to run.
            let Some(core) = self.pool.this_core() else {
                replies.extend(std::iter::repeat_with(no_core).take(count));
                return replies;
            };
            while !steps.is_empty() {
                let functions = crate::resp_job::has_functions(&steps);
                let Ok(turn) = crate::turn::take(self, core, tenant, functions).await else {
                    TenantCounters::bump(&tenant.counters.overloaded);
                    let busy = || Reply::Error("BUSY storage node queues are full; retry later".into());
                    replies.extend(std::iter::repeat_with(busy).take(steps.len()));
                    break;
                };
                let ran = crate::resp_job::run(self, core, tenant, table, &mut steps, received);
                drop(turn);
                replies.extend(ran.replies);
                if let Some(pending) = ran.pending {
                    replies.push(pending.await.unwrap_or_else(|_| stopped()));
                } else if !steps.is_empty() {
                    // The turn ended at its slice: the core's other work first.
                    tokio::task::yield_now().await;
                }
            }
            replies
        })
    }

    /// Session commands answered by the connection are the tenant's too: its CPU and its
    /// share of the connection's core, where its turns queue.
    fn charge(&self, tenant: &Arc<TenantState>, cpu_ns: u64) {
        tenant.counters.cpu_ns.fetch_add(cpu_ns, Ordering::Relaxed);
        self.pool
            .charge(self.pool.this_core().unwrap_or(tenant.home), tenant.id, cpu_ns);
        TenantCounters::bump(&tenant.counters.requests);
    }

    fn places_connections(&self) -> bool {
        true
    }

    /// On the home core of the tenant the connection's first command signs in as, else
    /// of the tenant it starts signed in as (if any), else the next core in turn.
    fn runtime_for_connection(&self, signs_in_as: Option<TenantId>) -> Option<tokio::runtime::Handle> {
        let tenant = signs_in_as
            .and_then(|id| self.tenants.get(&id).cloned())
            .or_else(|| self.default_tenant());
        self.pool.runtime_for_connection(tenant.map(|tenant| tenant.home))
    }

    fn mode(&self) -> &'static str {
        if self.cluster.is_some() {
            "cluster"
        } else {
            "standalone"
        }
    }

    fn written<'a>(
        &'a self,
        tenant: &'a Arc<TenantState>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>> {
        Box::pin(tenant.written.notified())
    }

    fn reply_gate(&self) -> Option<&dyn ferry_net::gate::ReplyGate> {
        Node::reply_gate(self).map(|gate| &**gate as &dyn ferry_net::gate::ReplyGate)
    }
}

impl Node {
    /// What a command becomes in a turn: refusals and CLUSTER are answered here (they read
    /// only the cluster map), the rest runs in the turn.
    fn step_of(&self, tenant: &TenantState, table: &str, queued: Queued) -> Step {
        match misrouted(self, &queued) {
            Some(Routed::Refused(refusal)) => return Step::Answered(refusal),
            Some(Routed::ReplicaRead) => return Step::ReplicaRead(queued.command),
            None => {}
        }
        match FunctionCall::of(queued.command, table) {
            // Answered here, not queued behind the call it stops in the tenant's lane.
            Ok(FunctionCall::Kill(kind)) => Step::Answered(tenant.calls.kill(kind)),
            Ok(call) => Step::Function(call),
            Err(Command::Cluster(sub)) => Step::Answered(cluster(self, &sub)),
            Err(Command::Save { background }) => Step::Save { background },
            Err(Command::Database(words)) => Step::Database(words),
            Err(Command::Watch(keys)) => Step::Watch(keys),
            Err(Command::Transaction(tx)) => Step::Transaction(tx),
            Err(data) => Step::Data(data),
        }
    }
}

/// The reply to a command left running when the node stopped.
fn stopped() -> Reply {
    Reply::err("the storage node stopped before the command ran")
}

/// The reply to a command of a connection that no core runs.
fn no_core() -> Reply {
    Reply::err("the storage node has no core left to run the command")
}

/// A command of keys this node does not serve as their primary.
enum Routed {
    /// Redis Cluster's refusal.
    Refused(Reply),
    /// A plain read of a READONLY connection, and this node is a replica of the keys'
    /// shard: served from its copy.
    ReplicaRead,
}

/// In a cluster, what becomes of a command for keys this node does not serve as primary.
fn misrouted(node: &Node, queued: &Queued) -> Option<Routed> {
    let keys = &queued.keys;
    let role = node.cluster.as_ref()?;
    let map = role.map();
    if map.single_owner(keys.iter().map(|key| &key[..])).is_err() {
        return Some(Routed::Refused(Reply::Error(
            "CROSSSLOT Keys in request don't hash to the same slot".into(),
        )));
    }
    let key = keys.first()?;
    let owner = map.owner(key);
    if owner.id == role.node_id {
        if let Some(why) = keys.iter().find_map(|key| crate::routing::frozen(role, key)) {
            return Some(Routed::Refused(Reply::Error(why)));
        }
        return role
            .lease_lapsed()
            .then(|| Routed::Refused(Reply::Error(crate::routing::NO_LEASE.into())));
    }
    if queued.replica_read && role.replicates(&owner.id) {
        return Some(Routed::ReplicaRead);
    }
    Some(Routed::Refused(match &owner.resp {
        Some(resp) => Reply::Error(format!("MOVED {} {resp}", key_slot(key))),
        // Sending a Redis client to the node's ferry-protocol port would be worse.
        None => Reply::Error(format!(
            "CLUSTERDOWN slot {} is served by node {}, which has no RESP address in the cluster map",
            key_slot(key),
            owner.id
        )),
    }))
}

/// CLUSTER SLOTS and CLUSTER SHARDS from the cluster map (nodes without a RESP address in
/// the map are left out: a Redis client could not talk to them).
fn cluster(node: &Node, sub: &[u8]) -> Reply {
    let Some(role) = &node.cluster else {
        return Reply::err("This instance has cluster support disabled");
    };
    let map = role.map();
    let with_resp = map.nodes().iter().filter_map(|n| {
        let resp = n.resp.as_ref()?;
        let (host, port) = resp.rsplit_once(':')?;
        Some((n, host.to_string(), port.parse::<i64>().ok()?))
    });
    match sub {
        b"SLOTS" => Reply::Array(
            with_resp
                .flat_map(|(n, host, port)| {
                    n.slots.iter().map(move |&(lo, hi)| {
                        Reply::Array(vec![
                            Reply::Integer(i64::from(lo)),
                            Reply::Integer(i64::from(hi)),
                            Reply::Array(vec![
                                Reply::text(host.clone()),
                                Reply::Integer(port),
                                Reply::text(n.id.clone()),
                            ]),
                        ])
                    })
                })
                .collect(),
        ),
        b"SHARDS" => Reply::Array(
            with_resp
                .map(|(n, host, port)| {
                    let slots = n
                        .slots
                        .iter()
                        .flat_map(|&(lo, hi)| [Reply::Integer(i64::from(lo)), Reply::Integer(i64::from(hi))])
                        .collect();
                    let member = Reply::Map(vec![
                        (Reply::text("id"), Reply::text(n.id.clone())),
                        (Reply::text("port"), Reply::Integer(port)),
                        (Reply::text("ip"), Reply::text(host.clone())),
                        (Reply::text("endpoint"), Reply::text(host)),
                        (Reply::text("role"), Reply::text("master")),
                        (Reply::text("replication-offset"), Reply::Integer(0)),
                        (Reply::text("health"), Reply::text("online")),
                    ]);
                    Reply::Map(vec![
                        (Reply::text("slots"), Reply::Array(slots)),
                        (Reply::text("nodes"), Reply::Array(vec![member])),
                    ])
                })
                .collect(),
        ),
        _ => Reply::err("only CLUSTER SLOTS and CLUSTER SHARDS are served"),
    }
}
