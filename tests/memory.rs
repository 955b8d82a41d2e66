//! MEMORY USAGE and MEMORY PURGE against the running server (the corpus
//! `tests/corpus/memory.txt` compares the texts and errors with Redis).

mod common;
use common::*;

fn int(reply: &[u8]) -> i64 {
    let text = std::str::from_utf8(reply).unwrap();
    text.trim()
        .strip_prefix(':')
        .unwrap_or_else(|| panic!("not an integer: {text}"))
        .parse()
        .unwrap()
}

#[test]
fn usage_grows_with_the_value_and_counts_the_key() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    c.call(&["SET", "small", "x"]);
    c.call(&["SET", "large", &"x".repeat(10_000)]);
    let small = int(&c.call(&["MEMORY", "USAGE", "small"]));
    let large = int(&c.call(&["MEMORY", "USAGE", "large"]));
    assert!(large >= small + 9_990, "{small} {large}");
    c.call(&["SET", &"k".repeat(1000), "x"]);
    let long_key = int(&c.call(&["MEMORY", "USAGE", &"k".repeat(1000)]));
    assert!(long_key >= small + 990, "{small} {long_key}");
}

/// Nested values are sampled: the first elements stand for the rest unless
/// SAMPLES 0 asks for every one.
#[test]
fn usage_samples_aggregates_unless_told_to_measure_all() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    let mut push = vec!["RPUSH".to_string(), "l".to_string()];
    push.extend((0..10).map(|_| "a".to_string()));
    push.extend((0..10).map(|_| "b".repeat(5_000)));
    let push: Vec<&str> = push.iter().map(String::as_str).collect();
    c.call(&push);
    let sampled = int(&c.call(&["MEMORY", "USAGE", "l"]));
    let all = int(&c.call(&["MEMORY", "USAGE", "l", "SAMPLES", "0"]));
    assert!(all > sampled + 40_000, "sampled {sampled}, all {all}");
    assert_eq!(int(&c.call(&["MEMORY", "USAGE", "l", "SAMPLES", "20"])), all);
}

fn info_field(c: &mut Raw, field: &str) -> u64 {
    let info = String::from_utf8(c.call(&["INFO", "memory"])).unwrap();
    let prefix = format!("{field}:");
    info.lines().find_map(|l| l.strip_prefix(&prefix)).unwrap().trim().parse().unwrap()
}

/// MEMORY PURGE gives what was freed back to the OS at once, without
/// waiting for the background cycle (at `hz 1` it runs once a second).
#[test]
fn purge_gives_freed_memory_back_at_once() {
    let server = Binary::start(&["--hz", "1"]);
    let mut c = Raw::connect(server.addr);
    c.call(&["SETRANGE", "big", "209715199", "x"]);
    let holding = server.rss();
    assert!(holding > 200 << 20, "{holding}");
    c.call(&["DEL", "big"]);
    assert_eq!(c.call(&["MEMORY", "PURGE"]), b"+OK\r\n");
    let after = server.rss();
    assert!(after < holding - (150 << 20), "RSS {holding} -> {after}");
    assert!(info_field(&mut c, "used_memory_rss") < holding - (150 << 20));
}
