//! One client connection: read, split into commands, run the batch on the
//! engine, write the replies.
//!
//! A connection reads, executes and writes in turn, so a client that sends
//! without reading is held back by its own unread replies, as with Redis.
//! Pushes (pub/sub messages, MONITOR lines) arrive through the client's
//! outbox and are written as they come.
//!
//! The read buffer and parser live in a [`ConnIo`] registered with the
//! server, not on this task's stack: while a script runs past
//! `busy-reply-threshold` this task cannot run, and the busy responder
//! (`server::busy`) reads and answers this connection's commands itself,
//! continuing exactly where this task's parsing stopped.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::Shared;
use super::parser::{Limits, RequestParser, release_if_idle};
use crate::engine::{Outbound, Outbox};

/// An output buffer larger than this is given back once written.
const IDLE_OUTPUT_MAX: usize = 64 * 1024;

/// A connection's input side and what the busy responder needs to reach it.
pub(crate) struct ConnIo {
    pub id: u64,
    pub fd: RawFd,
    pub input: RefCell<BytesMut>,
    pub parser: RefCell<RequestParser>,
    pub authenticated: Cell<bool>,
    /// The bulk length limit in force when this connection last read.
    pub proto_max_bulk_len: Cell<i64>,
    /// This task is inside a write: nobody else may write to the socket now.
    pub writing: Cell<bool>,
    pub outbox: Outbox,
}

/// A connection accepted but whose task has not started: its input side,
/// outbox and receiving end.
pub(crate) struct Accepted {
    pub stream: std::net::TcpStream,
    pub peer: SocketAddr,
    pub io: Rc<ConnIo>,
    rx: mpsc::UnboundedReceiver<Outbound>,
    pending: Arc<AtomicUsize>,
}

impl Accepted {
    pub fn new(shared: &Shared, stream: std::net::TcpStream, peer: SocketAddr) -> Accepted {
        let id = shared.next_client_id.get();
        shared.next_client_id.set(id + 1);
        let (tx, rx) = mpsc::unbounded_channel();
        let pending = Arc::new(AtomicUsize::new(0));
        let io = Rc::new(ConnIo {
            id,
            fd: stream.as_raw_fd(),
            // Allocated when the first bytes arrive: an idle connection
            // holds no read buffer.
            input: RefCell::new(BytesMut::new()),
            parser: RefCell::new(RequestParser::default()),
            authenticated: Cell::new(!shared.auth_required.get()),
            proto_max_bulk_len: Cell::new(shared.proto_max_bulk_len.get()),
            writing: Cell::new(false),
            outbox: Outbox::new(tx, pending.clone()),
        });
        Accepted {
            stream,
            peer,
            io,
            rx,
            pending,
        }
    }
}

/// Starts tasks for connections the busy responder accepted.
pub(crate) fn spawn_busy_accepted(shared: &Rc<Shared>) {
    let accepted: Vec<Accepted> = shared.busy_accepted.borrow_mut().drain(..).collect();
    for a in accepted {
        tokio::task::spawn_local(run(a, shared.clone()));
    }
}

pub(crate) async fn serve(stream: TcpStream, peer: SocketAddr, shared: Rc<Shared>) {
    match stream.into_std() {
        Ok(std_stream) => {
            let accepted = Accepted::new(&shared, std_stream, peer);
            shared.conns.borrow_mut().insert(accepted.io.id, accepted.io.clone());
            run(accepted, shared).await
        }
        Err(e) => tracing::warn!(error = %e, "could not take over an accepted socket"),
    }
}

async fn run(accepted: Accepted, shared: Rc<Shared>) {
    let Accepted {
        stream,
        peer,
        io,
        mut rx,
        pending,
    } = accepted;
    let id = io.id;
    let Ok(stream) = TcpStream::from_std(stream) else {
        shared.conns.borrow_mut().remove(&id);
        return;
    };
    let _ = stream.set_nodelay(true);
    let local = stream.local_addr().unwrap_or(peer);
    let (reader, mut writer) = stream.into_split();

    if shared.connected.get() >= shared.engine.borrow().state.runtime.maxclients {
        shared.conns.borrow_mut().remove(&id);
        let _ = writer.write_all(b"-ERR max number of clients reached\r\n").await;
        return;
    }
    shared.connected.set(shared.connected.get() + 1);
    shared.engine.borrow_mut().connect(id, peer, local, io.outbox.clone());
    let mut stop = shared.stop.subscribe();
    let mut output = BytesMut::new();

    loop {
        tokio::select! {
            biased;
            msg = rx.recv() => {
                let Some(msg) = msg else { break };
                let mut close = false;
                let mut next = Some(msg);
                while let Some(msg) = next.take() {
                    match msg {
                        Outbound::Push(data) => {
                            pending.fetch_sub(data.len(), Ordering::Relaxed);
                            output.put_slice(&data);
                        }
                        Outbound::Close => close = true,
                    }
                    if close || output.len() > 1 << 20 {
                        break;
                    }
                    next = rx.try_recv().ok();
                }
                if !write_out(&io, &mut writer, &mut output).await || close {
                    break;
                }
            }
            ready = reader.readable() => {
                if ready.is_err() {
                    break;
                }
                let (read, room) = {
                    let mut input = io.input.borrow_mut();
                    io.parser.borrow().make_room(&mut input);
                    let room = input.capacity() - input.len();
                    (reader.try_read_buf(&mut *input), room)
                };
                match read {
                    Ok(0) => break,
                    Ok(n) if n < room => {
                        // A short read emptied the socket: forget its
                        // readiness now, as a WouldBlock would, instead of
                        // paying a second read to learn it (edge-triggered
                        // epoll reports the next arrival; the runtime only
                        // polls it once this task yields, so none is lost).
                        let _ = reader.as_ref().try_io(Interest::READABLE, || Err::<(), _>(std::io::ErrorKind::WouldBlock.into()));
                    }
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                    Err(_) => break,
                }
                if over_query_buffer_limit(&io, &shared) {
                    break;
                }
                io.proto_max_bulk_len.set(shared.proto_max_bulk_len.get());
                let mut close = false;
                loop {
                    let limits = Limits { proto_max_bulk_len: io.proto_max_bulk_len.get(), authenticated: io.authenticated.get() };
                    let (batch, protocol_error, more) = parse_batch(&io, limits, shared.auth_required.get());
                    if !batch.is_empty() {
                        shared.running_client.set(Some(id));
                        let result = shared.engine.borrow_mut().run_batch(id, batch, &mut output);
                        shared.running_client.set(None);
                        io.authenticated.set(result.authenticated);
                        close = result.close;
                        shared.after_batch();
                    }
                    if let Some(text) = protocol_error
                        && !close
                    {
                        output.put_slice(b"-");
                        output.put_slice(text.as_bytes());
                        output.put_slice(b"\r\n");
                        close = true;
                    }
                    if close || !more {
                        break;
                    }
                }
                if !write_out(&io, &mut writer, &mut output).await {
                    break;
                }
                if shared.engine.borrow().shutdown_requested() {
                    shared.stop.send_replace(true);
                }
                if close {
                    break;
                }
            }
            _ = stop.changed() => break,
        }
    }
    shared.conns.borrow_mut().remove(&id);
    let _ = writer.shutdown().await;
    shared.engine.borrow_mut().disconnect(id);
    shared.connected.set(shared.connected.get() - 1);
}

/// After a read: Redis closes a client whose unparsed input passed
/// `client-query-buffer-limit`, without a reply, and logs it with the
/// first bytes.
fn over_query_buffer_limit(io: &ConnIo, shared: &Shared) -> bool {
    let input = io.input.borrow();
    if input.len() <= shared.query_buffer_limit.get() {
        return false;
    }
    let info = shared.engine.borrow().client_info(io.id).unwrap_or_default();
    tracing::warn!(
        "Closing client that reached max query buffer length: {info} (qbuf initial bytes: {})",
        crate::engine::repr(&input[..input.len().min(64)])
    );
    true
}

/// Writes and clears `output`; false if the connection is gone.
async fn write_out(io: &ConnIo, writer: &mut tokio::net::tcp::OwnedWriteHalf, output: &mut BytesMut) -> bool {
    if output.is_empty() {
        return true;
    }
    io.writing.set(true);
    let ok = writer.write_all(output).await.is_ok();
    io.writing.set(false);
    output.clear();
    if output.capacity() > IDLE_OUTPUT_MAX {
        *output = BytesMut::new();
    }
    ok
}

/// The complete commands at the front of the input, the protocol error
/// that ended parsing, if any (the commands before it still run, as in
/// Redis), and whether complete commands may remain. On a
/// password-protected server (`split_on_auth`) the batch ends after each
/// command that can change the client's authentication, so that the rest
/// is parsed under the request limits that then apply, as Redis parses
/// each command after the previous one ran.
pub(crate) fn parse_batch(io: &ConnIo, limits: Limits, split_on_auth: bool) -> (Vec<Vec<Bytes>>, Option<String>, bool) {
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
                release_if_idle(&mut input);
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
