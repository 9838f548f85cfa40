//! Argument decoding for storage functions: the protocol's bounded little-endian reader,
//! with its errors mapped to [`FnError::BadArgs`].

use bytes::Bytes;
pub use ferry_proto::wire::Reader;

use crate::registry::FnError;

impl From<ferry_proto::DecodeError> for FnError {
    fn from(err: ferry_proto::DecodeError) -> FnError {
        FnError::BadArgs(err.to_string())
    }
}

/// A reader over an invocation's arguments.
pub fn reader(args: &Bytes) -> Reader {
    Reader::new(args.clone())
}

/// Reads a little-endian `u64` out of the first 8 bytes of a stored value.
pub fn value_u64(value: &[u8], what: &str) -> Result<u64, FnError> {
    value
        .get(..8)
        .map(|head| u64::from_le_bytes(head.try_into().expect("slice of 8 bytes")))
        .ok_or_else(|| FnError::Failed(format!("{what} is shorter than 8 bytes")))
}

/// A deterministic 64-bit mix (splitmix64 finaliser): data sets derive every pseudo-random
/// choice from it so they are identical on every run and machine.
pub fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A value of `len` bytes (at least 8) starting with `head` and padded deterministically.
pub fn padded_value(head: u64, len: usize, seed: u64) -> Bytes {
    let len = len.max(8);
    let mut value = Vec::with_capacity(len);
    value.extend_from_slice(&head.to_le_bytes());
    let mut state = seed;
    while value.len() < len {
        state = mix64(state);
        let take = (len - value.len()).min(8);
        value.extend_from_slice(&state.to_le_bytes()[..take]);
    }
    Bytes::from(value)
}
