//! The one accept loop of every listener (the ferry protocol's door, RESP, metrics,
//! replication, the config group): accept until shutdown, and after a failed accept
//! (out of file descriptors and the like) back off instead of spinning.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// Pause after a failed accept before trying again: the loop does not spin on a full
/// descriptor table, and a descriptor freed meanwhile is used soon.
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);

/// Accepts connections on `listener` until `shutdown` turns true (or its sender is gone),
/// handing each to `serve` with its peer's address. `serve` starts the connection (it
/// spawns its task); the future it returns is awaited before the next accept, so a
/// listener with a bound on its connections may wait there for a place. `what` names the
/// listener in the log.
pub async fn accept_loop<Serve, Started>(
    listener: TcpListener,
    what: &'static str,
    mut shutdown: watch::Receiver<bool>,
    mut serve: Serve,
) where
    Serve: FnMut(TcpStream, SocketAddr) -> Started,
    Started: Future<Output = ()>,
{
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.wait_for(|stop| *stop) => return,
        };
        match accepted {
            Ok((stream, peer)) => serve(stream, peer).await,
            Err(err) => {
                tracing::warn!("{what}: accept failed: {err}");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_connection_is_served_until_shutdown() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, shutdown) = watch::channel(false);
        let (seen, mut peers) = tokio::sync::mpsc::unbounded_channel();
        let serving = tokio::spawn(accept_loop(
            listener,
            "test listener",
            shutdown,
            move |_stream, peer| {
                let _ = seen.send(peer);
                async {}
            },
        ));
        let mut dialed = Vec::new();
        for _ in 0..3 {
            let stream = TcpStream::connect(addr).await.unwrap();
            dialed.push(stream.local_addr().unwrap());
        }
        for dialer in dialed {
            assert_eq!(peers.recv().await, Some(dialer), "served in order, with its peer");
        }
        stop.send(true).unwrap();
        tokio::time::timeout(Duration::from_secs(10), serving)
            .await
            .expect("the loop ends at shutdown")
            .unwrap();
    }
}
