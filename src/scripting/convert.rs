//! A script's Lua values as replies, with Redis 7.0's rules
//! (`luaReplyToRedisReply` in `script_lua.c`): tables as arrays up to the
//! first nil, `{ok=…}` and `{err=…}` as status and error, Lua numbers as
//! integer replies by truncation, and RESP3 shapes after
//! `redis.setresp(3)`. The other direction, a command's reply as the
//! script sees it, is pushed straight onto the Lua stack by `raw_call.rs`.
//!
//! The conversion walks the value on the Lua stack itself, as Redis does,
//! and checks for room on that stack before each level exactly where Redis
//! does: a table nested (or referring to itself) deeper than Lua's stack
//! allows ends in `-ERR reached lua stack limit` at the same depth as in
//! Redis, after the same nested arrays, instead of recursing without
//! bound. The recursion on the machine stack is bounded by the same check
//! (LUAI_MAXCSTACK slots, about 8,000 levels).
//!
//! Depth is not the only bound a result needs: a table that holds itself
//! twice (as a map key and value, say) converts to a tree whose size
//! doubles with every level, which no memory can hold (Redis 7.0.15 dies on
//! `local a = {} a.map = {} a.map[a] = a return a`). A [`Conversion`] counts
//! the memory the reply takes (each array, allocated at its exact size,
//! and the bytes of its strings); past
//! `lua-memory-limit`, or 1 GiB when that is larger or unset, the whole
//! result is refused with an error.
//!
//! Nothing here can raise a Lua error: only raw reads, `lua_next`, numbers
//! and the field names anchored in the registry by `sandbox.rs` (pushing an
//! existing string allocates nothing) are used, and the stack is grown
//! through the protected `lua_checkstack` of keylock's Lua. So the
//! conversion runs outside any protected call, with the script's result
//! where Redis has it, second on the stack above the error handler.

use std::ffi::{CStr, c_char, c_int};

use bytes::Bytes;
use mlua::ffi;

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

/// The bytes of the string at `index` (any Lua string, NULs included).
unsafe fn string_at<'a>(state: *mut ffi::lua_State, index: c_int) -> &'a [u8] {
    // SAFETY: callers check the type is string first, so no conversion
    // happens; the bytes live while the value is on the stack.
    unsafe {
        let mut len = 0usize;
        let p = ffi::lua_tolstring(state, index, &mut len);
        if p.is_null() {
            return &[];
        }
        std::slice::from_raw_parts(p as *const u8, len)
    }
}

/// The string at `index` up to its first NUL, as Redis's `lua_tostring`
/// + `sdsnew` keep it.
unsafe fn c_string_at<'a>(state: *mut ffi::lua_State, index: c_int) -> &'a [u8] {
    // SAFETY: as `string_at`.
    let bytes = unsafe { string_at(state, index) };
    match bytes.iter().position(|&c| c == 0) {
        Some(nul) => &bytes[..nul],
        None => bytes,
    }
}

/// Pushes `t[field]` (raw) for the table at `index`; returns its type.
unsafe fn raw_field(state: *mut ffi::lua_State, index: c_int, field: &CStr) -> c_int {
    // SAFETY: `field` is one of the anchored names, so the push does not
    // allocate; a raw get runs no metamethod. `index` is relative to the
    // top before the push, hence the adjustment for negative indices.
    unsafe {
        ffi::lua_pushstring_(state, field.as_ptr() as *const c_char);
        ffi::lua_rawget_(state, if index < 0 { index - 1 } else { index });
        ffi::lua_type(state, -1)
    }
}

/// The most a converted result may hold, whatever `lua-memory-limit` says.
pub(crate) const RESULT_MAX_BYTES: usize = 1 << 30;

/// What a converted result may still cost, in bytes of memory.
pub(crate) struct Conversion {
    left: usize,
    exceeded: bool,
    /// Every error reply made, in order, and whether it was already
    /// counted in the error statistics (Redis's
    /// `ignore_error_stats_update`, set on errors `redis.call` and
    /// `redis.pcall` return): Redis counts each one it sends otherwise,
    /// nested ones included.
    pub(crate) errors: Vec<(Bytes, bool)>,
}

impl Conversion {
    /// The conv for a result under `lua_memory_limit` (0: unset).
    pub(crate) fn new(lua_memory_limit: usize) -> Conversion {
        Conversion {
            left: Conversion::limit(lua_memory_limit),
            exceeded: false,
            errors: Vec::new(),
        }
    }

    /// `lua-memory-limit`, at most [`RESULT_MAX_BYTES`].
    pub(crate) fn limit(lua_memory_limit: usize) -> usize {
        match lua_memory_limit {
            0 => RESULT_MAX_BYTES,
            n => n.min(RESULT_MAX_BYTES),
        }
    }

    /// Takes `cost` bytes; false once the conv is spent.
    fn take(&mut self, cost: usize) -> bool {
        if self.exceeded || cost > self.left {
            self.exceeded = true;
            return false;
        }
        self.left -= cost;
        true
    }

    pub(crate) fn exceeded(&self) -> bool {
        self.exceeded
    }
}

/// Converts the value on top of the stack and pops it
/// (`luaReplyToRedisReply`). `resp` is the protocol the script selected
/// with `redis.setresp`. Once `conv` is spent the walk stops early (the
/// reply is then partial, and the caller must not send it).
///
/// # Safety
/// `state` is the scripting state, outside any Lua call, with the value on
/// top of its stack.
pub(crate) unsafe fn lua_to_reply(state: *mut ffi::lua_State, resp: u8, conv: &mut Conversion) -> Reply {
    // SAFETY: every branch pops exactly the value it converts, and pushes
    // only what it pops again (see the module doc for why nothing raises).
    unsafe {
        let t = ffi::lua_type(state, -1);
        // Room for the four values a map entry needs, as Redis checks.
        if ffi::lua_checkstack(state, 4) == 0 {
            ffi::lua_pop(state, 1);
            let text = Bytes::from_static(b"ERR reached lua stack limit");
            conv.errors.push((text.clone(), false));
            return Reply::Error(text);
        }
        let payload = if t == ffi::LUA_TSTRING { string_at(state, -1).len() } else { 0 };
        // The value's own slot was counted with its array (or is the
        // top-level reply); only its bytes are counted here.
        if !conv.take(payload) {
            ffi::lua_pop(state, 1);
            return Reply::Nil;
        }
        let reply = match t {
            ffi::LUA_TSTRING => Reply::Bulk(Bytes::copy_from_slice(string_at(state, -1))),
            ffi::LUA_TBOOLEAN => {
                let b = ffi::lua_toboolean(state, -1) != 0;
                if resp >= 3 {
                    Reply::Bool(b)
                } else if b {
                    Reply::Int(1)
                } else {
                    Reply::Nil
                }
            }
            ffi::LUA_TNUMBER => Reply::Int(lua_number_to_int(ffi::lua_tonumber(state, -1))),
            ffi::LUA_TTABLE => return table_to_reply(state, resp, conv),
            _ => Reply::Nil,
        };
        ffi::lua_pop(state, 1);
        reply
    }
}

/// The table on top of the stack as a reply; pops it.
unsafe fn table_to_reply(state: *mut ffi::lua_State, resp: u8, conv: &mut Conversion) -> Reply {
    // SAFETY: as `lua_to_reply`; the pops mirror Redis's.
    unsafe {
        if raw_field(state, -1, c"err") == ffi::LUA_TSTRING {
            ffi::lua_pop(state, 1);
            let info = ErrorInfo::of_table(state);
            ffi::lua_pop(state, 1);
            let reply = error_table_reply(info.msg.as_deref().unwrap_or(b"(null)"));
            if let Reply::Error(text) = &reply {
                conv.errors.push((text.clone(), info.counted));
            }
            return reply;
        }
        ffi::lua_pop(state, 1);

        if raw_field(state, -1, c"ok") == ffi::LUA_TSTRING {
            let reply = status_table_reply(string_at(state, -1));
            ffi::lua_pop(state, 2);
            return reply;
        }
        ffi::lua_pop(state, 1);

        if raw_field(state, -1, c"double") == ffi::LUA_TNUMBER {
            let reply = Reply::Double(ffi::lua_tonumber(state, -1));
            ffi::lua_pop(state, 2);
            return reply;
        }
        ffi::lua_pop(state, 1);

        if raw_field(state, -1, c"big_number") == ffi::LUA_TSTRING {
            // Redis maps line breaks here too, though RESP2 sends it as a bulk.
            let reply = Reply::BigNumber(Bytes::copy_from_slice(&one_line(string_at(state, -1))));
            ffi::lua_pop(state, 2);
            return reply;
        }
        ffi::lua_pop(state, 1);

        if raw_field(state, -1, c"verbatim_string") == ffi::LUA_TTABLE {
            if raw_field(state, -1, c"format") == ffi::LUA_TSTRING {
                if raw_field(state, -2, c"string") == ffi::LUA_TSTRING {
                    // addReplyVerbatim: the format's first three bytes up
                    // to a NUL, padded with spaces.
                    let mut format = [b' '; 3];
                    for (slot, &c) in format.iter_mut().zip(c_string_at(state, -2)) {
                        *slot = c;
                    }
                    let reply = Reply::Verbatim(format, Bytes::copy_from_slice(string_at(state, -1)));
                    ffi::lua_pop(state, 4);
                    return reply;
                }
                ffi::lua_pop(state, 1);
            }
            ffi::lua_pop(state, 1);
        }
        ffi::lua_pop(state, 1);

        if raw_field(state, -1, c"map") == ffi::LUA_TTABLE {
            let n = count_entries(state);
            if !conv.take(n.saturating_mul(size_of::<(Reply, Reply)>())) {
                ffi::lua_pop(state, 2);
                return Reply::Nil;
            }
            let mut pairs = Vec::with_capacity(n);
            ffi::lua_pushnil(state);
            while ffi::lua_next(state, -2) != 0 {
                // Stack: table, map, key, value. Convert a copy of the key,
                // then the value, leaving the key for lua_next.
                ffi::lua_pushvalue(state, -2);
                let key = lua_to_reply(state, resp, conv);
                let value = lua_to_reply(state, resp, conv);
                pairs.push((key, value));
                if conv.exceeded() {
                    ffi::lua_pop(state, 1);
                    break;
                }
            }
            ffi::lua_pop(state, 2);
            return Reply::Map(pairs);
        }
        ffi::lua_pop(state, 1);

        if raw_field(state, -1, c"set") == ffi::LUA_TTABLE {
            let n = count_entries(state);
            if !conv.take(n.saturating_mul(size_of::<Reply>())) {
                ffi::lua_pop(state, 2);
                return Reply::Nil;
            }
            let mut members = Vec::with_capacity(n);
            ffi::lua_pushnil(state);
            while ffi::lua_next(state, -2) != 0 {
                ffi::lua_pop(state, 1);
                ffi::lua_pushvalue(state, -1);
                members.push(lua_to_reply(state, resp, conv));
                if conv.exceeded() {
                    ffi::lua_pop(state, 1);
                    break;
                }
            }
            ffi::lua_pop(state, 2);
            return Reply::Set(members);
        }
        ffi::lua_pop(state, 1);

        // The border Lua reports is the array's length when it has no
        // holes (the usual case); the walk below decides the real length.
        let hint = ffi::lua_objlen(state, -1);
        if !conv.take(hint.saturating_mul(size_of::<Reply>())) {
            ffi::lua_pop(state, 1);
            return Reply::Nil;
        }
        let mut items = Vec::with_capacity(hint);
        let mut j = 1.0;
        while !conv.exceeded() {
            ffi::lua_pushnumber(state, j);
            j += 1.0;
            ffi::lua_rawget_(state, -2);
            if ffi::lua_type(state, -1) == ffi::LUA_TNIL {
                ffi::lua_pop(state, 1);
                break;
            }
            items.push(lua_to_reply(state, resp, conv));
        }
        ffi::lua_pop(state, 1);
        Reply::Array(items)
    }
}

/// How many entries the table on top of the stack has.
unsafe fn count_entries(state: *mut ffi::lua_State) -> usize {
    // SAFETY: a plain lua_next walk; it pushes at most two values, and the
    // caller checked room for four.
    unsafe {
        let mut n = 0usize;
        ffi::lua_pushnil(state);
        while ffi::lua_next(state, -2) != 0 {
            ffi::lua_pop(state, 1);
            n += 1;
        }
        n
    }
}

/// What Redis's `luaExtractErrorInformation` reads from an error value.
#[derive(Default)]
pub(crate) struct ErrorInfo {
    pub msg: Option<Vec<u8>>,
    pub source: Option<Vec<u8>>,
    pub line: Option<Vec<u8>>,
    /// `ignore_error_stats_update`: the error was counted where it arose.
    pub counted: bool,
}

impl ErrorInfo {
    /// The error value on top of the stack (left there). A string becomes
    /// `ERR <string>`; a table gives its `err`, `source` and `line`
    /// fields, strings or numbers, each cut at a NUL as Redis's C strings
    /// are. Fields are read raw: Redis's `lua_getfield` would also consult
    /// a metatable the script gave its error table, which could run Lua
    /// code outside any protected call.
    ///
    /// # Safety
    /// As `lua_to_reply`.
    pub(crate) unsafe fn of_table(state: *mut ffi::lua_State) -> ErrorInfo {
        // SAFETY: raw reads of anchored field names; numbers are formatted
        // here, not converted in place by Lua (which would allocate).
        unsafe {
            let mut info = ErrorInfo::default();
            match ffi::lua_type(state, -1) {
                ffi::LUA_TSTRING => {
                    let mut msg = b"ERR ".to_vec();
                    msg.extend_from_slice(c_string_at(state, -1));
                    info.msg = Some(msg);
                    return info;
                }
                ffi::LUA_TNUMBER => {
                    let mut msg = b"ERR ".to_vec();
                    msg.extend_from_slice(crate::numfmt::fmt_g(ffi::lua_tonumber(state, -1), 14).as_bytes());
                    info.msg = Some(msg);
                    return info;
                }
                ffi::LUA_TTABLE => {}
                _ => return info,
            }
            let text = |state: *mut ffi::lua_State, field: &CStr| -> Option<Vec<u8>> {
                let t = raw_field(state, -1, field);
                let value = match t {
                    ffi::LUA_TSTRING => Some(c_string_at(state, -1).to_vec()),
                    ffi::LUA_TNUMBER => Some(crate::numfmt::fmt_g(ffi::lua_tonumber(state, -1), 14).into_bytes()),
                    _ => None,
                };
                ffi::lua_pop(state, 1);
                value
            };
            info.msg = text(state, c"err");
            info.source = text(state, c"source");
            info.line = text(state, c"line");
            if raw_field(state, -1, c"ignore_error_stats_update") == ffi::LUA_TBOOLEAN {
                info.counted = ffi::lua_toboolean(state, -1) != 0;
            }
            ffi::lua_pop(state, 1);
            info
        }
    }

    /// A failed script's reply: the message, then where it was raised
    /// (`script: <sha>, on <source>:<line>.`) when known, on one line
    /// (`addReplyErrorSdsExSafe`: line breaks as spaces, none trimmed).
    pub(crate) fn into_reply(self, sha: &str) -> Reply {
        let mut full = self.msg.unwrap_or_else(|| b"(null)".to_vec());
        if let (Some(source), Some(line)) = (self.source, self.line) {
            full.extend_from_slice(format!(" script: {sha}, on ").as_bytes());
            full.extend_from_slice(&source);
            full.push(b':');
            full.extend_from_slice(&line);
            full.push(b'.');
        }
        Reply::Error(Bytes::copy_from_slice(&one_line(&full)))
    }
}

/// An uncaught error's reply from its parts (native scripts raise errors
/// without a Lua value).
pub(crate) fn located_error(msg: String, sha: &str, place: Option<(&str, &str)>) -> Reply {
    let info = ErrorInfo {
        msg: Some(msg.into_bytes()),
        source: place.map(|(s, _)| s.as_bytes().to_vec()),
        line: place.map(|(_, l)| l.as_bytes().to_vec()),
        counted: false,
    };
    info.into_reply(sha)
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
