//! The cluster-detection probe Redisson 4.7.0 sends by EVAL once per
//! connection: two GETs of keys in different slots, which a cluster refuses
//! with CROSSSLOT and a single node answers with nil.

use super::{NativeCtx, Params, ScriptError, Value};

const GET: Value = Value::str_static("get");

/// `cluster-detect-probe.lua` (4.7.0, sent by EVAL once per client):
/// nil on a single node; CROSSSLOT would mean a cluster.
pub fn cluster_detect_probe(cx: &mut NativeCtx, p: &Params) -> Result<Value, ScriptError> {
    // redis.call('get', KEYS[1]) redis.call('get', KEYS[2])
    cx.call(&[GET, p.key(1)])?;
    cx.call(&[GET, p.key(2)])?;
    Ok(Value::Nil)
}
