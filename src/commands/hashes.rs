//! hashes commands (in progress).

use super::table::CommandSpec;

pub const COMMANDS: &[CommandSpec] = &[];
