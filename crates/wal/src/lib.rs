//! ferry's write-ahead log: every committed write set of every tenant, framed and
//! checksummed in segment files of the node's data dir, written by one thread with group
//! commit, and replayed on start. This crate does the node's disk I/O; the store only
//! hands it write sets through [`ferry_store::Journal`].
//!
//! - [`dir`]: the data dir, held by one process (a lock file), and its segment files.
//! - [`record`]: one record's bytes: a commit's write set, its length and checksum.
//! - [`log`]: [`Wal`]: appends (with disk space reserved first), the fsync modes, and each
//!   tenant's [`ferry_store::Journal`].
//! - `writer`: the writer thread: one write and at most one fdatasync per batch.
//! - [`gate`]: [`ReplyGate`]: a reply leaves only once what it may reveal is logged as
//!   durably as the mode promises.
//! - [`recover`]: [`replay`]: every whole record in order, the log cut at the first torn
//!   or corrupt one.
//! - [`snapshot`]: one tenant's snapshot file: its objects as of a log offset, framed and
//!   checksummed like the log.
//! - [`checkpoint`]: [`Wal::checkpoint`]: a snapshot of every tenant while the node
//!   serves, then the log they no longer need removed.
//! - [`checkpointer`]: [`Checkpointer`]: the thread that checkpoints when the log has
//!   grown, or when asked (`BGSAVE`, `SAVE`).
//! - [`restore`]: [`load_snapshots`]: each tenant's newest snapshot, loaded on start.
//! - [`tail`]: [`read_frames`]: records read back from a log offset, byte for byte, for
//!   replicas; [`Wal::append_frames`] appends them on the other side.
//! - [`error`]: the log's error type, [`WalError`].

pub mod checkpoint;
pub mod checkpointer;
pub mod dir;
pub mod error;
pub mod gate;
pub mod log;
pub mod record;
pub mod recover;
pub mod restore;
pub mod snapshot;
pub mod tail;
mod writer;

pub use checkpoint::{CheckpointReport, Tenants};
pub use checkpointer::{CheckpointResult, Checkpointer, SnapshotBusy, WhenDone, DEFAULT_SNAPSHOT_LOG_BYTES};
pub use dir::DataDir;
pub use error::WalError;
pub use gate::{LogFailed, ReplyGate};
pub use log::{AppendError, FsyncMode, KeyFilter, Wal, WalConfig, DEFAULT_SEGMENT_BYTES};
pub use recover::{replay, Cut, Recovered};
pub use restore::{load_snapshots, Restored};
pub use tail::{read_frames, TailError, MAX_TAIL_READ_BYTES};

#[cfg(test)]
pub(crate) mod tests {
    /// A fresh directory for one test, removed when the returned guard drops.
    pub(crate) fn temp_dir(name: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("ferry-wal-{name}-"))
            .tempdir()
            .unwrap()
    }
}
