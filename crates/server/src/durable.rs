//! A node with a data dir: on start, the log is replayed into the tenants' stores, then
//! opened for appending, and each store's commits are journalled into it. Replies pass the
//! log's gate (`ferry_net` does that for both listeners) so none reveals a write before
//! the log holds it as durably as `fsync` promises.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_wal::{DataDir, Recovered, Wal, WalConfig, WalError};

use crate::node::TenantState;

/// Where a node keeps its data, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Durability {
    /// The data dir: must exist; held by one node at a time.
    pub data_dir: PathBuf,
    /// The log's fsync mode, segment size and cap.
    pub wal: WalConfig,
}

/// The open log of a running node, and what its recovery found.
pub(crate) struct Durable {
    pub(crate) wal: Arc<Wal>,
    pub(crate) recovered: Recovered,
    pub(crate) recovery_time: Duration,
}

/// Replays the data dir's log into `tenants`' stores and journals their commits from now
/// on. Data of a tenant the configuration no longer lists is an error, never dropped.
pub(crate) fn open(config: &Durability, tenants: &HashMap<u32, Arc<TenantState>>) -> Result<Durable, WalError> {
    let started = Instant::now();
    let dir = DataDir::lock(&config.data_dir)?;
    let recovered = ferry_wal::replay(&dir, |lsn, commit| {
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
    for (id, tenant) in tenants {
        if tenant.store.attach_journal(wal.journal(*id)).is_err() {
            unreachable!("a tenant's store is journalled once, here");
        }
        let stats = tenant.store.stats();
        if stats.used_bytes > stats.quota_bytes {
            tracing::warn!(
                tenant = id,
                used_bytes = stats.used_bytes,
                quota_bytes = stats.quota_bytes,
                "recovered data exceeds the tenant's quota: writes that grow it are refused"
            );
        }
    }
    Ok(Durable {
        wal,
        recovered,
        recovery_time: started.elapsed(),
    })
}
