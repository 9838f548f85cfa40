//! What OBJECT reports of one key: its encoding, how long since it was used (the LRU
//! stamp) or how often (the LFU counter, under an LFU policy), and its handles.

use std::sync::atomic::Ordering;

use ferry_value::Value;

use super::{check_key, TenantStore};
use crate::error::StoreError;
use crate::eviction::{self, Stamping, LRU_RESOLUTION_MS};
use crate::locks::shard_of;

/// OBJECT's view of a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectInfo {
    /// OBJECT ENCODING's answer.
    pub encoding: &'static str,
    /// Milliseconds since the key was last used (`None` under an LFU policy, which keeps
    /// a frequency instead).
    pub idle_ms: Option<u64>,
    /// LFU's logarithmic access counter (`None` unless the policy is an LFU one).
    pub frequency: Option<u8>,
    /// Holders of the value: the store, and readers holding it at this moment.
    pub refcount: usize,
    /// What it costs against the tenant's memory limit (MEMORY USAGE): its key, its value
    /// as held and the per-object overhead.
    pub memory_bytes: u64,
}

impl TenantStore {
    /// OBJECT's view of `key` of `table` at `now_ms`; `None` if it is absent or expired.
    /// Looking does not count as a use (as in Redis).
    pub fn object_info(&self, table: &str, key: &[u8], now_ms: u64) -> Result<Option<ObjectInfo>, StoreError> {
        check_key(key)?;
        let tables = self.tables.read();
        let Some(found) = tables.get(table) else {
            return Ok(None);
        };
        let shard = found.shards[shard_of(key)].read();
        let Some(object) = shard.get(key).filter(|object| !object.entry.expired(now_ms)) else {
            return Ok(None);
        };
        let stamp = object.access.load(Ordering::Relaxed);
        let clock = eviction::lru_clock(now_ms);
        let (idle_ms, frequency) = match self.eviction().stamps() {
            Stamping::Lru => (
                Some(u64::from(eviction::lru_idle(stamp, clock)) * LRU_RESOLUTION_MS),
                None,
            ),
            Stamping::Lfu => (None, Some(eviction::lfu_decayed(stamp, clock))),
        };
        let refcount = match &object.entry.value {
            Value::Hash(hash) => std::sync::Arc::strong_count(hash),
            Value::List(list) => std::sync::Arc::strong_count(list),
            Value::Set(set) => std::sync::Arc::strong_count(set),
            Value::ZSet(zset) => std::sync::Arc::strong_count(zset),
            Value::Str(_) | Value::Int(_) | Value::Raw(_) => 1,
        };
        Ok(Some(ObjectInfo {
            memory_bytes: super::charge(key, &object.entry),
            encoding: object.entry.value.encoding(),
            idle_ms,
            frequency,
            refcount,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EvictionPolicy;

    #[test]
    fn idle_time_and_frequency_follow_the_policy() {
        let store = TenantStore::new(1 << 20);
        store.set_clock_ms(10_000);
        store.put("t", b"k", b"v").unwrap();
        store.set_clock_ms(15_000);
        let info = store.object_info("t", b"k", 15_000).unwrap().unwrap();
        assert_eq!(
            (info.encoding, info.idle_ms, info.frequency),
            ("raw", Some(5_000), None)
        );
        store.get("t", b"k").unwrap();
        assert_eq!(store.object_info("t", b"k", 15_000).unwrap().unwrap().idle_ms, Some(0));
        store.set_eviction(EvictionPolicy::AllKeysLfu);
        store.put("t", b"f", b"v").unwrap();
        let info = store.object_info("t", b"f", 15_000).unwrap().unwrap();
        assert_eq!((info.idle_ms, info.frequency), (None, Some(eviction::LFU_INIT)));
        assert_eq!(store.object_info("t", b"absent", 15_000).unwrap(), None);
    }
}
