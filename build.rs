//! Compiles Redis 7.0.15's Lua libraries (`vendor/redis-lua`: cjson, cmsgpack,
//! struct, bit) into a static library linked into keylock.
//!
//! They must be compiled against the very headers of the Lua 5.1 VM that mlua
//! builds (its `luaconf.h` decides `lua_Number`, `LUAL_BUFFERSIZE` and the
//! `luaL_Buffer` layout). mlua-sys declares `links = "lua"` and its vendored
//! build prints `cargo:include=<dir>`, so Cargo hands that directory to the
//! build script of every package that depends on mlua-sys *directly* as
//! `DEP_LUA_INCLUDE` — which is why Cargo.toml names mlua-sys next to mlua.

use std::env;
use std::path::PathBuf;

/// The vendored sources, relative to the crate root.
const SOURCES: &[&str] = &[
    "vendor/redis-lua/deps/lua/src/lua_cjson.c",
    "vendor/redis-lua/deps/lua/src/strbuf.c",
    "vendor/redis-lua/deps/lua/src/fpconv.c",
    "vendor/redis-lua/deps/lua/src/lua_cmsgpack.c",
    "vendor/redis-lua/deps/lua/src/lua_struct.c",
    "vendor/redis-lua/deps/lua/src/lua_bit.c",
];

fn main() {
    let lua_include = PathBuf::from(env::var("DEP_LUA_INCLUDE").expect(
        "DEP_LUA_INCLUDE is not set: keylock must depend directly on mlua-sys with the `vendored` feature so that its headers are exported",
    ));
    let target_os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();

    let mut build = cc::Build::new();
    build
        .include(&lua_include)
        .include("vendor/redis-lua/deps/lua/src")
        .files(SOURCES)
        // As in Redis's deps/Makefile: luaopen_cjson also sets the global
        // `cjson`, and REDIS_STATIC (used by lua_cmsgpack.c) is empty.
        .define("ENABLE_CJSON_GLOBAL", None)
        .define("REDIS_STATIC", Some(""))
        // Third-party code kept byte-identical to Redis: its warnings are not
        // ours to fix.
        .warnings(false);
    // Read luaconf.h with the platform defines lua-src used for the core.
    if matches!(
        target_os.as_str(),
        "linux" | "macos" | "freebsd" | "netbsd" | "openbsd" | "dragonfly"
    ) {
        build.define("LUA_USE_LINUX", None);
    }
    build.compile("redis_lua_libs");

    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=vendor/redis-lua");
    println!("cargo:rerun-if-env-changed=DEP_LUA_INCLUDE");
}
