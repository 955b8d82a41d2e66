//! Raft-replicated shards (`--replication raft`): three or five keylock
//! processes are one shard, every write reaching each of them through a
//! Raft log, so that an acknowledged write — a granted lock — survives
//! the loss of any minority of them.
//!
//! The consensus engine is openraft (0.9, its storage-v2 traits). It was
//! chosen over tikv's `raft` crate because it brings what that crate
//! leaves to its user — the driver loop, timers, replication streams,
//! snapshot transfer, write-to-reply plumbing, linearizable reads and
//! membership changes — and is actively released; its API is pre-1.0.
//! It runs on a runtime of its own thread ([`shard`]); the engine stays
//! single-threaded and talks to it through channels.
//!
//! How a write goes (see `engine::raft`):
//! 1. The leader runs the command at once, as a standalone server would;
//!    its effects (the effect stream's RESP commands, expiries absolute)
//!    are gathered per batch into a [`Proposal`].
//! 2. The proposal is appended to the Raft log; the batch's replies — and
//!    any output queued after them — wait until a majority holds the
//!    entry on disk (the same gate `appendfsync always` uses).
//! 3. Every member applies committed entries in log order by replaying
//!    the effects, except the leader for the entries it ran itself.
//! 4. A leader that loses its leadership with entries not yet committed
//!    may have run writes the new leader never saw: it drops its dataset
//!    and rebuilds it from the log's committed entries.
//!
//! The log and the vote are kept in `dir/raft/` ([`log_store`]), synced
//! before they count, so a member killed and restarted rebuilds its
//! dataset from its own log and catches up from the leader.

pub mod log_store;
pub mod network;
pub mod shard;
pub mod state_machine;

use std::io::Cursor;

use serde::{Deserialize, Serialize};

/// One member's addresses: where its clients and its Raft messages go.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Member {
    pub client_addr: String,
    pub raft_addr: String,
}

impl std::fmt::Display for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (raft {})", self.client_addr, self.raft_addr)
    }
}

/// A member's identity as a cluster node (`cluster-enabled yes`): the
/// shard's leader is the master of the shard's slots, the other members
/// its replicas, and each member finds which cluster nodes its fellow
/// members are by asking them (the Raft probe's answer carries it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterCard {
    pub node_id: String,
    pub cport: u16,
}

/// What a leader appends: the effects of the writes of one batch, and
/// who ran them (the author skips its own entries when they are applied,
/// unless it rebuilt its dataset since: a new incarnation).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Proposal {
    pub author: u64,
    pub incarnation: u64,
    /// Encoded as bytes rather than as a sequence of numbers: bincode
    /// writes the same (a length, then the bytes), but an entry is
    /// serialized three times (the log, two followers) and deserialized
    /// on each follower, byte by byte otherwise.
    #[serde(with = "serde_bytes")]
    pub effects: Vec<u8>,
}

/// A change of the shard's members, asked for with KEYLOCK ADDMEMBER or
/// DELMEMBER on the leader; made through openraft's joint consensus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MembershipChange {
    /// A new member: first a learner that is sent the log, then a voter
    /// once it has caught up.
    Add(NodeId, Member),
    /// A voter or learner leaves the shard.
    Remove(NodeId),
}

/// A membership change and the client waiting for its outcome.
#[derive(Debug)]
pub struct AdminRequest {
    pub client: crate::db::ClientId,
    pub change: MembershipChange,
}

openraft::declare_raft_types!(
    /// Type configuration of a keylock shard.
    pub TypeConfig:
        D = Proposal,
        R = (),
        NodeId = u64,
        Node = Member,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

pub type NodeId = u64;
pub type Raft = openraft::Raft<TypeConfig>;
pub type LogId = openraft::LogId<NodeId>;
pub type Entry = openraft::Entry<TypeConfig>;
pub type StorageError = openraft::StorageError<NodeId>;
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, Member>;
pub type StoredMembership = openraft::StoredMembership<NodeId, Member>;
pub type Metrics = openraft::RaftMetrics<NodeId, Member>;

/// The shard's members as `raft-members` gives them: `ID=HOST:PORT:RAFTPORT`
/// separated by spaces or commas.
pub fn parse_members(text: &str) -> Result<std::collections::BTreeMap<NodeId, Member>, String> {
    let mut members = std::collections::BTreeMap::new();
    for item in text.split([' ', ',']).filter(|s| !s.is_empty()) {
        let bad = || format!("Invalid raft-members entry '{item}': expected ID=HOST:PORT:RAFTPORT");
        let (id, addr) = item.split_once('=').ok_or_else(bad)?;
        let id: NodeId = id.parse().map_err(|_| bad())?;
        let (host_port, raft_port) = addr.rsplit_once(':').ok_or_else(bad)?;
        let (host, port) = host_port.rsplit_once(':').ok_or_else(bad)?;
        let port: u16 = port.parse().map_err(|_| bad())?;
        let raft_port: u16 = raft_port.parse().map_err(|_| bad())?;
        if id == 0 || members.contains_key(&id) {
            return Err(bad());
        }
        members.insert(
            id,
            Member {
                client_addr: format!("{host}:{port}"),
                raft_addr: format!("{host}:{raft_port}"),
            },
        );
    }
    Ok(members)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_parse() {
        let m = parse_members("1=127.0.0.1:7001:17001, 2=127.0.0.1:7002:17002 3=10.0.0.3:6379:16379").unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m[&3].client_addr, "10.0.0.3:6379");
        assert_eq!(m[&3].raft_addr, "10.0.0.3:16379");
        assert!(parse_members("1=127.0.0.1:7001").is_err());
        assert!(parse_members("0=127.0.0.1:7001:1").is_err());
        assert!(parse_members("1=a:1:2 1=b:1:2").is_err());
    }

    /// Entries written before effects were encoded as bytes read the
    /// same, and are written the same.
    #[test]
    fn proposal_encoding_unchanged() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct Before {
            author: u64,
            incarnation: u64,
            effects: Vec<u8>,
        }
        let before = Before {
            author: 3,
            incarnation: 7,
            effects: b"*1\r\n$4\r\nPING\r\n\x00\xff".to_vec(),
        };
        let now = Proposal {
            author: 3,
            incarnation: 7,
            effects: before.effects.clone(),
        };
        let old_bytes = bincode::serialize(&before).unwrap();
        assert_eq!(bincode::serialize(&now).unwrap(), old_bytes);
        assert_eq!(bincode::deserialize::<Proposal>(&old_bytes).unwrap(), now);
        assert_eq!(bincode::deserialize::<Before>(&bincode::serialize(&now).unwrap()).unwrap(), before);
    }
}
