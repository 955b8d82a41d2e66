//! Keyspace events: the record of which key changed how, that keyspace
//! notifications (`notify-keyspace-events`) publish.
//!
//! Every database holds a handle on one shared log, so events from several
//! databases (MOVE, COPY … DB, SWAPDB) keep the order they happened in, as
//! Redis's `notifyKeyspaceEvent` publishes each at once. The handlers and
//! `Db` record Redis's event name and class where Redis calls
//! `notifyKeyspaceEvent`; the engine drains the log after each command (and
//! each command a script runs, and after active expiry) and publishes it.
//!
//! The same log carries the *modifications* client-side caching needs
//! (Redis's `signalModifiedKey` → `trackingInvalidateKey`), once a client
//! has ever enabled CLIENT TRACKING: one stream, so that invalidation
//! messages and notifications keep Redis's relative order.
//!
//! With `notify-keyspace-events` empty and tracking never enabled, a
//! record is one relaxed load and a branch, and nothing is ever stored.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use bytes::Bytes;

pub use crate::config_params::{
    NOTIFY_EVICTED, NOTIFY_EXPIRED, NOTIFY_GENERIC, NOTIFY_HASH, NOTIFY_KEY_MISS, NOTIFY_KEYEVENT, NOTIFY_KEYSPACE, NOTIFY_LIST,
    NOTIFY_NEW, NOTIFY_SET, NOTIFY_STREAM, NOTIFY_STRING, NOTIFY_ZSET,
};

/// One event: in database `db`, `key` saw `event` (Redis's event name),
/// or, for [`KeyEvent::modified`], was modified (what tracking reads).
#[derive(Clone, Debug)]
pub struct KeyEvent {
    pub db: usize,
    pub key: Bytes,
    pub event: &'static str,
    /// A modification for tracking, not a notification: `Some(true)` when
    /// the running command made it, `Some(false)` when expiry did (Redis
    /// signals those with no client).
    pub modified: Option<bool>,
}

/// The shared log (cheap to clone: every clone is the same log).
#[derive(Clone, Debug, Default)]
pub struct KeyEvents(Arc<Inner>);

#[derive(Debug, Default)]
struct Inner {
    /// `notify-keyspace-events` as Redis's class flags.
    flags: AtomicU32,
    /// Some client enabled tracking once: modifications are recorded.
    tracking: AtomicBool,
    pending: std::sync::Mutex<Vec<KeyEvent>>,
    /// Effects are recorded: keys expiry removes are kept for them.
    deletions: AtomicBool,
    /// Some key is in `expired`: a command that expired none pays one
    /// load, not a lock.
    expired_pending: AtomicBool,
    expired: std::sync::Mutex<Vec<(usize, Bytes)>>,
    /// The running command is a client's on a writable replica: the keys
    /// it gives a deadline are kept (see [`KeyEvents::record_deadline`]).
    deadlines: AtomicBool,
    deadlines_set: std::sync::Mutex<Vec<(usize, Bytes)>>,
}

impl KeyEvents {
    pub fn set_flags(&self, flags: u32) {
        self.0.flags.store(flags, Ordering::Relaxed);
    }

    pub fn flags(&self) -> u32 {
        self.0.flags.load(Ordering::Relaxed)
    }

    /// From now on, modifications are recorded (tracking was enabled).
    pub fn record_modifications(&self) {
        self.0.tracking.store(true, Ordering::Relaxed);
    }

    fn tracking(&self) -> bool {
        self.0.tracking.load(Ordering::Relaxed)
    }

    /// Records that `key` was modified, by the running command
    /// (`by_client`) or by expiry, if tracking was ever enabled.
    #[inline]
    pub fn record_modified(&self, db: usize, key: &[u8], by_client: bool) {
        if !self.tracking() {
            return;
        }
        self.push(KeyEvent {
            db,
            key: Bytes::copy_from_slice(key),
            event: "",
            modified: Some(by_client),
        });
    }

    /// Records `event` on `key` if its class is enabled.
    #[inline]
    pub fn record(&self, class: u32, event: &'static str, db: usize, key: &[u8]) {
        if self.flags() & class == 0 {
            return;
        }
        self.record_slow(event, db, key);
    }

    #[cold]
    fn record_slow(&self, event: &'static str, db: usize, key: &[u8]) {
        self.push(KeyEvent {
            db,
            key: Bytes::copy_from_slice(key),
            event,
            modified: None,
        });
    }

    fn push(&self, event: KeyEvent) {
        let mut pending = self.0.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.push(event);
    }

    /// Whether the keys given a deadline from now on are kept, until
    /// [`KeyEvents::take_deadlines`] (a client's command on a writable
    /// replica: Redis's `rememberSlaveKeyWithExpire`).
    pub fn keep_deadlines(&self, on: bool) {
        self.0.deadlines.store(on, Ordering::Relaxed);
    }

    /// `key` of database `db` was given a deadline.
    #[inline]
    pub fn record_deadline(&self, db: usize, key: &[u8]) {
        if self.0.deadlines.load(Ordering::Relaxed) {
            let mut set = self.0.deadlines_set.lock().unwrap_or_else(|e| e.into_inner());
            set.push((db, Bytes::copy_from_slice(key)));
        }
    }

    /// The keys given a deadline while they were kept.
    pub fn take_deadlines(&self) -> Vec<(usize, Bytes)> {
        std::mem::take(&mut *self.0.deadlines_set.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// From now on, the keys expiry removes are kept (for the effect
    /// stream, which replays each as a `DEL`).
    pub fn record_expired_deletions(&self) {
        self.0.deletions.store(true, Ordering::Relaxed);
    }

    /// Expiry removed `key` from database `db`.
    #[inline]
    pub fn record_expired(&self, db: usize, key: &[u8]) {
        if self.0.deletions.load(Ordering::Relaxed) {
            let mut expired = self.0.expired.lock().unwrap_or_else(|e| e.into_inner());
            expired.push((db, Bytes::copy_from_slice(key)));
            self.0.expired_pending.store(true, Ordering::Relaxed);
        }
    }

    /// Whether expiry removed a key since the last [`KeyEvents::take_expired`].
    #[inline]
    pub fn has_expired(&self) -> bool {
        self.0.expired_pending.load(Ordering::Relaxed)
    }

    /// The keys expiry removed since the last call, oldest first.
    pub fn take_expired(&self) -> Vec<(usize, Bytes)> {
        if !self.0.expired_pending.load(Ordering::Relaxed) {
            return Vec::new();
        }
        let mut expired = self.0.expired.lock().unwrap_or_else(|e| e.into_inner());
        self.0.expired_pending.store(false, Ordering::Relaxed);
        std::mem::take(&mut *expired)
    }

    /// The events recorded since the last call, oldest first; empty (and
    /// no lock taken) while notifications are off and tracking never was on.
    pub fn take(&self) -> Vec<KeyEvent> {
        if self.flags() == 0 && !self.tracking() {
            return Vec::new();
        }
        let mut pending = self.0.pending.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut *pending)
    }
}
