//! Splits a client's input into commands, as Redis's `processMultibulkBuffer`
//! and `processInlineBuffer` do, and decides how the read buffer grows.
//!
//! Redis accepts two request shapes: RESP arrays of bulk strings, and inline
//! commands (a line of words, as telnet and redis-cli in some modes send).
//! Clients notice the exact protocol-error texts and the fact that the
//! connection closes after one, so this parser is written against Redis's
//! request grammar rather than a general RESP decoder: it refuses lengths
//! above the limits before reading their data, and keeps its place across
//! reads so a large pipeline is scanned once.
//!
//! A declared length is never allocated ahead of its data: the read buffer
//! ([`RequestParser::make_room`]) grows with the bytes that arrived, so a
//! connection that announces a 512 MB argument and sends 100 bytes holds
//! those 100 bytes. An argument of at least [`BIG_ARG`] bytes (Redis's
//! PROTO_MBULK_BIG_ARG) is gathered in a buffer of its own that starts at
//! the argument's first byte, is at most twice what has arrived of it,
//! and, once half of it has arrived, is allocated at exactly the
//! argument's size; the complete argument is then taken from that buffer
//! without a copy, as Redis does with its query buffer, and reading goes
//! on in a fresh buffer of the same size, as Redis's does (it expects
//! another such argument; the cron soon shrinks it if none comes). Growing
//! by doubling keeps a 100 MB SET linear: every byte is copied at most
//! twice on its way to the exact buffer.
//!
//! Otherwise the read buffer is Redis's: 16 KB ([`READ_START`], Redis's
//! PROTO_IOBUF_LEN) once the connection sends anything, kept between
//! requests, and shrunk by the cron ([`resize_in_cron`], Redis's
//! `clientsCronResizeQueryBuffer`): to what it holds once the connection
//! has been idle for more than 2 seconds (nothing, for a connection
//! between requests: an idle connection holds no read buffer), or, past
//! 32 KB, to the largest it was filled to since the previous pass when
//! that is less than half of it. CLIENT LIST shows it as `qbuf` (bytes
//! not yet parsed) and `qbuf-free` (room after them).

use bytes::{Buf, Bytes, BytesMut};

use crate::numfmt::parse_i64;

/// The longest inline request or length line Redis accepts (PROTO_INLINE_MAX_SIZE).
pub const INLINE_MAX: usize = 64 * 1024;
/// The read buffer's size once a connection sends anything (Redis's
/// PROTO_IOBUF_LEN): what one read takes.
pub const READ_START: usize = 16 * 1024;
/// How much a read buffer that holds part of a request grows by, at least.
pub const READ_CHUNK: usize = 16 * 1024;
/// Below this much free room the read buffer grows before the next read.
const MIN_READ_ROOM: usize = 1024;
/// Arguments this long or longer get a buffer of their own (PROTO_MBULK_BIG_ARG).
pub const BIG_ARG: usize = 32 * 1024;
/// The cron shrinks a read buffer only if this much of it is free.
const RESIZE_MIN_FREE: usize = 4 * 1024;
/// Past this size the cron shrinks a read buffer to its recent peak
/// (Redis's PROTO_RESIZE_THRESHOLD).
const RESIZE_THRESHOLD: usize = 32 * 1024;
/// Seconds idle after which the cron shrinks a read buffer to its content.
const RESIZE_IDLE_SECS: u64 = 2;
/// Array and bulk size limits for clients that have not authenticated yet
/// (`processMultibulkBuffer`'s `ll > 10 && authRequired(c)` and
/// `ll > 16384 && authRequired(c)`).
const UNAUTH_MULTIBULK_MAX: i64 = 10;
const UNAUTH_BULK_MAX: i64 = 16384;

/// Limits that depend on configuration and on the client's state.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub proto_max_bulk_len: i64,
    pub authenticated: bool,
}

/// A fatal protocol error; the text is sent as `-ERR Protocol error: …` and
/// the connection closes. Bytes, not `str`: one text quotes a byte of the
/// input as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub &'static [u8]);

impl ProtocolError {
    /// The error line's text. Line breaks in it are the encoder's to
    /// replace (`reply::put_error`), as Redis's `addReplyErrorFormat` does.
    pub fn reply_text(&self) -> Vec<u8> {
        [b"ERR Protocol error: ", self.0].concat()
    }
}

/// Parser state kept between reads of one connection.
#[derive(Default)]
pub struct RequestParser {
    /// Inside a multibulk: the arguments read so far and how many remain.
    pending: Option<Multibulk>,
}

struct Multibulk {
    args: Vec<Bytes>,
    /// The bytes of `args`.
    arg_bytes: usize,
    remaining: usize,
    /// The declared length of the bulk being read, once its header is consumed.
    bulk_len: Option<usize>,
}

impl RequestParser {
    /// Takes the next complete command off the front of `buf`.
    ///
    /// `Ok(None)` means more input is needed. Empty requests (an empty line,
    /// `*0`) are skipped silently, as Redis does.
    pub fn next(&mut self, buf: &mut BytesMut, limits: Limits) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        loop {
            if self.pending.is_none() {
                if buf.is_empty() {
                    return Ok(None);
                }
                if buf[0] != b'*' {
                    match inline(buf)? {
                        None => return Ok(None),
                        Some(args) if args.is_empty() => continue,
                        Some(args) => return Ok(Some(args)),
                    }
                }
                let Some(end) = line_end(buf, b"too big mbulk count string")? else {
                    return Ok(None);
                };
                let count = parse_i64(&buf[1..end]);
                buf.advance(end + 2);
                let count = match count {
                    Some(n) if n <= i32::MAX as i64 => n,
                    _ => return Err(ProtocolError(b"invalid multibulk length")),
                };
                if !limits.authenticated && count > UNAUTH_MULTIBULK_MAX {
                    return Err(ProtocolError(b"unauthenticated multibulk length"));
                }
                if count <= 0 {
                    continue;
                }
                let count = count as usize;
                if let Some(args) = small_request(buf, count, limits) {
                    return Ok(Some(args));
                }
                self.pending = Some(Multibulk {
                    // Grows with the arguments that arrive, not with the count.
                    args: Vec::with_capacity(count.min(16)),
                    arg_bytes: 0,
                    remaining: count,
                    bulk_len: None,
                });
            }
            let mb = self.pending.as_mut().expect("pending multibulk");
            while mb.remaining > 0 {
                let len = match mb.bulk_len {
                    Some(len) => len,
                    None => {
                        if buf.is_empty() {
                            return Ok(None);
                        }
                        // Redis looks at the header's first byte only once
                        // the whole line is there.
                        let Some(end) = line_end(buf, b"too big bulk count string")? else {
                            return Ok(None);
                        };
                        if buf[0] != b'$' {
                            return Err(ProtocolError(expected_dollar(buf[0])));
                        }
                        let len = parse_i64(&buf[1..end]);
                        buf.advance(end + 2);
                        let len = match len {
                            Some(n) if n >= 0 && n <= limits.proto_max_bulk_len => n,
                            _ => return Err(ProtocolError(b"invalid bulk length")),
                        };
                        if !limits.authenticated && len > UNAUTH_BULK_MAX {
                            return Err(ProtocolError(b"unauthenticated bulk length"));
                        }
                        mb.bulk_len = Some(len as usize);
                        len as usize
                    }
                };
                if buf.len() < len + 2 {
                    if len >= BIG_ARG && buf.capacity() > 2 * buf.len() {
                        // The first bytes of a big argument, in a read
                        // buffer mostly empty: they move to a buffer of
                        // their own, which `make_room` grows as the data
                        // arrives.
                        *buf = BytesMut::from(&buf[..]);
                    }
                    return Ok(None);
                }
                let arg = if len >= BIG_ARG && buf.len() == len + 2 && buf.capacity() == len + 2 {
                    // The buffer `make_room` sized for exactly this
                    // argument: it becomes the argument, and reading goes
                    // on in a fresh buffer of its size, as in Redis.
                    let arg = buf.split_to(len).freeze();
                    *buf = BytesMut::with_capacity(len + 2);
                    arg
                } else {
                    // Each argument of a request too large for
                    // `small_request` gets its own allocation: a slice of
                    // the read buffer stored as a key or value would keep
                    // the whole buffer alive for as long as the key lives.
                    let arg = Bytes::copy_from_slice(&buf[..len]);
                    // Like Redis, the two bytes after the data are skipped, not checked.
                    buf.advance(len + 2);
                    arg
                };
                mb.arg_bytes += arg.len();
                mb.args.push(arg);
                mb.bulk_len = None;
                mb.remaining -= 1;
            }
            let done = self.pending.take().expect("pending multibulk");
            return Ok(Some(done.args));
        }
    }
}

impl RequestParser {
    /// The declared length of the argument being read, while it is at
    /// least [`BIG_ARG`] long and not complete: it then starts at the
    /// front of the read buffer.
    pub fn big_arg_pending(&self) -> Option<usize> {
        let len = self.pending.as_ref()?.bulk_len?;
        (len >= BIG_ARG).then_some(len)
    }

    /// The arguments read so far of a request not complete yet: how many,
    /// and their bytes (what Redis holds in `argv` while it reads a
    /// multibulk, and counts as the client's `argv-mem`).
    pub fn pending_args(&self) -> (usize, usize) {
        self.pending.as_ref().map_or((0, 0), |mb| (mb.args.len(), mb.arg_bytes))
    }

    /// The declared length of the argument being read, once its header
    /// has been parsed.
    pub fn pending_bulk(&self) -> Option<usize> {
        self.pending.as_ref()?.bulk_len
    }

    /// Makes room in `buf` for the next read. The buffer grows only with
    /// data that has arrived: from 16 KB, by at least [`READ_CHUNK`] when
    /// nearly full of unparsed input, or, for a big argument, to at most
    /// twice what has arrived of it and never past its end, so that its
    /// last step is a buffer of exactly its size.
    pub fn make_room(&self, buf: &mut BytesMut) {
        let spare = buf.capacity() - buf.len();
        if buf.is_empty() {
            if spare < READ_START {
                // Reuses the space already read past when there is enough.
                buf.reserve(READ_START);
            }
            return;
        }
        if let Some(len) = self.big_arg_pending() {
            let whole = len + 2;
            if buf.len() < whole && spare < MIN_READ_ROOM.min(whole - buf.len()) {
                let target = whole.min((2 * buf.len()).max(buf.len() + READ_CHUNK));
                let mut grown = BytesMut::with_capacity(target);
                grown.extend_from_slice(buf);
                *buf = grown;
            }
            return;
        }
        if spare < MIN_READ_ROOM {
            buf.reserve(buf.len().max(READ_CHUNK));
        }
    }
}

/// Once its requests are parsed, what is left of the read buffer (a
/// partial request, or nothing) moves back to the start of its
/// allocation, as Redis's `sdsrange` moves it, so that all the rest is
/// room for the next read (`qbuf-free`). Never allocates, and copies only
/// what fits in the bytes parsed before it: at most as much as was read.
pub fn rewind(buf: &mut BytesMut) {
    // Asking for more than the room after the unparsed bytes takes back
    // the parsed ones, if there are any and the move does not overlap.
    let _ = buf.try_reclaim(buf.capacity() - buf.len() + 1);
}

/// Redis's `clientsCronResizeQueryBuffer`, for a read buffer filled to at
/// most `peak` bytes since the previous pass, of a connection idle for
/// `idle_secs` whole seconds, that may be in the middle of an argument
/// (`pending_bulk`, its declared length): if more than 4 KB of it is free,
/// it shrinks to what it holds after more than 2 seconds idle, or, past
/// 32 KB and twice the peak, to the largest of what it holds, the peak and
/// the argument's length. Unlike Redis it never grows here: an argument's
/// length is not allocated ahead of its data. Returns the peak to start
/// the next pass from, as Redis resets it: what the buffer holds, or the
/// argument's length if that is more.
pub fn resize_in_cron(buf: &mut BytesMut, peak: usize, idle_secs: u64, pending_bulk: Option<usize>) -> usize {
    let size = buf.capacity();
    let len = buf.len();
    let bulk = pending_bulk.unwrap_or(0);
    if size - len > RESIZE_MIN_FREE {
        let target = if idle_secs > RESIZE_IDLE_SECS {
            len
        } else if size > RESIZE_THRESHOLD && size / 2 > peak {
            len.max(peak).max(bulk)
        } else {
            size
        };
        if target < size {
            shrink(buf, target);
        }
    }
    len.max(bulk)
}

/// Moves what `buf` holds to an allocation of `size` bytes (none if 0).
fn shrink(buf: &mut BytesMut, size: usize) {
    let mut smaller = BytesMut::with_capacity(size);
    smaller.extend_from_slice(buf);
    *buf = smaller;
}

pub use crate::request::SMALL_REQUEST;

/// A request of `count` arguments that is already complete in `buf`,
/// well formed and at most [`SMALL_REQUEST`] bytes long, taken off `buf`
/// with its arguments slicing one copy of it: one allocation instead of
/// one per argument (EVALSHA of a Redisson lock script has six or more).
/// What outlives the command (stored values, channel names, watched keys,
/// client names) is copied out with `db::value::owned`, so nothing kept
/// keeps a request alive. None, having consumed nothing, for anything
/// else: the incremental parse handles it and reports its errors.
fn small_request(buf: &mut BytesMut, count: usize, limits: Limits) -> Option<Vec<Bytes>> {
    let mut spans = [(0usize, 0usize); 16];
    if count > spans.len() {
        return None;
    }
    let mut at = 0;
    for span in spans.iter_mut().take(count) {
        if buf.get(at) != Some(&b'$') {
            return None;
        }
        let end = at + memchr::memchr(b'\r', buf.get(at..SMALL_REQUEST.min(buf.len()))?)?;
        let len = parse_i64(&buf[at + 1..end]).filter(|&n| n >= 0 && n <= limits.proto_max_bulk_len)?;
        if !limits.authenticated && len > UNAUTH_BULK_MAX {
            return None;
        }
        let start = end + 2;
        let next = start.checked_add(len as usize)?.checked_add(2)?;
        if next > SMALL_REQUEST || next > buf.len() {
            return None;
        }
        *span = (start, len as usize);
        at = next;
    }
    let block = Bytes::copy_from_slice(&buf[..at]);
    buf.advance(at);
    Some(spans[..count].iter().map(|&(start, len)| block.slice(start..start + len)).collect())
}

/// Redis names the offending byte in this error, raw (`%c`); a static text
/// per byte keeps `ProtocolError` allocation-free. A CR or LF there is sent
/// as a space, like every line break in an error line.
fn expected_dollar(got: u8) -> &'static [u8] {
    static TEXTS: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    let texts = TEXTS.get_or_init(|| (0..=255u8).map(|b| [&b"expected '$', got '"[..], &[b], b"'"].concat()).collect());
    &texts[got as usize]
}

/// Where a `\r\n`-terminated header line ends (the index of its `\r`),
/// once the byte after it has arrived. Redis looks for the `\r` with
/// `strchr`, which stops at a NUL: a NUL before it hides the line's end
/// for good, so the request waits until the buffer passes the limit.
fn line_end(buf: &[u8], too_big: &'static [u8]) -> Result<Option<usize>, ProtocolError> {
    match memchr::memchr2(b'\r', 0, buf) {
        Some(pos) if buf[pos] == b'\r' && pos + 1 < buf.len() => Ok(Some(pos)),
        Some(pos) if buf[pos] == b'\r' => Ok(None),
        _ if buf.len() > INLINE_MAX => Err(ProtocolError(too_big)),
        _ => Ok(None),
    }
}

/// One inline request: a line split into words the way `sdssplitargs` does.
///
/// As for header lines, a NUL before the `\n` hides it (`strchr`).
fn inline(buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    let nl = memchr::memchr2(b'\n', 0, buf).filter(|&pos| buf[pos] == b'\n');
    let Some(nl) = nl else {
        if buf.len() > INLINE_MAX {
            return Err(ProtocolError(b"too big inline request"));
        }
        return Ok(None);
    };
    let mut line = buf.split_to(nl + 1);
    line.truncate(nl);
    if line.last() == Some(&b'\r') {
        line.truncate(nl - 1);
    }
    crate::request::split_args(&line)
        .map(|words| Some(words.into_iter().map(Bytes::from).collect()))
        .ok_or(ProtocolError(b"unbalanced quotes in request"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        proto_max_bulk_len: 512 * 1024 * 1024,
        authenticated: true,
    };

    fn parse_all(input: &[u8]) -> (Vec<Vec<Bytes>>, Option<ProtocolError>) {
        let mut p = RequestParser::default();
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        loop {
            match p.next(&mut buf, LIMITS) {
                Ok(Some(cmd)) => out.push(cmd),
                Ok(None) => return (out, None),
                Err(e) => return (out, Some(e)),
            }
        }
    }

    #[test]
    fn pipeline_of_multibulk_and_inline() {
        let (cmds, err) = parse_all(b"*1\r\n$4\r\nPING\r\nset a \"b c\"\r\n*0\r\n\r\n");
        assert!(err.is_none());
        assert_eq!(cmds.len(), 2);
        assert_eq!(cmds[1], vec![Bytes::from("set"), Bytes::from("a"), Bytes::from("b c")]);
    }

    #[test]
    fn partial_input_resumes() {
        let mut p = RequestParser::default();
        let mut buf = BytesMut::from(&b"*2\r\n$3\r\nGET\r\n$1"[..]);
        assert_eq!(p.next(&mut buf, LIMITS), Ok(None));
        buf.extend_from_slice(b"\r\nk\r\n");
        assert_eq!(p.next(&mut buf, LIMITS).unwrap().unwrap().len(), 2);
    }

    #[test]
    fn protocol_errors_have_redis_texts() {
        assert_eq!(parse_all(b"*x\r\n").1, Some(ProtocolError(b"invalid multibulk length")));
        assert_eq!(parse_all(b"*1\r\n+foo\r\n").1, Some(ProtocolError(b"expected '$', got '+'")));
        assert_eq!(parse_all(b"*1\r\n\xff\r\n").1, Some(ProtocolError(b"expected '$', got '\xff'")));
        assert_eq!(parse_all(b"*1\r\n$-3\r\n").1, Some(ProtocolError(b"invalid bulk length")));
        assert_eq!(parse_all(b"set \"a\r\n").1, Some(ProtocolError(b"unbalanced quotes in request")));
    }

    #[test]
    fn huge_declared_lengths_are_refused_before_data() {
        let (_, err) = parse_all(b"*1\r\n$999999999999\r\n");
        assert_eq!(err, Some(ProtocolError(b"invalid bulk length")));
        let mut p = RequestParser::default();
        let mut buf = BytesMut::from(&b"*2000000\r\n"[..]);
        let unauth = Limits {
            authenticated: false,
            ..LIMITS
        };
        assert_eq!(p.next(&mut buf, unauth), Err(ProtocolError(b"unauthenticated multibulk length")));
    }

    fn request(args: &[&[u8]]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        out
    }

    #[test]
    fn requests_parse_alike_whole_or_in_pieces() {
        let long = vec![b'v'; 600];
        let many: Vec<Vec<u8>> = (0..20).map(|i| format!("a{i}").into_bytes()).collect();
        let many: Vec<&[u8]> = many.iter().map(Vec::as_slice).collect();
        let small: &[&[u8]] = &[b"EVALSHA", b"0123456789abcdef0123456789abcdef01234567", b"1", b"lk", b"30000", b""];
        for args in [small, &[b"SET".as_slice(), b"k", &long], &many] {
            let wire = request(args);
            let expected: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a)).collect();
            assert_eq!(parse_all(&wire).0, vec![expected.clone()]);
            for cut in 1..wire.len() {
                let mut p = RequestParser::default();
                let mut buf = BytesMut::from(&wire[..cut]);
                assert_eq!(p.next(&mut buf, LIMITS), Ok(None), "cut at {cut}");
                buf.extend_from_slice(&wire[cut..]);
                assert_eq!(p.next(&mut buf, LIMITS), Ok(Some(expected.clone())), "cut at {cut}");
                assert!(buf.is_empty());
            }
        }
    }

    #[test]
    fn a_small_request_shares_one_allocation() {
        let wire = request(&[b"HSET", b"lk", b"owner", b"1"]);
        let (cmds, _) = parse_all(&wire);
        // The arguments lie as far apart as on the wire: slices of one copy.
        let offsets: Vec<usize> = cmds[0].iter().map(|a| a.as_ptr() as usize - cmds[0][0].as_ptr() as usize).collect();
        assert_eq!(offsets, [0, 10, 18, 29]);
    }

    /// Feeds `wire` to a parser as a connection would: room made before
    /// each read, reads of at most `read` bytes. Returns the commands and
    /// the largest buffer capacity seen against the bytes received then.
    fn read_in_pieces(wire: &[u8], read: usize) -> (Vec<Vec<Bytes>>, Vec<(usize, usize)>) {
        let mut p = RequestParser::default();
        let mut buf = BytesMut::new();
        let (mut at, mut cmds, mut seen) = (0, Vec::new(), Vec::new());
        while at < wire.len() {
            p.make_room(&mut buf);
            let n = read.min(buf.capacity() - buf.len()).min(wire.len() - at);
            buf.extend_from_slice(&wire[at..at + n]);
            at += n;
            seen.push((at, buf.capacity()));
            while let Some(cmd) = p.next(&mut buf, LIMITS).unwrap() {
                cmds.push(cmd);
            }
        }
        (cmds, seen)
    }

    #[test]
    fn a_declared_length_is_not_allocated_ahead_of_its_data() {
        let mut wire = b"*1\r\n$536870912\r\n".to_vec();
        wire.extend_from_slice(&[b'x'; 100]);
        let mut p = RequestParser::default();
        let mut buf = BytesMut::new();
        p.make_room(&mut buf);
        assert_eq!(buf.capacity(), READ_START);
        buf.extend_from_slice(&wire);
        assert_eq!(p.next(&mut buf, LIMITS), Ok(None));
        // The argument's first bytes are all the connection holds.
        assert_eq!((buf.len(), buf.capacity()), (100, 100));
    }

    #[test]
    fn what_is_left_after_parsing_is_rewound_to_the_start_of_the_buffer() {
        let mut p = RequestParser::default();
        let mut buf = BytesMut::new();
        p.make_room(&mut buf);
        buf.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
        assert!(p.next(&mut buf, LIMITS).unwrap().is_some());
        assert_eq!(buf.capacity(), READ_START - 14);
        rewind(&mut buf);
        assert_eq!(buf.capacity(), READ_START);
        // A partial request: its headers are parsed, two bytes are left.
        buf.extend_from_slice(b"*1\r\n$4\r\nPI");
        assert_eq!(p.next(&mut buf, LIMITS), Ok(None));
        rewind(&mut buf);
        assert_eq!((&buf[..], buf.capacity()), (&b"PI"[..], READ_START));
        let mut none = BytesMut::new();
        rewind(&mut none);
        assert_eq!(none.capacity(), 0);
    }

    #[test]
    fn the_cron_frees_an_idle_buffer_and_shrinks_a_big_one_to_its_peak() {
        let mut buf = BytesMut::with_capacity(READ_START);
        // Idle for 2 seconds: kept; for 3: freed.
        assert_eq!(resize_in_cron(&mut buf, 30, 2, None), 0);
        assert_eq!(buf.capacity(), READ_START);
        resize_in_cron(&mut buf, 30, 3, None);
        assert_eq!(buf.capacity(), 0);
        // Past 32 KB and twice the peak: down to the peak.
        let mut big = BytesMut::with_capacity(400_002);
        assert_eq!(resize_in_cron(&mut big, 400_002, 0, None), 0);
        assert_eq!(big.capacity(), 400_002);
        big.extend_from_slice(b"*1\r\n");
        assert_eq!(resize_in_cron(&mut big, 130, 0, None), 4);
        assert_eq!((big.len(), big.capacity()), (4, 130));
        // A 16 KB buffer is not shrunk to its peak.
        let mut small = BytesMut::with_capacity(READ_START);
        resize_in_cron(&mut small, 10, 0, None);
        assert_eq!(small.capacity(), READ_START);
    }

    #[test]
    fn the_cron_keeps_room_for_the_argument_being_read_but_never_grows() {
        let mut buf = BytesMut::with_capacity(400_002);
        buf.extend_from_slice(b"xx");
        assert_eq!(resize_in_cron(&mut buf, 10, 0, Some(100_000)), 100_000);
        assert_eq!((buf.len(), buf.capacity()), (2, 100_000));
        // The next peak starts at the argument's length: no shrink.
        assert_eq!(resize_in_cron(&mut buf, 100_000, 0, Some(100_000)), 100_000);
        assert_eq!(buf.capacity(), 100_000);
        // A length past the buffer is not allocated ahead of its data.
        let mut buf = BytesMut::with_capacity(400_002);
        resize_in_cron(&mut buf, 10, 0, Some(1 << 29));
        assert_eq!(buf.capacity(), 400_002);
    }

    #[test]
    fn a_big_argument_grows_with_its_data_into_a_buffer_of_its_own() {
        let value: Vec<u8> = (0..300_000u32).map(|i| i as u8).collect();
        let wire = request(&[b"SET", b"k", &value, b"next"]);
        let (cmds, seen) = read_in_pieces(&wire, 16 * 1024);
        assert_eq!(
            cmds,
            vec![vec![
                Bytes::from("SET"),
                Bytes::from("k"),
                Bytes::from(value.clone()),
                Bytes::from("next")
            ]]
        );
        // Never more than twice what arrived, plus one read.
        assert!(seen.iter().all(|&(arrived, cap)| cap <= 2 * arrived + READ_CHUNK), "{seen:?}");
    }

    #[test]
    fn a_big_argument_is_taken_from_its_exact_buffer_without_a_copy() {
        let value = vec![b'v'; 100_000];
        let mut p = RequestParser::default();
        let mut buf = BytesMut::from(&b"*1\r\n$100000\r\n"[..]);
        assert_eq!(p.next(&mut buf, LIMITS), Ok(None));
        let mut wire = value.clone();
        wire.extend_from_slice(b"\r\n");
        let mut at = 0;
        let mut exact = None;
        while at < wire.len() {
            p.make_room(&mut buf);
            if buf.capacity() == wire.len() {
                exact.get_or_insert(buf.as_ptr());
            }
            let n = (buf.capacity() - buf.len()).min(wire.len() - at);
            buf.extend_from_slice(&wire[at..at + n]);
            at += n;
        }
        let cmd = p.next(&mut buf, LIMITS).unwrap().unwrap();
        assert_eq!(cmd[0], value);
        assert_eq!(Some(cmd[0].as_ptr()), exact);
        assert_eq!((buf.len(), buf.capacity()), (0, 100_002), "reading goes on in a fresh buffer");
    }
}
