//! The blob encodings older Redis versions wrote and Redis 7.0 still loads:
//! ziplists (`src/ziplist.c`: lists before 7.0 inside quicklist v1 nodes
//! and RDB_TYPE_LIST_ZIPLIST, small hashes and sorted sets before 7.0) and
//! zipmaps (`src/zipmap.c`: small hashes before 2.6). Read only: keylock
//! never writes them. Redis always validates these deeply (it converts
//! them to listpacks entry by entry), and so does this module.

use bytes::Bytes;

use super::listpack::int_text;

fn le(bytes: &[u8]) -> u64 {
    bytes.iter().rev().fold(0, |acc, &b| (acc << 8) | u64::from(b))
}

fn signed(v: u64, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((v << shift) as i64) >> shift
}

/// Every entry of a ziplist blob, or None if `ziplistValidateIntegrity`
/// (deep) would refuse it.
///
/// Layout: total bytes (u32 LE), offset of the last entry (u32 LE), entry
/// count (u16 LE, 65535 when unknown), entries, 0xFF. An entry is the
/// previous entry's length (1 byte, or 0xFE and a u32 LE), an encoding
/// (with its length or integer), then the data.
pub fn parse_ziplist(blob: &[u8]) -> Option<Vec<Bytes>> {
    const HEADER: usize = 10;
    if blob.len() < HEADER + 1 {
        return None;
    }
    let total = le(&blob[..4]) as usize;
    let tail = le(&blob[4..8]) as usize;
    let declared = le(&blob[8..10]) as usize;
    if total != blob.len() || blob[blob.len() - 1] != 0xFF || tail > blob.len() - 1 {
        return None;
    }
    let end = blob.len() - 1;
    let mut entries = Vec::new();
    let mut p = HEADER;
    let mut prev_len = 0usize;
    let mut last = HEADER;
    while p < end {
        let start = p;
        let prev = if blob[p] < 254 {
            p += 1;
            blob[start] as usize
        } else if blob[p] == 254 {
            p += 5;
            le(blob.get(start + 1..start + 5)?) as usize
        } else {
            return None;
        };
        if prev != prev_len {
            return None;
        }
        let e = *blob.get(p)?;
        let (value, size) = match e >> 6 {
            0 => {
                let len = (e & 0x3F) as usize;
                (blob.get(p + 1..p + 1 + len).map(Bytes::copy_from_slice)?, 1 + len)
            }
            1 => {
                let len = (((e & 0x3F) as usize) << 8) | *blob.get(p + 1)? as usize;
                (blob.get(p + 2..p + 2 + len).map(Bytes::copy_from_slice)?, 2 + len)
            }
            2 => {
                if e != 0x80 {
                    return None;
                }
                let raw = blob.get(p + 1..p + 5)?;
                let len = u32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]) as usize;
                (blob.get(p + 5..(p + 5).checked_add(len)?).map(Bytes::copy_from_slice)?, 5 + len)
            }
            _ => match e {
                0xC0 => (int_text(signed(le(blob.get(p + 1..p + 3)?), 16)), 3),
                0xD0 => (int_text(signed(le(blob.get(p + 1..p + 5)?), 32)), 5),
                0xE0 => (int_text(le(blob.get(p + 1..p + 9)?) as i64), 9),
                0xF0 => (int_text(signed(le(blob.get(p + 1..p + 4)?), 24)), 4),
                0xFE => (int_text(i64::from(*blob.get(p + 1)? as i8)), 2),
                0xF1..=0xFD => (int_text(i64::from(e & 0x0F) - 1), 1),
                _ => return None,
            },
        };
        p += size;
        if p > end {
            return None;
        }
        prev_len = p - start;
        last = start;
        entries.push(value);
    }
    if tail != last || (declared != 65535 && declared != entries.len()) {
        return None;
    }
    Some(entries)
}

/// A zipmap's (field, value) pairs, or None if `zipmapValidateIntegrity`
/// would refuse it.
///
/// Layout: a count byte (254 or more: unknown), then `len field len free
/// value <free bytes>` records, then 0xFF. A length is one byte below 254,
/// or 254 and a u32 LE.
pub fn parse_zipmap(blob: &[u8]) -> Option<Vec<(Bytes, Bytes)>> {
    fn length(blob: &[u8], p: &mut usize) -> Option<usize> {
        let b = *blob.get(*p)?;
        if b < 254 {
            *p += 1;
            Some(b as usize)
        } else if b == 254 {
            let v = le(blob.get(*p + 1..*p + 5)?) as usize;
            *p += 5;
            Some(v)
        } else {
            None
        }
    }
    let declared = *blob.first()? as usize;
    let mut p = 1;
    let mut pairs = Vec::new();
    loop {
        if *blob.get(p)? == 0xFF {
            p += 1;
            break;
        }
        let flen = length(blob, &mut p)?;
        let field = blob.get(p..p.checked_add(flen)?)?;
        p += flen;
        let vlen = length(blob, &mut p)?;
        let free = *blob.get(p)? as usize;
        p += 1;
        let value = blob.get(p..p.checked_add(vlen)?)?;
        p += vlen + free;
        pairs.push((Bytes::copy_from_slice(field), Bytes::copy_from_slice(value)));
    }
    if p != blob.len() || (declared < 254 && declared != pairs.len()) {
        return None;
    }
    Some(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ziplist of `a`, `12`, `-300`, as Redis 6 wrote one.
    fn sample() -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&[0x00, 0x01, b'a']); // prevlen 0, str len 1
        body.extend_from_slice(&[0x03, 0xFE, 12]); // prevlen 3, int8
        body.extend_from_slice(&[0x03, 0xC0, 0xD4, 0xFE]); // prevlen 3, int16 -300
        let mut zl = Vec::new();
        let total = 10 + body.len() + 1;
        zl.extend_from_slice(&(total as u32).to_le_bytes());
        zl.extend_from_slice(&(10 + 6u32).to_le_bytes());
        zl.extend_from_slice(&3u16.to_le_bytes());
        zl.extend_from_slice(&body);
        zl.push(0xFF);
        zl
    }

    #[test]
    fn reads_a_ziplist() {
        let items = parse_ziplist(&sample()).unwrap();
        assert_eq!(items, vec![Bytes::from("a"), Bytes::from("12"), Bytes::from("-300")]);
    }

    #[test]
    fn refuses_damaged_ziplists() {
        let good = sample();
        for cut in 0..good.len() {
            assert!(parse_ziplist(&good[..cut]).is_none());
        }
        let mut bad_prev = good.clone();
        bad_prev[13] = 4;
        assert!(parse_ziplist(&bad_prev).is_none());
        let mut bad_tail = good;
        bad_tail[4] = 12;
        assert!(parse_ziplist(&bad_tail).is_none());
    }

    #[test]
    fn reads_a_zipmap() {
        let zm = [2, 1, b'f', 1, 0, b'v', 2, b'g', b'h', 3, 1, b'x', b'y', b'z', 0, 0xFF];
        let pairs = parse_zipmap(&zm).unwrap();
        assert_eq!(pairs[0], (Bytes::from("f"), Bytes::from("v")));
        assert_eq!(pairs[1], (Bytes::from("gh"), Bytes::from("xyz")));
        assert!(parse_zipmap(&zm[..zm.len() - 1]).is_none());
    }
}
