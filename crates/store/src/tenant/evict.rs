//! Making room for a write past the tenant's memory limit: the policy's best of a few
//! sampled keys is removed, each removal a commit of its own (a delete at a version, so the
//! log, the replicas and every transaction that read the key see it like any delete), until
//! the write fits. Only a primary evicts: a replica applies its primary's deletes.

use std::cell::Cell;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::{ObjectRef, TenantStore, WriteRef};
use crate::eviction::{
    self, EvictionPolicy, MAXMEMORY_SAMPLES, MAX_EVICTIONS_PER_WRITE, MAX_SAMPLES_PER_EVICTION,
    NEVER_EVICTED_TABLE_PREFIX,
};
use crate::limits::SHARDS_PER_TABLE;
use crate::locks::Object;
use crate::StoreError;

/// Times a write that does not fit makes room and tries again (a concurrent write may take
/// the room first).
pub(super) const MAX_ROOM_ROUNDS: usize = 3;

thread_local! {
    /// Per thread, so readers stamping LFU counters share no cache line.
    static RANDOM: Cell<u64> = const { Cell::new(0x9E37_79B9_7F4A_7C15) };
}

/// A pseudo-random number (xorshift64*): for LFU's growth odds and sampling, not secrets.
fn random() -> u64 {
    RANDOM.with(|state| {
        let mut x = state.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        state.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    })
}

/// A key chosen for eviction, with the version it was sampled at.
struct Victim {
    table: String,
    key: Bytes,
    version: u64,
}

impl TenantStore {
    /// The eviction policy in force.
    pub fn eviction(&self) -> EvictionPolicy {
        EvictionPolicy::from_code(self.eviction.load(Ordering::Relaxed))
    }

    /// Sets the eviction policy (Redis's `CONFIG SET maxmemory-policy`).
    pub fn set_eviction(&self, policy: EvictionPolicy) {
        self.eviction.store(policy.code(), Ordering::Relaxed);
    }

    /// The memory limit in force.
    pub fn limit_bytes(&self) -> u64 {
        self.limit_bytes.load(Ordering::Relaxed)
    }

    /// Whether the tenant uses more than its limit and its policy evicts nothing: a write
    /// that grows memory cannot succeed, so it is refused before it runs (Redis's check
    /// before a `denyoom` command). Under an evicting policy the commit makes room instead
    /// and is refused only if it cannot.
    pub fn out_of_memory(&self) -> bool {
        self.eviction() == EvictionPolicy::NoEviction && self.used_bytes.load(Ordering::Relaxed) > self.limit_bytes()
    }

    /// The quota as configured: the highest limit [`TenantStore::set_limit_bytes`] takes.
    pub fn ceiling_bytes(&self) -> u64 {
        self.ceiling_bytes
    }

    /// Sets the memory limit (Redis's `CONFIG SET maxmemory`; 0 is the quota, as Redis's 0
    /// is no limit of its own). Above the quota it is refused with the quota. Lowering it
    /// under what is in use refuses growth (or, with an evicting policy, evicts at the next
    /// write), as in Redis.
    pub fn set_limit_bytes(&self, bytes: u64) -> Result<(), u64> {
        if bytes > self.ceiling_bytes {
            return Err(self.ceiling_bytes);
        }
        let limit = if bytes == 0 { self.ceiling_bytes } else { bytes };
        self.limit_bytes.store(limit, Ordering::Relaxed);
        Ok(())
    }

    /// Advances the clock access stamps are taken from; the node calls it as time passes
    /// (this crate reads no clock). Without it every stamp is equal and LRU evicts at random.
    pub fn set_clock_ms(&self, now_ms: u64) {
        self.lru_clock.store(eviction::lru_clock(now_ms), Ordering::Relaxed);
    }

    /// Records an access to `object`: its LRU stamp, or LFU's under an LFU policy.
    pub(crate) fn touch(&self, object: &Object) {
        let stamping = self.eviction().stamps();
        let clock = self.lru_clock.load(Ordering::Relaxed);
        let old = object.access.load(Ordering::Relaxed);
        let new = eviction::touched(stamping, old, clock, random());
        if new != old {
            object.access.store(new, Ordering::Relaxed);
        }
    }

    /// The access stamp of an object being written over `old` (None: a new key). An
    /// overwrite counts as an access and keeps LFU's count, as in Redis.
    pub(crate) fn stamp_of_write(&self, old: Option<&Object>) -> u32 {
        let stamping = self.eviction().stamps();
        let clock = self.lru_clock.load(Ordering::Relaxed);
        match old {
            Some(old) => eviction::touched(stamping, old.access.load(Ordering::Relaxed), clock, random()),
            None => eviction::new_stamp(stamping, clock),
        }
    }

    /// Evicts keys until `needed_bytes` more fit under the limit; false if the policy does
    /// not evict or cannot free enough (no candidate left, or [`MAX_EVICTIONS_PER_WRITE`]).
    pub(super) fn make_room(&self, needed_bytes: u64) -> bool {
        let policy = self.eviction();
        if policy == EvictionPolicy::NoEviction || needed_bytes > self.limit_bytes() {
            return false;
        }
        for _ in 0..MAX_EVICTIONS_PER_WRITE {
            if self.used_bytes.load(Ordering::Acquire) + needed_bytes <= self.limit_bytes() {
                return true;
            }
            let Some(victim) = self.pick_victim(policy) else {
                return false;
            };
            let read = ObjectRef {
                table: &victim.table,
                key: &victim.key,
                version: victim.version,
            };
            let delete = WriteRef::delete(&victim.table, &victim.key);
            // Conditional on the version sampled: a key written meanwhile is ranked again.
            match self.transact_once(&[read], &[], &[delete], super::Room::Limit) {
                Ok(_) => {
                    self.evicted_keys.fetch_add(1, Ordering::Relaxed);
                }
                Err(StoreError::Conflict { .. }) => {}
                Err(_) => return false,
            }
        }
        self.used_bytes.load(Ordering::Acquire) + needed_bytes <= self.limit_bytes()
    }

    /// The policy's best candidate among [`MAXMEMORY_SAMPLES`] keys drawn at random: runs
    /// of consecutive keys from random places of random shards (as Redis's
    /// `dictGetSomeKeys`), skipping keys the policy may not take.
    fn pick_victim(&self, policy: EvictionPolicy) -> Option<Victim> {
        let tables: Vec<(String, _)> = self
            .tables
            .read()
            .iter()
            .filter(|(name, _)| !name.starts_with(NEVER_EVICTED_TABLE_PREFIX))
            .map(|(name, table)| (name.clone(), std::sync::Arc::clone(table)))
            .collect();
        if tables.is_empty() {
            return None;
        }
        let clock = self.lru_clock.load(Ordering::Relaxed);
        let mut best: Option<(u64, Victim)> = None;
        let mut sampled = 0;
        for _ in 0..MAX_SAMPLES_PER_EVICTION {
            if sampled >= MAXMEMORY_SAMPLES {
                break;
            }
            let draw = random();
            let (name, table) = &tables[(draw % tables.len() as u64) as usize];
            let shard = table.shards[((draw >> 20) % SHARDS_PER_TABLE as u64) as usize].read();
            if shard.is_empty() {
                continue;
            }
            let from = ((draw >> 32) % shard.len() as u64) as usize;
            for (key, object) in shard.iter().skip(from).take(MAXMEMORY_SAMPLES - sampled) {
                let expires_at_ms = object.entry.expires_at_ms;
                if policy.volatile_only() && expires_at_ms.is_none() {
                    continue;
                }
                sampled += 1;
                let rank = policy.rank(object.access.load(Ordering::Relaxed), expires_at_ms, clock, random());
                if best.as_ref().is_none_or(|(best_rank, _)| rank > *best_rank) {
                    let victim = Victim {
                        table: name.clone(),
                        key: key.clone(),
                        version: object.version,
                    };
                    best = Some((rank, victim));
                }
            }
        }
        best.map(|(_, victim)| victim)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALUE: [u8; 100] = [7u8; 100];

    fn key(i: u32) -> Vec<u8> {
        format!("key{i:05}").into_bytes()
    }

    #[test]
    fn an_allow_oom_commit_may_pass_the_limit_but_never_the_quota() {
        let store = TenantStore::new(10_000);
        store.put("t", b"a", &VALUE).unwrap();
        store.set_limit_bytes(1).unwrap();
        let write = [WriteRef::put("t", b"b", &VALUE)];
        assert!(matches!(
            store.commit(&[], &write),
            Err(StoreError::QuotaExceeded { .. })
        ));
        store.commit_allow_oom(&[], &write).unwrap();
        let huge = vec![0u8; 20_000];
        let past_quota = [WriteRef::put("t", b"c", &huge)];
        assert!(matches!(
            store.commit_allow_oom(&[], &past_quota),
            Err(StoreError::QuotaExceeded {
                quota_bytes: 10_000,
                ..
            })
        ));
    }

    /// A store with room for about 100 keys of 100 bytes.
    fn store(policy: EvictionPolicy) -> TenantStore {
        let store = TenantStore::new(100 * (8 + 100 + crate::limits::OBJECT_OVERHEAD_BYTES));
        store.set_eviction(policy);
        store
    }

    #[test]
    fn noeviction_refuses_the_write_that_does_not_fit() {
        let store = store(EvictionPolicy::NoEviction);
        let refused = (0..200).find(|i| store.put("db0", &key(*i), &VALUE).is_err());
        assert_eq!(refused, Some(100));
        assert_eq!(store.stats().evicted_keys, 0);
        // Full is not over: a write that fits in place may still come.
        assert!(!store.out_of_memory());
        store.set_limit_bytes(1).unwrap();
        assert!(store.out_of_memory());
        store.set_eviction(EvictionPolicy::AllKeysRandom);
        assert!(!store.out_of_memory(), "an evicting policy makes room at the commit");
    }

    #[test]
    fn allkeys_lru_makes_room_and_keeps_the_keys_read_recently() {
        let store = store(EvictionPolicy::AllKeysLru);
        for i in 0..100 {
            store.put("db0", &key(i), &VALUE).unwrap();
        }
        // Ten keys are read at a later time than the rest were written.
        store.set_clock_ms(60_000);
        for i in 0..10 {
            store.get("db0", &key(i)).unwrap().unwrap();
        }
        for i in 100..150 {
            store.put("db0", &key(i), &VALUE).expect("room is made");
        }
        let stats = store.stats();
        assert!(stats.used_bytes <= stats.quota_bytes);
        assert!(stats.evicted_keys >= 50, "{stats:?}");
        // Sampled LRU is approximate; the ten read ones are the freshest of the old keys,
        // so nearly all survive (each eviction would need all five samples among them).
        let kept = (0..10)
            .filter(|i| store.get("db0", &key(*i)).unwrap().is_some())
            .count();
        assert!(kept >= 8, "kept {kept} of the 10 recently read keys");
    }

    #[test]
    fn volatile_policies_take_only_keys_with_an_expiry_and_never_ferry_tables() {
        let store = store(EvictionPolicy::VolatileTtl);
        let expiring = |at: u64| {
            ferry_value::Entry {
                value: ferry_value::Value::Str(Bytes::copy_from_slice(&VALUE)),
                expires_at_ms: Some(at),
            }
            .encode()
        };
        for i in 0..50 {
            store.put("ferry.lua", &key(i), &VALUE).unwrap();
        }
        for i in 50..90 {
            store.put("db0", &key(i), &VALUE).unwrap();
        }
        for i in 90..100 {
            store.put("db0", &key(i), &expiring(u64::from(i))).unwrap();
        }
        // Room for ten more is made from the ten expiring keys alone, soonest first.
        for i in 100..110 {
            store.put("db0", &key(i), &VALUE).expect("an expiring key is evicted");
        }
        assert!((50..90).all(|i| store.get("db0", &key(i)).unwrap().is_some()));
        assert!((0..50).all(|i| store.get("ferry.lua", &key(i)).unwrap().is_some()));
        assert!((90..100).all(|i| store.get("db0", &key(i)).unwrap().is_none()));
        // None left to take: the next write is refused.
        let refused = store.put("db0", &key(200), &VALUE).unwrap_err();
        assert!(matches!(refused, StoreError::QuotaExceeded { .. }), "{refused}");
    }

    #[test]
    fn the_limit_is_set_under_the_quota_and_zero_restores_it() {
        let store = TenantStore::new(10_000);
        assert_eq!(store.set_limit_bytes(20_000), Err(10_000));
        store.set_limit_bytes(1_000).unwrap();
        assert_eq!(store.stats().quota_bytes, 1_000);
        assert!(store.put("db0", b"k", &[0u8; 2_000]).is_err());
        store.set_limit_bytes(0).unwrap();
        assert_eq!(store.limit_bytes(), 10_000);
        store.put("db0", b"k", &[0u8; 2_000]).unwrap();
    }
}
