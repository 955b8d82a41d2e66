//! Millisecond expiry: lazy on access, active in the background, and a
//! test-controlled clock.

mod common;
use common::*;

use std::time::Duration;

fn manual() -> ServerHandle {
    start_with(|c| c.clock = keylock::Clock::manual(1_700_000_000_000))
}

#[test]
fn a_key_past_its_deadline_is_invisible_to_every_command() {
    let s = manual();
    let mut c = conn(&s);
    q::<()>(&mut c, &["SET", "k", "v", "PX", "100"]);
    s.clock().advance(100);
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "k"]), None);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]), 0);
    assert_eq!(q::<String>(&mut c, &["TYPE", "k"]), "none");
    assert_eq!(q::<i64>(&mut c, &["PTTL", "k"]), -2);
    assert_eq!(q::<Vec<String>>(&mut c, &["KEYS", "*"]), Vec::<String>::new());
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0);
}

#[test]
fn one_millisecond_before_the_deadline_the_key_is_still_there() {
    let s = manual();
    let mut c = conn(&s);
    q::<()>(&mut c, &["SET", "k", "v", "PX", "100"]);
    s.clock().advance(99);
    assert_eq!(q::<i64>(&mut c, &["PTTL", "k"]), 1);
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "k"]), Some("v".into()));
}

#[test]
fn ttl_rounds_to_the_nearest_second() {
    let s = manual();
    let mut c = conn(&s);
    q::<()>(&mut c, &["SET", "k", "v", "PX", "2500"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), 3);
    s.clock().advance(1001);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), 1);
}

#[test]
fn set_without_keepttl_clears_the_ttl() {
    let s = manual();
    let mut c = conn(&s);
    q::<()>(&mut c, &["SET", "k", "v", "EX", "10"]);
    q::<()>(&mut c, &["SET", "k", "v2", "KEEPTTL"]);
    assert_eq!(q::<i64>(&mut c, &["PTTL", "k"]), 10_000);
    q::<()>(&mut c, &["SET", "k", "v3"]);
    assert_eq!(q::<i64>(&mut c, &["PTTL", "k"]), -1);
}

#[test]
fn incr_keeps_the_ttl() {
    let s = manual();
    let mut c = conn(&s);
    q::<()>(&mut c, &["SET", "n", "1", "PX", "5000"]);
    q::<i64>(&mut c, &["INCR", "n"]);
    assert_eq!(q::<i64>(&mut c, &["PTTL", "n"]), 5000);
}

#[test]
fn expire_options_follow_redis_rules() {
    let s = manual();
    let mut c = conn(&s);
    q::<()>(&mut c, &["SET", "k", "v"]);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "100", "XX"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "100", "NX"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "50", "GT"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "200", "GT"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "300", "LT"]), 0);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), 200);
    assert_eq!(
        q_err(&mut c, &["EXPIRE", "k", "1", "NX", "XX"]),
        "ERR NX and XX, GT or LT options at the same time are not compatible"
    );
}

#[test]
fn expire_in_the_past_deletes_the_key() {
    let s = manual();
    let mut c = conn(&s);
    q::<()>(&mut c, &["SET", "k", "v"]);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "-1"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]), 0);
}

#[test]
fn active_expiry_reclaims_keys_nobody_reads() {
    let s = start();
    let mut c = conn(&s);
    for i in 0..1000 {
        q::<()>(&mut c, &["SET", &format!("k{i}"), "v", "PX", "20"]);
    }
    q::<()>(&mut c, &["SET", "keep", "v"]);
    // INFO's keyspace counts stored keys, expired or not, until reclaimed.
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(50));
        let info: String = q(&mut c, &["INFO", "keyspace"]);
        if info.contains("db0:keys=1,") {
            let stats: String = q(&mut c, &["INFO", "stats"]);
            assert!(stats.contains("expired_keys:1000"), "{stats}");
            return;
        }
    }
    panic!("expired keys were not reclaimed by the active cycle");
}

#[test]
fn persist_removes_the_deadline() {
    let s = manual();
    let mut c = conn(&s);
    q::<()>(&mut c, &["SET", "k", "v", "EX", "1"]);
    assert_eq!(q::<i64>(&mut c, &["PERSIST", "k"]), 1);
    s.clock().advance(5000);
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "k"]), Some("v".into()));
}

#[test]
fn getex_sets_and_clears_deadlines() {
    let s = manual();
    let mut c = conn(&s);
    q::<()>(&mut c, &["SET", "k", "v"]);
    assert_eq!(q::<String>(&mut c, &["GETEX", "k", "PX", "300"]), "v");
    assert_eq!(q::<i64>(&mut c, &["PTTL", "k"]), 300);
    assert_eq!(q::<String>(&mut c, &["GETEX", "k", "PERSIST"]), "v");
    assert_eq!(q::<i64>(&mut c, &["PTTL", "k"]), -1);
}
