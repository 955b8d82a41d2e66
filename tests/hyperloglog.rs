//! HyperLogLog commands over TCP, where a corpus cannot show them: random
//! element sets of thousands of elements and random damage to the stored
//! bytes, sent to keylock and to a real redis-server, which must answer
//! the same raw replies (GET included, so the bytes match); what PFCOUNT's
//! cache write, PFADD, PFMERGE and PFDEBUG do to WATCH, compared the same
//! way; and PFSELFTEST, which runs Redis's self test.
//!
//! `KEYLOCK_HLL_CASES` scales the random tests (default [`CASES`]).
//! Without redis-server on PATH the differential tests skip with a
//! message, unless KEYLOCK_REQUIRE_REDIS=1 makes that a failure.

mod common;
use common::*;

const CASES: usize = 40;

fn cases() -> usize {
    std::env::var("KEYLOCK_HLL_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(CASES)
}

/// keylock and redis-server side by side, each command sent to both.
struct Pair {
    ours: Raw,
    theirs: Raw,
    _keylock: ServerHandle,
    _redis: RealRedis,
}

impl Pair {
    fn start() -> Option<Pair> {
        let redis = real_redis()?;
        let keylock = start();
        let mut pair = Pair {
            ours: Raw::connect(keylock.addr()),
            theirs: Raw::connect(redis.addr),
            _keylock: keylock,
            _redis: redis,
        };
        pair.call(&[b"FLUSHALL"]);
        Some(pair)
    }

    /// A second connection to each server.
    fn connect(&self) -> (Raw, Raw) {
        (Raw::connect(self._keylock.addr()), Raw::connect(self._redis.addr))
    }

    /// Sends `args` to both; the raw replies must be equal. Returns it.
    fn call(&mut self, args: &[&[u8]]) -> Vec<u8> {
        self.ours.send_cmd(args);
        self.theirs.send_cmd(args);
        let (got, want) = (self.ours.reply(), self.theirs.reply());
        if got != want {
            let shown: Vec<String> = args.iter().take(6).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
            panic!(
                "{shown:?} ({} args)\n    keylock: {:?}\n    redis:   {:?}",
                args.len(),
                String::from_utf8_lossy(&got[..got.len().min(400)]),
                String::from_utf8_lossy(&want[..want.len().min(400)])
            );
        }
        got
    }

    fn cmd(&mut self, args: &[&str]) -> Vec<u8> {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.call(&args)
    }
}

/// A random element: empty, text-like or any bytes, up to 40 long.
fn element(rng: &mut fastrand::Rng) -> Vec<u8> {
    let len = rng.usize(0..40);
    match rng.u8(0..3) {
        0 => rng.u64(..).to_string().into_bytes(),
        1 => (0..len).map(|_| rng.alphanumeric() as u8).collect(),
        _ => (0..len).map(|_| rng.u8(..)).collect(),
    }
}

/// PFADD of `n` random elements to `key`.
fn add_random(pair: &mut Pair, rng: &mut fastrand::Rng, key: &[u8], n: usize) {
    let elements: Vec<Vec<u8>> = (0..n).map(|_| element(rng)).collect();
    let mut args: Vec<&[u8]> = vec![b"PFADD", key];
    args.extend(elements.iter().map(Vec::as_slice));
    pair.call(&args);
}

#[test]
fn random_adds_leave_redis_bytes_and_counts() {
    let Some(mut pair) = Pair::start() else { return };
    let mut rng = fastrand::Rng::with_seed(0x4859_4c4c);
    let keys: Vec<String> = (0..cases()).map(|i| format!("hll:{i}")).collect();
    for key in &keys {
        let max_bytes = ["3000", "1200", "300", "40"][rng.usize(0..4)];
        pair.cmd(&["CONFIG", "SET", "hll-sparse-max-bytes", max_bytes]);
        let mut total = 0;
        let target = rng.usize(1..6000);
        while total < target {
            let n = rng.usize(0..600).min(target - total + 1);
            add_random(&mut pair, &mut rng, key.as_bytes(), n);
            total += n;
            pair.cmd(&["GET", key]);
            pair.cmd(&["PFCOUNT", key]);
            pair.cmd(&["GET", key]);
        }
        pair.cmd(&["PFDEBUG", "ENCODING", key]);
    }
    pair.cmd(&["CONFIG", "SET", "hll-sparse-max-bytes", "3000"]);
    for window in keys.windows(3) {
        pair.cmd(&["PFCOUNT", &window[0], &window[1], &window[2]]);
        pair.cmd(&["PFMERGE", "merged", &window[0], &window[1]]);
        pair.cmd(&["GET", "merged"]);
        pair.cmd(&["PFMERGE", &window[2], "merged"]);
        pair.cmd(&["GET", &window[2]]);
        pair.cmd(&["PFCOUNT", &window[2]]);
    }
}

#[test]
fn random_damage_gives_redis_replies_and_leaves_redis_bytes() {
    let Some(mut pair) = Pair::start() else { return };
    let mut rng = fastrand::Rng::with_seed(0x494e_5641);
    for case in 0..cases() * 5 {
        pair.cmd(&["DEL", "h", "dest"]);
        let n = rng.usize(0..800);
        add_random(&mut pair, &mut rng, b"h", n);
        if case % 4 == 0 {
            pair.cmd(&["PFDEBUG", "TODENSE", "h"]);
        }
        let len = pair.cmd(&["STRLEN", "h"]);
        let len: usize = String::from_utf8_lossy(&len[1..len.len() - 2]).parse().unwrap();
        for _ in 0..rng.usize(1..4) {
            // Mostly after the header, where only the commands notice.
            let at = if rng.u8(0..8) == 0 {
                rng.usize(0..len + 2)
            } else {
                rng.usize(16..len + 1)
            };
            pair.call(&[b"SETRANGE", b"h", at.to_string().as_bytes(), &[rng.u8(..)]]);
        }
        pair.cmd(&["GET", "h"]);
        pair.cmd(&["PFDEBUG", "DECODE", "h"]);
        for _ in 0..rng.usize(1..5) {
            let n = rng.usize(1..30);
            add_random(&mut pair, &mut rng, b"h", n);
            pair.cmd(&["GET", "h"]);
        }
        pair.cmd(&["PFCOUNT", "h"]);
        pair.cmd(&["PFCOUNT", "h", "h"]);
        pair.cmd(&["PFMERGE", "dest", "h"]);
        pair.cmd(&["GET", "dest"]);
        pair.cmd(&["PFDEBUG", "TODENSE", "h"]);
        pair.cmd(&["GET", "h"]);
    }
}

/// Runs `setup`, has a first client WATCH `key`, a second one run
/// `between`, then the first one EXEC a transaction: the raw EXEC replies
/// (nil when the key was signalled) must match.
fn exec_after(setup: &[&[&str]], key: &str, between: &[&str]) -> Option<Vec<u8>> {
    let mut pair = Pair::start()?;
    for line in setup {
        pair.cmd(line);
    }
    let (mut our_other, mut their_other) = pair.connect();
    pair.cmd(&["WATCH", key]);
    let replies = (our_other.call(between), their_other.call(between));
    assert_eq!(replies.0, replies.1, "{between:?}");
    pair.cmd(&["MULTI"]);
    pair.cmd(&["PING"]);
    Some(pair.cmd(&["EXEC"]))
}

const ABORTED: &[u8] = b"*-1\r\n";

#[test]
fn pfcount_that_stores_its_cardinality_fails_a_watching_exec() {
    let Some(exec) = exec_after(&[&["PFADD", "h", "a", "b"]], "h", &["PFCOUNT", "h"]) else {
        return;
    };
    assert_eq!(exec, ABORTED);
}

#[test]
fn pfcount_answered_from_the_cache_leaves_watchers_alone() {
    let Some(exec) = exec_after(&[&["PFADD", "h", "a", "b"], &["PFCOUNT", "h"]], "h", &["PFCOUNT", "h"]) else {
        return;
    };
    assert_ne!(exec, ABORTED);
}

#[test]
fn pfcount_of_several_keys_leaves_watchers_alone() {
    let Some(exec) = exec_after(&[&["PFADD", "h", "a", "b"]], "h", &["PFCOUNT", "h", "other"]) else {
        return;
    };
    assert_ne!(exec, ABORTED);
}

#[test]
fn pfadd_that_changes_no_register_leaves_watchers_alone() {
    let Some(exec) = exec_after(&[&["PFADD", "h", "a", "b"]], "h", &["PFADD", "h", "a"]) else {
        return;
    };
    assert_ne!(exec, ABORTED);
}

#[test]
fn pfadd_that_changes_a_register_fails_a_watching_exec() {
    let Some(exec) = exec_after(&[&["PFADD", "h", "a", "b"]], "h", &["PFADD", "h", "c"]) else {
        return;
    };
    assert_eq!(exec, ABORTED);
}

#[test]
fn pfmerge_fails_a_watching_exec_even_when_nothing_changes() {
    let Some(exec) = exec_after(&[&["PFADD", "h", "a", "b"]], "h", &["PFMERGE", "h", "h"]) else {
        return;
    };
    assert_eq!(exec, ABORTED);
}

#[test]
fn pfdebug_todense_changes_the_value_without_failing_a_watching_exec() {
    let Some(exec) = exec_after(&[&["PFADD", "h", "a", "b"]], "h", &["PFDEBUG", "TODENSE", "h"]) else {
        return;
    };
    assert_ne!(exec, ABORTED);
}

#[test]
fn pfselftest_runs_the_self_test_and_answers_ok() {
    let s = start();
    let mut c = conn(&s);
    let reply: String = q(&mut c, &["PFSELFTEST"]);
    assert_eq!(reply, "OK");
}

#[test]
fn pfadd_of_a_damaged_value_keeps_the_edits_made_before_the_damage() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    // Registers 0..16382 as one XZERO run and no opcode for the last
    // one: found only when an element lands there.
    c.call(&["PFADD", "h"]);
    c.call(&["BITFIELD", "h", "SET", "u8", "#17", "254"]);
    // e1396 is register 0, e1674 register 16383.
    assert_eq!(
        c.call(&["PFADD", "h", "e1396", "e1674"]),
        b"-INVALIDOBJ Corrupted HLL object detected\r\n"
    );
    assert_eq!(c.call(&["PFDEBUG", "DECODE", "h"]), b"$13\r\nv:1,1 Z:16382\r\n");
}
