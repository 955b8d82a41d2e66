//! redis-server's process contract, the parts an init system or a test
//! harness relies on: `--version`'s line, `daemonize` (Redis's
//! `daemonize()`: one fork, `setsid`, standard streams to /dev/null), and
//! `supervised` (systemd's readiness notification on `NOTIFY_SOCKET`, and
//! upstart's stop-to-signal-ready).
//!
//! The binary calls these around the server's start; the server itself
//! (pid file, Unix socket, log lines) is in `server`. [`daemonize`] must run
//! while the process has a single thread: before any tokio runtime, signal
//! thread or server thread exists.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::log;

/// Set once systemd supervises the process: shutdown tells it `STOPPING=1`.
static SYSTEMD: AtomicBool = AtomicBool::new(false);

/// `redis-server --version`'s line, as Redis prints it (`v=`, `sha=`,
/// `malloc=`, `bits=`, `build=`), then keylock's own version as one more
/// `name=value` field, which parsers of Redis's line skip.
pub fn version_line() -> String {
    // Redis's build id is a hash of its version and build; keylock's is
    // the same kind of stable hex digest, of its own version.
    let digest = sha1_smol::Sha1::from(format!("keylock {}", crate::VERSION)).digest().to_string();
    format!(
        "Redis server v={} sha=00000000:0 malloc=mimalloc bits=64 build={} keylock={}",
        crate::REDIS_VERSION,
        &digest[..16],
        crate::VERSION
    )
}

/// How the process is supervised, once `supervised` has been checked
/// against the environment (Redis's `redisIsSupervised`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Supervision {
    None,
    Upstart,
    Systemd,
}

/// Redis's `redisIsSupervised`: `auto` picks upstart or systemd from the
/// environment; upstart stops the process (SIGSTOP) to tell upstart it is
/// ready; systemd is told the server is loading. A mode whose environment
/// is missing logs a warning and leaves the process unsupervised.
pub fn supervise(mode: &str) -> Supervision {
    let mode = match mode {
        "auto" if std::env::var_os("UPSTART_JOB").is_some() => {
            log::verbose(format_args!("Upstart supervision detected."));
            "upstart"
        }
        "auto" if std::env::var_os("NOTIFY_SOCKET").is_some() => {
            log::verbose(format_args!("Systemd supervision detected."));
            "systemd"
        }
        other => other,
    };
    match mode {
        "upstart" => {
            if std::env::var_os("UPSTART_JOB").is_none() {
                log::warning(format_args!("upstart supervision requested, but UPSTART_JOB not found!"));
                return Supervision::None;
            }
            log::notice(format_args!("supervised by upstart, will stop to signal readiness."));
            // SAFETY: raise has no memory effects; the process stops until
            // upstart continues it.
            unsafe {
                libc::raise(libc::SIGSTOP);
            }
            Supervision::Upstart
        }
        "systemd" => {
            if notify_systemd("STATUS=Redis is loading...\n") <= 0 {
                return Supervision::None;
            }
            log::notice(format_args!(
                "Supervised by systemd. Please make sure you set appropriate values for TimeoutStartSec and TimeoutStopSec in your service unit."
            ));
            SYSTEMD.store(true, Ordering::Relaxed);
            Supervision::Systemd
        }
        _ => Supervision::None,
    }
}

/// The server is shutting down: systemd, if it supervises the process,
/// is told so (Redis's `prepareForShutdown`).
pub fn stopping() {
    if SYSTEMD.load(Ordering::Relaxed) {
        notify_systemd("STOPPING=1\n");
    }
}

/// Redis's `redisCommunicateSystemd` (libsystemd's `sd_notify`): sends
/// `message` to the socket named by `NOTIFY_SOCKET` (a path, or an
/// abstract name after `@`). 1 once sent; 0 (with Redis's warning) when
/// there is no such socket; a negative errno when sending failed.
pub fn notify_systemd(message: &str) -> i32 {
    let Some(target) = std::env::var_os("NOTIFY_SOCKET") else {
        log::warning(format_args!("systemd supervision error: NOTIFY_SOCKET not found!"));
        return 0;
    };
    let sent = std::os::unix::net::UnixDatagram::unbound().and_then(|socket| {
        use std::os::unix::ffi::OsStrExt;
        let bytes = target.as_bytes();
        let addr = match bytes.strip_prefix(b"@") {
            Some(name) => {
                use std::os::linux::net::SocketAddrExt;
                std::os::unix::net::SocketAddr::from_abstract_name(name)?
            }
            None => std::os::unix::net::SocketAddr::from_pathname(&target)?,
        };
        socket.send_to_addr(message.as_bytes(), &addr)
    });
    match sent {
        Ok(_) => 1,
        Err(e) => {
            let code = -e.raw_os_error().unwrap_or(libc::EINVAL);
            log::warning(format_args!("systemd supervision error: sd_notify: {code}"));
            code
        }
    }
}

/// Redis's `daemonize()`: the parent exits with status 0 at once, the
/// child starts a new session and its standard streams go to /dev/null
/// (so a log on stdout is lost, as with Redis). The caller must still be
/// single-threaded.
pub fn daemonize() {
    // SAFETY: called before any thread is started (see the module doc),
    // so the child is a complete copy of the process; the parent only
    // exits, and the child calls async-signal-safe functions.
    unsafe {
        match libc::fork() {
            0 => {}
            -1 => {
                log::warning(format_args!(
                    "Can't fork to daemonize: {}",
                    crate::error::os_error_text(&std::io::Error::last_os_error())
                ));
                return;
            }
            _ => libc::_exit(0),
        }
        libc::setsid();
        let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR, 0);
        if fd != -1 {
            libc::dup2(fd, libc::STDIN_FILENO);
            libc::dup2(fd, libc::STDOUT_FILENO);
            libc::dup2(fd, libc::STDERR_FILENO);
            if fd > libc::STDERR_FILENO {
                libc::close(fd);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_line_parses_as_redis_servers() {
        let line = version_line();
        let fields: Vec<&str> = line.split(' ').collect();
        assert_eq!(&fields[..3], ["Redis", "server", "v=7.0.15"]);
        assert!(fields[3].starts_with("sha=") && fields[5] == "bits=64", "{line}");
        assert!(
            fields[6]
                .strip_prefix("build=")
                .is_some_and(|h| h.chars().all(|c| c.is_ascii_hexdigit()))
        );
        assert_eq!(fields[7], format!("keylock={}", crate::VERSION));
    }
}
