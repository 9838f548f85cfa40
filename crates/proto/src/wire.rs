//! Bounded primitive readers and writers for frame bodies.
//!
//! All integers are little-endian. Byte strings carry a length prefix: `u16` for names and
//! keys (which are small by contract), `u32` for values, arguments and results. Reading never
//! trusts a length beyond the bytes actually present, so a lying prefix is an error, not an
//! allocation.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::message::DecodeError;

/// Cursor over a frame body that hands out zero-copy slices of it.
pub struct Reader {
    body: Bytes,
}

impl Reader {
    /// Starts reading at the beginning of `body`.
    pub fn new(body: Bytes) -> Reader {
        Reader { body }
    }

    fn need(&self, len: usize, what: &'static str) -> Result<(), DecodeError> {
        if self.body.remaining() < len {
            Err(DecodeError::Truncated(what))
        } else {
            Ok(())
        }
    }

    /// Reads one byte.
    pub fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        self.need(1, what)?;
        Ok(self.body.get_u8())
    }

    /// Reads a little-endian `u16`.
    pub fn u16(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        self.need(2, what)?;
        Ok(self.body.get_u16_le())
    }

    /// Reads a little-endian `u32`.
    pub fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        self.need(4, what)?;
        Ok(self.body.get_u32_le())
    }

    /// Reads a little-endian `u64`.
    pub fn u64(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        self.need(8, what)?;
        Ok(self.body.get_u64_le())
    }

    fn take(&mut self, len: usize, what: &'static str) -> Result<Bytes, DecodeError> {
        self.need(len, what)?;
        Ok(self.body.split_to(len))
    }

    /// Reads a `u16`-length-prefixed byte string.
    pub fn bytes16(&mut self, what: &'static str) -> Result<Bytes, DecodeError> {
        let len = self.u16(what)? as usize;
        self.take(len, what)
    }

    /// Reads a `u32`-length-prefixed byte string.
    pub fn bytes32(&mut self, what: &'static str) -> Result<Bytes, DecodeError> {
        let len = self.u32(what)? as usize;
        self.take(len, what)
    }

    /// Reads a `u16`-length-prefixed UTF-8 string.
    pub fn string16(&mut self, what: &'static str) -> Result<String, DecodeError> {
        let raw = self.bytes16(what)?;
        String::from_utf8(raw.to_vec()).map_err(|_| DecodeError::InvalidUtf8(what))
    }

    /// Reads an item count and checks it against `max` before anything is allocated.
    pub fn count(&mut self, max: usize, what: &'static str) -> Result<usize, DecodeError> {
        let count = self.u32(what)? as usize;
        if count > max {
            return Err(DecodeError::TooManyItems { what, count, max });
        }
        Ok(count)
    }

    /// Whether any bytes are left (for a body that ends in an optional part).
    pub fn has_remaining(&self) -> bool {
        self.body.has_remaining()
    }

    /// Ends decoding: leftover bytes mean the peer and this build disagree on the layout.
    pub fn finish(self) -> Result<(), DecodeError> {
        if self.body.has_remaining() {
            Err(DecodeError::TrailingBytes(self.body.remaining()))
        } else {
            Ok(())
        }
    }
}

/// A field too long for its length prefix; only a caller bug or unchecked user input
/// produces it, and it is reported instead of being silently truncated.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error("{what} of {len} bytes does not fit its {max}-byte length prefix")]
pub struct EncodeError {
    /// Which field.
    pub what: &'static str,
    /// Its length.
    pub len: usize,
    /// The prefix's maximum.
    pub max: usize,
}

/// Writes a `u16`-length-prefixed byte string.
pub fn put_bytes16(out: &mut BytesMut, bytes: &[u8], what: &'static str) -> Result<(), EncodeError> {
    let len = u16::try_from(bytes.len()).map_err(|_| EncodeError {
        what,
        len: bytes.len(),
        max: u16::MAX as usize,
    })?;
    out.put_u16_le(len);
    out.put_slice(bytes);
    Ok(())
}

/// Writes a `u32`-length-prefixed byte string.
pub fn put_bytes32(out: &mut BytesMut, bytes: &[u8], what: &'static str) -> Result<(), EncodeError> {
    let len = u32::try_from(bytes.len()).map_err(|_| EncodeError {
        what,
        len: bytes.len(),
        max: u32::MAX as usize,
    })?;
    out.put_u32_le(len);
    out.put_slice(bytes);
    Ok(())
}

/// Writes an item count.
pub fn put_count(out: &mut BytesMut, count: usize, what: &'static str) -> Result<(), EncodeError> {
    let count = u32::try_from(count).map_err(|_| EncodeError {
        what,
        len: count,
        max: u32::MAX as usize,
    })?;
    out.put_u32_le(count);
    Ok(())
}
