//! openraft's state machine for a keylock member: committed entries go, in
//! order, to the engine's thread, which replays their effects (see
//! `engine::raft`) and answers when it has; openraft's own bookkeeping
//! (what was applied, the membership) stays here.
//!
//! The dataset is rebuilt from the log at every start (the log is kept
//! whole: snapshots, and the log compaction they allow, are not made
//! yet), so nothing of the state machine is kept on disk.

use std::io::Cursor;

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{AnyError, EntryPayload, OptionalSend, RaftSnapshotBuilder, StorageIOError};
use tokio::sync::{mpsc, oneshot};

use super::{Entry, LogId, Proposal, SnapshotMeta, StorageError, StoredMembership, TypeConfig};

/// What the state machine asks of the engine's thread.
#[derive(Debug)]
pub enum EngineCmd {
    /// Replay these committed entries' effects, in order.
    Apply {
        entries: Vec<(LogId, Proposal)>,
        done: oneshot::Sender<()>,
    },
}

pub struct StateMachine {
    engine: mpsc::UnboundedSender<EngineCmd>,
    last_applied: Option<LogId>,
    last_membership: StoredMembership,
}

impl StateMachine {
    pub fn new(engine: mpsc::UnboundedSender<EngineCmd>) -> StateMachine {
        StateMachine {
            engine,
            last_applied: None,
            last_membership: StoredMembership::default(),
        }
    }
}

fn engine_gone() -> StorageError {
    StorageIOError::write_state_machine(AnyError::error("the engine stopped")).into()
}

fn no_snapshots() -> StorageError {
    StorageIOError::read_snapshot(None, AnyError::error("keylock's Raft members do not make snapshots yet")).into()
}

/// Never used: the configuration asks for no snapshots.
pub struct SnapshotBuilder;

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        Err(no_snapshots())
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        Ok((self.last_applied, self.last_membership.clone()))
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
                EntryPayload::Blank => {}
                EntryPayload::Normal(proposal) => writes.push((entry.log_id, proposal)),
                EntryPayload::Membership(m) => self.last_membership = StoredMembership::new(Some(entry.log_id), m),
            }
        }
        if !writes.is_empty() {
            let (done, wait) = oneshot::channel();
            self.engine
                .send(EngineCmd::Apply { entries: writes, done })
                .map_err(|_| engine_gone())?;
            wait.await.map_err(|_| engine_gone())?;
        }
        Ok(vec![(); count])
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Err(no_snapshots())
    }

    async fn install_snapshot(&mut self, _meta: &SnapshotMeta, _snapshot: Box<Cursor<Vec<u8>>>) -> Result<(), StorageError> {
        Err(no_snapshots())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        Ok(None)
    }
}
