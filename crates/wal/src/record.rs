//! One log record: a committed write set of one tenant, framed with its length and a
//! checksum so recovery can tell a whole record from a torn or corrupt one.
//!
//! Frame: `payload_len: u32`, `crc32(payload): u32`, payload. Payload: `kind: u8` (1, a
//! commit), `tenant: TenantId`, `version: u64`, `writes: u32`, then per write `table_len: u8`,
//! table, `key_len: u16`, key, `op: u8` (0 delete, 1 put, 2 changes), for a put
//! `value_len: u32`, value, and for changes `base: u64` (the version they apply to),
//! `changes_len: u32`, changes (`ferry_value::change::encode`'s form). Integers are
//! little-endian.

use ferry_proto::TenantId;
use ferry_store::limits::{MAX_KEY_BYTES, MAX_TABLE_NAME_BYTES, MAX_TX_OBJECTS, MAX_VALUE_BYTES};
use ferry_store::{Write, WriteRef};
use thiserror::Error;

/// Bytes before a record's payload: its length and checksum.
pub const FRAME_HEADER_BYTES: usize = 8;

/// Largest record (frame included). A commit bigger than this (thousands of large values
/// in one transaction) is refused rather than logged: recovery reads a record whole.
pub const MAX_RECORD_BYTES: usize = 256 * 1024 * 1024;

const KIND_COMMIT: u8 = 1;
const OP_DELETE: u8 = 0;
const OP_PUT: u8 = 1;
const OP_CHANGES: u8 = 2;
const COMMIT_HEADER_BYTES: usize = 1 + 4 + 8 + 4;

// The field widths hold every size the store accepts.
const _: () = assert!(MAX_TABLE_NAME_BYTES <= u8::MAX as usize);
const _: () = assert!(MAX_KEY_BYTES <= u16::MAX as usize);
const _: () = assert!(MAX_VALUE_BYTES <= u32::MAX as usize);
const _: () = assert!(MAX_RECORD_BYTES <= u32::MAX as usize);

/// A commit read back from the log, borrowing the log's bytes.
#[derive(Debug, PartialEq, Eq)]
pub struct Commit<'a> {
    /// Tenant id.
    pub tenant: TenantId,
    /// Commit version in the tenant's clock.
    pub version: u64,
    /// Each object written once.
    pub writes: Vec<WriteRef<'a>>,
}

/// Bytes the frame of this commit takes.
pub fn frame_len(writes: &[WriteRef<'_>]) -> usize {
    let body: usize = writes
        .iter()
        .map(|w| {
            1 + w.table.len()
                + 2
                + w.key.len()
                + 1
                + match w.write {
                    Write::Put(value) => 4 + value.len(),
                    Write::Delete => 0,
                    Write::Changes { changes, .. } => 8 + 4 + changes.len(),
                }
        })
        .sum();
    FRAME_HEADER_BYTES + COMMIT_HEADER_BYTES + body
}

/// Appends the frame of a commit to `out`. The writes must pass the store's checks (the
/// store checked them before journalling), so every length fits its field.
pub fn encode(out: &mut Vec<u8>, tenant: TenantId, version: u64, writes: &[WriteRef<'_>]) {
    frame(out, |out| encode_commit(out, tenant, version, writes));
}

/// Appends a frame to `out` whose payload `fill` appends: the length and checksum go in
/// front of it. The payload must not exceed [`MAX_RECORD_BYTES`].
pub fn frame(out: &mut Vec<u8>, fill: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend_from_slice(&[0; FRAME_HEADER_BYTES]);
    fill(out);
    let payload_len = (out.len() - start - FRAME_HEADER_BYTES) as u32;
    let crc = crc32fast::hash(&out[start + FRAME_HEADER_BYTES..]);
    out[start..start + 4].copy_from_slice(&payload_len.to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

fn encode_commit(out: &mut Vec<u8>, tenant: TenantId, version: u64, writes: &[WriteRef<'_>]) {
    out.push(KIND_COMMIT);
    out.extend_from_slice(&tenant.0.to_le_bytes());
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&(writes.len() as u32).to_le_bytes());
    for write in writes {
        out.push(write.table.len() as u8);
        out.extend_from_slice(write.table.as_bytes());
        out.extend_from_slice(&(write.key.len() as u16).to_le_bytes());
        out.extend_from_slice(write.key);
        match write.write {
            Write::Delete => out.push(OP_DELETE),
            Write::Put(value) => {
                out.push(OP_PUT);
                out.extend_from_slice(&(value.len() as u32).to_le_bytes());
                out.extend_from_slice(value);
            }
            Write::Changes { base, changes } => {
                out.push(OP_CHANGES);
                out.extend_from_slice(&base.to_le_bytes());
                out.extend_from_slice(&(changes.len() as u32).to_le_bytes());
                out.extend_from_slice(changes);
            }
        }
    }
}

/// Why the bytes at some offset are not a whole, valid record.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum BadRecord {
    /// Fewer bytes than a frame header, or than the header's length.
    #[error("torn record: {have} of {need} bytes")]
    Torn {
        /// Bytes present.
        have: usize,
        /// Bytes the frame needs.
        need: usize,
    },
    /// A length of 0 or above [`MAX_RECORD_BYTES`].
    #[error("impossible record length {0}")]
    BadLength(usize),
    /// The checksum does not match the payload.
    #[error("checksum mismatch")]
    Checksum,
    /// The checksum matches but the payload does not parse, or breaks the store's limits.
    #[error("malformed record: {0}")]
    Malformed(&'static str),
}

/// Reads the frame at the start of `bytes`: the payload and the frame's length, or why
/// there is no whole, valid frame there.
pub fn next_frame(bytes: &[u8]) -> Result<(&[u8], usize), BadRecord> {
    if bytes.len() < FRAME_HEADER_BYTES {
        return Err(BadRecord::Torn {
            have: bytes.len(),
            need: FRAME_HEADER_BYTES,
        });
    }
    let payload_len = u32::from_le_bytes(bytes[0..4].try_into().expect("4 bytes")) as usize;
    if payload_len == 0 || payload_len + FRAME_HEADER_BYTES > MAX_RECORD_BYTES {
        return Err(BadRecord::BadLength(payload_len));
    }
    let need = FRAME_HEADER_BYTES + payload_len;
    if bytes.len() < need {
        return Err(BadRecord::Torn {
            have: bytes.len(),
            need,
        });
    }
    let crc = u32::from_le_bytes(bytes[4..8].try_into().expect("4 bytes"));
    let payload = &bytes[FRAME_HEADER_BYTES..need];
    if crc32fast::hash(payload) != crc {
        return Err(BadRecord::Checksum);
    }
    Ok((payload, need))
}

/// Parses a checked payload.
pub fn decode(payload: &[u8]) -> Result<Commit<'_>, BadRecord> {
    let mut input = Input(payload);
    if input.u8()? != KIND_COMMIT {
        return Err(BadRecord::Malformed("unknown record kind"));
    }
    let tenant = u32::from_le_bytes(input.array()?);
    let version = u64::from_le_bytes(input.array()?);
    let count = u32::from_le_bytes(input.array()?) as usize;
    if count > MAX_TX_OBJECTS {
        return Err(BadRecord::Malformed("more writes than a transaction may make"));
    }
    let mut writes = Vec::with_capacity(count);
    for _ in 0..count {
        let table_len = input.u8()? as usize;
        let table = std::str::from_utf8(input.take(table_len)?).map_err(|_| BadRecord::Malformed("table name"))?;
        let key_len = u16::from_le_bytes(input.array()?) as usize;
        let key = input.take(key_len)?;
        let write = match input.u8()? {
            OP_DELETE => Write::Delete,
            OP_PUT => {
                let value_len = u32::from_le_bytes(input.array()?) as usize;
                Write::Put(input.take(value_len)?)
            }
            OP_CHANGES => {
                let base = u64::from_le_bytes(input.array()?);
                let changes_len = u32::from_le_bytes(input.array()?) as usize;
                Write::Changes {
                    base,
                    changes: input.take(changes_len)?,
                }
            }
            _ => return Err(BadRecord::Malformed("unknown write op")),
        };
        writes.push(WriteRef { table, key, write });
    }
    if !input.0.is_empty() {
        return Err(BadRecord::Malformed("trailing bytes"));
    }
    Ok(Commit {
        tenant: TenantId(tenant),
        version,
        writes,
    })
}

/// A cursor over a payload.
pub(crate) struct Input<'a>(pub(crate) &'a [u8]);

impl<'a> Input<'a> {
    pub(crate) fn take(&mut self, len: usize) -> Result<&'a [u8], BadRecord> {
        if self.0.len() < len {
            return Err(BadRecord::Malformed("field runs past the record"));
        }
        let (head, rest) = self.0.split_at(len);
        self.0 = rest;
        Ok(head)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, BadRecord> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], BadRecord> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn commit_bytes(tenant: TenantId, version: u64, writes: &[WriteRef<'_>]) -> Vec<u8> {
        let mut out = Vec::new();
        encode(&mut out, tenant, version, writes);
        assert_eq!(out.len(), frame_len(writes));
        out
    }

    fn sample() -> Vec<u8> {
        commit_bytes(
            TenantId(3),
            42,
            &[
                WriteRef::put("accounts", b"alice", b"100"),
                WriteRef::delete("accounts", b"bob"),
                WriteRef {
                    table: "lists",
                    key: b"queue",
                    write: Write::Changes {
                        base: 41,
                        changes: b"\x01\x02",
                    },
                },
            ],
        )
    }

    #[test]
    fn a_record_reads_back_as_it_was_written() {
        let bytes = sample();
        let (payload, len) = next_frame(&bytes).unwrap();
        assert_eq!(len, bytes.len());
        let commit = decode(payload).unwrap();
        assert_eq!((commit.tenant.0, commit.version, commit.writes.len()), (3, 42, 3));
        assert_eq!(commit.writes[0].write, Write::Put(b"100"));
        assert_eq!(commit.writes[1].write, Write::Delete);
        assert_eq!(
            commit.writes[2].write,
            Write::Changes {
                base: 41,
                changes: b"\x01\x02"
            }
        );
    }

    #[test]
    fn every_cut_of_a_record_is_torn_never_a_record() {
        let bytes = sample();
        for len in 0..bytes.len() {
            assert!(
                matches!(next_frame(&bytes[..len]), Err(BadRecord::Torn { .. })),
                "cut at {len}"
            );
        }
    }

    #[test]
    fn a_flipped_bit_anywhere_in_the_payload_fails_the_checksum() {
        let bytes = sample();
        for index in FRAME_HEADER_BYTES..bytes.len() {
            let mut corrupt = bytes.clone();
            corrupt[index] ^= 0x10;
            assert_eq!(next_frame(&corrupt), Err(BadRecord::Checksum), "bit flipped at {index}");
        }
    }

    #[test]
    fn zeroes_are_not_a_record() {
        assert_eq!(next_frame(&[0; 64]), Err(BadRecord::BadLength(0)));
    }

    proptest! {
        #[test]
        fn encoded_commits_decode_to_themselves(
            tenant in any::<u32>(),
            version in any::<u64>(),
            writes in proptest::collection::vec(
                ("[a-z]{1,8}", proptest::collection::vec(any::<u8>(), 1..40),
                 proptest::option::of(proptest::collection::vec(any::<u8>(), 0..200))),
                0..20),
        ) {
            let refs: Vec<WriteRef<'_>> = writes
                .iter()
                .map(|(table, key, value)| WriteRef::put_or_delete(table, key, value.as_deref()))
                .collect();
            let bytes = commit_bytes(TenantId(tenant), version, &refs);
            let (payload, len) = next_frame(&bytes).unwrap();
            prop_assert_eq!(len, bytes.len());
            let commit = decode(payload).unwrap();
            prop_assert_eq!(commit, Commit { tenant: TenantId(tenant), version, writes: refs });
        }
    }
}
