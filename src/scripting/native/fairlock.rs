//! The fair lock family (RFairLock), natively: acquire (`lock`/`tryLock`
//! with a wait), acquire without waiting, unlock (4.7.0 with the unlock
//! latch and a publish command from ARGV, 3.13.6 without), and the cleanup
//! after a waiter gave up (one body for both versions).
//!
//! The lock is a hash `KEYS[1]` of `<uuid>:<threadId>` → hold count, as
//! for RLock. Waiters queue in a list (`redisson_lock_queue:{name}`), and a
//! sorted set (`redisson_lock_timeout:{name}`) holds each waiter's
//! deadline, in client milliseconds: every script takes "now" from ARGV,
//! never from the server. Each run first sweeps the queue head while its
//! deadline has passed. The versions differ in that sweep: 4.7.0 stops at
//! a head with no deadline (`timeout ~= false and …`), 3.13.6 compares
//! `tonumber(false)`, which is nil, and raises `attempt to compare nil with
//! number`. An unlock wakes only the next waiter, on
//! `<channel prefix>:<threadId>`.
//!
//! As in `lock.rs`, each function follows its script statement by
//! statement through [`NativeCtx::call`], with the Lua quoted above each
//! step. Numbers the scripts compute (`-tonumber(ARGV[3])` to ZINCRBY, a
//! deadline to ZADD) go to `redis.call` as numbers, which Redis prints with
//! `%.17g`; arithmetic on a call's result that is not a number raises
//! `attempt to perform arithmetic on a nil value`, which names no operand.
//! The sweep and the re-scoring of waiters loop over the queue and the
//! deadlines, so every script first sizes its run from what those hold
//! (without touching them): one so long that the Lua run would be a busy
//! script goes to Lua (see [`NATIVE_COMMAND_BUDGET`]).

use super::{NATIVE_COMMAND_BUDGET, NativeCtx, Params, ScriptError, Table, Value};

const GET: Value = Value::str_static("get");
const SET: Value = Value::str_static("set");
const PX: Value = Value::str_static("px");
const DEL: Value = Value::str_static("del");
const EXISTS: Value = Value::str_static("exists");
const HSET: Value = Value::str_static("hset");
const HEXISTS: Value = Value::str_static("hexists");
const HINCRBY: Value = Value::str_static("hincrby");
const PEXPIRE: Value = Value::str_static("pexpire");
const PTTL: Value = Value::str_static("pttl");
const LINDEX: Value = Value::str_static("lindex");
const LRANGE: Value = Value::str_static("lrange");
const LPOP: Value = Value::str_static("lpop");
const LREM: Value = Value::str_static("lrem");
const RPUSH: Value = Value::str_static("rpush");
const ZADD: Value = Value::str_static("zadd");
const ZSCORE: Value = Value::str_static("zscore");
const ZREM: Value = Value::str_static("zrem");
const ZRANGE: Value = Value::str_static("zrange");
const ZINCRBY: Value = Value::str_static("zincrby");
const PUBLISH: Value = Value::str_static("publish");
const FALSE: Value = Value::Bool(false);
const COLON: Value = Value::str_static(":");
/// An operand Lua cannot name in an arithmetic error (a call's result).
const UNNAMED: &str = "";

/// How a version's sweep treats a queue head without a deadline.
#[derive(Clone, Copy)]
enum Sweep {
    /// 4.7.0: `if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[n])`
    /// — the sweep stops there.
    StopsAtMissing,
    /// 3.13.6: `local timeout = tonumber(redis.call('zscore', …)); if timeout
    /// <= tonumber(ARGV[n])` — nil is compared, and Lua raises.
    ComparesNil,
}

/// The commands a sweep of the queue `KEYS[2]` can take: four per waiter
/// and the LINDEX that finds the queue empty or its head alive.
fn sweep_cost(cx: &NativeCtx, p: &Params) -> f64 {
    4.0 * cx.peek_len(&p.key(2)) as f64 + 1.0
}

/// The sweep every script but `acquire-failed` starts with (`now` is the
/// ARGV index of the client's current time):
/// ```lua
/// while true do local firstThreadId2 = redis.call('lindex', KEYS[2], 0);
/// if firstThreadId2 == false then break;end;
/// <read the head's deadline and compare it with ARGV[now]> then
/// redis.call('zrem', KEYS[3], firstThreadId2);redis.call('lpop', KEYS[2]);
/// else break;end;end;
/// ```
fn sweep(cx: &mut NativeCtx, p: &Params, now: usize, how: Sweep) -> Result<(), ScriptError> {
    loop {
        // local firstThreadId2 = redis.call('lindex', KEYS[2], 0);
        let first = cx.call(&[LINDEX, p.key(2), Value::Num(0.0)])?;
        // if firstThreadId2 == false then break;end;
        if first.lua_eq(&FALSE) {
            return Ok(());
        }
        let timed_out = match how {
            Sweep::StopsAtMissing => {
                // local timeout = redis.call('zscore', KEYS[3], firstThreadId2);
                let timeout = cx.call(&[ZSCORE, p.key(3), first.clone()])?;
                // if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[now]) then
                !timeout.lua_eq(&FALSE) && cx.le(&timeout.tonumber(), &p.arg(now).tonumber())?
            }
            Sweep::ComparesNil => {
                // local timeout = tonumber(redis.call('zscore', KEYS[3], firstThreadId2));
                let timeout = cx.call(&[ZSCORE, p.key(3), first.clone()])?.tonumber();
                // if timeout <= tonumber(ARGV[now]) then
                cx.le(&timeout, &p.arg(now).tonumber())?
            }
        };
        // else break;end;
        if !timed_out {
            return Ok(());
        }
        // redis.call('zrem', KEYS[3], firstThreadId2);
        cx.call(&[ZREM, p.key(3), first])?;
        // redis.call('lpop', KEYS[2]);
        cx.call(&[LPOP, p.key(2)])?;
    }
}

/// The commands an acquire can take after its sweep: at most 12 outside
/// loops, and one ZINCRBY per deadline in `KEYS[3]`.
fn acquire_cost(cx: &NativeCtx, p: &Params) -> f64 {
    sweep_cost(cx, p) + cx.peek_len(&p.key(3)) as f64 + 12.0
}

/// The acquire when the lock is free and nobody else is first in line;
/// `wait` is the ARGV index of the waiter's wait time. True when taken.
/// ```lua
/// if (redis.call('exists', KEYS[1]) == 0) and ((redis.call('exists', KEYS[2]) == 0)
///     or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then
/// ```
fn take_if_free(cx: &mut NativeCtx, p: &Params, wait: usize) -> Result<bool, ScriptError> {
    let free = cx.call(&[EXISTS, p.key(1)])?.is_num(0.0)
        && (cx.call(&[EXISTS, p.key(2)])?.is_num(0.0) || cx.call(&[LINDEX, p.key(2), Value::Num(0.0)])?.lua_eq(&p.arg(2)));
    if !free {
        return Ok(false);
    }
    // redis.call('lpop', KEYS[2]);redis.call('zrem', KEYS[3], ARGV[2]);
    cx.call(&[LPOP, p.key(2)])?;
    cx.call(&[ZREM, p.key(3), p.arg(2)])?;
    // local keys = redis.call('zrange', KEYS[3], 0, -1);
    let keys = cx.call(&[ZRANGE, p.key(3), Value::Num(0.0), Value::Num(-1.0)])?;
    // for i = 1, #keys, 1 do redis.call('zincrby', KEYS[3], -tonumber(ARGV[wait]), keys[i]);end;
    for key in array(&keys) {
        let shift = cx.neg((&p.arg(wait).tonumber(), UNNAMED))?;
        cx.call(&[ZINCRBY, p.key(3), shift, key.clone()])?;
    }
    // redis.call('hset', KEYS[1], ARGV[2], 1);redis.call('pexpire', KEYS[1], ARGV[1]);return nil;
    cx.call(&[HSET, p.key(1), p.arg(2), Value::Num(1.0)])?;
    cx.call(&[PEXPIRE, p.key(1), p.arg(1)])?;
    Ok(true)
}

/// The reentrant acquire by the holder. True when taken.
/// ```lua
/// if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then redis.call('hincrby', KEYS[1], ARGV[2],1);
/// redis.call('pexpire', KEYS[1], ARGV[1]);return nil;end;
/// ```
fn reenter(cx: &mut NativeCtx, p: &Params) -> Result<bool, ScriptError> {
    if !cx.call(&[HEXISTS, p.key(1), p.arg(2)])?.is_num(1.0) {
        return Ok(false);
    }
    cx.call(&[HINCRBY, p.key(1), p.arg(2), Value::Num(1.0)])?;
    cx.call(&[PEXPIRE, p.key(1), p.arg(1)])?;
    Ok(true)
}

/// The items of an array from a reply, as `#t` counts them: up to the
/// first nil (replies hold none).
fn array(t: &Value) -> &[Value] {
    match t {
        Value::Table(Table::Array(items)) => &items[..items.iter().position(|v| matches!(v, Value::Nil)).unwrap_or(items.len())],
        _ => &[],
    }
}

/// `fairlock-acquire.lua` (4.7.0). KEYS[1] lock, KEYS[2] queue, KEYS[3]
/// deadlines; ARGV[1] lease ms, ARGV[2] thread, ARGV[3] wait time, ARGV[4]
/// now. Nil when acquired, else the time to wait: the lock's PTTL (at
/// least 0) for a queued thread, else the queue's wait, as the thread
/// joins it.
pub fn acquire(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    if acquire_cost(cx, p) > NATIVE_COMMAND_BUDGET {
        return Err(cx.hand_to_lua());
    }
    sweep(cx, p, 4, Sweep::StopsAtMissing)?;
    if take_if_free(cx, p, 3)? || reenter(cx, p)? {
        return Ok(Value::Nil);
    }
    // local timeout = redis.call('zscore', KEYS[3], ARGV[2]);
    let timeout = cx.call(&[ZSCORE, p.key(3), p.arg(2)])?;
    // if timeout ~= false then local ttl = redis.call('pttl', KEYS[1]);return math.max(0, ttl); end;
    if !timeout.lua_eq(&FALSE) {
        let ttl = cx.call(&[PTTL, p.key(1)])?;
        return cx.math_max(&[Value::Num(0.0), ttl]);
    }
    // local lastThreadId = redis.call('lindex', KEYS[2], -1);local ttl;
    let last_thread_id = cx.call(&[LINDEX, p.key(2), Value::Num(-1.0)])?;
    // if lastThreadId ~= false and lastThreadId ~= ARGV[2] and redis.call('zscore', KEYS[3], lastThreadId) ~= false then
    let behind_last = !last_thread_id.lua_eq(&FALSE)
        && !last_thread_id.lua_eq(&p.arg(2))
        && !cx.call(&[ZSCORE, p.key(3), last_thread_id.clone()])?.lua_eq(&FALSE);
    let ttl = if behind_last {
        // ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4]);
        let last_timeout = cx.call(&[ZSCORE, p.key(3), last_thread_id])?.tonumber();
        cx.sub((&last_timeout, UNNAMED), (&p.arg(4).tonumber(), UNNAMED))?
    } else {
        // else ttl = redis.call('pttl', KEYS[1]);end;
        cx.call(&[PTTL, p.key(1)])?
    };
    enqueue(cx, p, ttl)
}

/// `fairlock-acquire.lua` (3.13.6): the 3.13.6 sweep; a queued thread gets
/// its own deadline less the wait time and now; the thread joins behind
/// the last waiter whether or not that one has a deadline (none raises).
pub fn acquire_3_13(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    if acquire_cost(cx, p) > NATIVE_COMMAND_BUDGET {
        return Err(cx.hand_to_lua());
    }
    sweep(cx, p, 4, Sweep::ComparesNil)?;
    if take_if_free(cx, p, 3)? || reenter(cx, p)? {
        return Ok(Value::Nil);
    }
    // local timeout = redis.call('zscore', KEYS[3], ARGV[2]);
    let timeout = cx.call(&[ZSCORE, p.key(3), p.arg(2)])?;
    // if timeout ~= false then return timeout - tonumber(ARGV[3]) - tonumber(ARGV[4]);end;
    if !timeout.lua_eq(&FALSE) {
        let less_wait = cx.sub((&timeout, "local 'timeout'"), (&p.arg(3).tonumber(), UNNAMED))?;
        return cx.sub((&less_wait, UNNAMED), (&p.arg(4).tonumber(), UNNAMED));
    }
    // local lastThreadId = redis.call('lindex', KEYS[2], -1);local ttl;
    let last_thread_id = cx.call(&[LINDEX, p.key(2), Value::Num(-1.0)])?;
    // if lastThreadId ~= false and lastThreadId ~= ARGV[2] then
    let ttl = if !last_thread_id.lua_eq(&FALSE) && !last_thread_id.lua_eq(&p.arg(2)) {
        // ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4]);
        let last_timeout = cx.call(&[ZSCORE, p.key(3), last_thread_id])?.tonumber();
        cx.sub((&last_timeout, UNNAMED), (&p.arg(4).tonumber(), UNNAMED))?
    } else {
        // else ttl = redis.call('pttl', KEYS[1]);end;
        cx.call(&[PTTL, p.key(1)])?
    };
    enqueue(cx, p, ttl)
}

/// The end both acquire versions share: the thread's deadline is its wait
/// plus the wait time and now, and it joins the queue if it was not yet
/// in the deadlines.
/// ```lua
/// local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]);
/// if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then redis.call('rpush', KEYS[2], ARGV[2]);end;
/// return ttl;
/// ```
fn enqueue(cx: &mut NativeCtx, p: &Params, ttl: Value) -> Result<Value, ScriptError> {
    let with_wait = cx.add((&ttl, "local 'ttl'"), (&p.arg(3).tonumber(), UNNAMED))?;
    let timeout = cx.add((&with_wait, UNNAMED), (&p.arg(4).tonumber(), UNNAMED))?;
    if cx.call(&[ZADD, p.key(3), timeout, p.arg(2)])?.is_num(1.0) {
        cx.call(&[RPUSH, p.key(2), p.arg(2)])?;
    }
    Ok(ttl)
}

/// `fairlock-tryacquire-nowait.lua` (4.7.0). KEYS[1] lock, KEYS[2] queue,
/// KEYS[3] deadlines; ARGV[1] lease ms, ARGV[2] thread, ARGV[3] now,
/// ARGV[4] wait time. Nil when acquired, else 1.
pub fn try_acquire_nowait(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    try_acquire_nowait_with(cx, p, Sweep::StopsAtMissing)
}

/// `fairlock-tryacquire-nowait.lua` (3.13.6): the same with the 3.13.6 sweep.
pub fn try_acquire_nowait_3_13(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    try_acquire_nowait_with(cx, p, Sweep::ComparesNil)
}

fn try_acquire_nowait_with(cx: &mut NativeCtx, p: &Params, how: Sweep) -> Result<Value, ScriptError> {
    if acquire_cost(cx, p) > NATIVE_COMMAND_BUDGET {
        return Err(cx.hand_to_lua());
    }
    sweep(cx, p, 3, how)?;
    if take_if_free(cx, p, 4)? || reenter(cx, p)? {
        return Ok(Value::Nil);
    }
    // return 1;
    Ok(Value::Num(1.0))
}

/// `fairlock-acquire-failed.lua` (4.7.0 and 3.13.6): a waiter gave up.
/// KEYS[1] queue, KEYS[2] deadlines; ARGV[1] thread, ARGV[2] wait time.
/// Everyone queued behind the thread gets its wait time back, and the
/// thread leaves the queue and the deadlines. Returns nothing (nil).
pub fn acquire_failed(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    if cx.peek_len(&p.key(1)) as f64 + 3.0 > NATIVE_COMMAND_BUDGET {
        return Err(cx.hand_to_lua());
    }
    // local queue = redis.call('lrange', KEYS[1], 0, -1);
    let queue = cx.call(&[LRANGE, p.key(1), Value::Num(0.0), Value::Num(-1.0)])?;
    let queue = array(&queue);
    // local i = 1;while i <= #queue and queue[i] ~= ARGV[1] do i = i + 1;end;i = i + 1;
    let thread = p.arg(1);
    let behind = queue.iter().position(|w| w.lua_eq(&thread)).map_or(queue.len(), |i| i + 1);
    // while i <= #queue do redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), queue[i]);i = i + 1;end;
    for waiter in &queue[behind..] {
        let shift = cx.neg((&p.arg(2).tonumber(), UNNAMED))?;
        cx.call(&[ZINCRBY, p.key(2), shift, waiter.clone()])?;
    }
    // redis.call('zrem', KEYS[2], ARGV[1]);
    cx.call(&[ZREM, p.key(2), thread.clone()])?;
    // redis.call('lrem', KEYS[1], 0, ARGV[1]);
    cx.call(&[LREM, p.key(1), Value::Num(0.0), thread])?;
    Ok(Value::Nil)
}

/// How the two versions' unlocks differ: the unlock latch and the publish
/// command from ARGV (4.7.0), or neither (3.13.6).
struct UnlockShape {
    /// KEYS index of the latch and ARGV index of its PX (4.7.0).
    latch: Option<(usize, usize)>,
    /// ARGV index of the publish command (4.7.0), else a fixed `publish`.
    publish: Option<usize>,
}

impl UnlockShape {
    /// `redis.call('set', KEYS[latch], value, 'px', ARGV[px])` (4.7.0 only).
    fn set_latch(&self, cx: &mut NativeCtx, p: &Params, value: f64) -> Result<(), ScriptError> {
        if let Some((key, px)) = self.latch {
            cx.call(&[SET, p.key(key), Value::Num(value), PX, p.arg(px)])?;
        }
        Ok(())
    }

    /// Wakes the queue head, if any:
    /// ```lua
    /// local nextThreadId = redis.call('lindex', KEYS[2], 0);
    /// if nextThreadId ~= false then redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]); end;
    /// ```
    /// (`'publish'` in 3.13.6).
    fn wake_next(&self, cx: &mut NativeCtx, p: &Params) -> Result<(), ScriptError> {
        let next_thread_id = cx.call(&[LINDEX, p.key(2), Value::Num(0.0)])?;
        if !next_thread_id.lua_eq(&FALSE) {
            let channel = cx.concat(&[p.key(4), COLON, next_thread_id])?;
            let command = self.publish.map_or(PUBLISH, |i| p.arg(i));
            cx.call(&[command, channel, p.arg(1)])?;
        }
        Ok(())
    }
}

/// `fairlock-unlock.lua` (4.7.0). KEYS[1] lock, KEYS[2] queue, KEYS[3]
/// deadlines, KEYS[4] channel prefix, KEYS[5] unlock latch; ARGV[1]
/// message, ARGV[2] lease ms, ARGV[3] thread, ARGV[4] now, ARGV[5] publish
/// command, ARGV[6] latch PX. Nil when not the holder, 0 when still held,
/// 1 when released (or already free); a repeated request answers from the
/// latch.
pub fn unlock(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    let shape = UnlockShape {
        latch: Some((5, 6)),
        publish: Some(5),
    };
    unlock_with(cx, p, &shape)
}

/// `fairlock-unlock.lua` (3.13.6): no latch, a fixed `publish`, the 3.13.6
/// sweep. KEYS[1] lock, KEYS[2] queue, KEYS[3] deadlines, KEYS[4] channel
/// prefix; ARGV[1] message, ARGV[2] lease ms, ARGV[3] thread, ARGV[4] now.
pub fn unlock_3_13(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    let shape = UnlockShape {
        latch: None,
        publish: None,
    };
    unlock_with(cx, p, &shape)
}

fn unlock_with(cx: &mut NativeCtx, p: &Params, shape: &UnlockShape) -> Result<Value, ScriptError> {
    if sweep_cost(cx, p) + 12.0 > NATIVE_COMMAND_BUDGET {
        return Err(cx.hand_to_lua());
    }
    let how = if let Some((latch, _)) = shape.latch {
        // local val = redis.call('get', KEYS[5]); if val ~= false then return tonumber(val);end;
        let val = cx.call(&[GET, p.key(latch)])?;
        if !val.lua_eq(&FALSE) {
            return Ok(val.tonumber());
        }
        Sweep::StopsAtMissing
    } else {
        Sweep::ComparesNil
    };
    sweep(cx, p, 4, how)?;
    // if (redis.call('exists', KEYS[1]) == 0) then <wake the next>; <set latch 1>; return 1; end;
    if cx.call(&[EXISTS, p.key(1)])?.is_num(0.0) {
        shape.wake_next(cx, p)?;
        shape.set_latch(cx, p, 1.0)?;
        return Ok(Value::Num(1.0));
    }
    // if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end;
    if cx.call(&[HEXISTS, p.key(1), p.arg(3)])?.is_num(0.0) {
        return Ok(Value::Nil);
    }
    // local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
    let counter = cx.call(&[HINCRBY, p.key(1), p.arg(3), Value::Num(-1.0)])?;
    // if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); <set latch 0>; return 0; end;
    if cx.lt(&Value::Num(0.0), &counter)? {
        cx.call(&[PEXPIRE, p.key(1), p.arg(2)])?;
        shape.set_latch(cx, p, 0.0)?;
        return Ok(Value::Num(0.0));
    }
    // redis.call('del', KEYS[1]); <set latch 1>; <wake the next>; return 1;
    cx.call(&[DEL, p.key(1)])?;
    shape.set_latch(cx, p, 1.0)?;
    shape.wake_next(cx, p)?;
    Ok(Value::Num(1.0))
}
