//! The client: a small pool of multiplexed connections and the operations on it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;

use ferry_func::Registry;
use ferry_proto::{CommitWrite, MultiGetEntry, ReadVersion, Request, Response, ResponseBody, StatEntry, Status};

use crate::conn::Connection;
use crate::error::ClientError;
use crate::gateway::GatewayRate;
use crate::route::Route;

/// Default request timeout: far above any healthy round trip (≈ 0.1 ms here), short enough
/// that a dead node is reported while a person is still watching.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Default time to establish a connection and say hello.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Most connections one client opens: pipelining makes a few enough for one app node.
pub const MAX_CONNECTIONS: usize = 64;

/// How a client reaches and identifies itself to a storage node.
#[derive(Clone)]
pub struct ClientConfig {
    /// `host:port` of the storage node.
    pub addr: String,
    /// Tenant id.
    pub tenant: u32,
    /// Tenant token.
    pub token: String,
    /// Connections to spread requests over (each is pipelined).
    pub connections: usize,
    /// Longest wait for any one answer.
    pub request_timeout: Duration,
    /// Longest wait to connect and say hello.
    pub connect_timeout: Duration,
    /// Functions available for local execution (must match the node's).
    pub registry: Registry,
    /// Record what every invocation read and installed in [`crate::Invocation::trace`]
    /// (remote ones ask the node for it), for checking a history. Off by default: it
    /// costs a copy of the read and write sets per invocation.
    pub trace: bool,
    /// Speak TLS to the node with this configuration (the roots trusted, the certificate
    /// presented if asked; `ferry_net::tls::ClientTls` builds one from PEM files), the
    /// node's name taken from the host part of `addr`; `None` speaks plain TCP.
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

impl ClientConfig {
    /// One connection, default timeouts, the built-in functions.
    pub fn new(addr: impl Into<String>, tenant: u32, token: impl Into<String>) -> ClientConfig {
        ClientConfig {
            addr: addr.into(),
            tenant,
            token: token.into(),
            connections: 1,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            registry: ferry_lua::registry(),
            trace: false,
            tls: None,
        }
    }
}

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

    /// Runs `function` on the storage node (ship compute): one round trip.
    pub async fn invoke_remote(&self, function: &str, args: Bytes) -> Result<crate::Invocation, ClientError> {
        self.invoke_on_node(function, args, false, false, Route::Node(self))
            .await
    }

    /// Runs `function` where the process at the other end runs it, asking for both sides'
    /// costs of the run: a compute node (or a gateway) answers with its costs record, so
    /// the invocation's costs, placement and pushback are those it measured (its own CPU as
    /// app CPU, the storage CPU and round trips of the requests it made, whether it ran
    /// over fetched data). A storage node answers as to [`Client::invoke_remote`].
    pub async fn invoke_with_costs(&self, function: &str, args: Bytes) -> Result<crate::Invocation, ClientError> {
        self.invoke_on_node(function, args, false, true, Route::Node(self))
            .await
    }

    /// Runs `function` on the storage node, but lets an overloaded node hand it back
    /// (ASFP pushback): then it is finished here, starting from the reads the node already
    /// made, and committed with OCC. The result says whether that happened.
    pub async fn invoke_pushable(&self, function: &str, args: Bytes) -> Result<crate::Invocation, ClientError> {
        self.invoke_on_node(function, args, true, false, Route::Node(self))
            .await
    }

    /// Runs `function` on this node; a pushback (or, in a cluster, a handoff at another
    /// node's key) is finished here over `route`. `want_costs` asks for the answering
    /// process's costs record (see [`Client::invoke_with_costs`]).
    pub(crate) async fn invoke_on_node(
        &self,
        function: &str,
        args: Bytes,
        allow_pushback: bool,
        want_costs: bool,
        route: Route<'_>,
    ) -> Result<crate::Invocation, ClientError> {
        let started = Instant::now();
        let handoff = matches!(route, Route::Cluster(..));
        let request = Request::Invoke {
            function: function.to_string(),
            args: args.clone(),
            allow_pushback,
            trace: self.inner.config.trace,
            handoff,
            costs: want_costs,
        };
        let response = match self.call(&request).await {
            Ok(response) => response,
            // Sent but unanswered: the node may have run and committed it, or may still.
            Err(err @ (ClientError::Disconnected(_) | ClientError::Timeout(_))) => {
                return Err(ClientError::CommitOutcomeUnknown(format!(
                    "invocation of {function:?} sent but not answered: {err}"
                )))
            }
            Err(err) => return Err(err),
        };
        let cost = crate::InvokeCost {
            storage_cpu_ns: response.cpu_ns,
            bytes_returned: u64::from(response.bytes_returned),
            round_trips: 1,
            attempts: 1,
            app_cpu_ns: 0,
        };
        if response.status == Status::Pushback {
            let ResponseBody::Pushback(state) = response.body else {
                return Err(ClientError::Protocol("pushback without its read and write sets".into()));
            };
            if !allow_pushback && !handoff {
                return Err(ClientError::Protocol(
                    "the node pushed back an invocation that did not allow it".into(),
                ));
            }
            return crate::local::finish_pushed_back(route, function, args, &state, started, cost).await;
        }
        match check_status(response)?.body {
            ResponseBody::Invoke { result, costs, trace } => {
                if self.inner.config.trace && trace.is_none() {
                    return Err(ClientError::Protocol(
                        "a traced invocation was answered without its trace".into(),
                    ));
                }
                // A process that ran it over the cluster's data says what it cost each
                // side and where it ran; a storage node's header says all there is.
                let (cost, placement, pushed_back) = match costs {
                    Some(record) => (
                        crate::InvokeCost::from(record),
                        if record.shipped_data {
                            crate::Placement::Local
                        } else {
                            crate::Placement::Remote
                        },
                        record.pushed_back,
                    ),
                    None => (cost, crate::Placement::Remote, false),
                };
                Ok(crate::Invocation {
                    result,
                    placement,
                    latency: started.elapsed(),
                    cost,
                    pushed_back,
                    trace,
                })
            }
            other => Err(ClientError::Protocol(format!("unexpected invoke answer {other:?}"))),
        }
    }

    /// Runs `function` on this app node (ship data): every access is a round trip, and the
    /// writes are committed with OCC at the end, retried on conflict.
    pub async fn invoke_local(&self, function: &str, args: Bytes) -> Result<crate::Invocation, ClientError> {
        crate::local::invoke_local(Route::Node(self), function, args).await
    }
}

/// Turns an error status into [`ClientError::Server`].
pub(crate) fn check_status(response: Response) -> Result<Response, ClientError> {
    match response.status {
        Status::Ok => Ok(response),
        status => match response.body {
            ResponseBody::Error { message } => Err(ClientError::server(status, message)),
            ResponseBody::Pushback(_) => Err(ClientError::server(status, "invocation pushed back")),
            other => Err(ClientError::Protocol(format!("status {status} with body {other:?}"))),
        },
    }
}

pub(crate) fn unexpected(response: &Response) -> ClientError {
    ClientError::Protocol(format!("unexpected answer {:?}", response.body))
}

pub(crate) fn versioned(entry: MultiGetEntry) -> Option<Versioned> {
    entry.value.map(|value| Versioned {
        version: entry.version,
        value,
    })
}
