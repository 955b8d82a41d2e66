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
//! With `notify-keyspace-events` empty a record is one relaxed load and a
//! branch, and nothing is ever stored.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use bytes::Bytes;

pub use crate::config_params::{
    NOTIFY_EVICTED, NOTIFY_EXPIRED, NOTIFY_GENERIC, NOTIFY_HASH, NOTIFY_KEY_MISS, NOTIFY_KEYEVENT, NOTIFY_KEYSPACE, NOTIFY_LIST,
    NOTIFY_NEW, NOTIFY_SET, NOTIFY_STREAM, NOTIFY_STRING, NOTIFY_ZSET,
};

/// One event: in database `db`, `key` saw `event` (Redis's event name).
#[derive(Clone, Debug)]
pub struct KeyEvent {
    pub db: usize,
    pub key: Bytes,
    pub event: &'static str,
}

/// The shared log (cheap to clone: every clone is the same log).
#[derive(Clone, Debug, Default)]
pub struct KeyEvents(Arc<Inner>);

#[derive(Debug, Default)]
struct Inner {
    /// `notify-keyspace-events` as Redis's class flags.
    flags: AtomicU32,
    pending: std::sync::Mutex<Vec<KeyEvent>>,
}

impl KeyEvents {
    pub fn set_flags(&self, flags: u32) {
        self.0.flags.store(flags, Ordering::Relaxed);
    }

    pub fn flags(&self) -> u32 {
        self.0.flags.load(Ordering::Relaxed)
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
        let mut pending = self.0.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.push(KeyEvent {
            db,
            key: Bytes::copy_from_slice(key),
            event,
        });
    }

    /// The events recorded since the last call, oldest first; empty (and
    /// no lock taken) while notifications are off.
    pub fn take(&self) -> Vec<KeyEvent> {
        if self.flags() == 0 {
            return Vec::new();
        }
        let mut pending = self.0.pending.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut *pending)
    }
}
