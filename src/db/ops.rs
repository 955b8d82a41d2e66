//! The keyspace operations behind the commands Redisson's lock scripts
//! run, typed and on a key's position: HEXISTS, HINCRBY, PEXPIRE, PTTL and
//! the plain SET / DEL / GET steps. The command handlers and the direct
//! runs of the lock scripts (`scripting::native::direct`) both call these,
//! so a direct run cannot drift from the command it stands for.
//!
//! Finding the key stays with the caller ([`Db::live_position`], which
//! expires a key past its deadline on the way): a handler counts the
//! lookup as a read or not as its command does, and a direct run looks
//! each key up once for several steps.

use bytes::Bytes;

use super::hash::PackLimits;
use super::{Db, NOTIFY_GENERIC, NOTIFY_HASH, NOTIFY_STRING, Value};
use crate::error::{CmdError, CmdResult};
use crate::numfmt;

/// HEXISTS on the key at `at`: whether its hash has `field`.
pub fn hexists(db: &Db, at: Option<usize>, field: &[u8]) -> CmdResult<bool> {
    match at {
        None => Ok(false),
        Some(at) => Ok(db.value_at(at).as_hash()?.contains_key(field)),
    }
}

/// HINCRBY on the key at `at` (`None`: absent, a hash is created): adds
/// `by` to the integer in `field` (0 when absent) and stores it. Returns
/// the key's position and the new value, or HINCRBY's error with nothing
/// changed.
pub fn hincrby(db: &mut Db, key: &[u8], at: Option<usize>, field: &[u8], by: i64, limits: PackLimits) -> CmdResult<(usize, i64)> {
    let current = match at {
        Some(at) => match db.value_at(at).as_hash()?.get(field) {
            Some(v) => numfmt::parse_i64(v).ok_or_else(|| CmdError::err("hash value is not an integer"))?,
            None => 0,
        },
        None => 0,
    };
    let next = current.checked_add(by).ok_or_else(CmdError::overflow)?;
    let at = match at {
        Some(at) => at,
        None => db.insert_absent(key, Value::new_hash()),
    };
    if let Value::Hash(h) = db.value_at_mut(at, key) {
        h.insert(field, itoa::Buffer::new().format(next).as_bytes(), limits);
    }
    db.notify(NOTIFY_HASH, "hincrby", key);
    Ok((at, next))
}

/// PTTL on the key at `at`: -2 absent, -1 without a deadline, else the
/// milliseconds left.
pub fn pttl(db: &Db, at: Option<usize>, now_ms: u64) -> i64 {
    match at {
        None => -2,
        Some(at) => db
            .expire_at_position(at)
            .map_or(-1, |deadline| deadline.saturating_sub(now_ms) as i64),
    }
}

/// PEXPIRE's effect for a deadline after now: the key at `at` expires
/// then. Whether anything was set.
pub fn set_deadline(db: &mut Db, at: Option<usize>, key: &[u8], deadline_ms: u64) -> bool {
    match at {
        Some(at) => {
            db.set_expire_at_position(at, key, deadline_ms);
            db.notify(NOTIFY_GENERIC, "expire", key);
            true
        }
        None => false,
    }
}

/// `SET key value PX ms`: looks the key up first (SET's NX/XX lookup,
/// which expires it), then stores the string with its deadline.
pub fn set_with_deadline(db: &mut Db, key: &[u8], value: Bytes, deadline_ms: u64, now_ms: u64) {
    db.contains(key, now_ms);
    db.set(key, Value::Str(value), false);
    db.set_expire(key, deadline_ms);
    db.notify(NOTIFY_STRING, "set", key);
    db.notify(NOTIFY_GENERIC, "expire", key);
}

/// DEL of one key: whether it existed (a key past its deadline did not).
pub fn del(db: &mut Db, key: &[u8], now_ms: u64) -> bool {
    db.expire_if_needed(key, now_ms);
    let removed = db.remove(key).is_some();
    if removed {
        db.notify(NOTIFY_GENERIC, "del", key);
    }
    removed
}
