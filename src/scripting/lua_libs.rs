//! The Lua 5.1 state with exactly the libraries Redis 7.0 gives scripts.
//!
//! Owns: creating the VM and opening the standard and Redis libraries the
//! way Redis 7.0.15's `luaRegisterRedisAPI` / `luaLoadLibraries`
//! (`src/script_lua.c`) does. It must not touch the keyspace, the `redis`
//! table or the sandbox: those belong to `sandbox.rs`, built on top.
//!
//! # Which Lua
//!
//! The VM is Redis's own: Lua 5.1.5 with Redis's patches (`vendor/redis-lua`,
//! compiled by `build.rs`; mlua links no Lua of its own). Those patches are
//! what scripts can tell apart from stock Lua: read-only tables in the core
//! (`lua_enablereadonlytable`, checked on every store, raw ones included),
//! every byte of a string hashed (so `pairs` order, and with it
//! `cjson.encode` key order, is Redis's for long keys too), binary chunks
//! refused by the loader, and the fixes Debian ships in its 7.0.15 for the
//! lexer, the parser, `unpack` and `bit.tohex`.
//!
//! # Why C and not Rust for the libraries
//!
//! `cjson`, `cmsgpack`, `struct` and `bit` are Redis's own C files, opened
//! through their `luaopen_*` functions, so number formatting (`%.14g` in
//! cjson), error texts, msgpack type choices and struct formats are Redis's
//! by construction instead of by imitation.
//!
//! # What [`new_redis_lua`] builds
//!
//! mlua creates the state (its allocator carries `lua-memory-limit`) and
//! opens base into globals of its own. Those are then replaced, so that the
//! globals scripts see are built as Redis builds them, in the same order
//! (which decides `pairs(_G)` order): a fresh table with Redis's allow-list
//! `__newindex` (a global outside [`REDIS_GLOBALS_ALLOW_LIST`] is silently
//! not created, so `print`, `dofile` and `loadfile` never exist; neither do
//! `getfenv`, `setfenv` and `newproxy`, which 7.0.15 took off the list for
//! CVE-2025-46818, unless `lua-enable-deprecated-api` is on), then base, `table`, `string`, `math`, `debug`,
//! `cjson`, `struct`, `cmsgpack`, `bit`, each opener called with its
//! library name like `luaLoadLib`. `package`, `io` and `os` are never
//! opened.
//!
//! `fpconv_init` (called by `luaopen_cjson`) stores the C locale's decimal
//! point in a C static; every state writes the same value.

use std::ffi::{CStr, c_char, c_int};

use mlua::{Lua, LuaOptions, StdLib, ffi};

unsafe extern "C-unwind" {
    fn luaopen_cjson(state: *mut ffi::lua_State) -> c_int;
    fn luaopen_struct(state: *mut ffi::lua_State) -> c_int;
    fn luaopen_cmsgpack(state: *mut ffi::lua_State) -> c_int;
    fn luaopen_bit(state: *mut ffi::lua_State) -> c_int;
}

/// Every library scripts get, in `luaLoadLibraries` order, with the name
/// its opener is called with (base registers into the globals).
const LIBRARIES: [(&CStr, ffi::lua_CFunction); 9] = [
    (c"", ffi::luaopen_base),
    (c"table", ffi::luaopen_table),
    (c"string", ffi::luaopen_string),
    (c"math", ffi::luaopen_math),
    (c"debug", ffi::luaopen_debug),
    (c"cjson", luaopen_cjson),
    (c"struct", luaopen_struct),
    (c"cmsgpack", luaopen_cmsgpack),
    (c"bit", luaopen_bit),
];

/// The globals that may be created, from the allow lists in Redis's
/// `script_lua.c` (libraries, the Redis API, Lua builtins, and `debug`,
/// which Redis removes again once its error handler holds it).
pub const REDIS_GLOBALS_ALLOW_LIST: &[&str] = &[
    // libraries_allow_list
    "string",
    "cjson",
    "bit",
    "cmsgpack",
    "math",
    "table",
    "struct",
    // redis_api_allow_list
    "redis",
    "__redis__err__handler",
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

/// Globals Redis removes on purpose (`deny_list`): dropped without the
/// warning an unexpected global gets.
const REDIS_GLOBALS_DENY_LIST: &[&str] = &["dofile", "loadfile", "print"];

/// `luaNewIndexAllowList`: the globals' `__newindex` while the libraries
/// are opened. An allowed name is stored; anything else is dropped.
unsafe extern "C-unwind" fn new_index_allow_list(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: called by Lua as a metamethod (table, key, value); nothing
    // here owns memory while Lua may raise.
    unsafe {
        if ffi::lua_gettop(state) != 3 {
            return ffi::luaL_error(state, c"Wrong number of arguments to luaNewIndexAllowList".as_ptr());
        }
        if ffi::lua_type(state, -3) != ffi::LUA_TTABLE {
            return ffi::luaL_error(state, c"first argument to luaNewIndexAllowList must be a table".as_ptr());
        }
        if ffi::lua_isstring(state, -2) == 0 {
            return ffi::luaL_error(
                state,
                c"Second argument to luaNewIndexAllowList must be a string or number".as_ptr(),
            );
        }
        let name = CStr::from_ptr(ffi::lua_tolstring(state, -2, std::ptr::null_mut())).to_bytes();
        if REDIS_GLOBALS_ALLOW_LIST.iter().any(|a| a.as_bytes() == name) || (is_deprecated(name) && deprecated_api_enabled(state)) {
            ffi::lua_rawset(state, -3);
        } else if !REDIS_GLOBALS_DENY_LIST.iter().any(|d| d.as_bytes() == name) && !is_deprecated(name) {
            crate::log::warning(format_args!(
                "A key '{}' was added to Lua globals which is not on the globals allow list nor listed on the deny list.",
                String::from_utf8_lossy(name)
            ));
        }
        0
    }
}

/// `lua_builtins_deprecated`: refused quietly unless
/// `lua-enable-deprecated-api` is on.
fn is_deprecated(name: &[u8]) -> bool {
    matches!(name, b"newproxy" | b"setfenv" | b"getfenv")
}

/// The registry field that records `lua-enable-deprecated-api` for the
/// allow-list `__newindex`.
const DEPRECATED_API_FIELD: &CStr = c"__keylock_deprecated_api";

/// Whether the state was made with `lua-enable-deprecated-api` on.
///
/// # Safety
/// A valid state with a free stack slot.
unsafe fn deprecated_api_enabled(state: *mut ffi::lua_State) -> bool {
    // SAFETY: as documented; the pushed value is popped.
    unsafe {
        ffi::lua_getfield(state, ffi::LUA_REGISTRYINDEX, DEPRECATED_API_FIELD.as_ptr());
        let on = ffi::lua_toboolean(state, -1) != 0;
        ffi::lua_pop(state, 1);
        on
    }
}

/// Sets a one-field metatable `{field = f}` on the table on top of the stack.
///
/// # Safety
/// A table on top of `state`'s stack, two free slots, in a protected call.
pub(crate) unsafe fn set_metatable_function(state: *mut ffi::lua_State, field: &CStr, f: ffi::lua_CFunction) {
    // SAFETY: as documented; the metatable is consumed by lua_setmetatable.
    unsafe {
        ffi::lua_createtable(state, 0, 1);
        ffi::lua_pushcfunction(state, f);
        ffi::lua_setfield(state, -2, field.as_ptr());
        ffi::lua_setmetatable(state, -2);
    }
}

/// `luaLoadLib`: the opener called with the library's name.
unsafe fn load_lib(state: *mut ffi::lua_State, name: &CStr, open: ffi::lua_CFunction) {
    // SAFETY: a protected call is in progress; lua_call propagates errors to it.
    unsafe {
        ffi::lua_pushcfunction(state, open);
        ffi::lua_pushstring(state, name.as_ptr() as *const c_char);
        ffi::lua_call(state, 1, 0);
    }
}

/// Opens `cjson`, `struct`, `cmsgpack` and `bit` in `lua`, as Redis does:
/// each `luaopen_*` is called with its name and sets the global of that name.
pub fn open_redis_libs(lua: &Lua) -> mlua::Result<()> {
    // SAFETY: the openers are lua_CFunctions from the vendored Redis sources,
    // compiled against this very VM, called in mlua's protected call.
    unsafe {
        lua.exec_raw::<()>((), |state| {
            for (name, open) in &LIBRARIES[5..] {
                load_lib(state, name, *open);
            }
        })
    }
}

/// A new Lua 5.1 state with exactly the globals Redis 7.0 scripts start from
/// (before Redis adds `redis`, its `pcall`, `math.random` and the protection;
/// see the module doc). Here `debug` is still present, and the globals still
/// carry the allow-list `__newindex`. `deprecated_api`:
/// `lua-enable-deprecated-api`.
pub fn new_redis_lua(deprecated_api: bool) -> mlua::Result<Lua> {
    // SAFETY: `unsafe_new_with` only because the debug library is opened
    // below (mlua's safe constructor refuses it); package, io and os, which
    // could load native code or touch the host, are not opened.
    let lua = unsafe { Lua::unsafe_new_with(StdLib::NONE, LuaOptions::new()) };
    // SAFETY: plain Lua API calls inside mlua's protected calls. The globals
    // are replaced in a call of their own, so that the C functions the
    // second call creates take the new globals as their environment.
    unsafe {
        lua.exec_raw::<()>((), |state| {
            ffi::lua_newtable(state);
            ffi::lua_setfield(state, ffi::LUA_REGISTRYINDEX, c"_LOADED".as_ptr());
            ffi::lua_newtable(state);
            ffi::lua_replace(state, ffi::LUA_GLOBALSINDEX);
            ffi::lua_pushboolean(state, c_int::from(deprecated_api));
            ffi::lua_setfield(state, ffi::LUA_REGISTRYINDEX, DEPRECATED_API_FIELD.as_ptr());
        })?;
        lua.exec_raw::<()>((), |state| {
            ffi::lua_pushvalue(state, ffi::LUA_GLOBALSINDEX);
            set_metatable_function(state, c"__newindex", new_index_allow_list);
            ffi::lua_pop(state, 1);
            for (name, open) in &LIBRARIES {
                load_lib(state, name, *open);
            }
        })?;
    }
    Ok(lua)
}
