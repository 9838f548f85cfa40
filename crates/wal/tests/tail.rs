//! Records read back from one log and appended to another land at the same offsets, and
//! the copy recovers to the same commits.

use std::path::Path;
use std::sync::Arc;

use ferry_store::WriteRef;
use ferry_wal::{read_frames, replay, AppendError, DataDir, FsyncMode, Recovered, TailError, Wal, WalConfig};

/// A fresh directory for one test, removed when the returned guard drops.
fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("ferry-wal-tail-{name}-"))
        .tempdir()
        .unwrap()
}

fn config() -> WalConfig {
    WalConfig {
        fsync: FsyncMode::No,
        // Small segments, so reads cross segment boundaries.
        segment_bytes: 4096,
        ..WalConfig::default()
    }
}

/// A recovered commit: tenant, version, first value.
type Seen = (u64, u64, Vec<u8>);

fn open(dir: &Path) -> (Arc<Wal>, Vec<Seen>) {
    let data = DataDir::lock(dir).unwrap();
    let mut commits = Vec::new();
    let recovered: Recovered = replay(&data, &Default::default(), |tenant, commit| {
        commits.push((
            tenant,
            commit.version,
            match commit.writes[0].write {
                ferry_store::Write::Put(value) => value.to_vec(),
                _ => Vec::new(),
            },
        ));
        Ok(())
    })
    .unwrap();
    (Arc::new(Wal::open(data, config(), &recovered).unwrap()), commits)
}

#[test]
fn records_copied_verbatim_keep_their_offsets_and_recover_the_same() {
    let primary_dir = temp_dir("primary");
    let primary_dir = primary_dir.path();
    let replica_dir = temp_dir("replica");
    let replica_dir = replica_dir.path();
    let (primary, _) = open(primary_dir);
    let (replica, _) = open(replica_dir);
    let value = vec![7u8; 300];
    for version in 1..=100u64 {
        let key = format!("k{version}");
        let writes = [WriteRef::put("t", key.as_bytes(), &value[..(version as usize % 300)])];
        primary
            .append(ferry_proto::TenantId(1 + (version % 3) as u32), version, &writes)
            .unwrap();
    }
    primary.sync_now().unwrap();
    let end = primary.appended_lsn();
    let data = DataDir::lock(primary_dir).err();
    assert!(data.is_some(), "the primary holds its data dir");

    // Copy in reads of at most 1000 bytes: each ends on a record boundary.
    let reader = primary.data_dir();
    let mut at = 0;
    while at < end {
        let bytes = read_frames(reader, at, end, 1000).unwrap();
        assert!(!bytes.is_empty());
        replica.append_frames(at, &bytes).unwrap();
        at += bytes.len() as u64;
        assert_eq!(replica.appended_lsn(), at);
    }
    assert!(read_frames(reader, end, end, 1000).unwrap().is_empty());
    assert!(matches!(
        read_frames(reader, end + 1, end, 1000),
        Err(TailError::Ahead { .. })
    ));
    // Not a record boundary.
    assert!(matches!(read_frames(reader, 3, end, 1000), Err(TailError::Bad { .. })));
    // A gap, and damaged bytes, are refused.
    let first = read_frames(reader, 0, end, 1).unwrap();
    assert!(matches!(
        replica.append_frames(at + 1, &first),
        Err(AppendError::NotAtEnd { .. })
    ));
    let mut damaged = first;
    damaged[10] ^= 1;
    assert!(matches!(
        replica.append_frames(at, &damaged),
        Err(AppendError::BadRecord { .. })
    ));

    primary.close();
    replica.close();
    drop((primary, replica));
    let (_, primary_commits) = open(primary_dir);
    let (_, replica_commits) = open(replica_dir);
    assert_eq!(primary_commits.len(), 100);
    assert_eq!(primary_commits, replica_commits);
    let _ = std::fs::remove_dir_all(primary_dir);
    let _ = std::fs::remove_dir_all(replica_dir);
}

#[test]
fn a_read_only_log_takes_copied_records_and_refuses_its_own() {
    let primary_dir = temp_dir("ro-primary");
    let primary_dir = primary_dir.path();
    let replica_dir = temp_dir("ro-replica");
    let replica_dir = replica_dir.path();
    let (primary, _) = open(primary_dir);
    let (replica, _) = open(replica_dir);
    replica.set_read_only(Some("of 127.0.0.1:1".into()));
    let writes = [WriteRef::put("t", b"k", b"v")];
    let refused = replica.append(ferry_proto::TenantId(1), 1, &writes).unwrap_err();
    assert!(matches!(refused, AppendError::ReadOnly(_)), "{refused:?}");
    assert!(refused.to_string().starts_with("READONLY"), "{refused}");
    assert_eq!(replica.appended_lsn(), 0);

    primary.append(ferry_proto::TenantId(1), 1, &writes).unwrap();
    primary.sync_now().unwrap();
    let bytes = read_frames(primary.data_dir(), 0, primary.appended_lsn(), 1 << 20).unwrap();
    replica.append_frames(0, &bytes).unwrap();
    assert_eq!(replica.appended_lsn(), primary.appended_lsn());

    // Promoted: its own commits are taken again.
    replica.set_read_only(None);
    replica.append(ferry_proto::TenantId(1), 2, &writes).unwrap();
}
