//! Scripting over TCP: what Redisson and other clients rely on, one
//! behaviour per test. Byte-level equivalence with Redis for hundreds of
//! scripts is in `tests/corpus/scripting*.txt` (see differential.rs).

mod common;
use common::*;

use std::time::Duration;

const LOCK_ACQUIRE: &str = include_str!("../lua/redisson/4.7.0/lock-acquire.lua");

#[test]
fn evalsha_before_load_is_noscript_and_works_after_script_load() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    let sha = keylock::scripting::sha1_hex(LOCK_ACQUIRE.as_bytes());
    let args = ["EVALSHA", sha.as_str(), "1", "lock", "30000", "uuid-1:1"];
    assert_eq!(c.call(&args), b"-NOSCRIPT No matching script. Please use EVAL.\r\n");
    assert_eq!(c.call(&["SCRIPT", "LOAD", LOCK_ACQUIRE]), format!("$40\r\n{sha}\r\n").into_bytes());
    assert_eq!(c.call(&args), b"$-1\r\n");
    assert_eq!(c.call(&["HGET", "lock", "uuid-1:1"]), b"$1\r\n1\r\n");
}

#[test]
fn eval_caches_the_script_for_evalsha() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    c.call(&["EVAL", "return 42", "0"]);
    let sha = keylock::scripting::sha1_hex(b"return 42");
    assert_eq!(c.call(&["EVALSHA", &sha, "0"]), b":42\r\n");
    assert_eq!(
        c.call(&["SCRIPT", "EXISTS", &sha, "0000000000000000000000000000000000000000"]),
        b"*2\r\n:1\r\n:0\r\n"
    );
}

#[test]
fn script_flush_forgets_cached_scripts() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    c.call(&["SCRIPT", "LOAD", "return 1"]);
    assert_eq!(c.call(&["SCRIPT", "FLUSH"]), b"+OK\r\n");
    let sha = keylock::scripting::sha1_hex(b"return 1");
    assert_eq!(
        c.call(&["EVALSHA", &sha, "0"]),
        b"-NOSCRIPT No matching script. Please use EVAL.\r\n"
    );
}

#[test]
fn missing_key_reaches_lua_as_false_never_nil() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    let script = "local v = redis.call('get', KEYS[1]); if v ~= false then return 'not false' end; return type(v)";
    assert_eq!(c.call(&["EVAL", script, "1", "nokey"]), b"$7\r\nboolean\r\n");
}

#[test]
fn command_name_may_come_from_an_argument_in_any_case() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    assert_eq!(
        c.call(&["EVAL", "return redis.call(ARGV[1], KEYS[1], ARGV[2])", "1", "k", "SeT", "v"]),
        b"+OK\r\n"
    );
    assert_eq!(c.call(&["GET", "k"]), b"$1\r\nv\r\n");
}

#[test]
fn keys_not_declared_in_keys_are_allowed() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    let script = "redis.call('set', KEYS[1] .. ':' .. 3, 'x') return redis.call('get', 'rw:rwlock_timeout:3')";
    assert_eq!(c.call(&["EVAL", script, "1", "rw:rwlock_timeout"]), b"$1\r\nx\r\n");
}

#[test]
fn publish_inside_a_script_reaches_subscribers() {
    let s = start();
    let mut sub = Raw::connect(s.addr());
    sub.call(&["SUBSCRIBE", "redisson_lock__channel:{l}"]);
    let mut c = Raw::connect(s.addr());
    assert_eq!(
        c.call(&[
            "EVAL",
            "return redis.call(ARGV[2], KEYS[1], ARGV[1])",
            "1",
            "redisson_lock__channel:{l}",
            "0",
            "publish"
        ]),
        b":1\r\n"
    );
    assert_eq!(
        sub.reply(),
        b"*3\r\n$7\r\nmessage\r\n$26\r\nredisson_lock__channel:{l}\r\n$1\r\n0\r\n"
    );
}

#[test]
fn a_resp3_caller_subscribed_to_its_own_channel_gets_the_push_before_the_reply() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    c.call(&["HELLO", "3"]);
    c.call(&["SUBSCRIBE", "ch"]);
    c.send_cmd(&[b"EVAL", b"return redis.call('publish', 'ch', 'hi')", b"0"]);
    assert_eq!(c.reply(), b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n");
    assert_eq!(c.reply(), b":1\r\n");
}

#[test]
fn monitor_shows_script_commands_as_lua_lines_after_the_eval() {
    let s = start();
    let mut mon = Raw::connect(s.addr());
    mon.call(&["MONITOR"]);
    let mut c = Raw::connect(s.addr());
    c.call(&["SELECT", "2"]);
    c.call(&[
        "EVAL",
        "redis.call('set', KEYS[1], 'v') return redis.call('get', KEYS[1])",
        "1",
        "k",
    ]);
    let lines: Vec<String> = (0..4).map(|_| String::from_utf8(mon.reply()).unwrap()).collect();
    assert!(lines[0].contains("\"SELECT\" \"2\""), "{lines:?}");
    assert!(lines[1].contains("] \"EVAL\" "), "{lines:?}");
    assert!(lines[2].ends_with("[2 lua] \"set\" \"k\" \"v\"\r\n"), "{lines:?}");
    assert!(lines[3].ends_with("[2 lua] \"get\" \"k\"\r\n"), "{lines:?}");
}

#[test]
fn commands_called_from_scripts_count_in_commandstats() {
    let s = start();
    let mut c = conn(&s);
    q::<()>(&mut c, &["CONFIG", "RESETSTAT"]);
    q::<Option<String>>(&mut c, &["EVAL", "redis.call('incr', 'n') return nil", "0"]);
    let stats: String = q(&mut c, &["INFO", "commandstats"]);
    assert!(stats.contains("cmdstat_eval:calls=1,"), "{stats}");
    assert!(stats.contains("cmdstat_incr:calls=1,"), "{stats}");
}

#[test]
fn forbidden_commands_are_refused_with_redis_text() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    let reply = String::from_utf8(c.call(&["EVAL", "return redis.call('subscribe', 'x')", "0"])).unwrap();
    assert!(
        reply.starts_with("-ERR This Redis command is not allowed from script script: "),
        "{reply}"
    );
}

#[test]
fn eval_ro_refuses_writes() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    let reply = String::from_utf8(c.call(&["EVAL_RO", "return redis.call('set', 'k', 'v')", "0"])).unwrap();
    assert!(
        reply.starts_with("-ERR Write commands are not allowed from read-only scripts. script: "),
        "{reply}"
    );
    assert_eq!(c.call(&["EVAL_RO", "return redis.call('exists', 'k')", "0"]), b":0\r\n");
}

#[test]
fn globals_are_read_only() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    let reply = String::from_utf8(c.call(&["EVAL", "redis = nil", "0"])).unwrap();
    assert!(
        reply.starts_with("-ERR user_script:1: Attempt to modify a readonly table script: "),
        "{reply}"
    );
    // The next script still has a working redis table.
    assert_eq!(c.call(&["EVAL", "return redis.call('ping')", "0"]), b"+PONG\r\n");
}

#[test]
fn error_values_redis_itself_crashes_on_are_plain_errors_here() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    for script in ["error({ok='fine'})", "error({})", "error({err={}})"] {
        let reply = c.call(&["EVAL", script, "0"]);
        assert_eq!(reply[0], b'-', "{script}: {}", String::from_utf8_lossy(&reply));
    }
    assert_eq!(c.call(&["PING"]), b"+PONG\r\n");
}

#[test]
fn a_script_that_allocates_without_bound_fails_cleanly() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    c.call(&["CONFIG", "SET", "lua-memory-limit", "20mb"]);
    let reply = String::from_utf8(c.call(&[
        "EVAL",
        "local t = {} local i = 0 while true do i = i + 1 t[i] = string.rep('x', 1000) .. i end",
        "0",
    ]))
    .unwrap();
    assert!(reply.starts_with("-ERR Error running script, not enough memory"), "{reply}");
    assert_eq!(c.call(&["EVAL", "return 1", "0"]), b":1\r\n");
}

#[test]
fn time_is_frozen_while_a_script_runs() {
    let s = start_with(|c| c.clock = keylock::Clock::manual(1_700_000_000_000));
    let mut c = Raw::connect(s.addr());
    c.call(&["SET", "k", "v", "PX", "10"]);
    // Every command in one script judges expiry at the same instant.
    let script = "local a = redis.call('pttl', KEYS[1]) local b = redis.call('pttl', KEYS[1]) return {a, b}";
    assert_eq!(c.call(&["EVAL", script, "1", "k"]), b"*2\r\n:10\r\n:10\r\n");
    s.clock().advance(10);
    assert_eq!(c.call(&["EVAL", script, "1", "k"]), b"*2\r\n:-2\r\n:-2\r\n");
}

#[test]
fn redisson_lock_cycle_with_waiter_woken_by_unlock_message() {
    let s = start();
    let unlock = include_str!("../lua/redisson/4.7.0/lock-unlock.lua");
    let mut owner = Raw::connect(s.addr());
    let mut waiter = Raw::connect(s.addr());
    let mut waiter_sub = Raw::connect(s.addr());
    assert_eq!(owner.call(&["EVAL", LOCK_ACQUIRE, "1", "{l}", "30000", "a:1"]), b"$-1\r\n");
    // The waiter gets the remaining TTL, subscribes, and waits.
    let ttl = String::from_utf8(waiter.call(&["EVAL", LOCK_ACQUIRE, "1", "{l}", "30000", "b:1"])).unwrap();
    assert!(ttl.starts_with(':'), "{ttl}");
    waiter_sub.call(&["SUBSCRIBE", "redisson_lock__channel:{l}"]);
    let released = owner.call(&[
        "EVAL",
        unlock,
        "3",
        "{l}",
        "redisson_lock__channel:{l}",
        "redisson_unlock_latch:{l}:req1",
        "0",
        "30000",
        "a:1",
        "PUBLISH",
        "8000",
    ]);
    assert_eq!(released, b":1\r\n");
    waiter_sub.reader.get_ref().set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    assert_eq!(
        waiter_sub.reply(),
        b"*3\r\n$7\r\nmessage\r\n$26\r\nredisson_lock__channel:{l}\r\n$1\r\n0\r\n"
    );
    assert_eq!(waiter.call(&["EVAL", LOCK_ACQUIRE, "1", "{l}", "30000", "b:1"]), b"$-1\r\n");
}

fn info_field(c: &mut redis::Connection, field: &str) -> u64 {
    let info: String = q(c, &["INFO", "memory"]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in INFO memory"))
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn info_memory_counts_cached_scripts_until_script_flush() {
    // Redis's "SCRIPTING FLUSH ASYNC": 100 scripts cached, none after.
    let s = start();
    let mut c = conn(&s);
    assert_eq!(info_field(&mut c, "number_of_cached_scripts"), 0);
    let empty = info_field(&mut c, "used_memory_scripts_eval");
    for i in 0..100 {
        let _: String = q(&mut c, &["SCRIPT", "LOAD", &format!("return {i}")]);
    }
    let _: i64 = q(&mut c, &["EVAL", "return 1000", "0"]);
    assert_eq!(info_field(&mut c, "number_of_cached_scripts"), 101);
    assert!(info_field(&mut c, "used_memory_scripts_eval") > empty + 101 * 48);
    assert!(info_field(&mut c, "used_memory_vm_eval") > 0);
    let _: String = q(&mut c, &["SCRIPT", "FLUSH", "ASYNC"]);
    assert_eq!(info_field(&mut c, "number_of_cached_scripts"), 0);
    assert_eq!(info_field(&mut c, "used_memory_scripts_eval"), empty);
}
