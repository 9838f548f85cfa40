//! The transaction state of one invocation: what it read (with versions) and what it wants
//! to write. Both `Ctx` implementations keep one, so read-your-writes, repeatable reads and
//! the read/write sets sent to OCC validation are the same wherever a function runs.

use std::collections::HashMap;

use bytes::Bytes;

use ferry_proto::{CommitWrite, InvokeTrace, ListedKey, PushbackRead, ReadVersion};

use crate::ctx::{CtxError, Listed};

/// Most distinct objects one invocation may read, and separately write: bounds the memory
/// of its sets and the locks its commit takes (matches the protocol's per-message limit).
pub const MAX_TX_ENTRIES: usize = 4096;

/// An object read by the transaction: which, at what version, and the value seen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxRead {
    /// The object and the version seen (0 = absent).
    pub object: ReadVersion,
    /// Value seen (`None` = absent, or not fetched: see `partial`).
    pub value: Option<Bytes>,
    /// Only the version is known: a command ran where the value is and returned part of
    /// it (`Ctx::read_part`). The value is fetched, at the same version, if it is needed.
    pub partial: bool,
}

/// Finds entries of one set by (table, key) without allocating: a map from a 64-bit hash
/// of (table, key) to the first entry with that hash, and a chain through entries that
/// share it. Lookups compare hashes first, then the table and key themselves.
#[derive(Debug, Default)]
struct Index {
    first: HashMap<u64, u32, ahash::RandomState>,
    /// For entry i: the next entry with the same hash, if any.
    next: Vec<Option<u32>>,
}

/// FNV-1a over the table, a separator and the key: cheap, and collisions only cost a
/// comparison because the chain is checked exactly.
fn hash_of(table: &str, key: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in table.as_bytes().iter().chain(std::iter::once(&0xff)).chain(key) {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

impl Index {
    fn find(&self, hash: u64, matches: impl Fn(usize) -> bool) -> Option<usize> {
        let mut at = self.first.get(&hash).copied();
        while let Some(index) = at {
            if matches(index as usize) {
                return Some(index as usize);
            }
            at = self.next[index as usize];
        }
        None
    }

    /// Registers entry `index` (the next one pushed) under `hash`.
    fn push(&mut self, hash: u64, index: usize) {
        debug_assert_eq!(index, self.next.len());
        let previous = self.first.insert(hash, index as u32);
        self.next.push(previous);
    }

    fn clear(&mut self) {
        self.first.clear();
        self.next.clear();
    }
}

/// Read set and write buffer of one invocation attempt.
#[derive(Debug, Default)]
pub struct TxState {
    reads: Vec<TxRead>,
    writes: Vec<CommitWrite>,
    read_index: Index,
    write_index: Index,
}

impl TxState {
    /// An empty transaction.
    pub fn new() -> TxState {
        TxState::default()
    }

    fn find_read(&self, hash: u64, table: &str, key: &[u8]) -> Option<usize> {
        self.read_index.find(hash, |i| {
            self.reads[i].object.table == table && self.reads[i].object.key == key
        })
    }

    fn find_write(&self, hash: u64, table: &str, key: &[u8]) -> Option<usize> {
        self.write_index
            .find(hash, |i| self.writes[i].table == table && self.writes[i].key == key)
    }

    /// What this transaction already knows of an object without asking storage: its own
    /// buffered write, else what it read before. `None` when it must be fetched.
    pub fn lookup(&self, table: &str, key: &[u8]) -> Option<Option<Bytes>> {
        let hash = hash_of(table, key);
        if let Some(index) = self.find_write(hash, table, key) {
            return Some(self.writes[index].value.clone());
        }
        self.find_read(hash, table, key)
            .filter(|index| !self.reads[*index].partial)
            .map(|index| self.reads[index].value.clone())
    }

    /// Records a value fetched from storage with its version (the first read of an object
    /// wins: later reads are served from the set, which is what makes reads repeatable).
    /// The value of an object read only in part must come at the version that read saw.
    pub fn record_read(&mut self, table: &str, key: Bytes, version: u64, value: Option<Bytes>) -> Result<(), CtxError> {
        let hash = hash_of(table, &key);
        if let Some(index) = self.find_read(hash, table, &key) {
            let read = &mut self.reads[index];
            if read.partial {
                if read.object.version != version {
                    return Err(CtxError::Conflict(format!(
                        "{table} key of {} bytes changed from version {} to {version} within the invocation",
                        key.len(),
                        read.object.version
                    )));
                }
                read.value = value;
                read.partial = false;
            }
            return Ok(());
        }
        if self.reads.len() >= MAX_TX_ENTRIES {
            return Err(CtxError::Refused(format!(
                "invocation read more than {MAX_TX_ENTRIES} objects"
            )));
        }
        self.read_index.push(hash, self.reads.len());
        self.reads.push(TxRead {
            object: ReadVersion {
                table: table.to_string(),
                key,
                version,
            },
            value,
            partial: false,
        });
        Ok(())
    }

    /// Records that a command read part of an object at `version` where the object is
    /// (`Ctx::read_part`): the object joins the read set, its value stays unfetched. A
    /// second such read must see the same version (it does, at one snapshot).
    pub fn record_partial(&mut self, table: &str, key: &[u8], version: u64) -> Result<(), CtxError> {
        let hash = hash_of(table, key);
        if let Some(index) = self.find_read(hash, table, key) {
            let known = self.reads[index].object.version;
            return if known == version {
                Ok(())
            } else {
                Err(CtxError::Conflict(format!(
                    "{table} key of {} bytes changed from version {known} to {version} within the invocation",
                    key.len()
                )))
            };
        }
        self.record_read(table, Bytes::copy_from_slice(key), version, None)?;
        if let Some(read) = self.reads.last_mut() {
            read.partial = true;
        }
        Ok(())
    }

    /// Buffers a write (a later write to the same object replaces the earlier one).
    pub fn buffer_write(&mut self, table: &str, key: &[u8], value: Option<Bytes>) -> Result<(), CtxError> {
        let hash = hash_of(table, key);
        if let Some(index) = self.find_write(hash, table, key) {
            self.writes[index].value = value;
            return Ok(());
        }
        if self.writes.len() >= MAX_TX_ENTRIES {
            return Err(CtxError::Refused(format!(
                "invocation wrote more than {MAX_TX_ENTRIES} objects"
            )));
        }
        self.write_index.push(hash, self.writes.len());
        self.writes.push(CommitWrite {
            table: table.to_string(),
            key: Bytes::copy_from_slice(key),
            value,
        });
        Ok(())
    }

    /// Which of `keys` of `table` this transaction must still fetch (neither read nor
    /// written yet), in order.
    pub fn missing<'k>(&self, table: &str, keys: &[&'k [u8]]) -> Vec<&'k [u8]> {
        keys.iter()
            .copied()
            .filter(|key| self.lookup(table, key).is_none())
            .collect()
    }

    /// The values of `keys` of `table` as this transaction sees them, after the runtime
    /// fetched every key [`TxState::missing`] named.
    pub fn known(&self, table: &str, keys: &[&[u8]]) -> Result<Vec<Option<Bytes>>, CtxError> {
        keys.iter()
            .map(|key| {
                self.lookup(table, key)
                    .ok_or_else(|| CtxError::Unavailable(format!("{table} key of {} bytes was not fetched", key.len())))
            })
            .collect()
    }

    /// Records the listing of `table` made at read version `version` (the first listing
    /// of a table stands, as the first read of an object does).
    pub fn record_listing(&mut self, table: &str, version: u64) -> Result<(), CtxError> {
        self.record_read(table, Bytes::new(), version, None)
    }

    /// `stored`, the keys of `table` listed from storage, as this transaction sees them:
    /// a key it wrote shows its buffered value (or is gone, deleted), and the keys it
    /// created are added.
    pub fn overlay(&self, table: &str, stored: Vec<ListedKey>) -> Vec<Listed> {
        let mut out: Vec<Listed> = stored
            .into_iter()
            .filter(|listed| {
                self.find_write(hash_of(table, &listed.key), table, &listed.key)
                    .is_none()
            })
            .map(Listed::Known)
            .collect();
        out.extend(
            self.writes
                .iter()
                .filter(|write| write.table == table)
                .filter_map(|write| {
                    write.value.as_ref().map(|value| Listed::Value {
                        key: write.key.clone(),
                        value: value.clone(),
                    })
                }),
        );
        out
    }

    /// The read set in protocol form, for validation by the storage node.
    pub fn read_versions(&self) -> Vec<ReadVersion> {
        self.read_objects().cloned().collect()
    }

    /// The objects read and the versions seen, in the order first read.
    pub fn read_objects(&self) -> impl Iterator<Item = &ReadVersion> {
        self.reads.iter().map(|read| &read.object)
    }

    /// The read set with the values read, as a pushback hands it to the client.
    pub fn reads_with_values(&self) -> Vec<PushbackRead> {
        self.reads
            .iter()
            .map(|read| PushbackRead {
                read: read.object.clone(),
                value: read.value.clone(),
            })
            .collect()
    }

    /// A transaction that starts from reads another runtime already made (a pushback):
    /// later reads of those objects are served from them, not fetched again.
    pub fn preloaded(reads: &[PushbackRead]) -> Result<TxState, CtxError> {
        let mut tx = TxState::new();
        for read in reads {
            tx.record_read(
                &read.read.table,
                read.read.key.clone(),
                read.read.version,
                read.value.clone(),
            )?;
        }
        Ok(tx)
    }

    /// The write set in protocol form, for a commit.
    pub fn commit_writes(&self) -> Vec<CommitWrite> {
        self.writes.clone()
    }

    /// What this transaction read and, committed at `installed`, wrote: the record a
    /// history checker takes (`installed` is ignored when it wrote nothing).
    pub fn trace(&self, installed: u64) -> InvokeTrace {
        InvokeTrace {
            // A listing is no object's version: a history of objects leaves it out.
            reads: self
                .read_versions()
                .into_iter()
                .filter(|read| !read.is_listing())
                .collect(),
            writes: self
                .writes
                .iter()
                .map(|write| ReadVersion {
                    table: write.table.clone(),
                    key: write.key.clone(),
                    version: installed,
                })
                .collect(),
        }
    }

    /// The read set in the order objects were first read.
    pub fn reads(&self) -> &[TxRead] {
        &self.reads
    }

    /// The write set in the order objects were first written.
    pub fn writes(&self) -> &[CommitWrite] {
        &self.writes
    }

    /// Forgets everything, for a retry.
    pub fn clear(&mut self) {
        self.reads.clear();
        self.writes.clear();
        self.read_index.clear();
        self.write_index.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_shows_the_transactions_own_writes_and_joins_the_read_set() {
        let mut tx = TxState::new();
        let stored = |key: &'static [u8]| ListedKey {
            key: Bytes::from_static(key),
            type_name: "string",
            expires_at_ms: None,
        };
        tx.buffer_write("t", b"changed", Some(Bytes::from_static(b"v2")))
            .unwrap();
        tx.buffer_write("t", b"gone", None).unwrap();
        tx.buffer_write("t", b"new", Some(Bytes::from_static(b"v"))).unwrap();
        tx.buffer_write("other", b"elsewhere", Some(Bytes::from_static(b"v")))
            .unwrap();
        let listed = tx.overlay("t", vec![stored(b"kept"), stored(b"changed"), stored(b"gone")]);
        assert_eq!(
            listed,
            vec![
                Listed::Known(stored(b"kept")),
                Listed::Value {
                    key: Bytes::from_static(b"changed"),
                    value: Bytes::from_static(b"v2")
                },
                Listed::Value {
                    key: Bytes::from_static(b"new"),
                    value: Bytes::from_static(b"v")
                },
            ]
        );
        tx.record_listing("t", 7).unwrap();
        tx.record_listing("t", 9).unwrap();
        assert_eq!(
            tx.read_versions(),
            vec![ReadVersion::listing("t", 7)],
            "the first stands"
        );
        assert!(tx.trace(0).reads.is_empty(), "no object was read");
    }

    #[test]
    fn a_part_read_keeps_its_version_and_the_value_must_come_at_it() {
        let mut tx = TxState::new();
        tx.record_partial("t", b"h", 5).unwrap();
        assert_eq!(tx.lookup("t", b"h"), None, "the value was not fetched");
        assert_eq!(tx.missing("t", &[b"h"]), vec![&b"h"[..]]);
        tx.record_partial("t", b"h", 5).unwrap();
        assert!(matches!(tx.record_partial("t", b"h", 6), Err(CtxError::Conflict(_))));
        // The value at another version: a conflict; at the same one, it is known now.
        let value = Some(Bytes::from_static(b"v"));
        assert!(matches!(
            tx.record_read("t", Bytes::from_static(b"h"), 6, value.clone()),
            Err(CtxError::Conflict(_))
        ));
        tx.record_read("t", Bytes::from_static(b"h"), 5, value.clone()).unwrap();
        assert_eq!(tx.lookup("t", b"h"), Some(value));
        assert_eq!(tx.read_versions().len(), 1);
    }

    #[test]
    fn writes_shadow_reads_and_reads_are_repeatable() {
        let mut tx = TxState::new();
        assert_eq!(tx.lookup("t", b"k"), None);
        tx.record_read("t", Bytes::from_static(b"k"), 3, Some(Bytes::from_static(b"old")))
            .unwrap();
        // A second fetch of the same object does not replace the first version seen.
        tx.record_read("t", Bytes::from_static(b"k"), 9, Some(Bytes::from_static(b"new")))
            .unwrap();
        assert_eq!(tx.lookup("t", b"k"), Some(Some(Bytes::from_static(b"old"))));
        assert_eq!(tx.reads()[0].object.version, 3);
        tx.buffer_write("t", b"k", None).unwrap();
        assert_eq!(tx.lookup("t", b"k"), Some(None));
        tx.buffer_write("t", b"k", Some(Bytes::from_static(b"mine"))).unwrap();
        assert_eq!(tx.lookup("t", b"k"), Some(Some(Bytes::from_static(b"mine"))));
        assert_eq!(tx.writes().len(), 1);
        tx.clear();
        assert_eq!(tx.lookup("t", b"k"), None);
    }

    #[test]
    fn colliding_hashes_are_told_apart() {
        // Regression guard for the hash index: entries sharing a hash bucket must still be
        // matched exactly (forced here by filling one chain through the real index).
        let mut index = Index::default();
        index.push(7, 0);
        index.push(7, 1);
        index.push(9, 2);
        assert_eq!(index.find(7, |i| i == 0), Some(0));
        assert_eq!(index.find(7, |i| i == 1), Some(1));
        assert_eq!(index.find(7, |i| i == 2), None);
        assert_eq!(index.find(9, |i| i == 2), Some(2));
        let mut tx = TxState::new();
        for i in 0..200u32 {
            tx.record_read("t", Bytes::copy_from_slice(&i.to_le_bytes()), u64::from(i) + 1, None)
                .unwrap();
        }
        for i in 0..200u32 {
            assert_eq!(tx.lookup("t", &i.to_le_bytes()), Some(None));
            assert_eq!(tx.lookup("u", &i.to_le_bytes()), None, "other table");
        }
        assert_eq!(tx.reads().len(), 200);
    }

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    /// A transaction that read `a` (v3) and `gone` (absent) and wrote `b` and deleted `a`.
    fn sample() -> TxState {
        let mut tx = TxState::new();
        tx.record_read("t", b("a"), 3, Some(b("A"))).unwrap();
        tx.record_read("t", b("gone"), 0, None).unwrap();
        tx.buffer_write("t", b"b", Some(b("B"))).unwrap();
        tx.buffer_write("t", b"a", None).unwrap();
        tx
    }

    #[test]
    fn missing_and_known_follow_the_read_and_write_sets() {
        // Catches `missing` and `known` returning constants.
        let mut tx = sample();
        let keys: [&[u8]; 4] = [b"a", b"b", b"c", b"gone"];
        assert_eq!(tx.missing("t", &keys), vec![b"c" as &[u8]]);
        assert_eq!(tx.missing("u", &keys[..2]), vec![b"a" as &[u8], b"b"]);
        assert!(matches!(tx.known("t", &keys), Err(CtxError::Unavailable(_))));
        tx.record_read("t", b("c"), 5, Some(b("C"))).unwrap();
        assert!(tx.missing("t", &keys).is_empty());
        assert_eq!(
            tx.known("t", &keys).unwrap(),
            vec![None, Some(b("B")), Some(b("C")), None],
            "own delete, own write, storage read, absent"
        );
    }

    #[test]
    fn protocol_forms_carry_every_entry_in_order() {
        // Catches `read_versions`, `reads_with_values`, `commit_writes`, `trace` and
        // `preloaded` returning empty or default values.
        let tx = sample();
        let read = |key: &str, version| ReadVersion {
            table: "t".into(),
            key: b(key),
            version,
        };
        assert_eq!(tx.read_versions(), vec![read("a", 3), read("gone", 0)]);
        let with_values = tx.reads_with_values();
        assert_eq!(
            with_values,
            vec![
                PushbackRead {
                    read: read("a", 3),
                    value: Some(b("A"))
                },
                PushbackRead {
                    read: read("gone", 0),
                    value: None
                },
            ]
        );
        assert_eq!(
            tx.commit_writes(),
            vec![
                CommitWrite {
                    table: "t".into(),
                    key: b("b"),
                    value: Some(b("B"))
                },
                CommitWrite {
                    table: "t".into(),
                    key: b("a"),
                    value: None
                },
            ]
        );
        let trace = tx.trace(42);
        assert_eq!(trace.reads, tx.read_versions());
        assert_eq!(trace.writes, vec![read("b", 42), read("a", 42)]);
        // A pushed-back transaction resumes from the same reads.
        let resumed = TxState::preloaded(&with_values).unwrap();
        assert_eq!(resumed.read_versions(), tx.read_versions());
        assert_eq!(resumed.lookup("t", b"a"), Some(Some(b("A"))));
        assert_eq!(resumed.lookup("t", b"gone"), Some(None));
        assert!(resumed.writes().is_empty());
    }

    #[test]
    fn sets_are_bounded() {
        let mut tx = TxState::new();
        for i in 0..MAX_TX_ENTRIES as u32 {
            tx.buffer_write("t", &i.to_le_bytes(), None).unwrap();
        }
        assert!(tx.buffer_write("t", b"one more", None).is_err());
        // Rewriting an object already in the set is still fine.
        tx.buffer_write("t", &0u32.to_le_bytes(), None).unwrap();
    }
}
