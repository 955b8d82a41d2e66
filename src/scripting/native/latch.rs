//! The count-down latch family (RCountDownLatch), natively: `countDown`
//! and `trySetCount` (4.7.0 with the publish command from ARGV, 3.13.6
//! with a fixed `publish`).
//!
//! The latch is a string `KEYS[1]` holding the remaining count; it is
//! deleted when the count reaches zero (or below), and the waiters on
//! `KEYS[2]` (`redisson_countdownlatch__channel__{name}`) are told when it
//! reaches exactly zero and when a new count is set. A count DECR cannot
//! read fails in the command, as under Lua.
//!
//! As in `lock.rs`, each function follows its script statement by
//! statement through [`NativeCtx::call`], with the Lua quoted above each
//! step.

use super::{NativeCtx, Params, ScriptError, Value};

const DECR: Value = Value::str_static("decr");
const DEL: Value = Value::str_static("del");
const EXISTS: Value = Value::str_static("exists");
const SET: Value = Value::str_static("set");
const PUBLISH: Value = Value::str_static("publish");

/// `latch-countdown.lua` (4.7.0). KEYS[1] latch, KEYS[2] channel; ARGV[1]
/// the zero message, ARGV[2] publish command. Returns nothing (nil).
pub fn count_down(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    count_down_with(cx, p, p.arg(2))
}

/// `latch-countdown.lua` (3.13.6): the same with a fixed `publish`.
pub fn count_down_3_13(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    count_down_with(cx, p, PUBLISH)
}

fn count_down_with(cx: &mut NativeCtx, p: &Params, publish: Value) -> Result<Value, ScriptError> {
    // local v = redis.call('decr', KEYS[1]);
    let v = cx.call(&[DECR, p.key(1)])?;
    // if v <= 0 then redis.call('del', KEYS[1]) end;
    if cx.le(&v, &Value::Num(0.0))? {
        cx.call(&[DEL, p.key(1)])?;
    }
    // if v == 0 then redis.call(ARGV[2], KEYS[2], ARGV[1]) end;
    if v.is_num(0.0) {
        cx.call(&[publish, p.key(2), p.arg(1)])?;
    }
    Ok(Value::Nil)
}

/// `latch-trysetcount.lua` (4.7.0). KEYS[1] latch, KEYS[2] channel;
/// ARGV[1] the new-count message, ARGV[2] count, ARGV[3] publish command.
/// 1 when the count was set (the latch was absent), else 0.
pub fn try_set_count(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    try_set_count_with(cx, p, p.arg(3))
}

/// `latch-trysetcount.lua` (3.13.6): the same with a fixed `publish`.
pub fn try_set_count_3_13(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    try_set_count_with(cx, p, PUBLISH)
}

fn try_set_count_with(cx: &mut NativeCtx, p: &Params, publish: Value) -> Result<Value, ScriptError> {
    // if redis.call('exists', KEYS[1]) == 0 then
    if cx.call(&[EXISTS, p.key(1)])?.is_num(0.0) {
        // redis.call('set', KEYS[1], ARGV[2]);
        cx.call(&[SET, p.key(1), p.arg(2)])?;
        // redis.call(ARGV[3], KEYS[2], ARGV[1]); / redis.call('publish', KEYS[2], ARGV[1]);
        cx.call(&[publish, p.key(2), p.arg(1)])?;
        // return 1
        return Ok(Value::Num(1.0));
    }
    // else return 0 end
    Ok(Value::Num(0.0))
}
