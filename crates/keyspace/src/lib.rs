//! Redis's data model over ferry's versioned objects.
//!
//! A key's value (a string, hash, list, set or sorted set, with its expiry) is encoded in
//! the bytes of one object ([`value`]), so OCC, the write-ahead log, snapshots,
//! replication and slot moves carry it as they carry any object. A data command is a pure
//! function of the keys it names: the caller loads them (one multi-get, wherever the
//! command runs), [`exec::run`] reads and changes them as [`Keys`], and
//! [`Keys::writes`] gives the writes its transaction commits. The time and a random seed
//! come from the caller, so the simulator and the tests drive the same code.
//!
//! Layout: [`value`] and [`codec`] (the encoding), [`zset`] (the sorted set), [`keys`]
//! (the loaded keys, types and expiry), [`args`] (Redis's argument rules and errors),
//! [`cmd`] (the commands, a file per type; patterns are `ferry_resp::glob`), [`exec`]
//! (name to implementation), [`database`] (KEYS, SCAN, DBSIZE, RANDOMKEY over a whole database).
//!
//! What this encoding costs: a command decodes and re-encodes its whole value, so a
//! command on a collection of n elements costs O(n), and a collection is bounded by the
//! store's value limit.

pub mod args;
pub mod cmd;
pub mod codec;
pub mod database;
pub mod exec;
pub mod keys;
pub mod value;
pub mod zset;

pub use exec::{handler, run};
pub use keys::{KeyWrite, Keys};
pub use value::{Entry, Value};
