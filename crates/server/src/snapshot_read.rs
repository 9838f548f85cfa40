//! A request's read at the reader's snapshot of this node (TL2, docs/PROTOCOL.md): the one
//! among `snapshots` whose clock is this tenant store's, or a snapshot that starts now,
//! taken again while the read finds something changed after it (a busy key or table).
//! What `list` and `read_part` read through.

use ferry_proto::Snapshot;
use ferry_store::tenant::MAX_FRESH_SNAPSHOT_ATTEMPTS;
use ferry_store::{StoreError, TenantStore};

/// Runs `read` at the reader's snapshot, or at a fresh one; what it read and the read
/// version it read at.
pub(crate) fn at_snapshot<T>(
    store: &TenantStore,
    snapshots: &[Snapshot],
    mut read: impl FnMut(u64) -> Result<T, StoreError>,
) -> Result<(T, u64), StoreError> {
    if let Some(snapshot) = snapshots.iter().find(|snapshot| snapshot.clock == store.clock_id()) {
        return read(snapshot.version).map(|value| (value, snapshot.version));
    }
    let mut attempts = 0;
    loop {
        let read_version = store.read_version();
        match read(read_version) {
            Err(StoreError::Newer { .. }) if attempts < MAX_FRESH_SNAPSHOT_ATTEMPTS => attempts += 1,
            result => return result.map(|value| (value, read_version)),
        }
    }
}
