//! Generic key commands: existence, deletion, renaming, expiry, iteration.
//!
//! Keyspace hits and misses are counted where Redis 7.0 reads with
//! `lookupKeyRead*`: EXISTS, TOUCH, TYPE, TTL and its kin, COPY's source,
//! OBJECT, and SCAN's TYPE filter. DEL, RENAME, MOVE, EXPIRE and PERSIST
//! look keys up for writing (no count), which still reclaims an expired
//! key and counts it in `expired_keys`.

use bytes::Bytes;

use super::args::{parse_i64, upper};
use super::table::{CommandSpec, Group, cmd, container, flag::*};
use super::{Args, CmdError, CmdResult, Ctx, Reply};
use crate::db::{NOTIFY_GENERIC, ops};
use crate::error::quoted;
use crate::glob;

const G: Group = Group::Generic;

pub const COMMANDS: &[CommandSpec] = &[
    cmd("del", -2, del).flags(WRITE),
    cmd("unlink", -2, del).flags(WRITE | FAST),
    cmd("exists", -2, exists).flags(READONLY | FAST),
    cmd("type", 2, type_).flags(READONLY | FAST),
    cmd("keys", 2, keys).flags(READONLY),
    cmd("scan", -2, scan).flags(READONLY),
    cmd("rename", 3, rename).flags(WRITE),
    cmd("renamenx", 3, renamenx).flags(WRITE | FAST),
    cmd("expire", -3, expire).flags(WRITE | FAST),
    cmd("pexpire", -3, pexpire).flags(WRITE | FAST),
    cmd("expireat", -3, expireat).flags(WRITE | FAST),
    cmd("pexpireat", -3, pexpireat).flags(WRITE | FAST),
    cmd("ttl", 2, ttl).flags(READONLY | FAST),
    cmd("pttl", 2, pttl).flags(READONLY | FAST),
    cmd("expiretime", 2, expiretime).flags(READONLY | FAST),
    cmd("pexpiretime", 2, pexpiretime).flags(READONLY | FAST),
    cmd("persist", 2, persist).flags(WRITE | FAST),
    cmd("touch", -2, touch).flags(READONLY | FAST),
    cmd("randomkey", 1, randomkey).flags(READONLY),
    cmd("move", 3, move_).flags(WRITE | FAST),
    cmd("copy", -3, copy).flags(WRITE | DENYOOM),
    cmd("wait", 3, wait).flags(NOSCRIPT),
    cmd("waitaof", 4, waitaof).flags(NOSCRIPT).doc(G, "7.2.0", "Blocks until all of the preceding write commands sent by the connection are written to the append-only file of the master and/or replicas."),
    container("object", OBJECT),
];

const OBJECT: &[CommandSpec] = &[
    cmd("encoding", 3, object_encoding).flags(READONLY),
    cmd("freq", 3, object_freq).flags(READONLY),
    cmd("idletime", 3, object_idletime).flags(READONLY),
    cmd("refcount", 3, object_refcount).flags(READONLY),
    cmd("help", 2, object_help).flags(LOADING | STALE),
];

fn del(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let now = ctx.now_ms;
    let db = ctx.db();
    let removed = argv[1..].iter().filter(|key| ops::del(db, key, now)).count();
    ctx.dirty(removed as u64);
    Ok(Reply::Int(removed as i64))
}

/// EXISTS and TOUCH: every key is a counted read (Redis's
/// `lookupKeyReadWithFlags` / `lookupKeyRead`), a repeated key each time.
/// EXISTS: a lookup per key that leaves its access time alone.
fn exists(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let found = argv[1..].iter().filter(|key| ctx.read_no_touch(key).is_some()).count();
    Ok(Reply::Int(found as i64))
}

/// TOUCH: EXISTS that marks each key accessed.
fn touch(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let found = argv[1..].iter().filter(|key| ctx.read(key).is_some()).count();
    Ok(Reply::Int(found as i64))
}

fn type_(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let name = ctx.read_no_touch(&argv[1]).map_or("none", |v| v.type_name());
    Ok(Reply::status(name))
}

/// KEYS pattern. Its length goes out last, as in Redis, and it stops at
/// the client's output limit as Redis's loop does (`engine::output`).
fn keys(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let now = ctx.now_ms;
    let pattern = &argv[1];
    let all = pattern.as_ref() == b"*";
    ctx.defer_reply_len();
    let mut gauge = ctx.reply_gauge();
    let mut found = Vec::new();
    for key in ctx.db().keys(now).filter(|k| all || glob::matches(pattern, k, false)) {
        let key = Reply::Bulk(Bytes::copy_from_slice(key));
        let more = gauge.admit(&key);
        found.push(key);
        if !more {
            break;
        }
    }
    Ok(Reply::Array(found))
}

/// The options shared by SCAN, HSCAN, SSCAN and ZSCAN.
pub struct ScanOptions {
    pub cursor: u64,
    pub pattern: Option<Bytes>,
    pub count: usize,
    pub type_filter: Option<Bytes>,
}

/// Parses `cursor [MATCH p] [COUNT n] [TYPE t]` starting at `argv[cursor_at]`.
pub fn parse_scan(argv: &[Bytes], cursor_at: usize, allow_type: bool) -> CmdResult<ScanOptions> {
    let cursor = parse_cursor(&argv[cursor_at])?;
    let mut o = ScanOptions {
        cursor,
        pattern: None,
        count: 10,
        type_filter: None,
    };
    let mut i = cursor_at + 1;
    while i < argv.len() {
        let has_value = i + 1 < argv.len();
        match upper(&argv[i]).as_str() {
            "COUNT" if has_value => {
                let n = parse_i64(&argv[i + 1])?;
                if n < 1 {
                    return Err(CmdError::syntax());
                }
                o.count = n as usize;
            }
            "MATCH" if has_value => {
                o.pattern = if argv[i + 1].as_ref() == b"*" {
                    None
                } else {
                    Some(argv[i + 1].clone())
                };
            }
            "TYPE" if has_value && allow_type => o.type_filter = Some(argv[i + 1].clone()),
            _ => return Err(CmdError::syntax()),
        }
        i += 2;
    }
    Ok(o)
}

/// C's `strtoul` as Redis's `parseScanCursorOrReply` uses it: an optional
/// sign (a minus wraps around), decimal digits, no leading space, no
/// overflow; an empty text reads as 0.
pub fn parse_cursor(raw: &[u8]) -> CmdResult<u64> {
    let invalid = || CmdError::err("invalid cursor");
    let text = match raw.iter().position(|&c| c == 0) {
        Some(nul) => &raw[..nul],
        None => raw,
    };
    if text.is_empty() {
        return Ok(0);
    }
    let (negative, digits) = match text[0] {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(invalid());
    }
    let mut v: u64 = 0;
    for &d in digits {
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add((d - b'0') as u64))
            .ok_or_else(invalid)?;
    }
    Ok(if negative { v.wrapping_neg() } else { v })
}

pub fn scan_reply(cursor: u64, items: Vec<Bytes>) -> Reply {
    Reply::Array(vec![Reply::Bulk(Bytes::from(cursor.to_string())), Reply::bulks(items)])
}

fn scan(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let o = parse_scan(argv, 1, true)?;
    let now = ctx.now_ms;
    let (next, found) = ctx.db().scan(o.cursor, o.count);
    let candidates: Vec<Bytes> = found
        .into_iter()
        .filter(|(k, _)| o.pattern.as_ref().is_none_or(|p| glob::matches(p, k, false)))
        .map(|(k, _)| Bytes::copy_from_slice(k))
        .collect();
    let mut keys = Vec::with_capacity(candidates.len());
    for key in candidates {
        if let Some(wanted) = &o.type_filter {
            // Redis 7.0's scanGenericCommand reads each key's type with
            // lookupKeyReadWithFlags: a counted hit or miss per key, and an
            // expired key is reclaimed there and then typed "none" (so
            // `TYPE none` returns the expired keys it reclaimed).
            let type_name = ctx.read_no_touch(&key).map_or("none", |v| v.type_name());
            if !wanted.eq_ignore_ascii_case(type_name.as_bytes()) {
                continue;
            }
        }
        // Expired keys are filtered out (and reclaimed) as Redis does.
        if !ctx.db().expire_if_needed(&key, now) {
            keys.push(key);
        }
    }
    Ok(scan_reply(next, keys))
}

fn rename_generic(ctx: &mut Ctx, argv: &[Bytes], nx: bool) -> CmdResult {
    let (src, dst) = (&argv[1], &argv[2]);
    let now = ctx.now_ms;
    let db = ctx.db();
    if !db.contains(src, now) {
        return Err(CmdError::no_such_key());
    }
    if src == dst {
        return Ok(if nx { Reply::Int(0) } else { Reply::OK });
    }
    // Redis looks the destination up for writing with or without NX,
    // reclaiming it if it has expired.
    if db.contains(dst, now) && nx {
        return Ok(Reply::Int(0));
    }
    let raw = db.is_raw(src);
    let (_, value, at) = db.take_with_ttl(src).ok_or_else(CmdError::no_such_key)?;
    db.remove(dst);
    db.restore_with_ttl(dst.clone(), value, at);
    if raw {
        // The same object under a new name: still raw.
        db.mark_raw(dst);
    }
    db.notify(NOTIFY_GENERIC, "rename_from", src);
    db.notify(NOTIFY_GENERIC, "rename_to", dst);
    Ok(if nx { Reply::Int(1) } else { Reply::OK })
}

fn rename(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    rename_generic(ctx, argv, false)
}

fn renamenx(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    rename_generic(ctx, argv, true)
}

/// Redis's `expireGenericCommand`: `when` relative to `base_ms`, in
/// seconds or milliseconds, with NX / XX / GT / LT.
pub fn expire_generic(ctx: &mut Ctx, argv: &[Bytes], base_ms: i64, seconds: bool) -> CmdResult<i64> {
    let name = String::from_utf8_lossy(&argv[0]).to_ascii_lowercase();
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for opt in &argv[3..] {
        match upper(opt).as_str() {
            "NX" => nx = true,
            "XX" => xx = true,
            "GT" => gt = true,
            "LT" => lt = true,
            _ => return Err(CmdError::err_bytes(&[b"Unsupported option ", quoted(opt)].concat())),
        }
    }
    if nx && (xx || gt || lt) {
        return Err(CmdError::err("NX and XX, GT or LT options at the same time are not compatible"));
    }
    if gt && lt {
        return Err(CmdError::err("GT and LT options at the same time are not compatible"));
    }
    let mut when = parse_i64(&argv[2])?;
    if seconds {
        if !(i64::MIN / 1000..=i64::MAX / 1000).contains(&when) {
            return Err(CmdError::invalid_expire(&name));
        }
        when *= 1000;
    }
    if when > i64::MAX - base_ms {
        return Err(CmdError::invalid_expire(&name));
    }
    when += base_ms;
    let key = &argv[1];
    let now = ctx.now_ms;
    let expired = ctx.already_expired(when);
    let db = ctx.db();
    if !db.contains(key, now) {
        return Ok(0);
    }
    let current = db.expire_at(key).map(|t| t as i64);
    if (nx && current.is_some()) || (xx && current.is_none()) {
        return Ok(0);
    }
    if gt && current.is_none_or(|c| when <= c) {
        return Ok(0);
    }
    if lt && current.is_some_and(|c| when >= c) {
        return Ok(0);
    }
    if expired {
        db.remove(key);
        db.notify(NOTIFY_GENERIC, "del", key);
        let lazy = ctx.state.params.value("lazyfree-lazy-expire") == Some("yes");
        ctx.propagate_as_words(&[if lazy { b"UNLINK" } else { b"DEL" }, key]);
    } else {
        db.set_expire(key, when as u64);
        db.notify(NOTIFY_GENERIC, "expire", key);
        if ctx.propagating() {
            // Replayed as PEXPIREAT with the deadline, options kept.
            let mut effect = argv.to_vec();
            effect[0] = Bytes::from_static(b"PEXPIREAT");
            effect[2] = Bytes::copy_from_slice(itoa::Buffer::new().format(when).as_bytes());
            ctx.propagate_as(effect);
        }
    }
    Ok(1)
}

fn expire(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let now = ctx.now_ms as i64;
    expire_generic(ctx, argv, now, true).map(Reply::Int)
}

fn pexpire(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let now = ctx.now_ms as i64;
    expire_generic(ctx, argv, now, false).map(Reply::Int)
}

fn expireat(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    expire_generic(ctx, argv, 0, true).map(Reply::Int)
}

fn pexpireat(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    expire_generic(ctx, argv, 0, false).map(Reply::Int)
}

/// Redis's `ttlGenericCommand` lookup, a counted read
/// (`lookupKeyReadWithFlags`): -2 for a missing key, -1 for no TTL, else
/// the deadline.
fn deadline(ctx: &mut Ctx, key: &[u8]) -> Result<u64, i64> {
    if ctx.read_no_touch(key).is_none() {
        return Err(-2);
    }
    ctx.db().expire_at(key).ok_or(-1)
}

/// PTTL's answer for a deadline lookup.
fn remaining_ms(now_ms: u64, deadline: Result<u64, i64>) -> i64 {
    match deadline {
        Ok(at) => at.saturating_sub(now_ms) as i64,
        Err(code) => code,
    }
}

/// PTTL's answer for `key`, looked at without counting a keyspace hit or
/// miss (for KEYLOCK's introspection, which is no client read).
pub fn pttl_of(ctx: &mut Ctx, key: &[u8]) -> i64 {
    let now = ctx.now_ms;
    let db = ctx.db();
    let deadline = if db.contains(key, now) {
        db.expire_at(key).ok_or(-1)
    } else {
        Err(-2)
    };
    remaining_ms(now, deadline)
}

fn ttl(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let ms = remaining_ms(ctx.now_ms, deadline(ctx, &argv[1]));
    Ok(Reply::Int(if ms < 0 { ms } else { (ms + 500) / 1000 }))
}

fn pttl(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let now = ctx.now_ms;
    let at = ctx.read_position_no_touch(&argv[1]);
    Ok(Reply::Int(ops::pttl(ctx.db(), at, now)))
}

fn expiretime(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(match deadline(ctx, &argv[1]) {
        // Redis rounds to the nearest second here too.
        Ok(at) => (at.saturating_add(500) / 1000) as i64,
        Err(code) => code,
    }))
}

fn pexpiretime(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(match deadline(ctx, &argv[1]) {
        Ok(at) => at as i64,
        Err(code) => code,
    }))
}

fn persist(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let now = ctx.now_ms;
    let db = ctx.db();
    if !db.contains(&argv[1], now) {
        return Ok(Reply::Int(0));
    }
    let persisted = db.persist(&argv[1]);
    if persisted {
        db.notify(NOTIFY_GENERIC, "persist", &argv[1]);
    }
    Ok(Reply::from(persisted))
}

fn randomkey(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let now = ctx.now_ms;
    Ok(Reply::opt_bulk(ctx.db().random_key(now)))
}

fn parse_db_index(ctx: &Ctx, raw: &[u8]) -> CmdResult<usize> {
    let n = super::args::parse_int(raw)?;
    if n < 0 || n as usize >= ctx.state.dbs.len() {
        return Err(CmdError::db_index_out_of_range());
    }
    Ok(n as usize)
}

pub(super) fn parse_db(ctx: &Ctx, raw: &[u8]) -> CmdResult<usize> {
    parse_db_index(ctx, raw)
}

fn move_(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if ctx.state.cluster_enabled() {
        return Err(CmdError::err("MOVE is not allowed in cluster mode"));
    }
    let target = parse_db_index(ctx, &argv[2])?;
    let src = ctx.client.db;
    if target == src {
        return Err(CmdError::err("source and destination objects are the same"));
    }
    let now = ctx.now_ms;
    let key = &argv[1];
    if !ctx.state.dbs[src].contains(key, now) || ctx.state.dbs[target].contains(key, now) {
        return Ok(Reply::Int(0));
    }
    let raw = ctx.state.dbs[src].is_raw(key);
    let (k, v, at) = ctx.state.dbs[src].take_with_ttl(key).ok_or_else(CmdError::no_such_key)?;
    ctx.state.dbs[target].restore_with_ttl(k, v, at);
    if raw {
        ctx.state.dbs[target].mark_raw(key);
    }
    ctx.state.dbs[src].notify(NOTIFY_GENERIC, "move_from", key);
    ctx.state.dbs[target].notify(NOTIFY_GENERIC, "move_to", key);
    Ok(Reply::Int(1))
}

fn copy(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut args = Args::new(argv);
    args.next();
    args.next();
    let mut target = ctx.client.db;
    let mut replace = false;
    while let Some(opt) = args.next() {
        match upper(opt).as_str() {
            "REPLACE" => replace = true,
            "DB" if args.remaining() > 0 => target = parse_db_index(ctx, args.req()?)?,
            _ => return Err(CmdError::syntax()),
        }
    }
    let (src_key, dst_key) = (&argv[1], &argv[2]);
    let src = ctx.client.db;
    if ctx.state.cluster_enabled() && (src != 0 || target != 0) {
        return Err(CmdError::err("Copying to another database is not allowed in cluster mode"));
    }
    if src == target && src_key == dst_key {
        return Err(CmdError::err("source and destination objects are the same"));
    }
    let now = ctx.now_ms;
    // Redis's copyCommand reads the source with lookupKeyRead (counted).
    let Some(value) = ctx.read(src_key).cloned() else {
        return Ok(Reply::Int(0));
    };
    let at = ctx.state.dbs[src].expire_at(src_key);
    // Redis's copy of a raw string is raw too (`dupStringObject`).
    let raw = ctx.state.dbs[src].is_raw(src_key);
    let dst = &mut ctx.state.dbs[target];
    if dst.contains(dst_key, now) {
        if !replace {
            return Ok(Reply::Int(0));
        }
        dst.remove(dst_key);
    }
    dst.restore_with_ttl(dst_key.clone(), value, at);
    if raw {
        dst.mark_raw(dst_key);
    }
    dst.notify(NOTIFY_GENERIC, "copy_to", dst_key);
    ctx.dirty(1);
    Ok(Reply::Int(1))
}

/// Parses a WAIT-style timeout.
fn parse_timeout(raw: &[u8]) -> CmdResult<i64> {
    let t = crate::numfmt::parse_i64(raw).ok_or_else(|| CmdError::err("timeout is not an integer or out of range"))?;
    if t < 0 {
        return Err(CmdError::err("timeout is negative"));
    }
    Ok(t)
}

/// WAIT: a standalone keylock's replicas do not acknowledge, so it is
/// satisfied at once by zero of them. A Raft shard's leader answers how
/// many other members hold the writes made before it: its reply waits
/// for their commit like any output, so at least a majority less itself
/// do, and more when the replication already says so.
fn wait(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if ctx.state.is_replica() || !ctx.state.raft_accepts_writes() {
        return Err(CmdError::err(
            "WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.",
        ));
    }
    let wanted = parse_i64(&argv[1])?;
    let timeout = parse_timeout(&argv[2])?;
    #[cfg(feature = "raft")]
    if ctx.state.raft.is_some() {
        return Ok(Reply::Int(ctx.state.raft_replicas_holding_writes() as i64));
    }
    // How many replicas have what this client wrote (Redis's `c->woff`).
    let offset = ctx.client.woff;
    let acked = ctx.state.replicas_acked(offset);
    if acked as i64 >= wanted || ctx.client.is_script || ctx.state.deny_blocking {
        return Ok(Reply::Int(acked as i64));
    }
    let op = crate::engine::blocking::BlockOp::Wait {
        offset,
        replicas: wanted.max(0) as usize,
    };
    ctx.state.request_acks();
    super::blocking::block(ctx, &[], op, timeout as u64)
}

/// As Redis 7.2 answers with appendonly off: nothing is fsynced locally.
fn waitaof(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let numlocal = parse_i64(&argv[1])?;
    parse_i64(&argv[2])?;
    parse_timeout(&argv[3])?;
    if numlocal > 0 && ctx.state.params.value("appendonly") != Some("yes") {
        return Err(CmdError::err(
            "WAITAOF cannot be used when numlocal is set but appendonly is disabled.",
        ));
    }
    Ok(Reply::Array(vec![Reply::Int(0), Reply::Int(0)]))
}

fn object_encoding(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let Some(v) = ctx.read_no_touch_unnotified(&argv[2]) else {
        return Ok(Reply::Nil);
    };
    let name = encoding_name(v, false);
    let raw = ctx.db().is_raw(&argv[2]);
    Ok(Reply::bulk_static(if raw && matches!(name, "int" | "embstr") {
        "raw"
    } else {
        name
    }))
}

/// The encoding OBJECT ENCODING (and DEBUG OBJECT) names for a value, as
/// Redis would hold it. `raw`: a string was modified in place (APPEND,
/// SETRANGE, SETBIT, BITFIELD, BITOP), which leaves it raw in Redis
/// whatever it holds.
pub(crate) fn encoding_name(v: &crate::db::Value, raw: bool) -> &'static str {
    use crate::db::Value;
    match v {
        Value::Str(_) if raw => "raw",
        Value::Str(s) if crate::numfmt::parse_i64(s).is_some() && s.len() <= 20 => "int",
        // PFADD and PFMERGE make their strings raw, however short.
        Value::Str(s) if s.len() <= 44 && crate::db::hyperloglog::encoding_of(s).is_none() => "embstr",
        Value::Str(_) => "raw",
        Value::Hash(h) if h.is_packed() => "listpack",
        Value::Hash(_) => "hashtable",
        Value::List(_) => "quicklist",
        Value::Set(s) if s.is_intset() => "intset",
        Value::Set(_) => "hashtable",
        Value::ZSet(z) if z.is_listpack() => "listpack",
        Value::ZSet(_) => "skiplist",
        Value::Stream(_) => "stream",
    }
}

fn object_freq(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if ctx.read_no_touch_unnotified(&argv[2]).is_none() {
        return Ok(Reply::Nil);
    }
    let now = ctx.now_ms;
    if ctx.state.runtime.maxmemory_policy.is_lfu()
        && let Some(at) = ctx.db().live_position_no_touch(&argv[2], now)
    {
        return Ok(Reply::Int(i64::from(ctx.db().lfu_freq_at(at))));
    }
    Err(CmdError::err(
        "An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
    ))
}

/// Seconds since the key was last read or written, by the server's clock
/// (virtual time included), as Redis's `estimateObjectIdleTime`.
fn object_idletime(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    // OBJECT's lookup counts a miss but raises no keymiss event.
    if ctx.read_no_touch_unnotified(&argv[2]).is_none() {
        return Ok(Reply::Nil);
    }
    let now = ctx.now_ms;
    let Some(at) = ctx.db().live_position_no_touch(&argv[2], now) else {
        return Ok(Reply::Nil);
    };
    if ctx.state.runtime.maxmemory_policy.is_lfu() {
        return Err(CmdError::err(
            "An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
        ));
    }
    Ok(Reply::Int(ctx.db().idle_secs_at(at) as i64))
}

fn object_refcount(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let shareable = shares_integers(ctx);
    Ok(match ctx.read_no_touch_unnotified(&argv[2]) {
        Some(v) if matches!(v, crate::db::Value::Str(_)) => {
            let counted = refcount(v, shareable);
            Reply::Int(if ctx.db().is_raw(&argv[2]) { 1 } else { counted })
        }
        Some(v) => Reply::Int(refcount(v, shareable)),
        None => Reply::Nil,
    })
}

/// Whether Redis would hold small integers as its shared objects: not
/// when a maxmemory limit evicts by LRU or LFU (each key then needs its
/// own access clock).
pub(crate) fn shares_integers(ctx: &Ctx) -> bool {
    let evicts_by_access = ctx
        .state
        .params
        .value("maxmemory-policy")
        .is_some_and(|p| p.ends_with("-lru") || p.ends_with("-lfu"));
    ctx.state.runtime.maxmemory == 0 || !evicts_by_access
}

/// The refcount Redis would report for a value (OBJECT REFCOUNT, DEBUG
/// OBJECT): a string holding an integer 0..=9999 is one of Redis's shared
/// integers (`OBJ_SHARED_REFCOUNT`), every other value has one owner.
pub(crate) fn refcount(v: &crate::db::Value, shareable: bool) -> i64 {
    const OBJ_SHARED_INTEGERS: i64 = 10_000;
    match v {
        crate::db::Value::Str(s) if shareable && encoding_name(v, false) == "int" => match crate::numfmt::parse_i64(s) {
            Some(n) if (0..OBJ_SHARED_INTEGERS).contains(&n) => i32::MAX as i64,
            _ => 1,
        },
        _ => 1,
    }
}

fn object_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(super::server::help_reply(
        "OBJECT",
        &[
            "ENCODING <key>",
            "    Return the kind of internal representation used in order to store the value",
            "    associated with a <key>.",
            "FREQ <key>",
            "    Return the access frequency index of the <key>. The returned integer is",
            "    proportional to the logarithm of the recent access frequency of the key.",
            "IDLETIME <key>",
            "    Return the idle time of the <key>, that is the approximated number of",
            "    seconds elapsed since the last access to the key.",
            "REFCOUNT <key>",
            "    Return the number of references of the value associated with the specified",
            "    <key>.",
        ],
    ))
}
