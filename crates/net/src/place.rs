//! Where a new connection's task runs: on the process's shared I/O runtime, or on a
//! runtime the service names (a storage node's core loop, which owns its connections so
//! their commands run on the thread that read them).

use std::future::Future;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::runtime::Handle;

/// Longest a new connection's first bytes are awaited to choose its runtime (clients of
/// both protocols speak first; one that does not is placed without them).
pub const FIRST_BYTES_WAIT: Duration = Duration::from_millis(200);

/// Most of a new connection's first bytes looked at (a hello frame's header, an AUTH).
pub const FIRST_BYTES_MAX: usize = 512;

/// The first bytes the peer sent, left unread for the connection (empty if none came
/// within [`FIRST_BYTES_WAIT`]).
pub async fn first_bytes(stream: &TcpStream) -> Vec<u8> {
    let mut bytes = vec![0; FIRST_BYTES_MAX];
    match tokio::time::timeout(FIRST_BYTES_WAIT, stream.peek(&mut bytes)).await {
        Ok(Ok(read)) => {
            bytes.truncate(read);
            bytes
        }
        _ => Vec::new(),
    }
}

/// Runs `connection` over `stream` where `choose` says from the connection's first bytes
/// ([`first_bytes`], left unread for it), or on the current runtime at once when the
/// process does not place its connections (`placing` false).
pub fn spawn_placed<C, F, Fut>(stream: TcpStream, placing: bool, choose: C, connection: F)
where
    C: FnOnce(&[u8]) -> Option<Handle> + Send + 'static,
    F: FnOnce(TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    if !placing {
        tokio::spawn(connection(stream));
        return;
    }
    tokio::spawn(async move {
        let first = first_bytes(&stream).await;
        spawn_connection(choose(&first), stream, connection);
    });
}

/// Runs `connection` over `stream` as a task of `runtime`, or of the current runtime when
/// there is none. On another runtime the socket is registered anew with that runtime's
/// reactor, so its readiness wakes that runtime's thread and no other.
pub fn spawn_connection<F, Fut>(runtime: Option<Handle>, stream: TcpStream, connection: F)
where
    F: FnOnce(TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let Some(runtime) = runtime else {
        tokio::spawn(connection(stream));
        return;
    };
    // `into_std` leaves the socket non-blocking, as `from_std` wants it.
    let stream = match stream.into_std() {
        Ok(stream) => stream,
        Err(err) => {
            tracing::warn!("connection dropped: cannot hand it to its core: {err}");
            return;
        }
    };
    runtime.spawn(async move {
        match TcpStream::from_std(stream) {
            Ok(stream) => connection(stream).await,
            Err(err) => tracing::warn!("connection dropped: its core cannot register it: {err}"),
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A connection handed to another runtime is served by that runtime's thread.
    #[test]
    fn a_connection_runs_on_the_runtime_it_is_handed_to() {
        let shared = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let core = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let core_handle = core.handle().clone();
        let (served_on_tx, served_on) = std::sync::mpsc::channel();
        let core_thread = std::thread::Builder::new()
            .name("the-core".into())
            .spawn(move || core.block_on(async { tokio::time::sleep(std::time::Duration::from_secs(30)).await }))
            .unwrap();
        let echoed = shared.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let client = tokio::spawn(async move {
                let mut client = TcpStream::connect(addr).await.unwrap();
                client.write_all(b"ping").await.unwrap();
                let mut answer = [0u8; 4];
                client.read_exact(&mut answer).await.unwrap();
                answer
            });
            let (stream, _) = listener.accept().await.unwrap();
            spawn_connection(Some(core_handle), stream, move |mut stream| async move {
                let mut got = [0u8; 4];
                stream.read_exact(&mut got).await.unwrap();
                let _ = served_on_tx.send(std::thread::current().name().map(str::to_string));
                stream.write_all(&got).await.unwrap();
            });
            client.await.unwrap()
        });
        assert_eq!(&echoed, b"ping");
        assert_eq!(served_on.recv().unwrap().as_deref(), Some("the-core"));
        drop(core_thread);
    }
}
