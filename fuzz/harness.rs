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
//! - [`script`]: the input as a key count (its first byte, modulo 4), a
//!   Lua script and its arguments (split at 0xff bytes), run by EVAL and again by EVALSHA in an in-process engine:
//!   Redis's value conversions both ways, `redis.call` with whatever the
//!   script passes, cjson, cmsgpack, struct and bit on whatever the
//!   arguments hold, and the sandbox. A script still running after 200 ms
//!   is ended the way a stopping server ends it.
//! - [`rdb`]: the input as an RDB file: the loader must refuse it or give
//!   a dataset that keylock writes and loads back.
//! - [`aof`]: the input as an append-only file: its commands, if it
//!   parses, replayed as a load replays them (with the commands
//!   [`dispatch`] leaves out left out).

// Each target uses one of these functions.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

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

/// An in-process engine with one connected client (id 1), whose running
/// script ends when `halt` is set.
fn engine(halt: Arc<AtomicBool>) -> keylock::engine::Engine {
    let mut config = keylock::Config::ephemeral();
    config.directives.push(("enable-debug-command".into(), vec!["no".into()]));
    let mut engine = keylock::engine::Engine::new(keylock::engine::State::with_halt(config, 0, halt));
    let addr = "127.0.0.1:1".parse().expect("address");
    engine.connect(1, addr, addr, keylock::engine::Outbox::new());
    engine
}

pub fn dispatch(data: &[u8]) {
    let mut engine = engine(Arc::default());
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

/// The scripts now running (tests run them on several threads at once)
/// and when each must end: one thread for the whole process sets a
/// script's halt flag once its deadline passes.
static RUNNING: Mutex<Vec<(Arc<AtomicBool>, Instant)>> = Mutex::new(Vec::new());

fn watch(halt: &Arc<AtomicBool>, limit: Duration) {
    static WATCHER: OnceLock<()> = OnceLock::new();
    WATCHER.get_or_init(|| {
        std::thread::spawn(|| {
            loop {
                std::thread::sleep(Duration::from_millis(10));
                for (halt, deadline) in RUNNING.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                    if Instant::now() > *deadline {
                        halt.store(true, Ordering::Relaxed);
                    }
                }
            }
        });
    });
    RUNNING
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((halt.clone(), Instant::now() + limit));
}

pub fn script(data: &[u8]) {
    let Some((&keys, rest)) = data.split_first() else { return };
    let mut parts = rest.split(|&b| b == 0xff);
    let body = parts.next().unwrap_or_default();
    let args: Vec<&[u8]> = parts.take(16).collect();
    let keys = usize::from(keys % 4).min(args.len());
    let halt = Arc::new(AtomicBool::new(false));
    let mut engine = engine(halt.clone());
    watch(&halt, Duration::from_millis(200));
    let sha = {
        use std::fmt::Write;
        let digest = sha1_smol::Sha1::from(body).digest().bytes();
        digest.iter().fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
    };
    let mut out = BytesMut::new();
    for (command, script) in [("EVAL", Bytes::copy_from_slice(body)), ("EVALSHA", Bytes::from(sha))] {
        if halt.load(Ordering::Relaxed) {
            break;
        }
        let mut argv = vec![Bytes::from(command), script, Bytes::from(keys.to_string())];
        argv.extend(args.iter().map(|a| Bytes::copy_from_slice(a)));
        out.clear();
        engine.run_batch(1, vec![argv], &mut out);
    }
    RUNNING
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|(running, _)| !Arc::ptr_eq(running, &halt));
}

pub fn rdb(data: &[u8]) {
    use keylock::rdb::file;
    let options = keylock::rdb::DecodeOptions::default();
    let Ok(loaded) = file::read(data, 16, &options, 0) else {
        return;
    };
    let libraries: Vec<&[u8]> = loaded.libraries.iter().map(|l| l.as_ref()).collect();
    let dbs = loaded.dbs.iter().enumerate().map(|(index, keys)| file::DbSource {
        index,
        keys: keys.len(),
        expires: keys.iter().filter(|(_, _, at)| at.is_some()).count(),
        entries: keys.iter().map(|(k, v, at)| (k.as_ref(), v, *at)),
    });
    let aux = file::Aux {
        ctime: 0,
        used_mem: 0,
        aof_base: false,
        repl: None,
    };
    let mut again = Vec::new();
    file::write(&mut again, &aux, &libraries, dbs, &keylock::rdb::EncodeOptions::default(), true).expect("written");
    let reloaded = file::read(&again, 16, &options, 0).expect("keylock loads the file it wrote");
    assert_eq!(
        reloaded.dbs.iter().map(Vec::len).collect::<Vec<_>>(),
        loaded.dbs.iter().map(Vec::len).collect::<Vec<_>>(),
        "the keys of each database survive a write and a load"
    );
}

pub fn aof(data: &[u8]) {
    let path = std::path::Path::new("fuzz.incr.aof");
    let Ok(commands) = keylock::engine::aof::commands(path, data, false, true) else {
        return;
    };
    let kept: Vec<Vec<Bytes>> = commands
        .into_iter()
        .take(256)
        .filter(|argv| {
            let name = String::from_utf8_lossy(&argv[0]).to_ascii_lowercase();
            !LEFT_OUT.contains(&name.as_str())
        })
        .collect();
    let mut engine = engine(Arc::default());
    let keylock::engine::Engine { state, scripts } = &mut engine;
    let _ = keylock::engine::aof::replay(state, scripts, kept, "AOF-loading-client");
}
