//! The multi-key PEXPIRE Redisson's `RExpirable.expire` sends over several
//! keys at once (MultiLock and RedLock leases), natively. Like the other
//! families it follows its script statement by statement through
//! [`NativeCtx::call`], with the Lua quoted above each step.

use super::{NativeCtx, Params, ScriptError, Value};

const PEXPIRE: Value = Value::str_static("pexpire");

/// `keys-pexpire.lua` (4.7.0): `RExpirable.expire` over every key in KEYS;
/// ARGV[1] ms, ARGV[2] an optional NX|XX|GT|LT ('' for none). 1 when any
/// key's expiry was set.
pub fn keys_pexpire(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    // local result = 0;
    let mut result = Value::Num(0.0);
    // for j = 1, #KEYS, 1 do local expireSet;
    for j in 1..=p.key_count() {
        let flag = p.arg(2);
        // if ARGV[2] ~= '' then expireSet = redis.call('pexpire', KEYS[j], ARGV[1], ARGV[2]);
        let expire_set = if !flag.lua_eq(&Value::str_static("")) {
            cx.call(&[PEXPIRE, p.key(j), p.arg(1), flag])?
        } else {
            // else expireSet = redis.call('pexpire', KEYS[j], ARGV[1]); end;
            cx.call(&[PEXPIRE, p.key(j), p.arg(1)])?
        };
        // if expireSet == 1 then result = expireSet;end;
        if expire_set.is_num(1.0) {
            result = expire_set;
        }
    }
    // return result;
    Ok(result)
}
