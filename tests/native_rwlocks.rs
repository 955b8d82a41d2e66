//! Redisson's read-write lock over TCP, run natively: readers share,
//! a writer excludes, the writer may read under its own write lock, the
//! last unlock wakes waiters, and a hold count too large for a native run
//! is handed to Lua.

mod common;
use common::*;

use std::time::Duration;

const A: &str = "a1b2:1";
const B: &str = "c3d4:1";
const W: &str = "e5f6:1";

fn body(path: &str) -> Vec<u8> {
    std::fs::read(format!("{}/lua/redisson/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn evalsha(c: &mut Raw, path: &str, keys: &[&str], args: &[&str]) -> Vec<u8> {
    let script = body(path);
    let sha = sha1_smol::Sha1::from(&script).digest().to_string();
    let numkeys = keys.len().to_string();
    let mut argv: Vec<&[u8]> = vec![b"EVALSHA", sha.as_bytes(), numkeys.as_bytes()];
    argv.extend(keys.iter().map(|k| k.as_bytes()));
    argv.extend(args.iter().map(|a| a.as_bytes()));
    c.send_cmd(&argv);
    let reply = c.reply();
    if !reply.starts_with(b"-NOSCRIPT") {
        return reply;
    }
    c.send_cmd(&[b"SCRIPT", b"LOAD", &script]);
    c.reply();
    c.send_cmd(&argv);
    c.reply()
}

fn timeout_prefix(owner: &str) -> String {
    format!("{{rw}}:{owner}:rwlock_timeout")
}

fn read_lock(c: &mut Raw, owner: &str) -> Vec<u8> {
    let prefix = timeout_prefix(owner);
    let writer = format!("{owner}:write");
    evalsha(c, "4.7.0/rwlock-read-acquire.lua", &["rw", &prefix], &["30000", owner, &writer])
}

fn write_lock(c: &mut Raw, owner: &str) -> Vec<u8> {
    evalsha(c, "4.7.0/rwlock-write-acquire.lua", &["rw"], &["30000", &format!("{owner}:write")])
}

fn read_unlock(c: &mut Raw, owner: &str, request: &str) -> Vec<u8> {
    let prefix = timeout_prefix(owner);
    let latch = format!("redisson_unlock_latch:{{rw}}:{request}");
    let reply = evalsha(
        c,
        "4.7.0/rwlock-read-unlock.lua",
        &["rw", "redisson_rwlock:{rw}", &prefix, "{rw}", &latch],
        &["0", owner, "PUBLISH", "8600"],
    );
    c.call(&["DEL", &latch]);
    reply
}

fn write_unlock(c: &mut Raw, owner: &str, request: &str) -> Vec<u8> {
    let latch = format!("redisson_unlock_latch:{{rw}}:{request}");
    let reply = evalsha(
        c,
        "4.7.0/rwlock-write-unlock.lua",
        &["rw", "redisson_rwlock:{rw}", &latch],
        &["0", "30000", &format!("{owner}:write"), "PUBLISH", "8600"],
    );
    c.call(&["DEL", &latch]);
    reply
}

fn is_ttl(reply: &[u8]) -> bool {
    reply.starts_with(b":")
}

#[test]
fn readers_share_and_a_writer_waits_for_the_last_one() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    let mut sub = Raw::connect(s.addr());
    sub.call(&["SUBSCRIBE", "redisson_rwlock:{rw}"]);

    assert_eq!(read_lock(&mut c, A), b"$-1\r\n");
    assert_eq!(read_lock(&mut c, B), b"$-1\r\n");
    assert_eq!(read_lock(&mut c, A), b"$-1\r\n", "reentrant read");
    assert!(is_ttl(&write_lock(&mut c, W)), "readers exclude the writer");
    assert_eq!(
        c.call(&["EXISTS", &format!("{}:2", timeout_prefix(A))]),
        b":1\r\n",
        "one timeout key per hold"
    );

    assert_eq!(read_unlock(&mut c, A, "1"), b":0\r\n");
    assert_eq!(read_unlock(&mut c, A, "2"), b":0\r\n", "B still reads");
    assert_eq!(read_unlock(&mut c, B, "3"), b":1\r\n");
    assert_eq!(
        sub.reply(),
        b"*3\r\n$7\r\nmessage\r\n$20\r\nredisson_rwlock:{rw}\r\n$1\r\n0\r\n",
        "the last reader's unlock wakes the writer"
    );
    assert_eq!(write_lock(&mut c, W), b"$-1\r\n");
}

#[test]
fn a_writer_excludes_others_but_may_read_under_its_own_lock() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    assert_eq!(write_lock(&mut c, W), b"$-1\r\n");
    assert!(is_ttl(&read_lock(&mut c, A)));
    assert!(is_ttl(&write_lock(&mut c, A)));
    assert_eq!(read_lock(&mut c, W), b"$-1\r\n", "read under own write lock");
    assert_eq!(c.call(&["HGET", "rw", "mode"]), b"$5\r\nwrite\r\n");
    // Releasing the write lock leaves the lock in read mode for the owner.
    assert_eq!(write_unlock(&mut c, W, "1"), b":1\r\n");
    assert_eq!(c.call(&["HGET", "rw", "mode"]), b"$4\r\nread\r\n");
    assert_eq!(read_lock(&mut c, A), b"$-1\r\n");
    assert!(is_ttl(&write_lock(&mut c, A)));
}

#[test]
fn a_hold_count_too_large_for_a_native_run_goes_to_lua() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    c.call(&["HSET", "rw", "mode", "read", A, "150000"]);
    let last = format!("{{rw}}:{A}:rwlock_timeout:150000");
    c.call(&["SET", &last, "1"]);
    c.reader.get_ref().set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    // The walk over 150,000 timeout keys is longer than a native run may
    // be: Lua runs it (and would answer other clients BUSY past the limit).
    assert_eq!(
        evalsha(&mut c, "3.13.6/rwlock-read-renew.lua", &["rw", "{rw}"], &["30000", A]),
        b":1\r\n"
    );
    let ttl = c.call(&["PTTL", &last]);
    assert!(
        ttl.starts_with(b":2") || ttl.starts_with(b":30000"),
        "{}",
        String::from_utf8_lossy(&ttl)
    );
    let info = String::from_utf8(c.call(&["INFO", "keylock"])).unwrap();
    assert!(info.contains("script_rwlock-read-renew@3.13.6:native=0,lua=1"), "{info}");
    // A small count runs natively.
    c.call(&["HSET", "rw", A, "2"]);
    assert_eq!(
        evalsha(&mut c, "3.13.6/rwlock-read-renew.lua", &["rw", "{rw}"], &["30000", A]),
        b":1\r\n"
    );
    let info = String::from_utf8(c.call(&["INFO", "keylock"])).unwrap();
    assert!(info.contains("script_rwlock-read-renew@3.13.6:native=1,lua=1"), "{info}");
}
