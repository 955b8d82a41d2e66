//! A TLS connection's session: rustls's server state machine driven over
//! the connection's non-blocking socket, so that a TLS connection is read
//! and written through the same calls as a plain one (`stream::Stream`,
//! and the busy responder's reads and writes), and everything above the
//! socket (commands, pub/sub, blocking, limits, CLIENT LIST) is the same.
//!
//! The session is shared (`Rc`) by the connection's stream and its
//! `ConnIo`, so that the busy responder, which serves the connection while
//! a script runs and its task cannot, reads and writes through the same
//! session. Both sides are on the server thread and never hold the
//! session's borrow across an `.await`.
//!
//! Readiness: decrypted bytes can wait in the session after a read took
//! less than it holds, and encrypted bytes can wait to be sent after the
//! socket took less than a record; the connection asks
//! [`TlsSession::has_plaintext`] before waiting for the socket to be
//! readable and [`TlsSession::wants_write`] before deciding it has nothing
//! to write.
//!
//! The context new sessions are made from is `crate::tls`.

use std::cell::{Cell, RefCell};
use std::io::{self, BufRead, Read, Write};
use std::rc::Rc;

use bytes::BufMut;

use crate::engine::State;
use crate::tls::ClientAuth;

/// The most plaintext one write encrypts: four full records, and within
/// rustls's default 64 KB limit on unsent data.
const WRITE_CHUNK: usize = 64 * 1024;

/// A socket as the session reads and writes it, without blocking.
pub(crate) trait Transport {
    fn recv(&self, buf: &mut [u8]) -> io::Result<usize>;
    fn send(&self, buf: &[u8]) -> io::Result<usize>;
    /// Makes closing the socket reset the connection (`SO_LINGER` 0), as
    /// closing one with unread input does.
    fn reset_on_close(&self);
}

/// The connection's task: through the runtime, which notes that the
/// socket would block.
impl Transport for tokio::net::TcpStream {
    fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.try_read(buf)
    }

    fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.try_write(buf)
    }

    fn reset_on_close(&self) {
        socket2::SockRef::from(self).reset_on_close();
    }
}

/// The busy responder: the descriptor directly.
impl Transport for socket2::SockRef<'_> {
    fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        (&**self).read(buf)
    }

    fn send(&self, buf: &[u8]) -> io::Result<usize> {
        // No SIGPIPE for a peer gone, whatever the embedding process's
        // signal disposition.
        self.send_with_flags(buf, libc::MSG_NOSIGNAL)
    }

    fn reset_on_close(&self) {
        let _ = self.set_linger(Some(std::time::Duration::ZERO));
    }
}

/// `std::io` over a [`Transport`], for rustls.
struct Io<'a, T: Transport + ?Sized>(&'a T);

impl<T: Transport + ?Sized> Read for Io<'_, T> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.recv(buf)
    }
}

impl<T: Transport + ?Sized> Write for Io<'_, T> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.send(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// One TLS connection's state.
pub(crate) struct TlsSession {
    conn: RefCell<rustls::ServerConnection>,
    /// Decrypted bytes wait in the session.
    plaintext: Cell<bool>,
}

impl TlsSession {
    /// A session for a connection accepted now on the TLS port, with the
    /// context and `tls-auth-clients` in force now; None (logged) when
    /// there is none to make.
    pub fn accept(state: &State) -> Option<Rc<TlsSession>> {
        let auth = ClientAuth::of(&state.params);
        let Some(config) = state.tls.as_ref().and_then(|ctx| ctx.for_mode(auth)) else {
            crate::log::warning(format_args!(
                "Error accepting a client connection: TLS is not configured for tls-auth-clients {}",
                state.params.value("tls-auth-clients").unwrap_or("yes")
            ));
            return None;
        };
        match rustls::ServerConnection::new(config) {
            Ok(conn) => Some(Rc::new(TlsSession {
                conn: RefCell::new(conn),
                plaintext: Cell::new(false),
            })),
            Err(e) => {
                crate::log::warning(format_args!("Error accepting a client connection: {e}"));
                None
            }
        }
    }

    pub fn is_handshaking(&self) -> bool {
        self.conn.borrow().is_handshaking()
    }

    /// Encrypted bytes wait to be sent.
    pub fn wants_write(&self) -> bool {
        self.conn.borrow().wants_write()
    }

    /// Decrypted bytes wait to be read: the connection is readable
    /// whatever its socket says.
    pub fn has_plaintext(&self) -> bool {
        self.plaintext.get()
    }

    /// Reads what the socket has into the session and processes it (the
    /// handshake's messages are answered): Ok(0) when the peer closed the
    /// socket, Err(WouldBlock) when it had nothing, another error when
    /// the peer broke the protocol (the alert is sent first).
    pub fn receive<T: Transport + ?Sized>(&self, socket: &T) -> io::Result<usize> {
        let n = {
            let mut conn = self.conn.borrow_mut();
            let n = conn.read_tls(&mut Io(socket))?;
            if n == 0 {
                return Ok(0);
            }
            match conn.process_new_packets() {
                Ok(state) => self.plaintext.set(state.plaintext_bytes_to_read() > 0 || state.peer_has_closed()),
                Err(e) => {
                    if conn.is_handshaking() && matches!(e, rustls::Error::InvalidMessage(_)) {
                        // A peer whose bytes are not TLS records at all (a
                        // plain client on the TLS port) is reset without an
                        // alert, as OpenSSL leaves it: it stops reading at
                        // the first bad record, and the close of a socket
                        // with unread input resets it. The client gets an
                        // I/O error rather than an empty reply.
                        socket.reset_on_close();
                    } else {
                        let _ = conn.write_tls(&mut Io(socket));
                    }
                    return Err(io::Error::new(io::ErrorKind::InvalidData, e));
                }
            }
            n
        };
        self.flush(socket)?;
        Ok(n)
    }

    /// Sends what waits encrypted: Ok(true) once all of it went, Ok(false)
    /// when the socket took less.
    pub fn flush<T: Transport + ?Sized>(&self, socket: &T) -> io::Result<bool> {
        let mut conn = self.conn.borrow_mut();
        while conn.wants_write() {
            match conn.write_tls(&mut Io(socket)) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Reads decrypted bytes into `buf` (as many as it has room for), from
    /// the session or, when it has none, from the socket: Ok(0) at the end
    /// of the stream, Err(WouldBlock) when nothing is there yet, as a
    /// socket's read.
    pub fn read<T: Transport + ?Sized, B: BufMut>(&self, socket: &T, buf: &mut B) -> io::Result<usize> {
        loop {
            let copied = {
                let mut conn = self.conn.borrow_mut();
                let mut reader = conn.reader();
                let copied = match reader.fill_buf() {
                    Ok([]) => {
                        self.plaintext.set(false);
                        return Ok(0);
                    }
                    Ok(data) => {
                        let n = data.len().min(buf.remaining_mut());
                        buf.put_slice(&data[..n]);
                        n
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
                    Err(e) => return Err(e),
                };
                reader.consume(copied);
                let more = matches!(reader.fill_buf(), Ok(rest) if !rest.is_empty());
                self.plaintext.set(more);
                copied
            };
            if copied > 0 {
                return Ok(copied);
            }
            if self.receive(socket)? == 0 {
                return Ok(0);
            }
        }
    }

    /// Encrypts the front of `buf` and sends what the socket takes; Ok(n)
    /// for the bytes taken (some may still wait encrypted, see
    /// [`TlsSession::wants_write`]), Err(WouldBlock) while earlier ones
    /// wait.
    pub fn write<T: Transport + ?Sized>(&self, socket: &T, buf: &[u8]) -> io::Result<usize> {
        if !self.flush(socket)? {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = self.conn.borrow_mut().writer().write(&buf[..buf.len().min(WRITE_CHUNK)])?;
        if n == 0 && !buf.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        self.flush(socket)?;
        Ok(n)
    }

    /// Tells the peer the session ends (close_notify), best effort.
    pub fn close<T: Transport + ?Sized>(&self, socket: &T) {
        self.conn.borrow_mut().send_close_notify();
        let _ = self.flush(socket);
    }
}
