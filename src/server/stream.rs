//! The kinds of socket a client connects through, TCP, TLS over TCP (the
//! `tls-port`) and Unix domain, behind one type, so that one connection
//! code path (`server::conn`, the busy responder) serves all three.
//!
//! An enum rather than a generic connection task: the task is large and
//! generic code would be compiled once per kind, while the cost of the enum is one
//! well-predicted branch next to each system call. Only what differs
//! between the kinds lives here: binding (Redis's `anetUnixServer`: remove a
//! stale file, bind, listen, chmod to `unixsocketperm`), accepting, and the
//! addresses CLIENT LIST shows (`/path:0` for both ends of a Unix socket
//! connection, as Redis shows them). A TLS stream is a TCP stream with its
//! session (`server::tls`): reads and writes go through the session, and
//! the readiness it may hold itself (decrypted input, encrypted output
//! not yet sent) is asked for by the connection next to the socket's.

use crate::error::os_error_text;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use tokio::io::Interest;
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

use super::tls::TlsSession;
use crate::engine::ClientAddr;

/// A listening socket before the server thread's runtime takes it.
pub(crate) enum StdListener {
    Tcp(std::net::TcpListener),
    /// The `tls-port`'s.
    Tls(std::net::TcpListener),
    /// With the socket's path, the address its clients are shown with.
    Unix(std::os::unix::net::UnixListener, Arc<str>),
}

impl StdListener {
    pub fn fd(&self) -> ListenerFd {
        match self {
            StdListener::Tcp(l) => ListenerFd {
                fd: l.as_raw_fd(),
                unix_path: None,
                tls: false,
                port: l.local_addr().map_or(0, |a| a.port()),
            },
            StdListener::Tls(l) => ListenerFd {
                fd: l.as_raw_fd(),
                unix_path: None,
                tls: true,
                port: l.local_addr().map_or(0, |a| a.port()),
            },
            StdListener::Unix(l, path) => ListenerFd {
                fd: l.as_raw_fd(),
                unix_path: Some(path.clone()),
                tls: false,
                port: 0,
            },
        }
    }

    /// Registers the socket with the current runtime.
    pub fn into_tokio(self) -> io::Result<Listener> {
        Ok(match self {
            StdListener::Tcp(l) => Listener::Tcp(TcpListener::from_std(l)?, false),
            StdListener::Tls(l) => Listener::Tcp(TcpListener::from_std(l)?, true),
            StdListener::Unix(l, path) => Listener::Unix(UnixListener::from_std(l)?, path),
        })
    }
}

/// A listening socket's descriptor, for the busy responder, which accepts
/// on it while the runtime cannot.
#[derive(Clone)]
pub(crate) struct ListenerFd {
    pub fd: RawFd,
    pub unix_path: Option<Arc<str>>,
    /// Connections accepted on it speak TLS.
    pub tls: bool,
    /// The TCP port it listens on (0 for a Unix socket).
    pub port: u16,
}

impl ListenerFd {
    /// Accepts one waiting connection without blocking; None when none
    /// waits. A TLS listener's connection gets a session from `state`'s
    /// context; one it cannot get is closed.
    pub fn accept(&self, state: &crate::engine::State) -> Option<(StdStream, ClientAddr)> {
        // SAFETY: listener fds live as long as the server thread.
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(self.fd) };
        let (socket, peer) = socket2::SockRef::from(&fd).accept().ok()?;
        let (stream, peer) = match &self.unix_path {
            None if self.tls => (
                StdStream::Tls(socket.into(), TlsSession::accept(state)?),
                ClientAddr::Tcp(peer.as_socket()?),
            ),
            None => (StdStream::Tcp(socket.into()), ClientAddr::Tcp(peer.as_socket()?)),
            Some(path) => (StdStream::Unix(OwnedFd::from(socket).into()), ClientAddr::Unix(path.clone())),
        };
        stream.set_nonblocking().ok()?;
        Some((stream, peer))
    }
}

/// A listening socket on the server thread's runtime.
pub(crate) enum Listener {
    /// With whether it is the `tls-port`'s.
    Tcp(TcpListener, bool),
    Unix(UnixListener, Arc<str>),
}

impl Listener {
    /// Whether its connections speak TLS (see [`Stream::with_tls`]).
    pub fn is_tls(&self) -> bool {
        matches!(self, Listener::Tcp(_, true))
    }

    pub async fn accept(&self) -> io::Result<(Stream, ClientAddr)> {
        match self {
            Listener::Tcp(l, _) => l.accept().await.map(|(s, peer)| (Stream::Tcp(s), ClientAddr::Tcp(peer))),
            Listener::Unix(l, path) => l.accept().await.map(|(s, _)| (Stream::Unix(s), ClientAddr::Unix(path.clone()))),
        }
    }
}

/// An accepted connection before its task registers it with the runtime.
pub(crate) enum StdStream {
    Tcp(std::net::TcpStream),
    Tls(std::net::TcpStream, Rc<TlsSession>),
    Unix(std::os::unix::net::UnixStream),
}

impl StdStream {
    pub fn fd(&self) -> RawFd {
        match self {
            StdStream::Tcp(s) | StdStream::Tls(s, _) => s.as_raw_fd(),
            StdStream::Unix(s) => s.as_raw_fd(),
        }
    }

    /// The server's end, as CLIENT LIST's `laddr` shows it (a Unix
    /// socket's is the socket's path, as its peer's).
    pub fn local_addr(&self, peer: &ClientAddr) -> ClientAddr {
        match self {
            StdStream::Tcp(s) | StdStream::Tls(s, _) => s.local_addr().map_or_else(|_| peer.clone(), ClientAddr::Tcp),
            StdStream::Unix(_) => peer.clone(),
        }
    }

    /// The TLS session, for a TLS connection.
    pub fn tls(&self) -> Option<Rc<TlsSession>> {
        match self {
            StdStream::Tls(_, session) => Some(session.clone()),
            _ => None,
        }
    }

    fn set_nonblocking(&self) -> io::Result<()> {
        match self {
            StdStream::Tcp(s) | StdStream::Tls(s, _) => s.set_nonblocking(true),
            StdStream::Unix(s) => s.set_nonblocking(true),
        }
    }
}

/// A client's connected socket.
pub(crate) enum Stream {
    Tcp(TcpStream),
    Tls(TcpStream, Rc<TlsSession>),
    Unix(UnixStream),
}

impl Stream {
    /// Registers an accepted socket with the current runtime; TCP gets
    /// TCP_NODELAY, as Redis sets it.
    pub fn from_std(stream: StdStream) -> io::Result<Stream> {
        Ok(match stream {
            StdStream::Tcp(s) => {
                let s = TcpStream::from_std(s)?;
                let _ = s.set_nodelay(true);
                Stream::Tcp(s)
            }
            StdStream::Tls(s, session) => {
                let s = TcpStream::from_std(s)?;
                let _ = s.set_nodelay(true);
                Stream::Tls(s, session)
            }
            StdStream::Unix(s) => Stream::Unix(UnixStream::from_std(s)?),
        })
    }

    /// Takes the socket back from the runtime.
    pub fn into_std(self) -> io::Result<StdStream> {
        Ok(match self {
            Stream::Tcp(s) => StdStream::Tcp(s.into_std()?),
            Stream::Tls(s, session) => StdStream::Tls(s.into_std()?, session),
            Stream::Unix(s) => StdStream::Unix(s.into_std()?),
        })
    }

    /// A TCP connection accepted on the TLS port becomes a TLS one.
    pub fn with_tls(self, session: Rc<TlsSession>) -> Stream {
        match self {
            Stream::Tcp(s) => Stream::Tls(s, session),
            other => other,
        }
    }

    /// The TLS session, for a TLS connection.
    pub fn tls(&self) -> Option<&TlsSession> {
        match self {
            Stream::Tls(_, session) => Some(session),
            _ => None,
        }
    }

    /// Input can be read: the socket's, or decrypted bytes a TLS session
    /// holds already.
    pub async fn readable(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.readable().await,
            Stream::Tls(s, session) => {
                if session.has_plaintext() {
                    return Ok(());
                }
                s.readable().await
            }
            Stream::Unix(s) => s.readable().await,
        }
    }

    pub async fn writable(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) | Stream::Tls(s, _) => s.writable().await,
            Stream::Unix(s) => s.writable().await,
        }
    }

    pub fn try_read_buf<B: bytes::BufMut>(&self, buf: &mut B) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.try_read_buf(buf),
            Stream::Tls(s, session) => session.read(s, buf),
            Stream::Unix(s) => s.try_read_buf(buf),
        }
    }

    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.try_write(buf),
            Stream::Tls(s, session) => session.write(s, buf),
            Stream::Unix(s) => s.try_write(buf),
        }
    }

    /// Encrypted output a TLS session still holds for the socket.
    pub fn wants_write(&self) -> bool {
        matches!(self, Stream::Tls(_, session) if session.wants_write())
    }

    /// Sends what a TLS session holds encrypted: Ok(true) once nothing
    /// waits (always, for a plain socket).
    pub fn flush_pending(&self) -> io::Result<bool> {
        match self {
            Stream::Tls(s, session) => session.flush(s),
            _ => Ok(true),
        }
    }

    /// Moves a TLS handshake on with what the socket has (see
    /// [`TlsSession::receive`]).
    pub fn receive_handshake(&self) -> io::Result<usize> {
        match self {
            Stream::Tls(s, session) => session.receive(s),
            _ => Ok(1),
        }
    }

    /// Sends the end of the stream (a FIN on TCP, after TLS's
    /// close_notify) before the socket is closed, as dropping the write
    /// half of a split stream does.
    pub fn shutdown_write(&self) {
        let _ = match self {
            Stream::Tcp(s) => socket2::SockRef::from(s).shutdown(std::net::Shutdown::Write),
            Stream::Tls(s, session) => {
                session.close(s);
                socket2::SockRef::from(s).shutdown(std::net::Shutdown::Write)
            }
            Stream::Unix(s) => socket2::SockRef::from(s).shutdown(std::net::Shutdown::Write),
        };
    }

    /// Forgets the socket's read readiness, as a read that would block
    /// does, without the system call (see the connection's read loop).
    pub fn forget_read_readiness(&self) {
        let would_block = || Err::<(), _>(io::ErrorKind::WouldBlock.into());
        let _ = match self {
            Stream::Tcp(s) => s.try_io(Interest::READABLE, would_block),
            // A session's read returns once it has bytes, not once the
            // socket is empty: the socket may still hold records.
            Stream::Tls(..) => Ok(()),
            Stream::Unix(s) => s.try_io(Interest::READABLE, would_block),
        };
    }
}

/// Redis's `anetUnixServer` as `initServer` calls it: removes whatever is
/// at `path` (a socket left by a previous run), binds, listens, and, when
/// `perm` is not 0, sets the file's mode to it; `backlog` is
/// `tcp-backlog`, as Redis uses it for the socket too. The error text is the one
/// Redis logs after `Failed opening Unix socket: `.
pub(crate) fn bind_unix(path: &str, perm: u32, backlog: i32) -> Result<StdListener, String> {
    // sizeof(sun_path) on Linux.
    const SUN_PATH: usize = 108;
    if path.len() > SUN_PATH - 1 {
        return Err(format!("unix socket path too long ({}), must be under {SUN_PATH}", path.len()));
    }
    let _ = std::fs::remove_file(path);
    let socket = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None)
        .map_err(|e| format!("creating socket: {}", os_error_text(&e)))?;
    let addr = socket2::SockAddr::unix(path).map_err(|e| format!("bind: {}", os_error_text(&e)))?;
    socket.bind(&addr).map_err(|e| format!("bind: {}", os_error_text(&e)))?;
    socket.listen(backlog).map_err(|e| format!("listen: {}", os_error_text(&e)))?;
    if perm != 0 {
        use std::os::unix::fs::PermissionsExt;
        // Redis ignores a failed chmod too.
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(perm));
    }
    socket
        .set_nonblocking(true)
        .map_err(|e| format!("fcntl(F_SETFL,O_NONBLOCK): {}", os_error_text(&e)))?;
    let listener: std::os::unix::net::UnixListener = OwnedFd::from(socket).into();
    Ok(StdListener::Unix(listener, Arc::from(path)))
}

/// Removes the Unix socket's file at shutdown, as Redis's
/// `closeListeningSockets`; the warning's text on failure.
pub(crate) fn unlink_unix(path: &Path) -> Result<(), String> {
    std::fs::remove_file(path).map_err(|e| os_error_text(&e))
}
