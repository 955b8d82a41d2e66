//! The native half of the `redis.*` API and of `math.random`.
//!
//! Every function here is a C function to Lua. That matters for fidelity:
//! Redis's `redis.call` and friends are C functions, so `return
//! redis.call(…)` keeps the script's frame on the stack and errors point
//! at the script's line; a Lua wrapper would be tail-called away. Errors
//! that Redis raises as tables (`{err="ERR …"}`) or as positioned strings
//! are stashed in the runtime and raised as an opaque Rust error; the
//! prelude's error handler and `pcall` pick the stashed value up, so
//! scripts observe exactly the value Redis would have thrown.

use std::rc::Rc;

use bytes::Bytes;
use mlua::{Lua, MultiValue, Table, Value};

use super::{Runtime, sha1_hex};
use crate::commands::table::Registry;

/// Raises `value` as the script-visible error.
fn raise(rt: &Runtime, value: Value) -> mlua::Error {
    *rt.pending_error.borrow_mut() = Some(value);
    mlua::Error::RuntimeError("redis script error".into())
}

/// Raises Redis's `{err="ERR …"}` table.
fn raise_table(lua: &Lua, rt: &Runtime, text: &str) -> mlua::Error {
    match err_table(lua, text) {
        Ok(t) => raise(rt, Value::Table(t)),
        Err(e) => e,
    }
}

/// Raises a string error positioned like `luaL_error` (`user_script:3: …`).
fn raise_positioned(lua: &Lua, rt: &Runtime, text: &str) -> mlua::Error {
    let place = lua
        .inspect_stack(1, |d| {
            let src = d.source();
            match (src.short_src, d.current_line()) {
                (Some(s), Some(line)) => format!("{s}:{line}: "),
                _ => String::new(),
            }
        })
        .unwrap_or_default();
    match lua.create_string(format!("{place}{text}")) {
        Ok(s) => raise(rt, Value::String(s)),
        Err(e) => e,
    }
}

fn err_table(lua: &Lua, text: &str) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("err", text)?;
    Ok(t)
}

/// `lua_tolstring`: strings as they are, numbers with Lua's `%.14g`, else nothing.
fn lua_text(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Number(n) => Some(crate::numfmt::fmt_g(*n, 14).into_bytes()),
        Value::Integer(n) => Some(n.to_string().into_bytes()),
        _ => None,
    }
}

/// `lua_tonumber`: numbers and numeric strings, else 0.
fn lua_number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => Some(*n),
        Value::Integer(n) => Some(*n as f64),
        Value::String(s) => s.to_str().ok().and_then(|s| {
            let t = s.trim();
            if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                i64::from_str_radix(hex, 16).ok().map(|n| n as f64)
            } else {
                t.parse::<f64>().ok()
            }
        }),
        _ => None,
    }
}

/// C's `(int)` cast of a double on x86-64 (out of range: INT_MIN).
fn c_int(n: f64) -> i32 {
    if n.is_nan() || n >= 2_147_483_648.0 || n <= -2_147_483_649.0 {
        i32::MIN
    } else {
        n as i32
    }
}

/// Builds the `native` table the prelude installs into `redis` and `math`.
pub(crate) fn helpers(lua: &Lua, rt: &Rc<Runtime>) -> mlua::Result<Table> {
    let native = lua.create_table()?;
    // SAFETY: both are C functions written for Lua's calling convention
    // (see raw_call.rs).
    unsafe {
        native.set("call", lua.create_c_function(super::raw_call::redis_call)?)?;
        native.set("pcall", lua.create_c_function(super::raw_call::redis_pcall)?)?;
    }

    let r = rt.clone();
    native.set(
        "sha1hex",
        lua.create_function(move |lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(raise_table(lua, &r, "ERR wrong number of arguments"));
            }
            let bytes = args.front().and_then(lua_text).unwrap_or_default();
            lua.create_string(sha1_hex(&bytes))
        })?,
    )?;

    let r = rt.clone();
    native.set(
        "log",
        lua.create_function(move |lua, args: MultiValue| {
            if args.len() < 2 {
                return Err(raise_table(lua, &r, "ERR redis.log() requires two arguments or more."));
            }
            let Some(level) = args.front().and_then(lua_number) else {
                return Err(raise_table(lua, &r, "ERR First argument must be a number (log level)."));
            };
            let level = c_int(level);
            if !(0..=3).contains(&level) {
                return Err(raise_table(lua, &r, "ERR Invalid debug level."));
            }
            let parts: Vec<String> = args
                .iter()
                .skip(1)
                .filter_map(lua_text)
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .collect();
            let line = parts.join(" ");
            match level {
                0 => tracing::debug!(target: "keylock::script", "{line}"),
                1 | 2 => tracing::info!(target: "keylock::script", "{line}"),
                _ => tracing::warn!(target: "keylock::script", "{line}"),
            }
            Ok(())
        })?,
    )?;

    let r = rt.clone();
    native.set(
        "setresp",
        lua.create_function(move |lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(raise_table(lua, &r, "ERR redis.setresp() requires one argument."));
            }
            let resp = c_int(args.front().and_then(lua_number).unwrap_or(0.0));
            if resp != 2 && resp != 3 {
                return Err(raise_table(lua, &r, "ERR RESP version must be 2 or 3."));
            }
            r.resp.set(resp as u8);
            Ok(())
        })?,
    )?;

    let r = rt.clone();
    native.set(
        "set_repl",
        lua.create_function(move |lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(raise_table(lua, &r, "ERR redis.set_repl() requires two arguments."));
            }
            let flags = c_int(args.front().and_then(lua_number).unwrap_or(0.0));
            if flags & !3 != 0 {
                return Err(raise_table(
                    lua,
                    &r,
                    "ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
                ));
            }
            Ok(())
        })?,
    )?;

    let r = rt.clone();
    native.set(
        "acl_check_cmd",
        lua.create_function(move |lua, args: MultiValue| {
            let argv = match command_args(&args) {
                Ok(argv) => argv,
                Err(text) => return Err(raise_table(lua, &r, text)),
            };
            let registry = Registry::get();
            let found = registry.lookup(&argv[0]).and_then(|c| {
                if c.spec.handler.is_none() && argv.len() > 1 {
                    c.subcommand(&argv[1])
                } else {
                    Some(c)
                }
            });
            match found {
                // The default user may run every command.
                Some(_) => Ok(true),
                None => Err(raise_table(lua, &r, "ERR Invalid command passed to redis.acl_check_cmd()")),
            }
        })?,
    )?;

    let r = rt.clone();
    native.set(
        "random",
        lua.create_function(move |lua, args: MultiValue| {
            let x = super::rand48_next(r.rng.get());
            r.rng.set(x);
            let value = (x >> 17) & 0x7FFF_FFFF;
            let f = (value % super::RAND48_MAX) as f64 / super::RAND48_MAX as f64;
            let check = |i: usize| -> mlua::Result<i32> {
                match args.get(i).and_then(lua_number) {
                    Some(n) => Ok(c_int(n)),
                    None => {
                        let got = args.get(i).map_or("no value", |v| v.type_name());
                        Err(raise_positioned(
                            lua,
                            &r,
                            &format!("bad argument #{} to 'random' (number expected, got {got})", i + 1),
                        ))
                    }
                }
            };
            match args.len() {
                0 => Ok(f),
                1 => {
                    let u = check(0)?;
                    if u < 1 {
                        return Err(raise_positioned(lua, &r, "bad argument #1 to 'random' (interval is empty)"));
                    }
                    Ok((f * u as f64).floor() + 1.0)
                }
                2 => {
                    let l = check(0)?;
                    let u = check(1)?;
                    if l > u {
                        return Err(raise_positioned(lua, &r, "bad argument #2 to 'random' (interval is empty)"));
                    }
                    Ok((f * (u as f64 - l as f64 + 1.0)).floor() + l as f64)
                }
                _ => Err(raise_positioned(lua, &r, "wrong number of arguments")),
            }
        })?,
    )?;

    let r = rt.clone();
    native.set(
        "randomseed",
        lua.create_function(move |lua, args: MultiValue| {
            let Some(seed) = args.front().and_then(lua_number) else {
                let got = args.front().map_or("no value", |v| v.type_name());
                return Err(raise_positioned(
                    lua,
                    &r,
                    &format!("bad argument #1 to 'randomseed' (number expected, got {got})"),
                ));
            };
            let seed = c_int(seed) as u32 as u64;
            r.rng.set((seed << 16) | 0x330E);
            Ok(())
        })?,
    )?;

    let r = rt.clone();
    native.set(
        "take_pending_error",
        lua.create_function(move |_, ()| Ok(r.pending_error.borrow_mut().take().unwrap_or(Value::Nil)))?,
    )?;

    native.set("REDIS_VERSION", crate::REDIS_VERSION)?;
    native.set("REDIS_VERSION_NUM", super::redis_version_num())?;
    Ok(native)
}

/// A command's arguments from Lua values, with Redis's errors.
pub fn command_args(args: &MultiValue) -> Result<Vec<Bytes>, &'static str> {
    if args.is_empty() {
        return Err(super::call::NO_ARGUMENTS);
    }
    let mut argv = Vec::with_capacity(args.len());
    for v in args.iter() {
        match v {
            Value::String(s) => argv.push(Bytes::copy_from_slice(&s.as_bytes())),
            // Redis formats numbers itself, with full precision.
            Value::Number(n) => argv.push(Bytes::from(crate::numfmt::fmt_g(*n, 17))),
            Value::Integer(n) => argv.push(Bytes::from(crate::numfmt::fmt_g(*n as f64, 17))),
            _ => return Err(super::call::BAD_ARGUMENT),
        }
    }
    Ok(argv)
}
