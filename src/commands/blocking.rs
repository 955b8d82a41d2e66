//! The blocking pops: BLPOP, BRPOP, BRPOPLPUSH, BLMOVE, BLMPOP, BZPOPMIN,
//! BZPOPMAX and BZMPOP, as Redis 7.0.15's t_list.c and t_zset.c run them.
//!
//! Each one first tries its keys in order, as the non-blocking command
//! would: the first non-empty one is popped at once (a key of another
//! type is WRONGTYPE). Only when every key is empty or missing does the
//! client block (`engine::blocking`), and [`serve`] later does the pop for
//! it when a write makes one of its keys ready. Inside MULTI/EXEC and
//! scripts nothing blocks: the command answers as its timeout would.

use bytes::Bytes;

use super::table::{CommandSpec, cmd, flag::*};
use super::{CmdError, CmdResult, Ctx, Reply};
use crate::engine::blocking::BlockOp;
use crate::numfmt::LongDouble;

pub const COMMANDS: &[CommandSpec] = &[
    cmd("blpop", -3, blpop).flags(WRITE | NOSCRIPT | BLOCKING),
    cmd("brpop", -3, brpop).flags(WRITE | NOSCRIPT | BLOCKING),
    cmd("brpoplpush", 4, brpoplpush).flags(WRITE | DENYOOM | NOSCRIPT | BLOCKING),
    cmd("blmove", 6, blmove).flags(WRITE | DENYOOM | NOSCRIPT | BLOCKING),
    cmd("blmpop", -5, blmpop).flags(WRITE | BLOCKING),
    cmd("bzpopmin", -3, bzpopmin).flags(WRITE | NOSCRIPT | BLOCKING | FAST),
    cmd("bzpopmax", -3, bzpopmax).flags(WRITE | NOSCRIPT | BLOCKING | FAST),
    cmd("bzmpop", -5, bzmpop).flags(WRITE | BLOCKING),
];

/// Redis's `getTimeoutFromObjectOrReply` in seconds: a long double, made
/// milliseconds rounded up (`ceill(t * 1000)`); 0 waits forever. A value
/// past what a `long long` holds becomes negative in Redis's cast, and is
/// refused as negative.
fn parse_timeout(raw: &[u8]) -> CmdResult<u64> {
    // Whole seconds (the usual `0`) need no long double.
    if let Some(secs) = crate::numfmt::parse_i64(raw)
        && (0..=i64::MAX / 1000).contains(&secs)
    {
        return Ok(secs as u64 * 1000);
    }
    let seconds = LongDouble::parse(raw).ok_or_else(|| CmdError::err("timeout is not a float or out of range"))?;
    match seconds.millis_ceil() {
        Some(ms) if ms >= 0 => Ok(ms as u64),
        _ => Err(CmdError::err("timeout is negative")),
    }
}

/// LEFT or RIGHT (Redis's `getListPositionFromObjectOrReply`): true for LEFT.
fn parse_left(raw: &[u8]) -> CmdResult<bool> {
    match super::args::upper(raw).as_str() {
        "LEFT" => Ok(true),
        "RIGHT" => Ok(false),
        _ => Err(CmdError::syntax()),
    }
}

/// Whether this client may block now (Redis's CLIENT_DENY_BLOCKING is set
/// for scripts and inside MULTI/EXEC).
fn may_block(ctx: &Ctx) -> bool {
    !ctx.client.is_script && !ctx.state.deny_blocking
}

/// What the keys hold, as a blocking command looks at them
/// (`lookupKeyWrite`: no hit or miss counted): the first key holding a
/// non-empty value of the wanted type, or WRONGTYPE for a key of another
/// type met first.
fn first_ready(ctx: &mut Ctx, keys: &[Bytes], zset: bool) -> CmdResult<Option<Bytes>> {
    let now = ctx.now_ms;
    for key in keys {
        let Some(value) = ctx.db().get(key, now) else { continue };
        let empty = if zset {
            value.as_zset()?.is_empty()
        } else {
            value.as_list()?.is_empty()
        };
        if !empty {
            return Ok(Some(key.clone()));
        }
    }
    Ok(None)
}

/// BLPOP / BRPOP / BLMPOP (a `Pop`) and BZPOPMIN / BZPOPMAX / BZMPOP (a
/// `ZPop`): pop from the first non-empty key, or block
/// (`blockingPopGenericCommand`, `blockingGenericZpopCommand`).
fn blocking_pop(ctx: &mut Ctx, keys: &[Bytes], timeout: &[u8], op: BlockOp) -> CmdResult {
    let timeout = parse_timeout(timeout)?;
    let zset = matches!(op, BlockOp::ZPop { .. });
    if let Some(key) = first_ready(ctx, keys, zset)? {
        return serve(ctx, &key, &op, false);
    }
    if !may_block(ctx) {
        return Ok(Reply::NilArray);
    }
    block(ctx, keys, op, timeout)
}

/// Parks the client; it answers nothing now.
pub fn block(ctx: &mut Ctx, keys: &[Bytes], op: BlockOp, timeout_ms: u64) -> CmdResult {
    let stat_index = super::table::Registry::get()
        .lookup(ctx.client.last_command.as_bytes())
        .map_or(0, |c| c.stat_index);
    ctx.state.block(ctx.client, keys, op, timeout_ms, stat_index);
    Ok(Reply::Many(Vec::new()))
}

fn blpop(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (keys, timeout) = argv[1..].split_at(argv.len() - 2);
    blocking_pop(ctx, keys, &timeout[0], BlockOp::Pop { left: true, count: None })
}

fn brpop(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (keys, timeout) = argv[1..].split_at(argv.len() - 2);
    blocking_pop(ctx, keys, &timeout[0], BlockOp::Pop { left: false, count: None })
}

/// BLMPOP timeout numkeys key [key …] LEFT|RIGHT [COUNT count]
/// (`lmpopGenericCommand`, its checks in its order).
fn blmpop(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (keys, left_or_max, count) = parse_mpop(argv, parse_left)?;
    blocking_pop(
        ctx,
        keys,
        &argv[1],
        BlockOp::Pop {
            left: left_or_max,
            count: Some(count),
        },
    )
}

/// The numkeys, keys, LEFT|RIGHT or MIN|MAX, and COUNT of BLMPOP and
/// BZMPOP (numkeys at 2).
fn parse_mpop(argv: &[Bytes], which_end: fn(&[u8]) -> CmdResult<bool>) -> CmdResult<(&[Bytes], bool, usize)> {
    let numkeys = super::args::parse_at_least_one(&argv[2], "numkeys should be greater than 0")? as usize;
    let end_at = numkeys.checked_add(3).filter(|&i| i < argv.len()).ok_or_else(CmdError::syntax)?;
    let end = which_end(&argv[end_at])?;
    let count = super::args::parse_mpop_count(argv, end_at + 1)?.unwrap_or(1) as usize;
    Ok((&argv[3..end_at], end, count))
}

/// BLMOVE / BRPOPLPUSH (`blmoveGenericCommand`).
fn blocking_move(ctx: &mut Ctx, argv: &[Bytes], from_left: bool, to_left: bool, timeout: &[u8]) -> CmdResult {
    let timeout = parse_timeout(timeout)?;
    let (src, dst) = (&argv[1], &argv[2]);
    let op = BlockOp::Move {
        dst: crate::db::value::owned(dst),
        from_left,
        to_left,
    };
    let now = ctx.now_ms;
    let present = match ctx.db().get(src, now) {
        Some(value) => {
            value.as_list()?;
            true
        }
        None => false,
    };
    if present {
        let reply = serve(ctx, src, &op, false)?;
        // Replayed as its plain form, its words as sent.
        if argv.len() == 6 {
            ctx.propagate_as([&[Bytes::from_static(b"LMOVE")], &argv[1..5]].concat());
        } else {
            ctx.propagate_as(vec![Bytes::from_static(b"RPOPLPUSH"), argv[1].clone(), argv[2].clone()]);
        }
        return Ok(reply);
    }
    if !may_block(ctx) {
        return Ok(Reply::Nil);
    }
    block(ctx, std::slice::from_ref(src), op, timeout)
}

fn blmove(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let from_left = parse_left(&argv[3])?;
    let to_left = parse_left(&argv[4])?;
    blocking_move(ctx, argv, from_left, to_left, &argv[5])
}

fn brpoplpush(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    blocking_move(ctx, argv, false, true, &argv[3])
}

fn bzpopmin(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (keys, timeout) = argv[1..].split_at(argv.len() - 2);
    blocking_pop(ctx, keys, &timeout[0], BlockOp::ZPop { max: false, count: None })
}

fn bzpopmax(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (keys, timeout) = argv[1..].split_at(argv.len() - 2);
    blocking_pop(ctx, keys, &timeout[0], BlockOp::ZPop { max: true, count: None })
}

/// BZMPOP timeout numkeys key [key …] MIN|MAX [COUNT count].
fn bzmpop(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let min_or_max = |raw: &[u8]| match super::args::upper(raw).as_str() {
        "MIN" => Ok(false),
        "MAX" => Ok(true),
        _ => Err(CmdError::syntax()),
    };
    let (keys, max, count) = parse_mpop(argv, min_or_max)?;
    blocking_pop(ctx, keys, &argv[1], BlockOp::ZPop { max, count: Some(count) })
}

/// Pops for a blocking command from `key`, known to hold a non-empty
/// value of the right type, and its reply: `[key, element]` (BLPOP/BRPOP),
/// `[key, [elements…]]` (BLMPOP), the element (BLMOVE), `[key, member,
/// score]` (BZPOPMIN/MAX) or `[key, [[member, score]…]]` (BZMPOP). A
/// BLMOVE whose destination holds another type is WRONGTYPE, and nothing
/// moves. The key is deleted once empty.
///
/// Its effect is its plain form: the blocking command's own when it runs at
/// once, an effect of its own when it serves a client that `waited`
/// (Redis's `serveClientBlockedOnList`).
pub fn serve(ctx: &mut Ctx, key: &Bytes, op: &BlockOp, waited: bool) -> CmdResult {
    let reply = serve_pop(ctx, key, op, waited)?;
    if waited && let Some(effect) = ctx.state.effects.command.rewrite.take() {
        ctx.also_propagate(effect);
    }
    Ok(reply)
}

fn serve_pop(ctx: &mut Ctx, key: &Bytes, op: &BlockOp, waited: bool) -> CmdResult {
    match op {
        BlockOp::Pop { left, count } => {
            let popped = super::lists::pop_end(ctx, key, *left, count.unwrap_or(1))?;
            // A waiter's single pop counts no change, as in Redis.
            if count.is_some() || !waited {
                ctx.dirty(popped.len() as u64);
            }
            super::lists::propagate_pop(ctx, key, *left, count.map(|_| popped.len()));
            Ok(match count {
                None => Reply::Array(vec![Reply::Bulk(key.clone()), Reply::opt_bulk(popped.into_iter().next())]),
                Some(_) => Reply::Array(vec![Reply::Bulk(key.clone()), Reply::bulks(popped)]),
            })
        }
        BlockOp::Move { dst, from_left, to_left } => {
            let reply = super::lists::move_between(ctx, key, dst, *from_left, *to_left)?;
            if !waited {
                ctx.dirty(1);
            }
            if ctx.propagating() && !matches!(reply, Reply::Nil) {
                if ctx.client.last_command == "brpoplpush" {
                    ctx.propagate_as_words(&[b"RPOPLPUSH", key, dst]);
                } else {
                    let end = |left: bool| if left { b"left".as_slice() } else { b"right".as_slice() };
                    ctx.propagate_as_words(&[b"LMOVE", key, dst, end(*from_left), end(*to_left)]);
                }
            }
            Ok(reply)
        }
        BlockOp::Postpone(_) | BlockOp::Stream { .. } | BlockOp::Admin | BlockOp::Wait { .. } => {
            Err(CmdError::err("internal: this wait is not served by a pop"))
        }
        BlockOp::ZPop { max, count } => {
            let popped = super::zsets::pop_ends(ctx, key, *max, count.unwrap_or(1))?;
            super::zsets::propagate_pop(ctx, key, *max, count.map(|_| popped.len()));
            Ok(match count {
                None => {
                    let mut reply = vec![Reply::Bulk(key.clone())];
                    for (member, score) in popped {
                        reply.push(Reply::Bulk(member));
                        reply.push(Reply::Double(score));
                    }
                    Reply::Array(reply)
                }
                Some(_) => Reply::Array(vec![
                    Reply::Bulk(key.clone()),
                    Reply::Array(
                        popped
                            .into_iter()
                            .map(|(m, s)| Reply::Array(vec![Reply::Bulk(m), Reply::Double(s)]))
                            .collect(),
                    ),
                ]),
            })
        }
    }
}
