//! Replays the fuzz targets' seed corpus (`fuzz/seeds/<target>/`) and
//! inputs built from the differential corpora through the same harness as
//! the cargo-fuzz targets (`fuzz/harness.rs`), on the stable toolchain:
//! what once crashed a target stays a regression test here. See the
//! README's "Fuzzing" section for the targets and how long each ran.

#[path = "../fuzz/harness.rs"]
mod harness;

use std::path::Path;

/// Every file in `fuzz/seeds/<target>/`.
fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds").join(target);
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries.map(|e| std::fs::read(e.unwrap().path()).unwrap()).collect()
}

/// The command lines of the differential corpora, file by file.
fn corpus_files() -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files.into_iter().map(|p| std::fs::read(p).unwrap()).collect()
}

#[test]
fn the_parser_seeds_parse_alike_whole_and_split() {
    let mut inputs = seeds("parser");
    for file in corpus_files() {
        // Each corpus line as a RESP request and as an inline command.
        for line in file.split(|&b| b == b'\n').filter(|l| !l.is_empty() && l[0] != b'#') {
            if let Some(words) = keylock::request::split_args(line) {
                let mut resp = format!("*{}\r\n", words.len()).into_bytes();
                for w in &words {
                    resp.extend_from_slice(format!("${}\r\n", w.len()).as_bytes());
                    resp.extend_from_slice(w);
                    resp.extend_from_slice(b"\r\n");
                }
                inputs.push(resp);
            }
            inputs.push([line, b"\r\n"].concat());
        }
    }
    assert!(inputs.len() > 1000);
    for input in &inputs {
        harness::parse(input);
    }
}

#[test]
fn the_dispatch_seeds_run_without_a_panic() {
    let mut inputs = seeds("dispatch");
    inputs.extend(corpus_files());
    for input in &inputs {
        // The corpora run in chunks of 64 lines, as the target takes them.
        for chunk in input.split(|&b| b == b'\n').collect::<Vec<_>>().chunks(64) {
            harness::dispatch(&chunk.join(&b'\n'));
        }
    }
}

#[test]
fn the_restore_seeds_decode_or_are_refused() {
    let inputs = seeds("restore");
    // The seeds are DUMPs of every type: each one restores.
    assert!(inputs.len() >= 12);
    for input in &inputs {
        let options = keylock::rdb::DecodeOptions::default();
        assert!(keylock::rdb::restore(input, &options, true).is_ok());
        harness::restore(input);
    }
}

#[test]
fn the_script_seeds_run_without_a_panic() {
    // Every Redisson script body keylock knows, plus conversion, cjson,
    // cmsgpack, struct, bit and sandbox scripts.
    let inputs = seeds("script");
    assert!(inputs.len() >= 60);
    for input in &inputs {
        harness::script(input);
    }
}

#[test]
fn a_script_that_never_ends_is_stopped() {
    let started = std::time::Instant::now();
    harness::script(b"\x00while true do end");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn the_rdb_seeds_load_and_write_back() {
    // Files saved by redis-server 7.0.15 and by keylock (every type, both
    // encodings, two databases, a library): each one loads.
    let inputs = seeds("rdb");
    assert!(inputs.len() >= 3);
    for input in &inputs {
        let loaded = keylock::rdb::file::read(input, 16, &keylock::rdb::DecodeOptions::default(), 0).expect("loads");
        assert!(loaded.dbs.iter().map(Vec::len).sum::<usize>() > 10);
        harness::rdb(input);
    }
}

#[test]
fn the_aof_seeds_parse_and_replay() {
    let inputs = seeds("aof");
    assert!(inputs.len() >= 3);
    for input in &inputs {
        let path = Path::new("seed.incr.aof");
        assert!(keylock::engine::aof::commands(path, input, false, true).is_ok());
        harness::aof(input);
    }
}

/// Found by the `aof` target: a command claiming 31,700,000,030,000
/// arguments made the loader allocate for all of them and abort.
#[test]
fn an_aof_command_claiming_more_arguments_than_the_file_holds_is_not_believed() {
    let file = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*31700000030000\r\n$3\r\nSET\r\n$1\r\nk\r\n";
    let parsed = keylock::engine::aof::commands(Path::new("found.incr.aof"), file, false, true);
    assert!(parsed.is_err(), "a truncated command is an error when truncation is not allowed");
    harness::aof(file);
}
