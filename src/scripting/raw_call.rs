//! `redis.call` and `redis.pcall` as plain Lua C functions, reading their
//! arguments from the Lua stack and pushing the converted reply onto it,
//! as Redis's `luaRedisGenericCommand` does.
//!
//! Through mlua's safe callback layer every call collected its arguments
//! into a `MultiValue` of registry references and dropped them again; that
//! plumbing was a fifth of running a small script such as Redisson's
//! lock-acquire. Replies convert by Redis 7.0's rules (`script_lua.c`): a
//! RESP2 script sees nil bulk and nil arrays as `false`, statuses as
//! `{ok=…}`, errors as `{err=…}`; under `redis.setresp(3)` maps, sets,
//! doubles, booleans and nulls get their RESP3 shapes. The scripting
//! tests, the Lua library checks and the differential scripting corpus
//! hold this to Redis's behaviour.
//!
//! Lua errors unwind with `longjmp`, which must not skip Rust destructors.
//! So the work that owns values (reading arguments, running the command)
//! happens in `collect_and_run`, which cannot raise; its outcome is then
//! leaked into a raw pointer while it is pushed (a push can raise on
//! memory exhaustion: the outcome then leaks instead of being dropped) and
//! reclaimed afterwards, before `lua_error` raises a failed call's table.

use std::ffi::{c_char, c_int};

use bytes::Bytes;
use mlua::ffi;

use super::{call, ldb};
use crate::reply::Reply;

/// What a call produced, before anything is pushed.
enum Outcome {
    /// The command ran; an error reply is raised by `redis.call`.
    Reply { reply: Reply, resp: u8 },
    /// Refused before running (bad arguments, unknown or forbidden command).
    Refused { text: Bytes, ignore_stats: bool },
    /// Called with no script running (a function kept from an earlier run).
    NotInRun,
}

/// `redis.call`.
pub unsafe extern "C-unwind" fn redis_call(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: called by Lua with a valid state.
    unsafe { call_raw(state, true) }
}

/// `redis.pcall`.
pub unsafe extern "C-unwind" fn redis_pcall(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: called by Lua with a valid state.
    unsafe { call_raw(state, false) }
}

unsafe fn call_raw(state: *mut ffi::lua_State, raise_errors: bool) -> c_int {
    // SAFETY: `state` is the running Lua state. No value with a destructor
    // lives in this frame while Lua may raise: the outcome is a raw pointer
    // until it is reclaimed, after the pushes.
    unsafe {
        // A panic must not unwind through Lua's C frames: whatever is not
        // caught at the command boundary (State::call) is caught here.
        let outcome = std::panic::catch_unwind(|| collect_and_run(state)).unwrap_or(Outcome::Refused {
            text: Bytes::from_static(b"ERR internal error in redis.call; the command was aborted (see the server log)"),
            ignore_stats: false,
        });
        let outcome = Box::into_raw(Box::new(outcome));
        // The arguments are copied: free their slots, so a call with
        // thousands of them (as `unpack` gives) still has room for the reply.
        ffi::lua_settop(state, 0);
        let (failed, always_raise) = push_outcome(state, &*outcome);
        if let Outcome::Reply { reply, resp } = &*outcome {
            // After the conversion, which logs the errors it finds.
            ldb::log_reply(reply, *resp);
        }
        drop(Box::from_raw(outcome));
        if always_raise || (failed && raise_errors) {
            ffi::lua_error(state)
        }
        1
    }
}

/// Reads the arguments (strings as they are, numbers as `%.17g`) and runs
/// the command for the script in progress. Raises nothing.
unsafe fn collect_and_run(state: *mut ffi::lua_State) -> Outcome {
    // SAFETY: only type checks and reads of stack slots 1..=top, which
    // exist; `lua_tolstring` is called on strings only, so it converts
    // nothing and cannot allocate (or raise).
    let argv = unsafe {
        let top = ffi::lua_gettop(state);
        if top == 0 {
            return refused(call::NO_ARGUMENTS, false);
        }
        let mut argv = Vec::with_capacity(top as usize);
        for i in 1..=top {
            match ffi::lua_type(state, i) {
                ffi::LUA_TSTRING => {
                    let mut len = 0usize;
                    let ptr = ffi::lua_tolstring(state, i, &mut len);
                    argv.push(Bytes::copy_from_slice(std::slice::from_raw_parts(ptr as *const u8, len)));
                }
                ffi::LUA_TNUMBER => argv.push(Bytes::from(crate::numfmt::fmt_g(ffi::lua_tonumber(state, i), 17))),
                _ => return refused(call::BAD_ARGUMENT, false),
            }
        }
        argv
    };
    let Some(cx) = call::active_run() else {
        return Outcome::NotInRun;
    };
    // A debugging session shows what the script runs while the user steps.
    ldb::log_command(&argv);
    let cmd = match crate::engine::exec::for_script(cx.state, cx.client, &argv, &cx.limits, &cx.runtime.wrote) {
        Ok(cmd) => cmd,
        Err(refusal) => {
            // Counted here, so flagged: the script's own error is not
            // counted again.
            refusal.book(&mut cx.state.stats);
            ldb::log_refusal(refusal.error.as_bytes());
            return Outcome::Refused {
                text: Bytes::from(refusal.error.as_bytes().to_vec()),
                ignore_stats: true,
            };
        }
    };
    // Replies take the shape of the protocol the script selected.
    let resp = cx.runtime.resp.get();
    cx.client.resp = resp;
    let reply = cx.state.call(None, cx.client, cmd, &argv);
    Outcome::Reply { reply, resp }
}

fn refused(text: &'static str, ignore_stats: bool) -> Outcome {
    ldb::log_refusal(text.as_bytes());
    Outcome::Refused {
        text: Bytes::from_static(text.as_bytes()),
        ignore_stats,
    }
}

/// Pushes the call's result; returns (the call failed, raise even from
/// `pcall`).
unsafe fn push_outcome(state: *mut ffi::lua_State, outcome: &Outcome) -> (bool, bool) {
    // SAFETY: pushes onto the running state, with room checked as it goes.
    unsafe {
        match outcome {
            Outcome::Reply { reply, resp } => {
                push_reply(state, reply, *resp);
                (reply.is_error(), false)
            }
            Outcome::Refused { text, ignore_stats } => {
                push_error_table(state, text, *ignore_stats);
                (true, false)
            }
            Outcome::NotInRun => {
                push_error_table(state, b"ERR redis.call/pcall can only be called inside a script invocation", false);
                (true, true)
            }
        }
    }
}

unsafe fn push_bytes(state: *mut ffi::lua_State, b: &[u8]) {
    // SAFETY: `b` is valid for `b.len()` bytes; Lua copies it.
    unsafe {
        ffi::lua_pushlstring(state, b.as_ptr() as *const c_char, b.len());
    }
}

/// `{err=text}`, flagged `ignore_error_stats_update` when the error was
/// already counted (a command's own error reply, or a flagged refusal).
unsafe fn push_error_table(state: *mut ffi::lua_State, text: &[u8], ignore_stats: bool) {
    // SAFETY: a fresh table and its two fields, on the running state.
    unsafe {
        ffi::luaL_checkstack(state, 3, c"reply too deep".as_ptr());
        ffi::lua_createtable(state, 0, 2);
        push_bytes(state, text);
        ffi::lua_setfield(state, -2, c"err".as_ptr());
        if ignore_stats {
            ffi::lua_pushboolean(state, 1);
            ffi::lua_setfield(state, -2, c"ignore_error_stats_update".as_ptr());
        }
    }
}

/// Wraps the value on top of the stack as `{field=value}`.
unsafe fn wrap(state: *mut ffi::lua_State, field: &std::ffi::CStr) {
    // SAFETY: the value is on top; the table goes under it, then takes it.
    unsafe {
        ffi::lua_createtable(state, 0, 1);
        ffi::lua_insert(state, -2);
        ffi::lua_setfield(state, -2, field.as_ptr());
    }
}

/// `convert::reply_to_lua`, onto the stack.
unsafe fn push_reply(state: *mut ffi::lua_State, reply: &Reply, resp: u8) {
    // SAFETY: every branch pushes exactly one value, room checked first.
    unsafe {
        ffi::luaL_checkstack(state, 4, c"reply too deep".as_ptr());
        match reply {
            Reply::Status(s) => {
                ffi::lua_createtable(state, 0, 1);
                push_bytes(state, s);
                ffi::lua_setfield(state, -2, c"ok".as_ptr());
            }
            Reply::Error(e) => {
                // Logged as Redis's conversion logs an error reply.
                ldb::log_error(&[&b"-"[..], e].concat());
                push_error_table(state, e, true)
            }
            Reply::Int(n) => ffi::lua_pushnumber(state, *n as f64),
            Reply::Bulk(b) => push_bytes(state, b),
            // Raw bytes are tracking pushes, never a command's reply.
            Reply::Nil | Reply::NilArray | Reply::Raw(_) => {
                if resp >= 3 {
                    ffi::lua_pushnil(state)
                } else {
                    ffi::lua_pushboolean(state, 0)
                }
            }
            // An attribute and the reply it annotates (DEBUG PROTOCOL
            // attrib): scripts see the reply alone, as Redis's Lua parser
            // skips attributes.
            Reply::Many(items) if items.len() == 2 && matches!(items[0], Reply::Raw(_)) => push_reply(state, &items[1], resp),
            Reply::Array(items) | Reply::Push(items) | Reply::Many(items) => push_array(state, items.len(), items.iter(), resp),
            Reply::Set(items) => {
                if resp >= 3 {
                    ffi::lua_createtable(state, 0, items.len() as c_int);
                    for item in items {
                        push_reply(state, item, resp);
                        ffi::lua_pushboolean(state, 1);
                        ffi::lua_settable(state, -3);
                    }
                    wrap(state, c"set");
                } else {
                    push_array(state, items.len(), items.iter(), resp);
                }
            }
            Reply::Map(pairs) => {
                if resp >= 3 {
                    ffi::lua_createtable(state, 0, pairs.len() as c_int);
                    for (k, v) in pairs {
                        push_reply(state, k, resp);
                        push_reply(state, v, resp);
                        ffi::lua_settable(state, -3);
                    }
                    wrap(state, c"map");
                } else {
                    push_array(state, pairs.len() * 2, pairs.iter().flat_map(|(k, v)| [k, v]), resp);
                }
            }
            Reply::Double(d) => {
                if resp >= 3 {
                    ffi::lua_pushnumber(state, *d);
                    wrap(state, c"double");
                } else {
                    push_bytes(state, crate::numfmt::reply_double(*d).as_bytes());
                }
            }
            Reply::HumanDouble(d) => {
                if resp >= 3 {
                    ffi::lua_pushnumber(state, *d);
                    wrap(state, c"double");
                } else {
                    push_bytes(state, crate::numfmt::human_double(*d).as_bytes());
                }
            }
            Reply::Bool(b) => {
                if resp >= 3 {
                    ffi::lua_pushboolean(state, *b as c_int)
                } else {
                    ffi::lua_pushnumber(state, *b as i64 as f64)
                }
            }
            Reply::Verbatim(format, text) => {
                if resp >= 3 {
                    ffi::lua_createtable(state, 0, 2);
                    push_bytes(state, text);
                    ffi::lua_setfield(state, -2, c"string".as_ptr());
                    push_bytes(state, format);
                    ffi::lua_setfield(state, -2, c"format".as_ptr());
                    wrap(state, c"verbatim_string");
                } else {
                    push_bytes(state, text);
                }
            }
            Reply::BigNumber(n) => {
                push_bytes(state, n);
                if resp >= 3 {
                    wrap(state, c"big_number");
                }
            }
        }
    }
}

/// An array of converted items; items that convert to nil leave holes.
unsafe fn push_array<'r>(state: *mut ffi::lua_State, len: usize, items: impl Iterator<Item = &'r Reply>, resp: u8) {
    // SAFETY: the table stays on top between items; each item pushes one value.
    unsafe {
        ffi::lua_createtable(state, len as c_int, 0);
        for (i, item) in items.enumerate() {
            push_reply(state, item, resp);
            if ffi::lua_type(state, -1) == ffi::LUA_TNIL {
                ffi::lua_pop(state, 1);
            } else {
                ffi::lua_rawseti(state, -2, (i + 1) as ffi::lua_Integer);
            }
        }
    }
}
