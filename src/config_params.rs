//! The configuration parameter table behind CONFIG GET, CONFIG SET, the
//! `--name value` command-line flags and redis.conf-style `name value` lines.
//!
//! Every parameter Redis 7.0.15 has is described once, as data, in `PARAMS`:
//! its name, its alias (`lua-time-limit` for `busy-reply-threshold`, the
//! `slave-*` spellings of `replica-*`, `hash-max-ziplist-*` for
//! `hash-max-listpack-*` …), whether CONFIG SET may change it, its type with
//! the bounds and units Redis checks, and its default. The data and every
//! error text come from `src/config.c` of Redis 7.0 and were checked against a
//! running redis-server 7.0.15 (`CONFIG GET *`, and `CONFIG SET` of bad values
//! for each kind of parameter): what that server replies is the specification.
//!
//! Values are kept as the text CONFIG GET shows (`maxmemory 1mb` is stored as
//! `1048576`, booleans as `yes`/`no`, enums in their canonical lowercase
//! spelling), so reading one back costs nothing and needs no formatting.
//!
//! This module only validates and records. It never touches the process:
//! `dir` is checked and resolved to an absolute path but the working
//! directory is not changed, `bind`/`port` open nothing, `appendonly` writes
//! nothing. The server reacts to the parameters it implements (for example
//! `requirepass`, `busy-reply-threshold`, `maxmemory`, `timeout`,
//! `notify-keyspace-events`, `databases`, and keylock's own
//! `native-scripts` and `lua-memory-limit`) through the list of changed names
//! that [`ConfigParams::set`] returns and through [`ConfigParams::value`] /
//! [`ConfigParams::int`]; every other parameter is recorded only, so that
//! clients that read or set it get Redis's answers.
//!
//! Deliberate differences from Redis 7.0.15:
//! - keylock parameters exist that Redis lacks: `native-scripts` (yes|no,
//!   default yes), `lua-memory-limit` (memory, default 0 = no limit),
//!   `enable-test-commands` (no|local|yes, default local) and `clock`
//!   (real|frozen, default real); these two are immutable and hidden (read
//!   by exact name only), so that `CONFIG GET *` lists no immutable
//!   parameter Redis lacks and clients that set back every value they read
//!   (Redis's own test suite does) meet none;
//! - `save` defaults to `""`: keylock snapshots only when told to (see
//!   [`KEYLOCK_DEFAULTS`]);
//! - CONFIG GET returns matches sorted by name: Redis returns them in the
//!   iteration order of a dict whose hash seed is random per process, so its
//!   order cannot be reproduced (it is not even stable between two Redis
//!   runs);
//! - of the effects of Redis's apply step, only those that show in replies
//!   without touching the system are reproduced (`hz` capped to 1..=500,
//!   `repl-backlog-size` raised to 16384 by CONFIG SET, and turning TLS on
//!   failing as it does without certificates). The failures Redis only
//!   detects while applying (a port already in use, an address that cannot
//!   be bound, an operating-system limit on `maxclients`, AOF that cannot
//!   start) are the server's to detect, since nothing is applied here;
//! - values are text: a CONFIG SET value that is not UTF-8 is stored with its
//!   invalid bytes replaced (Redis stores the raw bytes).

use std::borrow::Cow;
use std::collections::HashMap;

use crate::error::CmdError;
use crate::glob;

/// Why a value was refused; the text after `- ` in Redis's CONFIG SET error.
type Problem = Cow<'static, str>;

// Parameter flags (Redis's IMMUTABLE_CONFIG, PROTECTED_CONFIG, HIDDEN_CONFIG,
// MULTI_ARG_CONFIG). MODIFIABLE is the absence of all of them.
const MODIFIABLE: u8 = 0;
/// CONFIG SET refuses it; only the command line or a config file sets it.
const IMMUTABLE: u8 = 1;
/// CONFIG SET refuses it unless `enable-protected-configs` allows it.
const PROTECTED: u8 = 2;
/// Left out of CONFIG GET patterns; an exact name still reads it.
const HIDDEN: u8 = 4;
/// Takes several words: CONFIG SET splits its value on spaces, a config line
/// passes all its arguments.
const MULTI_ARG: u8 = 8;
/// CONFIG SET refuses it with LOADING while the dataset loads.
const DENY_LOADING: u8 = 16;

// C limits that Redis uses as bounds. Unsigned upper bounds are kept as the
// same 64 bits Redis stores in a `long long` (ULLONG_MAX is -1).
const INT_MIN: i64 = i32::MIN as i64;
const INT_MAX: i64 = i32::MAX as i64;
const UINT_MAX: i64 = u32::MAX as i64;
const LONG_MAX: i64 = i64::MAX;
const ULLONG_MAX: i64 = -1;

/// Redis accepts any `hz` but caps it to this range (CONFIG_MIN_HZ..CONFIG_MAX_HZ).
const HZ_RANGE: (i64, i64) = (1, 500);
/// CONFIG_BINDADDR_MAX.
const MAX_BIND_ADDRESSES: usize = 16;

const BAD_DIRECTIVE: &str = "Bad directive or wrong number of arguments";
const WRONG_ARG_COUNT: &str = "wrong number of arguments";

/// How a numeric parameter's text is read and shown (Redis's
/// INTEGER_CONFIG, MEMORY_CONFIG, MEMORY_CONFIG|PERCENT_CONFIG, OCTAL_CONFIG).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Unit {
    Plain,
    Memory,
    /// A memory value, or `N%` which Redis stores as `-N`.
    MemoryOrPercent,
    Octal,
}

/// The bounds Redis checks. `unsigned` is true for the C types Redis checks
/// as unsigned (unsigned int, unsigned long long, size_t); `unsigned long`
/// parameters are checked as signed, as Redis does.
#[derive(Clone, Copy)]
struct Range {
    min: i64,
    max: i64,
    unsigned: bool,
}

const fn signed(min: i64, max: i64) -> Range {
    Range { min, max, unsigned: false }
}

const fn unsigned(min: i64, max: i64) -> Range {
    Range { min, max, unsigned: true }
}

type EnumOptions = &'static [(&'static str, u32)];
/// A parameter's own check of a parsed value; the error is the text Redis
/// shows after `- `.
type Check<T> = Option<fn(T) -> Result<(), &'static str>>;
/// [`Check`] of a text value (a separate alias keeps `fn(&str)` generic
/// over the borrow).
type TextCheck = Option<fn(&str) -> Result<(), &'static str>>;

/// What kind of value a parameter holds, with its validation.
enum Kind {
    Bool(Check<bool>),
    Text(TextCheck),
    /// Options in Redis's order, which is also the order of the error text.
    /// With MULTI_ARG the options are bit flags that combine.
    Enum(EnumOptions, Check<u32>),
    Number {
        range: Range,
        unit: Unit,
        /// Accepted values outside this range are silently capped (`hz`).
        cap: Option<(i64, i64)>,
    },
    ProcTitleTemplate,
    Dir,
    Save,
    ClientOutputBufferLimit,
    OomScoreAdjValues,
    NotifyKeyspaceEvents,
    Bind,
    ReplicaOf,
    LatencyTrackingPercentiles,
}

/// What CONFIG SET does after storing a changed value, where Redis's apply
/// function changes the reply. (The config-file path does not run these.)
#[derive(Clone, Copy)]
enum OnSet {
    Nothing,
    /// Raise the value to this minimum (Redis's resizeReplicationBacklog).
    RaiseTo(i64),
    /// Turning TLS on for replication or the cluster bus fails: keylock
    /// serves TLS to clients only (see `crate::tls`).
    NoTls,
}

/// One parameter: Redis's `standardConfig`, plus its default as CONFIG GET
/// shows it.
struct Param {
    name: &'static str,
    alias: Option<&'static str>,
    flags: u8,
    kind: Kind,
    default: &'static str,
    on_set: OnSet,
}

const fn param(name: &'static str, alias: Option<&'static str>, flags: u8, kind: Kind, default: &'static str) -> Param {
    Param {
        name,
        alias,
        flags,
        kind,
        default,
        on_set: OnSet::Nothing,
    }
}

impl Param {
    const fn on_set(self, on_set: OnSet) -> Param {
        Param { on_set, ..self }
    }
}

const fn boolean(name: &'static str, alias: Option<&'static str>, flags: u8, default: &'static str) -> Param {
    param(name, alias, flags, Kind::Bool(None), default)
}

const fn text(name: &'static str, alias: Option<&'static str>, flags: u8, default: &'static str) -> Param {
    param(name, alias, flags, Kind::Text(None), default)
}

const fn checked_text(name: &'static str, flags: u8, check: fn(&str) -> Result<(), &'static str>, default: &'static str) -> Param {
    param(name, None, flags, Kind::Text(Some(check)), default)
}

const fn choice(name: &'static str, flags: u8, options: EnumOptions, default: &'static str) -> Param {
    param(name, None, flags, Kind::Enum(options, None), default)
}

const fn number(name: &'static str, alias: Option<&'static str>, flags: u8, range: Range, unit: Unit, default: &'static str) -> Param {
    param(name, alias, flags, Kind::Number { range, unit, cap: None }, default)
}

/// A C `int` parameter read as a plain integer (Redis's createIntConfig).
const fn int(name: &'static str, alias: Option<&'static str>, flags: u8, min: i64, max: i64, default: &'static str) -> Param {
    number(name, alias, flags, signed(min, max), Unit::Plain, default)
}

const fn special(name: &'static str, alias: Option<&'static str>, flags: u8, kind: Kind, default: &'static str) -> Param {
    param(name, alias, flags, kind, default)
}

// Enum option tables, in Redis's order (it decides the error text, and the
// first spelling of a value is the one CONFIG GET shows).
const MAXMEMORY_POLICY: EnumOptions = &[
    ("volatile-lru", 0),
    ("volatile-lfu", 1),
    ("volatile-random", 2),
    ("volatile-ttl", 3),
    ("allkeys-lru", 4),
    ("allkeys-lfu", 5),
    ("allkeys-random", 6),
    ("noeviction", 7),
];
const SYSLOG_FACILITY: EnumOptions = &[
    ("user", 0),
    ("local0", 1),
    ("local1", 2),
    ("local2", 3),
    ("local3", 4),
    ("local4", 5),
    ("local5", 6),
    ("local6", 7),
    ("local7", 8),
];
const LOGLEVEL: EnumOptions = &[("debug", 0), ("verbose", 1), ("notice", 2), ("warning", 3)];
const SUPERVISED: EnumOptions = &[("upstart", 0), ("systemd", 1), ("auto", 2), ("no", 3)];
const APPENDFSYNC: EnumOptions = &[("everysec", 0), ("always", 1), ("no", 2)];
const REPL_DISKLESS_LOAD: EnumOptions = &[("disabled", 0), ("on-empty-db", 1), ("swapdb", 2)];
const TLS_AUTH_CLIENTS: EnumOptions = &[("no", 0), ("yes", 1), ("optional", 2)];
/// `yes` and `relative` are the same value; CONFIG GET shows `yes`.
const OOM_SCORE_ADJ: EnumOptions = &[("no", 0), ("yes", 1), ("relative", 1), ("absolute", 2)];
const ACL_PUBSUB_DEFAULT: EnumOptions = &[("allchannels", 1), ("resetchannels", 0)];
const SANITIZE_DUMP_PAYLOAD: EnumOptions = &[("no", 0), ("yes", 1), ("clients", 2)];
const CLOCK_START: EnumOptions = &[("real", 0), ("frozen", 1)];
const REPLICATION_MODE: EnumOptions = &[("standalone", 0), ("raft", 1)];
const RAFT_FSYNC: EnumOptions = &[("always", 0), ("everysec", 1), ("no", 2)];
const PROTECTED_ACTION: EnumOptions = &[("no", 0), ("yes", 1), ("local", 2)];
const CLUSTER_ENDPOINT_TYPE: EnumOptions = &[("ip", 0), ("hostname", 1), ("unknown-endpoint", 2)];
const PROPAGATION_ERROR_BEHAVIOR: EnumOptions = &[("ignore", 0), ("panic", 1), ("panic-on-replicas", 2)];
const SHUTDOWN_SAVE: u32 = 1;
const SHUTDOWN_NOSAVE: u32 = 2;
/// Bit flags (the parameters are MULTI_ARG): `save now` is SAVE|NOW.
const SHUTDOWN_ON_SIGNAL: EnumOptions = &[
    ("default", 0),
    ("save", SHUTDOWN_SAVE),
    ("nosave", SHUTDOWN_NOSAVE),
    ("now", 4),
    ("force", 8),
];

/// The value of `enable-protected-configs` (and of the two other
/// protected-action switches) that allows the action for local clients only.
const PROTECTED_ACTION_LOCAL: &str = "local";

fn no_active_defrag(on: bool) -> Result<(), &'static str> {
    // The reference redis-server 7.0.15 is built without Redis's jemalloc
    // defrag hint, and keylock has no active defragmentation either.
    if on {
        Err(
            "Active defragmentation cannot be enabled: it requires a Redis server compiled with a modified Jemalloc like the one shipped by default with the Redis source distribution",
        )
    } else {
        Ok(())
    }
}

fn shutdown_flags_valid(flags: u32) -> Result<(), &'static str> {
    if flags & SHUTDOWN_SAVE != 0 && flags & SHUTDOWN_NOSAVE != 0 {
        Err("shutdown options SAVE and NOSAVE can't be used simultaneously")
    } else {
        Ok(())
    }
}

/// Redis's pathIsBaseName.
fn is_base_name(path: &str) -> bool {
    !path.contains('/') && !path.contains('\\')
}

fn valid_dbfilename(v: &str) -> Result<(), &'static str> {
    if is_base_name(v) {
        Ok(())
    } else {
        Err("dbfilename can't be a path, just a filename")
    }
}

fn valid_appendfilename(v: &str) -> Result<(), &'static str> {
    if v.is_empty() {
        Err("appendfilename can't be empty")
    } else if !is_base_name(v) {
        Err("appendfilename can't be a path, just a filename")
    } else {
        Ok(())
    }
}

fn valid_appenddirname(v: &str) -> Result<(), &'static str> {
    if v.is_empty() {
        Err("appenddirname can't be empty")
    } else if !is_base_name(v) {
        Err("appenddirname can't be a path, just a dirname")
    } else {
        Ok(())
    }
}

fn valid_announced_hostname(v: &str) -> Result<(), &'static str> {
    // NET_HOST_STR_LEN is 256.
    if v.len() >= 256 {
        return Err("Hostnames must be less than 256 characters");
    }
    if v.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'.') {
        Ok(())
    } else {
        Err("Hostnames may only contain alphanumeric characters, hyphens or dots")
    }
}

/// Every parameter of Redis 7.0.15 (aliases are listed with their parameter),
/// then keylock's own. Grouped and ordered as Redis's `static_configs`.
static PARAMS: &[Param] = &[
    // Booleans.
    boolean("rdbchecksum", None, IMMUTABLE, "yes"),
    boolean("daemonize", None, IMMUTABLE, "no"),
    boolean("io-threads-do-reads", None, IMMUTABLE, "no"),
    boolean("always-show-logo", None, IMMUTABLE, "no"),
    boolean("protected-mode", None, MODIFIABLE, "yes"),
    boolean("rdbcompression", None, MODIFIABLE, "yes"),
    boolean("rdb-del-sync-files", None, MODIFIABLE, "no"),
    boolean("activerehashing", None, MODIFIABLE, "yes"),
    boolean("stop-writes-on-bgsave-error", None, MODIFIABLE, "yes"),
    boolean("set-proc-title", None, IMMUTABLE, "yes"),
    boolean("dynamic-hz", None, MODIFIABLE, "yes"),
    boolean("lazyfree-lazy-eviction", None, MODIFIABLE, "no"),
    boolean("lazyfree-lazy-expire", None, MODIFIABLE, "no"),
    boolean("lazyfree-lazy-server-del", None, MODIFIABLE, "no"),
    boolean("lazyfree-lazy-user-del", None, MODIFIABLE, "no"),
    boolean("lazyfree-lazy-user-flush", None, MODIFIABLE, "no"),
    boolean("repl-disable-tcp-nodelay", None, MODIFIABLE, "no"),
    boolean("repl-diskless-sync", None, MODIFIABLE, "yes"),
    boolean("aof-rewrite-incremental-fsync", None, MODIFIABLE, "yes"),
    boolean("no-appendfsync-on-rewrite", None, MODIFIABLE, "no"),
    boolean("cluster-require-full-coverage", None, MODIFIABLE, "yes"),
    boolean("rdb-save-incremental-fsync", None, MODIFIABLE, "yes"),
    boolean("aof-load-truncated", None, MODIFIABLE, "yes"),
    boolean("aof-use-rdb-preamble", None, MODIFIABLE, "yes"),
    boolean("aof-timestamp-enabled", None, MODIFIABLE, "no"),
    boolean("cluster-replica-no-failover", Some("cluster-slave-no-failover"), MODIFIABLE, "no"),
    boolean("replica-lazy-flush", Some("slave-lazy-flush"), MODIFIABLE, "no"),
    boolean("replica-serve-stale-data", Some("slave-serve-stale-data"), MODIFIABLE, "yes"),
    boolean("replica-read-only", Some("slave-read-only"), MODIFIABLE, "yes"),
    boolean("replica-ignore-maxmemory", Some("slave-ignore-maxmemory"), MODIFIABLE, "yes"),
    boolean("jemalloc-bg-thread", None, MODIFIABLE, "yes"),
    param("activedefrag", None, MODIFIABLE, Kind::Bool(Some(no_active_defrag)), "no"),
    boolean("syslog-enabled", None, IMMUTABLE, "no"),
    boolean("cluster-enabled", None, IMMUTABLE, "no"),
    boolean("appendonly", None, DENY_LOADING, "no"),
    boolean("cluster-allow-reads-when-down", None, MODIFIABLE, "no"),
    boolean("cluster-allow-pubsubshard-when-down", None, MODIFIABLE, "yes"),
    boolean("crash-log-enabled", None, MODIFIABLE, "yes"),
    boolean("crash-memcheck-enabled", None, MODIFIABLE, "yes"),
    boolean("use-exit-on-panic", None, MODIFIABLE | HIDDEN, "no"),
    boolean("disable-thp", None, IMMUTABLE, "yes"),
    boolean("cluster-allow-replica-migration", None, MODIFIABLE, "yes"),
    boolean("replica-announced", None, MODIFIABLE, "yes"),
    boolean("latency-tracking", None, MODIFIABLE, "yes"),
    boolean("aof-disable-auto-gc", None, MODIFIABLE, "no"),
    boolean("replica-ignore-disk-write-errors", None, MODIFIABLE, "no"),
    boolean("lua-enable-deprecated-api", None, IMMUTABLE | HIDDEN, "no"),
    // Strings.
    text("aclfile", None, IMMUTABLE, ""),
    text("unixsocket", None, IMMUTABLE, ""),
    text("pidfile", None, IMMUTABLE, ""),
    text("replica-announce-ip", Some("slave-announce-ip"), MODIFIABLE, ""),
    text("masteruser", None, MODIFIABLE, ""),
    text("cluster-announce-ip", None, MODIFIABLE, ""),
    text("cluster-config-file", None, IMMUTABLE, "nodes.conf"),
    checked_text("cluster-announce-hostname", MODIFIABLE, valid_announced_hostname, ""),
    text("syslog-ident", None, IMMUTABLE, "redis"),
    checked_text("dbfilename", PROTECTED, valid_dbfilename, "dump.rdb"),
    checked_text("appendfilename", IMMUTABLE, valid_appendfilename, "appendonly.aof"),
    checked_text("appenddirname", IMMUTABLE, valid_appenddirname, "appendonlydir"),
    text("server_cpulist", None, IMMUTABLE, ""),
    text("bio_cpulist", None, IMMUTABLE, ""),
    text("aof_rewrite_cpulist", None, IMMUTABLE, ""),
    text("bgsave_cpulist", None, IMMUTABLE, ""),
    text("ignore-warnings", None, MODIFIABLE, ""),
    special(
        "proc-title-template",
        None,
        MODIFIABLE,
        Kind::ProcTitleTemplate,
        "{title} {listen-addr} {server-mode}",
    ),
    text("bind-source-addr", None, MODIFIABLE, ""),
    text("logfile", None, IMMUTABLE, ""),
    text("masterauth", None, MODIFIABLE, ""),
    text("requirepass", None, MODIFIABLE, ""),
    // Enums.
    choice("supervised", IMMUTABLE, SUPERVISED, "no"),
    choice("syslog-facility", IMMUTABLE, SYSLOG_FACILITY, "local0"),
    choice("repl-diskless-load", DENY_LOADING, REPL_DISKLESS_LOAD, "disabled"),
    choice("loglevel", MODIFIABLE, LOGLEVEL, "notice"),
    choice("maxmemory-policy", MODIFIABLE, MAXMEMORY_POLICY, "noeviction"),
    choice("appendfsync", MODIFIABLE, APPENDFSYNC, "everysec"),
    choice("oom-score-adj", MODIFIABLE, OOM_SCORE_ADJ, "no"),
    choice("acl-pubsub-default", MODIFIABLE, ACL_PUBSUB_DEFAULT, "resetchannels"),
    choice("sanitize-dump-payload", MODIFIABLE, SANITIZE_DUMP_PAYLOAD, "no"),
    choice("enable-protected-configs", IMMUTABLE, PROTECTED_ACTION, "no"),
    choice("enable-debug-command", IMMUTABLE, PROTECTED_ACTION, "no"),
    choice("enable-module-command", IMMUTABLE, PROTECTED_ACTION, "no"),
    choice("cluster-preferred-endpoint-type", MODIFIABLE, CLUSTER_ENDPOINT_TYPE, "ip"),
    choice("propagation-error-behavior", MODIFIABLE, PROPAGATION_ERROR_BEHAVIOR, "ignore"),
    param(
        "shutdown-on-sigint",
        None,
        MODIFIABLE | MULTI_ARG,
        Kind::Enum(SHUTDOWN_ON_SIGNAL, Some(shutdown_flags_valid)),
        "default",
    ),
    param(
        "shutdown-on-sigterm",
        None,
        MODIFIABLE | MULTI_ARG,
        Kind::Enum(SHUTDOWN_ON_SIGNAL, Some(shutdown_flags_valid)),
        "default",
    ),
    // C int.
    int("databases", None, IMMUTABLE, 1, INT_MAX, "16"),
    int("port", None, MODIFIABLE, 0, 65535, "6379"),
    int("io-threads", None, IMMUTABLE, 1, 128, "1"),
    int("auto-aof-rewrite-percentage", None, MODIFIABLE, 0, INT_MAX, "100"),
    int(
        "cluster-replica-validity-factor",
        Some("cluster-slave-validity-factor"),
        MODIFIABLE,
        0,
        INT_MAX,
        "10",
    ),
    int(
        "list-max-listpack-size",
        Some("list-max-ziplist-size"),
        MODIFIABLE,
        INT_MIN,
        INT_MAX,
        "-2",
    ),
    int("tcp-keepalive", None, MODIFIABLE, 0, INT_MAX, "300"),
    int("cluster-migration-barrier", None, MODIFIABLE, 0, INT_MAX, "1"),
    int("active-defrag-cycle-min", None, MODIFIABLE, 1, 99, "1"),
    int("active-defrag-cycle-max", None, MODIFIABLE, 1, 99, "25"),
    int("active-defrag-threshold-lower", None, MODIFIABLE, 0, 1000, "10"),
    int("active-defrag-threshold-upper", None, MODIFIABLE, 0, 1000, "100"),
    int("lfu-log-factor", None, MODIFIABLE, 0, INT_MAX, "10"),
    int("lfu-decay-time", None, MODIFIABLE, 0, INT_MAX, "1"),
    int("replica-priority", Some("slave-priority"), MODIFIABLE, 0, INT_MAX, "100"),
    int("repl-diskless-sync-delay", None, MODIFIABLE, 0, INT_MAX, "5"),
    int("maxmemory-samples", None, MODIFIABLE, 1, INT_MAX, "5"),
    int("maxmemory-eviction-tenacity", None, MODIFIABLE, 0, 100, "10"),
    int("timeout", None, MODIFIABLE, 0, INT_MAX, "0"),
    int("replica-announce-port", Some("slave-announce-port"), MODIFIABLE, 0, 65535, "0"),
    int("tcp-backlog", None, IMMUTABLE, 0, INT_MAX, "511"),
    int("cluster-port", None, IMMUTABLE, 0, 65535, "0"),
    int("cluster-announce-bus-port", None, MODIFIABLE, 0, 65535, "0"),
    int("cluster-announce-port", None, MODIFIABLE, 0, 65535, "0"),
    int("cluster-announce-tls-port", None, MODIFIABLE, 0, 65535, "0"),
    int("repl-timeout", None, MODIFIABLE, 1, INT_MAX, "60"),
    int(
        "repl-ping-replica-period",
        Some("repl-ping-slave-period"),
        MODIFIABLE,
        1,
        INT_MAX,
        "10",
    ),
    int("list-compress-depth", None, MODIFIABLE, 0, INT_MAX, "0"),
    int("rdb-key-save-delay", None, MODIFIABLE | HIDDEN, INT_MIN, INT_MAX, "0"),
    int("key-load-delay", None, MODIFIABLE | HIDDEN, INT_MIN, INT_MAX, "0"),
    int("active-expire-effort", None, MODIFIABLE, 1, 10, "1"),
    param(
        "hz",
        None,
        MODIFIABLE,
        Kind::Number {
            range: signed(0, INT_MAX),
            unit: Unit::Plain,
            cap: Some(HZ_RANGE),
        },
        "10",
    ),
    int("min-replicas-to-write", Some("min-slaves-to-write"), MODIFIABLE, 0, INT_MAX, "0"),
    int("min-replicas-max-lag", Some("min-slaves-max-lag"), MODIFIABLE, 0, INT_MAX, "10"),
    int("watchdog-period", None, MODIFIABLE | HIDDEN, 0, INT_MAX, "0"),
    int("shutdown-timeout", None, MODIFIABLE, 0, INT_MAX, "10"),
    int("repl-diskless-sync-max-replicas", None, MODIFIABLE, 0, INT_MAX, "0"),
    // C unsigned int.
    number("maxclients", None, MODIFIABLE, unsigned(1, UINT_MAX), Unit::Plain, "10000"),
    number("unixsocketperm", None, IMMUTABLE, unsigned(0, 0o777), Unit::Octal, "0"),
    number("socket-mark-id", None, IMMUTABLE, unsigned(0, UINT_MAX), Unit::Plain, "0"),
    // C unsigned long (Redis checks these bounds as signed).
    number(
        "active-defrag-max-scan-fields",
        None,
        MODIFIABLE,
        signed(1, LONG_MAX),
        Unit::Plain,
        "1000",
    ),
    number("slowlog-max-len", None, MODIFIABLE, signed(0, LONG_MAX), Unit::Plain, "128"),
    number("acllog-max-len", None, MODIFIABLE, signed(0, LONG_MAX), Unit::Plain, "128"),
    // C long long.
    number(
        "busy-reply-threshold",
        Some("lua-time-limit"),
        MODIFIABLE,
        signed(0, LONG_MAX),
        Unit::Plain,
        "5000",
    ),
    number("cluster-node-timeout", None, MODIFIABLE, signed(0, LONG_MAX), Unit::Plain, "15000"),
    number(
        "slowlog-log-slower-than",
        None,
        MODIFIABLE,
        signed(-1, LONG_MAX),
        Unit::Plain,
        "10000",
    ),
    number("latency-monitor-threshold", None, MODIFIABLE, signed(0, LONG_MAX), Unit::Plain, "0"),
    number(
        "proto-max-bulk-len",
        None,
        MODIFIABLE,
        signed(1024 * 1024, LONG_MAX),
        Unit::Memory,
        "536870912",
    ),
    number("stream-node-max-entries", None, MODIFIABLE, signed(0, LONG_MAX), Unit::Plain, "100"),
    number("repl-backlog-size", None, MODIFIABLE, signed(1, LONG_MAX), Unit::Memory, "1048576").on_set(OnSet::RaiseTo(16 * 1024)),
    // C unsigned long long.
    number("maxmemory", None, MODIFIABLE, unsigned(0, ULLONG_MAX), Unit::Memory, "0"),
    number(
        "cluster-link-sendbuf-limit",
        None,
        MODIFIABLE,
        unsigned(0, ULLONG_MAX),
        Unit::Memory,
        "0",
    ),
    // C size_t.
    number(
        "hash-max-listpack-entries",
        Some("hash-max-ziplist-entries"),
        MODIFIABLE,
        unsigned(0, LONG_MAX),
        Unit::Plain,
        "512",
    ),
    number(
        "set-max-intset-entries",
        None,
        MODIFIABLE,
        unsigned(0, LONG_MAX),
        Unit::Plain,
        "512",
    ),
    number(
        "zset-max-listpack-entries",
        Some("zset-max-ziplist-entries"),
        MODIFIABLE,
        unsigned(0, LONG_MAX),
        Unit::Plain,
        "128",
    ),
    number(
        "active-defrag-ignore-bytes",
        None,
        MODIFIABLE,
        unsigned(1, LONG_MAX),
        Unit::Memory,
        "104857600",
    ),
    number(
        "hash-max-listpack-value",
        Some("hash-max-ziplist-value"),
        MODIFIABLE,
        unsigned(0, LONG_MAX),
        Unit::Memory,
        "64",
    ),
    number(
        "stream-node-max-bytes",
        None,
        MODIFIABLE,
        unsigned(0, LONG_MAX),
        Unit::Memory,
        "4096",
    ),
    number(
        "zset-max-listpack-value",
        Some("zset-max-ziplist-value"),
        MODIFIABLE,
        unsigned(0, LONG_MAX),
        Unit::Memory,
        "64",
    ),
    number(
        "hll-sparse-max-bytes",
        None,
        MODIFIABLE,
        unsigned(0, LONG_MAX),
        Unit::Memory,
        "3000",
    ),
    number(
        "tracking-table-max-keys",
        None,
        MODIFIABLE,
        unsigned(0, LONG_MAX),
        Unit::Plain,
        "1000000",
    ),
    number(
        "client-query-buffer-limit",
        None,
        MODIFIABLE,
        unsigned(1024 * 1024, LONG_MAX),
        Unit::Memory,
        "1073741824",
    ),
    // C ssize_t.
    number(
        "maxmemory-clients",
        None,
        MODIFIABLE,
        signed(-100, LONG_MAX),
        Unit::MemoryOrPercent,
        "0",
    ),
    // C time_t and off_t.
    number("repl-backlog-ttl", None, MODIFIABLE, signed(0, LONG_MAX), Unit::Plain, "3600"),
    number(
        "auto-aof-rewrite-min-size",
        None,
        MODIFIABLE,
        signed(0, LONG_MAX),
        Unit::Memory,
        "67108864",
    ),
    number(
        "loading-process-events-interval-bytes",
        None,
        MODIFIABLE | HIDDEN,
        signed(1024, INT_MAX),
        Unit::Plain,
        "2097152",
    ),
    // TLS (the reference server is built with TLS, so it lists these).
    int("tls-port", None, MODIFIABLE, 0, 65535, "0"),
    int("tls-session-cache-size", None, MODIFIABLE, 0, INT_MAX, "20480"),
    int("tls-session-cache-timeout", None, MODIFIABLE, 0, INT_MAX, "300"),
    boolean("tls-cluster", None, MODIFIABLE, "no").on_set(OnSet::NoTls),
    boolean("tls-replication", None, MODIFIABLE, "no").on_set(OnSet::NoTls),
    choice("tls-auth-clients", MODIFIABLE, TLS_AUTH_CLIENTS, "yes"),
    boolean("tls-prefer-server-ciphers", None, MODIFIABLE, "no"),
    boolean("tls-session-caching", None, MODIFIABLE, "yes"),
    text("tls-cert-file", None, MODIFIABLE, ""),
    text("tls-key-file", None, MODIFIABLE, ""),
    text("tls-key-file-pass", None, MODIFIABLE, ""),
    text("tls-client-cert-file", None, MODIFIABLE, ""),
    text("tls-client-key-file", None, MODIFIABLE, ""),
    text("tls-client-key-file-pass", None, MODIFIABLE, ""),
    text("tls-dh-params-file", None, MODIFIABLE, ""),
    text("tls-ca-cert-file", None, MODIFIABLE, ""),
    text("tls-ca-cert-dir", None, MODIFIABLE, ""),
    text("tls-protocols", None, MODIFIABLE, ""),
    text("tls-ciphers", None, MODIFIABLE, ""),
    text("tls-ciphersuites", None, MODIFIABLE, ""),
    // Special parameters, each with its own syntax. `dir` defaults to the
    // working directory, filled in by `ConfigParams::new`.
    special("dir", None, PROTECTED | DENY_LOADING, Kind::Dir, ""),
    special("save", None, MULTI_ARG, Kind::Save, "3600 1 300 100 60 10000"),
    special(
        "client-output-buffer-limit",
        None,
        MULTI_ARG,
        Kind::ClientOutputBufferLimit,
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
    ),
    special("oom-score-adj-values", None, MULTI_ARG, Kind::OomScoreAdjValues, "0 200 800"),
    special("notify-keyspace-events", None, MODIFIABLE, Kind::NotifyKeyspaceEvents, ""),
    special("bind", None, MULTI_ARG, Kind::Bind, "* -::*"),
    special("replicaof", Some("slaveof"), IMMUTABLE | MULTI_ARG, Kind::ReplicaOf, ""),
    special(
        "latency-tracking-info-percentiles",
        None,
        MULTI_ARG,
        Kind::LatencyTrackingPercentiles,
        "50 99 99.9",
    ),
    // keylock's own parameters (not in Redis).
    boolean("native-scripts", None, MODIFIABLE, "yes"),
    // Who may run the test controls (KEYLOCK CLOCK, FAULT, RESET): as
    // `enable-debug-command`, `local` meaning loopback and Unix-socket clients.
    choice("enable-test-commands", IMMUTABLE | HIDDEN, PROTECTED_ACTION, "local"),
    // How the clock starts: flowing in real time, or frozen at start-up
    // until KEYLOCK CLOCK moves it.
    choice("clock", IMMUTABLE | HIDDEN, CLOCK_START, "real"),
    // keylock's Raft-replicated shards (see `raft`): the mode, this
    // member's id, the port its Raft messages come in on, and every
    // member as `ID=HOST:PORT:RAFTPORT`.
    choice("replication", IMMUTABLE | HIDDEN, REPLICATION_MODE, "standalone"),
    int("raft-id", None, IMMUTABLE | HIDDEN, 0, i64::MAX, "0"),
    int("raft-port", None, IMMUTABLE | HIDDEN, 0, 65535, "0"),
    text("raft-members", None, IMMUTABLE | HIDDEN, ""),
    // The master name members answer SENTINEL for.
    text("raft-shard-name", None, IMMUTABLE | HIDDEN, "mymaster"),
    // A port where the member is also seen as a sentinel (ROLE says
    // `sentinel` there): for clients that check it, as Redis's own do.
    int("raft-sentinel-port", None, IMMUTABLE | HIDDEN, 0, 65535, "0"),
    // A new member started to be added to a running shard (KEYLOCK
    // ADDMEMBER on its leader): it does not form a shard of its own, and
    // waits for the leader to send it the log.
    boolean("raft-join", None, IMMUTABLE | HIDDEN, "no"),
    // How long a member goes unanswered before the others hold it down
    // (Sentinel's `s_down`, `+sdown`); it is probed five times as often.
    int("raft-down-after-milliseconds", None, IMMUTABLE | HIDDEN, 100, i64::MAX, "5000"),
    // Entries between a member's snapshots.
    int("raft-snapshot-entries", None, IMMUTABLE | HIDDEN, 1, i64::MAX, "10000"),
    // When a member's append counts as stored: synced, written and synced
    // once a second, or written (see `raft::log_store`).
    choice("raft-fsync", IMMUTABLE | HIDDEN, RAFT_FSYNC, "always"),
    // How many bytes of Raft log entries a member keeps in memory; older
    // ones are read back from the log's segments (see `raft::log_store`).
    number(
        "raft-log-memory",
        None,
        IMMUTABLE | HIDDEN,
        unsigned(0, ULLONG_MAX),
        Unit::Memory,
        "67108864",
    ),
    number("lua-memory-limit", None, MODIFIABLE, unsigned(0, ULLONG_MAX), Unit::Memory, "0"),
];

/// Defaults keylock sets differently from Redis, applied by
/// [`ConfigParams::new`]. `save`: a lock server or test double snapshots
/// only when configured to, so there is no schedule by default.
pub const KEYLOCK_DEFAULTS: &[(&str, &str)] = &[("save", "")];

/// Config-file directives that Redis 7.0 accepts and ignores, with the
/// number of arguments it accepts for them.
const DEPRECATED_DIRECTIVES: &[(&str, usize)] = &[
    ("list-max-ziplist-entries", 1),
    ("list-max-ziplist-value", 1),
    ("lua-replicate-commands", 1),
];

/// One name CONFIG GET and CONFIG SET know: a parameter's name or its alias.
struct Entry {
    name: &'static str,
    param: usize,
}

/// The current value of every parameter, keyed by canonical name.
pub struct ConfigParams {
    /// Parallel to [`PARAMS`]: the text CONFIG GET shows.
    values: Vec<String>,
    /// Parallel to [`PARAMS`]: each default, with keylock's overrides
    /// (CONFIG REWRITE leaves out what equals it).
    defaults: Vec<String>,
    /// Every name and alias, lowercase, in table order.
    entries: Vec<Entry>,
    /// Lowercase name or alias -> index into `entries`.
    by_name: HashMap<&'static str, usize>,
    /// Set by the first `save` directive: Redis resets the default schedule
    /// on the first `save` line of a config file and appends on later ones.
    save_directive_seen: bool,
}

impl Default for ConfigParams {
    fn default() -> Self {
        Self::new()
    }
}

impl ConfigParams {
    /// Every parameter at Redis 7.0.15's default, except those keylock
    /// overrides with `set_default` (see [`KEYLOCK_DEFAULTS`]). `dir` starts
    /// as the process's working directory, as in Redis.
    pub fn new() -> ConfigParams {
        let mut entries = Vec::new();
        for (index, p) in PARAMS.iter().enumerate() {
            entries.push(Entry {
                name: p.name,
                param: index,
            });
            if let Some(alias) = p.alias {
                entries.push(Entry { name: alias, param: index });
            }
        }
        let by_name = entries.iter().enumerate().map(|(i, e)| (e.name, i)).collect();
        let values = PARAMS
            .iter()
            .map(|p| match p.kind {
                Kind::Dir => std::env::current_dir()
                    .map(|d| d.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                _ => p.default.to_string(),
            })
            .collect();
        let defaults = PARAMS.iter().map(|p| p.default.to_string()).collect();
        let mut params = ConfigParams {
            values,
            defaults,
            entries,
            by_name,
            save_directive_seen: false,
        };
        for (name, value) in KEYLOCK_DEFAULTS {
            params.set_keylock_default(name, value);
        }
        params
    }

    /// CONFIG GET: the parameters matching any of `patterns` (Redis glob
    /// patterns, case-insensitive), as (name, value) pairs sorted by name.
    ///
    /// As in Redis 7.0: a pattern without `*`, `?` or `[` is an exact,
    /// case-insensitive lookup whose reply keeps the caller's spelling
    /// (`CONFIG GET MAXMEMORY` answers `MAXMEMORY`) and which also finds
    /// hidden parameters; a glob pattern matches canonical names and aliases
    /// alike (`*limit*` includes `lua-time-limit`) but never hidden ones. A
    /// parameter already in the reply under the same name is not repeated;
    /// an alias and its parameter are different names, so both can appear.
    ///
    /// Redis returns the matches in the order of a randomly seeded dict, which
    /// cannot be reproduced; they are sorted by (lowercase) name instead.
    pub fn get(&self, patterns: &[&[u8]]) -> Vec<(String, String)> {
        let mut found: Vec<(String, usize)> = Vec::new();
        let mut seen: Vec<String> = Vec::new();
        for pattern in patterns {
            if !pattern.iter().any(|c| matches!(c, b'[' | b'*' | b'?')) {
                let lower = pattern.to_ascii_lowercase();
                let Ok(lower) = String::from_utf8(lower) else { continue };
                if seen.contains(&lower) {
                    continue;
                }
                if let Some(&entry) = self.by_name.get(lower.as_str()) {
                    let reply_name = String::from_utf8_lossy(pattern).into_owned();
                    found.push((reply_name, self.entries[entry].param));
                    seen.push(lower);
                }
                continue;
            }
            for entry in &self.entries {
                if PARAMS[entry.param].flags & HIDDEN != 0 || seen.iter().any(|s| s == entry.name) {
                    continue;
                }
                if glob::matches(pattern, entry.name.as_bytes(), true) {
                    found.push((entry.name.to_string(), entry.param));
                    seen.push(entry.name.to_string());
                }
            }
        }
        found.sort_by_cached_key(|(name, _)| name.to_ascii_lowercase());
        found.into_iter().map(|(name, param)| (name, self.values[param].clone())).collect()
    }

    /// CONFIG SET name value [name value ...], from a client that
    /// `enable-protected-configs local` would treat as local (keylock
    /// normally serves loopback clients). See [`ConfigParams::set_from`].
    pub fn set(&mut self, pairs: &[(&[u8], &[u8])]) -> Result<Vec<&'static str>, CmdError> {
        self.set_from(pairs, true, false)
    }

    /// CONFIG SET: validates every pair, then applies all of them or none,
    /// with Redis 7.0's error texts. `client_is_local` decides whether
    /// `enable-protected-configs local` lets this client set the protected
    /// parameters (`dir`, `dbfilename`); while `loading`, the parameters
    /// Redis marks DENY_LOADING (`dir`, `appendonly`, `repl-diskless-load`)
    /// are refused with Redis's LOADING error.
    ///
    /// Returns the canonical names whose value changed, in argument order, so
    /// the server can react (to `requirepass`, `busy-reply-threshold`,
    /// `maxmemory`, …). Checks run in Redis's order: unknown names, immutable
    /// or protected parameters and duplicates first (the first such problem
    /// wins), then the values left to right.
    pub fn set_from(&mut self, pairs: &[(&[u8], &[u8])], client_is_local: bool, loading: bool) -> Result<Vec<&'static str>, CmdError> {
        let protected_allowed = match self.value("enable-protected-configs") {
            Some("yes") => true,
            Some(PROTECTED_ACTION_LOCAL) => client_is_local,
            _ => false,
        };
        // (entry, value) for each pair, once every name checked out.
        let mut targets: Vec<(usize, &[u8])> = Vec::with_capacity(pairs.len());
        for &(name, value) in pairs {
            let Some(entry) = self.entry_for(name) else {
                return Err(CmdError::err_bytes(
                    &[
                        b"Unknown option or number of arguments for CONFIG SET - '",
                        crate::error::quoted(name),
                        b"'",
                    ]
                    .concat(),
                ));
            };
            let param = &PARAMS[self.entries[entry].param];
            let refusal = if param.flags & IMMUTABLE != 0 {
                Some("can't set immutable config")
            } else if param.flags & PROTECTED != 0 && !protected_allowed {
                Some("can't set protected config")
            } else if loading && param.flags & DENY_LOADING != 0 {
                return Err(CmdError::new(crate::engine::exec::LOADING));
            } else if targets.iter().any(|&(earlier, _)| earlier == entry) {
                // Redis compares config records, and an alias is a record of
                // its own: `lua-time-limit 1 busy-reply-threshold 2` is allowed.
                Some("duplicate parameter")
            } else {
                None
            };
            if let Some(refusal) = refusal {
                // An unknown name later in the command does not override this:
                // Redis reports the first problem it meets.
                return Err(set_failed(&String::from_utf8_lossy(name), refusal));
            }
            targets.push((entry, value));
        }

        let mut values = self.values.clone();
        for &(entry, value) in &targets {
            let Entry { name, param } = self.entries[entry];
            let text = String::from_utf8_lossy(value);
            let args: Vec<&str> = if PARAMS[param].flags & MULTI_ARG != 0 {
                split_words(&text)
            } else {
                vec![&text]
            };
            match parse(param, &args, &values) {
                Ok(new_value) => values[param] = new_value,
                // Redis names the record it was setting: the canonical name,
                // or the alias when the alias was used.
                Err(problem) => return Err(set_failed(name, &problem)),
            }
        }

        // Redis runs a parameter's apply function only when its value
        // changed, after every value was stored.
        let mut changed = Vec::new();
        for &(entry, _) in &targets {
            let Entry { name: used_name, param } = self.entries[entry];
            if values[param] == self.values[param] {
                continue;
            }
            match PARAMS[param].on_set {
                OnSet::Nothing => {}
                OnSet::RaiseTo(minimum) => {
                    if values[param].parse::<i64>().is_ok_and(|v| v < minimum) {
                        values[param] = minimum.to_string();
                    }
                }
                OnSet::NoTls => {
                    if values[param] != "no" && values[param] != "0" {
                        return Err(set_failed(used_name, "Unable to update TLS configuration. Check server logs."));
                    }
                }
            }
            let name = PARAMS[param].name;
            if !changed.contains(&name) {
                changed.push(name);
            }
        }
        self.values = values;
        Ok(changed)
    }

    /// A config-file line or command-line flag: `name` without leading
    /// dashes (any case), and its argument words. Immutable and protected
    /// parameters are settable this way.
    ///
    /// The error is the line redis-server prints under `*** FATAL CONFIG FILE
    /// ERROR ***` and the offending line, e.g. `wrong number of arguments`,
    /// `argument couldn't be parsed into an integer`, or `Bad directive or
    /// wrong number of arguments` for a name that is not a parameter. The
    /// directives that are not parameters (`include`, `rename-command`,
    /// `user`, `loadmodule`, `sentinel`) are the caller's to handle; here
    /// they get that last error. The list-max-ziplist-entries,
    /// list-max-ziplist-value and lua-replicate-commands directives are
    /// accepted and ignored, as Redis 7.0 does.
    ///
    /// As in Redis 7.0.15, the first `save` directive replaces the default
    /// schedule, later ones add to it, and `save ""` empties it.
    pub fn apply_directive(&mut self, name: &str, args: &[String]) -> Result<(), String> {
        let lower = name.to_ascii_lowercase();
        let Some(&entry) = self.by_name.get(lower.as_str()) else {
            if DEPRECATED_DIRECTIVES.iter().any(|&(n, count)| n == lower && count == args.len()) {
                return Ok(());
            }
            return Err(BAD_DIRECTIVE.to_string());
        };
        let param = self.entries[entry].param;
        if PARAMS[param].flags & MULTI_ARG == 0 && args.len() != 1 {
            return Err(WRONG_ARG_COUNT.to_string());
        }
        // Redis 7.0.15 re-splits a lone non-empty argument of a multi-word
        // parameter, so `save "3600 1"` and `--bind "127.0.0.1 ::1"` work.
        let resplit;
        let words: Vec<&str> = match args {
            [one] if PARAMS[param].flags & MULTI_ARG != 0 && !one.is_empty() => {
                resplit = split_config_args(one);
                resplit.iter().map(String::as_str).collect()
            }
            _ => args.iter().map(String::as_str).collect(),
        };
        let mut value = parse(param, &words, &self.values).map_err(Cow::into_owned)?;
        if matches!(PARAMS[param].kind, Kind::Save) {
            let first = !std::mem::replace(&mut self.save_directive_seen, true);
            let empties = words == [""];
            let earlier = &self.values[param];
            if !first && !empties && !earlier.is_empty() {
                value = if value.is_empty() {
                    earlier.clone()
                } else {
                    format!("{earlier} {value}")
                };
            }
        }
        self.values[param] = value;
        Ok(())
    }

    /// Current value by canonical name or alias (any case), as CONFIG GET
    /// shows it.
    pub fn value(&self, name: &str) -> Option<&str> {
        let entry = self.entry_for(name.as_bytes())?;
        Some(&self.values[self.entries[entry].param])
    }

    /// Current value as an integer, for the server's own use: numeric
    /// parameters with memory units already resolved (`1mb` -> 1048576),
    /// `unixsocketperm` converted from octal, booleans as 1/0. A memory value
    /// above `i64::MAX` (possible for `maxmemory`) saturates to `i64::MAX`;
    /// `maxmemory-clients` given as a percentage is returned as the negated
    /// percentage, as Redis stores it (`10%` -> -10). None for names that are
    /// not parameters and for values that are not numbers.
    pub fn int(&self, name: &str) -> Option<i64> {
        let entry = self.entry_for(name.as_bytes())?;
        let param = self.entries[entry].param;
        let value = self.values[param].as_str();
        match PARAMS[param].kind {
            Kind::Bool(_) => Some(i64::from(value == "yes")),
            Kind::Number { unit: Unit::Octal, .. } => i64::from_str_radix(value, 8).ok(),
            Kind::Number {
                unit: Unit::MemoryOrPercent,
                ..
            } if value.ends_with('%') => value[..value.len() - 1].parse::<i64>().ok().map(|p| -p),
            Kind::Number {
                unit: Unit::Memory | Unit::MemoryOrPercent,
                ..
            } => value.parse::<u64>().ok().map(|v| i64::try_from(v).unwrap_or(i64::MAX)),
            _ => value.parse().ok(),
        }
    }

    /// Overrides a default at construction time (keylock's own defaults).
    /// `value` is written as for CONFIG SET (multi-word parameters split on
    /// spaces) and stored normalized. A name that is not a parameter, or a
    /// value the parameter refuses, is a bug in the caller: it fails a debug
    /// assertion and leaves the value unchanged.
    pub fn set_default(&mut self, name: &str, value: &str) {
        let Some(entry) = self.entry_for(name.as_bytes()) else {
            debug_assert!(false, "set_default: unknown parameter {name}");
            return;
        };
        let param = self.entries[entry].param;
        let args = if PARAMS[param].flags & MULTI_ARG != 0 {
            split_words(value)
        } else {
            vec![value]
        };
        match parse(param, &args, &self.values) {
            Ok(normalized) => self.values[param] = normalized,
            Err(problem) => debug_assert!(false, "set_default: {name} {value:?}: {problem}"),
        }
    }

    /// Like [`ConfigParams::set_default`], and the value becomes the
    /// parameter's default for CONFIG REWRITE too: a default keylock
    /// chooses differently from Redis, rather than a value found at start
    /// (the port actually bound is not a default, and is written out).
    pub fn set_keylock_default(&mut self, name: &str, value: &str) {
        self.set_default(name, value);
        if let Some(entry) = self.entry_for(name.as_bytes()) {
            let param = self.entries[entry].param;
            self.defaults[param] = self.values[param].clone();
        }
    }

    /// The canonical name of a parameter given by name or alias (any
    /// case), as CONFIG REWRITE files a config line under it.
    pub fn canonical_name(&self, name: &str) -> Option<&'static str> {
        self.entry_for(name.as_bytes()).map(|entry| PARAMS[self.entries[entry].param].name)
    }

    /// CONFIG REWRITE's view of every parameter, in table order: its
    /// config lines, each with whether it must be written even where the
    /// file does not mention the parameter (Redis's `force`: the value
    /// differs from the default). No lines means the parameter is to be
    /// absent from the file (an unset path, Redis's default `bind`, no
    /// `replicaof`): lines for it in the old file are blanked. The lines
    /// are those Redis 7.0.15's `rewriteConfig*Option` functions write.
    ///
    /// A cluster node's master is the cluster's to give (a replica's
    /// `replicaof` would stop it at start): no `replicaof` line, as Redis's
    /// `rewriteConfigReplicaOfOption` writes none in cluster mode.
    pub fn rewrite_lines(&self) -> Vec<(&'static str, Vec<(String, bool)>)> {
        let cluster = self.int("cluster-enabled") == Some(1);
        PARAMS
            .iter()
            .enumerate()
            .map(|(i, p)| {
                if cluster && matches!(p.kind, Kind::ReplicaOf) {
                    return (p.name, Vec::new());
                }
                (p.name, rewrite_param(p, &self.values[i], &self.defaults[i]))
            })
            .collect()
    }

    fn entry_for(&self, name: &[u8]) -> Option<usize> {
        let lower = std::str::from_utf8(name).ok()?.to_ascii_lowercase();
        self.by_name.get(lower.as_str()).copied()
    }
}

/// Text parameters Redis keeps as NULL when empty (`EMPTY_STRING_IS_NULL`),
/// which CONFIG REWRITE leaves out of the file rather than writing `""`.
const EMPTY_IS_UNSET: &[&str] = &[
    "unixsocket",
    "pidfile",
    "replica-announce-ip",
    "masteruser",
    "cluster-announce-ip",
    "cluster-announce-hostname",
    "server_cpulist",
    "bio_cpulist",
    "aof_rewrite_cpulist",
    "bgsave_cpulist",
    "bind-source-addr",
    "masterauth",
    "requirepass",
    "tls-cert-file",
    "tls-key-file",
    "tls-key-file-pass",
    "tls-client-cert-file",
    "tls-client-key-file",
    "tls-client-key-file-pass",
    "tls-dh-params-file",
    "tls-ca-cert-file",
    "tls-ca-cert-dir",
    "tls-protocols",
    "tls-ciphers",
    "tls-ciphersuites",
];

/// One parameter's CONFIG REWRITE lines (see [`ConfigParams::rewrite_lines`]).
fn rewrite_param(p: &Param, value: &str, default: &str) -> Vec<(String, bool)> {
    let name = p.name;
    let differs = value != default;
    let line = |text: String, force: bool| vec![(format!("{name} {text}"), force)];
    match &p.kind {
        Kind::Bool(_) | Kind::Enum(..) => line(value.to_string(), differs),
        Kind::Text(_) | Kind::ProcTitleTemplate => {
            if value.is_empty() && EMPTY_IS_UNSET.contains(&name) {
                return Vec::new();
            }
            line(crate::engine::repr(value.as_bytes()), differs)
        }
        Kind::Number { unit, .. } => {
            let shown = match unit {
                Unit::MemoryOrPercent if value.ends_with('%') => value.to_string(),
                Unit::Memory | Unit::MemoryOrPercent => rewrite_memory(value.parse().unwrap_or(0)),
                Unit::Octal | Unit::Plain => value.to_string(),
            };
            line(shown, differs)
        }
        Kind::Dir => line(crate::engine::repr(value.as_bytes()), true),
        Kind::Save => {
            let words: Vec<&str> = value.split(' ').filter(|w| !w.is_empty()).collect();
            if words.is_empty() {
                return line("\"\"".to_string(), true);
            }
            words.chunks(2).map(|pair| (format!("{name} {}", pair.join(" ")), true)).collect()
        }
        Kind::ClientOutputBufferLimit => {
            let groups: Vec<&str> = value.split(' ').collect();
            let defaults: Vec<&str> = default.split(' ').collect();
            groups
                .chunks(4)
                .zip(defaults.chunks(4))
                .filter_map(|(group, default)| {
                    let [class, hard, soft, seconds] = group else { return None };
                    let class = if *class == "slave" { "replica" } else { class };
                    let memory = |text: &str| rewrite_memory(text.parse().unwrap_or(0));
                    let text = format!("{name} {class} {} {} {seconds}", memory(hard), memory(soft));
                    Some((text, group[1..] != default[1..]))
                })
                .collect()
        }
        Kind::OomScoreAdjValues => line(value.to_string(), differs),
        Kind::NotifyKeyspaceEvents => line(crate::engine::repr(value.as_bytes()), !value.is_empty()),
        Kind::Bind => {
            if value == p.default {
                return Vec::new();
            }
            line(if value.is_empty() { "\"\"".to_string() } else { value.to_string() }, true)
        }
        Kind::ReplicaOf => {
            if value.is_empty() {
                return Vec::new();
            }
            line(value.to_string(), true)
        }
        Kind::LatencyTrackingPercentiles => line(if value.is_empty() { "\"\"".to_string() } else { value.to_string() }, true),
    }
}

/// Redis's rewriteConfigFormatMemory: the largest of gb, mb and kb that
/// divides the value exactly.
fn rewrite_memory(bytes: u64) -> String {
    const KB: u64 = 1024;
    match bytes {
        0 => "0".to_string(),
        b if b % (KB * KB * KB) == 0 => format!("{}gb", b / (KB * KB * KB)),
        b if b % (KB * KB) == 0 => format!("{}mb", b / (KB * KB)),
        b if b % KB == 0 => format!("{}kb", b / KB),
        b => b.to_string(),
    }
}

pub(crate) fn set_failed(name: &str, problem: &str) -> CmdError {
    CmdError::err(format!("CONFIG SET failed (possibly related to argument '{name}') - {problem}"))
}

/// Redis's sdssplitlen on a single space: empty input gives no words, and
/// every space separates (so two spaces make an empty word).
fn split_words(value: &str) -> Vec<&str> {
    if value.is_empty() { Vec::new() } else { value.split(' ').collect() }
}

/// Redis's sdssplitargs (`request::split_args`): on unbalanced quotes
/// Redis gets no words at all, and so does this.
fn split_config_args(line: &str) -> Vec<String> {
    crate::request::split_args(line.as_bytes())
        .unwrap_or_default()
        .into_iter()
        .map(|w| String::from_utf8_lossy(&w).into_owned())
        .collect()
}

/// Checks `args` for parameter `param` and returns the value CONFIG GET
/// would show afterwards. `values` holds the other parameters' current
/// values (the proc title template depends on `unixsocket`).
fn parse(param: usize, args: &[&str], values: &[String]) -> Result<String, Problem> {
    let p = &PARAMS[param];
    // Parameters that are not MULTI_ARG always get exactly one word.
    let first = args.first().copied().unwrap_or("");
    match &p.kind {
        Kind::Bool(check) => {
            let on = if first.eq_ignore_ascii_case("yes") {
                true
            } else if first.eq_ignore_ascii_case("no") {
                false
            } else {
                return Err("argument must be 'yes' or 'no'".into());
            };
            if let Some(check) = check {
                check(on)?;
            }
            Ok(if on { "yes" } else { "no" }.to_string())
        }
        Kind::Text(check) => {
            if let Some(check) = check {
                check(first)?;
            }
            Ok(first.to_string())
        }
        Kind::Enum(options, check) => parse_enum(options, p.flags & MULTI_ARG != 0, *check, args),
        Kind::Number { range, unit, cap } => {
            let mut n = parse_number(*unit, first)?;
            check_bounds(*range, *unit, n)?;
            if let Some((low, high)) = cap {
                n = n.clamp(*low, *high);
            }
            Ok(show_number(*unit, n))
        }
        Kind::ProcTitleTemplate => {
            let unixsocket = PARAMS
                .iter()
                .position(|q| q.name == "unixsocket")
                .map_or("", |i| values[i].as_str());
            if proc_title_template_valid(first, unixsocket) {
                Ok(first.to_string())
            } else {
                Err("template format is invalid or contains unknown variables".into())
            }
        }
        Kind::Dir => parse_dir(args, &values[param]),
        Kind::Save => parse_save(args),
        Kind::ClientOutputBufferLimit => parse_client_output_buffer_limit(args, &values[param]),
        Kind::OomScoreAdjValues => parse_oom_score_adj_values(args),
        Kind::NotifyKeyspaceEvents => {
            if args.len() != 1 {
                return Err(WRONG_ARG_COUNT.into());
            }
            parse_keyspace_events(first)
        }
        Kind::Bind => {
            if args.len() > MAX_BIND_ADDRESSES {
                return Err("Too many bind addresses specified.".into());
            }
            if args.len() == 1 && args[0].is_empty() {
                return Ok(String::new());
            }
            Ok(args.join(" "))
        }
        Kind::ReplicaOf => parse_replicaof(args),
        Kind::LatencyTrackingPercentiles => parse_percentiles(args),
    }
}

/// Redis's enumConfigSet / configEnumGetValue / configEnumGetName.
fn parse_enum(options: EnumOptions, bit_flags: bool, check: Check<u32>, args: &[&str]) -> Result<String, Problem> {
    let refuse = || -> Problem {
        let names: Vec<&str> = options.iter().map(|(name, _)| *name).collect();
        // Redis copies the text into a 256-byte buffer.
        let mut text = format!("argument(s) must be one of the following: {}", names.join(", "));
        text.truncate(255);
        text.into()
    };
    if args.is_empty() || (!bit_flags && args.len() != 1) {
        return Err(refuse());
    }
    let mut value = 0;
    for arg in args {
        let mut matched = false;
        for (name, bits) in options {
            if arg.eq_ignore_ascii_case(name) {
                value |= bits;
                matched = true;
            }
        }
        if !matched {
            return Err(refuse());
        }
    }
    if let Some(check) = check {
        check(value)?;
    }
    Ok(enum_name(options, bit_flags, value))
}

fn enum_name(options: EnumOptions, bit_flags: bool, value: u32) -> String {
    let mut names: Vec<&str> = Vec::new();
    let mut unmatched = value;
    for &(name, bits) in options {
        if bits == value {
            return name.to_string();
        }
        if bit_flags && bits != 0 && bits == unmatched & bits {
            names.push(name);
            unmatched &= !bits;
        }
    }
    if names.is_empty() || unmatched != 0 {
        "unknown".to_string()
    } else {
        names.join(" ")
    }
}

/// Redis's numericParseString.
fn parse_number(unit: Unit, text: &str) -> Result<i64, Problem> {
    if matches!(unit, Unit::Memory | Unit::MemoryOrPercent)
        && let Some(bytes) = memtoull(text)
    {
        // Redis carries the value in a `long long`.
        return Ok(bytes as i64);
    }
    if unit == Unit::MemoryOrPercent
        && text.len() > 1
        && text.ends_with('%')
        && let Some(percent) = string2ll(&text.as_bytes()[..text.len() - 1])
        && percent >= 0
    {
        // Stored negative, as Redis does.
        return Ok(-percent);
    }
    if unit == Unit::Octal {
        let (n, end, overflow) = c_strtoll(text.as_bytes(), 8);
        if !overflow && end == text.len() {
            return Ok(n);
        }
    }
    if unit == Unit::Plain
        && let Some(n) = string2ll(text.as_bytes())
    {
        return Ok(n);
    }
    Err(match unit {
        Unit::MemoryOrPercent => "argument must be a memory or percent value",
        Unit::Memory => "argument must be a memory value",
        Unit::Octal => "argument couldn't be parsed as an octal number",
        Unit::Plain => "argument couldn't be parsed into an integer",
    }
    .into())
}

/// Redis's numericBoundaryCheck.
fn check_bounds(range: Range, unit: Unit, n: i64) -> Result<(), Problem> {
    if range.unsigned {
        let (n, min, max) = (n as u64, range.min as u64, range.max as u64);
        if n > max || n < min {
            return Err(if unit == Unit::Octal {
                format!("argument must be between {min:o} and {max:o} inclusive")
            } else {
                format!("argument must be between {min} and {max} inclusive")
            }
            .into());
        }
    } else if unit == Unit::MemoryOrPercent && n < 0 {
        if n < range.min {
            return Err(format!("percentage argument must be less or equal to {}", -range.min).into());
        }
    } else if n > range.max || n < range.min {
        return Err(format!("argument must be between {} and {} inclusive", range.min, range.max).into());
    }
    Ok(())
}

/// Redis's numericConfigGet.
fn show_number(unit: Unit, n: i64) -> String {
    match unit {
        Unit::MemoryOrPercent if n < 0 => format!("{}%", n.unsigned_abs()),
        Unit::Memory | Unit::MemoryOrPercent => (n as u64).to_string(),
        Unit::Octal => format!("{:o}", n as u64),
        Unit::Plain => n.to_string(),
    }
}

/// Redis's memtoull: digits, then an optional unit (b, k, kb, m, mb, g, gb,
/// any case; k/m/g are powers of 1000, kb/mb/gb powers of 1024). No sign,
/// no spaces; an empty number is 0, a number too large saturates, and the
/// multiplication wraps, all as in Redis.
pub(crate) fn memtoull(text: &str) -> Option<u64> {
    let bytes = text.as_bytes();
    if bytes.first() == Some(&b'-') {
        return None;
    }
    let digits = bytes.iter().take_while(|c| c.is_ascii_digit()).count();
    let multiplier: u64 = match text[digits..].to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    // Redis copies the digits into a 128-byte buffer.
    if digits >= 128 {
        return None;
    }
    let value = bytes[..digits]
        .iter()
        .fold(0u64, |acc, d| acc.saturating_mul(10).saturating_add(u64::from(d - b'0')));
    Some(value.wrapping_mul(multiplier))
}

/// Redis's string2ll (shared with the command parsers).
fn string2ll(s: &[u8]) -> Option<i64> {
    crate::numfmt::parse_i64(s)
}

/// C's isspace in the "C" locale.
fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// glibc's strtoll: leading spaces, an optional sign, digits in `radix`.
/// Returns the value (saturated on overflow), where parsing stopped (0 when
/// no digits were found, as C sets endptr to the start), and whether it
/// overflowed.
fn c_strtoll(s: &[u8], radix: u32) -> (i64, usize, bool) {
    let mut i = 0;
    while i < s.len() && is_c_space(s[i]) {
        i += 1;
    }
    let mut negative = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        negative = s[i] == b'-';
        i += 1;
    }
    let start = i;
    let limit: u64 = if negative { 1 << 63 } else { i64::MAX as u64 };
    let mut acc: u64 = 0;
    let mut overflow = false;
    while let Some(d) = s.get(i).and_then(|&c| char::from(c).to_digit(radix)) {
        match acc.checked_mul(u64::from(radix)).and_then(|v| v.checked_add(u64::from(d))) {
            Some(v) if v <= limit && !overflow => acc = v,
            _ => overflow = true,
        }
        i += 1;
    }
    if i == start {
        return (0, 0, false);
    }
    if overflow {
        return (if negative { i64::MIN } else { i64::MAX }, i, true);
    }
    let value = if negative { (acc as i64).wrapping_neg() } else { acc as i64 };
    (value, i, false)
}

/// `strtoll(s, &end, 10)` followed by Redis's `*end == '\0'` check.
fn c_strtoll_whole(s: &str) -> Option<i64> {
    let (n, end, _) = c_strtoll(s.as_bytes(), 10);
    (end == s.len()).then_some(n)
}

/// Redis's validateProcTitleTemplate: the template must expand (known
/// `{variables}`, `{{` for a literal brace, no unterminated `{`) to
/// something that is not empty once spaces are trimmed. The variables that
/// can expand to nothing are `{title}` (empty when validating),
/// `{server-mode}` (empty outside cluster and sentinel mode) and
/// `{unixsocket}`.
fn proc_title_template_valid(template: &str, unixsocket: &str) -> bool {
    let mut expanded = String::new();
    let mut rest = template;
    while !rest.is_empty() {
        let Some(open) = rest.find('{') else {
            expanded.push_str(rest);
            break;
        };
        expanded.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        if after.is_empty() {
            return false;
        }
        if let Some(quoted) = after.strip_prefix('{') {
            expanded.push('{');
            rest = quoted;
            continue;
        }
        let Some(close) = after.find('}') else { return false };
        match &after[..close] {
            "title" | "server-mode" => {}
            "unixsocket" => expanded.push_str(unixsocket),
            "listen-addr" | "config-file" | "port" | "tls-port" => expanded.push('x'),
            _ => return false,
        }
        rest = &after[close + 1..];
    }
    !expanded.trim_matches(' ').is_empty()
}

/// `dir`: must name an existing directory; stored as an absolute path, as
/// Redis shows its working directory after chdir. A relative path is taken
/// from the current `dir`, as a second chdir would. The error is the
/// system's text, as Redis shows strerror.
fn parse_dir(args: &[&str], current: &str) -> Result<String, Problem> {
    let [path] = args else { return Err(WRONG_ARG_COUNT.into()) };
    let path = std::path::Path::new(current).join(path);
    let os_error = |e: std::io::Error| -> Problem {
        let text = e.to_string();
        // io::Error shows "No such file or directory (os error 2)".
        match text.find(" (os error ") {
            Some(at) => text[..at].to_string().into(),
            None => text.into(),
        }
    };
    let meta = std::fs::metadata(&path).map_err(os_error)?;
    if !meta.is_dir() {
        return Err("Not a directory".into());
    }
    let absolute = std::fs::canonicalize(&path).map_err(os_error)?;
    Ok(absolute.to_string_lossy().into_owned())
}

/// `save`: pairs of seconds (>= 1) and changes (>= 0); a single empty word
/// means no snapshots.
fn parse_save(args: &[&str]) -> Result<String, Problem> {
    let args: &[&str] = if args.len() == 1 && args[0].is_empty() { &[] } else { args };
    let invalid = || -> Problem { "Invalid save parameters".into() };
    if !args.len().is_multiple_of(2) {
        return Err(invalid());
    }
    let mut shown = Vec::with_capacity(args.len());
    for (i, arg) in args.iter().enumerate() {
        let n = c_strtoll_whole(arg).ok_or_else(invalid)?;
        let is_seconds = i % 2 == 0;
        if (is_seconds && n < 1) || (!is_seconds && n < 0) {
            return Err(invalid());
        }
        // Seconds are a time_t, changes an int (Redis truncates them).
        shown.push(if is_seconds { n.to_string() } else { (n as i32).to_string() });
    }
    Ok(shown.join(" "))
}

/// The client classes of client-output-buffer-limit, in the order CONFIG GET
/// shows them.
const BUFFER_LIMIT_CLASSES: [&str; 3] = ["normal", "slave", "pubsub"];

/// `client-output-buffer-limit <class> <hard> <soft> <soft seconds>`...:
/// all groups are checked before any is applied; classes not named keep
/// their limits.
fn parse_client_output_buffer_limit(args: &[&str], current: &str) -> Result<String, Problem> {
    if !args.len().is_multiple_of(4) {
        return Err("Wrong number of arguments in buffer limit configuration.".into());
    }
    let mut limits: Vec<[String; 3]> = BUFFER_LIMIT_CLASSES.iter().map(|_| Default::default()).collect();
    let current: Vec<&str> = current.split(' ').collect();
    for (class, chunk) in current.chunks(4).enumerate().take(limits.len()) {
        if let [_, hard, soft, seconds] = chunk {
            limits[class] = [hard.to_string(), soft.to_string(), seconds.to_string()];
        }
    }
    for group in args.chunks(4) {
        let class = match group[0].to_ascii_lowercase().as_str() {
            "normal" => 0,
            "slave" | "replica" => 1,
            "pubsub" => 2,
            _ => return Err("Invalid client class specified in buffer limit configuration.".into()),
        };
        let hard = memtoull(group[1]);
        let soft = memtoull(group[2]);
        // Redis keeps the seconds in an int before checking them.
        let seconds = c_strtoll_whole(group[3]).map(|s| s as i32);
        match (hard, soft, seconds) {
            (Some(hard), Some(soft), Some(seconds)) if seconds >= 0 => {
                limits[class] = [hard.to_string(), soft.to_string(), seconds.to_string()];
            }
            _ => return Err("Error in hard, soft or soft_seconds setting in buffer limit configuration.".into()),
        }
    }
    let groups: Vec<String> = BUFFER_LIMIT_CLASSES
        .iter()
        .zip(&limits)
        .map(|(class, [hard, soft, seconds])| format!("{class} {hard} {soft} {seconds}"))
        .collect();
    Ok(groups.join(" "))
}

/// `oom-score-adj-values <master> <replica> <bgchild>`, each -2000..=2000.
fn parse_oom_score_adj_values(args: &[&str]) -> Result<String, Problem> {
    if args.len() != 3 {
        return Err(WRONG_ARG_COUNT.into());
    }
    let mut shown = Vec::with_capacity(3);
    for arg in args {
        match c_strtoll_whole(arg) {
            Some(n) if (-2000..=2000).contains(&n) => shown.push(n.to_string()),
            _ => return Err("Invalid oom-score-adj-values, elements must be between -2000 and 2000.".into()),
        }
    }
    Ok(shown.join(" "))
}

// Keyspace notification classes (Redis's NOTIFY_* bits).
pub const NOTIFY_KEYSPACE: u32 = 1 << 0;
pub const NOTIFY_KEYEVENT: u32 = 1 << 1;
pub const NOTIFY_GENERIC: u32 = 1 << 2;
pub const NOTIFY_STRING: u32 = 1 << 3;
pub const NOTIFY_LIST: u32 = 1 << 4;
pub const NOTIFY_SET: u32 = 1 << 5;
pub const NOTIFY_HASH: u32 = 1 << 6;
pub const NOTIFY_ZSET: u32 = 1 << 7;
pub const NOTIFY_EXPIRED: u32 = 1 << 8;
pub const NOTIFY_EVICTED: u32 = 1 << 9;
pub const NOTIFY_STREAM: u32 = 1 << 10;
pub const NOTIFY_KEY_MISS: u32 = 1 << 11;
pub const NOTIFY_MODULE: u32 = 1 << 12;
pub const NOTIFY_NEW: u32 = 1 << 13;
/// `A`: every class except key-miss (`m`) and new-key (`n`) events.
pub const NOTIFY_ALL: u32 = NOTIFY_GENERIC
    | NOTIFY_STRING
    | NOTIFY_LIST
    | NOTIFY_SET
    | NOTIFY_HASH
    | NOTIFY_ZSET
    | NOTIFY_EXPIRED
    | NOTIFY_EVICTED
    | NOTIFY_STREAM
    | NOTIFY_MODULE;

/// Redis's keyspaceEventsStringToFlags then keyspaceEventsFlagsToString: the
/// stored text is Redis's canonical spelling (`KEA` reads back `AKE`).
fn parse_keyspace_events(classes: &str) -> Result<String, Problem> {
    let flags = keyspace_event_flags(classes)?;
    let mut shown = String::new();
    if flags & NOTIFY_ALL == NOTIFY_ALL {
        shown.push('A');
    } else {
        for (bit, c) in [
            (NOTIFY_GENERIC, 'g'),
            (NOTIFY_STRING, '$'),
            (NOTIFY_LIST, 'l'),
            (NOTIFY_SET, 's'),
            (NOTIFY_HASH, 'h'),
            (NOTIFY_ZSET, 'z'),
            (NOTIFY_EXPIRED, 'x'),
            (NOTIFY_EVICTED, 'e'),
            (NOTIFY_STREAM, 't'),
            (NOTIFY_MODULE, 'd'),
            (NOTIFY_NEW, 'n'),
        ] {
            if flags & bit != 0 {
                shown.push(c);
            }
        }
    }
    for (bit, c) in [(NOTIFY_KEYSPACE, 'K'), (NOTIFY_KEYEVENT, 'E'), (NOTIFY_KEY_MISS, 'm')] {
        if flags & bit != 0 {
            shown.push(c);
        }
    }
    Ok(shown)
}

/// The class flags of a `notify-keyspace-events` value (Redis's
/// keyspaceEventsStringToFlags), for the engine's typed settings.
pub fn keyspace_event_flags(classes: &str) -> Result<u32, Problem> {
    let mut flags = 0;
    for c in classes.bytes() {
        flags |= match c {
            b'A' => NOTIFY_ALL,
            b'g' => NOTIFY_GENERIC,
            b'$' => NOTIFY_STRING,
            b'l' => NOTIFY_LIST,
            b's' => NOTIFY_SET,
            b'h' => NOTIFY_HASH,
            b'z' => NOTIFY_ZSET,
            b'x' => NOTIFY_EXPIRED,
            b'e' => NOTIFY_EVICTED,
            b'K' => NOTIFY_KEYSPACE,
            b'E' => NOTIFY_KEYEVENT,
            b't' => NOTIFY_STREAM,
            b'm' => NOTIFY_KEY_MISS,
            b'd' => NOTIFY_MODULE,
            b'n' => NOTIFY_NEW,
            _ => return Err("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into()),
        };
    }
    Ok(flags)
}

/// `replicaof <host> <port>` or `replicaof no one`.
fn parse_replicaof(args: &[&str]) -> Result<String, Problem> {
    let [host, port] = args else { return Err(WRONG_ARG_COUNT.into()) };
    if host.eq_ignore_ascii_case("no") && port.eq_ignore_ascii_case("one") {
        return Ok(String::new());
    }
    // Redis keeps strtol's result in an int before checking it.
    match c_strtoll_whole(port).map(|p| p as i32) {
        Some(port) if (0..=65535).contains(&port) => Ok(format!("{host} {port}")),
        _ => Err("Invalid master port".into()),
    }
}

/// `latency-tracking-info-percentiles <p>...`, each 0.0..=100.0, shown as
/// `%f` with trailing zeros trimmed; a single empty word means none.
fn parse_percentiles(args: &[&str]) -> Result<String, Problem> {
    if args.len() == 1 && args[0].is_empty() {
        return Ok(String::new());
    }
    let mut shown = Vec::with_capacity(args.len());
    for arg in args {
        let Some(p) = string2d(arg) else {
            return Err("Invalid latency-tracking-info-percentiles parameters".into());
        };
        if !(0.0..=100.0).contains(&p) {
            return Err("latency-tracking-info-percentiles parameters should sit between [0.0,100.0]".into());
        }
        shown.push(trim_double(format!("{p:.6}")));
    }
    Ok(shown.join(" "))
}

/// Redis's trimDoubleString: drop trailing zeros after the point, then the
/// point itself.
fn trim_double(mut text: String) -> String {
    if text.contains('.') {
        let kept = text.trim_end_matches('0').trim_end_matches('.').len();
        text.truncate(kept);
    }
    text
}

/// Redis's string2d: the whole text must be a C `strtod` number (decimal or
/// hexadecimal, `inf`/`infinity`), with no leading space, not NaN, and not
/// overflowing or underflowing to zero.
fn string2d(text: &str) -> Option<f64> {
    let first = *text.as_bytes().first()?;
    if is_c_space(first) {
        return None;
    }
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let lower = body.to_ascii_lowercase();
    if !lower.starts_with(|c: char| c.is_ascii_digit() || c == '.' || c == 'i') {
        return None;
    }
    let magnitude = if lower == "inf" || lower == "infinity" {
        f64::INFINITY
    } else if let Some(hex) = lower.strip_prefix("0x") {
        parse_hex_float(hex)?
    } else {
        // Rust accepts the same decimal forms as strtod ("5.", ".5", "1e3"),
        // but also "nan"/"inf" spellings handled above; reject anything
        // that is not digits, '.', or an exponent here.
        if !lower.bytes().all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'+' | b'-')) {
            return None;
        }
        let v: f64 = lower.parse().ok()?;
        let mantissa = lower.split('e').next().unwrap_or("");
        let nonzero_digits = mantissa.bytes().any(|c| matches!(c, b'1'..=b'9'));
        if v.is_infinite() || (v == 0.0 && nonzero_digits) {
            // strtod reports ERANGE; Redis refuses the value.
            return None;
        }
        v
    };
    Some(if negative { -magnitude } else { magnitude })
}

/// The part of a C hexadecimal float after `0x`: hex digits with an
/// optional point, then an optional binary exponent `p[+-]digits`.
fn parse_hex_float(text: &str) -> Option<f64> {
    let (mantissa, exponent) = match text.split_once('p') {
        Some((m, e)) => (m, Some(e)),
        None => (text, None),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let mut value = 0f64;
    for c in whole.chars() {
        value = value * 16.0 + f64::from(c.to_digit(16)?);
    }
    let mut scale = 1.0 / 16.0;
    for c in fraction.chars() {
        value += f64::from(c.to_digit(16)?) * scale;
        scale /= 16.0;
    }
    if let Some(exponent) = exponent {
        let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
        if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        let e: i32 = exponent.parse().ok()?;
        value *= 2f64.powi(e);
    }
    if value.is_infinite() || (value == 0.0 && mantissa.bytes().any(|c| c.is_ascii_hexdigit() && c != b'0')) {
        return None;
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_replica_rewrites_no_replicaof_line() {
        let lines = |params: &ConfigParams| {
            params
                .rewrite_lines()
                .into_iter()
                .find(|(name, _)| *name == "replicaof")
                .map(|(_, lines)| lines)
                .unwrap()
        };
        let mut params = ConfigParams::new();
        params.set_default("replicaof", "127.0.0.1 7000");
        assert_eq!(lines(&params), vec![("replicaof 127.0.0.1 7000".to_string(), true)]);
        params.apply_directive("cluster-enabled", &["yes".to_string()]).unwrap();
        assert!(lines(&params).is_empty());
    }

    fn get1(params: &ConfigParams, pattern: &str) -> Vec<(String, String)> {
        params.get(&[pattern.as_bytes()])
    }

    fn set(params: &mut ConfigParams, pairs: &[(&str, &str)]) -> Result<Vec<&'static str>, String> {
        let pairs: Vec<(&[u8], &[u8])> = pairs.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())).collect();
        params.set(&pairs).map_err(|e| e.text().to_string())
    }

    fn set_err(params: &mut ConfigParams, pairs: &[(&str, &str)]) -> String {
        set(params, pairs).expect_err("CONFIG SET should fail")
    }

    fn pair(name: &str, value: &str) -> (String, String) {
        (name.to_string(), value.to_string())
    }

    #[test]
    fn defaults_match_redis_7_0() {
        let params = ConfigParams::new();
        for (name, value) in [
            ("maxmemory", "0"),
            ("maxmemory-policy", "noeviction"),
            ("timeout", "0"),
            ("databases", "16"),
            ("port", "6379"),
            ("busy-reply-threshold", "5000"),
            ("appendonly", "no"),
            ("notify-keyspace-events", ""),
            ("requirepass", ""),
            ("hz", "10"),
            ("bind", "* -::*"),
            (
                "client-output-buffer-limit",
                "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
            ),
            ("oom-score-adj-values", "0 200 800"),
            ("latency-tracking-info-percentiles", "50 99 99.9"),
            ("proto-max-bulk-len", "536870912"),
            ("client-query-buffer-limit", "1073741824"),
            ("proc-title-template", "{title} {listen-addr} {server-mode}"),
            ("unixsocketperm", "0"),
            ("shutdown-on-sigterm", "default"),
            ("list-max-listpack-size", "-2"),
            ("tls-auth-clients", "yes"),
        ] {
            assert_eq!(params.value(name), Some(value), "{name}");
        }
    }

    #[test]
    fn keylock_overrides_save_and_adds_its_own_parameters() {
        let params = ConfigParams::new();
        assert_eq!(params.value("save"), Some(""));
        assert_eq!(params.value("native-scripts"), Some("yes"));
        assert_eq!(params.value("lua-memory-limit"), Some("0"));
    }

    #[test]
    fn every_default_reads_back_unchanged_through_its_parser() {
        let params = ConfigParams::new();
        for (index, p) in PARAMS.iter().enumerate() {
            if matches!(p.kind, Kind::Dir | Kind::ReplicaOf) {
                continue;
            }
            let args = if p.flags & MULTI_ARG != 0 {
                split_words(p.default)
            } else {
                vec![p.default]
            };
            assert_eq!(parse(index, &args, &params.values).as_deref(), Ok(p.default), "{}", p.name);
        }
    }

    #[test]
    fn table_has_no_duplicate_names() {
        let params = ConfigParams::new();
        assert_eq!(params.by_name.len(), params.entries.len());
        for e in &params.entries {
            assert_eq!(e.name, e.name.to_ascii_lowercase());
        }
    }

    #[test]
    fn alias_reads_the_same_value_as_its_parameter() {
        let mut params = ConfigParams::new();
        set(&mut params, &[("busy-reply-threshold", "100")]).unwrap();
        assert_eq!(params.value("lua-time-limit"), Some("100"));
        assert_eq!(get1(&params, "lua-time-limit"), vec![pair("lua-time-limit", "100")]);
        set(&mut params, &[("slave-read-only", "no")]).unwrap();
        assert_eq!(params.value("replica-read-only"), Some("no"));
        set(&mut params, &[("hash-max-ziplist-entries", "7")]).unwrap();
        assert_eq!(params.int("hash-max-listpack-entries"), Some(7));
    }

    #[test]
    fn setting_an_alias_reports_the_canonical_name_as_changed() {
        let mut params = ConfigParams::new();
        assert_eq!(set(&mut params, &[("lua-time-limit", "200")]), Ok(vec!["busy-reply-threshold"]));
        assert_eq!(set(&mut params, &[("lua-time-limit", "200")]), Ok(vec![]));
    }

    #[test]
    fn memory_units_are_resolved() {
        let mut params = ConfigParams::new();
        for (input, bytes) in [
            ("1gb", "1073741824"),
            ("100mb", "104857600"),
            ("1k", "1000"),
            ("1kb", "1024"),
            ("2M", "2000000"),
            ("3G", "3000000000"),
            ("5B", "5"),
            ("", "0"),
            ("kb", "0"),
            ("18446744073709551616", "18446744073709551615"),
            ("17179869184gb", "0"),
        ] {
            set(&mut params, &[("maxmemory", input)]).unwrap();
            assert_eq!(params.value("maxmemory"), Some(bytes), "{input}");
        }
        set(&mut params, &[("maxmemory", "100mb")]).unwrap();
        assert_eq!(params.int("maxmemory"), Some(104_857_600));
        set(&mut params, &[("maxmemory", "18446744073709551615")]).unwrap();
        assert_eq!(params.int("maxmemory"), Some(i64::MAX));
    }

    #[test]
    fn memory_parameter_refuses_non_memory_values() {
        let mut params = ConfigParams::new();
        for bad in ["abc", "1.5mb", "-1", "+1", " 1", "1 kb", "1tb"] {
            assert_eq!(
                set_err(&mut params, &[("maxmemory", bad)]),
                "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value",
                "{bad}"
            );
        }
    }

    #[test]
    fn integer_parameter_refuses_non_integers_and_out_of_range() {
        let mut params = ConfigParams::new();
        for bad in ["1.5", " 5", "+5", "05", "x", ""] {
            assert_eq!(
                set_err(&mut params, &[("timeout", bad)]),
                "ERR CONFIG SET failed (possibly related to argument 'timeout') - argument couldn't be parsed into an integer",
                "{bad}"
            );
        }
        assert_eq!(
            set_err(&mut params, &[("timeout", "-1")]),
            "ERR CONFIG SET failed (possibly related to argument 'timeout') - argument must be between 0 and 2147483647 inclusive"
        );
        assert_eq!(
            set_err(&mut params, &[("maxclients", "-1")]),
            "ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument must be between 1 and 4294967295 inclusive"
        );
        assert_eq!(
            set_err(&mut params, &[("slowlog-max-len", "-1")]),
            "ERR CONFIG SET failed (possibly related to argument 'slowlog-max-len') - argument must be between 0 and 9223372036854775807 inclusive"
        );
        assert_eq!(
            set_err(&mut params, &[("auto-aof-rewrite-min-size", "9223372036854775808")]),
            "ERR CONFIG SET failed (possibly related to argument 'auto-aof-rewrite-min-size') - argument must be between 0 and 9223372036854775807 inclusive"
        );
    }

    #[test]
    fn hz_is_capped_rather_than_refused() {
        let mut params = ConfigParams::new();
        set(&mut params, &[("hz", "1000")]).unwrap();
        assert_eq!(params.value("hz"), Some("500"));
        set(&mut params, &[("hz", "0")]).unwrap();
        assert_eq!(params.value("hz"), Some("1"));
    }

    #[test]
    fn repl_backlog_size_is_raised_to_16k_by_config_set_only() {
        let mut params = ConfigParams::new();
        set(&mut params, &[("repl-backlog-size", "1kb")]).unwrap();
        assert_eq!(params.value("repl-backlog-size"), Some("16384"));
        params.apply_directive("repl-backlog-size", &["1kb".to_string()]).unwrap();
        assert_eq!(params.value("repl-backlog-size"), Some("1024"));
    }

    #[test]
    fn turning_tls_on_fails() {
        let mut params = ConfigParams::new();
        assert_eq!(
            set_err(&mut params, &[("timeout", "5"), ("tls-cluster", "yes")]),
            "ERR CONFIG SET failed (possibly related to argument 'tls-cluster') - Unable to update TLS configuration. Check server logs."
        );
        assert_eq!(params.value("timeout"), Some("0"));
        assert_eq!(
            set(&mut params, &[("tls-cluster", "no"), ("tls-ciphers", "x")]),
            Ok(vec!["tls-ciphers"])
        );
    }

    #[test]
    fn maxmemory_clients_takes_a_percentage() {
        let mut params = ConfigParams::new();
        set(&mut params, &[("maxmemory-clients", "10%")]).unwrap();
        assert_eq!(params.value("maxmemory-clients"), Some("10%"));
        assert_eq!(params.int("maxmemory-clients"), Some(-10));
        assert_eq!(
            set_err(&mut params, &[("maxmemory-clients", "101%")]),
            "ERR CONFIG SET failed (possibly related to argument 'maxmemory-clients') - percentage argument must be less or equal to 100"
        );
        assert_eq!(
            set_err(&mut params, &[("maxmemory-clients", "-5")]),
            "ERR CONFIG SET failed (possibly related to argument 'maxmemory-clients') - argument must be a memory or percent value"
        );
        set(&mut params, &[("maxmemory-clients", "0%")]).unwrap();
        assert_eq!(params.value("maxmemory-clients"), Some("0"));
    }

    #[test]
    fn booleans_accept_yes_and_no_in_any_case() {
        let mut params = ConfigParams::new();
        set(&mut params, &[("appendonly", "YES")]).unwrap();
        assert_eq!(params.value("appendonly"), Some("yes"));
        assert_eq!(params.int("appendonly"), Some(1));
        assert_eq!(
            set_err(&mut params, &[("appendonly", "maybe")]),
            "ERR CONFIG SET failed (possibly related to argument 'appendonly') - argument must be 'yes' or 'no'"
        );
        assert_eq!(
            set_err(&mut params, &[("native-scripts", "1")]),
            "ERR CONFIG SET failed (possibly related to argument 'native-scripts') - argument must be 'yes' or 'no'"
        );
    }

    #[test]
    fn enums_are_stored_in_canonical_spelling() {
        let mut params = ConfigParams::new();
        set(&mut params, &[("loglevel", "NOTICE")]).unwrap();
        assert_eq!(params.value("loglevel"), Some("notice"));
        set(&mut params, &[("oom-score-adj", "relative")]).unwrap();
        assert_eq!(params.value("oom-score-adj"), Some("yes"));
        assert_eq!(
            set_err(&mut params, &[("maxmemory-policy", "foo")]),
            "ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction"
        );
        assert_eq!(
            set_err(&mut params, &[("loglevel", "notice verbose")]),
            "ERR CONFIG SET failed (possibly related to argument 'loglevel') - argument(s) must be one of the following: debug, verbose, notice, warning"
        );
    }

    #[test]
    fn shutdown_signal_flags_combine() {
        let mut params = ConfigParams::new();
        set(&mut params, &[("shutdown-on-sigint", "NOW force nosave")]).unwrap();
        assert_eq!(params.value("shutdown-on-sigint"), Some("nosave now force"));
        set(&mut params, &[("shutdown-on-sigint", "default now")]).unwrap();
        assert_eq!(params.value("shutdown-on-sigint"), Some("now"));
        assert_eq!(
            set_err(&mut params, &[("shutdown-on-sigint", "save nosave")]),
            "ERR CONFIG SET failed (possibly related to argument 'shutdown-on-sigint') - shutdown options SAVE and NOSAVE can't be used simultaneously"
        );
        assert_eq!(
            set_err(&mut params, &[("shutdown-on-sigint", "")]),
            "ERR CONFIG SET failed (possibly related to argument 'shutdown-on-sigint') - argument(s) must be one of the following: default, save, nosave, now, force"
        );
    }

    #[test]
    fn unknown_parameter_is_refused() {
        let mut params = ConfigParams::new();
        assert_eq!(
            set_err(&mut params, &[("foo", "bar")]),
            "ERR Unknown option or number of arguments for CONFIG SET - 'foo'"
        );
        // Name problems are found before any value is parsed.
        assert_eq!(
            set_err(&mut params, &[("timeout", "x"), ("foo", "2")]),
            "ERR Unknown option or number of arguments for CONFIG SET - 'foo'"
        );
    }

    #[test]
    fn immutable_and_protected_parameters_are_refused() {
        let mut params = ConfigParams::new();
        assert_eq!(
            set_err(&mut params, &[("daemonize", "yes")]),
            "ERR CONFIG SET failed (possibly related to argument 'daemonize') - can't set immutable config"
        );
        assert_eq!(
            set_err(&mut params, &[("SlaveOf", "no one")]),
            "ERR CONFIG SET failed (possibly related to argument 'SlaveOf') - can't set immutable config"
        );
        assert_eq!(
            set_err(&mut params, &[("dir", "/tmp")]),
            "ERR CONFIG SET failed (possibly related to argument 'dir') - can't set protected config"
        );
        // The first problem wins, even before a later unknown name.
        assert_eq!(
            set_err(&mut params, &[("timeout", "1"), ("daemonize", "no"), ("foo", "1")]),
            "ERR CONFIG SET failed (possibly related to argument 'daemonize') - can't set immutable config"
        );
    }

    #[test]
    fn protected_parameters_follow_enable_protected_configs() {
        let mut params = ConfigParams::new();
        params.apply_directive("enable-protected-configs", &["local".to_string()]).unwrap();
        let pairs: [(&[u8], &[u8]); 1] = [(b"dbfilename", b"x.rdb")];
        assert!(params.set_from(&pairs, false, false).is_err());
        assert_eq!(params.set_from(&pairs, true, false), Ok(vec!["dbfilename"]));
    }

    #[test]
    fn duplicate_parameter_is_refused_but_alias_and_name_are_distinct() {
        let mut params = ConfigParams::new();
        assert_eq!(
            set_err(&mut params, &[("timeout", "1"), ("timeout", "2")]),
            "ERR CONFIG SET failed (possibly related to argument 'timeout') - duplicate parameter"
        );
        assert_eq!(
            set_err(&mut params, &[("maxmemory", "1"), ("MAXMEMORY", "2")]),
            "ERR CONFIG SET failed (possibly related to argument 'MAXMEMORY') - duplicate parameter"
        );
        set(&mut params, &[("lua-time-limit", "100"), ("busy-reply-threshold", "200")]).unwrap();
        assert_eq!(params.value("busy-reply-threshold"), Some("200"));
    }

    #[test]
    fn value_error_names_the_record_that_was_set() {
        let mut params = ConfigParams::new();
        assert_eq!(
            set_err(&mut params, &[("MAXMEMORY", "x")]),
            "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value"
        );
        assert_eq!(
            set_err(&mut params, &[("Lua-Time-Limit", "x")]),
            "ERR CONFIG SET failed (possibly related to argument 'lua-time-limit') - argument couldn't be parsed into an integer"
        );
    }

    #[test]
    fn multi_set_is_all_or_nothing() {
        let mut params = ConfigParams::new();
        let err = set_err(
            &mut params,
            &[("timeout", "5"), ("maxmemory", "1mb"), ("maxmemory-policy", "bogus")],
        );
        assert!(err.contains("'maxmemory-policy'"), "{err}");
        assert_eq!(params.value("timeout"), Some("0"));
        assert_eq!(params.value("maxmemory"), Some("0"));
        assert_eq!(
            set(&mut params, &[("timeout", "5"), ("maxmemory", "1mb")]),
            Ok(vec!["timeout", "maxmemory"])
        );
        assert_eq!(params.value("maxmemory"), Some("1048576"));
    }

    #[test]
    fn get_exact_name_keeps_the_callers_spelling_and_finds_hidden() {
        let params = ConfigParams::new();
        assert_eq!(get1(&params, "MAXMEMORY"), vec![pair("MAXMEMORY", "0")]);
        assert_eq!(get1(&params, "Lua-Time-Limit"), vec![pair("Lua-Time-Limit", "5000")]);
        assert_eq!(get1(&params, "key-load-delay"), vec![pair("key-load-delay", "0")]);
        assert_eq!(get1(&params, "nosuch"), vec![]);
        assert_eq!(params.get(&[b"MAXMEMORY", b"maxmemory"]), vec![pair("MAXMEMORY", "0")]);
    }

    #[test]
    fn get_pattern_matches_aliases_but_not_hidden_parameters() {
        let params = ConfigParams::new();
        let names: Vec<String> = get1(&params, "*LIMIT*").into_iter().map(|(n, _)| n).collect();
        assert_eq!(
            names,
            [
                "client-output-buffer-limit",
                "client-query-buffer-limit",
                "cluster-link-sendbuf-limit",
                "lua-memory-limit",
                "lua-time-limit"
            ]
        );
        assert_eq!(get1(&params, "key-load-dela?"), vec![]);
        assert_eq!(
            get1(&params, "maxmemory*").into_iter().map(|(n, _)| n).collect::<Vec<_>>(),
            [
                "maxmemory",
                "maxmemory-clients",
                "maxmemory-eviction-tenacity",
                "maxmemory-policy",
                "maxmemory-samples"
            ]
        );
        let everything = get1(&params, "*");
        // Redis 7.0.15 lists 192 names; keylock adds two of its own
        // (native-scripts, lua-memory-limit); enable-test-commands and
        // clock are hidden.
        assert_eq!(everything.len(), 194);
        assert!(!everything.iter().any(|(n, _)| n == "clock" || n == "enable-test-commands"));
        assert!(everything.iter().any(|(n, _)| n == "slave-priority"));
        assert!(everything.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn get_does_not_repeat_a_name_matched_twice() {
        let params = ConfigParams::new();
        let both = params.get(&[b"maxmem*", b"maxmemory", b"*policy"]);
        assert_eq!(both.iter().filter(|(n, _)| n == "maxmemory").count(), 1);
        assert_eq!(both.iter().filter(|(n, _)| n == "maxmemory-policy").count(), 1);
    }

    #[test]
    fn keyspace_events_are_normalized() {
        let mut params = ConfigParams::new();
        for (input, shown) in [
            ("KEA", "AKE"),
            ("nd", "dn"),
            ("$lshzxetdgn", "A"),
            ("mK", "Km"),
            ("Ag$lshzxeKEtmdn", "AKEm"),
            ("", ""),
        ] {
            set(&mut params, &[("notify-keyspace-events", input)]).unwrap();
            assert_eq!(params.value("notify-keyspace-events"), Some(shown), "{input}");
        }
        assert_eq!(
            set_err(&mut params, &[("notify-keyspace-events", "q")]),
            "ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - Invalid event class character. Use 'Ag$lshzxeKEtmdn'."
        );
    }

    #[test]
    fn save_schedule_parsing() {
        let mut params = ConfigParams::new();
        set(&mut params, &[("save", "3600 1 300 100")]).unwrap();
        assert_eq!(params.value("save"), Some("3600 1 300 100"));
        set(&mut params, &[("save", "3600 ")]).unwrap();
        assert_eq!(params.value("save"), Some("3600 0"));
        set(&mut params, &[("save", "5 4294967297")]).unwrap();
        assert_eq!(params.value("save"), Some("5 1"));
        for bad in ["0 1", "1", " 5 +3", "5 -1", "5x 1", "  "] {
            assert_eq!(
                set_err(&mut params, &[("save", bad)]),
                "ERR CONFIG SET failed (possibly related to argument 'save') - Invalid save parameters",
                "{bad}"
            );
        }
        set(&mut params, &[("save", "")]).unwrap();
        assert_eq!(params.value("save"), Some(""));
    }

    #[test]
    fn save_directives_replace_the_default_then_accumulate() {
        let mut params = ConfigParams::new();
        params.set_default("save", "3600 1");
        params.apply_directive("save", &["60".to_string(), "1".to_string()]).unwrap();
        params.apply_directive("save", &["300".to_string(), "10".to_string()]).unwrap();
        assert_eq!(params.value("save"), Some("60 1 300 10"));
        params.apply_directive("save", &[String::new()]).unwrap();
        params.apply_directive("save", &["900".to_string(), "1".to_string()]).unwrap();
        assert_eq!(params.value("save"), Some("900 1"));
        assert_eq!(
            params.apply_directive("save", &["3600 1 5".to_string()]),
            Err("Invalid save parameters".to_string())
        );
    }

    #[test]
    fn client_output_buffer_limit_updates_named_classes() {
        let mut params = ConfigParams::new();
        set(&mut params, &[("client-output-buffer-limit", "replica 1 2 3 pubsub 1k 2kb 4")]).unwrap();
        assert_eq!(
            params.value("client-output-buffer-limit"),
            Some("normal 0 0 0 slave 1 2 3 pubsub 1000 2048 4")
        );
        for (bad, why) in [
            ("master 1 2 3", "Invalid client class specified in buffer limit configuration."),
            ("normal 1 2", "Wrong number of arguments in buffer limit configuration."),
            (
                "normal x 2 3",
                "Error in hard, soft or soft_seconds setting in buffer limit configuration.",
            ),
            (
                "normal 1 2 -3",
                "Error in hard, soft or soft_seconds setting in buffer limit configuration.",
            ),
        ] {
            assert_eq!(
                set_err(&mut params, &[("client-output-buffer-limit", bad)]),
                format!("ERR CONFIG SET failed (possibly related to argument 'client-output-buffer-limit') - {why}")
            );
        }
    }

    #[test]
    fn oom_score_adj_values_need_three_numbers_in_range() {
        let mut params = ConfigParams::new();
        assert_eq!(
            set_err(&mut params, &[("oom-score-adj-values", "1 2")]),
            "ERR CONFIG SET failed (possibly related to argument 'oom-score-adj-values') - wrong number of arguments"
        );
        assert_eq!(
            set_err(&mut params, &[("oom-score-adj-values", "5000 1 1")]),
            "ERR CONFIG SET failed (possibly related to argument 'oom-score-adj-values') - Invalid oom-score-adj-values, elements must be between -2000 and 2000."
        );
        set(&mut params, &[("oom-score-adj-values", "1 2 3")]).unwrap();
        assert_eq!(params.value("oom-score-adj-values"), Some("1 2 3"));
    }

    #[test]
    fn latency_percentiles_are_shown_like_redis() {
        let mut params = ConfigParams::new();
        set(
            &mut params,
            &[("latency-tracking-info-percentiles", "50 99 99.9 0.0000001 1e1 .5 5. 100 0x10")],
        )
        .unwrap();
        assert_eq!(
            params.value("latency-tracking-info-percentiles"),
            Some("50 99 99.9 0 10 0.5 5 100 16")
        );
        assert_eq!(
            set_err(&mut params, &[("latency-tracking-info-percentiles", "101")]),
            "ERR CONFIG SET failed (possibly related to argument 'latency-tracking-info-percentiles') - latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"
        );
        assert_eq!(
            set_err(&mut params, &[("latency-tracking-info-percentiles", "nan")]),
            "ERR CONFIG SET failed (possibly related to argument 'latency-tracking-info-percentiles') - Invalid latency-tracking-info-percentiles parameters"
        );
    }

    #[test]
    fn string_validators() {
        let mut params = ConfigParams::new();
        assert_eq!(
            set_err(&mut params, &[("cluster-announce-hostname", "a_b")]),
            "ERR CONFIG SET failed (possibly related to argument 'cluster-announce-hostname') - Hostnames may only contain alphanumeric characters, hyphens or dots"
        );
        for bad in ["{title}", "{server-mode}", " {title} ", "{unixsocket}", "x{", "{}", "{Title}", ""] {
            assert_eq!(
                set_err(&mut params, &[("proc-title-template", bad)]),
                "ERR CONFIG SET failed (possibly related to argument 'proc-title-template') - template format is invalid or contains unknown variables",
                "{bad:?}"
            );
        }
        for good in ["{port}", "{{", "a}", "{title}x"] {
            set(&mut params, &[("proc-title-template", good)]).unwrap();
        }
        assert_eq!(
            params.apply_directive("appendfilename", &[String::new()]),
            Err("appendfilename can't be empty".to_string())
        );
        assert_eq!(
            params.apply_directive("dbfilename", &["a/b".to_string()]),
            Err("dbfilename can't be a path, just a filename".to_string())
        );
    }

    #[test]
    fn a_lone_multi_word_directive_argument_is_split() {
        let mut params = ConfigParams::new();
        params.apply_directive("save", &["3600 1 \"300\" '10'".to_string()]).unwrap();
        assert_eq!(params.value("save"), Some("3600 1 300 10"));
        params.apply_directive("bind", &["127.0.0.1 ::1".to_string()]).unwrap();
        assert_eq!(params.value("bind"), Some("127.0.0.1 ::1"));
        assert_eq!(split_config_args("a \"b c\" 'd\\'e' \"\\x41\\n\""), ["a", "b c", "d'e", "A\n"]);
        assert!(split_config_args("\"unbalanced").is_empty());
        assert!(split_config_args("\"a\"b").is_empty());
        assert_eq!(split_config_args("\"\\xZZ\""), ["xZZ"]);
    }

    #[test]
    fn directives_set_immutable_parameters() {
        let mut params = ConfigParams::new();
        params.apply_directive("DATABASES", &["32".to_string()]).unwrap();
        assert_eq!(params.int("databases"), Some(32));
        params.apply_directive("unixsocketperm", &["700".to_string()]).unwrap();
        assert_eq!(params.value("unixsocketperm"), Some("700"));
        assert_eq!(params.int("unixsocketperm"), Some(0o700));
        params
            .apply_directive("slaveof", &["127.0.0.1".to_string(), "6380".to_string()])
            .unwrap();
        assert_eq!(params.value("replicaof"), Some("127.0.0.1 6380"));
        params.apply_directive("replicaof", &["no".to_string(), "one".to_string()]).unwrap();
        assert_eq!(params.value("replicaof"), Some(""));
        params
            .apply_directive("bind", &["127.0.0.1".to_string(), "::1".to_string()])
            .unwrap();
        assert_eq!(params.value("bind"), Some("127.0.0.1 ::1"));
        params.apply_directive("dir", &["/".to_string()]).unwrap();
        assert_eq!(params.value("dir"), Some("/"));
    }

    #[test]
    fn directive_errors_are_redis_startup_texts() {
        let mut params = ConfigParams::new();
        let one = |v: &str| vec![v.to_string()];
        assert_eq!(
            params.apply_directive("timeout", &one("x")),
            Err("argument couldn't be parsed into an integer".into())
        );
        assert_eq!(
            params.apply_directive("timeout", &["1".to_string(), "2".to_string()]),
            Err("wrong number of arguments".into())
        );
        assert_eq!(
            params.apply_directive("nosuch", &one("1")),
            Err("Bad directive or wrong number of arguments".into())
        );
        assert_eq!(
            params.apply_directive("unixsocketperm", &one("999")),
            Err("argument couldn't be parsed as an octal number".into())
        );
        assert_eq!(
            params.apply_directive("socket-mark-id", &one("-1")),
            Err("argument must be between 0 and 4294967295 inclusive".into())
        );
        assert_eq!(
            params.apply_directive("replicaof", &["a".to_string(), "99999".to_string()]),
            Err("Invalid master port".into())
        );
        assert_eq!(
            params.apply_directive("replicaof", &one("a")),
            Err("wrong number of arguments".into())
        );
        assert_eq!(
            params.apply_directive("dir", &one("/nonexistent-keylock-dir")),
            Err("No such file or directory".into())
        );
        assert_eq!(params.apply_directive("dir", &one("/etc/passwd")), Err("Not a directory".into()));
        assert_eq!(params.apply_directive("list-max-ziplist-entries", &one("5")), Ok(()));
        assert_eq!(
            params.apply_directive("enable-debug-command", &one("bad")),
            Err("argument(s) must be one of the following: no, yes, local".into())
        );
    }

    #[test]
    fn int_reads_numbers_booleans_and_nothing_else() {
        let mut params = ConfigParams::new();
        assert_eq!(params.int("busy-reply-threshold"), Some(5000));
        assert_eq!(params.int("lua-time-limit"), Some(5000));
        assert_eq!(params.int("native-scripts"), Some(1));
        assert_eq!(params.int("maxmemory-policy"), None);
        assert_eq!(params.int("nosuch"), None);
        set(&mut params, &[("lua-memory-limit", "64mb")]).unwrap();
        assert_eq!(params.int("lua-memory-limit"), Some(64 << 20));
    }

    #[test]
    fn string2ll_matches_redis() {
        assert_eq!(string2ll(b"0"), Some(0));
        assert_eq!(string2ll(b"-0"), None);
        assert_eq!(string2ll(b"007"), None);
        assert_eq!(string2ll(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(string2ll(b"9223372036854775808"), None);
        assert_eq!(string2ll(b"12a"), None);
    }
}
