//! Lua scripting with Redis 7.0's semantics: one Lua 5.1 VM on the engine
//! thread, scripts cached by the SHA1 of their exact body, `redis.call`
//! dispatching through the same command table as clients.
//!
//! The sandbox (read-only globals, the error handler that produces Redis's
//! `… script: <sha>, on @user_script:N.` texts, `pcall`'s error-table rule,
//! `math.random` on Redis's PRNG) is written in Lua in `prelude.lua`; this
//! module owns the VM, the cache and a run. A run lends the engine's state
//! to `redis.call` for exactly the duration of the script (see
//! `call::with_active_run`), so the callback reaches the keyspace without
//! shared ownership or locking.
//!
//! A body that a known Redisson client sends is recognized when it is
//! cached (`native/`); [`Scripting::run`] then runs its Rust twin instead
//! of the VM, unless `native-scripts` is `no`. The script is compiled and
//! cached all the same, so SCRIPT EXISTS, EVALSHA and SCRIPT FLUSH behave
//! as for any script.

pub mod api;
pub mod call;
pub mod convert;
pub mod lua_libs;
pub mod native;
mod raw_call;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use mlua::{Function, HookTriggers, Lua, Table, Value, VmState};

use crate::engine::{Client, State};
use crate::error::{CmdError, CmdResult};
use crate::reply::Reply;

/// How many instructions run between two checks for SCRIPT KILL and the
/// busy threshold (Redis uses the same count).
const HOOK_EVERY: u32 = 100_000;
/// Scripts between two incremental GC steps, as Redis does.
const GC_PERIOD: u32 = 50;

/// Lowercase hex SHA1 of a script body: the name EVALSHA uses.
/// A script's SHA1 as 40 lowercase hex digits: the cache key.
pub type ScriptId = [u8; 40];

/// The cache key for a SHA1 as a client spells it (any case); None when it
/// cannot be one.
pub fn script_id(sha: &[u8]) -> Option<ScriptId> {
    let mut id: ScriptId = sha.try_into().ok()?;
    id.make_ascii_lowercase();
    Some(id)
}

/// A cached script's id as text (its lowercase hex SHA1), for messages.
pub fn sha_text(id: &ScriptId) -> &str {
    std::str::from_utf8(id).unwrap_or_default()
}

pub fn sha1_hex(body: &[u8]) -> String {
    sha1_smol::Sha1::from(body).digest().to_string()
}

/// What the network side learns about a script past `busy-reply-threshold`.
#[derive(Debug, Clone, Copy)]
pub struct BusyScript {
    /// The script has not written: SCRIPT KILL may stop it.
    pub killable: bool,
    pub elapsed_ms: u64,
}

/// What the network side asks of a busy script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BusyAction {
    /// SCRIPT KILL on a script that has not written.
    Kill,
    /// SHUTDOWN NOSAVE: stop the script whatever it did, then the server.
    Shutdown,
}

/// Serves other clients while a script runs too long: called from the Lua
/// hook, it answers them BUSY and reports SCRIPT KILL / SHUTDOWN NOSAVE.
pub type BusyResponder = Box<dyn FnMut(&BusyScript) -> Option<BusyAction>>;

/// Shared by the engine, the Lua hook and the network side.
#[derive(Default)]
pub struct Watchdog {
    /// `busy-reply-threshold` in milliseconds (0: never busy).
    pub threshold_ms: Cell<u64>,
    responder: RefCell<Option<BusyResponder>>,
    /// SHUTDOWN NOSAVE arrived while a script ran.
    pub shutdown_requested: Cell<bool>,
}

impl Watchdog {
    pub fn install(&self, responder: BusyResponder) {
        *self.responder.borrow_mut() = Some(responder);
    }

    /// Called from the hook once a script is past the threshold.
    fn check(&self, script: &BusyScript) -> Option<BusyAction> {
        let mut responder = self.responder.borrow_mut();
        let action = responder.as_mut().and_then(|r| r(script));
        if action == Some(BusyAction::Shutdown) {
            self.shutdown_requested.set(true);
        }
        action
    }
}

/// What a run needs from the rest of the engine and what it reports back.
#[derive(Default)]
pub struct RunFlags {
    /// EVAL_RO / EVALSHA_RO: write commands are refused.
    pub read_only: bool,
    /// `native-scripts yes`: recognized scripts with a native
    /// implementation run as Rust instead of in the VM.
    pub native: bool,
}

/// Per-VM state shared between Rust callbacks registered in Lua.
pub(crate) struct Runtime {
    /// The protocol `redis.setresp` selected for this run.
    pub(crate) resp: Cell<u8>,
    /// Redis's 48-bit `redisLrand48` state: server-wide, it survives SCRIPT FLUSH.
    rng: Rc<Cell<u64>>,
    /// The value a native function raised, for the error handler and `pcall`.
    pending_error: RefCell<Option<Value>>,
    /// Set by SCRIPT KILL (from the busy responder) to stop the running script.
    kill: Arc<AtomicBool>,
    /// The running script has called a write command (it can't be killed).
    wrote: Cell<bool>,
    /// When the running script started, in `clock::ticks`.
    started: Cell<Option<u64>>,
}

struct Cached {
    function: Function,
    shebang: Option<Shebang>,
    /// Set when the body is one a known client sends (`native/`).
    recognized: Option<&'static native::Recognized>,
}

/// A `#!lua flags=…` first line (Redis 7.0 script flags).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shebang {
    pub no_writes: bool,
}

/// Redis's `evalExtractShebangFlags`: the flags and where the Lua code
/// starts (at the first line's newline, so line numbers stay right).
///
/// Quoted words may hold CR and LF (`#!lua "a\r\nb"`); Redis 7.0.15 sends
/// the texts quoting them unchanged (`addReplyErrorSds`), breaking its own
/// reply stream. keylock writes spaces for them, with [`CmdError::new`].
fn parse_shebang(body: &[u8]) -> CmdResult<(Option<Shebang>, usize)> {
    if !body.starts_with(b"#!") {
        return Ok((None, 0));
    }
    let Some(end) = body.iter().position(|&c| c == b'\n') else {
        return Err(CmdError::err("Invalid script shebang"));
    };
    let parts = crate::server::parser::split_args(&body[..end]).unwrap_or_default();
    let Some(engine) = parts.first() else {
        return Err(CmdError::err("Invalid engine in script shebang"));
    };
    if engine.as_slice() != b"#!lua" {
        return Err(CmdError::new(format!(
            "ERR Unexpected engine in script shebang: {}",
            crate::error::quoted(engine)
        )));
    }
    let mut shebang = Shebang::default();
    for part in &parts[1..] {
        let Some(flags) = part.strip_prefix(b"flags=") else {
            return Err(CmdError::new(format!(
                "ERR Unknown lua shebang option: {}",
                crate::error::quoted(part)
            )));
        };
        for flag in flags.split(|&c| c == b',') {
            match flag {
                b"no-writes" => shebang.no_writes = true,
                b"allow-oom" | b"allow-stale" | b"no-cluster" | b"allow-cross-slot-keys" => {}
                other => {
                    return Err(CmdError::new(format!(
                        "ERR Unexpected flag in script shebang: {}",
                        crate::error::quoted(other)
                    )));
                }
            }
        }
    }
    Ok((Some(shebang), end))
}

pub struct Scripting {
    lua: Lua,
    /// The real globals table (scripts see a read-only proxy of it).
    globals: Table,
    /// `xpcall` with Redis's error handler.
    run: Function,
    /// By lowercase hex SHA1: found without allocating or SipHash.
    scripts: HashMap<ScriptId, Cached, ahash::RandomState>,
    runtime: Rc<Runtime>,
    runs_since_gc: u32,
}

/// Redis's initial `redisLrand48` state (the classic rand48 seed).
pub const RAND48_INIT: u64 = 0x1234_ABCD_330E;
const RAND48_MAX: u64 = i32::MAX as u64;

fn rand48_next(x: u64) -> u64 {
    (x.wrapping_mul(0x5_DEEC_E66D).wrapping_add(0xB)) & ((1 << 48) - 1)
}

impl Scripting {
    pub fn new(kill: Arc<AtomicBool>, rng: Rc<Cell<u64>>, watchdog: Rc<Watchdog>) -> mlua::Result<Scripting> {
        // `debug` is opened too: the prelude builds the error handler from it
        // and removes it from the globals before any script can run.
        let lua = lua_libs::new_redis_lua()?;
        let runtime = Rc::new(Runtime {
            resp: Cell::new(2),
            rng,
            pending_error: RefCell::new(None),
            kill,
            wrote: Cell::new(false),
            started: Cell::new(None),
        });
        let globals = lua.globals();
        let native = api::helpers(&lua, &runtime)?;
        let prelude = lua.load(include_str!("prelude.lua")).set_name("=keylock");
        let (proxy, run): (Table, Function) = prelude.call((globals.clone(), native))?;
        lua.set_globals(proxy)?;
        let r = runtime.clone();
        lua.set_hook(HookTriggers::new().every_nth_instruction(HOOK_EVERY), move |lua, _| {
            let threshold = watchdog.threshold_ms.get();
            if threshold > 0
                && let Some(started) = r.started.get()
            {
                let elapsed_ms = crate::clock::ticks::to_us(crate::clock::ticks::now().saturating_sub(started)) / 1000;
                if elapsed_ms >= threshold {
                    let script = BusyScript {
                        killable: !r.wrote.get(),
                        elapsed_ms,
                    };
                    if watchdog.check(&script).is_some() {
                        r.kill.store(true, Ordering::Relaxed);
                    }
                }
            }
            if r.kill.load(Ordering::Relaxed) {
                let t = lua.create_table()?;
                t.set("err", "ERR Script killed by user with SCRIPT KILL...")?;
                *r.pending_error.borrow_mut() = Some(Value::Table(t));
                return Err(mlua::Error::RuntimeError("script killed".into()));
            }
            Ok(VmState::Continue)
        })?;
        Ok(Scripting {
            lua,
            globals,
            run,
            scripts: HashMap::default(),
            runtime,
            runs_since_gc: 0,
        })
    }

    /// Compiles and caches a script; returns its SHA1.
    pub fn load(&mut self, body: &[u8]) -> CmdResult<String> {
        let sha = sha1_hex(body);
        let id = script_id(sha.as_bytes()).ok_or_else(|| CmdError::err("internal: SHA1 is not 40 hex digits"))?;
        if !self.scripts.contains_key(&id) {
            let (shebang, code_starts) = parse_shebang(body)?;
            let function = self.compile(&body[code_starts..])?;
            let recognized = native::NativeTable::get().recognize(&sha);
            self.scripts.insert(
                id,
                Cached {
                    function,
                    shebang,
                    recognized,
                },
            );
        }
        Ok(sha)
    }

    fn compile(&self, body: &[u8]) -> CmdResult<Function> {
        let compile_error = |msg: &str| CmdError::err(format!("Error compiling script (new function): {msg}"));
        if body.first() == Some(&0x1b) {
            // Redis's loader parses binary chunks as text, which fails here.
            return Err(compile_error("user_script:1: unexpected symbol near 'char(27)'"));
        }
        self.lua.load(body).set_name("@user_script").into_function().map_err(|e| match e {
            mlua::Error::SyntaxError { message, .. } => compile_error(&message),
            other => compile_error(&other.to_string()),
        })
    }

    /// Caps the Lua heap (0: no cap); a script that needs more fails with
    /// an out-of-memory error and the server carries on.
    pub fn set_memory_limit(&self, bytes: usize) {
        if let Err(e) = self.lua.set_memory_limit(bytes) {
            tracing::warn!(error = %e, "could not set the Lua memory limit");
        }
    }

    pub fn exists(&self, sha: &[u8]) -> bool {
        script_id(sha).is_some_and(|id| self.scripts.contains_key(&id))
    }

    pub fn cached_count(&self) -> usize {
        self.scripts.len()
    }

    /// Lua heap in use, for INFO.
    pub fn used_memory(&self) -> usize {
        self.lua.used_memory()
    }

    /// True while a script runs and has not written yet (SCRIPT KILL may stop it).
    pub fn killable(&self) -> bool {
        !self.runtime.wrote.get()
    }

    /// Runs a cached script with KEYS and ARGV; the reply is what the
    /// client gets. None when no script has this id.
    pub fn run(
        &mut self,
        state: &mut State,
        caller: &mut Client,
        id: &ScriptId,
        keys: &[Bytes],
        args: &[Bytes],
        flags: &RunFlags,
    ) -> Option<Reply> {
        let cached = self.scripts.get(id)?;
        let recognized = cached.recognized;
        let mut flags = RunFlags {
            read_only: flags.read_only,
            native: flags.native,
        };
        if let Some(shebang) = cached.shebang {
            if !shebang.no_writes && flags.read_only {
                return Some(Reply::Error(Bytes::from_static(
                    b"ERR Can not execute a script with write flag using *_ro command.",
                )));
            }
            flags.read_only |= shebang.no_writes;
        }
        let flags = &flags;
        let rt = &self.runtime;
        rt.wrote.set(false);
        if let Some(script) = recognized {
            if flags.native
                && let Some(implementation) = script.native
                && let Some(reply) = native::run(
                    state,
                    caller,
                    implementation,
                    script.direct,
                    id,
                    keys,
                    args,
                    flags.read_only,
                    &rt.wrote,
                )
            {
                state.stats.recognized_runs(script.index).native += 1;
                return Some(reply);
            }
            state.stats.recognized_runs(script.index).lua += 1;
        }
        // Cloning the function takes a Lua registry reference: only for a
        // run that needs it.
        let function = cached.function.clone();
        rt.resp.set(2);
        rt.kill.store(false, Ordering::Relaxed);
        rt.started.set(Some(crate::clock::ticks::now()));
        *rt.pending_error.borrow_mut() = None;

        let result = self.run_function(state, caller, function, keys, args, flags, sha_text(id));

        self.runtime.started.set(None);
        self.runs_since_gc += 1;
        if self.runs_since_gc >= GC_PERIOD {
            self.runs_since_gc = 0;
            let _ = self.lua.gc_step();
        }
        Some(result)
    }

    #[allow(clippy::too_many_arguments)]
    fn run_function(
        &self,
        state: &mut State,
        caller: &mut Client,
        function: Function,
        keys: &[Bytes],
        args: &[Bytes],
        flags: &RunFlags,
        sha: &str,
    ) -> Reply {
        let lua = &self.lua;
        if let Err(e) = set_keys_and_argv(lua, &self.globals, keys, args) {
            return script_failure(sha, &e.to_string());
        }
        let mut script_client = state.take_script_client(caller);
        let outcome = {
            let mut cx = call::CallContext {
                state: &mut *state,
                client: &mut script_client,
                read_only: flags.read_only,
                runtime_resp: &self.runtime.resp,
                wrote: &self.runtime.wrote,
            };
            call::with_active_run(lua, &mut cx, || self.run.call::<(bool, Value)>(function))
        };
        state.return_script_client(script_client);
        match outcome {
            Ok((true, value)) => convert::lua_to_reply(&value, self.runtime.resp.get()),
            Ok((false, Value::Table(err))) => convert::script_error(&err, sha),
            Ok((false, other)) => {
                let msg = match other {
                    Value::String(s) => s.to_string_lossy(),
                    _ => "execution failure".to_string(),
                };
                if msg == "not enough memory" {
                    // Free what the failed script left behind before anything else runs.
                    let _ = self.lua.gc_collect();
                    return Reply::Error(Bytes::from(format!(
                        "ERR Error running script, not enough memory: the Lua heap reached lua-memory-limit ({} bytes) script: {sha}",
                        state.runtime.lua_memory_limit
                    )));
                }
                script_failure(sha, &msg)
            }
            Err(e) => script_failure(sha, &e.to_string()),
        }
    }
}

/// Redis's reply when the error object is not a table (memory errors, …):
/// `addReplyErrorFormat(c, "Error running script %s, %.100s\n", …)`, so
/// the message stops at a NUL or after 100 bytes, and the final newline is
/// trimmed away with any line breaks ending the message.
fn script_failure(sha: &str, msg: &str) -> Reply {
    let msg = crate::error::c_str(msg.as_bytes(), 100);
    let text = format!("Error running script f_{sha}, {}\n", String::from_utf8_lossy(msg));
    Reply::from(CmdError::err(text))
}

/// Sets the globals KEYS and ARGV to fresh arrays of the arguments.
///
/// Built with the raw C API inside one protected call: through mlua's
/// safe API every table store and string is its own protected call (a C
/// closure allocated each time), which was ~28% of running a small script
/// such as Redisson's lock-acquire.
fn set_keys_and_argv(lua: &Lua, globals: &Table, keys: &[Bytes], args: &[Bytes]) -> mlua::Result<()> {
    use mlua::ffi;
    // SAFETY: `f` runs inside mlua's protected call (a C function, so
    // LUA_MINSTACK = 20 free slots) with the globals table at stack index
    // 1; it uses at most three more slots, leaves the stack empty, and a
    // Lua error (out of memory) unwinds to that protected call.
    unsafe {
        lua.exec_raw::<()>(globals.clone(), |state| {
            for (name, items) in [(c"KEYS", keys), (c"ARGV", args)] {
                ffi::lua_pushstring(state, name.as_ptr());
                ffi::lua_createtable(state, items.len() as std::ffi::c_int, 0);
                for (i, item) in items.iter().enumerate() {
                    ffi::lua_pushlstring(state, item.as_ptr() as *const std::ffi::c_char, item.len());
                    ffi::lua_rawseti(state, -2, (i + 1) as ffi::lua_Integer);
                }
                ffi::lua_rawset(state, 1);
            }
            ffi::lua_settop(state, 0);
        })
    }
}

/// `REDIS_VERSION_NUM`: 0x00MMmmpp.
pub(crate) fn redis_version_num() -> f64 {
    let mut parts = crate::REDIS_VERSION.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (a, b, c) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    ((a << 16) | (b << 8) | c) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rand48_matches_redis_math_random() {
        // A fresh Redis 7.0.15 answers `return {math.random(1000000), math.random(1000000)}`
        // with 396465, 840486, and the next script with 353337, 446584.
        let mut x = RAND48_INIT;
        let mut out = Vec::new();
        for _ in 0..4 {
            x = rand48_next(x);
            let r = (((x >> 17) & 0x7FFF_FFFF) % RAND48_MAX) as f64 / RAND48_MAX as f64;
            out.push((r * 1_000_000.0).floor() as i64 + 1);
        }
        assert_eq!(out, vec![396465, 840486, 353337, 446584]);
    }

    #[test]
    fn version_num_is_hex_packed() {
        assert_eq!(redis_version_num(), 0x07000f as f64);
    }
}
