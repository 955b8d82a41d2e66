//! Nothing one script does to the tables it did not create survives into
//! the next script: globals, the library tables and the metatables of the
//! basic types (the string metatable among them) are read-only, raw access
//! included, with Redis 7.0.15's texts. Each attempt is compared byte for
//! byte with a real redis-server, then a second script checks, on both
//! servers, that the library still behaves as before.

mod common;
use common::*;

use std::net::SocketAddr;

fn eval(addr: SocketAddr, script: &str) -> Vec<u8> {
    Raw::connect(addr).call(&["EVAL", script, "0"])
}

/// Runs `attack` then `check` on keylock and on redis-server (when
/// installed): both replies must be identical on both servers, and the
/// attack must have been refused as read-only.
fn refused_and_harmless(attack: &str, check: &str, check_reply: &[u8]) {
    let keylock = start();
    let ours = eval(keylock.addr(), attack);
    let text = String::from_utf8_lossy(&ours);
    assert!(text.contains("Attempt to modify a readonly table"), "{attack}: {text}");
    assert_eq!(eval(keylock.addr(), check), check_reply, "after {attack}");
    if let Some(redis) = real_redis() {
        assert_eq!(ours, eval(redis.addr, attack), "{attack}");
        assert_eq!(eval(redis.addr, check), check_reply, "redis-server after {attack}");
    }
}

#[test]
fn the_string_metatable_cannot_be_changed_for_later_scripts() {
    let upper = "return string.upper('a')";
    let method = "return ('a'):upper()";
    refused_and_harmless(
        "getmetatable('').__index.upper = function() return 'pwned' end return 1",
        upper,
        b"$1\r\nA\r\n",
    );
    refused_and_harmless(
        "getmetatable('').__index = {upper = function() return 'pwned2' end} return 1",
        method,
        b"$1\r\nA\r\n",
    );
    refused_and_harmless("rawset(getmetatable(''), '__index', {}) return 1", method, b"$1\r\nA\r\n");
    refused_and_harmless(
        "rawset(getmetatable('').__index, 'upper', tostring) return 1",
        upper,
        b"$1\r\nA\r\n",
    );
    refused_and_harmless("setmetatable(getmetatable(''), {}) return 1", method, b"$1\r\nA\r\n");
}

#[test]
fn globals_cannot_be_replaced_or_added() {
    // Redis's "Try trick global protection 1-4", and the raw routes.
    let check = "return type(redis.call)";
    for attack in [
        "setmetatable(_G, {})",
        "local g = getmetatable(_G) g.__index = {}",
        "redis = function() return 1 end",
        "_G = {}",
        "a = 10",
        "rawset(_G, 'redis', 1)",
        "rawset(_G, 'fresh', 1)",
        "getmetatable(_G).__index = nil",
    ] {
        refused_and_harmless(attack, check, b"$8\r\nfunction\r\n");
    }
}

#[test]
fn library_tables_are_read_only() {
    for (attack, check, reply) in [
        (
            "redis.call = function() return 1 end",
            "return redis.sha1hex('')",
            &b"$40\r\nda39a3ee5e6b4b0d3255bfef95601890afd80709\r\n"[..],
        ),
        (
            "cjson.encode = function() return 1 end",
            "return cjson.encode({1})",
            b"$3\r\n[1]\r\n",
        ),
        ("cmsgpack.pack = function() return 1 end", "return #cmsgpack.pack(1)", b":1\r\n"),
        ("bit.lshift = function() return 1 end", "return bit.lshift(1, 4)", b":16\r\n"),
        ("struct.pack = nil", "return #struct.pack('>I', 1)", b":4\r\n"),
        ("string.rep = nil", "return string.rep('a', 3)", b"$3\r\naaa\r\n"),
        ("math.floor = function() return 7 end", "return math.floor(2.5)", b":2\r\n"),
        ("table.insert(table, 1)", "return #table.concat({'a', 'b'})", b":2\r\n"),
        ("rawset(math, 'pi', 3)", "return math.pi * 1000", b":3141\r\n"),
        ("table.insert(string, 'x')", "return string.len('abc')", b":3\r\n"),
        ("coroutine.wrap = nil", "return type(coroutine.wrap)", b"$8\r\nfunction\r\n"),
    ] {
        refused_and_harmless(attack, check, reply);
    }
}

#[test]
fn basic_type_metatables_are_read_only_or_absent() {
    // Redis's "Try trick readonly table on basic types metatable": nil,
    // numbers, booleans, functions and threads have no metatable (indexing
    // nil), strings have a read-only one.
    let keylock = start();
    let redis = real_redis();
    for code in [
        "getmetatable(nil).__index = function() return 1 end",
        "getmetatable('').__index = function() return 1 end",
        "getmetatable(123.222).__index = function() return 1 end",
        "getmetatable(true).__index = function() return 1 end",
        "getmetatable(function() return 1 end).__index = function() return 1 end",
        "getmetatable(coroutine.create(function() return 1 end)).__index = function() return 1 end",
    ] {
        let ours = eval(keylock.addr(), code);
        let text = String::from_utf8_lossy(&ours);
        assert!(
            text.contains("attempt to index a nil value script") || text.contains("Attempt to modify a readonly table"),
            "{code}: {text}"
        );
        if let Some(redis) = &redis {
            assert_eq!(ours, eval(redis.addr, code), "{code}");
        }
    }
}

#[test]
fn the_sandbox_looks_like_redis_from_inside() {
    // The globals in their order, the globals' metatable, KEYS/ARGV, and
    // what scripts cannot reach, byte for byte.
    let keylock = start();
    let redis = real_redis();
    for script in [
        "local t = {} for k in pairs(_G) do t[#t + 1] = k end return t",
        "local t = {} for k in pairs(redis) do t[#t + 1] = k end return t",
        "local t = {} for k in pairs(string) do t[#t + 1] = k end return t",
        "return type(getmetatable(_G))",
        "return tostring(getmetatable('').__index == string)",
        "return {type(KEYS), type(ARGV), #KEYS}",
        "return loadfile('x')",
        "return dofile('x')",
        "return print('x')",
        "return getfenv(1)",
        "return setfenv(1, {})",
        "return newproxy(true)",
        "return debug.getinfo(1)",
        "return loadstring(string.dump(function() return 1 end))()",
        "return loadstring('\\27Lua')",
        "return tostring(os)",
        "return io.open('/etc/passwd')",
        "return require('os')",
        "return package",
    ] {
        let ours = eval(keylock.addr(), script);
        if let Some(redis) = &redis {
            assert_eq!(
                String::from_utf8_lossy(&ours),
                String::from_utf8_lossy(&eval(redis.addr, script)),
                "{script}"
            );
        }
    }
}

#[test]
fn deprecated_lua_api_is_there_only_when_enabled_as_in_redis() {
    let scripts = [
        "local f = function() return 1 end setfenv(f, {}) return 0",
        "local f = function() return 1 end getfenv(f) return 0",
        "local p = newproxy() return 0",
    ];
    for enabled in ["no", "yes"] {
        let keylock = start_with(|c| c.directives.push(("lua-enable-deprecated-api".into(), vec![enabled.into()])));
        let ours: Vec<Vec<u8>> = scripts.iter().map(|s| eval(keylock.addr(), s)).collect();
        if enabled == "yes" {
            assert!(ours.iter().all(|r| r == b":0\r\n"), "{ours:?}");
        } else {
            assert!(ours.iter().all(|r| r.starts_with(b"-ERR")), "{ours:?}");
        }
        if let Some(redis) = real_redis_with(&["--lua-enable-deprecated-api", enabled]) {
            let theirs: Vec<Vec<u8>> = scripts.iter().map(|s| eval(redis.addr, s)).collect();
            assert_eq!(ours, theirs, "lua-enable-deprecated-api {enabled}");
        }
    }
}
