//! What one write leaves on an object: for a commit (built aside, the object untouched
//! until it installs) and for a replay of the log or of a primary's stream (applied to
//! the stored value itself).
//!
//! A write of changes applies to the value at its base version and only there. A replay
//! starts from a snapshot or a copy taken while commits went on, so it meets writes the
//! copy already holds: a write whose base is older than the object's version is one of
//! those and is skipped, as is one about an object the copy holds as absent (a later
//! delete in the copy already erased it; the write that created it again, if any, comes
//! later in the log and applies). A base newer than a present object's version means a
//! write went missing: the replay stops with an error rather than guess.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use ferry_value::{change, Encodings, Entry};

use super::{charge, hex, TenantStore, Write, WriteRef};
use crate::error::StoreError;
use crate::locks::{shown, Shard};
use crate::VERSION_ABSENT;

/// Stands in the map for an entry taken out while a command changes it; never seen by
/// a reader (the shard is write-locked meanwhile).
pub(super) fn placeholder() -> Entry {
    Entry::string(Bytes::new())
}

/// Applies encoded `changes` to `entry`.
fn apply_changes(
    entry: &mut Option<Entry>,
    changes: &[u8],
    encodings: &Encodings,
    key: &[u8],
) -> Result<(), StoreError> {
    let damaged = |why: String| StoreError::Replay(format!("changes of key {}: {why}", hex(key)));
    let changes =
        change::decode(&Bytes::copy_from_slice(changes), encodings).map_err(|_| damaged("not readable".into()))?;
    for change in &changes {
        change.apply(entry, encodings).map_err(|err| damaged(err.to_string()))?;
    }
    Ok(())
}

/// The entry `write` leaves on an object now at `current` (its version and entry; `None`:
/// absent), built without touching it: changes apply to a copy, and only at their base.
pub(super) fn entry_after(
    write: &WriteRef<'_>,
    current: Option<(u64, &Entry)>,
    encodings: &Encodings,
) -> Result<Option<Entry>, StoreError> {
    match write.write {
        Write::Put(bytes) => Ok(Some(Entry::decode(&Bytes::copy_from_slice(bytes), encodings))),
        Write::Delete => Ok(None),
        Write::Changes { base, changes } => {
            let version = current.map_or(VERSION_ABSENT, |(version, _)| version);
            if version != base {
                return Err(StoreError::Conflict {
                    table: write.table.to_string(),
                    key_hex: hex(write.key),
                    read_version: base,
                    current_version: version,
                });
            }
            let mut entry = current.map(|(_, entry)| entry.clone());
            apply_changes(&mut entry, changes, encodings, write.key)?;
            Ok(entry)
        }
    }
}

impl TenantStore {
    /// Replays `write` of the commit `version` on its object in `shard` (held for
    /// writing), in place, charging the quota without refusing (the write was admitted
    /// where it was first made).
    pub(super) fn replay_write(
        &self,
        shard: &mut Shard,
        write: &WriteRef<'_>,
        version: u64,
        encodings: &Encodings,
    ) -> Result<(), StoreError> {
        let key = write.key;
        let (current, old_charge) = shard
            .get(key)
            .map_or((VERSION_ABSENT, 0), |o| (o.version, charge(key, &o.entry)));
        let before = shard.get(key).map(|o| shown(&o.entry));
        let entry = match write.write {
            Write::Put(bytes) => Some(Entry::decode(&Bytes::copy_from_slice(bytes), encodings)),
            Write::Delete => None,
            Write::Changes { base, changes } => {
                if base != current {
                    if current != VERSION_ABSENT && base > current {
                        return Err(StoreError::Replay(format!(
                            "changes of key {} apply to version {base}, but the copy holds version {current} and no write between",
                            hex(key)
                        )));
                    }
                    // Already in the copy, or about a value the copy holds deleted.
                    self.clock.fetch_max(version, Ordering::AcqRel);
                    return Ok(());
                }
                let mut entry = shard
                    .get_mut(key)
                    .map(|object| std::mem::replace(&mut object.entry, placeholder()));
                let applied = apply_changes(&mut entry, changes, encodings, key);
                if let Err(err) = applied {
                    // The value as far as it got goes back; the replay stops.
                    if let (Some(object), Some(entry)) = (shard.get_mut(key), entry) {
                        object.entry = entry;
                    }
                    return Err(err);
                }
                entry
            }
        };
        let new_charge = entry.as_ref().map_or(0, |entry| charge(key, entry));
        self.place_after(shard, key, version, entry, before);
        if new_charge >= old_charge {
            self.used_bytes.fetch_add(new_charge - old_charge, Ordering::AcqRel);
        } else {
            self.used_bytes.fetch_sub(old_charge - new_charge, Ordering::AcqRel);
        }
        self.clock.fetch_max(version, Ordering::AcqRel);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use ferry_value::{Change, Entry};
    use parking_lot::Mutex;

    use super::*;
    use crate::journal::{Journal, JournalRefusal};

    /// A write as kept: key and what happens to it, owned.
    #[derive(Clone, Debug)]
    enum Kept {
        Put(Vec<u8>),
        Delete,
        Changes(u64, Vec<u8>),
    }

    /// One record: its version and its writes by key.
    type Record = (u64, Vec<(Vec<u8>, Kept)>);

    /// Keeps every record whole, as a log does.
    #[derive(Default)]
    struct Log(Mutex<Vec<Record>>);

    impl Journal for Log {
        fn record(&self, version: u64, writes: &[WriteRef<'_>]) -> Result<(), JournalRefusal> {
            let kept = writes
                .iter()
                .map(|w| {
                    let kept = match w.write {
                        Write::Put(value) => Kept::Put(value.to_vec()),
                        Write::Delete => Kept::Delete,
                        Write::Changes { base, changes } => Kept::Changes(base, changes.to_vec()),
                    };
                    (w.key.to_vec(), kept)
                })
                .collect();
            self.0.lock().push((version, kept));
            Ok(())
        }
    }

    fn b(text: &str) -> Bytes {
        Bytes::copy_from_slice(text.as_bytes())
    }

    fn apply(store: &TenantStore, key: &str, change: Change) {
        store
            .update("t", &[b(key)], true, &[], 0, |slots, encodings| {
                let _ = slots[0].tracked.apply(change.clone(), encodings);
            })
            .unwrap();
    }

    fn replay(store: &TenantStore, records: &[Record]) -> Result<(), StoreError> {
        for (version, writes) in records {
            let refs: Vec<WriteRef<'_>> = writes
                .iter()
                .map(|(key, kept)| WriteRef {
                    table: "t",
                    key,
                    write: match kept {
                        Kept::Put(value) => Write::Put(value),
                        Kept::Delete => Write::Delete,
                        Kept::Changes(base, changes) => Write::Changes { base: *base, changes },
                    },
                })
                .collect();
            store.recover_commit(*version, &refs)?;
        }
        Ok(())
    }

    /// The history the tests replay: a list pushed and popped, a hash set and emptied
    /// (deleted), a key created again after its delete.
    fn history(store: &TenantStore) {
        for i in 0..5 {
            apply(
                store,
                "list",
                Change::ListPush {
                    left: i % 2 == 0,
                    items: vec![b(&format!("i{i}"))],
                },
            );
            apply(store, "hash", Change::HashSet(b(&format!("f{i}")), b("v")));
        }
        apply(store, "list", Change::ListPop { left: true, count: 2 });
        apply(store, "hash", Change::Delete);
        apply(store, "hash", Change::HashSet(b("again"), b("1")));
        apply(store, "string", Change::Replace(Entry::string(b("s"))));
        apply(store, "string", Change::Append(b("!")));
        apply(store, "list", Change::Expire(Some(9_999)));
    }

    #[test]
    fn a_copy_taken_while_commits_went_on_plus_the_log_from_its_mark_is_the_state() {
        let source = TenantStore::new(1 << 20);
        let log = Arc::new(Log::default());
        source.attach_journal(log.clone()).ok().unwrap();
        history(&source);
        let records = log.0.lock().clone();
        // Every place the mark and the copy could be: the copy holds at least what the
        // mark covers and maybe some records after it, on some keys and not others.
        for mark in 0..records.len() {
            for copied_to in mark..=records.len() {
                let copy = TenantStore::new(1 << 20);
                replay(&copy, &records[..copied_to]).unwrap();
                let snapshot: Vec<(Bytes, u64, Bytes)> = ["list", "hash", "string"]
                    .iter()
                    .filter_map(|key| {
                        copy.get("t", key.as_bytes())
                            .unwrap()
                            .map(|(v, bytes)| (b(key), v, bytes))
                    })
                    .collect();
                let restored = TenantStore::new(1 << 20);
                for (key, version, bytes) in &snapshot {
                    restored.recover_object("t", key, *version, bytes).unwrap();
                }
                replay(&restored, &records[mark..]).unwrap();
                assert_eq!(
                    restored.table_snapshot("t"),
                    source.table_snapshot("t"),
                    "mark {mark}, copy to {copied_to}"
                );
            }
        }
    }

    #[test]
    fn changes_with_no_write_of_their_base_stop_the_replay() {
        let source = TenantStore::new(1 << 20);
        let log = Arc::new(Log::default());
        source.attach_journal(log.clone()).ok().unwrap();
        history(&source);
        let records = log.0.lock().clone();
        // Record 2 (the list's second push) is lost: its third push has no base.
        let mut damaged = records.clone();
        damaged.remove(2);
        let store = TenantStore::new(1 << 20);
        let err = replay(&store, &damaged[..4]).unwrap_err();
        assert!(matches!(err, StoreError::Replay(_)), "{err}");
    }
}
