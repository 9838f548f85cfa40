//! Loading snapshots on start: each tenant's newest snapshot into its store, before the
//! log's tail is replayed over it ([`crate::replay`] skips what the snapshots hold).

use ferry_proto::TenantId;
use std::collections::HashMap;

use ferry_store::TenantStore;

use crate::dir::DataDir;
use crate::error::WalError;
use crate::snapshot;

/// What the snapshots gave back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Restored {
    /// Per tenant, the log offset its snapshot covers: the log is replayed from there.
    pub covers: HashMap<TenantId, u64>,
    /// The log must reach at least this far: the snapshots may hold commits logged up to
    /// here (the log was synced to here before they were named).
    pub log_needed_to: u64,
    /// Objects loaded.
    pub objects: u64,
    /// Bytes of snapshot read.
    pub bytes: u64,
}

/// Loads the newest snapshot of every tenant in `dir` into the store `store_of` gives for
/// it. A snapshot of a tenant it does not know is an error, never dropped. Older
/// snapshots (left by a crash between a snapshot and their removal) and temporary files
/// of an unfinished snapshot are removed.
pub fn load_snapshots<'s>(
    dir: &DataDir,
    mut store_of: impl FnMut(TenantId) -> Option<&'s TenantStore>,
) -> Result<Restored, WalError> {
    remove_unfinished(dir)?;
    let mut newest: HashMap<TenantId, (u64, std::path::PathBuf)> = HashMap::new();
    let mut older = Vec::new();
    for (tenant, lsn, path) in dir.snapshots()? {
        // Sorted by (tenant, lsn): a later one of a tenant replaces an older one.
        older.extend(newest.insert(tenant, (lsn, path)).map(|(_, path)| path));
    }
    let mut restored = Restored::default();
    let mut tenants: Vec<_> = newest.into_iter().collect();
    tenants.sort_by_key(|(tenant, _)| *tenant);
    for (tenant, (lsn, path)) in tenants {
        let store = store_of(tenant).ok_or(WalError::UnknownTenant(tenant))?;
        let (head, bytes, durable_to) = snapshot::read(
            &path,
            |head| {
                if head.tenant != tenant || head.lsn != lsn {
                    return Err(WalError::Snapshot {
                        path: path.clone(),
                        why: format!("its head names tenant {} at offset {}", head.tenant, head.lsn),
                    });
                }
                Ok(())
            },
            |table, key, version, value| {
                restored.objects += 1;
                store
                    .recover_object(table, key, version, value)
                    .map_err(|err| WalError::Snapshot {
                        path: path.clone(),
                        why: err.to_string(),
                    })
            },
        )?;
        store.recover_clock(head.clock);
        restored.bytes += bytes;
        restored.covers.insert(tenant, lsn);
        restored.log_needed_to = restored.log_needed_to.max(durable_to);
    }
    // Only once the newer ones loaded: until then an older one is the way back.
    for path in older {
        std::fs::remove_file(&path).map_err(|err| WalError::io(&path, "cannot remove", err))?;
    }
    Ok(restored)
}

/// Removes `*.snap.tmp` files: snapshots a crash or a stop interrupted.
fn remove_unfinished(dir: &DataDir) -> Result<(), WalError> {
    let entries = std::fs::read_dir(dir.path()).map_err(|err| WalError::io(dir.path(), "cannot list", err))?;
    for entry in entries {
        let entry = entry.map_err(|err| WalError::io(dir.path(), "cannot list", err))?;
        if entry
            .file_name()
            .to_str()
            .is_some_and(|name| name.ends_with(".snap.tmp"))
        {
            let path = entry.path();
            std::fs::remove_file(&path).map_err(|err| WalError::io(&path, "cannot remove", err))?;
        }
    }
    Ok(())
}
