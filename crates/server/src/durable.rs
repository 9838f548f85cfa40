//! A node with a data dir: on start, each tenant's newest snapshot is loaded and the log
//! replayed over it, then the log is opened for appending, each store's commits are
//! journalled into it, and the checkpointer starts (snapshots when the log has grown, or
//! on `BGSAVE`/`SAVE`). Replies pass the log's gate (`ferry_net` does that for both
//! listeners) so none reveals a write before the log holds it as durably as `fsync`
//! promises.

use ferry_proto::TenantId;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_store::TenantStore;
use ferry_wal::{Checkpointer, DataDir, Recovered, Restored, Tenants, Wal, WalConfig, WalError};

use crate::node::TenantState;

/// Where a node keeps its data, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Durability {
    /// The data dir: must exist; held by one node at a time.
    pub data_dir: PathBuf,
    /// The log's fsync mode, segment size and cap.
    pub wal: WalConfig,
    /// Log growth since the last snapshot that starts the next (halved to fit under
    /// `max_log_bytes` when that is lower).
    pub snapshot_log_bytes: u64,
}

impl Durability {
    /// A data dir with the default log settings.
    pub fn new(data_dir: PathBuf) -> Durability {
        Durability {
            data_dir,
            wal: WalConfig::default(),
            snapshot_log_bytes: ferry_wal::DEFAULT_SNAPSHOT_LOG_BYTES,
        }
    }
}

/// The open log of a running node, and what its recovery found.
pub(crate) struct Durable {
    pub(crate) wal: Arc<Wal>,
    pub(crate) checkpointer: Checkpointer,
    pub(crate) restored: Restored,
    pub(crate) recovered: Recovered,
    pub(crate) recovery_time: Duration,
}

impl Durable {
    /// Stops taking snapshots, then writes and syncs the log and lets go of the data dir.
    pub(crate) fn close(&self) {
        self.checkpointer.stop();
        self.wal.close();
    }
}

/// The node's tenants, for the checkpointer.
struct NodeTenants(Vec<(TenantId, Arc<TenantState>)>);

impl Tenants for NodeTenants {
    fn each(&self, each: &mut dyn FnMut(TenantId, &TenantStore) -> Result<(), WalError>) -> Result<(), WalError> {
        self.0.iter().try_for_each(|(id, tenant)| each(*id, &tenant.store))
    }
}

/// Replays the data dir's log into `tenants`' stores and journals their commits from now
/// on. Data of a tenant the configuration no longer lists is an error, never dropped.
///
/// A replica's log (`read_only`: why) refuses commits of its own and takes only records
/// copied from its primary.
pub(crate) fn open(
    config: &Durability,
    tenants: &HashMap<TenantId, Arc<TenantState>>,
    read_only: Option<String>,
) -> Result<Durable, WalError> {
    let started = Instant::now();
    let dir = DataDir::lock(&config.data_dir)?;
    let restored = ferry_wal::load_snapshots(&dir, |id| tenants.get(&id).map(|tenant| &tenant.store))?;
    let recovered = ferry_wal::replay(&dir, &restored, |lsn, commit| {
        let tenant = tenants
            .get(&commit.tenant)
            .ok_or(WalError::UnknownTenant(commit.tenant))?;
        tenant
            .store
            .recover_commit(commit.version, &commit.writes)
            .map_err(|err| WalError::Replay {
                lsn,
                why: err.to_string(),
            })
    })?;
    let wal = Arc::new(Wal::open(dir, config.wal.clone(), &recovered)?);
    wal.set_read_only(read_only);
    for (id, tenant) in tenants {
        if tenant.store.attach_journal(wal.journal(*id)).is_err() {
            unreachable!("a tenant's store is journalled once, here");
        }
        let stats = tenant.store.stats();
        if stats.used_bytes > stats.quota_bytes {
            tracing::warn!(
                tenant = id.0,
                used_bytes = stats.used_bytes,
                quota_bytes = stats.quota_bytes,
                "recovered data exceeds the tenant's quota: writes that grow it are refused"
            );
        }
    }
    let log_from = restored.covers.values().copied().min().unwrap_or(0);
    let mut trigger = config.snapshot_log_bytes;
    if let Some(cap) = config.wal.max_log_bytes {
        trigger = trigger.min(cap / 2);
    }
    let mut sorted: Vec<_> = tenants.iter().map(|(id, tenant)| (*id, Arc::clone(tenant))).collect();
    sorted.sort_by_key(|(id, _)| *id);
    let checkpointer = Checkpointer::start(Arc::clone(&wal), Arc::new(NodeTenants(sorted)), trigger, log_from)?;
    Ok(Durable {
        wal,
        checkpointer,
        restored,
        recovered,
        recovery_time: started.elapsed(),
    })
}
