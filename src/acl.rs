//! Redis 7.0's access control lists: users, their rules, the permission
//! check, the ACL log, and the ACL file.
//!
//! This module owns the domain only (what a rule means, what a user may
//! run, how a user is described back); it knows nothing of connections.
//! The engine holds one [`Acl`]; the pipeline (`engine::exec`) asks
//! [`Acl::check`] once per command, for clients, transactions and
//! scripts alike, and the ACL command (`commands::acl`) edits users.
//!
//! `src/acl.c` of Redis 7.0.15 is the model, and its texts are copied:
//! rule errors, the way a user is described (ACL LIST, ACL SAVE) and the
//! log's grouping. Where Redis's order comes from its command dictionary
//! (hashed with a random seed, so it differs from run to run: the single
//! commands of a description, ACL CAT's list), keylock uses its command
//! table's order.
//!
//! The common case costs one branch: a client of the `default` user while
//! that user may run everything on every key and channel (Redis's out of
//! the box state) is never checked (see [`Acl::unrestricted_default`]).

use std::collections::{BTreeMap, VecDeque};
use std::sync::OnceLock;

use bytes::Bytes;
use sha2::Digest;

use std::collections::HashMap;

use crate::commands::defs::{self, CommandDef};
use crate::commands::redis_defs::DEFS;
use crate::commands::table::{Command, Registry, key_flag};

/// Redis's ACL categories, in its order (ACL CAT, GETUSER descriptions).
pub const CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// The index of a category in [`CATEGORIES`], by name in any case.
pub fn category(name: &[u8]) -> Option<usize> {
    CATEGORIES.iter().position(|c| c.as_bytes().eq_ignore_ascii_case(name))
}

/// Every command the rules may name, with its categories. The command
/// table's commands come first, numbered as the table numbers them
/// (`stat_index`); then the commands Redis 7.0.15 defines and keylock
/// does not serve (MIGRATE, CLUSTER, LATENCY…), so that rules written for
/// Redis load here and describe back as Redis describes them. Categories
/// are Redis's own: keylock's own commands (KEYLOCK, and those of later
/// Redis versions) are in none, so `+@all` is the only category that
/// grants them and they never tip a description away from Redis's.
pub struct Catalog {
    pub names: Vec<String>,
    /// Bit `i` set: in `CATEGORIES[i]`.
    categories: Vec<u32>,
    /// A container's subcommands.
    children: Vec<Vec<usize>>,
    parent: Vec<Option<usize>>,
    /// Redis's definition, for every command Redis defines.
    defs: Vec<Option<&'static CommandDef>>,
    by_name: HashMap<String, usize>,
    /// How many of the commands keylock serves (the rest are Redis's only).
    served: usize,
    /// The bit set only by `+@all`: the user may run commands added later.
    future: usize,
}

impl Catalog {
    pub fn get() -> &'static Catalog {
        static CATALOG: OnceLock<Catalog> = OnceLock::new();
        CATALOG.get_or_init(|| {
            let registry = Registry::get();
            let mut names: Vec<String> = registry.all.iter().map(|(_, name)| name.clone()).collect();
            let served = names.len();
            let mut defs: Vec<Option<&'static CommandDef>> = names.iter().map(|n| defs::lookup(n)).collect();
            for def in DEFS {
                if !names.iter().any(|n| n == def.name) {
                    names.push(def.name.to_string());
                    defs.push(Some(def));
                }
            }
            let n = names.len();
            let by_name: HashMap<String, usize> = names.iter().enumerate().map(|(i, name)| (name.clone(), i)).collect();
            let mut catalog = Catalog {
                categories: vec![0; n],
                children: vec![Vec::new(); n],
                parent: vec![None; n],
                defs,
                by_name,
                served,
                future: n,
                names,
            };
            for id in 0..n {
                if let Some(def) = catalog.defs[id] {
                    for cat in def.acl_categories {
                        if let Some(i) = category(cat.trim_start_matches('@').as_bytes()) {
                            catalog.categories[id] |= 1 << i;
                        }
                    }
                }
                if let Some((container, _)) = catalog.names[id].split_once('|')
                    && let Some(&pid) = catalog.by_name.get(container)
                {
                    catalog.parent[id] = Some(pid);
                    catalog.children[pid].push(id);
                }
            }
            catalog
        })
    }

    fn words(&self) -> usize {
        (self.future + 1).div_ceil(64)
    }

    /// Commands and subcommands in order, each container followed by its
    /// subcommands (Redis's recursion over its dictionaries).
    fn in_order(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.future)
            .filter(|&id| self.parent[id].is_none())
            .flat_map(|id| std::iter::once(id).chain(self.children[id].iter().copied()))
    }

    /// The commands of a category (ACL CAT).
    pub fn in_category(&self, cat: usize) -> Vec<&str> {
        self.in_order()
            .filter(|&id| self.categories[id] & (1 << cat) != 0)
            .map(|id| self.names[id].as_str())
            .collect()
    }

    /// Redis's `lookupCommandBySdsLogic`, strict: `name` or
    /// `container|sub`, in any case.
    fn find(&self, text: &str) -> Option<usize> {
        let lower = text.to_ascii_lowercase();
        let id = *self.by_name.get(&lower)?;
        match lower.split_once('|') {
            // `select|0` is no command; `config|get` is.
            Some((_, sub)) if sub.contains('|') => None,
            _ => Some(id),
        }
    }

    /// A command Redis defines and keylock does not serve, as ACL DRYRUN
    /// names it (its subcommand, for a container).
    pub fn redis_only(&self, argv: &[Bytes]) -> Option<Target<'_>> {
        let name = String::from_utf8_lossy(&argv[0]).to_ascii_lowercase();
        let mut id = *self.by_name.get(&name)?;
        if id < self.served {
            return None;
        }
        if !self.children[id].is_empty() && argv.len() >= 2 {
            let full = format!("{name}|{}", String::from_utf8_lossy(&argv[1]).to_ascii_lowercase());
            id = *self.by_name.get(&full)?;
        }
        let def = self.defs[id]?;
        Some(Target {
            id,
            no_auth: def.flags & crate::commands::table::flag::NO_AUTH != 0,
            def: Some(def),
            name: def.name,
            arity: def.arity,
        })
    }
}

/// What the check needs of a command: its number, whether it is run
/// unauthenticated (never refused), Redis's definition (its keys) and name.
#[derive(Clone, Copy)]
pub struct Target<'a> {
    id: usize,
    no_auth: bool,
    def: Option<&'static CommandDef>,
    pub name: &'a str,
    pub arity: i32,
}

impl<'a> Target<'a> {
    pub fn of(cmd: &'a Command) -> Target<'a> {
        Target {
            id: cmd.stat_index,
            no_auth: cmd.spec.has(crate::commands::table::flag::NO_AUTH),
            def: cmd.def,
            name: &cmd.full_name,
            arity: cmd.spec.arity,
        }
    }

    pub fn arity_ok(&self, argc: usize) -> bool {
        let a = self.arity;
        if a >= 0 { argc == a as usize } else { argc >= (-a) as usize }
    }
}

/// Why a rule was refused (Redis's errno values in `ACLSetUser`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleError {
    Syntax,
    UnknownCommand,
    KeysAfterAll,
    ChannelsAfterAll,
    NoSuchPassword,
    BadHash,
    FirstArgOfSubcommand,
    Duplicate,
}

impl RuleError {
    /// Redis's `ACLSetUserStringError`.
    pub fn text(self) -> &'static str {
        match self {
            RuleError::Syntax => "Syntax error",
            RuleError::UnknownCommand => "Unknown command or category name in ACL",
            RuleError::KeysAfterAll => {
                "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns"
            }
            RuleError::ChannelsAfterAll => {
                "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels"
            }
            RuleError::NoSuchPassword => "The password you are trying to remove from the user does not exist",
            RuleError::BadHash => "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
            RuleError::Duplicate => "Duplicate user found. A user can only be defined once in config files",
            RuleError::FirstArgOfSubcommand => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

const READ: u8 = 1;
const WRITE: u8 = 2;
const ALL: u8 = READ | WRITE;

#[derive(Debug, Clone, PartialEq, Eq)]
struct KeyPattern {
    perm: u8,
    pattern: Bytes,
}

impl KeyPattern {
    fn describe(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(match self.perm {
            READ => b"%R~",
            WRITE => b"%W~",
            _ => b"~",
        });
        out.extend_from_slice(&self.pattern);
    }
}

/// One set of permissions: the user's root one, or a `(…)` selector.
#[derive(Debug, Clone)]
pub struct Selector {
    root: bool,
    all_keys: bool,
    all_channels: bool,
    all_commands: bool,
    allowed: Vec<u64>,
    /// Allowed first arguments of otherwise refused commands (`+select|0`).
    first_args: BTreeMap<usize, Vec<String>>,
    keys: Vec<KeyPattern>,
    channels: Vec<Bytes>,
}

fn has_spaces(s: &[u8]) -> bool {
    s.iter().any(|&c| c.is_ascii_whitespace() || c == 0 || c == 0x0b)
}

impl Selector {
    fn new(root: bool, pubsub_all: bool) -> Selector {
        Selector {
            root,
            all_keys: false,
            all_channels: pubsub_all,
            all_commands: false,
            allowed: vec![0; Catalog::get().words()],
            first_args: BTreeMap::new(),
            keys: Vec::new(),
            channels: Vec::new(),
        }
    }

    fn bit(&self, id: usize) -> bool {
        self.allowed.get(id / 64).is_some_and(|w| w & (1 << (id % 64)) != 0)
    }

    fn set_bit(&mut self, id: usize, on: bool) {
        if on {
            self.allowed[id / 64] |= 1 << (id % 64);
        } else {
            self.allowed[id / 64] &= !(1 << (id % 64));
            self.all_commands = false;
        }
    }

    /// `ACLChangeSelectorPerm`: a container takes its subcommands along.
    fn change(&mut self, id: usize, on: bool) {
        self.set_bit(id, on);
        self.first_args.remove(&id);
        for &sub in &Catalog::get().children[id] {
            self.set_bit(sub, on);
        }
    }

    fn set_category(&mut self, cat: usize, on: bool) {
        let catalog = Catalog::get();
        for id in catalog.in_order() {
            if catalog.categories[id] & (1 << cat) != 0 {
                self.change(id, on);
            }
        }
    }

    fn count_category(&self, cat: usize) -> (usize, usize) {
        let catalog = Catalog::get();
        let (mut on, mut off) = (0, 0);
        for id in catalog.in_order() {
            if catalog.categories[id] & (1 << cat) != 0 {
                if self.bit(id) {
                    on += 1;
                } else {
                    off += 1;
                }
            }
        }
        (on, off)
    }

    fn all(&mut self, on: bool) {
        let fill = if on { u64::MAX } else { 0 };
        self.allowed.iter_mut().for_each(|w| *w = fill);
        self.all_commands = on;
        self.first_args.clear();
    }

    /// Redis's `ACLSetSelector`.
    fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let catalog = Catalog::get();
        let is = |word: &str| op.eq_ignore_ascii_case(word.as_bytes());
        if is("allkeys") || is("~*") {
            self.all_keys = true;
            self.keys.clear();
        } else if is("resetkeys") {
            self.all_keys = false;
            self.keys.clear();
        } else if is("allchannels") || is("&*") {
            self.all_channels = true;
            self.channels.clear();
        } else if is("resetchannels") {
            self.all_channels = false;
            self.channels.clear();
        } else if is("allcommands") || is("+@all") {
            self.all(true);
        } else if is("nocommands") || is("-@all") {
            self.all(false);
        } else if op[0] == b'~' || op[0] == b'%' {
            if self.all_keys {
                return Err(RuleError::KeysAfterAll);
            }
            let mut perm = 0;
            let mut offset = 1;
            if op[0] == b'%' {
                let mut ok = true;
                while offset < op.len() {
                    let c = op[offset].to_ascii_uppercase();
                    if c == b'R' && perm & READ == 0 {
                        perm |= READ;
                    } else if c == b'W' && perm & WRITE == 0 {
                        perm |= WRITE;
                    } else if c == b'~' {
                        offset += 1;
                        break;
                    } else {
                        ok = false;
                        break;
                    }
                    offset += 1;
                }
                if perm == 0 || !ok {
                    return Err(RuleError::Syntax);
                }
            } else {
                perm = ALL;
            }
            let pattern = &op[offset.min(op.len())..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            match self.keys.iter_mut().find(|k| k.pattern == pattern) {
                Some(existing) => existing.perm |= perm,
                None => self.keys.push(KeyPattern {
                    perm,
                    pattern: Bytes::copy_from_slice(pattern),
                }),
            }
            self.all_keys = false;
        } else if op[0] == b'&' {
            if self.all_channels {
                return Err(RuleError::ChannelsAfterAll);
            }
            let pattern = &op[1..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            if !self.channels.iter().any(|c| c == pattern) {
                self.channels.push(Bytes::copy_from_slice(pattern));
            }
            self.all_channels = false;
        } else if op[0] == b'+' && op.get(1) != Some(&b'@') {
            let name = String::from_utf8_lossy(&op[1..]).into_owned();
            match name.rfind('|') {
                None => {
                    let id = catalog.find(&name).ok_or(RuleError::UnknownCommand)?;
                    self.change(id, true);
                }
                Some(at) => {
                    let (container, sub) = (&name[..at], &name[at + 1..]);
                    let id = catalog.find(container).ok_or(RuleError::UnknownCommand)?;
                    if catalog.parent[id].is_some() {
                        return Err(RuleError::FirstArgOfSubcommand);
                    }
                    if sub.is_empty() {
                        return Err(RuleError::Syntax);
                    }
                    if !catalog.children[id].is_empty() {
                        let sub = catalog.find(&name).ok_or(RuleError::UnknownCommand)?;
                        self.change(sub, true);
                    } else {
                        tracing::warn!(
                            "Deprecation warning: Allowing a first arg of an otherwise blocked command is a misuse of ACL and may get disabled in the future (offender: +{name})"
                        );
                        let args = self.first_args.entry(id).or_default();
                        if !args.iter().any(|a| a.eq_ignore_ascii_case(sub)) {
                            args.push(sub.to_string());
                        }
                    }
                }
            }
        } else if op[0] == b'-' && op.get(1) != Some(&b'@') {
            let id = catalog.find(&String::from_utf8_lossy(&op[1..])).ok_or(RuleError::UnknownCommand)?;
            self.change(id, false);
        } else if (op[0] == b'+' || op[0] == b'-') && op.get(1) == Some(&b'@') {
            let cat = category(&op[2..]).ok_or(RuleError::UnknownCommand)?;
            self.set_category(cat, op[0] == b'+');
        } else {
            return Err(RuleError::Syntax);
        }
        Ok(())
    }

    /// Redis's `ACLDescribeSelectorCommandRules`: `+@all` or `-@all`, the
    /// categories that fit best, then single commands.
    fn describe_commands(&self) -> String {
        let catalog = Catalog::get();
        let additive = !self.bit(catalog.future);
        let mut rules = String::from(if additive { "-@all " } else { "+@all " });
        let mut fake = Selector::new(false, false);
        fake.all(!additive);
        let mut temp = self.clone();
        let mut applied = [false; CATEGORIES.len()];
        loop {
            let mut best = None;
            let (mut mindiff, mut maxsame) = (usize::MAX, 0);
            for (j, _) in CATEGORIES.iter().enumerate() {
                if applied[j] {
                    continue;
                }
                let (on, off) = temp.count_category(j);
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                if same > diff && (diff < mindiff || (diff == mindiff && same > maxsame)) {
                    best = Some(j);
                    mindiff = diff;
                    maxsame = same;
                }
            }
            let Some(best) = best else { break };
            fake.set_category(best, additive);
            temp.set_category(best, !additive);
            rules.push_str(if additive { "+@" } else { "-@" });
            rules.push_str(CATEGORIES[best]);
            rules.push(' ');
            applied[best] = true;
        }
        for id in catalog.in_order() {
            let user_bit = self.bit(id);
            if user_bit != fake.bit(id) {
                rules.push(if user_bit { '+' } else { '-' });
                rules.push_str(&catalog.names[id]);
                rules.push(' ');
                fake.change(id, user_bit);
            }
            if !user_bit && let Some(args) = self.first_args.get(&id) {
                for arg in args {
                    rules.push('+');
                    rules.push_str(&catalog.names[id]);
                    rules.push('|');
                    rules.push_str(arg);
                    rules.push(' ');
                }
            }
        }
        rules.pop();
        rules
    }

    /// Redis's `ACLDescribeSelector`: keys, channels, commands.
    fn describe(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.all_keys {
            out.extend_from_slice(b"~* ");
        } else {
            for k in &self.keys {
                k.describe(&mut out);
                out.push(b' ');
            }
        }
        if self.all_channels {
            out.extend_from_slice(b"&* ");
        } else {
            out.extend_from_slice(b"resetchannels ");
            for c in &self.channels {
                out.push(b'&');
                out.extend_from_slice(c);
                out.push(b' ');
            }
        }
        out.extend_from_slice(self.describe_commands().as_bytes());
        out
    }

    /// ACL GETUSER's `commands`, `keys`, `channels` fields.
    pub fn fields(&self) -> [(&'static str, Vec<u8>); 3] {
        let keys = if self.all_keys {
            b"~*".to_vec()
        } else {
            let mut out = Vec::new();
            for (i, k) in self.keys.iter().enumerate() {
                if i > 0 {
                    out.push(b' ');
                }
                k.describe(&mut out);
            }
            out
        };
        let channels = if self.all_channels {
            b"&*".to_vec()
        } else {
            let mut out = Vec::new();
            for (i, c) in self.channels.iter().enumerate() {
                if i > 0 {
                    out.push(b' ');
                }
                out.push(b'&');
                out.extend_from_slice(c);
            }
            out
        };
        [
            ("commands", self.describe_commands().into_bytes()),
            ("keys", keys),
            ("channels", channels),
        ]
    }

    fn key_allowed(&self, key: &[u8], spec_flags: u16) -> bool {
        if self.all_keys {
            return true;
        }
        let mut need = 0;
        if spec_flags & key_flag::ACCESS != 0 {
            need |= READ;
        }
        if spec_flags & (key_flag::INSERT | key_flag::DELETE | key_flag::UPDATE) != 0 {
            need |= WRITE;
        }
        self.keys
            .iter()
            .any(|k| k.perm & need == need && crate::glob::matches(&k.pattern, key, false))
    }

    fn channel_allowed(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.all_channels || channel_in(&self.channels, channel, is_pattern)
    }

    /// Redis's `ACLSelectorCheckCmd`.
    fn check(&self, cmd: &Target, argv: &[Bytes], keys: &mut Option<Vec<(usize, u16)>>) -> Result<(), Denial> {
        let id = cmd.id;
        if !self.all_commands && !cmd.no_auth && !self.bit(id) {
            let at = if Catalog::get().parent[id].is_some() { 2 } else { 1 };
            let allowed = argv.len() >= 2
                && self.first_args.get(&id).is_some_and(|args| {
                    argv.get(at)
                        .is_some_and(|a| args.iter().any(|s| s.as_bytes().eq_ignore_ascii_case(a)))
                });
            if !allowed {
                return Err(Denial::Command);
            }
        }
        if !self.all_keys
            && let Some(def) = cmd.def.filter(|d| d.has_keys())
        {
            let keys = keys.get_or_insert_with(|| def.keys_in(argv));
            for &(at, flags) in keys.iter() {
                if !self.key_allowed(&argv[at], flags) {
                    return Err(Denial::Key(at));
                }
            }
        }
        if !self.all_channels {
            for (at, is_pattern) in channels_of(cmd, argv) {
                if !channel_in(&self.channels, &argv[at], is_pattern) {
                    return Err(Denial::Channel(at));
                }
            }
        }
        Ok(())
    }
}

/// Redis's `ACLCheckChannelAgainstList`: a channel is matched against the
/// patterns, a pattern (PSUBSCRIBE's) only literally.
fn channel_in(list: &[Bytes], channel: &[u8], is_pattern: bool) -> bool {
    list.iter().any(|p| {
        if is_pattern {
            p == channel
        } else {
            crate::glob::matches(p, channel, false)
        }
    })
}

/// The channels a command publishes or subscribes to (Redis's
/// `getChannelsFromCommand`, PUBLISH and SUBSCRIBE flags only): position
/// and whether it is a pattern.
fn channels_of(cmd: &Target, argv: &[Bytes]) -> Vec<(usize, bool)> {
    match cmd.name {
        "subscribe" | "ssubscribe" => (1..argv.len()).map(|i| (i, false)).collect(),
        "psubscribe" => (1..argv.len()).map(|i| (i, true)).collect(),
        "publish" | "spublish" if argv.len() > 1 => vec![(1, false)],
        _ => Vec::new(),
    }
}

/// Why a command was refused, with the argument at fault. Ordered as
/// Redis's `ACL_DENIED_*` values, which pick the error reported when
/// every selector refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denial {
    Command,
    Key(usize),
    Channel(usize),
}

impl Denial {
    fn rank(self) -> (u8, usize) {
        match self {
            Denial::Command => (1, 0),
            Denial::Key(at) => (2, at),
            Denial::Channel(at) => (4, at),
        }
    }

    /// The client's NOPERM error (`processCommand`).
    pub fn error(self, cmd: &Command) -> String {
        match self {
            Denial::Command => format!("NOPERM this user has no permissions to run the '{}' command", cmd.full_name),
            Denial::Key(_) => "NOPERM this user has no permissions to access one of the keys used as arguments".to_string(),
            Denial::Channel(_) => "NOPERM this user has no permissions to access one of the channels used as arguments".to_string(),
        }
    }

    /// A script's error (`scriptVerifyACL` with `getAclErrorMessage`).
    pub fn script_error(self) -> &'static str {
        match self {
            Denial::Command => "ERR The user executing the script can't run this command or subcommand",
            Denial::Key(_) => "ERR The user executing the script can't access at least one of the keys mentioned in the command arguments",
            Denial::Channel(_) => "ERR The user executing the script can't publish to the channel mentioned in the command",
        }
    }

    /// EXEC's error for a command the rules refuse since it was queued.
    pub fn exec_error(self) -> String {
        let reason = match self {
            Denial::Command => "no permission to execute the command or subcommand",
            Denial::Key(_) => "no permission to touch the specified keys",
            Denial::Channel(_) => "no permission to access one of the channels used as arguments",
        };
        format!(
            "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {reason}"
        )
    }

    pub fn reason(self) -> Reason {
        match self {
            Denial::Command => Reason::Command,
            Denial::Key(_) => Reason::Key,
            Denial::Channel(_) => Reason::Channel,
        }
    }

    /// What the log names: the command, or the key or channel at fault.
    pub fn object(self, cmd: &Command, argv: &[Bytes]) -> Bytes {
        match self {
            Denial::Command => Bytes::from(cmd.full_name.clone()),
            Denial::Key(at) | Denial::Channel(at) => argv[at].clone(),
        }
    }
}

const ENABLED: u8 = 1;
const DISABLED: u8 = 2;
const NOPASS: u8 = 4;
const SKIP_SANITIZE: u8 = 8;
const SANITIZE: u8 = 16;
const FLAG_NAMES: &[(u8, &str)] = &[
    (ENABLED, "on"),
    (DISABLED, "off"),
    (NOPASS, "nopass"),
    (SKIP_SANITIZE, "skip-sanitize-payload"),
    (SANITIZE, "sanitize-payload"),
];

/// Redis's password hash: SHA-256 in lowercase hex.
pub fn hash_password(clear: &[u8]) -> String {
    let digest = sha2::Sha256::digest(clear);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn valid_hash(hash: &[u8]) -> bool {
    hash.len() == 64 && hash.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

#[derive(Debug, Clone)]
pub struct User {
    pub name: Bytes,
    flags: u8,
    passwords: Vec<String>,
    /// The root selector first.
    selectors: Vec<Selector>,
}

impl User {
    fn new(name: &[u8], pubsub_all: bool) -> User {
        User {
            name: Bytes::copy_from_slice(name),
            flags: DISABLED,
            passwords: Vec::new(),
            selectors: vec![Selector::new(true, pubsub_all)],
        }
    }

    /// Redis's `ACLCreateDefaultUser`.
    fn default_user(pubsub_all: bool) -> User {
        let mut u = User::new(b"default", pubsub_all);
        for op in ["+@all", "~*", "&*", "on", "nopass"] {
            let _ = u.apply(op.as_bytes(), pubsub_all);
        }
        u
    }

    pub fn enabled(&self) -> bool {
        self.flags & DISABLED == 0
    }

    pub fn nopass(&self) -> bool {
        self.flags & NOPASS != 0
    }

    /// May run every command on every key and channel: never checked.
    fn unrestricted(&self) -> bool {
        let root = &self.selectors[0];
        root.all_commands && root.all_keys && root.all_channels
    }

    /// Redis's `ACLSetUser`: one rule.
    pub fn apply(&mut self, op: &[u8], pubsub_all: bool) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        let is = |word: &str| op.eq_ignore_ascii_case(word.as_bytes());
        if is("on") {
            self.flags = (self.flags | ENABLED) & !DISABLED;
        } else if is("off") {
            self.flags = (self.flags | DISABLED) & !ENABLED;
        } else if is("skip-sanitize-payload") {
            self.flags = (self.flags | SKIP_SANITIZE) & !SANITIZE;
        } else if is("sanitize-payload") {
            self.flags = (self.flags | SANITIZE) & !SKIP_SANITIZE;
        } else if is("nopass") {
            self.flags |= NOPASS;
            self.passwords.clear();
        } else if is("resetpass") {
            self.flags &= !NOPASS;
            self.passwords.clear();
        } else if op[0] == b'>' || op[0] == b'#' {
            let hash = if op[0] == b'>' {
                hash_password(&op[1..])
            } else if valid_hash(&op[1..]) {
                String::from_utf8_lossy(&op[1..]).into_owned()
            } else {
                return Err(RuleError::BadHash);
            };
            if !self.passwords.contains(&hash) {
                self.passwords.push(hash);
            }
            self.flags &= !NOPASS;
        } else if op[0] == b'<' || op[0] == b'!' {
            let hash = if op[0] == b'<' {
                hash_password(&op[1..])
            } else if valid_hash(&op[1..]) {
                String::from_utf8_lossy(&op[1..]).into_owned()
            } else {
                return Err(RuleError::BadHash);
            };
            let at = self.passwords.iter().position(|p| *p == hash).ok_or(RuleError::NoSuchPassword)?;
            self.passwords.remove(at);
        } else if op[0] == b'(' && op[op.len() - 1] == b')' {
            let mut selector = Selector::new(false, pubsub_all);
            let inner = &op[1..op.len() - 1];
            let args = crate::request::split_args(inner).ok_or(RuleError::Syntax)?;
            for arg in args {
                if !arg.is_empty() {
                    selector.apply(&arg)?;
                }
            }
            self.selectors.push(selector);
        } else if is("clearselectors") {
            self.selectors.truncate(1);
        } else if is("reset") {
            for step in ["resetpass", "resetkeys", "resetchannels"] {
                let _ = self.apply(step.as_bytes(), pubsub_all);
            }
            if pubsub_all {
                let _ = self.apply(b"allchannels", pubsub_all);
            }
            for step in ["off", "sanitize-payload", "clearselectors", "-@all"] {
                let _ = self.apply(step.as_bytes(), pubsub_all);
            }
        } else {
            self.selectors[0].apply(op)?;
        }
        Ok(())
    }

    /// The user as a config/ACL file line: `user <name> <rules>` (ACL
    /// LIST, ACL SAVE, CONFIG REWRITE).
    pub fn config_line(&self) -> Vec<u8> {
        [b"user ".as_slice(), &self.name, b" ", &self.describe()].concat()
    }

    /// Redis's `ACLDescribeUser`: flags, password hashes, selectors.
    pub fn describe(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for &(flag, name) in FLAG_NAMES {
            if self.flags & flag != 0 {
                out.extend_from_slice(name.as_bytes());
                out.push(b' ');
            }
        }
        for p in &self.passwords {
            out.push(b'#');
            out.extend_from_slice(p.as_bytes());
            out.push(b' ');
        }
        for s in &self.selectors {
            if s.root {
                out.extend_from_slice(&s.describe());
            } else {
                out.extend_from_slice(b" (");
                out.extend_from_slice(&s.describe());
                out.push(b')');
            }
        }
        out
    }

    pub fn flag_names(&self) -> Vec<&'static str> {
        FLAG_NAMES.iter().filter(|(f, _)| self.flags & f != 0).map(|&(_, n)| n).collect()
    }

    pub fn passwords(&self) -> &[String] {
        &self.passwords
    }

    pub fn root(&self) -> &Selector {
        &self.selectors[0]
    }

    pub fn extra_selectors(&self) -> &[Selector] {
        &self.selectors[1..]
    }

    /// Redis's `ACLCheckUserCredentials` for this user.
    fn accepts(&self, password: &[u8]) -> bool {
        if !self.enabled() {
            return false;
        }
        if self.nopass() {
            return true;
        }
        let hashed = hash_password(password);
        self.passwords.iter().any(|p| constant_time_eq(p.as_bytes(), hashed.as_bytes()))
    }

    /// Redis's `ACLCheckAllUserCommandPerm`: some selector allows it, or
    /// the most telling refusal.
    pub fn check(&self, cmd: &Command, argv: &[Bytes]) -> Result<(), Denial> {
        self.check_target(&Target::of(cmd), argv)
    }

    /// [`User::check`] of a command as the catalog knows it (ACL DRYRUN of
    /// a command keylock does not serve).
    pub fn check_target(&self, cmd: &Target, argv: &[Bytes]) -> Result<(), Denial> {
        let mut keys = None;
        let mut relevant = Denial::Command;
        for s in &self.selectors {
            match s.check(cmd, argv, &mut keys) {
                Ok(()) => return Ok(()),
                Err(d) => {
                    if d.rank() > relevant.rank() {
                        relevant = d;
                    }
                }
            }
        }
        Err(relevant)
    }

    /// Redis's `ACLUserCheckCmdWithUnrestrictedKeyAccess` for reads: some
    /// selector allows the command and may read every key (`~*`, `%R~*`).
    pub fn may_read_every_key(&self, cmd: &Command, argv: &[Bytes]) -> bool {
        let mut keys = None;
        let cmd = Target::of(cmd);
        self.selectors.iter().any(|s| {
            s.check(&cmd, argv, &mut keys).is_ok()
                && (s.all_keys || s.keys.iter().any(|k| k.perm & READ != 0 && k.pattern.as_ref() == b"*"))
        })
    }

    /// Whether any selector lets this user use `channel`.
    pub fn channel_allowed(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.selectors.iter().any(|s| s.channel_allowed(channel, is_pattern))
    }

    fn any_all_channels(&self) -> bool {
        self.selectors.iter().any(|s| s.all_channels)
    }

    fn all_channel_patterns(&self) -> Vec<Bytes> {
        self.selectors.iter().flat_map(|s| s.channels.iter().cloned()).collect()
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// Redis's `ACLMergeSelectorArguments`: a selector spread over several
/// arguments (`(~x` `+get)`) becomes one. On an unmatched `(`, the index
/// of the argument that opened it.
pub fn merge_selectors(args: &[Bytes]) -> Result<Vec<Bytes>, usize> {
    let mut merged = Vec::new();
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (j, op) in args.iter().enumerate() {
        if let Some((_, selector)) = open.as_mut() {
            selector.push(b' ');
            selector.extend_from_slice(op);
            if op.last() == Some(&b')') {
                let (_, done) = open.take().unwrap_or_default();
                merged.push(Bytes::from(done));
            }
            continue;
        }
        if op.first() == Some(&b'(') && op.last() != Some(&b')') {
            open = Some((j, op.to_vec()));
            continue;
        }
        merged.push(op.clone());
    }
    match open {
        Some((j, _)) => Err(j),
        None => Ok(merged),
    }
}

/// Which kind of refusal an ACL LOG entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Command,
    Key,
    Channel,
    Auth,
}

impl Reason {
    pub fn name(self) -> &'static str {
        match self {
            Reason::Command => "command",
            Reason::Key => "key",
            Reason::Channel => "channel",
            Reason::Auth => "auth",
        }
    }
}

/// Where the refused command came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    Toplevel,
    Multi,
    Lua,
}

impl Context {
    pub fn name(self) -> &'static str {
        match self {
            Context::Toplevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

/// One ACL LOG entry.
#[derive(Debug, Clone)]
pub struct LogEntry {
    pub count: u64,
    pub reason: Reason,
    pub context: Context,
    pub object: Bytes,
    pub username: Bytes,
    pub ctime_ms: u64,
    pub client_info: String,
}

/// Entries within this many milliseconds of each other may be grouped.
const GROUPING_MAX_DELTA_MS: u64 = 60_000;

/// Every user, the log, and the settings rules depend on.
#[derive(Debug)]
pub struct Acl {
    /// By name, in byte order (Redis's radix tree order).
    users: BTreeMap<Bytes, User>,
    /// Newest first.
    pub log: VecDeque<LogEntry>,
    /// `acl-pubsub-default allchannels`: new users may use every channel.
    pub pubsub_all: bool,
    /// The `default` user may run anything: its clients are not checked.
    unrestricted_default: bool,
    /// The `default` user needs a password, or is off: new clients start
    /// unauthenticated (Redis's `authRequired`).
    auth_required: bool,
}

impl Default for Acl {
    fn default() -> Acl {
        Acl::new(false)
    }
}

/// The outcome of ACL SETUSER: the clients that must go.
#[derive(Debug, Default)]
pub struct Evictions {
    /// The user lost channel permissions: its subscribers are checked
    /// against its new rules (the user's name, and the user as changed).
    pub pubsub: Option<(Bytes, User)>,
}

impl Acl {
    pub fn new(pubsub_all: bool) -> Acl {
        let mut acl = Acl {
            users: BTreeMap::new(),
            log: VecDeque::new(),
            pubsub_all,
            unrestricted_default: true,
            auth_required: false,
        };
        acl.users.insert(Bytes::from_static(b"default"), User::default_user(pubsub_all));
        acl.refresh();
        acl
    }

    fn refresh(&mut self) {
        let (unrestricted, auth_required) = {
            let d = self.default_user();
            (d.unrestricted(), !d.nopass() || !d.enabled())
        };
        self.unrestricted_default = unrestricted;
        self.auth_required = auth_required;
    }

    pub fn default_user(&self) -> &User {
        &self.users[b"default".as_slice()]
    }

    /// Whether a client of the `default` user needs no check at all.
    #[inline]
    pub fn unrestricted_default(&self) -> bool {
        self.unrestricted_default
    }

    /// Whether a client of user `user` (None: default) is checked at all.
    #[inline]
    pub fn checks(&self, user: Option<&[u8]>) -> bool {
        user.is_some() || !self.unrestricted_default
    }

    pub fn auth_required(&self) -> bool {
        self.auth_required
    }

    pub fn user(&self, name: &[u8]) -> Option<&User> {
        self.users.get(name)
    }

    pub fn users(&self) -> impl Iterator<Item = &User> {
        self.users.values()
    }

    /// Redis's `ACLCheckUserCredentials`: the user's name when the pair
    /// is good.
    pub fn authenticate(&self, name: &[u8], password: &[u8]) -> bool {
        self.users.get(name).is_some_and(|u| u.accepts(password))
    }

    /// The permission check for a client of user `name` (None: default).
    pub fn check(&self, user: Option<&[u8]>, cmd: &Command, argv: &[Bytes]) -> Result<(), Denial> {
        let user = match user {
            None => self.default_user(),
            Some(name) => match self.users.get(name) {
                Some(u) => u,
                None => return Err(Denial::Command),
            },
        };
        if user.unrestricted() {
            return Ok(());
        }
        user.check(cmd, argv)
    }

    /// Whether a client of user `name` (None: default) may read every key
    /// with this command (SORT's BY and GET patterns need it).
    pub fn may_read_every_key(&self, user: Option<&[u8]>, cmd: &Command, argv: &[Bytes]) -> bool {
        let user = match user {
            None => self.default_user(),
            Some(name) => match self.users.get(name) {
                Some(u) => u,
                None => return false,
            },
        };
        user.unrestricted() || user.may_read_every_key(cmd, argv)
    }

    /// Redis's `ACLStringSetUser`: every rule applies, or none does.
    pub fn set_user(&mut self, name: &[u8], rules: &[Bytes]) -> Result<Evictions, String> {
        let merged = merge_selectors(rules).map_err(|at| {
            format!(
                "Unmatched parenthesis in acl selector starting at '{}'.",
                String::from_utf8_lossy(&rules[at])
            )
        })?;
        let existing = self.users.get(name).cloned();
        let mut staged = existing.clone().unwrap_or_else(|| User::new(name, self.pubsub_all));
        for op in &merged {
            staged
                .apply(op, self.pubsub_all)
                .map_err(|e| format!("Error in ACL SETUSER modifier '{}': {}", String::from_utf8_lossy(op), e.text()))?;
        }
        let mut evictions = Evictions::default();
        if let Some(original) = existing
            && pubsub_revoked(&staged, &original)
        {
            evictions.pubsub = Some((Bytes::copy_from_slice(name), staged.clone()));
        }
        self.users.insert(Bytes::copy_from_slice(name), staged);
        self.refresh();
        Ok(evictions)
    }

    /// ACL DELUSER: how many of the users existed.
    pub fn delete_users(&mut self, names: &[Bytes]) -> usize {
        let before = self.users.len();
        for name in names {
            self.users.remove(name);
        }
        before - self.users.len()
    }

    /// `requirepass`: the default user's only password, or nopass.
    pub fn set_default_password(&mut self, password: Option<&[u8]>) {
        let pubsub_all = self.pubsub_all;
        if let Some(d) = self.users.get_mut(b"default".as_slice()) {
            let _ = d.apply(b"resetpass", pubsub_all);
            match password {
                Some(p) => {
                    let _ = d.apply(&[b">", p].concat(), pubsub_all);
                }
                None => {
                    let _ = d.apply(b"nopass", pubsub_all);
                }
            }
        }
        self.refresh();
    }

    /// `user` lines of the configuration, in order (Redis's
    /// `ACLLoadConfiguredUsers`): a repeated `default` starts from reset.
    pub fn load_configured(&mut self, users: &[Vec<Bytes>]) -> Result<(), String> {
        for line in users {
            let Some((name, rules)) = line.split_first() else { continue };
            if has_spaces(name) {
                return Err("Spaces not allowed in ACL usernames".into());
            }
            let pubsub_all = self.pubsub_all;
            let user = self.users.entry(name.clone()).or_insert_with(|| User::new(name, pubsub_all));
            if name.as_ref() == b"default" {
                let _ = user.apply(b"reset", pubsub_all);
            }
            let merged = merge_selectors(rules).map_err(|_| "Unmatched parenthesis".to_string())?;
            for op in &merged {
                user.apply(op, pubsub_all).map_err(|e| {
                    format!(
                        "Error loading ACL rule '{}' for the user named '{}': {}",
                        String::from_utf8_lossy(op),
                        String::from_utf8_lossy(name),
                        e.text()
                    )
                })?;
            }
        }
        self.refresh();
        Ok(())
    }

    /// Redis's `ACLLoadFromFile`: all users replaced, or nothing changes
    /// and the errors are returned. On success, the users whose clients
    /// must go (every user but `default`, as Redis frees them all).
    pub fn load_file(&mut self, path: &str) -> Result<Vec<Bytes>, String> {
        let text =
            std::fs::read(path).map_err(|e| format!("Error loading ACLs, opening file '{path}': {}", crate::error::os_error_text(&e)))?;
        let mut errors = String::new();
        let mut users: BTreeMap<Bytes, User> = BTreeMap::new();
        for (i, line) in text.split(|&b| b == b'\n').enumerate() {
            let linenum = i + 1;
            let line = line.trim_ascii();
            if line.is_empty() {
                continue;
            }
            let argv: Vec<Bytes> = line.split(|&b| b == b' ').map(Bytes::copy_from_slice).collect();
            if argv[0].as_ref() != b"user" || argv.len() < 2 {
                errors.push_str(&format!(
                    "{path}:{linenum} should start with user keyword followed by the username. "
                ));
                continue;
            }
            if has_spaces(&argv[1]) {
                errors.push_str(&format!(
                    "'{path}:{linenum}: username '{}' contains invalid characters. ",
                    String::from_utf8_lossy(&argv[1])
                ));
                continue;
            }
            if users.contains_key(&argv[1]) {
                errors.push_str(&format!(
                    "WARNING: Duplicate user '{}' found on line {linenum}. ",
                    String::from_utf8_lossy(&argv[1])
                ));
                continue;
            }
            let mut user = User::new(&argv[1], self.pubsub_all);
            let merged = match merge_selectors(&argv[2..]) {
                Ok(m) => m,
                Err(_) => {
                    errors.push_str(&format!("{path}:{linenum}: Unmatched parenthesis in selector definition."));
                    Vec::new()
                }
            };
            let mut syntax_error = false;
            for op in &merged {
                let op = trim_tabs(op);
                if let Err(e) = user.apply(op, self.pubsub_all) {
                    if e == RuleError::UnknownCommand {
                        errors.push_str(&format!(
                            "{path}:{linenum}: Error in applying operation '{}': {}. ",
                            String::from_utf8_lossy(op),
                            e.text()
                        ));
                    } else if !syntax_error {
                        errors.push_str(&format!("{path}:{linenum}: {}. ", e.text()));
                        syntax_error = true;
                    }
                }
            }
            users.insert(argv[1].clone(), user);
        }
        if !errors.is_empty() {
            errors.push_str("WARNING: ACL errors detected, no change to the previously active ACL rules was performed");
            return Err(errors);
        }
        if !users.contains_key(b"default".as_slice()) {
            users.insert(Bytes::from_static(b"default"), User::default_user(self.pubsub_all));
        }
        let gone = self.users.keys().filter(|n| n.as_ref() != b"default").cloned().collect();
        self.users = users;
        self.refresh();
        Ok(gone)
    }

    /// Redis's `ACLSaveToFile`: every user as a `user` line, written to a
    /// temporary file renamed over the ACL file.
    pub fn save_file(&self, path: &str) -> std::io::Result<()> {
        let mut text = Vec::new();
        for user in self.users.values() {
            text.extend_from_slice(b"user ");
            text.extend_from_slice(&user.name);
            text.push(b' ');
            text.extend_from_slice(&user.describe());
            text.push(b'\n');
        }
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let tmp = format!("{path}.tmp-{}-{stamp}", std::process::id());
        let written = std::fs::write(&tmp, &text).and_then(|()| std::fs::rename(&tmp, path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }

    /// Redis's `addACLLogEntry`: a similar recent entry (same reason,
    /// context, object and user, within a minute, among the ten newest)
    /// is bumped to the front instead of adding one.
    pub fn log_denial(&mut self, entry: LogEntry, max_len: usize) {
        let similar = self.log.iter().take(10).position(|e| {
            e.reason == entry.reason
                && e.context == entry.context
                && e.ctime_ms.abs_diff(entry.ctime_ms) <= GROUPING_MAX_DELTA_MS
                && e.object == entry.object
                && e.username == entry.username
        });
        match similar {
            Some(at) => {
                let mut found = self.log.remove(at).unwrap_or(entry.clone());
                found.client_info = entry.client_info;
                found.ctime_ms = entry.ctime_ms;
                found.count += 1;
                self.log.push_front(found);
            }
            None => {
                self.log.push_front(entry);
                self.log.truncate(max_len);
            }
        }
    }
}

fn trim_tabs(op: &[u8]) -> &[u8] {
    let start = op.iter().position(|c| !matches!(c, b'\t' | b'\r' | b'\n')).unwrap_or(op.len());
    let end = op
        .iter()
        .rposition(|c| !matches!(c, b'\t' | b'\r' | b'\n'))
        .map_or(start, |e| e + 1);
    &op[start..end.max(start)]
}

/// Redis's `ACLKillPubsubClientsIfNeeded` first half: whether `new`
/// lost any channel `original` had (then its subscribers are checked).
fn pubsub_revoked(new: &User, original: &User) -> bool {
    if new.any_all_channels() {
        return false;
    }
    if original.any_all_channels() {
        return true;
    }
    let upcoming = new.all_channel_patterns();
    original.all_channel_patterns().iter().any(|p| !upcoming.contains(p))
}

/// Whether a subscriber of `user` keeps its subscriptions under the new
/// rules (patterns literally, channels by match).
pub fn subscriptions_allowed<'a>(
    user: &User,
    channels: impl Iterator<Item = &'a Bytes>,
    mut patterns: impl Iterator<Item = &'a Bytes>,
) -> bool {
    let upcoming = user.all_channel_patterns();
    if patterns.any(|p| !channel_in(&upcoming, p, true)) {
        return false;
    }
    let mut channels = channels;
    !channels.any(|c| !channel_in(&upcoming, c, false))
}

/// Checks a `user` line of the configuration as Redis does when it reads
/// it (`ACLAppendUserForLoading`): unknown commands pass (modules may add
/// them). The error names the argument at fault as Redis does.
pub fn validate_config_user(argv: &[String]) -> Result<(), String> {
    let args: Vec<Bytes> = argv[2..].iter().map(|a| Bytes::copy_from_slice(a.as_bytes())).collect();
    let fail = |at: usize, e: RuleError| {
        format!(
            "Error in user declaration '{}': {}",
            argv.get(at).map_or("", |s| s.as_str()),
            e.text()
        )
    };
    let merged = merge_selectors(&args).map_err(|at| fail(at, RuleError::Syntax))?;
    let mut user = User::new(b"", false);
    for (j, op) in merged.iter().enumerate() {
        match user.apply(op, false) {
            Ok(()) | Err(RuleError::UnknownCommand) => {}
            Err(e) => return Err(fail(j, e)),
        }
    }
    Ok(())
}

/// ACL GENPASS: `bits` random bits as hex, rounded up to whole digits.
pub fn generate_password(bits: usize) -> String {
    let chars = bits.div_ceil(4);
    let mut bytes = vec![0u8; chars.div_ceil(2)];
    // The kernel's generator, as Redis's `getRandomHexChars` seeds from it.
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes));
    if read.is_err() {
        bytes.iter_mut().for_each(|b| *b = fastrand::u8(..));
    }
    let mut hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    hex.truncate(chars);
    hex
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(rules: &[&str]) -> User {
        let mut u = User::new(b"u", false);
        for r in rules {
            u.apply(r.as_bytes(), false).expect("rule");
        }
        u
    }

    #[test]
    fn the_default_user_is_described_as_redis_describes_it() {
        let acl = Acl::new(false);
        assert_eq!(acl.default_user().describe(), b"on nopass ~* &* +@all");
        assert!(acl.unrestricted_default());
        assert!(!acl.auth_required());
    }

    #[test]
    fn a_new_user_is_off_with_no_permissions() {
        assert_eq!(user(&[]).describe(), b"off resetchannels -@all");
    }

    #[test]
    fn categories_are_described_back() {
        let u = user(&["+@all", "-@string"]);
        assert_eq!(String::from_utf8_lossy(&u.describe()), "off resetchannels +@all -@string");
        let u = user(&["+@hash", "~x", "%R~y", "%W~y"]);
        assert_eq!(String::from_utf8_lossy(&u.describe()), "off ~x ~y resetchannels -@all +@hash");
    }

    #[test]
    fn passwords_are_stored_as_sha256() {
        let u = user(&[">foo"]);
        assert_eq!(
            u.passwords,
            vec!["2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae".to_string()]
        );
    }

    #[test]
    fn key_patterns_need_the_permission_the_key_spec_asks_for() {
        let u = user(&["+@all", "%R~r*", "%W~w*"]);
        let get = Registry::get().lookup(b"get").expect("get");
        let set = Registry::get().lookup(b"set").expect("set");
        let b = |s: &str| Bytes::copy_from_slice(s.as_bytes());
        assert!(u.check(get, &[b("get"), b("r1")]).is_ok());
        assert_eq!(u.check(get, &[b("get"), b("w1")]), Err(Denial::Key(1)));
        assert!(u.check(set, &[b("set"), b("w1"), b("v")]).is_ok());
        assert_eq!(u.check(set, &[b("set"), b("r1"), b("v")]), Err(Denial::Key(1)));
    }

    #[test]
    fn rules_may_name_commands_redis_defines_and_keylock_does_not_serve() {
        let u = user(&["+@all", "-migrate", "-cluster|info"]);
        assert_eq!(
            String::from_utf8_lossy(&u.describe()),
            "off resetchannels +@all -cluster|info -migrate"
        );
        assert!(
            Catalog::get()
                .in_category(category(b"dangerous").expect("category"))
                .contains(&"migrate")
        );
        assert!(
            !Catalog::get()
                .in_category(category(b"admin").expect("category"))
                .contains(&"keylock")
        );
    }

    fn entry(object: &str, ctime_ms: u64) -> LogEntry {
        LogEntry {
            count: 1,
            reason: Reason::Key,
            context: Context::Toplevel,
            object: Bytes::from(object.to_string()),
            username: Bytes::from_static(b"u"),
            ctime_ms,
            client_info: String::new(),
        }
    }

    #[test]
    fn similar_log_entries_within_a_minute_are_counted_together() {
        let mut acl = Acl::default();
        acl.log_denial(entry("k", 0), 128);
        acl.log_denial(entry("other", 10), 128);
        acl.log_denial(entry("k", 60_000), 128);
        assert_eq!(acl.log.len(), 2);
        assert_eq!((acl.log[0].object.as_ref(), acl.log[0].count), (b"k".as_slice(), 2));
        acl.log_denial(entry("k", 120_001), 128);
        assert_eq!(acl.log.len(), 3);
        acl.log_denial(entry("x", 120_002), 2);
        assert_eq!(acl.log.len(), 2);
    }

    #[test]
    fn selectors_merge_across_arguments() {
        let args: Vec<Bytes> = ["on", "(~x", "+get)", ">p"].iter().map(|s| Bytes::from(s.to_string())).collect();
        let merged = merge_selectors(&args).expect("balanced");
        assert_eq!(merged[1].as_ref(), b"(~x +get)");
        assert_eq!(merge_selectors(&args[..2]), Err(1));
    }
}
