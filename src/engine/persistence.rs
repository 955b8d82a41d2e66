//! RDB snapshots: SAVE, BGSAVE, the `save` schedule, the snapshot taken on
//! SHUTDOWN, and loading one at start, in Redis 7.0's file format
//! (`rdb::file`), at `dir`/`dbfilename`.
//!
//! BGSAVE forks, as Redis does: the child writes the snapshot from its
//! copy-on-write view of memory while the engine goes on serving. Forking
//! costs the engine the copy of its page tables (INFO `latest_fork_usec`);
//! copying the data instead would cost it a walk of every key. A file is
//! written as `temp-<pid>.rdb` beside its destination, flushed to disk and
//! renamed over it, so a crash never leaves half a snapshot in its place.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use bytes::Bytes;

use super::State;
use crate::config_params::ConfigParams;
use crate::rdb::file::{self, Aux, DbSource, Loaded};
use crate::rdb::{DecodeOptions, EncodeOptions};

/// How long after a failed background save the schedule tries again
/// (Redis's CONFIG_BGSAVE_RETRY_DELAY).
const RETRY_DELAY_SECS: u64 = 5;

/// The snapshot state INFO persistence reports.
#[derive(Debug)]
pub struct Persistence {
    /// Unix time of the last successful save (LASTSAVE).
    pub lastsave: u64,
    /// Whether the last background save succeeded.
    pub last_bgsave_ok: bool,
    /// When a background save was last tried (for the retry delay).
    pub last_bgsave_try: u64,
    /// The running background save.
    pub child: Option<Child>,
    /// Background saves killed (FLUSHALL, SHUTDOWN, their last replica
    /// gone), reaped by the cron without waiting for them, and the
    /// temporary file each was writing.
    pub killed: Vec<(libc::pid_t, PathBuf)>,
    /// BGSAVE SCHEDULE asked for one once the running one ends.
    pub scheduled: bool,
    /// Saves made since start (INFO `rdb_saves`).
    pub saves: u64,
    /// Seconds the last background save took (-1: none yet).
    pub last_bgsave_secs: i64,
    /// Microseconds the last fork took.
    pub latest_fork_usec: u64,
    /// Forks made since start (INFO `total_forks`).
    pub forks: u64,
    /// What the last load found (INFO `rdb_last_load_keys_*`).
    pub last_load_keys_loaded: u64,
    pub last_load_keys_expired: u64,
}

/// A background save in progress.
#[derive(Debug)]
pub struct Child {
    pub pid: libc::pid_t,
    pub started: Instant,
    /// The dirty counter when it forked: what it saves.
    pub dirty_at_fork: u64,
    /// The file it writes, as `dir` and `dbfilename` were at the fork
    /// (replicas waiting for it are sent this one).
    pub path: PathBuf,
}

impl Child {
    /// The temporary file it writes before renaming it over [`Child::path`].
    fn temp_path(&self) -> PathBuf {
        let dir = self.path.parent().unwrap_or(std::path::Path::new("."));
        dir.join(format!("temp-{}.rdb", self.pid))
    }
}

impl Persistence {
    pub fn new(now_secs: u64) -> Persistence {
        Persistence {
            lastsave: now_secs,
            last_bgsave_ok: true,
            last_bgsave_try: 0,
            child: None,
            killed: Vec::new(),
            scheduled: false,
            saves: 0,
            last_bgsave_secs: -1,
            latest_fork_usec: 0,
            forks: 0,
            last_load_keys_loaded: 0,
            last_load_keys_expired: 0,
        }
    }
}

/// Where snapshots go: `dbfilename` in `dir`.
pub fn rdb_path(params: &ConfigParams) -> PathBuf {
    let dir = params.value("dir").unwrap_or(".");
    PathBuf::from(dir).join(params.value("dbfilename").unwrap_or("dump.rdb"))
}

/// A load in progress at start (INFO `loading:1` and its `loading_*`
/// fields): commands not flagged `loading` are answered `LOADING …`
/// meanwhile, as Redis answers them.
#[derive(Debug, Clone)]
pub struct Loading {
    pub start_secs: u64,
    pub total_bytes: u64,
    pub loaded_bytes: u64,
    /// Where in the file the current one starts (an AOF's base, then
    /// each incremental file, count as one).
    file_start: u64,
    /// The load is of a master's snapshot (it ends with the link).
    pub(crate) of_master: bool,
}

impl State {
    /// Starts a load of `total_bytes` (INFO shows it from now on).
    pub fn start_loading(&mut self, total_bytes: u64) {
        self.loading = Some(Loading {
            start_secs: self.clock.now_ms() / 1000,
            total_bytes,
            loaded_bytes: 0,
            file_start: 0,
            of_master: false,
        });
    }

    /// The next file of the load starts where the last ended.
    pub fn loading_next_file(&mut self) {
        if let Some(l) = self.loading.as_mut() {
            l.file_start = l.loaded_bytes;
        }
    }

    /// A key (or command) was loaded and `offset` bytes of the current
    /// file read: as Redis's `rdbLoadProgressCallback`, clients are served
    /// each time the load passes another `loading-process-events-interval-bytes`.
    /// False once a SHUTDOWN served meanwhile asks the load to stop.
    pub fn loading_progress(&mut self, offset: usize) -> bool {
        let Some(l) = self.loading.as_mut() else { return true };
        // Read for each key: CONFIG SET applies in the middle of a load.
        let interval = self.runtime.loading_interval;
        crate::rdb::debug_delay(self.runtime.key_load_delay);
        let loaded = l.file_start + offset as u64;
        let passed = interval > 0 && loaded / interval > l.loaded_bytes / interval;
        l.loaded_bytes = loaded;
        if passed {
            let watchdog = self.watchdog.clone();
            watchdog.serve_while_loading(self);
        }
        !self.shutdown && !self.watchdog.shutdown_requested.get() && !self.watchdog.halted()
    }

    /// Loads the snapshot at `dir`/`dbfilename` at start, if there is one
    /// (not with `appendonly yes`: the append-only file is loaded then),
    /// serving other clients `LOADING` meanwhile; the function libraries
    /// are returned for the scripting. The error is the line Redis logs
    /// before it exits.
    pub fn load_rdb_at_start(&mut self) -> Result<Vec<Bytes>, String> {
        if self.params.value("appendonly") == Some("yes") {
            return Ok(Vec::new());
        }
        let path = rdb_path(&self.params);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(format!("Fatal error loading the DB: {}. Exiting.", crate::error::os_error_text(&e))),
        };
        let started = Instant::now();
        let options = decode_options(&self.params);
        // A replica keeps the keys that expired meanwhile: its master
        // deletes them, and the commands it sends may need them.
        let (databases, now_ms) = (self.dbs.len(), if self.i_am_master() { self.clock.now_ms() } else { 0 });
        self.start_loading(bytes.len() as u64);
        let loaded = file::read_with_progress(&bytes, databases, &options, now_ms, &mut |at| self.loading_progress(at));
        self.loading = None;
        let loaded = loaded.map_err(|e| {
            crate::log::warning(format_args!(
                "Internal error in RDB reading offset {} of {} -> {}",
                e.1,
                path.display(),
                e.0
            ));
            format!("Fatal error loading the DB: {}. Exiting.", e.0.trim_end_matches('.'))
        })?;
        let keys: usize = loaded.dbs.iter().map(Vec::len).sum();
        crate::log::notice(format_args!(
            "Done loading RDB, keys loaded: {keys}, keys expired: {}.",
            loaded.expired
        ));
        crate::log::notice(format_args!("DB loaded from disk: {:.3} seconds", started.elapsed().as_secs_f64()));
        if let (Some(id), Some(offset), Some(db)) = (loaded.repl_id.clone(), loaded.repl_offset, loaded.stream_db) {
            self.restore_replication(id, offset, db, &loaded.expired_keys);
        }
        Ok(self.install(loaded))
    }

    /// The replication history a snapshot is at, as Redis's
    /// `rdbPopulateSaveInfo` tells it: a master with a backlog (its
    /// stream's database), a replica whose stream runs (its master
    /// client's), or one with a history to continue.
    pub fn replication_save_info(&self) -> Option<(usize, String, u64)> {
        let db = if self.master.is_none() {
            self.replicas.backlog.as_ref()?;
            self.replicas.tap.and_then(|tap| self.effects.selected(tap)).unwrap_or(0)
        } else {
            let client = self.master.as_deref().and_then(|m| m.client).and_then(|id| self.clients.get(&id));
            client.map(|c| c.db).or(self.cached_master_db)?
        };
        Some((db, self.master_replid().to_string(), self.replicas.offset))
    }

    /// Redis's `iAmMaster`: no `replicaof`, or in cluster mode a master
    /// in the cluster (where `replicaof` is refused).
    pub fn i_am_master(&self) -> bool {
        match self.cluster.as_deref() {
            Some(c) => c.myself().is_master(),
            None => !self
                .params
                .value("replicaof")
                .is_some_and(|v| !v.eq_ignore_ascii_case("no one") && !v.is_empty()),
        }
    }

    /// A snapshot loaded at start told its replication history (Redis's
    /// `loadDataFromDisk`): a replica (`replicaof` set, or a replica in
    /// the cluster) continues it with its master; a master keeps it as
    /// its second ID, with a backlog from there, for its replicas to
    /// continue.
    ///
    /// `expired` are the keys the load left out as expired: a master's
    /// replicas are told with a DEL each (UNLINK with
    /// `lazyfree-lazy-expire`), as Redis feeds them while loading.
    fn restore_replication(&mut self, id: String, offset: u64, db: usize, expired: &[(usize, Bytes)]) {
        if !self.i_am_master() {
            self.repl_id = id;
            self.replicas.offset = offset;
            // Redis's `selectDb` of one out of range fails: 0 stays.
            self.loaded_replication = Some(if db < self.dbs.len() { db } else { 0 });
        } else {
            self.repl_id2 = id;
            self.second_repl_offset = offset as i64 + 1;
            self.replicas.offset += offset;
            self.make_backlog();
            self.replicas.no_replicas_since_ms = self.clock.now_ms();
            let del: &[u8] = if self.params.value("lazyfree-lazy-expire") == Some("yes") {
                b"UNLINK"
            } else {
                b"DEL"
            };
            let mut selected = None;
            let mut bytes = Vec::new();
            for (db, key) in expired {
                if selected != Some(*db) {
                    super::effects::encode(&mut bytes, &[b"SELECT", db.to_string().as_bytes()]);
                    selected = Some(*db);
                }
                super::effects::encode(&mut bytes, &[del, key]);
            }
            if !bytes.is_empty() {
                self.send_to_replicas(&bytes);
            }
            // What the stream writes next starts with its own SELECT.
            self.reselect_replication_stream();
        }
    }
}

/// The settings values are loaded under.
pub fn decode_options(params: &ConfigParams) -> DecodeOptions {
    DecodeOptions {
        zset_limits: crate::db::zset::ListpackLimits {
            max_entries: params.int("zset-max-listpack-entries").unwrap_or(128).max(0) as usize,
            max_value: params.int("zset-max-listpack-value").unwrap_or(64).max(0) as usize,
        },
        hash_limits: crate::db::hash::PackLimits::new(
            params.int("hash-max-listpack-entries").unwrap_or(128),
            params.int("hash-max-listpack-value").unwrap_or(64),
        ),
        max_string: params.int("proto-max-bulk-len").unwrap_or(512 << 20).max(0) as usize,
        set_max_intset_entries: params.int("set-max-intset-entries").unwrap_or(512).max(0) as usize,
    }
}

impl State {
    /// Puts a loaded snapshot in place (the databases are empty); the
    /// function libraries are returned for the scripting to load.
    pub fn install(&mut self, loaded: Loaded) -> Vec<Bytes> {
        let mut count = 0;
        for (index, keys) in loaded.dbs.into_iter().enumerate() {
            let Some(db) = self.dbs.get_mut(index) else { break };
            for (key, value, deadline) in keys {
                db.restore_with_ttl(key, value, deadline);
                count += 1;
            }
        }
        self.persistence.last_load_keys_loaded = count;
        self.persistence.last_load_keys_expired = loaded.expired;
        loaded.libraries
    }

    /// Loads the snapshot at `dir`/`dbfilename` over what is there (DEBUG
    /// RELOAD); the function libraries are returned for the scripting.
    pub fn load_snapshot(&mut self) -> Result<Vec<Bytes>, String> {
        let loaded = self.read_snapshot()?;
        Ok(self.install(loaded))
    }

    /// The snapshot at `dir`/`dbfilename`, read but not put in place.
    pub fn read_snapshot(&self) -> Result<Loaded, String> {
        let path = rdb_path(&self.params);
        let bytes = std::fs::read(&path).map_err(|e| crate::error::os_error_text(&e))?;
        let databases = self.dbs.len();
        file::read(&bytes, databases, &decode_options(&self.params), self.clock.now_ms()).map_err(|e| e.0)
    }

    /// Whether the `save` schedule has any point (SHUTDOWN then saves).
    pub fn save_points(&self) -> Vec<(u64, u64)> {
        let words: Vec<u64> = self
            .params
            .value("save")
            .unwrap_or("")
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        words.chunks(2).filter(|p| p.len() == 2).map(|p| (p[0], p[1])).collect()
    }

    fn encode_options(&self) -> EncodeOptions {
        EncodeOptions {
            compression: self.params.value("rdbcompression") != Some("no"),
            list_max_listpack_size: self.params.int("list-max-listpack-size").unwrap_or(-2),
            set_max_intset_entries: self.params.int("set-max-intset-entries").unwrap_or(512).max(0) as usize,
            key_save_delay: self.params.int("rdb-key-save-delay").unwrap_or(0),
        }
    }

    /// Writes the dataset as an RDB file to `out`, with the function
    /// libraries' `codes`; `aof_base` marks it as an append-only file's
    /// base. Keys past their deadline not yet removed are written too, as
    /// Redis's `rdbSaveRio` writes them: a master that loads the file at
    /// start drops them and tells its replicas (a DEL each after the
    /// history the file records), which hold them until then; a Raft
    /// member's snapshot holds exactly what the log made.
    pub fn write_snapshot(&self, out: impl Write, codes: &[Bytes], aof_base: bool) -> std::io::Result<()> {
        let aux = Aux {
            ctime: self.clock.now_ms() / 1000,
            used_mem: crate::memory::used_bytes(),
            aof_base,
            // An append-only file's base tells no history, as Redis's.
            repl: if aof_base { None } else { self.replication_save_info() },
        };
        let libraries: Vec<&[u8]> = codes.iter().map(|c| c.as_ref()).collect();
        let dbs = self.dbs.iter().enumerate().map(|(index, db)| DbSource {
            index,
            keys: db.len(),
            expires: db.expires_len(),
            entries: db.entries(),
        });
        let checksum = self.params.value("rdbchecksum") != Some("no");
        file::write(out, &aux, &libraries, dbs, &self.encode_options(), checksum)
    }

    /// Writes the snapshot to `path` (through a temporary file renamed
    /// over it), with the function libraries' `codes`; `aof_base` marks it
    /// as an append-only file's base.
    pub fn write_snapshot_to(&self, path: &std::path::Path, codes: &[Bytes], aof_base: bool) -> std::io::Result<()> {
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."));
        let temp = dir.join(format!("temp-{}.rdb", std::process::id()));
        let result = (|| {
            let file = std::fs::File::create(&temp)?;
            let mut out = std::io::BufWriter::with_capacity(1 << 16, file);
            self.write_snapshot(&mut out, codes, aof_base)?;
            let file = out.into_inner().map_err(|e| e.into_error())?;
            file.sync_all()?;
            std::fs::rename(&temp, path)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        result
    }

    /// Whether a child writes a snapshot: BGSAVE's, or a replica's
    /// (Redis's CHILD_TYPE_RDB, which holds back another save).
    pub fn rdb_child_active(&self) -> bool {
        self.persistence.child.is_some() || !self.replicas.snapshot_children.is_empty()
    }

    /// SAVE: the snapshot written now, in the foreground (Redis's
    /// `rdbSave`). Its error is the text Redis logs.
    pub fn save(&mut self, codes: &[Bytes]) -> Result<(), String> {
        if self.rdb_child_active() {
            return Err("Background save already in progress".into());
        }
        let path = rdb_path(&self.params);
        match self.write_snapshot_to(&path, codes, false) {
            Ok(()) => {
                crate::log::notice(format_args!("DB saved on disk"));
                self.saved(self.dirty);
                Ok(())
            }
            Err(e) => {
                crate::log::warning(format_args!(
                    "Failed opening the temp RDB file temp-{}.rdb (in server root dir {}) for saving: {}",
                    std::process::id(),
                    path.parent().map_or(String::new(), |p| p.display().to_string()),
                    crate::error::os_error_text(&e)
                ));
                // As in Redis, a failed SAVE leaves `rdb_last_bgsave_status`
                // as it was: only a background save's outcome sets it.
                Err(crate::error::os_error_text(&e))
            }
        }
    }

    /// A save of the dataset as it was at dirty count `dirty` succeeded.
    fn saved(&mut self, dirty: u64) {
        self.dirty_at_save = dirty;
        self.persistence.lastsave = self.clock.now_ms() / 1000;
        self.persistence.last_bgsave_ok = true;
    }

    /// BGSAVE: a child process writes the snapshot (Redis's
    /// `rdbSaveBackground`).
    pub fn bgsave(&mut self, codes: &[Bytes]) -> Result<(), String> {
        if self.rdb_child_active() {
            return Err("Background save already in progress".into());
        }
        let path = rdb_path(&self.params);
        self.persistence.last_bgsave_try = self.clock.now_ms() / 1000;
        // Counted when tried, as Redis's `stat_rdb_saves`.
        self.persistence.saves += 1;
        let started = Instant::now();
        before_fork();
        // SAFETY: the child only writes the snapshot from its copy of this
        // thread's memory and leaves with `_exit`, never returning into
        // the runtime; the engine's data is touched by this thread alone.
        let pid = unsafe { libc::fork() };
        self.persistence.forks += u64::from(pid > 0);
        if pid == 0 {
            child_exit(|| self.write_snapshot_to(&path, codes, false));
        }
        if pid < 0 {
            let e = std::io::Error::last_os_error();
            self.persistence.last_bgsave_ok = false;
            crate::log::warning(format_args!("Can't save in background: fork: {}", crate::error::os_error_text(&e)));
            return Err(format!("fork: {}", crate::error::os_error_text(&e)));
        }
        self.persistence.latest_fork_usec = started.elapsed().as_micros() as u64;
        crate::log::notice(format_args!("Background saving started by pid {pid}"));
        self.persistence.child = Some(Child {
            pid,
            started,
            dirty_at_fork: self.dirty,
            path,
        });
        Ok(())
    }

    /// The cron's part: a background save that ended is accounted for,
    /// and the `save` schedule starts one when a point is reached
    /// (Redis's `serverCron`). `codes` gives the function libraries.
    pub fn persistence_cron(&mut self, codes: impl FnOnce() -> Vec<Bytes>) {
        self.persistence.killed.retain(|(pid, temp)| {
            let mut status = 0;
            // SAFETY: reaps this process's own child, without blocking.
            let done = unsafe { libc::waitpid(*pid, &mut status, libc::WNOHANG) };
            if done == 0 {
                return true;
            }
            // Gone: what it was writing goes too (a file it renamed in
            // place before the signal came is a whole snapshot).
            let _ = std::fs::remove_file(temp);
            false
        });
        if let Some(child) = &self.persistence.child {
            let mut status = 0;
            // SAFETY: waits without blocking for this process's own child.
            let done = unsafe { libc::waitpid(child.pid, &mut status, libc::WNOHANG) };
            if let Some(child) = (done == child.pid || done < 0).then(|| self.persistence.child.take()).flatten() {
                let reaped = done == child.pid;
                let ok = reaped && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
                let (dirty, secs) = (child.dirty_at_fork, child.started.elapsed().as_secs() as i64);
                self.persistence.last_bgsave_secs = secs;
                if ok {
                    crate::log::notice(format_args!("Background saving terminated with success"));
                    self.saved(dirty);
                } else if reaped && libc::WIFSIGNALED(status) {
                    // Killed from outside (as by the OOM killer): its
                    // temporary file goes; SIGUSR1 is a stop asked for, not
                    // an error (Redis's `backgroundSaveDoneHandlerDisk`).
                    let signal = libc::WTERMSIG(status);
                    crate::log::warning(format_args!("Background saving terminated by signal {signal}"));
                    let _ = std::fs::remove_file(child.temp_path());
                    if signal != libc::SIGUSR1 {
                        self.persistence.last_bgsave_ok = false;
                    }
                } else {
                    crate::log::warning(format_args!("Background saving error"));
                    self.persistence.last_bgsave_ok = false;
                }
                // Replicas waiting for this save get its file.
                self.save_for_replicas_ended(ok, Some(&child.path));
            }
            return;
        }
        if self.child_active() {
            return;
        }
        let now = self.clock.now_ms() / 1000;
        let changes = self.dirty - self.dirty_at_save;
        let retry_ok = self.persistence.last_bgsave_ok || now.saturating_sub(self.persistence.last_bgsave_try) > RETRY_DELAY_SECS;
        let due = self.persistence.scheduled
            || (retry_ok
                && self
                    .save_points()
                    .iter()
                    .any(|&(secs, min_changes)| changes >= min_changes && now.saturating_sub(self.persistence.lastsave) > secs));
        if due {
            self.persistence.scheduled = false;
            let _ = self.bgsave(&codes());
        }
    }

    /// Stops a background save (FLUSHALL, SHUTDOWN): the child is killed
    /// and its temporary file removed. A child writing the replicas'
    /// snapshot is killed too (Redis's `killRDBChild`), and counts as
    /// gone (a save may follow at once); its relay reaps it, and its
    /// replicas, disconnected, ask again.
    pub fn kill_bgsave(&mut self) {
        for pid in self.replicas.snapshot_children.drain(..) {
            // SAFETY: signals this process's own child, reaped by its relay.
            unsafe { libc::kill(pid, libc::SIGUSR1) };
        }
        self.kill_save_child();
    }

    /// Stops the background save to disk, if one runs (Redis's
    /// `killRDBChild`): the child is killed, and counts as gone at once
    /// (a save may follow); the cron reaps it, without holding the server
    /// while the kernel takes down its copy of the dataset, and removes its
    /// temporary file. Replicas waiting for its file are disconnected (they
    /// ask again).
    pub(crate) fn kill_save_child(&mut self) {
        let Some(child) = self.persistence.child.take() else {
            return;
        };
        // SAFETY: signals this process's own child; the cron reaps it.
        unsafe { libc::kill(child.pid, libc::SIGUSR1) };
        crate::log::warning(format_args!("Background saving terminated by signal {}", libc::SIGUSR1));
        self.persistence.last_bgsave_secs = child.started.elapsed().as_secs() as i64;
        // Its file goes now (a shutdown leaves no cron to wait for it), and
        // again once it is reaped, should it have written on meanwhile.
        let temp = child.temp_path();
        let _ = std::fs::remove_file(&temp);
        self.persistence.killed.push((child.pid, temp));
        self.save_for_replicas_ended(false, None);
    }
}

/// A forked child's work, then its end: exit status 0 when `work` did
/// it, 1 on its error, 2 if it panicked. A panic's report would take locks
/// another thread may have held at the fork, so there is none; and
/// whatever happens, the child never unwinds back into the server's loop
/// as a second server.
pub(crate) fn child_exit(work: impl FnOnce() -> std::io::Result<()>) -> ! {
    std::panic::set_hook(Box::new(|_| {}));
    // SIGUSR1 stops it (`kill_save_child`), whatever the process that
    // embeds the server made of that signal.
    // SAFETY: sets this process's own signal disposition and mask.
    unsafe {
        libc::signal(libc::SIGUSR1, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGUSR1);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
    // A child whose server is gone (killed, as by the OOM killer) stops
    // at once rather than write on for nobody (Redis's child notices its
    // parent's end on the pipe to it).
    #[cfg(target_os = "linux")]
    // SAFETY: asks for a signal to this process; reads its parent's id.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::getppid() as u32 != PARENT.load(std::sync::atomic::Ordering::Relaxed) {
            libc::_exit(1);
        }
    }
    close_inherited_sockets();
    let status = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)) {
        Ok(Ok(())) => 0,
        Ok(Err(_)) => 1,
        Err(_) => 2,
    };
    // SAFETY: ends the child without running the parent's destructors or
    // atexit handlers.
    unsafe { libc::_exit(status) }
}

/// Closes the sockets a forked child inherited: the listening ones, the
/// clients', the links to other nodes (Redis's child closes its listening
/// sockets, `closeChildUnusedResourceAfterFork`). A child writes a file or
/// a pipe and needs none, and a socket it kept open would outlive the
/// server's own close of it: a client the server disconnected would not
/// see its connection end, nor a port the server gave up be free, until
/// the child exits.
///
/// Each socket's number is taken over by /dev/null rather than freed: a
/// number the child's file could otherwise get is still written to by
/// what the child inherited (the runtime's signal handler writes a byte
/// to its socket on SIGTERM), and would write into the snapshot.
fn close_inherited_sockets() {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else { return };
    let fds: Vec<libc::c_int> = dir.filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok()).collect();
    // SAFETY: opens a descriptor owned here, closed below.
    let null = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if null < 0 {
        return;
    }
    for fd in fds {
        // SAFETY: `stat` is plain data, filled by fstat; a descriptor of
        // this process that is a socket is replaced in the child only.
        unsafe {
            let mut stat: libc::stat = std::mem::zeroed();
            if fd != null && libc::fstat(fd, &mut stat) == 0 && stat.st_mode & libc::S_IFMT == libc::S_IFSOCK {
                libc::dup2(null, fd);
            }
        }
    }
    // SAFETY: the descriptor opened above.
    unsafe { libc::close(null) };
}

/// The process that forks, as its children knew it at the fork.
static PARENT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Flushes stdout and stderr before a fork, so the child inherits no
/// half-written line (nothing else is buffered across it), and notes who
/// forks (see [`child_exit`]).
pub fn before_fork() {
    PARENT.store(std::process::id(), std::sync::atomic::Ordering::Relaxed);
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
}
