//! Starting, running and stopping a gateway or compute node.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use ferry_net::connections::Connections;
use ferry_net::histogram::LatencyHistograms;

use crate::config::FrontConfig;
use crate::listener::{Service, Shared};
use crate::FrontError;

/// A running gateway or compute node. Dropping it stops it.
pub struct FrontHandle {
    local_addr: SocketAddr,
    resp_addr: Option<SocketAddr>,
    metrics_addr: Option<SocketAddr>,
    shutdown: watch::Sender<bool>,
    runtime: Option<tokio::runtime::Runtime>,
}

/// Starts a process: builds its runtime, makes the service in it (`make` may connect to the
/// nodes behind it), binds, and serves. Returns once it accepts connections. Not callable
/// from async code (it blocks on its own runtime while connecting).
pub(crate) fn start<S, F, Fut>(config: FrontConfig, process: &'static str, make: F) -> Result<FrontHandle, FrontError>
where
    S: Service,
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<S, FrontError>>,
{
    config.validate()?;
    // Read first: a bad certificate fails the start before anything is dialled or bound.
    let tls = config.tls.as_ref().map(|tls| tls.load()).transpose()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.threads)
        .thread_name(process)
        .enable_all()
        .build()
        .map_err(FrontError::Start)?;
    let service = Arc::new(runtime.block_on(make())?);
    let bind = |addr: SocketAddr| {
        let _guard = runtime.enter();
        let listener = std::net::TcpListener::bind(addr).map_err(|source| FrontError::Bind { addr, source })?;
        listener.set_nonblocking(true).map_err(FrontError::Start)?;
        TcpListener::from_std(listener).map_err(FrontError::Start)
    };
    // An adopted listener is served through a duplicate of its descriptor: the config
    // (and whoever handed it over) keeps its own.
    let adopt = |listener: &std::net::TcpListener| {
        let _guard = runtime.enter();
        let listener = listener.try_clone().map_err(FrontError::Start)?;
        listener.set_nonblocking(true).map_err(FrontError::Start)?;
        TcpListener::from_std(listener).map_err(FrontError::Start)
    };
    let listener = match &config.adopted.ferry {
        Some(listener) => adopt(listener)?,
        None => bind(config.listen)?,
    };
    let local_addr = listener.local_addr().map_err(FrontError::Start)?;
    let metrics = config.metrics_listen.map(bind).transpose()?;
    let resp = match (&config.adopted.resp, config.resp_listen) {
        (Some(listener), _) => Some(adopt(listener)?),
        (None, addr) => addr.map(bind).transpose()?,
    };
    let resp_addr = match &resp {
        Some(listener) => Some(listener.local_addr().map_err(FrontError::Start)?),
        None => None,
    };
    let metrics_addr = match &metrics {
        Some(listener) => Some(listener.local_addr().map_err(FrontError::Start)?),
        None => None,
    };
    let (shutdown, shutdown_rx) = watch::channel(false);
    let shared = Arc::new(Shared {
        service,
        connections: Connections::new(config.max_connections, config.max_unauthenticated, config.hello_timeout),
        config,
        latency: LatencyHistograms::default(),
        process,
    });
    let tls = tls.map(|tls| ferry_net::tls::Acceptor::new(tls, Arc::clone(&shared.connections)));
    if let Some(listener) = metrics {
        let scraped = Arc::clone(&shared);
        // Ready once started: it listens only after linking to the nodes behind it.
        let endpoints = ferry_net::metrics::Endpoints::always_ready(Arc::new(move || {
            ferry_net::metrics::exposition(scraped.stats(), Some((scraped.process, &scraped.latency)))
        }));
        runtime.spawn(ferry_net::metrics::serve(
            listener,
            endpoints,
            tls.clone(),
            shutdown_rx.clone(),
        ));
    }
    if let Some(listener) = resp {
        let front = Arc::new(crate::resp::RespFront(Arc::clone(&shared)));
        runtime.spawn(ferry_net::resp::serve(
            front,
            listener,
            tls.clone(),
            shutdown_rx.clone(),
        ));
    }
    runtime.spawn(ferry_net::door::serve(shared, listener, tls, shutdown_rx));
    Ok(FrontHandle {
        local_addr,
        resp_addr,
        metrics_addr,
        shutdown,
        runtime: Some(runtime),
    })
}

impl FrontHandle {
    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The address of the RESP listener, if served.
    pub fn resp_addr(&self) -> Option<SocketAddr> {
        self.resp_addr
    }

    /// The address of `GET /metrics`, if served.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// Blocks until SIGINT or SIGTERM.
    pub fn wait_for_signal(&self) -> std::io::Result<()> {
        let runtime = self.runtime.as_ref().expect("runtime lives until shutdown");
        runtime.block_on(ferry_net::signal::terminated())
    }

    /// Stops accepting and reading; requests in flight are dropped with the runtime.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let _ = self.shutdown.send(true);
        if let Some(runtime) = self.runtime.take() {
            if tokio::runtime::Handle::try_current().is_ok() {
                // Called from async code (e.g. a test): blocking on the runtime is not allowed.
                runtime.shutdown_background();
            } else {
                runtime.shutdown_timeout(Duration::from_secs(1));
            }
        }
    }
}

impl Drop for FrontHandle {
    fn drop(&mut self) {
        self.stop();
    }
}
