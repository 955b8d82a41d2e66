//! openraft's state machine for a keylock member: committed entries go, in
//! order, to the engine's thread, which replays their effects (see
//! `engine::raft`) and answers when it has; openraft's own bookkeeping
//! (what was applied, the membership) stays here.
//!
//! Snapshots are the dataset as an RDB file (every key, deadlines
//! included, and the function libraries), made on the engine's thread
//! when openraft asks for one and kept in `dir/raft/snapshot.rdb` with its
//! metadata in `snapshot.meta`; the log before it is then dropped. A
//! member that starts loads its snapshot into the engine first and
//! applies the log's entries after it; one too far behind is sent the
//! leader's snapshot.

use std::io::Cursor;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{AnyError, EntryPayload, ErrorSubject, ErrorVerb, OptionalSend, RaftSnapshotBuilder, StorageIOError};
use tokio::sync::{mpsc, oneshot};

use super::log_store::LogStore;
use super::{Entry, LogId, Proposal, SnapshotMeta, StorageError, StoredMembership, TypeConfig};

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

#[derive(Debug)]
struct Disk {
    dir: PathBuf,
}

impl Disk {
    fn load(&self) -> Option<Stored> {
        let meta = std::fs::read(self.dir.join("snapshot.meta")).ok()?;
        let meta: SnapshotMeta = bincode::deserialize(&meta).ok()?;
        let data = std::fs::read(self.dir.join("snapshot.rdb")).ok()?;
        Some(Stored { meta, data })
    }

    /// The data first, then the metadata that points at it, each synced
    /// and renamed into place.
    fn save(&self, s: &Stored) -> std::io::Result<()> {
        let meta = bincode::serialize(&s.meta).map_err(std::io::Error::other)?;
        for (name, bytes) in [("snapshot.rdb", &s.data[..]), ("snapshot.meta", &meta[..])] {
            let tmp = self.dir.join(format!("{name}.tmp"));
            let mut f = std::fs::File::create(&tmp)?;
            std::io::Write::write_all(&mut f, bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, self.dir.join(name))?;
        }
        std::fs::File::open(&self.dir)?.sync_all()
    }
}

pub struct StateMachine {
    engine: mpsc::UnboundedSender<EngineCmd>,
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
    pub fn new(engine: mpsc::UnboundedSender<EngineCmd>, dir: PathBuf, log: LogStore) -> StateMachine {
        let disk = Disk { dir };
        let current = disk.load();
        StateMachine {
            engine,
            log,
            last_applied: None,
            membership: Arc::new(Mutex::new(StoredMembership::default())),
            disk: Arc::new(disk),
            current: Arc::new(Mutex::new(current)),
            restored: false,
            built: 0,
        }
    }

    async fn restore(&mut self, data: Vec<u8>, last: Option<LogId>) -> Result<(), StorageError> {
        let (done, wait) = oneshot::channel();
        self.engine
            .send(EngineCmd::Restore { data, last, done })
            .map_err(|_| engine_gone())?;
        wait.await
            .map_err(|_| engine_gone())?
            .map_err(|e| StorageIOError::new(ErrorSubject::StateMachine, ErrorVerb::Write, AnyError::error(e)).into())
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
        self.disk
            .save(&stored)
            .map_err(|e| StorageIOError::new(ErrorSubject::Snapshot(None), ErrorVerb::Write, AnyError::new(&e)))?;
        let data = stored.data.clone();
        *lock(&self.current) = Some(stored);
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
                .send(EngineCmd::Apply { entries: writes, done })
                .map_err(|_| engine_gone())?;
            wait.await.map_err(|_| engine_gone())?;
        }
        Ok(vec![(); count])
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        // Asked now, so that it follows every apply so far.
        let (reply, dump) = oneshot::channel();
        let _ = self.engine.send(EngineCmd::Dump { reply });
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
        let data = snapshot.into_inner();
        self.restore(data.clone(), meta.last_log_id).await?;
        self.last_applied = meta.last_log_id;
        *lock(&self.membership) = meta.last_membership.clone();
        let stored = Stored { meta: meta.clone(), data };
        self.disk
            .save(&stored)
            .map_err(|e| StorageIOError::new(ErrorSubject::Snapshot(None), ErrorVerb::Write, AnyError::new(&e)))?;
        *lock(&self.current) = Some(stored);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        Ok(lock(&self.current).clone().map(|s| Snapshot {
            meta: s.meta,
            snapshot: Box::new(Cursor::new(s.data)),
        }))
    }
}
