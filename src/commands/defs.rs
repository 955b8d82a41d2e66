//! Redis's own description of its commands, as keylock reports it.
//!
//! COMMAND, COMMAND INFO, COMMAND DOCS and COMMAND LIST FILTERBY ACLCAT
//! read what Redis 7.0.15 says about a command (flags, ACL categories,
//! tips, key specs, docs) from [`super::redis_defs`], which
//! `tools/gen_command_defs.py` generates from Redis's `src/commands/*.json`;
//! nothing here is copied by hand. The command table (`table.rs`) keeps
//! what is keylock's: names, arities, handlers and the flags the engine
//! acts on, which its tests hold equal to these definitions. keylock's own
//! commands (the KEYLOCK container, and subcommands of later Redis
//! versions) have no definition here and are described by their rows.

use bytes::Bytes;

use super::args::c_keyword;

use super::redis_defs::DEFS;
use super::table::{Arg, BeginSearch, FindKeys, KeySpec, key_flag};
use crate::numfmt::atoi;

/// One command or subcommand as Redis defines it (its `redisCommand`
/// after `populateCommandStructure`).
#[derive(Debug)]
pub struct CommandDef {
    /// Full name: `get`, `client|list`.
    pub name: &'static str,
    /// COMMAND DOCS' string fields; an empty one is not listed.
    pub summary: &'static str,
    pub since: &'static str,
    pub group: &'static str,
    pub complexity: &'static str,
    /// `deprecated`, `syscmd`, in COMMAND DOCS' order.
    pub doc_flags: &'static [&'static str],
    pub deprecated_since: &'static str,
    pub replaced_by: &'static str,
    /// (version, change); not listed when empty.
    pub history: &'static [(&'static str, &'static str)],
    pub tips: &'static [&'static str],
    pub arity: i32,
    /// Redis's command flags as `table::flag` bits, `movablekeys` included.
    pub flags: u32,
    /// With the implicit ones, in Redis's order.
    pub acl_categories: &'static [&'static str],
    /// COMMAND INFO's (first, last, step), derived from the key specs.
    pub legacy_keys: (i32, i32, i32),
    pub key_specs: &'static [KeySpec],
    /// Redis has a command-specific key finder for this command (its
    /// `getkeys_proc`), used when the key specs cannot tell.
    pub getkeys_proc: bool,
    pub arguments: &'static [Arg],
}

/// Redis's definition of the command `full_name` (`container|sub` for a
/// subcommand, lowercase), if Redis has one.
pub fn lookup(full_name: &str) -> Option<&'static CommandDef> {
    DEFS.binary_search_by(|d| d.name.cmp(full_name)).ok().map(|i| &DEFS[i])
}

impl CommandDef {
    /// Whether COMMAND GETKEYS may find keys in this command (Redis's
    /// `doesCommandHaveKeys`).
    pub fn has_keys(&self) -> bool {
        self.getkeys_proc || self.key_specs.iter().any(|k| k.flags & key_flag::NOT_KEY == 0)
    }

    /// The positions of the keys in `argv` (the command's name at 0) with
    /// their key-spec flags, as Redis's `getKeysFromCommandWithSpecs`
    /// finds them: by the key specs when they are reliable, else by the
    /// command's own key finder.
    pub fn keys_in(&self, argv: &[Bytes]) -> Vec<(usize, u16)> {
        let reliable = self.key_specs.iter().any(|k| k.flags & key_flag::NOT_KEY == 0)
            && self.key_specs.iter().all(|k| k.flags & key_flag::VARIABLE_FLAGS == 0);
        if reliable && let Some(keys) = self.keys_by_specs(argv) {
            return keys;
        }
        if self.getkeys_proc {
            getkeys_proc(self.name, argv)
        } else {
            Vec::new()
        }
    }

    /// Redis's `getKeysUsingKeySpecs`; None where a spec cannot tell
    /// (unknown, incomplete, or not matching the arguments).
    fn keys_by_specs(&self, argv: &[Bytes]) -> Option<Vec<(usize, u16)>> {
        let argc = argv.len() as i64;
        let mut keys = Vec::new();
        for spec in self.key_specs {
            if spec.flags & key_flag::NOT_KEY != 0 {
                continue;
            }
            let first = match spec.begin_search {
                BeginSearch::Index(pos) => pos as i64,
                BeginSearch::Keyword { keyword, startfrom } => {
                    let start = if startfrom > 0 { startfrom as i64 } else { argc + startfrom as i64 };
                    let end = if startfrom > 0 { argc - 1 } else { 1 };
                    let mut i = start;
                    let mut found = 0;
                    while i != end {
                        if i >= argc || i < 1 {
                            break;
                        }
                        if argv[i as usize].eq_ignore_ascii_case(keyword.as_bytes()) {
                            found = i + 1;
                            break;
                        }
                        i += if start <= end { 1 } else { -1 };
                    }
                    if found == 0 {
                        continue;
                    }
                    found
                }
                BeginSearch::Unknown => return None,
            };
            let (first, last, step) = match spec.find_keys {
                FindKeys::Range { lastkey, keystep, limit } => {
                    let last = if lastkey >= 0 {
                        first + lastkey as i64
                    } else if limit == 0 {
                        argc + lastkey as i64
                    } else {
                        first + ((argc - first) / limit as i64 + lastkey as i64)
                    };
                    (first, last, keystep as i64)
                }
                FindKeys::Keynum {
                    keynumidx,
                    firstkey,
                    keystep,
                } => {
                    if keynumidx as i64 >= argc {
                        return None;
                    }
                    let count = crate::numfmt::parse_i64(argv.get((first + keynumidx as i64) as usize)?)?;
                    if count < 0 {
                        return None;
                    }
                    let first = first + firstkey as i64;
                    (first, first + count - 1, keystep as i64)
                }
                FindKeys::Unknown => return None,
            };
            if last >= argc || last < first || first >= argc {
                return None;
            }
            let mut i = first;
            while i <= last {
                keys.push((i as usize, spec.flags));
                i += step.max(1);
            }
            if spec.flags & key_flag::INCOMPLETE != 0 {
                return None;
            }
        }
        Some(keys)
    }
}

/// The command-specific key finders of Redis (`*GetKeys` in db.c) for
/// the commands whose key specs cannot always tell, with the flags each
/// gives its keys.
pub(crate) fn getkeys_proc(name: &str, argv: &[Bytes]) -> Vec<(usize, u16)> {
    use key_flag::{ACCESS, OW, RO, RW, UPDATE};
    // genericGetKeys(store, count, first, step): the key count at `count`
    // read with atoi, the keys from `first`, the stored-to key last.
    let generic = |store: usize, count: usize, first: usize| {
        let num = argv.get(count).map_or(0, |c| i64::from(atoi(c)));
        if num < 1 || num > (argv.len() as i64 - first as i64) {
            return Vec::new();
        }
        let mut keys: Vec<(usize, u16)> = (first..first + num as usize).map(|i| (i, 0)).collect();
        if store > 0 {
            keys.push((store, 0));
        }
        keys
    };
    match name {
        "zunionstore" | "zinterstore" | "zdiffstore" => generic(1, 2, 3),
        "zunion" | "zinter" | "zdiff" | "zintercard" | "sintercard" | "lmpop" | "zmpop" => generic(0, 1, 2),
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" | "blmpop" | "bzmpop" => generic(0, 2, 3),
        "set" => {
            let get = argv.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"get"));
            vec![(1, if get { RW | ACCESS | UPDATE } else { OW | UPDATE })]
        }
        "bitfield" => {
            // Read-only when only GET and OVERFLOW follow, well formed.
            let mut readonly = true;
            let mut i = 2;
            while i < argv.len() {
                let (arg, rest) = (&argv[i], argv.len() - i - 1);
                if arg.eq_ignore_ascii_case(b"get") && rest >= 2 {
                    i += 2;
                } else if (arg.eq_ignore_ascii_case(b"set") || arg.eq_ignore_ascii_case(b"incrby")) && rest >= 3 {
                    readonly = false;
                    break;
                } else if arg.eq_ignore_ascii_case(b"overflow") && rest >= 1 {
                    i += 1;
                } else {
                    readonly = false;
                    break;
                }
                i += 1;
            }
            vec![(1, if readonly { RO | ACCESS } else { RW | ACCESS | UPDATE })]
        }
        "sort_ro" => vec![(1, RO | ACCESS)],
        "sort" => {
            let mut keys = vec![(1, RO | ACCESS)];
            let mut store = None;
            let mut i = 2;
            while i < argv.len() {
                let arg = &argv[i];
                if c_keyword(arg, "limit") {
                    i += 2;
                } else if c_keyword(arg, "get") || c_keyword(arg, "by") {
                    i += 1;
                } else if c_keyword(arg, "store") && i + 1 < argv.len() {
                    store = Some(i + 1);
                }
                i += 1;
            }
            keys.extend(store.map(|at| (at, OW | UPDATE)));
            keys
        }
        "georadius" | "georadiusbymember" => {
            // The source, and the last STORE / STOREDIST key.
            let mut stored = None;
            let mut i = 5;
            while i < argv.len() {
                let arg = &argv[i];
                if (c_keyword(arg, "store") || c_keyword(arg, "storedist")) && i + 1 < argv.len() {
                    stored = Some(i + 1);
                    i += 1;
                }
                i += 1;
            }
            std::iter::once((1, 0)).chain(stored.map(|at| (at, 0))).collect()
        }
        "xread" | "xreadgroup" => {
            // The keys after STREAMS, one per ID; nothing when malformed.
            let mut streams = None;
            let mut i = 1;
            while i < argv.len() {
                let arg = &argv[i];
                if c_keyword(arg, "block") || c_keyword(arg, "count") {
                    i += 1;
                } else if c_keyword(arg, "group") {
                    i += 2;
                } else if c_keyword(arg, "streams") {
                    streams = Some(i);
                    break;
                } else if !c_keyword(arg, "noack") {
                    break;
                }
                i += 1;
            }
            let Some(at) = streams else { return Vec::new() };
            let rest = argv.len() - at - 1;
            if rest == 0 || !rest.is_multiple_of(2) {
                return Vec::new();
            }
            (at + 1..at + 1 + rest / 2).map(|i| (i, 0)).collect()
        }
        "migrate" => {
            // The key at 3, or those after KEYS (with an empty key at 3);
            // AUTH takes one argument, AUTH2 two (ACL DRYRUN names it).
            if argv.len() < 4 {
                return Vec::new();
            }
            let (mut first, mut num) = (3, 1);
            if argv.len() > 6 {
                let mut i = 6;
                while i < argv.len() {
                    let arg = &argv[i];
                    if c_keyword(arg, "keys") {
                        if !argv[3].is_empty() {
                            return Vec::new();
                        }
                        first = i + 1;
                        num = argv.len() - first;
                        break;
                    } else if c_keyword(arg, "auth") {
                        i += 1;
                    } else if c_keyword(arg, "auth2") {
                        i += 2;
                    }
                    i += 1;
                }
            }
            (first..first + num).map(|i| (i, RW | ACCESS | key_flag::DELETE)).collect()
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_definitions_are_sorted_for_binary_search() {
        assert!(DEFS.windows(2).all(|w| w[0].name < w[1].name));
    }

    #[test]
    fn subcommands_are_found_by_their_full_name() {
        assert_eq!(lookup("client|list").map(|d| d.arity), Some(-2));
        assert_eq!(lookup("get").map(|d| d.summary), Some("Get the value of a key"));
        assert!(lookup("keylock").is_none());
    }
}
