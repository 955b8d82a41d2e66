//! The semaphore family (RSemaphore), natively: acquire (one body for
//! 4.7.0 and 3.13.6), release and `trySetPermits` (4.7.0 with the publish
//! command from ARGV, 3.13.6 with a fixed `publish`).
//!
//! The semaphore is a string `KEYS[1]` holding the free permit count;
//! releases and `trySetPermits` publish the new count on `KEYS[2]`
//! (`redisson_sc:{name}`). The count is whatever the key holds: acquire
//! compares it with Lua's `tonumber` on both sides, so a non-numeric count
//! or permit argument raises Lua's own comparison error, and a count Lua
//! reads but DECRBY does not (`1.5`, `0x10`) fails in the command.
//!
//! As in `lock.rs`, each function follows its script statement by
//! statement through [`NativeCtx::call`], with the Lua quoted above each
//! step.

use super::{NativeCtx, Params, ScriptError, Value};

const GET: Value = Value::str_static("get");
const SET: Value = Value::str_static("set");
const INCRBY: Value = Value::str_static("incrby");
const DECRBY: Value = Value::str_static("decrby");
const PUBLISH: Value = Value::str_static("publish");
const FALSE: Value = Value::Bool(false);

/// `semaphore-tryacquire.lua` (4.7.0 and 3.13.6). KEYS[1] semaphore;
/// ARGV[1] permits. 1 when the permits were taken, else 0.
pub fn try_acquire(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    // local value = redis.call('get', KEYS[1]);
    let value = cx.call(&[GET, p.key(1)])?;
    // if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then
    if !value.lua_eq(&FALSE) && cx.le(&p.arg(1).tonumber(), &value.tonumber())? {
        // local val = redis.call('decrby', KEYS[1], ARGV[1]); return 1;
        cx.call(&[DECRBY, p.key(1), p.arg(1)])?;
        return Ok(Value::Num(1.0));
    }
    // return 0;
    Ok(Value::Num(0.0))
}

/// `semaphore-release.lua` (4.7.0). KEYS[1] semaphore, KEYS[2] channel;
/// ARGV[1] permits, ARGV[2] publish command. Returns nothing (nil).
pub fn release(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    release_with(cx, p, p.arg(2))
}

/// `semaphore-release.lua` (3.13.6): the same with a fixed `publish`.
pub fn release_3_13(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    release_with(cx, p, PUBLISH)
}

fn release_with(cx: &mut NativeCtx, p: &Params, publish: Value) -> Result<Value, ScriptError> {
    // local value = redis.call('incrby', KEYS[1], ARGV[1]);
    let value = cx.call(&[INCRBY, p.key(1), p.arg(1)])?;
    // redis.call(ARGV[2], KEYS[2], value); / redis.call('publish', KEYS[2], value);
    cx.call(&[publish, p.key(2), value])?;
    Ok(Value::Nil)
}

/// `semaphore-trysetpermits.lua` (4.7.0). KEYS[1] semaphore, KEYS[2]
/// channel; ARGV[1] permits, ARGV[2] publish command. 1 when the count
/// was set (the key was absent), else 0.
pub fn try_set_permits(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    // local value = redis.call('get', KEYS[1]); if (value == false) then
    let value = cx.call(&[GET, p.key(1)])?;
    if value.lua_eq(&FALSE) {
        return set_permits(cx, p, p.arg(2));
    }
    // return 0;
    Ok(Value::Num(0.0))
}

/// `semaphore-trysetpermits.lua` (3.13.6): a fixed `publish`, and a test
/// against `0` that a GET reply (a string or false) never passes.
pub fn try_set_permits_3_13(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    // local value = redis.call('get', KEYS[1]); if (value == false or value == 0) then
    let value = cx.call(&[GET, p.key(1)])?;
    if value.lua_eq(&FALSE) || value.is_num(0.0) {
        return set_permits(cx, p, PUBLISH);
    }
    // return 0;
    Ok(Value::Num(0.0))
}

fn set_permits(cx: &mut NativeCtx, p: &Params, publish: Value) -> Result<Value, ScriptError> {
    // redis.call('set', KEYS[1], ARGV[1]);
    cx.call(&[SET, p.key(1), p.arg(1)])?;
    // redis.call(ARGV[2], KEYS[2], ARGV[1]); / redis.call('publish', KEYS[2], ARGV[1]);
    cx.call(&[publish, p.key(2), p.arg(1)])?;
    // return 1;
    Ok(Value::Num(1.0))
}
