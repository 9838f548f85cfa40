//! A member of the config group.
//!
//! The cluster's configuration ([`ferry_config::ClusterConfig`]) lives in a Raft group
//! run by `ferry config` processes (3 by default). Everyone else reaches it with
//! `ferry_client::config_group::ConfigClient`. This crate is the only one that names
//! openraft:
//!
//! - [`types`]: the group's Raft type configuration;
//! - [`log_store`]: the Raft log, durable in one file of checksummed frames;
//! - [`state_machine`]: the configuration built by committed commands, published on a
//!   watch channel, with snapshots in one file;
//! - [`peer`]: the Raft messages between members over TCP;
//! - [`member`]: a running member (data dir, Raft, forming the group, bootstrap);
//! - `leases`: the leader's lessor: grants for heartbeats, failover decisions proposed;
//! - [`server`]: a member's listener, for peers and clients;
//! - [`metrics`]: its view of the group for Prometheus, and its readiness;

mod leases;
pub mod log_store;
pub mod member;
pub mod metrics;
pub mod peer;
pub mod server;
pub mod state_machine;
pub mod types;

pub use member::{Member, MemberConfig, MemberError};
