//! A storage node embedded in this process (`ferry demo`: one binary, no executable to
//! find), its threads pinned to the node's CPUs while the app side keeps its own.

use ferry_proto::TenantId;
use std::sync::mpsc;

use ferry_server::{ServerConfig, ServerHandle, TenantConfig};

use crate::BenchError;

/// What the embedded node runs with.
pub struct EmbeddedNode<'a> {
    /// CPUs its threads are pinned to; empty: not pinned.
    pub cpus: &'a [usize],
    /// Worker threads.
    pub cores: usize,
    /// The one tenant it lets in.
    pub tenant: TenantId,
    /// That tenant's token (the node listens on loopback only).
    pub token: &'a str,
    /// Emulated-work calibration shared with the app side (iterations per ms).
    pub spin_iters_per_ms: u64,
}

/// Starts the node from a thread pinned to its CPUs, so every thread the node creates
/// inherits that mask while the calling thread keeps its own.
pub fn start_embedded_node(node: &EmbeddedNode<'_>) -> Result<ServerHandle, BenchError> {
    let cpus = node.cpus.to_vec();
    let tenant = TenantConfig {
        id: node.tenant,
        token: node.token.to_string(),
        quota_bytes: ferry_store::limits::DEFAULT_TENANT_QUOTA_BYTES,
        home_core: None,
        maxmemory_policy: Default::default(),
    };
    let mut config = ServerConfig::new(
        "127.0.0.1:0".parse().expect("a valid literal address"),
        node.cores,
        vec![tenant],
    );
    config.spin_iters_per_ms = Some(node.spin_iters_per_ms);
    let (sender, receiver) = mpsc::channel();
    std::thread::Builder::new()
        .name("ferry-node-start".into())
        .spawn(move || {
            let result = (|| {
                if !cpus.is_empty() {
                    ferry_os::pin_current_thread(&cpus)?;
                }
                ferry_server::start(config, ferry_lua::registry()).map_err(|err| BenchError::Server(err.to_string()))
            })();
            // The receiver waits for this one message.
            let _ = sender.send(result);
        })
        .map_err(|err| BenchError::Io(err.to_string()))?;
    receiver
        .recv()
        .map_err(|_| BenchError::Server("the node's start-up thread died".into()))?
}
