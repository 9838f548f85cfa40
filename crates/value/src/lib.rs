//! Redis's values in memory, and the changes that take a value from one version to the
//! next.
//!
//! A key's [`Entry`] is its [`Value`] (a string, hash, list, set or sorted set) and its
//! expiry. Each collection has a compact encoding for small sizes and a large one, chosen
//! and left by Redis's thresholds ([`Encodings`]): [`Hash`] a [`Pack`] or a table, [`Set`]
//! sorted integers, a pack or a table, [`ZSet`] a pack or a [`SkipList`], [`List`] a run
//! of packs. A command changes a value only through [`Change`]s, each applied in place
//! and giving back the change that undoes it ([`Tracked`]), so the storage node runs a
//! command on the stored value itself, logs the changes (not the value), replays them on
//! recovery and on replicas, and takes them back if its log refuses the commit.
//! [`Entry::encode`] and [`Entry::decode`] give a value's byte form: what snapshots, slot
//! moves and the ferry protocol carry, and what a storage function reading a key sees.
//!
//! Layout: [`pack`], [`hash`], [`set`], [`list`], [`skiplist`], [`zset`] (the types and
//! their encodings), [`scan`] (HSCAN's and SSCAN's cursors), [`encodings`] (the thresholds), [`entry`] (values, expiry, byte
//! form), [`change`] (changes, their undo and their log form), [`codec`] (LEB128).

pub mod change;
pub mod codec;
pub mod encodings;
pub mod entry;
pub mod hash;
pub mod list;
pub mod pack;
pub mod scan;
pub mod set;
pub mod skiplist;
pub mod zset;

pub use change::{Change, ChangeError, Slot, Tracked};
pub use encodings::{Encodings, DEFAULT_ENCODINGS};
pub use entry::{Entry, Value};
pub use hash::Hash;
pub use list::List;
pub use pack::Pack;
pub use set::Set;
pub use skiplist::SkipList;
pub use zset::ZSet;

/// A member, field or item in a large encoding: held inline up to 16 bytes (no
/// allocation for the short strings collections mostly hold), on the heap past that.
pub type Blob = smallvec::SmallVec<[u8; 16]>;

/// Bytes a [`Blob`] takes inline.
pub const BLOB_BYTES: usize = std::mem::size_of::<Blob>();

/// Heap bytes a string of these bytes takes as a [`Blob`] (none when it sits inline).
pub fn spilled_bytes(bytes: &[u8]) -> usize {
    if bytes.len() > 16 {
        bytes.len()
    } else {
        0
    }
}

/// Hash maps of fields and members from clients: aHash with per-process random keys.
pub type Hasher = ahash::RandomState;

#[cfg(test)]
mod tests {
    #[test]
    fn a_blob_is_three_words() {
        assert_eq!(super::BLOB_BYTES, 24);
    }
}
