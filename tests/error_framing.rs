//! Error replies that quote client bytes never break RESP framing.
//!
//! CR and LF in command names, subcommands, option names, arguments, a
//! script's error texts and the byte a protocol error names reach the
//! client as spaces, byte for byte as redis-server 7.0.15 sends them, and
//! the reply after the error is still the reply to the next command: each
//! case is followed by a PING on the same connection.
//!
//! Every case runs against keylock and a real redis-server (skipped with a
//! message when redis-server is missing, as in `differential.rs`). The one
//! deliberate difference, shebang errors, is checked against the bytes
//! keylock sends.

mod common;
use common::*;

use std::io::{Read, Write};
use std::time::Duration;

/// Line breaks a client can put in an argument: a CRLF followed by text that
/// would read as a reply of its own, a lone CR, a lone LF, breaks at either
/// end (where Redis's formatted errors trim them), a forged error and
/// integer, and a NUL (where Redis's texts stop).
const PAYLOADS: &[&[u8]] = &[
    b"NOSUCH\r\n+PWNED",
    b"a\rb",
    b"a\nb",
    b"a\r\n",
    b"\r\na",
    b"\n",
    b"\r",
    b"x\r\n-ERR forged\r\n:1",
    b"a\0\r\nb",
];

const PONG: &[u8] = b"+PONG\r\n";

/// A keylock and a redis-server, with one connection to each.
struct Pair {
    _keylock: ServerHandle,
    _redis: RealRedis,
    ours: Raw,
    theirs: Raw,
    failures: Vec<String>,
}

impl Pair {
    /// None (after a message) when redis-server is not installed.
    fn start(resp3: bool) -> Option<Pair> {
        let redis = real_redis()?;
        let keylock = start();
        let mut ours = Raw::connect(keylock.addr());
        let mut theirs = Raw::connect(redis.addr);
        if resp3 {
            // The replies differ (client ids); only the protocol matters here.
            ours.call(&["HELLO", "3"]);
            theirs.call(&["HELLO", "3"]);
        }
        Some(Pair {
            _keylock: keylock,
            _redis: redis,
            ours,
            theirs,
            failures: Vec::new(),
        })
    }

    /// Sends `request` (raw bytes, any number of commands) then PING, and
    /// checks that both servers send the same bytes for each of the
    /// `replies` replies to `request`, and that the next reply is `next`.
    fn check(&mut self, label: &str, request: &[u8], replies: usize, next: &[u8]) {
        let ping = encode(&[b"PING"]);
        for c in [&mut self.ours, &mut self.theirs] {
            c.send(request);
            c.send(&ping);
        }
        for i in 0..replies {
            let got = self.ours.reply();
            let want = self.theirs.reply();
            if got != want {
                self.failures.push(format!(
                    "{label}: reply {i}\n    keylock: {:?}\n    redis:   {:?}",
                    String::from_utf8_lossy(&got),
                    String::from_utf8_lossy(&want)
                ));
            }
        }
        let got = self.ours.reply();
        let want = self.theirs.reply();
        if got != next || want != next {
            self.failures.push(format!(
                "{label}: out of step, the reply to the next command\n    keylock: {:?}\n    redis:   {:?}\n    wanted:  {:?}",
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want),
                String::from_utf8_lossy(next)
            ));
        }
    }

    /// [`Pair::check`] for one command given as arguments, answered once.
    fn check_cmd(&mut self, label: &str, args: &[&[u8]]) {
        self.check(label, &encode(args), 1, PONG);
    }

    fn assert_no_failures(&self) {
        assert!(
            self.failures.is_empty(),
            "{} difference(s) from redis-server:\n{}",
            self.failures.len(),
            self.failures.join("\n")
        );
    }
}

/// Runs `cases` on a RESP2 and on a RESP3 connection.
fn in_both_protocols(cases: impl Fn(&mut Pair)) {
    for resp3 in [false, true] {
        let Some(mut pair) = Pair::start(resp3) else { return };
        cases(&mut pair);
        pair.assert_no_failures();
    }
}

fn label(what: &str, payload: &[u8]) -> String {
    format!("{what} with {:?}", String::from_utf8_lossy(payload))
}

/// Raw bytes in, everything the server sends until it closes or goes quiet.
fn exchange(addr: std::net::SocketAddr, input: &[u8]) -> (Vec<u8>, bool) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(input).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return (out, true),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => return (out, false),
        }
    }
}

#[test]
fn unknown_command_names_and_their_arguments_keep_the_stream_in_step() {
    in_both_protocols(|pair| {
        for &p in PAYLOADS {
            pair.check_cmd(&label("name", p), &[p]);
            pair.check_cmd(&label("name and arguments", p), &[p, p, p]);
            pair.check_cmd(&label("argument", p), &[b"NOSUCH", b"a", p]);
            // The argument list is cut at 128 bytes, possibly inside the payload.
            let long = [&[b'x'; 120][..], p].concat();
            pair.check_cmd(&label("argument cut at 128 bytes", p), &[b"NOSUCH", &long, p]);
        }
    });
}

#[test]
fn unknown_subcommands_of_every_container_keep_the_stream_in_step() {
    in_both_protocols(|pair| {
        for container in ["CLIENT", "OBJECT", "SCRIPT", "CONFIG", "COMMAND", "FUNCTION", "PUBSUB"] {
            for &p in PAYLOADS {
                pair.check_cmd(&label(container, p), &[container.as_bytes(), p]);
                pair.check_cmd(&label(container, p), &[container.as_bytes(), p, b"arg"]);
            }
        }
    });
}

#[test]
fn config_option_names_and_values_keep_the_stream_in_step() {
    in_both_protocols(|pair| {
        for &p in PAYLOADS {
            pair.check_cmd(&label("CONFIG SET name", p), &[b"CONFIG", b"SET", p, b"1"]);
            pair.check_cmd(
                &label("CONFIG SET second name", p),
                &[b"CONFIG", b"SET", b"maxmemory", b"0", p, b"1"],
            );
            pair.check_cmd(&label("CONFIG SET enum value", p), &[b"CONFIG", b"SET", b"maxmemory-policy", p]);
            pair.check_cmd(&label("CONFIG SET save value", p), &[b"CONFIG", b"SET", b"save", p]);
            pair.check_cmd(&label("CONFIG GET", p), &[b"CONFIG", b"GET", p]);
        }
    });
}

#[test]
fn option_errors_quoting_arguments_keep_the_stream_in_step() {
    in_both_protocols(|pair| {
        for &p in PAYLOADS {
            pair.check_cmd(&label("HELLO option", p), &[b"HELLO", b"3", p]);
            pair.check_cmd(&label("HELLO version", p), &[b"HELLO", p]);
            pair.check_cmd(&label("CLIENT SETNAME", p), &[b"CLIENT", b"SETNAME", p]);
            pair.check_cmd(&label("CLIENT LIST TYPE", p), &[b"CLIENT", b"LIST", b"TYPE", p]);
            pair.check_cmd(&label("CLIENT KILL TYPE", p), &[b"CLIENT", b"KILL", b"TYPE", p]);
            pair.check_cmd(&label("CLIENT KILL filter", p), &[b"CLIENT", b"KILL", p, b"1"]);
            for cmd in ["EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT"] {
                pair.check_cmd(&label(cmd, p), &[cmd.as_bytes(), b"k", b"10", p]);
            }
            pair.check_cmd(&label("FUNCTION LIST", p), &[b"FUNCTION", b"LIST", p]);
            pair.check_cmd(&label("AUTH", p), &[b"AUTH", p, p]);
            pair.check_cmd(&label("SELECT", p), &[b"SELECT", p]);
            pair.check_cmd(&label("EVALSHA", p), &[b"EVALSHA", p, b"0"]);
        }
    });
}

#[test]
fn errors_in_transactions_keep_the_stream_in_step() {
    in_both_protocols(|pair| {
        for &p in PAYLOADS {
            // Refused while queueing, then EXECABORT.
            let request = [encode(&[b"MULTI"]), encode(&[p, b"x"]), encode(&[b"EXEC"])].concat();
            pair.check(&label("unknown command in MULTI", p), &request, 3, PONG);
            // Queued, then failing inside EXEC's array.
            let request = [encode(&[b"MULTI"]), encode(&[b"EXPIRE", b"k", b"1", p]), encode(&[b"EXEC"])].concat();
            pair.check(&label("failing command in EXEC", p), &request, 3, PONG);
        }
    });
}

#[test]
fn unknown_commands_in_subscribed_mode_keep_the_stream_in_step() {
    let Some(mut pair) = Pair::start(false) else { return };
    pair.check("SUBSCRIBE", &encode(&[b"SUBSCRIBE", b"ch"]), 1, b"*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    for &p in PAYLOADS {
        pair.check(&label("subscribed", p), &encode(&[p]), 1, b"*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    }
    pair.assert_no_failures();
}

#[test]
fn inline_commands_with_escaped_line_breaks_keep_the_stream_in_step() {
    in_both_protocols(|pair| {
        for request in [
            &b"NOSUCH\\r\\n+PWNED\r\n"[..],
            b"\"NOSUCH\\r\\n+PWNED\" a\r\n",
            b"NOSUCH \"a\\r\\n+PWNED\"\r\n",
            b"CLIENT \"x\\ny\"\r\n",
            b"EXPIRE k 10 \"x\\r\\n\"\r\n",
            b"CONFIG SET \"a\\rb\" 1\r\n",
        ] {
            pair.check(&label("inline", request), request, 1, PONG);
        }
    });
}

#[test]
fn script_error_and_status_texts_keep_the_stream_in_step() {
    let scripts: &[&[u8]] = &[
        b"return {err=ARGV[1]}",
        b"return {err='ERR ' .. ARGV[1]}",
        b"return {ok=ARGV[1]}",
        b"return redis.error_reply(ARGV[1])",
        b"return redis.error_reply('MY ' .. ARGV[1])",
        b"return redis.status_reply(ARGV[1])",
        b"return {big_number=ARGV[1]}",
        b"redis.setresp(3); return {big_number=ARGV[1]}",
        b"error(ARGV[1])",
        b"error({err=ARGV[1]})",
        b"return redis.call(ARGV[1])",
        b"return redis.call('expire', 'k', 10, ARGV[1])",
        b"return redis.pcall('expire', 'k', 10, ARGV[1])",
        b"local e = redis.pcall('expire', 'k', 10, ARGV[1]); return e.err",
        b"return redis.pcall('config', 'set', ARGV[1], 1)",
        b"return redis.pcall('hello', 3, ARGV[1])",
        b"return redis.pcall('client', 'list', 'type', ARGV[1])",
    ];
    in_both_protocols(|pair| {
        for &p in PAYLOADS {
            for &script in scripts {
                let what = format!("EVAL {:?}", String::from_utf8_lossy(script));
                pair.check_cmd(&label(&what, p), &[b"EVAL", script, b"0", p]);
            }
            // The payload in the script's source: compile and runtime errors.
            let body = [&b"return "[..], p].concat();
            pair.check_cmd(&label("EVAL return <payload>", p), &[b"EVAL", &body, b"0"]);
        }
    });
}

#[test]
fn unknown_commands_while_a_script_is_busy_keep_the_stream_in_step() {
    let Some(mut pair) = Pair::start(false) else { return };
    let busy = b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";
    let mut runners = Vec::new();
    for c in [&mut pair.ours, &mut pair.theirs] {
        assert_eq!(c.call(&["CONFIG", "SET", "busy-reply-threshold", "100"]), b"+OK\r\n");
        let addr = c.writer.peer_addr().unwrap();
        let mut runner = Raw::connect(addr);
        runner.send_cmd(&[b"EVAL", b"while true do end", b"0"]);
        runners.push(runner);
        wait_until(10, "the script never made the server busy", || c.call(&["GET", "x"]) == busy);
    }
    for &p in PAYLOADS {
        pair.check(&label("busy: name", p), &encode(&[p, b"a"]), 1, busy);
        pair.check(&label("busy: subcommand", p), &encode(&[b"CLIENT", p]), 1, busy);
    }
    for (c, runner) in [&mut pair.ours, &mut pair.theirs].into_iter().zip(&mut runners) {
        assert_eq!(c.call(&["SCRIPT", "KILL"]), b"+OK\r\n");
        let killed = runner.reply();
        assert!(
            killed.starts_with(b"-ERR Script killed by user"),
            "{}",
            String::from_utf8_lossy(&killed)
        );
    }
    pair.assert_no_failures();
}

#[test]
fn protocol_errors_name_a_line_break_as_a_space_then_close() {
    let Some(redis) = real_redis() else { return };
    let keylock = start();
    // The byte where a bulk header's `$` belongs: CR, LF (Redis's `%c`,
    // then its line-break rule), a byte above 0x7f (sent raw), and `+`.
    for byte in [b'\r', b'\n', 0xff, b'+'] {
        let input = [&b"*1\r\n$4\r\nPING\r\n*1\r\n"[..], &[byte], b"foo\r\n"].concat();
        let ours = exchange(keylock.addr(), &input);
        let theirs = exchange(redis.addr, &input);
        assert_eq!(
            ours,
            theirs,
            "byte {byte:#04x}: keylock {:?}, redis {:?}",
            String::from_utf8_lossy(&ours.0),
            String::from_utf8_lossy(&theirs.0)
        );
        let (out, closed) = ours;
        assert!(closed, "byte {byte:#04x}: the connection stays open");
        let error = out.strip_prefix(PONG).expect("PING answered first");
        assert_eq!(
            error.iter().filter(|&&c| c == b'\n').count(),
            1,
            "{:?}",
            String::from_utf8_lossy(error)
        );
        assert!(error.starts_with(b"-ERR Protocol error: expected '$', got '") && error.ends_with(b"'\r\n"));
    }
}

/// Redis 7.0.15 sends these texts raw (`addReplyErrorSds`), so its reply
/// ends early and the rest reads as another reply; keylock writes spaces.
#[test]
fn shebang_words_with_line_breaks_are_sent_as_spaces() {
    let keylock = start();
    let mut c = Raw::connect(keylock.addr());
    let cases: [(&[u8], &[u8]); 3] = [
        (
            b"#!\"x\\r\\n+PWNED\"\nreturn 1",
            b"-ERR Unexpected engine in script shebang: #!x  +PWNED\r\n",
        ),
        (
            b"#!lua \"x\\r\\n+PWNED\"\nreturn 1",
            b"-ERR Unknown lua shebang option: x  +PWNED\r\n",
        ),
        (
            b"#!lua flags=\"x\\n\\r\"\nreturn 1",
            b"-ERR Unexpected flag in script shebang: x  \r\n",
        ),
    ];
    for (body, want) in cases {
        c.send_cmd(&[b"EVAL", body, b"0"]);
        c.send_cmd(&[b"PING"]);
        assert_eq!(c.reply(), want, "{:?}", String::from_utf8_lossy(body));
        assert_eq!(c.reply(), PONG);
    }
    if let Some(redis) = real_redis() {
        let input = [encode(&[b"EVAL", cases[1].0, b"0"]), encode(&[b"PING"])].concat();
        let (out, _) = exchange(redis.addr, &input);
        assert_eq!(
            out, b"-ERR Unknown lua shebang option: x\r\n+PWNED\r\n+PONG\r\n",
            "redis-server changed"
        );
    }
}

/// KEYLOCK is keylock's own container: its unknown subcommands follow the
/// rule of every other container.
#[test]
fn unknown_keylock_subcommands_keep_the_stream_in_step() {
    let keylock = start();
    let mut c = Raw::connect(keylock.addr());
    c.send_cmd(&[b"KEYLOCK", b"NOSUCH\r\n+PWNED"]);
    c.send_cmd(&[b"PING"]);
    assert_eq!(c.reply(), b"-ERR unknown subcommand 'NOSUCH  +PWNED'. Try KEYLOCK HELP.\r\n");
    assert_eq!(c.reply(), PONG);
}
