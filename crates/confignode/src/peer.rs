//! The Raft group's own messages between members, and the client side of them: one
//! connection per (member, target) stream of calls, opened lazily and dropped on any error
//! so the next call reconnects. openraft retries and backs off; a target that cannot be
//! reached is reported as unreachable so it is not hammered.

use std::sync::Arc;
use std::time::Duration;

use ferry_config::wire::{decode, encode, Channel};
use ferry_net::tls::LinkStream;
use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use openraft::BasicNode;
use serde::{Deserialize, Serialize};

use crate::types::{ConfigRaft, MemberId};
use ferry_net::config_frame::{read_frame, write_frame};

/// Longest a connection to a peer may take to open.
pub const PEER_CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// A Raft call to a peer.
#[derive(Serialize, Deserialize)]
pub enum PeerRequest {
    /// Entries to append (or a heartbeat).
    Append(AppendEntriesRequest<ConfigRaft>),
    /// A vote request.
    Vote(VoteRequest<MemberId>),
    /// One chunk of a snapshot.
    Snapshot(InstallSnapshotRequest<ConfigRaft>),
}

/// A peer's answer to a [`PeerRequest`].
#[derive(Serialize, Deserialize)]
pub enum PeerReply {
    /// To [`PeerRequest::Append`].
    Append(Result<AppendEntriesResponse<MemberId>, RaftError<MemberId>>),
    /// To [`PeerRequest::Vote`].
    Vote(Result<VoteResponse<MemberId>, RaftError<MemberId>>),
    /// To [`PeerRequest::Snapshot`].
    Snapshot(Result<InstallSnapshotResponse<MemberId>, RaftError<MemberId, InstallSnapshotError>>),
}

/// Makes a [`PeerLink`] per target openraft asks for; over TLS with `tls`.
#[derive(Clone, Default)]
pub struct PeerNetwork {
    /// TLS for every link to a peer (the CA peers' certificates chain to, and this
    /// member's certificate when they ask for one); `None`: plain TCP.
    pub tls: Option<Arc<ferry_net::tls::rustls::ClientConfig>>,
}

impl RaftNetworkFactory<ConfigRaft> for PeerNetwork {
    type Network = PeerLink;

    async fn new_client(&mut self, target: MemberId, node: &BasicNode) -> PeerLink {
        PeerLink {
            target,
            addr: node.addr.clone(),
            tls: self.tls.clone(),
            stream: None,
        }
    }
}

/// Calls to one peer, in order, over one connection.
pub struct PeerLink {
    target: MemberId,
    addr: String,
    tls: Option<Arc<ferry_net::tls::rustls::ClientConfig>>,
    stream: Option<Box<dyn LinkStream>>,
}

type CallError = RPCError<MemberId, BasicNode, RaftError<MemberId, InstallSnapshotError>>;

enum Failure {
    Unreachable(std::io::Error),
    Network(std::io::Error),
}

impl PeerLink {
    async fn call(&mut self, request: &PeerRequest, within: Duration) -> Result<PeerReply, Failure> {
        match tokio::time::timeout(within, self.call_once(request)).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(failure)) => {
                self.stream = None;
                Err(failure)
            }
            Err(_) => {
                self.stream = None;
                Err(Failure::Network(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "member {} at {} did not answer within {within:?}",
                        self.target, self.addr
                    ),
                )))
            }
        }
    }

    async fn call_once(&mut self, request: &PeerRequest) -> Result<PeerReply, Failure> {
        if self.stream.is_none() {
            let stream = ferry_net::tls::dial(&self.addr, self.tls.as_ref(), PEER_CONNECT_TIMEOUT)
                .await
                .map_err(Failure::Unreachable)?;
            self.stream = Some(stream);
        }
        let stream = self.stream.as_mut().expect("connected above");
        write_frame(stream, &encode(Channel::Peer, request))
            .await
            .map_err(Failure::Network)?;
        match read_frame(stream).await.map_err(Failure::Network)? {
            Some((Channel::Peer, body)) => {
                decode(&body).map_err(|err| Failure::Network(std::io::Error::new(std::io::ErrorKind::InvalidData, err)))
            }
            Some((Channel::Client, _)) | None => Err(Failure::Network(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the peer closed the connection",
            ))),
        }
    }
}

fn rpc_error<E: std::error::Error>(failure: Failure) -> RPCError<MemberId, BasicNode, RaftError<MemberId, E>> {
    match failure {
        Failure::Unreachable(err) => RPCError::Unreachable(Unreachable::new(&err)),
        Failure::Network(err) => RPCError::Network(NetworkError::new(&err)),
    }
}

fn unexpected<E: std::error::Error>() -> RPCError<MemberId, BasicNode, RaftError<MemberId, E>> {
    RPCError::Network(NetworkError::new(&std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        "the peer answered another call",
    )))
}

impl RaftNetwork<ConfigRaft> for PeerLink {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<ConfigRaft>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<MemberId>, RPCError<MemberId, BasicNode, RaftError<MemberId>>> {
        match self
            .call(&PeerRequest::Append(rpc), option.hard_ttl())
            .await
            .map_err(rpc_error)?
        {
            PeerReply::Append(reply) => reply.map_err(|err| RPCError::RemoteError(RemoteError::new(self.target, err))),
            _ => Err(unexpected()),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<ConfigRaft>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<MemberId>, CallError> {
        match self
            .call(&PeerRequest::Snapshot(rpc), option.hard_ttl())
            .await
            .map_err(rpc_error)?
        {
            PeerReply::Snapshot(reply) => {
                reply.map_err(|err| RPCError::RemoteError(RemoteError::new(self.target, err)))
            }
            _ => Err(unexpected()),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<MemberId>,
        option: RPCOption,
    ) -> Result<VoteResponse<MemberId>, RPCError<MemberId, BasicNode, RaftError<MemberId>>> {
        match self
            .call(&PeerRequest::Vote(rpc), option.hard_ttl())
            .await
            .map_err(rpc_error)?
        {
            PeerReply::Vote(reply) => reply.map_err(|err| RPCError::RemoteError(RemoteError::new(self.target, err))),
            _ => Err(unexpected()),
        }
    }
}
