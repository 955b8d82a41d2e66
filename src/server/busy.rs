//! Serving other clients while a script runs past `busy-reply-threshold`,
//! as Redis's `processEventsWhileBlocked` does.
//!
//! The engine and the connections share one thread, so while a script runs
//! no connection task can. The Lua hook calls [`respond`] periodically once
//! the script is over the threshold; it reads every other connection's
//! socket directly (non-blocking), parses with that connection's own parser
//! state, and answers: `BUSY …` for ordinary commands, SCRIPT KILL
//! (`+OK`, or `UNKILLABLE …` once the script has written) and SHUTDOWN
//! NOSAVE. Replies go straight to the socket unless the connection task is
//! itself mid-write, in which case they queue in its outbox.
//!
//! Connections that arrive while a script is busy are accepted here too and
//! answered the same way; their tasks start when the script ends.

use std::mem::MaybeUninit;
use std::os::fd::BorrowedFd;
use std::rc::Weak;

use bytes::{Bytes, BytesMut};
use socket2::SockRef;

use super::Shared;
use super::conn::{ConnIo, parse_batch};
use super::parser::Limits;
use crate::commands::table::{Registry, flag};
use crate::error::CmdError;
use crate::scripting::{BusyAction, BusyScript};

const BUSY: &str = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
const UNKILLABLE: &str = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";

/// One pass over every connection but the one running the script.
pub(crate) fn respond(shared: &Weak<Shared>, script: &BusyScript) -> Option<BusyAction> {
    let shared = shared.upgrade()?;
    accept_waiting(&shared);
    let running = shared.running_client.get();
    let conns: Vec<_> = shared.conns.borrow().values().filter(|c| Some(c.id) != running).cloned().collect();
    let mut action = None;
    for io in conns {
        if let Some(a) = serve_one(&io, script) {
            // Shutdown wins over a plain kill.
            if action != Some(BusyAction::Shutdown) {
                action = Some(a);
            }
        }
    }
    action
}

/// Accepts connections waiting on the listeners; they are answered BUSY
/// like the others and get their own task once the script is over.
fn accept_waiting(shared: &Shared) {
    for &fd in &shared.listener_fds {
        // SAFETY: listener fds live as long as the server thread.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let listener = SockRef::from(&fd);
        while let Ok((socket, peer)) = listener.accept() {
            let Some(peer) = peer.as_socket() else { continue };
            let stream: std::net::TcpStream = socket.into();
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            let accepted = super::conn::Accepted::new(shared, stream, peer);
            shared.conns.borrow_mut().insert(accepted.io.id, accepted.io.clone());
            shared.busy_accepted.borrow_mut().push(accepted);
        }
    }
}

fn serve_one(io: &ConnIo, script: &BusyScript) -> Option<BusyAction> {
    // SAFETY: the fd belongs to a connection still registered in `conns`;
    // its task removes it from the registry before the socket closes, and
    // that task cannot run while we are here (same thread).
    let fd = unsafe { BorrowedFd::borrow_raw(io.fd) };
    let sock = SockRef::from(&fd);
    let mut closed = false;
    {
        let mut input = io.input.borrow_mut();
        let mut chunk = [MaybeUninit::<u8>::uninit(); 16 * 1024];
        loop {
            match sock.recv(&mut chunk) {
                Ok(0) => {
                    closed = true;
                    break;
                }
                Ok(n) => {
                    // SAFETY: recv initialized the first n bytes.
                    let bytes = unsafe { std::slice::from_raw_parts(chunk.as_ptr() as *const u8, n) };
                    input.extend_from_slice(bytes);
                }
                Err(_) => break,
            }
        }
    }
    let limits = Limits {
        proto_max_bulk_len: io.proto_max_bulk_len.get(),
        authenticated: io.authenticated.get(),
    };
    // AUTH is answered BUSY here: authentication cannot change mid-input.
    let (batch, protocol_error, _) = parse_batch(io, limits, false);
    let mut out = BytesMut::new();
    let mut action = None;
    let mut close = closed;
    for argv in batch {
        let (reply, a, close_after) = busy_reply(io, &argv, script);
        match reply {
            BusyReply::Ok => out.extend_from_slice(b"+OK\r\n"),
            BusyReply::Error(text) => {
                out.extend_from_slice(b"-");
                out.extend_from_slice(text.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            BusyReply::Nothing => {}
        }
        action = action.or(a);
        if close_after {
            close = true;
            break;
        }
    }
    if let Some(text) = protocol_error {
        out.extend_from_slice(b"-");
        out.extend_from_slice(text.as_bytes());
        out.extend_from_slice(b"\r\n");
        close = true;
    }
    if !out.is_empty() {
        send_or_queue(io, &sock, out.freeze());
    }
    if close {
        io.outbox.close();
    }
    action
}

enum BusyReply {
    Ok,
    Error(String),
    Nothing,
}

/// The answer to one command while a script is busy: the reply, what to
/// ask of the script, and whether to close the connection afterwards.
fn busy_reply(io: &ConnIo, argv: &[Bytes], script: &BusyScript) -> (BusyReply, Option<BusyAction>, bool) {
    let registry = Registry::get();
    let Some(mut cmd) = registry.lookup(&argv[0]) else {
        return (BusyReply::Error(CmdError::unknown_command(argv).0.into_owned()), None, false);
    };
    if cmd.spec.handler.is_none() && argv.len() > 1 {
        match cmd.subcommand(&argv[1]) {
            Some(sub) => cmd = sub,
            None => {
                return (
                    BusyReply::Error(CmdError::unknown_subcommand(&argv[1], cmd.spec.name).0.into_owned()),
                    None,
                    false,
                );
            }
        }
    }
    if !cmd.spec.arity_ok(argv.len()) {
        return (BusyReply::Error(CmdError::arity(&cmd.full_name).0.into_owned()), None, false);
    }
    if !io.authenticated.get() && !cmd.spec.has(flag::NO_AUTH) {
        return (BusyReply::Error(CmdError::noauth().0.into_owned()), None, false);
    }
    match cmd.full_name.as_str() {
        "script|kill" => {
            if script.killable {
                (BusyReply::Ok, Some(BusyAction::Kill), false)
            } else {
                (BusyReply::Error(UNKILLABLE.into()), None, false)
            }
        }
        "shutdown" => {
            let nosave = argv[1..].iter().any(|a| a.eq_ignore_ascii_case(b"nosave"));
            if nosave || script.killable {
                (BusyReply::Nothing, Some(BusyAction::Shutdown), true)
            } else {
                (BusyReply::Error(UNKILLABLE.into()), None, false)
            }
        }
        "quit" => (BusyReply::Ok, None, true),
        _ => (BusyReply::Error(BUSY.into()), None, false),
    }
}

/// Writes now if the socket takes it; what it doesn't take (or everything,
/// if the connection's task is mid-write) goes to the outbox, ahead of
/// anything the task writes next.
fn send_or_queue(io: &ConnIo, sock: &SockRef, data: Bytes) {
    if io.writing.get() {
        io.outbox.push(data);
        return;
    }
    match sock.send(&data) {
        Ok(n) if n == data.len() => {}
        Ok(n) => {
            io.outbox.push(data.slice(n..));
        }
        Err(_) => {
            io.outbox.push(data);
        }
    }
}
