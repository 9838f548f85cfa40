//! Sharding in the Redis Cluster model, as values: which slot a key hashes to, and which
//! node serves which slots. No I/O: the map is parsed from text the caller read.
//!
//! - [`slot`]: 16,384 slots; a key's slot is CRC16 (XMODEM) of the key, or of its hash tag
//!   (the part inside the first `{…}`), so related keys can be kept together.
//! - [`map`]: [`ClusterMap`], the nodes and their slot ranges, checked so that every slot
//!   has exactly one owner.
//!
//! Used by the storage node (`moved` and `cross_slot` answers) and by the client's
//! `ClusterClient` (routing data operations). Routing invocations is still to come.

pub mod map;
pub mod slot;

pub use map::{ClusterMap, MapError, NodeEntry, Spread};
pub use slot::{is_node_local, key_slot, NODE_LOCAL_TABLE, SLOTS};
