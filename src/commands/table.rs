//! The command table: every command described once, as data.
//!
//! Dispatch, arity errors, subcommand errors, COMMAND / COMMAND INFO /
//! COMMAND DOCS / COMMAND COUNT, MONITOR filtering, the RESP2 subscribed-mode
//! rules, MULTI queueing rules and INFO commandstats all read this one
//! description. Each family module contributes a `COMMANDS` slice built with
//! the const builder below; adding a command is one row plus one handler.
//!
//! A row holds what is keylock's: name, arity, handler and the flags the
//! engine acts on. What Redis says about a command it defines (docs, key
//! specs, ACL categories, tips) is Redis's own definition, generated into
//! `redis_defs.rs` (see `defs.rs`); the tests below hold each row's arity
//! and flags equal to it and keep rows from repeating it. The `.doc()`,
//! `.details()`, `.key_specs()` and `.keys()` builders describe commands
//! Redis does not define (keylock's own).

use std::collections::HashMap;
use std::sync::OnceLock;

use bytes::Bytes;

use super::Ctx;
use super::defs::{self, CommandDef};
use crate::error::CmdResult;

pub type Handler = fn(&mut Ctx, &[Bytes]) -> CmdResult;

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
    /// Refused unless the option protecting it lets this client run it
    /// (Redis's CMD_PROTECTED): `enable-debug-command` for DEBUG,
    /// `enable-test-commands` for keylock's test controls (see
    /// `engine::exec::for_client`).
    pub const PROTECTED: u32 = 1 << 21;
    // Redis flags keylock's engine does not act on; Redis's definitions
    // carry them, for COMMAND INFO.
    pub const ASKING: u32 = 1 << 22;
    pub const NO_ASYNC_LOADING: u32 = 1 << 23;
    /// Derived by Redis from the key specs (`populateCommandLegacyRangeSpec`).
    pub const MOVABLE_KEYS: u32 = 1 << 24;
    pub const ONLY_SENTINEL: u32 = 1 << 25;
    pub const TOUCHES_ARBITRARY_KEYS: u32 = 1 << 26;

    /// The flags Redis's COMMAND INFO lists, in its order
    /// (`addReplyFlagsForCommand`): may_replicate, sentinel,
    /// only_sentinel, protected and touches_arbitrary_keys are hidden
    /// there on purpose, and so here.
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
        (ASKING, "asking"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (NO_MANDATORY_KEYS, "no_mandatory_keys"),
        (NO_ASYNC_LOADING, "no_async_loading"),
        (NO_MULTI, "no_multi"),
        (MOVABLE_KEYS, "movablekeys"),
        (ALLOW_BUSY, "allow_busy"),
    ];

    /// Listed after [`NAMES`] for keylock's own commands only: its test
    /// controls say they are protected (Redis hides the flag on its own).
    pub const OWN_NAMES: &[(u32, &str)] = &[(PROTECTED, "protected")];

    /// The Redis flags a table row carries, as the engine acts on them
    /// (and COMMAND INFO lists them for keylock's own commands): a row of
    /// a command Redis defines has exactly Redis's flags among these.
    pub const ROW_REDIS_FLAGS: u32 = WRITE
        | READONLY
        | DENYOOM
        | ADMIN
        | PUBSUB
        | NOSCRIPT
        | BLOCKING
        | LOADING
        | STALE
        | SKIP_MONITOR
        | SKIP_SLOWLOG
        | FAST
        | NO_AUTH
        | MAY_REPLICATE
        | NO_MULTI
        | ALLOW_BUSY
        | NO_MANDATORY_KEYS
        | PROTECTED;
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
            Group::SortedSet => "sorted-set",
            Group::PubSub => "pubsub",
            Group::Transactions => "transactions",
            Group::Scripting => "scripting",
            Group::Bitmap => "bitmap",
            Group::Hyperloglog => "hyperloglog",
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

/// Where a key spec starts looking for keys (Redis's `begin_search`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BeginSearch {
    Unknown,
    /// At this argument.
    Index(i32),
    /// After this keyword, searched for from `startfrom` (from the end
    /// when negative).
    Keyword {
        keyword: &'static str,
        startfrom: i32,
    },
}

/// How a key spec finds its keys from where it begins (Redis's `find_keys`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FindKeys {
    Unknown,
    /// Up to `lastkey` (relative to the start, or negative from the end),
    /// every `keystep`-th; `limit` as Redis's.
    Range {
        lastkey: i32,
        keystep: i32,
        limit: i32,
    },
    /// The argument `keynumidx` after the start holds the key count; the
    /// keys begin `firstkey` after the start, every `keystep`-th.
    Keynum {
        keynumidx: i32,
        firstkey: i32,
        keystep: i32,
    },
}

/// One of Redis's key specs: how COMMAND INFO describes a set of keys.
#[derive(Debug)]
pub struct KeySpec {
    pub notes: &'static str,
    pub flags: u16,
    pub begin_search: BeginSearch,
    pub find_keys: FindKeys,
}

/// A key spec for a row: keys from argument `index`, as a range
/// (`key_spec(RW | ACCESS | UPDATE, 1, 0, 1)`).
pub const fn key_spec(flags: u16, index: i32, last_key: i32, key_step: i32) -> KeySpec {
    KeySpec {
        notes: "",
        flags,
        begin_search: BeginSearch::Index(index),
        find_keys: FindKeys::Range {
            lastkey: last_key,
            keystep: key_step,
            limit: 0,
        },
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
    pub deprecated_since: &'static str,
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
        deprecated_since: "",
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
    }
}

impl CommandSpec {
    pub const fn flags(mut self, flags: u32) -> Self {
        self.flags = flags;
        self
    }

    /// Key positions as Redis's legacy (first, last, step) triple, for
    /// COMMAND INFO and COMMAND GETKEYS of a command Redis does not
    /// define (Redis's own come from its key specs).
    pub const fn keys(mut self, first: i32, last: i32, step: i32) -> Self {
        self.first_key = first;
        self.last_key = last;
        self.key_step = step;
        self
    }

    /// COMMAND DOCS' group, since and summary, for a command Redis does
    /// not define (Redis's own come from [`super::defs`]).
    pub const fn doc(mut self, group: Group, since: &'static str, summary: &'static str) -> Self {
        self.group = group;
        self.since = since;
        self.summary = summary;
        self
    }

    /// The complexity, history and arguments COMMAND DOCS lists, for a
    /// command Redis does not define.
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

    /// Subcommands of a command that also runs named alone (COMMAND), as
    /// Redis's containers may: a name after it is looked up among them.
    pub const fn with_subcommands(mut self, subcommands: &'static [CommandSpec]) -> Self {
        self.subcommands = subcommands;
        self
    }

    /// Marks a command COMMAND DOCS lists with `doc_flags: syscmd`.
    pub const fn syscmd(mut self) -> Self {
        self.syscmd = true;
        self
    }

    /// Key specs for COMMAND INFO of a command Redis does not define.
    pub const fn key_specs(mut self, key_specs: &'static [KeySpec]) -> Self {
        self.key_specs = key_specs;
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
        if let Some(c) = self.group.acl_category() {
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

/// A command as dispatch sees it: its spec, its full name (`client|setname`)
/// and its index in the statistics table.
#[derive(Debug)]
pub struct Command {
    pub spec: &'static CommandSpec,
    pub full_name: String,
    /// Redis's definition of this command, when Redis has one: what
    /// COMMAND INFO and COMMAND DOCS report then (the row's own docs
    /// describe only commands Redis does not define).
    pub def: Option<&'static CommandDef>,
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
                    def: defs::lookup(spec.name),
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
                            def: defs::lookup(&full),
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

/// The command names of one server after its `rename-command` directives:
/// a command renamed is found under its new name only, one renamed to `""`
/// not at all (Redis re-keys its command dict the same way). Only running
/// commands sees the new names; COMMAND and ACL rules keep the original
/// ones, as Redis's do.
#[derive(Clone, Default)]
pub struct Renames {
    /// Lowercase new name -> the command.
    by_new_name: HashMap<Vec<u8>, &'static Command>,
    /// Commands no longer found under their own name.
    moved: Vec<&'static Command>,
}

impl Renames {
    /// Redis's `rename-command old new` (`new` empty: the command is gone),
    /// with its config-file error texts.
    pub fn rename(&mut self, old: &[u8], new: &[u8]) -> Result<(), &'static str> {
        let cmd = self.lookup(old).ok_or("No such command in rename-command")?;
        if self.by_new_name.remove(&old.to_ascii_lowercase()).is_none() {
            self.moved.push(cmd);
        }
        if !new.is_empty() {
            if self.lookup(new).is_some() {
                return Err("Target command name already exists");
            }
            self.by_new_name.insert(new.to_ascii_lowercase(), cmd);
        }
        Ok(())
    }

    /// Whether a command a script may call on data was renamed: native runs
    /// call commands by their own names, so they give way to Lua, which
    /// sees the new ones. Renaming administrative commands (FLUSHALL,
    /// KEYS, CONFIG…, Redis's `@dangerous`) leaves them be.
    pub fn moves_data_commands(&self) -> bool {
        self.moved.iter().any(|cmd| !cmd.acl_categories().contains(&"@dangerous"))
    }

    /// Finds a command by the name this server knows it by, ignoring case.
    pub fn lookup(&self, name: &[u8]) -> Option<&'static Command> {
        let found = Registry::get().lookup(name);
        if self.moved.is_empty() {
            return found;
        }
        if let Some(&cmd) = self.by_new_name.get(&name.to_ascii_lowercase()) {
            return Some(cmd);
        }
        found.filter(|cmd| !self.moved.iter().any(|moved| std::ptr::eq(*moved, *cmd)))
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

    /// The flags COMMAND INFO lists (see [`flag::NAMES`]): Redis's for a
    /// command it defines, the row's otherwise.
    pub fn info_flags(&self) -> u32 {
        self.def.map_or(self.spec.flags, |d| d.flags)
    }

    /// The ACL categories: Redis's for a command it defines, derived from
    /// the row's group and flags otherwise.
    pub fn acl_categories(&self) -> Vec<&'static str> {
        match self.def {
            Some(def) => def.acl_categories.to_vec(),
            None => self.spec.acl_categories(),
        }
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

    /// Every Redis flag a row may carry, named for failure messages.
    const ROW_FLAG_NAMES: &[(u32, &str)] = &[
        (flag::WRITE, "WRITE"),
        (flag::READONLY, "READONLY"),
        (flag::DENYOOM, "DENYOOM"),
        (flag::ADMIN, "ADMIN"),
        (flag::PUBSUB, "PUBSUB"),
        (flag::NOSCRIPT, "NOSCRIPT"),
        (flag::BLOCKING, "BLOCKING"),
        (flag::LOADING, "LOADING"),
        (flag::STALE, "STALE"),
        (flag::SKIP_MONITOR, "SKIP_MONITOR"),
        (flag::SKIP_SLOWLOG, "SKIP_SLOWLOG"),
        (flag::FAST, "FAST"),
        (flag::NO_AUTH, "NO_AUTH"),
        (flag::MAY_REPLICATE, "MAY_REPLICATE"),
        (flag::NO_MULTI, "NO_MULTI"),
        (flag::ALLOW_BUSY, "ALLOW_BUSY"),
        (flag::NO_MANDATORY_KEYS, "NO_MANDATORY_KEYS"),
        (flag::PROTECTED, "PROTECTED"),
    ];

    fn flag_names(flags: u32) -> Vec<&'static str> {
        ROW_FLAG_NAMES.iter().filter(|(f, _)| flags & f != 0).map(|(_, n)| *n).collect()
    }

    /// Commands keylock serves that Redis 7.0.15 does not define: its own,
    /// and ones of later Redis versions.
    const NOT_IN_REDIS_7_0: &[&str] = &["client|capa", "client|no-touch", "client|setinfo", "waitaof"];

    #[test]
    fn every_command_redis_defines_has_its_definition() {
        for (_, name) in &Registry::get().all {
            let keylock_own = name == "keylock" || name.starts_with("keylock|");
            assert!(
                defs::lookup(name).is_some() || keylock_own || NOT_IN_REDIS_7_0.contains(&name.as_str()),
                "{name} has no Redis definition: regenerate src/commands/redis_defs.rs, or list it as keylock's own"
            );
        }
    }

    #[test]
    fn rows_of_redis_commands_have_redis_arity_and_flags() {
        let mut wrong = Vec::new();
        for (spec, name) in &Registry::get().all {
            let Some(def) = defs::lookup(name) else { continue };
            if spec.arity != def.arity {
                wrong.push(format!("{name}: arity {} where Redis has {}", spec.arity, def.arity));
            }
            let (row, redis) = (spec.flags & flag::ROW_REDIS_FLAGS, def.flags & flag::ROW_REDIS_FLAGS);
            if row != redis {
                wrong.push(format!(
                    "{name}: row lacks {:?}, has extra {:?}",
                    flag_names(redis & !row),
                    flag_names(row & !redis)
                ));
            }
        }
        assert!(wrong.is_empty(), "rows differing from Redis:\n{}", wrong.join("\n"));
    }

    /// One place per fact: what Redis's definition says is not repeated
    /// on the row (a row's `.doc()`, `.details()`, `.key_specs()`,
    /// `.keys()` and `.syscmd()` describe only commands Redis lacks).
    #[test]
    fn rows_of_redis_commands_carry_no_docs_or_key_positions() {
        let mut repeated = Vec::new();
        for (spec, name) in &Registry::get().all {
            if defs::lookup(name).is_none() {
                continue;
            }
            if !spec.summary.is_empty()
                || !spec.complexity.is_empty()
                || !spec.history.is_empty()
                || !spec.arguments.is_empty()
                || !spec.key_specs.is_empty()
                || spec.syscmd
                || (spec.first_key, spec.last_key, spec.key_step) != (0, 0, 0)
            {
                repeated.push(name.as_str());
            }
        }
        assert!(
            repeated.is_empty(),
            "rows repeating Redis's definition (drop their .doc/.details/.key_specs/.keys/.syscmd): {repeated:?}"
        );
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
