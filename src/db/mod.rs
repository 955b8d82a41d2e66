//! One logical database: keys to values, with millisecond expiry.
//!
//! Expiry is checked on every access (a key past its deadline is removed
//! before anything can see it) and by [`Db::active_expire_cycle`], which the
//! engine runs from its cron to reclaim memory of keys nobody touches.
//!
//! Both maps are `IndexMap`s: expiry sampling and RANDOMKEY pick by index in
//! O(1), and SCAN walks indexes downwards. Deletions `swap_remove`, which
//! moves the last entry into the hole; since the last entry is at an index
//! SCAN has already visited (or will visit, if the hole lies below the
//! cursor), a key that exists for a whole SCAN is returned at least once,
//! which is Redis's guarantee.
//!
//! Writes record the keys clients WATCH so EXEC can fail as Redis's does;
//! the engine drains [`Db::take_invalidated`] after each command.

pub mod value;
pub mod zset;

use std::collections::HashMap;

use bytes::Bytes;
use indexmap::IndexMap;

use value::Hasher;
pub use value::Value;

use crate::error::CmdResult;

pub type ClientId = u64;

#[derive(Default)]
pub struct Db {
    entries: IndexMap<Bytes, Value, Hasher>,
    expires: IndexMap<Bytes, u64, Hasher>,
    watchers: HashMap<Bytes, Vec<ClientId>, Hasher>,
    invalidated: Vec<ClientId>,
    /// Keys removed because they expired, for INFO's `expired_keys`.
    pub expired_keys: u64,
}

impl Db {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn expires_len(&self) -> usize {
        self.expires.len()
    }

    fn is_expired(&self, key: &[u8], now_ms: u64) -> bool {
        matches!(self.expires.get(key), Some(&at) if at <= now_ms)
    }

    /// Removes `key` if its deadline has passed; true if it did.
    pub fn expire_if_needed(&mut self, key: &[u8], now_ms: u64) -> bool {
        if self.expires.is_empty() || !self.is_expired(key, now_ms) {
            return false;
        }
        self.remove(key);
        self.expired_keys += 1;
        true
    }

    pub fn contains(&mut self, key: &[u8], now_ms: u64) -> bool {
        self.expire_if_needed(key, now_ms);
        self.entries.contains_key(key)
    }

    /// Reads a live value.
    pub fn get(&mut self, key: &[u8], now_ms: u64) -> Option<&Value> {
        self.expire_if_needed(key, now_ms);
        self.entries.get(key)
    }

    /// A live value, looked at without any effect (no lazy expiry): what a
    /// command would find, for deciding before running it.
    pub fn peek(&self, key: &[u8], now_ms: u64) -> Option<&Value> {
        if self.is_expired(key, now_ms) {
            None
        } else {
            self.entries.get(key)
        }
    }

    /// A live value for writing; marks the key modified for WATCH.
    pub fn get_mut(&mut self, key: &[u8], now_ms: u64) -> Option<&mut Value> {
        self.expire_if_needed(key, now_ms);
        if self.entries.contains_key(key) {
            self.signal_modified(key);
        }
        self.entries.get_mut(key)
    }

    /// The value at `key` for writing, created with `make` if absent; a
    /// value of another type is a WRONGTYPE error through `check`.
    pub fn get_or_insert_with(&mut self, key: &Bytes, now_ms: u64, make: impl FnOnce() -> Value) -> &mut Value {
        self.expire_if_needed(key, now_ms);
        self.signal_modified(key);
        // Look up by reference first: cloning the key costs an allocation,
        // and it is only needed when the key is new.
        let index = match self.entries.get_index_of(key.as_ref()) {
            Some(i) => i,
            None => self.entries.insert_full(key.clone(), make()).0,
        };
        &mut self.entries[index]
    }

    /// Stores `value` at `key`, dropping any TTL unless `keep_ttl`.
    pub fn set(&mut self, key: &Bytes, value: Value, keep_ttl: bool) {
        self.signal_modified(key);
        if !keep_ttl && !self.expires.is_empty() {
            self.expires.swap_remove(key.as_ref());
        }
        // Replace in place when the key exists, so its stored name is kept
        // and no clone of the argument is made.
        match self.entries.get_mut(key.as_ref()) {
            Some(slot) => *slot = value,
            None => {
                self.entries.insert(key.clone(), value);
            }
        }
    }

    /// Deletes a key and its TTL; returns the value it held.
    pub fn remove(&mut self, key: &[u8]) -> Option<Value> {
        let v = self.entries.swap_remove(key)?;
        self.expires.swap_remove(key);
        self.signal_modified(key);
        Some(v)
    }

    /// Deletes `key` if its aggregate value became empty after a write.
    pub fn remove_if_empty(&mut self, key: &[u8]) -> bool {
        if self.entries.get(key).is_some_and(Value::is_empty_aggregate) {
            self.remove(key);
            true
        } else {
            false
        }
    }

    /// The absolute deadline of a live key, if it has one.
    pub fn expire_at(&self, key: &[u8]) -> Option<u64> {
        self.expires.get(key).copied()
    }

    /// Sets the deadline of an existing key.
    pub fn set_expire(&mut self, key: &[u8], at_ms: u64) {
        if let Some((k, _)) = self.entries.get_key_value(key) {
            let k = k.clone();
            self.signal_modified(&k);
            self.expires.insert(k, at_ms);
        }
    }

    /// Removes a key's deadline; true if it had one.
    pub fn persist(&mut self, key: &[u8]) -> bool {
        let had = self.expires.swap_remove(key).is_some();
        if had {
            self.signal_modified(key);
        }
        had
    }

    pub fn clear(&mut self) {
        let watched: Vec<ClientId> = self.watchers.values().flatten().copied().collect();
        self.invalidated.extend(watched);
        self.entries.clear();
        self.expires.clear();
    }

    /// Every live key, unordered.
    pub fn keys(&self, now_ms: u64) -> impl Iterator<Item = &Bytes> {
        self.entries
            .keys()
            .filter(move |k| !matches!(self.expires.get(*k), Some(&at) if at <= now_ms))
    }

    /// A random live key.
    pub fn random_key(&mut self, now_ms: u64) -> Option<Bytes> {
        for _ in 0..100 {
            if self.entries.is_empty() {
                return None;
            }
            let i = fastrand::usize(..self.entries.len());
            let key = self.entries.get_index(i).map(|(k, _)| k.clone())?;
            if !self.expire_if_needed(&key, now_ms) {
                return Some(key);
            }
        }
        self.entries.get_index(0).map(|(k, _)| k.clone())
    }

    /// One SCAN step: up to `count` slots from the cursor downwards, and the
    /// next cursor (0 when done). See the module doc for the guarantee.
    pub fn scan(&self, cursor: u64, count: usize) -> (u64, Vec<(&Bytes, &Value)>) {
        let len = self.entries.len() as u64;
        let start = if cursor == 0 || cursor > len { len } else { cursor };
        let end = start.saturating_sub(count as u64);
        let found = (end..start).rev().filter_map(|i| self.entries.get_index(i as usize)).collect();
        (end, found)
    }

    /// Samples keys with a TTL and removes the expired ones, as Redis's
    /// active expire cycle does; returns how many were removed.
    pub fn active_expire_cycle(&mut self, now_ms: u64, samples: usize) -> usize {
        let mut removed = 0;
        for _ in 0..samples {
            if self.expires.is_empty() {
                break;
            }
            let i = fastrand::usize(..self.expires.len());
            let Some((key, &at)) = self.expires.get_index(i) else { break };
            if at <= now_ms {
                let key = key.clone();
                self.remove(&key);
                self.expired_keys += 1;
                removed += 1;
            }
        }
        removed
    }

    pub fn watch(&mut self, key: Bytes, client: ClientId) {
        let list = self.watchers.entry(key).or_default();
        if !list.contains(&client) {
            list.push(client);
        }
    }

    pub fn unwatch(&mut self, key: &[u8], client: ClientId) {
        if let Some(list) = self.watchers.get_mut(key) {
            list.retain(|&c| c != client);
            if list.is_empty() {
                self.watchers.remove(key);
            }
        }
    }

    fn signal_modified(&mut self, key: &[u8]) {
        if self.watchers.is_empty() {
            return;
        }
        if let Some(list) = self.watchers.get(key) {
            self.invalidated.extend_from_slice(list);
        }
    }

    /// Marks a key modified for WATCH without changing it (e.g. a watched
    /// key that has expired by the time EXEC runs).
    pub fn touch_watched(&mut self, key: &[u8]) {
        self.signal_modified(key);
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
        let at = self.expires.get(key).copied();
        let (k, v) = self.entries.swap_remove_entry(key)?;
        self.expires.swap_remove(key);
        self.signal_modified(key);
        Some((k, v, at))
    }

    pub fn restore_with_ttl(&mut self, key: Bytes, value: Value, at: Option<u64>) {
        self.signal_modified(&key);
        if let Some(at) = at {
            self.expires.insert(key.clone(), at);
        } else {
            self.expires.swap_remove(&key);
        }
        self.entries.insert(key, value);
    }
}

/// Looks a key up as a given type, `None` when missing, WRONGTYPE otherwise.
pub fn typed<'a, T>(v: Option<&'a Value>, as_type: fn(&'a Value) -> CmdResult<&'a T>) -> CmdResult<Option<&'a T>> {
    v.map(as_type).transpose()
}
