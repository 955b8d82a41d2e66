//! The permit-expirable semaphore family (RPermitExpirableSemaphore),
//! natively: acquire, release and `availablePermits`, each in its 4.7.0
//! form (publish command from ARGV; acquire takes several permit ids and
//! answers 'OK') and its 3.13.6 form (fixed `publish`; one id, returned).
//!
//! The semaphore is a string `KEYS[1]` holding the free permit count, plus
//! a sorted set (`redisson__timeout__set:{name}`) of the permits handed
//! out, each scored with the time it expires (a far-future score for
//! permits without a lease). The client passes "now" in ARGV; permits
//! scored between 0 and now are reclaimed first: removed with one
//! variadic ZREM (`unpack(expiredIds)`), added back to the count, and the
//! new count published when positive.
//!
//! `unpack` is Lua 5.1's: it cannot return 8,000 values (its C stack
//! limit, `LUAI_MAXCSTACK`), and Redis then raises `too many results to
//! unpack`; up to 7,999 values it works, in keylock's VM as in Redis's.
//! Before its first command a run sizes the reclaim from the set as it
//! stands (without touching it), and one that may meet
//! [`RECLAIM_NATIVE_LIMIT`] expired permits or more goes to Lua, which
//! answers as it answers. Acquire's loop over the permit ids is sized the
//! same way against [`NATIVE_COMMAND_BUDGET`].
//!
//! As in `lock.rs`, each function follows its script statement by
//! statement through [`NativeCtx::call`], with the Lua quoted above each
//! step.

use super::{NATIVE_COMMAND_BUDGET, NativeCtx, Params, ScriptError, Table, Value, lua};
use crate::db::zset::ScoreRange;

/// The most expired permits a native run reclaims: well below the 8,000
/// values past which Lua's `unpack` and `redis.call` fail.
pub const RECLAIM_NATIVE_LIMIT: usize = 4_000;

const GET: Value = Value::str_static("get");
const INCRBY: Value = Value::str_static("incrby");
const DECRBY: Value = Value::str_static("decrby");
const ZADD: Value = Value::str_static("zadd");
const ZREM: Value = Value::str_static("zrem");
const ZSCORE: Value = Value::str_static("zscore");
const ZRANGE: Value = Value::str_static("zrange");
const ZRANGEBYSCORE: Value = Value::str_static("zrangebyscore");
const LIMIT: Value = Value::str_static("limit");
const WITHSCORES: Value = Value::str_static("WITHSCORES");
const PTTL: Value = Value::str_static("pttl");
const PEXPIRE: Value = Value::str_static("pexpire");
const PUBLISH: Value = Value::str_static("publish");
const FALSE: Value = Value::Bool(false);

/// How many ids `zrangebyscore <timeouts> 0 <now> limit 0 <limit>` may
/// return, from the set as it stands: an upper bound (a limit that does
/// not read as a plain count is ignored; an unreadable `now` makes the
/// command fail before any `unpack`), counted no further than needed.
fn expired_bound(cx: &NativeCtx, timeouts: &Value, now: &Value, limit: &Value) -> usize {
    let (Some(set), Value::Str(now)) = (cx.peek_zset(timeouts), now) else {
        return 0;
    };
    let Some(range) = ScoreRange::parse(b"0", now) else { return 0 };
    if range.is_empty() {
        return 0;
    }
    let cap = match limit {
        Value::Str(l) => std::str::from_utf8(l).ok().and_then(|l| l.parse::<usize>().ok()),
        _ => None,
    }
    .unwrap_or(usize::MAX)
    .min(RECLAIM_NATIVE_LIMIT);
    set.range_by_score(range.min, range.max).take(cap).count()
}

/// True when the run must go to Lua (checked before any command).
fn too_large_for_native(cx: &NativeCtx, p: &Params, now: &Value, limit: &Value, ids: usize) -> bool {
    expired_bound(cx, &p.key(2), now, limit) >= RECLAIM_NATIVE_LIMIT || ids as f64 > NATIVE_COMMAND_BUDGET
}

/// Where a version's acquire and `availablePermits` read their inputs.
struct Reclaim {
    /// ARGV index of "now".
    now: usize,
    /// ARGV index of the publish command (4.7.0), else a fixed `publish`.
    publish: Option<usize>,
}

impl Reclaim {
    /// `local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[now], 'limit', 0, limit);
    /// if #expiredIds > 0 then redis.call('zrem', KEYS[2], unpack(expiredIds));
    /// local value = redis.call('incrby', KEYS[1], #expiredIds);
    /// if tonumber(value) > 0 then redis.call(<publish>, KEYS[3], value); end; …`:
    /// the new count when any permit expired.
    fn run(&self, cx: &mut NativeCtx, p: &Params, limit: Value) -> Result<Option<Value>, ScriptError> {
        let zero = Value::Num(0.0);
        let expired = cx.call(&[ZRANGEBYSCORE, p.key(2), zero.clone(), p.arg(self.now), LIMIT, zero, limit])?;
        let ids = array(expired);
        // #expiredIds > 0
        if ids.is_empty() {
            return Ok(None);
        }
        let count = Value::Num(ids.len() as f64);
        let mut zrem = Vec::with_capacity(ids.len() + 2);
        zrem.extend([ZREM, p.key(2)]);
        zrem.extend(ids);
        cx.call(&zrem)?;
        let value = cx.call(&[INCRBY, p.key(1), count])?;
        if cx.lt(&Value::Num(0.0), &value.tonumber())? {
            let publish = self.publish.map_or(PUBLISH, |i| p.arg(i));
            cx.call(&[publish, p.key(3), value.clone()])?;
        }
        Ok(Some(value))
    }
}

/// The items of an array reply (a ZRANGE / ZRANGEBYSCORE reply is one).
fn array(v: Value) -> Vec<Value> {
    match v {
        Value::Table(Table::Array(items)) => items,
        _ => Vec::new(),
    }
}

/// `v[i]` on an array reply: nil past its end.
fn item(v: &[Value], i: usize) -> Value {
    v.get(i - 1).cloned().unwrap_or(Value::Nil)
}

/// `pesemaphore-available-permits.lua` (4.7.0). KEYS[1] semaphore,
/// KEYS[2] timeouts, KEYS[3] channel; ARGV[1] now, ARGV[2] publish
/// command. The count after reclaiming expired permits: an integer when
/// any were reclaimed, else the stored string (0 when absent).
pub fn available_permits(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    let reclaim = Reclaim { now: 1, publish: Some(2) };
    available_permits_with(cx, p, &reclaim)
}

/// `pesemaphore-available-permits.lua` (3.13.6): a fixed `publish`.
pub fn available_permits_3_13(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    let reclaim = Reclaim { now: 1, publish: None };
    available_permits_with(cx, p, &reclaim)
}

fn available_permits_with(cx: &mut NativeCtx, p: &Params, reclaim: &Reclaim) -> Result<Value, ScriptError> {
    let all = Value::Num(-1.0);
    if too_large_for_native(cx, p, &p.arg(reclaim.now), &all, 0) {
        return Err(cx.hand_to_lua());
    }
    // local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1], 'limit', 0, -1); if #expiredIds > 0 then …
    if let Some(value) = reclaim.run(cx, p, all)? {
        // return value; end;
        return Ok(value);
    }
    // local ret = redis.call('get', KEYS[1]); return ret == false and 0 or ret;
    let ret = cx.call(&[GET, p.key(1)])?;
    Ok(if ret.lua_eq(&FALSE) { Value::Num(0.0) } else { ret })
}

/// `pesemaphore-release.lua` (4.7.0). KEYS[1] semaphore, KEYS[2]
/// channel, KEYS[3] timeouts; ARGV[1] permit id, ARGV[2] permits, ARGV[3]
/// now, ARGV[4] publish command. 0 when the permit was not held; else the
/// permit goes back and the new count is published: 1, or 0 when the
/// permit had already expired.
pub fn release(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    // local expire = redis.call('zscore', KEYS[3], ARGV[1]);
    let expire = cx.call(&[ZSCORE, p.key(3), p.arg(1)])?;
    // local removed = redis.call('zrem', KEYS[3], ARGV[1]); if tonumber(removed) ~= 1 then return 0;end;
    let removed = cx.call(&[ZREM, p.key(3), p.arg(1)])?;
    if !removed.tonumber().is_num(1.0) {
        return Ok(Value::Num(0.0));
    }
    // local value = redis.call('incrby', KEYS[1], ARGV[2]);
    let value = cx.call(&[INCRBY, p.key(1), p.arg(2)])?;
    // redis.call(ARGV[4], KEYS[2], value);
    cx.call(&[p.arg(4), p.key(2), value])?;
    // if tonumber(expire) <= tonumber(ARGV[3]) then return 0;end;
    if cx.le(&expire.tonumber(), &p.arg(3).tonumber())? {
        return Ok(Value::Num(0.0));
    }
    // return 1;
    Ok(Value::Num(1.0))
}

/// `pesemaphore-release.lua` (3.13.6): no expiry check, a fixed
/// `publish`. KEYS[1] semaphore, KEYS[2] channel, KEYS[3] timeouts;
/// ARGV[1] permit id, ARGV[2] permits. 1 when released, 0 when not held.
pub fn release_3_13(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    // local removed = redis.call('zrem', KEYS[3], ARGV[1]); if tonumber(removed) ~= 1 then return 0;end;
    let removed = cx.call(&[ZREM, p.key(3), p.arg(1)])?;
    if !removed.tonumber().is_num(1.0) {
        return Ok(Value::Num(0.0));
    }
    // local value = redis.call('incrby', KEYS[1], ARGV[2]);
    let value = cx.call(&[INCRBY, p.key(1), p.arg(2)])?;
    // redis.call('publish', KEYS[2], value); return 1;
    cx.call(&[PUBLISH, p.key(2), value])?;
    Ok(Value::Num(1.0))
}

/// `pesemaphore-tryacquire.lua` (4.7.0). KEYS[1] semaphore, KEYS[2]
/// timeouts, KEYS[3] channel; ARGV[1] permits, ARGV[2] the new permits'
/// expiry, ARGV[3] now, ARGV[4] the no-lease score, ARGV[5] publish
/// command, ARGV[6…] the new permit ids. 'OK' when acquired; else
/// `:<expiry>` of the permit expiring first, or nil when that one has no
/// lease (or none is out).
pub fn try_acquire(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    let reclaim = Reclaim { now: 3, publish: Some(5) };
    let ids = p.argv.len().saturating_sub(5);
    if too_large_for_native(cx, p, &p.arg(reclaim.now), &p.arg(1), ids) {
        return Err(cx.hand_to_lua());
    }
    // local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1]); if #expiredIds > 0 then … end;
    reclaim.run(cx, p, p.arg(1))?;
    // local value = redis.call('get', KEYS[1]); if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then
    if take_permits(cx, p)? {
        // for i = 6, #ARGV, 1 do redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]); end;
        for i in 6..=p.argv.len() {
            cx.call(&[ZADD, p.key(2), p.arg(2), p.arg(i)])?;
        }
        extend_timeouts(cx, p)?;
        // return 'OK'; end;
        return Ok(Value::str_static("OK"));
    }
    first_expiry(cx, p, 4)
}

/// `pesemaphore-tryacquire.lua` (3.13.6). KEYS as in 4.7.0; ARGV[1]
/// permits, ARGV[2] the new permit's expiry, ARGV[3] its id, ARGV[4] now,
/// ARGV[5] the no-lease score. The id when acquired; else as in 4.7.0.
pub fn try_acquire_3_13(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    let reclaim = Reclaim { now: 4, publish: None };
    if too_large_for_native(cx, p, &p.arg(reclaim.now), &p.arg(1), 1) {
        return Err(cx.hand_to_lua());
    }
    // local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[4], 'limit', 0, ARGV[1]); if #expiredIds > 0 then … end;
    reclaim.run(cx, p, p.arg(1))?;
    // local value = redis.call('get', KEYS[1]); if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then
    if take_permits(cx, p)? {
        // redis.call('zadd', KEYS[2], ARGV[2], ARGV[3]);
        cx.call(&[ZADD, p.key(2), p.arg(2), p.arg(3)])?;
        extend_timeouts(cx, p)?;
        // return ARGV[3]; end;
        return Ok(p.arg(3));
    }
    first_expiry(cx, p, 5)
}

/// `local value = redis.call('get', KEYS[1]); if (value ~= false and
/// tonumber(value) >= tonumber(ARGV[1])) then redis.call('decrby', KEYS[1], ARGV[1]);`:
/// true when the permits were taken.
fn take_permits(cx: &mut NativeCtx, p: &Params) -> Result<bool, ScriptError> {
    let value = cx.call(&[GET, p.key(1)])?;
    if !value.lua_eq(&FALSE) && cx.le(&p.arg(1).tonumber(), &value.tonumber())? {
        cx.call(&[DECRBY, p.key(1), p.arg(1)])?;
        return Ok(true);
    }
    Ok(false)
}

/// `local ttl = redis.call('pttl', KEYS[1]); if ttl > 0 then
/// redis.call('pexpire', KEYS[2], ttl); end;`: the permits expire with the
/// semaphore.
fn extend_timeouts(cx: &mut NativeCtx, p: &Params) -> Result<(), ScriptError> {
    let ttl = cx.call(&[PTTL, p.key(1)])?;
    if cx.lt(&Value::Num(0.0), &ttl)? {
        cx.call(&[PEXPIRE, p.key(2), ttl])?;
    }
    Ok(())
}

/// `local v = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES'); if v[1]
/// ~= nil and v[2] ~= ARGV[no_lease] then return ':' .. tostring(v[2]); end
/// return nil;`
fn first_expiry(cx: &mut NativeCtx, p: &Params, no_lease: usize) -> Result<Value, ScriptError> {
    let zero = Value::Num(0.0);
    let v = array(cx.call(&[ZRANGE, p.key(2), zero.clone(), zero, WITHSCORES])?);
    let score = item(&v, 2);
    if !item(&v, 1).lua_eq(&Value::Nil) && !score.lua_eq(&p.arg(no_lease)) {
        // A RESP2 WITHSCORES reply holds bulk strings only, never a table
        // (whose `tostring` is an address only the VM knows).
        let text = lua::tostring(&score).unwrap_or_default();
        return Ok(Value::Str([&b":"[..], &text].concat().into()));
    }
    Ok(Value::Nil)
}
