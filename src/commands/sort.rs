//! SORT and SORT_RO over lists, sets and sorted sets: BY (a pattern, a
//! hash field `->`, or a constant that means "do not sort"), LIMIT, GET
//! (`#` and patterns, repeated), ASC/DESC, ALPHA and STORE (a list, with a
//! `sortstore` event).
//!
//! Redis's `sort.c` is the specification, step for step: options parsed
//! first (SORT_RO does not know STORE), then the key looked up; the LIMIT
//! window clamped as Redis clamps it; lists and sorted sets not sorted
//! (`BY nosort`) walked in their own order from the window's start,
//! backwards with DESC; a set in that case sorted ALPHA instead when the
//! result is stored or a script asks, so replicas agree. Weights parse as
//! C's `strtod` (a NUL ends them; `ERR One or more scores can't be
//! converted into double` if one is not a number; Redis also refuses
//! every later numeric SORT while `errno` stays at the ERANGE an
//! out-of-range weight left, a process-wide accident keylock does not
//! copy: only the SORT with such a weight is refused). ALPHA compares with
//! `strcoll`, which under the C and C.UTF-8 locales Redis runs with is
//! byte order up to a NUL; with STORE, and numeric ties, compare whole
//! bytes. The vector is sorted with glibc's `qsort`, or Redis's `pqsort`
//! when a BY pattern and a LIMIT narrow it (`csort.rs`), so equal elements
//! land where Redis puts them. Pattern lookups are reads (hits, misses,
//! `keymiss` events), as Redis's `lookupKeyRead`. Sorting a sorted set
//! converts it to a skiplist, as in Redis (OBJECT ENCODING shows it).
//!
//! Where Redis's own order is its hash table's (a set that is not all
//! integers read with `BY nosort`; ties under ALPHA with a BY pattern in
//! a set or sorted set), keylock keeps its set's order instead (an
//! intset's numeric order, else insertion order): Redis's differs from
//! one process to the next, so no client can depend on it.

use std::cmp::Ordering;

use bytes::Bytes;

use super::args::{c_keyword, parse_i64};
use super::sets::members_in_order;
use super::table::{CommandSpec, cmd, flag::*};
use super::{CmdError, CmdResult, Ctx, Reply};
use crate::csort;
use crate::db::value::List;
use crate::db::{NOTIFY_GENERIC, NOTIFY_LIST, Value};
use crate::error::c_str;

pub const COMMANDS: &[CommandSpec] = &[
    cmd("sort", -2, sort).flags(WRITE | DENYOOM),
    cmd("sort_ro", -2, sort_ro).flags(READONLY),
];

/// One element being sorted (Redis's `redisSortObject`).
#[derive(Clone)]
struct Item {
    obj: Bytes,
    score: f64,
    /// The BY value an ALPHA sort compares; None when the key is missing.
    cmp_obj: Option<Bytes>,
}

/// `strcoll` under the C / C.UTF-8 locale: bytes up to the first NUL.
fn collate(a: &[u8], b: &[u8]) -> Ordering {
    c_str(a, usize::MAX).cmp(c_str(b, usize::MAX))
}

fn ordering_to_c(o: Ordering) -> i32 {
    o as i32
}

/// SORT's weight of a value: C's `strtod` over it as a C string; None
/// where Redis flags "can't be converted" (trailing text, out of range,
/// NaN). An empty value weighs 0.
fn weight(raw: &[u8]) -> Option<f64> {
    let text = c_str(raw, usize::MAX);
    if text.is_empty() {
        return Some(0.0);
    }
    let body = &text[text
        .iter()
        .take_while(|c| matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))
        .count()..];
    if body.is_empty() {
        return None;
    }
    crate::numfmt::parse_f64(body)
}

/// Redis's `lookupKeyByPattern`: `#` is the element itself; otherwise the
/// first `*` of the pattern is replaced by the element, and the key read
/// as a string, or, with `->field` after the `*`, as a hash's field.
/// None for a pattern without `*`, a missing key or field, or a value of
/// another type.
fn lookup_by_pattern(ctx: &mut Ctx, pattern: &[u8], subst: &Bytes) -> Option<Bytes> {
    if pattern.first() == Some(&b'#') && pattern.get(1).is_none_or(|&c| c == 0) {
        return Some(subst.clone());
    }
    let text = c_str(pattern, usize::MAX);
    let star = text.iter().position(|&c| c == b'*')?;
    let arrow = text[star + 1..]
        .windows(2)
        .position(|w| w == b"->")
        .map(|i| star + 1 + i)
        .filter(|&f| f + 2 < text.len());
    let (key_tail, field) = match arrow {
        Some(f) => (&pattern[star + 1..f], Some(&pattern[f + 2..])),
        None => (&pattern[star + 1..], None),
    };
    let mut key = Vec::with_capacity(pattern.len() + subst.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(subst);
    key.extend_from_slice(key_tail);
    match (ctx.read(&key)?, field) {
        (Value::Hash(h), Some(field)) => h.get(field).map(Bytes::copy_from_slice),
        (Value::Str(s), None) => Some(s.clone()),
        _ => None,
    }
}

fn sort(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    sort_generic(ctx, argv, false)
}

fn sort_ro(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    sort_generic(ctx, argv, true)
}

/// Redis's `sortCommandGeneric`.
fn sort_generic(ctx: &mut Ctx, argv: &[Bytes], readonly: bool) -> CmdResult {
    let (mut desc, mut alpha, mut dontsort) = (false, false, false);
    let (mut limit_start, mut limit_count) = (0i64, -1i64);
    let mut sortby: Option<&Bytes> = None;
    let mut storekey: Option<&Bytes> = None;
    let mut gets: Vec<&Bytes> = Vec::new();
    // BY and GET patterns may name any key: Redis allows them only to a
    // user who may read every key.
    let may_read_every_key = || {
        let cmd = crate::engine::exec::named(if readonly { b"sort_ro" } else { b"sort" });
        ctx.state.acl.may_read_every_key(ctx.client.user.as_deref(), cmd, argv)
    };
    let mut j = 2;
    while j < argv.len() {
        let left = argv.len() - j - 1;
        let a = &argv[j];
        if c_keyword(a, "asc") {
            desc = false;
        } else if c_keyword(a, "desc") {
            desc = true;
        } else if c_keyword(a, "alpha") {
            alpha = true;
        } else if c_keyword(a, "limit") && left >= 2 {
            limit_start = parse_i64(&argv[j + 1])?;
            limit_count = parse_i64(&argv[j + 2])?;
            j += 2;
        } else if !readonly && c_keyword(a, "store") && left >= 1 {
            storekey = Some(&argv[j + 1]);
            j += 1;
        } else if c_keyword(a, "by") && left >= 1 {
            let by = &argv[j + 1];
            // A BY without `*` is constant: nothing to sort by.
            if !c_str(by, usize::MAX).contains(&b'*') {
                dontsort = true;
            } else if !may_read_every_key() {
                return Err(CmdError::err("BY option of SORT denied due to insufficient ACL permissions."));
            }
            sortby = Some(by);
            j += 1;
        } else if c_keyword(a, "get") && left >= 1 {
            if !may_read_every_key() {
                return Err(CmdError::err("GET option of SORT denied due to insufficient ACL permissions."));
            }
            gets.push(&argv[j + 1]);
            j += 1;
        } else {
            return Err(CmdError::syntax());
        }
        j += 1;
    }

    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Kind {
        List,
        Set,
        ZSet,
    }
    let position = ctx.read_position(&argv[1]);
    let (kind, len) = match position.map(|p| ctx.db().value_at(p)) {
        None => (Kind::List, 0),
        Some(Value::List(l)) => (Kind::List, l.len()),
        Some(Value::Set(s)) => (Kind::Set, s.len()),
        Some(Value::ZSet(z)) => (Kind::ZSet, z.len()),
        Some(_) => return Err(CmdError::wrong_type()),
    };

    // Replies and stored results must not depend on a set's hash order.
    if dontsort && kind == Kind::Set && (storekey.is_some() || ctx.client.is_script) {
        dontsort = false;
        alpha = true;
        sortby = None;
    }
    if kind == Kind::ZSet
        && let Some(p) = position
        && let Value::ZSet(z) = ctx.db().value_at_mut_unsignalled(p)
    {
        z.convert_to_skiplist();
    }

    let vectorlen = len as i64;
    let mut start = limit_start.max(0).min(vectorlen);
    let limit_count = limit_count.max(-1).min(vectorlen);
    let mut end = if limit_count < 0 { vectorlen - 1 } else { start + limit_count - 1 };
    if start >= vectorlen {
        start = vectorlen - 1;
        end = vectorlen - 2;
    }
    if end >= vectorlen {
        end = vectorlen - 1;
    }

    let mut vector: Vec<Item> = {
        let item = |obj: &Bytes| Item {
            obj: obj.clone(),
            score: 0.0,
            cmp_obj: None,
        };
        match position.map(|p| ctx.db().value_at(p)) {
            None => Vec::new(),
            Some(Value::List(l)) if dontsort => {
                let picked = if end >= start { walk_list(l, start, end, desc) } else { Vec::new() };
                if end >= start {
                    end -= start;
                    start = 0;
                }
                picked.iter().map(item).collect()
            }
            Some(Value::List(l)) => l.iter().map(item).collect(),
            Some(Value::Set(s)) => members_in_order(s).iter().map(item).collect(),
            Some(Value::ZSet(z)) if dontsort => {
                let take = if start != 0 || end != vectorlen - 1 {
                    (end - start + 1).max(0)
                } else {
                    vectorlen
                } as usize;
                let skip = start.max(0) as usize;
                let picked: Vec<Item> = if desc {
                    z.iter().rev().skip(skip).take(take).map(|(m, _)| item(m)).collect()
                } else {
                    z.iter().skip(skip).take(take).map(|(m, _)| item(m)).collect()
                };
                end -= start;
                start = 0;
                picked
            }
            Some(Value::ZSet(z)) => z.iter().map(|(m, _)| item(m)).collect(),
            Some(_) => Vec::new(),
        }
    };

    let mut conversion_error = false;
    if !dontsort {
        for it in vector.iter_mut() {
            let byval = match sortby {
                Some(pattern) => match lookup_by_pattern(ctx, pattern, &it.obj) {
                    Some(v) => v,
                    None => continue,
                },
                None => it.obj.clone(),
            };
            if alpha {
                if sortby.is_some() {
                    it.cmp_obj = Some(byval);
                }
            } else {
                match weight(&byval) {
                    Some(w) => it.score = w,
                    None => conversion_error = true,
                }
            }
        }
        let (bypattern, store) = (sortby.is_some(), storekey.is_some());
        let mut cmp = |a: &Item, b: &Item| -> i32 {
            let c = if !alpha {
                if a.score > b.score {
                    1
                } else if a.score < b.score {
                    -1
                } else {
                    ordering_to_c(a.obj.cmp(&b.obj))
                }
            } else if bypattern {
                match (&a.cmp_obj, &b.cmp_obj) {
                    (None, None) => 0,
                    (None, Some(_)) => -1,
                    (Some(_), None) => 1,
                    (Some(x), Some(y)) if store => ordering_to_c(x.cmp(y)),
                    (Some(x), Some(y)) => ordering_to_c(collate(x, y)),
                }
            } else if store {
                ordering_to_c(a.obj.cmp(&b.obj))
            } else {
                ordering_to_c(collate(&a.obj, &b.obj))
            };
            if desc { -c } else { c }
        };
        if !vector.is_empty() {
            if bypattern && (start != 0 || end != vectorlen - 1) {
                csort::pqsort(&mut vector, &mut cmp, start, end);
            } else {
                csort::qsort(&mut vector, &mut cmp);
            }
        }
    }

    let window = || (start.max(0) as usize)..=(end.max(-1) as usize);
    let count = (end - start + 1).max(0) as usize;
    let outputlen = if gets.is_empty() { count } else { gets.len() * count };
    if conversion_error {
        return Err(CmdError::sort_scores());
    }
    let selected: &[Item] = if count == 0 { &[] } else { &vector[window()] };
    match storekey {
        None => {
            let mut out = Vec::with_capacity(outputlen);
            for it in selected {
                if gets.is_empty() {
                    out.push(Reply::Bulk(it.obj.clone()));
                }
                for pattern in &gets {
                    out.push(Reply::opt_bulk(lookup_by_pattern(ctx, pattern, &it.obj)));
                }
            }
            Ok(Reply::Array(out))
        }
        Some(dst) => {
            let mut list = List::with_capacity(outputlen);
            for it in selected {
                if gets.is_empty() {
                    list.push_back(it.obj.clone());
                }
                for pattern in &gets {
                    list.push_back(lookup_by_pattern(ctx, pattern, &it.obj).unwrap_or_default());
                }
            }
            let now = ctx.now_ms;
            let db = ctx.db();
            if outputlen > 0 {
                db.expire_if_needed(dst, now);
                db.set(dst, Value::List(Box::new(list)), false);
                db.notify(NOTIFY_LIST, "sortstore", dst);
                ctx.dirty(outputlen as u64);
            } else if db.remove(dst).is_some() {
                db.notify(NOTIFY_GENERIC, "del", dst);
            }
            Ok(Reply::Int(outputlen as i64))
        }
    }
}

/// The list elements a non-sorting SORT takes: `start..=end` counted from
/// the head, or with `desc` from the tail, in walking order.
fn walk_list(l: &List, start: i64, end: i64, desc: bool) -> Vec<Bytes> {
    let n = (end - start + 1) as usize;
    let start = start as usize;
    if desc {
        l.iter().rev().skip(start).take(n).cloned().collect()
    } else {
        l.iter().skip(start).take(n).cloned().collect()
    }
}
