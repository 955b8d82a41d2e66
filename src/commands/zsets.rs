//! Sorted-set commands: ZADD and friends, rank / score / lex ranges (ZRANGE
//! and its older spellings, ZRANGESTORE), removals by range, pops (ZPOPMIN,
//! ZPOPMAX, ZMPOP), ZRANDMEMBER, ZSCAN, and the set operations (ZUNION,
//! ZINTER, ZDIFF, their STORE forms, ZINTERCARD). Blocking pops are not here.
//!
//! The structure and its range types live in `db/zset.rs`; this module
//! parses arguments in Redis's order and shapes replies. Scores go out as
//! [`Reply::Double`]; where Redis 7.0 pairs members with scores in RESP3
//! (WITHSCORES, ZPOPMIN with a count, ZMPOP, ZRANDMEMBER) the pairing is
//! chosen here from the client's protocol, as Redis's handlers do.
//!
//! As with lists, writes look the key up read-only first and take it for
//! writing only when something will change, so no-ops do not break WATCH.
//!
//! ZRANDMEMBER with a negative count makes that many picks, as
//! SRANDMEMBER and HRANDFIELD do (`sets::repeated_picks`): stopped by the
//! client's output limit as in Redis, and refused with "ERR value is out
//! of range" past 2^22 picks no limit stopped, where Redis stalls and then
//! runs out of memory.

use bytes::Bytes;
use indexmap::IndexMap;

use super::args::{parse_at_least_one, parse_mpop_count};
use super::args::{parse_f64, parse_i64, upper};
use super::keys::{parse_scan, scan_reply};
use super::lists::resolve_range;
use super::sets::repeated_picks;
use super::table::{CommandSpec, cmd, flag::*};
use super::{CmdError, CmdResult, Ctx, Reply};
use crate::db::value::{Hasher, owned};
use crate::db::zset::{LexRange, ListpackLimits, ScoreRange, ZSet};
use crate::db::{NOTIFY_GENERIC, NOTIFY_ZSET, Value, typed};
use crate::glob;

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("zadd", -4, zadd).flags(WRITE | DENYOOM | FAST),
    cmd("zincrby", 4, zincrby).flags(WRITE | DENYOOM | FAST),
    cmd("zrem", -3, zrem).flags(WRITE | FAST),
    cmd("zscore", 3, zscore).flags(READONLY | FAST),
    cmd("zmscore", -3, zmscore).flags(READONLY | FAST),
    cmd("zcard", 2, zcard).flags(READONLY | FAST),
    cmd("zcount", 4, zcount).flags(READONLY | FAST),
    cmd("zlexcount", 4, zlexcount).flags(READONLY | FAST),
    cmd("zrange", -4, zrange).flags(READONLY),
    cmd("zrangestore", -5, zrangestore).flags(WRITE | DENYOOM),
    cmd("zrangebyscore", -4, zrangebyscore).flags(READONLY),
    cmd("zrevrangebyscore", -4, zrevrangebyscore).flags(READONLY),
    cmd("zrangebylex", -4, zrangebylex).flags(READONLY),
    cmd("zrevrangebylex", -4, zrevrangebylex).flags(READONLY),
    cmd("zrevrange", -4, zrevrange).flags(READONLY),
    cmd("zrank", 3, zrank).flags(READONLY | FAST),
    cmd("zrevrank", 3, zrevrank).flags(READONLY | FAST),
    cmd("zremrangebyscore", 4, zremrangebyscore).flags(WRITE),
    cmd("zremrangebyrank", 4, zremrangebyrank).flags(WRITE),
    cmd("zremrangebylex", 4, zremrangebylex).flags(WRITE),
    cmd("zpopmin", -2, zpopmin).flags(WRITE | FAST),
    cmd("zpopmax", -2, zpopmax).flags(WRITE | FAST),
    cmd("zrandmember", -2, zrandmember).flags(READONLY),
    cmd("zscan", -3, zscan).flags(READONLY),
    cmd("zmpop", -4, zmpop).flags(WRITE),
    cmd("zunionstore", -4, zunionstore).flags(WRITE | DENYOOM),
    cmd("zinterstore", -4, zinterstore).flags(WRITE | DENYOOM),
    cmd("zdiffstore", -4, zdiffstore).flags(WRITE | DENYOOM),
    cmd("zunion", -3, zunion).flags(READONLY),
    cmd("zinter", -3, zinter).flags(READONLY),
    cmd("zdiff", -3, zdiff).flags(READONLY),
    cmd("zintercard", -3, zintercard).flags(READONLY),
];

// ---------------------------------------------------------------------------
// Lookups and reply shapes

/// The `zset-max-listpack-*` parameters now in force.
fn limits(ctx: &Ctx) -> ListpackLimits {
    let p = &ctx.state.params;
    let d = ListpackLimits::default();
    let get = |name: &str, default: usize| p.int(name).map_or(default, |v| usize::try_from(v).unwrap_or(usize::MAX));
    ListpackLimits {
        max_entries: get("zset-max-listpack-entries", d.max_entries),
        max_value: get("zset-max-listpack-value", d.max_value),
    }
}

/// A sorted set for reading (counted as a keyspace hit or miss): `None`
/// when missing, WRONGTYPE for other types.
fn read_zset<'a>(ctx: &'a mut Ctx, key: &[u8]) -> CmdResult<Option<&'a ZSet>> {
    typed(ctx.read(key), Value::as_zset)
}

/// A sorted set as a write first sees it (no hit/miss count, no WATCH
/// signal): `None` when missing, WRONGTYPE for other types.
fn peek_zset<'a>(ctx: &'a mut Ctx, key: &[u8]) -> CmdResult<Option<&'a ZSet>> {
    let now = ctx.now_ms;
    ctx.db().get(key, now).map(Value::as_zset).transpose()
}

/// The existing sorted set at `key`, taken for writing.
fn zset_mut<'a>(ctx: &'a mut Ctx, key: &[u8]) -> CmdResult<&'a mut ZSet> {
    let now = ctx.now_ms;
    match ctx.db().get_mut(key, now) {
        Some(v) => v.as_zset_mut(),
        None => Err(CmdError::no_such_key()),
    }
}

/// Removes `members` from the set at `key`, deleting the key if it empties.
/// `event` is Redis's name for the removal.
fn remove_members(ctx: &mut Ctx, key: &[u8], members: &[Bytes], event: &'static str) -> CmdResult<usize> {
    if members.is_empty() {
        return Ok(0);
    }
    let z = zset_mut(ctx, key)?;
    let removed = members.iter().filter(|m| z.remove(m)).count();
    ctx.db().notify(NOTIFY_ZSET, event, key);
    drop_if_empty(ctx, key);
    ctx.dirty(removed as u64);
    Ok(removed)
}

/// Deletes `key` if its sorted set was emptied (Redis's "del" event with it).
fn drop_if_empty(ctx: &mut Ctx, key: &[u8]) {
    let db = ctx.db();
    if db.remove_if_empty(key) {
        db.notify(NOTIFY_GENERIC, "del", key);
    }
}

/// Members, optionally with scores: a flat array in RESP2, and in RESP3
/// an array of `[member, score]` pairs, as Redis 7.0's ZRANGE replies.
fn scored_reply(resp: u8, items: Vec<(Bytes, f64)>, withscores: bool) -> Reply {
    let mut out = Vec::with_capacity(if withscores && resp < 3 { items.len() * 2 } else { items.len() });
    for (m, s) in items {
        push_scored(&mut out, resp, withscores, m, s);
    }
    Reply::Array(out)
}

/// One member of a [`scored_reply`]: alone, with its score after it
/// (RESP2), or paired with it (RESP3).
fn push_scored(out: &mut Vec<Reply>, resp: u8, withscores: bool, member: Bytes, score: f64) {
    match (withscores, resp >= 3) {
        (false, _) => out.push(Reply::Bulk(member)),
        (true, true) => out.push(Reply::Array(vec![Reply::Bulk(member), Reply::Double(score)])),
        (true, false) => out.extend([Reply::Bulk(member), Reply::Double(score)]),
    }
}

/// Always `[member, score]` pairs (ZMPOP, and ZPOPMIN with a count in RESP3).
fn pairs_reply(items: Vec<(Bytes, f64)>) -> Reply {
    Reply::Array(
        items
            .into_iter()
            .map(|(m, s)| Reply::Array(vec![Reply::Bulk(m), Reply::Double(s)]))
            .collect(),
    )
}

fn parse_score_range(min: &[u8], max: &[u8]) -> CmdResult<ScoreRange> {
    ScoreRange::parse(min, max).ok_or_else(|| CmdError::err("min or max is not a float"))
}

fn parse_lex_range(min: &Bytes, max: &Bytes) -> CmdResult<LexRange> {
    LexRange::parse(min, max).ok_or_else(|| CmdError::err("min or max not valid string range item"))
}

// ---------------------------------------------------------------------------
// ZADD, ZINCRBY, ZREM and point reads

#[derive(Default, Clone, Copy)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    incr: bool,
    ch: bool,
}

/// What one score-member pair does to a set (Redis's `zsetAdd`).
#[derive(Clone, Copy, PartialEq, Debug)]
enum AddOutcome {
    Added(f64),
    Updated(f64),
    /// Processed, but the new score equals the old one.
    Unchanged(f64),
    /// Skipped by NX / XX / GT / LT.
    Skipped,
    Nan,
}

fn add_outcome(current: Option<f64>, score: f64, f: AddFlags) -> AddOutcome {
    let Some(cur) = current else {
        return if f.xx { AddOutcome::Skipped } else { AddOutcome::Added(score) };
    };
    if f.nx {
        return AddOutcome::Skipped;
    }
    let score = if f.incr { score + cur } else { score };
    if score.is_nan() {
        return AddOutcome::Nan;
    }
    if (f.lt && score >= cur) || (f.gt && score <= cur) {
        return AddOutcome::Skipped;
    }
    if score != cur {
        AddOutcome::Updated(score)
    } else {
        AddOutcome::Unchanged(score)
    }
}

/// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member …], and
/// ZINCRBY (which is ZADD INCR with the same option scan, as in Redis).
pub(crate) fn zadd_generic(ctx: &mut Ctx, argv: &[Bytes], incr: bool) -> CmdResult {
    let mut f = AddFlags {
        incr,
        ..AddFlags::default()
    };
    let mut at = 2;
    while at < argv.len() {
        match upper(&argv[at]).as_str() {
            "NX" => f.nx = true,
            "XX" => f.xx = true,
            "GT" => f.gt = true,
            "LT" => f.lt = true,
            "CH" => f.ch = true,
            "INCR" => f.incr = true,
            _ => break,
        }
        at += 1;
    }
    let pairs = &argv[at..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Err(CmdError::syntax());
    }
    if f.nx && f.xx {
        return Err(CmdError::err("XX and NX options at the same time are not compatible"));
    }
    if (f.nx && (f.gt || f.lt)) || (f.gt && f.lt) {
        return Err(CmdError::err("GT, LT, and/or NX options at the same time are not compatible"));
    }
    if f.incr && pairs.len() > 2 {
        return Err(CmdError::err("INCR option supports a single increment-element pair"));
    }
    let scores = pairs.chunks(2).map(|p| parse_f64(&p[0])).collect::<CmdResult<Vec<f64>>>()?;
    let key = &argv[1];
    let no_change = if f.incr { Reply::Nil } else { Reply::Int(0) };

    // A dry run against the current set decides whether anything changes:
    // a pair that changes nothing leaves the set as it was for later pairs,
    // so judging every pair against the original state is exact.
    let (exists, dry) = match peek_zset(ctx, key)? {
        None => (false, scores.iter().map(|&s| add_outcome(None, s, f)).collect::<Vec<_>>()),
        Some(z) => (
            true,
            pairs
                .chunks(2)
                .zip(&scores)
                .map(|(p, &s)| add_outcome(z.score(&p[1]), s, f))
                .collect(),
        ),
    };
    if !exists && f.xx {
        return Ok(no_change);
    }
    if dry.contains(&AddOutcome::Nan) {
        return Err(CmdError::err("resulting score is not a number (NaN)"));
    }
    if !dry.iter().any(|o| matches!(o, AddOutcome::Added(_) | AddOutcome::Updated(_))) {
        return Ok(match dry.last() {
            Some(AddOutcome::Unchanged(s)) if f.incr => Reply::Double(*s),
            _ => no_change,
        });
    }

    let limits = limits(ctx);
    let now = ctx.now_ms;
    let first_len = pairs[1].len();
    let z = ctx
        .db()
        .get_or_insert_with(key, now, || Value::ZSet(Box::new(ZSet::for_first_member(first_len, limits))))
        .as_zset_mut()?;
    let (mut added, mut updated) = (0, 0);
    let mut last = None;
    for (pair, &score) in pairs.chunks(2).zip(&scores) {
        let member = &pair[1];
        match add_outcome(z.score(member), score, f) {
            AddOutcome::Added(s) => {
                z.insert_with(owned(member), s, limits);
                added += 1;
                last = Some(s);
            }
            AddOutcome::Updated(s) => {
                z.insert_with(owned(member), s, limits);
                updated += 1;
                last = Some(s);
            }
            AddOutcome::Unchanged(s) => last = Some(s),
            AddOutcome::Skipped | AddOutcome::Nan => {}
        }
    }
    if added + updated > 0 {
        ctx.db().notify(NOTIFY_ZSET, if f.incr { "zincr" } else { "zadd" }, key);
    }
    ctx.dirty((added + updated) as u64);
    if f.incr {
        return Ok(last.map_or(Reply::Nil, Reply::Double));
    }
    Ok(Reply::Int(if f.ch { added + updated } else { added }))
}

fn zadd(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    zadd_generic(ctx, argv, false)
}

fn zincrby(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    zadd_generic(ctx, argv, true)
}

fn zrem(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let key = &argv[1];
    let present: Vec<Bytes> = match peek_zset(ctx, key)? {
        None => return Ok(Reply::Int(0)),
        Some(z) => argv[2..].iter().filter(|m| z.contains(m)).cloned().collect(),
    };
    Ok(Reply::Int(remove_members(ctx, key, &present, "zrem")? as i64))
}

fn zscore(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let score = read_zset(ctx, &argv[1])?.and_then(|z| z.score(&argv[2]));
    Ok(score.map_or(Reply::Nil, Reply::Double))
}

fn zmscore(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let z = read_zset(ctx, &argv[1])?;
    Ok(Reply::Array(
        argv[2..]
            .iter()
            .map(|m| z.and_then(|z| z.score(m)).map_or(Reply::Nil, Reply::Double))
            .collect(),
    ))
}

fn zcard(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(read_zset(ctx, &argv[1])?.map_or(0, ZSet::len) as i64))
}

fn zcount(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let range = parse_score_range(&argv[2], &argv[3])?;
    Ok(Reply::Int(read_zset(ctx, &argv[1])?.map_or(0, |z| z.count_by_score(&range)) as i64))
}

fn zlexcount(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let range = parse_lex_range(&argv[2], &argv[3])?;
    Ok(Reply::Int(
        read_zset(ctx, &argv[1])?.map_or(0, |z| z.range_by_lex(&range).count()) as i64
    ))
}

fn rank_generic(ctx: &mut Ctx, argv: &[Bytes], reverse: bool) -> CmdResult {
    let Some(z) = read_zset(ctx, &argv[1])? else {
        return Ok(Reply::Nil);
    };
    Ok(match z.rank(&argv[2]) {
        Some(r) if reverse => Reply::Int((z.len() - 1 - r) as i64),
        Some(r) => Reply::Int(r as i64),
        None => Reply::Nil,
    })
}

fn zrank(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    rank_generic(ctx, argv, false)
}

fn zrevrank(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    rank_generic(ctx, argv, true)
}

// ---------------------------------------------------------------------------
// ZRANGE and its spellings

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum RangeKind {
    Auto,
    Rank,
    Score,
    Lex,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Direction {
    Auto,
    Forward,
    Reverse,
}

/// A parsed range of any kind.
enum Selection {
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange),
}

/// `LIMIT offset count` for score and lex ranges: a negative offset
/// selects nothing and a negative count means no limit, as in Redis.
#[derive(Clone, Copy)]
struct Limit {
    offset: i64,
    count: i64,
}

impl Limit {
    const NONE: Limit = Limit { offset: 0, count: -1 };

    fn apply<'a, I: Iterator<Item = (&'a Bytes, f64)>>(self, it: I) -> Vec<(Bytes, f64)> {
        if self.offset < 0 {
            return Vec::new();
        }
        let take = if self.count < 0 { usize::MAX } else { self.count as usize };
        it.skip(self.offset as usize).take(take).map(|(m, s)| (m.clone(), s)).collect()
    }
}

/// The members a selection picks from `z`, in reply order.
fn select(z: &ZSet, sel: &Selection, reverse: bool, limit: Limit) -> Vec<(Bytes, f64)> {
    match sel {
        Selection::Rank(start, end) => {
            let Some((s, e)) = resolve_range(*start, *end, z.len()) else {
                return Vec::new();
            };
            let it: Box<dyn Iterator<Item = (&Bytes, f64)>> = if reverse { Box::new(z.iter().rev()) } else { Box::new(z.iter()) };
            it.skip(s).take(e - s + 1).map(|(m, sc)| (m.clone(), sc)).collect()
        }
        Selection::Score(r) if r.is_empty() => Vec::new(),
        Selection::Score(r) if reverse => limit.apply(z.range_by_score_rev(r.min, r.max)),
        Selection::Score(r) => limit.apply(z.range_by_score(r.min, r.max)),
        Selection::Lex(r) if reverse => limit.apply(z.range_by_lex_rev(r)),
        Selection::Lex(r) => limit.apply(z.range_by_lex(r)),
    }
}

/// Redis's `zrangeGenericCommand`: the source key at `argv[key_at]`, then
/// min and max, then options; `dst` for ZRANGESTORE.
fn zrange_generic(ctx: &mut Ctx, argv: &[Bytes], key_at: usize, dst: Option<&Bytes>, mut kind: RangeKind, mut dir: Direction) -> CmdResult {
    let mut withscores = false;
    let mut limit: Option<Limit> = None;
    let mut j = key_at + 3;
    while j < argv.len() {
        let left = argv.len() - j - 1;
        match upper(&argv[j]).as_str() {
            "WITHSCORES" if dst.is_none() => withscores = true,
            "LIMIT" if left >= 2 => {
                limit = Some(Limit {
                    offset: parse_i64(&argv[j + 1])?,
                    count: parse_i64(&argv[j + 2])?,
                });
                j += 2;
            }
            "REV" if dir == Direction::Auto => dir = Direction::Reverse,
            "BYLEX" if kind == RangeKind::Auto => kind = RangeKind::Lex,
            "BYSCORE" if kind == RangeKind::Auto => kind = RangeKind::Score,
            _ => return Err(CmdError::syntax()),
        }
        j += 1;
    }
    let reverse = dir == Direction::Reverse;
    if kind == RangeKind::Auto {
        kind = RangeKind::Rank;
    }
    // Redis marks "no LIMIT" with a count of -1, so `LIMIT n -1` passes here.
    if limit.is_some_and(|l| l.count != -1) && kind == RangeKind::Rank {
        return Err(CmdError::err(
            "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if withscores && kind == RangeKind::Lex {
        return Err(CmdError::err("syntax error, WITHSCORES not supported in combination with BYLEX"));
    }
    // Reversed score and lex ranges are written max first.
    let (mut lo, mut hi) = (&argv[key_at + 1], &argv[key_at + 2]);
    if reverse && kind != RangeKind::Rank {
        std::mem::swap(&mut lo, &mut hi);
    }
    let sel = match kind {
        RangeKind::Score => Selection::Score(parse_score_range(lo, hi)?),
        RangeKind::Lex => Selection::Lex(parse_lex_range(lo, hi)?),
        RangeKind::Rank | RangeKind::Auto => Selection::Rank(parse_i64(lo)?, parse_i64(hi)?),
    };
    let items = match read_zset(ctx, &argv[key_at])? {
        None => Vec::new(),
        Some(z) => select(z, &sel, reverse, limit.unwrap_or(Limit::NONE)),
    };
    if kind != RangeKind::Rank {
        // Redis sends a score or lex range's length last.
        ctx.defer_reply_len();
    }
    match dst {
        None => Ok(scored_reply(ctx.client.resp, items, withscores)),
        Some(dst) => store_result(ctx, dst, items, "zrangestore"),
    }
}

/// Stores a computed set at `dst` (dropping any TTL), or deletes `dst`
/// when the result is empty; replies with the stored size.
fn store_result(ctx: &mut Ctx, dst: &Bytes, items: Vec<(Bytes, f64)>, event: &'static str) -> CmdResult {
    let mut z = ZSet::new_skiplist();
    for (m, s) in items {
        z.insert(m, s);
    }
    store_zset(ctx, dst, z, event)
}

/// Stores a result at `dst` as Redis does: with `setKey`, which looks
/// `dst` up for writing (an expired `dst` counts in `expired_keys`), or,
/// when empty, by deleting `dst` with `dbDelete`, which counts nothing.
/// `event` is Redis's name for the store.
pub(crate) fn store_zset(ctx: &mut Ctx, dst: &Bytes, mut z: ZSet, event: &'static str) -> CmdResult {
    let n = z.len();
    if n == 0 {
        let db = ctx.db();
        if db.remove(dst).is_some() {
            db.notify(NOTIFY_GENERIC, "del", dst);
        }
        return Ok(Reply::Int(0));
    }
    z.compact_if_fits(limits(ctx));
    let now = ctx.now_ms;
    let db = ctx.db();
    db.expire_if_needed(dst, now);
    db.set(dst, Value::ZSet(Box::new(z)), false);
    db.notify(NOTIFY_ZSET, event, dst);
    Ok(Reply::Int(n as i64))
}

fn zrange(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    zrange_generic(ctx, argv, 1, None, RangeKind::Auto, Direction::Auto)
}

fn zrangestore(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    zrange_generic(ctx, argv, 2, Some(&argv[1]), RangeKind::Auto, Direction::Auto)
}

fn zrangebyscore(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    zrange_generic(ctx, argv, 1, None, RangeKind::Score, Direction::Forward)
}

fn zrevrangebyscore(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    zrange_generic(ctx, argv, 1, None, RangeKind::Score, Direction::Reverse)
}

fn zrangebylex(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    zrange_generic(ctx, argv, 1, None, RangeKind::Lex, Direction::Forward)
}

fn zrevrangebylex(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    zrange_generic(ctx, argv, 1, None, RangeKind::Lex, Direction::Reverse)
}

fn zrevrange(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    zrange_generic(ctx, argv, 1, None, RangeKind::Rank, Direction::Reverse)
}

// ---------------------------------------------------------------------------
// Removal by range

/// ZREMRANGEBYSCORE / BYRANK / BYLEX: the range is parsed before the key
/// is looked up.
fn zremrange_generic(ctx: &mut Ctx, argv: &[Bytes], kind: RangeKind) -> CmdResult {
    let sel = match kind {
        RangeKind::Score => Selection::Score(parse_score_range(&argv[2], &argv[3])?),
        RangeKind::Lex => Selection::Lex(parse_lex_range(&argv[2], &argv[3])?),
        RangeKind::Rank | RangeKind::Auto => Selection::Rank(parse_i64(&argv[2])?, parse_i64(&argv[3])?),
    };
    let key = &argv[1];
    let doomed: Vec<Bytes> = match peek_zset(ctx, key)? {
        None => return Ok(Reply::Int(0)),
        Some(z) => select(z, &sel, false, Limit::NONE).into_iter().map(|(m, _)| m).collect(),
    };
    let event = match kind {
        RangeKind::Score => "zremrangebyscore",
        RangeKind::Lex => "zremrangebylex",
        RangeKind::Rank | RangeKind::Auto => "zremrangebyrank",
    };
    Ok(Reply::Int(remove_members(ctx, key, &doomed, event)? as i64))
}

fn zremrangebyscore(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    zremrange_generic(ctx, argv, RangeKind::Score)
}

fn zremrangebyrank(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    zremrange_generic(ctx, argv, RangeKind::Rank)
}

fn zremrangebylex(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    zremrange_generic(ctx, argv, RangeKind::Lex)
}

// ---------------------------------------------------------------------------
// Pops

/// Pops up to `count` members from the low (`max` false) or high end of an
/// existing set, deleting the key if it empties.
fn pop_from(ctx: &mut Ctx, key: &[u8], max: bool, count: usize) -> CmdResult<Vec<(Bytes, f64)>> {
    let z = zset_mut(ctx, key)?;
    let n = count.min(z.len());
    let popped: Vec<(Bytes, f64)> = (0..n).filter_map(|_| if max { z.pop_last() } else { z.pop_first() }).collect();
    if !popped.is_empty() {
        ctx.db().notify(NOTIFY_ZSET, if max { "zpopmax" } else { "zpopmin" }, key);
    }
    drop_if_empty(ctx, key);
    ctx.dirty(popped.len() as u64);
    Ok(popped)
}

/// A pop of many keys (ZMPOP, BZMPOP) or a blocking pop is replayed as
/// `ZPOPMIN` / `ZPOPMAX` of the key it popped from, with the count it
/// popped.
pub(crate) fn propagate_pop(ctx: &mut Ctx, key: &[u8], max: bool, count: Option<usize>) {
    if ctx.propagating() {
        let name: &[u8] = if max { b"ZPOPMAX" } else { b"ZPOPMIN" };
        match count {
            Some(n) => ctx.propagate_as_words(&[name, key, itoa::Buffer::new().format(n).as_bytes()]),
            None => ctx.propagate_as_words(&[name, key]),
        }
    }
}

/// A blocking pop's step: up to `count` members from the low (or, with
/// `max`, the high) end of the existing sorted set at `key`.
pub(crate) fn pop_ends(ctx: &mut Ctx, key: &[u8], max: bool, count: usize) -> CmdResult<Vec<(Bytes, f64)>> {
    pop_from(ctx, key, max, count)
}

/// ZPOPMIN / ZPOPMAX key [count]: a flat [member, score, …] array, or in
/// RESP3 with a count, [member, score] pairs; empty when the key is missing.
fn zpop_generic(ctx: &mut Ctx, argv: &[Bytes], max: bool) -> CmdResult {
    if argv.len() > 3 {
        return Err(CmdError::syntax());
    }
    let count = match argv.get(2) {
        None => None,
        Some(raw) => match crate::numfmt::parse_i64(raw) {
            Some(n) if n >= 0 => Some(n as usize),
            _ => return Err(CmdError::out_of_range_positive("value")),
        },
    };
    let key = &argv[1];
    if peek_zset(ctx, key)?.is_none() || count == Some(0) {
        return Ok(Reply::Array(Vec::new()));
    }
    let popped = pop_from(ctx, key, max, count.unwrap_or(1))?;
    if count.is_some() && ctx.client.resp >= 3 {
        return Ok(pairs_reply(popped));
    }
    Ok(scored_reply(2, popped, true))
}

fn zpopmin(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    zpop_generic(ctx, argv, false)
}

fn zpopmax(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    zpop_generic(ctx, argv, true)
}

/// ZMPOP numkeys key [key …] MIN|MAX [COUNT count]: pops from the first
/// non-empty set; a key of another type before it is a WRONGTYPE error.
fn zmpop(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let numkeys = parse_at_least_one(&argv[1], "numkeys should be greater than 0")? as usize;
    let where_at = numkeys.checked_add(2).filter(|&i| i < argv.len()).ok_or_else(CmdError::syntax)?;
    let max = match upper(&argv[where_at]).as_str() {
        "MIN" => false,
        "MAX" => true,
        _ => return Err(CmdError::syntax()),
    };
    let count = parse_mpop_count(argv, where_at + 1)?;
    for key in &argv[2..where_at] {
        if peek_zset(ctx, key)?.is_some() {
            let popped = pop_from(ctx, key, max, count.unwrap_or(1) as usize)?;
            propagate_pop(ctx, key, max, Some(popped.len()));
            return Ok(Reply::Array(vec![Reply::Bulk(key.clone()), pairs_reply(popped)]));
        }
    }
    Ok(Reply::NilArray)
}

// ---------------------------------------------------------------------------
// ZRANDMEMBER and ZSCAN

/// ZRANDMEMBER key [count [WITHSCORES]]. A non-negative count picks
/// distinct members (the whole set, highest first, when it asks for at
/// least as many as there are, as Redis answers); a negative count picks
/// that many times with repeats.
fn zrandmember(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let Some(raw) = argv.get(2) else {
        let Some(z) = read_zset(ctx, &argv[1])?.filter(|z| !z.is_empty()) else {
            return Ok(Reply::Nil);
        };
        let picked = z.get_index(fastrand::usize(..z.len())).map(|(m, _)| m.clone());
        return Ok(Reply::opt_bulk(picked));
    };
    let l = parse_i64(raw)?;
    if l == i64::MIN {
        return Err(CmdError::err(
            "value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    let withscores = match argv.len() {
        3 => false,
        4 if argv[3].eq_ignore_ascii_case(b"WITHSCORES") => true,
        _ => return Err(CmdError::syntax()),
    };
    if withscores && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&l) {
        return Err(CmdError::err("value is out of range"));
    }
    let resp = ctx.client.resp;
    let gauge = ctx.reply_gauge();
    let Some(z) = read_zset(ctx, &argv[1])?.filter(|z| !z.is_empty()) else {
        return Ok(Reply::Array(Vec::new()));
    };
    let count = l.unsigned_abs();
    if count == 0 {
        return Ok(Reply::Array(Vec::new()));
    }
    let size = z.len();
    if l < 0 {
        let picks = repeated_picks(gauge, count, |out| {
            if let Some((m, s)) = z.get_index(fastrand::usize(..size)) {
                push_scored(out, resp, withscores, m.clone(), s);
            }
        })?;
        return Ok(Reply::Array(picks));
    }
    let items: Vec<(Bytes, f64)> = if count as usize >= size {
        z.iter().rev().map(|(m, s)| (m.clone(), s)).collect()
    } else {
        // A partial Fisher-Yates shuffle of member indexes.
        let mut idx: Vec<usize> = (0..size).collect();
        let n = count as usize;
        for i in 0..n {
            let j = fastrand::usize(i..size);
            idx.swap(i, j);
        }
        idx[..n]
            .iter()
            .filter_map(|&i| z.get_index(i).map(|(m, s)| (m.clone(), s)))
            .collect()
    };
    Ok(scored_reply(resp, items, withscores))
}

/// ZSCAN key cursor [MATCH pattern] [COUNT count]. A listpack-sized set
/// comes back whole, in order, with cursor 0, as Redis answers; larger
/// sets are walked by cursor. Scores are text, formatted as Redis prints
/// them (`%.17g`), in both protocols.
fn zscan(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let cursor = super::keys::parse_cursor(&argv[2])?;
    let Some(z) = read_zset(ctx, &argv[1])? else {
        return Ok(scan_reply(0, Vec::new()));
    };
    // Options are checked only once the key is known to exist, as in Redis.
    let mut canonical = argv.to_vec();
    canonical[2] = Bytes::from_static(b"0");
    let opts = parse_scan(&canonical, 2, false)?;
    let (next, found): (u64, Vec<(&Bytes, f64)>) = if z.is_listpack() {
        (0, z.iter().collect())
    } else {
        z.scan(cursor, opts.count)
    };
    let mut out = Vec::with_capacity(found.len() * 2);
    for (m, s) in found {
        if opts.pattern.as_ref().is_some_and(|p| !glob::matches(p, m, false)) {
            continue;
        }
        out.push(m.clone());
        out.push(Bytes::from(crate::numfmt::reply_double(s)));
    }
    Ok(scan_reply(next, out))
}

// ---------------------------------------------------------------------------
// Set operations

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    /// Redis's `zunionInterAggregate`; a sum of +inf and -inf is 0.
    fn fold(self, target: &mut f64, val: f64) {
        match self {
            Aggregate::Sum => {
                *target += val;
                if target.is_nan() {
                    *target = 0.0;
                }
            }
            Aggregate::Min => {
                if val < *target {
                    *target = val;
                }
            }
            Aggregate::Max => {
                if val > *target {
                    *target = val;
                }
            }
        }
    }
}

/// Runs `f` over the sorted set or set at `key` (a set's members score 1),
/// or over nothing when the key is missing. Types were checked already.
fn with_source<R>(ctx: &mut Ctx, key: &[u8], f: impl FnOnce(Source<'_>) -> R) -> R {
    let now = ctx.now_ms;
    match ctx.db().get(key, now) {
        Some(Value::ZSet(z)) => f(Source::ZSet(z)),
        Some(Value::Set(s)) => f(Source::Set(s)),
        _ => f(Source::Missing),
    }
}

/// One input of a set operation.
enum Source<'a> {
    Missing,
    ZSet(&'a ZSet),
    Set(&'a crate::db::value::Set),
}

impl Source<'_> {
    fn score(&self, member: &[u8]) -> Option<f64> {
        match self {
            Source::Missing => None,
            Source::ZSet(z) => z.score(member),
            Source::Set(s) => s.contains(member).then_some(1.0),
        }
    }

    fn for_each(&self, mut f: impl FnMut(&Bytes, f64)) {
        match self {
            Source::Missing => {}
            Source::ZSet(z) => z.iter().for_each(|(m, s)| f(m, s)),
            Source::Set(s) => s.iter().for_each(|m| f(m, 1.0)),
        }
    }
}

/// Redis's `zunionInterDiffGenericCommand`: numkeys at `argv[numkeys_at]`,
/// then the keys, then WEIGHTS / AGGREGATE / WITHSCORES / LIMIT as the
/// command allows; `dst` for the STORE forms, `card_only` for ZINTERCARD.
fn setop_generic(ctx: &mut Ctx, argv: &[Bytes], dst: Option<&Bytes>, numkeys_at: usize, op: SetOp, card_only: bool) -> CmdResult {
    let setnum = parse_i64(&argv[numkeys_at])?;
    if setnum < 1 {
        let name = String::from_utf8_lossy(&argv[0]).to_ascii_lowercase();
        return Err(CmdError::err(format!("at least 1 input key is needed for '{name}' command")));
    }
    let first_key = numkeys_at + 1;
    if setnum > (argv.len() - first_key) as i64 {
        return Err(CmdError::syntax());
    }
    let keys = &argv[first_key..first_key + setnum as usize];

    // Every input is looked up (and type-checked) before options are read.
    let mut sizes = Vec::with_capacity(keys.len());
    for key in keys {
        let now = ctx.now_ms;
        let size = match ctx.db().get(key, now) {
            None => None,
            Some(Value::ZSet(z)) => Some(Ok(z.len())),
            Some(Value::Set(s)) => Some(Ok(s.len())),
            Some(_) => Some(Err(CmdError::wrong_type())),
        };
        ctx.count_lookup(key, size.is_some());
        sizes.push(size.transpose()?.unwrap_or(0));
    }

    let mut weights = vec![1.0; keys.len()];
    let mut aggregate = Aggregate::Sum;
    let mut withscores = false;
    let mut limit = 0usize;
    let mut j = first_key + keys.len();
    while j < argv.len() {
        let remaining = argv.len() - j;
        let word = upper(&argv[j]);
        if op != SetOp::Diff && !card_only && remaining > keys.len() && word == "WEIGHTS" {
            for (w, raw) in weights.iter_mut().zip(&argv[j + 1..]) {
                *w = crate::numfmt::parse_f64(raw).ok_or_else(|| CmdError::err("weight value is not a float"))?;
            }
            j += 1 + keys.len();
        } else if op != SetOp::Diff && !card_only && remaining >= 2 && word == "AGGREGATE" {
            aggregate = match upper(&argv[j + 1]).as_str() {
                "SUM" => Aggregate::Sum,
                "MIN" => Aggregate::Min,
                "MAX" => Aggregate::Max,
                _ => return Err(CmdError::syntax()),
            };
            j += 2;
        } else if dst.is_none() && !card_only && word == "WITHSCORES" {
            withscores = true;
            j += 1;
        } else if card_only && remaining >= 2 && word == "LIMIT" {
            limit = match crate::numfmt::parse_i64(&argv[j + 1]) {
                Some(n) if n >= 0 => n as usize,
                _ => return Err(CmdError::err("LIMIT can't be negative")),
            };
            j += 2;
        } else {
            return Err(CmdError::syntax());
        }
    }

    // Union and intersection visit the inputs smallest first (a stable
    // order for equal sizes), which fixes the order scores are summed in.
    let mut order: Vec<usize> = (0..keys.len()).collect();
    if op != SetOp::Diff {
        order.sort_by_key(|&i| sizes[i]);
    }

    let mut acc: IndexMap<Bytes, f64, Hasher> = IndexMap::default();
    match op {
        SetOp::Union => {
            for &i in &order {
                let w = weights[i];
                with_source(ctx, &keys[i], |src| {
                    src.for_each(|m, s| {
                        let mut score = w * s;
                        if score.is_nan() {
                            score = 0.0;
                        }
                        match acc.get_mut(m) {
                            Some(existing) => aggregate.fold(existing, score),
                            None => {
                                acc.insert(m.clone(), score);
                            }
                        }
                    })
                });
            }
        }
        SetOp::Inter => {
            let first = order[0];
            if sizes[first] > 0 {
                let w = weights[first];
                with_source(ctx, &keys[first], |src| {
                    src.for_each(|m, s| {
                        let score = w * s;
                        acc.insert(m.clone(), if score.is_nan() { 0.0 } else { score });
                    })
                });
                for &i in &order[1..] {
                    let w = weights[i];
                    with_source(ctx, &keys[i], |src| {
                        acc.retain(|m, score| match src.score(m) {
                            Some(s) => {
                                aggregate.fold(score, s * w);
                                true
                            }
                            None => false,
                        })
                    });
                }
            }
        }
        SetOp::Diff => {
            with_source(ctx, &keys[0], |src| {
                src.for_each(|m, s| {
                    acc.insert(m.clone(), s);
                })
            });
            for key in &keys[1..] {
                if acc.is_empty() {
                    break;
                }
                with_source(ctx, key, |src| acc.retain(|m, _| src.score(m).is_none()));
            }
        }
    }

    if card_only {
        let n = acc.len();
        return Ok(Reply::Int(if limit > 0 { n.min(limit) } else { n } as i64));
    }
    let mut result = ZSet::new_skiplist();
    for (m, s) in acc {
        result.insert(m, s);
    }
    match dst {
        Some(dst) => {
            let event = match op {
                SetOp::Union => "zunionstore",
                SetOp::Inter => "zinterstore",
                SetOp::Diff => "zdiffstore",
            };
            store_zset(ctx, dst, result, event)
        }
        None => {
            let items = result.iter().map(|(m, s)| (m.clone(), s)).collect();
            Ok(scored_reply(ctx.client.resp, items, withscores))
        }
    }
}

fn zunionstore(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    setop_generic(ctx, argv, Some(&argv[1]), 2, SetOp::Union, false)
}

fn zinterstore(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    setop_generic(ctx, argv, Some(&argv[1]), 2, SetOp::Inter, false)
}

fn zdiffstore(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    setop_generic(ctx, argv, Some(&argv[1]), 2, SetOp::Diff, false)
}

fn zunion(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    setop_generic(ctx, argv, None, 1, SetOp::Union, false)
}

fn zinter(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    setop_generic(ctx, argv, None, 1, SetOp::Inter, false)
}

fn zdiff(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    setop_generic(ctx, argv, None, 1, SetOp::Diff, false)
}

fn zintercard(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    setop_generic(ctx, argv, None, 1, SetOp::Inter, true)
}
