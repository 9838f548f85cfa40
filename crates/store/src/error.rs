//! Errors of store operations. Each maps onto one protocol status.

use thiserror::Error;

use crate::limits::{MAX_KEY_BYTES, MAX_TABLES_PER_TENANT, MAX_TABLE_NAME_BYTES, MAX_TX_OBJECTS, MAX_VALUE_BYTES};

/// Why a store operation was refused. Nothing was changed when one is returned.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// A key longer than [`MAX_KEY_BYTES`].
    #[error("key of {0} bytes exceeds the {MAX_KEY_BYTES}-byte limit")]
    KeyTooLarge(usize),
    /// An empty key.
    #[error("keys must not be empty")]
    EmptyKey,
    /// A value larger than [`MAX_VALUE_BYTES`].
    #[error("value of {0} bytes exceeds the {MAX_VALUE_BYTES}-byte limit")]
    ValueTooLarge(usize),
    /// A table name that is empty, too long or uses characters outside `[A-Za-z0-9_.-]`.
    #[error("invalid table name {0:?}: use 1 to {MAX_TABLE_NAME_BYTES} characters of [A-Za-z0-9_.-]")]
    BadTableName(String),
    /// Creating the table would exceed [`MAX_TABLES_PER_TENANT`].
    #[error("tenant already has {MAX_TABLES_PER_TENANT} tables")]
    TooManyTables,
    /// A transaction touching more than [`MAX_TX_OBJECTS`] objects.
    #[error("transaction touches {0} objects, more than the {MAX_TX_OBJECTS} allowed")]
    TooManyObjects(usize),
    /// The write would take the tenant over its memory quota.
    #[error(
        "tenant memory quota of {quota_bytes} bytes exceeded (in use {used_bytes}, write needs {needed_bytes} more)"
    )]
    QuotaExceeded {
        /// The quota.
        quota_bytes: u64,
        /// Bytes in use before the write.
        used_bytes: u64,
        /// Additional bytes the write needed.
        needed_bytes: u64,
    },
    /// OCC validation failed: an object read by the transaction has a newer version.
    #[error("transaction aborted: {table}/{key_hex} changed (read version {read_version}, now {current_version})")]
    Conflict {
        /// Table of the conflicting object.
        table: String,
        /// Its key, hex-encoded for the message.
        key_hex: String,
        /// Version the transaction read.
        read_version: u64,
        /// Version found at validation.
        current_version: u64,
    },
    /// A read at a read version found the object changed after it (TL2): its value at the
    /// read version is gone, so the reader extends its snapshot or starts over.
    #[error(
        "transaction aborted: {table}/{key_hex} changed at version {changed_at}, after the read version {read_version}"
    )]
    Newer {
        /// Table of the object.
        table: String,
        /// Its key, hex-encoded for the message.
        key_hex: String,
        /// The reader's read version.
        read_version: u64,
        /// The version it changed at (for an absent object, its shard's last delete).
        changed_at: u64,
    },
    /// The node's log refused the commit (full, failed, or the write set too large for
    /// one record, or the node is a replica); nothing was installed.
    #[error("{}", journal_text(.0))]
    Journal(String),
    /// A replayed record (recovery, a replica's stream) does not apply to what the store
    /// holds: a damaged or missing record. The replay stops rather than guess.
    #[error("replay stopped: {0}")]
    Replay(String),
}

/// A refusal that carries its own error code (a replica's `READONLY …`, as Redis clients
/// expect it) is shown as it is; any other says the log refused it.
fn journal_text(refusal: &str) -> String {
    if refusal.starts_with("READONLY ") || refusal.starts_with("TRYAGAIN ") {
        refusal.to_string()
    } else {
        format!("write refused by the log: {refusal}")
    }
}

impl StoreError {
    /// True when the transaction saw data change under it (`Conflict` or `Newer`): it is
    /// retried, never failed (protocol status `tx_abort`).
    pub fn is_conflict(&self) -> bool {
        matches!(self, StoreError::Conflict { .. } | StoreError::Newer { .. })
    }

    /// True for errors caused by a size or quota limit (protocol status `too_large`).
    pub fn is_limit(&self) -> bool {
        matches!(
            self,
            StoreError::KeyTooLarge(_)
                | StoreError::ValueTooLarge(_)
                | StoreError::TooManyTables
                | StoreError::TooManyObjects(_)
                | StoreError::QuotaExceeded { .. }
        )
    }
}
