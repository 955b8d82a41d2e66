//! FUNCTION DUMP / RESTORE's payload, as Redis 7.0.15 writes and reads it
//! (`functionDumpCommand`, `rdbSaveFunctions`, `rdbFunctionLoad`): for
//! each library, the opcode `RDB_OPCODE_FUNCTION2` and its code as an RDB
//! string, then the RDB version (10, two bytes little-endian) and the
//! CRC64 (Jones) of all that, eight bytes little-endian.
//!
//! Self-contained on purpose: only what this payload needs of the RDB
//! format — length encoding, strings (plain, integer-encoded, LZF), the
//! LZF compressor Redis uses (ported from its `lzf_c.c` with Redis's
//! settings, so that DUMP is byte for byte Redis's) and the checksum. A
//! full RDB codec, when keylock has one, can take this over.

/// `RDB_OPCODE_FUNCTION2`: a library's whole code follows.
const OPCODE_FUNCTION2: u8 = 245;
/// `RDB_OPCODE_FUNCTION`: 7.0 release candidates' library (name, engine,
/// description, code).
const OPCODE_FUNCTION: u8 = 246;
/// `RDB_VERSION` of Redis 7.0.
const RDB_VERSION: u16 = 10;

/// What a payload held: each library's code, in order.
pub type Libraries = Vec<Vec<u8>>;

/// FUNCTION DUMP's payload for the given libraries' codes.
pub fn dump<'a>(codes: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for code in codes {
        out.push(OPCODE_FUNCTION2);
        write_string(&mut out, code);
    }
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// `verifyDumpPayload`: the footer's version is one this server reads and
/// its checksum matches.
pub fn verified(payload: &[u8]) -> bool {
    if payload.len() < 10 {
        return false;
    }
    let footer = payload.len() - 10;
    let version = u16::from_le_bytes([payload[footer], payload[footer + 1]]);
    if version > RDB_VERSION {
        return false;
    }
    let crc = u64::from_le_bytes(payload[footer + 2..].try_into().unwrap_or_default());
    crc64(0, &payload[..footer + 2]) == crc
}

/// The libraries' codes in a verified payload, or Redis's error text.
pub fn parse(payload: &[u8]) -> Result<Libraries, &'static str> {
    let end = payload.len() - 10;
    let mut cursor = Cursor {
        data: &payload[..end],
        at: 0,
    };
    let mut libraries = Vec::new();
    while cursor.at < end {
        let Some(kind) = cursor.byte() else {
            return Err("can not read data type");
        };
        match kind {
            OPCODE_FUNCTION2 => {
                let code = cursor.string().ok_or("Failed loading library payload")?;
                libraries.push(code);
            }
            OPCODE_FUNCTION => {
                let name = cursor.string().ok_or("Failed loading library name")?;
                let engine = cursor.string().ok_or("Failed loading engine name")?;
                let has_description = cursor.length().ok_or("Failed loading library description indicator")?;
                if has_description != 0 {
                    cursor.string().ok_or("Failed loading library description")?;
                }
                let blob = cursor.string().ok_or("Failed loading library blob")?;
                // `#!%s name=%s\n%s`, each a C string.
                let c = |s: &[u8]| crate::error::quoted(s).to_vec();
                libraries.push([b"#!".as_slice(), &c(&engine), b" name=", &c(&name), b"\n", &c(&blob)].concat());
            }
            _ => return Err("given type is not a function"),
        }
    }
    Ok(libraries)
}

struct Cursor<'a> {
    data: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.data.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    fn bytes(&mut self, n: usize) -> Option<&[u8]> {
        let end = self.at.checked_add(n)?;
        let slice = self.data.get(self.at..end)?;
        self.at = end;
        Some(slice)
    }

    /// `rdbLoadLen`: (length, or the encoding of an encoded string).
    fn length_or_encoding(&mut self) -> Option<(u64, bool)> {
        let first = self.byte()?;
        match first >> 6 {
            0 => Some((u64::from(first & 0x3f), false)),
            1 => Some(((u64::from(first & 0x3f) << 8) | u64::from(self.byte()?), false)),
            3 => Some((u64::from(first & 0x3f), true)),
            _ => match first {
                0x80 => Some((u64::from(u32::from_be_bytes(self.bytes(4)?.try_into().ok()?)), false)),
                0x81 => Some((u64::from_be_bytes(self.bytes(8)?.try_into().ok()?), false)),
                _ => None,
            },
        }
    }

    fn length(&mut self) -> Option<u64> {
        match self.length_or_encoding()? {
            (n, false) => Some(n),
            _ => None,
        }
    }

    /// `rdbGenericLoadStringObject`.
    fn string(&mut self) -> Option<Vec<u8>> {
        let (n, encoded) = self.length_or_encoding()?;
        if !encoded {
            return Some(self.bytes(usize::try_from(n).ok()?)?.to_vec());
        }
        match n {
            0 => Some((self.byte()? as i8).to_string().into_bytes()),
            1 => Some(i16::from_le_bytes(self.bytes(2)?.try_into().ok()?).to_string().into_bytes()),
            2 => Some(i32::from_le_bytes(self.bytes(4)?.try_into().ok()?).to_string().into_bytes()),
            3 => {
                let compressed_len = usize::try_from(self.length()?).ok()?;
                let len = usize::try_from(self.length()?).ok()?;
                let compressed = self.bytes(compressed_len)?;
                lzf_decompress(compressed, len)
            }
            _ => None,
        }
    }
}

/// `rdbSaveLen`.
fn write_length(out: &mut Vec<u8>, n: usize) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.push(((n >> 8) as u8) | 0x40);
        out.push(n as u8);
    } else if n <= u32::MAX as usize {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&(n as u64).to_be_bytes());
    }
}

/// `rdbSaveRawString` with `rdbcompression yes`: LZF when it saves more
/// than four bytes of a string over 20, else the bytes as they are. (A
/// library's code starts with `#!`, so it is never integer-encoded.)
fn write_string(out: &mut Vec<u8>, s: &[u8]) {
    if s.len() > 20
        && let Some(compressed) = lzf_compress(s, s.len() - 4)
    {
        out.push(0xc3);
        write_length(out, compressed.len());
        write_length(out, s.len());
        out.extend_from_slice(&compressed);
        return;
    }
    write_length(out, s.len());
    out.extend_from_slice(s);
}

/// Redis's `crc64` (Jones polynomial, reflected, no final xor).
pub fn crc64(mut crc: u64, data: &[u8]) -> u64 {
    const POLY: u64 = 0x95ac_9329_ac4b_c9b5;
    for &b in data {
        crc ^= u64::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ POLY } else { crc >> 1 };
        }
    }
    crc
}

/// liblzf's `lzf_compress` as Redis builds it (HLOG 16, VERY_FAST, a
/// hash table that starts empty): the compressed bytes, or None when they
/// would not fit in `out_len`.
pub fn lzf_compress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    const HSIZE: usize = 1 << 16;
    const MAX_LIT: usize = 1 << 5;
    const MAX_OFF: usize = 1 << 13;
    const MAX_REF: usize = (1 << 8) + (1 << 3);
    let in_len = input.len();
    if in_len == 0 || out_len == 0 {
        return None;
    }
    let idx = |h: u32| ((h >> 8).wrapping_sub(h.wrapping_mul(5)) as usize) & (HSIZE - 1);
    let first = |ip: usize| (u32::from(input[ip]) << 8) | u32::from(*input.get(ip + 1).unwrap_or(&0));
    let next = |h: u32, ip: usize| (h << 8) | u32::from(input[ip + 2]);
    // Positions plus one; 0 is an empty slot.
    let mut htab = vec![0usize; HSIZE];
    let mut out = vec![0u8; out_len + 8];
    let mut ip = 0usize;
    let mut op = 1usize;
    let mut lit = 0usize;
    let mut hval = first(0);
    while ip + 2 < in_len {
        hval = next(hval, ip);
        let slot = idx(hval);
        let found = htab[slot];
        htab[slot] = ip + 1;
        let reference = found.checked_sub(1).filter(|&r| {
            r < ip
                && ip - r - 1 < MAX_OFF
                && r > 0
                && input[r + 2] == input[ip + 2]
                && input[r] == input[ip]
                && input[r + 1] == input[ip + 1]
        });
        if let Some(r) = reference {
            let off = ip - r - 1;
            let mut len = 2usize;
            let maxlen = (in_len - ip - len).min(MAX_REF);
            if op + 3 + 1 >= out_len && op - usize::from(lit == 0) + 3 + 1 >= out_len {
                return None;
            }
            out[op - lit - 1] = (lit as u8).wrapping_sub(1);
            op -= usize::from(lit == 0);
            let mut mismatch = false;
            if maxlen > 16 {
                for _ in 0..16 {
                    len += 1;
                    if input[r + len] != input[ip + len] {
                        mismatch = true;
                        break;
                    }
                }
            }
            if !mismatch {
                loop {
                    len += 1;
                    if !(len < maxlen && input[r + len] == input[ip + len]) {
                        break;
                    }
                }
            }
            len -= 2;
            ip += 1;
            if len < 7 {
                out[op] = ((off >> 8) + (len << 5)) as u8;
                op += 1;
            } else {
                out[op] = ((off >> 8) + (7 << 5)) as u8;
                out[op + 1] = (len - 7) as u8;
                op += 2;
            }
            out[op] = off as u8;
            op += 1;
            lit = 0;
            op += 1;
            ip += len + 1;
            if ip + 2 >= in_len {
                break;
            }
            ip -= 2;
            hval = first(ip);
            hval = next(hval, ip);
            htab[idx(hval)] = ip + 1;
            ip += 1;
            hval = next(hval, ip);
            htab[idx(hval)] = ip + 1;
            ip += 1;
        } else {
            if op >= out_len {
                return None;
            }
            lit += 1;
            out[op] = input[ip];
            op += 1;
            ip += 1;
            if lit == MAX_LIT {
                out[op - lit - 1] = (lit - 1) as u8;
                lit = 0;
                op += 1;
            }
        }
    }
    if op + 3 > out_len {
        return None;
    }
    while ip < in_len {
        lit += 1;
        out[op] = input[ip];
        op += 1;
        ip += 1;
        if lit == MAX_LIT {
            out[op - lit - 1] = (lit - 1) as u8;
            lit = 0;
            op += 1;
        }
    }
    out[op - lit - 1] = (lit as u8).wrapping_sub(1);
    op -= usize::from(lit == 0);
    out.truncate(op);
    Some(out)
}

/// liblzf's `lzf_decompress`: exactly `len` bytes, or None.
pub fn lzf_decompress(input: &[u8], len: usize) -> Option<Vec<u8>> {
    let mut out: Vec<u8> = Vec::with_capacity(len);
    let mut ip = 0;
    while ip < input.len() {
        let ctrl = usize::from(input[ip]);
        ip += 1;
        if ctrl < 32 {
            let n = ctrl + 1;
            if out.len() + n > len {
                return None;
            }
            out.extend_from_slice(input.get(ip..ip + n)?);
            ip += n;
        } else {
            let mut n = ctrl >> 5;
            if n == 7 {
                n += usize::from(*input.get(ip)?);
                ip += 1;
            }
            let back = ((ctrl & 0x1f) << 8) + usize::from(*input.get(ip)?) + 1;
            ip += 1;
            n += 2;
            if out.len() + n > len || back > out.len() {
                return None;
            }
            let from = out.len() - back;
            for i in 0..n {
                out.push(out[from + i]);
            }
        }
    }
    (out.len() == len).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_is_redis_jones() {
        assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }

    #[test]
    fn lzf_round_trips_and_gives_up_on_noise() {
        let text = b"#!lua name=lib\nredis.register_function('f', function() return 'aaaaaaaaaaaaaaaaaaaa' end)\n".repeat(3);
        let packed = lzf_compress(&text, text.len() - 4).expect("compressible");
        assert!(packed.len() < text.len());
        assert_eq!(lzf_decompress(&packed, text.len()).as_deref(), Some(text.as_slice()));
        let noise: Vec<u8> = (0..64u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        assert_eq!(lzf_compress(&noise, noise.len() - 4), None);
    }

    #[test]
    fn payload_round_trips() {
        let codes: [&[u8]; 2] = [b"#!lua name=a\nshort", &[b'x'; 300]];
        let payload = dump(codes.iter().copied());
        assert!(verified(&payload));
        assert_eq!(parse(&payload).expect("parses"), codes.map(<[u8]>::to_vec).to_vec());
        let mut corrupt = payload.clone();
        corrupt[3] ^= 1;
        assert!(!verified(&corrupt));
    }
}
