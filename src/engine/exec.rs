//! The command pipeline: every command any caller runs is looked up,
//! checked and booked here, and nowhere else.
//!
//! A command line reaches the engine from four places, each with the
//! checks Redis makes for it, in Redis's order:
//!
//! - a client ([`for_client`], Redis's `processCommand`): lookup, arity,
//!   the test controls' protection, authentication, commands a transaction
//!   may not queue, the ACL rules of the client's user, `maxmemory`,
//!   `min-replicas-to-write`, MONITOR and pub/sub mode;
//! - a script, Lua or native ([`for_script`], `scriptCall`): lookup and
//!   arity with the script texts, commands scripts may not run, the ACL
//!   rules of the script's caller, writes in a read-only run, and the
//!   server state that stops a first write;
//! - a client's command while a script runs past `busy-reply-threshold`
//!   ([`State::serve_while_busy`], Redis's `processEventsWhileBlocked`):
//!   the same checks as any client's, where the BUSY answer is one of
//!   them, so that the commands flagged `allow-busy` (AUTH, HELLO, MULTI,
//!   WATCH, SCRIPT KILL, SHUTDOWN…) run as they would at any time;
//! - EXEC ([`queued`]): commands checked when they were queued, and the
//!   ACL rules again, as they may have changed since.
//!
//! A client's command may also meet an injected fault (KEYLOCK FAULT, see
//! [`super::faults`]) once it passed Redis's checks: an error refusal, or
//! its connection closed before or after it runs.
//!
//! A refused command is a [`Refusal`], booked by [`Refusal::book`] (error
//! statistics and the command's `rejected_calls`). A command that runs goes
//! through [`State::call`]: its handler inside the panic boundary, then
//! [`State::book_run`], which books what every executed command books
//! (calls and time, `total_commands_processed`, MONITOR); the direct runs
//! of the lock scripts book their steps with the same function.
//!
//! Every resolution that leads to an execution is counted
//! (`Stats::resolutions`); [`State::book_run`] counts executions
//! (`total_commands_processed`). A test proves the two stay equal: nothing
//! executes without passing through here.

use bytes::Bytes;

use super::effects;
use super::faults::CommandFault;
use super::{Client, NOREPLICAS, OOM, Scripts, State, slowlog};
use crate::acl::{Context, Denial};
use crate::commands::Ctx;
use crate::commands::table::{Command, Registry, Renames, flag};
use crate::error::CmdError;
use crate::reply::Reply;
use crate::scripting::call::ScriptLimits;

/// The error texts a script's command is refused with (`scriptCall`).
pub const UNKNOWN_COMMAND: &str = "ERR Unknown Redis command called from script";
pub const WRONG_ARITY: &str = "ERR Wrong number of args calling Redis command from script";
pub const NOT_ALLOWED: &str = "ERR This Redis command is not allowed from script";
/// A write on a Raft shard member that does not lead (Redis's replica error).
pub const RAFT_READONLY: &str = "READONLY You can't write against a read only replica.";
/// A shard's leader that has not heard from a majority within its read
/// lease (the text of Redis's replica that lost its master, for the
/// leader that may have lost its shard).
pub const RAFT_LEASE_LAPSED: &str =
    "MASTERDOWN The shard's leader has not heard from a majority of its members lately: its data may be stale";
pub const WRITE_IN_READ_ONLY: &str = "ERR Write commands are not allowed from read-only scripts.";
/// A script's command without the `stale` flag on a replica whose link is
/// down, with `replica-serve-stale-data no`.
pub const STALE_IN_SCRIPT: &str = "ERR Can not execute the command on a stale replica";
/// Redis's `slowevalerr`: a client's command while an EVAL is busy.
/// What commands not flagged `loading` get while the dataset loads.
pub const LOADING: &str = "LOADING Redis is loading the dataset in memory";
pub const BUSY: &str = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
/// Redis's `slowscripterr`: a client's command while a function is busy.
pub const BUSY_FUNCTION: &str = "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";
/// SCRIPT KILL, FUNCTION KILL or SHUTDOWN (without NOSAVE) while a busy
/// script has written.
pub const UNKILLABLE: &str = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";

/// What a command line names.
pub enum Lookup {
    /// The command, or the subcommand of a container (a container named
    /// alone is returned as is: its arity refuses it).
    Found(&'static Command),
    Unknown,
    /// A container whose subcommand does not exist.
    UnknownSubcommand(&'static Command),
}

/// Finds the command `argv` names, under the names this server knows
/// commands by (`rename-command`). The one place commands are looked up
/// for running them.
pub fn lookup(names: &Renames, argv: &[Bytes]) -> Lookup {
    let Some(cmd) = names.lookup(&argv[0]) else {
        return Lookup::Unknown;
    };
    if cmd.subcommands.is_empty() || argv.len() < 2 {
        return Lookup::Found(cmd);
    }
    match cmd.subcommand(&argv[1]) {
        Some(sub) => Lookup::Found(sub),
        None => Lookup::UnknownSubcommand(cmd),
    }
}

impl Lookup {
    /// The full name of the command found, `container|sub` for a
    /// subcommand, `<unknown>` for none (Redis's `lastcmd->fullname`, for
    /// logs).
    pub fn full_name(&self) -> &'static str {
        match self {
            Lookup::Found(cmd) => cmd.full_name.as_str(),
            _ => "<unknown>",
        }
    }
}

/// A command refused before it ran.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub error: CmdError,
    /// The refused command's `commandstats` row, when it exists.
    pub command: Option<usize>,
    /// A transaction being queued is flagged: its EXEC aborts.
    pub aborts_multi: bool,
    /// Not an error: the connection is to close without a reply (a
    /// DISCONNECT BEFORE fault); nothing is booked.
    pub disconnect: bool,
    /// Not an error: CLIENT PAUSE holds the command until it ends.
    pub postpone: bool,
    /// EXEC redirected in cluster mode: the transaction is discarded and
    /// the error is the redirection itself.
    pub discards_multi: bool,
}

impl Refusal {
    fn of(error: CmdError, command: Option<&Command>) -> Refusal {
        Refusal {
            error,
            command: command.map(|c| c.stat_index),
            aborts_multi: true,
            disconnect: false,
            postpone: false,
            discards_multi: false,
        }
    }

    /// Books the refusal as Redis does (`rejectCommand`, or `scriptCall`'s
    /// `afterErrorReply` + `incrCommandStatsOnError(cmd, REJECTED)`): the
    /// error counts in errorstats and `total_error_replies`, the command's
    /// `rejected_calls` grows.
    pub fn book(&self, stats: &mut super::stats::Stats) {
        stats.count_error(&self.error);
        if let Some(index) = self.command {
            stats.cmd[index].rejected_calls += 1;
        }
        stats.prev_error_replies = stats.total_error_replies;
    }
}

/// Which option protects a protected command, and the name its refusal
/// gives it: Redis's `enable-debug-command` for DEBUG and
/// `enable-module-command` for MODULE LOAD/LOADEX/UNLOAD (named as Redis
/// names them), keylock's `enable-test-commands` for its test controls.
fn protection(cmd: &Command) -> (String, &'static str) {
    if cmd.full_name == "debug" {
        ("DEBUG".to_string(), "enable-debug-command")
    } else if cmd.full_name.starts_with("module|") {
        ("MODULE".to_string(), "enable-module-command")
    } else {
        (cmd.full_name.replace('|', " ").to_ascii_uppercase(), "enable-test-commands")
    }
}

/// The checks of Redis's `processCommand` for a client's command, in its
/// order. Refusals are booked by the caller ([`dispatch`]). `scripts` is
/// None while a script runs (its declared flags are then not needed: no
/// script can start).
pub fn for_client(state: &mut State, scripts: Option<&Scripts>, client: &Client, argv: &[Bytes]) -> Result<&'static Command, Refusal> {
    let cmd = resolve(&state.renames, argv)?;
    if cmd.spec.has(flag::PROTECTED) {
        let (name, option) = protection(cmd);
        if !state.allows_protected(option, client) {
            return Err(Refusal::of(
                CmdError::err(format!(
                    "{name} command not allowed. If the {option} option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server."
                )),
                Some(cmd),
            ));
        }
    }
    if !client.authenticated && state.acl.auth_required() && !cmd.spec.has(flag::NO_AUTH) {
        return Err(Refusal::of(CmdError::noauth(), Some(cmd)));
    }
    if client.multi.is_some() && cmd.spec.has(flag::NO_MULTI) {
        return Err(Refusal::of(CmdError::err("Command not allowed inside a transaction"), Some(cmd)));
    }
    // The master's stream is run whatever its user could run, memory,
    // disk and replicas (Redis's `mustObeyClient`).
    if client.is_master {
        return Ok(cmd);
    }
    if let Some(denial) = acl_denial(state, client, cmd, argv) {
        let context = if client.multi.is_some() {
            Context::Multi
        } else {
            Context::Toplevel
        };
        log_denial(state, client, denial, context, cmd, argv);
        return Err(Refusal::of(CmdError::new(denial.error(cmd)), Some(cmd)));
    }
    if state.cluster_enabled()
        && !client.replaying
        && let Err(redirect) = state.cluster_route(scripts, client, cmd, argv)
    {
        // A redirected EXEC discards the transaction and says where to
        // go, without EXECABORT (Redis's `discardTransaction`).
        return Err(Refusal {
            discards_multi: cmd.full_name == "exec",
            ..Refusal::of(CmdError::new_bytes(redirect.client_error().into_bytes()), Some(cmd))
        });
    }
    if state.runtime.maxmemory > 0 || !state.enough_good_replicas() {
        let flags = state.command_flags(scripts, client, cmd, argv);
        // Memory is not judged while a script is busy (Redis skips it).
        if state.runtime.maxmemory > 0 && state.busy.is_none() {
            // Keys are evicted first, as the policy allows.
            let oom = !state.perform_evictions();
            state.pre_command_oom = oom;
            // Queuing in MULTI may grow memory without bound too.
            let queuing = client.multi.is_some() && !matches!(cmd.full_name.as_str(), "exec" | "discard" | "quit" | "reset");
            if oom && (flags & flag::DENYOOM != 0 || queuing) {
                return Err(Refusal::of(CmdError::new(OOM), Some(cmd)));
            }
        }
    }
    if let Some(disk) = state.disk_error() {
        // Writes (and PING, so that a monitoring probe notices) are
        // refused while the data cannot be persisted.
        let flags = state.command_flags(scripts, client, cmd, argv);
        if flags & flag::WRITE != 0 || cmd.full_name == "ping" {
            return Err(Refusal::of(CmdError::new(disk.message()), Some(cmd)));
        }
    }
    if !state.enough_good_replicas() && state.command_flags(scripts, client, cmd, argv) & flag::WRITE != 0 {
        return Err(Refusal::of(CmdError::new(NOREPLICAS), Some(cmd)));
    }
    // A read-only replica, or a shard member that does not lead.
    if !state.accepts_writes() && !client.replaying && state.command_flags(scripts, client, cmd, argv) & flag::WRITE != 0 {
        return Err(Refusal::of(CmdError::new(RAFT_READONLY), Some(cmd)));
    }
    // A leader answers from its dataset only while no other member can
    // have been elected: a write that writes waits for its commit, but
    // one that finds nothing to do (SET NX on a key it holds, a script
    // that returns early) answers from what the leader has.
    if state.raft_lease_lapsed() && !client.replaying {
        let flags = state.command_flags(scripts, client, cmd, argv);
        let script = matches!(
            cmd.full_name.as_str(),
            "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro"
        );
        if flags & (flag::READONLY | flag::WRITE) != 0 || script {
            return Err(Refusal::of(CmdError::new(RAFT_LEASE_LAPSED), Some(cmd)));
        }
    }
    if (client.monitor || client.is_replica) && cmd.spec.has(flag::WRITE | flag::READONLY | flag::MAY_REPLICATE) {
        // A replica's connection, and a MONITOR one (Redis treats it like
        // a replica).
        return Err(Refusal::of(CmdError::err("Replica can't interact with the keyspace"), Some(cmd)));
    }
    if client.resp == 2 && client.in_pubsub_mode() && !cmd.spec.has(flag::SUBSCRIBED_OK) {
        return Err(Refusal {
            aborts_multi: false,
            ..Refusal::of(
                CmdError::err(format!(
                    "Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                    cmd.full_name
                )),
                Some(cmd),
            )
        });
    }
    // A replica whose link is down, with `replica-serve-stale-data no`.
    if state.serving_stale_refused() && !super::allowed_stale(scripts, client, &state.renames, cmd, argv) {
        return Err(Refusal::of(
            CmdError::new("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."),
            Some(cmd),
        ));
    }
    if state.loading.is_some() && !cmd.spec.has(flag::LOADING) {
        return Err(Refusal::of(CmdError::new(LOADING), Some(cmd)));
    }
    if cmd.def.is_some_and(|d| d.flags & flag::NO_ASYNC_LOADING != 0) && state.async_loading() {
        return Err(Refusal::of(CmdError::new(LOADING), Some(cmd)));
    }
    if let Some(busy) = &state.busy
        && !cmd.spec.has(flag::ALLOW_BUSY)
    {
        // A script runs past busy-reply-threshold.
        return Err(Refusal::of(CmdError::new(busy.busy_error()), Some(cmd)));
    }
    // Replicas are never paused (their ACKs go on).
    if !client.is_replica
        && let Some(all) = state.paused()
        && (all || state.command_flags(scripts, client, cmd, argv) & (flag::WRITE | flag::MAY_REPLICATE) != 0)
    {
        // Redis's CLIENT PAUSE check, after every refusal and before
        // MULTI queues the command.
        return Err(Refusal {
            postpone: true,
            aborts_multi: false,
            ..Refusal::of(CmdError::new(""), None)
        });
    }
    if !state.faults.is_empty() {
        state.fault_caller = client.name.clone();
        match injected_fault(state, cmd, argv) {
            Some(CommandFault::Error(text)) => return Err(Refusal::of(CmdError::new_bytes(text.to_vec()), Some(cmd))),
            Some(CommandFault::DisconnectBefore) => {
                return Err(Refusal {
                    disconnect: true,
                    aborts_multi: false,
                    ..Refusal::of(CmdError::new(""), None)
                });
            }
            Some(CommandFault::DisconnectAfter) => state.disconnect_after = true,
            Some(CommandFault::Delay(ms)) => state.delay_reply = Some(ms),
            None => {}
        }
    }
    Ok(cmd)
}

/// Everything Redis's `processCommand` checks before running a command.
pub fn dispatch(state: &mut State, scripts: Option<&mut Scripts>, client: &mut Client, argv: Vec<Bytes>) -> Reply {
    // A Raft shard member also answers as a sentinel of its shard.
    #[cfg(feature = "raft")]
    if state.raft.is_some()
        && argv[0].eq_ignore_ascii_case(b"sentinel")
        && let Some(reply) = crate::commands::sentinel::sentinel(state, &argv)
    {
        return reply;
    }
    // The lookup is made only for CLIENT commands, and only once CLIENT
    // CACHING is in force (rare): the name check is all others pay.
    let named_client = argv[0].eq_ignore_ascii_case(b"client");
    let client_argv = named_client.then(|| argv.clone());
    let asking = argv[0].eq_ignore_ascii_case(b"asking");
    // On a writable replica the keys a client's command gives a deadline
    // are the replica's to expire.
    let keep_deadlines = state.keeps_replica_deadlines(client);
    if keep_deadlines {
        state.key_events.keep_deadlines(true);
    }
    let reply = checked_dispatch(state, scripts, client, argv);
    if keep_deadlines {
        state.key_events.keep_deadlines(false);
        state.remember_replica_deadlines();
    }
    // Redis's `resetClient`: ASKING holds for the next command only
    // (or the transaction it opens).
    if client.cluster_asking && !asking && client.multi.is_none() {
        client.cluster_asking = false;
    }
    // Redis's `resetClient`: CLIENT CACHING holds for the next command (or
    // transaction) only; CLIENT commands leave it.
    if let Some(t) = client.tracking.as_deref_mut()
        && t.caching
        && client.multi.is_none()
        && !client_argv.is_some_and(|argv| matches!(lookup(&state.renames, &argv), Lookup::Found(_)))
    {
        t.caching = false;
    }
    reply
}

fn checked_dispatch(state: &mut State, scripts: Option<&mut Scripts>, client: &mut Client, argv: Vec<Bytes>) -> Reply {
    match for_client(state, scripts.as_deref(), client, &argv) {
        Ok(cmd) => {
            if state.tracking.clients > 0 {
                // Redis's processCommand keeps the table within
                // `tracking-table-max-keys` before each command.
                state.limit_tracking_table(Some(client));
            }
            if let Some(multi) = client.multi.as_mut()
                && !cmd.spec.has(flag::TX_CONTROL)
            {
                multi.queued.push(argv);
                return Reply::status("QUEUED");
            }
            to_run(state);
            if std::mem::take(&mut state.eviction.before_command) {
                // Redis tells of keys evicted to make room before the
                // command runs: the client's own invalidations and events
                // come ahead of its reply.
                state.tracking.ahead_of_reply = true;
                state.publish_key_events(client);
                state.tracking.ahead_of_reply = false;
            }
            state.call(scripts, client, cmd, &argv)
        }
        Err(refusal) if refusal.postpone => {
            // Held by CLIENT PAUSE: it runs again once the pause ends.
            state.postpone(client, argv);
            Reply::Many(Vec::new())
        }
        Err(refusal) if refusal.disconnect => {
            state.disconnect_after = true;
            Reply::Nil
        }
        Err(refusal) if refusal.discards_multi => {
            client.multi = None;
            crate::commands::transactions::unwatch_all(state, client);
            refusal.book(&mut state.stats);
            Reply::from(refusal.error)
        }
        Err(refusal) => {
            if refusal.aborts_multi && argv[0].eq_ignore_ascii_case(b"exec") {
                // Redis's execCommandAbort: a rejected EXEC discards any
                // transaction and says why, in or out of MULTI.
                client.multi = None;
                crate::commands::transactions::unwatch_all(state, client);
                let text = refusal.error.as_bytes();
                let reason = text.strip_prefix(b"ERR ").unwrap_or(text);
                let aborted = Refusal {
                    error: CmdError::new_bytes([b"EXECABORT Transaction discarded because of: ", reason].concat()),
                    ..refusal
                };
                aborted.book(&mut state.stats);
                return Reply::from(aborted.error);
            }
            if refusal.aborts_multi
                && let Some(m) = client.multi.as_mut()
            {
                m.aborted = true;
            }
            refusal.book(&mut state.stats);
            Reply::from(refusal.error)
        }
    }
}

/// The injected fault (KEYLOCK FAULT) a client's command meets, if any:
/// rules match the command's full name and, for EVAL and EVALSHA of a
/// recognized script, `script:<name>`.
fn injected_fault(state: &mut State, cmd: &Command, argv: &[Bytes]) -> Option<CommandFault> {
    let script = match cmd.full_name.as_str() {
        "eval" | "eval_ro" => Some(crate::scripting::sha1_hex(&argv[1])),
        "evalsha" | "evalsha_ro" => Some(String::from_utf8_lossy(&argv[1]).to_ascii_lowercase()),
        _ => None,
    };
    let script_name = script
        .and_then(|sha| crate::scripting::native::NativeTable::get().recognize(&sha))
        .map(|known| format!("script:{}", known.name));
    let mut names: Vec<&[u8]> = vec![cmd.full_name.as_bytes()];
    if let Some(name) = &script_name {
        names.push(name.as_bytes());
    }
    let caller = state.fault_caller.clone();
    state.faults.for_command(caller.as_deref(), &names)
}

/// Redis's `scriptCall` checks for a script's command, in its order: the
/// command exists (and its subcommand), the arity, scripts may run it, a
/// read-only run may not write, and the server state that stops a first
/// write (`min-replicas-to-write`, `maxmemory`). Marks the run as having
/// written when the command is a write. Every refusal here is counted
/// where it arises (the caller books it) and flagged
/// `ignore_error_stats_update` for the script's own error.
pub fn for_script(
    state: &mut State,
    client: &Client,
    argv: &[Bytes],
    limits: &ScriptLimits,
    wrote: &std::cell::Cell<bool>,
) -> Result<&'static Command, Refusal> {
    let refuse = |text: &'static str, cmd: Option<&Command>| Err(Refusal::of(CmdError::new(text), cmd));
    let cmd = match lookup(&state.renames, argv) {
        Lookup::Found(cmd) => cmd,
        Lookup::Unknown | Lookup::UnknownSubcommand(_) => return refuse(UNKNOWN_COMMAND, None),
    };
    if !cmd.spec.arity_ok(argv.len()) {
        return refuse(WRONG_ARITY, Some(cmd));
    }
    if cmd.spec.has(flag::NOSCRIPT) && !state.debug.allow_noscript {
        return refuse(NOT_ALLOWED, Some(cmd));
    }
    // Redis's `scriptVerifyAllowStale`: a script allowed to run on a
    // replica whose link is down runs only commands flagged `stale`.
    if !cmd.spec.has(flag::STALE) && state.serving_stale_refused() {
        return refuse(STALE_IN_SCRIPT, Some(cmd));
    }
    // `redis.call` runs with the permissions of the script's caller.
    if let Some(denial) = acl_denial(state, client, cmd, argv) {
        log_denial(state, client, denial, Context::Lua, cmd, argv);
        return refuse(denial.script_error(), Some(cmd));
    }
    // Redis refuses anything that could propagate (PUBLISH too) in a read-only script.
    if limits.read_only && cmd.spec.has(flag::WRITE | flag::MAY_REPLICATE) {
        return refuse(WRITE_IN_READ_ONLY, Some(cmd));
    }
    // A script's write on a read-only replica, or a shard member that
    // does not lead (Redis's `scriptVerifyWriteCommandAllow`).
    if cmd.spec.has(flag::WRITE) && !state.accepts_writes() && !client.replaying {
        return refuse(RAFT_READONLY, Some(cmd));
    }
    // Server state stops a script's first write only: once it has
    // written, it must be able to finish.
    if cmd.spec.has(flag::WRITE) && !wrote.get() && !limits.replicas_ok {
        return refuse(NOREPLICAS, Some(cmd));
    }
    if limits.deny_oom && !wrote.get() && cmd.spec.has(flag::DENYOOM) {
        return refuse(OOM, Some(cmd));
    }
    // Every write, not only the first, while the data cannot be persisted.
    if cmd.spec.has(flag::WRITE)
        && let Some(disk) = state.disk_error()
    {
        return Err(Refusal::of(CmdError::new(disk.message()), Some(cmd)));
    }
    if cmd.spec.has(flag::WRITE) {
        wrote.set(true);
    }
    if state.cluster_enabled() {
        let mut slot = limits.cluster_slot.get();
        state
            .cluster_route_script(cmd, argv, &mut slot, limits)
            .map_err(|text| Refusal::of(CmdError::new(text), Some(cmd)))?;
        limits.cluster_slot.set(slot);
    }
    state.stats.resolutions += 1;
    Ok(cmd)
}

/// The ACL check, the same for every caller: what the client's user may
/// not do with this command line. One branch while the client is the
/// default user's and that user may run anything.
fn acl_denial(state: &State, client: &Client, cmd: &Command, argv: &[Bytes]) -> Option<Denial> {
    if !state.acl.checks(client.user.as_deref()) {
        return None;
    }
    state.acl.check(client.user.as_deref(), cmd, argv).err()
}

/// Records an ACL refusal in the ACL log.
fn log_denial(state: &mut State, client: &Client, denial: Denial, context: Context, cmd: &Command, argv: &[Bytes]) {
    let entry = super::AclDenial {
        reason: denial.reason(),
        context,
        object: denial.object(cmd, argv),
        username: Bytes::copy_from_slice(client.user_name()),
    };
    state.log_acl_denial(client, entry);
}

/// The first checks of `processCommand`: lookup (and subcommand), arity.
fn resolve(names: &Renames, argv: &[Bytes]) -> Result<&'static Command, Refusal> {
    let cmd = match lookup(names, argv) {
        Lookup::Found(cmd) => cmd,
        Lookup::Unknown => return Err(Refusal::of(CmdError::unknown_command(argv), None)),
        Lookup::UnknownSubcommand(container) => {
            return Err(Refusal::of(CmdError::unknown_subcommand(&argv[1], container.spec.name), None));
        }
    };
    if !cmd.spec.arity_ok(argv.len()) {
        // A container named alone is not counted as its own call.
        let counted = cmd.spec.handler.is_some().then_some(cmd);
        return Err(Refusal::of(CmdError::arity(&cmd.full_name), counted));
    }
    Ok(cmd)
}

/// A command EXEC runs: it was checked when it was queued, and the ACL
/// rules are checked again, as they may have changed since (Redis's
/// `execCommand`).
pub fn queued(state: &mut State, client: &Client, argv: &[Bytes]) -> Result<&'static Command, CmdError> {
    let cmd = match lookup(&state.renames, argv) {
        Lookup::Found(cmd) if cmd.spec.handler.is_some() => cmd,
        _ => return Err(CmdError::unknown_command(argv)),
    };
    if let Some(denial) = acl_denial(state, client, cmd, argv) {
        log_denial(state, client, denial, Context::Multi, cmd, argv);
        return Err(CmdError::new(denial.exec_error()));
    }
    state.stats.resolutions += 1;
    Ok(cmd)
}

/// A client's command, resolved by [`for_client`], is about to run (not
/// queued in MULTI): counted as a resolution for execution.
pub fn to_run(state: &mut State) {
    state.stats.resolutions += 1;
}

/// The command a direct run's step stands for (see
/// `scripting::native::direct`), found once by name.
pub fn named(name: &[u8]) -> &'static Command {
    match Registry::get().lookup(name) {
        Some(cmd) => cmd,
        None => unreachable!("the command table lacks {}", String::from_utf8_lossy(name)),
    }
}

/// A direct run's step, resolved: counted like every other resolution, so
/// that the count covers every execution.
pub fn direct(state: &mut State, cmd: &'static Command) -> &'static Command {
    state.stats.resolutions += 1;
    cmd
}

/// What [`State::record_changes`] compares a command's run with: taken
/// as it starts.
pub struct Changes {
    dirty: u64,
    db: usize,
    db_changes: u64,
    /// Whether the command running this one counted its changes.
    counted: bool,
    /// Effects were recorded when it started (see [`effects::Effects::enter`]).
    recorded: bool,
}

impl Changes {
    /// A command starts running in database `db`.
    #[inline]
    pub fn before(state: &mut State, db: usize) -> Changes {
        Changes {
            dirty: state.dirty,
            db,
            db_changes: state.dbs[db].changes(),
            counted: std::mem::replace(&mut state.dirty_counted, false),
            recorded: state.effects.on() && {
                state.effects.enter();
                true
            },
        }
    }
}

/// A command line as its caller holds it, for the MONITOR line.
pub enum Shown<'a> {
    Args(&'a [Bytes]),
    /// Borrowed pieces, copied only if a monitor is listening.
    Pieces(&'a [&'a [u8]]),
}

impl State {
    /// The errors in `reply` (a transaction's inner ones one by one), to a
    /// client that should get none: a master's stream, a replica, or a
    /// file's replay (Redis's `afterErrorReply`: each logged, and counted
    /// in `unexpected_error_replies`).
    pub fn unexpected_errors(&mut self, from: &str, to: &str, reply: &Reply, command: &str) {
        let mut errors = Vec::new();
        reply.collect_errors(&mut errors);
        for error in errors {
            self.unexpected_error(from, to, &error, command);
        }
    }

    fn unexpected_error(&mut self, from: &str, to: &str, error: &[u8], command: &str) {
        // As Redis has it: a plain error's message (its `-ERR ` is added
        // on the wire), another code's whole line.
        let line = String::from_utf8_lossy(error);
        let line = line.trim_end_matches("\r\n").trim_start_matches('-');
        let text = match line.strip_prefix("ERR ") {
            Some(message) => message.to_string(),
            None => format!("-{line}"),
        };
        let text: String = text.chars().take(4096).collect();
        crate::log::warning(format_args!(
            "== CRITICAL == This {from} is sending an error to its {to}: '{text}' after processing the command '{command}'"
        ));
        self.stats.unexpected_error_replies += 1;
        // `propagation-error-behavior`: a replica that may not diverge from
        // its master (read-only), or a file replayed, stops the server
        // rather than go on with data that is not what was written, when
        // the operator asked for that (Redis's `afterErrorReply`).
        let behavior = self.params.value("propagation-error-behavior").unwrap_or("ignore");
        let panic_on_replica =
            to == "master" && self.params.value("replica-read-only") != Some("no") && matches!(behavior, "panic" | "panic-on-replicas");
        // An AOF's only: a Raft member replays what its shard agreed on,
        // and would stop again on each restart.
        let panic_on_replay = to == "AOF-loading-client" && behavior == "panic";
        if panic_on_replica || panic_on_replay {
            crate::log::warning(format_args!("------------------------------------------------"));
            crate::log::warning(format_args!(
                "Guru Meditation: This {from} panicked sending an error to its {to} after processing the command '{command}' (propagation-error-behavior {behavior})"
            ));
            std::process::abort();
        }
    }

    /// Runs a resolved command: the handler, statistics, WATCH and MONITOR.
    /// `scripts` is the scripting a command may use: the engine's for a
    /// client's command, None for a script's own commands.
    pub fn call(&mut self, scripts: Option<&mut Scripts>, client: &mut Client, cmd: &'static Command, argv: &[Bytes]) -> Reply {
        let Some(handler) = cmd.spec.handler else {
            return Reply::Error(Bytes::from_static(b"ERR internal: container without handler"));
        };
        // The command's time: frozen during a script, else one clock read.
        // Its duration is measured with the cheaper tick counter.
        let started = crate::clock::ticks::now();
        let now_ms = match self.script_time {
            Some(t) => t,
            None => self.clock.now_ms(),
        };
        self.access_clock.set(now_ms);
        // EVAL and friends are `skip_monitor` in the table, as in Redis, and
        // shown up front instead, ahead of their script's `lua` lines.
        if !self.monitors.is_empty() && !cmd.spec.has(flag::ADMIN) && cmd.spec.has(flag::MONITOR_BEFORE) {
            self.feed_monitors(client, client.db, &client.monitor_origin(), argv);
        }
        client.last_interaction_ms = now_ms;
        client.last_command = &cmd.full_name;
        self.stats.prev_error_replies = self.stats.total_error_replies;
        let changes = Changes::before(self, client.db);
        // The command boundary: a handler that panics (a bug, whatever the
        // input) fails its own command; the engine and every other client
        // carry on. A script's commands come through here too, so a panic
        // under `redis.call` never unwinds through Lua's C frames.
        let result = {
            let mut ctx = Ctx {
                state: self,
                scripts,
                client,
                now_ms,
            };
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(&mut ctx, argv)))
        };
        let result = result.unwrap_or_else(|payload| {
            self.command_panics += 1;
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            tracing::error!(command = %cmd.full_name, panic = %what, "command aborted by an internal error");
            Err(CmdError::err(format!(
                "internal error while running '{}'; the command was aborted (see the server log)",
                cmd.full_name
            )))
        });
        let elapsed = crate::clock::ticks::now().saturating_sub(started);
        if let Some(blocked) = client.blocked.as_deref_mut()
            && !matches!(blocked.op, super::blocking::BlockOp::Postpone(_))
        {
            // The slow log has it when the wait ends.
            blocked.argv = argv.to_vec();
        }
        self.record_changes(changes, client.db, cmd, argv);
        self.publish_key_events(client);
        if self.cluster.as_ref().is_some_and(|c| !c.lost_slots.is_empty()) {
            self.drop_lost_slot_channels(client);
        }
        self.collect_watch_invalidations(client);
        if self.tracking.enabled && cmd.spec.has(flag::READONLY) {
            self.remember_tracked_keys(client, cmd, argv);
        }
        self.book_run(client, cmd, Shown::Args(argv), elapsed);
        let counted_errors = std::mem::take(&mut self.reply_counted_errors);
        self.stats.cmd[cmd.stat_index].failed_calls += counted_errors;
        let reply = match result {
            Ok(reply) => {
                if let Reply::Error(e) = &reply
                    && counted_errors == 0
                {
                    self.stats.count_error_text(e);
                }
                reply
            }
            Err(e) => {
                self.stats.count_error(&e);
                Reply::from(e)
            }
        };
        // Redis's incrCommandStatsOnError: failed if errors were counted
        // since this command (or the last command it ran) was booked.
        if self.stats.total_error_replies > self.stats.prev_error_replies {
            self.stats.cmd[cmd.stat_index].failed_calls += 1;
        }
        self.stats.prev_error_replies = self.stats.total_error_replies;
        reply
    }

    /// Books a command that ran (Redis's `call` after the command): its
    /// call and time in commandstats, `total_commands_processed` (a
    /// refused command never gets here), and its MONITOR line after it,
    /// passwords redacted. `argv` is the command as its caller wrote it.
    pub fn book_run(&mut self, client: &Client, cmd: &'static Command, argv: Shown, elapsed_ticks: u64) {
        self.stats.total_commands_processed += 1;
        let duration_us = crate::clock::ticks::to_us(elapsed_ticks);
        let stat = &mut self.stats.cmd[cmd.stat_index];
        stat.calls += 1;
        stat.ticks += elapsed_ticks;
        if self.runtime.latency_tracking {
            stat.latency
                .get_or_insert_with(Default::default)
                .record(duration_us.saturating_mul(1000));
        }
        if self.runtime.latency_monitor_threshold > 0 {
            let event = if cmd.spec.has(flag::FAST) { "fast-command" } else { "command" };
            self.add_latency_sample(event, duration_us / 1000);
        }
        let monitored = !self.monitors.is_empty() && !cmd.spec.has(flag::ADMIN | flag::MONITOR_BEFORE | flag::SKIP_MONITOR);
        // A command that blocked is logged when its wait ends (see
        // `State::log_unblocked`).
        let slow = self.runtime.slowlog_log_slower_than >= 0
            && duration_us >= self.runtime.slowlog_log_slower_than as u64
            && !cmd.spec.has(flag::SKIP_SLOWLOG)
            && client
                .blocked
                .as_ref()
                .is_none_or(|b| matches!(b.op, super::blocking::BlockOp::Postpone(_)));
        if !monitored && !slow {
            // The common case: nothing needs the arguments.
            return;
        }
        let copied: Vec<Bytes>;
        let argv = match argv {
            Shown::Args(argv) => argv,
            Shown::Pieces(pieces) => {
                copied = pieces.iter().map(|p| Bytes::copy_from_slice(p)).collect();
                &copied
            }
        };
        // Secrets never reach MONITOR or the slow log (Redis redacts
        // them in the command's own arguments).
        let redacted = redact_secrets(cmd, argv);
        let shown = redacted.as_deref().unwrap_or(argv);
        if slow {
            let now_secs = self.clock.now_ms() / 1000;
            let (slower_than, max_len) = (self.runtime.slowlog_log_slower_than, self.runtime.slowlog_max_len);
            let caller = self.slowlog_caller(client);
            self.slowlog
                .push_if_slow(slower_than, max_len, duration_us, shown, caller, now_secs);
        }
        if monitored {
            self.feed_monitors(client, client.db, &client.monitor_origin(), shown);
        }
    }

    /// Redis's `latencyAddSampleIfNeeded`: the monitor keeps `latency_ms`
    /// for `event` when `latency-monitor-threshold` is set and reached.
    pub fn add_latency_sample(&mut self, event: &str, latency_ms: u64) {
        let threshold = self.runtime.latency_monitor_threshold;
        if threshold > 0 && latency_ms >= threshold as u64 {
            let now_secs = (self.clock.now_ms() / 1000) as i64;
            self.latency.add_sample(event, latency_ms, now_secs);
        }
    }

    /// What a command that ran changed (Redis's `call` after the
    /// command): the dirty counter (one change if it modified a key in
    /// the database it started in and its handler counted none), and its
    /// effect (see
    /// [`super::effects`]): the command as run in `db`, unless its handler
    /// replaced or prevented it, after the keys expiry removed meanwhile.
    /// The outermost command hands out every effect recorded under it.
    #[inline]
    pub fn record_changes(&mut self, before: Changes, db: usize, cmd: &Command, argv: &[Bytes]) {
        let counted = std::mem::replace(&mut self.dirty_counted, before.counted);
        if !counted && self.dirty == before.dirty && self.dbs[before.db].changes() != before.db_changes {
            self.dirty += 1;
        }
        if before.recorded {
            self.record_effect(before.dirty, db, cmd, argv);
        }
    }

    /// [`State::record_changes`] while effects are recorded.
    #[cold]
    fn record_effect(&mut self, dirty_before: u64, db: usize, cmd: &Command, argv: &[Bytes]) {
        let (asked, outermost) = self.effects.leave();
        self.record_expired_effects();
        let mut target = asked.force;
        if self.dirty != dirty_before {
            target |= effects::ALL;
        }
        target &= !asked.prevent;
        if self.script_time.is_some() {
            // A script's own command goes where `redis.set_repl` says.
            target &= self.script_repl;
        }
        // EXEC is never an effect itself: the transaction's effects are.
        if target != 0 && cmd.full_name != "exec" {
            let argv = asked.rewrite.as_deref().unwrap_or(argv);
            self.effects.push(db, argv, target);
        }
        if outermost {
            // SCAN and RANDOMKEY may expire any number of keys, which are
            // not one transaction (Redis's CMD_TOUCHES_ARBITRARY_KEYS).
            let arbitrary = matches!(cmd.full_name.as_str(), "scan" | "randomkey");
            self.effects.flush(arbitrary);
            self.feed_replicas();
        }
    }

    /// The keys expiry removed since the last call, as `DEL` effects
    /// (Redis's `deleteExpiredKeyAndPropagate`).
    pub fn record_expired_effects(&mut self) {
        if !self.key_events.has_expired() {
            return;
        }
        for (db, key) in self.key_events.take_expired() {
            self.effects.push(db, &[b"DEL".as_slice(), &key], effects::ALL);
        }
    }

    /// A script starts: its commands see `now_ms` (Redis freezes time for
    /// a script) and its writes go everywhere until `redis.set_repl`.
    pub fn start_script_run(&mut self, now_ms: u64) {
        self.script_time = Some(now_ms);
        self.script_repl = effects::ALL;
    }

    /// Hands out the effects of what ran outside any command (active
    /// expiry, clients served after a blocking wait), each group on its
    /// own, without a transaction around it.
    pub fn flush_effects(&mut self) {
        if self.effects.on() && !self.effects.in_command() {
            self.record_expired_effects();
            self.effects.flush(true);
            self.effects.command = effects::CommandEffect::default();
            self.feed_replicas();
        }
    }

    /// A blocked client's wait ended (served, or by CLIENT UNBLOCK) after
    /// its reply took since `started` (ticks): its blocking command goes
    /// to the slow log now, as Redis's `updateStatsOnUnblock` logs it.
    pub fn log_unblocked(&mut self, client: &mut Client, started: u64) {
        let Some(argv) = client.blocked.as_deref_mut().map(|b| std::mem::take(&mut b.argv)) else {
            return;
        };
        let slower_than = self.runtime.slowlog_log_slower_than;
        if argv.is_empty() || slower_than < 0 {
            return;
        }
        let duration_us = crate::clock::ticks::to_us(crate::clock::ticks::now().saturating_sub(started));
        let (max_len, now_secs) = (self.runtime.slowlog_max_len, self.clock.now_ms() / 1000);
        if duration_us < slower_than as u64 {
            // Not slow: only the length is kept (no peer name formatted).
            self.slowlog.truncate(max_len);
            return;
        }
        let caller = self.slowlog_caller(client);
        self.slowlog
            .push_if_slow(slower_than, max_len, duration_us, &argv, caller, now_secs);
    }

    /// How the slow log names `client` (Redis's `getClientPeerId`: the
    /// script client, which has no connection, is `?:0`).
    fn slowlog_caller<'c>(&self, client: &'c Client) -> slowlog::Caller<'c> {
        slowlog::Caller {
            peer: if client.is_script {
                "?:0".to_string()
            } else {
                client.peer.to_string()
            },
            name: client.name.as_ref(),
        }
    }
}

/// AUTH and HELLO … AUTH credentials and ACL SETUSER's user and rules
/// never reach MONITOR or the slow log: Redis shows `(redacted)` in their
/// place.
fn redact_secrets(cmd: &Command, argv: &[Bytes]) -> Option<Vec<Bytes>> {
    const REDACTED: Bytes = Bytes::from_static(b"(redacted)");
    let from = |at: usize| Some(argv[..at].iter().cloned().chain(argv[at..].iter().map(|_| REDACTED)).collect());
    match cmd.full_name.as_str() {
        "auth" => from(1),
        "acl|setuser" => from(2),
        "hello" => {
            let at = argv.iter().position(|a| a.eq_ignore_ascii_case(b"auth"))?;
            let mut shown = argv.to_vec();
            for a in shown.iter_mut().skip(at + 1).take(2) {
                *a = REDACTED;
            }
            Some(shown)
        }
        "migrate" => {
            // AUTH password and AUTH2 username password, before KEYS.
            let mut shown = argv.to_vec();
            let mut j = 6;
            let mut any = false;
            while j < shown.len() {
                let secrets = if shown[j].eq_ignore_ascii_case(b"auth") {
                    1
                } else if shown[j].eq_ignore_ascii_case(b"auth2") {
                    2
                } else if shown[j].eq_ignore_ascii_case(b"keys") {
                    break;
                } else {
                    0
                };
                for a in shown.iter_mut().skip(j + 1).take(secrets) {
                    *a = REDACTED;
                    any = true;
                }
                j += 1 + secrets;
            }
            any.then_some(shown)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;

    use super::*;
    use crate::config::Config;
    use crate::engine::{Engine, Outbox};

    fn engine(native: bool) -> Engine {
        let mut config = Config::ephemeral();
        config
            .directives
            .push(("native-scripts".into(), vec![if native { "yes" } else { "no" }.into()]));
        let mut engine = Engine::new(State::new(config, 0));
        let addr = "127.0.0.1:1".parse().expect("address");
        engine.connect(1, addr, addr, Outbox::new());
        engine
    }

    fn run(engine: &mut Engine, lines: &[&[&str]]) {
        let batch = lines
            .iter()
            .map(|l| l.iter().map(|a| Bytes::copy_from_slice(a.as_bytes())).collect())
            .collect();
        engine.run_batch(1, batch, &mut BytesMut::new());
    }

    const LOCK_ACQUIRE: &str = include_str!("../../lua/redisson/4.7.0/lock-acquire.lua");
    const RWLOCK_READ_ACQUIRE: &str = include_str!("../../lua/redisson/4.7.0/rwlock-read-acquire.lua");

    #[test]
    fn every_command_that_runs_was_resolved_by_the_pipeline() {
        // Clients, MULTI/EXEC, Lua scripts, native runs command by command
        // (the read-write lock) and direct runs (the lock), refused
        // commands among them: resolutions for running equal executions.
        for native in [true, false] {
            let mut e = engine(native);
            run(
                &mut e,
                &[
                    &["SET", "k", "1"],
                    &["GET", "k"],
                    &["NOSUCH"],
                    &["GET"],
                    &["MULTI"],
                    &["INCR", "k"],
                    &["HSET", "h", "f", "v"],
                    &["EXEC"],
                    &[
                        "EVAL",
                        "redis.call('set', 'a', 1) redis.pcall('nosuch') redis.pcall('incr') return redis.call('get', 'a')",
                        "0",
                    ],
                    &["EVAL", LOCK_ACQUIRE, "1", "lock", "30000", "owner:1"],
                    &["EVAL", LOCK_ACQUIRE, "1", "lock", "30000", "owner:1"],
                    &["EVAL", LOCK_ACQUIRE, "1", "lock", "30000", "owner:2"],
                    &[
                        "EVAL",
                        RWLOCK_READ_ACQUIRE,
                        "2",
                        "rw",
                        "{rw}:owner:1:rwlock_timeout",
                        "30000",
                        "owner:1",
                        "owner:1:write",
                    ],
                    &["MULTI"],
                    &["EVAL", "return redis.call('incr', 'k')", "0"],
                    &["EXEC"],
                ],
            );
            let stats = &e.state.stats;
            assert!(stats.total_commands_processed > 20, "{}", stats.total_commands_processed);
            assert_eq!(stats.resolutions, stats.total_commands_processed, "native scripts {native}");
        }
    }
}
