//! A script that runs too long: other clients get BUSY, SCRIPT KILL stops
//! it (UNKILLABLE once it has written), SHUTDOWN NOSAVE still works, and
//! service resumes afterwards.

mod common;
use common::*;

use std::time::{Duration, Instant};

const BUSY: &[u8] = b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";

fn quick_busy_server() -> ServerHandle {
    let s = start();
    Raw::connect(s.addr()).call(&["CONFIG", "SET", "busy-reply-threshold", "100"]);
    s
}

/// Sends `cmd` until the server starts answering BUSY (the script is past the threshold).
fn wait_for_busy(c: &mut Raw) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let reply = c.call(&["GET", "x"]);
        if reply == BUSY {
            return;
        }
        assert!(Instant::now() < deadline, "never became busy: {}", String::from_utf8_lossy(&reply));
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn infinite_loop_makes_others_busy_until_script_kill() {
    let s = quick_busy_server();
    let mut runner = Raw::connect(s.addr());
    runner.send(b"EVAL \"while true do end\" 0\r\n");
    let mut other = Raw::connect(s.addr());
    wait_for_busy(&mut other);
    assert_eq!(other.call(&["PING"]), BUSY);
    assert_eq!(other.call(&["SCRIPT", "KILL"]), b"+OK\r\n");
    let reply = String::from_utf8(runner.reply()).unwrap();
    assert!(
        reply.starts_with("-ERR Script killed by user with SCRIPT KILL... script: "),
        "{reply}"
    );
    assert!(reply.ends_with(", on @user_script:1.\r\n"), "{reply}");
    // Normal service afterwards, for both clients.
    assert_eq!(other.call(&["SET", "x", "1"]), b"+OK\r\n");
    assert_eq!(runner.call(&["GET", "x"]), b"$1\r\n1\r\n");
    assert_eq!(other.call(&["SCRIPT", "KILL"]), b"-NOTBUSY No scripts in execution right now.\r\n");
}

#[test]
fn a_script_that_wrote_is_unkillable_but_shutdown_nosave_stops_the_server() {
    let s = quick_busy_server();
    let addr = s.addr();
    let mut runner = Raw::connect(addr);
    runner.send(b"EVAL \"redis.call('set','k','v') while true do end\" 0\r\n");
    let mut other = Raw::connect(addr);
    wait_for_busy(&mut other);
    assert_eq!(
        other.call(&["SCRIPT", "KILL"]),
        b"-UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.\r\n"
    );
    other.send_cmd(&[b"SHUTDOWN", b"NOSAVE"]);
    assert!(other.is_closed());
    assert!(runner.is_closed());
    wait_until_closed(addr);
}

#[test]
fn before_the_threshold_others_wait_instead_of_getting_busy() {
    let s = start();
    let mut runner = Raw::connect(s.addr());
    runner.send(b"EVAL \"local t = 0 for i = 1, 3000000 do t = t + i end return t\" 0\r\n");
    let mut other = Raw::connect(s.addr());
    // The script is atomic and short: the other client's command runs after it.
    assert_eq!(other.call(&["PING"]), b"+PONG\r\n");
    assert_eq!(runner.reply(), b":4500001500000\r\n");
}

/// Starts `script` on one connection, waits until it is busy, sends
/// SCRIPT KILL from another, and returns the script's reply.
fn kill_busy_script(script: &str) -> String {
    let s = quick_busy_server();
    let mut runner = Raw::connect(s.addr());
    runner.send_cmd(&[b"EVAL", script.as_bytes(), b"0"]);
    let mut other = Raw::connect(s.addr());
    wait_for_busy(&mut other);
    assert_eq!(other.call(&["SCRIPT", "KILL"]), b"+OK\r\n");
    let reply = String::from_utf8(runner.reply()).unwrap();
    // Served normally afterwards, on both connections.
    assert_eq!(other.call(&["PING"]), b"+PONG\r\n");
    assert_eq!(runner.call(&["PING"]), b"+PONG\r\n");
    reply
}

fn assert_killed(reply: &str, line: u32) {
    assert!(
        reply.starts_with("-ERR Script killed by user with SCRIPT KILL... script: "),
        "{reply}"
    );
    assert!(reply.ends_with(&format!(", on @user_script:{line}.\r\n")), "{reply}");
}

#[test]
fn script_kill_stops_a_script_that_catches_the_kill_with_pcall() {
    let reply = kill_busy_script("while true do pcall(function() while true do end end) end");
    assert_killed(&reply, 1);
}

#[test]
fn script_kill_stops_nested_pcalls_and_xpcall_with_a_plain_handler() {
    assert_killed(
        &kill_busy_script("while true do pcall(pcall, pcall, function() while true do end end) end"),
        1,
    );
    assert_killed(
        &kill_busy_script("while true do xpcall(function() while true do end end, function(e) return e end) end"),
        1,
    );
}

#[test]
fn script_kill_stops_a_script_whose_error_handler_loops() {
    // Lua runs a handler for an error raised from the kill hook with hooks
    // off, so keylock does not run the script's handler for the kill
    // (Redis 7.0.15 hangs here for good).
    let reply = kill_busy_script("local ok = xpcall(function() while true do end end, function() while true do end end)\nreturn 'after'");
    assert_killed(&reply, 2);
    // A handler that loops for an ordinary error is interrupted like any code.
    let reply = kill_busy_script("local ok = xpcall(function() error('x') end, function() while true do end end)\nreturn 'after'");
    assert_killed(&reply, 2);
    // And one that calls back into pcall and loops there.
    let reply = kill_busy_script(
        "while true do xpcall(function() error('x') end, function() while true do pcall(function() while true do end end) end end) end",
    );
    assert_killed(&reply, 1);
}

#[test]
fn shutdown_nosave_stops_a_script_that_catches_every_error() {
    let s = quick_busy_server();
    let addr = s.addr();
    let mut runner = Raw::connect(addr);
    runner.send(b"EVAL \"while true do pcall(function() while true do end end) end\" 0\r\n");
    let mut other = Raw::connect(addr);
    wait_for_busy(&mut other);
    let started = Instant::now();
    other.send_cmd(&[b"SHUTDOWN", b"NOSAVE"]);
    assert!(other.is_closed());
    assert!(runner.is_closed());
    wait_until_closed(addr);
    assert!(started.elapsed() < Duration::from_secs(5));
}
