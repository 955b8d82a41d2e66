//! Lua 5.1's value rules, as far as the recognized scripts reach them, so
//! that a native script computes with exactly the values its Lua twin
//! would see.
//!
//! - What `redis.call` hands a script: [`Value::from_reply`] is
//!   `convert::reply_to_lua` under RESP2 (the recognized scripts never call
//!   `redis.setresp`): integers become doubles, nil bulk and nil arrays
//!   become `false`, statuses `{ok=…}`.
//! - What a script's `return` sends: [`Value::into_reply`] is
//!   `convert::lua_to_reply` (numbers truncate to integers, `false` and
//!   `nil` become nil).
//! - `tonumber` and the string coercion of arithmetic use the C library's
//!   `strtod`, which is what the embedded Lua calls (`luaO_str2d`): hex,
//!   `inf`, `nan`, leading and trailing spaces, and a string cut at its
//!   first NUL all behave as in the Lua run.
//! - Numbers print with Lua's `%.14g` in concatenations and `tostring`, and
//!   with Redis's `%.17g` when passed to `redis.call` ([`Value::to_arg`]).
//! - Comparisons raise Lua's own texts (`attempt to compare nil with
//!   number`). Lua compiles `a > b` as `b < a`, so callers write `lt(b, a)`
//!   for `a > b`: the operand order shows in the message.

use std::ffi::{CString, c_char};

use bytes::Bytes;

use crate::reply::Reply;

/// A Lua value as a recognized script can hold it.
#[derive(Debug, Clone)]
pub enum Value {
    Nil,
    Bool(bool),
    Num(f64),
    Str(Bytes),
    Table(Table),
}

/// The tables a script can meet: arrays from replies (and those it builds),
/// and Redis's status / error tables.
#[derive(Debug, Clone)]
pub enum Table {
    Array(Vec<Value>),
    Status(Bytes),
    Error(Bytes),
}

impl Value {
    pub const fn str_static(s: &'static str) -> Value {
        Value::Str(Bytes::from_static(s.as_bytes()))
    }

    /// Lua's `type()`, which also names operands in error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Nil => "nil",
            Value::Bool(_) => "boolean",
            Value::Num(_) => "number",
            Value::Str(_) => "string",
            Value::Table(_) => "table",
        }
    }

    /// Anything but `nil` and `false` is true.
    pub fn truthy(&self) -> bool {
        !matches!(self, Value::Nil | Value::Bool(false))
    }

    /// A command reply as `redis.call` returns it to a RESP2 script.
    pub fn from_reply(reply: Reply) -> Value {
        match reply {
            Reply::Status(s) => Value::Table(Table::Status(s)),
            Reply::Error(e) => Value::Table(Table::Error(e)),
            Reply::Int(n) => Value::Num(n as f64),
            Reply::Bulk(b) | Reply::Verbatim(_, b) | Reply::BigNumber(b) => Value::Str(b),
            // Raw bytes are tracking pushes, never a command's reply.
            Reply::Nil | Reply::NilArray | Reply::Raw(_) => Value::Bool(false),
            Reply::Array(items) | Reply::Push(items) | Reply::Many(items) | Reply::Set(items) => {
                Value::Table(Table::Array(items.into_iter().map(Value::from_reply).collect()))
            }
            Reply::Map(pairs) => Value::Table(Table::Array(
                pairs
                    .into_iter()
                    .flat_map(|(k, v)| [Value::from_reply(k), Value::from_reply(v)])
                    .collect(),
            )),
            Reply::Double(d) => Value::Str(Bytes::from(crate::numfmt::reply_double(d))),
            Reply::HumanDouble(d) => Value::Str(Bytes::from(crate::numfmt::human_double(d))),
            Reply::Bool(b) => Value::Num(b as i64 as f64),
        }
    }

    /// The script's return value as the client's reply (RESP2 rules).
    pub fn into_reply(self) -> Reply {
        match self {
            Value::Nil | Value::Bool(false) => Reply::Nil,
            Value::Bool(true) => Reply::Int(1),
            Value::Num(n) => Reply::Int(super::super::convert::lua_number_to_int(n)),
            Value::Str(s) => Reply::Bulk(s),
            Value::Table(Table::Status(s)) => super::super::convert::status_table_reply(&s),
            Value::Table(Table::Error(e)) => super::super::convert::error_table_reply(&e),
            // An array ends at its first nil, as Lua's `#` and Redis's walk see it.
            Value::Table(Table::Array(items)) => Reply::Array(
                items
                    .into_iter()
                    .take_while(|v| !matches!(v, Value::Nil))
                    .map(Value::into_reply)
                    .collect(),
            ),
        }
    }

    /// The argument `redis.call` builds from this value: strings as they
    /// are, numbers with `%.17g`; anything else is refused.
    pub fn to_arg(&self) -> Option<Bytes> {
        match self {
            Value::Str(s) => Some(s.clone()),
            Value::Num(n) => Some(Bytes::from(fmt_17g(*n))),
            _ => None,
        }
    }

    /// `tonumber(v)` (base 10).
    pub fn to_number(&self) -> Option<f64> {
        match self {
            Value::Num(n) => Some(*n),
            Value::Str(s) => str_to_number(s),
            _ => None,
        }
    }

    /// `tonumber(v)` as a value: the number, or `nil`.
    pub fn tonumber(&self) -> Value {
        self.to_number().map_or(Value::Nil, Value::Num)
    }

    /// Lua's `==`: values of different types are never equal, strings
    /// compare by bytes, tables by identity (two replies are two tables).
    pub fn lua_eq(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Nil, Value::Nil) => true,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Num(a), Value::Num(b)) => a == b,
            (Value::Str(a), Value::Str(b)) => a == b,
            _ => false,
        }
    }

    /// `v == n` for a number literal `n`.
    pub fn is_num(&self, n: f64) -> bool {
        matches!(self, Value::Num(v) if *v == n)
    }
}

/// Lua's `l < r` (`luaV_lessthan`), or the runtime error's message.
pub fn lt(l: &Value, r: &Value) -> Result<bool, String> {
    match (l, r) {
        (Value::Num(a), Value::Num(b)) => Ok(a < b),
        (Value::Str(a), Value::Str(b)) => Ok(str_cmp(a, b).is_lt()),
        _ => Err(order_error(l, r)),
    }
}

/// Lua's `l <= r` (`luaV_lessequal`), or the runtime error's message.
pub fn le(l: &Value, r: &Value) -> Result<bool, String> {
    match (l, r) {
        (Value::Num(a), Value::Num(b)) => Ok(a <= b),
        (Value::Str(a), Value::Str(b)) => Ok(str_cmp(a, b).is_le()),
        _ => Err(order_error(l, r)),
    }
}

/// Lua's `a .. b .. …` (`luaV_concat`): strings as they are, numbers with
/// `%.14g`. Lua merges the longest run of strings and numbers from the
/// right, then fails on the pair in front of it, naming that pair's left
/// operand if it is the bad one, else the right. Every operand that can be
/// neither in the recognized scripts is a `KEYS[i]` / `ARGV[i]` read, which
/// Lua names `field '?'` (a table read with a non-string key).
pub fn concat(parts: &[Value]) -> Result<Bytes, String> {
    let ok = |v: &Value| matches!(v, Value::Str(_) | Value::Num(_));
    if let Some(bad) = parts.iter().rposition(|v| !ok(v)) {
        let named = if bad == parts.len() - 1 && bad > 0 && !ok(&parts[bad - 1]) {
            &parts[bad - 1]
        } else {
            &parts[bad]
        };
        return Err(format!("attempt to concatenate field '?' (a {} value)", named.type_name()));
    }
    let mut out = Vec::new();
    for p in parts {
        match p {
            Value::Str(s) => out.extend_from_slice(s),
            Value::Num(n) => out.extend_from_slice(fmt_14g(*n).as_bytes()),
            _ => {}
        }
    }
    Ok(Bytes::from(out))
}

/// `tostring(v)`: strings as they are, numbers with `%.14g`, `nil`,
/// `true`, `false`. None for a table, which prints as its address.
pub fn tostring(v: &Value) -> Option<Bytes> {
    Some(match v {
        Value::Nil => Bytes::from_static(b"nil"),
        Value::Bool(b) => Bytes::from_static(if *b { b"true" } else { b"false" }),
        Value::Num(n) => Bytes::from(fmt_14g(*n)),
        Value::Str(s) => s.clone(),
        Value::Table(_) => return None,
    })
}

/// Lua's `l + r` with its string coercion; each operand comes with the name
/// Lua's error gives it (`local 'currentExpire'`, `field '?'`), or `""`
/// for one Lua cannot name (a call's result, as `tonumber(…)`).
pub fn add(l: (&Value, &str), r: (&Value, &str)) -> Result<f64, String> {
    arith(l, r, |a, b| a + b)
}

/// Lua's `l - r`, operands named as for [`add`].
pub fn sub(l: (&Value, &str), r: (&Value, &str)) -> Result<f64, String> {
    arith(l, r, |a, b| a - b)
}

/// Lua's unary `-v` (OP_UNM: the operand is both of `luaG_aritherror`'s),
/// named as for [`add`]: `-tonumber(ARGV[3])` on a non-number raises
/// `attempt to perform arithmetic on a nil value`.
pub fn unm(v: (&Value, &str)) -> Result<f64, String> {
    arith(v, v, |a, _| -a)
}

fn arith(l: (&Value, &str), r: (&Value, &str), op: impl Fn(f64, f64) -> f64) -> Result<f64, String> {
    match (l.0.to_number(), r.0.to_number()) {
        (Some(a), Some(b)) => Ok(op(a, b)),
        // `luaG_aritherror`: the first operand if it is the bad one.
        (None, _) => Err(arith_error(l)),
        (_, None) => Err(arith_error(r)),
    }
}

/// `luaG_typeerror` for arithmetic: a named operand with its name, a
/// temporary by its type alone.
fn arith_error((v, name): (&Value, &str)) -> String {
    if name.is_empty() {
        format!("attempt to perform arithmetic on a {} value", v.type_name())
    } else {
        format!("attempt to perform arithmetic on {name} (a {} value)", v.type_name())
    }
}

/// `math.max(…)`: every argument must convert to a number.
pub fn math_max(args: &[Value]) -> Result<f64, String> {
    let mut max = f64::NAN;
    for (i, a) in args.iter().enumerate() {
        let Some(d) = a.to_number() else {
            return Err(format!("bad argument #{} to 'max' (number expected, got {})", i + 1, a.type_name()));
        };
        if i == 0 || d > max {
            max = d;
        }
    }
    Ok(max)
}

/// A numeric `for v = init, limit, step`: Lua 5.1's OP_FORPREP (which
/// converts numeric strings and rejects anything else) and OP_FORLOOP
/// (the variable starts at `(init - step) + step`, in floating point).
pub fn numeric_for(init: &Value, limit: &Value, step: f64) -> Result<NumericFor, String> {
    let Some(init) = init.to_number() else {
        return Err("'for' initial value must be a number".into());
    };
    let Some(limit) = limit.to_number() else {
        return Err("'for' limit must be a number".into());
    };
    Ok(NumericFor {
        next: init - step,
        limit,
        step,
    })
}

/// The values a numeric `for` takes.
pub struct NumericFor {
    next: f64,
    limit: f64,
    step: f64,
}

impl Iterator for NumericFor {
    type Item = f64;

    fn next(&mut self) -> Option<f64> {
        let idx = self.next + self.step;
        let go_on = if 0.0 < self.step { idx <= self.limit } else { self.limit <= idx };
        if !go_on {
            return None;
        }
        self.next = idx;
        Some(idx)
    }
}

/// `luaG_ordererror`. Lua tells the two types apart by their third letter,
/// so "string" and "thread" count as the same; no script reaches that.
fn order_error(l: &Value, r: &Value) -> String {
    let (t1, t2) = (l.type_name(), r.type_name());
    if t1.as_bytes()[2] == t2.as_bytes()[2] {
        format!("attempt to compare two {t1} values")
    } else {
        format!("attempt to compare {t1} with {t2}")
    }
}

/// `l_strcmp` in the C locale (strcoll is strcmp there), segment by
/// segment across embedded NULs: bytewise order.
fn str_cmp(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    a.cmp(b)
}

/// Lua's `luaO_str2d` over the C library's `strtod`/`strtoul`, on the
/// string up to its first NUL (Lua hands C the raw buffer).
pub fn str_to_number(s: &[u8]) -> Option<f64> {
    let s = &s[..s.iter().position(|&c| c == 0).unwrap_or(s.len())];
    let c = CString::new(s).ok()?;
    let start = c.as_ptr();
    let mut end: *mut c_char = std::ptr::null_mut();
    // SAFETY: `start` is a NUL-terminated buffer owned by `c` for the whole
    // block; strtod/strtoul only read it and set `end` inside it.
    unsafe {
        let mut n = libc::strtod(start, &mut end);
        if std::ptr::eq(end, start) {
            return None;
        }
        if *end == b'x' as c_char || *end == b'X' as c_char {
            n = libc::strtoul(start, &mut end, 16) as f64;
        }
        while is_c_space(*end as u8) {
            end = end.add(1);
        }
        if *end != 0 { None } else { Some(n) }
    }
}

/// C's `isspace` in the C locale.
fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Lua's `%.14g`: a number in a concatenation or `tostring`.
pub fn fmt_14g(n: f64) -> String {
    crate::numfmt::fmt_g(n, 14)
}

/// Redis's `%.17g` for a number passed to `redis.call`, with a fast path
/// for the small integers scripts pass (`1`, `-1`, `0`).
pub fn fmt_17g(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 && !(n == 0.0 && n.is_sign_negative()) {
        return itoa::Buffer::new().format(n as i64).to_string();
    }
    crate::numfmt::fmt_g(n, 17)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tonumber_follows_strtod() {
        let n = |s: &[u8]| str_to_number(s);
        assert_eq!(n(b"12"), Some(12.0));
        assert_eq!(n(b" 12 \t\n"), Some(12.0));
        assert_eq!(n(b"0x1A"), Some(26.0));
        assert_eq!(n(b"1e3"), Some(1000.0));
        assert_eq!(n(b"-0"), Some(-0.0));
        assert_eq!(n(b"12\0abc"), Some(12.0));
        assert_eq!(n(b"inf"), Some(f64::INFINITY));
        assert!(n(b"nan").is_some_and(f64::is_nan));
        assert_eq!(n(b""), None);
        assert_eq!(n(b"abc"), None);
        assert_eq!(n(b"12a"), None);
        assert_eq!(n(b"1\x0b"), Some(1.0));
    }

    #[test]
    fn numbers_print_as_lua_and_redis_do() {
        assert_eq!(fmt_17g(1.0), "1");
        assert_eq!(fmt_17g(-1.0), "-1");
        assert_eq!(fmt_17g(-0.0), "-0");
        assert_eq!(fmt_17g(0.1), "0.10000000000000001");
        assert_eq!(fmt_17g(1.8e12), "1800000000000");
        assert_eq!(fmt_14g(2f64.powi(53)), "9.007199254741e+15");
        assert_eq!(fmt_14g(3.0), "3");
    }

    #[test]
    fn concatenation_names_the_operand_lua_names() {
        let k = Value::str_static("k");
        assert_eq!(&concat(&[k.clone(), Value::Num(3.0)]).unwrap()[..], b"k3");
        assert_eq!(&concat(&[k.clone(), Value::Num(1e15)]).unwrap()[..], b"k1e+15");
        let nil_err = "attempt to concatenate field '?' (a nil value)";
        assert_eq!(concat(&[Value::Nil, k.clone(), Value::Num(1.0)]).unwrap_err(), nil_err);
        assert_eq!(
            concat(&[k.clone(), Value::Bool(false), Value::Nil]).unwrap_err(),
            "attempt to concatenate field '?' (a boolean value)"
        );
        assert_eq!(concat(&[Value::Bool(true), k, Value::Nil]).unwrap_err(), nil_err);
    }

    #[test]
    fn tostring_prints_as_lua() {
        let text = |v: &Value| tostring(v).map(|b| String::from_utf8_lossy(&b).into_owned());
        assert_eq!(text(&Value::str_static("1.5")).as_deref(), Some("1.5"));
        assert_eq!(text(&Value::Num(1e15)).as_deref(), Some("1e+15"));
        assert_eq!(text(&Value::Num(3.0)).as_deref(), Some("3"));
        assert_eq!(text(&Value::Nil).as_deref(), Some("nil"));
        assert_eq!(text(&Value::Bool(false)).as_deref(), Some("false"));
        assert_eq!(text(&Value::Table(Table::Array(vec![]))), None);
    }

    #[test]
    fn numeric_for_counts_like_lua() {
        let values: Vec<f64> = numeric_for(&Value::str_static("3"), &Value::Num(1.0), -1.0).unwrap().collect();
        assert_eq!(values, [3.0, 2.0, 1.0]);
        let values: Vec<f64> = numeric_for(&Value::Num(2.5), &Value::Num(1.0), -1.0).unwrap().collect();
        assert_eq!(values, [2.5, 1.5]);
        assert_eq!(numeric_for(&Value::Num(1.0), &Value::Num(f64::NAN), 1.0).unwrap().count(), 0);
        assert_eq!(
            numeric_for(&Value::Nil, &Value::Num(1.0), -1.0).err().unwrap(),
            "'for' initial value must be a number"
        );
        assert_eq!(
            numeric_for(&Value::Num(1.0), &Value::Nil, 1.0).err().unwrap(),
            "'for' limit must be a number"
        );
    }

    #[test]
    fn arithmetic_and_max_coerce_strings() {
        let argv = Value::str_static("100");
        assert_eq!(add((&Value::Num(-1.0), "local 'x'"), (&argv, "field '?'")).unwrap(), 99.0);
        assert_eq!(
            add((&Value::Num(-1.0), "local 'x'"), (&Value::str_static("abc"), "field '?'")).unwrap_err(),
            "attempt to perform arithmetic on field '?' (a string value)"
        );
        assert_eq!(
            sub((&Value::Nil, ""), (&Value::Num(1.0), "")).unwrap_err(),
            "attempt to perform arithmetic on a nil value"
        );
        assert_eq!(sub((&argv, "local 'timeout'"), (&Value::Num(1.0), "")).unwrap(), 99.0);
        assert_eq!(unm((&Value::Nil, "")).unwrap_err(), "attempt to perform arithmetic on a nil value");
        assert!(unm((&Value::Num(f64::NAN), "")).unwrap().is_sign_negative());
        assert_eq!(math_max(&[Value::Num(-1.0), argv]).unwrap(), 100.0);
        assert_eq!(
            math_max(&[Value::Num(-1.0), Value::str_static("x")]).unwrap_err(),
            "bad argument #2 to 'max' (number expected, got string)"
        );
    }

    #[test]
    fn comparisons_name_operands_in_lua_order() {
        assert_eq!(lt(&Value::Num(0.0), &Value::Nil).unwrap_err(), "attempt to compare number with nil");
        assert_eq!(lt(&Value::Nil, &Value::Nil).unwrap_err(), "attempt to compare two nil values");
        assert!(lt(&Value::Num(0.0), &Value::Num(1.0)).unwrap());
        assert!(le(&Value::str_static("a"), &Value::str_static("b")).unwrap());
    }
}
