//! Lua scripting (EVAL and friends): the Lua 5.1 VM with Redis's libraries.

pub mod lua_libs;
