//! ferry's in-memory store: tenants → tables → versioned objects, with OCC. No I/O.
//!
//! Layout:
//! - [`limits`]: every size limit of the store as a named constant.
//! - [`tenant`]: [`TenantStore`], one tenant's tables, memory quota and version clock, with
//!   the single-object operations, the OCC commit, and reads at a read version (TL2,
//!   `tenant/snapshot.rs`): O(1) per read, consistent as of the version.
//! - [`locks`]: the lock plan that takes shard locks in one global order, so commits and
//!   validated reads never deadlock.
//! - [`error`]: the store's error type, [`StoreError`].
//! - [`eviction`]: Redis's `maxmemory-policy` and the access stamps it ranks keys by;
//!   `tenant/evict.rs` makes room for a write past the limit with it.
//! - [`journal`]: the [`Journal`] a commit hands its write set to before it is visible
//!   (the node's write-ahead log), and [`TenantStore::recover_commit`], which replays one.
//!
//! Isolation: every operation, including a single put, is a transaction that takes the
//! locks of every shard it touches in sorted order, validates read versions and installs
//! writes under those locks. Versions come from a per-tenant clock, so a key's version only
//! ever grows and a validated read set is a consistent snapshot at the moment of validation.

pub mod error;
pub mod eviction;
pub mod journal;
pub mod limits;
mod locks;
pub mod tenant;

pub use error::StoreError;
pub use eviction::EvictionPolicy;
pub use journal::{Journal, JournalRefusal};
pub use tenant::{
    KeyInfo, ObjectRef, ReplicateError, TableKeys, TenantStats, TenantStore, Updated, Watched, Write, WriteRef,
};

/// Version of an absent object. Real versions start at 1.
pub const VERSION_ABSENT: u64 = 0;
