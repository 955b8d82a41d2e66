//! The effect stream (every write as it must be replayed, see
//! `keylock::engine::effects`) compared with the stream redis-server sends
//! its replicas, and the dirty counter (INFO `rdb_changes_since_last_save`)
//! with redis-server's, command by command.
//!
//! redis-server's stream is read as a replica reads it: a connection that
//! sent SYNC gets the snapshot, then every effect. keylock's comes from an
//! [`EffectsTap`] on an in-process server. Both servers get the same
//! commands over TCP; after each, a marker write on a second connection
//! closes the piece of stream that command made, and the pieces must be
//! the same, byte for byte but for absolute times (a deadline in
//! milliseconds, a stream ID's time), which differ between two servers
//! started apart.
//!
//! The corpus is `tests/corpus/effects.txt`: one command a line; `@sleep
//! MS` waits; `@script NAME ARGS…` runs a Redisson 4.7.0 script body
//! (`lua/redisson/4.7.0/NAME.lua`) with EVAL, the way Redisson sends it
//! (so keylock runs it natively); `@bg CMD` sends a command on a third
//! connection without waiting for its reply (a blocking pop), and
//! `@bgreply` reads it.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::Raw;
use keylock::engine::effects::EffectsTap;

const MARKER: &[u8] = b"*2\r\n$4\r\nINCR\r\n$14\r\neffects:marker\r\n";

/// Where a server's effect stream is read from.
trait Stream {
    /// Everything up to and including the next marker.
    fn until_marker(&mut self) -> Vec<u8>;
}

/// A replica link to redis-server: SYNC, the snapshot skipped.
struct ReplicaLink {
    socket: TcpStream,
    buf: Vec<u8>,
}

impl ReplicaLink {
    fn open(addr: SocketAddr) -> ReplicaLink {
        let mut socket = TcpStream::connect(addr).unwrap();
        socket.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        socket.write_all(b"SYNC\r\n").unwrap();
        let mut link = ReplicaLink { socket, buf: Vec::new() };
        // `\n` keep-alives while the snapshot is made, then `$len\r\n` and
        // the snapshot itself.
        loop {
            while link.buf.first() == Some(&b'\n') {
                link.buf.remove(0);
            }
            if let Some(end) = link.buf.windows(2).position(|w| w == b"\r\n") {
                assert_eq!(link.buf[0], b'$', "{:?}", String::from_utf8_lossy(&link.buf));
                let len: usize = std::str::from_utf8(&link.buf[1..end]).unwrap().parse().unwrap();
                while link.buf.len() < end + 2 + len {
                    link.fill();
                }
                link.buf.drain(..end + 2 + len);
                return link;
            }
            link.fill();
        }
    }

    fn fill(&mut self) {
        let mut chunk = [0u8; 65536];
        let n = self.socket.read(&mut chunk).expect("the replica link reads");
        assert!(n > 0, "redis-server closed the replica link");
        self.buf.extend_from_slice(&chunk[..n]);
    }
}

impl Stream for ReplicaLink {
    fn until_marker(&mut self) -> Vec<u8> {
        loop {
            if let Some(at) = find(&self.buf, MARKER) {
                return self.buf.drain(..at + MARKER.len()).collect();
            }
            self.fill();
        }
    }
}

/// keylock's stream, as its tap collected it.
struct Tapped(Arc<Mutex<Vec<u8>>>);

impl Stream for Tapped {
    fn until_marker(&mut self) -> Vec<u8> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            {
                let mut buf = self.0.lock().unwrap();
                if let Some(at) = find(&buf, MARKER) {
                    return buf.drain(..at + MARKER.len()).collect();
                }
            }
            assert!(Instant::now() < deadline, "keylock's effect stream never showed the marker");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// A stream piece as lines of words, absolute times replaced: a bulk of
/// 13 digits (a Unix time in milliseconds) is `<ms>`, a stream ID with
/// such a time `<ms>-SEQ`.
fn readable(stream: &[u8]) -> Vec<String> {
    let mut lines = Vec::new();
    let mut rest = stream;
    while !rest.is_empty() {
        let (argv, after) = parse_command(rest);
        lines.push(argv.iter().map(|a| shown(a)).collect::<Vec<_>>().join(" "));
        rest = after;
    }
    lines
}

fn shown(arg: &[u8]) -> String {
    let text = String::from_utf8_lossy(arg).to_string();
    let is_ms = |t: &str| t.len() == 13 && t.bytes().all(|b| b.is_ascii_digit());
    if is_ms(&text) {
        return "<ms>".into();
    }
    if let Some((ms, seq)) = text.split_once('-')
        && is_ms(ms)
        && seq.bytes().all(|b| b.is_ascii_digit())
    {
        return format!("<ms>-{seq}");
    }
    if text.is_empty() || text.contains(' ') {
        return format!("{text:?}");
    }
    text
}

fn parse_command(input: &[u8]) -> (Vec<Vec<u8>>, &[u8]) {
    let line_end = |s: &[u8]| s.windows(2).position(|w| w == b"\r\n").expect("a whole line");
    assert_eq!(input[0], b'*', "{:?}", String::from_utf8_lossy(input));
    let end = line_end(input);
    let n: usize = std::str::from_utf8(&input[1..end]).unwrap().parse().unwrap();
    let mut rest = &input[end + 2..];
    let mut argv = Vec::new();
    for _ in 0..n {
        assert_eq!(rest[0], b'$');
        let end = line_end(rest);
        let len: usize = std::str::from_utf8(&rest[1..end]).unwrap().parse().unwrap();
        argv.push(rest[end + 2..end + 2 + len].to_vec());
        rest = &rest[end + 4 + len..];
    }
    (argv, rest)
}

/// One server under test: its connections and its stream.
struct Side {
    main: Raw,
    control: Raw,
    background: Raw,
    stream: Box<dyn Stream>,
}

impl Side {
    fn dirty(&mut self) -> i64 {
        let info = String::from_utf8(self.control.call(&["INFO", "persistence"])).unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("rdb_changes_since_last_save:"))
            .expect("INFO persistence has rdb_changes_since_last_save")
            .trim()
            .parse()
            .unwrap()
    }

    /// Runs one corpus step; returns its piece of stream and the dirty
    /// counter's growth (the marker's own change taken out).
    fn step(&mut self, step: &Step) -> (Vec<String>, i64) {
        let before = self.dirty();
        match step {
            Step::Command(argv) => {
                let args: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
                self.main.send_cmd(&args);
                self.main.reply();
            }
            Step::Background(argv) => {
                let args: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
                self.background.send_cmd(&args);
                std::thread::sleep(Duration::from_millis(20));
                // Blocked, or served at once: either way it has run once
                // a command on another connection is answered.
                self.control.call(&["PING"]);
            }
            Step::BackgroundReply => {
                self.background.reply();
            }
            Step::Sleep(ms) => std::thread::sleep(Duration::from_millis(*ms)),
        }
        self.control.send(MARKER);
        self.control.reply();
        let dirty = self.dirty() - before - 1;
        (readable(&self.stream.until_marker()), dirty)
    }
}

enum Step {
    Command(Vec<Vec<u8>>),
    Background(Vec<Vec<u8>>),
    BackgroundReply,
    Sleep(u64),
}

fn steps(corpus: &str) -> Vec<(usize, String, Step)> {
    let mut steps = Vec::new();
    for (n, line) in corpus.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words = |text: &str| keylock::request::split_args(text.as_bytes()).expect("a corpus line splits");
        let step = if let Some(ms) = line.strip_prefix("@sleep ") {
            Step::Sleep(ms.trim().parse().unwrap())
        } else if line == "@bgreply" {
            Step::BackgroundReply
        } else if let Some(cmd) = line.strip_prefix("@bg ") {
            Step::Background(words(cmd))
        } else if let Some(call) = line.strip_prefix("@script ") {
            let mut argv = words(call);
            let name = String::from_utf8(argv.remove(0)).unwrap();
            let path = format!("{}/lua/redisson/4.7.0/{name}.lua", env!("CARGO_MANIFEST_DIR"));
            let body = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            let mut eval = vec![b"EVAL".to_vec(), body];
            eval.extend(argv);
            Step::Command(eval)
        } else {
            Step::Command(words(line))
        };
        steps.push((n + 1, line.to_string(), step));
    }
    steps
}

fn side(addr: SocketAddr, stream: Box<dyn Stream>) -> Side {
    let side = Side {
        main: Raw::connect(addr),
        control: Raw::connect(addr),
        background: Raw::connect(addr),
        stream,
    };
    side.background.writer.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    side
}

#[test]
fn effects_and_dirty_counts_match_redis_command_by_command() {
    let Some(redis) = common::real_redis_with(&[
        "--repl-diskless-sync",
        "no",
        "--repl-ping-replica-period",
        "3600",
        "--enable-debug-command",
        "yes",
    ]) else {
        return;
    };
    let tapped = Arc::new(Mutex::new(Vec::new()));
    let sink = tapped.clone();
    let mut config = keylock::Config::ephemeral();
    config.directives.push(("enable-debug-command".into(), vec!["yes".into()]));
    let server = keylock::Server::new(config)
        .with_effects(EffectsTap::replication(move |bytes| sink.lock().unwrap().extend_from_slice(bytes)))
        .start()
        .unwrap();
    // redis-server PINGs its replicas on its replication cron's first
    // round whatever the period: the replica link is made once that round
    // has passed (it runs a millisecond after the event loop starts).
    assert_eq!(common::Raw::connect(redis.addr).call(&["PING"]), b"+PONG\r\n");
    std::thread::sleep(Duration::from_millis(50));
    let mut theirs = side(redis.addr, Box::new(ReplicaLink::open(redis.addr)));
    let mut ours = side(server.addr(), Box::new(Tapped(tapped)));

    let corpus = std::fs::read_to_string(format!("{}/tests/corpus/effects.txt", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let mut differences = Vec::new();
    for (line, text, step) in steps(&corpus) {
        let expected = theirs.step(&step);
        let got = ours.step(&step);
        if std::env::var_os("EFFECTS_SHOW").is_some() {
            eprintln!(
                "line {line}: {text:.60}\n  redis:   +{} {:?}\n  keylock: +{} {:?}",
                expected.1, expected.0, got.1, got.0
            );
        }
        if got != expected {
            let shown = if text.len() > 80 { format!("{}…", &text[..80]) } else { text };
            let effects = |piece: &[String]| piece[..piece.len() - 1].join(" | ");
            differences.push(format!(
                "line {line}: {shown}\n  redis:   +{} {}\n  keylock: +{} {}",
                expected.1,
                effects(&expected.0),
                got.1,
                effects(&got.0)
            ));
        }
    }
    assert!(
        differences.is_empty(),
        "{} differences:\n{}",
        differences.len(),
        differences.join("\n")
    );
}

#[test]
fn spop_with_a_count_is_the_srem_of_each_member_it_popped_in_one_transaction() {
    let tapped = Arc::new(Mutex::new(Vec::new()));
    let sink = tapped.clone();
    let server = keylock::Server::ephemeral()
        .with_effects(EffectsTap::aof(move |bytes| sink.lock().unwrap().extend_from_slice(bytes)))
        .start()
        .unwrap();
    let mut c = common::conn(&server);
    let _: i64 = common::q(&mut c, &["SADD", "s", "a", "b", "c", "d", "e", "f"]);
    let mut popped: Vec<String> = common::q(&mut c, &["SPOP", "s", "3"]);
    let _: () = common::q(&mut c, &["SET", "marker", "1"]);
    let stream = Tapped(tapped);
    let marker = b"*3\r\n$3\r\nSET\r\n$6\r\nmarker\r\n$1\r\n1\r\n";
    let piece = {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let buf = stream.0.lock().unwrap().clone();
            if let Some(at) = find(&buf, marker) {
                break buf[..at].to_vec();
            }
            assert!(Instant::now() < deadline, "no marker in the stream");
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    let lines = readable(&piece);
    assert_eq!(lines[0], "SELECT 0");
    assert_eq!(lines[1], "SADD s a b c d e f");
    assert_eq!(lines[2], "MULTI");
    assert_eq!(lines[lines.len() - 1], "EXEC");
    let mut srem: Vec<String> = lines[3..lines.len() - 1]
        .iter()
        .map(|l| l.strip_prefix("SREM s ").unwrap_or_else(|| panic!("{l}")).to_string())
        .collect();
    srem.sort();
    popped.sort();
    assert_eq!(srem, popped);
}
