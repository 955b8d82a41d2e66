//! The command table: every command described once, as data.
//!
//! Dispatch, arity errors, subcommand errors, COMMAND / COMMAND INFO /
//! COMMAND DOCS / COMMAND COUNT, MONITOR filtering, the RESP2 subscribed-mode
//! rules, MULTI queueing rules and INFO commandstats all read this one
//! description. Each family module contributes a `COMMANDS` slice built with
//! the const builder below; adding a command is one row plus one handler.

use std::collections::HashMap;
use std::sync::OnceLock;

use bytes::Bytes;

use super::Ctx;
use crate::error::CmdResult;

pub type Handler = fn(&mut Ctx, &[Bytes]) -> CmdResult;

/// A command's own key finder: the key positions in a full `argv`.
pub type KeyFinder = fn(&[Bytes]) -> Vec<usize>;

/// Command flags, named as in Redis's command table.
pub mod flag {
    pub const WRITE: u32 = 1;
    pub const READONLY: u32 = 1 << 1;
    pub const DENYOOM: u32 = 1 << 2;
    pub const ADMIN: u32 = 1 << 3;
    pub const PUBSUB: u32 = 1 << 4;
    pub const NOSCRIPT: u32 = 1 << 5;
    pub const BLOCKING: u32 = 1 << 6;
    pub const LOADING: u32 = 1 << 7;
    pub const STALE: u32 = 1 << 8;
    pub const SKIP_MONITOR: u32 = 1 << 9;
    pub const SKIP_SLOWLOG: u32 = 1 << 10;
    pub const FAST: u32 = 1 << 11;
    pub const NO_AUTH: u32 = 1 << 12;
    pub const MAY_REPLICATE: u32 = 1 << 13;
    pub const NO_MULTI: u32 = 1 << 14;
    pub const ALLOW_BUSY: u32 = 1 << 15;
    pub const SENTINEL: u32 = 1 << 16;
    /// Allowed in RESP2 subscribed mode.
    pub const SUBSCRIBED_OK: u32 = 1 << 17;
    /// Runs immediately inside MULTI instead of being queued.
    pub const TX_CONTROL: u32 = 1 << 18;
    pub const NO_MANDATORY_KEYS: u32 = 1 << 19;
    /// Shown in MONITOR before it runs (EVAL and friends: the script's
    /// own `[0 lua]` lines follow it).
    pub const MONITOR_BEFORE: u32 = 1 << 20;
    /// Refused unless `enable-test-commands` lets this client run it
    /// (Redis's CMD_PROTECTED, for keylock's test controls).
    pub const PROTECTED: u32 = 1 << 21;
    /// Keys are found by parsing the arguments (a keyword, an option),
    /// not at fixed positions (Redis's CMD_MOVABLE_KEYS).
    pub const MOVABLE_KEYS: u32 = 1 << 22;

    pub const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (SKIP_MONITOR, "skip_monitor"),
        (SKIP_SLOWLOG, "skip_slowlog"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        // MAY_REPLICATE is left out, as Redis hides it from COMMAND INFO.
        (NO_MULTI, "no_multi"),
        (MOVABLE_KEYS, "movablekeys"),
        (ALLOW_BUSY, "allow_busy"),
        (NO_MANDATORY_KEYS, "no_mandatory_keys"),
        (PROTECTED, "protected"),
    ];
}

/// Which documentation group a command belongs to (COMMAND DOCS, ACL categories).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    Connection,
    Server,
    Generic,
    String,
    Hash,
    List,
    Set,
    SortedSet,
    PubSub,
    Transactions,
    Scripting,
    Bitmap,
    Hyperloglog,
    Geo,
    Stream,
}

impl Group {
    pub fn doc_name(self) -> &'static str {
        match self {
            Group::Connection => "connection",
            Group::Server => "server",
            Group::Generic => "generic",
            Group::String => "string",
            Group::Hash => "hash",
            Group::List => "list",
            Group::Set => "set",
            Group::SortedSet => "sorted_set",
            Group::PubSub => "pubsub",
            Group::Transactions => "transactions",
            Group::Scripting => "scripting",
            Group::Bitmap => "bitmap",
            Group::Hyperloglog => "hyperloglog",
            Group::Geo => "geo",
            Group::Stream => "stream",
        }
    }

    fn acl_category(self) -> Option<&'static str> {
        Some(match self {
            Group::Connection => "@connection",
            Group::Generic => "@keyspace",
            Group::String => "@string",
            Group::Hash => "@hash",
            Group::List => "@list",
            Group::Set => "@set",
            Group::SortedSet => "@sortedset",
            Group::PubSub => "@pubsub",
            Group::Transactions => "@transaction",
            Group::Scripting => "@scripting",
            Group::Bitmap => "@bitmap",
            Group::Hyperloglog => "@hyperloglog",
            Group::Geo => "@geo",
            Group::Stream => "@stream",
            Group::Server => return None,
        })
    }
}

/// Key-spec flags, named and ordered as COMMAND INFO lists them.
pub mod key_flag {
    pub const RO: u16 = 1;
    pub const RW: u16 = 1 << 1;
    pub const OW: u16 = 1 << 2;
    pub const RM: u16 = 1 << 3;
    pub const ACCESS: u16 = 1 << 4;
    pub const UPDATE: u16 = 1 << 5;
    pub const INSERT: u16 = 1 << 6;
    pub const DELETE: u16 = 1 << 7;
    pub const NOT_KEY: u16 = 1 << 8;
    pub const INCOMPLETE: u16 = 1 << 9;
    pub const VARIABLE_FLAGS: u16 = 1 << 10;

    pub const NAMES: &[(u16, &str)] = &[
        (RO, "RO"),
        (RW, "RW"),
        (OW, "OW"),
        (RM, "RM"),
        (ACCESS, "access"),
        (UPDATE, "update"),
        (INSERT, "insert"),
        (DELETE, "delete"),
        (NOT_KEY, "not_key"),
        (INCOMPLETE, "incomplete"),
        (VARIABLE_FLAGS, "variable_flags"),
    ];
}

/// Where a key spec's search for its keys begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BeginSearch {
    /// At argument `index` (the spec's `index` field).
    Index,
    /// After the first `keyword` at or after argument `startfrom` (the
    /// spec's `index` field), as GEORADIUS's `STORE`.
    Keyword(&'static str),
    /// Nowhere Redis can describe: the command's own key finder decides
    /// (SORT's `BY`/`GET`/`STORE`); its find_keys is unknown too.
    Unknown,
}

/// One of Redis's key specs, for a row that spells its keys out instead
/// of deriving one spec from the legacy triple: the keys start at
/// argument `index` (or after a keyword, see [`BeginSearch`]) and run as
/// a range (`last_key` relative to it, or negative from the end; every
/// `key_step`-th; `limit` as Redis's).
#[derive(Debug)]
pub struct KeySpec {
    pub notes: &'static str,
    pub flags: u16,
    pub begin: BeginSearch,
    pub index: i32,
    pub last_key: i32,
    pub key_step: i32,
    pub limit: i32,
}

/// A key spec: `key_spec(RW | ACCESS | UPDATE, 1, 0, 1)`.
pub const fn key_spec(flags: u16, index: i32, last_key: i32, key_step: i32) -> KeySpec {
    KeySpec {
        notes: "",
        flags,
        begin: BeginSearch::Index,
        index,
        last_key,
        key_step,
        limit: 0,
    }
}

/// A key spec whose keys follow `keyword`, searched from argument
/// `startfrom`: `keyword_spec(OW | UPDATE, "STORE", 6, 0, 1)`.
pub const fn keyword_spec(flags: u16, keyword: &'static str, startfrom: i32, last_key: i32, key_step: i32) -> KeySpec {
    KeySpec {
        notes: "",
        flags,
        begin: BeginSearch::Keyword(keyword),
        index: startfrom,
        last_key,
        key_step,
        limit: 0,
    }
}

/// A key spec Redis marks unknown (begin_search and find_keys).
pub const fn unknown_spec(flags: u16) -> KeySpec {
    KeySpec {
        notes: "",
        flags,
        begin: BeginSearch::Unknown,
        index: 0,
        last_key: 0,
        key_step: 0,
        limit: 0,
    }
}

/// A keyword key spec with a `limit` (Redis's range `limit`: the keys are
/// the first 1/limit of what follows the keyword, as XREAD's STREAMS):
/// `keyword_key_spec(RO | ACCESS, "STREAMS", 1, -1, 1, 2)`.
pub const fn keyword_key_spec(flags: u16, keyword: &'static str, startfrom: i32, last_key: i32, key_step: i32, limit: i32) -> KeySpec {
    KeySpec {
        limit,
        ..keyword_spec(flags, keyword, startfrom, last_key, key_step)
    }
}

impl KeySpec {
    pub const fn notes(mut self, notes: &'static str) -> Self {
        self.notes = notes;
        self
    }
}

/// What kind of argument COMMAND DOCS says an argument is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    String,
    Integer,
    Double,
    Key,
    Pattern,
    UnixTime,
    PureToken,
    OneOf,
    Block,
}

impl ArgKind {
    pub fn doc_name(self) -> &'static str {
        match self {
            ArgKind::String => "string",
            ArgKind::Integer => "integer",
            ArgKind::Double => "double",
            ArgKind::Key => "key",
            ArgKind::Pattern => "pattern",
            ArgKind::UnixTime => "unix-time",
            ArgKind::PureToken => "pure-token",
            ArgKind::OneOf => "oneof",
            ArgKind::Block => "block",
        }
    }
}

/// Argument flags, named and ordered as COMMAND DOCS lists them.
pub mod arg_flag {
    pub const OPTIONAL: u8 = 1;
    pub const MULTIPLE: u8 = 1 << 1;
    pub const MULTIPLE_TOKEN: u8 = 1 << 2;

    pub const NAMES: &[(u8, &str)] = &[(OPTIONAL, "optional"), (MULTIPLE, "multiple"), (MULTIPLE_TOKEN, "multiple_token")];
}

/// One argument as COMMAND DOCS describes it (Redis's `redisCommandArg`);
/// a block or a oneof holds its own arguments.
#[derive(Debug)]
pub struct Arg {
    pub name: &'static str,
    pub kind: ArgKind,
    /// The key spec a key argument belongs to; -1 for other arguments.
    pub key_spec_index: i32,
    pub token: &'static str,
    pub since: &'static str,
    pub flags: u8,
    pub args: &'static [Arg],
}

/// An argument: `arg("start", ArgKind::Integer)`.
pub const fn arg(name: &'static str, kind: ArgKind) -> Arg {
    Arg {
        name,
        kind,
        key_spec_index: -1,
        token: "",
        since: "",
        flags: 0,
        args: &[],
    }
}

/// A key argument, found by the key spec at `key_spec_index`.
pub const fn key_arg(name: &'static str, key_spec_index: i32) -> Arg {
    let mut a = arg(name, ArgKind::Key);
    a.key_spec_index = key_spec_index;
    a
}

/// A keyword standing alone (`BYTE`).
pub const fn pure_token(name: &'static str, token: &'static str) -> Arg {
    arg(name, ArgKind::PureToken).token(token)
}

/// Arguments that come together.
pub const fn block(name: &'static str, args: &'static [Arg]) -> Arg {
    let mut a = arg(name, ArgKind::Block);
    a.args = args;
    a
}

/// One of several arguments.
pub const fn oneof(name: &'static str, args: &'static [Arg]) -> Arg {
    let mut a = arg(name, ArgKind::OneOf);
    a.args = args;
    a
}

impl Arg {
    pub const fn token(mut self, token: &'static str) -> Self {
        self.token = token;
        self
    }

    /// The key spec this argument's keys belong to (a `BY` pattern's).
    pub const fn key_spec(mut self, key_spec_index: i32) -> Self {
        self.key_spec_index = key_spec_index;
        self
    }

    pub const fn since(mut self, since: &'static str) -> Self {
        self.since = since;
        self
    }

    pub const fn optional(mut self) -> Self {
        self.flags |= arg_flag::OPTIONAL;
        self
    }

    pub const fn multiple(mut self) -> Self {
        self.flags |= arg_flag::MULTIPLE;
        self
    }

    pub const fn multiple_token(mut self) -> Self {
        self.flags |= arg_flag::MULTIPLE_TOKEN;
        self
    }
}

/// ACL categories in the order Redis lists a command's (its
/// `ACLCommandCategories` table).
const ACL_CATEGORY_ORDER: &[&str] = &[
    "@keyspace",
    "@read",
    "@write",
    "@set",
    "@sortedset",
    "@list",
    "@hash",
    "@string",
    "@bitmap",
    "@hyperloglog",
    "@geo",
    "@stream",
    "@pubsub",
    "@admin",
    "@fast",
    "@slow",
    "@blocking",
    "@dangerous",
    "@connection",
    "@transaction",
    "@scripting",
];

#[derive(Debug)]
pub struct CommandSpec {
    /// Lowercase name; for a subcommand, the subcommand alone (`setname`).
    pub name: &'static str,
    /// Redis arity: exact argument count including the name, or -N for at least N.
    pub arity: i32,
    pub flags: u32,
    pub first_key: i32,
    pub last_key: i32,
    pub key_step: i32,
    pub group: Group,
    pub since: &'static str,
    pub summary: &'static str,
    /// COMMAND DOCS' complexity; not listed when empty.
    pub complexity: &'static str,
    /// COMMAND DOCS' `doc_flags`: a command for Redis's own use and tests
    /// (Redis's CMD_DOC_SYSCMD).
    pub syscmd: bool,
    /// COMMAND DOCS' history: (version, change).
    pub history: &'static [(&'static str, &'static str)],
    /// COMMAND DOCS' arguments; not listed when empty.
    pub arguments: &'static [Arg],
    /// COMMAND INFO's key specs; when empty, one spec is derived from the
    /// legacy triple.
    pub key_specs: &'static [KeySpec],
    pub handler: Option<Handler>,
    pub subcommands: &'static [CommandSpec],
    /// ACL categories that replace the group's own (SORT is `@set`,
    /// `@sortedset`, `@list` and `@dangerous`, not `@keyspace`).
    pub acl: &'static [&'static str],
    /// COMMAND DOCS' `deprecated_since` (and the `deprecated` doc flag);
    /// not listed when empty.
    pub deprecated_since: &'static str,
    /// COMMAND DOCS' `replaced_by`; not listed when empty.
    pub replaced_by: &'static str,
    /// The command's own key finder (Redis's `getkeys_proc`), for COMMAND
    /// GETKEYS when its key specs cannot say: positions in `argv`.
    pub getkeys: Option<KeyFinder>,
}

/// Starts a table row: `cmd("get", 2, get).flags(READONLY | FAST).keys(1, 1, 1)`.
pub const fn cmd(name: &'static str, arity: i32, handler: Handler) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags: 0,
        first_key: 0,
        last_key: 0,
        key_step: 0,
        group: Group::Generic,
        since: "1.0.0",
        summary: "",
        complexity: "",
        syscmd: false,
        history: &[],
        arguments: &[],
        key_specs: &[],
        handler: Some(handler),
        subcommands: &[],
        acl: &[],
        deprecated_since: "",
        replaced_by: "",
        getkeys: None,
    }
}

/// A container command (`CLIENT`, `CONFIG` …) dispatching to subcommands.
pub const fn container(name: &'static str, subcommands: &'static [CommandSpec]) -> CommandSpec {
    CommandSpec {
        name,
        arity: -2,
        flags: 0,
        first_key: 0,
        last_key: 0,
        key_step: 0,
        group: Group::Server,
        since: "1.0.0",
        summary: "",
        complexity: "",
        syscmd: false,
        history: &[],
        arguments: &[],
        key_specs: &[],
        handler: None,
        subcommands,
        acl: &[],
        deprecated_since: "",
        replaced_by: "",
        getkeys: None,
    }
}

impl CommandSpec {
    pub const fn flags(mut self, flags: u32) -> Self {
        self.flags = flags;
        self
    }

    /// Key positions as Redis's legacy (first, last, step) triple.
    pub const fn keys(mut self, first: i32, last: i32, step: i32) -> Self {
        self.first_key = first;
        self.last_key = last;
        self.key_step = step;
        self
    }

    pub const fn doc(mut self, group: Group, since: &'static str, summary: &'static str) -> Self {
        self.group = group;
        self.since = since;
        self.summary = summary;
        self
    }

    /// The complexity, history and arguments COMMAND DOCS lists.
    pub const fn details(
        mut self,
        complexity: &'static str,
        history: &'static [(&'static str, &'static str)],
        arguments: &'static [Arg],
    ) -> Self {
        self.complexity = complexity;
        self.history = history;
        self.arguments = arguments;
        self
    }

    /// Marks a command COMMAND DOCS lists with `doc_flags: syscmd`.
    pub const fn syscmd(mut self) -> Self {
        self.syscmd = true;
        self
    }

    /// Key specs as Redis spells them, for COMMAND INFO.
    pub const fn key_specs(mut self, key_specs: &'static [KeySpec]) -> Self {
        self.key_specs = key_specs;
        self
    }

    /// ACL categories in place of the group's.
    pub const fn acl(mut self, categories: &'static [&'static str]) -> Self {
        self.acl = categories;
        self
    }

    /// Marks the command deprecated, as COMMAND DOCS shows it.
    pub const fn deprecated(mut self, since: &'static str, replaced_by: &'static str) -> Self {
        self.deprecated_since = since;
        self.replaced_by = replaced_by;
        self
    }

    /// The command's own key finder, for COMMAND GETKEYS.
    pub const fn getkeys(mut self, finder: KeyFinder) -> Self {
        self.getkeys = Some(finder);
        self
    }

    pub fn has(&self, f: u32) -> bool {
        self.flags & f != 0
    }

    /// True if `argc` (name included) satisfies the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let a = self.arity;
        if a >= 0 { argc == a as usize } else { argc >= (-a) as usize }
    }

    /// The ACL categories COMMAND INFO lists, derived from group and flags.
    pub fn acl_categories(&self) -> Vec<&'static str> {
        let mut cats = Vec::new();
        // A container (OBJECT, XGROUP …) has no category of its own in
        // Redis's table: only `@slow`, as it is not fast.
        if self.handler.is_none() {
            return vec!["@slow"];
        }
        if !self.acl.is_empty() {
            cats.extend_from_slice(self.acl);
        } else if let Some(c) = self.group.acl_category() {
            cats.push(c);
        }
        if self.has(flag::WRITE) {
            cats.push("@write");
        }
        if self.has(flag::READONLY) {
            cats.push("@read");
        }
        if self.has(flag::ADMIN) {
            cats.push("@admin");
            cats.push("@dangerous");
        }
        if self.has(flag::PUBSUB) && self.group != Group::PubSub {
            cats.push("@pubsub");
        }
        if self.has(flag::BLOCKING) {
            cats.push("@blocking");
        }
        cats.push(if self.has(flag::FAST) { "@fast" } else { "@slow" });
        cats.sort_by_key(|c| ACL_CATEGORY_ORDER.iter().position(|o| o == c));
        cats
    }

    /// Positions of the key arguments in `argv` (name at 0), found as
    /// Redis's `getKeysFromCommandWithSpecs` finds them: by the key specs
    /// when they describe every key, else by the command's own finder,
    /// else by the legacy triple.
    pub fn keys_in(&self, argv: &[Bytes]) -> Vec<usize> {
        if !self.key_specs.is_empty()
            && let Some(found) = keys_by_specs(self.key_specs, argv)
        {
            return found;
        }
        match self.getkeys {
            Some(finder) => finder(argv),
            None => self.key_positions(argv.len()),
        }
    }

    /// Positions of the key arguments in `argv` (name at 0).
    pub fn key_positions(&self, argc: usize) -> Vec<usize> {
        if self.first_key <= 0 || argc <= self.first_key as usize {
            return Vec::new();
        }
        let first = self.first_key as usize;
        let last = if self.last_key < 0 {
            (argc as i64 + self.last_key as i64) as usize
        } else {
            (self.last_key as usize).min(argc - 1)
        };
        let step = self.key_step.max(1) as usize;
        (first..=last).step_by(step).collect()
    }
}

/// Redis's `getKeysUsingKeySpecs`: None when a spec cannot be followed
/// (unknown, or its range runs out of the arguments).
fn keys_by_specs(specs: &[KeySpec], argv: &[Bytes]) -> Option<Vec<usize>> {
    let argc = argv.len() as i64;
    let mut keys = Vec::new();
    for spec in specs {
        if spec.flags & key_flag::NOT_KEY != 0 {
            continue;
        }
        let first = match spec.begin {
            BeginSearch::Index => i64::from(spec.index),
            BeginSearch::Keyword(keyword) => {
                let startfrom = i64::from(spec.index);
                let (start, end) = if startfrom > 0 {
                    (startfrom, argc - 1)
                } else {
                    (argc + startfrom, 1)
                };
                let mut i = start;
                let mut found = 0;
                while i != end {
                    if i >= argc || i < 1 {
                        break;
                    }
                    if crate::commands::args::c_keyword(&argv[i as usize], keyword) {
                        found = i + 1;
                        break;
                    }
                    i = if start <= end { i + 1 } else { i - 1 };
                }
                if found == 0 {
                    continue;
                }
                found
            }
            BeginSearch::Unknown => return None,
        };
        let last = if spec.last_key >= 0 {
            first + i64::from(spec.last_key)
        } else if spec.limit == 0 {
            argc + i64::from(spec.last_key)
        } else {
            first + ((argc - first) / i64::from(spec.limit) + i64::from(spec.last_key))
        };
        if last >= argc || last < first || first >= argc {
            return None;
        }
        let step = i64::from(spec.key_step.max(1));
        let mut i = first;
        while i <= last {
            keys.push(i as usize);
            i += step;
        }
        if spec.flags & key_flag::INCOMPLETE != 0 {
            return None;
        }
    }
    Some(keys)
}

/// A command as dispatch sees it: its spec, its full name (`client|setname`)
/// and its index in the statistics table.
#[derive(Debug)]
pub struct Command {
    pub spec: &'static CommandSpec,
    pub full_name: String,
    pub stat_index: usize,
    /// For containers: subcommands by lowercase name.
    pub subcommands: HashMap<&'static [u8], Command, ahash::RandomState>,
}

pub struct Registry {
    /// By lowercase name bytes (looked up without a UTF-8 check).
    pub commands: HashMap<&'static [u8], Command, ahash::RandomState>,
    /// Every command and subcommand in a stable order; index = stat_index.
    pub all: Vec<(&'static CommandSpec, String)>,
}

impl Registry {
    pub fn get() -> &'static Registry {
        static REGISTRY: OnceLock<Registry> = OnceLock::new();
        REGISTRY.get_or_init(|| Registry::build(super::all_families()))
    }

    fn build(families: &[&'static [CommandSpec]]) -> Registry {
        let mut all = Vec::new();
        let mut commands = HashMap::default();
        for family in families {
            for spec in family.iter() {
                let mut cmd = Command {
                    spec,
                    full_name: spec.name.to_string(),
                    stat_index: all.len(),
                    subcommands: HashMap::default(),
                };
                all.push((spec, spec.name.to_string()));
                for sub in spec.subcommands {
                    let full = format!("{}|{}", spec.name, sub.name);
                    cmd.subcommands.insert(
                        sub.name.as_bytes(),
                        Command {
                            spec: sub,
                            full_name: full.clone(),
                            stat_index: all.len(),
                            subcommands: HashMap::default(),
                        },
                    );
                    all.push((sub, full));
                }
                commands.insert(spec.name.as_bytes(), cmd);
            }
        }
        Registry { commands, all }
    }

    /// Finds a command by name, ignoring case.
    pub fn lookup(&self, name: &[u8]) -> Option<&Command> {
        match pack_short_name(name) {
            Some(key) => short_names().get(&key).copied(),
            None => lookup_lowercase(&self.commands, name),
        }
    }
}

/// A name of at most 15 bytes, lowercased, packed with its length into one
/// integer: found with one integer hash and compare, the path nearly every
/// command takes (~40 -> ~10 ns a lookup).
fn pack_short_name(name: &[u8]) -> Option<u128> {
    if name.len() > 15 {
        return None;
    }
    let mut bytes = [0u8; 16];
    bytes[..name.len()].copy_from_slice(name);
    bytes.make_ascii_lowercase();
    bytes[15] = name.len() as u8;
    Some(u128::from_le_bytes(bytes))
}

/// Every command whose name packs, by packed name.
fn short_names() -> &'static HashMap<u128, &'static Command, ahash::RandomState> {
    static SHORT: OnceLock<HashMap<u128, &'static Command, ahash::RandomState>> = OnceLock::new();
    SHORT.get_or_init(|| {
        Registry::get()
            .commands
            .iter()
            .filter_map(|(name, cmd)| Some((pack_short_name(name)?, cmd)))
            .collect()
    })
}

/// `map[lowercase(name)]`, lowercased on the stack; names longer than any
/// command are not found.
fn lookup_lowercase<'m>(map: &'m HashMap<&'static [u8], Command, ahash::RandomState>, name: &[u8]) -> Option<&'m Command> {
    let mut buf = [0u8; 32];
    let lower = buf.get_mut(..name.len())?;
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    map.get(&*lower)
}

impl Command {
    pub fn subcommand(&self, name: &[u8]) -> Option<&Command> {
        lookup_lowercase(&self.subcommands, name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_is_found_by_its_name_in_any_case() {
        let registry = Registry::get();
        for name in registry.commands.keys() {
            let found = registry.lookup(name).expect("found");
            assert_eq!(found.spec.name.as_bytes(), *name);
            let upper = name.to_ascii_uppercase();
            assert!(std::ptr::eq(registry.lookup(&upper).expect("found"), found));
        }
    }

    #[test]
    fn a_name_with_a_trailing_nul_is_not_its_prefix() {
        let registry = Registry::get();
        assert!(registry.lookup(b"get").is_some());
        assert!(registry.lookup(b"get\0").is_none());
        assert!(registry.lookup(b"").is_none());
        assert!(registry.lookup(b"zremrangebyscorex").is_none());
    }
}
