//! When a collection leaves its compact encoding for its large one: Redis's thresholds,
//! with Redis's defaults and names (`hash-max-listpack-entries`, …). A tenant sets its
//! own (CONFIG SET); a value built from its byte form (a snapshot, a replica's copy)
//! takes the encoding these give for its size, as Redis does when it loads a file.

/// The thresholds of the compact encodings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Encodings {
    /// Most fields a hash keeps packed (`hash-max-listpack-entries`).
    pub hash_max_listpack_entries: usize,
    /// Longest field or value a packed hash holds (`hash-max-listpack-value`).
    pub hash_max_listpack_value: usize,
    /// Most integers a set keeps as a sorted array (`set-max-intset-entries`).
    pub set_max_intset_entries: usize,
    /// Most members a set of strings keeps packed (`set-max-listpack-entries`).
    pub set_max_listpack_entries: usize,
    /// Longest member a packed set holds (`set-max-listpack-value`).
    pub set_max_listpack_value: usize,
    /// Most members a sorted set keeps packed (`zset-max-listpack-entries`).
    pub zset_max_listpack_entries: usize,
    /// Longest member a packed sorted set holds (`zset-max-listpack-value`).
    pub zset_max_listpack_value: usize,
    /// The size of one node of a list (`list-max-listpack-size`): a positive number is
    /// the most items a node holds, -1 to -5 its most bytes (4 KiB to 64 KiB).
    pub list_max_listpack_size: i64,
}

/// Redis 7.2's defaults.
pub const DEFAULT_ENCODINGS: Encodings = Encodings {
    hash_max_listpack_entries: 128,
    hash_max_listpack_value: 64,
    set_max_intset_entries: 512,
    set_max_listpack_entries: 128,
    set_max_listpack_value: 64,
    zset_max_listpack_entries: 128,
    zset_max_listpack_value: 64,
    list_max_listpack_size: -2,
};

/// Bytes a list node holds at most when its size is given as a count of items: Redis's
/// `SIZE_SAFETY_LIMIT`, so a count of huge items cannot make one node huge.
pub const LIST_NODE_SAFETY_BYTES: usize = 8192;

/// The most bytes a list node holds, and the most items (`usize::MAX`: no count limit).
pub fn list_node_limits(size: i64) -> (usize, usize) {
    match size {
        // A count (0 still lets a node hold one item), under the bytes safety limit.
        n if n >= 0 => (LIST_NODE_SAFETY_BYTES, (n as usize).max(1)),
        -1 => (4096, usize::MAX),
        -2 => (8192, usize::MAX),
        -3 => (16384, usize::MAX),
        -4 => (32768, usize::MAX),
        _ => (65536, usize::MAX),
    }
}

impl Default for Encodings {
    fn default() -> Encodings {
        DEFAULT_ENCODINGS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_sizes_follow_redis() {
        assert_eq!(list_node_limits(-2), (8192, usize::MAX));
        assert_eq!(list_node_limits(-5), (65536, usize::MAX));
        assert_eq!(list_node_limits(-9), (65536, usize::MAX));
        assert_eq!(list_node_limits(128), (LIST_NODE_SAFETY_BYTES, 128));
    }
}
