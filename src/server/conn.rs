//! One client connection: read, split into commands, hand each batch to
//! the engine, write what comes back.
//!
//! A connection has at most one batch in flight: it stops reading until
//! the engine's replies arrive, which bounds memory for clients that send
//! without reading, exactly as a single-threaded Redis would. Pushes
//! (pub/sub messages, MONITOR lines) can arrive at any time and are written
//! as they come, in the order the engine produced them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::{BufMut, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

use super::Shared;
use super::parser::{Limits, RequestParser};
use crate::engine::{Outbound, Outbox, Request};

const READ_CHUNK: usize = 16 * 1024;

pub(crate) async fn serve(stream: TcpStream, peer: SocketAddr, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let _ = stream.set_nodelay(true);
    let local = stream.local_addr().unwrap_or(peer);
    let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed);
    let (mut reader, mut writer) = stream.into_split();

    let connected = shared.connected.fetch_add(1, Ordering::Relaxed) + 1;
    if connected as usize > shared.maxclients {
        let _ = writer.write_all(b"-ERR max number of clients reached\r\n").await;
        shared.connected.fetch_sub(1, Ordering::Relaxed);
        return;
    }

    let (tx, mut rx) = mpsc::unbounded_channel();
    let pending = Arc::new(AtomicUsize::new(0));
    let outbox = Outbox::new(tx, pending.clone());
    if shared.engine.send(Request::Connect { id, peer, local, outbox }).is_err() {
        return;
    }

    let mut parser = RequestParser::default();
    let mut input = BytesMut::with_capacity(READ_CHUNK);
    let mut output = BytesMut::new();
    let mut in_flight = false;
    let mut authenticated = !shared.auth_required_at_start;
    let mut protocol_error: Option<String> = None;

    'conn: loop {
        tokio::select! {
            biased;
            msg = rx.recv() => {
                let Some(msg) = msg else { break };
                let mut close = false;
                let mut next = Some(msg);
                // Gather whatever else is ready into one write.
                while let Some(msg) = next.take() {
                    match msg {
                        Outbound::Replies { data, close: c, authenticated: a } => {
                            pending.fetch_sub(data.len(), Ordering::Relaxed);
                            output.put_slice(&data);
                            in_flight = false;
                            authenticated = a;
                            close |= c;
                        }
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
                if !in_flight && let Some(text) = protocol_error.take() {
                    output.put_slice(format!("-{text}\r\n").as_bytes());
                    close = true;
                }
                if !output.is_empty() && writer.write_all(&output).await.is_err() {
                    break;
                }
                output.clear();
                if close {
                    break;
                }
                if !in_flight && !input.is_empty() {
                    // Commands that arrived while the last batch ran.
                    match next_batch(&mut parser, &mut input, &shared, authenticated) {
                        Ok(batch) if !batch.is_empty() => {
                            in_flight = true;
                            if shared.engine.send(Request::Batch { id, commands: batch }).is_err() {
                                break;
                            }
                        }
                        Ok(_) => {}
                        Err((batch, text)) => {
                            if !send_then_fail(&shared, id, batch, text, &mut in_flight, &mut protocol_error, &mut writer).await {
                                break 'conn;
                            }
                        }
                    }
                }
            }
            read = reader.read_buf(&mut input), if !in_flight => {
                match read {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                match next_batch(&mut parser, &mut input, &shared, authenticated) {
                    Ok(batch) if !batch.is_empty() => {
                        in_flight = true;
                        if shared.engine.send(Request::Batch { id, commands: batch }).is_err() {
                            break;
                        }
                    }
                    Ok(_) => {
                        if input.capacity() - input.len() < 1024 {
                            input.reserve(READ_CHUNK);
                        }
                    }
                    Err((batch, text)) => {
                        if !send_then_fail(&shared, id, batch, text, &mut in_flight, &mut protocol_error, &mut writer).await {
                            break;
                        }
                    }
                }
            }
            _ = stop.changed() => break,
        }
    }
    let _ = writer.shutdown().await;
    let _ = shared.engine.send(Request::Disconnect { id });
    shared.connected.fetch_sub(1, Ordering::Relaxed);
}

/// Runs the commands parsed before a protocol error, then reports the error
/// and closes (immediately when there were none). Returns false to close now.
async fn send_then_fail(
    shared: &Shared,
    id: u64,
    batch: Vec<Vec<bytes::Bytes>>,
    text: String,
    in_flight: &mut bool,
    protocol_error: &mut Option<String>,
    writer: &mut tokio::net::tcp::OwnedWriteHalf,
) -> bool {
    if batch.is_empty() {
        let _ = writer.write_all(format!("-{text}\r\n").as_bytes()).await;
        return false;
    }
    *protocol_error = Some(text);
    *in_flight = true;
    shared.engine.send(Request::Batch { id, commands: batch }).is_ok()
}

type Batch = Vec<Vec<bytes::Bytes>>;

/// Every complete command in the buffer; on a protocol error, the commands
/// before it and the error text.
fn next_batch(parser: &mut RequestParser, input: &mut BytesMut, shared: &Shared, authenticated: bool) -> Result<Batch, (Batch, String)> {
    let limits = Limits {
        proto_max_bulk_len: shared.proto_max_bulk_len,
        authenticated,
    };
    let mut batch = Vec::new();
    loop {
        match parser.next(input, limits) {
            Ok(Some(cmd)) => batch.push(cmd),
            Ok(None) => return Ok(batch),
            Err(e) => return Err((batch, e.reply_text())),
        }
    }
}
