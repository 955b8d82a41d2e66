//! Native scripts: the Lua scripts Redisson sends, recognized by the SHA1 of
//! their exact body and run as Rust functions with the same KEYS/ARGV
//! contract, indistinguishable from the Lua run.
//!
//! The table is built from the files under `lua/redisson/<version>/`
//! (compiled in with `include_bytes!`), so a script is recognized only when
//! its bytes are exactly what a known client sends; the unit tests check
//! every file against its `INDEX.tsv` SHA1. Every recognized script is
//! counted in INFO (`# Keylock`), native or Lua; those with an
//! implementation here run natively unless `native-scripts` is `no`.
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
//! - the implementations (`lock.rs`, one file per family) follow their
//!   script statement by statement, in the same order, with a comment
//!   quoting the Lua they stand for.
//!
//! Every script under `lua/redisson/` is a single line, so every error is
//! on line 1; [`NativeCtx::at_line`] exists for scripts that are not.

pub mod lock;
pub mod lua;

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::OnceLock;

use bytes::Bytes;

pub use lua::{Table, Value};

use super::call;
use crate::engine::{Client, State};
use crate::reply::Reply;

/// One script body from `lua/redisson/<version>/<name>.lua`.
pub struct ScriptFile {
    pub version: &'static str,
    pub name: &'static str,
    pub body: &'static [u8],
}

macro_rules! script_files {
    ($($version:literal: [$($name:literal),* $(,)?]),* $(,)?) => {
        &[$($(ScriptFile {
            version: $version,
            name: $name,
            body: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/redisson/", $version, "/", $name, ".lua")),
        }),*),*]
    };
}

/// Every script body keylock recognizes, newest client first.
pub const FILES: &[ScriptFile] = script_files! {
    "4.7.0": [
        "cluster-detect-probe", "fairlock-acquire-failed", "fairlock-acquire", "fairlock-tryacquire-nowait",
        "fairlock-unlock", "keys-pexpire", "latch-countdown", "latch-trysetcount", "lock-acquire",
        "lock-force-unlock", "lock-renew-batch", "lock-unlock", "pesemaphore-available-permits",
        "pesemaphore-release", "pesemaphore-tryacquire", "rwlock-read-acquire", "rwlock-read-islocked",
        "rwlock-read-renew-batch", "rwlock-read-unlock", "rwlock-write-acquire", "rwlock-write-unlock",
        "semaphore-release", "semaphore-tryacquire", "semaphore-trysetpermits",
    ],
    "3.13.6": [
        "fairlock-acquire-failed", "fairlock-acquire", "fairlock-tryacquire-nowait", "fairlock-unlock",
        "latch-countdown", "latch-trysetcount", "lock-acquire", "lock-force-unlock", "lock-renew",
        "lock-unlock", "pesemaphore-available-permits", "pesemaphore-release", "pesemaphore-tryacquire",
        "rwlock-read-acquire", "rwlock-read-renew", "rwlock-read-unlock", "rwlock-write-acquire",
        "rwlock-write-unlock", "semaphore-release", "semaphore-tryacquire", "semaphore-trysetpermits",
    ],
};

/// A native script: KEYS and ARGV in, the Lua value the script returns out.
pub type NativeFn = fn(&mut NativeCtx, &Params) -> Result<Value, ScriptError>;

/// The native implementation of a script file, if there is one.
fn implementation(version: &str, name: &str) -> Option<NativeFn> {
    Some(match (version, name) {
        // The 3.13.6 body tests `exists` and `hexists` in two `if`s, 4.7.0 in
        // one `or`: the same commands in the same order either way.
        ("4.7.0" | "3.13.6", "lock-acquire") => lock::acquire,
        ("4.7.0", "lock-unlock") => lock::unlock,
        ("3.13.6", "lock-unlock") => lock::unlock_3_13,
        ("4.7.0", "lock-force-unlock") => lock::force_unlock,
        ("3.13.6", "lock-force-unlock") => lock::force_unlock_3_13,
        ("4.7.0", "lock-renew-batch") => lock::renew_batch,
        ("3.13.6", "lock-renew") => lock::renew,
        ("4.7.0", "keys-pexpire") => lock::keys_pexpire,
        ("4.7.0", "cluster-detect-probe") => lock::cluster_detect_probe,
        _ => return None,
    })
}

/// A recognized script body (several files when versions share a body).
pub struct Recognized {
    /// Position in the table, for the run counters.
    pub index: usize,
    /// `lock-acquire@4.7.0`; `rwlock-write-acquire@4.7.0+3.13.6` for a
    /// body both versions send.
    pub name: String,
    pub sha: String,
    pub native: Option<NativeFn>,
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
            let native = implementation(file.version, file.name);
            match table.by_sha.get(&sha) {
                Some(&i) => {
                    let known = &mut table.scripts[i];
                    known.name.push('+');
                    known.name.push_str(file.version);
                    known.native = known.native.or(native);
                }
                None => {
                    let index = table.scripts.len();
                    table.by_sha.insert(sha.clone(), index);
                    table.scripts.push(Recognized {
                        index,
                        name: format!("{}@{}", file.name, file.version),
                        sha,
                        native,
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

/// An error that ends the script, as the Lua run would report it.
#[derive(Debug, Clone)]
pub struct ScriptError {
    /// The error's message (`WRONGTYPE …`, `ERR user_script:1: …`).
    text: Bytes,
    /// The script line that raised it.
    line: u32,
}

impl ScriptError {
    /// The client's reply: `<text> script: <sha>, on @user_script:<line>.`
    pub fn into_reply(self, sha: &str) -> Reply {
        let line = self.line.to_string();
        super::convert::located_error(String::from_utf8_lossy(&self.text).into_owned(), sha, Some(("@user_script", &line)))
    }
}

/// What a native script may do: what `redis.call` and the Lua runtime
/// give a Lua script.
pub struct NativeCtx<'a> {
    state: &'a mut State,
    /// The script client: the caller's database, `[0 lua]` in MONITOR.
    client: &'a mut Client,
    read_only: bool,
    wrote: &'a Cell<bool>,
    line: u32,
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
        let cmd = call::resolve(&argv, self.read_only, self.wrote).map_err(|refusal| self.raise(refusal.text))?;
        self.client.resp = 2;
        match self.state.call(self.client, cmd, &argv) {
            Reply::Error(text) => Err(ScriptError { text, line: self.line }),
            reply => Ok(Value::from_reply(reply)),
        }
    }

    /// Later errors point at this script line.
    pub fn at_line(&mut self, line: u32) {
        self.line = line;
    }

    /// Raises a `{err=…}` table, as `redis.call` does.
    fn raise(&self, text: &'static str) -> ScriptError {
        ScriptError {
            text: Bytes::from_static(text.as_bytes()),
            line: self.line,
        }
    }

    /// A Lua runtime error (`attempt to compare nil with number`), as the
    /// VM raises it: positioned, then prefixed `ERR` by Redis's handler.
    pub fn runtime_error(&self, message: &str) -> ScriptError {
        ScriptError {
            text: Bytes::from(format!("ERR user_script:{}: {message}", self.line)),
            line: self.line,
        }
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

/// Runs a native script on behalf of `caller`; the reply is what the
/// client gets, exactly as from the Lua run.
#[allow(clippy::too_many_arguments)]
pub fn run(
    state: &mut State,
    caller: &Client,
    script: NativeFn,
    sha: &str,
    keys: &[Bytes],
    argv: &[Bytes],
    read_only: bool,
    wrote: &Cell<bool>,
) -> Reply {
    let mut client = state.take_script_client(caller);
    let result = {
        let mut cx = NativeCtx {
            state: &mut *state,
            client: &mut client,
            read_only,
            wrote,
            line: 1,
        };
        script(&mut cx, &Params { keys, argv })
    };
    state.return_script_client(client);
    match result {
        Ok(value) => value.into_reply(),
        Err(e) => e.into_reply(sha),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(version, file name, sha1)` from both INDEX.tsv files.
    fn index() -> Vec<(&'static str, String, String)> {
        let mut rows = Vec::new();
        for (version, text) in [
            ("4.7.0", include_str!("../../../lua/redisson/4.7.0/INDEX.tsv")),
            ("3.13.6", include_str!("../../../lua/redisson/3.13.6/INDEX.tsv")),
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
    fn the_reentrant_lock_family_is_native() {
        let table = NativeTable::get();
        for (version, name) in [
            ("4.7.0", "lock-acquire"),
            ("4.7.0", "lock-unlock"),
            ("4.7.0", "lock-renew-batch"),
            ("4.7.0", "lock-force-unlock"),
            ("4.7.0", "keys-pexpire"),
            ("4.7.0", "cluster-detect-probe"),
            ("3.13.6", "lock-acquire"),
            ("3.13.6", "lock-unlock"),
            ("3.13.6", "lock-renew"),
            ("3.13.6", "lock-force-unlock"),
        ] {
            let body = FILES.iter().find(|f| f.version == version && f.name == name).unwrap().body;
            let script = table.recognize(&crate::scripting::sha1_hex(body)).unwrap();
            assert!(script.native.is_some(), "{version}/{name}");
        }
    }
}
