//! The hash value: packed while small, a table once large — Redis's
//! listpack/hashtable split, for the same reasons.
//!
//! A small hash (at most [`PACKED_MAX_ENTRIES`] fields, every field and
//! value at most [`PACKED_MAX_VALUE`] bytes: Redis's
//! `hash-max-listpack-entries` / `-value` defaults) is one exact-size
//! allocation: a count byte, then `len field len value` records in
//! insertion order. A Redisson lock (one `<uuid>:<thread>` field holding a
//! count) costs 48 bytes this way instead of ~250 as an `IndexMap`.
//! Lookups scan, as a listpack's do; at these sizes that is faster than
//! hashing. The first write that breaks either limit converts the hash to
//! an `IndexMap` for good, as Redis never converts back; the table keeps
//! insertion order across deletions while it is small (`shift_remove`),
//! which is the order Redis shows for small hashes.

use bytes::Bytes;
use indexmap::IndexMap;

use super::value::Hasher;

/// Most fields a packed hash holds by default (`hash-max-listpack-entries`).
pub const PACKED_MAX_ENTRIES: usize = 128;
/// Longest field or value a packed hash holds by default
/// (`hash-max-listpack-value`).
pub const PACKED_MAX_VALUE: usize = 64;
/// What the packed form can hold at all: its counts and lengths are bytes.
const PACKED_CAPACITY: usize = u8::MAX as usize;

/// The `hash-max-listpack-*` parameters in force: a write that takes a
/// packed hash past either converts it to a table, as Redis converts a
/// listpack to a hashtable. Past the packed form's own capacity (255
/// fields, 255-byte fields and values) a hash is a table whatever they
/// say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackLimits {
    pub max_entries: usize,
    pub max_value: usize,
}

impl Default for PackLimits {
    fn default() -> PackLimits {
        PackLimits {
            max_entries: PACKED_MAX_ENTRIES,
            max_value: PACKED_MAX_VALUE,
        }
    }
}

impl PackLimits {
    /// From the parameters' values (negative ones count as 0).
    pub fn new(max_entries: i64, max_value: i64) -> PackLimits {
        let clamp = |n: i64| (n.max(0) as u64).min(PACKED_CAPACITY as u64) as usize;
        PackLimits {
            max_entries: clamp(max_entries),
            max_value: clamp(max_value),
        }
    }
}

type Table = IndexMap<Bytes, Bytes, Hasher>;

#[derive(Debug, Clone)]
pub enum Hash {
    /// `[count, (len, field, len, value)*]`.
    Packed(Box<[u8]>),
    Table(Box<Table>),
}

impl Default for Hash {
    fn default() -> Hash {
        Hash::Packed(Box::new([0]))
    }
}

/// The records of a packed hash: (field, value, offset of the record).
struct Records<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Iterator for Records<'a> {
    type Item = (&'a [u8], &'a [u8], usize);

    fn next(&mut self) -> Option<Self::Item> {
        let start = self.at;
        let flen = *self.buf.get(start)? as usize;
        let field = &self.buf[start + 1..start + 1 + flen];
        let vat = start + 1 + flen;
        let vlen = self.buf[vat] as usize;
        let value = &self.buf[vat + 1..vat + 1 + vlen];
        self.at = vat + 1 + vlen;
        Some((field, value, start))
    }
}

fn records(buf: &[u8]) -> Records<'_> {
    Records { buf, at: 1 }
}

/// Iterates a hash's (field, value) pairs in order.
pub struct Iter<'a>(IterRepr<'a>);

enum IterRepr<'a> {
    Packed(Records<'a>),
    Table(indexmap::map::Iter<'a, Bytes, Bytes>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            IterRepr::Packed(r) => r.next().map(|(f, v, _)| (f, v)),
            IterRepr::Table(t) => t.next().map(|(f, v)| (&f[..], &v[..])),
        }
    }
}

impl Hash {
    pub fn len(&self) -> usize {
        match self {
            Hash::Packed(buf) => buf[0] as usize,
            Hash::Table(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True while Redis would report the `listpack` encoding.
    pub fn is_packed(&self) -> bool {
        matches!(self, Hash::Packed(_))
    }

    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match self {
            Hash::Packed(buf) => records(buf).find(|(f, _, _)| *f == field).map(|(_, v, _)| v),
            Hash::Table(t) => t.get(field).map(|v| &v[..]),
        }
    }

    pub fn contains_key(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    pub fn iter(&self) -> Iter<'_> {
        match self {
            Hash::Packed(buf) => Iter(IterRepr::Packed(records(buf))),
            Hash::Table(t) => Iter(IterRepr::Table(t.iter())),
        }
    }

    pub fn keys(&self) -> impl Iterator<Item = &[u8]> {
        self.iter().map(|(f, _)| f)
    }

    pub fn values(&self) -> impl Iterator<Item = &[u8]> {
        self.iter().map(|(_, v)| v)
    }

    /// The `i`th pair in order.
    pub fn get_index(&self, i: usize) -> Option<(&[u8], &[u8])> {
        match self {
            Hash::Packed(_) => self.iter().nth(i),
            Hash::Table(t) => t.get_index(i).map(|(f, v)| (&f[..], &v[..])),
        }
    }

    /// Sets `field` to `value`; true if the field is new. A packed hash
    /// that would go past `limits` becomes a table for good.
    pub fn insert(&mut self, field: &[u8], value: &[u8], limits: PackLimits) -> bool {
        if let Hash::Packed(buf) = self {
            if field.len() <= limits.max_value && value.len() <= limits.max_value {
                let found = records(buf).find(|(f, _, _)| *f == field).map(|(_, v, at)| (at, v.len()));
                match found {
                    Some((at, old_len)) => {
                        let vat = at + 1 + field.len();
                        if old_len == value.len() {
                            buf[vat + 1..vat + 1 + old_len].copy_from_slice(value);
                        } else {
                            let mut next = Vec::with_capacity(buf.len() - old_len + value.len());
                            next.extend_from_slice(&buf[..=vat]);
                            next[vat] = value.len() as u8;
                            next.extend_from_slice(value);
                            next.extend_from_slice(&buf[vat + 1 + old_len..]);
                            *buf = next.into_boxed_slice();
                        }
                        return false;
                    }
                    None if (buf[0] as usize) < limits.max_entries => {
                        let mut next = Vec::with_capacity(buf.len() + 2 + field.len() + value.len());
                        next.extend_from_slice(buf);
                        next[0] += 1;
                        next.push(field.len() as u8);
                        next.extend_from_slice(field);
                        next.push(value.len() as u8);
                        next.extend_from_slice(value);
                        *buf = next.into_boxed_slice();
                        return true;
                    }
                    None => {}
                }
            }
            self.convert_to_table();
        }
        let Hash::Table(t) = self else { unreachable!("converted above") };
        match t.get_mut(field) {
            Some(v) => {
                *v = Bytes::copy_from_slice(value);
                false
            }
            None => {
                t.insert(Bytes::copy_from_slice(field), Bytes::copy_from_slice(value));
                true
            }
        }
    }

    /// Removes `field`; true if it was there. Order is kept while small.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self {
            Hash::Packed(buf) => {
                let Some((_, v, at)) = records(buf).find(|(f, _, _)| *f == field) else {
                    return false;
                };
                let end = at + 2 + field.len() + v.len();
                let mut next = Vec::with_capacity(buf.len() - (end - at));
                next.extend_from_slice(&buf[..at]);
                next.extend_from_slice(&buf[end..]);
                next[0] -= 1;
                *buf = next.into_boxed_slice();
                true
            }
            Hash::Table(t) => {
                if t.len() <= PACKED_MAX_ENTRIES {
                    t.shift_remove(field).is_some()
                } else {
                    t.swap_remove(field).is_some()
                }
            }
        }
    }

    fn convert_to_table(&mut self) {
        let mut table = Table::with_capacity_and_hasher(self.len() + 1, Hasher::default());
        for (f, v) in self.iter() {
            table.insert(Bytes::copy_from_slice(f), Bytes::copy_from_slice(v));
        }
        *self = Hash::Table(Box::new(table));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(h: &Hash) -> Vec<(Vec<u8>, Vec<u8>)> {
        h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect()
    }

    #[test]
    fn behaves_as_an_insertion_ordered_map() {
        let mut h = Hash::default();
        let mut model: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        for round in 0..5_000u32 {
            let field = format!("f{}", fastrand::u32(..40)).into_bytes();
            let value = vec![b'v'; fastrand::usize(..if round % 50 == 0 { 80 } else { 6 })];
            if fastrand::u8(..3) == 0 {
                let removed = h.remove(&field);
                let pos = model.iter().position(|(f, _)| *f == field);
                assert_eq!(removed, pos.is_some());
                if let Some(p) = pos {
                    model.remove(p);
                }
            } else {
                let new = h.insert(&field, &value, PackLimits::default());
                match model.iter_mut().find(|(f, _)| *f == field) {
                    Some(slot) => {
                        assert!(!new);
                        slot.1 = value;
                    }
                    None => {
                        assert!(new);
                        model.push((field, value));
                    }
                }
            }
            assert_eq!(pairs(&h), model);
            assert_eq!(h.len(), model.len());
        }
    }

    #[test]
    fn converts_on_a_long_value_or_too_many_fields_and_stays_converted() {
        let mut h = Hash::default();
        h.insert(b"a", &[b'x'; PACKED_MAX_VALUE], PackLimits::default());
        assert!(h.is_packed());
        h.insert(b"b", &[b'x'; PACKED_MAX_VALUE + 1], PackLimits::default());
        assert!(!h.is_packed());
        h.remove(b"b");
        assert!(!h.is_packed());
        assert_eq!(pairs(&h), vec![(b"a".to_vec(), vec![b'x'; PACKED_MAX_VALUE])]);

        let mut h = Hash::default();
        for i in 0..PACKED_MAX_ENTRIES {
            h.insert(i.to_string().as_bytes(), b"1", PackLimits::default());
        }
        assert!(h.is_packed());
        h.insert(b"one more", b"1", PackLimits::default());
        assert!(!h.is_packed());
        assert_eq!(h.len(), PACKED_MAX_ENTRIES + 1);
        assert_eq!(h.get_index(0), Some((&b"0"[..], &b"1"[..])));
    }

    #[test]
    fn a_lock_hash_is_one_small_allocation() {
        let mut h = Hash::default();
        h.insert(b"5f0c7a5e-4d1b-4c8e-9a3f-0a1b2c3d4e5f:1", b"1", PackLimits::default());
        let Hash::Packed(buf) = &h else { panic!("packed") };
        assert_eq!(buf.len(), 1 + 1 + 38 + 1 + 1);
        assert_eq!(std::mem::size_of::<Hash>(), 16);
    }
}
