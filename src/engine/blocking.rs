//! Blocked clients: BLPOP and the other blocking pops wait here, parked in
//! the engine (no task polls for them), until a write makes one of their
//! keys ready, a timeout or CLIENT UNBLOCK ends the wait, or they leave.
//!
//! Redis's model (blocked.c), step for step:
//!
//! - a blocking command that finds nothing to pop registers its client on
//!   each of its keys, first come first served ([`State::block`]); the
//!   client runs nothing more until it is unblocked (its connection keeps
//!   what it sent after the blocking command, and reads on, so a closed
//!   connection is noticed);
//! - a write that creates a list or sorted set at a key someone waits on
//!   marks it ready (`Db::signal_ready`, Redis's `signalKeyAsReady`, which
//!   only `dbAdd` calls);
//! - after every command a client runs (a MULTI/EXEC block and a script
//!   count as one), the ready keys are served ([`State::serve_blocked`],
//!   `handleClientsBlockedOnKeys`): the clients waiting on each key, in the
//!   order they blocked, each get what their command pops, until the key
//!   is gone. A BLMOVE's push can make another key ready: serving goes on
//!   until no key is ready;
//! - a timeout answers as Redis's `replyToBlockedClientTimedOut` (a null
//!   array, for BLMOVE too), measured in real time whatever the test
//!   clock says; CLIENT UNBLOCK answers that way or with `-UNBLOCKED`.
//!
//! XREAD and XREADGROUP with BLOCK wait the same way ([`BlockOp::Stream`]):
//! XADD and XGROUP DESTROY mark a stream ready, and so do the deletion,
//! overwriting or expiry of a stream; each stream waiter is then served by
//! `commands::streams::serve_blocked` (Redis's
//! `serveClientsBlockedOnStreamKey`), or, for a group read whose key or
//! group is gone, answered with Redis's error, or left waiting.
//!
//! Inside MULTI/EXEC and scripts nothing blocks (Redis's
//! CLIENT_DENY_BLOCKING): the command answers as if its timeout had passed.
//!
//! CLIENT PAUSE holds clients the same way (Redis's BLOCKED_POSTPONE): a
//! command the pause covers is kept, unanswered, with what the client sent
//! after it, and runs again from the start when the pause ends; while
//! paused, keys past their deadline read as missing but stay in place and
//! active expiry waits, so the dataset does not change.

use std::time::Instant;

use bytes::Bytes;

use super::{Client, State};
use crate::db::{ClientId, Value};
use crate::reply::Reply;

/// CLIENT PAUSE in force (Redis's `client_pause_type` and end time).
#[derive(Debug, Clone, Copy)]
pub struct ClientPause {
    /// Every command, not only writes.
    pub all: bool,
    /// When it ends (real time, as Redis's `mstime`).
    pub end: Instant,
}

/// What a blocked client waits to do.
#[derive(Debug, Clone)]
pub enum BlockOp {
    /// BLPOP / BRPOP, or BLMPOP with its count.
    Pop { left: bool, count: Option<usize> },
    /// BLMOVE / BRPOPLPUSH: pop from the ready key, push to `dst`.
    Move { dst: Bytes, from_left: bool, to_left: bool },
    /// BZPOPMIN / BZPOPMAX, or BZMPOP with its count.
    ZPop { max: bool, count: Option<usize> },
    /// XREAD / XREADGROUP: the ID each key must be read after (`$`
    /// already resolved; `>` is the maximum ID, the group's last ID when
    /// served), how many entries at most, and the group side.
    Stream {
        ids: Vec<(Bytes, crate::db::stream::StreamId)>,
        count: usize,
        group: Option<crate::commands::streams::GroupRead>,
    },
    /// Held by CLIENT PAUSE (Redis's BLOCKED_POSTPONE): the command runs
    /// again, from the start, once the pause ends.
    Postpone(Vec<Bytes>),
    /// WAIT: until `replicas` replicas acknowledged the stream up to
    /// `offset` (Redis's BLOCKED_WAIT); answered when their ACKs come, or
    /// at its timeout with how many did.
    Wait { offset: u64, replicas: usize },
    /// KEYLOCK ADDMEMBER / DELMEMBER: waits for the shard's membership
    /// change to be made; answered by [`State::finish_admin`]. It has no
    /// timeout and CLIENT UNBLOCK leaves it (the change goes on anyway).
    /// SHUTDOWN waiting for the replicas waits so too (Redis's
    /// BLOCKED_SHUTDOWN), answered only if the shutdown is given up.
    Admin,
}

impl BlockOp {
    /// Whether a key holding `value` can serve this wait.
    fn served_by(&self, value: &Value) -> bool {
        match self {
            BlockOp::Pop { .. } | BlockOp::Move { .. } => matches!(value, Value::List(_)),
            BlockOp::ZPop { .. } => matches!(value, Value::ZSet(_)),
            BlockOp::Postpone(_) | BlockOp::Stream { .. } | BlockOp::Admin | BlockOp::Wait { .. } => false,
        }
    }
}

/// A client's wait (Redis's `c->bpop`).
#[derive(Debug)]
pub struct Blocked {
    /// The database of the keys, the client's when it blocked.
    pub db: usize,
    /// The keys, each once, in the order given.
    pub keys: Vec<Bytes>,
    pub op: BlockOp,
    /// When the wait ends unanswered (None: never).
    pub deadline: Option<Instant>,
    /// The blocking command's `commandstats` row (errors when served count there).
    pub stat_index: usize,
    /// The blocking command as sent: the slow log records it when the wait
    /// ends (Redis's `updateStatsOnUnblock`), not when it blocked.
    pub argv: Vec<Bytes>,
}

impl State {
    /// Parks `client` until one of `keys` can serve `op` (the blocking
    /// command answers nothing now). `timeout_ms` 0 waits forever.
    pub fn block(&mut self, client: &mut Client, keys: &[Bytes], op: BlockOp, timeout_ms: u64, stat_index: usize) {
        let mut unique: Vec<Bytes> = Vec::with_capacity(keys.len());
        for key in keys {
            if !unique.contains(key) {
                unique.push(crate::db::value::owned(key));
            }
        }
        for key in &unique {
            self.dbs[client.db].block_on(key.clone(), client.id);
        }
        let deadline = (timeout_ms > 0).then(|| Instant::now() + std::time::Duration::from_millis(timeout_ms));
        client.blocked = Some(Box::new(Blocked {
            db: client.db,
            keys: unique,
            op,
            deadline,
            stat_index,
            argv: Vec::new(),
        }));
        client.outbox.set_blocked(Some(deadline));
        self.blocked_clients += 1;
    }

    /// Holds `client`'s command `argv` until clients are no longer paused
    /// (Redis's `blockClient(c, BLOCKED_POSTPONE)`); it answers nothing now.
    pub fn postpone(&mut self, client: &mut Client, argv: Vec<Bytes>) {
        client.blocked = Some(Box::new(Blocked {
            db: client.db,
            keys: Vec::new(),
            op: BlockOp::Postpone(argv),
            deadline: None,
            stat_index: 0,
            argv: Vec::new(),
        }));
        client.outbox.set_blocked(Some(None));
        self.blocked_clients += 1;
    }

    /// Clients paused by CLIENT PAUSE: `Some(true)` for every command,
    /// `Some(false)` for writes (and what may replicate) only; a
    /// failover's pause is of writes (see `failover`). A pause whose time
    /// is up ends here, and the clients it held run again.
    pub fn paused(&mut self) -> Option<bool> {
        let by_client = match self.pause {
            Some(pause) if Instant::now() >= pause.end => {
                self.unpause();
                None
            }
            pause => pause.map(|p| p.all),
        };
        by_client.or((self.failover.is_some() || self.shutdown_wait.is_some()).then_some(false))
    }

    /// CLIENT PAUSE: pauses clients until `end`, every command (`all`) or
    /// writes only. A pause already on keeps the stricter kind and the
    /// later end, as Redis's `pauseClients`.
    pub fn pause_clients(&mut self, all: bool, end: Instant) {
        let pause = match self.pause {
            Some(p) => ClientPause {
                all: p.all || all,
                end: p.end.max(end),
            },
            None if end <= Instant::now() => return,
            None => ClientPause { all, end },
        };
        self.pause = Some(pause);
        for db in &self.dbs {
            db.keep_expired_keys(true);
        }
    }

    /// Ends any pause (CLIENT UNPAUSE, or its time is up): expiry goes on
    /// and every held client runs its command again.
    pub fn unpause(&mut self) {
        if self.pause.take().is_none() {
            return;
        }
        self.refresh_expiry_mode();
        self.release_paused_clients();
    }

    /// Every client a pause held runs its command again (paused again if
    /// another pause still holds it).
    pub(crate) fn release_paused_clients(&mut self) {
        let held: Vec<ClientId> = self
            .clients
            .values()
            .filter(|c| c.blocked.as_ref().is_some_and(|b| matches!(b.op, BlockOp::Postpone(_))))
            .map(|c| c.id)
            .collect();
        for id in held {
            if let Some(mut client) = self.clients.remove(&id) {
                self.unblock(&mut client);
                client.outbox.wake();
                self.clients.insert(id, client);
            }
        }
    }

    /// Ends `client`'s wait (served, timed out, unblocked or gone).
    pub fn unblock(&mut self, client: &mut Client) {
        let Some(blocked) = client.blocked.take() else { return };
        for key in &blocked.keys {
            self.dbs[blocked.db].unblock_from(key, client.id);
        }
        client.outbox.set_blocked(None);
        self.blocked_clients -= 1;
    }

    /// Serves the clients blocked on the keys writes made ready, until no
    /// key is ready (Redis's `handleClientsBlockedOnKeys`). Each served
    /// client gets its reply and is woken to run what it sent next.
    pub fn serve_blocked(&mut self) {
        loop {
            let mut ready: Vec<(usize, Bytes)> = Vec::new();
            for (db, d) in self.dbs.iter_mut().enumerate() {
                ready.extend(d.take_ready().into_iter().map(|k| (db, k)));
            }
            if ready.is_empty() {
                return;
            }
            for (db, key) in ready {
                self.serve_key(db, &key);
            }
        }
    }

    /// Serves the clients blocked on one ready key, first blocked first,
    /// while the key holds something for them.
    fn serve_key(&mut self, db: usize, key: &Bytes) {
        let now = self.clock.now_ms();
        for id in self.dbs[db].waiters(key) {
            let Some(mut receiver) = self.clients.remove(&id) else { continue };
            if let Some(BlockOp::Stream { .. }) = receiver.blocked.as_ref().map(|b| &b.op) {
                self.serve_stream_waiter(&mut receiver, key);
                self.clients.insert(id, receiver);
                continue;
            }
            let Some(value) = self.dbs[db].get(key, now) else {
                self.clients.insert(id, receiver);
                continue;
            };
            let serves = receiver.blocked.as_ref().is_some_and(|b| b.op.served_by(value));
            if !serves {
                self.clients.insert(id, receiver);
                continue;
            }
            let blocked = receiver.blocked.as_ref().expect("checked above");
            let (op, stat_index) = (blocked.op.clone(), blocked.stat_index);
            let started = crate::clock::ticks::now();
            let reply = match self.serve_one(&mut receiver, key, &op) {
                Ok(reply) => reply,
                Err(error) => {
                    // A BLMOVE whose destination is of another type.
                    self.stats.count_error(&error);
                    self.stats.cmd[stat_index].failed_calls += 1;
                    Reply::from(error)
                }
            };
            self.publish_key_events(&mut receiver);
            self.flush_effects();
            self.log_unblocked(&mut receiver, started);
            self.unblock(&mut receiver);
            self.answer_unblocked(&receiver, reply);
            // Redis's afterCommand(receiver): what its move invalidated for
            // itself follows its reply.
            self.send_pending_invalidations(&mut receiver);
            self.write_inline_pushes(&mut receiver);
            self.clients.insert(id, receiver);
        }
    }

    /// A client blocked by XREAD / XREADGROUP on the ready `key`: served
    /// if the stream now has entries for it (or told, for a group read,
    /// that its key or group is gone), else left waiting.
    fn serve_stream_waiter(&mut self, receiver: &mut Client, key: &Bytes) {
        let Some(blocked) = receiver.blocked.as_ref() else { return };
        let (op, stat_index) = (blocked.op.clone(), blocked.stat_index);
        let now_ms = self.clock.now_ms();
        let started = crate::clock::ticks::now();
        let outcome = {
            let mut ctx = crate::commands::Ctx {
                state: self,
                scripts: None,
                client: receiver,
                now_ms,
            };
            crate::commands::streams::serve_blocked(&mut ctx, key, &op)
        };
        let Some(outcome) = outcome else { return };
        let reply = match outcome {
            Ok(reply) => reply,
            Err(error) => {
                self.stats.count_error(&error);
                self.stats.cmd[stat_index].failed_calls += 1;
                Reply::from(error)
            }
        };
        self.publish_key_events(receiver);
        self.flush_effects();
        self.log_unblocked(receiver, started);
        self.unblock(receiver);
        self.answer_unblocked(receiver, reply);
    }

    /// Runs a blocked client's pop against `key`, as its command would
    /// have run had the key been there (Redis's `serveClientBlockedOnList`
    /// and `serveClientsBlockedOnSortedSetKey`), with the client's
    /// protocol and database (a blocked client cannot SELECT another).
    fn serve_one(&mut self, receiver: &mut Client, key: &Bytes, op: &BlockOp) -> crate::error::CmdResult {
        let now_ms = self.clock.now_ms();
        let mut ctx = crate::commands::Ctx {
            state: self,
            scripts: None,
            client: receiver,
            now_ms,
        };
        crate::commands::blocking::serve(&mut ctx, key, op, true)
    }

    /// Queues the reply of a client whose wait ended and wakes its
    /// connection to send it and run what it sent next.
    pub fn answer_unblocked(&mut self, client: &Client, reply: Reply) {
        if !client.replies_silenced() && self.refuse_reply_to_replica(client, client.last_command) {
            self.unexpected_errors("master", "replica", &reply, client.last_command);
            return;
        }
        self.woken.push(client.id);
        if let Some(mut out) = client.outbox.writable() {
            out.place(false);
            if !client.replies_silenced() {
                reply.encode(client.resp, out.tail());
            }
            out.place(false);
        }
        client.outbox.wake();
        self.check_output_limits(client, true);
    }

    /// What a wait that timed out (or CLIENT UNBLOCK ended) answers
    /// (Redis's `replyToBlockedClientTimedOut`): WAIT how many replicas
    /// acknowledged, the others a null array.
    pub fn timed_out_reply(&self, client: &Client) -> Reply {
        match client.blocked.as_ref().map(|b| &b.op) {
            Some(BlockOp::Wait { offset, .. }) => Reply::Int(self.replicas_acked(*offset) as i64),
            _ => Reply::NilArray,
        }
    }

    /// Answers the WAITs whose replicas have acknowledged enough (Redis's
    /// `processClientsWaitingReplicas`), after an ACK.
    pub fn serve_waits(&mut self) {
        let ids: Vec<ClientId> = self
            .clients
            .values()
            .filter(|c| {
                c.blocked.as_ref().is_some_and(|b| match b.op {
                    BlockOp::Wait { offset, replicas } => self.replicas_acked(offset) >= replicas,
                    _ => false,
                })
            })
            .map(|c| c.id)
            .collect();
        for id in ids {
            let Some(mut client) = self.clients.remove(&id) else { continue };
            let reply = self.timed_out_reply(&client);
            self.log_unblocked(&mut client, crate::clock::ticks::now());
            self.unblock(&mut client);
            self.answer_unblocked(&client, reply);
            self.clients.insert(id, client);
        }
    }

    /// Every client blocked on keys (or on WAIT) is answered with
    /// `error` and closed after it (Redis's `disconnectAllBlockedClients`,
    /// when the server becomes a replica). Those CLIENT PAUSE holds, and
    /// those waiting for an administrative change, wait on.
    pub fn unblock_all_with_error(&mut self, error: &'static str) {
        let ids: Vec<ClientId> = self
            .clients
            .values()
            .filter(|c| {
                c.blocked
                    .as_ref()
                    .is_some_and(|b| !matches!(b.op, BlockOp::Postpone(_) | BlockOp::Admin))
            })
            .map(|c| c.id)
            .collect();
        for id in ids {
            let Some(mut client) = self.clients.remove(&id) else { continue };
            self.log_unblocked(&mut client, crate::clock::ticks::now());
            self.unblock(&mut client);
            let error = crate::commands::CmdError::new(error);
            self.stats.count_error(&error);
            self.answer_unblocked(&client, Reply::from(error));
            client.outbox.close();
            self.clients.insert(id, client);
        }
    }

    /// The administrative change client `id` waits for is made (or
    /// failed): it gets its outcome.
    pub fn finish_admin(&mut self, id: ClientId, outcome: Result<Reply, crate::commands::CmdError>) {
        let Some(mut client) = self.clients.remove(&id) else { return };
        if let Some(stat_index) = client
            .blocked
            .as_ref()
            .filter(|b| matches!(b.op, BlockOp::Admin))
            .map(|b| b.stat_index)
        {
            let reply = outcome.unwrap_or_else(|error| {
                self.stats.count_error(&error);
                self.stats.cmd[stat_index].failed_calls += 1;
                Reply::from(error)
            });
            self.log_unblocked(&mut client, crate::clock::ticks::now());
            self.unblock(&mut client);
            self.answer_unblocked(&client, reply);
        }
        self.clients.insert(id, client);
    }

    /// The wait of client `id` ran out: it gets a null array (Redis's
    /// `replyToBlockedClientTimedOut`). False if it was not blocked, or not
    /// yet due.
    pub fn time_out_blocked(&mut self, id: ClientId, now: Instant) -> bool {
        let Some(mut client) = self.clients.remove(&id) else { return false };
        let due = client.blocked.as_ref().is_some_and(|b| b.deadline.is_some_and(|d| d <= now));
        if due {
            // Redis's timeout path leaves the slow log alone.
            let reply = self.timed_out_reply(&client);
            self.unblock(&mut client);
            self.answer_unblocked(&client, reply);
        }
        self.clients.insert(id, client);
        due
    }
}
