//! MIGRATE between real servers: keylock to redis-server, redis-server
//! to keylock and keylock to keylock, each moving values (with their
//! TTLs) through DUMP payloads and RESTORE, plus the answers Redis gives
//! for missing keys, target errors, AUTH, unreachable and silent targets,
//! and its cached connections.

mod common;
use common::*;

use std::net::{SocketAddr, TcpListener};

fn connect(addr: SocketAddr) -> redis::Connection {
    redis::Client::open(format!("redis://{addr}"))
        .and_then(|c| c.get_connection())
        .expect("connect")
}

fn host_port(addr: SocketAddr) -> (String, String) {
    (addr.ip().to_string(), addr.port().to_string())
}

/// Fills `c` with one key of each type, `str` with a TTL.
fn fill(c: &mut redis::Connection) {
    q::<()>(c, &["SET", "str", "value"]);
    q::<()>(c, &["PEXPIRE", "str", "100000"]);
    q::<()>(c, &["RPUSH", "list", "a", "b", "c"]);
    q::<()>(c, &["HSET", "hash", "f1", "v1", "f2", "v2"]);
    q::<()>(c, &["SADD", "set", "1", "2", "x"]);
    q::<()>(c, &["ZADD", "zset", "1", "a", "2.5", "b"]);
}

/// The string, list, hash (sorted), set (sorted) and sorted set [`fill`]
/// made.
type Contents = (Option<String>, Vec<String>, Vec<(String, String)>, Vec<String>, Vec<(String, f64)>);

/// What `c` holds of the keys [`fill`] made, in db `db`.
fn contents(c: &mut redis::Connection, db: &str) -> Contents {
    q::<()>(c, &["SELECT", db]);
    let mut members: Vec<String> = q(c, &["SMEMBERS", "set"]);
    members.sort();
    let mut hash: Vec<(String, String)> = q(c, &["HGETALL", "hash"]);
    hash.sort();
    let found = (
        q(c, &["GET", "str"]),
        q(c, &["LRANGE", "list", "0", "-1"]),
        hash,
        members,
        q(c, &["ZRANGE", "zset", "0", "-1", "WITHSCORES"]),
    );
    q::<()>(c, &["SELECT", "0"]);
    found
}

/// Moves every key of `from` to db 5 of `to` and checks both sides.
fn moves_everything(from: &mut redis::Connection, to: &mut redis::Connection, to_addr: SocketAddr) {
    fill(from);
    let expected = contents(from, "0");
    let (host, port) = host_port(to_addr);
    let reply: String = q(
        from,
        &[
            "MIGRATE", &host, &port, "", "5", "5000", "KEYS", "str", "list", "hash", "set", "zset",
        ],
    );
    assert_eq!(reply, "OK");
    assert_eq!(contents(to, "5"), expected);
    assert_eq!(q::<i64>(from, &["DBSIZE"]), 0, "the source keys are deleted");
    q::<()>(to, &["SELECT", "5"]);
    let ttl: i64 = q(to, &["PTTL", "str"]);
    assert!(ttl > 90_000 && ttl <= 100_000, "the TTL travels: {ttl}");
    assert_eq!(q::<i64>(to, &["PTTL", "list"]), -1);
}

#[test]
fn keylock_migrates_every_type_to_redis() {
    let Some(redis) = real_redis() else { return };
    let s = start();
    moves_everything(&mut conn(&s), &mut connect(redis.addr), redis.addr);
}

#[test]
fn redis_migrates_every_type_to_keylock() {
    let Some(redis) = real_redis() else { return };
    let s = start();
    moves_everything(&mut connect(redis.addr), &mut conn(&s), s.addr());
}

#[test]
fn keylock_migrates_every_type_to_keylock() {
    let (a, b) = (start(), start());
    moves_everything(&mut conn(&a), &mut conn(&b), b.addr());
}

#[test]
fn copy_keeps_the_source_and_replace_overwrites_the_target() {
    let (a, b) = (start(), start());
    let (mut ca, mut cb) = (conn(&a), conn(&b));
    let (host, port) = host_port(b.addr());
    q::<()>(&mut ca, &["SET", "k", "one"]);
    assert_eq!(q::<String>(&mut ca, &["MIGRATE", &host, &port, "k", "0", "1000", "COPY"]), "OK");
    assert_eq!(q::<String>(&mut ca, &["GET", "k"]), "one");
    assert_eq!(
        q_err(&mut ca, &["MIGRATE", &host, &port, "k", "0", "1000", "COPY"]),
        "ERR Target instance replied with error: BUSYKEY Target key name already exists."
    );
    q::<()>(&mut ca, &["SET", "k", "two"]);
    assert_eq!(q::<String>(&mut ca, &["MIGRATE", &host, &port, "k", "0", "1000", "REPLACE"]), "OK");
    assert_eq!(q::<String>(&mut cb, &["GET", "k"]), "two");
    assert_eq!(q::<i64>(&mut ca, &["EXISTS", "k"]), 0);
}

#[test]
fn missing_keys_answer_nokey_and_only_present_keys_move() {
    let (a, b) = (start(), start());
    let (mut ca, mut cb) = (conn(&a), conn(&b));
    let (host, port) = host_port(b.addr());
    assert_eq!(q::<String>(&mut ca, &["MIGRATE", &host, &port, "nokey", "0", "1000"]), "NOKEY");
    q::<()>(&mut ca, &["MSET", "k1", "1", "k3", "3"]);
    let reply: String = q(&mut ca, &["MIGRATE", &host, &port, "", "0", "1000", "KEYS", "k0", "k1", "k2", "k3"]);
    assert_eq!(reply, "OK");
    assert_eq!(
        q::<Vec<Option<String>>>(&mut cb, &["MGET", "k1", "k3"]),
        [Some("1".into()), Some("3".into())]
    );
    assert_eq!(q::<i64>(&mut cb, &["DBSIZE"]), 2);
}

#[test]
fn only_the_keys_the_target_acknowledged_are_deleted() {
    let (a, b) = (start(), start());
    let (mut ca, mut cb) = (conn(&a), conn(&b));
    let (host, port) = host_port(b.addr());
    q::<()>(&mut ca, &["MSET", "a", "1", "b", "2", "c", "3"]);
    q::<()>(&mut cb, &["SET", "b", "taken"]);
    assert_eq!(
        q_err(&mut ca, &["MIGRATE", &host, &port, "", "0", "1000", "KEYS", "a", "b", "c"]),
        "ERR Target instance replied with error: BUSYKEY Target key name already exists."
    );
    assert_eq!(
        q::<Vec<Option<String>>>(&mut ca, &["MGET", "a", "b", "c"]),
        [None, Some("2".into()), None]
    );
}

#[test]
fn auth_and_auth2_log_in_on_the_target() {
    let a = start();
    let b = start_with(|c| c.set("requirepass", &["secret"]).unwrap());
    let mut ca = conn(&a);
    let (host, port) = host_port(b.addr());
    q::<()>(&mut ca, &["SET", "k", "v"]);
    let refused = q_err(&mut ca, &["MIGRATE", &host, &port, "k", "0", "1000"]);
    assert_eq!(refused, "ERR Target instance replied with error: NOAUTH Authentication required.");
    let wrong = q_err(&mut ca, &["MIGRATE", &host, &port, "k", "0", "1000", "AUTH", "nope"]);
    assert!(wrong.starts_with("ERR Target instance replied with error: WRONGPASS"), "{wrong}");
    assert_eq!(
        q::<String>(&mut ca, &["MIGRATE", &host, &port, "k", "0", "1000", "COPY", "AUTH", "secret"]),
        "OK"
    );
    let reply: String = q(
        &mut ca,
        &["MIGRATE", &host, &port, "k", "0", "1000", "REPLACE", "AUTH2", "default", "secret"],
    );
    assert_eq!(reply, "OK");
}

#[test]
fn an_unreachable_target_is_an_ioerr() {
    let a = start();
    let mut ca = conn(&a);
    q::<()>(&mut ca, &["SET", "k", "v"]);
    // Redis connects without blocking: a refusal shows when it writes.
    let port = free_port().to_string();
    assert_eq!(
        q_err(&mut ca, &["MIGRATE", "127.0.0.1", &port, "k", "0", "500"]),
        "IOERR error or timeout writing to target instance"
    );
    assert_eq!(
        q_err(&mut ca, &["MIGRATE", "", &port, "k", "0", "500"]),
        "IOERR error or timeout connecting to the client"
    );
    assert_eq!(q::<String>(&mut ca, &["GET", "k"]), "v");
}

#[test]
fn a_silent_target_times_out_reading() {
    let a = start();
    let mut ca = conn(&a);
    q::<()>(&mut ca, &["SET", "k", "v"]);
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port().to_string();
    let started = std::time::Instant::now();
    assert_eq!(
        q_err(&mut ca, &["MIGRATE", "127.0.0.1", &port, "k", "0", "300"]),
        "IOERR error or timeout reading to target instance"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(3));
    assert_eq!(q::<String>(&mut ca, &["GET", "k"]), "v", "nothing acknowledged, nothing deleted");
}

#[test]
fn connections_are_cached_and_a_closed_one_is_reopened() {
    let (a, b) = (start(), start());
    let (mut ca, mut cb) = (conn(&a), conn(&b));
    let (host, port) = host_port(b.addr());
    let cached = |c: &mut redis::Connection| -> String {
        let info: String = q(c, &["INFO", "stats"]);
        info.lines().find(|l| l.starts_with("migrate_cached_sockets:")).unwrap().to_string()
    };
    assert_eq!(cached(&mut ca), "migrate_cached_sockets:0");
    q::<()>(&mut ca, &["SET", "k1", "1"]);
    assert_eq!(q::<String>(&mut ca, &["MIGRATE", &host, &port, "k1", "0", "1000"]), "OK");
    assert_eq!(cached(&mut ca), "migrate_cached_sockets:1");
    // The target drops the connection: the next MIGRATE finds it closed
    // and tries once more on a new one.
    q::<()>(&mut cb, &["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]);
    q::<()>(&mut ca, &["SET", "k2", "2"]);
    assert_eq!(q::<String>(&mut ca, &["MIGRATE", &host, &port, "k2", "0", "1000"]), "OK");
    assert_eq!(q::<i64>(&mut cb, &["EXISTS", "k1", "k2"]), 2);
}

#[test]
fn monitor_hides_the_passwords() {
    let a = start();
    let b = start_with(|c| c.set("requirepass", &["secret"]).unwrap());
    let mut ca = conn(&a);
    let mut monitor = Raw::connect(a.addr());
    assert_eq!(monitor.call(&["MONITOR"]), b"+OK\r\n");
    let (host, port) = host_port(b.addr());
    q::<()>(&mut ca, &["SET", "k", "v"]);
    let _ = q_err(&mut ca, &["MIGRATE", &host, &port, "k", "0", "1000", "AUTH2", "default", "nope"]);
    monitor.reply();
    let line = String::from_utf8(monitor.reply()).unwrap();
    assert!(line.contains("\"MIGRATE\""), "{line}");
    assert!(line.contains("\"AUTH2\" \"(redacted)\" \"(redacted)\""), "{line}");
}

#[test]
fn a_migrate_is_replayed_as_a_del_of_the_keys_the_target_took() {
    let stream = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let tap = stream.clone();
    let a = start_with(move |c| {
        c.effects.push(keylock::engine::effects::EffectsTap::replication(move |bytes| {
            tap.lock().unwrap().extend_from_slice(bytes)
        }))
    });
    let b = start();
    let (mut ca, mut cb) = (conn(&a), conn(&b));
    let (host, port) = host_port(b.addr());
    q::<()>(&mut ca, &["MSET", "a", "1", "b", "2", "c", "3"]);
    q::<()>(&mut cb, &["SET", "b", "taken"]);
    q_err(&mut ca, &["MIGRATE", &host, &port, "", "0", "1000", "KEYS", "a", "b", "c"]);
    // Nothing moved: nothing to replay.
    q_err(&mut ca, &["MIGRATE", &host, &port, "", "0", "1000", "KEYS", "b"]);
    q::<()>(&mut ca, &["SET", "after", "1"]);
    let stream = String::from_utf8(stream.lock().unwrap().clone()).unwrap();
    assert!(stream.contains("*3\r\n$3\r\nDEL\r\n$1\r\na\r\n$1\r\nc\r\n"), "{stream:?}");
    assert!(!stream.to_ascii_uppercase().contains("MIGRATE"), "{stream:?}");
    assert_eq!(stream.matches("DEL").count(), 1, "{stream:?}");
}
