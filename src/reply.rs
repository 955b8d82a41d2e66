//! Replies as values, and their encoding for RESP2 and RESP3.
//!
//! Handlers return a [`Reply`]; the engine encodes it for the protocol the
//! client negotiated (HELLO 2/3). The RESP3-only shapes (map, set, double,
//! boolean, push, verbatim, null) degrade to their RESP2 forms exactly as
//! Redis 7.0's `addReply*` functions do, so one handler serves both
//! protocols.
//!
//! Status and error lines end at their first CR or LF, so no text that
//! quotes client bytes may carry one: Redis writes a space for each
//! (`sdsmapchars(s, "\r\n", "  ", 2)` in `addReplyErrorFormat`,
//! `addReplyStatusSafe` and the unknown-command texts), or the rest of the
//! line would reach the client as the reply to its next command. The
//! encoder applies [`one_line`] to every such line, so no reply can break
//! the stream whoever built it; constructors that know Redis's exact rules
//! for a text (trimming, see [`trim_line_breaks`]) apply them first.

use std::borrow::Cow;

use bytes::{BufMut, Bytes, BytesMut};

use crate::numfmt;

/// One reply to a command, or a message pushed to a client.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `+text`: status replies (`OK`, `PONG`, `QUEUED`, type names).
    Status(Bytes),
    /// `-text`: the full error text, prefix included (`ERR …`, `WRONGTYPE …`).
    Error(Bytes),
    Int(i64),
    Bulk(Bytes),
    /// A missing value: `$-1` in RESP2, `_` in RESP3.
    Nil,
    /// A missing aggregate: `*-1` in RESP2, `_` in RESP3.
    NilArray,
    Array(Vec<Reply>),
    /// RESP3 map; a flat array of key, value, key, value… in RESP2.
    Map(Vec<(Reply, Reply)>),
    /// RESP3 set; an array in RESP2.
    Set(Vec<Reply>),
    /// RESP3 double; a bulk string formatted `%.17g` in RESP2.
    Double(f64),
    /// A double as Redis's `addReplyHumanLongDouble` sends it (GEOPOS,
    /// WITHCOORD): `%.17Lf` without trailing zeros, as a RESP3 double or
    /// a RESP2 bulk string.
    HumanDouble(f64),
    /// RESP3 boolean; the integer 1 or 0 in RESP2.
    Bool(bool),
    /// RESP3 verbatim string with its three-byte format (`txt`, `mkd`);
    /// a bulk string in RESP2.
    Verbatim([u8; 3], Bytes),
    /// RESP3 push (pub/sub messages, invalidations); an array in RESP2.
    Push(Vec<Reply>),
    /// RESP3 big number; a bulk string in RESP2.
    BigNumber(Bytes),
    /// Several replies to one command, sent back to back: SUBSCRIBE and
    /// friends answer once per channel.
    Many(Vec<Reply>),
    /// Bytes already encoded, sent as they are whatever the protocol:
    /// Redis writes the null of a flush invalidation in the tracking
    /// client's protocol, whoever receives it.
    Raw(Bytes),
}

impl Reply {
    pub const OK: Reply = Reply::Status(Bytes::from_static(b"OK"));

    pub fn status(s: &'static str) -> Reply {
        Reply::Status(Bytes::from_static(s.as_bytes()))
    }

    pub fn bulk(b: impl Into<Bytes>) -> Reply {
        Reply::Bulk(b.into())
    }

    pub fn bulk_str(s: &str) -> Reply {
        Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
    }

    pub fn bulk_static(s: &'static str) -> Reply {
        Reply::Bulk(Bytes::from_static(s.as_bytes()))
    }

    /// A bulk reply for an optional value: nil when absent.
    pub fn opt_bulk(b: Option<Bytes>) -> Reply {
        b.map_or(Reply::Nil, Reply::Bulk)
    }

    pub fn bulks<I: IntoIterator<Item = Bytes>>(items: I) -> Reply {
        Reply::Array(items.into_iter().map(Reply::Bulk).collect())
    }

    /// A verbatim string in the `txt` format (INFO, CLIENT INFO …).
    pub fn verbatim_txt(text: impl Into<Bytes>) -> Reply {
        Reply::Verbatim(*b"txt", text.into())
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// Every error in this reply, those inside arrays (a transaction's)
    /// too, in order.
    pub fn collect_errors(&self, out: &mut Vec<Bytes>) {
        match self {
            Reply::Error(e) => out.push(e.clone()),
            Reply::Array(items) | Reply::Many(items) => items.iter().for_each(|r| r.collect_errors(out)),
            _ => {}
        }
    }

    /// Encodes only the pub/sub pushes in this reply (subscription
    /// confirmations): what a client whose replies are off still gets, as
    /// Redis's CLIENT_PUSHING lets them through.
    pub fn encode_pushes(&self, resp: u8, out: &mut BytesMut) {
        match self {
            Reply::Push(_) => self.encode(resp, out),
            Reply::Many(replies) => replies.iter().for_each(|r| r.encode_pushes(resp, out)),
            _ => {}
        }
    }

    /// Appends this reply, encoded for protocol `resp` (2 or 3), to `out`.
    pub fn encode(&self, resp: u8, out: &mut BytesMut) {
        match self {
            Reply::Status(s) => line(out, b'+', s),
            Reply::Error(e) => put_error(out, e),
            Reply::Int(n) => {
                out.put_u8(b':');
                put_int(out, *n);
                out.put_slice(b"\r\n");
            }
            Reply::Bulk(b) => bulk(out, b),
            Reply::Nil => out.put_slice(if resp >= 3 { b"_\r\n" } else { b"$-1\r\n" }),
            Reply::NilArray => out.put_slice(if resp >= 3 { b"_\r\n" } else { b"*-1\r\n" }),
            Reply::Array(items) => {
                header(out, b'*', items.len());
                for r in items {
                    r.encode(resp, out);
                }
            }
            Reply::Set(items) => {
                header(out, if resp >= 3 { b'~' } else { b'*' }, items.len());
                for r in items {
                    r.encode(resp, out);
                }
            }
            Reply::Push(items) => {
                header(out, if resp >= 3 { b'>' } else { b'*' }, items.len());
                for r in items {
                    r.encode(resp, out);
                }
            }
            Reply::BigNumber(n) => {
                if resp >= 3 {
                    line(out, b'(', n);
                } else {
                    bulk(out, n);
                }
            }
            Reply::Many(replies) => {
                for r in replies {
                    r.encode(resp, out);
                }
            }
            Reply::Raw(bytes) => out.put_slice(bytes),
            Reply::Map(pairs) => {
                if resp >= 3 {
                    header(out, b'%', pairs.len());
                } else {
                    header(out, b'*', pairs.len() * 2);
                }
                for (k, v) in pairs {
                    k.encode(resp, out);
                    v.encode(resp, out);
                }
            }
            Reply::Double(d) => {
                if resp >= 3 {
                    out.put_u8(b',');
                    out.put_slice(numfmt::resp3_double(*d).as_bytes());
                    out.put_slice(b"\r\n");
                } else {
                    bulk(out, numfmt::reply_double(*d).as_bytes());
                }
            }
            Reply::HumanDouble(d) => {
                let text = numfmt::human_double(*d);
                if resp >= 3 {
                    out.put_u8(b',');
                    out.put_slice(text.as_bytes());
                    out.put_slice(b"\r\n");
                } else {
                    bulk(out, text.as_bytes());
                }
            }
            Reply::Bool(b) => {
                if resp >= 3 {
                    out.put_slice(if *b { b"#t\r\n" } else { b"#f\r\n" });
                } else {
                    out.put_slice(if *b { b":1\r\n" } else { b":0\r\n" });
                }
            }
            Reply::Verbatim(format, text) => {
                if resp >= 3 {
                    header(out, b'=', text.len() + 4);
                    out.put_slice(format);
                    out.put_u8(b':');
                    out.put_slice(text);
                    out.put_slice(b"\r\n");
                } else {
                    bulk(out, text);
                }
            }
        }
    }
}

impl Reply {
    /// The length of this reply encoded for protocol `resp`, as
    /// [`encode`](Self::encode) writes it, without encoding it.
    pub fn encoded_len(&self, resp: u8) -> usize {
        let items = |items: &[Reply]| items.iter().map(|r| r.encoded_len(resp)).sum::<usize>();
        match self {
            Reply::Status(s) | Reply::Error(s) => s.len() + 3,
            Reply::Int(n) => itoa::Buffer::new().format(*n).len() + 3,
            Reply::Bulk(b) => bulk_len(b.len()),
            Reply::Nil | Reply::NilArray => {
                if resp >= 3 {
                    3
                } else {
                    5
                }
            }
            Reply::Array(v) | Reply::Set(v) | Reply::Push(v) => header_len(v.len()) + items(v),
            Reply::Many(v) => items(v),
            Reply::Raw(bytes) => bytes.len(),
            Reply::Map(pairs) => {
                let n = if resp >= 3 { pairs.len() } else { pairs.len() * 2 };
                header_len(n) + pairs.iter().map(|(k, v)| k.encoded_len(resp) + v.encoded_len(resp)).sum::<usize>()
            }
            Reply::Double(d) => {
                if resp >= 3 {
                    numfmt::resp3_double(*d).len() + 3
                } else {
                    bulk_len(numfmt::reply_double(*d).len())
                }
            }
            Reply::HumanDouble(d) => {
                let len = numfmt::human_double(*d).len();
                if resp >= 3 { len + 3 } else { bulk_len(len) }
            }
            Reply::Bool(_) => 4,
            Reply::Verbatim(_, text) => {
                if resp >= 3 {
                    bulk_len(text.len() + 4)
                } else {
                    bulk_len(text.len())
                }
            }
            Reply::BigNumber(n) => {
                if resp >= 3 {
                    n.len() + 3
                } else {
                    bulk_len(n.len())
                }
            }
        }
    }
}

/// `<type><len>\r\n`.
fn header_len(len: usize) -> usize {
    itoa::Buffer::new().format(len).len() + 3
}

/// `$<len>\r\n<data>\r\n`.
fn bulk_len(len: usize) -> usize {
    header_len(len) + len + 2
}

fn put_int(out: &mut BytesMut, n: i64) {
    let mut buf = itoa::Buffer::new();
    out.put_slice(buf.format(n).as_bytes());
}

fn header(out: &mut BytesMut, kind: u8, len: usize) {
    out.put_u8(kind);
    let mut buf = itoa::Buffer::new();
    out.put_slice(buf.format(len).as_bytes());
    out.put_slice(b"\r\n");
}

/// True for the bytes a status or error line cannot hold.
fn is_line_break(c: u8) -> bool {
    c == b'\r' || c == b'\n'
}

/// `text` with every CR and LF replaced by a space, as Redis's
/// `sdsmapchars(s, "\r\n", "  ", 2)` does before sending a status or
/// error line. Borrows when there is nothing to replace.
pub fn one_line(text: &[u8]) -> Cow<'_, [u8]> {
    if memchr::memchr2(b'\r', b'\n', text).is_none() {
        return Cow::Borrowed(text);
    }
    Cow::Owned(text.iter().map(|&c| if is_line_break(c) { b' ' } else { c }).collect())
}

/// `text` without the CRs and LFs at either end: what Redis's
/// `addReplyErrorFormat` does to a formatted text (`sdstrim(s, "\r\n")`)
/// before [`one_line`].
pub fn trim_line_breaks(text: &[u8]) -> &[u8] {
    let start = text.iter().position(|&c| !is_line_break(c)).unwrap_or(text.len());
    let end = text.iter().rposition(|&c| !is_line_break(c)).map_or(start, |i| i + 1);
    &text[start..end]
}

/// Appends the error line `-<text>\r\n` (the same in RESP2 and RESP3),
/// line breaks in `text` written as spaces.
pub fn put_error(out: &mut BytesMut, text: &[u8]) {
    line(out, b'-', text);
}

fn line(out: &mut BytesMut, kind: u8, text: &[u8]) {
    let text = one_line(text);
    out.reserve(text.len() + 3);
    out.put_u8(kind);
    out.put_slice(&text);
    out.put_slice(b"\r\n");
}

fn bulk(out: &mut BytesMut, b: &[u8]) {
    header(out, b'$', b.len());
    out.put_slice(b);
    out.put_slice(b"\r\n");
}

impl From<i64> for Reply {
    fn from(n: i64) -> Reply {
        Reply::Int(n)
    }
}

impl From<usize> for Reply {
    fn from(n: usize) -> Reply {
        Reply::Int(n as i64)
    }
}

impl From<bool> for Reply {
    /// Redis's many "1 if it happened, 0 if not" integer replies.
    fn from(b: bool) -> Reply {
        Reply::Int(b as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(r: &Reply, resp: u8) -> Vec<u8> {
        let mut out = BytesMut::new();
        r.encode(resp, &mut out);
        out.to_vec()
    }

    #[test]
    fn map_is_a_flat_array_in_resp2() {
        let m = Reply::Map(vec![(Reply::bulk_static("a"), Reply::Int(1))]);
        assert_eq!(enc(&m, 2), b"*2\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(enc(&m, 3), b"%1\r\n$1\r\na\r\n:1\r\n");
    }

    #[test]
    fn nil_shapes_differ_by_protocol() {
        assert_eq!(enc(&Reply::Nil, 2), b"$-1\r\n");
        assert_eq!(enc(&Reply::NilArray, 2), b"*-1\r\n");
        assert_eq!(enc(&Reply::Nil, 3), b"_\r\n");
    }

    #[test]
    fn line_breaks_in_status_and_error_lines_become_spaces() {
        let err = Reply::Error(Bytes::from_static(b"ERR unknown command 'a\r\n+PWNED'"));
        assert_eq!(enc(&err, 2), b"-ERR unknown command 'a  +PWNED'\r\n");
        assert_eq!(enc(&Reply::Status(Bytes::from_static(b"a\rb\nc")), 3), b"+a b c\r\n");
        assert_eq!(enc(&Reply::BigNumber(Bytes::from_static(b"1\n2")), 3), b"(1 2\r\n");
    }

    #[test]
    fn trimming_takes_line_breaks_from_the_ends_only() {
        assert_eq!(trim_line_breaks(b"\r\nUnsupported option x\r\ny\n\r"), b"Unsupported option x\r\ny");
        assert_eq!(trim_line_breaks(b"\r\n\r"), b"");
        assert_eq!(one_line(b"a\r\nb"), &b"a  b"[..]);
    }

    #[test]
    fn encoded_len_is_the_length_encode_writes() {
        let replies = [
            Reply::OK,
            Reply::Error(Bytes::from_static(b"ERR x")),
            Reply::Int(-1234),
            Reply::bulk_static("hello"),
            Reply::Nil,
            Reply::NilArray,
            Reply::Array(vec![Reply::bulk_static("a"); 12]),
            Reply::Map(vec![(Reply::bulk_static("k"), Reply::Double(1.5))]),
            Reply::Set(vec![Reply::Int(1), Reply::Bool(true)]),
            Reply::Double(f64::INFINITY),
            Reply::Verbatim(*b"txt", Bytes::from_static(b"text")),
            Reply::Push(vec![Reply::bulk_static("message")]),
            Reply::BigNumber(Bytes::from_static(b"123456789012345678901234567890")),
            Reply::Many(vec![Reply::OK, Reply::Int(7)]),
        ];
        for r in &replies {
            for resp in [2, 3] {
                assert_eq!(r.encoded_len(resp), enc(r, resp).len(), "{r:?} in RESP{resp}");
            }
        }
    }

    #[test]
    fn double_is_bulk_in_resp2() {
        assert_eq!(enc(&Reply::Double(1.5), 2), b"$3\r\n1.5\r\n");
        assert_eq!(enc(&Reply::Double(1.5), 3), b",1.5\r\n");
    }
}
