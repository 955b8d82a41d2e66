//! Redis's server log: the lines redis-server writes to stdout or to its
//! `logfile`, in its format, filtered by `loglevel`.
//!
//! A line is `pid:role dd Mon yyyy hh:mm:ss.mmm level message`, with the
//! role `C` until the server is initialized (Redis prints its first lines
//! before `server.pid` is set, so they carry the child's letter) and `M`
//! after, and the level one of `.` debug, `-` verbose, `*` notice,
//! `#` warning (Redis's `serverLogRaw`). Harnesses wait for these lines
//! (`Ready to accept connections`) and operators read them, so the texts
//! that Redis prints are Redis's, word for word, in the same places.
//!
//! The log belongs to the process, as Redis's does: the binary
//! [`install`]s it (stdout, or a file opened for each line so that it can
//! be rotated, as Redis does). A library embedding keylock installs
//! nothing, and the same messages go to `tracing` (target `keylock::log`)
//! instead, so the in-process test double prints nothing of its own.
//! keylock's own diagnostics stay on `tracing` (`KEYLOCK_LOG`), on stderr.
//!
//! Nothing here is on a command's path: the callers are start-up,
//! shutdown, connections opening and closing (verbose, checked with one
//! atomic load), and clients closed for their limits.

use std::fmt;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

/// Redis's log levels (`loglevel`), lowest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Debug = 0,
    Verbose = 1,
    Notice = 2,
    Warning = 3,
}

impl Level {
    /// The `loglevel` value's level (`debug`, `verbose`, `notice`, `warning`).
    pub fn from_name(name: &str) -> Option<Level> {
        Some(match name.to_ascii_lowercase().as_str() {
            "debug" => Level::Debug,
            "verbose" => Level::Verbose,
            "notice" => Level::Notice,
            "warning" => Level::Warning,
            _ => return None,
        })
    }

    fn mark(self) -> char {
        ['.', '-', '*', '#'][self as usize]
    }
}

/// Where the installed log writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Stdout,
    /// Opened for appending for each line, as Redis does.
    File(PathBuf),
}

static INSTALLED: AtomicBool = AtomicBool::new(false);
static VERBOSITY: AtomicU8 = AtomicU8::new(Level::Notice as u8);
static SERVER_STARTED: AtomicBool = AtomicBool::new(false);
static REPLICA: AtomicBool = AtomicBool::new(false);
/// Nothing is written (a forked child, see [`silence`]).
static SILENT: AtomicBool = AtomicBool::new(false);
static TARGET: Mutex<Target> = Mutex::new(Target::Stdout);

/// Makes this process's log Redis's: lines at `level` and above go to
/// `target` in Redis's format. Called again, it changes both.
pub fn install(target: Target, level: Level) {
    *TARGET.lock().unwrap_or_else(|e| e.into_inner()) = target;
    VERBOSITY.store(level as u8, Ordering::Relaxed);
    INSTALLED.store(true, Ordering::Release);
}

/// `CONFIG SET loglevel`.
pub fn set_level(level: Level) {
    VERBOSITY.store(level as u8, Ordering::Relaxed);
}

/// Writes nothing from now on: in a forked child, whose parent's other
/// threads may have held the log's lock (or the tracing subscriber's) at
/// the fork, which nothing would release.
pub fn silence() {
    SILENT.store(true, Ordering::Relaxed);
}

/// The server is initialized: later lines carry the role `M`.
pub fn server_started() {
    SERVER_STARTED.store(true, Ordering::Relaxed);
}

/// The server became a replica (lines carry the role `S`), or a master
/// again (`M`).
pub fn set_replica(replica: bool) {
    REPLICA.store(replica, Ordering::Relaxed);
}

/// Whether a line at `level` would be written; check it before building
/// an expensive message.
pub fn enabled(level: Level) -> bool {
    if SILENT.load(Ordering::Relaxed) {
        return false;
    }
    if INSTALLED.load(Ordering::Acquire) {
        return level as u8 >= VERBOSITY.load(Ordering::Relaxed);
    }
    match level {
        Level::Warning => tracing::enabled!(target: "keylock::log", tracing::Level::WARN),
        Level::Notice => tracing::enabled!(target: "keylock::log", tracing::Level::INFO),
        Level::Verbose => tracing::enabled!(target: "keylock::log", tracing::Level::DEBUG),
        Level::Debug => tracing::enabled!(target: "keylock::log", tracing::Level::TRACE),
    }
}

/// Writes one line at `level` (Redis's `serverLog`).
pub fn log(level: Level, message: fmt::Arguments) {
    if SILENT.load(Ordering::Relaxed) {
        return;
    }
    if !INSTALLED.load(Ordering::Acquire) {
        match level {
            Level::Warning => tracing::warn!(target: "keylock::log", "{message}"),
            Level::Notice => tracing::info!(target: "keylock::log", "{message}"),
            Level::Verbose => tracing::debug!(target: "keylock::log", "{message}"),
            Level::Debug => tracing::trace!(target: "keylock::log", "{message}"),
        }
        return;
    }
    if (level as u8) < VERBOSITY.load(Ordering::Relaxed) {
        return;
    }
    let role = match (SERVER_STARTED.load(Ordering::Relaxed), REPLICA.load(Ordering::Relaxed)) {
        (false, _) => 'C',
        (true, false) => 'M',
        (true, true) => 'S',
    };
    let line = format!("{}:{role} {} {} {message}\n", std::process::id(), timestamp(), level.mark());
    write_line(line.as_bytes());
}

/// Writes `text` as it is, without the line prefix, at `level` (Redis's
/// `LL_RAW`, used for its start-up banner).
pub fn raw(level: Level, text: &str) {
    if SILENT.load(Ordering::Relaxed) {
        return;
    }
    if !INSTALLED.load(Ordering::Acquire) {
        tracing::info!(target: "keylock::log", "{text}");
        return;
    }
    if (level as u8) < VERBOSITY.load(Ordering::Relaxed) {
        return;
    }
    write_line(text.as_bytes());
}

pub fn warning(message: fmt::Arguments) {
    log(Level::Warning, message);
}

pub fn notice(message: fmt::Arguments) {
    log(Level::Notice, message);
}

pub fn verbose(message: fmt::Arguments) {
    log(Level::Verbose, message);
}

pub fn debug(message: fmt::Arguments) {
    log(Level::Debug, message);
}

/// A warning in the format Redis's signal handlers write
/// (`serverLogFromHandler`: `pid:signal-handler (unix-time) message`),
/// for the line a stop signal leaves.
pub fn from_signal_handler(message: &str) {
    if SILENT.load(Ordering::Relaxed) {
        return;
    }
    if !INSTALLED.load(Ordering::Acquire) {
        tracing::warn!(target: "keylock::log", "{message}");
        return;
    }
    if (Level::Warning as u8) < VERBOSITY.load(Ordering::Relaxed) {
        return;
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let line = format!("{}:signal-handler ({now}) {message}\n", std::process::id());
    write_line(line.as_bytes());
}

fn write_line(line: &[u8]) {
    let target = TARGET.lock().unwrap_or_else(|e| e.into_inner());
    match &*target {
        Target::Stdout => {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(line);
            let _ = out.flush();
        }
        Target::File(path) => {
            if let Ok(mut file) = std::fs::OpenOptions::new().append(true).create(true).open(path) {
                let _ = file.write_all(line);
            }
        }
    }
}

/// `dd Mon yyyy hh:mm:ss.mmm` in local time (Redis's
/// `strftime("%d %b %Y %H:%M:%S.")` plus milliseconds, C locale).
fn timestamp() -> String {
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs() as libc::time_t;
    // SAFETY: localtime_r writes only into `tm`, which is a plain C struct
    // for which all-zero bytes are a valid value.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&secs, &mut tm).is_null() {
            return format!("{secs}.{:03}", now.subsec_millis());
        }
        tm
    };
    format!(
        "{:02} {} {} {:02}:{:02}:{:02}.{:03}",
        tm.tm_mday,
        MONTHS[tm.tm_mon.clamp(0, 11) as usize],
        tm.tm_year + 1900,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        now.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_read_as_redis_writes_them() {
        let t = timestamp();
        // "25 Nov 2026 15:46:15.500"
        let parts: Vec<&str> = t.split(' ').collect();
        assert_eq!(parts.len(), 4, "{t}");
        assert_eq!(parts[0].len(), 2, "{t}");
        assert_eq!(parts[1].len(), 3, "{t}");
        assert_eq!(parts[3].len(), "15:46:15.500".len(), "{t}");
    }

    #[test]
    fn levels_are_named_as_loglevel_values() {
        assert_eq!(Level::from_name("VERBOSE"), Some(Level::Verbose));
        assert_eq!(Level::from_name("warning").map(Level::mark), Some('#'));
        assert_eq!(Level::from_name("loud"), None);
    }
}
