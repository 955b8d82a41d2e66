//! Being a replica (the replica side of Redis's `replication.c`):
//! `REPLICAOF host port` (or `replicaof` in the configuration) makes this
//! server follow a master, a redis-server or another keylock.
//!
//! The link itself (connect, handshake, the snapshot's transfer, reading
//! the stream) is the network side's (`server::replica`); the engine keeps
//! what Redis's `server.master*` fields keep and does what the link asks:
//!
//! - `REPLICAOF` sets the master and a new link generation; the network
//!   side ends the link of an older one and starts one for this.
//! - Once the master's snapshot has arrived, it replaces the dataset and
//!   the function libraries ([`Engine::master_synced`]); the replication
//!   ID and offset become the master's, the replicas of this server are
//!   disconnected (they resynchronize from the new history), and the
//!   master's connection becomes a client flagged `M` in CLIENT LIST,
//!   which runs the stream.
//! - The stream's commands run as that client ([`Engine::run_master_stream`]):
//!   no reply goes back, nothing a replica refuses its clients is refused
//!   to it, and what they write reaches this server's append-only file.
//!   The stream's bytes go on, unchanged, to this server's own replicas
//!   (Redis's `replicationFeedStreamFromMasterStream`), and count in the
//!   replication offset.
//! - Meanwhile (`replica-read-only yes`) other clients' writes get
//!   `READONLY`, keys are never expired here (the master's DELs remove
//!   them; reads do not see keys past their deadline), and the stream's
//!   writes are not sent on a second time from the effect stream.
//! - `REPLICAOF NO ONE` ends the link and makes this server a master that
//!   continues the history: the master's replication ID becomes its second
//!   ID, valid up to the offset reached, and a new one is drawn.
//! - A link that breaks leaves what Redis calls the cached master: the
//!   replication ID and offset reached, and the database the stream had
//!   selected. The next link asks `PSYNC <replid> <offset+1>`, and on
//!   `+CONTINUE [replid]` the stream goes on from there
//!   ([`Engine::master_continued`]); a master told REPLICAOF asks the
//!   same with its own history, so that a failover costs no snapshot.
//!   Without one (the first link, or once a new master's snapshot
//!   started loading: with `repl-diskless-load swapdb`, once it has
//!   loaded; Redis's `replicationAttachToNewMaster`) it asks `PSYNC ? -1`.
//!   A full sync that fails before leaves the cached master in place.

use bytes::Bytes;

use super::{ClientAddr, Engine, Outbox, State};
use crate::db::ClientId;

/// Where the link to the master is (Redis's `repl_state`, as ROLE names it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkState {
    /// Not connected; the link connects at its next attempt.
    Connect,
    /// The TCP (or TLS) connection is being made.
    Connecting,
    /// PING, AUTH, REPLCONF and PSYNC are being exchanged.
    Handshake,
    /// The master's snapshot is arriving.
    Transfer,
    /// The stream runs.
    Connected,
}

impl LinkState {
    /// ROLE's name for the state.
    pub fn name(self) -> &'static str {
        match self {
            LinkState::Connect => "connect",
            LinkState::Connecting => "connecting",
            LinkState::Handshake => "handshake",
            LinkState::Transfer => "sync",
            LinkState::Connected => "connected",
        }
    }
}

/// The master this server replicates, and its link's state.
#[derive(Debug)]
pub struct Master {
    pub host: String,
    pub port: u16,
    /// Bumped by every REPLICAOF: a link of an older one ends.
    pub generation: u64,
    pub link: LinkState,
    /// The master's client, while the stream runs.
    pub client: Option<ClientId>,
    /// Stream bytes read (INFO `slave_read_repl_offset`); those applied
    /// are the server's replication offset.
    pub read_offset: u64,
    /// The clock's time of the link's last read (INFO
    /// `master_last_io_seconds_ago`).
    pub last_io_ms: u64,
    /// When the link went down (INFO `master_link_down_since_seconds`).
    /// None until a link is lost (Redis's `repl_down_since` 0).
    pub down_since_ms: Option<u64>,
    /// When CLIENT KILL closed the running stream's client, ms: the link
    /// counts as down from then (its socket closes after the batch).
    pub killed_at_ms: Option<u64>,
    /// The stream was malformed: what was reached is not kept to continue.
    pub protocol_error: bool,
    /// The snapshot's transfer: its size (-1 while unknown, for the
    /// EOF-delimited form) and the bytes read so far.
    pub transfer: Option<(i64, u64)>,
    /// The snapshot arriving continues this server's history with
    /// `repl-diskless-load swapdb`: the old dataset is served until it has
    /// loaded (INFO `async_loading:1`).
    pub async_load: bool,
}

impl State {
    /// Whether this server replicates a master.
    pub fn is_replica(&self) -> bool {
        self.master.is_some()
    }

    /// Whether clients' writes are refused: a replica with
    /// `replica-read-only yes`.
    pub fn read_only_replica(&self) -> bool {
        self.master.is_some() && self.params.value("replica-read-only") != Some("no")
    }

    /// Whether clients' writes are taken: not on a Raft member that does
    /// not lead, nor on a read-only replica.
    pub fn accepts_writes(&self) -> bool {
        self.raft_accepts_writes() && !self.read_only_replica()
    }

    /// A replica whose link is down with `replica-serve-stale-data no`:
    /// only commands flagged `stale` run.
    pub fn serving_stale_refused(&self) -> bool {
        self.master.as_deref().is_some_and(|m| m.link != LinkState::Connected)
            && self.params.value("replica-serve-stale-data") == Some("no")
    }

    /// Keys stay past their deadline and no expiry cycle runs: on a Raft
    /// follower and on a replica, whose master's DELs remove them.
    pub fn keeps_expired_keys(&self) -> bool {
        self.raft_follower || self.master.is_some() || !self.i_am_master()
    }

    /// Applies [`State::keeps_expired_keys`] (and a pause's hold) to
    /// every database.
    pub fn refresh_expiry_mode(&self) {
        let keep = self.keeps_expired_keys() || self.pause.is_some() || self.failover.is_some() || self.shutdown_wait.is_some();
        for db in &self.dbs {
            db.keep_expired_keys(keep);
        }
    }

    /// REPLICAOF host port from `by` (None: the configuration at start).
    /// False when it is the master already followed.
    pub fn replicate(&mut self, host: &str, port: u16, by: Option<&str>) -> bool {
        if let Some(m) = &self.master
            && m.host.eq_ignore_ascii_case(host)
            && m.port == port
        {
            return false;
        }
        let now = self.clock.now_ms();
        let down_since_ms = match self.master.as_deref() {
            None => None,
            Some(m) if m.client.is_some() => Some(now),
            Some(m) => m.down_since_ms,
        };
        if self.master.is_none() {
            // A master continues from its own history with its new
            // master (Redis's `replicationCacheMasterUsingMyself`).
            self.cached_master_db = Some(0);
        }
        // This server's replicas stay: they are disconnected when the new
        // master's history turns out to be another (a new replication ID
        // with `+CONTINUE`, or a snapshot), as Redis 7.0 does.
        self.drop_master_client();
        let generation = self.master.as_ref().map_or(0, |m| m.generation) + 1;
        self.master = Some(Box::new(Master {
            host: host.to_string(),
            port,
            generation,
            link: LinkState::Connect,
            client: None,
            read_offset: self.replicas.offset,
            last_io_ms: now,
            down_since_ms,
            transfer: None,
            protocol_error: false,
            killed_at_ms: None,
            async_load: false,
        }));
        // Clients blocked on keys were waiting for writes this server
        // will no longer take (Redis's `disconnectAllBlockedClients`).
        self.unblock_all_with_error("UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)");
        self.refresh_expiry_mode();
        self.params.set_default("replicaof", &format!("{host} {port}"));
        crate::log::set_replica(true);
        crate::log::notice(format_args!("Connecting to MASTER {host}:{port}"));
        crate::log::notice(format_args!("MASTER <-> REPLICA sync started"));
        if let Some(by) = by {
            crate::log::notice(format_args!("REPLICAOF {host}:{port} enabled (user request from '{by}')"));
        }
        true
    }

    /// REPLICAOF NO ONE from `by` (a client's description).
    pub fn stop_replicating(&mut self, by: &str) {
        if self.master.is_none() {
            return;
        }
        self.unset_master();
        crate::log::notice(format_args!("MASTER MODE enabled (user request from '{by}')"));
    }

    /// The link ends, and this server is a master continuing the history
    /// it has (Redis's `replicationUnsetMaster`).
    pub fn unset_master(&mut self) {
        if self.master.is_none() {
            return;
        }
        self.drop_master_client();
        self.master = None;
        self.cached_master_db = None;
        // Its replicas are told of the new replication ID when they
        // connect again, and continue (Redis's `disconnectSlaves`).
        self.disconnect_replicas();
        // The stream this server writes from now on starts with a SELECT;
        // the backlog is kept a while for the replicas to come back.
        self.reselect_replication_stream();
        self.replicas.no_replicas_since_ms = self.clock.now_ms();
        self.refresh_expiry_mode();
        self.params.set_default("replicaof", "no one");
        crate::log::set_replica(false);
        // Redis's `shiftReplicationId`: replicas of the old master may
        // continue from here up to the offset reached.
        self.repl_id2 = self.master_replid().to_string();
        self.second_repl_offset = self.replicas.offset as i64 + 1;
        self.repl_id = super::new_run_id();
    }

    /// The link of `generation` moved on to `link`; false if that link is
    /// no longer wanted (REPLICAOF changed since).
    pub fn master_link_at(&mut self, generation: u64, link: LinkState) -> bool {
        let now = self.clock.now_ms();
        let Some(m) = self.master.as_deref_mut().filter(|m| m.generation == generation) else {
            return false;
        };
        if link == LinkState::Transfer && m.link != LinkState::Transfer {
            m.transfer = Some((-1, 0));
            m.async_load = false;
            // The cached master stays until the snapshot starts loading
            // (see `master_load_started`): a transfer that fails leaves
            // this server where it was, free to continue its history with
            // a PSYNC.
        }
        if link != LinkState::Transfer {
            m.transfer = None;
        }
        m.link = link;
        m.last_io_ms = now;
        true
    }

    /// The snapshot's transfer read `read` bytes of `total` (-1: until its
    /// end mark).
    pub fn master_transfer_progress(&mut self, total: i64, read: u64) {
        let now = self.clock.now_ms();
        if let Some(m) = self.master.as_deref_mut() {
            m.transfer = Some((total, read));
            m.last_io_ms = now;
        }
    }

    /// The link of `generation` is down (the connection failed or was
    /// lost): the master's client goes, and the link connects again.
    /// True if the stream was running.
    pub fn master_link_lost(&mut self, generation: u64) -> bool {
        let connected = self
            .master
            .as_deref()
            .is_some_and(|m| m.generation == generation && m.client.is_some());
        if connected {
            crate::log::warning(format_args!("Connection with master lost."));
        }
        if self.master.as_deref().is_some_and(|m| m.generation == generation) {
            self.drop_master_client();
            let now = self.clock.now_ms();
            if let Some(m) = self.master.as_deref_mut() {
                if m.link == LinkState::Connected {
                    m.down_since_ms = Some(m.killed_at_ms.unwrap_or(now));
                }
                m.killed_at_ms = None;
                m.link = LinkState::Connect;
                m.transfer = None;
            }
        }
        connected
    }

    /// CLIENT KILL of client `id`: if it is the master's, the link is down
    /// from now on, for what measures how long (a cluster replica's
    /// failover), though its socket closes after the batch.
    pub fn master_client_killed(&mut self, id: u64) {
        let now = self.clock.now_ms();
        if let Some(m) = self.master.as_deref_mut()
            && m.client == Some(id)
            && m.link == LinkState::Connected
        {
            m.killed_at_ms.get_or_insert(now);
        }
    }

    /// Ends the stream's client; the history it reached is the cached
    /// master (Redis's `replicationCacheMaster`).
    pub(crate) fn drop_master_client(&mut self) {
        // A snapshot that was loading is not installed.
        self.end_master_load();
        let Some(m) = self.master.as_deref_mut() else { return };
        let protocol_error = std::mem::take(&mut m.protocol_error);
        let Some(id) = m.client.take() else { return };
        if let Some(c) = self.clients.get(&id) {
            c.outbox.close_now();
            // A master that sent a malformed stream would send it again
            // from its backlog: the next link starts over (Redis caches
            // no master flagged CLIENT_PROTOCOL_ERROR).
            if !protocol_error {
                self.cached_master_db = Some(c.db);
            }
        }
        self.master_clients_gone.push(id);
    }

    /// The master's stream was malformed: the link ends without a cached
    /// master.
    pub fn master_protocol_error(&mut self) {
        if let Some(m) = self.master.as_deref_mut() {
            m.protocol_error = true;
        }
    }

    fn disconnect_replicas(&mut self) {
        for replica in &self.replicas.ids {
            if let Some(c) = self.clients.get(replica) {
                c.outbox.close_now();
            }
        }
    }

    /// The connection (`id`, with its addresses and outbox) becomes the
    /// master's client, running the stream from the replication offset
    /// reached, in database `db` (0 if there is no such database).
    fn start_master_stream(&mut self, (id, peer, local, outbox): (ClientId, ClientAddr, ClientAddr, Outbox), db: usize) {
        let db = if db < self.dbs.len() { db } else { 0 };
        self.connect(id, peer, local, outbox);
        if let Some(c) = self.clients.get_mut(&id) {
            c.is_master = true;
            c.replaying = true;
            c.authenticated = true;
            c.db = db;
        }
        let now = self.clock.now_ms();
        let offset = self.replicas.offset;
        if let Some(m) = self.master.as_deref_mut() {
            m.client = Some(id);
            m.link = LinkState::Connected;
            m.read_offset = offset;
            m.transfer = None;
            m.last_io_ms = now;
        }
    }

    /// What the next link asks for: `PSYNC <replid> <offset>` to continue
    /// the cached master's history, None for `PSYNC ? -1`.
    pub fn psync_request(&self) -> Option<(String, u64)> {
        self.cached_master_db?;
        Some((self.master_replid().to_string(), self.replicas.offset + 1))
    }

    /// The master's client id, while the stream runs on the link of
    /// `generation`.
    pub fn master_client(&self, generation: u64) -> Option<ClientId> {
        self.master.as_deref().filter(|m| m.generation == generation).and_then(|m| m.client)
    }

    /// Whether the master's client of the link of `generation` is there
    /// and open (CLIENT KILL closes it: the link then starts over).
    pub fn master_client_open(&self, generation: u64) -> bool {
        self.master_client(generation)
            .and_then(|id| self.clients.get(&id))
            .is_some_and(|c| c.outbox.close_request() == super::CloseRequest::Open)
    }

    /// The master wrote to the link (a keep-alive newline while it
    /// prepares the snapshot, or stream bytes).
    pub fn master_heard(&mut self, generation: u64) {
        let now = self.clock.now_ms();
        if let Some(m) = self.master.as_deref_mut().filter(|m| m.generation == generation) {
            m.last_io_ms = now;
        }
    }

    /// Whether the master's snapshot is being received and loaded while
    /// the old dataset is served (`repl-diskless-load swapdb`, Redis's
    /// `async_loading`): commands flagged `no-async-loading` are answered
    /// `LOADING` meanwhile.
    pub fn async_loading(&self) -> bool {
        self.master
            .as_deref()
            .is_some_and(|m| m.link == LinkState::Transfer && m.async_load)
    }

    /// The snapshot of the link of `generation`, after `+FULLRESYNC
    /// replid`, starts arriving. As Redis's `readSyncBulkPayload` decides
    /// by `repl-diskless-load`: with `swapdb`, the old dataset is served
    /// until the snapshot has loaded if the snapshot continues this
    /// server's history (the same replication ID), else clients are
    /// answered `LOADING` from now on, as they are with `on-empty-db` and
    /// no keys; with `disabled` the old dataset is served until the load
    /// starts. Whichever, the old dataset stays if the transfer fails.
    ///
    /// Returns whether the snapshot is parsed from the link as it arrives
    /// (Redis's `useDisklessLoad`: `swapdb`, or `on-empty-db` and no
    /// keys), rather than received whole first (Redis's file on disk).
    pub fn master_transfer_started(&mut self, generation: u64, replid: &str) -> bool {
        let mode = self.params.value("repl-diskless-load").unwrap_or("disabled");
        let same_history = replid == self.master_replid();
        let empty = self.dbs.iter().all(|db| db.is_empty());
        let Some(m) = self.master.as_deref_mut().filter(|m| m.generation == generation) else {
            return false;
        };
        m.async_load = mode == "swapdb" && same_history;
        let diskless = mode == "swapdb" || (mode == "on-empty-db" && empty);
        if diskless && !m.async_load {
            self.start_master_load(0);
        }
        diskless
    }

    /// The master's snapshot of the link of `generation` has arrived and
    /// starts loading, off the engine thread: with `repl-diskless-load
    /// swapdb` the old dataset is served meanwhile, else clients are
    /// answered `LOADING` (INFO `loading:1`), as Redis answers them while
    /// it loads the transferred file. A snapshot parsed as it arrives
    /// starts loading when it starts arriving, `total_bytes` its length if
    /// known (0 for an EOF mark). False if the link is no longer wanted.
    pub fn master_load_started(&mut self, generation: u64, total_bytes: u64) -> bool {
        let Some(m) = self.master.as_deref().filter(|m| m.generation == generation) else {
            return false;
        };
        if let Some(l) = self.loading.as_mut().filter(|l| l.of_master) {
            l.total_bytes = total_bytes;
        } else if !m.async_load {
            self.start_master_load(total_bytes);
        }
        // Redis's `replicationAttachToNewMaster`, before the load but with
        // `swapdb`, which loads aside and attaches once loaded: the history
        // this server had is no longer one to continue.
        if self.params.value("repl-diskless-load") != Some("swapdb") {
            self.cached_master_db = None;
        }
        crate::log::notice(format_args!("MASTER <-> REPLICA sync: Loading DB in memory"));
        true
    }

    /// Clients are answered `LOADING` while the master's snapshot loads.
    fn start_master_load(&mut self, total_bytes: u64) {
        self.start_loading(total_bytes);
        if let Some(l) = self.loading.as_mut() {
            l.of_master = true;
        }
    }

    /// Whether the master's snapshot is loading (clients answered
    /// `LOADING`).
    pub fn master_loading(&self) -> bool {
        self.loading.as_ref().is_some_and(|l| l.of_master)
    }

    /// The master's snapshot is no longer loading (installed, or left).
    fn end_master_load(&mut self) {
        if self.master_loading() {
            self.loading = None;
        }
    }

    /// The load of the link of `generation` has read `loaded` bytes.
    /// Returns `key-load-delay` as it is now, for the keys that follow;
    /// None if the link is no longer wanted (the load stops).
    pub fn master_load_progress(&mut self, generation: u64, loaded: u64) -> Option<i64> {
        self.master
            .as_deref()
            .filter(|m| m.generation == generation && m.link == LinkState::Transfer)?;
        if let Some(l) = self.loading.as_mut().filter(|l| l.of_master) {
            l.loaded_bytes = loaded;
        }
        Some(self.runtime.key_load_delay)
    }

    /// The offset this replica acknowledges (REPLCONF ACK): the stream
    /// bytes it applied.
    pub fn replica_ack_offset(&self) -> u64 {
        self.replicas.offset
    }

    /// A snapshot from a master (or a Raft shard's leader), read whole:
    /// keys past their deadline are kept, as a replica keeps them (its
    /// master deletes them). `progress` is told the bytes read after each
    /// key and stops the read with false.
    pub fn read_replica_snapshot(
        data: &[u8],
        databases: usize,
        options: &crate::rdb::DecodeOptions,
        progress: &mut dyn FnMut(usize) -> bool,
    ) -> Result<crate::rdb::file::Loaded, String> {
        crate::rdb::file::read_with_progress(data, databases, options, 0, progress).map_err(|e| format!("{} (at offset {})", e.0, e.1))
    }

    /// Replaces the dataset and function libraries with a snapshot's,
    /// read whole before (a damaged one changes nothing). Returns the
    /// database the stream after it starts in.
    pub fn replace_dataset(&mut self, scripts: &mut super::Scripts, loaded: crate::rdb::file::Loaded) -> Option<usize> {
        for db in &mut self.dbs {
            db.clear();
        }
        self.replica_expires.clear();
        let limit = self.runtime.lua_memory_limit;
        let _ = scripts.reset_functions(limit);
        let stream_db = loaded.stream_db.filter(|&db| db < self.dbs.len());
        let libraries = self.install(loaded);
        scripts.load_libraries(libraries);
        stream_db
    }
}

impl Engine {
    /// The master's snapshot arrived on the link of `generation`, after
    /// `+FULLRESYNC replid offset`: it replaces the dataset, and the
    /// connection (`id`, with its addresses and outbox) becomes the
    /// master's client. The error is why the load failed (the link is
    /// then dropped and starts over).
    pub fn master_synced(
        &mut self,
        generation: u64,
        loaded: crate::rdb::file::Loaded,
        (replid, offset): (&str, u64),
        (id, peer, local, outbox): (ClientId, ClientAddr, ClientAddr, Outbox),
    ) -> Result<(), String> {
        let state = &mut self.state;
        if state.master.as_deref().is_none_or(|m| m.generation != generation) {
            return Err("the master changed".into());
        }
        state.end_master_load();
        // The history this server continued is gone.
        state.cached_master_db = None;
        crate::log::notice(format_args!("MASTER <-> REPLICA sync: Flushing old data"));
        let stream_db = state.replace_dataset(&mut self.scripts, loaded);
        // Tracking clients drop everything they cached, as after FLUSHALL.
        state.invalidate_on_flush(&mut super::Client::script_client());
        // The history is the master's from here; this server's replicas
        // start over from it.
        state.repl_id = replid.to_string();
        state.repl_id2.clear();
        state.second_repl_offset = -1;
        state.replicas.offset = offset;
        state.disconnect_replicas();
        // A replica keeps a backlog of its master's stream, for its own
        // replicas and for after a failover.
        state.make_backlog();
        state.start_master_stream((id, peer, local, outbox), stream_db.unwrap_or(0));
        if state.aof_on() {
            // The file's history is not the new dataset's: it starts over
            // from it (Redis turns the AOF off and on again).
            let codes = self.scripts.library_codes();
            state.stop_aof();
            if let Err(e) = state.start_aof(&codes, true) {
                crate::log::warning(format_args!("Failed enabling the AOF after successful master synchronization: {e}"));
            }
        }
        crate::log::notice(format_args!("MASTER <-> REPLICA sync: Finished with success"));
        Ok(())
    }

    /// The master answered `+CONTINUE [replid]` on the link of
    /// `generation`: the stream goes on from the cached master's offset,
    /// in the database it had selected, and the connection (`id`, with
    /// its addresses and outbox) becomes the master's client. A new
    /// replication ID (the master was promoted, or is another) becomes
    /// this server's, the old one its second up to here, and this
    /// server's replicas reconnect to learn it.
    pub fn master_continued(
        &mut self,
        generation: u64,
        replid: Option<&str>,
        (id, peer, local, outbox): (ClientId, ClientAddr, ClientAddr, Outbox),
    ) -> Result<(), String> {
        let state = &mut self.state;
        if state.master.as_deref().is_none_or(|m| m.generation != generation) {
            return Err("the master changed".into());
        }
        let Some(db) = state.cached_master_db.take() else {
            return Err("Unexpected reply to PSYNC from master: +CONTINUE without a partial resynchronization asked".into());
        };
        if let Some(new) = replid.filter(|new| !new.eq_ignore_ascii_case(state.master_replid())) {
            crate::log::warning(format_args!("Master replication ID changed to {new}"));
            state.repl_id2 = state.master_replid().to_string();
            state.second_repl_offset = state.replicas.offset as i64 + 1;
            state.repl_id = new.to_string();
            state.disconnect_replicas();
        }
        if state.replicas.backlog.is_none() {
            state.make_backlog();
        }
        state.start_master_stream((id, peer, local, outbox), db);
        Ok(())
    }

    /// Runs the master's stream: `commands` of the link of `generation`,
    /// which were `raw` as read. What they write reaches the append-only
    /// file; `raw` goes on to this server's replicas and counts in the
    /// replication offset. The clients whose waits the commands ended are
    /// returned (see `BatchOutput::woken`); None if the link is no longer
    /// wanted, or its client was closed (CLIENT KILL): the link then
    /// starts over.
    pub fn run_master_stream(&mut self, generation: u64, commands: Vec<Vec<Bytes>>, raw: &[u8]) -> Option<Vec<ClientId>> {
        let id = self.state.master_client(generation)?;
        if !self.state.master_client_open(generation) {
            return None;
        }
        if let Some(m) = self.state.master.as_deref_mut() {
            m.read_offset += raw.len() as u64;
        }
        self.state.master_heard(generation);
        let mut woken = Vec::new();
        if !commands.is_empty() {
            // The master's commands see every key the master sees, past
            // its deadline here or not.
            self.state.dbs[0].ignore_deadlines(true);
            woken = self.run_batch_capped(id, commands, false).woken;
            self.state.dbs[0].ignore_deadlines(false);
            // Replies are not sent to the master; anything pushed goes.
            if let Some(c) = self.state.clients.get(&id) {
                c.outbox.buffer().borrow_mut().clear();
            }
            if !self.state.master_client_open(generation) {
                // Killed by one of its own commands: what ran is applied,
                // not acknowledged, and the link starts over.
                return None;
            }
        }
        self.state.flush_effects();
        self.state.send_to_replicas(raw);
        Some(woken)
    }

    /// Clients of links that ended (the master's, after REPLICAOF or a
    /// lost link) are forgotten.
    pub fn forget_master_clients(&mut self) {
        for id in std::mem::take(&mut self.state.master_clients_gone) {
            self.disconnect(id);
        }
    }
}

/// The keys a client's command gave a deadline on a writable replica
/// (`replica-read-only no`; Redis's `slaveKeysWithExpire`): its master
/// knows nothing of them and sends no DEL when they are due, so the
/// replica expires them itself, from the cron (Redis's `expireSlaveKeys`).
/// The keys the master's stream gives a deadline are not among them.
#[derive(Debug, Default)]
pub struct ReplicaExpires {
    /// Each key, and a bit for each database (0 to 63, as Redis) it was
    /// given a deadline in.
    dbs: std::collections::HashMap<Bytes, u64>,
    /// The keys in the order the cron looks at them, each once.
    queue: std::collections::VecDeque<Bytes>,
}

impl ReplicaExpires {
    /// Forgets every key (FLUSHALL, a master's snapshot loaded).
    pub fn clear(&mut self) {
        self.dbs.clear();
        self.queue.clear();
    }
}

impl State {
    /// Whether `client`'s command runs on a writable replica, where the
    /// keys it gives a deadline are the replica's to expire.
    pub(crate) fn keeps_replica_deadlines(&self, client: &super::Client) -> bool {
        self.master.is_some() && !client.is_master && self.params.value("replica-read-only") == Some("no")
    }

    /// Takes the keys the command that ran gave a deadline (see
    /// [`ReplicaExpires`]).
    pub(crate) fn remember_replica_deadlines(&mut self) {
        for (db, key) in self.key_events.take_deadlines() {
            if db > 63 {
                crate::log::warning(format_args!("Writable replica is not able to expire keys in DB with id > 63"));
                continue;
            }
            let bits = self.replica_expires.dbs.entry(key.clone()).or_insert(0);
            if *bits == 0 {
                self.replica_expires.queue.push_back(key);
            }
            *bits |= 1 << db;
        }
    }

    /// The cron's part on a replica: the keys in [`ReplicaExpires`] that
    /// are due are removed (an `expired` event each, as any expiry), and
    /// those with no deadline left forgotten, for at most a millisecond
    /// a pass, taking turns.
    pub fn expire_replica_keys(&mut self, now_ms: u64) {
        let started = std::time::Instant::now();
        let mut looked = 0;
        while looked < self.replica_expires.queue.len() {
            let Some(key) = self.replica_expires.queue.pop_front() else { break };
            looked += 1;
            let bits = self.replica_expires.dbs.get(&key).copied().unwrap_or(0);
            let mut left = 0;
            for db in 0..64.min(self.dbs.len()) {
                if bits & (1 << db) != 0 && self.dbs[db].expire_if_due(&key, now_ms) == Some(false) {
                    left |= 1 << db;
                }
            }
            if left == 0 {
                self.replica_expires.dbs.remove(&key);
            } else {
                self.replica_expires.dbs.insert(key.clone(), left);
                self.replica_expires.queue.push_back(key);
            }
            if looked % 64 == 0 && started.elapsed() > std::time::Duration::from_millis(1) {
                break;
            }
        }
    }
}
