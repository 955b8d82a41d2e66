//! The scripting side of the engine, owned beside [`State`](super::State):
//! the Lua VM with its script cache, and the pseudo-client scripts'
//! commands run as.
//!
//! A command reaches it through `Ctx::scripts`, which holds it for a
//! client's command (and for the commands EXEC runs) and is `None` for
//! the commands a script runs: no script runs inside another, so the VM
//! and the pseudo-client are lent to one run at a time by plain borrows,
//! and nothing is taken out of the engine and put back around a run.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use bytes::Bytes;

use super::Client;
use crate::error::CmdError;
use crate::scripting::functions::{FunctionFlags, Functions};
use crate::scripting::{Runtime, Scripting, Shebang, Watchdog};

pub struct Scripts {
    /// The Lua VM; None if it could not start (scripting then answers
    /// with an error, the rest of the server works).
    pub vm: Option<Box<Scripting>>,
    /// The functions' VM and libraries (FUNCTION LOAD, FCALL); None if
    /// it could not start.
    pub functions: Option<Box<Functions>>,
    /// The pseudo-client a script's commands run as (`[0 lua]` in MONITOR),
    /// an EVAL's or a function's (one runs at a time).
    pub client: Box<Client>,
    /// SCRIPT KILL's signal to the running script.
    kill: Arc<AtomicBool>,
    /// Redis's `math.random` generator state, server-wide like Redis's
    /// (it outlives SCRIPT FLUSH).
    rng: Rc<Cell<u64>>,
    /// Watches running scripts for `busy-reply-threshold`, SCRIPT KILL
    /// and SHUTDOWN NOSAVE; shared with the engine state, which updates
    /// its threshold on CONFIG SET.
    watchdog: Rc<Watchdog>,
}

impl Scripts {
    /// The VM with `lua-memory-limit` applied (`memory_limit` bytes).
    pub fn new(watchdog: Rc<Watchdog>, memory_limit: usize) -> Scripts {
        let mut scripts = Scripts {
            vm: None,
            functions: None,
            client: Box::new(Client::script_client()),
            kill: Arc::new(AtomicBool::new(false)),
            rng: Rc::new(Cell::new(crate::scripting::RAND48_INIT)),
            watchdog,
        };
        match scripts.fresh_vm(memory_limit) {
            Ok(vm) => scripts.vm = Some(Box::new(vm)),
            Err(e) => tracing::error!(error = %e, "could not start the Lua VM; scripting is unavailable"),
        }
        match scripts.fresh_functions(memory_limit) {
            Ok(functions) => scripts.functions = Some(Box::new(functions)),
            Err(e) => tracing::error!(error = %e, "could not start the functions' Lua VM; functions are unavailable"),
        }
        scripts
    }

    /// A new functions' VM with no libraries.
    fn fresh_functions(&self, memory_limit: usize) -> Result<Functions, CmdError> {
        let runtime = Runtime::new(self.kill.clone(), self.rng.clone(), self.watchdog.clone());
        let functions = Functions::new(runtime).map_err(|e| CmdError::err(format!("could not start the functions' Lua VM: {e}")))?;
        functions.set_memory_limit(memory_limit);
        Ok(functions)
    }

    /// The functions' engine, or the error a function command gets when
    /// there is none.
    pub fn functions(&mut self) -> Result<&mut Functions, CmdError> {
        self.functions.as_deref_mut().ok_or_else(unavailable)
    }

    /// The code of every function library, in order (what a snapshot
    /// holds).
    pub fn library_codes(&self) -> Vec<bytes::Bytes> {
        self.functions
            .as_ref()
            .map(|f| f.libraries().map(|l| l.code.clone()).collect())
            .unwrap_or_default()
    }

    /// Loads libraries from a snapshot (at start, DEBUG RELOAD); one that
    /// fails is logged and left out.
    /// Loads a snapshot's libraries over those in place (DEBUG RELOAD
    /// NOFLUSH): one already loaded is an error unless `replace` (MERGE),
    /// and nothing is loaded then, as Redis's load stops at it.
    pub fn merge_libraries(&mut self, codes: &[bytes::Bytes], replace: bool) -> Result<(), String> {
        let Some(functions) = self.functions.as_deref_mut() else {
            return Ok(());
        };
        if !replace && let Some(name) = codes.iter().find_map(|code| functions.loaded_name(code)) {
            return Err(format!("Library '{}' already exists", String::from_utf8_lossy(&name)));
        }
        for code in codes {
            if let Err(e) = functions.load(code, true, 0) {
                crate::log::warning(format_args!("Failed loading library from the snapshot: {e:?}"));
            }
        }
        Ok(())
    }

    pub fn load_libraries(&mut self, codes: Vec<bytes::Bytes>) {
        // Replacing, nothing is refused.
        let _ = self.merge_libraries(&codes, true);
    }

    /// The functions' engine and the pseudo-client, lent together to one run.
    pub fn for_function_run(&mut self) -> Result<(&mut Functions, &mut Client), CmdError> {
        match self.functions.as_deref_mut() {
            Some(functions) => Ok((functions, &mut self.client)),
            None => Err(unavailable()),
        }
    }

    /// Replaces the functions' VM by a fresh one holding the same
    /// libraries (after a run that panicked).
    pub fn rebuild_functions(&mut self, memory_limit: usize) {
        let rebuilt = self.functions.as_ref().map(|f| f.rebuilt(memory_limit));
        match rebuilt {
            Some(Ok(functions)) => self.functions = Some(Box::new(functions)),
            Some(Err(e)) => {
                tracing::error!(error = %e, "could not rebuild the functions' Lua VM; functions are unavailable");
                self.functions = None;
            }
            None => {}
        }
    }

    /// Every library gone, and a fresh VM (KEYLOCK RESET).
    pub fn reset_functions(&mut self, memory_limit: usize) -> Result<(), CmdError> {
        self.functions = Some(Box::new(self.fresh_functions(memory_limit)?));
        Ok(())
    }

    /// The flags of the function FCALL `name` would run.
    pub fn function_flags(&self, name: &[u8]) -> Option<FunctionFlags> {
        self.functions.as_ref()?.flags_of(name)
    }

    /// A new VM with an empty script cache.
    fn fresh_vm(&self, memory_limit: usize) -> Result<Scripting, CmdError> {
        let vm = Scripting::new(self.kill.clone(), self.rng.clone(), self.watchdog.clone())
            .map_err(|e| CmdError::err(format!("could not reset the Lua VM: {e}")))?;
        vm.set_memory_limit(memory_limit);
        Ok(vm)
    }

    /// Replaces the VM by a fresh one (SCRIPT FLUSH, KEYLOCK RESET, and
    /// after a run that panicked left it in an unknown state): cached
    /// scripts and whatever they left in the VM are gone.
    pub fn reset_vm(&mut self, memory_limit: usize) -> Result<(), CmdError> {
        self.vm = Some(Box::new(self.fresh_vm(memory_limit)?));
        Ok(())
    }

    /// The VM, or the error a script command gets when there is none.
    pub fn vm(&mut self) -> Result<&mut Scripting, CmdError> {
        self.vm.as_deref_mut().ok_or_else(unavailable)
    }

    /// The scripting lent to a command (`Ctx::scripts`): there for a
    /// client's command; a script's own commands have none, but the
    /// commands that use it are `noscript`, so a script never asks.
    pub fn lent<'c>(lent: &'c mut Option<&mut Scripts>) -> Result<&'c mut Scripts, CmdError> {
        lent.as_deref_mut()
            .ok_or_else(|| CmdError::err("This Redis command is not allowed from script"))
    }

    /// The VM and the pseudo-client, lent together to one run.
    pub fn for_run(&mut self) -> Result<(&mut Scripting, &mut Client), CmdError> {
        match self.vm.as_deref_mut() {
            Some(vm) => Ok((vm, &mut self.client)),
            None => Err(unavailable()),
        }
    }

    /// The flags the cached script `sha` declared, if it is cached and has
    /// a shebang.
    pub fn declared_flags(&self, sha: &Bytes) -> Option<Shebang> {
        self.vm.as_ref()?.declared_flags(sha)
    }

    /// `lua-memory-limit` changed.
    pub fn set_memory_limit(&self, bytes: usize) {
        if let Some(vm) = &self.vm {
            vm.set_memory_limit(bytes);
        }
        if let Some(functions) = &self.functions {
            functions.set_memory_limit(bytes);
        }
    }
}

fn unavailable() -> CmdError {
    CmdError::err("Lua scripting is unavailable on this server")
}
