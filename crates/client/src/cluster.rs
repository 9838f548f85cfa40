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
//!
//! A cluster whose configuration the config group holds changes its map: the client then
//! follows it ([`ClusterClient::follow`]). Each operation routes by one [`ClusterView`]
//! (a map and a client per node), taken when it starts; a node that answers `moved`
//! because the client's map is behind gets the operation again once a newer map arrives.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ferry_cluster::ClusterMap;
use ferry_proto::{CommitWrite, ReadVersion, Request, Response, ResponseBody, Status};
use parking_lot::RwLock;
use tokio::sync::watch;

use crate::adaptive::{Backend, BackendFuture};
use crate::client::{Client, Versioned};
use crate::config::ClientConfig;
use crate::error::ClientError;

/// Longest a request answered `moved` waits for a newer map before the answer stands.
pub const MOVED_WAIT: Duration = Duration::from_secs(2);

/// Most times one request follows `moved` to a newer map.
pub const MAX_REDIRECTS: usize = 3;

/// Connection attempts to a node new to the map before the view goes on without it
/// (requests for its keys then fail until the next map, or the next attempt).
const CONNECT_ATTEMPTS: usize = 3;

/// Pause between those attempts.
const CONNECT_RETRY: Duration = Duration::from_millis(200);

/// Runs `$body` (which uses `$view`, the current view) and, when a node answers `moved`
/// and a newer map comes, runs it again on that one (a `moved` operation was applied
/// nowhere). A macro rather than a function taking a closure, so the future stays `Send`.
macro_rules! routed {
    ($client:expr, $view:ident => $body:expr) => {{
        let mut redirects = 0;
        loop {
            let $view = $client.view();
            let result = async { $body }.await;
            let moved = matches!(&result, Err(err) if ClientError::status(err) == Some(Status::Moved));
            if !moved || redirects >= MAX_REDIRECTS || !$client.newer_than($view.map.epoch()).await {
                break result;
            }
            redirects += 1;
        }
    }};
}

/// One map of the cluster and a client for each of its nodes.
pub struct ClusterView {
    map: Arc<ClusterMap>,
    /// By node id; a node that could not be reached is missing.
    nodes: HashMap<String, Client>,
    /// What every node's client was configured with (its address aside).
    config: ClientConfig,
}

/// Clients of every node of a cluster, routing by its newest known map.
#[derive(Clone)]
pub struct ClusterClient {
    view: Arc<RwLock<Arc<ClusterView>>>,
    /// The maps followed, or `None` for a map that never changes.
    routes: Option<watch::Receiver<Arc<ClusterMap>>>,
}

impl ClusterClient {
    /// Connects to every node of `map` with `config` (its address is ignored: each node's
    /// comes from the map). The map never changes.
    pub async fn connect(map: ClusterMap, config: ClientConfig) -> Result<ClusterClient, ClientError> {
        let mut nodes = HashMap::new();
        for node in map.nodes() {
            nodes.insert(
                node.id.clone(),
                Client::connect(node_config(&config, &node.addr)).await?,
            );
        }
        let view = ClusterView {
            map: Arc::new(map),
            nodes,
            config,
        };
        Ok(ClusterClient {
            view: Arc::new(RwLock::new(Arc::new(view))),
            routes: None,
        })
    }

    /// Connects to the nodes of the newest map on `routes` and follows it: a task connects
    /// to the nodes of each newer map and then routes by it.
    pub async fn follow(
        mut routes: watch::Receiver<Arc<ClusterMap>>,
        config: ClientConfig,
    ) -> Result<ClusterClient, ClientError> {
        let map = routes.borrow_and_update().clone();
        let mut client = ClusterClient::connect(map.as_ref().clone(), config).await?;
        client.routes = Some(routes.clone());
        let view = Arc::downgrade(&client.view);
        tokio::spawn(async move {
            while routes.changed().await.is_ok() {
                let Some(shared) = view.upgrade() else { return };
                let map = routes.borrow_and_update().clone();
                let current = shared.read().clone();
                if map.epoch() <= current.map.epoch() {
                    continue;
                }
                let next = current.next(map).await;
                *shared.write() = Arc::new(next);
            }
        });
        Ok(client)
    }

    /// The view operations route by now.
    pub fn view(&self) -> Arc<ClusterView> {
        self.view.read().clone()
    }

    /// The configuration every node's client shares.
    pub fn config(&self) -> ClientConfig {
        self.view().config.clone()
    }

    /// The map it routes by now.
    pub fn map(&self) -> Arc<ClusterMap> {
        self.view().map.clone()
    }

    /// The client of the node serving `key` now.
    pub fn node_for(&self, key: &[u8]) -> Result<Client, ClientError> {
        self.view().node_for(key).cloned()
    }

    /// Waits (at most [`MOVED_WAIT`]) for a map newer than `epoch`; whether one came.
    async fn newer_than(&self, epoch: u64) -> bool {
        let Some(mut routes) = self.routes.clone() else {
            return false;
        };
        // (The guard `wait_for` returns is dropped within the statement: it must not be held
        // across an await.)
        let came = tokio::time::timeout(MOVED_WAIT, routes.wait_for(|map| map.epoch() > epoch))
            .await
            .is_ok_and(|waited| waited.is_ok());
        if !came {
            return false;
        }
        // The view is swapped once the new map's nodes are connected.
        let deadline = tokio::time::Instant::now() + MOVED_WAIT;
        while self.view().map.epoch() <= epoch {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        true
    }

    /// Reads one object from the node serving it.
    pub async fn get(&self, table: &str, key: &[u8]) -> Result<Option<Versioned>, ClientError> {
        routed!(self, view => view.node_for(key)?.get(table, key).await)
    }

    /// Writes one object on the node serving it; returns its new version.
    pub async fn put(&self, table: &str, key: &[u8], value: &[u8]) -> Result<u64, ClientError> {
        routed!(self, view => view.node_for(key)?.put(table, key, value).await)
    }

    /// Deletes one object on the node serving it; `false` if it did not exist.
    pub async fn delete(&self, table: &str, key: &[u8]) -> Result<bool, ClientError> {
        routed!(self, view => view.node_for(key)?.delete(table, key).await)
    }

    /// Reads objects that live on one node as one snapshot.
    pub async fn multiget(&self, table: &str, keys: &[Bytes]) -> Result<Vec<Option<Versioned>>, ClientError> {
        routed!(self, view => view.multiget(table, keys).await)
    }

    /// OCC commit on the one node serving every key of `reads` and `writes`; refused
    /// before sending when they span nodes. A `moved` commit was applied nowhere, so it is
    /// sent again on a newer map.
    pub async fn commit(&self, reads: Vec<ReadVersion>, writes: Vec<CommitWrite>) -> Result<u64, ClientError> {
        routed!(self, view => view.commit(reads.clone(), writes.clone()).await)
    }

    /// Sends a data operation to the node serving its keys and returns that node's
    /// answer whatever its status (see [`ClusterView::forward`]); an answer of `moved`
    /// is followed to a newer map when one comes.
    pub async fn forward(&self, request: &Request) -> Result<Response, ClientError> {
        let mut redirects = 0;
        loop {
            let view = self.view();
            let response = view.forward(request).await?;
            if response.status != Status::Moved
                || redirects >= MAX_REDIRECTS
                || !self.newer_than(view.map.epoch()).await
            {
                return Ok(response);
            }
            redirects += 1;
        }
    }

    /// The node an invocation of `function` starts on (see
    /// [`ClusterView::node_for_invocation`]).
    pub fn node_for_invocation(&self, function: &str, args: &Bytes) -> Result<Client, ClientError> {
        self.view().node_for_invocation(function, args).cloned()
    }
}

/// A channel holding `map` for good: the routes of a cluster whose map never changes.
pub fn fixed_routes(map: ClusterMap) -> watch::Receiver<Arc<ClusterMap>> {
    // The sender goes at once: the receiver keeps the one value, and never waits.
    watch::channel(Arc::new(map)).1
}

fn node_config(config: &ClientConfig, addr: &str) -> ClientConfig {
    let mut node_config = config.clone();
    node_config.addr = addr.to_string();
    node_config
}

impl ClusterView {
    /// The view of `map`: clients of nodes at the same address are kept, others connected.
    async fn next(&self, map: Arc<ClusterMap>) -> ClusterView {
        let mut nodes = HashMap::new();
        for node in map.nodes() {
            let kept = self
                .nodes
                .get(&node.id)
                .filter(|client| client.config().addr == node.addr);
            if let Some(client) = kept {
                nodes.insert(node.id.clone(), client.clone());
                continue;
            }
            for attempt in 1..=CONNECT_ATTEMPTS {
                match Client::connect(node_config(&self.config, &node.addr)).await {
                    Ok(client) => {
                        nodes.insert(node.id.clone(), client);
                        break;
                    }
                    Err(err) if attempt == CONNECT_ATTEMPTS => {
                        tracing::warn!("cluster map epoch {}: node {} unreachable: {err}", map.epoch(), node.id);
                    }
                    Err(_) => tokio::time::sleep(CONNECT_RETRY).await,
                }
            }
        }
        ClusterView {
            map,
            nodes,
            config: self.config.clone(),
        }
    }

    /// The configuration every node's client shares.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// The map.
    pub fn map(&self) -> &ClusterMap {
        &self.map
    }

    /// The client of the node `id`.
    pub(crate) fn client(&self, id: &str) -> Result<&Client, ClientError> {
        self.nodes.get(id).ok_or_else(|| ClientError::Connect {
            addr: self
                .map
                .node(id)
                .map_or_else(|| id.to_string(), |node| node.addr.clone()),
            message: format!(
                "node {id} of the cluster map (epoch {}) is not connected",
                self.map.epoch()
            ),
        })
    }

    /// The client of the node serving `key`.
    pub fn node_for(&self, key: &[u8]) -> Result<&Client, ClientError> {
        self.client(&self.map.owner(key).id)
    }

    /// The one node serving all of `keys` (the first slot's, for none).
    pub(crate) fn node_for_all<'k>(&self, keys: impl IntoIterator<Item = &'k [u8]>) -> Result<&Client, ClientError> {
        let owner = self
            .map
            .single_owner(keys)
            .map_err(|spread| ClientError::server(Status::CrossSlot, spread.to_string()))?;
        self.client(&owner.unwrap_or(self.map.owner(b"")).id)
    }

    /// Reads objects that live on one node as one snapshot.
    async fn multiget(&self, table: &str, keys: &[Bytes]) -> Result<Vec<Option<Versioned>>, ClientError> {
        self.node_for_all(keys.iter().map(|k| &k[..]))?
            .multiget(table, keys)
            .await
    }

    /// OCC commit on the one node serving every key of `reads` and `writes`.
    async fn commit(&self, reads: Vec<ReadVersion>, writes: Vec<CommitWrite>) -> Result<u64, ClientError> {
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
            return self.client(&home)?.forward(request).await;
        }
        let mut local = request.clone();
        if let Request::Get { validate, .. } | Request::MultiGet { validate, .. } = &mut local {
            *validate = here;
        }
        let response = self.client(&home)?.forward(&local).await?;
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
            let checked = self.client(node)?.forward(&check).await?;
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
    pub fn node_for_invocation(&self, function: &str, args: &Bytes) -> Result<&Client, ClientError> {
        self.client(self.home_of(function, args))
    }

    /// The id of the node an invocation of `function` starts on: the one serving its
    /// routing key (its arguments' bytes without one). Its catalog reads go there.
    pub(crate) fn home_of(&self, function: &str, args: &Bytes) -> &str {
        match self.config.registry.route(function, args) {
            Some(key) => &self.map.owner(&key).id,
            None => &self.map.owner(args).id,
        }
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
