//! Compiles Redis 7.0.15's Lua (`vendor/redis-lua`): the Lua 5.1.5 core as
//! Redis patches it, and its libraries cjson, cmsgpack, struct and bit, into
//! one static library linked into keylock.
//!
//! mlua is built with `mlua-sys/external`, so it links no Lua of its own:
//! every `lua_*` symbol it calls resolves to this library. The flags are
//! those of Redis's `deps/Makefile` for the libraries (`ENABLE_CJSON_GLOBAL`,
//! empty `REDIS_STATIC`) and the platform defines mlua's own vendored build
//! uses for the core (`LUA_USE_LINUX`: `_setjmp`/`_longjmp`, which do not
//! save the signal mask, where Redis's `LUA_ANSI` uses `setjmp`/`longjmp`;
//! nothing a script can observe differs). `io`, `os` and `package` are
//! compiled because mlua references their openers; keylock never opens them.

use std::env;

/// The vendored sources, relative to the crate root.
const SOURCE_DIR: &str = "vendor/redis-lua/deps/lua/src";

/// Lua core and standard libraries (Redis's CORE_O and LIB_O, less the
/// stand-alone interpreter and compiler).
const LUA_SOURCES: &[&str] = &[
    "lapi.c",
    "lcode.c",
    "ldebug.c",
    "ldo.c",
    "ldump.c",
    "lfunc.c",
    "lgc.c",
    "llex.c",
    "lmem.c",
    "lobject.c",
    "lopcodes.c",
    "lparser.c",
    "lstate.c",
    "lstring.c",
    "ltable.c",
    "ltm.c",
    "lundump.c",
    "lvm.c",
    "lzio.c",
    "lauxlib.c",
    "lbaselib.c",
    "ldblib.c",
    "liolib.c",
    "lmathlib.c",
    "loslib.c",
    "ltablib.c",
    "lstrlib.c",
    "loadlib.c",
    "linit.c",
];

/// Redis's own libraries.
const REDIS_SOURCES: &[&str] = &["lua_cjson.c", "strbuf.c", "fpconv.c", "lua_cmsgpack.c", "lua_struct.c", "lua_bit.c"];

fn main() {
    let target_os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();

    let mut build = cc::Build::new();
    build
        .include(SOURCE_DIR)
        .files(LUA_SOURCES.iter().chain(REDIS_SOURCES).map(|f| format!("{SOURCE_DIR}/{f}")))
        // As in Redis's deps/Makefile: luaopen_cjson also sets the global
        // `cjson`, and REDIS_STATIC (used by lua_cmsgpack.c) is empty.
        .define("ENABLE_CJSON_GLOBAL", None)
        .define("REDIS_STATIC", Some(""))
        // Lua is compiled optimized even in debug builds: tests run scripts
        // by the thousand, and the deepest recursions (the pattern matcher)
        // are sized for optimized frames.
        .opt_level(2)
        .flag_if_supported("-fno-common")
        // Third-party code kept byte-identical to Redis: its warnings are not
        // ours to fix.
        .warnings(false);
    if matches!(
        target_os.as_str(),
        "linux" | "macos" | "freebsd" | "netbsd" | "openbsd" | "dragonfly"
    ) {
        build.define("LUA_USE_LINUX", None);
    }
    build.compile("redis_lua");
    if target_os == "linux" {
        println!("cargo:rustc-link-lib=m");
        println!("cargo:rustc-link-lib=dl");
    }

    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=vendor/redis-lua");
}
