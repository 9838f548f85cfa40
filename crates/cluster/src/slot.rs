//! Key → slot, exactly as Redis Cluster computes it, so that tools and clients that follow
//! Redis Cluster can follow ferry's map later.

/// Slots in a cluster.
pub const SLOTS: u16 = 16_384;

/// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0, no reflection), the checksum
/// Redis Cluster hashes keys with.
pub fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The part of `key` that is hashed: the bytes between the first `{` and the first `}`
/// after it, if there are any; otherwise the whole key (also when the braces are empty).
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&b| b == b'}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

/// The slot `key` belongs to.
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) % SLOTS
}

/// The one table every node keeps its own copy of, whatever the slots of its keys: the
/// function catalog (Lua libraries), loaded on every primary as Redis Cluster does. Its
/// keys are never routed, refused as another node's, or moved with their slots.
pub const NODE_LOCAL_TABLE: &str = "ferry.lua";

/// Whether `table` is node-local ([`NODE_LOCAL_TABLE`]) rather than sharded by key.
pub fn is_node_local(table: &str) -> bool {
    table == NODE_LOCAL_TABLE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checksum_and_slots_match_redis() {
        // The CRC16/XMODEM check value, and slots `CLUSTER KEYSLOT` gives for these keys.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"hello"), 866);
        assert_eq!(key_slot(b""), 0);
    }

    #[test]
    fn hash_tags_follow_the_redis_rules() {
        // The examples of the Redis Cluster specification.
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"{user1000}.followers"));
        assert_eq!(hash_tag(b"{user1000}.following"), b"user1000");
        assert_eq!(
            hash_tag(b"foo{}{bar}"),
            b"foo{}{bar}",
            "an empty tag hashes the whole key"
        );
        assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(hash_tag(b"foo{bar}{zap}"), b"bar");
        assert_eq!(hash_tag(b"no tag}{"), b"no tag}{");
        assert_eq!(hash_tag(b"open{only"), b"open{only");
    }
}
