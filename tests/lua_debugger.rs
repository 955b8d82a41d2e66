//! The Lua debugger (SCRIPT DEBUG YES|SYNC, then EVAL): sessions driven
//! over raw TCP and compared byte for byte with redis-server's, redis-cli
//! `--ldb` and `--ldb-sync-mode` runs compared with redis-server's, and
//! what each mode does to the dataset and to other clients.

mod common;

use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Binary, Raw, real_redis, same_on_both_servers, start};

/// A script that exercises most of what the debugger shows.
const SCRIPT: &str = "\
local function double(x)
  local y = x * 2
  redis.breakpoint()
  return y
end
local big = {}
for i = 1, 100 do big[i] = i end
redis.call('rpush', KEYS[1], unpack(big))
local r = double(21)
redis.debug('values', r, {1, 2, {x = 3}}, true, nil)
redis.call('incr', ARGV[1])
redis.pcall('hset', KEYS[1], 'a', 'b')
redis.setresp(3)
redis.call('hset', 'h', 'f', 'v')
local m = redis.call('hgetall', 'h')
return {r, redis.call('lrange', KEYS[1], 0, 3)}
";

/// Runs a session: SCRIPT DEBUG `mode`, EVAL `script` with `args`, each
/// debugger command in turn, then the EVAL's own reply; records every
/// reply and whether the server closed the connection afterwards.
fn session(addr: SocketAddr, mode: &str, script: &str, args: &[&str], commands: &[&[&str]]) -> Vec<Vec<u8>> {
    let mut c = Raw::connect(addr);
    let mut out = vec![c.call(&["SCRIPT", "DEBUG", mode])];
    let mut eval = vec!["EVAL", script];
    eval.extend_from_slice(args);
    out.push(c.call(&eval));
    for command in commands {
        out.push(c.call(command));
    }
    out.push(c.reply());
    out.push(format!("closed: {}", c.is_closed()).into_bytes());
    out
}

const STEPPING: &[&[&str]] = &[
    &["help"],
    &["whole"],
    &["b", "9", "13", "-3", "x", "0", "12"],
    &["break"],
    // Line numbers are narrowed to a C int: this is line 1.
    &["b", "4294967297"],
    &["b", "-4294967297"],
    &["continue"],
    &["trace"],
    &["print"],
    &["p", "y"],
    &["p", "KEYS"],
    &["p", "nothere"],
    &["eval", "y", "+", "1"],
    &["e", "redis.call('ping')"],
    &["e", "foo("],
    &["e", "local z = 1"],
    &["r", "ping"],
    &["redis", "set", "a", "b"],
    &["r", "get"],
    &["r", "nosuchcommand", "x"],
    &["maxlen"],
    &["m", "10"],
    &["r", "lrange", "k", "0", "-1"],
    &["m", "0"],
    &["s"],
    &["n"],
    &["step"],
    &["next"],
    &["zz"],
    &["r"],
    &["l", "3", "1"],
    &["list"],
    &["l", "0", "-1"],
    &["s"],
    &["s"],
    &["s"],
    &["c"],
];

#[test]
fn a_synchronous_session_answers_as_redis_does() {
    same_on_both_servers(|addr| session(addr, "SYNC", SCRIPT, &["1", "k", "counter"], STEPPING));
}

#[test]
fn a_synchronous_session_keeps_what_the_script_wrote() {
    let server = start();
    let replies = session(server.addr(), "SYNC", SCRIPT, &["1", "k", "counter"], &[&["c"], &["c"]]);
    assert_eq!(replies.last().unwrap(), b"closed: true");
    let mut c = Raw::connect(server.addr());
    assert_eq!(c.call(&["LLEN", "k"]), b":100\r\n");
    assert_eq!(c.call(&["GET", "counter"]), b"$1\r\n1\r\n");
}

#[test]
fn a_forked_session_answers_as_redis_does_and_rolls_back() {
    let Some(redis) = real_redis() else { return };
    let keylock = Binary::start(&[]);
    let run = |addr| {
        let mut replies = session(addr, "YES", SCRIPT, &["1", "k", "counter"], STEPPING);
        // The child's changes went with it.
        let mut c = Raw::connect(addr);
        replies.push(c.call(&["EXISTS", "k", "counter", "a", "h"]));
        replies
    };
    let show = |r: Vec<Vec<u8>>| r.iter().map(|b| String::from_utf8_lossy(b).into_owned()).collect::<Vec<_>>();
    assert_eq!(show(run(keylock.addr)), show(run(redis.addr)));
}

#[test]
fn debugger_input_is_parsed_as_redis_parses_it() {
    // Redis's own suite: names with NULs, and a `redis` command with a
    // hundred arguments.
    same_on_both_servers(|addr| {
        let mut c = Raw::connect(addr);
        let mut out = vec![c.call(&["SCRIPT", "DEBUG", "SYNC"])];
        out.push(c.call(&["EVAL", "return 'hello'", "0"]));
        for name in [&b"hello\0world"[..], b"hello\0", b"\0hello", b"\0hello\0", b"H\0elp"] {
            c.send_cmd(&[name]);
            out.push(c.reply());
        }
        let mut many: Vec<&[u8]> = vec![b"redis"];
        many.extend(std::iter::repeat_n(&b"test"[..], 100));
        c.send_cmd(&many);
        out.push(c.reply());
        // Garbage before the request is skipped, a second request in
        // the same write is dropped.
        c.send(b"junk*1\r\n$1\r\np\r\n*1\r\n$4\r\nhelp\r\n");
        out.push(c.reply());
        c.send(b"*1\r\n$1\r\nc\r\n");
        out.push(c.reply());
        out.push(c.reply());
        out
    });
}

#[test]
fn a_malformed_request_ends_the_script_with_a_protocol_error() {
    same_on_both_servers(|addr| {
        let mut out = Vec::new();
        for bad in [
            &b"*0\r\n"[..],
            b"*1\r\n$0\r\n\r\n",
            b"*1\r\n$2000\r\n",
            b"*1\r\n:1\r\n",
            b"*1\r\n$1\r\nxyz",
        ] {
            let mut c = Raw::connect(addr);
            c.call(&["SCRIPT", "DEBUG", "SYNC"]);
            out.push(c.call(&["EVAL", "local a = 1\nreturn a", "0"]));
            c.send(bad);
            out.push(c.reply());
            out.push(c.reply());
        }
        out
    });
}

#[test]
fn a_session_without_input_ends_past_a_megabyte() {
    same_on_both_servers(|addr| {
        let mut c = Raw::connect(addr);
        c.call(&["SCRIPT", "DEBUG", "SYNC"]);
        let mut out = vec![c.call(&["EVAL", "return 1", "0"])];
        let mut input = b"*1".to_vec();
        input.resize((1 << 20) + 10, b'1');
        c.send(&input);
        out.push(c.reply());
        out.push(c.reply());
        out
    });
}

#[test]
fn abort_timeouts_and_the_script_flags_answer_as_redis_does() {
    same_on_both_servers(|addr| {
        let mut out = Vec::new();
        let mut admin = Raw::connect(addr);
        out.push(admin.call(&["CONFIG", "SET", "busy-reply-threshold", "200"]));
        // A loop with no stop: past the threshold the debugger stops it.
        out.extend(session(
            addr,
            "SYNC",
            "local i = 0\nwhile true do\n  i = i + 1\nend",
            &["0"],
            &[&["c"], &["p", "nope"], &["a"]],
        ));
        // `abort` keeps what a synchronous session wrote.
        out.extend(session(
            addr,
            "SYNC",
            "redis.call('set', 'kept', '1')\nreturn 1",
            &["0"],
            &[&["s"], &["abort"]],
        ));
        out.push(admin.call(&["GET", "kept"]));
        // A shebang line counts as the script's first line.
        out.extend(session(
            addr,
            "SYNC",
            "#!lua flags=no-writes\nreturn redis.call('get', 'kept')",
            &["0"],
            &[&["w"], &["s"]],
        ));
        // Errors the script raises, and bad numkeys, inside a session.
        out.extend(session(addr, "SYNC", "return redis.call('nosuch')", &["0"], &[&["s"]]));
        let mut c = Raw::connect(addr);
        c.call(&["SCRIPT", "DEBUG", "SYNC"]);
        out.push(c.call(&["EVAL", "return 1", "5"]));
        out.push(c.reply());
        out.push(format!("closed: {}", c.is_closed()).into_bytes());
        out.push(admin.call(&["CONFIG", "SET", "busy-reply-threshold", "5000"]));
        out
    });
}

#[test]
fn script_debug_answers_as_redis_does() {
    same_on_both_servers(|addr| {
        let mut c = Raw::connect(addr);
        let mut out = vec![c.call(&["SCRIPT", "DEBUG", "maybe"])];
        // Not after replies still waiting in a pipeline.
        c.send(&[common::encode(&[b"PING"]), common::encode(&[b"SCRIPT", b"DEBUG", b"YES"])].concat());
        out.push(c.reply());
        out.push(c.reply());
        out.push(c.call(&["SCRIPT", "DEBUG", "YES"]));
        out.push(c.call(&["EVALSHA", "abc", "0"]));
        out.push(c.call(&["EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"]));
        out.push(c.call(&["EVALSHA_RO", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"]));
        out.push(c.call(&["SCRIPT", "DEBUG", "NO"]));
        // With debugging off again, scripts run as ever.
        out.push(c.call(&["EVAL", "return 7", "0"]));
        out
    });
}

#[test]
fn a_client_leaving_a_synchronous_session_lets_the_script_finish() {
    let server = start();
    let mut c = Raw::connect(server.addr());
    c.call(&["SCRIPT", "DEBUG", "SYNC"]);
    let first = c.call(&["EVAL", "redis.call('set', 'a', '1')\nredis.call('set', 'b', '2')\nreturn 1", "0"]);
    assert!(String::from_utf8_lossy(&first).contains("* Stopped at 1"), "{first:?}");
    drop(c);
    // The server waits for no one: the script ran to its end.
    let mut other = Raw::connect(server.addr());
    assert_eq!(other.call(&["MGET", "a", "b"]), b"*2\r\n$1\r\n1\r\n$1\r\n2\r\n");
    // And the next script runs without the debugger.
    assert_eq!(other.call(&["EVAL", "return 3", "0"]), b":3\r\n");
}

#[test]
fn a_synchronous_session_holds_other_clients_while_a_forked_one_does_not() {
    let server = Binary::start(&[]);
    let mut other = Raw::connect(server.addr);
    other.writer.set_read_timeout(Some(Duration::from_millis(300))).unwrap();

    let mut forked = Raw::connect(server.addr);
    forked.call(&["SCRIPT", "DEBUG", "YES"]);
    forked.call(&["EVAL", "redis.call('set', 'x', '1')\nreturn 1", "0"]);
    // The session waits for the user; the server answers.
    assert_eq!(other.call(&["PING"]), b"+PONG\r\n");

    let mut sync = Raw::connect(server.addr);
    sync.call(&["SCRIPT", "DEBUG", "SYNC"]);
    sync.call(&["EVAL", "return 1", "0"]);
    other.send_cmd(&[b"PING"]);
    let mut byte = [0u8; 1];
    let held = std::io::Read::read(&mut other.reader, &mut byte);
    assert!(held.is_err(), "answered during a synchronous session: {held:?}");
    sync.call(&["c"]);
    assert_eq!(sync.reply(), b":1\r\n");
    other.writer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(other.reply(), b"+PONG\r\n");

    // The forked session finishes on its own terms, and its write is gone.
    forked.call(&["s"]);
    forked.call(&["c"]);
    assert_eq!(forked.reply(), b":1\r\n");
    assert!(forked.is_closed());
    assert_eq!(other.call(&["EXISTS", "x"]), b":0\r\n");
}

#[test]
fn shutting_down_ends_forked_sessions() {
    let mut server = Binary::start(&[]);
    let mut forked = Raw::connect(server.addr);
    forked.call(&["SCRIPT", "DEBUG", "YES"]);
    forked.call(&["EVAL", "return 1", "0"]);
    let mut admin = Raw::connect(server.addr);
    admin.send_cmd(&[b"SHUTDOWN", b"NOSAVE"]);
    assert!(server.wait_exit(10).success());
    // Killed with the server: its connection is closed.
    let started = Instant::now();
    assert!(forked.is_closed());
    assert!(started.elapsed() < Duration::from_secs(4));
}

#[test]
fn a_forked_session_dies_with_the_server() {
    let server = Binary::start(&[]);
    let addr = server.addr;
    let mut forked = Raw::connect(addr);
    forked.call(&["SCRIPT", "DEBUG", "YES"]);
    forked.call(&["EVAL", "return 1", "0"]);
    // Killed without a chance to end its sessions: the kernel ends the
    // child, which lets go of the client and of the listening socket.
    drop(server);
    assert!(forked.is_closed());
    common::wait_until(5, "the port to be free again", || std::net::TcpListener::bind(addr).is_ok());
}

#[test]
fn a_forked_session_saves_nothing_over_the_servers_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::keylock_in_dir(dir.path(), &["--save", "3600 1"]);
    let mut c = Raw::connect(server.addr);
    c.call(&["SET", "k", "v"]);
    assert_eq!(c.call(&["SAVE"]), b"+OK\r\n");
    let snapshot = std::fs::read(dir.path().join("dump.rdb")).unwrap();
    // Redis's FLUSHALL saves the emptied dataset when save points are set;
    // from a forked session it must not replace the server's file.
    let replies = session(server.addr, "YES", "redis.call('flushall')\nreturn 1", &["0"], &[&["s"], &["c"]]);
    assert_eq!(replies.last().unwrap(), b"closed: true");
    assert_eq!(std::fs::read(dir.path().join("dump.rdb")).unwrap(), snapshot);
    assert_eq!(c.call(&["GET", "k"]), b"$1\r\nv\r\n");
}

/// What redis-cli prints for a session fed `input` on its standard input.
fn redis_cli_session(addr: SocketAddr, mode: &str, script: &std::path::Path, input: &str) -> String {
    let mut child = Command::new("redis-cli")
        .args(["-h", &addr.ip().to_string(), "-p", &addr.port().to_string(), mode, "--eval"])
        .arg(script)
        .args(["k", ",", "counter"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("redis-cli");
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    // Where a function lives differs from one process to the next.
    let mut shown = String::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("function@0x") {
        shown.push_str(&rest[..at + "function@".len()]);
        rest = rest[at + "function@0x".len()..].trim_start_matches(|c: char| c.is_ascii_hexdigit());
    }
    shown + rest
}

#[test]
fn redis_cli_debugs_scripts_against_keylock_as_against_redis() {
    let Some(redis) = real_redis() else { return };
    let keylock = Binary::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.lua");
    std::fs::write(&script, SCRIPT).unwrap();
    let input = "s\ns\np\nb 12\nc\nt\np y\nr get counter\ne 1+1\nrestart\nc\nc\nc\nquit\n";
    for mode in ["--ldb", "--ldb-sync-mode"] {
        for addr in [keylock.addr, redis.addr] {
            Raw::connect(addr).call(&["FLUSHALL"]);
        }
        let ours = redis_cli_session(keylock.addr, mode, &script, input);
        let theirs = redis_cli_session(redis.addr, mode, &script, input);
        assert!(ours.contains("<debug> line 10:"), "{ours}");
        assert_eq!(ours, theirs, "{mode}: keylock (left) and redis-server (right) differ");
    }
}
