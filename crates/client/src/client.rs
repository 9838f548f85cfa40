//! The client: a small pool of multiplexed connections and the operations on it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use ferry_proto::{CommitWrite, MultiGetEntry, ReadVersion, Request, Response, ResponseBody, StatEntry, Status};

use crate::config::ClientConfig;
use crate::conn::Connection;
use crate::error::{check_status, unexpected, ClientError};
use crate::gateway_rate::GatewayRate;

/// Most connections one client opens: pipelining makes a few enough for one app node.
pub const MAX_CONNECTIONS: usize = 64;

/// An object as read: its version and value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versioned {
    /// Version (strictly increases with every write of the object).
    pub version: u64,
    /// Value.
    pub value: Bytes,
}

struct Inner {
    config: ClientConfig,
    /// Connection slots; a dead connection is replaced on next use.
    connections: Vec<Mutex<Arc<Connection>>>,
    /// Serialises reconnection so one broken connection is reopened once, not per caller.
    reconnect: tokio::sync::Mutex<()>,
    /// Round-robin cursor.
    next: AtomicUsize,
    /// The admission rate a gateway at the other end last reported (unset otherwise).
    gateway_rate: GatewayRate,
}

/// A handle to a storage node for one tenant. Cheap to clone; clones share connections.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl Client {
    /// Connects every connection of the pool and says hello on each.
    pub async fn connect(config: ClientConfig) -> Result<Client, ClientError> {
        if config.connections == 0 || config.connections > MAX_CONNECTIONS {
            return Err(ClientError::Invalid(format!(
                "connections must be 1..={MAX_CONNECTIONS}, got {}",
                config.connections
            )));
        }
        let mut connections = Vec::with_capacity(config.connections);
        let gateway_rate = GatewayRate::default();
        for _ in 0..config.connections {
            let connection = Connection::open(&config, &gateway_rate).await?;
            connections.push(Mutex::new(Arc::new(connection)));
        }
        Ok(Client {
            inner: Arc::new(Inner {
                config,
                connections,
                reconnect: tokio::sync::Mutex::new(()),
                next: AtomicUsize::new(0),
                gateway_rate,
            }),
        })
    }

    /// The configuration this client was made with.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// Worker threads of the node, as it said at hello.
    pub fn node_workers(&self) -> u32 {
        self.inner.connections[0].lock().hello().workers
    }

    /// The admission rate R (requests/s) the process at the other end last reported for
    /// this tenant, if it is a gateway: its hello answer says so already, and every later
    /// answer updates it. `None` from a storage or compute node.
    pub fn gateway_rate_ops(&self) -> Option<u32> {
        self.inner.gateway_rate.rate_ops()
    }

    /// A handle on that rate which follows every later answer of any of this client's
    /// connections (what [`crate::FollowGateway`] admits by).
    pub fn gateway_rate(&self) -> GatewayRate {
        self.inner.gateway_rate.clone()
    }

    async fn connection(&self) -> Result<Arc<Connection>, ClientError> {
        let index = self.inner.next.fetch_add(1, Ordering::Relaxed) % self.inner.connections.len();
        let slot = &self.inner.connections[index];
        let current = Arc::clone(&slot.lock());
        if !current.is_dead() {
            return Ok(current);
        }
        let _guard = self.inner.reconnect.lock().await;
        let current = Arc::clone(&slot.lock());
        if !current.is_dead() {
            return Ok(current); // someone else reconnected meanwhile
        }
        let config = &self.inner.config;
        let fresh = Arc::new(Connection::open(config, &self.inner.gateway_rate).await?);
        *slot.lock() = Arc::clone(&fresh);
        Ok(fresh)
    }

    /// Sends any request and returns the node's answer, whatever its status.
    pub async fn call(&self, request: &Request) -> Result<Response, ClientError> {
        let connection = self.connection().await?;
        connection.call(request, self.inner.config.request_timeout).await
    }

    /// Sends a request; an error status becomes [`ClientError::Server`].
    async fn call_ok(&self, request: &Request) -> Result<Response, ClientError> {
        let response = self.call(request).await?;
        check_status(response)
    }

    /// Sends `request` as it is and returns the node's answer whatever its status (for a
    /// process forwarding its clients' requests). A write or invocation whose answer is lost
    /// after sending is [`ClientError::CommitOutcomeUnknown`].
    pub async fn forward(&self, request: &Request) -> Result<Response, ClientError> {
        let writes = matches!(
            request,
            Request::Put { .. } | Request::Delete { .. } | Request::Commit { .. } | Request::Invoke { .. }
        );
        match self.call(request).await {
            Err(err @ (ClientError::Disconnected(_) | ClientError::Timeout(_))) if writes => Err(
                ClientError::CommitOutcomeUnknown(format!("{} sent but not answered: {err}", request.opcode().name())),
            ),
            other => other,
        }
    }

    /// Sends a request that writes; an answer lost after sending (a broken connection, a
    /// timeout) is [`ClientError::CommitOutcomeUnknown`]: the node may have applied it.
    async fn call_write(&self, request: &Request) -> Result<Response, ClientError> {
        check_status(self.forward(request).await?)
    }

    /// Reads one object.
    pub async fn get(&self, table: &str, key: &[u8]) -> Result<Option<Versioned>, ClientError> {
        let request = Request::Get {
            table: table.to_string(),
            key: Bytes::copy_from_slice(key),
            validate: Vec::new(),
        };
        match self.call_ok(&request).await {
            Ok(Response {
                body: ResponseBody::Get { version, value },
                ..
            }) => Ok(Some(Versioned { version, value })),
            Ok(other) => Err(unexpected(&other)),
            Err(ClientError::Server {
                status: Status::NotFound,
                ..
            }) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// Writes one object (creating its table if needed); returns its new version. An answer
    /// lost after sending is `CommitOutcomeUnknown` (the write may have been applied).
    pub async fn put(&self, table: &str, key: &[u8], value: &[u8]) -> Result<u64, ClientError> {
        let request = Request::Put {
            table: table.to_string(),
            key: Bytes::copy_from_slice(key),
            value: Bytes::copy_from_slice(value),
        };
        match self.call_write(&request).await? {
            Response {
                body: ResponseBody::Put { version },
                ..
            } => Ok(version),
            other => Err(unexpected(&other)),
        }
    }

    /// Deletes one object; `false` if it did not exist. An answer lost after sending is
    /// `CommitOutcomeUnknown`.
    pub async fn delete(&self, table: &str, key: &[u8]) -> Result<bool, ClientError> {
        let request = Request::Delete {
            table: table.to_string(),
            key: Bytes::copy_from_slice(key),
        };
        match self.call_write(&request).await {
            Ok(Response {
                body: ResponseBody::Delete { .. },
                ..
            }) => Ok(true),
            Ok(other) => Err(unexpected(&other)),
            Err(ClientError::Server {
                status: Status::NotFound,
                ..
            }) => Ok(false),
            Err(err) => Err(err),
        }
    }

    /// Reads several objects of one table as one consistent snapshot.
    pub async fn multiget(&self, table: &str, keys: &[Bytes]) -> Result<Vec<Option<Versioned>>, ClientError> {
        let request = Request::MultiGet {
            table: table.to_string(),
            keys: keys.to_vec(),
            validate: Vec::new(),
            snapshots: Vec::new(),
        };
        match self.call_ok(&request).await? {
            Response {
                body: ResponseBody::MultiGet { entries, .. },
                ..
            } if entries.len() == keys.len() => Ok(entries.into_iter().map(versioned).collect()),
            other => Err(unexpected(&other)),
        }
    }

    /// OCC commit: validates `reads` and installs `writes` atomically; returns the commit
    /// version. A conflict is `ClientError::Server { status: TxAbort, .. }`; an answer lost
    /// after sending is `CommitOutcomeUnknown`.
    pub async fn commit(&self, reads: Vec<ReadVersion>, writes: Vec<CommitWrite>) -> Result<u64, ClientError> {
        match self.call_write(&Request::Commit { reads, writes }).await? {
            Response {
                body: ResponseBody::Commit { version },
                ..
            } => Ok(version),
            other => Err(unexpected(&other)),
        }
    }

    /// The node's counters visible to this tenant.
    pub async fn stats(&self) -> Result<Vec<StatEntry>, ClientError> {
        match self.call_ok(&Request::Stats).await? {
            Response {
                body: ResponseBody::Stats(entries),
                ..
            } => Ok(entries),
            other => Err(unexpected(&other)),
        }
    }
}

pub(crate) fn versioned(entry: MultiGetEntry) -> Option<Versioned> {
    entry.value.map(|value| Versioned {
        version: entry.version,
        value,
    })
}
