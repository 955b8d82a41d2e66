//! The test double's controls over the wire (KEYLOCK CLOCK, FAULT, RESET,
//! RESTART) and from Rust, as a test in any language drives them.
//!
//! The lock flows use Redisson 4.7.0's own script bodies by EVALSHA, with
//! the KEYS and ARGV Redisson sends, and each runs twice: on a server that
//! runs the scripts natively and on one started with `native-scripts no`
//! (the Lua VM), so every fault is proven on both paths.

mod common;
use common::*;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const ACQUIRE: &str = include_str!("../lua/redisson/4.7.0/lock-acquire.lua");
const UNLOCK: &str = include_str!("../lua/redisson/4.7.0/lock-unlock.lua");
const RENEW: &str = include_str!("../lua/redisson/4.7.0/lock-renew-batch.lua");

const LOCK: &str = "{order-42}";
const CHANNEL: &str = "redisson_lock__channel:{order-42}";
const LATCH: &str = "redisson_unlock_latch:{order-42}:r";

fn real_now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

#[derive(Clone, Copy, Debug)]
enum Path {
    Native,
    Lua,
}

const PATHS: [Path; 2] = [Path::Native, Path::Lua];

fn server(path: Path) -> ServerHandle {
    start_with(|c| {
        if let Path::Lua = path {
            c.directives.push(("native-scripts".into(), vec!["no".into()]));
        }
    })
}

/// A Redisson-like lock client: one connection, its holder name
/// (`<uuid>:<thread>`), the scripts by EVALSHA with SCRIPT LOAD on NOSCRIPT.
struct Locker {
    c: redis::Connection,
    holder: String,
}

impl Locker {
    fn new(s: &ServerHandle, id: &str) -> Locker {
        let mut c = conn(s);
        q::<()>(&mut c, &["CLIENT", "SETNAME", &format!("app-{id}")]);
        Locker {
            c,
            holder: format!("{id}-uuid:1"),
        }
    }

    fn evalsha(&mut self, body: &str, keys: &[&str], args: &[&str]) -> redis::RedisResult<redis::Value> {
        let sha = keylock::scripting::sha1_hex(body.as_bytes());
        let call = |c: &mut redis::Connection| {
            let mut cmd = redis::cmd("EVALSHA");
            cmd.arg(&sha).arg(keys.len()).arg(keys).arg(args);
            cmd.query::<redis::Value>(c)
        };
        match call(&mut self.c) {
            Err(e) if e.code() == Some("NOSCRIPT") => {
                q::<String>(&mut self.c, &["SCRIPT", "LOAD", body]);
                call(&mut self.c)
            }
            other => other,
        }
    }

    /// tryAcquire: None when granted, else the holder's remaining lease.
    fn acquire(&mut self, lease_ms: u64) -> Option<i64> {
        match self
            .evalsha(ACQUIRE, &[LOCK], &[&lease_ms.to_string(), &self.holder.clone()])
            .unwrap()
        {
            redis::Value::Nil => None,
            redis::Value::Int(ttl) => Some(ttl),
            other => panic!("lock-acquire answered {other:?}"),
        }
    }

    fn unlock(&mut self) -> redis::RedisResult<redis::Value> {
        let holder = self.holder.clone();
        self.evalsha(UNLOCK, &[LOCK, CHANNEL, LATCH], &["0", "30000", &holder, "PUBLISH", "8000"])
    }

    /// The watchdog's renewal of this holder's lease.
    fn renew(&mut self, lease_ms: u64) -> redis::RedisResult<redis::Value> {
        let holder = self.holder.clone();
        self.evalsha(RENEW, &[LOCK], &[&lease_ms.to_string(), &holder])
    }
}

fn info_field(c: &mut redis::Connection, field: &str) -> String {
    let info = q::<String>(c, &["INFO", "everything"]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_string))
        .unwrap_or_else(|| panic!("INFO has no {field}"))
}

#[test]
fn a_lease_runs_out_by_clock_advance_and_another_client_acquires_without_sleeping() {
    for path in PATHS {
        let s = server(path);
        let (mut a, mut b) = (Locker::new(&s, "a"), Locker::new(&s, "b"));
        let mut admin = conn(&s);
        assert_eq!(a.acquire(30_000), None, "{path:?}");
        let ttl = b.acquire(30_000).expect("held by a");
        assert!((29_000..=30_000).contains(&ttl), "{path:?}: {ttl}");
        let before = q::<u64>(&mut admin, &["KEYLOCK", "CLOCK", "GET"]);
        let after = q::<u64>(&mut admin, &["KEYLOCK", "CLOCK", "ADVANCE", "30001"]);
        assert!(after >= before + 30_001, "{path:?}: {before} -> {after}");
        // Expired before the reply: DBSIZE (which reclaims nothing) and
        // expired_keys already show it.
        assert_eq!(q::<i64>(&mut admin, &["DBSIZE"]), 0, "{path:?}");
        assert_eq!(info_field(&mut admin, "expired_keys"), "1", "{path:?}");
        assert_eq!(b.acquire(30_000), None, "{path:?}: b acquires once a's lease ran out");
    }
}

#[test]
fn the_clock_freezes_advances_and_resumes_and_every_reader_of_time_follows_it() {
    let s = start();
    let mut c = conn(&s);
    let at: u64 = 4_000_000_000_000;
    assert_eq!(q::<u64>(&mut c, &["KEYLOCK", "CLOCK", "FREEZE", &at.to_string()]), at);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(q::<u64>(&mut c, &["KEYLOCK", "CLOCK", "GET"]), at);
    assert_eq!(q::<Vec<String>>(&mut c, &["TIME"]), vec![(at / 1000).to_string(), "0".to_string()]);
    let script_time: Vec<i64> = q(&mut c, &["EVAL", "return redis.call('TIME')", "0"]);
    assert_eq!(script_time, vec![(at / 1000) as i64, 0]);
    q::<()>(&mut c, &["SET", "k", "v", "EX", "100"]);
    assert_eq!(q::<i64>(&mut c, &["PTTL", "k"]), 100_000);
    assert_eq!(q::<u64>(&mut c, &["KEYLOCK", "CLOCK", "ADVANCE", "40000"]), at + 40_000);
    assert_eq!(q::<i64>(&mut c, &["PTTL", "k"]), 60_000);
    assert_eq!(q::<i64>(&mut c, &["EXPIRETIME", "k"]), (at / 1000 + 100) as i64);
    // Never backwards.
    let err = q_err(&mut c, &["KEYLOCK", "CLOCK", "FREEZE", &at.to_string()]);
    assert!(err.starts_with("ERR time never goes backwards"), "{err}");
    assert_eq!(q::<u64>(&mut c, &["KEYLOCK", "CLOCK", "GET"]), at + 40_000);
    let err = q_err(&mut c, &["KEYLOCK", "CLOCK", "ADVANCE", "-1"]);
    assert!(err.starts_with("ERR time never goes backwards"), "{err}");
    assert_eq!(
        q_err(&mut c, &["KEYLOCK", "CLOCK", "ADVANCE", "soon"]),
        "ERR value is not an integer or out of range"
    );
    // Flowing again from the virtual instant.
    let resumed = q::<u64>(&mut c, &["KEYLOCK", "CLOCK", "RESUME"]);
    assert!(resumed >= at + 40_000);
    std::thread::sleep(Duration::from_millis(30));
    let later = q::<u64>(&mut c, &["KEYLOCK", "CLOCK", "GET"]);
    assert!(later >= resumed + 20 && later < at + 60_000, "{resumed} -> {later}");
    assert_eq!(
        q_err(&mut c, &["KEYLOCK", "CLOCK", "STOP"]),
        "ERR unknown subcommand or wrong number of arguments for 'STOP'. Try KEYLOCK CLOCK HELP."
    );
}

#[test]
fn a_server_started_with_a_frozen_clock_stands_still_until_moved() {
    let s = start_with(|c| c.directives.push(("clock".into(), vec!["frozen".into()])));
    let mut c = conn(&s);
    let first = q::<u64>(&mut c, &["KEYLOCK", "CLOCK", "GET"]);
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(q::<u64>(&mut c, &["KEYLOCK", "CLOCK", "GET"]), first);
    assert_eq!(q::<Vec<String>>(&mut c, &["CONFIG", "GET", "clock"]), vec!["clock", "frozen"]);
    // The Rust handle moves the same clock. Its advance is time passing:
    // the key is gone for every command, reclaimed when touched;
    // `advance` (KEYLOCK CLOCK ADVANCE) reclaims at once.
    q::<()>(&mut c, &["SET", "k", "v", "PX", "500"]);
    q::<()>(&mut c, &["SET", "j", "v", "PX", "1500"]);
    s.clock().advance(500);
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "k"]), None);
    assert_eq!(q::<i64>(&mut c, &["PTTL", "j"]), 1000);
    assert_eq!(s.advance(1000).unwrap(), first + 1500);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0);
}

/// Waits for a pub/sub message on `sub` for at most `within`.
fn message_within(sub: &mut redis::PubSub, within: Duration) -> Option<String> {
    sub.set_read_timeout(Some(within)).unwrap();
    sub.get_message().ok().map(|m| m.get_payload::<String>().unwrap())
}

#[test]
fn a_waiter_whose_unlock_message_was_dropped_acquires_only_after_the_lease_and_one_with_it_at_once() {
    for path in PATHS {
        for dropped in [true, false] {
            let s = server(path);
            let (mut a, mut b) = (Locker::new(&s, "a"), Locker::new(&s, "b"));
            let mut admin = conn(&s);
            let mut waiter = redis::Client::open(s.url()).unwrap().get_connection().unwrap();
            let mut sub = waiter.as_pubsub();
            sub.subscribe(CHANNEL).unwrap();
            let lease = 600;
            assert_eq!(a.acquire(lease), None);
            let ttl = b.acquire(lease).expect("a holds it") as u64;
            if dropped {
                let id: u64 = q(
                    &mut admin,
                    &["KEYLOCK", "FAULT", "ADD", "DROP-PUBLISH", "redisson_lock__channel:*", "COUNT", "1"],
                );
                assert_eq!(id, 1);
            }
            let started = Instant::now();
            assert_eq!(a.unlock().unwrap(), redis::Value::Int(1), "{path:?}");
            match message_within(&mut sub, Duration::from_millis(ttl + 200)) {
                Some(payload) => {
                    assert!(!dropped, "{path:?}: the dropped message arrived");
                    assert_eq!(payload, "0");
                    assert_eq!(b.acquire(lease), None, "{path:?}: woken, b acquires at once");
                    assert!(started.elapsed() < Duration::from_millis(ttl), "{path:?}");
                }
                None => {
                    assert!(dropped, "{path:?}: the unlock message never came");
                    // Redisson's waiter retries once the lease it was told runs out.
                    assert!(started.elapsed() >= Duration::from_millis(ttl));
                    assert_eq!(b.acquire(lease), None, "{path:?}");
                    let list: Vec<redis::Value> = q(&mut admin, &["KEYLOCK", "FAULT", "LIST"]);
                    assert!(list.is_empty(), "{path:?}: a COUNT 1 rule goes once fired");
                }
            }
        }
    }
}

#[test]
fn an_error_fault_on_the_watchdogs_renewal_lets_the_lock_expire() {
    for path in PATHS {
        let s = server(path);
        let (mut a, mut b) = (Locker::new(&s, "a"), Locker::new(&s, "b"));
        let mut admin = conn(&s);
        assert_eq!(a.acquire(30_000), None);
        assert_eq!(a.renew(30_000).unwrap(), redis::Value::Array(vec![redis::Value::Int(1)]));
        let _: u64 = q(
            &mut admin,
            &[
                "KEYLOCK",
                "FAULT",
                "ADD",
                "ERROR",
                "script:lock-renew*",
                "LOADING keylock is loading the dataset in memory",
            ],
        );
        q::<u64>(&mut admin, &["KEYLOCK", "CLOCK", "ADVANCE", "20000"]);
        let err = a.renew(30_000).unwrap_err();
        assert_eq!(err.code(), Some("LOADING"), "{path:?}: {err}");
        // Other scripts are not matched: b's acquire runs and is told the TTL.
        let ttl = b.acquire(30_000).expect("still held");
        assert!(
            (9_000..=10_000).contains(&ttl),
            "{path:?}: the failed renewal did not extend it: {ttl}"
        );
        q::<u64>(&mut admin, &["KEYLOCK", "CLOCK", "ADVANCE", "10001"]);
        assert_eq!(b.acquire(30_000), None, "{path:?}");
        let list: Vec<std::collections::HashMap<String, redis::Value>> = q(&mut admin, &["KEYLOCK", "FAULT", "LIST"]);
        assert_eq!(list.len(), 1);
        assert_eq!(list[0]["fired"], redis::Value::Int(1));
        assert_eq!(list[0]["kind"], redis::Value::BulkString(b"error".to_vec()));
    }
}

#[test]
fn disconnect_after_the_unlock_leaves_the_lock_released_while_the_client_saw_only_an_error() {
    for path in PATHS {
        let s = server(path);
        let mut a = Locker::new(&s, "a");
        let mut admin = conn(&s);
        assert_eq!(a.acquire(30_000), None);
        // Loaded already, as after an earlier unlock: the EVALSHA the fault
        // catches is the one that runs the script.
        q::<String>(&mut admin, &["SCRIPT", "LOAD", UNLOCK]);
        // Only a's commands, only EVALSHA, only once.
        let _: u64 = q(
            &mut admin,
            &[
                "KEYLOCK",
                "FAULT",
                "ADD",
                "DISCONNECT",
                "evalsha",
                "AFTER",
                "CLIENT",
                "app-a",
                "COUNT",
                "1",
            ],
        );
        assert!(a.unlock().is_err(), "{path:?}: the client never saw the reply");
        assert_eq!(q::<i64>(&mut admin, &["EXISTS", LOCK]), 0, "{path:?}: the unlock ran");
        assert_eq!(q::<i64>(&mut admin, &["EXISTS", LATCH]), 1);
    }
}

#[test]
fn disconnect_before_drops_the_connection_without_running_the_command() {
    let s = start();
    let mut admin = conn(&s);
    let _: u64 = q(&mut admin, &["KEYLOCK", "FAULT", "ADD", "DISCONNECT", "set", "BEFORE"]);
    let mut raw = Raw::connect(s.addr());
    raw.send(&encode(&[b"PING"]));
    raw.send(&encode(&[b"SET", b"k", b"v"]));
    raw.send(&encode(&[b"PING"]));
    assert_eq!(raw.reply(), b"+PONG\r\n", "what came before is still answered");
    assert!(raw.is_closed());
    assert_eq!(q::<i64>(&mut admin, &["EXISTS", "k"]), 0);
    // The admin's own SET is caught too: the rule has no COUNT or CLIENT.
    let mut cmd = redis::cmd("SET");
    cmd.arg("k").arg("v");
    assert!(cmd.query::<()>(&mut admin).is_err());
}

#[test]
fn a_delayed_reply_is_held_back_while_its_command_has_run_and_other_clients_are_served() {
    let s = start();
    let mut admin = conn(&s);
    let _: u64 = q(&mut admin, &["KEYLOCK", "FAULT", "ADD", "DELAY", "set", "700", "CLIENT", "slow"]);
    let mut raw = Raw::connect(s.addr());
    assert_eq!(raw.call(&["CLIENT", "SETNAME", "slow"]), b"+OK\r\n");
    let sent = Instant::now();
    raw.send(&encode(&[b"PING", b"before"]));
    raw.send(&encode(&[b"SET", b"k", b"v"]));
    raw.send(&encode(&[b"PING", b"after"]));
    assert_eq!(raw.reply(), b"$6\r\nbefore\r\n");
    assert!(
        sent.elapsed() < Duration::from_millis(600),
        "the reply before the held one is not held"
    );
    // The SET ran at once: another client sees it while its reply waits.
    assert_eq!(q::<String>(&mut admin, &["GET", "k"]), "v");
    assert!(sent.elapsed() < Duration::from_millis(600), "other clients are not delayed");
    assert_eq!(raw.reply(), b"+OK\r\n");
    assert!(sent.elapsed() >= Duration::from_millis(700), "{:?}", sent.elapsed());
    assert_eq!(raw.reply(), b"$5\r\nafter\r\n");
    // The admin is not named "slow": its SET is answered at once.
    let t = Instant::now();
    q::<()>(&mut admin, &["SET", "k2", "v"]);
    assert!(t.elapsed() < Duration::from_millis(600));
}

#[test]
fn delay_and_disconnect_before_catch_lock_scripts_on_both_paths() {
    for path in PATHS {
        let s = server(path);
        let mut admin = conn(&s);
        let sha = q::<String>(&mut admin, &["SCRIPT", "LOAD", ACQUIRE]);
        let acquire =
            |raw: &mut Raw, holder: &str| raw.send_cmd(&[b"EVALSHA", sha.as_bytes(), b"1", LOCK.as_bytes(), b"30000", holder.as_bytes()]);

        // DELAY: the lock is granted at once, the grant arrives late.
        let _: u64 = q(
            &mut admin,
            &["KEYLOCK", "FAULT", "ADD", "DELAY", "script:lock-acquire@*", "500", "COUNT", "1"],
        );
        let mut a = Raw::connect(s.addr());
        let sent = Instant::now();
        acquire(&mut a, "a-uuid:1");
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(
            q::<Vec<String>>(&mut admin, &["HKEYS", LOCK]),
            vec!["a-uuid:1"],
            "{path:?}: granted before the reply"
        );
        assert_eq!(a.reply(), b"$-1\r\n", "{path:?}");
        assert!(sent.elapsed() >= Duration::from_millis(500), "{path:?}: {:?}", sent.elapsed());

        // DISCONNECT BEFORE: the script never runs.
        let _: u64 = q(
            &mut admin,
            &[
                "KEYLOCK",
                "FAULT",
                "ADD",
                "DISCONNECT",
                "script:lock-acquire*",
                "BEFORE",
                "COUNT",
                "1",
            ],
        );
        let mut b = Raw::connect(s.addr());
        acquire(&mut b, "b-uuid:1");
        assert!(b.is_closed(), "{path:?}");
        let mut c = Raw::connect(s.addr());
        acquire(&mut c, "a-uuid:1");
        assert_eq!(c.reply(), b"$-1\r\n", "{path:?}: a's reentry, after b's attempt never ran");
        assert_eq!(q::<i64>(&mut admin, &["HGET", LOCK, "a-uuid:1"]), 2, "{path:?}");
    }
}

#[test]
fn error_faults_refuse_commands_by_name_count_and_client_and_can_be_listed_and_removed() {
    let s = start();
    let mut c = conn(&s);
    let id: u64 = q(
        &mut c,
        &[
            "KEYLOCK",
            "FAULT",
            "ADD",
            "ERROR",
            "get",
            "READONLY You can't write against a read only replica.",
            "COUNT",
            "2",
        ],
    );
    let other: u64 = q(&mut c, &["KEYLOCK", "FAULT", "ADD", "ERROR", "hset", "ERR injected"]);
    assert_eq!(other, id + 1);
    assert_eq!(
        q_err(&mut c, &["GET", "k"]),
        "READONLY You can't write against a read only replica."
    );
    assert_eq!(
        q_err(&mut c, &["GET", "k"]),
        "READONLY You can't write against a read only replica."
    );
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "k"]), None, "COUNT 2 is spent");
    assert_eq!(q_err(&mut c, &["HSET", "h", "f", "v"]), "ERR injected");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "h"]), 0, "refused without running");
    assert!(info_field(&mut c, "errorstat_READONLY").starts_with("count=2"));
    assert_eq!(q::<i64>(&mut c, &["KEYLOCK", "FAULT", "DEL", &other.to_string()]), 1);
    assert_eq!(q::<i64>(&mut c, &["KEYLOCK", "FAULT", "DEL", &other.to_string()]), 0);
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "f", "v"]), 1);
    // A fault inside MULTI refuses the queued command and aborts EXEC.
    let _: u64 = q(&mut c, &["KEYLOCK", "FAULT", "ADD", "ERROR", "incr", "ERR injected"]);
    let mut raw = Raw::connect(s.addr());
    assert_eq!(raw.call(&["MULTI"]), b"+OK\r\n");
    assert_eq!(raw.call(&["INCR", "n"]), b"-ERR injected\r\n");
    assert_eq!(
        raw.call(&["EXEC"]),
        b"-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    assert_eq!(q::<i64>(&mut c, &["KEYLOCK", "FAULT", "CLEAR"]), 1);
    assert_eq!(q::<i64>(&mut c, &["INCR", "n"]), 1);
    let err = q_err(&mut c, &["KEYLOCK", "FAULT", "ADD", "SLOW", "get"]);
    assert!(err.starts_with("ERR unknown fault kind 'SLOW'"), "{err}");
    assert_eq!(
        q_err(&mut c, &["KEYLOCK", "FAULT", "ADD", "ERROR", "get", "ERR x", "COUNT", "0"]),
        "ERR COUNT must be a positive integer"
    );
    assert_eq!(
        q_err(&mut c, &["KEYLOCK", "FAULT", "ADD", "ERROR", "get", "ERR x", "SOON"]),
        "ERR syntax error"
    );
}

#[test]
fn reset_leaves_nothing_behind_but_keeps_connections_and_subscriptions() {
    let s = start();
    let mut c = conn(&s);
    let mut sub_conn = conn(&s);
    let mut sub = sub_conn.as_pubsub();
    sub.subscribe("events").unwrap();
    q::<()>(&mut c, &["SET", "a", "1"]);
    q::<()>(&mut c, &["SELECT", "3"]);
    q::<()>(&mut c, &["SET", "b", "2", "EX", "100"]);
    let sha: String = q(&mut c, &["SCRIPT", "LOAD", "return 1"]);
    let _: u64 = q(&mut c, &["KEYLOCK", "FAULT", "ADD", "ERROR", "get", "ERR injected"]);
    q::<u64>(&mut c, &["KEYLOCK", "CLOCK", "ADVANCE", "86400000"]);
    assert_eq!(q::<String>(&mut c, &["KEYLOCK", "RESET"]), "OK");
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0, "the selected database (3) is empty");
    q::<()>(&mut c, &["SELECT", "0"]);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0);
    assert_eq!(q::<Vec<i64>>(&mut c, &["SCRIPT", "EXISTS", &sha]), vec![0]);
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "a"]), None, "the fault is gone");
    let list: Vec<redis::Value> = q(&mut c, &["KEYLOCK", "FAULT", "LIST"]);
    assert!(list.is_empty());
    let now = q::<u64>(&mut c, &["KEYLOCK", "CLOCK", "GET"]);
    assert!(now.abs_diff(real_now_ms()) < 5_000, "the clock is real time again");
    // RESET and the seven commands after it; INFO counts once it ran.
    assert_eq!(info_field(&mut c, "total_commands_processed"), "8", "stats were reset by the RESET");
    assert_eq!(q::<i64>(&mut c, &["PUBLISH", "events", "still-there"]), 1);
    assert_eq!(message_within(&mut sub, Duration::from_secs(5)).as_deref(), Some("still-there"));
}

#[test]
fn restart_drops_every_connection_and_every_key_and_the_server_keeps_listening() {
    let s = start();
    let mut c = conn(&s);
    let mut other = Raw::connect(s.addr());
    assert_eq!(
        other.call(&["SUBSCRIBE", "events"]),
        b"*3\r\n$9\r\nsubscribe\r\n$6\r\nevents\r\n:1\r\n"
    );
    q::<()>(&mut c, &["SET", "a", "1"]);
    let run_id = info_field(&mut c, "run_id");
    let _: u64 = q(&mut c, &["KEYLOCK", "FAULT", "ADD", "ERROR", "hget", "ERR injected"]);
    let mut raw = Raw::connect(s.addr());
    assert_eq!(raw.call(&["KEYLOCK", "RESTART"]), b"+OK\r\n");
    assert!(raw.is_closed());
    assert!(other.is_closed());
    let mut fresh = conn(&s);
    assert_eq!(q::<i64>(&mut fresh, &["DBSIZE"]), 0);
    assert_ne!(info_field(&mut fresh, "run_id"), run_id);
    assert_eq!(info_field(&mut fresh, "connected_clients"), "1");
    assert_eq!(
        q_err(&mut fresh, &["HGET", "h", "f"]),
        "ERR injected",
        "faults are the test's and stay"
    );
}

#[test]
fn restart_comes_back_with_the_last_snapshot_and_loses_what_came_after() {
    let s = start();
    let mut c = conn(&s);
    q::<()>(&mut c, &["SET", "saved", "1"]);
    q::<()>(&mut c, &["SAVE"]);
    q::<()>(&mut c, &["SET", "unsaved", "1"]);
    let mut raw = Raw::connect(s.addr());
    assert_eq!(raw.call(&["KEYLOCK", "RESTART"]), b"+OK\r\n");
    let mut fresh = conn(&s);
    assert_eq!(q::<Vec<String>>(&mut fresh, &["KEYS", "*"]), ["saved"]);
}

#[test]
fn restart_with_the_append_only_file_comes_back_with_every_acknowledged_write() {
    let s = start_with(|c| c.directives.push(("appendonly".into(), vec!["yes".into()])));
    let mut c = conn(&s);
    q::<()>(&mut c, &["SET", "before-save", "1"]);
    q::<()>(&mut c, &["SAVE"]);
    q::<()>(&mut c, &["SET", "after-save", "1"]);
    q::<()>(
        &mut c,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=lib\nredis.register_function('f', function() return 7 end)",
        ],
    );
    let mut raw = Raw::connect(s.addr());
    assert_eq!(raw.call(&["KEYLOCK", "RESTART"]), b"+OK\r\n");
    let mut fresh = conn(&s);
    let mut keys: Vec<String> = q(&mut fresh, &["KEYS", "*"]);
    keys.sort();
    assert_eq!(keys, ["after-save", "before-save"]);
    assert_eq!(q::<i64>(&mut fresh, &["FCALL", "f", "0"]), 7);
}

#[test]
fn the_controls_obey_enable_test_commands() {
    let refused = start_with(|c| c.directives.push(("enable-test-commands".into(), vec!["no".into()])));
    let mut c = conn(&refused);
    for control in [
        &["KEYLOCK", "CLOCK", "GET"][..],
        &["KEYLOCK", "FAULT", "LIST"],
        &["KEYLOCK", "RESET"],
        &["KEYLOCK", "RESTART"],
    ] {
        let err = q_err(&mut c, control);
        let name = format!("{} {}", control[0], control[1]);
        assert_eq!(
            err,
            format!(
                "ERR {name} command not allowed. If the enable-test-commands option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server."
            )
        );
    }
    assert_eq!(
        q::<Vec<String>>(&mut c, &["CONFIG", "GET", "enable-test-commands"]),
        vec!["enable-test-commands", "no"]
    );
    assert!(q_err(&mut c, &["CONFIG", "SET", "enable-test-commands", "yes"]).contains("can't set immutable config"));
    // Introspection is not a test control.
    let locks: Vec<redis::Value> = q(&mut c, &["KEYLOCK", "LOCKS"]);
    assert!(locks.is_empty());
    assert!(refused.reset().is_err(), "the Rust API goes through the same gate");

    // The default, local: loopback clients may.
    let local = start();
    let mut c = conn(&local);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["CONFIG", "GET", "enable-test-commands"]),
        vec!["enable-test-commands", "local"]
    );
    q::<u64>(&mut c, &["KEYLOCK", "CLOCK", "GET"]);
}

#[test]
fn the_rust_api_shares_the_wire_commands() {
    let s = start();
    let mut c = conn(&s);
    let id = s.faults().add(&["ERROR", "get", "LOADING later"]).unwrap();
    assert_eq!(q_err(&mut c, &["GET", "k"]), "LOADING later");
    assert!(s.faults().remove(id).unwrap());
    assert!(!s.faults().remove(id).unwrap());
    s.faults().add(&["ERROR", "get", "ERR x"]).unwrap();
    assert_eq!(s.faults().clear().unwrap(), 1);
    assert!(s.faults().add(&["NOPE"]).unwrap_err().to_string().contains("unknown fault kind"));
    q::<()>(&mut c, &["SET", "k", "v"]);
    s.clock().freeze(None).unwrap();
    s.reset().unwrap();
    assert!(!s.clock().is_frozen());
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0);
    s.restart().unwrap();
    let mut fresh = conn(&s);
    assert_eq!(q::<String>(&mut fresh, &["PING"]), "PONG");
}

#[test]
fn keylock_help_lists_the_controls() {
    let s = start();
    let mut c = conn(&s);
    let help: Vec<String> = q(&mut c, &["KEYLOCK", "HELP"]);
    for line in [
        "CLOCK ADVANCE <ms>",
        "FAULT ADD DELAY <command-glob> <ms> [COUNT <n>] [CLIENT <name-glob>]",
        "RESET",
        "RESTART",
    ] {
        assert!(help.iter().any(|l| l == line), "{line} missing from {help:#?}");
    }
    let docs: redis::Value = q(&mut c, &["COMMAND", "DOCS", "keylock"]);
    let text = format!("{docs:?}");
    assert!(text.contains("keylock|clock") && text.contains("keylock|fault") && text.contains("keylock|restart"));
    let info: redis::Value = q(&mut c, &["COMMAND", "INFO", "keylock|clock"]);
    assert!(format!("{info:?}").contains("protected"));
}
