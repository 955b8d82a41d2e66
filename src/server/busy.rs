//! Serving other clients while a script runs past `busy-reply-threshold`,
//! as Redis's `processEventsWhileBlocked` does.
//!
//! The engine and the connections share one thread, so while a script runs
//! no connection task can. The Lua hook calls [`respond`] periodically once
//! the script is over the threshold, with the engine state; it reads every
//! other connection's socket directly (non-blocking), parses with that
//! connection's own parser state, and hands each command to the engine
//! (`State::serve_while_busy`), which checks it as any client's command:
//! `BUSY …` for ordinary commands, while those flagged `allow-busy` run
//! (AUTH, HELLO, MULTI, WATCH, SCRIPT KILL — `UNKILLABLE …` once the script
//! has written —, SHUTDOWN NOSAVE, QUIT…). Replies go to the connection's
//! output buffer, the one its task writes from, and as much of it as the
//! socket takes is written at once.
//!
//! As in Redis, a malformed request gets one protocol error and the
//! connection is closed once that reply is written; it is not read again.
//! Each pass reads at most [`READS_PER_PASS`] times from a connection (Redis
//! runs up to four event-loop iterations per call). What a connection may
//! hold is bounded (`server::limits`): the query buffer limit and the
//! output limits close it, and one that keeps sending without reading is
//! not read again while [`BUSY_HOLD`](super::limits::BUSY_HOLD) bytes of
//! its replies wait, unless a limit will close it first; the commands it
//! sent stay in the kernel's buffers, and it resumes once it reads.
//!
//! A TLS connection is served the same way through its session (the one
//! its task uses, `server::tls`): reads decrypt (and move a handshake on),
//! writes encrypt, and encrypted bytes the socket did not take wait in the
//! session for its task.
//!
//! Connections that arrive while a script is busy are accepted here too,
//! registered with the engine, and answered the same way; their tasks
//! start when the script ends, and the
//! tasks of connections served here are woken then to write what they are
//! owed and run what they sent that was not answered.

use std::rc::Weak;

use socket2::SockRef;

use super::Shared;
use super::conn::{Closing, ConnIo};
use super::limits::NetLimits;
use crate::engine::{CloseRequest, State};
use crate::reply::put_error;
use crate::scripting::{BusyAction, BusyScript};

/// Reads from one connection in one pass, at most.
const READS_PER_PASS: usize = 4;

/// One pass over every connection but the one running the script.
pub(crate) fn respond(shared: &Weak<Shared>, script: Option<&BusyScript>, state: &mut State) -> Option<BusyAction> {
    let shared = shared.upgrade()?;
    // Reads and writes here are stamped with the time of this pass, as
    // Redis's `processEventsWhileBlocked` refreshes its cached time.
    shared.note_time(shared.clock.now_ms());
    accept_waiting(&shared, state);
    let running = shared.running_client.get();
    let conns: Vec<_> = shared.conns.borrow().values().filter(|c| Some(c.id) != running).cloned().collect();
    let mut action = None;
    for io in conns {
        if let Some(a) = serve_one(&shared, &io, script, state) {
            // Shutdown wins over a plain kill.
            if action != Some(BusyAction::Shutdown) {
                action = Some(a);
            }
        }
    }
    action
}

/// Accepts connections waiting on the listeners; they become clients of
/// the engine now, are served like the others, and get their own task
/// once the script is over.
fn accept_waiting(shared: &Shared, state: &mut State) {
    let listeners = shared.listener_fds.borrow().clone();
    for listener in &listeners {
        while let Some((stream, peer)) = listener.accept(state) {
            let mut accepted = super::conn::Accepted::new(shared, stream, peer);
            shared.conns.borrow_mut().insert(accepted.io.id, accepted.io.clone());
            accepted.admit(shared, state);
            shared.busy_accepted.borrow_mut().push(accepted);
        }
    }
}

/// What reading a connection's socket once gave.
enum Read {
    Data,
    /// Nothing more for now.
    Empty,
    /// The client closed, or the connection failed.
    Gone,
}

fn serve_one(shared: &Shared, io: &ConnIo, script: Option<&BusyScript>, state: &mut State) -> Option<BusyAction> {
    let fd = io.socket();
    let sock = SockRef::from(&fd);
    match io.closing.get() {
        Closing::Open => {}
        Closing::AfterReply => {
            if send_output(shared, io, &sock) != Sent::Partly {
                io.shut_down();
            }
            return None;
        }
        Closing::Now => return None,
    }
    if io.outbox.close_request() == CloseRequest::Now {
        // A script's pushes took it over its output limits.
        close_now(shared, io);
        return None;
    }
    if send_output(shared, io, &sock) == Sent::Failed {
        // The client is gone.
        close_now(shared, io);
        return None;
    }
    if io.outbox.blocked().is_some() || !io.pending.borrow().0.is_empty() {
        // A blocked client's commands wait for it to be unblocked (Redis
        // parses nothing for it); one just unblocked runs what it sent
        // first, in its own task.
        return None;
    }
    let limits = shared.limits.get();
    let mut action = None;
    let mut reads = 0;
    loop {
        if io.outbox.unwritten() >= io.hold_at(&limits, true) {
            // Held back by its unread replies.
            break;
        }
        let parsed = {
            let mut input = io.input.borrow_mut();
            io.parser.borrow_mut().next(&mut input, io.request_limits(&limits))
        };
        match parsed {
            Ok(Some(argv)) => {
                let served = state.serve_while_busy(io.id, argv, script);
                io.authenticated.set(served.authenticated);
                action = action.or(served.action);
                if action == Some(BusyAction::Shutdown) {
                    // Refused from now on, before this client sees its
                    // connection close.
                    shared.stop_listening();
                }
                if let Some(argv) = served.postponed {
                    // Held by CLIENT PAUSE: nothing more is read for it.
                    io.pending.borrow_mut().0.push(argv);
                    break;
                }
                if served.close {
                    io.closing.set(Closing::AfterReply);
                    break;
                }
                if over_output_limit(shared, io, &limits) {
                    crate::engine::log_output_limit(&format!("id={}", io.id), true);
                    close_now(shared, io);
                    return action;
                }
            }
            Ok(None) => {
                if reads == READS_PER_PASS {
                    break;
                }
                reads += 1;
                match read_once(shared, io, &sock) {
                    Read::Data => {
                        io.note_read(shared);
                        if over_query_buffer_limit(io, &limits) {
                            close_now(shared, io);
                            return action;
                        }
                    }
                    Read::Empty => break,
                    Read::Gone => {
                        close_now(shared, io);
                        return action;
                    }
                }
            }
            Err(e) => {
                let text = e.reply_text();
                put_error(io.output().borrow_mut().tail(), &text);
                state.stats.count_error_text(&text);
                io.closing.set(Closing::AfterReply);
                break;
            }
        }
    }
    match send_output(shared, io, &sock) {
        Sent::All if io.closing.get() == Closing::AfterReply => io.shut_down(),
        Sent::Failed => {
            close_now(shared, io);
            return action;
        }
        _ => {}
    }
    touched(shared, io);
    action
}

/// Past the reply buffer of a client that has not authenticated, or the
/// output limits of its class (see `engine::output`).
fn over_output_limit(shared: &Shared, io: &ConnIo, limits: &NetLimits) -> bool {
    if !io.authenticated.get() {
        return io.outbox.unwritten() > io.outbox.reply_buffer_size();
    }
    let obuf = io.outbox.obuf_bytes();
    obuf > 0
        && limits
            .output
            .reached(io.outbox.class(), obuf, io.outbox.soft_since(), shared.clock.now_ms() / 1000)
}

fn over_query_buffer_limit(io: &ConnIo, limits: &NetLimits) -> bool {
    let input = io.input.borrow();
    if input.len() <= limits.query_buffer_limit {
        return false;
    }
    crate::log::warning(format_args!(
        "Closing client that reached max query buffer length: id={} (qbuf initial bytes: {})",
        io.id,
        crate::engine::repr(&input[..input.len().min(64)])
    ));
    true
}

/// Closes a connection at once, dropping what it was owed.
fn close_now(shared: &Shared, io: &ConnIo) {
    io.outbox.close_now();
    io.closing.set(Closing::Now);
    io.shut_down();
    touched(shared, io);
}

/// Its task must be woken when the script is over.
fn touched(shared: &Shared, io: &ConnIo) {
    let pending = !io.output().borrow().is_empty()
        || !io.input.borrow().is_empty()
        || io.tls.as_ref().is_some_and(|t| t.wants_write() || t.has_plaintext());
    if pending || io.closing.get() != Closing::Open {
        let mut touched = shared.busy_touched.borrow_mut();
        if !touched.contains(&io.id) {
            touched.push(io.id);
        }
    }
}

/// Reads once from the socket into the connection's input.
fn read_once(shared: &Shared, io: &ConnIo, sock: &SockRef) -> Read {
    let mut input = io.input.borrow_mut();
    io.parser.borrow().make_room(&mut input);
    if let Some(tls) = &io.tls {
        let room = input.capacity() - input.len();
        return match tls.read(sock, &mut bytes::BufMut::limit(&mut *input, room)) {
            Ok(0) => Read::Gone,
            Ok(n) => {
                shared.net.read(n);
                Read::Data
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Read::Empty,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Read::Empty,
            Err(_) => Read::Gone,
        };
    }
    let len = input.len();
    match sock.recv(input.spare_capacity_mut()) {
        Ok(0) => Read::Gone,
        Ok(n) => {
            // SAFETY: recv initialized the first n bytes of the spare capacity.
            unsafe { input.set_len(len + n) };
            shared.net.read(n);
            Read::Data
        }
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Read::Empty,
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Read::Empty,
        Err(_) => Read::Gone,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sent {
    All,
    Partly,
    Failed,
}

/// Writes what the socket takes from the front of the output.
pub(crate) fn send_output(shared: &Shared, io: &ConnIo, sock: &SockRef) -> Sent {
    let mut out = io.output().borrow_mut();
    while !out.is_empty() {
        if out.held_until().is_some() {
            // Held back by a DELAY fault: written once the script ends.
            return Sent::Partly;
        }
        out.gate(&shared.durability);
        if out.front().is_empty() {
            // Waiting for the disk: written once the sync is done.
            return Sent::Partly;
        }
        let sent = match &io.tls {
            Some(tls) => tls.write(sock, out.front()),
            None => sock.send_with_flags(out.front(), libc::MSG_NOSIGNAL),
        };
        match sent {
            Ok(n) => {
                shared.net.wrote(n);
                out.advance(n);
                io.last_io_secs.set(shared.unix_secs.get());
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Sent::Partly,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Sent::Failed,
        }
    }
    match io.tls.as_ref().map(|tls| tls.flush(sock)) {
        Some(Ok(false)) => Sent::Partly,
        Some(Err(_)) => Sent::Failed,
        _ => Sent::All,
    }
}
