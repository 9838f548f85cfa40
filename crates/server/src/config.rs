//! Storage-node configuration: defaults, the config file, and validation.

use ferry_proto::TenantId;
use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use ferry_store::limits::DEFAULT_TENANT_QUOTA_BYTES;
use ferry_store::EvictionPolicy;

/// Most worker threads: more than any machine this node targets, few enough that a typo
/// (`--cores 10000`) is an error rather than ten thousand threads.
pub const MAX_CORES: usize = 256;

/// Most tenants one node serves: each has a queue share, counters and a table namespace.
pub const MAX_TENANTS: usize = 1024;

/// Longest tenant token accepted (the protocol carries it with a u16 prefix).
pub const MAX_TOKEN_BYTES: usize = 256;

/// Default depth of each worker's queue. At ~1 µs per get this is a few milliseconds of
/// work: past that, queueing only adds latency, so the node answers `overloaded` instead.
pub const DEFAULT_QUEUE_CAPACITY: usize = 4096;

/// Largest configurable queue depth.
pub const MAX_QUEUE_CAPACITY: usize = 1 << 20;

/// Default CPU-time budget of one server-side invocation. Storage functions are meant to
/// take microseconds; 100 ms lets even a deliberately expensive one (password hashing)
/// finish while stopping a runaway long before clients time out.
pub const DEFAULT_INVOKE_BUDGET: Duration = Duration::from_millis(100);

/// Smallest configurable budget: below this the watchdog's own period dominates.
pub const MIN_INVOKE_BUDGET: Duration = Duration::from_millis(1);

/// Largest configurable budget.
pub const MAX_INVOKE_BUDGET: Duration = Duration::from_secs(60);

pub use ferry_net::preauth::{DEFAULT_HELLO_TIMEOUT, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_UNAUTHENTICATED};

/// Longest configurable hello timeout.
pub const MAX_HELLO_TIMEOUT: Duration = Duration::from_secs(600);

/// Default I/O threads (accepting connections, the metrics and replication listeners):
/// the connections themselves live on the cores.
pub const DEFAULT_IO_THREADS: usize = 1;

/// Most I/O threads.
pub const MAX_IO_THREADS: usize = 64;

/// ASFP pushback thresholds. An invocation whose client accepts pushback is handed back at
/// a data access when its worker is overloaded — it holds at least `old_invocations_min`
/// suspended invocations (the one at its yield point included: an invocation yields only
/// once it has outrun its poll's slice), at least `new_invocations_min` more wait in its
/// queue, and at least `keep_min` would remain — and the invocation is compute-bound:
/// its compute so far exceeds `credit_per_access` times its accesses (the slides' c > n·D).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushbackConfig {
    /// "Some old tasks": a worker holding fewer suspended invocations is not overloaded.
    pub old_invocations_min: usize,
    /// "Even more tasks arrive": invocations waiting in the worker's queue.
    pub new_invocations_min: usize,
    /// Invocations (suspended + queued) the worker keeps after pushing one back, so it
    /// never runs dry and idles while clients re-execute.
    pub keep_min: usize,
    /// D: compute credit per data access. Pushing back only pays when an invocation's
    /// compute exceeds what shipping its data would cost the node.
    pub credit_per_access: Duration,
}

/// Default D: about what one unbatched remote get costs this node (≈ 5 µs of CPU measured
/// on the project's machines, docs/BENCHMARKS.md): compute beyond that per access is work
/// the node would rather ship out.
pub const DEFAULT_PUSHBACK_CREDIT_PER_ACCESS: Duration = Duration::from_micros(5);

/// Default "old tasks": one suspended invocation (the candidate itself, which outran its
/// slice) means the worker is already juggling work.
pub const DEFAULT_PUSHBACK_OLD_MIN: usize = 1;

/// Default "more arriving": one waiting invocation.
pub const DEFAULT_PUSHBACK_NEW_MIN: usize = 1;

/// Default tasks kept: two, so the worker has the next one ready while clients re-execute.
pub const DEFAULT_PUSHBACK_KEEP_MIN: usize = 2;

impl Default for PushbackConfig {
    fn default() -> PushbackConfig {
        PushbackConfig {
            old_invocations_min: DEFAULT_PUSHBACK_OLD_MIN,
            new_invocations_min: DEFAULT_PUSHBACK_NEW_MIN,
            keep_min: DEFAULT_PUSHBACK_KEEP_MIN,
            credit_per_access: DEFAULT_PUSHBACK_CREDIT_PER_ACCESS,
        }
    }
}

/// One tenant the node serves.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    /// Tenant id, as sent in every frame header.
    pub id: TenantId,
    /// Secret the tenant proves itself with in `hello`.
    pub token: String,
    /// Memory quota in bytes.
    #[serde(default = "default_quota")]
    pub quota_bytes: u64,
    /// Worker whose queue receives this tenant's requests; spread round-robin when unset.
    #[serde(default)]
    pub home_core: Option<usize>,
    /// What a write past the quota does (Redis's `maxmemory-policy`, by its names):
    /// `noeviction` (refused, the default), `allkeys-lru`, `allkeys-lfu`,
    /// `allkeys-random`, `volatile-lru`, `volatile-lfu`, `volatile-random`, `volatile-ttl`.
    /// The tenant may change it with `CONFIG SET maxmemory-policy`.
    #[serde(
        default,
        deserialize_with = "eviction_policy",
        serialize_with = "eviction_policy_name"
    )]
    pub maxmemory_policy: EvictionPolicy,
}

fn eviction_policy<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<EvictionPolicy, D::Error> {
    let name = String::deserialize(deserializer)?;
    EvictionPolicy::parse(&name).ok_or_else(|| {
        let names: Vec<&str> = ferry_store::eviction::POLICIES.iter().map(|p| p.name()).collect();
        serde::de::Error::custom(format!(
            "unknown maxmemory_policy {name:?}: one of {}",
            names.join(", ")
        ))
    })
}

fn eviction_policy_name<S: serde::Serializer>(policy: &EvictionPolicy, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(policy.name())
}

fn default_quota() -> u64 {
    DEFAULT_TENANT_QUOTA_BYTES
}

/// Everything the storage node needs to start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// Address to listen on (port 0 picks a free port).
    pub listen: SocketAddr,
    /// Cores: threads that own connections and run their requests, each with its own
    /// queue (and a native worker beside it for native functions).
    pub cores: usize,
    /// Threads that accept connections (then handed to the cores) and serve the other
    /// listeners (metrics, replication, the config group).
    pub io_threads: usize,
    /// Tenants and their tokens.
    pub tenants: Vec<TenantConfig>,
    /// Depth of each worker's queue.
    pub queue_capacity: usize,
    /// CPU-time budget of one server-side invocation.
    pub invoke_budget: Duration,
    /// How long one poll of an invocation (or one RESP turn) runs before its next access
    /// yields to the core's other work; see [`crate::store_ctx::POLL_SLICE`], the default.
    pub poll_slice: Duration,
    /// Most simultaneous authenticated connections (those waiting to authenticate are
    /// bounded separately by `max_unauthenticated`).
    pub max_connections: usize,
    /// Longest a connection may take to authenticate before it is closed.
    pub hello_timeout: Duration,
    /// Most connections waiting to authenticate at once; a new one evicts the oldest.
    pub max_unauthenticated: usize,
    /// Emulated-work calibration to use instead of measuring (iterations per ms), so a
    /// benchmark's client and node spin identically.
    pub spin_iters_per_ms: Option<u64>,
    /// Let an idle core run a request at once, on the connection that read it, instead of
    /// through its tenant's lane of the core's queue (a wake-up of the worker loop).
    pub inline_data_ops: bool,
    /// When invocations are handed back to clients that accept it (ASFP).
    pub pushback: PushbackConfig,
    /// Where to serve `GET /metrics` (Prometheus text), if anywhere.
    pub metrics_listen: Option<SocketAddr>,
    /// Where to speak RESP (redis-cli, Redis clients), if anywhere.
    pub resp_listen: Option<SocketAddr>,
    /// The tenant a RESP connection is signed in as before any AUTH (Redis's `default`
    /// user without a password), if any: for clients and test suites that send no
    /// password. Off unless set; AUTH still switches to another tenant.
    pub resp_default_tenant: Option<TenantId>,
    /// This node's place in a sharded cluster, if it is one: it then refuses keys it does
    /// not serve (`moved`) and requests spanning nodes (`cross_slot`).
    pub cluster: Option<crate::routing::ClusterRole>,
    /// How workers share out tasks; both mechanisms on by default. Switching one off
    /// exists for ablations and for the tests that show each mechanism matters.
    pub scheduling: Scheduling,
    /// The data dir and its log; `None` keeps everything in memory only.
    pub durability: Option<crate::durable::Durability>,
    /// TLS on every listener (ferry protocol, RESP, metrics), with the client certificates
    /// it asks for; `None` serves plain TCP.
    pub tls: Option<ferry_net::tls::ServerTls>,
    /// Log shipping: serving this node's log to replicas, or copying a primary's.
    pub replication: Option<crate::replica::Replication>,
}

/// The workers' scheduling mechanisms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scheduling {
    /// Hand out a worker's queued tasks by start-time fair queueing on tenants' CPU time;
    /// off: in arrival order (FIFO).
    pub fair_queueing: bool,
    /// Let a worker with nothing to do take tasks from other workers' queues; off: each
    /// worker runs only what was queued on it.
    pub work_stealing: bool,
    /// Pause a Lua call at the end of its slice of the worker (its VM's hook yields it) so
    /// other tenants' work runs before it resumes; off: a call holds the worker until it
    /// ends, and is bounded by the VM's instruction budget.
    pub preemption: bool,
}

impl Default for Scheduling {
    fn default() -> Scheduling {
        Scheduling {
            fair_queueing: true,
            work_stealing: true,
            preemption: true,
        }
    }
}

impl ServerConfig {
    /// Defaults for everything but the address, cores and tenants.
    pub fn new(listen: SocketAddr, cores: usize, tenants: Vec<TenantConfig>) -> ServerConfig {
        ServerConfig {
            listen,
            cores,
            io_threads: DEFAULT_IO_THREADS,
            tenants,
            queue_capacity: DEFAULT_QUEUE_CAPACITY,
            invoke_budget: DEFAULT_INVOKE_BUDGET,
            poll_slice: crate::store_ctx::POLL_SLICE,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            hello_timeout: DEFAULT_HELLO_TIMEOUT,
            max_unauthenticated: DEFAULT_MAX_UNAUTHENTICATED,
            spin_iters_per_ms: None,
            inline_data_ops: true,
            pushback: PushbackConfig::default(),
            scheduling: Scheduling::default(),
            cluster: None,
            metrics_listen: None,
            resp_listen: None,
            resp_default_tenant: None,
            durability: None,
            tls: None,
            replication: None,
        }
    }

    /// Checks every field; the node refuses to start on the first problem.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.cores == 0 || self.cores > MAX_CORES {
            return Err(ConfigError::Invalid(format!(
                "cores must be 1..={MAX_CORES}, got {}",
                self.cores
            )));
        }
        if self.io_threads == 0 || self.io_threads > MAX_IO_THREADS {
            return Err(ConfigError::Invalid(format!(
                "io_threads must be 1..={MAX_IO_THREADS}, got {}",
                self.io_threads
            )));
        }
        if self.queue_capacity == 0 || self.queue_capacity > MAX_QUEUE_CAPACITY {
            return Err(ConfigError::Invalid(format!(
                "queue_capacity must be 1..={MAX_QUEUE_CAPACITY}, got {}",
                self.queue_capacity
            )));
        }
        if self.invoke_budget < MIN_INVOKE_BUDGET || self.invoke_budget > MAX_INVOKE_BUDGET {
            return Err(ConfigError::Invalid(format!(
                "invoke budget must be between {MIN_INVOKE_BUDGET:?} and {MAX_INVOKE_BUDGET:?}, got {:?}",
                self.invoke_budget
            )));
        }
        if self.poll_slice.is_zero() || self.poll_slice > self.invoke_budget {
            return Err(ConfigError::Invalid(format!(
                "poll slice must be above zero and at most the invoke budget ({:?}), got {:?}",
                self.invoke_budget, self.poll_slice
            )));
        }
        if self.max_connections == 0 {
            return Err(ConfigError::Invalid("max_connections must be at least 1".into()));
        }
        if let Some(role) = &self.cluster {
            // A member of a config group may be a replica, which the routing map omits.
            if role.membership.is_none() && !role.in_map() {
                return Err(ConfigError::Invalid(format!(
                    "node id {:?} is not in the cluster map",
                    role.node_id
                )));
            }
        }
        if self.max_unauthenticated == 0 {
            return Err(ConfigError::Invalid("max_unauthenticated must be at least 1".into()));
        }
        if self.hello_timeout.is_zero() || self.hello_timeout > MAX_HELLO_TIMEOUT {
            return Err(ConfigError::Invalid(format!(
                "hello_timeout must be above 0 and at most {MAX_HELLO_TIMEOUT:?}"
            )));
        }
        if self.tenants.is_empty() {
            return Err(ConfigError::Invalid(
                "no tenants configured: pass --tenant ID:TOKEN or a config file with [[tenant]] entries".into(),
            ));
        }
        if self.tenants.len() > MAX_TENANTS {
            return Err(ConfigError::Invalid(format!("at most {MAX_TENANTS} tenants")));
        }
        let mut seen = std::collections::HashSet::new();
        for tenant in &self.tenants {
            if !seen.insert(tenant.id) {
                return Err(ConfigError::Invalid(format!(
                    "tenant {} is configured twice",
                    tenant.id
                )));
            }
            if tenant.token.is_empty() || tenant.token.len() > MAX_TOKEN_BYTES {
                return Err(ConfigError::Invalid(format!(
                    "tenant {}: token must be 1..={MAX_TOKEN_BYTES} bytes",
                    tenant.id
                )));
            }
            if let Some(core) = tenant.home_core {
                if core >= self.cores {
                    return Err(ConfigError::Invalid(format!(
                        "tenant {}: home_core {core} but the node runs only {} cores",
                        tenant.id, self.cores
                    )));
                }
            }
        }
        if let Some(replication) = &self.replication {
            replication.validate(self.durability.is_some())?;
        }
        if let Some(id) = self.resp_default_tenant {
            if !self.tenants.iter().any(|tenant| tenant.id == id) {
                return Err(ConfigError::Invalid(format!(
                    "the default tenant {id} is not one of the node's tenants"
                )));
            }
        }
        Ok(())
    }

    /// Worker that is tenant `index`'s home: its configured core, else round-robin.
    pub fn home_core(&self, index: usize) -> usize {
        self.tenants[index].home_core.unwrap_or(index % self.cores)
    }
}

/// Parses a `--tenant ID:TOKEN` flag value.
pub fn parse_tenant_flag(value: &str) -> Result<TenantConfig, ConfigError> {
    let (id, token) = value
        .split_once(':')
        .ok_or_else(|| ConfigError::Invalid(format!("--tenant {value:?}: expected ID:TOKEN")))?;
    let id = id
        .parse::<TenantId>()
        .map_err(|_| ConfigError::Invalid(format!("--tenant {value:?}: tenant id must be a number")))?;
    Ok(TenantConfig {
        id,
        token: token.to_string(),
        quota_bytes: DEFAULT_TENANT_QUOTA_BYTES,
        home_core: None,
        maxmemory_policy: Default::default(),
    })
}

/// A configuration the node cannot start with.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// What is wrong, in words.
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(id: u32) -> TenantConfig {
        parse_tenant_flag(&format!("{id}:secret")).unwrap()
    }

    #[test]
    fn validation_catches_each_problem() {
        let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
        assert!(ServerConfig::new(addr, 2, vec![tenant(1)]).validate().is_ok());
        assert!(ServerConfig::new(addr, 0, vec![tenant(1)]).validate().is_err());
        assert!(ServerConfig::new(addr, 2, vec![]).validate().is_err());
        assert!(ServerConfig::new(addr, 2, vec![tenant(1), tenant(1)])
            .validate()
            .is_err());
        let mut homed = tenant(1);
        homed.home_core = Some(5);
        assert!(ServerConfig::new(addr, 2, vec![homed]).validate().is_err());
        let mut config = ServerConfig::new(addr, 2, vec![tenant(1)]);
        config.invoke_budget = Duration::from_micros(1);
        assert!(config.validate().is_err());
        for (slice, valid) in [
            (Duration::ZERO, false),
            (Duration::from_micros(40), true),
            (Duration::from_secs(60), false),
        ] {
            let mut config = ServerConfig::new(addr, 2, vec![tenant(1)]);
            config.poll_slice = slice;
            assert_eq!(config.validate().is_ok(), valid, "poll slice {slice:?}");
        }
    }

    #[test]
    fn tenant_flags_and_files_parse() {
        assert_eq!(
            parse_tenant_flag("7:s3cret:with:colons").unwrap().token,
            "s3cret:with:colons"
        );
        assert!(parse_tenant_flag("seven:x").is_err());
        assert!(parse_tenant_flag("7").is_err());
        let file: Tenants =
            toml::from_str("[[tenant]]\nid = 1\ntoken = \"a\"\n[[tenant]]\nid = 2\ntoken = \"b\"\nhome_core = 1\n")
                .unwrap();
        assert_eq!(file.tenant.len(), 2);
        assert_eq!(file.tenant[1].home_core, Some(1));
        assert_eq!(file.tenant[0].quota_bytes, DEFAULT_TENANT_QUOTA_BYTES);
        assert!(toml::from_str::<Tenants>("[[tenant]]\nid = 1\ntoken = \"a\"\nbogus_key = 1\n").is_err());
        // What a flag parsed to is written and read back the same (flags over a file).
        let flag = parse_tenant_flag("7:x").unwrap();
        let again: TenantConfig = toml::from_str(&toml::to_string(&flag).unwrap()).unwrap();
        assert_eq!(again, flag);
    }

    /// A config file's tenant tables.
    #[derive(Debug, Deserialize)]
    struct Tenants {
        tenant: Vec<TenantConfig>,
    }

    #[test]
    fn a_tenant_names_its_eviction_policy_by_redis_name() {
        let file: Tenants =
            toml::from_str("[[tenant]]\nid = 1\ntoken = \"a\"\nmaxmemory_policy = \"allkeys-lru\"\n").unwrap();
        assert_eq!(file.tenant[0].maxmemory_policy, EvictionPolicy::AllKeysLru);
        let defaulted: Tenants = toml::from_str("[[tenant]]\nid = 1\ntoken = \"a\"\n").unwrap();
        assert_eq!(defaulted.tenant[0].maxmemory_policy, EvictionPolicy::NoEviction);
        let err = toml::from_str::<Tenants>("[[tenant]]\nid = 1\ntoken = \"a\"\nmaxmemory_policy = \"lru\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("allkeys-lru"), "{err}");
    }
}
