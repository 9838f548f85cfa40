//! The data directory: held by one node at a time (a lock file), and the log's segment
//! files in it, named by the log offset they start at.

use ferry_proto::TenantId;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use crate::error::WalError;

/// The lock file a running node holds (with its pid written in it, for the error message).
pub const LOCK_FILE: &str = "LOCK";

/// Suffix of segment files: `<start offset, 20 digits>.log`.
const SEGMENT_SUFFIX: &str = ".log";

/// Snapshot files: `snap-<tenant, 10 digits>-<log offset, 20 digits>.snap`.
const SNAPSHOT_PREFIX: &str = "snap-";
const SNAPSHOT_SUFFIX: &str = ".snap";

/// A data directory this process holds.
#[derive(Debug)]
pub struct DataDir {
    path: PathBuf,
    /// Holds the lock while open; the OS drops it when the process dies, even by SIGKILL.
    lock: parking_lot::Mutex<Option<File>>,
}

impl DataDir {
    /// Takes the directory: it must exist and be writable, and no other process may hold it.
    pub fn lock(path: &Path) -> Result<DataDir, WalError> {
        let meta = std::fs::metadata(path).map_err(|err| WalError::io(path, "cannot use the data dir", err))?;
        if !meta.is_dir() {
            return Err(WalError::NotADirectory(path.to_path_buf()));
        }
        let lock_path = path.join(LOCK_FILE);
        let mut lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .map_err(|err| WalError::io(&lock_path, "cannot open the lock file", err))?;
        // SAFETY: flock on a descriptor we own; the lock lives as long as the file is open.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                let holder = std::fs::read_to_string(&lock_path).unwrap_or_default();
                return Err(WalError::Locked {
                    path: path.to_path_buf(),
                    holder: holder.trim().to_string(),
                });
            }
            return Err(WalError::io(&lock_path, "cannot lock", err));
        }
        lock.set_len(0)
            .and_then(|()| write!(lock, "{}", std::process::id()))
            .map_err(|err| WalError::io(&lock_path, "cannot write the lock file", err))?;
        Ok(DataDir {
            path: path.to_path_buf(),
            lock: parking_lot::Mutex::new(Some(lock)),
        })
    }

    /// Lets go of the directory (the log is closed): another process may take it.
    pub fn release(&self) {
        self.lock.lock().take();
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path of the segment starting at `start`.
    pub fn segment_path(&self, start: u64) -> PathBuf {
        self.path.join(format!("{start:020}{SEGMENT_SUFFIX}"))
    }

    /// The segments present, by start offset.
    pub fn segments(&self) -> Result<Vec<(u64, PathBuf)>, WalError> {
        let entries = std::fs::read_dir(&self.path).map_err(|err| WalError::io(&self.path, "cannot list", err))?;
        let mut segments = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|err| WalError::io(&self.path, "cannot list", err))?;
            let name = entry.file_name();
            let Some(start) = name
                .to_str()
                .and_then(|name| name.strip_suffix(SEGMENT_SUFFIX))
                .filter(|digits| digits.len() == 20)
                .and_then(|digits| digits.parse::<u64>().ok())
            else {
                continue;
            };
            segments.push((start, entry.path()));
        }
        segments.sort();
        Ok(segments)
    }

    /// The path of tenant `tenant`'s snapshot covering the log up to `lsn`.
    pub fn snapshot_path(&self, tenant: TenantId, lsn: u64) -> PathBuf {
        self.path
            .join(format!("{SNAPSHOT_PREFIX}{tenant:010}-{lsn:020}{SNAPSHOT_SUFFIX}"))
    }

    /// The snapshots present, as (tenant, log offset, path), sorted.
    pub fn snapshots(&self) -> Result<Vec<(TenantId, u64, PathBuf)>, WalError> {
        let entries = std::fs::read_dir(&self.path).map_err(|err| WalError::io(&self.path, "cannot list", err))?;
        let mut snapshots = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|err| WalError::io(&self.path, "cannot list", err))?;
            let name = entry.file_name();
            let Some((tenant, lsn)) = name
                .to_str()
                .and_then(|name| name.strip_prefix(SNAPSHOT_PREFIX)?.strip_suffix(SNAPSHOT_SUFFIX))
                .and_then(|digits| digits.split_once('-'))
                .filter(|(tenant, lsn)| tenant.len() == 10 && lsn.len() == 20)
                .and_then(|(tenant, lsn)| Some((tenant.parse::<TenantId>().ok()?, lsn.parse::<u64>().ok()?)))
            else {
                continue;
            };
            snapshots.push((tenant, lsn, entry.path()));
        }
        snapshots.sort();
        Ok(snapshots)
    }

    /// Makes the directory's entries (a created or removed segment) durable.
    pub fn sync(&self) -> Result<(), WalError> {
        File::open(&self.path)
            .and_then(|dir| dir.sync_all())
            .map_err(|err| WalError::io(&self.path, "cannot sync the directory", err))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_of_a_data_dir_is_refused_with_the_first_ones_pid() {
        let dir = crate::tests::temp_dir("lock");
        let dir = dir.path();
        let held = DataDir::lock(dir).unwrap();
        let err = DataDir::lock(dir).unwrap_err();
        assert!(
            matches!(&err, WalError::Locked { holder, .. } if *holder == std::process::id().to_string()),
            "{err}"
        );
        drop(held);
        DataDir::lock(dir).expect("free once the holder lets go");
    }

    #[test]
    fn a_missing_data_dir_is_an_error_not_an_empty_start() {
        let scratch = crate::tests::temp_dir("missing");
        let dir = scratch.path().join("not-there");
        assert!(matches!(DataDir::lock(&dir), Err(WalError::Io { .. })));
    }

    #[test]
    fn only_segment_files_are_listed_in_log_order() {
        let dir = crate::tests::temp_dir("list");
        let dir = dir.path();
        let data = DataDir::lock(dir).unwrap();
        for start in [300u64, 0, 12] {
            File::create(data.segment_path(start)).unwrap();
        }
        File::create(dir.join("notes.log")).unwrap();
        let starts: Vec<u64> = data.segments().unwrap().into_iter().map(|(start, _)| start).collect();
        assert_eq!(starts, vec![0, 12, 300]);
    }
}
