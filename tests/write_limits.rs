//! Writes refused for the server's state, as Redis 7.0.15 refuses them:
//! past `maxmemory` (deny-oom commands, anything queued in MULTI, scripts
//! by their declared flags or, without a shebang, at their first deny-oom
//! command) and with `min-replicas-to-write` set (keylock has no
//! replicas). Every case is compared byte for byte with a real
//! redis-server, with the INFO counters the refusals leave.

mod common;
use common::*;

use std::net::SocketAddr;

/// Sends each command in order on one connection; returns the replies.
fn session(addr: SocketAddr, commands: &[&[&str]]) -> Vec<String> {
    let mut c = Raw::connect(addr);
    commands
        .iter()
        .map(|cmd| String::from_utf8_lossy(&c.call(cmd)).into_owned())
        .collect()
}

fn errorstats(addr: SocketAddr) -> Vec<String> {
    let reply = Raw::connect(addr).call(&["INFO", "errorstats"]);
    let mut lines: Vec<String> = String::from_utf8_lossy(&reply)
        .lines()
        .filter(|l| l.starts_with("errorstat_"))
        .map(str::to_string)
        .collect();
    lines.sort();
    lines
}

/// Runs `setup` (whose replies are not compared: it sets the limit), then
/// `commands`, on keylock and on redis-server; the replies and the error
/// counters must be equal. Returns keylock's replies.
fn same_as_redis(setup: &[&[&str]], commands: &[&[&str]]) -> Vec<String> {
    let keylock = start();
    session(keylock.addr(), setup);
    let ours = session(keylock.addr(), commands);
    if let Some(redis) = real_redis() {
        session(redis.addr, setup);
        let theirs = session(redis.addr, commands);
        for ((cmd, a), b) in commands.iter().zip(&ours).zip(&theirs) {
            assert_eq!(a, b, "{cmd:?}");
        }
        assert_eq!(errorstats(keylock.addr()), errorstats(redis.addr));
    }
    ours
}

const OOM: &str = "-OOM command not allowed when used memory > 'maxmemory'.\r\n";

#[test]
fn past_maxmemory_deny_oom_commands_are_refused_and_reads_still_run() {
    let replies = same_as_redis(
        &[&["SET", "x", "123"], &["CONFIG", "RESETSTAT"], &["CONFIG", "SET", "maxmemory", "1"]],
        &[
            &["SET", "x", "1"],
            &["GET", "x"],
            &["LPUSH", "l", "a"],
            &["DEL", "x"],
            &["INCR", "n"],
            &["EXPIRE", "x", "100"],
            &["PING"],
            &["CONFIG", "SET", "maxmemory", "0"],
            &["SET", "y", "1"],
        ],
    );
    assert_eq!(replies[0], OOM);
    assert_eq!(replies[1], "$3\r\n123\r\n");
    assert_eq!(replies[8], "+OK\r\n");
}

#[test]
fn past_maxmemory_a_transaction_cannot_queue_and_exec_aborts() {
    same_as_redis(
        &[&["CONFIG", "SET", "maxmemory", "1"]],
        &[
            &["MULTI"],
            &["GET", "x"],
            &["EXEC"],
            &["MULTI"],
            &["DISCARD"],
            &["CONFIG", "SET", "maxmemory", "0"],
            &["MULTI"],
            &["SET", "x", "1"],
            &["CONFIG", "SET", "maxmemory", "1"],
            &["EXEC"],
            &["CONFIG", "SET", "maxmemory", "0"],
        ],
    );
}

#[test]
fn past_maxmemory_scripts_follow_their_flags() {
    // Redis's "Script - disallow write on OOM" and "allow-oom shebang flag".
    same_as_redis(
        &[&["SET", "x", "123"], &["CONFIG", "RESETSTAT"], &["CONFIG", "SET", "maxmemory", "1"]],
        &[
            &["EVAL", "redis.call('set', 'x', 1)", "0"],
            &["EVAL", "redis.call('set','x',1); return 1", "1", "x"],
            &["EVAL", "return redis.pcall('set','x',1)", "1", "x"],
            &["EVAL", "return redis.call('get', 'x')", "1", "x"],
            &["EVAL", "#!lua flags=\nreturn 1", "1", "x"],
            &["EVAL", "#!lua\nreturn 1", "0"],
            &["EVAL", "#!lua flags=allow-oom\nredis.call('set','x',1)\nreturn 1", "1", "x"],
            &["EVAL", "#!lua flags=no-writes\nredis.call('get','x')\nreturn 1", "0"],
            &["EVAL_RO", "#!lua flags=no-writes\nreturn redis.call('get','x')", "1", "x"],
            &["EVAL", "\nredis.call('get','x')\nreturn 1", "1", "x"],
            &["EVAL_RO", "\nreturn redis.call('get','x')", "1", "x"],
            &["SCRIPT", "LOAD", "#!lua\nreturn 2"],
            &["EVALSHA", "327e60b78547ebb77ec450ead371d5bd10cbdd69", "0"],
            &["CONFIG", "SET", "maxmemory", "0"],
            &["EVAL", "redis.call('set', 'x', 1)", "0"],
        ],
    );
}

#[test]
fn a_script_that_already_wrote_finishes_past_maxmemory() {
    // Only a script's first write is checked; memory passing the limit
    // mid-script does not stop it.
    same_as_redis(
        &[],
        &[
            &[
                "EVAL",
                "redis.call('set', 'a', 1) redis.call('config', 'set', 'maxmemory', '1') redis.call('set', 'b', 2) return redis.call('get', 'b')",
                "0",
            ],
            &["CONFIG", "SET", "maxmemory", "0"],
        ],
    );
}

#[test]
fn without_good_replicas_writes_are_refused() {
    // Redis's "not enough good replicas" (min-replicas-to-write 1 and no
    // replica).
    let replies = same_as_redis(
        &[
            &["SET", "x", "1"],
            &["CONFIG", "RESETSTAT"],
            &["CONFIG", "SET", "min-replicas-to-write", "1"],
        ],
        &[
            &["SET", "x", "2"],
            &["GET", "x"],
            &["EVAL", "#!lua\nreturn redis.call('get','x')", "1", "x"],
            &["EVAL", "#!lua flags=no-writes\nreturn redis.call('get','x')", "1", "x"],
            &["EVAL", "return redis.call('get','x')", "1", "x"],
            &["EVAL", "return redis.call('set','x', 1)", "1", "x"],
            &["EVAL", "return redis.pcall('set','x', 1)", "1", "x"],
            &["MULTI"],
            &["SET", "x", "3"],
            &["EXEC"],
            &["CONFIG", "SET", "min-replicas-max-lag", "0"],
            &["SET", "x", "4"],
            &["CONFIG", "SET", "min-replicas-max-lag", "10"],
            &["CONFIG", "SET", "min-replicas-to-write", "0"],
            &["SET", "x", "5"],
        ],
    );
    assert_eq!(replies[0], "-NOREPLICAS Not enough good replicas to write.\r\n");
    assert_eq!(replies[14], "+OK\r\n");
}
