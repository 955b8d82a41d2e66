//! The time source. Real wall-clock time by default; tests move it on so
//! TTLs and leases expire without sleeping, from Rust
//! ([`Clock::advance`], [`Clock::freeze`], [`Clock::resume`]) or over the
//! wire (`KEYLOCK CLOCK`).
//!
//! The engine reads the clock once per command (as Redis caches `mstime()`
//! per command), so every key a command touches is judged at one instant.
//! Time never goes backwards: it can be frozen, moved forward, and let
//! flow again from where it stands; only [`Clock::reset`] (KEYLOCK RESET)
//! goes back to real time. Moving the clock is time passing: keys whose
//! deadline it passes expire as they would in real time (when touched, or
//! by the background cycle); `KEYLOCK CLOCK ADVANCE` also expires them all
//! before it replies.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Clone, Debug, Default)]
pub struct Clock {
    inner: Arc<ClockInner>,
}

#[derive(Debug, Default)]
struct ClockInner {
    /// When non-zero, the frozen time in microseconds since the Unix epoch.
    manual_us: AtomicU64,
    /// Added to real time (microseconds) while time flows: the sum of the
    /// moves made since it last flowed from real time.
    offset_us: AtomicI64,
}

/// A time before now was asked for: time never goes backwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backwards {
    pub now_ms: u64,
}

/// The latest instant the clock can show: 2^53 ms after the epoch (year
/// 287,396), far below where microseconds overflow, and exact as a Lua
/// number.
pub const MAX_MS: u64 = 1 << 53;

impl Clock {
    /// Real time.
    pub fn real() -> Clock {
        Clock::default()
    }

    /// A clock frozen at `start_ms` until advanced.
    pub fn manual(start_ms: u64) -> Clock {
        let c = Clock::default();
        c.inner.manual_us.store(start_ms.clamp(1, MAX_MS) * 1000, Ordering::SeqCst);
        c
    }

    /// Moves time forward by `ms` (on a flowing clock, as an offset); the
    /// clock stops at [`MAX_MS`].
    pub fn advance(&self, ms: u64) {
        let room = MAX_MS.saturating_sub(self.now_ms());
        let us = ms.min(room) * 1000;
        if self.inner.manual_us.load(Ordering::SeqCst) != 0 {
            self.inner.manual_us.fetch_add(us, Ordering::SeqCst);
        } else {
            self.inner.offset_us.fetch_add(us as i64, Ordering::SeqCst);
        }
    }

    /// Stops time at `at_ms`, or where it stands if `None`. Refused for an
    /// instant before now. Returns the frozen time in ms.
    pub fn freeze(&self, at_ms: Option<u64>) -> Result<u64, Backwards> {
        let now_us = self.now_us();
        let at_us = match at_ms {
            None => now_us,
            Some(ms) if ms < now_us / 1000 => return Err(Backwards { now_ms: now_us / 1000 }),
            Some(ms) => (ms.min(MAX_MS) * 1000).max(now_us),
        };
        self.inner.manual_us.store(at_us.max(1), Ordering::SeqCst);
        Ok(at_us / 1000)
    }

    /// Lets time flow again from where it stands. Returns the time in ms.
    pub fn resume(&self) -> u64 {
        let frozen = self.inner.manual_us.load(Ordering::SeqCst);
        if frozen != 0 {
            self.inner.offset_us.store(frozen as i64 - real_us() as i64, Ordering::SeqCst);
            self.inner.manual_us.store(0, Ordering::SeqCst);
        }
        self.now_ms()
    }

    /// Back to real time, flowing (KEYLOCK RESET): the one way back.
    pub fn reset(&self) {
        self.inner.manual_us.store(0, Ordering::SeqCst);
        self.inner.offset_us.store(0, Ordering::SeqCst);
    }

    /// Whether time is stopped.
    pub fn is_frozen(&self) -> bool {
        self.inner.manual_us.load(Ordering::Relaxed) != 0
    }

    pub fn now_us(&self) -> u64 {
        let manual = self.inner.manual_us.load(Ordering::Relaxed);
        if manual != 0 {
            return manual;
        }
        (real_us() as i64 + self.inner.offset_us.load(Ordering::Relaxed)) as u64
    }

    pub fn now_ms(&self) -> u64 {
        self.now_us() / 1000
    }
}

fn real_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// A cheap monotonic counter for measuring how long commands take
/// (INFO commandstats), read twice per command.
///
/// On x86_64 it is the TSC (`rdtsc`, ~4× cheaper than a wall-clock read
/// on this project's VM: 35 vs 145 ns under load); elsewhere nanoseconds
/// from `Instant`. Ticks become microseconds only when reported, with the
/// rate measured over the process's whole life so far (ticks counted
/// against `Instant` since the first read), so no calibration delays the
/// start. Durations reported within the first 10 ms assume 1 tick/ns.
pub mod ticks {
    use std::sync::OnceLock;
    use std::time::Instant;

    fn origin() -> &'static (Instant, u64) {
        static ORIGIN: OnceLock<(Instant, u64)> = OnceLock::new();
        ORIGIN.get_or_init(|| (Instant::now(), raw()))
    }

    #[cfg(target_arch = "x86_64")]
    fn raw() -> u64 {
        // SAFETY: `rdtsc` has no preconditions on x86_64.
        unsafe { core::arch::x86_64::_rdtsc() }
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn raw() -> u64 {
        static START: OnceLock<Instant> = OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }

    /// The counter now.
    pub fn now() -> u64 {
        raw()
    }

    /// Starts the rate measurement (call once early; idempotent).
    pub fn start() {
        origin();
    }

    /// Ticks per microsecond (an `f64`'s bits), once measured over a
    /// second: from then on a conversion reads no clock (it runs for every
    /// command, to judge it against the slow log's threshold).
    static TICKS_PER_US: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

    /// `ticks` as microseconds.
    pub fn to_us(ticks: u64) -> u64 {
        use std::sync::atomic::Ordering;
        let known = TICKS_PER_US.load(Ordering::Relaxed);
        if known != 0 {
            return (ticks as f64 / f64::from_bits(known)) as u64;
        }
        let (t0, c0) = *origin();
        let ns = t0.elapsed().as_nanos() as f64;
        let counted = raw().saturating_sub(c0) as f64;
        let ticks_per_ns = if ns >= 10_000_000.0 && counted > 0.0 { counted / ns } else { 1.0 };
        if ns >= 1_000_000_000.0 && counted > 0.0 {
            TICKS_PER_US.store((ticks_per_ns * 1000.0).to_bits(), Ordering::Relaxed);
        }
        (ticks as f64 / ticks_per_ns / 1000.0) as u64
    }
}

#[cfg(test)]
mod clock_tests {
    use super::*;

    #[test]
    fn a_frozen_clock_moves_only_when_advanced_and_flows_on_from_there() {
        let c = Clock::real();
        let start = c.freeze(None).unwrap();
        assert!(c.is_frozen());
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert_eq!(c.now_ms(), start);
        c.advance(60_000);
        assert_eq!(c.now_ms(), start + 60_000);
        let resumed = c.resume();
        assert!(!c.is_frozen());
        assert!(resumed >= start + 60_000);
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert!(c.now_ms() > start + 60_000);
    }

    #[test]
    fn time_never_goes_backwards_but_reset_returns_to_real_time() {
        let c = Clock::real();
        c.advance(1_000_000);
        let now = c.freeze(None).unwrap();
        c.resume();
        assert!(matches!(c.freeze(Some(now - 10_000)), Err(Backwards { now_ms }) if now_ms >= now));
        assert_eq!(c.freeze(Some(now + 5_000)), Ok(now + 5_000));
        c.reset();
        assert!(c.now_ms() < now);
        assert!(!c.is_frozen());
    }

    #[test]
    fn the_clock_stops_at_its_last_instant() {
        let c = Clock::manual(MAX_MS - 5);
        c.advance(u64::MAX);
        assert_eq!(c.now_ms(), MAX_MS);
        assert_eq!(c.freeze(Some(u64::MAX / 1000)), Ok(MAX_MS));
    }
}
