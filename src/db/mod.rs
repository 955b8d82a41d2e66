//! One logical database: keys to values, with millisecond expiry.
//!
//! Expiry is checked on every access (a key past its deadline is removed
//! before anything can see it) and by [`Db::active_expire_cycle`], which the
//! engine runs from its cron to reclaim memory of keys nobody touches.
//!
//! Keys live in a [`keyspace::Keyspace`] (laid out for memory; see there):
//! expiry sampling and RANDOMKEY pick by position in O(1), and SCAN walks
//! positions downwards. Deletions `swap_remove`, which
//! moves the last entry into the hole; since the last entry is at an index
//! SCAN has already visited (or will visit, if the hole lies below the
//! cursor), a key that exists for a whole SCAN is returned at least once,
//! which is Redis's guarantee.
//!
//! Writes record the keys clients WATCH so EXEC can fail as Redis's does;
//! the engine drains [`Db::take_invalidated`] after each command.
//! Keyspace events (`notify-keyspace-events`) are recorded with
//! [`Db::notify`] into the log of [`events`]: this module records the
//! ones Redis's `db.c` raises itself (`new` when a key is created,
//! `expired` when expiry removes one); handlers record their own.

pub mod chunked;
pub mod events;
pub mod footprint;
pub mod hash;
pub mod hyperloglog;
pub mod keyspace;
pub mod ops;
pub mod stream;
pub mod value;
pub mod zset;

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;

pub use events::*;
use keyspace::Keyspace;
use value::Hasher;
pub use value::Value;

use crate::error::CmdResult;

pub type ClientId = u64;

/// A client watching a key (Redis's `watchedKey`).
#[derive(Clone, Copy, Debug)]
struct Watcher {
    client: ClientId,
    /// The key was past its deadline when WATCH ran: its removal by
    /// expiry is no change (Redis's `wk->expired`).
    expired: bool,
}

#[derive(Default)]
pub struct Db {
    keys: Keyspace,
    watchers: HashMap<Bytes, Vec<Watcher>, Hasher>,
    invalidated: Vec<ClientId>,
    /// Clients blocked on keys of this database, first blocked first
    /// (Redis's `blocking_keys`).
    waiting: HashMap<Bytes, VecDeque<ClientId>, Hasher>,
    /// Keys with waiting clients that a write created as a list, sorted
    /// set or stream, or changed as a stream, since the engine last served
    /// them (Redis's `ready_keys`).
    ready: Vec<Bytes>,
    /// Keys removed because they expired, for INFO's `expired_keys`.
    pub expired_keys: u64,
    /// This database's number (SELECT), for the events it records.
    index: usize,
    /// Modifications made, ever (see [`Db::changes`]).
    changes: u64,
    /// Keyspace events, shared by every database of a server.
    events: KeyEvents,
}

impl Db {
    /// Database number `index`, recording its keyspace events in `events`.
    pub fn numbered(index: usize, events: KeyEvents) -> Db {
        Db {
            index,
            events,
            ..Db::default()
        }
    }

    /// Records a keyspace event on `key` in this database (Redis's
    /// `notifyKeyspaceEvent`); nothing unless `class` is enabled.
    #[inline]
    pub fn notify(&self, class: u32, event: &'static str, key: &[u8]) {
        self.events.record(class, event, self.index, key);
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn expires_len(&self) -> usize {
        self.keys.deadlines_len()
    }

    /// The position of a live key; an expired one is removed on the way.
    ///
    /// Callers doing several steps on one key may keep the position and
    /// use `value_at`, `value_at_mut` and the `*_at_position` methods: it
    /// stays valid until a key of this database is removed.
    ///
    /// The key counts as accessed (OBJECT IDLETIME starts over), as
    /// Redis's `lookupKey` marks it; [`Db::live_position_no_touch`] is the
    /// lookup of the commands that do not (EXISTS, TYPE, the TTL family,
    /// OBJECT).
    pub fn live_position(&mut self, key: &[u8], now_ms: u64) -> Option<usize> {
        let position = self.live_position_no_touch(key, now_ms)?;
        self.keys.touch(position);
        Some(position)
    }

    /// [`Db::live_position`] without marking the key accessed (Redis's
    /// LOOKUP_NOTOUCH).
    pub fn live_position_no_touch(&mut self, key: &[u8], now_ms: u64) -> Option<usize> {
        let position = self.keys.position(key)?;
        if self.keys.deadlines_len() != 0
            && self.keys.deadline_at(position).is_some_and(|at| at <= now_ms)
            && !self.keys.clock.ignores_deadlines()
        {
            if !self.keys.clock.keep_expired() {
                self.remove_expired(key);
            }
            return None;
        }
        Some(position)
    }

    /// Before adding `key`: a key still there past its deadline (kept
    /// while clients are paused) goes first.
    fn clear_kept_expired(&mut self, key: &[u8]) {
        if self.keys.clock.keep_expired() && !self.keys.clock.ignores_deadlines() && self.keys.position(key).is_some() {
            self.remove_expired(key);
        }
    }

    /// Reads a live value without marking it accessed.
    pub fn get_no_touch(&mut self, key: &[u8], now_ms: u64) -> Option<&Value> {
        let position = self.live_position_no_touch(key, now_ms)?;
        self.keys.at(position).map(|(_, v)| v)
    }

    /// Seconds since the key at a live position was last accessed.
    pub fn idle_secs_at(&self, position: usize) -> u64 {
        self.keys.idle_secs(position)
    }

    /// Makes the key at `position` read as idle for `secs` seconds (RESTORE
    /// IDLETIME).
    pub fn set_idle_secs_at(&mut self, position: usize, secs: u32) {
        self.keys.set_idle_secs(position, secs);
    }

    /// Whether keys past their deadline stay in place (CLIENT PAUSE).
    pub fn keep_expired_keys(&self, keep: bool) {
        self.keys.clock.set_keep_expired(keep);
    }

    /// Whether keys past their deadline are live (a replica's master's
    /// stream runs; every database shares the setting).
    pub fn ignore_deadlines(&self, ignore: bool) {
        self.keys.clock.set_ignore_deadlines(ignore);
    }

    /// Whether keys past their deadline are live now.
    pub fn ignores_deadlines(&self) -> bool {
        self.keys.clock.ignores_deadlines()
    }

    /// The clock accesses are stamped with; every database of a server
    /// shares the one the engine sets.
    pub fn use_access_clock(&mut self, clock: keyspace::AccessClock) {
        self.keys.clock = clock;
    }

    /// Removes `key` if its deadline has passed; true if it did.
    pub fn expire_if_needed(&mut self, key: &[u8], now_ms: u64) -> bool {
        if self.keys.deadlines_len() == 0 || self.keys.deadline(key).is_none_or(|at| at > now_ms) || self.keys.clock.ignores_deadlines() {
            return false;
        }
        if self.keys.clock.keep_expired() {
            return true;
        }
        self.remove_expired(key);
        true
    }

    pub fn contains(&mut self, key: &[u8], now_ms: u64) -> bool {
        self.live_position(key, now_ms).is_some()
    }

    /// Reads a live value.
    pub fn get(&mut self, key: &[u8], now_ms: u64) -> Option<&Value> {
        let position = self.live_position(key, now_ms)?;
        self.keys.at(position).map(|(_, v)| v)
    }

    /// The value stored at `key`, past its deadline or not, looked at
    /// without any effect (Redis's `dictFind`, as MEMORY USAGE uses it).
    pub fn stored(&self, key: &[u8]) -> Option<&Value> {
        self.keys.get(key)
    }

    /// Where `key` is stored, past its deadline or not (DEBUG OBJECT).
    pub fn stored_position(&self, key: &[u8]) -> Option<usize> {
        self.keys.position(key)
    }

    /// Every stored key with its value and deadline, expired or not
    /// (DEBUG DIGEST).
    pub fn entries(&self) -> impl Iterator<Item = (&[u8], &Value, Option<u64>)> {
        self.keys.iter()
    }

    /// A live value, looked at without any effect (no lazy expiry): what a
    /// command would find, for deciding before running it.
    pub fn peek(&self, key: &[u8], now_ms: u64) -> Option<&Value> {
        let position = self.keys.position(key)?;
        if self.keys.deadline_at(position).is_some_and(|at| at <= now_ms) {
            None
        } else {
            self.keys.at(position).map(|(_, v)| v)
        }
    }

    /// A live value for writing; marks the key modified for WATCH.
    pub fn get_mut(&mut self, key: &[u8], now_ms: u64) -> Option<&mut Value> {
        let position = self.live_position(key, now_ms)?;
        self.signal_modified(key);
        Some(self.keys.value_at_mut(position))
    }

    /// The value at `key` for writing, created with `make` if absent.
    pub fn get_or_insert_with(&mut self, key: &[u8], now_ms: u64, make: impl FnOnce() -> Value) -> &mut Value {
        self.signal_modified(key);
        let position = match self.live_position(key, now_ms) {
            Some(p) => p,
            None => {
                self.clear_kept_expired(key);
                let value = make();
                self.signal_ready(key, &value);
                let position = self.keys.insert_new(key, value);
                self.notify(NOTIFY_NEW, "new", key);
                position
            }
        };
        self.keys.value_at_mut(position)
    }

    /// The value at a live position (see [`Db::live_position`]).
    pub fn value_at(&self, position: usize) -> &Value {
        self.keys.value_at(position)
    }

    /// The value at a live position, for writing; marks `key`, the key at
    /// that position, modified for WATCH.
    pub fn value_at_mut(&mut self, position: usize, key: &[u8]) -> &mut Value {
        self.signal_modified(key);
        self.keys.value_at_mut(position)
    }

    /// Adds `key`, known to be absent, holding `value`; its position.
    pub fn insert_absent(&mut self, key: &[u8], value: Value) -> usize {
        self.clear_kept_expired(key);
        debug_assert!(self.keys.position(key).is_none(), "insert_absent of a present key");
        self.signal_modified(key);
        self.signal_ready(key, &value);
        let position = self.keys.insert_new(key, value);
        self.notify(NOTIFY_NEW, "new", key);
        position
    }

    /// The value at a live position, for a write Redis does not report to
    /// WATCH by itself: BITFIELD pads a string with zeros unsignalled and
    /// signals only when a field changed (the caller then calls
    /// [`Db::touch_watched`]).
    pub fn value_at_mut_unsignalled(&mut self, position: usize) -> &mut Value {
        self.keys.value_at_mut(position)
    }

    /// [`Db::insert_absent`] without the WATCH signal, for the same case.
    pub fn insert_absent_unsignalled(&mut self, key: &[u8], value: Value) -> usize {
        debug_assert!(self.keys.position(key).is_none(), "insert_absent of a present key");
        let position = self.keys.insert_new(key, value);
        self.notify(NOTIFY_NEW, "new", key);
        position
    }

    /// The deadline of the key at a live position, if it has one.
    pub fn expire_at_position(&self, position: usize) -> Option<u64> {
        self.keys.deadline_at(position)
    }

    /// Sets the deadline of `key`, at a live position.
    pub fn set_expire_at_position(&mut self, position: usize, key: &[u8], at_ms: u64) {
        self.signal_modified(key);
        self.keys.set_deadline_at(position, at_ms);
        self.events.record_deadline(self.index, key);
    }

    /// Stores `value` at `key`, dropping any TTL unless `keep_ttl`.
    pub fn set(&mut self, key: &[u8], value: Value, keep_ttl: bool) {
        self.signal_modified(key);
        match self.keys.position(key) {
            Some(p) => {
                if !keep_ttl {
                    self.keys.drop_deadline(p);
                }
                // A new value, accessed now (Redis replaces the object).
                self.keys.touch(p);
                self.keys.set_raw(p, false);
                let old = std::mem::replace(self.keys.value_at_mut(p), value);
                self.signal_if_stream(key, &old);
            }
            None => {
                self.signal_ready(key, &value);
                self.keys.insert_new(key, value);
                self.notify(NOTIFY_NEW, "new", key);
            }
        }
    }

    /// Marks the string at `key` as modified in place: OBJECT ENCODING
    /// says `raw` until a new value is set (see `keyspace::RAW`).
    pub fn mark_raw(&mut self, key: &[u8]) {
        if let Some(p) = self.keys.position(key) {
            self.keys.set_raw(p, true);
        }
    }

    /// [`Db::mark_raw`] by position.
    pub fn mark_raw_at(&mut self, position: usize) {
        self.keys.set_raw(position, true);
    }

    /// Whether the string at `key` was modified in place (no lookup
    /// effects).
    pub fn is_raw(&self, key: &[u8]) -> bool {
        self.keys.position(key).is_some_and(|p| self.keys.is_raw(p))
    }

    /// Whether the string at `position` was modified in place.
    pub fn is_raw_at(&self, position: usize) -> bool {
        self.keys.is_raw(position)
    }

    /// Deletes a key and its TTL; returns the value it held.
    pub fn remove(&mut self, key: &[u8]) -> Option<Value> {
        let (_, v, _) = self.keys.remove(key)?;
        self.signal_modified(key);
        self.signal_if_stream(key, &v);
        Some(v)
    }

    /// Deletes `key` if its aggregate value became empty after a write.
    pub fn remove_if_empty(&mut self, key: &[u8]) -> bool {
        if self.keys.get(key).is_some_and(Value::is_empty_aggregate) {
            self.remove(key);
            true
        } else {
            false
        }
    }

    /// The absolute deadline of a live key, if it has one.
    pub fn expire_at(&self, key: &[u8]) -> Option<u64> {
        self.keys.deadline(key)
    }

    /// Sets the deadline of an existing key.
    pub fn set_expire(&mut self, key: &[u8], at_ms: u64) {
        if let Some(p) = self.keys.position(key) {
            self.signal_modified(key);
            self.keys.set_deadline_at(p, at_ms);
            self.events.record_deadline(self.index, key);
        }
    }

    /// Removes a key's deadline; true if it had one.
    pub fn persist(&mut self, key: &[u8]) -> bool {
        let had = self.keys.position(key).is_some_and(|p| self.keys.drop_deadline(p).is_some());
        if had {
            self.signal_modified(key);
        }
        had
    }

    /// A key was created holding `value`: clients blocked on it for a
    /// list, sorted set or stream can be served (Redis's
    /// `signalKeyAsReady`, which `dbAdd` calls; overwriting an existing key
    /// does not, unless it held a stream).
    fn signal_ready(&mut self, key: &[u8], value: &Value) {
        if self.waiting.is_empty() || !matches!(value, Value::List(_) | Value::ZSet(_) | Value::Stream(_)) {
            return;
        }
        self.signal_key_ready(key);
    }

    /// Marks `key` ready for the clients blocked on it, whatever it holds
    /// now: XADD and XGROUP DESTROY on a stream, and the removal or
    /// overwriting of a stream (XREADGROUP waiters are then told), as
    /// Redis's `signalKeyAsReady` calls for streams.
    pub fn signal_key_ready(&mut self, key: &[u8]) {
        if self.waiting.contains_key(key) && !self.ready.iter().any(|k| **k == *key) {
            self.ready.push(Bytes::copy_from_slice(key));
        }
    }

    /// A stream at `key` is being removed or replaced.
    fn signal_if_stream(&mut self, key: &[u8], old: &Value) {
        if !self.waiting.is_empty() && matches!(old, Value::Stream(_)) {
            self.signal_key_ready(key);
        }
    }

    /// Registers `client` as blocked on `key`, after the clients already
    /// waiting for it.
    pub fn block_on(&mut self, key: Bytes, client: ClientId) {
        self.waiting.entry(key).or_default().push_back(client);
    }

    /// Forgets `client` as blocked on `key`.
    pub fn unblock_from(&mut self, key: &[u8], client: ClientId) {
        if let Some(list) = self.waiting.get_mut(key) {
            list.retain(|&c| c != client);
            if list.is_empty() {
                self.waiting.remove(key);
            }
        }
    }

    /// The clients blocked on `key`, first blocked first.
    pub fn waiters(&self, key: &[u8]) -> Vec<ClientId> {
        self.waiting.get(key).map(|l| l.iter().copied().collect()).unwrap_or_default()
    }

    /// The keys made ready since the last call, in the order they were.
    pub fn take_ready(&mut self) -> Vec<Bytes> {
        std::mem::take(&mut self.ready)
    }

    /// After SWAPDB brought other data in: every waited-for key that now
    /// holds a list or sorted set is ready (Redis's `scanDatabaseForReadyKeys`).
    pub fn signal_waited_keys(&mut self) {
        let keys: Vec<Bytes> = self.waiting.keys().cloned().collect();
        for key in keys {
            if let Some(value) = self.keys.get(&key) {
                let ready = matches!(value, Value::List(_) | Value::ZSet(_) | Value::Stream(_));
                if ready && !self.ready.contains(&key) {
                    self.ready.push(key);
                }
            }
        }
    }

    /// SWAPDB: the two databases exchange their data; clients blocked on
    /// keys and watching keys stay with the database number they chose, as
    /// in Redis. Watchers of a key that exists on either side see it change.
    pub fn swap_data(a: &mut Db, b: &mut Db, now_ms: u64) {
        a.touch_all_watched(Some(&b.keys), now_ms);
        b.touch_all_watched(Some(&a.keys), now_ms);
        // XREADGROUP waiters on a stream that is swapped away are told
        // (Redis's `scanDatabaseForDeletedStreams`).
        let a_streams = a.waited_streams();
        let b_streams = b.waited_streams();
        std::mem::swap(&mut a.keys, &mut b.keys);
        std::mem::swap(&mut a.expired_keys, &mut b.expired_keys);
        for (db, streams) in [(&mut *a, a_streams), (&mut *b, b_streams)] {
            for key in streams {
                db.signal_key_ready(&key);
            }
            db.signal_waited_keys();
        }
    }

    /// The waited-for keys that hold a stream.
    fn waited_streams(&self) -> Vec<Bytes> {
        self.waiting
            .keys()
            .filter(|k| matches!(self.keys.get(k), Some(Value::Stream(_))))
            .cloned()
            .collect()
    }

    /// Redis's `touchAllWatchedKeysInDb`: this database is emptied
    /// (FLUSHDB, FLUSHALL: `replaced_with` None) or its contents replaced
    /// by `replaced_with` (SWAPDB). The watchers of a key that existed, or
    /// now exists, are told, except where nothing changed for them: a key
    /// they saw already expired that is now gone (their flag is cleared)
    /// or replaced by one that is expired too; a missing key replaced by
    /// an expired one flags them instead, as WATCH would have.
    fn touch_all_watched(&mut self, replaced_with: Option<&Keyspace>, now_ms: u64) {
        let mut dirty = Vec::new();
        for (key, watchers) in self.watchers.iter_mut() {
            let exists_in_emptied = self.keys.position(key).is_some();
            let replacement = replaced_with.and_then(|r| r.position(key).map(|p| r.deadline_at(p)));
            if !exists_in_emptied && replacement.is_none() {
                continue;
            }
            let replacement_expired = replacement.flatten().is_some_and(|at| at <= now_ms);
            for watcher in watchers.iter_mut() {
                if watcher.expired {
                    if replacement.is_none() {
                        watcher.expired = false;
                        continue;
                    } else if replacement_expired {
                        continue;
                    }
                } else if !exists_in_emptied && replacement_expired {
                    watcher.expired = true;
                    continue;
                }
                dirty.push(watcher.client);
            }
        }
        self.invalidated.extend(dirty);
    }

    /// Empties the database (FLUSHDB, FLUSHALL). As Redis's
    /// `touchAllWatchedKeysInDb`, only the watchers of keys that existed
    /// are told, and a watcher that saw its key already expired is not
    /// (the key's removal is no change to it; its flag is cleared).
    pub fn clear(&mut self) {
        self.touch_all_watched(None, 0);
        for key in self.waited_streams() {
            self.signal_key_ready(&key);
        }
        self.keys.clear();
    }

    /// Every live key, unordered.
    pub fn keys(&self, now_ms: u64) -> impl Iterator<Item = &[u8]> {
        self.keys
            .iter()
            .filter(move |(_, _, at)| !at.is_some_and(|at| at <= now_ms))
            .map(|(k, _, _)| k)
    }

    /// A random live key.
    pub fn random_key(&mut self, now_ms: u64) -> Option<Bytes> {
        for _ in 0..100 {
            if self.keys.is_empty() {
                return None;
            }
            let i = fastrand::usize(..self.keys.len());
            let key = self.keys.at(i).map(|(k, _)| Bytes::copy_from_slice(k))?;
            if !self.expire_if_needed(&key, now_ms) {
                return Some(key);
            }
        }
        self.keys.at(0).map(|(k, _)| Bytes::copy_from_slice(k))
    }

    /// One SCAN step: up to `count` slots from the cursor downwards, and the
    /// next cursor (0 when done). See the module doc for the guarantee.
    pub fn scan(&self, cursor: u64, count: usize) -> (u64, Vec<(&[u8], &Value)>) {
        let len = self.keys.len() as u64;
        let start = if cursor == 0 || cursor > len { len } else { cursor };
        let end = start.saturating_sub(count as u64);
        let found = (end..start).rev().filter_map(|i| self.keys.at(i as usize)).collect();
        (end, found)
    }

    /// Samples keys with a TTL and removes the expired ones, as Redis's
    /// active expire cycle does; returns how many were removed.
    pub fn active_expire_cycle(&mut self, now_ms: u64, samples: usize) -> usize {
        let mut removed = 0;
        for _ in 0..samples {
            if self.keys.deadlines_len() == 0 {
                break;
            }
            let i = fastrand::usize(..self.keys.deadlines_len());
            let Some((key, at)) = self.keys.deadline_sample(i) else { break };
            if at <= now_ms {
                let key = key.to_vec();
                self.remove_expired(&key);
                removed += 1;
            }
        }
        removed
    }

    /// Removes every key whose deadline has passed, counting each in
    /// `expired_keys` (after the clock jumped: what became due goes at
    /// once, not by sampling). Returns how many went.
    pub fn expire_all_due(&mut self, now_ms: u64) -> usize {
        let mut removed = 0;
        let mut i = 0;
        while let Some((key, at)) = self.keys.deadline_sample(i) {
            if at <= now_ms {
                // Removal moves the last deadline into slot `i`.
                let key = key.to_vec();
                self.remove_expired(&key);
                removed += 1;
            } else {
                i += 1;
            }
        }
        removed
    }

    /// WATCH: `client` watches `key`; whether the key is already past its
    /// deadline (present but expired) is remembered, as Redis does.
    pub fn watch(&mut self, key: Bytes, client: ClientId, now_ms: u64) {
        let expired = self.is_expired_in_place(&key, now_ms);
        let list = self.watchers.entry(key).or_default();
        if !list.iter().any(|w| w.client == client) {
            list.push(Watcher { client, expired });
        }
    }

    pub fn unwatch(&mut self, key: &[u8], client: ClientId) {
        if let Some(list) = self.watchers.get_mut(key) {
            list.retain(|w| w.client != client);
            if list.is_empty() {
                self.watchers.remove(key);
            }
        }
    }

    /// Whether `key` is still held but past its deadline.
    fn is_expired_in_place(&self, key: &[u8], now_ms: u64) -> bool {
        self.keys.deadlines_len() != 0 && self.keys.deadline(key).is_some_and(|at| at <= now_ms)
    }

    /// EXEC's check (Redis's `isWatchedKeyExpired`): a key `client`
    /// watches that expired since it watched it, even if not yet removed,
    /// fails the transaction.
    pub fn watched_key_expired(&self, key: &[u8], client: ClientId, now_ms: u64) -> bool {
        let watched_live = self
            .watchers
            .get(key)
            .and_then(|list| list.iter().find(|w| w.client == client))
            .is_some_and(|w| !w.expired);
        watched_live && self.is_expired_in_place(key, now_ms)
    }

    fn signal_modified(&mut self, key: &[u8]) {
        self.changes = self.changes.wrapping_add(1);
        self.events.record_modified(self.index, key, true);
        if self.watchers.is_empty() {
            return;
        }
        if let Some(list) = self.watchers.get(key) {
            self.invalidated.extend(list.iter().map(|w| w.client));
        }
    }

    /// Removes `key` if its deadline has passed at `now_ms`, as expiry
    /// does (see below): Some(true) if it went, Some(false) if it is live
    /// with a deadline still ahead, None if it has no deadline or is gone.
    pub fn expire_if_due(&mut self, key: &[u8], now_ms: u64) -> Option<bool> {
        let at = self.keys.deadline(key)?;
        if at > now_ms {
            return Some(false);
        }
        self.remove_expired(key);
        Some(true)
    }

    /// A key reached its deadline and is removed (Redis's
    /// `deleteExpiredKeyAndPropagate`): counted in `expired_keys`, an
    /// `expired` event, and WATCH told — but for a client that watched it
    /// while it was already expired, its removal is no change (Redis's
    /// `touchWatchedKey`).
    fn remove_expired(&mut self, key: &[u8]) {
        let Some((_, old, _)) = self.keys.remove(key) else { return };
        self.signal_if_stream(key, &old);
        self.expired_keys += 1;
        self.events.record_expired(self.index, key);
        self.notify(NOTIFY_EXPIRED, "expired", key);
        self.events.record_modified(self.index, key, false);
        if let Some(list) = self.watchers.get_mut(key) {
            for w in list.iter_mut() {
                if w.expired {
                    w.expired = false;
                } else {
                    self.invalidated.push(w.client);
                }
            }
        }
    }

    /// Removes `key` to free memory (Redis's eviction in
    /// `performEvictions`): WATCH and tracking told, an `evicted` event,
    /// and replayed as a `DEL` as an expiry is. Returns the memory the
    /// removal itself freed (`used` is how it is measured), before what is
    /// recorded of it (Redis's `delta` around `dbSyncDelete`: the events
    /// and invalidations it causes are not counted against it), or the
    /// key's entry if more (the key table gives its room back by whole
    /// chunks, later, and the key's bytes may be shared until its
    /// invalidation); None if it was not there.
    pub fn evict(&mut self, key: &[u8], used: impl Fn() -> u64) -> Option<u64> {
        let before = used();
        let (_, old, _) = self.keys.remove(key)?;
        let stream = matches!(old, Value::Stream(_));
        drop(old);
        let freed = before.saturating_sub(used()).max(footprint::entry(key));
        if stream && !self.waiting.is_empty() {
            self.signal_key_ready(key);
        }
        self.changes = self.changes.wrapping_add(1);
        self.events.record_modified(self.index, key, false);
        if let Some(list) = self.watchers.get(key) {
            self.invalidated.extend(list.iter().map(|w| w.client));
        }
        self.notify(NOTIFY_EVICTED, "evicted", key);
        self.events.record_expired(self.index, key);
        Some(freed)
    }

    /// The keys eviction chooses from: a random one, or a random one with
    /// a deadline (`volatile`), with its position.
    pub fn eviction_sample(&self, volatile: bool) -> Option<usize> {
        if volatile {
            self.keys.random_deadline().map(|(position, _)| position)
        } else {
            self.keys.random_position()
        }
    }

    /// The key at `position`, its deadline, seconds idle and LFU
    /// frequency, for eviction's choice.
    pub fn eviction_facts(&self, position: usize) -> (Bytes, Option<u64>, u64, u32) {
        let (key, _) = self.keys.at(position).expect("a sampled position");
        (
            Bytes::copy_from_slice(key),
            self.keys.deadline_at(position),
            self.keys.idle_secs(position),
            self.keys.lfu_freq(position),
        )
    }

    /// Every stored key, expired or not.
    pub fn stored_keys(&self) -> impl Iterator<Item = &[u8]> {
        self.keys.iter().map(|(k, _, _)| k)
    }

    /// Keeps the keys of each hash slot from now on (cluster mode).
    pub fn index_slots(&mut self) {
        self.keys.index_slots();
    }

    /// Up to `limit` stored keys (expired or not) of hash slot `slot`,
    /// newest first as Redis's slot-to-keys lists give them, and how many
    /// it holds in all: from the slot's list in cluster mode, else (a
    /// standalone server's CLUSTER errors aside, for tools) by a walk of
    /// the keys.
    pub fn keys_in_slot(&self, slot: u16, limit: usize) -> (Vec<Bytes>, usize) {
        if let (Some(count), Some(keys)) = (self.keys.slot_len(slot), self.keys.slot_keys(slot)) {
            return (keys.take(limit).map(Bytes::copy_from_slice).collect(), count);
        }
        let mut keys: Vec<&[u8]> = Vec::new();
        for (k, _, _) in self.keys.iter() {
            if crate::cluster::key_hash_slot(k) == slot {
                keys.push(k);
            }
        }
        let count = keys.len();
        (keys.into_iter().rev().take(limit).map(Bytes::copy_from_slice).collect(), count)
    }

    /// Whether `key` is stored (expired or not).
    pub fn contains_key(&self, key: &[u8]) -> bool {
        self.keys.position(key).is_some()
    }

    /// How many keys have a deadline.
    pub fn deadlines_len(&self) -> usize {
        self.keys.deadlines_len()
    }

    /// OBJECT FREQ: the key's access frequency under an LFU policy.
    pub fn lfu_freq_at(&self, position: usize) -> u32 {
        self.keys.lfu_freq(position)
    }

    /// RESTORE … FREQ.
    pub fn set_lfu_freq_at(&mut self, position: usize, freq: u32) {
        self.keys.set_lfu_freq(position, freq);
    }

    /// Marks a key modified for WATCH without changing it (e.g. a watched
    /// key that has expired by the time EXEC runs).
    pub fn touch_watched(&mut self, key: &[u8]) {
        self.events.record_modified(self.index, key, true);
        if let Some(list) = self.watchers.get(key) {
            self.invalidated.extend(list.iter().map(|w| w.client));
        }
    }

    /// How many modifications commands made (a counter that only grows):
    /// a command that changed it changed the dataset.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// Clients whose watched keys changed since the last call.
    pub fn take_invalidated(&mut self) -> Vec<ClientId> {
        std::mem::take(&mut self.invalidated)
    }

    pub fn has_invalidated(&self) -> bool {
        !self.invalidated.is_empty()
    }

    /// Moves a key's value and TTL to another database (MOVE, SWAPDB helpers).
    pub fn take_with_ttl(&mut self, key: &[u8]) -> Option<(Bytes, Value, Option<u64>)> {
        let (k, v, at) = self.keys.remove(key)?;
        self.signal_modified(key);
        self.signal_if_stream(key, &v);
        Some((Bytes::copy_from_slice(&k), v, at))
    }

    pub fn restore_with_ttl(&mut self, key: Bytes, value: Value, at: Option<u64>) {
        self.signal_modified(&key);
        self.set(&key, value, false);
        if let Some(at) = at {
            self.set_expire(&key, at);
        }
    }
}

/// Looks a key up as a given type, `None` when missing, WRONGTYPE otherwise.
pub fn typed<'a, T>(v: Option<&'a Value>, as_type: fn(&'a Value) -> CmdResult<&'a T>) -> CmdResult<Option<&'a T>> {
    v.map(as_type).transpose()
}
