//! The RESP front end of a storage node (`--resp ADDR`): redis-cli, redis-benchmark and the
//! Redis client of any language can use ferry's tables. The listener and the session
//! commands are `ferry_net::resp`'s; this is what the node serves behind them: data
//! commands against the tenant's tables (`resp_exec`, on the I/O thread: they are
//! bounded), FUNCTION and FCALL as invocations on the tenant's home worker (`resp_fn`),
//! and in a cluster Redis Cluster's `-MOVED slot host:port` for keys of other nodes,
//! `-CROSSSLOT` for keys on several, and CLUSTER SLOTS/SHARDS. Connections share the
//! node's pre-authentication bound, hello timeout and connection limit.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_cluster::key_slot;
use ferry_lua::resp::FunctionCall;
use ferry_net::preauth::PreAuth;
use ferry_net::resp::{RespEvent, RespFuture, RespService};
use ferry_resp::{Command, Reply};

use crate::node::{Node, TenantState};
use crate::stats::TenantCounters;

impl RespService for Node {
    type Tenant = Arc<TenantState>;

    fn sign_in(&self, id: u32, password: &[u8]) -> Option<Arc<TenantState>> {
        self.tenants
            .get(&id)
            .filter(|tenant| tenant.token_matches(password))
            .cloned()
    }

    fn take_seat(&self) -> Result<(), Reply> {
        self.counters
            .connections_authenticated
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max_connections as u64).then_some(n + 1)
            })
            .map(|_| ())
            .map_err(|_| {
                self.counters.connections_refused.fetch_add(1, Ordering::Relaxed);
                Reply::err(format!("max number of clients reached ({})", self.max_connections))
            })
    }

    fn release_seat(&self) {
        self.counters.connections_authenticated.fetch_sub(1, Ordering::AcqRel);
    }

    fn execute<'a>(
        &'a self,
        tenant: &'a Arc<TenantState>,
        table: &'a str,
        command: Command,
        keys: &'a [Bytes],
    ) -> RespFuture<'a> {
        Box::pin(async move {
            if let Some(refusal) = misrouted(self, keys) {
                return refusal;
            }
            match FunctionCall::of(command, table) {
                // The worker counts the invocation and its CPU.
                Ok(call) => crate::resp_fn::run(call, self, tenant).await,
                Err(Command::Cluster(sub)) => cluster(self, &sub),
                Err(data) => {
                    let started = Instant::now();
                    let reply = crate::resp_exec::execute(tenant, table, data);
                    self.charge(tenant, started.elapsed().as_nanos() as u64);
                    reply
                }
            }
        })
    }

    fn charge(&self, tenant: &Arc<TenantState>, cpu_ns: u64) {
        tenant.counters.cpu_ns.fetch_add(cpu_ns, Ordering::Relaxed);
        TenantCounters::bump(&tenant.counters.requests);
    }

    fn observe(&self, event: RespEvent) {
        match event {
            RespEvent::Opened => {
                self.counters.connections_open.fetch_add(1, Ordering::SeqCst);
            }
            RespEvent::Closed => {
                self.counters.connections_open.fetch_sub(1, Ordering::SeqCst);
            }
            RespEvent::FramingError => TenantCounters::bump(&self.counters.framing_errors),
            RespEvent::UnauthenticatedClosed => TenantCounters::bump(&self.counters.connections_unauthenticated_closed),
        }
    }

    fn mode(&self) -> &'static str {
        if self.cluster.is_some() {
            "cluster"
        } else {
            "standalone"
        }
    }

    fn preauth(&self) -> &PreAuth {
        &self.preauth
    }

    fn hello_timeout(&self) -> Duration {
        self.hello_timeout
    }
}

/// In a cluster, Redis Cluster's refusals for keys this node does not serve.
fn misrouted(node: &Node, keys: &[Bytes]) -> Option<Reply> {
    let role = node.cluster.as_ref()?;
    if role.map.single_owner(keys.iter().map(|key| &key[..])).is_err() {
        return Some(Reply::Error(
            "CROSSSLOT Keys in request don't hash to the same slot".into(),
        ));
    }
    let key = keys.first()?;
    let owner = role.map.owner(key);
    if owner.id == role.node_id {
        return None;
    }
    Some(match &owner.resp {
        Some(resp) => Reply::Error(format!("MOVED {} {resp}", key_slot(key))),
        // Sending a Redis client to the node's ferry-protocol port would be worse.
        None => Reply::Error(format!(
            "CLUSTERDOWN slot {} is served by node {}, which has no RESP address in the cluster map",
            key_slot(key),
            owner.id
        )),
    })
}

/// CLUSTER SLOTS and CLUSTER SHARDS from the cluster map (nodes without a RESP address in
/// the map are left out: a Redis client could not talk to them).
fn cluster(node: &Node, sub: &[u8]) -> Reply {
    let Some(role) = &node.cluster else {
        return Reply::err("This instance has cluster support disabled");
    };
    let with_resp = role.map.nodes().iter().filter_map(|n| {
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
