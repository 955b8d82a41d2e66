//! KEYLOCK LOCKS / KEYLOCK LOCK: held Redisson locks, read back from the
//! keys Redisson's own scripts create.

mod common;
use common::*;

use redis::Value;

const LOCK_ACQUIRE: &str = include_str!("../lua/redisson/4.7.0/lock-acquire.lua");
const RW_READ: &str = include_str!("../lua/redisson/4.7.0/rwlock-read-acquire.lua");
const FAIR_ACQUIRE: &str = include_str!("../lua/redisson/4.7.0/fairlock-acquire.lua");
const OWNER: &str = "5f0c7a5e-4d1b-4c8e-9a3f-0a1b2c3d4e5f:1";
const OTHER: &str = "0a1b2c3d-4e5f-4c8e-9a3f-5f0c7a5e4d1b:7";

/// A RESP2 map reply (flat array) as (key, value) pairs.
fn fields(v: &Value) -> Vec<(String, Value)> {
    let Value::Array(items) = v else { panic!("not a map: {v:?}") };
    items
        .chunks(2)
        .map(|p| match &p[0] {
            Value::BulkString(k) => (String::from_utf8_lossy(k).into_owned(), p[1].clone()),
            other => panic!("key {other:?}"),
        })
        .collect()
}

fn field(v: &Value, name: &str) -> Value {
    fields(v)
        .into_iter()
        .find(|(k, _)| k == name)
        .unwrap_or_else(|| panic!("no field {name} in {v:?}"))
        .1
}

fn bulk(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("not bulk: {other:?}"),
    }
}

#[test]
fn a_reentrant_lock_shows_its_holder_hold_count_ttl_and_waiters() {
    let s = start();
    let mut c = conn(&s);
    for _ in 0..2 {
        q::<Option<i64>>(&mut c, &["EVAL", LOCK_ACQUIRE, "1", "orders", "30000", OWNER]);
    }
    let mut waiter = Raw::connect(s.addr());
    waiter.call(&["SUBSCRIBE", "redisson_lock__channel:{orders}"]);
    let lock: Value = q(&mut c, &["KEYLOCK", "LOCK", "orders"]);
    assert_eq!(bulk(&field(&lock, "type")), "lock");
    let Value::Int(ttl) = field(&lock, "ttl") else { panic!() };
    assert!(ttl > 29_000 && ttl <= 30_000, "{ttl}");
    let Value::Array(holders) = field(&lock, "holders") else { panic!() };
    assert_eq!(holders.len(), 1);
    assert_eq!(bulk(&field(&holders[0], "client")), "5f0c7a5e-4d1b-4c8e-9a3f-0a1b2c3d4e5f");
    assert_eq!(bulk(&field(&holders[0], "thread")), "1");
    assert_eq!(field(&holders[0], "holds"), Value::Int(2));
    assert_eq!(field(&lock, "waiters"), Value::Int(1));
}

#[test]
fn a_read_write_lock_shows_mode_and_every_reader() {
    let s = start();
    let mut c = conn(&s);
    for owner in [OWNER, OTHER] {
        let timeout_prefix = format!("{{docs}}:{owner}:rwlock_timeout");
        q::<Option<i64>>(
            &mut c,
            &[
                "EVAL",
                RW_READ,
                "2",
                "docs",
                &timeout_prefix,
                "30000",
                owner,
                &format!("{owner}:write"),
            ],
        );
    }
    let lock: Value = q(&mut c, &["KEYLOCK", "LOCK", "docs"]);
    assert_eq!(bulk(&field(&lock, "type")), "rwlock");
    assert_eq!(bulk(&field(&lock, "mode")), "read");
    let Value::Array(holders) = field(&lock, "holders") else { panic!() };
    assert_eq!(holders.len(), 2);
    assert!(holders.iter().all(|h| bulk(&field(h, "mode")) == "read"));
}

#[test]
fn a_fair_lock_shows_its_queue_in_order() {
    let s = start();
    let mut c = conn(&s);
    let now = "1700000000000";
    for owner in [OWNER, OTHER] {
        q::<Option<i64>>(
            &mut c,
            &[
                "EVAL",
                FAIR_ACQUIRE,
                "3",
                "fair",
                "redisson_lock_queue:{fair}",
                "redisson_lock_timeout:{fair}",
                "30000",
                owner,
                "300000",
                now,
            ],
        );
    }
    let lock: Value = q(&mut c, &["KEYLOCK", "LOCK", "fair"]);
    assert_eq!(bulk(&field(&lock, "type")), "fairlock");
    let Value::Array(queue) = field(&lock, "queue") else { panic!() };
    assert_eq!(queue.len(), 1);
    assert_eq!(bulk(&field(&queue[0], "client")), "0a1b2c3d-4e5f-4c8e-9a3f-5f0c7a5e4d1b");
    assert_eq!(bulk(&field(&queue[0], "thread")), "7");
    assert!(matches!(field(&queue[0], "timeout"), Value::Int(t) if t > 1_700_000_000_000));
}

#[test]
fn locks_lists_only_lock_keys_matching_the_pattern() {
    let s = start();
    let mut c = conn(&s);
    q::<Option<i64>>(&mut c, &["EVAL", LOCK_ACQUIRE, "1", "lock:a", "30000", OWNER]);
    q::<Option<i64>>(&mut c, &["EVAL", LOCK_ACQUIRE, "1", "lock:b", "30000", OTHER]);
    q::<Option<i64>>(&mut c, &["EVAL", LOCK_ACQUIRE, "1", "other", "30000", OWNER]);
    q::<()>(&mut c, &["HSET", "lock:plain-hash", "field", "value"]);
    q::<()>(&mut c, &["SET", "lock:string", "5"]);
    let locks: Vec<Value> = q(&mut c, &["KEYLOCK", "LOCKS", "lock:*"]);
    let names: Vec<String> = locks.iter().map(|l| bulk(&field(l, "name"))).collect();
    assert_eq!(names, vec!["lock:a", "lock:b"]);
    let all: Vec<Value> = q(&mut c, &["KEYLOCK", "LOCKS"]);
    assert_eq!(all.len(), 3);
}

#[test]
fn a_semaphore_with_waiters_is_listed_with_its_permits() {
    let s = start();
    let mut c = conn(&s);
    q::<()>(&mut c, &["SET", "permits", "0"]);
    let mut waiter = Raw::connect(s.addr());
    waiter.call(&["SUBSCRIBE", "redisson_sc:{permits}"]);
    let sem: Value = q(&mut c, &["KEYLOCK", "LOCK", "permits"]);
    assert_eq!(bulk(&field(&sem, "type")), "semaphore");
    assert_eq!(field(&sem, "permits"), Value::Int(0));
    assert_eq!(field(&sem, "waiters"), Value::Int(1));
}

#[test]
fn an_unknown_or_plain_key_is_nil() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    c.call(&["SET", "plain", "text"]);
    assert_eq!(c.call(&["KEYLOCK", "LOCK", "plain"]), b"$-1\r\n");
    assert_eq!(c.call(&["KEYLOCK", "LOCK", "missing"]), b"$-1\r\n");
    assert_eq!(
        c.call(&["KEYLOCK", "NOPE"]),
        b"-ERR unknown subcommand 'NOPE'. Try KEYLOCK HELP.\r\n"
    );
}
