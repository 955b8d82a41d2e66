//! Command handlers, one module per family, and the context they run in.
//!
//! A handler is a plain function `fn(&mut Ctx, &[Bytes]) -> CmdResult`:
//! arguments in (argv[0] is the command name), a [`Reply`] or a
//! [`CmdError`] out. It reaches the keyspace, the client's own state and
//! the rest of the engine through [`Ctx`], and knows nothing of sockets.

pub mod acl;
pub mod args;
pub mod bitmaps;
pub mod blocking;
pub mod cluster;
pub mod connection;
pub mod debug;
pub mod defs;
pub mod dump;
pub mod functions;
pub mod geo;
pub mod hashes;
pub mod hyperloglog;
pub mod info;
pub mod keylock;
pub mod keys;
pub mod latency;
pub mod lcs;
pub mod lists;
pub mod lolwut;
pub mod memory;
pub mod migrate;
pub mod pubsub;
pub mod replication;
#[rustfmt::skip]
pub mod redis_defs;
pub mod scripting;
#[cfg(feature = "raft")]
pub mod sentinel;
pub mod server;
pub mod sets;
pub mod sort;
pub mod streams;
pub mod strings;
pub mod table;
pub mod transactions;
pub mod zsets;

use bytes::Bytes;

use crate::db::{Db, Value};
use crate::engine::{Client, State};

pub use crate::error::{CmdError, CmdResult};
pub use crate::reply::Reply;
pub use args::Args;

/// What a handler may touch: the engine's state and the calling client.
pub struct Ctx<'a> {
    pub state: &'a mut State,
    /// The scripting beside the state: the engine's for a client's command
    /// (and those EXEC runs), None for a script's own commands.
    pub scripts: Option<&'a mut crate::engine::Scripts>,
    pub client: &'a mut Client,
    /// The time this command runs at, read once.
    pub now_ms: u64,
}

impl Ctx<'_> {
    /// Counts `n` changes to the dataset (Redis's `server.dirty += n`).
    /// A command that modified a key without counting any counts one.
    #[inline]
    pub fn dirty(&mut self, n: u64) {
        self.state.dirty += n;
        self.state.dirty_counted = true;
    }

    /// Whether a deadline `at` a command sets has passed already (Redis's
    /// `checkAlreadyExpired`): the key is then deleted instead. Never
    /// while an append-only file, a Raft entry or a master's stream is
    /// replayed, nor on a replica: there the key keeps the deadline, to be
    /// expired where it was written (or once loading ends), as in Redis.
    pub fn already_expired(&self, at: i64) -> bool {
        at <= self.now_ms as i64 && !self.client.replaying && self.state.i_am_master()
    }

    /// Whether effects are recorded (see `engine::effects`): a handler
    /// builds a replacement effect only then.
    #[inline]
    pub fn propagating(&self) -> bool {
        self.state.effects.on()
    }

    /// This command's effect is `argv` rather than the command as sent
    /// (Redis's `rewriteClientCommandVector`), in the client's database.
    pub fn propagate_as(&mut self, argv: Vec<Bytes>) {
        if self.propagating() {
            self.state.effects.command.rewrite = Some(argv);
        }
    }

    /// [`Ctx::propagate_as`] from words.
    pub fn propagate_as_words(&mut self, words: &[&[u8]]) {
        if self.propagating() {
            self.propagate_as(words.iter().map(|w| Bytes::copy_from_slice(w)).collect());
        }
    }

    /// An effect besides the command's own, before it (Redis's
    /// `alsoPropagate`), in the client's database.
    pub fn also_propagate(&mut self, argv: Vec<Bytes>) {
        let db = self.client.db;
        self.state.effects.push(db, &argv, crate::engine::effects::ALL);
    }

    /// This command is no effect itself, whatever it changed (Redis's
    /// `preventCommandPropagation`): its effects are those it recorded.
    pub fn prevent_propagation(&mut self) {
        if self.propagating() {
            self.state.effects.command.prevent = crate::engine::effects::ALL;
        }
    }

    /// This command is an effect for `target` even if it changed nothing
    /// (Redis's `forceCommandPropagation`).
    pub fn force_propagation(&mut self, target: u8) {
        if self.propagating() {
            self.state.effects.command.force |= target;
        }
    }

    /// The client's selected database. Writes look keys up here and count
    /// no hit or miss, as Redis's `lookupKeyWrite`; an expired key is still
    /// reclaimed and counted in `expired_keys`.
    pub fn db(&mut self) -> &mut Db {
        &mut self.state.dbs[self.client.db]
    }

    /// Reads a live key with one lookup, counting it for INFO's
    /// keyspace_hits / keyspace_misses.
    pub fn read(&mut self, key: &[u8]) -> Option<&Value> {
        let now = self.now_ms;
        let state = &mut *self.state;
        let db = &mut state.dbs[self.client.db];
        let Some(position) = db.live_position(key, now) else {
            state.stats.keyspace_misses += 1;
            db.notify(crate::db::NOTIFY_KEY_MISS, "keymiss", key);
            return None;
        };
        state.stats.keyspace_hits += 1;
        Some(db.value_at(position))
    }

    /// [`Ctx::read`] without marking the key accessed (Redis's
    /// LOOKUP_NOTOUCH: EXISTS, TYPE, the TTL family, OBJECT).
    pub fn read_no_touch(&mut self, key: &[u8]) -> Option<&Value> {
        let now = self.now_ms;
        let state = &mut *self.state;
        let db = &mut state.dbs[self.client.db];
        let Some(position) = db.live_position_no_touch(key, now) else {
            state.stats.keyspace_misses += 1;
            db.notify(crate::db::NOTIFY_KEY_MISS, "keymiss", key);
            return None;
        };
        state.stats.keyspace_hits += 1;
        Some(db.value_at(position))
    }

    /// [`Ctx::read_no_touch`] without the `keymiss` event (Redis's
    /// LOOKUP_NONOTIFY: OBJECT).
    pub fn read_no_touch_unnotified(&mut self, key: &[u8]) -> Option<&Value> {
        let now = self.now_ms;
        let state = &mut *self.state;
        let found = state.dbs[self.client.db].get_no_touch(key, now);
        if found.is_some() {
            state.stats.keyspace_hits += 1;
        } else {
            state.stats.keyspace_misses += 1;
        }
        found
    }

    /// [`Ctx::read_position`] without marking the key accessed.
    pub fn read_position_no_touch(&mut self, key: &[u8]) -> Option<usize> {
        let now = self.now_ms;
        let at = self.state.dbs[self.client.db].live_position_no_touch(key, now);
        self.count_lookup(key, at.is_some());
        at
    }

    /// Says that this command's reply sends its length last, as Redis's
    /// `addReplyDeferredLen` does (KEYS, SINTER, score and lex ranges, a
    /// script's table…): Redis holds all of such a reply in the reply
    /// list its output limits count (see `engine::output`).
    pub fn defer_reply_len(&mut self) {
        self.client.deferred_len = true;
    }

    /// A gauge to build a reply the data does not bound (or one Redis
    /// stops building once its client is closing) against the client's
    /// output limits: the command stops adding elements when the gauge
    /// says so, and the client is then closed as the limit closes it.
    pub fn reply_gauge(&self) -> crate::engine::ReplyGauge {
        self.state.reply_gauge(self.client)
    }

    /// Where a live key is, with one lookup, counted as [`Ctx::read`]
    /// counts it: for the position-based operations of `db::ops`.
    pub fn read_position(&mut self, key: &[u8]) -> Option<usize> {
        let now = self.now_ms;
        let at = self.state.dbs[self.client.db].live_position(key, now);
        self.count_lookup(key, at.is_some());
        at
    }

    /// Where a live key is, with one lookup that is not counted (a write's).
    pub fn write_position(&mut self, key: &[u8]) -> Option<usize> {
        let now = self.now_ms;
        self.state.dbs[self.client.db].live_position(key, now)
    }

    /// Counts a read's outcome for INFO's keyspace_hits / keyspace_misses;
    /// a miss is also a `keymiss` event, as Redis's `lookupKey` makes it.
    pub fn count_lookup(&mut self, key: &[u8], hit: bool) {
        if hit {
            self.state.stats.keyspace_hits += 1;
        } else {
            self.state.stats.keyspace_misses += 1;
            self.state.dbs[self.client.db].notify(crate::db::NOTIFY_KEY_MISS, "keymiss", key);
        }
    }
}

/// Every family's table rows, in COMMAND listing order.
pub fn all_families() -> &'static [&'static [table::CommandSpec]] {
    &[
        connection::COMMANDS,
        server::COMMANDS,
        latency::COMMANDS,
        lolwut::COMMANDS,
        replication::COMMANDS,
        cluster::COMMANDS,
        memory::COMMANDS,
        debug::COMMANDS,
        keys::COMMANDS,
        dump::COMMANDS,
        migrate::COMMANDS,
        sort::COMMANDS,
        strings::COMMANDS,
        lcs::COMMANDS,
        bitmaps::COMMANDS,
        hyperloglog::COMMANDS,
        hashes::COMMANDS,
        lists::COMMANDS,
        blocking::COMMANDS,
        sets::COMMANDS,
        zsets::COMMANDS,
        geo::COMMANDS,
        streams::COMMANDS,
        pubsub::COMMANDS,
        scripting::COMMANDS,
        functions::COMMANDS,
        transactions::COMMANDS,
        acl::COMMANDS,
        keylock::COMMANDS,
    ]
}
