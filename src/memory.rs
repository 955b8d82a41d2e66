//! Memory accounting for INFO: an allocator wrapper that counts live heap
//! bytes (installed by the `keylock` binary), and the process's resident
//! set size and CPU times from /proc.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

static USED: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting bytes in use.
pub struct CountingAlloc;

unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwards the caller's layout contract to the system allocator.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            USED.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) };
        USED.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

fn installed() -> bool {
    USED.load(Ordering::Relaxed) != 0
}

/// Live heap bytes if the counting allocator is installed, else the RSS.
/// Also records the peak (sampled here and by the engine's cron, not on
/// every allocation, to keep allocation cheap).
pub fn used_bytes() -> u64 {
    if !installed() {
        return rss_bytes();
    }
    let used = USED.load(Ordering::Relaxed);
    PEAK.fetch_max(used, Ordering::Relaxed);
    used as u64
}

pub fn peak_bytes() -> u64 {
    if installed() {
        PEAK.load(Ordering::Relaxed).max(USED.load(Ordering::Relaxed)) as u64
    } else {
        rss_bytes()
    }
}

/// Resident set size from /proc/self/statm.
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// (user, system) CPU seconds of this process, from /proc/self/stat.
pub fn cpu_times() -> (f64, f64) {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return (0.0, 0.0);
    };
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) / 100.0;
    (ticks(11), ticks(12))
}
