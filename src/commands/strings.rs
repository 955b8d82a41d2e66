//! String commands: GET/SET and their variants, counters, ranges.
//!
//! Numbers are stored as their text, as Redis stores what clients send;
//! counters parse with Redis's strict integer rules and INCRBYFLOAT uses
//! long double arithmetic so results print exactly as Redis prints them.
//!
//! GET, MGET, STRLEN, GETRANGE and the GET of GETSET, GETDEL, GETEX and
//! `SET … GET` count keyspace hits and misses (a key of another type is a
//! hit); the counters, APPEND and SETRANGE look the key up for writing, as
//! Redis does, and count nothing.

use bytes::{Bytes, BytesMut};

use super::args::{parse_i64, upper};
use super::table::{CommandSpec, cmd, flag::*};
use super::{Args, CmdError, CmdResult, Ctx, Reply};
use crate::db::value::owned;
use crate::db::{NOTIFY_GENERIC, NOTIFY_STRING, Value};
use crate::numfmt::LongDouble;

pub const COMMANDS: &[CommandSpec] = &[
    cmd("get", 2, get).flags(READONLY | FAST),
    cmd("set", -3, set).flags(WRITE | DENYOOM),
    cmd("setnx", 3, setnx).flags(WRITE | DENYOOM | FAST),
    cmd("setex", 4, setex).flags(WRITE | DENYOOM),
    cmd("psetex", 4, psetex).flags(WRITE | DENYOOM),
    cmd("getset", 3, getset).flags(WRITE | DENYOOM | FAST),
    cmd("getdel", 2, getdel).flags(WRITE | FAST),
    cmd("getex", -2, getex).flags(WRITE | FAST),
    cmd("mget", -2, mget).flags(READONLY | FAST),
    cmd("mset", -3, mset).flags(WRITE | DENYOOM),
    cmd("msetnx", -3, msetnx).flags(WRITE | DENYOOM),
    cmd("incr", 2, incr).flags(WRITE | DENYOOM | FAST),
    cmd("decr", 2, decr).flags(WRITE | DENYOOM | FAST),
    cmd("incrby", 3, incrby).flags(WRITE | DENYOOM | FAST),
    cmd("decrby", 3, decrby).flags(WRITE | DENYOOM | FAST),
    cmd("incrbyfloat", 3, incrbyfloat).flags(WRITE | DENYOOM | FAST),
    cmd("append", 3, append).flags(WRITE | DENYOOM | FAST),
    cmd("strlen", 2, strlen).flags(READONLY | FAST),
    cmd("getrange", 4, getrange).flags(READONLY),
    cmd("substr", 4, getrange).flags(READONLY),
    cmd("setrange", 4, setrange).flags(WRITE | DENYOOM),
];

/// Reads a string key, counting the lookup as Redis's `lookupKeyRead`
/// does (a key of another type is a hit): `None` when missing, WRONGTYPE
/// for other types.
pub fn get_string(ctx: &mut Ctx, key: &[u8]) -> CmdResult<Option<Bytes>> {
    ctx.read(key).map(|v| v.as_str().cloned()).transpose()
}

/// A string key for writing, looked up as Redis's `lookupKeyWrite` does:
/// an expired key is reclaimed, nothing is counted. `None` when missing,
/// WRONGTYPE for other types.
fn peek_string(ctx: &mut Ctx, key: &[u8]) -> CmdResult<Option<Bytes>> {
    let now = ctx.now_ms;
    ctx.db().get(key, now).map(|v| v.as_str().cloned()).transpose()
}

fn get(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Ok(Reply::opt_bulk(get_string(ctx, &argv[1])?))
}

/// When a key's TTL is set by SET / GETEX / SETEX.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Expiry {
    Keep,
    Clear,
    At(u64),
}

/// Redis's `getExpireMillisecondsOrReply`: a relative or absolute time in
/// seconds or milliseconds, validated, as an absolute deadline.
fn expire_deadline(ctx: &Ctx, raw: &[u8], seconds: bool, relative: bool, cmd: &str) -> CmdResult<u64> {
    let n = parse_i64(raw)?;
    if n <= 0 || (seconds && n > i64::MAX / 1000) {
        return Err(CmdError::invalid_expire(cmd));
    }
    let ms = if seconds { n * 1000 } else { n };
    let at = if relative { ms.checked_add(ctx.now_ms as i64) } else { Some(ms) };
    match at {
        Some(at) if at > 0 => Ok(at as u64),
        _ => Err(CmdError::invalid_expire(cmd)),
    }
}

#[derive(Default)]
struct SetOptions {
    nx: bool,
    xx: bool,
    get: bool,
    keep_ttl: bool,
    persist: bool,
    /// (unit in seconds?, relative?, raw value)
    expire: Option<(bool, bool, Bytes)>,
}

/// Redis's `parseExtendedStringArgumentsOrReply`, shared by SET and GETEX.
fn parse_set_options(args: &mut Args, is_set: bool) -> CmdResult<SetOptions> {
    let mut o = SetOptions::default();
    while let Some(opt) = args.next() {
        let has_next = args.remaining() > 0;
        let any_expire = o.expire.is_some();
        let kind = o.expire.as_ref().map(|(s, r, _)| (*s, *r));
        match upper(opt).as_str() {
            "NX" if is_set && !o.xx => o.nx = true,
            "XX" if is_set && !o.nx => o.xx = true,
            "GET" if is_set => o.get = true,
            "KEEPTTL" if is_set && !o.persist && !any_expire => o.keep_ttl = true,
            "PERSIST" if !is_set && !any_expire && !o.keep_ttl => o.persist = true,
            "EX" if !o.keep_ttl && !o.persist && kind.is_none_or(|k| k == (true, true)) && has_next => {
                o.expire = Some((true, true, args.req()?.clone()))
            }
            "PX" if !o.keep_ttl && !o.persist && kind.is_none_or(|k| k == (false, true)) && has_next => {
                o.expire = Some((false, true, args.req()?.clone()))
            }
            "EXAT" if !o.keep_ttl && !o.persist && kind.is_none_or(|k| k == (true, false)) && has_next => {
                o.expire = Some((true, false, args.req()?.clone()))
            }
            "PXAT" if !o.keep_ttl && !o.persist && kind.is_none_or(|k| k == (false, false)) && has_next => {
                o.expire = Some((false, false, args.req()?.clone()))
            }
            _ => return Err(CmdError::syntax()),
        }
    }
    Ok(o)
}

fn set(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut args = Args::new(argv);
    args.next();
    args.next();
    let o = parse_set_options(&mut args, true)?;
    let expiry = match &o.expire {
        Some((secs, rel, raw)) => Expiry::At(expire_deadline(ctx, raw, *secs, *rel, "set")?),
        None if o.keep_ttl => Expiry::Keep,
        None => Expiry::Clear,
    };
    let key = &argv[1];
    let old = if o.get { get_string(ctx, key)? } else { None };
    let now = ctx.now_ms;
    let exists = ctx.db().contains(key, now);
    if (o.nx && exists) || (o.xx && !exists) {
        return Ok(if o.get { Reply::opt_bulk(old) } else { Reply::Nil });
    }
    store(ctx, key, argv[2].clone(), expiry);
    if ctx.propagating() {
        if let Expiry::At(at) = expiry {
            propagate_set_pxat(ctx, key, &argv[2], at);
        } else if o.get {
            // Replayed without GET, which may be repeated.
            let kept = argv.iter().enumerate().filter(|(i, a)| *i < 3 || !a.eq_ignore_ascii_case(b"get"));
            ctx.propagate_as(kept.map(|(_, a)| a.clone()).collect());
        }
    }
    Ok(if o.get { Reply::opt_bulk(old) } else { Reply::OK })
}

/// A SET with a deadline is replayed as `SET key value PXAT deadline`.
fn propagate_set_pxat(ctx: &mut Ctx, key: &Bytes, value: &Bytes, at: u64) {
    if ctx.propagating() {
        let at = Bytes::copy_from_slice(itoa::Buffer::new().format(at).as_bytes());
        ctx.propagate_as(vec![
            Bytes::from_static(b"SET"),
            key.clone(),
            value.clone(),
            Bytes::from_static(b"PXAT"),
            at,
        ]);
    }
}

/// Redis's `setKey`: the key is looked up for writing first, so an expired
/// one is reclaimed (and counted in `expired_keys`) before it is replaced.
fn store(ctx: &mut Ctx, key: &Bytes, value: Bytes, expiry: Expiry) {
    let now = ctx.now_ms;
    let db = ctx.db();
    db.expire_if_needed(key, now);
    db.set(key, Value::Str(owned(&value)), expiry == Expiry::Keep);
    db.notify(NOTIFY_STRING, "set", key);
    if let Expiry::At(at) = expiry {
        db.set_expire(key, at);
        db.notify(NOTIFY_GENERIC, "expire", key);
    }
}

fn setnx(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let now = ctx.now_ms;
    if ctx.db().contains(&argv[1], now) {
        return Ok(Reply::Int(0));
    }
    store(ctx, &argv[1], argv[2].clone(), Expiry::Clear);
    Ok(Reply::Int(1))
}

fn setex(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let at = expire_deadline(ctx, &argv[2], true, true, "setex")?;
    store(ctx, &argv[1], argv[3].clone(), Expiry::At(at));
    propagate_set_pxat(ctx, &argv[1], &argv[3], at);
    Ok(Reply::OK)
}

fn psetex(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let at = expire_deadline(ctx, &argv[2], false, true, "psetex")?;
    store(ctx, &argv[1], argv[3].clone(), Expiry::At(at));
    propagate_set_pxat(ctx, &argv[1], &argv[3], at);
    Ok(Reply::OK)
}

fn getset(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let old = get_string(ctx, &argv[1])?;
    store(ctx, &argv[1], argv[2].clone(), Expiry::Clear);
    ctx.propagate_as_words(&[b"SET", &argv[1], &argv[2]]);
    Ok(Reply::opt_bulk(old))
}

fn getdel(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let old = get_string(ctx, &argv[1])?;
    if old.is_some() {
        let db = ctx.db();
        db.remove(&argv[1]);
        db.notify(NOTIFY_GENERIC, "del", &argv[1]);
        ctx.propagate_as_words(&[b"DEL", &argv[1]]);
    }
    Ok(Reply::opt_bulk(old))
}

fn getex(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut args = Args::new(argv);
    args.next();
    let o = parse_set_options(&mut args, false)?;
    let key = &argv[1];
    // Redis's getexCommand reads the key before it validates the expire
    // time: a missing key answers nil whatever the time.
    let Some(value) = get_string(ctx, key)? else {
        return Ok(Reply::Nil);
    };
    let deadline = match &o.expire {
        Some((secs, rel, raw)) => Some(expire_deadline(ctx, raw, *secs, *rel, "getex")?),
        None => None,
    };
    let expired = deadline.is_some_and(|at| ctx.already_expired(at as i64));
    let db = ctx.db();
    // Replayed as the change it made: DEL, PEXPIREAT or PERSIST.
    if let Some(at) = deadline {
        if expired {
            db.remove(key);
            db.notify(NOTIFY_GENERIC, "del", key);
            ctx.propagate_as_words(&[b"DEL", key]);
        } else {
            db.set_expire(key, at);
            db.notify(NOTIFY_GENERIC, "expire", key);
            ctx.propagate_as_words(&[b"PEXPIREAT", key, itoa::Buffer::new().format(at).as_bytes()]);
        }
    } else if o.persist && db.persist(key) {
        db.notify(NOTIFY_GENERIC, "persist", key);
        ctx.propagate_as_words(&[b"PERSIST", key]);
    }
    Ok(Reply::Bulk(value))
}

fn mget(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut out = Vec::with_capacity(argv.len() - 1);
    for key in &argv[1..] {
        // A key of another type is a hit that answers nil.
        out.push(match ctx.read(key) {
            Some(Value::Str(s)) => Reply::Bulk(s.clone()),
            _ => Reply::Nil,
        });
    }
    Ok(Reply::Array(out))
}

fn mset(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len().is_multiple_of(2) {
        return Err(CmdError::arity(&String::from_utf8_lossy(&argv[0]).to_ascii_lowercase()));
    }
    for pair in argv[1..].chunks(2) {
        store(ctx, &pair[0], pair[1].clone(), Expiry::Clear);
    }
    ctx.dirty(argv.len() as u64 / 2);
    Ok(Reply::OK)
}

fn msetnx(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len().is_multiple_of(2) {
        return Err(CmdError::arity("msetnx"));
    }
    let now = ctx.now_ms;
    for pair in argv[1..].chunks(2) {
        if ctx.db().contains(&pair[0], now) {
            return Ok(Reply::Int(0));
        }
    }
    for pair in argv[1..].chunks(2) {
        store(ctx, &pair[0], pair[1].clone(), Expiry::Clear);
    }
    ctx.dirty(argv.len() as u64 / 2);
    Ok(Reply::Int(1))
}

/// Adds `by` to the integer at `key`, keeping its TTL.
pub fn incr_by(ctx: &mut Ctx, key: &Bytes, by: i64) -> CmdResult<i64> {
    let current = peek_string(ctx, key)?;
    let current_exists = current.is_some();
    let current = match current {
        Some(s) => crate::numfmt::parse_i64(&s).ok_or_else(CmdError::not_integer)?,
        None => 0,
    };
    let next = current.checked_add(by).ok_or_else(CmdError::overflow)?;
    let mut buf = itoa::Buffer::new();
    let text = Bytes::copy_from_slice(buf.format(next).as_bytes());
    let db = ctx.db();
    // A key not there (or past its deadline, kept on a replica) is made
    // anew, with no deadline.
    db.set(key, Value::Str(text), current_exists);
    db.notify(NOTIFY_STRING, "incrby", key);
    Ok(next)
}

fn incr(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    incr_by(ctx, &argv[1], 1).map(Reply::Int)
}

fn decr(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    incr_by(ctx, &argv[1], -1).map(Reply::Int)
}

fn incrby(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let by = parse_i64(&argv[2])?;
    incr_by(ctx, &argv[1], by).map(Reply::Int)
}

fn decrby(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let by = parse_i64(&argv[2])?;
    if by == i64::MIN {
        return Err(CmdError::err("decrement would overflow"));
    }
    incr_by(ctx, &argv[1], -by).map(Reply::Int)
}

fn incrbyfloat(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let key = &argv[1];
    let current = peek_string(ctx, key)?;
    let current_exists = current.is_some();
    let current = match current {
        Some(s) => LongDouble::parse(&s).ok_or_else(CmdError::not_float)?,
        None => LongDouble::parse(b"0").ok_or_else(CmdError::not_float)?,
    };
    let by = LongDouble::parse(&argv[2]).ok_or_else(CmdError::not_float)?;
    let next = current.add(by);
    if !next.is_finite() {
        return Err(CmdError::err("increment would produce NaN or Infinity"));
    }
    let text = Bytes::from(next.to_human());
    let db = ctx.db();
    db.set(key, Value::Str(text.clone()), current_exists);
    db.notify(NOTIFY_STRING, "incrbyfloat", key);
    // Replayed as the value it left, whatever the float formatting.
    ctx.propagate_as_words(&[b"SET", key, &text, b"KEEPTTL"]);
    Ok(Reply::Bulk(text))
}

/// Largest string a write may produce (Redis's proto-max-bulk-len check).
fn check_string_length(ctx: &Ctx, len: u64) -> CmdResult<()> {
    let max = ctx.state.runtime.proto_max_bulk_len as u64;
    if len > max {
        return Err(CmdError::err("string exceeds maximum allowed size (proto-max-bulk-len)"));
    }
    Ok(())
}

fn append(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let key = &argv[1];
    let old = peek_string(ctx, key)?;
    let appended = old.is_some();
    let new = match old {
        None => owned(&argv[2]),
        Some(old) => {
            check_string_length(ctx, old.len() as u64 + argv[2].len() as u64)?;
            let mut b = BytesMut::with_capacity(old.len() + argv[2].len());
            b.extend_from_slice(&old);
            b.extend_from_slice(&argv[2]);
            b.freeze()
        }
    };
    let len = new.len();
    let db = ctx.db();
    db.set(key, Value::Str(new), appended);
    if appended {
        // Redis appends to its own copy of the string: it is raw now.
        db.mark_raw(key);
    }
    db.notify(NOTIFY_STRING, "append", key);
    Ok(Reply::Int(len as i64))
}

fn strlen(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(get_string(ctx, &argv[1])?.map_or(0, |s| s.len()) as i64))
}

fn getrange(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut start = parse_i64(&argv[2])?;
    let mut end = parse_i64(&argv[3])?;
    let s = get_string(ctx, &argv[1])?.unwrap_or_default();
    let len = s.len() as i64;
    if start < 0 && end < 0 && start > end {
        return Ok(Reply::Bulk(Bytes::new()));
    }
    if start < 0 {
        start += len;
    }
    if end < 0 {
        end += len;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= len {
        end = len - 1;
    }
    if start > end || len == 0 {
        return Ok(Reply::Bulk(Bytes::new()));
    }
    Ok(Reply::Bulk(s.slice(start as usize..=end as usize)))
}

fn setrange(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let key = &argv[1];
    let offset = parse_i64(&argv[2])?;
    if offset < 0 {
        return Err(CmdError::err("offset is out of range"));
    }
    let value = &argv[3];
    let old = peek_string(ctx, key)?;
    if value.is_empty() {
        return Ok(Reply::Int(old.map_or(0, |s| s.len()) as i64));
    }
    check_string_length(ctx, offset as u64 + value.len() as u64)?;
    let existed = old.is_some();
    let old = old.unwrap_or_default();
    let offset = offset as usize;
    let mut b = BytesMut::from(&old[..]);
    if b.len() < offset + value.len() {
        b.resize(offset + value.len(), 0);
    }
    b[offset..offset + value.len()].copy_from_slice(value);
    let len = b.len();
    let db = ctx.db();
    db.set(key, Value::Str(b.freeze()), existed);
    db.mark_raw(key);
    db.notify(NOTIFY_STRING, "setrange", key);
    Ok(Reply::Int(len as i64))
}
