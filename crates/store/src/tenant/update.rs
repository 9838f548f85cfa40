//! Commands run on the stored values themselves: [`TenantStore::update`] locks the keys'
//! shards, hands the command the entries as [`Slot`]s (taken out of the store when it may
//! write, so a change to a value nobody else holds is made in place: a push on a long
//! list touches one node, not the list), then charges, logs and installs what the
//! command changed at one new version. The log gets the changes, each applying to the
//! version the key had (`Write::Changes`), not the values.
//!
//! Why no optimistic validation is needed: the command runs under the write locks of
//! every key it names, so nothing it read can change before it installs; a reader at a
//! read version (TL2) sees the new version only once it is installed, as for a commit.
//! If the limit or the log refuses, every change is taken back (each change carries its
//! undo), the entries go back unchanged, and nobody saw anything.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;

use bytes::Bytes;
use ferry_value::{change, Encodings, Slot};
use smallvec::SmallVec;

use super::replay::placeholder;
use super::{charge, check_key, check_table_name, evict, hex, TenantStore, Write, WriteRef};
use crate::error::StoreError;
use crate::limits::MAX_TX_OBJECTS;
use crate::locks::{shown, LockPlan, LockedShards, Shown};
use crate::VERSION_ABSENT;

/// What [`TenantStore::update`] did.
#[derive(Debug, PartialEq, Eq)]
pub struct Updated<R> {
    /// What the command gave.
    pub outcome: R,
    /// The version its changes were installed at (0: it changed nothing).
    pub version: u64,
}

/// A key a transaction watches (WATCH before MULTI): its token then, its version if it
/// existed and had not expired (`None` otherwise). EXEC runs only if every token is
/// still the same.
#[derive(Clone, Copy, Debug)]
pub struct Watched<'a> {
    /// Its table.
    pub table: &'a str,
    /// The key.
    pub key: &'a [u8],
    /// Its token when watched.
    pub token: Option<u64>,
}

/// A key as found when its entry was handed to the command.
#[derive(Clone, Copy)]
struct Found {
    /// Its version (0: absent).
    version: u64,
    /// What it cost against the quota.
    charge: u64,
    /// What a listing showed of it (`None`: absent).
    shown: Option<Shown>,
}

impl TenantStore {
    /// Runs `run` over the entries of `keys` of `table` (each handed once, in the order
    /// first named) under their shards' locks: write locks if `write`, and then the
    /// changes the slots record are installed at one new version; read locks otherwise
    /// (the slots hold handles, and a change is refused by the caller's executor). If a
    /// key of `watched` no longer has its token at `now_ms`, nothing runs: `Ok(None)`
    /// (EXEC after a WATCH). When the changes do not fit the memory limit and the policy
    /// evicts, room is made and `run` runs again.
    pub fn update<R>(
        &self,
        table: &str,
        keys: &[Bytes],
        write: bool,
        watched: &[Watched<'_>],
        now_ms: u64,
        mut run: impl FnMut(&mut [Slot], &Encodings) -> R,
    ) -> Result<Option<Updated<R>>, StoreError> {
        let mut outcome = self.update_once(table, keys, write, (watched, now_ms), &mut run);
        for _ in 0..evict::MAX_ROOM_ROUNDS {
            match outcome {
                Err(StoreError::QuotaExceeded { needed_bytes, .. }) if self.make_room(needed_bytes) => {
                    outcome = self.update_once(table, keys, write, (watched, now_ms), &mut run);
                }
                _ => break,
            }
        }
        outcome
    }

    /// The token WATCH keeps of `key`: its version if it exists and has not expired at
    /// `now_ms`.
    pub fn watch_token(&self, table: &str, key: &[u8], now_ms: u64) -> Result<Option<u64>, StoreError> {
        check_key(key)?;
        let tables = self.tables.read();
        let Some(found) = tables.get(table) else {
            return Ok(None);
        };
        let shard = found.shards[crate::locks::shard_of(key)].read();
        Ok(shard
            .get(key)
            .filter(|object| !object.entry.expired(now_ms))
            .map(|object| object.version))
    }

    fn update_once<R>(
        &self,
        table: &str,
        keys: &[Bytes],
        write: bool,
        (watched, now_ms): (&[Watched<'_>], u64),
        run: &mut impl FnMut(&mut [Slot], &Encodings) -> R,
    ) -> Result<Option<Updated<R>>, StoreError> {
        if keys.len() + watched.len() > MAX_TX_OBJECTS {
            return Err(StoreError::TooManyObjects(keys.len() + watched.len()));
        }
        check_table_name(table)?;
        for key in keys {
            check_key(key)?;
        }
        if write {
            self.ensure_table(table)?;
        }
        let encodings = self.encodings();
        let tables = self.tables.read();
        let found_table = tables.get_key_value(table);
        let mut plan = LockPlan::with_capacity(keys.len() + watched.len());
        if let Some((name, found)) = found_table {
            for key in keys {
                plan.add(name, found, key, write);
            }
        }
        for object in watched {
            if let Some((name, found)) = tables.get_key_value(object.table) {
                plan.add(name, found, object.key, false);
            }
        }
        let mut locked = plan.lock();
        for object in watched {
            let token = if tables.contains_key(object.table) {
                locked
                    .get(object.table, object.key)
                    .filter(|o| !o.entry.expired(now_ms))
                    .map(|o| o.version)
            } else {
                None
            };
            if token != object.token {
                return Ok(None);
            }
        }

        let mut slots: SmallVec<[Slot; 4]> = SmallVec::new();
        let mut found: SmallVec<[Found; 4]> = SmallVec::new();
        for key in keys {
            if slots.iter().any(|slot| slot.key == *key) {
                continue;
            }
            let entry = match found_table {
                None => None,
                Some(_) if write => {
                    let shard = locked.shard_mut(table, key);
                    shard.get_mut(&key[..]).map(|object| {
                        self.touch(object);
                        (object.version, std::mem::replace(&mut object.entry, placeholder()))
                    })
                }
                Some(_) => locked.get(table, key).map(|object| {
                    self.touch(object);
                    (object.version, object.entry.clone())
                }),
            };
            found.push(Found {
                version: entry.as_ref().map_or(VERSION_ABSENT, |(version, _)| *version),
                charge: entry.as_ref().map_or(0, |(_, entry)| charge(key, entry)),
                shown: entry.as_ref().map(|(_, entry)| shown(entry)),
            });
            slots.push(Slot::new(key.clone(), entry.map(|(_, entry)| entry)));
        }

        let outcome = match catch_unwind(AssertUnwindSafe(|| run(&mut slots, &encodings))) {
            Ok(outcome) => outcome,
            Err(panic) => {
                if write {
                    self.restore(&mut locked, table, &mut slots, &encodings);
                }
                resume_unwind(panic);
            }
        };
        if !write || slots.iter().all(|slot| !slot.tracked.changed()) {
            if write {
                self.restore(&mut locked, table, &mut slots, &encodings);
            }
            // The handles go while the locks are held: a writer waiting for them then
            // finds the values held by the store alone and changes them in place.
            drop(slots);
            return Ok(Some(Updated {
                outcome,
                version: VERSION_ABSENT,
            }));
        }

        let (mut grow, mut shrink) = (0u64, 0u64);
        for (slot, before) in slots.iter().zip(&found) {
            if slot.tracked.changed() {
                let after = slot.tracked.entry().map_or(0, |entry| charge(&slot.key, entry));
                if after >= before.charge {
                    grow += after - before.charge;
                } else {
                    shrink += before.charge - after;
                }
            }
        }
        let net_grow = match self.charge_net(grow, shrink, Some(self.limit_bytes())) {
            Ok(net_grow) => net_grow,
            Err(refused) => {
                self.restore(&mut locked, table, &mut slots, &encodings);
                return Err(refused);
            }
        };

        let _installing = self.installing.read();
        let version = self.clock.fetch_add(1, Ordering::AcqRel) + 1;
        if let Some(journal) = self.journal.get() {
            let mut logged = Vec::new();
            let mut spans = SmallVec::<[(usize, usize); 4]>::new();
            for slot in slots.iter().filter(|slot| slot.tracked.changed()) {
                let start = logged.len();
                if slot.tracked.entry().is_some() {
                    change::encode(slot.tracked.changes(), &mut logged);
                }
                spans.push((start, logged.len()));
            }
            let writes: SmallVec<[WriteRef<'_>; 4]> = slots
                .iter()
                .zip(&found)
                .filter(|(slot, _)| slot.tracked.changed())
                .zip(&spans)
                .map(|((slot, before), &(start, end))| WriteRef {
                    table,
                    key: &slot.key,
                    write: match slot.tracked.entry() {
                        None => Write::Delete,
                        Some(_) => Write::Changes {
                            base: before.version,
                            changes: &logged[start..end],
                        },
                    },
                })
                .collect();
            let refused = journal.record(version, &writes).err();
            drop(writes);
            if let Some(refusal) = refused {
                self.uncharge(net_grow);
                self.restore(&mut locked, table, &mut slots, &encodings);
                return Err(StoreError::Journal(refusal.0));
            }
        }
        for (slot, before) in slots.iter_mut().zip(&found) {
            let shard = locked.shard_mut(table, &slot.key);
            if slot.tracked.changed() {
                let entry = slot.tracked.take_entry();
                self.place_after(shard, &slot.key, version, entry, before.shown);
            } else if let (Some(object), Some(entry)) = (shard.get_mut(&slot.key[..]), slot.tracked.take_entry()) {
                object.entry = entry;
            }
        }
        self.commits.fetch_add(1, Ordering::Relaxed);
        drop(slots);
        Ok(Some(Updated { outcome, version }))
    }

    /// Takes back every change of `slots` and puts their entries back where they were
    /// taken from (a key absent before stays absent).
    fn restore(&self, locked: &mut LockedShards<'_>, table: &str, slots: &mut [Slot], encodings: &Encodings) {
        for slot in slots.iter_mut() {
            slot.tracked.rollback(encodings);
            let shard = locked.shard_mut(table, &slot.key);
            match (shard.get_mut(&slot.key[..]), slot.tracked.take_entry()) {
                (Some(object), Some(entry)) => object.entry = entry,
                (None, None) => {}
                // Invariant: the store held the key exactly when the slot was handed an entry.
                (object, entry) => panic!(
                    "restoring key {}: the store held it {} and the slot {}",
                    hex(&slot.key),
                    object.is_some(),
                    entry.is_some()
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use ferry_value::{Change, Entry, Value};
    use parking_lot::Mutex;

    use super::*;
    use crate::journal::{Journal, JournalRefusal};

    const QUOTA: u64 = 64 << 20;

    fn b(text: &str) -> Bytes {
        Bytes::copy_from_slice(text.as_bytes())
    }

    /// One record as kept: its version, and each write's key and kind.
    type Record = (u64, Vec<(Vec<u8>, String)>);

    /// Keeps the records it is given, or refuses them all.
    #[derive(Default)]
    struct Recorder {
        refuse: bool,
        records: Mutex<Vec<Record>>,
    }

    impl Journal for Recorder {
        fn record(&self, version: u64, writes: &[WriteRef<'_>]) -> Result<(), JournalRefusal> {
            if self.refuse {
                return Err(JournalRefusal("disk full".into()));
            }
            let writes = writes
                .iter()
                .map(|w| {
                    let kind = match w.write {
                        Write::Put(_) => "put".to_string(),
                        Write::Delete => "delete".to_string(),
                        Write::Changes { base, changes } => format!("changes@{base}:{}", changes.len()),
                    };
                    (w.key.to_vec(), kind)
                })
                .collect();
            self.records.lock().push((version, writes));
            Ok(())
        }
    }

    /// Pushes `item` on list `key` through the update path.
    fn push(store: &TenantStore, key: &str, item: &str) -> u64 {
        store
            .update("t", &[b(key)], true, &[], 0, |slots, encodings| {
                slots[0]
                    .tracked
                    .apply(
                        Change::ListPush {
                            left: false,
                            items: vec![b(item)],
                        },
                        encodings,
                    )
                    .unwrap();
            })
            .unwrap()
            .unwrap()
            .version
    }

    fn list_of(store: &TenantStore, key: &str) -> Vec<Vec<u8>> {
        let (_, bytes) = store.get("t", key.as_bytes()).unwrap().unwrap();
        match Entry::decode(&bytes, &Default::default()).value {
            Value::List(list) => list.iter().map(<[u8]>::to_vec).collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn changes_are_made_in_place_and_logged_as_changes_at_their_base() {
        let store = TenantStore::new(QUOTA);
        let journal = Arc::new(Recorder::default());
        store.attach_journal(journal.clone()).ok().unwrap();
        let first = push(&store, "q", "a");
        // The value is the same allocation after another push: changed in place.
        let address = |store: &TenantStore| {
            let tables = store.tables.read();
            let shard = tables["t"].shards[crate::locks::shard_of(b"q")].read();
            match &shard[&b"q"[..]].entry.value {
                Value::List(list) => Arc::as_ptr(list) as usize,
                other => panic!("{other:?}"),
            }
        };
        let before = address(&store);
        let second = push(&store, "q", "b");
        assert_eq!(
            address(&store),
            before,
            "a push on a value nobody else holds copies nothing"
        );
        assert!(second > first);
        assert_eq!(list_of(&store, "q"), vec![b"a".to_vec(), b"b".to_vec()]);
        let records = journal.records.lock();
        assert_eq!(records[0].1, vec![(b"q".to_vec(), "changes@0:6".to_string())]);
        assert_eq!(records[1].1, vec![(b"q".to_vec(), format!("changes@{first}:6"))]);
    }

    #[test]
    fn a_refused_record_takes_every_change_back() {
        let store = TenantStore::new(QUOTA);
        push(&store, "q", "a");
        let before = store.stats();
        store
            .attach_journal(Arc::new(Recorder {
                refuse: true,
                ..Default::default()
            }))
            .ok()
            .unwrap();
        let refused = store.update("t", &[b("q"), b("new")], true, &[], 0, |slots, encodings| {
            for slot in slots.iter_mut() {
                slot.tracked.apply(Change::Delete, encodings).unwrap();
                slot.tracked
                    .apply(Change::Replace(Entry::string(b("x"))), encodings)
                    .unwrap();
            }
        });
        assert_eq!(refused, Err(StoreError::Journal("disk full".into())));
        assert_eq!(list_of(&store, "q"), vec![b"a".to_vec()]);
        assert_eq!(store.get("t", b"new").unwrap(), None);
        let after = store.stats();
        assert_eq!(
            (after.used_bytes, after.objects, after.commits),
            (before.used_bytes, before.objects, before.commits)
        );
    }

    #[test]
    fn a_change_past_the_limit_is_refused_and_taken_back() {
        let store = TenantStore::new(200);
        let grow = |store: &TenantStore, len: usize| {
            store.update("t", &[b("k")], true, &[], 0, |slots, encodings| {
                slots[0]
                    .tracked
                    .apply(Change::Replace(Entry::string(Bytes::from(vec![b'x'; len]))), encodings)
                    .unwrap();
            })
        };
        grow(&store, 10).unwrap();
        let used = store.stats().used_bytes;
        assert!(matches!(grow(&store, 500), Err(StoreError::QuotaExceeded { .. })));
        assert_eq!(store.stats().used_bytes, used);
        assert_eq!(store.get("t", b"k").unwrap().unwrap().1.len(), 10);
    }

    #[test]
    fn a_changed_watched_key_stops_the_update_before_it_runs() {
        let store = TenantStore::new(QUOTA);
        let version = push(&store, "w", "a");
        let watched = |token| {
            [Watched {
                table: "t",
                key: b"w",
                token,
            }]
        };
        let ran = store
            .update("t", &[b("other")], true, &watched(Some(version)), 0, |_, _| ())
            .unwrap();
        assert!(ran.is_some());
        push(&store, "w", "b");
        let stopped = store
            .update("t", &[b("other")], true, &watched(Some(version)), 0, |_, _| {
                panic!("must not run")
            })
            .unwrap();
        assert!(stopped.is_none());
        // An expired key's token is none, as WATCH gave it.
        store
            .update("t", &[b("w")], true, &[], 0, |slots, encodings| {
                slots[0].tracked.apply(Change::Expire(Some(100)), encodings).unwrap();
            })
            .unwrap();
        assert_eq!(store.watch_token("t", b"w", 100).unwrap(), None);
        assert!(store
            .update("t", &[], true, &watched(None), 100, |_, _| ())
            .unwrap()
            .is_some());
    }

    #[test]
    fn a_read_hands_copies_of_handles_and_changes_nothing() {
        let store = TenantStore::new(QUOTA);
        push(&store, "q", "a");
        let seen = store
            .update("t", &[b("q"), b("absent")], false, &[], 0, |slots, _| {
                (slots[0].tracked.entry().is_some(), slots[1].tracked.entry().is_none())
            })
            .unwrap()
            .unwrap();
        assert_eq!(
            seen,
            Updated {
                outcome: (true, true),
                version: 0
            }
        );
        assert_eq!(store.stats().commits, 1);
    }

    #[test]
    fn a_panicking_command_leaves_the_values_as_they_were() {
        let store = TenantStore::new(QUOTA);
        push(&store, "q", "a");
        let caught = std::panic::catch_unwind(AssertUnwindSafe(|| {
            store.update("t", &[b("q")], true, &[], 0, |slots, encodings| {
                slots[0].tracked.apply(Change::Delete, encodings).unwrap();
                panic!("a bug in a command");
            })
        }));
        assert!(caught.is_err());
        assert_eq!(list_of(&store, "q"), vec![b"a".to_vec()]);
    }
}
