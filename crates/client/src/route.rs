//! Where the requests of an invocation run here go: to the one storage node of a plain
//! [`Client`], or to each key's node in a cluster. The catalog (the node-local table,
//! which every node keeps its own copy of) is read on the invocation's home node, the one
//! serving its routing key, so a function that reads its library and then the keys of
//! that node commits on one node.

use crate::client::Client;
use crate::cluster::ClusterView;
use crate::config::ClientConfig;
use crate::error::ClientError;

/// The node (or nodes) a local invocation fetches from and commits to.
#[derive(Clone, Copy)]
pub(crate) enum Route<'c> {
    /// Everything goes to one storage node.
    Node(&'c Client),
    /// Each key goes to the node of the cluster that serves it; node-local tables to the
    /// home node (the second field: its id).
    Cluster(&'c ClusterView, &'c str),
}

impl<'c> Route<'c> {
    /// The client of the node serving `key` of `table`.
    pub(crate) fn client_for(self, table: &str, key: &[u8]) -> Result<&'c Client, ClientError> {
        match self {
            Route::Node(client) => Ok(client),
            Route::Cluster(cluster, _) => cluster.client(self.node_of(table, key)),
        }
    }

    /// The id of the node serving `key` of `table` (the same for every key of a plain
    /// client).
    pub(crate) fn node_of(self, table: &str, key: &[u8]) -> &'c str {
        match self {
            Route::Node(_) => "",
            Route::Cluster(_, home) if ferry_cluster::is_node_local(table) => home,
            Route::Cluster(cluster, _) => &cluster.map().owner(key).id,
        }
    }

    /// The configuration every node's client shares (registry, trace, timeouts).
    pub(crate) fn config(self) -> &'c ClientConfig {
        match self {
            Route::Node(client) => client.config(),
            Route::Cluster(cluster, _) => cluster.config(),
        }
    }
}
