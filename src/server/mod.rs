//! The network side: listeners (TCP, TLS on `tls-port` — see `tls` —, and
//! a Unix domain socket with `unixsocket`; see `stream`), one task per
//! connection, and the public
//! [`Server`] / [`ServerHandle`] API used by the binary and by tests that
//! embed keylock.
//!
//! Starting and stopping follow redis-server's `initServer` and
//! `finishShutdown`, log lines included: bind (a failure ends the start
//! with Redis's line), write the pid file, `Server initialized`, the ready
//! lines; at the end `User requested shutdown...`, clients closed, the pid
//! and socket files removed, `Redis is now ready to exit, bye bye...`.
//!
//! A server is one thread running a single-threaded tokio runtime. The
//! connection tasks and the engine share that thread: a task parses what it
//! read, calls the engine inline for the whole batch, and writes the
//! replies. Nothing here touches the keyspace; it only moves bytes.

pub mod busy;
pub mod conn;
pub mod control;
mod debug_conn;
mod full_sync;
pub mod limits;
pub mod parser;
#[cfg(feature = "raft")]
mod raft;
mod replica;
mod stream;
mod tls;

pub use parser::SMALL_REQUEST;

use crate::error::os_error_text;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::watch;

use crate::clock::Clock;
use crate::config::Config;
use crate::engine::{Engine, State};
use crate::log;
use stream::{Listener, ListenerFd, StdListener};

/// The server thread's stack. Everything runs on it (connections, the
/// engine, Lua), so it must hold the deepest recursion a client can drive:
/// Lua's pattern matcher at its depth limit (200,000 nested calls of ~42
/// bytes in keylock's optimized Lua, ~8.4 MB), on top of Lua's 200 nested
/// C calls, or a script result nested to Lua's stack limit (~8,000 levels)
/// being converted, encoded and dropped. Redis runs the same on its 8 MB
/// main thread without the matcher's limit. Only the pages a recursion
/// touches are ever committed.
pub const ENGINE_STACK_BYTES: usize = 64 << 20;

/// What the listener and connection tasks share (all on the server thread).
pub(crate) struct Shared {
    pub engine: RefCell<Engine>,
    pub next_client_id: std::cell::Cell<u64>,
    pub connected: std::cell::Cell<usize>,
    pub stop: Arc<watch::Sender<bool>>,
    /// Set once the server stops for good: every connection closes.
    pub closing: watch::Sender<bool>,
    /// Wakes the flusher: the append-only file has records to write.
    pub aof_flush: tokio::sync::Notify,
    /// Every open connection's input side, for the busy responder and the
    /// cron, by client id (in order: the cron takes turns through them).
    pub conns: RefCell<BTreeMap<u64, Rc<conn::ConnIo>>>,
    /// The client id the cron's next pass over read buffers starts at.
    pub cron_cursor: Cell<u64>,
    /// The server's second as the cron last read it (Redis's cached
    /// `server.unixtime`): connections note their last read or write with
    /// it without reading the clock.
    pub unix_secs: Cell<u64>,
    /// The connection whose batch the engine is running.
    pub running_client: std::cell::Cell<Option<u64>>,
    /// Listening sockets, for the busy responder to accept from.
    pub listener_fds: RefCell<Vec<ListenerFd>>,
    /// False once the server stops taking connections (see
    /// [`Shared::stop_listening`]).
    pub listening: Cell<bool>,
    /// The TCP ports' accept tasks, with whether each is the TLS port's
    /// and its port: ended when CONFIG SET moves that port.
    pub port_accepts: RefCell<Vec<(bool, u16, tokio::task::AbortHandle)>>,
    /// Connections the busy responder accepted, waiting for their task.
    pub busy_accepted: RefCell<Vec<conn::Accepted>>,
    /// The engine's network limits, read by every connection task on
    /// each wake-up without borrowing the engine.
    pub limits: std::cell::Cell<limits::NetLimits>,
    /// Connections the busy responder left output, input or a close for:
    /// their tasks are woken once the script is over.
    pub busy_touched: RefCell<Vec<u64>>,
    /// The engine's clock, for the busy responder's output limit checks.
    pub clock: Clock,
    /// How far the append-only file is on disk: output waits for it with
    /// `appendfsync always` (see `engine::durable`).
    pub durability: Arc<crate::engine::durable::Durability>,
    /// What connections read and wrote (INFO stats).
    pub net: Arc<crate::engine::stats::NetStats>,
    /// Wakes the cluster bus links: the configuration changed, or there
    /// are messages to publish (see `cluster::bus`).
    pub cluster_wake: Rc<tokio::sync::Notify>,
    /// The cluster configuration version the links were last woken for.
    pub cluster_told: Cell<u64>,
    /// The link to the master of a replica: its generation and task (see
    /// `replica`).
    pub replica_link: RefCell<Option<(u64, tokio::task::AbortHandle)>>,
}

impl Shared {
    /// Bookkeeping after every batch: settings the busy responder reads,
    /// and tasks for connections it accepted.
    pub fn after_batch(self: &Rc<Self>) {
        // CONFIG SET port or tls-port bound new sockets.
        let rebound;
        {
            let engine = self.engine.borrow();
            // The batch's writes reach the append-only file (and, with
            // `appendfsync always`, the disk) before any of its replies
            // leave: the flusher writes them once the connections ready
            // now have run (see `engine::durable`).
            if engine.state.aof_on() {
                self.aof_flush.notify_one();
            }
            self.limits.set(net_limits(&engine));
            rebound = engine.state.tls_rebound.is_some() || engine.state.port_rebound.is_some();
        }
        if rebound {
            let (plain, tls) = {
                let mut engine = self.engine.borrow_mut();
                (engine.state.port_rebound.take(), engine.state.tls_rebound.take())
            };
            if let Some((old_port, listeners)) = plain {
                self.move_port(false, old_port, listeners);
            }
            if let Some(listeners) = tls {
                self.move_port(true, 0, listeners);
            }
        }
        if !self.busy_accepted.borrow().is_empty() {
            conn::spawn_busy_accepted(self);
        }
        replica::follow(self);
        if !self.engine.borrow().state.replicas.relays.is_empty() {
            full_sync::start_relays(self);
        }
        if self.engine.borrow().state.cluster_enabled() {
            // Proposes the batch's effects too.
            self.after_bus_message();
        } else {
            #[cfg(feature = "raft")]
            raft::propose(self);
        }
        if !self.busy_touched.borrow().is_empty() {
            let touched = std::mem::take(&mut *self.busy_touched.borrow_mut());
            let conns = self.conns.borrow();
            for id in touched {
                if let Some(io) = conns.get(&id) {
                    io.outbox.wake();
                }
            }
        }
    }

    /// Cluster mode, after anything that may have changed the cluster:
    /// the configuration written, links started for new nodes, and every
    /// link woken to tell the change (or publish) at once.
    pub fn after_bus_message(self: &Rc<Self>) {
        let wake = {
            let mut engine = self.engine.borrow_mut();
            engine.state.cluster_save_if_changed();
            let Some(c) = engine.state.cluster.as_deref_mut() else { return };
            let sends = c.take_new_sends();
            let wake = c.version != self.cluster_told.get() || sends;
            self.cluster_told.set(c.version);
            wake
        };
        crate::cluster::bus::start_links(self);
        if wake {
            self.cluster_wake.notify_waiters();
        }
        // A shard's leader dropping the keys of a slot another shard took
        // writes DELs, and a batch its writes: they go through the log.
        #[cfg(feature = "raft")]
        raft::propose(self);
    }

    /// Serves a listening socket: its accept task (a TCP port's is noted,
    /// to be ended if the port moves).
    fn listen(self: &Rc<Self>, listener: StdListener) {
        let ListenerFd { port, .. } = listener.fd();
        match listener.into_tokio() {
            Ok(l) => {
                let tls = l.is_tls();
                let task = tokio::task::spawn_local(accept_loop(l, self.clone()));
                if port != 0 {
                    self.port_accepts.borrow_mut().push((tls, port, task.abort_handle()));
                }
            }
            Err(e) => tracing::error!(error = %e, "listener"),
        }
    }

    /// CONFIG SET port (or tls-port, `tls`) bound new sockets (or none,
    /// for 0): that port's accept tasks end, closing the old sockets, and
    /// the new ones are served, as Redis's `changeListenPort`. Open
    /// connections stay.
    fn move_port(self: &Rc<Self>, tls: bool, old_port: u16, rebound: Vec<std::net::TcpListener>) {
        // The TLS port's sockets, or the plain port's (not the sentinel
        // port's, which is plain too).
        let moves = |is_tls: bool, port: u16| is_tls == tls && (tls || port == old_port);
        self.port_accepts.borrow_mut().retain(|(is_tls, port, task)| {
            if moves(*is_tls, *port) {
                task.abort();
            }
            !moves(*is_tls, *port)
        });
        let mut fds = self.listener_fds.borrow_mut();
        for l in fds.iter().filter(|l| l.unix_path.is_none() && moves(l.tls, l.port)) {
            // Out of the listening state now (the aborted task closes it
            // at its next turn), so that the next command may bind the
            // port again, as Redis closes its sockets at once.
            // SAFETY: shuts down (does not close) a socket its accept
            // task owns until it is dropped.
            unsafe { libc::shutdown(l.fd, libc::SHUT_RDWR) };
        }
        fds.retain(|l| l.unix_path.is_some() || !moves(l.tls, l.port));
        let listeners: Vec<StdListener> = rebound
            .into_iter()
            .map(|l| if tls { StdListener::Tls(l) } else { StdListener::Tcp(l) })
            .collect();
        fds.extend(listeners.iter().map(StdListener::fd));
        drop(fds);
        for listener in listeners {
            self.listen(listener);
        }
    }

    /// The server is stopping: its TCP listening sockets refuse
    /// connections from now on (a client that connects meets a closed
    /// port, as once redis-server has exited), before any connection is
    /// closed; their accept tasks end at their next wake-up. A Unix socket
    /// is left to the removal of its file at the end: shut down, it would
    /// stay readable with nothing to accept, and its accept task would spin.
    pub fn stop_listening(&self) {
        self.listening.set(false);
        for listener in self.listener_fds.borrow().iter().filter(|l| l.unix_path.is_none()) {
            // SAFETY: shuts down (does not close) a socket the server
            // thread owns until it ends.
            unsafe { libc::shutdown(listener.fd, libc::SHUT_RDWR) };
        }
    }

    /// The engine read the clock for a command at `now_ms`: the cached
    /// second moves on, as Redis refreshes it for each command it runs.
    pub fn note_time(&self, now_ms: u64) {
        self.unix_secs.set(self.unix_secs.get().max(now_ms / 1000));
    }

    /// The cron's part on the network side (the output limits are the
    /// engine's cron's): cache the second, and resize the
    /// read buffers of as many connections as Redis's `clientsCron` visits
    /// in one pass (all of them once a second at `hz` passes a second,
    /// and at least 5 a pass), taking turns by client id.
    fn cron(&self, hz: u64) {
        let now_secs = self.clock.now_ms() / 1000;
        self.unix_secs.set(now_secs);
        let conns = self.conns.borrow();
        let visits = (conns.len() / hz.max(1) as usize).max(conns.len().min(CRON_MIN_VISITS));
        let from = self.cron_cursor.get();
        let mut next = from;
        for (&id, io) in conns.range(from..).chain(conns.range(..from)).take(visits) {
            io.resize_input(now_secs);
            next = id + 1;
        }
        self.cron_cursor.set(next);
    }
}

/// The fewest connections one cron pass visits (Redis's
/// CLIENTS_CRON_MIN_ITERATIONS).
const CRON_MIN_VISITS: usize = 5;

/// The engine's settings the network side applies.
fn net_limits(engine: &Engine) -> limits::NetLimits {
    let runtime = &engine.state.runtime;
    limits::NetLimits {
        auth_required: runtime.auth_required,
        proto_max_bulk_len: runtime.proto_max_bulk_len,
        query_buffer_limit: runtime.client_query_buffer_limit,
        output: runtime.output_limits,
        evicts_clients: engine.state.client_eviction_limit() > 0,
    }
}

/// A keylock server, configured but not yet started.
pub struct Server {
    config: Config,
}

/// A server whose sockets are bound and listening, not yet serving: the
/// binary logs Redis's start-up banner between the two steps (after the
/// `listening on` line of `--port 0`, which needs the port).
pub struct BoundServer {
    config: Config,
    listeners: Vec<StdListener>,
    addr: Option<SocketAddr>,
    tls_addr: Option<SocketAddr>,
    tls: Option<Arc<crate::tls::TlsContext>>,
    cluster: Option<ClusterStart>,
    #[cfg(feature = "raft")]
    shard: Option<crate::raft::shard::Shard>,
}

/// Cluster mode at start: this node's view (from `nodes.conf`), its bus
/// listeners, and the locked configuration file.
struct ClusterStart {
    cluster: Box<crate::cluster::Cluster>,
    bus: Vec<std::net::TcpListener>,
    _lock: std::fs::File,
}

/// Cluster mode (`cluster-enabled yes`): `nodes.conf` locked and loaded
/// (or this node created), the bus port bound (Redis's `clusterInit`).
fn start_cluster(config: &Config, params: &crate::config_params::ConfigParams, port: u16) -> std::io::Result<ClusterStart> {
    let fail = |text: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, text);
    let dir = params.value("dir").unwrap_or(".");
    let file = params.value("cluster-config-file").unwrap_or("nodes.conf");
    let path = std::path::Path::new(dir).join(file).to_string_lossy().into_owned();
    let lock = crate::cluster::config_file::lock(&path).map_err(fail)?;
    let now = config.clock.now_ms();
    let mut cluster = match crate::cluster::config_file::load(&path, now).map_err(fail)? {
        Some(c) => {
            log::notice(format_args!("Node configuration loaded, I'm {:.40}", c.my_id()));
            c
        }
        None => {
            let c = crate::cluster::Cluster::new(path.clone(), now);
            log::notice(format_args!("No cluster configuration found, I'm {:.40}", c.my_id()));
            c
        }
    };
    let configured = params.int("cluster-port").unwrap_or(0) as u16;
    let bus_port = if configured != 0 {
        configured
    } else if port > 55535 {
        return Err(fail(
            "Redis port number too high. Cluster communication port is 10,000 port numbers higher than your Redis port. Your Redis port number must be 55535 or less.".into(),
        ));
    } else {
        port + 10000
    };
    let bus = bind_tcp(config, bus_port, "cluster bus")?;
    let bound = bus.first().map_or(bus_port, |l| l.local_addr().map_or(bus_port, |a| a.port()));
    let announced = |name: &str| params.int(name).unwrap_or(0) as u16;
    cluster.bus_port = bound;
    let me = cluster.myself_mut();
    me.port = if announced("cluster-announce-port") != 0 {
        announced("cluster-announce-port")
    } else {
        port
    };
    me.cport = if announced("cluster-announce-bus-port") != 0 {
        announced("cluster-announce-bus-port")
    } else {
        bound
    };
    if let Some(ip) = params.value("cluster-announce-ip").filter(|ip| !ip.is_empty()) {
        me.ip = ip.to_string();
    }
    me.hostname = params.value("cluster-announce-hostname").unwrap_or("").to_string();
    cluster.endpoint_type = crate::cluster::EndpointType::from_name(params.value("cluster-preferred-endpoint-type").unwrap_or("ip"));
    cluster.changed();
    if let Err(e) = crate::cluster::config_file::save(&mut cluster, &path, true) {
        return Err(fail(format!("Fatal: can't update cluster config file. ({})", os_error_text(&e))));
    }
    cluster.save_pending = false;
    cluster.fsync_pending = false;
    Ok(ClusterStart {
        cluster: Box::new(cluster),
        bus,
        _lock: lock,
    })
}

/// A running server: its address, its clock, and how to stop it.
pub struct ServerHandle {
    addr: Option<SocketAddr>,
    tls_addr: Option<SocketAddr>,
    unixsocket: Option<PathBuf>,
    clock: Clock,
    stop: Stopper,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    pub fn new(config: Config) -> Server {
        Server { config }
    }

    /// A test double: loopback, a free port, default settings.
    pub fn ephemeral() -> Server {
        Server::new(Config::ephemeral())
    }

    /// Hands every write, as it must be replayed (the stream Redis writes
    /// to its append-only file or to a replica), to `tap` once the command
    /// that made it finished. See [`crate::engine::effects`].
    pub fn with_effects(mut self, tap: crate::engine::effects::EffectsTap) -> Server {
        self.config.effects.push(tap);
        self
    }

    /// Binds the listening sockets and starts the server thread; returns
    /// once connections are being accepted.
    pub fn start(self) -> std::io::Result<ServerHandle> {
        self.bind()?.start()
    }

    /// Checks the configuration and binds the listening sockets, as Redis's
    /// `initServer`: the TLS context (with a `tls-port`), the TCP
    /// addresses (unless `--port 0` with a Unix socket or a TLS port), the
    /// TLS port's, then the Unix socket. On failure the error's text is the
    /// line Redis logs before exiting (`Failed to configure TLS. Check logs
    /// for more info.`, `Failed listening on port 6379 (TCP), aborting.`,
    /// `Failed opening Unix socket: …`); the warnings before it are logged
    /// here. Prints `listening on ADDR` when the
    /// configuration asks to announce the port.
    pub fn bind(self) -> std::io::Result<BoundServer> {
        // Redis's `initServer` sets `server.pid` first: its lines are `M`s.
        log::server_started();
        let config = self.config;
        config
            .validate()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let params = config
            .params()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let tls = if crate::tls::wanted(&params) {
            let context = crate::tls::TlsContext::configure(&params).ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "Failed to configure TLS. Check logs for more info.",
                )
            })?;
            Some(Arc::new(context))
        } else {
            None
        };
        let mut listeners = if config.serves_tcp() {
            bind_tcp(&config, config.port, "TCP")?.into_iter().map(StdListener::Tcp).collect()
        } else {
            Vec::new()
        };
        let addr = match listeners.first() {
            Some(StdListener::Tcp(l)) => Some(l.local_addr()?),
            _ => None,
        };
        let mut tls_addr = None;
        if config.tls_port != 0 {
            let tls_listeners = bind_tcp(&config, config.tls_port, "TLS")?;
            if let Some(l) = tls_listeners.first() {
                tls_addr = Some(l.local_addr()?);
            }
            listeners.extend(tls_listeners.into_iter().map(StdListener::Tls));
        }
        if listeners.is_empty() && config.unixsocket.is_none() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrNotAvailable,
                "Configured to not listen anywhere, exiting.",
            ));
        }
        if let Some(path) = &config.unixsocket {
            let listener = stream::bind_unix(path, config.unixsocketperm, config.tcp_backlog)
                .map_err(|e| std::io::Error::other(format!("Failed opening Unix socket: {e}")))?;
            listeners.push(listener);
        }
        if config.announce
            && let Some(addr) = addr
        {
            use std::io::Write;
            println!("listening on {addr}");
            let _ = std::io::stdout().flush();
        }
        // After the announce line, which a parent reads first: cluster
        // mode logs its node id.
        let cluster = if params.int("cluster-enabled") == Some(1) {
            Some(start_cluster(&config, &params, addr.map_or(0, |a| a.port()))?)
        } else {
            None
        };
        #[cfg(feature = "raft")]
        let sentinel_port = params.int("raft-sentinel-port").unwrap_or(0) as u16;
        #[cfg(feature = "raft")]
        if params.value("replication") == Some("raft") && sentinel_port != 0 {
            listeners.extend(bind_tcp(&config, sentinel_port, "sentinel")?.into_iter().map(StdListener::Tcp));
        }
        #[cfg(feature = "raft")]
        let shard = if params.value("replication") == Some("raft") {
            Some(raft::start_shard(&config, &params).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?)
        } else {
            None
        };
        Ok(BoundServer {
            config,
            listeners,
            addr,
            tls_addr,
            tls,
            cluster,
            #[cfg(feature = "raft")]
            shard,
        })
    }
}

impl BoundServer {
    /// The TCP address connections are accepted on (the first one bound),
    /// if the server listens on TCP.
    pub fn addr(&self) -> Option<SocketAddr> {
        self.addr
    }

    /// The TLS port's address, when the server listens on one.
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls_addr
    }

    /// Starts the server thread, writes the pid file, and logs Redis's
    /// `Server initialized` and ready lines.
    pub fn start(self) -> std::io::Result<ServerHandle> {
        let BoundServer {
            config,
            listeners,
            addr,
            tls_addr,
            tls,
            cluster,
            #[cfg(feature = "raft")]
            shard,
        } = self;
        let (stop_tx, _) = watch::channel(false);
        let stop = Arc::new(stop_tx);
        let port = addr.map_or(0, |a| a.port());
        // Redis shows `server.port ? server.port : server.tls_port`.
        let shown_port = if port != 0 { port } else { tls_addr.map_or(0, |a| a.port()) };
        if let Some(pidfile) = &config.pidfile {
            write_pidfile(pidfile);
        }
        let load_at_start = config.load_at_start;
        let mut thread_config = config.clone();
        let private_dir = private_dir(&mut thread_config)?;
        let thread_stop = stop.clone();
        let halt = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread_halt = halt.clone();
        let by_signal = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread_by_signal = by_signal.clone();
        let thread = std::thread::Builder::new()
            .name("keylock".into())
            .stack_size(ENGINE_STACK_BYTES)
            .spawn(move || {
                if show_banner(&thread_config) {
                    log::raw(log::Level::Notice, &banner(shown_port));
                } else {
                    let mode = if cluster.is_some() { "cluster" } else { "standalone" };
                    log::notice(format_args!("Running mode={mode}, port={shown_port}."));
                }
                log::warning(format_args!("Server initialized"));
                let files = ServerFiles::of(&thread_config);
                let ready = ReadyLines {
                    tcp: addr.is_some() || tls_addr.is_some(),
                    unixsocket: thread_config.unixsocket.clone(),
                };
                let mut state = State::with_halt(thread_config, port, thread_halt);
                state.tls = tls;
                let mut bus = Vec::new();
                let mut lock = None;
                if let Some(start) = cluster {
                    state.cluster = Some(start.cluster);
                    state.dbs[0].index_slots();
                    bus = start.bus;
                    lock = Some(start._lock);
                }
                #[cfg(feature = "raft")]
                let (shard, load_at_start) = match shard {
                    Some(shard) => {
                        state.attach_raft(&shard);
                        // The dataset comes from the Raft log.
                        (Some(shard), false)
                    }
                    None => (None, load_at_start),
                };
                #[cfg(not(feature = "raft"))]
                let shard: Option<()> = None;
                serve(listeners, bus, shard, state, load_at_start, ready, thread_stop, thread_by_signal);
                drop(lock);
                files.remove();
                if let Some(dir) = private_dir {
                    let _ = std::fs::remove_dir_all(dir);
                }
            })?;
        Ok(ServerHandle {
            addr,
            tls_addr,
            unixsocket: config.unixsocket.as_ref().map(PathBuf::from),
            clock: config.clock.clone(),
            stop: Stopper { stop, halt, by_signal },
            thread: Some(thread),
        })
    }
}

/// Whether the start shows keylock's banner instead of the `Running
/// mode=` line: with `always-show-logo yes`, or logging to a terminal, as
/// Redis decides for its logo.
fn show_banner(config: &Config) -> bool {
    use std::io::IsTerminal;
    let always = config
        .directives
        .iter()
        .rev()
        .find(|(name, _)| name == "always-show-logo")
        .is_some_and(|(_, values)| values.first().is_some_and(|v| v.eq_ignore_ascii_case("yes")));
    always || (config.logfile.as_deref().is_none_or(str::is_empty) && std::io::stdout().is_terminal())
}

/// keylock's start-up banner. It carries what tools read from Redis's
/// logo: the mode, `Port: N` and ` PID: N` (Redis's test suite finds its
/// server's pid there).
fn banner(port: u16) -> String {
    format!(
        "\n    keylock {} (Redis {} protocol) {} bit\n    Running in standalone mode\n    Port: {port}\n    PID: {}\n\n",
        crate::VERSION,
        crate::REDIS_VERSION,
        usize::BITS,
        std::process::id()
    )
}

/// Redis's `createPidFile`: best effort, a warning if it cannot be written.
fn write_pidfile(path: &str) {
    if let Err(e) = std::fs::write(path, format!("{}\n", std::process::id())) {
        log::warning(format_args!("Failed to write PID file: {}", os_error_text(&e)));
    }
}

/// The files a server leaves while it runs, removed at the end of Redis's
/// `finishShutdown`, once every client is closed, with its log lines.
/// The directory of its own a server keeps snapshots in when its config
/// asks for one and names no `dir` (see [`Config::private_dir`]); it is
/// added to the config as its `dir`.
fn private_dir(config: &mut Config) -> std::io::Result<Option<PathBuf>> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    if !config.private_dir || config.directives.iter().any(|(name, _)| name == "dir") {
        return Ok(None);
    }
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("keylock-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    config.directives.push(("dir".into(), vec![dir.to_string_lossy().into_owned()]));
    Ok(Some(dir))
}

struct ServerFiles {
    /// Whether Redis would remove a pid file (it logs so when daemonized,
    /// even without one to remove).
    pid_file_removal: bool,
    pidfile: Option<String>,
    unixsocket: Option<String>,
}

impl ServerFiles {
    fn of(config: &Config) -> ServerFiles {
        ServerFiles {
            pid_file_removal: config.daemonize || config.pidfile.is_some(),
            pidfile: config.pidfile.clone(),
            unixsocket: config.unixsocket.clone(),
        }
    }

    fn remove(self) {
        if self.pid_file_removal {
            log::notice(format_args!("Removing the pid file."));
            if let Some(path) = &self.pidfile {
                let _ = std::fs::remove_file(path);
            }
        }
        if let Some(path) = &self.unixsocket {
            log::notice(format_args!("Removing the unix socket file."));
            if let Err(e) = stream::unlink_unix(Path::new(path)) {
                log::warning(format_args!("Error removing the unix socket file: {e}"));
            }
        }
        log::warning(format_args!("Redis is now ready to exit, bye bye..."));
    }
}

/// Binds the TLS port (`tls`) or the plain port anew on every configured
/// address (CONFIG SET tls-port / port); the error is the line to log.
pub(crate) fn bind_port(config: &Config, port: u16, tls: bool) -> Result<Vec<std::net::TcpListener>, String> {
    bind_tcp(config, port, if tls { "TLS" } else { "TCP" }).map_err(|e| e.to_string())
}

/// Binds every configured TCP address on `port` (the plain port's or the
/// TLS port's, named by `kind` in the error), as Redis's `listenToPort`;
/// with port 0 the later ones share the first one's port. An address that
/// cannot be bound is logged; the server gives up unless the address is
/// not available or its protocol is not supported here (IPv6 on a host
/// without it), as Redis does.
fn bind_tcp(config: &Config, first_port: u16, kind: &str) -> std::io::Result<Vec<std::net::TcpListener>> {
    let mut listeners = Vec::new();
    let mut port = first_port;
    let fallback = ["127.0.0.1".to_string()];
    let hosts = if config.bind.is_empty() { &fallback[..] } else { &config.bind[..] };
    for host in hosts {
        // Redis 7.0.15 skips an address it cannot use whether or not it
        // is marked optional (`-`), so the mark changes nothing here.
        let host = host.trim_start_matches('-');
        let ip = match host {
            "*" => "0.0.0.0",
            "::*" => "::",
            h => h,
        };
        let addr = if ip.contains(':') {
            format!("[{ip}]:{port}")
        } else {
            format!("{ip}:{port}")
        };
        match listen_tcp(&addr, config.tcp_backlog) {
            Ok(listener) => {
                port = listener.local_addr()?.port();
                listener.set_nonblocking(true)?;
                listeners.push(listener);
            }
            Err(e) => {
                log::warning(format_args!(
                    "Warning: Could not create server TCP listening socket {host}:{port}: bind: {}",
                    os_error_text(&e)
                ));
                let skipped = matches!(
                    e.raw_os_error(),
                    Some(
                        libc::ENOPROTOOPT
                            | libc::EPROTONOSUPPORT
                            | libc::ESOCKTNOSUPPORT
                            | libc::EPFNOSUPPORT
                            | libc::EAFNOSUPPORT
                            | libc::EADDRNOTAVAIL
                    )
                );
                if !skipped {
                    return Err(std::io::Error::new(
                        e.kind(),
                        format!("Failed listening on port {first_port} ({kind}), aborting."),
                    ));
                }
            }
        }
    }
    Ok(listeners)
}

/// A TCP listening socket as Redis's `anetTcpServer` makes one: address
/// reuse, IPv6 sockets for IPv6 only, and `backlog` pending connections
/// (`tcp-backlog`; std's listener would hold 128, and a burst of connects
/// past it waits for SYN retransmits).
fn listen_tcp(addr: &str, backlog: i32) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let addr: SocketAddr = std::net::ToSocketAddrs::to_socket_addrs(addr)?
        .next()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::AddrNotAvailable, "no address to bind"))?;
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.bind(&addr.into())?;
    socket.listen(backlog)?;
    Ok(socket.into())
}

/// The lines Redis logs once it serves (after loading the dataset).
struct ReadyLines {
    tcp: bool,
    unixsocket: Option<String>,
}

impl ReadyLines {
    fn log(&self) {
        if self.tcp {
            log::notice(format_args!("Ready to accept connections"));
        }
        if let Some(path) = &self.unixsocket {
            log::notice(format_args!("The server is now ready to accept connections at {path}"));
        }
    }
}

/// Loads the dataset at start, as Redis's `loadDataFromDisk`: the snapshot
/// (with `load_at_start`), or the append-only file; other clients are
/// answered `LOADING` meanwhile. A damaged file ends the process, as it
/// ends redis-server; a load stopped by SHUTDOWN or a stop request leaves
/// nothing to save.
fn load_dataset(shared: &Shared, load_at_start: bool) {
    let mut engine = shared.engine.borrow_mut();
    let loaded = if load_at_start {
        engine
            .state
            .load_rdb_at_start()
            .map(|libraries| engine.scripts.load_libraries(libraries))
    } else {
        Ok(())
    };
    let loaded = loaded.and_then(|()| engine.load_aof());
    if let Err(e) = loaded {
        if engine.state.shutdown || engine.state.watchdog.shutdown_requested.get() || engine.state.watchdog.halted() {
            // Half a dataset is never saved.
            engine.state.shutdown_save_done = true;
            engine.state.shutdown = true;
            return;
        }
        log::warning(format_args!("{e}"));
        if !e.starts_with("Fatal error loading the DB") {
            log::warning(format_args!("Fatal error loading the DB, check server logs. Exiting."));
        }
        std::process::exit(1);
    }
    if engine.state.cluster_enabled() && !engine.state.cluster_verify_with_data() {
        log::warning(format_args!(
            "You can't have keys in a DB different than DB 0 when in Cluster mode. Exiting."
        ));
        std::process::exit(1);
    }
}

/// The server thread: runtime, listeners, cron, until stopped.
#[cfg(feature = "raft")]
type ShardStart = crate::raft::shard::Shard;
#[cfg(not(feature = "raft"))]
type ShardStart = ();

#[allow(clippy::too_many_arguments)]
fn serve(
    listeners: Vec<StdListener>,
    bus: Vec<std::net::TcpListener>,
    shard: Option<ShardStart>,
    state: State,
    load_at_start: bool,
    ready: ReadyLines,
    stop: Arc<watch::Sender<bool>>,
    by_signal: Arc<std::sync::atomic::AtomicBool>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "could not start the runtime");
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async move {
        let engine = Engine::new(state);
        let listener_fds = listeners.iter().map(StdListener::fd).collect();
        let shared = Rc::new(Shared {
            limits: std::cell::Cell::new(net_limits(&engine)),
            busy_touched: RefCell::new(Vec::new()),
            unix_secs: Cell::new(engine.state.clock.now_ms() / 1000),
            clock: engine.state.clock.clone(),
            durability: engine.state.durability.clone(),
            net: engine.state.net.clone(),
            listener_fds: RefCell::new(listener_fds),
            listening: Cell::new(true),
            port_accepts: RefCell::new(Vec::new()),
            busy_accepted: RefCell::new(Vec::new()),
            engine: RefCell::new(engine),
            next_client_id: std::cell::Cell::new(1),
            connected: std::cell::Cell::new(0),
            stop: stop.clone(),
            closing: watch::Sender::new(false),
            aof_flush: tokio::sync::Notify::new(),
            conns: RefCell::new(BTreeMap::new()),
            cron_cursor: Cell::new(0),
            running_client: std::cell::Cell::new(None),
            cluster_wake: Rc::new(tokio::sync::Notify::new()),
            cluster_told: Cell::new(u64::MAX),
            replica_link: RefCell::new(None),
        });
        let weak = Rc::downgrade(&shared);
        shared
            .engine
            .borrow()
            .state
            .watchdog
            .install(Box::new(move |script, state| busy::respond(&weak, script, state)));
        {
            let engine = shared.engine.borrow();
            let watchdog = &engine.state.watchdog;
            watchdog.install_debug_connector(debug_conn::connector(Rc::downgrade(&shared), watchdog.halt.clone()));
        }
        load_dataset(&shared, load_at_start);
        {
            // `replicaof` in the configuration: the link starts once the
            // dataset is loaded.
            let mut engine = shared.engine.borrow_mut();
            let master = engine.state.params.value("replicaof").and_then(|v| {
                let (host, port) = v.split_once(' ')?;
                Some((host.to_string(), port.parse::<u16>().ok()?))
            });
            if let Some((host, port)) = master {
                engine.state.replicate(&host, port, None);
                // Not a master turned replica: nothing to continue, unless
                // the snapshot loaded told the history (see `persistence`).
                engine.state.cached_master_db = engine.state.loaded_replication.take();
            }
            // A replica in the cluster (`nodes.conf`) starts its link now
            // as well, and keeps the expired keys it loaded from the
            // first cron on (its master deletes them).
            engine.state.cluster_sync_replication();
            engine.state.refresh_expiry_mode();
        }
        if shared.engine.borrow().shutdown_requested() {
            stop.send_replace(true);
        } else {
            ready.log();
        }
        // Connections accepted while loading get their tasks.
        shared.after_batch();
        for listener in listeners {
            // Unless CONFIG SET moved its port while the dataset loaded.
            let fd = listener.fd().fd;
            if shared.listener_fds.borrow().iter().any(|l| l.fd == fd) {
                shared.listen(listener);
            }
        }
        for listener in bus {
            match tokio::net::TcpListener::from_std(listener) {
                Ok(l) => {
                    tokio::task::spawn_local(crate::cluster::bus::accept_loop(l, shared.clone()));
                }
                Err(e) => tracing::error!(error = %e, "cluster bus listener"),
            }
        }
        shared.after_bus_message();
        #[cfg(feature = "raft")]
        if let Some(shard) = shard {
            raft::serve_shard(&shared, shard);
        }
        #[cfg(not(feature = "raft"))]
        let _ = shard;
        tokio::task::spawn_local(cron_loop(shared.clone()));
        tokio::task::spawn_local(aof_flusher(shared.clone()));
        let mut stopped = stop.subscribe();
        loop {
            while !*stopped.borrow_and_update() {
                if stopped.changed().await.is_err() {
                    break;
                }
            }
            // SHUTDOWN logged it and took its snapshot already.
            let by_command = shared.engine.borrow().state.shutdown;
            let signalled = by_signal.load(std::sync::atomic::Ordering::Relaxed);
            if !by_command {
                if shared.engine.borrow().state.shutdown_wait.is_none() {
                    log::warning(format_args!("User requested shutdown..."));
                }
                // A signal's shutdown first lets the replicas catch up, as
                // SHUTDOWN does; the cron stops the server once they have
                // (or the time is up).
                if signalled && shared.engine.borrow_mut().state.begin_shutdown_wait(false, false, false) {
                    // Its end (or its failure) is the cron's from here.
                    by_signal.store(false, std::sync::atomic::Ordering::Relaxed);
                    let engine = shared.engine.borrow();
                    engine.state.watchdog.halt.store(false, std::sync::atomic::Ordering::Relaxed);
                    stop.send_replace(false);
                    continue;
                }
            }
            let saved = shared.engine.borrow_mut().save_on_shutdown();
            if saved || by_command || !by_signal.swap(false, std::sync::atomic::Ordering::Relaxed) {
                break;
            }
            // A signal's shutdown whose snapshot failed: the server goes
            // on, as Redis's does, and a later signal tries again.
            log::warning(format_args!(
                "Errors trying to shut down the server. Check the logs for more information."
            ));
            shared
                .engine
                .borrow()
                .state
                .watchdog
                .halt
                .store(false, std::sync::atomic::Ordering::Relaxed);
            stop.send_replace(false);
        }
        shared.stop_listening();
        shared.closing.send_replace(true);
        crate::process::stopping();
        shared.engine.borrow_mut().close_all();
        // Let connection tasks flush what they have and close.
        tokio::task::yield_now().await;
    });
    drop(local);
    runtime.shutdown_timeout(Duration::from_millis(100));
}

async fn accept_loop(listener: Listener, shared: Rc<Shared>) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let stream = if listener.is_tls() {
                    // The context and `tls-auth-clients` in force now.
                    let Some(session) = tls::TlsSession::accept(&shared.engine.borrow().state) else {
                        continue;
                    };
                    stream.with_tls(session)
                } else {
                    stream
                };
                tokio::task::spawn_local(conn::serve(stream, peer, shared.clone()));
            }
            Err(_) if !shared.listening.get() => return,
            Err(e) => {
                // Out of file descriptors and the like: back off, keep serving.
                log::warning(format_args!("Accepting client connection: accept: {}", os_error_text(&e)));
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// Writes what the append-only file recorded, once per round of the
/// connections that were ready (woken by the first batch that recorded
/// something, it runs after the others queued already), so that the file
/// takes one write for all of them; replies waiting for it go then.
async fn aof_flusher(shared: Rc<Shared>) {
    loop {
        shared.aof_flush.notified().await;
        shared.engine.borrow_mut().state.aof_write();
    }
}

/// Runs the engine's cron `hz` times a second (CONFIG SET hz applies at the next tick).
async fn cron_loop(shared: Rc<Shared>) {
    loop {
        let hz = shared.engine.borrow().state.runtime.hz.max(1);
        tokio::time::sleep(Duration::from_millis(1000 / hz as u64)).await;
        shared.engine.borrow_mut().cron();
        shared.cron(hz as u64);
        if shared.engine.borrow().shutdown_requested() && !*shared.stop.borrow() {
            // A shutdown that waited for the replicas is done waiting.
            shared.stop_listening();
            shared.stop.send_replace(true);
        }
        // A failover's timeout may have made this server a replica.
        replica::follow(&shared);
        if !shared.engine.borrow().state.replicas.relays.is_empty() {
            full_sync::start_relays(&shared);
        }
        if shared.engine.borrow().state.cluster_enabled() {
            shared.after_bus_message();
        }
        #[cfg(feature = "raft")]
        raft::propose(&shared);
    }
}

impl ServerHandle {
    /// The TCP address the server accepts connections on; `0.0.0.0:0` for
    /// a server on a Unix socket only (see [`ServerHandle::unix_socket`]).
    pub fn addr(&self) -> SocketAddr {
        self.addr.unwrap_or_else(|| ([0, 0, 0, 0], 0).into())
    }

    /// The TLS port's address, when the server listened on one at start
    /// (CONFIG SET tls-port may have moved it since).
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls_addr
    }

    /// The Unix socket's path, when the server listens on one.
    pub fn unix_socket(&self) -> Option<&Path> {
        self.unixsocket.as_deref()
    }

    /// `redis://ip:port/` for client libraries, or `unix:///path` for a
    /// server on a Unix socket only, `rediss://ip:port/` for one on TLS only.
    pub fn url(&self) -> String {
        if let (None, None, Some(tls)) = (&self.addr, &self.unixsocket, self.tls_addr) {
            return format!("rediss://{tls}/");
        }
        match (&self.addr, &self.unixsocket) {
            (None, Some(path)) => format!("unix://{}", path.display()),
            _ => format!("redis://{}/", self.addr()),
        }
    }

    /// The server's clock; `Clock::advance` moves TTLs forward in tests.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// A handle that can stop the server from another thread (signal handlers).
    pub fn stopper(&self) -> Stopper {
        self.stop.clone()
    }

    /// Blocks until the server stops (SHUTDOWN, a `Stopper`, or `shutdown`).
    pub fn wait(&mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// Stops accepting, closes every connection and waits for the server thread.
    pub fn shutdown(mut self) {
        self.stop.stop();
        self.wait();
    }
}

/// Stops a running server from anywhere: `SHUTDOWN` without a client.
#[derive(Clone)]
pub struct Stopper {
    stop: Arc<watch::Sender<bool>>,
    /// Ends a script that is running (SHUTDOWN NOSAVE's effect), so that
    /// stopping never waits on a script that does not end.
    halt: Arc<std::sync::atomic::AtomicBool>,
    /// The stop asked for is a signal's (see [`Stopper::stop_on_signal`]).
    by_signal: Arc<std::sync::atomic::AtomicBool>,
}

impl Stopper {
    pub fn stop(&self) {
        self.halt.store(true, std::sync::atomic::Ordering::Relaxed);
        self.stop.send_replace(true);
    }

    /// A stop is under way.
    pub fn stopping(&self) -> bool {
        *self.stop.borrow()
    }

    /// SIGTERM or SIGINT, as Redis handles them: the server stops as
    /// SHUTDOWN does, unless the final snapshot fails, which leaves it
    /// running (`Errors trying to shut down the server…`) so that nothing
    /// is lost. False when a stop is already under way.
    pub fn stop_on_signal(&self) -> bool {
        if *self.stop.borrow() {
            return false;
        }
        self.by_signal.store(true, std::sync::atomic::Ordering::Relaxed);
        self.stop();
        true
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.stop.stop();
            self.wait();
        }
    }
}
