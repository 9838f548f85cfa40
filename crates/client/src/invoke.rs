//! Running a storage function, on a node or over a cluster: remotely (ship compute, with
//! a pushback or a handoff finished here) or here (ship data, over [`crate::local`]'s
//! network-backed context). Built on the data operations of [`Client`] and
//! [`ClusterClient`], which know nothing of it.

use std::time::Instant;

use bytes::Bytes;
use ferry_control::Placement;
use ferry_proto::{Request, ResponseBody, Status};

use crate::client::Client;
use crate::cluster::{ClusterClient, ClusterView};
use crate::error::{check_status, ClientError};
use crate::invocation::{Invocation, InvokeCost};
use crate::local;
use crate::route::Route;

impl Client {
    /// Runs `function` on the storage node (ship compute): one round trip.
    pub async fn invoke_remote(&self, function: &str, args: Bytes) -> Result<Invocation, ClientError> {
        self.invoke_on_node(function, args, false, false, Route::Node(self))
            .await
    }

    /// Runs `function` where the process at the other end runs it, asking for both sides'
    /// costs of the run: a compute node (or a gateway) answers with its costs record, so
    /// the invocation's costs, placement and pushback are those it measured (its own CPU as
    /// app CPU, the storage CPU and round trips of the requests it made, whether it ran
    /// over fetched data). A storage node answers as to [`Client::invoke_remote`].
    pub async fn invoke_with_costs(&self, function: &str, args: Bytes) -> Result<Invocation, ClientError> {
        self.invoke_on_node(function, args, false, true, Route::Node(self))
            .await
    }

    /// Runs `function` on the storage node, but lets an overloaded node hand it back
    /// (ASFP pushback): then it is finished here, starting from the reads the node already
    /// made, and committed with OCC. The result says whether that happened.
    pub async fn invoke_pushable(&self, function: &str, args: Bytes) -> Result<Invocation, ClientError> {
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
    ) -> Result<Invocation, ClientError> {
        let started = Instant::now();
        let handoff = matches!(route, Route::Cluster(..));
        let request = Request::Invoke {
            function: function.to_string(),
            args: args.clone(),
            allow_pushback,
            trace: self.config().trace,
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
        let cost = InvokeCost {
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
            return local::finish_pushed_back(route, function, args, &state, started, cost).await;
        }
        match check_status(response)?.body {
            ResponseBody::Invoke { result, costs, trace } => {
                if self.config().trace && trace.is_none() {
                    return Err(ClientError::Protocol(
                        "a traced invocation was answered without its trace".into(),
                    ));
                }
                // A process that ran it over the cluster's data says what it cost each
                // side and where it ran; a storage node's header says all there is.
                let (cost, placement, pushed_back) = match costs {
                    Some(record) => (
                        InvokeCost::from(record),
                        if record.shipped_data {
                            Placement::Local
                        } else {
                            Placement::Remote
                        },
                        record.pushed_back,
                    ),
                    None => (cost, Placement::Remote, false),
                };
                Ok(Invocation {
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
    pub async fn invoke_local(&self, function: &str, args: Bytes) -> Result<Invocation, ClientError> {
        local::invoke_local(Route::Node(self), function, args).await
    }
}

impl ClusterClient {
    /// Runs `function` on the node serving its routing key (ship compute); if it reaches
    /// another node's key it is finished here.
    pub async fn invoke_remote(&self, function: &str, args: Bytes) -> Result<Invocation, ClientError> {
        self.view().invoke(function, args, false).await
    }

    /// Like [`ClusterClient::invoke_remote`], accepting an ASFP pushback too.
    pub async fn invoke_pushable(&self, function: &str, args: Bytes) -> Result<Invocation, ClientError> {
        self.view().invoke(function, args, true).await
    }

    /// Runs `function` on every node of the map, one after another (what changes the
    /// node-local catalog: FUNCTION LOAD and DELETE reach every primary, as in Redis
    /// Cluster). The first node's result, or the first error, naming the node (the nodes
    /// before it have run it: running it again is how to finish).
    pub async fn invoke_on_every_node(&self, function: &str, args: Bytes) -> Result<Invocation, ClientError> {
        let view = self.view();
        let mut first = None;
        for node in view.map().nodes() {
            let invocation = view
                .client(&node.id)?
                .invoke_remote(function, args.clone())
                .await
                .map_err(|err| match err {
                    ClientError::Server { status, message } => {
                        ClientError::server(status, format!("on node {}: {message}", node.id))
                    }
                    other => other,
                })?;
            first.get_or_insert(invocation);
        }
        first.ok_or_else(|| ClientError::Protocol("the cluster map has no node".into()))
    }

    /// Runs `function` here (ship data), each access going to its key's node.
    pub async fn invoke_local(&self, function: &str, args: Bytes) -> Result<Invocation, ClientError> {
        let view = self.view();
        let home = view.home_of(function, &args);
        local::invoke_local(Route::Cluster(&view, home), function, args).await
    }
}

impl ClusterView {
    /// Runs `function` on the node serving its routing key, accepting a pushback when
    /// `pushable`; if it reaches another node's key it is finished here.
    pub(crate) async fn invoke(&self, function: &str, args: Bytes, pushable: bool) -> Result<Invocation, ClientError> {
        let home = self.home_of(function, &args);
        self.client(home)?
            .invoke_on_node(function, args, pushable, false, Route::Cluster(self, home))
            .await
    }
}
