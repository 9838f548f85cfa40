//! Checkpoints end to end over real files: snapshots taken while writers commit, the log
//! they make unneeded removed, and a recovery from snapshot plus log tail that gives back
//! exactly the state the writers left, transfers whole.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ferry_store::{ObjectRef, StoreError, TenantStore, WriteRef};
use ferry_wal::{load_snapshots, replay, DataDir, Tenants, Wal, WalConfig, WalError};

const QUOTA: u64 = 1 << 30;
const ACCOUNTS: u32 = 64;
const START_BALANCE: i64 = 1000;

/// A fresh directory for one test, removed when the returned guard drops.
fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("ferry-wal-snap-{name}-"))
        .tempdir()
        .unwrap()
}

struct Stores(Vec<(u32, Arc<TenantStore>)>);

impl Tenants for Stores {
    fn each(
        &self,
        each: &mut dyn FnMut(ferry_proto::TenantId, &TenantStore) -> Result<(), WalError>,
    ) -> Result<(), WalError> {
        self.0
            .iter()
            .try_for_each(|(id, store)| each(ferry_proto::TenantId(*id), store))
    }
}

/// Recovers `dir` (snapshots, then the log) into fresh stores of tenants 1 and 2 and opens
/// the log after it.
fn recover(dir: &Path, config: WalConfig) -> (Arc<Wal>, Stores) {
    let data = DataDir::lock(dir).unwrap();
    let stores = Stores(vec![
        (1, Arc::new(TenantStore::new(QUOTA))),
        (2, Arc::new(TenantStore::new(QUOTA))),
    ]);
    let by_id: HashMap<ferry_proto::TenantId, &TenantStore> = stores
        .0
        .iter()
        .map(|(id, s)| (ferry_proto::TenantId(*id), &**s))
        .collect();
    let restored = load_snapshots(&data, |id| by_id.get(&id).copied()).unwrap();
    let recovered = replay(&data, &restored, |_, commit| {
        by_id[&commit.tenant]
            .recover_commit(commit.version, &commit.writes)
            .unwrap();
        Ok(())
    })
    .unwrap();
    assert_eq!(recovered.cut, None);
    let wal = Arc::new(Wal::open(data, config, &recovered).unwrap());
    for (id, store) in &stores.0 {
        assert!(store.attach_journal(wal.journal(ferry_proto::TenantId(*id))).is_ok());
    }
    (wal, stores)
}

fn balance(store: &TenantStore, account: u32) -> (i64, u64) {
    store
        .get("accounts", &account.to_le_bytes())
        .unwrap()
        .map_or((0, 0), |(version, value)| {
            (i64::from_le_bytes(value[..].try_into().unwrap()), version)
        })
}

/// Moves 1 between two accounts in one transaction; false on a conflict.
fn transfer(store: &TenantStore, from: u32, to: u32) -> bool {
    let (a, va) = balance(store, from);
    let (b, vb) = balance(store, to);
    let (from_key, to_key) = (from.to_le_bytes(), to.to_le_bytes());
    let reads = [
        ObjectRef {
            table: "accounts",
            key: &from_key,
            version: va,
        },
        ObjectRef {
            table: "accounts",
            key: &to_key,
            version: vb,
        },
    ];
    let (a, b) = ((a - 1).to_le_bytes(), (b + 1).to_le_bytes());
    let writes = [
        WriteRef::put("accounts", &from_key, &a),
        WriteRef::put("accounts", &to_key, &b),
    ];
    match store.commit(&reads, &writes) {
        Ok(_) => true,
        Err(StoreError::Conflict { .. }) => false,
        Err(err) => panic!("{err}"),
    }
}

fn state(store: &TenantStore) -> Vec<(bytes::Bytes, u64, bytes::Bytes)> {
    let mut all = Vec::new();
    for table in store.table_names() {
        all.extend(store.table_snapshot(&table));
    }
    all
}

fn small_segments() -> WalConfig {
    WalConfig {
        segment_bytes: 1024 * 1024,
        ..WalConfig::default()
    }
}

#[test]
fn a_snapshot_taken_under_load_recovers_the_exact_state_and_trims_the_log() {
    let dir = temp_dir("under-load");
    let dir = dir.path();
    let (wal, stores) = recover(dir, small_segments());
    let bank = Arc::clone(&stores.0[0].1);
    for account in 0..ACCOUNTS {
        bank.put("accounts", &account.to_le_bytes(), &START_BALANCE.to_le_bytes())
            .unwrap();
    }
    // Tenant 2: values written and deleted, so the snapshot holds fewer objects than the
    // log wrote.
    let other = Arc::clone(&stores.0[1].1);
    for i in 0..500u32 {
        other.put("t", &i.to_le_bytes(), &[7; 100]).unwrap();
        if i % 2 == 0 {
            other.delete("t", &i.to_le_bytes()).unwrap();
        }
    }

    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..3u32)
        .map(|seed| {
            let (bank, stop) = (Arc::clone(&bank), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut done = 0u64;
                let mut x = seed + 1;
                while !stop.load(Ordering::Relaxed) {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                    let (from, to) = (x % ACCOUNTS, (x >> 8) % ACCOUNTS);
                    if from != to && transfer(&bank, from, to) {
                        done += 1;
                    }
                }
                done
            })
        })
        .collect();
    let mut reports = Vec::new();
    for _ in 0..3 {
        std::thread::sleep(std::time::Duration::from_millis(50));
        reports.push(wal.checkpoint(&stores, &|| true).unwrap());
    }
    std::thread::sleep(std::time::Duration::from_millis(50));
    stop.store(true, Ordering::Relaxed);
    let transfers: u64 = writers.into_iter().map(|w| w.join().unwrap()).sum();
    assert!(transfers > 100, "only {transfers} transfers ran");
    assert!(reports.iter().all(|r| r.tenants == 2), "{reports:?}");
    assert!(
        reports.iter().map(|r| r.segments_removed).sum::<usize>() > 0,
        "no segment was removed: {reports:?}"
    );
    let expected: Vec<_> = stores.0.iter().map(|(_, s)| state(s)).collect();
    let clocks: Vec<u64> = stores.0.iter().map(|(_, s)| s.read_version()).collect();
    wal.close();

    // One snapshot per tenant is left, and the log no longer starts at 0.
    let files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(files.iter().filter(|f| f.ends_with(".snap")).count(), 2, "{files:?}");
    assert!(!files.iter().any(|f| f == &format!("{:020}.log", 0)), "{files:?}");

    let (wal, recovered) = recover(dir, small_segments());
    let got: Vec<_> = recovered.0.iter().map(|(_, s)| state(s)).collect();
    assert_eq!(got, expected, "recovered state differs");
    let total: i64 = (0..ACCOUNTS).map(|a| balance(&recovered.0[0].1, a).0).sum();
    assert_eq!(total, i64::from(ACCOUNTS) * START_BALANCE);
    for ((_, store), clock) in recovered.0.iter().zip(clocks) {
        assert!(store.read_version() >= clock, "the clock went back");
    }
    // And it goes on: a commit after recovery survives the next one.
    recovered.0[1].1.put("t", b"after", b"x").unwrap();
    wal.checkpoint(&recovered, &|| true).unwrap();
    recovered.0[1].1.put("t", b"after2", b"y").unwrap();
    wal.close();
    let (wal, again) = recover(dir, small_segments());
    assert_eq!(again.0[1].1.get("t", b"after").unwrap().unwrap().1, &b"x"[..]);
    assert_eq!(again.0[1].1.get("t", b"after2").unwrap().unwrap().1, &b"y"[..]);
    wal.close();
}

#[test]
fn a_damaged_snapshot_stops_the_start_with_its_name() {
    let dir = temp_dir("damaged");
    let dir = dir.path();
    let (wal, stores) = recover(dir, small_segments());
    stores.0[0].1.put("t", b"k", b"v").unwrap();
    wal.checkpoint(&stores, &|| true).unwrap();
    wal.close();
    let snapshot = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "snap"))
        .unwrap();
    let mut bytes = std::fs::read(&snapshot).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 1;
    std::fs::write(&snapshot, bytes).unwrap();
    let data = DataDir::lock(dir).unwrap();
    let store = TenantStore::new(QUOTA);
    let err = load_snapshots(&data, |_| Some(&store)).unwrap_err();
    assert!(matches!(err, WalError::Snapshot { .. }), "{err}");
    assert!(err.to_string().contains(".snap"), "{err}");
}

#[test]
fn an_abandoned_snapshot_leaves_the_last_good_state() {
    let dir = temp_dir("abandoned");
    let dir = dir.path();
    let (wal, stores) = recover(dir, small_segments());
    for i in 0..5000u32 {
        stores.0[0].1.put("t", &i.to_le_bytes(), b"v").unwrap();
    }
    let err = wal.checkpoint(&stores, &|| false).unwrap_err();
    assert!(matches!(err, WalError::Stopping), "{err}");
    stores.0[0].1.put("t", b"last", b"w").unwrap();
    wal.close();
    let (wal, recovered) = recover(dir, small_segments());
    assert_eq!(recovered.0[0].1.stats().objects, 5001);
    assert!(!std::fs::read_dir(dir)
        .unwrap()
        .any(|e| e.unwrap().file_name().to_string_lossy().ends_with(".tmp")));
    wal.close();
}

#[test]
fn a_gap_cut_at_recovery_leaves_no_segment_a_checkpoint_could_mistake_for_old() {
    let dir = temp_dir("gap");
    let dir = dir.path();
    let (wal, stores) = recover(dir, small_segments());
    for i in 0..100u32 {
        stores.0[0].1.put("t", &i.to_le_bytes(), b"before").unwrap();
    }
    let end = wal.appended_lsn();
    wal.close();
    // A crash between opening the next segment and writing the tail of this one leaves
    // an empty segment after a gap.
    std::fs::write(dir.join(format!("{:020}.log", end + 4096)), b"").unwrap();

    let data = DataDir::lock(dir).unwrap();
    let store = Arc::new(TenantStore::new(QUOTA));
    let recovered = replay(&data, &Default::default(), |_, commit| {
        store.recover_commit(commit.version, &commit.writes).unwrap();
        Ok(())
    })
    .unwrap();
    assert!(recovered.cut.is_some(), "the gap is reported");
    assert_eq!(recovered.end_lsn, end);
    let wal = Arc::new(Wal::open(data, small_segments(), &recovered).unwrap());
    assert!(store.attach_journal(wal.journal(ferry_proto::TenantId(1))).is_ok());
    let stores = Stores(vec![(1, store), (2, Arc::new(TenantStore::new(QUOTA)))]);
    stores.0[0].1.put("t", b"after", b"gap").unwrap();
    // The checkpoint's mark lies past where the empty segment started: with that segment
    // left behind, the live one looked old enough to remove.
    wal.checkpoint(&stores, &|| true).unwrap();
    stores.0[0].1.put("t", b"after2", b"checkpoint").unwrap();
    wal.close();

    let (wal, again) = recover(dir, small_segments());
    assert_eq!(again.0[0].1.get("t", b"after").unwrap().unwrap().1, &b"gap"[..]);
    assert_eq!(again.0[0].1.get("t", b"after2").unwrap().unwrap().1, &b"checkpoint"[..]);
    assert_eq!(again.0[0].1.stats().objects, 102);
    wal.close();
}
