//! The append-only file, in Redis 7.0's multi-part layout: in
//! `dir`/`appenddirname`, a manifest (`appendonly.aof.manifest`) naming a
//! base file (an RDB snapshot, `appendonly.aof.N.base.rdb`, with
//! `aof-use-rdb-preamble yes`, or commands, `appendonly.aof.N.base.aof`,
//! with `no`: see `aof_base`) and the incremental files after it
//! (`appendonly.aof.N.incr.aof`), which hold every write as the effect
//! stream records it (`engine::effects`: RESP commands, SELECT where the
//! database changes, relative expiries made absolute, scripts and
//! transactions as MULTI/EXEC).
//!
//! The stream reaches the file at the end of each batch a connection ran,
//! before any reply of that batch is written to a socket: with
//! `appendfsync always` the batch's writes are on disk (one `fdatasync`
//! for all of them) before a client hears of any; `everysec` syncs once a
//! second from a thread of its own; `no` leaves it to the OS.
//!
//! BGREWRITEAOF forks a child that writes a new base snapshot while the
//! engine goes on appending to a new incremental file; when the child is
//! done the manifest names the new base and that file alone, and the old
//! files are removed. At start the base is loaded and every incremental
//! file replayed through the command pipeline; a truncated last command is
//! cut off (`aof-load-truncated yes`) or stops the start.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;

use super::State;
use super::durable::Syncer;
use super::effects::EffectsTap;
use crate::error::os_error_text;

/// A file the manifest names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub name: String,
    pub seq: u64,
    /// `b` (base), `h` (history) or `i` (incremental).
    pub kind: char,
}

/// The manifest: the base file first, then the incremental files in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    pub parts: Vec<Part>,
}

impl Manifest {
    /// Reads the manifest's text (Redis's `aofLoadManifestFromFile`).
    pub fn parse(text: &str) -> Result<Manifest, String> {
        let mut parts = Vec::new();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let words = crate::request::split_args(line.as_bytes()).ok_or("Invalid AOF manifest file format")?;
            let words: Vec<String> = words.into_iter().map(|w| String::from_utf8_lossy(&w).into_owned()).collect();
            let mut part = Part {
                name: String::new(),
                seq: 0,
                kind: ' ',
            };
            for pair in words.chunks(2) {
                let [key, value] = pair else {
                    return Err("Invalid AOF manifest file format".into());
                };
                match key.as_str() {
                    "file" => part.name = value.clone(),
                    "seq" => part.seq = value.parse().map_err(|_| "Invalid AOF manifest file format")?,
                    "type" => part.kind = value.chars().next().unwrap_or(' '),
                    _ => {}
                }
            }
            if part.name.is_empty() || !matches!(part.kind, 'b' | 'h' | 'i') {
                return Err("Invalid AOF manifest file format".into());
            }
            parts.push(part);
        }
        Ok(Manifest { parts })
    }

    pub fn text(&self) -> String {
        self.parts
            .iter()
            .map(|p| format!("file {} seq {} type {}\n", p.name, p.seq, p.kind))
            .collect()
    }

    fn base(&self) -> Option<&Part> {
        self.parts.iter().find(|p| p.kind == 'b')
    }

    fn incrs(&self) -> impl Iterator<Item = &Part> {
        self.parts.iter().filter(|p| p.kind == 'i')
    }

    fn next_incr_seq(&self) -> u64 {
        self.incrs().map(|p| p.seq).max().unwrap_or(0) + 1
    }

    fn next_base_seq(&self) -> u64 {
        self.base().map_or(0, |p| p.seq) + 1
    }
}

/// When the file is synced to disk (`appendfsync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fsync {
    Always,
    EverySec,
    No,
}

impl Fsync {
    /// What output waits for under this policy.
    fn wait(self) -> super::durable::Wait {
        match self {
            Fsync::Always => super::durable::Wait::Synced,
            _ => super::durable::Wait::Written,
        }
    }

    pub fn of(value: Option<&str>) -> Fsync {
        match value {
            Some("always") => Fsync::Always,
            Some("no") => Fsync::No,
            _ => Fsync::EverySec,
        }
    }
}

/// A rewrite in progress: the child writing the new base.
#[derive(Debug)]
pub struct Rewrite {
    pub pid: libc::pid_t,
    pub started: Instant,
    /// The base it writes (beside the incremental file opened for the
    /// writes made meanwhile, when the AOF is on).
    pub base: Part,
    /// The directory it writes in.
    pub dir: PathBuf,
}

/// BGREWRITEAOF's state, whether the AOF is on or not (INFO's
/// `aof_rewrite*` fields).
#[derive(Debug)]
pub struct Rewrites {
    pub running: Option<Rewrite>,
    /// BGREWRITEAOF came while a snapshot's child ran, or in a
    /// transaction: the cron starts it once no child runs.
    pub scheduled: bool,
    /// Rewrites that succeeded.
    pub done: u64,
    /// Rewrites that failed since the last that succeeded.
    pub failures: u64,
    pub last_ok: bool,
    /// Seconds the last one took (-1: none yet).
    pub last_secs: i64,
}

impl Default for Rewrites {
    fn default() -> Rewrites {
        Rewrites {
            running: None,
            scheduled: false,
            done: 0,
            failures: 0,
            last_ok: true,
            last_secs: -1,
        }
    }
}

/// The append-only file of a running server.
pub struct Aof {
    pub dir: PathBuf,
    pub basename: String,
    pub manifest: Manifest,
    /// The incremental file writes go to.
    file: Arc<std::fs::File>,
    /// Bytes in the incremental file writes go to.
    incr_size: u64,
    /// `aof-timestamp-enabled`'s annotations.
    stamps: Arc<Stamps>,
    /// What the effect stream handed over since the last write.
    pending: Arc<Mutex<Vec<u8>>>,
    pub fsync: Fsync,
    /// The thread syncs run on (see [`super::durable`]).
    syncer: Syncer,
    last_sync: Instant,
    /// The errno of the last write, if it failed.
    pub write_error: Option<i32>,
    /// Bytes in the incremental files, and the base's size.
    pub current_size: u64,
    pub base_size: u64,
    /// The size after the last rewrite (or at start): what
    /// `auto-aof-rewrite-percentage` measures growth against.
    pub rewrite_base_size: u64,
}

impl Aof {
    /// Bytes recorded and not yet written (INFO `aof_buffer_length`).
    pub fn buffer_length(&self) -> usize {
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Syncs asked for and not done yet (INFO `aof_pending_bio_fsync`).
    pub fn pending_syncs(&self, durability: &super::durable::Durability) -> u64 {
        self.syncer.queued() + u64::from(durability.syncing())
    }
}

impl std::fmt::Debug for Aof {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Aof({})", self.dir.display())
    }
}

/// The directory the AOF lives in.
pub fn aof_dir(state: &State) -> PathBuf {
    let dir = state.params.value("dir").unwrap_or(".");
    PathBuf::from(dir).join(state.params.value("appenddirname").unwrap_or("appendonlydir"))
}

fn manifest_name(basename: &str) -> String {
    format!("{basename}.manifest")
}

/// Writes `text` to `path` through a temporary file renamed over it.
fn write_atomically(path: &Path, text: &[u8]) -> std::io::Result<()> {
    let temp = path.with_extension("tmp-manifest");
    let mut f = std::fs::File::create(&temp)?;
    f.write_all(text)?;
    f.sync_all()?;
    std::fs::rename(&temp, path)?;
    if let Some(dir) = path.parent()
        && let Ok(d) = std::fs::File::open(dir)
    {
        let _ = d.sync_all();
    }
    Ok(())
}

fn open_append(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new().create(true).append(true).open(path)
}

/// One command of an AOF: its arguments, or why the file is damaged at
/// `at` (truncated, or not RESP).
enum Parsed {
    Command(Vec<Bytes>, usize),
    Truncated,
    Bad,
    End,
}

/// Reads the command starting at `at` (Redis's `loadSingleAppendOnlyFile`:
/// multibulk arrays only; `#` lines are annotations).
fn parse_command(buf: &[u8], mut at: usize) -> Parsed {
    loop {
        if at >= buf.len() {
            return Parsed::End;
        }
        if buf[at] != b'#' {
            break;
        }
        match buf[at..].iter().position(|&b| b == b'\n') {
            Some(n) => at += n + 1,
            None => return Parsed::Truncated,
        }
    }
    // A count line: None while its CRLF has not come, Err if it holds no
    // number.
    let line = |at: usize| -> Option<Result<(i64, usize), ()>> {
        let end = buf[at..].windows(2).position(|w| w == b"\r\n")? + at;
        Some(crate::numfmt::parse_i64(&buf[at + 1..end]).map(|n| (n, end + 2)).ok_or(()))
    };
    if buf[at] != b'*' {
        return Parsed::Bad;
    }
    let (argc, mut at) = match line(at) {
        None => return Parsed::Truncated,
        Some(Err(())) => return Parsed::Bad,
        Some(Ok(line)) => line,
    };
    if argc < 1 {
        return Parsed::Bad;
    }
    // Each argument takes at least `$0\r\n\r\n`: a count the rest of the
    // file cannot hold is not believed for the allocation.
    let mut argv = Vec::with_capacity((argc as usize).min((buf.len() - at) / 6));
    for _ in 0..argc {
        if at >= buf.len() {
            return Parsed::Truncated;
        }
        if buf[at] != b'$' {
            return Parsed::Bad;
        }
        let (len, start) = match line(at) {
            None => return Parsed::Truncated,
            Some(Err(())) => return Parsed::Bad,
            Some(Ok(line)) => line,
        };
        let end = start + len.max(0) as usize;
        if end + 2 > buf.len() {
            return Parsed::Truncated;
        }
        argv.push(Bytes::copy_from_slice(&buf[start..end]));
        at = end + 2;
    }
    Parsed::Command(argv, at)
}

/// The command of a replication stream starting at `at`, with where the
/// next starts; None while it is incomplete. Empty lines (a master's
/// keep-alive newlines) are skipped.
pub fn parse_stream_command(buf: &[u8], mut at: usize) -> Result<Option<(Vec<Bytes>, usize)>, String> {
    loop {
        let rest = &buf[at.min(buf.len())..];
        // Keep-alive newlines, and empty arrays (Redis skips them).
        let skip = [&b"\n"[..], b"\r\n", b"*0\r\n", b"*-1\r\n"]
            .into_iter()
            .find(|s| rest.starts_with(s));
        match skip {
            Some(s) => at += s.len(),
            None => break,
        }
    }
    if at < buf.len() && buf[at] == b'#' {
        return Err("not a RESP array of bulk strings".into());
    }
    match parse_command(buf, at) {
        Parsed::Command(argv, next) => Ok(Some((argv, next))),
        Parsed::End | Parsed::Truncated => Ok(None),
        Parsed::Bad => Err("not a RESP array of bulk strings".into()),
    }
}

/// The commands of a stream of RESP arrays (an AOF's, or the effects of a
/// Raft entry).
pub fn parse_commands(buf: &[u8]) -> Result<Vec<Vec<Bytes>>, String> {
    let mut commands = Vec::new();
    let mut at = 0;
    loop {
        match parse_command(buf, at) {
            Parsed::Command(argv, next) => {
                commands.push(argv);
                at = next;
            }
            Parsed::End => return Ok(commands),
            Parsed::Truncated => return Err("a command is cut short".into()),
            Parsed::Bad => return Err("not a RESP array of bulk strings".into()),
        }
    }
}

impl State {
    /// Whether the append-only file is on.
    pub fn aof_on(&self) -> bool {
        self.aof.is_some()
    }

    /// Writes what the effect stream handed over to the incremental file,
    /// as Redis's `flushAppendOnlyFile`; with `appendfsync always`, asks
    /// for a sync that the batch's replies wait for (see
    /// [`super::durable`]). Called after every batch and by the cron. A
    /// failed write is cut off the file and tried again later, the data
    /// kept; with `always` it ends the process, as in Redis.
    pub fn aof_write(&mut self) {
        let durability = self.durability.clone();
        let Some(aof) = self.aof.as_mut() else { return };
        if aof.fsync == Fsync::Always
            && let Some(errno) = durability.sync_error()
        {
            fatal_always(&format!(
                "Can't persist AOF for fsync error when the AOF fsync policy is 'always': {}. Exiting...",
                crate::error::errno_text(errno)
            ));
        }
        let data = std::mem::take(&mut *aof.pending.lock().unwrap_or_else(|e| e.into_inner()));
        if data.is_empty() {
            return;
        }
        // Everything recorded is in `data` (the stream records on this
        // thread only).
        let recorded = durability.recorded();
        match write_fully(&aof.file, &data) {
            Ok(()) => {
                aof.current_size += data.len() as u64;
                aof.incr_size += data.len() as u64;
                if aof.write_error.take().is_some() {
                    crate::log::warning(format_args!("AOF write error looks solved, Redis can write again."));
                }
            }
            Err((written, e)) => {
                let errno = if written == 0 {
                    crate::log::warning(format_args!("Error writing to the AOF file: {}", os_error_text(&e)));
                    e.raw_os_error().unwrap_or(libc::EIO)
                } else {
                    crate::log::warning(format_args!(
                        "Short write while writing to the AOF file: (nwritten={written}, expected={})",
                        data.len()
                    ));
                    libc::ENOSPC
                };
                if aof.fsync == Fsync::Always {
                    fatal_always("Can't recover from AOF write error when the AOF fsync policy is 'always'. Exiting...");
                }
                // Cut the part written off, and keep all of it for the
                // next try.
                if written > 0
                    && let Err(e) = aof.file.set_len(aof.incr_size)
                {
                    crate::log::warning(format_args!(
                        "Could not remove short write from the append-only file.  Redis may refuse to load the AOF the next time it starts.  ftruncate: {}",
                        os_error_text(&e)
                    ));
                }
                let mut pending = aof.pending.lock().unwrap_or_else(|e| e.into_inner());
                let newer = std::mem::replace(&mut *pending, data);
                pending.extend_from_slice(&newer);
                aof.write_error = Some(errno);
                // As Redis, the replies go (writes are refused from now on
                // with MISCONF until the file takes the data again).
                durability.written_to(recorded);
                return;
            }
        }
        durability.written_to(recorded);
        if aof.fsync == Fsync::Always {
            aof.syncer.request(&aof.file, recorded);
            aof.last_sync = Instant::now();
        }
    }

    /// A base is an RDB snapshot (`aof-use-rdb-preamble yes`, the default)
    /// or commands.
    fn base_extension(&self) -> &'static str {
        if self.params.value("aof-use-rdb-preamble") == Some("no") {
            "aof"
        } else {
            "rdb"
        }
    }

    /// Writes an append-only file's base at `path`, through a temporary
    /// file synced and renamed over it.
    fn write_base_to(&self, path: &Path, codes: &[Bytes]) -> std::io::Result<()> {
        if self.base_extension() == "rdb" {
            return self.write_snapshot_to(path, codes, true);
        }
        let temp = path.with_extension("tmp-base");
        let result = (|| {
            let mut out = std::io::BufWriter::with_capacity(1 << 16, std::fs::File::create(&temp)?);
            self.write_commands(&mut out, codes)?;
            out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
            std::fs::rename(&temp, path)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        result
    }

    /// Why writes are refused (Redis's `writeCommandsDeniedByDiskError`):
    /// the last background save failed while save points are set and
    /// `stop-writes-on-bgsave-error` is on, or the append-only file cannot
    /// be written or synced.
    pub fn disk_error(&self) -> Option<DiskError> {
        if !self.persistence.last_bgsave_ok
            && self.params.value("stop-writes-on-bgsave-error") == Some("yes")
            && self.params.value("save").is_some_and(|s| !s.trim().is_empty())
        {
            return Some(DiskError::Rdb);
        }
        let aof = self.aof.as_ref()?;
        aof.write_error.or_else(|| self.durability.sync_error()).map(DiskError::Aof)
    }

    /// The cron's part: writes what is pending, syncs once a second with
    /// `everysec` (on a thread of its own), accounts for a rewrite that
    /// ended, and starts one when the file grew past
    /// `auto-aof-rewrite-percentage`.
    pub fn aof_cron(&mut self, codes: impl FnOnce() -> Vec<Bytes>) {
        self.aof_write();
        if let Some(aof) = self.aof.as_mut()
            && aof.fsync == Fsync::EverySec
            && aof.last_sync.elapsed().as_millis() >= 1000
        {
            aof.last_sync = Instant::now();
            aof.syncer.request(&aof.file, self.durability.recorded());
        }
        if let Some(rewrite) = &self.aof_rewrites.running {
            let mut status = 0;
            // SAFETY: waits without blocking for this process's own child.
            let done = unsafe { libc::waitpid(rewrite.pid, &mut status, libc::WNOHANG) };
            if done == rewrite.pid || done < 0 {
                let ok = done == rewrite.pid && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
                self.rewrite_done(ok);
            }
            return;
        }
        if self.aof_rewrites.scheduled && !self.rdb_child_active() {
            self.aof_rewrites.scheduled = false;
            let _ = self.bgrewriteaof(&codes());
            return;
        }
        let percentage = self.params.int("auto-aof-rewrite-percentage").unwrap_or(100);
        let min_size = self.params.int("auto-aof-rewrite-min-size").unwrap_or(64 << 20).max(0) as u64;
        let Some(aof) = self.aof.as_ref() else { return };
        let size = aof.current_size + aof.base_size;
        if percentage > 0 && !self.rdb_child_active() && size > min_size {
            let base = aof.rewrite_base_size.max(1);
            let growth = (size.saturating_sub(base) * 100 / base) as i64;
            if growth >= percentage {
                crate::log::notice(format_args!("Starting automatic rewriting of AOF on {growth}% growth"));
                let _ = self.bgrewriteaof(&codes());
            }
        }
    }

    /// Turns the append-only file on. At start (`fresh` false) the files
    /// found were loaded (see `Engine::load_aof`) and writes go on in the
    /// last incremental file; without files, and always when turned on at
    /// run time (`fresh`: CONFIG SET appendonly yes), the dataset is
    /// written now as a new base, an empty incremental file follows it,
    /// and the files of before are removed.
    pub fn start_aof(&mut self, codes: &[Bytes], fresh: bool) -> Result<(), String> {
        if self.aof.is_some() {
            return Ok(());
        }
        // A rewrite made while the AOF was off is overtaken by the new base.
        self.kill_aof_rewrite();
        let dir = aof_dir(self);
        let basename = self.params.value("appendfilename").unwrap_or("appendonly.aof").to_string();
        std::fs::create_dir_all(&dir).map_err(|e| format!("Can't open the append-only file: {}", os_error_text(&e)))?;
        let manifest_path = dir.join(manifest_name(&basename));
        let mut manifest = match std::fs::read_to_string(&manifest_path) {
            Ok(text) => Manifest::parse(&text)?,
            Err(_) => Manifest::default(),
        };
        let mut base_size = manifest
            .base()
            .and_then(|b| std::fs::metadata(dir.join(&b.name)).ok())
            .map_or(0, |m| m.len());
        if fresh || (manifest.base().is_none() && manifest.incrs().next().is_none()) {
            // The dataset as it is becomes the base.
            let base = Part {
                name: format!("{basename}.{}.base.{}", manifest.next_base_seq(), self.base_extension()),
                seq: manifest.next_base_seq(),
                kind: 'b',
            };
            let incr_seq = manifest.next_incr_seq();
            self.write_base_to(&dir.join(&base.name), codes)
                .map_err(|e| format!("Can't write the AOF base: {}", os_error_text(&e)))?;
            base_size = std::fs::metadata(dir.join(&base.name)).map_or(0, |m| m.len());
            let old = std::mem::take(&mut manifest.parts);
            manifest.parts.push(base);
            manifest.parts.push(Part {
                name: format!("{basename}.{incr_seq}.incr.aof"),
                seq: incr_seq,
                kind: 'i',
            });
            write_atomically(&manifest_path, manifest.text().as_bytes()).map_err(|e| os_error_text(&e))?;
            for part in old {
                let _ = std::fs::remove_file(dir.join(&part.name));
            }
        }
        let incr = match manifest.incrs().last() {
            Some(last) => last.clone(),
            None => {
                let part = Part {
                    name: format!("{basename}.{}.incr.aof", manifest.next_incr_seq()),
                    seq: manifest.next_incr_seq(),
                    kind: 'i',
                };
                manifest.parts.push(part.clone());
                part
            }
        };
        let file = open_append(&dir.join(&incr.name)).map_err(|e| format!("Can't open the append-only file: {}", os_error_text(&e)))?;
        let incr_size = file.metadata().map_or(0, |m| m.len());
        write_atomically(&manifest_path, manifest.text().as_bytes()).map_err(|e| os_error_text(&e))?;
        let current_size: u64 = manifest
            .incrs()
            .filter_map(|p| std::fs::metadata(dir.join(&p.name)).ok())
            .map(|m| m.len())
            .sum();
        let pending = Arc::new(Mutex::new(Vec::new()));
        let tap_buffer = pending.clone();
        let durability = self.durability.clone();
        let stamps = Arc::new(Stamps::default());
        let tap_stamps = stamps.clone();
        let clock = self.clock.clone();
        self.attach_effects(EffectsTap::aof(move |bytes| {
            let mut pending = tap_buffer.lock().unwrap_or_else(|e| e.into_inner());
            let before = pending.len();
            tap_stamps.annotate(&mut pending, clock.now_ms() / 1000);
            pending.extend_from_slice(bytes);
            durability.record(pending.len() - before);
        }));
        let fsync = Fsync::of(self.params.value("appendfsync"));
        self.durability.set_wait(fsync.wait());
        self.aof = Some(Aof {
            dir,
            basename,
            manifest,
            file: Arc::new(file),
            stamps,
            incr_size,
            pending,
            fsync,
            syncer: Syncer::start(self.durability.clone()),
            last_sync: Instant::now(),
            write_error: None,
            current_size,
            base_size,
            rewrite_base_size: current_size + base_size,
        });
        self.aof_settings_changed();
        Ok(())
    }

    /// Turns the append-only file off (CONFIG SET appendonly no): what is
    /// pending is written and synced first.
    pub fn stop_aof(&mut self) {
        self.aof_write();
        self.kill_aof_rewrite();
        self.aof_sync_now();
        self.durability.set_wait(super::durable::Wait::Nothing);
        if self.aof.take().is_some() {
            self.detach_aof_effects();
        }
    }

    /// At shutdown: everything written and synced.
    pub fn aof_close(&mut self) {
        self.aof_write();
        self.kill_aof_rewrite();
        self.aof_sync_now();
    }

    /// Syncs the file here and now (the engine waits for it), so that
    /// every reply waiting for the disk may go.
    pub fn aof_sync_now(&mut self) {
        if let Some(aof) = self.aof.as_ref()
            && aof.file.sync_data().is_ok()
            && aof.pending.lock().unwrap_or_else(|e| e.into_inner()).is_empty()
        {
            self.durability.synced_all();
        }
    }

    /// The AOF's `appendfsync` follows CONFIG SET.
    pub fn aof_settings_changed(&mut self) {
        let fsync = Fsync::of(self.params.value("appendfsync"));
        let stamped = self.params.value("aof-timestamp-enabled") == Some("yes");
        if let Some(aof) = self.aof.as_mut() {
            aof.fsync = fsync;
            aof.stamps.enabled.store(stamped, std::sync::atomic::Ordering::Relaxed);
            self.durability.set_wait(fsync.wait());
        }
    }

    /// BGREWRITEAOF: a child writes the dataset as a new base while writes
    /// go on to a new incremental file.
    pub fn bgrewriteaof(&mut self, codes: &[Bytes]) -> Result<(), String> {
        if self.aof_rewrites.running.is_some() {
            return Err("Background append only file rewriting already in progress".into());
        }
        if self.rdb_child_active() {
            return Err("child in progress".into());
        }
        self.aof_write();
        let extension = self.base_extension();
        let Some(aof) = self.aof.as_mut() else {
            return self.rewrite_while_off(codes);
        };
        // The new incremental file starts now, with a SELECT of its own.
        let incr = Part {
            name: format!("{}.{}.incr.aof", aof.basename, aof.manifest.next_incr_seq()),
            seq: aof.manifest.next_incr_seq(),
            kind: 'i',
        };
        let base = Part {
            name: format!("{}.{}.base.{}", aof.basename, aof.manifest.next_base_seq(), extension),
            seq: aof.manifest.next_base_seq(),
            kind: 'b',
        };
        let file = open_append(&aof.dir.join(&incr.name)).map_err(|e| os_error_text(&e))?;
        self.aof_sync_now();
        let Some(aof) = self.aof.as_mut() else { return Ok(()) };
        aof.file = Arc::new(file);
        aof.incr_size = 0;
        aof.manifest.parts.push(incr);
        write_atomically(&aof.dir.join(manifest_name(&aof.basename)), aof.manifest.text().as_bytes()).map_err(|e| os_error_text(&e))?;
        let dir = aof.dir.clone();
        self.restart_aof_stream();
        self.fork_rewrite(dir, base, codes)
    }

    /// BGREWRITEAOF with `appendonly no`, as Redis: a child writes the
    /// dataset as a new base, and the manifest then names it alone.
    fn rewrite_while_off(&mut self, codes: &[Bytes]) -> Result<(), String> {
        let dir = aof_dir(self);
        let basename = self.params.value("appendfilename").unwrap_or("appendonly.aof").to_string();
        std::fs::create_dir_all(&dir).map_err(|e| os_error_text(&e))?;
        let manifest = match std::fs::read_to_string(dir.join(manifest_name(&basename))) {
            Ok(text) => Manifest::parse(&text)?,
            Err(_) => Manifest::default(),
        };
        let base = Part {
            name: format!("{basename}.{}.base.{}", manifest.next_base_seq(), self.base_extension()),
            seq: manifest.next_base_seq(),
            kind: 'b',
        };
        self.fork_rewrite(dir, base, codes)
    }

    /// Forks the child that writes `base` in `dir` from its copy of memory.
    fn fork_rewrite(&mut self, dir: PathBuf, base: Part, codes: &[Bytes]) -> Result<(), String> {
        let base_path = dir.join(&base.name);
        super::persistence::before_fork();
        // SAFETY: as BGSAVE's fork (see `persistence`): the child writes
        // the base from its copy of memory and leaves with `_exit`.
        let pid = unsafe { libc::fork() };
        self.persistence.forks += u64::from(pid > 0);
        if pid == 0 {
            super::persistence::child_exit(|| self.write_base_to(&base_path, codes));
        }
        if pid < 0 {
            return Err(format!("fork: {}", os_error_text(&std::io::Error::last_os_error())));
        }
        crate::log::notice(format_args!("Background append only file rewriting started by pid {pid}"));
        self.aof_rewrites.running = Some(Rewrite {
            pid,
            started: Instant::now(),
            base,
            dir,
        });
        Ok(())
    }

    /// A rewrite's child ended: on success the manifest names the new base
    /// and the incremental files since it, and the old files go.
    fn rewrite_done(&mut self, ok: bool) {
        let stats = &mut self.aof_rewrites;
        let Some(rewrite) = stats.running.take() else { return };
        stats.last_secs = rewrite.started.elapsed().as_secs() as i64;
        stats.last_ok = ok;
        if !ok {
            stats.failures += 1;
            crate::log::warning(format_args!("Background AOF rewrite terminated with error"));
            let _ = std::fs::remove_file(rewrite.dir.join(&rewrite.base.name));
            return;
        }
        let Some(aof) = self.aof.as_mut() else {
            // The AOF is off: the manifest names the new base alone.
            let basename = self.params.value("appendfilename").unwrap_or("appendonly.aof").to_string();
            let path = rewrite.dir.join(manifest_name(&basename));
            let old = std::fs::read_to_string(&path)
                .ok()
                .and_then(|t| Manifest::parse(&t).ok())
                .unwrap_or_default();
            let manifest = Manifest {
                parts: vec![rewrite.base.clone()],
            };
            if let Err(e) = write_atomically(&path, manifest.text().as_bytes()) {
                crate::log::warning(format_args!(
                    "Error trying to rename the temporary AOF manifest file: {}",
                    os_error_text(&e)
                ));
                self.aof_rewrites.last_ok = false;
                return;
            }
            for part in old.parts.iter().filter(|p| p.name != rewrite.base.name) {
                let _ = std::fs::remove_file(rewrite.dir.join(&part.name));
            }
            self.aof_rewrites.done += 1;
            self.aof_rewrites.failures = 0;
            crate::log::notice(format_args!("Background AOF rewrite finished successfully"));
            return;
        };
        let current = aof.manifest.incrs().last().cloned();
        let old: Vec<Part> = aof
            .manifest
            .parts
            .iter()
            .filter(|p| Some(*p) != current.as_ref())
            .cloned()
            .collect();
        let mut manifest = Manifest {
            parts: vec![rewrite.base.clone()],
        };
        manifest.parts.extend(current);
        if let Err(e) = write_atomically(&aof.dir.join(manifest_name(&aof.basename)), manifest.text().as_bytes()) {
            crate::log::warning(format_args!(
                "Error trying to rename the temporary AOF manifest file: {}",
                os_error_text(&e)
            ));
            self.aof_rewrites.last_ok = false;
            return;
        }
        for part in old {
            let _ = std::fs::remove_file(aof.dir.join(&part.name));
        }
        aof.manifest = manifest;
        aof.base_size = std::fs::metadata(aof.dir.join(&rewrite.base.name)).map_or(0, |m| m.len());
        aof.current_size = aof
            .manifest
            .incrs()
            .filter_map(|p| std::fs::metadata(aof.dir.join(&p.name)).ok())
            .map(|m| m.len())
            .sum();
        aof.rewrite_base_size = aof.base_size + aof.current_size;
        self.aof_rewrites.done += 1;
        self.aof_rewrites.failures = 0;
        crate::log::notice(format_args!("Background AOF rewrite finished successfully"));
    }

    fn kill_aof_rewrite(&mut self) {
        if let Some(rewrite) = self.aof_rewrites.running.take() {
            // SAFETY: signals and reaps this process's own child.
            unsafe {
                libc::kill(rewrite.pid, libc::SIGUSR1);
                let mut status = 0;
                libc::waitpid(rewrite.pid, &mut status, 0);
            }
            let _ = std::fs::remove_file(rewrite.dir.join(&rewrite.base.name));
        }
    }

    /// Reads the files the manifest names: the base, then the incremental
    /// files in order. None when there is no manifest.
    pub fn read_aof(&self) -> Result<Option<AofFiles>, String> {
        let dir = aof_dir(self);
        let basename = self.params.value("appendfilename").unwrap_or("appendonly.aof").to_string();
        let text = match std::fs::read_to_string(dir.join(manifest_name(&basename))) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(os_error_text(&e)),
        };
        let manifest = Manifest::parse(&text)?;
        let mut files = AofFiles::default();
        if let Some(base) = manifest.base() {
            let bytes = std::fs::read(dir.join(&base.name)).map_err(|e| format!("{}: {}", base.name, os_error_text(&e)))?;
            files.base = Some((base.name.clone(), bytes));
        }
        for part in manifest.incrs() {
            let path = dir.join(&part.name);
            let bytes = std::fs::read(&path).map_err(|e| format!("{}: {}", part.name, os_error_text(&e)))?;
            files.incrs.push((path, bytes));
        }
        Ok(Some(files))
    }
}

/// The files of an append-only file, read.
#[derive(Default)]
pub struct AofFiles {
    /// The base's name and bytes.
    pub base: Option<(String, Vec<u8>)>,
    /// Each incremental file's path and bytes, in order.
    pub incrs: Vec<(PathBuf, Vec<u8>)>,
}

/// Splits an incremental file into its commands. A truncated last command
/// is cut off (the file truncated to what loads) when `truncated_ok`;
/// otherwise, and for anything that is not RESP, the error Redis logs.
pub fn commands(path: &Path, bytes: &[u8], truncated_ok: bool, last_file: bool) -> Result<Vec<Vec<Bytes>>, String> {
    let mut at = 0;
    let mut out = Vec::new();
    loop {
        match parse_command(bytes, at) {
            Parsed::End => return Ok(out),
            Parsed::Command(argv, next) => {
                out.push(argv);
                at = next;
            }
            Parsed::Truncated if truncated_ok && last_file => {
                crate::log::warning(format_args!(
                    "!!! Warning: short read while loading the AOF file {}!!!",
                    path.file_name().map_or(String::new(), |n| n.to_string_lossy().into_owned())
                ));
                crate::log::warning(format_args!(
                    "!!! Truncating the AOF {} at offset {at} !!!",
                    path.file_name().map_or(String::new(), |n| n.to_string_lossy().into_owned())
                ));
                if let Ok(f) = std::fs::OpenOptions::new().write(true).open(path) {
                    let _ = f.set_len(at as u64);
                }
                crate::log::warning(format_args!(
                    "AOF {} loaded anyway because aof-load-truncated is enabled",
                    path.display()
                ));
                return Ok(out);
            }
            Parsed::Truncated => {
                crate::log::warning(format_args!(
                    "The append only file {} ends in the middle of a command at offset {at}",
                    path.display()
                ));
                return Err(format!(
                    "Unexpected end of file reading the append only file {}. You can: 1) Make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>. 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server.",
                    path.display()
                ));
            }
            Parsed::Bad => {
                crate::log::warning(format_args!("The append only file {} is not valid at offset {at}", path.display()));
                return Err(format!(
                    "Bad file format reading the append only file {}: make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>",
                    path.display()
                ));
            }
        }
    }
}

/// `aof-timestamp-enabled`: a `#TS:<unix seconds>` line before the first
/// record of each second, as Redis writes it (loading skips it).
#[derive(Debug, Default)]
struct Stamps {
    enabled: std::sync::atomic::AtomicBool,
    /// The second of the last annotation.
    last: std::sync::atomic::AtomicU64,
}

impl Stamps {
    fn annotate(&self, out: &mut Vec<u8>, now_secs: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        if self.enabled.load(Relaxed) && self.last.load(Relaxed) < now_secs {
            self.last.store(now_secs, Relaxed);
            out.extend_from_slice(format!("#TS:{now_secs}\r\n").as_bytes());
        }
    }
}

/// Why writes are refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskError {
    /// The last background save failed.
    Rdb,
    /// Writing or syncing the append-only file failed with this errno.
    Aof(i32),
}

impl DiskError {
    /// The error writes get (Redis's `writeCommandsGetDiskErrorMessage`).
    pub fn message(self) -> String {
        match self {
            DiskError::Rdb => "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.".into(),
            DiskError::Aof(errno) => format!("MISCONF Errors writing to the AOF file: {}", crate::error::errno_text(errno)),
        }
    }
}

/// Writes all of `data`, or says how much was written before the error.
fn write_fully(mut file: &std::fs::File, data: &[u8]) -> Result<(), (usize, std::io::Error)> {
    let mut written = 0;
    while written < data.len() {
        match file.write(&data[written..]) {
            Ok(0) => return Err((written, std::io::Error::from_raw_os_error(libc::ENOSPC))),
            Ok(n) => written += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err((written, e)),
        }
    }
    Ok(())
}

/// With `appendfsync always` a write that cannot reach the disk ends the
/// process, as in Redis: no reply waiting for it is ever sent.
fn fatal_always(line: &str) -> ! {
    crate::log::warning(format_args!("{line}"));
    std::process::exit(1);
}

impl State {
    /// Adds the append-only file's consumer to the effect stream.
    fn attach_effects(&mut self, tap: EffectsTap) {
        self.key_events.record_expired_deletions();
        self.aof_tap = Some(self.effects.attach(tap));
    }

    fn detach_aof_effects(&mut self) {
        if let Some(id) = self.aof_tap.take() {
            self.effects.detach(id);
        }
    }

    /// The append-only file's stream starts again (a new incremental file):
    /// its first effect comes after a SELECT.
    fn restart_aof_stream(&mut self) {
        if let Some(id) = self.aof_tap {
            self.effects.reselect(id);
        }
    }
}

impl super::Engine {
    /// At start, with `appendonly yes`: the append-only file found is
    /// loaded (its base, then every incremental file replayed through the
    /// command pipeline), then writes are appended to it. The error is
    /// Redis's reason to exit.
    pub fn load_aof(&mut self) -> Result<(), String> {
        if self.state.params.value("appendonly") != Some("yes") {
            return Ok(());
        }
        let started = Instant::now();
        if load_files(&mut self.state, &mut self.scripts)? {
            crate::log::notice(format_args!(
                "DB loaded from append only file: {:.3} seconds",
                started.elapsed().as_secs_f64()
            ));
        }
        let codes = self.scripts.library_codes();
        self.state.start_aof(&codes, false)
    }
}

/// Loads the append-only file on disk into the (empty) dataset: its base
/// (an RDB snapshot, or commands), then every incremental file replayed.
/// False when there is none.
fn load_files(state: &mut State, scripts: &mut super::Scripts) -> Result<bool, String> {
    let Some(files) = state.read_aof()? else { return Ok(false) };
    let total = files.base.as_ref().map_or(0, |b| b.1.len()) + files.incrs.iter().map(|i| i.1.len()).sum::<usize>();
    state.start_loading(total as u64);
    let result = load_parts(state, scripts, files);
    state.loading = None;
    result.map(|()| true)
}

fn load_parts(state: &mut State, scripts: &mut super::Scripts, files: AofFiles) -> Result<(), String> {
    if let Some((name, bytes)) = files.base {
        if bytes.starts_with(b"REDIS") {
            let options = super::persistence::decode_options(&state.params);
            // Keys past their deadline are kept, as Redis keeps them in an
            // AOF preamble (`RDBFLAGS_AOF_PREAMBLE`): the commands that
            // follow ran while they were live.
            let databases = state.dbs.len();
            let loaded = crate::rdb::file::read_with_progress(&bytes, databases, &options, 0, &mut |at| state.loading_progress(at))
                .map_err(|e| format!("{name}: {} (at offset {})", e.0, e.1))?;
            let libraries = state.install(loaded);
            scripts.load_libraries(libraries);
        } else {
            replay(state, scripts, commands(Path::new(&name), &bytes, false, false)?, AOF_CLIENT)?;
        }
        state.loading_next_file();
    }
    let truncated_ok = state.params.value("aof-load-truncated") != Some("no");
    let last = files.incrs.len();
    for (i, (path, bytes)) in files.incrs.iter().enumerate() {
        replay(state, scripts, commands(path, bytes, truncated_ok, i + 1 == last)?, AOF_CLIENT)?;
        state.loading_next_file();
    }
    Ok(())
}

/// Who a file's replay answers, in the logs.
const AOF_CLIENT: &str = "AOF-loading-client";

/// Runs an append-only file's commands as a client with no connection
/// would (Redis's fake AOF client): its transactions are queued and run
/// at their EXEC (one cut short at the end of the file never runs), no
/// user's permissions apply, and what they do is no effect (it is what
/// the effects were). Keys past their deadline are live meanwhile, as
/// they were when the commands first ran (Redis expires nothing while it
/// loads); they expire once the replay is over. An error reply is logged
/// as sent to `to` (Redis's `AOF-loading-client`).
pub fn replay(state: &mut State, scripts: &mut super::Scripts, commands: Vec<Vec<Bytes>>, to: &str) -> Result<(), String> {
    let mut client = super::Client::script_client();
    client.is_script = false;
    client.authenticated = true;
    client.replaying = true;
    // The users stay aside while the file runs: the AOF client is no user.
    let mut users = std::mem::take(&mut state.acl);
    // The file holds commands under their own names, whatever
    // `rename-command` calls them for clients.
    let mut renames = std::mem::take(&mut state.renames);
    state.effects.suspend(true);
    let ignored_deadlines = state.dbs[0].ignores_deadlines();
    state.dbs[0].ignore_deadlines(true);
    let mut result = Ok(());
    // Bytes read so far, as the file holds them (for the load's progress).
    let mut read = 0;
    for argv in commands {
        let found = super::exec::lookup(&state.renames, &argv);
        if let super::exec::Lookup::Unknown = found {
            result = Err(format!(
                "Unknown command '{}' reading the append only file",
                String::from_utf8_lossy(&argv[0])
            ));
            break;
        }
        read += argv.iter().map(|a| a.len() + 16).sum::<usize>() + 16;
        // The file's own commands are not refused as loading.
        let loading = state.loading.take();
        let reply = super::exec::dispatch(state, Some(scripts), &mut client, argv);
        state.loading = loading;
        state.unexpected_errors("server", to, &reply, found.full_name());
        if state.loading.is_some() {
            // Other clients are served under their users' permissions.
            std::mem::swap(&mut state.acl, &mut users);
            std::mem::swap(&mut state.renames, &mut renames);
            let go_on = state.loading_progress(read);
            std::mem::swap(&mut state.acl, &mut users);
            std::mem::swap(&mut state.renames, &mut renames);
            if !go_on {
                result = Err("Loading stopped".into());
                break;
            }
        }
    }
    state.effects.suspend(false);
    state.dbs[0].ignore_deadlines(ignored_deadlines);
    state.acl = users;
    state.renames = renames;
    result
}

/// DEBUG LOADAOF: the dataset and functions emptied and loaded back from
/// the append-only file on disk (written and synced first when it is on).
pub fn debug_loadaof(state: &mut State, scripts: &mut super::Scripts) -> Result<(), String> {
    state.aof_write();
    state.aof_sync_now();
    for db in &mut state.dbs {
        db.clear();
    }
    let limit = state.runtime.lua_memory_limit;
    scripts.reset_functions(limit).map_err(|e| format!("{e:?}"))?;
    load_files(state, scripts)?;
    crate::log::warning(format_args!("Append Only File loaded by DEBUG LOADAOF"));
    Ok(())
}
