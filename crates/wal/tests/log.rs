//! The log end to end over real files: what is appended comes back in order, a torn or
//! corrupt tail is cut and reported, limits refuse commits without losing earlier ones.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ferry_store::{StoreError, TenantStore, Write, WriteRef};
use ferry_wal::{replay, AppendError, DataDir, FsyncMode, Recovered, Wal, WalConfig};

/// A fresh directory for one test, removed when the returned guard drops.
fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("ferry-wal-it-{name}-"))
        .tempdir()
        .unwrap()
}

/// Opens the log of `dir`, replaying what it holds into the commits returned.
fn open(dir: &Path, config: WalConfig) -> (Arc<Wal>, Recovered, Vec<(u32, u64, String)>) {
    let data = DataDir::lock(dir).unwrap();
    let mut seen = Vec::new();
    let recovered = replay(&data, &Default::default(), |_, commit| {
        let value = match commit.writes[0].write {
            Write::Put(v) => String::from_utf8_lossy(v).into_owned(),
            _ => String::new(),
        };
        seen.push((commit.tenant.0, commit.version, value));
        Ok(())
    })
    .unwrap();
    (Arc::new(Wal::open(data, config, &recovered).unwrap()), recovered, seen)
}

fn put<'a>(key: &'a [u8], value: &'a [u8]) -> [WriteRef<'a>; 1] {
    [WriteRef::put("t", key, value)]
}

fn append_values(wal: &Wal, tenant: u32, versions: std::ops::Range<u64>) {
    for version in versions {
        let value = format!("v{version}");
        wal.append(ferry_proto::TenantId(tenant), version, &put(b"k", value.as_bytes()))
            .unwrap();
    }
}

fn segment_paths(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    paths.sort();
    paths
}

#[test]
fn appended_commits_come_back_in_order_across_reopens_and_segments() {
    let dir = temp_dir("order");
    let dir = dir.path();
    let config = WalConfig {
        segment_bytes: 256,
        ..WalConfig::default()
    };
    let (wal, recovered, seen) = open(dir, config.clone());
    assert_eq!((recovered.records, seen.len()), (0, 0));
    append_values(&wal, 1, 1..40);
    wal.close();
    drop(wal);
    assert!(segment_paths(dir).len() > 3, "small segments rotate");

    let (wal, recovered, seen) = open(dir, config.clone());
    assert_eq!(recovered.records, 39);
    assert_eq!(recovered.cut, None);
    let versions: Vec<u64> = seen.iter().map(|(_, version, _)| *version).collect();
    assert_eq!(versions, (1..40).collect::<Vec<_>>());
    append_values(&wal, 2, 40..45);
    wal.close();
    drop(wal);

    let (_wal, recovered, seen) = open(dir, config);
    assert_eq!(recovered.records, 44);
    assert_eq!(seen.last().unwrap(), &(2, 44, "v44".to_string()));
}

#[test]
fn a_torn_tail_is_cut_at_the_last_whole_record_and_reported() {
    let dir = temp_dir("torn");
    let dir = dir.path();
    let (wal, _, _) = open(dir, WalConfig::default());
    append_values(&wal, 1, 1..11);
    wal.close();
    drop(wal);
    // A crash in the middle of writing the next record: half a frame at the end.
    let last = segment_paths(dir).pop().unwrap();
    let whole = std::fs::metadata(&last).unwrap().len();
    let mut bytes = std::fs::read(&last).unwrap();
    let record = bytes.len() / 10;
    let half_a_record = bytes[..record / 2].to_vec();
    bytes.extend_from_slice(&half_a_record);
    std::fs::write(&last, &bytes).unwrap();

    let (wal, recovered, seen) = open(dir, WalConfig::default());
    assert_eq!(seen.len(), 10);
    let cut = recovered.cut.expect("the torn record is cut");
    assert_eq!(cut.bytes, (record / 2) as u64);
    assert!(cut.why.contains("torn"), "{}", cut.why);
    assert_eq!(
        std::fs::metadata(&last).unwrap().len(),
        whole,
        "truncated back to the whole records"
    );
    // The log goes on after the cut.
    append_values(&wal, 1, 11..12);
    wal.close();
    drop(wal);
    let (wal, recovered, seen) = open(dir, WalConfig::default());
    assert_eq!((recovered.records, recovered.cut.clone()), (11, None));
    assert_eq!(seen.last().unwrap().2, "v11");
    // Its segments reserve 64 MiB each: not left behind.
    wal.close();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_corrupt_record_ends_the_log_there_and_everything_after_it_is_removed() {
    let dir = temp_dir("corrupt");
    let dir = dir.path();
    let config = WalConfig {
        segment_bytes: 200,
        ..WalConfig::default()
    };
    let (wal, _, _) = open(dir, config.clone());
    append_values(&wal, 1, 1..30);
    wal.close();
    drop(wal);
    let segments = segment_paths(dir);
    assert!(segments.len() >= 3);
    // One flipped bit inside the first record's payload.
    let mut first = std::fs::read(&segments[0]).unwrap();
    first[20] ^= 0x01;
    std::fs::write(&segments[0], &first).unwrap();

    let (_wal, recovered, seen) = open(dir, config);
    assert_eq!(seen.len(), 0, "nothing after a corrupt record is replayed");
    let cut = recovered.cut.expect("cut");
    assert_eq!(cut.lsn, 0);
    assert!(cut.why.contains("checksum"), "{}", cut.why);
    assert!(
        cut.bytes > 500,
        "this segment's rest and the later segments: {}",
        cut.bytes
    );
    assert_eq!(
        segment_paths(dir).len(),
        1,
        "later segments removed, a fresh one opened"
    );
}

#[test]
fn a_full_log_refuses_the_commit_and_keeps_what_it_has() {
    let dir = temp_dir("full");
    let dir = dir.path();
    let config = WalConfig {
        max_log_bytes: Some(400),
        ..WalConfig::default()
    };
    let (wal, _, _) = open(dir, config.clone());
    let store = TenantStore::new(1 << 20);
    store
        .attach_journal(wal.journal(ferry_proto::TenantId(7)))
        .ok()
        .unwrap();
    let mut acknowledged = 0;
    let refusal = loop {
        match store.put("t", format!("key{acknowledged}").as_bytes(), b"0123456789") {
            Ok(_) => acknowledged += 1,
            Err(err) => break err,
        }
        assert!(acknowledged < 100, "the cap never refused");
    };
    assert!(
        matches!(&refusal, StoreError::Journal(why) if why.contains("log is full")),
        "{refusal}"
    );
    assert_eq!(
        store.stats().objects,
        acknowledged,
        "the refused write is not installed"
    );
    assert!(store.get("t", b"key0").unwrap().is_some(), "reads are still served");
    wal.close();
    drop((wal, store));
    let (_wal, recovered, _) = open(dir, config);
    assert_eq!(recovered.records, acknowledged);
}

#[test]
fn a_store_replayed_from_its_log_equals_the_store_that_wrote_it() {
    let dir = temp_dir("store");
    let dir = dir.path();
    for mode in [FsyncMode::Always, FsyncMode::EverySec, FsyncMode::No] {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).unwrap();
        let config = WalConfig {
            fsync: mode,
            ..WalConfig::default()
        };
        let (wal, _, _) = open(dir, config.clone());
        let store = TenantStore::new(1 << 20);
        store
            .attach_journal(wal.journal(ferry_proto::TenantId(1)))
            .ok()
            .unwrap();
        for i in 0..200u32 {
            store.put("a", &i.to_le_bytes(), format!("{i}").as_bytes()).unwrap();
            if i % 3 == 0 {
                store.delete("a", &(i / 2).to_le_bytes()).unwrap();
            }
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(wal.gate().pass()).unwrap();
        assert!(wal.gate().released_lsn() >= wal.gate().appended_lsn());
        wal.close();
        drop(wal);

        // Closing lets go of the data dir even while the store (and its journal) lives on.
        let store_snapshot = store.table_snapshot("a");
        let (used_bytes, read_version) = (store.stats().used_bytes, store.read_version());
        drop(store);
        let data = DataDir::lock(dir).unwrap();
        let replayed = TenantStore::new(1 << 20);
        replay(&data, &Default::default(), |_, commit| {
            replayed.recover_commit(commit.version, &commit.writes).unwrap();
            Ok(())
        })
        .unwrap();
        assert_eq!(replayed.table_snapshot("a"), store_snapshot, "{mode:?}");
        assert_eq!(replayed.stats().used_bytes, used_bytes);
        assert_eq!(replayed.read_version(), read_version);
    }
}

#[test]
fn a_commit_too_large_for_one_record_is_refused() {
    let dir = temp_dir("large");
    let dir = dir.path();
    let (wal, _, _) = open(dir, WalConfig::default());
    let value = vec![7u8; 1024 * 1024];
    let keys: Vec<Vec<u8>> = (0..300u32).map(|i| i.to_le_bytes().to_vec()).collect();
    let writes: Vec<WriteRef<'_>> = keys.iter().map(|key| WriteRef::put("t", key, &value)).collect();
    assert!(matches!(
        wal.append(ferry_proto::TenantId(1), 1, &writes),
        Err(AppendError::TooLarge(_))
    ));
}

#[test]
fn a_key_filter_refuses_commits_from_the_log_end_it_reports_on() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = temp_dir("key-filter");
    let dir = dir.path();
    let (wal, _, _) = open(dir, WalConfig::default());
    let frozen = Arc::new(AtomicBool::new(false));
    let filter_frozen = Arc::clone(&frozen);
    assert!(wal.set_key_filter(Arc::new(move |key: &[u8]| {
        (filter_frozen.load(Ordering::SeqCst) && key.starts_with(b"moving")).then(|| "TRYAGAIN slot moving".to_string())
    })));
    assert!(!wal.set_key_filter(Arc::new(|_: &[u8]| None)), "installed once");
    let store = TenantStore::new(1 << 20);
    store
        .attach_journal(wal.journal(ferry_proto::TenantId(1)))
        .ok()
        .unwrap();
    store.put("t", b"moving-1", b"before").unwrap();
    frozen.store(true, Ordering::SeqCst);
    let end = wal.appended_lsn();
    let refused = store.put("t", b"moving-1", b"after").unwrap_err();
    assert_eq!(refused, StoreError::Journal("TRYAGAIN slot moving".into()));
    assert_eq!(
        refused.to_string(),
        "TRYAGAIN slot moving",
        "its own error code, shown as is"
    );
    assert_eq!(wal.appended_lsn(), end, "nothing logged past the reported end");
    assert_eq!(&store.get("t", b"moving-1").unwrap().unwrap().1[..], b"before");
    // Other keys are taken.
    store.put("t", b"staying", b"x").unwrap();
    assert!(wal.appended_lsn() > end);
    wal.close();
    let _ = std::fs::remove_dir_all(dir);
}
