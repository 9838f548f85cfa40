//! Where the requests of an invocation run here go: to the one storage node of a plain
//! [`Client`], or to each key's node in a cluster.

use crate::client::{Client, ClientConfig};
use crate::cluster::ClusterView;
use crate::error::ClientError;

/// The node (or nodes) a local invocation fetches from and commits to.
#[derive(Clone, Copy)]
pub(crate) enum Route<'c> {
    /// Everything goes to one storage node.
    Node(&'c Client),
    /// Each key goes to the node of the cluster that serves it.
    Cluster(&'c ClusterView),
}

impl<'c> Route<'c> {
    /// The client of the node serving `key`.
    pub(crate) fn client_for(self, key: &[u8]) -> Result<&'c Client, ClientError> {
        match self {
            Route::Node(client) => Ok(client),
            Route::Cluster(cluster) => cluster.node_for(key),
        }
    }

    /// The id of the node serving `key` (the same for every key of a plain client).
    pub(crate) fn node_of(self, key: &[u8]) -> &'c str {
        match self {
            Route::Node(_) => "",
            Route::Cluster(cluster) => &cluster.map().owner(key).id,
        }
    }

    /// The configuration every node's client shares (registry, trace, timeouts).
    pub(crate) fn config(self) -> &'c ClientConfig {
        match self {
            Route::Node(client) => client.config(),
            Route::Cluster(cluster) => cluster.config(),
        }
    }
}
