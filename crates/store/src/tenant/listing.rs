//! A table's objects listed for the commands over a whole database (KEYS, SCAN, FLUSHDB).

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
}
