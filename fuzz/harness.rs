//! What each fuzz target does with its input, shared by the cargo-fuzz
//! targets (`fuzz/fuzz_targets/`) and by `tests/fuzz_corpus.rs`, which
//! replays the seed corpus on the stable toolchain in CI.
//!
//! - [`parse`]: the request parser, given the input whole and split in two
//!   reads at a point the input picks, must return the same commands and
//!   the same error either way; unauthenticated limits too.
//! - [`dispatch`]: the input's lines, as redis-cli would split them, run
//!   as commands through an in-process engine, several per input so that
//!   state builds up (commands that sleep, block the engine on a script,
//!   stop it or reach the network are left out).
//! - [`restore`]: the input as a DUMP payload: RESTORE's decoder must
//!   refuse it or give a value that DUMPs and restores again.

// Each target uses one of these functions.
#![allow(dead_code)]

use bytes::{Bytes, BytesMut};
use keylock::server::parser::{Limits, RequestParser};

const AUTHENTICATED: Limits = Limits {
    proto_max_bulk_len: 512 * 1024 * 1024,
    authenticated: true,
};

const UNAUTHENTICATED: Limits = Limits {
    proto_max_bulk_len: 512 * 1024 * 1024,
    authenticated: false,
};

/// The commands parsed from `reads` fed one after the other, and the
/// protocol error that ended parsing, if any.
fn parse_reads(reads: &[&[u8]], limits: Limits) -> (Vec<Vec<Bytes>>, Option<Vec<u8>>) {
    let mut parser = RequestParser::default();
    let mut buf = BytesMut::new();
    let mut commands = Vec::new();
    for read in reads {
        buf.extend_from_slice(read);
        loop {
            match parser.next(&mut buf, limits) {
                Ok(Some(argv)) => commands.push(argv),
                Ok(None) => break,
                Err(e) => return (commands, Some(e.reply_text())),
            }
        }
    }
    (commands, None)
}

pub fn parse(data: &[u8]) {
    for limits in [AUTHENTICATED, UNAUTHENTICATED] {
        let whole = parse_reads(&[data], limits);
        let at = data.first().map_or(0, |&b| b as usize % (data.len() + 1));
        let split = parse_reads(&[&data[..at], &data[at..]], limits);
        assert_eq!(whole, split, "split at {at}");
    }
}

/// Commands the dispatch target does not run: they sleep, run scripts
/// (which may loop with no one to stop them here), stop the server, or
/// reach the network or the disk.
const LEFT_OUT: &[&str] = &[
    "debug",
    "eval",
    "evalsha",
    "eval_ro",
    "evalsha_ro",
    "fcall",
    "fcall_ro",
    "function",
    "script",
    "shutdown",
    "keylock",
    "save",
    "bgsave",
    "bgrewriteaof",
    "monitor",
    "sync",
    "psync",
    "replicaof",
    "slaveof",
    "migrate",
    "failover",
    "config",
    "acl",
    "module",
    "wait",
    "waitaof",
    "quit",
];

pub fn dispatch(data: &[u8]) {
    let mut config = keylock::Config::ephemeral();
    config.directives.push(("enable-debug-command".into(), vec!["no".into()]));
    let mut engine = keylock::engine::Engine::new(keylock::engine::State::new(config, 0));
    let addr = "127.0.0.1:1".parse().expect("address");
    engine.connect(1, addr, addr, keylock::engine::Outbox::new());
    let mut out = BytesMut::new();
    for line in data.split(|&b| b == b'\n').take(64) {
        let Some(words) = keylock::request::split_args(line) else {
            continue;
        };
        let Some(name) = words.first() else { continue };
        let name = String::from_utf8_lossy(name).to_ascii_lowercase();
        if LEFT_OUT.contains(&name.as_str()) {
            continue;
        }
        let argv: Vec<Bytes> = words.into_iter().map(Bytes::from).collect();
        out.clear();
        engine.run_batch(1, vec![argv], &mut out);
    }
}

pub fn restore(data: &[u8]) {
    let options = keylock::rdb::DecodeOptions::default();
    let Ok(value) = keylock::rdb::restore(data, &options, false) else {
        return;
    };
    let again = keylock::rdb::dump(&value, &keylock::rdb::EncodeOptions::default());
    assert!(
        keylock::rdb::restore(&again, &options, true).is_ok(),
        "a value keylock decoded does not restore from its own DUMP"
    );
}
