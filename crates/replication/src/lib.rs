//! Replication by log shipping. A primary's log already holds every committed write set,
//! in commit order, checksummed; a replica keeps a copy of that log, byte for byte at the
//! same offsets, and installs each record into its store as it logs it.
//!
//! The replica pulls: it asks for the records after the end of its own log, which it has
//! logged as durably as its fsync mode promises. That offset is also its acknowledgement:
//! the primary's reply gate, under `--ack replica`, releases a reply only once some
//! replica's pull has passed everything the reply may reveal. One request carries both
//! the acknowledgement and the long poll for what comes next, so there is no separate ack
//! message to lose or reorder.
//!
//! - [`wire`]: the messages and their frames.
//! - [`link`]: a connection (TCP, or TLS through rustls) and its hello with the
//!   replication token.
//! - [`source`]: the primary's side: serves records from an offset, its snapshot files,
//!   and takes acknowledgements.
//! - [`follower`]: the replica's side: pulls, logs, installs, acknowledges.
//! - [`slots`]: a slot move's copy: a scan of the range, the log after it, the source's
//!   freeze, the rest of the log.
//! - [`bootstrap`]: a new replica, or one that fell behind the log the primary keeps,
//!   copies the primary's snapshots and the log after them before it starts.

pub mod bootstrap;
pub mod follower;
pub mod link;
pub mod slots;
pub mod source;
pub mod wire;

pub use bootstrap::{copy_from_primary, needs_copy, request_copy, BootstrapReport, RESYNC_MARKER};
pub use follower::{follow, Apply, FollowerExit, FollowerStatus, OnAhead};
pub use link::{ReplicationError, Upstream};
pub use slots::{import, ImportReport, SlotSink, SlotSource};
pub use source::{serve, Source};
