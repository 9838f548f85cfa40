//! Tables' listings for functions: KEYS, SCAN, DBSIZE, RANDOMKEY, FLUSHDB and FLUSHALL in a
//! script. On the node a listing is made at the attempt's read version (moved forward as a
//! read's is, `store_ctx`); for a function run on the app side it is the `list` request,
//! made at the reader's snapshot of this node. Either way it joins the read set and is
//! validated at commit (`ferry_store::tenant`'s membership reads), so a key created or
//! removed meanwhile is a conflict, never a phantom.
//!
//! In a cluster a script on the node lists only the keys of the slots this node serves (as
//! Redis Cluster's KEYS does), and `list` is refused: a function run on the app side lists
//! over a single node only.

use ferry_func::{CtxError, Listed};
use ferry_proto::{ListedKey, Response, ResponseBody, Snapshot, Status, MAX_BODY_BYTES, MAX_LISTED_KEYS};
use ferry_store::{KeyInfo, StoreError, TenantStore};

use crate::routing::ClusterRole;
use crate::store_ctx::AttemptState;

/// A stored key as a listing shows it.
fn listed_key(info: KeyInfo) -> ListedKey {
    ListedKey {
        key: info.key,
        type_name: info.type_name,
        expires_at_ms: info.expires_at_ms,
    }
}

/// Lists `tables` at `read_version`.
fn list_at(store: &TenantStore, tables: &[String], read_version: u64) -> Result<Vec<Vec<KeyInfo>>, StoreError> {
    tables.iter().map(|table| store.list_at(table, read_version)).collect()
}

/// Answers `list`: `tables` at the reader's snapshot of this node (`snapshots`), or at one
/// that starts now.
pub(crate) fn answer(store: &TenantStore, tables: &[String], snapshots: &[Snapshot]) -> Response {
    let listed =
        crate::snapshot_read::at_snapshot(store, snapshots, |read_version| list_at(store, tables, read_version));
    let (listed, version) = match listed {
        Ok(listed) => listed,
        Err(err) => return crate::exec::store_error(err),
    };
    let total: usize = listed.iter().map(Vec::len).sum();
    let bytes_returned: usize = listed.iter().flatten().map(|info| info.key.len()).sum();
    // Each key's length prefix, type and expiry, and each table's count, besides the keys.
    let encoded_bytes = bytes_returned + total * (2 + 1 + 9) + listed.len() * 4 + 64;
    if total > MAX_LISTED_KEYS || encoded_bytes > MAX_BODY_BYTES as usize {
        return Response::error(
            Status::TooLarge,
            format!(
                "the listing holds {total} keys ({encoded_bytes} bytes), more than one answer carries ({MAX_LISTED_KEYS} keys, {MAX_BODY_BYTES} bytes); run the function on the node"
            ),
        );
    }
    let mut response = Response::ok(ResponseBody::List {
        tables: listed
            .into_iter()
            .map(|keys| keys.into_iter().map(listed_key).collect())
            .collect(),
        snapshot: Snapshot {
            clock: store.clock_id(),
            version,
        },
    });
    response.bytes_returned = u32::try_from(bytes_returned).unwrap_or(u32::MAX);
    response
}

/// Lists `tables` for an attempt on the node at its read version (moved forward if a
/// table changed since and nothing read so far did), records each listing in its read set
/// and shows its own writes over them. In a cluster only this node's keys are listed.
pub(crate) fn list_into(
    store: &TenantStore,
    cluster: Option<&ClusterRole>,
    state: &mut AttemptState,
    tables: &[String],
) -> Result<Vec<Vec<Listed>>, CtxError> {
    if let Some(role) = cluster {
        if role.lease_lapsed() {
            return Err(CtxError::Unavailable(crate::routing::NO_LEASE.to_string()));
        }
    }
    let listed =
        crate::store_ctx::at_read_version_extending(store, state, |read_version| list_at(store, tables, read_version))?;
    let mut out = Vec::with_capacity(tables.len());
    for (table, keys) in tables.iter().zip(listed) {
        state.tx.record_listing(table, state.read_version)?;
        let owned: Vec<ListedKey> = keys
            .into_iter()
            .filter(|info| cluster.is_none_or(|role| crate::routing::not_owned(role, &info.key).is_none()))
            .map(listed_key)
            .collect();
        out.push(state.tx.overlay(table, owned));
    }
    Ok(out)
}

/// The keys of a listing, for tests.
#[cfg(test)]
pub(crate) fn keys_of(listed: &[Listed]) -> Vec<bytes::Bytes> {
    let mut keys: Vec<bytes::Bytes> = listed.iter().map(|listed| listed.key().clone()).collect();
    keys.sort();
    keys
}
