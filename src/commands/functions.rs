//! Redis 7.0 functions: FCALL, FCALL_RO and the FUNCTION container (LOAD,
//! DELETE, FLUSH, LIST, STATS, KILL, DUMP, RESTORE, HELP).
//!
//! The libraries and their VM live in `crate::scripting::functions`,
//! owned by the engine's [`Scripts`]; these handlers parse arguments and
//! shape replies as Redis's `functions.c` does. While a function runs
//! past `busy-reply-threshold`, FUNCTION KILL and FUNCTION STATS are
//! served (`allow-busy`) from what `State::busy` says of it.

use bytes::Bytes;

use super::args::{parse_i64, upper};
use super::table::{CommandSpec, cmd, container, flag::*};
use super::{CmdError, CmdResult, Ctx, Reply};
use crate::engine::Scripts;
use crate::engine::exec::{BUSY, BUSY_FUNCTION, UNKILLABLE};
use crate::scripting::BusyAction;
use crate::scripting::functions::{LOAD_TIMEOUT_MS, RestorePolicy};

/// As EVAL: what the function declares decides the rest (see
/// `engine::command_flags`). What COMMAND, COMMAND INFO and COMMAND DOCS
/// say of these commands comes from Redis's definitions (`defs.rs`).
const FCALL_FLAGS: u32 = NOSCRIPT | SKIP_MONITOR | MONITOR_BEFORE | MAY_REPLICATE | NO_MANDATORY_KEYS | STALE;
const FCALL_RO_FLAGS: u32 = (FCALL_FLAGS & !MAY_REPLICATE) | READONLY;

pub const COMMANDS: &[CommandSpec] = &[
    cmd("fcall", -3, fcall).flags(FCALL_FLAGS),
    cmd("fcall_ro", -3, fcall_ro).flags(FCALL_RO_FLAGS),
    container("function", FUNCTION),
];

const FUNCTION: &[CommandSpec] = &[
    cmd("delete", 3, function_delete).flags(NOSCRIPT | WRITE),
    cmd("dump", 2, function_dump).flags(NOSCRIPT),
    cmd("flush", -2, function_flush).flags(NOSCRIPT | WRITE),
    cmd("help", 2, function_help).flags(LOADING | STALE),
    cmd("kill", 2, function_kill).flags(NOSCRIPT | ALLOW_BUSY),
    cmd("list", -2, function_list).flags(NOSCRIPT),
    cmd("load", -3, function_load).flags(NOSCRIPT | WRITE | DENYOOM),
    cmd("restore", -3, function_restore).flags(NOSCRIPT | WRITE | DENYOOM),
    cmd("stats", 2, function_stats).flags(NOSCRIPT | ALLOW_BUSY),
];

fn fcall(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    fcall_generic(ctx, argv, false)
}

fn fcall_ro(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    fcall_generic(ctx, argv, true)
}

/// Redis's `fcallCommandGeneric`: the function, then the number of keys,
/// then the checks its flags call for, then the run.
fn fcall_generic(ctx: &mut Ctx, argv: &[Bytes], read_only: bool) -> CmdResult {
    // A function call is the writes it made, never itself.
    ctx.prevent_propagation();
    let scripts = Scripts::lent(&mut ctx.scripts)?;
    let (functions, script_client) = scripts.for_function_run()?;
    if functions.find(&argv[1]).is_none() {
        return Err(CmdError::err("Function not found"));
    }
    let numkeys = parse_i64(&argv[2]).map_err(|_| CmdError::err("Bad number of keys provided"))?;
    let available = (argv.len() - 3) as i64;
    if numkeys > available {
        return Err(CmdError::err("Number of keys can't be greater than number of args"));
    }
    if numkeys < 0 {
        return Err(CmdError::err("Number of keys can't be negative"));
    }
    let (keys, args) = argv[3..].split_at(numkeys as usize);
    ctx.state.start_script_run(ctx.now_ms);
    // A panic inside the run leaves the VM in an unknown state: it is
    // rebuilt with the same libraries before the panic goes on to the
    // command boundary.
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        functions.run(ctx.state, ctx.client, script_client, &argv[1], keys, args, read_only, argv)
    }));
    ctx.state.script_time = None;
    let reply = match run {
        Ok(reply) => reply.ok_or_else(|| CmdError::err("Function not found")),
        Err(payload) => {
            scripts.rebuild_functions(ctx.state.runtime.lua_memory_limit);
            std::panic::resume_unwind(payload)
        }
    };
    super::scripting::after_run(ctx, reply)
}

/// FUNCTION LOAD [REPLACE] code.
fn function_load(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut replace = false;
    let mut at = 2;
    while at < argv.len() - 1 {
        let option = &argv[at];
        at += 1;
        if option.eq_ignore_ascii_case(b"replace") {
            replace = true;
            continue;
        }
        return Err(CmdError::new_bytes(
            [b"ERR Unknown option given: ", crate::error::quoted(option)].concat(),
        ));
    }
    if at >= argv.len() {
        return Err(CmdError::err("Function code is missing"));
    }
    let functions = Scripts::lent(&mut ctx.scripts)?.functions()?;
    let name = functions.load(&argv[at], replace, LOAD_TIMEOUT_MS)?;
    ctx.dirty(1);
    Ok(Reply::Bulk(name))
}

fn function_delete(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Scripts::lent(&mut ctx.scripts)?.functions()?.delete(&argv[2])?;
    ctx.dirty(1);
    Ok(Reply::OK)
}

fn function_flush(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() > 3 {
        return Err(subcommand_syntax(argv));
    }
    if argv.len() == 3 && !argv[2].eq_ignore_ascii_case(b"sync") && !argv[2].eq_ignore_ascii_case(b"async") {
        return Err(CmdError::err("FUNCTION FLUSH only supports SYNC|ASYNC option"));
    }
    Scripts::lent(&mut ctx.scripts)?.functions()?.flush();
    ctx.dirty(1);
    Ok(Reply::OK)
}

/// Redis's `addReplySubcommandSyntaxError`: the subcommand as it was
/// typed.
fn subcommand_syntax(argv: &[Bytes]) -> CmdError {
    CmdError::new_bytes(
        [
            b"ERR unknown subcommand or wrong number of arguments for '".as_slice(),
            crate::error::c_str(&argv[1], 128),
            b"'. Try ",
            argv[0].to_ascii_uppercase().as_slice(),
            b" HELP.",
        ]
        .concat(),
    )
}

/// FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE], each option once.
fn function_list(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut with_code = false;
    let mut pattern: Option<&Bytes> = None;
    let mut i = 2;
    while i < argv.len() {
        let arg = &argv[i];
        if !with_code && arg.eq_ignore_ascii_case(b"withcode") {
            with_code = true;
        } else if pattern.is_none() && arg.eq_ignore_ascii_case(b"libraryname") {
            if i >= argv.len() - 1 {
                return Err(CmdError::err("library name argument was not given"));
            }
            i += 1;
            pattern = Some(&argv[i]);
        } else {
            // Redis's addReplyErrorSdsSafe: line breaks become spaces.
            return Err(CmdError::new_bytes([b"ERR Unknown argument ", crate::error::quoted(arg)].concat()));
        }
        i += 1;
    }
    let functions = Scripts::lent(&mut ctx.scripts)?.functions()?;
    let libraries = functions
        .libraries()
        .filter(|l| pattern.is_none_or(|p| crate::glob::matches(p, &l.name, true)))
        .map(|library| {
            let mut fields = vec![
                (Reply::bulk_static("library_name"), Reply::Bulk(library.name.clone())),
                (Reply::bulk_static("engine"), Reply::bulk_static("LUA")),
                (
                    Reply::bulk_static("functions"),
                    Reply::Array(
                        library
                            .functions
                            .iter()
                            .map(|f| {
                                Reply::Map(vec![
                                    (Reply::bulk_static("name"), Reply::Bulk(f.name.clone())),
                                    (
                                        Reply::bulk_static("description"),
                                        f.description.clone().map_or(Reply::Nil, Reply::Bulk),
                                    ),
                                    (
                                        Reply::bulk_static("flags"),
                                        Reply::Set(f.flags.names().map(Reply::status).collect()),
                                    ),
                                ])
                            })
                            .collect(),
                    ),
                ),
            ];
            if with_code {
                fields.push((Reply::bulk_static("library_code"), Reply::Bulk(library.code.clone())));
            }
            Reply::Map(fields)
        })
        .collect();
    Ok(Reply::Array(libraries))
}

/// FUNCTION STATS: the running function, if any, and the engine's counts.
/// While an EVAL is busy it answers EVAL's BUSY error, as Redis does.
fn function_stats(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let running = match ctx.state.busy.as_ref() {
        Some(busy) => match &busy.function {
            None => return Err(CmdError::new(BUSY)),
            Some(f) => Reply::Map(vec![
                (Reply::bulk_static("name"), Reply::Bulk(f.name.clone())),
                (
                    Reply::bulk_static("command"),
                    Reply::Array(f.command.iter().cloned().map(Reply::Bulk).collect()),
                ),
                (Reply::bulk_static("duration_ms"), Reply::Int(f.duration_ms() as i64)),
            ]),
        },
        None => Reply::Nil,
    };
    // Served during a busy function, the engine's scripting is not lent:
    // the counts are those the run started with (nothing changes them
    // while it runs).
    let (libraries, functions) = match (ctx.scripts.as_deref(), ctx.state.busy.as_ref()) {
        (Some(scripts), _) => scripts
            .functions
            .as_deref()
            .map_or((0, 0), |f| (f.library_count(), f.function_count())),
        (None, Some(busy)) => busy.function.as_ref().map_or((0, 0), |f| f.counts),
        (None, None) => (0, 0),
    };
    Ok(Reply::Map(vec![
        (Reply::bulk_static("running_script"), running),
        (
            Reply::bulk_static("engines"),
            Reply::Map(vec![(
                Reply::bulk_static("LUA"),
                Reply::Map(vec![
                    (Reply::bulk_static("libraries_count"), Reply::Int(libraries as i64)),
                    (Reply::bulk_static("functions_count"), Reply::Int(functions as i64)),
                ]),
            )]),
        ),
    ]))
}

/// FUNCTION KILL: Redis's `scriptKill` for functions.
fn function_kill(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    kill_busy(ctx, false)
}

/// SCRIPT KILL and FUNCTION KILL (Redis's `scriptKill`): each stops only
/// its own kind of script, unless it has written.
pub(crate) fn kill_busy(ctx: &mut Ctx, eval: bool) -> CmdResult {
    let Some(busy) = ctx.state.busy.as_mut() else {
        return Err(CmdError::new("NOTBUSY No scripts in execution right now."));
    };
    if !busy.killable {
        return Err(CmdError::new(UNKILLABLE));
    }
    match (eval, busy.function.is_some()) {
        (true, true) => Err(CmdError::new(BUSY_FUNCTION)),
        (false, false) => Err(CmdError::new(BUSY)),
        _ => {
            busy.action = Some(BusyAction::Kill);
            Ok(Reply::OK)
        }
    }
}

fn function_dump(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let compression = ctx.state.params.value("rdbcompression") != Some("no");
    let payload = Scripts::lent(&mut ctx.scripts)?.functions()?.dump(compression);
    Ok(Reply::Bulk(Bytes::from(payload)))
}

/// FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE] (APPEND by default).
fn function_restore(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() > 4 {
        return Err(subcommand_syntax(argv));
    }
    let policy = match argv.get(3).map(|p| upper(p)) {
        None => RestorePolicy::Append,
        Some(p) if p == "APPEND" => RestorePolicy::Append,
        Some(p) if p == "REPLACE" => RestorePolicy::Replace,
        Some(p) if p == "FLUSH" => RestorePolicy::Flush,
        Some(_) => {
            return Err(CmdError::err(
                "Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            ));
        }
    };
    Scripts::lent(&mut ctx.scripts)?.functions()?.restore(&argv[2], policy)?;
    ctx.dirty(1);
    Ok(Reply::OK)
}

fn function_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(super::server::help_reply(
        "FUNCTION",
        &[
            "LOAD [REPLACE] <FUNCTION CODE>",
            "    Create a new library with the given library name and code.",
            "DELETE <LIBRARY NAME>",
            "    Delete the given library.",
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "    Return general information on all the libraries:",
            "    * Library name",
            "    * The engine used to run the Library",
            "    * Library description",
            "    * Functions list",
            "    * Library code (if WITHCODE is given)",
            "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
            "STATS",
            "    Return information about the current function running:",
            "    * Function name",
            "    * Command used to run the function",
            "    * Duration in MS that the function is running",
            "    If no function is running, return nil",
            "    In addition, returns a list of available engines.",
            "KILL",
            "    Kill the current running function.",
            "FLUSH [ASYNC|SYNC]",
            "    Delete all the libraries.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the libraries.",
            "    * SYNC: Synchronously flush the libraries.",
            "DUMP",
            "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
            "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
            "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
            "    control how to handle existing libraries (default APPEND):",
            "    * FLUSH: delete all existing libraries.",
            "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
            "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
            "      libraries with the new libraries (notice that even on this option there is a chance of failure",
            "      in case of functions name collision with another library).",
        ],
    ))
}
