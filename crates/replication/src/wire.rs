//! The messages of a replication link, each in a frame: `len: u32` (of what follows),
//! `kind: u8`, then the fields, integers little-endian. Records travel as the log's own
//! bytes, so a record lands at the same offset in the replica's log.

use bytes::Bytes;
use ferry_proto::TenantId;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use ferry_wal::record::MAX_RECORD_BYTES;

/// Largest message: one record (a read returns at least one whole record) and a header.
pub const MAX_MESSAGE_BYTES: usize = MAX_RECORD_BYTES + 64;

/// Longest token accepted in a hello.
pub const MAX_TOKEN_BYTES: usize = 1024;

/// Most snapshot files one list names (one per tenant).
pub const MAX_LISTED_SNAPSHOTS: usize = 65_536;

/// One snapshot file of the primary: the tenant, the log offset it covers to, its size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotFile {
    /// The tenant.
    pub tenant: TenantId,
    /// The log offset of its mark (records from here on are replayed over it).
    pub lsn: u64,
    /// Bytes.
    pub bytes: u64,
}

/// A message on a replication link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// Replica → primary, first: the replication token.
    Hello {
        /// The cluster's replication token.
        token: Bytes,
    },
    /// Primary → replica: the hello is accepted.
    Welcome,
    /// Replica → primary: the records after `from` (the end of the replica's log, which
    /// it holds as durably as its mode promises: also its acknowledgement), waiting up to
    /// `wait_ms` for some to exist.
    Pull {
        /// Where the replica's log ends.
        from: u64,
        /// Longest wait for a record, in ms.
        wait_ms: u32,
    },
    /// Primary → replica: whole records starting at `from` (none: nothing new in time).
    Records {
        /// Their offset.
        from: u64,
        /// The log's bytes.
        bytes: Bytes,
    },
    /// Primary → replica: the log before `oldest` is gone (a checkpoint removed it).
    Trimmed {
        /// Where the primary's log now starts.
        oldest: u64,
    },
    /// Primary → replica: the replica's log goes past the primary's (it holds records
    /// the primary does not: it must start over from the primary's snapshots).
    Ahead {
        /// Where the primary's log ends.
        end: u64,
    },
    /// Replica → primary: which snapshot files are there?
    ListSnapshots,
    /// Primary → replica: its newest snapshot of each tenant, and where the log it needs
    /// starts.
    Snapshots {
        /// The log offset replay must start from.
        log_from: u64,
        /// The files.
        files: Vec<SnapshotFile>,
    },
    /// Replica → primary: bytes of a snapshot file from `offset`.
    ReadSnapshot {
        /// The tenant.
        tenant: TenantId,
        /// The snapshot's offset (names the file).
        lsn: u64,
        /// Where to read.
        offset: u64,
    },
    /// Primary → replica: the next bytes of that file (empty: its end).
    Chunk {
        /// The bytes.
        bytes: Bytes,
    },
    /// Either side: the request is refused, and why. The link closes after it.
    Refused {
        /// Why.
        why: String,
    },
    /// Destination of a slot move → source: mark the log, then send every object whose
    /// key's slot is in `first..=last` ([`Message::Objects`]), then [`Message::ScanDone`].
    ScanSlots {
        /// First slot.
        first: u16,
        /// Last slot (inclusive).
        last: u16,
    },
    /// Source → destination: objects of one tenant's table.
    Objects(ObjectBatch),
    /// Source → destination: the scan is over; replaying the log from `log_from` over it
    /// gives the range's state.
    ScanDone {
        /// Where the replay starts.
        log_from: u64,
    },
    /// Destination → source: like [`Message::Pull`], but not an acknowledgement (the
    /// destination of a move is not a replica).
    Tail {
        /// Where to read from.
        from: u64,
        /// Longest wait for a record, in ms.
        wait_ms: u32,
    },
    /// Destination → source: stop taking writes to `first..=last`; the move's hand-over
    /// will be proposed at `epoch` (the newest configuration the destination knows).
    Freeze {
        /// First slot.
        first: u16,
        /// Last slot (inclusive).
        last: u16,
        /// The configuration epoch.
        epoch: u64,
    },
    /// Source → destination: no write to the range is logged past `end`.
    Frozen {
        /// Where the log ended when the writes stopped.
        end: u64,
    },
}

/// Objects of one table of one tenant: (key, version at the source, value).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectBatch {
    /// The tenant.
    pub tenant: TenantId,
    /// The table.
    pub table: String,
    /// Keys, their versions and values.
    pub objects: Vec<(Bytes, u64, Bytes)>,
}

impl ObjectBatch {
    /// Bytes of keys and values.
    pub fn bytes(&self) -> usize {
        self.objects.iter().map(|(key, _, value)| key.len() + value.len()).sum()
    }
}

const HELLO: u8 = 1;
const WELCOME: u8 = 2;
const PULL: u8 = 3;
const RECORDS: u8 = 4;
const TRIMMED: u8 = 5;
const AHEAD: u8 = 6;
const LIST_SNAPSHOTS: u8 = 7;
const SNAPSHOTS: u8 = 8;
const READ_SNAPSHOT: u8 = 9;
const CHUNK: u8 = 10;
const REFUSED: u8 = 11;
const SCAN_SLOTS: u8 = 12;
const OBJECTS: u8 = 13;
const SCAN_DONE: u8 = 14;
const TAIL: u8 = 15;
const FREEZE: u8 = 16;
const FROZEN: u8 = 17;

/// Why a message could not be read.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The connection failed or closed.
    #[error("replication link: {0}")]
    Io(#[from] std::io::Error),
    /// The bytes are not a message.
    #[error("replication link: malformed message ({0})")]
    Malformed(&'static str),
    /// A message larger than [`MAX_MESSAGE_BYTES`].
    #[error("replication link: a message of {0} bytes exceeds the limit")]
    TooLarge(usize),
}

impl Message {
    /// The frame of this message.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![0u8; 4];
        match self {
            Message::Hello { token } => {
                out.push(HELLO);
                out.extend_from_slice(token);
            }
            Message::Welcome => out.push(WELCOME),
            Message::Pull { from, wait_ms } => {
                out.push(PULL);
                out.extend_from_slice(&from.to_le_bytes());
                out.extend_from_slice(&wait_ms.to_le_bytes());
            }
            Message::Records { from, bytes } => {
                out.push(RECORDS);
                out.extend_from_slice(&from.to_le_bytes());
                out.extend_from_slice(bytes);
            }
            Message::Trimmed { oldest } => {
                out.push(TRIMMED);
                out.extend_from_slice(&oldest.to_le_bytes());
            }
            Message::Ahead { end } => {
                out.push(AHEAD);
                out.extend_from_slice(&end.to_le_bytes());
            }
            Message::ListSnapshots => out.push(LIST_SNAPSHOTS),
            Message::Snapshots { log_from, files } => {
                out.push(SNAPSHOTS);
                out.extend_from_slice(&log_from.to_le_bytes());
                out.extend_from_slice(&(files.len() as u32).to_le_bytes());
                for file in files {
                    out.extend_from_slice(&file.tenant.0.to_le_bytes());
                    out.extend_from_slice(&file.lsn.to_le_bytes());
                    out.extend_from_slice(&file.bytes.to_le_bytes());
                }
            }
            Message::ReadSnapshot { tenant, lsn, offset } => {
                out.push(READ_SNAPSHOT);
                out.extend_from_slice(&tenant.0.to_le_bytes());
                out.extend_from_slice(&lsn.to_le_bytes());
                out.extend_from_slice(&offset.to_le_bytes());
            }
            Message::Chunk { bytes } => {
                out.push(CHUNK);
                out.extend_from_slice(bytes);
            }
            Message::Refused { why } => {
                out.push(REFUSED);
                out.extend_from_slice(why.as_bytes());
            }
            Message::ScanSlots { first, last } => {
                out.push(SCAN_SLOTS);
                out.extend_from_slice(&first.to_le_bytes());
                out.extend_from_slice(&last.to_le_bytes());
            }
            Message::Objects(batch) => {
                out.push(OBJECTS);
                out.extend_from_slice(&batch.tenant.0.to_le_bytes());
                // Table names and keys are within the store's limits (u8 and u16 lengths).
                out.push(batch.table.len() as u8);
                out.extend_from_slice(batch.table.as_bytes());
                out.extend_from_slice(&(batch.objects.len() as u32).to_le_bytes());
                for (key, version, value) in &batch.objects {
                    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
                    out.extend_from_slice(key);
                    out.extend_from_slice(&version.to_le_bytes());
                    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
                    out.extend_from_slice(value);
                }
            }
            Message::ScanDone { log_from } => {
                out.push(SCAN_DONE);
                out.extend_from_slice(&log_from.to_le_bytes());
            }
            Message::Tail { from, wait_ms } => {
                out.push(TAIL);
                out.extend_from_slice(&from.to_le_bytes());
                out.extend_from_slice(&wait_ms.to_le_bytes());
            }
            Message::Freeze { first, last, epoch } => {
                out.push(FREEZE);
                out.extend_from_slice(&first.to_le_bytes());
                out.extend_from_slice(&last.to_le_bytes());
                out.extend_from_slice(&epoch.to_le_bytes());
            }
            Message::Frozen { end } => {
                out.push(FROZEN);
                out.extend_from_slice(&end.to_le_bytes());
            }
        }
        let len = (out.len() - 4) as u32;
        out[..4].copy_from_slice(&len.to_le_bytes());
        out
    }

    /// Parses one message's bytes (after the length).
    pub fn decode(body: Bytes) -> Result<Message, WireError> {
        let Some(&kind) = body.first() else {
            return Err(WireError::Malformed("empty message"));
        };
        let mut input = Input(body.slice(1..));
        let message = match kind {
            HELLO => {
                let token = input.rest();
                if token.len() > MAX_TOKEN_BYTES {
                    return Err(WireError::Malformed("token too long"));
                }
                Message::Hello { token }
            }
            WELCOME => Message::Welcome,
            PULL => Message::Pull {
                from: input.u64()?,
                wait_ms: input.u32()?,
            },
            RECORDS => Message::Records {
                from: input.u64()?,
                bytes: input.rest(),
            },
            TRIMMED => Message::Trimmed { oldest: input.u64()? },
            AHEAD => Message::Ahead { end: input.u64()? },
            LIST_SNAPSHOTS => Message::ListSnapshots,
            SNAPSHOTS => {
                let log_from = input.u64()?;
                let count = input.u32()? as usize;
                if count > MAX_LISTED_SNAPSHOTS {
                    return Err(WireError::Malformed("too many snapshot files"));
                }
                let mut files = Vec::with_capacity(count);
                for _ in 0..count {
                    files.push(SnapshotFile {
                        tenant: TenantId(input.u32()?),
                        lsn: input.u64()?,
                        bytes: input.u64()?,
                    });
                }
                Message::Snapshots { log_from, files }
            }
            READ_SNAPSHOT => Message::ReadSnapshot {
                tenant: TenantId(input.u32()?),
                lsn: input.u64()?,
                offset: input.u64()?,
            },
            CHUNK => Message::Chunk { bytes: input.rest() },
            REFUSED => Message::Refused {
                why: String::from_utf8_lossy(&input.rest()).into_owned(),
            },
            SCAN_SLOTS => Message::ScanSlots {
                first: input.u16()?,
                last: input.u16()?,
            },
            OBJECTS => {
                let tenant = input.u32()?;
                let table_len = input.take::<1>()?[0] as usize;
                let table = String::from_utf8(input.bytes(table_len)?.to_vec())
                    .map_err(|_| WireError::Malformed("table name is not UTF-8"))?;
                let count = input.u32()? as usize;
                // Each object takes at least 14 bytes: a count beyond that is a lie.
                if count > input.0.len() / 14 {
                    return Err(WireError::Malformed("object count exceeds the message"));
                }
                let mut objects = Vec::with_capacity(count);
                for _ in 0..count {
                    let key_len = input.u16()? as usize;
                    let key = input.bytes(key_len)?;
                    let version = input.u64()?;
                    let value_len = input.u32()? as usize;
                    objects.push((key, version, input.bytes(value_len)?));
                }
                Message::Objects(ObjectBatch {
                    tenant: TenantId(tenant),
                    table,
                    objects,
                })
            }
            SCAN_DONE => Message::ScanDone { log_from: input.u64()? },
            TAIL => Message::Tail {
                from: input.u64()?,
                wait_ms: input.u32()?,
            },
            FREEZE => Message::Freeze {
                first: input.u16()?,
                last: input.u16()?,
                epoch: input.u64()?,
            },
            FROZEN => Message::Frozen { end: input.u64()? },
            _ => return Err(WireError::Malformed("unknown message kind")),
        };
        if !input.0.is_empty() && !matches!(kind, HELLO | RECORDS | CHUNK | REFUSED) {
            return Err(WireError::Malformed("trailing bytes"));
        }
        Ok(message)
    }
}

struct Input(Bytes);

impl Input {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        if self.0.len() < N {
            return Err(WireError::Malformed("message too short"));
        }
        let head = self.0.split_to(N);
        Ok(head[..].try_into().expect("N bytes"))
    }

    fn u16(&mut self) -> Result<u16, WireError> {
        Ok(u16::from_le_bytes(self.take()?))
    }

    fn bytes(&mut self, len: usize) -> Result<Bytes, WireError> {
        if self.0.len() < len {
            return Err(WireError::Malformed("message too short"));
        }
        Ok(self.0.split_to(len))
    }

    fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_le_bytes(self.take()?))
    }

    fn u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_le_bytes(self.take()?))
    }

    fn rest(&mut self) -> Bytes {
        std::mem::take(&mut self.0)
    }
}

/// Writes one message.
pub async fn write<W: AsyncWrite + Unpin>(writer: &mut W, message: &Message) -> Result<(), WireError> {
    writer.write_all(&message.encode()).await?;
    writer.flush().await?;
    Ok(())
}

/// Reads one message; `max_bytes` bounds it (below [`MAX_MESSAGE_BYTES`] for a side that
/// expects only small ones).
pub async fn read<R: AsyncRead + Unpin>(reader: &mut R, max_bytes: usize) -> Result<Message, WireError> {
    let len = reader.read_u32_le().await? as usize;
    if len > max_bytes.min(MAX_MESSAGE_BYTES) {
        return Err(WireError::TooLarge(len));
    }
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).await?;
    Message::decode(Bytes::from(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_kind() -> Vec<Message> {
        vec![
            Message::Hello {
                token: Bytes::from_static(b"secret"),
            },
            Message::Welcome,
            Message::Pull { from: 7, wait_ms: 500 },
            Message::Records {
                from: 9,
                bytes: Bytes::from_static(b"\x01\x02"),
            },
            Message::Records {
                from: 9,
                bytes: Bytes::new(),
            },
            Message::Trimmed { oldest: 4096 },
            Message::Ahead { end: 12 },
            Message::ListSnapshots,
            Message::Snapshots {
                log_from: 3,
                files: vec![SnapshotFile {
                    tenant: TenantId(1),
                    lsn: 3,
                    bytes: 100,
                }],
            },
            Message::ReadSnapshot {
                tenant: TenantId(1),
                lsn: 3,
                offset: 64,
            },
            Message::Chunk {
                bytes: Bytes::from_static(b"abc"),
            },
            Message::Refused { why: "no".into() },
            Message::ScanSlots { first: 3, last: 700 },
            Message::Objects(ObjectBatch {
                tenant: TenantId(2),
                table: "users".into(),
                objects: vec![
                    (Bytes::from_static(b"k1"), 7, Bytes::from_static(b"v1")),
                    (Bytes::from_static(b"k2"), 9, Bytes::new()),
                ],
            }),
            Message::Objects(ObjectBatch::default()),
            Message::ScanDone { log_from: 77 },
            Message::Tail { from: 8, wait_ms: 100 },
            Message::Freeze {
                first: 1,
                last: 2,
                epoch: 9,
            },
            Message::Frozen { end: 1234 },
        ]
    }

    #[tokio::test]
    async fn every_message_reads_back_as_written() {
        for message in every_kind() {
            let bytes = message.encode();
            let mut reader = &bytes[..];
            assert_eq!(read(&mut reader, MAX_MESSAGE_BYTES).await.unwrap(), message);
            assert!(reader.is_empty());
        }
    }

    #[tokio::test]
    async fn bad_bytes_are_errors_not_panics() {
        for message in every_kind() {
            let bytes = message.encode();
            // Every truncation of the body: an error or a shorter valid message, never
            // a panic.
            for cut in 5..bytes.len() {
                let _ = Message::decode(Bytes::copy_from_slice(&bytes[4..cut]));
            }
        }
        assert!(matches!(
            Message::decode(Bytes::from_static(&[99])),
            Err(WireError::Malformed(_))
        ));
        assert!(matches!(
            Message::decode(Bytes::from_static(&[PULL, 1, 2])),
            Err(WireError::Malformed(_))
        ));
        let huge = (u32::MAX).to_le_bytes();
        assert!(matches!(read(&mut &huge[..], 1024).await, Err(WireError::TooLarge(_))));
        let pull = Message::Pull { from: 1, wait_ms: 1 }.encode();
        let mut with_tail = pull.clone();
        with_tail.push(0);
        with_tail[..4].copy_from_slice(&((pull.len() - 3) as u32).to_le_bytes());
        assert!(matches!(
            read(&mut &with_tail[..], 1024).await,
            Err(WireError::Malformed("trailing bytes"))
        ));
    }
}
