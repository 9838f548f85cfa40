//! A loopback proxy in front of one upstream whose flow the nemesis sets: open, cut both
//! ways (every connection closed, new ones closed on accept), or one way only (the bytes
//! of one direction are swallowed while the connection stays open: requests reach the
//! node and are executed but no answer comes back, or nothing reaches it while its end
//! looks alive). The cluster soak puts one in front of each storage node for its clients,
//! one in front of each node's replication listener, and [`crate::partition::GroupLink`]
//! puts one in front of each config member.
//!
//! The upstream is learned after the proxy listens (the processes bind after the proxies
//! are handed out); until then every connection is closed and the dialer retries.

use std::net::SocketAddr;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Bytes one direction of a proxied connection reads at a time.
const PUMP_BUFFER_BYTES: usize = 16 * 1024;

/// What goes through a [`Link`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Everything, both ways.
    Open,
    /// Nothing: open connections close, new ones are closed on accept.
    Cut,
    /// Only what the dialer sends: the upstream's answers are swallowed.
    OnlyToUpstream,
    /// Only what the upstream sends: the dialer's bytes are swallowed.
    OnlyFromUpstream,
}

/// Which way bytes go.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    ToUpstream,
    FromUpstream,
}

impl Flow {
    fn passes(self, direction: Direction) -> bool {
        match self {
            Flow::Open => true,
            Flow::Cut => false,
            Flow::OnlyToUpstream => direction == Direction::ToUpstream,
            Flow::OnlyFromUpstream => direction == Direction::FromUpstream,
        }
    }
}

/// One proxy.
pub struct Link {
    addr: SocketAddr,
    upstream: Arc<Mutex<Option<SocketAddr>>>,
    flow: watch::Sender<Flow>,
    accept: JoinHandle<()>,
}

impl Link {
    /// A proxy on loopback, open but not yet forwarding anywhere.
    pub async fn start() -> std::io::Result<Link> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let upstream: Arc<Mutex<Option<SocketAddr>>> = Arc::default();
        let (flow, _) = watch::channel(Flow::Open);
        let accept = {
            let (upstream, flow) = (Arc::clone(&upstream), flow.subscribe());
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    let to = *upstream.lock();
                    match to {
                        Some(to) if *flow.borrow() != Flow::Cut => {
                            tokio::spawn(forward(client, to, flow.clone()));
                        }
                        _ => drop(client),
                    }
                }
            })
        };
        Ok(Link {
            addr,
            upstream,
            flow,
            accept,
        })
    }

    /// Where the proxy listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where it forwards to.
    pub fn set_upstream(&self, upstream: SocketAddr) {
        *self.upstream.lock() = Some(upstream);
    }

    /// A handle that sets the upstream from elsewhere (a task learning it).
    pub fn upstream_setter(&self) -> UpstreamSetter {
        UpstreamSetter(Arc::clone(&self.upstream))
    }

    /// Sets what goes through.
    pub fn set(&self, flow: Flow) {
        self.flow.send_replace(flow);
    }
}

/// Sets a [`Link`]'s upstream.
#[derive(Clone)]
pub struct UpstreamSetter(Arc<Mutex<Option<SocketAddr>>>);

impl UpstreamSetter {
    /// Where the link forwards to.
    pub fn set(&self, upstream: SocketAddr) {
        *self.0.lock() = Some(upstream);
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.flow.send_replace(Flow::Cut);
        self.accept.abort();
    }
}

/// Forwards one connection until either side closes or the link is cut.
async fn forward(client: TcpStream, upstream: SocketAddr, mut flow: watch::Receiver<Flow>) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    tokio::select! {
        _ = pump(client_read, server_write, Direction::ToUpstream, flow.clone()) => {}
        _ = pump(server_read, client_write, Direction::FromUpstream, flow.clone()) => {}
        _ = flow.wait_for(|flow| *flow == Flow::Cut) => {}
    }
}

/// Copies one direction, swallowing what the flow does not let through.
async fn pump(
    mut from: impl AsyncReadExt + Unpin,
    mut to: impl AsyncWriteExt + Unpin,
    direction: Direction,
    flow: watch::Receiver<Flow>,
) {
    let mut buffer = vec![0u8; PUMP_BUFFER_BYTES];
    loop {
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        let passes = flow.borrow().passes(direction);
        if passes && to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::Duration;

    use super::*;

    /// An echo server: what it reads, it writes back.
    pub(crate) async fn echo() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 64];
                    while let Ok(n) = stream.read(&mut buf).await {
                        if n == 0 || stream.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    /// What one byte sent on `stream` brings back within a second: `Some(n)` bytes read
    /// (0: closed), `None` if nothing came.
    async fn round_trip(stream: &mut TcpStream) -> Option<usize> {
        if stream.write_all(b"x").await.is_err() {
            return Some(0);
        }
        let mut byte = [0u8; 1];
        match tokio::time::timeout(Duration::from_secs(1), stream.read(&mut byte)).await {
            Ok(Ok(n)) => Some(n),
            Ok(Err(_)) => Some(0),
            Err(_) => None,
        }
    }

    #[tokio::test]
    async fn a_link_forwards_swallows_one_way_and_cuts_as_set() {
        let link = Link::start().await.unwrap();
        let mut early = TcpStream::connect(link.addr()).await.unwrap();
        assert_eq!(round_trip(&mut early).await, Some(0), "no upstream yet: closed");
        link.set_upstream(echo().await);
        let mut stream = TcpStream::connect(link.addr()).await.unwrap();
        assert_eq!(round_trip(&mut stream).await, Some(1));
        // One way, either way: the byte or its echo is swallowed, the connection lives.
        for flow in [Flow::OnlyToUpstream, Flow::OnlyFromUpstream] {
            link.set(flow);
            assert_eq!(round_trip(&mut stream).await, None, "{flow:?}");
        }
        link.set(Flow::Open);
        assert_eq!(
            round_trip(&mut stream).await,
            Some(1),
            "open again: the same connection works"
        );
        link.set(Flow::Cut);
        assert_eq!(round_trip(&mut stream).await, Some(0), "a cut closes it");
        let mut refused = TcpStream::connect(link.addr()).await.unwrap();
        assert_eq!(round_trip(&mut refused).await, Some(0), "and closes new ones");
        link.set(Flow::Open);
        let mut healed = TcpStream::connect(link.addr()).await.unwrap();
        assert_eq!(round_trip(&mut healed).await, Some(1));
    }
}
