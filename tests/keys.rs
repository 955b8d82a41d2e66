//! Generic key commands over TCP.

mod common;
use common::*;

#[test]
fn del_and_exists_count_every_argument() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    c.call(&["MSET", "a", "1", "b", "2"]);
    assert_eq!(c.call(&["EXISTS", "a", "a", "nope"]), b":2\r\n");
    assert_eq!(c.call(&["DEL", "a", "b", "nope"]), b":2\r\n");
    assert_eq!(c.call(&["EXISTS", "a", "b"]), b":0\r\n");
}

#[test]
fn type_names_every_value_type() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    c.call(&["SET", "s", "v"]);
    c.call(&["HSET", "h", "f", "v"]);
    c.call(&["RPUSH", "l", "v"]);
    c.call(&["SADD", "t", "v"]);
    c.call(&["ZADD", "z", "1", "v"]);
    for (key, name) in [
        ("s", "string"),
        ("h", "hash"),
        ("l", "list"),
        ("t", "set"),
        ("z", "zset"),
        ("none", "none"),
    ] {
        assert_eq!(c.call(&["TYPE", key]), format!("+{name}\r\n").into_bytes());
    }
}

#[test]
fn rename_keeps_value_and_ttl_and_renamenx_refuses_existing() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    c.call(&["SET", "a", "v", "EX", "100"]);
    assert_eq!(c.call(&["RENAME", "a", "b"]), b"+OK\r\n");
    assert_eq!(c.call(&["TTL", "b"]), b":100\r\n");
    assert_eq!(c.call(&["RENAME", "a", "c"]), b"-ERR no such key\r\n");
    c.call(&["SET", "c", "x"]);
    assert_eq!(c.call(&["RENAMENX", "b", "c"]), b":0\r\n");
}

#[test]
fn keys_matches_glob_patterns() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    c.call(&["MSET", "hello", "1", "hallo", "1", "hxllo", "1", "other", "1"]);
    let mut keys: Vec<String> = {
        let mut cc = conn(&s);
        q(&mut cc, &["KEYS", "h[ae]llo"])
    };
    keys.sort();
    assert_eq!(keys, vec!["hallo", "hello"]);
}

#[test]
fn scan_visits_every_key_once_the_cursor_returns_to_zero() {
    let s = start();
    let mut c = conn(&s);
    for i in 0..500 {
        q::<()>(&mut c, &["SET", &format!("key:{i}"), "v"]);
    }
    let mut seen = std::collections::HashSet::new();
    let mut cursor = "0".to_string();
    loop {
        let (next, keys): (String, Vec<String>) = q(&mut c, &["SCAN", &cursor, "COUNT", "37"]);
        seen.extend(keys);
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert_eq!(seen.len(), 500);
}

#[test]
fn scan_still_returns_keys_present_throughout_when_others_are_deleted() {
    let s = start();
    let mut c = conn(&s);
    for i in 0..300 {
        q::<()>(&mut c, &["SET", &format!("keep:{i}"), "v"]);
        q::<()>(&mut c, &["SET", &format!("drop:{i}"), "v"]);
    }
    let mut seen = std::collections::HashSet::new();
    let mut cursor = "0".to_string();
    let mut round = 0;
    loop {
        let (next, keys): (String, Vec<String>) = q(&mut c, &["SCAN", &cursor, "COUNT", "20"]);
        seen.extend(keys.into_iter().filter(|k| k.starts_with("keep:")));
        // Delete some keys between calls, as another client would.
        for i in (round * 10)..(round * 10 + 10).min(300) {
            q::<i64>(&mut c, &["DEL", &format!("drop:{i}")]);
        }
        round += 1;
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert_eq!(seen.len(), 300);
}

#[test]
fn scan_filters_by_match_and_type() {
    let s = start();
    let mut c = conn(&s);
    q::<()>(&mut c, &["SET", "str:1", "v"]);
    q::<i64>(&mut c, &["RPUSH", "list:1", "v"]);
    let (_, keys): (String, Vec<String>) = q(&mut c, &["SCAN", "0", "MATCH", "*:1", "TYPE", "list", "COUNT", "100"]);
    assert_eq!(keys, vec!["list:1"]);
    assert_eq!(q_err(&mut c, &["SCAN", "abc"]), "ERR invalid cursor");
}

#[test]
fn move_and_copy_between_databases() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    c.call(&["SET", "k", "v"]);
    assert_eq!(c.call(&["COPY", "k", "k2", "DB", "1"]), b":1\r\n");
    assert_eq!(c.call(&["MOVE", "k", "2"]), b":1\r\n");
    assert_eq!(c.call(&["EXISTS", "k"]), b":0\r\n");
    c.call(&["SELECT", "2"]);
    assert_eq!(c.call(&["GET", "k"]), b"$1\r\nv\r\n");
    c.call(&["SELECT", "1"]);
    assert_eq!(c.call(&["GET", "k2"]), b"$1\r\nv\r\n");
}

#[test]
fn wait_answers_zero_replicas_at_once_and_waitaof_as_without_aof() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    assert_eq!(c.call(&["WAIT", "1", "100"]), b":0\r\n");
    assert_eq!(c.call(&["WAITAOF", "0", "0", "0"]), b"*2\r\n:0\r\n:0\r\n");
    assert_eq!(
        c.call(&["WAITAOF", "1", "0", "0"]),
        b"-ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.\r\n"
    );
}
