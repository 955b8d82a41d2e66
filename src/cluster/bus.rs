//! The cluster bus: how keylock nodes learn each other and the slot map.
//! Each node listens on its bus port (`cluster-port`, or the client port
//! plus 10000, as Redis) and keeps one outbound link to every node it knows,
//! run as a task on the server thread. Over it, every 100 ms or at once
//! after a change, it sends a PING carrying its whole claim — id,
//! address, flags, epochs, the slots it serves — and what it knows of the
//! other nodes (the gossip); the receiver answers with a PONG of its own
//! claim. MEET is a PING that asks an unknown receiver to add its sender
//! (CLUSTER MEET); PUBLISH carries a message published on one node to the
//! subscribers of every other, as Redis's bus does. A Raft shard's new
//! leader asks the masters for their votes with AUTH_REQUEST, and they
//! grant them with AUTH_ACK (see `Cluster::grant_vote`).
//!
//! The messages are keylock's own framing (a length, then the fields
//! below), not Redis's binary `clusterMsg`: a keylock cluster is made of
//! keylock nodes; what clients and `redis-cli --cluster` see (CLUSTER
//! NODES, SLOTS, SHARDS, redirections) is Redis's.

use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{Cluster, Node, VoteMessage, flag, valid_node_id};
use crate::engine::Engine;
use crate::server::Shared;

/// Message types by Redis's numbering, with the names CLUSTER INFO's
/// `cluster_stats_messages_*` use.
pub const MESSAGE_TYPES: &[&str] = &[
    "ping",
    "pong",
    "meet",
    "fail",
    "publish",
    "auth-req",
    "auth-ack",
    "update",
    "mfstart",
    "module",
    "publishshard",
];

const PING: u8 = 0;
const PONG: u8 = 1;
const MEET: u8 = 2;
const PUBLISH: u8 = 4;
/// A message SPUBLISHed on one node of a shard (master and replicas), for
/// the others of the shard.
const PUBLISHSHARD: u8 = 10;

/// PUBLISH and PUBLISHSHARD carry a message, not the sender's claim.
fn is_publish(kind: u8) -> bool {
    kind == PUBLISH || kind == PUBLISHSHARD
}
pub(super) const AUTH_REQUEST: u8 = 5;
pub(super) const AUTH_ACK: u8 = 6;
const UPDATE: u8 = 7;
const MFSTART: u8 = 8;

/// In a message's flags, beside the sender's node flags: the sender is a
/// master pausing its writers for a replica's manual failover (Redis's
/// `CLUSTERMSG_FLAG0_PAUSED`); its offset is then final.
const MF_PAUSED: u16 = 1 << 15;
/// In a vote request's flags: a manual failover's, granted while the
/// master is up (Redis's `CLUSTERMSG_FLAG0_FORCEACK`).
const MF_FORCEACK: u16 = 1 << 14;

const MAGIC: &[u8; 4] = b"KLB2";
/// A frame larger than this closes the link.
const MAX_FRAME: usize = 64 << 20;
/// How often a link pings when nothing changed.
const PING_INTERVAL: Duration = Duration::from_millis(100);

/// What a node says of another in a message's gossip section.
#[derive(Debug, Clone, PartialEq)]
pub struct Gossip {
    pub id: String,
    pub ip: String,
    pub port: u16,
    pub cport: u16,
    pub flags: u16,
}

/// One bus message.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub kind: u8,
    pub sender: String,
    pub current_epoch: u64,
    pub config_epoch: u64,
    pub flags: u16,
    pub port: u16,
    pub cport: u16,
    /// The announced address (`cluster-announce-ip`); empty: the address
    /// the connection comes from.
    pub ip: String,
    pub hostname: String,
    pub slots: Vec<(u16, u16)>,
    /// The sender's master when it is a replica (a Raft shard's
    /// follower), else empty.
    pub master: String,
    /// The sender's replication offset.
    pub offset: u64,
    pub gossip: Vec<Gossip>,
    /// PUBLISH: channel and message.
    pub publish: Option<(Bytes, Bytes)>,
    /// AUTH_REQUEST: the slots the sender asks to take. UPDATE: the
    /// slots and configuration epoch of the node it is about.
    pub claim: Option<super::Claim>,
    /// UPDATE: the node whose claim it carries.
    pub about: Option<String>,
}

fn put_str8(out: &mut BytesMut, s: &str) {
    let s = &s.as_bytes()[..s.len().min(255)];
    out.put_u8(s.len() as u8);
    out.put_slice(s);
}

fn get_str8(buf: &mut &[u8]) -> Option<String> {
    let len = *buf.first()? as usize;
    buf.advance(1);
    let s = buf.get(..len)?;
    let s = String::from_utf8(s.to_vec()).ok()?;
    buf.advance(len);
    Some(s)
}

fn get_id(buf: &mut &[u8]) -> Option<String> {
    let id = buf.get(..40)?;
    if !valid_node_id(id) {
        return None;
    }
    let id = String::from_utf8(id.to_vec()).ok()?;
    buf.advance(40);
    Some(id)
}

fn get_blob(buf: &mut &[u8]) -> Option<Bytes> {
    if buf.len() < 4 {
        return None;
    }
    let len = buf.get_u32() as usize;
    let blob = Bytes::copy_from_slice(buf.get(..len)?);
    buf.advance(len);
    Some(blob)
}

/// About what a publish frame takes beside its channel and message: the
/// header (a sender without a hostname, with a master, no slots or
/// gossip) and the two lengths.
pub const PUBLISH_FRAME_OVERHEAD: usize = 160;

impl Message {
    /// The frame: its length (4 bytes), then the message.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = BytesMut::with_capacity(128 + self.slots.len() * 4 + self.gossip.len() * 64);
        out.put_u32(0);
        out.put_slice(MAGIC);
        out.put_u8(self.kind);
        out.put_slice(self.sender.as_bytes());
        out.put_u64(self.current_epoch);
        out.put_u64(self.config_epoch);
        out.put_u16(self.flags);
        out.put_u16(self.port);
        out.put_u16(self.cport);
        put_str8(&mut out, &self.ip);
        put_str8(&mut out, &self.hostname);
        out.put_u16(self.slots.len() as u16);
        for &(start, end) in &self.slots {
            out.put_u16(start);
            out.put_u16(end);
        }
        put_str8(&mut out, &self.master);
        out.put_u64(self.offset);
        out.put_u16(self.gossip.len() as u16);
        for g in &self.gossip {
            out.put_slice(g.id.as_bytes());
            put_str8(&mut out, &g.ip);
            out.put_u16(g.port);
            out.put_u16(g.cport);
            out.put_u16(g.flags);
        }
        if let Some((channel, message)) = &self.publish {
            out.put_u32(channel.len() as u32);
            out.put_slice(channel);
            out.put_u32(message.len() as u32);
            out.put_slice(message);
        }
        if let Some(claim) = &self.claim {
            out.put_u64(claim.epoch);
            out.put_u16(claim.slots.len() as u16);
            for &(start, end) in &claim.slots {
                out.put_u16(start);
                out.put_u16(end);
            }
        }
        if let Some(about) = &self.about {
            out.put_slice(about.as_bytes());
        }
        let len = (out.len() - 4) as u32;
        out[..4].copy_from_slice(&len.to_be_bytes());
        out.to_vec()
    }

    /// A message from a frame's body (without its length); None for
    /// anything malformed.
    pub fn decode(mut buf: &[u8]) -> Option<Message> {
        let buf = &mut buf;
        if buf.get(..4)? != MAGIC {
            return None;
        }
        buf.advance(4);
        let kind = *buf.first()?;
        buf.advance(1);
        let sender = get_id(buf)?;
        if buf.len() < 22 {
            return None;
        }
        let current_epoch = buf.get_u64();
        let config_epoch = buf.get_u64();
        let flags = buf.get_u16();
        let port = buf.get_u16();
        let cport = buf.get_u16();
        let ip = get_str8(buf)?;
        let hostname = get_str8(buf)?;
        if buf.len() < 2 {
            return None;
        }
        let nslots = buf.get_u16() as usize;
        if buf.len() < nslots * 4 {
            return None;
        }
        let slots = (0..nslots).map(|_| (buf.get_u16(), buf.get_u16())).collect();
        let master = get_str8(buf)?;
        if !master.is_empty() && !valid_node_id(master.as_bytes()) {
            return None;
        }
        if buf.len() < 10 {
            return None;
        }
        let offset = buf.get_u64();
        let ngossip = buf.get_u16() as usize;
        let mut gossip = Vec::with_capacity(ngossip.min(1024));
        for _ in 0..ngossip {
            let id = get_id(buf)?;
            let ip = get_str8(buf)?;
            if buf.len() < 6 {
                return None;
            }
            gossip.push(Gossip {
                id,
                ip,
                port: buf.get_u16(),
                cport: buf.get_u16(),
                flags: buf.get_u16(),
            });
        }
        let publish = if is_publish(kind) {
            Some((get_blob(buf)?, get_blob(buf)?))
        } else {
            None
        };
        let claim = if kind == AUTH_REQUEST || kind == UPDATE {
            if buf.len() < 10 {
                return None;
            }
            let epoch = buf.get_u64();
            let n = buf.get_u16() as usize;
            if buf.len() < n * 4 {
                return None;
            }
            let slots = (0..n).map(|_| (buf.get_u16(), buf.get_u16())).collect();
            Some(super::Claim { epoch, slots })
        } else {
            None
        };
        let about = if kind == UPDATE { Some(get_id(buf)?) } else { None };
        Some(Message {
            kind,
            sender,
            current_epoch,
            config_epoch,
            flags,
            port,
            cport,
            ip,
            hostname,
            slots,
            master,
            offset,
            gossip,
            publish,
            claim,
            about,
        })
    }
}

/// What this node announces: address overrides from the configuration.
#[derive(Debug, Clone, Default)]
pub struct Announce {
    pub ip: String,
    pub hostname: String,
}

impl Cluster {
    /// This node's PING / PONG / MEET: its claim and the gossip about
    /// every other node it knows (handshakes excepted).
    pub fn message(&self, kind: u8, announce: &Announce) -> Message {
        let me = self.myself();
        let master = match &me.master {
            Some(m) if me.has(flag::SLAVE) => m.clone(),
            _ => String::new(),
        };
        Message {
            kind,
            sender: me.id.clone(),
            current_epoch: self.current_epoch,
            config_epoch: me.config_epoch,
            flags: (me.flags & !(flag::MYSELF | flag::PFAIL | flag::FAIL))
                | if self.mf_paused_until != 0 && me.is_master() {
                    MF_PAUSED
                } else {
                    0
                },
            port: me.port,
            cport: me.cport,
            ip: announce.ip.clone(),
            hostname: announce.hostname.clone(),
            slots: self.ranges_of(0),
            master,
            offset: me.repl_offset,
            gossip: self.nodes[1..]
                .iter()
                .filter(|n| !n.has(flag::HANDSHAKE | flag::NOADDR))
                .map(|n| Gossip {
                    id: n.id.clone(),
                    ip: n.ip.clone(),
                    port: n.port,
                    cport: n.cport,
                    flags: n.flags,
                })
                .collect(),
            publish: None,
            claim: None,
            about: None,
        }
    }

    fn count(&mut self, sent: bool, kind: u8) {
        let name = MESSAGE_TYPES.get(kind as usize).copied().unwrap_or("unknown");
        let counts = if sent { &mut self.sent } else { &mut self.received };
        *counts.entry(name).or_default() += 1;
    }

    /// The node whose outbound link has this token.
    pub fn by_token(&self, token: u64) -> Option<usize> {
        self.nodes.iter().position(|n| n.link_token == token && token != 0)
    }
}

/// Where a message came from.
pub enum Via {
    /// An outbound link's answer: the link's token.
    Link(u64),
    /// An inbound connection, with its peer and local addresses.
    Inbound { peer: IpAddr, local: IpAddr },
}

/// Outcome of a message for the engine: keys to drop (slots this node
/// lost while holding keys in them) and a message to publish.
struct Effects {
    dirty_slots: Vec<u16>,
    /// Whether to a shard's channel, the channel, the message.
    publish: Option<(bool, Bytes, Bytes)>,
}

fn ip_text(ip: IpAddr) -> String {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6.to_string(),
        },
        IpAddr::V4(v4) => v4.to_string(),
    }
}

impl Cluster {
    /// Redis's `clusterProcessPacket`, for keylock's messages. Returns the
    /// index of the sender when it is a known node.
    pub(super) fn process(
        &mut self,
        msg: &Message,
        via: &Via,
        now_ms: u64,
        node_timeout_ms: u64,
        announced: bool,
    ) -> (Option<usize>, Vec<u16>) {
        self.count(false, msg.kind);
        if msg.sender == self.my_id() {
            return (None, Vec::new());
        }
        let peer_ip = match via {
            Via::Inbound { peer, local } => {
                if (msg.kind == MEET || self.myself().ip.is_empty()) && !announced {
                    // This node learns its own address from how others
                    // reach it.
                    let me = ip_text(*local);
                    if self.myself().ip != me {
                        self.myself_mut().ip = me;
                        self.changed();
                    }
                }
                Some(ip_text(*peer))
            }
            Via::Link(_) => None,
        };
        let mut sender = self
            .index_of(msg.sender.as_bytes())
            .filter(|&i| !self.nodes[i].has(flag::HANDSHAKE));
        if let Via::Link(token) = via
            && let Some(link) = self.by_token(*token)
        {
            if self.nodes[link].has(flag::HANDSHAKE) {
                // The handshake completes: the node's real id is known.
                if let Some(known) = sender {
                    self.del_node(link);
                    sender = Some(if known > link { known - 1 } else { known });
                } else {
                    let n = &mut self.nodes[link];
                    crate::log::verbose(format_args!("Handshake with node {} completed.", msg.sender));
                    n.id = msg.sender.clone();
                    n.flags &= !(flag::HANDSHAKE | flag::MEET);
                    n.flags |= msg.flags & (flag::MASTER | flag::SLAVE);
                    self.changed();
                    sender = Some(link);
                }
            } else if self.nodes[link].id != msg.sender {
                // The node at that address is another one now.
                let n = &mut self.nodes[link];
                crate::log::verbose(format_args!(
                    "PONG contains mismatching sender ID. About node {} added {} ms ago, having flags {}",
                    n.id,
                    now_ms.saturating_sub(n.ctime),
                    n.flags
                ));
                n.flags |= flag::NOADDR;
                n.ip.clear();
                n.port = 0;
                n.cport = 0;
                self.changed();
                return (None, Vec::new());
            } else {
                self.nodes[link].flags &= !flag::MEET;
            }
        }
        if sender.is_none() && msg.kind == MEET && !self.blacklisted(&msg.sender, now_ms) {
            let mut node = Node::new(msg.sender.clone(), msg.flags & (flag::MASTER | flag::SLAVE), now_ms);
            node.ip = if msg.ip.is_empty() {
                peer_ip.clone().unwrap_or_default()
            } else {
                msg.ip.clone()
            };
            node.port = msg.port;
            node.cport = msg.cport;
            node.hostname = msg.hostname.clone();
            sender = Some(self.add_node(node));
        }
        let Some(s) = sender else {
            return (None, Vec::new());
        };
        if msg.current_epoch > self.current_epoch {
            self.current_epoch = msg.current_epoch;
            self.changed();
        }
        {
            let n = &mut self.nodes[s];
            let ip = if msg.ip.is_empty() {
                peer_ip.unwrap_or_else(|| n.ip.clone())
            } else {
                msg.ip.clone()
            };
            let role = msg.flags & (flag::MASTER | flag::SLAVE | flag::NOFAILOVER);
            let master = (role & flag::SLAVE != 0 && !msg.master.is_empty()).then(|| msg.master.clone());
            n.repl_offset = msg.offset;
            if msg.flags & MF_PAUSED != 0
                && self.nodes[0].master.as_deref() == Some(msg.sender.as_str())
                && let Some(mf) = self.manual_failover.as_mut()
                && mf.master_offset.is_none()
            {
                mf.master_offset = Some(msg.offset);
                crate::log::warning(format_args!(
                    "Received replication offset for paused master manual failover: {}",
                    msg.offset
                ));
            }
            let n = &mut self.nodes[s];
            if n.ip != ip
                || n.port != msg.port
                || n.cport != msg.cport
                || n.hostname != msg.hostname
                || n.flags & (flag::MASTER | flag::SLAVE | flag::NOFAILOVER) != role
                || n.master != master
                || n.config_epoch != msg.config_epoch
            {
                let became_replica = role & flag::SLAVE != 0 && n.is_master();
                if role & flag::MASTER != 0 && n.has(flag::SLAVE) {
                    // A replica that took over may be migrated to, as its
                    // old master could (`clusterSetNodeAsMaster`).
                    n.flags |= flag::MIGRATE_TO;
                }
                n.ip = ip;
                n.port = msg.port;
                n.cport = msg.cport;
                n.hostname = msg.hostname.clone();
                n.flags = (n.flags & !(flag::MASTER | flag::SLAVE | flag::NOADDR | flag::NOFAILOVER)) | role;
                n.master = master;
                n.config_epoch = msg.config_epoch;
                if became_replica {
                    // A master that turned replica serves no slot any
                    // more (Redis's `clusterSetNodeAsMaster` undone).
                    self.del_node_slots(s);
                }
                self.changed();
            }
        }
        if matches!(via, Via::Link(_)) || !is_publish(msg.kind) {
            self.answered(s, now_ms, node_timeout_ms);
        }
        let mut dirty = Vec::new();
        if !is_publish(msg.kind) && msg.flags & flag::MASTER != 0 {
            self.update_if_stale(s, msg.config_epoch, &msg.slots);
            dirty = self.take_claim(s, msg.config_epoch, &msg.slots);
            // A master that claims what another holds with the same
            // epoch: the one with the lesser id takes a new epoch
            // (`clusterHandleConfigEpochCollision`).
            if self.myself().is_master() && msg.config_epoch == self.myself().config_epoch && msg.sender.as_str() > self.my_id() {
                self.current_epoch += 1;
                self.nodes[0].config_epoch = self.current_epoch;
                self.changed();
                self.fsync_pending = true;
                crate::log::verbose(format_args!(
                    "WARNING: configEpoch collision with node {}. configEpoch set to {}",
                    msg.sender, self.current_epoch
                ));
            }
        }
        if !is_publish(msg.kind) {
            self.gossip(s, &msg.gossip, now_ms, node_timeout_ms);
        }
        match (msg.kind, &msg.claim) {
            (AUTH_REQUEST, Some(claim)) => {
                let ask = super::VoteAsk {
                    force_ack: msg.flags & MF_FORCEACK != 0,
                    now_ms,
                    node_timeout_ms,
                };
                self.grant_vote(s, msg.current_epoch, claim, ask);
            }
            (AUTH_ACK, _) => self.count_vote(s, msg.current_epoch),
            (UPDATE, Some(claim)) if self.shard_leading.is_none() => {
                dirty.extend(self.take_update(msg.about.as_deref().unwrap_or(""), claim));
            }
            (MFSTART, _) if self.myself().is_master() && self.nodes[s].master.as_deref() == Some(self.my_id()) => {
                // A replica's manual failover: writers pause meanwhile,
                // and this master's messages tell its offset as final.
                crate::log::warning(format_args!("Manual failover requested by replica {}.", msg.sender));
                self.mf_paused_until = now_ms + super::MF_TIMEOUT_MS;
                self.mf_pause_asked = true;
                self.version += 1;
            }
            _ => {}
        }
        (Some(s), dirty)
    }

    /// The gossip section: failure reports from a master, and handshakes
    /// with nodes this one did not know.
    fn gossip(&mut self, sender: usize, gossip: &[Gossip], now_ms: u64, node_timeout_ms: u64) {
        let reporter = self.nodes[sender].id.clone();
        let reporter_master = self.nodes[sender].is_master();
        for g in gossip {
            match self.index_of(g.id.as_bytes()) {
                Some(0) => {}
                Some(i) => {
                    if !reporter_master {
                        continue;
                    }
                    if g.flags & (flag::PFAIL | flag::FAIL) != 0 {
                        self.nodes[i].fail_reports.insert(reporter.clone(), now_ms);
                        self.mark_failing_if_needed(i, now_ms, node_timeout_ms);
                    } else {
                        self.nodes[i].fail_reports.remove(&reporter);
                    }
                }
                None => {
                    // A node a known node knows is taken in with its id
                    // and role, not by a handshake with its address,
                    // which another node may have now (Redis 7.0).
                    if g.ip.is_empty() || g.flags & flag::NOADDR != 0 || self.blacklisted(&g.id, now_ms) {
                        continue;
                    }
                    let mut node = Node::new(g.id.clone(), g.flags & (flag::MASTER | flag::SLAVE | flag::NOFAILOVER), now_ms);
                    node.ip = g.ip.clone();
                    node.port = g.port;
                    node.cport = g.cport;
                    self.add_node(node);
                }
            }
        }
    }
}

impl Engine {
    /// A message arrived: the cluster takes it in; keys of slots this node
    /// lost are dropped; a PUBLISH reaches the subscribers here. Returns
    /// the answer to send back (a PONG for a PING or MEET).
    pub fn cluster_message(&mut self, msg: &Message, via: &Via) -> Option<Vec<u8>> {
        let now = self.state.clock.now_ms();
        let timeout = self.state.cluster_node_timeout();
        let announce = self.state.cluster_announce();
        self.state.cluster_refresh_told();
        #[cfg(feature = "raft")]
        let leading = self.state.raft_shard_leading();
        #[cfg(not(feature = "raft"))]
        let leading = None;
        let cluster = self.state.cluster.as_deref_mut()?;
        // A shard member votes only while it leads, as of now (not of the
        // last cron pass).
        if leading.is_some() {
            cluster.shard_leading = leading;
        }
        if cluster.drop_packet_filter == i64::from(msg.kind) {
            cluster.count(false, msg.kind);
            crate::log::warning(format_args!("Dropping packet that matches debug drop filter"));
            return None;
        }
        let (sender, dirty) = cluster.process(msg, via, now, timeout, !announce.ip.is_empty());
        let answer = (sender.is_some() || !is_publish(msg.kind)) && matches!(msg.kind, PING | MEET) && matches!(via, Via::Inbound { .. });
        let reply = answer.then(|| {
            cluster.count(true, PONG);
            cluster.message(PONG, &announce).encode()
        });
        let effects = Effects {
            dirty_slots: self.state.lost_slots_to_empty(dirty, &msg.sender),
            publish: msg
                .publish
                .clone()
                .filter(|_| sender.is_some())
                .map(|(channel, message)| (msg.kind == PUBLISHSHARD, channel, message)),
        };
        self.apply_bus_effects(effects);
        // A grant may complete this node's vote: the slots are taken now.
        #[cfg(feature = "raft")]
        if msg.kind == AUTH_ACK {
            self.state.raft_cluster_sync();
        }
        if let Some(c) = self.state.cluster.as_deref_mut()
            && std::mem::take(&mut c.mf_pause_asked)
        {
            let end =
                std::time::Instant::now() + std::time::Duration::from_millis(crate::cluster::MF_TIMEOUT_MS * crate::cluster::MF_PAUSE_MULT);
            self.state.pause_clients(false, end);
            if let Some(c) = self.state.cluster.as_deref_mut() {
                c.mf_pause_end = Some(end);
            }
        }
        self.state.cluster_end_failover_pause(now);
        self.state.cluster_sync_replication();
        self.state.cluster_update_state();
        reply
    }

    fn apply_bus_effects(&mut self, effects: Effects) {
        let mut deleted_any = false;
        for slot in effects.dirty_slots {
            let deleted = self.state.delete_keys_in_slot(slot);
            if deleted > 0 {
                deleted_any = true;
                crate::log::warning(format_args!(
                    "I lost the ownership of slot {slot} while holding {deleted} keys in it: deleted."
                ));
            }
        }
        if deleted_any {
            // The DELs go out now (to the append-only file, replicas, a
            // shard's log), not with whatever runs next.
            self.state.flush_effects();
        }
        if let Some((shard, channel, message)) = effects.publish {
            let client = &mut self.scripts.client;
            let kind = if shard {
                crate::pubsub::Kind::Shard
            } else {
                crate::pubsub::Kind::Channel
            };
            self.state.publish(client, kind, &channel, &message);
        }
        self.state.drop_lost_slot_channels(&mut self.scripts.client);
    }
}

/// Accepts bus connections on the bus port.
pub(crate) async fn accept_loop(listener: tokio::net::TcpListener, shared: Rc<Shared>) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                tokio::task::spawn_local(serve_inbound(stream, peer, shared.clone()));
            }
            Err(_) if !shared.listening.get() => return,
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

async fn read_frame(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).await.ok()?;
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return None;
    }
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).await.ok()?;
    Some(body)
}

/// An inbound connection: messages in, PONGs back.
async fn serve_inbound(mut stream: TcpStream, peer: SocketAddr, shared: Rc<Shared>) {
    let _ = stream.set_nodelay(true);
    let local = match stream.local_addr() {
        Ok(a) => a.ip(),
        Err(_) => return,
    };
    let mut closing = shared.closing.subscribe();
    let mut from: Option<String> = None;
    // The node's count of DEBUG CLUSTERLINK KILLs of its inbound links
    // when this one was told whose it is: another kill closes it.
    let mut kills = 0;
    loop {
        let frame = tokio::select! {
            f = read_frame(&mut stream) => f,
            _ = closing.wait_for(|c| *c) => None,
        };
        let Some(frame) = frame else { break };
        let Some(msg) = Message::decode(&frame) else {
            crate::log::warning(format_args!(
                "Bad message received on the cluster bus from {peer}: closing the connection"
            ));
            break;
        };
        let reply = {
            let mut engine = shared.engine.borrow_mut();
            let reply = engine.cluster_message(&msg, &Via::Inbound { peer: peer.ip(), local });
            if from.as_deref() != Some(msg.sender.as_str())
                && let Some(c) = engine.state.cluster.as_deref_mut()
                && let Some(i) = c.index_of(msg.sender.as_bytes())
            {
                c.nodes[i].inbound_links += 1;
                kills = c.nodes[i].inbound_kills;
                from = Some(msg.sender.clone());
            }
            let killed = from.as_deref().is_some_and(|id| {
                let c = engine.state.cluster.as_deref();
                c.and_then(|c| c.node(id.as_bytes())).is_some_and(|n| n.inbound_kills != kills)
            });
            if killed {
                break;
            }
            reply
        };
        shared.after_bus_message();
        if let Some(reply) = reply
            && stream.write_all(&reply).await.is_err()
        {
            break;
        }
    }
    if let Some(id) = from
        && let Some(c) = shared.engine.borrow_mut().state.cluster.as_deref_mut()
        && let Some(i) = c.index_of(id.as_bytes())
    {
        c.nodes[i].inbound_links = c.nodes[i].inbound_links.saturating_sub(1);
    }
}

/// Starts the links the cluster asks for.
pub(crate) fn start_links(shared: &Rc<Shared>) {
    let tokens = match shared.engine.borrow_mut().state.cluster.as_deref_mut() {
        Some(c) if !c.links_to_start.is_empty() => std::mem::take(&mut c.links_to_start),
        _ => return,
    };
    for token in tokens {
        tokio::task::spawn_local(link(token, shared.clone()));
    }
}

/// What a link needs to know of its node before each attempt.
fn link_target(shared: &Shared, token: u64) -> Option<Option<SocketAddr>> {
    let engine = shared.engine.borrow();
    let c = engine.state.cluster.as_deref()?;
    let i = c.by_token(token)?;
    let n = &c.nodes[i];
    if n.has(flag::NOADDR) || n.ip.is_empty() {
        return Some(None);
    }
    let ip: IpAddr = n.ip.parse().ok()?;
    Some(Some(SocketAddr::new(ip, n.cport)))
}

/// The outbound link to one node, for as long as the node is known.
async fn link(token: u64, shared: Rc<Shared>) {
    let mut closing = shared.closing.subscribe();
    loop {
        if *closing.borrow() {
            return;
        }
        let addr = match link_target(&shared, token) {
            None => return,
            Some(None) => {
                tokio::time::sleep(PING_INTERVAL).await;
                continue;
            }
            Some(Some(addr)) => addr,
        };
        let timeout = Duration::from_millis(shared.engine.borrow().state.cluster_node_timeout().max(100));
        let stream = tokio::select! {
            s = tokio::time::timeout(timeout, TcpStream::connect(addr)) => s.ok().and_then(Result::ok),
            _ = closing.wait_for(|c| *c) => return,
        };
        let Some(mut stream) = stream else {
            link_down(&shared, token, true);
            tokio::time::sleep(PING_INTERVAL).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        // DEBUG CLUSTERLINK KILLs of this link so far: another one ends it.
        let mut kills = 0;
        {
            let mut engine = shared.engine.borrow_mut();
            let now = engine.state.clock.now_ms();
            if let Some(c) = engine.state.cluster.as_deref_mut()
                && let Some(i) = c.by_token(token)
            {
                c.nodes[i].link_up = true;
                c.nodes[i].link_ctime = now;
                kills = c.nodes[i].link_kills;
            }
        }
        let wake = shared.cluster_wake.clone();
        loop {
            // Registered before the queues are read: a message queued from
            // now on wakes this link even while it waits for its answer.
            let woken = wake.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            // What to send: a PING (a MEET while the node has not
            // answered one), and the messages to publish.
            let frames = {
                let mut engine = shared.engine.borrow_mut();
                let now = engine.state.clock.now_ms();
                let announce = engine.state.cluster_announce();
                engine.state.cluster_refresh_told();
                let Some(c) = engine.state.cluster.as_deref_mut() else { return };
                let Some(i) = c.by_token(token) else { return };
                if c.nodes[i].link_kills != kills {
                    break;
                }
                let kind = if c.nodes[i].has(flag::MEET) { MEET } else { PING };
                let mut frames = Vec::new();
                for (kind, channel, message) in c.take_publishes(token) {
                    let mut m = c.message(kind, &announce);
                    m.slots.clear();
                    m.gossip.clear();
                    m.publish = Some((channel, message));
                    c.count(true, kind);
                    frames.extend_from_slice(&m.encode());
                }
                for vote in c.take_votes(token) {
                    // Sent at the epoch of the vote, whatever the current
                    // one is by now.
                    let m = match vote {
                        VoteMessage::Request(epoch, claim) => {
                            let mut m = Message {
                                current_epoch: epoch,
                                claim: Some(claim),
                                ..c.message(AUTH_REQUEST, &announce)
                            };
                            if c.manual_failover.is_some() {
                                m.flags |= MF_FORCEACK;
                            }
                            m
                        }
                        VoteMessage::Grant(epoch) => Message {
                            current_epoch: epoch,
                            ..c.message(AUTH_ACK, &announce)
                        },
                        VoteMessage::ManualFailoverStart => c.message(MFSTART, &announce),
                        VoteMessage::Update(about, claim) => Message {
                            claim: Some(claim),
                            about: Some(about),
                            ..c.message(UPDATE, &announce)
                        },
                    };
                    c.count(true, m.kind);
                    frames.extend_from_slice(&m.encode());
                }
                c.count(true, kind);
                frames.extend_from_slice(&c.message(kind, &announce).encode());
                if c.nodes[i].ping_sent == 0 {
                    c.nodes[i].ping_sent = now;
                }
                c.nodes[i].sending = frames.len();
                frames
            };
            // The frames written, then the answer; a kill of the link
            // (DEBUG CLUSTERLINK KILL, or its send buffer past
            // `cluster-link-sendbuf-limit`) ends the wait, which a peer
            // that reads nothing would make endless.
            let exchange = async {
                stream.write_all(&frames).await.ok()?;
                sent(&shared, token);
                tokio::time::timeout(timeout, read_frame(&mut stream)).await.ok().flatten()
            };
            tokio::pin!(exchange);
            let answer = loop {
                let woken = wake.notified();
                tokio::pin!(woken);
                woken.as_mut().enable();
                if link_kills(&shared, token) != Some(kills) {
                    break None;
                }
                tokio::select! {
                    f = &mut exchange => break f,
                    _ = woken => {}
                    _ = closing.wait_for(|c| *c) => return,
                }
            };
            sent(&shared, token);
            let Some(frame) = answer else { break };
            let Some(msg) = Message::decode(&frame) else { break };
            shared.engine.borrow_mut().cluster_message(&msg, &Via::Link(token));
            shared.after_bus_message();
            tokio::select! {
                _ = tokio::time::sleep(PING_INTERVAL) => {}
                _ = woken => {}
                _ = closing.wait_for(|c| *c) => return,
            }
        }
        link_down(&shared, token, false);
        tokio::time::sleep(PING_INTERVAL).await;
    }
}

/// How many times the outbound link to the node of `token` was killed
/// (None: the node is gone).
fn link_kills(shared: &Shared, token: u64) -> Option<u64> {
    let engine = shared.engine.borrow();
    let c = engine.state.cluster.as_deref()?;
    c.by_token(token).map(|i| c.nodes[i].link_kills)
}

/// The frames taken for the node of `token` are written (or dropped).
fn sent(shared: &Shared, token: u64) {
    let mut engine = shared.engine.borrow_mut();
    if let Some(c) = engine.state.cluster.as_deref_mut()
        && let Some(i) = c.by_token(token)
    {
        c.nodes[i].sending = 0;
    }
}

/// The link to a node is down; a node that cannot be reached counts as
/// pinged, so that it turns PFAIL after the node timeout.
fn link_down(shared: &Shared, token: u64, unreachable: bool) {
    let mut engine = shared.engine.borrow_mut();
    let now = engine.state.clock.now_ms();
    if let Some(c) = engine.state.cluster.as_deref_mut()
        && let Some(i) = c.by_token(token)
    {
        let n = &mut c.nodes[i];
        n.link_up = false;
        if unreachable && n.ping_sent == 0 {
            n.ping_sent = now;
        }
    }
}

impl Cluster {
    /// Queues a PUBLISH for every other node (Redis's
    /// `clusterPropagatePublish`).
    pub fn propagate_publish(&mut self, channel: &Bytes, message: &Bytes) {
        for n in &self.nodes[1..] {
            // As Redis's broadcast: to the nodes with a link up.
            if n.has(flag::HANDSHAKE | flag::NOADDR) || !n.link_up {
                continue;
            }
            self.outbox.push((n.link_token, PUBLISH, channel.clone(), message.clone()));
            self.new_sends = true;
        }
    }

    /// Queues a PUBLISHSHARD for the other nodes of this node's shard:
    /// its master (itself, if a master) and the master's replicas
    /// (Redis's `clusterPropagatePublishShard`).
    pub fn propagate_publish_shard(&mut self, channel: &Bytes, message: &Bytes) {
        let master = if self.nodes[0].is_master() {
            Some(self.nodes[0].id.clone())
        } else {
            self.nodes[0].master.clone()
        };
        let Some(master) = master else { return };
        for n in &self.nodes[1..] {
            let in_shard = n.id == master || (n.has(flag::SLAVE) && n.master.as_deref() == Some(master.as_str()));
            if !in_shard || n.has(flag::HANDSHAKE | flag::NOADDR) || !n.link_up {
                continue;
            }
            self.outbox.push((n.link_token, PUBLISHSHARD, channel.clone(), message.clone()));
            self.new_sends = true;
        }
    }

    /// A master `sender` claims slots that, in this node's view, a node
    /// serves at a newer configuration epoch (it came back after its
    /// replica took over, and that one is down): it is told that node's
    /// claim with an UPDATE (Redis's `clusterSendUpdate`, about the first
    /// such node), over the link to it. Plain clusters only: a Raft
    /// shard's slots follow its own vote.
    fn update_if_stale(&mut self, sender: usize, sender_epoch: u64, claimed: &[(u16, u16)]) {
        if self.shard_leading.is_some() || !self.nodes[sender].link_up {
            return;
        }
        let newer = super::slots_of_ranges(claimed).into_iter().find_map(|s| {
            let owner = self.owner_index(s).filter(|&o| o != sender)?;
            (self.nodes[owner].config_epoch > sender_epoch).then_some(owner)
        });
        let Some(owner) = newer else { return };
        let n = &self.nodes[owner];
        crate::log::verbose(format_args!(
            "Node {} has old slots configuration, sending an UPDATE message about {}",
            self.nodes[sender].id, n.id
        ));
        let update = VoteMessage::Update(
            n.id.clone(),
            super::Claim {
                epoch: n.config_epoch,
                slots: self.ranges_of(owner),
            },
        );
        let token = self.nodes[sender].link_token;
        if !self.votes_out.iter().any(|(t, v)| *t == token && *v == update) {
            self.votes_out.push((token, update));
            self.new_sends = true;
        }
    }

    /// An UPDATE about node `about` (its claim, at its configuration
    /// epoch): newer than this node knew, it takes it as that node's own
    /// message would be taken (a replica in this view turns master).
    /// Returns the slots taken from this node that still hold keys.
    fn take_update(&mut self, about: &str, claim: &super::Claim) -> Vec<u16> {
        let Some(n) = self.index_of(about.as_bytes()).filter(|&n| n != 0) else {
            return Vec::new();
        };
        if self.nodes[n].config_epoch >= claim.epoch {
            return Vec::new();
        }
        let node = &mut self.nodes[n];
        if node.has(flag::SLAVE) {
            node.flags = (node.flags & !flag::SLAVE) | flag::MASTER | flag::MIGRATE_TO;
            node.master = None;
        }
        node.config_epoch = claim.epoch;
        self.fsync_pending = true;
        self.changed();
        self.take_claim(n, claim.epoch, &claim.slots)
    }

    /// Whether messages (publishes, votes) were queued since the links
    /// were last woken: they are woken once for them.
    pub fn take_new_sends(&mut self) -> bool {
        std::mem::take(&mut self.new_sends)
    }

    fn take_votes(&mut self, token: u64) -> Vec<VoteMessage> {
        self.votes_out.extract_if(.., |(t, _)| *t == token).map(|(_, v)| v).collect()
    }

    fn take_publishes(&mut self, token: u64) -> Vec<(u8, Bytes, Bytes)> {
        self.outbox
            .extract_if(.., |(t, ..)| *t == token)
            .map(|(_, k, c, m)| (k, c, m))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_decode_as_encoded() {
        let msg = Message {
            kind: MEET,
            sender: "a".repeat(40),
            current_epoch: 7,
            config_epoch: 3,
            flags: flag::MASTER,
            port: 30001,
            cport: 40001,
            ip: "10.0.0.1".into(),
            hostname: "host-a".into(),
            slots: vec![(0, 5460), (7000, 7000)],
            master: String::new(),
            offset: 12,
            gossip: vec![Gossip {
                id: "b".repeat(40),
                ip: "10.0.0.2".into(),
                port: 30002,
                cport: 40002,
                flags: flag::MASTER | flag::PFAIL,
            }],
            publish: None,
            claim: None,
            about: None,
        };
        let frame = msg.encode();
        assert_eq!(u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize, frame.len() - 4);
        assert_eq!(Message::decode(&frame[4..]), Some(msg.clone()));
        let publish = Message {
            kind: PUBLISH,
            publish: Some((Bytes::from_static(b"ch"), Bytes::from_static(b"hello"))),
            ..msg
        };
        assert_eq!(Message::decode(&publish.encode()[4..]), Some(publish.clone()));
        let replica = Message {
            kind: PONG,
            flags: flag::SLAVE,
            slots: vec![],
            master: "d".repeat(40),
            publish: None,
            ..publish
        };
        assert_eq!(Message::decode(&replica.encode()[4..]), Some(replica.clone()));
        let request = Message {
            kind: AUTH_REQUEST,
            about: None,
            claim: Some(super::super::Claim {
                epoch: 9,
                slots: vec![(0, 100), (200, 200)],
            }),
            ..replica
        };
        assert_eq!(Message::decode(&request.encode()[4..]), Some(request));
    }

    #[test]
    fn malformed_frames_are_refused() {
        assert_eq!(Message::decode(b""), None);
        assert_eq!(Message::decode(b"KLB2\x00short"), None);
        let mut frame = Message {
            kind: PING,
            sender: "c".repeat(40),
            current_epoch: 0,
            config_epoch: 0,
            flags: 0,
            port: 1,
            cport: 2,
            ip: String::new(),
            hostname: String::new(),
            slots: vec![(1, 2)],
            master: String::new(),
            offset: 0,
            gossip: vec![],
            publish: None,
            claim: None,
            about: None,
        }
        .encode();
        frame.truncate(frame.len() - 3);
        assert_eq!(Message::decode(&frame[4..]), None);
    }
}
