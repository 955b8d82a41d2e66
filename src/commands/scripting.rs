//! The scripting family: EVAL, EVALSHA, their read-only forms, and SCRIPT.
//!
//! The work happens in `crate::scripting`; these handlers parse arguments
//! and lend the engine's VM and script pseudo-client to the run
//! (`Ctx::scripts`; a script cannot run a script, so nothing else needs
//! them meanwhile).

use bytes::Bytes;

use super::args::{parse_i64, upper};
use super::table::{CommandSpec, cmd, container, flag::*};
use super::{CmdError, CmdResult, Ctx, Reply};
use crate::engine::Scripts;
use crate::engine::debug_sessions::Forked;
use crate::scripting::{RunFlags, ldb};

const EVAL_FLAGS: u32 = NOSCRIPT | SKIP_MONITOR | MONITOR_BEFORE | MAY_REPLICATE | NO_MANDATORY_KEYS | STALE;
/// EVAL_RO and EVALSHA_RO: read-only, and nothing they run may replicate
/// (CLIENT PAUSE WRITE lets them through).
const EVAL_RO_FLAGS: u32 = (EVAL_FLAGS & !MAY_REPLICATE) | READONLY;

pub const COMMANDS: &[CommandSpec] = &[
    cmd("eval", -3, eval).flags(EVAL_FLAGS),
    cmd("evalsha", -3, evalsha).flags(EVAL_FLAGS),
    cmd("eval_ro", -3, eval_ro).flags(EVAL_RO_FLAGS),
    cmd("evalsha_ro", -3, evalsha_ro).flags(EVAL_RO_FLAGS),
    container("script", SCRIPT),
];

const SCRIPT: &[CommandSpec] = &[
    cmd("load", 3, script_load).flags(NOSCRIPT | STALE),
    cmd("exists", -3, script_exists).flags(NOSCRIPT),
    cmd("flush", -2, script_flush).flags(NOSCRIPT),
    cmd("kill", 2, script_kill).flags(NOSCRIPT | ALLOW_BUSY),
    cmd("debug", 3, script_debug).flags(NOSCRIPT),
    cmd("help", 2, script_help).flags(LOADING | STALE),
];

fn eval(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    eval_generic(ctx, argv, false, false)
}

fn evalsha(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    eval_generic(ctx, argv, true, false)
}

fn eval_ro(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    eval_generic(ctx, argv, false, true)
}

fn evalsha_ro(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    eval_generic(ctx, argv, true, true)
}

fn noscript() -> CmdError {
    CmdError::new("NOSCRIPT No matching script. Please use EVAL.")
}

fn eval_generic(ctx: &mut Ctx, argv: &[Bytes], by_sha: bool, read_only: bool) -> CmdResult {
    // A script is the writes it made, never itself.
    ctx.prevent_propagation();
    if let Some(mode) = ctx.client.lua_debug {
        if by_sha {
            if argv[1].len() != 40 {
                return Err(noscript());
            }
            return Err(CmdError::err("Please use EVAL instead of EVALSHA for debugging"));
        }
        return eval_debugging(ctx, argv, read_only, mode);
    }
    eval_script(ctx, argv, by_sha, read_only)
}

/// Ends a debugging session however the run ends (a panic too), so that
/// the next script runs without the debugger.
struct SessionGuard;

impl Drop for SessionGuard {
    fn drop(&mut self) {
        if ldb::active() {
            ldb::end();
        }
    }
}

/// An EVAL from a client in SCRIPT DEBUG mode (Redis's
/// `evalGenericCommandWithDebugging`): the session starts before anything
/// is checked, and the connection closes once it ended.
fn eval_debugging(ctx: &mut Ctx, argv: &[Bytes], read_only: bool, mode: ldb::Mode) -> CmdResult {
    let conn = ctx.state.watchdog.debug_conn(ctx.client.id);
    if mode == ldb::Mode::Sync {
        crate::log::warning(format_args!("Synchronous debugging eval session started"));
        // The connection closes after the session, however the run ends.
        ctx.client.close_after_reply = true;
        let guard = SessionGuard;
        ldb::start(conn, &argv[1]);
        let reply = eval_script(ctx, argv, false, read_only);
        drop(guard);
        crate::log::warning(format_args!("Synchronous debugging eval session ended"));
        return reply;
    }
    ctx.client.lua_debug = None;
    match ctx.state.fork_debug_session() {
        Err(e) => Err(CmdError::err(format!(
            "Fork() failed: can't run EVAL in debugging mode: {}",
            crate::error::os_error_text(&e)
        ))),
        Ok(Forked::Parent) => {
            // The child answers the client from now on.
            ctx.client.outbox.hand_over();
            ctx.state.disconnect_after = true;
            Ok(Reply::Nil)
        }
        Ok(Forked::Child) => {
            // The child logs nothing: in a process embedding the server,
            // another thread may have held the log's lock when it forked.
            let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                ldb::start(conn, &argv[1]);
                let reply = eval_script(ctx, argv, false, read_only).unwrap_or_else(Reply::from);
                // What the client was owed before, then the reply.
                let mut out = bytes::BytesMut::new();
                ctx.client.outbox.buffer().borrow_mut().swap(&mut out);
                reply.encode(ctx.client.resp, &mut out);
                if let Some(mut conn) = ldb::end() {
                    conn.send(&out);
                }
            }));
            // SAFETY: ends the child without the parent's destructors or
            // atexit handlers.
            unsafe { libc::_exit(i32::from(run.is_err())) }
        }
    }
}

fn eval_script(ctx: &mut Ctx, argv: &[Bytes], by_sha: bool, read_only: bool) -> CmdResult {
    let numkeys = parse_i64(&argv[2])?;
    let available = (argv.len() - 3) as i64;
    if numkeys > available {
        return Err(CmdError::err("Number of keys can't be greater than number of args"));
    }
    if numkeys < 0 {
        return Err(CmdError::err("Number of keys can't be negative"));
    }
    let (keys, args) = argv[3..].split_at(numkeys as usize);
    let scripts = Scripts::lent(&mut ctx.scripts)?;
    let (vm, script_client) = scripts.for_run()?;
    // By SHA1, a missing script is found missing by `run`'s one lookup.
    let id = if by_sha {
        crate::scripting::script_id(&argv[1]).ok_or_else(noscript)?
    } else {
        let sha = vm.load(&argv[1])?;
        crate::scripting::script_id(sha.as_bytes()).ok_or_else(noscript)?
    };
    ctx.state.start_script_run(ctx.now_ms);
    let flags = RunFlags {
        read_only,
        // A user with restricted permissions runs every script through
        // Lua, where each `redis.call` is checked.
        // A read-only replica, or a shard member that does not lead,
        // runs them through Lua too, where a write is refused.
        // A debugging session steps through the Lua.
        native: ctx.state.runtime.native_scripts
            && !ldb::active()
            && !ctx.state.acl.checks(ctx.client.user.as_deref())
            && !ctx.state.renames_data_commands
            && ctx.state.accepts_writes(),
    };
    // A panic inside the run leaves the VM in an unknown state (a hook
    // set, values on its stack): it is replaced by a fresh one, as
    // SCRIPT FLUSH would, before the panic goes on to the command
    // boundary. Clients reload their scripts on NOSCRIPT.
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        vm.run(ctx.state, ctx.client, script_client, &id, keys, args, &flags)
    }));
    ctx.state.script_time = None;
    let reply = match run {
        Ok(reply) => reply.ok_or_else(noscript),
        Err(payload) => {
            let _ = scripts.reset_vm(ctx.state.runtime.lua_memory_limit);
            std::panic::resume_unwind(payload)
        }
    };
    after_run(ctx, reply)
}

/// What follows every script or function run: a SHUTDOWN NOSAVE that
/// arrived meanwhile takes effect, and a table reply is sent with its
/// length last, as Redis sends it.
pub(super) fn after_run(ctx: &mut Ctx, reply: CmdResult) -> CmdResult {
    if ctx.state.watchdog.shutdown_requested.take() {
        ctx.state.shutdown = true;
    }
    if let Ok(Reply::Array(_) | Reply::Map(_) | Reply::Set(_)) = &reply {
        ctx.defer_reply_len();
    }
    reply
}

fn script_load(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let sha = Scripts::lent(&mut ctx.scripts)?.vm()?.load(&argv[2])?;
    Ok(Reply::Bulk(Bytes::from(sha)))
}

fn script_exists(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let vm = Scripts::lent(&mut ctx.scripts)?.vm.as_deref();
    Ok(Reply::Array(
        argv[2..]
            .iter()
            .map(|sha| Reply::Int(vm.is_some_and(|s| s.exists(sha)) as i64))
            .collect(),
    ))
}

fn script_flush(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    match argv.get(2) {
        None => {}
        Some(mode) if argv.len() == 3 && matches!(upper(mode).as_str(), "ASYNC" | "SYNC") => {}
        _ => return Err(CmdError::err("SCRIPT FLUSH only support SYNC|ASYNC option")),
    }
    // A new VM, as Redis resets its Lua state: cached scripts and any
    // state scripts left behind are gone.
    let limit = ctx.state.runtime.lua_memory_limit;
    Scripts::lent(&mut ctx.scripts)?.reset_vm(limit)?;
    Ok(Reply::OK)
}

/// Served while a script is busy (`allow-busy`): it stops an EVAL that
/// has not written. At any other time no script runs.
fn script_kill(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    super::functions::kill_busy(ctx, true)
}

/// SCRIPT DEBUG: the client's next EVAL runs under the Lua debugger
/// (see `scripting::ldb`).
fn script_debug(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if ctx.client.outbox.unwritten() > 0 {
        return Err(CmdError::err("SCRIPT DEBUG must be called outside a pipeline"));
    }
    match upper(&argv[2]).as_str() {
        "NO" => {
            ctx.client.lua_debug = None;
            Ok(Reply::OK)
        }
        "YES" => {
            ctx.client.lua_debug = Some(ldb::Mode::Fork);
            Ok(Reply::OK)
        }
        "SYNC" => {
            ctx.client.lua_debug = Some(ldb::Mode::Sync);
            Ok(Reply::OK)
        }
        _ => Err(CmdError::err("Use SCRIPT DEBUG YES/SYNC/NO")),
    }
}

fn script_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(super::server::help_reply(
        "SCRIPT",
        &[
            "DEBUG (YES|SYNC|NO)",
            "    Set the debug mode for subsequent scripts executed.",
            "EXISTS <sha1> [<sha1> ...]",
            "    Return information about the existence of the scripts in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Flush the Lua scripts cache. Very dangerous on replicas.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the scripts cache.",
            "    * SYNC: Synchronously flush the scripts cache.",
            "KILL",
            "    Kill the currently executing Lua script.",
            "LOAD <script>",
            "    Load a script into the scripts cache without executing it.",
        ],
    ))
}
