//! `redis.call` / `redis.pcall`: a command from a script, checked and run
//! as Redis's `scriptCall` does, through the same `State::call` as a
//! client's command.

use std::cell::Cell;

use mlua::{Lua, MultiValue, Value};

use super::convert;
use crate::commands::table::{Registry, flag};
use crate::engine::{Client, State};

/// What `redis.call` works with during one run.
pub struct CallContext<'a> {
    pub state: &'a mut State,
    /// The script's own client: the caller's database, `[0 lua]` in MONITOR.
    pub client: &'a mut Client,
    pub read_only: bool,
    pub runtime_resp: &'a Cell<u8>,
    pub wrote: &'a Cell<bool>,
}

/// Runs `redis.call(cmd, args…)`; returns the converted reply and whether
/// it is an error (which `redis.call` raises and `redis.pcall` returns).
pub fn native_call(lua: &Lua, cx: &mut CallContext, args: MultiValue) -> mlua::Result<(Value, bool)> {
    let argv = match super::api::command_args(&args) {
        Ok(argv) => argv,
        Err(text) => return failure(lua, text, false),
    };
    let registry = Registry::get();
    let Some(mut cmd) = registry.lookup(&argv[0]) else {
        return failure(lua, "ERR Unknown Redis command called from script", true);
    };
    if cmd.spec.handler.is_none() && argv.len() > 1 {
        match cmd.subcommand(&argv[1]) {
            Some(sub) => cmd = sub,
            None => return failure(lua, "ERR Unknown Redis command called from script", true),
        }
    }
    if !cmd.spec.arity_ok(argv.len()) {
        return failure(lua, "ERR Wrong number of args calling Redis command from script", true);
    }
    if cmd.spec.has(flag::NOSCRIPT) {
        return failure(lua, "ERR This Redis command is not allowed from script", true);
    }
    // Redis refuses anything that could propagate (PUBLISH too) in a read-only script.
    if cx.read_only && cmd.spec.has(flag::WRITE | flag::MAY_REPLICATE) {
        return failure(lua, "ERR Write commands are not allowed from read-only scripts.", true);
    }
    if cmd.spec.has(flag::WRITE) {
        cx.wrote.set(true);
    }
    let CallContext {
        state,
        client,
        runtime_resp,
        ..
    } = &mut *cx;
    // Replies take the shape of the protocol the script selected.
    let resp = runtime_resp.get();
    client.resp = resp;
    let reply = state.call(client, cmd, &argv);
    let failed = reply.is_error();
    Ok((convert::reply_to_lua(lua, &reply, resp)?, failed))
}

fn failure(lua: &Lua, text: &str, ignore_stats: bool) -> mlua::Result<(Value, bool)> {
    let t = lua.create_table()?;
    t.set("err", text)?;
    if ignore_stats {
        t.set("ignore_error_stats_update", true)?;
    }
    Ok((Value::Table(t), true))
}

/// The run in progress, as `redis.call` finds it (Lua app data).
#[derive(Clone, Copy)]
struct ActiveRun(*mut CallContext<'static>);

/// Runs `f` (the script) with `cx` reachable from `redis.call`.
///
/// The context lives on the caller's stack; Lua only holds a pointer to it
/// while `f` runs, and it is removed before this returns, so no callback
/// can see it afterwards. This avoids building a scoped closure for every
/// script run.
pub fn with_active_run<R>(lua: &Lua, cx: &mut CallContext, f: impl FnOnce() -> R) -> R {
    let ptr: *mut CallContext<'static> = std::ptr::from_mut(cx).cast();
    lua.set_app_data(ActiveRun(ptr));
    let result = f();
    lua.remove_app_data::<ActiveRun>();
    result
}

/// `redis.call` / `redis.pcall` body: the command for the run in progress.
pub fn call_in_active_run(lua: &Lua, args: MultiValue) -> Option<mlua::Result<(Value, bool)>> {
    let ActiveRun(ptr) = *lua.app_data_ref::<ActiveRun>()?;
    // SAFETY: the pointer was set by `with_active_run` from a live `&mut
    // CallContext` that outlives the script call and is only used here, on
    // the engine thread, one command at a time: a command run by
    // `native_call` never re-enters Lua, so no second reference exists.
    let cx = unsafe { &mut *ptr };
    Some(native_call(lua, cx, args))
}
