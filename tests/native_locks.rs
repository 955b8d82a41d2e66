//! Redisson's reentrant lock over real TCP, run natively: a small client
//! that behaves as Redisson does on the wire (EVALSHA, SCRIPT LOAD on
//! NOSCRIPT and retry; on a TTL reply SUBSCRIBE to the lock's channel and
//! wait for the unlock message or the TTL; unlock by script, then DEL of
//! the unlock latch), and what a client sees of the native path.

mod common;
use common::*;

use std::io::BufRead;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use keylock::Clock;

fn body(path: &str) -> Vec<u8> {
    std::fs::read(format!("{}/lua/redisson/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn sha(body: &[u8]) -> String {
    sha1_smol::Sha1::from(body).digest().to_string()
}

fn channel(name: &str) -> String {
    format!("redisson_lock__channel:{{{name}}}")
}

/// A reply within `wait`, or None.
fn reply_within(c: &mut Raw, wait: Duration) -> Option<Vec<u8>> {
    c.reader
        .get_ref()
        .set_read_timeout(Some(wait.max(Duration::from_millis(1))))
        .unwrap();
    let ready = matches!(c.reader.fill_buf(), Ok(buf) if !buf.is_empty());
    c.reader.get_ref().set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    ready.then(|| c.reply())
}

/// One Redisson thread's view of the lock API, on its own connections.
struct LockClient {
    conn: Raw,
    sub: Option<Raw>,
    addr: std::net::SocketAddr,
    owner: String,
    acquire: Vec<u8>,
    unlock: Vec<u8>,
    lease_ms: u64,
    requests: u64,
}

impl LockClient {
    fn new(server: &ServerHandle, uuid: &str, thread: u64) -> LockClient {
        LockClient {
            conn: Raw::connect(server.addr()),
            sub: None,
            addr: server.addr(),
            owner: format!("{uuid}:{thread}"),
            acquire: body("4.7.0/lock-acquire.lua"),
            unlock: body("4.7.0/lock-unlock.lua"),
            lease_ms: 30_000,
            requests: 0,
        }
    }

    /// EVALSHA; on NOSCRIPT, SCRIPT LOAD on the same connection and again.
    fn evalsha(&mut self, script: &[u8], keys: &[&str], args: &[&str]) -> Vec<u8> {
        let sha = sha(script);
        let numkeys = keys.len().to_string();
        let mut argv: Vec<&[u8]> = vec![b"EVALSHA", sha.as_bytes(), numkeys.as_bytes()];
        argv.extend(keys.iter().map(|k| k.as_bytes()));
        argv.extend(args.iter().map(|a| a.as_bytes()));
        self.conn.send_cmd(&argv);
        let reply = self.conn.reply();
        if !reply.starts_with(b"-NOSCRIPT") {
            return reply;
        }
        self.conn.send_cmd(&[b"SCRIPT", b"LOAD", script]);
        assert_eq!(self.conn.reply(), format!("$40\r\n{sha}\r\n").into_bytes());
        self.conn.send_cmd(&argv);
        self.conn.reply()
    }

    /// None when acquired, else the lock's remaining TTL.
    fn try_acquire(&mut self, name: &str) -> Option<i64> {
        let lease = self.lease_ms.to_string();
        let owner = self.owner.clone();
        let acquire = self.acquire.clone();
        let reply = self.evalsha(&acquire, &[name], &[&lease, &owner]);
        match reply.as_slice() {
            b"$-1\r\n" => None,
            r => Some(
                std::str::from_utf8(&r[1..r.len() - 2])
                    .unwrap()
                    .parse()
                    .unwrap_or_else(|_| panic!("{r:?}")),
            ),
        }
    }

    /// `RLock.lock()`: subscribe once the lock is taken, retry on each
    /// message or when the TTL runs out.
    fn lock(&mut self, name: &str) {
        if self.try_acquire(name).is_none() {
            return;
        }
        let mut sub = Raw::connect(self.addr);
        sub.send_cmd(&[b"SUBSCRIBE", channel(name).as_bytes()]);
        sub.reply();
        while let Some(ttl) = self.try_acquire(name) {
            reply_within(&mut sub, Duration::from_millis(ttl.max(1) as u64));
        }
        self.sub = Some(sub);
    }

    /// `RLock.unlock()`: 1 released, 0 still held, nil not the owner.
    fn unlock(&mut self, name: &str) -> Vec<u8> {
        self.requests += 1;
        let latch = format!("redisson_unlock_latch:{{{name}}}:{}-{}", self.owner, self.requests);
        let lease = self.lease_ms.to_string();
        let owner = self.owner.clone();
        let unlock = self.unlock.clone();
        let reply = self.evalsha(&unlock, &[name, &channel(name), &latch], &["0", &lease, &owner, "PUBLISH", "8600"]);
        self.conn.call(&["DEL", &latch]);
        self.sub = None;
        reply
    }
}

fn info_line(c: &mut Raw, prefix: &str) -> String {
    let raw = c.call(&["INFO", "keylock"]);
    let text = String::from_utf8_lossy(&raw).into_owned();
    text.lines().find(|l| l.starts_with(prefix)).unwrap_or_default().to_string()
}

#[test]
fn redisson_flow_loads_scripts_on_noscript_and_wakes_the_waiter_on_unlock() {
    let s = start();
    let mut a = LockClient::new(&s, "a1b2", 1);
    let mut b = LockClient::new(&s, "c3d4", 1);
    assert_eq!(a.try_acquire("flow"), None);
    let ttl = b.try_acquire("flow").unwrap();
    assert!((29_000..=30_000).contains(&ttl), "{ttl}");

    let mut sub = Raw::connect(s.addr());
    sub.send_cmd(&[b"SUBSCRIBE", channel("flow").as_bytes()]);
    sub.reply();
    let unlocked = Instant::now();
    assert_eq!(a.unlock("flow"), b":1\r\n");
    let message = reply_within(&mut sub, Duration::from_secs(2)).expect("the unlock message");
    assert!(unlocked.elapsed() < Duration::from_secs(1), "woken after {:?}", unlocked.elapsed());
    assert_eq!(
        message,
        b"*3\r\n$7\r\nmessage\r\n$29\r\nredisson_lock__channel:{flow}\r\n$1\r\n0\r\n"
    );
    assert_eq!(b.try_acquire("flow"), None);

    let mut c = Raw::connect(s.addr());
    assert_eq!(
        info_line(&mut c, "script_lock-acquire@4.7.0"),
        "script_lock-acquire@4.7.0:native=3,lua=0"
    );
    assert_eq!(
        info_line(&mut c, "script_lock-unlock@4.7.0"),
        "script_lock-unlock@4.7.0:native=1,lua=0"
    );
}

#[test]
fn sixteen_clients_exclude_each_other_and_a_shared_counter_ends_exact() {
    const CLIENTS: usize = 16;
    const CYCLES: usize = 500;
    let s = start();
    let holders = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let mut client = LockClient::new(&s, &format!("uuid-{i}"), i as u64);
            let mut data = Raw::connect(s.addr());
            let holders = holders.clone();
            std::thread::spawn(move || {
                for _ in 0..CYCLES {
                    client.lock("counter");
                    assert_eq!(holders.fetch_add(1, Ordering::SeqCst), 0, "two holders at once");
                    let raw = data.call(&["GET", "n"]);
                    let n: u64 = if raw == b"$-1\r\n" {
                        0
                    } else {
                        std::str::from_utf8(&raw).unwrap().lines().nth(1).unwrap().parse().unwrap()
                    };
                    data.call(&["SET", "n", &(n + 1).to_string()]);
                    holders.fetch_sub(1, Ordering::SeqCst);
                    assert_eq!(client.unlock("counter"), b":1\r\n");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut c = Raw::connect(s.addr());
    assert_eq!(
        c.call(&["GET", "n"]),
        format!("${}\r\n{}\r\n", (CLIENTS * CYCLES).to_string().len(), CLIENTS * CYCLES).into_bytes()
    );
    assert_eq!(c.call(&["EXISTS", "counter"]), b":0\r\n");
}

#[test]
fn reentrant_holds_count_up_and_unlock_counts_down() {
    let s = start();
    let mut a = LockClient::new(&s, "a1b2", 7);
    let mut c = Raw::connect(s.addr());
    assert_eq!(a.try_acquire("re"), None);
    assert_eq!(a.try_acquire("re"), None);
    assert_eq!(c.call(&["HGET", "re", "a1b2:7"]), b"$1\r\n2\r\n");
    assert_eq!(a.unlock("re"), b":0\r\n");
    assert_eq!(c.call(&["HGET", "re", "a1b2:7"]), b"$1\r\n1\r\n");
    assert_eq!(a.unlock("re"), b":1\r\n");
    assert_eq!(a.unlock("re"), b"$-1\r\n", "not the owner any more");
}

#[test]
fn a_lease_runs_out_unless_the_watchdog_renews_it() {
    let s = start_with(|c| c.clock = Clock::manual(1_700_000_000_000));
    let clock = s.clock().clone();
    let mut a = LockClient::new(&s, "a1b2", 1);
    let mut b = LockClient::new(&s, "c3d4", 1);
    assert_eq!(a.try_acquire("lease"), None);
    clock.advance(29_999);
    assert_eq!(b.try_acquire("lease"), Some(1));
    clock.advance(1);
    assert_eq!(b.try_acquire("lease"), None, "the lease ran out");

    // The watchdog renews every lease/3 while the holder lives.
    let renew = body("4.7.0/lock-renew-batch.lua");
    assert_eq!(a.try_acquire("dog"), None);
    for _ in 0..6 {
        clock.advance(10_000);
        assert_eq!(a.evalsha(&renew, &["dog"], &["30000", "a1b2:1"]), b"*1\r\n:1\r\n");
        assert_eq!(b.try_acquire("dog"), Some(30_000));
    }
    // A renewal for a lock the thread does not hold stops its watchdog.
    assert_eq!(b.evalsha(&renew, &["dog"], &["30000", "c3d4:1"]), b"*1\r\n:0\r\n");
    clock.advance(30_000);
    assert_eq!(b.try_acquire("dog"), None);
}

#[test]
fn redisson_3_13_6_locks_by_plain_eval() {
    let s = start();
    let acquire = body("3.13.6/lock-acquire.lua");
    let unlock = body("3.13.6/lock-unlock.lua");
    let mut c = Raw::connect(s.addr());
    let eval = |c: &mut Raw, script: &[u8], args: &[&str]| -> Vec<u8> {
        let mut argv: Vec<&[u8]> = vec![b"EVAL", script];
        argv.extend(args.iter().map(|a| a.as_bytes()));
        c.send_cmd(&argv);
        c.reply()
    };
    assert_eq!(eval(&mut c, &acquire, &["1", "old", "30000", "u:1"]), b"$-1\r\n");
    assert!(eval(&mut c, &acquire, &["1", "old", "30000", "u:2"]).starts_with(b":"));
    assert_eq!(
        eval(&mut c, &unlock, &["2", "old", &channel("old"), "0", "30000", "u:1"]),
        b":1\r\n"
    );
    assert_eq!(
        info_line(&mut c, "script_lock-acquire@3.13.6"),
        "script_lock-acquire@3.13.6:native=2,lua=0"
    );
}

#[test]
fn native_scripts_no_sends_recognized_scripts_through_lua() {
    let s = start_with(|c| c.directives.push(("native-scripts".into(), vec!["no".into()])));
    let mut a = LockClient::new(&s, "a1b2", 1);
    let mut c = Raw::connect(s.addr());
    assert_eq!(
        c.call(&["CONFIG", "GET", "native-scripts"]),
        b"*2\r\n$14\r\nnative-scripts\r\n$2\r\nno\r\n"
    );
    assert_eq!(a.try_acquire("cfg"), None);
    assert_eq!(info_line(&mut c, "native_scripts:"), "native_scripts:no");
    assert_eq!(
        info_line(&mut c, "script_lock-acquire@4.7.0"),
        "script_lock-acquire@4.7.0:native=0,lua=1"
    );
    assert_eq!(c.call(&["CONFIG", "SET", "native-scripts", "yes"]), b"+OK\r\n");
    assert_eq!(a.try_acquire("cfg"), None);
    assert_eq!(
        info_line(&mut c, "script_lock-acquire@4.7.0"),
        "script_lock-acquire@4.7.0:native=1,lua=1"
    );
}

#[test]
fn read_only_forms_refuse_the_lock_write_with_luas_error() {
    let s = start();
    let acquire = body("4.7.0/lock-acquire.lua");
    let sha = sha(&acquire);
    let mut c = Raw::connect(s.addr());
    c.send_cmd(&[b"SCRIPT", b"LOAD", &acquire]);
    c.reply();
    assert_eq!(
        c.call(&["EVALSHA_RO", &sha, "1", "ro", "30000", "u:1"]),
        format!("-ERR Write commands are not allowed from read-only scripts. script: {sha}, on @user_script:1.\r\n").into_bytes()
    );
    // The key is free: the refusal came at HINCRBY, after EXISTS.
    assert_eq!(c.call(&["EXISTS", "ro"]), b":0\r\n");
}

#[test]
fn an_error_mid_script_keeps_the_writes_before_it() {
    let s = start();
    let acquire = body("4.7.0/lock-acquire.lua");
    let sha = sha(&acquire);
    let mut c = Raw::connect(s.addr());
    c.send_cmd(&[b"EVAL", &acquire, b"1", b"mid", b"soon", b"u:1"]);
    assert_eq!(
        c.reply(),
        format!("-ERR value is not an integer or out of range script: {sha}, on @user_script:1.\r\n").into_bytes()
    );
    // HINCRBY ran, PEXPIRE failed: the hold is there, without a lease.
    assert_eq!(c.call(&["HGET", "mid", "u:1"]), b"$1\r\n1\r\n");
    assert_eq!(c.call(&["PTTL", "mid"]), b":-1\r\n");
    assert_eq!(c.call(&["SET", "str", "x"]), b"+OK\r\n");
    assert_eq!(
        c.call(&["EVALSHA", &sha, "1", "str", "30000", "u:1"]),
        format!("-WRONGTYPE Operation against a key holding the wrong kind of value script: {sha}, on @user_script:1.\r\n").into_bytes()
    );
}

#[test]
fn eval_caches_a_native_script_for_evalsha() {
    let s = start();
    let probe = body("4.7.0/cluster-detect-probe.lua");
    let sha = sha(&probe);
    let mut c = Raw::connect(s.addr());
    c.send_cmd(&[b"EVAL", &probe, b"2", b"test1", b"test2"]);
    assert_eq!(c.reply(), b"$-1\r\n");
    assert_eq!(c.call(&["SCRIPT", "EXISTS", &sha]), b"*1\r\n:1\r\n");
    assert_eq!(c.call(&["EVALSHA", &sha, "2", "test1", "test2"]), b"$-1\r\n");
    assert_eq!(
        info_line(&mut c, "script_cluster-detect-probe@4.7.0"),
        "script_cluster-detect-probe@4.7.0:native=2,lua=0"
    );
}
