//! Differential proof that the semaphore, permit-expirable semaphore and
//! count-down latch native scripts are indistinguishable from Lua (the
//! harness and what it compares: tests/native_harness), plus the runs
//! too large for a native run, which go to Lua.

mod common;
mod native_harness;
use native_harness::*;

use proptest::strategy::ValueTree;

const SEM: &str = "sem";
const SEM_CHANNEL: &str = "redisson_sc:{sem}";
const SEM_TIMEOUTS: &str = "redisson__timeout__set:{sem}";
const CDL: &str = "cdl";
const CDL_CHANNEL: &str = "redisson_countdownlatch__channel__{cdl}";
/// The score Redisson gives a permit without a lease.
const NO_LEASE: &str = "922337203685477";

#[test]
fn the_channels_are_shard_subscribed() {
    for channel in [SEM_CHANNEL, CDL_CHANNEL] {
        assert!(SHARD_CHANNELS.contains(&channel), "{channel}");
    }
}

// ---------------------------------------------------------------------------
// States and arguments.

/// A stored count: zero, small, negative, huge, and what Lua's `tonumber`
/// and Redis's integer parsing read differently.
fn count_text() -> impl Strategy<Value = Vec<u8>> + Clone {
    prop_oneof![
        3 => Just(s("0")),
        3 => Just(s("1")),
        8 => (1i64..6).prop_map(|n| n.to_string().into_bytes()),
        2 => (-5i64..0).prop_map(|n| n.to_string().into_bytes()),
        3 => pick(NUMERIC_TEXTS),
        1 => pick(&["9223372036854775807", "-9223372036854775808", "1.5", "2.0", "0x3", "2 "]),
    ]
}

/// A counter key (semaphore or latch): absent, a count, or another type.
fn counter_state(key: &'static str) -> impl Strategy<Value = KeySpec> + Clone {
    let val = prop_oneof![
        4 => Just(None),
        8 => count_text().prop_map(|v| Some(Val::Str(v))),
        2 => wrong_type().prop_map(Some),
        1 => Just(Some(Val::Hash(vec![(s("f"), s("1"))]))),
    ];
    (val, ttl()).prop_map(move |(val, ttl_ms)| KeySpec {
        key: key.into(),
        val,
        ttl_ms,
    })
}

/// A key the script only names (a channel): mostly absent, sometimes a
/// value of any type.
fn bystander(key: &'static str) -> impl Strategy<Value = KeySpec> + Clone {
    let val = prop_oneof![8 => Just(None), 1 => wrong_type().prop_map(Some)];
    (val, ttl()).prop_map(move |(val, ttl_ms)| KeySpec {
        key: key.into(),
        val,
        ttl_ms,
    })
}

/// A permit count or latch count argument.
fn permits() -> impl Strategy<Value = Vec<u8>> + Clone {
    prop_oneof![
        8 => Just(s("1")),
        4 => (2i64..6).prop_map(|n| n.to_string().into_bytes()),
        2 => pick(&["0", "-1", "-3"]),
        2 => pick(NUMERIC_TEXTS),
        1 => pick(&["9223372036854775807", "-9223372036854775808", "1.0", "2.5"]),
    ]
}

fn message() -> impl Strategy<Value = Vec<u8>> + Clone {
    prop_oneof![8 => Just(s("0")), 2 => pick(&["1", "", "7", "hello world"])]
}

/// "Now" as the client sends it, in seconds around the harness's start,
/// or text ZRANGEBYSCORE / `tonumber` read in their own ways.
fn now() -> impl Strategy<Value = Vec<u8>> + Clone {
    prop_oneof![
        12 => (0u64..=20).prop_map(|k| (START_MS + k * 1000).to_string().into_bytes()),
        1 => pick(&["abc", "", "(1700000005000", "+inf", "-inf", "inf", "nan", "1e3", "0", "-1", " 1700000005000"]),
    ]
}

/// A permit's expiry score, on the same second grid as [`now`] so that
/// ties with it come up; or no lease, zero, negative.
fn expiry_score() -> impl Strategy<Value = i64> + Clone {
    prop_oneof![
        12 => (-5i64..=25).prop_map(|j| START_MS as i64 + j * 1000),
        2 => Just(922_337_203_685_477i64),
        1 => proptest::sample::select(vec![0i64, -1000, 3]),
    ]
}

/// The expiry a new permit gets: a score, no lease, or what ZADD refuses.
fn new_expiry() -> impl Strategy<Value = Vec<u8>> + Clone {
    prop_oneof![
        10 => expiry_score().prop_map(|n| n.to_string().into_bytes()),
        1 => pick(&["abc", "", "1.5", "inf", "nan", "+inf", "1e400"]),
    ]
}

/// What the script compares the first permit's score with.
fn no_lease() -> impl Strategy<Value = Vec<u8>> + Clone {
    prop_oneof![10 => Just(s(NO_LEASE)), 1 => pick(&["922337203685477.0", "", "1700000005000"])]
}

/// Permit ids: 16 raw bytes (4.7.0) or 32 hex characters (3.13.6), from a
/// small pool so that held permits and released ids meet.
fn permit_id(binary: bool) -> BoxedStrategy<Vec<u8>> {
    if binary {
        let pool = [[0x00u8; 16], [0xffu8; 16], *b"\x9a\x01 \r\n\"'\\\x7f\x80pq:{}*"];
        prop_oneof![
            8 => proptest::sample::select(pool.to_vec()).prop_map(|id| id.to_vec()),
            2 => proptest::collection::vec(any::<u8>(), 16),
            1 => pick(&["", "x"]),
        ]
        .boxed()
    } else {
        let pool: &'static [&'static str] = &[
            "0f1e2d3c4b5a69788796a5b4c3d2e1f0",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "00000000000000000000000000000001",
        ];
        prop_oneof![
            8 => pick(pool),
            2 => "[0-9a-f]{32}".prop_map(|h| h.into_bytes()),
            1 => pick(&["", "x"]),
        ]
        .boxed()
    }
}

/// The timeout set: absent, permits with expired and live scores, or
/// another type; its own TTL.
fn timeouts_state(binary: bool) -> impl Strategy<Value = KeySpec> + Clone {
    let permits = proptest::collection::vec((expiry_score(), permit_id(binary)), 1..6);
    let val = prop_oneof![
        3 => Just(None),
        8 => permits.prop_map(|p| Some(Val::ZSet(p))),
        1 => wrong_type().prop_map(Some),
        1 => Just(Some(Val::Str(s("1700000005000")))),
    ];
    (val, ttl()).prop_map(move |(val, ttl_ms)| KeySpec {
        key: SEM_TIMEOUTS.into(),
        val,
        ttl_ms,
    })
}

// ---------------------------------------------------------------------------
// The semaphore family.

#[test]
fn semaphore_tryacquire_native_equals_lua() {
    differential(
        "4.7.0/semaphore-tryacquire.lua",
        case((counter_state(SEM), permits()), |(sem, permits)| {
            (vec![sem], vec![s(SEM)], vec![permits])
        }),
    );
}

#[test]
fn semaphore_release_4_7_0_native_equals_lua() {
    differential(
        "4.7.0/semaphore-release.lua",
        case(
            (counter_state(SEM), bystander(SEM_CHANNEL), permits(), publish_command()),
            |(sem, channel, permits, publish)| (vec![sem, channel], vec![s(SEM), s(SEM_CHANNEL)], vec![permits, publish]),
        ),
    );
}

#[test]
fn semaphore_release_3_13_6_native_equals_lua() {
    differential(
        "3.13.6/semaphore-release.lua",
        case(
            (counter_state(SEM), bystander(SEM_CHANNEL), permits()),
            |(sem, channel, permits)| (vec![sem, channel], vec![s(SEM), s(SEM_CHANNEL)], vec![permits]),
        ),
    );
}

#[test]
fn semaphore_trysetpermits_4_7_0_native_equals_lua() {
    differential(
        "4.7.0/semaphore-trysetpermits.lua",
        case(
            (counter_state(SEM), bystander(SEM_CHANNEL), permits(), publish_command()),
            |(sem, channel, permits, publish)| (vec![sem, channel], vec![s(SEM), s(SEM_CHANNEL)], vec![permits, publish]),
        ),
    );
}

#[test]
fn semaphore_trysetpermits_3_13_6_native_equals_lua() {
    differential(
        "3.13.6/semaphore-trysetpermits.lua",
        case(
            (counter_state(SEM), bystander(SEM_CHANNEL), permits()),
            |(sem, channel, permits)| (vec![sem, channel], vec![s(SEM), s(SEM_CHANNEL)], vec![permits]),
        ),
    );
}

// ---------------------------------------------------------------------------
// The permit-expirable semaphore family.

fn pe_keys() -> Vec<Vec<u8>> {
    vec![s(SEM), s(SEM_TIMEOUTS), s(SEM_CHANNEL)]
}

#[test]
fn pesemaphore_available_permits_4_7_0_native_equals_lua() {
    differential(
        "4.7.0/pesemaphore-available-permits.lua",
        case(
            (
                counter_state(SEM),
                timeouts_state(true),
                bystander(SEM_CHANNEL),
                now(),
                publish_command(),
            ),
            |(sem, timeouts, channel, now, publish)| (vec![sem, timeouts, channel], pe_keys(), vec![now, publish]),
        ),
    );
}

#[test]
fn pesemaphore_available_permits_3_13_6_native_equals_lua() {
    differential(
        "3.13.6/pesemaphore-available-permits.lua",
        case(
            (counter_state(SEM), timeouts_state(false), bystander(SEM_CHANNEL), now()),
            |(sem, timeouts, channel, now)| (vec![sem, timeouts, channel], pe_keys(), vec![now]),
        ),
    );
}

#[test]
fn pesemaphore_release_4_7_0_native_equals_lua() {
    differential(
        "4.7.0/pesemaphore-release.lua",
        case(
            (
                counter_state(SEM),
                timeouts_state(true),
                bystander(SEM_CHANNEL),
                (permit_id(true), permits(), now(), publish_command()),
            ),
            |(sem, timeouts, channel, (id, permits, now, publish))| {
                (
                    vec![sem, timeouts, channel],
                    vec![s(SEM), s(SEM_CHANNEL), s(SEM_TIMEOUTS)],
                    vec![id, permits, now, publish],
                )
            },
        ),
    );
}

#[test]
fn pesemaphore_release_3_13_6_native_equals_lua() {
    differential(
        "3.13.6/pesemaphore-release.lua",
        case(
            (
                counter_state(SEM),
                timeouts_state(false),
                bystander(SEM_CHANNEL),
                permit_id(false),
                permits(),
            ),
            |(sem, timeouts, channel, id, permits)| {
                (
                    vec![sem, timeouts, channel],
                    vec![s(SEM), s(SEM_CHANNEL), s(SEM_TIMEOUTS)],
                    vec![id, permits],
                )
            },
        ),
    );
}

#[test]
fn pesemaphore_tryacquire_4_7_0_native_equals_lua() {
    let ids = proptest::collection::vec(permit_id(true), 0..4);
    differential(
        "4.7.0/pesemaphore-tryacquire.lua",
        case(
            (
                counter_state(SEM),
                timeouts_state(true),
                bystander(SEM_CHANNEL),
                (permits(), new_expiry(), now(), no_lease(), publish_command(), ids),
            ),
            |(sem, timeouts, channel, (permits, expiry, now, no_lease, publish, ids))| {
                let args = [vec![permits, expiry, now, no_lease, publish], ids].concat();
                (vec![sem, timeouts, channel], pe_keys(), args)
            },
        ),
    );
}

#[test]
fn pesemaphore_tryacquire_3_13_6_native_equals_lua() {
    differential(
        "3.13.6/pesemaphore-tryacquire.lua",
        case(
            (
                counter_state(SEM),
                timeouts_state(false),
                bystander(SEM_CHANNEL),
                (permits(), new_expiry(), permit_id(false), now(), no_lease()),
            ),
            |(sem, timeouts, channel, (permits, expiry, id, now, no_lease))| {
                (vec![sem, timeouts, channel], pe_keys(), vec![permits, expiry, id, now, no_lease])
            },
        ),
    );
}

// ---------------------------------------------------------------------------
// The count-down latch family.

#[test]
fn latch_countdown_4_7_0_native_equals_lua() {
    differential(
        "4.7.0/latch-countdown.lua",
        case(
            (counter_state(CDL), bystander(CDL_CHANNEL), message(), publish_command()),
            |(latch, channel, msg, publish)| (vec![latch, channel], vec![s(CDL), s(CDL_CHANNEL)], vec![msg, publish]),
        ),
    );
}

#[test]
fn latch_countdown_3_13_6_native_equals_lua() {
    differential(
        "3.13.6/latch-countdown.lua",
        case((counter_state(CDL), bystander(CDL_CHANNEL), message()), |(latch, channel, msg)| {
            (vec![latch, channel], vec![s(CDL), s(CDL_CHANNEL)], vec![msg])
        }),
    );
}

#[test]
fn latch_trysetcount_4_7_0_native_equals_lua() {
    differential(
        "4.7.0/latch-trysetcount.lua",
        case(
            (counter_state(CDL), bystander(CDL_CHANNEL), message(), permits(), publish_command()),
            |(latch, channel, msg, count, publish)| (vec![latch, channel], vec![s(CDL), s(CDL_CHANNEL)], vec![msg, count, publish]),
        ),
    );
}

#[test]
fn latch_trysetcount_3_13_6_native_equals_lua() {
    differential(
        "3.13.6/latch-trysetcount.lua",
        case(
            (counter_state(CDL), bystander(CDL_CHANNEL), message(), permits()),
            |(latch, channel, msg, count)| (vec![latch, channel], vec![s(CDL), s(CDL_CHANNEL)], vec![msg, count]),
        ),
    );
}

// ---------------------------------------------------------------------------
// Runs too large for a native run.

/// A timeout set of `expired` permits scored before "now" and two live
/// ones after it.
fn crowded_timeouts(expired: usize) -> KeySpec {
    let mut permits: Vec<(i64, Vec<u8>)> = (0..expired)
        .map(|i| (START_MS as i64 - 1000 - i as i64, format!("{i:032x}").into_bytes()))
        .collect();
    permits.push((START_MS as i64 + 60_000, s("live-a")));
    permits.push((922_337_203_685_477, s("live-b")));
    KeySpec {
        key: SEM_TIMEOUTS.into(),
        val: Some(Val::ZSet(permits)),
        ttl_ms: None,
    }
}

fn plain_case(state: Vec<KeySpec>, keys: Vec<Vec<u8>>, args: Vec<Vec<u8>>) -> Case {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let watch = any::<Index>().new_tree(&mut runner).unwrap().current();
    Case {
        db: 0,
        state,
        advance_ms: 0,
        mode: Mode::EvalSha,
        resp3: false,
        keys,
        args,
        watch,
    }
}

/// Runs `cases` on both servers, requires them equal, and returns each
/// case's reply and the native server's run counter for `script`.
fn run_fixed(script: &str, counter: &str, cases: &[Case]) -> (Vec<String>, String) {
    let mut pair = Pair::new(script);
    for node in [&pair.native, &pair.lua] {
        for conn in [&node.cmd, &node.watcher, &node.monitor, &node.sub] {
            conn.writer.set_read_timeout(Some(std::time::Duration::from_secs(120))).unwrap();
        }
    }
    let mut replies = Vec::new();
    for case in cases {
        let (native, lua) = pair.run(case);
        assert!(
            native == lua,
            "native and Lua runs differ for {case:?}\nnative: {native:#?}\nlua: {lua:#?}"
        );
        replies.push(outcome(&native.reply.0));
    }
    let (_, runs) = Pair::stats(&mut pair.native);
    let line = runs
        .lines()
        .find(|l| l.starts_with(&format!("script_{counter}:")))
        .unwrap_or_else(|| panic!("no run counter for {counter} in {runs}"))
        .to_string();
    pair.native.server.shutdown();
    pair.lua.server.shutdown();
    (replies, line)
}

/// Lua 5.1's `unpack` stops at 7,999 values: a reclaim of 7,999 expired
/// permits works (one ZREM of 7,999 members, as in Redis), one of 8,000
/// fails in the Lua run, and so must the native server's answer.
/// Runs that may reclaim 4,000 or more go to Lua; 3,999 run natively.
#[test]
fn a_reclaim_too_large_for_a_native_run_goes_to_lua() {
    let now = (START_MS - 1000).to_string().into_bytes();
    let sem = |v: &str| KeySpec {
        key: SEM.into(),
        val: Some(Val::Str(s(v))),
        ttl_ms: None,
    };
    let sizes = [3999usize, 4000, 7999, 8000];
    let available: Vec<Case> = sizes
        .iter()
        .map(|&n| plain_case(vec![sem("0"), crowded_timeouts(n)], pe_keys(), vec![now.clone(), s("PUBLISH")]))
        .collect();
    let (replies, runs) = run_fixed(
        "4.7.0/pesemaphore-available-permits.lua",
        "pesemaphore-available-permits@4.7.0",
        &available,
    );
    assert_eq!(replies[0], "integer other");
    assert_eq!(replies[2], "integer other");
    assert_eq!(replies[3], "-ERR user_script:1: too many results to unpack");
    assert_eq!(runs, "script_pesemaphore-available-permits@4.7.0:native=1,lua=3");

    // Acquire reclaims at most the permits it asks for.
    let acquire = |n: usize, asked: &str| {
        let args = vec![s(asked), s("1700000100000"), s("0f"), now.clone(), s(NO_LEASE)];
        plain_case(vec![sem("0"), crowded_timeouts(n)], pe_keys(), args)
    };
    let cases = [
        acquire(3999, "5000"),
        acquire(8000, "2"),
        acquire(8000, "-1"),
        acquire(8000, "8000"),
    ];
    let (replies, runs) = run_fixed("3.13.6/pesemaphore-tryacquire.lua", "pesemaphore-tryacquire@3.13.6", &cases);
    assert_eq!(replies[1], "$2 0f");
    assert_eq!(replies[3], "-ERR user_script:1: too many results to unpack");
    assert_eq!(runs, "script_pesemaphore-tryacquire@3.13.6:native=2,lua=2");
}

/// An acquire adding more permit ids than a native run may call commands
/// goes to Lua.
#[test]
fn an_acquire_of_too_many_ids_goes_to_lua() {
    let sem = KeySpec {
        key: SEM.into(),
        val: Some(Val::Str(s("200000"))),
        ttl_ms: Some(60_000),
    };
    let args = |ids: usize| {
        let mut args = vec![
            ids.to_string().into_bytes(),
            s("1700000100000"),
            s("1700000000000"),
            s(NO_LEASE),
            s("PUBLISH"),
        ];
        args.extend((0..ids).map(|i| format!("{i:016x}").into_bytes()));
        args
    };
    let cases = [
        plain_case(vec![sem.clone()], pe_keys(), args(3)),
        plain_case(vec![sem], pe_keys(), args(100_001)),
    ];
    let (replies, runs) = run_fixed("4.7.0/pesemaphore-tryacquire.lua", "pesemaphore-tryacquire@4.7.0", &cases);
    assert_eq!(replies, ["$2 OK", "$2 OK"]);
    assert_eq!(runs, "script_pesemaphore-tryacquire@4.7.0:native=1,lua=1");
}
