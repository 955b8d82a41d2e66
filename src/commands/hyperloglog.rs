//! HyperLogLog commands: PFADD, PFCOUNT, PFMERGE, PFDEBUG and PFSELFTEST,
//! over string values laid out as `db::hyperloglog` describes (GET returns
//! Redis's bytes; SET, APPEND or SETRANGE can damage them, and these
//! commands then answer Redis's errors).
//!
//! Redis's `hyperloglog.c` is the specification, including what each
//! command does to the keyspace beyond its reply:
//! - PFADD signals WATCH and publishes `pfadd` only when a register
//!   changed or the key was created; a damaged value keeps the edits made
//!   before the damage was found, unsignalled.
//! - PFCOUNT of one key stores the cardinality it computed in the value's
//!   header, which changes the string (GET shows it) and signals WATCH,
//!   without an event; a cached cardinality is answered as stored.
//!   PFCOUNT of several keys changes nothing.
//! - PFMERGE reads every key, the destination first, as a read (keyspace
//!   hits, `keymiss`), then always signals the destination and publishes
//!   `pfadd` for it; the result is dense if any input was.
//! - PFDEBUG GETREG and TODENSE turn a sparse value dense in place without
//!   a signal or an event.

use bytes::Bytes;

use super::args::c_keyword;
use super::table::{CommandSpec, cmd, flag::*};
use super::{CmdError, CmdResult, Ctx, Reply};
use crate::db::hyperloglog::{self as hll, Encoding, Hll, REGISTERS};
use crate::db::{NOTIFY_STRING, Value};

pub const COMMANDS: &[CommandSpec] = &[
    cmd("pfadd", -2, pfadd).flags(WRITE | DENYOOM | FAST),
    cmd("pfcount", -2, pfcount).flags(READONLY | MAY_REPLICATE),
    cmd("pfmerge", -2, pfmerge).flags(WRITE | DENYOOM),
    cmd("pfdebug", 3, pfdebug).flags(WRITE | DENYOOM | ADMIN),
    cmd("pfselftest", 1, pfselftest).flags(ADMIN),
];

/// `hll-sparse-max-bytes`: the longest a sparse value may grow before it
/// is made dense.
fn sparse_max_bytes(ctx: &Ctx) -> usize {
    let bytes = ctx.state.params.int("hll-sparse-max-bytes").unwrap_or(3000);
    usize::try_from(bytes).unwrap_or(usize::MAX)
}

/// The bytes of a value that must be a HyperLogLog: WRONGTYPE for other
/// types, and Redis's "not a valid HyperLogLog" WRONGTYPE for strings
/// that are not one.
fn hll_bytes(value: &Value) -> CmdResult<&Bytes> {
    let Value::Str(bytes) = value else {
        return Err(CmdError::wrong_type());
    };
    match hll::encoding_of(bytes) {
        Some(_) => Ok(bytes),
        None => Err(CmdError::not_hll()),
    }
}

fn pfadd(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let key = &argv[1];
    let max_bytes = sparse_max_bytes(ctx);
    let now = ctx.now_ms;
    let db = ctx.db();
    let position = db.live_position(key, now);
    let (mut value, mut updated) = match position {
        Some(position) => (Hll::from_bytes(hll_bytes(db.value_at(position))?), 0),
        None => (Hll::new(), 1),
    };
    let mut corrupted = false;
    for element in &argv[2..] {
        match value.add(element, max_bytes) {
            Ok(true) => updated += 1,
            Ok(false) => {}
            Err(hll::Corrupted) => {
                corrupted = true;
                break;
            }
        }
    }
    if corrupted || updated == 0 {
        // Edits made before the damage was found stay, unsignalled.
        if let Some(position) = position
            && updated > 0
        {
            *db.value_at_mut_unsignalled(position) = Value::Str(value.into_bytes());
        }
        return if corrupted {
            Err(CmdError::hll_corrupted())
        } else {
            Ok(Reply::Int(0))
        };
    }
    value.invalidate_cache();
    let value = Value::Str(value.into_bytes());
    match position {
        Some(position) => *db.value_at_mut(position, key) = value,
        None => {
            db.insert_absent(key, value);
        }
    }
    db.notify(NOTIFY_STRING, "pfadd", key);
    ctx.dirty(updated);
    Ok(Reply::Int(1))
}

fn pfcount(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() > 2 {
        let mut max = [0u8; REGISTERS];
        for key in &argv[1..] {
            let Some(value) = ctx.read(key) else {
                continue;
            };
            hll::merge(hll_bytes(value)?, &mut max).map_err(|_| CmdError::hll_corrupted())?;
        }
        return Ok(Reply::Int(hll::count_registers(&max) as i64));
    }
    let key = &argv[1];
    let Some(position) = ctx.read_position(key) else {
        return Ok(Reply::Int(0));
    };
    let db = ctx.db();
    let bytes = hll_bytes(db.value_at(position))?;
    if let Some(card) = hll::cached_cardinality(bytes) {
        return Ok(Reply::Int(card as i64));
    }
    let card = hll::count(bytes).map_err(|_| CmdError::hll_corrupted())?;
    if let Value::Str(bytes) = db.value_at_mut(position, key) {
        super::bitmaps::edit_in_place(bytes, 0, |b| hll::cache_cardinality(b, card));
    }
    Ok(Reply::Int(card as i64))
}

fn pfmerge(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut max = [0u8; REGISTERS];
    let mut dense = false;
    for key in &argv[1..] {
        let Some(value) = ctx.read(key) else {
            continue;
        };
        let bytes = hll_bytes(value)?;
        dense |= hll::encoding_of(bytes) == Some(Encoding::Dense);
        hll::merge(bytes, &mut max).map_err(|_| CmdError::hll_corrupted())?;
    }
    let dest = &argv[1];
    let max_bytes = sparse_max_bytes(ctx);
    let now = ctx.now_ms;
    let db = ctx.db();
    let position = db.live_position(dest, now);
    let mut value = match position {
        // Checked as a source above.
        Some(position) => Hll::from_bytes(hll_bytes(db.value_at(position))?),
        None => Hll::new(),
    };
    if dense {
        value.to_dense().map_err(|_| CmdError::hll_corrupted())?;
    }
    for (index, &count) in max.iter().enumerate() {
        if count != 0 {
            // Redis ignores the outcome: the destination was read whole above.
            let _ = value.raise(index, count, max_bytes);
        }
    }
    value.invalidate_cache();
    let value = Value::Str(value.into_bytes());
    match position {
        Some(position) => *db.value_at_mut(position, dest) = value,
        None => {
            db.insert_absent(dest, value);
        }
    }
    db.notify(NOTIFY_STRING, "pfadd", dest);
    Ok(Reply::OK)
}

fn pfdebug(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (sub, key) = (&argv[1], &argv[2]);
    let now = ctx.now_ms;
    let db = ctx.db();
    let Some(position) = db.live_position(key, now) else {
        return Err(CmdError::pfdebug_no_key());
    };
    let mut value = Hll::from_bytes(hll_bytes(db.value_at(position))?);
    if c_keyword(sub, "getreg") || c_keyword(sub, "todense") {
        let converted = value.to_dense().map_err(|_| CmdError::hll_corrupted())?;
        if converted {
            *db.value_at_mut_unsignalled(position) = Value::Str(value.clone().into_bytes());
        }
        if c_keyword(sub, "todense") {
            return Ok(Reply::Int(i64::from(converted)));
        }
        let registers = value.dense_registers();
        return Ok(Reply::Array(registers.into_iter().map(|r| Reply::Int(i64::from(r))).collect()));
    }
    if c_keyword(sub, "decode") {
        if value.encoding() != Encoding::Sparse {
            return Err(CmdError::pfdebug_not_sparse());
        }
        return Ok(Reply::Bulk(Bytes::from(value.decode())));
    }
    if c_keyword(sub, "encoding") {
        return Ok(Reply::status(value.encoding().name()));
    }
    Err(CmdError::pfdebug_unknown(sub))
}

fn pfselftest(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    hll::self_test(sparse_max_bytes(ctx)).map_err(CmdError::pfselftest_failed)?;
    Ok(Reply::OK)
}
