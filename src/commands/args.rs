//! A cursor over a command's arguments, shared by every handler so option
//! parsing (`NX`, `PX ms`, `WITHSCORES`, `LIMIT off count` …) reads the same
//! way everywhere and produces Redis's errors for bad values.

use bytes::Bytes;

use crate::error::{CmdError, CmdResult};
use crate::numfmt;

pub struct Args<'a> {
    argv: &'a [Bytes],
    pos: usize,
}

impl<'a> Args<'a> {
    /// A cursor positioned after the command name.
    pub fn new(argv: &'a [Bytes]) -> Args<'a> {
        Args { argv, pos: 1 }
    }

    /// A cursor positioned after a subcommand (`CLIENT SETNAME …`).
    pub fn after_subcommand(argv: &'a [Bytes]) -> Args<'a> {
        Args { argv, pos: 2 }
    }

    pub fn remaining(&self) -> usize {
        self.argv.len().saturating_sub(self.pos)
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    pub fn peek(&self) -> Option<&'a Bytes> {
        self.argv.get(self.pos)
    }

    #[allow(clippy::should_implement_trait)] // a cursor, not an iterator: it also peeks and parses
    pub fn next(&mut self) -> Option<&'a Bytes> {
        let a = self.argv.get(self.pos)?;
        self.pos += 1;
        Some(a)
    }

    /// The next argument, or a syntax error if there is none.
    pub fn req(&mut self) -> CmdResult<&'a Bytes> {
        self.next().ok_or_else(CmdError::syntax)
    }

    /// Consumes the next argument if it equals `keyword`, ignoring case.
    pub fn eat(&mut self, keyword: &str) -> bool {
        match self.peek() {
            Some(a) if a.eq_ignore_ascii_case(keyword.as_bytes()) => {
                self.pos += 1;
                true
            }
            _ => false,
        }
    }

    /// Everything not consumed yet.
    pub fn rest(&self) -> &'a [Bytes] {
        &self.argv[self.pos.min(self.argv.len())..]
    }

    pub fn i64(&mut self) -> CmdResult<i64> {
        parse_i64(self.req()?)
    }

    pub fn f64(&mut self) -> CmdResult<f64> {
        parse_f64(self.req()?)
    }
}

/// The next argument's upper-cased text, for matching options.
pub fn upper(a: &[u8]) -> String {
    String::from_utf8_lossy(a).to_ascii_uppercase()
}

/// True if `a` names `keyword` as C's `strcasecmp` compares them: `a` is
/// read up to its first NUL, so `"GET\0x"` is `GET`. For the commands
/// whose options Redis matches that way (the bitmap commands).
pub fn c_keyword(a: &[u8], keyword: &str) -> bool {
    crate::error::c_str(a, usize::MAX).eq_ignore_ascii_case(keyword.as_bytes())
}

pub fn parse_i64(a: &[u8]) -> CmdResult<i64> {
    numfmt::parse_i64(a).ok_or_else(CmdError::not_integer)
}

/// Redis's `getIntFromObjectOrReply` without a message of its own: an
/// integer, then within C's `int`.
pub fn parse_int(a: &[u8]) -> CmdResult<i32> {
    let n = parse_i64(a)?;
    i32::try_from(n).map_err(|_| CmdError::err("value is out of range, value must between -2147483648 and 2147483647"))
}

pub fn parse_f64(a: &[u8]) -> CmdResult<f64> {
    numfmt::parse_f64(a).ok_or_else(CmdError::not_float)
}

/// A count or index that must not be negative, with Redis's message.
pub fn parse_positive(a: &[u8], what: &str) -> CmdResult<i64> {
    let n = parse_i64(a)?;
    if n < 0 {
        return Err(CmdError::out_of_range_positive(what));
    }
    Ok(n)
}

/// A count that must be at least 1, with the command's own message.
pub fn parse_at_least_one(raw: &[u8], msg: &'static str) -> CmdResult<i64> {
    match numfmt::parse_i64(raw) {
        Some(n) if n >= 1 => Ok(n),
        _ => Err(CmdError::err(msg)),
    }
}

/// The optional trailing `COUNT n` of LMPOP / ZMPOP, starting at `argv[from]`.
pub fn parse_mpop_count(argv: &[Bytes], from: usize) -> CmdResult<Option<i64>> {
    let mut count = None;
    let mut i = from;
    while i < argv.len() {
        if count.is_none() && argv[i].eq_ignore_ascii_case(b"COUNT") && i + 1 < argv.len() {
            count = Some(parse_at_least_one(&argv[i + 1], "count should be greater than 0")?);
            i += 2;
        } else {
            return Err(CmdError::syntax());
        }
    }
    Ok(count)
}
