//! One client connection: read, split into commands, run the batch on the
//! engine, write the replies.
//!
//! A connection reads and executes what its client sends while its unread
//! replies stay under `limits::PIPELINE_HOLD` (32 MB), so that a client
//! that sends without reading is served as Redis serves it until then, and
//! held back by its own unread replies past it. Its output is the client's outbox (`engine::output`), where the engine
//! appends replies and pushes (pub/sub messages, MONITOR lines) and wakes
//! this task to write them. Where a limit of `server::limits` would close
//! the connection (a client that has not authenticated, an output buffer
//! limit of its class) it is read on while replies wait, so that the limit,
//! not the client, decides; a client the engine closed for its limits is
//! closed at its next wake-up without writing what it was owed.
//!
//! The read buffer and parser live in a [`ConnIo`], with the outbox,
//! registered with the server, not on this task's stack: while a script
//! runs past `busy-reply-threshold` this task cannot run, and the busy
//! responder (`server::busy`) reads and answers this connection's commands
//! itself, continuing exactly where this task's parsing stopped and
//! appending to the same output buffer, which both write from its front.
//! No `RefCell` borrow of a `ConnIo` is held across an `.await`.
//!
//! The read buffer is Redis's query buffer (see `parser` for its sizes):
//! the connection notes its peak and the second of its last read or write
//! (the server's cached second, no clock read), the cron
//! ([`ConnIo::resize_input`], from `Shared::cron`) resizes it as Redis's
//! `clientsCronResizeQueryBuffer` does, and its size is reported to the
//! outbox for CLIENT LIST (`qbuf`, `qbuf-free`) before each batch (the
//! whole input, as Redis holds the commands it runs) and after it. All of
//! it is a few stores per batch.
//!
//! A TLS connection (`tls-port`) is registered and counted as a client
//! when accepted, as Redis creates its client before the handshake; its
//! task completes the handshake first (a failure is logged as Redis logs
//! it, `Error accepting a client connection: …`, and closes it), then
//! serves it as any other: its stream decrypts and encrypts (see
//! `stream`, `tls`), and a session can hold input or output of its own,
//! which the loop below asks for next to the socket's readiness.

use std::cell::{Cell, RefCell};
use std::os::fd::RawFd;
use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use tokio::sync::watch;

use super::Shared;
use super::limits::NetLimits;
use super::parser::{Limits, READ_CHUNK, RequestParser, resize_in_cron, rewind};
use super::stream::{StdStream, Stream};
use super::tls::TlsSession;
use crate::engine::output::OutputBuffer;
use crate::engine::{ClientAddr, CloseRequest, Outbox};
use crate::log;

/// What the busy responder decided about a connection's end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Closing {
    Open,
    /// Close once the output is written (a protocol error, QUIT).
    AfterReply,
    /// Closed: its output was dropped and its socket shut down.
    Now,
}

/// A connection's input and output buffers and what the busy responder
/// needs to reach it.
pub(crate) struct ConnIo {
    pub id: u64,
    pub fd: RawFd,
    /// A TLS connection's session, which the busy responder reads and
    /// writes through too.
    pub tls: Option<Rc<TlsSession>>,
    pub input: RefCell<BytesMut>,
    pub parser: RefCell<RequestParser>,
    /// Commands the client sent after a blocking command that parked it,
    /// and the protocol error that ended their batch, if any: they run
    /// once it is unblocked.
    pub pending: RefCell<Pending>,
    /// The most the read buffer held since the cron's previous pass
    /// (Redis's `querybuf_peak`).
    pub input_peak: Cell<usize>,
    /// The server second of the connection's last read or write (Redis's
    /// `lastinteraction`, as the read buffer's cron resize uses it).
    pub last_io_secs: Cell<u64>,
    pub authenticated: Cell<bool>,
    pub closing: Cell<Closing>,
    /// The output: replies and pushes the socket has not taken yet.
    pub outbox: Outbox,
}

/// A connection accepted but whose task has not started.
pub(crate) struct Accepted {
    pub stream: StdStream,
    pub peer: ClientAddr,
    pub io: Rc<ConnIo>,
    /// Whether the engine took it as a client (see [`Accepted::admit`]);
    /// None until decided.
    pub admitted: Option<bool>,
}

impl Accepted {
    pub fn new(shared: &Shared, stream: StdStream, peer: ClientAddr) -> Accepted {
        let id = shared.next_client_id.get();
        shared.next_client_id.set(id + 1);
        if log::enabled(log::Level::Verbose) {
            match &peer {
                ClientAddr::Tcp(addr) => log::verbose(format_args!("Accepted {addr}")),
                ClientAddr::Unix(path) => log::verbose(format_args!("Accepted connection to {path}")),
            }
        }
        let io = Rc::new(ConnIo {
            id,
            fd: stream.fd(),
            tls: stream.tls(),
            // Both buffers are allocated when first needed: an idle
            // connection holds none.
            input: RefCell::new(BytesMut::new()),
            parser: RefCell::new(RequestParser::default()),
            pending: RefCell::new((Vec::new(), None)),
            input_peak: Cell::new(0),
            last_io_secs: Cell::new(shared.unix_secs.get()),
            // Set when the engine admits it.
            authenticated: Cell::new(false),
            closing: Cell::new(Closing::Open),
            outbox: Outbox::new(),
        });
        Accepted {
            stream,
            peer,
            io,
            admitted: None,
        }
    }

    /// Registers the connection as a client of the engine, or refuses it
    /// with Redis's error when `maxclients` are connected (the error is
    /// queued; the task sends it and closes). True if admitted.
    pub fn admit(&mut self, shared: &Shared, state: &mut crate::engine::State) -> bool {
        if let Some(admitted) = self.admitted {
            return admitted;
        }
        let admitted = shared.connected.get() < state.runtime.maxclients;
        if admitted && state.protected_from(&self.peer) {
            // Redis's protected mode: no password, and not from this host.
            shared.conns.borrow_mut().remove(&self.io.id);
            state.stats.rejected_connections += 1;
            self.io.output().borrow_mut().extend_from_slice(PROTECTED_MODE_DENIED);
            self.admitted = Some(false);
            return false;
        }
        if admitted {
            shared.connected.set(shared.connected.get() + 1);
            self.io.authenticated.set(!state.runtime.auth_required);
            state.connect(
                self.io.id,
                self.peer.clone(),
                self.stream.local_addr(&self.peer),
                self.io.outbox.clone(),
            );
        } else {
            shared.conns.borrow_mut().remove(&self.io.id);
            let refusal: &[u8] = if state.cluster_enabled() {
                b"-ERR max number of clients + cluster connections reached\r\n"
            } else {
                b"-ERR max number of clients reached\r\n"
            };
            self.io.output().borrow_mut().extend_from_slice(refusal);
        }
        self.admitted = Some(admitted);
        admitted
    }
}

/// What a client refused by protected mode is told, Redis's text.
const PROTECTED_MODE_DENIED: &[u8] = b"-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

impl ConnIo {
    /// The request size limits for this connection now.
    pub fn request_limits(&self, limits: &NetLimits) -> Limits {
        Limits {
            proto_max_bulk_len: limits.proto_max_bulk_len,
            authenticated: self.authenticated.get(),
        }
    }

    /// After a read: the read buffer's peak and the time of the last
    /// interaction move on (the server's cached second: no clock read).
    pub fn note_read(&self, shared: &Shared) {
        self.input_peak.set(self.input_peak.get().max(self.input.borrow().len()));
        self.last_io_secs.set(shared.unix_secs.get());
    }

    /// Tells the engine the read buffer's size now (CLIENT LIST's `qbuf`
    /// and `qbuf-free`). While a big argument arrives, the buffer counts
    /// as holding room for all of it: Redis allocates that room when the
    /// argument is announced (keylock grows the buffer as it arrives, so
    /// announcing a big argument costs nothing), and its `tot-mem` and
    /// client eviction count it.
    pub fn report_input(&self) {
        let input = self.input.borrow();
        let mut free = input.capacity() - input.len();
        if let Some(len) = self.parser.borrow().big_arg_pending() {
            free = free.max((len + 2).saturating_sub(input.len()));
        }
        self.outbox.report_query_buffer(input.len(), free);
        let (count, bytes) = self.parser.borrow().pending_args();
        self.outbox.report_partial_request(count, bytes);
    }

    /// The cron's pass over the read buffer (see `parser::resize_in_cron`).
    pub fn resize_input(&self, now_secs: u64) {
        let pending = self.parser.borrow().pending_bulk();
        let idle = now_secs.saturating_sub(self.last_io_secs.get());
        let peak = resize_in_cron(&mut self.input.borrow_mut(), self.input_peak.get(), idle, pending);
        self.input_peak.set(peak);
        self.report_input();
    }

    /// The replies and pushes the socket has not taken yet.
    pub fn output(&self) -> &RefCell<OutputBuffer> {
        self.outbox.buffer()
    }

    /// The unwritten output at which this connection is not read again
    /// until it drains (see [`NetLimits::hold_at`]).
    pub fn hold_at(&self, limits: &NetLimits, busy: bool) -> usize {
        limits.hold_at(self.outbox.class(), self.authenticated.get(), busy)
    }

    /// Ends the connection from outside its task (the busy responder, the
    /// cron): the client sees it closed at once, and the task, wherever it
    /// waits, wakes to a socket that is shut and finishes.
    pub fn shut_down(&self) {
        // A forked debugging session answers on it now (SCRIPT DEBUG YES).
        if !self.outbox.handed_over() {
            let _ = socket2::SockRef::from(&self.socket()).shutdown(std::net::Shutdown::Both);
        }
    }

    /// The connection's socket, for use outside its task (the busy
    /// responder, the cron, a batch writing the clients it woke).
    pub fn socket(&self) -> std::os::fd::BorrowedFd<'_> {
        // SAFETY: the fd belongs to a connection still registered in
        // `Shared::conns` (callers reach the `ConnIo` through it); its task
        // removes it from there before the socket closes, and cannot run
        // while the caller does (same thread).
        unsafe { std::os::fd::BorrowedFd::borrow_raw(self.fd) }
    }
}

/// Starts tasks for connections the busy responder accepted.
pub(crate) fn spawn_busy_accepted(shared: &Rc<Shared>) {
    let accepted: Vec<Accepted> = shared.busy_accepted.borrow_mut().drain(..).collect();
    for a in accepted {
        tokio::task::spawn_local(run(a, shared.clone()));
    }
}

pub(crate) async fn serve(stream: Stream, peer: ClientAddr, shared: Rc<Shared>) {
    match stream.into_std() {
        Ok(std_stream) => {
            let accepted = Accepted::new(&shared, std_stream, peer);
            shared.conns.borrow_mut().insert(accepted.io.id, accepted.io.clone());
            run(accepted, shared).await
        }
        Err(e) => tracing::warn!(error = %e, "could not take over an accepted socket"),
    }
}

/// Completes a TLS connection's handshake (at once for others). Err with
/// the reason to log, or an empty one when the server is closing or the
/// connection was closed from outside meanwhile.
async fn handshake(io: &ConnIo, stream: &Stream, stop: &mut watch::Receiver<bool>) -> Result<(), String> {
    let Some(session) = stream.tls() else { return Ok(()) };
    while session.is_handshaking() {
        // Closed by the busy responder, or by the engine (CLIENT KILL,
        // the idle `timeout`).
        if io.closing.get() == Closing::Now || io.outbox.close_request() != CloseRequest::Open {
            return Err(String::new());
        }
        let wants_write = session.wants_write();
        tokio::select! {
            ready = stream.writable(), if wants_write => {
                ready.map_err(|e| e.to_string())?;
                stream.flush_pending().map_err(|e| e.to_string())?;
            }
            ready = stream.readable(), if !wants_write => {
                ready.map_err(|e| e.to_string())?;
                match stream.receive_handshake() {
                    Ok(0) => return Err("Connection closed by peer during TLS handshake".into()),
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e.to_string()),
                }
            }
            // The busy responder moved it on, or closed it.
            _ = io.outbox.woken() => {}
            _ = stop.changed() => return Err(String::new()),
        }
    }
    // A wake-up the loop above took may have been for input or output
    // the busy responder left: the connection's loop sees to them.
    io.outbox.wake();
    Ok(())
}

/// What processing the input asks of the connection.
enum Next {
    Continue,
    /// Write what is owed, then close.
    CloseAfterReply,
    /// Close without writing (a limit was exceeded).
    CloseNow,
}

async fn run(mut accepted: Accepted, shared: Rc<Shared>) {
    let admitted = accepted.admit(&shared, &mut shared.engine.borrow_mut().state);
    let Accepted { stream, io, .. } = accepted;
    let id = io.id;
    let Ok(stream) = Stream::from_std(stream) else {
        shared.conns.borrow_mut().remove(&id);
        if admitted {
            shared.connected.set(shared.connected.get() - 1);
            shared.engine.borrow_mut().disconnect(id);
        }
        return;
    };
    /// Detaches the socket from the outbox before the socket closes,
    /// however the task ends (declared after it: dropped first).
    struct Detach<'a>(&'a Outbox);
    impl Drop for Detach<'_> {
        fn drop(&mut self) {
            self.0.detach_socket();
        }
    }
    io.outbox.attach_socket(io.fd);
    let detach = Detach(&io.outbox);
    let mut stop = shared.closing.subscribe();
    if let Err(e) = handshake(&io, &stream, &mut stop).await {
        if !e.is_empty() {
            log::warning(format_args!("Error accepting a client connection: {e}"));
        }
        shared.conns.borrow_mut().remove(&id);
        if admitted {
            shared.engine.borrow_mut().disconnect(id);
            shared.connected.set(shared.connected.get() - 1);
        }
        return;
    }
    if !admitted {
        flush(&io, &stream, &shared).await;
        stream.shutdown_write();
        return;
    }

    loop {
        match io.closing.get() {
            Closing::Open => {}
            Closing::AfterReply => {
                flush(&io, &stream, &shared).await;
                break;
            }
            Closing::Now => break,
        }
        match io.outbox.close_request() {
            CloseRequest::Open => {}
            CloseRequest::AfterWrite => {
                flush(&io, &stream, &shared).await;
                break;
            }
            CloseRequest::Now => break,
        }
        let unwritten = io.outbox.unwritten();
        let read_on = unwritten < io.hold_at(&shared.limits.get(), false);
        // Output a DELAY fault holds back waits for its time, and output
        // waiting for the disk for its sync, not the socket.
        let held = io.output().borrow_mut().held_until();
        let disk_wait = io.output().borrow_mut().gate(&shared.durability);
        let blocked_until = io.outbox.blocked().flatten();
        let next = tokio::select! {
            biased;
            _ = io.outbox.woken() => {
                // Output was queued, a close asked for, a busy script
                // ended (commands the busy responder left unanswered, held
                // back by their unread replies, run now), or the client
                // was unblocked (what it sent after the blocking command
                // runs now).
                if io.input.borrow().is_empty() && io.pending.borrow().0.is_empty() {
                    Next::Continue
                } else {
                    process_input(&io, &shared).await
                }
            }
            _ = sleep_until_instant(blocked_until), if blocked_until.is_some() => {
                // A blocking command's timeout.
                shared.engine.borrow_mut().time_out_blocked(io.id);
                process_input(&io, &shared).await
            }
            ready = stream.writable(), if (unwritten > 0 || stream.wants_write()) && held.is_none() && disk_wait.is_none() => {
                if ready.is_err() {
                    break;
                }
                Next::Continue
            }
            _ = sleep_until_instant(held), if held.is_some() => Next::Continue,
            _ = wait_synced(&shared, disk_wait) , if disk_wait.is_some() => Next::Continue,
            ready = stream.readable(), if read_on => {
                if ready.is_err() {
                    break;
                }
                let (read, room) = {
                    let mut input = io.input.borrow_mut();
                    let parser = io.parser.borrow();
                    parser.make_room(&mut input);
                    // One read takes at most 16 KB, as Redis's
                    // (PROTO_IOBUF_LEN), unless a big argument is arriving:
                    // what it parses between reads, and so when an inline
                    // line is too long, is then the same.
                    let room = input.capacity() - input.len();
                    let room = if parser.big_arg_pending().is_some() { room } else { room.min(READ_CHUNK) };
                    (stream.try_read_buf(&mut bytes::BufMut::limit(&mut *input, room)), room)
                };
                if let Ok(n) = read
                    && n > 0
                {
                    shared.net.read(n);
                }
                match read {
                    Ok(0) => {
                        if log::enabled(log::Level::Verbose) {
                            let info = shared.engine.borrow().client_info(id).unwrap_or_default();
                            log::verbose(format_args!("Client closed connection {info}"));
                        }
                        break;
                    }
                    Ok(n) if n < room => {
                        // A short read emptied the socket: forget its
                        // readiness now, as a WouldBlock would, instead of
                        // paying a second read to learn it (edge-triggered
                        // epoll reports the next arrival; the runtime only
                        // polls it once this task yields, so none is lost).
                        stream.forget_read_readiness();
                    }
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                    Err(_) => break,
                }
                io.note_read(&shared);
                if over_query_buffer_limit(&io, &shared) {
                    break;
                }
                if shared.limits.get().evicts_clients {
                    // Client eviction counts what arrived (Redis's
                    // `updateClientMemUsage` after a read).
                    io.report_input();
                    shared.engine.borrow_mut().state.account_client_by_id(io.id);
                    if io.outbox.close_request() == CloseRequest::Now {
                        break;
                    }
                }
                process_input(&io, &shared).await
            }
            _ = stop.changed() => break,
        };
        match next {
            Next::Continue => {}
            Next::CloseAfterReply => {
                flush(&io, &stream, &shared).await;
                break;
            }
            Next::CloseNow => break,
        }
        // Write what the socket takes now; the rest waits for it to be
        // writable while the connection is read on or held back.
        if try_flush(&io, &stream, &shared).is_err() {
            break;
        }
    }
    shared.conns.borrow_mut().remove(&id);
    if !io.outbox.handed_over() {
        stream.shutdown_write();
    }
    drop(detach);
    drop(stream);
    shared.engine.borrow_mut().disconnect(id);
    shared.connected.set(shared.connected.get() - 1);
}

/// Runs every complete command in the input. A password-protected
/// server's batch ends after each command that can change the client's
/// authentication, so that the rest is parsed under the request limits
/// that then apply, as Redis parses each command after the previous ran.
async fn process_input(io: &ConnIo, shared: &Rc<Shared>) -> Next {
    loop {
        if io.outbox.blocked().is_some() {
            // A blocked client runs nothing; its input waits (Redis reads
            // on, so a closed connection is noticed).
            return Next::Continue;
        }
        let limits = shared.limits.get();
        let split_on_auth = limits.auth_required;
        // While its batch runs, the client's read buffer shows as it was
        // before parsing, as Redis's holds the commands it runs; once they
        // ran, what is left of it (a partial request).
        io.report_input();
        let pending = std::mem::take(&mut *io.pending.borrow_mut());
        let (batch, protocol_error, more) = if pending.0.is_empty() && pending.1.is_none() {
            parse_batch(io, io.request_limits(&limits), split_on_auth)
        } else {
            // What came after a blocking command runs first.
            let more = pending.1.is_none();
            (pending.0, pending.1, more)
        };
        let mut next = Next::Continue;
        if batch.is_empty() {
            io.report_input();
        } else {
            shared.running_client.set(Some(io.id));
            let result = shared.engine.borrow_mut().run_batch_capped(io.id, batch, true);
            shared.running_client.set(None);
            shared.note_time(result.now_ms);
            io.report_input();
            io.authenticated.set(result.authenticated);
            shared.after_batch();
            if shared.engine.borrow().shutdown_requested() {
                // Refused from now on, before this client sees its
                // connection close.
                shared.stop_listening();
                shared.stop.send_replace(true);
            }
            if result.over_output_limit {
                return Next::CloseNow;
            }
            if result.close {
                next = Next::CloseAfterReply;
            }
            write_woken(shared, &result.woken);
            if io.outbox.blocked().is_some() && matches!(next, Next::Continue) {
                *io.pending.borrow_mut() = (result.rest, protocol_error);
                return Next::Continue;
            }
        }
        if let Some(text) = protocol_error {
            if matches!(next, Next::Continue) {
                crate::reply::put_error(io.output().borrow_mut().tail(), &text);
                // Counted in INFO errorstats as Redis counts every error reply.
                shared.engine.borrow_mut().state.stats.count_error_text(&text);
            }
            return Next::CloseAfterReply;
        }
        if !matches!(next, Next::Continue) || !more {
            return next;
        }
        // Let the other connections run between the parts of a long input.
        tokio::task::yield_now().await;
    }
}

/// Writes the replies of the clients a batch woke (served by its writes
/// or CLIENT UNBLOCKed) before the batch's own client is written, as Redis
/// writes the client whose output came last first: a woken client's reply
/// is what the other side of a queue waits for, and writing it here saves
/// the hop to its connection's task. A client with commands waiting after
/// its blocking one is left to its task, which runs them and writes all
/// the replies together; so is what a socket does not take (every woken
/// client's task was woken too).
pub(crate) fn write_woken(shared: &Shared, woken: &[u64]) {
    for id in woken {
        let Some(io) = shared.conns.borrow().get(id).cloned() else {
            continue;
        };
        if io.closing.get() != Closing::Open || io.outbox.close_request() != CloseRequest::Open {
            continue;
        }
        if !io.pending.borrow().0.is_empty() || !io.input.borrow().is_empty() {
            // It has more to run: its task writes the replies together.
            continue;
        }
        // A failure is its task's to find and act on.
        let _ = super::busy::send_output(shared, &io, &socket2::SockRef::from(&io.socket()));
    }
}

/// What a blocked client sent after its blocking command: the commands,
/// and the protocol error that ended their batch, if any.
pub(crate) type Pending = (Vec<Vec<Bytes>>, Option<Vec<u8>>);

/// After a read: Redis closes a client whose unparsed input passed
/// `client-query-buffer-limit`, and logs it with the first bytes.
fn over_query_buffer_limit(io: &ConnIo, shared: &Shared) -> bool {
    if io.input.borrow().len() <= shared.limits.get().query_buffer_limit {
        return false;
    }
    io.report_input();
    let input = io.input.borrow();
    let info = shared.engine.borrow().client_info(io.id).unwrap_or_default();
    log::warning(format_args!(
        "Closing client that reached max query buffer length: {info} (qbuf initial bytes: {})",
        crate::engine::repr(&input[..input.len().min(64)])
    ));
    true
}

/// Writes what the socket takes now without waiting: Ok(true) once the
/// output is empty, Ok(false) if some is left, Err if the connection is gone.
fn try_flush(io: &ConnIo, writer: &Stream, shared: &Shared) -> Result<bool, ()> {
    let mut output = io.output().borrow_mut();
    while !output.is_empty() {
        if output.held_until().is_some() {
            return Ok(false);
        }
        output.gate(&shared.durability);
        if output.front().is_empty() {
            // Waiting for the disk.
            return Ok(false);
        }
        match writer.try_write(output.front()) {
            Ok(n) => {
                shared.net.wrote(n);
                output.advance(n);
                io.last_io_secs.set(shared.unix_secs.get());
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(false),
            Err(_) => return Err(()),
        }
    }
    output.written();
    // What a TLS session holds encrypted.
    writer.flush_pending().map_err(|_| ())
}

/// Waits until output waiting for `upto` bytes of the append-only file
/// may go; never returns for `None`.
async fn wait_synced(shared: &Shared, upto: Option<u64>) {
    match upto {
        Some(upto) => shared.durability.wait_synced(upto).await,
        None => std::future::pending().await,
    }
}

/// Sleeps until `at` (held-back output may go, a blocking command times
/// out); never returns for `None`.
async fn sleep_until_instant(held: Option<std::time::Instant>) {
    match held {
        Some(until) => tokio::time::sleep_until(until.into()).await,
        None => std::future::pending().await,
    }
}

/// Writes the whole output, waiting for the socket; false if the
/// connection is gone, or the engine closed it for its output limits
/// meanwhile.
async fn flush(io: &ConnIo, writer: &Stream, shared: &Shared) -> bool {
    loop {
        match try_flush(io, writer, shared) {
            Ok(true) => return true,
            Ok(false) => {}
            Err(()) => return false,
        }
        let held = io.output().borrow_mut().held_until();
        let disk_wait = io.output().borrow_mut().gate(&shared.durability);
        tokio::select! {
            ready = writer.writable(), if held.is_none() && disk_wait.is_none() => if ready.is_err() {
                return false;
            },
            _ = sleep_until_instant(held), if held.is_some() => {}
            _ = wait_synced(shared, disk_wait), if disk_wait.is_some() => {}
            _ = io.outbox.woken() => if io.outbox.close_request() == CloseRequest::Now {
                return false;
            },
        }
    }
}

/// The complete commands at the front of the input, the protocol error
/// that ended parsing, if any (the commands before it still run, as in
/// Redis), and whether complete commands may remain (the batch ended
/// early after a command that can change authentication).
pub(crate) fn parse_batch(io: &ConnIo, limits: Limits, split_on_auth: bool) -> (Vec<Vec<Bytes>>, Option<Vec<u8>>, bool) {
    let mut parser = io.parser.borrow_mut();
    let mut input = io.input.borrow_mut();
    let mut batch = Vec::new();
    loop {
        match parser.next(&mut input, limits) {
            Ok(Some(cmd)) => {
                let ends_batch = split_on_auth && may_change_authentication(&cmd);
                batch.push(cmd);
                if ends_batch {
                    let more = !input.is_empty();
                    return (batch, None, more);
                }
            }
            Ok(None) => {
                rewind(&mut input);
                return (batch, None, false);
            }
            Err(e) => return (batch, Some(e.reply_text()), false),
        }
    }
}

/// AUTH and HELLO … AUTH authenticate; RESET makes the client
/// unauthenticated again.
fn may_change_authentication(argv: &[Bytes]) -> bool {
    let name = &argv[0];
    name.eq_ignore_ascii_case(b"auth") || name.eq_ignore_ascii_case(b"hello") || name.eq_ignore_ascii_case(b"reset")
}
