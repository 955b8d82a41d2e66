//! Set commands: membership, random picks, moves, and the algebra
//! (SINTER / SUNION / SDIFF, their STORE forms, SINTERCARD).
//!
//! A set is an `IndexSet` (`db::value::Set`), so random picks are O(1) by
//! index and SSCAN can walk indexes downwards as the keyspace SCAN does
//! (deletions `swap_remove`, which keeps SCAN's guarantee).
//!
//! Order and encoding are what Redis 7.0 lets clients observe that an
//! `IndexSet` does not give for free: a set of integers with at most
//! `set-max-intset-entries` members is an intset, sorted ascending, so
//! SMEMBERS, SSCAN (in one call), SPOP-all, SRANDMEMBER-all and the
//! algebra replies come out in numeric order, and OBJECT ENCODING says
//! `intset`. The set remembers once it became a hash table (a member that
//! is not an integer, or one too many), and stays one, as Redis's does
//! (`db::value::Set`); keylock sorts an intset's members at reply time
//! ([`members_in_order`]) instead of keeping them sorted.
//!
//! Reads count keyspace hits and misses as Redis's `lookupKeyRead` does (a
//! WRONGTYPE key is a hit), and so do the source keys of the STORE forms, as
//! in Redis 7.0; other writes do not. Writes that change nothing (SADD of
//! present members, SREM of absent ones) leave the key unmodified for
//! WATCH, as in Redis.

use std::collections::HashSet;
use std::ops::Range;

use bytes::Bytes;

use super::keys::{parse_scan, scan_reply};
use super::table::{CommandSpec, cmd, flag::*};
use super::{CmdError, CmdResult, Ctx, Reply};
use crate::db::value::{Set, owned};
use crate::db::{NOTIFY_GENERIC, NOTIFY_SET, Value, typed};
use crate::engine::ReplyGauge;
use crate::{glob, numfmt};

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("sadd", -3, sadd).flags(WRITE | DENYOOM | FAST),
    cmd("srem", -3, srem).flags(WRITE | FAST),
    cmd("smembers", 2, smembers).flags(READONLY),
    cmd("sismember", 3, sismember).flags(READONLY | FAST),
    cmd("smismember", -3, smismember).flags(READONLY | FAST),
    cmd("scard", 2, scard).flags(READONLY | FAST),
    cmd("spop", -2, spop).flags(WRITE | FAST),
    cmd("srandmember", -2, srandmember).flags(READONLY),
    cmd("smove", 4, smove).flags(WRITE | FAST),
    cmd("sinter", -2, sinter).flags(READONLY),
    cmd("sintercard", -3, sintercard).flags(READONLY),
    cmd("sunion", -2, sunion).flags(READONLY),
    cmd("sdiff", -2, sdiff).flags(READONLY),
    cmd("sinterstore", -3, sinterstore).flags(WRITE | DENYOOM),
    cmd("sunionstore", -3, sunionstore).flags(WRITE | DENYOOM),
    cmd("sdiffstore", -3, sdiffstore).flags(WRITE | DENYOOM),
    cmd("sscan", -3, sscan).flags(READONLY),
];

/// The most picks a negative-count random pick (SRANDMEMBER, HRANDFIELD,
/// ZRANDMEMBER) makes unless the client's output limit stops it first
/// (about 4 million, a reply of some hundreds of megabytes while it is
/// built). Redis accepts any count but i64::MIN and, where no limit stops
/// it, stalls and then exhausts its memory on a count such as
/// -9223372036854775807; keylock refuses such a reply with the error Redis
/// uses for out-of-range counts (see [`repeated_picks`]).
pub(super) const MAX_REPEATED_PICKS: u64 = 1 << 22;

/// Reads a set key, counting the lookup: `None` when missing.
fn read_set<'c>(ctx: &'c mut Ctx, key: &[u8]) -> CmdResult<Option<&'c Set>> {
    typed(ctx.read(key), Value::as_set)
}

/// A set key for writing, without counting the lookup: `None` when missing.
fn peek_set<'c>(ctx: &'c mut Ctx, key: &[u8]) -> CmdResult<Option<&'c Set>> {
    let now = ctx.now_ms;
    typed(ctx.db().get(key, now), Value::as_set)
}

/// The set at `key` for writing, created empty if missing. A key of
/// another type is a WRONGTYPE error and is left untouched.
fn write_set<'c>(ctx: &'c mut Ctx, key: &Bytes) -> CmdResult<&'c mut Set> {
    let now = ctx.now_ms;
    let db = ctx.db();
    if let Some(v) = db.get(key, now) {
        v.as_set()?;
    }
    db.get_or_insert_with(key, now, Value::new_set).as_set_mut()
}

/// Puts `members` in the order Redis replies with: ascending numeric order
/// when they would form an intset, else as they are.
fn intset_order(members: Vec<Bytes>, max_intset: usize) -> Vec<Bytes> {
    if members.len() > max_intset {
        return members;
    }
    let parsed: Option<Vec<(i64, Bytes)>> = members.iter().map(|m| numfmt::parse_i64(m).map(|n| (n, m.clone()))).collect();
    match parsed {
        Some(mut pairs) => {
            pairs.sort_unstable_by_key(|(n, _)| *n);
            pairs.into_iter().map(|(_, m)| m).collect()
        }
        None => members,
    }
}

/// A set's members in the order Redis walks them: ascending for an
/// intset, else as they are kept.
pub(crate) fn members_in_order(set: &Set) -> Vec<Bytes> {
    let members: Vec<Bytes> = set.iter().cloned().collect();
    if set.is_intset() {
        intset_order(members, usize::MAX)
    } else {
        members
    }
}

/// A RESP3 set reply (an array in RESP2) in Redis's order.
/// `members` is a set Redis builds for the reply (SUNION, SDIFF,
/// SINTER's picks): an intset when they allow it.
fn set_reply(members: Vec<Bytes>, max_intset: usize) -> Reply {
    Reply::Set(intset_order(members, max_intset).into_iter().map(Reply::Bulk).collect())
}

/// `count` distinct indexes below `len` (`count < len`), ascending.
pub(super) fn sample_distinct(len: usize, count: usize) -> Vec<usize> {
    let mut picked: Vec<usize> = if count * 3 > len {
        // Most of the collection: drop random indexes until `count` remain.
        let mut all: Vec<usize> = (0..len).collect();
        while all.len() > count {
            all.swap_remove(fastrand::usize(..all.len()));
        }
        all
    } else {
        let mut seen = HashSet::with_capacity(count);
        while seen.len() < count {
            seen.insert(fastrand::usize(..len));
        }
        seen.into_iter().collect()
    };
    picked.sort_unstable();
    picked
}

/// Parses SRANDMEMBER's and HRANDFIELD's count: any integer but i64::MIN.
pub(super) fn parse_random_count(raw: &[u8]) -> CmdResult<i64> {
    let n = numfmt::parse_i64(raw).ok_or_else(CmdError::not_integer)?;
    if n == i64::MIN {
        return Err(CmdError::err(format!(
            "value is out of range, value must between {} and {}",
            -i64::MAX,
            i64::MAX
        )));
    }
    Ok(n)
}

/// The reply elements of `n` picks with repeats (a negative count), one
/// `pick` each (it pushes one element, or two for a field and its value),
/// built against the client's output limit (`engine::output`): a reply
/// that reaches it stops there and its client is closed, as Redis's loop
/// stops once `CLIENT_CLOSE_ASAP` is set. Past [`MAX_REPEATED_PICKS`]
/// picks that no limit stopped, refused with "value is out of range"
/// (at once where no limit applies).
pub(super) fn repeated_picks(mut gauge: ReplyGauge, n: u64, mut pick: impl FnMut(&mut Vec<Reply>)) -> CmdResult<Vec<Reply>> {
    let out_of_range = || CmdError::err("value is out of range");
    if n > MAX_REPEATED_PICKS && gauge.unlimited() {
        return Err(out_of_range());
    }
    let mut items = Vec::new();
    for picked in 0..n {
        if picked == MAX_REPEATED_PICKS {
            return Err(out_of_range());
        }
        let first = items.len();
        pick(&mut items);
        if !items[first..].iter().all(|item| gauge.admit(item)) {
            break;
        }
    }
    Ok(items)
}

/// One step of an index-walking SCAN over a collection of `len` elements:
/// the indexes to visit, highest first, and the next cursor (0 when done).
/// Walking downwards returns every element present for the whole scan at
/// least once, whether deletions swap or shift later elements down.
pub(super) fn scan_window(cursor: u64, count: usize, len: usize) -> (u64, std::iter::Rev<Range<usize>>) {
    let len = len as u64;
    let start = if cursor == 0 || cursor > len { len } else { cursor };
    let end = start.saturating_sub(count as u64);
    (end, (end as usize..start as usize).rev())
}

fn sadd(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (key, members) = (&argv[1], &argv[2..]);
    if peek_set(ctx, key)?.is_some_and(|set| members.iter().all(|m| set.contains(m))) {
        return Ok(Reply::Int(0));
    }
    let max_intset = ctx.state.runtime.set_max_intset_entries;
    let set = write_set(ctx, key)?;
    let mut added = 0usize;
    for m in members {
        if set.insert(owned(m)) {
            set.note_added(m, max_intset);
            added += 1;
        }
    }
    if added > 0 {
        ctx.db().notify(NOTIFY_SET, "sadd", key);
    }
    ctx.dirty(added as u64);
    Ok(Reply::from(added))
}

fn srem(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (key, members) = (&argv[1], &argv[2..]);
    match peek_set(ctx, key)? {
        Some(set) if members.iter().any(|m| set.contains(m)) => {}
        _ => return Ok(Reply::Int(0)),
    }
    let now = ctx.now_ms;
    let db = ctx.db();
    let Some(value) = db.get_mut(key, now) else {
        return Ok(Reply::Int(0));
    };
    let set = value.as_set_mut()?;
    let removed = members.iter().filter(|m| set.swap_remove(m.as_ref())).count();
    db.notify(NOTIFY_SET, "srem", key);
    drop_if_empty(db, key);
    ctx.dirty(removed as u64);
    Ok(Reply::from(removed))
}

fn smembers(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let members = read_set(ctx, &argv[1])?.map(members_in_order).unwrap_or_default();
    Ok(Reply::Set(members.into_iter().map(Reply::Bulk).collect()))
}

fn sismember(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let found = read_set(ctx, &argv[1])?.is_some_and(|s| s.contains(&argv[2]));
    Ok(Reply::from(found))
}

fn smismember(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let set = read_set(ctx, &argv[1])?;
    let replies = argv[2..].iter().map(|m| Reply::from(set.is_some_and(|s| s.contains(m)))).collect();
    Ok(Reply::Array(replies))
}

fn scard(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Ok(Reply::from(read_set(ctx, &argv[1])?.map_or(0, |s| s.len())))
}

fn spop(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    match argv.len() {
        2 => spop_one(ctx, &argv[1]),
        3 => spop_count(ctx, &argv[1], &argv[2]),
        _ => Err(CmdError::syntax()),
    }
}

fn spop_one(ctx: &mut Ctx, key: &Bytes) -> CmdResult {
    let now = ctx.now_ms;
    let db = ctx.db();
    let Some(value) = db.get_mut(key, now) else {
        return Ok(Reply::Nil);
    };
    let set = value.as_set_mut()?;
    let at = fastrand::usize(..set.len());
    let popped = set.swap_remove_index(at);
    db.notify(NOTIFY_SET, "spop", key);
    drop_if_empty(db, key);
    // Replayed as the SREM of what it popped.
    if let Some(member) = &popped {
        ctx.propagate_as_words(&[b"SREM", key, member]);
    }
    Ok(Reply::opt_bulk(popped))
}

fn spop_count(ctx: &mut Ctx, key: &Bytes, raw: &[u8]) -> CmdResult {
    let count = numfmt::parse_i64(raw)
        .filter(|n| *n >= 0)
        .ok_or_else(|| CmdError::out_of_range_positive("value"))? as u64;
    let len = match peek_set(ctx, key)? {
        Some(set) => set.len(),
        None => return Ok(Reply::Set(Vec::new())),
    };
    if count == 0 {
        return Ok(Reply::Set(Vec::new()));
    }
    let now = ctx.now_ms;
    ctx.dirty(count.min(len as u64));
    let db = ctx.db();
    db.notify(NOTIFY_SET, "spop", key);
    if count >= len as u64 {
        let Some(Value::Set(set)) = db.remove(key) else {
            return Ok(Reply::Set(Vec::new()));
        };
        db.notify(NOTIFY_GENERIC, "del", key);
        // Replayed as the DEL of the whole set.
        ctx.propagate_as_words(&[b"DEL", key]);
        let members = members_in_order(&set);
        return Ok(Reply::Set(members.into_iter().map(Reply::Bulk).collect()));
    }
    let Some(value) = db.get_mut(key, now) else {
        return Ok(Reply::Set(Vec::new()));
    };
    let set = value.as_set_mut()?;
    // Highest index first, so each swap_remove moves an element we keep.
    let popped: Vec<Reply> = sample_distinct(len, count as usize)
        .into_iter()
        .rev()
        .filter_map(|i| set.swap_remove_index(i))
        .map(Reply::Bulk)
        .collect();
    // Replayed as one SREM per member popped, never as itself.
    if ctx.propagating() {
        for member in &popped {
            if let Reply::Bulk(member) = member {
                ctx.also_propagate(vec![Bytes::from_static(b"SREM"), key.clone(), member.clone()]);
            }
        }
    }
    ctx.prevent_propagation();
    Ok(Reply::Set(popped))
}

fn srandmember(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    match argv.len() {
        2 => {
            let Some(set) = read_set(ctx, &argv[1])? else {
                return Ok(Reply::Nil);
            };
            let picked = if set.is_empty() {
                None
            } else {
                set.get_index(fastrand::usize(..set.len()))
            };
            Ok(Reply::opt_bulk(picked.cloned()))
        }
        3 => srandmember_count(ctx, &argv[1], &argv[2]),
        _ => Err(CmdError::syntax()),
    }
}

fn srandmember_count(ctx: &mut Ctx, key: &Bytes, raw: &[u8]) -> CmdResult {
    let count = parse_random_count(raw)?;
    let gauge = ctx.reply_gauge();
    let Some(set) = read_set(ctx, key)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    let len = set.len();
    if count == 0 || len == 0 {
        return Ok(Reply::Array(Vec::new()));
    }
    if count < 0 {
        let picks = repeated_picks(gauge, count.unsigned_abs(), |out| {
            out.extend(set.get_index(fastrand::usize(..len)).map(|m| Reply::Bulk(m.clone())))
        })?;
        return Ok(Reply::Array(picks));
    }
    let members: Vec<Bytes> = if count as u64 >= len as u64 {
        members_in_order(set)
    } else {
        sample_distinct(len, count as usize)
            .into_iter()
            .filter_map(|i| set.get_index(i).cloned())
            .collect()
    };
    Ok(Reply::bulks(members))
}

fn smove(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (src, dst, member) = (&argv[1], &argv[2], &argv[3]);
    let Some(src_set) = peek_set(ctx, src)? else {
        return Ok(Reply::Int(0));
    };
    let in_src = src_set.contains(member);
    let in_dst = peek_set(ctx, dst)?.is_some_and(|s| s.contains(member));
    if src == dst || !in_src {
        return Ok(Reply::from(in_src && src == dst));
    }
    let now = ctx.now_ms;
    let db = ctx.db();
    if let Some(value) = db.get_mut(src, now) {
        value.as_set_mut()?.swap_remove(member);
    }
    db.notify(NOTIFY_SET, "srem", src);
    drop_if_empty(db, src);
    ctx.dirty(1);
    // The destination changes (for WATCH too) only if the member was not
    // there yet, as Redis's smoveCommand signals it.
    let max_intset = ctx.state.runtime.set_max_intset_entries;
    if !in_dst {
        let dst_set = write_set(ctx, dst)?;
        if dst_set.insert(owned(member)) {
            dst_set.note_added(member, max_intset);
            ctx.db().notify(NOTIFY_SET, "sadd", dst);
            ctx.dirty(1);
        }
    }
    Ok(Reply::Int(1))
}

/// Checks every key in order, counting each lookup as a read: `Some(len)`
/// for a set, `None` for a missing key, WRONGTYPE at the first key of
/// another type.
fn set_sizes(ctx: &mut Ctx, keys: &[Bytes]) -> CmdResult<Vec<Option<usize>>> {
    let now = ctx.now_ms;
    let mut sizes = Vec::with_capacity(keys.len());
    for key in keys {
        let found = ctx.db().get(key, now).map(|v| v.as_set().map(|s| s.len()));
        ctx.count_lookup(key, found.is_some());
        sizes.push(found.transpose()?);
    }
    Ok(sizes)
}

/// The members of the intersection, in the order of the smallest set.
fn intersection(ctx: &mut Ctx, keys: &[Bytes]) -> CmdResult<Vec<Bytes>> {
    let sizes = set_sizes(ctx, keys)?;
    if sizes.iter().any(Option::is_none) {
        return Ok(Vec::new());
    }
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by_key(|&i| sizes[i]);
    let mut members: Vec<Bytes> = match peek_set(ctx, &keys[order[0]])? {
        Some(set) => set.iter().cloned().collect(),
        None => return Ok(Vec::new()),
    };
    for &i in &order[1..] {
        if members.is_empty() {
            break;
        }
        let Some(set) = peek_set(ctx, &keys[i])? else {
            return Ok(Vec::new());
        };
        members.retain(|m| set.contains(m));
    }
    Ok(members)
}

fn union(ctx: &mut Ctx, keys: &[Bytes]) -> CmdResult<Vec<Bytes>> {
    set_sizes(ctx, keys)?;
    let mut all = Set::default();
    for key in keys {
        if let Some(set) = peek_set(ctx, key)? {
            all.extend(set.iter().cloned());
        }
    }
    Ok(all.into_iter().collect())
}

fn difference(ctx: &mut Ctx, keys: &[Bytes]) -> CmdResult<Vec<Bytes>> {
    set_sizes(ctx, keys)?;
    let mut members: Vec<Bytes> = match peek_set(ctx, &keys[0])? {
        Some(set) => set.iter().cloned().collect(),
        None => return Ok(Vec::new()),
    };
    for key in &keys[1..] {
        if members.is_empty() {
            break;
        }
        if let Some(set) = peek_set(ctx, key)? {
            members.retain(|m| !set.contains(m));
        }
    }
    Ok(members)
}

/// Stores an algebra result at `dst`, replacing any value and TTL; an
/// empty result deletes `dst`. Replies with the stored cardinality.
///
/// As in Redis, a result is stored with `setKey`, which looks `dst` up for
/// writing and so counts an expired `dst` in `expired_keys`, while an
/// empty result deletes `dst` with `dbDelete`, which does not.
fn store(ctx: &mut Ctx, dst: &Bytes, members: Vec<Bytes>, event: &'static str) -> Reply {
    let now = ctx.now_ms;
    let max_intset = ctx.state.runtime.set_max_intset_entries;
    let db = ctx.db();
    if members.is_empty() {
        if db.remove(dst).is_some() {
            db.notify(NOTIFY_GENERIC, "del", dst);
        }
        return Reply::Int(0);
    }
    let mut set: Set = members.into_iter().collect();
    set.settle(max_intset);
    let len = set.len();
    db.expire_if_needed(dst, now);
    db.set(dst, Value::Set(Box::new(set)), false);
    db.notify(NOTIFY_SET, event, dst);
    Reply::from(len)
}

/// Deletes `key` if its set was emptied (Redis's "del" event with it).
fn drop_if_empty(db: &mut crate::db::Db, key: &[u8]) {
    if db.remove_if_empty(key) {
        db.notify(NOTIFY_GENERIC, "del", key);
    }
}

fn sinter(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let members = intersection(ctx, &argv[1..])?;
    if !members.is_empty() {
        // Redis sends an intersection's length last (a missing key's
        // empty answer goes out whole).
        ctx.defer_reply_len();
    }
    Ok(set_reply(members, ctx.state.runtime.set_max_intset_entries))
}

fn sunion(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let max_intset = ctx.state.runtime.set_max_intset_entries;
    union(ctx, &argv[1..]).map(|m| set_reply(m, max_intset))
}

fn sdiff(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let max_intset = ctx.state.runtime.set_max_intset_entries;
    difference(ctx, &argv[1..]).map(|m| set_reply(m, max_intset))
}

fn sinterstore(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let members = intersection(ctx, &argv[2..])?;
    Ok(store(ctx, &argv[1], members, "sinterstore"))
}

fn sunionstore(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let members = union(ctx, &argv[2..])?;
    Ok(store(ctx, &argv[1], members, "sunionstore"))
}

fn sdiffstore(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let members = difference(ctx, &argv[2..])?;
    Ok(store(ctx, &argv[1], members, "sdiffstore"))
}

/// `SINTERCARD numkeys key [key …] [LIMIT limit]`.
fn sintercard(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let numkeys = numfmt::parse_i64(&argv[1])
        .filter(|n| *n >= 1)
        .ok_or_else(|| CmdError::err("numkeys should be greater than 0"))?;
    if numkeys as u64 > (argv.len() - 2) as u64 {
        return Err(CmdError::err("Number of keys can't be greater than number of args"));
    }
    let keys_end = 2 + numkeys as usize;
    let mut limit = 0u64;
    let mut options = argv[keys_end..].iter();
    while let Some(opt) = options.next() {
        match options.next() {
            Some(raw) if opt.eq_ignore_ascii_case(b"LIMIT") => {
                limit = numfmt::parse_i64(raw)
                    .filter(|n| *n >= 0)
                    .ok_or_else(|| CmdError::err("LIMIT can't be negative"))? as u64;
            }
            _ => return Err(CmdError::syntax()),
        }
    }
    let card = intersection(ctx, &argv[2..keys_end])?.len() as u64;
    let card = if limit > 0 { card.min(limit) } else { card };
    Ok(Reply::Int(card as i64))
}

fn sscan(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    // The cursor is validated before the key is looked up, the options after.
    parse_scan(&argv[..3], 2, false)?;
    let Some(set) = read_set(ctx, &argv[1])? else {
        return Ok(scan_reply(0, Vec::new()));
    };
    let o = parse_scan(argv, 2, false)?;
    let keep = |m: &Bytes| o.pattern.as_ref().is_none_or(|p| glob::matches(p, m, false));
    if set.is_intset() {
        let members = members_in_order(set);
        return Ok(scan_reply(0, members.into_iter().filter(keep).collect()));
    }
    let (next, window) = scan_window(o.cursor, o.count, set.len());
    let members = window.filter_map(|i| set.get_index(i)).filter(|m| keep(m)).cloned().collect();
    Ok(scan_reply(next, members))
}
