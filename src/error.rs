//! Every error text keylock sends, in one place.
//!
//! Clients match on these strings (Redisson on prefixes such as `NOSCRIPT`,
//! `BUSY `, `NOAUTH`, `WRONGPASS`; redis-py and others on whole texts), so
//! each one is written exactly as Redis 7.0 writes it.
//!
//! Many texts quote client bytes (command and option names, arguments), so
//! the constructors apply Redis's line-break rules here, once: [`CmdError::new`]
//! replaces CR and LF with spaces, [`CmdError::err`] first trims them from the
//! ends as `addReplyErrorFormat` does. A script that catches the error with
//! `redis.pcall` sees the same text the client would have.

use std::borrow::Cow;
use std::fmt;

use bytes::Bytes;

use crate::reply::{Reply, one_line, trim_line_breaks};

/// A command's failure: the full error line, prefix included, without the
/// leading `-`, and without line breaks. Bytes, not text: an error that
/// quotes client bytes sends them as they came, as Redis does, UTF-8 or
/// not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CmdError(Cow<'static, [u8]>);

pub type CmdResult<T = crate::reply::Reply> = Result<T, CmdError>;

impl fmt::Display for CmdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.0))
    }
}

/// What C's `%.<max>s` prints of `text` held as a C string: the bytes
/// before its first NUL, at most `max` of them. Redis quotes client bytes
/// (and Lua strings, through `lua_tostring`) this way.
pub fn c_str(text: &[u8], max: usize) -> &[u8] {
    let end = memchr::memchr(0, text).unwrap_or(text.len());
    &text[..end.min(max)]
}

/// Client bytes as an error text quotes them: C's `%s` ([`c_str`]), so
/// `EXPIRE k 10 "a\0b"` is refused as `Unsupported option a`; the bytes as
/// they came otherwise. Build the text with [`CmdError::err_bytes`] or
/// [`CmdError::new_bytes`].
pub fn quoted(text: &[u8]) -> &[u8] {
    c_str(text, usize::MAX)
}

impl From<CmdError> for Reply {
    fn from(e: CmdError) -> Reply {
        Reply::Error(match e.0 {
            Cow::Borrowed(text) => Bytes::from_static(text),
            Cow::Owned(text) => Bytes::from(text),
        })
    }
}

impl CmdError {
    /// The whole error line as given, prefix included (`NOSCRIPT …`,
    /// `ERR …`), each CR and LF a space: Redis's `addReplyErrorSdsSafe`.
    pub fn new(text: impl Into<Cow<'static, str>>) -> CmdError {
        match text.into() {
            Cow::Borrowed(text) => CmdError::new_bytes(Cow::Borrowed(text.as_bytes())),
            Cow::Owned(text) => CmdError::new_bytes(Cow::Owned(text.into_bytes())),
        }
    }

    /// [`CmdError::new`] for a line holding client bytes.
    pub fn new_bytes(text: impl Into<Cow<'static, [u8]>>) -> CmdError {
        let text = text.into();
        match one_line(&text) {
            Cow::Borrowed(_) => CmdError(text),
            Cow::Owned(clean) => CmdError(Cow::Owned(clean)),
        }
    }

    /// `ERR <text>`, with `text` treated as Redis's `addReplyErrorFormat`
    /// treats a formatted text: CRs and LFs at its ends dropped, the others
    /// made spaces.
    pub fn err(text: impl fmt::Display) -> CmdError {
        CmdError::err_bytes(text.to_string().as_bytes())
    }

    /// [`CmdError::err`] for a text holding client bytes.
    pub fn err_bytes(text: &[u8]) -> CmdError {
        let clean = one_line(trim_line_breaks(text));
        CmdError(Cow::Owned([b"ERR ".as_slice(), &clean].concat()))
    }

    /// The error line, prefix included, without the leading `-`.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The error line as text (invalid UTF-8 replaced), for logs and for
    /// callers that build on it.
    pub fn text(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.0)
    }

    pub fn syntax() -> CmdError {
        CmdError::new("ERR syntax error")
    }

    pub fn wrong_type() -> CmdError {
        CmdError::new("WRONGTYPE Operation against a key holding the wrong kind of value")
    }

    pub fn not_integer() -> CmdError {
        CmdError::new("ERR value is not an integer or out of range")
    }

    pub fn not_float() -> CmdError {
        CmdError::new("ERR value is not a valid float")
    }

    pub fn overflow() -> CmdError {
        CmdError::new("ERR increment or decrement would overflow")
    }

    pub fn no_such_key() -> CmdError {
        CmdError::new("ERR no such key")
    }

    pub fn index_out_of_range() -> CmdError {
        CmdError::new("ERR index out of range")
    }

    pub fn out_of_range_positive(what: &str) -> CmdError {
        CmdError::err(format!("{what} is out of range, must be positive"))
    }

    /// A bit offset that is not an integer, negative, or past the
    /// largest string (`proto-max-bulk-len`).
    pub fn bit_offset() -> CmdError {
        CmdError::new("ERR bit offset is not an integer or out of range")
    }

    /// SETBIT's value, which must be 0 or 1.
    pub fn bit_value() -> CmdError {
        CmdError::new("ERR bit is not an integer or out of range")
    }

    /// BITPOS's bit, which must be 0 or 1.
    pub fn bitpos_bit() -> CmdError {
        CmdError::new("ERR The bit argument must be 1 or 0.")
    }

    pub fn bitop_not_sources() -> CmdError {
        CmdError::new("ERR BITOP NOT must be called with a single source key.")
    }

    pub fn bitfield_type() -> CmdError {
        CmdError::new("ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.")
    }

    pub fn bitfield_overflow() -> CmdError {
        CmdError::new("ERR Invalid OVERFLOW type specified")
    }

    pub fn bitfield_ro_write() -> CmdError {
        CmdError::new("ERR BITFIELD_RO only supports the GET subcommand")
    }

    /// A string that is not a HyperLogLog (bad magic or encoding, a dense
    /// one of the wrong length), as Redis's `isHLLObjectOrReply` words it.
    pub fn not_hll() -> CmdError {
        CmdError::new("WRONGTYPE Key is not a valid HyperLogLog string value.")
    }

    /// A HyperLogLog whose sparse opcodes do not cover its registers.
    pub fn hll_corrupted() -> CmdError {
        CmdError::new("INVALIDOBJ Corrupted HLL object detected")
    }

    pub fn pfdebug_no_key() -> CmdError {
        CmdError::new("ERR The specified key does not exist")
    }

    pub fn pfdebug_not_sparse() -> CmdError {
        CmdError::new("ERR HLL encoding is not sparse")
    }

    /// PFDEBUG's unknown subcommand, quoted as C's `%s`.
    pub fn pfdebug_unknown(sub: &[u8]) -> CmdError {
        CmdError::err_bytes(&[b"Unknown PFDEBUG subcommand '".as_slice(), c_str(sub, usize::MAX), b"'"].concat())
    }

    /// PFSELFTEST's report of a failed check (`TESTFAILED …`).
    pub fn pfselftest_failed(text: String) -> CmdError {
        CmdError::err(text)
    }

    pub fn lcs_not_strings() -> CmdError {
        CmdError::new("ERR The specified keys must contain string values")
    }

    pub fn lcs_len_and_idx() -> CmdError {
        CmdError::new("ERR If you want both the length and indexes, please just use IDX.")
    }

    pub fn lcs_too_long() -> CmdError {
        CmdError::new("ERR String too long for LCS")
    }

    /// LCS's table would be larger than `proto-max-bulk-len` bytes.
    pub fn lcs_over_proto_max_bulk_len() -> CmdError {
        CmdError::new("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len")
    }

    /// LCS's table could not be allocated.
    pub fn lcs_no_memory() -> CmdError {
        CmdError::new("ERR Insufficient memory, failed allocating transient memory for LCS")
    }

    /// A GEOADD / GEORADIUS / FROMLONLAT point outside Redis's limits,
    /// printed as C's `%f`.
    pub fn geo_coordinates(longitude: f64, latitude: f64) -> CmdError {
        CmdError::err(format!("invalid longitude,latitude pair {longitude:.6},{latitude:.6}"))
    }

    pub fn geo_unit() -> CmdError {
        CmdError::new("ERR unsupported unit provided. please use M, KM, FT, MI")
    }

    /// GEORADIUSBYMEMBER / FROMMEMBER naming a member the set lacks.
    pub fn geo_member() -> CmdError {
        CmdError::new("ERR could not decode requested zset member")
    }

    /// A radius, width or height that is not a number (`need numeric radius`).
    pub fn geo_need_numeric(what: &str) -> CmdError {
        CmdError::err(format!("need numeric {what}"))
    }

    /// SORT's weights (or elements) that are not numbers.
    pub fn sort_scores() -> CmdError {
        CmdError::new("ERR One or more scores can't be converted into double")
    }

    pub fn arity(full_name: &str) -> CmdError {
        CmdError::err(format!("wrong number of arguments for '{full_name}' command"))
    }

    /// `unknown command '<name>', with args beginning with: '<arg>' …`:
    /// Redis's `%.128s` of the name, then the arguments while the list is
    /// under 128 bytes, the last one cut to fit. Line breaks become spaces
    /// and nothing is trimmed, as in Redis's `commandCheckExistence`.
    pub fn unknown_command(argv: &[Bytes]) -> CmdError {
        let mut args: Vec<u8> = Vec::new();
        for a in &argv[1..] {
            if args.len() >= 128 {
                break;
            }
            let room = 128 - args.len();
            args.push(b'\'');
            args.extend_from_slice(c_str(a, room));
            args.extend_from_slice(b"' ");
        }
        let text = [
            &b"ERR unknown command '"[..],
            c_str(&argv[0], 128),
            b"', with args beginning with: ",
            &args,
        ]
        .concat();
        CmdError::new_bytes(text)
    }

    /// A container command's unknown subcommand, quoted as `%.128s`.
    pub fn unknown_subcommand(sub: &[u8], command: &str) -> CmdError {
        CmdError::new_bytes(
            [
                b"ERR unknown subcommand '".as_slice(),
                c_str(sub, 128),
                b"'. Try ",
                command.to_ascii_uppercase().as_bytes(),
                b" HELP.",
            ]
            .concat(),
        )
    }

    /// Redis's `addReplySubcommandSyntaxError`, for subcommands that check
    /// their own argument count.
    pub fn subcommand_syntax(sub: &[u8], command: &str) -> CmdError {
        CmdError::err_bytes(
            &[
                b"unknown subcommand or wrong number of arguments for '".as_slice(),
                c_str(sub, 128),
                b"'. Try ",
                command.to_ascii_uppercase().as_bytes(),
                b" HELP.",
            ]
            .concat(),
        )
    }

    pub fn noauth() -> CmdError {
        CmdError::new("NOAUTH Authentication required.")
    }

    pub fn wrongpass() -> CmdError {
        CmdError::new("WRONGPASS invalid username-password pair or user is disabled.")
    }

    pub fn invalid_expire(cmd: &str) -> CmdError {
        CmdError::err(format!("invalid expire time in '{cmd}' command"))
    }

    /// RESTORE onto an existing key without REPLACE.
    pub fn busy_key() -> CmdError {
        CmdError::new("BUSYKEY Target key name already exists.")
    }

    /// RESTORE: a payload whose RDB version is newer than 10 or whose
    /// CRC64 does not match.
    pub fn dump_payload_footer() -> CmdError {
        CmdError::new("ERR DUMP payload version or checksum are wrong")
    }

    /// RESTORE: a payload whose object cannot be loaded.
    pub fn bad_data_format() -> CmdError {
        CmdError::new("ERR Bad data format")
    }

    pub fn db_index_out_of_range() -> CmdError {
        CmdError::new("ERR DB index is out of range")
    }

    pub fn exec_without_multi() -> CmdError {
        CmdError::new("ERR EXEC without MULTI")
    }

    pub fn multi_nested() -> CmdError {
        CmdError::new("ERR MULTI calls can not be nested")
    }
}

/// An operating-system error as `strerror` words it (Rust's text without
/// its ` (os error N)` suffix), for the messages Redis prints with it.
pub fn os_error_text(e: &std::io::Error) -> String {
    let text = e.to_string();
    match (e.raw_os_error(), text.rfind(" (os error ")) {
        (Some(_), Some(at)) => text[..at].to_string(),
        _ => text,
    }
}

/// `strerror(errno)`, as Redis prints it.
pub fn errno_text(errno: i32) -> String {
    os_error_text(&std::io::Error::from_raw_os_error(errno))
}
