//! The compute nodes a gateway ships data to. Each `--compute HOST:PORT` stands for every
//! address its host resolves to (a Kubernetes headless Service names one per pod), looked
//! up again every [`RESOLVE_INTERVAL`]: a scaled-out Deployment's new nodes get work, and
//! removed ones stop getting it.
//!
//! Each address is dialled as such, except that with TLS a name that resolves to one
//! address is dialled by its name (so the name is what the certificate must carry); with
//! TLS and several addresses, each node's certificate must name its address.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;

use ferry_client::{Client, ClientConfig};

/// How often each name is looked up again.
pub(crate) const RESOLVE_INTERVAL: Duration = Duration::from_secs(10);

/// Most compute nodes one gateway ships data to.
pub(crate) const MAX_COMPUTE_NODES: usize = 256;

/// What a name resolves to (the system's resolver; a table in tests).
pub(crate) type Lookup =
    Arc<dyn Fn(String) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<SocketAddr>>> + Send>> + Send + Sync>;

/// The system's resolver.
fn system_lookup() -> Lookup {
    Arc::new(|name| Box::pin(async move { Ok(tokio::net::lookup_host(name).await?.collect()) }))
}

/// One compute node: the name it was found under (by index), what was dialled, the link.
struct Node {
    name: usize,
    dialled: String,
    client: Client,
}

/// One tenant's links to the compute nodes.
pub(crate) struct ComputeSet {
    names: Vec<String>,
    lookup: Lookup,
    /// The tenant's client configuration (its address replaced per node).
    client: ClientConfig,
    nodes: RwLock<Arc<Vec<Node>>>,
    next: AtomicUsize,
}

impl ComputeSet {
    /// Links to every address of every name; an error if a name does not resolve or
    /// none of its addresses answers (a typo should stop the gateway's start).
    pub(crate) async fn connect(names: Vec<String>, client: ClientConfig) -> Result<ComputeSet, String> {
        ComputeSet::connect_with(names, client, system_lookup()).await
    }

    /// [`ComputeSet::connect`], resolving names with `lookup`.
    async fn connect_with(names: Vec<String>, client: ClientConfig, lookup: Lookup) -> Result<ComputeSet, String> {
        let set = ComputeSet {
            names,
            lookup,
            client,
            nodes: RwLock::default(),
            next: AtomicUsize::new(0),
        };
        set.refresh(true).await?;
        Ok(set)
    }

    /// Looks each name up again: links to new addresses, drops those no longer listed.
    /// With `strict` a name that does not resolve, or none of whose addresses answers, is
    /// an error; without, its nodes stay as they were (a lookup failing for a moment
    /// must not empty the set).
    pub(crate) async fn refresh(&self, strict: bool) -> Result<(), String> {
        let current = Arc::clone(&self.nodes.read());
        let mut next = Vec::new();
        for (index, name) in self.names.iter().enumerate() {
            let addrs: Vec<SocketAddr> = match (self.lookup)(name.clone()).await {
                Ok(addrs) => addrs,
                Err(err) if strict => return Err(format!("compute node {name}: {err}")),
                Err(_) => Vec::new(),
            };
            if addrs.is_empty() && !strict {
                next.extend(current.iter().filter(|node| node.name == index).map(Node::clone_of));
                continue;
            }
            let dialled: Vec<String> = match (addrs.len(), &self.client.tls) {
                // One address and TLS: dialled by name, so the name is what is verified.
                (1, Some(_)) => vec![name.clone()],
                _ => addrs.iter().map(SocketAddr::to_string).collect(),
            };
            let before = next.len();
            let mut last_error = String::from("it resolves to no address");
            for addr in dialled {
                if next.len() >= MAX_COMPUTE_NODES {
                    break;
                }
                if let Some(node) = current.iter().find(|node| node.name == index && node.dialled == addr) {
                    next.push(node.clone_of());
                    continue;
                }
                let mut config = self.client.clone();
                config.addr = addr.clone();
                match Client::connect(config).await {
                    Ok(client) => next.push(Node {
                        name: index,
                        dialled: addr,
                        client,
                    }),
                    Err(err) => last_error = format!("{addr}: {err}"),
                }
            }
            if strict && next.len() == before {
                return Err(format!("compute node {name}: {last_error}"));
            }
        }
        *self.nodes.write() = Arc::new(next);
        Ok(())
    }

    /// The next node in round-robin order, if there is one.
    pub(crate) fn pick(&self) -> Option<Client> {
        let nodes = self.nodes.read();
        match nodes.len() {
            0 => None,
            n => Some(nodes[self.next.fetch_add(1, Ordering::Relaxed) % n].client.clone()),
        }
    }

    /// How many nodes it links to now.
    pub(crate) fn len(&self) -> usize {
        self.nodes.read().len()
    }
}

impl Node {
    fn clone_of(&self) -> Node {
        Node {
            name: self.name,
            dialled: self.dialled.clone(),
            client: self.client.clone(),
        }
    }
}

/// Looks every set's names up again every [`RESOLVE_INTERVAL`], for as long as the
/// runtime runs.
pub(crate) async fn keep_resolving(sets: Vec<Arc<ComputeSet>>) {
    loop {
        tokio::time::sleep(RESOLVE_INTERVAL).await;
        for set in &sets {
            // Not strict: a failed lookup or link keeps what there was, and never errs.
            let _ = set.refresh(false).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use parking_lot::Mutex;

    use super::*;

    const TOKEN: &str = "secret";

    /// A storage node stands in for a compute node: the set only links and picks.
    fn node() -> ferry_server::ServerHandle {
        let tenant = ferry_server::TenantConfig {
            id: ferry_proto::TenantId(1),
            token: TOKEN.into(),
            quota_bytes: 1 << 20,
            home_core: None,
            maxmemory_policy: Default::default(),
        };
        let config = ferry_server::ServerConfig::new("127.0.0.1:0".parse().unwrap(), 1, vec![tenant]);
        ferry_server::start(config, ferry_func::Registry::default()).expect("node starts")
    }

    fn addrs_of(set: &ComputeSet) -> Vec<String> {
        let mut addrs: Vec<String> = set.nodes.read().iter().map(|node| node.dialled.clone()).collect();
        addrs.sort();
        addrs
    }

    #[test]
    fn a_name_stands_for_every_address_it_resolves_to_as_they_change() {
        let (a, b) = (node(), node());
        let table: Arc<Mutex<std::io::Result<Vec<SocketAddr>>>> =
            Arc::new(Mutex::new(Ok(vec![a.local_addr(), b.local_addr()])));
        let answers = Arc::clone(&table);
        let lookup: Lookup = Arc::new(move |name| {
            assert_eq!(name, "compute.example:7400");
            let answer = match &*answers.lock() {
                Ok(addrs) => Ok(addrs.clone()),
                Err(err) => Err(std::io::Error::new(err.kind(), err.to_string())),
            };
            Box::pin(async move { answer })
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let client = ClientConfig::new("", ferry_proto::TenantId(1), TOKEN);
            let names = vec!["compute.example:7400".to_string()];
            let set = ComputeSet::connect_with(names.clone(), client.clone(), Arc::clone(&lookup))
                .await
                .expect("both addresses answer");
            let mut both = vec![a.local_addr().to_string(), b.local_addr().to_string()];
            both.sort();
            assert_eq!(addrs_of(&set), both);
            // Round robin over both.
            let picked: std::collections::BTreeSet<String> =
                (0..4).map(|_| set.pick().unwrap().config().addr.clone()).collect();
            assert_eq!(picked.len(), 2);

            // Scaled in: the address gone is dropped.
            *table.lock() = Ok(vec![b.local_addr()]);
            set.refresh(false).await.unwrap();
            assert_eq!(addrs_of(&set), vec![b.local_addr().to_string()]);
            // A lookup failing for a moment keeps what there was.
            *table.lock() = Err(std::io::Error::other("resolver down"));
            set.refresh(false).await.unwrap();
            assert_eq!(addrs_of(&set), vec![b.local_addr().to_string()]);
            // Scaled out again; an address that does not answer is left out until it does.
            let gone = {
                let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                listener.local_addr().unwrap()
            };
            *table.lock() = Ok(vec![a.local_addr(), b.local_addr(), gone]);
            set.refresh(false).await.unwrap();
            assert_eq!(addrs_of(&set), both);
            assert_eq!(set.len(), 2);

            // At the start, a name that does not resolve is an error, not an empty set.
            *table.lock() = Err(std::io::Error::other("no such host"));
            let refused = ComputeSet::connect_with(names.clone(), client.clone(), Arc::clone(&lookup)).await;
            assert!(refused.is_err_and(|why| why.contains("no such host")));
            // Nor is one none of whose addresses answers.
            *table.lock() = Ok(vec![gone]);
            let refused = ComputeSet::connect_with(names, client, lookup).await;
            assert!(refused.is_err());
        });
    }
}
