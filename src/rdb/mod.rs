//! Redis 7.0's RDB object serialization: how one value is written into an
//! RDB stream (`rdbSaveObjectType` + `rdbSaveObject`) and read back
//! (`rdbLoadObjectType` + `rdbLoadObject`), and the DUMP payload around it
//! (`createDumpPayload` / `verifyDumpPayload`: the object, RDB version 10 as
//! a u16 LE, then the CRC64 of all that as a u64 LE).
//!
//! DUMP and RESTORE use it, and so do RDB files ([`file`]: SAVE, BGSAVE,
//! loading at start), which store each key's value in exactly this form.
//!
//! - [`encode`] writes what Redis 7.0.15 writes for the same value: strings
//!   integer-encoded or LZF-compressed as `rdbSaveRawString` decides, small
//!   hashes and sorted sets as listpacks, integer sets as intsets, lists as
//!   quicklist-2 nodes split as Redis's `list-max-listpack-size` splits
//!   them, large aggregates as plain RDB types.
//! - [`decode`] reads everything Redis 7.0's `rdbLoadObject` reads for
//!   these types, old encodings included ([`legacy`]: ziplists, zipmaps),
//!   and refuses a malformed payload with an error: every length is checked
//!   against the bytes left before anything is allocated.
//! - [`lzf`] and [`listpack`] are the byte formats inside.
//!
//! The CRC is the `crc` crate's `CRC_64_REDIS` (Jones polynomial,
//! reflected): a catalogue entry of a widely used crate, checked against
//! Redis's own test vector below.

pub mod decode;
pub mod encode;
pub mod file;
pub mod legacy;
pub mod listpack;
pub mod lzf;

/// The RDB version Redis 7.0 writes (`RDB_VERSION`).
pub const RDB_VERSION: u16 = 10;

/// Object type bytes (`RDB_TYPE_*` in `src/rdb.h`).
pub mod types {
    pub const STRING: u8 = 0;
    pub const LIST: u8 = 1;
    pub const SET: u8 = 2;
    pub const ZSET: u8 = 3;
    pub const HASH: u8 = 4;
    pub const ZSET_2: u8 = 5;
    pub const MODULE: u8 = 6;
    pub const MODULE_2: u8 = 7;
    pub const HASH_ZIPMAP: u8 = 9;
    pub const LIST_ZIPLIST: u8 = 10;
    pub const SET_INTSET: u8 = 11;
    pub const ZSET_ZIPLIST: u8 = 12;
    pub const HASH_ZIPLIST: u8 = 13;
    pub const LIST_QUICKLIST: u8 = 14;
    pub const STREAM_LISTPACKS: u8 = 15;
    pub const HASH_LISTPACK: u8 = 16;
    pub const ZSET_LISTPACK: u8 = 17;
    pub const LIST_QUICKLIST_2: u8 = 18;
    pub const STREAM_LISTPACKS_2: u8 = 19;
}

/// The settings that shape what DUMP writes (Redis's config parameters of
/// the same names).
#[derive(Debug, Clone, Copy)]
pub struct EncodeOptions {
    /// `rdbcompression`: LZF-compress strings longer than 20 bytes.
    pub compression: bool,
    /// `list-max-listpack-size`: how quicklist nodes are filled.
    pub list_max_listpack_size: i64,
    /// `set-max-intset-entries`.
    pub set_max_intset_entries: usize,
    /// `rdb-key-save-delay`: microseconds a whole-dataset write waits
    /// after each key, for tests (see [`debug_delay`]).
    pub key_save_delay: i64,
}

impl Default for EncodeOptions {
    fn default() -> Self {
        EncodeOptions {
            compression: true,
            list_max_listpack_size: -2,
            set_max_intset_entries: 512,
            key_save_delay: 0,
        }
    }
}

/// Redis's `debugDelay` (`rdb-key-save-delay`, `key-load-delay`):
/// sleeps `us` microseconds; a negative -n sleeps 1 µs once in n calls,
/// at random.
pub fn debug_delay(us: i64) {
    match us {
        0 => {}
        n if n > 0 => std::thread::sleep(std::time::Duration::from_micros(n as u64)),
        n => {
            if fastrand::i64(0..-n) == 0 {
                std::thread::sleep(std::time::Duration::from_micros(1));
            }
        }
    }
}

/// The settings RESTORE loads under.
#[derive(Debug, Clone, Copy)]
pub struct DecodeOptions {
    /// `zset-max-listpack-entries` / `-value`: the encoding a loaded
    /// sorted set takes.
    pub zset_limits: crate::db::zset::ListpackLimits,
    /// `hash-max-listpack-entries` / `-value`: the encoding a loaded hash
    /// takes.
    pub hash_limits: crate::db::hash::PackLimits,
    /// `proto-max-bulk-len`: the longest string an LZF header may ask to
    /// decompress into (a payload is at most this long too).
    pub max_string: usize,
    /// `set-max-intset-entries`: whether a loaded set is an intset.
    pub set_max_intset_entries: usize,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            zset_limits: Default::default(),
            hash_limits: Default::default(),
            max_string: 512 * 1024 * 1024,
            set_max_intset_entries: 512,
        }
    }
}

/// Why RESTORE refuses a payload, in Redis's two replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestoreError {
    /// `ERR DUMP payload version or checksum are wrong`.
    VersionOrChecksum,
    /// `ERR Bad data format`.
    BadFormat,
}

/// Sliced by 16: several times the speed of one table, for RDB files
/// and DUMP payloads.
pub(crate) const CRC: crc::Crc<u64, crc::Table<16>> = crc::Crc::<u64, crc::Table<16>>::new(&crc::CRC_64_REDIS);

/// Redis's `crc64(0, bytes, len)`.
pub fn crc64(bytes: &[u8]) -> u64 {
    CRC.checksum(bytes)
}

/// DUMP's reply for `value`.
pub fn dump(value: &crate::db::Value, options: &EncodeOptions) -> Vec<u8> {
    let mut out = Vec::new();
    encode::write_object(&mut out, value, options);
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// `verifyDumpPayload`: the footer's version is one Redis 7.0 reads and
/// the checksum matches.
pub fn verify_payload(payload: &[u8]) -> Result<(), RestoreError> {
    if payload.len() < 10 {
        return Err(RestoreError::VersionOrChecksum);
    }
    let footer = &payload[payload.len() - 10..];
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    if version > RDB_VERSION {
        return Err(RestoreError::VersionOrChecksum);
    }
    let crc = crc64(&payload[..payload.len() - 8]);
    if crc.to_le_bytes() != footer[2..] {
        return Err(RestoreError::VersionOrChecksum);
    }
    Ok(())
}

/// RESTORE's reading of a payload: verified, then one object read from its
/// start. As in Redis, the reader may run into the footer and need not
/// consume all of the payload.
/// `verify` false (DEBUG SET-SKIP-CHECKSUM-VALIDATION 1) skips the
/// footer's checks, as Redis's `skip_checksum_validation`.
pub fn restore(payload: &[u8], options: &DecodeOptions, verify: bool) -> Result<crate::db::Value, RestoreError> {
    if verify {
        verify_payload(payload)?;
    }
    let mut reader = decode::Reader::new(payload, options);
    decode::read_object(&mut reader).ok_or(RestoreError::BadFormat)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_is_redis_crc64() {
        // src/crc64.c's own test: crc64(0, "123456789", 9).
        assert_eq!(crc64(b"123456789"), 0xe9c6d914c4b8d9ca);
    }

    #[test]
    fn dump_of_a_short_string_is_redis_dump() {
        // redis-server 7.0.15: SET k hello; DUMP k.
        let value = crate::db::Value::Str(bytes::Bytes::from("hello"));
        let payload = dump(&value, &EncodeOptions::default());
        let mut want = vec![0x00, 0x05];
        want.extend_from_slice(b"hello");
        want.extend_from_slice(&[10, 0]);
        let crc = crc64(&want);
        want.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(payload, want);
        assert!(verify_payload(&payload).is_ok());
    }

    #[test]
    fn footers_are_checked() {
        let value = crate::db::Value::Str(bytes::Bytes::from("hello"));
        let payload = dump(&value, &EncodeOptions::default());
        assert_eq!(verify_payload(&payload[..9]), Err(RestoreError::VersionOrChecksum));
        let mut wrong_crc = payload.clone();
        *wrong_crc.last_mut().unwrap() ^= 1;
        assert_eq!(verify_payload(&wrong_crc), Err(RestoreError::VersionOrChecksum));
        let mut newer = payload[..payload.len() - 10].to_vec();
        newer.extend_from_slice(&11u16.to_le_bytes());
        let crc = crc64(&newer);
        newer.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(verify_payload(&newer), Err(RestoreError::VersionOrChecksum));
    }
}
