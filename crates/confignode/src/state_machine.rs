//! The config group's state machine: the [`ClusterConfig`] that committed commands build,
//! published on a watch channel each time its epoch changes. A snapshot is the whole
//! configuration as JSON, kept in one file written atomically; after a restart the
//! machine starts from it and openraft re-applies the committed entries after it.

use std::fs::File;
use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ferry_config::{ClusterConfig, Outcome};
use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{EntryPayload, RaftSnapshotBuilder, SnapshotMeta, StorageIOError};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::types::{ConfigRaft, Entry, LogId, MemberId, StorageError, StoredMembership};

/// The snapshot file's name in a member's data dir.
pub const SNAPSHOT_FILE: &str = "config.snapshot";

/// What a snapshot holds: the machine's whole state.
#[derive(Clone, Default, Serialize, Deserialize)]
struct Image {
    last_applied: Option<LogId>,
    last_membership: StoredMembership,
    config: ClusterConfig,
}

/// A snapshot as kept on disk.
#[derive(Serialize, Deserialize)]
struct StoredSnapshot {
    meta: SnapshotMeta<MemberId, openraft::BasicNode>,
    image: Vec<u8>,
}

struct Inner {
    image: Image,
    snapshot: Option<StoredSnapshot>,
}

/// The state machine openraft drives; clones share one machine.
#[derive(Clone)]
pub struct ConfigStateMachine {
    inner: Arc<Mutex<Inner>>,
    path: PathBuf,
    published: Arc<watch::Sender<Arc<ClusterConfig>>>,
}

fn read_error(err: impl std::fmt::Display) -> StorageError {
    StorageIOError::read_state_machine(&std::io::Error::other(err.to_string())).into()
}

impl ConfigStateMachine {
    /// Opens the machine of `dir`, from its snapshot if it has one.
    pub fn open(dir: &Path) -> std::io::Result<ConfigStateMachine> {
        let path = dir.join(SNAPSHOT_FILE);
        let (image, snapshot) = match std::fs::read(&path) {
            Ok(bytes) => {
                let stored: StoredSnapshot = serde_json::from_slice(&bytes).map_err(|err| {
                    std::io::Error::other(format!("{}: not a config snapshot: {err}", path.display()))
                })?;
                let image: Image = serde_json::from_slice(&stored.image).map_err(|err| {
                    std::io::Error::other(format!("{}: its configuration does not parse: {err}", path.display()))
                })?;
                (image, Some(stored))
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => (Image::default(), None),
            Err(err) => return Err(std::io::Error::other(format!("{}: {err}", path.display()))),
        };
        let (published, _) = watch::channel(Arc::new(image.config.clone()));
        Ok(ConfigStateMachine {
            inner: Arc::new(Mutex::new(Inner { image, snapshot })),
            path,
            published: Arc::new(published),
        })
    }

    /// The configuration as applied, updated whenever its epoch changes.
    pub fn configs(&self) -> watch::Receiver<Arc<ClusterConfig>> {
        self.published.subscribe()
    }

    /// Writes `snapshot` to the snapshot file: a temporary file, synced, then renamed.
    fn persist(&self, snapshot: &StoredSnapshot) -> std::io::Result<()> {
        let temp = self.path.with_extension("tmp");
        let bytes = serde_json::to_vec(snapshot).map_err(std::io::Error::other)?;
        let mut file = File::create(&temp)?;
        file.write_all(&bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, &self.path)?;
        if let Some(dir) = self.path.parent() {
            File::open(dir)?.sync_all()?;
        }
        Ok(())
    }

    fn publish(&self, config: &ClusterConfig) {
        self.published.send_if_modified(|current| {
            if current.epoch == config.epoch {
                return false;
            }
            *current = Arc::new(config.clone());
            true
        });
    }
}

impl RaftSnapshotBuilder<ConfigRaft> for ConfigStateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<ConfigRaft>, StorageError> {
        let image = self.inner.lock().image.clone();
        let bytes = serde_json::to_vec(&image).map_err(read_error)?;
        let snapshot_id = match image.last_applied {
            Some(last) => format!("{}-{}-{}", last.leader_id, last.index, image.config.epoch),
            None => format!("--{}", image.config.epoch),
        };
        let meta = SnapshotMeta {
            last_log_id: image.last_applied,
            last_membership: image.last_membership.clone(),
            snapshot_id,
        };
        let stored = StoredSnapshot {
            meta: meta.clone(),
            image: bytes.clone(),
        };
        self.persist(&stored)
            .map_err(|err| StorageIOError::write_snapshot(Some(meta.signature()), &err))?;
        self.inner.lock().snapshot = Some(stored);
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(bytes)),
        })
    }
}

impl RaftStateMachine<ConfigRaft> for ConfigStateMachine {
    type SnapshotBuilder = ConfigStateMachine;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        let inner = self.inner.lock();
        Ok((inner.image.last_applied, inner.image.last_membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Outcome>, StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let mut outcomes = Vec::new();
        let config = {
            let mut inner = self.inner.lock();
            for entry in entries {
                inner.image.last_applied = Some(entry.log_id);
                let outcome = match entry.payload {
                    EntryPayload::Normal(command) => inner.image.config.apply(&command),
                    EntryPayload::Membership(membership) => {
                        inner.image.last_membership = StoredMembership::new(Some(entry.log_id), membership);
                        Outcome::Applied {
                            epoch: inner.image.config.epoch,
                        }
                    }
                    EntryPayload::Blank => Outcome::Applied {
                        epoch: inner.image.config.epoch,
                    },
                };
                outcomes.push(outcome);
            }
            inner.image.config.clone()
        };
        self.publish(&config);
        Ok(outcomes)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<MemberId, openraft::BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let bytes = snapshot.into_inner();
        let image: Image = serde_json::from_slice(&bytes)
            .map_err(|err| StorageIOError::read_snapshot(Some(meta.signature()), &err))?;
        let stored = StoredSnapshot {
            meta: meta.clone(),
            image: bytes,
        };
        self.persist(&stored)
            .map_err(|err| StorageIOError::write_snapshot(Some(meta.signature()), &err))?;
        let config = image.config.clone();
        {
            let mut inner = self.inner.lock();
            inner.image = Image {
                last_applied: meta.last_log_id,
                last_membership: meta.last_membership.clone(),
                config: image.config,
            };
            inner.snapshot = Some(stored);
        }
        self.publish(&config);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<ConfigRaft>>, StorageError> {
        let inner = self.inner.lock();
        Ok(inner.snapshot.as_ref().map(|stored| Snapshot {
            meta: stored.meta.clone(),
            snapshot: Box::new(Cursor::new(stored.image.clone())),
        }))
    }
}
