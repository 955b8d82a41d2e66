//! MULTI / EXEC / DISCARD / WATCH across connections.

mod common;
use common::*;

#[test]
fn exec_runs_queued_commands_atomically_in_order() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    assert_eq!(c.call(&["MULTI"]), b"+OK\r\n");
    assert_eq!(c.call(&["SET", "a", "1"]), b"+QUEUED\r\n");
    assert_eq!(c.call(&["INCR", "a"]), b"+QUEUED\r\n");
    assert_eq!(c.call(&["EXEC"]), b"*2\r\n+OK\r\n:2\r\n");
}

#[test]
fn a_queueing_error_aborts_exec() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    c.call(&["MULTI"]);
    assert_eq!(c.call(&["SET", "a"]), b"-ERR wrong number of arguments for 'set' command\r\n");
    c.call(&["SET", "b", "1"]);
    assert_eq!(
        c.call(&["EXEC"]),
        b"-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    assert_eq!(c.call(&["GET", "b"]), b"$-1\r\n");
}

#[test]
fn runtime_errors_inside_exec_do_not_stop_the_rest() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    c.call(&["SET", "s", "text"]);
    c.call(&["MULTI"]);
    c.call(&["INCR", "s"]);
    c.call(&["SET", "t", "1"]);
    assert_eq!(c.call(&["EXEC"]), b"*2\r\n-ERR value is not an integer or out of range\r\n+OK\r\n");
}

#[test]
fn watch_fails_exec_when_another_client_writes_the_key() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    let mut other = Raw::connect(s.addr());
    c.call(&["SET", "balance", "10"]);
    c.call(&["WATCH", "balance"]);
    other.call(&["INCRBY", "balance", "5"]);
    c.call(&["MULTI"]);
    c.call(&["SET", "balance", "0"]);
    assert_eq!(c.call(&["EXEC"]), b"*-1\r\n");
    assert_eq!(c.call(&["GET", "balance"]), b"$2\r\n15\r\n");
}

#[test]
fn watch_succeeds_when_nobody_writes() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    c.call(&["WATCH", "k"]);
    c.call(&["MULTI"]);
    c.call(&["SET", "k", "mine"]);
    assert_eq!(c.call(&["EXEC"]), b"*1\r\n+OK\r\n");
}

#[test]
fn unwatch_forgets_watched_keys() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    let mut other = Raw::connect(s.addr());
    c.call(&["WATCH", "k"]);
    c.call(&["UNWATCH"]);
    other.call(&["SET", "k", "theirs"]);
    c.call(&["MULTI"]);
    c.call(&["SET", "k", "mine"]);
    assert_eq!(c.call(&["EXEC"]), b"*1\r\n+OK\r\n");
}

#[test]
fn flushall_invalidates_watchers() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    let mut other = Raw::connect(s.addr());
    c.call(&["SET", "k", "v"]);
    c.call(&["WATCH", "k"]);
    other.call(&["FLUSHALL"]);
    c.call(&["MULTI"]);
    c.call(&["PING"]);
    assert_eq!(c.call(&["EXEC"]), b"*-1\r\n");
}

#[test]
fn discard_drops_the_queue() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    c.call(&["MULTI"]);
    c.call(&["SET", "k", "v"]);
    assert_eq!(c.call(&["DISCARD"]), b"+OK\r\n");
    assert_eq!(c.call(&["GET", "k"]), b"$-1\r\n");
    assert_eq!(c.call(&["DISCARD"]), b"-ERR DISCARD without MULTI\r\n");
}

#[test]
fn nested_multi_and_watch_inside_multi_are_errors() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    c.call(&["MULTI"]);
    assert_eq!(c.call(&["MULTI"]), b"-ERR MULTI calls can not be nested\r\n");
    assert_eq!(c.call(&["WATCH", "x"]), b"-ERR WATCH inside MULTI is not allowed\r\n");
    assert_eq!(c.call(&["EXEC"]), b"*0\r\n");
}

#[test]
fn exec_without_multi_is_an_error() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    assert_eq!(c.call(&["EXEC"]), b"-ERR EXEC without MULTI\r\n");
}

#[test]
fn redis_crate_atomic_pipeline_works() {
    let s = start();
    let mut c = conn(&s);
    let (a, b): (i64, i64) = redis::pipe()
        .atomic()
        .cmd("INCR")
        .arg("x")
        .cmd("INCR")
        .arg("x")
        .query(&mut c)
        .unwrap();
    assert_eq!((a, b), (1, 2));
}

/// Redis's `wk->expired` and `isWatchedKeyExpired`, with the test clock:
/// a key already expired when watched may be removed without failing the
/// transaction; a key live when watched that expires before EXEC fails it,
/// removed or not.
#[test]
fn watching_expired_and_expiring_keys_is_as_redis() {
    let s = start_with(|c| c.clock = keylock::Clock::manual(1_700_000_000_000));
    let mut c = conn(&s);
    q::<()>(&mut c, &["SET", "gone", "v", "PX", "10"]);
    s.clock().advance(20);
    q::<()>(&mut c, &["WATCH", "gone"]);
    // Expiry removes it now (KEYLOCK CLOCK ADVANCE reclaims what is due).
    q::<u64>(&mut c, &["KEYLOCK", "CLOCK", "ADVANCE", "1"]);
    q::<()>(&mut c, &["MULTI"]);
    q::<()>(&mut c, &["GET", "gone"]);
    let done: Option<Vec<Option<String>>> = q(&mut c, &["EXEC"]);
    assert_eq!(done, Some(vec![None]), "removing an already expired key is no change");

    q::<()>(&mut c, &["SET", "live", "v", "PX", "100"]);
    q::<()>(&mut c, &["WATCH", "live"]);
    s.clock().advance(200);
    q::<()>(&mut c, &["MULTI"]);
    q::<()>(&mut c, &["PING"]);
    let done: Option<Vec<String>> = q(&mut c, &["EXEC"]);
    assert_eq!(done, None, "a watched key that expired fails EXEC before anything removed it");
}

/// SMOVE of a member the destination already has leaves the destination
/// unchanged: a client watching it still gets its EXEC (Redis's
/// unit/type/set "SMOVE only notify dstset when the addition is
/// successful").
#[test]
fn smove_of_a_member_already_there_does_not_touch_watchers_of_the_destination() {
    let s = start();
    let mut c = conn(&s);
    let mut other = conn(&s);
    q::<i64>(&mut c, &["SADD", "src", "a", "b"]);
    q::<i64>(&mut c, &["SADD", "dst", "a"]);
    q::<()>(&mut c, &["WATCH", "dst"]);
    q::<()>(&mut c, &["MULTI"]);
    q::<()>(&mut c, &["SADD", "dst", "c"]);
    assert_eq!(q::<i64>(&mut other, &["SMOVE", "src", "dst", "a"]), 1);
    let done: Option<Vec<i64>> = q(&mut c, &["EXEC"]);
    assert_eq!(done, Some(vec![1]));
    assert_eq!(q::<i64>(&mut c, &["SCARD", "dst"]), 2);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "src"]), 1);
}

/// Redis's touchWatchedKey marks every client watching the key, the
/// writer included: a script the watching client runs itself fails its
/// transaction, whether the script runs in Lua or natively.
#[test]
fn a_script_the_watching_client_runs_itself_fails_its_exec() {
    let s = start();
    let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/redisson/3.13.6/lock-acquire.lua"))
        .expect("the Redisson lock body");
    for (body, key) in [("return redis.call('set', KEYS[1], 'x')", "plain"), (lock.as_str(), "{lock}")] {
        let mut c = Raw::connect(s.addr());
        c.call(&["WATCH", key]);
        let mut script = vec!["EVAL", body, "1", key];
        if key == "{lock}" {
            script.extend(["30000", "owner:1"]);
        }
        c.call(&script);
        c.call(&["MULTI"]);
        c.call(&["PING"]);
        assert_eq!(c.call(&["EXEC"]), b"*-1\r\n", "after the script on {key}");
    }
}
