//! The reentrant lock family (RLock), natively: acquire, unlock (with the
//! 4.7.0 unlock latch), force unlock, watchdog renewal (batched in 4.7.0,
//! one lock per call in 3.13.6), and the acquire and unlock of releases
//! older than 3.13.6 (`seed-2018`), which
//! write the first hold with HSET and publish on unlocking a missing lock.
//!
//! The lock is a hash `KEYS[1]` of `<uuid>:<threadId>` → hold count with a
//! PEXPIRE lease. Each function follows its script statement by statement
//! (the Lua is quoted above each step), calling the same commands in the
//! same order through [`NativeCtx::call`], so every effect, error and
//! MONITOR line is the Lua run's. Keys, lease and owner are passed on as
//! the script passes them, even when missing or malformed: the command or
//! `redis.call` then fails exactly as it does under Lua.

use super::{NativeCtx, Params, ScriptError, Table, Value};

const EXISTS: Value = Value::str_static("exists");
const HEXISTS: Value = Value::str_static("hexists");
const HINCRBY: Value = Value::str_static("hincrby");
const HSET: Value = Value::str_static("hset");
const PEXPIRE: Value = Value::str_static("pexpire");
const PTTL: Value = Value::str_static("pttl");
const GET: Value = Value::str_static("get");
const SET: Value = Value::str_static("set");
const PX: Value = Value::str_static("px");
const DEL: Value = Value::str_static("del");
const PUBLISH: Value = Value::str_static("publish");

/// `lock-acquire.lua` (4.7.0 and 3.13.6). KEYS[1] lock; ARGV[1] lease ms,
/// ARGV[2] owner. Nil when acquired, else the lock's PTTL.
pub fn acquire(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    // if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then
    let free = cx.call(&[EXISTS, p.key(1)])?.is_num(0.0);
    if free || cx.call(&[HEXISTS, p.key(1), p.arg(2)])?.is_num(1.0) {
        // redis.call('hincrby', KEYS[1], ARGV[2], 1);
        cx.call(&[HINCRBY, p.key(1), p.arg(2), Value::Num(1.0)])?;
        // redis.call('pexpire', KEYS[1], ARGV[1]);
        cx.call(&[PEXPIRE, p.key(1), p.arg(1)])?;
        // return nil;
        return Ok(Value::Nil);
    }
    // return redis.call('pttl', KEYS[1]);
    cx.call(&[PTTL, p.key(1)])
}

/// `lock-unlock.lua` (4.7.0). KEYS[1] lock, KEYS[2] channel, KEYS[3]
/// unlock latch; ARGV[1] message, ARGV[2] lease ms, ARGV[3] owner,
/// ARGV[4] publish command, ARGV[5] latch PX. Nil when not the owner, 0
/// when still held, 1 when released; a repeated request answers from the
/// latch.
pub fn unlock(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    // local val = redis.call('get', KEYS[3]); if val ~= false then return tonumber(val);end;
    let val = cx.call(&[GET, p.key(3)])?;
    if !val.lua_eq(&Value::Bool(false)) {
        return Ok(val.tonumber());
    }
    // if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end;
    if cx.call(&[HEXISTS, p.key(1), p.arg(3)])?.is_num(0.0) {
        return Ok(Value::Nil);
    }
    // local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
    let counter = cx.call(&[HINCRBY, p.key(1), p.arg(3), Value::Num(-1.0)])?;
    // if (counter > 0) then
    if cx.lt(&Value::Num(0.0), &counter)? {
        // redis.call('pexpire', KEYS[1], ARGV[2]);
        cx.call(&[PEXPIRE, p.key(1), p.arg(2)])?;
        // redis.call('set', KEYS[3], 0, 'px', ARGV[5]); return 0;
        cx.call(&[SET, p.key(3), Value::Num(0.0), PX, p.arg(5)])?;
        Ok(Value::Num(0.0))
    } else {
        // redis.call('del', KEYS[1]);
        cx.call(&[DEL, p.key(1)])?;
        // redis.call(ARGV[4], KEYS[2], ARGV[1]);
        cx.call(&[p.arg(4), p.key(2), p.arg(1)])?;
        // redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1;
        cx.call(&[SET, p.key(3), Value::Num(1.0), PX, p.arg(5)])?;
        Ok(Value::Num(1.0))
    }
}

/// `lock-unlock.lua` (3.13.6): no latch, a fixed `publish`. KEYS[1] lock,
/// KEYS[2] channel; ARGV[1] message, ARGV[2] lease ms, ARGV[3] owner.
pub fn unlock_3_13(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    // if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end;
    if cx.call(&[HEXISTS, p.key(1), p.arg(3)])?.is_num(0.0) {
        return Ok(Value::Nil);
    }
    // local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
    let counter = cx.call(&[HINCRBY, p.key(1), p.arg(3), Value::Num(-1.0)])?;
    // if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0;
    if cx.lt(&Value::Num(0.0), &counter)? {
        cx.call(&[PEXPIRE, p.key(1), p.arg(2)])?;
        Ok(Value::Num(0.0))
    } else {
        // else redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; end;
        cx.call(&[DEL, p.key(1)])?;
        cx.call(&[PUBLISH, p.key(2), p.arg(1)])?;
        Ok(Value::Num(1.0))
    }
}

/// `lock-acquire.lua` of releases older than 3.13.6 (`seed-2018`): the
/// first hold is written by HSET, a reentry counted by HINCRBY. KEYS[1]
/// lock; ARGV[1] lease ms, ARGV[2] owner. Nil when acquired, else the
/// lock's PTTL.
pub fn acquire_2018(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    // if (redis.call('exists', KEYS[1]) == 0) then
    if cx.call(&[EXISTS, p.key(1)])?.is_num(0.0) {
        // redis.call('hset', KEYS[1], ARGV[2], 1);
        cx.call(&[HSET, p.key(1), p.arg(2), Value::Num(1.0)])?;
        // redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end;
        cx.call(&[PEXPIRE, p.key(1), p.arg(1)])?;
        return Ok(Value::Nil);
    }
    // if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    if cx.call(&[HEXISTS, p.key(1), p.arg(2)])?.is_num(1.0) {
        // redis.call('hincrby', KEYS[1], ARGV[2], 1);
        cx.call(&[HINCRBY, p.key(1), p.arg(2), Value::Num(1.0)])?;
        // redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end;
        cx.call(&[PEXPIRE, p.key(1), p.arg(1)])?;
        return Ok(Value::Nil);
    }
    // return redis.call('pttl', KEYS[1]);
    cx.call(&[PTTL, p.key(1)])
}

/// `lock-unlock.lua` of releases older than 3.13.6 (`seed-2018`): a lock
/// that is gone is announced again and answers 1; otherwise the body
/// goes on as 3.13.6's unlock, byte for byte. KEYS[1] lock, KEYS[2]
/// channel; ARGV[1] message, ARGV[2] lease ms, ARGV[3] owner.
pub fn unlock_2018(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    // if (redis.call('exists', KEYS[1]) == 0) then redis.call('publish', KEYS[2], ARGV[1]); return 1; end;
    if cx.call(&[EXISTS, p.key(1)])?.is_num(0.0) {
        cx.call(&[PUBLISH, p.key(2), p.arg(1)])?;
        return Ok(Value::Num(1.0));
    }
    unlock_3_13(cx, p)
}

/// `lock-force-unlock.lua` (4.7.0). KEYS[1] lock, KEYS[2] channel;
/// ARGV[1] message, ARGV[2] publish command. 1 when a lock was deleted.
pub fn force_unlock(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    // if (redis.call('del', KEYS[1]) == 1) then redis.call(ARGV[2], KEYS[2], ARGV[1]); return 1 else return 0 end
    if cx.call(&[DEL, p.key(1)])?.is_num(1.0) {
        cx.call(&[p.arg(2), p.key(2), p.arg(1)])?;
        Ok(Value::Num(1.0))
    } else {
        Ok(Value::Num(0.0))
    }
}

/// `lock-force-unlock.lua` (3.13.6): the same with a fixed `publish`.
pub fn force_unlock_3_13(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    // if (redis.call('del', KEYS[1]) == 1) then redis.call('publish', KEYS[2], ARGV[1]); return 1 else return 0 end
    if cx.call(&[DEL, p.key(1)])?.is_num(1.0) {
        cx.call(&[PUBLISH, p.key(2), p.arg(1)])?;
        Ok(Value::Num(1.0))
    } else {
        Ok(Value::Num(0.0))
    }
}

/// `lock-renew-batch.lua` (4.7.0): the watchdog's renewal of every lock in
/// KEYS; ARGV[1] lease ms, ARGV[i+1] the owner of KEYS[i]. One 1 (renewed)
/// or 0 (not held) per key.
pub fn renew_batch(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    // local result = {}
    let mut result = Vec::with_capacity(p.key_count());
    // for i = 1, #KEYS, 1 do
    for i in 1..=p.key_count() {
        // if (redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1) then
        if cx.call(&[HEXISTS, p.key(i), p.arg(i + 1)])?.is_num(1.0) {
            // redis.call('pexpire', KEYS[i], ARGV[1]); table.insert(result, 1);
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

/// `lock-renew.lua` (3.13.6): one lock. KEYS[1] lock; ARGV[1] lease ms,
/// ARGV[2] owner. 1 when renewed.
pub fn renew(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    // if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('pexpire', KEYS[1], ARGV[1]); return 1; end; return 0;
    if cx.call(&[HEXISTS, p.key(1), p.arg(2)])?.is_num(1.0) {
        cx.call(&[PEXPIRE, p.key(1), p.arg(1)])?;
        return Ok(Value::Num(1.0));
    }
    Ok(Value::Num(0.0))
}
