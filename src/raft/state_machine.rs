//! openraft's state machine for a keylock member: committed entries go, in
//! order, to the engine's thread, which replays their effects (see
//! `engine::raft`) and answers when it has; openraft's own bookkeeping
//! (what was applied, the membership) stays here.
//!
//! Snapshots are the dataset as an RDB file (every key, deadlines
//! included, and the function libraries), made on the engine's thread
//! when openraft asks for one and kept in `dir/raft/snapshot.N.rdb`,
//! named by `snapshot.meta` with its metadata; the log before it is then
//! dropped. A new snapshot's file is written and synced under a new name
//! before `snapshot.meta` is replaced to name it, and the old file is
//! deleted after, so that a crash at any point leaves the metadata and the
//! data of one snapshot together. (Both were replaced in turn before: a
//! crash between the two paired a new dataset with the old metadata, and
//! the member applied again the entries between them.) A
//! member that starts loads its snapshot into the engine first and
//! applies the log's entries after it; one too far behind is sent the
//! leader's snapshot. A snapshot that cannot be read at start stops the
//! member: its log may have dropped the entries the snapshot holds.

use std::io::Cursor;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{AnyError, EntryPayload, ErrorSubject, ErrorVerb, OptionalSend, RaftSnapshotBuilder, StorageIOError};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use super::log_store::LogStore;
use super::{Entry, LogId, Proposal, SnapshotMeta, StorageError, StoredMembership, TypeConfig};

/// What the state machines send the engine's thread: the number of the
/// Raft instance that sends it (the engine drops what an instance it
/// replaced still sends), and the request.
pub type EngineSender = mpsc::UnboundedSender<(u64, EngineCmd)>;

/// What the state machine asks of the engine's thread.
#[derive(Debug)]
pub enum EngineCmd {
    /// Replay these committed entries' effects, in order.
    Apply {
        entries: Vec<(LogId, Proposal)>,
        done: oneshot::Sender<()>,
    },
    /// The dataset as an RDB file, and the last entry applied to it.
    Dump { reply: oneshot::Sender<(Vec<u8>, Option<LogId>)> },
    /// The dataset replaced by this RDB file (a snapshot), as of `last`.
    Restore {
        data: Vec<u8>,
        last: Option<LogId>,
        done: oneshot::Sender<Result<(), String>>,
    },
}

/// The snapshot on disk.
#[derive(Debug, Clone)]
struct Stored {
    meta: SnapshotMeta,
    data: Vec<u8>,
}

/// What `snapshot.meta` holds: the snapshot's metadata and the name of
/// its RDB file. (Files written before hold the metadata alone, and the
/// data is `snapshot.rdb`.)
#[derive(Serialize, Deserialize)]
struct MetaFile {
    meta: SnapshotMeta,
    rdb: String,
}

/// Where a member keeps its snapshot: one for the process, shared by
/// the Raft instances a rebuild makes, so that saves take turns and
/// files are cleared only at start.
#[derive(Debug)]
pub struct Disk {
    dir: PathBuf,
    /// Told of every snapshot on disk (its purges wait for one).
    log: LogStore,
    /// The last snapshot saved (or found at start): its log id and file,
    /// and the number of the next file. Saves take turns through it.
    saved: Mutex<(Option<LogId>, Option<String>, u64)>,
}

/// `snapshot.N.rdb`'s N.
fn file_number(name: &str) -> Option<u64> {
    name.strip_prefix("snapshot.")?.strip_suffix(".rdb")?.parse().ok()
}

/// The metadata of the snapshot `snapshot.meta` in `dir` names, and its
/// data file's name; None without one; an error when the metadata cannot
/// be read or the file it names is not there.
fn read_meta(dir: &std::path::Path) -> Result<Option<(SnapshotMeta, String)>, String> {
    let path = dir.join("snapshot.meta");
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let (meta, rdb) = match bincode::deserialize::<MetaFile>(&bytes) {
        Ok(m) => (m.meta, m.rdb),
        Err(_) => match bincode::deserialize::<SnapshotMeta>(&bytes) {
            Ok(meta) => (meta, "snapshot.rdb".to_string()),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        },
    };
    if rdb.contains('/') {
        return Err(format!("{}: names {rdb}", path.display()));
    }
    std::fs::metadata(dir.join(&rdb)).map_err(|e| format!("{}: {e}", dir.join(&rdb).display()))?;
    Ok(Some((meta, rdb)))
}

impl Disk {
    /// The member's snapshot place in `dir`: files of snapshots left
    /// unnamed by a crash are deleted, and the log is told what the disk
    /// holds. An error when `snapshot.meta` names a snapshot that cannot
    /// be read.
    pub fn open(dir: PathBuf, log: LogStore) -> Result<Arc<Disk>, String> {
        let found = read_meta(&dir).map_err(|e| format!("the Raft snapshot could not be read: {e}"))?;
        // Past the named file's number, whatever the listing shows.
        let mut next = found.as_ref().and_then(|(_, rdb)| file_number(rdb)).map_or(1, |n| n + 1);
        let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let named = found.as_ref().is_some_and(|(_, rdb)| *rdb == name);
            let ours = name == "snapshot.rdb" || file_number(&name).is_some() || name.ends_with(".rdb.tmp");
            if let Some(n) = file_number(&name) {
                next = next.max(n + 1);
            }
            if ours && !named {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        let last = found.as_ref().and_then(|(meta, _)| meta.last_log_id);
        log.snapshot_saved_upto(last.map(|l| l.index));
        Ok(Arc::new(Disk {
            dir,
            log,
            saved: Mutex::new((last, found.map(|(_, rdb)| rdb), next)),
        }))
    }

    /// The snapshot on disk now, if any.
    fn load(&self) -> Result<Option<Stored>, String> {
        let _turn = lock(&self.saved);
        let read = || -> Result<Option<Stored>, String> {
            let Some((meta, rdb)) = read_meta(&self.dir)? else {
                return Ok(None);
            };
            let path = self.dir.join(&rdb);
            let data = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            Ok(Some(Stored { meta, data }))
        };
        read().map_err(|e| format!("the Raft snapshot could not be read: {e}"))
    }

    /// Saves a snapshot, unless one of later entries is saved already
    /// (false then): its data under a new name, synced, then the metadata
    /// naming it, synced and renamed into place, then the old data
    /// deleted.
    fn save(&self, s: &Stored) -> std::io::Result<bool> {
        let mut saved = lock(&self.saved);
        if saved.0.is_some() && s.meta.last_log_id < saved.0 {
            return Ok(false);
        }
        let rdb = format!("snapshot.{}.rdb", saved.2);
        saved.2 += 1;
        if saved.1.as_deref() == Some(&rdb) {
            return Err(std::io::Error::other(format!("{rdb} is the snapshot saved already")));
        }
        let meta = bincode::serialize(&MetaFile {
            meta: s.meta.clone(),
            rdb: rdb.clone(),
        })
        .map_err(std::io::Error::other)?;
        let write = |name: &str, bytes: &[u8]| -> std::io::Result<()> {
            let tmp = self.dir.join(format!("{name}.tmp"));
            let mut f = std::fs::File::create(&tmp)?;
            std::io::Write::write_all(&mut f, bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, self.dir.join(name))
        };
        write(&rdb, &s.data)?;
        // The data's name on disk before the metadata that names it.
        std::fs::File::open(&self.dir)?.sync_all()?;
        write("snapshot.meta", &meta)?;
        std::fs::File::open(&self.dir)?.sync_all()?;
        if let Some(old) = saved.1.replace(rdb) {
            let _ = std::fs::remove_file(self.dir.join(old));
        }
        saved.0 = s.meta.last_log_id;
        self.log.snapshot_saved_upto(s.meta.last_log_id.map(|l| l.index));
        Ok(true)
    }
}

pub struct StateMachine {
    engine: EngineSender,
    /// The number of this Raft instance (a rebuild makes the next one).
    instance: u64,
    /// The member's log: a leader applies its own entries once its disk
    /// holds them (see `log_store`).
    log: LogStore,
    last_applied: Option<LogId>,
    membership: Arc<Mutex<StoredMembership>>,
    disk: Arc<Disk>,
    current: Arc<Mutex<Option<Stored>>>,
    /// The snapshot on disk was loaded into the engine.
    restored: bool,
    built: u64,
}

impl StateMachine {
    /// The member's state machine, with the snapshot its disk holds; an
    /// error when that cannot be read.
    pub fn new(engine: EngineSender, instance: u64, disk: Arc<Disk>, log: LogStore) -> Result<StateMachine, String> {
        let current = disk.load()?;
        Ok(StateMachine {
            engine,
            instance,
            log,
            last_applied: None,
            membership: Arc::new(Mutex::new(StoredMembership::default())),
            disk,
            current: Arc::new(Mutex::new(current)),
            restored: false,
            built: 0,
        })
    }

    /// A snapshot sent by the leader: into the engine, then on disk.
    async fn install(&mut self, meta: &SnapshotMeta, data: Vec<u8>) -> Result<(), StorageError> {
        self.restore(data.clone(), meta.last_log_id).await?;
        self.last_applied = meta.last_log_id;
        *lock(&self.membership) = meta.last_membership.clone();
        let stored = Stored { meta: meta.clone(), data };
        let saved = self
            .disk
            .save(&stored)
            .map_err(|e| StorageIOError::new(ErrorSubject::Snapshot(None), ErrorVerb::Write, AnyError::new(&e)))?;
        if saved {
            *lock(&self.current) = Some(stored);
        }
        Ok(())
    }

    async fn restore(&mut self, data: Vec<u8>, last: Option<LogId>) -> Result<(), StorageError> {
        let (done, wait) = oneshot::channel();
        self.engine
            .send((self.instance, EngineCmd::Restore { data, last, done }))
            .map_err(|_| engine_gone())?;
        wait.await
            .map_err(|_| engine_gone())?
            .map_err(|e| StorageIOError::new(ErrorSubject::StateMachine, ErrorVerb::Write, AnyError::error(e)).into())
    }
}

/// The state machine ends with its openraft worker (an instance shut
/// down, or its worker stopped on an error): a purge still waiting for a
/// snapshot it would have installed fails rather than wait for good.
impl Drop for StateMachine {
    fn drop(&mut self) {
        self.log.instance_ended(self.instance);
    }
}

fn engine_gone() -> StorageError {
    StorageIOError::write_state_machine(AnyError::error("the engine stopped")).into()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Builds a snapshot from the dump the engine was asked for when the
/// builder was made.
pub struct SnapshotBuilder {
    dump: Option<oneshot::Receiver<(Vec<u8>, Option<LogId>)>>,
    membership: Arc<Mutex<StoredMembership>>,
    disk: Arc<Disk>,
    current: Arc<Mutex<Option<Stored>>>,
    seq: u64,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let dump = self.dump.take().ok_or_else(engine_gone)?;
        let (data, last) = dump.await.map_err(|_| engine_gone())?;
        let membership = lock(&self.membership).clone();
        let id = last.map_or("none".to_string(), |l| format!("{}-{}", l.leader_id, l.index));
        let meta = SnapshotMeta {
            last_log_id: last,
            last_membership: membership,
            snapshot_id: format!("{id}-{}", self.seq),
        };
        let stored = Stored { meta: meta.clone(), data };
        let saved = self
            .disk
            .save(&stored)
            .map_err(|e| StorageIOError::new(ErrorSubject::Snapshot(None), ErrorVerb::Write, AnyError::new(&e)))?;
        let data = stored.data.clone();
        if saved {
            *lock(&self.current) = Some(stored);
        }
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        if !self.restored {
            // A member starting (or rebuilding): its snapshot first.
            self.restored = true;
            let stored = lock(&self.current).clone();
            if let Some(s) = stored {
                self.restore(s.data, s.meta.last_log_id).await?;
                self.last_applied = s.meta.last_log_id;
                *lock(&self.membership) = s.meta.last_membership;
            }
        }
        Ok((self.last_applied, lock(&self.membership).clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<()>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut count = 0;
        let mut writes = Vec::new();
        for entry in entries {
            count += 1;
            self.last_applied = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Blank => writes.push((entry.log_id, Proposal::default())),
                EntryPayload::Normal(proposal) => writes.push((entry.log_id, proposal)),
                EntryPayload::Membership(m) => {
                    *lock(&self.membership) = StoredMembership::new(Some(entry.log_id), m);
                    writes.push((entry.log_id, Proposal::default()));
                }
            }
        }
        if let Some((last, _)) = writes.last() {
            // What applying tells clients, a majority must hold: the
            // leader's own disk and a follower's.
            self.log.wait_synced(last.index).await;
            let (done, wait) = oneshot::channel();
            self.engine
                .send((self.instance, EngineCmd::Apply { entries: writes, done }))
                .map_err(|_| engine_gone())?;
            wait.await.map_err(|_| engine_gone())?;
        }
        Ok(vec![(); count])
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        // Asked now, so that it follows every apply so far.
        let (reply, dump) = oneshot::channel();
        let _ = self.engine.send((self.instance, EngineCmd::Dump { reply }));
        self.built += 1;
        SnapshotBuilder {
            dump: Some(dump),
            membership: self.membership.clone(),
            disk: self.disk.clone(),
            current: self.current.clone(),
            seq: self.built,
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(&mut self, meta: &SnapshotMeta, snapshot: Box<Cursor<Vec<u8>>>) -> Result<(), StorageError> {
        let installed = self.install(meta, snapshot.into_inner()).await;
        if installed.is_err() {
            // The purge that follows an install waits for it: it fails.
            self.log.instance_ended(self.instance);
        }
        installed
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        Ok(lock(&self.current).clone().map(|s| Snapshot {
            meta: s.meta,
            snapshot: Box::new(Cursor::new(s.data)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(term: u64, index: u64, data: &[u8]) -> Stored {
        let last = openraft::LogId::new(openraft::CommittedLeaderId::new(term, 1), index);
        Stored {
            meta: SnapshotMeta {
                last_log_id: Some(last),
                last_membership: StoredMembership::default(),
                snapshot_id: format!("{term}-{index}"),
            },
            data: data.to_vec(),
        }
    }

    fn open(dir: &std::path::Path) -> (Arc<Disk>, Option<Stored>, LogStore) {
        let log = LogStore::open(dir, 1, super::super::log_store::Fsync::No).unwrap();
        let disk = Disk::open(dir.to_path_buf(), log.clone()).unwrap();
        let found = disk.load().unwrap();
        (disk, found, log)
    }

    fn rdb_files(dir: &std::path::Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".rdb"))
            .collect();
        names.sort();
        names
    }

    /// A snapshot's data and metadata come back together: a crash after
    /// the next snapshot's data was written, before its metadata, leaves
    /// the previous snapshot whole (its file is deleted only after), and
    /// the file of the unnamed one goes at start. The log is told what
    /// the disk holds.
    #[test]
    fn a_crash_between_data_and_metadata_keeps_the_previous_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let (disk, found, log) = open(dir.path());
        assert!(found.is_none());
        assert_eq!(log.snapshot_saved.borrow().upto, None);
        assert!(disk.save(&stored(1, 100, b"first")).unwrap());
        assert!(disk.save(&stored(1, 200, b"second")).unwrap());
        assert_eq!(log.snapshot_saved.borrow().upto, Some(200));
        assert_eq!(rdb_files(dir.path()), vec!["snapshot.2.rdb"]);
        // An older snapshot finishing late is not saved over a newer one.
        assert!(!disk.save(&stored(1, 150, b"late")).unwrap());
        drop(disk);
        // The third snapshot's data written, the process killed before
        // its metadata.
        std::fs::write(dir.path().join("snapshot.4.rdb"), b"third").unwrap();
        std::fs::write(dir.path().join("snapshot.5.rdb.tmp"), b"fourth, cut").unwrap();
        let (disk, found, log) = open(dir.path());
        let found = found.unwrap();
        assert_eq!(found.meta.last_log_id.map(|l| l.index), Some(200));
        assert_eq!(found.data, b"second");
        assert_eq!(log.snapshot_saved.borrow().upto, Some(200));
        assert_eq!(rdb_files(dir.path()), vec!["snapshot.2.rdb"]);
        // Numbers go on past every data file seen.
        assert!(disk.save(&stored(2, 300, b"third")).unwrap());
        assert_eq!(rdb_files(dir.path()), vec!["snapshot.5.rdb"]);
    }

    /// A save that fails at its data or at its metadata leaves the
    /// snapshot saved before whole, and the data file it left unnamed goes
    /// at start.
    #[test]
    fn a_save_that_fails_midway_keeps_the_previous_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let (disk, _, _) = open(dir.path());
        assert!(disk.save(&stored(1, 100, b"first")).unwrap());
        assert_eq!(rdb_files(dir.path()), vec!["snapshot.1.rdb"]);
        // The data cannot be put in place (a directory has its name).
        std::fs::create_dir(dir.path().join("snapshot.2.rdb")).unwrap();
        assert!(disk.save(&stored(1, 200, b"second")).is_err());
        // The metadata cannot be written.
        std::fs::create_dir(dir.path().join("snapshot.meta.tmp")).unwrap();
        assert!(disk.save(&stored(1, 300, b"third")).is_err());
        assert!(rdb_files(dir.path()).contains(&"snapshot.3.rdb".to_string()));
        drop(disk);
        std::fs::remove_dir(dir.path().join("snapshot.2.rdb")).unwrap();
        std::fs::remove_dir(dir.path().join("snapshot.meta.tmp")).unwrap();
        let (disk, found, log) = open(dir.path());
        let found = found.unwrap();
        assert_eq!(found.meta.last_log_id.map(|l| l.index), Some(100));
        assert_eq!(found.data, b"first");
        assert_eq!(log.snapshot_saved.borrow().upto, Some(100));
        assert!(rdb_files(dir.path()).iter().all(|n| n == "snapshot.1.rdb" || n.ends_with(".tmp")));
        assert!(disk.save(&stored(1, 400, b"fourth")).unwrap());
        let (_, found, _) = open(dir.path());
        assert_eq!(found.unwrap().data, b"fourth");
    }

    /// A snapshot saved before its file was named by its metadata
    /// (`snapshot.rdb` beside the metadata alone) is read; one whose
    /// named data is missing stops the member.
    #[test]
    fn older_snapshots_are_read_and_a_missing_one_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let old = stored(3, 42, b"old data");
        std::fs::write(dir.path().join("snapshot.meta"), bincode::serialize(&old.meta).unwrap()).unwrap();
        std::fs::write(dir.path().join("snapshot.rdb"), b"old data").unwrap();
        let (disk, found, _) = open(dir.path());
        let found = found.unwrap();
        assert_eq!(found.meta, old.meta);
        assert_eq!(found.data, b"old data");
        assert!(disk.save(&stored(3, 50, b"new")).unwrap());
        assert_eq!(rdb_files(dir.path()), vec!["snapshot.1.rdb"]);
        drop(disk);
        std::fs::remove_file(dir.path().join("snapshot.1.rdb")).unwrap();
        let log = LogStore::open(dir.path(), 1, super::super::log_store::Fsync::No).unwrap();
        assert!(Disk::open(dir.path().to_path_buf(), log).is_err());
    }
}
