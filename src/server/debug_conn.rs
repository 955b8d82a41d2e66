//! The debugging client's socket, lent to a Lua debugging session
//! (`scripting::ldb`): written and read directly from the Lua hook, as
//! Redis's LDB uses the connection made blocking. Writes wait up to 5
//! seconds for the socket to take more (Redis's send timeout for a
//! session); reads wait as long as the user takes, looking every 100 ms
//! whether the server is being stopped. A TLS connection is read and
//! written through its session.
//!
//! While a synchronous session waits, the engine thread serves no one
//! else, as Redis's does not; a forked session waits in its own process.

use std::io;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use socket2::SockRef;

use super::Shared;
use super::conn::ConnIo;
use crate::scripting::ldb::{DebugConn, DebugConnector};

/// How long a write may wait for the socket.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a read waiting for input looks at the server's stop flag.
const HALT_CHECK_MS: i32 = 100;

struct DebugSocket {
    io: Rc<ConnIo>,
    halt: Arc<AtomicBool>,
}

/// The connector the engine's watchdog lends sessions through.
pub(crate) fn connector(shared: Weak<Shared>, halt: Arc<AtomicBool>) -> DebugConnector {
    Box::new(move |id| {
        let shared = shared.upgrade()?;
        let io = shared.conns.borrow().get(&id)?.clone();
        Some(Box::new(DebugSocket { io, halt: halt.clone() }) as Box<dyn DebugConn>)
    })
}

/// Waits until the socket is ready for `events` or `timeout_ms` passed;
/// false on a timeout.
fn wait(fd: std::os::fd::RawFd, events: libc::c_short, timeout_ms: i32) -> bool {
    let mut poll = libc::pollfd { fd, events, revents: 0 };
    // SAFETY: one pollfd, valid for the call.
    let ready = unsafe { libc::poll(&mut poll, 1, timeout_ms) };
    // Errors and hang-ups count as ready: the next read or write tells.
    ready != 0
}

impl DebugSocket {
    /// One attempt to move `bytes` out; Ok(n) for what the socket took.
    fn send_some(&self, sock: &SockRef, bytes: &[u8]) -> io::Result<usize> {
        match &self.io.tls {
            Some(tls) => tls.write(sock, bytes),
            None => sock.send_with_flags(bytes, libc::MSG_NOSIGNAL),
        }
    }

    /// Sends what a TLS session still holds encrypted.
    fn flushed(&self, sock: &SockRef) -> io::Result<bool> {
        match &self.io.tls {
            Some(tls) => tls.flush(sock),
            None => Ok(true),
        }
    }
}

impl DebugConn for DebugSocket {
    fn send(&mut self, bytes: &[u8]) -> bool {
        let fd = self.io.socket();
        let sock = SockRef::from(&fd);
        let deadline = Instant::now() + SEND_TIMEOUT;
        let mut sent = 0;
        loop {
            let step = if sent < bytes.len() {
                self.send_some(&sock, &bytes[sent..]).map(|n| {
                    sent += n;
                    false
                })
            } else {
                self.flushed(&sock)
            };
            match step {
                Ok(true) => return true,
                Ok(false) if sent < bytes.len() => continue,
                Ok(false) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return false,
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || !wait(self.io.fd, libc::POLLOUT, left.as_millis().max(1) as i32) {
                return false;
            }
        }
    }

    fn recv(&mut self, buf: &mut [u8]) -> usize {
        let fd = self.io.socket();
        let sock = SockRef::from(&fd);
        loop {
            if self.halt.load(Ordering::Relaxed) {
                return 0;
            }
            let read = match &self.io.tls {
                Some(tls) => tls.read(&sock, &mut &mut buf[..]),
                None => io::Read::read(&mut &*sock, buf),
            };
            match read {
                Ok(n) => return n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    wait(self.io.fd, libc::POLLIN, HALT_CHECK_MS);
                }
                Err(_) => return 0,
            }
        }
    }
}
