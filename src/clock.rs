//! The time source. Real wall-clock time by default; tests may take manual
//! control so TTLs and leases expire without sleeping.
//!
//! The engine reads the clock once per command (as Redis caches `mstime()`
//! per command), so every key a command touches is judged at one instant.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Clone, Debug, Default)]
pub struct Clock {
    inner: Arc<ClockInner>,
}

#[derive(Debug, Default)]
struct ClockInner {
    /// When non-zero, the manual time in microseconds since the Unix epoch.
    manual_us: AtomicU64,
    /// Added to real time (microseconds), for `advance` on a real clock.
    offset_us: AtomicI64,
}

impl Clock {
    /// Real time.
    pub fn real() -> Clock {
        Clock::default()
    }

    /// A clock frozen at `start_ms` until advanced.
    pub fn manual(start_ms: u64) -> Clock {
        let c = Clock::default();
        c.inner.manual_us.store(start_ms.max(1) * 1000, Ordering::SeqCst);
        c
    }

    /// Moves time forward by `ms` (on a real clock, as an offset).
    pub fn advance(&self, ms: u64) {
        if self.inner.manual_us.load(Ordering::SeqCst) != 0 {
            self.inner.manual_us.fetch_add(ms * 1000, Ordering::SeqCst);
        } else {
            self.inner.offset_us.fetch_add(ms as i64 * 1000, Ordering::SeqCst);
        }
    }

    pub fn now_us(&self) -> u64 {
        let manual = self.inner.manual_us.load(Ordering::Relaxed);
        if manual != 0 {
            return manual;
        }
        let real = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0);
        (real as i64 + self.inner.offset_us.load(Ordering::Relaxed)) as u64
    }

    pub fn now_ms(&self) -> u64 {
        self.now_us() / 1000
    }
}
