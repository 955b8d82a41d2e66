//! The read-write lock family (RReadWriteLock), natively: read and write
//! acquire (one body for 4.7.0 and 3.13.6; an older read acquire, whose
//! reentry resets the lease, for releases before 3.13.6), read and write
//! unlock (4.7.0 with the unlock latch and a publish command from ARGV,
//! 3.13.6 without), read-lock renewal (batched in 4.7.0, one lock in
//! 3.13.6) and the read lock's `isLocked`.
//!
//! The lock is a hash `KEYS[1]` with a `mode` field (`read`/`write`) and
//! one hold count per owner (`<uuid>:<tid>`, `…:write` for the writer).
//! Every read hold also has a timeout key `<prefix>:<owner>:rwlock_timeout:<n>`
//! whose name the scripts build by concatenation: Lua's `%.14g` prints the
//! hold number (`…:1`, and `…:1e+15` past 10^14 holds), and a hold count
//! read back from the hash may be any numeric string Lua's `tonumber`
//! takes (`0x10`, ` 3`, `2.5`).
//!
//! As in `lock.rs`, each function follows its script statement by
//! statement through [`NativeCtx::call`], with the Lua quoted above each
//! step. Those that loop over hold counts first size the run from what
//! the hash holds (without touching it): a count so large that the Lua run
//! would be a busy script goes to Lua (see [`NATIVE_COMMAND_BUDGET`]).

use super::{NATIVE_COMMAND_BUDGET, NativeCtx, Params, ScriptError, Table, Value};

const GET: Value = Value::str_static("get");
const SET: Value = Value::str_static("set");
const PX: Value = Value::str_static("px");
const DEL: Value = Value::str_static("del");
const HGET: Value = Value::str_static("hget");
const HSET: Value = Value::str_static("hset");
const HDEL: Value = Value::str_static("hdel");
const HLEN: Value = Value::str_static("hlen");
const HKEYS: Value = Value::str_static("hkeys");
const HEXISTS: Value = Value::str_static("hexists");
const HINCRBY: Value = Value::str_static("hincrby");
const PEXPIRE: Value = Value::str_static("pexpire");
const PTTL: Value = Value::str_static("pttl");
const PUBLISH: Value = Value::str_static("publish");
const MODE: Value = Value::str_static("mode");
const READ: Value = Value::str_static("read");
const WRITE: Value = Value::str_static("write");
const FALSE: Value = Value::Bool(false);
const COLON: Value = Value::str_static(":");
const TIMEOUT: Value = Value::str_static(":rwlock_timeout:");

/// How many iterations `for i = v, 1, -1` makes for a hash value `v`
/// (infinite for `inf`).
fn countdown_len(v: &[u8]) -> f64 {
    match super::lua::str_to_number(v) {
        Some(n) if n >= 1.0 => n.floor(),
        _ => 0.0,
    }
}

/// The commands the hold-count walk over hash `key` can take: one HGET and
/// a countdown per field.
fn walk_cost(cx: &NativeCtx, key: &Value) -> f64 {
    cx.peek_hash(key).map_or(0.0, |h| h.values().map(|v| 1.0 + countdown_len(v)).sum())
}

/// How a reentrant read hold renews the lock's own lease.
#[derive(Clone, Copy)]
enum ReentryLease {
    /// `local remainTime = redis.call('pttl', KEYS[1]);
    /// redis.call('pexpire', KEYS[1], math.max(remainTime, ARGV[1]));`
    /// (4.7.0, 3.13.6): never shorter than what is left.
    KeepLonger,
    /// `redis.call('pexpire', KEYS[1], ARGV[1]);` (releases older than
    /// 3.13.6): the lease as asked.
    Reset,
}

/// `rwlock-read-acquire.lua` (4.7.0 and 3.13.6). KEYS[1] lock, KEYS[2]
/// timeout-key prefix; ARGV[1] lease ms, ARGV[2] owner, ARGV[3] the
/// owner's write-lock name. Nil when acquired, else the lock's PTTL.
pub fn read_acquire(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    read_acquire_with(cx, p, ReentryLease::KeepLonger)
}

/// `rwlock-read-acquire.lua` of releases older than 3.13.6 (`seed-2018`):
/// the same, except that a reentry sets the lock's lease to ARGV[1].
pub fn read_acquire_2018(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    read_acquire_with(cx, p, ReentryLease::Reset)
}

fn read_acquire_with(cx: &mut NativeCtx, p: &Params, reentry: ReentryLease) -> Result<Value, ScriptError> {
    // local mode = redis.call('hget', KEYS[1], 'mode');
    let mode = cx.call(&[HGET, p.key(1), MODE])?;
    // if (mode == false) then
    if mode.lua_eq(&FALSE) {
        // redis.call('hset', KEYS[1], 'mode', 'read');
        cx.call(&[HSET, p.key(1), MODE, READ])?;
        // redis.call('hset', KEYS[1], ARGV[2], 1);
        cx.call(&[HSET, p.key(1), p.arg(2), Value::Num(1.0)])?;
        // redis.call('set', KEYS[2] .. ':1', 1);
        let timeout = cx.concat(&[p.key(2), Value::str_static(":1")])?;
        cx.call(&[SET, timeout.clone(), Value::Num(1.0)])?;
        // redis.call('pexpire', KEYS[2] .. ':1', ARGV[1]);
        cx.call(&[PEXPIRE, timeout, p.arg(1)])?;
        // redis.call('pexpire', KEYS[1], ARGV[1]); return nil;
        cx.call(&[PEXPIRE, p.key(1), p.arg(1)])?;
        return Ok(Value::Nil);
    }
    // if (mode == 'read') or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
    if mode.lua_eq(&READ) || (mode.lua_eq(&WRITE) && cx.call(&[HEXISTS, p.key(1), p.arg(3)])?.is_num(1.0)) {
        // local ind = redis.call('hincrby', KEYS[1], ARGV[2], 1);
        let ind = cx.call(&[HINCRBY, p.key(1), p.arg(2), Value::Num(1.0)])?;
        // local key = KEYS[2] .. ':' .. ind;
        let key = cx.concat(&[p.key(2), COLON, ind])?;
        // redis.call('set', key, 1); redis.call('pexpire', key, ARGV[1]);
        cx.call(&[SET, key.clone(), Value::Num(1.0)])?;
        cx.call(&[PEXPIRE, key, p.arg(1)])?;
        let lease = match reentry {
            ReentryLease::KeepLonger => {
                // local remainTime = redis.call('pttl', KEYS[1]);
                let remain_time = cx.call(&[PTTL, p.key(1)])?;
                // math.max(remainTime, ARGV[1])
                cx.math_max(&[remain_time, p.arg(1)])?
            }
            ReentryLease::Reset => p.arg(1),
        };
        // redis.call('pexpire', KEYS[1], <lease>); return nil;
        cx.call(&[PEXPIRE, p.key(1), lease])?;
        return Ok(Value::Nil);
    }
    // return redis.call('pttl', KEYS[1]);
    cx.call(&[PTTL, p.key(1)])
}

/// `rwlock-write-acquire.lua` (4.7.0 and 3.13.6). KEYS[1] lock; ARGV[1]
/// lease ms, ARGV[2] the write owner. Nil when acquired, else the PTTL.
pub fn write_acquire(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    // local mode = redis.call('hget', KEYS[1], 'mode');
    let mode = cx.call(&[HGET, p.key(1), MODE])?;
    // if (mode == false) then
    if mode.lua_eq(&FALSE) {
        // redis.call('hset', KEYS[1], 'mode', 'write'); redis.call('hset', KEYS[1], ARGV[2], 1);
        cx.call(&[HSET, p.key(1), MODE, WRITE])?;
        cx.call(&[HSET, p.key(1), p.arg(2), Value::Num(1.0)])?;
        // redis.call('pexpire', KEYS[1], ARGV[1]); return nil;
        cx.call(&[PEXPIRE, p.key(1), p.arg(1)])?;
        return Ok(Value::Nil);
    }
    // if (mode == 'write') then if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    if mode.lua_eq(&WRITE) && cx.call(&[HEXISTS, p.key(1), p.arg(2)])?.is_num(1.0) {
        // redis.call('hincrby', KEYS[1], ARGV[2], 1);
        cx.call(&[HINCRBY, p.key(1), p.arg(2), Value::Num(1.0)])?;
        // local currentExpire = redis.call('pttl', KEYS[1]);
        let current_expire = cx.call(&[PTTL, p.key(1)])?;
        // redis.call('pexpire', KEYS[1], currentExpire + ARGV[1]); return nil;
        let lease = cx.add((&current_expire, "local 'currentExpire'"), (&p.arg(1), "field '?'"))?;
        cx.call(&[PEXPIRE, p.key(1), lease])?;
        return Ok(Value::Nil);
    }
    // return redis.call('pttl', KEYS[1]);
    cx.call(&[PTTL, p.key(1)])
}

/// How the two versions' unlocks differ: where the unlock latch and the
/// publish command are (4.7.0), or their absence (3.13.6).
struct UnlockShape {
    /// KEYS index of the latch and ARGV index of its PX (4.7.0).
    latch: Option<(usize, usize)>,
    /// ARGV index of the publish command (4.7.0), else a fixed `publish`.
    publish: Option<usize>,
}

impl UnlockShape {
    fn publish(&self, cx: &mut NativeCtx, p: &Params) -> Result<(), ScriptError> {
        // redis.call(ARGV[n], KEYS[2], ARGV[1]) / redis.call('publish', KEYS[2], ARGV[1])
        let command = self.publish.map_or(PUBLISH, |i| p.arg(i));
        cx.call(&[command, p.key(2), p.arg(1)])?;
        Ok(())
    }

    /// `redis.call('set', KEYS[latch], value, 'px', ARGV[px])` (4.7.0 only).
    fn set_latch(&self, cx: &mut NativeCtx, p: &Params, value: f64) -> Result<(), ScriptError> {
        if let Some((key, px)) = self.latch {
            cx.call(&[SET, p.key(key), Value::Num(value), PX, p.arg(px)])?;
        }
        Ok(())
    }

    /// `local val = redis.call('get', KEYS[latch]); if val ~= false then
    /// return tonumber(val);end;` (4.7.0 only): the answer of a repeated
    /// request.
    fn repeated(&self, cx: &mut NativeCtx, p: &Params) -> Result<Option<Value>, ScriptError> {
        let Some((key, _)) = self.latch else { return Ok(None) };
        let val = cx.call(&[GET, p.key(key)])?;
        Ok((!val.lua_eq(&FALSE)).then(|| val.tonumber()))
    }
}

/// `rwlock-write-unlock.lua` (4.7.0). KEYS[1] lock, KEYS[2] channel,
/// KEYS[3] unlock latch; ARGV[1] message, ARGV[2] lease ms, ARGV[3] write
/// owner, ARGV[4] publish command, ARGV[5] latch PX.
pub fn write_unlock(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    let shape = UnlockShape {
        latch: Some((3, 5)),
        publish: Some(4),
    };
    write_unlock_with(cx, p, &shape, Value::Nil)
}

/// `rwlock-write-unlock.lua` (3.13.6): no latch, a fixed `publish`, and 1
/// when the lock was already gone.
pub fn write_unlock_3_13(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    let shape = UnlockShape {
        latch: None,
        publish: None,
    };
    write_unlock_with(cx, p, &shape, Value::Num(1.0))
}

fn write_unlock_with(cx: &mut NativeCtx, p: &Params, shape: &UnlockShape, when_free: Value) -> Result<Value, ScriptError> {
    if let Some(answer) = shape.repeated(cx, p)? {
        return Ok(answer);
    }
    // local mode = redis.call('hget', KEYS[1], 'mode');
    let mode = cx.call(&[HGET, p.key(1), MODE])?;
    // if (mode == false) then <publish>; <set latch 1>; return nil (4.7.0) / 1 (3.13.6); end;
    if mode.lua_eq(&FALSE) {
        shape.publish(cx, p)?;
        shape.set_latch(cx, p, 1.0)?;
        return Ok(when_free);
    }
    // if (mode == 'write') then
    if mode.lua_eq(&WRITE) {
        // local lockExists = redis.call('hexists', KEYS[1], ARGV[3]); if (lockExists == 0) then return nil;
        if cx.call(&[HEXISTS, p.key(1), p.arg(3)])?.is_num(0.0) {
            return Ok(Value::Nil);
        }
        // else local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
        let counter = cx.call(&[HINCRBY, p.key(1), p.arg(3), Value::Num(-1.0)])?;
        // if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); <set latch 0>; return 0;
        if cx.lt(&Value::Num(0.0), &counter)? {
            cx.call(&[PEXPIRE, p.key(1), p.arg(2)])?;
            shape.set_latch(cx, p, 0.0)?;
            return Ok(Value::Num(0.0));
        }
        // else redis.call('hdel', KEYS[1], ARGV[3]);
        cx.call(&[HDEL, p.key(1), p.arg(3)])?;
        // if (redis.call('hlen', KEYS[1]) == 1) then redis.call('del', KEYS[1]); <publish>;
        if cx.call(&[HLEN, p.key(1)])?.is_num(1.0) {
            cx.call(&[DEL, p.key(1)])?;
            shape.publish(cx, p)?;
        } else {
            // else redis.call('hset', KEYS[1], 'mode', 'read'); end;
            cx.call(&[HSET, p.key(1), MODE, READ])?;
        }
        // <set latch 1>; return 1;
        shape.set_latch(cx, p, 1.0)?;
        return Ok(Value::Num(1.0));
    }
    // return nil;
    Ok(Value::Nil)
}

/// `rwlock-read-unlock.lua` (4.7.0). KEYS[1] lock, KEYS[2] channel,
/// KEYS[3] this owner's timeout-key prefix, KEYS[4] the lock's
/// timeout-key prefix, KEYS[5] unlock latch; ARGV[1] message, ARGV[2]
/// owner, ARGV[3] publish command, ARGV[4] latch PX.
pub fn read_unlock(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    let shape = UnlockShape {
        latch: Some((5, 4)),
        publish: Some(3),
    };
    read_unlock_with(cx, p, &shape, Value::Nil)
}

/// `rwlock-read-unlock.lua` (3.13.6): no latch, a fixed `publish`, and 1
/// when the lock was already gone.
pub fn read_unlock_3_13(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    let shape = UnlockShape {
        latch: None,
        publish: None,
    };
    read_unlock_with(cx, p, &shape, Value::Num(1.0))
}

fn read_unlock_with(cx: &mut NativeCtx, p: &Params, shape: &UnlockShape, when_free: Value) -> Result<Value, ScriptError> {
    if walk_cost(cx, &p.key(1)) > NATIVE_COMMAND_BUDGET {
        return Err(cx.hand_to_lua());
    }
    if let Some(answer) = shape.repeated(cx, p)? {
        return Ok(answer);
    }
    // local mode = redis.call('hget', KEYS[1], 'mode');
    let mode = cx.call(&[HGET, p.key(1), MODE])?;
    // if (mode == false) then <publish>; <set latch 1>; return nil (4.7.0) / 1 (3.13.6); end;
    if mode.lua_eq(&FALSE) {
        shape.publish(cx, p)?;
        shape.set_latch(cx, p, 1.0)?;
        return Ok(when_free);
    }
    // local lockExists = redis.call('hexists', KEYS[1], ARGV[2]); if (lockExists == 0) then return nil;end;
    if cx.call(&[HEXISTS, p.key(1), p.arg(2)])?.is_num(0.0) {
        return Ok(Value::Nil);
    }
    // local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1);
    let counter = cx.call(&[HINCRBY, p.key(1), p.arg(2), Value::Num(-1.0)])?;
    // if (counter == 0) then redis.call('hdel', KEYS[1], ARGV[2]); end;
    if counter.is_num(0.0) {
        cx.call(&[HDEL, p.key(1), p.arg(2)])?;
    }
    // redis.call('del', KEYS[3] .. ':' .. (counter+1));
    let released = cx.add((&counter, "local 'counter'"), (&Value::Num(1.0), "?"))?;
    let timeout = cx.concat(&[p.key(3), COLON, released])?;
    cx.call(&[DEL, timeout])?;
    // if (redis.call('hlen', KEYS[1]) > 1) then
    let hlen = cx.call(&[HLEN, p.key(1)])?;
    if cx.lt(&Value::Num(1.0), &hlen)? {
        // local maxRemainTime = -3;
        let mut max_remain_time = Value::Num(-3.0);
        // local keys = redis.call('hkeys', KEYS[1]);
        let keys = cx.call(&[HKEYS, p.key(1)])?;
        // for n, key in ipairs(keys) do
        for key in ipairs(&keys) {
            // counter = tonumber(redis.call('hget', KEYS[1], key));
            let counter = cx.call(&[HGET, p.key(1), key.clone()])?.tonumber();
            // if type(counter) == 'number' then for i=counter, 1, -1 do
            if let Value::Num(_) = counter {
                for i in cx.numeric_for(&counter, &Value::Num(1.0), -1.0)? {
                    // local remainTime = redis.call('pttl', KEYS[4] .. ':' .. key .. ':rwlock_timeout:' .. i);
                    let timeout = cx.concat(&[p.key(4), COLON, key.clone(), TIMEOUT, Value::Num(i)])?;
                    let remain_time = cx.call(&[PTTL, timeout])?;
                    // maxRemainTime = math.max(remainTime, maxRemainTime);end;
                    max_remain_time = cx.math_max(&[remain_time, max_remain_time])?;
                }
            }
        }
        // if maxRemainTime > 0 then redis.call('pexpire', KEYS[1], maxRemainTime); <set latch 0>; return 0; end;
        if cx.lt(&Value::Num(0.0), &max_remain_time)? {
            cx.call(&[PEXPIRE, p.key(1), max_remain_time])?;
            shape.set_latch(cx, p, 0.0)?;
            return Ok(Value::Num(0.0));
        }
        // if mode == 'write' then <set latch 0>; return 0;end;
        if mode.lua_eq(&WRITE) {
            shape.set_latch(cx, p, 0.0)?;
            return Ok(Value::Num(0.0));
        }
    }
    // redis.call('del', KEYS[1]); <publish>; <set latch 1>; return 1;
    cx.call(&[DEL, p.key(1)])?;
    shape.publish(cx, p)?;
    shape.set_latch(cx, p, 1.0)?;
    Ok(Value::Num(1.0))
}

/// `ipairs(t)` over an array from a reply: its items up to the first nil.
fn ipairs(t: &Value) -> Vec<Value> {
    match t {
        Value::Table(Table::Array(items)) => items.iter().take_while(|v| !matches!(v, Value::Nil)).cloned().collect(),
        _ => Vec::new(),
    }
}

/// `rwlock-read-renew.lua` (3.13.6): the watchdog's renewal of one read
/// lock. KEYS[1] lock, KEYS[2] the lock's timeout-key prefix; ARGV[1]
/// lease ms, ARGV[2] owner. 1 when the owner holds it (every holder's
/// timeout keys renewed too), else 0.
pub fn read_renew(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    if walk_cost(cx, &p.key(1)) > NATIVE_COMMAND_BUDGET {
        return Err(cx.hand_to_lua());
    }
    // local counter = redis.call('hget', KEYS[1], ARGV[2]);
    let counter = cx.call(&[HGET, p.key(1), p.arg(2)])?;
    // if (counter ~= false) then
    if counter.lua_eq(&FALSE) {
        // return 0;
        return Ok(Value::Num(0.0));
    }
    // redis.call('pexpire', KEYS[1], ARGV[1]);
    cx.call(&[PEXPIRE, p.key(1), p.arg(1)])?;
    // if (redis.call('hlen', KEYS[1]) > 1) then
    let hlen = cx.call(&[HLEN, p.key(1)])?;
    if cx.lt(&Value::Num(1.0), &hlen)? {
        // local keys = redis.call('hkeys', KEYS[1]);
        let keys = cx.call(&[HKEYS, p.key(1)])?;
        // for n, key in ipairs(keys) do
        for key in ipairs(&keys) {
            // counter = tonumber(redis.call('hget', KEYS[1], key));
            let counter = cx.call(&[HGET, p.key(1), key.clone()])?.tonumber();
            // if type(counter) == 'number' then for i=counter, 1, -1 do
            if let Value::Num(_) = counter {
                for i in cx.numeric_for(&counter, &Value::Num(1.0), -1.0)? {
                    // redis.call('pexpire', KEYS[2] .. ':' .. key .. ':rwlock_timeout:' .. i, ARGV[1]);
                    let timeout = cx.concat(&[p.key(2), COLON, key.clone(), TIMEOUT, Value::Num(i)])?;
                    cx.call(&[PEXPIRE, timeout, p.arg(1)])?;
                }
            }
        }
    }
    // return 1;
    Ok(Value::Num(1.0))
}

/// The commands `rwlock-read-renew-batch.lua` will run, from ARGV and what
/// the hashes hold now (an upper bound: renewing only shortens later steps).
fn renew_batch_cost(cx: &NativeCtx, p: &Params) -> f64 {
    let mut cost = 0.0;
    let mut arg_idx = 2;
    for i in (1..=p.key_count()).step_by(2) {
        let Some(names) = p.arg(arg_idx).to_number() else { break };
        arg_idx += 1;
        let hash = cx.peek_hash(&p.key(i));
        let mut k = 1.0;
        while k <= names && arg_idx <= p.argv.len() {
            let field = &p.argv[arg_idx - 1];
            cost += 1.0 + hash.and_then(|h| h.get(field)).map_or(0.0, countdown_len);
            arg_idx += 1;
            k += 1.0;
        }
    }
    cost
}

/// `rwlock-read-renew-batch.lua` (4.7.0): the watchdog's renewal of read
/// locks. KEYS in pairs (lock, the lock's timeout-key prefix); ARGV[1]
/// lease ms, then per lock the number of owner names and the names. One 1
/// (some owner holds it: lock and their timeout keys renewed) or 0 per lock.
pub fn read_renew_batch(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    if renew_batch_cost(cx, p) > NATIVE_COMMAND_BUDGET {
        return Err(cx.hand_to_lua());
    }
    // local result = {} local argIdx = 2
    let mut result = Vec::new();
    let mut arg_idx = 2;
    // for i = 1, #KEYS, 2 do
    for i in (1..=p.key_count()).step_by(2) {
        // local anyAlive = false;
        let mut any_alive = false;
        // local lockNamesCount = tonumber(ARGV[argIdx]); argIdx = argIdx + 1;
        let lock_names_count = p.arg(arg_idx).tonumber();
        arg_idx += 1;
        // for k = 1, lockNamesCount do
        for _ in cx.numeric_for(&Value::Num(1.0), &lock_names_count, 1.0)? {
            // local counter = redis.call('hget', KEYS[i], ARGV[argIdx]);
            let counter = cx.call(&[HGET, p.key(i), p.arg(arg_idx)])?;
            // if (counter ~= false) then anyAlive = true;
            if !counter.lua_eq(&FALSE) {
                any_alive = true;
                // for c=counter, 1, -1 do
                for c in cx.numeric_for(&counter, &Value::Num(1.0), -1.0)? {
                    // redis.call('pexpire', KEYS[i+1] .. ':' .. ARGV[argIdx] .. ':rwlock_timeout:' .. c, ARGV[1]);
                    let timeout = cx.concat(&[p.key(i + 1), COLON, p.arg(arg_idx), TIMEOUT, Value::Num(c)])?;
                    cx.call(&[PEXPIRE, timeout, p.arg(1)])?;
                }
            }
            // argIdx = argIdx + 1;
            arg_idx += 1;
        }
        // if (anyAlive) then redis.call('pexpire', KEYS[i], ARGV[1]); table.insert(result, 1);
        if any_alive {
            cx.call(&[PEXPIRE, p.key(i), p.arg(1)])?;
            result.push(Value::Num(1.0));
        } else {
            // else table.insert(result, 0); end;
            result.push(Value::Num(0.0));
        }
    }
    // return result;
    Ok(Value::Table(Table::Array(result)))
}

/// `rwlock-read-islocked.lua` (4.7.0): `ReadLock.isLocked`. KEYS[1] lock.
/// 1 when read-locked, or write-locked with readers inside.
pub fn read_is_locked(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    // local mode = redis.call('hget', KEYS[1], 'mode');
    let mode = cx.call(&[HGET, p.key(1), MODE])?;
    // if (mode == 'read') or (mode == 'write' and redis.call('hlen', KEYS[1]) > 2) then return 1; end;
    if mode.lua_eq(&READ)
        || (mode.lua_eq(&WRITE) && {
            let hlen = cx.call(&[HLEN, p.key(1)])?;
            cx.lt(&Value::Num(2.0), &hlen)?
        })
    {
        return Ok(Value::Num(1.0));
    }
    // return 0;
    Ok(Value::Num(0.0))
}
