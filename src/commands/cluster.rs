//! CLUSTER, ASKING, READONLY and READWRITE (cluster.c's `clusterCommand`,
//! `askingCommand`, `readonlyCommand`, `readwriteCommand`).
//!
//! On a server started without `cluster-enabled yes`, every one of them
//! (HELP included), once its arity is right, replies `ERR This instance
//! has cluster support disabled`, as redis-server does. In cluster mode
//! they read and change this node's view of the cluster
//! (`crate::cluster`), with Redis's replies and error texts.

use bytes::Bytes;

use super::args::parse_i64;
use super::server::help_reply;
use super::table::{CommandSpec, cmd, container, flag::*};
use super::{CmdError, CmdResult, Ctx, Reply};
use crate::cluster::{Cluster, EndpointType, SLOTS, flag as node_flag};

pub const COMMANDS: &[CommandSpec] = &[
    container("cluster", CLUSTER),
    cmd("asking", 1, asking).flags(FAST),
    cmd("readonly", 1, readonly).flags(LOADING | STALE | FAST),
    cmd("readwrite", 1, readwrite).flags(LOADING | STALE | FAST),
];

pub const CLUSTER_DISABLED: &str = "ERR This instance has cluster support disabled";

const CLUSTER: &[CommandSpec] = &[
    cmd("addslots", -3, addslots).flags(ADMIN | STALE),
    cmd("addslotsrange", -4, addslotsrange).flags(ADMIN | STALE),
    cmd("bumpepoch", 2, bumpepoch).flags(ADMIN | STALE),
    cmd("count-failure-reports", 3, count_failure_reports).flags(ADMIN | STALE),
    cmd("countkeysinslot", 3, countkeysinslot).flags(STALE),
    cmd("delslots", -3, addslots).flags(ADMIN | STALE),
    cmd("delslotsrange", -4, addslotsrange).flags(ADMIN | STALE),
    cmd("failover", -2, failover).flags(ADMIN | STALE),
    cmd("flushslots", 2, flushslots).flags(ADMIN | STALE),
    cmd("forget", 3, forget).flags(ADMIN | STALE),
    cmd("getkeysinslot", 4, getkeysinslot).flags(STALE),
    cmd("help", 2, help).flags(LOADING | STALE),
    cmd("info", 2, info).flags(STALE),
    cmd("keyslot", 3, keyslot).flags(STALE),
    cmd("links", 2, links).flags(STALE),
    cmd("meet", -4, meet).flags(ADMIN | STALE),
    cmd("myid", 2, myid).flags(STALE),
    cmd("nodes", 2, nodes).flags(STALE),
    cmd("replicas", 3, replicas).flags(ADMIN | STALE),
    cmd("replicate", 3, replicate).flags(ADMIN | STALE),
    cmd("reset", -2, reset).flags(ADMIN | STALE | NOSCRIPT),
    cmd("saveconfig", 2, saveconfig).flags(ADMIN | STALE),
    cmd("set-config-epoch", 3, set_config_epoch).flags(ADMIN | STALE),
    cmd("setslot", -4, setslot).flags(ADMIN | STALE),
    cmd("shards", 2, shards).flags(STALE),
    cmd("slaves", 3, replicas).flags(ADMIN | STALE),
    cmd("slots", 2, slots).flags(STALE),
];

/// This node's cluster, or the error of a server without cluster mode.
fn cluster<'a>(ctx: &'a mut Ctx) -> Result<&'a mut Cluster, CmdError> {
    ctx.state.cluster.as_deref_mut().ok_or_else(|| CmdError::new(CLUSTER_DISABLED))
}

/// The configuration changed: the state is recomputed, and the file
/// written, before the reply (Redis's `clusterDoBeforeSleep`).
fn changed(ctx: &mut Ctx) {
    ctx.state.cluster_update_state();
    ctx.state.cluster_save_if_changed();
}

fn syntax(argv: &[Bytes]) -> CmdError {
    CmdError::subcommand_syntax(&argv[1], "cluster")
}

fn asking(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    cluster(ctx)?;
    ctx.client.cluster_asking = true;
    Ok(Reply::OK)
}

fn readonly(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    cluster(ctx)?;
    ctx.client.cluster_readonly = true;
    Ok(Reply::OK)
}

fn readwrite(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    cluster(ctx)?;
    ctx.client.cluster_readonly = false;
    Ok(Reply::OK)
}

fn help(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    cluster(ctx)?;
    Ok(help_reply(
        "CLUSTER",
        &[
            "ADDSLOTS <slot> [<slot> ...]",
            "    Assign slots to current node.",
            "ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
            "    Assign slots which are between <start-slot> and <end-slot> to current node.",
            "BUMPEPOCH",
            "    Advance the cluster config epoch.",
            "COUNT-FAILURE-REPORTS <node-id>",
            "    Return number of failure reports for <node-id>.",
            "COUNTKEYSINSLOT <slot>",
            "    Return the number of keys in <slot>.",
            "DELSLOTS <slot> [<slot> ...]",
            "    Delete slots information from current node.",
            "DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
            "    Delete slots information which are between <start-slot> and <end-slot> from current node.",
            "FAILOVER [FORCE|TAKEOVER]",
            "    Promote current replica node to being a master.",
            "FORGET <node-id>",
            "    Remove a node from the cluster.",
            "GETKEYSINSLOT <slot> <count>",
            "    Return key names stored by current node in a slot.",
            "FLUSHSLOTS",
            "    Delete current node own slots information.",
            "INFO",
            "    Return information about the cluster.",
            "KEYSLOT <key>",
            "    Return the hash slot for <key>.",
            "MEET <ip> <port> [<bus-port>]",
            "    Connect nodes into a working cluster.",
            "MYID",
            "    Return the node id.",
            "NODES",
            "    Return cluster configuration seen by node. Output format:",
            "    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
            "REPLICATE <node-id>",
            "    Configure current node as replica to <node-id>.",
            "RESET [HARD|SOFT]",
            "    Reset current node (default: soft).",
            "SET-CONFIG-EPOCH <epoch>",
            "    Set config epoch of current node.",
            "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
            "    Set slot state.",
            "REPLICAS <node-id>",
            "    Return <node-id> replicas.",
            "SAVECONFIG",
            "    Force saving cluster configuration on disk.",
            "SLOTS",
            "    Return information about slots range mappings. Each range is made of:",
            "    start, end, master and replicas IP addresses, ports and ids",
            "SHARDS",
            "    Return information about slot range mappings and the nodes associated with them.",
            "LINKS",
            "    Return information about all network links between this node and its peers.",
            "    Output format is an array where each array element is a map containing attributes of a link",
        ],
    ))
}

/// `getSlotOrReply`.
fn slot_arg(a: &[u8]) -> CmdResult<u16> {
    match crate::numfmt::parse_i64(a) {
        Some(s) if (0..SLOTS as i64).contains(&s) => Ok(s as u16),
        _ => Err(CmdError::err("Invalid or out of range slot")),
    }
}

/// `checkSlotAssignmentsOrReply`: each slot free (to add) or served (to
/// delete), and named once.
fn check_assignments(c: &Cluster, seen: &mut [u8], del: bool, start: u16, end: u16) -> CmdResult<()> {
    for s in start..=end {
        if del && c.owner_index(s).is_none() {
            return Err(CmdError::err(format!("Slot {s} is already unassigned")));
        } else if !del && c.owner_index(s).is_some() {
            return Err(CmdError::err(format!("Slot {s} is already busy")));
        }
        seen[s as usize] += 1;
        if seen[s as usize] == 2 {
            return Err(CmdError::err(format!("Slot {s} specified multiple times")));
        }
    }
    Ok(())
}

/// `clusterUpdateSlots`.
fn update_slots(c: &mut Cluster, seen: &[u8], del: bool) {
    for (s, &n) in seen.iter().enumerate() {
        if n == 0 {
            continue;
        }
        let s = s as u16;
        c.importing.remove(&s);
        if del {
            c.del_slot(s);
        } else {
            c.add_slot(0, s);
        }
    }
}

/// ADDSLOTS / DELSLOTS slot...
fn addslots(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let c = cluster(ctx)?;
    let del = argv[1].eq_ignore_ascii_case(b"delslots");
    let slots = argv[2..].iter().map(|a| slot_arg(a)).collect::<CmdResult<Vec<u16>>>()?;
    let mut seen = vec![0u8; SLOTS];
    for &s in &slots {
        check_assignments(c, &mut seen, del, s, s)?;
    }
    update_slots(c, &seen, del);
    changed(ctx);
    Ok(Reply::OK)
}

/// ADDSLOTSRANGE / DELSLOTSRANGE start end...
fn addslotsrange(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let name = String::from_utf8_lossy(&argv[1]).to_ascii_lowercase();
    let c = cluster(ctx)?;
    if argv.len() % 2 == 1 {
        return Err(CmdError::arity(&format!("cluster|{name}")));
    }
    let del = name == "delslotsrange";
    let mut seen = vec![0u8; SLOTS];
    for pair in argv[2..].chunks(2) {
        let start = slot_arg(&pair[0])?;
        let end = slot_arg(&pair[1])?;
        if start > end {
            return Err(CmdError::err(format!(
                "start slot number {start} is greater than end slot number {end}"
            )));
        }
        check_assignments(c, &mut seen, del, start, end)?;
    }
    update_slots(c, &seen, del);
    changed(ctx);
    Ok(Reply::OK)
}

fn bumpepoch(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let c = cluster(ctx)?;
    let bumped = c.bump_epoch();
    let epoch = c.myself().config_epoch;
    changed(ctx);
    Ok(Reply::Status(Bytes::from(format!(
        "{} {epoch}",
        if bumped { "BUMPED" } else { "STILL" }
    ))))
}

fn count_failure_reports(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let c = cluster(ctx)?;
    match c.node(&argv[2]) {
        Some(n) => Ok(Reply::Int(n.fail_reports.len() as i64)),
        None => Err(unknown_node(&argv[2])),
    }
}

fn unknown_node(id: &[u8]) -> CmdError {
    CmdError::new_bytes([b"ERR Unknown node ".as_slice(), id].concat())
}

fn countkeysinslot(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    cluster(ctx)?;
    let slot = parse_i64(&argv[2])?;
    if !(0..SLOTS as i64).contains(&slot) {
        return Err(CmdError::err("Invalid slot"));
    }
    Ok(Reply::Int(ctx.state.count_keys_in_slot(slot as u16) as i64))
}

fn getkeysinslot(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    cluster(ctx)?;
    let slot = parse_i64(&argv[2])?;
    let max = parse_i64(&argv[3])?;
    if !(0..SLOTS as i64).contains(&slot) || max < 0 {
        return Err(CmdError::err("Invalid slot or number of keys"));
    }
    let (keys, _) = ctx.state.dbs[0].keys_in_slot(slot as u16, max as usize);
    Ok(Reply::bulks(keys))
}

/// FAILOVER [FORCE|TAKEOVER]: a keylock node is always a master.
fn failover(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    cluster(ctx)?;
    match argv.len() {
        2 => {}
        3 if argv[2].eq_ignore_ascii_case(b"force") || argv[2].eq_ignore_ascii_case(b"takeover") => {}
        3 => return Err(CmdError::syntax()),
        _ => return Err(syntax(argv)),
    }
    let takeover = argv.len() == 3 && argv[2].eq_ignore_ascii_case(b"takeover");
    let force = takeover || argv.len() == 3;
    let now = ctx.now_ms;
    let c = cluster(ctx)?;
    if c.myself().is_master() {
        return Err(CmdError::err("You should send CLUSTER FAILOVER to a replica"));
    }
    let Some(master) = c.my_master() else {
        return Err(CmdError::err("I'm a replica but my master is unknown to me"));
    };
    if super::server::raft_member(ctx) {
        return Err(CmdError::err(
            "This node is a member of a Raft shard (replication raft): its shard elects its leader",
        ));
    }
    let c = cluster(ctx)?;
    if !force && (c.nodes[master].failed() || !c.nodes[master].link_up) {
        return Err(CmdError::err("Master is down or failed, please use CLUSTER FAILOVER FORCE"));
    }
    c.start_manual_failover(force, takeover, now);
    ctx.state.cluster_sync_replication();
    changed(ctx);
    Ok(Reply::OK)
}

fn flushslots(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    cluster(ctx)?;
    if !ctx.state.dbs[0].is_empty() {
        return Err(CmdError::err("DB must be empty to perform CLUSTER FLUSHSLOTS."));
    }
    cluster(ctx)?.del_node_slots(0);
    changed(ctx);
    Ok(Reply::OK)
}

fn forget(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let now = ctx.now_ms;
    let c = cluster(ctx)?;
    match c.index_of(&argv[2]) {
        None => return Err(unknown_node(&argv[2])),
        Some(0) => return Err(CmdError::err("I tried hard but I can't forget myself...")),
        Some(i) if c.myself().master.as_deref() == Some(c.nodes[i].id.as_str()) => {
            return Err(CmdError::err("Can't forget my master!"));
        }
        Some(i) => c.forget(i, now),
    }
    changed(ctx);
    Ok(Reply::OK)
}

fn info(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let c = cluster(ctx)?;
    Ok(Reply::verbatim_txt(c.info()))
}

fn keyslot(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    cluster(ctx)?;
    Ok(Reply::Int(crate::cluster::key_hash_slot(&argv[2]) as i64))
}

/// LINKS: the bus connections, outbound (`to`) and inbound (`from`).
fn links(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let c = cluster(ctx)?;
    let mut out = Vec::new();
    for (i, n) in c.nodes.iter().enumerate().skip(1) {
        let used = c.send_buffer_used(i) as i64;
        let describe = |direction: &'static str, created: u64, used: i64| {
            Reply::Map(vec![
                (Reply::bulk_static("direction"), Reply::bulk_static(direction)),
                (Reply::bulk_static("node"), Reply::Bulk(Bytes::from(n.id.clone()))),
                (Reply::bulk_static("create-time"), Reply::Int(created as i64)),
                (Reply::bulk_static("events"), Reply::bulk_static("r")),
                (Reply::bulk_static("send-buffer-allocated"), Reply::Int(used)),
                (Reply::bulk_static("send-buffer-used"), Reply::Int(used)),
            ])
        };
        if n.link_up {
            out.push(describe("to", n.link_ctime, used));
        }
        if n.inbound_links > 0 {
            out.push(describe("from", n.ctime, 0));
        }
    }
    Ok(Reply::Array(out))
}

/// MEET ip port [bus-port]: a handshake with that node starts; the bus
/// does the rest.
fn meet(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let now = ctx.now_ms;
    let c = cluster(ctx)?;
    if argv.len() > 5 {
        return Err(syntax(argv));
    }
    let text = |a: &Bytes| String::from_utf8_lossy(a).into_owned();
    let port =
        crate::numfmt::parse_i64(&argv[3]).ok_or_else(|| CmdError::err(format!("Invalid TCP base port specified: {}", text(&argv[3]))))?;
    let cport = match argv.get(4) {
        Some(a) => crate::numfmt::parse_i64(a).ok_or_else(|| CmdError::err(format!("Invalid TCP bus port specified: {}", text(a))))?,
        None => port + 10000,
    };
    let ip = std::str::from_utf8(&argv[2]).ok().and_then(|s| s.parse::<std::net::IpAddr>().ok());
    let (Some(ip), true, true) = (ip, (1..=65535).contains(&port), (1..=65535).contains(&cport)) else {
        return Err(CmdError::err(format!(
            "Invalid node address specified: {}:{}",
            text(&argv[2]),
            text(&argv[3])
        )));
    };
    let ip = match ip {
        std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(v6.to_string(), |v4| v4.to_string()),
        v4 => v4.to_string(),
    };
    c.start_handshake(&ip, port as u16, cport as u16, true, now);
    Ok(Reply::OK)
}

fn myid(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let c = cluster(ctx)?;
    Ok(Reply::Bulk(Bytes::from(c.my_id().to_string())))
}

fn nodes(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let c = cluster(ctx)?;
    Ok(Reply::verbatim_txt(c.describe_all(false)))
}

/// REPLICAS / SLAVES node-id: the replicas of a master (keylock nodes
/// have none: replicated shards are the Raft issue's).
fn replicas(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let c = cluster(ctx)?;
    let Some(i) = c.index_of(&argv[2]) else {
        return Err(unknown_node(&argv[2]));
    };
    if c.nodes[i].has(node_flag::SLAVE) {
        return Err(CmdError::err("The specified node is not a master"));
    }
    let lines = (0..c.nodes.len())
        .filter(|&j| c.nodes[j].master.as_deref() == Some(c.nodes[i].id.as_str()))
        .map(|j| Reply::Bulk(Bytes::from(c.describe(j))))
        .collect();
    Ok(Reply::Array(lines))
}

fn replicate(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let db_empty = ctx.state.dbs[0].is_empty();
    let c = cluster(ctx)?;
    let Some(i) = c.index_of(&argv[2]) else {
        return Err(unknown_node(&argv[2]));
    };
    if i == 0 {
        return Err(CmdError::err("Can't replicate myself"));
    }
    if c.nodes[i].has(node_flag::SLAVE) {
        return Err(CmdError::err("I can only replicate a master, not a replica."));
    }
    let target = c.nodes[i].id.clone();
    let following = c.myself().has(node_flag::SLAVE) && c.myself().master.as_deref() == Some(target.as_str());
    #[cfg(feature = "raft")]
    if ctx.state.raft.is_some() {
        // A shard member replicates whichever member the shard elected.
        if following {
            return Ok(Reply::OK);
        }
        return Err(CmdError::err(
            "This node is a member of a Raft shard (replication raft): it replicates the leader its shard elects, no other node",
        ));
    }
    let c = cluster(ctx)?;
    if c.myself().is_master() && (c.myself().numslots != 0 || !db_empty) {
        return Err(CmdError::err("To set a master the node must be empty and without assigned slots."));
    }
    if !following {
        c.set_master(i);
        ctx.state.cluster_sync_replication();
    }
    changed(ctx);
    Ok(Reply::OK)
}

fn reset(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    cluster(ctx)?;
    if argv.len() > 3 {
        return Err(syntax(argv));
    }
    let hard = match argv.get(2) {
        None => false,
        Some(a) if a.eq_ignore_ascii_case(b"hard") => true,
        Some(a) if a.eq_ignore_ascii_case(b"soft") => false,
        Some(_) => return Err(CmdError::syntax()),
    };
    let replica = cluster(ctx)?.myself().has(node_flag::SLAVE) && !super::server::raft_member(ctx);
    if !replica && !ctx.state.dbs[ctx.client.db].is_empty() {
        return Err(CmdError::err("CLUSTER RESET can't be called with master nodes containing keys"));
    }
    if replica {
        // A replica turns master, its data gone (`clusterReset`).
        cluster(ctx)?.set_myself_master();
        ctx.state.cluster_sync_replication();
        for db in &mut ctx.state.dbs {
            db.clear();
        }
        ctx.state.invalidate_on_flush(ctx.client);
    }
    ctx.state.cluster_abort_failover_pause();
    cluster(ctx)?.reset(hard);
    changed(ctx);
    Ok(Reply::OK)
}

fn saveconfig(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    cluster(ctx)?;
    match ctx.state.cluster_save(true) {
        Ok(()) => Ok(Reply::OK),
        Err(e) => Err(CmdError::err(format!(
            "error saving the cluster node config: {}",
            crate::error::os_error_text(&e)
        ))),
    }
}

fn set_config_epoch(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let c = cluster(ctx)?;
    let epoch = parse_i64(&argv[2])?;
    if epoch < 0 {
        return Err(CmdError::err(format!("Invalid config epoch specified: {epoch}")));
    }
    if c.nodes.len() > 1 {
        return Err(CmdError::err(
            "The user can assign a config epoch only when the node does not know any other node.",
        ));
    }
    if c.myself().config_epoch != 0 {
        return Err(CmdError::err("Node config epoch is already non-zero"));
    }
    c.myself_mut().config_epoch = epoch as u64;
    crate::log::warning(format_args!("configEpoch set to {epoch} via CLUSTER SET-CONFIG-EPOCH"));
    c.current_epoch = c.current_epoch.max(epoch as u64);
    c.changed();
    c.fsync_pending = true;
    changed(ctx);
    Ok(Reply::OK)
}

/// SETSLOT slot IMPORTING|MIGRATING node-id | STABLE | NODE node-id.
fn setslot(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if cluster(ctx)?.myself().has(node_flag::SLAVE) {
        return Err(CmdError::err("Please use SETSLOT only with masters."));
    }
    let slot = slot_arg(&argv[2])?;
    let action = String::from_utf8_lossy(&argv[3]).to_ascii_lowercase();
    let keys_in_slot = ctx.state.count_keys_in_slot(slot);
    let allow_replica_migration = ctx.state.params.int("cluster-allow-replica-migration") != Some(0);
    let raft = super::server::raft_member(ctx);
    let c = cluster(ctx)?;
    let target = |c: &Cluster, unknown: &str| -> CmdResult<usize> {
        let i = c
            .index_of(&argv[4])
            .ok_or_else(|| CmdError::new_bytes([format!("ERR {unknown} ").as_bytes(), &argv[4]].concat()))?;
        if c.nodes[i].has(node_flag::SLAVE) {
            return Err(CmdError::err("Target node is not a master"));
        }
        Ok(i)
    };
    match (action.as_str(), argv.len()) {
        ("migrating", 5) => {
            if !c.serves(slot) {
                return Err(CmdError::err(format!("I'm not the owner of hash slot {slot}")));
            }
            let n = target(c, "I don't know about node")?;
            let id = c.nodes[n].id.clone();
            c.migrating.insert(slot, id);
        }
        ("importing", 5) => {
            if c.serves(slot) {
                return Err(CmdError::err(format!("I'm already the owner of hash slot {slot}")));
            }
            let n = target(c, "I don't know about node")?;
            let id = c.nodes[n].id.clone();
            c.importing.insert(slot, id);
        }
        ("stable", 4) => {
            c.importing.remove(&slot);
            c.migrating.remove(&slot);
        }
        ("node", 5) => {
            let n = target(c, "Unknown node")?;
            if c.serves(slot) && n != 0 && keys_in_slot != 0 {
                return Err(CmdError::err(format!(
                    "Can't assign hashslot {slot} to a different node while I still hold keys for this hash slot."
                )));
            }
            if keys_in_slot == 0 {
                c.migrating.remove(&slot);
            }
            let was_mine = c.serves(slot);
            c.del_slot(slot);
            c.add_slot(n, slot);
            if was_mine && n != 0 && c.myself().numslots == 0 && allow_replica_migration && !raft {
                // A master left without slots replicates their new owner.
                c.follow_new_owner(n);
            }
            if n == 0 && c.importing.contains_key(&slot) {
                // Manually migrated here: a new epoch, so that the new
                // owner wins everywhere.
                if c.bump_epoch() {
                    crate::log::warning(format_args!("configEpoch updated after importing slot {slot}"));
                }
                c.importing.remove(&slot);
            }
        }
        _ => {
            return Err(CmdError::err(
                "Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP",
            ));
        }
    }
    // Saved; what changed hands the slot map tells the others itself.
    c.save_pending = true;
    ctx.state.cluster_sync_replication();
    changed(ctx);
    Ok(Reply::OK)
}

/// `addNodeToNodeReply`: a node as CLUSTER SLOTS lists it.
fn node_reply(c: &Cluster, index: usize) -> Reply {
    let n = &c.nodes[index];
    let endpoint = match c.preferred_endpoint(n) {
        Some(text) => Reply::Bulk(Bytes::copy_from_slice(text.as_bytes())),
        None => Reply::Nil,
    };
    let mut extra = Vec::new();
    if c.endpoint_type != EndpointType::Ip {
        extra.push((Reply::bulk_static("ip"), Reply::Bulk(Bytes::from(n.ip.clone()))));
    }
    if c.endpoint_type != EndpointType::Hostname && !n.hostname.is_empty() {
        extra.push((Reply::bulk_static("hostname"), Reply::Bulk(Bytes::from(n.hostname.clone()))));
    }
    Reply::Array(vec![
        endpoint,
        Reply::Int(n.port as i64),
        Reply::Bulk(Bytes::from(n.id.clone())),
        Reply::Map(extra),
    ])
}

fn slots(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    cluster(ctx)?;
    let c = ctx.state.cluster.as_deref().expect("checked");
    let out = c
        .slot_runs()
        .into_iter()
        .map(|(start, end, owner)| {
            let mut run = vec![Reply::Int(start as i64), Reply::Int(end as i64), node_reply(c, owner)];
            // Its replicas that are not failed and have replicated
            // something (`isReplicaAvailable`).
            run.extend(
                replicas_of(c, owner)
                    .filter(|&j| !c.nodes[j].failed() && c.nodes[j].repl_offset != 0)
                    .map(|j| node_reply(c, j)),
            );
            Reply::Array(run)
        })
        .collect();
    Ok(Reply::Array(out))
}

/// The nodes that replicate master `index` (a Raft shard's followers).
fn replicas_of(c: &Cluster, index: usize) -> impl Iterator<Item = usize> + '_ {
    let id = c.nodes[index].id.as_str();
    (0..c.nodes.len()).filter(move |&j| c.nodes[j].has(node_flag::SLAVE) && c.nodes[j].master.as_deref() == Some(id))
}

/// `addNodeDetailsToShardReply`: one node of a shard.
fn shard_node(ctx: &Ctx, c: &Cluster, index: usize) -> Reply {
    let n = &c.nodes[index];
    let mut details = vec![(Reply::bulk_static("id"), Reply::Bulk(Bytes::from(n.id.clone())))];
    if n.port != 0 {
        details.push((Reply::bulk_static("port"), Reply::Int(n.port as i64)));
    }
    details.push((Reply::bulk_static("ip"), Reply::Bulk(Bytes::from(n.ip.clone()))));
    details.push((
        Reply::bulk_static("endpoint"),
        Reply::Bulk(Bytes::copy_from_slice(c.preferred_endpoint(n).unwrap_or("").as_bytes())),
    ));
    if !n.hostname.is_empty() {
        details.push((Reply::bulk_static("hostname"), Reply::Bulk(Bytes::from(n.hostname.clone()))));
    }
    let replica = n.has(node_flag::SLAVE);
    let offset = if index == 0 {
        ctx.state.cluster_repl_offset()
    } else {
        n.repl_offset
    };
    details.push((
        Reply::bulk_static("role"),
        Reply::bulk_static(if replica { "replica" } else { "master" }),
    ));
    details.push((Reply::bulk_static("replication-offset"), Reply::Int(offset as i64)));
    let health = if n.failed() {
        "fail"
    } else if replica && offset == 0 {
        "loading"
    } else {
        "online"
    };
    details.push((Reply::bulk_static("health"), Reply::bulk_static(health)));
    Reply::Map(details)
}

/// SHARDS: each master with its slot ranges and its nodes.
fn shards(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    cluster(ctx)?;
    let c = ctx.state.cluster.as_deref().expect("checked");
    let mut out = Vec::new();
    for (i, n) in c.nodes.iter().enumerate() {
        if !n.is_master() {
            continue;
        }
        let ranges: Vec<Reply> = c
            .ranges_of(i)
            .into_iter()
            .flat_map(|(s, e)| [Reply::Int(s as i64), Reply::Int(e as i64)])
            .collect();
        let nodes = std::iter::once(i).chain(replicas_of(c, i)).map(|j| shard_node(ctx, c, j)).collect();
        out.push(Reply::Map(vec![
            (Reply::bulk_static("slots"), Reply::Array(ranges)),
            (Reply::bulk_static("nodes"), Reply::Array(nodes)),
        ]));
    }
    Ok(Reply::Array(out))
}
