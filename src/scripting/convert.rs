//! A script's Lua values as replies, with Redis 7.0's rules
//! (`script_lua.c`): tables as arrays up to the first nil, `{ok=…}` and
//! `{err=…}` as status and error, Lua numbers as integer replies by
//! truncation, and RESP3 shapes after `redis.setresp(3)`. The other
//! direction, a command's reply as the script sees it, is pushed straight
//! onto the Lua stack by `raw_call.rs`.

use bytes::Bytes;
use mlua::{Table, Value};

use crate::error::c_str;
use crate::reply::{Reply, one_line, trim_line_breaks};

/// A Lua number as an integer reply: C's `(long long)` cast on x86-64,
/// where NaN and out-of-range values become i64::MIN.
pub(crate) fn lua_number_to_int(n: f64) -> i64 {
    if n.is_nan() || !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}

/// A script's `{err=…}` (or `redis.error_reply`) as Redis sends it,
/// `addReplyErrorFormatEx(c, …, "-%s", msg)`: the text to its first NUL
/// (`lua_tostring` read as a C string), without the CRs and LFs that end
/// it, the others spaces. Leading ones become spaces too: the trim sees
/// the `-` first.
pub(crate) fn error_table_reply(text: &[u8]) -> Reply {
    let formatted = [b"-", c_str(text, usize::MAX)].concat();
    let trimmed = &trim_line_breaks(&formatted)[1..];
    Reply::Error(Bytes::copy_from_slice(&one_line(trimmed)))
}

/// A script's `{ok=…}` (or `redis.status_reply`) as Redis sends it,
/// `addReplyStatusSafe`: the text to its first NUL, line breaks as spaces.
pub(crate) fn status_table_reply(text: &[u8]) -> Reply {
    Reply::Status(Bytes::copy_from_slice(&one_line(c_str(text, usize::MAX))))
}

/// The script's return value as the client's reply (`luaReplyToRedisReply`).
/// `resp` is the protocol the script selected with `redis.setresp`.
pub fn lua_to_reply(value: &Value, resp: u8) -> Reply {
    match value {
        Value::String(s) => Reply::Bulk(Bytes::copy_from_slice(&s.as_bytes())),
        Value::Boolean(b) => {
            if resp >= 3 {
                Reply::Bool(*b)
            } else if *b {
                Reply::Int(1)
            } else {
                Reply::Nil
            }
        }
        Value::Number(n) => Reply::Int(lua_number_to_int(*n)),
        Value::Integer(n) => Reply::Int(*n),
        Value::Table(t) => table_to_reply(t, resp),
        _ => Reply::Nil,
    }
}

fn table_to_reply(t: &Table, resp: u8) -> Reply {
    if let Ok(Value::String(e)) = t.raw_get::<Value>("err") {
        return error_table_reply(&e.as_bytes());
    }
    if let Ok(Value::String(s)) = t.raw_get::<Value>("ok") {
        return status_table_reply(&s.as_bytes());
    }
    match t.raw_get::<Value>("double") {
        Ok(Value::Number(d)) => return Reply::Double(d),
        Ok(Value::Integer(d)) => return Reply::Double(d as f64),
        _ => {}
    }
    if let Ok(Value::String(s)) = t.raw_get::<Value>("big_number") {
        // Redis maps line breaks here too, though RESP2 sends it as a bulk.
        return Reply::BigNumber(Bytes::copy_from_slice(&one_line(&s.as_bytes())));
    }
    if let Ok(Value::Table(v)) = t.raw_get::<Value>("verbatim_string")
        && let (Ok(Value::String(_)), Ok(Value::String(s))) = (v.raw_get::<Value>("format"), v.raw_get::<Value>("string"))
    {
        return Reply::Verbatim(Bytes::copy_from_slice(&s.as_bytes()));
    }
    if let Ok(Value::Table(m)) = t.raw_get::<Value>("map") {
        let pairs = m
            .pairs::<Value, Value>()
            .filter_map(Result::ok)
            .map(|(k, v)| (lua_to_reply(&k, resp), lua_to_reply(&v, resp)))
            .collect();
        return Reply::Map(pairs);
    }
    if let Ok(Value::Table(s)) = t.raw_get::<Value>("set") {
        let members = s
            .pairs::<Value, Value>()
            .filter_map(Result::ok)
            .map(|(k, _)| lua_to_reply(&k, resp))
            .collect();
        return Reply::Set(members);
    }
    let mut items = Vec::new();
    for i in 1.. {
        match t.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => items.push(lua_to_reply(&v, resp)),
        }
    }
    Reply::Array(items)
}

/// An uncaught script error: the handler's `{err, source, line}` table as
/// `<err> script: <sha>, on <source>:<line>.`.
pub fn script_error(err: &Table, sha: &str) -> Reply {
    let text = |v: Value| -> Option<String> {
        match v {
            Value::String(s) => Some(String::from_utf8_lossy(c_str(&s.as_bytes(), usize::MAX)).into_owned()),
            Value::Number(n) => Some(crate::numfmt::fmt_g(n, 14)),
            Value::Integer(n) => Some(n.to_string()),
            _ => None,
        }
    };
    let msg = t_get(err, "err").and_then(text).unwrap_or_else(|| "(null)".into());
    let line = t_get(err, "line").and_then(text);
    let source = t_get(err, "source").and_then(text);
    located_error(msg, sha, source.as_deref().zip(line.as_deref()))
}

/// An uncaught error's reply: its text, then where it was raised
/// (`script: <sha>, on <source>:<line>.`) when known, on one line
/// (`addReplyErrorSdsExSafe`: line breaks as spaces, none trimmed).
pub(crate) fn located_error(msg: String, sha: &str, place: Option<(&str, &str)>) -> Reply {
    let mut full = msg;
    if let Some((source, line)) = place {
        full.push_str(&format!(" script: {sha}, on {source}:{line}."));
    }
    Reply::Error(Bytes::copy_from_slice(&one_line(full.as_bytes())))
}

fn t_get(t: &Table, key: &str) -> Option<Value> {
    t.raw_get::<Value>(key).ok().filter(|v| !v.is_nil())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(r: Reply) -> Vec<u8> {
        match r {
            Reply::Error(b) | Reply::Status(b) => b.to_vec(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn error_table_loses_trailing_line_breaks_only() {
        assert_eq!(text(error_table_reply(b"\nx\r\ny\r\n")), b" x  y");
        assert_eq!(text(error_table_reply(b"\r\n")), b"");
    }

    #[test]
    fn error_and_status_tables_stop_at_a_nul() {
        assert_eq!(text(error_table_reply(b"x\0y")), b"x");
        assert_eq!(text(status_table_reply(b"x\r\n\0y")), b"x  ");
    }
}
