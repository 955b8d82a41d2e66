//! OBJECT IDLETIME: which commands mark a key accessed, as in Redis 7.0.15
//! (lookups with LOOKUP_NOTOUCH do not), compared with redis-server; and
//! idle time that follows keylock's virtual clock.

mod common;
use common::*;

use std::time::Duration;

/// (setup, command run after the keys went idle; `K` is the key) and
/// whether Redis counts the command as an access.
const CASES: &[(&str, &str)] = &[
    ("SET K v", "GET K"),
    ("SET K v", "EXISTS K"),
    ("SET K v", "TYPE K"),
    ("SET K v", "TTL K"),
    ("SET K v", "PTTL K"),
    ("SET K v", "EXPIRETIME K"),
    ("SET K v", "PEXPIRETIME K"),
    ("SET K v", "OBJECT ENCODING K"),
    ("SET K v", "OBJECT REFCOUNT K"),
    ("SET K v", "TOUCH K"),
    ("SET K v", "STRLEN K"),
    ("SET K v", "APPEND K w"),
    ("SET K v", "SET K w"),
    ("SET K v", "PEXPIRE K 100000"),
    ("SET K v", "PERSIST K"),
    ("SET K v", "RENAME K K2"),
    ("SET K v", "COPY K K3"),
    ("SET K v", "SCAN 0 TYPE string COUNT 1000"),
    ("SET K v", "KEYS *"),
    ("HSET K f v", "HEXISTS K f"),
    ("HSET K f v", "HGET K f"),
    ("HSET K f 1", "HINCRBY K f 1"),
    ("RPUSH K a b", "LRANGE K 0 -1"),
    ("SADD K a", "SISMEMBER K a"),
    ("ZADD K 1 a", "ZSCORE K a"),
    ("SET K v", "EVAL \"return redis.call('exists', KEYS[1])\" 1 K"),
    ("SET K v", "EVAL \"return redis.call('pttl', KEYS[1])\" 1 K"),
    ("SET K v", "EVAL \"return redis.call('get', KEYS[1])\" 1 K"),
];

fn words(line: &str, key: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut rest = line;
    while !rest.is_empty() {
        rest = rest.trim_start();
        if let Some(quoted) = rest.strip_prefix('"') {
            let end = quoted.find('"').unwrap();
            out.push(quoted.as_bytes()[..end].to_vec());
            rest = &quoted[end + 1..];
        } else {
            let end = rest.find(' ').unwrap_or(rest.len());
            let word = &rest[..end];
            // The key is the word K (K2, K3: names derived from it).
            let word = match word.strip_prefix('K') {
                Some(suffix) if suffix.chars().all(|c| c.is_ascii_digit()) => format!("{key}{suffix}"),
                _ => word.to_string(),
            };
            out.push(word.into_bytes());
            rest = &rest[end..];
        }
    }
    out
}

fn send(conn: &mut Raw, line: &str, key: &str) -> Vec<u8> {
    let args = words(line, key);
    let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    conn.send_cmd(&refs);
    conn.reply()
}

/// The idle seconds of `key` after each case's command.
fn idle_after(conn: &mut Raw, wait: impl FnOnce()) -> Vec<i64> {
    for (i, (setup, _)) in CASES.iter().enumerate() {
        send(conn, setup, &format!("key{i}"));
    }
    wait();
    for (i, (_, command)) in CASES.iter().enumerate() {
        send(conn, command, &format!("key{i}"));
    }
    (0..CASES.len())
        .map(|i| {
            let key = format!("key{i}");
            // RENAME moved the value to K2.
            let key = if CASES[i].1.starts_with("RENAME") {
                format!("key{i}2")
            } else {
                key
            };
            let reply = send(conn, "OBJECT IDLETIME K", &key);
            std::str::from_utf8(&reply[1..reply.len() - 2]).unwrap().parse().unwrap()
        })
        .collect()
}

#[test]
fn the_commands_that_mark_a_key_accessed_are_redis_s() {
    let Some(redis) = real_redis() else {
        return;
    };
    let keylock = start();
    let pause = || std::thread::sleep(Duration::from_millis(2_200));
    let theirs = idle_after(&mut Raw::connect(redis.addr), pause);
    let ours = idle_after(&mut Raw::connect(keylock.addr()), pause);
    let touched = |idle: &[i64]| idle.iter().map(|&s| s < 2).collect::<Vec<bool>>();
    for (i, (want, got)) in touched(&theirs).iter().zip(touched(&ours)).enumerate() {
        assert_eq!(
            *want, got,
            "after `{}`: redis idle {}s, keylock idle {}s",
            CASES[i].1, theirs[i], ours[i]
        );
    }
    // Both kinds occur: the comparison can tell them apart.
    assert!(touched(&theirs).contains(&true) && touched(&theirs).contains(&false));
}

#[test]
fn idle_time_follows_the_virtual_clock() {
    let s = start();
    let mut c = conn(&s);
    q::<()>(&mut c, &["SET", "k", "v"]);
    q::<u64>(&mut c, &["KEYLOCK", "CLOCK", "FREEZE"]);
    q::<u64>(&mut c, &["KEYLOCK", "CLOCK", "ADVANCE", "40000"]);
    assert!((40..=41).contains(&q::<i64>(&mut c, &["OBJECT", "IDLETIME", "k"])));
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]), 1);
    q::<u64>(&mut c, &["KEYLOCK", "CLOCK", "ADVANCE", "5000"]);
    assert!((45..=46).contains(&q::<i64>(&mut c, &["OBJECT", "IDLETIME", "k"])));
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v");
    assert_eq!(q::<i64>(&mut c, &["OBJECT", "IDLETIME", "k"]), 0);
    assert_eq!(q::<Option<i64>>(&mut c, &["OBJECT", "IDLETIME", "missing"]), None);
    q::<()>(&mut c, &["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"]);
    assert_eq!(
        q_err(&mut c, &["OBJECT", "IDLETIME", "k"]),
        "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."
    );
}
