//! What requests and responses share (docs/PROTOCOL.md §Bodies): their limits, the decode
//! error, the parts both carry (read versions, snapshots, writes) and the helpers that
//! encode and read those parts. The messages themselves are in [`crate::request`] and
//! [`crate::response`].

use bytes::{BufMut, Bytes, BytesMut};
use thiserror::Error;

use crate::frame::{FrameKind, Header, HEADER_LEN};
use crate::wire::{put_bytes16, put_bytes32, put_count, EncodeError, Reader};

/// Most keys one multiget may name: bounds the work and the response size of one request.
pub const MAX_MULTIGET_KEYS: usize = 1024;

/// Most words of a command `read_part` runs (far more than any read command takes).
pub const MAX_COMMAND_WORDS: usize = 4096;

/// Most entries in a read set or a write set: bounds the locks one commit takes and the
/// memory one transaction can pin on the storage node.
pub const MAX_TX_ITEMS: usize = 4096;

/// Most entries in a stats response.
pub const MAX_STAT_ENTRIES: usize = 4096;

/// Most snapshots one read may carry: one per storage node a local run has read from.
pub const MAX_SNAPSHOTS: usize = 256;

/// A body could not be decoded: the frame itself was intact, so only this request fails
/// (with `bad_request`) and the connection carries on.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The body ended in the middle of a field.
    #[error("body truncated while reading {0}")]
    Truncated(&'static str),
    /// A string field is not UTF-8.
    #[error("{0} is not valid UTF-8")]
    InvalidUtf8(&'static str),
    /// A count exceeds its limit.
    #[error("{count} {what} exceeds the limit of {max}")]
    TooManyItems {
        /// Which list.
        what: &'static str,
        /// Count received.
        count: usize,
        /// Limit.
        max: usize,
    },
    /// Bytes left over after the last field.
    #[error("{0} unexpected trailing bytes in body")]
    TrailingBytes(usize),
    /// The header's costs flag on an answer that cannot carry a costs record (anything
    /// but a successful `invoke`).
    #[error("a costs record on a {0} answer, which cannot carry one")]
    MisplacedCosts(&'static str),
    /// A tag byte has an unknown value.
    #[error("invalid {what} tag {tag}")]
    BadTag {
        /// Which tag.
        what: &'static str,
        /// Value received.
        tag: u8,
    },
    /// A response frame arrived where a request was expected, or vice versa.
    #[error("expected a {expected:?} frame")]
    WrongKind {
        /// What the reader expected.
        expected: FrameKind,
    },
}

/// One entry of an OCC read set: the version of an object as a transaction saw it.
/// Version 0 means "absent".
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReadVersion {
    /// Table of the object.
    pub table: String,
    /// Key of the object.
    pub key: Bytes,
    /// Version seen (0 = the object did not exist).
    pub version: u64,
}

/// A read version of one storage node's tenant clock (TL2): reads at it see the state as of
/// that version, and an object changed after it is answered `tx_abort` ("newer"), never
/// read. `clock` names the clock (each node's tenant store has its own), so a client
/// running a function over several nodes, directly or through a gateway, carries one
/// snapshot per node and each node picks its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Snapshot {
    /// Which clock: a storage node's tenant store's identity.
    pub clock: u64,
    /// The read version.
    pub version: u64,
}

/// The versions one invocation read and installed: what a history checker needs of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InvokeTrace {
    /// Every object it read, with the version seen, in the order first read.
    pub reads: Vec<ReadVersion>,
    /// Every object it wrote, with the version its commit installed.
    pub writes: Vec<ReadVersion>,
}

/// One entry of an OCC write set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitWrite {
    /// Table to write (created if needed).
    pub table: String,
    /// Key to write.
    pub key: Bytes,
    /// New value, or `None` to delete the object.
    pub value: Option<Bytes>,
}

/// Writes a header with a placeholder length, the body, then patches the length: one pass,
/// no intermediate buffer.
pub(crate) fn encode_with_header(
    header: Header,
    out: &mut BytesMut,
    body: impl FnOnce(&mut BytesMut) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    let start = out.len();
    header.encode(out);
    if let Err(err) = body(out) {
        out.truncate(start);
        return Err(err);
    }
    let body_len = out.len() - start - HEADER_LEN;
    let body_len = match u32::try_from(body_len) {
        Ok(len) if len <= crate::frame::MAX_BODY_BYTES => len,
        _ => {
            out.truncate(start);
            return Err(EncodeError {
                what: "frame body",
                len: body_len,
                max: crate::frame::MAX_BODY_BYTES as usize,
            });
        }
    };
    // Offset of `body_len` inside the header (docs/PROTOCOL.md).
    const BODY_LEN_OFFSET: usize = 20;
    out[start + BODY_LEN_OFFSET..start + BODY_LEN_OFFSET + 4].copy_from_slice(&body_len.to_le_bytes());
    Ok(())
}

pub(crate) fn truncate_utf8(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

pub(crate) fn put_read_version(out: &mut BytesMut, read: &ReadVersion) -> Result<(), EncodeError> {
    put_bytes16(out, read.table.as_bytes(), "table")?;
    put_bytes16(out, &read.key, "key")?;
    out.put_u64_le(read.version);
    Ok(())
}

pub(crate) fn read_read_version(r: &mut Reader) -> Result<ReadVersion, DecodeError> {
    Ok(ReadVersion {
        table: r.string16("table")?,
        key: r.bytes16("key")?,
        version: r.u64("version")?,
    })
}

pub(crate) fn put_read_set(out: &mut BytesMut, reads: &[ReadVersion]) -> Result<(), EncodeError> {
    put_count(out, reads.len(), "read set")?;
    for read in reads {
        put_read_version(out, read)?;
    }
    Ok(())
}

pub(crate) fn read_read_set(r: &mut Reader) -> Result<Vec<ReadVersion>, DecodeError> {
    let count = r.count(MAX_TX_ITEMS, "read set entries")?;
    let mut reads = Vec::with_capacity(count);
    for _ in 0..count {
        reads.push(read_read_version(r)?);
    }
    Ok(reads)
}

pub(crate) fn put_snapshot(out: &mut BytesMut, snapshot: &Snapshot) {
    out.put_u64_le(snapshot.clock);
    out.put_u64_le(snapshot.version);
}

pub(crate) fn read_snapshot(r: &mut Reader) -> Result<Snapshot, DecodeError> {
    Ok(Snapshot {
        clock: r.u64("snapshot clock")?,
        version: r.u64("snapshot version")?,
    })
}

pub(crate) fn put_optional_snapshot(out: &mut BytesMut, snapshot: Option<&Snapshot>) {
    match snapshot {
        None => out.put_u8(TAG_ABSENT),
        Some(snapshot) => {
            out.put_u8(TAG_PRESENT);
            put_snapshot(out, snapshot);
        }
    }
}

pub(crate) fn read_optional_snapshot(r: &mut Reader) -> Result<Option<Snapshot>, DecodeError> {
    match r.u8("snapshot tag")? {
        TAG_ABSENT => Ok(None),
        TAG_PRESENT => Ok(Some(read_snapshot(r)?)),
        tag => Err(DecodeError::BadTag { what: "snapshot", tag }),
    }
}

/// Tag of an optional value: absent.
const TAG_ABSENT: u8 = 0;
/// Tag of an optional value: present.
const TAG_PRESENT: u8 = 1;

pub(crate) fn put_optional_value(out: &mut BytesMut, value: Option<&Bytes>) -> Result<(), EncodeError> {
    match value {
        None => {
            out.put_u8(TAG_ABSENT);
            Ok(())
        }
        Some(value) => {
            out.put_u8(TAG_PRESENT);
            put_bytes32(out, value, "value")
        }
    }
}

pub(crate) fn read_optional_value(r: &mut Reader) -> Result<Option<Bytes>, DecodeError> {
    match r.u8("value tag")? {
        TAG_ABSENT => Ok(None),
        TAG_PRESENT => Ok(Some(r.bytes32("value")?)),
        tag => Err(DecodeError::BadTag { what: "value", tag }),
    }
}

pub(crate) fn put_write_set(out: &mut BytesMut, writes: &[CommitWrite]) -> Result<(), EncodeError> {
    put_count(out, writes.len(), "write set")?;
    for write in writes {
        put_bytes16(out, write.table.as_bytes(), "table")?;
        put_bytes16(out, &write.key, "key")?;
        put_optional_value(out, write.value.as_ref())?;
    }
    Ok(())
}

pub(crate) fn read_write_set(r: &mut Reader) -> Result<Vec<CommitWrite>, DecodeError> {
    let count = r.count(MAX_TX_ITEMS, "write set entries")?;
    let mut writes = Vec::with_capacity(count);
    for _ in 0..count {
        writes.push(CommitWrite {
            table: r.string16("table")?,
            key: r.bytes16("key")?,
            value: read_optional_value(r)?,
        });
    }
    Ok(writes)
}
