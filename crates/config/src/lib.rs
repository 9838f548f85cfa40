//! The cluster's configuration as values, with no I/O: which storage nodes exist, which
//! shard (a set of slot ranges) each one serves, and the epoch that numbers every change.
//!
//! - [`state`]: [`ClusterConfig`] and the routing map it gives;
//! - [`command`]: the [`ConfigChange`]s that change it, each checked against the epoch it was
//!   decided at, and applied whole or not at all;
//! - [`moves`]: a slot range's move from one shard to another, and why its hand-over is
//!   safe;
//! - [`lease`]: the [`Lessor`](lease::Lessor): leases for primaries from the leader, and
//!   the fence-then-promote decisions when one falls silent;
//! - [`hand_over`]: a planned change of primary (a rolling restart's), promoted once the
//!   replica holds all the stopped primary holds;
//! - [`wire`]: what nodes, gateways, clients and admin commands say to a config member.
//!
//! The config group (`ferry-confignode`) keeps a [`ClusterConfig`] in a Raft state machine
//! and applies committed commands to it with [`ClusterConfig::apply`]; everything here is
//! deterministic, so every member computes the same configuration from the same log.

pub mod command;
pub mod hand_over;
pub mod lease;
pub mod moves;
pub mod state;
pub mod wire;

pub use command::{ConfigChange, Outcome, Refusal};
pub use state::{ClusterConfig, Epoch, Shard, ShardId, SlotMove, StorageNode};
