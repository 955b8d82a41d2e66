//! Scripts that nest, recurse or repeat without bound get Redis 7.0.15's
//! answers and leave the server serving: results nested past Lua's stack
//! (self-referencing tables, 10,000 levels), deep Lua and C recursion, the
//! libraries' nesting limits and the pattern matcher. Each case is sent
//! with a PING behind it, compared byte for byte with a real redis-server
//! where Redis answers, and followed by a PING on a second connection.

mod common;
use common::*;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

const PONG: &[u8] = b"+PONG\r\n";

/// Sends `EVAL <script> 0` and a PING in one write; returns every byte
/// up to and including the PONG (so the stream is proven in step).
fn eval_then_ping(addr: SocketAddr, script: &str) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut request = encode(&[b"EVAL", script.as_bytes(), b"0"]);
    request.extend(encode(&[b"PING"]));
    s.write_all(&request).unwrap();
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    while !out.ends_with(PONG) {
        let n = s.read(&mut buf).expect("read the reply");
        assert!(n > 0, "connection closed after {} bytes: {:?}", out.len(), tail(&out));
        out.extend_from_slice(&buf[..n]);
    }
    out
}

fn tail(bytes: &[u8]) -> String {
    String::from_utf8_lossy(&bytes[bytes.len().saturating_sub(200)..]).into_owned()
}

fn still_serves(addr: SocketAddr) {
    assert_eq!(Raw::connect(addr).call(&["PING"]), PONG);
}

/// keylock's reply (with the PING behind it) equals redis-server's.
fn same_as_redis(script: &str) -> Vec<u8> {
    let keylock = start();
    let ours = eval_then_ping(keylock.addr(), script);
    still_serves(keylock.addr());
    if let Some(redis) = real_redis() {
        let theirs = eval_then_ping(redis.addr, script);
        assert!(
            ours == theirs,
            "keylock and redis-server differ for {script:?}\n keylock ({} bytes): ...{:?}\n redis   ({} bytes): ...{:?}",
            ours.len(),
            tail(&ours),
            theirs.len(),
            tail(&theirs)
        );
    }
    ours
}

/// A table nested `depth` levels, each holding the next at [1].
fn nested(depth: usize) -> String {
    format!("local t = {{}} local c = t for i = 1, {depth} do c[1] = {{}} c = c[1] end return t")
}

#[test]
fn a_self_referencing_table_returns_redis_nested_arrays_then_the_stack_limit_error() {
    let reply = same_as_redis("local a = {}; local b = {a}; a[1] = b; return a");
    assert!(reply.starts_with(b"*1\r\n*1\r\n"));
    assert!(reply.ends_with(b"-ERR reached lua stack limit\r\n+PONG\r\n"));
    // As many nested arrays as Redis writes before giving up.
    assert_eq!(reply.len(), 7995 * 4 + 30 + 7);
}

#[test]
fn a_table_nested_ten_thousand_deep_ends_at_the_stack_limit() {
    same_as_redis(&nested(10_000));
}

#[test]
fn tables_nested_just_under_at_and_over_the_limit_match_redis() {
    // 7,994 levels fit (the innermost is an empty array); from 7,995 on,
    // the innermost level is the stack-limit error.
    let under = same_as_redis(&nested(7994));
    assert!(under.ends_with(b"*0\r\n+PONG\r\n"));
    for depth in [7995, 7996] {
        let over = same_as_redis(&nested(depth));
        assert!(over.ends_with(b"-ERR reached lua stack limit\r\n+PONG\r\n"));
    }
}

#[test]
fn a_self_reference_in_resp3_map_and_set_shapes_matches_redis() {
    // Through an array level, map and set values referring back to the
    // table go as deep as the stack allows, as in Redis.
    same_as_redis("redis.setresp(3) local a = {} a[1] = {map = {k = a}} return a");
    same_as_redis("redis.setresp(3) local a = {} a[1] = {set = {}} a[1].set[a] = true return a");
}

#[test]
fn deep_lua_recursion_fails_fast_with_redis_stack_overflow_text() {
    let started = Instant::now();
    let reply = same_as_redis("local function f(n) return 1 + f(n + 1) end return f(1)");
    assert!(
        reply.starts_with(b"-ERR user_script:1: stack overflow script: "),
        "{}",
        tail(&reply)
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    same_as_redis("local function f() return {f()} end return f()");
}

#[test]
fn deep_c_recursion_fails_with_redis_c_stack_overflow_text() {
    let reply = same_as_redis("local t = setmetatable({}, {__index = function(t, k) return t[k] end}) return t.x");
    assert!(reply.starts_with(b"-ERR user_script:1: C stack overflow"), "{}", tail(&reply));
    same_as_redis("local function f(n) return select(2, pcall(f, n + 1)) end return f(1)");
    same_as_redis(
        "local s = 'x' for i = 1, 300 do s = {s} end local function g(t) if type(t) == 'table' then return tostring(g(t[1])) end return t end return g(s)",
    );
}

#[test]
fn cjson_nesting_limits_match_redis() {
    same_as_redis("local t = {} local c = t for i = 1, 999 do c[1] = {} c = c[1] end return cjson.encode(t)");
    same_as_redis("local t = {} local c = t for i = 1, 1000 do c[1] = {} c = c[1] end return cjson.encode(t)");
    same_as_redis("local t = {} local c = t for i = 1, 10000 do c[1] = {} c = c[1] end return cjson.encode(t)");
    same_as_redis("local a = {} a[1] = a return cjson.encode(a)");
    same_as_redis("return #cjson.encode(cjson.decode(string.rep('[', 1000) .. string.rep(']', 1000)))");
    same_as_redis("return cjson.decode(string.rep('[', 1001) .. string.rep(']', 1001))");
    same_as_redis("return cjson.decode(string.rep('[', 100000))");
    same_as_redis("return cjson.decode(string.rep('{\"a\":', 100000))");
}

#[test]
fn cmsgpack_nesting_matches_redis() {
    same_as_redis("local t = {} local c = t for i = 1, 10000 do c[1] = {} c = c[1] end return cmsgpack.pack(t)");
    same_as_redis("local a = {} a[1] = a return cmsgpack.pack(a)");
    same_as_redis("return cmsgpack.unpack(string.rep(string.char(0x91), 100000))");
    same_as_redis("return {cmsgpack.unpack(string.rep(string.char(0x91), 5000) .. string.char(1))}");
    same_as_redis("return cmsgpack.unpack(string.rep(string.char(0x81, 0x01), 100000))");
}

#[test]
fn the_pattern_matcher_takes_what_redis_takes() {
    for items in [50_000, 100_000] {
        let reply = same_as_redis(&format!(
            "local s = string.rep('a', {items}) return string.find(s, string.rep('a?', {items}))"
        ));
        assert!(reply.starts_with(b":1\r\n"), "{}", tail(&reply));
    }
    same_as_redis("return string.gsub(string.rep('a', 100000), string.rep('a?', 1000), 'b')");
}

#[test]
fn a_pattern_past_the_matcher_depth_limit_is_an_error_not_a_crash() {
    // Redis runs off its stack here; keylock stops at 200,000 nested
    // matches with Lua 5.2's text for it.
    let keylock = start();
    for items in [200_001, 1_000_000] {
        let reply = eval_then_ping(
            keylock.addr(),
            &format!("local s = string.rep('a', {items}) return string.find(s, string.rep('a?', {items}))"),
        );
        let text = String::from_utf8_lossy(&reply);
        assert!(text.starts_with("-ERR user_script:1: pattern too complex script: "), "{text}");
        still_serves(keylock.addr());
    }
    let reply = eval_then_ping(
        keylock.addr(),
        "local s = string.rep('a', 199999) return string.find(s, string.rep('a?', 199999))",
    );
    assert!(reply.starts_with(b":1\r\n"));
}

#[test]
fn a_table_that_doubles_at_every_level_is_refused_and_the_server_stays_up() {
    // Converted, this is a tree of 2^2000 nodes; Redis 7.0.15 dies on it.
    let keylock = start();
    let started = Instant::now();
    for script in [
        "local a = {} a.map = {} a.map[a] = a return a",
        "redis.setresp(3) local a = {} a.set = {} a.set[a] = true a.set[{a}] = true return a",
    ] {
        let reply = eval_then_ping(keylock.addr(), script);
        let text = String::from_utf8_lossy(&reply);
        assert!(
            text.starts_with("-ERR Error running script, result too large: converted, it would take more than 1073741824 bytes script: "),
            "{}",
            tail(&reply)
        );
        still_serves(keylock.addr());
    }
    assert!(started.elapsed() < Duration::from_secs(60));
}

#[test]
fn a_smaller_lua_memory_limit_also_bounds_the_result() {
    let keylock = start();
    let mut c = Raw::connect(keylock.addr());
    assert_eq!(c.call(&["CONFIG", "SET", "lua-memory-limit", "10mb"]), b"+OK\r\n");
    let reply = eval_then_ping(keylock.addr(), "local t = {} for i = 1, 300000 do t[i] = i end return t");
    assert!(
        reply.starts_with(b"-ERR Error running script, result too large: converted, it would take more than 10485760 bytes"),
        "{}",
        tail(&reply)
    );
    // The same result fits under the default.
    assert_eq!(c.call(&["CONFIG", "SET", "lua-memory-limit", "0"]), b"+OK\r\n");
    let reply = eval_then_ping(keylock.addr(), "local t = {} for i = 1, 300000 do t[i] = i end return #t");
    assert_eq!(reply, b":300000\r\n+PONG\r\n");
}
