//! Stream commands: XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM, XREAD,
//! XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM, XSETID, XGROUP and
//! XINFO, as Redis 7.0.15's t_stream.c runs them.
//!
//! The structure (entries, emulated listpack nodes, groups) lives in
//! `db/stream.rs`; this module parses arguments in Redis's order (so the
//! first bad one names the error) and shapes replies. What Redis signals
//! is signalled here and nothing more: XADD, XDEL and XTRIM (when they
//! removed something) and the stream XGROUP CREATE MKSTREAM makes touch
//! WATCH; group-side changes (XREADGROUP, XACK, XCLAIM, XGROUP SETID …)
//! do not, as in Redis. Keyspace events are Redis's (`t` class).
//!
//! XREAD / XREADGROUP with BLOCK park the client in `engine::blocking`
//! with a [`BlockOp::Stream`]; [`serve_blocked`] answers it when XADD
//! (or XGROUP DESTROY, or the key's deletion) makes the key ready, as
//! Redis's `serveClientsBlockedOnStreamKey` does. `$` is resolved when the
//! client blocks; a group waiter reads after its group's last ID at the
//! time it is served.

use bytes::Bytes;

use super::args::{parse_i64, upper};
use super::server::help_reply;
use super::table::{CommandSpec, cmd, container, flag::*};
use super::{CmdError, CmdResult, Ctx, Reply};
use crate::db::stream::{Consumer, Group, Nack, NodeLimits, Stream, StreamId, Trim};
use crate::db::{NOTIFY_STREAM, Value};
use crate::engine::blocking::BlockOp;
use crate::error::c_str;

pub const COMMANDS: &[CommandSpec] = &[
    cmd("xadd", -5, xadd).flags(WRITE | DENYOOM | FAST),
    cmd("xrange", -4, xrange).flags(READONLY),
    cmd("xrevrange", -4, xrevrange).flags(READONLY),
    cmd("xlen", 2, xlen).flags(READONLY | FAST),
    cmd("xdel", -3, xdel).flags(WRITE | FAST),
    cmd("xtrim", -4, xtrim).flags(WRITE),
    cmd("xread", -4, xread).flags(READONLY | BLOCKING),
    cmd("xreadgroup", -7, xreadgroup).flags(WRITE | BLOCKING),
    cmd("xack", -4, xack).flags(WRITE | FAST),
    cmd("xpending", -3, xpending).flags(READONLY),
    cmd("xclaim", -6, xclaim).flags(WRITE | FAST),
    cmd("xautoclaim", -6, xautoclaim).flags(WRITE | FAST),
    cmd("xsetid", -3, xsetid).flags(WRITE | DENYOOM | FAST),
    container("xgroup", XGROUP),
    container("xinfo", XINFO),
];

const XGROUP: &[CommandSpec] = &[
    cmd("create", -5, xgroup).flags(WRITE | DENYOOM),
    cmd("setid", -5, xgroup).flags(WRITE),
    cmd("destroy", 4, xgroup).flags(WRITE),
    cmd("createconsumer", 5, xgroup).flags(WRITE | DENYOOM),
    cmd("delconsumer", 5, xgroup).flags(WRITE),
    cmd("help", 2, xgroup).flags(LOADING | STALE),
];

const XINFO: &[CommandSpec] = &[
    cmd("stream", -3, xinfo).flags(READONLY),
    cmd("groups", 3, xinfo).flags(READONLY),
    cmd("consumers", 4, xinfo).flags(READONLY),
    cmd("help", 2, xinfo).flags(LOADING | STALE),
];

/// Default COUNT of a blocked XREAD (`XREAD_BLOCKED_DEFAULT_COUNT`).
const BLOCKED_DEFAULT_COUNT: usize = 1000;

// ---------------------------------------------------------------------------
// IDs

fn invalid_id() -> CmdError {
    CmdError::err("Invalid stream ID specified as stream command argument")
}

/// C's `string2ull`: a strict integer first, else `strtoull` (leading
/// blanks, a sign, digits to the end).
fn parse_ull(s: &[u8]) -> Option<u64> {
    if let Some(v) = crate::numfmt::parse_i64(s) {
        return (v >= 0).then_some(v as u64);
    }
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        i += 1;
    }
    let mut neg = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        neg = s[i] == b'-';
        i += 1;
    }
    let digits = i;
    let mut v: u64 = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        v = v.checked_mul(10)?.checked_add((s[i] - b'0') as u64)?;
        i += 1;
    }
    if i == digits || i != s.len() {
        return None;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// `streamGenericParseIDOrReply`: `-`, `+` (unless `strict`), `ms`,
/// `ms-seq`, and `ms-*` when `seq_given` is asked for (it is then set
/// false). A missing sequence is `missing_seq`.
fn parse_id_full(raw: &[u8], missing_seq: u64, strict: bool, seq_given: Option<&mut bool>) -> CmdResult<StreamId> {
    if raw.len() > 127 {
        return Err(invalid_id());
    }
    let buf = c_str(raw, usize::MAX);
    if strict && (buf == b"-" || buf == b"+") {
        return Err(invalid_id());
    }
    let accepts_star = seq_given.is_some();
    let mut seq_given = seq_given;
    if let Some(given) = seq_given.as_deref_mut() {
        *given = true;
    }
    match buf {
        b"-" => return Ok(StreamId::MIN),
        b"+" => return Ok(StreamId::MAX),
        _ => {}
    }
    let (ms_part, seq_part) = match buf.iter().position(|&b| b == b'-') {
        Some(dash) => (&buf[..dash], Some(&buf[dash + 1..])),
        None => (buf, None),
    };
    let ms = parse_ull(ms_part).ok_or_else(invalid_id)?;
    let seq = match seq_part {
        Some(b"*") if accepts_star => {
            if let Some(given) = seq_given {
                *given = false;
            }
            0
        }
        Some(s) => parse_ull(s).ok_or_else(invalid_id)?,
        None => missing_seq,
    };
    Ok(StreamId::new(ms, seq))
}

/// An ID where `-` and `+` are refused.
fn parse_strict(raw: &[u8]) -> CmdResult<StreamId> {
    parse_id_full(raw, 0, true, None)
}

/// A range bound (`streamParseIntervalIDOrReply`): `(id` is exclusive.
/// `start` bounds move up past an exclusive ID, end bounds down.
fn parse_bound(raw: &[u8], missing_seq: u64, start: bool) -> CmdResult<StreamId> {
    if raw.len() > 1 && raw[0] == b'(' {
        let id = parse_id_full(&raw[1..], missing_seq, true, None)?;
        if start {
            id.next().ok_or_else(|| CmdError::err("invalid start ID for the interval"))
        } else {
            id.prev().ok_or_else(|| CmdError::err("invalid end ID for the interval"))
        }
    } else {
        parse_id_full(raw, missing_seq, false, None)
    }
}

fn id_reply(id: StreamId) -> Reply {
    Reply::Bulk(id.to_bytes())
}

fn entry_reply(id: StreamId, fields: &[Bytes]) -> Reply {
    Reply::Array(vec![id_reply(id), Reply::bulks(fields.iter().cloned())])
}

fn no_group(key: &[u8], group: &[u8], tail: &str) -> CmdError {
    let mut text = b"NOGROUP No such key '".to_vec();
    text.extend_from_slice(c_str(key, usize::MAX));
    text.extend_from_slice(b"' or consumer group '");
    text.extend_from_slice(c_str(group, usize::MAX));
    text.push(b'\'');
    text.extend_from_slice(tail.as_bytes());
    CmdError::new_bytes(text)
}

fn no_such_group_for_key(group: &[u8], key: &[u8]) -> CmdError {
    let mut text = b"NOGROUP No such consumer group '".to_vec();
    text.extend_from_slice(c_str(group, usize::MAX));
    text.extend_from_slice(b"' for key name '");
    text.extend_from_slice(c_str(key, usize::MAX));
    text.push(b'\'');
    CmdError::new_bytes(text)
}

// ---------------------------------------------------------------------------
// Lookups

fn node_limits(ctx: &Ctx) -> NodeLimits {
    let p = &ctx.state.params;
    let d = NodeLimits::default();
    NodeLimits {
        max_entries: p.int("stream-node-max-entries").map_or(d.max_entries, |v| v.max(0) as u64),
        max_bytes: p.int("stream-node-max-bytes").map_or(d.max_bytes, |v| v.max(0) as u64),
    }
}

/// A stream for reading (counted as a hit or miss): `None` when missing.
fn read_stream<'a>(ctx: &'a mut Ctx, key: &[u8]) -> CmdResult<Option<&'a Stream>> {
    crate::db::typed(ctx.read(key), Value::as_stream)
}

/// Where the stream at `key` is, looked up as a read (counted); WRONGTYPE
/// for another type.
fn read_position(ctx: &mut Ctx, key: &[u8]) -> CmdResult<Option<usize>> {
    let Some(p) = ctx.read_position(key) else { return Ok(None) };
    ctx.db().value_at(p).as_stream()?;
    Ok(Some(p))
}

/// Where the stream at `key` is, looked up as a write (uncounted).
fn write_position(ctx: &mut Ctx, key: &[u8]) -> CmdResult<Option<usize>> {
    let Some(p) = ctx.write_position(key) else { return Ok(None) };
    ctx.db().value_at(p).as_stream()?;
    Ok(Some(p))
}

/// The stream at a live position (one the lookups above checked), changed
/// without a WATCH signal.
fn stream_at<'a>(ctx: &'a mut Ctx, position: usize) -> CmdResult<&'a mut Stream> {
    ctx.db().value_at_mut_unsignalled(position).as_stream_mut()
}

// ---------------------------------------------------------------------------
// XADD / XTRIM

/// What XADD and XTRIM parsed (`streamAddTrimArgs`).
#[derive(Default)]
struct AddTrimArgs {
    id: Option<StreamId>,
    seq_given: bool,
    no_mkstream: bool,
    trim: Option<Trim>,
    approx: bool,
    limit: u64,
    /// Where the trimming threshold is in the command line.
    trim_at: usize,
}

/// `streamParseAddOrTrimArgsOrReply`: the options, and for XADD the
/// position of the ID.
fn parse_add_trim(ctx: &Ctx, argv: &[Bytes], xadd: bool) -> CmdResult<(AddTrimArgs, usize)> {
    let mut args = AddTrimArgs {
        seq_given: true,
        ..AddTrimArgs::default()
    };
    let mut limit: Option<i64> = None;
    let mut i = 2;
    let argc = argv.len();
    while i < argc {
        let moreargs = argc - 1 - i;
        let opt = c_str(&argv[i], usize::MAX);
        if xadd && opt == b"*" {
            break;
        } else if (opt.eq_ignore_ascii_case(b"maxlen") || opt.eq_ignore_ascii_case(b"minid")) && moreargs > 0 {
            if args.trim.is_some() {
                return Err(CmdError::err(
                    "syntax error, MAXLEN and MINID options at the same time are not compatible",
                ));
            }
            let maxlen = opt.eq_ignore_ascii_case(b"maxlen");
            args.approx = false;
            let next = c_str(&argv[i + 1], usize::MAX);
            if moreargs >= 2 && next == b"~" {
                args.approx = true;
                i += 1;
            } else if moreargs >= 2 && next == b"=" {
                i += 1;
            }
            if maxlen {
                let n = parse_i64(&argv[i + 1])?;
                if n < 0 {
                    return Err(CmdError::err("The MAXLEN argument must be >= 0."));
                }
                args.trim = Some(Trim::MaxLen(n as u64));
            } else {
                args.trim = Some(Trim::MinId(parse_strict(&argv[i + 1])?));
            }
            args.trim_at = i + 1;
            i += 1;
        } else if opt.eq_ignore_ascii_case(b"limit") && moreargs > 0 {
            let n = parse_i64(&argv[i + 1])?;
            if n < 0 {
                return Err(CmdError::err("The LIMIT argument must be >= 0."));
            }
            limit = Some(n);
            i += 1;
        } else if xadd && opt.eq_ignore_ascii_case(b"nomkstream") {
            args.no_mkstream = true;
        } else if xadd {
            let mut seq_given = true;
            args.id = Some(parse_id_full(&argv[i], 0, true, Some(&mut seq_given))?);
            args.seq_given = seq_given;
            break;
        } else {
            return Err(CmdError::syntax());
        }
        i += 1;
    }
    if limit.is_some_and(|l| l != 0) && args.trim.is_none() {
        return Err(CmdError::err(
            "syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && args.trim.is_none() {
        return Err(CmdError::err("syntax error, XTRIM must be called with a trimming strategy"));
    }
    match limit {
        // The file replays the trim it recorded, exact and whole (Redis's
        // mustObeyClient: no limit).
        _ if ctx.client.replaying => args.limit = 0,
        Some(_) if !args.approx => {
            return Err(CmdError::err("syntax error, LIMIT cannot be used without the special ~ option"));
        }
        Some(l) => args.limit = l as u64,
        None if args.approx => {
            let per_node = node_limits(ctx).max_entries as i64;
            let l = per_node.saturating_mul(100);
            args.limit = if l <= 0 { 10000 } else { l.min(1_000_000) } as u64;
        }
        None => args.limit = 0,
    }
    Ok((args, i))
}

fn xadd(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (args, idpos) = parse_add_trim(ctx, argv, true)?;
    let field_pos = idpos + 1;
    let nfields = argv.len().saturating_sub(field_pos);
    if nfields < 2 || nfields % 2 == 1 {
        return Err(CmdError::arity("xadd"));
    }
    if args.seq_given && args.id == Some(StreamId::MIN) {
        return Err(CmdError::err("The ID specified in XADD must be greater than 0-0"));
    }
    let key = &argv[1];
    let position = match write_position(ctx, key)? {
        Some(p) => p,
        None if args.no_mkstream => return Ok(Reply::Nil),
        None => ctx.db().insert_absent(key, Value::Stream(Box::default())),
    };
    let limits = node_limits(ctx);
    let now = ctx.now_ms;
    let propagating = ctx.propagating();
    let s = stream_at(ctx, position)?;
    if s.last_id == StreamId::MAX {
        return Err(CmdError::err(
            "The stream has exhausted the last possible ID, unable to add more items",
        ));
    }
    let id = match args.id {
        Some(id) if args.seq_given => id,
        Some(id) if s.last_id.ms == id.ms => {
            if s.last_id.seq == u64::MAX {
                return Err(too_small_id());
            }
            StreamId::new(id.ms, s.last_id.seq + 1)
        }
        Some(id) => id,
        None if now > s.last_id.ms => StreamId::new(now, 0),
        None => s.last_id.next().unwrap_or(StreamId::MIN),
    };
    if id <= s.last_id {
        return Err(too_small_id());
    }
    let total: u64 = argv[field_pos..].iter().map(|a| a.len() as u64).sum();
    if total > crate::db::stream::LISTPACK_MAX_SIZE {
        return Err(CmdError::err("Elements are too large to be stored"));
    }
    let fields: Vec<Bytes> = argv[field_pos..].iter().map(crate::db::value::owned).collect();
    s.append(id, fields, limits);
    let trimmed = args.trim.is_some_and(|t| s.trim(t, args.approx, args.limit) > 0);
    let effect = propagating.then(|| {
        // Replayed with the ID it made and the trimming it did.
        let mut effect = argv.to_vec();
        if args.approx {
            approx_trim_done(&mut effect, &args, s);
        }
        if args.id.is_none() || !args.seq_given {
            effect[idpos] = id.to_bytes();
        }
        effect
    });
    let db = ctx.db();
    db.touch_watched(key);
    db.notify(NOTIFY_STREAM, "xadd", key);
    if trimmed {
        db.notify(NOTIFY_STREAM, "xtrim", key);
    }
    db.signal_key_ready(key);
    ctx.dirty(1);
    if let Some(effect) = effect {
        ctx.propagate_as(effect);
    }
    Ok(id_reply(id))
}

/// An approximate trim (`~`, maybe with LIMIT) is replayed as the exact
/// trim it came to (`streamRewriteApproxSpecifier`,
/// `streamRewriteTrimArgument`): `=` and the length left, or the first ID.
fn approx_trim_done(effect: &mut [Bytes], args: &AddTrimArgs, s: &crate::db::stream::Stream) {
    effect[args.trim_at - 1] = Bytes::from_static(b"=");
    effect[args.trim_at] = match args.trim {
        Some(Trim::MaxLen(_)) => Bytes::copy_from_slice(itoa::Buffer::new().format(s.len()).as_bytes()),
        _ => s.first().map_or(StreamId::MIN, |(id, _)| id).to_bytes(),
    };
}

fn too_small_id() -> CmdError {
    CmdError::err("The ID specified in XADD is equal or smaller than the target stream top item")
}

fn xtrim(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (args, _) = parse_add_trim(ctx, argv, false)?;
    let key = &argv[1];
    let Some(position) = write_position(ctx, key)? else {
        return Ok(Reply::Int(0));
    };
    let Some(trim) = args.trim else { return Ok(Reply::Int(0)) };
    let propagating = ctx.propagating();
    let s = stream_at(ctx, position)?;
    let deleted = s.trim(trim, args.approx, args.limit);
    if deleted > 0 {
        let effect = (propagating && args.approx).then(|| {
            let mut effect = argv.to_vec();
            approx_trim_done(&mut effect, &args, s);
            effect
        });
        let db = ctx.db();
        db.notify(NOTIFY_STREAM, "xtrim", key);
        db.touch_watched(key);
        if let Some(effect) = effect {
            ctx.propagate_as(effect);
        }
    }
    ctx.dirty(deleted as u64);
    Ok(Reply::Int(deleted as i64))
}

fn xdel(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let key = &argv[1];
    let Some(position) = write_position(ctx, key)? else {
        return Ok(Reply::Int(0));
    };
    let ids = argv[2..].iter().map(|a| parse_strict(a)).collect::<CmdResult<Vec<_>>>()?;
    let s = stream_at(ctx, position)?;
    let mut deleted = 0;
    let mut first_entry = false;
    for id in ids {
        if s.delete(id) {
            if id == s.first_id {
                first_entry = true;
            }
            if id > s.max_deleted_id {
                s.max_deleted_id = id;
            }
            deleted += 1;
        }
    }
    if deleted > 0 {
        if s.is_empty() {
            s.first_id = StreamId::MIN;
        } else if first_entry {
            s.refresh_first_id();
        }
        let db = ctx.db();
        db.touch_watched(key);
        db.notify(NOTIFY_STREAM, "xdel", key);
    }
    ctx.dirty(deleted as u64);
    Ok(Reply::Int(deleted))
}

fn xlen(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(read_stream(ctx, &argv[1])?.map_or(0, |s| s.len() as i64)))
}

// ---------------------------------------------------------------------------
// XRANGE / XREVRANGE

fn xrange(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    range_generic(ctx, argv, false)
}

fn xrevrange(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    range_generic(ctx, argv, true)
}

fn range_generic(ctx: &mut Ctx, argv: &[Bytes], rev: bool) -> CmdResult {
    let (start_arg, end_arg) = if rev { (&argv[3], &argv[2]) } else { (&argv[2], &argv[3]) };
    let start = parse_bound(start_arg, 0, true)?;
    let end = parse_bound(end_arg, u64::MAX, false)?;
    let mut count: i64 = -1;
    let mut j = 4;
    while j < argv.len() {
        if c_str(&argv[j], usize::MAX).eq_ignore_ascii_case(b"COUNT") && j + 1 < argv.len() {
            count = parse_i64(&argv[j + 1])?.max(0);
            j += 2;
        } else {
            return Err(CmdError::syntax());
        }
    }
    let Some(s) = read_stream(ctx, &argv[1])? else {
        return Ok(Reply::Array(vec![]));
    };
    if count == 0 {
        return Ok(Reply::NilArray);
    }
    let limit = if count < 0 { usize::MAX } else { count as usize };
    Ok(Reply::Array(
        s.range(start, end, rev).take(limit).map(|(id, f)| entry_reply(id, f)).collect(),
    ))
}

// ---------------------------------------------------------------------------
// XREAD / XREADGROUP

/// The group side of an XREADGROUP.
#[derive(Debug, Clone)]
pub struct GroupRead {
    pub group: Bytes,
    pub consumer: Bytes,
    pub noack: bool,
}

fn xread(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    read_generic(ctx, argv, false)
}

fn xreadgroup(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    read_generic(ctx, argv, true)
}

/// `xreadCommand`, for both commands.
fn read_generic(ctx: &mut Ctx, argv: &[Bytes], xreadgroup: bool) -> CmdResult {
    let mut timeout: Option<u64> = None;
    let mut count: i64 = 0;
    let mut streams_arg = 0;
    let mut group: Option<GroupRead> = None;
    let mut noack = false;
    let argc = argv.len();
    let mut i = 1;
    while i < argc {
        let moreargs = argc - i - 1;
        let o = c_str(&argv[i], usize::MAX);
        if o.eq_ignore_ascii_case(b"BLOCK") && moreargs > 0 {
            if ctx.client.is_script {
                return Err(CmdError::err(format!(
                    "{} command is not allowed with BLOCK option from scripts",
                    String::from_utf8_lossy(c_str(&argv[0], usize::MAX))
                )));
            }
            i += 1;
            let t = crate::numfmt::parse_i64(&argv[i]).ok_or_else(|| CmdError::err("timeout is not an integer or out of range"))?;
            if t < 0 {
                return Err(CmdError::err("timeout is negative"));
            }
            timeout = Some(t as u64);
        } else if o.eq_ignore_ascii_case(b"COUNT") && moreargs > 0 {
            i += 1;
            count = parse_i64(&argv[i])?.max(0);
        } else if o.eq_ignore_ascii_case(b"STREAMS") && moreargs > 0 {
            streams_arg = i + 1;
            if !(argc - streams_arg).is_multiple_of(2) {
                return Err(CmdError::err(
                    "Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.",
                ));
            }
            break;
        } else if o.eq_ignore_ascii_case(b"GROUP") && moreargs >= 2 {
            if !xreadgroup {
                return Err(CmdError::err(
                    "The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            group = Some(GroupRead {
                group: argv[i + 1].clone(),
                consumer: argv[i + 2].clone(),
                noack: false,
            });
            i += 2;
        } else if o.eq_ignore_ascii_case(b"NOACK") {
            if !xreadgroup {
                return Err(CmdError::err(
                    "The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            noack = true;
        } else {
            return Err(CmdError::syntax());
        }
        i += 1;
    }
    if streams_arg == 0 {
        return Err(CmdError::syntax());
    }
    if xreadgroup && group.is_none() {
        return Err(CmdError::err("Missing GROUP option for XREADGROUP"));
    }
    if let Some(g) = &mut group {
        g.noack = noack;
    }
    let nstreams = (argc - streams_arg) / 2;
    let keys = &argv[streams_arg..streams_arg + nstreams];
    let mut ids = Vec::with_capacity(nstreams);
    for (k, key) in keys.iter().enumerate() {
        let raw = &argv[streams_arg + nstreams + k];
        let position = read_position(ctx, key)?;
        if let Some(g) = &group {
            let exists = position.is_some_and(|p| ctx.db().value_at(p).as_stream().is_ok_and(|s| s.groups.contains_key(&g.group)));
            if !exists {
                return Err(no_group(key, &g.group, " in XREADGROUP with GROUP option"));
            }
        }
        let raw_c = c_str(raw, usize::MAX);
        if raw_c == b"$" {
            if xreadgroup {
                return Err(CmdError::err(
                    "The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.",
                ));
            }
            let last = position.map_or(StreamId::MIN, |p| match ctx.db().value_at(p) {
                Value::Stream(s) => s.last_id,
                _ => StreamId::MIN,
            });
            ids.push(last);
            continue;
        } else if raw_c == b">" {
            if !xreadgroup {
                return Err(CmdError::err(
                    "The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.",
                ));
            }
            ids.push(StreamId::MAX);
            continue;
        }
        ids.push(parse_strict(raw)?);
    }

    // A group read is replayed as the changes it made to the group
    // (XCLAIM, XGROUP), never as itself.
    ctx.prevent_propagation();
    let propagating = ctx.propagating();
    // Serve synchronously what can be.
    let mut served: Vec<(Reply, Reply)> = Vec::new();
    for (k, key) in keys.iter().enumerate() {
        let Some(position) = read_position(ctx, key)? else { continue };
        let now = ctx.now_ms;
        let s = stream_at(ctx, position)?;
        let mut gt = ids[k];
        let mut history = false;
        let serve = match &group {
            Some(g) => {
                if gt != StreamId::MAX {
                    history = true;
                    true
                } else if let (Some((maxid, _)), Some(cg)) = (s.last(), s.groups.get(&g.group)) {
                    if maxid > cg.last_id {
                        gt = cg.last_id;
                        true
                    } else {
                        false
                    }
                } else {
                    false
                }
            }
            None => s.last().is_some_and(|(maxid, _)| maxid > gt),
        };
        if !serve {
            continue;
        }
        let start = gt.next().unwrap_or(StreamId::MIN);
        let mut events = Vec::new();
        let mut effects = propagating.then(Vec::new);
        let mut consumers_created = 0;
        let entries = match &group {
            Some(g) => {
                if ensure_consumer(s, &g.group, &g.consumer, now) {
                    events.push("xgroup-createconsumer");
                    consumers_created += 1;
                    if g.noack
                        && let Some(effects) = effects.as_mut()
                    {
                        effects.push(consumer_creation_effect(key, g));
                    }
                }
                if history {
                    read_history(s, &g.group, &g.consumer, start, count as usize, now)
                } else {
                    read_new(s, start, count as usize, Some((key, g)), now, effects.as_mut())
                }
            }
            None => read_new(s, start, count as usize, None, now, None),
        };
        for event in events {
            ctx.db().notify(NOTIFY_STREAM, event, key);
        }
        if group.is_some() {
            ctx.dirty(1 + consumers_created);
        }
        for effect in effects.into_iter().flatten() {
            ctx.also_propagate(effect);
        }
        served.push((Reply::Bulk(key.clone()), Reply::Array(entries)));
    }
    if !served.is_empty() {
        return Ok(read_reply(ctx.client.resp, served));
    }
    if let Some(timeout) = timeout {
        if ctx.client.is_script || ctx.state.deny_blocking {
            return Ok(Reply::NilArray);
        }
        let op = BlockOp::Stream {
            ids: keys.iter().cloned().zip(ids).collect(),
            count: if count > 0 { count as usize } else { BLOCKED_DEFAULT_COUNT },
            group,
        };
        return super::blocking::block(ctx, keys, op, timeout);
    }
    Ok(Reply::NilArray)
}

/// XREAD's reply: an array of `[key, entries]` in RESP2, a map in RESP3.
fn read_reply(resp: u8, served: Vec<(Reply, Reply)>) -> Reply {
    if resp >= 3 {
        Reply::Map(served)
    } else {
        Reply::Array(served.into_iter().map(|(k, v)| Reply::Array(vec![k, v])).collect())
    }
}

/// Looks the consumer up (refreshing its seen time) or creates it; true
/// if it was created (Redis then raises `xgroup-createconsumer`).
fn ensure_consumer(s: &mut Stream, group: &[u8], consumer: &Bytes, now: u64) -> bool {
    let Some(cg) = s.groups.get_mut(group) else { return false };
    match cg.consumers.get_mut(consumer) {
        Some(c) => {
            c.seen_time = now;
            false
        }
        None => {
            cg.consumers.insert(
                crate::db::value::owned(consumer),
                Consumer {
                    seen_time: now,
                    ..Consumer::default()
                },
            );
            true
        }
    }
}

/// `streamReplyWithRange` from `start` on, for XREAD or a group read of
/// new entries: a group's last ID and read counter move, and (without
/// NOACK) each entry becomes pending for the consumer.
///
/// With `effects`, what the read changed is added there as Redis
/// replays it: an XCLAIM per entry made pending, or, with NOACK, the
/// group's new last ID.
fn read_new(
    s: &mut Stream,
    start: StreamId,
    count: usize,
    group: Option<(&Bytes, &GroupRead)>,
    now: u64,
    mut effects: Option<&mut Vec<Vec<Bytes>>>,
) -> Vec<Reply> {
    let limit = if count == 0 { usize::MAX } else { count };
    let picked: Vec<(StreamId, Vec<Bytes>)> = s
        .range(start, StreamId::MAX, false)
        .take(limit)
        .map(|(id, f)| (id, f.clone()))
        .collect();
    let mut out = Vec::with_capacity(picked.len());
    let mut moved = false;
    for (id, fields) in picked {
        if let Some((key, g)) = group {
            let tombstones = s.range_has_tombstones(id, StreamId::MAX);
            let estimate = s.estimate_distance(id);
            let added = s.entries_added;
            if let Some(cg) = s.groups.get_mut(&g.group) {
                if id > cg.last_id {
                    if cg.entries_read != -1 && !tombstones {
                        cg.entries_read += 1;
                    } else if added != 0 {
                        cg.entries_read = estimate;
                    }
                    cg.last_id = id;
                    moved = true;
                }
                if !g.noack {
                    add_pending(cg, id, &g.consumer, now);
                    if let Some(effects) = effects.as_deref_mut()
                        && let Some(nack) = cg.pel.get(&id)
                    {
                        effects.push(xclaim_effect(key, &g.group, &g.consumer, id.to_bytes(), nack, cg.last_id));
                    }
                }
            }
        }
        out.push(entry_reply(id, &fields));
    }
    if let Some((key, g)) = group
        && g.noack
        && moved
        && let Some(effects) = effects
        && let Some(cg) = s.groups.get(&g.group)
    {
        effects.push(group_id_effect(key, &g.group, cg));
    }
    out
}

/// A pending entry as Redis replays a change to it
/// (`streamPropagateXCLAIM`): an XCLAIM that sets its owner, delivery
/// time and count, and the group's last ID.
fn xclaim_effect(key: &Bytes, group: &Bytes, consumer: &Bytes, id: Bytes, nack: &Nack, last_id: StreamId) -> Vec<Bytes> {
    let number = |n: u64| Bytes::copy_from_slice(itoa::Buffer::new().format(n).as_bytes());
    vec![
        Bytes::from_static(b"XCLAIM"),
        key.clone(),
        group.clone(),
        consumer.clone(),
        Bytes::from_static(b"0"),
        id,
        Bytes::from_static(b"TIME"),
        number(nack.delivery_time),
        Bytes::from_static(b"RETRYCOUNT"),
        number(nack.delivery_count),
        Bytes::from_static(b"FORCE"),
        Bytes::from_static(b"JUSTID"),
        Bytes::from_static(b"LASTID"),
        last_id.to_bytes(),
    ]
}

/// A group's last ID as Redis replays it (`streamPropagateGroupID`).
fn group_id_effect(key: &Bytes, group: &Bytes, cg: &Group) -> Vec<Bytes> {
    vec![
        Bytes::from_static(b"XGROUP"),
        Bytes::from_static(b"SETID"),
        key.clone(),
        group.clone(),
        cg.last_id.to_bytes(),
        Bytes::from_static(b"ENTRIESREAD"),
        Bytes::copy_from_slice(itoa::Buffer::new().format(cg.entries_read).as_bytes()),
    ]
}

/// A consumer a NOACK read created, as Redis replays it
/// (`streamPropagateConsumerCreation`).
fn consumer_creation_effect(key: &Bytes, g: &GroupRead) -> Vec<Bytes> {
    vec![
        Bytes::from_static(b"XGROUP"),
        Bytes::from_static(b"CREATECONSUMER"),
        key.clone(),
        g.group.clone(),
        g.consumer.clone(),
    ]
}

/// Makes `id` pending for `consumer`, delivered now once (a pending entry
/// of another consumer moves over).
fn add_pending(cg: &mut Group, id: StreamId, consumer: &Bytes, now: u64) {
    match cg.pel.entry(id) {
        std::collections::btree_map::Entry::Occupied(mut nack) => {
            let nack = nack.get_mut();
            nack.delivery_time = now;
            nack.delivery_count = 1;
            cg.assign(id, consumer);
        }
        std::collections::btree_map::Entry::Vacant(slot) => {
            slot.insert(Nack {
                delivery_time: now,
                delivery_count: 1,
                consumer: Some(consumer.clone()),
            });
            if let Some(c) = cg.consumers.get_mut(consumer) {
                c.pel.insert(id);
            }
        }
    }
}

/// `streamReplyWithRangeFromConsumerPEL`: the consumer's pending entries
/// from `start`; a deleted one is `[id, nil]`, a present one is delivered
/// again (its count goes up).
fn read_history(s: &mut Stream, group: &[u8], consumer: &[u8], start: StreamId, count: usize, now: u64) -> Vec<Reply> {
    let ids: Vec<StreamId> = match s.groups.get(group).and_then(|g| g.consumers.get(consumer)) {
        Some(c) => c
            .pel
            .range(start..)
            .take(if count == 0 { usize::MAX } else { count })
            .copied()
            .collect(),
        None => Vec::new(),
    };
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        match s.get(id) {
            Some(fields) => {
                out.push(entry_reply(id, fields));
                if let Some(nack) = s.groups.get_mut(group).and_then(|g| g.pel.get_mut(&id)) {
                    nack.delivery_time = now;
                    nack.delivery_count += 1;
                }
            }
            None => out.push(Reply::Array(vec![id_reply(id), Reply::NilArray])),
        }
    }
    out
}

/// Serves a client blocked by XREAD / XREADGROUP on `key`, which a write
/// made ready (`serveClientsBlockedOnStreamKey`): `None` while there is
/// still nothing for it, its reply otherwise. A group waiter whose key no
/// longer holds a stream, or whose group is gone, gets an error.
pub fn serve_blocked(ctx: &mut Ctx, key: &Bytes, op: &BlockOp) -> Option<CmdResult> {
    let BlockOp::Stream { ids, count, group } = op else { return None };
    let now = ctx.now_ms;
    let propagating = ctx.propagating();
    let stream = match ctx.db().live_position(key, now) {
        Some(p) => stream_at(ctx, p).ok(),
        None => None,
    };
    let Some(s) = stream else {
        return group
            .as_ref()
            .map(|_| Err(CmdError::new("UNBLOCKED the stream key no longer exists")));
    };
    let mut gt = ids.iter().find(|(k, _)| k == key).map_or(StreamId::MAX, |(_, id)| *id);
    if let Some(g) = group {
        match s.groups.get(&g.group) {
            Some(cg) => gt = cg.last_id,
            None => {
                return Some(Err(CmdError::new(
                    "NOGROUP the consumer group this client was blocked on no longer exists",
                )));
            }
        }
    }
    if s.last_id <= gt {
        return None;
    }
    let start = gt.next().unwrap_or(StreamId::MIN);
    let created = group.as_ref().is_some_and(|g| ensure_consumer(s, &g.group, &g.consumer, now));
    let mut effects = propagating.then(Vec::new);
    if created
        && let Some(g) = group.as_ref().filter(|g| g.noack)
        && let Some(effects) = effects.as_mut()
    {
        effects.push(consumer_creation_effect(key, g));
    }
    let entries = read_new(s, start, *count, group.as_ref().map(|g| (key, g)), now, effects.as_mut());
    if created {
        ctx.db().notify(NOTIFY_STREAM, "xgroup-createconsumer", key);
    }
    if group.is_some() {
        ctx.dirty(1 + u64::from(created));
    }
    for effect in effects.into_iter().flatten() {
        ctx.also_propagate(effect);
    }
    Some(Ok(read_reply(
        ctx.client.resp,
        vec![(Reply::Bulk(key.clone()), Reply::Array(entries))],
    )))
}

// ---------------------------------------------------------------------------
// Groups: XGROUP, XSETID, XACK, XPENDING, XCLAIM, XAUTOCLAIM

fn xgroup(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let sub = upper(&argv[1]);
    let argc = argv.len();
    if sub == "HELP" && argc == 2 {
        return Ok(help_reply(
            "XGROUP",
            &[
                "CREATE <key> <groupname> <id|$> [option]",
                "    Create a new consumer group. Options are:",
                "    * MKSTREAM",
                "      Create the empty stream if it does not exist.",
                "    * ENTRIESREAD entries_read",
                "      Set the group's entries_read counter (internal use).",
                "CREATECONSUMER <key> <groupname> <consumer>",
                "    Create a new consumer in the specified group.",
                "DELCONSUMER <key> <groupname> <consumer>",
                "    Remove the specified consumer.",
                "DESTROY <key> <groupname>",
                "    Remove the specified group.",
                "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
                "    Set the current group ID and entries_read counter.",
            ],
        ));
    }
    let syntax = || CmdError::subcommand_syntax(&argv[1], "xgroup");
    if argc < 4 {
        return Err(syntax());
    }
    let mut mkstream = false;
    let mut entries_read: i64 = -1;
    let mut i = 5;
    while i < argc {
        let a = c_str(&argv[i], usize::MAX);
        if sub == "CREATE" && a.eq_ignore_ascii_case(b"MKSTREAM") {
            mkstream = true;
            i += 1;
        } else if (sub == "CREATE" || sub == "SETID") && a.eq_ignore_ascii_case(b"ENTRIESREAD") && i + 1 < argc {
            entries_read = parse_i64(&argv[i + 1])?;
            if entries_read < 0 && entries_read != -1 {
                return Err(CmdError::err("value for ENTRIESREAD must be positive or -1"));
            }
            i += 2;
        } else {
            return Err(syntax());
        }
    }
    let key = &argv[2];
    let group_name = &argv[3];
    let position = write_position(ctx, key)?;
    if !mkstream {
        let Some(p) = position else {
            return Err(CmdError::err(
                "The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.",
            ));
        };
        let has_group = stream_at(ctx, p)?.groups.contains_key(group_name);
        if !has_group && matches!(sub.as_str(), "SETID" | "CREATECONSUMER" | "DELCONSUMER") {
            return Err(no_such_group_for_key(group_name, key));
        }
    }
    let now = ctx.now_ms;
    match sub.as_str() {
        "CREATE" if (5..=8).contains(&argc) => {
            let raw = &argv[4];
            let id = if c_str(raw, usize::MAX) == b"$" {
                match position {
                    Some(p) => stream_at(ctx, p)?.last_id,
                    None => StreamId::MIN,
                }
            } else {
                parse_strict(raw)?
            };
            let p = match position {
                Some(p) => p,
                None => ctx.db().insert_absent(key, Value::Stream(Box::default())),
            };
            let s = stream_at(ctx, p)?;
            if s.groups.contains_key(group_name) {
                return Err(CmdError::new("BUSYGROUP Consumer Group name already exists"));
            }
            s.groups.insert(crate::db::value::owned(group_name), Group::new(id, entries_read));
            ctx.db().notify(NOTIFY_STREAM, "xgroup-create", key);
            ctx.dirty(1);
            Ok(Reply::OK)
        }
        "SETID" if argc == 5 || argc == 7 => {
            let Some(p) = position else { return Err(syntax()) };
            let raw = &argv[4];
            let id = if c_str(raw, usize::MAX) == b"$" {
                stream_at(ctx, p)?.last_id
            } else {
                parse_id_full(raw, 0, false, None)?
            };
            if let Some(cg) = stream_at(ctx, p)?.groups.get_mut(group_name) {
                cg.last_id = id;
                cg.entries_read = entries_read;
            }
            ctx.db().notify(NOTIFY_STREAM, "xgroup-setid", key);
            ctx.dirty(1);
            Ok(Reply::OK)
        }
        "DESTROY" if argc == 4 => {
            let Some(p) = position else { return Err(syntax()) };
            if stream_at(ctx, p)?.groups.remove(group_name.as_ref()).is_none() {
                return Ok(Reply::Int(0));
            }
            let db = ctx.db();
            db.notify(NOTIFY_STREAM, "xgroup-destroy", key);
            db.signal_key_ready(key);
            ctx.dirty(1);
            Ok(Reply::Int(1))
        }
        "CREATECONSUMER" if argc == 5 => {
            let Some(p) = position else { return Err(syntax()) };
            let consumer = &argv[4];
            let cg = stream_at(ctx, p)?.groups.get_mut(group_name.as_ref()).ok_or_else(syntax)?;
            if cg.consumers.contains_key(consumer) {
                return Ok(Reply::Int(0));
            }
            cg.consumers.insert(
                crate::db::value::owned(consumer),
                Consumer {
                    seen_time: now,
                    ..Consumer::default()
                },
            );
            ctx.db().notify(NOTIFY_STREAM, "xgroup-createconsumer", key);
            ctx.dirty(1);
            Ok(Reply::Int(1))
        }
        "DELCONSUMER" if argc == 5 => {
            let Some(p) = position else { return Err(syntax()) };
            let cg = stream_at(ctx, p)?.groups.get_mut(group_name.as_ref()).ok_or_else(syntax)?;
            let Some(consumer) = cg.consumers.remove(argv[4].as_ref()) else {
                return Ok(Reply::Int(0));
            };
            for id in &consumer.pel {
                cg.pel.remove(id);
            }
            ctx.db().notify(NOTIFY_STREAM, "xgroup-delconsumer", key);
            ctx.dirty(1);
            Ok(Reply::Int(consumer.pel.len() as i64))
        }
        _ => Err(syntax()),
    }
}

fn xsetid(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let id = parse_strict(&argv[2])?;
    let mut entries_added: i64 = -1;
    let mut max_xdel = StreamId::MIN;
    let mut i = 3;
    while i < argv.len() {
        let moreargs = argv.len() - 1 - i;
        let opt = c_str(&argv[i], usize::MAX);
        if opt.eq_ignore_ascii_case(b"ENTRIESADDED") && moreargs > 0 {
            entries_added = parse_i64(&argv[i + 1])?;
            if entries_added < 0 {
                return Err(CmdError::err("entries_added must be positive"));
            }
            i += 2;
        } else if opt.eq_ignore_ascii_case(b"MAXDELETEDID") && moreargs > 0 {
            max_xdel = parse_strict(&argv[i + 1])?;
            if id < max_xdel {
                return Err(CmdError::err(
                    "The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                ));
            }
            i += 2;
        } else {
            return Err(CmdError::syntax());
        }
    }
    let key = &argv[1];
    let Some(position) = write_position(ctx, key)? else {
        return Err(CmdError::no_such_key());
    };
    let s = stream_at(ctx, position)?;
    if let Some((maxid, _)) = s.last() {
        if id < maxid {
            return Err(CmdError::err(
                "The ID specified in XSETID is smaller than the target stream top item",
            ));
        }
        if entries_added != -1 && s.len() as i64 > entries_added {
            return Err(CmdError::err(
                "The entries_added specified in XSETID is smaller than the target stream length",
            ));
        }
    }
    s.last_id = id;
    if entries_added != -1 {
        s.entries_added = entries_added as u64;
    }
    if !max_xdel.is_zero() {
        s.max_deleted_id = max_xdel;
    }
    ctx.db().notify(NOTIFY_STREAM, "xsetid", key);
    ctx.dirty(1);
    Ok(Reply::OK)
}

fn xack(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let Some(position) = read_position(ctx, &argv[1])? else {
        return Ok(Reply::Int(0));
    };
    if !stream_at(ctx, position)?.groups.contains_key(argv[2].as_ref()) {
        return Ok(Reply::Int(0));
    }
    let ids = argv[3..].iter().map(|a| parse_strict(a)).collect::<CmdResult<Vec<_>>>()?;
    let Some(cg) = stream_at(ctx, position)?.groups.get_mut(argv[2].as_ref()) else {
        return Ok(Reply::Int(0));
    };
    let acked = ids.into_iter().filter(|id| cg.ack(*id)).count();
    ctx.dirty(acked as u64);
    Ok(Reply::Int(acked as i64))
}

fn xpending(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let argc = argv.len();
    let justinfo = argc == 3;
    if argc != 3 && !(6..=9).contains(&argc) {
        return Err(CmdError::syntax());
    }
    let mut range = (StreamId::MIN, StreamId::MAX);
    let mut count: i64 = 0;
    let mut minidle: i64 = 0;
    let mut consumer: Option<&Bytes> = None;
    if argc >= 6 {
        let mut startidx = 3;
        if c_str(&argv[3], usize::MAX).eq_ignore_ascii_case(b"IDLE") {
            minidle = parse_i64(&argv[4])?;
            if argc < 8 {
                return Err(CmdError::syntax());
            }
            startidx += 2;
        }
        count = parse_i64(&argv[startidx + 2])?.max(0);
        range.0 = parse_bound(&argv[startidx], 0, true)?;
        range.1 = parse_bound(&argv[startidx + 1], u64::MAX, false)?;
        consumer = argv.get(startidx + 3);
    }
    let (key, group) = (&argv[1], &argv[2]);
    let position = read_position(ctx, key)?;
    let now = ctx.now_ms;
    let s = match position {
        Some(p) => Some(&*stream_at(ctx, p)?),
        None => None,
    };
    let Some(cg) = s.and_then(|s| s.groups.get(group.as_ref())) else {
        return Err(no_group(key, group, ""));
    };
    if justinfo {
        let (Some(first), Some(last)) = (cg.pel.keys().next(), cg.pel.keys().next_back()) else {
            return Ok(Reply::Array(vec![Reply::Int(0), Reply::Nil, Reply::Nil, Reply::NilArray]));
        };
        let per_consumer = cg
            .consumers
            .iter()
            .filter(|(_, c)| !c.pel.is_empty())
            .map(|(name, c)| Reply::Array(vec![Reply::Bulk(name.clone()), Reply::Bulk(Bytes::from(c.pel.len().to_string()))]))
            .collect();
        return Ok(Reply::Array(vec![
            Reply::Int(cg.pel.len() as i64),
            id_reply(*first),
            id_reply(*last),
            Reply::Array(per_consumer),
        ]));
    }
    let ids: Vec<StreamId> = match consumer {
        Some(name) => match cg.consumers.get(name) {
            Some(c) => c.pel.iter().copied().collect(),
            None => return Ok(Reply::Array(vec![])),
        },
        None => cg.pel.keys().copied().collect(),
    };
    let mut out = Vec::new();
    for id in ids.into_iter().filter(|id| *id >= range.0) {
        if count == 0 || id > range.1 {
            break;
        }
        let Some(nack) = cg.pel.get(&id) else { continue };
        let idle = now as i64 - nack.delivery_time as i64;
        if minidle != 0 && idle < minidle {
            continue;
        }
        count -= 1;
        out.push(Reply::Array(vec![
            id_reply(id),
            Reply::Bulk(nack.consumer.clone().unwrap_or_default()),
            Reply::Int(idle.max(0)),
            Reply::Int(nack.delivery_count as i64),
        ]));
    }
    Ok(Reply::Array(out))
}

fn xclaim(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (key, group, name) = (&argv[1], &argv[2], &argv[3]);
    let position = read_position(ctx, key)?;
    let has_group = match position {
        Some(p) => stream_at(ctx, p)?.groups.contains_key(group.as_ref()),
        None => false,
    };
    let Some(position) = position.filter(|_| has_group) else {
        return Err(no_group(key, group, ""));
    };
    let minidle = parse_i64(&argv[4])
        .map_err(|_| CmdError::err("Invalid min-idle-time argument for XCLAIM"))?
        .max(0);
    let mut ids = Vec::new();
    let mut j = 5;
    while j < argv.len() {
        match parse_strict(&argv[j]) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let now = ctx.now_ms as i64;
    let mut retrycount: i64 = -1;
    let mut deliverytime: i64 = -1;
    let mut force = false;
    let mut justid = false;
    let mut last_id = StreamId::MIN;
    while j < argv.len() {
        let moreargs = argv.len() - 1 - j;
        let opt = c_str(&argv[j], usize::MAX);
        let int_opt =
            |raw: &[u8], what: &str| parse_i64(raw).map_err(|_| CmdError::err(format!("Invalid {what} option argument for XCLAIM")));
        if opt.eq_ignore_ascii_case(b"FORCE") {
            force = true;
        } else if opt.eq_ignore_ascii_case(b"JUSTID") {
            justid = true;
        } else if opt.eq_ignore_ascii_case(b"IDLE") && moreargs > 0 {
            j += 1;
            deliverytime = now.wrapping_sub(int_opt(&argv[j], "IDLE")?);
        } else if opt.eq_ignore_ascii_case(b"TIME") && moreargs > 0 {
            j += 1;
            deliverytime = int_opt(&argv[j], "TIME")?;
        } else if opt.eq_ignore_ascii_case(b"RETRYCOUNT") && moreargs > 0 {
            j += 1;
            retrycount = int_opt(&argv[j], "RETRYCOUNT")?;
        } else if opt.eq_ignore_ascii_case(b"LASTID") && moreargs > 0 {
            j += 1;
            last_id = parse_strict(&argv[j])?;
        } else {
            let mut text = b"ERR Unrecognized XCLAIM option '".to_vec();
            text.extend_from_slice(opt);
            text.push(b'\'');
            return Err(CmdError::new_bytes(text));
        }
        j += 1;
    }
    let deliverytime = if deliverytime == -1 || deliverytime < 0 || deliverytime > now {
        now
    } else {
        deliverytime
    } as u64;
    // Replayed as an XCLAIM per entry it changed (and the group's last ID
    // if that is all it moved), never as itself.
    ctx.prevent_propagation();
    let propagating = ctx.propagating();
    let mut effects = Vec::new();
    let mut changes = 0;
    let s = stream_at(ctx, position)?;
    let mut propagate_last_id = false;
    if let Some(cg) = s.groups.get_mut(group.as_ref())
        && last_id > cg.last_id
    {
        cg.last_id = last_id;
        propagate_last_id = true;
    }
    let mut out = Vec::new();
    let mut created = false;
    let mut have_consumer = false;
    for (id, typed) in ids.into_iter().zip(&argv[5..]) {
        let exists = s.contains(id);
        let Some(cg) = s.groups.get_mut(group.as_ref()) else { break };
        if !exists {
            if let Some(nack) = cg.pel.get(&id) {
                // The entry is gone: its pending record goes too.
                if propagating {
                    let owner = nack.consumer.clone().unwrap_or_default();
                    effects.push(xclaim_effect(key, group, &owner, typed.clone(), nack, cg.last_id));
                }
                propagate_last_id = false;
                changes += 1;
            }
            cg.ack(id);
            continue;
        }
        if force && !cg.pel.contains_key(&id) {
            cg.pel.insert(
                id,
                Nack {
                    delivery_time: now as u64,
                    delivery_count: 1,
                    consumer: None,
                },
            );
        }
        let Some(nack) = cg.pel.get(&id) else { continue };
        if nack.consumer.is_some() && minidle != 0 {
            let idle = now - nack.delivery_time as i64;
            if idle < minidle {
                continue;
            }
        }
        if !have_consumer {
            have_consumer = true;
            match cg.consumers.get_mut(name) {
                Some(c) => c.seen_time = now as u64,
                None => {
                    created = true;
                    cg.consumers.insert(
                        crate::db::value::owned(name),
                        Consumer {
                            seen_time: now as u64,
                            ..Consumer::default()
                        },
                    );
                }
            }
        }
        let owner = cg.consumers.get_key_value(name).map(|(k, _)| k.clone()).unwrap_or_default();
        cg.assign(id, &owner);
        if let Some(nack) = cg.pel.get_mut(&id) {
            nack.delivery_time = deliverytime;
            if retrycount >= 0 {
                nack.delivery_count = retrycount as u64;
            } else if !justid {
                nack.delivery_count += 1;
            }
            if propagating {
                effects.push(xclaim_effect(key, group, &owner, typed.clone(), nack, cg.last_id));
            }
            propagate_last_id = false;
            changes += 1;
        }
        if justid {
            out.push(id_reply(id));
        } else if let Some(fields) = s.get(id) {
            out.push(entry_reply(id, fields));
        }
    }
    if propagate_last_id && let Some(cg) = s.groups.get(group.as_ref()) {
        if propagating {
            effects.push(group_id_effect(key, group, cg));
        }
        changes += 1;
    }
    if created {
        ctx.db().notify(NOTIFY_STREAM, "xgroup-createconsumer", key);
    }
    ctx.dirty(changes);
    for effect in effects {
        ctx.also_propagate(effect);
    }
    Ok(Reply::Array(out))
}

fn xautoclaim(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (key, group, name) = (&argv[1], &argv[2], &argv[3]);
    let minidle = parse_i64(&argv[4])
        .map_err(|_| CmdError::err("Invalid min-idle-time argument for XAUTOCLAIM"))?
        .max(0);
    let start = parse_bound(&argv[5], 0, true)?;
    let mut count: i64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < argv.len() {
        let moreargs = argv.len() - 1 - j;
        let opt = c_str(&argv[j], usize::MAX);
        if opt.eq_ignore_ascii_case(b"COUNT") && moreargs > 0 {
            let max_count = i64::MAX / 16;
            count = match crate::numfmt::parse_i64(&argv[j + 1]) {
                Some(n) if (1..=max_count).contains(&n) => n,
                _ => return Err(CmdError::err("COUNT must be > 0")),
            };
            j += 1;
        } else if opt.eq_ignore_ascii_case(b"JUSTID") {
            justid = true;
        } else {
            return Err(CmdError::syntax());
        }
        j += 1;
    }
    let position = read_position(ctx, key)?;
    let has_group = match position {
        Some(p) => stream_at(ctx, p)?.groups.contains_key(group.as_ref()),
        None => false,
    };
    let Some(position) = position.filter(|_| has_group) else {
        return Err(no_group(key, group, ""));
    };
    let now = ctx.now_ms;
    // Replayed as an XCLAIM per entry it changed, never as itself.
    ctx.prevent_propagation();
    let propagating = ctx.propagating();
    let mut effects = Vec::new();
    let mut changes = 0;
    let s = stream_at(ctx, position)?;
    let mut attempts = count.saturating_mul(10);
    let mut claimed = Vec::new();
    let mut deleted = Vec::new();
    let mut created = false;
    let mut have_consumer = false;
    let mut cursor = start;
    let mut next: Option<StreamId> = None;
    loop {
        let pending = s
            .groups
            .get(group.as_ref())
            .and_then(|cg| cg.pel.range(cursor..).next().map(|(id, n)| (*id, n.delivery_time)));
        if attempts == 0 || count == 0 {
            next = pending.map(|(id, _)| id);
            break;
        }
        attempts -= 1;
        let Some((id, delivered)) = pending else { break };
        cursor = match id.next() {
            Some(n) => n,
            None => StreamId::MAX,
        };
        let exists = s.contains(id);
        let Some(cg) = s.groups.get_mut(group.as_ref()) else { break };
        if !exists {
            if propagating && let Some(nack) = cg.pel.get(&id) {
                let owner = nack.consumer.clone().unwrap_or_default();
                effects.push(xclaim_effect(key, group, &owner, id.to_bytes(), nack, cg.last_id));
            }
            changes += 1;
            cg.ack(id);
            deleted.push(id_reply(id));
            count -= 1;
            if id == StreamId::MAX {
                break;
            }
            continue;
        }
        if minidle != 0 && (now as i64 - delivered as i64) < minidle {
            if id == StreamId::MAX {
                break;
            }
            continue;
        }
        if !have_consumer {
            have_consumer = true;
            match cg.consumers.get_mut(name) {
                Some(c) => c.seen_time = now,
                None => {
                    created = true;
                    cg.consumers.insert(
                        crate::db::value::owned(name),
                        Consumer {
                            seen_time: now,
                            ..Consumer::default()
                        },
                    );
                }
            }
        }
        let owner = cg.consumers.get_key_value(name).map(|(k, _)| k.clone()).unwrap_or_default();
        cg.assign(id, &owner);
        if let Some(nack) = cg.pel.get_mut(&id) {
            nack.delivery_time = now;
            if !justid {
                nack.delivery_count += 1;
            }
            if propagating {
                effects.push(xclaim_effect(key, group, &owner, id.to_bytes(), nack, cg.last_id));
            }
            changes += 1;
        }
        if justid {
            claimed.push(id_reply(id));
        } else if let Some(fields) = s.get(id) {
            claimed.push(entry_reply(id, fields));
        }
        count -= 1;
        if id == StreamId::MAX {
            break;
        }
    }
    if created {
        ctx.db().notify(NOTIFY_STREAM, "xgroup-createconsumer", key);
    }
    ctx.dirty(changes + u64::from(created));
    for effect in effects {
        ctx.also_propagate(effect);
    }
    Ok(Reply::Array(vec![
        id_reply(next.unwrap_or(StreamId::MIN)),
        Reply::Array(claimed),
        Reply::Array(deleted),
    ]))
}

// ---------------------------------------------------------------------------
// XINFO

fn xinfo(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let sub = upper(&argv[1]);
    let syntax = || CmdError::subcommand_syntax(&argv[1], "xinfo");
    if sub == "HELP" {
        if argv.len() != 2 {
            return Err(syntax());
        }
        return Ok(help_reply(
            "XINFO",
            &[
                "CONSUMERS <key> <groupname>",
                "    Show consumers of <groupname>.",
                "GROUPS <key>",
                "    Show the stream consumer groups.",
                "STREAM <key> [FULL [COUNT <count>]",
                "    Show information about the stream.",
            ],
        ));
    }
    if argv.len() < 3 {
        return Err(syntax());
    }
    let key = &argv[2];
    let now = ctx.now_ms;
    let Some(s) = read_stream(ctx, key)? else {
        return Err(CmdError::no_such_key());
    };
    match sub.as_str() {
        "CONSUMERS" if argv.len() == 4 => {
            let cg = s.groups.get(argv[3].as_ref()).ok_or_else(|| no_such_group_for_key(&argv[3], key))?;
            Ok(Reply::Array(
                cg.consumers
                    .iter()
                    .map(|(name, c)| {
                        Reply::Map(vec![
                            (Reply::bulk_static("name"), Reply::Bulk(name.clone())),
                            (Reply::bulk_static("pending"), Reply::Int(c.pel.len() as i64)),
                            (Reply::bulk_static("idle"), Reply::Int((now as i64 - c.seen_time as i64).max(0))),
                        ])
                    })
                    .collect(),
            ))
        }
        "GROUPS" if argv.len() == 3 => Ok(Reply::Array(
            s.groups
                .iter()
                .map(|(name, cg)| {
                    Reply::Map(vec![
                        (Reply::bulk_static("name"), Reply::Bulk(name.clone())),
                        (Reply::bulk_static("consumers"), Reply::Int(cg.consumers.len() as i64)),
                        (Reply::bulk_static("pending"), Reply::Int(cg.pel.len() as i64)),
                        (Reply::bulk_static("last-delivered-id"), id_reply(cg.last_id)),
                        (Reply::bulk_static("entries-read"), entries_read_reply(cg)),
                        (Reply::bulk_static("lag"), s.lag(cg).map_or(Reply::Nil, Reply::Int)),
                    ])
                })
                .collect(),
        )),
        "STREAM" => stream_info(s, &argv[3..], &argv[1]),
        _ => Err(syntax()),
    }
}

fn entries_read_reply(cg: &Group) -> Reply {
    if cg.entries_read != -1 {
        Reply::Int(cg.entries_read)
    } else {
        Reply::Nil
    }
}

/// XINFO STREAM key [FULL [COUNT n]] (`xinfoReplyWithStreamInfo`).
fn stream_info(s: &Stream, opts: &[Bytes], sub: &[u8]) -> CmdResult {
    let syntax = || CmdError::subcommand_syntax(sub, "xinfo");
    let mut full = true;
    let mut count: i64 = 10;
    if opts.is_empty() {
        full = false;
    } else {
        if opts.len() != 1 && opts.len() != 3 {
            return Err(syntax());
        }
        if !c_str(&opts[0], usize::MAX).eq_ignore_ascii_case(b"full") {
            return Err(syntax());
        }
        if opts.len() == 3 {
            if !c_str(&opts[1], usize::MAX).eq_ignore_ascii_case(b"count") {
                return Err(syntax());
            }
            count = parse_i64(&opts[2])?;
            if count < 0 {
                count = 10;
            }
        }
    }
    let limit = if count == 0 { usize::MAX } else { count as usize };
    let mut fields = vec![
        (Reply::bulk_static("length"), Reply::Int(s.len() as i64)),
        (Reply::bulk_static("radix-tree-keys"), Reply::Int(s.node_count() as i64)),
        (Reply::bulk_static("radix-tree-nodes"), Reply::Int(s.rax_node_count() as i64)),
        (Reply::bulk_static("last-generated-id"), id_reply(s.last_id)),
        (Reply::bulk_static("max-deleted-entry-id"), id_reply(s.max_deleted_id)),
        (Reply::bulk_static("entries-added"), Reply::Int(s.entries_added as i64)),
        (Reply::bulk_static("recorded-first-entry-id"), id_reply(s.first_id)),
    ];
    if !full {
        fields.push((Reply::bulk_static("groups"), Reply::Int(s.groups.len() as i64)));
        fields.push((
            Reply::bulk_static("first-entry"),
            s.first().map_or(Reply::Nil, |(id, f)| entry_reply(id, f)),
        ));
        fields.push((
            Reply::bulk_static("last-entry"),
            s.last().map_or(Reply::Nil, |(id, f)| entry_reply(id, f)),
        ));
        return Ok(Reply::Map(fields));
    }
    fields.push((
        Reply::bulk_static("entries"),
        Reply::Array(
            s.range(StreamId::MIN, StreamId::MAX, false)
                .take(limit)
                .map(|(id, f)| entry_reply(id, f))
                .collect(),
        ),
    ));
    let groups = s
        .groups
        .iter()
        .map(|(name, cg)| {
            let pending = cg
                .pel
                .iter()
                .take(limit)
                .map(|(id, nack)| {
                    Reply::Array(vec![
                        id_reply(*id),
                        Reply::Bulk(nack.consumer.clone().unwrap_or_default()),
                        Reply::Int(nack.delivery_time as i64),
                        Reply::Int(nack.delivery_count as i64),
                    ])
                })
                .collect();
            let consumers = cg
                .consumers
                .iter()
                .map(|(cname, c)| {
                    let pending = c
                        .pel
                        .iter()
                        .take(limit)
                        .map(|id| {
                            let nack = cg.pel.get(id);
                            Reply::Array(vec![
                                id_reply(*id),
                                Reply::Int(nack.map_or(0, |n| n.delivery_time as i64)),
                                Reply::Int(nack.map_or(0, |n| n.delivery_count as i64)),
                            ])
                        })
                        .collect();
                    Reply::Map(vec![
                        (Reply::bulk_static("name"), Reply::Bulk(cname.clone())),
                        (Reply::bulk_static("seen-time"), Reply::Int(c.seen_time as i64)),
                        (Reply::bulk_static("pel-count"), Reply::Int(c.pel.len() as i64)),
                        (Reply::bulk_static("pending"), Reply::Array(pending)),
                    ])
                })
                .collect();
            Reply::Map(vec![
                (Reply::bulk_static("name"), Reply::Bulk(name.clone())),
                (Reply::bulk_static("last-delivered-id"), id_reply(cg.last_id)),
                (Reply::bulk_static("entries-read"), entries_read_reply(cg)),
                (Reply::bulk_static("lag"), s.lag(cg).map_or(Reply::Nil, Reply::Int)),
                (Reply::bulk_static("pel-count"), Reply::Int(cg.pel.len() as i64)),
                (Reply::bulk_static("pending"), Reply::Array(pending)),
                (Reply::bulk_static("consumers"), Reply::Array(consumers)),
            ])
        })
        .collect();
    fields.push((Reply::bulk_static("groups"), Reply::Array(groups)));
    Ok(Reply::Map(fields))
}
