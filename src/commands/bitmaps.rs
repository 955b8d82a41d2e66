//! Bitmap commands: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD and
//! BITFIELD_RO, over any string value (what SET stored, a counter's
//! digits). Bit 0 is the most significant bit of the first byte.
//!
//! Redis's `bitops.c` is the specification, edge for edge: offsets are
//! refused once their byte reaches `proto-max-bulk-len`; arguments are
//! parsed in Redis's order, so the first bad one names the error (BITCOUNT
//! and BITPOS look the key up first: a missing key answers before the
//! range is read); keywords compare as C strings (up to a NUL); BITFIELD
//! parses every operation before it runs one, and its overflow checks are
//! Redis's, quirks included (see [`signed_overflow`]). For WATCH, SETBIT
//! signals only when a bit changed or the string was created or grew, and
//! BITFIELD only when a field changed, even if it created or padded the
//! string.
//!
//! Writes change the stored bytes in place: the value's `Bytes` is taken
//! out, turned into a `BytesMut` without a copy when nothing else shares
//! it, changed (grown with zeros, as Redis's `sdsgrowzero`), frozen and put
//! back, so SETBIT on a large bitmap does not copy it. BITCOUNT and BITPOS
//! read eight bytes at a time.

use bytes::{Bytes, BytesMut};

use super::args::{Args, c_keyword, parse_i64};
use super::strings::get_string;
use super::table::{CommandSpec, cmd, flag::*};
use super::{CmdError, CmdResult, Ctx, Reply};
use crate::db::{NOTIFY_GENERIC, NOTIFY_STRING, Value};
use crate::error::c_str;
use crate::numfmt;

pub const COMMANDS: &[CommandSpec] = &[
    cmd("setbit", 4, setbit).flags(WRITE | DENYOOM),
    cmd("getbit", 3, getbit).flags(READONLY | FAST),
    cmd("bitcount", -2, bitcount).flags(READONLY),
    cmd("bitpos", -3, bitpos).flags(READONLY),
    cmd("bitop", -4, bitop).flags(WRITE | DENYOOM),
    cmd("bitfield", -2, bitfield).flags(WRITE | DENYOOM),
    cmd("bitfield_ro", -2, bitfield_ro).flags(READONLY | FAST),
];

/// Redis's `getBitOffsetFromArgument`. With `field_bits` > 0 (BITFIELD),
/// `#N` means the N-th field of that width; the product wraps as it does
/// in Redis, before the range check.
fn bit_offset(ctx: &Ctx, raw: &[u8], field_bits: u32) -> CmdResult<u64> {
    let (digits, scale) = match raw {
        [b'#', rest @ ..] if field_bits > 0 => (rest, i64::from(field_bits)),
        _ => (raw, 1),
    };
    let offset = numfmt::parse_i64(digits).ok_or_else(CmdError::bit_offset)?.wrapping_mul(scale);
    if offset < 0 || (offset >> 3) >= ctx.state.runtime.proto_max_bulk_len {
        return Err(CmdError::bit_offset());
    }
    Ok(offset as u64)
}

/// The byte holding bit `offset`, and the bit's mask in it.
fn bit_position(offset: u64) -> (usize, u8) {
    ((offset >> 3) as usize, 0x80 >> (offset & 7))
}

/// Runs `edit` on the bytes of `value`, made at least `min_len` long
/// (zeros added), without copying them when nothing else holds them.
pub(super) fn edit_in_place<R>(value: &mut Bytes, min_len: usize, edit: impl FnOnce(&mut [u8]) -> R) -> R {
    let mut bytes = std::mem::take(value).try_into_mut().unwrap_or_else(|shared| {
        let mut copy = BytesMut::with_capacity(shared.len().max(min_len));
        copy.extend_from_slice(&shared);
        copy
    });
    if bytes.len() < min_len {
        bytes.resize(min_len, 0);
    }
    let result = edit(&mut bytes);
    *value = bytes.freeze();
    result
}

fn setbit(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let offset = bit_offset(ctx, &argv[2], 0)?;
    let on = match numfmt::parse_i64(&argv[3]) {
        Some(0) => false,
        Some(1) => true,
        _ => return Err(CmdError::bit_value()),
    };
    let key = &argv[1];
    let (byte, mask) = bit_position(offset);
    let now = ctx.now_ms;
    let db = ctx.db();
    let Some(position) = db.live_position(key, now) else {
        let mut bits = BytesMut::zeroed(byte + 1);
        if on {
            bits[byte] = mask;
        }
        let position = db.insert_absent(key, Value::Str(bits.freeze()));
        db.mark_raw_at(position);
        db.notify(NOTIFY_STRING, "setbit", key);
        return Ok(Reply::Int(0));
    };
    let Value::Str(value) = db.value_at(position) else {
        return Err(CmdError::wrong_type());
    };
    let was = value.get(byte).is_some_and(|b| b & mask != 0);
    let within = byte < value.len();
    // Redis unshares the string before looking at the bit: raw either way.
    db.mark_raw_at(position);
    if within && was == on {
        return Ok(Reply::Int(i64::from(was)));
    }
    if let Value::Str(value) = db.value_at_mut(position, key) {
        edit_in_place(value, byte + 1, |bits| {
            if on {
                bits[byte] |= mask;
            } else {
                bits[byte] &= !mask;
            }
        });
    }
    db.notify(NOTIFY_STRING, "setbit", key);
    Ok(Reply::Int(i64::from(was)))
}

fn getbit(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let offset = bit_offset(ctx, &argv[2], 0)?;
    let Some(value) = get_string(ctx, &argv[1])? else {
        return Ok(Reply::Int(0));
    };
    let (byte, mask) = bit_position(offset);
    Ok(Reply::Int(i64::from(value.get(byte).is_some_and(|b| b & mask != 0))))
}

/// The unit of a BITCOUNT / BITPOS range: true for BIT.
fn range_in_bits(raw: &[u8]) -> CmdResult<bool> {
    if c_keyword(raw, "bit") {
        Ok(true)
    } else if c_keyword(raw, "byte") {
        Ok(false)
    } else {
        Err(CmdError::syntax())
    }
}

/// A BITCOUNT / BITPOS range over a string of `len` bytes, resolved as
/// Redis resolves it: indexes in bytes (or bits), negative ones from the
/// end, clamped to the string. The inclusive range of bits, or `None`
/// when it is empty.
fn bit_range(start: i64, end: i64, len: usize, in_bits: bool) -> Option<(u64, u64)> {
    let total = if in_bits { len as i64 * 8 } else { len as i64 };
    let start = if start < 0 { start + total } else { start }.max(0);
    let end = if end < 0 { end + total } else { end }.max(0).min(total - 1);
    if start > end {
        return None;
    }
    let (start, end) = (start as u64, end as u64);
    Some(if in_bits { (start, end) } else { (start * 8, end * 8 + 7) })
}

/// Bits set in `bytes`, a word at a time.
fn popcount(bytes: &[u8]) -> u64 {
    let (words, tail) = bytes.as_chunks::<8>();
    let whole: u64 = words.iter().map(|w| u64::from(u64::from_ne_bytes(*w).count_ones())).sum();
    whole + tail.iter().map(|b| u64::from(b.count_ones())).sum::<u64>()
}

/// The bits before bit `first & 7` of a byte.
fn head_mask(first: u64) -> u8 {
    !(0xFF >> (first & 7))
}

/// The bits after bit `last & 7` of a byte.
fn tail_mask(last: u64) -> u8 {
    0xFFu8.checked_shr((last & 7) as u32 + 1).unwrap_or(0)
}

/// Bits set in `bits[first..=last]` (bit indexes, within the string).
fn count_ones(bits: &[u8], first: u64, last: u64) -> u64 {
    let (a, b) = ((first >> 3) as usize, (last >> 3) as usize);
    popcount(&bits[a..=b]) - u64::from((bits[a] & head_mask(first)).count_ones()) - u64::from((bits[b] & tail_mask(last)).count_ones())
}

fn bitcount(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let Some(value) = get_string(ctx, &argv[1])? else {
        return Ok(Reply::Int(0));
    };
    let range = match argv.len() {
        2 => bit_range(0, value.len() as i64 - 1, value.len(), false),
        4 | 5 => {
            let start = parse_i64(&argv[2])?;
            let end = parse_i64(&argv[3])?;
            if start < 0 && end < 0 && start > end {
                return Ok(Reply::Int(0));
            }
            let in_bits = argv.len() == 5 && range_in_bits(&argv[4])?;
            bit_range(start, end, value.len(), in_bits)
        }
        _ => return Err(CmdError::syntax()),
    };
    Ok(Reply::Int(range.map_or(0, |(first, last)| count_ones(&value, first, last)) as i64))
}

/// The index of the first byte of `bytes` that is not `skip`, comparing a
/// word at a time.
fn first_byte_other_than(bytes: &[u8], skip: u8) -> Option<usize> {
    let (words, _) = bytes.as_chunks::<8>();
    let skip_word = u64::from_ne_bytes([skip; 8]);
    let whole = words
        .iter()
        .position(|w| u64::from_ne_bytes(*w) != skip_word)
        .unwrap_or(words.len())
        * 8;
    bytes[whole..].iter().position(|&b| b != skip).map(|i| whole + i)
}

/// The first bit equal to `want` in `bits[first..=last]` (bit indexes,
/// within the string).
fn first_bit(bits: &[u8], first: u64, last: u64, want: bool) -> Option<u64> {
    let (a, b) = ((first >> 3) as usize, (last >> 3) as usize);
    // A byte with no wanted bit; the bits outside the range are made so.
    let skip = if want { 0x00 } else { 0xFF };
    let outside = |byte: u8, mask: u8| if want { byte & !mask } else { byte | mask };
    let at = |index: usize, byte: u8| {
        let within = if want { byte.leading_zeros() } else { byte.leading_ones() };
        index as u64 * 8 + u64::from(within)
    };
    let mut head = outside(bits[a], head_mask(first));
    if a == b {
        head = outside(head, tail_mask(last));
        return (head != skip).then(|| at(a, head));
    }
    if head != skip {
        return Some(at(a, head));
    }
    if let Some(i) = first_byte_other_than(&bits[a + 1..b], skip) {
        return Some(at(a + 1 + i, bits[a + 1 + i]));
    }
    let tail = outside(bits[b], tail_mask(last));
    (tail != skip).then(|| at(b, tail))
}

fn bitpos(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let want = match parse_i64(&argv[2])? {
        0 => false,
        1 => true,
        _ => return Err(CmdError::bitpos_bit()),
    };
    // A missing key is an endless run of zeros.
    let Some(value) = get_string(ctx, &argv[1])? else {
        return Ok(Reply::Int(if want { -1 } else { 0 }));
    };
    let whole = value.len() as i64 - 1;
    let (range, end_given) = match argv.len() {
        3 => (bit_range(0, whole, value.len(), false), false),
        4..=6 => {
            let start = parse_i64(&argv[3])?;
            let in_bits = argv.len() == 6 && range_in_bits(&argv[5])?;
            let end = if argv.len() >= 5 { Some(parse_i64(&argv[4])?) } else { None };
            (bit_range(start, end.unwrap_or(whole), value.len(), in_bits), end.is_some())
        }
        _ => return Err(CmdError::syntax()),
    };
    let Some((first, last)) = range else {
        return Ok(Reply::Int(-1));
    };
    Ok(Reply::Int(match first_bit(&value, first, last, want) {
        Some(at) => at as i64,
        // Without an end, the string is taken as padded with zeros.
        None if !want && !end_given => last as i64 + 1,
        None => -1,
    }))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

/// `out[i] = out[i] op src[i]`, `src` taken as padded with zeros.
fn combine(out: &mut [u8], src: &[u8], op: BitOp) {
    let (covered, rest) = out.split_at_mut(src.len());
    let pairs = covered.iter_mut().zip(src);
    match op {
        BitOp::And => {
            pairs.for_each(|(o, s)| *o &= s);
            rest.fill(0);
        }
        BitOp::Or => pairs.for_each(|(o, s)| *o |= s),
        BitOp::Xor => pairs.for_each(|(o, s)| *o ^= s),
        BitOp::Not => pairs.for_each(|(o, s)| *o = !s),
    }
}

fn bitop(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let op = [("and", BitOp::And), ("or", BitOp::Or), ("xor", BitOp::Xor), ("not", BitOp::Not)]
        .into_iter()
        .find(|(name, _)| c_keyword(&argv[1], name))
        .map(|(_, op)| op)
        .ok_or_else(CmdError::syntax)?;
    if op == BitOp::Not && argv.len() != 4 {
        return Err(CmdError::bitop_not_sources());
    }
    let mut sources = Vec::with_capacity(argv.len() - 3);
    for key in &argv[3..] {
        sources.push(get_string(ctx, key)?.unwrap_or_default());
    }
    let len = sources.iter().map(Bytes::len).max().unwrap_or(0);
    let dest = &argv[2];
    let now = ctx.now_ms;
    let db = ctx.db();
    if len == 0 {
        // Redis deletes the destination without looking it up first.
        if db.remove(dest).is_some() {
            db.notify(NOTIFY_GENERIC, "del", dest);
        }
        return Ok(Reply::Int(0));
    }
    let mut out = BytesMut::zeroed(len);
    if op == BitOp::Not {
        combine(&mut out, &sources[0], op);
    } else {
        out[..sources[0].len()].copy_from_slice(&sources[0]);
        for src in &sources[1..] {
            combine(&mut out, src, op);
        }
    }
    db.expire_if_needed(dest, now);
    db.set(dest, Value::Str(out.freeze()), false);
    db.mark_raw(dest);
    db.notify(NOTIFY_STRING, "set", dest);
    Ok(Reply::Int(len as i64))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum FieldOp {
    Get,
    Set(i64),
    IncrBy(i64),
}

/// One BITFIELD operation, with the OVERFLOW in force where it stood.
struct Field {
    op: FieldOp,
    signed: bool,
    bits: u32,
    offset: u64,
    overflow: Overflow,
}

/// Redis's `getBitfieldTypeFromArgument`: `i1`…`i64` or `u1`…`u63` (the
/// width read as a C string).
fn field_type(raw: &[u8]) -> CmdResult<(bool, u32)> {
    let (signed, widest) = match raw.first() {
        Some(b'i') => (true, 64),
        Some(b'u') => (false, 63),
        _ => return Err(CmdError::bitfield_type()),
    };
    match numfmt::parse_i64(c_str(&raw[1..], usize::MAX)) {
        Some(bits) if (1..=widest).contains(&bits) => Ok((signed, bits as u32)),
        _ => Err(CmdError::bitfield_type()),
    }
}

/// Every operation of a BITFIELD, parsed before any runs, as Redis does.
fn parse_fields(ctx: &Ctx, argv: &[Bytes]) -> CmdResult<Vec<Field>> {
    let mut args = Args::new(argv);
    args.next();
    let mut overflow = Overflow::Wrap;
    let mut fields = Vec::new();
    while let Some(name) = args.next() {
        let left = args.remaining();
        let op = if c_keyword(name, "get") && left >= 2 {
            FieldOp::Get
        } else if c_keyword(name, "set") && left >= 3 {
            // The value is read after the type and the offset.
            FieldOp::Set(0)
        } else if c_keyword(name, "incrby") && left >= 3 {
            FieldOp::IncrBy(0)
        } else if c_keyword(name, "overflow") && left >= 1 {
            let kind = args.req()?;
            overflow = [("wrap", Overflow::Wrap), ("sat", Overflow::Sat), ("fail", Overflow::Fail)]
                .into_iter()
                .find(|(name, _)| c_keyword(kind, name))
                .map(|(_, o)| o)
                .ok_or_else(CmdError::bitfield_overflow)?;
            continue;
        } else {
            return Err(CmdError::syntax());
        };
        let (signed, bits) = field_type(args.req()?)?;
        let offset = bit_offset(ctx, args.req()?, bits)?;
        let op = match op {
            FieldOp::Get => FieldOp::Get,
            FieldOp::Set(_) => FieldOp::Set(parse_i64(args.req()?)?),
            FieldOp::IncrBy(_) => FieldOp::IncrBy(parse_i64(args.req()?)?),
        };
        fields.push(Field {
            op,
            signed,
            bits,
            offset,
            overflow,
        });
    }
    Ok(fields)
}

/// The `width` bits at `offset` as an unsigned number; bits past the end
/// of the string read as zeros.
fn get_unsigned(bits: &[u8], offset: u64, width: u32) -> u64 {
    (offset..offset + u64::from(width)).fold(0, |value, at| {
        let (byte, mask) = bit_position(at);
        (value << 1) | u64::from(bits.get(byte).is_some_and(|b| b & mask != 0))
    })
}

/// The `width` bits at `offset` as a two's complement number.
fn get_signed(bits: &[u8], offset: u64, width: u32) -> i64 {
    let value = get_unsigned(bits, offset, width);
    if width < 64 && value & (1 << (width - 1)) != 0 {
        (value | (u64::MAX << width)) as i64
    } else {
        value as i64
    }
}

/// Stores the low `width` bits of `value` at `offset` (within the string).
fn set_bits(bits: &mut [u8], offset: u64, width: u32, value: u64) {
    for j in 0..width {
        let (byte, mask) = bit_position(offset + u64::from(j));
        if let Some(b) = bits.get_mut(byte) {
            if value >> (width - 1 - j) & 1 == 1 {
                *b |= mask;
            } else {
                *b &= !mask;
            }
        }
    }
}

/// Redis's `checkUnsignedBitfieldOverflow`: `None` when `value + incr`
/// fits in `width` unsigned bits, else what to store instead (wrapped, or
/// saturated; FAIL stores nothing, its caller answers nil).
fn unsigned_overflow(value: u64, incr: i64, width: u32, overflow: Overflow) -> Option<u64> {
    let max = u64::MAX >> (64 - width);
    let max_incr = max.wrapping_sub(value) as i64;
    let min_incr = value.wrapping_neg() as i64;
    let wrapped = || value.wrapping_add(incr as u64) & max;
    if value > max || (incr > 0 && incr > max_incr) {
        Some(if overflow == Overflow::Wrap { wrapped() } else { max })
    } else if incr < 0 && incr < min_incr {
        Some(if overflow == Overflow::Wrap { wrapped() } else { 0 })
    } else {
        None
    }
}

/// Redis's `checkSignedBitfieldOverflow`, computed as Redis computes it:
/// the limits are compared in wrapping arithmetic, so a SET far below the
/// range (an `i8` set to -2^63) counts as an overflow upwards and
/// saturates to the maximum, as in Redis.
fn signed_overflow(value: i64, incr: i64, width: u32, overflow: Overflow) -> Option<i64> {
    let max = if width == 64 { i64::MAX } else { (1i64 << (width - 1)) - 1 };
    let min = -max - 1;
    let max_incr = (max as u64).wrapping_sub(value as u64) as i64;
    let min_incr = min.wrapping_sub(value);
    let wrapped = || {
        let sum = (value as u64).wrapping_add(incr as u64);
        if width == 64 {
            sum as i64
        } else if sum & (1 << (width - 1)) != 0 {
            (sum | (u64::MAX << width)) as i64
        } else {
            (sum & !(u64::MAX << width)) as i64
        }
    };
    if value > max || (width != 64 && incr > max_incr) || (value >= 0 && incr > 0 && incr > max_incr) {
        Some(if overflow == Overflow::Wrap { wrapped() } else { max })
    } else if value < min || (width != 64 && incr < min_incr) || (value < 0 && incr < 0 && incr < min_incr) {
        Some(if overflow == Overflow::Wrap { wrapped() } else { min })
    } else {
        None
    }
}

/// A GET's answer.
fn read_field(bits: &[u8], f: &Field) -> i64 {
    if f.signed {
        get_signed(bits, f.offset, f.bits)
    } else {
        get_unsigned(bits, f.offset, f.bits) as i64
    }
}

/// Runs a SET or INCRBY: its answer (the old value for SET, the new one
/// for INCRBY) and whether the field changed; `None` when OVERFLOW FAIL
/// refused it.
fn write_field(bits: &mut [u8], f: &Field) -> Option<(i64, bool)> {
    let (amount, is_set) = match f.op {
        FieldOp::Set(v) => (v, true),
        FieldOp::IncrBy(v) => (v, false),
        FieldOp::Get => return Some((read_field(bits, f), false)),
    };
    let (old, new) = if f.signed {
        let old = get_signed(bits, f.offset, f.bits);
        let checked = if is_set {
            signed_overflow(amount, 0, f.bits, f.overflow)
        } else {
            signed_overflow(old, amount, f.bits, f.overflow)
        };
        if checked.is_some() && f.overflow == Overflow::Fail {
            return None;
        }
        let new = checked.unwrap_or(if is_set { amount } else { old.wrapping_add(amount) });
        (old as u64, new as u64)
    } else {
        let old = get_unsigned(bits, f.offset, f.bits);
        let checked = if is_set {
            unsigned_overflow(amount as u64, 0, f.bits, f.overflow)
        } else {
            unsigned_overflow(old, amount, f.bits, f.overflow)
        };
        if checked.is_some() && f.overflow == Overflow::Fail {
            return None;
        }
        let new = checked.unwrap_or(if is_set { amount as u64 } else { old.wrapping_add(amount as u64) });
        (old, new)
    };
    set_bits(bits, f.offset, f.bits, new);
    Some((if is_set { old as i64 } else { new as i64 }, old != new))
}

fn bitfield(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    run_bitfield(ctx, argv, false)
}

fn bitfield_ro(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    run_bitfield(ctx, argv, true)
}

/// Redis's `bitfieldGeneric`: only GETs read the key as a read (a missing
/// key reads as zeros); any SET or INCRBY creates or pads the string up to
/// the farthest field written before the operations run in order.
fn run_bitfield(ctx: &mut Ctx, argv: &[Bytes], read_only: bool) -> CmdResult {
    let fields = parse_fields(ctx, argv)?;
    let key = &argv[1];
    let written = fields.iter().filter(|f| f.op != FieldOp::Get);
    let Some(farthest) = written.map(|f| f.offset + u64::from(f.bits) - 1).max() else {
        let value = get_string(ctx, key)?.unwrap_or_default();
        return Ok(Reply::Array(fields.iter().map(|f| Reply::Int(read_field(&value, f))).collect()));
    };
    if read_only {
        return Err(CmdError::bitfield_ro_write());
    }
    let min_len = (farthest >> 3) as usize + 1;
    let now = ctx.now_ms;
    let db = ctx.db();
    let position = match db.live_position(key, now) {
        Some(position) if matches!(db.value_at(position), Value::Str(_)) => position,
        Some(_) => return Err(CmdError::wrong_type()),
        None => db.insert_absent_unsignalled(key, Value::Str(Bytes::new())),
    };
    db.mark_raw_at(position);
    let Value::Str(value) = db.value_at_mut_unsignalled(position) else {
        return Err(CmdError::wrong_type());
    };
    let grown = value.len() < min_len;
    let (replies, changes) = edit_in_place(value, min_len, |bits| {
        let mut changes = 0;
        let replies: Vec<Reply> = fields
            .iter()
            .map(|f| match write_field(bits, f) {
                Some((answer, changed)) => {
                    if f.op != FieldOp::Get && (grown || changed) {
                        changes += 1;
                    }
                    Reply::Int(answer)
                }
                None => Reply::Nil,
            })
            .collect();
        (replies, changes)
    });
    if changes > 0 {
        db.touch_watched(key);
        db.notify(NOTIFY_STRING, "setbit", key);
    }
    ctx.dirty(changes as u64);
    Ok(Reply::Array(replies))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::table::Registry;
    use crate::engine::{Client, State};

    fn run(state: &mut State, client: &mut Client, argv: &[&str]) -> Reply {
        let argv: Vec<Bytes> = argv.iter().map(|a| Bytes::copy_from_slice(a.as_bytes())).collect();
        let command = Registry::get().lookup(&argv[0]).expect("a known command");
        state.call(None, client, command, &argv)
    }

    /// Where the bytes of the string at `key` live.
    fn address(state: &State, key: &[u8]) -> *const u8 {
        match state.dbs[0].peek(key, 0) {
            Some(Value::Str(s)) => s.as_ptr(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn writes_change_a_large_bitmap_where_it_is() {
        let mut state = State::new(crate::Config::ephemeral(), 0);
        let mut client = Client::script_client();
        assert_eq!(run(&mut state, &mut client, &["SETBIT", "k", "80000000", "1"]), Reply::Int(0));
        let at = address(&state, b"k");
        for offset in ["0", "12345", "79999999", "40000000"] {
            assert_eq!(run(&mut state, &mut client, &["SETBIT", "k", offset, "1"]), Reply::Int(0));
            assert_eq!(address(&state, b"k"), at);
        }
        run(
            &mut state,
            &mut client,
            &["BITFIELD", "k", "SET", "i64", "#3", "-1", "INCRBY", "u8", "800", "1"],
        );
        assert_eq!(address(&state, b"k"), at);
        assert_eq!(run(&mut state, &mut client, &["BITCOUNT", "k"]), Reply::Int(5 + 64 + 1));
    }

    #[test]
    fn a_shared_string_is_copied_before_it_changes() {
        let mut state = State::new(crate::Config::ephemeral(), 0);
        let mut client = Client::script_client();
        run(&mut state, &mut client, &["SET", "k", "foo"]);
        let Some(Value::Str(held)) = state.dbs[0].peek(b"k", 0).cloned() else {
            panic!("a string")
        };
        assert_eq!(run(&mut state, &mut client, &["SETBIT", "k", "0", "1"]), Reply::Int(0));
        assert_eq!(&held[..], b"foo");
        assert_eq!(
            run(&mut state, &mut client, &["GET", "k"]),
            Reply::Bulk(Bytes::from_static(b"\xe6oo"))
        );
    }

    #[test]
    fn popcount_counts_words_and_the_tail() {
        let bytes: Vec<u8> = (0..=255).chain(0..3).collect();
        let expected: u64 = bytes.iter().map(|b| u64::from(b.count_ones())).sum();
        assert_eq!(popcount(&bytes), expected);
        assert_eq!(popcount(&[]), 0);
    }

    #[test]
    fn count_ones_trims_partial_bytes() {
        let bits = [0xFF, 0xFF, 0xFF];
        assert_eq!(count_ones(&bits, 0, 23), 24);
        assert_eq!(count_ones(&bits, 3, 3), 1);
        assert_eq!(count_ones(&bits, 5, 17), 13);
        assert_eq!(count_ones(&bits, 7, 8), 2);
    }

    #[test]
    fn first_bit_finds_the_first_wanted_bit_in_range() {
        let mut bits = vec![0u8; 40];
        bits[33] = 0x10;
        assert_eq!(first_bit(&bits, 0, 319, true), Some(33 * 8 + 3));
        assert_eq!(first_bit(&bits, 268, 319, true), None);
        assert_eq!(first_bit(&bits, 0, 266, true), None);
        assert_eq!(first_bit(&bits, 267, 267, true), Some(267));
        let ones = vec![0xFFu8; 40];
        assert_eq!(first_bit(&ones, 0, 319, false), None);
        let mut holes = ones.clone();
        holes[20] = 0xFE;
        assert_eq!(first_bit(&holes, 3, 300, false), Some(167));
    }

    #[test]
    fn fields_read_and_write_across_bytes() {
        let mut bits = vec![0u8; 9];
        set_bits(&mut bits, 7, 64, u64::MAX);
        assert_eq!(get_unsigned(&bits, 7, 64), u64::MAX);
        assert_eq!(get_signed(&bits, 7, 64), -1);
        assert_eq!(bits[0], 0x01);
        assert_eq!(get_signed(&bits, 7, 5), -1);
        assert_eq!(get_unsigned(&[], 100, 63), 0);
    }

    #[test]
    fn overflow_checks_follow_redis() {
        assert_eq!(unsigned_overflow(255, 1, 8, Overflow::Wrap), Some(0));
        assert_eq!(unsigned_overflow(255, 1, 8, Overflow::Sat), Some(255));
        assert_eq!(unsigned_overflow(0, -1, 8, Overflow::Sat), Some(0));
        assert_eq!(unsigned_overflow(0, -1, 8, Overflow::Wrap), Some(255));
        assert_eq!(unsigned_overflow(u64::MAX, 0, 63, Overflow::Sat), Some(i64::MAX as u64));
        assert_eq!(unsigned_overflow(3, 4, 8, Overflow::Sat), None);
        assert_eq!(signed_overflow(127, 1, 8, Overflow::Wrap), Some(-128));
        assert_eq!(signed_overflow(-128, -1, 8, Overflow::Sat), Some(-128));
        assert_eq!(signed_overflow(i64::MAX, 1, 64, Overflow::Wrap), Some(i64::MIN));
        assert_eq!(signed_overflow(i64::MIN, -1, 64, Overflow::Sat), Some(i64::MIN));
        assert_eq!(signed_overflow(i64::MIN, 0, 8, Overflow::Sat), Some(127));
        assert_eq!(signed_overflow(-1, 0, 1, Overflow::Sat), None);
        assert_eq!(signed_overflow(1, 0, 1, Overflow::Wrap), Some(-1));
    }
}
