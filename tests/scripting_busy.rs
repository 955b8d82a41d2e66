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
    // Once SHUTDOWN's caller sees its connection close, the port is closed
    // too, as redis-server has exited by then.
    assert!(std::net::TcpStream::connect(addr).is_err(), "a connection was taken after SHUTDOWN");
    assert!(runner.is_closed());
    wait_until_closed(addr);
}

#[test]
fn once_shutdown_closes_its_caller_the_port_refuses_connections() {
    let s = start();
    let addr = s.addr();
    let mut c = Raw::connect(addr);
    c.send_cmd(&[b"SHUTDOWN", b"NOSAVE"]);
    assert!(c.is_closed());
    assert!(std::net::TcpStream::connect(addr).is_err(), "a connection was taken after SHUTDOWN");
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

/// Starts `EVAL "while true do end" 0` on a connection of its own and
/// waits until the server answers BUSY.
fn start_busy_script(addr: std::net::SocketAddr) -> Raw {
    let mut runner = Raw::connect(addr);
    assert_eq!(runner.call(&["CONFIG", "SET", "busy-reply-threshold", "100"]), b"+OK\r\n");
    runner.send(b"EVAL \"while true do end\" 0\r\n");
    wait_for_busy(&mut Raw::connect(addr));
    runner
}

/// Ends the busy script, and checks the server serves everyone again.
fn kill_busy_script(addr: std::net::SocketAddr, mut runner: Raw) {
    let mut other = Raw::connect(addr);
    assert_eq!(other.call(&["SCRIPT", "KILL"]), b"+OK\r\n");
    let reply = runner.reply();
    assert!(reply.starts_with(b"-ERR Script killed by user with SCRIPT KILL..."), "{reply:?}");
    assert_eq!(other.call(&["PING"]), b"+PONG\r\n");
    assert_eq!(runner.call(&["PING"]), b"+PONG\r\n");
}

/// While a script is busy: sends `input` on a new connection, reads what
/// comes back until the server closes it or goes quiet, then kills the
/// script. Also returns the ERR count of INFO errorstats afterwards.
fn malformed_while_busy(addr: std::net::SocketAddr, input: &[u8]) -> ((Vec<u8>, Ending), String) {
    let runner = start_busy_script(addr);
    let got = exchange_raw(addr, input, Duration::from_millis(500));
    kill_busy_script(addr, runner);
    let info = String::from_utf8(Raw::connect(addr).call(&["INFO", "errorstats"])).unwrap();
    let err = info.lines().find(|l| l.starts_with("errorstat_ERR:")).unwrap_or("").to_string();
    (got, err)
}

#[test]
fn malformed_request_while_busy_gets_one_protocol_error_and_is_closed() {
    let s = start();
    let ours = malformed_while_busy(s.addr(), b"*1\r\n+foo\r\n");
    let error = b"-ERR Protocol error: expected '$', got '+'\r\n".to_vec();
    // The protocol error and the killed script's error.
    assert_eq!(ours, ((error, Ending::Closed), "errorstat_ERR:count=2".to_string()));
    if let Some(redis) = real_redis() {
        assert_eq!(malformed_while_busy(redis.addr, b"*1\r\n+foo\r\n"), ours);
    }
}

#[test]
fn commands_before_a_malformed_request_while_busy_are_answered_then_it_closes() {
    let s = start();
    let ours = malformed_while_busy(s.addr(), b"PING\r\n*x\r\n");
    let mut expected = BUSY.to_vec();
    expected.extend_from_slice(b"-ERR Protocol error: invalid multibulk length\r\n");
    assert_eq!(ours, ((expected, Ending::Closed), "errorstat_ERR:count=2".to_string()));
    if let Some(redis) = real_redis() {
        assert_eq!(malformed_while_busy(redis.addr, b"PING\r\n*x\r\n"), ours);
    }
}

#[test]
fn commands_held_back_while_busy_are_answered_in_order_once_it_ends() {
    use std::io::{Read, Write};
    let s = start();
    let runner = start_busy_script(s.addr());
    // A client that sends without reading until the server stops taking
    // its commands (its unread BUSY replies hold it back).
    let flood = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    flood.set_recv_buffer_size(4096).unwrap();
    flood.set_send_buffer_size(4096).unwrap();
    flood.connect(&s.addr().into()).unwrap();
    let mut flood: std::net::TcpStream = flood.into();
    flood.set_write_timeout(Some(Duration::from_millis(300))).unwrap();
    let chunk = b"PING\r\n".repeat(100);
    let mut sent = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert!(
            Instant::now() < deadline,
            "the server kept reading a client that does not read ({sent} bytes)"
        );
        // Partial writes resume mid-command: the stream stays whole.
        match flood.write(&chunk[sent % 6..]) {
            Ok(n) => sent += n,
            Err(_) => break,
        }
    }
    // Finish the last partial command, then end the script.
    flood.set_write_timeout(None).unwrap();
    let partial = sent % 6;
    let rest = &b"PING\r\n"[partial..];
    let writer = {
        let mut w = flood.try_clone().unwrap();
        let rest = if partial == 0 { Vec::new() } else { rest.to_vec() };
        std::thread::spawn(move || w.write_all(&rest).unwrap())
    };
    let commands = sent.div_ceil(6);
    kill_busy_script(s.addr(), runner);
    let mut replies = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    flood.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let pong = b"+PONG\r\n";
    while !replies.ends_with(pong) || count_replies(&replies) < commands {
        let n = flood
            .read(&mut buf)
            .unwrap_or_else(|e| panic!("{e}: {} replies of {commands}", count_replies(&replies)));
        assert!(n > 0, "closed after {} of {commands} replies", count_replies(&replies));
        replies.extend_from_slice(&buf[..n]);
    }
    writer.join().unwrap();
    // Every command got one reply: BUSY while the script ran, PONG after.
    let busy = replies.windows(BUSY.len()).filter(|w| *w == BUSY).count();
    let busy_bytes = busy * BUSY.len();
    assert!(replies[..busy_bytes].chunks(BUSY.len()).all(|r| r == BUSY));
    assert!(replies[busy_bytes..].chunks(pong.len()).all(|r| r == pong));
    assert_eq!(busy + (replies.len() - busy_bytes) / pong.len(), commands);
}

fn count_replies(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| b == b'\n').count()
}

/// Starts `script` on one connection, waits until it is busy, sends
/// SCRIPT KILL from another, and returns the script's reply.
fn reply_when_killed(script: &str) -> String {
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
    let reply = reply_when_killed("while true do pcall(function() while true do end end) end");
    assert_killed(&reply, 1);
}

#[test]
fn script_kill_stops_nested_pcalls_and_xpcall_with_a_plain_handler() {
    assert_killed(
        &reply_when_killed("while true do pcall(pcall, pcall, function() while true do end end) end"),
        1,
    );
    assert_killed(
        &reply_when_killed("while true do xpcall(function() while true do end end, function(e) return e end) end"),
        1,
    );
}

#[test]
fn script_kill_stops_a_script_whose_error_handler_loops() {
    // Lua runs a handler for an error raised from the kill hook with hooks
    // off, so keylock does not run the script's handler for the kill
    // (Redis 7.0.15 hangs here for good).
    let reply = reply_when_killed("local ok = xpcall(function() while true do end end, function() while true do end end)\nreturn 'after'");
    assert_killed(&reply, 2);
    // A handler that loops for an ordinary error is interrupted like any code.
    let reply = reply_when_killed("local ok = xpcall(function() error('x') end, function() while true do end end)\nreturn 'after'");
    assert_killed(&reply, 2);
    // And one that calls back into pcall and loops there.
    let reply = reply_when_killed(
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

#[test]
fn shutting_the_handle_down_ends_a_script_that_never_ends() {
    // No busy threshold (scripts are never BUSY), and the script wrote:
    // stopping the embedded server still ends it, as SHUTDOWN NOSAVE would.
    let s = start();
    let addr = s.addr();
    let mut c = Raw::connect(addr);
    assert_eq!(c.call(&["CONFIG", "SET", "busy-reply-threshold", "0"]), b"+OK\r\n");
    c.send(b"EVAL \"redis.call('set', 'k', 'v') while true do end\" 0\r\n");
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    s.shutdown();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(c.is_closed() || std::net::TcpStream::connect(addr).is_err());
}

/// What a second client is answered while a script is busy, command by
/// command (each reply raw), then what the first client's EVAL got.
fn busy_session(addr: std::net::SocketAddr, commands: &[&[&str]]) -> (Vec<Vec<u8>>, Vec<u8>) {
    let mut admin = Raw::connect(addr);
    admin.call(&["CONFIG", "SET", "busy-reply-threshold", "100"]);
    admin.call(&["SET", "k", "v"]);
    let mut runner = Raw::connect(addr);
    runner.send(b"EVAL \"while true do end\" 0\r\n");
    let mut other = Raw::connect(addr);
    wait_for_busy(&mut other);
    let replies = commands.iter().map(|argv| other.call(argv)).collect();
    let eval = runner.reply();
    (replies, eval)
}

/// Redis 7.0 serves the commands flagged allow-busy while a script is busy
/// (AUTH, HELLO, MULTI, DISCARD, WATCH, UNWATCH, RESET, QUIT, SCRIPT KILL,
/// SHUTDOWN NOSAVE); any other command gets BUSY, and in a transaction
/// that refusal aborts its EXEC. keylock answers each byte for byte as
/// redis-server does.
#[test]
fn allow_busy_commands_are_served_during_a_busy_script_as_redis_serves_them() {
    let Some(redis) = real_redis() else { return };
    let commands: &[&[&str]] = &[
        &["AUTH", "nobody"],
        &["AUTH", "default", "wrong"],
        &["MULTI"],
        &["SET", "k", "changed"],
        &["WATCH", "k"],
        &["DISCARD"],
        &["WATCH", "k"],
        &["UNWATCH"],
        &["MULTI"],
        &["SET", "k", "changed"],
        &["MULTI"],
        &["EXEC"],
        &["HELLO", "2", "SETNAME", "busy-client"],
        &["FUNCTION", "STATS"],
        &["SHUTDOWN"],
        &["SHUTDOWN", "BOGUS"],
        &["RESET"],
        &["MULTI"],
        &["SCRIPT", "KILL"],
        &["DISCARD"],
        &["WATCH", "k"],
        &["SCRIPT", "KILL"],
    ];
    let s = start();
    let (ours, our_eval) = busy_session(s.addr(), commands);
    let (theirs, their_eval) = busy_session(redis.addr, commands);
    for ((argv, ours), theirs) in commands.iter().zip(&ours).zip(&theirs) {
        let show = |r: &[u8]| String::from_utf8_lossy(r).into_owned();
        if argv[0] == "HELLO" {
            // Server name, version and client id differ; the shape and
            // the fact that it was served, not refused, must not.
            assert!(
                ours.starts_with(b"*14\r\n") && theirs.starts_with(b"*14\r\n"),
                "{argv:?}: {} / {}",
                show(ours),
                show(theirs)
            );
            continue;
        }
        assert_eq!(show(ours), show(theirs), "{argv:?}");
    }
    assert!(
        our_eval.starts_with(b"-ERR Script killed by user with SCRIPT KILL..."),
        "{}",
        String::from_utf8_lossy(&our_eval)
    );
    assert!(their_eval.starts_with(b"-ERR Script killed by user with SCRIPT KILL..."));
    // Nothing refused meanwhile ran.
    for addr in [s.addr(), redis.addr] {
        let mut c = Raw::connect(addr);
        assert_eq!(c.call(&["GET", "k"]), b"$1\r\nv\r\n");
    }
}

/// A client that connects while a script is busy is a client of the
/// server at once: it can authenticate and name itself, and keeps both
/// when the script ends.
#[test]
fn a_client_connecting_during_a_busy_script_keeps_what_it_set_meanwhile() {
    let s = start_with(|c| c.set("requirepass", &["s3cret"]).unwrap());
    let mut admin = Raw::connect(s.addr());
    admin.call(&["AUTH", "s3cret"]);
    admin.call(&["CONFIG", "SET", "busy-reply-threshold", "100"]);
    let mut runner = Raw::connect(s.addr());
    runner.call(&["AUTH", "s3cret"]);
    runner.send(b"EVAL \"while true do end\" 0\r\n");
    let mut probe = Raw::connect(s.addr());
    probe.call(&["AUTH", "s3cret"]);
    wait_for_busy(&mut probe);
    let mut late = Raw::connect(s.addr());
    assert_eq!(late.call(&["AUTH", "s3cret"]), b"+OK\r\n");
    assert!(late.call(&["HELLO", "3", "SETNAME", "late"]).starts_with(b"%7\r\n"));
    assert_eq!(late.call(&["GET", "x"]), BUSY);
    assert_eq!(late.call(&["SCRIPT", "KILL"]), b"+OK\r\n");
    runner.reply();
    assert_eq!(late.call(&["CLIENT", "GETNAME"]), b"$4\r\nlate\r\n");
    assert_eq!(late.call(&["SET", "x", "1"]), b"+OK\r\n");
}

/// QUIT during a busy script is answered and closes the connection, as
/// Redis serves it (allow-busy), on keylock and redis-server alike.
#[test]
fn quit_during_a_busy_script_is_answered_and_closes_the_connection() {
    let Some(redis) = real_redis() else { return };
    let s = start();
    for addr in [s.addr(), redis.addr] {
        let mut admin = Raw::connect(addr);
        admin.call(&["CONFIG", "SET", "busy-reply-threshold", "100"]);
        let mut runner = Raw::connect(addr);
        runner.send(b"EVAL \"while true do end\" 0\r\n");
        let mut other = Raw::connect(addr);
        wait_for_busy(&mut other);
        assert_eq!(other.call(&["QUIT"]), b"+OK\r\n", "{addr}");
        assert!(other.is_closed(), "{addr}: still open after QUIT");
        assert_eq!(admin.call(&["SCRIPT", "KILL"]), b"+OK\r\n");
        runner.reply();
    }
}
