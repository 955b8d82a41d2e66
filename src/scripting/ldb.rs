//! The Lua debugger (LDB): `SCRIPT DEBUG YES|SYNC`, then `EVAL`, as
//! Redis 7.0's `eval.c` runs it, so that `redis-cli --ldb` and
//! `--ldb-sync-mode` work against keylock unchanged.
//!
//! A debugging session replaces the count hook with a line hook. Each time
//! the script stops (a step, a breakpoint, `redis.breakpoint()`, or
//! `busy-reply-threshold` passing without a stop) the hook sends the
//! session's log to the debugging client as an array of status replies,
//! then reads the client's next debugger command from its socket itself
//! and answers it, until one (`step`, `continue`, `abort`) lets the script
//! go on. The socket is reached through a [`DebugConn`] the network side
//! lends (`server::debug_conn`), as Redis reads `ldb.conn` with the
//! connection set to blocking; scripting knows nothing of sockets.
//!
//! The session's state is one per thread (Redis's global `ldb`): only one
//! script runs at a time on the engine thread, and a forked session's
//! process has its own copy. Nothing here holds a borrow of it while Lua
//! runs (the debugger's `eval` and `redis` commands call into Lua, which
//! may log through `redis.debug` or `redis.call`).
//!
//! Where Redis 7.0.15 would crash or corrupt its state, keylock does the
//! evident thing instead: an `eval` whose error is not a string logs
//! `<error> (error object is not a string)` (Redis formats a NULL
//! pointer), and removing a breakpoint keeps the others (Redis's
//! `memmove` moves bytes, not line numbers).

use std::cell::RefCell;
use std::ffi::{CStr, c_char, c_int};

use mlua::ffi;

use super::{call, sandbox};
use crate::numfmt::atoi;
use crate::reply::Reply;

/// A client's `SCRIPT DEBUG` mode: its next EVAL runs in a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `YES`: the server forks and the child runs the session; what the
    /// script writes is discarded with it, and the server goes on serving.
    Fork,
    /// `SYNC`: the session runs in the server, which serves no one else
    /// meanwhile; what the script writes stays.
    Sync,
}

/// The debugging client's connection, for direct I/O from the Lua hook.
pub trait DebugConn {
    /// Writes all of `bytes`; false if the connection failed or took
    /// nothing for 5 seconds (Redis's send timeout for a session).
    fn send(&mut self, bytes: &[u8]) -> bool;
    /// Waits for input and reads some into `buf`: 0 once the client is
    /// gone (or the server is being stopped).
    fn recv(&mut self, buf: &mut [u8]) -> usize;
}

/// Finds a client's connection for a session (installed by the network
/// side on the [`Watchdog`](super::Watchdog)).
pub type DebugConnector = Box<dyn Fn(crate::db::ClientId) -> Option<Box<dyn DebugConn>>>;

const MAX_BREAKPOINTS: usize = 64;
/// Replies and values logged longer than this are cut (`maxlen`).
const MAX_LEN_DEFAULT: usize = 256;
/// How deep nested tables are shown (Redis's `LUA_MINSTACK/2`).
const MAX_VALUES_DEPTH: u32 = 10;
/// Unparsed debugger input past this ends the script.
const MAX_INPUT: usize = 1 << 20;

const HELP: &[&str] = &[
    "Redis Lua debugger help:",
    "[h]elp               Show this help.",
    "[s]tep               Run current line and stop again.",
    "[n]ext               Alias for step.",
    "[c]ontinue           Run till next breakpoint.",
    "[l]ist               List source code around current line.",
    "[l]ist [line]        List source code around [line].",
    "                     line = 0 means: current position.",
    "[l]ist [line] [ctx]  In this form [ctx] specifies how many lines",
    "                     to show before/after [line].",
    "[w]hole              List all source code. Alias for 'list 1 1000000'.",
    "[p]rint              Show all the local variables.",
    "[p]rint <var>        Show the value of the specified variable.",
    "                     Can also show global vars KEYS and ARGV.",
    "[b]reak              Show all breakpoints.",
    "[b]reak <line>       Add a breakpoint to the specified line.",
    "[b]reak -<line>      Remove breakpoint from the specified line.",
    "[b]reak 0            Remove all breakpoints.",
    "[t]race              Show a backtrace.",
    "[e]val <code>        Execute some Lua code (in a different callframe).",
    "[r]edis <cmd>        Execute a Redis command.",
    "[m]axlen [len]       Trim logged Redis replies and Lua var dumps to len.",
    "                     Specifying zero as <len> means unlimited.",
    "[a]bort              Stop the execution of the script. In sync",
    "                     mode dataset changes will be retained.",
    "",
    "Debugger functions you can call from Lua scripts:",
    "redis.debug()        Produce logs in the debugger console.",
    "redis.breakpoint()   Stop execution like if there was a breakpoint in the",
    "                     next line of code.",
];

struct Session {
    /// None once the client is known to be gone, or with no network.
    conn: Option<Box<dyn DebugConn>>,
    logs: Vec<Vec<u8>>,
    breakpoints: Vec<c_int>,
    /// Stop at the next line.
    step: bool,
    /// `redis.breakpoint()` was called: stop at the next line.
    lua_breakpoint: bool,
    /// The script's body by line.
    src: Vec<Vec<u8>>,
    current_line: c_int,
    /// Debugger input not parsed yet.
    input: Vec<u8>,
    maxlen: usize,
    maxlen_hint_sent: bool,
}

thread_local! {
    static SESSION: RefCell<Option<Session>> = const { RefCell::new(None) };
}

/// Runs `f` on the session, if one is active. `f` must not call Lua.
fn with<R>(f: impl FnOnce(&mut Session) -> R) -> Option<R> {
    SESSION.with(|s| s.borrow_mut().as_mut().map(f))
}

/// A session is in progress (`ldb.active`).
pub fn active() -> bool {
    SESSION.with(|s| s.borrow().is_some())
}

/// Commands and errors are logged: the user stepped (Redis's `ldbIsEnabled`).
pub(crate) fn enabled() -> bool {
    with(|s| s.step).unwrap_or(false)
}

/// Starts a session for the script `body` (Redis's `ldbEnable` and
/// `ldbStartSession`): the first line stops.
pub fn start(conn: Option<Box<dyn DebugConn>>, body: &[u8]) {
    let mut end = body.len();
    while end > 0 && matches!(body[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    let src = if end == 0 {
        Vec::new()
    } else {
        body[..end].split(|&c| c == b'\n').map(<[u8]>::to_vec).collect()
    };
    let session = Session {
        conn,
        logs: Vec::new(),
        breakpoints: Vec::new(),
        step: true,
        lua_breakpoint: false,
        src,
        current_line: 0,
        input: Vec::new(),
        maxlen: MAX_LEN_DEFAULT,
        maxlen_hint_sent: false,
    };
    SESSION.with(|s| *s.borrow_mut() = Some(session));
}

/// Ends the session (Redis's `ldbEndSession`): what is left of the log
/// goes to the client with an `<endsession>` mark. Returns the connection,
/// for a forked session to send the script's reply on.
pub fn end() -> Option<Box<dyn DebugConn>> {
    with(|s| {
        s.logs.push(b"<endsession>".to_vec());
        s.send_logs();
    });
    SESSION.with(|s| s.borrow_mut().take()).and_then(|s| s.conn)
}

/// Adds a line to the log, if a session is active.
pub(crate) fn log(entry: Vec<u8>) {
    with(|s| s.logs.push(entry));
}

/// `<error> …` for an error `redis.call` or the `redis` API raises, as
/// Redis's `luaPushErrorBuff` logs its text while the user steps.
pub(crate) fn log_error(text: &[u8]) {
    if enabled() {
        log([&b"<error> "[..], text].concat());
    }
}

/// The error of a command a script's `redis.call` was refused, as Redis
/// logs the text its `scriptCall` gave: plain messages without the `ERR`
/// keylock's texts carry, Redis's shared errors with their code and line
/// end.
pub(crate) fn log_refusal(text: &[u8]) {
    if enabled() {
        let message = match text.strip_prefix(b"ERR ") {
            Some(message) => message.to_vec(),
            None => [&b"-"[..], text, b"\r\n"].concat(),
        };
        log([&b"<error> "[..], &message].concat());
    }
}

/// `<redis> …`: a command a script runs while the user steps.
pub(crate) fn log_command(argv: &[bytes::Bytes]) {
    if !enabled() {
        return;
    }
    let mut line = b"<redis>".to_vec();
    for (j, arg) in argv.iter().enumerate() {
        if j == 10 {
            // Redis counts one too few here.
            line.extend_from_slice(format!(" ... ({} more)", argv.len() - j - 1).as_bytes());
            break;
        }
        line.push(b' ');
        line.extend_from_slice(arg);
    }
    log(line);
}

/// `<reply> …`: a command's reply, in the protocol the script selected,
/// made readable as Redis's `ldbRedisProtocolToHuman` does.
pub(crate) fn log_reply(reply: &Reply, resp: u8) {
    if !enabled() {
        return;
    }
    let mut encoded = bytes::BytesMut::new();
    reply.encode(resp, &mut encoded);
    let mut line = b"<reply> ".to_vec();
    protocol_to_human(&mut line, &encoded);
    with(|s| s.log_with_maxlen(line));
}

impl Session {
    fn log_with_maxlen(&mut self, mut entry: Vec<u8>) {
        let mut trimmed = false;
        if self.maxlen > 0 && entry.len() > self.maxlen {
            entry.truncate(self.maxlen);
            entry.extend_from_slice(b" ...");
            trimmed = true;
        }
        self.logs.push(entry);
        if trimmed && !self.maxlen_hint_sent {
            self.maxlen_hint_sent = true;
            self.logs
                .push(b"<hint> The above reply was trimmed. Use 'maxlen 0' to disable trimming.".to_vec());
        }
    }

    /// Sends the log as an array of status replies, line breaks made
    /// spaces, and empties it (Redis's `ldbSendLogs`). A failed write is
    /// noticed by the next read.
    fn send_logs(&mut self) {
        let mut proto = format!("*{}\r\n", self.logs.len()).into_bytes();
        for entry in self.logs.drain(..) {
            proto.push(b'+');
            proto.extend(entry.iter().map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c }));
            proto.extend_from_slice(b"\r\n");
        }
        if let Some(conn) = self.conn.as_mut() {
            conn.send(&proto);
        }
    }

    fn source_line(&self, line: c_int) -> &[u8] {
        match usize::try_from(line - 1).ok().and_then(|i| self.src.get(i)) {
            // `%s`: up to a NUL.
            Some(text) => crate::error::c_str(text, usize::MAX),
            None => b"<out of range source code line>",
        }
    }

    fn log_source_line(&mut self, line: c_int) {
        let prefix = match (self.current_line == line, self.breakpoints.contains(&line)) {
            (true, true) => "->#",
            (true, false) => "-> ",
            (false, true) => "  #",
            (false, false) => "   ",
        };
        let mut entry = format!("{prefix}{line:<3} ").into_bytes();
        entry.extend_from_slice(self.source_line(line));
        self.logs.push(entry);
    }

    /// The `list` command: the whole source, or `context` lines around
    /// `around`.
    fn list(&mut self, around: c_int, context: c_int) {
        for line in 1..=self.src.len() as c_int {
            if around != 0 && (i64::from(around) - i64::from(line)).abs() > i64::from(context) {
                continue;
            }
            self.log_source_line(line);
        }
    }

    fn add_breakpoint(&mut self, line: c_int) -> bool {
        if line <= 0 || line as usize > self.src.len() {
            return false;
        }
        if !self.breakpoints.contains(&line) && self.breakpoints.len() != MAX_BREAKPOINTS {
            self.breakpoints.push(line);
            return true;
        }
        false
    }

    /// The `break` command.
    fn breakpoints(&mut self, argv: &[Vec<u8>]) {
        if argv.len() == 1 {
            if self.breakpoints.is_empty() {
                self.logs.push(b"No breakpoints set. Use 'b <line>' to add one.".to_vec());
            } else {
                self.logs.push(format!("{} breakpoints set:", self.breakpoints.len()).into_bytes());
                for line in self.breakpoints.clone() {
                    self.log_source_line(line);
                }
            }
            return;
        }
        for arg in &argv[1..] {
            let Some(line) = crate::numfmt::parse_i64(arg) else {
                let mut entry = b"Invalid argument:'".to_vec();
                entry.extend_from_slice(crate::error::c_str(arg, usize::MAX));
                entry.push(b'\'');
                self.logs.push(entry);
                continue;
            };
            if line == 0 {
                self.breakpoints.clear();
                self.logs.push(b"All breakpoints removed.".to_vec());
            } else if line > 0 {
                // The line is a C `long` narrowed to an `int`, as in Redis.
                if self.breakpoints.len() == MAX_BREAKPOINTS {
                    self.logs.push(b"Too many breakpoints set.".to_vec());
                } else if self.add_breakpoint(line as c_int) {
                    self.list(line as c_int, 1);
                } else {
                    self.logs.push(b"Wrong line number.".to_vec());
                }
            } else {
                let target = line.wrapping_neg() as c_int;
                match self.breakpoints.iter().position(|&b| b == target) {
                    Some(at) => {
                        self.breakpoints.remove(at);
                        self.logs.push(b"Breakpoint removed.".to_vec());
                    }
                    None => self.logs.push(b"No breakpoint in the specified line.".to_vec()),
                }
            }
        }
    }

    /// The `maxlen` command.
    fn maxlen(&mut self, argv: &[Vec<u8>]) {
        if argv.len() == 2 {
            let mut value = atoi(&argv[1]);
            self.maxlen_hint_sent = true;
            if value != 0 && value <= 60 {
                value = 60;
            }
            self.maxlen = value as usize;
        }
        let entry = if self.maxlen > 0 {
            format!("<value> replies are truncated at {} bytes.", self.maxlen)
        } else {
            "<value> replies are unlimited.".to_string()
        };
        self.logs.push(entry.into_bytes());
    }
}

/// What parsing the debugger's input gave.
enum Parsed {
    /// More input is needed; `until_line_feed`: nothing changes until a
    /// line feed arrives (a line end is missing), so a long request
    /// arriving in pieces is not parsed again at every piece.
    More {
        until_line_feed: bool,
    },
    Error,
    Command(Vec<Vec<u8>>),
}

/// Where `needle` starts in `buf` from `from`, searching as C's `strstr`
/// does: not past a NUL.
fn c_find(buf: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    let rest = buf.get(from..)?;
    let rest = &rest[..memchr::memchr(0, rest).unwrap_or(rest.len())];
    memchr::memmem::find(rest, needle).map(|i| from + i)
}

/// A command in Redis's protocol at the start of the debugger's input,
/// read as Redis's forgiving `ldbReplParseCommand` reads it (what follows
/// it is dropped).
fn parse_command(buf: &[u8]) -> Parsed {
    const LINE: Parsed = Parsed::More { until_line_feed: true };
    const MORE: Parsed = Parsed::More { until_line_feed: false };
    if buf.is_empty() {
        return MORE;
    }
    let Some(star) = c_find(buf, 0, b"*") else {
        return Parsed::Error;
    };
    let Some(end) = c_find(buf, star, b"\r\n") else {
        return LINE;
    };
    let argc = atoi(&buf[star + 1..end]);
    if argc <= 0 || argc > 1024 {
        return Parsed::Error;
    }
    let mut p = end + 2;
    let mut argv = Vec::with_capacity(argc as usize);
    while argv.len() < argc as usize {
        match buf.get(p) {
            None => return MORE,
            // C's string functions end at the NUL: only a line feed
            // (finding nothing new) makes it look again.
            Some(0) => return LINE,
            Some(b'$') => {}
            Some(_) => return Parsed::Error,
        }
        let Some(end) = c_find(buf, p, b"\r\n") else {
            return LINE;
        };
        let len = atoi(&buf[p + 1..end]);
        p = end + 2;
        if len <= 0 || len > 1024 {
            return Parsed::Error;
        }
        let len = len as usize;
        if p + len + 2 > buf.len() {
            return MORE;
        }
        argv.push(buf[p..p + len].to_vec());
        p += len;
        if &buf[p..p + 2] != b"\r\n" {
            return Parsed::Error;
        }
        p += 2;
    }
    Parsed::Command(argv)
}

/// The position of the `\r` ending the line that starts at `at`.
fn line_end(reply: &[u8], at: usize) -> usize {
    reply
        .get(at + 1..)
        .and_then(|rest| memchr::memchr(b'\r', rest))
        .map_or(reply.len(), |i| at + 1 + i)
}

fn number(reply: &[u8], at: usize, end: usize) -> i64 {
    reply.get(at + 1..end).and_then(crate::numfmt::parse_i64).unwrap_or(0)
}

/// Appends a readable form of the reply at `at` to `out`; returns where the
/// next one starts (Redis's `ldbRedisProtocolToHuman`: a type it does not
/// know adds nothing and moves nothing).
fn to_human(out: &mut Vec<u8>, reply: &[u8], at: usize) -> usize {
    let end = line_end(reply, at);
    let next = (end + 2).min(reply.len());
    let header = reply.get(at + 1..end).unwrap_or_default();
    match reply.get(at) {
        Some(b':') => {
            out.extend_from_slice(header);
            next
        }
        Some(b'$') => {
            let len = number(reply, at, end);
            if len < 0 {
                out.extend_from_slice(b"NULL");
                return next;
            }
            let data_end = (next + len as usize).min(reply.len());
            out.extend_from_slice(crate::engine::repr(&reply[next..data_end]).as_bytes());
            (data_end + 2).min(reply.len())
        }
        Some(b'+' | b'-') => {
            out.extend_from_slice(crate::engine::repr(&reply[at..end]).as_bytes());
            next
        }
        Some(b'*') => {
            let len = number(reply, at, end);
            if len == -1 {
                out.extend_from_slice(b"NULL");
                return next;
            }
            items(out, reply, next, len, b"[", b"]")
        }
        Some(b'~') => items(out, reply, next, number(reply, at, end), b"~(", b")"),
        Some(b'%') => {
            let len = number(reply, at, end);
            let mut p = next;
            out.push(b'{');
            for j in 0..len {
                p = to_human(out, reply, p);
                out.extend_from_slice(b" => ");
                p = to_human(out, reply, p);
                if j != len - 1 {
                    out.push(b',');
                }
            }
            out.push(b'}');
            p
        }
        Some(b'_') => {
            out.extend_from_slice(b"(null)");
            next
        }
        Some(b'#') => {
            out.extend_from_slice(if reply.get(at + 1) == Some(&b't') { b"#true" } else { b"#false" });
            next
        }
        Some(b',') => {
            out.extend_from_slice(b"(double) ");
            out.extend_from_slice(header);
            next
        }
        _ => at,
    }
}

fn items(out: &mut Vec<u8>, reply: &[u8], mut p: usize, len: i64, open: &[u8], close: &[u8]) -> usize {
    out.extend_from_slice(open);
    for j in 0..len {
        p = to_human(out, reply, p);
        if j != len - 1 {
            out.push(b',');
        }
    }
    out.extend_from_slice(close);
    p
}

fn protocol_to_human(out: &mut Vec<u8>, reply: &[u8]) {
    to_human(out, reply, 0);
}

/// A fresh `lua_Debug`.
fn debug_record() -> ffi::lua_Debug {
    // SAFETY: a plain C struct of integers, pointers and a char array, for
    // which all zeroes is a valid value (as `lua_Debug ar;` is filled in by
    // Lua before use).
    unsafe { std::mem::zeroed() }
}

/// The bytes of a C string Lua returned (empty for NULL).
unsafe fn c_bytes<'a>(p: *const c_char) -> &'a [u8] {
    // SAFETY: Lua's strings are NUL-terminated and live while the caller
    // uses them (on the stack, or interned names).
    if p.is_null() {
        b""
    } else {
        unsafe { CStr::from_ptr(p) }.to_bytes()
    }
}

/// Appends a readable form of the value at `idx` (a negative index) to
/// `out` (Redis's `ldbCatStackValueRec`), leaving the stack as it was.
unsafe fn cat_value(out: &mut Vec<u8>, l: *mut ffi::lua_State, idx: c_int, level: u32) {
    if level == MAX_VALUES_DEPTH {
        out.extend_from_slice(b"<max recursion level reached! Nested table?>");
        return;
    }
    let level = level + 1;
    // SAFETY: reads of an existing stack slot; the table walk pushes two
    // slots at a time and pops them, with room checked first.
    unsafe {
        match ffi::lua_type(l, idx) {
            ffi::LUA_TSTRING => {
                let mut len = 0usize;
                let p = ffi::lua_tolstring(l, idx, &mut len);
                let bytes = std::slice::from_raw_parts(p as *const u8, len);
                out.extend_from_slice(crate::engine::repr(bytes).as_bytes());
            }
            ffi::LUA_TBOOLEAN => out.extend_from_slice(if ffi::lua_toboolean(l, idx) != 0 { b"true" } else { b"false" }),
            ffi::LUA_TNUMBER => out.extend_from_slice(crate::numfmt::fmt_g(ffi::lua_tonumber(l, idx), 6).as_bytes()),
            ffi::LUA_TNIL => out.extend_from_slice(b"nil"),
            ffi::LUA_TTABLE => {
                if ffi::lua_checkstack(l, 2) == 0 {
                    out.extend_from_slice(b"<max recursion level reached! Nested table?>");
                    return;
                }
                let mut expected: f64 = 1.0;
                let mut is_array = true;
                let mut as_array = Vec::new();
                let mut as_map = Vec::new();
                ffi::lua_pushnil(l);
                while ffi::lua_next(l, idx - 1) != 0 {
                    if is_array && (ffi::lua_type(l, -2) != ffi::LUA_TNUMBER || ffi::lua_tonumber(l, -2) != expected) {
                        is_array = false;
                    }
                    cat_value(&mut as_array, l, -1, level);
                    as_array.extend_from_slice(b"; ");
                    as_map.push(b'[');
                    cat_value(&mut as_map, l, -2, level);
                    as_map.extend_from_slice(b"]=");
                    cat_value(&mut as_map, l, -1, level);
                    as_map.extend_from_slice(b"; ");
                    ffi::lua_settop(l, -2);
                    expected += 1.0;
                }
                let chosen = if is_array { &mut as_array } else { &mut as_map };
                chosen.truncate(chosen.len().saturating_sub(2));
                out.push(b'{');
                out.extend_from_slice(chosen);
                out.push(b'}');
            }
            t @ (ffi::LUA_TFUNCTION | ffi::LUA_TUSERDATA | ffi::LUA_TTHREAD | ffi::LUA_TLIGHTUSERDATA) => {
                let name = match t {
                    ffi::LUA_TFUNCTION => "function",
                    ffi::LUA_TUSERDATA => "userdata",
                    ffi::LUA_TTHREAD => "thread",
                    _ => "light-userdata",
                };
                out.extend_from_slice(format!("\"{name}@{:p}\"", ffi::lua_topointer(l, idx)).as_bytes());
            }
            _ => out.extend_from_slice(b"\"<unknown-lua-type>\""),
        }
    }
}

/// Logs the value on top of the stack after `prefix`, cut at `maxlen`.
unsafe fn log_top_value(l: *mut ffi::lua_State, prefix: &[u8]) {
    let mut entry = prefix.to_vec();
    // SAFETY: the caller has a value on top of the stack.
    unsafe { cat_value(&mut entry, l, -1, 0) };
    with(|s| s.log_with_maxlen(entry));
}

/// `redis.breakpoint()`: true, and the next line stops, in a session.
pub(crate) unsafe extern "C-unwind" fn lua_breakpoint(l: *mut ffi::lua_State) -> c_int {
    let in_session = with(|s| s.lua_breakpoint = true).is_some();
    // SAFETY: one push.
    unsafe { ffi::lua_pushboolean(l, c_int::from(in_session)) };
    1
}

/// `redis.debug(…)`: logs its arguments in a session.
pub(crate) unsafe extern "C-unwind" fn lua_debug(l: *mut ffi::lua_State) -> c_int {
    let Some(line) = with(|s| s.current_line) else { return 0 };
    let mut entry = format!("<debug> line {line}: ").into_bytes();
    // SAFETY: reads of the call's arguments.
    unsafe {
        let argc = ffi::lua_gettop(l);
        for i in 0..argc {
            cat_value(&mut entry, l, -argc + i, 0);
            if i != argc - 1 {
                entry.extend_from_slice(b", ");
            }
        }
    }
    log(entry);
    0
}

const KILLED: &[u8] = b"Script killed by user with SCRIPT KILL...";

/// The session's line hook (Redis's `luaLdbLineHook`), set instead of the
/// count hook, and also called every 100,000 instructions.
pub(crate) unsafe extern "C-unwind" fn line_hook(l: *mut ffi::lua_State, ar: *mut ffi::lua_Debug) {
    // SAFETY: called by Lua with a valid state and record; Rust values are
    // all dropped before `lua_error` (the message is static).
    unsafe {
        let raise = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| on_line(l, ar))).unwrap_or(None);
        if let Some(text) = raise {
            sandbox::push_error(l, text);
            ffi::lua_error(l);
        }
    }
}

/// What the hook does at a line: the error to raise, if the script ends.
unsafe fn on_line(l: *mut ffi::lua_State, ar: *mut ffi::lua_Debug) -> Option<&'static [u8]> {
    // SAFETY: `ar` is the hook's record.
    let (line, event, in_script) = unsafe {
        ffi::lua_getstack(l, 0, ar);
        ffi::lua_getinfo(l, c"Sl".as_ptr(), ar);
        let src = CStr::from_ptr((*ar).short_src.as_ptr()).to_bytes();
        ((*ar).currentline, (*ar).event, memchr::memmem::find(src, b"user_script").is_some())
    };
    let (bp, step) = with(|s| {
        s.current_line = line;
        (s.breakpoints.contains(&line) || s.lua_breakpoint, s.step)
    })?;
    let elapsed_ms = {
        let cx = call::active_run()?;
        let rt = cx.runtime;
        // Stopping the server ends the script, as outside a session.
        if rt.watchdog.halted() {
            rt.killed.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        if rt.killed.load(std::sync::atomic::Ordering::Relaxed) {
            return Some(KILLED);
        }
        let started = rt.started.get().unwrap_or_else(crate::clock::ticks::now);
        let elapsed = crate::clock::ticks::to_us(crate::clock::ticks::now().saturating_sub(started)) / 1000;
        let threshold = rt.watchdog.threshold_ms.get();
        (elapsed, if threshold == 0 { 5000 } else { threshold })
    };
    if !in_script {
        return None;
    }
    let mut timeout = false;
    if event == ffi::LUA_HOOKCOUNT && !step && !bp {
        if elapsed_ms.0 < elapsed_ms.1 {
            return None;
        }
        timeout = true;
    }
    if !step && !bp && !timeout {
        return None;
    }
    with(|s| {
        let reason = if bp {
            if s.lua_breakpoint {
                "redis.breakpoint() called"
            } else {
                "break point"
            }
        } else if timeout {
            "timeout reached, infinite loop?"
        } else {
            "step over"
        };
        s.step = false;
        s.lua_breakpoint = false;
        s.logs.push(format!("* Stopped at {line}, stop reason = {reason}").into_bytes());
        s.log_source_line(line);
        s.send_logs();
    });
    // SAFETY: the hook's state; the REPL leaves the stack as it found it.
    match unsafe { repl(l) } {
        Repl::Raise(text) => return Some(text),
        Repl::Gone if timeout => return Some(b"timeout during Lua debugging with client closing connection"),
        Repl::Gone | Repl::Resume => {}
    }
    // The time the user spent is not the script's.
    let cx = call::active_run()?;
    cx.runtime.started.set(Some(crate::clock::ticks::now()));
    cx.state.script_time = Some(cx.state.clock.now_ms());
    None
}

/// How the REPL ended.
enum Repl {
    /// `step`, `next` or `continue`.
    Resume,
    /// The client is gone: the script runs on without stopping.
    Gone,
    /// The script ends with this error.
    Raise(&'static [u8]),
}

/// Reads and runs debugger commands until one lets the script go on
/// (Redis's `ldbRepl`).
unsafe fn repl(l: *mut ffi::lua_State) -> Repl {
    loop {
        let mut parse = true;
        let argv = loop {
            if parse {
                match with(|s| parse_command(&s.input)) {
                    None => return Repl::Gone,
                    Some(Parsed::Command(argv)) => break argv,
                    Some(Parsed::Error) => return Repl::Raise(b"protocol error"),
                    Some(Parsed::More { until_line_feed }) => parse = !until_line_feed,
                }
            }
            let mut buf = [0u8; 1024];
            let n = with(|s| s.conn.as_mut().map_or(0, |c| c.recv(&mut buf))).unwrap_or(0);
            if n == 0 {
                with(|s| {
                    s.step = false;
                    s.breakpoints.clear();
                });
                return Repl::Gone;
            }
            let overflow = with(|s| {
                s.input.extend_from_slice(&buf[..n]);
                let over = s.input.len() > MAX_INPUT;
                if over {
                    s.input = Vec::new();
                }
                over
            });
            if overflow == Some(true) {
                return Repl::Raise(b"max client buffer reached");
            }
            parse |= buf[..n].contains(&b'\n');
        };
        with(|s| s.input.clear());
        // `strcasecmp`: the name up to a NUL.
        let name = crate::error::c_str(&argv[0], usize::MAX).to_ascii_lowercase();
        let argc = argv.len();
        match name.as_slice() {
            b"h" | b"help" => {
                with(|s| s.logs.extend(HELP.iter().map(|line| line.as_bytes().to_vec())));
            }
            b"s" | b"step" | b"n" | b"next" => {
                with(|s| s.step = true);
                return Repl::Resume;
            }
            b"c" | b"continue" => return Repl::Resume,
            b"t" | b"trace" | b"e" | b"eval" | b"p" | b"print" => protected(l, &argv),
            b"r" | b"redis" if argc > 1 => protected(l, &argv),
            b"m" | b"maxlen" => {
                with(|s| s.maxlen(&argv));
            }
            b"b" | b"break" => {
                with(|s| s.breakpoints(&argv));
            }
            b"a" | b"abort" => return Repl::Raise(b"script aborted for user request"),
            b"l" | b"list" => {
                with(|s| {
                    let mut around = s.current_line;
                    let mut context = 5;
                    if argc > 1 {
                        let n = atoi(&argv[1]);
                        if n > 0 {
                            around = n;
                        }
                    }
                    if argc > 2 {
                        context = atoi(&argv[2]);
                    }
                    s.list(around, context);
                });
            }
            b"w" | b"whole" => {
                with(|s| s.list(1, 1_000_000));
            }
            _ => log(b"<error> Unknown Redis Lua debugger command or wrong number of arguments.".to_vec()),
        }
        with(Session::send_logs);
    }
}

/// Runs a debugger command that works on the Lua state (trace, eval,
/// redis, print) in a protected call (`lua_cpcall`), so that a memory
/// error it raises (growing the stack, pushing a string) ends there
/// rather than unwinding through the REPL's frames, which own the
/// command; what the command itself was building leaks then, as a failed
/// `redis.call` does (see `raw_call`).
fn protected(l: *mut ffi::lua_State, argv: &[Vec<u8>]) {
    let mut argv = argv;
    // SAFETY: the trampoline gets a pointer to `argv`, valid for the call,
    // and owns nothing itself.
    let status = unsafe { ffi::lua_cpcall(l, run_command, (&raw mut argv).cast()) };
    if status != 0 {
        // SAFETY: a failed protected call leaves its error on the stack.
        let entry = [&b"<error> "[..], &unsafe { error_text(l) }].concat();
        // SAFETY: as above.
        unsafe { ffi::lua_settop(l, -2) };
        log(entry);
    }
}

unsafe extern "C-unwind" fn run_command(l: *mut ffi::lua_State) -> c_int {
    // SAFETY: the argument is the pointer `protected` passed, to a slice
    // that outlives the call; the commands leave the stack as they found
    // it, above the argument.
    unsafe {
        let argv = *(ffi::lua_touserdata(l, 1) as *const &[Vec<u8>]);
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // The name is checked by the caller.
            match crate::error::c_str(&argv[0], usize::MAX).to_ascii_lowercase().as_slice() {
                // The script's frames start one level up, past this call's.
                b"t" | b"trace" => trace(l, 1),
                b"e" | b"eval" => eval(l, argv),
                b"r" | b"redis" => redis(l, argv),
                _ if argv.len() == 2 => print(l, &argv[1], 1),
                _ => print_all(l, 1),
            }
        }));
        let _ = run;
        0
    }
}

/// The `trace` command: the script's frames, innermost first, from stack
/// level `base` (the hook's).
unsafe fn trace(l: *mut ffi::lua_State, base: c_int) {
    let mut ar = debug_record();
    let mut level = base;
    // SAFETY: reads of the call stack.
    unsafe {
        while ffi::lua_getstack(l, level, &mut ar) != 0 {
            ffi::lua_getinfo(l, c"Snl".as_ptr(), &mut ar);
            let src = CStr::from_ptr(ar.short_src.as_ptr()).to_bytes();
            if memchr::memmem::find(src, b"user_script").is_some() {
                let name = if ar.name.is_null() { &b"top level"[..] } else { c_bytes(ar.name) };
                let mut entry = if level == base { b"In ".to_vec() } else { b"From ".to_vec() };
                entry.extend_from_slice(name);
                entry.push(b':');
                let line = ar.currentline;
                with(|s| {
                    s.logs.push(entry);
                    s.log_source_line(line);
                });
            }
            level += 1;
        }
    }
    if level == base {
        log(b"<error> Can't retrieve Lua stack.".to_vec());
    }
}

/// Visits the locals of the frame `ar` describes, each on top of the
/// stack while `visit` looks at it, by name; stops when it returns true,
/// and says whether it did.
unsafe fn each_local(l: *mut ffi::lua_State, ar: &ffi::lua_Debug, mut visit: impl FnMut(&[u8]) -> bool) -> bool {
    let mut i = 1;
    // SAFETY: reads of the frame's locals; each one pushed is popped.
    unsafe {
        loop {
            let local = ffi::lua_getlocal(l, ar, i);
            if local.is_null() {
                return false;
            }
            i += 1;
            let stop = visit(c_bytes(local));
            ffi::lua_settop(l, -2);
            if stop {
                return true;
            }
        }
    }
}

/// The `print <var>` command: the innermost local of that name, or the
/// globals KEYS and ARGV (from stack level `base`, as `trace`).
unsafe fn print(l: *mut ffi::lua_State, name: &[u8], base: c_int) {
    let name = crate::error::c_str(name, usize::MAX);
    let mut ar = debug_record();
    let mut level = base;
    // SAFETY: reads of the call stack; what is pushed is popped.
    unsafe {
        while ffi::lua_getstack(l, level, &mut ar) != 0 {
            level += 1;
            let found = each_local(l, &ar, |local| {
                let found = local == name;
                if found {
                    log_top_value(l, b"<value> ");
                }
                found
            });
            if found {
                return;
            }
        }
        if name == b"ARGV" || name == b"KEYS" {
            let global = if name == b"ARGV" { c"ARGV" } else { c"KEYS" };
            ffi::lua_getfield_(l, ffi::LUA_GLOBALSINDEX, global.as_ptr());
            log_top_value(l, b"<value> ");
            ffi::lua_settop(l, -2);
        } else {
            log(b"No such variable.".to_vec());
        }
    }
}

/// The `print` command: every local of the current frame (stack level
/// `base`, as `trace`).
unsafe fn print_all(l: *mut ffi::lua_State, base: c_int) {
    let mut ar = debug_record();
    let mut shown = 0;
    // SAFETY: as `print`.
    unsafe {
        if ffi::lua_getstack(l, base, &mut ar) != 0 {
            each_local(l, &ar, |name| {
                if memchr::memmem::find(name, b"(*temporary)").is_none() {
                    let prefix = [&b"<value> "[..], name, b" = "].concat();
                    log_top_value(l, &prefix);
                    shown += 1;
                }
                false
            });
        }
    }
    if shown == 0 {
        log(b"No local variables in the current context.".to_vec());
    }
}

/// The message of the error value on top of the stack.
unsafe fn error_text(l: *mut ffi::lua_State) -> Vec<u8> {
    // SAFETY: a read of the top slot (a string converts nothing).
    unsafe {
        if ffi::lua_type(l, -1) == ffi::LUA_TSTRING || ffi::lua_type(l, -1) == ffi::LUA_TNUMBER {
            c_bytes(ffi::lua_tolstring(l, -1, std::ptr::null_mut())).to_vec()
        } else {
            b"(error object is not a string)".to_vec()
        }
    }
}

/// The `eval <code>` command: the code as an expression, or else as
/// statements, run in a frame of its own.
unsafe fn eval(l: *mut ffi::lua_State, argv: &[Vec<u8>]) {
    let code = argv[1..].join(&b' ');
    let expr = [&b"return "[..], &code].concat();
    // SAFETY: loads and a protected call; each outcome is popped.
    unsafe {
        if ffi::lua_checkstack(l, 2) == 0 {
            return;
        }
        let load = |text: &[u8]| ffi::luaL_loadbuffer(l, text.as_ptr() as *const c_char, text.len(), c"@ldb_eval".as_ptr());
        if load(&expr) != 0 {
            ffi::lua_settop(l, -2);
            if load(&code) != 0 {
                let entry = [&b"<error> "[..], &error_text(l)].concat();
                ffi::lua_settop(l, -2);
                log(entry);
                return;
            }
        }
        if ffi::lua_pcall(l, 0, 1, 0) != 0 {
            let entry = [&b"<error> "[..], &error_text(l)].concat();
            ffi::lua_settop(l, -2);
            log(entry);
            return;
        }
        log_top_value(l, b"<retval> ");
        ffi::lua_settop(l, -2);
    }
}

/// The `redis <cmd> …` command: `redis.call` with the arguments, logged
/// as the script's own calls are while stepping.
unsafe fn redis(l: *mut ffi::lua_State, argv: &[Vec<u8>]) {
    // SAFETY: pushes after a stack check, then a protected call; the
    // stack is put back as it was.
    unsafe {
        if ffi::lua_checkstack(l, argv.len() as c_int + 1) == 0 {
            log(b"<reply> ".to_vec());
            return;
        }
        let top = ffi::lua_gettop(l);
        ffi::lua_getfield_(l, ffi::LUA_GLOBALSINDEX, c"redis".as_ptr());
        ffi::lua_getfield_(l, -1, c"call".as_ptr());
        for arg in &argv[1..] {
            ffi::lua_pushlstring(l, arg.as_ptr() as *const c_char, arg.len());
        }
        with(|s| s.step = true);
        ffi::lua_pcall(l, argv.len() as c_int - 1, 1, 0);
        with(|s| s.step = false);
        ffi::lua_settop(l, top);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn human(reply: &[u8]) -> String {
        let mut out = Vec::new();
        protocol_to_human(&mut out, reply);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn replies_read_as_redis_shows_them() {
        assert_eq!(human(b"+OK\r\n"), "\"+OK\"");
        assert_eq!(human(b"-ERR no\r\n"), "\"-ERR no\"");
        assert_eq!(human(b":42\r\n"), "42");
        assert_eq!(human(b"$-1\r\n"), "NULL");
        assert_eq!(human(b"$3\r\na\nb\r\n"), "\"a\\nb\"");
        assert_eq!(human(b"*2\r\n$1\r\na\r\n:1\r\n"), "[\"a\",1]");
        assert_eq!(human(b"*-1\r\n"), "NULL");
        assert_eq!(human(b"%1\r\n$1\r\nk\r\n,1.5\r\n"), "{\"k\" => (double) 1.5}");
        assert_eq!(human(b"~1\r\n#t\r\n"), "~(#true)");
        assert_eq!(human(b"_\r\n"), "(null)");
    }

    #[test]
    fn commands_parse_as_redis_reads_them() {
        let Parsed::Command(argv) = parse_command(b"junk*2\r\n$1\r\ns\r\n$2\r\nab\r\nmore") else {
            panic!()
        };
        assert_eq!(argv, vec![b"s".to_vec(), b"ab".to_vec()]);
        assert!(matches!(
            parse_command(b"*2\r\n$1\r\ns\r\n"),
            Parsed::More { until_line_feed: false }
        ));
        assert!(matches!(parse_command(b"*2\r\n$1"), Parsed::More { until_line_feed: true }));
        assert!(matches!(parse_command(b"*1\r\n$3\r\nab"), Parsed::More { until_line_feed: false }));
        assert!(matches!(parse_command(b"*1\r\n$0\r\n\r\n"), Parsed::Error));
        assert!(matches!(parse_command(b"*1025\r\n"), Parsed::Error));
        assert!(matches!(parse_command(b"hello"), Parsed::Error));
        assert!(matches!(parse_command(b"*1\r\n:1\r\n"), Parsed::Error));
        let Parsed::Command(argv) = parse_command(b"*1\r\n$3\r\na\0b\r\n") else {
            panic!()
        };
        assert_eq!(argv, vec![b"a\0b".to_vec()]);
    }

    #[test]
    fn atoi_reads_as_c_does() {
        assert_eq!(atoi(b"  12abc"), 12);
        assert_eq!(atoi(b"-7"), -7);
        assert_eq!(atoi(b"x"), 0);
        assert_eq!(atoi(b"99999999999999999999"), -1);
    }
}
