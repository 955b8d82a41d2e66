//! Reading one value as Redis 7.0.15's `rdbLoadObjectType` +
//! `rdbLoadObject` read it, for every encoding Redis 7.0 accepts for
//! strings, lists, sets, sorted sets and hashes.
//!
//! Every blob is parsed entry by entry into keylock's structures, so the
//! checks are those of Redis's deep sanitization
//! (`sanitize-dump-payload yes`) whatever that parameter says: a payload
//! Redis would only accept without sanitization (a listpack whose entries
//! are damaged behind a sound header, a small hash with a repeated field)
//! is refused here. A payload never panics the reader and never makes it
//! allocate more than the payload can hold: a count is trusted only as
//! far as the bytes left could encode that many elements, and an LZF
//! string only up to `proto-max-bulk-len` and LZF's largest ratio.
//!
//! Streams (types 15 and 19) are read as `rdbLoadObject` reads them with
//! deep sanitization: each node's listpack walked as
//! `streamValidateListpackIntegrity` walks it, and every pending entry of
//! a group owned by exactly one of its consumers. keylock also refuses
//! what it could not represent and Redis does not check: entry IDs out of
//! order or outside their node, and a stream length other than the count
//! of live entries. Module values are refused (`Bad data format`).

use std::collections::VecDeque;

use bytes::Bytes;

use super::encode::{STREAM_ITEM_DELETED, STREAM_ITEM_SAME_FIELDS};
use super::listpack::{self, int_text};
use super::{DecodeOptions, legacy, lzf, types};
use crate::db::Value;
use crate::db::hash::{Hash, PackLimits};
use crate::db::stream::{Consumer, Group, LoadedNode, Nack, Stream, StreamId};
use crate::db::value::Set;
use crate::db::zset::{ListpackLimits, ZSet};

/// The most elements reserved ahead of reading them: a count is only as
/// good as the payload behind it, and each element costs more in memory
/// than its one byte in the payload.
const PREALLOCATE: usize = 1024;

/// A cursor over an RDB stream (for DUMP, the whole payload).
pub struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
    options: &'a DecodeOptions,
    /// A read wanted bytes past the end of `buf`: as many as this in all.
    wanted: Option<usize>,
}

/// A length as `rdbLoadLen` reads it: a count, or a special string
/// encoding (the `11` prefix).
enum Len {
    Plain(u64),
    Encoded(u8),
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8], options: &'a DecodeOptions) -> Reader<'a> {
        Reader {
            buf,
            at: 0,
            options,
            wanted: None,
        }
    }

    /// Bytes read so far.
    pub fn position(&self) -> usize {
        self.at
    }

    /// `n` raw bytes.
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        self.take(n)
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.at
    }

    /// If a read failed for want of bytes past the end of the buffer (so
    /// that more of the file could make it succeed), rather than for what
    /// the bytes say: how long the buffer would have to be, at least.
    pub fn wanted(&self) -> Option<usize> {
        self.wanted
    }

    /// One byte (an opcode or a type).
    pub fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let Some(bytes) = self.buf.get(self.at..end) else {
            self.wanted = Some(end);
            return None;
        };
        self.at = end;
        Some(bytes)
    }

    fn raw_len(&mut self) -> Option<Len> {
        let first = self.u8()?;
        Some(match first >> 6 {
            0 => Len::Plain(u64::from(first & 0x3F)),
            1 => Len::Plain((u64::from(first & 0x3F) << 8) | u64::from(self.u8()?)),
            3 => Len::Encoded(first & 0x3F),
            _ => match first {
                0x80 => {
                    let b = self.take(4)?;
                    Len::Plain(u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]])))
                }
                0x81 => {
                    let b = self.take(8)?;
                    Len::Plain(u64::from_be_bytes(b.try_into().ok()?))
                }
                _ => return None,
            },
        })
    }

    /// A length where no string encoding is expected (`rdbLoadLen` with
    /// no `isencoded`): the `11` prefix then reads as its low six bits, as
    /// in Redis.
    fn len(&mut self) -> Option<u64> {
        match self.raw_len()? {
            Len::Plain(n) => Some(n),
            Len::Encoded(n) => Some(u64::from(n)),
        }
    }

    /// [`Reader::len`] for readers outside this module (FUNCTION RESTORE's
    /// description indicator).
    pub fn length(&mut self) -> Option<u64> {
        self.len()
    }

    /// A length whose value `rdbLoadObject` uses without checking it for
    /// `RDB_LENERR` (a stream's IDs and counters): an unknown `10` prefix
    /// reads as u64::MAX after its one byte, as in Redis, where only a
    /// short read is an error.
    fn len_or_max(&mut self) -> Option<u64> {
        let first = *self.take(1)?.first()?;
        self.at -= 1;
        if first >> 6 == 2 && first != 0x80 && first != 0x81 {
            self.at += 1;
            return Some(u64::MAX);
        }
        self.len()
    }

    /// A count of elements each at least `min_bytes` long, trusted only if
    /// the bytes left could hold that many.
    fn count(&mut self, min_bytes: usize) -> Option<usize> {
        let n = usize::try_from(self.len()?).ok()?;
        let bytes = n.checked_mul(min_bytes)?;
        if bytes > self.remaining() {
            self.wanted = self.at.checked_add(bytes);
            return None;
        }
        Some(n)
    }

    /// `rdbGenericLoadStringObject`: plain, integer or LZF.
    pub fn string(&mut self) -> Option<Bytes> {
        match self.raw_len()? {
            Len::Plain(n) => Some(Bytes::copy_from_slice(self.take(usize::try_from(n).ok()?)?)),
            Len::Encoded(0) => Some(int_text(i64::from(self.u8()? as i8))),
            Len::Encoded(1) => {
                let b = self.take(2)?;
                Some(int_text(i64::from(i16::from_le_bytes([b[0], b[1]]))))
            }
            Len::Encoded(2) => {
                let b = self.take(4)?;
                Some(int_text(i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))))
            }
            Len::Encoded(3) => {
                let packed_len = usize::try_from(self.len()?).ok()?;
                let len = usize::try_from(self.len()?).ok()?;
                let packed = self.take(packed_len)?;
                // One 3-byte back reference expands to at most 264 bytes.
                if len > self.options.max_string || len > packed_len.saturating_mul(88) {
                    return None;
                }
                lzf::decompress(packed, len).map(Bytes::from)
            }
            Len::Encoded(_) => None,
        }
    }

    /// `rdbLoadBinaryDoubleValue`.
    fn binary_double(&mut self) -> Option<f64> {
        Some(f64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    /// `rdbLoadDoubleValue`: a length byte (253 NaN, 254 +inf, 255 -inf)
    /// then the number as text.
    fn text_double(&mut self) -> Option<f64> {
        match self.u8()? {
            255 => Some(f64::NEG_INFINITY),
            254 => Some(f64::INFINITY),
            253 => Some(f64::NAN),
            // sscanf("%lg"): the longest number at the start, none an error.
            n => number_prefix(self.take(n as usize)?),
        }
    }
}

/// A type byte and the value after it, or None for anything Redis would
/// answer `Bad data format` to (and the damage Redis only catches with
/// deep sanitization).
pub fn read_object(r: &mut Reader<'_>) -> Option<Value> {
    let kind = r.u8()?;
    read_typed(kind, r)
}

/// The value after a type byte `kind` already read (an RDB file reads the
/// byte first to tell opcodes from types).
pub fn read_typed(kind: u8, r: &mut Reader<'_>) -> Option<Value> {
    match kind {
        types::STRING => r.string().map(Value::Str),
        types::LIST => {
            let n = nonzero(r.count(1)?)?;
            let mut list = VecDeque::with_capacity(n.min(PREALLOCATE));
            for _ in 0..n {
                list.push_back(r.string()?);
            }
            Some(Value::List(Box::new(list)))
        }
        types::SET => {
            let n = nonzero(r.count(1)?)?;
            set_of(
                (0..n).map(|_| r.string()).collect::<Option<Vec<_>>>()?,
                r.options.set_max_intset_entries,
            )
        }
        types::ZSET | types::ZSET_2 => {
            let min = if kind == types::ZSET_2 { 9 } else { 2 };
            let n = nonzero(r.count(min)?)?;
            let mut pairs = Vec::with_capacity(n.min(PREALLOCATE));
            for _ in 0..n {
                let member = r.string()?;
                let score = if kind == types::ZSET_2 {
                    r.binary_double()?
                } else {
                    r.text_double()?
                };
                pairs.push((member, score));
            }
            let limits = r.options.zset_limits;
            zset_of(pairs, limits, limits)
        }
        types::HASH => {
            let n = nonzero(r.count(2)?)?;
            let mut pairs = Vec::with_capacity(n.min(PREALLOCATE));
            for _ in 0..n {
                pairs.push((r.string()?, r.string()?));
            }
            hash_of(pairs, r.options.hash_limits)
        }
        types::LIST_QUICKLIST | types::LIST_QUICKLIST_2 => {
            let nodes = nonzero(r.count(2)?)?;
            let mut list = VecDeque::new();
            for _ in 0..nodes {
                let container = if kind == types::LIST_QUICKLIST_2 { r.len()? } else { 2 };
                let blob = r.string()?;
                if blob.is_empty() {
                    return None;
                }
                match container {
                    1 => list.push_back(blob),
                    2 if kind == types::LIST_QUICKLIST_2 => list.extend(listpack::parse(&blob)?),
                    2 => list.extend(legacy::parse_ziplist(&blob)?),
                    _ => return None,
                }
            }
            nonzero(list.len())?;
            Some(Value::List(Box::new(list)))
        }
        types::HASH_ZIPMAP => hash_of(legacy::parse_zipmap(&r.string()?)?, r.options.hash_limits),
        types::LIST_ZIPLIST => {
            let items = legacy::parse_ziplist(&r.string()?)?;
            nonzero(items.len())?;
            Some(Value::List(Box::new(items.into())))
        }
        types::SET_INTSET => {
            let values = listpack::parse_intset(&r.string()?)?;
            set_of(values.into_iter().map(int_text).collect(), r.options.set_max_intset_entries)
        }
        types::ZSET_ZIPLIST | types::ZSET_LISTPACK => {
            let blob = r.string()?;
            let items = if kind == types::ZSET_LISTPACK {
                listpack::parse(&blob)?
            } else {
                legacy::parse_ziplist(&blob)?
            };
            let pairs = pairs_of(items)?.into_iter().map(|(m, s)| (m, strtod(&s))).collect::<Vec<_>>();
            // A loaded listpack stays one while it has few enough members,
            // whatever their length.
            let limits = r.options.zset_limits;
            let listpack_limits = ListpackLimits {
                max_value: usize::MAX,
                ..limits
            };
            zset_of(pairs, limits, listpack_limits)
        }
        types::HASH_ZIPLIST | types::HASH_LISTPACK => {
            let blob = r.string()?;
            let items = if kind == types::HASH_LISTPACK {
                listpack::parse(&blob)?
            } else {
                legacy::parse_ziplist(&blob)?
            };
            hash_of(pairs_of(items)?, r.options.hash_limits)
        }
        types::STREAM_LISTPACKS | types::STREAM_LISTPACKS_2 => read_stream(r, kind == types::STREAM_LISTPACKS_2),
        _ => None,
    }
}

/// `lpGetIntegerIfValid`: an element that is an integer, whichever way
/// the listpack encoded it.
fn lp_int(element: Option<&Bytes>) -> Option<i64> {
    listpack::canonical_i64(element?)
}

/// One node's listpack, checked as `streamValidateListpackIntegrity`
/// checks it with `deep`, with its entries' IDs resolved against
/// `master`.
fn stream_node(master: StreamId, blob: &[u8]) -> Option<LoadedNode> {
    let (items, _) = listpack::parse_uncounted(blob)?;
    let mut it = items.iter();
    let count = lp_int(it.next())?;
    let deleted = lp_int(it.next())?;
    let master_count = usize::try_from(lp_int(it.next())?).ok()?;
    let master_fields: Vec<Bytes> = (0..master_count).map(|_| it.next().cloned()).collect::<Option<_>>()?;
    if lp_int(it.next())? != 0 {
        return None;
    }
    let total = count.checked_add(deleted).filter(|t| *t >= 0)?;
    let mut node = LoadedNode {
        master,
        master_fields,
        entries: Vec::new(),
        tombstones: Vec::new(),
        listpack_bytes: blob.len() as u64,
        last: master,
    };
    for _ in 0..total {
        let flags = lp_int(it.next())?;
        let ms = lp_int(it.next())?;
        let seq = lp_int(it.next())?;
        let id = StreamId::new(master.ms.wrapping_add(ms as u64), master.seq.wrapping_add(seq as u64));
        let (fields, lp_count) = if flags & STREAM_ITEM_SAME_FIELDS != 0 {
            let mut fields = Vec::with_capacity(node.master_fields.len() * 2);
            for f in &node.master_fields {
                fields.push(f.clone());
                fields.push(it.next()?.clone());
            }
            (fields, node.master_fields.len() as i64 + 3)
        } else {
            let n = usize::try_from(lp_int(it.next())?).ok()?;
            let fields: Vec<Bytes> = (0..n.checked_mul(2)?).map(|_| it.next().cloned()).collect::<Option<_>>()?;
            (fields, 2 * n as i64 + 4)
        };
        if lp_int(it.next())? != lp_count {
            return None;
        }
        node.last = id;
        if flags & STREAM_ITEM_DELETED != 0 {
            node.tombstones.push((id, fields));
        } else {
            node.entries.push((id, fields));
        }
    }
    it.next().is_none().then_some(node)
}

/// A pending entry's or a node's 16-byte raw ID.
fn raw_id(r: &mut Reader<'_>) -> Option<StreamId> {
    Some(StreamId::decode(r.take(16)?.try_into().ok()?))
}

/// `rdbLoadMillisecondTime`: 8 bytes LE.
fn millis(r: &mut Reader<'_>) -> Option<u64> {
    Some(u64::from_le_bytes(r.take(8)?.try_into().ok()?))
}

/// `rdbLoadObject`'s stream part. `v2` (type 19) adds the first ID, the
/// max deleted ID, entries added and each group's entries read; for type
/// 15 they are derived as Redis derives them.
fn read_stream(r: &mut Reader<'_>, v2: bool) -> Option<Value> {
    let mut s = Stream::default();
    // A node is at least its key (17 bytes) and a listpack's length.
    let count = r.count(18)?;
    let mut nodes = Vec::with_capacity(count.min(PREALLOCATE));
    for _ in 0..count {
        let key = r.string()?;
        let master = StreamId::decode(key.as_ref().try_into().ok()?);
        let blob = r.string()?;
        nodes.push(stream_node(master, &blob)?);
    }
    // The radix tree orders the nodes by key, whatever the payload's order.
    nodes.sort_by_key(|node| node.master);
    for node in nodes {
        if !s.push_loaded_node(node) {
            return None;
        }
    }
    if r.len_or_max()? != s.len() as u64 {
        return None;
    }
    s.last_id = StreamId::new(r.len_or_max()?, r.len_or_max()?);
    if v2 {
        s.first_id = StreamId::new(r.len_or_max()?, r.len_or_max()?);
        s.max_deleted_id = StreamId::new(r.len_or_max()?, r.len_or_max()?);
        s.entries_added = r.len_or_max()?;
    } else {
        s.first_id = s.first().map_or(StreamId::MAX, |(id, _)| id);
        s.entries_added = s.len() as u64;
    }
    // A group is at least a name, an ID, its counter and two counts.
    let groups = r.count(6)?;
    for _ in 0..groups {
        let name = r.string()?;
        let last_id = StreamId::new(r.len_or_max()?, r.len_or_max()?);
        let entries_read = if v2 { r.len_or_max()? as i64 } else { s.estimate_distance(last_id) };
        let mut group = Group::new(last_id, entries_read);
        // A pending entry is its raw ID, a time and a count.
        for _ in 0..r.count(25)? {
            let id = raw_id(r)?;
            let nack = Nack {
                delivery_time: millis(r)?,
                delivery_count: r.len_or_max()?,
                consumer: None,
            };
            if group.pel.insert(id, nack).is_some() {
                return None;
            }
        }
        // A consumer is a name, a time and a count.
        for _ in 0..r.count(10)? {
            let name = r.string()?;
            let mut consumer = Consumer {
                seen_time: millis(r)?,
                pel: Default::default(),
            };
            for _ in 0..r.count(16)? {
                let id = raw_id(r)?;
                let nack = group.pel.get_mut(&id)?;
                if nack.consumer.is_some() || !consumer.pel.insert(id) {
                    return None;
                }
                nack.consumer = Some(name.clone());
            }
            if group.consumers.insert(name, consumer).is_some() {
                return None;
            }
        }
        if group.pel.values().any(|nack| nack.consumer.is_none()) || s.groups.insert(name, group).is_some() {
            return None;
        }
    }
    Some(Value::Stream(Box::new(s)))
}

/// C's `strtod(text, NULL)` as `zzlGetScore` reads a listpack score: the
/// longest prefix that is a number (after leading spaces), 0 when there
/// is none. Redis does not check the scores of a loaded listpack, even
/// with deep sanitization, so a damaged score loads as what strtod makes
/// of it. Hexadecimal floats read as their leading 0.
fn strtod(text: &[u8]) -> f64 {
    number_prefix(text).unwrap_or(0.0)
}

/// The number C's strtod / sscanf("%lg") reads at the start of `text`
/// (after leading spaces), or None when there is none.
fn number_prefix(text: &[u8]) -> Option<f64> {
    let start = text.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(text.len());
    let t = &text[start..];
    let mut i = usize::from(matches!(t.first(), Some(b'+' | b'-')));
    let word = |w: &str| t.len() >= i + w.len() && t[i..i + w.len()].eq_ignore_ascii_case(w.as_bytes());
    let negative = t.first() == Some(&b'-');
    if word("inf") {
        return Some(if negative { f64::NEG_INFINITY } else { f64::INFINITY });
    }
    if word("nan") {
        return Some(f64::NAN);
    }
    let digits = |i: &mut usize| {
        let from = *i;
        while t.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - from
    };
    let mut mantissa = digits(&mut i);
    if t.get(i) == Some(&b'.') {
        let mut j = i + 1;
        let fraction = digits(&mut j);
        if mantissa + fraction > 0 {
            mantissa += fraction;
            i = j;
        }
    }
    if mantissa == 0 {
        return None;
    }
    if matches!(t.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(t.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        if digits(&mut j) > 0 {
            i = j;
        }
    }
    std::str::from_utf8(&t[..i]).ok()?.parse().ok()
}

fn nonzero(n: usize) -> Option<usize> {
    (n > 0).then_some(n)
}

/// Alternating elements as (first, second) pairs: an even, nonzero count.
fn pairs_of(items: Vec<Bytes>) -> Option<Vec<(Bytes, Bytes)>> {
    if items.is_empty() || !items.len().is_multiple_of(2) {
        return None;
    }
    let mut it = items.into_iter();
    let mut pairs = Vec::new();
    while let (Some(a), Some(b)) = (it.next(), it.next()) {
        pairs.push((a, b));
    }
    Some(pairs)
}

/// A loaded set, with the encoding Redis's `rdbLoadObject` gives it.
fn set_of(members: Vec<Bytes>, max_intset: usize) -> Option<Value> {
    nonzero(members.len())?;
    let mut set = Set::default();
    for m in members {
        if !set.insert(m) {
            return None;
        }
    }
    set.settle(max_intset);
    Some(Value::Set(Box::new(set)))
}

fn hash_of(pairs: Vec<(Bytes, Bytes)>, limits: PackLimits) -> Option<Value> {
    nonzero(pairs.len())?;
    let mut hash = Hash::default();
    for (f, v) in pairs {
        if !hash.insert(&f, &v, limits) {
            return None;
        }
    }
    Some(Value::Hash(hash))
}

/// A sorted set built as a skiplist, then made a listpack if it fits
/// `listpack_limits` (Redis's conversion after loading).
fn zset_of(pairs: Vec<(Bytes, f64)>, limits: ListpackLimits, listpack_limits: ListpackLimits) -> Option<Value> {
    nonzero(pairs.len())?;
    let mut z = ZSet::new_skiplist();
    for (m, s) in pairs {
        if s.is_nan() || !z.insert_with(m, s, limits) {
            return None;
        }
    }
    z.compact_if_fits(listpack_limits);
    Some(Value::ZSet(Box::new(z)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdb::encode::write_object;
    use crate::rdb::{EncodeOptions, dump, restore};

    fn round_trip(value: &Value) -> Value {
        let payload = dump(value, &EncodeOptions::default());
        restore(&payload, &DecodeOptions::default(), true).expect("restorable")
    }

    fn list_of(items: &[&str]) -> Value {
        Value::List(Box::new(items.iter().map(|s| Bytes::copy_from_slice(s.as_bytes())).collect()))
    }

    fn list_items(v: &Value) -> Vec<Bytes> {
        v.as_list().unwrap().iter().cloned().collect()
    }

    #[test]
    fn strings_round_trip_in_every_encoding() {
        for s in ["", "7", "-129", "70000", "12345678901", "x".repeat(100).as_str(), "abc"] {
            let v = round_trip(&Value::Str(Bytes::copy_from_slice(s.as_bytes())));
            assert_eq!(v.as_str().unwrap().as_ref(), s.as_bytes());
        }
    }

    #[test]
    fn lists_round_trip_across_many_nodes() {
        let items: Vec<String> = (0..5000).map(|i| format!("item-{i}-{}", "z".repeat(i % 50))).collect();
        let refs: Vec<&str> = items.iter().map(String::as_str).collect();
        let v = round_trip(&list_of(&refs));
        assert_eq!(list_items(&v).len(), 5000);
        assert_eq!(list_items(&v)[4999], Bytes::from(items[4999].clone()));
    }

    #[test]
    fn sets_round_trip_as_intset_and_as_table() {
        for members in [vec!["1", "-2", "300000"], vec!["a", "1", "b"]] {
            let mut set = Set::default();
            for m in &members {
                set.insert(Bytes::copy_from_slice(m.as_bytes()));
            }
            let v = round_trip(&Value::Set(Box::new(set)));
            assert_eq!(v.as_set().unwrap().len(), members.len());
        }
    }

    #[test]
    fn hashes_and_zsets_round_trip_small_and_large() {
        for n in [3usize, 300] {
            let mut h = Hash::default();
            let mut z = ZSet::default();
            for i in 0..n {
                h.insert(format!("f{i}").as_bytes(), format!("v{i}").as_bytes(), PackLimits::default());
                z.insert(Bytes::from(format!("m{i}")), i as f64 / 3.0);
            }
            let hv = round_trip(&Value::Hash(h));
            assert_eq!(hv.as_hash().unwrap().len(), n);
            assert_eq!(hv.as_hash().unwrap().get(b"f1"), Some(&b"v1"[..]));
            let zv = round_trip(&Value::ZSet(Box::new(z)));
            let zv = zv.as_zset().unwrap();
            assert_eq!(zv.len(), n);
            assert_eq!(zv.score(b"m2"), Some(2.0 / 3.0));
            assert_eq!(zv.is_listpack(), n <= 128);
        }
    }

    #[test]
    fn old_encodings_load() {
        // A zset (v1) with string scores, and a plain list.
        let mut body = vec![types::ZSET, 2, 1, b'a', 3, b'1', b'.', b'5', 1, b'b', 254];
        body.extend_from_slice(&[0; 10]);
        let options = DecodeOptions::default();
        let z = read_object(&mut Reader::new(&body, &options)).unwrap();
        assert_eq!(z.as_zset().unwrap().score(b"a"), Some(1.5));
        assert_eq!(z.as_zset().unwrap().score(b"b"), Some(f64::INFINITY));
        let list = [types::LIST, 2, 0xC0, 5, 1, b'x'];
        let l = read_object(&mut Reader::new(&list, &options)).unwrap();
        assert_eq!(list_items(&l), vec![Bytes::from("5"), Bytes::from("x")]);
    }

    #[test]
    fn damaged_payloads_are_errors_never_panics() {
        let options = DecodeOptions::default();
        let mut h = Hash::default();
        h.insert(b"field", b"value", PackLimits::default());
        let mut z = ZSet::default();
        z.insert(Bytes::from("m"), 1.5);
        let samples = vec![
            Value::Str(Bytes::from("a".repeat(50))),
            list_of(&["a", "1", "bb"]),
            Value::Hash(h),
            Value::ZSet(Box::new(z)),
        ];
        for value in samples {
            let mut body = Vec::new();
            write_object(&mut body, &value, &EncodeOptions::default());
            for cut in 0..body.len() {
                let _ = read_object(&mut Reader::new(&body[..cut], &options));
            }
            for i in 0..body.len() {
                for flip in [0x01u8, 0x80, 0xFF] {
                    let mut bad = body.clone();
                    bad[i] ^= flip;
                    let _ = read_object(&mut Reader::new(&bad, &options));
                }
            }
        }
    }

    fn element() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        prop_oneof![
            any::<i64>().prop_map(|v| v.to_string().into_bytes()),
            (-5000i64..5000).prop_map(|v| v.to_string().into_bytes()),
            proptest::collection::vec(any::<u8>(), 0..80),
            (1usize..300).prop_map(|n| b"ab".repeat(n)),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        #[test]
        fn any_list_round_trips(items in proptest::collection::vec(element(), 1..400)) {
            let value = Value::List(Box::new(items.iter().map(|i| Bytes::copy_from_slice(i)).collect()));
            let back = round_trip(&value);
            proptest::prop_assert_eq!(list_items(&back), list_items(&value));
        }

        #[test]
        fn any_hash_set_and_zset_round_trips(items in proptest::collection::vec((element(), element(), -1e9f64..1e9), 1..300)) {
            let mut h = Hash::default();
            let mut set = Set::default();
            let mut z = ZSet::default();
            for (a, b, score) in &items {
                h.insert(a, b, PackLimits::default());
                set.insert(Bytes::copy_from_slice(a));
                z.insert(Bytes::copy_from_slice(a), *score);
            }
            let hv = round_trip(&Value::Hash(h.clone()));
            let got: Vec<(&[u8], &[u8])> = hv.as_hash().unwrap().iter().collect();
            let want: Vec<(&[u8], &[u8])> = h.iter().collect();
            proptest::prop_assert_eq!(got.len(), want.len());
            for (f, v) in want {
                proptest::prop_assert_eq!(hv.as_hash().unwrap().get(f), Some(v));
            }
            let sv = round_trip(&Value::Set(Box::new(set.clone())));
            proptest::prop_assert_eq!(sv.as_set().unwrap().len(), set.len());
            proptest::prop_assert!(set.iter().all(|m| sv.as_set().unwrap().contains(m)));
            let zv = round_trip(&Value::ZSet(Box::new(z.clone())));
            let got: Vec<(Bytes, f64)> = zv.as_zset().unwrap().iter().map(|(m, s)| (m.clone(), s)).collect();
            let want: Vec<(Bytes, f64)> = z.iter().map(|(m, s)| (m.clone(), s)).collect();
            proptest::prop_assert_eq!(got, want);
        }

        #[test]
        fn any_string_round_trips(s in element()) {
            let back = round_trip(&Value::Str(Bytes::from(s.clone())));
            proptest::prop_assert_eq!(back.as_str().unwrap().as_ref(), &s[..]);
        }
    }

    #[test]
    fn listpack_scores_read_as_strtod_reads_them() {
        assert_eq!(strtod(b"2.5"), 2.5);
        assert_eq!(strtod(b" -3e2x"), -300.0);
        assert_eq!(strtod(b"2721A5"), 2721.0);
        assert_eq!(strtod(b"1e"), 1.0);
        assert_eq!(strtod(b"."), 0.0);
        assert_eq!(strtod(b"junk"), 0.0);
        assert_eq!(strtod(b"-Infinity"), f64::NEG_INFINITY);
    }

    fn stream_with_a_group() -> Stream {
        let mut s = Stream::default();
        let limits = crate::db::stream::NodeLimits {
            max_entries: 3,
            max_bytes: 4096,
        };
        for i in 1..=10u64 {
            let fields: Vec<&'static [u8]> = if i % 4 == 0 { vec![b"other", b"x"] } else { vec![b"f", b"v"] };
            let fields = fields.into_iter().map(Bytes::from_static).collect();
            s.append(StreamId::new(i, 0), fields, limits);
        }
        s.delete(StreamId::new(2, 0));
        let mut group = Group::new(StreamId::new(5, 0), 5);
        group.consumers.insert(Bytes::from_static(b"alice"), Consumer::default());
        for ms in [3, 4] {
            let nack = Nack {
                delivery_time: 1700000000000 + ms,
                delivery_count: ms,
                consumer: None,
            };
            group.pel.insert(StreamId::new(ms, 0), nack);
            group.assign(StreamId::new(ms, 0), &Bytes::from_static(b"alice"));
        }
        s.groups.insert(Bytes::from_static(b"g"), group);
        s
    }

    #[test]
    fn streams_round_trip_with_nodes_groups_and_counters() {
        let s = stream_with_a_group();
        let back = round_trip(&Value::Stream(Box::new(s.clone())));
        let back = back.as_stream().unwrap();
        let ids = |s: &Stream| {
            s.range(StreamId::MIN, StreamId::MAX, false)
                .map(|(id, f)| (id, f.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(back), ids(&s));
        assert_eq!(back.node_count(), s.node_count());
        assert_eq!(
            (back.last_id, back.first_id, back.entries_added),
            (s.last_id, s.first_id, s.entries_added)
        );
        let group = &back.groups[&Bytes::from_static(b"g")];
        assert_eq!(group.entries_read, 5);
        assert_eq!(group.pel[&StreamId::new(4, 0)].delivery_count, 4);
        assert_eq!(group.consumers[&Bytes::from_static(b"alice")].pel.len(), 2);
    }

    #[test]
    fn a_pending_entry_must_belong_to_exactly_one_consumer() {
        let mut orphan = stream_with_a_group();
        let group = orphan.groups.get_mut(&Bytes::from_static(b"g")).unwrap();
        group
            .consumers
            .get_mut(&Bytes::from_static(b"alice"))
            .unwrap()
            .pel
            .remove(&StreamId::new(3, 0));
        let payload = dump(&Value::Stream(Box::new(orphan)), &EncodeOptions::default());
        assert!(restore(&payload, &DecodeOptions::default(), false).is_err());

        let mut unknown = stream_with_a_group();
        let group = unknown.groups.get_mut(&Bytes::from_static(b"g")).unwrap();
        group.pel.remove(&StreamId::new(3, 0));
        let payload = dump(&Value::Stream(Box::new(unknown)), &EncodeOptions::default());
        assert!(restore(&payload, &DecodeOptions::default(), false).is_err());
    }

    #[test]
    fn every_truncation_of_a_stream_payload_is_refused() {
        let mut body = Vec::new();
        write_object(
            &mut body,
            &Value::Stream(Box::new(stream_with_a_group())),
            &EncodeOptions::default(),
        );
        let options = DecodeOptions::default();
        assert!(read_object(&mut Reader::new(&body, &options)).is_some());
        for cut in 0..body.len() {
            assert!(read_object(&mut Reader::new(&body[..cut], &options)).is_none(), "prefix of {cut}");
        }
    }

    #[test]
    fn huge_counts_and_lengths_are_refused_without_allocating() {
        let options = DecodeOptions::default();
        let huge_set = [types::SET, 0x81, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF];
        assert!(read_object(&mut Reader::new(&huge_set, &options)).is_none());
        let huge_lzf = [types::STRING, 0xC3, 2, 0x80, 0x7F, 0xFF, 0xFF, 0xFF, 0x00, b'a'];
        assert!(read_object(&mut Reader::new(&huge_lzf, &options)).is_none());
        let empty_set = [types::SET, 0];
        assert!(read_object(&mut Reader::new(&empty_set, &options)).is_none());
        let duplicate = [types::SET, 2, 1, b'a', 1, b'a'];
        assert!(read_object(&mut Reader::new(&duplicate, &options)).is_none());
        let stream = [types::STREAM_LISTPACKS, 0];
        assert!(read_object(&mut Reader::new(&stream, &options)).is_none());
    }
}
