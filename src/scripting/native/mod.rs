//! Native scripts: the Lua scripts Redisson sends, recognized by the SHA1 of
//! their exact body and run as Rust functions with the same KEYS/ARGV
//! contract, indistinguishable from the Lua run.
//!
//! The table is built from the files under `lua/redisson/<version>/`
//! (compiled in with `include_bytes!`), so a script is recognized only when
//! its bytes are exactly what a known client sends; the unit tests check
//! every file against its `INDEX.tsv` SHA1. `seed-2018/` holds bodies of
//! releases older than 3.13.6, known from the Java sources that articles
//! quote (`seed_quotes.rs` re-derives them from those quotes). Every
//! recognized script is counted in INFO (`# Keylock`), native or Lua; those
//! with an implementation here run natively unless `native-scripts` is `no`.
//!
//! How a native run stays identical to the Lua run:
//! - every command goes through [`NativeCtx::call`], which does what
//!   `redis.call` does: the same argument rules, the same refusals
//!   (`call::resolve`: unknown command, arity, not allowed from scripts,
//!   writes in read-only runs) and the same `State::call` with the script
//!   client, so keyspace effects, MONITOR `[0 lua]` lines, commandstats,
//!   keyspace hits/misses, WATCH invalidation and pub/sub are those of
//!   the Lua run by construction. Command names may come from ARGV.
//! - values follow Lua's rules (`lua.rs`): replies convert as
//!   `redis.call` converts them, returns as Redis converts a script's
//!   return, `tonumber` is the C library's, numbers print as Lua and Redis
//!   print them.
//! - errors carry the texts Lua would produce: a failed command raises its
//!   error with ` script: <sha>, on @user_script:<line>.`, a Lua runtime
//!   error its `user_script:<line>: …` message; writes done before the
//!   error stay, as they do in Redis.
//! - the implementations (`lock.rs`, `fairlock.rs`, `rwlock.rs`,
//!   `semaphore.rs`, `pesemaphore.rs`, `latch.rs`, `pexpire.rs`,
//!   `probe.rs`: one file per family) follow their
//!   script statement by statement, in the same order, with a comment
//!   quoting the Lua they stand for.
//!
//! Every script under `lua/redisson/` is a single line, so every error is
//! on line 1; [`NativeCtx::at_line`] exists for scripts that are not.

pub mod direct;
pub mod fairlock;
pub mod latch;
pub mod lock;
pub mod lua;
pub mod pesemaphore;
pub mod pexpire;
pub mod probe;
pub mod rwlock;
#[cfg(test)]
mod seed_quotes;
pub mod semaphore;

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::OnceLock;

use bytes::Bytes;

pub use direct::DirectFn;
pub use lua::{Table, Value};

use super::{ScriptId, call};
use crate::engine::{Client, State};
use crate::reply::Reply;

/// One script body from `lua/redisson/<version>/<name>.lua`, with its
/// native implementation and, for the scripts every lock sends, its direct
/// run. This row is everything there is to add for a new body (plus the
/// file and its INDEX.tsv line, which a test checks against this table).
pub struct ScriptFile {
    pub version: &'static str,
    pub name: &'static str,
    pub body: &'static [u8],
    pub native: Option<NativeFn>,
    /// Its direct run for plain input, tried before `native` (see [`direct`]).
    pub direct: Option<DirectFn>,
}

/// A row of [`FILES`]: version, name, native implementation, and the
/// direct run after `direct` when there is one.
macro_rules! script {
    ($version:literal, $name:literal, $native:expr) => {
        script!(@row $version, $name, Some($native), None)
    };
    ($version:literal, $name:literal, $native:expr, direct $direct:expr) => {
        script!(@row $version, $name, Some($native), Some($direct))
    };
    (@row $version:literal, $name:literal, $native:expr, $direct:expr) => {
        ScriptFile {
            version: $version,
            name: $name,
            body: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/redisson/", $version, "/", $name, ".lua")),
            native: $native,
            direct: $direct,
        }
    };
}

/// Every script body keylock recognizes, newest client first.
///
/// Where versions send the same body (or bodies that run the same commands
/// in the same order) they share an implementation: the 3.13.6
/// lock-acquire tests `exists` and `hexists` in two `if`s, 4.7.0 in one
/// `or`. Each seed-2018 body differs from every current one in its
/// commands: HSET for the first hold, EXISTS before unlocking, no PTTL on
/// a read reentry.
pub const FILES: &[ScriptFile] = &[
    script!("4.7.0", "cluster-detect-probe", probe::cluster_detect_probe),
    script!("4.7.0", "fairlock-acquire-failed", fairlock::acquire_failed),
    script!("4.7.0", "fairlock-acquire", fairlock::acquire),
    script!("4.7.0", "fairlock-tryacquire-nowait", fairlock::try_acquire_nowait),
    script!("4.7.0", "fairlock-unlock", fairlock::unlock),
    script!("4.7.0", "keys-pexpire", pexpire::keys_pexpire),
    script!("4.7.0", "latch-countdown", latch::count_down),
    script!("4.7.0", "latch-trysetcount", latch::try_set_count),
    script!("4.7.0", "lock-acquire", lock::acquire, direct direct::lock_acquire),
    script!("4.7.0", "lock-force-unlock", lock::force_unlock),
    script!("4.7.0", "lock-renew-batch", lock::renew_batch, direct direct::lock_renew_batch),
    script!("4.7.0", "lock-unlock", lock::unlock, direct direct::lock_unlock),
    script!("4.7.0", "pesemaphore-available-permits", pesemaphore::available_permits),
    script!("4.7.0", "pesemaphore-release", pesemaphore::release),
    script!("4.7.0", "pesemaphore-tryacquire", pesemaphore::try_acquire),
    script!("4.7.0", "rwlock-read-acquire", rwlock::read_acquire),
    script!("4.7.0", "rwlock-read-islocked", rwlock::read_is_locked),
    script!("4.7.0", "rwlock-read-renew-batch", rwlock::read_renew_batch),
    script!("4.7.0", "rwlock-read-unlock", rwlock::read_unlock),
    script!("4.7.0", "rwlock-write-acquire", rwlock::write_acquire),
    script!("4.7.0", "rwlock-write-unlock", rwlock::write_unlock),
    script!("4.7.0", "semaphore-release", semaphore::release),
    script!("4.7.0", "semaphore-tryacquire", semaphore::try_acquire),
    script!("4.7.0", "semaphore-trysetpermits", semaphore::try_set_permits),
    script!("3.13.6", "fairlock-acquire-failed", fairlock::acquire_failed),
    script!("3.13.6", "fairlock-acquire", fairlock::acquire_3_13),
    script!("3.13.6", "fairlock-tryacquire-nowait", fairlock::try_acquire_nowait_3_13),
    script!("3.13.6", "fairlock-unlock", fairlock::unlock_3_13),
    script!("3.13.6", "latch-countdown", latch::count_down_3_13),
    script!("3.13.6", "latch-trysetcount", latch::try_set_count_3_13),
    script!("3.13.6", "lock-acquire", lock::acquire, direct direct::lock_acquire),
    script!("3.13.6", "lock-force-unlock", lock::force_unlock_3_13),
    script!("3.13.6", "lock-renew", lock::renew, direct direct::lock_renew),
    script!("3.13.6", "lock-unlock", lock::unlock_3_13, direct direct::lock_unlock_3_13),
    script!("3.13.6", "pesemaphore-available-permits", pesemaphore::available_permits_3_13),
    script!("3.13.6", "pesemaphore-release", pesemaphore::release_3_13),
    script!("3.13.6", "pesemaphore-tryacquire", pesemaphore::try_acquire_3_13),
    script!("3.13.6", "rwlock-read-acquire", rwlock::read_acquire),
    script!("3.13.6", "rwlock-read-renew", rwlock::read_renew),
    script!("3.13.6", "rwlock-read-unlock", rwlock::read_unlock_3_13),
    script!("3.13.6", "rwlock-write-acquire", rwlock::write_acquire),
    script!("3.13.6", "rwlock-write-unlock", rwlock::write_unlock_3_13),
    script!("3.13.6", "semaphore-release", semaphore::release_3_13),
    script!("3.13.6", "semaphore-tryacquire", semaphore::try_acquire),
    script!("3.13.6", "semaphore-trysetpermits", semaphore::try_set_permits_3_13),
    // Releases older than 3.13.6, as the seed articles quote them.
    script!("seed-2018", "lock-acquire", lock::acquire_2018),
    script!("seed-2018", "lock-unlock", lock::unlock_2018),
    script!("seed-2018", "rwlock-read-acquire", rwlock::read_acquire_2018),
];

/// A native script: KEYS and ARGV in, the Lua value the script returns out.
pub type NativeFn = fn(&mut NativeCtx, &Params) -> Result<Value, ScriptError>;

/// A recognized script body (several files when versions share a body).
pub struct Recognized {
    /// Position in the table, for the run counters.
    pub index: usize,
    /// `lock-acquire@4.7.0`; `rwlock-write-acquire@4.7.0+3.13.6` for a
    /// body both versions send.
    pub name: String,
    pub sha: String,
    pub native: Option<NativeFn>,
    /// Its direct run for plain input, tried before `native`.
    pub direct: Option<DirectFn>,
}

pub struct NativeTable {
    by_sha: HashMap<String, usize>,
    pub scripts: Vec<Recognized>,
}

impl NativeTable {
    /// The table, built on first use from [`FILES`].
    pub fn get() -> &'static NativeTable {
        static TABLE: OnceLock<NativeTable> = OnceLock::new();
        TABLE.get_or_init(NativeTable::build)
    }

    fn build() -> NativeTable {
        let mut table = NativeTable {
            by_sha: HashMap::new(),
            scripts: Vec::new(),
        };
        for file in FILES {
            let sha = super::sha1_hex(file.body);
            let (native, direct) = (file.native, file.direct);
            match table.by_sha.get(&sha) {
                Some(&i) => {
                    let known = &mut table.scripts[i];
                    known.name.push('+');
                    known.name.push_str(file.version);
                    known.native = known.native.or(native);
                    known.direct = known.direct.or(direct);
                }
                None => {
                    let index = table.scripts.len();
                    table.by_sha.insert(sha.clone(), index);
                    table.scripts.push(Recognized {
                        index,
                        name: format!("{}@{}", file.name, file.version),
                        sha,
                        native,
                        direct,
                    });
                }
            }
        }
        table
    }

    /// The recognized script with this (lowercase hex) SHA1.
    pub fn recognize(&'static self, sha: &str) -> Option<&'static Recognized> {
        self.by_sha.get(sha).map(|&i| &self.scripts[i])
    }
}

/// KEYS and ARGV, indexed from 1 as the script indexes them.
pub struct Params<'a> {
    pub keys: &'a [Bytes],
    pub argv: &'a [Bytes],
}

impl Params<'_> {
    /// `KEYS[i]`: nil past the end.
    pub fn key(&self, i: usize) -> Value {
        nth(self.keys, i)
    }

    /// `ARGV[i]`: nil past the end.
    pub fn arg(&self, i: usize) -> Value {
        nth(self.argv, i)
    }

    /// `#KEYS`.
    pub fn key_count(&self) -> usize {
        self.keys.len()
    }
}

fn nth(items: &[Bytes], i: usize) -> Value {
    match i.checked_sub(1).and_then(|i| items.get(i)) {
        Some(b) => Value::Str(b.clone()),
        None => Value::Nil,
    }
}

/// What ends a native run early: an error, as the Lua run would report
/// it, or the decision (taken before any command ran) to let Lua run it.
#[derive(Debug, Clone)]
pub struct ScriptError(Stop);

#[derive(Debug, Clone)]
enum Stop {
    Raised {
        /// The error's message (`WRONGTYPE …`, `ERR user_script:1: …`).
        text: Bytes,
        /// The script line that raised it.
        line: u32,
        /// Counted in the error statistics where it arose (a command's
        /// error, a refused command), as Lua's `ignore_error_stats_update`.
        counted: bool,
    },
    ToLua,
}

impl ScriptError {
    /// The client's reply: `<text> script: <sha>, on @user_script:<line>.`;
    /// None when the script is to run in Lua.
    fn into_reply(self, id: &ScriptId) -> Option<Reply> {
        let Stop::Raised { text, line, .. } = self.0 else { return None };
        let line = line.to_string();
        Some(super::convert::located_error(
            String::from_utf8_lossy(&text).into_owned(),
            super::sha_text(id),
            Some(("@user_script", &line)),
        ))
    }
}

/// The most commands a native run may need; past it the script runs in Lua,
/// where a run that long is a busy script (BUSY replies to other clients,
/// SHUTDOWN NOSAVE) as it is in Redis. Redisson's hold counts are small.
pub const NATIVE_COMMAND_BUDGET: f64 = 100_000.0;

/// What a native script may do: what `redis.call` and the Lua runtime
/// give a Lua script.
pub struct NativeCtx<'a> {
    state: &'a mut State,
    /// The script client: the caller's database, `[0 lua]` in MONITOR.
    client: &'a mut Client,
    limits: call::ScriptLimits,
    wrote: &'a Cell<bool>,
    line: u32,
    /// A command has run (the script can no longer go to Lua).
    called: bool,
}

impl NativeCtx<'_> {
    /// `redis.call(args…)`: runs the command, or raises what Lua raises.
    pub fn call(&mut self, args: &[Value]) -> Result<Value, ScriptError> {
        if args.is_empty() {
            return Err(self.raise(call::NO_ARGUMENTS));
        }
        let mut argv = Vec::with_capacity(args.len());
        for a in args {
            match a.to_arg() {
                Some(b) => argv.push(b),
                None => return Err(self.raise(call::BAD_ARGUMENT)),
            }
        }
        let cmd = match crate::engine::exec::for_script(self.state, self.client, &argv, &self.limits, self.wrote) {
            Ok(cmd) => cmd,
            Err(refusal) => {
                refusal.book(&mut self.state.stats);
                return Err(ScriptError(Stop::Raised {
                    text: Bytes::from(refusal.error.as_bytes().to_vec()),
                    line: self.line,
                    counted: true,
                }));
            }
        };
        self.client.resp = 2;
        self.called = true;
        match self.state.call(None, self.client, cmd, &argv) {
            Reply::Error(text) => Err(ScriptError(Stop::Raised {
                text,
                line: self.line,
                counted: true,
            })),
            reply => Ok(Value::from_reply(reply)),
        }
    }

    /// The hash a command would find at `key` now, looked at without any
    /// effect: for sizing a run before it starts.
    pub fn peek_hash(&self, key: &Value) -> Option<&crate::db::value::Hash> {
        match self.peek(key) {
            Some(crate::db::Value::Hash(h)) => Some(h),
            _ => None,
        }
    }

    /// How many elements the list or sorted set a command would find at
    /// `key` now holds (0 for anything else), looked at without any
    /// effect: for sizing a run before it starts.
    pub fn peek_len(&self, key: &Value) -> usize {
        match self.peek(key) {
            Some(crate::db::Value::List(l)) => l.len(),
            Some(crate::db::Value::ZSet(z)) => z.len(),
            _ => 0,
        }
    }

    fn peek(&self, key: &Value) -> Option<&crate::db::Value> {
        let Value::Str(key) = key else { return None };
        let now = self.state.script_time.unwrap_or_else(|| self.state.clock.now_ms());
        self.state.dbs[self.client.db].peek(key, now)
    }

    /// The sorted set a command would find at `key` now, looked at without
    /// any effect: for sizing a run before it starts.
    pub fn peek_zset(&self, key: &Value) -> Option<&crate::db::zset::ZSet> {
        match self.peek(key) {
            Some(crate::db::Value::ZSet(z)) => Some(z),
            _ => None,
        }
    }

    /// Hands the script to Lua. Only before the first command: a run that
    /// has done anything must finish natively.
    pub fn hand_to_lua(&self) -> ScriptError {
        debug_assert!(!self.called, "a native script handed over to Lua after running commands");
        ScriptError(Stop::ToLua)
    }

    /// Later errors point at this script line.
    pub fn at_line(&mut self, line: u32) {
        self.line = line;
    }

    /// Raises a `{err=…}` table, as `redis.call` does.
    fn raise(&self, text: &'static str) -> ScriptError {
        ScriptError(Stop::Raised {
            text: Bytes::from_static(text.as_bytes()),
            line: self.line,
            counted: false,
        })
    }

    /// A Lua runtime error (`attempt to compare nil with number`), as the
    /// VM raises it: positioned, then prefixed `ERR` by Redis's handler.
    pub fn runtime_error(&self, message: &str) -> ScriptError {
        ScriptError(Stop::Raised {
            text: Bytes::from(format!("ERR user_script:{}: {message}", self.line)),
            line: self.line,
            counted: false,
        })
    }

    /// Lua's `a .. b .. …` (see [`lua::concat`]).
    pub fn concat(&self, parts: &[Value]) -> Result<Value, ScriptError> {
        lua::concat(parts).map(Value::Str).map_err(|m| self.runtime_error(&m))
    }

    /// Lua's `l + r`, operands with the names Lua's error gives them.
    pub fn add(&self, l: (&Value, &str), r: (&Value, &str)) -> Result<Value, ScriptError> {
        lua::add(l, r).map(Value::Num).map_err(|m| self.runtime_error(&m))
    }

    /// Lua's `l - r`, operands named as for [`NativeCtx::add`] (`""` for a
    /// call's result, which Lua cannot name).
    pub fn sub(&self, l: (&Value, &str), r: (&Value, &str)) -> Result<Value, ScriptError> {
        lua::sub(l, r).map(Value::Num).map_err(|m| self.runtime_error(&m))
    }

    /// Lua's unary `-v`, named as for [`NativeCtx::sub`].
    pub fn neg(&self, v: (&Value, &str)) -> Result<Value, ScriptError> {
        lua::unm(v).map(Value::Num).map_err(|m| self.runtime_error(&m))
    }

    /// `math.max(…)`.
    pub fn math_max(&self, args: &[Value]) -> Result<Value, ScriptError> {
        lua::math_max(args).map(Value::Num).map_err(|m| self.runtime_error(&m))
    }

    /// A numeric `for v = init, limit, step`.
    pub fn numeric_for(&self, init: &Value, limit: &Value, step: f64) -> Result<lua::NumericFor, ScriptError> {
        lua::numeric_for(init, limit, step).map_err(|m| self.runtime_error(&m))
    }

    /// Lua's `l < r`; write `a > b` as `lt(b, a)`, as Lua compiles it.
    pub fn lt(&self, l: &Value, r: &Value) -> Result<bool, ScriptError> {
        lua::lt(l, r).map_err(|m| self.runtime_error(&m))
    }

    /// Lua's `l <= r`; write `a >= b` as `le(b, a)`.
    pub fn le(&self, l: &Value, r: &Value) -> Result<bool, ScriptError> {
        lua::le(l, r).map_err(|m| self.runtime_error(&m))
    }
}

/// Runs a native script on behalf of `caller`: its direct run when it has
/// one and the input is plain (never for read-only runs, which refuse the
/// writes), else command by command. The reply is what the client gets,
/// exactly as from the Lua run. None: the script chose, before doing
/// anything, to run in Lua.
#[allow(clippy::too_many_arguments)]
pub fn run(
    state: &mut State,
    caller: &mut Client,
    client: &mut Client,
    script: NativeFn,
    direct: Option<DirectFn>,
    id: &ScriptId,
    keys: &[Bytes],
    argv: &[Bytes],
    limits: call::ScriptLimits,
    wrote: &Cell<bool>,
) -> Option<Reply> {
    client.begin_script_run(caller, keys);
    // A direct run is for the plain case: no refusal can come up.
    if !limits.read_only
        && !limits.deny_oom
        && limits.replicas_ok
        && let Some(direct) = direct
        && let Some(reply) = direct(&mut direct::Direct::new(state, client), &Params { keys, argv })
    {
        state.collect_watch_invalidations(client);
        client.end_script_run(caller);
        return Some(reply);
    }
    let result = {
        let mut cx = NativeCtx {
            state: &mut *state,
            client: &mut *client,
            limits,
            wrote,
            line: 1,
            called: false,
        };
        script(&mut cx, &Params { keys, argv })
    };
    client.end_script_run(caller);
    match result {
        Ok(value) => Some(value.into_reply()),
        Err(e) => {
            if matches!(e.0, Stop::Raised { counted: true, .. }) {
                state.reply_counted_errors = 1;
            }
            e.into_reply(id)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(version, file name, sha1)` from every INDEX.tsv file.
    fn index() -> Vec<(&'static str, String, String)> {
        let mut rows = Vec::new();
        for (version, text) in [
            ("4.7.0", include_str!("../../../lua/redisson/4.7.0/INDEX.tsv")),
            ("3.13.6", include_str!("../../../lua/redisson/3.13.6/INDEX.tsv")),
            ("seed-2018", include_str!("../../../lua/redisson/seed-2018/INDEX.tsv")),
        ] {
            for line in text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
                let mut cols = line.split('\t');
                let file = cols.next().unwrap().to_string();
                let sha = cols.next().unwrap().to_string();
                rows.push((version, file, sha));
            }
        }
        rows
    }

    #[test]
    fn every_file_matches_its_index_sha1() {
        let rows = index();
        assert_eq!(rows.len(), FILES.len(), "INDEX.tsv rows and compiled-in files differ");
        for (version, file, sha) in rows {
            let name = file.strip_suffix(".lua").unwrap();
            let compiled = FILES
                .iter()
                .find(|f| f.version == version && f.name == name)
                .unwrap_or_else(|| panic!("{version}/{file} is in INDEX.tsv but not compiled in"));
            assert_eq!(crate::scripting::sha1_hex(compiled.body), sha, "{version}/{file}");
        }
    }

    #[test]
    fn every_script_is_a_single_line() {
        // Errors are reported on line 1; a multi-line body needs `at_line`.
        for f in FILES {
            assert!(!f.body.contains(&b'\n'), "{}/{} spans lines", f.version, f.name);
        }
    }

    #[test]
    fn shared_bodies_are_recognized_once() {
        let table = NativeTable::get();
        assert_eq!(table.scripts.len(), FILES.len() - 4);
        let shared: Vec<&str> = table
            .scripts
            .iter()
            .filter(|s| s.name.contains('+'))
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(
            shared,
            [
                "fairlock-acquire-failed@4.7.0+3.13.6",
                "rwlock-read-acquire@4.7.0+3.13.6",
                "rwlock-write-acquire@4.7.0+3.13.6",
                "semaphore-tryacquire@4.7.0+3.13.6",
            ]
        );
    }

    #[test]
    fn every_recognized_body_is_native() {
        let table = NativeTable::get();
        for f in FILES {
            let script = table.recognize(&crate::scripting::sha1_hex(f.body)).unwrap();
            assert!(script.native.is_some(), "{}/{}", f.version, f.name);
        }
        assert_eq!(table.scripts.iter().filter(|s| s.native.is_some()).count(), 44);
    }

    #[test]
    fn every_body_has_a_native_equals_lua_test() {
        // The differential tests name each body by its path under lua/redisson.
        let tests = [
            include_str!("../../../tests/native_scripts.rs"),
            include_str!("../../../tests/native_fairlock.rs"),
            include_str!("../../../tests/native_synchronizers.rs"),
            include_str!("../../../tests/native_seed_scripts.rs"),
        ];
        let tested = |f: &ScriptFile| {
            let path = format!("\"{}/{}.lua\"", f.version, f.name);
            tests.iter().any(|t| t.contains(&path))
        };
        for f in FILES {
            // A body several versions send is tested under one of them.
            let same_body = FILES.iter().filter(|g| g.body == f.body);
            assert!(
                same_body.into_iter().any(tested),
                "no differential test runs {}/{}",
                f.version,
                f.name
            );
        }
    }

    #[test]
    fn the_lock_scripts_every_lock_sends_have_direct_runs() {
        let direct: Vec<String> = FILES
            .iter()
            .filter(|f| f.direct.is_some())
            .map(|f| format!("{}@{}", f.name, f.version))
            .collect();
        assert_eq!(
            direct,
            [
                "lock-acquire@4.7.0",
                "lock-renew-batch@4.7.0",
                "lock-unlock@4.7.0",
                "lock-acquire@3.13.6",
                "lock-renew@3.13.6",
                "lock-unlock@3.13.6",
            ]
        );
    }
}
