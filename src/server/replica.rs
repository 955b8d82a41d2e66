//! The link to the master of a replica (Redis's `connectWithMaster`,
//! `syncWithMaster`, `readSyncBulkPayload` and the master client's reads):
//! one task per `REPLICAOF`, on the server thread, that connects, makes
//! the handshake, receives the snapshot, hands it to the engine and then
//! runs the stream (see `engine::replica`).
//!
//! - The handshake is Redis 7.0's: `PING`, `AUTH [masteruser] masterauth`
//!   when set, `REPLCONF listening-port`, `REPLCONF ip-address` when
//!   `replica-announce-ip` is set, `REPLCONF capa eof capa psync2`, then
//!   `PSYNC <replid> <offset>` to continue the history of a link that
//!   broke (`+CONTINUE`: the stream goes on, no snapshot), or `PSYNC ? -1`.
//! - The snapshot comes as `$<length>` or, from a diskless master, as
//!   `$EOF:<mark>` and the bytes up to the 40-byte mark; newlines before
//!   it are the master's keep-alives.
//! - The stream runs batch by batch as it is read, a `REPLCONF GETACK`
//!   answered with the offset of what came before it. Every second the
//!   replica sends `REPLCONF ACK <offset>`.
//! - A link silent for `repl-timeout` seconds, a refused connection, a
//!   failed handshake or a damaged stream ends the link; a new one starts
//!   a second later. A REPLICAOF of another master, or NO ONE, aborts the
//!   task and closes its connection.
//! - With `tls-replication yes` the link is TLS (tokio-rustls, with the
//!   client configuration of `crate::tls`).

use std::rc::Rc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::Shared;
use crate::engine::replica::LinkState;
use crate::engine::{ClientAddr, Outbox};
use crate::log;

/// Starts or ends the link as the engine's master says: called after
/// every batch (REPLICAOF may have run) and at start.
pub(crate) fn follow(shared: &Rc<Shared>) {
    // Every batch passes here: only the generations are compared.
    let wanted_generation = shared.engine.borrow().state.master.as_deref().map(|m| m.generation);
    let running = shared.replica_link.borrow().as_ref().map(|(g, _)| *g);
    if wanted_generation == running {
        return;
    }
    let wanted = {
        let engine = shared.engine.borrow();
        engine.state.master.as_deref().map(|m| (m.generation, m.host.clone(), m.port))
    };
    if let Some((_, task)) = shared.replica_link.borrow_mut().take() {
        task.abort();
    }
    shared.engine.borrow_mut().forget_master_clients();
    if let Some((generation, host, port)) = wanted {
        let task = tokio::task::spawn_local(link(shared.clone(), generation, host, port));
        *shared.replica_link.borrow_mut() = Some((generation, task.abort_handle()));
    }
}

/// Why a link ended, logged at its level as Redis logs it.
type Failure = (log::Level, String);

fn warning(text: impl Into<String>) -> Failure {
    (log::Level::Warning, text.into())
}

fn io_failure(what: &str, e: &std::io::Error) -> Failure {
    warning(format!("{what}: {}", crate::error::os_error_text(e)))
}

/// The link of `generation`: connects and serves until it fails, then
/// again at once after a lost link, a second later after a failed attempt
/// (Redis's `replicationHandleMasterDisconnection` and `replicationCron`),
/// until REPLICAOF changes (the task is then aborted, or ends here).
async fn link(shared: Rc<Shared>, generation: u64, host: String, port: u16) {
    let mut first = true;
    loop {
        if !first {
            log::notice(format_args!("MASTER <-> REPLICA sync started"));
        }
        first = false;
        if let Err((level, text)) = sync_and_run(&shared, generation, &host, port).await {
            log::log(level, format_args!("{text}"));
        }
        let was_connected = {
            let mut engine = shared.engine.borrow_mut();
            let was_connected = engine.state.master_link_lost(generation);
            engine.forget_master_clients();
            was_connected
        };
        if shared
            .engine
            .borrow()
            .state
            .master
            .as_deref()
            .is_none_or(|m| m.generation != generation)
        {
            return;
        }
        if was_connected {
            log::notice(format_args!("Reconnecting to MASTER {host}:{port}"));
        } else {
            tokio::time::sleep(Duration::from_secs(1)).await;
            log::notice(format_args!("Connecting to MASTER {host}:{port}"));
        }
    }
}

/// The connection to the master, plain or TLS.
enum Link {
    Plain(tokio::net::TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>),
}

impl Link {
    /// Reads what is there (cancel-safe: nothing read is lost if the
    /// future is dropped).
    async fn read(&mut self, buf: &mut BytesMut) -> std::io::Result<usize> {
        buf.reserve(super::parser::READ_CHUNK);
        match self {
            Link::Plain(s) => s.read_buf(buf).await,
            Link::Tls(s) => s.read_buf(buf).await,
        }
    }

    async fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Link::Plain(s) => s.write_all(bytes).await,
            Link::Tls(s) => {
                s.write_all(bytes).await?;
                s.flush().await
            }
        }
    }
}

/// What the link reads, with what was read but not yet taken.
struct Reader {
    link: Link,
    buf: BytesMut,
    timeout: Duration,
    /// What a silence of `timeout` is logged as: Redis's words for the
    /// phase the link is in.
    silence: &'static str,
    /// A transaction of the stream not yet ended: its commands, parsed
    /// from the start of `buf` up to `held_to` (so that each byte is
    /// parsed once, however long it waits for its EXEC).
    held: Vec<Vec<Bytes>>,
    held_to: usize,
}

impl Reader {
    /// Reads more, or fails after `repl-timeout` of silence.
    async fn fill(&mut self) -> Result<(), Failure> {
        match tokio::time::timeout(self.timeout, self.link.read(&mut self.buf)).await {
            Err(_) => Err(warning(self.silence)),
            Ok(Ok(0)) => Err(warning("The MASTER closed the connection")),
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(io_failure("I/O error reading from the MASTER", &e)),
        }
    }

    /// The next line, without its CRLF (or LF).
    async fn line(&mut self) -> Result<String, Failure> {
        loop {
            if let Some(end) = self.buf.iter().position(|&b| b == b'\n') {
                let line = self.buf.split_to(end + 1);
                let text = String::from_utf8_lossy(&line[..end]);
                return Ok(text.trim_end_matches('\r').to_string());
            }
            if self.buf.len() > 64 * 1024 {
                return Err(warning("The MASTER sent a line too long"));
            }
            self.fill().await?;
        }
    }

    /// Sends `argv` as a RESP array and reads the one-line reply.
    async fn command(&mut self, argv: &[&str]) -> Result<String, Failure> {
        self.link
            .write_all(&encode(argv))
            .await
            .map_err(|e| io_failure("I/O error writing to the MASTER", &e))?;
        self.line().await
    }
}

fn encode(argv: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", argv.len()).into_bytes();
    for a in argv {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

/// One connection to the master: handshake, snapshot, stream.
async fn sync_and_run(shared: &Rc<Shared>, generation: u64, host: &str, port: u16) -> Result<(), Failure> {
    let (timeout, tls, user, auth, announce_ip, listening_port) = {
        let mut engine = shared.engine.borrow_mut();
        let state = &mut engine.state;
        if !state.master_link_at(generation, LinkState::Connecting) {
            return Ok(());
        }
        let p = &state.params;
        let text = |name: &str| p.value(name).filter(|v| !v.is_empty()).map(str::to_string);
        let tls = p.value("tls-replication") == Some("yes");
        // Redis's: the TLS port with TLS replication, if there is one.
        let tls_port = p.int("tls-port").unwrap_or(0);
        let own_port = if tls && tls_port != 0 { tls_port } else { i64::from(state.port) };
        let announced = p.int("replica-announce-port").unwrap_or(0);
        (
            Duration::from_secs(p.int("repl-timeout").unwrap_or(60).max(1) as u64),
            tls,
            text("masteruser"),
            text("masterauth"),
            text("replica-announce-ip"),
            if announced != 0 { announced } else { own_port },
        )
    };
    let tcp = match tokio::time::timeout(timeout, tokio::net::TcpStream::connect((host, port))).await {
        Ok(Ok(tcp)) => tcp,
        Ok(Err(e)) => return Err(io_failure("Error condition on socket for SYNC", &e)),
        Err(_) => return Err(warning("Timeout connecting to the MASTER...")),
    };
    let _ = tcp.set_nodelay(true);
    let (peer, local) = match (tcp.peer_addr(), tcp.local_addr()) {
        (Ok(p), Ok(l)) => (p, l),
        (Err(e), _) | (_, Err(e)) => return Err(io_failure("Error condition on socket for SYNC", &e)),
    };
    let link = if tls {
        let config = shared.engine.borrow().state.tls.as_ref().and_then(|t| t.client());
        let Some(config) = config else {
            return Err(warning(
                "Failed to configure TLS for the link to the MASTER: no CA certificate configured",
            ));
        };
        // The name is not checked (see `tls::AnyName`): one rustls cannot
        // take (an underscore in it) is replaced.
        let name = rustls_pki_types::ServerName::try_from(host.to_string())
            .unwrap_or_else(|_| rustls_pki_types::ServerName::try_from("master.invalid").expect("a valid name"));
        let connect = tokio_rustls::TlsConnector::from(config).connect(name, tcp);
        match tokio::time::timeout(timeout, connect).await {
            Ok(Ok(stream)) => Link::Tls(Box::new(stream)),
            Ok(Err(e)) => return Err(io_failure("Error condition on socket for SYNC", &e)),
            Err(_) => return Err(warning("Timeout connecting to the MASTER...")),
        }
    } else {
        Link::Plain(tcp)
    };
    log::notice(format_args!("Non blocking connect for SYNC fired the event."));
    if !shared.engine.borrow_mut().state.master_link_at(generation, LinkState::Handshake) {
        return Ok(());
    }
    let mut r = Reader {
        link,
        buf: BytesMut::new(),
        timeout,
        silence: "Timeout connecting to the MASTER...",
        held: Vec::new(),
        held_to: 0,
    };

    let pong = r
        .command(&["PING"])
        .await
        .map_err(|(level, e)| (level, format!("Error reply to PING from master: '{e}'")))?;
    // A master that wants a password still answers PING with -NOAUTH.
    if pong.starts_with('-')
        && !pong.starts_with("-NOAUTH")
        && !pong.starts_with("-NOPERM")
        && !pong.starts_with("-ERR operation not permitted")
    {
        return Err(warning(format!("Error reply to PING from master: '{pong}'")));
    }
    log::notice(format_args!("Master replied to PING, replication can continue..."));
    if let Some(auth) = &auth {
        let mut argv = vec!["AUTH"];
        if let Some(user) = &user {
            argv.push(user);
        }
        argv.push(auth);
        let reply = r.command(&argv).await?;
        if reply.starts_with('-') {
            return Err(warning(format!("Unable to AUTH to MASTER: {reply}")));
        }
    }
    let port_text = listening_port.to_string();
    let reply = r.command(&["REPLCONF", "listening-port", &port_text]).await?;
    if reply.starts_with('-') {
        log::notice(format_args!(
            "(Non critical) Master does not understand REPLCONF listening-port: {reply}"
        ));
    }
    if let Some(ip) = &announce_ip {
        let reply = r.command(&["REPLCONF", "ip-address", ip]).await?;
        if reply.starts_with('-') {
            log::notice(format_args!(
                "(Non critical) Master does not understand REPLCONF ip-address: {reply}"
            ));
        }
    }
    let reply = r.command(&["REPLCONF", "capa", "eof", "capa", "psync2"]).await?;
    if reply.starts_with('-') {
        log::notice(format_args!("(Non critical) Master does not understand REPLCONF capa: {reply}"));
    }
    let request = shared.engine.borrow().state.psync_request();
    let (psync_replid, psync_offset) = match &request {
        Some((replid, offset)) => {
            log::notice(format_args!("Trying a partial resynchronization (request {replid}:{offset})."));
            (replid.clone(), offset.to_string())
        }
        None => {
            log::notice(format_args!("Partial resynchronization not possible (no cached master)"));
            ("?".to_string(), "-1".to_string())
        }
    };
    // A master failing over asks its target to take over.
    let failover = shared.engine.borrow().state.failover_in_progress();
    let mut psync = vec!["PSYNC", &psync_replid, &psync_offset];
    if failover {
        psync.push("FAILOVER");
    }
    if let Err(e) = r.link.write_all(&encode(&psync)).await {
        if failover {
            shared.engine.borrow_mut().state.abort_failover("Write error to failover target");
        }
        return Err(io_failure("Unable to send PSYNC to master", &e));
    }
    let reply = loop {
        // Newlines are the master's keep-alives while it prepares.
        match r.line().await {
            Ok(line) if line.is_empty() => shared.engine.borrow_mut().state.master_heard(generation),
            answer => break answer,
        }
    };
    if shared.engine.borrow().state.failover_in_progress() {
        // The target took over (it answered the PSYNC), or the failover
        // ends: no answer, or a refusal.
        let took_over = reply
            .as_ref()
            .is_ok_and(|r| r.starts_with("+CONTINUE") || r.starts_with("+FULLRESYNC"));
        if took_over {
            shared.engine.borrow_mut().state.clear_failover();
        } else {
            shared
                .engine
                .borrow_mut()
                .state
                .abort_failover("Failover target rejected psync request");
            shared.after_batch();
        }
    }
    let reply = reply?;
    r.silence = "Timeout receiving bulk data from MASTER... If the problem persists try to set the 'repl-timeout' parameter in redis.conf to a larger value.";
    if let Some(rest) = reply.strip_prefix("+CONTINUE").filter(|_| request.is_some()) {
        log::notice(format_args!("Successful partial resynchronization with master."));
        // Redis takes the ID only when it is one (40 characters).
        let replid = rest.strip_prefix(' ').filter(|id| id.len() == 40);
        let client = master_client(shared, peer, local);
        shared
            .engine
            .borrow_mut()
            .master_continued(generation, replid, client)
            .map_err(warning)?;
        log::notice(format_args!(
            "MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization."
        ));
        shared.after_batch();
        return run_stream(&mut r, shared, generation).await;
    }
    let Some(rest) = reply.strip_prefix("+FULLRESYNC ") else {
        if reply.starts_with("-NOMASTERLINK") || reply.starts_with("-LOADING") {
            return Err((
                log::Level::Notice,
                format!("Master is currently unable to PSYNC but should be in the future: {reply}"),
            ));
        }
        return Err(warning(format!("Unexpected reply to PSYNC from master: {reply}")));
    };
    let (replid, offset) = match rest.split_once(' ') {
        Some((id, off)) if id.len() == 40 => (id.to_string(), off.parse::<u64>().unwrap_or(0)),
        _ => return Err(warning(format!("Master replied with wrong +FULLRESYNC syntax: {reply}"))),
    };
    log::notice(format_args!("Full resync from master: {replid}:{offset}"));
    if !shared.engine.borrow_mut().state.master_link_at(generation, LinkState::Transfer) {
        return Ok(());
    }
    let snapshot = receive_snapshot(&mut r, shared, generation, &replid).await?;
    let loaded = load_snapshot(&mut r, shared, generation, snapshot).await?;
    let client = master_client(shared, peer, local);
    shared
        .engine
        .borrow_mut()
        .master_synced(generation, loaded, (&replid, offset), client)
        .map_err(|e| (log::Level::Debug, e))?;
    shared.after_batch();
    run_stream(&mut r, shared, generation).await
}

/// The master's client to be, on the link from `local` to `peer`.
fn master_client(
    shared: &Shared,
    peer: std::net::SocketAddr,
    local: std::net::SocketAddr,
) -> (crate::db::ClientId, ClientAddr, ClientAddr, Outbox) {
    let id = shared.next_client_id.get();
    shared.next_client_id.set(id + 1);
    (id, ClientAddr::Tcp(peer), ClientAddr::Tcp(local), Outbox::new())
}

/// A master's snapshot, as its load takes it.
enum Snapshot {
    /// Received whole (Redis's file on disk).
    Whole(Vec<u8>),
    /// To be parsed from the link as it arrives (Redis's diskless load):
    /// `length` bytes, or up to the 40-byte `mark`.
    Streamed { length: Option<usize>, mark: Option<Vec<u8>> },
}

/// Reads the snapshot's `$` line and, unless it is to be parsed as it
/// arrives, its bytes.
async fn receive_snapshot(r: &mut Reader, shared: &Rc<Shared>, generation: u64, replid: &str) -> Result<Snapshot, Failure> {
    let header = loop {
        let line = r
            .line()
            .await
            .map_err(|(level, e)| (level, format!("I/O error reading bulk count from MASTER: {e}")))?;
        if !line.is_empty() {
            break line;
        }
        shared.engine.borrow_mut().state.master_heard(generation);
    };
    if let Some(error) = header.strip_prefix('-') {
        return Err(warning(format!("MASTER aborted replication with an error: {error}")));
    }
    let Some(size) = header.strip_prefix('$') else {
        return Err(warning(format!(
            "Bad protocol from MASTER, the first byte is not '$' (we received '{header}'), are you sure the host and port are right?"
        )));
    };
    let streamed = shared.engine.borrow_mut().state.master_transfer_started(generation, replid);
    let to = if streamed { "to parser" } else { "to disk" };
    let mut rdb = Vec::new();
    if let Some(mark) = size.strip_prefix("EOF:") {
        if mark.len() != 40 {
            return Err(warning(format!("Bad EOF mark from MASTER: '{mark}'")));
        }
        log::notice(format_args!(
            "MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF {to}"
        ));
        if streamed {
            let mark = Some(mark.as_bytes().to_vec());
            return Ok(Snapshot::Streamed { length: None, mark });
        }
        let mark = mark.as_bytes();
        loop {
            // The mark may be followed by the stream in the same read: what
            // follows it stays for the stream.
            let from = rdb.len().saturating_sub(mark.len());
            rdb.extend_from_slice(&r.buf);
            r.buf.clear();
            if let Some(at) = rdb[from..].windows(mark.len()).position(|w| w == mark) {
                let end = from + at;
                r.buf.extend_from_slice(&rdb[end + mark.len()..]);
                rdb.truncate(end);
                break;
            }
            shared.engine.borrow_mut().state.master_transfer_progress(-1, rdb.len() as u64);
            r.fill()
                .await
                .map_err(|(level, e)| (level, format!("I/O error trying to sync with MASTER: {e}")))?;
        }
    } else {
        let Ok(total) = size.parse::<usize>() else {
            return Err(warning(format!("Bad bulk count from MASTER: '{size}'")));
        };
        log::notice(format_args!("MASTER <-> REPLICA sync: receiving {total} bytes from master {to}"));
        if streamed {
            return Ok(Snapshot::Streamed {
                length: Some(total),
                mark: None,
            });
        }
        rdb.reserve(total);
        loop {
            let take = r.buf.len().min(total - rdb.len());
            rdb.extend_from_slice(&r.buf.split_to(take));
            shared
                .engine
                .borrow_mut()
                .state
                .master_transfer_progress(total as i64, rdb.len() as u64);
            if rdb.len() == total {
                break;
            }
            r.fill()
                .await
                .map_err(|(level, e)| (level, format!("I/O error trying to sync with MASTER: {e}")))?;
        }
    }
    Ok(Snapshot::Whole(rdb))
}

/// How often a snapshot's load off the engine thread is looked at: its
/// progress for INFO, `key-load-delay` set meanwhile, and whether the
/// link is still wanted.
const LOAD_POLL: Duration = Duration::from_millis(20);

/// How often the master is sent a newline while the snapshot loads, so
/// that it does not take the replica for gone after `repl-timeout`
/// (Redis's `replicationSendNewlineToMaster`).
const LOAD_KEEPALIVE: Duration = Duration::from_secs(1);

/// How many reads of a streamed snapshot wait for its parser: past them
/// the link is not read, so that a slow load makes a slow reader of this
/// replica, as Redis's diskless load is.
const STREAMED_READS_AHEAD: usize = 4;

/// Reads the master's snapshot on a thread of its own, while this thread
/// goes on serving: clients (`LOADING`, or the old dataset with
/// `repl-diskless-load swapdb`), the cluster bus and the cron, as Redis
/// serves events while it loads. A streamed snapshot's bytes are read
/// from the link here and handed to the thread as they come; what the
/// link brought after the snapshot is left in the buffer for the stream.
/// The read stops when the link is no longer wanted, or this task is
/// dropped (a REPLICAOF aborts it).
async fn load_snapshot(
    r: &mut Reader,
    shared: &Rc<Shared>,
    generation: u64,
    snapshot: Snapshot,
) -> Result<crate::rdb::file::Loaded, Failure> {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

    /// Stops the read when the load is left, however it is left.
    struct Stop(Arc<AtomicBool>);
    impl Drop for Stop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }

    let (length, mark, whole) = match snapshot {
        Snapshot::Whole(rdb) => (Some(rdb.len()), None, Some(rdb)),
        Snapshot::Streamed { length, mark } => (length, mark, None),
    };
    let (databases, options, delay) = {
        let mut engine = shared.engine.borrow_mut();
        let state = &mut engine.state;
        if !state.master_load_started(generation, length.unwrap_or(0) as u64) {
            return Err((log::Level::Debug, "the master changed".into()));
        }
        let options = crate::engine::persistence::decode_options(&state.params);
        (state.dbs.len(), options, state.runtime.key_load_delay)
    };
    let streamed = whole.is_none();
    let from = if streamed { "socket" } else { "disk" };
    let stop = Stop(Arc::new(AtomicBool::new(false)));
    let read = Arc::new(AtomicU64::new(0));
    let key_load_delay = Arc::new(AtomicI64::new(delay));
    // The thread waits for bytes of a streamed snapshot: only then does a
    // silent link count toward `repl-timeout` (Redis's blocking read).
    let starving = Arc::new(AtomicBool::new(false));
    // A streamed snapshot's bytes, to the thread.
    let (chunks, mut chunks_rx) = tokio::sync::mpsc::channel::<Bytes>(STREAMED_READS_AHEAD);
    let mut chunks = streamed.then_some(chunks);
    let (tx, mut rx) = tokio::sync::oneshot::channel();
    let thread = {
        let (stop, read, key_load_delay) = (stop.0.clone(), read.clone(), key_load_delay.clone());
        let starving = starving.clone();
        std::thread::Builder::new().name("replica-load".into()).spawn(move || {
            let mut progress = |at: usize| {
                read.store(at as u64, Ordering::Relaxed);
                crate::rdb::debug_delay(key_load_delay.load(Ordering::Relaxed));
                !stop.load(Ordering::Relaxed)
            };
            let loaded = match whole {
                Some(rdb) => crate::rdb::file::read_with_progress(&rdb, databases, &options, 0, &mut progress)
                    .map(|loaded| (loaded, BytesMut::new())),
                None => crate::rdb::file::read_streamed(
                    &mut || {
                        if let Ok(bytes) = chunks_rx.try_recv() {
                            return Some(bytes);
                        }
                        starving.store(true, Ordering::Relaxed);
                        let bytes = chunks_rx.blocking_recv();
                        starving.store(false, Ordering::Relaxed);
                        bytes
                    },
                    databases,
                    &options,
                    0,
                    &mut progress,
                ),
            };
            let _ = tx.send((loaded, chunks_rx));
        })
    };
    if let Err(e) = thread {
        return Err(warning(format!("Can't start loading the MASTER synchronization DB: {e}")));
    }
    // Bytes of a streamed snapshot read from the link, and one read not
    // yet taken by the thread. The thread gets the bytes before the EOF
    // mark, and then their end: the mark (or, with a length, what is past
    // it) stays in the buffer.
    let mut received = 0usize;
    let mut mark_found = false;
    let mut unsent: Option<Bytes> = None;
    let mut last_read = tokio::time::Instant::now();
    // Why the link failed while a streamed snapshot was read from it.
    let mut lost: Option<String> = None;
    let mut keepalive = tokio::time::Instant::now() + LOAD_KEEPALIVE;
    let (loaded, mut chunks_rx) = loop {
        if let Some(sender) = &chunks {
            if unsent.is_none() && !r.buf.is_empty() {
                let take = match (length, &mark) {
                    (Some(total), _) => r.buf.len().min(total - received),
                    (None, Some(mark)) => match r.buf.windows(mark.len()).position(|w| w == &mark[..]) {
                        Some(at) => {
                            mark_found = true;
                            at
                        }
                        // What could be the start of the mark waits for
                        // the rest of it.
                        None => r.buf.len().saturating_sub(mark.len() - 1),
                    },
                    // Either a length or a mark: not reached.
                    (None, None) => r.buf.len(),
                };
                if take > 0 {
                    unsent = Some(r.buf.split_to(take).freeze());
                    received += take;
                    let total = length.map_or(-1, |n| n as i64);
                    shared.engine.borrow_mut().state.master_transfer_progress(total, received as u64);
                }
            }
            if unsent.is_none() && (length == Some(received) || mark_found) {
                // All of it is in: the thread reads to the end.
                chunks = None;
            } else if sender.is_closed() {
                chunks = None;
            }
        }
        let reading = chunks.is_some() && unsent.is_none();
        tokio::select! {
            loaded = &mut rx => break loaded,
            permit = async { chunks.as_ref()?.reserve().await.ok() }, if unsent.is_some() => {
                if let (Some(permit), Some(bytes)) = (permit, unsent.take()) {
                    permit.send(bytes);
                }
            }
            n = r.link.read(&mut r.buf), if reading => match n {
                Ok(0) => lost = Some("connection lost".to_string()),
                Ok(_) => last_read = tokio::time::Instant::now(),
                Err(e) => lost = Some(crate::error::os_error_text(&e)),
            },
            _ = tokio::time::sleep(LOAD_POLL) => {}
        }
        if !reading || !starving.load(Ordering::Relaxed) {
            last_read = tokio::time::Instant::now();
        } else if lost.is_none() && last_read.elapsed() > r.timeout {
            lost = Some("Connection timed out".to_string());
        }
        if lost.is_some() {
            // The parser reads to the end of what came, and fails there
            // (as Redis's read from the socket fails), unless the
            // snapshot was all in.
            chunks = None;
        }
        if lost.is_none() && tokio::time::Instant::now() >= keepalive {
            keepalive += LOAD_KEEPALIVE;
            r.link
                .write_all(b"\n")
                .await
                .map_err(|e| io_failure("Error writing to MASTER", &e))?;
        }
        let delay = shared
            .engine
            .borrow_mut()
            .state
            .master_load_progress(generation, read.load(Ordering::Relaxed));
        match delay {
            Some(delay) => key_load_delay.store(delay, Ordering::Relaxed),
            None => return Err((log::Level::Debug, "the master changed".into())),
        }
    }
    .map_err(|_| warning(format!("Failed trying to load the MASTER synchronization DB from {from}")))?;
    let (loaded, after) = match loaded {
        Ok(loaded) => loaded,
        Err(crate::rdb::file::LoadError(text, at)) if streamed => {
            // Redis's `rdbReportError` for a diskless load.
            if text == crate::rdb::file::SHORT_READ {
                log::warning(format_args!("{text}"));
                log::warning(format_args!(
                    "Internal error in RDB reading offset {at}, function at rdb.c:3240 -> Unexpected EOF reading RDB file. Failure loading rdb format from socket, assuming connection error, resuming operation."
                ));
            } else {
                log::warning(format_args!(
                    "Internal error in RDB reading offset {at} -> {text}. Failure loading rdb format"
                ));
            }
            let why = lost.unwrap_or(text);
            return Err(warning(format!(
                "Failed trying to load the MASTER synchronization DB from socket: {why}"
            )));
        }
        Err(e) => {
            return Err(warning(format!(
                "Failed trying to load the MASTER synchronization DB from disk: {} (at offset {})",
                e.0, e.1
            )));
        }
    };
    // A link lost after all of the snapshot came leaves it loaded, as in
    // Redis: the stream finds the link gone, and continues on a new one.
    // What was read past the snapshot's end comes before what the buffer
    // holds: the mark, then the stream.
    let mut rest = after;
    while let Ok(bytes) = chunks_rx.try_recv() {
        rest.extend_from_slice(&bytes);
    }
    if let Some(bytes) = unsent {
        rest.extend_from_slice(&bytes);
    }
    rest.extend_from_slice(&r.buf);
    r.buf = rest;
    if let Some(mark) = mark {
        while r.buf.len() < mark.len() {
            r.fill().await?;
        }
        if r.buf[..mark.len()] != mark[..] {
            return Err(warning("Replication stream EOF marker is broken"));
        }
        let _ = r.buf.split_to(mark.len());
    }
    Ok(loaded)
}

/// Runs the stream until the link fails.
async fn run_stream(r: &mut Reader, shared: &Rc<Shared>, generation: u64) -> Result<(), Failure> {
    let mut ack = tokio::time::interval(Duration::from_secs(1));
    ack.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_read = tokio::time::Instant::now();
    loop {
        // CLIENT PAUSE holds the master's stream too: it waits unread.
        let paused = shared.engine.borrow_mut().state.paused().is_some();
        if !paused {
            run_buffered(r, shared, generation).await?;
        }
        tokio::select! {
            read = r.link.read(&mut r.buf), if !paused => match read {
                Ok(0) => return Err((log::Level::Verbose, "Client closed connection".into())),
                Ok(_) => last_read = tokio::time::Instant::now(),
                Err(e) => return Err((log::Level::Verbose, format!("Reading from client: {}", crate::error::os_error_text(&e)))),
            },
            _ = tokio::time::sleep(Duration::from_millis(10)), if paused => {}
            _ = ack.tick() => {
                if last_read.elapsed() > r.timeout && !paused {
                    return Err(warning("MASTER timeout: no data nor PING received..."));
                }
                if !shared.engine.borrow().state.master_client_open(generation) {
                    // CLIENT KILL of the master's client: the link starts over.
                    return Ok(());
                }
                send_ack(r, shared).await?;
            }
        }
    }
}

/// Runs the whole commands the buffer holds, a GETACK answered with the
/// offset of what came before it. A transaction runs once its EXEC (or
/// DISCARD) is in: its commands wait in the buffer until then, so that
/// the offset reached (what a broken link continues from) never falls
/// inside one (Redis counts no offset while its master client is in
/// MULTI).
async fn run_buffered(r: &mut Reader, shared: &Rc<Shared>, generation: u64) -> Result<(), Failure> {
    let mut batch = std::mem::take(&mut r.held);
    let mut at = std::mem::take(&mut r.held_to);
    let mut batch_start = 0;
    // Where an open transaction's MULTI starts, and the batch's length then
    // (one held from the last read starts the buffer).
    let mut open_multi: Option<(usize, usize)> = (!batch.is_empty()).then_some((0, 0));
    loop {
        match crate::engine::aof::parse_stream_command(&r.buf, at) {
            Ok(Some((argv, next))) => {
                let name = &argv[0];
                if name.eq_ignore_ascii_case(b"multi") && open_multi.is_none() {
                    open_multi = Some((at, batch.len()));
                } else if name.eq_ignore_ascii_case(b"exec") || name.eq_ignore_ascii_case(b"discard") {
                    open_multi = None;
                }
                let getack = open_multi.is_none()
                    && argv.len() >= 2
                    && argv[0].eq_ignore_ascii_case(b"replconf")
                    && argv[1].eq_ignore_ascii_case(b"getack");
                if getack {
                    run(shared, generation, std::mem::take(&mut batch), &r.buf[batch_start..at])?;
                    send_ack(r, shared).await?;
                    run(shared, generation, Vec::new(), &r.buf[at..next])?;
                    batch_start = next;
                } else {
                    batch.push(argv);
                }
                at = next;
            }
            Ok(None) => break,
            Err(e) => {
                // What came before it runs, as Redis runs each command
                // as it is parsed (but not a transaction left open).
                if let Some((multi_at, len)) = open_multi {
                    batch.truncate(len);
                    at = multi_at;
                }
                if at > batch_start {
                    run(shared, generation, batch, &r.buf[batch_start..at])?;
                }
                shared.engine.borrow_mut().state.master_protocol_error();
                return Err(warning(format!("Protocol error from MASTER: {e}")));
            }
        }
    }
    let mut held_to = 0;
    if let Some((multi_at, len)) = open_multi {
        // The rest of the transaction is still to come: what is parsed of
        // it waits, and reading goes on after it.
        r.held = batch.split_off(len);
        held_to = at - multi_at;
        at = multi_at;
    }
    if at > batch_start {
        run(shared, generation, batch, &r.buf[batch_start..at])?;
    }
    let _ = r.buf.split_to(at);
    r.held_to = held_to;
    Ok(())
}

/// Runs `commands` of the stream, `raw` as they came.
fn run(shared: &Rc<Shared>, generation: u64, commands: Vec<Vec<Bytes>>, raw: &[u8]) -> Result<(), Failure> {
    let woken = shared.engine.borrow_mut().run_master_stream(generation, commands, raw);
    let Some(woken) = woken else {
        // Its client was closed (CLIENT KILL), or REPLICAOF changed.
        return Err((log::Level::Verbose, "The MASTER's client was closed".into()));
    };
    super::conn::write_woken(shared, &woken);
    shared.after_batch();
    Ok(())
}

/// `REPLCONF ACK <offset>`: how far this replica applied the stream.
async fn send_ack(r: &mut Reader, shared: &Rc<Shared>) -> Result<(), Failure> {
    let offset = shared.engine.borrow().state.replica_ack_offset().to_string();
    r.link.write_all(&encode(&["REPLCONF", "ACK", &offset])).await.map_err(|e| {
        (
            log::Level::Verbose,
            format!("Error writing to client: {}", crate::error::os_error_text(&e)),
        )
    })
}
