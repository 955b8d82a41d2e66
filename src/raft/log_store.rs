//! The Raft log and vote of one member, on disk in `dir/raft/`:
//!
//! - `log`, `log.1`, `log.2`…: the entries, appended as records `[u32
//!   length][u32 CRC32C][bincode entry]` to the last of these segments
//!   (a new one once it holds [`SEGMENT_BYTES`]); a record cut short or
//!   damaged at the end (a crash mid-write), or entries after a gap (a
//!   segment lost), are cut off at start. A
//!   snapshot's purge deletes the segments whose entries it holds, so it
//!   never rewrites the log (a rewrite of the entries kept blocked the
//!   Raft thread for seconds with large entries, long enough for the
//!   others to elect another leader);
//! - `vote`: the vote, replaced atomically (temporary file, sync, rename);
//! - `committed`: the last committed log id, a hint that lets a restarted
//!   member rebuild its dataset from its own log at once; a record
//!   `[u32 length][u32 CRC32C][bincode log id]` written in place, not
//!   synced (a hint that is stale, or lost to a crash, only makes the
//!   member wait for the leader to say what is committed).
//!
//! How an append counts as stored is the member's `raft-fsync` ([`Fsync`]),
//! after Redis's `appendfsync`. With `always` (the default), the rest of
//! this paragraph and the next: appends are written at once and synced
//! (`fdatasync`) on a thread of their own, which syncs every append
//! queued meanwhile at once. A
//! follower's append is reported stored once it is synced, so that the
//! follower counts towards a commit only with the entry on its disk. The
//! leader's own entries are reported stored at once, so that openraft
//! sends them to the followers while the leader's disk syncs them, not
//! after (Raft allows the leader to write its own disk in parallel with
//! replicating). openraft then counts the leader towards a commit before
//! its sync. That is made safe by holding back whatever the commit
//! would tell before the leader's sync:
//! - the leader applies an entry, and so releases its replies, only once
//!   its own sync has it ([`LogStore::wait_synced`]): a client is told of
//!   a write only when a majority (the leader and a follower) hold it;
//! - the commit index the leader sends to followers, and its committed
//!   hint, never pass its own synced entries ([`LogStore::durable_commit`]):
//!   no follower applies an entry that only one disk holds.
//!
//! If the leader's machine then crashed before its sync, the entry might
//! be lost (a new majority without it), but no client was told of it and
//! no member applied it. A failed sync of an entry reported stored ends
//! the process, as Redis does when its `appendfsync` fails.
//!
//! With `everysec` or `no`, an append counts as stored once it is written
//! to the file (the operating system holds it): a member whose process is
//! killed keeps it, but one whose machine stops before the data reaches
//! the disk may lose its last entries and still vote, so a single machine
//! crash can lose an acknowledged write (the member that lost it and one
//! that never had it elect a leader while the third is away), as a Redis
//! master and replica that acknowledged a WAIT can lose it. `everysec`
//! syncs the file once a second on the sync thread (a failed sync ends
//! the process, as with `always`), `no` leaves it to the system. The
//! committed hint is kept within what the log holds at start (see
//! `hint_within_log`).
//!
//! The vote is synced before it is used, whatever `raft-fsync` says.
//!
//! In memory, the log keeps every entry's id and where its record is, and
//! the last entries themselves, as many as `raft-log-memory` bytes of
//! entries hold (64 MB unless set): the replication streams and the
//! apply read the newest entries, and an older one (for a follower far
//! behind) is read back from its segment, on the Raft thread, under the
//! log's lock (one AppendEntries request reads at most 1 MB). A member
//! that reads back the entries it replays at start, or sends a follower
//! far behind, holds those too while it uses them. An entry that cannot
//! be read back (its record damaged) stops the member's Raft, and the
//! member exits. Entries were all kept in memory
//! before: with pipelined lock cycles an entry is 80 to 90 kB, and the
//! ten thousand entries between snapshots took close to a gigabyte per
//! member, counted in `used_memory` as the dataset is.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{AnyError, ErrorSubject, ErrorVerb, LogState, OptionalSend, RaftLogReader, StorageIOError, Vote};

use super::{Entry, LogId, NodeId, StorageError, TypeConfig};

/// CRC-32C, sliced by 16 (several times the speed of one table on this
/// project's machine; every entry a member appends is checksummed).
const CRC32C: crc::Crc<u32, crc::Table<16>> = crc::Crc::<u32, crc::Table<16>>::new(&crc::CRC_32_ISCSI);

/// When an append counts as stored (`raft-fsync`, see the module
/// documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fsync {
    /// Once `fdatasync` has it.
    #[default]
    Always,
    /// Once written; the file is synced once a second.
    EverySec,
    /// Once written; the system syncs the file when it will.
    No,
}

#[derive(Debug)]
struct Inner {
    dir: PathBuf,
    /// The last segment, where appends go, and its number.
    file: File,
    segment: u64,
    /// The segments on disk, in order (the last is `segment`), and how
    /// long one grows ([`SEGMENT_BYTES`]; less in tests).
    segments: Vec<u64>,
    segment_bytes: u64,
    /// The entries, as memory holds them.
    log: Entries,
    /// What INFO shows (shared with [`LogStore::stats`]).
    stats: Arc<LogStats>,
    /// Where the next record goes in the last segment.
    end: u64,
    /// The last segment's length: past `end` it is allocated ahead, zeros
    /// (see [`PREALLOCATE`]).
    allocated: u64,
    last_purged: Option<LogId>,
    committed: Option<LogId>,
    /// Where `committed` is written, opened when first written.
    committed_file: Option<File>,
    vote: Option<Vote<NodeId>>,
    /// This member's id: its own entries, as leader, are reported stored
    /// before they are synced.
    me: NodeId,
    /// The sync thread's queue, and the number of the next append.
    syncs: std::sync::mpsc::Sender<SyncJob>,
    next_seq: u64,
    /// The leader's appends reported stored and not yet synced, in order:
    /// (first index, last index, append number).
    unsynced: VecDeque<(u64, u64, u64)>,
    fsync: Fsync,
    /// With `everysec`: something was written since the last sync.
    dirty: bool,
}

impl Fsync {
    /// The setting a `raft-fsync` value names (`always` for any other).
    pub fn of(name: Option<&str>) -> Fsync {
        match name {
            Some("everysec") => Fsync::EverySec,
            Some("no") => Fsync::No,
            _ => Fsync::Always,
        }
    }

    /// Its `raft-fsync` name.
    pub fn name(self) -> &'static str {
        match self {
            Fsync::Always => "always",
            Fsync::EverySec => "everysec",
            Fsync::No => "no",
        }
    }
}

/// Where an entry's record is: its segment, its offset there, and the
/// length of its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Place {
    segment: u64,
    offset: u64,
    len: u32,
}

/// The most an AppendEntries request carries, in bytes of entries (their
/// records' bodies; one entry whatever its size).
const PAYLOAD_BYTES: u64 = 1 << 20;

/// How many bytes of entries (their records' bodies) the log keeps in
/// memory unless
/// `raft-log-memory` says otherwise.
pub const LOG_MEMORY: u64 = 64 << 20;

/// How long a segment grows before appends go to a new one.
const SEGMENT_BYTES: u64 = 8 << 20;

/// The file of segment `n`: `log` for the first (the log's only file
/// before there were segments), `log.N` after it.
fn segment_path(dir: &Path, n: u64) -> PathBuf {
    match n {
        0 => dir.join("log"),
        n => dir.join(format!("log.{n}")),
    }
}

/// The segments in `dir`, in order.
fn list_segments(dir: &Path) -> std::io::Result<Vec<u64>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name();
        match name.to_str() {
            Some("log") => found.push(0),
            Some(n) => {
                if let Some(n) = n.strip_prefix("log.").and_then(|d| d.parse::<u64>().ok()).filter(|&n| n > 0) {
                    found.push(n);
                }
            }
            None => {}
        }
    }
    found.sort_unstable();
    Ok(found)
}

/// An append for the sync thread: its number, and the callback that
/// reports it stored, unless it was reported already (a leader's own).
struct SyncJob {
    seq: u64,
    callback: Option<LogFlushed<TypeConfig>>,
}

impl Inner {
    /// `committed`, or less: the last entry the leader's own disk holds,
    /// when its sync has not reached `committed` yet.
    fn durable(&self, committed: Option<LogId>) -> Option<LogId> {
        let c = committed?;
        match self.unsynced.front() {
            Some(&(first, _, _)) if c.index >= first => {
                let before = first - 1;
                self.log.places.get(&before).map(|(id, _)| *id).or(self.last_purged)
            }
            _ => Some(c),
        }
    }

    fn write_committed(&mut self) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        let body = bincode::serialize(&self.durable(self.committed)).map_err(std::io::Error::other)?;
        let mut record = Vec::with_capacity(8 + body.len());
        push_record(&mut record, &body);
        if self.committed_file.is_none() {
            let f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(self.dir.join("committed"))?;
            self.committed_file = Some(f);
        }
        match &self.committed_file {
            Some(f) => f.write_all_at(&record, 0),
            None => Ok(()),
        }
    }
}

/// Appends a record `[u32 length][u32 CRC32C][body]`, the framing of the
/// log's entries and of the committed hint.
fn push_record(out: &mut Vec<u8>, body: &[u8]) {
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&CRC32C.checksum(body).to_be_bytes());
    out.extend_from_slice(body);
}

/// The body of the record `bytes` start with; None when it is not whole
/// or its CRC does not match.
fn record_body(bytes: &[u8]) -> Option<&[u8]> {
    let len = u32::from_be_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
    let crc = u32::from_be_bytes(bytes.get(4..8)?.try_into().ok()?);
    let body = bytes.get(8..8 + len)?;
    (CRC32C.checksum(body) == crc).then_some(body)
}

/// The committed log id a `committed` file holds; None when its record
/// is damaged (or was never whole).
fn read_committed_record(bytes: &[u8]) -> Option<LogId> {
    bincode::deserialize(record_body(bytes)?).ok().flatten()
}

/// The committed hint, as far as the log holds it. The hint is written in
/// place at every commit and the log's last appends may not be on disk
/// (`raft-fsync everysec` or `no`, or a follower's entries that openraft
/// counts committed before they are synced): after a machine crash the
/// hint can name an entry the log lost, and openraft, asked to apply up
/// to it, would fail at every start. It is lowered to the last entry the
/// log holds (entries before a committed one are committed, and a
/// committed entry is never cut from a log), or dropped when the log
/// holds another entry at its index: the member then waits for the
/// leader to say what is committed.
fn hint_within_log(committed: Option<LogId>, log: &BTreeMap<u64, (LogId, Place)>, last_purged: Option<LogId>) -> Option<LogId> {
    let c = committed?;
    if last_purged.is_some_and(|p| c.index <= p.index) {
        return Some(c);
    }
    match log.get(&c.index) {
        Some((id, _)) => (*id == c).then_some(c),
        None => match log.last_key_value() {
            Some((&last, (id, _))) if last < c.index => Some(*id),
            Some(_) => None,
            None => last_purged,
        },
    }
}

/// How much the log file is extended by when an append would pass its
/// end: the space is allocated ahead (`fallocate`), so that an append's
/// `fdatasync` writes the record without also growing the file (on ext4,
/// 130 µs against 220 µs for a small record measured on this project's
/// machine).
const PREALLOCATE: u64 = 8 << 20;

impl Inner {
    /// Appends go to a new segment: the last one is cut to its records and
    /// synced first (whatever `raft-fsync` says: the segments before the
    /// last are always whole, so a crash can only cut the log's end), and
    /// the new one's name is synced in the directory.
    fn roll(&mut self) -> std::io::Result<()> {
        self.file.set_len(self.end)?;
        sync_or_exit(&self.file)?;
        let next = self.segment + 1;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(segment_path(&self.dir, next))?;
        File::open(&self.dir)?.sync_all()?;
        self.file = file;
        self.segment = next;
        self.segments.push(next);
        self.end = 0;
        self.allocated = 0;
        Ok(())
    }

    /// Writes entries' records at the end of the log (in a new segment
    /// when they would pass the last one's size); where each went.
    fn write_entries(&mut self, entries: impl IntoIterator<Item = Entry>) -> std::io::Result<Vec<(Entry, Place)>> {
        let mut records = Vec::new();
        let mut offsets = Vec::new();
        let mut written = Vec::new();
        for entry in entries {
            let body = bincode::serialize(&entry).map_err(std::io::Error::other)?;
            let len = u32::try_from(body.len()).map_err(|_| std::io::Error::other("a Raft entry of 4 GB or more"))?;
            offsets.push((records.len() as u64, len));
            push_record(&mut records, &body);
            written.push(entry);
        }
        if self.end > 0 && self.end + records.len() as u64 > self.segment_bytes {
            self.roll()?;
        }
        let (end, segment) = (self.end, self.segment);
        self.allocate(end + records.len() as u64)?;
        self.file.seek(SeekFrom::Start(end))?;
        self.file.write_all(&records)?;
        self.end = end + records.len() as u64;
        Ok(written
            .into_iter()
            .zip(offsets)
            .map(|(e, (o, len))| {
                (
                    e,
                    Place {
                        segment,
                        offset: end + o,
                        len,
                    },
                )
            })
            .collect())
    }

    /// Ends the log at `at`: its segment is cut there and synced, and the
    /// segments after it are deleted.
    fn cut_at(&mut self, at: Place) -> std::io::Result<()> {
        if at.segment != self.segment {
            // The last first: a crash midway leaves a log without a gap.
            let later: Vec<u64> = self.segments.iter().copied().filter(|&n| n > at.segment).collect();
            for n in later.iter().rev() {
                std::fs::remove_file(segment_path(&self.dir, *n))?;
                self.segments.retain(|m| m != n);
            }
            self.file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(segment_path(&self.dir, at.segment))?;
            self.segment = at.segment;
        }
        self.file.set_len(at.offset)?;
        sync_or_exit(&self.file)?;
        File::open(&self.dir)?.sync_all()?;
        self.end = at.offset;
        self.allocated = at.offset;
        Ok(())
    }

    /// Deletes the segments before the one that holds the first entry kept
    /// (never the last segment).
    fn drop_old_segments(&mut self) -> std::io::Result<()> {
        let first_kept = self.log.places.values().next().map_or(self.segment, |(_, at)| at.segment);
        let old: Vec<u64> = self.segments.iter().copied().filter(|&n| n < first_kept).collect();
        for n in &old {
            match std::fs::remove_file(segment_path(&self.dir, *n)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        self.segments.retain(|n| !old.contains(n));
        Ok(())
    }

    /// Makes the file at least `upto` bytes long, allocated.
    fn allocate(&mut self, upto: u64) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        if upto <= self.allocated {
            return Ok(());
        }
        let len = upto.div_ceil(PREALLOCATE) * PREALLOCATE;
        // SAFETY: fallocate on an open descriptor this struct owns.
        let rc = unsafe { libc::fallocate(self.file.as_raw_fd(), 0, 0, len as libc::off_t) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                // A file system without fallocate: the appends grow the file.
                Some(libc::EOPNOTSUPP) => self.allocated = u64::MAX,
                // No room for the steps ahead: the record itself may fit.
                Some(libc::ENOSPC) => {}
                _ => return Err(e),
            }
            return Ok(());
        }
        self.allocated = len;
        Ok(())
    }

    /// Takes in entries written to the log.
    fn keep(&mut self, placed: Vec<(Entry, Place)>) {
        for (entry, at) in placed {
            self.log.keep(entry, at);
        }
        self.note();
    }

    /// Tells INFO how much the log keeps.
    fn note(&self) {
        self.stats.entries.store(self.log.places.len() as u64, Ordering::Relaxed);
        self.stats.cached_bytes.store(self.log.cached_bytes, Ordering::Relaxed);
    }
}

/// The log's entries as memory holds them: every entry's id and place,
/// and the last entries themselves.
#[derive(Debug, Default)]
struct Entries {
    /// index -> (its log id, where its record is).
    places: BTreeMap<u64, (LogId, Place)>,
    /// The last entries (a suffix of `places`), as many as `memory` bytes
    /// of records hold, and those bytes.
    cache: BTreeMap<u64, Entry>,
    cached_bytes: u64,
    memory: u64,
}

impl Entries {
    fn new(memory: u64) -> Entries {
        Entries {
            memory,
            ..Entries::default()
        }
    }

    /// Takes in an entry written to the log, in place of any at its index
    /// or after (the oldest in memory leave while more than `memory`
    /// bytes are).
    fn keep(&mut self, entry: Entry, at: Place) {
        let index = entry.log_id.index;
        // (An append past the end, the usual case, splits nothing off.)
        if self.places.last_key_value().is_some_and(|(&last, _)| last >= index) {
            self.forget_from(index);
        }
        self.places.insert(index, (entry.log_id, at));
        self.cache.insert(index, entry);
        self.cached_bytes += u64::from(at.len);
        while self.cached_bytes > self.memory {
            let Some((index, _)) = self.cache.pop_first() else { break };
            self.cached_bytes -= self.places.get(&index).map_or(0, |(_, at)| u64::from(at.len));
        }
    }

    /// Forgets the entries from `index` on; their places.
    fn forget_from(&mut self, index: u64) -> BTreeMap<u64, (LogId, Place)> {
        let removed = self.places.split_off(&index);
        for i in self.cache.split_off(&index).into_keys() {
            self.cached_bytes -= removed.get(&i).map_or(0, |(_, at)| u64::from(at.len));
        }
        removed
    }

    /// Forgets the entries up to `index`.
    fn forget_upto(&mut self, index: u64) {
        let kept = self.places.split_off(&(index + 1));
        let old = std::mem::replace(&mut self.places, kept);
        let cached = self.cache.split_off(&(index + 1));
        for i in std::mem::replace(&mut self.cache, cached).into_keys() {
            self.cached_bytes -= old.get(&i).map_or(0, |(_, at)| u64::from(at.len));
        }
    }

    /// The entries in `range`: from memory, or read back from their
    /// segments.
    fn read(&self, dir: &Path, range: impl RangeBounds<u64>) -> std::io::Result<Vec<Entry>> {
        use std::os::unix::fs::FileExt;
        let mut out = Vec::new();
        let mut open: Option<(u64, File)> = None;
        for (index, (id, at)) in self.places.range(range) {
            if let Some(entry) = self.cache.get(index) {
                out.push(entry.clone());
                continue;
            }
            let file = match open.take() {
                Some((segment, f)) if segment == at.segment => f,
                _ => File::open(segment_path(dir, at.segment))?,
            };
            let mut record = vec![0; 8 + at.len as usize];
            file.read_exact_at(&mut record, at.offset)?;
            open = Some((at.segment, file));
            let entry = record_body(&record)
                .and_then(|body| bincode::deserialize::<Entry>(body).ok())
                .filter(|e| e.log_id == *id)
                .ok_or_else(|| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("the record of entry {index} in segment {} is damaged", at.segment),
                    )
                })?;
            out.push(entry);
        }
        Ok(out)
    }
}

/// A handle to the member's log (clones share it).
#[derive(Debug, Clone)]
pub struct LogStore {
    inner: Arc<Mutex<Inner>>,
    /// The number of the last append synced.
    synced: Arc<tokio::sync::watch::Sender<u64>>,
    /// What INFO shows of the log.
    pub stats: Arc<LogStats>,
    /// The member's snapshot on disk, as the state machine says: a purge
    /// waits until one holds the entries it drops.
    pub snapshot_saved: Arc<tokio::sync::watch::Sender<SnapshotSaved>>,
    /// The Raft instance this handle was given to (a rebuild makes the
    /// next one).
    instance: u64,
}

/// The snapshot a member's disk holds, for its log's purges.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SnapshotSaved {
    /// The index of the last entry it holds.
    pub upto: Option<u64>,
    /// The last Raft instance whose state machine ended, or failed to
    /// install a snapshot the leader sent: a purge of that instance, or
    /// of one before it, waiting for a snapshot fails.
    pub ended: Option<u64>,
}

impl SnapshotSaved {
    /// Whether the snapshot holds every entry up to `index`.
    fn holds(&self, index: u64) -> bool {
        self.upto.is_some_and(|u| u >= index)
    }
}

/// What INFO shows of a member's log.
#[derive(Debug, Default)]
pub struct LogStats {
    /// When an append counts as stored (`raft_fsync`).
    pub fsync: Fsync,
    /// Syncs of appended entries done (`raft_log_syncs`).
    pub syncs: AtomicU64,
    /// The index of the last entry this member knows committed
    /// (`raft_committed`; 0 for none).
    pub committed: AtomicU64,
    /// The entries the log holds (`raft_log_entries`: those after the
    /// last snapshot, and up to a thousand before; the disk also has the
    /// segments not yet emptied).
    pub entries: AtomicU64,
    /// The bytes of the entries kept in memory (their records' bodies)
    /// (`raft_log_memory`, at most `raft-log-memory`).
    pub cached_bytes: AtomicU64,
}

/// The sync thread: takes every append queued, syncs the file once, and
/// reports them stored. Ends with the log.
fn sync_thread(
    inner: Weak<Mutex<Inner>>,
    jobs: std::sync::mpsc::Receiver<SyncJob>,
    synced: Arc<tokio::sync::watch::Sender<u64>>,
    stats: Arc<LogStats>,
) {
    let syncs = &stats.syncs;
    match stats.fsync {
        Fsync::Always => {}
        Fsync::EverySec => return sync_every_second(&inner, &jobs, syncs),
        // Nothing to sync, and no append sends a job.
        Fsync::No => return,
    }
    while let Ok(job) = jobs.recv() {
        let mut batch = vec![job];
        batch.extend(jobs.try_iter());
        let Some(inner) = inner.upgrade() else { return };
        // A handle of its own, so that appends go on during the sync.
        let file = inner.lock().unwrap_or_else(|e| e.into_inner()).file.try_clone();
        let result = file.and_then(|f| f.sync_data());
        let upto = batch.last().map_or(0, |j| j.seq);
        match result {
            Ok(()) => {
                syncs.fetch_add(1, Ordering::Relaxed);
                inner
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .unsynced
                    .retain(|&(_, _, seq)| seq > upto);
                synced.send_replace(upto);
                for job in batch {
                    if let Some(callback) = job.callback {
                        callback.log_io_completed(Ok(()));
                    }
                }
            }
            Err(e) => {
                if batch.iter().any(|j| j.callback.is_none()) {
                    crate::log::warning(format_args!(
                        "Raft: the log could not be synced ({e}); the leader reported entries stored: exiting"
                    ));
                    std::process::exit(1);
                }
                for job in batch {
                    if let Some(callback) = job.callback {
                        callback.log_io_completed(Err(std::io::Error::new(e.kind(), e.to_string())));
                    }
                }
            }
        }
    }
}

/// The sync thread with `everysec`: syncs what was written once a second
/// (no append sends a job; it ends when the log closes).
fn sync_every_second(inner: &Weak<Mutex<Inner>>, jobs: &std::sync::mpsc::Receiver<SyncJob>, syncs: &AtomicU64) {
    use std::sync::mpsc::RecvTimeoutError;
    loop {
        match jobs.recv_timeout(std::time::Duration::from_secs(1)) {
            Err(RecvTimeoutError::Disconnected) => return,
            Ok(_) | Err(RecvTimeoutError::Timeout) => {}
        }
        let Some(inner) = inner.upgrade() else { return };
        let file = {
            let mut inner = inner.lock().unwrap_or_else(|e| e.into_inner());
            if !std::mem::take(&mut inner.dirty) {
                continue;
            }
            inner.file.try_clone()
        };
        match file.and_then(|f| f.sync_data()) {
            Ok(()) => {
                syncs.fetch_add(1, Ordering::Relaxed);
            }
            // The entries were reported stored, and a failed sync may
            // have dropped what the system held of them: as with `always`.
            Err(e) => {
                crate::log::warning(format_args!(
                    "Raft: the log could not be synced ({e}); its entries were reported stored: exiting"
                ));
                std::process::exit(1);
            }
        }
    }
}

/// Syncs a segment, ending the process if that fails: a failed sync may
/// have dropped what the system held of entries already reported stored,
/// and another sync of the file would not say so (as in the sync thread).
fn sync_or_exit(file: &File) -> std::io::Result<()> {
    if let Err(e) = file.sync_data() {
        crate::log::warning(format_args!("Raft: a log segment could not be synced ({e}): exiting"));
        std::process::exit(1);
    }
    Ok(())
}

fn io_error(subject: ErrorSubject<NodeId>, verb: ErrorVerb, e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::new(subject, verb, AnyError::new(&e)).into()
}

fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut f = File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join(name))?;
    File::open(dir)?.sync_all()
}

fn read_optional(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

impl LogStore {
    /// Opens (or creates) the log of member `me` in `dir`, its appends
    /// counting as stored as `fsync` says.
    pub fn open(dir: &Path, me: NodeId, fsync: Fsync) -> std::io::Result<LogStore> {
        Self::open_with(dir, me, fsync, LOG_MEMORY)
    }

    /// As [`LogStore::open`], keeping at most `memory` bytes of entries
    /// in memory (`raft-log-memory`).
    pub fn open_with(dir: &Path, me: NodeId, fsync: Fsync, memory: u64) -> std::io::Result<LogStore> {
        std::fs::create_dir_all(dir)?;
        let mut segments = list_segments(dir)?;
        if segments.is_empty() {
            segments.push(0);
        }
        let last_purged: Option<LogId> = match read_optional(&dir.join("purged"))? {
            Some(b) => bincode::deserialize(&b).ok().flatten(),
            None => None,
        };
        let mut log = Entries::new(memory);
        let mut kept = Vec::new();
        let (mut file, mut at, mut gap) = (None, 0usize, false);
        for &segment in &segments {
            let path = segment_path(dir, segment);
            let mut f = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path)?;
            let mut bytes = Vec::new();
            f.read_to_end(&mut bytes)?;
            at = 0;
            // An empty body is space allocated ahead (no entry is empty).
            while let Some(body) = record_body(&bytes[at..]).filter(|b| !b.is_empty()) {
                let len = body.len();
                let Ok(entry) = bincode::deserialize::<Entry>(body) else { break };
                let index = entry.log_id.index;
                // An entry past a gap (a segment lost to a crash) ends the
                // log, as damage does; but not a jump over entries a
                // snapshot holds (a follower sent a snapshot past its
                // log's end purges every entry it has, and their records
                // stay in its last segment, before the entries that come
                // after the snapshot).
                if let Some((&last, _)) = log.places.last_key_value()
                    && index > last + 1
                {
                    if last_purged.is_none_or(|p| index > p.index + 1) {
                        gap = true;
                        break;
                    }
                    log.forget_upto(last);
                }
                // A record that rewrote an index (after a truncation)
                // replaces what followed it.
                log.keep(
                    entry,
                    Place {
                        segment,
                        offset: at as u64,
                        len: len as u32,
                    },
                );
                at += 8 + len;
            }
            kept.push(segment);
            file = Some(f);
            if gap {
                crate::log::warning(format_args!("Raft log {}: entries after a gap in the log: cut off", path.display()));
                break;
            }
            if at < bytes.len() {
                // Zeros are space allocated ahead; anything else is a
                // record cut short (never synced, so never acknowledged).
                // Either way the log ends here, so that nothing after it
                // is ever read as a record.
                if bytes[at..].iter().any(|b| *b != 0) {
                    crate::log::warning(format_args!(
                        "Raft log {}: {} bytes at the end are not a whole entry: cut off",
                        path.display(),
                        bytes.len() - at
                    ));
                    break;
                }
                if let Some(f) = &file {
                    f.set_len(at as u64)?;
                }
            }
        }
        // Segments after a damaged one follow a gap: the log ends before.
        let dropped: Vec<u64> = segments.iter().copied().filter(|n| !kept.contains(n)).collect();
        for &later in dropped.iter().rev() {
            crate::log::warning(format_args!(
                "Raft log {}: after a damaged segment: removed",
                segment_path(dir, later).display()
            ));
            std::fs::remove_file(segment_path(dir, later))?;
        }
        if !dropped.is_empty() {
            File::open(dir)?.sync_all()?;
        }
        let segments = kept;
        let segment = segments.last().copied().unwrap_or(0);
        let file = match file {
            Some(f) => f,
            None => OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(segment_path(dir, segment))?,
        };
        file.set_len(at as u64)?;
        let vote: Option<Vote<NodeId>> = match read_optional(&dir.join("vote"))? {
            Some(b) => Some(bincode::deserialize(&b).map_err(std::io::Error::other)?),
            None => None,
        };
        // A member that led when it stopped must be elected again, in a
        // new term. openraft would bring it back as the leader of its old
        // term, and it may have lost entries of that term that it sent
        // before its own disk held them (see the module documentation):
        // its next entries would take their log ids, and a follower that
        // holds the lost ones would keep them as if they were the same.
        // The new term's first entry replaces them instead.
        let vote = vote.map(|v| match v.leader_id().voted_for() {
            Some(id) if id == me && v.is_committed() => Vote::new(v.leader_id().term, me),
            _ => v,
        });
        // Whatever the file holds (cut as above) counts as on disk from
        // now on.
        file.sync_all()?;
        let committed = read_optional(&dir.join("committed"))?.and_then(|b| read_committed_record(&b));
        if let Some(purged) = last_purged {
            log.forget_upto(purged.index);
        }
        let committed = hint_within_log(committed, &log.places, last_purged);
        let (syncs, jobs) = std::sync::mpsc::channel();
        let stats = Arc::new(LogStats {
            fsync,
            ..LogStats::default()
        });
        if let Some(c) = committed {
            stats.committed.store(c.index, Ordering::Relaxed);
        }
        let inner = Inner {
            dir: dir.to_path_buf(),
            file,
            segment,
            segments,
            segment_bytes: SEGMENT_BYTES,
            log,
            stats: stats.clone(),
            end: at as u64,
            allocated: at as u64,
            last_purged,
            committed,
            committed_file: None,
            vote,
            me,
            syncs,
            next_seq: 1,
            unsynced: VecDeque::new(),
            fsync,
            dirty: false,
        };
        inner.note();
        let inner = Arc::new(Mutex::new(inner));
        let synced = Arc::new(tokio::sync::watch::Sender::new(0));
        let (weak, watch, counted) = (Arc::downgrade(&inner), synced.clone(), stats.clone());
        std::thread::Builder::new()
            .name("keylock-raft-sync".into())
            .spawn(move || sync_thread(weak, jobs, watch, counted))?;
        Ok(LogStore {
            inner,
            synced,
            stats,
            snapshot_saved: Arc::new(tokio::sync::watch::Sender::new(SnapshotSaved::default())),
            instance: 0,
        })
    }

    /// The handle for Raft instance `instance`.
    pub fn for_instance(&self, instance: u64) -> LogStore {
        LogStore { instance, ..self.clone() }
    }

    /// Says that instance `instance`'s state machine ended (or failed to
    /// install a snapshot).
    pub fn instance_ended(&self, instance: u64) {
        self.snapshot_saved.send_modify(|s| s.ended = s.ended.max(Some(instance)));
    }

    /// Tells the log that the member's disk holds a snapshot up to
    /// `index` (the last one saved, or the one found at start).
    pub fn snapshot_saved_upto(&self, index: Option<u64>) {
        self.snapshot_saved.send_modify(|s| s.upto = s.upto.max(index));
    }

    /// Waits until this member's disk holds the entry at `index` (only a
    /// leader's own entries are reported stored before that).
    pub async fn wait_synced(&self, index: u64) {
        let needed = {
            let inner = self.lock();
            inner
                .unsynced
                .iter()
                .take_while(|&&(first, _, _)| first <= index)
                .map(|&(_, _, seq)| seq)
                .last()
        };
        if let Some(seq) = needed {
            let mut synced = self.synced.subscribe();
            let _ = synced.wait_for(|s| *s >= seq).await;
        }
    }

    /// The commit index a leader may tell its followers: `committed`, or
    /// the last entry its own disk holds if that is less (see the module
    /// documentation).
    pub fn durable_commit(&self, committed: Option<LogId>) -> Option<LogId> {
        self.lock().durable(committed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether nothing was ever stored (a new member).
    pub fn is_new(&self) -> bool {
        let inner = self.lock();
        inner.vote.is_none() && inner.log.places.is_empty() && inner.last_purged.is_none()
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let inner = self.lock();
        inner
            .log
            .read(&inner.dir, range)
            .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Read, e))
    }

    /// What an AppendEntries request carries: the entries from `start`
    /// whose records fit in [`PAYLOAD_BYTES`], at least one. openraft
    /// asks for up to 300 entries at once and gives the request a
    /// heartbeat interval (50 ms): 300 entries of 90 kB (pipelined lock
    /// cycles) took longer, timed out and were sent again, so a follower
    /// far behind caught up at a few hundred entries a second.
    async fn limited_get_log_entries(&mut self, start: u64, end: u64) -> Result<Vec<Entry>, StorageError> {
        let inner = self.lock();
        let (mut upto, mut bytes) = (start, 0u64);
        for (&index, (_, at)) in inner.log.places.range(start..end) {
            bytes += u64::from(at.len);
            if upto > start && bytes > PAYLOAD_BYTES {
                break;
            }
            upto = index + 1;
        }
        inner
            .log
            .read(&inner.dir, start..upto)
            .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Read, e))
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let inner = self.lock();
        let last = inner.log.places.last_key_value().map(|(_, (id, _))| *id);
        Ok(LogState {
            last_purged_log_id: inner.last_purged,
            last_log_id: last.or(inner.last_purged),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError> {
        let mut inner = self.lock();
        let bytes = bincode::serialize(vote).map_err(|e| io_error(ErrorSubject::Vote, ErrorVerb::Write, e))?;
        write_atomically(&inner.dir, "vote", &bytes).map_err(|e| io_error(ErrorSubject::Vote, ErrorVerb::Write, e))?;
        inner.vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError> {
        Ok(self.lock().vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        self.stats.committed.store(committed.map_or(0, |c| c.index), Ordering::Relaxed);
        let mut inner = self.lock();
        inner.committed = committed;
        // A hint, written in place and not synced: it is saved at every
        // commit, and a rename or a sync each time would cost the commit
        // more than the entry's own write.
        let _ = inner.write_committed();
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self.lock().committed)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut inner = self.lock();
        let placed = match inner.write_entries(entries) {
            Ok(placed) => placed,
            Err(e) => {
                callback.log_io_completed(Err(std::io::Error::new(e.kind(), e.to_string())));
                return Err(io_error(ErrorSubject::Logs, ErrorVerb::Write, e));
            }
        };
        let (Some(first), Some(last)) = (placed.first().map(|p| p.0.log_id.index), placed.last().map(|p| p.0.log_id.index)) else {
            drop(inner);
            callback.log_io_completed(Ok(()));
            return Ok(());
        };
        if inner.fsync != Fsync::Always {
            // Stored once written (see the module documentation).
            inner.keep(placed);
            inner.dirty = true;
            drop(inner);
            callback.log_io_completed(Ok(()));
            return Ok(());
        }
        // This member's own entries as the leader of the current term.
        let me = inner.me;
        let own = inner.vote.is_some_and(|v| {
            v.is_committed()
                && v.leader_id().voted_for() == Some(me)
                && placed.iter().all(|(e, _)| e.log_id.leader_id.term == v.leader_id().term)
        });
        inner.keep(placed);
        let seq = inner.next_seq;
        inner.next_seq += 1;
        if own {
            inner.unsynced.push_back((first, last, seq));
        }
        let (later, now) = if own { (None, Some(callback)) } else { (Some(callback), None) };
        if let Err(std::sync::mpsc::SendError(job)) = inner.syncs.send(SyncJob { seq, callback: later }) {
            // The sync thread is gone (it ended on a panic): sync here.
            let synced = inner.file.sync_data();
            inner.unsynced.retain(|&(_, _, s)| s != seq);
            drop(inner);
            if synced.is_ok() {
                self.synced.send_replace(seq);
            }
            if let Some(callback) = job.callback.or(now) {
                callback.log_io_completed(synced.map_err(|e| std::io::Error::new(e.kind(), e.to_string())));
            }
            return Ok(());
        }
        drop(inner);
        if let Some(callback) = now {
            callback.log_io_completed(Ok(()));
        }
        Ok(())
    }

    /// Cuts the log from `log_id` on: its segment is cut at its record
    /// (and becomes the last), the segments after it are deleted.
    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let mut inner = self.lock();
        let removed = inner.log.forget_from(log_id.index);
        inner.note();
        if let Some(&(_, at)) = removed.values().next() {
            inner.cut_at(at).map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Delete, e))?;
        }
        Ok(())
    }

    /// Drops the entries a snapshot holds: the point is recorded first,
    /// then the segments that hold only entries before it are deleted.
    ///
    /// Once the snapshot is on disk: a follower sent one is told to purge
    /// while its state machine still installs it, and a purge recorded
    /// before the snapshot that holds its entries would leave a member
    /// killed meanwhile with entries neither its log nor its snapshot
    /// has (it could not start again).
    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let mut saved = self.snapshot_saved.subscribe();
        let instance = self.instance;
        let holds = saved
            .wait_for(|s| s.ended >= Some(instance) || s.holds(log_id.index))
            .await
            .is_ok_and(|s| s.holds(log_id.index));
        if !holds {
            let e = std::io::Error::other(format!("no snapshot saved holds the entries up to {log_id} to drop"));
            return Err(io_error(ErrorSubject::Logs, ErrorVerb::Delete, e));
        }
        let mut inner = self.lock();
        inner.log.forget_upto(log_id.index);
        inner.note();
        inner.last_purged = Some(log_id);
        let bytes = bincode::serialize(&Some(log_id)).map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Delete, e))?;
        write_atomically(&inner.dir, "purged", &bytes).map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Delete, e))?;
        inner
            .drop_old_segments()
            .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Delete, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_id(term: u64, index: u64) -> LogId {
        LogId::new(openraft::CommittedLeaderId::new(term, 1), index)
    }

    fn blank(term: u64, index: u64) -> Entry {
        Entry {
            log_id: log_id(term, index),
            payload: openraft::EntryPayload::Blank,
        }
    }

    /// What `append` does with `raft-fsync no`, but for telling openraft.
    fn written(store: &LogStore, entries: impl IntoIterator<Item = Entry>) {
        let mut inner = store.lock();
        let placed = inner.write_entries(entries).unwrap();
        inner.keep(placed);
    }

    /// The committed hint is read back after a restart; a damaged one is
    /// no hint at all, and a longer record written before a shorter one
    /// does not confuse it.
    #[test]
    fn committed_hint_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        write_log(dir.path(), &[(1, 1..=5), (2, 6..=9)]);
        let store = LogStore::open(dir.path(), 1, Fsync::Always).unwrap();
        for id in [Some(log_id(1, 5)), Some(log_id(2, 9)), None] {
            let mut inner = store.lock();
            inner.committed = id;
            inner.write_committed().unwrap();
            drop(inner);
            assert_eq!(LogStore::open(dir.path(), 1, Fsync::Always).unwrap().lock().committed, id);
        }
        store.lock().committed = Some(log_id(3, 12));
        store.lock().write_committed().unwrap();
        let path = dir.path().join("committed");
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(LogStore::open(dir.path(), 1, Fsync::Always).unwrap().lock().committed, None);
        std::fs::write(&path, [0u8; 3]).unwrap();
        assert_eq!(LogStore::open(dir.path(), 1, Fsync::Always).unwrap().lock().committed, None);
    }

    /// While the leader's own entries from index 3 are not synced, the
    /// commit it tells (and its hint) stops at entry 2, and applying
    /// entry 3 or 4 waits; once synced, neither is held back.
    #[test]
    fn unsynced_own_entries_hold_back_the_commit_told_and_the_apply() {
        let dir = tempfile::tempdir().unwrap();
        write_log(dir.path(), &[(1, 1..=4)]);
        let store = LogStore::open(dir.path(), 1, Fsync::Always).unwrap();
        {
            let mut inner = store.lock();
            for i in 1..=4 {
                let entry = Entry {
                    log_id: log_id(1, i),
                    payload: openraft::EntryPayload::Blank,
                };
                inner.log.keep(
                    entry,
                    Place {
                        segment: 0,
                        offset: 0,
                        len: 0,
                    },
                );
            }
            inner.unsynced.push_back((3, 4, 7));
        }
        assert_eq!(store.durable_commit(Some(log_id(1, 2))), Some(log_id(1, 2)));
        assert_eq!(store.durable_commit(Some(log_id(1, 4))), Some(log_id(1, 2)));
        assert_eq!(store.durable_commit(None), None);
        store.lock().committed = Some(log_id(1, 4));
        store.lock().write_committed().unwrap();
        assert_eq!(
            LogStore::open(dir.path(), 1, Fsync::Always).unwrap().lock().committed,
            Some(log_id(1, 2))
        );

        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            // Entry 2 is on disk: no wait.
            store.wait_synced(2).await;
            let waiting = tokio::time::timeout(std::time::Duration::from_millis(50), store.wait_synced(4)).await;
            assert!(waiting.is_err(), "applying entry 4 before it is synced");
            store.lock().unsynced.clear();
            store.synced.send_replace(7);
            tokio::time::timeout(std::time::Duration::from_secs(1), store.wait_synced(4))
                .await
                .expect("entry 4 synced");
        });
        assert_eq!(store.durable_commit(Some(log_id(1, 4))), Some(log_id(1, 4)));
    }

    /// A member that led when it stopped comes back with its vote for
    /// itself, not as the leader of that term; another member's leader
    /// vote is kept as it was.
    #[test]
    fn a_leader_vote_is_not_kept_across_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let led = Vote::new_committed(5, 1);
        std::fs::write(dir.path().join("vote"), bincode::serialize(&led).unwrap()).unwrap();
        let back = LogStore::open(dir.path(), 1, Fsync::Always).unwrap().lock().vote.unwrap();
        assert_eq!(back, Vote::new(5, 1));
        assert!(!back.is_committed());
        let followed = LogStore::open(dir.path(), 2, Fsync::Always).unwrap().lock().vote.unwrap();
        assert_eq!(followed, led);
    }

    fn record(entry: &Entry) -> Vec<u8> {
        let mut r = Vec::new();
        push_record(&mut r, &bincode::serialize(entry).unwrap());
        r
    }

    /// Writes a log file of blank entries: each term with its indexes.
    fn write_log(dir: &Path, terms: &[(u64, std::ops::RangeInclusive<u64>)]) {
        let mut bytes = Vec::new();
        for (term, indexes) in terms {
            for i in indexes.clone() {
                bytes.extend(record(&Entry {
                    log_id: log_id(*term, i),
                    payload: openraft::EntryPayload::Blank,
                }));
            }
        }
        std::fs::write(dir.join("log"), bytes).unwrap();
    }

    /// Appends that pass a segment's size go to a new segment; the log
    /// reads back across them; a truncation into an earlier segment ends
    /// the log there; a purge deletes the segments it empties, never the
    /// last, and rewrites nothing.
    #[test]
    fn segments_roll_read_back_truncate_and_purge() {
        let dir = tempfile::tempdir().unwrap();
        let store = LogStore::open(dir.path(), 2, Fsync::No).unwrap();
        store.lock().segment_bytes = 300;
        let entries = |term: u64, indexes: std::ops::RangeInclusive<u64>| -> Vec<Entry> {
            indexes
                .map(|i| Entry {
                    log_id: log_id(term, i),
                    payload: openraft::EntryPayload::Normal(super::super::Proposal {
                        author: 1,
                        incarnation: 1,
                        effects: vec![b'x'; 100],
                    }),
                })
                .collect()
        };
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let mut s = store.clone();
        for i in 1..=10 {
            written(&store, entries(1, i..=i));
        }
        let on_disk = || list_segments(dir.path()).unwrap();
        assert!(on_disk().len() >= 4, "{:?}", on_disk());
        let reopened = LogStore::open(dir.path(), 2, Fsync::No).unwrap();
        let indexes: Vec<u64> = reopened.lock().log.places.keys().copied().collect();
        assert_eq!(indexes, (1..=10).collect::<Vec<_>>());
        assert_eq!(reopened.lock().log.places[&7].0, log_id(1, 7));
        drop(reopened);
        // Back to entry 3, then other entries in its place.
        rt.block_on(async { s.truncate(log_id(1, 3)).await.unwrap() });
        written(&store, entries(2, 3..=4));
        let reopened = LogStore::open(dir.path(), 2, Fsync::No).unwrap();
        let ids: Vec<LogId> = reopened.lock().log.places.values().map(|(id, _)| *id).collect();
        assert_eq!(ids, vec![log_id(1, 1), log_id(1, 2), log_id(2, 3), log_id(2, 4)]);
        drop(reopened);
        // A purge up to entry 3 deletes the segments of 1 and 2 only.
        let before = on_disk();
        s.snapshot_saved_upto(Some(3));
        rt.block_on(async { s.purge(log_id(2, 3)).await.unwrap() });
        let after = on_disk();
        let first_kept = store.lock().log.places[&4].1.segment;
        assert!(
            after.iter().all(|&n| n >= first_kept) && after.len() < before.len(),
            "{before:?} {after:?}"
        );
        assert!(after.contains(&store.lock().segment));
        drop(store);
        drop(s);
        let reopened = LogStore::open(dir.path(), 2, Fsync::No).unwrap();
        let ids: Vec<LogId> = reopened.lock().log.places.values().map(|(id, _)| *id).collect();
        assert_eq!(ids, vec![log_id(2, 4)]);
        drop(reopened);

        // A segment lost in the middle (a crash): the log ends before it,
        // and the segments after it go.
        let dir = tempfile::tempdir().unwrap();
        let store = LogStore::open(dir.path(), 2, Fsync::No).unwrap();
        store.lock().segment_bytes = 300;
        for i in 1..=8 {
            written(&store, entries(1, i..=i));
        }
        drop(store);
        let segments = list_segments(dir.path()).unwrap();
        assert!(segments.len() >= 4, "{segments:?}");
        std::fs::remove_file(segment_path(dir.path(), segments[1])).unwrap();
        let reopened = LogStore::open(dir.path(), 2, Fsync::No).unwrap();
        // (A segment holds one entry here.)
        let indexes: Vec<u64> = reopened.lock().log.places.keys().copied().collect();
        assert_eq!(indexes, vec![1]);
        // The segment found after the gap is emptied (appends go on
        // there), those after it are deleted.
        assert_eq!(list_segments(dir.path()).unwrap(), vec![segments[0], segments[2]]);
        assert_eq!(std::fs::metadata(segment_path(dir.path(), segments[2])).unwrap().len(), 0);
    }

    /// Entries past `raft-log-memory` are read back from their segments,
    /// the same as written, through truncations, purges and a restart;
    /// memory holds only the last ones; a damaged record read back is an
    /// error, not another entry.
    #[test]
    fn entries_beyond_the_memory_are_read_from_their_segments() {
        let dir = tempfile::tempdir().unwrap();
        // About two entries' records (each a little over 100 bytes).
        let memory = 250;
        let store = LogStore::open_with(dir.path(), 2, Fsync::No, memory).unwrap();
        store.lock().segment_bytes = 400;
        let entries = |term: u64, indexes: std::ops::RangeInclusive<u64>| -> Vec<Entry> {
            indexes
                .map(|i| Entry {
                    log_id: log_id(term, i),
                    payload: openraft::EntryPayload::Normal(super::super::Proposal {
                        author: term,
                        incarnation: i,
                        effects: format!("entry {term}-{i}").repeat(8).into_bytes(),
                    }),
                })
                .collect()
        };
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let mut s = store.clone();
        let append = |s: &mut LogStore, batch: Vec<Entry>| written(s, batch);
        // Whether the entries read back, and which.
        let read =
            |s: &mut LogStore, range: std::ops::RangeInclusive<u64>| rt.block_on(s.try_get_log_entries(range)).map_err(|e| e.to_string());
        for i in 1..=12 {
            append(&mut s, entries(1, i..=i));
        }
        append(&mut s, entries(1, 13..=15));
        assert_eq!(read(&mut s, 1..=15).unwrap(), entries(1, 1..=15));
        assert_eq!(read(&mut s, 4..=9).unwrap(), entries(1, 4..=9));
        {
            let inner = store.lock();
            assert!(inner.log.cached_bytes <= memory && inner.log.cached_bytes > 0);
            let cached: Vec<u64> = inner.log.cache.keys().copied().collect();
            assert_eq!(cached.last(), Some(&15));
            assert!(cached.len() < 3, "{cached:?}");
            assert!(cached.windows(2).all(|w| w[1] == w[0] + 1));
            assert_eq!(store.stats.cached_bytes.load(Ordering::Relaxed), inner.log.cached_bytes);
            assert_eq!(store.stats.entries.load(Ordering::Relaxed), 15);
            assert!(inner.segments.len() >= 4, "{:?}", inner.segments);
        }
        // Back to entry 6 (into an earlier segment), other entries after.
        rt.block_on(s.truncate(log_id(1, 6))).unwrap();
        append(&mut s, entries(2, 6..=9));
        let expected: Vec<Entry> = entries(1, 1..=5).into_iter().chain(entries(2, 6..=9)).collect();
        assert_eq!(read(&mut s, 1..=9).unwrap(), expected);
        assert!(store.lock().log.cached_bytes <= memory);
        // A purge: the entries after it still read back.
        s.snapshot_saved_upto(Some(3));
        rt.block_on(s.purge(log_id(1, 3))).unwrap();
        assert_eq!(read(&mut s, 1..=9).unwrap(), expected[3..].to_vec());
        drop(store);
        drop(s);
        // Reopened with nothing in memory: all from the disk.
        let mut reopened = LogStore::open_with(dir.path(), 2, Fsync::No, 0).unwrap();
        assert_eq!(read(&mut reopened, 1..=9).unwrap(), expected[3..].to_vec());
        assert_eq!(reopened.lock().log.cached_bytes, 0);
        assert!(reopened.lock().log.cache.is_empty());
        // A record damaged after it was read at start.
        let at = reopened.lock().log.places[&7].1;
        let path = segment_path(dir.path(), at.segment);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[(at.offset + 8) as usize + 3] ^= 0x20;
        std::fs::write(&path, &bytes).unwrap();
        assert!(read(&mut reopened, 7..=7).is_err());
        assert_eq!(read(&mut reopened, 8..=9).unwrap(), expected[7..].to_vec());
    }

    /// A follower sent a snapshot past its log's end purges every entry
    /// it holds, and the old records stay in its last segment before the
    /// entries appended after the snapshot: at start these follow the
    /// purge point, not a gap, and are kept.
    #[test]
    fn entries_after_a_snapshot_past_the_log_end_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let store = LogStore::open(dir.path(), 2, Fsync::No).unwrap();
        written(&store, (1..=5).map(|i| blank(1, i)));
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let mut s = store.clone();
        s.snapshot_saved_upto(Some(10));
        rt.block_on(s.purge(log_id(2, 10))).unwrap();
        written(&store, (11..=13).map(|i| blank(2, i)));
        let reopen = || {
            let reopened = LogStore::open(dir.path(), 2, Fsync::No).unwrap();
            let ids: Vec<LogId> = reopened.lock().log.places.values().map(|(id, _)| *id).collect();
            (reopened, ids)
        };
        let (mut reopened, ids) = reopen();
        assert_eq!(ids, vec![log_id(2, 11), log_id(2, 12), log_id(2, 13)]);
        let state = rt.block_on(reopened.get_log_state()).unwrap();
        assert_eq!(state.last_log_id, Some(log_id(2, 13)));
        assert_eq!(state.last_purged_log_id, Some(log_id(2, 10)));
        drop(reopened);
        // A later purge (a snapshot of its own) past the first entries
        // after the jump.
        s.snapshot_saved_upto(Some(12));
        rt.block_on(s.purge(log_id(2, 12))).unwrap();
        drop(store);
        drop(s);
        let (_, ids) = reopen();
        assert_eq!(ids, vec![log_id(2, 13)]);
        // A jump past the purge point is a gap, and still ends the log.
        write_atomically(dir.path(), "purged", &bincode::serialize(&Some(log_id(2, 9))).unwrap()).unwrap();
        let reopened = LogStore::open(dir.path(), 2, Fsync::No).unwrap();
        assert!(reopened.lock().log.places.is_empty());
    }

    /// A purge waits until a snapshot holding its entries is on disk (a
    /// follower is told to purge while it still installs the snapshot it
    /// was sent), and fails if the install did.
    #[test]
    fn a_purge_waits_for_the_snapshot_that_holds_its_entries() {
        let dir = tempfile::tempdir().unwrap();
        let store = LogStore::open(dir.path(), 2, Fsync::No).unwrap();
        written(&store, (1..=6).map(|i| blank(1, i)));
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let mut s = store.clone();
            store.snapshot_saved_upto(Some(2));
            let purge = tokio::spawn(async move { s.purge(log_id(1, 4)).await.map_err(|e| e.to_string()) });
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            assert!(!purge.is_finished());
            assert!(!dir.path().join("purged").exists());
            assert_eq!(store.lock().log.places.len(), 6);
            store.snapshot_saved_upto(Some(5));
            purge.await.unwrap().unwrap();
            assert_eq!(store.lock().log.places.keys().copied().collect::<Vec<_>>(), vec![5, 6]);
            // An install that failed: the purge waiting for it fails.
            let mut s = store.clone();
            let purge = tokio::spawn(async move { s.purge(log_id(1, 6)).await.map_err(|e| e.to_string()) });
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            store.instance_ended(0);
            assert!(purge.await.unwrap().is_err());
            assert_eq!(store.lock().log.places.len(), 2);
            // The next instance's purges wait as before.
            let mut s = store.for_instance(1);
            let purge = tokio::spawn(async move { s.purge(log_id(1, 6)).await.map_err(|e| e.to_string()) });
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            assert!(!purge.is_finished());
            store.snapshot_saved_upto(Some(6));
            purge.await.unwrap().unwrap();
            assert!(store.lock().log.places.is_empty());
        });
    }

    /// An AppendEntries request carries entries up to [`PAYLOAD_BYTES`]
    /// of records, and one entry whatever its size.
    #[test]
    fn a_request_carries_at_most_a_megabyte_of_entries() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = LogStore::open(dir.path(), 2, Fsync::No).unwrap();
        let entry = |i: u64, size: usize| Entry {
            log_id: log_id(1, i),
            payload: openraft::EntryPayload::Normal(super::super::Proposal {
                author: 1,
                incarnation: 1,
                effects: vec![i as u8; size],
            }),
        };
        // Ten of 300 kB, one of 2 MB, ten of 1 kB.
        let mut all: Vec<Entry> = (1..=10).map(|i| entry(i, 300_000)).collect();
        all.push(entry(11, 2_000_000));
        all.extend((12..=21).map(|i| entry(i, 1000)));
        written(&store, all.clone());
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let mut limited = |start, end| rt.block_on(store.limited_get_log_entries(start, end)).unwrap();
        assert_eq!(limited(1, 22), all[..3].to_vec());
        assert_eq!(limited(9, 22), all[8..10].to_vec());
        assert_eq!(limited(11, 22), all[10..11].to_vec());
        assert_eq!(limited(12, 22), all[11..].to_vec());
        assert_eq!(limited(12, 15), all[11..14].to_vec());
        assert!(limited(22, 30).is_empty());
    }

    /// A committed hint that names an entry the log lost (a crash took the
    /// log's last appends, not the hint) is lowered to the log's last
    /// entry; one the log contradicts is dropped; one a snapshot covers is
    /// kept.
    #[test]
    fn the_committed_hint_never_passes_the_log() {
        let hint = |dir: &Path, id: LogId| {
            let store = LogStore::open(dir, 1, Fsync::No).unwrap();
            store.lock().committed = Some(id);
            store.lock().write_committed().unwrap();
            drop(store);
            LogStore::open(dir, 1, Fsync::No).unwrap().lock().committed
        };
        let dir = tempfile::tempdir().unwrap();
        write_log(dir.path(), &[(1, 1..=3), (2, 4..=6)]);
        assert_eq!(hint(dir.path(), log_id(2, 6)), Some(log_id(2, 6)));
        assert_eq!(hint(dir.path(), log_id(2, 9)), Some(log_id(2, 6)));
        assert_eq!(hint(dir.path(), log_id(3, 5)), None);
        // Entries up to 4 in a snapshot, the log holding 5 and 6.
        let purged = Some(log_id(2, 4));
        std::fs::write(dir.path().join("purged"), bincode::serialize(&purged).unwrap()).unwrap();
        assert_eq!(hint(dir.path(), log_id(1, 2)), Some(log_id(1, 2)));
        assert_eq!(hint(dir.path(), log_id(2, 8)), Some(log_id(2, 6)));
        write_log(dir.path(), &[]);
        assert_eq!(hint(dir.path(), log_id(2, 8)), purged);
    }

    /// A log file allocated ahead ends at its last record: the zeros after
    /// it are no entry and no damage, and the file is cut to the records
    /// (the next append allocates again); a record cut short is cut off.
    #[test]
    fn allocated_tail_is_not_an_entry() {
        let dir = tempfile::tempdir().unwrap();
        let entries: Vec<Entry> = (1..=2)
            .map(|i| Entry {
                log_id: log_id(1, i),
                payload: openraft::EntryPayload::Blank,
            })
            .collect();
        let mut bytes: Vec<u8> = entries.iter().flat_map(record).collect();
        let whole = bytes.len() as u64;
        bytes.resize(bytes.len() + 4096, 0);
        std::fs::write(dir.path().join("log"), &bytes).unwrap();
        let store = LogStore::open(dir.path(), 1, Fsync::Always).unwrap();
        assert_eq!(store.lock().log.places.len(), 2);
        assert_eq!(store.lock().end, whole);
        assert_eq!(std::fs::metadata(dir.path().join("log")).unwrap().len(), whole);
        store.lock().allocate(whole + 10).unwrap();
        assert_eq!(std::fs::metadata(dir.path().join("log")).unwrap().len(), PREALLOCATE);
        drop(store);
        // A third record whose end never reached the disk (what is there
        // differs from what was written).
        let mut third = record(&Entry {
            log_id: log_id(1, 3),
            payload: openraft::EntryPayload::Blank,
        });
        let last = third.len() - 1;
        third[last] ^= 0x5a;
        let mut bytes = std::fs::read(dir.path().join("log")).unwrap();
        bytes[whole as usize..whole as usize + third.len()].copy_from_slice(&third);
        std::fs::write(dir.path().join("log"), &bytes).unwrap();
        let store = LogStore::open(dir.path(), 1, Fsync::Always).unwrap();
        assert_eq!(store.lock().log.places.len(), 2);
        assert_eq!(std::fs::metadata(dir.path().join("log")).unwrap().len(), whole);
    }
}
