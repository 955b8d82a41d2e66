//! Effects: every write, as it must be replayed elsewhere.
//!
//! A command that changes the dataset is an *effect*: the command line that
//! makes the same change when replayed in order on another copy of the
//! data. This is the stream an append-only file appends and a replica
//! applies; consumers attach as [`EffectsTap`]s and nothing else needs to
//! know where the stream goes. Redis 7.0's propagation is the model, rule
//! for rule, so that keylock's stream is the one redis-server would write:
//!
//! - A command whose run left the dirty counter higher (Redis's
//!   `server.dirty`, [`State::dirty`](super::State)) is an effect, as
//!   sent, unless its handler replaced it ([`CommandEffect::rewrite`]:
//!   relative expiries become `PEXPIREAT`, `SPOP` becomes `SREM`, a blocking
//!   pop its plain form…), prevented it (EVAL, FCALL and EXEC are never
//!   effects themselves: what they ran is) or forced it (FLUSHALL on an
//!   empty server, PUBLISH to replicas).
//! - A handler may add effects of its own ([`Effects::push`], Redis's
//!   `alsoPropagate`); a key expiry removes is a `DEL` effect where it
//!   happens, ahead of the command that found it expired.
//! - Effects accumulate while a client's command runs, with everything it
//!   runs in turn (a transaction's commands, a script's). When it ends,
//!   more than one effect is wrapped in `MULTI` / `EXEC`
//!   (`propagatePendingCommands`), except for the active expiry cycle and
//!   for SCAN and RANDOMKEY run directly.
//! - Each consumer sees `SELECT` ahead of an effect in another database
//!   than its last one, and only the effects meant for it: PUBLISH goes to
//!   replicas, not to an append-only file.
//!
//! While no consumer is attached, nothing is recorded: the dirty counter
//! (INFO `rdb_changes_since_last_save`) is all a write costs.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

/// Redis's `PROPAGATE_AOF`: the effect belongs in an append-only file.
pub const AOF: u8 = 1;
/// Redis's `PROPAGATE_REPL`: the effect goes to replicas.
pub const REPL: u8 = 2;
/// Both.
pub const ALL: u8 = AOF | REPL;

/// One pending effect: in database `db`, for `target`, the command line
/// encoded at `range` of [`Effects`]'s buffer (encoded once, whatever the
/// number of consumers, and without holding on to the arguments).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Effect {
    db: usize,
    target: u8,
    range: std::ops::Range<usize>,
}

/// A consumer of the effect stream. It receives the stream RESP-encoded
/// exactly as Redis writes it to an append-only file ([`EffectsTap::aof`])
/// or to a replica ([`EffectsTap::replication`]): each command a RESP
/// array of bulk strings, with `SELECT`, `MULTI` and `EXEC` where Redis
/// puts them. Called on the engine's thread once per finished command (or
/// transaction, script, expiry cycle) that had effects: it must not block.
#[derive(Clone)]
pub struct EffectsTap {
    target: u8,
    out: Arc<Consumer>,
}

/// What a tap hands the stream to.
type Consumer = dyn Fn(&[u8]) + Send + Sync;

impl EffectsTap {
    /// The stream an append-only file records (PUBLISH is not in it).
    pub fn aof(out: impl Fn(&[u8]) + Send + Sync + 'static) -> EffectsTap {
        EffectsTap {
            target: AOF,
            out: Arc::new(out),
        }
    }

    /// The stream a replica receives.
    pub fn replication(out: impl Fn(&[u8]) + Send + Sync + 'static) -> EffectsTap {
        EffectsTap {
            target: REPL,
            out: Arc::new(out),
        }
    }
}

impl fmt::Debug for EffectsTap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.target == AOF { "aof" } else { "replication" };
        write!(f, "EffectsTap({kind})")
    }
}

/// What the running command asked for its own effect (Redis's
/// `CLIENT_PREVENT_PROP` / `CLIENT_FORCE_*` flags and the rewritten
/// `argv`). Each nested command has its own.
#[derive(Debug, Default)]
pub struct CommandEffect {
    /// The command's effect is this command line, not the one sent.
    pub rewrite: Option<Vec<Bytes>>,
    /// Targets the command is never an effect for.
    pub prevent: u8,
    /// Targets the command is an effect for even if it changed nothing
    /// (Redis's `forceCommandPropagation`).
    pub force: u8,
}

/// The effect stream's state in the engine.
#[derive(Debug, Default)]
pub struct Effects {
    taps: Vec<Tap>,
    /// Effects of the running client command, not yet handed out, and
    /// their encoded command lines.
    pending: Vec<Effect>,
    encoded: Vec<u8>,
    /// The buffer a consumer's stream is put together in.
    out: Vec<u8>,
    /// What the running command asked for.
    pub command: CommandEffect,
    /// What the commands running the current one asked for, outermost
    /// first (EXEC and scripts run commands): effects are handed out when
    /// the outermost ends.
    outer: Vec<CommandEffect>,
    suspended: bool,
}

#[derive(Debug)]
struct Tap {
    tap: EffectsTap,
    /// The database its stream last selected (none before the first).
    selected: Option<usize>,
    id: u64,
}

impl Effects {
    pub fn new(taps: &[EffectsTap]) -> Effects {
        Effects {
            taps: taps
                .iter()
                .enumerate()
                .map(|(id, tap)| Tap {
                    tap: tap.clone(),
                    selected: None,
                    id: id as u64,
                })
                .collect(),
            ..Effects::default()
        }
    }

    /// Whether anyone consumes effects: rewrites are built only then.
    #[inline]
    pub fn on(&self) -> bool {
        !self.taps.is_empty() && !self.suspended
    }

    /// While an append-only file is replayed, nothing it runs is an
    /// effect (it is what the effects were).
    pub fn suspend(&mut self, suspended: bool) {
        self.suspended = suspended;
    }

    /// Attaches a consumer between commands (the append-only file, turned
    /// on); its stream starts with the next effect, after a SELECT. Its
    /// id detaches it.
    pub fn attach(&mut self, tap: EffectsTap) -> u64 {
        let id = self.taps.iter().map(|t| t.id + 1).max().unwrap_or(0).max(1 << 32);
        self.taps.push(Tap { tap, selected: None, id });
        id
    }

    pub fn detach(&mut self, id: u64) {
        self.taps.retain(|t| t.id != id);
    }

    /// The database the consumer's stream last selected, if any.
    pub fn selected(&self, id: u64) -> Option<usize> {
        self.taps.iter().find(|t| t.id == id)?.selected
    }

    /// The consumer's next effect comes after a SELECT (a new file).
    pub fn reselect(&mut self, id: u64) {
        if let Some(t) = self.taps.iter_mut().find(|t| t.id == id) {
            t.selected = None;
        }
    }

    /// Adds an effect after those recorded so far (Redis's `alsoPropagate`).
    /// An effect for a target no consumer reads is not recorded at all,
    /// as Redis's `shouldPropagate` drops it: it does not count towards
    /// wrapping the others in a transaction.
    pub fn push<A: AsRef<[u8]>>(&mut self, db: usize, argv: &[A], target: u8) {
        let read = self.taps.iter().fold(0, |t, tap| t | tap.tap.target);
        if self.on() && target & read != 0 {
            let start = self.encoded.len();
            encode(&mut self.encoded, argv);
            self.pending.push(Effect {
                db,
                target,
                range: start..self.encoded.len(),
            });
        }
    }

    /// A command starts running: it gets a fresh [`CommandEffect`], the
    /// one of the command running it is kept until it ends.
    pub fn enter(&mut self) {
        let outer = std::mem::take(&mut self.command);
        self.outer.push(outer);
    }

    /// The command started by the matching [`Effects::enter`] ended: what
    /// it asked for (the outer command's is restored), and whether it was
    /// the outermost (its effects are to be handed out).
    pub fn leave(&mut self) -> (CommandEffect, bool) {
        let outer = self.outer.pop().unwrap_or_default();
        (std::mem::replace(&mut self.command, outer), self.outer.is_empty())
    }

    /// Whether a command is running (effects are handed out at its end).
    pub fn in_command(&self) -> bool {
        !self.outer.is_empty()
    }

    /// Hands the pending effects to every consumer (Redis's
    /// `propagatePendingCommands`): more than one, unless `no_multi`, as
    /// one transaction.
    pub fn flush(&mut self, no_multi: bool) {
        if self.pending.is_empty() {
            return;
        }
        const MULTI: &[u8] = b"*1\r\n$5\r\nMULTI\r\n";
        const EXEC: &[u8] = b"*1\r\n$4\r\nEXEC\r\n";
        let transaction = self.pending.len() > 1 && !no_multi;
        let first_db = self.pending[0].db;
        let last_db = self.pending[self.pending.len() - 1].db;
        let out = &mut self.out;
        for tap in &mut self.taps {
            out.clear();
            if transaction {
                emit(out, &mut tap.selected, first_db, MULTI);
            }
            for effect in self.pending.iter().filter(|e| e.target & tap.tap.target != 0) {
                emit(out, &mut tap.selected, effect.db, &self.encoded[effect.range.clone()]);
            }
            if transaction {
                emit(out, &mut tap.selected, last_db, EXEC);
            }
            if !out.is_empty() {
                (tap.tap.out)(out);
            }
        }
        self.pending.clear();
        self.encoded.clear();
    }
}

/// Appends an encoded command in database `db` to a consumer's stream,
/// after a `SELECT` if its stream is in another database.
fn emit(out: &mut Vec<u8>, selected: &mut Option<usize>, db: usize, command: &[u8]) {
    if *selected != Some(db) {
        let mut number = itoa::Buffer::new();
        encode(out, &[b"SELECT".as_slice(), number.format(db).as_bytes()]);
        *selected = Some(db);
    }
    out.extend_from_slice(command);
}

/// A command line as a RESP array of bulk strings.
pub(crate) fn encode<A: AsRef<[u8]>>(out: &mut Vec<u8>, argv: &[A]) {
    out.reserve(argv.iter().map(|a| a.as_ref().len() + 16).sum::<usize>() + 16);
    let mut number = itoa::Buffer::new();
    out.push(b'*');
    out.extend_from_slice(number.format(argv.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    for arg in argv {
        let arg = arg.as_ref();
        out.push(b'$');
        out.extend_from_slice(number.format(arg.len()).as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    fn argv(words: &[&str]) -> Vec<Bytes> {
        words.iter().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect()
    }

    #[test]
    fn several_effects_are_one_transaction_with_select_where_the_database_changes() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let mut effects = Effects::new(&[EffectsTap::aof(move |b| sink.lock().unwrap().extend_from_slice(b))]);
        effects.push(0, &argv(&["SET", "a", "1"]), ALL);
        effects.push(0, &argv(&["PUBLISH", "c", "m"]), REPL);
        effects.push(1, &argv(&["DEL", "b"]), ALL);
        effects.flush(false);
        effects.push(1, &argv(&["INCR", "n"]), ALL);
        effects.flush(false);
        let text = String::from_utf8(seen.lock().unwrap().clone()).unwrap();
        assert_eq!(
            text,
            "*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*1\r\n$5\r\nMULTI\r\n*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n\
             *2\r\n$6\r\nSELECT\r\n$1\r\n1\r\n*2\r\n$3\r\nDEL\r\n$1\r\nb\r\n*1\r\n$4\r\nEXEC\r\n\
             *2\r\n$4\r\nINCR\r\n$1\r\nn\r\n"
        );
    }

    #[test]
    fn nothing_is_recorded_without_a_consumer() {
        let mut effects = Effects::default();
        effects.push(0, &argv(&["SET", "a", "1"]), ALL);
        assert!(effects.pending.is_empty());
    }
}
