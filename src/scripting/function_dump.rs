//! FUNCTION DUMP / RESTORE's payload, as Redis 7.0.15 writes and reads it
//! (`functionDumpCommand`, `rdbSaveFunctions`, `rdbFunctionLoad`): for
//! each library, the opcode `RDB_OPCODE_FUNCTION2` and its code as an RDB
//! string, then the RDB version (10, two bytes little-endian) and the
//! CRC64 of all that, eight bytes little-endian.
//!
//! The RDB pieces (strings with Redis's LZF compression, lengths, the
//! checksum and the footer) are `crate::rdb`'s, as DUMP / RESTORE of keys
//! use them, so a FUNCTION DUMP of one library is Redis's byte for byte.

use crate::rdb::decode::Reader;
use crate::rdb::{self, DecodeOptions, EncodeOptions, encode};

/// `RDB_OPCODE_FUNCTION2`: a library's whole code follows.
const OPCODE_FUNCTION2: u8 = 245;
/// `RDB_OPCODE_FUNCTION`: 7.0 release candidates' library (name, engine,
/// description, code).
const OPCODE_FUNCTION: u8 = 246;

/// FUNCTION DUMP's payload for the given libraries' codes; `compression`
/// is `rdbcompression`.
pub fn dump<'a>(codes: impl Iterator<Item = &'a [u8]>, compression: bool) -> Vec<u8> {
    let options = EncodeOptions {
        compression,
        ..EncodeOptions::default()
    };
    let mut out = Vec::new();
    for code in codes {
        out.push(OPCODE_FUNCTION2);
        encode::write_string(&mut out, code, &options);
    }
    out.extend_from_slice(&rdb::RDB_VERSION.to_le_bytes());
    let crc = rdb::crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// `verifyDumpPayload`: the footer's version is one this server reads and
/// its checksum matches.
pub fn verified(payload: &[u8]) -> bool {
    rdb::verify_payload(payload).is_ok()
}

/// The libraries' codes in a verified payload, in order, or Redis's error
/// text.
pub fn parse(payload: &[u8]) -> Result<Vec<Vec<u8>>, &'static str> {
    let options = DecodeOptions::default();
    let mut reader = Reader::new(&payload[..payload.len().saturating_sub(10)], &options);
    let mut libraries = Vec::new();
    while reader.remaining() > 0 {
        let Some(kind) = reader.u8() else {
            return Err("can not read data type");
        };
        match kind {
            OPCODE_FUNCTION2 => {
                let code = reader.string().ok_or("Failed loading library payload")?;
                libraries.push(code.to_vec());
            }
            OPCODE_FUNCTION => {
                let name = reader.string().ok_or("Failed loading library name")?;
                let engine = reader.string().ok_or("Failed loading engine name")?;
                let has_description = reader.length().ok_or("Failed loading library description indicator")?;
                if has_description != 0 {
                    reader.string().ok_or("Failed loading library description")?;
                }
                let blob = reader.string().ok_or("Failed loading library blob")?;
                // `#!%s name=%s\n%s`, each a C string.
                let c = |s: &[u8]| crate::error::quoted(s).to_vec();
                libraries.push([b"#!".as_slice(), &c(&engine), b" name=", &c(&name), b"\n", &c(&blob)].concat());
            }
            _ => return Err("given type is not a function"),
        }
    }
    Ok(libraries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_round_trips_compressed_or_not() {
        let codes: [&[u8]; 2] = [b"#!lua name=a\nshort", &[b'x'; 300]];
        for compression in [true, false] {
            let payload = dump(codes.iter().copied(), compression);
            assert!(verified(&payload));
            assert_eq!(parse(&payload).expect("parses"), codes.map(<[u8]>::to_vec).to_vec());
            let mut corrupt = payload.clone();
            corrupt[3] ^= 1;
            assert!(!verified(&corrupt));
        }
        // 300 bytes of one letter compress to a few.
        assert!(dump(codes.iter().copied(), true).len() < 100);
    }

    #[test]
    fn other_types_are_refused() {
        let mut payload = vec![0u8, 1, b'x'];
        payload.extend_from_slice(&rdb::RDB_VERSION.to_le_bytes());
        let crc = rdb::crc64(&payload);
        payload.extend_from_slice(&crc.to_le_bytes());
        assert!(verified(&payload));
        assert_eq!(parse(&payload), Err("given type is not a function"));
    }
}
