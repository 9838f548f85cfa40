//! Frame header and the sans-I/O frame splitter.
//!
//! Every frame is a fixed [`HEADER_LEN`]-byte little-endian header followed by `body_len`
//! bytes of body. The header alone says how long the frame is, so a reader never needs to
//! understand a body to find the next frame, and it can reject an oversized frame before
//! buffering a single byte of it.

use crate::tenant::TenantId;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use thiserror::Error;

/// First two bytes of every frame: catches a peer that is not speaking ferry at all.
pub const MAGIC: [u8; 2] = *b"FY";

/// Protocol version carried in every header; a frame with another version is refused.
pub const PROTOCOL_VERSION: u8 = 1;

/// Size of the fixed header in bytes.
pub const HEADER_LEN: usize = 40;

/// Largest body a frame may carry. Bounds the memory one frame can make a peer buffer:
/// large enough for a commit or multiget carrying several maximum-size (1 MiB) values,
/// small enough that a hostile length field cannot make the node allocate gigabytes.
pub const MAX_BODY_BYTES: u32 = 16 * 1024 * 1024;

/// Header flag: this frame is a response (clear on requests).
const FLAG_RESPONSE: u8 = 1;

/// Header flag, responses only: the body carries a costs record
/// ([`crate::InvokeCosts`]) after the invocation's result. Sent only in answer to an
/// `invoke` that asked for it, so a peer that does not know the flag never sees it.
const FLAG_COSTS: u8 = 2;

/// What operation a frame is about. Responses echo the opcode of their request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Opcode {
    /// Authenticate the connection as one tenant; must come first.
    Hello = 1,
    /// Read one object (optionally validating an OCC read set atomically with the read).
    Get = 2,
    /// Write one object, creating the table if needed.
    Put = 3,
    /// Remove one object.
    Delete = 4,
    /// Read several objects of one table in one round trip.
    MultiGet = 5,
    /// Run a storage function on the storage node (ship compute).
    Invoke = 6,
    /// Validate a read set and install a write set atomically (OCC, for local execution).
    Commit = 7,
    /// Counters of the storage node, for operators and benchmarks.
    Stats = 8,
    /// List tables' keys at the reader's snapshot (KEYS, SCAN, FLUSHDB in a function run
    /// on the app side).
    List = 9,
    /// The node's INFO text for the tenant (INFO in a function run on the app side).
    Info = 10,
    /// Run a read-only data command on one key at the reader's snapshot and answer its
    /// reply, not the key's value (HGET of a large hash: the field, not the hash).
    ReadPart = 11,
}

impl Opcode {
    /// Every opcode, in wire order.
    pub const ALL: [Opcode; 11] = [
        Opcode::Hello,
        Opcode::Get,
        Opcode::Put,
        Opcode::Delete,
        Opcode::MultiGet,
        Opcode::Invoke,
        Opcode::Commit,
        Opcode::Stats,
        Opcode::List,
        Opcode::Info,
        Opcode::ReadPart,
    ];

    /// Parses a wire opcode; `None` for values this version does not know.
    pub fn from_u8(value: u8) -> Option<Opcode> {
        Opcode::ALL.into_iter().find(|opcode| *opcode as u8 == value)
    }

    /// Lower-case name used in logs, stats and error messages.
    pub fn name(self) -> &'static str {
        match self {
            Opcode::Hello => "hello",
            Opcode::Get => "get",
            Opcode::Put => "put",
            Opcode::Delete => "delete",
            Opcode::MultiGet => "multiget",
            Opcode::Invoke => "invoke",
            Opcode::Commit => "commit",
            Opcode::Stats => "stats",
            Opcode::List => "list",
            Opcode::Info => "info",
            Opcode::ReadPart => "read_part",
        }
    }
}

/// Outcome of a request, carried in every response header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Status {
    /// The request succeeded; the body holds the result.
    Ok = 0,
    /// The key (or table) does not exist.
    NotFound = 1,
    /// The request was malformed or violated the protocol (e.g. unknown opcode).
    BadRequest = 2,
    /// Wrong token, unknown tenant, a request before hello, or another tenant's data.
    Unauthorized = 3,
    /// A key, value, batch or quota limit was exceeded.
    TooLarge = 4,
    /// No storage function is registered under that name.
    UnknownFunction = 5,
    /// The storage function returned an error, panicked or ran past its budget.
    FunctionFailed = 6,
    /// The storage node's queues are full; retry later.
    Overloaded = 7,
    /// OCC validation failed: something the transaction read has changed.
    TxAbort = 8,
    /// The storage node handed an invocation back to the client (ASFP); reserved.
    Pushback = 9,
    /// The key belongs to another node of the cluster; the message is
    /// `moved SLOT NODE_ID HOST:PORT`.
    Moved = 10,
    /// The request's keys live on different nodes of the cluster.
    CrossSlot = 11,
    /// A gateway or compute node could not reach the node the request needed; nothing
    /// was applied.
    Unavailable = 12,
    /// A gateway or compute node lost the answer to a write or invocation it forwarded:
    /// it may have been applied (and may still be). Never retried blindly.
    OutcomeUnknown = 13,
}

impl Status {
    /// Every status, in wire order.
    pub const ALL: [Status; 14] = [
        Status::Ok,
        Status::NotFound,
        Status::BadRequest,
        Status::Unauthorized,
        Status::TooLarge,
        Status::UnknownFunction,
        Status::FunctionFailed,
        Status::Overloaded,
        Status::TxAbort,
        Status::Pushback,
        Status::Moved,
        Status::CrossSlot,
        Status::Unavailable,
        Status::OutcomeUnknown,
    ];

    /// Parses a wire status; `None` for values this version does not know.
    pub fn from_u8(value: u8) -> Option<Status> {
        Status::ALL.into_iter().find(|status| *status as u8 == value)
    }

    /// Lower-case name as written in docs/PROTOCOL.md.
    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::NotFound => "not_found",
            Status::BadRequest => "bad_request",
            Status::Unauthorized => "unauthorized",
            Status::TooLarge => "too_large",
            Status::UnknownFunction => "unknown_function",
            Status::FunctionFailed => "function_failed",
            Status::Overloaded => "overloaded",
            Status::TxAbort => "tx_abort",
            Status::Pushback => "pushback",
            Status::Moved => "moved",
            Status::CrossSlot => "cross_slot",
            Status::Unavailable => "unavailable",
            Status::OutcomeUnknown => "outcome_unknown",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether a frame asks or answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameKind {
    /// Sent by a client.
    Request,
    /// Sent by the storage node, echoing the request's id and opcode.
    Response,
}

/// The fixed header of every frame (see docs/PROTOCOL.md for the byte layout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Operation; responses echo their request's opcode.
    pub opcode: Opcode,
    /// Request or response.
    pub kind: FrameKind,
    /// Outcome (responses only; `Ok` on requests).
    pub status: Status,
    /// Tenant the request acts for; must match the tenant the connection said hello as.
    pub tenant: TenantId,
    /// Chosen by the client, echoed by the node: lets many requests share a connection
    /// and be answered out of order.
    pub request_id: u64,
    /// Length of the body that follows the header.
    pub body_len: u32,
    /// Storage-node CPU time the request cost, in nanoseconds (responses only).
    pub cpu_ns: u64,
    /// Object bytes the storage node returned for the request (responses only): what the
    /// request moved over the network on top of framing.
    pub bytes_returned: u32,
    /// Responses only: the body carries a costs record after the invocation's result.
    pub carries_costs: bool,
    /// Responses from a gateway: the tenant's admission rate R in requests per second,
    /// at least 1 (0 from every other process), so a client can admit at the gateway's
    /// rate without asking for it. The field was reserved (sent as 0, never read) before.
    pub admission_rate_ops: u32,
}

impl Header {
    /// Header of a request frame.
    pub fn request(opcode: Opcode, tenant: TenantId, request_id: u64, body_len: u32) -> Header {
        Header {
            opcode,
            kind: FrameKind::Request,
            status: Status::Ok,
            tenant,
            request_id,
            body_len,
            cpu_ns: 0,
            bytes_returned: 0,
            carries_costs: false,
            admission_rate_ops: 0,
        }
    }

    /// Writes the header's [`HEADER_LEN`] bytes.
    pub fn encode(&self, out: &mut BytesMut) {
        out.reserve(HEADER_LEN);
        out.put_slice(&MAGIC);
        out.put_u8(PROTOCOL_VERSION);
        out.put_u8(self.opcode as u8);
        let costs = if self.carries_costs { FLAG_COSTS } else { 0 };
        out.put_u8(match self.kind {
            FrameKind::Request => 0,
            FrameKind::Response => FLAG_RESPONSE | costs,
        });
        out.put_u8(self.status as u8);
        out.put_u16_le(0); // reserved
        out.put_u32_le(self.tenant.0);
        out.put_u64_le(self.request_id);
        out.put_u32_le(self.body_len);
        out.put_u64_le(self.cpu_ns);
        out.put_u32_le(self.bytes_returned);
        out.put_u32_le(self.admission_rate_ops);
    }

    /// The tenant named by the header at the start of `bytes` (a connection's first
    /// bytes, peeked to place it), if they hold a well-formed one.
    pub fn peek_tenant(bytes: &[u8]) -> Option<TenantId> {
        let header = bytes.get(..HEADER_LEN)?;
        Header::decode_raw(header).ok().map(|raw| raw.tenant)
    }

    /// Parses a header from exactly [`HEADER_LEN`] bytes.
    ///
    /// An unknown opcode is not fatal for the connection (the length is still known, so the
    /// frame can be skipped and answered with `bad_request`); it is reported through
    /// [`RawHeader::opcode`] being `Err` by [`FrameDecoder`].
    fn decode_raw(bytes: &[u8]) -> Result<RawHeader, FrameError> {
        debug_assert_eq!(bytes.len(), HEADER_LEN);
        let mut buf = bytes;
        let magic = [buf.get_u8(), buf.get_u8()];
        if magic != MAGIC {
            return Err(FrameError::BadMagic);
        }
        let version = buf.get_u8();
        if version != PROTOCOL_VERSION {
            return Err(FrameError::UnsupportedVersion(version));
        }
        let opcode_raw = buf.get_u8();
        let flags = buf.get_u8();
        let status_raw = buf.get_u8();
        let _reserved = buf.get_u16_le();
        let tenant = TenantId(buf.get_u32_le());
        let request_id = buf.get_u64_le();
        let body_len = buf.get_u32_le();
        let cpu_ns = buf.get_u64_le();
        let bytes_returned = buf.get_u32_le();
        let admission_rate_ops = buf.get_u32_le();
        if body_len > MAX_BODY_BYTES {
            return Err(FrameError::BodyTooLarge { request_id, body_len });
        }
        // The costs flag exists on responses only.
        let known = if flags & FLAG_RESPONSE != 0 {
            FLAG_RESPONSE | FLAG_COSTS
        } else {
            0
        };
        if flags & !known != 0 {
            return Err(FrameError::BadFlags(flags));
        }
        let kind = if flags & FLAG_RESPONSE != 0 {
            FrameKind::Response
        } else {
            FrameKind::Request
        };
        let status = Status::from_u8(status_raw).ok_or(FrameError::BadStatus(status_raw))?;
        Ok(RawHeader {
            opcode: Opcode::from_u8(opcode_raw).ok_or(opcode_raw),
            kind,
            status,
            tenant,
            request_id,
            body_len,
            cpu_ns,
            bytes_returned,
            carries_costs: flags & FLAG_COSTS != 0,
            admission_rate_ops,
        })
    }
}

/// A header whose opcode may be unknown to this version.
struct RawHeader {
    opcode: Result<Opcode, u8>,
    kind: FrameKind,
    status: Status,
    tenant: TenantId,
    request_id: u64,
    body_len: u32,
    cpu_ns: u64,
    bytes_returned: u32,
    carries_costs: bool,
    admission_rate_ops: u32,
}

/// Framing is broken: the connection cannot be resynchronised and must be closed.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// The first two bytes are not [`MAGIC`].
    #[error("bad magic: not a ferry frame")]
    BadMagic,
    /// The peer speaks another protocol version.
    #[error("unsupported protocol version {0} (this build speaks {PROTOCOL_VERSION})")]
    UnsupportedVersion(u8),
    /// The length field exceeds [`MAX_BODY_BYTES`].
    #[error("frame body of {body_len} bytes exceeds the {MAX_BODY_BYTES}-byte limit")]
    BodyTooLarge {
        /// Id of the offending request, so the node can answer `too_large` before closing.
        request_id: u64,
        /// The length the header claimed.
        body_len: u32,
    },
    /// Unknown bits in the flags byte.
    #[error("unknown header flags {0:#04x}")]
    BadFlags(u8),
    /// Unknown status value.
    #[error("unknown status {0}")]
    BadStatus(u8),
}

/// One whole frame taken off the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The parsed header.
    pub header: Header,
    /// The body, exactly `header.body_len` bytes.
    pub body: Bytes,
}

/// A frame whose opcode this version does not know: the connection survives (the length
/// is known), and the node answers `bad_request`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownOpcode {
    /// The opcode byte received.
    pub opcode: u8,
    /// Tenant field of the frame.
    pub tenant: TenantId,
    /// Id to answer to.
    pub request_id: u64,
    /// Status of the frame (meaningful on responses: the node answers an unknown opcode
    /// with `bad_request`, echoing the opcode).
    pub status: Status,
}

/// Result of taking one frame off the buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decoded {
    /// A complete frame.
    Frame(Frame),
    /// A complete frame with an opcode this version does not know (already skipped).
    UnknownOpcode(UnknownOpcode),
}

/// Splits a byte stream into frames without doing I/O: the caller appends whatever it read
/// to a `BytesMut` and calls [`FrameDecoder::decode`] until it returns `Ok(None)`.
#[derive(Debug, Default)]
pub struct FrameDecoder {
    /// Header of a frame whose body has not fully arrived yet (parsed once, not per call).
    pending: Option<RawHeader>,
}

impl std::fmt::Debug for RawHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawHeader")
            .field("opcode", &self.opcode)
            .field("request_id", &self.request_id)
            .field("body_len", &self.body_len)
            .finish()
    }
}

impl FrameDecoder {
    /// A decoder at a frame boundary.
    pub fn new() -> FrameDecoder {
        FrameDecoder::default()
    }

    /// Takes the next whole frame off the front of `buf`.
    ///
    /// Returns `Ok(None)` when more bytes are needed, and `Err` when framing is broken
    /// (the caller must close the connection: there is no way to find the next frame).
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Decoded>, FrameError> {
        let raw = match self.pending.take() {
            Some(raw) => raw,
            None => {
                if buf.len() < HEADER_LEN {
                    return Ok(None);
                }
                let raw = Header::decode_raw(&buf[..HEADER_LEN])?;
                buf.advance(HEADER_LEN);
                raw
            }
        };
        let body_len = raw.body_len as usize;
        if buf.len() < body_len {
            // Reserve room for the rest of this frame so the next read can complete it
            // without repeated reallocation; bounded by MAX_BODY_BYTES.
            buf.reserve(body_len - buf.len());
            self.pending = Some(raw);
            return Ok(None);
        }
        let body = buf.split_to(body_len).freeze();
        Ok(Some(match raw.opcode {
            Ok(opcode) => Decoded::Frame(Frame {
                header: Header {
                    opcode,
                    kind: raw.kind,
                    status: raw.status,
                    tenant: raw.tenant,
                    request_id: raw.request_id,
                    body_len: raw.body_len,
                    cpu_ns: raw.cpu_ns,
                    bytes_returned: raw.bytes_returned,
                    carries_costs: raw.carries_costs,
                    admission_rate_ops: raw.admission_rate_ops,
                },
                body,
            }),
            Err(opcode) => Decoded::UnknownOpcode(UnknownOpcode {
                opcode,
                tenant: raw.tenant,
                request_id: raw.request_id,
                status: raw.status,
            }),
        }))
    }

    /// True when the decoder sits in the middle of a frame (a disconnect now truncates it).
    pub fn is_mid_frame(&self, buf: &BytesMut) -> bool {
        self.pending.is_some() || !buf.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_header() -> Header {
        Header {
            opcode: Opcode::Invoke,
            kind: FrameKind::Response,
            status: Status::TxAbort,
            tenant: TenantId(7),
            request_id: 0xDEAD_BEEF_0000_0001,
            body_len: 3,
            cpu_ns: 12_345,
            bytes_returned: 99,
            carries_costs: true,
            admission_rate_ops: 4_321,
        }
    }

    #[test]
    fn header_round_trips_and_is_fixed_size() {
        let header = sample_header();
        let mut buf = BytesMut::new();
        header.encode(&mut buf);
        assert_eq!(buf.len(), HEADER_LEN);
        buf.extend_from_slice(b"abc");
        let mut decoder = FrameDecoder::new();
        let decoded = decoder.decode(&mut buf).unwrap().unwrap();
        assert_eq!(
            decoded,
            Decoded::Frame(Frame {
                header,
                body: Bytes::from_static(b"abc")
            })
        );
        assert!(buf.is_empty());
    }

    #[test]
    fn decoder_waits_for_partial_frames_byte_by_byte() {
        let header = sample_header();
        let mut wire = BytesMut::new();
        header.encode(&mut wire);
        wire.extend_from_slice(b"xyz");
        let mut decoder = FrameDecoder::new();
        let mut buf = BytesMut::new();
        let mut frames = 0;
        for byte in wire.iter() {
            buf.extend_from_slice(&[*byte]);
            if let Some(Decoded::Frame(frame)) = decoder.decode(&mut buf).unwrap() {
                assert_eq!(&frame.body[..], b"xyz");
                frames += 1;
            }
        }
        assert_eq!(frames, 1);
    }

    #[test]
    fn oversized_length_is_rejected_before_buffering() {
        let mut header = sample_header();
        header.body_len = MAX_BODY_BYTES + 1;
        let mut buf = BytesMut::new();
        header.encode(&mut buf);
        let err = FrameDecoder::new().decode(&mut buf).unwrap_err();
        assert_eq!(
            err,
            FrameError::BodyTooLarge {
                request_id: header.request_id,
                body_len: MAX_BODY_BYTES + 1
            }
        );
    }

    #[test]
    fn unknown_opcode_is_skipped_not_fatal() {
        let mut buf = BytesMut::new();
        sample_header().encode(&mut buf);
        buf[3] = 200; // opcode byte
        buf.extend_from_slice(b"abc");
        let mut decoder = FrameDecoder::new();
        match decoder.decode(&mut buf).unwrap().unwrap() {
            Decoded::UnknownOpcode(unknown) => {
                assert_eq!(unknown.opcode, 200);
                assert_eq!(unknown.request_id, sample_header().request_id);
            }
            other => panic!("expected unknown opcode, got {other:?}"),
        }
        assert!(buf.is_empty(), "the unknown frame's body must be skipped");
    }

    #[test]
    fn the_costs_flag_is_a_response_flag_only() {
        // A request frame with the costs flag breaks framing like any unknown flag: only
        // answers carry a costs record.
        let mut header = sample_header();
        header.kind = FrameKind::Request;
        let mut buf = BytesMut::new();
        header.encode(&mut buf);
        assert_eq!(buf[4], 0, "a request header encodes no flags");
        buf[4] = FLAG_COSTS;
        buf.extend_from_slice(b"abc");
        assert_eq!(
            FrameDecoder::new().decode(&mut buf).unwrap_err(),
            FrameError::BadFlags(FLAG_COSTS)
        );
        // Flags beyond the two known ones are refused on responses too.
        let mut buf = BytesMut::new();
        sample_header().encode(&mut buf);
        buf[4] |= 4;
        assert!(matches!(
            FrameDecoder::new().decode(&mut buf),
            Err(FrameError::BadFlags(_))
        ));
    }

    #[test]
    fn the_rate_sits_where_the_reserved_field_was() {
        // An older peer sent 0 at offset 36 and never read it: the gateway's R goes there.
        let mut buf = BytesMut::new();
        sample_header().encode(&mut buf);
        assert_eq!(&buf[36..40], &4_321u32.to_le_bytes());
    }

    #[test]
    fn bad_magic_and_version_are_fatal() {
        let mut buf = BytesMut::new();
        sample_header().encode(&mut buf);
        buf[0] = b'X';
        assert_eq!(FrameDecoder::new().decode(&mut buf).unwrap_err(), FrameError::BadMagic);
        let mut buf = BytesMut::new();
        sample_header().encode(&mut buf);
        buf[2] = 9;
        assert_eq!(
            FrameDecoder::new().decode(&mut buf).unwrap_err(),
            FrameError::UnsupportedVersion(9)
        );
    }
}
