//! The scripting environment Redis 7.0.15 builds around its Lua state
//! (`luaRegisterRedisAPI` and `scriptingInit`), on top of the state
//! `lua_libs` opens: the `redis` table, Redis's `pcall`, `math.random` on
//! Redis's PRNG, the error handler, and the protection.
//!
//! Every function here is a Lua C function ported from Redis's
//! `script_lua.c` / `eval.c`, with its texts, argument rules and quirks
//! (C strings cut at a NUL where Redis uses `lua_tostring`, `(int)` casts of
//! doubles). C functions matter for fidelity: `return redis.call(…)` keeps
//! the script's frame on the stack, so errors point at the script's line,
//! and the error handler, which skips one C frame, lands where Redis's does.
//!
//! Protection is Redis's own mechanism, in the Lua core: every table
//! reachable from the globals (libraries, `redis`, metatables, `_G`) and
//! the metatables of the basic types (the string metatable among them,
//! for CVE-2025-46818) carry the read-only flag, so any store into them,
//! raw or not, raises "Attempt to modify a readonly table"; the globals'
//! metatable raises "Script attempted to access nonexistent global
//! variable" for unknown names. Nothing one script does to a table it did
//! not create survives into the next.
//!
//! Lua errors unwind with `longjmp`, which must not skip Rust destructors:
//! these functions keep no owning value alive where Lua may raise.

use std::ffi::{CStr, c_char, c_int};

use mlua::ffi;

use super::call;
use super::lua_libs::set_metatable_function;
use bytes::Bytes;

unsafe extern "C" {
    /// Redis's core patch: sets or clears a table's read-only flag.
    pub(crate) fn lua_enablereadonlytable(state: *mut ffi::lua_State, index: c_int, enabled: c_int);
    /// Redis's core patch: whether a table is read-only.
    pub(crate) fn lua_isreadonlytable(state: *mut ffi::lua_State, index: c_int) -> c_int;
}

/// Redis's error handler, byte for byte (`scriptingInit`), loaded as the
/// chunk `@err_handler_def`: it takes `debug` into an upvalue and removes
/// the global.
const ERROR_HANDLER: &str = "local dbg = debug\n\
debug = nil\n\
function __redis__err__handler(err)\n  \
local i = dbg.getinfo(2,'nSl')\n  \
if i and i.what == 'C' then\n    \
i = dbg.getinfo(3,'nSl')\n  \
end\n  \
if type(err) ~= 'table' then\n    \
err = {err='ERR ' .. tostring(err)}  \
end  \
if i then\n    \
err['source'] = i.source\n    \
err['line'] = i.currentline\n  \
end  \
return err\n\
end\n";

/// Names the reply conversion pushes as table keys: kept referenced from
/// the registry so pushing them never allocates (and so never raises).
pub(crate) const REPLY_FIELDS: [&CStr; 10] = [
    c"err",
    c"ok",
    c"double",
    c"big_number",
    c"verbatim_string",
    c"format",
    c"string",
    c"map",
    c"set",
    c"ignore_error_stats_update",
];

/// Builds Redis's scripting environment in a state made by
/// `lua_libs::new_redis_lua`.
///
/// # Safety
/// Runs inside a protected call on that state, with at least LUA_MINSTACK
/// free slots.
pub(crate) unsafe fn install(state: *mut ffi::lua_State) {
    // SAFETY: a protected call is in progress; each step leaves the stack
    // as it found it.
    unsafe {
        install_redis_api(state);

        // scriptingInit: the debugger entry points, then the error handler.
        ffi::lua_getfield(state, ffi::LUA_GLOBALSINDEX, c"redis".as_ptr());
        set_functions(
            state,
            &[
                (c"breakpoint", super::ldb::lua_breakpoint),
                (c"debug", super::ldb::lua_debug),
                (c"replicate_commands", replicate_commands),
            ],
        );
        ffi::lua_setfield(state, ffi::LUA_GLOBALSINDEX, c"redis".as_ptr());

        if ffi::luaL_loadbuffer(
            state,
            ERROR_HANDLER.as_ptr() as *const c_char,
            ERROR_HANDLER.len(),
            c"@err_handler_def".as_ptr(),
        ) == 0
        {
            ffi::lua_call(state, 0, 0);
        } else {
            ffi::lua_error(state);
        }

        // Lock the globals: unknown names raise, and every table reachable
        // from them (and the basic types' metatables) is read-only.
        ffi::lua_pushvalue(state, ffi::LUA_GLOBALSINDEX);
        set_error_metatable(state);
        protect_recursively(state);
        ffi::lua_pop(state, 1);
        protect_basic_types(state);

        anchor_reply_fields(state);
    }
}

/// `luaRegisterRedisAPI` after the libraries: Redis's `pcall` (and
/// keylock's `xpcall`), the `redis` table, and `math.random` on Redis's
/// PRNG. Shared by the EVAL VM and the functions' VM.
///
/// # Safety
/// As [`install`].
pub(crate) unsafe fn install_redis_api(state: *mut ffi::lua_State) {
    // SAFETY: as documented; each step leaves the stack as it found it.
    unsafe {
        ffi::lua_pushcfunction(state, pcall);
        ffi::lua_setfield(state, ffi::LUA_GLOBALSINDEX, c"pcall".as_ptr());
        // keylock's own: xpcall that does not run the script's handler for
        // the error that stops a killed script (see scripting/mod.rs).
        ffi::lua_pushcfunction(state, xpcall);
        ffi::lua_setfield(state, ffi::LUA_GLOBALSINDEX, c"xpcall".as_ptr());

        ffi::lua_newtable(state);
        let functions: [(&CStr, ffi::lua_CFunction); 2] =
            [(c"call", super::raw_call::redis_call), (c"pcall", super::raw_call::redis_pcall)];
        set_functions(state, &functions);
        register_log_and_version(state);
        set_functions(
            state,
            &[
                (c"setresp", setresp),
                (c"sha1hex", sha1hex),
                (c"error_reply", error_reply),
                (c"status_reply", status_reply),
                (c"set_repl", set_repl),
            ],
        );
        set_numbers(
            state,
            &[
                (c"REPL_NONE", 0.0),
                (c"REPL_AOF", 1.0),
                (c"REPL_SLAVE", 2.0),
                (c"REPL_REPLICA", 2.0),
                (c"REPL_ALL", 3.0),
            ],
        );
        set_functions(state, &[(c"acl_check_cmd", acl_check_cmd)]);
        ffi::lua_setfield(state, ffi::LUA_GLOBALSINDEX, c"redis".as_ptr());

        ffi::lua_getfield(state, ffi::LUA_GLOBALSINDEX, c"math".as_ptr());
        set_functions(state, &[(c"random", math_random), (c"randomseed", math_randomseed)]);
        ffi::lua_setfield(state, ffi::LUA_GLOBALSINDEX, c"math".as_ptr());
    }
}

/// `luaRegisterLogFunction` + `luaRegisterVersion`, into the table on top.
///
/// # Safety
/// As [`install`], with a table on top.
pub(crate) unsafe fn register_log_and_version(state: *mut ffi::lua_State) {
    // SAFETY: as documented.
    unsafe {
        set_functions(state, &[(c"log", log)]);
        set_numbers(
            state,
            &[
                (c"LOG_DEBUG", 0.0),
                (c"LOG_VERBOSE", 1.0),
                (c"LOG_NOTICE", 2.0),
                (c"LOG_WARNING", 3.0),
                (c"REDIS_VERSION_NUM", super::redis_version_num()),
            ],
        );
        ffi::lua_pushlstring(state, crate::REDIS_VERSION.as_ptr() as *const c_char, crate::REDIS_VERSION.len());
        ffi::lua_setfield(state, -2, c"REDIS_VERSION".as_ptr());
    }
}

/// `luaSetErrorMetatable`: reading an unknown name from the table on top
/// raises "Script attempted to access nonexistent global variable".
///
/// # Safety
/// As [`install`], with a table on top.
pub(crate) unsafe fn set_error_metatable(state: *mut ffi::lua_State) {
    // SAFETY: as documented.
    unsafe { set_metatable_function(state, c"__index", nonexistent_global) }
}

/// The names the reply conversion pushes, kept referenced from the
/// registry (see [`REPLY_FIELDS`]).
///
/// # Safety
/// As [`install`].
pub(crate) unsafe fn anchor_reply_fields(state: *mut ffi::lua_State) {
    // SAFETY: as documented; the table is consumed by the registry store.
    unsafe {
        ffi::lua_createtable(state, REPLY_FIELDS.len() as c_int, 0);
        for (i, name) in REPLY_FIELDS.iter().enumerate() {
            ffi::lua_pushstring(state, name.as_ptr());
            ffi::lua_rawseti(state, -2, i as ffi::lua_Integer + 1);
        }
        ffi::lua_setfield(state, ffi::LUA_REGISTRYINDEX, c"keylock.reply_fields".as_ptr());
    }
}

pub(crate) unsafe fn set_functions(state: *mut ffi::lua_State, functions: &[(&CStr, ffi::lua_CFunction)]) {
    // SAFETY: a table on top; each function is stored into it.
    unsafe {
        for (name, f) in functions {
            ffi::lua_pushcfunction(state, *f);
            ffi::lua_setfield(state, -2, name.as_ptr());
        }
    }
}

unsafe fn set_numbers(state: *mut ffi::lua_State, numbers: &[(&CStr, f64)]) {
    // SAFETY: a table on top; each number is stored into it.
    unsafe {
        for (name, n) in numbers {
            ffi::lua_pushnumber(state, *n);
            ffi::lua_setfield(state, -2, name.as_ptr());
        }
    }
}

/// `luaSetTableProtectionRecursively`: the table on top, every table it
/// holds, and their metatables.
pub(crate) unsafe fn protect_recursively(state: *mut ffi::lua_State) {
    // SAFETY: a table on top; the walk is bounded by the (finite, acyclic
    // once flagged) set of tables reachable at start-up.
    unsafe {
        if lua_isreadonlytable(state, -1) != 0 {
            return;
        }
        lua_enablereadonlytable(state, -1, 1);
        ffi::luaL_checkstack_(state, 2, c"protecting tables".as_ptr());
        ffi::lua_pushnil(state);
        while ffi::lua_next(state, -2) != 0 {
            if ffi::lua_type(state, -1) == ffi::LUA_TTABLE {
                protect_recursively(state);
            }
            ffi::lua_pop(state, 1);
        }
        if ffi::lua_getmetatable(state, -1) != 0 {
            protect_recursively(state);
            ffi::lua_pop(state, 1);
        }
    }
}

/// `luaSetTableProtectionForBasicTypes`: the metatables of strings,
/// numbers, booleans, nil, functions, threads and light userdata.
pub(crate) unsafe fn protect_basic_types(state: *mut ffi::lua_State) {
    unsafe extern "C-unwind" fn nothing(_: *mut ffi::lua_State) -> c_int {
        0
    }
    // SAFETY: one sample value of each type is pushed and popped.
    unsafe {
        for kind in 0..7 {
            match kind {
                0 => {
                    ffi::lua_pushstring(state, c"".as_ptr());
                }
                1 => ffi::lua_pushnumber(state, 0.0),
                2 => ffi::lua_pushboolean(state, 0),
                3 => ffi::lua_pushnil(state),
                4 => ffi::lua_pushcfunction(state, nothing),
                5 => {
                    ffi::lua_newthread(state);
                }
                _ => ffi::lua_pushlightuserdata(state, state as *mut std::ffi::c_void),
            }
            if ffi::lua_getmetatable(state, -1) != 0 {
                protect_recursively(state);
                ffi::lua_pop(state, 1);
            }
            ffi::lua_pop(state, 1);
        }
    }
}

/// `luaProtectedTableError`: the globals' `__index`.
unsafe extern "C-unwind" fn nonexistent_global(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: called by Lua as a metamethod; luaL_error formats from the
    // Lua string on the stack.
    unsafe {
        if ffi::lua_gettop(state) != 2 {
            return ffi::luaL_error(state, c"Wrong number of arguments to luaProtectedTableError".as_ptr());
        }
        if ffi::lua_isstring(state, -1) == 0 && ffi::lua_isnumber(state, -1) == 0 {
            return ffi::luaL_error(
                state,
                c"Second argument to luaProtectedTableError must be a string or number".as_ptr(),
            );
        }
        let name = ffi::lua_tolstring(state, -1, std::ptr::null_mut());
        ffi::luaL_error(state, c"Script attempted to access nonexistent global variable '%s'".as_ptr(), name)
    }
}

/// Pushes Redis's error table for `text` (`luaPushErrorBuff`): `-CODE msg`
/// keeps its code, anything else gets `ERR`; CR and LF at either end of the
/// message are trimmed. `text` is copied before anything can raise.
///
/// # Safety
/// Three free stack slots (the table, and two strings while it is built).
pub(crate) unsafe fn push_error(state: *mut ffi::lua_State, text: &[u8]) {
    super::ldb::log_error(text);
    let (code, msg): (&[u8], &[u8]) = match text.strip_prefix(b"-") {
        Some(rest) => match rest.iter().position(|&c| c == b' ') {
            Some(space) => (&rest[..space], &rest[space + 1..]),
            None => (b"ERR", rest),
        },
        None => (b"ERR", text),
    };
    let is_break = |c: &u8| *c == b'\r' || *c == b'\n';
    let start = msg.iter().position(|c| !is_break(c)).unwrap_or(msg.len());
    let end = msg.iter().rposition(|c| !is_break(c)).map_or(start, |e| e + 1);
    let msg = &msg[start..end.max(start)];
    // SAFETY: the pieces are pushed as Lua strings (copies) and joined by
    // Lua; nothing owned by Rust is alive if an allocation raises.
    unsafe {
        ffi::lua_createtable(state, 0, 1);
        push_bytes(state, code);
        push_bytes(state, b" ");
        push_bytes(state, msg);
        ffi::lua_concat(state, 3);
        ffi::lua_setfield(state, -2, c"err".as_ptr());
    }
}

unsafe fn push_bytes(state: *mut ffi::lua_State, b: &[u8]) {
    // SAFETY: `b` is valid for its length; Lua copies it.
    unsafe {
        ffi::lua_pushlstring_(state, b.as_ptr() as *const c_char, b.len());
    }
}

/// `luaPushError` + `luaError`: raises Redis's error table.
unsafe fn raise(state: *mut ffi::lua_State, text: &'static [u8]) -> c_int {
    // SAFETY: the functions calling this own nothing when they do.
    unsafe {
        push_error(state, text);
        ffi::lua_error(state)
    }
}

/// The bytes of a string argument up to its first NUL, as Redis's
/// `lua_tostring` + `sdsnew` see them (numbers are converted in place).
unsafe fn c_string<'a>(state: *mut ffi::lua_State, index: c_int) -> Option<&'a [u8]> {
    // SAFETY: the pointer stays valid while the value is on the stack,
    // which outlives the borrow in every caller here.
    unsafe {
        let p = ffi::lua_tolstring(state, index, std::ptr::null_mut());
        (!p.is_null()).then(|| CStr::from_ptr(p).to_bytes())
    }
}

/// C's `(int)` cast of a double on x86-64 (out of range: INT_MIN).
pub(crate) fn c_int_cast(n: f64) -> i32 {
    if n.is_nan() || n >= 2_147_483_648.0 || n <= -2_147_483_649.0 {
        i32::MIN
    } else {
        n as i32
    }
}

/// `luaRedisPcall`: `pcall` that returns an error table's `err` field
/// instead of the table.
unsafe extern "C-unwind" fn pcall(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: Redis's code, stack operation by stack operation.
    unsafe {
        let argc = ffi::lua_gettop(state);
        ffi::lua_pushboolean(state, 1);
        ffi::lua_insert(state, 1);
        if ffi::lua_pcall(state, argc - 1, ffi::LUA_MULTRET, 0) != 0 {
            ffi::lua_remove(state, 1);
            if ffi::lua_type(state, -1) == ffi::LUA_TTABLE {
                ffi::lua_getfield_(state, -1, c"err".as_ptr());
                if ffi::lua_isstring(state, -1) != 0 {
                    ffi::lua_replace(state, -2);
                }
            }
            ffi::lua_pushboolean(state, 0);
            ffi::lua_insert(state, 1);
        }
        ffi::lua_gettop(state)
    }
}

/// Lua 5.1's `xpcall` (`luaB_xpcall`), with the handler wrapped so that it
/// is skipped for the error that stops a killed script: Lua calls error
/// handlers raised from a hook with hooks disabled, so a handler that
/// loops could never be stopped again.
unsafe extern "C-unwind" fn xpcall(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: luaB_xpcall's stack operations, plus the closure.
    unsafe {
        ffi::luaL_checkany(state, 2);
        ffi::lua_settop(state, 2);
        ffi::lua_pushcclosure(state, guarded_handler, 1);
        ffi::lua_insert(state, 1);
        let status = ffi::lua_pcall(state, 0, ffi::LUA_MULTRET, 1);
        ffi::lua_pushboolean(state, (status == 0) as c_int);
        ffi::lua_replace(state, 1);
        ffi::lua_gettop(state)
    }
}

/// The error handler `xpcall` installs: the script's handler (its upvalue),
/// unless the script is being stopped.
unsafe extern "C-unwind" fn guarded_handler(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: the handler is called like any Lua function, in the error
    // handling Lua is doing; errors it raises are Lua's to handle.
    unsafe {
        if super::run_killed() {
            return 1;
        }
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
        ffi::lua_insert(state, 1);
        ffi::lua_call(state, ffi::lua_gettop(state) - 1, 1);
        1
    }
}

/// `redis.sha1hex`.
unsafe extern "C-unwind" fn sha1hex(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: the digest is a fixed-size stack array.
    unsafe {
        if ffi::lua_gettop(state) != 1 {
            return raise(state, b"wrong number of arguments");
        }
        let mut len = 0usize;
        let p = ffi::lua_tolstring(state, 1, &mut len);
        let body: &[u8] = if p.is_null() {
            b""
        } else {
            std::slice::from_raw_parts(p as *const u8, len)
        };
        let digest = sha1_smol::Sha1::from(body).digest().bytes();
        let mut hex = [0u8; 40];
        for (i, b) in digest.iter().enumerate() {
            hex[2 * i] = b"0123456789abcdef"[(b >> 4) as usize];
            hex[2 * i + 1] = b"0123456789abcdef"[(b & 15) as usize];
        }
        push_bytes(state, &hex);
        1
    }
}

/// `redis.error_reply`.
unsafe extern "C-unwind" fn error_reply(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: the argument stays on the stack while its bytes are read.
    unsafe {
        if ffi::lua_gettop(state) != 1 || ffi::lua_type(state, -1) != ffi::LUA_TSTRING {
            push_error(state, b"wrong number or type of arguments");
            return 1;
        }
        let text = c_string(state, -1).unwrap_or_default();
        if text.first() == Some(&b'-') {
            push_error(state, text);
        } else {
            // "-" + text, without building it in Rust.
            push_bytes(state, b"-");
            ffi::lua_pushvalue(state, -2);
            ffi::lua_concat(state, 2);
            let joined = c_string(state, -1).unwrap_or_default();
            push_error(state, joined);
        }
        1
    }
}

/// `redis.status_reply`.
unsafe extern "C-unwind" fn status_reply(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: plain stack operations.
    unsafe {
        if ffi::lua_gettop(state) != 1 || ffi::lua_type(state, -1) != ffi::LUA_TSTRING {
            push_error(state, b"wrong number or type of arguments");
            return 1;
        }
        ffi::lua_newtable(state);
        ffi::lua_pushstring_(state, c"ok".as_ptr());
        ffi::lua_pushvalue(state, -3);
        ffi::lua_settable(state, -3);
        1
    }
}

/// `redis.set_repl`: where the script's next writes go (the append-only
/// file, replicas, both or neither), as Redis's `luaRedisSetReplCommand`.
unsafe extern "C-unwind" fn set_repl(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: plain stack operations.
    unsafe {
        if call::active_run().is_none() {
            return raise(state, b"redis.set_repl can only be called inside a script invocation");
        }
        if ffi::lua_gettop(state) != 1 {
            return raise(state, b"redis.set_repl() requires two arguments.");
        }
        let flags = c_int_cast(ffi::lua_tonumber(state, -1));
        if flags & !3 != 0 {
            return raise(
                state,
                b"Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
            );
        }
        if let Some(cx) = call::active_run() {
            cx.state.script_repl = flags as u8;
        }
        0
    }
}

/// `redis.acl_check_cmd`: whether the script's caller may run the
/// command with these arguments (Redis's `luaRedisAclCheckCmdPermissionsCommand`).
unsafe extern "C-unwind" fn acl_check_cmd(state: *mut ffi::lua_State) -> c_int {
    /// What the arguments name, decided before anything is pushed.
    enum Found {
        Command(bool),
        Unknown,
        BadArguments(&'static str),
    }
    // SAFETY: the lookup reads the arguments in place and owns nothing when
    // the result is pushed or raised.
    unsafe {
        let Some(cx) = call::active_run() else {
            return raise(state, b"redis.acl_check_cmd can only be called inside a script invocation");
        };
        let argc = ffi::lua_gettop(state);
        let found = if argc == 0 {
            Found::BadArguments(call::NO_ARGUMENTS)
        } else if (1..=argc).any(|i| !matches!(ffi::lua_type(state, i), ffi::LUA_TSTRING | ffi::LUA_TNUMBER)) {
            Found::BadArguments(call::BAD_ARGUMENT)
        } else {
            let arg = |i: c_int| -> &[u8] {
                let mut len = 0usize;
                let p = ffi::lua_tolstring(state, i, &mut len);
                std::slice::from_raw_parts(p as *const u8, len)
            };
            let argv: Vec<Bytes> = (1..=argc).map(|i| Bytes::copy_from_slice(arg(i))).collect();
            match crate::engine::exec::lookup(&cx.state.renames, &argv) {
                crate::engine::exec::Lookup::Found(cmd) => {
                    Found::Command(cx.state.acl.check(cx.client.user.as_deref(), cmd, &argv).is_ok())
                }
                _ => Found::Unknown,
            }
        };
        match found {
            Found::Command(allowed) => {
                ffi::lua_pushboolean(state, allowed as c_int);
                1
            }
            Found::Unknown => raise(state, b"Invalid command passed to redis.acl_check_cmd()"),
            // The texts carry their code; luaPushError adds it again unless
            // the text starts with '-'.
            Found::BadArguments(text) => {
                push_error(state, text.strip_prefix("ERR ").unwrap_or(text).as_bytes());
                ffi::lua_error(state)
            }
        }
    }
}

/// `redis.log`.
unsafe extern "C-unwind" fn log(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: the line is built and logged before returning; the raises
    // happen with nothing owned.
    unsafe {
        let argc = ffi::lua_gettop(state);
        if argc < 2 {
            return raise(state, b"redis.log() requires two arguments or more.");
        }
        if ffi::lua_isnumber(state, -argc) == 0 {
            return raise(state, b"First argument must be a number (log level).");
        }
        let level = c_int_cast(ffi::lua_tonumber(state, -argc));
        if !(0..=3).contains(&level) {
            return raise(state, b"Invalid debug level.");
        }
        // Redis writes the line to its log at the script's level, and
        // builds it only when that level is logged.
        let level = match level {
            0 => crate::log::Level::Debug,
            1 => crate::log::Level::Verbose,
            2 => crate::log::Level::Notice,
            _ => crate::log::Level::Warning,
        };
        if !crate::log::enabled(level) {
            return 0;
        }
        let mut line = Vec::new();
        for j in 1..argc {
            let mut len = 0usize;
            let p = ffi::lua_tolstring(state, -argc + j, &mut len);
            if !p.is_null() {
                if j != 1 {
                    line.push(b' ');
                }
                line.extend_from_slice(std::slice::from_raw_parts(p as *const u8, len));
            }
        }
        let line = String::from_utf8_lossy(&line);
        crate::log::log(level, format_args!("{line}"));
        0
    }
}

/// `redis.setresp`.
unsafe extern "C-unwind" fn setresp(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: plain stack operations.
    unsafe {
        let Some(cx) = call::active_run() else {
            return raise(state, b"redis.setresp can only be called inside a script invocation");
        };
        let argc = ffi::lua_gettop(state);
        if argc != 1 {
            return raise(state, b"redis.setresp() requires one argument.");
        }
        let resp = c_int_cast(ffi::lua_tonumber(state, -argc));
        if resp != 2 && resp != 3 {
            return raise(state, b"RESP version must be 2 or 3.");
        }
        cx.runtime.resp.set(resp as u8);
        0
    }
}

/// `redis.replicate_commands`: always true in 7.0.
unsafe extern "C-unwind" fn replicate_commands(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: one push.
    unsafe {
        ffi::lua_pushboolean(state, 1);
        1
    }
}

/// Redis's initial `redisLrand48` state (the classic rand48 seed).
pub const RAND48_INIT: u64 = 0x1234_ABCD_330E;
const RAND48_MAX: u64 = i32::MAX as u64;

fn rand48_next(x: u64) -> u64 {
    (x.wrapping_mul(0x5_DEEC_E66D).wrapping_add(0xB)) & ((1 << 48) - 1)
}

/// `luaL_checkint`.
unsafe fn check_int(state: *mut ffi::lua_State, arg: c_int) -> i32 {
    // SAFETY: raises Lua's own argument error for a non-number.
    unsafe { ffi::luaL_checkinteger(state, arg) as i32 }
}

/// `redis_math_random`: Lua's `math.random` over `redisLrand48`.
unsafe extern "C-unwind" fn math_random(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: Lua's own argument checks raise with nothing owned.
    unsafe {
        let Some(cx) = call::active_run() else {
            return ffi::luaL_error(state, c"math.random can only be called inside a script invocation".as_ptr());
        };
        let x = rand48_next(cx.runtime.rng.get());
        cx.runtime.rng.set(x);
        let r = (((x >> 17) & 0x7FFF_FFFF) % RAND48_MAX) as f64 / RAND48_MAX as f64;
        match ffi::lua_gettop(state) {
            0 => ffi::lua_pushnumber(state, r),
            1 => {
                let u = check_int(state, 1);
                if u < 1 {
                    ffi::luaL_argerror(state, 1, c"interval is empty".as_ptr());
                }
                ffi::lua_pushnumber(state, (r * u as f64).floor() + 1.0);
            }
            2 => {
                let l = check_int(state, 1);
                let u = check_int(state, 2);
                if l > u {
                    ffi::luaL_argerror(state, 2, c"interval is empty".as_ptr());
                }
                ffi::lua_pushnumber(state, (r * (u as f64 - l as f64 + 1.0)).floor() + l as f64);
            }
            _ => return ffi::luaL_error(state, c"wrong number of arguments".as_ptr()),
        }
        1
    }
}

/// `redis_math_randomseed`.
unsafe extern "C-unwind" fn math_randomseed(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: as `math_random`.
    unsafe {
        let Some(cx) = call::active_run() else {
            return ffi::luaL_error(state, c"math.randomseed can only be called inside a script invocation".as_ptr());
        };
        let seed = check_int(state, 1) as u32 as u64;
        cx.runtime.rng.set((seed << 16) | 0x330E);
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rand48_matches_redis_math_random() {
        // A fresh Redis 7.0.15 answers `return {math.random(1000000), math.random(1000000)}`
        // with 396465, 840486, and the next script with 353337, 446584.
        let mut x = RAND48_INIT;
        let mut out = Vec::new();
        for _ in 0..4 {
            x = rand48_next(x);
            let r = (((x >> 17) & 0x7FFF_FFFF) % RAND48_MAX) as f64 / RAND48_MAX as f64;
            out.push((r * 1_000_000.0).floor() as i64 + 1);
        }
        assert_eq!(out, vec![396465, 840486, 353337, 446584]);
    }
}
