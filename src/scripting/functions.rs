//! Redis 7.0 functions: libraries loaded with FUNCTION LOAD, run by
//! FCALL / FCALL_RO, in a Lua VM of their own (Redis's `functions.c` and
//! `function_lua.c`).
//!
//! Owns: the functions' VM, the libraries (name, code, functions) and the
//! index FCALL finds a function by (names are case-insensitive there,
//! library names are not). It must not touch the EVAL VM or its cache:
//! SCRIPT FLUSH and FUNCTION FLUSH each empty only their own.
//!
//! The VM is built as `luaEngineInitEngine` builds it: the libraries and
//! `redis` API EVAL scripts get (without the debugger's entry points),
//! the error handler kept in the registry rather than as a global, and the
//! globals locked, then hidden behind an empty, read-only globals table
//! whose metatable's `__index` is switched between two tables:
//!
//! - while a library's code runs (FUNCTION LOAD), the library API: only
//!   `redis.register_function`, `redis.log`, the log levels and the
//!   version; anything else is "Script attempted to access nonexistent
//!   global variable" (`redis.call` included: the `redis` table there
//!   raises it for unknown fields too);
//! - while a function runs, the real globals, as EVAL scripts see them,
//!   but without KEYS and ARGV: those are the callback's two arguments.
//!
//! Loading runs the code under a count hook that ends it after
//! [`LOAD_TIMEOUT_MS`] ("FUNCTION LOAD timeout"), or when the server is
//! being stopped (RESTORE's loads have no timeout, as in Redis). A load is atomic: the
//! functions it registered are only linked once the whole code ran and
//! none of their names is taken by another library; on any failure they
//! are released and a replaced library stays as it was.
//!
//! Redis lists libraries (and a library's functions) in its dictionaries'
//! order, which depends on a per-process hash seed; keylock lists them by
//! name.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::ffi::{CStr, c_char, c_int};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use mlua::ffi;

use super::sandbox::{self, lua_enablereadonlytable};
use super::{Callee, RunningFunction, Runtime, Shebang, Vm, call};
use crate::engine::{Client, State};
use crate::error::{CmdError, CmdResult};
use crate::reply::Reply;

/// Redis's `LOAD_TIMEOUT_MS`: how long a library's code may run at load.
pub const LOAD_TIMEOUT_MS: u64 = 500;

/// The registry names Redis gives the two tables the globals' `__index`
/// switches between, and the error handler.
const LIBRARY_API: &CStr = c"__LIBRARY_API__";
const GLOBALS_API: &CStr = c"__GLOBALS_API__";
const ERROR_HANDLER: &CStr = c"__ERROR_HANDLER__";

/// Redis's function error handler (`luaEngineInitEngine`), byte for byte.
const ERROR_HANDLER_CODE: &str = "local dbg = debug\n\
debug = nil\n\
local error_handler = function (err)\n  \
local i = dbg.getinfo(2,'nSl')\n  \
if i and i.what == 'C' then\n    \
i = dbg.getinfo(3,'nSl')\n  \
end\n  \
if type(err) ~= 'table' then\n    \
err = {err='ERR ' .. tostring(err)}  \
end  \
if i then\n    \
err['source'] = i.source\n    \
err['line'] = i.currentline\n  \
end  \
return err\n\
end\n\
return error_handler";

/// Redis's `LIBRARY_NAME_ERR` text, which it also gives for bad function names.
const BAD_NAME: &str = "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

/// A function's flags (Redis's `scripts_flags_def`, in its order).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FunctionFlags(u8);

impl FunctionFlags {
    pub const NO_WRITES: u8 = 1;
    pub const ALLOW_OOM: u8 = 1 << 1;
    pub const ALLOW_STALE: u8 = 1 << 2;
    pub const NO_CLUSTER: u8 = 1 << 3;
    pub const ALLOW_CROSS_SLOT: u8 = 1 << 4;
    const NAMES: [(u8, &'static str); 5] = [
        (Self::NO_WRITES, "no-writes"),
        (Self::ALLOW_OOM, "allow-oom"),
        (Self::ALLOW_STALE, "allow-stale"),
        (Self::NO_CLUSTER, "no-cluster"),
        (Self::ALLOW_CROSS_SLOT, "allow-cross-slot-keys"),
    ];

    /// A flag by its name, in any case (`strcasecmp`).
    fn named(name: &[u8]) -> Option<u8> {
        Self::NAMES
            .iter()
            .find(|(_, n)| n.as_bytes().eq_ignore_ascii_case(name))
            .map(|(f, _)| *f)
    }

    /// The names of the flags set, in Redis's order.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        Self::NAMES.into_iter().filter(move |(f, _)| self.0 & f != 0).map(|(_, n)| n)
    }

    /// The flags as the checks shared with EVAL shebangs read them.
    pub fn as_shebang(self) -> Shebang {
        Shebang {
            no_writes: self.0 & Self::NO_WRITES != 0,
            allow_oom: self.0 & Self::ALLOW_OOM != 0,
            allow_stale: self.0 & Self::ALLOW_STALE != 0,
            no_cluster: self.0 & Self::NO_CLUSTER != 0,
            allow_cross_slot: self.0 & Self::ALLOW_CROSS_SLOT != 0,
        }
    }
}

pub struct Function {
    pub name: Bytes,
    pub description: Option<Bytes>,
    pub flags: FunctionFlags,
    /// The callback, referenced from the VM's registry.
    callback: c_int,
}

pub struct Library {
    pub name: Bytes,
    /// The whole payload FUNCTION LOAD was given, shebang included.
    pub code: Bytes,
    /// In the order they were registered.
    pub functions: Vec<Function>,
}

/// What a library's code registered while it ran (Redis's `loadCtx`),
/// reachable from `redis.register_function` for that time only.
struct Loading {
    functions: Vec<Function>,
    started: u64,
    /// 0: no limit (RESTORE's loads, as in Redis).
    timeout_ms: u64,
    /// The server is being stopped: the code is ended whatever the timeout.
    halt: Arc<AtomicBool>,
}

thread_local! {
    static LOADING: RefCell<Option<Loading>> = const { RefCell::new(None) };
}

/// A library's shebang line (`#!lua name=<name>`), as
/// `functionExtractLibMetaData` reads it.
struct Metadata {
    engine: Vec<u8>,
    name: Vec<u8>,
    /// Where the code starts: at the shebang's newline, so that line
    /// numbers in errors count the shebang.
    code_starts: usize,
}

fn parse_metadata(payload: &[u8]) -> CmdResult<Metadata> {
    if !payload.starts_with(b"#!") {
        return Err(CmdError::err("Missing library metadata"));
    }
    // strchr: the line must end before any NUL.
    let end = match payload.iter().position(|&c| c == b'\n' || c == 0) {
        Some(end) if payload[end] == b'\n' => end,
        _ => return Err(CmdError::err("Invalid library metadata")),
    };
    let parts = match crate::request::split_args(&payload[..end]) {
        Some(parts) if !parts.is_empty() => parts,
        _ => return Err(CmdError::err("Invalid library metadata")),
    };
    let engine = parts[0].get(2..).unwrap_or_default().to_vec();
    let mut name: Option<Vec<u8>> = None;
    for part in &parts[1..] {
        if part.len() >= 5 && part[..5].eq_ignore_ascii_case(b"name=") {
            if name.is_some() {
                return Err(CmdError::err("Invalid metadata value, name argument was given multiple times"));
            }
            name = Some(part[5..].to_vec());
            continue;
        }
        return Err(CmdError::new_bytes(
            [b"ERR Invalid metadata value given: ", crate::error::quoted(part)].concat(),
        ));
    }
    let Some(name) = name else {
        return Err(CmdError::err("Library name was not given"));
    };
    Ok(Metadata {
        engine,
        name,
        code_starts: end,
    })
}

/// The checks a library's payload passes before its code runs: its
/// metadata, its name, its engine.
fn prepare(payload: &[u8]) -> CmdResult<Metadata> {
    let meta = parse_metadata(payload)?;
    if !valid_name(&meta.name) {
        return Err(CmdError::err(BAD_NAME));
    }
    if !meta.engine.eq_ignore_ascii_case(b"LUA") {
        return Err(CmdError::new_bytes(
            [b"ERR Engine '", meta.engine.as_slice(), b"' not found"].concat(),
        ));
    }
    Ok(meta)
}

/// `functionsVerifyName`: letters, digits and underscores, at least one.
fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

/// A function name as FCALL looks it up (`dictSdsCaseHash`).
fn index_key(name: &[u8]) -> Vec<u8> {
    name.to_ascii_lowercase()
}

/// How a FUNCTION RESTORE treats libraries that exist already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestorePolicy {
    Flush,
    Append,
    Replace,
}

pub struct Functions {
    vm: Vm,
    /// The error handler, referenced from the registry.
    handler: c_int,
    /// By exact name.
    libraries: BTreeMap<Bytes, Library>,
    /// Lowercase function name → its library's name.
    index: HashMap<Vec<u8>, Bytes>,
}

impl Functions {
    pub(crate) fn new(runtime: Rc<Runtime>) -> mlua::Result<Functions> {
        let vm = Vm::new(runtime, install)?;
        let mut handler = 0;
        // SAFETY: a registry read and a reference, in a protected call.
        unsafe {
            vm.lua.exec_raw::<()>((), |s| {
                ffi::lua_getfield(s, ffi::LUA_REGISTRYINDEX, ERROR_HANDLER.as_ptr());
                handler = ffi::luaL_ref(s, ffi::LUA_REGISTRYINDEX);
            })?;
        }
        Ok(Functions {
            vm,
            handler,
            libraries: BTreeMap::new(),
            index: HashMap::new(),
        })
    }

    /// Caps the VM's heap, as for EVAL's (`lua-memory-limit`).
    pub fn set_memory_limit(&self, bytes: usize) {
        self.vm.set_memory_limit(bytes);
    }

    /// FUNCTION LOAD: the library's name, or why it was not loaded (the
    /// libraries are then as they were).
    /// The name `payload` declares, if a library of that name is loaded.
    pub fn loaded_name(&self, payload: &Bytes) -> Option<Bytes> {
        let name = Bytes::from(prepare(payload).ok()?.name);
        self.libraries.contains_key(&name).then_some(name)
    }

    pub fn load(&mut self, payload: &Bytes, replace: bool, timeout_ms: u64) -> CmdResult<Bytes> {
        let meta = prepare(payload)?;
        let name = Bytes::from(meta.name);
        if !replace && self.libraries.contains_key(&name) {
            return Err(CmdError::new_bytes([b"ERR Library '", name.as_ref(), b"' already exists"].concat()));
        }
        let library = self.build(name.clone(), payload, meta.code_starts, timeout_ms)?;
        // The library it replaces is unlinked first: its names are free.
        if let Some(taken) = library
            .functions
            .iter()
            .find(|f| self.index.get(&index_key(&f.name)).is_some_and(|owner| *owner != name))
        {
            let text = [b"ERR Function ", taken.name.as_ref(), b" already exists"].concat();
            self.release(library);
            return Err(CmdError::new_bytes(text));
        }
        if let Some(old) = self.unlink(&name) {
            self.release(old);
        }
        self.link(library);
        Ok(name)
    }

    /// FUNCTION DUMP's payload: every library's code (LZF-compressed
    /// where it pays, with `rdbcompression` on).
    pub fn dump(&self, compression: bool) -> Vec<u8> {
        super::function_dump::dump(self.libraries.values().map(|l| l.code.as_ref()), compression)
    }

    /// FUNCTION RESTORE: the payload's libraries are all loaded aside
    /// first, then joined to the loaded ones by `policy`; on any error
    /// the libraries are as they were.
    pub fn restore(&mut self, payload: &[u8], policy: RestorePolicy) -> CmdResult<()> {
        if !super::function_dump::verified(payload) {
            return Err(CmdError::err("DUMP payload version or checksum are wrong"));
        }
        let codes = super::function_dump::parse(payload).map_err(CmdError::err)?;
        let mut staged: Vec<Library> = Vec::new();
        let mut staged_index: HashMap<Vec<u8>, Bytes> = HashMap::new();
        for code in codes {
            match self.stage(Bytes::from(code), &staged, &staged_index) {
                Ok(library) => {
                    for f in &library.functions {
                        staged_index.entry(index_key(&f.name)).or_insert_with(|| library.name.clone());
                    }
                    staged.push(library);
                }
                Err(e) => {
                    staged.into_iter().for_each(|l| self.release(l));
                    return Err(e);
                }
            }
        }
        if policy == RestorePolicy::Flush {
            self.flush();
        }
        let replaced: Vec<Bytes> = staged
            .iter()
            .filter(|l| self.libraries.contains_key(&l.name))
            .map(|l| l.name.clone())
            .collect();
        let refusal = match replaced.first() {
            Some(name) if policy == RestorePolicy::Append => Some([b"ERR Library ", name.as_ref(), b" already exists"].concat()),
            _ => staged.iter().flat_map(|l| &l.functions).find_map(|f| {
                let owner = self.index.get(&index_key(&f.name))?;
                (!replaced.contains(owner)).then(|| [b"ERR Function ", f.name.as_ref(), b" already exists"].concat())
            }),
        };
        if let Some(text) = refusal {
            staged.into_iter().for_each(|l| self.release(l));
            return Err(CmdError::new_bytes(text));
        }
        for name in replaced {
            if let Some(old) = self.unlink(&name) {
                self.release(old);
            }
        }
        for library in staged {
            self.link(library);
        }
        Ok(())
    }

    /// One library of a RESTORE payload, loaded aside (no timeout, as
    /// Redis loads them), refused if the payload named it already or its
    /// functions collide with the payload's others.
    fn stage(&mut self, code: Bytes, staged: &[Library], staged_index: &HashMap<Vec<u8>, Bytes>) -> CmdResult<Library> {
        let meta = prepare(&code)?;
        let name = Bytes::from(meta.name);
        if staged.iter().any(|l| l.name == name) {
            return Err(CmdError::new_bytes([b"ERR Library '", name.as_ref(), b"' already exists"].concat()));
        }
        let library = self.build(name, &code, meta.code_starts, 0)?;
        if let Some(taken) = library.functions.iter().find(|f| staged_index.contains_key(&index_key(&f.name))) {
            let text = [b"ERR Function ", taken.name.as_ref(), b" already exists"].concat();
            self.release(library);
            return Err(CmdError::new_bytes(text));
        }
        Ok(library)
    }

    /// Runs a library's code and keeps what it registered, if anything.
    fn build(&mut self, name: Bytes, payload: &Bytes, code_starts: usize, timeout_ms: u64) -> CmdResult<Library> {
        let functions = self.run_library_code(&payload[code_starts..], timeout_ms)?;
        let library = Library {
            name,
            code: payload.clone(),
            functions,
        };
        if library.functions.is_empty() {
            self.release(library);
            return Err(CmdError::err("No functions registered"));
        }
        Ok(library)
    }

    /// FUNCTION DELETE.
    pub fn delete(&mut self, name: &[u8]) -> CmdResult<()> {
        match self.unlink(name) {
            Some(library) => {
                self.release(library);
                Ok(())
            }
            None => Err(CmdError::err("Library not found")),
        }
    }

    /// FUNCTION FLUSH: every library goes; the VM stays, as in Redis.
    pub fn flush(&mut self) {
        let names: Vec<Bytes> = self.libraries.keys().cloned().collect();
        for name in names {
            if let Some(library) = self.unlink(&name) {
                self.release(library);
            }
        }
        let _ = self.vm.lua.gc_collect();
    }

    pub fn libraries(&self) -> impl Iterator<Item = &Library> {
        self.libraries.values()
    }

    pub fn library_count(&self) -> usize {
        self.libraries.len()
    }

    /// FUNCTION STATS' `functions_count`: every library's functions.
    pub fn function_count(&self) -> usize {
        self.libraries.values().map(|l| l.functions.len()).sum()
    }

    /// INFO's `number_of_functions`: the names FCALL finds.
    pub fn callable_count(&self) -> usize {
        self.index.len()
    }

    /// The function FCALL `name` runs.
    pub fn find(&self, name: &[u8]) -> Option<&Function> {
        let library = self.libraries.get(self.index.get(&index_key(name))?)?;
        library.functions.iter().find(|f| f.name.eq_ignore_ascii_case(name))
    }

    /// The flags of the function FCALL `name` runs.
    pub fn flags_of(&self, name: &[u8]) -> Option<FunctionFlags> {
        self.find(name).map(|f| f.flags)
    }

    /// The VM's heap (INFO's `used_memory_vm_functions`).
    pub fn vm_memory(&self) -> usize {
        self.vm.lua.used_memory()
    }

    /// What the libraries take besides the VM (INFO's
    /// `used_memory_functions`), estimated as Redis's structures would
    /// take it: 200 bytes for an empty set, then each library and
    /// function with its names, code and description.
    pub fn overhead_memory(&self) -> usize {
        200 + self
            .libraries
            .values()
            .map(|l| {
                96 + l.name.len()
                    + l.code.len()
                    + l.functions
                        .iter()
                        .map(|f| 64 + f.name.len() + f.description.as_ref().map_or(0, Bytes::len))
                        .sum::<usize>()
            })
            .sum::<usize>()
    }

    /// Runs the function FCALL `name` names with KEYS and ARGV: None when
    /// there is no such function. `command` is the caller's command line
    /// (FUNCTION STATS shows it).
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &mut self,
        state: &mut State,
        caller: &mut Client,
        script_client: &mut Client,
        name: &[u8],
        keys: &[Bytes],
        args: &[Bytes],
        read_only: bool,
        command: &[Bytes],
    ) -> Option<Reply> {
        let function = self.find(name)?;
        let flags = function.flags.as_shebang();
        let callback = function.callback;
        let function_name = function.name.clone();
        if let Err(refused) = super::prepare_declared(state, flags, read_only) {
            return Some(refused);
        }
        let limits = call::ScriptLimits::of(state, read_only || flags.no_writes, flags.allow_oom).in_cluster(
            state,
            caller,
            keys,
            flags.allow_cross_slot,
        );
        let runtime = self.vm.runtime.clone();
        runtime.wrote.set(false);
        *runtime.function.borrow_mut() = Some(Rc::new(RunningFunction {
            name: function_name.clone(),
            command: command.to_vec(),
            started: crate::clock::ticks::now(),
            counts: (self.library_count(), self.function_count()),
        }));
        let callee = Callee::Function {
            function: callback,
            handler: self.handler,
        };
        let shown = String::from_utf8_lossy(&function_name).into_owned();
        let reply = self.vm.run(state, caller, script_client, callee, keys, args, limits, &shown);
        *runtime.function.borrow_mut() = None;
        Some(reply)
    }

    /// A fresh VM holding the same libraries (after a run that panicked
    /// left the VM in an unknown state).
    pub fn rebuilt(&self, memory_limit: usize) -> mlua::Result<Functions> {
        // The run that panicked is over.
        *self.vm.runtime.function.borrow_mut() = None;
        let mut fresh = Functions::new(self.vm.runtime.clone())?;
        fresh.set_memory_limit(memory_limit);
        for library in self.libraries.values() {
            if let Err(e) = fresh.load(&library.code, false, 0) {
                tracing::warn!(library = %String::from_utf8_lossy(&library.name), error = %e, "a library could not be reloaded");
            }
        }
        Ok(fresh)
    }

    /// Runs a library's code with the library API, collecting what it
    /// registers (`luaEngineCreate`).
    fn run_library_code(&mut self, code: &[u8], timeout_ms: u64) -> CmdResult<Vec<Function>> {
        LOADING.with(|l| {
            *l.borrow_mut() = Some(Loading {
                functions: Vec::new(),
                started: crate::clock::ticks::now(),
                timeout_ms,
                halt: self.vm.runtime.watchdog.halt.clone(),
            })
        });
        let mut failure: Option<String> = None;
        // SAFETY: in mlua's protected call; the code runs in a nested
        // `lua_pcall`, so its errors are a status here, read and popped
        // before anything else. The globals' `__index` is switched back
        // whatever happened.
        let called = unsafe {
            self.vm.lua.exec_raw::<()>((), |s| {
                switch_globals_index(s, LIBRARY_API);
                let status = ffi::luaL_loadbuffer(s, code.as_ptr() as *const c_char, code.len(), c"@user_function".as_ptr());
                if status != 0 {
                    let mut len = 0usize;
                    let p = ffi::lua_tolstring(s, -1, &mut len);
                    let msg = if p.is_null() {
                        Vec::new()
                    } else {
                        crate::error::quoted(std::slice::from_raw_parts(p as *const u8, len)).to_vec()
                    };
                    failure = Some(format!("Error compiling function: {}", String::from_utf8_lossy(&msg)));
                    ffi::lua_pop(s, 1);
                } else {
                    ffi::lua_sethook(s, Some(load_hook), ffi::LUA_MASKCOUNT, super::HOOK_EVERY);
                    if ffi::lua_pcall(s, 0, 0, 0) != 0 {
                        let info = super::convert::ErrorInfo::of_table(s);
                        let msg = info.msg.unwrap_or_else(|| b"(null)".to_vec());
                        failure = Some(format!("Error registering functions: {}", String::from_utf8_lossy(&msg)));
                        ffi::lua_pop(s, 1);
                    }
                    ffi::lua_sethook(s, None, 0, 0);
                }
                switch_globals_index(s, GLOBALS_API);
            })
        };
        let functions = LOADING.with(|l| l.borrow_mut().take()).map(|l| l.functions).unwrap_or_default();
        let failure = match called {
            Err(e) => Some(format!("Error registering functions: {e}")),
            Ok(()) => failure,
        };
        match failure {
            Some(text) => {
                self.release_functions(functions);
                Err(CmdError::err(text))
            }
            None => Ok(functions),
        }
    }

    fn link(&mut self, library: Library) {
        for f in &library.functions {
            // A second name differing only in case stays out of the index,
            // as Redis's dictAdd leaves it.
            self.index.entry(index_key(&f.name)).or_insert_with(|| library.name.clone());
        }
        self.libraries.insert(library.name.clone(), library);
    }

    fn unlink(&mut self, name: &[u8]) -> Option<Library> {
        let library = self.libraries.remove(name)?;
        self.index.retain(|_, owner| owner.as_ref() != name);
        Some(library)
    }

    fn release(&mut self, library: Library) {
        self.release_functions(library.functions);
    }

    /// Drops the callbacks' registry references.
    fn release_functions(&mut self, functions: Vec<Function>) {
        if functions.is_empty() {
            return;
        }
        // SAFETY: luaL_unref of references this VM made; it raises nothing.
        let _ = unsafe {
            self.vm.lua.exec_raw::<()>((), |s| {
                for f in &functions {
                    ffi::luaL_unref(s, ffi::LUA_REGISTRYINDEX, f.callback);
                }
            })
        };
    }
}

/// Points the globals' `__index` at the registry table `api`.
///
/// # Safety
/// In a protected call on the functions' VM, after [`install`].
unsafe fn switch_globals_index(state: *mut ffi::lua_State, api: &CStr) {
    // SAFETY: the globals have a metatable (set by `install`); its
    // protection is lifted for the store only.
    unsafe {
        if ffi::lua_getmetatable(state, ffi::LUA_GLOBALSINDEX) == 0 {
            return;
        }
        lua_enablereadonlytable(state, -1, 0);
        ffi::lua_getfield(state, ffi::LUA_REGISTRYINDEX, api.as_ptr());
        ffi::lua_setfield(state, -2, c"__index".as_ptr());
        lua_enablereadonlytable(state, -1, 1);
        ffi::lua_pop(state, 1);
    }
}

/// `luaEngineInitEngine` after `luaRegisterRedisAPI`: the library API,
/// the error handler, the locked globals and the empty globals in front
/// of them.
///
/// # Safety
/// As `sandbox::install`.
unsafe fn install(state: *mut ffi::lua_State) {
    // SAFETY: a protected call is in progress; each step leaves the stack
    // as it found it.
    unsafe {
        sandbox::install_redis_api(state);

        // The library API: { redis = { register_function, log, … } }.
        ffi::lua_newtable(state);
        ffi::lua_newtable(state);
        ffi::lua_pushcfunction(state, register_function);
        ffi::lua_setfield(state, -2, c"register_function".as_ptr());
        sandbox::register_log_and_version(state);
        sandbox::set_error_metatable(state);
        ffi::lua_setfield(state, -2, c"redis".as_ptr());
        sandbox::set_error_metatable(state);
        sandbox::protect_recursively(state);
        ffi::lua_setfield(state, ffi::LUA_REGISTRYINDEX, LIBRARY_API.as_ptr());

        if ffi::luaL_loadbuffer(
            state,
            ERROR_HANDLER_CODE.as_ptr() as *const c_char,
            ERROR_HANDLER_CODE.len(),
            c"@err_handler_def".as_ptr(),
        ) != 0
        {
            ffi::lua_error(state);
        }
        ffi::lua_call(state, 0, 1);
        ffi::lua_setfield(state, ffi::LUA_REGISTRYINDEX, ERROR_HANDLER.as_ptr());

        ffi::lua_pushvalue(state, ffi::LUA_GLOBALSINDEX);
        sandbox::set_error_metatable(state);
        sandbox::protect_recursively(state);
        ffi::lua_pop(state, 1);

        ffi::lua_pushvalue(state, ffi::LUA_GLOBALSINDEX);
        ffi::lua_setfield(state, ffi::LUA_REGISTRYINDEX, GLOBALS_API.as_ptr());

        // New, empty globals; the real ones behind their `__index`.
        ffi::lua_newtable(state);
        ffi::lua_newtable(state);
        ffi::lua_pushvalue(state, ffi::LUA_GLOBALSINDEX);
        ffi::lua_setfield(state, -2, c"__index".as_ptr());
        lua_enablereadonlytable(state, -1, 1);
        ffi::lua_setmetatable(state, -2);
        lua_enablereadonlytable(state, -1, 1);
        ffi::lua_replace(state, ffi::LUA_GLOBALSINDEX);

        sandbox::protect_basic_types(state);
        sandbox::anchor_reply_fields(state);
    }
}

/// `luaEngineLoadHook`: ends a library's code that runs too long.
unsafe extern "C-unwind" fn load_hook(state: *mut ffi::lua_State, _ar: *mut ffi::lua_Debug) {
    let expired = LOADING.with(|l| {
        l.try_borrow().ok().and_then(|l| {
            l.as_ref().map(|l| {
                let elapsed_ms = crate::clock::ticks::to_us(crate::clock::ticks::now().saturating_sub(l.started)) / 1000;
                (l.timeout_ms > 0 && elapsed_ms > l.timeout_ms) || l.halt.load(Ordering::Relaxed)
            })
        })
    });
    if expired == Some(true) {
        // SAFETY: nothing owned is alive here; the error is raised by Lua.
        unsafe {
            ffi::lua_sethook(state, Some(load_hook), ffi::LUA_MASKLINE, 0);
            sandbox::push_error(state, b"FUNCTION LOAD timeout");
            ffi::lua_error(state);
        }
    }
}

/// What `redis.register_function` was given, read before anything is
/// raised.
enum Registration {
    Ok(Function),
    /// The text to raise; the callback's reference, if one was taken, is
    /// released first.
    Refused(&'static str, Option<c_int>),
}

/// `redis.register_function`, positional (`name, callback`) or named
/// (`{function_name=…, callback=…, flags={…}, description=…}`).
unsafe extern "C-unwind" fn register_function(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: the arguments are read in place; owned values (the
    // registration) are dropped or stored before anything is raised.
    unsafe {
        let loading = LOADING.with(|l| l.try_borrow().is_ok_and(|l| l.is_some()));
        if !loading {
            return raise(state, b"redis.register_function can only be called on FUNCTION LOAD command");
        }
        let registration = read_registration(state);
        let text: &'static str = match registration {
            Registration::Ok(function) => {
                let refused = LOADING.with(|l| {
                    let mut l = l.borrow_mut();
                    let Some(loading) = l.as_mut() else {
                        return Some((BAD_NAME, function.callback));
                    };
                    if !valid_name(&function.name) {
                        return Some((BAD_NAME, function.callback));
                    }
                    if loading.functions.iter().any(|f| f.name == function.name) {
                        return Some(("Function already exists in the library", function.callback));
                    }
                    loading.functions.push(function);
                    None
                });
                match refused {
                    None => return 0,
                    Some((text, callback)) => {
                        ffi::luaL_unref(state, ffi::LUA_REGISTRYINDEX, callback);
                        text
                    }
                }
            }
            Registration::Refused(text, callback) => {
                if let Some(callback) = callback {
                    ffi::luaL_unref(state, ffi::LUA_REGISTRYINDEX, callback);
                }
                text
            }
        };
        raise(state, text.as_bytes())
    }
}

/// `luaPushError` + `luaError`.
unsafe fn raise(state: *mut ffi::lua_State, text: &[u8]) -> c_int {
    // SAFETY: the callers own nothing when they call this.
    unsafe {
        sandbox::push_error(state, text);
        ffi::lua_error(state)
    }
}

/// `luaGetStringSds`: a string (or number) argument's bytes.
unsafe fn string_at(state: *mut ffi::lua_State, index: c_int) -> Option<Bytes> {
    // SAFETY: the value stays on the stack while its bytes are copied.
    unsafe {
        if ffi::lua_isstring(state, index) == 0 {
            return None;
        }
        let mut len = 0usize;
        let p = ffi::lua_tolstring(state, index, &mut len);
        Some(Bytes::copy_from_slice(std::slice::from_raw_parts(p as *const u8, len)))
    }
}

/// `luaRegisterFunctionReadArgs`.
unsafe fn read_registration(state: *mut ffi::lua_State) -> Registration {
    // SAFETY: stack reads and one luaL_ref per callback (which may only
    // raise on memory exhaustion, with nothing owned yet).
    unsafe {
        match ffi::lua_gettop(state) {
            1 => read_named(state),
            2 => {
                let Some(name) = string_at(state, 1) else {
                    return Registration::Refused("first argument to redis.register_function must be a string", None);
                };
                if ffi::lua_type(state, 2) != ffi::LUA_TFUNCTION {
                    return Registration::Refused("second argument to redis.register_function must be a function", None);
                }
                let callback = ffi::luaL_ref(state, ffi::LUA_REGISTRYINDEX);
                Registration::Ok(Function {
                    name,
                    description: None,
                    flags: FunctionFlags::default(),
                    callback,
                })
            }
            _ => Registration::Refused("wrong number of arguments to redis.register_function", None),
        }
    }
}

/// `luaRegisterFunctionReadNamedArgs`: the table's fields in `lua_next`
/// order, the first wrong one refused.
unsafe fn read_named(state: *mut ffi::lua_State) -> Registration {
    // SAFETY: iteration with lua_next over the table at 1; the key stays
    // on the stack between steps (it is only converted when it is a
    // string already, or when the iteration ends with an error anyway).
    unsafe {
        if ffi::lua_type(state, 1) != ffi::LUA_TTABLE {
            return Registration::Refused(
                "calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).",
                None,
            );
        }
        let mut name: Option<Bytes> = None;
        let mut description: Option<Bytes> = None;
        let mut callback: Option<c_int> = None;
        let mut flags = FunctionFlags::default();
        ffi::lua_pushnil(state);
        while ffi::lua_next(state, -2) != 0 {
            let Some(key) = string_at(state, -2) else {
                return Registration::Refused("named argument key given to redis.register_function is not a string", callback);
            };
            let key = crate::error::quoted(&key).to_vec();
            if key.eq_ignore_ascii_case(b"function_name") {
                match string_at(state, -1) {
                    Some(n) => name = Some(n),
                    None => {
                        return Registration::Refused("function_name argument given to redis.register_function must be a string", callback);
                    }
                }
            } else if key.eq_ignore_ascii_case(b"description") {
                match string_at(state, -1) {
                    Some(d) => description = Some(d),
                    None => {
                        return Registration::Refused("description argument given to redis.register_function must be a string", callback);
                    }
                }
            } else if key.eq_ignore_ascii_case(b"callback") {
                if ffi::lua_type(state, -1) != ffi::LUA_TFUNCTION {
                    return Registration::Refused("callback argument given to redis.register_function must be a function", callback);
                }
                // luaL_ref pops the value: the key is left for lua_next.
                callback = Some(ffi::luaL_ref(state, ffi::LUA_REGISTRYINDEX));
                continue;
            } else if key.eq_ignore_ascii_case(b"flags") {
                if ffi::lua_type(state, -1) != ffi::LUA_TTABLE {
                    return Registration::Refused(
                        "flags argument to redis.register_function must be a table representing function flags",
                        callback,
                    );
                }
                match read_flags(state) {
                    Some(f) => flags = f,
                    None => return Registration::Refused("unknown flag given", callback),
                }
            } else {
                return Registration::Refused("unknown argument given to redis.register_function", callback);
            }
            ffi::lua_pop(state, 1);
        }
        let Some(name) = name else {
            return Registration::Refused("redis.register_function must get a function name argument", callback);
        };
        let Some(callback) = callback else {
            return Registration::Refused("redis.register_function must get a callback argument", None);
        };
        Registration::Ok(Function {
            name,
            description,
            flags,
            callback,
        })
    }
}

/// `luaRegisterFunctionReadFlags`: the array on top, up to its first nil;
/// None at a value that is not a known flag's name.
unsafe fn read_flags(state: *mut ffi::lua_State) -> Option<FunctionFlags> {
    // SAFETY: one value pushed and popped per element (lua_gettable may
    // run no metamethod: the table was built by the script, and a
    // metamethod error would unwind with nothing owned here).
    unsafe {
        let mut flags = 0u8;
        let mut j = 1;
        loop {
            ffi::lua_pushnumber(state, j as ffi::lua_Number);
            j += 1;
            ffi::lua_gettable(state, -2);
            if ffi::lua_type(state, -1) == ffi::LUA_TNIL {
                ffi::lua_pop(state, 1);
                return Some(FunctionFlags(flags));
            }
            let found = string_at(state, -1).and_then(|name| FunctionFlags::named(crate::error::quoted(&name)));
            ffi::lua_pop(state, 1);
            flags |= found?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_errors_are_redis_texts() {
        let err = |p: &[u8]| parse_metadata(p).err().map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(err(b"lua name=x\n"), "ERR Missing library metadata");
        assert_eq!(err(b"#!lua name=x"), "ERR Invalid library metadata");
        assert_eq!(err(b"#!lua name=x\0\n"), "ERR Invalid library metadata");
        assert_eq!(err(b"#!lua\n"), "ERR Library name was not given");
        assert_eq!(
            err(b"#!lua name=a NAME=b\n"),
            "ERR Invalid metadata value, name argument was given multiple times"
        );
        assert_eq!(err(b"#!lua name=a foo=bar\n"), "ERR Invalid metadata value given: foo=bar");
        let meta = parse_metadata(b"#!lua name=\"foo\"\ncode").expect("parses");
        assert_eq!(
            (meta.engine.as_slice(), meta.name.as_slice(), meta.code_starts),
            (&b"lua"[..], &b"foo"[..], 16)
        );
    }

    #[test]
    fn flags_list_in_redis_order() {
        let flags = FunctionFlags(FunctionFlags::ALLOW_STALE | FunctionFlags::NO_WRITES);
        assert_eq!(flags.names().collect::<Vec<_>>(), ["no-writes", "allow-stale"]);
        assert_eq!(FunctionFlags::named(b"ALLOW-OOM"), Some(FunctionFlags::ALLOW_OOM));
    }
}
