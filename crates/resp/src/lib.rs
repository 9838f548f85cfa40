//! The Redis serialization protocol as values, for ferry's RESP front end:
//!
//! - [`command`]: a command as a typed value, arity and options checked ([`blocking`]: the
//!   blocking pops as the step each repeats);
//! - [`config`]: CONFIG GET/SET over the parameters ferry reports;
//! - [`glob`]: Redis's glob-style patterns (KEYS, SCAN MATCH, CONFIG GET, FUNCTION LIST);
//! - [`info`]: INFO's sections by name, and its server section;
//! - [`parser`]: commands from clients (arrays of bulk strings, or inline), parsed
//!   incrementally with every size bounded;
//! - [`reply`]: replies, encoded as RESP2, RESP3 or ferry's lossless form; [`decode`]: a
//!   reply decoded from its bytes, whole or from the front of a stream;
//! - [`table`]: the one table of commands (arity, flags, key positions) that drives
//!   parsing, COMMAND, cluster key extraction and what scripts may call.
//!
//! No I/O: the listener feeds bytes in and writes bytes out.

pub mod blocking;
pub mod command;
pub mod config;
pub mod decode;
pub mod glob;
pub mod info;
pub mod parser;
pub mod reply;
pub mod table;

pub use command::Command;
pub use decode::DecodeError;
pub use parser::{ParseError, Parser};
pub use reply::{Protocol, Reply};
