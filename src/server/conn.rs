//! One client connection: read, split into commands, run the batch on the
//! engine, write the replies.
//!
//! A connection reads, executes and writes in turn, so a client that sends
//! without reading is held back by its own unread replies, as with Redis.
//! Pushes (pub/sub messages, MONITOR lines) arrive through the client's
//! outbox and are written as they come.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::Shared;
use super::parser::{Limits, RequestParser};
use crate::engine::{Outbound, Outbox};

const READ_CHUNK: usize = 16 * 1024;

pub(crate) async fn serve(stream: TcpStream, peer: SocketAddr, shared: Rc<Shared>) {
    let _ = stream.set_nodelay(true);
    let local = stream.local_addr().unwrap_or(peer);
    let (mut reader, mut writer) = stream.into_split();

    if shared.connected.get() >= shared.engine.borrow().state.runtime.maxclients {
        let _ = writer.write_all(b"-ERR max number of clients reached\r\n").await;
        return;
    }
    shared.connected.set(shared.connected.get() + 1);
    let id = shared.next_client_id.get();
    shared.next_client_id.set(id + 1);

    let (tx, mut rx) = mpsc::unbounded_channel();
    let pending = Arc::new(AtomicUsize::new(0));
    let mut authenticated = {
        let mut engine = shared.engine.borrow_mut();
        engine.connect(id, peer, local, Outbox::new(tx, pending.clone()));
        !engine.auth_required()
    };
    let mut stop = shared.stop.subscribe();

    let mut parser = RequestParser::default();
    let mut input = BytesMut::with_capacity(READ_CHUNK);
    let mut output = BytesMut::with_capacity(READ_CHUNK);

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
                if !output.is_empty() && writer.write_all(&output).await.is_err() {
                    break;
                }
                output.clear();
                if close {
                    break;
                }
            }
            read = reader.read_buf(&mut input) => {
                match read {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let limits = Limits { proto_max_bulk_len: shared.engine.borrow().state.runtime.proto_max_bulk_len, authenticated };
                let (batch, protocol_error) = parse_batch(&mut parser, &mut input, limits);
                let mut close = false;
                if !batch.is_empty() {
                    let result = shared.engine.borrow_mut().run_batch(id, batch, &mut output);
                    authenticated = result.authenticated;
                    close = result.close;
                }
                if let Some(text) = protocol_error
                    && !close
                {
                    output.put_slice(b"-");
                    output.put_slice(text.as_bytes());
                    output.put_slice(b"\r\n");
                    close = true;
                }
                if !output.is_empty() && writer.write_all(&output).await.is_err() {
                    break;
                }
                output.clear();
                if shared.engine.borrow().shutdown_requested() {
                    shared.stop.send_replace(true);
                }
                if close {
                    break;
                }
                if input.capacity() - input.len() < 1024 {
                    input.reserve(READ_CHUNK);
                }
            }
            _ = stop.changed() => break,
        }
    }
    let _ = writer.shutdown().await;
    shared.engine.borrow_mut().disconnect(id);
    shared.connected.set(shared.connected.get() - 1);
}

/// Every complete command in the buffer, and the protocol error that ended
/// parsing, if any (the commands before it still run, as in Redis).
fn parse_batch(parser: &mut RequestParser, input: &mut BytesMut, limits: Limits) -> (Vec<Vec<Bytes>>, Option<String>) {
    let mut batch = Vec::new();
    loop {
        match parser.next(input, limits) {
            Ok(Some(cmd)) => batch.push(cmd),
            Ok(None) => return (batch, None),
            Err(e) => return (batch, Some(e.reply_text())),
        }
    }
}
