//! The byte-level pieces of a value's encoding: LEB128 lengths and length-prefixed
//! strings, read with every length checked against what is left (a stored value is
//! trusted no more than a network message: a torn snapshot must not panic a node).

use bytes::{BufMut, Bytes};

/// A stored value that does not decode: its bytes are not what this crate wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Corrupt;

/// Appends `n` as LEB128.
pub fn put_len(out: &mut impl BufMut, mut n: usize) {
    while n >= 0x80 {
        out.put_u8((n as u8) | 0x80);
        n >>= 7;
    }
    out.put_u8(n as u8);
}

/// Appends `bytes`, prefixed by its length.
pub fn put_bytes(out: &mut impl BufMut, bytes: &[u8]) {
    put_len(out, bytes.len());
    out.put_slice(bytes);
}

/// The bytes an encoding of `bytes` with [`put_bytes`] takes.
pub fn bytes_len(bytes: &[u8]) -> usize {
    len_len(bytes.len()) + bytes.len()
}

/// The bytes `n` takes as LEB128.
pub fn len_len(mut n: usize) -> usize {
    let mut bytes = 1;
    while n >= 0x80 {
        n >>= 7;
        bytes += 1;
    }
    bytes
}

/// Reads what [`put_len`] and [`put_bytes`] wrote, slicing (not copying) the source.
pub struct Reader {
    source: Bytes,
    at: usize,
}

impl Reader {
    /// A reader of `source` from `at`.
    pub fn new(source: Bytes, at: usize) -> Reader {
        Reader { source, at }
    }

    /// Whether everything was read.
    pub fn is_done(&self) -> bool {
        self.at == self.source.len()
    }

    /// A LEB128 length.
    pub fn length(&mut self) -> Result<usize, Corrupt> {
        let mut n: usize = 0;
        for shift in (0..64).step_by(7) {
            let byte = *self.source.get(self.at).ok_or(Corrupt)?;
            self.at += 1;
            n |= usize::from(byte & 0x7f).checked_shl(shift).ok_or(Corrupt)?;
            if byte & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(Corrupt)
    }

    /// A count of items, each at least `min_item_bytes` long: bounded by what is left, so
    /// a corrupt count cannot make the decoder reserve memory it will never fill.
    pub fn count(&mut self, min_item_bytes: usize) -> Result<usize, Corrupt> {
        let count = self.length()?;
        let left = self.source.len() - self.at;
        if count.saturating_mul(min_item_bytes.max(1)) > left {
            return Err(Corrupt);
        }
        Ok(count)
    }

    /// A length-prefixed string.
    pub fn bytes(&mut self) -> Result<Bytes, Corrupt> {
        let len = self.length()?;
        let end = self
            .at
            .checked_add(len)
            .filter(|&end| end <= self.source.len())
            .ok_or(Corrupt)?;
        let bytes = self.source.slice(self.at..end);
        self.at = end;
        Ok(bytes)
    }

    /// Eight bytes, little-endian.
    pub fn u64(&mut self) -> Result<u64, Corrupt> {
        let end = self.at + 8;
        let word = self.source.get(self.at..end).ok_or(Corrupt)?;
        self.at = end;
        Ok(u64::from_le_bytes(word.try_into().map_err(|_| Corrupt)?))
    }

    /// One byte.
    pub fn u8(&mut self) -> Result<u8, Corrupt> {
        let byte = *self.source.get(self.at).ok_or(Corrupt)?;
        self.at += 1;
        Ok(byte)
    }

    /// An IEEE-754 double, eight bytes little-endian; NaN is corrupt (no score is NaN).
    pub fn f64(&mut self) -> Result<f64, Corrupt> {
        let value = f64::from_bits(self.u64()?);
        if value.is_nan() {
            return Err(Corrupt);
        }
        Ok(value)
    }

    /// The first byte of the rest, if any.
    pub fn rest_starts_with(&self) -> Option<u8> {
        self.source.get(self.at).copied()
    }

    /// The rest of the source.
    pub fn rest(&mut self) -> Bytes {
        let rest = self.source.slice(self.at..);
        self.at = self.source.len();
        rest
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn lengths_and_strings_read_back(lens in proptest::collection::vec(0usize..1 << 40, 0..8), text in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut out = BytesMut::new();
            for &n in &lens {
                put_len(&mut out, n);
                prop_assert!(len_len(n) >= 1);
            }
            put_bytes(&mut out, &text);
            let mut reader = Reader::new(out.freeze(), 0);
            for &n in &lens {
                prop_assert_eq!(reader.length().unwrap(), n);
            }
            prop_assert_eq!(&reader.bytes().unwrap()[..], &text[..]);
            prop_assert!(reader.is_done());
        }

        #[test]
        fn garbage_never_panics(garbage in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut reader = Reader::new(Bytes::from(garbage), 0);
            let _ = reader.count(1);
            let _ = reader.bytes();
            let _ = reader.u64();
        }
    }

    #[test]
    fn a_count_larger_than_the_rest_is_corrupt() {
        let mut out = BytesMut::new();
        put_len(&mut out, 1000);
        out.put_slice(b"ab");
        assert_eq!(Reader::new(out.freeze(), 0).count(1), Err(Corrupt));
    }
}
