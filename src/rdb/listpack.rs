//! Redis 7.0's listpack (`src/listpack.c`) and intset (`src/intset.c`)
//! blobs, which RDB stores as strings: built entry by entry as Redis's
//! `lpAppend` / `intsetAdd` lay them out, and parsed back with every check
//! of a deep integrity validation (keylock converts each blob to its own
//! structures, so every entry is read anyway).
//!
//! Listpack layout: total bytes (u32 LE), element count (u16 LE, 65535 when
//! unknown), entries, 0xFF. An entry is an encoding byte (with its data),
//! then its own length as a "backlen" of 1–5 bytes, for walking backwards.

use bytes::Bytes;

const HEADER: usize = 6;
const EOF: u8 = 0xFF;

/// A listpack being built.
pub struct ListpackWriter {
    buf: Vec<u8>,
    count: usize,
}

impl Default for ListpackWriter {
    fn default() -> Self {
        ListpackWriter {
            buf: vec![0; HEADER],
            count: 0,
        }
    }
}

/// `lpStringToInt64`: a string that is exactly an i64's decimal spelling.
pub fn canonical_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let v: i64 = std::str::from_utf8(s).ok()?.parse().ok()?;
    let mut buf = itoa::Buffer::new();
    (buf.format(v).as_bytes() == s).then_some(v)
}

impl ListpackWriter {
    /// The size the listpack has now, terminator included (`lpBytes`).
    pub fn bytes(&self) -> usize {
        self.buf.len() + 1
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Appends an element, integer-encoded when it spells an integer.
    pub fn push(&mut self, element: &[u8]) {
        let start = self.buf.len();
        match canonical_i64(element) {
            Some(v) => self.push_int(v),
            None => self.push_str(element),
        }
        let entry_len = self.buf.len() - start;
        push_backlen(&mut self.buf, entry_len);
        self.count += 1;
    }

    fn push_int(&mut self, v: i64) {
        let b = &mut self.buf;
        if (0..=127).contains(&v) {
            b.push(v as u8);
        } else if (-4096..=4095).contains(&v) {
            let u = if v < 0 { (1 << 13) + v } else { v } as u16;
            b.push(((u >> 8) as u8) | 0xC0);
            b.push(u as u8);
        } else if (-32768..=32767).contains(&v) {
            b.push(0xF1);
            b.extend_from_slice(&(v as i16).to_le_bytes());
        } else if (-8_388_608..=8_388_607).contains(&v) {
            b.push(0xF2);
            b.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
        } else if (i32::MIN as i64..=i32::MAX as i64).contains(&v) {
            b.push(0xF3);
            b.extend_from_slice(&(v as i32).to_le_bytes());
        } else {
            b.push(0xF4);
            b.extend_from_slice(&v.to_le_bytes());
        }
    }

    fn push_str(&mut self, s: &[u8]) {
        let b = &mut self.buf;
        let len = s.len();
        if len < 64 {
            b.push(0x80 | len as u8);
        } else if len < 4096 {
            b.push(0xE0 | (len >> 8) as u8);
            b.push(len as u8);
        } else {
            b.push(0xF0);
            b.extend_from_slice(&(len as u32).to_le_bytes());
        }
        b.extend_from_slice(s);
    }

    /// The finished blob.
    pub fn finish(mut self) -> Vec<u8> {
        self.buf.push(EOF);
        let total = self.buf.len() as u32;
        self.buf[..4].copy_from_slice(&total.to_le_bytes());
        let count = if self.count < 65535 { self.count as u16 } else { 65535 };
        self.buf[4..6].copy_from_slice(&count.to_le_bytes());
        self.buf
    }
}

/// `lpEncodeBacklen`.
fn push_backlen(buf: &mut Vec<u8>, l: usize) {
    if l <= 127 {
        buf.push(l as u8);
    } else if l < 16383 {
        buf.extend_from_slice(&[(l >> 7) as u8, (l & 127) as u8 | 128]);
    } else if l < 2_097_151 {
        buf.extend_from_slice(&[(l >> 14) as u8, ((l >> 7) & 127) as u8 | 128, (l & 127) as u8 | 128]);
    } else if l < 268_435_455 {
        buf.extend_from_slice(&[
            (l >> 21) as u8,
            ((l >> 14) & 127) as u8 | 128,
            ((l >> 7) & 127) as u8 | 128,
            (l & 127) as u8 | 128,
        ]);
    } else {
        buf.extend_from_slice(&[
            (l >> 28) as u8,
            ((l >> 21) & 127) as u8 | 128,
            ((l >> 14) & 127) as u8 | 128,
            ((l >> 7) & 127) as u8 | 128,
            (l & 127) as u8 | 128,
        ]);
    }
}

fn backlen_size(l: usize) -> usize {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

/// `lpDecodeBacklen`: the back-length ending at `at`, read backwards as
/// `lpValidateNext` reads it (7 bits a byte while the high bit is set,
/// at most 5 bytes), so a non-canonical spelling that decodes to the
/// entry's length passes, as in Redis.
fn decode_backlen(blob: &[u8], mut at: usize) -> Option<u64> {
    let mut value = 0u64;
    let mut shift = 0;
    loop {
        let b = *blob.get(at)?;
        value |= u64::from(b & 127) << shift;
        if b & 128 == 0 {
            return Some(value);
        }
        shift += 7;
        if shift > 28 {
            return None;
        }
        at = at.checked_sub(1)?;
    }
}

/// An element as a string: integers in their decimal spelling.
pub fn int_text(v: i64) -> Bytes {
    Bytes::copy_from_slice(itoa::Buffer::new().format(v).as_bytes())
}

fn le(bytes: &[u8]) -> u64 {
    bytes.iter().rev().fold(0, |acc, &b| (acc << 8) | u64::from(b))
}

/// Sign-extends the low `bits` bits of `v`.
fn signed(v: u64, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((v << shift) as i64) >> shift
}

/// Every element of a listpack blob, or None if it is malformed in any
/// way Redis's deep validation (`lpValidateIntegrity` with `deep`) finds.
pub fn parse(blob: &[u8]) -> Option<Vec<Bytes>> {
    let (elements, declared) = parse_uncounted(blob)?;
    (declared == 65535 || declared == elements.len()).then_some(elements)
}

/// Every element of a listpack blob and the element count its header
/// declares, unchecked: a stream node's listpack is walked by
/// `streamValidateListpackIntegrity`, which never compares the two.
pub fn parse_uncounted(blob: &[u8]) -> Option<(Vec<Bytes>, usize)> {
    if blob.len() < HEADER + 1 {
        return None;
    }
    let total = le(&blob[..4]) as usize;
    let declared = le(&blob[4..6]) as usize;
    if total != blob.len() || blob[blob.len() - 1] != EOF {
        return None;
    }
    let end = blob.len() - 1;
    let mut elements = Vec::new();
    let mut p = HEADER;
    while p < end {
        let e = blob[p];
        let (element, entry_len) = if e & 0x80 == 0 {
            (int_text(i64::from(e)), 1)
        } else if e & 0xC0 == 0x80 {
            let len = (e & 0x3F) as usize;
            (Bytes::copy_from_slice(blob.get(p + 1..p + 1 + len)?), 1 + len)
        } else if e & 0xE0 == 0xC0 {
            let v = (u64::from(e & 0x1F) << 8) | u64::from(*blob.get(p + 1)?);
            (int_text(signed(v, 13)), 2)
        } else if e & 0xF0 == 0xE0 {
            let len = (((e & 0x0F) as usize) << 8) | *blob.get(p + 1)? as usize;
            (Bytes::copy_from_slice(blob.get(p + 2..p + 2 + len)?), 2 + len)
        } else {
            match e {
                0xF0 => {
                    let len = le(blob.get(p + 1..p + 5)?) as usize;
                    let data = blob.get(p + 5..p.checked_add(5)?.checked_add(len)?)?;
                    (Bytes::copy_from_slice(data), 5 + len)
                }
                0xF1 => (int_text(signed(le(blob.get(p + 1..p + 3)?), 16)), 3),
                0xF2 => (int_text(signed(le(blob.get(p + 1..p + 4)?), 24)), 4),
                0xF3 => (int_text(signed(le(blob.get(p + 1..p + 5)?), 32)), 5),
                0xF4 => (int_text(le(blob.get(p + 1..p + 9)?) as i64), 9),
                _ => return None,
            }
        };
        let back_at = p + entry_len;
        let back_end = back_at + backlen_size(entry_len);
        if back_end > end {
            return None;
        }
        if decode_backlen(blob, back_end - 1) != Some(entry_len as u64) {
            return None;
        }
        elements.push(element);
        p = back_end;
    }
    Some((elements, declared))
}

/// An intset blob: encoding (u32 LE: 2, 4 or 8), count (u32 LE), the
/// values ascending, each in the encoding's width.
pub fn intset(values: &[i64]) -> Vec<u8> {
    let width: usize = values.iter().fold(2, |w, &v| {
        if v < i64::from(i32::MIN) || v > i64::from(i32::MAX) {
            8
        } else if v < i64::from(i16::MIN) || v > i64::from(i16::MAX) {
            w.max(4)
        } else {
            w
        }
    });
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let mut out = Vec::with_capacity(8 + width * sorted.len());
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(&(sorted.len() as u32).to_le_bytes());
    for v in sorted {
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
    out
}

/// The values of an intset blob, checked as `intsetValidateIntegrity`
/// with `deep` checks them (ascending, no duplicates), or None.
pub fn parse_intset(blob: &[u8]) -> Option<Vec<i64>> {
    if blob.len() < 8 {
        return None;
    }
    let width = le(&blob[..4]) as usize;
    if !matches!(width, 2 | 4 | 8) {
        return None;
    }
    let count = le(&blob[4..8]) as usize;
    if count.checked_mul(width)? != blob.len() - 8 || count == 0 {
        return None;
    }
    let values: Vec<i64> = blob[8..].chunks_exact(width).map(|c| signed(le(c), (width * 8) as u32)).collect();
    values.windows(2).all(|w| w[0] < w[1]).then_some(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listpack_of(items: &[&[u8]]) -> Vec<u8> {
        let mut w = ListpackWriter::default();
        for i in items {
            w.push(i);
        }
        w.finish()
    }

    #[test]
    fn builds_the_listpack_redis_builds() {
        // redis-server 7.0.15: RPUSH l a b 1 2 300 -5 100000 hello; DUMP l
        // holds this node (after its length byte, 0x23).
        let lp = listpack_of(&[b"a", b"b", b"1", b"2", b"300", b"-5", b"100000", b"hello"]);
        assert_eq!(
            lp,
            b"#\x00\x00\x00\x08\x00\x81a\x02\x81b\x02\x01\x01\x02\x01\xc1,\x02\xdf\xfb\x02\xf2\xa0\x86\x01\x04\x85hello\x06\xff"
        );
    }

    #[test]
    fn every_encoding_round_trips() {
        let long = vec![b'x'; 5000];
        let mid = vec![b'y'; 300];
        let items: Vec<&[u8]> = vec![
            b"0",
            b"127",
            b"128",
            b"-4096",
            b"4095",
            b"-32768",
            b"8388607",
            b"-2147483648",
            b"9223372036854775807",
            b"-9223372036854775808",
            b"007",
            b"-0",
            b"",
            &mid,
            &long,
        ];
        let parsed = parse(&listpack_of(&items)).unwrap();
        let want: Vec<Bytes> = items.iter().map(|i| Bytes::copy_from_slice(i)).collect();
        assert_eq!(parsed, want);
    }

    #[test]
    fn malformed_listpacks_are_refused() {
        let good = listpack_of(&[b"a", b"1000"]);
        assert!(parse(&good).is_some());
        for cut in 0..good.len() {
            assert!(parse(&good[..cut]).is_none(), "prefix of {cut}");
        }
        let mut bad_count = good.clone();
        bad_count[4] = 3;
        assert!(parse(&bad_count).is_none());
        let mut bad_backlen = good.clone();
        bad_backlen[8] = 9;
        assert!(parse(&bad_backlen).is_none());
        let mut bad_encoding = good;
        bad_encoding[6] = 0xF5;
        assert!(parse(&bad_encoding).is_none());
    }

    #[test]
    fn intsets_widen_to_their_largest_value_and_stay_sorted() {
        let blob = intset(&[70000, 1, -3]);
        assert_eq!(&blob[..8], &[4, 0, 0, 0, 3, 0, 0, 0]);
        assert_eq!(parse_intset(&blob).unwrap(), vec![-3, 1, 70000]);
        let mut unsorted = blob.clone();
        unsorted[8..12].copy_from_slice(&blob[16..20]);
        assert!(parse_intset(&unsorted).is_none());
        assert!(parse_intset(&blob[..blob.len() - 1]).is_none());
    }
}
