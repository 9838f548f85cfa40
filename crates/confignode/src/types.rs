//! The Raft group's types: what its log carries ([`ConfigChange`]) and what applying an entry
//! answers ([`Outcome`]). Member ids are numbers; a member's node record is its address.

use ferry_config::{ConfigChange, Outcome};

use std::io::Cursor;

openraft::declare_raft_types!(
    /// The config group's type configuration.
    pub ConfigRaft:
        D = ConfigChange,
        R = Outcome,
        SnapshotData = Cursor<Vec<u8>>,
);

/// A member's number in the group (never reused).
pub type MemberId = u64;

/// A running Raft member of the config group.
pub type Raft = openraft::Raft<ConfigRaft>;

/// What openraft's storage calls fail with.
pub type StorageError = openraft::StorageError<MemberId>;

/// A log entry.
pub type Entry = openraft::Entry<ConfigRaft>;

/// A position in the log.
pub type LogId = openraft::LogId<MemberId>;

/// A member's vote.
pub type Vote = openraft::Vote<MemberId>;

/// The membership as applied.
pub type StoredMembership = openraft::StoredMembership<MemberId, openraft::BasicNode>;
