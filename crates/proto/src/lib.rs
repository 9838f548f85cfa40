//! ferry's wire protocol: frames, opcodes, statuses and their encodings. No I/O.
//!
//! Layout:
//! - [`frame`]: the fixed 40-byte little-endian header and [`frame::FrameDecoder`], a
//!   sans-I/O splitter that turns a byte buffer into whole frames (or a fatal framing error).
//! - [`wire`]: bounded primitive readers/writers (length-prefixed bytes and strings).
//! - [`request`] and [`response`]: the typed messages and their body encodings;
//!   [`message`]: what both share (limits, the decode error, read versions, snapshots,
//!   writes, and the helpers that encode those parts).
//! - [`listing`]: tables' listings (`list`) and the listing read a transaction validates.
//! - [`costs`]: the costs record a compute node or gateway answers an invocation with
//!   (both sides' CPU, round trips, bytes), when asked.
//!
//! The protocol itself is specified in `docs/PROTOCOL.md`; this crate is its only
//! implementation, shared by the storage node, the client runtime and the load generator.

pub mod costs;
pub mod frame;
pub mod listing;
pub mod message;
pub mod request;
pub mod response;
pub mod tenant;
pub mod wire;

pub use costs::{InvokeCosts, INVOKE_COSTS_LEN};
pub use frame::{
    Decoded, Frame, FrameDecoder, FrameError, FrameKind, Header, Opcode, Status, UnknownOpcode, HEADER_LEN, MAGIC,
    MAX_BODY_BYTES, PROTOCOL_VERSION,
};
pub use listing::{ListedKey, LISTING_NEEDS_ONE_NODE, MAX_LISTED_KEYS, MAX_LIST_TABLES, TYPE_NAMES};
pub use message::{
    CommitWrite, DecodeError, InvokeTrace, ReadVersion, Snapshot, MAX_MULTIGET_KEYS, MAX_SNAPSHOTS, MAX_STAT_ENTRIES,
    MAX_TX_ITEMS,
};
pub use request::Request;
pub use response::{
    encode_unknown_opcode_response, HelloInfo, MultiGetEntry, PushbackRead, PushbackState, Response, ResponseBody,
    StatEntry,
};
pub use tenant::TenantId;
pub use wire::EncodeError;
