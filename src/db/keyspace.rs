//! The key table of one database: keys, values and deadlines, laid out for
//! memory.
//!
//! A lock server holds millions of small keys (a Redisson lock is one key
//! holding a one-field hash with a lease), so the per-key overhead decides
//! its footprint. Measured with 1,000,000 held Redisson locks (lease one
//! hour): an `IndexMap<Bytes, Value>` plus a second map of deadlines took
//! ~720 MB RSS, Redis 7.0 190 MB (`lock:N` names) / 206 MB
//! (`redisson-lock:orders:N`); this layout 173 MB for both. The layout:
//!
//! - `entries`: the [`Entry`]s (key, value, deadline slot) in chunks of
//!   [`ENTRY_CHUNK`] (see `chunked`: memory follows the number of keys a
//!   few kilobytes at a time, as Redis's per-key allocations do, which
//!   `maxmemory` relies on); position is what SCAN and RANDOMKEY walk.
//! - `index`: a `hashbrown::HashTable<u32>` of positions, hashed by key;
//!   the hash is recomputed when the table grows instead of being stored.
//! - `deadlines`: the keys that have a TTL, as `(position, deadline)`, in
//!   chunks too, so the active expiry cycle samples keys with a TTL as Redis
//!   samples its `expires` dict; each entry knows its slot there.
//! - keys of up to [`INLINE_KEY`] bytes live inside the entry ([`Key`]).
//!
//! Removal is `swap_remove` in both vectors, with the moved element's
//! back-references fixed, so every operation stays O(1). Positions are
//! `u32`: one database holds at most 2^32 - 1 keys.

use ahash::RandomState;
use hashbrown::HashTable;

use super::Value;
use super::chunked::Chunked;

/// Keys per chunk of the table: as many as fit in 4 KB, one of the
/// allocator's size classes (measured with 1,000,000 held locks: RSS as
/// low as one doubled `Vec`'s; 2.5 KB or 8 KB chunks took 7–10% more).
const ENTRY_CHUNK: usize = 4096 / std::mem::size_of::<Entry>();
/// Deadlines per chunk (4 KB).
const DEADLINE_CHUNK: usize = 4096 / std::mem::size_of::<Deadline>();

/// Keys this long or shorter are stored inline.
pub const INLINE_KEY: usize = 30;

/// A key: inline when short, else one exact-size heap allocation.
#[derive(Clone)]
pub struct Key(KeyRepr);

#[derive(Clone)]
enum KeyRepr {
    Inline { len: u8, bytes: [u8; INLINE_KEY] },
    Heap(Box<[u8]>),
}

impl Key {
    pub fn new(key: &[u8]) -> Key {
        if key.len() <= INLINE_KEY {
            let mut bytes = [0u8; INLINE_KEY];
            bytes[..key.len()].copy_from_slice(key);
            Key(KeyRepr::Inline {
                len: key.len() as u8,
                bytes,
            })
        } else {
            Key(KeyRepr::Heap(key.into()))
        }
    }
}

impl std::ops::Deref for Key {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.0 {
            KeyRepr::Inline { len, bytes } => &bytes[..*len as usize],
            KeyRepr::Heap(b) => b,
        }
    }
}

const NO_DEADLINE: u32 = u32::MAX;

struct Entry {
    key: Key,
    value: Value,
    /// Index into `deadlines`, or `NO_DEADLINE`.
    deadline_slot: u32,
    /// The access clock's second when the key was last accessed (Redis's
    /// `robj.lru`, for OBJECT IDLETIME), in the low 31 bits; the top bit
    /// says a string was modified in place ([`RAW`]). Fits in `Entry`'s
    /// padding.
    accessed: u32,
}

/// The bit of `Entry::accessed` that marks a string Redis would hold
/// `raw` whatever its length (APPEND, SETRANGE, SETBIT… modify strings
/// in place, which makes them raw in Redis); a new value clears it.
const RAW: u32 = 1 << 31;
const ACCESS_TIME: u32 = !RAW;

/// The second every access is stamped with (Redis's `server.lruclock`):
/// the engine sets it from its clock before each command, and every
/// database of a server shares it. It also carries whether expired keys
/// are to be kept (while CLIENT PAUSE holds the dataset still).
#[derive(Clone, Debug, Default)]
pub struct AccessClock(std::sync::Arc<ClockCell>);

#[derive(Debug, Default)]
struct ClockCell {
    second: std::sync::atomic::AtomicU32,
    keep_expired: std::sync::atomic::AtomicBool,
    /// Deadlines are not judged at all: a replica runs its master's
    /// stream, whose commands see every key the master sees (Redis's
    /// `expireIfNeeded` for the master client).
    ignore_deadlines: std::sync::atomic::AtomicBool,
    /// An LFU `maxmemory-policy` is in force: accesses count toward each
    /// key's frequency instead of stamping its time.
    lfu: std::sync::atomic::AtomicBool,
    /// `lfu-log-factor` and `lfu-decay-time`.
    lfu_log_factor: std::sync::atomic::AtomicU32,
    lfu_decay_time: std::sync::atomic::AtomicU32,
}

/// A new key's frequency under LFU (Redis's LFU_INIT_VAL).
pub const LFU_INIT_VAL: u32 = 5;

impl AccessClock {
    pub fn set(&self, now_ms: u64) {
        self.0.second.store((now_ms / 1000) as u32, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn now(&self) -> u32 {
        self.0.second.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether a key found past its deadline is left in place (it still
    /// reads as missing): Redis keeps the dataset unchanged while clients
    /// are paused.
    pub fn keep_expired(&self) -> bool {
        self.0.keep_expired.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn set_keep_expired(&self, keep: bool) {
        self.0.keep_expired.store(keep, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether keys past their deadline are live (see `ignore_deadlines`).
    pub fn ignores_deadlines(&self) -> bool {
        self.0.ignore_deadlines.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn set_ignore_deadlines(&self, ignore: bool) {
        self.0.ignore_deadlines.store(ignore, std::sync::atomic::Ordering::Relaxed);
    }

    /// Keys count accesses as frequencies (an LFU policy, with its
    /// `lfu-log-factor` and `lfu-decay-time`), or stamp their time (None).
    pub fn set_lfu(&self, lfu: Option<(u32, u32)>) {
        use std::sync::atomic::Ordering::Relaxed;
        self.0.lfu.store(lfu.is_some(), Relaxed);
        if let Some((log_factor, decay_time)) = lfu {
            self.0.lfu_log_factor.store(log_factor, Relaxed);
            self.0.lfu_decay_time.store(decay_time, Relaxed);
        }
    }

    pub fn lfu(&self) -> bool {
        self.0.lfu.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The minutes clock of LFU stamps (Redis's `LFUGetTimeInMinutes`).
    fn minutes(&self) -> u32 {
        (self.now() / 60) & 0xffff
    }

    /// A frequency stamp (minutes, then the 8-bit counter), as Redis keeps
    /// it in `robj.lru`.
    fn lfu_stamp(&self, counter: u32) -> u32 {
        (self.minutes() << 8) | counter
    }

    /// The counter of `stamp` after the decay since it was set (Redis's
    /// `LFUDecrAndReturn`).
    fn lfu_decayed(&self, stamp: u32) -> u32 {
        let ldt = (stamp >> 8) & 0xffff;
        let counter = stamp & 0xff;
        let now = self.minutes();
        let elapsed = if now >= ldt { now - ldt } else { 65535 - ldt + now };
        let decay = self.0.lfu_decay_time.load(std::sync::atomic::Ordering::Relaxed);
        let periods = elapsed.checked_div(decay).unwrap_or(0);
        counter.saturating_sub(periods)
    }

    /// `stamp` after one more access (Redis's `updateLFU`: decay, then a
    /// logarithmic increment).
    fn lfu_accessed(&self, stamp: u32) -> u32 {
        let mut counter = self.lfu_decayed(stamp);
        if counter < 255 {
            let base = counter.saturating_sub(LFU_INIT_VAL) as f64;
            let factor = self.0.lfu_log_factor.load(std::sync::atomic::Ordering::Relaxed) as f64;
            if fastrand::f64() < 1.0 / (base * factor + 1.0) {
                counter += 1;
            }
        }
        self.lfu_stamp(counter)
    }

    /// What a key created now is stamped with.
    fn new_stamp(&self) -> u32 {
        if self.lfu() {
            self.lfu_stamp(LFU_INIT_VAL)
        } else {
            self.now() & ACCESS_TIME
        }
    }
}

#[derive(Clone, Copy)]
struct Deadline {
    position: u32,
    at_ms: u64,
}

pub struct Keyspace {
    index: HashTable<u32>,
    entries: Chunked<Entry, ENTRY_CHUNK>,
    deadlines: Chunked<Deadline, DEADLINE_CHUNK>,
    hasher: RandomState,
    pub clock: AccessClock,
    /// In cluster mode, the keys of each hash slot.
    slots: Option<Box<SlotIndex>>,
}

/// The positions of each hash slot's keys, in the order they were added
/// (Redis's `slots_to_keys`), so that CLUSTER COUNTKEYSINSLOT and
/// GETKEYSINSLOT, which resharding calls for every slot, cost what the
/// slot holds rather than a walk of every key. Kept in cluster mode only:
/// eight bytes a key, and a CRC16 of the key on each insertion and
/// removal. `at` gives each key's place in its slot's list, so that a
/// removal is O(1): it leaves a tombstone there, and a list more than
/// half tombstones is compacted (amortized O(1), the order kept).
struct SlotIndex {
    slots: Vec<Vec<u32>>,
    /// Tombstones per slot list.
    dead: Vec<u32>,
    /// By key position: its index in its slot's list.
    at: Vec<u32>,
}

/// A removed key's place in its slot's list.
const TOMBSTONE: u32 = u32::MAX;

impl SlotIndex {
    fn new() -> SlotIndex {
        SlotIndex {
            slots: vec![Vec::new(); crate::cluster::SLOTS],
            dead: vec![0; crate::cluster::SLOTS],
            at: Vec::new(),
        }
    }

    /// The key at `position`, the next one of the table, was added.
    fn add(&mut self, key: &[u8], position: u32) {
        debug_assert_eq!(position as usize, self.at.len());
        let list = &mut self.slots[crate::cluster::key_hash_slot(key) as usize];
        self.at.push(list.len() as u32);
        list.push(position);
    }

    /// The key at `position` was removed and the table's last one, at
    /// `last` (`moved_key`), took its place.
    fn remove(&mut self, key: &[u8], position: u32, last: u32, moved_key: &[u8]) {
        let slot = crate::cluster::key_hash_slot(key) as usize;
        self.slots[slot][self.at[position as usize] as usize] = TOMBSTONE;
        self.dead[slot] += 1;
        if position != last {
            let moved_slot = crate::cluster::key_hash_slot(moved_key) as usize;
            let j = self.at[last as usize];
            self.slots[moved_slot][j as usize] = position;
            self.at[position as usize] = j;
        }
        self.at.pop();
        let list = &self.slots[slot];
        if self.dead[slot] as usize * 2 > list.len() {
            let live: Vec<u32> = list.iter().copied().filter(|&p| p != TOMBSTONE).collect();
            for (k, &p) in live.iter().enumerate() {
                self.at[p as usize] = k as u32;
            }
            self.slots[slot] = live;
            self.dead[slot] = 0;
        }
    }

    fn len(&self, slot: u16) -> usize {
        self.slots[slot as usize].len() - self.dead[slot as usize] as usize
    }

    /// The slot's key positions, newest first.
    fn newest_first(&self, slot: u16) -> impl Iterator<Item = u32> + '_ {
        self.slots[slot as usize].iter().rev().copied().filter(|&p| p != TOMBSTONE)
    }
}

impl Default for Keyspace {
    fn default() -> Keyspace {
        Keyspace {
            index: HashTable::new(),
            entries: Chunked::default(),
            deadlines: Chunked::default(),
            hasher: RandomState::new(),
            clock: AccessClock::default(),
            slots: None,
        }
    }
}

impl Keyspace {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How many keys have a deadline.
    pub fn deadlines_len(&self) -> usize {
        self.deadlines.len()
    }

    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The position of `key`.
    pub fn position(&self, key: &[u8]) -> Option<usize> {
        let entries = &self.entries;
        self.index
            .find(self.hash(key), |&p| *entries[p as usize].key == *key)
            .map(|&p| p as usize)
    }

    pub fn get(&self, key: &[u8]) -> Option<&Value> {
        self.position(key).map(|p| &self.entries[p].value)
    }

    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut Value> {
        self.position(key).map(|p| &mut self.entries[p].value)
    }

    /// The key and value at a position.
    pub fn at(&self, position: usize) -> Option<(&[u8], &Value)> {
        self.entries.get(position).map(|e| (&*e.key, &e.value))
    }

    pub fn value_at(&self, position: usize) -> &Value {
        &self.entries[position].value
    }

    pub fn value_at_mut(&mut self, position: usize) -> &mut Value {
        &mut self.entries[position].value
    }

    /// Adds a key known to be absent; returns its position.
    pub fn insert_new(&mut self, key: &[u8], value: Value) -> usize {
        let position = self.entries.len();
        assert!(position < NO_DEADLINE as usize, "a database holds at most 2^32 - 1 keys");
        let hash = self.hash(key);
        let (entries, hasher) = (&self.entries, &self.hasher);
        self.index
            .insert_unique(hash, position as u32, |&p| hasher.hash_one(&*entries[p as usize].key));
        self.entries.push(Entry {
            key: Key::new(key),
            value,
            deadline_slot: NO_DEADLINE,
            accessed: self.clock.new_stamp(),
        });
        if let Some(slots) = self.slots.as_deref_mut() {
            slots.add(key, position as u32);
        }
        position
    }

    /// Keeps the keys of each hash slot from now on (cluster mode).
    pub fn index_slots(&mut self) {
        let mut slots = SlotIndex::new();
        for (position, e) in self.entries.iter().enumerate() {
            slots.add(&e.key, position as u32);
        }
        self.slots = Some(Box::new(slots));
    }

    /// How many keys hash slot `slot` holds, when the slots are indexed.
    pub fn slot_len(&self, slot: u16) -> Option<usize> {
        self.slots.as_deref().map(|s| s.len(slot))
    }

    /// The keys of hash slot `slot`, newest first, when the slots are
    /// indexed.
    pub fn slot_keys(&self, slot: u16) -> Option<impl Iterator<Item = &[u8]>> {
        let slots = self.slots.as_deref()?;
        Some(slots.newest_first(slot).map(|p| &*self.entries[p as usize].key))
    }

    /// Stamps the key at `position` as accessed now.
    pub fn touch(&mut self, position: usize) {
        let e = &mut self.entries[position];
        let stamp = if self.clock.lfu() {
            self.clock.lfu_accessed(e.accessed & ACCESS_TIME)
        } else {
            self.clock.now() & ACCESS_TIME
        };
        e.accessed = stamp | (e.accessed & RAW);
    }

    /// The access frequency of the key at `position` under an LFU policy
    /// (OBJECT FREQ).
    pub fn lfu_freq(&self, position: usize) -> u32 {
        self.clock.lfu_decayed(self.entries[position].accessed & ACCESS_TIME)
    }

    /// Sets the frequency of the key at `position` (RESTORE … FREQ).
    pub fn set_lfu_freq(&mut self, position: usize, freq: u32) {
        let e = &mut self.entries[position];
        e.accessed = self.clock.lfu_stamp(freq.min(255)) | (e.accessed & RAW);
    }

    /// A random position (None when empty).
    pub fn random_position(&self) -> Option<usize> {
        (!self.entries.is_empty()).then(|| fastrand::usize(..self.entries.len()))
    }

    /// A random key with a deadline: its position and deadline.
    pub fn random_deadline(&self) -> Option<(usize, u64)> {
        if self.deadlines.is_empty() {
            return None;
        }
        let d = self.deadlines[fastrand::usize(..self.deadlines.len())];
        Some((d.position as usize, d.at_ms))
    }

    /// Marks (or unmarks) the string at `position` as modified in place.
    pub fn set_raw(&mut self, position: usize, raw: bool) {
        let e = &mut self.entries[position];
        e.accessed = (e.accessed & ACCESS_TIME) | if raw { RAW } else { 0 };
    }

    /// Whether the string at `position` was modified in place since it
    /// was last set whole.
    pub fn is_raw(&self, position: usize) -> bool {
        self.entries[position].accessed & RAW != 0
    }

    /// Stamps the key at `position` as accessed `secs` seconds ago.
    pub fn set_idle_secs(&mut self, position: usize, secs: u32) {
        let e = &mut self.entries[position];
        e.accessed = (self.clock.now().wrapping_sub(secs) & ACCESS_TIME) | (e.accessed & RAW);
    }

    /// Seconds since the key at `position` was last accessed (Redis's
    /// `estimateObjectIdleTime`, which also counts across a wrap).
    pub fn idle_secs(&self, position: usize) -> u64 {
        u64::from(self.clock.now().wrapping_sub(self.entries[position].accessed) & ACCESS_TIME)
    }

    /// Removes `key`: its stored name, value and deadline.
    pub fn remove(&mut self, key: &[u8]) -> Option<(Key, Value, Option<u64>)> {
        let hash = self.hash(key);
        let entries = &self.entries;
        let found = self.index.find_entry(hash, |&p| *entries[p as usize].key == *key).ok()?;
        let (position, _) = found.remove();
        let position = position as usize;
        let at_ms = self.drop_deadline(position);
        let last = self.entries.len() - 1;
        if let Some(slots) = self.slots.as_deref_mut() {
            slots.remove(key, position as u32, last as u32, &self.entries[last].key);
        }
        if position != last {
            // The last entry moves into the hole: repoint its index slot
            // and its deadline.
            let moved_hash = self.hash(&self.entries[last].key);
            if let Some(slot) = self.index.find_mut(moved_hash, |&p| p as usize == last) {
                *slot = position as u32;
            }
            let moved_deadline = self.entries[last].deadline_slot;
            if moved_deadline != NO_DEADLINE {
                self.deadlines[moved_deadline as usize].position = position as u32;
            }
        }
        let entry = self.entries.swap_remove(position);
        self.shrink_if_sparse();
        Some((entry.key, entry.value, at_ms))
    }

    /// Gives back the room of an index three quarters empty (halving it),
    /// as Redis shrinks a dict under 10% full. Halving only past a quarter
    /// keeps removals and insertions amortized O(1). (The entries and
    /// deadlines give back their chunks as they empty.)
    fn shrink_if_sparse(&mut self) {
        const MIN: usize = 64;
        let len = self.entries.len();
        if self.index.capacity() > MIN && len <= self.index.capacity() / 4 {
            let (entries, hasher) = (&self.entries, &self.hasher);
            self.index
                .shrink_to((len * 2).max(MIN), |&p| hasher.hash_one(&*entries[p as usize].key));
        }
    }

    /// The deadline of the key at `position`.
    pub fn deadline_at(&self, position: usize) -> Option<u64> {
        match self.entries[position].deadline_slot {
            NO_DEADLINE => None,
            slot => Some(self.deadlines[slot as usize].at_ms),
        }
    }

    pub fn deadline(&self, key: &[u8]) -> Option<u64> {
        self.position(key).and_then(|p| self.deadline_at(p))
    }

    pub fn set_deadline_at(&mut self, position: usize, at_ms: u64) {
        match self.entries[position].deadline_slot {
            NO_DEADLINE => {
                self.entries[position].deadline_slot = self.deadlines.len() as u32;
                self.deadlines.push(Deadline {
                    position: position as u32,
                    at_ms,
                });
            }
            slot => self.deadlines[slot as usize].at_ms = at_ms,
        }
    }

    /// Removes the deadline of the key at `position`; returns it.
    pub fn drop_deadline(&mut self, position: usize) -> Option<u64> {
        let slot = self.entries[position].deadline_slot;
        if slot == NO_DEADLINE {
            return None;
        }
        self.entries[position].deadline_slot = NO_DEADLINE;
        let removed = self.deadlines.swap_remove(slot as usize);
        if let Some(moved) = self.deadlines.get(slot as usize) {
            self.entries[moved.position as usize].deadline_slot = slot;
        }
        Some(removed.at_ms)
    }

    /// The `i`th key with a deadline (for sampling) and the deadline.
    pub fn deadline_sample(&self, i: usize) -> Option<(&[u8], u64)> {
        let d = self.deadlines.get(i)?;
        Some((&self.entries[d.position as usize].key, d.at_ms))
    }

    pub fn clear(&mut self) {
        // Replaced rather than cleared so a flushed database returns its
        // memory, as FLUSHALL does in Redis.
        *self = Keyspace {
            hasher: self.hasher.clone(),
            clock: self.clock.clone(),
            slots: self.slots.as_ref().map(|_| Box::new(SlotIndex::new())),
            ..Keyspace::default()
        };
    }

    /// Every key with its value and deadline.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &Value, Option<u64>)> {
        self.entries.iter().map(|e| {
            let at = match e.deadline_slot {
                NO_DEADLINE => None,
                slot => Some(self.deadlines[slot as usize].at_ms),
            };
            (&*e.key, &e.value, at)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn s(v: &str) -> Value {
        Value::Str(Bytes::copy_from_slice(v.as_bytes()))
    }

    #[test]
    fn the_slot_index_follows_insertions_and_removals() {
        let mut ks = Keyspace::default();
        // Some keys before the index, more after; hash tags put many in
        // one slot.
        for i in 0..50 {
            ks.insert_new(format!("early:{i}").as_bytes(), s("v"));
        }
        ks.index_slots();
        let mut rng = fastrand::Rng::with_seed(7);
        let mut order: Vec<String> = (0..50).map(|i| format!("early:{i}")).collect();
        for round in 0..6000 {
            // Mostly inserts, then mostly removals (compactions).
            let insert = if round < 3000 { rng.u8(..3) > 0 } else { rng.u8(..5) < 2 };
            if insert || order.is_empty() {
                let key = if rng.bool() {
                    format!("{{tag}}:{round}")
                } else {
                    format!("k:{round}")
                };
                ks.insert_new(key.as_bytes(), s("v"));
                order.push(key);
            } else {
                let key = order.remove(rng.usize(..order.len()));
                assert!(ks.remove(key.as_bytes()).is_some());
            }
        }
        check(&ks);
        // Every key knows its place in its slot's list.
        let index = ks.slots.as_deref().unwrap();
        assert_eq!(index.at.len(), ks.len());
        for (p, e) in ks.entries.iter().enumerate() {
            let slot = crate::cluster::key_hash_slot(&e.key) as usize;
            assert_eq!(index.slots[slot][index.at[p] as usize], p as u32);
        }
        let slots: std::collections::BTreeSet<u16> = order.iter().map(|k| crate::cluster::key_hash_slot(k.as_bytes())).collect();
        for slot in slots.iter().copied().chain([0, 16383]) {
            // Newest first, as the keys were added.
            let expected: Vec<&[u8]> = order
                .iter()
                .rev()
                .map(|k| k.as_bytes())
                .filter(|k| crate::cluster::key_hash_slot(k) == slot)
                .collect();
            assert_eq!(ks.slot_len(slot), Some(expected.len()));
            assert_eq!(ks.slot_keys(slot).unwrap().collect::<Vec<_>>(), expected, "slot {slot}");
        }
        assert!(ks.slot_len(crate::cluster::key_hash_slot(b"{tag}")).unwrap() > 50);
        ks.clear();
        assert_eq!(ks.slot_len(crate::cluster::key_hash_slot(b"{tag}")), Some(0));
        ks.insert_new(b"{tag}:after", s("v"));
        assert_eq!(ks.slot_len(crate::cluster::key_hash_slot(b"{tag}")), Some(1));
        assert_eq!(Keyspace::default().slot_len(0), None);
    }

    fn check(ks: &Keyspace) {
        for (p, e) in ks.entries.iter().enumerate() {
            assert_eq!(ks.position(&e.key), Some(p));
            if e.deadline_slot != NO_DEADLINE {
                assert_eq!(ks.deadlines[e.deadline_slot as usize].position as usize, p);
            }
        }
        for (slot, d) in ks.deadlines.iter().enumerate() {
            assert_eq!(ks.entries[d.position as usize].deadline_slot as usize, slot);
        }
        assert_eq!(ks.index.len(), ks.entries.len());
    }

    #[test]
    fn entries_stay_small() {
        assert_eq!(std::mem::size_of::<Key>(), 32);
        assert!(std::mem::size_of::<Entry>() <= 80, "{}", std::mem::size_of::<Entry>());
    }

    #[test]
    fn long_and_short_keys_round_trip() {
        for len in [0, 1, INLINE_KEY, INLINE_KEY + 1, 300] {
            let key = vec![b'k'; len];
            assert_eq!(&*Key::new(&key), key.as_slice());
        }
    }

    #[test]
    fn removal_keeps_positions_and_deadlines_consistent() {
        let mut ks = Keyspace::default();
        let mut model = std::collections::HashMap::new();
        for round in 0..20_000u64 {
            let k = format!("key:{}", fastrand::u64(..500) * 7919 % 1000);
            match fastrand::u8(..4) {
                0 | 1 => {
                    if ks.position(k.as_bytes()).is_none() {
                        ks.insert_new(k.as_bytes(), s(&k));
                        model.insert(k, None);
                    }
                }
                2 => {
                    if let Some(p) = ks.position(k.as_bytes()) {
                        if fastrand::bool() {
                            ks.set_deadline_at(p, round);
                            model.insert(k, Some(round));
                        } else {
                            ks.drop_deadline(p);
                            model.insert(k, None);
                        }
                    }
                }
                _ => {
                    let removed = ks.remove(k.as_bytes()).map(|(key, _, at)| (key.to_vec(), at));
                    let expected = model.remove(&k).map(|at| (k.clone().into_bytes(), at));
                    assert_eq!(removed, expected);
                }
            }
            if round % 1000 == 0 {
                check(&ks);
            }
        }
        check(&ks);
        assert_eq!(ks.len(), model.len());
        for (k, at) in &model {
            assert_eq!(ks.deadline(k.as_bytes()), *at);
        }
    }
}
