//! `redis.call` / `redis.pcall`: a command from a script, checked and run
//! as Redis's `scriptCall` does, through the same `State::call` as a
//! client's command.
//!
//! The checks live in [`resolve`], shared with native scripts
//! (`scripting/native`), so a command refused to a Lua script is refused
//! to its native twin with the same text, before anything runs.

use std::cell::Cell;

use crate::engine::{Client, State};

/// What `redis.call` works with during one run.
pub struct CallContext<'a> {
    pub state: &'a mut State,
    /// The script's own client: the caller's database, `[0 lua]` in MONITOR.
    pub client: &'a mut Client,
    /// What the run may not do (write, grow memory, write without replicas).
    pub limits: ScriptLimits,
    /// The VM's per-run state: the protocol `redis.setresp` chose, the
    /// PRNG, whether the script wrote or is being stopped.
    pub(crate) runtime: &'a super::Runtime,
}

/// The error texts `redis.call` raises before running anything.
pub const NO_ARGUMENTS: &str = "ERR Please specify at least one argument for this redis lib call";
pub const BAD_ARGUMENT: &str = "ERR Lua redis lib command arguments must be strings or integers";

/// The server state a script's commands are checked against, taken when
/// the run starts (Redis's run context flags and `pre_command_oom_state`).
#[derive(Debug, Clone, Default)]
pub struct ScriptLimits {
    /// EVAL_RO, EVALSHA_RO or a `no-writes` script.
    pub read_only: bool,
    /// Memory was past `maxmemory` when the client's command started and
    /// the script did not declare `allow-oom`: its first write is refused.
    pub deny_oom: bool,
    /// Writes may go ahead as far as `min-replicas-to-write` is concerned.
    pub replicas_ok: bool,
    /// In cluster mode: the slot the run's keys are in so far (first the
    /// declared keys', Redis's `c->slot`), unless the script declared
    /// `allow-cross-slot-keys` (then None throughout).
    pub cluster_slot: Cell<Option<u16>>,
    pub allow_cross_slot: bool,
    /// The calling client's READONLY and ASKING, which its script's
    /// commands are routed with (Redis copies them to the script client).
    pub cluster_readonly: bool,
    pub cluster_asking: bool,
}

impl ScriptLimits {
    pub fn of(state: &State, read_only: bool, allow_oom: bool) -> ScriptLimits {
        ScriptLimits {
            read_only,
            deny_oom: state.runtime.maxmemory > 0 && state.pre_command_oom && !allow_oom,
            replicas_ok: state.enough_good_replicas(),
            cluster_slot: Cell::new(None),
            allow_cross_slot: false,
            cluster_readonly: false,
            cluster_asking: false,
        }
    }

    /// In cluster mode, the run starts in the slot of its declared keys.
    pub fn in_cluster(
        mut self,
        state: &State,
        caller: &crate::engine::Client,
        keys: &[bytes::Bytes],
        allow_cross_slot: bool,
    ) -> ScriptLimits {
        if state.cluster_enabled() {
            self.allow_cross_slot = allow_cross_slot;
            self.cluster_readonly = caller.cluster_readonly;
            self.cluster_asking = caller.cluster_asking;
            self.cluster_slot.set(keys.first().map(|k| crate::cluster::key_hash_slot(k)));
        }
        self
    }
}

thread_local! {
    /// The run in progress, as `redis.call` finds it. A thread-local rather
    /// than Lua app data: setting app data allocates, and every lookup
    /// hashes; this is two pointer stores per script and one load per call.
    static ACTIVE_RUN: Cell<*mut CallContext<'static>> = const { Cell::new(std::ptr::null_mut()) };
}

/// Runs `f` (the script) with `cx` reachable from `redis.call`.
///
/// The context lives on the caller's stack; Lua only reaches it through
/// the pointer while `f` runs, and the previous pointer (null outside a
/// run) is restored before this returns, so no callback can see it
/// afterwards. This avoids building a scoped closure for every script run.
pub fn with_active_run<R>(cx: &mut CallContext, f: impl FnOnce() -> R) -> R {
    /// Puts the previous run back however `f` ends, panics included.
    struct Restore(*mut CallContext<'static>);
    impl Drop for Restore {
        fn drop(&mut self) {
            ACTIVE_RUN.with(|a| a.set(self.0));
        }
    }
    let ptr: *mut CallContext<'static> = std::ptr::from_mut(cx).cast();
    let _restore = Restore(ACTIVE_RUN.with(|a| a.replace(ptr)));
    f()
}

/// The run in progress, if a script is running.
pub(crate) fn active_run<'a>() -> Option<&'a mut CallContext<'static>> {
    let ptr = ACTIVE_RUN.with(Cell::get);
    // SAFETY: the pointer was set by `with_active_run` from a live `&mut
    // CallContext` that outlives the script call and is only used on the
    // engine thread, one command at a time: a command run from a script
    // never re-enters Lua, so no second reference exists.
    (!ptr.is_null()).then(|| unsafe { &mut *ptr })
}
