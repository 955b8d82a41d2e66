//! Differential proof that the fair-lock native scripts are
//! indistinguishable from Lua (the harness and what it compares:
//! tests/native_harness), and that a queue too long for a native run is
//! handed to Lua.
//!
//! The states are fair-lock states: the lock hash (free, held by this or
//! another thread, malformed counts), the waiter queue and the deadline
//! sorted set, each also absent or of a wrong type, with TTLs some of
//! which the clock passes. Queues hold waiters with and without deadlines
//! (and deadlines without waiters), this thread queued or first in line,
//! deadlines around the "now" the case sends (equal to it, just before,
//! just after), sometimes in queue order and sometimes not. The numeric
//! ARGV (now, wait time, lease) are sometimes malformed, which reaches
//! Lua's arithmetic and comparison errors.

mod common;
mod native_harness;
use native_harness::*;

use std::time::Duration;

const FAIR: &str = "fl";
const QUEUE: &str = "redisson_lock_queue:{fl}";
const DEADLINES: &str = "redisson_lock_timeout:{fl}";
const FAIR_CHANNEL: &str = "redisson_lock__channel:{fl}";
const FAIR_LATCH: &str = "redisson_unlock_latch:{fl}:c41d";
const WAITER: &str = "c0ffee00-1111-4222-8333-444455556666:3";
/// Every thread a queue may hold whose wake-up channel the harness
/// subscriber also SSUBSCRIBEs to.
const THREADS: &[&str] = &[OWN, OWN_OTHER_THREAD, FOREIGN, WAITER, ""];
const START: i64 = START_MS as i64;

#[test]
fn every_waiter_channel_is_shard_subscribed() {
    for thread in THREADS {
        let channel = format!("{FAIR_CHANNEL}:{thread}");
        assert!(SHARD_CHANNELS.contains(&channel.as_str()), "{channel}");
    }
}

/// A thread id as a queue holds it or a script is given it.
fn thread() -> impl Strategy<Value = Vec<u8>> + Clone {
    prop_oneof![
        12 => pick(THREADS),
        1 => proptest::collection::vec(any::<u8>(), 1..4),
    ]
}

/// The thread the script runs for: mostly this one.
fn this_thread() -> impl Strategy<Value = Vec<u8>> + Clone {
    prop_oneof![4 => Just(s(OWN)), 3 => thread()]
}

/// A point in client time near [`START_MS`]: exact neighbours of it (so a
/// deadline can equal "now"), or anywhere within two minutes of it.
fn instant() -> impl Strategy<Value = i64> + Clone {
    prop_oneof![
        3 => proptest::sample::select(&[-5000i64, -1, 0, 1, 5000][..]).prop_map(|d| START + d),
        3 => (-120_000i64..120_000).prop_map(|d| START + d),
        1 => proptest::sample::select(&[0i64, -1, 9_007_199_254_740_993][..]),
    ]
}

/// ARGV "now": the client's clock.
fn now_arg() -> impl Strategy<Value = Vec<u8>> + Clone {
    prop_oneof![
        10 => instant().prop_map(|t| t.to_string().into_bytes()),
        1 => Just(s("1700000000000.5")),
        2 => pick(NUMERIC_TEXTS),
    ]
}

/// ARGV wait time: how long a waiter may wait for its turn.
fn wait_time() -> impl Strategy<Value = Vec<u8>> + Clone {
    prop_oneof![
        6 => pick(&["5000", "300000"]),
        3 => (0u64..400_000).prop_map(|n| n.to_string().into_bytes()),
        1 => pick(&["0.1", "1.5", "-5000", "-0"]),
        2 => pick(NUMERIC_TEXTS),
    ]
}

fn message() -> impl Strategy<Value = Vec<u8>> + Clone {
    prop_oneof![8 => Just(s("0")), 1 => pick(&["1", "", "hello world"])]
}

fn latch_px() -> impl Strategy<Value = Vec<u8>> + Clone {
    prop_oneof![8 => Just(s("8600")), 1 => pick(&["0", "-1", "abc", "1", ""])]
}

/// A waiter queue `QUEUE` and its deadlines `DEADLINES`.
fn fair_queue() -> impl Strategy<Value = (KeySpec, KeySpec)> + Clone {
    // Each queued waiter mostly has a deadline; some deadlines belong to
    // no queued waiter.
    let queued = proptest::collection::vec((thread(), proptest::option::weighted(0.9, instant())), 0..5);
    let stray = proptest::collection::vec((instant(), this_thread()), 0..3);
    let this_first = prop_oneof![4 => Just(false), 1 => Just(true)];
    let in_order = any::<bool>();
    let queue_kind = prop_oneof![14 => Just(0u8), 1 => Just(1u8)];
    let deadlines_kind = prop_oneof![14 => Just(0u8), 1 => Just(1u8)];
    (
        queued,
        stray,
        this_first,
        in_order,
        queue_kind,
        deadlines_kind,
        wrong_type(),
        ttl(),
        ttl(),
        instant(),
    )
        .prop_map(
            |(mut queued, stray, this_first, in_order, queue_kind, deadlines_kind, wrong, queue_ttl, deadlines_ttl, own)| {
                if this_first {
                    queued.insert(0, (s(OWN), Some(own)));
                }
                if in_order {
                    let mut times: Vec<i64> = queued.iter().filter_map(|(_, t)| *t).collect();
                    times.sort();
                    let mut times = times.into_iter();
                    for (_, t) in queued.iter_mut().filter(|(_, t)| t.is_some()) {
                        *t = times.next();
                    }
                }
                let queue: Vec<Vec<u8>> = queued.iter().map(|(w, _)| w.clone()).collect();
                let mut deadlines: Vec<(i64, Vec<u8>)> = queued.into_iter().filter_map(|(w, t)| t.map(|t| (t, w))).collect();
                deadlines.extend(stray);
                let queue = match queue_kind {
                    _ if queue.is_empty() => None,
                    0 => Some(Val::List(queue)),
                    _ => Some(wrong.clone()),
                };
                let deadlines = match deadlines_kind {
                    _ if deadlines.is_empty() => None,
                    0 => Some(Val::ZSet(deadlines)),
                    _ => Some(wrong),
                };
                (
                    KeySpec {
                        key: QUEUE.into(),
                        val: queue,
                        ttl_ms: queue_ttl,
                    },
                    KeySpec {
                        key: DEADLINES.into(),
                        val: deadlines,
                        ttl_ms: deadlines_ttl,
                    },
                )
            },
        )
}

fn acquire_case() -> impl Strategy<Value = Case> {
    case(
        (lock_state(FAIR), fair_queue(), lease(), this_thread(), wait_time(), now_arg()),
        |(lock, (queue, deadlines), lease, thread, wait, now)| {
            (
                vec![lock, queue, deadlines],
                vec![s(FAIR), s(QUEUE), s(DEADLINES)],
                vec![lease, thread, wait, now],
            )
        },
    )
}

#[test]
fn fairlock_acquire_4_7_0_native_equals_lua() {
    differential("4.7.0/fairlock-acquire.lua", acquire_case());
}

#[test]
fn fairlock_acquire_3_13_6_native_equals_lua() {
    differential("3.13.6/fairlock-acquire.lua", acquire_case());
}

fn try_acquire_nowait_case() -> impl Strategy<Value = Case> {
    case(
        (lock_state(FAIR), fair_queue(), lease(), this_thread(), now_arg(), wait_time()),
        |(lock, (queue, deadlines), lease, thread, now, wait)| {
            (
                vec![lock, queue, deadlines],
                vec![s(FAIR), s(QUEUE), s(DEADLINES)],
                vec![lease, thread, now, wait],
            )
        },
    )
}

#[test]
fn fairlock_tryacquire_nowait_4_7_0_native_equals_lua() {
    differential("4.7.0/fairlock-tryacquire-nowait.lua", try_acquire_nowait_case());
}

#[test]
fn fairlock_tryacquire_nowait_3_13_6_native_equals_lua() {
    differential("3.13.6/fairlock-tryacquire-nowait.lua", try_acquire_nowait_case());
}

#[test]
fn fairlock_unlock_4_7_0_native_equals_lua() {
    differential(
        "4.7.0/fairlock-unlock.lua",
        case(
            (
                (lock_state(FAIR), fair_queue(), latch_state(FAIR_LATCH)),
                message(),
                lease(),
                this_thread(),
                now_arg(),
                publish_command(),
                latch_px(),
            ),
            |((lock, (queue, deadlines), latch), msg, lease, thread, now, publish, px)| {
                (
                    vec![lock, queue, deadlines, latch],
                    vec![s(FAIR), s(QUEUE), s(DEADLINES), s(FAIR_CHANNEL), s(FAIR_LATCH)],
                    vec![msg, lease, thread, now, publish, px],
                )
            },
        ),
    );
}

#[test]
fn fairlock_unlock_3_13_6_native_equals_lua() {
    differential(
        "3.13.6/fairlock-unlock.lua",
        case(
            (lock_state(FAIR), fair_queue(), message(), lease(), this_thread(), now_arg()),
            |(lock, (queue, deadlines), msg, lease, thread, now)| {
                (
                    vec![lock, queue, deadlines],
                    vec![s(FAIR), s(QUEUE), s(DEADLINES), s(FAIR_CHANNEL)],
                    vec![msg, lease, thread, now],
                )
            },
        ),
    );
}

#[test]
fn fairlock_acquire_failed_native_equals_lua() {
    // One body for 4.7.0 and 3.13.6.
    differential(
        "4.7.0/fairlock-acquire-failed.lua",
        case((fair_queue(), this_thread(), wait_time()), |((queue, deadlines), thread, wait)| {
            (vec![queue, deadlines], vec![s(QUEUE), s(DEADLINES)], vec![thread, wait])
        }),
    );
}

// ---------------------------------------------------------------------------
// A queue too long for a native run.

fn evalsha(c: &mut Raw, path: &str, keys: &[&str], args: &[&str]) -> Vec<u8> {
    let script = std::fs::read(format!("{}/lua/redisson/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let sha = sha1_smol::Sha1::from(&script).digest().to_string();
    c.send_cmd(&[b"SCRIPT", b"LOAD", &script]);
    c.reply();
    let numkeys = keys.len().to_string();
    let mut argv: Vec<&[u8]> = vec![b"EVALSHA", sha.as_bytes(), numkeys.as_bytes()];
    argv.extend(keys.iter().map(|k| k.as_bytes()));
    argv.extend(args.iter().map(|a| a.as_bytes()));
    c.send_cmd(&argv);
    c.reply()
}

#[test]
fn a_queue_too_long_for_a_native_run_goes_to_lua() {
    let server = common::start();
    let mut c = Raw::connect(server.addr());
    c.reader.get_ref().set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    // 30,000 waiters whose deadlines have all passed: sweeping them takes
    // 120,000 commands, more than a native run may take.
    let waiters: Vec<String> = (0..30_000).map(|i| format!("gone:{i}")).collect();
    let mut rpush: Vec<&[u8]> = vec![b"RPUSH", QUEUE.as_bytes()];
    rpush.extend(waiters.iter().map(|w| w.as_bytes()));
    c.send_cmd(&rpush);
    assert_eq!(c.reply(), b":30000\r\n");
    let score = (START - 1).to_string();
    let mut zadd: Vec<&[u8]> = vec![b"ZADD", DEADLINES.as_bytes()];
    for w in &waiters {
        zadd.push(score.as_bytes());
        zadd.push(w.as_bytes());
    }
    c.send_cmd(&zadd);
    assert_eq!(c.reply(), b":30000\r\n");

    let now = START.to_string();
    let acquire = |c: &mut Raw| {
        evalsha(
            c,
            "4.7.0/fairlock-acquire.lua",
            &[FAIR, QUEUE, DEADLINES],
            &["30000", OWN, "5000", &now],
        )
    };
    assert_eq!(acquire(&mut c), b"$-1\r\n", "the sweep empties the queue and the lock is taken");
    assert_eq!(c.call(&["EXISTS", QUEUE, DEADLINES]), b":0\r\n");
    let info = String::from_utf8(c.call(&["INFO", "keylock"])).unwrap();
    assert!(info.contains("script_fairlock-acquire@4.7.0:native=0,lua=1"), "{info}");

    // A short queue runs natively: the holder re-enters.
    assert_eq!(acquire(&mut c), b"$-1\r\n");
    assert_eq!(c.call(&["HGET", FAIR, OWN]), b"$1\r\n2\r\n");
    let info = String::from_utf8(c.call(&["INFO", "keylock"])).unwrap();
    assert!(info.contains("script_fairlock-acquire@4.7.0:native=1,lua=1"), "{info}");
}
