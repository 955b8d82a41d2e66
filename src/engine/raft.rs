//! The engine's side of a Raft-replicated shard (`crate::raft`).
//!
//! - The leader runs commands as a standalone server does; the effect
//!   stream's commands of each batch (SELECT first, so each entry stands
//!   alone) become one proposal, and the output queued since waits until
//!   the entry is committed: the gate of `durable`, where "synced" means
//!   "held by a majority" (see `server::raft`).
//! - A member that is not the leader refuses writes with Redis's replica
//!   error (`READONLY`), runs scripts through Lua so that their writes are
//!   refused too, never expires keys itself (the leader's DELs do, as a
//!   Redis replica waits for its master's), and applies committed entries
//!   by replaying their effects.
//! - The leader skips its own entries when they are applied: it ran them.
//!   A leader that loses its leadership with entries not yet committed
//!   rebuilds its dataset from the log's committed entries.

use std::sync::{Arc, Mutex};

use super::State;
use super::effects::EffectsTap;
use std::collections::{BTreeMap, BTreeSet};

use crate::raft::network::SharedCard;
use crate::raft::{AdminRequest, ClusterCard, LogId, Member, MembershipChange, NodeId, Proposal, Raft};

/// How many entries a leader has in flight at most: each commit round
/// carries what the batches of the one before it wrote, and a few rounds
/// overlap.
pub const WRITERS: u32 = 4;

/// A member's role, as its Raft instance last said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Leader,
    Follower,
    Candidate,
}

/// The engine's view of its shard.
/// How long after a majority acknowledged it (the sending time of what
/// they answered) a leader answers reads. A member that hears from the
/// leader votes for no one else for the election timeout's maximum
/// (openraft's leader lease, 600 ms), so no other leader can be elected
/// within it; half of it leaves room for clock rates and for the
/// metrics' delay.
pub const READ_LEASE: std::time::Duration = std::time::Duration::from_millis(300);

pub struct RaftState {
    pub id: NodeId,
    /// None until the Raft instance is made.
    pub raft: Option<Raft>,
    pub role: Role,
    /// The leader takes writes: it has applied every entry its log held
    /// when it was elected (the committed writes of earlier leaders among
    /// them), so that what it runs sees all of them.
    pub writable: bool,
    /// The log index it must have applied first.
    writable_from: u64,
    /// A majority has acknowledged this member as the leader of its
    /// term. A member restarted after it led comes back as the leader of
    /// its old term until it hears of a newer one, unconfirmed: it takes
    /// no write and claims no slot meanwhile.
    pub confirmed: bool,
    /// When a majority last acknowledged this member as leader, kept by
    /// the Raft thread: it may answer from its dataset until
    /// [`READ_LEASE`] after it.
    pub quorum_acked_at: crate::raft::shard::QuorumAckedAt,
    /// What INFO shows of the log (`raft-fsync`, the commit index known,
    /// the syncs made, the entries kept).
    pub log_stats: Arc<crate::raft::log_store::LogStats>,
    pub term: u64,
    pub leader: Option<(NodeId, Member)>,
    /// The client address of the last leader known (kept while none is).
    pub last_leader: Option<String>,
    /// The shard's members, voters and learners, as configured and then
    /// as the Raft log's membership says.
    pub members: BTreeMap<NodeId, Member>,
    /// Those of them that vote (both configurations' while a change is
    /// half made).
    pub voters: BTreeSet<NodeId>,
    /// Where KEYLOCK ADDMEMBER / DELMEMBER hand their change (see
    /// `server::raft`); None until the Raft instance is made.
    pub admin: Option<tokio::sync::mpsc::UnboundedSender<AdminRequest>>,
    /// When each other member last answered a probe (see
    /// `server::raft::probe_loop`), and those this member holds down
    /// (Sentinel's `s_down`: none for `raft-down-after-milliseconds`).
    pub last_seen: BTreeMap<NodeId, std::time::Instant>,
    pub down: BTreeSet<NodeId>,
    /// Members whose probe task runs.
    pub probing: BTreeSet<NodeId>,
    /// This member's cluster identity as the others' probes are told it.
    pub card: SharedCard,
    /// The other members' cluster identities, as their probes told them.
    pub cluster_ids: BTreeMap<NodeId, ClusterCard>,
    started: std::time::Instant,
    /// Changes with every rebuild of the dataset: entries this member ran
    /// as leader in this incarnation are not replayed.
    pub incarnation: u64,
    /// The number of the Raft instance applying to the dataset: one more
    /// at every rebuild, as the Raft thread counts the instances it makes.
    /// What an instance replaced still sends (its state machine is not
    /// waited for when it shuts down) is dropped: it would apply entries
    /// to the emptied dataset that the new instance applies again.
    pub instance: u64,
    /// The effects recorded since the last proposal.
    pending: Arc<Mutex<Vec<u8>>>,
    tap: u64,
    /// Batches whose effects are queued or proposed and not yet committed.
    pub in_flight: u64,
    /// Effects waiting for the proposal in flight to be committed (group
    /// commit: they go together as the next entry), and the durability
    /// count output queued until then waits for.
    queued: Vec<u8>,
    queued_upto: u64,
    queued_batches: u64,
    /// The proposals in flight, in log order: the durability count each
    /// one's commit releases and the batches it carries. Applying one of
    /// its own entries, the leader releases the output that waited.
    proposed: std::collections::VecDeque<(u64, u64)>,
    /// Writer tasks running, each with a proposal in flight.
    writers: u32,
    /// The last entry applied.
    pub last_applied: Option<LogId>,
    /// Rebuilds of the dataset from the log.
    pub rebuilds: u64,
    /// Snapshots asked for while the leader had writes not yet applied:
    /// made once every write it ran is applied (writes wait meanwhile).
    pending_dumps: Vec<tokio::sync::oneshot::Sender<(Vec<u8>, Option<LogId>)>>,
    /// Snapshots made, and installed from the leader.
    pub snapshots: u64,
    pub installs: u64,
}

impl std::fmt::Debug for RaftState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaftState")
            .field("id", &self.id)
            .field("role", &self.role)
            .field("term", &self.term)
            .field("in_flight", &self.in_flight)
            .finish()
    }
}

impl RaftState {
    pub fn is_leader(&self) -> bool {
        self.role == Role::Leader
    }

    /// The role KEYLOCK CLUSTER and INFO name: a member that does not
    /// vote is a learner (being added), or removed once the shard's
    /// membership no longer has it.
    pub fn role_name(&self) -> &'static str {
        match self.role {
            Role::Leader => "leader",
            Role::Candidate => "candidate",
            Role::Follower if self.voters.contains(&self.id) => "follower",
            Role::Follower if self.members.contains_key(&self.id) => "learner",
            // Started with `raft-join`, and not added yet.
            Role::Follower if self.members.is_empty() => "joining",
            Role::Follower => "removed",
        }
    }
}

impl State {
    /// Joins the engine to its shard: effects are gathered for proposals,
    /// output waits for commits, and the member starts as a follower.
    pub fn attach_raft(&mut self, shard: &crate::raft::shard::Shard) {
        let (id, members, card) = (shard.id, shard.members.clone(), shard.card.clone());
        let pending = Arc::new(Mutex::new(Vec::new()));
        let sink = pending.clone();
        self.key_events.record_expired_deletions();
        // Counted as recorded the moment the effect stream hands them over
        // (after each command, before its reply is queued), so that the
        // reply waits for the entry that carries them.
        let durability = self.durability.clone();
        let tap = self.effects.attach(EffectsTap::aof(move |bytes| {
            sink.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(bytes);
            durability.record(bytes.len());
        }));
        self.durability.set_wait(super::durable::Wait::Synced);
        self.raft = Some(Box::new(RaftState {
            id,
            raft: None,
            role: Role::Follower,
            writable: false,
            writable_from: 0,
            confirmed: false,
            quorum_acked_at: shard.quorum_acked_at.clone(),
            log_stats: shard.log_stats.clone(),
            term: 0,
            leader: None,
            last_leader: None,
            voters: members.keys().copied().collect(),
            members,
            admin: None,
            last_seen: BTreeMap::new(),
            down: BTreeSet::new(),
            probing: BTreeSet::new(),
            card,
            cluster_ids: BTreeMap::new(),
            started: std::time::Instant::now(),
            incarnation: fastrand::u64(..),
            instance: 0,
            pending,
            tap,
            in_flight: 0,
            queued: Vec::new(),
            queued_upto: 0,
            queued_batches: 0,
            proposed: Default::default(),
            writers: 0,
            last_applied: None,
            rebuilds: 0,
            pending_dumps: Vec::new(),
            snapshots: 0,
            installs: 0,
        }));
        self.set_raft_follower(true);
    }

    /// How many other members hold every write made so far, once the
    /// output queued now is released (after the commit of those writes):
    /// a majority less the leader at least, more when the leader's
    /// replication streams have them already.
    pub fn raft_replicas_holding_writes(&self) -> usize {
        let Some(r) = self.raft.as_deref() else { return 0 };
        let quorum_others = r.voters.len() / 2;
        let Some(raft) = r.raft.as_ref() else { return quorum_others };
        let metrics = raft.metrics().borrow().clone();
        let last = metrics.last_log_index.unwrap_or(0);
        // Entries queued and not yet proposed come after `last`.
        if r.queued_batches > 0 {
            return quorum_others;
        }
        let matched = metrics.replication.as_ref().map_or(0, |rep| {
            rep.iter()
                .filter(|(id, m)| **id != r.id && m.is_some_and(|m| m.index >= last))
                .count()
        });
        matched.max(quorum_others)
    }

    /// The shard's members, voters and learners (none on a standalone
    /// server).
    pub fn raft_members(&self) -> BTreeMap<NodeId, Member> {
        self.raft.as_deref().map(|r| r.members.clone()).unwrap_or_default()
    }

    /// How many of the shard's members vote.
    pub fn raft_voters(&self) -> usize {
        self.raft.as_deref().map_or(0, |r| r.voters.len())
    }

    /// The membership the Raft log holds now (after a change, or as a
    /// restarted member's log says).
    pub fn raft_membership(&mut self, voters: BTreeSet<NodeId>, members: BTreeMap<NodeId, Member>) {
        let Some(r) = self.raft.as_deref_mut() else { return };
        if r.voters == voters && r.members == members {
            return;
        }
        let list = |ids: &mut dyn Iterator<Item = NodeId>| ids.map(|i| i.to_string()).collect::<Vec<_>>().join(",");
        crate::log::notice(format_args!(
            "Raft: the shard's voters are now {{{}}}, learners {{{}}}",
            list(&mut voters.iter().copied()),
            list(&mut members.keys().copied().filter(|id| !voters.contains(id))),
        ));
        r.voters = voters;
        r.members = members;
    }

    /// A probe of member `id` was answered (`ok`) or not. Returns whether
    /// the member is now down where it was not (`Some(true)`), or up
    /// again (`Some(false)`): Sentinel's `+sdown` / `-sdown`.
    pub fn raft_probed(&mut self, id: NodeId, ok: bool, now: std::time::Instant, down_after: std::time::Duration) -> Option<bool> {
        let r = self.raft.as_deref_mut()?;
        if ok {
            r.last_seen.insert(id, now);
        }
        if !r.members.contains_key(&id) {
            r.down.remove(&id);
            return None;
        }
        let seen = r.last_seen.get(&id).copied().unwrap_or(r.started);
        let down = now.saturating_duration_since(seen) > down_after;
        if down == r.down.contains(&id) {
            return None;
        }
        if down {
            r.down.insert(id);
        } else {
            r.down.remove(&id);
        }
        Some(down)
    }

    /// A member's probe told its cluster identity.
    pub fn raft_learn_card(&mut self, id: NodeId, card: ClusterCard) {
        let Some(r) = self.raft.as_deref_mut() else { return };
        if r.members.contains_key(&id) && r.cluster_ids.get(&id) != Some(&card) {
            r.cluster_ids.insert(id, card);
            self.raft_cluster_sync();
        }
    }

    /// In cluster mode, the node's role and slots follow the shard's
    /// (see `Cluster::follow_shard`); this member's own identity is kept
    /// for the others' probes.
    pub fn raft_cluster_sync(&mut self) {
        let now = self.clock.now_ms();
        // A leader cut off from its shard (openraft's does not step down
        // by itself) must not take back the slots the member elected in
        // its place claimed: it leads only while its lease runs.
        let lapsed = self.raft_lease_lapsed();
        let (Some(c), Some(r)) = (self.cluster.as_deref_mut(), self.raft.as_deref()) else {
            return;
        };
        let card = ClusterCard {
            node_id: c.myself().id.clone(),
            cport: c.myself().cport,
        };
        {
            let mut told = r.card.lock().unwrap_or_else(|e| e.into_inner());
            if told.as_ref() != Some(&card) {
                *told = Some(card);
            }
        }
        c.nodes[0].repl_offset = r.last_applied.map_or(0, |l| l.index);
        let mates: Vec<crate::cluster::ShardMate> = r
            .cluster_ids
            .iter()
            .filter(|(id, _)| **id != r.id)
            .filter_map(|(id, card)| {
                let (ip, port) = r.members.get(id)?.client_addr.rsplit_once(':')?;
                Some(crate::cluster::ShardMate {
                    id: card.node_id.clone(),
                    ip: ip.to_string(),
                    port: port.parse().ok()?,
                    cport: card.cport,
                })
            })
            .collect();
        let leader = r
            .leader
            .as_ref()
            .filter(|(id, _)| *id != r.id)
            .and_then(|(id, _)| r.cluster_ids.get(id))
            .map(|card| card.node_id.clone());
        if c.follow_shard(r.is_leader() && r.confirmed && !lapsed, leader.as_deref(), &mates, now) > 0 {
            self.cluster_update_state();
        }
    }

    /// Whether this member holds member `id` down, and how long ago it
    /// last answered (ms).
    pub fn raft_liveness(&self, id: NodeId) -> (bool, u64) {
        let Some(r) = self.raft.as_deref() else { return (false, 0) };
        if id == r.id {
            return (false, 0);
        }
        let seen = r.last_seen.get(&id).copied().unwrap_or(r.started);
        (r.down.contains(&id), seen.elapsed().as_millis() as u64)
    }

    /// KEYLOCK ADDMEMBER / DELMEMBER: checks the change against the
    /// membership this leader knows, and hands it to the Raft thread; the
    /// client's reply comes when it is made (or fails).
    pub fn raft_request_change(&mut self, client: crate::db::ClientId, change: MembershipChange) -> Result<(), String> {
        let Some(r) = self.raft.as_deref() else {
            return Err("this server is not a member of a Raft shard (replication raft)".into());
        };
        if !r.is_leader() {
            return Err(match &r.leader {
                Some((id, m)) => format!("only the shard's leader changes its members: member {id} at {}", m.client_addr),
                None => "only the shard's leader changes its members, and it has none now".into(),
            });
        }
        match &change {
            MembershipChange::Add(id, member) => {
                if r.voters.contains(id) {
                    return Err(format!("member {id} is a voter of the shard already"));
                }
                if let Some((other, _)) = r
                    .members
                    .iter()
                    .find(|(other, m)| *other != id && (m.client_addr == member.client_addr || m.raft_addr == member.raft_addr))
                {
                    return Err(format!("member {other} has that address already"));
                }
            }
            MembershipChange::Remove(id) => {
                if !r.members.contains_key(id) {
                    return Err(format!("no member {id} in the shard"));
                }
                if r.voters.len() == 1 && r.voters.contains(id) {
                    return Err(format!("member {id} is the shard's only voter"));
                }
            }
        }
        let Some(admin) = r.admin.as_ref() else {
            return Err("the shard is not running yet".into());
        };
        admin
            .send(AdminRequest { client, change })
            .map_err(|_| "the shard is not running".to_string())
    }

    /// Whether this shard member leads with a read lease running (None:
    /// not a shard member): what makes it its shard's voice in the
    /// cluster's failover votes.
    pub fn raft_shard_leading(&self) -> Option<bool> {
        let r = self.raft.as_deref()?;
        Some(r.is_leader() && r.confirmed && !self.raft_lease_lapsed())
    }

    /// Whether this member leads and its read lease has lapsed: it has not
    /// heard from a majority for long enough that another member may
    /// have been elected, so what its dataset says may be stale.
    pub fn raft_lease_lapsed(&self) -> bool {
        self.raft.as_deref().is_some_and(|r| {
            let acked_at = *r.quorum_acked_at.lock().unwrap_or_else(|e| e.into_inner());
            // A single voter is its own majority: no one else can lead.
            r.is_leader() && r.voters.len() > 1 && acked_at.is_none_or(|at| std::time::Instant::now() >= at + READ_LEASE)
        })
    }

    /// Whether this member takes writes: it is the leader (or the server
    /// is not a shard member).
    pub fn raft_accepts_writes(&self) -> bool {
        self.raft.as_ref().is_none_or(|r| r.writable)
    }

    /// Followers keep keys past their deadline (reads do not see them)
    /// and run no expiry cycle: the leader's DELs remove them.
    fn set_raft_follower(&mut self, follower: bool) {
        self.raft_follower = follower;
        self.refresh_expiry_mode();
    }

    /// Moves the effects recorded since the last call to the queue of the
    /// next proposal, and says whether a writer must be started (fewer
    /// than [`WRITERS`] have a proposal in flight; the caller starts it). A member that is not the leader drops them (a replayed
    /// entry records none; nothing else writes there).
    pub fn queue_raft_effects(&mut self) -> bool {
        let Some(r) = self.raft.as_deref_mut() else { return false };
        let effects = std::mem::take(&mut *r.pending.lock().unwrap_or_else(|e| e.into_inner()));
        if effects.is_empty() {
            return false;
        }
        if !r.is_leader() {
            // Nothing to wait for: no entry will carry them.
            self.durability.committed_to(self.durability.recorded());
            return false;
        }
        // The next batch's effects start with their SELECT, so that each
        // entry stands alone.
        self.effects.reselect(r.tap);
        r.in_flight += 1;
        r.queued_batches += 1;
        r.queued.extend_from_slice(&effects);
        r.queued_upto = self.durability.recorded();
        if r.writers < WRITERS {
            r.writers += 1;
            true
        } else {
            false
        }
    }

    /// The next entry to propose: every batch queued since the last one
    /// (one commit for all of them); None when nothing is queued (the
    /// writer stops). The caller proposes it at once, so that proposals
    /// reach the log in the order they are made here.
    pub fn next_raft_proposal(&mut self) -> Option<Proposal> {
        let r = self.raft.as_deref_mut()?;
        if r.queued.is_empty() {
            r.writers = r.writers.saturating_sub(1);
            return None;
        }
        let proposal = Proposal {
            author: r.id,
            incarnation: r.incarnation,
            effects: std::mem::take(&mut r.queued),
        };
        let batches = std::mem::take(&mut r.queued_batches);
        r.proposed.push_back((r.queued_upto, batches));
        Some(proposal)
    }

    /// The writer met an error (the member no longer leads): the next
    /// batch starts another, if this member leads again first.
    pub fn raft_writer_stopped(&mut self) {
        if let Some(r) = self.raft.as_deref_mut() {
            r.writers = r.writers.saturating_sub(1);
        }
    }

    /// The Raft instance says who leads now. Returns true when this
    /// member must rebuild its dataset: it stopped leading with proposals
    /// that may never be committed.
    pub fn raft_role_changed(&mut self, role: Role, term: u64, leader: Option<(NodeId, Member)>, last_log_index: u64) -> bool {
        let Some(r) = self.raft.as_deref_mut() else { return false };
        let was_leader = r.is_leader();
        // Leading a later term than the one it led: it lost the lead in
        // between (the reports it missed came while the engine was busy),
        // with the proposals it had in flight then.
        let new_term = term != r.term;
        r.role = role;
        r.term = term;
        r.leader = leader;
        let leader_now = role == Role::Leader;
        let lost_lead = was_leader && (!leader_now || new_term);
        let unproposed = !r.pending.lock().unwrap_or_else(|e| e.into_inner()).is_empty();
        let lost_writes = lost_lead && (r.in_flight > 0 || unproposed);
        if leader_now && (!was_leader || new_term) {
            crate::log::notice(format_args!("Raft: leading the shard (term {term})"));
            let tap = r.tap;
            self.effects.reselect(tap);
            r.writable_from = last_log_index;
        } else if was_leader && !leader_now {
            crate::log::notice(format_args!("Raft: no longer leading the shard (term {term})"));
        }
        if !leader_now || lost_lead {
            r.writable = false;
            r.confirmed = false;
            self.set_raft_follower(true);
        }
        self.raft_check_writable();
        self.raft_cluster_sync();
        lost_writes
    }

    /// Whether a majority has acknowledged this leader, as the Raft
    /// instance reports it.
    pub fn raft_quorum_acked(&mut self, acked: bool) {
        let Some(r) = self.raft.as_deref_mut() else { return };
        if !acked || !r.is_leader() || r.confirmed {
            return;
        }
        r.confirmed = true;
        self.raft_check_writable();
        self.raft_cluster_sync();
    }

    /// A new leader becomes writable (expiry runs, writes are taken) once
    /// a majority acknowledged it and it applied every entry its log held
    /// when it was elected.
    fn raft_check_writable(&mut self) {
        let Some(r) = self.raft.as_deref_mut() else { return };
        if r.writable || !r.is_leader() || !r.confirmed || r.last_applied.map_or(0, |l| l.index) < r.writable_from {
            return;
        }
        r.writable = true;
        self.set_raft_follower(false);
    }

    /// Applies committed entries: each one's effects are replayed, except
    /// those this member ran itself as leader in this incarnation.
    pub fn raft_apply(&mut self, scripts: &mut super::Scripts, entries: Vec<(LogId, Proposal)>) {
        let Some(r) = self.raft.as_deref_mut() else { return };
        let (me, incarnation) = (r.id, r.incarnation);
        for (log_id, proposal) in entries {
            if let Some(r) = self.raft.as_deref_mut() {
                r.last_applied = Some(log_id);
            }
            if proposal.author == me && proposal.incarnation == incarnation {
                // One of this leader's proposals, committed: the output
                // that waited for it goes (it ran when it was made).
                if let Some(r) = self.raft.as_deref_mut()
                    && let Some((upto, batches)) = r.proposed.pop_front()
                {
                    r.in_flight = r.in_flight.saturating_sub(batches);
                    self.durability.committed_to(upto);
                }
                continue;
            }
            match super::aof::parse_commands(&proposal.effects) {
                Ok(commands) => {
                    if let Err(e) = super::aof::replay(self, scripts, commands, "Raft-apply-client") {
                        crate::log::warning(format_args!("Raft: entry {log_id} did not apply cleanly: {e}"));
                    }
                }
                Err(e) => crate::log::warning(format_args!("Raft: entry {log_id} is damaged: {e}")),
            }
        }
        self.flush_effects();
        self.raft_check_writable();
        self.raft_dumps_due(scripts);
    }

    /// openraft asks for a snapshot: the dataset as an RDB file (every
    /// key, deadlines included) and the last entry applied to it. A
    /// leader whose engine holds writes not yet applied (it ran them
    /// before their commit) makes it once they are, holding new writes
    /// back meanwhile, so that the file holds exactly the log up to that
    /// entry.
    pub fn raft_dump(&mut self, scripts: &super::Scripts, reply: tokio::sync::oneshot::Sender<(Vec<u8>, Option<LogId>)>) {
        let Some(r) = self.raft.as_deref_mut() else { return };
        if r.in_flight > 0 {
            r.pending_dumps.push(reply);
            self.pause_clients(false, std::time::Instant::now() + std::time::Duration::from_secs(10));
            return;
        }
        let last = r.last_applied;
        r.snapshots += 1;
        let mut data = Vec::new();
        if let Err(e) = self.write_snapshot(&mut data, &scripts.library_codes(), false) {
            crate::log::warning(format_args!("Raft: the snapshot could not be made: {e}"));
        }
        let _ = reply.send((data, last));
    }

    /// After a commit: snapshots that waited for every write to be
    /// applied are made, and writes go on.
    pub fn raft_dumps_due(&mut self, scripts: &super::Scripts) {
        let Some(r) = self.raft.as_deref_mut() else { return };
        if r.pending_dumps.is_empty() || r.in_flight > 0 {
            return;
        }
        let pending = std::mem::take(&mut r.pending_dumps);
        for reply in pending {
            self.raft_dump(scripts, reply);
        }
        self.unpause();
    }

    /// A snapshot replaces the dataset (a member starting from its own,
    /// or one too far behind sent the leader's).
    pub fn raft_restore(&mut self, scripts: &mut super::Scripts, data: &[u8], last: Option<LogId>) -> Result<(), String> {
        let options = super::persistence::decode_options(&self.params);
        let loaded = State::read_replica_snapshot(data, self.dbs.len(), &options, &mut |_| true)?;
        self.replace_dataset(scripts, loaded);
        if let Some(r) = self.raft.as_deref_mut() {
            r.last_applied = last;
            r.installs += 1;
        }
        Ok(())
    }

    /// Before a rebuild: the dataset and functions emptied, every client
    /// disconnected with its waiting output dropped (it would tell of
    /// writes that may be lost), a new incarnation so that every entry is
    /// replayed.
    pub fn raft_reset_dataset(&mut self, scripts: &mut super::Scripts) {
        crate::log::warning(format_args!(
            "Raft: stopped leading with writes not yet committed: rebuilding the dataset from the log"
        ));
        for db in &mut self.dbs {
            db.clear();
        }
        let limit = self.runtime.lua_memory_limit;
        let _ = scripts.reset_functions(limit);
        // Their waiting output is dropped, not sent: it may tell of writes
        // the shard never committed.
        for c in self.clients.values() {
            c.outbox.close_now();
        }
        if let Some(r) = self.raft.as_deref_mut() {
            r.incarnation = fastrand::u64(..);
            r.instance += 1;
            r.in_flight = 0;
            r.queued.clear();
            r.queued_batches = 0;
            r.proposed.clear();
            r.rebuilds += 1;
            r.last_applied = None;
            r.pending.lock().unwrap_or_else(|e| e.into_inner()).clear();
            r.pending_dumps.clear();
        }
        // Nothing recorded before may hold output any more.
        self.durability.committed_to(self.durability.recorded());
    }

    /// How far each member's log is known to be, as the leader's
    /// replication streams say: (id, member, matched index, lag in
    /// entries); None on a member that does not lead.
    pub fn raft_progress(&self) -> Vec<(NodeId, Member, Option<u64>, Option<u64>)> {
        let Some(r) = self.raft.as_deref() else { return Vec::new() };
        let metrics = r.raft.as_ref().map(|raft| raft.metrics().borrow().clone());
        let last = metrics.as_ref().and_then(|m| m.last_log_index).unwrap_or(0);
        let replication = metrics.as_ref().and_then(|m| m.replication.clone());
        r.members
            .iter()
            .map(|(id, m)| {
                let matched = if *id == r.id && r.is_leader() {
                    Some(last)
                } else {
                    replication.as_ref().and_then(|rep| rep.get(id).map(|l| l.map_or(0, |l| l.index)))
                };
                (*id, m.clone(), matched, matched.map(|x| last.saturating_sub(x)))
            })
            .collect()
    }

    /// KEYLOCK CLUSTER's reply for a shard member.
    pub fn raft_view(&self) -> Option<crate::reply::Reply> {
        use crate::reply::Reply;
        let r = self.raft.as_deref()?;
        let text = |s: String| Reply::Bulk(bytes::Bytes::from(s));
        let members = self
            .raft_progress()
            .into_iter()
            .map(|(id, m, matched, lag)| {
                Reply::Map(vec![
                    (Reply::bulk_static("id"), Reply::Int(id as i64)),
                    (Reply::bulk_static("address"), text(m.client_addr)),
                    (Reply::bulk_static("raft-address"), text(m.raft_addr)),
                    (
                        Reply::bulk_static("role"),
                        Reply::bulk_static(if r.leader.as_ref().is_some_and(|(l, _)| *l == id) {
                            "leader"
                        } else if r.voters.contains(&id) {
                            "follower"
                        } else {
                            "learner"
                        }),
                    ),
                    (Reply::bulk_static("matched"), matched.map_or(Reply::Nil, |m| Reply::Int(m as i64))),
                    (Reply::bulk_static("lag"), lag.map_or(Reply::Nil, |l| Reply::Int(l as i64))),
                ])
            })
            .collect();
        Some(Reply::Map(vec![
            (Reply::bulk_static("mode"), Reply::bulk_static("raft")),
            (Reply::bulk_static("id"), Reply::Int(r.id as i64)),
            (Reply::bulk_static("role"), Reply::bulk_static(r.role_name())),
            (Reply::bulk_static("writable"), Reply::Bool(r.writable)),
            (Reply::bulk_static("term"), Reply::Int(r.term as i64)),
            (
                Reply::bulk_static("leader"),
                r.leader.as_ref().map_or(Reply::Nil, |(id, _)| Reply::Int(*id as i64)),
            ),
            (
                Reply::bulk_static("committed"),
                Reply::Int(r.log_stats.committed.load(std::sync::atomic::Ordering::Relaxed) as i64),
            ),
            (
                Reply::bulk_static("applied"),
                Reply::Int(r.last_applied.map_or(0, |l| l.index) as i64),
            ),
            (Reply::bulk_static("in-flight"), Reply::Int(r.in_flight as i64)),
            (Reply::bulk_static("rebuilds"), Reply::Int(r.rebuilds as i64)),
            (Reply::bulk_static("snapshots"), Reply::Int(r.snapshots as i64)),
            (Reply::bulk_static("members"), Reply::Array(members)),
        ]))
    }

    /// INFO replication's lines for a shard member.
    pub fn raft_info(&self, out: &mut String) {
        use std::fmt::Write;
        let Some(r) = self.raft.as_deref() else { return };
        let _ = write!(
            out,
            "raft_id:{}\r\nraft_role:{}\r\nraft_term:{}\r\nraft_leader:{}\r\nraft_committed:{}\r\nraft_applied:{}\r\nraft_in_flight:{}\r\nraft_rebuilds:{}\r\nraft_snapshots:{}\r\nraft_snapshots_installed:{}\r\nraft_fsync:{}\r\nraft_log_syncs:{}\r\nraft_log_entries:{}\r\nraft_log_memory:{}\r\n",
            r.id,
            r.role_name(),
            r.term,
            r.leader.as_ref().map_or(String::new(), |(id, m)| format!("{id}@{}", m.client_addr)),
            r.log_stats.committed.load(std::sync::atomic::Ordering::Relaxed),
            r.last_applied.map_or(0, |l| l.index),
            r.in_flight,
            r.rebuilds,
            r.snapshots,
            r.installs,
            r.log_stats.fsync.name(),
            r.log_stats.syncs.load(std::sync::atomic::Ordering::Relaxed),
            r.log_stats.entries.load(std::sync::atomic::Ordering::Relaxed),
            r.log_stats.cached_bytes.load(std::sync::atomic::Ordering::Relaxed),
        );
        for (id, m, matched, lag) in self.raft_progress() {
            if let (Some(matched), Some(lag)) = (matched, lag) {
                let _ = write!(out, "raft_member{id}:addr={},matched={matched},lag={lag}\r\n", m.client_addr);
            }
        }
    }
}
