//! A storage node's part in replication (`ferry_replication`). As a primary it serves its
//! log to replicas on `--replication-listen`, and with `--ack replica` its replies wait
//! until a replica has logged what they may reveal. As a replica (`--replica-of`) it
//! first copies the primary if it holds nothing yet (or fell behind), then copies each
//! record into its own log and installs it, refuses writes of its own (`READONLY`), and
//! serves reads.

use ferry_proto::TenantId;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::watch;

use ferry_replication::{Apply, BootstrapReport, FollowerExit, FollowerStatus, OnAhead, Source, Upstream};
use ferry_wal::record::{decode, next_frame};
use ferry_wal::{DataDir, Wal, WalError};

use crate::config::ConfigError;
use crate::durable::Durability;
use crate::node::TenantState;

/// Longest replication token.
pub const MAX_REPLICATION_TOKEN_BYTES: usize = ferry_replication::wire::MAX_TOKEN_BYTES;

/// When a write is acknowledged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Ack {
    /// Once this node's log holds it as its fsync mode promises.
    #[default]
    Primary,
    /// Once a replica's log holds it too.
    Replica,
}

impl Ack {
    /// Every mode, in the order `--help` lists them.
    pub const ALL: [Ack; 2] = [Ack::Primary, Ack::Replica];

    /// The name used by `--ack`.
    pub fn name(self) -> &'static str {
        match self {
            Ack::Primary => "primary",
            Ack::Replica => "replica",
        }
    }
}

impl FromStr for Ack {
    type Err = String;

    fn from_str(name: &str) -> Result<Ack, String> {
        Ack::ALL
            .into_iter()
            .find(|ack| ack.name() == name)
            .ok_or_else(|| format!("unknown ack mode {name:?}: use primary or replica"))
    }
}

/// A node's replication settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replication {
    /// Where replicas pull this node's log from (a primary's side), if anywhere.
    pub listen: Option<SocketAddr>,
    /// The primary's replication address (`HOST:PORT`) when this node is a replica.
    pub primary: Option<String>,
    /// The secret every replication link of the cluster presents.
    pub token: String,
    /// When writes are acknowledged (a primary's side).
    pub ack: Ack,
    /// TLS for the link to the primary (a replica's side); `None`: plain TCP.
    pub tls: Option<ferry_net::tls::ClientTls>,
    /// In a config group: the appointment epoch of `primary` (a replica copies only while
    /// the shard keeps that primary); 0 otherwise.
    pub primary_epoch: u64,
}

impl Replication {
    /// Checks the settings against the node's (replication needs a log).
    pub(crate) fn validate(&self, durable: bool) -> Result<(), ConfigError> {
        let invalid = |why: &str| Err(ConfigError::Invalid(why.to_string()));
        if !durable {
            return invalid("replication needs a data dir (--data-dir): it ships the log");
        }
        if self.token.is_empty() || self.token.len() > MAX_REPLICATION_TOKEN_BYTES {
            return invalid(&format!(
                "the replication token must be 1..={MAX_REPLICATION_TOKEN_BYTES} bytes"
            ));
        }
        if self.listen.is_none() && self.primary.is_none() {
            return invalid("replication needs --replication-listen (a primary) or --replica-of (a replica)");
        }
        if let Some(primary) = &self.primary {
            if !ferry_cluster::map::is_host_port(primary) {
                return invalid(&format!("--replica-of {primary:?} is not HOST:PORT"));
            }
        }
        Ok(())
    }

    /// The link to the primary, with its TLS loaded.
    pub(crate) fn upstream(&self, primary: &str) -> Result<Upstream, WalError> {
        let tls = self
            .tls
            .as_ref()
            .map(|tls| tls.load())
            .transpose()
            .map_err(|err| WalError::Failed(format!("TLS for the replication link: {err}")))?;
        Ok(Upstream {
            addr: primary.to_string(),
            token: Bytes::from(self.token.clone().into_bytes()),
            tls,
        })
    }
}

/// Before a replica opens its data dir: copies its primary into it if it holds nothing
/// yet or a copy is due (a marker left when it fell behind, or an interrupted copy).
pub(crate) fn copy_if_needed(
    replication: &Replication,
    durability: &Durability,
) -> Result<Option<BootstrapReport>, WalError> {
    let Some(primary) = &replication.primary else {
        return Ok(None);
    };
    let dir = DataDir::lock(&durability.data_dir)?;
    let copied = (|| {
        if !ferry_replication::needs_copy(&dir).map_err(|err| WalError::Failed(err.to_string()))? {
            return Ok(None);
        }
        let upstream = replication.upstream(primary)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|err| WalError::Failed(format!("cannot start the copy: {err}")))?;
        tracing::info!(%primary, "copying the primary's snapshots and log into an empty or stale data dir");
        let report = runtime
            .block_on(ferry_replication::copy_from_primary(&dir, &upstream))
            .map_err(|err| WalError::Failed(format!("copying the primary: {err}")))?;
        Ok(Some(report))
    })();
    dir.release();
    copied
}

/// Logs and installs the primary's records into the node's tenants.
struct Installer {
    wal: Arc<Wal>,
    tenants: HashMap<TenantId, Arc<TenantState>>,
}

impl Apply for Installer {
    fn apply(&self, lsn: u64, frame: &[u8]) -> Result<(), String> {
        let (payload, _) = next_frame(frame).map_err(|err| format!("record at {lsn}: {err}"))?;
        let commit = decode(payload).map_err(|err| format!("record at {lsn}: {err}"))?;
        let tenant = self.tenants.get(&commit.tenant).ok_or_else(|| {
            format!(
                "record at {lsn} is of tenant {}, which this node does not serve: give it the primary's tenants",
                commit.tenant
            )
        })?;
        tenant
            .store
            .replicate(commit.version, &commit.writes, || self.wal.append_frames(lsn, frame))
            .map_err(|err| format!("record at {lsn}: {err}"))
    }
}

/// What replication shows the node's stats and metrics.
#[derive(Default)]
pub(crate) struct ReplicationState {
    /// The primary's side, when it serves replicas.
    pub(crate) source: Option<Arc<Source>>,
    /// The replica's side, when it follows a primary.
    pub(crate) follower: Option<Arc<FollowerStatus>>,
}

/// A running follower: stopped when the shard is fenced or this node promoted.
pub(crate) struct FollowerHandle {
    /// The appointment epoch of the primary it copies (0 outside a config group).
    pub(crate) primary_epoch: u64,
    stop: Arc<watch::Sender<bool>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl FollowerHandle {
    /// Stops copying and waits until nothing more is appended.
    pub(crate) async fn pause(&mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    /// Stops copying for good.
    pub(crate) async fn stop(mut self) {
        self.pause().await;
    }
}

/// Starts the node's side of replication on `runtime`. A follower that can no longer
/// continue its primary's log leaves the copy marker and reports on `fatal`: the node
/// must restart, and copies the primary on that start.
pub(crate) fn start(
    replication: &Replication,
    node: &crate::node::Node,
    listener: Option<tokio::net::TcpListener>,
    tls: Option<ferry_net::tls::Acceptor>,
    runtime: &tokio::runtime::Runtime,
    shutdown: watch::Receiver<bool>,
    fatal: Arc<watch::Sender<Option<String>>>,
) -> Result<(ReplicationState, Option<FollowerHandle>), WalError> {
    let mut state = ReplicationState::default();
    let Some(durable) = &node.durable else {
        return Ok((state, None)); // validated: replication has a data dir
    };
    let (wal, tenants) = (&durable.wal, &node.tenants);
    if replication.ack == Ack::Replica && replication.primary.is_none() {
        // A replica's replies wait for nothing more; it turns this on if promoted.
        wal.gate().require_replica(true);
    }
    if let Some(listener) = listener {
        let source = Arc::new(Source::new(
            Arc::clone(wal),
            Bytes::from(replication.token.clone().into_bytes()),
            tls,
        ));
        runtime.spawn(ferry_replication::serve(
            listener,
            Arc::clone(&source),
            shutdown.clone(),
        ));
        state.source = Some(source);
    }
    let mut handle = None;
    if let Some(primary) = &replication.primary {
        let upstream = replication.upstream(primary)?;
        let apply: Arc<dyn Apply> = Arc::new(Installer {
            wal: Arc::clone(wal),
            tenants: tenants.clone(),
        });
        let status = Arc::new(FollowerStatus::default());
        state.follower = Some(Arc::clone(&status));
        let data_dir = wal.data_dir().path().to_path_buf();
        let (stop, stopped) = watch::channel(false);
        let stop = Arc::new(stop);
        // The node's shutdown stops it too.
        let on_shutdown = Arc::clone(&stop);
        let mut shutdown = shutdown;
        runtime.spawn(async move {
            if shutdown.wait_for(|stop| *stop).await.is_ok() {
                let _ = on_shutdown.send(true);
            }
        });
        // In a config group a longer log than the primary's is kept: the primary lost
        // records, and the group promotes the longest log instead of it.
        let on_ahead = match replication.primary_epoch {
            0 => OnAhead::Resync,
            _ => OnAhead::Hold,
        };
        let follow = ferry_replication::follow(upstream, Arc::clone(wal), apply, status, on_ahead, stopped);
        let task = runtime.spawn(async move {
            let why = match follow.await {
                FollowerExit::Stopped => return,
                FollowerExit::Resync(why) => match ferry_replication::request_copy(&data_dir) {
                    Ok(()) => format!("{why}; restart the node to copy the primary again"),
                    Err(err) => format!("{why}; and the copy marker could not be written: {err}"),
                },
                FollowerExit::Failed(why) => format!("replication stopped: {why}"),
            };
            tracing::error!("{why}");
            let _ = fatal.send(Some(why));
        });
        handle = Some(FollowerHandle {
            primary_epoch: replication.primary_epoch,
            stop,
            task: Some(task),
        });
    }
    Ok((state, handle))
}
