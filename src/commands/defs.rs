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

use super::redis_defs::DEFS;
use super::table::{Arg, KeySpec};

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
