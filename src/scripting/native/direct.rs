//! Direct runs: the lock scripts every Redisson client sends on every
//! `lock()`, `unlock()` and watchdog tick, run straight on the keyspace
//! when their input is plain, instead of command by command through
//! [`super::NativeCtx::call`].
//!
//! A native run through `NativeCtx::call` pays, for each of its four to
//! six commands, what a client's command pays: an argument vector, the
//! command table lookup and the script checks, the generic `State::call`
//! and a reply converted to a Lua value and back. Under `keylock bench
//! lock-acquire -c 50 -P 16` that was more than half the server's user
//! time. A direct run does each command's effect with typed arguments.
//!
//! What keeps a direct run indistinguishable from the Lua run:
//! - it only runs when everything it will meet is known beforehand to be
//!   plain (each script's `plain_*` check, which has no effect): every
//!   KEYS/ARGV element the script uses is present, the lease and latch
//!   times are valid positive milliseconds, the lock is absent or a hash
//!   whose hold count is an integer the step does not overflow, the
//!   unlock latch is absent, the publish command is PUBLISH or SPUBLISH,
//!   and the run is not read-only. Anything else (every error a command
//!   or Lua could raise, every odd state) goes to the command-by-command
//!   native run, which is proven against Lua for all of it;
//! - each step below is one command of the script, in the script's order,
//!   with that command's whole effect: lazy expiry of the keys it looks
//!   at, WATCH invalidation of the keys it writes, keyspace hits and
//!   misses counted as the command counts them, one `commandstats` call
//!   with its time, and its MONITOR line as the script writes it
//!   (`"hincrby" "lk" "<owner>" "1"`, the publish command as ARGV gives it);
//! - replies are what the Lua value converts to (an integer reply passes
//!   through a Lua number, as it does in Lua).
//!
//! The differential proptests (`tests/native_*.rs`) run every recognized
//! script natively and in Lua on the same cases and compare replies,
//! keyspaces, pub/sub, MONITOR, WATCH and INFO counters; for these
//! scripts the plain cases among them run here.

use bytes::Bytes;

use super::Params;
use crate::commands::table::Command;
use crate::db::{Db, Value as Stored, ops};
use crate::engine::{Client, State};
use crate::engine::{effects, exec};
use crate::numfmt;
use crate::pubsub::Kind;
use crate::reply::Reply;
use crate::scripting::convert::lua_number_to_int;

/// A direct run: the reply, or None when the input is not plain and the
/// command-by-command native run must take it (nothing has happened yet).
pub type DirectFn = fn(&mut Direct, &Params) -> Option<Reply>;

/// The commands direct runs stand in for, each counted under its own
/// `commandstats` row.
#[derive(Clone, Copy)]
enum Cmd {
    Exists,
    Hexists,
    Hincrby,
    Pexpire,
    Pttl,
    Get,
    Set,
    Del,
    Publish,
    Spublish,
}

const CMDS: [Cmd; 10] = [
    Cmd::Exists,
    Cmd::Hexists,
    Cmd::Hincrby,
    Cmd::Pexpire,
    Cmd::Pttl,
    Cmd::Get,
    Cmd::Set,
    Cmd::Del,
    Cmd::Publish,
    Cmd::Spublish,
];

impl Cmd {
    fn name(self) -> &'static [u8] {
        match self {
            Cmd::Exists => b"exists",
            Cmd::Hexists => b"hexists",
            Cmd::Hincrby => b"hincrby",
            Cmd::Pexpire => b"pexpire",
            Cmd::Pttl => b"pttl",
            Cmd::Get => b"get",
            Cmd::Set => b"set",
            Cmd::Del => b"del",
            Cmd::Publish => b"publish",
            Cmd::Spublish => b"spublish",
        }
    }

    /// Its entry in the command table, found once.
    fn command(self) -> &'static Command {
        static COMMANDS: std::sync::OnceLock<[&'static Command; CMDS.len()]> = std::sync::OnceLock::new();
        COMMANDS.get_or_init(|| CMDS.map(|c| exec::named(c.name())))[self as usize]
    }
}

/// What a direct run works with: the engine state, the script client
/// (database, MONITOR origin, pub/sub sender) and the script's frozen time.
pub struct Direct<'a> {
    state: &'a mut State,
    client: &'a mut Client,
    now: u64,
    /// The tick count when the current step started: the run's start,
    /// then the end of the step before (one counter read a step).
    step_started: u64,
}

impl<'a> Direct<'a> {
    pub fn new(state: &'a mut State, client: &'a mut Client) -> Direct<'a> {
        let now = state.script_time.unwrap_or_else(|| state.clock.now_ms());
        Direct {
            state,
            client,
            now,
            step_started: crate::clock::ticks::now(),
        }
    }

    fn db(&mut self) -> &mut Db {
        &mut self.state.dbs[self.client.db]
    }

    /// The value a command would find at `key` now, without any effect.
    fn peek(&self, key: &[u8]) -> Option<&Stored> {
        self.state.dbs[self.client.db].peek(key, self.now)
    }

    /// A deadline `ms` from now, as PEXPIRE and SET PX accept it: a
    /// positive integer whose sum with now does not overflow.
    fn deadline_in(&self, ms: &[u8]) -> Option<u64> {
        let ms = numfmt::parse_i64(ms).filter(|&ms| ms > 0)?;
        ms.checked_add(self.now as i64).map(|at| at as u64)
    }

    /// Whether `key` is absent or a hash (what HEXISTS accepts).
    fn plain_lock(&self, key: &[u8]) -> bool {
        matches!(self.peek(key), None | Some(Stored::Hash(_)))
    }

    /// Whether `key` is absent or a hash whose `field` is absent or an
    /// integer that adding `by` keeps in range (what HEXISTS and HINCRBY
    /// accept without an error).
    fn plain_hold(&self, key: &[u8], field: &[u8], by: i64) -> bool {
        match self.peek(key) {
            None => true,
            Some(Stored::Hash(h)) => h
                .get(field)
                .is_none_or(|count| numfmt::parse_i64(count).is_some_and(|n| n.checked_add(by).is_some())),
            Some(_) => false,
        }
    }

    /// Books a command that ran: its `commandstats` call and time, and
    /// its MONITOR line (`argv` as the script wrote it).
    fn ran(&mut self, cmd: Cmd, argv: &[&[u8]]) {
        let ended = crate::clock::ticks::now();
        let elapsed = ended.saturating_sub(self.step_started);
        self.step_started = ended;
        let cmd = exec::direct(self.state, cmd.command());
        self.state.publish_key_events(self.client);
        if self.state.tracking.enabled && cmd.spec.has(crate::commands::table::flag::READONLY) {
            // A script's reads make its caller cache the keys it declared.
            self.state.remember_tracked_keys(self.client, cmd, &[]);
        }
        self.state.book_run(self.client, cmd, exec::Shown::Pieces(argv), elapsed);
    }

    /// Books a write step's changes as its command books them: `dirty`
    /// changes (Redis's `server.dirty`), replayed as `effect` for
    /// `target` (see `engine::effects`), after the keys expiry removed
    /// while the step looked its key up.
    fn wrote(&mut self, dirty: u64, effect: &[&[u8]], target: u8) {
        self.state.dirty += dirty;
        if self.state.effects.on() && (dirty > 0 || target == effects::REPL) {
            self.state.record_expired_effects();
            self.state.effects.push(self.client.db, effect, target);
        }
    }

    /// Where `key` lives, looked up as every command looks a key up (an
    /// expired key is removed on the way). Later steps on the same key
    /// take this position instead of looking again: with the script's
    /// time frozen, nothing but a removal changes it, and no step below
    /// removes a key another step still uses.
    fn find(&mut self, key: &[u8]) -> Option<usize> {
        let now = self.now;
        self.db().live_position(key, now)
    }

    /// Counts a read lookup's outcome, as INFO's keyspace_hits and
    /// keyspace_misses count it (a write lookup counts nothing).
    /// A miss is also a `keymiss` event.
    fn count_read(&mut self, at: Option<usize>, key: &[u8]) {
        if at.is_some() {
            self.state.stats.keyspace_hits += 1;
        } else {
            self.state.stats.keyspace_misses += 1;
            self.db().notify(crate::db::NOTIFY_KEY_MISS, "keymiss", key);
        }
    }

    /// `EXISTS key`, the key found at `at`.
    fn exists(&mut self, at: Option<usize>, key: &[u8]) -> bool {
        self.count_read(at, key);
        self.ran(Cmd::Exists, &[Cmd::Exists.name(), key]);
        at.is_some()
    }

    /// `HEXISTS key field`, the key found at `at` (absent or a hash).
    fn hexists(&mut self, at: Option<usize>, key: &[u8], field: &[u8]) -> bool {
        self.count_read(at, key);
        // The plain check saw an absent key or a hash, and nothing since
        // changed its type: no error can come up.
        let found = ops::hexists(self.db(), at, field).unwrap_or(false);
        self.ran(Cmd::Hexists, &[Cmd::Hexists.name(), key, field]);
        found
    }

    /// `HINCRBY key field by` (by ±1), the key found at `at` (absent, or a
    /// hash whose field is absent or an integer `by` keeps in range): the
    /// key's position, and the new count.
    /// None (nothing changed) if HINCRBY would fail, which the plain check
    /// has ruled out; it is each script's first write, so the caller can
    /// still leave the run to the command-by-command path.
    fn hincrby(&mut self, at: Option<usize>, key: &[u8], field: &[u8], by: i64) -> Option<(usize, i64)> {
        let limits = self.state.runtime.hash_limits;
        let done = ops::hincrby(self.db(), key, at, field, by, limits).ok();
        let by_text = if by == 1 { b"1".as_slice() } else { b"-1".as_slice() };
        if done.is_some() {
            self.wrote(1, &[Cmd::Hincrby.name(), key, field, by_text], effects::ALL);
        }
        self.ran(Cmd::Hincrby, &[Cmd::Hincrby.name(), key, field, by_text]);
        done
    }

    /// `PEXPIRE key ms`, the key found at `at`; `deadline` is what `ms`
    /// gives (after now).
    fn pexpire(&mut self, at: Option<usize>, key: &[u8], ms: &[u8], deadline: u64) -> bool {
        let set = ops::set_deadline(self.db(), at, key, deadline);
        if set {
            // Replayed with its deadline, as PEXPIRE is (spelled out only
            // when someone reads the effects).
            let mut text = itoa::Buffer::new();
            let deadline = if self.state.effects.on() {
                text.format(deadline).as_bytes()
            } else {
                b""
            };
            self.wrote(1, &[b"PEXPIREAT", key, deadline], effects::ALL);
        }
        self.ran(Cmd::Pexpire, &[Cmd::Pexpire.name(), key, ms]);
        set
    }

    /// `PTTL key`, the key found at `at`.
    fn pttl(&mut self, at: Option<usize>, key: &[u8]) -> i64 {
        let now = self.now;
        self.count_read(at, key);
        let ttl = ops::pttl(self.db(), at, now);
        self.ran(Cmd::Pttl, &[Cmd::Pttl.name(), key]);
        ttl
    }

    /// `GET key` on a key known to be absent (expired at most).
    fn get_absent(&mut self, key: &[u8]) {
        let now = self.now;
        let found = self.db().live_position(key, now);
        debug_assert!(found.is_none(), "a direct run found the unlock latch its plain check saw absent");
        self.count_read(found, key);
        self.ran(Cmd::Get, &[Cmd::Get.name(), key]);
    }

    /// `SET key value px ms`, `at` being the deadline `ms` gives.
    fn set_px(&mut self, key: &[u8], value: &'static [u8], ms: &[u8], at: u64) {
        let now = self.now;
        ops::set_with_deadline(self.db(), key, Bytes::from_static(value), at, now);
        let mut text = itoa::Buffer::new();
        let deadline = if self.state.effects.on() { text.format(at).as_bytes() } else { b"" };
        self.wrote(1, &[b"SET", key, value, b"PXAT", deadline], effects::ALL);
        self.ran(Cmd::Set, &[Cmd::Set.name(), key, value, b"px", ms]);
    }

    /// `DEL key`.
    fn del(&mut self, key: &[u8]) {
        let now = self.now;
        if ops::del(self.db(), key, now) {
            self.wrote(1, &[Cmd::Del.name(), key], effects::ALL);
        }
        self.ran(Cmd::Del, &[Cmd::Del.name(), key]);
    }

    /// `PUBLISH` or `SPUBLISH` (`name` as the script passes it).
    fn publish(&mut self, name: &[u8], kind: Kind, channel: &Bytes, message: &Bytes) {
        self.state.publish(self.client, kind, channel, message);
        // Replicas get every message; an append-only file none.
        self.wrote(0, &[name, channel, message], effects::REPL);
        let cmd = if kind == Kind::Shard { Cmd::Spublish } else { Cmd::Publish };
        self.ran(cmd, &[name, channel, message]);
    }
}

/// The publish command ARGV names, if it is one a direct run can do.
fn publish_kind(name: &[u8]) -> Option<Kind> {
    if name.eq_ignore_ascii_case(b"publish") {
        Some(Kind::Channel)
    } else if name.eq_ignore_ascii_case(b"spublish") {
        Some(Kind::Shard)
    } else {
        None
    }
}

/// An integer reply as it comes back from Lua, which holds it as a number.
fn through_lua(n: i64) -> Reply {
    Reply::Int(lua_number_to_int(n as f64))
}

/// `lock-acquire.lua` (4.7.0 and 3.13.6; see `lock::acquire`). KEYS[1]
/// lock; ARGV[1] lease ms, ARGV[2] owner.
pub fn lock_acquire(d: &mut Direct, p: &Params) -> Option<Reply> {
    let (key, lease, owner) = (p.keys.first()?, p.argv.first()?, p.argv.get(1)?);
    let deadline = d.deadline_in(lease)?;
    if !d.plain_hold(key, owner, 1) {
        return None;
    }
    let found = d.find(key);
    // if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then
    if !d.exists(found, key) || d.hexists(found, key, owner) {
        // redis.call('hincrby', KEYS[1], ARGV[2], 1);
        let (held, _) = d.hincrby(found, key, owner, 1)?;
        // redis.call('pexpire', KEYS[1], ARGV[1]); return nil;
        d.pexpire(Some(held), key, lease, deadline);
        return Some(Reply::Nil);
    }
    // return redis.call('pttl', KEYS[1]);
    Some(through_lua(d.pttl(found, key)))
}

/// `lock-unlock.lua` (4.7.0; see `lock::unlock`). KEYS[1] lock, KEYS[2]
/// channel, KEYS[3] unlock latch; ARGV[1] message, ARGV[2] lease ms,
/// ARGV[3] owner, ARGV[4] publish command, ARGV[5] latch PX.
pub fn lock_unlock(d: &mut Direct, p: &Params) -> Option<Reply> {
    let [lock, channel, latch, ..] = p.keys else { return None };
    let [message, lease, owner, publish, latch_px, ..] = p.argv else {
        return None;
    };
    let kind = publish_kind(publish)?;
    let (lease_at, latch_at) = (d.deadline_in(lease)?, d.deadline_in(latch_px)?);
    if d.peek(latch).is_some() || !d.plain_hold(lock, owner, -1) {
        return None;
    }
    // local val = redis.call('get', KEYS[3]); if val ~= false then return tonumber(val);end;
    d.get_absent(latch);
    // if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end;
    let found = d.find(lock);
    if !d.hexists(found, lock, owner) {
        return Some(Reply::Nil);
    }
    // local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
    let (held, counter) = d.hincrby(found, lock, owner, -1)?;
    if counter > 0 {
        // redis.call('pexpire', KEYS[1], ARGV[2]); redis.call('set', KEYS[3], 0, 'px', ARGV[5]); return 0;
        d.pexpire(Some(held), lock, lease, lease_at);
        d.set_px(latch, b"0", latch_px, latch_at);
        Some(Reply::Int(0))
    } else {
        // redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]);
        d.del(lock);
        d.publish(publish, kind, channel, message);
        // redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1;
        d.set_px(latch, b"1", latch_px, latch_at);
        Some(Reply::Int(1))
    }
}

/// `lock-unlock.lua` (3.13.6; see `lock::unlock_3_13`). KEYS[1] lock,
/// KEYS[2] channel; ARGV[1] message, ARGV[2] lease ms, ARGV[3] owner.
pub fn lock_unlock_3_13(d: &mut Direct, p: &Params) -> Option<Reply> {
    let [lock, channel, ..] = p.keys else { return None };
    let [message, lease, owner, ..] = p.argv else { return None };
    let lease_at = d.deadline_in(lease)?;
    if !d.plain_hold(lock, owner, -1) {
        return None;
    }
    // if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end;
    let found = d.find(lock);
    if !d.hexists(found, lock, owner) {
        return Some(Reply::Nil);
    }
    // local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
    let (held, counter) = d.hincrby(found, lock, owner, -1)?;
    if counter > 0 {
        // redis.call('pexpire', KEYS[1], ARGV[2]); return 0;
        d.pexpire(Some(held), lock, lease, lease_at);
        Some(Reply::Int(0))
    } else {
        // redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1;
        d.del(lock);
        d.publish(b"publish", Kind::Channel, channel, message);
        Some(Reply::Int(1))
    }
}

/// The most locks a direct renewal takes; a larger batch is left to the
/// command-by-command run.
const RENEW_BATCH_LIMIT: usize = 1024;

/// `lock-renew-batch.lua` (4.7.0; see `lock::renew_batch`): KEYS the
/// locks, ARGV[1] lease ms, ARGV[i+1] the owner of KEYS[i].
pub fn lock_renew_batch(d: &mut Direct, p: &Params) -> Option<Reply> {
    let (lease, owners) = p.argv.split_first()?;
    if p.keys.len() > RENEW_BATCH_LIMIT || owners.len() < p.keys.len() {
        return None;
    }
    let at = d.deadline_in(lease)?;
    if !p.keys.iter().all(|key| d.plain_lock(key)) {
        return None;
    }
    let mut result = Vec::with_capacity(p.keys.len());
    for (key, owner) in p.keys.iter().zip(owners) {
        // if (redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1) then
        let found = d.find(key);
        if d.hexists(found, key, owner) {
            // redis.call('pexpire', KEYS[i], ARGV[1]); table.insert(result, 1);
            d.pexpire(found, key, lease, at);
            result.push(Reply::Int(1));
        } else {
            result.push(Reply::Int(0));
        }
    }
    Some(Reply::Array(result))
}

/// `lock-renew.lua` (3.13.6; see `lock::renew`): KEYS[1] lock; ARGV[1]
/// lease ms, ARGV[2] owner.
pub fn lock_renew(d: &mut Direct, p: &Params) -> Option<Reply> {
    let (key, lease, owner) = (p.keys.first()?, p.argv.first()?, p.argv.get(1)?);
    let at = d.deadline_in(lease)?;
    if !d.plain_lock(key) {
        return None;
    }
    // if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('pexpire', KEYS[1], ARGV[1]); return 1; end; return 0;
    let found = d.find(key);
    if d.hexists(found, key, owner) {
        d.pexpire(found, key, lease, at);
        return Some(Reply::Int(1));
    }
    Some(Reply::Int(0))
}

#[cfg(test)]
mod tests {
    //! Which input runs directly. That a direct run equals the Lua run is
    //! proven over TCP by the differential proptests (`tests/native_*.rs`).

    use super::*;
    use crate::config::Config;

    const OWNER: &[u8] = b"5f0c7a5e-4d1b-4c8e-9a3f-0a1b2c3d4e5f:1";
    const OTHER: &[u8] = b"8e2d1c0b-7a6f-4e5d-8c4b-3a2918070605:57";

    fn b(items: &[&[u8]]) -> Vec<Bytes> {
        items.iter().map(|i| Bytes::copy_from_slice(i)).collect()
    }

    fn run(state: &mut State, script: DirectFn, keys: &[&[u8]], argv: &[&[u8]]) -> Option<Reply> {
        let mut client = Client::script_client();
        let (keys, argv) = (b(keys), b(argv));
        script(&mut Direct::new(state, &mut client), &Params { keys: &keys, argv: &argv })
    }

    fn acquire(state: &mut State, owner: &[u8]) -> Option<Reply> {
        run(state, lock_acquire, &[b"lk"], &[b"30000", owner])
    }

    fn unlock(state: &mut State, request: &[u8]) -> Option<Reply> {
        let latch = [b"redisson_unlock_latch:{lk}:".as_slice(), request].concat();
        run(
            state,
            lock_unlock,
            &[b"lk", b"redisson_lock__channel:{lk}", &latch],
            &[b"0", b"30000", OWNER, b"publish", b"13500"],
        )
    }

    #[test]
    fn a_redisson_lock_cycle_runs_directly() {
        let mut state = State::new(Config::default(), 0);
        assert_eq!(acquire(&mut state, OWNER), Some(Reply::Nil));
        assert_eq!(acquire(&mut state, OWNER), Some(Reply::Nil));
        assert!(matches!(acquire(&mut state, OTHER), Some(Reply::Int(ttl)) if ttl > 29_000));
        let renewed = run(&mut state, lock_renew_batch, &[b"lk", b"gone"], &[b"30000", OWNER, OWNER]);
        assert_eq!(renewed, Some(Reply::Array(vec![Reply::Int(1), Reply::Int(0)])));
        assert_eq!(unlock(&mut state, b"1"), Some(Reply::Int(0)));
        assert_eq!(unlock(&mut state, b"2"), Some(Reply::Int(1)));
        assert_eq!(acquire(&mut state, OTHER), Some(Reply::Nil));
        let unlocked = run(&mut state, lock_unlock_3_13, &[b"lk", b"ch"], &[b"0", b"30000", OTHER]);
        assert_eq!(unlocked, Some(Reply::Int(1)));
        assert_eq!(run(&mut state, lock_renew, &[b"lk"], &[b"30000", OTHER]), Some(Reply::Int(0)));
    }

    #[test]
    fn odd_input_is_left_to_the_command_by_command_run() {
        let mut state = State::new(Config::default(), 0);
        // Missing or malformed arguments.
        assert_eq!(run(&mut state, lock_acquire, &[], &[b"30000", OWNER]), None);
        assert_eq!(run(&mut state, lock_acquire, &[b"lk"], &[b"30000"]), None);
        for lease in [b"0".as_slice(), b"-5", b"30s", b"9223372036854775807"] {
            assert_eq!(run(&mut state, lock_acquire, &[b"lk"], &[lease, OWNER]), None, "lease {lease:?}");
        }
        // A lock of another type, or a hold count that is not an integer or would overflow.
        state.dbs[0].set(b"lk", Stored::Str(Bytes::from_static(b"x")), false);
        assert_eq!(acquire(&mut state, OWNER), None);
        assert_eq!(run(&mut state, lock_renew, &[b"lk"], &[b"30000", OWNER]), None);
        for count in [b"one".as_slice(), b"9223372036854775807"] {
            let mut hash = Stored::new_hash();
            if let Stored::Hash(h) = &mut hash {
                h.insert(OWNER, count, crate::db::hash::PackLimits::default());
            }
            state.dbs[0].set(b"lk", hash, false);
            assert_eq!(acquire(&mut state, OWNER), None, "count {count:?}");
        }
        // An unlock latch already set, or a publish command that is not one.
        state.dbs[0].remove(b"lk");
        assert_eq!(acquire(&mut state, OWNER), Some(Reply::Nil));
        state.dbs[0].set(b"redisson_unlock_latch:{lk}:1", Stored::Str(Bytes::from_static(b"1")), false);
        assert_eq!(unlock(&mut state, b"1"), None);
        let keys: &[&[u8]] = &[b"lk", b"ch", b"latch"];
        assert_eq!(
            run(&mut state, lock_unlock, keys, &[b"0", b"30000", OWNER, b"echo", b"13500"]),
            None
        );
        assert_eq!(run(&mut state, lock_unlock, keys, &[b"0", b"30000", OWNER, b"publish", b"0"]), None);
    }
}
