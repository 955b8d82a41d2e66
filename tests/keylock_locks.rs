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

const SEM_SET: &str = include_str!("../lua/redisson/4.7.0/semaphore-trysetpermits.lua");
const PE_ACQUIRE: &str = include_str!("../lua/redisson/4.7.0/pesemaphore-tryacquire.lua");
const LATCH_SET: &str = include_str!("../lua/redisson/4.7.0/latch-trysetcount.lua");

/// `pesemaphore-tryacquire` for one permit `id` leased until `until`, at
/// client time `now`, as Redisson 4.7.0 sends it.
fn pe_acquire(c: &mut redis::Connection, name: &str, id: &[u8], until: &str, now: &str) -> Option<String> {
    redis::cmd("EVAL")
        .arg(PE_ACQUIRE)
        .arg(3)
        .arg(name)
        .arg(format!("{{{name}}}:timeout"))
        .arg(format!("redisson_sc:{{{name}}}"))
        .arg(1)
        .arg(until)
        .arg(now)
        .arg("922337203685477")
        .arg("PUBLISH")
        .arg(id)
        .query(c)
        .unwrap()
}

#[test]
fn a_permit_expirable_semaphore_shows_available_permits_and_each_lease() {
    let s = start();
    let mut c = conn(&s);
    let now = "1700000000000";
    let set: i64 = q(&mut c, &["EVAL", SEM_SET, "2", "pe", "redisson_sc:{pe}", "3", "PUBLISH"]);
    assert_eq!(set, 1);
    // Redisson 4.x sends 16 raw bytes behind a hex id; 3.x the hex id itself.
    let raw_id: Vec<u8> = (0..16u8).map(|i| 0xf0 ^ i).collect();
    assert_eq!(pe_acquire(&mut c, "pe", &raw_id, "1700000005000", now).as_deref(), Some("OK"));
    let hex_id = b"0123456789abcdef0123456789abcdef";
    assert_eq!(pe_acquire(&mut c, "pe", hex_id, "922337203685477", now).as_deref(), Some("OK"));

    let sem: Value = q(&mut c, &["KEYLOCK", "LOCK", "pe"]);
    assert_eq!(bulk(&field(&sem, "type")), "pesemaphore");
    assert_eq!(field(&sem, "ttl"), Value::Int(-1));
    assert_eq!(field(&sem, "permits"), Value::Int(1));
    assert_eq!(field(&sem, "waiters"), Value::Int(0));
    let Value::Array(acquired) = field(&sem, "acquired") else {
        panic!()
    };
    assert_eq!(acquired.len(), 2);
    assert_eq!(bulk(&field(&acquired[0], "id")), "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff");
    assert_eq!(field(&acquired[0], "expires"), Value::Int(1_700_000_005_000));
    assert_eq!(bulk(&field(&acquired[1], "id")), "0123456789abcdef0123456789abcdef");
    assert_eq!(field(&acquired[1], "expires"), Value::Int(-1), "acquired without a lease");

    let mut waiter = Raw::connect(s.addr());
    waiter.call(&["SUBSCRIBE", "redisson_sc:{pe}"]);
    let sem: Value = q(&mut c, &["KEYLOCK", "LOCK", "pe"]);
    assert_eq!(field(&sem, "waiters"), Value::Int(1));
    // The lease zset is not listed as an entry of its own.
    let all: Vec<Value> = q(&mut c, &["KEYLOCK", "LOCKS"]);
    assert_eq!(all.iter().map(|l| bulk(&field(l, "name"))).collect::<Vec<_>>(), vec!["pe"]);
}

#[test]
fn a_latch_with_waiters_is_listed_with_its_count() {
    let s = start();
    let mut c = conn(&s);
    let set: i64 = q(
        &mut c,
        &[
            "EVAL",
            LATCH_SET,
            "2",
            "gate",
            "redisson_countdownlatch__channel__{gate}",
            "1",
            "3",
            "PUBLISH",
        ],
    );
    assert_eq!(set, 1);
    assert_eq!(q::<Value>(&mut c, &["KEYLOCK", "LOCK", "gate"]), Value::Nil, "nobody waits yet");
    let mut waiters: Vec<Raw> = (0..2).map(|_| Raw::connect(s.addr())).collect();
    for w in &mut waiters {
        w.call(&["SUBSCRIBE", "redisson_countdownlatch__channel__{gate}"]);
    }
    let latch: Value = q(&mut c, &["KEYLOCK", "LOCK", "gate"]);
    assert_eq!(bulk(&field(&latch, "type")), "latch");
    assert_eq!(field(&latch, "count"), Value::Int(3));
    assert_eq!(field(&latch, "waiters"), Value::Int(2));
}

#[test]
fn a_semaphore_waited_on_before_its_permits_were_set_is_listed_without_a_key() {
    let s = start();
    let mut c = conn(&s);
    let mut waiter = Raw::connect(s.addr());
    waiter.call(&["SUBSCRIBE", "redisson_sc:{jobs}"]);
    let sem: Value = q(&mut c, &["KEYLOCK", "LOCK", "jobs"]);
    assert_eq!(bulk(&field(&sem, "type")), "semaphore");
    assert_eq!(field(&sem, "ttl"), Value::Int(-2));
    assert_eq!(field(&sem, "permits"), Value::Int(0));
    assert_eq!(field(&sem, "waiters"), Value::Int(1));
    let listed: Vec<Value> = q(&mut c, &["KEYLOCK", "LOCKS", "j*"]);
    assert_eq!(listed.len(), 1);
    assert_eq!(bulk(&field(&listed[0], "name")), "jobs");
    let other: Vec<Value> = q(&mut c, &["KEYLOCK", "LOCKS", "x*"]);
    assert!(other.is_empty());
}

#[test]
fn a_name_with_braces_uses_redissons_companion_names() {
    let s = start();
    let mut c = conn(&s);
    // Redisson adds no braces around a name that has some.
    q::<Option<i64>>(&mut c, &["EVAL", LOCK_ACQUIRE, "1", "{t1}:orders", "30000", OWNER]);
    let mut lock_waiter = Raw::connect(s.addr());
    lock_waiter.call(&["SUBSCRIBE", "redisson_lock__channel:{t1}:orders"]);
    let lock: Value = q(&mut c, &["KEYLOCK", "LOCK", "{t1}:orders"]);
    assert_eq!(field(&lock, "waiters"), Value::Int(1));

    q::<()>(&mut c, &["SET", "{t1}:sem", "2"]);
    let mut sem_waiter = Raw::connect(s.addr());
    sem_waiter.call(&["SUBSCRIBE", "redisson_sc:{t1}:sem"]);
    let sem: Value = q(&mut c, &["KEYLOCK", "LOCK", "{t1}:sem"]);
    assert_eq!(bulk(&field(&sem, "type")), "semaphore");
    assert_eq!(field(&sem, "permits"), Value::Int(2));

    q::<()>(&mut c, &["SET", "{t1}:pe", "0"]);
    q::<()>(&mut c, &["ZADD", "{t1}:pe:timeout", "1700000005000", "permit"]);
    let pe: Value = q(&mut c, &["KEYLOCK", "LOCK", "{t1}:pe"]);
    assert_eq!(bulk(&field(&pe, "type")), "pesemaphore");

    // The latch channel is the exception: Redisson always adds braces.
    q::<()>(&mut c, &["SET", "{t1}:gate", "4"]);
    let mut latch_waiter = Raw::connect(s.addr());
    latch_waiter.call(&["SUBSCRIBE", "redisson_countdownlatch__channel__{{t1}:gate}"]);
    let latch: Value = q(&mut c, &["KEYLOCK", "LOCK", "{t1}:gate"]);
    assert_eq!(bulk(&field(&latch, "type")), "latch");
}

#[test]
fn a_number_without_evidence_of_a_family_is_not_listed() {
    let s = start();
    let mut c = conn(&s);
    q::<()>(&mut c, &["SET", "counter", "5"]);
    q::<()>(&mut c, &["SET", "word", "five"]);
    assert_eq!(q::<Value>(&mut c, &["KEYLOCK", "LOCK", "counter"]), Value::Nil);
    let mut waiter = Raw::connect(s.addr());
    waiter.call(&["SUBSCRIBE", "redisson_sc:{counter}", "redisson_sc:{word}"]);
    waiter.reply();
    assert_eq!(bulk(&field(&q(&mut c, &["KEYLOCK", "LOCK", "counter"]), "type")), "semaphore");
    assert_eq!(q::<Value>(&mut c, &["KEYLOCK", "LOCK", "word"]), Value::Nil, "not a number");
    waiter.call(&["UNSUBSCRIBE"]);
    waiter.reply();
    assert_eq!(
        q::<Value>(&mut c, &["KEYLOCK", "LOCK", "counter"]),
        Value::Nil,
        "nobody waits any more"
    );
    // A lease zset beside a value that is not a number is no semaphore.
    q::<()>(&mut c, &["ZADD", "{word}:timeout", "1", "permit"]);
    assert_eq!(q::<Value>(&mut c, &["KEYLOCK", "LOCK", "word"]), Value::Nil);
    assert!(q::<Vec<Value>>(&mut c, &["KEYLOCK", "LOCKS"]).is_empty());
}
