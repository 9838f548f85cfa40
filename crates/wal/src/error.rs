//! The log's errors: each says which file and what to do.

use ferry_proto::TenantId;
use std::path::{Path, PathBuf};

use thiserror::Error;

/// Why the data directory or its log cannot be used.
#[derive(Debug, Error)]
pub enum WalError {
    /// An I/O error on a file of the data dir.
    #[error("{what} {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// `--data-dir` names something that is not a directory.
    #[error("data dir {0} is not a directory")]
    NotADirectory(PathBuf),
    /// Another process holds the data dir.
    #[error("data dir {path} is in use by another ferry server (pid {holder}); stop it, or give this one its own --data-dir")]
    Locked {
        /// The directory.
        path: PathBuf,
        /// What the lock file says (the holder's pid).
        holder: String,
    },
    /// The log holds commits of a tenant the configuration does not list.
    #[error("the log holds data of tenant {0}, which the configuration does not list: add it back, or move the data dir away")]
    UnknownTenant(TenantId),
    /// A snapshot file that is not whole and valid (renamed into place only once synced,
    /// so this is damage, not a crash).
    #[error("snapshot {path} is damaged ({why}); its log is gone, so the node does not start without it: restore the file, or move the data dir away")]
    Snapshot {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// The snapshots and the log do not fit together (files removed by hand).
    #[error("data dir {path}: {why}")]
    Inconsistent {
        /// The directory.
        path: PathBuf,
        /// What does not fit.
        why: String,
    },
    /// The log failed earlier (an I/O error): nothing more can be made durable.
    #[error("the log failed ({0}); restart the node")]
    Failed(String),
    /// The node is stopping: a snapshot under way was abandoned.
    #[error("the node is stopping; the snapshot was abandoned")]
    Stopping,
    /// A logged commit the store refused on replay.
    #[error("log record at offset {lsn} cannot be replayed: {why}")]
    Replay {
        /// Its offset.
        lsn: u64,
        /// The store's refusal.
        why: String,
    },
}

impl WalError {
    pub(crate) fn io(path: &Path, what: &'static str, source: std::io::Error) -> WalError {
        WalError::Io {
            path: path.to_path_buf(),
            what,
            source,
        }
    }
}
