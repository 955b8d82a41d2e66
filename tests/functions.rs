//! Functions seen from several clients, against keylock and, when it is
//! installed, redis-server 7.0.15 with the same steps: a busy function
//! and FUNCTION KILL / SCRIPT KILL / FUNCTION STATS from another client,
//! libraries flushed or replaced while others call them, FUNCTION LIST
//! compared as sets (Redis lists in its dictionaries' seeded order),
//! MONITOR lines and the command and error statistics of FCALL.
//!
//! The single-client replies are in `tests/corpus/functions.txt`.

mod common;
use common::*;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const BUSY_FUNCTION: &[u8] = b"-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n";
const BUSY_EVAL: &[u8] = b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";
const UNKILLABLE: &[u8] = b"-UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.\r\n";

fn library(name: &str) -> String {
    let path = format!("{}/lua/tests/functions/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn call(c: &mut Raw, args: &[&str]) -> Vec<u8> {
    c.call(args)
}

/// Runs `scenario` against keylock, then against redis-server when there
/// is one, and asserts both gave the same transcript.
fn same_as_redis(scenario: impl Fn(SocketAddr) -> Vec<String>) -> Vec<String> {
    let keylock = start();
    let ours = scenario(keylock.addr());
    if let Some(redis) = real_redis() {
        let theirs = scenario(redis.addr);
        assert_eq!(ours, theirs, "keylock (left) and redis-server (right) differ");
    }
    ours
}

fn text(reply: Vec<u8>) -> String {
    String::from_utf8_lossy(&reply).into_owned()
}

/// Sends PING until the server answers `busy` (the function is past the threshold).
fn wait_for_busy(c: &mut Raw, busy: &[u8]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let reply = c.call(&["PING"]);
        if reply == busy {
            return;
        }
        assert!(Instant::now() < deadline, "never became busy: {}", text(reply));
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A server with the busy library loaded and a 50 ms busy threshold.
fn prepare_busy(addr: SocketAddr) -> Raw {
    let mut c = Raw::connect(addr);
    assert_eq!(call(&mut c, &["CONFIG", "SET", "busy-reply-threshold", "50"]), b"+OK\r\n");
    assert_eq!(
        call(&mut c, &["FUNCTION", "LOAD", "REPLACE", &library("busy.lua")]),
        b"$4\r\nbusy\r\n"
    );
    c
}

/// FUNCTION STATS' `duration_ms` value, which differs from run to run.
fn without_duration(reply: Vec<u8>) -> String {
    let s = text(reply);
    let Some(at) = s.find("duration_ms\r\n:") else { return s };
    let start = at + "duration_ms\r\n:".len();
    let end = start + s[start..].find("\r\n").unwrap_or(0);
    format!("{}N{}", &s[..start], &s[end..])
}

#[test]
fn a_busy_function_is_stopped_by_function_kill_and_shown_by_function_stats() {
    same_as_redis(|addr| {
        let mut other = prepare_busy(addr);
        let mut runner = Raw::connect(addr);
        runner.send(&encode(&[b"FCALL", b"spin", b"1", b"key", b"arg"]));
        wait_for_busy(&mut other, BUSY_FUNCTION);
        let mut t = vec![
            text(call(&mut other, &["GET", "x"])),
            text(call(&mut other, &["FUNCTION", "LIST"])),
            // SCRIPT KILL is for EVAL: it answers the function's BUSY text.
            text(call(&mut other, &["SCRIPT", "KILL"])),
            text(call(&mut other, &["SHUTDOWN"])),
            without_duration(call(&mut other, &["FUNCTION", "STATS"])),
        ];
        other.call(&["HELLO", "3"]);
        t.push(without_duration(call(&mut other, &["FUNCTION", "STATS"])));
        other.call(&["HELLO", "2"]);
        t.push(text(call(&mut other, &["FUNCTION", "KILL"])));
        t.push(text(runner.reply()));
        t.push(text(call(&mut other, &["PING"])));
        t.push(text(call(&mut other, &["FUNCTION", "KILL"])));
        t.push(text(call(&mut other, &["FUNCTION", "STATS"])));
        t
    });
}

#[test]
fn function_stats_while_busy_counts_the_libraries() {
    let s = start();
    let mut other = prepare_busy(s.addr());
    other.call(&["FUNCTION", "LOAD", &library("hello.lua")]);
    let mut runner = Raw::connect(s.addr());
    runner.send(&encode(&[b"FCALL", b"SPIN", b"0"]));
    wait_for_busy(&mut other, BUSY_FUNCTION);
    let stats = text(other.call(&["FUNCTION", "STATS"]));
    assert!(stats.contains("$4\r\nname\r\n$4\r\nspin\r\n"), "{stats}");
    assert!(
        stats.contains("$7\r\ncommand\r\n*3\r\n$5\r\nFCALL\r\n$4\r\nSPIN\r\n$1\r\n0\r\n"),
        "{stats}"
    );
    assert!(
        stats.ends_with("$15\r\nlibraries_count\r\n:2\r\n$15\r\nfunctions_count\r\n:3\r\n"),
        "{stats}"
    );
    assert_eq!(other.call(&["FUNCTION", "KILL"]), b"+OK\r\n");
    let killed = text(runner.reply());
    assert_eq!(
        killed,
        "-ERR Script killed by user with SCRIPT KILL... script: spin, on @user_function:2.\r\n"
    );
}

#[test]
fn function_kill_does_not_stop_an_eval() {
    same_as_redis(|addr| {
        let mut other = prepare_busy(addr);
        let mut runner = Raw::connect(addr);
        runner.send(b"EVAL \"local a = 1 while true do a = a + 1 end\" 0\r\n");
        wait_for_busy(&mut other, BUSY_EVAL);
        let t = vec![
            text(call(&mut other, &["FUNCTION", "KILL"])),
            text(call(&mut other, &["FUNCTION", "STATS"])),
            text(call(&mut other, &["SCRIPT", "KILL"])),
            text(runner.reply()).split(" script: ").next().unwrap_or_default().to_string(),
            text(call(&mut other, &["FUNCTION", "KILL"])),
        ];
        assert_eq!(t[0].as_bytes(), BUSY_EVAL);
        t
    });
}

#[test]
fn a_function_that_wrote_cannot_be_killed_but_shutdown_nosave_ends_it() {
    same_as_redis(|addr| {
        let mut other = prepare_busy(addr);
        let mut runner = Raw::connect(addr);
        runner.send(&encode(&[b"FCALL", b"spin_after_write", b"0"]));
        wait_for_busy(&mut other, BUSY_FUNCTION);
        let t = vec![
            text(call(&mut other, &["FUNCTION", "KILL"])),
            text(call(&mut other, &["SCRIPT", "KILL"])),
            text(call(&mut other, &["SHUTDOWN"])),
        ];
        assert_eq!(t[0].as_bytes(), UNKILLABLE);
        other.send(&encode(&[b"SHUTDOWN", b"NOSAVE"]));
        assert!(other.is_closed(), "SHUTDOWN NOSAVE closes the connection");
        assert!(runner.is_closed(), "the server stopped");
        t
    });
}

#[test]
fn flush_and_replace_while_other_clients_call_functions() {
    same_as_redis(|addr| {
        // Client 0 manages the libraries, client 1 calls them.
        let mut clients = [Raw::connect(addr), Raw::connect(addr)];
        let (hello, v2, broken) = (library("hello.lua"), library("hello-v2.lua"), library("hello-broken.lua"));
        let steps: [(usize, Vec<&str>); 17] = [
            (0, vec!["FUNCTION", "FLUSH"]),
            (0, vec!["FUNCTION", "LOAD", &hello]),
            (1, vec!["FCALL", "hello", "0"]),
            (0, vec!["FUNCTION", "LOAD", "REPLACE", &v2]),
            (1, vec!["FCALL", "hello", "0"]),
            (0, vec!["FUNCTION", "LOAD", "REPLACE", &broken]),
            (1, vec!["FCALL", "hello", "0"]),
            (1, vec!["MULTI"]),
            (1, vec!["FCALL", "hello", "0"]),
            (0, vec!["FUNCTION", "FLUSH", "ASYNC"]),
            (1, vec!["FCALL", "hello", "0"]),
            (1, vec!["EXEC"]),
            (0, vec!["FUNCTION", "LOAD", &hello]),
            (1, vec!["FCALL_RO", "hello", "0"]),
            (0, vec!["FUNCTION", "DELETE", "hello"]),
            (1, vec!["FCALL", "hello", "0"]),
            (0, vec!["FUNCTION", "STATS"]),
        ];
        steps.iter().map(|(who, args)| text(clients[*who].call(args))).collect()
    });
}

/// FUNCTION LIST (RESP2) as a set of libraries, each with its functions
/// as a set: `name -> (fields, sorted functions)`.
fn listed(addr: SocketAddr, args: &[&str]) -> BTreeMap<String, String> {
    let mut c = conn_to(addr);
    let value: redis::Value = redis::cmd("FUNCTION").arg(args).query(&mut c).expect("FUNCTION LIST");
    let redis::Value::Array(libraries) = value else {
        panic!("{value:?}")
    };
    libraries
        .into_iter()
        .map(|library| {
            let redis::Value::Array(fields) = library else {
                panic!("{library:?}")
            };
            let mut name = String::new();
            let mut rendered = Vec::new();
            for pair in fields.chunks(2) {
                let key = render(&pair[0]);
                let value = match (&pair[1], key.as_str()) {
                    (redis::Value::Array(functions), "functions") => {
                        let mut each: Vec<String> = functions.iter().map(render).collect();
                        each.sort();
                        each.join(" | ")
                    }
                    (v, "library_name") => {
                        name = render(v);
                        name.clone()
                    }
                    (v, _) => render(v),
                };
                rendered.push(format!("{key}={value}"));
            }
            (name, rendered.join("; "))
        })
        .collect()
}

fn render(v: &redis::Value) -> String {
    match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        redis::Value::Okay => "OK".into(),
        redis::Value::Nil => "(nil)".into(),
        redis::Value::Int(n) => n.to_string(),
        redis::Value::Array(items) => format!("[{}]", items.iter().map(render).collect::<Vec<_>>().join(", ")),
        other => format!("{other:?}"),
    }
}

fn conn_to(addr: SocketAddr) -> redis::Connection {
    redis::Client::open(format!("redis://{addr}")).unwrap().get_connection().unwrap()
}

#[test]
fn function_list_shows_every_library_and_function() {
    let scenario = |addr: SocketAddr| {
        let mut c = Raw::connect(addr);
        c.call(&["FUNCTION", "FLUSH"]);
        for lib in ["hello.lua", "calls.lua", "flags.lua", "keys-args.lua", "version.lua"] {
            let reply = c.call(&["FUNCTION", "LOAD", &library(lib)]);
            assert_eq!(reply.first(), Some(&b'$'), "{lib}: {}", String::from_utf8_lossy(&reply));
        }
        let all = listed(addr, &["LIST"]);
        let with_code = listed(addr, &["LIST", "WITHCODE"]);
        let pattern = listed(addr, &["LIST", "LIBRARYNAME", "*e*"]);
        c.call(&["FUNCTION", "FLUSH"]);
        (all, with_code, pattern)
    };
    let keylock = start();
    let ours = scenario(keylock.addr());
    assert_eq!(ours.0.len(), 5);
    assert!(
        ours.0["calls"].contains("name, get_key, description, (nil), flags, [no-writes]"),
        "{}",
        ours.0["calls"]
    );
    assert!(ours.1["hello"].contains("library_code=#!lua name=hello\n"), "{}", ours.1["hello"]);
    assert_eq!(ours.2.keys().collect::<Vec<_>>(), ["hello", "keysargs", "version"]);
    if let Some(redis) = real_redis() {
        assert_eq!(ours, scenario(redis.addr));
    }
}

/// MONITOR's line without its timestamp and client address.
fn monitor_line(reply: Vec<u8>) -> String {
    let s = text(reply);
    let db_and_origin = s.split_once('[').map_or("", |(_, rest)| rest);
    let (origin, args) = db_and_origin.split_once(']').unwrap_or_default();
    let origin = if origin.ends_with("lua") { "lua" } else { "client" };
    format!("{origin}{}", args.trim_end())
}

#[test]
fn monitor_shows_fcall_before_the_commands_it_runs() {
    same_as_redis(|addr| {
        let mut c = Raw::connect(addr);
        c.call(&["FUNCTION", "LOAD", "REPLACE", &library("calls.lua")]);
        let mut mon = Raw::connect(addr);
        assert_eq!(mon.call(&["MONITOR"]), b"+OK\r\n");
        c.call(&["FCALL", "set_key", "1", "mk", "mv"]);
        c.call(&["FCALL", "nosuch", "0"]);
        c.call(&["FCALL_RO", "get_key", "1", "mk"]);
        c.call(&["FUNCTION", "DELETE", "calls"]);
        (0..6).map(|_| monitor_line(mon.reply())).collect()
    });
}

/// The `INFO commandstats` and `errorstats` lines of the given commands,
/// without the timings.
/// Sorted: Redis lists commands in its command table's dictionary order.
fn stats_lines(c: &mut Raw, names: &[&str]) -> Vec<String> {
    let info = text(c.call(&["INFO", "commandstats"])) + &text(c.call(&["INFO", "errorstats"]));
    let mut lines: Vec<String> = info
        .lines()
        .filter(|l| names.iter().any(|n| l.starts_with(&format!("cmdstat_{n}:"))) || l.starts_with("errorstat_"))
        .map(|l| {
            l.split(',')
                .filter(|field| !field.starts_with("usec"))
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    lines.sort();
    lines
}

#[test]
fn fcall_books_calls_failures_and_errors_as_redis() {
    same_as_redis(|addr| {
        let mut c = Raw::connect(addr);
        c.call(&["FUNCTION", "LOAD", "REPLACE", &library("calls.lua")]);
        c.call(&["CONFIG", "RESETSTAT"]);
        for args in [
            &["FCALL", "set_key", "1", "sk", "v"][..],
            &["FCALL", "raise", "1", "sk"],
            &["FCALL", "pcall_err", "1", "sk"],
            &["FCALL", "lua_error", "0"],
            &["FCALL", "table_error", "0"],
            &["FCALL", "error_reply", "0"],
            &["FCALL", "nosuch", "0"],
            &["FCALL", "set_key", "x"],
            &["FCALL_RO", "set_key", "1", "sk", "v"],
            &["FCALL", "ro_write", "0"],
            &["FCALL", "eval_from_function", "0"],
            &["FUNCTION", "LOAD", &library("load-math.lua")],
            &["FUNCTION", "DELETE", "nosuch"],
        ] {
            c.call(args);
        }
        let lines = stats_lines(
            &mut c,
            &["fcall", "fcall_ro", "set", "incr", "eval", "function|load", "function|delete"],
        );
        c.call(&["FUNCTION", "FLUSH"]);
        lines
    });
}

#[test]
fn info_memory_counts_functions_and_libraries() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    let field = |c: &mut Raw, name: &str| -> u64 {
        let info = text(c.call(&["INFO", "memory"]));
        let line = info
            .lines()
            .find(|l| l.starts_with(&format!("{name}:")))
            .unwrap_or_else(|| panic!("{name}"));
        line.split(':').nth(1).unwrap().parse().unwrap()
    };
    assert_eq!(field(&mut c, "number_of_functions"), 0);
    let empty = field(&mut c, "used_memory_functions");
    c.call(&["FUNCTION", "LOAD", &library("calls.lua")]);
    c.call(&["FUNCTION", "LOAD", &library("hello.lua")]);
    assert_eq!(field(&mut c, "number_of_libraries"), 2);
    // 25 in calls.lua (`register_inside` only names register_function in
    // its body), 1 in hello.lua.
    assert_eq!(field(&mut c, "number_of_functions"), 26);
    assert!(field(&mut c, "used_memory_functions") > empty + library("calls.lua").len() as u64);
    assert!(field(&mut c, "used_memory_vm_functions") > 0);
    assert_eq!(
        field(&mut c, "used_memory_vm_total"),
        field(&mut c, "used_memory_vm_eval") + field(&mut c, "used_memory_vm_functions")
    );
    c.call(&["FUNCTION", "FLUSH"]);
    assert_eq!(field(&mut c, "number_of_functions"), 0);
    assert_eq!(field(&mut c, "used_memory_functions"), empty);
}

#[test]
fn script_flush_keeps_functions_and_function_flush_keeps_scripts() {
    same_as_redis(|addr| {
        let mut c = Raw::connect(addr);
        c.call(&["FUNCTION", "FLUSH"]);
        c.call(&["FUNCTION", "LOAD", &library("hello.lua")]);
        let sha = text(c.call(&["SCRIPT", "LOAD", "return 'script'"]));
        let sha = sha.lines().nth(1).unwrap_or_default().to_string();
        vec![
            text(c.call(&["SCRIPT", "FLUSH"])),
            text(c.call(&["FCALL", "hello", "0"])),
            text(c.call(&["SCRIPT", "LOAD", "return 'script'"])),
            text(c.call(&["FUNCTION", "FLUSH"])),
            text(c.call(&["EVALSHA", &sha, "0"])),
            text(c.call(&["FCALL", "hello", "0"])),
        ]
    });
}

#[test]
fn a_function_sees_the_callers_database_and_time_frozen() {
    same_as_redis(|addr| {
        let mut c = Raw::connect(addr);
        c.call(&["FUNCTION", "LOAD", "REPLACE", &library("calls.lua")]);
        c.call(&["SELECT", "3"]);
        let t = vec![
            text(c.call(&["FCALL", "set_key", "1", "db3key", "v"])),
            text(c.call(&["GET", "db3key"])),
            text(c.call(&["SELECT", "0"])),
            text(c.call(&["GET", "db3key"])),
            // A function's SELECT does not change its caller's database.
            text(c.call(&["FCALL", "select_db", "0"])),
            text(c.call(&["GET", "indb1"])),
            text(c.call(&["FUNCTION", "DELETE", "calls"])),
        ];
        c.call(&["FLUSHALL"]);
        t
    });
}

/// The bulk string's bytes in a raw RESP2 reply.
fn bulk(reply: &[u8]) -> Vec<u8> {
    let start = reply.iter().position(|&b| b == b'\n').map_or(0, |i| i + 1);
    reply[start..reply.len() - 2].to_vec()
}

#[test]
fn dump_payloads_restore_on_either_server() {
    let keylock = start();
    let mut ours = Raw::connect(keylock.addr());
    let dump_of = |c: &mut Raw, libs: &[&str]| -> Vec<u8> {
        c.call(&["FUNCTION", "FLUSH"]);
        for lib in libs {
            c.call(&["FUNCTION", "LOAD", &library(lib)]);
        }
        bulk(&c.call(&["FUNCTION", "DUMP"]))
    };
    let restore = |c: &mut Raw, payload: &[u8], policy: &[u8]| -> String {
        let mut args: Vec<&[u8]> = vec![b"FUNCTION", b"RESTORE", payload];
        if !policy.is_empty() {
            args.push(policy);
        }
        c.send_cmd(&args);
        text(c.reply())
    };
    let payload = dump_of(&mut ours, &["hello.lua", "calls.lua", "keys-args.lua"]);
    // Restored into a server that has none of them, then again by policy.
    ours.call(&["FUNCTION", "FLUSH"]);
    assert_eq!(restore(&mut ours, &payload, b""), "+OK\r\n");
    assert_eq!(ours.call(&["FCALL", "add", "0", "1"]), b":2\r\n");
    assert_eq!(restore(&mut ours, &payload, b"APPEND"), "-ERR Library calls already exists\r\n");
    assert_eq!(restore(&mut ours, &payload, b"REPLACE"), "+OK\r\n");
    assert_eq!(restore(&mut ours, &payload, b"FLUSH"), "+OK\r\n");
    // `other` takes the name of the payload's `hello` library's function.
    ours.call(&["FUNCTION", "DELETE", "hello"]);
    assert_eq!(ours.call(&["FUNCTION", "LOAD", &library("collision.lua")]), b"$5\r\nother\r\n");
    assert_eq!(restore(&mut ours, &payload, b"REPLACE"), "-ERR Function hello already exists\r\n");
    assert_eq!(ours.call(&["FCALL", "hello", "0"]), b":1\r\n");
    let mut corrupt = payload.clone();
    corrupt[5] ^= 0x20;
    assert_eq!(
        restore(&mut ours, &corrupt, b""),
        "-ERR DUMP payload version or checksum are wrong\r\n"
    );
    let Some(redis) = real_redis() else { return };
    let mut theirs = Raw::connect(redis.addr);
    for libs in [&["hello.lua"][..], &["calls.lua"], &["flags.lua"], &["keys-args.lua"]] {
        // One library: the same bytes, LZF compression included.
        assert_eq!(dump_of(&mut ours, libs), dump_of(&mut theirs, libs), "{libs:?}");
    }
    let their_payload = dump_of(&mut theirs, &["hello.lua", "calls.lua", "version.lua"]);
    ours.call(&["FUNCTION", "FLUSH"]);
    assert_eq!(restore(&mut ours, &their_payload, b""), "+OK\r\n");
    assert_eq!(ours.call(&["FCALL", "version_v2", "0"]), theirs.call(&["FCALL", "version_v2", "0"]));
    theirs.call(&["FUNCTION", "FLUSH"]);
    assert_eq!(restore(&mut theirs, &payload, b""), "+OK\r\n");
    assert_eq!(
        theirs.call(&["FCALL", "keys_args", "1", "k", "a"]),
        b"*4\r\n:1\r\n:1\r\n*1\r\n$1\r\nk\r\n*1\r\n$1\r\na\r\n"
    );
}

/// DEBUG RELOAD NOFLUSH over a loaded library: refused unless MERGE, as
/// Redis's load refuses a library already there.
fn reload_over_libraries(addr: SocketAddr) -> Vec<String> {
    let mut c = Raw::connect(addr);
    let code = "#!lua name=test\nredis.register_function('test', function() return 1 end)";
    vec![
        text(c.call(&["FUNCTION", "LOAD", code])),
        text(c.call(&["DEBUG", "RELOAD", "NOFLUSH"])),
        text(c.call(&["DEBUG", "RELOAD", "NOFLUSH", "MERGE"])),
        text(c.call(&["FCALL", "test", "0"])),
        text(c.call(&["DEBUG", "RELOAD"])),
        text(c.call(&["FUNCTION", "LIST"])),
    ]
}

#[test]
fn debug_reload_noflush_refuses_a_library_already_loaded_unless_merge() {
    let keylock = start_with(|c| c.directives.push(("enable-debug-command".into(), vec!["yes".into()])));
    let ours = reload_over_libraries(keylock.addr());
    assert_eq!(ours[1], "-ERR Error trying to load the RDB dump\r\n");
    assert_eq!(ours[2], "+OK\r\n");
    if let Some(redis) = real_redis_with(&["--enable-debug-command", "yes"]) {
        assert_eq!(reload_over_libraries(redis.addr), ours);
    }
}
