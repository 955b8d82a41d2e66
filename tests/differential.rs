//! Differential tests: every line of `tests/corpus/*.txt` is sent to keylock
//! and to a real redis-server, and the raw replies must be equal byte for
//! byte, in RESP2 and again after HELLO 3.
//!
//! The corpus format is that of the `redis-diff` tool: shell-like words, `#`
//! comments, and line markers `!` (compare only the reply's kind), `=N`
//! (compare the first N bytes) and `@ms` (sleep first). One extension for
//! scripts: a word `@lua:PATH` is replaced by the exact bytes of
//! `lua/PATH`, and `@sha:PATH` by their lowercase hex SHA1. Without
//! redis-server on PATH these tests skip with a message, unless
//! KEYLOCK_REQUIRE_REDIS=1 makes that a failure. A corpus line
//! `#! name value…` starts both servers with that directive.

mod common;
use common::*;

use std::time::Duration;

/// Python's `shlex.split` in POSIX mode, which the corpus format uses.
fn shlex_split(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '\\' => {
                in_word = true;
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            '\'' => {
                in_word = true;
                for n in chars.by_ref() {
                    if n == '\'' {
                        break;
                    }
                    cur.push(n);
                }
            }
            '"' => {
                in_word = true;
                while let Some(n) = chars.next() {
                    match n {
                        '"' => break,
                        '\\' => match chars.peek() {
                            Some(&e @ ('\\' | '"' | '$' | '`' | '\n')) => {
                                cur.push(e);
                                chars.next();
                            }
                            _ => cur.push('\\'),
                        },
                        n => cur.push(n),
                    }
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words
}

enum Compare {
    Exact,
    Kind,
    Prefix(usize),
}

struct Line {
    number: usize,
    text: String,
    sleep_ms: u64,
    compare: Compare,
    words: Vec<Vec<u8>>,
}

/// `@lua:PATH` → the file's bytes; `@sha:PATH` → their SHA1; else the word.
fn substitute(word: String) -> Vec<u8> {
    let lua_file = |path: &str| {
        let full = format!("{}/lua/{path}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
    };
    if let Some(path) = word.strip_prefix("@lua:") {
        lua_file(path)
    } else if let Some(path) = word.strip_prefix("@sha:") {
        sha1_smol::Sha1::from(lua_file(path)).digest().to_string().into_bytes()
    } else {
        word.into_bytes()
    }
}

fn parse_corpus(text: &str) -> Vec<Line> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let mut line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut sleep_ms = 0;
        if let Some(rest) = line.strip_prefix('@') {
            let (ms, rest) = rest.split_once(char::is_whitespace).expect("@ms needs a command");
            sleep_ms = ms.parse().expect("@ms is a number");
            line = rest.trim();
        }
        let mut compare = Compare::Exact;
        if let Some(rest) = line.strip_prefix('!') {
            compare = Compare::Kind;
            line = rest.trim();
        } else if let Some(rest) = line.strip_prefix('=') {
            let (n, rest) = rest.split_once(char::is_whitespace).expect("=N needs a command");
            compare = Compare::Prefix(n.parse().expect("=N is a number"));
            line = rest.trim();
        }
        out.push(Line {
            number: i + 1,
            text: line.to_string(),
            sleep_ms,
            compare,
            words: shlex_split(line).into_iter().map(substitute).collect(),
        });
    }
    out
}

/// A corpus's server directives: its lines `#! name value…`, given to
/// both servers at start (`enable-debug-command yes` for DEBUG's corpus).
fn server_directives(text: &str) -> Vec<(String, Vec<String>)> {
    text.lines()
        .filter_map(|l| l.strip_prefix("#!"))
        .filter_map(|l| {
            let mut words = l.split_whitespace().map(str::to_string);
            Some((words.next()?, words.collect()))
        })
        .collect()
}

fn run_corpus(file: &str, resp3: bool) {
    let path = format!("{}/tests/corpus/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let directives = server_directives(&text);
    let redis_args: Vec<String> = directives
        .iter()
        .flat_map(|(name, values)| std::iter::once(format!("--{name}")).chain(values.iter().cloned()))
        .collect();
    let redis_args: Vec<&str> = redis_args.iter().map(String::as_str).collect();
    let Some(redis) = real_redis_with(&redis_args) else { return };
    let keylock = start_with(|c| c.directives.extend(directives));
    let lines = parse_corpus(&text);
    let mut ours = Raw::connect(keylock.addr());
    let mut theirs = Raw::connect(redis.addr);
    for c in [&mut ours, &mut theirs] {
        if resp3 {
            c.call(&["HELLO", "3"]);
        }
        c.call(&["FLUSHALL"]);
    }
    let mut failures = Vec::new();
    for line in &lines {
        if line.sleep_ms > 0 {
            std::thread::sleep(Duration::from_millis(line.sleep_ms));
        }
        let words: Vec<&[u8]> = line.words.iter().map(|w| w.as_slice()).collect();
        ours.send_cmd(&words);
        theirs.send_cmd(&words);
        let want = theirs.reply();
        let got = ours.reply();
        let same = match line.compare {
            Compare::Exact => got == want,
            Compare::Kind => got.first() == want.first(),
            Compare::Prefix(n) => got[..n.min(got.len())] == want[..n.min(want.len())],
        };
        if !same {
            failures.push(format!(
                "{file}:{}: {}\n    keylock: {:?}\n    redis:   {:?}",
                line.number,
                line.text,
                String::from_utf8_lossy(&got[..got.len().min(300)]),
                String::from_utf8_lossy(&want[..want.len().min(300)])
            ));
        }
    }
    let proto = if resp3 { "RESP3" } else { "RESP2" };
    eprintln!("{file} ({proto}): {} lines, {} differ", lines.len(), failures.len());
    assert!(
        failures.is_empty(),
        "{} of {} lines differ from redis-server ({proto}):\n{}",
        failures.len(),
        lines.len(),
        failures.join("\n")
    );
}

macro_rules! corpus {
    ($($name:ident => $file:literal),* $(,)?) => {
        mod resp2 {
            $(#[test] fn $name() { super::run_corpus($file, false) })*
        }
        mod resp3 {
            $(#[test] fn $name() { super::run_corpus($file, true) })*
        }
    };
}

corpus! {
    connection => "connection.txt",
    server => "server.txt",
    memory => "memory.txt",
    slowlog => "slowlog.txt",
    latency => "latency.txt",
    lolwut => "lolwut.txt",
    cluster => "cluster.txt",
    replication => "replication.txt",
    migrate => "migrate.txt",
    modules => "modules.txt",
    debug => "debug.txt",
    keys => "keys.txt",
    dump => "dump.txt",
    strings => "strings.txt",
    bitmaps => "bitmaps.txt",
    hyperloglog => "hyperloglog.txt",
    lcs => "lcs.txt",
    expiry => "expiry.txt",
    hashes => "hashes.txt",
    lists => "lists.txt",
    sets => "sets.txt",
    zsets => "zsets.txt",
    geo => "geo.txt",
    sort => "sort.txt",
    streams => "streams.txt",
    pubsub => "pubsub.txt",
    tracking => "tracking.txt",
    transactions => "transactions.txt",
    scripting => "scripting.txt",
    scripting_redisson => "scripting_redisson.txt",
    functions => "functions.txt",
    acl => "acl.txt",
}

#[test]
fn shlex_split_matches_python() {
    assert_eq!(
        shlex_split(r#"set "a b" 'c d' e\ f "x\"y" "\x00""#),
        vec!["set", "a b", "c d", "e f", "x\"y", "\\x00"]
    );
}
