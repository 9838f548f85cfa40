//! A loopback TCP proxy that cuts connections at random points: a request is lost half
//! sent, or an answer never arrives for a request the node executed (a commit applied
//! but never acknowledged), which is exactly what a client must report as unknown.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Bytes one direction of a proxied connection reads at a time.
const PUMP_BUFFER_BYTES: usize = 16 * 1024;

/// The proxy; dropping it stops accepting (open connections end with their clients).
pub struct CuttingProxy {
    addr: SocketAddr,
    cuts: Arc<AtomicU64>,
    accept: JoinHandle<()>,
}

impl CuttingProxy {
    /// Listens on loopback and forwards to `upstream`, cutting each direction of each
    /// connection after an exponentially distributed number of bytes with mean
    /// `mean_bytes_to_cut` (so a cut lands anywhere: inside a frame or between frames).
    pub async fn start(upstream: SocketAddr, mean_bytes_to_cut: u64, seed: u64) -> std::io::Result<CuttingProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let cuts = Arc::new(AtomicU64::new(0));
        let rng = Arc::new(Mutex::new(ChaCha8Rng::seed_from_u64(seed)));
        let accept = {
            let cuts = Arc::clone(&cuts);
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    let budgets = {
                        let mut rng = rng.lock().expect("proxy rng");
                        let mut draw = || (-(mean_bytes_to_cut as f64) * (1.0 - rng.gen::<f64>()).ln()) as u64;
                        (draw(), draw())
                    };
                    tokio::spawn(proxy_one(client, upstream, budgets, Arc::clone(&cuts)));
                }
            })
        };
        Ok(CuttingProxy { addr, cuts, accept })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections cut so far.
    pub fn cuts(&self) -> u64 {
        self.cuts.load(Ordering::Relaxed)
    }
}

impl Drop for CuttingProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Forwards one connection until either side closes or a direction's byte budget runs
/// out; then both sockets are dropped, which the client sees as a broken connection.
async fn proxy_one(client: TcpStream, upstream: SocketAddr, (up, down): (u64, u64), cuts: Arc<AtomicU64>) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let cut = tokio::select! {
        cut = pump(client_read, server_write, up) => cut,
        cut = pump(server_read, client_write, down) => cut,
    };
    if cut {
        cuts.fetch_add(1, Ordering::Relaxed);
    }
}

/// Copies `from` to `to` until EOF, an error, or `budget` bytes; true if the budget ended it.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut budget: u64) -> bool {
    let mut buf = vec![0u8; PUMP_BUFFER_BYTES];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => n,
        };
        let pass = n.min(usize::try_from(budget).unwrap_or(usize::MAX));
        if to.write_all(&buf[..pass]).await.is_err() {
            return false;
        }
        budget -= pass as u64;
        if pass < n || budget == 0 {
            return true;
        }
    }
}
