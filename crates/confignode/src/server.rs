//! A member's listener: Raft messages from peers and requests from everyone else, one
//! frame in, one frame out, in order, per connection.

use std::sync::Arc;
use std::time::Duration;

use ferry_config::wire::{decode, encode, Channel, ClientReply, ClientRequest, MAX_WATCH_WAIT_MS};
use ferry_net::tls::LinkStream;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use crate::member::Member;
use crate::peer::{PeerReply, PeerRequest};
use ferry_net::config_frame::{read_frame, write_frame};

/// Most connections a member serves at once (peers, every node's and gateway's watch,
/// admin commands); more are closed at once.
pub const MAX_CONNECTIONS: usize = 4096;

/// Longest a connection's TLS handshake may take.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `listener` for `member` until `shutdown` turns true; over TLS with `tls`.
pub async fn serve(
    member: Arc<Member>,
    listener: TcpListener,
    tls: Option<ferry_net::tls::Acceptor>,
    shutdown: watch::Receiver<bool>,
) {
    let seats = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let connections_shutdown = shutdown.clone();
    ferry_net::accept::accept_loop(listener, "config listener", shutdown, |stream, peer| {
        let Ok(seat) = seats.clone().try_acquire_owned() else {
            tracing::warn!("config listener: {MAX_CONNECTIONS} connections open, closing one from {peer}");
            return std::future::ready(());
        };
        let member = member.clone();
        let shutdown = connections_shutdown.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let _seat = seat;
            let _ = stream.set_nodelay(true);
            let stream: Box<dyn LinkStream> = match &tls {
                None => Box::new(stream),
                Some(acceptor) => match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.handshake(stream, peer)).await
                {
                    Ok(Some(stream)) => Box::new(stream),
                    // Logged and counted by the acceptor.
                    _ => return,
                },
            };
            if let Err(err) = connection(member, stream, shutdown).await {
                tracing::debug!("config connection from {peer}: {err}");
            }
        });
        std::future::ready(())
    })
    .await;
}

async fn connection(
    member: Arc<Member>,
    mut stream: Box<dyn LinkStream>,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<()> {
    loop {
        let frame = tokio::select! {
            frame = read_frame(&mut stream) => frame?,
            _ = shutdown.wait_for(|stop| *stop) => return Ok(()),
        };
        let Some((channel, body)) = frame else {
            return Ok(());
        };
        let reply = match channel {
            Channel::Peer => {
                let request: PeerRequest =
                    decode(&body).map_err(|err| std::io::Error::new(std::io::ErrorKind::InvalidData, err))?;
                encode(Channel::Peer, &peer_call(&member, request).await)
            }
            Channel::Client => {
                let reply = match decode::<ClientRequest>(&body) {
                    Ok(request) => client_call(&member, request).await,
                    Err(err) => ClientReply::Failed(err.to_string()),
                };
                encode(Channel::Client, &reply)
            }
        };
        write_frame(&mut stream, &reply).await?;
    }
}

async fn peer_call(member: &Member, request: PeerRequest) -> PeerReply {
    let raft = member.raft();
    match request {
        PeerRequest::Append(rpc) => PeerReply::Append(raft.append_entries(rpc).await),
        PeerRequest::Vote(rpc) => PeerReply::Vote(raft.vote(rpc).await),
        PeerRequest::Snapshot(rpc) => PeerReply::Snapshot(raft.install_snapshot(rpc).await),
    }
}

async fn client_call(member: &Member, request: ClientRequest) -> ClientReply {
    match request {
        ClientRequest::Watch { known_epoch, wait_ms } => {
            let mut configs = member.configs();
            let wait = Duration::from_millis(wait_ms.min(MAX_WATCH_WAIT_MS));
            // Waiting out the time is the normal answer: the caller gets what there is.
            let _ = tokio::time::timeout(wait, configs.wait_for(|config| config.epoch > known_epoch)).await;
            let config = configs.borrow().as_ref().clone();
            ClientReply::Config(config)
        }
        ClientRequest::Propose(command) => member.propose(command).await,
        ClientRequest::Status => ClientReply::Status(member.status()),
        ClientRequest::Heartbeat(heartbeat) => crate::leases::heartbeat(member, heartbeat).await,
        ClientRequest::Restart { node, incarnation } => crate::leases::restart(member, &node, incarnation).await,
    }
}
