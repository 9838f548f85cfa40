//! A client of a sharded cluster: one [`Client`] per storage node and the cluster map every
//! process reads. Each get, put, delete, multiget and commit goes to the node that serves
//! its keys; a multiget or commit whose keys live on several nodes is refused here, before
//! anything is sent (`cross_slot`), so a commit is never half-applied. Keep related keys
//! together with `{hash tags}`.
//!
//! An invocation sent to the cluster (`invoke_remote`, `invoke_pushable`) runs on the node
//! serving its routing key (the key its registered route finds in its arguments; any node
//! for a function without one). When it reaches a key another node serves, that node hands
//! it back and it is finished here over the whole cluster, like a pushback (see `local` for
//! what keeps such an invocation serializable).

use std::collections::HashMap;

use bytes::Bytes;
use ferry_cluster::ClusterMap;
use ferry_proto::{CommitWrite, ReadVersion, Request, Response, ResponseBody, Status};

use crate::adaptive::{Backend, BackendFuture};
use crate::client::{Client, ClientConfig, Versioned};
use crate::error::ClientError;
use crate::route::Route;
use crate::Invocation;

/// Clients of every node of a cluster, and its map.
#[derive(Clone)]
pub struct ClusterClient {
    map: ClusterMap,
    /// By node id.
    nodes: HashMap<String, Client>,
    /// What every node's client was configured with (its address aside).
    config: ClientConfig,
}

impl ClusterClient {
    /// Connects to every node of `map` with `config` (its address is ignored: each node's
    /// comes from the map).
    pub async fn connect(map: ClusterMap, config: ClientConfig) -> Result<ClusterClient, ClientError> {
        let mut nodes = HashMap::new();
        for node in map.nodes() {
            let mut node_config = config.clone();
            node_config.addr = node.addr.clone();
            nodes.insert(node.id.clone(), Client::connect(node_config).await?);
        }
        Ok(ClusterClient { map, nodes, config })
    }

    /// The configuration every node's client shares.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// The map it routes by.
    pub fn map(&self) -> &ClusterMap {
        &self.map
    }

    /// The client of the node serving `key`.
    pub fn node_for(&self, key: &[u8]) -> &Client {
        &self.nodes[&self.map.owner(key).id]
    }

    /// The one node serving all of `keys` (the first slot's, for none).
    pub(crate) fn node_for_all<'k>(&self, keys: impl IntoIterator<Item = &'k [u8]>) -> Result<&Client, ClientError> {
        let owner = self
            .map
            .single_owner(keys)
            .map_err(|spread| ClientError::server(Status::CrossSlot, spread.to_string()))?;
        Ok(&self.nodes[&owner.unwrap_or(self.map.owner(b"")).id])
    }

    /// Reads one object from the node serving it.
    pub async fn get(&self, table: &str, key: &[u8]) -> Result<Option<Versioned>, ClientError> {
        self.node_for(key).get(table, key).await
    }

    /// Writes one object on the node serving it; returns its new version.
    pub async fn put(&self, table: &str, key: &[u8], value: &[u8]) -> Result<u64, ClientError> {
        self.node_for(key).put(table, key, value).await
    }

    /// Deletes one object on the node serving it; `false` if it did not exist.
    pub async fn delete(&self, table: &str, key: &[u8]) -> Result<bool, ClientError> {
        self.node_for(key).delete(table, key).await
    }

    /// Reads objects that live on one node as one snapshot.
    pub async fn multiget(&self, table: &str, keys: &[Bytes]) -> Result<Vec<Option<Versioned>>, ClientError> {
        self.node_for_all(keys.iter().map(|k| &k[..]))?
            .multiget(table, keys)
            .await
    }

    /// OCC commit on the one node serving every key of `reads` and `writes`; refused
    /// before sending when they span nodes.
    pub async fn commit(&self, reads: Vec<ReadVersion>, writes: Vec<CommitWrite>) -> Result<u64, ClientError> {
        let keys = reads
            .iter()
            .map(|r| &r.key[..])
            .chain(writes.iter().map(|w| &w.key[..]));
        let node = self.node_for_all(keys)?.clone();
        node.commit(reads, writes).await
    }

    /// Sends a data operation (get, put, delete, multiget, commit) to the node serving its
    /// keys and returns that node's answer whatever its status (see [`Client::forward`]);
    /// `cross_slot` if the keys it reads or writes span nodes.
    ///
    /// A read whose validation set names other nodes' objects (a client running a function
    /// over the cluster through a gateway) is read with its own node's part, and the other
    /// nodes' parts are validated after it: each of those objects was then current from
    /// its read to that validation, so all of them were at this read (the argument of
    /// `local`). A changed one answers `tx_abort`.
    pub async fn forward(&self, request: &Request) -> Result<Response, ClientError> {
        let (table, read_keys, validate): (&str, Vec<&[u8]>, &[ReadVersion]) = match request {
            Request::Get {
                table, key, validate, ..
            } => (table, vec![&key[..]], validate),
            Request::MultiGet {
                table, keys, validate, ..
            } => (table, keys.iter().map(|k| &k[..]).collect(), validate),
            _ => return self.node_for_all(request.keys())?.forward(request).await,
        };
        let home = match self.map.single_owner(read_keys.iter().copied()) {
            Ok(Some(owner)) => owner.id.clone(),
            // Nothing to read: a validation only (a read-only run across nodes ends so).
            Ok(None) if !validate.is_empty() => {
                let empty = Response::ok(ResponseBody::MultiGet {
                    entries: Vec::new(),
                    snapshot: None,
                });
                return Ok(self.validate_by_node(table, validate.to_vec()).await?.unwrap_or(empty));
            }
            Ok(None) => return self.node_for_all(request.keys())?.forward(request).await,
            Err(spread) => return Err(ClientError::server(Status::CrossSlot, spread.to_string())),
        };
        let (here, elsewhere): (Vec<ReadVersion>, Vec<ReadVersion>) = validate
            .iter()
            .cloned()
            .partition(|read| self.map.owner(&read.key).id == home);
        if elsewhere.is_empty() {
            return self.nodes[&home].forward(request).await;
        }
        let mut local = request.clone();
        if let Request::Get { validate, .. } | Request::MultiGet { validate, .. } = &mut local {
            *validate = here;
        }
        let response = self.nodes[&home].forward(&local).await?;
        if !matches!(response.status, Status::Ok | Status::NotFound) {
            return Ok(response);
        }
        match self.validate_by_node(table, elsewhere).await? {
            Some(refused) if refused.status != Status::Ok => Ok(refused),
            _ => Ok(response),
        }
    }

    /// Validates `reads` on the nodes that serve them, one empty multiget per node; the
    /// first answer that is not `ok` (a changed object: `tx_abort`), else the last answer
    /// (`None` for no reads).
    async fn validate_by_node(&self, table: &str, reads: Vec<ReadVersion>) -> Result<Option<Response>, ClientError> {
        let mut by_node: HashMap<&str, Vec<ReadVersion>> = HashMap::new();
        for read in reads {
            by_node.entry(&self.map.owner(&read.key).id).or_default().push(read);
        }
        let mut last = None;
        for (node, reads) in by_node {
            let check = Request::MultiGet {
                table: table.to_string(),
                keys: Vec::new(),
                validate: reads,
                snapshots: Vec::new(),
            };
            let checked = self.nodes[node].forward(&check).await?;
            if checked.status != Status::Ok {
                return Ok(Some(checked));
            }
            last = Some(checked);
        }
        Ok(last)
    }

    /// The node an invocation of `function` starts on: the one serving its routing key, or
    /// for a function without one, the one serving its arguments' bytes (spreading such
    /// invocations over the nodes).
    pub fn node_for_invocation(&self, function: &str, args: &Bytes) -> &Client {
        match self.config.registry.route(function, args) {
            Some(key) => self.node_for(&key),
            None => self.node_for(args),
        }
    }

    /// Runs `function` on the node serving its routing key (ship compute); if it reaches
    /// another node's key it is finished here.
    pub async fn invoke_remote(&self, function: &str, args: Bytes) -> Result<Invocation, ClientError> {
        self.node_for_invocation(function, &args)
            .invoke_on_node(function, args, false, false, Route::Cluster(self))
            .await
    }

    /// Like [`ClusterClient::invoke_remote`], accepting an ASFP pushback too.
    pub async fn invoke_pushable(&self, function: &str, args: Bytes) -> Result<Invocation, ClientError> {
        self.node_for_invocation(function, &args)
            .invoke_on_node(function, args, true, false, Route::Cluster(self))
            .await
    }

    /// Runs `function` here (ship data), each access going to its key's node.
    pub async fn invoke_local(&self, function: &str, args: Bytes) -> Result<Invocation, ClientError> {
        crate::local::invoke_local(Route::Cluster(self), function, args).await
    }
}

impl Backend for ClusterClient {
    fn invoke_remote<'a>(&'a self, function: &'a str, args: Bytes) -> BackendFuture<'a> {
        Box::pin(ClusterClient::invoke_remote(self, function, args))
    }
    fn invoke_local<'a>(&'a self, function: &'a str, args: Bytes) -> BackendFuture<'a> {
        Box::pin(ClusterClient::invoke_local(self, function, args))
    }
    fn invoke_pushable<'a>(&'a self, function: &'a str, args: Bytes) -> BackendFuture<'a> {
        Box::pin(ClusterClient::invoke_pushable(self, function, args))
    }
}
