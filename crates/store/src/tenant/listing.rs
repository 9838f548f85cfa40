//! A table's objects listed for the commands over a whole database (KEYS, SCAN, FLUSHDB),
//! sampled for active expiry, and counted for INFO's keyspace section.

use bytes::Bytes;

use super::TenantStore;

/// A table's count of keys, as INFO's keyspace section shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableKeys {
    /// The table's name.
    pub table: String,
    /// Objects in it (expired ones not yet deleted included, as Redis counts them).
    pub keys: u64,
    /// Of those, the ones with an expiry.
    pub expires: u64,
}

/// A key and what the commands over a whole database, and active expiry, need of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyInfo {
    /// The key.
    pub key: Bytes,
    /// Its value's type (TYPE's answer).
    pub type_name: &'static str,
    /// When it expires, in milliseconds since the Unix epoch.
    pub expires_at_ms: Option<u64>,
}

pub(super) fn info_of(key: &Bytes, object: &crate::locks::Object) -> KeyInfo {
    KeyInfo {
        key: key.clone(),
        type_name: object.entry.value.type_name(),
        expires_at_ms: object.entry.expires_at_ms,
    }
}

impl TenantStore {
    /// Every table that holds objects, with its counts, in name order. O(n) in the
    /// tenant's objects (Redis keeps a second dictionary of the expiring ones; ferry does
    /// not), each shard under its lock in turn.
    pub fn keyspace(&self) -> Vec<TableKeys> {
        let tables = self.tables.read();
        let mut out: Vec<TableKeys> = tables
            .iter()
            .filter_map(|(name, table)| {
                let (mut keys, mut expires) = (0u64, 0u64);
                for shard in &table.shards {
                    let shard = shard.read();
                    keys += shard.len() as u64;
                    expires += shard
                        .values()
                        .filter(|object| object.entry.expires_at_ms.is_some())
                        .count() as u64;
                }
                (keys > 0).then(|| TableKeys {
                    table: name.clone(),
                    keys,
                    expires,
                })
            })
            .collect();
        out.sort_by(|a, b| a.table.cmp(&b.table));
        out
    }

    /// Every key of a table with its type and expiry, in no order: what a command over a
    /// whole database (KEYS, SCAN, FLUSHDB) reads. Each shard is read under its lock in
    /// turn, so the list is not one snapshot; O(n) in the table's objects.
    pub fn objects(&self, table: &str) -> Vec<KeyInfo> {
        let tables = self.tables.read();
        let Some(table) = tables.get(table) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for shard in &table.shards {
            out.extend(shard.read().iter().map(|(key, object)| info_of(key, object)));
        }
        out
    }

    /// Up to `count` keys of a table, from a place `seed` picks: the keys after a
    /// pseudo-random position in a pseudo-random shard, then the next shards'. What
    /// active expiry samples (Redis samples keys at random the same way). O(objects of
    /// one shard) for the skip, under that shard's lock alone.
    pub fn sample(&self, table: &str, count: usize, seed: u64) -> Vec<KeyInfo> {
        let tables = self.tables.read();
        let Some(table) = tables.get(table) else {
            return Vec::new();
        };
        let shards = table.shards.len();
        let mut out = Vec::with_capacity(count);
        for step in 0..shards {
            if out.len() >= count {
                break;
            }
            let shard = table.shards[(seed as usize).wrapping_add(step) % shards].read();
            let skip = if step == 0 && !shard.is_empty() {
                ((seed >> 32) as usize) % shard.len()
            } else {
                0
            };
            let wanted = count - out.len();
            out.extend(
                shard
                    .iter()
                    .skip(skip)
                    .take(wanted)
                    .map(|(key, object)| info_of(key, object)),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::{TenantStore, WriteRef};

    #[test]
    fn the_keyspace_counts_keys_and_expiries_of_tables_that_hold_any() {
        let store = TenantStore::new(1 << 30);
        let expiring = ferry_value::Entry {
            value: ferry_value::Value::Str(bytes::Bytes::from_static(b"v")),
            expires_at_ms: Some(1),
        }
        .encode();
        for i in 0..30u32 {
            let value: &[u8] = if i % 3 == 0 { &expiring } else { b"v" };
            store.put("db1", &i.to_be_bytes(), value).unwrap();
        }
        store.put("db0", b"k", b"v").unwrap();
        store.put("gone", b"k", b"v").unwrap();
        store.delete("gone", b"k").unwrap();
        let keyspace = store.keyspace();
        let counts: Vec<(&str, u64, u64)> = keyspace.iter().map(|t| (t.table.as_str(), t.keys, t.expires)).collect();
        assert_eq!(counts, vec![("db0", 1, 0), ("db1", 30, 10)]);
    }

    #[test]
    fn a_sample_is_bounded_and_every_object_can_be_drawn() {
        let store = TenantStore::new(1 << 30);
        assert!(store.sample("t", 5, 7).is_empty(), "no table");
        for i in 0..200u32 {
            let key = i.to_be_bytes();
            let write = WriteRef::put("t", &key, b"v");
            store.commit(&[], &[write]).unwrap();
        }
        let mut seen = std::collections::HashSet::new();
        for seed in 0..2_000u64 {
            let sample = store.sample("t", 5, seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            assert_eq!(sample.len(), 5);
            seen.extend(sample.into_iter().map(|info| info.key));
        }
        assert_eq!(seen.len(), 200, "every object turns up in some sample");
        assert_eq!(store.sample("t", 500, 3).len(), 200, "never more than the table holds");
    }
}
