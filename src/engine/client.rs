//! What the engine knows about one connected client.
//!
//! The connection task owns the socket; the engine owns this state (selected
//! database, protocol, name, transaction, watches, subscriptions) and talks
//! back through the client's [`Outbox`]. Keeping the state here means every
//! command sees and changes it without locks.

use std::collections::HashSet;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;

use super::output::{ClientClass, CloseRequest, Outbox};
use crate::db::ClientId;

/// Where a client is connected from, or to: a TCP address, or the path of
/// the Unix socket it came in on. Shown as Redis shows it (`addr=` and
/// `laddr=` of CLIENT LIST, CLIENT KILL's filters): `ip:port`, `[ipv6]:port`,
/// or `/path/to.sock:0` for both ends of a Unix socket connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientAddr {
    Tcp(SocketAddr),
    /// The server's socket path (a Unix socket's peer has no name).
    Unix(Arc<str>),
}

impl ClientAddr {
    /// Redis's `islocalClient`: a Unix socket, or TCP from 127.0.0.1 or ::1.
    pub fn is_local(&self) -> bool {
        match self {
            ClientAddr::Tcp(addr) => match addr.ip() {
                std::net::IpAddr::V4(ip) => ip == std::net::Ipv4Addr::LOCALHOST,
                std::net::IpAddr::V6(ip) => ip == std::net::Ipv6Addr::LOCALHOST,
            },
            ClientAddr::Unix(_) => true,
        }
    }
}

impl From<SocketAddr> for ClientAddr {
    fn from(addr: SocketAddr) -> ClientAddr {
        ClientAddr::Tcp(addr)
    }
}

impl fmt::Display for ClientAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientAddr::Tcp(addr) => addr.fmt(f),
            ClientAddr::Unix(path) => write!(f, "{path}:0"),
        }
    }
}

/// A transaction being queued after MULTI.
#[derive(Debug, Default)]
pub struct Multi {
    pub queued: Vec<Vec<Bytes>>,
    /// A command failed to queue (unknown, arity…): EXEC will abort.
    pub aborted: bool,
}

#[derive(Debug)]
pub struct Client {
    pub id: ClientId,
    pub peer: ClientAddr,
    pub local: ClientAddr,
    pub outbox: Outbox,
    pub db: usize,
    /// 2 or 3, set by HELLO.
    pub resp: u8,
    pub authenticated: bool,
    /// The ACL user this client runs as; None is `default` (see `acl`).
    pub user: Option<Bytes>,
    pub name: Option<Bytes>,
    pub lib_name: Option<Bytes>,
    pub lib_ver: Option<Bytes>,
    pub created_ms: u64,
    pub last_interaction_ms: u64,
    pub last_command: &'static str,
    pub multi: Option<Multi>,
    /// Keys this client WATCHes, as (db, key).
    pub watched: Vec<(usize, Bytes)>,
    /// A watched key changed: the next EXEC fails.
    pub watch_dirty: bool,
    pub channels: HashSet<Bytes>,
    pub patterns: HashSet<Bytes>,
    pub shard_channels: HashSet<Bytes>,
    pub monitor: bool,
    /// Close once the current batch's replies are written (QUIT, protocol errors).
    pub close_after_reply: bool,
    /// Redisson and other clients announce capabilities with CLIENT CAPA.
    pub capa_redirect: bool,
    pub no_evict: bool,
    /// SCRIPT DEBUG YES or SYNC: its next EVAL runs in a Lua debugging
    /// session (see `scripting::ldb`).
    pub lua_debug: Option<crate::scripting::ldb::Mode>,
    pub no_touch: bool,
    /// The pseudo-client scripts run their commands as (`[0 lua]` in MONITOR).
    pub is_script: bool,
    /// The connection to this server's master, when it is a replica: it
    /// runs the master's stream, gets no replies and is refused nothing a
    /// replica refuses clients (Redis's `CLIENT_MASTER`; see
    /// `engine::replica`).
    pub is_master: bool,
    /// A replica of this server: it sent SYNC or PSYNC and gets the
    /// replication stream (Redis's `CLIENT_SLAVE`).
    pub is_replica: bool,
    /// A replica whose snapshot is all written: it is held to the
    /// `replica` output limits (Redis's SLAVE_STATE_ONLINE).
    pub replica_online: bool,
    /// The replication offset after this client's last write (Redis's
    /// `woff`): what its WAIT waits for replicas to acknowledge.
    pub woff: u64,
    /// The script pseudo-client, while a script runs: the client whose
    /// script it is. What that client is sent meanwhile (a message the
    /// script publishes to a channel it subscribes to) and the WATCH
    /// invalidations the script causes it are gathered here, on the
    /// pseudo-client, and handed over when the run ends
    /// ([`Client::end_script_run`]).
    pub acting_for: Option<ClientId>,
    /// The reply of the command running sends its length last, as
    /// Redis's `addReplyDeferredLen` does: Redis holds all of it in the
    /// reply list, none in the reply buffer (see `output`).
    pub deferred_len: bool,
    /// CLIENT REPLY OFF: no replies until CLIENT REPLY ON (pushes still go).
    pub reply_off: bool,
    /// CLIENT REPLY SKIP: the reply to the command running is dropped.
    pub reply_skip: bool,
    /// CLIENT REPLY SKIP was the command running: the next one's reply is
    /// dropped.
    pub reply_skip_next: bool,
    /// Waiting in a blocking command (see `engine::blocking`).
    pub blocked: Option<Box<super::blocking::Blocked>>,
    /// Pub/sub messages for this client produced while its own batch runs;
    /// written before the reply of the command that produced them.
    pub inline_pushes: Vec<crate::reply::Reply>,
    /// CLIENT TRACKING on: its mode (see `engine::tracking`). The script
    /// pseudo-client holds a copy of its caller's while a script runs.
    pub tracking: Option<Box<super::tracking::ClientTracking>>,
    /// The script pseudo-client, while it runs a tracking caller's
    /// script: the keys the script declared, which its reads make the
    /// caller cache (Redis's `trackingRememberKeys(script_caller)`).
    pub script_keys: Vec<Bytes>,
    /// The script pseudo-client, while it runs: its caller's protocol and
    /// whether the caller is subscribed, for messages addressed to it.
    pub caller_protocol: Option<(u8, bool)>,
    /// The script pseudo-client, while a restricted user's script runs:
    /// the caller's CLIENT LIST line, which its ACL LOG entries show.
    pub caller_info: Option<String>,
    /// The memory client eviction last counted for it (see
    /// `client_evict`).
    pub accounted_memory: usize,
    /// The client the append-only file is replayed as: what it sends is
    /// obeyed as written (Redis's `mustObeyClient`), e.g. an exact stream
    /// trim with the LIMIT its approximate original had.
    pub replaying: bool,
    /// Cluster mode: ASKING was sent; the next command may use a slot
    /// being imported (Redis's CLIENT_ASKING).
    pub cluster_asking: bool,
    /// Cluster mode: READONLY (Redis's CLIENT_READONLY).
    pub cluster_readonly: bool,
}

impl Client {
    pub fn new(id: ClientId, peer: ClientAddr, local: ClientAddr, outbox: Outbox, now_ms: u64, authenticated: bool) -> Client {
        Client {
            id,
            peer,
            local,
            outbox,
            db: 0,
            resp: 2,
            authenticated,
            user: None,
            name: None,
            lib_name: None,
            lib_ver: None,
            created_ms: now_ms,
            last_interaction_ms: now_ms,
            last_command: "NULL",
            multi: None,
            watched: Vec::new(),
            watch_dirty: false,
            channels: HashSet::new(),
            patterns: HashSet::new(),
            shard_channels: HashSet::new(),
            monitor: false,
            close_after_reply: false,
            capa_redirect: false,
            no_evict: false,
            lua_debug: None,
            no_touch: false,
            is_script: false,
            is_master: false,
            is_replica: false,
            replica_online: false,
            woff: 0,
            acting_for: None,
            deferred_len: false,
            reply_off: false,
            reply_skip: false,
            reply_skip_next: false,
            blocked: None,
            inline_pushes: Vec::new(),
            tracking: None,
            script_keys: Vec::new(),
            caller_protocol: None,
            caller_info: None,
            accounted_memory: 0,
            replaying: false,
            cluster_asking: false,
            cluster_readonly: false,
        }
    }

    /// The client scripts run commands as: no connection behind it.
    pub fn script_client() -> Client {
        let addr = ClientAddr::Tcp(([0, 0, 0, 0], 0).into());
        let mut c = Client::new(0, addr.clone(), addr, Outbox::new(), 0, true);
        c.is_script = true;
        c
    }

    /// The script pseudo-client, set up to run `caller`'s script: the
    /// caller's database, RESP2 (Redis's script client speaks RESP2 until
    /// `redis.setresp`).
    pub fn begin_script_run(&mut self, caller: &Client, keys: &[Bytes]) {
        self.db = caller.db;
        self.resp = 2;
        // `redis.call` runs with the caller's permissions.
        self.user = caller.user.clone();
        self.acting_for = Some(caller.id);
        self.tracking = caller.tracking.clone();
        self.caller_protocol = Some((caller.resp, caller.in_pubsub_mode()));
        self.script_keys.clear();
        if self.tracking.is_some() {
            self.script_keys.extend_from_slice(keys);
        }
        // Whatever a run that panicked left is not this caller's.
        self.inline_pushes.clear();
        self.watch_dirty = false;
    }

    /// The run is over: what it gathered for the caller goes to the caller.
    pub fn end_script_run(&mut self, caller: &mut Client) {
        self.acting_for = None;
        self.caller_info = None;
        self.tracking = None;
        self.caller_protocol = None;
        self.script_keys.clear();
        caller.inline_pushes.append(&mut self.inline_pushes);
        caller.watch_dirty |= std::mem::take(&mut self.watch_dirty);
    }

    /// Whether what is addressed to client `id` is this client's to hold:
    /// its own, or its caller's while it runs a script.
    pub fn holds_for(&self, id: ClientId) -> bool {
        self.id == id || self.acting_for == Some(id)
    }

    /// The name of the ACL user this client runs as.
    pub fn user_name(&self) -> &[u8] {
        if self.is_master {
            // The master's stream runs as no user (Redis's NULL user).
            return b"(superuser)";
        }
        self.user.as_deref().unwrap_or(b"default")
    }

    /// How MONITOR names this client: `lua`, `unix:/path`, or `ip:port`.
    pub fn monitor_origin(&self) -> String {
        match &self.peer {
            _ if self.is_script => "lua".to_string(),
            ClientAddr::Unix(path) => format!("unix:{path}"),
            ClientAddr::Tcp(addr) => addr.to_string(),
        }
    }

    /// Channel + pattern subscriptions, the count SUBSCRIBE replies carry.
    pub fn subscription_count(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }

    /// True while any subscription is active (RESP2 subscribed mode).
    pub fn in_pubsub_mode(&self) -> bool {
        !self.channels.is_empty() || !self.patterns.is_empty() || !self.shard_channels.is_empty()
    }

    /// Which class of `client-output-buffer-limit` applies (Redis's
    /// `getClientType`: subscribed clients are `pubsub` in RESP3 too;
    /// MONITOR clients are `normal`).
    pub fn output_class(&self) -> ClientClass {
        if self.is_replica && self.replica_online && !self.monitor {
            ClientClass::Replica
        } else if self.in_pubsub_mode() {
            ClientClass::Pubsub
        } else {
            ClientClass::Normal
        }
    }

    /// Whether replies to this client are dropped (CLIENT REPLY OFF or
    /// SKIP); pub/sub messages are not replies and still go, as in Redis.
    pub fn replies_silenced(&self) -> bool {
        self.reply_off || self.reply_skip || self.is_master
    }

    /// After each command (Redis's `resetClient`): a SKIP drops one reply.
    pub fn after_command(&mut self) {
        self.reply_skip = std::mem::take(&mut self.reply_skip_next);
    }

    /// Whether the client connects from this machine, for
    /// `enable-test-commands local`: over a Unix socket, or from any
    /// loopback address (see [`is_loopback`]; Redis's own `islocalClient`,
    /// [`ClientAddr::is_local`], takes only 127.0.0.1 and ::1).
    pub fn on_this_machine(&self) -> bool {
        match &self.peer {
            ClientAddr::Tcp(addr) => is_loopback(addr.ip()),
            ClientAddr::Unix(_) => true,
        }
    }

    /// CLIENT LIST's `tot-mem`, what client eviction counts: what keylock
    /// holds for this client, as Redis's `getClientMemoryUsage` counts it:
    /// its state, read buffer, unwritten output, a transaction's queued
    /// arguments, and the entries of its watched keys, subscriptions and
    /// tracking prefixes, and the arguments of a request still arriving.
    /// Output counts as at least the client's reply buffer
    /// (`output::ReplyBuffer`), which a Redis client holds all along:
    /// what keylock allocates for it only as replies need it does not
    /// make the figure move.
    pub fn memory_usage(&self) -> usize {
        const ENTRY: usize = 32;
        let (qbuf, qbuf_free) = self.outbox.query_buffer();
        let output = {
            let output = self.outbox.buffer().borrow();
            output.allocated().max(output.reply_buffer().size)
        };
        let queued = self.multi.as_ref().map_or(0, |m| {
            m.queued
                .iter()
                .map(|argv| argv.iter().map(|a| a.len() + ENTRY).sum::<usize>())
                .sum()
        });
        let watched: usize = self.watched.iter().map(|(_, key)| key.len() + 2 * ENTRY).sum();
        let subscriptions = (self.channels.len() + self.patterns.len() + self.shard_channels.len()) * ENTRY;
        let prefixes = self
            .tracking
            .as_deref()
            .map_or(0, |t| t.prefixes.iter().map(|p| p.len() + ENTRY).sum());
        let (partial_args, partial_bytes) = self.outbox.partial_request();
        let partial = partial_bytes + partial_args * std::mem::size_of::<usize>();
        std::mem::size_of::<Client>() + qbuf + qbuf_free + output + queued + watched + subscriptions + prefixes + partial
    }

    /// CLIENT LIST / CLIENT INFO line for this client: `obl` is what Redis
    /// would hold in its reply buffer, `omem` in its reply list (what the
    /// output limits count), `oll` how many of keylock's output chunks
    /// hold the latter (see `output`).
    pub fn info_line(&self, now_ms: u64) -> String {
        self.info_line_running(now_ms, &[])
    }

    /// [`Client::info_line`] of the client running the command `argv`:
    /// its arguments show in `argv-mem` and `tot-mem`, as Redis holds them
    /// while the command runs.
    pub fn info_line_running(&self, now_ms: u64, argv: &[Bytes]) -> String {
        // The running command's arguments, or those of a request still
        // arriving (counted in `memory_usage`).
        let running: usize = argv.iter().map(Bytes::len).sum();
        let argv_mem = running + self.outbox.partial_request().1;
        let mut flags = String::new();
        if self.is_master {
            flags.push('M');
        }
        if self.is_replica {
            flags.push('S');
        }
        if self.monitor {
            flags.push('O');
        }
        if self.in_pubsub_mode() {
            flags.push('P');
        }
        if self.multi.is_some() {
            flags.push('x');
        }
        if self.blocked.is_some() {
            flags.push('b');
        }
        if let Some(t) = self.tracking.as_deref() {
            flags.push('t');
            if t.broken_redirect {
                flags.push('R');
            }
            if t.bcast {
                flags.push('B');
            }
        }
        if self.close_after_reply {
            flags.push('c');
        }
        if self.outbox.close_request() == CloseRequest::Now {
            flags.push('A');
        }
        if matches!(self.peer, ClientAddr::Unix(_)) {
            flags.push('U');
        }
        if self.no_evict {
            flags.push('e');
        }
        if self.no_touch {
            flags.push('T');
        }
        if flags.is_empty() {
            flags.push('N');
        }
        let text = |b: &Option<Bytes>| b.as_ref().map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default();
        let multi = self.multi.as_ref().map_or(-1, |m| m.queued.len() as i64);
        let (qbuf, qbuf_free) = self.outbox.query_buffer();
        let output = self.outbox.buffer().borrow();
        let split = output.split();
        format!(
            "id={} addr={} laddr={} fd=8 name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf={} qbuf-free={} argv-mem={} multi-mem=0 rbs={} rbp={} obl={} oll={} omem={} tot-mem={} events=r cmd={} user={} redir={} resp={} lib-name={} lib-ver={}",
            self.id,
            self.peer,
            self.local,
            text(&self.name),
            // Whole seconds of the clock apart, as Redis's `unixtime`.
            (now_ms / 1000).saturating_sub(self.created_ms / 1000),
            (now_ms / 1000).saturating_sub(self.last_interaction_ms / 1000),
            flags,
            self.db,
            self.channels.len(),
            self.patterns.len(),
            self.shard_channels.len(),
            multi,
            qbuf,
            qbuf_free,
            argv_mem,
            output.reply_buffer().size,
            output.reply_buffer().peak,
            split.buffer_fill,
            output.list_chunks(),
            split.in_list,
            self.memory_usage() + running + argv.len() * std::mem::size_of::<usize>(),
            self.last_command,
            String::from_utf8_lossy(self.user_name()),
            self.tracking.as_deref().map_or(-1, |t| t.redirect as i64),
            self.resp,
            text(&self.lib_name),
            text(&self.lib_ver),
        )
    }
}

/// A loopback address: 127.0.0.0/8, ::1, or an IPv4-mapped 127.x address
/// (`::ffff:127.0.0.1`, what a dual-stack socket shows an IPv4 peer as).
pub fn is_loopback(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v4) => v4.is_loopback(),
        std::net::IpAddr::V6(v6) => v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
    }
}

#[cfg(test)]
mod locality_tests {
    use super::is_loopback;

    #[test]
    fn unix_socket_clients_are_on_this_machine() {
        let unix = super::ClientAddr::Unix("/tmp/k.sock".into());
        let tcp = |a: &str| super::ClientAddr::Tcp(a.parse().unwrap());
        let mut client = super::Client::script_client();
        for (peer, local) in [
            (unix, true),
            (tcp("127.0.0.1:5000"), true),
            (tcp("[::ffff:127.0.0.1]:5000"), true),
            (tcp("10.1.1.1:5000"), false),
        ] {
            client.peer = peer;
            assert_eq!(client.on_this_machine(), local, "{}", client.peer);
        }
    }

    #[test]
    fn loopback_peers_are_local_and_others_are_not() {
        for local in ["127.0.0.1", "127.3.2.1", "::1", "::ffff:127.0.0.1"] {
            assert!(is_loopback(local.parse().unwrap()), "{local}");
        }
        for remote in [
            "10.0.0.1",
            "192.168.1.2",
            "0.0.0.0",
            "::",
            "::ffff:10.0.0.1",
            "2001:db8::1",
            "fe80::1",
        ] {
            assert!(!is_loopback(remote.parse().unwrap()), "{remote}");
        }
    }
}
