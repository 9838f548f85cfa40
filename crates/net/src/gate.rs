//! What a reply waits for before it leaves: the process's write-ahead log holding, as
//! durably as the process promises, every write the reply may reveal. The log implements
//! it (`ferry_wal::ReplyGate`); a process without a log has no gate. A listener passes
//! the gate once per batch of replies it writes (one socket write), so every reply of
//! the batch waits for one log position.

use std::future::Future;
use std::pin::Pin;

use thiserror::Error;

/// The log failed: replies that may reveal writes it will never hold are withheld, and
/// their connection closes.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
#[error("the write-ahead log failed: replies that may reveal unlogged writes are withheld")]
pub struct Withheld;

/// A pass through the gate, in progress.
pub type Passing<'a> = Pin<Box<dyn Future<Output = Result<(), Withheld>> + Send + 'a>>;

/// The gate replies pass before they are written.
pub trait ReplyGate: Send + Sync {
    /// Resolves once every write made before the call may be revealed; `Withheld` if it
    /// never may.
    fn pass(&self) -> Passing<'_>;
}
