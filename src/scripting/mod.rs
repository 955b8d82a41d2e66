//! Lua scripting with Redis 7.0's semantics: one Lua 5.1 VM (Redis's own,
//! see `lua_libs`) on the engine thread, scripts cached by the SHA1 of
//! their exact body, `redis.call` dispatching through the same command
//! table as clients.
//!
//! A run is Redis's `luaCallFunction`: KEYS and ARGV are set with the
//! globals' protection lifted for that moment, the compiled function is
//! called with `__redis__err__handler` as the error handler, and the
//! result (or the error table) is converted on the Lua stack. `redis.call`
//! reaches the engine's state through `call::with_active_run` for exactly
//! the duration of the script, without shared ownership or locking.
//!
//! Long scripts: a count hook every 100,000 instructions serves other
//! clients past `busy-reply-threshold` and ends the script on SCRIPT KILL,
//! SHUTDOWN NOSAVE, or the server being stopped from outside. A killed script gets the error again on every line it reaches
//! (the hook switches to a line hook), so `pcall` cannot swallow it; and
//! `xpcall` (`sandbox.rs`) does not run the script's own handler for it,
//! because Lua runs error handlers raised from a hook with hooks disabled:
//! a handler that loops would never be interrupted again (Redis 7.0.15
//! hangs there; keylock ends the script).
//!
//! Recursion is bounded everywhere a script can drive it: Lua's own
//! limits (LUAI_MAXCALLS frames, LUAI_MAXCCALLS nested C calls), the
//! result conversion (`convert.rs`, checked against Lua's stack limit as
//! in Redis), the pattern matcher (a depth limit in keylock's Lua) and the
//! libraries' nesting limits (cjson 1000, cmsgpack's stack checks). The
//! server thread's stack is sized for the deepest of them
//! (`server::ENGINE_STACK_BYTES`).
//!
//! A body that a known Redisson client sends is recognized when it is
//! cached (`native/`); [`Scripting::run`] then runs its Rust twin instead
//! of the VM, unless `native-scripts` is `no`. The script is compiled and
//! cached all the same, so SCRIPT EXISTS, EVALSHA and SCRIPT FLUSH behave
//! as for any script.

pub mod call;
pub mod convert;
pub mod function_dump;
pub mod functions;
pub mod ldb;
pub mod lua_libs;
pub mod native;
mod raw_call;
pub(crate) mod sandbox;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::{c_char, c_int};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use mlua::{Lua, ffi};

use crate::engine::{Client, State};
use crate::error::{CmdError, CmdResult};
use crate::reply::Reply;

pub use sandbox::RAND48_INIT;

/// How many instructions run between two checks for SCRIPT KILL and the
/// busy threshold (Redis uses the same count).
pub(crate) const HOOK_EVERY: c_int = 100_000;
/// Scripts between two incremental GC steps, and the step's size, as Redis
/// does (`LUA_GC_CYCLE_PERIOD`).
const GC_PERIOD: u32 = 50;

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
#[derive(Debug, Clone)]
pub struct BusyScript {
    /// The script has not written: SCRIPT KILL (FUNCTION KILL) may stop it.
    pub killable: bool,
    pub elapsed_ms: u64,
    /// The FCALL running, None for an EVAL: it decides which BUSY text
    /// clients get and which of SCRIPT KILL and FUNCTION KILL stops it.
    pub function: Option<Rc<RunningFunction>>,
}

/// A function being run by FCALL / FCALL_RO, as FUNCTION STATS shows it.
#[derive(Debug)]
pub struct RunningFunction {
    pub name: Bytes,
    /// The caller's command line.
    pub command: Vec<Bytes>,
    /// When it started, in `clock::ticks`.
    pub started: u64,
    /// The libraries and functions loaded (FUNCTION STATS' counts, which
    /// nothing changes while it runs).
    pub counts: (usize, usize),
}

impl RunningFunction {
    /// FUNCTION STATS' `duration_ms`.
    pub fn duration_ms(&self) -> u64 {
        crate::clock::ticks::to_us(crate::clock::ticks::now().saturating_sub(self.started)) / 1000
    }
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
/// hook with the engine state, it reads their connections, has the engine
/// answer what they sent (`State::serve_while_busy`: BUSY, or the command
/// itself when it is `allow-busy`) and reports SCRIPT KILL / SHUTDOWN
/// NOSAVE. The network side installs it; scripting knows nothing of
/// sockets. Called without a script while the dataset loads at start
/// (`LOADING`, or the command itself when it is flagged `loading`).
pub type BusyResponder = Box<dyn FnMut(Option<&BusyScript>, &mut State) -> Option<BusyAction>>;

/// Shared by the engine, the Lua hook and the network side.
#[derive(Default)]
pub struct Watchdog {
    /// `busy-reply-threshold` in milliseconds (0: never busy).
    pub threshold_ms: Cell<u64>,
    responder: RefCell<Option<BusyResponder>>,
    /// Lends a client's connection to a Lua debugging session.
    debug_connector: RefCell<Option<ldb::DebugConnector>>,
    /// SHUTDOWN NOSAVE arrived while a script ran.
    pub shutdown_requested: Cell<bool>,
    /// The server is being stopped from outside (`ServerHandle::shutdown`,
    /// a `Stopper`, SIGTERM): a running script is ended, whatever it did,
    /// as SHUTDOWN NOSAVE would end it.
    pub halt: Arc<AtomicBool>,
    /// `lua-enable-deprecated-api`: new VMs keep `getfenv`, `setfenv` and
    /// `newproxy` in their globals.
    pub deprecated_api: Cell<bool>,
}

impl Watchdog {
    /// A watchdog that ends a running script once `halt` is set.
    pub fn with_halt(halt: Arc<AtomicBool>) -> Watchdog {
        Watchdog {
            halt,
            ..Watchdog::default()
        }
    }

    pub fn install(&self, responder: BusyResponder) {
        *self.responder.borrow_mut() = Some(responder);
    }

    pub fn install_debug_connector(&self, connector: ldb::DebugConnector) {
        *self.debug_connector.borrow_mut() = Some(connector);
    }

    /// The connection of client `id`, for a Lua debugging session (None
    /// with no network side, as in-process benches run the engine).
    pub fn debug_conn(&self, id: crate::db::ClientId) -> Option<Box<dyn ldb::DebugConn>> {
        self.debug_connector.borrow().as_ref().and_then(|connect| connect(id))
    }

    /// Called from the hook once a script is past the threshold.
    fn check(&self, script: &BusyScript, state: &mut State) -> Option<BusyAction> {
        let mut responder = self.responder.borrow_mut();
        let action = responder.as_mut().and_then(|r| r(Some(script), state));
        if action == Some(BusyAction::Shutdown) {
            self.shutdown_requested.set(true);
        }
        action
    }

    /// The server is being stopped from outside.
    pub fn halted(&self) -> bool {
        self.halt.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Serves other clients while the dataset loads at start.
    pub fn serve_while_loading(&self, state: &mut State) {
        if let Some(responder) = self.responder.borrow_mut().as_mut() {
            responder(None, state);
        }
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

/// Per-VM state the C functions and the hook reach through the active run.
pub(crate) struct Runtime {
    /// The protocol `redis.setresp` selected for this run.
    pub(crate) resp: Cell<u8>,
    /// Redis's 48-bit `redisLrand48` state: server-wide, it survives SCRIPT FLUSH.
    pub(crate) rng: Rc<Cell<u64>>,
    /// Set once the running script is being stopped (SCRIPT KILL, SHUTDOWN).
    pub(crate) killed: Arc<AtomicBool>,
    /// The running script has called a write command (it can't be killed).
    pub(crate) wrote: Cell<bool>,
    /// When the running script started, in `clock::ticks`.
    started: Cell<Option<u64>>,
    /// The function running, when the run is an FCALL.
    function: RefCell<Option<Rc<RunningFunction>>>,
    watchdog: Rc<Watchdog>,
}

impl Runtime {
    pub(crate) fn new(kill: Arc<AtomicBool>, rng: Rc<Cell<u64>>, watchdog: Rc<Watchdog>) -> Rc<Runtime> {
        Rc::new(Runtime {
            resp: Cell::new(2),
            rng,
            killed: kill,
            wrote: Cell::new(false),
            started: Cell::new(None),
            function: RefCell::new(None),
            watchdog,
        })
    }
}

struct Cached {
    /// The compiled function, referenced from the Lua registry.
    function: c_int,
    shebang: Option<Shebang>,
    /// Set when the body is one a known client sends (`native/`).
    recognized: Option<&'static native::Recognized>,
}

/// A `#!lua flags=…` first line (Redis 7.0 script flags).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shebang {
    pub no_writes: bool,
    pub allow_oom: bool,
    pub allow_stale: bool,
    pub no_cluster: bool,
    pub allow_cross_slot: bool,
}

/// The flags a body's `#!lua` line declares (None: no shebang, or one
/// that does not parse; EVAL then answers the error itself).
pub fn shebang_of(body: &[u8]) -> Option<Shebang> {
    parse_shebang(body).ok().and_then(|(shebang, _)| shebang)
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
    let parts = crate::request::split_args(&body[..end]).unwrap_or_default();
    let Some(engine) = parts.first() else {
        return Err(CmdError::err("Invalid engine in script shebang"));
    };
    if engine.as_slice() != b"#!lua" {
        return Err(CmdError::new_bytes(
            [b"ERR Unexpected engine in script shebang: ", crate::error::quoted(engine)].concat(),
        ));
    }
    let mut shebang = Shebang::default();
    for part in &parts[1..] {
        let Some(flags) = part.strip_prefix(b"flags=") else {
            return Err(CmdError::new_bytes(
                [b"ERR Unknown lua shebang option: ", crate::error::quoted(part)].concat(),
            ));
        };
        // sdssplitlen gives no parts for an empty list (`flags=`).
        for flag in flags.split(|&c| c == b',').filter(|_| !flags.is_empty()) {
            match flag {
                b"no-writes" => shebang.no_writes = true,
                b"allow-oom" => shebang.allow_oom = true,
                b"allow-stale" => shebang.allow_stale = true,
                b"no-cluster" => shebang.no_cluster = true,
                b"allow-cross-slot-keys" => shebang.allow_cross_slot = true,
                other => {
                    return Err(CmdError::new_bytes(
                        [b"ERR Unexpected flag in script shebang: ", crate::error::quoted(other)].concat(),
                    ));
                }
            }
        }
    }
    Ok((Some(shebang), end))
}

/// One Lua VM with what a run needs around it: the EVAL VM inside
/// [`Scripting`], and the functions' own VM (`functions.rs`), which Redis
/// also keeps apart.
pub(crate) struct Vm {
    pub(crate) lua: Lua,
    /// The VM's main thread, for the raw calls of a run.
    pub(crate) state: *mut ffi::lua_State,
    pub(crate) runtime: Rc<Runtime>,
    runs_since_gc: u32,
}

/// What a run calls: an EVAL script (KEYS and ARGV as globals, no
/// arguments, the global error handler) or a function (KEYS and ARGV as
/// its two arguments, the error handler kept in the registry).
#[derive(Clone, Copy)]
pub(crate) enum Callee {
    Script { function: c_int },
    Function { function: c_int, handler: c_int },
}

impl Vm {
    /// A VM made by `lua_libs::new_redis_lua`, with `install` run on its
    /// main thread in a protected call.
    pub(crate) fn new(runtime: Rc<Runtime>, install: unsafe fn(*mut ffi::lua_State)) -> mlua::Result<Vm> {
        let lua = lua_libs::new_redis_lua(runtime.watchdog.deprecated_api.get())?;
        let mut state: *mut ffi::lua_State = std::ptr::null_mut();
        // SAFETY: `install` runs in mlua's protected call on the VM's main
        // thread, which is the state every later run uses.
        unsafe {
            lua.exec_raw::<()>((), |s| {
                install(s);
                state = s;
            })?;
        }
        Ok(Vm {
            lua,
            state,
            runtime,
            runs_since_gc: 0,
        })
    }

    /// Caps the Lua heap (0: no cap); a script that needs more fails with
    /// an out-of-memory error and the server carries on.
    pub(crate) fn set_memory_limit(&self, bytes: usize) {
        if let Err(e) = self.lua.set_memory_limit(bytes) {
            tracing::warn!(error = %e, "could not set the Lua memory limit");
        }
    }

    /// Runs `callee` with KEYS and ARGV as the client `caller`'s command
    /// (its commands run as `script_client`); `name` is what errors call
    /// it (the SHA1, or the function's name).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run(
        &mut self,
        state: &mut State,
        caller: &mut Client,
        script_client: &mut Client,
        callee: Callee,
        keys: &[Bytes],
        args: &[Bytes],
        limits: call::ScriptLimits,
        name: &str,
    ) -> Reply {
        let rt = &self.runtime;
        rt.resp.set(2);
        rt.killed.store(false, Ordering::Relaxed);
        rt.started.set(Some(crate::clock::ticks::now()));
        // SAFETY: the tables are built in mlua's protected call; whatever
        // happened there, the globals are locked again afterwards.
        let arrays = unsafe {
            match callee {
                Callee::Script { .. } => {
                    let set = self.lua.exec_raw::<()>((), |s| set_keys_and_argv(s, keys, args));
                    sandbox::lua_enablereadonlytable(self.state, ffi::LUA_GLOBALSINDEX, 1);
                    set.map(|()| None)
                }
                Callee::Function { .. } => {
                    let mut refs = (0, 0);
                    self.lua
                        .exec_raw::<()>((), |s| {
                            refs.0 = new_array_ref(s, keys);
                            refs.1 = new_array_ref(s, args);
                        })
                        .map(|()| Some(refs))
                }
            }
        };
        let reply = match arrays {
            Err(e) => script_failure(name, &e.to_string()),
            Ok(arrays) => {
                script_client.begin_script_run(caller, keys);
                if state.acl.checks(caller.user.as_deref()) {
                    // What the run's ACL LOG entries name (Redis's script_caller).
                    script_client.caller_info = Some(caller.info_line(state.clock.now_ms()));
                }
                let runtime = self.runtime.clone();
                let reply = {
                    let mut cx = call::CallContext {
                        state: &mut *state,
                        client: &mut *script_client,
                        limits,
                        runtime: &runtime,
                    };
                    // SAFETY: the VM is idle (no Lua call in progress) and
                    // owned by this engine thread; see `call`.
                    let limit = cx.state.runtime.lua_memory_limit;
                    call::with_active_run(&mut cx, || unsafe { self.call(callee, arrays, limit, name) })
                };
                script_client.end_script_run(caller);
                reply
            }
        };
        self.runtime.started.set(None);
        if let Reply::Error(e) = &reply
            && e.starts_with(b"ERR Error running script")
            && e.ends_with(b"not enough memory")
        {
            // Free what the failed script left behind before anything else runs.
            let _ = self.lua.gc_collect();
            return Reply::Error(Bytes::from(format!(
                "ERR Error running script, not enough memory: the Lua heap reached lua-memory-limit ({} bytes) script: {name}",
                state.runtime.lua_memory_limit
            )));
        }
        reply
    }

    /// The call itself, as Redis's `luaCallFunction` makes it: the error
    /// handler, then the function (and for a function its two arrays),
    /// called with `lua_pcall` from the top of the VM's stack (so Lua's
    /// C-call and stack limits count as in Redis), then the conversion of
    /// what it left.
    ///
    /// # Safety
    /// No Lua call may be in progress on the VM, and a run must be active.
    unsafe fn call(&mut self, callee: Callee, arrays: Option<(c_int, c_int)>, reply_limit: usize, name: &str) -> Reply {
        let l = self.state;
        // SAFETY: pushes of existing values (the handler is a global or a
        // registry entry, the function and arrays registry entries) after
        // a protected stack check, then a protected call; nothing here can
        // raise outside it.
        unsafe {
            let top = ffi::lua_gettop(l);
            let release = |l: *mut ffi::lua_State| {
                if let Some((keys, args)) = arrays {
                    ffi::luaL_unref(l, ffi::LUA_REGISTRYINDEX, keys);
                    ffi::luaL_unref(l, ffi::LUA_REGISTRYINDEX, args);
                }
            };
            if ffi::lua_checkstack(l, 4) == 0 {
                release(l);
                return script_failure(name, "not enough memory");
            }
            let (nargs, handler_at) = match (callee, arrays) {
                (Callee::Function { function, handler }, Some((keys, args))) => {
                    ffi::lua_rawgeti_(l, ffi::LUA_REGISTRYINDEX, handler);
                    ffi::lua_rawgeti_(l, ffi::LUA_REGISTRYINDEX, function);
                    ffi::lua_rawgeti_(l, ffi::LUA_REGISTRYINDEX, keys);
                    ffi::lua_rawgeti_(l, ffi::LUA_REGISTRYINDEX, args);
                    (2, -4)
                }
                (Callee::Script { function }, _) | (Callee::Function { function, .. }, None) => {
                    ffi::lua_getfield_(l, ffi::LUA_GLOBALSINDEX, c"__redis__err__handler".as_ptr());
                    ffi::lua_rawgeti_(l, ffi::LUA_REGISTRYINDEX, function);
                    (0, -2)
                }
            };
            release(l);
            // Redis sets the hook only with a busy threshold; keylock
            // always does, so that stopping the server ends any script. A
            // debugging session stops at lines instead.
            if ldb::active() {
                ffi::lua_sethook(l, Some(ldb::line_hook), ffi::LUA_MASKLINE | ffi::LUA_MASKCOUNT, HOOK_EVERY);
            } else {
                ffi::lua_sethook(l, Some(count_hook), ffi::LUA_MASKCOUNT, HOOK_EVERY);
            }
            let status = ffi::lua_pcall(l, nargs, 1, handler_at);

            self.runs_since_gc += 1;
            if self.runs_since_gc == GC_PERIOD {
                self.runs_since_gc = 0;
                ffi::lua_gc(l, ffi::LUA_GCSTEP, GC_PERIOD as c_int);
            }

            let reply = if status == 0 {
                let mut conv = convert::Conversion::new(reply_limit);
                let reply = convert::lua_to_reply(l, self.runtime.resp.get(), &mut conv);
                if conv.exceeded() {
                    Reply::Error(Bytes::from(format!(
                        "ERR Error running script, result too large: converted, it would take more than {} bytes script: {name}",
                        convert::Conversion::limit(reply_limit)
                    )))
                } else {
                    book_result_errors(&reply, &conv.errors);
                    reply
                }
            } else if ffi::lua_type(l, -1) == ffi::LUA_TTABLE {
                let info = convert::ErrorInfo::of_table(l);
                if info.counted {
                    error_already_counted();
                }
                info.into_reply(name)
            } else {
                let msg = match ffi::lua_type(l, -1) {
                    ffi::LUA_TSTRING => {
                        let mut len = 0usize;
                        let p = ffi::lua_tolstring(l, -1, &mut len);
                        String::from_utf8_lossy(std::slice::from_raw_parts(p as *const u8, len)).into_owned()
                    }
                    ffi::LUA_TNUMBER => crate::numfmt::fmt_g(ffi::lua_tonumber(l, -1), 14),
                    _ => "execution failure".to_string(),
                };
                script_failure(name, &msg)
            };
            ffi::lua_sethook(l, None, 0, 0);
            ffi::lua_settop(l, top);
            reply
        }
    }
}

pub struct Scripting {
    vm: Vm,
    /// By lowercase hex SHA1: found without allocating or SipHash.
    scripts: HashMap<ScriptId, Cached, ahash::RandomState>,
    /// What the cache holds besides the VM: each body, its SHA1 and its
    /// entry (Redis's `used_memory_scripts_eval`).
    cache_bytes: usize,
}

/// A cached script's bookkeeping besides its body and SHA1 (Redis's dict
/// entry and `luaScript`, about this much).
const CACHE_ENTRY_BYTES: usize = 64;

impl Scripting {
    pub fn new(kill: Arc<AtomicBool>, rng: Rc<Cell<u64>>, watchdog: Rc<Watchdog>) -> mlua::Result<Scripting> {
        let vm = Vm::new(Runtime::new(kill, rng, watchdog), sandbox::install)?;
        Ok(Scripting {
            vm,
            scripts: HashMap::default(),
            cache_bytes: 0,
        })
    }

    /// Compiles and caches a script; returns its SHA1.
    pub fn load(&mut self, body: &[u8]) -> CmdResult<String> {
        let sha = sha1_hex(body);
        let id = script_id(sha.as_bytes()).ok_or_else(|| CmdError::err("internal: SHA1 is not 40 hex digits"))?;
        if !self.scripts.contains_key(&id) {
            let (shebang, code_starts) = parse_shebang(body)?;
            let function = compile(&self.vm.lua, &body[code_starts..], c"@user_script")
                .map_err(|msg| CmdError::err(format!("Error compiling script (new function): {msg}")))?;
            let recognized = native::NativeTable::get().recognize(&sha);
            self.cache_bytes += body.len() + sha.len() + CACHE_ENTRY_BYTES;
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

    /// Caps the Lua heap (0: no cap); a script that needs more fails with
    /// an out-of-memory error and the server carries on.
    pub fn set_memory_limit(&self, bytes: usize) {
        self.vm.set_memory_limit(bytes);
    }

    /// The flags a cached script declared, by its SHA1 (None: not cached,
    /// or no shebang).
    pub fn declared_flags(&self, sha: &[u8]) -> Option<Shebang> {
        self.scripts.get(&script_id(sha)?)?.shebang
    }

    pub fn exists(&self, sha: &[u8]) -> bool {
        script_id(sha).is_some_and(|id| self.scripts.contains_key(&id))
    }

    pub fn cached_count(&self) -> usize {
        self.scripts.len()
    }

    /// Lua heap in use, for INFO.
    pub fn used_memory(&self) -> usize {
        self.vm.lua.used_memory()
    }

    /// The script cache's own memory (bodies, SHA1s, entries), for INFO.
    pub fn cache_memory(&self) -> usize {
        self.cache_bytes
    }

    /// Runs a cached script with KEYS and ARGV; the reply is what the
    /// client gets. None when no script has this id. The script's
    /// commands run as `script_client`, acting for `caller`.
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &mut self,
        state: &mut State,
        caller: &mut Client,
        script_client: &mut Client,
        id: &ScriptId,
        keys: &[Bytes],
        args: &[Bytes],
        flags: &RunFlags,
    ) -> Option<Reply> {
        let cached = self.scripts.get(id)?;
        let recognized = cached.recognized;
        let function = cached.function;
        let mut flags = RunFlags {
            read_only: flags.read_only,
            native: flags.native,
        };
        let mut allow_oom = false;
        // A script without a shebang may touch keys of any slot here.
        let mut allow_cross_slot = true;
        if let Some(shebang) = cached.shebang {
            if let Err(refused) = prepare_declared(state, shebang, flags.read_only) {
                return Some(refused);
            }
            flags.read_only |= shebang.no_writes;
            allow_oom = shebang.allow_oom;
            allow_cross_slot = shebang.allow_cross_slot;
        }
        let limits = call::ScriptLimits::of(state, flags.read_only, allow_oom).in_cluster(state, caller, keys, allow_cross_slot);
        let flags = &flags;
        let rt = &self.vm.runtime;
        rt.wrote.set(false);
        if let Some(script) = recognized {
            if flags.native
                && let Some(implementation) = script.native
                && let Some(reply) = native::run(
                    state,
                    caller,
                    script_client,
                    implementation,
                    script.direct,
                    id,
                    keys,
                    args,
                    limits.clone(),
                    &rt.wrote,
                )
            {
                state.stats.recognized_runs(script.index).native += 1;
                return Some(reply);
            }
            state.stats.recognized_runs(script.index).lua += 1;
        }
        Some(self.vm.run(
            state,
            caller,
            script_client,
            Callee::Script { function },
            keys,
            args,
            limits,
            sha_text(id),
        ))
    }
}

/// Redis's `scriptPrepareForRun` checks for a script that declared its
/// flags (a shebang, or a function): the refusal the client gets, if any.
pub(crate) fn prepare_declared(state: &State, shebang: Shebang, read_only: bool) -> Result<(), Reply> {
    if shebang.no_cluster && state.cluster_enabled() {
        return Err(Reply::Error(Bytes::from_static(
            b"ERR Can not run script on cluster, 'no-cluster' flag is set.",
        )));
    }
    if state.serving_stale_refused() && !shebang.allow_stale {
        return Err(Reply::Error(Bytes::from_static(
            b"MASTERDOWN Link with MASTER is down, replica-serve-stale-data is set to 'no' and 'allow-stale' flag is not set on the script.",
        )));
    }
    if !shebang.no_writes {
        if !state.accepts_writes() {
            return Err(Reply::Error(Bytes::from_static(
                b"READONLY Can not run script with write flag on readonly replica",
            )));
        }
        if read_only {
            return Err(Reply::Error(Bytes::from_static(
                b"ERR Can not execute a script with write flag using *_ro command.",
            )));
        }
        if !state.enough_good_replicas() {
            return Err(Reply::Error(Bytes::from_static(crate::engine::NOREPLICAS.as_bytes())));
        }
    }
    if state.pre_command_oom && state.runtime.maxmemory > 0 && !shebang.allow_oom && !shebang.no_writes {
        return Err(Reply::Error(Bytes::from_static(
            b"OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'",
        )));
    }
    Ok(())
}

/// `luaL_loadbuffer` under the chunk name `chunk` (Redis's Lua refuses
/// binary chunks); the function is kept in the registry. The error is
/// the loader's message.
pub(crate) fn compile(lua: &Lua, body: &[u8], chunk: &std::ffi::CStr) -> Result<c_int, String> {
    let mut outcome: Result<c_int, Vec<u8>> = Err(Vec::new());
    // SAFETY: in mlua's protected call; the loader reports syntax and
    // memory errors as a status, and the message is copied out before
    // anything else runs. luaL_ref may raise (memory), before which
    // nothing is owned.
    let called = unsafe {
        lua.exec_raw::<()>((), |s| {
            let status = ffi::luaL_loadbuffer(s, body.as_ptr() as *const c_char, body.len(), chunk.as_ptr());
            if status == 0 {
                outcome = Ok(ffi::luaL_ref(s, ffi::LUA_REGISTRYINDEX));
            } else {
                let mut len = 0usize;
                let p = ffi::lua_tolstring(s, -1, &mut len);
                if !p.is_null() {
                    outcome = Err(std::slice::from_raw_parts(p as *const u8, len).to_vec());
                }
                ffi::lua_pop(s, 1);
            }
        })
    };
    match (called, outcome) {
        (Ok(()), Ok(function)) => Ok(function),
        (Ok(()), Err(msg)) => Err(String::from_utf8_lossy(&msg).into_owned()),
        (Err(e), _) => Err(e.to_string()),
    }
}

/// Books the error replies a script's result holds as Redis counts the
/// errors it sends: each one, nested ones included, except those counted
/// where they arose (a command's own error, returned by `redis.pcall`).
/// A top-level error is left to the command boundary, which counts the
/// EVAL's error reply, unless it was counted already.
fn book_result_errors(reply: &Reply, errors: &[(Bytes, bool)]) {
    let Some(cx) = call::active_run() else { return };
    for (text, counted) in errors {
        if *counted {
            cx.state.reply_counted_errors += 1;
        } else if !reply.is_error() {
            cx.state.stats.count_error_text(text);
        }
    }
}

/// The EVAL's error reply was counted where it arose.
fn error_already_counted() {
    if let Some(cx) = call::active_run() {
        cx.state.reply_counted_errors = 1;
    }
}

/// Redis's `luaMaskCountHook`: every 100,000 instructions, and on every
/// line once the script is being stopped. Past the threshold it lets the
/// network side serve other clients; on SCRIPT KILL or SHUTDOWN NOSAVE it
/// raises `Script killed by user with SCRIPT KILL...`.
unsafe extern "C-unwind" fn count_hook(state: *mut ffi::lua_State, _ar: *mut ffi::lua_Debug) {
    // The decision runs Rust code (the busy responder); a panic there must
    // not unwind into Lua's C frames.
    let stop = std::panic::catch_unwind(script_interrupted).unwrap_or(false);
    if stop {
        // SAFETY: nothing owned is alive here; the error table is built
        // and raised by Lua.
        unsafe {
            ffi::lua_sethook(state, Some(count_hook), ffi::LUA_MASKLINE, 0);
            sandbox::push_error(state, b"Script killed by user with SCRIPT KILL...");
            ffi::lua_error(state);
        }
    }
}

/// Redis's `scriptInterrupt`: whether the running script must stop now.
fn script_interrupted() -> bool {
    let Some(cx) = call::active_run() else {
        return false;
    };
    let rt = cx.runtime;
    if rt.killed.load(Ordering::Relaxed) {
        return true;
    }
    if rt.watchdog.halt.load(Ordering::Relaxed) {
        rt.killed.store(true, Ordering::Relaxed);
        return true;
    }
    let threshold = rt.watchdog.threshold_ms.get();
    let Some(started) = rt.started.get() else {
        return false;
    };
    let elapsed_ms = crate::clock::ticks::to_us(crate::clock::ticks::now().saturating_sub(started)) / 1000;
    if threshold == 0 || elapsed_ms < threshold {
        return false;
    }
    let script = BusyScript {
        killable: !rt.wrote.get(),
        elapsed_ms,
        function: rt.function.borrow().clone(),
    };
    if rt.watchdog.check(&script, cx.state).is_some() {
        rt.killed.store(true, Ordering::Relaxed);
        return true;
    }
    false
}

/// Whether the running script is being stopped (for `xpcall`'s guard).
pub(crate) fn run_killed() -> bool {
    call::active_run().is_some_and(|cx| cx.runtime.killed.load(Ordering::Relaxed))
}

/// Redis's reply when the error object is not a table (memory errors, …):
/// `addReplyErrorFormat(c, "Error running script %s, %.100s\n", …)`, so
/// the message stops at a NUL or after 100 bytes, and the final newline is
/// trimmed away with any line breaks ending the message. The script is
/// named by its SHA1 (`run_ctx->funcname` in 7.0, without 6.x's `f_`).
fn script_failure(sha: &str, msg: &str) -> Reply {
    let msg = crate::error::c_str(msg.as_bytes(), 100);
    let text = format!("Error running script {sha}, {}\n", String::from_utf8_lossy(msg));
    Reply::from(CmdError::err(text))
}

/// Sets the globals KEYS and ARGV to fresh arrays of the arguments, with
/// the globals' protection lifted (the caller locks them again).
///
/// Built with the raw C API inside one protected call: through mlua's
/// safe API every table store and string is its own protected call, which
/// was ~28% of running a small script such as Redisson's lock-acquire.
///
/// # Safety
/// Runs in a protected call with LUA_MINSTACK free slots; a Lua error (out
/// of memory) unwinds to that call, with nothing owned here.
unsafe fn set_keys_and_argv(state: *mut ffi::lua_State, keys: &[Bytes], args: &[Bytes]) {
    // SAFETY: as documented; at most three slots are used.
    unsafe {
        for (name, items) in [(c"KEYS", keys), (c"ARGV", args)] {
            ffi::lua_createtable(state, items.len() as c_int, 0);
            for (i, item) in items.iter().enumerate() {
                ffi::lua_pushlstring_(state, item.as_ptr() as *const c_char, item.len());
                ffi::lua_rawseti_(state, -2, (i + 1) as c_int);
            }
            sandbox::lua_enablereadonlytable(state, ffi::LUA_GLOBALSINDEX, 0);
            ffi::lua_setfield(state, ffi::LUA_GLOBALSINDEX, name.as_ptr());
            sandbox::lua_enablereadonlytable(state, ffi::LUA_GLOBALSINDEX, 1);
        }
    }
}

/// A new array of `items` in the registry (a function's KEYS or ARGV).
///
/// # Safety
/// As [`set_keys_and_argv`].
unsafe fn new_array_ref(state: *mut ffi::lua_State, items: &[Bytes]) -> c_int {
    // SAFETY: as documented; at most two slots are used.
    unsafe {
        ffi::lua_createtable(state, items.len() as c_int, 0);
        for (i, item) in items.iter().enumerate() {
            ffi::lua_pushlstring_(state, item.as_ptr() as *const c_char, item.len());
            ffi::lua_rawseti_(state, -2, (i + 1) as c_int);
        }
        ffi::luaL_ref(state, ffi::LUA_REGISTRYINDEX)
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
    fn version_num_is_hex_packed() {
        assert_eq!(redis_version_num(), 0x07000f as f64);
    }
}
