//! A zero-copy scanner for server replies: finds where one complete reply
//! ends in a read buffer and says just what a workload needs of it (nil,
//! an integer, an error's text, an aggregate's length and first element),
//! borrowing from the buffer and never allocating.
//!
//! Nested elements are skipped with a single counter of elements still to
//! come (each aggregate adds its children), so no stack is kept and any
//! nesting depth costs nothing. Every RESP2 and RESP3 type Redis sends is
//! understood; RESP3 attributes (`|`) are skipped together with the value
//! they decorate, and streamed strings (`$?`), which Redis never sends, are
//! a protocol error.

use std::fmt;

/// The top level of one reply.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reply<'a> {
    /// `$-1`, `*-1` or RESP3 `_`.
    Nil,
    Integer(i64),
    /// `+…`: the status text.
    Simple(&'a [u8]),
    /// `-…` or RESP3 `!`: the error text, code included (`NOSCRIPT No matching…`).
    Error(&'a [u8]),
    /// `$…` or RESP3 `=` (verbatim text, format prefix included).
    Bulk(&'a [u8]),
    /// RESP3 `#t` / `#f`.
    Boolean(bool),
    /// RESP3 `,` and `(`: the number as sent.
    Number(&'a [u8]),
    /// `*`, `~` (set) or `%` (map, `len` counting pairs): the element count
    /// and, when the first element is a string, its bytes (None when an
    /// attribute precedes it).
    Aggregate {
        len: usize,
        first: Option<&'a [u8]>,
    },
    /// RESP3 `>`: an out-of-band push (pub/sub message, invalidation).
    Push {
        len: usize,
        first: Option<&'a [u8]>,
    },
}

impl Reply<'_> {
    /// The integer, also from a bulk string holding one (`"1"`).
    pub fn as_integer(&self) -> Option<i64> {
        match *self {
            Reply::Integer(n) => Some(n),
            Reply::Bulk(b) | Reply::Simple(b) => parse_i64(b),
            _ => None,
        }
    }
}

/// The input is not RESP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProtocolError {
    pub what: &'static str,
    /// Offset of the offending element in the buffer given to [`scan`].
    pub at: usize,
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "protocol error at byte {}: {}", self.at, self.what)
    }
}

/// Largest bulk string accepted: Redis's own `proto-max-bulk-len` ceiling.
const MAX_BULK: i64 = 512 * 1024 * 1024;

/// One scanned element: what it is, where the next one starts, and how
/// many nested elements follow it.
struct Element<'a> {
    reply: Reply<'a>,
    end: usize,
    children: u64,
    /// True for an attribute, whose decorated value still follows.
    attribute: bool,
}

/// Scans one complete reply at the start of `buf`: `Ok(Some((reply, len)))`
/// when all `len` bytes of it are there, `Ok(None)` when more must be read.
pub fn scan(buf: &[u8]) -> Result<Option<(Reply<'_>, usize)>, ProtocolError> {
    let mut pos = 0;
    loop {
        let Some(head) = element(buf, pos)? else { return Ok(None) };
        let mut reply = head.reply;
        let mut pending = head.children;
        pos = head.end;
        let mut first_pending = matches!(reply, Reply::Aggregate { len: 1.., .. } | Reply::Push { len: 1.., .. });
        while pending > 0 {
            let Some(e) = element(buf, pos)? else { return Ok(None) };
            if first_pending {
                // The element right after the header is the first one,
                // unless it is an attribute: then the first is not told.
                first_pending = false;
                if let (false, Reply::Bulk(s) | Reply::Simple(s)) = (e.attribute, e.reply) {
                    reply = with_first(reply, s);
                }
            }
            pending = pending - 1 + e.children + u64::from(e.attribute);
            pos = e.end;
        }
        if !head.attribute {
            return Ok(Some((reply, pos)));
        }
        // An attribute decorates the reply that follows it: scan that too.
    }
}

fn with_first<'a>(reply: Reply<'a>, s: &'a [u8]) -> Reply<'a> {
    match reply {
        Reply::Aggregate { len, .. } => Reply::Aggregate { len, first: Some(s) },
        Reply::Push { len, .. } => Reply::Push { len, first: Some(s) },
        other => other,
    }
}

/// The element starting at `pos`, or None when its bytes are not all there.
fn element(buf: &[u8], pos: usize) -> Result<Option<Element<'_>>, ProtocolError> {
    let Some(&kind) = buf.get(pos) else { return Ok(None) };
    let err = |what| ProtocolError { what, at: pos };
    let Some(line_end) = line_end(buf, pos + 1).map_err(|()| err("CR not followed by LF"))? else {
        return Ok(None);
    };
    let line = &buf[pos + 1..line_end];
    let end = line_end + 2;
    let leaf = |reply| {
        Ok(Some(Element {
            reply,
            end,
            children: 0,
            attribute: false,
        }))
    };
    let count = |line: &[u8]| -> Result<Option<u64>, ProtocolError> {
        match parse_i64(line) {
            Some(-1) => Ok(None),
            Some(n) if n >= 0 => Ok(Some(n as u64)),
            _ => Err(err("bad element count")),
        }
    };
    match kind {
        b'+' => leaf(Reply::Simple(line)),
        b'-' => leaf(Reply::Error(line)),
        b':' => leaf(Reply::Integer(parse_i64(line).ok_or_else(|| err("bad integer"))?)),
        b'_' => leaf(Reply::Nil),
        b'#' => match line {
            b"t" => leaf(Reply::Boolean(true)),
            b"f" => leaf(Reply::Boolean(false)),
            _ => Err(err("bad boolean")),
        },
        b',' | b'(' => leaf(Reply::Number(line)),
        b'$' | b'!' | b'=' => {
            if line.first() == Some(&b'?') {
                return Err(err("streamed strings are not supported"));
            }
            let len = match parse_i64(line) {
                Some(-1) if kind == b'$' => return leaf(Reply::Nil),
                Some(n) if (0..=MAX_BULK).contains(&n) => n as usize,
                _ => return Err(err("bad string length")),
            };
            let data_end = end + len;
            if buf.len() < data_end + 2 {
                return Ok(None);
            }
            if &buf[data_end..data_end + 2] != b"\r\n" {
                return Err(err("string not followed by CRLF"));
            }
            let data = &buf[end..data_end];
            let reply = if kind == b'!' { Reply::Error(data) } else { Reply::Bulk(data) };
            Ok(Some(Element {
                reply,
                end: data_end + 2,
                children: 0,
                attribute: false,
            }))
        }
        b'*' | b'~' | b'%' | b'>' | b'|' => {
            let Some(n) = count(line)? else {
                return if kind == b'*' {
                    leaf(Reply::Nil)
                } else {
                    Err(err("bad element count"))
                };
            };
            let children = if matches!(kind, b'%' | b'|') { n * 2 } else { n };
            let len = n as usize;
            let reply = if kind == b'>' {
                Reply::Push { len, first: None }
            } else {
                Reply::Aggregate { len, first: None }
            };
            Ok(Some(Element {
                reply,
                end,
                children,
                attribute: kind == b'|',
            }))
        }
        _ => Err(err("unknown reply type")),
    }
}

/// Index of the `\r` ending the line that starts at `from`, None while
/// the line is incomplete.
fn line_end(buf: &[u8], from: usize) -> Result<Option<usize>, ()> {
    let rest = buf.get(from..).unwrap_or_default();
    let Some(i) = memchr::memchr(b'\r', rest) else { return Ok(None) };
    match rest.get(i + 1) {
        None => Ok(None),
        Some(b'\n') => Ok(Some(from + i)),
        Some(_) => Err(()),
    }
}

/// A decimal i64 as RESP writes it (optional `-`, digits only).
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    let (negative, digits) = match s.split_first()? {
        (b'-', rest) => (true, rest),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    let mut n: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_sub(i64::from(d - b'0'))?;
    }
    if negative { Some(n) } else { n.checked_neg() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(input: &[u8]) -> Reply<'_> {
        let (reply, len) = scan(input).unwrap().unwrap();
        assert_eq!(len, input.len(), "{:?}", String::from_utf8_lossy(input));
        reply
    }

    #[test]
    fn resp2_scalars() {
        assert_eq!(whole(b"+OK\r\n"), Reply::Simple(b"OK"));
        assert_eq!(
            whole(b"-NOSCRIPT No matching script\r\n"),
            Reply::Error(b"NOSCRIPT No matching script")
        );
        assert_eq!(whole(b":-29998\r\n"), Reply::Integer(-29998));
        assert_eq!(whole(b"$-1\r\n"), Reply::Nil);
        assert_eq!(whole(b"*-1\r\n"), Reply::Nil);
        assert_eq!(whole(b"$0\r\n\r\n"), Reply::Bulk(b""));
        assert_eq!(whole(b"$4\r\na\r\nb\r\n"), Reply::Bulk(b"a\r\nb"));
    }

    #[test]
    fn integer_limits() {
        assert_eq!(whole(b":9223372036854775807\r\n"), Reply::Integer(i64::MAX));
        assert_eq!(whole(b":-9223372036854775808\r\n"), Reply::Integer(i64::MIN));
        assert!(scan(b":9223372036854775808\r\n").is_err());
        assert!(scan(b":12a\r\n").is_err());
        assert!(scan(b":\r\n").is_err());
    }

    #[test]
    fn resp3_types() {
        assert_eq!(whole(b"_\r\n"), Reply::Nil);
        assert_eq!(whole(b"#t\r\n"), Reply::Boolean(true));
        assert_eq!(whole(b"#f\r\n"), Reply::Boolean(false));
        assert_eq!(whole(b",3.14\r\n"), Reply::Number(b"3.14"));
        assert_eq!(
            whole(b"(3492890328409238509324850943850943825024385\r\n"),
            Reply::Number(b"3492890328409238509324850943850943825024385")
        );
        assert_eq!(whole(b"!21\r\nSYNTAX invalid syntax\r\n"), Reply::Error(b"SYNTAX invalid syntax"));
        assert_eq!(whole(b"=15\r\ntxt:Some string\r\n"), Reply::Bulk(b"txt:Some string"));
        assert_eq!(
            whole(b"%2\r\n+a\r\n:1\r\n+b\r\n:2\r\n"),
            Reply::Aggregate { len: 2, first: Some(b"a") }
        );
        assert_eq!(
            whole(b"~2\r\n$1\r\nx\r\n$1\r\ny\r\n"),
            Reply::Aggregate { len: 2, first: Some(b"x") }
        );
        assert_eq!(
            whole(b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\n0\r\n"),
            Reply::Push {
                len: 3,
                first: Some(b"message")
            }
        );
    }

    #[test]
    fn nested_arrays_are_skipped_whole() {
        let input = b"*3\r\n*2\r\n:1\r\n*1\r\n$3\r\nabc\r\n%1\r\n+k\r\n*0\r\n$-1\r\n";
        assert_eq!(whole(input), Reply::Aggregate { len: 3, first: None });
        assert_eq!(whole(b"*0\r\n"), Reply::Aggregate { len: 0, first: None });
        // Deep nesting costs no stack.
        let mut deep = b"*1\r\n".repeat(100_000);
        deep.extend(b":7\r\n");
        assert_eq!(whole(&deep), Reply::Aggregate { len: 1, first: None });
    }

    #[test]
    fn first_element_of_a_pubsub_message() {
        let input = b"*3\r\n$7\r\nmessage\r\n$29\r\nredisson_lock__channel:{flow}\r\n$1\r\n0\r\n";
        assert_eq!(
            whole(input),
            Reply::Aggregate {
                len: 3,
                first: Some(b"message")
            }
        );
    }

    #[test]
    fn attributes_are_skipped_with_the_value_they_decorate() {
        let input = b"|1\r\n+key-popularity\r\n%1\r\n$1\r\na\r\n,0.19\r\n*2\r\n:2039123\r\n:9543892\r\n";
        assert_eq!(whole(input), Reply::Aggregate { len: 2, first: None });
        // Inside an aggregate, an attribute hides which element is first.
        let nested = b"*2\r\n|1\r\n+ttl\r\n:3600\r\n$1\r\na\r\n$1\r\nb\r\n";
        assert_eq!(whole(nested), Reply::Aggregate { len: 2, first: None });
    }

    #[test]
    fn every_incomplete_prefix_asks_for_more() {
        let replies: &[&[u8]] = &[
            b"+OK\r\n",
            b":12\r\n",
            b"$5\r\nhello\r\n",
            b"*2\r\n$1\r\na\r\n*1\r\n:1\r\n",
            b"%1\r\n+k\r\n_\r\n",
            b"|1\r\n+a\r\n+b\r\n:1\r\n",
            b">2\r\n$1\r\na\r\n$1\r\nb\r\n",
        ];
        for reply in replies {
            for cut in 0..reply.len() {
                assert_eq!(scan(&reply[..cut]), Ok(None), "{:?} cut at {cut}", String::from_utf8_lossy(reply));
            }
        }
    }

    #[test]
    fn consecutive_replies_are_scanned_one_at_a_time() {
        let buf = b"$-1\r\n:30000\r\n-ERR x\r\n+PONG\r\n";
        let mut pos = 0;
        let mut seen = Vec::new();
        while let Some((reply, len)) = scan(&buf[pos..]).unwrap() {
            seen.push(format!("{reply:?}"));
            pos += len;
        }
        assert_eq!(pos, buf.len());
        assert_eq!(
            seen,
            ["Nil", "Integer(30000)", "Error([69, 82, 82, 32, 120])", "Simple([80, 79, 78, 71])"]
        );
    }

    #[test]
    fn malformed_input_is_an_error_not_a_panic() {
        assert_eq!(scan(b"?x\r\n").unwrap_err().what, "unknown reply type");
        assert!(scan(b"$3\r\nabcde\r\n").is_err());
        assert!(scan(b"$-2\r\n").is_err());
        assert!(scan(b"*-2\r\n").is_err());
        assert!(scan(b"%-1\r\n").is_err());
        assert!(scan(b"#x\r\n").is_err());
        assert!(scan(b"+OK\rx\n").is_err());
        assert!(scan(b"$?\r\n").is_err());
        assert!(scan(b"$99999999999\r\n").is_err());
        assert_eq!(scan(b"*1\r\n?\r\n").unwrap_err().at, 4);
    }

    #[test]
    fn integers_in_bulk_strings() {
        assert_eq!(Reply::Bulk(b"42").as_integer(), Some(42));
        assert_eq!(Reply::Bulk(b"4x").as_integer(), None);
        assert_eq!(Reply::Nil.as_integer(), None);
    }
}
