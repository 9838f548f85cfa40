//! What a tenant does when a write would take it past its memory limit: Redis's
//! `maxmemory-policy`, and the per-object access stamp the LRU and LFU policies rank by.
//!
//! As in Redis, the ranking is approximate: each eviction samples a few keys
//! ([`MAXMEMORY_SAMPLES`], Redis's default) and removes the best candidate among them.
//! Redis also keeps a pool of good candidates between evictions; ferry does not. The clock
//! the stamps are taken from is given by the caller ([`crate::TenantStore::set_clock_ms`]),
//! so this crate reads none.

/// Keys sampled per eviction (Redis's `maxmemory-samples` default).
pub const MAXMEMORY_SAMPLES: usize = 5;

/// Most keys one write may evict to make room before it is refused: bounds the work one
/// write does (a large value over a cache of small ones).
pub const MAX_EVICTIONS_PER_WRITE: usize = 4096;

/// Most samples drawn for one eviction before giving up (a volatile policy over a tenant
/// with few keys that expire draws many keys without a TTL).
pub const MAX_SAMPLES_PER_EVICTION: usize = 64 * MAXMEMORY_SAMPLES;

/// Resolution of the LRU stamp: the clock is kept in these units (Redis: 1 s).
pub const LRU_RESOLUTION_MS: u64 = 100;

/// LFU's logarithmic counter of a new key (Redis's `LFU_INIT_VAL`), so a new key is not
/// the first evicted.
pub const LFU_INIT: u8 = 5;

/// LFU's counter growth: the higher, the more accesses the counter needs to grow (Redis's
/// `lfu-log-factor` default).
pub const LFU_LOG_FACTOR: u32 = 10;

/// Minutes without an access that take one from the LFU counter (Redis's `lfu-decay-time`
/// default).
pub const LFU_DECAY_MINUTES: u32 = 1;

/// Tables whose names start with this are ferry's own (the function catalog) and are never
/// evicted from.
pub const NEVER_EVICTED_TABLE_PREFIX: &str = "ferry.";

/// Redis's `maxmemory-policy`: which keys a write over the limit may evict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum EvictionPolicy {
    /// None: the write is refused (Redis's default, and ferry's).
    #[default]
    NoEviction = 0,
    /// The least recently used of any key.
    AllKeysLru = 1,
    /// The least frequently used of any key.
    AllKeysLfu = 2,
    /// Any key.
    AllKeysRandom = 3,
    /// The least recently used of the keys with an expiry.
    VolatileLru = 4,
    /// The least frequently used of the keys with an expiry.
    VolatileLfu = 5,
    /// Any key with an expiry.
    VolatileRandom = 6,
    /// The key with an expiry that expires first.
    VolatileTtl = 7,
}

/// Every policy, in the order of their codes.
pub const POLICIES: [EvictionPolicy; 8] = [
    EvictionPolicy::NoEviction,
    EvictionPolicy::AllKeysLru,
    EvictionPolicy::AllKeysLfu,
    EvictionPolicy::AllKeysRandom,
    EvictionPolicy::VolatileLru,
    EvictionPolicy::VolatileLfu,
    EvictionPolicy::VolatileRandom,
    EvictionPolicy::VolatileTtl,
];

impl EvictionPolicy {
    /// Redis's name of it.
    pub fn name(self) -> &'static str {
        match self {
            EvictionPolicy::NoEviction => "noeviction",
            EvictionPolicy::AllKeysLru => "allkeys-lru",
            EvictionPolicy::AllKeysLfu => "allkeys-lfu",
            EvictionPolicy::AllKeysRandom => "allkeys-random",
            EvictionPolicy::VolatileLru => "volatile-lru",
            EvictionPolicy::VolatileLfu => "volatile-lfu",
            EvictionPolicy::VolatileRandom => "volatile-random",
            EvictionPolicy::VolatileTtl => "volatile-ttl",
        }
    }

    /// The policy Redis names `name` (any case).
    pub fn parse(name: &str) -> Option<EvictionPolicy> {
        POLICIES
            .into_iter()
            .find(|policy| policy.name().eq_ignore_ascii_case(name))
    }

    /// The policy of code `code` (as [`EvictionPolicy::code`] gives it).
    pub fn from_code(code: u8) -> EvictionPolicy {
        POLICIES.get(code as usize).copied().unwrap_or_default()
    }

    /// Its code, for an atomic.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// Whether only keys with an expiry may be evicted.
    pub fn volatile_only(self) -> bool {
        matches!(
            self,
            EvictionPolicy::VolatileLru
                | EvictionPolicy::VolatileLfu
                | EvictionPolicy::VolatileRandom
                | EvictionPolicy::VolatileTtl
        )
    }

    /// What the objects' access stamps count: LFU's under an LFU policy, the last access
    /// (LRU) under every other, as Redis keeps them (OBJECT IDLETIME reads it, and a
    /// switch to an LRU policy finds it kept).
    pub fn stamps(self) -> Stamping {
        match self {
            EvictionPolicy::AllKeysLfu | EvictionPolicy::VolatileLfu => Stamping::Lfu,
            _ => Stamping::Lru,
        }
    }

    /// How bad a candidate is to keep: the higher, the sooner evicted. `stamp` is its access
    /// stamp, `expires_at_ms` its expiry, `clock` the store's LRU clock, `salt` a random
    /// number (the random policies rank by it).
    pub fn rank(self, stamp: u32, expires_at_ms: Option<u64>, clock: u32, salt: u64) -> u64 {
        match self {
            EvictionPolicy::NoEviction => 0,
            EvictionPolicy::AllKeysLru | EvictionPolicy::VolatileLru => u64::from(lru_idle(stamp, clock)),
            EvictionPolicy::AllKeysLfu | EvictionPolicy::VolatileLfu => u64::from(u8::MAX - lfu_decayed(stamp, clock)),
            EvictionPolicy::AllKeysRandom | EvictionPolicy::VolatileRandom => salt,
            EvictionPolicy::VolatileTtl => u64::MAX - expires_at_ms.unwrap_or(u64::MAX),
        }
    }
}

/// What an object's access stamp holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stamping {
    /// The LRU clock at the last access.
    Lru,
    /// LFU's minutes of the last decay (high 16 bits) and its logarithmic counter (low 8).
    Lfu,
}

/// The LRU clock of `now_ms`: time in [`LRU_RESOLUTION_MS`] units, wrapping.
pub fn lru_clock(now_ms: u64) -> u32 {
    (now_ms / LRU_RESOLUTION_MS) as u32
}

/// How long since an LRU stamp, in clock units (wrapping, as the clock does).
pub fn lru_idle(stamp: u32, clock: u32) -> u32 {
    clock.wrapping_sub(stamp)
}

fn minutes(clock: u32) -> u16 {
    (u64::from(clock) * LRU_RESOLUTION_MS / 60_000) as u16
}

/// An LFU stamp's counter after the decay for the minutes since it was stamped.
pub fn lfu_decayed(stamp: u32, clock: u32) -> u8 {
    let counter = (stamp & 0xFF) as u8;
    let idle_minutes = u32::from(minutes(clock).wrapping_sub((stamp >> 16) as u16));
    let periods = idle_minutes / LFU_DECAY_MINUTES;
    counter.saturating_sub(periods.min(255) as u8)
}

/// A new object's stamp.
pub fn new_stamp(stamping: Stamping, clock: u32) -> u32 {
    match stamping {
        Stamping::Lru => clock,
        Stamping::Lfu => lfu_stamp(LFU_INIT, clock),
    }
}

fn lfu_stamp(counter: u8, clock: u32) -> u32 {
    (u32::from(minutes(clock)) << 16) | u32::from(counter)
}

/// The stamp after one access, `random` a uniform number: LRU takes the clock; LFU decays
/// the counter, then grows it with probability 1 / ((counter − LFU_INIT) × factor + 1), so
/// it counts about logarithmically (Redis's `LFULogIncr`).
pub fn touched(stamping: Stamping, stamp: u32, clock: u32, random: u64) -> u32 {
    match stamping {
        Stamping::Lru => clock,
        Stamping::Lfu => {
            let mut counter = lfu_decayed(stamp, clock);
            if counter < u8::MAX {
                let base = u64::from(counter.saturating_sub(LFU_INIT));
                let odds = base * u64::from(LFU_LOG_FACTOR) + 1;
                if random.is_multiple_of(odds) {
                    counter += 1;
                }
            }
            lfu_stamp(counter, clock)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_codes_round_trip() {
        for policy in POLICIES {
            assert_eq!(EvictionPolicy::parse(&policy.name().to_uppercase()), Some(policy));
            assert_eq!(EvictionPolicy::from_code(policy.code()), policy);
        }
        assert_eq!(EvictionPolicy::parse("allkeys-mru"), None);
        assert_eq!(EvictionPolicy::from_code(200), EvictionPolicy::NoEviction);
    }

    #[test]
    fn lru_ranks_the_longest_idle_first_across_the_clock_wrapping() {
        let policy = EvictionPolicy::AllKeysLru;
        let clock = 5u32;
        let old = u32::MAX - 2; // stamped 8 units ago, before the wrap
        assert!(policy.rank(old, None, clock, 0) > policy.rank(4, None, clock, 0));
        assert_eq!(lru_idle(old, clock), 8);
    }

    #[test]
    fn lfu_counts_logarithmically_and_decays_with_idle_minutes() {
        let clock = lru_clock(10 * 60_000);
        let mut stamp = new_stamp(Stamping::Lfu, clock);
        assert_eq!(lfu_decayed(stamp, clock), LFU_INIT);
        // Every access with the luckiest draw grows the counter by one.
        for _ in 0..10 {
            stamp = touched(Stamping::Lfu, stamp, clock, 0);
        }
        assert_eq!(lfu_decayed(stamp, clock), LFU_INIT + 10);
        // An unlucky draw at a high counter does not grow it.
        assert_eq!(
            lfu_decayed(touched(Stamping::Lfu, stamp, clock, 1), clock),
            LFU_INIT + 10
        );
        // Three idle minutes take three off.
        let later = lru_clock(13 * 60_000);
        assert_eq!(lfu_decayed(stamp, later), LFU_INIT + 7);
        let policy = EvictionPolicy::AllKeysLfu;
        let fresh = new_stamp(Stamping::Lfu, later);
        assert!(policy.rank(fresh, None, later, 0) > policy.rank(stamp, None, later, 0));
    }

    #[test]
    fn volatile_ttl_ranks_the_soonest_expiry_first_and_random_by_salt() {
        let ttl = EvictionPolicy::VolatileTtl;
        assert!(ttl.rank(0, Some(1_000), 0, 0) > ttl.rank(0, Some(2_000), 0, 0));
        assert!(ttl.volatile_only() && !EvictionPolicy::AllKeysRandom.volatile_only());
        assert_eq!(EvictionPolicy::AllKeysRandom.rank(0, None, 0, 42), 42);
        assert_eq!(EvictionPolicy::NoEviction.stamps(), Stamping::Lru);
        assert_eq!(EvictionPolicy::VolatileLfu.stamps(), Stamping::Lfu);
    }
}
