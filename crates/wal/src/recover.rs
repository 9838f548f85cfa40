//! Recovery: replays every whole record of the log, in order, and cuts the log at the
//! first record that is torn or corrupt (everything after it is removed, and reported).
//! Records are appended in commit order per object and the writer makes them durable as
//! a prefix, so what survives a crash is a prefix of the log, and a prefix of the log is a
//! state the node really passed through.
//!
//! With snapshots ([`crate::restore`]), a tenant's records before its snapshot's mark are
//! skipped: the snapshot holds their effects.

use ferry_proto::TenantId;
use std::collections::HashMap;
use std::fs::OpenOptions;

use crate::dir::DataDir;
use crate::error::WalError;
use crate::record::{self, Commit};
use crate::restore::Restored;

/// What recovery found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Recovered {
    /// Records replayed.
    pub records: u64,
    /// Records skipped: their tenant's snapshot holds them.
    pub skipped: u64,
    /// Bytes of log read and replayed.
    pub bytes: u64,
    /// Segment files read.
    pub segments: usize,
    /// Where the log ends: the next record goes here.
    pub end_lsn: u64,
    /// The tail cut off, if any.
    pub cut: Option<Cut>,
}

/// A tail of the log that was not a whole, valid record, and was removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// Log offset of the first bad byte.
    pub lsn: u64,
    /// Bytes removed from there on (this segment's rest and every later segment).
    pub bytes: u64,
    /// Why it was not a record.
    pub why: String,
}

/// Replays the log of `dir`: `apply` gets each commit with its log offset, in log order,
/// except those of a tenant whose snapshot (`restored`) covers them. A torn or corrupt
/// record ends the log there: the rest is truncated and removed, unless the snapshots
/// need more of the log than is left (then nothing is cut and the start fails).
pub fn replay(
    dir: &DataDir,
    restored: &Restored,
    mut apply: impl FnMut(u64, Commit<'_>) -> Result<(), WalError>,
) -> Result<Recovered, WalError> {
    let snapshots: &HashMap<TenantId, u64> = &restored.covers;
    let segments = dir.segments()?;
    let needed_from = snapshots.values().copied().min();
    let covered_to = restored.log_needed_to;
    if let (Some(needed_from), Some((first, _))) = (needed_from, segments.first()) {
        if *first > needed_from {
            return Err(WalError::Inconsistent {
                path: dir.path().to_path_buf(),
                why: format!(
                    "a snapshot needs the log from offset {needed_from}, but the oldest segment starts at {first}"
                ),
            });
        }
    }
    let mut recovered = Recovered {
        // With no segment left, the log goes on after every snapshot.
        end_lsn: segments.first().map_or(covered_to, |(start, _)| *start),
        ..Recovered::default()
    };
    let mut cut_at: Option<(usize, u64, String)> = None;
    // Two stages on two threads: one reads each segment and checks its frames, the
    // other (this one) decodes and applies them. Reading and checksumming the next
    // segment overlaps applying this one.
    std::thread::scope(|scope| -> Result<(), WalError> {
        let (checked, from_reader) = std::sync::mpsc::sync_channel::<Result<Checked, WalError>>(1);
        let paths: Vec<std::path::PathBuf> = segments.iter().map(|(_, path)| path.clone()).collect();
        scope.spawn(move || {
            for path in paths {
                // A closed channel: the applier stopped (a cut or an error).
                if checked.send(check_segment(&path)).is_err() {
                    return;
                }
            }
        });
        for (index, (start, _)) in segments.iter().enumerate() {
            if *start != recovered.end_lsn {
                let why = format!(
                    "segment starts at {start}, but the log before it ends at {}",
                    recovered.end_lsn
                );
                cut_at = Some((index, 0, why));
                return Ok(());
            }
            let segment = from_reader.recv().expect("the reader sends one result per segment")?;
            recovered.segments += 1;
            let mut offset = 0usize;
            for &(payload_at, frame_len) in &segment.frames {
                let lsn = start + offset as u64;
                let commit = match record::decode(&segment.bytes[payload_at..offset + frame_len]) {
                    Ok(commit) => commit,
                    Err(bad) => {
                        cut_at = Some((index, offset as u64, bad.to_string()));
                        break;
                    }
                };
                if snapshots.get(&commit.tenant).is_some_and(|covered| lsn < *covered) {
                    recovered.skipped += 1;
                } else {
                    apply(lsn, commit)?;
                    recovered.records += 1;
                }
                offset += frame_len;
            }
            if cut_at.is_none() {
                if let Some(why) = segment.bad {
                    cut_at = Some((index, offset as u64, why));
                }
            }
            recovered.bytes += offset as u64;
            recovered.end_lsn = start + offset as u64;
            if cut_at.is_some() {
                return Ok(());
            }
        }
        Ok(())
    })?;
    if recovered.end_lsn < covered_to {
        // The log is synced past everything a snapshot holds before the snapshot is
        // named: a log that ends earlier lost synced records, and the snapshot may hold
        // part of a transaction whose record is gone. Nothing is cut: the files are left
        // as they are for whoever repairs them.
        return Err(WalError::Inconsistent {
            path: dir.path().to_path_buf(),
            why: format!(
                "a snapshot holds commits logged up to offset {covered_to}, but the log ends at {}",
                recovered.end_lsn
            ),
        });
    }
    if let Some((index, offset, why)) = cut_at {
        recovered.cut = Some(cut(dir, &segments[index..], offset, why)?);
    }
    Ok(recovered)
}

/// A segment read whole, with its frames checked.
struct Checked {
    bytes: Vec<u8>,
    /// Each whole, checksummed frame in order: where its payload starts, and its length.
    frames: Vec<(usize, usize)>,
    /// Why the bytes after the last frame are not one, if the segment does not end there.
    bad: Option<String>,
}

/// Reads a segment and finds its frames, up to the first that is torn or corrupt.
fn check_segment(path: &std::path::Path) -> Result<Checked, WalError> {
    let bytes = std::fs::read(path).map_err(|err| WalError::io(path, "cannot read", err))?;
    let mut frames = Vec::new();
    let mut offset = 0usize;
    let mut bad = None;
    while offset < bytes.len() {
        match record::next_frame(&bytes[offset..]) {
            Ok((_, len)) => {
                frames.push((offset + record::FRAME_HEADER_BYTES, len));
                offset += len;
            }
            Err(why) => {
                bad = Some(why.to_string());
                break;
            }
        }
    }
    Ok(Checked { bytes, frames, bad })
}

/// Truncates the first of `segments` at `offset` and removes the others.
fn cut(dir: &DataDir, segments: &[(u64, std::path::PathBuf)], offset: u64, why: String) -> Result<Cut, WalError> {
    let (start, first) = &segments[0];
    let mut removed = 0u64;
    let file = OpenOptions::new()
        .write(true)
        .open(first)
        .map_err(|err| WalError::io(first, "cannot open to cut", err))?;
    let len = file
        .metadata()
        .map_err(|err| WalError::io(first, "cannot stat", err))?
        .len();
    removed += len.saturating_sub(offset);
    if offset == 0 {
        // Nothing of it is kept: an empty segment left behind would be a gap in the log
        // the next segment opened after it could not close.
        drop(file);
        std::fs::remove_file(first).map_err(|err| WalError::io(first, "cannot remove", err))?;
    } else {
        file.set_len(offset)
            .and_then(|()| file.sync_all())
            .map_err(|err| WalError::io(first, "cannot cut", err))?;
    }
    for (_, path) in &segments[1..] {
        removed += std::fs::metadata(path).map_or(0, |meta| meta.len());
        std::fs::remove_file(path).map_err(|err| WalError::io(path, "cannot remove", err))?;
    }
    dir.sync()?;
    tracing::warn!(lsn = start + offset, bytes = removed, %why, "cut the log's tail at a torn or corrupt record");
    Ok(Cut {
        lsn: start + offset,
        bytes: removed,
        why,
    })
}
