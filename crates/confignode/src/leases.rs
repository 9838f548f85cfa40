//! The leader's lessor, run by whichever member leads: it answers heartbeats with grants
//! (after making sure this member still leads, so a deposed leader's grants cannot
//! overlap its successor's) and proposes the fence and promotion decisions the
//! [`Lessor`] reaches. A member that becomes leader starts a fresh lessor, which waits a
//! whole lease before taking anyone for dead.

use std::collections::BTreeMap;
use std::sync::Weak;
use std::time::{Duration, Instant};

use ferry_config::lease::{Heartbeat, Lessor, NodeHealth};
use ferry_config::wire::ClientReply;
use openraft::error::{CheckIsLeaderError, RaftError};
use parking_lot::Mutex;

use crate::member::Member;

/// How often the leader looks for a failover decision.
pub const DECIDE_EVERY: Duration = Duration::from_millis(50);

/// The lessor of the term this member leads in.
pub(crate) struct Leases {
    started: Instant,
    current: Mutex<Option<(u64, Lessor)>>,
}

impl Leases {
    pub(crate) fn new() -> Leases {
        Leases {
            started: Instant::now(),
            current: Mutex::new(None),
        }
    }

    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Runs `f` on the lessor of `term`, starting one if this term has none yet.
    fn with<T>(&self, term: u64, f: impl FnOnce(&mut Lessor, u64) -> T) -> T {
        let now = self.now_ms();
        let mut current = self.current.lock();
        if current.as_ref().is_none_or(|(held, _)| *held != term) {
            *current = Some((term, Lessor::new(now)));
        }
        let (_, lessor) = current.as_mut().expect("set above");
        f(lessor, now)
    }

    /// What the lessor of the term being led has heard from each storage node (none: this
    /// member does not lead).
    pub(crate) fn health(&self) -> BTreeMap<String, NodeHealth> {
        let now = self.now_ms();
        self.current
            .lock()
            .as_ref()
            .map(|(_, lessor)| lessor.health(now))
            .unwrap_or_default()
    }

    fn forget(&self) {
        *self.current.lock() = None;
    }
}

/// The term this member leads in, or the answer for a caller that should go elsewhere.
async fn leading(member: &Member) -> Result<u64, ClientReply> {
    let raft = member.raft();
    match raft.ensure_linearizable().await {
        Ok(_) => Ok(raft.metrics().borrow().current_term),
        Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(forward))) => Err(ClientReply::NotLeader {
            leader: forward.leader_node.map(|node| node.addr),
        }),
        Err(err) => Err(ClientReply::Failed(err.to_string())),
    }
}

/// Answers a storage node's heartbeat: a grant if this member leads, else where to go.
pub(crate) async fn heartbeat(member: &Member, heartbeat: Heartbeat) -> ClientReply {
    let term = match leading(member).await {
        Ok(term) => term,
        Err(reply) => return reply,
    };
    let config = member.configs().borrow().clone();
    let grant = member
        .leases()
        .with(term, |lessor, now| lessor.on_heartbeat(now, &heartbeat, &config));
    ClientReply::Grant(grant)
}

/// Takes a request that a storage node's process stop (`ferry cluster restart`).
pub(crate) async fn restart(member: &Member, node: &str, incarnation: u64) -> ClientReply {
    let term = match leading(member).await {
        Ok(term) => term,
        Err(reply) => return reply,
    };
    member
        .leases()
        .with(term, |lessor, _| lessor.request_restart(node, incarnation));
    tracing::info!(
        "config member {}: storage node {node} (incarnation {incarnation}) asked to restart",
        member.id()
    );
    ClientReply::Accepted
}

/// While the member lives: on the leader, proposes what the lessor decides.
pub(crate) async fn decide(member: Weak<Member>) {
    loop {
        tokio::time::sleep(DECIDE_EVERY).await;
        let Some(member) = member.upgrade() else {
            return;
        };
        let (leader, term) = {
            let metrics = member.raft().metrics();
            let metrics = metrics.borrow();
            (metrics.current_leader, metrics.current_term)
        };
        if leader != Some(member.id()) {
            member.leases().forget();
            continue;
        }
        let config = member.configs().borrow().clone();
        let Some(command) = member.leases().with(term, |lessor, now| lessor.decide(now, &config)) else {
            continue;
        };
        match command {
            // A primary acting on having replicas: routine.
            ferry_config::ConfigChange::Leased { .. } => tracing::info!("config member {}: {command:?}", member.id()),
            _ => tracing::warn!("config member {}: {command:?}", member.id()),
        }
        let reply = member.propose(command).await;
        if !matches!(reply, ClientReply::Outcome(_)) {
            tracing::warn!(
                "config member {}: the decision was not committed: {reply:?}",
                member.id()
            );
        }
    }
}
