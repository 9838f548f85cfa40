//! Reading the log's records back while the node runs: what a primary sends its
//! replicas, byte for byte, so a record sits at the same offset in every copy of the log.
//! Reads stop at a bound the caller gives (how far the log holds records as promised:
//! [`crate::ReplyGate::logged`]), never in the middle of a record.

use std::fs::File;
use std::os::unix::fs::FileExt;

use thiserror::Error;

use crate::dir::DataDir;
use crate::error::WalError;
use crate::record::{next_frame, BadRecord, FRAME_HEADER_BYTES};

/// Most bytes one read returns (a single larger record is returned whole).
pub const MAX_TAIL_READ_BYTES: usize = 4 * 1024 * 1024;

/// Why records cannot be read from an offset.
#[derive(Debug, Error)]
pub enum TailError {
    /// The segment holding the offset was removed by a checkpoint.
    #[error("log offset {from} is before the oldest record kept ({oldest}): catch up from a snapshot")]
    Trimmed {
        /// The offset asked for.
        from: u64,
        /// Where the log kept now starts.
        oldest: u64,
    },
    /// The offset is past the bound.
    #[error("log offset {from} is past the end of the log ({end})")]
    Ahead {
        /// The offset asked for.
        from: u64,
        /// The bound.
        end: u64,
    },
    /// The bytes at an offset below the bound are not a whole, valid record.
    #[error("log record at offset {lsn} cannot be read: {why}")]
    Bad {
        /// Its offset.
        lsn: u64,
        /// What is wrong (not a record boundary, or damage).
        why: BadRecord,
    },
    /// Listing or reading the data dir failed.
    #[error(transparent)]
    Wal(#[from] WalError),
}

/// The whole records from `from` (a record boundary) up to at most `upto`, at most
/// `max_bytes` of them unless the first alone is larger; empty when `from == upto`.
pub fn read_frames(dir: &DataDir, from: u64, upto: u64, max_bytes: usize) -> Result<Vec<u8>, TailError> {
    if from > upto {
        return Err(TailError::Ahead { from, end: upto });
    }
    if from == upto {
        return Ok(Vec::new());
    }
    let segments = dir.segments()?;
    let oldest = segments.first().map_or(upto, |(start, _)| *start);
    let Some(index) = segments.iter().rposition(|(start, _)| *start <= from) else {
        return Err(TailError::Trimmed { from, oldest });
    };
    let (start, path) = &segments[index];
    // A record never spans segments: this one's records end where the next begins.
    let segment_end = segments.get(index + 1).map_or(upto, |(next, _)| (*next).min(upto));
    let available = (segment_end - from) as usize;
    let file = match File::open(path) {
        Ok(file) => file,
        // Removed by a checkpoint between the listing and the open.
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Err(TailError::Trimmed { from, oldest: from + 1 })
        }
        Err(err) => return Err(WalError::io(path, "cannot open", err).into()),
    };
    let read = |len: usize| -> Result<Vec<u8>, TailError> {
        let mut bytes = vec![0u8; len];
        file.read_exact_at(&mut bytes, from - start)
            .map_err(|err| WalError::io(path, "cannot read", err))?;
        Ok(bytes)
    };
    let mut bytes = read(available.min(max_bytes.max(FRAME_HEADER_BYTES)))?;
    let mut whole = 0;
    loop {
        match next_frame(&bytes[whole..]) {
            Ok((_, len)) => {
                whole += len;
                if whole == bytes.len() {
                    break;
                }
            }
            // A later record cut by `max_bytes`: it starts the next read.
            Err(BadRecord::Torn { .. }) if whole > 0 => break,
            // The first record alone is larger than `max_bytes`: it is returned whole.
            Err(BadRecord::Torn { need, .. }) if need <= available && bytes.len() < need => bytes = read(need)?,
            Err(why) => {
                return Err(TailError::Bad {
                    lsn: from + whole as u64,
                    why,
                })
            }
        }
    }
    bytes.truncate(whole);
    Ok(bytes)
}
