//! Redis Cluster, as `cluster-enabled yes` makes a redis-server 7.0 a
//! cluster node: the 16384 hash slots ([`slot`]) and which node serves
//! each, the nodes this one knows with their addresses, flags and
//! configuration epochs, the slots being migrated, the cluster's state,
//! and `nodes.conf` ([`config_file`]). The CLUSTER commands
//! (`commands::cluster`) read and change it; the command pipeline asks
//! [`Cluster::route`] where a command's keys live and answers `MOVED`,
//! `ASK`, `CROSSSLOT`, `TRYAGAIN` or `CLUSTERDOWN` as Redis's
//! `getNodeByQuery` / `clusterRedirectClient` do; nodes learn each other
//! and the slot map over the cluster bus ([`bus`]).
//!
//! Every node talks to every other directly over the bus, each message
//! carrying its sender's whole claim (slots and epoch) and what it knows
//! of the others, so a 3- to 10-node cluster converges within a few
//! hundred milliseconds. Slot ownership follows Redis's rule: a claim
//! with a greater configuration epoch wins. Failure detection is Redis's
//! PFAIL (a node that has not answered within `cluster-node-timeout`) and
//! FAIL (a majority of masters saw it PFAIL); failover is not done here:
//! the Raft-replicated shards decide leadership.

pub mod bus;
pub mod config_file;
pub mod slot;

use std::collections::{BTreeMap, BTreeSet, HashMap};

pub use slot::{SLOTS, key_hash_slot};

/// A node's flags (cluster.h's `CLUSTER_NODE_*`), in the order CLUSTER
/// NODES prints them.
pub mod flag {
    pub const MYSELF: u16 = 1;
    pub const MASTER: u16 = 2;
    pub const SLAVE: u16 = 4;
    pub const PFAIL: u16 = 8;
    pub const FAIL: u16 = 16;
    pub const HANDSHAKE: u16 = 32;
    pub const NOADDR: u16 = 64;
    pub const MEET: u16 = 128;
    /// A master that had replicas, or took over from one (cluster.h's
    /// `CLUSTER_NODE_MIGRATE_TO`): a replica may migrate to it once it
    /// has none working. Neither shown nor told.
    pub const MIGRATE_TO: u16 = 256;
    pub const NOFAILOVER: u16 = 512;

    /// Names as CLUSTER NODES shows them.
    pub const NAMES: &[(u16, &str)] = &[
        (MYSELF, "myself"),
        (MASTER, "master"),
        (SLAVE, "slave"),
        (PFAIL, "fail?"),
        (FAIL, "fail"),
        (HANDSHAKE, "handshake"),
        (NOADDR, "noaddr"),
        (NOFAILOVER, "nofailover"),
    ];
}

/// No node serves the slot.
const UNASSIGNED: u16 = u16::MAX;

/// How long a forgotten node is not added back from what others say
/// (cluster.c's `CLUSTER_BLACKLIST_TTL`), in ms.
const BLACKLIST_TTL_MS: u64 = 60_000;
/// How long a master waits after start before serving (Redis's
/// `CLUSTER_WRITABLE_DELAY`), in ms.
const WRITABLE_DELAY_MS: u64 = 2000;
/// Bounds of the wait of a master that was in a minority partition.
const MIN_REJOIN_DELAY_MS: u64 = 500;
const MAX_REJOIN_DELAY_MS: u64 = 5000;
/// How many node timeouts a master with slots stays FAIL once reachable
/// again (Redis's `CLUSTER_FAIL_UNDO_TIME_MULT`).
const FAIL_UNDO_TIME_MULT: u64 = 2;
/// How many node timeouts a failure report is valid for.
const FAIL_REPORT_VALIDITY_MULT: u64 = 2;
/// How long a master stays orphaned before a replica migrates to it
/// (`CLUSTER_SLAVE_MIGRATION_DELAY`), ms: time for its own replicas to
/// tell that they follow it after a failover.
const REPLICA_MIGRATION_DELAY_MS: u64 = 5000;

/// One node of the cluster, this one included.
#[derive(Debug, Clone)]
pub struct Node {
    /// 40 lowercase hex characters.
    pub id: String,
    /// Empty until known (this node's own address is learned from the
    /// first MEET it receives, as Redis learns it).
    pub ip: String,
    pub port: u16,
    pub cport: u16,
    pub hostname: String,
    pub flags: u16,
    pub master: Option<String>,
    pub config_epoch: u64,
    /// When the outstanding ping was sent (0: none), ms.
    pub ping_sent: u64,
    /// When the last answer came, ms.
    pub pong_received: u64,
    /// When the node was created (a handshake times out), ms.
    pub ctime: u64,
    /// When it was flagged FAIL, ms.
    pub fail_time: u64,
    /// The outbound bus link is up.
    pub link_up: bool,
    /// When the outbound link was created, ms.
    pub link_ctime: u64,
    /// An inbound bus connection from this node is open.
    pub inbound_links: u32,
    /// The outbound link task serving this node (see [`bus`]).
    pub link_token: u64,
    /// DEBUG CLUSTERLINK KILLs of the outbound link and of the inbound
    /// ones: each ends the links open then.
    pub link_kills: u64,
    pub inbound_kills: u64,
    /// When this node last granted a vote to a replica of this master,
    /// ms (0: never).
    pub voted_time: u64,
    /// Masters that reported this node PFAIL or FAIL, with when, ms.
    pub fail_reports: HashMap<String, u64>,
    pub numslots: u32,
    /// Bytes taken by the outbound link and not yet written.
    pub sending: usize,
    /// How many replicas this master had at the last look.
    pub replicas_seen: usize,
    /// Since when this master has been orphaned (serving slots, no
    /// working replica), ms (0: it is not).
    pub orphaned_time: u64,
    /// The replication offset the node last told (a Raft shard member's
    /// applied log index).
    pub repl_offset: u64,
}

impl Node {
    fn new(id: String, flags: u16, now_ms: u64) -> Node {
        Node {
            id,
            ip: String::new(),
            port: 0,
            cport: 0,
            hostname: String::new(),
            flags,
            master: None,
            config_epoch: 0,
            ping_sent: 0,
            pong_received: 0,
            ctime: now_ms,
            fail_time: 0,
            link_up: false,
            link_ctime: 0,
            inbound_links: 0,
            link_token: 0,
            link_kills: 0,
            inbound_kills: 0,
            voted_time: 0,
            fail_reports: HashMap::new(),
            numslots: 0,
            sending: 0,
            replicas_seen: 0,
            orphaned_time: 0,
            repl_offset: 0,
        }
    }

    pub fn is_master(&self) -> bool {
        self.flags & flag::MASTER != 0
    }

    pub fn has(&self, f: u16) -> bool {
        self.flags & f != 0
    }

    pub fn failed(&self) -> bool {
        self.flags & flag::FAIL != 0
    }

    /// The flags as CLUSTER NODES prints them.
    pub fn flag_names(&self) -> String {
        let names: Vec<&str> = flag::NAMES.iter().filter(|(f, _)| self.flags & f != 0).map(|(_, n)| *n).collect();
        if names.is_empty() { "noflags".to_string() } else { names.join(",") }
    }
}

/// `cluster-preferred-endpoint-type`: what names a node to clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndpointType {
    Ip,
    Hostname,
    Unknown,
}

impl EndpointType {
    pub fn from_name(name: &str) -> EndpointType {
        match name {
            "hostname" => EndpointType::Hostname,
            "unknown-endpoint" => EndpointType::Unknown,
            _ => EndpointType::Ip,
        }
    }
}

/// Why a command cannot be served here (cluster.c's `CLUSTER_REDIR_*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redirect {
    CrossSlot,
    Unstable,
    DownState,
    DownReadOnlyState,
    DownUnbound,
    Moved(u16, String),
    Ask(u16, String),
}

impl Redirect {
    /// The error a client gets (`clusterRedirectClient`).
    pub fn client_error(&self) -> String {
        match self {
            Redirect::CrossSlot => "CROSSSLOT Keys in request don't hash to the same slot".into(),
            Redirect::Unstable => "TRYAGAIN Multiple keys request during rehashing of slot".into(),
            Redirect::DownState => "CLUSTERDOWN The cluster is down".into(),
            Redirect::DownReadOnlyState => "CLUSTERDOWN The cluster is down and only accepts read commands".into(),
            Redirect::DownUnbound => "CLUSTERDOWN Hash slot not served".into(),
            Redirect::Moved(slot, addr) => format!("MOVED {slot} {addr}"),
            Redirect::Ask(slot, addr) => format!("ASK {slot} {addr}"),
        }
    }

    /// The error a script's command gets (`scriptVerifyClusterState`).
    pub fn script_error(&self) -> &'static str {
        match self {
            Redirect::DownReadOnlyState => "ERR Script attempted to execute a write command while the cluster is down and readonly",
            Redirect::DownState => "ERR Script attempted to execute a command while the cluster is down",
            _ => "ERR Script attempted to access a non local key in a cluster node",
        }
    }
}

/// What a command asks of the slot map: its keys (with whether each is
/// present in the database, asked only for a slot being migrated), and
/// the client's and command's flags.
pub struct Query<'a> {
    pub keys: &'a [&'a [u8]],
    pub write: bool,
    /// The client sent ASKING (or the command is flagged `asking`).
    pub asking: bool,
    pub readonly_client: bool,
    /// SSUBSCRIBE / SUNSUBSCRIBE / SPUBLISH: channels, not keys.
    pub pubsubshard: bool,
    pub migrate: bool,
}

/// What is served while the cluster is down
/// (`cluster-allow-reads-when-down`, `cluster-allow-pubsubshard-when-down`).
#[derive(Debug, Clone, Copy)]
pub struct DownPolicy {
    pub reads: bool,
    pub pubsubshard: bool,
}

/// What a Raft shard's new leader asks the other masters to vote for
/// (Redis's FAILOVER_AUTH_REQUEST): the slots its former leader served,
/// and the configuration epoch it knows them at (`requestConfigEpoch`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub epoch: u64,
    pub slots: Vec<(u16, u16)>,
}

/// A vote a new leader runs before it takes its former leader's slots:
/// the epoch it asked for, when, the slots it asked for, the masters it
/// asked and those that granted it.
#[derive(Debug, Clone)]
pub struct Election {
    pub epoch: u64,
    started_ms: u64,
    /// When it is given up: [`ELECTION_TIMEOUT_MS`] and a random part, so
    /// that two new leaders asking at once do not ask again at once.
    timeout_ms: u64,
    claim: Vec<u16>,
    asked: BTreeSet<String>,
    votes: BTreeSet<String>,
}

/// What a vote request says beside its claim: whether it is a manual
/// failover's (Redis's FORCEACK), and when and under which node timeout
/// it is judged.
#[derive(Debug, Clone, Copy, Default)]
pub struct VoteAsk {
    pub force_ack: bool,
    pub now_ms: u64,
    pub node_timeout_ms: u64,
}

/// A vote message waiting for the link to its node, with the epoch it is
/// sent at (its header's current epoch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VoteMessage {
    Request(u64, Claim),
    Grant(u64),
    /// A replica asks its master to pause for its manual failover
    /// (Redis's MFSTART).
    ManualFailoverStart,
    /// A node's claim, for a master whose claim it makes stale (Redis's
    /// UPDATE): the node's id, its epoch and slots.
    Update(String, Claim),
}

/// How long a manual failover may take (Redis's `CLUSTER_MF_TIMEOUT`),
/// and how many times that its master pauses its writers for it.
pub const MF_TIMEOUT_MS: u64 = 5000;
pub const MF_PAUSE_MULT: u64 = 2;

/// The manual failover this replica runs (CLUSTER FAILOVER; Redis's
/// `mf_end`, `mf_master_offset`, `mf_can_start`).
#[derive(Debug, Clone)]
pub struct ManualFailover {
    pub end_ms: u64,
    /// The master's replication offset, told while it pauses for this
    /// failover; None until then.
    pub master_offset: Option<u64>,
    /// The replica processed its master's stream up to that offset (or
    /// FORCE skipped the wait): the vote may run.
    pub can_start: bool,
}

/// Slots, in order, as (start, end) runs.
fn slot_ranges(slots: &[u16]) -> Vec<(u16, u16)> {
    let mut ranges: Vec<(u16, u16)> = Vec::new();
    for &s in slots {
        match ranges.last_mut() {
            Some((_, end)) if *end + 1 == s => *end = s,
            _ => ranges.push((s, s)),
        }
    }
    ranges
}

/// Every slot some range of `ranges` holds, once each, in order (ranges
/// from a message may overlap and run past the last slot).
pub fn slots_of_ranges(ranges: &[(u16, u16)]) -> Vec<u16> {
    let mut ranges: Vec<(u16, u16)> = ranges
        .iter()
        .filter(|&&(start, end)| start <= end && (start as usize) < SLOTS)
        .map(|&(start, end)| (start, end.min(SLOTS as u16 - 1)))
        .collect();
    ranges.sort_unstable();
    let mut slots = Vec::new();
    let mut next = 0u32;
    for (start, end) in ranges {
        for s in u32::from(start).max(next)..=u32::from(end) {
            slots.push(s as u16);
        }
        next = next.max(u32::from(end) + 1);
    }
    slots
}

/// How long a new leader waits for a majority of the masters' votes
/// before it asks again with a new epoch (Redis's failover auth timeout,
/// at its least), and the most it waits on top of that, at random
/// (Redis delays an election by 500-1000 ms at random for the same end).
pub const ELECTION_TIMEOUT_MS: u64 = 2000;
pub const ELECTION_JITTER_MS: u64 = 1000;

/// A fellow member of this node's Raft shard, as a cluster node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardMate {
    pub id: String,
    pub ip: String,
    pub port: u16,
    pub cport: u16,
}

/// This node's view of the cluster.
#[derive(Debug)]
pub struct Cluster {
    /// Every known node; this one is `nodes[0]` and is never removed.
    pub nodes: Vec<Node>,
    /// The index in `nodes` of each slot's master, or [`UNASSIGNED`].
    slots: Vec<u16>,
    pub migrating: BTreeMap<u16, String>,
    pub importing: BTreeMap<u16, String>,
    /// Slots this node's shard (itself, or the master it replicates) no
    /// longer serves, whose shard channels lose their subscribers (see
    /// `State::drop_lost_slot_channels`).
    pub lost_slots: Vec<u16>,
    pub current_epoch: u64,
    pub last_vote_epoch: u64,
    pub ok: bool,
    /// Masters serving at least one slot.
    pub size: usize,
    /// Forgotten nodes, until when they stay forgotten (ms).
    blacklist: HashMap<String, u64>,
    /// `nodes.conf`, relative to `dir`.
    pub config_file: String,
    /// The configuration changed since it was last written.
    pub save_pending: bool,
    /// The change is one to sync to disk before anything else is said
    /// (an epoch: Redis's CLUSTER_TODO_FSYNC_CONFIG).
    pub fsync_pending: bool,
    /// What the file holds, as last written.
    pub saved_text: String,
    /// Bus messages sent and received, by type name (CLUSTER INFO).
    pub sent: BTreeMap<&'static str, u64>,
    pub received: BTreeMap<&'static str, u64>,
    /// When [`Cluster::update_state`] first ran, ms.
    first_update_ms: u64,
    among_minority_ms: u64,
    /// Links to start: tokens of nodes that have none yet.
    pub links_to_start: Vec<u64>,
    next_link_token: u64,
    /// Bumped on every change of the slot map or the nodes, so that the
    /// bus knows when to tell the others at once.
    pub version: u64,
    /// Messages to publish on other nodes: (link token, message type,
    /// channel, message).
    pub outbox: Vec<(u64, u8, bytes::Bytes, bytes::Bytes)>,
    /// Links freed for their send buffer
    /// (`total_cluster_links_buffer_limit_exceeded`).
    pub links_buffer_exceeded: u64,
    /// Vote requests and grants to send: (link token, message).
    pub votes_out: Vec<(u64, VoteMessage)>,
    /// The vote this node (a Raft shard's new leader) is running.
    pub election: Option<Election>,
    /// Whether this node leads its Raft shard (None: no shard).
    pub shard_leading: Option<bool>,
    /// Messages were queued for the links since they were last woken.
    pub new_sends: bool,
    /// `cluster-allow-replica-migration`, as the engine last said.
    pub allow_replica_migration: bool,
    /// DEBUG DROP-CLUSTER-PACKET-FILTER: the type of bus message this node
    /// drops on arrival (-1: none).
    pub drop_packet_filter: i64,
    /// `cluster-preferred-endpoint-type`, as the engine last said.
    pub endpoint_type: EndpointType,
    /// The port the bus listens on (announced unless
    /// `cluster-announce-bus-port` names another).
    pub bus_port: u16,
    /// The manual failover this replica runs.
    pub manual_failover: Option<ManualFailover>,
    /// When this replica of a failed master may start its election (ms;
    /// 0: none scheduled).
    pub failover_at_ms: u64,
    /// A master pausing its writers for a replica's manual failover:
    /// until when (ms; 0: none). Its messages say it is paused.
    pub mf_paused_until: u64,
    /// A replica asked this master to pause: the engine pauses writers.
    pub mf_pause_asked: bool,
    /// When the engine's pause for it ends (the one it lifts, not a
    /// client's CLIENT PAUSE).
    pub mf_pause_end: Option<std::time::Instant>,
}

/// A fresh node id: 40 random lowercase hex characters.
pub fn new_node_id() -> String {
    const HEX: &[u8] = b"0123456789abcdef";
    (0..40).map(|_| HEX[fastrand::usize(..16)] as char).collect()
}

/// Whether `id` is a well-formed node id (40 hex characters).
pub fn valid_node_id(id: &[u8]) -> bool {
    id.len() == 40 && id.iter().all(|b| b.is_ascii_hexdigit())
}

impl Cluster {
    /// A node that knows only itself, serving no slot.
    pub fn new(config_file: String, now_ms: u64) -> Cluster {
        let myself = Node::new(new_node_id(), flag::MYSELF | flag::MASTER, now_ms);
        Cluster {
            nodes: vec![myself],
            slots: vec![UNASSIGNED; SLOTS],
            migrating: BTreeMap::new(),
            lost_slots: Vec::new(),
            importing: BTreeMap::new(),
            current_epoch: 0,
            last_vote_epoch: 0,
            ok: false,
            // Redis's `clusterInit` starts it at 1; the first state
            // update after the writable delay counts it.
            size: 1,
            blacklist: HashMap::new(),
            config_file,
            save_pending: true,
            fsync_pending: true,
            saved_text: String::new(),
            sent: BTreeMap::new(),
            received: BTreeMap::new(),
            first_update_ms: 0,
            among_minority_ms: 0,
            links_to_start: Vec::new(),
            next_link_token: 1,
            version: 0,
            outbox: Vec::new(),
            links_buffer_exceeded: 0,
            votes_out: Vec::new(),
            election: None,
            shard_leading: None,
            new_sends: false,
            allow_replica_migration: true,
            drop_packet_filter: -1,
            endpoint_type: EndpointType::Ip,
            bus_port: 0,
            manual_failover: None,
            failover_at_ms: 0,
            mf_paused_until: 0,
            mf_pause_asked: false,
            mf_pause_end: None,
        }
    }

    pub fn myself(&self) -> &Node {
        &self.nodes[0]
    }

    pub fn myself_mut(&mut self) -> &mut Node {
        &mut self.nodes[0]
    }

    pub fn my_id(&self) -> &str {
        &self.nodes[0].id
    }

    /// The node with this id (case-insensitively, as Redis's lookup of a
    /// 40-byte name in its dict is exact: ids are lowercase).
    pub fn index_of(&self, id: &[u8]) -> Option<usize> {
        self.nodes.iter().position(|n| n.id.as_bytes() == id)
    }

    pub fn node(&self, id: &[u8]) -> Option<&Node> {
        self.index_of(id).map(|i| &self.nodes[i])
    }

    /// The index of the node serving `slot`.
    pub fn owner_index(&self, slot: u16) -> Option<usize> {
        let owner = self.slots[slot as usize];
        (owner != UNASSIGNED).then_some(owner as usize)
    }

    pub fn owner(&self, slot: u16) -> Option<&Node> {
        self.owner_index(slot).map(|i| &self.nodes[i])
    }

    /// Whether this node serves `slot`.
    pub fn serves(&self, slot: u16) -> bool {
        self.slots[slot as usize] == 0
    }

    /// The slots `index` serves, as (start, end) runs.
    pub fn ranges_of(&self, index: usize) -> Vec<(u16, u16)> {
        let mut ranges = Vec::new();
        let mut start: Option<u16> = None;
        for s in 0..=SLOTS {
            let mine = s < SLOTS && self.slots[s] == index as u16;
            match (mine, start) {
                (true, None) => start = Some(s as u16),
                (false, Some(st)) => {
                    ranges.push((st, s as u16 - 1));
                    start = None;
                }
                _ => {}
            }
        }
        ranges
    }

    /// Every run of consecutive slots with one owner, in slot order:
    /// (start, end, owner index) (Redis's `clusterGenNodesSlotsInfo`).
    pub fn slot_runs(&self) -> Vec<(u16, u16, usize)> {
        let mut runs = Vec::new();
        let mut s = 0;
        while s < SLOTS {
            let owner = self.slots[s];
            let start = s;
            while s < SLOTS && self.slots[s] == owner {
                s += 1;
            }
            if owner != UNASSIGNED {
                runs.push((start as u16, (s - 1) as u16, owner as usize));
            }
        }
        runs
    }

    pub fn assigned_slots(&self) -> usize {
        self.slots.iter().filter(|&&o| o != UNASSIGNED).count()
    }

    /// Gives `slot` to node `index` (Redis's `clusterAddSlot`); false when
    /// it is served already.
    pub fn add_slot(&mut self, index: usize, slot: u16) -> bool {
        if self.slots[slot as usize] != UNASSIGNED {
            return false;
        }
        self.slots[slot as usize] = index as u16;
        self.nodes[index].numslots += 1;
        // A master's first slot makes it one a replica may migrate to, as
        // long as some master has replicas (Redis's `clusterNodeSetSlotBit`:
        // a new master with slots in a cluster that has replicas).
        if self.nodes[index].numslots == 1 && self.replica_counts(&self.master_indexes(), 0).iter().any(|&n| n > 0) {
            self.nodes[index].flags |= flag::MIGRATE_TO;
        }
        self.slots_changed(index);
        true
    }

    /// Frees `slot` (Redis's `clusterDelSlot`); false when no node served it.
    pub fn del_slot(&mut self, slot: u16) -> bool {
        let owner = self.slots[slot as usize];
        if owner == UNASSIGNED {
            return false;
        }
        if owner == 0 || self.my_master() == Some(owner as usize) {
            // Redis's `clusterDelSlot`: the channels go with the slot.
            self.lost_slots.push(slot);
        }
        self.nodes[owner as usize].numslots -= 1;
        self.slots[slot as usize] = UNASSIGNED;
        self.slots_changed(owner as usize);
        true
    }

    /// Frees every slot node `index` serves.
    pub fn del_node_slots(&mut self, index: usize) -> usize {
        let mut freed = 0;
        for s in 0..SLOTS as u16 {
            if self.slots[s as usize] == index as u16 {
                self.del_slot(s);
                freed += 1;
            }
        }
        freed
    }

    /// The configuration changed: it is to be saved, and told.
    pub fn changed(&mut self) {
        self.save_pending = true;
        self.version += 1;
    }

    /// A slot changed hands: saved; told at once only when this node's
    /// own claim changed (another node's is its own to tell).
    fn slots_changed(&mut self, index: usize) {
        self.save_pending = true;
        if index == 0 {
            self.version += 1;
        }
    }

    /// Adds a node; its bus link is to be started.
    pub fn add_node(&mut self, mut node: Node) -> usize {
        node.link_token = self.next_link_token;
        self.next_link_token += 1;
        self.links_to_start.push(node.link_token);
        self.nodes.push(node);
        self.changed();
        self.nodes.len() - 1
    }

    /// Removes a node (never this one): its slots become unassigned, its
    /// failure reports and migrations go with it (Redis's `clusterDelNode`).
    pub fn del_node(&mut self, index: usize) {
        if index == 0 || index >= self.nodes.len() {
            return;
        }
        let id = self.nodes[index].id.clone();
        for s in 0..SLOTS {
            let owner = self.slots[s];
            if owner == index as u16 {
                self.slots[s] = UNASSIGNED;
            } else if owner != UNASSIGNED && owner > index as u16 {
                self.slots[s] = owner - 1;
            }
        }
        self.migrating.retain(|_, n| *n != id);
        self.importing.retain(|_, n| *n != id);
        let token = self.nodes[index].link_token;
        self.outbox.retain(|(t, ..)| *t != token);
        self.votes_out.retain(|(t, _)| *t != token);
        for n in &mut self.nodes {
            n.fail_reports.remove(&id);
            if n.master.as_deref() == Some(id.as_str()) {
                n.master = None;
            }
        }
        self.nodes.remove(index);
        self.changed();
    }

    /// CLUSTER FORGET: removed, and not added back from what the others
    /// say for a minute.
    pub fn forget(&mut self, index: usize, now_ms: u64) {
        self.blacklist.insert(self.nodes[index].id.clone(), now_ms + BLACKLIST_TTL_MS);
        self.del_node(index);
    }

    pub fn blacklisted(&mut self, id: &str, now_ms: u64) -> bool {
        self.blacklist.retain(|_, until| *until > now_ms);
        self.blacklist.contains_key(id)
    }

    /// The highest configuration epoch known (`clusterGetMaxEpoch`).
    pub fn max_epoch(&self) -> u64 {
        self.nodes.iter().map(|n| n.config_epoch).max().unwrap_or(0).max(self.current_epoch)
    }

    /// `clusterBumpConfigEpochWithoutConsensus`: a new epoch for this node
    /// unless it has the greatest already. True when it bumped.
    pub fn bump_epoch(&mut self) -> bool {
        let max = self.max_epoch();
        let mine = self.nodes[0].config_epoch;
        if mine == 0 || mine != max {
            self.current_epoch += 1;
            self.nodes[0].config_epoch = self.current_epoch;
            self.changed();
            self.fsync_pending = true;
            crate::log::warning(format_args!("New configEpoch set to {}", self.current_epoch));
            true
        } else {
            false
        }
    }

    /// Starts a handshake with the node at `ip:port` (CLUSTER MEET, or a
    /// node the others know and this one does not): a node with a random
    /// id in the HANDSHAKE state until it answers with its own. False
    /// when one is under way already.
    pub fn start_handshake(&mut self, ip: &str, port: u16, cport: u16, meet: bool, now_ms: u64) -> bool {
        if self
            .nodes
            .iter()
            .any(|n| n.has(flag::HANDSHAKE) && n.ip == ip && n.port == port && n.cport == cport)
        {
            return false;
        }
        let mut node = Node::new(new_node_id(), flag::HANDSHAKE | if meet { flag::MEET } else { 0 }, now_ms);
        node.ip = ip.to_string();
        node.port = port;
        node.cport = cport;
        self.add_node(node);
        true
    }

    /// Redis's `clusterUpdateState`, run by the cron and after changes.
    pub fn update_state(&mut self, now_ms: u64, require_full_coverage: bool, node_timeout_ms: u64) {
        if self.first_update_ms == 0 {
            self.first_update_ms = now_ms;
        }
        if self.myself().is_master() && !self.ok && now_ms.saturating_sub(self.first_update_ms) < WRITABLE_DELAY_MS {
            return;
        }
        let mut ok = true;
        if require_full_coverage && self.slots.iter().any(|&o| o == UNASSIGNED || self.nodes[o as usize].failed()) {
            ok = false;
        }
        let mut size = 0;
        let mut reachable = 0;
        for n in &self.nodes {
            if n.is_master() && n.numslots > 0 {
                size += 1;
                if n.flags & (flag::FAIL | flag::PFAIL) == 0 {
                    reachable += 1;
                }
            }
        }
        self.size = size;
        if reachable < size / 2 + 1 {
            ok = false;
            self.among_minority_ms = now_ms;
        }
        if ok != self.ok {
            let rejoin_delay = node_timeout_ms.clamp(MIN_REJOIN_DELAY_MS, MAX_REJOIN_DELAY_MS);
            if ok && self.myself().is_master() && now_ms.saturating_sub(self.among_minority_ms) < rejoin_delay {
                return;
            }
            crate::log::warning(format_args!("Cluster state changed: {}", if ok { "ok" } else { "fail" }));
            self.ok = ok;
        }
    }

    /// Failure detection, once per cron: a node whose ping has waited
    /// longer than the node timeout is PFAIL (and FAIL once a majority
    /// of masters say so); a handshake that did not complete in time is
    /// dropped.
    pub fn detect_failures(&mut self, now_ms: u64, node_timeout_ms: u64) {
        let handshake_timeout = node_timeout_ms.max(1000);
        let mut i = 1;
        while i < self.nodes.len() {
            let n = &self.nodes[i];
            if n.has(flag::HANDSHAKE) && now_ms.saturating_sub(n.ctime) > handshake_timeout {
                crate::log::verbose(format_args!("Handshake with node {} failed, removing it.", n.id));
                self.del_node(i);
                continue;
            }
            i += 1;
        }
        for i in 1..self.nodes.len() {
            let n = &mut self.nodes[i];
            if n.has(flag::HANDSHAKE) || n.ping_sent == 0 {
                continue;
            }
            if now_ms.saturating_sub(n.ping_sent) > node_timeout_ms && !n.has(flag::PFAIL | flag::FAIL) {
                crate::log::debug(format_args!("*** NODE {} possibly failing", n.id));
                n.flags |= flag::PFAIL;
                self.version += 1;
            }
            if self.nodes[i].has(flag::PFAIL) {
                self.mark_failing_if_needed(i, now_ms, node_timeout_ms);
            }
        }
    }

    /// A node answered: it is not PFAIL any more, and a FAIL is cleared
    /// as Redis's `clearNodeFailureIfNeeded` clears it (at once for a
    /// node serving no slot, after twice the node timeout for a master
    /// that serves some).
    pub fn answered(&mut self, index: usize, now_ms: u64, node_timeout_ms: u64) {
        let n = &mut self.nodes[index];
        n.pong_received = now_ms;
        n.ping_sent = 0;
        if n.has(flag::PFAIL) {
            n.flags &= !flag::PFAIL;
            self.version += 1;
        }
        let n = &mut self.nodes[index];
        if n.failed() {
            let undo = !n.is_master() || n.numslots == 0 || now_ms.saturating_sub(n.fail_time) > node_timeout_ms * FAIL_UNDO_TIME_MULT;
            if undo {
                crate::log::notice(format_args!("Clear FAIL state for node {}: is reachable again.", n.id));
                n.flags &= !flag::FAIL;
                self.changed();
            }
        }
    }

    /// `markNodeAsFailingIfNeeded`: PFAIL becomes FAIL once a majority of
    /// the masters serving slots report it.
    pub fn mark_failing_if_needed(&mut self, index: usize, now_ms: u64, node_timeout_ms: u64) {
        let quorum = self.size / 2 + 1;
        let validity = node_timeout_ms * FAIL_REPORT_VALIDITY_MULT;
        let n = &mut self.nodes[index];
        if !n.has(flag::PFAIL) || n.has(flag::FAIL) {
            return;
        }
        n.fail_reports.retain(|_, at| now_ms.saturating_sub(*at) <= validity);
        let mut failures = n.fail_reports.len();
        if self.nodes[0].is_master() {
            failures += 1;
        }
        if failures < quorum {
            return;
        }
        let n = &mut self.nodes[index];
        crate::log::notice(format_args!("Marking node {} as failing (quorum reached).", n.id));
        n.flags &= !flag::PFAIL;
        n.flags |= flag::FAIL;
        n.fail_time = now_ms;
        self.changed();
    }

    /// `clusterUpdateSlotsConfigWith`: the slots `sender` claims with its
    /// configuration epoch become its own where no node serves them or
    /// their master's epoch is older, except slots this node imports.
    /// Returns the slots taken from this node that still hold keys.
    ///
    /// A plain node whose shard (itself if a master, else its master) lost
    /// its last slot that way follows the claimant: it becomes its replica
    /// (with `cluster-allow-replica-migration`, or when the claimant holds
    /// nothing but that shard's slots), and keeps its keys for the
    /// replication to replace. A replica whose master turned replica
    /// follows its master's master. (A Raft shard member's role is its
    /// shard's: see [`Cluster::follow_shard`].)
    pub fn take_claim(&mut self, sender: usize, sender_epoch: u64, claimed: &[(u16, u16)]) -> Vec<u16> {
        let mut dirty = Vec::new();
        let shard = if self.nodes[0].is_master() {
            Some(0)
        } else {
            self.nodes[0].master.as_deref().and_then(|id| self.index_of(id.as_bytes()))
        };
        let (mut sender_slots, mut taken_from_shard) = (0, 0);
        for s in slots_of_ranges(claimed) {
            sender_slots += 1;
            let owner = self.slots[s as usize];
            if owner == sender as u16 || self.importing.contains_key(&s) {
                continue;
            }
            if owner == UNASSIGNED || self.nodes[owner as usize].config_epoch < sender_epoch {
                if owner == 0 {
                    dirty.push(s);
                    self.migrating.remove(&s);
                }
                if Some(owner as usize) == shard {
                    taken_from_shard += 1;
                }
                self.del_slot(s);
                self.add_slot(sender, s);
            }
        }
        if self.shard_leading.is_some() || sender == 0 {
            return dirty;
        }
        if let Some(shard) = shard
            && taken_from_shard > 0
            && self.nodes[shard].numslots == 0
            && (self.allow_replica_migration || sender_slots == taken_from_shard)
        {
            self.follow_new_owner(sender);
            return Vec::new();
        }
        let grandmaster = shard
            .filter(|&m| m != 0 && self.nodes[m].has(flag::SLAVE))
            .and_then(|m| self.nodes[m].master.as_deref())
            .and_then(|id| self.index_of(id.as_bytes()))
            .filter(|&g| g != 0);
        if let Some(g) = grandmaster {
            crate::log::warning(format_args!(
                "I'm a sub-replica! Reconfiguring myself as a replica of grandmaster {}",
                self.nodes[g].id
            ));
            self.set_master(g);
            self.fsync_pending = true;
        }
        dirty
    }

    /// DEBUG CLUSTERLINK KILL: node `index`'s outbound link (`to`), its
    /// inbound ones (`from`), or both end; the outbound one counts as
    /// down at once (what was queued for it goes), and connects again.
    pub fn kill_links(&mut self, index: usize, to: bool, from: bool) {
        let n = &mut self.nodes[index];
        if to {
            n.link_kills += 1;
            n.link_up = false;
            let token = n.link_token;
            self.outbox.retain(|(t, ..)| *t != token);
            self.new_sends = true;
        }
        if from {
            self.nodes[index].inbound_kills += 1;
        }
    }

    /// What the outbound link to node `index` holds to send: the bytes it
    /// is writing and the messages queued for it (Redis's
    /// `send_msg_queue_mem`).
    pub fn send_buffer_used(&self, index: usize) -> usize {
        let n = &self.nodes[index];
        let queued: usize = self
            .outbox
            .iter()
            .filter(|(t, ..)| *t == n.link_token)
            .map(|(_, _, channel, message)| bus::PUBLISH_FRAME_OVERHEAD + channel.len() + message.len())
            .sum();
        n.sending + queued
    }

    /// Frees the outbound links whose send buffer is past `limit` bytes
    /// (`cluster-link-sendbuf-limit`, 0: none), as Redis's
    /// `clusterNodeCronFreeLinkOnBufferLimitReached`: their messages are
    /// dropped and the link is made again.
    pub fn free_links_over_limit(&mut self, limit: usize) {
        if limit == 0 {
            return;
        }
        for i in 1..self.nodes.len() {
            let used = self.send_buffer_used(i);
            if self.nodes[i].link_up && used > limit {
                crate::log::warning(format_args!(
                    "Freeing cluster link(to node {}, used memory: {used}) due to exceeding send buffer memory limit.",
                    self.nodes[i].id
                ));
                self.kill_links(i, true, false);
                self.links_buffer_exceeded += 1;
            }
        }
    }

    /// This master lost its last slot to node `index` (or this replica's
    /// master did): it becomes that node's replica.
    pub fn follow_new_owner(&mut self, index: usize) {
        crate::log::warning(format_args!(
            "Configuration change detected. Reconfiguring myself as a replica of {}",
            self.nodes[index].id
        ));
        self.set_master(index);
        self.fsync_pending = true;
    }

    /// The slots node `index` serves, in order.
    fn slots_of(&self, index: usize) -> Vec<u16> {
        (0..SLOTS as u16).filter(|&s| self.slots[s as usize] == index as u16).collect()
    }

    /// `clusterSetMaster`: this node becomes a replica of node `index`,
    /// its slot migrations closed (it serves no slot: the callers see to
    /// it). The engine then replicates that node (see
    /// `State::cluster_sync_replication`).
    pub fn set_master(&mut self, index: usize) {
        let id = self.nodes[index].id.clone();
        if self.nodes[0].is_master() {
            let me = &mut self.nodes[0];
            me.flags = (me.flags & !flag::MASTER) | flag::SLAVE;
            self.migrating.clear();
            self.importing.clear();
        }
        self.nodes[0].master = Some(id);
        self.manual_failover = None;
        self.changed();
    }

    /// `clusterFailoverReplaceYourMaster`: this replica becomes a master
    /// serving every slot of its master (node `old`), with `epoch` when a
    /// vote gave one.
    pub fn replace_master(&mut self, old: usize, epoch: Option<u64>) {
        self.set_myself_master();
        for s in self.slots_of(old) {
            self.del_slot(s);
            self.add_slot(0, s);
        }
        if let Some(epoch) = epoch
            && epoch > self.nodes[0].config_epoch
        {
            self.nodes[0].config_epoch = epoch;
            crate::log::warning(format_args!("configEpoch set to {epoch} after successful failover"));
        }
        self.current_epoch = self.current_epoch.max(self.nodes[0].config_epoch);
        self.manual_failover = None;
        self.fsync_pending = true;
        self.changed();
    }

    /// The master this replica replicates, as a node index.
    pub fn my_master(&self) -> Option<usize> {
        let me = self.myself();
        if !me.has(flag::SLAVE) {
            return None;
        }
        me.master.as_deref().and_then(|id| self.index_of(id.as_bytes())).filter(|&i| i != 0)
    }

    /// CLUSTER FAILOVER on this replica (its checks done): TAKEOVER takes
    /// its master's slots at once with a new epoch no one voted; FORCE
    /// starts the vote without waiting for the master; otherwise the
    /// master is asked to pause its writers and tell its offset, which
    /// this replica reaches before the vote (see
    /// [`Cluster::manual_failover_step`]).
    pub fn start_manual_failover(&mut self, force: bool, takeover: bool, now_ms: u64) {
        let Some(master) = self.my_master() else { return };
        self.end_election();
        self.manual_failover = Some(ManualFailover {
            end_ms: now_ms + MF_TIMEOUT_MS,
            master_offset: None,
            can_start: force,
        });
        if takeover {
            crate::log::warning(format_args!("Taking over the master (user request)."));
            self.bump_epoch();
            self.replace_master(master, None);
        } else if force {
            crate::log::warning(format_args!("Forced failover user request accepted."));
        } else {
            crate::log::warning(format_args!("Manual failover user request accepted."));
            self.votes_out
                .push((self.nodes[master].link_token, VoteMessage::ManualFailoverStart));
            self.new_sends = true;
        }
    }

    /// One step of this replica's manual failover, at each cron
    /// (`clusterHandleManualFailover`, and the vote of
    /// `clusterHandleSlaveFailover`): it times out after
    /// [`MF_TIMEOUT_MS`]; once the replica processed the offset its
    /// paused master told, the masters are asked for a new epoch, and
    /// with a majority this replica takes its master's slots. True once
    /// it did.
    pub fn manual_failover_step(&mut self, now_ms: u64) -> bool {
        let Some(mf) = self.manual_failover.as_mut() else { return false };
        if now_ms > mf.end_ms {
            crate::log::warning(format_args!("Manual failover timed out."));
            self.manual_failover = None;
            // Unless the automatic failover runs the vote.
            if self.failover_at_ms == 0 {
                self.end_election();
            }
            return false;
        }
        if !mf.can_start {
            match mf.master_offset {
                Some(offset) if self.nodes[0].repl_offset >= offset => {
                    mf.can_start = true;
                    crate::log::warning(format_args!("All master replication stream processed, manual failover can start."));
                }
                _ => return false,
            }
        }
        let Some(master) = self.my_master() else { return false };
        let claim = self.slots_of(master);
        if claim.is_empty() {
            return false;
        }
        let Some(epoch) = self.vote_won(&[], &claim, false, now_ms) else {
            return false;
        };
        self.replace_master(master, Some(epoch));
        true
    }

    /// A replica's automatic failover, at each cron
    /// (`clusterHandleSlaveFailover`): once its master is FAIL (and serves
    /// slots), unless `cluster-replica-no-failover` or its data is too
    /// old (`data_fresh` false, see `cluster-replica-validity-factor`),
    /// it waits 500 ms, a random part of 500 more and a second per replica
    /// of the same master that replicated more (its rank), then asks the
    /// masters for a new epoch; with a majority of them it takes its
    /// master's slots. True once it did.
    ///
    /// A manual failover that cannot start yet (its master does not
    /// answer) does not hold back the automatic one once the master is
    /// FAIL, which then starts at once (Redis's `mf_end` case).
    pub fn failover_step(&mut self, now_ms: u64, no_failover: bool, data_fresh: bool) -> bool {
        if self.manual_failover.is_some() {
            if self.manual_failover_step(now_ms) {
                return true;
            }
            if self.manual_failover.as_ref().is_some_and(|mf| mf.can_start) {
                return false;
            }
        }
        let master = self
            .my_master()
            .filter(|&m| self.nodes[m].failed() && self.nodes[m].numslots > 0 && !no_failover);
        let Some(master) = master else {
            if self.failover_at_ms != 0 {
                self.failover_at_ms = 0;
                self.end_election();
            }
            return false;
        };
        if !data_fresh {
            return false;
        }
        if self.failover_at_ms == 0 && self.manual_failover.is_some() {
            self.failover_at_ms = now_ms;
            crate::log::warning(format_args!(
                "Start of election delayed for 0 milliseconds (rank #0, offset {}).",
                self.nodes[0].repl_offset
            ));
        }
        if self.failover_at_ms == 0 {
            let mine = self.nodes[0].repl_offset;
            let master_id = self.nodes[master].id.clone();
            let rank = self.nodes[1..]
                .iter()
                .filter(|n| {
                    n.has(flag::SLAVE)
                        && !n.has(flag::NOFAILOVER)
                        && n.master.as_deref() == Some(master_id.as_str())
                        && n.repl_offset > mine
                })
                .count() as u64;
            let delay = 500 + fastrand::u64(..500) + rank * 1000;
            self.failover_at_ms = now_ms + delay;
            crate::log::warning(format_args!(
                "Start of election delayed for {delay} milliseconds (rank #{rank}, offset {mine})."
            ));
            return false;
        }
        if now_ms < self.failover_at_ms {
            return false;
        }
        let claim = self.slots_of(master);
        let Some(epoch) = self.vote_won(&[], &claim, false, now_ms) else {
            return false;
        };
        self.failover_at_ms = 0;
        self.replace_master(master, Some(epoch));
        true
    }

    /// For each node, the index of the master it replicates (replicas
    /// only).
    fn master_indexes(&self) -> Vec<Option<usize>> {
        let index: HashMap<&str, usize> = self.nodes.iter().enumerate().map(|(i, n)| (n.id.as_str(), i)).collect();
        self.nodes
            .iter()
            .map(|n| {
                n.has(flag::SLAVE)
                    .then(|| n.master.as_deref().and_then(|id| index.get(id).copied()))
                    .flatten()
            })
            .collect()
    }

    /// How many replicas each master has, by index (0 for a node that is
    /// not a master), leaving out those flagged `down`
    /// (`clusterCountNonFailingSlaves` with FAIL).
    fn replica_counts(&self, masters: &[Option<usize>], down: u16) -> Vec<usize> {
        let mut counts = vec![0; self.nodes.len()];
        for (n, &m) in self.nodes.iter().zip(masters) {
            if let Some(m) = m
                && !n.has(down)
                && self.nodes[m].is_master()
            {
                counts[m] += 1;
            }
        }
        counts
    }

    /// Marks the other masters that have replicas (failing or not) as
    /// ones a replica may migrate to, and unmarks those whose last
    /// replica went elsewhere or was forgotten (Redis's
    /// `clusterNodeAddSlave` and `clusterNodeRemoveSlave`). A replica that
    /// took over stays marked until then.
    pub fn note_replicated_masters(&mut self) {
        let counts = self.replica_counts(&self.master_indexes(), 0);
        for (n, replicas) in self.nodes.iter_mut().zip(counts).skip(1) {
            if !n.is_master() {
                continue;
            }
            if replicas > 0 {
                n.flags |= flag::MIGRATE_TO;
            } else if n.replicas_seen > 0 {
                n.flags &= !flag::MIGRATE_TO;
            }
            n.replicas_seen = replicas;
        }
    }

    /// Replica migration (`clusterCron` and `clusterHandleSlaveMigration`):
    /// when a master serving slots, which had replicas, has none working,
    /// a replica of a master with the most working replicas (at least
    /// two, and more than `barrier` left reachable counting itself)
    /// joins it, once it has been orphaned for
    /// [`REPLICA_MIGRATION_DELAY_MS`]; of the replicas of such masters,
    /// the one with the least id goes. The master to join, when this
    /// node is the one to go now.
    pub fn migration_step(&mut self, now_ms: u64, barrier: u64) -> Option<usize> {
        let mine = self.my_master()?;
        let masters = self.master_indexes();
        let working = self.replica_counts(&masters, flag::FAIL);
        // The orphaned masters, and since when (reset as soon as a master
        // is not, where Redis keeps the time until its next migration
        // check).
        let (mut target, mut most) = (None, 0);
        for (m, n) in self.nodes.iter_mut().enumerate() {
            let up = n.is_master() && !n.failed();
            if up && n.has(flag::MIGRATE_TO) && working[m] == 0 {
                if target.is_none() && n.numslots > 0 {
                    target = Some(m);
                }
                if n.orphaned_time == 0 {
                    n.orphaned_time = now_ms;
                }
            } else {
                n.orphaned_time = 0;
            }
            if up {
                most = most.max(working[m]);
            }
        }
        let target = target?;
        // A replica of a failed master stays, for its failover.
        let mine_working = if self.nodes[mine].failed() { 0 } else { working[mine] };
        let reachable = self.replica_counts(&masters, flag::FAIL | flag::PFAIL)[mine];
        if most < 2 || mine_working != most || !self.ok || reachable as u64 <= barrier {
            return None;
        }
        // The candidate: the least id among the replicas of the masters
        // with the most working replicas.
        let candidate = self
            .nodes
            .iter()
            .zip(&masters)
            .filter(|&(_, &m)| m.is_some_and(|m| working[m] == most))
            .map(|(r, _)| r.id.as_str())
            .fold(self.nodes[0].id.as_str(), std::cmp::min);
        (candidate == self.nodes[0].id && now_ms.saturating_sub(self.nodes[target].orphaned_time) > REPLICA_MIGRATION_DELAY_MS)
            .then_some(target)
    }

    /// `clusterSetNodeAsMaster` for this node: a replica becomes a master
    /// (of no slot yet).
    pub fn set_myself_master(&mut self) {
        let me = &mut self.nodes[0];
        if me.is_master() {
            return;
        }
        me.flags = (me.flags & !flag::SLAVE) | flag::MASTER;
        me.master = None;
        self.changed();
    }

    /// A Raft shard member's place in the cluster (`replication raft`):
    /// the shard's leader is the master of every slot the shard's members
    /// serve, the other members are its replicas. `mates` are the other
    /// members as their probes told them; `leader` the node id of the
    /// member that leads when it is another one. A new leader takes the
    /// slots its fellow members serve with a newer configuration epoch,
    /// once the other masters voted it (see `vote_won`), as Redis's
    /// failover does, so that its claim wins everywhere; once the cluster has slots it meets the members the
    /// cluster does not know yet. A follower that serves no slot is the
    /// replica of the leader. Returns the slots it took.
    pub fn follow_shard(&mut self, leading: bool, leader: Option<&str>, mates: &[ShardMate], now_ms: u64) -> usize {
        if leading {
            if self.nodes[0].has(flag::SLAVE) {
                let me = &mut self.nodes[0];
                me.flags = (me.flags & !flag::SLAVE) | flag::MASTER;
                me.master = None;
                crate::log::notice(format_args!("Raft: leading the shard, this node is the master of its slots"));
                self.changed();
            }
            let fellows: Vec<u16> = mates
                .iter()
                .filter_map(|m| self.index_of(m.id.as_bytes()).filter(|&i| i != 0))
                .map(|i| i as u16)
                .collect();
            let claim: Vec<u16> = (0..SLOTS as u16).filter(|&s| fellows.contains(&self.slots[s as usize])).collect();
            self.shard_leading = Some(true);
            let mut taken = 0;
            if claim.is_empty() {
                self.end_election();
            } else if let Some(epoch) = self.vote_won(&fellows, &claim, true, now_ms) {
                for &slot in &claim {
                    self.del_slot(slot);
                    self.add_slot(0, slot);
                    self.importing.remove(&slot);
                }
                taken = claim.len();
                // The epoch won, as Redis's failover takes it.
                if epoch > self.nodes[0].config_epoch {
                    self.nodes[0].config_epoch = epoch;
                }
                self.current_epoch = self.current_epoch.max(epoch);
                let epoch = self.nodes[0].config_epoch;
                self.fsync_pending = true;
                self.changed();
                crate::log::notice(format_args!(
                    "Raft: took {taken} slots of the shard's former leader, configEpoch set to {epoch}"
                ));
            }
            if self.assigned_slots() > 0 {
                for mate in mates {
                    let known = self
                        .nodes
                        .iter()
                        .any(|n| n.id == mate.id || (n.ip == mate.ip && n.port == mate.port && n.cport == mate.cport));
                    if !known && !self.blacklisted(&mate.id, now_ms) {
                        self.start_handshake(&mate.ip, mate.port, mate.cport, true, now_ms);
                    }
                }
            }
            return taken;
        }
        // A member that no longer leads runs no vote, and casts none.
        self.shard_leading = Some(false);
        self.end_election();
        let Some(leader) = leader else { return 0 };
        if self.nodes[0].numslots > 0 || self.nodes[0].master.as_deref() == Some(leader) || self.index_of(leader.as_bytes()).is_none() {
            return 0;
        }
        self.migrating.clear();
        self.importing.clear();
        let me = &mut self.nodes[0];
        me.flags = (me.flags & !flag::MASTER) | flag::SLAVE;
        me.master = Some(leader.to_string());
        crate::log::notice(format_args!(
            "Raft: following the shard's leader, this node is a replica of {leader}"
        ));
        self.changed();
        0
    }

    /// The epoch with which this new leader may take the slots of `claim`
    /// from its fellow members (`fellows`, node indexes), once it may
    /// (Redis's failover authorization, `clusterHandleSlaveFailover`).
    ///
    /// The masters count as Redis's `needed_quorum` counts them: those
    /// serving slots, this shard one of them; a majority must grant the
    /// epoch. This shard's vote is its own Raft election; the others are
    /// asked, every master outside the shard (another shard's new leader
    /// serves no slot until its own vote, but votes: see
    /// [`Cluster::grant_vote`]). With no other master serving slots the
    /// slots are taken at once, with an epoch above any known. A vote is
    /// asked again, with a new epoch, when none runs for this claim or the
    /// last one got no majority within [`ELECTION_TIMEOUT_MS`]. A master
    /// whose view has a slot of the claim at a newer epoch refuses: a
    /// leader whose view is older than a slot's move to another shard does
    /// not take the slot back unless a majority shares its stale view.
    ///
    /// A plain replica taking over its master (`own_vote` false, no
    /// fellows) has no vote of its own: every master serving slots counts,
    /// its failed master included, and the others' grants must make the
    /// majority, as in Redis.
    fn vote_won(&mut self, fellows: &[u16], claim: &[u16], own_vote: bool, now_ms: u64) -> Option<u64> {
        let others: Vec<usize> = (1..self.nodes.len())
            .filter(|&i| !fellows.contains(&(i as u16)))
            .filter(|&i| self.nodes[i].is_master() && !self.nodes[i].has(flag::HANDSHAKE | flag::NOADDR))
            .collect();
        let own = usize::from(own_vote);
        let masters = own + others.iter().filter(|&&i| self.nodes[i].numslots > 0).count();
        let needed = masters / 2 + 1;
        if needed <= own {
            self.end_election();
            return Some(self.max_epoch() + 1);
        }
        if let Some(e) = &self.election
            && e.claim == claim
        {
            if own + e.votes.len() >= needed {
                let epoch = e.epoch;
                crate::log::warning(format_args!(
                    "Failover election won: I'm the new master ({} votes of {masters} masters, epoch {epoch}).",
                    own + e.votes.len()
                ));
                self.end_election();
                return Some(epoch);
            }
            if now_ms.saturating_sub(e.started_ms) < e.timeout_ms {
                return None;
            }
        }
        self.end_election();
        let epoch = self.max_epoch() + 1;
        self.current_epoch = epoch;
        // Its shard's vote for this epoch is its own: it grants no other.
        self.last_vote_epoch = epoch;
        self.fsync_pending = true;
        self.changed();
        let request = Claim {
            epoch: claim
                .iter()
                .map(|&s| self.nodes[self.slots[s as usize] as usize].config_epoch)
                .max()
                .unwrap_or(0),
            slots: slot_ranges(claim),
        };
        for &i in &others {
            self.votes_out
                .push((self.nodes[i].link_token, VoteMessage::Request(epoch, request.clone())));
        }
        self.new_sends = true;
        crate::log::warning(format_args!("Starting a failover election for epoch {epoch}."));
        self.election = Some(Election {
            epoch,
            started_ms: now_ms,
            timeout_ms: ELECTION_TIMEOUT_MS + fastrand::u64(..ELECTION_JITTER_MS),
            claim: claim.to_vec(),
            asked: others.iter().map(|&i| self.nodes[i].id.clone()).collect(),
            votes: BTreeSet::new(),
        });
        None
    }

    /// Ends the vote this node runs, if any: its requests not sent yet go.
    fn end_election(&mut self) {
        if self.election.take().is_some() {
            self.votes_out.retain(|(_, v)| !matches!(v, VoteMessage::Request(..)));
        }
    }

    /// A vote request from node `sender` for `epoch` (Redis's
    /// `clusterSendFailoverAuthIfNeeded`). The voters: a master serving
    /// slots (not a Raft shard member that no longer leads), and a shard's
    /// new leader running its own vote (it serves no slot until then: so
    /// that shards whose leaders died together still reach a majority).
    /// Granted once per epoch, unless the epoch is older than this node's,
    /// or a slot of the claim is served, in this node's view, by a node
    /// other than the sender at a newer epoch than the claim's. Returns
    /// whether it was granted (the grant is queued for the sender).
    ///
    /// A plain replica asking (a failover of its master) is also refused,
    /// as Redis refuses it, unless this node knows its master, the master
    /// is FAIL or the request is a manual failover's (`force_ack`), and
    /// this node granted no vote about that master within twice the node
    /// timeout.
    pub fn grant_vote(&mut self, sender: usize, epoch: u64, claim: &Claim, ask: VoteAsk) -> bool {
        let id = self.nodes[sender].id.clone();
        let me = self.myself();
        let leading_shard = self.election.is_some() && self.shard_leading == Some(true);
        let voter = leading_shard || (me.is_master() && me.numslots > 0 && self.shard_leading != Some(false));
        if !voter {
            return false;
        }
        if epoch < self.current_epoch {
            crate::log::warning(format_args!(
                "Failover auth denied to {id}: reqEpoch ({epoch}) < curEpoch({})",
                self.current_epoch
            ));
            return false;
        }
        if self.last_vote_epoch == self.current_epoch {
            crate::log::warning(format_args!(
                "Failover auth denied to {id}: already voted for epoch {}",
                self.current_epoch
            ));
            return false;
        }
        let mut voted_about = None;
        if self.nodes[sender].has(flag::SLAVE) {
            let master = self.nodes[sender].master.as_deref().and_then(|m| self.index_of(m.as_bytes()));
            let Some(master) = master else {
                crate::log::warning(format_args!("Failover auth denied to {id}: I don't know its master"));
                return false;
            };
            if !self.nodes[master].failed() && !ask.force_ack {
                crate::log::warning(format_args!("Failover auth denied to {id}: its master is up"));
                return false;
            }
            let since = ask.now_ms.saturating_sub(self.nodes[master].voted_time);
            if self.nodes[master].voted_time != 0 && since < ask.node_timeout_ms * 2 {
                crate::log::warning(format_args!(
                    "Failover auth denied to {id}: can't vote about this master before {} milliseconds",
                    ask.node_timeout_ms * 2 - since
                ));
                return false;
            }
            voted_about = Some(master);
        }
        for s in slots_of_ranges(&claim.slots) {
            let Some(owner) = self.owner_index(s).filter(|&o| o != sender) else {
                continue;
            };
            let served_at = self.nodes[owner].config_epoch;
            if served_at > claim.epoch {
                crate::log::warning(format_args!(
                    "Failover auth denied to {id}: slot {s} epoch ({served_at}) > reqEpoch ({})",
                    claim.epoch
                ));
                return false;
            }
        }
        self.last_vote_epoch = self.current_epoch;
        if let Some(master) = voted_about {
            self.nodes[master].voted_time = ask.now_ms;
        }
        self.fsync_pending = true;
        self.changed();
        // Over the link to the asker if it is up (a grant cannot wait for
        // it: the asker asks again).
        if self.nodes[sender].link_up {
            self.votes_out
                .push((self.nodes[sender].link_token, VoteMessage::Grant(self.current_epoch)));
            self.new_sends = true;
        }
        crate::log::warning(format_args!("Failover auth granted to {id} for epoch {}", self.current_epoch));
        true
    }

    /// A vote node `sender` granted at `epoch` counts for the vote this
    /// node runs for that epoch, if it asked the sender.
    pub fn count_vote(&mut self, sender: usize, epoch: u64) {
        let id = &self.nodes[sender].id;
        if let Some(e) = self.election.as_mut()
            && epoch == e.epoch
            && e.asked.contains(id)
        {
            e.votes.insert(id.clone());
        }
    }

    /// CLUSTER RESET: slots and other nodes forgotten; HARD also draws a
    /// new id and zeroes the epochs (Redis's `clusterReset`).
    pub fn reset(&mut self, hard: bool) {
        self.manual_failover = None;
        self.failover_at_ms = 0;
        self.end_election();
        self.migrating.clear();
        self.importing.clear();
        self.del_node_slots(0);
        while self.nodes.len() > 1 {
            self.del_node(self.nodes.len() - 1);
        }
        if hard {
            self.current_epoch = 0;
            self.last_vote_epoch = 0;
            self.nodes[0].config_epoch = 0;
            let old = std::mem::replace(&mut self.nodes[0].id, new_node_id());
            crate::log::notice(format_args!("Node hard reset, now I'm {} (was {old})", self.nodes[0].id));
        }
        self.changed();
    }

    /// Where a command with these keys is to be served: None here, or the
    /// redirection (`getNodeByQuery`). `present` says whether a key is in
    /// the database; it is asked only for a slot being migrated or
    /// imported.
    pub fn route(
        &self,
        query: &Query,
        when_down: impl FnOnce() -> DownPolicy,
        mut present: impl FnMut(&[u8]) -> bool,
    ) -> Result<Option<u16>, Redirect> {
        let mut first: Option<&[u8]> = None;
        let mut slot = 0u16;
        let mut owner = UNASSIGNED;
        let (mut migrating, mut importing, mut multiple) = (false, false, false);
        let (mut missing, mut existing) = (0, 0);
        for &key in query.keys {
            let this = key_hash_slot(key);
            match first {
                None => {
                    first = Some(key);
                    slot = this;
                    owner = self.slots[slot as usize];
                    if owner == UNASSIGNED {
                        return Err(Redirect::DownUnbound);
                    }
                    if owner == 0 && self.migrating.contains_key(&slot) {
                        migrating = true;
                    } else if self.importing.contains_key(&slot) {
                        importing = true;
                    }
                }
                Some(f) if f != key => {
                    if this != slot {
                        return Err(Redirect::CrossSlot);
                    }
                    multiple = true;
                }
                Some(_) => {}
            }
            if (migrating || importing) && !query.pubsubshard {
                if present(key) {
                    existing += 1;
                } else {
                    missing += 1;
                }
            }
        }
        if first.is_none() {
            return Ok(None);
        }
        if !self.ok {
            let policy = when_down();
            if query.pubsubshard {
                if !policy.pubsubshard {
                    return Err(Redirect::DownState);
                }
            } else if !policy.reads {
                return Err(Redirect::DownState);
            } else if query.write {
                return Err(Redirect::DownReadOnlyState);
            }
        }
        if (migrating || importing) && query.migrate {
            return Ok(Some(slot));
        }
        if migrating && missing > 0 {
            if existing > 0 {
                return Err(Redirect::Unstable);
            }
            let target = &self.migrating[&slot];
            return match self.node(target.as_bytes()) {
                Some(n) => Err(Redirect::Ask(slot, self.endpoint(n))),
                None => Ok(Some(slot)),
            };
        }
        if importing && query.asking {
            if multiple && missing > 0 {
                return Err(Redirect::Unstable);
            }
            return Ok(Some(slot));
        }
        if owner != 0 {
            let n = &self.nodes[owner as usize];
            let replica_of_owner = (query.readonly_client || query.pubsubshard)
                && !query.write
                && self.nodes[0].has(flag::SLAVE)
                && self.nodes[0].master.as_deref() == Some(n.id.as_str());
            if !replica_of_owner {
                return Err(Redirect::Moved(slot, self.endpoint(n)));
            }
        }
        Ok(Some(slot))
    }

    /// `endpoint:port` as redirections name a node (`getPreferredEndpoint`).
    pub fn endpoint(&self, n: &Node) -> String {
        format!("{}:{}", self.preferred_endpoint(n).unwrap_or(""), n.port)
    }

    /// How clients are told to reach a node, by
    /// `cluster-preferred-endpoint-type`: its IP, its hostname (`?` when it
    /// announces none), or None for `unknown-endpoint`.
    pub fn preferred_endpoint<'n>(&self, n: &'n Node) -> Option<&'n str> {
        match self.endpoint_type {
            EndpointType::Ip => Some(&n.ip),
            EndpointType::Hostname if n.hostname.is_empty() => Some("?"),
            EndpointType::Hostname => Some(&n.hostname),
            EndpointType::Unknown => None,
        }
    }

    /// One node's CLUSTER NODES line (`clusterGenNodeDescription`),
    /// without the newline.
    pub fn describe(&self, index: usize) -> String {
        use std::fmt::Write;
        let n = &self.nodes[index];
        let mut line = format!("{} {}:{}@{}", n.id, n.ip, n.port, n.cport);
        if !n.hostname.is_empty() {
            let _ = write!(line, ",{}", n.hostname);
        }
        let _ = write!(line, " {} {}", n.flag_names(), n.master.as_deref().unwrap_or("-"));
        let epoch = match n.master.as_deref().and_then(|m| self.node(m.as_bytes())) {
            Some(m) if n.has(flag::SLAVE) => m.config_epoch,
            _ => n.config_epoch,
        };
        let link = if n.link_up || n.has(flag::MYSELF) {
            "connected"
        } else {
            "disconnected"
        };
        let _ = write!(line, " {} {} {} {}", n.ping_sent, n.pong_received, epoch, link);
        for (start, end) in self.ranges_of(index) {
            if start == end {
                let _ = write!(line, " {start}");
            } else {
                let _ = write!(line, " {start}-{end}");
            }
        }
        if index == 0 {
            for s in 0..SLOTS as u16 {
                if let Some(to) = self.migrating.get(&s) {
                    let _ = write!(line, " [{s}->-{to}]");
                } else if let Some(from) = self.importing.get(&s) {
                    let _ = write!(line, " [{s}-<-{from}]");
                }
            }
        }
        line
    }

    /// CLUSTER NODES (and nodes.conf without HANDSHAKE nodes).
    pub fn describe_all(&self, skip_handshake: bool) -> String {
        let mut out = String::new();
        for (i, n) in self.nodes.iter().enumerate() {
            if skip_handshake && n.has(flag::HANDSHAKE) {
                continue;
            }
            out.push_str(&self.describe(i));
            out.push('\n');
        }
        out
    }

    /// CLUSTER INFO.
    pub fn info(&self) -> String {
        let (mut assigned, mut ok, mut pfail, mut fail) = (0, 0, 0, 0);
        for &o in &self.slots {
            if o == UNASSIGNED {
                continue;
            }
            assigned += 1;
            let n = &self.nodes[o as usize];
            if n.failed() {
                fail += 1;
            } else if n.has(flag::PFAIL) {
                pfail += 1;
            } else {
                ok += 1;
            }
        }
        let my_epoch = match self.myself().master.as_deref().and_then(|m| self.node(m.as_bytes())) {
            Some(m) if self.myself().has(flag::SLAVE) => m.config_epoch,
            _ => self.myself().config_epoch,
        };
        let mut info = format!(
            "cluster_state:{}\r\ncluster_slots_assigned:{assigned}\r\ncluster_slots_ok:{ok}\r\ncluster_slots_pfail:{pfail}\r\ncluster_slots_fail:{fail}\r\ncluster_known_nodes:{}\r\ncluster_size:{}\r\ncluster_current_epoch:{}\r\ncluster_my_epoch:{my_epoch}\r\n",
            if self.ok { "ok" } else { "fail" },
            self.nodes.len(),
            self.size,
            self.current_epoch,
        );
        for (counts, dir) in [(&self.sent, "sent"), (&self.received, "received")] {
            let mut total = 0;
            for kind in bus::MESSAGE_TYPES {
                if let Some(&c) = counts.get(kind)
                    && c > 0
                {
                    total += c;
                    info.push_str(&format!("cluster_stats_messages_{kind}_{dir}:{c}\r\n"));
                }
            }
            info.push_str(&format!("cluster_stats_messages_{dir}:{total}\r\n"));
        }
        info.push_str(&format!(
            "total_cluster_links_buffer_limit_exceeded:{}\r\n",
            self.links_buffer_exceeded
        ));
        info
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: char, port: u16, flags: u16) -> Node {
        let mut n = Node::new(id.to_string().repeat(40), flags, 0);
        n.ip = "127.0.0.1".into();
        n.port = port;
        n.cport = port + 10000;
        n
    }

    fn mate(n: &Node) -> ShardMate {
        ShardMate {
            id: n.id.clone(),
            ip: n.ip.clone(),
            port: n.port,
            cport: n.cport,
        }
    }

    /// Masters a (two replicas: this node and c) and b (one replica, d,
    /// that fails): the replica of a with the least id migrates to b
    /// after b has been orphaned for 5 s, and only then.
    #[test]
    fn a_replica_migrates_to_an_orphaned_master_after_a_delay() {
        let mut c = Cluster::new("nodes.conf".into(), 0);
        c.nodes[0].id = "0".repeat(40);
        c.ok = true;
        let a = c.add_node(node('a', 7001, flag::MASTER));
        let b = c.add_node(node('b', 7002, flag::MASTER));
        c.add_slot(a, 0);
        c.add_slot(b, 1);
        let mut other = node('c', 7003, flag::SLAVE);
        other.master = Some(c.nodes[a].id.clone());
        let other = c.add_node(other);
        let mut d = node('d', 7004, flag::SLAVE);
        d.master = Some(c.nodes[b].id.clone());
        let d = c.add_node(d);
        c.set_master(a);
        c.note_replicated_masters();
        assert!(c.nodes[a].has(flag::MIGRATE_TO) && c.nodes[b].has(flag::MIGRATE_TO));
        assert!(!c.myself().has(flag::MIGRATE_TO));
        assert_eq!(c.migration_step(1000, 1), None, "b has a working replica");
        c.nodes[d].flags |= flag::FAIL;
        assert_eq!(c.migration_step(2000, 1), None, "orphaned since now");
        assert_eq!(c.migration_step(7000, 1), None, "orphaned for 5 s only");
        // The barrier: a keeps more than that many reachable replicas.
        assert_eq!(c.migration_step(7001, 2), None);
        c.nodes[other].flags |= flag::PFAIL;
        assert_eq!(c.migration_step(7001, 1), None, "a would be left with no reachable replica");
        c.nodes[other].flags &= !flag::PFAIL;
        assert_eq!(c.migration_step(7001, 1), Some(b));
        // c has the lesser id: it goes, not this node.
        c.nodes[0].id = "e".repeat(40);
        c.nodes[d].master = Some(c.nodes[b].id.clone());
        c.nodes[0].master = Some(c.nodes[a].id.clone());
        assert_eq!(c.migration_step(8000, 1), None);
        // No master of slots without replicas, or the cluster down: none.
        c.nodes[0].id = "0".repeat(40);
        c.nodes[0].master = Some(c.nodes[a].id.clone());
        c.ok = false;
        assert_eq!(c.migration_step(9000, 1), None);
        c.ok = true;
        c.nodes[d].flags &= !flag::FAIL;
        assert_eq!(c.migration_step(9000, 1), None);
        assert_eq!(c.nodes[b].orphaned_time, 0);
        // b's replica moved to a (an operator's CLUSTER REPLICATE): b is
        // no longer one to migrate to.
        c.nodes[d].master = Some(c.nodes[a].id.clone());
        c.note_replicated_masters();
        assert!(!c.nodes[b].has(flag::MIGRATE_TO));
        assert_eq!(c.migration_step(9000, 1), None);
        assert_eq!(c.migration_step(20000, 1), None);
    }

    /// A master (b) that gets its first slot while another master (a)
    /// has a replica is one to migrate to, though it never had a replica;
    /// in a cluster with no replicas, one that gets its first slot is not.
    #[test]
    fn a_master_given_its_first_slot_where_masters_have_replicas_is_one_to_migrate_to() {
        let mut c = Cluster::new("nodes.conf".into(), 0);
        c.nodes[0].id = "0".repeat(40);
        let a = c.add_node(node('a', 7001, flag::MASTER));
        let b = c.add_node(node('b', 7002, flag::MASTER));
        let e = c.add_node(node('e', 7005, flag::MASTER));
        c.add_slot(a, 0);
        c.add_slot(e, 5);
        assert!(!c.nodes[e].has(flag::MIGRATE_TO), "no master has a replica");
        let mut r = node('c', 7003, flag::SLAVE);
        r.master = Some(c.nodes[a].id.clone());
        c.add_node(r);
        c.add_slot(b, 1);
        assert!(c.nodes[b].has(flag::MIGRATE_TO));
        // Only the first slot marks it; e, whose first slot came before, is
        // not marked by its second.
        c.add_slot(e, 6);
        assert!(!c.nodes[e].has(flag::MIGRATE_TO));
        c.add_slot(b, 2);
        assert!(c.nodes[b].has(flag::MIGRATE_TO));
        // Orphaned (serving slots, no working replica) and marked: once
        // the delay has passed, a's spare replica would go to it, given a
        // barrier a keeps.
        c.ok = true;
        c.set_master(a);
        assert_eq!(c.migration_step(1000, 0), None, "orphaned since now");
        assert_eq!(c.migration_step(7000, 0), Some(b));
    }

    #[test]
    fn a_new_leader_takes_its_shards_slots_with_the_epoch_the_masters_voted() {
        let mut c = Cluster::new("nodes.conf".into(), 0);
        let old = node('a', 7001, flag::MASTER);
        let other = node('b', 7002, flag::MASTER);
        let (old_mate, other_id) = (mate(&old), other.id.clone());
        let a = c.add_node(old);
        let b = c.add_node(other);
        c.nodes[a].config_epoch = 5;
        c.nodes[b].config_epoch = 7;
        c.current_epoch = 7;
        c.add_slot(a, 0);
        c.add_slot(a, 1);
        c.add_slot(b, 2);
        // Followers do not take slots; the leader asks the other master
        // (b) for epoch 8, for its mates' slots only, known at epoch 5.
        assert_eq!(c.follow_shard(false, None, std::slice::from_ref(&old_mate), 0), 0);
        assert_eq!(c.follow_shard(true, None, std::slice::from_ref(&old_mate), 0), 0);
        let request = Claim {
            epoch: 5,
            slots: vec![(0, 1)],
        };
        assert_eq!(c.votes_out, vec![(c.nodes[b].link_token, VoteMessage::Request(8, request))]);
        assert_eq!(c.follow_shard(true, None, std::slice::from_ref(&old_mate), 10), 0, "no vote yet");
        // A grant for another epoch does not count; b's for 8 does.
        c.count_vote(b, 9);
        assert_eq!(c.follow_shard(true, None, std::slice::from_ref(&old_mate), 20), 0);
        c.count_vote(b, 8);
        assert_eq!(c.follow_shard(true, None, std::slice::from_ref(&old_mate), 30), 2);
        assert!(c.serves(0) && c.serves(1));
        assert_eq!(c.owner(2).map(|n| n.id.clone()), Some(other_id));
        assert_eq!((c.myself().config_epoch, c.current_epoch), (8, 8));
        assert!(c.election.is_none());
        // Taken once: nothing more to take, no new epoch.
        assert_eq!(c.follow_shard(true, None, &[old_mate], 40), 0);
        assert_eq!(c.myself().config_epoch, 8);
    }

    #[test]
    fn a_new_leader_alone_takes_at_once_and_asks_again_after_a_timeout() {
        let mut c = Cluster::new("nodes.conf".into(), 0);
        let old = node('a', 7001, flag::MASTER);
        let old_mate = mate(&old);
        let a = c.add_node(old);
        c.add_slot(a, 0);
        assert_eq!(c.follow_shard(true, None, std::slice::from_ref(&old_mate), 0), 1);
        assert!(c.votes_out.is_empty());
        // Three masters serving slots: one other's vote is a majority with
        // its own shard's. None within the timeout: it asks again, with a
        // new epoch, and the requests not sent of the first vote go.
        let mut c = Cluster::new("nodes.conf".into(), 0);
        let a = c.add_node(node('a', 7001, flag::MASTER));
        let b = c.add_node(node('b', 7002, flag::MASTER));
        let d = c.add_node(node('d', 7004, flag::MASTER));
        c.add_slot(a, 0);
        c.add_slot(b, 1);
        c.add_slot(d, 2);
        let old_mate = mate(&c.nodes[a].clone());
        c.follow_shard(true, None, std::slice::from_ref(&old_mate), 0);
        assert_eq!(c.votes_out.len(), 2);
        let first = c.election.as_ref().unwrap().epoch;
        let late = ELECTION_TIMEOUT_MS + ELECTION_JITTER_MS;
        c.follow_shard(true, None, std::slice::from_ref(&old_mate), late);
        let second = c.election.as_ref().unwrap().epoch;
        assert_eq!((c.votes_out.len(), second), (2, first + 1));
        c.count_vote(d, first);
        c.count_vote(a, second);
        assert_eq!(
            c.follow_shard(true, None, std::slice::from_ref(&old_mate), late + 1),
            0,
            "neither the old vote nor one from a node not asked counts"
        );
        c.count_vote(d, second);
        assert_eq!(c.follow_shard(true, None, std::slice::from_ref(&old_mate), late + 2), 1);
        assert_eq!(c.myself().config_epoch, second);
        // A member that stops leading drops its vote and its requests.
        let mut e = Cluster::new("nodes.conf".into(), 0);
        let a = e.add_node(node('a', 7001, flag::MASTER));
        let b = e.add_node(node('b', 7002, flag::MASTER));
        e.add_slot(a, 0);
        e.add_slot(b, 1);
        let old_mate = mate(&e.nodes[a].clone());
        e.follow_shard(true, None, std::slice::from_ref(&old_mate), 0);
        assert!(e.election.is_some() && !e.votes_out.is_empty());
        e.follow_shard(false, None, std::slice::from_ref(&old_mate), 1);
        assert!(e.election.is_none() && e.votes_out.is_empty());
        e.count_vote(b, e.current_epoch);
        // Leading again, it asks afresh rather than win on old votes.
        assert_eq!(e.follow_shard(true, None, std::slice::from_ref(&old_mate), 2), 0);
    }

    #[test]
    fn a_master_votes_for_a_replica_whose_master_failed_or_that_fails_over_by_hand() {
        let mut c = Cluster::new("nodes.conf".into(), 0);
        let master = c.add_node(node('a', 7001, flag::MASTER));
        let replica = c.add_node(node('b', 7002, flag::SLAVE));
        c.nodes[replica].master = Some(c.nodes[master].id.clone());
        c.nodes[replica].link_up = true;
        c.add_slot(0, 100);
        c.add_slot(master, 0);
        c.nodes[master].config_epoch = 1;
        let claim = Claim {
            epoch: 1,
            slots: vec![(0, 0)],
        };
        let at = |now_ms, force_ack| VoteAsk {
            force_ack,
            now_ms,
            node_timeout_ms: 1000,
        };
        c.current_epoch = 2;
        // Its master is up: refused, unless the replica fails over by hand.
        assert!(!c.grant_vote(replica, 2, &claim, at(10_000, false)));
        assert!(c.grant_vote(replica, 2, &claim, at(10_000, true)));
        // Its master failed: granted, but not twice about the same master
        // within two node timeouts.
        c.nodes[master].flags |= flag::FAIL;
        c.current_epoch = 3;
        assert!(!c.grant_vote(replica, 3, &claim, at(11_000, false)));
        assert!(c.grant_vote(replica, 3, &claim, at(12_000, false)));
        // A replica whose master this node does not know: refused.
        c.nodes[replica].master = Some("f".repeat(40));
        c.current_epoch = 4;
        assert!(!c.grant_vote(replica, 4, &claim, at(20_000, true)));
    }

    #[test]
    fn a_replica_needs_a_majority_of_the_masters_without_a_vote_of_its_own() {
        let mut c = Cluster::new("nodes.conf".into(), 0);
        let master = c.add_node(node('a', 7001, flag::MASTER | flag::FAIL));
        let others: Vec<usize> = ['b', 'c'].iter().map(|&id| c.add_node(node(id, 7002, flag::MASTER))).collect();
        for (slot, &i) in [master, others[0], others[1]].iter().enumerate() {
            c.add_slot(i, slot as u16);
            c.nodes[i].link_up = true;
        }
        c.nodes[0].flags = flag::MYSELF | flag::SLAVE;
        c.nodes[0].master = Some(c.nodes[master].id.clone());
        // The election waits for its delay, then asks every master (the
        // failed one too: it is one of the three).
        assert!(!c.failover_step(1000, false, true));
        let at = c.failover_at_ms;
        assert!((1500..2000).contains(&at), "{at}");
        assert!(!c.failover_step(at, false, true));
        let epoch = c.election.as_ref().unwrap().epoch;
        assert_eq!(c.votes_out.len(), 3);
        // One grant of three masters is no majority; two are.
        c.count_vote(others[0], epoch);
        assert!(!c.failover_step(at + 1, false, true));
        c.count_vote(others[1], epoch);
        assert!(c.failover_step(at + 2, false, true));
        assert!(c.myself().is_master());
        assert_eq!(c.owner_index(0), Some(0));
        assert_eq!(c.myself().config_epoch, epoch);
        // A replica with `cluster-replica-no-failover`, or data too old,
        // does not start.
        let mut d = Cluster::new("nodes.conf".into(), 0);
        let m = d.add_node(node('a', 7001, flag::MASTER | flag::FAIL));
        d.add_slot(m, 0);
        d.nodes[0].flags = flag::MYSELF | flag::SLAVE;
        d.nodes[0].master = Some(d.nodes[m].id.clone());
        assert!(!d.failover_step(1000, true, true));
        assert!(!d.failover_step(1000, false, false));
        assert_eq!(d.failover_at_ms, 0);
    }

    #[test]
    fn a_master_votes_once_per_epoch_and_not_for_a_claim_its_view_contradicts() {
        let mut c = Cluster::new("nodes.conf".into(), 0);
        let old = c.add_node(node('a', 7001, flag::MASTER));
        let asker = c.add_node(node('b', 7002, flag::MASTER));
        let elsewhere = c.add_node(node('d', 7004, flag::MASTER));
        c.nodes[old].config_epoch = 3;
        c.nodes[elsewhere].config_epoch = 6;
        c.add_slot(0, 100);
        c.add_slot(old, 0);
        c.add_slot(elsewhere, 1);
        c.add_slot(asker, 5);
        c.nodes[asker].config_epoch = 9;
        c.nodes[asker].link_up = true;
        c.current_epoch = 7;
        let claim = |slots: Vec<(u16, u16)>| Claim { epoch: 3, slots };
        // Slot 1 went to another master at epoch 6: a claim from a view
        // where it is still at epoch 3 is refused (overlapping and
        // out-of-range runs are read as Redis's bitmap would hold them).
        assert!(!c.grant_vote(asker, 7, &claim(vec![(0, 0), (0, 1), (16000, u16::MAX)]), VoteAsk::default()));
        // An older epoch than this node's is refused.
        let fair = claim(vec![(0, 0), (2, 5)]);
        assert!(!c.grant_vote(asker, 6, &fair, VoteAsk::default()));
        // Unassigned slots and the asker's own do not stand in the way.
        assert!(c.grant_vote(asker, 7, &fair, VoteAsk::default()));
        assert_eq!(c.last_vote_epoch, 7);
        assert_eq!(c.votes_out, vec![(c.nodes[asker].link_token, VoteMessage::Grant(7))]);
        // Once per epoch.
        assert!(!c.grant_vote(asker, 7, &fair, VoteAsk::default()));
        c.current_epoch = 8;
        assert!(c.grant_vote(asker, 8, &fair, VoteAsk::default()));
        // A shard member that no longer leads does not vote.
        c.current_epoch = 9;
        c.shard_leading = Some(false);
        assert!(!c.grant_vote(asker, 9, &fair, VoteAsk::default()));
        // Nor does a master serving no slot, unless it is a new leader
        // running its own vote.
        let mut r = Cluster::new("nodes.conf".into(), 0);
        let o = r.add_node(node('a', 7001, flag::MASTER));
        let s = r.add_node(node('b', 7002, flag::MASTER));
        r.add_slot(o, 0);
        let claim = Claim {
            epoch: 0,
            slots: vec![(0, 0)],
        };
        assert!(!r.grant_vote(s, 1, &claim, VoteAsk::default()));
        r.nodes[s].link_up = true;
        r.election = Some(Election {
            epoch: 1,
            started_ms: 0,
            timeout_ms: ELECTION_TIMEOUT_MS,
            claim: vec![9],
            asked: BTreeSet::new(),
            votes: BTreeSet::new(),
        });
        r.shard_leading = Some(true);
        r.current_epoch = 1;
        assert!(r.grant_vote(s, 1, &claim, VoteAsk::default()));
        // A candidate has voted for itself in the epoch it asks for.
        let mut t = Cluster::new("nodes.conf".into(), 0);
        let a = t.add_node(node('a', 7001, flag::MASTER));
        let b = t.add_node(node('b', 7002, flag::MASTER));
        t.nodes[b].link_up = true;
        t.add_slot(a, 0);
        t.add_slot(b, 1);
        let old_mate = mate(&t.nodes[a].clone());
        t.follow_shard(true, None, std::slice::from_ref(&old_mate), 0);
        let epoch = t.election.as_ref().unwrap().epoch;
        let theirs = Claim {
            epoch: 0,
            slots: vec![(1, 1)],
        };
        assert!(!t.grant_vote(b, epoch, &theirs, VoteAsk::default()));
        t.current_epoch = epoch + 1;
        assert!(t.grant_vote(b, epoch + 1, &theirs, VoteAsk::default()));
    }

    #[test]
    fn vote_messages_go_through_the_bus_processing() {
        use bus::{AUTH_ACK, AUTH_REQUEST, Via};
        let announce = bus::Announce::default();
        // The asker: a new leader (a master serving no slot yet) whose
        // former leader `a` serves slot 0; `v`, the other master, votes.
        let mut asker = Cluster::new("nodes.conf".into(), 0);
        let mut voter = Cluster::new("nodes.conf".into(), 0);
        let a = node('a', 7001, flag::MASTER);
        let old_mate = mate(&a);
        for c in [&mut asker, &mut voter] {
            let i = c.add_node(a.clone());
            c.add_slot(i, 0);
            c.nodes[i].config_epoch = 1;
        }
        let v = voter.myself().clone();
        let vi = asker.add_node(Node { flags: flag::MASTER, ..v });
        asker.add_slot(vi, 1);
        asker.nodes[vi].config_epoch = 2;
        voter.add_slot(0, 1);
        voter.nodes[0].config_epoch = 2;
        let me = asker.myself().clone();
        let ai = voter.add_node(Node { flags: flag::MASTER, ..me });
        voter.nodes[ai].link_up = true;
        asker.follow_shard(true, None, std::slice::from_ref(&old_mate), 0);
        let (epoch, claim) = match asker.votes_out.as_slice() {
            [(_, VoteMessage::Request(epoch, claim))] => (*epoch, claim.clone()),
            other => panic!("{other:?}"),
        };
        let epoch = &epoch;
        let request = bus::Message {
            current_epoch: *epoch,
            claim: Some(claim),
            ..asker.message(AUTH_REQUEST, &announce)
        };
        let request = bus::Message::decode(&request.encode()[4..]).unwrap();
        let via = Via::Link(0);
        voter.process(&request, &via, 0, 15000, false);
        assert_eq!(voter.votes_out, vec![(voter.nodes[ai].link_token, VoteMessage::Grant(*epoch))]);
        let grant = bus::Message {
            current_epoch: *epoch,
            ..voter.message(AUTH_ACK, &announce)
        };
        asker.process(&grant, &via, 0, 15000, false);
        assert_eq!(asker.follow_shard(true, None, &[old_mate], 1), 1);
        assert_eq!(asker.myself().config_epoch, *epoch);
        // A request cut short is refused whole.
        let bytes = request.encode();
        assert!(bus::Message::decode(&bytes[4..bytes.len() - 2]).is_none());
    }

    #[test]
    fn a_follower_serving_no_slot_replicates_the_leader() {
        let mut c = Cluster::new("nodes.conf".into(), 0);
        let leader = node('c', 7003, flag::MASTER);
        let leader_id = leader.id.clone();
        c.add_node(leader);
        c.add_slot(0, 9);
        // It serves a slot still: it waits for the leader's claim.
        c.follow_shard(false, Some(&leader_id), &[], 0);
        assert!(c.myself().is_master());
        c.del_slot(9);
        c.follow_shard(false, Some(&leader_id), &[], 0);
        assert!(c.myself().has(flag::SLAVE) && !c.myself().is_master());
        assert_eq!(c.myself().master.as_deref(), Some(leader_id.as_str()));
        // A leader unknown to the cluster yet is not followed.
        let mut d = Cluster::new("nodes.conf".into(), 0);
        d.follow_shard(false, Some(&leader_id), &[], 0);
        assert!(d.myself().is_master());
        // Leading again, it is a master.
        c.follow_shard(true, None, &[], 0);
        assert!(c.myself().is_master() && c.myself().master.is_none());
    }

    #[test]
    fn a_leader_meets_its_mates_once_the_cluster_has_slots() {
        let mut c = Cluster::new("nodes.conf".into(), 0);
        let m = mate(&node('e', 7005, flag::MASTER));
        c.follow_shard(true, None, std::slice::from_ref(&m), 0);
        assert_eq!(c.nodes.len(), 1, "no cluster yet: redis-cli --cluster create wants empty nodes");
        c.add_slot(0, 1);
        c.follow_shard(true, None, std::slice::from_ref(&m), 0);
        assert_eq!(c.nodes.len(), 2);
        assert!(c.nodes[1].has(flag::HANDSHAKE | flag::MEET));
        assert_eq!((c.nodes[1].port, c.nodes[1].cport), (7005, 17005));
        c.follow_shard(true, None, &[m], 0);
        assert_eq!(c.nodes.len(), 2, "one handshake at a time");
    }
}
