//! List commands: pushes and pops at either end, indexes and ranges,
//! LINSERT / LREM / LPOS / LSET / LTRIM, and moves between lists (LMOVE,
//! RPOPLPUSH, LMPOP). Blocking variants are not here.
//!
//! A list is a `VecDeque<Bytes>`. Redis never keeps an empty list, so every
//! write that can empty one deletes the key. Writes check the key read-only
//! first and take it for writing only once something will change, so a
//! no-op (LREM without a match, LINSERT without the pivot, a WRONGTYPE
//! error) does not break a client's WATCH, as in Redis.
//!
//! Argument checks run in Redis's order (some before the key lookup, some
//! after), since that order decides which error or empty reply a client
//! sees; each handler notes where it differs from the obvious.

use bytes::Bytes;

use super::args::{parse_at_least_one, parse_mpop_count};
use super::args::{parse_i64, upper};
use super::table::{CommandSpec, cmd, flag::*};
use super::{CmdError, CmdResult, Ctx, Reply};
use crate::db::value::{List, owned};
use crate::db::{NOTIFY_GENERIC, NOTIFY_LIST, Value, typed};

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("lpush", -3, lpush).flags(WRITE | DENYOOM | FAST),
    cmd("rpush", -3, rpush).flags(WRITE | DENYOOM | FAST),
    cmd("lpushx", -3, lpushx).flags(WRITE | DENYOOM | FAST),
    cmd("rpushx", -3, rpushx).flags(WRITE | DENYOOM | FAST),
    cmd("lpop", -2, lpop).flags(WRITE | FAST),
    cmd("rpop", -2, rpop).flags(WRITE | FAST),
    cmd("llen", 2, llen).flags(READONLY | FAST),
    cmd("lindex", 3, lindex).flags(READONLY),
    cmd("lrange", 4, lrange).flags(READONLY),
    cmd("lrem", 4, lrem).flags(WRITE),
    cmd("lset", 4, lset).flags(WRITE | DENYOOM),
    cmd("ltrim", 4, ltrim).flags(WRITE),
    cmd("linsert", 5, linsert).flags(WRITE | DENYOOM),
    cmd("lpos", -3, lpos).flags(READONLY),
    cmd("lmove", 5, lmove).flags(WRITE | DENYOOM),
    cmd("rpoplpush", 3, rpoplpush).flags(WRITE | DENYOOM),
    cmd("lmpop", -4, lmpop).flags(WRITE),
];

/// Which end of a list: LEFT is the head.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum End {
    Left,
    Right,
}

/// Redis's `getListPositionFromObjectOrReply`.
fn parse_end(raw: &[u8]) -> CmdResult<End> {
    match upper(raw).as_str() {
        "LEFT" => Ok(End::Left),
        "RIGHT" => Ok(End::Right),
        _ => Err(CmdError::syntax()),
    }
}

/// Redis's `getPositiveLongFromObjectOrReply` with its default message,
/// which it also sends for text that is not a number.
fn parse_count(raw: &[u8]) -> CmdResult<i64> {
    match crate::numfmt::parse_i64(raw) {
        Some(n) if n >= 0 => Ok(n),
        _ => Err(CmdError::out_of_range_positive("value")),
    }
}

/// `getPositiveLongFromObjectOrReply` with a custom message.
fn parse_non_negative(raw: &[u8], msg: &'static str) -> CmdResult<i64> {
    match crate::numfmt::parse_i64(raw) {
        Some(n) if n >= 0 => Ok(n),
        _ => Err(CmdError::err(msg)),
    }
}

/// A list for reading (counted as a keyspace hit or miss): `None` when
/// missing, WRONGTYPE for other types.
fn read_list<'a>(ctx: &'a mut Ctx, key: &[u8]) -> CmdResult<Option<&'a List>> {
    typed(ctx.read(key), Value::as_list)
}

/// The length of the list at `key` as a write sees it (no hit/miss count):
/// `None` when missing, WRONGTYPE for other types.
fn peek_len(ctx: &mut Ctx, key: &[u8]) -> CmdResult<Option<usize>> {
    let now = ctx.now_ms;
    match ctx.db().get(key, now) {
        None => Ok(None),
        Some(v) => Ok(Some(v.as_list()?.len())),
    }
}

/// The existing list at `key`, taken for writing.
fn list_mut<'a>(ctx: &'a mut Ctx, key: &[u8]) -> CmdResult<&'a mut List> {
    let now = ctx.now_ms;
    match ctx.db().get_mut(key, now) {
        Some(v) => v.as_list_mut(),
        None => Err(CmdError::no_such_key()),
    }
}

/// Deletes `key` if its list was emptied.
fn drop_if_empty(ctx: &mut Ctx, key: &[u8]) {
    let db = ctx.db();
    if db.remove_if_empty(key) {
        db.notify(NOTIFY_GENERIC, "del", key);
    }
}

/// Redis's event names for a push or pop at `end`.
fn push_event(end: End) -> &'static str {
    if end == End::Left { "lpush" } else { "rpush" }
}

fn pop_event(end: End) -> &'static str {
    if end == End::Left { "lpop" } else { "rpop" }
}

/// Resolves a possibly negative index against `len`.
fn resolve_index(index: i64, len: usize) -> Option<usize> {
    let len = len as i64;
    let i = if index < 0 { len + index } else { index };
    (0..len).contains(&i).then_some(i as usize)
}

/// Redis's range sanitizing for LRANGE / LTRIM / ZRANGE: `None` when empty.
pub fn resolve_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let mut start = if start < 0 { len + start } else { start };
    let mut end = if end < 0 { len + end } else { end };
    start = start.max(0);
    if start > end || start >= len {
        return None;
    }
    end = end.min(len - 1);
    Some((start as usize, end as usize))
}

fn push_generic(ctx: &mut Ctx, argv: &[Bytes], end: End, only_existing: bool) -> CmdResult {
    let key = &argv[1];
    let exists = peek_len(ctx, key)?.is_some();
    if only_existing && !exists {
        return Ok(Reply::Int(0));
    }
    let now = ctx.now_ms;
    let list = ctx
        .db()
        .get_or_insert_with(key, now, || Value::List(Box::default()))
        .as_list_mut()?;
    for element in &argv[2..] {
        match end {
            End::Left => list.push_front(owned(element)),
            End::Right => list.push_back(owned(element)),
        }
    }
    let len = list.len();
    ctx.db().notify(NOTIFY_LIST, push_event(end), key);
    ctx.dirty(argv.len() as u64 - 2);
    Ok(Reply::Int(len as i64))
}

fn lpush(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    push_generic(ctx, argv, End::Left, false)
}

fn rpush(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    push_generic(ctx, argv, End::Right, false)
}

fn lpushx(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    push_generic(ctx, argv, End::Left, true)
}

fn rpushx(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    push_generic(ctx, argv, End::Right, true)
}

/// Pops up to `count` elements from one end of an existing list and deletes
/// the key if it empties.
fn pop_from(ctx: &mut Ctx, key: &[u8], end: End, count: usize) -> CmdResult<Vec<Bytes>> {
    let list = list_mut(ctx, key)?;
    let n = count.min(list.len());
    let popped: Vec<Bytes> = match end {
        End::Left => list.drain(..n).collect(),
        End::Right => (0..n).filter_map(|_| list.pop_back()).collect(),
    };
    ctx.db().notify(NOTIFY_LIST, pop_event(end), key);
    drop_if_empty(ctx, key);
    Ok(popped)
}

/// A pop of many keys (LMPOP, BLMPOP) or a blocking pop is replayed as
/// `LPOP` / `RPOP` of the key it popped from, with the count it popped.
pub(crate) fn propagate_pop(ctx: &mut Ctx, key: &[u8], left: bool, count: Option<usize>) {
    if ctx.propagating() {
        let name: &[u8] = if left { b"LPOP" } else { b"RPOP" };
        match count {
            Some(n) => ctx.propagate_as_words(&[name, key, itoa::Buffer::new().format(n).as_bytes()]),
            None => ctx.propagate_as_words(&[name, key]),
        }
    }
}

/// A blocking pop's step: up to `count` elements from the head (`left`)
/// or tail of the existing list at `key`.
pub(crate) fn pop_end(ctx: &mut Ctx, key: &[u8], left: bool, count: usize) -> CmdResult<Vec<Bytes>> {
    pop_from(ctx, key, if left { End::Left } else { End::Right }, count)
}

/// A blocking move's step: LMOVE from `src` to `dst`.
pub(crate) fn move_between(ctx: &mut Ctx, src: &Bytes, dst: &Bytes, from_left: bool, to_left: bool) -> CmdResult {
    let end = |left: bool| if left { End::Left } else { End::Right };
    move_generic(ctx, src, dst, end(from_left), end(to_left))
}

/// LPOP / RPOP: one element (bulk, nil when missing) or, with a count, an
/// array (nil array when missing, empty for count 0).
fn pop_generic(ctx: &mut Ctx, argv: &[Bytes], end: End) -> CmdResult {
    if argv.len() > 3 {
        return Err(CmdError::arity(if end == End::Left { "lpop" } else { "rpop" }));
    }
    let count = argv.get(2).map(|raw| parse_count(raw)).transpose()?;
    let key = &argv[1];
    if peek_len(ctx, key)?.is_none() {
        return Ok(if count.is_some() { Reply::NilArray } else { Reply::Nil });
    }
    let popped = match count {
        Some(0) => return Ok(Reply::Array(Vec::new())),
        n => pop_from(ctx, key, end, n.unwrap_or(1) as usize)?,
    };
    ctx.dirty(popped.len() as u64);
    Ok(match count {
        None => Reply::opt_bulk(popped.into_iter().next()),
        Some(_) => Reply::bulks(popped),
    })
}

fn lpop(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    pop_generic(ctx, argv, End::Left)
}

fn rpop(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    pop_generic(ctx, argv, End::Right)
}

fn llen(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(read_list(ctx, &argv[1])?.map_or(0, |l| l.len()) as i64))
}

/// The key is looked up before the index is parsed: a missing key with a
/// bad index is nil, not an error.
fn lindex(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let Some(list) = read_list(ctx, &argv[1])? else {
        return Ok(Reply::Nil);
    };
    let index = parse_i64(&argv[2])?;
    Ok(Reply::opt_bulk(resolve_index(index, list.len()).and_then(|i| list.get(i).cloned())))
}

fn lrange(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let start = parse_i64(&argv[2])?;
    let end = parse_i64(&argv[3])?;
    let Some(list) = read_list(ctx, &argv[1])? else {
        return Ok(Reply::Array(Vec::new()));
    };
    Ok(match resolve_range(start, end, list.len()) {
        Some((s, e)) => Reply::bulks(list.range(s..=e).cloned()),
        None => Reply::Array(Vec::new()),
    })
}

/// Removes `count` matches from the head (> 0), from the tail (< 0), or all (0).
fn lrem(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let count = parse_i64(&argv[2])?;
    let (key, element) = (&argv[1], &argv[3]);
    let now = ctx.now_ms;
    let matches = match ctx.db().get(key, now) {
        None => return Ok(Reply::Int(0)),
        Some(v) => v.as_list()?.iter().filter(|e| *e == element).count(),
    };
    if matches == 0 {
        return Ok(Reply::Int(0));
    }
    let limit = if count == 0 {
        matches
    } else {
        (count.unsigned_abs() as usize).min(matches)
    };
    let list = list_mut(ctx, key)?;
    let mut removed = 0;
    if count >= 0 {
        list.retain(|e| {
            let hit = removed < limit && e == element;
            removed += hit as usize;
            !hit
        });
    } else {
        let mut i = list.len();
        while i > 0 && removed < limit {
            i -= 1;
            if list[i] == element {
                list.remove(i);
                removed += 1;
            }
        }
    }
    ctx.db().notify(NOTIFY_LIST, "lrem", key);
    drop_if_empty(ctx, key);
    ctx.dirty(removed as u64);
    Ok(Reply::Int(removed as i64))
}

/// The key is looked up first ("no such key"), then the index is parsed.
fn lset(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let key = &argv[1];
    let len = peek_len(ctx, key)?.ok_or_else(CmdError::no_such_key)?;
    let index = parse_i64(&argv[2])?;
    let i = resolve_index(index, len).ok_or_else(CmdError::index_out_of_range)?;
    list_mut(ctx, key)?[i] = owned(&argv[3]);
    ctx.db().notify(NOTIFY_LIST, "lset", key);
    Ok(Reply::OK)
}

fn ltrim(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let start = parse_i64(&argv[2])?;
    let end = parse_i64(&argv[3])?;
    let key = &argv[1];
    if peek_len(ctx, key)?.is_none() {
        return Ok(Reply::OK);
    }
    let list = list_mut(ctx, key)?;
    let before = list.len();
    match resolve_range(start, end, list.len()) {
        Some((s, e)) => {
            list.truncate(e + 1);
            list.drain(..s);
        }
        None => list.clear(),
    }
    let trimmed = before - list.len();
    ctx.db().notify(NOTIFY_LIST, "ltrim", key);
    drop_if_empty(ctx, key);
    // Trimming nothing is no change, though the key counts as modified.
    ctx.dirty(trimmed as u64);
    Ok(Reply::OK)
}

/// The BEFORE|AFTER word is checked before the key is looked up.
fn linsert(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let after = match upper(&argv[2]).as_str() {
        "BEFORE" => false,
        "AFTER" => true,
        _ => return Err(CmdError::syntax()),
    };
    let (key, pivot) = (&argv[1], &argv[3]);
    let now = ctx.now_ms;
    let at = match ctx.db().get(key, now) {
        None => return Ok(Reply::Int(0)),
        Some(v) => v.as_list()?.iter().position(|e| e == pivot),
    };
    let Some(at) = at else { return Ok(Reply::Int(-1)) };
    let list = list_mut(ctx, key)?;
    list.insert(at + after as usize, owned(&argv[4]));
    let len = list.len();
    ctx.db().notify(NOTIFY_LIST, "linsert", key);
    Ok(Reply::Int(len as i64))
}

/// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len].
///
/// Options are parsed before the key is looked up. The match arithmetic
/// wraps as Redis's C longs do, so `RANK -9223372036854775808` behaves as
/// it does there (like `RANK -1`, with COUNT never reached).
fn lpos(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let element = &argv[2];
    let mut rank: i64 = 1;
    let mut count: Option<i64> = None;
    let mut maxlen: i64 = 0;
    let mut i = 3;
    while i < argv.len() {
        let has_value = i + 1 < argv.len();
        match upper(&argv[i]).as_str() {
            "RANK" if has_value => {
                rank = parse_i64(&argv[i + 1])?;
                if rank == 0 {
                    return Err(CmdError::err(
                        "RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                    ));
                }
            }
            "COUNT" if has_value => count = Some(parse_non_negative(&argv[i + 1], "COUNT can't be negative")?),
            "MAXLEN" if has_value => maxlen = parse_non_negative(&argv[i + 1], "MAXLEN can't be negative")?,
            _ => return Err(CmdError::syntax()),
        }
        i += 2;
    }
    let from_tail = rank < 0;
    if from_tail {
        rank = rank.wrapping_neg();
    }
    let Some(list) = read_list(ctx, &argv[1])? else {
        return Ok(if count.is_some() { Reply::Array(Vec::new()) } else { Reply::Nil });
    };
    let len = list.len();
    let scan: Box<dyn Iterator<Item = &Bytes>> = if from_tail {
        Box::new(list.iter().rev())
    } else {
        Box::new(list.iter())
    };
    let mut matches: i64 = 0;
    let mut found = Vec::new();
    for (index, e) in scan.enumerate() {
        if maxlen != 0 && index as i64 >= maxlen {
            break;
        }
        if e != element {
            continue;
        }
        matches += 1;
        if matches >= rank {
            found.push(if from_tail { (len - index - 1) as i64 } else { index as i64 });
            match count {
                None => break,
                Some(c) if c != 0 && matches.wrapping_sub(rank).wrapping_add(1) >= c => break,
                _ => {}
            }
        }
    }
    if count.is_some() {
        // Redis sends the positions' count last.
        ctx.defer_reply_len();
    }
    Ok(match count {
        None => found.first().map_or(Reply::Nil, |&i| Reply::Int(i)),
        Some(_) => Reply::Array(found.into_iter().map(Reply::Int).collect()),
    })
}

/// Pops from `src` and pushes to `dst` (possibly the same list). The
/// destination's type is checked before anything moves.
fn move_generic(ctx: &mut Ctx, src: &Bytes, dst: &Bytes, from: End, to: End) -> CmdResult {
    if peek_len(ctx, src)?.is_none() {
        return Ok(Reply::Nil);
    }
    peek_len(ctx, dst)?;
    let list = list_mut(ctx, src)?;
    let value = match from {
        End::Left => list.pop_front(),
        End::Right => list.pop_back(),
    };
    let Some(value) = value else { return Ok(Reply::Nil) };
    let now = ctx.now_ms;
    let target = ctx
        .db()
        .get_or_insert_with(dst, now, || Value::List(Box::default()))
        .as_list_mut()?;
    match to {
        End::Left => target.push_front(value.clone()),
        End::Right => target.push_back(value.clone()),
    }
    let db = ctx.db();
    db.notify(NOTIFY_LIST, push_event(to), dst);
    db.notify(NOTIFY_LIST, pop_event(from), src);
    drop_if_empty(ctx, src);
    Ok(Reply::Bulk(value))
}

fn lmove(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let from = parse_end(&argv[3])?;
    let to = parse_end(&argv[4])?;
    move_generic(ctx, &argv[1], &argv[2], from, to)
}

fn rpoplpush(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    move_generic(ctx, &argv[1], &argv[2], End::Right, End::Left)
}

/// LMPOP numkeys key [key …] LEFT|RIGHT [COUNT count]: pops from the first
/// non-empty list; a key of another type before it is a WRONGTYPE error.
fn lmpop(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let numkeys = parse_at_least_one(&argv[1], "numkeys should be greater than 0")? as usize;
    let end_at = numkeys.checked_add(2).filter(|&i| i < argv.len()).ok_or_else(CmdError::syntax)?;
    let end = parse_end(&argv[end_at])?;
    let count = parse_mpop_count(argv, end_at + 1)?;
    let count = count.unwrap_or(1) as usize;
    for key in &argv[2..end_at] {
        if peek_len(ctx, key)?.is_some() {
            let popped = pop_from(ctx, key, end, count)?;
            ctx.dirty(popped.len() as u64);
            propagate_pop(ctx, key, end == End::Left, Some(popped.len()));
            return Ok(Reply::Array(vec![Reply::Bulk(key.clone()), Reply::bulks(popped)]));
        }
    }
    Ok(Reply::NilArray)
}
