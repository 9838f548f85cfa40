//! Limits at their exact boundaries, the quota's accounting and the error classification
//! the protocol's statuses come from. Written to kill the mutants `cargo mutants` found
//! surviving in the store (scripts/mutants.sh): each test names the ones it catches.

use ferry_store::limits::{
    MAX_KEY_BYTES, MAX_TABLE_NAME_BYTES, MAX_TX_OBJECTS, MAX_VALUE_BYTES, OBJECT_OVERHEAD_BYTES,
};
use ferry_store::tenant::{check_key, check_table_name, check_value};
use ferry_store::{ObjectRef, StoreError, TenantStore, WriteRef};

const QUOTA: u64 = 64 << 20;

/// Catches `>` → `>=` and `>` → `==` in the length checks, and `||` → `&&` in the table
/// name check (an empty name would pass).
#[test]
fn every_length_limit_admits_its_maximum_and_refuses_one_more() {
    assert!(check_key(&vec![b'k'; MAX_KEY_BYTES]).is_ok());
    assert_eq!(
        check_key(&vec![b'k'; MAX_KEY_BYTES + 1]),
        Err(StoreError::KeyTooLarge(MAX_KEY_BYTES + 1))
    );
    assert_eq!(check_key(b""), Err(StoreError::EmptyKey));
    assert!(check_value(&vec![0; MAX_VALUE_BYTES]).is_ok());
    assert!(check_value(b"").is_ok());
    assert_eq!(
        check_value(&vec![0; MAX_VALUE_BYTES + 1]),
        Err(StoreError::ValueTooLarge(MAX_VALUE_BYTES + 1))
    );
    assert!(check_table_name(&"t".repeat(MAX_TABLE_NAME_BYTES)).is_ok());
    assert!(check_table_name(&"t".repeat(MAX_TABLE_NAME_BYTES + 1)).is_err());
    assert!(check_table_name(&"t".repeat(MAX_TABLE_NAME_BYTES + 7)).is_err());
    assert!(check_table_name("").is_err());
    assert!(check_table_name("a b").is_err());
    assert!(check_table_name("users_v2.idx-1").is_ok());
}

/// Catches `+` → `*` in the per-object charge and `-` → `+` when a commit shrinks more
/// than it grows.
#[test]
fn the_quota_charges_key_value_and_overhead_and_gives_back_what_shrinks() {
    let store = TenantStore::new(QUOTA);
    store.put("t", b"key", &[7; 100]).unwrap();
    let one = 3 + 100 + OBJECT_OVERHEAD_BYTES;
    assert_eq!(store.stats().used_bytes, one);
    store.put("t", b"other", &[7; 10]).unwrap();
    assert_eq!(store.stats().used_bytes, one + 5 + 10 + OBJECT_OVERHEAD_BYTES);
    // Shrink the first object: only the difference is given back.
    store.put("t", b"key", &[7; 40]).unwrap();
    assert_eq!(store.stats().used_bytes, 3 + 40 + 2 * OBJECT_OVERHEAD_BYTES + 5 + 10);
    store.delete("t", b"key").unwrap();
    assert_eq!(store.stats().used_bytes, 5 + 10 + OBJECT_OVERHEAD_BYTES);
    assert_eq!(store.stats().objects, 1);
    // One commit that grows one object by 10 bytes and shrinks another by 50 gives back 40.
    store.put("t", b"key", &[7; 100]).unwrap();
    let before = store.stats().used_bytes;
    let writes = [
        WriteRef::put("t", b"other", &[7; 20]),
        WriteRef::put("t", b"key", &[7; 50]),
    ];
    store.commit(&[], &writes).unwrap();
    assert_eq!(store.stats().used_bytes, before - 40);
}

#[test]
fn a_write_past_the_quota_is_refused_and_changes_nothing() {
    let quota = 2 * (1 + 100 + OBJECT_OVERHEAD_BYTES);
    let store = TenantStore::new(quota);
    store.put("t", b"a", &[1; 100]).unwrap();
    store.put("t", b"b", &[1; 100]).unwrap();
    let refused = store.put("t", b"c", &[1; 1]).unwrap_err();
    assert!(matches!(refused, StoreError::QuotaExceeded { .. }), "{refused}");
    assert_eq!(store.get("t", b"c").unwrap(), None);
    assert_eq!(store.stats().used_bytes, quota);
}

/// Catches `+` → `*` in counting a transaction's objects and `>` → `>=` / `==` in the
/// limit: the count adds what it validates, reads and writes, and MAX_TX_OBJECTS passes.
#[test]
fn a_transaction_may_touch_exactly_max_tx_objects() {
    let store = TenantStore::new(QUOTA);
    let keys: Vec<Vec<u8>> = (0..=MAX_TX_OBJECTS as u32).map(|i| i.to_le_bytes().to_vec()).collect();
    let writes =
        |n: usize| -> Vec<WriteRef<'_>> { keys[..n].iter().map(|key| WriteRef::put("t", key, b"v")).collect() };
    assert_eq!(
        store.commit(&[], &writes(MAX_TX_OBJECTS + 1)),
        Err(StoreError::TooManyObjects(MAX_TX_OBJECTS + 1))
    );
    assert!(store.commit(&[], &writes(MAX_TX_OBJECTS)).is_ok());
    // Validation entries count too, alone and together with reads.
    let validate: Vec<ObjectRef<'_>> = keys
        .iter()
        .map(|key| ObjectRef {
            table: "t",
            key,
            version: 0,
        })
        .collect();
    assert_eq!(
        store.read_validated("t", &[b"x"], &validate[..MAX_TX_OBJECTS]),
        Err(StoreError::TooManyObjects(MAX_TX_OBJECTS + 1))
    );
    assert!(matches!(
        store.read_validated("t", &[], &validate[..MAX_TX_OBJECTS + 1]),
        Err(StoreError::TooManyObjects(_))
    ));
}

/// Catches `is_limit` returning a constant: a limit becomes `too_large` on the wire, a
/// conflict must not.
#[test]
fn limit_errors_are_limits_and_nothing_else_is() {
    let store = TenantStore::new(QUOTA);
    let limits = [
        check_key(&vec![b'k'; MAX_KEY_BYTES + 1]).unwrap_err(),
        check_value(&vec![0; MAX_VALUE_BYTES + 1]).unwrap_err(),
        StoreError::TooManyObjects(MAX_TX_OBJECTS + 1),
        TenantStore::new(1).put("t", b"k", b"v").unwrap_err(),
    ];
    for err in &limits {
        assert!(err.is_limit(), "{err} is a limit");
    }
    store.put("t", b"k", b"v").unwrap();
    let stale = [ObjectRef {
        table: "t",
        key: b"k",
        version: 0,
    }];
    let conflict = store.commit(&stale, &[]).unwrap_err();
    for err in [conflict, StoreError::EmptyKey, check_table_name("").unwrap_err()] {
        assert!(!err.is_limit(), "{err} is not a limit");
    }
}

/// Catches the key in a conflict's message being dropped or never shortened: the message
/// is what a user sees of a conflict, so it names the key in hex, cut after 32 bytes.
#[test]
fn a_conflict_names_its_key_in_hex_shortened_past_32_bytes() {
    let store = TenantStore::new(QUOTA);
    for key in [vec![0xab; 32], vec![0xab; 33], vec![0xab; 31]] {
        store.put("t", &key, b"v").unwrap();
        let stale = [ObjectRef {
            table: "t",
            key: &key,
            version: 0,
        }];
        let message = store.commit(&stale, &[]).unwrap_err().to_string();
        let shown = "ab".repeat(key.len().min(32));
        assert!(message.contains(&format!("t/{shown}")), "{message}");
        assert_eq!(message.contains('…'), key.len() > 32, "{message}");
    }
}

#[test]
fn table_names_lists_every_table_created_sorted() {
    let store = TenantStore::new(QUOTA);
    assert!(store.table_names().is_empty());
    for table in ["zeta", "alpha", "mid"] {
        store.put(table, b"k", b"v").unwrap();
    }
    assert_eq!(store.table_names(), vec!["alpha", "mid", "zeta"]);
}
