//! `redis.call` / `redis.pcall`: a command from a script, checked and run
//! as Redis's `scriptCall` does, through the same `State::call` as a
//! client's command.
//!
//! The checks live in [`resolve`], shared with native scripts
//! (`scripting/native`), so a command refused to a Lua script is refused
//! to its native twin with the same text, before anything runs.

use std::cell::Cell;

use bytes::Bytes;

use crate::commands::table::{Command, Registry, flag};
use crate::engine::{Client, State};

/// What `redis.call` works with during one run.
pub struct CallContext<'a> {
    pub state: &'a mut State,
    /// The script's own client: the caller's database, `[0 lua]` in MONITOR.
    pub client: &'a mut Client,
    /// What the run may not do (write, grow memory, write without replicas).
    pub limits: ScriptLimits,
    /// The VM's per-run state: the protocol `redis.setresp` chose, the
    /// PRNG, whether the script wrote or is being stopped.
    pub(crate) runtime: &'a super::Runtime,
}

/// The error texts `redis.call` raises before running anything.
pub const NO_ARGUMENTS: &str = "ERR Please specify at least one argument for this redis lib call";
pub const BAD_ARGUMENT: &str = "ERR Lua redis lib command arguments must be strings or integers";
pub const UNKNOWN_COMMAND: &str = "ERR Unknown Redis command called from script";
pub const WRONG_ARITY: &str = "ERR Wrong number of args calling Redis command from script";
pub const NOT_ALLOWED: &str = "ERR This Redis command is not allowed from script";
pub const WRITE_IN_READ_ONLY: &str = "ERR Write commands are not allowed from read-only scripts.";

/// The server state a script's commands are checked against, taken when
/// the run starts (Redis's run context flags and `pre_command_oom_state`).
#[derive(Debug, Clone, Copy, Default)]
pub struct ScriptLimits {
    /// EVAL_RO, EVALSHA_RO or a `no-writes` script.
    pub read_only: bool,
    /// Memory was past `maxmemory` when the client's command started and
    /// the script did not declare `allow-oom`: its first write is refused.
    pub deny_oom: bool,
    /// Writes may go ahead as far as `min-replicas-to-write` is concerned.
    pub replicas_ok: bool,
}

impl ScriptLimits {
    pub fn of(state: &State, read_only: bool, allow_oom: bool) -> ScriptLimits {
        ScriptLimits {
            read_only,
            deny_oom: state.runtime.maxmemory > 0 && state.pre_command_oom && !allow_oom,
            replicas_ok: state.enough_good_replicas(),
        }
    }
}

/// Why a script's command was refused: the error text, and whether Redis
/// flags it `ignore_error_stats_update` (every refusal except a bad
/// argument list).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    pub text: &'static str,
    pub flagged: bool,
    /// The refused command's `commandstats` row, when it exists.
    pub command: Option<usize>,
}

impl Refusal {
    fn flagged(text: &'static str, command: Option<&Command>) -> Refusal {
        Refusal {
            text,
            flagged: true,
            command: command.map(|c| c.stat_index),
        }
    }

    /// Books a refusal as Redis's `scriptCall` does (`afterErrorReply` and
    /// `incrCommandStatsOnError(cmd, REJECTED)`): the error counts in
    /// errorstats and `total_error_replies`, the command's
    /// `rejected_calls` grows. Argument errors, found before the command
    /// is looked at (not flagged), count nothing.
    pub fn book(&self, stats: &mut crate::engine::stats::Stats) {
        if !self.flagged {
            return;
        }
        stats.count_error_text(self.text.as_bytes());
        if let Some(index) = self.command {
            stats.cmd[index].rejected_calls += 1;
        }
        stats.prev_error_replies = stats.total_error_replies;
    }
}

/// Redis's `scriptCall` checks, in its order: the command exists (and its
/// subcommand), the arity, scripts may run it, and a read-only script may
/// not write. Marks the run as having written when the command is a write.
pub fn resolve(argv: &[Bytes], limits: &ScriptLimits, wrote: &Cell<bool>) -> Result<&'static Command, Refusal> {
    let registry = Registry::get();
    let Some(mut cmd) = registry.lookup(&argv[0]) else {
        return Err(Refusal::flagged(UNKNOWN_COMMAND, None));
    };
    if cmd.spec.handler.is_none() && argv.len() > 1 {
        match cmd.subcommand(&argv[1]) {
            Some(sub) => cmd = sub,
            None => return Err(Refusal::flagged(UNKNOWN_COMMAND, None)),
        }
    }
    if !cmd.spec.arity_ok(argv.len()) {
        return Err(Refusal::flagged(WRONG_ARITY, Some(cmd)));
    }
    if cmd.spec.has(flag::NOSCRIPT) {
        return Err(Refusal::flagged(NOT_ALLOWED, Some(cmd)));
    }
    // Redis refuses anything that could propagate (PUBLISH too) in a read-only script.
    if limits.read_only && cmd.spec.has(flag::WRITE | flag::MAY_REPLICATE) {
        return Err(Refusal::flagged(WRITE_IN_READ_ONLY, Some(cmd)));
    }
    // Server state stops a script's first write only: once it has
    // written, it must be able to finish.
    if cmd.spec.has(flag::WRITE) && !wrote.get() && !limits.replicas_ok {
        return Err(Refusal::flagged(crate::engine::NOREPLICAS, Some(cmd)));
    }
    if limits.deny_oom && !wrote.get() && cmd.spec.has(flag::DENYOOM) {
        return Err(Refusal::flagged(crate::engine::OOM, Some(cmd)));
    }
    if cmd.spec.has(flag::WRITE) {
        wrote.set(true);
    }
    Ok(cmd)
}

thread_local! {
    /// The run in progress, as `redis.call` finds it. A thread-local rather
    /// than Lua app data: setting app data allocates, and every lookup
    /// hashes; this is two pointer stores per script and one load per call.
    static ACTIVE_RUN: Cell<*mut CallContext<'static>> = const { Cell::new(std::ptr::null_mut()) };
}

/// Runs `f` (the script) with `cx` reachable from `redis.call`.
///
/// The context lives on the caller's stack; Lua only reaches it through
/// the pointer while `f` runs, and the previous pointer (null outside a
/// run) is restored before this returns, so no callback can see it
/// afterwards. This avoids building a scoped closure for every script run.
pub fn with_active_run<R>(cx: &mut CallContext, f: impl FnOnce() -> R) -> R {
    /// Puts the previous run back however `f` ends, panics included.
    struct Restore(*mut CallContext<'static>);
    impl Drop for Restore {
        fn drop(&mut self) {
            ACTIVE_RUN.with(|a| a.set(self.0));
        }
    }
    let ptr: *mut CallContext<'static> = std::ptr::from_mut(cx).cast();
    let _restore = Restore(ACTIVE_RUN.with(|a| a.replace(ptr)));
    f()
}

/// The run in progress, if a script is running.
pub(crate) fn active_run<'a>() -> Option<&'a mut CallContext<'static>> {
    let ptr = ACTIVE_RUN.with(Cell::get);
    // SAFETY: the pointer was set by `with_active_run` from a live `&mut
    // CallContext` that outlives the script call and is only used on the
    // engine thread, one command at a time: a command run from a script
    // never re-enters Lua, so no second reference exists.
    (!ptr.is_null()).then(|| unsafe { &mut *ptr })
}
