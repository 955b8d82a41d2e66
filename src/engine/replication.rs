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
//! For a replica with `capa eof` (and `repl-diskless-sync yes`) the
//! snapshot is written by a forked child into a pipe, as `$EOF:<mark>`,
//! the file and the mark, which the network side relays
//! (`server::full_sync`); the stream meanwhile is held for that replica
//! and follows once the snapshot is relayed and acknowledged. As in
//! Redis, the replica first waits (answered nothing but a newline a
//! second) until no other child runs and `repl-diskless-sync-delay`
//! seconds have passed or `repl-diskless-sync-max-replicas` replicas
//! wait; then one child writes for all the replicas waiting, each told
//! `+FULLRESYNC` with the offset its snapshot is of. Otherwise (a replica
//! without `capa eof`, `repl-diskless-sync no`) the child is a background
//! save to disk, whose file is sent once it has ended (Redis's disk-based
//! sync), and a replica that asks meanwhile may share it. The stream's last
//! `repl-backlog-size` bytes are kept in a backlog (made with the first
//! replica, on a replica when it synchronizes, freed
//! `repl-backlog-ttl` seconds after the last replica of a master left): a
//! replica whose link broke asks `PSYNC <replid> <offset>` and, when its
//! history is this server's (its replication ID is this server's, or the
//! one it followed before a REPLICAOF NO ONE, up to where that ended) and
//! the backlog still holds that offset, gets `+CONTINUE <replid>` and the
//! stream from there instead of a new snapshot (Redis's
//! `masterTryPartialResynchronization`).

use std::collections::VecDeque;
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
    /// It sent `REPLCONF capa psync2`: a partial resynchronization tells
    /// it the replication ID (`+CONTINUE <replid>`).
    pub psync2: bool,
    /// Its output, reachable while its own batch runs (an ACK's), when
    /// its client is out of the engine's map.
    pub outbox: Option<super::Outbox>,
    /// Stream bytes queued after its snapshot, while the snapshot is not
    /// all written (None once it is: the replica is online).
    pub after_snapshot: Option<u64>,
    /// `REPLCONF capa eof`: it takes a snapshot of unknown length, ended
    /// by a mark (Redis's SLAVE_CAPA_EOF).
    pub eof: bool,
    /// Since when it waits for the next child to write its snapshot
    /// (Redis's SLAVE_STATE_WAIT_BGSAVE_START): it gets no stream, and a
    /// newline a second, until [`State::start_pending_snapshot`] starts
    /// one.
    pub waiting_since: Option<Instant>,
    /// How the log names it (see [`State::replica_name`]), from its SYNC.
    pub name: String,
    /// While a child process writes its snapshot: the stream that
    /// follows the snapshot, held until the snapshot is all relayed and
    /// the replica has acknowledged it.
    pub held: Option<Vec<u8>>,
    /// The snapshot is all relayed, and the replica acknowledged it (a
    /// REPLCONF ACK, which may come first): the held stream follows once
    /// both are so (a replica reading `$EOF:` looks for the mark at the
    /// end of what it read, so nothing may follow the mark before it has:
    /// Redis's `repl_start_cmd_stream_on_ack`).
    snapshot_relayed: bool,
    snapshot_acked: bool,
    /// Its snapshot is the file a background save writes (Redis's
    /// RDB_CHILD_TYPE_DISK), sent once the save has ended, with the
    /// stream held meanwhile following it at once; not a child's pipe.
    disk: bool,
    /// That file is being sent to it (Redis's SLAVE_STATE_SEND_BULK).
    sending: bool,
    /// It sent SYNC, not PSYNC: its snapshot comes with no
    /// `+FULLRESYNC` line (Redis's CLIENT_PRE_PSYNC).
    pre_psync: bool,
    /// The stream offset its snapshot is of (Redis's
    /// `psync_initial_offset`): a replica that shares its save is told it.
    initial_offset: u64,
    /// Since when (the clock's second) what is held passes the soft
    /// limit of `client-output-buffer-limit replica`.
    held_soft_since: std::cell::Cell<Option<u64>>,
}

impl Announced {
    /// A replica (it sent SYNC) whose snapshot is all written (Redis's
    /// SLAVE_STATE_ONLINE). Kept here, not on its client, so that it is
    /// known while the replica's own batch runs (an ACK's).
    pub fn online(&self) -> bool {
        self.synced && self.after_snapshot.is_none()
    }

    /// Its state as INFO's `slaveN` line names it: `wait_bgsave` while it
    /// waits for a child or a child writes its snapshot, `send_bulk` while
    /// a saved file or a snapshot made here is being written to it,
    /// `online` after (a child's pipe relayed: Redis's replica is online
    /// then, the stream waiting for its first ACK).
    pub fn info_state(&self) -> &'static str {
        if self.waiting_since.is_some() {
            return "wait_bgsave";
        }
        match (&self.held, self.disk) {
            (Some(_), true) if self.sending => "send_bulk",
            (Some(_), false) if self.snapshot_relayed => "online",
            (Some(_), _) => "wait_bgsave",
            (None, _) if self.online() => "online",
            (None, _) => "send_bulk",
        }
    }

    /// It waits for the end of the background save whose file is its
    /// snapshot (Redis's SLAVE_STATE_WAIT_BGSAVE_END with a disk target).
    fn waits_for_save(&self) -> bool {
        self.disk && self.held.is_some() && !self.sending
    }
}

/// The replication backlog (Redis's `repl_backlog`): the stream's last
/// `size` bytes, from which a replica continues.
#[derive(Debug)]
pub struct Backlog {
    bytes: VecDeque<u8>,
    size: usize,
    /// The stream offset of the first byte held (the offset of a stream's
    /// first byte is 1).
    first: u64,
}

impl Backlog {
    /// An empty backlog whose next byte is at offset `next`.
    pub fn new(size: usize, next: u64) -> Backlog {
        Backlog {
            bytes: VecDeque::new(),
            size,
            first: next,
        }
    }

    fn feed(&mut self, bytes: &[u8]) {
        let keep = bytes.len().min(self.size);
        let dropped = (self.bytes.len() + keep).saturating_sub(self.size);
        self.bytes.drain(..dropped);
        self.first += (dropped + bytes.len() - keep) as u64;
        self.bytes.extend(&bytes[bytes.len() - keep..]);
    }

    fn resize(&mut self, size: usize) {
        self.size = size;
        let dropped = self.bytes.len().saturating_sub(size);
        self.bytes.drain(..dropped);
        self.first += dropped as u64;
        self.bytes.shrink_to(size);
    }

    /// The stream from offset `from` on, if the backlog still holds it
    /// (`from` may be the next byte's offset: nothing to send).
    pub fn since(&self, from: u64) -> Option<Vec<u8>> {
        let skip = usize::try_from(from.checked_sub(self.first)?).ok()?;
        (skip <= self.bytes.len()).then(|| self.bytes.range(skip..).copied().collect())
    }

    /// INFO's `repl_backlog_first_byte_offset`.
    pub fn first_byte_offset(&self) -> u64 {
        self.first
    }

    /// INFO's `repl_backlog_histlen`.
    pub fn histlen(&self) -> usize {
        self.bytes.len()
    }

    /// The memory it holds (INFO `mem_replication_backlog`).
    pub fn allocated(&self) -> usize {
        self.bytes.capacity()
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
    pub(crate) tap: Option<u64>,
    /// Bytes of stream sent so far (INFO `master_repl_offset`).
    pub offset: u64,
    last_ping: Instant,
    /// Full resynchronizations served (INFO `sync_full`).
    pub full_syncs: u64,
    /// Partial resynchronizations served, and refused to a replica that
    /// asked for one (INFO `sync_partial_ok`, `sync_partial_err`).
    pub partial_syncs: u64,
    pub partial_refused: u64,
    /// The stream's last bytes, for replicas that continue.
    pub backlog: Option<Backlog>,
    /// When the last replica left (the clock's milliseconds; Redis's
    /// `repl_no_slaves_since`).
    pub(crate) no_replicas_since_ms: u64,
    /// A WAIT asked for the replicas' offsets (see
    /// [`State::send_getack_if_due`]).
    pub getack_due: bool,
    /// Snapshots being written by child processes, for the network side
    /// to relay (taken by it after each batch).
    pub relays: Vec<SnapshotRelay>,
    /// Those child processes still running (INFO `rdb_bgsave_in_progress`).
    pub snapshot_children: Vec<libc::pid_t>,
    /// A save to disk was made for replicas since the file was last
    /// removed (Redis's `RDBGeneratedByReplication`, for
    /// `rdb-del-sync-files`).
    rdb_for_replicas: bool,
    /// When the replicas waiting for a child were last sent a newline.
    keepalive_at: Instant,
}

/// A snapshot for replicas that the network side moves into each
/// replica's output (a pipe at the pace of the slowest, a file at each
/// one's own).
#[derive(Debug)]
pub struct SnapshotRelay {
    /// The replicas it is for, and their outputs.
    pub targets: Vec<(ClientId, super::Outbox)>,
    pub source: SnapshotSource,
}

/// Where a relayed snapshot comes from.
#[derive(Debug)]
pub enum SnapshotSource {
    /// A child process writing `$EOF:<mark>`, the file, and the mark into
    /// a pipe (Redis's diskless sync, `rdbSaveToSlavesSockets`); once it
    /// has ended the network side calls [`State::snapshot_child_ended`].
    Pipe { pid: libc::pid_t, pipe: std::os::fd::OwnedFd },
    /// The file a background save wrote, `len` bytes, sent after
    /// `$<len>` (Redis's `sendBulkToSlave`); once it is sent the network
    /// side calls [`State::saved_file_sent`].
    File { file: std::fs::File, len: u64 },
}

impl Replicas {
    /// CONFIG RESETSTAT's part: the synchronizations counted.
    pub fn reset_stats(&mut self) {
        self.full_syncs = 0;
        self.partial_syncs = 0;
        self.partial_refused = 0;
    }
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
            partial_syncs: 0,
            partial_refused: 0,
            backlog: None,
            no_replicas_since_ms: 0,
            getack_due: false,
            relays: Vec::new(),
            snapshot_children: Vec::new(),
            rdb_for_replicas: false,
            keepalive_at: Instant::now(),
        }
    }
}

/// A replica's address as Redis shows it: the one it announced (`REPLCONF
/// ip-address`), else its connection's; None on a Unix socket.
pub fn replica_ip(announced: Option<&Announced>, peer: &super::ClientAddr) -> Option<String> {
    match (announced.and_then(|a| a.ip.clone()), peer) {
        (Some(ip), _) => Some(ip),
        (None, super::ClientAddr::Tcp(addr)) => Some(addr.ip().to_string()),
        (None, super::ClientAddr::Unix(_)) => None,
    }
}

impl State {
    /// How Redis names replica `client` in its log: its address and
    /// listening port (Redis's `replicationGetSlaveName`).
    pub fn replica_name(&self, client: &Client) -> String {
        let announced = self.replicas.announced.get(&client.id);
        let ip = replica_ip(announced, &client.peer).unwrap_or_default();
        match announced.map_or(0, |a| a.port) {
            0 => format!("client id #{}", client.id),
            port if ip.contains(':') => format!("[{ip}]:{port}"),
            port => format!("{ip}:{port}"),
        }
    }

    /// `PSYNC replid offset` from `client`: the backlog from `offset` on,
    /// after `+CONTINUE`, when this server can continue that history;
    /// None when the replica needs a full resynchronization (counted
    /// unless it asked for one, with replid `?`).
    pub fn try_partial_resync(&mut self, client: &Client, replid: &[u8], offset: i64) -> Option<Bytes> {
        let name = self.replica_name(client);
        let asked = String::from_utf8_lossy(replid);
        let mine = asked.eq_ignore_ascii_case(self.master_replid());
        let second = !self.repl_id2.is_empty() && asked.eq_ignore_ascii_case(&self.repl_id2);
        let continues = mine || (second && offset <= self.second_repl_offset);
        if !continues {
            if asked.starts_with('?') {
                crate::log::notice(format_args!("Full resync requested by replica {name}"));
                return None;
            }
            if !mine && !second {
                let replid2 = if self.repl_id2.is_empty() { NO_REPLID } else { &self.repl_id2 };
                crate::log::notice(format_args!(
                    "Partial resynchronization not accepted: Replication ID mismatch (Replica asked for '{asked}', my replication IDs are '{}' and '{replid2}')",
                    self.master_replid()
                ));
            } else {
                crate::log::notice(format_args!(
                    "Partial resynchronization not accepted: Requested offset for second ID was {offset}, but I can reply up to {}",
                    self.second_repl_offset
                ));
            }
            self.replicas.partial_refused += 1;
            return None;
        }
        let held = u64::try_from(offset)
            .ok()
            .and_then(|from| self.replicas.backlog.as_ref()?.since(from));
        let Some(held) = held else {
            crate::log::notice(format_args!(
                "Unable to partial resync with replica {name} for lack of backlog (Replica request was: {offset})."
            ));
            if offset > self.replicas.offset as i64 {
                crate::log::warning(format_args!(
                    "Warning: replica {name} tried to PSYNC with an offset that is greater than the master replication offset."
                ));
            }
            self.replicas.partial_refused += 1;
            return None;
        };
        let psync2 = self.replicas.announced.get(&client.id).is_some_and(|a| a.psync2);
        let mut reply = if psync2 {
            format!("+CONTINUE {}\r\n", self.master_replid()).into_bytes()
        } else {
            b"+CONTINUE\r\n".to_vec()
        };
        crate::log::notice(format_args!(
            "Partial resynchronization request from {name} accepted. Sending {} bytes of backlog starting from offset {offset}.",
            held.len()
        ));
        reply.extend_from_slice(&held);
        self.replicas.partial_syncs += 1;
        self.enlist_replica(client.id, &client.outbox, None);
        Some(Bytes::from(reply))
    }

    /// SYNC / PSYNC from `client`: the snapshot, after `+FULLRESYNC` for
    /// PSYNC; from now on the client gets the stream. `codes` are the
    /// function libraries.
    pub fn add_replica(&mut self, client: &Client, codes: &[Bytes], psync: bool) -> std::io::Result<Bytes> {
        if self.replicas.ids.is_empty() && self.replicas.backlog.is_none() {
            // A backlog made from scratch starts a new history (Redis's
            // `changeReplicationId` and `clearReplicationId2`).
            self.repl_id = super::new_run_id();
            self.repl_id2.clear();
            self.second_repl_offset = -1;
            self.make_backlog();
            crate::log::notice(format_args!(
                "Replication backlog created, my new replication IDs are '{}' and '{NO_REPLID}'",
                self.repl_id
            ));
        }
        // It waits for a child to write its snapshot (Redis's
        // SLAVE_STATE_WAIT_BGSAVE_START) unless it can share the one
        // under way; which child, and when, as Redis's `syncCommand`.
        self.replicas.full_syncs += 1;
        self.enlist_replica(client.id, &client.outbox, Some(0));
        let name = self.replica_name(client);
        let Some(a) = self.replicas.announced.get_mut(&client.id) else {
            return Ok(Bytes::new());
        };
        a.waiting_since = Some(Instant::now());
        a.name = name;
        a.pre_psync = !psync;
        let (eof, psync2) = (a.eof, a.psync2);
        if self.persistence.child.is_some() {
            // A save to disk runs: its file serves this replica too if
            // another replica waits for it, as the stream since it started
            // is held for that one, and this one has all its capabilities.
            // Redis looks at the first replica waiting for it only.
            let shared = self
                .replicas
                .ids
                .iter()
                .filter(|&&id| id != client.id)
                .filter_map(|id| self.replicas.announced.get(id))
                .find(|other| other.waits_for_save())
                .filter(|other| {
                    (eof || !other.eof)
                        && (psync2 || !other.psync2)
                        && other
                            .outbox
                            .as_ref()
                            .is_some_and(|o| o.close_request() == super::CloseRequest::Open)
                })
                .map(|other| (other.held.clone(), other.initial_offset));
            match shared {
                Some((held, offset)) => {
                    let replid = self.master_replid().to_string();
                    if let Some(a) = self.replicas.announced.get_mut(&client.id) {
                        (a.waiting_since, a.disk, a.held, a.initial_offset) = (None, true, held, offset);
                        if psync {
                            send_raw(&client.outbox, format!("+FULLRESYNC {replid} {offset}\r\n").as_bytes());
                        }
                    }
                    // As for each replica set up for a full sync, the
                    // stream's next effect comes after a SELECT (Redis's
                    // `replicationSetupSlaveForFullResync`).
                    self.reselect_replication_stream();
                    crate::log::notice(format_args!("Waiting for end of BGSAVE for SYNC"));
                }
                None => crate::log::notice(format_args!(
                    "Can't attach the replica to the current BGSAVE. Waiting for next BGSAVE for SYNC"
                )),
            }
        } else if !self.replicas.snapshot_children.is_empty() {
            crate::log::notice(format_args!("Current BGSAVE has socket target. Waiting for next BGSAVE for SYNC"));
        } else if self.params.value("repl-diskless-sync") != Some("no")
            && eof
            && self.params.int("repl-diskless-sync-delay").unwrap_or(5) > 0
        {
            // The child starts from the cron, once the delay has let
            // more replicas come (`start_pending_snapshot`).
            crate::log::notice(format_args!("Delay next BGSAVE for diskless SYNC"));
        } else if self.child_active() {
            crate::log::notice(format_args!(
                "No BGSAVE in progress, but another BG operation is active. BGSAVE for replication delayed"
            ));
        } else {
            self.start_snapshot_for_replicas(codes.to_vec());
        }
        Ok(Bytes::new())
    }

    /// The snapshot made on this thread, as `$<length>` and the file.
    fn foreground_snapshot(&mut self, codes: &[Bytes]) -> std::io::Result<Vec<u8>> {
        let mut rdb = Vec::new();
        self.write_snapshot(&mut rdb, codes, false)?;
        let mut framed = format!("${}\r\n", rdb.len()).into_bytes();
        framed.extend_from_slice(&rdb);
        Ok(framed)
    }

    /// A child process runs: a background save, an AOF rewrite, or a
    /// replicas' snapshot (Redis's `hasActiveChildProcess`).
    pub(crate) fn child_active(&self) -> bool {
        self.rdb_child_active() || self.aof_rewrites.running.is_some()
    }

    /// Starts the child that writes the snapshot for the replicas waiting
    /// for one, when it may (Redis's `replicationStartPendingFork`): no
    /// other child runs, and the one that waited longest has waited
    /// `repl-diskless-sync-delay` seconds, or
    /// `repl-diskless-sync-max-replicas` of them wait, or diskless sync
    /// was turned off meanwhile. Each gets `+FULLRESYNC` with the offset
    /// the snapshot is of; the stream after it is held for them (see
    /// [`Announced::held`]). `codes` gives the function libraries.
    pub fn start_pending_snapshot(&mut self, codes: impl FnOnce() -> Vec<Bytes>) {
        if self.child_active() {
            return;
        }
        let waiting: Vec<Instant> = self
            .replicas
            .ids
            .iter()
            .filter_map(|id| {
                let a = self.replicas.announced.get(id)?;
                a.outbox.as_ref()?;
                a.waiting_since
            })
            .collect();
        let Some(longest) = waiting.iter().map(Instant::elapsed).max() else {
            return;
        };
        let delay = std::time::Duration::from_secs(self.params.int("repl-diskless-sync-delay").unwrap_or(5).max(0) as u64);
        let max = self.params.int("repl-diskless-sync-max-replicas").unwrap_or(0);
        let now = self.params.value("repl-diskless-sync") == Some("no") || longest >= delay || (max > 0 && waiting.len() as i64 >= max);
        if !now {
            return;
        }
        self.start_snapshot_for_replicas(codes());
    }

    /// Starts the child that writes the snapshot for every replica waiting
    /// for one (Redis's `startBgsaveForReplication`): into a pipe relayed
    /// to their sockets with `repl-diskless-sync yes` when each of them
    /// takes a snapshot ended by a mark (`capa eof`), else a background
    /// save whose file is sent to them once it has ended. Each gets
    /// `+FULLRESYNC` (unless it sent SYNC) with the offset the snapshot is
    /// of; the stream after it is held for them (see [`Announced::held`]).
    /// Should the fork fail, the snapshot is made on this thread.
    fn start_snapshot_for_replicas(&mut self, codes: Vec<Bytes>) {
        let waiting: Vec<(ClientId, super::Outbox, bool, bool)> = self
            .replicas
            .ids
            .iter()
            .filter_map(|id| {
                let a = self.replicas.announced.get(id)?;
                a.waiting_since?;
                Some((*id, a.outbox.clone()?, a.eof, a.pre_psync))
            })
            .collect();
        if waiting.is_empty() {
            return;
        }
        let offset = self.replicas.offset;
        let header = format!("+FULLRESYNC {} {offset}\r\n", self.master_replid());
        let socket = self.params.value("repl-diskless-sync") != Some("no") && waiting.iter().all(|w| w.2);
        crate::log::notice(format_args!(
            "Starting BGSAVE for SYNC with target: {}",
            if socket { "replicas sockets" } else { "disk" }
        ));
        let targets: Vec<(ClientId, super::Outbox)> = waiting.iter().map(|(id, outbox, ..)| (*id, outbox.clone())).collect();
        let forked = if socket {
            self.fork_snapshot(&targets, &codes)
        } else {
            self.bgsave(&codes).map_err(std::io::Error::other)
        };
        self.replicas.rdb_for_replicas |= !socket && forked.is_ok();
        for (id, outbox, _, pre_psync) in &waiting {
            if let Some(a) = self.replicas.announced.get_mut(id) {
                a.waiting_since = None;
                if forked.is_ok() {
                    (a.held, a.disk, a.sending, a.initial_offset) = (Some(Vec::new()), !socket, false, offset);
                }
            }
            if !pre_psync {
                send_raw(outbox, header.as_bytes());
            }
        }
        // The stream goes on; its next effect comes after a SELECT, so
        // that the new replicas know their database.
        self.reselect_replication_stream();
        if let Err(e) = forked {
            crate::log::warning(format_args!("BGSAVE for replication failed: {e}; the snapshot is made here"));
            match self.foreground_snapshot(&codes) {
                Ok(rdb) => targets.iter().for_each(|(_, outbox)| send_raw(outbox, &rdb)),
                Err(_) => targets.iter().for_each(|(_, outbox)| outbox.close_now()),
            }
        }
    }

    /// Starts a child process that writes the snapshot for `targets` into
    /// a pipe, framed for replicas with `capa eof`; the pipe's other end
    /// goes to the network side ([`Replicas::relays`]).
    fn fork_snapshot(&mut self, targets: &[(ClientId, super::Outbox)], codes: &[Bytes]) -> std::io::Result<()> {
        use std::os::fd::{FromRawFd, OwnedFd};
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just made, and are owned here only.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let mark = super::new_run_id();
        let started = Instant::now();
        super::persistence::before_fork();
        // SAFETY: the child only writes the snapshot from its copy of this
        // thread's memory into the pipe and leaves with `_exit`, never
        // returning into the runtime (as BGSAVE's child).
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            drop(read);
            super::persistence::child_exit(|| {
                use std::io::Write;
                let mut out = std::io::BufWriter::with_capacity(1 << 16, std::fs::File::from(write));
                out.write_all(format!("$EOF:{mark}\r\n").as_bytes())?;
                self.write_snapshot(&mut out, codes, false)?;
                out.write_all(mark.as_bytes())?;
                out.flush()
            });
        }
        if pid < 0 {
            return Err(std::io::Error::last_os_error());
        }
        drop(write);
        self.persistence.forks += 1;
        self.replicas.snapshot_children.push(pid);
        self.persistence.latest_fork_usec = started.elapsed().as_micros() as u64;
        crate::log::notice(format_args!("Background RDB transfer started by pid {pid}"));
        self.replicas.relays.push(SnapshotRelay {
            targets: targets.to_vec(),
            source: SnapshotSource::Pipe { pid, pipe: read },
        });
        Ok(())
    }

    /// The child `pid` that wrote a snapshot ended; `outcomes` says which
    /// of its replicas got all of it.
    pub fn snapshot_child_ended(&mut self, pid: libc::pid_t, outcomes: &[(ClientId, bool)]) {
        self.replicas.snapshot_children.retain(|&p| p != pid);
        for &(client, ok) in outcomes {
            self.snapshot_relayed(client, ok);
        }
    }

    /// The snapshot of a child process reached `client` (`ok`), or did
    /// not: the stream held meanwhile follows its first acknowledgement,
    /// or the replica is disconnected (it asks again).
    fn snapshot_relayed(&mut self, client: ClientId, ok: bool) {
        let Some(a) = self.replicas.announced.get_mut(&client) else {
            return;
        };
        if a.held.is_none() {
            return;
        }
        if !ok {
            crate::log::warning(format_args!("Diskless rdb transfer to the replica failed: it is disconnected"));
            a.held = None;
            if let Some(outbox) = &a.outbox {
                outbox.close_now();
            }
            return;
        }
        crate::log::notice(format_args!(
            "Streamed RDB transfer with replica {} succeeded (socket). Waiting for REPLCONF ACK from slave to enable streaming",
            a.name
        ));
        a.snapshot_relayed = true;
        if a.snapshot_acked {
            self.release_held_stream(client);
        }
    }

    /// The replica `client` acknowledged its snapshot: the stream held
    /// since the snapshot was made follows it.
    fn release_held_stream(&mut self, client: ClientId) {
        // Its ACK's batch runs with its client out of the map: its output
        // is reached through what it announced.
        let Some(a) = self.replicas.announced.get_mut(&client) else {
            return;
        };
        let Some(outbox) = a.outbox.clone() else { return };
        let Some(held) = a.held.take() else { return };
        (a.snapshot_relayed, a.snapshot_acked, a.disk, a.sending) = (false, false, false, false);
        // Online now: its lag counts from here (Redis's `replicaPutOnline`).
        a.ack_secs = self.clock.now_ms() / 1000;
        a.after_snapshot = Some(held.len() as u64);
        send_raw(&outbox, &held);
        self.note_replicas_online();
    }

    /// The background save the replicas in [`Announced::waits_for_save`]
    /// wait for has ended (`ok`), or failed or was killed: its file is
    /// sent to them, or they are disconnected (they ask again), as
    /// Redis's `updateSlavesWaitingBgsave`.
    pub(crate) fn save_for_replicas_ended(&mut self, ok: bool, path: Option<&std::path::Path>) {
        let waiting: Vec<(ClientId, super::Outbox)> = self
            .replicas
            .ids
            .iter()
            .filter_map(|id| {
                let a = self.replicas.announced.get(id)?;
                a.waits_for_save().then_some((*id, a.outbox.clone()?))
            })
            .collect();
        if waiting.is_empty() {
            return;
        }
        let file = if let Some(path) = path.filter(|_| ok) {
            std::fs::File::open(path)
                .and_then(|file| Ok((file.metadata()?.len(), file)))
                .map_err(|e| format!("Can't open/stat DB after BGSAVE: {}", crate::error::os_error_text(&e)))
        } else {
            Err("BGSAVE child returned an error".to_string())
        };
        match file {
            Ok((len, file)) => {
                for (id, _) in &waiting {
                    if let Some(a) = self.replicas.announced.get_mut(id) {
                        a.sending = true;
                    }
                }
                self.replicas.relays.push(SnapshotRelay {
                    targets: waiting,
                    source: SnapshotSource::File { file, len },
                });
            }
            Err(why) => {
                for (id, outbox) in &waiting {
                    crate::log::warning(format_args!("SYNC failed. {why}"));
                    if let Some(a) = self.replicas.announced.get_mut(id) {
                        a.held = None;
                    }
                    outbox.close_now();
                }
            }
        }
    }

    /// A saved file was sent to the replicas in `outcomes` (true), or not:
    /// those that got it all are online, the stream held for them
    /// following at once (Redis's `replicaPutOnline` and
    /// `replicaStartCommandStream`); the others are disconnected.
    pub fn saved_file_sent(&mut self, outcomes: &[(ClientId, bool)]) {
        for &(client, ok) in outcomes {
            let Some(a) = self.replicas.announced.get_mut(&client) else {
                continue;
            };
            if !(a.disk && a.sending) {
                continue;
            }
            if ok {
                crate::log::notice(format_args!("Synchronization with replica {} succeeded", a.name));
                self.release_held_stream(client);
            } else {
                a.held = None;
                if let Some(outbox) = &a.outbox {
                    outbox.close_now();
                }
            }
        }
    }

    /// `client` gets the stream from now on; `after_snapshot` is None for
    /// a replica online at once (a partial resynchronization's).
    fn enlist_replica(&mut self, client: ClientId, outbox: &super::Outbox, after_snapshot: Option<u64>) {
        if !self.replicas.ids.contains(&client) {
            self.replicas.ids.push(client);
        }
        let now_secs = self.clock.now_ms() / 1000;
        let announced = self.replicas.announced.entry(client).or_default();
        announced.ack_secs = now_secs;
        announced.synced = true;
        announced.outbox = Some(outbox.clone());
        announced.after_snapshot = after_snapshot;
        self.sync_replication_tap();
    }

    /// A backlog whose next byte is the stream's next.
    pub(crate) fn make_backlog(&mut self) {
        let size = self.params.int("repl-backlog-size").unwrap_or(1 << 20).max(1) as usize;
        self.replicas.backlog = Some(Backlog::new(size, self.replicas.offset + 1));
        self.sync_replication_tap();
    }

    /// The effect stream for replicas is recorded while there are
    /// replicas or a backlog to feed, and only then.
    pub(crate) fn sync_replication_tap(&mut self) {
        let wanted = !self.replicas.ids.is_empty() || self.replicas.backlog.is_some();
        match (wanted, self.replicas.tap) {
            (true, None) => {
                let stream = self.replicas.stream.clone();
                self.key_events.record_expired_deletions();
                let id = self.effects.attach(EffectsTap::replication(move |bytes| {
                    stream.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(bytes)
                }));
                self.replicas.tap = Some(id);
            }
            (false, Some(id)) => {
                self.effects.detach(id);
                self.replicas.tap = None;
                self.replicas.stream.lock().unwrap_or_else(|e| e.into_inner()).clear();
            }
            _ => {}
        }
    }

    /// The stream's next effect comes after a SELECT (a replica promoted
    /// to master: Redis's `slaveseldb = -1`).
    pub(crate) fn reselect_replication_stream(&mut self) {
        if let Some(id) = self.replicas.tap {
            self.effects.reselect(id);
        }
    }

    /// `REPLCONF ACK offset` from replica `id`.
    pub fn replica_acked(&mut self, id: ClientId, offset: u64) {
        let now_secs = self.clock.now_ms() / 1000;
        if let Some(a) = self.replicas.announced.get_mut(&id) {
            a.ack_offset = a.ack_offset.max(offset);
            a.ack_secs = now_secs;
            if a.held.is_some() && !a.disk {
                a.snapshot_acked = true;
                if a.snapshot_relayed {
                    self.release_held_stream(id);
                }
            }
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
        // Into the backlog too when no replica is there to ask, as Redis's
        // `replicationFeedSlaves` writes it.
        if (!self.replicas.ids.is_empty() || self.replicas.backlog.is_some()) && self.master.is_none() {
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
            .filter_map(|id| self.replicas.announced.get(id))
            .map(|a| {
                let held = a.held.as_ref().map_or(0, Vec::capacity);
                a.outbox.as_ref().map_or(0, |outbox| outbox.buffer().borrow().allocated()) as u64 + held as u64
            })
            .sum()
    }

    /// How many replicas acknowledged the stream up to `offset`.
    pub fn replicas_acked(&self, offset: u64) -> usize {
        self.online_replicas().filter(|a| a.ack_offset >= offset).count()
    }

    /// A replica's connection is gone.
    pub fn remove_replica(&mut self, id: ClientId) {
        // The last replica waiting for a save made for them went: the save
        // stops unless `save` points want it anyway (Redis's `freeClient`).
        let waited = self.replicas.announced.get(&id).is_some_and(Announced::waits_for_save);
        let was = self.replicas.ids.len();
        self.replicas.ids.retain(|&r| r != id);
        self.replicas.announced.remove(&id);
        if was > 0 && self.replicas.ids.is_empty() {
            self.replicas.no_replicas_since_ms = self.clock.now_ms();
        }
        self.sync_replication_tap();
        if waited && self.save_points().is_empty() && !self.replicas.announced.values().any(Announced::waits_for_save) {
            self.kill_save_child();
        }
    }

    /// Hands the replicas what the stream holds (after each flush of the
    /// effects).
    pub fn feed_replicas(&mut self) {
        if self.replicas.tap.is_none() {
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
        if let Some(backlog) = self.replicas.backlog.as_mut() {
            backlog.feed(bytes);
        }
        let now_secs = self.clock.now_ms() / 1000;
        for id in &self.replicas.ids {
            // Reached through what it announced: its client is out of the
            // map while its own batch runs.
            if self.replicas.announced.get(id).is_some_and(|a| a.waiting_since.is_some()) {
                // It waits for its snapshot's child: the stream it gets
                // starts where the snapshot ends.
                continue;
            }
            if let Some(a) = self.replicas.announced.get_mut(id)
                && let Some(held) = a.held.as_mut()
            {
                // Its snapshot is still being written: the stream waits,
                // within the replica's output limits.
                held.extend_from_slice(bytes);
                let limits = &self.runtime.output_limits;
                if limits.reached(super::output::ClientClass::Replica, held.len(), &a.held_soft_since, now_secs) {
                    crate::log::warning(format_args!(
                        "Replica client id={id} scheduled to be closed ASAP for overcoming of output buffer limits."
                    ));
                    a.held = Some(Vec::new());
                    if let Some(outbox) = &a.outbox {
                        outbox.close_now();
                    }
                }
                continue;
            }
            if let Some(replica) = self.clients.get(id) {
                send_raw(&replica.outbox, bytes);
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
            if announced.held.is_some() || announced.waiting_since.is_some() {
                continue;
            }
            let Some(replica) = self.clients.get_mut(id) else { continue };
            if replica.outbox.unwritten() as u64 <= after {
                announced.after_snapshot = None;
                announced.ack_secs = self.clock.now_ms() / 1000;
                replica.replica_online = true;
                replica.outbox.set_class(replica.output_class());
            }
        }
    }

    /// The cron's part: a PING every `repl-ping-replica-period` seconds,
    /// so that replicas know the master is there; the backlog sized as
    /// `repl-backlog-size` says, and freed `repl-backlog-ttl` seconds after
    /// the last replica of a master left.
    pub fn ping_replicas(&mut self) {
        self.remove_rdb_used_for_replicas();
        self.note_replicas_online();
        self.send_getack_if_due();
        self.tend_backlog();
        self.keep_waiting_replicas_alive();
        // A replica's replicas get its master's PINGs.
        if self.replicas.ids.is_empty() || self.master.is_some() {
            return;
        }
        // Not during a failover with a timeout, whose writes are paused:
        // the target's offset is to stay still (Redis's
        // `manual_failover_in_progress`).
        if self.failover.as_ref().is_some_and(|f| f.end_ms.is_some()) {
            return;
        }
        let period = self.params.int("repl-ping-replica-period").unwrap_or(10).max(1) as u64;
        if self.replicas.last_ping.elapsed().as_secs() >= period {
            self.replicas.last_ping = Instant::now();
            self.send_to_replicas(b"*1\r\n$4\r\nPING\r\n");
        }
    }

    /// With `rdb-del-sync-files yes` and no persistence (no `save` points,
    /// no AOF), the file a disk-based sync saved is removed once no
    /// replica waits for a snapshot or is sent one, so that a server meant
    /// to keep nothing on disk does not keep it (Redis's
    /// `removeRDBUsedToSyncReplicas`).
    fn remove_rdb_used_for_replicas(&mut self) {
        if self.params.value("rdb-del-sync-files") != Some("yes") {
            self.replicas.rdb_for_replicas = false;
            return;
        }
        if !self.replicas.rdb_for_replicas || !self.save_points().is_empty() || self.aof_on() {
            return;
        }
        if self
            .replicas
            .announced
            .values()
            .any(|a| a.waiting_since.is_some() || a.held.is_some())
        {
            return;
        }
        let path = super::persistence::rdb_path(&self.params);
        if std::fs::symlink_metadata(&path).is_ok() {
            self.replicas.rdb_for_replicas = false;
            crate::log::notice(format_args!(
                "Removing the RDB file used to feed replicas in a persistence-less instance"
            ));
            let _ = std::fs::remove_file(&path);
        }
    }

    /// A newline a second to the replicas waiting for a child to start,
    /// or for a save to disk to end, so that they do not take the master
    /// for gone (Redis's `replicationCron`).
    fn keep_waiting_replicas_alive(&mut self) {
        if self.replicas.keepalive_at.elapsed() < std::time::Duration::from_secs(1) {
            return;
        }
        self.replicas.keepalive_at = Instant::now();
        for a in self.replicas.announced.values() {
            if let (true, Some(outbox)) = (a.waiting_since.is_some() || a.waits_for_save(), &a.outbox) {
                send_raw(outbox, b"\n");
            }
        }
    }

    /// The backlog takes `repl-backlog-size` (after CONFIG SET).
    pub(crate) fn resize_backlog(&mut self) {
        let size = self.params.int("repl-backlog-size").unwrap_or(1 << 20).max(1) as usize;
        if let Some(backlog) = self.replicas.backlog.as_mut()
            && backlog.size != size
        {
            backlog.resize(size);
        }
    }

    fn tend_backlog(&mut self) {
        if self.replicas.backlog.is_none() {
            return;
        }
        let ttl = self.params.int("repl-backlog-ttl").unwrap_or(3600).max(0) as u64;
        let idle_secs = self.clock.now_ms().saturating_sub(self.replicas.no_replicas_since_ms) / 1000;
        if self.master.is_none() && self.replicas.ids.is_empty() && ttl > 0 && idle_secs > ttl {
            self.replicas.backlog = None;
            self.sync_replication_tap();
            // Nothing can continue the history any more (Redis's
            // `changeReplicationId` and `clearReplicationId2`).
            self.repl_id = super::new_run_id();
            self.repl_id2.clear();
            self.second_repl_offset = -1;
            crate::log::notice(format_args!(
                "Replication backlog freed after {ttl} seconds without connected replicas."
            ));
        }
    }
}

/// Queues `bytes` in a replica's output, outside any reply: in whole
/// chunks, never a chunk regrown past its size.
pub(crate) fn send_raw(outbox: &super::Outbox, bytes: &[u8]) {
    if let Some(mut out) = outbox.writable() {
        out.extend_from_slice(bytes);
        out.place(false);
    }
    outbox.wake();
}

/// A shutdown (SHUTDOWN without NOW, SIGTERM, SIGINT) that waits for the
/// replicas to acknowledge the whole stream before the final snapshot,
/// for at most `shutdown-timeout` seconds, with writes paused meanwhile
/// (Redis 7.0's `prepareForShutdown`), so that no acknowledged write is
/// lost with the master.
#[derive(Debug, Clone)]
pub struct ShutdownWait {
    /// When it stops waiting (the clock's milliseconds).
    pub deadline_ms: u64,
    /// SHUTDOWN's NOSAVE, SAVE and FORCE.
    pub nosave: bool,
    pub save: bool,
    pub force: bool,
    /// The SHUTDOWN clients waiting with it, answered only if it fails.
    pub clients: Vec<ClientId>,
}

impl State {
    /// Every replica acknowledged the whole stream (Redis's
    /// `isReadyToShutdown`).
    pub fn replicas_in_sync(&self) -> bool {
        let offset = self.replicas.offset;
        self.replicas
            .ids
            .iter()
            .all(|id| self.replicas.announced.get(id).is_some_and(|a| a.ack_offset == offset))
    }

    /// A shutdown begins: unless `shutdown-timeout` is 0 or the replicas
    /// are in sync already, it waits for them (their offsets asked for at
    /// once, writes paused) and true is returned; a shutdown already
    /// waiting goes on waiting.
    pub fn begin_shutdown_wait(&mut self, nosave: bool, save: bool, force: bool) -> bool {
        if self.shutdown_wait.is_some() {
            return true;
        }
        let timeout = self.params.int("shutdown-timeout").unwrap_or(10).max(0) as u64;
        if timeout == 0 || self.replicas_in_sync() {
            return false;
        }
        if self.paused().is_none() {
            self.replicas.getack_due = true;
            self.send_getack_if_due();
        }
        self.shutdown_wait = Some(ShutdownWait {
            deadline_ms: self.clock.now_ms() + timeout * 1000,
            nosave,
            save,
            force,
            clients: Vec::new(),
        });
        self.refresh_expiry_mode();
        crate::log::notice(format_args!("Waiting for replicas before shutting down."));
        true
    }

    /// The cron's part: a waiting shutdown goes on once the replicas are
    /// in sync or its time is up (Redis's `finishShutdown`): each replica
    /// still behind is logged, the background save stopped, and the final
    /// snapshot taken (with `save` points or SAVE, unless NOSAVE). Then
    /// [`State::shutdown`] is set for the server to stop; a snapshot that
    /// failed (without FORCE) ends the shutdown instead, the server going on.
    pub fn shutdown_wait_cron(&mut self, codes: impl FnOnce() -> Vec<Bytes>) {
        let Some(wait) = self.shutdown_wait.clone() else { return };
        let now_ms = self.clock.now_ms();
        if now_ms < wait.deadline_ms && !self.replicas_in_sync() {
            return;
        }
        let offset = self.replicas.offset;
        let mut lagging = 0;
        for id in &self.replicas.ids {
            let Some(a) = self.replicas.announced.get(id) else { continue };
            if a.ack_offset == offset {
                continue;
            }
            lagging += 1;
            let lag = if a.online() {
                (now_ms / 1000).saturating_sub(a.ack_secs)
            } else {
                0
            };
            crate::log::warning(format_args!(
                "Lagging replica {} reported offset {} behind master, lag={lag}, state={}.",
                a.name,
                offset.saturating_sub(a.ack_offset),
                a.info_state()
            ));
        }
        let replicas = self.replicas.ids.len();
        if replicas > 0 {
            crate::log::notice(format_args!(
                "{} of {replicas} replicas are in sync when shutting down.",
                replicas - lagging
            ));
        }
        self.kill_bgsave();
        if !wait.nosave && (wait.save || !self.save_points().is_empty()) {
            crate::log::notice(format_args!("Saving the final RDB snapshot before exiting."));
            if self.save(&codes()).is_err() && !wait.force {
                crate::log::warning(format_args!("Error trying to save the DB, can't exit."));
                crate::log::warning(format_args!(
                    "Errors trying to shut down the server. Check the logs for more information."
                ));
                self.cancel_shutdown();
                return;
            }
        }
        self.shutdown_save_done = true;
        self.shutdown = true;
    }

    /// A waiting shutdown is given up (SHUTDOWN ABORT, or its snapshot
    /// failed): its SHUTDOWN clients are told, and writes go on.
    pub fn cancel_shutdown(&mut self) -> bool {
        let Some(wait) = self.shutdown_wait.take() else { return false };
        for id in wait.clients {
            self.finish_admin(id, Err(crate::commands::CmdError::err("Errors trying to SHUTDOWN. Check logs.")));
        }
        self.refresh_expiry_mode();
        self.release_paused_clients();
        true
    }
}

/// INFO's `master_replid2` when there is none.
pub const NO_REPLID: &str = "0000000000000000000000000000000000000000";

#[cfg(test)]
mod tests {
    use super::Backlog;

    #[test]
    fn the_backlog_keeps_the_last_bytes_and_their_offsets() {
        let mut b = Backlog::new(8, 1);
        assert_eq!(b.since(1), Some(Vec::new()));
        assert_eq!(b.since(2), None);
        b.feed(b"abcde");
        assert_eq!((b.first_byte_offset(), b.histlen()), (1, 5));
        assert_eq!(b.since(3).as_deref(), Some(&b"cde"[..]));
        assert_eq!(b.since(6).as_deref(), Some(&b""[..]));
        assert_eq!(b.since(7), None);
        b.feed(b"fghij");
        assert_eq!((b.first_byte_offset(), b.histlen()), (3, 8));
        assert_eq!(b.since(2), None);
        assert_eq!(b.since(3).as_deref(), Some(&b"cdefghij"[..]));
        // A feed longer than the backlog keeps its own end.
        b.feed(b"0123456789");
        assert_eq!((b.first_byte_offset(), b.histlen()), (13, 8));
        assert_eq!(b.since(13).as_deref(), Some(&b"23456789"[..]));
        b.resize(3);
        assert_eq!(b.since(18).as_deref(), Some(&b"789"[..]));
        assert_eq!(b.since(17), None);
        b.resize(10);
        b.feed(b"xy");
        assert_eq!(b.since(18).as_deref(), Some(&b"789xy"[..]));
    }
}
