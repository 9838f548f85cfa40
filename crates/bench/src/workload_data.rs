//! What a benchmark workload's functions read: the data its run needs loaded first.

use bytes::Bytes;

use ferry_client::Client;
use ferry_experiment::model::{FunctionKind, Workload};
use ferry_func::builtins::{auth, traverse, ycsbt};

use ferry_datasets::{load_dataset, load_social, DatasetError};

/// Smallest object a workload's data set holds: the 8-byte head every built-in value
/// starts with.
const MIN_OBJECT_BYTES: usize = 8;

/// Object size when no function names one.
const DEFAULT_OBJECT_BYTES: usize = 64;

/// Size of the graph's and accounts' objects: the largest any function of the workload
/// reads.
pub fn object_bytes(workload: &Workload) -> usize {
    workload
        .functions
        .iter()
        .map(|f| f.object_bytes as usize)
        .max()
        .unwrap_or(DEFAULT_OBJECT_BYTES)
        .max(MIN_OBJECT_BYTES)
}

/// The YCSB-T account count of a workload, if it has YCSB-T functions.
pub fn ycsbt_accounts(workload: &Workload) -> Option<u64> {
    workload.functions.iter().find_map(|f| match f.kind {
        FunctionKind::YcsbtRead { accounts } | FunctionKind::YcsbtTransfer { accounts } => Some(accounts),
        FunctionKind::Traverse | FunctionKind::Social { .. } => None,
    })
}

/// The social graph's vertex count, if the workload runs social functions.
pub fn social_vertices(workload: &Workload) -> Option<u64> {
    workload.functions.iter().find_map(|f| match f.kind {
        FunctionKind::Social { vertices, .. } => Some(vertices),
        _ => None,
    })
}

/// Loads what the workload's functions read: the graph `traverse` walks (`graph_nodes`
/// nodes, values as large as the largest object), for YCSB-T the accounts, and for the
/// social application its graph and users.
pub async fn load_for_workload(
    client: &Client,
    workload: &Workload,
    graph_nodes: u64,
    seed: u64,
) -> Result<(), DatasetError> {
    let bytes = object_bytes(workload);
    if workload.functions.iter().any(|f| f.kind == FunctionKind::Traverse) {
        let graph: Vec<(Bytes, Bytes)> = traverse::dataset(graph_nodes, bytes, seed).collect();
        load_dataset(client, traverse::TABLE, graph).await?;
    }
    if let Some(accounts) = ycsbt_accounts(workload) {
        let data: Vec<(Bytes, Bytes)> = ycsbt::dataset(accounts, bytes, seed).collect();
        load_dataset(client, ycsbt::TABLE, data).await?;
    }
    if let Some(vertices) = social_vertices(workload) {
        load_social(client, vertices, auth::DEFAULT_LOG_N, seed).await?;
    }
    Ok(())
}
