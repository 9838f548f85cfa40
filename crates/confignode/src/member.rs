//! One member of the config group: its data dir, its Raft instance, and the configuration
//! its state machine has applied. Members are started with the same list of all members;
//! a member whose log is empty proposes that list as the group's first membership
//! (openraft accepts the same list from several members), so the group forms as soon as a
//! majority is up, whichever members those are.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ferry_cluster::NodeEntry;
use ferry_config::wire::{ClientReply, GroupStatus};
use ferry_config::{ClusterConfig, ConfigChange, Outcome, Refusal};
use ferry_wal::DataDir;
use openraft::error::{ClientWriteError, InitializeError, RaftError};
use openraft::{BasicNode, SnapshotPolicy};
use tokio::sync::watch;

use crate::log_store::FileLogStore;
use crate::peer::PeerNetwork;
use crate::state_machine::ConfigStateMachine;
use crate::types::{MemberId, Raft};

/// How often the leader reminds followers it is alive.
pub const HEARTBEAT_MS: u64 = 100;

/// A follower that hears nothing for a random time in this range stands for election.
/// Generous against the stalls of a loaded machine (a spurious election costs a term, not
/// safety), and short enough that a dead leader is replaced well within a second or two.
pub const ELECTION_TIMEOUT_MS: (u64, u64) = (600, 1200);

/// Entries between snapshots of the configuration.
pub const SNAPSHOT_EVERY_ENTRIES: u64 = 1000;

/// How often a member that was given a bootstrap map checks whether it must propose it.
const BOOTSTRAP_RETRY: Duration = Duration::from_millis(100);

/// What a member is started with.
#[derive(Clone, Debug)]
pub struct MemberConfig {
    /// This member's id (a key of `members`).
    pub id: MemberId,
    /// Every member's id and listener address (`host:port`), the same on all members.
    pub members: BTreeMap<MemberId, String>,
    /// Where its Raft log and snapshot live (held exclusively while it runs).
    pub data_dir: PathBuf,
    /// The cluster map to load if the cluster has no configuration yet.
    pub bootstrap: Option<Vec<NodeEntry>>,
    /// TLS for the links to the other members (their listeners serve TLS too); `None`:
    /// plain TCP.
    pub peer_tls: Option<Arc<ferry_net::tls::rustls::ClientConfig>>,
}

/// Why a member could not start.
#[derive(Debug, thiserror::Error)]
pub enum MemberError {
    /// The member list does not name this member, or is empty.
    #[error("member {id} is not in the member list {members:?}")]
    NotAMember {
        /// This member's id.
        id: MemberId,
        /// The ids given.
        members: Vec<MemberId>,
    },
    /// The data dir cannot be used.
    #[error("{0}")]
    DataDir(String),
    /// Raft refused to start.
    #[error("raft: {0}")]
    Raft(String),
}

/// A running member.
pub struct Member {
    id: MemberId,
    raft: Raft,
    configs: watch::Receiver<Arc<ClusterConfig>>,
    leases: crate::leases::Leases,
    _data_dir: DataDir,
}

impl Member {
    /// Opens the data dir, starts Raft, and forms or joins the group.
    pub async fn start(config: MemberConfig) -> Result<Arc<Member>, MemberError> {
        if !config.members.contains_key(&config.id) {
            return Err(MemberError::NotAMember {
                id: config.id,
                members: config.members.keys().copied().collect(),
            });
        }
        std::fs::create_dir_all(&config.data_dir)
            .map_err(|err| MemberError::DataDir(format!("{}: {err}", config.data_dir.display())))?;
        let data_dir = DataDir::lock(&config.data_dir).map_err(|err| MemberError::DataDir(err.to_string()))?;
        let log = FileLogStore::open(&config.data_dir).map_err(|err| MemberError::DataDir(err.to_string()))?;
        let machine =
            ConfigStateMachine::open(&config.data_dir).map_err(|err| MemberError::DataDir(err.to_string()))?;
        let configs = machine.configs();
        let raft_config = openraft::Config {
            cluster_name: "ferry-config".into(),
            heartbeat_interval: HEARTBEAT_MS,
            election_timeout_min: ELECTION_TIMEOUT_MS.0,
            election_timeout_max: ELECTION_TIMEOUT_MS.1,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(SNAPSHOT_EVERY_ENTRIES),
            max_in_snapshot_log_to_keep: SNAPSHOT_EVERY_ENTRIES / 10,
            ..Default::default()
        }
        .validate()
        .map_err(|err| MemberError::Raft(err.to_string()))?;
        let network = PeerNetwork {
            tls: config.peer_tls.clone(),
        };
        let raft = Raft::new(config.id, Arc::new(raft_config), network, log, machine)
            .await
            .map_err(|err| MemberError::Raft(err.to_string()))?;
        let initialized = raft
            .is_initialized()
            .await
            .map_err(|err| MemberError::Raft(err.to_string()))?;
        if !initialized {
            let members: BTreeMap<MemberId, BasicNode> = config
                .members
                .iter()
                .map(|(id, addr)| (*id, BasicNode { addr: addr.clone() }))
                .collect();
            match raft.initialize(members).await {
                Ok(()) | Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {}
                Err(err) => return Err(MemberError::Raft(err.to_string())),
            }
        }
        let member = Arc::new(Member {
            id: config.id,
            raft,
            configs,
            leases: crate::leases::Leases::new(),
            _data_dir: data_dir,
        });
        tokio::spawn(crate::leases::decide(Arc::downgrade(&member)));
        if let Some(nodes) = config.bootstrap {
            tokio::spawn(propose_bootstrap(Arc::downgrade(&member), nodes));
        }
        Ok(member)
    }

    /// This member's id.
    pub fn id(&self) -> MemberId {
        self.id
    }

    /// Its Raft instance.
    pub(crate) fn raft(&self) -> &Raft {
        &self.raft
    }

    /// The leader's lessor.
    pub(crate) fn leases(&self) -> &crate::leases::Leases {
        &self.leases
    }

    /// The configuration as this member has applied it (committed configurations only).
    pub fn configs(&self) -> watch::Receiver<Arc<ClusterConfig>> {
        self.configs.clone()
    }

    /// Proposes `command`: its outcome once committed and applied, or where the leader is.
    pub async fn propose(&self, command: ConfigChange) -> ClientReply {
        match self.raft.client_write(command).await {
            Ok(written) => ClientReply::Outcome(written.data),
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(forward))) => ClientReply::NotLeader {
                leader: forward.leader_node.map(|node| node.addr),
            },
            Err(err) => ClientReply::Failed(err.to_string()),
        }
    }

    /// This member's view of the group.
    pub fn status(&self) -> GroupStatus {
        let metrics = self.raft.metrics().borrow().clone();
        let members = metrics
            .membership_config
            .nodes()
            .map(|(id, node)| (*id, node.addr.clone()))
            .collect();
        GroupStatus {
            id: self.id,
            leader: metrics.current_leader,
            term: metrics.current_term,
            last_applied: metrics.last_applied.map(|log_id| log_id.index),
            members,
            epoch: self.configs.borrow().epoch,
            nodes: match metrics.current_leader == Some(self.id) {
                true => self.leases.health(),
                false => Default::default(),
            },
        }
    }

    /// Stops Raft (the data dir is released when the member is dropped).
    pub async fn shutdown(&self) {
        if let Err(err) = self.raft.shutdown().await {
            tracing::warn!("config member {}: raft did not stop cleanly: {err}", self.id);
        }
    }
}

/// Proposes the bootstrap map while this member leads and the cluster has no
/// configuration; every member given the map does this, and the first one committed wins.
async fn propose_bootstrap(member: std::sync::Weak<Member>, nodes: Vec<NodeEntry>) {
    loop {
        let Some(member) = member.upgrade() else {
            return;
        };
        if member.configs.borrow().is_bootstrapped() {
            return;
        }
        let leads = member.raft.metrics().borrow().current_leader == Some(member.id);
        if leads {
            match member.propose(ConfigChange::Bootstrap { nodes: nodes.clone() }).await {
                ClientReply::Outcome(Outcome::Applied { epoch }) => {
                    tracing::info!("config member {}: loaded the bootstrap map (epoch {epoch})", member.id);
                    return;
                }
                ClientReply::Outcome(Outcome::Refused(Refusal::AlreadyBootstrapped { .. })) => return,
                ClientReply::Outcome(Outcome::Refused(refusal)) => {
                    tracing::error!("config member {}: the bootstrap map was refused: {refusal}", member.id);
                    return;
                }
                _ => {}
            }
        }
        drop(member);
        tokio::time::sleep(BOOTSTRAP_RETRY).await;
    }
}
