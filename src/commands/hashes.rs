//! Hash commands: fields and values under one key.
//!
//! A hash is an insertion-ordered map (`db::value::Hash`). Redis 7.0 keeps
//! a small hash (at most 128 fields, every field and value at most 64
//! bytes) as a listpack, whose order is the order fields were first set,
//! and clients see that order in HGETALL, HKEYS, HVALS, HSCAN and
//! HRANDFIELD; keylock keeps it (a packed hash is that list, see
//! `db::hash`). HSCAN of a packed hash returns everything in one call with
//! cursor 0, as Redis does for a listpack; larger hashes are walked by
//! index. As in Redis, a hash never turns back into a packed one.
//!
//! Counters follow Redis: HINCRBY with strict 64-bit integers and overflow
//! checks, HINCRBYFLOAT with long double arithmetic printed as Redis prints
//! it. Reads count keyspace hits and misses as Redis's `lookupKeyRead` does
//! (a WRONGTYPE key is a hit); writes do not. Writes that change nothing
//! (HDEL of absent fields, HSETNX of a present one) leave the key unmodified
//! for WATCH, as in Redis.

use bytes::Bytes;

use super::args::parse_i64;
use super::keys::{parse_scan, scan_reply};
use super::sets::{parse_random_count, repeated_picks, sample_distinct, scan_window};
use super::table::{CommandSpec, cmd, flag::*};
use super::{CmdError, CmdResult, Ctx, Reply};
use crate::db::value::Hash;
use crate::db::{NOTIFY_GENERIC, NOTIFY_HASH, Value, ops, typed};
use crate::glob;
use crate::numfmt::LongDouble;

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("hset", -4, hset).flags(WRITE | DENYOOM | FAST),
    cmd("hsetnx", 4, hsetnx).flags(WRITE | DENYOOM | FAST),
    cmd("hget", 3, hget).flags(READONLY | FAST),
    cmd("hmset", -4, hmset).flags(WRITE | DENYOOM | FAST),
    cmd("hmget", -3, hmget).flags(READONLY | FAST),
    cmd("hdel", -3, hdel).flags(WRITE | FAST),
    cmd("hexists", 3, hexists).flags(READONLY | FAST),
    cmd("hlen", 2, hlen).flags(READONLY | FAST),
    cmd("hkeys", 2, hkeys).flags(READONLY),
    cmd("hvals", 2, hvals).flags(READONLY),
    cmd("hgetall", 2, hgetall).flags(READONLY),
    cmd("hincrby", 4, hincrby).flags(WRITE | DENYOOM | FAST),
    cmd("hincrbyfloat", 4, hincrbyfloat).flags(WRITE | DENYOOM | FAST),
    cmd("hstrlen", 3, hstrlen).flags(READONLY | FAST),
    cmd("hscan", -3, hscan).flags(READONLY),
    cmd("hrandfield", -2, hrandfield).flags(READONLY),
];

/// Reads a hash key, counting the lookup: `None` when missing.
fn read_hash<'c>(ctx: &'c mut Ctx, key: &[u8]) -> CmdResult<Option<&'c Hash>> {
    typed(ctx.read(key), Value::as_hash)
}

/// A hash key for writing, without counting the lookup: `None` when missing.
fn peek_hash<'c>(ctx: &'c mut Ctx, key: &[u8]) -> CmdResult<Option<&'c Hash>> {
    let now = ctx.now_ms;
    typed(ctx.db().get(key, now), Value::as_hash)
}

/// The hash at `key` for writing, created empty if missing. A key of
/// another type is a WRONGTYPE error and is left untouched.
fn write_hash<'c>(ctx: &'c mut Ctx, key: &Bytes) -> CmdResult<&'c mut Hash> {
    let now = ctx.now_ms;
    let db = ctx.db();
    if let Some(v) = db.get(key, now) {
        v.as_hash()?;
    }
    db.get_or_insert_with(key, now, Value::new_hash).as_hash_mut()
}

/// HSET and HMSET: sets every field/value pair; returns how many fields
/// were new. An odd number of field/value arguments is an arity error.
fn set_fields(ctx: &mut Ctx, argv: &[Bytes], name: &str) -> CmdResult<usize> {
    if !argv.len().is_multiple_of(2) {
        return Err(CmdError::arity(name));
    }
    let limits = ctx.state.runtime.hash_limits;
    let hash = write_hash(ctx, &argv[1])?;
    let mut created = 0;
    for pair in argv[2..].chunks(2) {
        if hash.insert(&pair[0], &pair[1], limits) {
            created += 1;
        }
    }
    ctx.db().notify(NOTIFY_HASH, "hset", &argv[1]);
    ctx.dirty(argv.len() as u64 / 2 - 1);
    Ok(created)
}

fn hset(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    set_fields(ctx, argv, "hset").map(Reply::from)
}

fn hmset(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    set_fields(ctx, argv, "hmset").map(|_| Reply::OK)
}

fn hsetnx(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (key, field) = (&argv[1], &argv[2]);
    if peek_hash(ctx, key)?.is_some_and(|h| h.contains_key(field)) {
        return Ok(Reply::Int(0));
    }
    let limits = ctx.state.runtime.hash_limits;
    write_hash(ctx, key)?.insert(field, &argv[3], limits);
    ctx.db().notify(NOTIFY_HASH, "hset", key);
    Ok(Reply::Int(1))
}

fn hget(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let value = read_hash(ctx, &argv[1])?.and_then(|h| h.get(&argv[2]).map(Bytes::copy_from_slice));
    Ok(Reply::opt_bulk(value))
}

fn hmget(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let hash = read_hash(ctx, &argv[1])?;
    let values = argv[2..]
        .iter()
        .map(|f| Reply::opt_bulk(hash.and_then(|h| h.get(f).map(Bytes::copy_from_slice))))
        .collect();
    Ok(Reply::Array(values))
}

fn hdel(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (key, fields) = (&argv[1], &argv[2..]);
    match peek_hash(ctx, key)? {
        Some(h) if fields.iter().any(|f| h.contains_key(f)) => {}
        _ => return Ok(Reply::Int(0)),
    }
    let now = ctx.now_ms;
    let db = ctx.db();
    let Some(value) = db.get_mut(key, now) else {
        return Ok(Reply::Int(0));
    };
    let hash = value.as_hash_mut()?;
    let removed = fields.iter().filter(|f| hash.remove(f)).count();
    db.notify(NOTIFY_HASH, "hdel", key);
    if db.remove_if_empty(key) {
        db.notify(NOTIFY_GENERIC, "del", key);
    }
    ctx.dirty(removed as u64);
    Ok(Reply::from(removed))
}

fn hexists(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let at = ctx.read_position(&argv[1]);
    Ok(Reply::from(ops::hexists(ctx.db(), at, &argv[2])?))
}

fn hlen(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Ok(Reply::from(read_hash(ctx, &argv[1])?.map_or(0, |h| h.len())))
}

fn hstrlen(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let len = read_hash(ctx, &argv[1])?.and_then(|h| h.get(&argv[2])).map_or(0, |v| v.len());
    Ok(Reply::from(len))
}

fn hkeys(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let hash = read_hash(ctx, &argv[1])?;
    Ok(Reply::bulks(hash.into_iter().flat_map(|h| h.keys().map(Bytes::copy_from_slice))))
}

fn hvals(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let hash = read_hash(ctx, &argv[1])?;
    Ok(Reply::bulks(hash.into_iter().flat_map(|h| h.values().map(Bytes::copy_from_slice))))
}

fn hgetall(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let hash = read_hash(ctx, &argv[1])?;
    let pairs = hash
        .into_iter()
        .flat_map(|h| h.iter())
        .map(|(f, v)| (Reply::Bulk(Bytes::copy_from_slice(f)), Reply::Bulk(Bytes::copy_from_slice(v))))
        .collect();
    Ok(Reply::Map(pairs))
}

fn hincrby(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let by = parse_i64(&argv[3])?;
    let at = ctx.write_position(&argv[1]);
    let limits = ctx.state.runtime.hash_limits;
    let (_, next) = ops::hincrby(ctx.db(), &argv[1], at, &argv[2], by, limits)?;
    Ok(Reply::Int(next))
}

fn hincrbyfloat(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (key, field) = (&argv[1], &argv[2]);
    let by = LongDouble::parse(&argv[3]).ok_or_else(CmdError::not_float)?;
    if !by.is_finite() {
        return Err(CmdError::err("value is NaN or Infinity"));
    }
    let current = match peek_hash(ctx, key)?.and_then(|h| h.get(field)) {
        Some(v) => LongDouble::parse(v).ok_or_else(|| CmdError::err("hash value is not a float"))?,
        None => LongDouble::parse(b"0").ok_or_else(CmdError::not_float)?,
    };
    let next = current.add(by);
    if !next.is_finite() {
        return Err(CmdError::err("increment would produce NaN or Infinity"));
    }
    let text = Bytes::from(next.to_human());
    let limits = ctx.state.runtime.hash_limits;
    write_hash(ctx, key)?.insert(field, &text, limits);
    ctx.db().notify(NOTIFY_HASH, "hincrbyfloat", key);
    // Replayed as the value it left, whatever the float formatting.
    ctx.propagate_as_words(&[b"HSET", key, field, &text]);
    Ok(Reply::Bulk(text))
}

fn hscan(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    // The cursor is validated before the key is looked up, the options after.
    parse_scan(&argv[..3], 2, false)?;
    let Some(hash) = read_hash(ctx, &argv[1])? else {
        return Ok(scan_reply(0, Vec::new()));
    };
    let o = parse_scan(argv, 2, false)?;
    let keep = |f: &[u8]| o.pattern.as_ref().is_none_or(|p| glob::matches(p, f, false));
    let flatten = |pairs: &mut dyn Iterator<Item = (&[u8], &[u8])>| -> Vec<Bytes> {
        pairs
            .filter(|(f, _)| keep(f))
            .flat_map(|(f, v)| [Bytes::copy_from_slice(f), Bytes::copy_from_slice(v)])
            .collect()
    };
    if hash.is_packed() {
        return Ok(scan_reply(0, flatten(&mut hash.iter())));
    }
    let (next, window) = scan_window(o.cursor, o.count, hash.len());
    Ok(scan_reply(next, flatten(&mut window.filter_map(|i| hash.get_index(i)))))
}

/// `HRANDFIELD key [count [WITHVALUES]]`.
fn hrandfield(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() == 2 {
        let Some(hash) = read_hash(ctx, &argv[1])? else {
            return Ok(Reply::Nil);
        };
        let picked = if hash.is_empty() {
            None
        } else {
            hash.get_index(fastrand::usize(..hash.len()))
        };
        return Ok(Reply::opt_bulk(picked.map(|(f, _)| Bytes::copy_from_slice(f))));
    }
    let count = parse_random_count(&argv[2])?;
    let with_values = match argv.get(3) {
        None => false,
        Some(opt) if argv.len() == 4 && opt.eq_ignore_ascii_case(b"WITHVALUES") => true,
        Some(_) => return Err(CmdError::syntax()),
    };
    if with_values && count.unsigned_abs() > (i64::MAX / 2) as u64 {
        return Err(CmdError::err("value is out of range"));
    }
    let resp3 = ctx.client.resp >= 3;
    let gauge = ctx.reply_gauge();
    let Some(hash) = read_hash(ctx, &argv[1])? else {
        return Ok(Reply::Array(Vec::new()));
    };
    let len = hash.len();
    if count == 0 || len == 0 {
        return Ok(Reply::Array(Vec::new()));
    }
    let field = |f: &[u8]| Reply::Bulk(Bytes::copy_from_slice(f));
    let push_pick = |out: &mut Vec<Reply>, (f, v): (&[u8], &[u8])| match (with_values, resp3) {
        (false, _) => out.push(field(f)),
        (true, true) => out.push(Reply::Array(vec![field(f), field(v)])),
        (true, false) => out.extend([field(f), field(v)]),
    };
    let mut reply = Vec::new();
    if count < 0 || count == 1 {
        reply = repeated_picks(gauge, count.unsigned_abs(), |out| {
            if let Some(pick) = hash.get_index(fastrand::usize(..len)) {
                push_pick(out, pick);
            }
        })?;
    } else {
        let indexes = if count as u64 >= len as u64 {
            (0..len).collect()
        } else {
            sample_distinct(len, count as usize)
        };
        for pick in indexes.into_iter().filter_map(|i| hash.get_index(i)) {
            push_pick(&mut reply, pick);
        }
    }
    Ok(Reply::Array(reply))
}
