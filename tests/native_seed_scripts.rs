//! Differential proof that the natives of the bodies older Redisson releases
//! send (`lua/redisson/seed-2018`: reentrant acquire with HSET, unlock that
//! announces a missing lock, read acquire whose reentry resets the lease)
//! are indistinguishable from Lua. States and arguments are those of the
//! same family's current bodies (tests/native_scripts.rs); the harness and
//! what it compares: tests/native_harness.

mod common;
mod native_harness;
use native_harness::*;

#[test]
fn lock_acquire_seed_2018_native_equals_lua() {
    differential(
        "seed-2018/lock-acquire.lua",
        case((lock_state(LOCK), lease(), owner()), |(lock, lease, owner)| {
            (vec![lock], vec![s(LOCK)], vec![lease, owner])
        }),
    );
}

#[test]
fn lock_unlock_seed_2018_native_equals_lua() {
    differential(
        "seed-2018/lock-unlock.lua",
        case((lock_state(LOCK), message(), lease(), owner()), |(lock, msg, lease, owner)| {
            (vec![lock], vec![s(LOCK), s(CHANNEL)], vec![msg, lease, owner])
        }),
    );
}

#[test]
fn rwlock_read_acquire_seed_2018_native_equals_lua() {
    differential(
        "seed-2018/rwlock-read-acquire.lua",
        case(
            (rw_state(RW, acquired_count()), timeout_keys(RW_PREFIX), lease(), reader(), writer()),
            |(lock, timeouts, lease, owner, writer)| {
                let prefix = owner_prefix(&owner);
                ([vec![lock], timeouts].concat(), vec![s(RW), prefix], vec![lease, owner, writer])
            },
        ),
    );
}
