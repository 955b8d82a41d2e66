//! The Lua 5.1 state with exactly the libraries Redis 7.0 gives scripts.
//!
//! Owns: creating the VM (mlua, PUC Lua 5.1.5 vendored) and opening the
//! standard and Redis libraries the way Redis 7.0.15's `luaLoadLibraries`
//! (`src/script_lua.c`) does. It must not touch the keyspace, the `redis`
//! table or the sandbox: those belong to the scripting engine built on top.
//!
//! # Why C and not Rust
//!
//! `cjson`, `cmsgpack`, `struct` and `bit` are Redis's own C files
//! (`vendor/redis-lua`, compiled by `build.rs` against mlua's Lua headers) and
//! are opened through their `luaopen_*` functions, so number formatting
//! (`%.14g` in cjson), error texts, msgpack type choices and struct formats
//! are Redis's by construction instead of by imitation.
//!
//! # What [`new_redis_lua`] opens
//!
//! In Redis's order: base, `table`, `string`, `math`, `debug`, then `cjson`,
//! `struct`, `cmsgpack`, `bit` (each opener is called with its library name,
//! like `luaLoadLib`). `package`, `io` and `os` are never opened. Redis sets
//! an allow-list `__newindex` on the globals *before* opening the libraries,
//! so a global that is not on the list is simply never created; here the
//! libraries are opened first and every global outside [`REDIS_GLOBALS_ALLOW_LIST`]
//! is removed afterwards, which leaves the same set: `print`, `dofile` and
//! `loadfile` are absent, and so are `getfenv`, `setfenv` and `newproxy` as
//! in the reference redis-server (Debian's 7.0.15 carries Redis's fix for
//! CVE-2025-46818, which took them off the list; vanilla 7.0.15 still had
//! them). `loadstring` and `load` stay, as in Redis.
//!
//! # What Redis does on top (for the engine, not done here)
//!
//! From `scriptingInit` (`eval.c`) and `luaRegisterRedisAPI`:
//! - `pcall` is replaced by `luaRedisPcall`: when the error value is a table
//!   with a string `err` field, `pcall` returns `false, err`.
//! - the `redis` global: `call`, `pcall`, `log` + `LOG_DEBUG/VERBOSE/NOTICE/WARNING`,
//!   `REDIS_VERSION`, `REDIS_VERSION_NUM`, `setresp`, `sha1hex`, `error_reply`,
//!   `status_reply`, `set_repl` + `REPL_NONE/AOF/SLAVE/REPLICA/ALL`,
//!   `acl_check_cmd`, and for EVAL `breakpoint`, `debug`, `replicate_commands`.
//! - `math.random` / `math.randomseed` are replaced by versions over
//!   `redisLrand48` / `redisSrand48` (`src/rand.c`, a drand48-style 48-bit
//!   LCG with one process-wide state that 7.0 does not reseed per script);
//!   both raise "math.random can only be called inside a script invocation"
//!   outside a script.
//! - `__redis__err__handler` is defined by a Lua chunk that captures `debug`
//!   in an upvalue and then sets the global `debug` to nil: scripts never see
//!   `debug`, although this state has it.
//! - the globals get an `__index` metatable raising "Script attempted to
//!   access nonexistent global variable 'x'", then `_G`, every table reachable
//!   from it and their metatables are made read-only ("Attempt to modify a
//!   readonly table"); the patched 7.0.15 also protects the metatables of the
//!   basic types (string, number, …). `KEYS` and `ARGV` are set per call with
//!   the protection lifted for that moment. Read-only tables are a patch to
//!   Redis's Lua core (`lua_enablereadonlytable` in `lapi.c`/`lvm.c`) that
//!   mlua's stock Lua 5.1.5 does not have, so the engine has to emulate it.
//! - a count hook every 100,000 instructions checks for the busy timeout and
//!   SCRIPT KILL.
//!
//! Redis's Lua core differs from stock 5.1.5 in two more ways the engine must
//! account for: bytecode loading is disabled in `ldo.c` (a chunk starting
//! with `\27` goes to the parser and fails as a syntax error, also through
//! `loadstring`), and `lstring.c` hashes every byte of a string instead of a
//! sample, so `pairs` order over tables with keys of 32 bytes or more — and
//! with it the key order of `cjson.encode` / `cmsgpack.pack` on such tables —
//! can differ from Redis.
//!
//! # Why PUC Lua 5.1.5 and not LuaJIT
//!
//! Measured on the 2-core machine, 100,000 runs of Redisson's lock-acquire
//! body (three `redis.call`s to a Rust stub, best of 5): PUC 1.00 µs/run,
//! LuaJIT 0.81 µs/run; with `redis.call` as a raw C-ABI function, 0.19 µs
//! vs 0.11 µs. The difference is small next to the mlua callback itself
//! (~0.25 µs per `redis.call`), while LuaJIT fails 9 of the 69 comparisons
//! with Redis in `tests/lua_libs.rs`: its string hash is seeded per process,
//! so `pairs` order (and `cjson.encode` / `cmsgpack.pack` key order) changes
//! from run to run; it lacks `table.setn`, `math.mod` and `string.gfind` and
//! adds `table.move` and `coroutine.isyieldable`.
//!
//! `fpconv_init` (called by `luaopen_cjson`) stores the C locale's decimal
//! point in a C static; every state writes the same value.

use std::ffi::c_int;

use mlua::{Lua, LuaOptions, StdLib, Table, Value, ffi};

unsafe extern "C-unwind" {
    fn luaopen_cjson(state: *mut ffi::lua_State) -> c_int;
    fn luaopen_struct(state: *mut ffi::lua_State) -> c_int;
    fn luaopen_cmsgpack(state: *mut ffi::lua_State) -> c_int;
    fn luaopen_bit(state: *mut ffi::lua_State) -> c_int;
}

/// Redis's C libraries with the global each one sets, in `luaLoadLibraries` order.
const REDIS_C_LIBS: [(&str, ffi::lua_CFunction); 4] = [
    ("cjson", luaopen_cjson),
    ("struct", luaopen_struct),
    ("cmsgpack", luaopen_cmsgpack),
    ("bit", luaopen_bit),
];

/// The standard libraries Redis opens after base (which mlua always opens).
fn redis_std_libs() -> StdLib {
    StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::DEBUG
}

/// The globals the libraries may create, from the allow lists in Redis's
/// `script_lua.c` (libraries, Lua builtins, and `debug`, which Redis removes
/// again once its error handler holds it). `redis` and `__redis__err__handler`
/// are Redis's own and come later.
pub const REDIS_GLOBALS_ALLOW_LIST: &[&str] = &[
    // libraries_allow_list
    "string",
    "cjson",
    "bit",
    "cmsgpack",
    "math",
    "table",
    "struct",
    // lua_builtins_allow_list (without getfenv/setfenv since CVE-2025-46818)
    "xpcall",
    "tostring",
    "setmetatable",
    "next",
    "assert",
    "tonumber",
    "rawequal",
    "collectgarbage",
    "getmetatable",
    "rawset",
    "pcall",
    "coroutine",
    "type",
    "_G",
    "select",
    "unpack",
    "gcinfo",
    "pairs",
    "rawget",
    "loadstring",
    "ipairs",
    "_VERSION",
    "load",
    "error",
    // lua_builtins_removed_after_initialization_allow_list
    "debug",
];

/// Opens `cjson`, `struct`, `cmsgpack` and `bit` in `lua`, as Redis does:
/// each `luaopen_*` is called with its name and sets the global of that name.
pub fn open_redis_libs(lua: &Lua) -> mlua::Result<()> {
    for (name, opener) in REDIS_C_LIBS {
        // SAFETY: each opener is a lua_CFunction from the vendored Redis
        // sources, compiled against the headers of this very Lua 5.1 VM. It is
        // called like any Lua function, in protected mode, so a Lua error it
        // raises becomes an mlua::Error instead of unwinding through Rust.
        let open = unsafe { lua.create_c_function(opener)? };
        open.call::<()>(name)?;
    }
    Ok(())
}

/// A new Lua 5.1 state with exactly the globals Redis 7.0 scripts start from
/// (before Redis adds `redis`, its `pcall`, `math.random` and the protection;
/// see the module doc). Here `debug` is still present.
pub fn new_redis_lua() -> mlua::Result<Lua> {
    // SAFETY: `unsafe_new_with` only because the debug library is in the set
    // (mlua's safe constructor refuses it); package, io and os, which could
    // load native code or touch the host, are not opened.
    let lua = unsafe { Lua::unsafe_new_with(redis_std_libs(), LuaOptions::new()) };
    open_redis_libs(&lua)?;
    remove_globals_outside_allow_list(&lua.globals())?;
    Ok(lua)
}

fn remove_globals_outside_allow_list(globals: &Table) -> mlua::Result<()> {
    let mut outside = Vec::new();
    for pair in globals.pairs::<Value, Value>() {
        let (key, _) = pair?;
        let allowed = match &key {
            Value::String(name) => REDIS_GLOBALS_ALLOW_LIST.iter().any(|a| name.as_bytes() == a.as_bytes()),
            _ => false,
        };
        if !allowed {
            outside.push(key);
        }
    }
    for key in outside {
        globals.raw_set(key, Value::Nil)?;
    }
    Ok(())
}
