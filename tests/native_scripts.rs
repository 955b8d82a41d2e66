//! Differential proof that the reentrant-lock and read-write-lock native
//! scripts are indistinguishable from Lua (the harness and what it compares:
//! tests/native_harness).

mod common;
mod native_harness;
use native_harness::*;

// ---------------------------------------------------------------------------
// The reentrant lock family.

#[test]
fn lock_acquire_4_7_0_native_equals_lua() {
    differential(
        "4.7.0/lock-acquire.lua",
        case((lock_state(LOCK), lease(), owner()), |(lock, lease, owner)| {
            (vec![lock], vec![s(LOCK)], vec![lease, owner])
        }),
    );
}

#[test]
fn lock_acquire_3_13_6_native_equals_lua() {
    differential(
        "3.13.6/lock-acquire.lua",
        case((lock_state(LOCK), lease(), owner()), |(lock, lease, owner)| {
            (vec![lock], vec![s(LOCK)], vec![lease, owner])
        }),
    );
}

#[test]
fn lock_unlock_4_7_0_native_equals_lua() {
    differential(
        "4.7.0/lock-unlock.lua",
        case(
            (
                lock_state(LOCK),
                latch_state(LATCH),
                message(),
                lease(),
                owner(),
                publish_command(),
                latch_px(),
            ),
            |(lock, latch, msg, lease, owner, publish, px)| {
                (
                    vec![lock, latch],
                    vec![s(LOCK), s(CHANNEL), s(LATCH)],
                    vec![msg, lease, owner, publish, px],
                )
            },
        ),
    );
}

#[test]
fn lock_unlock_3_13_6_native_equals_lua() {
    differential(
        "3.13.6/lock-unlock.lua",
        case((lock_state(LOCK), message(), lease(), owner()), |(lock, msg, lease, owner)| {
            (vec![lock], vec![s(LOCK), s(CHANNEL)], vec![msg, lease, owner])
        }),
    );
}

#[test]
fn lock_force_unlock_4_7_0_native_equals_lua() {
    differential(
        "4.7.0/lock-force-unlock.lua",
        case((lock_state(LOCK), message(), publish_command()), |(lock, msg, publish)| {
            (vec![lock], vec![s(LOCK), s(CHANNEL)], vec![msg, publish])
        }),
    );
}

#[test]
fn lock_force_unlock_3_13_6_native_equals_lua() {
    differential(
        "3.13.6/lock-force-unlock.lua",
        case((lock_state(LOCK), message()), |(lock, msg)| {
            (vec![lock], vec![s(LOCK), s(CHANNEL)], vec![msg])
        }),
    );
}

#[test]
fn lock_renew_batch_4_7_0_native_equals_lua() {
    let locks = (lock_state(LOCK), lock_state(LOCK2), lock_state(LOCK3));
    let owners = proptest::collection::vec(owner(), 3);
    differential(
        "4.7.0/lock-renew-batch.lua",
        case((locks, owners, 0usize..=3, lease()), |((a, b, c), owners, n, lease)| {
            let keys: Vec<Vec<u8>> = [LOCK, LOCK2, LOCK3][..n].iter().map(|k| s(k)).collect();
            let mut args = vec![lease];
            args.extend(owners.into_iter().take(n));
            (vec![a, b, c], keys, args)
        }),
    );
}

#[test]
fn lock_renew_3_13_6_native_equals_lua() {
    differential(
        "3.13.6/lock-renew.lua",
        case((lock_state(LOCK), lease(), owner()), |(lock, lease, owner)| {
            (vec![lock], vec![s(LOCK)], vec![lease, owner])
        }),
    );
}

fn any_state(key: &'static str) -> impl Strategy<Value = KeySpec> + Clone {
    let val = prop_oneof![2 => Just(None), 2 => lock_hash().prop_map(Some), 2 => wrong_type().prop_map(Some)];
    (val, ttl()).prop_map(move |(val, ttl_ms)| KeySpec {
        key: key.into(),
        val,
        ttl_ms,
    })
}

#[test]
fn keys_pexpire_4_7_0_native_equals_lua() {
    let flag = prop_oneof![6 => Just(s("")), 4 => pick(&["NX", "XX", "GT", "LT", "nx", "gt", "bogus", "NX XX"])];
    differential(
        "4.7.0/keys-pexpire.lua",
        case(
            ((any_state(LOCK), any_state(LOCK2), any_state(LOCK3)), 0usize..=3, lease(), flag),
            |((a, b, c), n, ms, flag)| {
                let keys: Vec<Vec<u8>> = [LOCK, LOCK2, LOCK3][..n].iter().map(|k| s(k)).collect();
                (vec![a, b, c], keys, vec![ms, flag])
            },
        ),
    );
}

#[test]
fn cluster_detect_probe_4_7_0_native_equals_lua() {
    differential(
        "4.7.0/cluster-detect-probe.lua",
        case((any_state(LOCK), any_state(LOCK2)), |(a, b)| {
            (vec![a, b], vec![s(LOCK), s(LOCK2)], vec![])
        }),
    );
}

// ---------------------------------------------------------------------------
// The read-write lock family.

#[test]
fn rwlock_read_acquire_native_equals_lua() {
    differential(
        "4.7.0/rwlock-read-acquire.lua",
        case(
            (rw_state(RW, acquired_count()), timeout_keys(RW_PREFIX), lease(), reader(), writer()),
            |(lock, timeouts, lease, owner, writer)| {
                let prefix = owner_prefix(&owner);
                ([vec![lock], timeouts].concat(), vec![s(RW), prefix], vec![lease, owner, writer])
            },
        ),
    );
}

#[test]
fn rwlock_write_acquire_native_equals_lua() {
    let lease = prop_oneof![8 => lease(), 1 => pick(&["1e3", "0x10", " 5", "2.5", "-30000"])];
    differential(
        "4.7.0/rwlock-write-acquire.lua",
        case((rw_state(RW, acquired_count()), lease, writer()), |(lock, lease, writer)| {
            (vec![lock], vec![s(RW)], vec![lease, writer])
        }),
    );
}

#[test]
fn rwlock_read_unlock_4_7_0_native_equals_lua() {
    differential(
        "4.7.0/rwlock-read-unlock.lua",
        case(
            (
                rw_state(RW, walked_count()),
                timeout_keys(RW_PREFIX),
                latch_state(RW_LATCH),
                message(),
                reader(),
                publish_command(),
                latch_px(),
            ),
            |(lock, timeouts, latch, msg, owner, publish, px)| {
                let prefix = owner_prefix(&owner);
                (
                    [vec![lock, latch], timeouts].concat(),
                    vec![s(RW), s(RW_CHANNEL), prefix, s(RW_PREFIX), s(RW_LATCH)],
                    vec![msg, owner, publish, px],
                )
            },
        ),
    );
}

#[test]
fn rwlock_read_unlock_3_13_6_native_equals_lua() {
    differential(
        "3.13.6/rwlock-read-unlock.lua",
        case(
            (rw_state(RW, walked_count()), timeout_keys(RW_PREFIX), message(), reader()),
            |(lock, timeouts, msg, owner)| {
                let prefix = owner_prefix(&owner);
                (
                    [vec![lock], timeouts].concat(),
                    vec![s(RW), s(RW_CHANNEL), prefix, s(RW_PREFIX)],
                    vec![msg, owner],
                )
            },
        ),
    );
}

#[test]
fn rwlock_write_unlock_4_7_0_native_equals_lua() {
    differential(
        "4.7.0/rwlock-write-unlock.lua",
        case(
            (
                rw_state(RW, acquired_count()),
                latch_state(RW_LATCH),
                message(),
                lease(),
                writer(),
                publish_command(),
                latch_px(),
            ),
            |(lock, latch, msg, lease, writer, publish, px)| {
                (
                    vec![lock, latch],
                    vec![s(RW), s(RW_CHANNEL), s(RW_LATCH)],
                    vec![msg, lease, writer, publish, px],
                )
            },
        ),
    );
}

#[test]
fn rwlock_write_unlock_3_13_6_native_equals_lua() {
    differential(
        "3.13.6/rwlock-write-unlock.lua",
        case(
            (rw_state(RW, acquired_count()), message(), lease(), writer()),
            |(lock, msg, lease, writer)| (vec![lock], vec![s(RW), s(RW_CHANNEL)], vec![msg, lease, writer]),
        ),
    );
}

#[test]
fn rwlock_read_renew_3_13_6_native_equals_lua() {
    differential(
        "3.13.6/rwlock-read-renew.lua",
        case(
            (rw_state(RW, walked_count()), timeout_keys(RW_PREFIX), lease(), reader()),
            |(lock, timeouts, lease, owner)| ([vec![lock], timeouts].concat(), vec![s(RW), s(RW_PREFIX)], vec![lease, owner]),
        ),
    );
}

#[test]
fn rwlock_read_renew_batch_native_equals_lua() {
    let names = proptest::collection::vec(reader(), 0..3);
    let count = prop_oneof![8 => Just(None), 1 => pick(&["x", "1.5", "0", "9", ""]).prop_map(Some)];
    differential(
        "4.7.0/rwlock-read-renew-batch.lua",
        case(
            (
                (rw_state(RW, walked_count()), rw_state(RW2, walked_count())),
                (timeout_keys(RW_PREFIX), timeout_keys(RW2_PREFIX)),
                (names.clone(), count.clone(), names, count),
                0usize..=4,
                lease(),
            ),
            |((a, b), (ta, tb), (names_a, count_a, names_b, count_b), n, lease)| {
                let keys: Vec<Vec<u8>> = [RW, RW_PREFIX, RW2, RW2_PREFIX][..n].iter().map(|k| s(k)).collect();
                let mut args = vec![lease];
                for (names, count) in [(names_a, count_a), (names_b, count_b)] {
                    args.push(count.unwrap_or_else(|| names.len().to_string().into_bytes()));
                    args.extend(names);
                }
                ([vec![a, b], ta, tb].concat(), keys, args)
            },
        ),
    );
}

#[test]
fn rwlock_read_is_locked_native_equals_lua() {
    differential(
        "4.7.0/rwlock-read-islocked.lua",
        case(rw_state(RW, acquired_count()), |lock| (vec![lock], vec![s(RW)], vec![])),
    );
}
