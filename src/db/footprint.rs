//! What a key and its value cost in memory, as MEMORY USAGE reports it.
//!
//! Redis's `objectComputeSize` adds up the allocations of its own
//! encodings; keylock's values are laid out differently (a `Bytes` per
//! string, `VecDeque`/`IndexSet`/the sorted set's index and map), so the
//! figures are keylock's own, estimated from those layouts: the value's
//! fixed part, each element's bytes and per-element bookkeeping. As in
//! Redis, aggregates are sampled: the first `samples` elements are
//! measured and the average is taken for the rest (`samples` of
//! `usize::MAX` measures every element).

use bytes::Bytes;

use super::Value;
use super::stream::StreamId;

/// A `Bytes` handle: pointer, length, data pointer, vtable.
const BYTES_HANDLE: usize = std::mem::size_of::<Bytes>();
/// A key's place in the keyspace: its slot in the index, its entry
/// (key, value, deadline, access time) and the key's own allocation.
const KEY_ENTRY: usize = std::mem::size_of::<Value>() + 2 * std::mem::size_of::<usize>() + 16;
/// Per member of a set: the member, its hash-index slot and entry hash.
const SET_ENTRY: usize = BYTES_HANDLE + 2 * std::mem::size_of::<usize>();
/// Per member of a sorted set: the member in the score index and the
/// member map, and the score twice.
const ZSET_ENTRY: usize = 2 * BYTES_HANDLE + 2 * std::mem::size_of::<f64>() + 2 * std::mem::size_of::<usize>();
/// Per field of a hash: the field and the value, and a map slot.
const HASH_ENTRY: usize = 2 * BYTES_HANDLE + std::mem::size_of::<usize>();
/// Per stream entry: its ID, its field list and a tree slot.
const STREAM_ENTRY: usize = 16 + 3 * std::mem::size_of::<usize>() + 2 * std::mem::size_of::<usize>();
/// Per pending entry of a consumer group, and per consumer.
const STREAM_PENDING: usize = 64;

/// The bytes a string's data takes: stored inline in the handle's
/// allocation when it is owned, as every stored value is.
fn data(len: usize) -> usize {
    len.next_multiple_of(8)
}

/// What a key's place in the keyspace costs, without its value: its entry
/// and the key's bytes.
pub fn entry(key: &[u8]) -> u64 {
    (KEY_ENTRY + data(key.len())) as u64
}

/// MEMORY USAGE of `key` holding `value`: the key's entry and the value,
/// aggregates sampled `samples` elements deep.
pub fn usage(key: &[u8], value: &Value, samples: usize) -> u64 {
    (KEY_ENTRY + data(key.len()) + value_bytes(value, samples.max(1))) as u64
}

fn value_bytes(value: &Value, samples: usize) -> usize {
    match value {
        Value::Str(s) => data(s.len()),
        Value::List(list) => sampled(list.len(), samples, list.iter().map(|e| BYTES_HANDLE + data(e.len()))),
        Value::Set(set) => sampled(set.len(), samples, set.iter().map(|m| SET_ENTRY + data(m.len()))),
        Value::Hash(hash) => sampled(
            hash.len(),
            samples,
            hash.iter().map(|(f, v)| HASH_ENTRY + data(f.len()) + data(v.len())),
        ),
        Value::ZSet(zset) => sampled(zset.len(), samples, zset.iter().map(|(m, _)| ZSET_ENTRY + data(m.len()))),
        Value::Stream(stream) => {
            let entries = stream
                .range(StreamId::MIN, StreamId::MAX, false)
                .map(|(_, fields)| STREAM_ENTRY + fields.iter().map(|f| BYTES_HANDLE + data(f.len())).sum::<usize>());
            // Groups are counted in full (Redis samples their trees too,
            // but a group's bookkeeping is small beside the entries).
            let groups: usize = stream
                .groups
                .iter()
                .map(|(name, group)| data(name.len()) + (group.pel.len() + group.consumers.len()) * STREAM_PENDING)
                .sum();
            sampled(stream.len(), samples, entries) + groups
        }
    }
}

/// The elements' total, from the first `samples` of `len` (Redis's
/// average-of-a-sample estimate).
fn sampled(len: usize, samples: usize, sizes: impl Iterator<Item = usize>) -> usize {
    let mut measured = 0usize;
    let mut total = 0usize;
    for size in sizes.take(samples) {
        measured += 1;
        total += size;
    }
    if measured == 0 {
        return 0;
    }
    if measured == len { total } else { total / measured * len }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_longer_string_costs_more() {
        let short = usage(b"k", &Value::Str(Bytes::from_static(b"x")), 5);
        let long = usage(b"k", &Value::Str(Bytes::from(vec![b'x'; 1000])), 5);
        assert!(long >= short + 990, "{short} {long}");
    }

    #[test]
    fn sampling_extrapolates_from_the_first_elements() {
        let list: std::collections::VecDeque<Bytes> = (0..100).map(|_| Bytes::from_static(b"abcdefgh")).collect();
        let value = Value::List(Box::new(list));
        assert_eq!(usage(b"k", &value, 5), usage(b"k", &value, usize::MAX));
    }
}
