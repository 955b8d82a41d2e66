//! What scripts leave in INFO: errors raised or returned inside a script
//! are counted once, where Redis 7.0.15 counts them (the failing command,
//! or a refused one as `rejected_calls`; the EVAL's own error reply only
//! when nothing counted it before), and every command a script runs counts
//! in `total_commands_processed`. Each case runs on keylock and on a real
//! redis-server after CONFIG RESETSTAT; the counters must be equal.

mod common;
use common::*;

use std::net::SocketAddr;

/// The counters a case is compared on: totals, errorstats, and each
/// command's calls / rejected / failed (without its time).
fn counters(addr: SocketAddr) -> Vec<String> {
    let mut c = Raw::connect(addr);
    let mut lines = Vec::new();
    for section in ["stats", "errorstats", "commandstats"] {
        let reply = c.call(&["INFO", section]);
        for line in String::from_utf8_lossy(&reply).lines() {
            if line.starts_with("total_commands_processed:") || line.starts_with("total_error_replies:") || line.starts_with("errorstat_") {
                lines.push(line.to_string());
            } else if let Some(rest) = line.strip_prefix("cmdstat_") {
                // cmdstat_set:calls=1,usec=…,usec_per_call=…,rejected_calls=0,failed_calls=0
                let (name, fields) = rest.split_once(':').unwrap_or((rest, ""));
                let kept: Vec<&str> = fields.split(',').filter(|f| !f.starts_with("usec")).collect();
                lines.push(format!("{name}:{}", kept.join(",")));
            }
        }
    }
    // Redis lists commandstats in its hash table's order.
    lines.sort();
    lines
}

/// Runs `setup` then `script` (an EVAL or EVAL_RO argument list) on a
/// fresh counter state, and returns the script's reply and the counters.
fn run(addr: SocketAddr, setup: &[&[&str]], script: &[&str]) -> (Vec<u8>, Vec<String>) {
    let mut c = Raw::connect(addr);
    c.call(&["FLUSHALL"]);
    for cmd in setup {
        c.call(cmd);
    }
    c.call(&["CONFIG", "RESETSTAT"]);
    let reply = c.call(script);
    (reply, counters(addr))
}

fn same_counters(setup: &[&[&str]], script: &[&str]) {
    let keylock = start();
    let ours = run(keylock.addr(), setup, script);
    let Some(redis) = real_redis() else { return };
    let theirs = run(redis.addr, setup, script);
    assert_eq!(
        String::from_utf8_lossy(&ours.0),
        String::from_utf8_lossy(&theirs.0),
        "reply to {script:?}"
    );
    assert_eq!(ours.1, theirs.1, "counters after {script:?}");
}

#[test]
fn a_failing_command_inside_a_script_is_counted_once() {
    same_counters(&[], &["EVAL", "return redis.call('select', 99)", "0"]);
    same_counters(&[], &["EVAL", "return redis.pcall('select', 99)", "0"]);
    same_counters(&[&["SET", "S", "x"]], &["EVAL", "return redis.call('lpush', 'S', 'x')", "1", "S"]);
    same_counters(&[], &["EVAL", "return redis.call('set', 'k', 'v', 'xx', 'nx')", "0"]);
    same_counters(&[&["SET", "S", "x"]], &["EVAL", "redis.pcall('lpush', 'S', 'x') return 1", "0"]);
}

#[test]
fn a_refused_command_inside_a_script_counts_as_rejected() {
    same_counters(&[], &["EVAL", "redis.pcall('nosuchcmd') return 1", "0"]);
    same_counters(&[], &["EVAL", "redis.pcall('incr') return 1", "0"]);
    same_counters(&[], &["EVAL", "return redis.call('incr', 'S2', 'x')", "0"]);
    same_counters(&[], &["EVAL", "return redis.call('nosuchcmd')", "0"]);
    same_counters(&[], &["EVAL", "return redis.pcall('incr')", "0"]);
    same_counters(&[], &["EVAL_RO", "return redis.call('set', 'x', 'y')", "1", "x"]);
    same_counters(&[], &["EVAL_RO", "local t = redis.pcall('set', 'x', 'y') return 1", "1", "x"]);
    same_counters(&[], &["EVAL", "return redis.call('multi')", "0"]);
}

#[test]
fn errors_a_script_makes_itself_count_as_the_evals() {
    same_counters(&[], &["EVAL", "return redis.error_reply('My Error')", "0"]);
    same_counters(&[], &["EVAL", "return {err = 'ERR nested'}", "0"]);
    same_counters(&[], &["EVAL", "return {1, {err = 'X one'}, {err = 'Y two'}}", "0"]);
    same_counters(&[], &["EVAL", "error('boom')", "0"]);
    same_counters(&[], &["EVAL", "return redis.call()", "0"]);
    same_counters(&[], &["EVAL", "return redis.call({})", "0"]);
    same_counters(&[&["SET", "S", "x"]], &["EVAL", "return {redis.pcall('lpush', 'S', 'x')}", "0"]);
    same_counters(
        &[&["SET", "S", "x"]],
        &[
            "EVAL",
            "return {redis.pcall('lpush', 'S', 'x'), redis.pcall('lpush', 'S', 'y'), {err = 'Z'}}",
            "0",
        ],
    );
    // The stack-limit error at the bottom of ~8,000 nested arrays counts
    // too; the test's reply reader recurses once per level.
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(|| same_counters(&[], &["EVAL", "local a = {} a[1] = a return a", "0"]))
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn commands_run_by_scripts_count_as_processed() {
    same_counters(&[], &["EVAL", "redis.call('ping') redis.call('ping') return 1", "0"]);
    same_counters(
        &[],
        &[
            "EVAL",
            "redis.call('set', 'a', 1) redis.pcall('nosuch') return redis.call('get', 'a')",
            "0",
        ],
    );
}

#[test]
fn rejected_and_queued_client_commands_are_not_processed_commands() {
    let script = |addr: SocketAddr| {
        let mut c = Raw::connect(addr);
        c.call(&["CONFIG", "RESETSTAT"]);
        c.call(&["NOSUCH"]);
        c.call(&["GET"]);
        c.call(&["MULTI"]);
        c.call(&["PING"]);
        c.call(&["PING"]);
        c.call(&["EXEC"]);
        counters(addr)
    };
    let keylock = start();
    let ours = script(keylock.addr());
    if let Some(redis) = real_redis() {
        assert_eq!(ours, script(redis.addr));
    }
}
