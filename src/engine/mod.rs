//! The engine: everything that owns data — every database, every client's
//! state, the pub/sub index — and runs commands one after another.
//!
//! The engine runs on the server's single thread, called inline by the
//! connection tasks: a pipeline read in one go is executed as one batch and
//! its replies are written back as one buffer, with no thread hop at all.
//! Measured against an engine on its own thread fed by channels, this
//! doubled throughput on a 2-core machine (the hop cost two futex wake-ups
//! per batch; see the README's benchmark section). Because only this thread
//! touches the data, every command (and every EXEC) is atomic with no locks
//! in the data path. The cron (active expiry, idle timeouts) runs `hz`
//! times a second on the same thread.

pub mod aof;
pub mod aof_base;
pub mod blocking;
pub mod client;
pub mod client_evict;
pub mod cluster;
pub mod debug_sessions;
pub mod durable;
pub mod effects;
pub mod evict;
pub mod exec;
pub mod failover;
pub mod faults;
pub mod histogram;
pub mod latency;
pub mod output;
pub mod persistence;
#[cfg(feature = "raft")]
pub mod raft;
pub mod replica;
pub mod replication;
pub mod scripts;
pub mod slowlog;
pub mod stats;
pub mod tracking;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

pub use client::{Client, ClientAddr};
pub use output::{ClientClass, CloseRequest, Outbox, OutputLimit, OutputLimits, REPLY_BUFFER, REPLY_BUFFER_SHRUNK, ReplyGauge};
pub use scripts::Scripts;
use stats::Stats;

use crate::clock::Clock;
use crate::commands::table::{Command, Registry, flag};
use crate::config::Config;
use crate::config_params::ConfigParams;
use crate::db::{ClientId, Db};
use crate::error::CmdError;
use crate::pubsub::{Kind, PubSub};
use crate::reply::Reply;

/// Connected clients by id. Ids are the server's sequence numbers, so a
/// keyed hash without SipHash's cost is enough.
pub type ClientMap = HashMap<ClientId, Box<Client>, ahash::RandomState>;

/// The Lua heap limit unless configured otherwise (1 GiB).
const DEFAULT_LUA_MEMORY_LIMIT: &str = "1073741824";

/// The data and the clients: everything commands work on, handed to
/// command handlers through `Ctx` (the scripting beside it is
/// [`Scripts`]).
/// A fresh 40-character id (run id, replication id).
pub fn new_run_id() -> String {
    // Hex, as Redis's `getRandomHexChars`.
    (0..40).map(|_| char::from(b"0123456789abcdef"[fastrand::usize(..16)])).collect()
}

/// The switches DEBUG flips, for Redis's tests.
#[derive(Debug, Clone, Copy)]
pub struct DebugSwitches {
    /// DEBUG SET-ACTIVE-EXPIRE: the cron reclaims expired keys.
    pub active_expire: bool,
    /// DEBUG SET-SKIP-CHECKSUM-VALIDATION: RESTORE skips the CRC check.
    pub skip_checksum_validation: bool,
    /// DEBUG PAUSE-CRON: the cron does nothing.
    pub pause_cron: bool,
    /// DEBUG SET-DISABLE-DENY-SCRIPTS: scripts may run `noscript` commands.
    pub allow_noscript: bool,
    /// DEBUG REPLYBUFFER PEAK-RESET-TIME: how often a client's reply
    /// buffer peak starts over, in milliseconds (None: never).
    pub reply_buffer_peak_reset_ms: Option<u64>,
    /// DEBUG REPLYBUFFER RESIZING: the cron resizes reply buffers.
    pub reply_buffer_resizing: bool,
}

impl Default for DebugSwitches {
    fn default() -> Self {
        DebugSwitches {
            active_expire: true,
            skip_checksum_validation: false,
            pause_cron: false,
            allow_noscript: false,
            reply_buffer_peak_reset_ms: Some(output::REPLY_BUFFER_PEAK_RESET_MS),
            reply_buffer_resizing: true,
        }
    }
}

pub struct State {
    pub dbs: Vec<Db>,
    /// Connected clients, except the one whose batch is executing. Boxed,
    /// so that taking one out for its batch and putting it back moves a
    /// pointer, not the client (a client is over a kilobyte: moving it
    /// twice per batch cost a tenth of a GET).
    pub clients: ClientMap,
    pub pubsub: PubSub,
    pub params: ConfigParams,
    /// The TLS context connections accepted on `tls-port` are served with
    /// (built at start, rebuilt by CONFIG SET of a `tls-*` parameter).
    pub tls: Option<std::sync::Arc<crate::tls::TlsContext>>,
    /// Listening sockets CONFIG SET tls-port bound, for the network side
    /// to serve from in place of the TLS port's (none: `tls-port 0`).
    pub tls_rebound: Option<Vec<std::net::TcpListener>>,
    /// CONFIG SET port bound these (none for port 0) in place of the
    /// port given first: the network side moves to them after the batch.
    pub port_rebound: Option<(u16, Vec<std::net::TcpListener>)>,
    pub config: Config,
    pub stats: Stats,
    pub clock: Clock,
    pub started: Instant,
    pub run_id: String,
    /// INFO's `master_replid`: the run id until DEBUG CHANGE-REPL-ID
    /// draws a new one.
    pub repl_id: String,
    /// What DEBUG switches at run time (Redis's `active_expire_enabled`,
    /// `skip_checksum_validation`, `pause_cron`).
    pub debug: DebugSwitches,
    /// The address the server listens on (INFO tcp_port).
    pub port: u16,
    /// Clients in MONITOR mode.
    pub monitors: Vec<ClientId>,
    /// How many clients WATCH something; while zero, writes skip the check.
    pub watching: usize,
    /// Set by SHUTDOWN: the engine stops after this batch.
    pub shutdown: bool,
    /// SHUTDOWN settled the final snapshot (NOSAVE, or saved it).
    pub shutdown_save_done: bool,
    /// Clients to disconnect after the current batch (CLIENT KILL).
    pub kill_queue: Vec<ClientId>,
    /// Settings read on hot paths, kept in step with CONFIG SET.
    pub runtime: RuntimeSettings,
    /// While a script runs, the time every command in it sees (Redis freezes it).
    pub script_time: Option<u64>,
    /// Watches running scripts for `busy-reply-threshold`, SCRIPT KILL and SHUTDOWN NOSAVE.
    pub watchdog: std::rc::Rc<crate::scripting::Watchdog>,
    /// Commands whose handler panicked, since start (INFO `# Keylock`).
    pub command_panics: u64,
    /// How many error replies in the reply the handler is returning were
    /// counted where they arose (a script's result holding, or raising, a
    /// command's error: Redis's `ignore_error_stats_update`). They are not
    /// counted again, but each makes the command a failed call, as Redis's
    /// `afterErrorReply` does with ERR_REPLY_FLAG_NO_STATS_UPDATE.
    pub reply_counted_errors: u64,
    /// Used memory was past `maxmemory` when the client's command started
    /// (Redis's `pre_command_oom_state`): scripts it runs may not start
    /// writing.
    pub pre_command_oom: bool,
    /// INFO's `client_recent_max_output_buffer`, sampled by the cron.
    pub output_peaks: output::RecentPeaks,
    /// Where the cron's next pass over the clients starts.
    clients_cron_next: usize,
    /// Keyspace events recorded by the databases, published by
    /// [`State::publish_key_events`]; its flags follow
    /// `notify-keyspace-events` (see [`State::apply_runtime`]).
    pub key_events: crate::db::KeyEvents,
    /// The second key accesses are stamped with (OBJECT IDLETIME), set
    /// from the clock before each command; shared by every database.
    pub access_clock: crate::db::keyspace::AccessClock,
    /// Clients waiting in a blocking command (INFO `blocked_clients`).
    pub blocked_clients: usize,
    /// Clients whose wait ended with a reply since the last batch or cron
    /// (see [`BatchOutput::woken`]).
    pub woken: Vec<ClientId>,
    /// Changes to the dataset since start (Redis's `server.dirty`):
    /// handlers add what Redis's add; a command that changed a key and
    /// said nothing counts one.
    pub dirty: u64,
    /// `dirty` at the last save, for INFO `rdb_changes_since_last_save`.
    pub dirty_at_save: u64,
    /// The running command's handler counted its changes (even none): a
    /// key it modified is not counted as one change for it.
    pub dirty_counted: bool,
    /// The effect stream (see [`effects`]).
    pub effects: effects::Effects,
    /// Where a running script's writes go (`redis.set_repl`): the
    /// append-only file, replicas, both or neither.
    pub script_repl: u8,
    /// RDB snapshots (see [`persistence`]).
    pub persistence: persistence::Persistence,
    /// Forked Lua debugging sessions (see [`debug_sessions`]).
    pub debug_sessions: debug_sessions::DebugSessions,
    /// The append-only file, while `appendonly` is on (see [`aof`]).
    pub aof: Option<aof::Aof>,
    /// The effect consumer the append-only file reads through.
    pub aof_tap: Option<u64>,
    /// BGREWRITEAOF's child and statistics (see [`aof::Rewrites`]).
    pub aof_rewrites: aof::Rewrites,
    /// `maxmemory` eviction's state (see [`evict`]).
    pub eviction: evict::Eviction,
    /// What the connections read and wrote.
    pub net: std::sync::Arc<stats::NetStats>,
    /// How far the append-only file is on disk, for replies that wait for
    /// it (see [`durable`]).
    pub durability: std::sync::Arc<durable::Durability>,
    /// Connections served as replicas (see [`replication`]).
    pub replicas: replication::Replicas,
    /// The master this server replicates, if it is a replica (see
    /// [`replica`]).
    pub master: Option<Box<replica::Master>>,
    /// Master clients of links that ended, for the engine to forget.
    pub master_clients_gone: Vec<ClientId>,
    /// INFO's `master_replid2`: the replication ID of the master this
    /// server replicated until REPLICAOF NO ONE (empty: none), valid up
    /// to `second_repl_offset` (-1: none).
    pub repl_id2: String,
    pub second_repl_offset: i64,
    /// Redis's cached master, on a replica whose link broke (or a master
    /// told REPLICAOF): there is a history to continue with PSYNC, the
    /// replication ID and offset reached, whose stream had this database
    /// selected (see `replica`).
    pub cached_master_db: Option<usize>,
    /// Keys a client's command gave a deadline on this writable replica,
    /// which it expires itself (see `replica::ReplicaExpires`).
    pub replica_expires: replica::ReplicaExpires,
    /// The stream database of a replication history the snapshot loaded
    /// at start told, for the replica's first link to continue.
    pub loaded_replication: Option<usize>,
    /// FAILOVER under way (see `failover`).
    pub failover: Option<failover::Failover>,
    /// A shutdown waiting for the replicas to catch up, writes paused
    /// meanwhile (see `replication::ShutdownWait`).
    pub shutdown_wait: Option<replication::ShutdownWait>,
    /// CLIENT PAUSE in force, if any (see `blocking`).
    pub pause: Option<blocking::ClientPause>,
    /// Blocking commands answer at once (Redis's CLIENT_DENY_BLOCKING):
    /// set while EXEC runs a transaction.
    pub deny_blocking: bool,
    /// Injected faults (KEYLOCK FAULT).
    pub faults: faults::Faults,
    /// The name of the client whose command runs, while faults are set (a
    /// rule's CLIENT pattern is matched against it, also for what its
    /// scripts publish).
    pub fault_caller: Option<Bytes>,
    /// The running command's connection is to close once it ran, without
    /// its reply (a DISCONNECT AFTER fault).
    pub disconnect_after: bool,
    /// The running command's reply is to be held back this many
    /// milliseconds (a DELAY fault).
    pub delay_reply: Option<u64>,
    /// Set while other clients' commands are served during a busy script.
    pub busy: Option<BusyRun>,
    /// Set while the dataset is loaded at start (see [`persistence::Loading`]).
    pub loading: Option<persistence::Loading>,
    /// Memory in use once the server had started (MEMORY STATS'
    /// `startup.allocated`).
    pub startup_allocated: u64,
    /// SLOWLOG's entries.
    pub slowlog: slowlog::SlowLog,
    pub latency: latency::LatencyMonitor,
    /// MIGRATE's cached connections to its targets.
    pub migrate_sockets: crate::commands::migrate::SocketCache,
    /// When the cron last logged the databases and clients (every 5 s at
    /// `loglevel verbose` or `debug`, as Redis's `serverCron`).
    cron_logged_ms: u64,
    /// Client-side caching (CLIENT TRACKING), see `tracking`.
    pub tracking: tracking::Tracking,
    /// Users and their permissions, and the ACL log (see `acl`).
    pub acl: crate::acl::Acl,
    /// Client eviction's running total (see `client_evict`).
    pub client_memory: client_evict::ClientMemory,
    /// The names commands run under (`rename-command`).
    pub renames: crate::commands::table::Renames,
    /// Cluster mode (`cluster-enabled yes`): this node's view of the
    /// cluster (see `crate::cluster`); None on a standalone server.
    pub cluster: Option<Box<crate::cluster::Cluster>>,
    /// A Raft-replicated shard's member (`--replication raft`): its role
    /// and what it proposed (see [`raft`]).
    #[cfg(feature = "raft")]
    pub raft: Option<Box<raft::RaftState>>,
    /// This member of a shard is not its leader: keys past their deadline
    /// stay (the leader's DELs remove them) and no expiry cycle runs.
    pub raft_follower: bool,
    /// Whether a data command was renamed: scripts then run through Lua
    /// (see `Renames::moves_data_commands`).
    pub renames_data_commands: bool,
}

/// A refusal for the ACL log.
pub struct AclDenial {
    pub reason: crate::acl::Reason,
    pub context: crate::acl::Context,
    pub object: Bytes,
    pub username: Bytes,
}

/// The users at start-up, as Redis's `ACLLoadUsersAtStartup` sets them:
/// `requirepass` for the default user, then the configuration's `user`
/// lines, then the ACL file. A broken file or line is logged and left out.
fn startup_acl(config: &Config, params: &ConfigParams) -> crate::acl::Acl {
    let mut acl = crate::acl::Acl::new(params.value("acl-pubsub-default") == Some("allchannels"));
    if let Some(pass) = params.value("requirepass").filter(|p| !p.is_empty()) {
        acl.set_default_password(Some(pass.as_bytes()));
    }
    let users: Vec<Vec<Bytes>> = config
        .users
        .iter()
        .map(|line| line.iter().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect())
        .collect();
    if let Err(e) = acl.load_configured(&users) {
        tracing::warn!("{e}");
    }
    if let Some(path) = params.value("aclfile").filter(|p| !p.is_empty())
        && let Err(e) = acl.load_file(path)
    {
        tracing::warn!("Aborting Redis startup because of ACL errors: {e}");
    }
    acl
}

/// Redis's `shared.oomerr`.
pub const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";
/// Redis's `shared.noreplicaserr`.
pub const NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";

/// The parameters the server consults constantly, as typed values.
#[derive(Clone, Copy, Debug)]
pub struct RuntimeSettings {
    pub proto_max_bulk_len: i64,
    pub maxclients: usize,
    pub hz: u32,
    /// Idle client timeout in seconds (0: never).
    pub timeout: u64,
    /// `busy-reply-threshold` (alias `lua-time-limit`) in milliseconds.
    pub busy_reply_threshold_ms: u64,
    /// `lua-memory-limit`: the Lua heap's ceiling in bytes (0: none).
    pub lua_memory_limit: usize,
    /// `native-scripts`: recognized scripts run natively (see `scripting::native`).
    pub native_scripts: bool,
    /// `requirepass` is set: read after every batch, so kept here.
    pub auth_required: bool,
    /// `client-query-buffer-limit`: a connection whose unparsed input grows
    /// past this many bytes is closed.
    pub client_query_buffer_limit: usize,
    /// `client-output-buffer-limit`, every class (see [`output`]).
    pub output_limits: OutputLimits,
    /// `maxmemory` in bytes (0: none).
    pub maxmemory: u64,
    /// `min-replicas-to-write` and `min-replicas-max-lag`: with both set,
    /// writes need that many good replicas (keylock has none).
    pub min_replicas_to_write: i64,
    pub min_replicas_max_lag: i64,
    /// `notify-keyspace-events` as Redis's class flags (0: off).
    pub notify_keyspace_events: u32,
    /// `tracking-table-max-keys` (0: no limit).
    pub tracking_table_max_keys: usize,
    /// `hash-max-listpack-entries` / `-value`.
    pub hash_limits: crate::db::hash::PackLimits,
    /// `slowlog-log-slower-than` in microseconds (negative: off).
    pub slowlog_log_slower_than: i64,
    /// `slowlog-max-len`.
    pub slowlog_max_len: usize,
    /// `latency-monitor-threshold` in milliseconds (0: the monitor is off).
    pub latency_monitor_threshold: i64,
    /// `latency-tracking`: per-command latency histograms.
    pub latency_tracking: bool,
    /// `set-max-intset-entries`: the most members a set keeps as an intset.
    pub set_max_intset_entries: usize,
    /// `key-load-delay`: microseconds a load waits after each key (a
    /// negative -n waits 1 µs once in n keys), for tests.
    pub key_load_delay: i64,
    /// `loading-process-events-interval-bytes`: a load serves other
    /// clients each time this many more bytes were loaded.
    pub loading_interval: u64,
    /// `maxmemory-policy` and `maxmemory-samples`.
    pub maxmemory_policy: evict::Policy,
    pub maxmemory_samples: usize,
    /// `lfu-log-factor` and `lfu-decay-time`.
    pub lfu_log_factor: u32,
    pub lfu_decay_time: u32,
    /// `maxmemory-clients`: bytes, or a percentage of `maxmemory` as its
    /// negation (0: no client eviction; see `client_evict`).
    pub maxmemory_clients: i64,
}

impl RuntimeSettings {
    /// The LFU parameters, when an LFU policy is in force.
    pub fn lfu(&self) -> Option<(u32, u32)> {
        self.maxmemory_policy.is_lfu().then_some((self.lfu_log_factor, self.lfu_decay_time))
    }

    pub fn from_params(p: &ConfigParams) -> RuntimeSettings {
        RuntimeSettings {
            proto_max_bulk_len: p.int("proto-max-bulk-len").unwrap_or(512 * 1024 * 1024),
            auth_required: p.value("requirepass").is_some_and(|pass| !pass.is_empty()),
            maxclients: p.int("maxclients").unwrap_or(10000).max(1) as usize,
            hz: p.int("hz").unwrap_or(10).clamp(1, 500) as u32,
            timeout: p.int("timeout").unwrap_or(0).max(0) as u64,
            busy_reply_threshold_ms: p.int("busy-reply-threshold").unwrap_or(5000).max(0) as u64,
            lua_memory_limit: p.int("lua-memory-limit").unwrap_or(0).max(0) as usize,
            native_scripts: p.int("native-scripts").unwrap_or(1) == 1,
            client_query_buffer_limit: p.int("client-query-buffer-limit").unwrap_or(1 << 30).max(0) as usize,
            output_limits: OutputLimits::parse(p.value("client-output-buffer-limit").unwrap_or("")),
            maxmemory: p.int("maxmemory").unwrap_or(0).max(0) as u64,
            min_replicas_to_write: p.int("min-replicas-to-write").unwrap_or(0),
            min_replicas_max_lag: p.int("min-replicas-max-lag").unwrap_or(10),
            notify_keyspace_events: crate::config_params::keyspace_event_flags(p.value("notify-keyspace-events").unwrap_or(""))
                .unwrap_or(0),
            tracking_table_max_keys: p.int("tracking-table-max-keys").unwrap_or(1_000_000).max(0) as usize,
            maxmemory_clients: p.int("maxmemory-clients").unwrap_or(0),
            hash_limits: crate::db::hash::PackLimits::new(
                p.int("hash-max-listpack-entries").unwrap_or(128),
                p.int("hash-max-listpack-value").unwrap_or(64),
            ),
            slowlog_log_slower_than: p.int("slowlog-log-slower-than").unwrap_or(10_000),
            slowlog_max_len: p.int("slowlog-max-len").unwrap_or(128).max(0) as usize,
            latency_monitor_threshold: p.int("latency-monitor-threshold").unwrap_or(0),
            latency_tracking: p.int("latency-tracking").unwrap_or(1) == 1,
            set_max_intset_entries: p.int("set-max-intset-entries").unwrap_or(512).max(0) as usize,
            key_load_delay: p.int("key-load-delay").unwrap_or(0),
            loading_interval: p.int("loading-process-events-interval-bytes").unwrap_or(2 << 20).max(0) as u64,
            maxmemory_policy: evict::Policy::named(p.value("maxmemory-policy").unwrap_or("noeviction")),
            maxmemory_samples: p.int("maxmemory-samples").unwrap_or(5).max(1) as usize,
            lfu_log_factor: p.int("lfu-log-factor").unwrap_or(10).max(0) as u32,
            lfu_decay_time: p.int("lfu-decay-time").unwrap_or(1).max(0) as u32,
        }
    }
}

impl State {
    pub fn new(config: Config, port: u16) -> State {
        State::with_halt(config, port, Default::default())
    }

    /// A state whose running script ends when `halt` is set (the server's
    /// handle sets it when stopping).
    pub fn with_halt(config: Config, port: u16, halt: std::sync::Arc<std::sync::atomic::AtomicBool>) -> State {
        crate::clock::ticks::start();
        let mut params = ConfigParams::new();
        params.set_keylock_default("save", "");
        params.set_default("appendonly", "no");
        params.set_default("port", &port.to_string());
        for (name, values) in &config.directives {
            // Start-up validated the directives keylock itself reads;
            // the rest are recorded as Redis would.
            let _ = params.apply_directive(name, values);
        }
        // Where the server actually listens.
        params.set_default("port", &port.to_string());
        params.set_default("bind", &config.bind.join(" "));
        // A script that allocates without bound must fail, not take the server down.
        params.set_keylock_default("lua-memory-limit", DEFAULT_LUA_MEMORY_LIMIT);
        for (name, values) in &config.directives {
            if name == "lua-memory-limit" {
                let _ = params.apply_directive(name, values);
            }
        }
        let mut runtime = RuntimeSettings::from_params(&params);
        let acl = startup_acl(&config, &params);
        let mut renames = crate::commands::table::Renames::default();
        for (old, new) in &config.renamed_commands {
            // Checked when the configuration was read.
            let _ = renames.rename(old.as_bytes(), new.as_bytes());
        }
        runtime.auth_required = acl.auth_required();
        if let Some((_, values)) = config.directives.iter().rev().find(|(name, _)| name == "notify-keyspace-events") {
            runtime.notify_keyspace_events = crate::config_params::keyspace_event_flags(&values.join(" ")).unwrap_or(0);
        }
        let access_clock = crate::db::keyspace::AccessClock::default();
        let key_events = crate::db::KeyEvents::default();
        key_events.set_flags(runtime.notify_keyspace_events);
        access_clock.set(config.clock.now_ms());
        access_clock.set_lfu(runtime.lfu());
        if params.value("clock") == Some("frozen") && !config.clock.is_frozen() {
            let _ = config.clock.freeze(None);
        }
        // Built now rather than by the first EVAL or INFO, so that
        // used_memory does not step up by its ~13 KB later on.
        crate::scripting::native::NativeTable::get();
        let effects = effects::Effects::new(&config.effects);
        let durability = std::sync::Arc::new(durable::Durability::default());
        let started_secs = config.clock.now_ms() / 1000;
        if effects.on() {
            key_events.record_expired_deletions();
        }
        let watchdog = std::rc::Rc::new(crate::scripting::Watchdog::with_halt(halt));
        watchdog
            .deprecated_api
            .set(params.value("lua-enable-deprecated-api") == Some("yes"));
        watchdog.threshold_ms.set(runtime.busy_reply_threshold_ms);
        State {
            dbs: (0..params.int("databases").unwrap_or(16).max(1) as usize)
                .map(|index| {
                    let mut db = Db::numbered(index, key_events.clone());
                    db.use_access_clock(access_clock.clone());
                    db
                })
                .collect(),
            access_clock,
            key_events,
            clients: ClientMap::default(),
            pubsub: PubSub::default(),
            params,
            stats: Stats::new(Registry::get().all.len()),
            clock: config.clock.clone(),
            started: Instant::now(),
            run_id: new_run_id(),
            repl_id: String::new(),
            repl_id2: String::new(),
            second_repl_offset: -1,
            cached_master_db: None,
            replica_expires: Default::default(),
            loaded_replication: None,
            failover: None,
            shutdown_wait: None,
            master: None,
            master_clients_gone: Vec::new(),
            debug: DebugSwitches::default(),
            port,
            config,
            monitors: Vec::new(),
            watching: 0,
            shutdown: false,
            shutdown_save_done: false,
            kill_queue: Vec::new(),
            runtime,
            script_time: None,
            watchdog,
            tls: None,
            tls_rebound: None,
            port_rebound: None,
            clients_cron_next: 0,
            blocked_clients: 0,
            woken: Vec::new(),
            dirty: 0,
            dirty_at_save: 0,
            dirty_counted: false,
            effects,
            script_repl: effects::ALL,
            persistence: persistence::Persistence::new(started_secs),
            debug_sessions: Default::default(),
            aof: None,
            aof_tap: None,
            aof_rewrites: aof::Rewrites::default(),
            eviction: evict::Eviction::default(),
            net: Default::default(),
            durability: durability.clone(),
            loading: None,
            replicas: replication::Replicas::default(),
            deny_blocking: false,
            pause: None,
            faults: faults::Faults::new(durability.clone()),
            fault_caller: None,
            disconnect_after: false,
            delay_reply: None,
            busy: None,
            startup_allocated: 0,
            slowlog: slowlog::SlowLog::default(),
            latency: latency::LatencyMonitor::default(),
            migrate_sockets: Default::default(),
            command_panics: 0,
            reply_counted_errors: 0,
            pre_command_oom: false,
            output_peaks: output::RecentPeaks::default(),
            cron_logged_ms: 0,
            tracking: tracking::Tracking::default(),
            acl,
            client_memory: Default::default(),
            renames_data_commands: renames.moves_data_commands(),
            renames,
            cluster: None,
            #[cfg(feature = "raft")]
            raft: None,
            raft_follower: false,
        }
    }

    /// Records a refusal in the ACL log (Redis's `addACLLogEntry`), with
    /// the line CLIENT LIST shows for `client` now.
    pub fn log_acl_denial(&mut self, client: &Client, denial: AclDenial) {
        let now = self.clock.now_ms();
        let max_len = self.params.int("acllog-max-len").unwrap_or(128).max(0) as usize;
        let entry = crate::acl::LogEntry {
            count: 1,
            reason: denial.reason,
            context: denial.context,
            object: denial.object,
            username: denial.username,
            ctime_ms: now,
            client_info: client.caller_info.clone().unwrap_or_else(|| client.info_line(now)),
        };
        self.acl.log_denial(entry, max_len);
    }

    /// The users' rules changed: `default`'s password decides whether new
    /// connections start authenticated.
    pub fn acl_changed(&mut self) {
        self.runtime.auth_required = self.acl.auth_required();
    }

    /// Disconnects every client of these users (a deleted user, or all of
    /// them on ACL LOAD), as Redis's `ACLFreeUserAndKillClients`: the
    /// running client closes after its reply, others at once.
    pub fn disconnect_users(&mut self, current: &mut Client, users: &[Bytes]) {
        if users.is_empty() {
            return;
        }
        let gone = |c: &Client| c.user.as_ref().is_some_and(|u| users.contains(u));
        if gone(current) {
            current.user = None;
            current.authenticated = false;
            current.close_after_reply = true;
        }
        for c in self.clients.values_mut() {
            if gone(c) {
                c.user = None;
                c.authenticated = false;
                self.kill_queue.push(c.id);
            }
        }
    }

    /// A user lost channel permissions: its subscribers whose
    /// subscriptions are no longer all allowed are disconnected (Redis's
    /// `ACLKillPubsubClientsIfNeeded`).
    pub fn disconnect_revoked_subscribers(&mut self, current: &mut Client, name: &Bytes, user: &crate::acl::User) {
        let revoked = |c: &Client| {
            c.user_name() == name.as_ref()
                && c.in_pubsub_mode()
                && !crate::acl::subscriptions_allowed(user, c.channels.iter().chain(c.shard_channels.iter()), c.patterns.iter())
        };
        if revoked(current) {
            current.close_after_reply = true;
        }
        for c in self.clients.values() {
            if revoked(c) {
                self.kill_queue.push(c.id);
            }
        }
    }

    /// Redis's `checkGoodReplicasStatus`: writes may go ahead unless
    /// `min-replicas-to-write` and `min-replicas-max-lag` ask for more good
    /// replicas than there are (keylock has none).
    pub fn enough_good_replicas(&self) -> bool {
        // Redis's `checkGoodReplicasStatus`: a replica's writes are its
        // master's.
        self.runtime.min_replicas_to_write == 0
            || self.runtime.min_replicas_max_lag == 0
            || self.master.is_some()
            || self.good_replicas() as i64 >= self.runtime.min_replicas_to_write
    }

    /// The flags processCommand judges a command by: a script's declared
    /// flags for EVAL and friends, and for EXEC its queued commands' too.
    fn command_flags(&self, scripts: Option<&Scripts>, client: &Client, cmd: &Command, argv: &[Bytes]) -> u32 {
        match cmd.full_name.as_str() {
            "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" => script_command_flags(scripts, cmd, argv),
            "exec" => client.multi.as_ref().map_or(cmd.spec.flags, |multi| {
                multi
                    .queued
                    .iter()
                    .fold(cmd.spec.flags, |flags, queued| match exec::lookup(&self.renames, queued) {
                        exec::Lookup::Found(c) => flags | script_command_flags(scripts, c, queued),
                        _ => flags,
                    })
            }),
            _ => cmd.spec.flags,
        }
    }

    /// Delivers a message to a channel's subscribers (and matching
    /// patterns); returns how many clients received it.
    pub fn publish(&mut self, current: &mut Client, kind: Kind, channel: &Bytes, message: &Bytes) -> usize {
        if !self.faults.is_empty() && self.faults.drops_publish(self.fault_caller.as_deref(), channel) {
            // A DROP-PUBLISH fault: nobody receives it, the publisher is
            // told who would have.
            return self.receivers(kind, channel);
        }
        let mut receivers = 0;
        let kind_name: &'static str = if kind == Kind::Shard { "smessage" } else { "message" };
        let mut encoded = EncodedOnce::new(Reply::Push(vec![
            Reply::bulk_static(kind_name),
            Reply::Bulk(channel.clone()),
            Reply::Bulk(message.clone()),
        ]));
        let subs: Vec<ClientId> = self.pubsub.subscribers(kind, channel).to_vec();
        for id in subs {
            receivers += 1;
            self.deliver(current, id, &mut encoded);
        }
        if kind == Kind::Channel {
            let matches: Vec<(Bytes, ClientId)> = self.pubsub.pattern_matches(channel).map(|(p, c)| (p.clone(), c)).collect();
            for (pattern, id) in matches {
                receivers += 1;
                let mut msg = EncodedOnce::new(Reply::Push(vec![
                    Reply::bulk_static("pmessage"),
                    Reply::Bulk(pattern),
                    Reply::Bulk(channel.clone()),
                    Reply::Bulk(message.clone()),
                ]));
                self.deliver(current, id, &mut msg);
            }
        }
        receivers
    }

    /// Settings changed (CONFIG SET): the typed copies follow.
    /// `notify_keyspace_events` is the value just set, if it was: its
    /// flags come from what was written, since the shown spelling drops
    /// `n` beside `A`, as Redis's does, while the flag stays on.
    pub fn apply_runtime(&mut self, notify_keyspace_events: Option<&[u8]>) {
        let flags = match notify_keyspace_events {
            Some(raw) => crate::config_params::keyspace_event_flags(&String::from_utf8_lossy(raw)).unwrap_or(0),
            None => self.runtime.notify_keyspace_events,
        };
        self.runtime = RuntimeSettings::from_params(&self.params);
        self.acl.pubsub_all = self.params.value("acl-pubsub-default") == Some("allchannels");
        self.runtime.auth_required = self.acl.auth_required();
        self.runtime.notify_keyspace_events = flags;
        if self.runtime.slowlog_log_slower_than >= 0 {
            // A shorter slowlog-max-len drops the oldest entries at once
            // (Redis trims at the next command, which is this one).
            self.slowlog.truncate(self.runtime.slowlog_max_len);
        }
        self.key_events.set_flags(flags);
        self.access_clock.set_lfu(self.runtime.lfu());
        self.resize_backlog();
    }

    /// Publishes the keyspace events recorded since the last call, each as
    /// Redis's `notifyKeyspaceEvent` does: the `__keyspace@<db>__:<key>`
    /// message (the event) first, then `__keyevent@<db>__:<event>` (the
    /// key). `current` is the client whose command caused them.
    ///
    /// The same stream carries the keys modified, for tracking: each is
    /// invalidated where it was recorded (Redis's `signalModifiedKey`).
    pub fn publish_key_events(&mut self, current: &mut Client) {
        // Off (the common case): this typed check is all a command pays.
        if self.runtime.notify_keyspace_events == 0 && !self.tracking.enabled {
            return;
        }
        let events = self.key_events.take();
        if events.is_empty() {
            return;
        }
        let flags = self.key_events.flags();
        for e in events {
            if let Some(by_client) = e.modified {
                let modifier = if by_client { current.id } else { 0 };
                self.invalidate_key(Some(current), &e.key, true, modifier);
                continue;
            }
            if flags & crate::db::NOTIFY_KEYSPACE != 0 {
                let mut channel = format!("__keyspace@{}__:", e.db).into_bytes();
                channel.extend_from_slice(&e.key);
                self.publish(
                    current,
                    Kind::Channel,
                    &Bytes::from(channel),
                    &Bytes::from_static(e.event.as_bytes()),
                );
            }
            if flags & crate::db::NOTIFY_KEYEVENT != 0 {
                let channel = Bytes::from(format!("__keyevent@{}__:{}", e.db, e.event));
                self.publish(current, Kind::Channel, &channel, &e.key);
            }
        }
    }

    /// How many clients a message to `channel` would reach.
    fn receivers(&self, kind: Kind, channel: &Bytes) -> usize {
        let direct = self.pubsub.subscribers(kind, channel).len();
        if kind == Kind::Channel {
            direct + self.pubsub.pattern_matches(channel).count()
        } else {
            direct
        }
    }

    /// Sends a message to client `id`. The running client (or, while a
    /// script runs, its pseudo-client acting for the caller) holds its own
    /// until its reply is written; the others get it in their output now.
    /// The shard channels of the slots this node's shard no longer
    /// serves lose their subscribers, each told `sunsubscribe` with the
    /// shard channels it has left (Redis's `removeChannelsInSlot`).
    /// `current` is the client whose command moved the slots, if one did.
    pub(crate) fn drop_lost_slot_channels(&mut self, current: &mut Client) {
        let Some(lost) = self.cluster.as_mut().map(|c| std::mem::take(&mut c.lost_slots)) else {
            return;
        };
        if lost.is_empty() {
            return;
        }
        let lost: std::collections::HashSet<u16> = lost.into_iter().collect();
        let channels: Vec<Bytes> = self
            .pubsub
            .channel_names(Kind::Shard, None)
            .into_iter()
            .filter(|channel| lost.contains(&crate::cluster::slot::key_hash_slot(channel)))
            .collect();
        for channel in channels {
            let subscribers = self.pubsub.subscribers(Kind::Shard, &channel).to_vec();
            for id in subscribers {
                self.pubsub.unsubscribe(Kind::Shard, &channel, id);
                let notice = |left: usize| {
                    Reply::Push(vec![
                        Reply::bulk_static("sunsubscribe"),
                        Reply::Bulk(channel.clone()),
                        Reply::Int(left as i64),
                    ])
                };
                if current.id == id {
                    current.shard_channels.remove(&channel);
                    current.inline_pushes.push(notice(current.shard_channels.len()));
                } else if let Some(c) = self.clients.get_mut(&id) {
                    c.shard_channels.remove(&channel);
                    let c = &self.clients[&id];
                    if !self.refuse_reply_to_replica(c, c.last_command) {
                        let mut msg = EncodedOnce::new(notice(c.shard_channels.len()));
                        c.outbox.push(&msg.get(c.resp));
                        self.check_output_limits(c, true);
                    }
                }
            }
        }
    }

    fn deliver(&mut self, current: &mut Client, id: ClientId, msg: &mut EncodedOnce) {
        if current.holds_for(id) {
            current.inline_pushes.push(msg.reply.clone());
        } else if let Some(c) = self.clients.get(&id) {
            if self.refuse_reply_to_replica(c, c.last_command) {
                return;
            }
            c.outbox.push(&msg.get(c.resp));
            self.check_output_limits(c, true);
        }
    }

    /// Sends a MONITOR line for a command that ran.
    pub fn feed_monitors(&mut self, current: &Client, db: usize, origin: &str, argv: &[Bytes]) {
        if self.monitors.is_empty() {
            return;
        }
        let us = self.clock.now_us();
        let mut line = format!("+{}.{:06} [{} {}]", us / 1_000_000, us % 1_000_000, db, origin);
        for a in argv {
            line.push(' ');
            line.push_str(&repr(a));
        }
        line.push_str("\r\n");
        let data = Bytes::from(line);
        for id in &self.monitors {
            if *id == current.id {
                continue;
            }
            if let Some(c) = self.clients.get(id) {
                c.outbox.push(&data);
                self.check_output_limits(c, true);
            }
        }
    }

    /// The server second the output limits' soft timers count in.
    fn now_secs(&self) -> u64 {
        self.clock.now_ms() / 1000
    }

    /// Closes `c` if its unwritten output is over its class's limits
    /// (Redis's `closeClientOnOutputBufferLimitReached`): scheduled while
    /// output is queued (`queued`), at once from the cron, with Redis's
    /// log line either way. True if it was closed.
    pub fn check_output_limits(&self, c: &Client, queued: bool) -> bool {
        if queued {
            self.note_output_sent(c);
        }
        let obuf = c.outbox.obuf_bytes();
        if c.outbox.close_request() == CloseRequest::Now || (obuf == 0 && !c.outbox.was_cut()) {
            return false;
        }
        let over = c.outbox.was_cut()
            || !c.authenticated
            || self
                .runtime
                .output_limits
                .reached(c.output_class(), obuf, c.outbox.soft_since(), self.now_secs());
        if over {
            log_output_limit(&c.info_line(self.clock.now_ms()), queued);
            c.outbox.close_now();
        }
        over
    }

    /// KEYLOCK RESET: the server as a test starts it. The data, scripts
    /// and statistics emptied ([`State::empty_for_test`]), the faults
    /// cleared and the clock back to real time. Connections, their
    /// subscriptions and the configuration stay.
    pub fn reset_for_test(&mut self, scripts: &mut Scripts) -> Result<(), CmdError> {
        self.clear_failover();
        self.unpause();
        self.empty_for_test(scripts)?;
        self.faults.clear();
        self.clock.reset();
        Ok(())
    }

    /// KEYLOCK RESTART: what a crash and a restart leave. The data, scripts
    /// and statistics emptied, a new run id and start time, and every
    /// connection but the caller's closed at once without what it was owed
    /// (the caller's closes after its reply). Faults and the clock are the
    /// test's settings and stay as they are.
    pub fn restart_for_test(&mut self, scripts: &mut Scripts) -> Result<(), CmdError> {
        self.clear_failover();
        self.unpause();
        self.empty_for_test(scripts)?;
        self.run_id = new_run_id();
        // A restarted server has no replication history to continue.
        self.drop_master_client();
        self.cached_master_db = None;
        self.repl_id.clear();
        self.repl_id2.clear();
        self.second_repl_offset = -1;
        self.replicas.offset = 0;
        self.replicas.backlog = None;
        self.sync_replication_tap();
        self.started = Instant::now();
        for c in self.clients.values() {
            c.outbox.close_now();
        }
        Ok(())
    }

    /// Every database and the script cache emptied (watchers of the keys
    /// see them change, as after FLUSHALL) and the statistics reset (as
    /// CONFIG RESETSTAT).
    fn empty_for_test(&mut self, scripts: &mut Scripts) -> Result<(), CmdError> {
        scripts.reset_vm(self.runtime.lua_memory_limit)?;
        scripts.reset_functions(self.runtime.lua_memory_limit)?;
        for db in &mut self.dbs {
            db.clear();
            db.expired_keys = 0;
        }
        self.stats.reset();
        self.replicas.reset_stats();
        Ok(())
    }

    /// Redis's protected mode: with `protected-mode yes` and no password
    /// for the default user, a connection that is not from this host
    /// (127.0.0.1, ::1 or a Unix socket, as Redis's `islocalClient`) is
    /// refused.
    pub fn protected_from(&self, peer: &ClientAddr) -> bool {
        !peer.is_local() && self.params.value("protected-mode") == Some("yes") && !self.acl.auth_required()
    }

    /// Whether `enable-test-commands` lets `client` run the test controls
    /// (Redis's `allowProtectedAction`).
    pub fn allows_test_commands(&self, client: &Client) -> bool {
        match self.params.value("enable-test-commands") {
            Some("yes") => true,
            Some("local") => client.on_this_machine(),
            _ => false,
        }
    }

    /// Whether `option` (`enable-debug-command`, `enable-test-commands`)
    /// lets `client` run the command it protects. `local` means what
    /// Redis's `islocalClient` takes for DEBUG (127.0.0.1, ::1, a Unix
    /// socket), and any loopback address for keylock's test controls.
    pub fn allows_protected(&self, option: &str, client: &Client) -> bool {
        if option == "enable-test-commands" {
            return self.allows_test_commands(client);
        }
        match self.params.value(option) {
            Some("yes") => true,
            Some("local") => client.peer.is_local(),
            _ => false,
        }
    }

    /// INFO's `master_replid`.
    pub fn master_replid(&self) -> &str {
        if self.repl_id.is_empty() { &self.run_id } else { &self.repl_id }
    }

    /// Expires every key whose deadline has passed, in every database
    /// (KEYLOCK CLOCK ADVANCE: what the move made due goes at once, so the
    /// next command of any client finds it gone and `expired_keys` counts it).
    pub fn expire_all_due(&mut self) {
        if self.paused().is_some() || self.keeps_expired_keys() {
            // CLIENT PAUSE holds the dataset still; a replica's keys go
            // with its master's DELs.
            return;
        }
        let now = self.clock.now_ms();
        for db in &mut self.dbs {
            db.expire_all_due(now);
        }
    }

    /// A gauge for a reply to `client` that the data does not bound (see
    /// `output`): the room it has before its output limits close it. A
    /// client with no connection (scripts) is never closed, as in Redis.
    pub fn reply_gauge(&self, client: &Client) -> ReplyGauge {
        let room = if client.is_script {
            None
        } else {
            self.runtime
                .output_limits
                .closing_at(client.output_class(), client.outbox.soft_since().get(), self.now_secs())
                .map(|at| client.outbox.room_before(at, client.deferred_len))
        };
        ReplyGauge::new(client.outbox.clone(), room, client.resp)
    }

    /// Marks clients whose watched keys changed.
    pub fn collect_watch_invalidations(&mut self, current: &mut Client) {
        if self.watching == 0 {
            return;
        }
        for db in &mut self.dbs {
            if !db.has_invalidated() {
                continue;
            }
            for id in db.take_invalidated() {
                if current.holds_for(id) {
                    current.watch_dirty = true;
                } else if let Some(c) = self.clients.get_mut(&id) {
                    c.watch_dirty = true;
                }
            }
        }
    }

    pub fn total_clients(&self) -> usize {
        self.clients.len() + 1
    }

    /// Registers a new connection, over TCP or a Unix socket.
    pub fn connect(&mut self, id: ClientId, peer: ClientAddr, local: ClientAddr, outbox: Outbox) {
        let now = self.clock.now_ms();
        let client = Client::new(id, peer, local, outbox, now, !self.runtime.auth_required);
        self.clients.insert(id, Box::new(client));
        self.stats.total_connections_received += 1;
    }

    /// Queues the reply to the command `client` ran, after what it was
    /// sent while the command ran, and ends the command for it (CLIENT
    /// REPLY SKIP counts down). A DELAY fault holds it back.
    fn send_reply(&mut self, client: &mut Client, reply: &Reply) {
        let delay = self.delay_reply.take();
        match client.outbox.writable() {
            Some(mut out) => {
                if let Some(ms) = delay {
                    out.hold(Instant::now() + Duration::from_millis(ms));
                }
                if !client.inline_pushes.is_empty() {
                    // What it was sent while its command ran goes ahead of
                    // the command's reply.
                    for push in client.inline_pushes.drain(..) {
                        push.encode(client.resp, out.tail());
                    }
                    out.place(false);
                }
                if client.replies_silenced() {
                    reply.encode_pushes(client.resp, out.tail());
                } else {
                    reply.encode(client.resp, out.tail());
                }
                out.place(client.deferred_len);
            }
            // Closed while its command ran (CLIENT KILL of itself): what it
            // would have been sent goes nowhere.
            None => client.inline_pushes.clear(),
        }
        // The invalidations its own command caused it come after its reply.
        self.send_pending_invalidations(client);
        self.write_inline_pushes(client);
        client.after_command();
    }

    /// Whether `c` is a replica, whose link carries the replication stream
    /// and never a reply or a push: one made for it outside its own
    /// command's batch (a WAIT or blocked command answered later, a
    /// message, an invalidation, a reply while a script is busy)
    /// disconnects it instead, logged with `command` (Redis's
    /// `_addReplyToBufferOrList`, for any reply).
    pub(crate) fn refuse_reply_to_replica(&self, c: &Client, command: &str) -> bool {
        if !c.is_replica || c.monitor {
            return false;
        }
        if c.outbox.close_request() != output::CloseRequest::Open {
            // Closing already: nothing more is written, nor logged again.
            return true;
        }
        crate::log::warning(format_args!(
            "Replica generated a reply to command '{command}', disconnecting it: {}",
            c.info_line(self.clock.now_ms())
        ));
        c.outbox.close_now();
        true
    }

    /// Writes what `client` holds to be sent (see [`Client::inline_pushes`])
    /// to its output now.
    fn write_inline_pushes(&mut self, client: &mut Client) {
        if client.inline_pushes.is_empty() {
            return;
        }
        match client.outbox.writable() {
            Some(mut out) => {
                for push in client.inline_pushes.drain(..) {
                    push.encode(client.resp, out.tail());
                }
                out.place(false);
            }
            None => client.inline_pushes.clear(),
        }
    }

    /// A command from client `id` while a script runs past
    /// `busy-reply-threshold` (Redis's `processEventsWhileBlocked` →
    /// `processCommand`): checked like any client's command, where the
    /// BUSY refusal is one of the checks, and run if its flags allow it,
    /// its reply queued in the client's output.
    /// Without a script, the command comes while the dataset loads at
    /// start (where `LOADING` is the refusal).
    pub fn serve_while_busy(&mut self, id: ClientId, argv: Vec<Bytes>, script: Option<&crate::scripting::BusyScript>) -> BusyServed {
        let Some(mut client) = self.clients.remove(&id) else {
            return BusyServed::default();
        };
        client.deferred_len = false;
        self.busy = script.map(|script| BusyRun {
            killable: script.killable,
            action: None,
            function: script.function.clone(),
        });
        let name = client.is_replica.then(|| exec::lookup(&self.renames, &argv).full_name());
        let reply = exec::dispatch(self, None, &mut client, argv);
        let action = self.busy.take().and_then(|b| b.action);
        if std::mem::take(&mut self.disconnect_after) {
            client.inline_pushes.clear();
            client.close_after_reply = true;
        } else if let Some(name) = name
            && Engine::makes_output(&client, &reply)
            && self.refuse_reply_to_replica(&client, name)
        {
            // As any error to a replica (Redis's `afterErrorReply`).
            self.unexpected_errors("master", "replica", &reply, name);
            client.inline_pushes.clear();
            client.close_after_reply = true;
        } else {
            self.send_reply(&mut client, &reply);
        }
        let postponed = match client.blocked.as_mut().map(|b| &mut b.op) {
            Some(blocking::BlockOp::Postpone(argv)) => Some(std::mem::take(argv)),
            _ => None,
        };
        let served = BusyServed {
            action,
            close: client.close_after_reply,
            authenticated: client.authenticated,
            postponed,
        };
        self.clients.insert(id, client);
        served
    }
}

/// A script running past `busy-reply-threshold`, while the commands other
/// clients sent meanwhile are served (see [`State::serve_while_busy`]).
#[derive(Debug)]
pub struct BusyRun {
    /// It has not written: SCRIPT KILL may stop it.
    pub killable: bool,
    /// What a command served asked of it (SCRIPT KILL, SHUTDOWN).
    pub action: Option<crate::scripting::BusyAction>,
    /// The function running (FCALL), None for an EVAL.
    pub function: Option<std::rc::Rc<crate::scripting::RunningFunction>>,
}

impl BusyRun {
    /// What other clients' commands get: Redis's `slowevalerr` for an
    /// EVAL, `slowscripterr` for a function.
    pub fn busy_error(&self) -> &'static str {
        if self.function.is_some() { exec::BUSY_FUNCTION } else { exec::BUSY }
    }
}

/// What serving one command during a busy script gave.
#[derive(Debug, Default)]
pub struct BusyServed {
    pub action: Option<crate::scripting::BusyAction>,
    /// The connection closes once its reply is written (QUIT, SHUTDOWN).
    pub close: bool,
    /// The client is authenticated now (AUTH, HELLO … AUTH).
    pub authenticated: bool,
    /// CLIENT PAUSE holds the command: the client waits, and the command
    /// runs again once the pause ends (its connection keeps it).
    pub postponed: Option<Vec<Bytes>>,
}

/// Redis's `evalGetCommandFlags` / `fcallGetCommandFlags` +
/// `scriptFlagsToCmdFlags`: a script with a shebang, or a function, is a
/// write, deny-oom command unless it says otherwise; a script without,
/// or a function that does not exist, is judged by the command's own
/// flags.
fn script_command_flags(scripts: Option<&Scripts>, cmd: &Command, argv: &[Bytes]) -> u32 {
    let Some(shebang) = declared_script_flags(scripts, cmd, argv) else {
        return cmd.spec.flags;
    };
    let mut flags = cmd.spec.flags & !(flag::STALE | flag::DENYOOM | flag::WRITE | flag::MAY_REPLICATE);
    if !shebang.allow_oom && !shebang.no_writes {
        flags |= flag::DENYOOM;
    }
    if !shebang.no_writes {
        flags |= flag::WRITE;
    }
    if shebang.allow_stale {
        flags |= flag::STALE;
    }
    flags
}

/// The flags the script `cmd` runs declared (a shebang's, a function's);
/// None for any other command, or a script that declared none.
fn declared_script_flags(scripts: Option<&Scripts>, cmd: &Command, argv: &[Bytes]) -> Option<crate::scripting::Shebang> {
    match (cmd.full_name.as_str(), argv.get(1)) {
        ("evalsha" | "evalsha_ro", Some(sha)) => scripts.and_then(|s| s.declared_flags(sha)),
        ("eval" | "eval_ro", Some(body)) => crate::scripting::shebang_of(body),
        ("fcall" | "fcall_ro", Some(name)) => scripts.and_then(|s| s.function_flags(name)).map(|f| f.as_shebang()),
        _ => None,
    }
}

/// Whether a replica whose link is down with `replica-serve-stale-data
/// no` runs `cmd` (and for EXEC, every command queued): one flagged
/// `stale`, or a script that declared `allow-stale` (redis-server refuses
/// scripts that declared no flags).
pub(crate) fn allowed_stale(
    scripts: Option<&Scripts>,
    client: &Client,
    renames: &crate::commands::table::Renames,
    cmd: &Command,
    argv: &[Bytes],
) -> bool {
    let one = |cmd: &Command, argv: &[Bytes]| match cmd.full_name.as_str() {
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" => {
            declared_script_flags(scripts, cmd, argv).is_some_and(|s| s.allow_stale)
        }
        _ => cmd.spec.has(flag::STALE),
    };
    if cmd.full_name == "exec"
        && let Some(multi) = client.multi.as_ref()
    {
        return multi.queued.iter().all(|queued| match exec::lookup(renames, queued) {
            exec::Lookup::Found(c) => one(c, queued),
            _ => true,
        });
    }
    one(cmd, argv)
}

/// A reply encoded at most once per protocol, for fan-out.
struct EncodedOnce {
    reply: Reply,
    resp2: Option<Bytes>,
    resp3: Option<Bytes>,
}

impl EncodedOnce {
    fn new(reply: Reply) -> EncodedOnce {
        EncodedOnce {
            reply,
            resp2: None,
            resp3: None,
        }
    }

    fn get(&mut self, resp: u8) -> Bytes {
        let slot = if resp >= 3 { &mut self.resp3 } else { &mut self.resp2 };
        slot.get_or_insert_with(|| {
            let mut out = BytesMut::new();
            self.reply.encode(resp, &mut out);
            out.freeze()
        })
        .clone()
    }
}

/// Redis's `sdscatrepr`: a quoted, escaped argument for MONITOR lines.
pub fn repr(a: &[u8]) -> String {
    let mut s = String::with_capacity(a.len() + 2);
    s.push('"');
    for &c in a {
        match c {
            b'\\' => s.push_str("\\\\"),
            b'"' => s.push_str("\\\""),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            0x07 => s.push_str("\\a"),
            0x08 => s.push_str("\\b"),
            c if c.is_ascii_graphic() || c == b' ' => s.push(c as char),
            c => s.push_str(&format!("\\x{c:02x}")),
        }
    }
    s.push('"');
    s
}

/// Redis's log line for a client closed for its output buffer limits:
/// scheduled to close (found while output was queued) or closed (by the
/// cron, or the busy responder).
pub fn log_output_limit(client_info: &str, scheduled: bool) {
    if scheduled {
        crate::log::warning(format_args!(
            "Client {client_info} scheduled to be closed ASAP for overcoming of output buffer limits."
        ));
    } else {
        crate::log::warning(format_args!("Client {client_info} closed for overcoming of output buffer limits."));
    }
}

/// The replies to one batch, and what the connection must do next.
pub struct BatchOutput {
    pub close: bool,
    /// The client's output went over its limits (or it was closed for
    /// them): the batch stopped there, and the connection must be closed
    /// without sending what it was owed.
    pub over_output_limit: bool,
    /// Whether the client is authenticated now (request size limits depend on it).
    pub authenticated: bool,
    /// The clock's time for the client's last command (milliseconds), as
    /// Redis refreshes its cached time for each command it runs.
    pub now_ms: u64,
    /// The client blocked (BLPOP…): the commands of the batch after the
    /// blocking one, to run once it is unblocked.
    pub rest: Vec<Vec<Bytes>>,
    /// The clients whose waits the batch ended: their replies are queued
    /// on their connections, for the network side to write before this
    /// client's, as Redis writes the client whose output came last first.
    pub woken: Vec<ClientId>,
}

impl BatchOutput {
    /// For a client the engine no longer knows.
    const CLOSED: BatchOutput = BatchOutput {
        close: true,
        over_output_limit: false,
        authenticated: false,
        now_ms: 0,
        rest: Vec::new(),
        woken: Vec::new(),
    };
}

/// The engine: the data and clients ([`State`]) and, beside them, the
/// scripting that runs on them ([`Scripts`]).
pub struct Engine {
    pub state: State,
    pub scripts: Scripts,
}

#[cfg(not(feature = "raft"))]
impl State {
    /// Whether this server takes writes (always, without Raft).
    pub fn raft_accepts_writes(&self) -> bool {
        true
    }

    /// Whether a leader's read lease lapsed (never, without Raft).
    pub fn raft_lease_lapsed(&self) -> bool {
        false
    }
}

impl Engine {
    pub fn new(state: State) -> Engine {
        let scripts = Scripts::new(state.watchdog.clone(), state.runtime.lua_memory_limit);
        let mut engine = Engine { state, scripts };
        engine.state.startup_allocated = crate::memory::used_bytes();
        engine
    }

    /// Registers a new TCP connection (see [`State::connect`]).
    pub fn connect(&mut self, id: ClientId, peer: std::net::SocketAddr, local: std::net::SocketAddr, outbox: Outbox) {
        self.state.connect(id, ClientAddr::Tcp(peer), ClientAddr::Tcp(local), outbox);
    }

    /// Forgets a connection that closed.
    pub fn disconnect(&mut self, id: ClientId) {
        if let Some(mut c) = self.state.clients.remove(&id) {
            self.state.forget_client_memory(&c);
            self.forget_client(&mut c);
        }
    }

    /// Set once SHUTDOWN has run: the server stops.
    pub fn shutdown_requested(&self) -> bool {
        self.state.shutdown
    }

    /// Redis's `prepareForShutdown`: a background save is stopped, and
    /// with `save` points the snapshot is written, unless SHUTDOWN already
    /// decided (NOSAVE, or its own save).
    /// False when the snapshot failed.
    pub fn save_on_shutdown(&mut self) -> bool {
        self.state.aof_close();
        self.state.kill_bgsave();
        if self.state.shutdown_save_done || self.state.save_points().is_empty() {
            return true;
        }
        crate::log::notice(format_args!("Saving the final RDB snapshot before exiting."));
        if self.state.save(&self.scripts.library_codes()).is_err() {
            crate::log::warning(format_args!("Error trying to save the DB, can't exit."));
            return false;
        }
        self.state.shutdown_save_done = true;
        true
    }

    /// Drops everything the engine indexed for a client that is gone.
    fn forget_client(&mut self, c: &mut Client) {
        for ch in c.channels.drain() {
            self.state.pubsub.unsubscribe(Kind::Channel, &ch, c.id);
        }
        for ch in c.shard_channels.drain() {
            self.state.pubsub.unsubscribe(Kind::Shard, &ch, c.id);
        }
        for p in c.patterns.drain() {
            self.state.pubsub.punsubscribe(&p, c.id);
        }
        crate::commands::transactions::unwatch_all(&mut self.state, c);
        self.state.disable_tracking(c);
        self.state.unblock(c);
        if c.monitor {
            self.state.monitors.retain(|&m| m != c.id);
        }
        self.state.remove_replica(c.id);
    }

    /// Whether `reply`, or what `client` was sent while its command ran,
    /// would write anything to its output.
    pub(crate) fn makes_output(client: &Client, reply: &Reply) -> bool {
        if !client.inline_pushes.is_empty() {
            return true;
        }
        let mut bytes = BytesMut::new();
        if client.replies_silenced() {
            reply.encode_pushes(client.resp, &mut bytes);
        } else {
            reply.encode(client.resp, &mut bytes);
        }
        !bytes.is_empty()
    }

    /// Runs a batch of commands from one client with no connection behind
    /// it (benches), appending the encoded replies to `out`.
    pub fn run_batch(&mut self, id: ClientId, commands: Vec<Vec<Bytes>>, out: &mut BytesMut) -> BatchOutput {
        let Some(outbox) = self.state.clients.get(&id).map(|c| c.outbox.clone()) else {
            return BatchOutput::CLOSED;
        };
        outbox.buffer().borrow_mut().swap(out);
        let result = self.run_batch_capped(id, commands, false);
        outbox.buffer().borrow_mut().swap(out);
        result
    }

    /// Runs a batch of commands from one client, appending the encoded
    /// replies to its outbox. After each command its output is checked
    /// against its limits, as Redis checks them while replies are added:
    /// an authenticated client's against `client-output-buffer-limit`, one
    /// that has not authenticated, when `capped` (a connection's), against
    /// its reply buffer. A client over them is closed without its replies
    /// and nothing more of the batch runs (Redis runs nothing more for a
    /// client it is about to close).
    pub fn run_batch_capped(&mut self, id: ClientId, commands: Vec<Vec<Bytes>>, capped: bool) -> BatchOutput {
        let Some(mut client) = self.state.clients.remove(&id) else {
            return BatchOutput::CLOSED;
        };
        let outbox = client.outbox.clone();
        self.state.woken.clear();
        let mut rest = Vec::new();
        let mut commands = commands.into_iter();
        while let Some(argv) = commands.next() {
            if outbox.close_request() != CloseRequest::Open {
                break;
            }
            client.deferred_len = false;
            let offset = self.state.replicas.offset;
            // A replica's commands (REPLCONF ACK) make no reply, and a
            // master's no error: the command's name, for the log of one
            // that does.
            let link_command = (client.is_replica || client.is_master).then(|| exec::lookup(&self.state.renames, &argv).full_name());
            let reply = self.dispatch(&mut client, argv);
            if self.state.replicas.offset != offset {
                client.woff = self.state.replicas.offset;
            }
            if std::mem::take(&mut self.state.eviction.due) {
                // CONFIG SET lowered `maxmemory` (alone, or in a
                // transaction now over): the eviction timer's run, its
                // DELs after what the command wrote, its events and
                // invalidations out at once (not left, taking memory, for
                // the next command's check).
                self.state.perform_evictions();
                self.state.eviction.before_command = false;
                self.state.publish_key_events(&mut client);
            }
            if self.state.shutdown {
                // A successful SHUTDOWN closes connections without a reply.
                break;
            }
            if let Some(blocked) = client.blocked.as_mut() {
                // Parked by a blocking command: it answers when unblocked,
                // and what the client sent after it waits until then; a
                // command CLIENT PAUSE holds runs again itself.
                rest = commands.collect();
                if let blocking::BlockOp::Postpone(argv) = &mut blocked.op {
                    rest.insert(0, std::mem::take(argv));
                }
                break;
            }
            if self.state.disconnect_after {
                // A DISCONNECT fault: the connection goes without this
                // reply (what was owed before it is still written).
                self.state.disconnect_after = false;
                client.inline_pushes.clear();
                client.close_after_reply = true;
                break;
            }
            if let Some(name) = link_command {
                // Redis's `_addReplyToBufferOrList`: the link carries the
                // stream, never a reply; the replica goes instead.
                let replica_replied =
                    client.is_replica && Self::makes_output(&client, &reply) && self.state.refuse_reply_to_replica(&client, name);
                // Each error, a transaction's inner ones too (Redis's
                // `afterErrorReply`, under the EXEC).
                let (from, to) = if client.is_master {
                    ("replica", "master")
                } else {
                    ("master", "replica")
                };
                self.state.unexpected_errors(from, to, &reply, name);
                if replica_replied {
                    client.inline_pushes.clear();
                    break;
                }
            }
            self.state.send_reply(&mut client, &reply);
            if self.state.blocked_clients > 0 {
                // Redis's handleClientsBlockedOnKeys, after every command;
                // what the served clients' moves pushed touches watchers.
                self.state.serve_blocked();
                self.state.collect_watch_invalidations(&mut client);
            }
            if client.close_after_reply {
                break;
            }
            if client.authenticated {
                self.state.check_output_limits(&client, true);
            } else if capped && outbox.unwritten() > outbox.reply_buffer_size() {
                log_output_limit(&client.info_line(self.state.clock.now_ms()), true);
                outbox.close_now();
            }
        }
        let over_output_limit = outbox.close_request() == CloseRequest::Now;
        let result = BatchOutput {
            close: client.close_after_reply || self.state.shutdown || over_output_limit,
            over_output_limit,
            authenticated: client.authenticated,
            now_ms: client.last_interaction_ms,
            rest,
            woken: std::mem::take(&mut self.state.woken),
        };
        outbox.set_class(client.output_class());
        self.state.account_client(&mut client);
        self.state.clients.insert(id, client);
        self.state.send_getack_if_due();
        self.state.update_failover();
        self.state.broadcast_invalidations();
        self.state.account_touched_clients();
        // Killed clients go without what they were owed, their memory
        // back at once (Redis's `freeClient`).
        for victim in std::mem::take(&mut self.state.kill_queue) {
            if let Some(c) = self.state.clients.get(&victim) {
                c.outbox.close_now();
            }
        }
        result
    }

    /// Ends the wait of client `id` if its timeout has passed (its
    /// connection's timer fired); true if it was due.
    pub fn time_out_blocked(&mut self, id: ClientId) -> bool {
        self.state.time_out_blocked(id, Instant::now())
    }

    /// The client's line in CLIENT LIST, for log messages about it.
    pub fn client_info(&self, id: ClientId) -> Option<String> {
        let now = self.state.clock.now_ms();
        self.state.clients.get(&id).map(|c| c.info_line(now))
    }

    /// Tells every connection to close and ends the forked debugging
    /// sessions (server shutdown).
    pub fn close_all(&mut self) {
        for c in self.state.clients.values() {
            c.outbox.close();
        }
        self.state.kill_debug_sessions();
    }

    /// Everything Redis's `processCommand` checks before running a command.
    pub fn dispatch(&mut self, client: &mut Client, argv: Vec<Bytes>) -> Reply {
        exec::dispatch(&mut self.state, Some(&mut self.scripts), client, argv)
    }

    /// Redis's `clientsCron`, the output part: samples each client's output
    /// for INFO's `client_recent_max_output_buffer`, and closes those over
    /// their output limits (the soft limit's seconds may have run out with
    /// no output queued). As Redis's, each pass visits a `hz`-th of the
    /// clients (at least 5), so that every client is seen about once a
    /// second and idle clients cost next to nothing however many there are.
    fn clients_cron(&mut self) {
        let state = &mut self.state;
        let n = state.clients.len();
        if n == 0 {
            return;
        }
        let per_pass = (n / state.runtime.hz.max(1) as usize).max(5).min(n);
        let start = state.clients_cron_next % n;
        let slot = state.output_peaks.begin(state.clock.now_ms() / 1000);
        let now_ms = state.clock.now_ms();
        let debug = state.debug;
        for c in state.clients.values().cycle().skip(start).take(per_pass) {
            if debug.reply_buffer_resizing {
                let resized = c
                    .outbox
                    .buffer()
                    .borrow_mut()
                    .resize_reply_buffer(now_ms, debug.reply_buffer_peak_reset_ms);
                match resized {
                    Some(output::Resized::Shrunk) => state.stats.reply_buffer_shrinks += 1,
                    Some(output::Resized::Expanded) => state.stats.reply_buffer_expands += 1,
                    None => {}
                }
            }
            state.output_peaks.sample(slot, c.outbox.obuf_bytes());
            state.check_output_limits(c, false);
        }
        state.clients_cron_next = start + per_pass;
    }

    /// The periodic work: active expiry, clients' output limits and
    /// idle-client timeouts.
    pub fn cron(&mut self) {
        if self.state.debug.pause_cron {
            return;
        }
        crate::memory::used_bytes();
        crate::memory::release_freed();
        let now = self.state.clock.now_ms();
        let deadline = Instant::now() + Duration::from_millis(25);
        // A pause whose time is up ends; while one holds, nothing expires.
        let paused = self.state.paused().is_some() || !self.state.debug.active_expire || self.state.keeps_expired_keys();
        let cycle_started = Instant::now();
        if self.state.master.is_some() && self.state.debug.active_expire && self.state.paused().is_none() {
            self.state.expire_replica_keys(now);
        }
        for db in &mut self.state.dbs {
            // Redis's rule: keep sampling while more than a quarter of a
            // sample turns out expired, within the time budget.
            while !paused && db.expires_len() > 0 && Instant::now() < deadline {
                if db.active_expire_cycle(now, 20) <= 5 {
                    break;
                }
            }
        }
        self.state.migrate_sockets.close_idle(now / 1000);
        self.state
            .add_latency_sample("expire-cycle", cycle_started.elapsed().as_millis() as u64);
        // Active expiry's events: no client's command caused them.
        self.state.publish_key_events(&mut self.scripts.client);
        self.state.flush_effects();
        let scripts = &self.scripts;
        self.state.persistence_cron(|| scripts.library_codes());
        self.state.aof_cron(|| scripts.library_codes());
        self.state.reap_debug_sessions();
        self.state.ping_replicas();
        self.state.start_pending_snapshot(|| scripts.library_codes());
        self.state.update_failover();
        self.state.shutdown_wait_cron(|| scripts.library_codes());
        if self.state.cluster_enabled() {
            self.state.cluster_cron();
            self.state.drop_lost_slot_channels(&mut self.scripts.client);
        }
        if self.state.blocked_clients > 0 {
            // An expired stream tells its XREADGROUP waiters, as Redis's
            // beforeSleep serves the keys expiry made ready.
            self.state.serve_blocked();
        }
        // Their connections write what the cron's serving queued.
        self.state.woken.clear();
        self.state.limit_tracking_table(None);
        self.state.broadcast_invalidations();
        self.clients_cron();
        if self.state.client_eviction_limit() > 0 {
            self.state.evict_clients(None);
        }
        let idle_timeout = self.state.runtime.timeout;
        if idle_timeout > 0 {
            let limit = idle_timeout * 1000;
            for c in self.state.clients.values() {
                // Not a replica (one waiting for its snapshot sends nothing)
                // nor the master, as Redis's `clientsCronHandleTimeout`.
                if !c.in_pubsub_mode() && !c.monitor && !c.is_replica && !c.is_master && now.saturating_sub(c.last_interaction_ms) > limit {
                    crate::log::verbose(format_args!("Closing idle client"));
                    c.outbox.close();
                }
            }
        }
        self.log_cron();
    }

    /// Redis's periodic verbose and debug lines: the non-empty databases,
    /// and the clients and memory, every five seconds.
    fn log_cron(&mut self) {
        use crate::log::{self, Level};
        if !log::enabled(Level::Verbose) {
            return;
        }
        let now = self.state.clock.now_ms();
        if now.saturating_sub(self.state.cron_logged_ms) < 5000 {
            return;
        }
        self.state.cron_logged_ms = now;
        for (j, db) in self.state.dbs.iter().enumerate() {
            let (used, volatile) = (db.len(), db.expires_len());
            if used > 0 || volatile > 0 {
                // Redis's table size: a power of two, 4 at least.
                let slots = used.max(1).next_power_of_two().max(4);
                log::verbose(format_args!("DB {j}: {used} keys ({volatile} volatile) in {slots} slots HT."));
            }
        }
        log::debug(format_args!(
            "{} clients connected (0 replicas), {} bytes in use",
            self.state.clients.len(),
            crate::memory::used_bytes()
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::table::cmd;

    fn panicking(_: &mut crate::commands::Ctx, _: &[Bytes]) -> crate::error::CmdResult {
        panic!("a handler bug")
    }

    fn get_registered(state: &mut State, client: &mut Client, argv: &[&str]) -> Reply {
        let argv: Vec<Bytes> = argv.iter().map(|a| Bytes::copy_from_slice(a.as_bytes())).collect();
        let command = Registry::get().lookup(&argv[0]).expect("a known command");
        state.call(None, client, command, &argv)
    }

    #[test]
    fn a_panicking_handler_fails_its_command_and_the_engine_carries_on() {
        static SPEC: crate::commands::table::CommandSpec = cmd("panics", 1, panicking);
        let command: &'static Command = Box::leak(Box::new(Command {
            spec: &SPEC,
            full_name: "panics".into(),
            def: None,
            stat_index: 0,
            subcommands: Default::default(),
        }));
        let mut state = State::new(Config::ephemeral(), 0);
        let mut client = Client::script_client();
        assert_eq!(get_registered(&mut state, &mut client, &["SET", "k", "v"]), Reply::OK);

        let reply = state.call(None, &mut client, command, &[Bytes::from_static(b"panics")]);
        assert_eq!(
            reply,
            Reply::Error(Bytes::from_static(
                b"ERR internal error while running 'panics'; the command was aborted (see the server log)"
            ))
        );
        assert_eq!(state.command_panics, 1);
        assert_eq!(get_registered(&mut state, &mut client, &["GET", "k"]), Reply::bulk_static("v"));
        let Reply::Verbatim(_, info) = get_registered(&mut state, &mut client, &["INFO", "keylock"]) else {
            panic!("INFO answers a verbatim string");
        };
        assert!(String::from_utf8_lossy(&info).contains("command_panics:1\r\n"));
    }
}
