//! Writing one value as Redis 7.0.15's `rdbSaveObjectType` +
//! `rdbSaveObject` write it.
//!
//! Encodings follow keylock's own (the ones OBJECT ENCODING reports): a
//! packed hash is a listpack, a listpack sorted set a listpack, a set of
//! integers within `set-max-intset-entries` an intset. Where keylock keeps
//! less history than Redis the result can differ from Redis's bytes while
//! holding the same contents (it always loads in Redis):
//!
//! - lists are cut into quicklist nodes as if every element had been
//!   pushed at the tail; Redis's nodes also reflect LPUSH, LINSERT and
//!   deletions;
//! - an intset's width is that of its largest current member (Redis's
//!   never narrows after SREM);
//! - large sets and hashes are written in keylock's order, not in the
//!   order of Redis's hash table;
//! - stream nodes are cut where Redis cuts them and keep the entries
//!   deleted from them as Redis's listpacks do, so a stream is written
//!   byte for byte as Redis writes it.

use super::listpack::{self, ListpackWriter};
use super::{EncodeOptions, lzf, types};
use crate::db::Value;
use crate::db::stream::{NodeImage, Stream};

/// `rdbSaveLen`.
pub fn write_len(out: &mut Vec<u8>, len: u64) {
    if len < 1 << 6 {
        out.push(len as u8);
    } else if len < 1 << 14 {
        out.push(0x40 | (len >> 8) as u8);
        out.push(len as u8);
    } else if len <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&len.to_be_bytes());
    }
}

/// `rdbSaveRawString`: an integer of up to 32 bits for a short string that
/// spells one, LZF when compression is on, the string is longer than 20
/// bytes and compression saves at least 4 bytes, else length and bytes.
pub fn write_string(out: &mut Vec<u8>, s: &[u8], options: &EncodeOptions) {
    if s.len() <= 11
        && let Some(v) = listpack::canonical_i64(s)
    {
        if let Ok(v) = i8::try_from(v) {
            out.extend_from_slice(&[0xC0, v as u8]);
            return;
        }
        if let Ok(v) = i16::try_from(v) {
            out.push(0xC1);
            out.extend_from_slice(&v.to_le_bytes());
            return;
        }
        if let Ok(v) = i32::try_from(v) {
            out.push(0xC2);
            out.extend_from_slice(&v.to_le_bytes());
            return;
        }
    }
    if options.compression
        && s.len() > 20
        && let Some(packed) = lzf::compress(s, s.len() - 4)
    {
        out.push(0xC3);
        write_len(out, packed.len() as u64);
        write_len(out, s.len() as u64);
        out.extend_from_slice(&packed);
        return;
    }
    write_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// `rdbSaveBinaryDoubleValue`.
fn write_binary_double(out: &mut Vec<u8>, d: f64) {
    out.extend_from_slice(&d.to_le_bytes());
}

/// Redis's `d2string`: how a listpack sorted set spells a score.
pub fn score_text(d: f64) -> String {
    if d.is_nan() {
        return "nan".into();
    }
    if d.is_infinite() {
        return if d < 0.0 { "-inf".into() } else { "inf".into() };
    }
    if d == 0.0 {
        return if d.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    let half = (i64::MAX / 2) as f64;
    if (-half..=half).contains(&d) && d.fract() == 0.0 {
        return itoa::Buffer::new().format(d as i64).to_string();
    }
    crate::numfmt::fmt_g(d, 17)
}

/// `_quicklistNodeAllowInsert` for a node of `node_bytes` bytes holding
/// `count` elements, and a new element of `len` bytes.
fn node_takes(fill: i64, node_bytes: usize, count: usize, len: usize) -> bool {
    const OPTIMIZATION_LEVEL: [usize; 5] = [4096, 8192, 16384, 32768, 65536];
    const SIZE_SAFETY_LIMIT: usize = 8192;
    const SIZE_ESTIMATE_OVERHEAD: usize = 8;
    const PACKED_THRESHOLD: usize = 1 << 30;
    if len >= PACKED_THRESHOLD {
        return false;
    }
    let new_sz = node_bytes + len + SIZE_ESTIMATE_OVERHEAD;
    if fill < 0 {
        let offset = (-fill - 1) as usize;
        if offset < OPTIMIZATION_LEVEL.len() {
            return new_sz <= OPTIMIZATION_LEVEL[offset];
        }
    }
    new_sz <= SIZE_SAFETY_LIMIT && (count as i64) < fill
}

/// A list cut into quicklist nodes as Redis's pushes would cut it: each
/// node's listpack, and for a plain node (an element of 1 GB or more) the
/// element itself.
fn quicklist_nodes(l: &crate::db::value::List, fill: i64) -> (Vec<ListpackWriter>, Vec<Option<&[u8]>>) {
    let mut nodes: Vec<ListpackWriter> = Vec::new();
    let mut plain: Vec<Option<&[u8]>> = Vec::new();
    for item in l.iter() {
        let fits = match nodes.last() {
            Some(node) if plain.last() == Some(&None) => node_takes(fill, node.bytes(), node.len(), item.len()),
            _ => false,
        };
        if !fits {
            nodes.push(ListpackWriter::default());
            plain.push(if item.len() >= 1 << 30 { Some(item) } else { None });
        }
        if plain.last() == Some(&None)
            && let Some(node) = nodes.last_mut()
        {
            node.push(item);
        }
    }
    (nodes, plain)
}

/// The quicklist a list would be in Redis: its node count and the bytes
/// of its nodes (Redis's `node->sz` summed), for DEBUG OBJECT.
pub fn quicklist_shape(l: &crate::db::value::List, fill: i64) -> (usize, usize) {
    let (nodes, plain) = quicklist_nodes(l, fill);
    let count = nodes.len();
    let bytes = nodes
        .into_iter()
        .zip(plain)
        .map(|(node, plain)| plain.map_or_else(|| node.finish().len(), <[u8]>::len))
        .sum();
    (count, bytes)
}

/// The RDB type byte and body of `value`.
///
/// Every value type needs an arm here (the match is exhaustive on
/// purpose); [`super::decode::read_object`] reads each back.
pub fn write_object(out: &mut Vec<u8>, value: &Value, options: &EncodeOptions) {
    match value {
        Value::Stream(s) => {
            out.push(types::STREAM_LISTPACKS_2);
            write_stream(out, s, options);
        }
        Value::Str(s) => {
            out.push(types::STRING);
            write_string(out, s, options);
        }
        Value::Hash(h) if h.is_packed() => {
            out.push(types::HASH_LISTPACK);
            let mut lp = ListpackWriter::default();
            for (f, v) in h.iter() {
                lp.push(f);
                lp.push(v);
            }
            write_string(out, &lp.finish(), options);
        }
        Value::Hash(h) => {
            out.push(types::HASH);
            write_len(out, h.len() as u64);
            for (f, v) in h.iter() {
                write_string(out, f, options);
                write_string(out, v, options);
            }
        }
        Value::List(l) => {
            out.push(types::LIST_QUICKLIST_2);
            let (nodes, plain) = quicklist_nodes(l, options.list_max_listpack_size);
            write_len(out, nodes.len() as u64);
            for (node, plain) in nodes.into_iter().zip(plain) {
                match plain {
                    Some(item) => {
                        write_len(out, 1);
                        write_string(out, item, options);
                    }
                    None => {
                        write_len(out, 2);
                        write_string(out, &node.finish(), options);
                    }
                }
            }
        }
        Value::Set(s) => {
            // A set Redis holds as a hash table is written as one, even
            // when its members are integers again.
            let ints: Option<Vec<i64>> = if s.len() <= options.set_max_intset_entries && s.is_intset() {
                s.iter().map(|m| listpack::canonical_i64(m)).collect()
            } else {
                None
            };
            match ints {
                Some(ints) => {
                    out.push(types::SET_INTSET);
                    write_string(out, &listpack::intset(&ints), options);
                }
                None => {
                    out.push(types::SET);
                    write_len(out, s.len() as u64);
                    for m in s.iter() {
                        write_string(out, m, options);
                    }
                }
            }
        }
        Value::ZSet(z) if z.is_listpack() => {
            out.push(types::ZSET_LISTPACK);
            let mut lp = ListpackWriter::default();
            for (m, score) in z.iter() {
                lp.push(m);
                lp.push(score_text(score).as_bytes());
            }
            write_string(out, &lp.finish(), options);
        }
        Value::ZSet(z) => {
            out.push(types::ZSET_2);
            write_len(out, z.len() as u64);
            // Greatest first, as Redis walks its skiplist backwards.
            for (m, score) in z.iter().rev() {
                write_string(out, m, options);
                write_binary_double(out, score);
            }
        }
    }
}

/// Redis's stream flags of a listpack entry (`STREAM_ITEM_FLAG_*`).
pub const STREAM_ITEM_DELETED: i64 = 1;
pub const STREAM_ITEM_SAME_FIELDS: i64 = 2;

/// The listpack `streamAppendItem` builds for one node: the master entry
/// (live count, deleted count, the master fields, a 0 terminator), then
/// per entry its flags, ID as deltas from the master ID, its fields
/// unless they are the master's, its values, and its element count.
fn stream_listpack(node: &NodeImage<'_>) -> Vec<u8> {
    let mut lp = ListpackWriter::default();
    let int = |lp: &mut ListpackWriter, v: i64| lp.push(itoa::Buffer::new().format(v).as_bytes());
    let deleted = node.entries.iter().filter(|e| e.2).count() as i64;
    int(&mut lp, node.entries.len() as i64 - deleted);
    int(&mut lp, deleted);
    int(&mut lp, node.master_fields.len() as i64);
    for f in node.master_fields {
        lp.push(f);
    }
    int(&mut lp, 0);
    for (id, fields, is_deleted) in &node.entries {
        let numfields = fields.len() / 2;
        let same = node.master_fields.len() == numfields && node.master_fields.iter().zip(fields.iter().step_by(2)).all(|(a, b)| a == b);
        let flags = if same { STREAM_ITEM_SAME_FIELDS } else { 0 } | if *is_deleted { STREAM_ITEM_DELETED } else { 0 };
        int(&mut lp, flags);
        int(&mut lp, id.ms.wrapping_sub(node.master.ms) as i64);
        int(&mut lp, id.seq.wrapping_sub(node.master.seq) as i64);
        if same {
            for v in fields.iter().skip(1).step_by(2) {
                lp.push(v);
            }
            int(&mut lp, numfields as i64 + 3);
        } else {
            int(&mut lp, numfields as i64);
            for f in fields.iter() {
                lp.push(f);
            }
            int(&mut lp, 2 * numfields as i64 + 4);
        }
    }
    lp.finish()
}

/// `rdbSaveObject`'s stream part (RDB_TYPE_STREAM_LISTPACKS_2): the
/// nodes (master ID as 16 raw bytes, then the listpack), the length and
/// counters, then each group with its last ID, entries read, PEL (raw ID,
/// delivery time as 8 bytes LE, delivery count) and consumers (name, seen
/// time, the raw IDs of their pending entries).
fn write_stream(out: &mut Vec<u8>, s: &Stream, options: &EncodeOptions) {
    let nodes = s.node_images();
    write_len(out, nodes.len() as u64);
    for node in &nodes {
        write_string(out, &node.master.encode(), options);
        write_string(out, &stream_listpack(node), options);
    }
    write_len(out, s.len() as u64);
    for id in [s.last_id, s.first_id, s.max_deleted_id] {
        write_len(out, id.ms);
        write_len(out, id.seq);
    }
    write_len(out, s.entries_added);
    write_len(out, s.groups.len() as u64);
    for (name, group) in &s.groups {
        write_string(out, name, options);
        write_len(out, group.last_id.ms);
        write_len(out, group.last_id.seq);
        write_len(out, group.entries_read as u64);
        write_len(out, group.pel.len() as u64);
        for (id, nack) in &group.pel {
            out.extend_from_slice(&id.encode());
            out.extend_from_slice(&nack.delivery_time.to_le_bytes());
            write_len(out, nack.delivery_count);
        }
        write_len(out, group.consumers.len() as u64);
        for (name, consumer) in &group.consumers {
            write_string(out, name, options);
            out.extend_from_slice(&consumer.seen_time.to_le_bytes());
            write_len(out, consumer.pel.len() as u64);
            for id in &consumer.pel {
                out.extend_from_slice(&id.encode());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string_bytes(s: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        write_string(&mut out, s, &EncodeOptions::default());
        out
    }

    #[test]
    fn lengths_use_the_four_widths() {
        let mut out = Vec::new();
        for len in [63u64, 64, 16383, 16384, u64::from(u32::MAX) + 1] {
            write_len(&mut out, len);
        }
        assert_eq!(
            out,
            [
                &[63u8][..],
                &[0x40, 64],
                &[0x7F, 0xFF],
                &[0x80, 0, 0, 0x40, 0],
                &[0x81, 0, 0, 0, 1, 0, 0, 0, 0]
            ]
            .concat()
        );
    }

    #[test]
    fn short_integers_are_integer_encoded() {
        assert_eq!(string_bytes(b"-5"), [0xC0, 0xFB]);
        assert_eq!(string_bytes(b"300"), [0xC1, 0x2C, 0x01]);
        assert_eq!(string_bytes(b"100000"), [0xC2, 0xA0, 0x86, 0x01, 0x00]);
        // Beyond 32 bits, or not canonical: plain strings.
        assert_eq!(string_bytes(b"4294967296"), [&[10u8][..], b"4294967296"].concat());
        assert_eq!(string_bytes(b"007"), [3, b'0', b'0', b'7']);
    }

    #[test]
    fn long_repetitive_strings_are_compressed_unless_disabled() {
        let s = [b'a'; 30];
        assert_eq!(string_bytes(&s)[..3], [0xC3, 9, 30]);
        let mut out = Vec::new();
        let options = EncodeOptions {
            compression: false,
            ..Default::default()
        };
        write_string(&mut out, &s, &options);
        assert_eq!(out[0], 30);
    }

    #[test]
    fn scores_are_spelled_as_d2string_spells_them() {
        assert_eq!(score_text(1.0), "1");
        assert_eq!(score_text(-0.0), "-0");
        assert_eq!(score_text(0.1), "0.10000000000000001");
        assert_eq!(score_text(1e17), "100000000000000000");
        assert_eq!(score_text(1e300), "1.0000000000000001e+300");
        assert_eq!(score_text(f64::NEG_INFINITY), "-inf");
    }

    #[test]
    fn lists_split_into_nodes_of_at_most_8kb() {
        assert!(node_takes(-2, 8000, 10, 184));
        assert!(!node_takes(-2, 8000, 10, 185));
        assert!(node_takes(5, 100, 4, 10));
        assert!(!node_takes(5, 100, 5, 10));
    }
}
