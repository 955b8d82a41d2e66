//! Hash slots: Redis Cluster's CRC16 (XMODEM) of a key, or of its hash
//! tag, modulo 16384 (cluster.c's `keyHashSlot`).

/// How many hash slots the key space is cut into.
pub const SLOTS: usize = 16384;

const CRC16: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_XMODEM);

/// The slot of `key`: when the key holds a `{…}` with at least one byte
/// between the first `{` and the first `}` after it, only those bytes
/// are hashed, so that `{user1}.a` and `{user1}.b` share a slot.
pub fn key_hash_slot(key: &[u8]) -> u16 {
    let hashed = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    CRC16.checksum(hashed) & (SLOTS as u16 - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_redis_slots() {
        // Values from redis-server 7.0.15's CLUSTER KEYSLOT.
        assert_eq!(key_hash_slot(b"foo"), 12182);
        assert_eq!(key_hash_slot(b"bar"), 5061);
        assert_eq!(key_hash_slot(b""), 0);
        assert_eq!(key_hash_slot(b"123456789"), 12739);
    }

    #[test]
    fn hash_tags_hash_what_the_braces_hold() {
        assert_eq!(key_hash_slot(b"{user1000}.following"), key_hash_slot(b"user1000"));
        assert_eq!(key_hash_slot(b"a{user1000}b{x}"), key_hash_slot(b"user1000"));
        // `{}` and an unclosed `{` hash the whole key.
        assert_eq!(key_hash_slot(b"foo{}{bar}"), CRC16.checksum(b"foo{}{bar}") & 16383);
        assert_eq!(key_hash_slot(b"foo{bar"), CRC16.checksum(b"foo{bar") & 16383);
        assert_eq!(key_hash_slot(b"foo{{bar}}zap"), key_hash_slot(b"{bar"));
    }
}
