//! The stream type: entries ordered by ID, the counters Redis 7.0 keeps
//! beside them (last ID, first ID, max deleted ID, entries added) and the
//! consumer groups with their pending entries lists.
//!
//! Entries live in a `BTreeMap` keyed by [`StreamId`]. Redis stores them in
//! listpack nodes of a radix tree, and that layout is observable: `MAXLEN
//! ~` / `MINID ~` trim whole nodes only, and XINFO STREAM counts the radix
//! tree's keys and nodes. So the nodes are emulated beside the map
//! ([`Node`]): each remembers its master ID (the first ID appended to it),
//! its master fields, its live entry count, the entries deleted from it
//! (kept as Redis keeps them flagged in the listpack, for DUMP) and the byte size
//! its listpack would have, and a new node starts when Redis's
//! `streamAppendItem` would start one (`stream-node-max-entries` counting
//! deleted entries too, `stream-node-max-bytes` against the listpack size).
//! A node goes when its last live entry is deleted, as in
//! `streamIteratorRemoveEntry`.
//!
//! Consumer groups, consumers and pending entries are kept in `BTreeMap`s
//! too: Redis's rax iterates them in byte order, and so do these. A pending
//! entry names its consumer (`None` for one XCLAIM FORCE created and no
//! consumer took yet).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use bytes::Bytes;

/// An entry ID: milliseconds and a sequence number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    pub fn is_zero(self) -> bool {
        self == StreamId::MIN
    }

    /// The next ID, or `None` past the last one (`streamIncrID`).
    pub fn next(self) -> Option<StreamId> {
        if self.seq == u64::MAX {
            if self.ms == u64::MAX {
                None
            } else {
                Some(StreamId::new(self.ms + 1, 0))
            }
        } else {
            Some(StreamId::new(self.ms, self.seq + 1))
        }
    }

    /// The previous ID, or `None` before the first one (`streamDecrID`).
    pub fn prev(self) -> Option<StreamId> {
        if self.seq == 0 {
            if self.ms == 0 {
                None
            } else {
                Some(StreamId::new(self.ms - 1, u64::MAX))
            }
        } else {
            Some(StreamId::new(self.ms, self.seq - 1))
        }
    }

    /// `ms-seq`, as replies spell it.
    pub fn to_bytes(self) -> Bytes {
        Bytes::from(self.to_string())
    }

    /// The 16 big-endian bytes Redis's rax keys nodes (and PELs) by.
    pub fn encode(self) -> [u8; 16] {
        let mut buf = [0u8; 16];
        buf[..8].copy_from_slice(&self.ms.to_be_bytes());
        buf[8..].copy_from_slice(&self.seq.to_be_bytes());
        buf
    }
}

impl StreamId {
    /// The ID spelled by [`StreamId::encode`]'s 16 bytes.
    pub fn decode(raw: [u8; 16]) -> StreamId {
        let (ms, seq) = raw.split_at(8);
        let word = |b: &[u8]| b.iter().fold(0u64, |acc, &x| (acc << 8) | u64::from(x));
        StreamId::new(word(ms), word(seq))
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// An entry's fields and values, alternating.
pub type Fields = Vec<Bytes>;

/// The node-size parameters in force (`stream-node-max-entries`,
/// `stream-node-max-bytes`).
#[derive(Clone, Copy, Debug)]
pub struct NodeLimits {
    pub max_entries: u64,
    pub max_bytes: u64,
}

impl Default for NodeLimits {
    fn default() -> Self {
        NodeLimits {
            max_entries: 100,
            max_bytes: 4096,
        }
    }
}

/// Redis's `STREAM_LISTPACK_MAX_SIZE`.
pub const LISTPACK_MAX_SIZE: u64 = 1 << 30;

/// One emulated listpack node.
#[derive(Clone, Debug)]
struct Node {
    master_fields: Vec<Bytes>,
    live: u64,
    /// Entries deleted from the node (XDEL, exact trims), which Redis
    /// keeps in the listpack flagged deleted until the node goes: they
    /// count towards `stream-node-max-entries` and DUMP writes them. In
    /// ID order, except as a loaded payload had them (Redis never looks at
    /// their IDs, so a payload's are taken as they come).
    tombstones: Vec<(StreamId, Fields)>,
    /// The listpack's bytes except the two counters.
    fixed_bytes: u64,
    /// The last ID appended (deleted or not).
    last: StreamId,
}

impl Node {
    fn bytes(&self) -> u64 {
        self.fixed_bytes + lp_int_size(self.live as i64) + lp_int_size(self.deleted() as i64)
    }

    fn deleted(&self) -> u64 {
        self.tombstones.len() as u64
    }
}

/// Bytes a listpack element's back-length takes.
fn backlen_size(len: u64) -> u64 {
    match len {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    }
}

/// Bytes an integer element takes in a listpack.
fn lp_int_size(v: i64) -> u64 {
    let enc = match v {
        0..=127 => 1,
        -4096..=4095 => 2,
        -32768..=32767 => 3,
        -8388608..=8388607 => 4,
        -2147483648..=2147483647 => 5,
        _ => 9,
    };
    enc + backlen_size(enc)
}

/// Bytes a string element takes (one that reads as an integer is stored
/// as one, as `lpAppend` does).
fn lp_str_size(s: &[u8]) -> u64 {
    if s.len() <= 20
        && let Some(v) = crate::numfmt::parse_i64(s)
    {
        return lp_int_size(v);
    }
    let len = s.len() as u64;
    let enc = match len {
        0..=63 => 1 + len,
        64..=4095 => 2 + len,
        _ => 5 + len,
    };
    enc + backlen_size(enc)
}

/// A pending entry (Redis's `streamNACK`).
#[derive(Clone, Debug)]
pub struct Nack {
    pub delivery_time: u64,
    pub delivery_count: u64,
    pub consumer: Option<Bytes>,
}

/// A consumer of a group.
#[derive(Clone, Debug, Default)]
pub struct Consumer {
    pub seen_time: u64,
    pub pel: BTreeSet<StreamId>,
}

/// A consumer group (Redis's `streamCG`).
#[derive(Clone, Debug, Default)]
pub struct Group {
    pub last_id: StreamId,
    /// -1 when unknown (`SCG_INVALID_ENTRIES_READ`).
    pub entries_read: i64,
    pub pel: BTreeMap<StreamId, Nack>,
    pub consumers: BTreeMap<Bytes, Consumer>,
}

impl Group {
    pub fn new(last_id: StreamId, entries_read: i64) -> Group {
        Group {
            last_id,
            entries_read,
            ..Group::default()
        }
    }

    /// Drops the pending entry `id`, from its consumer too; true if there was one.
    pub fn ack(&mut self, id: StreamId) -> bool {
        match self.pel.remove(&id) {
            Some(nack) => {
                if let Some(c) = nack.consumer.and_then(|name| self.consumers.get_mut(&name)) {
                    c.pel.remove(&id);
                }
                true
            }
            None => false,
        }
    }

    /// Gives the pending entry `id` to `consumer` (which exists).
    pub fn assign(&mut self, id: StreamId, consumer: &Bytes) {
        let Some(nack) = self.pel.get_mut(&id) else { return };
        if nack.consumer.as_ref() != Some(consumer) {
            if let Some(old) = nack.consumer.take()
                && let Some(c) = self.consumers.get_mut(&old)
            {
                c.pel.remove(&id);
            }
            nack.consumer = Some(consumer.clone());
            if let Some(c) = self.consumers.get_mut(consumer) {
                c.pel.insert(id);
            }
        }
    }
}

/// One listpack node as an RDB writer walks it ([`Stream::node_images`]).
pub struct NodeImage<'a> {
    /// The node's key in Redis's radix tree.
    pub master: StreamId,
    pub master_fields: &'a [Bytes],
    /// Entries in ID order, each with whether it is deleted.
    pub entries: Vec<(StreamId, &'a Fields, bool)>,
}

/// One listpack node as an RDB reader found it ([`Stream::push_loaded_node`]).
pub struct LoadedNode {
    pub master: StreamId,
    pub master_fields: Vec<Bytes>,
    pub entries: Vec<(StreamId, Fields)>,
    pub tombstones: Vec<(StreamId, Fields)>,
    pub listpack_bytes: u64,
    pub last: StreamId,
}

/// The trimming a command asked for.
#[derive(Clone, Copy, Debug)]
pub enum Trim {
    MaxLen(u64),
    MinId(StreamId),
}

#[derive(Clone, Debug, Default)]
pub struct Stream {
    entries: BTreeMap<StreamId, Fields>,
    nodes: BTreeMap<StreamId, Node>,
    pub last_id: StreamId,
    pub first_id: StreamId,
    pub max_deleted_id: StreamId,
    pub entries_added: u64,
    pub groups: BTreeMap<Bytes, Group>,
}

impl Stream {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn get(&self, id: StreamId) -> Option<&Fields> {
        self.entries.get(&id)
    }

    pub fn contains(&self, id: StreamId) -> bool {
        self.entries.contains_key(&id)
    }

    /// The first and last live entries.
    pub fn first(&self) -> Option<(StreamId, &Fields)> {
        self.entries.iter().next().map(|(k, v)| (*k, v))
    }

    pub fn last(&self) -> Option<(StreamId, &Fields)> {
        self.entries.iter().next_back().map(|(k, v)| (*k, v))
    }

    /// Entries from `start` to `end` inclusive, forwards or backwards.
    pub fn range(&self, start: StreamId, end: StreamId, rev: bool) -> Box<dyn Iterator<Item = (StreamId, &Fields)> + '_> {
        if start > end {
            return Box::new(std::iter::empty());
        }
        let it = self.entries.range(start..=end).map(|(k, v)| (*k, v));
        if rev { Box::new(it.rev()) } else { Box::new(it) }
    }

    /// Radix tree keys (listpack nodes), as XINFO STREAM counts them.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Radix tree nodes of a rax holding the node keys: a compressed trie
    /// over 16-byte keys, counted as Redis's rax lays it out.
    pub fn rax_node_count(&self) -> u64 {
        let keys: Vec<[u8; 16]> = self.nodes.keys().map(|id| id.encode()).collect();
        if keys.is_empty() {
            return 1;
        }
        let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
        rax_nodes(&refs)
    }

    /// The listpack nodes in ID order, with the entries each holds, live
    /// and deleted: what an RDB writer serializes.
    pub fn node_images(&self) -> Vec<NodeImage<'_>> {
        let masters: Vec<StreamId> = self.nodes.keys().copied().collect();
        let mut images = Vec::with_capacity(masters.len());
        for (i, (&master, node)) in self.nodes.iter().enumerate() {
            let live = match masters.get(i + 1) {
                Some(&next) => self.entries.range(master..next),
                None => self.entries.range(master..),
            };
            let mut entries: Vec<(StreamId, &Fields, bool)> = live.map(|(k, v)| (*k, v, false)).collect();
            entries.extend(node.tombstones.iter().map(|(k, v)| (*k, v, true)));
            entries.sort_by_key(|e| e.0);
            images.push(NodeImage {
                master,
                master_fields: &node.master_fields,
                entries,
            });
        }
        images
    }

    /// Appends a node read from an RDB listpack: its master ID and fields,
    /// its live entries, its deleted entries, the listpack's size in bytes
    /// and the last ID it held (deleted or not). False, and nothing
    /// changed, unless the master ID and the live entries (in ID order, none
    /// below the master ID) follow everything already loaded: the node a
    /// live entry belongs to is found by its ID. Deleted entries are taken
    /// as they come, as Redis never reads their IDs back.
    pub fn push_loaded_node(&mut self, loaded: LoadedNode) -> bool {
        let after = |id: StreamId, than: Option<StreamId>| than.is_none_or(|t| id > t);
        let last_entry = self.entries.keys().next_back().copied();
        let last_master = self.nodes.keys().next_back().copied();
        if !after(loaded.master, last_master) || !after(loaded.master, last_entry) {
            return false;
        }
        let mut previous = None;
        for (id, _) in &loaded.entries {
            if *id < loaded.master || !after(*id, previous) {
                return false;
            }
            previous = Some(*id);
        }
        let tombstones = loaded.tombstones;
        let live = loaded.entries.len() as u64;
        let counters = lp_int_size(live as i64) + lp_int_size(tombstones.len() as i64);
        self.nodes.insert(
            loaded.master,
            Node {
                master_fields: loaded.master_fields,
                live,
                tombstones,
                fixed_bytes: loaded.listpack_bytes.saturating_sub(counters),
                last: loaded.last,
            },
        );
        self.entries.extend(loaded.entries);
        true
    }

    /// Appends an entry at `id`, known to be greater than `last_id`.
    pub fn append(&mut self, id: StreamId, fields: Fields, limits: NodeLimits) {
        let total: u64 = fields.iter().map(|f| f.len() as u64).sum();
        let max_bytes = if limits.max_bytes == 0 || limits.max_bytes > LISTPACK_MAX_SIZE {
            LISTPACK_MAX_SIZE
        } else {
            limits.max_bytes
        };
        let numfields = fields.len() / 2;
        let mut tail = self.nodes.iter_mut().next_back();
        if let Some((_, node)) = &tail {
            let full = node.bytes() + total >= max_bytes || (limits.max_entries != 0 && node.live + node.deleted() >= limits.max_entries);
            if full {
                tail = None;
            }
        }
        let (master, node) = match tail {
            Some((master, node)) => {
                node.live += 1;
                (*master, node)
            }
            None => {
                let master_fields: Vec<Bytes> = fields.iter().step_by(2).cloned().collect();
                let mut fixed = 7 + lp_int_size(numfields as i64) + lp_int_size(0);
                fixed += master_fields.iter().map(|f| lp_str_size(f)).sum::<u64>();
                let node = self.nodes.entry(id).or_insert(Node {
                    master_fields,
                    live: 1,
                    tombstones: Vec::new(),
                    fixed_bytes: fixed,
                    last: id,
                });
                (id, node)
            }
        };
        let same = node.master_fields.len() == numfields && node.master_fields.iter().zip(fields.iter().step_by(2)).all(|(a, b)| a == b);
        let mut bytes = lp_int_size(if same { 2 } else { 0 });
        bytes += lp_int_size(id.ms.wrapping_sub(master.ms) as i64);
        bytes += lp_int_size(id.seq.wrapping_sub(master.seq) as i64);
        let mut lp_count = numfields as i64 + 3;
        if !same {
            bytes += lp_int_size(numfields as i64);
            bytes += fields.iter().map(|f| lp_str_size(f)).sum::<u64>();
            lp_count += numfields as i64 + 1;
        } else {
            bytes += fields.iter().skip(1).step_by(2).map(|f| lp_str_size(f)).sum::<u64>();
        }
        bytes += lp_int_size(lp_count);
        node.fixed_bytes += bytes;
        node.last = id;
        self.entries.insert(id, fields);
        self.entries_added += 1;
        self.last_id = id;
        if self.entries.len() == 1 {
            self.first_id = id;
        }
    }

    /// Deletes entry `id` (XDEL's step); true if it was there.
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some(fields) = self.entries.remove(&id) else {
            return false;
        };
        if let Some((&master, node)) = self.nodes.range_mut(..=id).next_back() {
            if node.live <= 1 {
                self.nodes.remove(&master);
            } else {
                node.live -= 1;
                let at = node.tombstones.partition_point(|(t, _)| *t < id);
                node.tombstones.insert(at, (id, fields));
            }
        }
        true
    }

    /// After deletions: the recorded first ID follows the first live entry.
    pub fn refresh_first_id(&mut self) {
        self.first_id = self.first().map_or(StreamId::MIN, |(id, _)| id);
    }

    /// Trims as `streamTrim` does; `limit` 0 is no limit. Returns how many
    /// entries went.
    pub fn trim(&mut self, trim: Trim, approx: bool, limit: u64) -> u64 {
        let mut deleted = 0u64;
        loop {
            if let Trim::MaxLen(maxlen) = trim
                && self.len() as u64 <= maxlen
            {
                break;
            }
            let Some((&master, node)) = self.nodes.iter().next() else { break };
            let entries = node.live;
            if limit != 0 && deleted + entries > limit {
                break;
            }
            let remove_node = match trim {
                Trim::MaxLen(maxlen) => self.len() as u64 - entries >= maxlen,
                Trim::MinId(minid) => node.last < minid,
            };
            let next_master = self
                .nodes
                .range((std::ops::Bound::Excluded(master), std::ops::Bound::Unbounded))
                .next()
                .map(|(k, _)| *k);
            if remove_node {
                self.nodes.remove(&master);
                let doomed: Vec<StreamId> = match next_master {
                    Some(next) => self.entries.range(master..next).map(|(k, _)| *k).collect(),
                    None => self.entries.range(master..).map(|(k, _)| *k).collect(),
                };
                for id in doomed {
                    self.entries.remove(&id);
                }
                deleted += entries;
                continue;
            }
            if approx {
                break;
            }
            let mut removed = Vec::new();
            while let Some((&id, _)) = self.entries.iter().next() {
                if next_master.is_some_and(|n| id >= n) {
                    break;
                }
                let stop = match trim {
                    Trim::MaxLen(maxlen) => self.len() as u64 <= maxlen,
                    Trim::MinId(minid) => id >= minid,
                };
                if stop {
                    break;
                }
                if let Some(fields) = self.entries.remove(&id) {
                    removed.push((id, fields));
                }
            }
            let in_node = removed.len() as u64;
            if let Some(node) = self.nodes.get_mut(&master) {
                node.live -= in_node;
                // The node's first live entries: before any tombstone after them.
                let at = node
                    .tombstones
                    .partition_point(|(t, _)| removed.first().is_some_and(|(r, _)| t < r));
                node.tombstones.splice(at..at, removed);
            }
            deleted += in_node;
            break;
        }
        if self.is_empty() {
            self.first_id = StreamId::MIN;
        } else if deleted > 0 {
            self.refresh_first_id();
        }
        deleted
    }

    /// Whether an XDEL tombstone may lie in `start..=end`
    /// (`streamRangeHasTombstones`).
    pub fn range_has_tombstones(&self, start: StreamId, end: StreamId) -> bool {
        if self.is_empty() || self.max_deleted_id.is_zero() {
            return false;
        }
        if self.first_id > self.max_deleted_id {
            return false;
        }
        start <= self.max_deleted_id && self.max_deleted_id <= end
    }

    /// `streamEstimateDistanceFromFirstEverEntry`: the logical read counter
    /// of `id`, or -1 when it cannot be known.
    pub fn estimate_distance(&self, id: StreamId) -> i64 {
        if self.entries_added == 0 {
            return 0;
        }
        if self.is_empty() && id <= self.last_id {
            return self.entries_added as i64;
        }
        if id == self.last_id {
            return self.entries_added as i64;
        } else if id > self.last_id {
            return -1;
        }
        if self.max_deleted_id.is_zero() || self.max_deleted_id < self.first_id {
            if id < self.first_id {
                return (self.entries_added - self.len() as u64) as i64;
            } else if id == self.first_id {
                return (self.entries_added - self.len() as u64 + 1) as i64;
            }
        }
        -1
    }

    /// A group's lag, `None` when it cannot be known (`streamReplyWithCGLag`).
    pub fn lag(&self, group: &Group) -> Option<i64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if group.entries_read != -1 && !self.range_has_tombstones(group.last_id, StreamId::MAX) {
            return Some(self.entries_added as i64 - group.entries_read);
        }
        let read = self.estimate_distance(group.last_id);
        (read != -1).then(|| self.entries_added as i64 - read)
    }
}

/// Nodes of a compressed radix tree (Redis's rax) holding `keys`, all of
/// one length and sorted: a run shared by every key is one compressed
/// node, a byte where they part is one node with a child per byte, and
/// each key ends in a leaf.
fn rax_nodes(keys: &[&[u8]]) -> u64 {
    let len = keys[0].len();
    if len == 0 {
        return 1;
    }
    let first = keys[0];
    let last = keys[keys.len() - 1];
    let common = first.iter().zip(last.iter()).take_while(|(a, b)| a == b).count();
    if common == len {
        // One key left: a compressed node and its leaf.
        return 2;
    }
    if common > 0 {
        let rest: Vec<&[u8]> = keys.iter().map(|k| &k[common..]).collect();
        return 1 + branch_nodes(&rest);
    }
    branch_nodes(keys)
}

/// A node where the keys part on their first byte, and what hangs below it.
fn branch_nodes(keys: &[&[u8]]) -> u64 {
    let mut total = 1;
    let mut i = 0;
    while i < keys.len() {
        let b = keys[i][0];
        let mut j = i;
        while j < keys.len() && keys[j][0] == b {
            j += 1;
        }
        let rest: Vec<&[u8]> = keys[i..j].iter().map(|k| &k[1..]).collect();
        total += if rest[0].is_empty() { 1 } else { rax_nodes(&rest) };
        i = j;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(s: &mut Stream, ms: u64, seq: u64) {
        s.append(
            StreamId::new(ms, seq),
            vec![Bytes::from_static(b"f"), Bytes::from_static(b"v")],
            NodeLimits::default(),
        );
    }

    #[test]
    fn a_node_holds_max_entries() {
        let mut s = Stream::default();
        for i in 1..=250 {
            add(&mut s, i, 0);
        }
        assert_eq!(s.node_count(), 3);
        assert_eq!(s.trim(Trim::MaxLen(120), true, 0), 100);
        assert_eq!(s.len(), 150);
    }

    #[test]
    fn deleting_a_nodes_last_entry_drops_the_node() {
        let mut s = Stream::default();
        add(&mut s, 1, 0);
        assert!(s.delete(StreamId::new(1, 0)));
        assert_eq!(s.node_count(), 0);
        assert_eq!(s.rax_node_count(), 1);
    }
}
