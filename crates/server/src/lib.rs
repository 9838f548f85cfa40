//! The storage node: sockets, threads and the glue between them and the core crates.
//!
//! Layout:
//! - [`config`]: [`ServerConfig`], its defaults, limits and the TOML config file.
//! - [`server`]: [`start`] a node, [`ServerHandle`] to find its address and stop it; with
//!   [`ServerConfig::tls`], every listener speaks TLS (`ferry_net::tls`).
//! - [`listeners`]: a node's sockets bound before it starts ([`start_on`]), so a cluster map
//!   can name ports the OS gave instead of ports guessed free.
//! - `conn`: one task pair per connection — framing, hello, dispatch, and the outbox that
//!   batches responses into few writes.
//! - `worker`: the cores: a thread per core whose loop owns its connections and runs
//!   their commands inline, bounded per-core queues, work stealing; `watchdog`: pauses of
//!   Lua calls past their slice and the replacement of a core stuck in a runaway function.
//! - `fair`: start-time fair queueing of a worker's tasks by tenant CPU time.
//! - `exec`: executing a task on a worker (a data operation, an invocation's start or next
//!   step, a turn granted), its answer and its charge; `data_op`: the ferry protocol's data
//!   operations, answered at once; `invocation`: storage functions step by step with a
//!   CPU budget, OCC commit and bounded retries; `io_cadence`: how often a busy core
//!   polls its sockets.
//! - `store_ctx`: the storage-node implementation of `ferry_func::Ctx` for invocations.
//! - `listing`: tables' listings for functions (KEYS, SCAN, FLUSHDB in a script), on the
//!   node and as the `list` request of a function run on the app side.
//! - `read_part`: a read-only command on one key run here for a function on the app side
//!   (the part it reads travels, not the value).
//! - `in_place`: Redis's data commands and MULTI/EXEC run on the stored values themselves
//!   (`ferry_store::TenantStore::update`), their changes logged, not their values;
//!   `exec_listing`: EXEC of a transaction holding KEYS, SCAN, FLUSHDB … (over a
//!   `StoreCtx`, as a script runs, and one OCC commit).
//! - [`durable`]: with a data dir, snapshots and the write-ahead log recovered on start,
//!   every commit journalled, snapshots taken by the checkpointer; replies pass the log's
//!   gate. `save`: RESP SAVE and BGSAVE.
//! - `node`: state shared by all threads (tenants, registry, pool, counters).
//! - [`membership`]: in a config group with replication: heartbeats, the lease a primary
//!   serves under, and acting on each configuration's roles (fence, promote, demote).
//! - [`replica`]: log shipping (`ferry_replication`): a primary serves its log to replicas
//!   (and with `--ack replica` its replies wait for one); a replica copies it, installs
//!   it, and refuses writes of its own.
//! - [`routing`]: as one node of a cluster, `moved` and `cross_slot` for keys it does not
//!   serve.
//! - [`stats`]: counters reported by the `stats` operation.
//! - `memory`: a tenant's `maxmemory` and `maxmemory-policy` as CONFIG sets them, and INFO's
//!   memory lines (the store limits and evicts).
//! - `metrics`: the same counters for Prometheus, `GET /metrics` on `--metrics ADDR`.
//! - `resp`, `resp_job`: the RESP front end (`--resp ADDR`), and its commands run by the
//!   connection's task in turns of its core: data commands in place (`in_place`), FUNCTION /
//!   FCALL as invocations of the Lua storage functions. `turn`: a turn of a core for work
//!   run in a task of the core's own, inline when the core is idle, else when the fair
//!   queue comes to the tenant's lane.

pub mod config;
mod conn;
mod data_op;
mod database;
pub mod durable;
mod exec;
mod exec_listing;
mod expiry;
mod fair;
mod frozen;
mod function_stats;
mod in_place;
mod invocation;
mod io_cadence;
pub mod listeners;
mod listing;
pub mod membership;
mod memory;
mod metrics;
mod moves;
mod node;
mod read_part;
pub mod replica;
mod resp;
mod resp_job;
pub mod routing;
mod save;
pub mod server;
mod snapshot_read;
pub mod stats;
mod store_ctx;
mod turn;
mod watchdog;
mod worker;

pub use config::{ConfigError, PushbackConfig, Scheduling, ServerConfig, TenantConfig};
pub use durable::Durability;
pub use listeners::Listeners;
pub use replica::{Ack, Replication};
pub use server::{start, start_on, ServerError, ServerHandle};
