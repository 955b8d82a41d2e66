//! MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE]
//! [AUTH password] [AUTH2 username password] [KEYS key …], as Redis
//! 7.0.15's `migrateCommand` (cluster.c) does it: synchronously, from the
//! engine thread, over a cached connection to the target.
//!
//! The keys are sent as one batch of RESTORE commands (AUTH and SELECT
//! first when needed) carrying DUMP payloads (`rdb::dump`) and the
//! remaining TTLs, written in 64 KiB chunks; each reply line is read with
//! the timeout, and a key the target acknowledged is deleted here unless
//! COPY. Connections are cached per `host:port` (at most 64, each closed
//! after 10 seconds unused, by the engine's cron), remembering the
//! database last selected so SELECT is sent only when it changes. A
//! socket error before any reply was read closes the connection and
//! tries once more, unless it was a timeout, as Redis does. The whole
//! server waits while a MIGRATE runs, as Redis's main thread does.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use bytes::Bytes;

use super::table::{CommandSpec, cmd, flag::*};
use super::{CmdError, CmdResult, Ctx, Reply};
use crate::db::ops;
use crate::numfmt::atoi;

pub const COMMANDS: &[CommandSpec] = &[cmd("migrate", -6, migrate).flags(WRITE)];

/// Redis's `MIGRATE_SOCKET_CACHE_ITEMS` and `MIGRATE_SOCKET_CACHE_TTL`.
const CACHE_ITEMS: usize = 64;
const CACHE_TTL_SECS: u64 = 10;

/// One cached connection to a MIGRATE target.
struct Cached {
    conn: BufReader<TcpStream>,
    /// The database last selected there (-1: unknown).
    last_dbid: i64,
    last_use_secs: u64,
}

/// The engine's MIGRATE connections, by `host:port` as the client wrote
/// them (Redis's `server.migrate_cached_sockets`).
#[derive(Default)]
pub struct SocketCache {
    sockets: HashMap<Vec<u8>, Cached>,
}

impl std::fmt::Debug for SocketCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SocketCache").field("sockets", &self.sockets.len()).finish()
    }
}

impl SocketCache {
    /// INFO's `migrate_cached_sockets`.
    pub fn len(&self) -> usize {
        self.sockets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sockets.is_empty()
    }

    /// Closes the connections unused for more than 10 seconds
    /// (`migrateCloseTimedoutSockets`, from the cron).
    pub fn close_idle(&mut self, now_secs: u64) {
        self.sockets
            .retain(|_, cs| now_secs.saturating_sub(cs.last_use_secs) <= CACHE_TTL_SECS);
    }
}

fn cache_name(host: &[u8], port: &[u8]) -> Vec<u8> {
    [host, b":", port].concat()
}

/// Why [`get_socket`] has no connection to give.
enum Connect {
    /// Redis's "connecting" error, sent as it is.
    Failed(CmdError),
    /// A socket Redis would have taken as connected, whose first write
    /// fails.
    Broken,
}

/// `migrateGetSocket`: the cached connection, or a new one made within
/// `timeout_ms` (making room by closing a random one when 64 are open).
fn get_socket<'c>(cache: &'c mut SocketCache, host: &[u8], port: &[u8], timeout_ms: u64, now_secs: u64) -> Result<&'c mut Cached, Connect> {
    let name = cache_name(host, port);
    if !cache.sockets.contains_key(&name) {
        if cache.sockets.len() == CACHE_ITEMS
            && let Some(victim) = cache.sockets.keys().nth(fastrand::usize(..CACHE_ITEMS)).cloned()
        {
            cache.sockets.remove(&victim);
        }
        let conn = match connect(host, i64::from(atoi(port)), timeout_ms) {
            Ok(conn) => conn,
            Err(ConnectFailure::Unreachable) => {
                return Err(Connect::Failed(CmdError::new("IOERR error or timeout connecting to the client")));
            }
            Err(ConnectFailure::Refused) => return Err(Connect::Broken),
        };
        cache.sockets.insert(
            name.clone(),
            Cached {
                conn: BufReader::new(conn),
                last_dbid: -1,
                last_use_secs: now_secs,
            },
        );
    }
    let cs = cache.sockets.get_mut(&name).expect("just cached");
    cs.last_use_secs = now_secs;
    Ok(cs)
}

/// How a connection attempt failed (`connBlockingConnect`): Redis
/// connects without blocking and waits until the socket is writable, so
/// only a name that does not resolve, or no answer within the timeout,
/// fail the connection itself; a refusal shows at the first write.
enum ConnectFailure {
    Unreachable,
    Refused,
}

fn connect(host: &[u8], port: i64, timeout_ms: u64) -> Result<TcpStream, ConnectFailure> {
    let host = std::str::from_utf8(host).map_err(|_| ConnectFailure::Unreachable)?;
    // C's `htons(atoi(port))`.
    let port = port as u16;
    let timeout = Duration::from_millis(timeout_ms.max(1));
    let addrs = (host, port).to_socket_addrs().map_err(|_| ConnectFailure::Unreachable)?;
    let mut failure = ConnectFailure::Unreachable;
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Err(e) if !matches!(e.kind(), ErrorKind::TimedOut | ErrorKind::WouldBlock) => {
                failure = ConnectFailure::Refused;
            }
            Err(_) => {}
        }
    }
    Err(failure)
}

/// RESP, as Redis's `rioWriteBulkCount` / `rioWriteBulkString` write it.
fn push_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// The parsed command line.
struct Request<'a> {
    copy: bool,
    replace: bool,
    username: Option<&'a [u8]>,
    password: Option<&'a [u8]>,
    keys: &'a [Bytes],
    timeout_ms: u64,
    dbid: i64,
}

fn parse(argv: &[Bytes]) -> CmdResult<Request<'_>> {
    let mut req = Request {
        copy: false,
        replace: false,
        username: None,
        password: None,
        keys: &argv[3..4],
        timeout_ms: 0,
        dbid: 0,
    };
    let mut j = 6;
    while j < argv.len() {
        let more = argv.len() - 1 - j;
        let a = &argv[j];
        if a.eq_ignore_ascii_case(b"copy") {
            req.copy = true;
        } else if a.eq_ignore_ascii_case(b"replace") {
            req.replace = true;
        } else if a.eq_ignore_ascii_case(b"auth") {
            if more == 0 {
                return Err(CmdError::syntax());
            }
            j += 1;
            req.password = Some(&argv[j]);
        } else if a.eq_ignore_ascii_case(b"auth2") {
            if more < 2 {
                return Err(CmdError::syntax());
            }
            req.username = Some(&argv[j + 1]);
            req.password = Some(&argv[j + 2]);
            j += 2;
        } else if a.eq_ignore_ascii_case(b"keys") {
            if !argv[3].is_empty() {
                return Err(CmdError::err(
                    "When using MIGRATE KEYS option, the key argument must be set to the empty string",
                ));
            }
            req.keys = &argv[j + 1..];
            break;
        } else {
            return Err(CmdError::syntax());
        }
        j += 1;
    }
    let timeout = super::args::parse_i64(&argv[5])?;
    req.dbid = super::args::parse_i64(&argv[4])?;
    req.timeout_ms = if timeout <= 0 { 1000 } else { timeout as u64 };
    Ok(req)
}

/// Why an attempt stopped at Redis's `socket_err`.
struct SocketError {
    writing: bool,
    timed_out: bool,
}

fn io_failure(writing: bool, e: &std::io::Error) -> SocketError {
    SocketError {
        writing,
        timed_out: matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
    }
}

/// `connSyncReadLine`: one reply line without its CRLF; an empty line or
/// a closed connection is a failure.
fn read_line(conn: &mut BufReader<TcpStream>) -> Result<Vec<u8>, SocketError> {
    let mut line = Vec::new();
    match conn.read_until(b'\n', &mut line) {
        Ok(_) if line.ends_with(b"\n") => {
            line.pop();
            if line.ends_with(b"\r") {
                line.pop();
            }
            if line.is_empty() {
                return Err(SocketError {
                    writing: false,
                    timed_out: false,
                });
            }
            Ok(line)
        }
        Ok(_) => Err(SocketError {
            writing: false,
            timed_out: false,
        }),
        Err(e) => Err(io_failure(false, &e)),
    }
}

fn migrate(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let req = parse(argv)?;
    // Keys present now (counted reads, as `lookupKeyRead`).
    let present: Vec<&Bytes> = req.keys.iter().filter(|k| ctx.read(k).is_some()).collect();
    if present.is_empty() {
        return Ok(Reply::status("NOKEY"));
    }
    let (host, port) = (&argv[1], &argv[2]);
    let mut may_retry = true;
    loop {
        match attempt(ctx, &req, host, port, &present, may_retry) {
            Ok(reply) => return reply,
            Err(failure) => {
                ctx.state.migrate_sockets.sockets.remove(&cache_name(host, port));
                if !failure.timed_out && may_retry {
                    may_retry = false;
                    continue;
                }
                return Err(CmdError::new(format!(
                    "IOERR error or timeout {} to target instance",
                    if failure.writing { "writing" } else { "reading" }
                )));
            }
        }
    }
}

/// One try (Redis's code from `try_again` on): Ok with the command's
/// result, or Err for `socket_err` (the caller closes the connection and
/// maybe tries again).
fn attempt(ctx: &mut Ctx, req: &Request, host: &[u8], port: &[u8], present: &[&Bytes], may_retry: bool) -> Result<CmdResult, SocketError> {
    let now_secs = ctx.now_ms / 1000;
    let options = super::dump::encode_options(ctx);
    let timeout = Duration::from_millis(req.timeout_ms);
    // Take the connection out of the cache while it is used (the keyspace
    // is used too); it goes back unless it failed.
    let cs = match get_socket(&mut ctx.state.migrate_sockets, host, port, req.timeout_ms, now_secs) {
        Ok(cs) => cs,
        Err(Connect::Failed(e)) => return Ok(Err(e)),
        Err(Connect::Broken) => {
            return Err(SocketError {
                writing: true,
                timed_out: false,
            });
        }
    };
    let select = cs.last_dbid != req.dbid;
    let mut batch = Vec::new();
    if let Some(password) = req.password {
        match req.username {
            Some(user) => push_command(&mut batch, &[b"AUTH".as_slice(), user, password]),
            None => push_command(&mut batch, &[b"AUTH".as_slice(), password]),
        }
    }
    if select {
        push_command(&mut batch, &[b"SELECT".as_slice(), req.dbid.to_string().as_bytes()]);
    }
    let now_ms = ctx.now_ms;
    let cluster = ctx.state.cluster_enabled();
    let db = &mut ctx.state.dbs[ctx.client.db];
    let mut sent: Vec<&Bytes> = Vec::with_capacity(present.len());
    for key in present {
        let Some(position) = db.live_position(key, now_ms) else { continue };
        let mut ttl = 0i64;
        if let Some(at) = db.expire_at(key) {
            ttl = at as i64 - now_ms as i64;
            if ttl < 0 {
                continue;
            }
            ttl = ttl.max(1);
        }
        let payload = crate::rdb::dump(db.value_at(position), &options);
        let ttl = ttl.to_string();
        // A cluster node's target may be importing the slot: RESTORE-ASKING
        // is served there without an ASKING first.
        let restore: &[u8] = if cluster { b"RESTORE-ASKING" } else { b"RESTORE" };
        let mut args: Vec<&[u8]> = vec![restore, key, ttl.as_bytes(), &payload];
        if req.replace {
            args.push(b"REPLACE");
        }
        push_command(&mut batch, &args);
        sent.push(key);
    }
    let cs = ctx
        .state
        .migrate_sockets
        .sockets
        .get_mut(&cache_name(host, port))
        .expect("the connection just used");
    let conn = cs.conn.get_mut();
    let _ = conn.set_write_timeout(Some(timeout));
    let _ = conn.set_read_timeout(Some(timeout));
    for chunk in batch.chunks(64 * 1024) {
        if let Err(e) = conn.write_all(chunk) {
            return Err(io_failure(true, &e));
        }
    }
    let auth_reply = match req.password {
        Some(_) => Some(read_line(&mut cs.conn)?),
        None => None,
    };
    let select_reply = if select { Some(read_line(&mut cs.conn)?) } else { None };
    let mut target_error: Option<Vec<u8>> = None;
    let mut socket_error: Option<SocketError> = None;
    let mut acknowledged: Vec<&Bytes> = Vec::new();
    let mut read = 0;
    for key in &sent {
        let reply = match read_line(&mut cs.conn) {
            Ok(line) => line,
            Err(e) => {
                socket_error = Some(e);
                break;
            }
        };
        read += 1;
        let failed = [auth_reply.as_deref(), select_reply.as_deref(), Some(&reply[..])]
            .into_iter()
            .flatten()
            .find(|line| line.first() == Some(&b'-'));
        match failed {
            Some(line) => {
                if target_error.is_none() {
                    cs.last_dbid = -1;
                    target_error = Some(line[1..].to_vec());
                }
            }
            None => acknowledged.push(key),
        }
    }
    if let Some(e) = &socket_error
        && target_error.is_none()
        && read == 0
        && may_retry
        && !e.timed_out
    {
        return Err(socket_error.expect("checked"));
    }
    if target_error.is_none() && socket_error.is_none() {
        cs.last_dbid = req.dbid;
    }
    if socket_error.is_some() {
        ctx.state.migrate_sockets.sockets.remove(&cache_name(host, port));
    }
    if !req.copy && !acknowledged.is_empty() {
        let db = &mut ctx.state.dbs[ctx.client.db];
        for key in &acknowledged {
            ops::del(db, key, now_ms);
        }
        ctx.dirty(acknowledged.len() as u64);
        // Replayed as what it did here, as Redis rewrites it: a DEL of the
        // keys the target took.
        let mut effect = vec![Bytes::from_static(b"DEL")];
        effect.extend(acknowledged.iter().map(|k| (*k).clone()));
        ctx.propagate_as(effect);
    }
    if let Some(e) = socket_error
        && target_error.is_none()
    {
        // Nothing to retry: report it (the caller closes nothing more).
        return Ok(Err(CmdError::new(format!(
            "IOERR error or timeout {} to target instance",
            if e.writing { "writing" } else { "reading" }
        ))));
    }
    Ok(match target_error {
        None => Ok(Reply::OK),
        Some(text) => Err(CmdError::err_bytes(
            &[b"Target instance replied with error: ".as_slice(), &text].concat(),
        )),
    })
}
