//! Serving replicas (the master side of Redis's `replication.c`): a
//! connection that sends SYNC (or PSYNC, answered `+FULLRESYNC`) gets the
//! dataset as an RDB snapshot (`$<length>` and the file's bytes), then the
//! effect stream for replicas (`engine::effects`, the replication target:
//! every write as it is to be replayed, PUBLISH included, with SELECT and
//! MULTI/EXEC where Redis puts them), and a PING every
//! `repl-ping-replica-period` seconds. A redis-server started with
//! `--replicaof` keylock's address follows keylock this way, and so do the
//! tools that read a master's stream (`redis-cli --replica`, Redis's test
//! suite).
//!
//! The snapshot is made in the foreground when the replica asks; keylock
//! does not keep a replication backlog, so every PSYNC is a full
//! resynchronization, and it does not replicate from a master.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;

use super::effects::EffectsTap;
use super::{Client, State};
use crate::db::ClientId;

/// What a replica told of itself (REPLCONF), and how far it acknowledged
/// the stream.
#[derive(Debug, Default, Clone)]
pub struct Announced {
    /// `REPLCONF ip-address`, shown instead of the connection's address.
    pub ip: Option<String>,
    /// `REPLCONF listening-port`.
    pub port: u16,
    /// The last `REPLCONF ACK` offset, and when it came (the clock's
    /// second).
    pub ack_offset: u64,
    pub ack_secs: u64,
    /// It sent SYNC or PSYNC.
    pub synced: bool,
    /// Its output, reachable while its own batch runs (an ACK's), when
    /// its client is out of the engine's map.
    pub outbox: Option<super::Outbox>,
    /// Stream bytes queued after its snapshot, while the snapshot is not
    /// all written (None once it is: the replica is online).
    pub after_snapshot: Option<u64>,
}

impl Announced {
    /// A replica (it sent SYNC) whose snapshot is all written (Redis's
    /// SLAVE_STATE_ONLINE). Kept here, not on its client, so that it is
    /// known while the replica's own batch runs (an ACK's).
    pub fn online(&self) -> bool {
        self.synced && self.after_snapshot.is_none()
    }
}

/// The replicas and their shared stream.
#[derive(Debug)]
pub struct Replicas {
    pub ids: Vec<ClientId>,
    /// What connections told with REPLCONF (before SYNC, too), by client.
    pub announced: std::collections::HashMap<ClientId, Announced>,
    /// What the effect stream handed the replicas since the last feed.
    stream: Arc<Mutex<Vec<u8>>>,
    tap: Option<u64>,
    /// Bytes of stream sent so far (INFO `master_repl_offset`).
    pub offset: u64,
    last_ping: Instant,
    /// Full resynchronizations served (INFO `sync_full`).
    pub full_syncs: u64,
    /// A WAIT asked for the replicas' offsets (see
    /// [`State::send_getack_if_due`]).
    pub getack_due: bool,
}

impl Default for Replicas {
    fn default() -> Replicas {
        Replicas {
            ids: Vec::new(),
            announced: std::collections::HashMap::new(),
            stream: Arc::new(Mutex::new(Vec::new())),
            tap: None,
            offset: 0,
            last_ping: Instant::now(),
            full_syncs: 0,
            getack_due: false,
        }
    }
}

impl State {
    /// SYNC / PSYNC from `client`: the snapshot, after `+FULLRESYNC` for
    /// PSYNC; from now on the client gets the stream. `codes` are the
    /// function libraries.
    pub fn add_replica(&mut self, client: &Client, codes: &[Bytes], psync: bool) -> std::io::Result<Bytes> {
        let mut rdb = Vec::new();
        self.write_snapshot(&mut rdb, codes, false)?;
        self.replicas.full_syncs += 1;
        let mut reply = Vec::with_capacity(rdb.len() + 64);
        if psync {
            reply.extend_from_slice(format!("+FULLRESYNC {} {}\r\n", self.master_replid(), self.replicas.offset).as_bytes());
        }
        reply.extend_from_slice(format!("${}\r\n", rdb.len()).as_bytes());
        reply.extend_from_slice(&rdb);
        if !self.replicas.ids.contains(&client.id) {
            self.replicas.ids.push(client.id);
        }
        let now_secs = self.clock.now_ms() / 1000;
        let announced = self.replicas.announced.entry(client.id).or_default();
        announced.ack_secs = now_secs;
        announced.synced = true;
        announced.outbox = Some(client.outbox.clone());
        announced.after_snapshot = Some(0);
        match self.replicas.tap {
            // The stream goes on; its next effect comes after a SELECT, so
            // that the new replica knows its database.
            Some(id) => self.effects.reselect(id),
            None => {
                let stream = self.replicas.stream.clone();
                self.key_events.record_expired_deletions();
                let id = self.effects.attach(EffectsTap::replication(move |bytes| {
                    stream.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(bytes)
                }));
                self.replicas.tap = Some(id);
            }
        }
        crate::log::notice(format_args!("Replica {} asks for synchronization", client.peer));
        Ok(Bytes::from(reply))
    }

    /// `REPLCONF ACK offset` from replica `id`.
    pub fn replica_acked(&mut self, id: ClientId, offset: u64) {
        let now_secs = self.clock.now_ms() / 1000;
        if let Some(a) = self.replicas.announced.get_mut(&id) {
            a.ack_offset = a.ack_offset.max(offset);
            a.ack_secs = now_secs;
        }
        if self.blocked_clients > 0 {
            self.serve_waits();
        }
    }

    /// Every replica is to be asked for its offset (`REPLCONF GETACK *`)
    /// once the batch is over, for a WAIT that blocked (Redis's
    /// `replicationRequestAckFromSlaves`).
    pub fn request_acks(&mut self) {
        self.replicas.getack_due = true;
    }

    /// Sends the GETACK asked for, unless clients are paused (Redis's
    /// `beforeSleep`): after the batch, and from the cron.
    pub fn send_getack_if_due(&mut self) {
        if !self.replicas.getack_due || self.paused().is_some() {
            return;
        }
        self.replicas.getack_due = false;
        if !self.replicas.ids.is_empty() && self.master.is_none() {
            self.send_to_replicas(b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n");
        }
    }

    /// Replicas online whose last ACK is at most `min-replicas-max-lag`
    /// seconds old (Redis's `repl_good_slaves_count`).
    pub fn good_replicas(&self) -> usize {
        let now_secs = self.clock.now_ms() / 1000;
        let max_lag = self.runtime.min_replicas_max_lag.max(0) as u64;
        self.online_replicas()
            .filter(|a| now_secs.saturating_sub(a.ack_secs) <= max_lag)
            .count()
    }

    /// What the replicas online told of themselves.
    fn online_replicas(&self) -> impl Iterator<Item = &Announced> {
        self.replicas
            .ids
            .iter()
            .filter_map(|id| self.replicas.announced.get(id))
            .filter(|a| a.online())
    }

    /// The memory the replicas' output holds (INFO `mem_clients_slaves`),
    /// which `maxmemory` does not count (Redis's replication buffer,
    /// `freeMemoryGetNotCountedMemory`).
    pub fn replica_buffers(&self) -> u64 {
        self.replicas
            .ids
            .iter()
            .filter_map(|id| self.replicas.announced.get(id)?.outbox.as_ref())
            .map(|outbox| outbox.buffer().borrow().allocated() as u64)
            .sum()
    }

    /// How many replicas acknowledged the stream up to `offset`.
    pub fn replicas_acked(&self, offset: u64) -> usize {
        self.online_replicas().filter(|a| a.ack_offset >= offset).count()
    }

    /// A replica's connection is gone.
    pub fn remove_replica(&mut self, id: ClientId) {
        self.replicas.ids.retain(|&r| r != id);
        self.replicas.announced.remove(&id);
        if self.replicas.ids.is_empty()
            && let Some(tap) = self.replicas.tap.take()
        {
            self.effects.detach(tap);
        }
    }

    /// Hands the replicas what the stream holds (after each flush of the
    /// effects).
    pub fn feed_replicas(&mut self) {
        if self.replicas.ids.is_empty() {
            return;
        }
        let bytes = std::mem::take(&mut *self.replicas.stream.lock().unwrap_or_else(|e| e.into_inner()));
        // A replica's replicas get its master's stream as it came (see
        // `replica`), not what running it wrote.
        if !bytes.is_empty() && self.master.is_none() {
            self.send_to_replicas(&bytes);
        }
    }

    pub(crate) fn send_to_replicas(&mut self, bytes: &[u8]) {
        self.replicas.offset += bytes.len() as u64;
        for id in &self.replicas.ids {
            if let Some(replica) = self.clients.get(id) {
                if let Some(mut out) = replica.outbox.writable() {
                    // In whole chunks, never a chunk regrown past its size.
                    out.extend_from_slice(bytes);
                    out.place(false);
                }
                replica.outbox.wake();
                if let Some(after) = self.replicas.announced.get_mut(id).and_then(|a| a.after_snapshot.as_mut()) {
                    *after += bytes.len() as u64;
                }
            }
        }
        self.note_replicas_online();
    }

    /// Replicas whose snapshot is all written are online: the `replica`
    /// class of `client-output-buffer-limit` holds them from now on (the
    /// snapshot never counts toward it, as Redis sends it beside the
    /// output buffer).
    pub fn note_replicas_online(&mut self) {
        for id in &self.replicas.ids {
            let Some(announced) = self.replicas.announced.get_mut(id) else {
                continue;
            };
            let Some(after) = announced.after_snapshot else { continue };
            let Some(replica) = self.clients.get_mut(id) else { continue };
            if replica.outbox.unwritten() as u64 <= after {
                announced.after_snapshot = None;
                replica.replica_online = true;
                replica.outbox.set_class(replica.output_class());
            }
        }
    }

    /// The cron's part: a PING every `repl-ping-replica-period` seconds,
    /// so that replicas know the master is there.
    pub fn ping_replicas(&mut self) {
        self.note_replicas_online();
        self.send_getack_if_due();
        // A replica's replicas get its master's PINGs.
        if self.replicas.ids.is_empty() || self.master.is_some() {
            return;
        }
        let period = self.params.int("repl-ping-replica-period").unwrap_or(10).max(1) as u64;
        if self.replicas.last_ping.elapsed().as_secs() >= period {
            self.replicas.last_ping = Instant::now();
            self.send_to_replicas(b"*1\r\n$4\r\nPING\r\n");
        }
    }
}
