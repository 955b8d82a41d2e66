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
use crate::scripting::{Scripting, Shebang, Watchdog};

pub struct Scripts {
    /// The Lua VM; None if it could not start (scripting then answers
    /// with an error, the rest of the server works).
    pub vm: Option<Box<Scripting>>,
    /// The pseudo-client a script's commands run as (`[0 lua]` in MONITOR).
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
            client: Box::new(Client::script_client()),
            kill: Arc::new(AtomicBool::new(false)),
            rng: Rc::new(Cell::new(crate::scripting::RAND48_INIT)),
            watchdog,
        };
        match scripts.fresh_vm(memory_limit) {
            Ok(vm) => scripts.vm = Some(Box::new(vm)),
            Err(e) => tracing::error!(error = %e, "could not start the Lua VM; scripting is unavailable"),
        }
        scripts
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
    }
}

fn unavailable() -> CmdError {
    CmdError::err("Lua scripting is unavailable on this server")
}
