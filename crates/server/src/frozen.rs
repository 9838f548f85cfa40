//! Slots this node may not serve for now: the source of a slot move stops taking writes
//! (and serving reads) of the moving range for its hand-over. Requests are refused at
//! routing, and commits that were routed before the freeze are refused by the log (its
//! key filter runs under the append lock, so the log end read after a freeze is a point
//! past which no record writes the range).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use ferry_cluster::{key_slot, SLOTS};

const WORDS: usize = SLOTS as usize / 64;

/// A set of slots, safe to read on every request (one atomic load when empty).
#[derive(Debug)]
pub struct FrozenSlots {
    words: [AtomicU64; WORDS],
    /// How many slots are set: lets the common case (none) skip hashing the key.
    count: AtomicUsize,
}

impl Default for FrozenSlots {
    fn default() -> FrozenSlots {
        FrozenSlots {
            words: std::array::from_fn(|_| AtomicU64::new(0)),
            count: AtomicUsize::new(0),
        }
    }
}

impl FrozenSlots {
    /// Adds `first..=last`.
    pub fn freeze(&self, first: u16, last: u16) {
        for slot in first..=last.min(SLOTS - 1) {
            let bit = 1u64 << (slot % 64);
            if self.words[slot as usize / 64].fetch_or(bit, Ordering::SeqCst) & bit == 0 {
                self.count.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    /// Removes `first..=last`.
    pub fn thaw(&self, first: u16, last: u16) {
        for slot in first..=last.min(SLOTS - 1) {
            let bit = 1u64 << (slot % 64);
            if self.words[slot as usize / 64].fetch_and(!bit, Ordering::SeqCst) & bit != 0 {
                self.count.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }

    /// Whether `slot` is frozen.
    pub fn contains(&self, slot: u16) -> bool {
        slot < SLOTS && self.words[slot as usize / 64].load(Ordering::SeqCst) & (1u64 << (slot % 64)) != 0
    }

    /// The refusal for a request or commit touching `key`, if its slot is frozen
    /// (Redis's TRYAGAIN: the client retries, and is sent on once the move is done).
    pub fn refusal(&self, key: &[u8]) -> Option<String> {
        if self.count.load(Ordering::SeqCst) == 0 {
            return None;
        }
        let slot = key_slot(key);
        self.contains(slot)
            .then(|| format!("TRYAGAIN slot {slot} is being handed to another node (a slot move); retry"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frozen_ranges_refuse_their_keys_only_until_thawed() {
        let frozen = FrozenSlots::default();
        let key = b"some-key";
        let slot = key_slot(key);
        assert_eq!(frozen.refusal(key), None);
        frozen.freeze(slot, slot);
        frozen.freeze(slot.saturating_sub(3), slot); // overlapping: counted once
        assert!(frozen.refusal(key).unwrap().starts_with("TRYAGAIN "));
        let other = (0..)
            .map(|i| format!("k{i}"))
            .find(|k| key_slot(k.as_bytes()) > slot + 1)
            .unwrap();
        assert_eq!(frozen.refusal(other.as_bytes()), None);
        frozen.thaw(0, SLOTS - 1);
        assert_eq!(frozen.refusal(key), None);
        assert_eq!(frozen.count.load(Ordering::SeqCst), 0);
        frozen.freeze(SLOTS - 1, SLOTS - 1);
        assert!(frozen.contains(SLOTS - 1) && !frozen.contains(SLOTS - 2));
    }
}
