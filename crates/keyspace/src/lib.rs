//! Redis's data commands over ferry's versioned keys.
//!
//! A key's value (a string, hash, list, set or sorted set, with its expiry) is a
//! `ferry_value::Entry`. A data command is a function of the keys it names, at a time and
//! seed the caller gives: the caller hands it the keys as [`Slot`]s (the storage node its
//! stored entries, under their shards' locks; a transaction over `Ctx` the entries it
//! read), [`exec::run`] reads them in place and changes them only through
//! `ferry_value::Change`s, and the caller commits the changes (logging them, not the
//! values) or takes them back. A command that errs changes nothing. The simulator and the
//! tests drive the same code.
//!
//! Layout: [`keys`] (the keys of one command: types, expiry, changes), [`args`] (Redis's
//! argument rules and errors), [`cmd`] (the commands, a file per type; patterns are
//! `ferry_resp::glob`), [`exec`] (name to implementation), [`database`] (KEYS, SCAN,
//! DBSIZE, RANDOMKEY over a whole database).

pub mod args;
pub mod cmd;
pub mod database;
pub mod exec;
pub mod keys;

pub use exec::{handler, run};
pub use ferry_value::{Entry, Value};
pub use keys::{Keys, Slot};
