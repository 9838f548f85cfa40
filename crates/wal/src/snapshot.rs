//! A snapshot file: every object of one tenant as of a log offset, in the log's frames
//! (length, CRC32, payload), so a torn or flipped byte is found the same way.
//!
//! File `snap-<tenant, 10 digits>-<log offset, 20 digits>.snap`, written as `….tmp`, synced
//! and renamed, so a file under its final name is whole. Frames, in order:
//! - head: `kind: u8` (2), `format: u8` (1), `tenant: TenantId`, `lsn: u64` (replay the log
//!   from here), `clock: u64` (the tenant's clock then);
//! - objects, any number: `kind` (3), `table_len: u8`, table, `count: u32`, then per
//!   object `key_len: u16`, key, `version: u64`, `value_len: u32`, value;
//! - end: `kind` (4), `objects: u64`, the number of objects in the file, `durable_to:
//!   u64`, how far the log was synced before the file was named (it may hold commits
//!   logged up to there, so a recovery needs the log at least that far).
//!
//! A file without its end frame, or whose count differs, is not a snapshot.

use ferry_proto::TenantId;
use std::fs::{File, OpenOptions};
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use bytes::Bytes;

use crate::error::WalError;
use crate::record::{self, BadRecord, Input, FRAME_HEADER_BYTES};

const KIND_HEAD: u8 = 2;
const KIND_OBJECTS: u8 = 3;
const KIND_END: u8 = 4;
const FORMAT: u8 = 1;

/// Payload bytes after which an objects frame is closed; one object (at most the store's
/// largest value) may take a frame past it, far below the record limit.
pub const SNAPSHOT_FRAME_BYTES: usize = 1024 * 1024;

/// Frames read ahead of the one being installed.
const FRAMES_IN_FLIGHT: usize = 4;

/// Bytes of the buffer between the snapshot writer and its file.
const WRITE_BUFFER_BYTES: usize = 4 * 1024 * 1024;

/// What a snapshot's head says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotHead {
    /// Its tenant.
    pub tenant: TenantId,
    /// The log offset it covers: records before it are in the snapshot.
    pub lsn: u64,
    /// The tenant's clock when it was marked.
    pub clock: u64,
}

/// A snapshot being written (under its temporary name until [`SnapshotWriter::finish`]).
pub struct SnapshotWriter {
    /// Taken by [`SnapshotWriter::finish`]; a writer dropped before that removes its file.
    file: Option<BufWriter<File>>,
    temp: PathBuf,
    path: PathBuf,
    frame: Vec<u8>,
    objects: u64,
    bytes: u64,
}

impl SnapshotWriter {
    /// Starts the snapshot `path` with its head (a leftover temporary file is replaced).
    pub fn create(path: PathBuf, head: SnapshotHead) -> Result<SnapshotWriter, WalError> {
        let temp = path.with_extension("snap.tmp");
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&temp)
            .map_err(|err| WalError::io(&temp, "cannot create the snapshot", err))?;
        let mut writer = SnapshotWriter {
            file: Some(BufWriter::with_capacity(WRITE_BUFFER_BYTES, file)),
            temp,
            path,
            frame: Vec::new(),
            objects: 0,
            bytes: 0,
        };
        let mut out = Vec::new();
        record::frame(&mut out, |out| {
            out.extend_from_slice(&[KIND_HEAD, FORMAT]);
            out.extend_from_slice(&head.tenant.0.to_le_bytes());
            out.extend_from_slice(&head.lsn.to_le_bytes());
            out.extend_from_slice(&head.clock.to_le_bytes());
        });
        writer.write(&out)?;
        Ok(writer)
    }

    /// Adds objects of `table` (each key once, as the store's scan gives them).
    pub fn add(&mut self, table: &str, objects: &[(Bytes, u64, Bytes)]) -> Result<(), WalError> {
        let mut rest = objects;
        while !rest.is_empty() {
            let mut frame = std::mem::take(&mut self.frame);
            frame.clear();
            let mut taken = 0usize;
            record::frame(&mut frame, |out| {
                out.push(KIND_OBJECTS);
                out.push(table.len() as u8);
                out.extend_from_slice(table.as_bytes());
                let count_at = out.len();
                out.extend_from_slice(&[0; 4]);
                for (key, version, value) in rest {
                    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
                    out.extend_from_slice(key);
                    out.extend_from_slice(&version.to_le_bytes());
                    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
                    out.extend_from_slice(value);
                    taken += 1;
                    if out.len() >= SNAPSHOT_FRAME_BYTES {
                        break;
                    }
                }
                out[count_at..count_at + 4].copy_from_slice(&(taken as u32).to_le_bytes());
            });
            self.write(&frame)?;
            self.frame = frame;
            self.objects += taken as u64;
            rest = &rest[taken..];
        }
        Ok(())
    }

    /// Ends the file, syncs it and gives it its name. `durable_to`: the log is synced up
    /// to there, past every commit the snapshot holds. Returns its objects and bytes. The
    /// caller syncs the directory.
    pub fn finish(mut self, durable_to: u64) -> Result<(u64, u64), WalError> {
        let mut out = Vec::new();
        record::frame(&mut out, |out| {
            out.push(KIND_END);
            out.extend_from_slice(&self.objects.to_le_bytes());
            out.extend_from_slice(&durable_to.to_le_bytes());
        });
        self.write(&out)?;
        let file = self
            .file
            .take()
            .expect("a writer is finished once")
            .into_inner()
            .map_err(|err| WalError::io(&self.temp, "cannot write the snapshot", err.into_error()))?;
        file.sync_all()
            .map_err(|err| WalError::io(&self.temp, "cannot sync the snapshot", err))?;
        std::fs::rename(&self.temp, &self.path)
            .map_err(|err| WalError::io(&self.path, "cannot name the snapshot", err))?;
        Ok((self.objects, self.bytes))
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), WalError> {
        self.bytes += bytes.len() as u64;
        let Some(file) = self.file.as_mut() else {
            return Ok(());
        };
        file.write_all(bytes)
            .map_err(|err| WalError::io(&self.temp, "cannot write the snapshot", err))
    }
}

impl Drop for SnapshotWriter {
    fn drop(&mut self) {
        // Not finished (an error, or the node stopping): its partial file goes, so a
        // failing disk is not filled with them one retry after another.
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

/// Reads the snapshot at `path`, handing each object to `each(table, key, version,
/// value)`. Returns its head, its size in bytes and how far the log must reach. A snapshot that is not whole and
/// valid is an error naming the file (it is never half used: the caller has no older log).
pub fn read(
    path: &Path,
    mut head_of: impl FnMut(SnapshotHead) -> Result<(), WalError>,
    mut each: impl FnMut(&str, &[u8], u64, &[u8]) -> Result<(), WalError>,
) -> Result<(SnapshotHead, u64, u64), WalError> {
    let file = File::open(path).map_err(|err| WalError::io(path, "cannot open the snapshot", err))?;
    let bad = |why: String| WalError::Snapshot {
        path: path.to_path_buf(),
        why,
    };
    // Two stages on two threads: one reads and checksums frames, this one parses and
    // installs them. Frame buffers go back to the reader to be filled again.
    std::thread::scope(|scope| {
        let (read_frames, frames) = sync_channel::<Result<Option<Vec<u8>>, String>>(FRAMES_IN_FLIGHT);
        let (give_back, returned) = sync_channel::<Vec<u8>>(FRAMES_IN_FLIGHT + 1);
        scope.spawn(move || {
            let mut input = BufReader::with_capacity(WRITE_BUFFER_BYTES, file);
            loop {
                let mut frame = returned.try_recv().unwrap_or_default();
                let read = next_frame(&mut input, &mut frame).map(|payload| payload.is_some());
                let (message, more) = match read {
                    Ok(true) => (Ok(Some(frame)), true),
                    Ok(false) => (Ok(None), false),
                    Err(why) => (Err(why), false),
                };
                // A closed channel: the parser stopped.
                if read_frames.send(message).is_err() || !more {
                    return;
                }
            }
        });
        parse(frames, give_back, bad, &mut head_of, &mut each)
    })
}

/// The parsing stage of [`read`]: frames in order, checked by the reading stage.
fn parse(
    frames: Receiver<Result<Option<Vec<u8>>, String>>,
    give_back: SyncSender<Vec<u8>>,
    bad: impl Fn(String) -> WalError,
    head_of: &mut impl FnMut(SnapshotHead) -> Result<(), WalError>,
    each: &mut impl FnMut(&str, &[u8], u64, &[u8]) -> Result<(), WalError>,
) -> Result<(SnapshotHead, u64, u64), WalError> {
    let mut bytes = 0u64;
    let mut head: Option<SnapshotHead> = None;
    let mut objects = 0u64;
    loop {
        let frame = match frames.recv() {
            Ok(Ok(Some(frame))) => frame,
            Ok(Ok(None)) => return Err(bad("it ends before its end frame".into())),
            Ok(Err(why)) => return Err(bad(why)),
            Err(_) => return Err(bad("its reader stopped".into())),
        };
        let payload = &frame[FRAME_HEADER_BYTES..];
        bytes += (FRAME_HEADER_BYTES + payload.len()) as u64;
        let mut payload = Input(payload);
        let malformed = |err: BadRecord| bad(err.to_string());
        match (payload.u8().map_err(malformed)?, head) {
            (KIND_HEAD, None) => {
                if payload.u8().map_err(malformed)? != FORMAT {
                    return Err(bad("unknown snapshot format".into()));
                }
                let read = SnapshotHead {
                    tenant: TenantId(u32::from_le_bytes(payload.array().map_err(malformed)?)),
                    lsn: u64::from_le_bytes(payload.array().map_err(malformed)?),
                    clock: u64::from_le_bytes(payload.array().map_err(malformed)?),
                };
                head_of(read)?;
                head = Some(read);
            }
            (KIND_OBJECTS, Some(_)) => {
                let table_len = payload.u8().map_err(malformed)? as usize;
                let table = std::str::from_utf8(payload.take(table_len).map_err(malformed)?)
                    .map_err(|_| bad("a table name is not UTF-8".into()))?;
                let count = u32::from_le_bytes(payload.array().map_err(malformed)?);
                for _ in 0..count {
                    let key_len = u16::from_le_bytes(payload.array().map_err(malformed)?) as usize;
                    let key = payload.take(key_len).map_err(malformed)?;
                    let version = u64::from_le_bytes(payload.array().map_err(malformed)?);
                    let value_len = u32::from_le_bytes(payload.array().map_err(malformed)?) as usize;
                    let value = payload.take(value_len).map_err(malformed)?;
                    each(table, key, version, value)?;
                }
                objects += u64::from(count);
            }
            (KIND_END, Some(head)) => {
                let count = u64::from_le_bytes(payload.array().map_err(malformed)?);
                let durable_to = u64::from_le_bytes(payload.array().map_err(malformed)?);
                if count != objects {
                    return Err(bad(format!("its end frame counts {count} objects, it holds {objects}")));
                }
                if !payload.0.is_empty() {
                    return Err(bad("a frame has trailing bytes".into()));
                }
                return Ok((head, bytes, durable_to));
            }
            _ => return Err(bad("its frames are out of order".into())),
        }
        if !payload.0.is_empty() {
            return Err(bad("a frame has trailing bytes".into()));
        }
        // The reader may be gone or have enough buffers; then this one is dropped.
        let _ = give_back.try_send(frame);
    }
}

/// Reads the next frame into `buffer` and returns its checked payload; `None` at the end
/// of the file.
fn next_frame<'b>(input: &mut impl Read, buffer: &'b mut Vec<u8>) -> Result<Option<&'b [u8]>, String> {
    buffer.resize(FRAME_HEADER_BYTES, 0);
    match read_full(input, &mut buffer[..]) {
        Ok(0) => return Ok(None),
        Ok(n) if n < FRAME_HEADER_BYTES => return Err(format!("torn frame: {n} of {FRAME_HEADER_BYTES} bytes")),
        Ok(_) => {}
        Err(err) => return Err(err.to_string()),
    }
    let payload_len = u32::from_le_bytes(buffer[0..4].try_into().expect("4 bytes")) as usize;
    if payload_len == 0 || payload_len + FRAME_HEADER_BYTES > record::MAX_RECORD_BYTES {
        return Err(BadRecord::BadLength(payload_len).to_string());
    }
    buffer.resize(FRAME_HEADER_BYTES + payload_len, 0);
    let n = read_full(input, &mut buffer[FRAME_HEADER_BYTES..]).map_err(|err| err.to_string())?;
    if n < payload_len {
        return Err(format!("torn frame: {n} of {payload_len} payload bytes"));
    }
    let (payload, _) = record::next_frame(buffer).map_err(|err| err.to_string())?;
    Ok(Some(payload))
}

/// Reads until `buffer` is full or the input ends; returns the bytes read.
fn read_full(input: &mut impl Read, buffer: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buffer.len() {
        match input.read(&mut buffer[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;

    type Objects = Vec<(String, Vec<u8>, u64, Vec<u8>)>;

    fn write_sample(path: &Path, objects: usize) -> SnapshotHead {
        let head = SnapshotHead {
            tenant: TenantId(7),
            lsn: 4096,
            clock: 99,
        };
        let mut writer = SnapshotWriter::create(path.to_path_buf(), head).unwrap();
        let batch: Vec<(Bytes, u64, Bytes)> = (0..objects)
            .map(|i| {
                (
                    Bytes::from(format!("key{i}")),
                    i as u64 + 1,
                    Bytes::from(vec![i as u8; i % 3000]),
                )
            })
            .collect();
        writer.add("t", &batch).unwrap();
        writer.add("u", &batch[..1]).unwrap();
        writer.finish(head.lsn + 10).unwrap();
        head
    }

    fn read_all(path: &Path) -> Result<(SnapshotHead, Objects), WalError> {
        let mut objects = Vec::new();
        let (head, _, durable_to) = read(
            path,
            |_| Ok(()),
            |table, key, version, value| {
                objects.push((table.to_string(), key.to_vec(), version, value.to_vec()));
                Ok(())
            },
        )?;
        assert_eq!(durable_to, head.lsn + 10);
        Ok((head, objects))
    }

    #[test]
    fn a_snapshot_reads_back_as_written_across_frames() {
        let dir = crate::tests::temp_dir("snapshot-roundtrip");
        let dir = dir.path();
        let path = dir.join("s.snap");
        let head = write_sample(&path, 2000);
        assert!(!dir.join("s.snap.tmp").exists());
        let (read_head, objects) = read_all(&path).unwrap();
        assert_eq!(read_head, head);
        assert_eq!(objects.len(), 2001);
        assert_eq!(
            objects[1999],
            ("t".into(), b"key1999".to_vec(), 2000, vec![1999u16 as u8; 1999])
        );
        assert_eq!(objects[2000].0, "u");
    }

    #[test]
    fn a_cut_or_flipped_snapshot_is_refused_never_half_read() {
        let dir = crate::tests::temp_dir("snapshot-damaged");
        let dir = dir.path();
        let path = dir.join("s.snap");
        write_sample(&path, 800);
        let whole = std::fs::read(&path).unwrap();
        for cut in [0, 7, 30, whole.len() / 2, whole.len() - 1] {
            std::fs::write(&path, &whole[..cut]).unwrap();
            assert!(
                matches!(read_all(&path), Err(WalError::Snapshot { .. })),
                "cut at {cut}"
            );
        }
        for flip in [9, 40, whole.len() / 3, whole.len() - 2] {
            let mut bytes = whole.clone();
            bytes[flip] ^= 0x10;
            std::fs::write(&path, &bytes).unwrap();
            assert!(
                matches!(read_all(&path), Err(WalError::Snapshot { .. })),
                "flip at {flip}"
            );
        }
    }
}
