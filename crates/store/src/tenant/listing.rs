//! A table's objects listed for the commands over a whole database (KEYS, SCAN, FLUSHDB),
//! and sampled for active expiry.

use bytes::Bytes;

use super::TenantStore;

impl TenantStore {
    /// Every object of a table as its key and value, in no order: what a command over a
    /// whole database (KEYS, SCAN, FLUSHDB) reads. Each shard is read under its lock in
    /// turn, so the list is not one snapshot; O(n) in the table's objects.
    pub fn objects(&self, table: &str) -> Vec<(Bytes, Bytes)> {
        let tables = self.tables.read();
        let Some(table) = tables.get(table) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for shard in &table.shards {
            out.extend(
                shard
                    .read()
                    .iter()
                    .map(|(key, object)| (key.clone(), object.value.clone())),
            );
        }
        out
    }

    /// Up to `count` objects of a table, as key and value, from a place `seed` picks: the
    /// objects after a pseudo-random position in a pseudo-random shard, then the next
    /// shards'. What active expiry samples (Redis samples keys at random the same way).
    /// O(objects of one shard) for the skip, under that shard's lock alone.
    pub fn sample(&self, table: &str, count: usize, seed: u64) -> Vec<(Bytes, Bytes)> {
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
                    .map(|(key, object)| (key.clone(), object.value.clone())),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::{TenantStore, WriteRef};

    #[test]
    fn a_sample_is_bounded_and_every_object_can_be_drawn() {
        let store = TenantStore::new(1 << 30);
        assert!(store.sample("t", 5, 7).is_empty(), "no table");
        for i in 0..200u32 {
            let key = i.to_be_bytes();
            let write = WriteRef {
                table: "t",
                key: &key,
                value: Some(b"v"),
            };
            store.commit(&[], &[write]).unwrap();
        }
        let mut seen = std::collections::HashSet::new();
        for seed in 0..2_000u64 {
            let sample = store.sample("t", 5, seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            assert_eq!(sample.len(), 5);
            seen.extend(sample.into_iter().map(|(key, _)| key));
        }
        assert_eq!(seen.len(), 200, "every object turns up in some sample");
        assert_eq!(store.sample("t", 500, 3).len(), 200, "never more than the table holds");
    }
}
