//! ferry's history checker: does a recorded history of invocations admit a strictly
//! serializable order? No I/O, no clock: a history is a value, the verdict another.
//!
//! ferry gives every installed object an explicit version (a per-tenant clock, strictly
//! increasing per key), and every invocation can record the version each read saw and each
//! write installed. With versions known there is nothing to infer (unlike black-box
//! checkers that must guess the version order): the dependency graph follows directly, as
//! in Elle (Kingsbury and Alvaro, VLDB 2020):
//! - **ww**: the writer of a key's version → the writer of its next version;
//! - **wr**: the writer of a version → every reader of it;
//! - **rw** (anti-dependency): a reader of a version → the writer of the next version;
//! - **rt** (real time, for *strict* serializability): an invocation that completed → every
//!   invocation that began after.
//!
//! The history is strictly serializable exactly when this graph has no cycle and nothing
//! reads what no committed invocation wrote. A violation comes back as a shortest cycle,
//! written out edge by edge ([`Violation`]).
//!
//! Layout: [`history`] (the recorded invocations), [`graph`] (the dependency graph and its
//! shortest cycle), [`check()`] here (the verdict).

pub mod graph;
pub mod history;

pub use history::{History, Invocation, Key, Outcome};

use graph::{Edge, Graph};

/// Why a history is not strictly serializable.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    /// A read saw a version written by an invocation that aborted (Adya's G1a).
    #[error("{reader} read {key} at version {version}, written by {writer}, which aborted")]
    AbortedRead {
        /// The reading invocation.
        reader: String,
        /// The key.
        key: Key,
        /// The version it saw.
        version: u64,
        /// The aborted writer.
        writer: String,
    },
    /// A read saw a version no invocation of the history wrote (and not the initial one).
    #[error("{reader} read {key} at version {version}, which no invocation wrote")]
    PhantomVersion {
        /// The reading invocation.
        reader: String,
        /// The key.
        key: Key,
        /// The version it saw.
        version: u64,
    },
    /// Two invocations installed the same version of a key.
    #[error("{first} and {second} both installed {key} at version {version}")]
    DuplicateVersion {
        /// One writer.
        first: String,
        /// The other.
        second: String,
        /// The key.
        key: Key,
        /// The version.
        version: u64,
    },
    /// The dependencies form a cycle: no serial order exists (or none that respects real
    /// time, if an `rt` edge is in it).
    #[error("cycle: {}", .0.join(", then "))]
    Cycle(Vec<String>),
}

/// What a check found: the invocations it judged and, if any, the first violation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Invocations whose outcome made them part of the graph (committed, or of unknown
    /// outcome but observed).
    pub judged: usize,
    /// The violation, if the history is not strictly serializable.
    pub violation: Option<Violation>,
}

/// Checks `history` for strict serializability.
pub fn check(history: &History) -> Verdict {
    let index = match history.index() {
        Ok(index) => index,
        Err(v) => {
            return Verdict {
                judged: 0,
                violation: Some(v),
            }
        }
    };
    if let Some(v) = index.read_violation(history) {
        return Verdict {
            judged: index.members.len(),
            violation: Some(v),
        };
    }
    let graph = Graph::build(history, &index);
    let violation = graph
        .shortest_cycle()
        .map(|cycle| Violation::Cycle(cycle.iter().map(|e: &Edge| e.describe(history)).collect()));
    Verdict {
        judged: index.members.len(),
        violation,
    }
}
