//! KEYLOCK: keylock's own admin surface. Because keylock knows the shape
//! of Redisson's lock keys, it can show who holds what; and because it is
//! also a test double, it lets a test move time, inject faults and start
//! over, over RESP from any client.
//!
//! The test controls (`CLOCK`, `FAULT`, `RESET`, `RESTART`) are flagged `protected`:
//! `enable-test-commands` (no|local|yes, default local) decides who may
//! run them, as `enable-debug-command` does for DEBUG in Redis; `local`
//! means loopback (and Unix-socket) clients. Each use is logged at info
//! level.
//!
//! - `CLOCK GET|FREEZE [unix-ms]|ADVANCE ms|RESUME`: the server's clock
//!   (see `crate::clock`). Time never goes backwards; the keys a jump
//!   makes due expire before the reply, counted in `expired_keys`.
//! - `FAULT ADD <kind> … [COUNT n] [CLIENT name-glob]`, `FAULT LIST`,
//!   `FAULT DEL id`, `FAULT CLEAR`: injected faults (see
//!   `crate::engine::faults`). Kinds: `DROP-PUBLISH channel-glob`,
//!   `ERROR command-glob error-text`, `DISCONNECT command-glob
//!   BEFORE|AFTER`, `DELAY command-glob ms`.
//! - `RESET`: every database, the script cache and the statistics
//!   emptied, faults cleared, the clock back to real time; connections,
//!   their subscriptions and settings stay.
//! - `RESTART`: a crash and restart: OK, then every connection dropped,
//!   data, scripts and statistics lost; faults and the clock stay.
//!
//! `KEYLOCK LOCKS [pattern]` lists the locks, semaphores and latches of the
//! current database whose names match the pattern; `KEYLOCK LOCK name`
//! shows one. Nothing is recorded for this: every entry is read back from
//! the keys and subscriptions Redisson's own scripts and clients leave, and
//! companion names are built as Redisson builds them (`prefixName`:
//! `prefix:{name}`, or `prefix:name` when the name already has a `{`;
//! `suffixName`: `{name}:suffix`, or `name:suffix`).
//!
//! How a key is recognized:
//! - A hash is a lock when every field names a holder as Redisson does
//!   (`<client-uuid>:<thread-id>`, `…:write` for a write holder) with a
//!   positive hold count, plus `mode` for a read-write lock. A lock with a
//!   `redisson_lock_queue:{name}` list is a fair lock.
//! - A string is a candidate only when its value is an integer. Semaphores
//!   and latches are plain numbers, as any counter is, so a number is listed
//!   only with evidence beside it, checked in this order:
//!   1. the zset `{name}:timeout` exists: a permit-expirable semaphore with
//!      permits out (the zset holds each permit's lease end);
//!   2. a client is subscribed to `redisson_sc:{name}`: a semaphore;
//!   3. a client is subscribed to `redisson_countdownlatch__channel__{name}`
//!      (braces always, as Redisson writes it): a latch.
//!
//!   So a semaphore or latch nobody waits on, and a permit-expirable
//!   semaphore with no permit out, are not listed: nothing tells them from
//!   a counter.
//! - No key at all, but a client subscribed to `redisson_sc:{name}`: a
//!   semaphore whose permits were never set, listed with `permits` 0 and
//!   `ttl` -2 — its waiters can only be woken by a trySetPermits or release.
//!
//! Each entry is a map: `name`, `type` (lock, fairlock, rwlock, semaphore,
//! pesemaphore, latch), `ttl` (ms; -1 for none, -2 for no key), then
//! `holders` (maps of `client`, `thread`, `holds`, and `mode` for read-write
//! locks), `mode`, `queue` (fair locks: `client`, `thread`, `timeout`),
//! `permits` (available) or `count`, `acquired` (permit-expirable
//! semaphores: `id`, `expires`), and `waiters` — clients subscribed to the
//! wake-up channel.

use crate::engine::Scripts;
use bytes::Bytes;

use super::table::{CommandSpec, Group, cmd, container, flag::*};
use super::{CmdError, CmdResult, Ctx, Reply};
use crate::db::Value;
use crate::engine::faults;
use crate::glob;
use crate::pubsub::Kind;

const G: Group = Group::Server;

pub const COMMANDS: &[CommandSpec] =
    &[container("keylock", KEYLOCK).doc(G, "0.1.0", "keylock's own commands: lock introspection and test controls.")];

const KEYLOCK: &[CommandSpec] = &[
    cmd("locks", -2, locks).flags(READONLY).doc(
        G,
        "0.1.0",
        "Lists held Redisson locks, and semaphores and latches with evidence of their family.",
    ),
    cmd("lock", 3, lock)
        .flags(READONLY)
        .keys(2, 2, 1)
        .doc(G, "0.1.0", "Shows one Redisson lock, semaphore or latch."),
    cmd("clock", -3, clock).flags(NOSCRIPT | LOADING | STALE | PROTECTED).doc(
        G,
        "0.2.0",
        "Reads, freezes, advances or resumes the server's clock (test control).",
    ),
    cmd("fault", -3, fault).flags(NOSCRIPT | LOADING | STALE | PROTECTED).doc(
        G,
        "0.2.0",
        "Adds, lists, deletes or clears injected faults (test control).",
    ),
    cmd("reset", 2, reset).flags(NOSCRIPT | LOADING | STALE | PROTECTED).doc(
        G,
        "0.2.0",
        "Empties the data, scripts, statistics and faults and returns the clock to real time (test control).",
    ),
    cmd("restart", 2, restart).flags(NOSCRIPT | LOADING | STALE | PROTECTED).doc(
        G,
        "0.2.0",
        "Simulates a crash and restart: every connection dropped, all data lost (test control).",
    ),
    cmd("cluster", 2, cluster).flags(READONLY | LOADING | STALE).doc(
        G,
        "0.3.0",
        "Shows the cluster or Raft shard this server is a member of: members, leader, term, applied entries, lag.",
    ),
    cmd("addmember", 4, addmember).flags(ADMIN | NOSCRIPT | NO_MULTI | STALE).doc(
        G,
        "0.4.0",
        "Adds a member to the Raft shard (sent to its leader): a learner first, a voter once it has caught up.",
    ),
    cmd("delmember", 3, delmember).flags(ADMIN | NOSCRIPT | NO_MULTI | STALE).doc(
        G,
        "0.4.0",
        "Removes a member from the Raft shard (sent to its leader).",
    ),
    cmd("help", 2, help)
        .flags(LOADING | STALE)
        .doc(G, "0.2.0", "Returns helpful text about the different subcommands."),
];

/// Logs a use of a test control.
fn log_control(ctx: &Ctx, argv: &[Bytes]) {
    let words: Vec<String> = argv.iter().map(|a| crate::engine::repr(a)).collect();
    tracing::info!(client = %ctx.client.peer, "test control: {}", words.join(" "));
}

/// A millisecond count or instant: a non-negative integer.
fn milliseconds(raw: &[u8]) -> CmdResult<u64> {
    match crate::numfmt::parse_i64(raw) {
        Some(n) if n >= 0 => Ok(n as u64),
        Some(_) => Err(CmdError::err("time never goes backwards: milliseconds must be >= 0")),
        None => Err(CmdError::not_integer()),
    }
}

fn clock(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    log_control(ctx, argv);
    let action = super::args::upper(&argv[2]);
    let clock = ctx.state.clock.clone();
    let now = match (action.as_str(), argv.len()) {
        ("GET", 3) => clock.now_ms(),
        ("FREEZE", 3 | 4) => {
            let at = argv.get(3).map(|a| milliseconds(a)).transpose()?;
            clock.freeze(at).map_err(|b| {
                CmdError::err(format!(
                    "time never goes backwards: cannot freeze at {} before the server's time {}",
                    at.unwrap_or(0),
                    b.now_ms
                ))
            })?
        }
        ("ADVANCE", 4) => {
            clock.advance(milliseconds(&argv[3])?);
            clock.now_ms()
        }
        ("RESUME", 3) => clock.resume(),
        _ => return Err(CmdError::subcommand_syntax(&argv[2], "keylock clock")),
    };
    ctx.state.expire_all_due();
    Ok(Reply::Int(now as i64))
}

fn fault(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    log_control(ctx, argv);
    let action = super::args::upper(&argv[2]);
    match (action.as_str(), argv.len()) {
        ("ADD", 4..) => fault_add(ctx, &argv[3..]),
        ("LIST", 3) => Ok(ctx.state.faults.list()),
        ("DEL", 4) => {
            let id = crate::numfmt::parse_i64(&argv[3]).ok_or_else(CmdError::not_integer)?;
            Ok(Reply::Int(i64::from(id > 0 && ctx.state.faults.remove(id as u64))))
        }
        ("CLEAR", 3) => Ok(Reply::Int(ctx.state.faults.clear() as i64)),
        _ => Err(CmdError::subcommand_syntax(&argv[2], "keylock fault")),
    }
}

/// `<kind> <kind's arguments> [COUNT n] [CLIENT glob]`: the new rule's id.
fn fault_add(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let kind_name = super::args::upper(&args[0]);
    let (kind, used) = match kind_name.as_str() {
        "DROP-PUBLISH" if args.len() >= 2 => (faults::Kind::DropPublish { channel: args[1].clone() }, 2),
        "ERROR" if args.len() >= 3 => {
            if args[2].is_empty() {
                return Err(CmdError::err("an ERROR fault needs a non-empty error text"));
            }
            (
                faults::Kind::Error {
                    command: args[1].clone(),
                    text: args[2].clone(),
                },
                3,
            )
        }
        "DISCONNECT" if args.len() >= 3 => {
            let after = match super::args::upper(&args[2]).as_str() {
                "BEFORE" => false,
                "AFTER" => true,
                _ => return Err(CmdError::err("DISCONNECT takes BEFORE or AFTER")),
            };
            (
                faults::Kind::Disconnect {
                    command: args[1].clone(),
                    after,
                },
                3,
            )
        }
        "DELAY" if args.len() >= 3 => {
            let ms = match crate::numfmt::parse_i64(&args[2]) {
                Some(ms) if ms >= 0 => ms as u64,
                _ => return Err(CmdError::err("DELAY takes a number of milliseconds >= 0")),
            };
            (
                faults::Kind::Delay {
                    command: args[1].clone(),
                    ms,
                },
                3,
            )
        }
        "SLOW-FSYNC" if args.len() == 2 => {
            let ms = match crate::numfmt::parse_i64(&args[1]) {
                Some(ms) if ms >= 0 => ms as u64,
                _ => return Err(CmdError::err("SLOW-FSYNC takes a number of milliseconds >= 0")),
            };
            // A property of the disk: it applies to every sync, for as
            // long as the rule is there.
            return Ok(Reply::Int(ctx.state.faults.add(faults::Kind::SlowFsync { ms }, None, None) as i64));
        }
        "DROP-PUBLISH" | "ERROR" | "DISCONNECT" | "DELAY" | "SLOW-FSYNC" => {
            return Err(CmdError::err(format!(
                "wrong number of arguments for the {kind_name} fault. Try KEYLOCK HELP."
            )));
        }
        _ => {
            return Err(CmdError::err_bytes(
                &[
                    b"unknown fault kind '".as_slice(),
                    crate::error::quoted(&args[0]),
                    b"'. Kinds are DROP-PUBLISH, ERROR, DISCONNECT, DELAY and SLOW-FSYNC.",
                ]
                .concat(),
            ));
        }
    };
    let (mut count, mut client) = (None, None);
    let mut rest = &args[used..];
    while let [option, value, tail @ ..] = rest {
        match super::args::upper(option).as_str() {
            "COUNT" => match crate::numfmt::parse_i64(value) {
                Some(n) if n > 0 => count = Some(n as u64),
                _ => return Err(CmdError::err("COUNT must be a positive integer")),
            },
            "CLIENT" => client = Some(value.clone()),
            _ => return Err(CmdError::syntax()),
        }
        rest = tail;
    }
    if !rest.is_empty() {
        return Err(CmdError::syntax());
    }
    Ok(Reply::Int(ctx.state.faults.add(kind, count, client) as i64))
}

fn reset(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    log_control(ctx, argv);
    ctx.state.reset_for_test(Scripts::lent(&mut ctx.scripts)?)?;
    // The data is gone as after FLUSHALL: tracking clients are told so.
    ctx.state.invalidate_on_flush(ctx.client);
    Ok(Reply::OK)
}

fn restart(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    log_control(ctx, argv);
    let scripts = Scripts::lent(&mut ctx.scripts)?;
    ctx.state.restart_for_test(scripts)?;
    // As a restarted server would, it comes back with what is on disk:
    // its append-only file when it keeps one, else its last snapshot.
    if ctx.state.aof_on() {
        if let Err(e) = crate::engine::aof::debug_loadaof(ctx.state, scripts) {
            crate::log::warning(format_args!("KEYLOCK RESTART could not load the append-only file: {e}"));
        }
    } else if crate::engine::persistence::rdb_path(&ctx.state.params).exists() {
        match ctx.state.load_snapshot() {
            Ok(libraries) => scripts.load_libraries(libraries),
            Err(e) => crate::log::warning(format_args!("KEYLOCK RESTART could not load the snapshot: {e}")),
        }
    }
    // Every connection goes: what they cached is forgotten with them.
    ctx.state.tracking.forget_keys();
    ctx.client.close_after_reply = true;
    Ok(Reply::OK)
}

/// Redisson's `nonExpirableTimeout`: the lease end of a permit acquired
/// without a lease.
const NON_EXPIRABLE: f64 = 922_337_203_685_477.0;

const SEMAPHORE_CHANNEL: &[u8] = b"redisson_sc";

fn locks(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() > 3 {
        return Err(CmdError::subcommand_syntax(&argv[1], "keylock"));
    }
    let pattern = argv.get(2).cloned();
    let matches = |name: &[u8]| pattern.as_ref().is_none_or(|p| glob::matches(p, name, false));
    let now = ctx.now_ms;
    let mut names: Vec<Bytes> = ctx.db().keys(now).filter(|k| matches(k)).map(Bytes::copy_from_slice).collect();
    // Semaphores waited on before their permits were set have no key.
    let channel_pattern = [SEMAPHORE_CHANNEL, b":*"].concat();
    for channel in ctx.state.pubsub.channel_names(Kind::Channel, Some(&channel_pattern)) {
        let name = semaphore_name(&channel);
        if matches(&name) && !names.contains(&name) {
            names.push(name);
        }
    }
    names.sort();
    Ok(Reply::Array(names.iter().filter_map(|name| describe(ctx, name)).collect()))
}

fn lock(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Ok(describe(ctx, &argv[2]).unwrap_or(Reply::Nil))
}

fn pair(name: &'static str, value: Reply) -> (Reply, Reply) {
    (Reply::bulk_static(name), value)
}

fn owned(value: impl Into<String>) -> Reply {
    Reply::Bulk(Bytes::from(value.into()))
}

/// KEYLOCK CLUSTER: what this server knows of the servers it is one of.
fn cluster(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    #[cfg(feature = "raft")]
    if let Some(shard) = ctx.state.raft_view() {
        return Ok(shard);
    }
    if let Some(c) = ctx.state.cluster.as_deref() {
        let nodes = c
            .nodes
            .iter()
            .map(|n| {
                Reply::Map(vec![
                    pair("id", owned(n.id.clone())),
                    pair("address", owned(format!("{}:{}", n.ip, n.port))),
                    pair("bus-port", Reply::Int(i64::from(n.cport))),
                    pair("flags", owned(n.flag_names())),
                    pair("config-epoch", Reply::Int(n.config_epoch as i64)),
                    pair("slots", Reply::Int(i64::from(n.numslots))),
                    pair(
                        "link",
                        owned(if n.link_up || n.has(crate::cluster::flag::MYSELF) {
                            "connected"
                        } else {
                            "disconnected"
                        }),
                    ),
                ])
            })
            .collect();
        return Ok(Reply::Map(vec![
            pair("mode", Reply::bulk_static("cluster")),
            pair("myself", owned(c.my_id().to_string())),
            pair("state", Reply::bulk_static(if c.ok { "ok" } else { "fail" })),
            pair("current-epoch", Reply::Int(c.current_epoch as i64)),
            pair("nodes", Reply::Array(nodes)),
        ]));
    }
    Ok(Reply::Map(vec![pair("mode", Reply::bulk_static("standalone"))]))
}

/// A Raft member id: a positive integer.
fn member_id(raw: &[u8]) -> CmdResult<u64> {
    match crate::numfmt::parse_i64(raw) {
        Some(n) if n > 0 => Ok(n as u64),
        _ => Err(CmdError::err(format!(
            "Invalid member id '{}': a positive integer",
            String::from_utf8_lossy(raw)
        ))),
    }
}

/// KEYLOCK ADDMEMBER <id> <host:port:raft-port> and KEYLOCK DELMEMBER
/// <id>: the shard's leader makes the change through openraft's joint
/// consensus, and the client waits until it is made. NOSCRIPT and
/// NO_MULTI keep them out of scripts and transactions, where nothing may
/// block.
#[cfg(feature = "raft")]
fn change_members(ctx: &mut Ctx, change: crate::raft::MembershipChange) -> CmdResult {
    ctx.state.raft_request_change(ctx.client.id, change).map_err(CmdError::err)?;
    super::blocking::block(ctx, &[], crate::engine::blocking::BlockOp::Admin, 0)
}

#[cfg(not(feature = "raft"))]
fn not_a_shard() -> CmdResult {
    Err(CmdError::err(
        "this server is not a member of a Raft shard (built without the raft feature)",
    ))
}

fn addmember(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let id = member_id(&argv[2])?;
    #[cfg(feature = "raft")]
    {
        let addr = String::from_utf8_lossy(&argv[3]);
        let members = crate::raft::parse_members(&format!("{id}={addr}"))
            .map_err(|_| CmdError::err(format!("Invalid member address '{addr}': expected HOST:PORT:RAFTPORT")))?;
        let member = members.into_values().next().ok_or_else(CmdError::syntax)?;
        change_members(ctx, crate::raft::MembershipChange::Add(id, member))
    }
    #[cfg(not(feature = "raft"))]
    {
        let _ = (ctx, id);
        not_a_shard()
    }
}

fn delmember(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let id = member_id(&argv[2])?;
    #[cfg(feature = "raft")]
    {
        change_members(ctx, crate::raft::MembershipChange::Remove(id))
    }
    #[cfg(not(feature = "raft"))]
    {
        let _ = (ctx, id);
        not_a_shard()
    }
}

fn help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(super::server::help_reply(
        "KEYLOCK",
        &[
            "LOCKS [<pattern>]",
            "    List the held Redisson locks, semaphores and latches whose names match.",
            "    A number is listed only with evidence of its family: a {name}:timeout zset",
            "    (permit-expirable semaphore), or a client subscribed to redisson_sc:{name}",
            "    (semaphore) or redisson_countdownlatch__channel__{name} (latch).",
            "LOCK <name>",
            "    Show one: holders, hold counts, mode, TTL, queue, permits or count, waiters.",
            "CLUSTER",
            "    The cluster or Raft shard this server is a member of: its mode, and for a",
            "    shard the role, term, leader, applied entries and each member's lag; for a",
            "    cluster node the state, epochs and each node's address, flags and slots.",
            "ADDMEMBER <id> <host>:<port>:<raft-port>",
            "    Add a member to this Raft shard (on its leader; the new member is started",
            "    with --raft-join yes). It is sent the log as a learner and becomes a voter",
            "    once it has caught up; the reply comes when the change is made.",
            "DELMEMBER <id>",
            "    Remove a voter or learner from this Raft shard (on its leader).",
            "CLOCK GET",
            "    The server's time, in milliseconds since the Unix epoch.",
            "CLOCK FREEZE [<unix-ms>]",
            "    Stop time, now or at a later instant.",
            "CLOCK ADVANCE <ms>",
            "    Move time forward; keys that became due expire at once. Returns the new time.",
            "CLOCK RESUME",
            "    Let time flow again from the current instant.",
            "FAULT ADD DROP-PUBLISH <channel-glob> [COUNT <n>] [CLIENT <name-glob>]",
            "    Messages to matching channels reach no subscriber.",
            "FAULT ADD ERROR <command-glob> <error> [COUNT <n>] [CLIENT <name-glob>]",
            "    Refuse matching commands with <error>. The glob matches the command's name,",
            "    or script:<name> for a recognized Redisson script (script:lock-renew*).",
            "FAULT ADD DISCONNECT <command-glob> BEFORE|AFTER [COUNT <n>] [CLIENT <name-glob>]",
            "    Close the connection before the command runs, or after it ran, unanswered.",
            "FAULT ADD DELAY <command-glob> <ms> [COUNT <n>] [CLIENT <name-glob>]",
            "    Run matching commands at once but hold their reply back <ms> milliseconds.",
            "FAULT ADD SLOW-FSYNC <ms>",
            "    Every sync of the append-only file takes <ms> longer (a slow disk).",
            "FAULT LIST",
            "    The active faults, with how often each fired.",
            "FAULT DEL <id>",
            "    Remove one fault.",
            "FAULT CLEAR",
            "    Remove every fault.",
            "RESET",
            "    Flush every database and the script cache, reset the statistics, clear",
            "    the faults and return the clock to real time. Connections stay.",
            "RESTART",
            "    Simulate a crash and restart: reply OK, then drop every connection and lose",
            "    all data and scripts. Faults and the clock stay.",
            "The test controls (CLOCK, FAULT, RESET, RESTART) obey enable-test-commands (no|local|yes).",
        ],
    ))
}

fn text(k: &'static str) -> Reply {
    Reply::bulk_static(k)
}

/// Redisson's `prefixName(prefix, name)`.
fn prefix_name(prefix: &[u8], name: &[u8]) -> Vec<u8> {
    if name.contains(&b'{') {
        [prefix, b":", name].concat()
    } else {
        [prefix, b":{", name, b"}"].concat()
    }
}

/// Redisson's `suffixName(name, suffix)`.
fn suffix_name(name: &[u8], suffix: &[u8]) -> Vec<u8> {
    if name.contains(&b'{') {
        [name, b":", suffix].concat()
    } else {
        [b"{", name, b"}:", suffix].concat()
    }
}

/// The semaphore a `redisson_sc:…` channel belongs to: `prefix_name`
/// undone (a braced rest is taken as added braces).
fn semaphore_name(channel: &[u8]) -> Bytes {
    let rest = &channel[SEMAPHORE_CHANNEL.len() + 1..];
    let name = match rest.strip_prefix(b"{").and_then(|r| r.strip_suffix(b"}")) {
        Some(inner) if !inner.contains(&b'{') => inner,
        _ => rest,
    };
    Bytes::copy_from_slice(name)
}

fn latch_channel(name: &[u8]) -> Vec<u8> {
    [b"redisson_countdownlatch__channel__{", name, b"}"].concat()
}

/// A holder field `<uuid>:<thread>` (or `…:write`): (client, thread, write).
fn holder(field: &[u8]) -> Option<(&[u8], &[u8], bool)> {
    let (field, write) = match field.strip_suffix(b":write") {
        Some(f) => (f, true),
        None => (field, false),
    };
    let colon = field.iter().rposition(|&c| c == b':')?;
    let (client, thread) = (&field[..colon], &field[colon + 1..]);
    if client.is_empty() || thread.is_empty() || !thread.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some((client, thread, write))
}

/// A permit id as Redisson shows it: 4.x stores the 16 bytes behind a hex
/// id, 3.x the 32-digit hex id itself.
fn permit_id(member: &[u8]) -> Reply {
    if member.len() == 32 && member.iter().all(u8::is_ascii_hexdigit) {
        return Reply::Bulk(Bytes::copy_from_slice(member));
    }
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let hex: Vec<u8> = member
        .iter()
        .flat_map(|b| [HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]])
        .collect();
    Reply::Bulk(Bytes::from(hex))
}

fn subscribers(ctx: &Ctx, channel: &[u8]) -> usize {
    ctx.state.pubsub.subscribers(Kind::Channel, channel).len()
}

fn describe(ctx: &mut Ctx, name: &Bytes) -> Option<Reply> {
    let now = ctx.now_ms;
    match ctx.db().get(name, now) {
        Some(Value::Hash(_)) => describe_lock(ctx, name),
        Some(Value::Str(s)) => {
            let value = crate::numfmt::parse_i64(s)?;
            describe_number(ctx, name, value)
        }
        Some(_) => None,
        None => {
            let waiters = subscribers(ctx, &prefix_name(SEMAPHORE_CHANNEL, name));
            (waiters > 0).then(|| {
                Reply::Map(vec![
                    (text("name"), Reply::Bulk(name.clone())),
                    (text("type"), text("semaphore")),
                    (text("ttl"), Reply::Int(-2)),
                    (text("permits"), Reply::Int(0)),
                    (text("waiters"), Reply::Int(waiters as i64)),
                ])
            })
        }
    }
}

/// A lock hash: reentrant, fair or read-write.
fn describe_lock(ctx: &mut Ctx, name: &Bytes) -> Option<Reply> {
    let now = ctx.now_ms;
    let Some(Value::Hash(h)) = ctx.db().get(name, now) else {
        return None;
    };
    let mode = h.get(&b"mode"[..]).map(Bytes::copy_from_slice);
    let mut holders = Vec::new();
    for (field, count) in h.iter() {
        if field == b"mode" {
            continue;
        }
        let (client, thread, write) = holder(field)?;
        let holds = crate::numfmt::parse_i64(count).filter(|&n| n > 0)?;
        let mut entry = vec![
            (text("client"), Reply::Bulk(Bytes::copy_from_slice(client))),
            (text("thread"), Reply::Bulk(Bytes::copy_from_slice(thread))),
            (text("holds"), Reply::Int(holds)),
        ];
        if mode.is_some() {
            entry.push((text("mode"), text(if write { "write" } else { "read" })));
        }
        holders.push(Reply::Map(entry));
    }
    if holders.is_empty() && mode.is_none() {
        return None;
    }
    let queue_key = prefix_name(b"redisson_lock_queue", name);
    let queue = match ctx.db().get(&queue_key, now) {
        Some(Value::List(l)) => Some(l.iter().cloned().collect::<Vec<Bytes>>()),
        _ => None,
    };
    let ttl = super::keys::pttl_of(ctx, name);
    let lock_channel = prefix_name(b"redisson_lock__channel", name);
    let mut fields = vec![(text("name"), Reply::Bulk(name.clone()))];
    if let Some(mode) = &mode {
        fields.push((text("type"), text("rwlock")));
        fields.push((text("ttl"), Reply::Int(ttl)));
        fields.push((text("mode"), Reply::Bulk(mode.clone())));
        fields.push((text("holders"), Reply::Array(holders)));
        let waiters = subscribers(ctx, &prefix_name(b"redisson_rwlock", name));
        fields.push((text("waiters"), Reply::Int(waiters as i64)));
    } else if let Some(queue) = queue {
        let timeout_key = prefix_name(b"redisson_lock_timeout", name);
        let waiting: Vec<Reply> = queue
            .iter()
            .map(|w| {
                let (client, thread, _) = holder(w).unwrap_or((w, b"", false));
                let timeout = match ctx.db().get(&timeout_key, now) {
                    Some(Value::ZSet(z)) => z.score(w).map_or(Reply::Nil, |s| Reply::Int(s as i64)),
                    _ => Reply::Nil,
                };
                Reply::Map(vec![
                    (text("client"), Reply::Bulk(Bytes::copy_from_slice(client))),
                    (text("thread"), Reply::Bulk(Bytes::copy_from_slice(thread))),
                    (text("timeout"), timeout),
                ])
            })
            .collect();
        // Fair-lock waiters are woken one by one on their own channels.
        let waiters: usize = queue.iter().map(|w| subscribers(ctx, &[&lock_channel[..], b":", w].concat())).sum();
        fields.push((text("type"), text("fairlock")));
        fields.push((text("ttl"), Reply::Int(ttl)));
        fields.push((text("holders"), Reply::Array(holders)));
        fields.push((text("queue"), Reply::Array(waiting)));
        fields.push((text("waiters"), Reply::Int(waiters as i64)));
    } else {
        fields.push((text("type"), text("lock")));
        fields.push((text("ttl"), Reply::Int(ttl)));
        fields.push((text("holders"), Reply::Array(holders)));
        let waiters = subscribers(ctx, &lock_channel);
        fields.push((text("waiters"), Reply::Int(waiters as i64)));
    }
    Some(Reply::Map(fields))
}

/// An integer string, listed by the evidence the module doc gives.
fn describe_number(ctx: &mut Ctx, name: &Bytes, value: i64) -> Option<Reply> {
    let now = ctx.now_ms;
    let semaphore_waiters = subscribers(ctx, &prefix_name(SEMAPHORE_CHANNEL, name));
    let acquired: Option<Vec<Reply>> = match ctx.db().get(&suffix_name(name, b"timeout"), now) {
        Some(Value::ZSet(leases)) => Some(
            leases
                .iter()
                .map(|(id, expires)| {
                    let expires = if expires >= NON_EXPIRABLE { -1 } else { expires as i64 };
                    Reply::Map(vec![(text("id"), permit_id(id)), (text("expires"), Reply::Int(expires))])
                })
                .collect(),
        ),
        _ => None,
    };
    let ttl = super::keys::pttl_of(ctx, name);
    let mut fields = vec![(text("name"), Reply::Bulk(name.clone()))];
    let waiters = if let Some(acquired) = acquired {
        fields.push((text("type"), text("pesemaphore")));
        fields.push((text("ttl"), Reply::Int(ttl)));
        fields.push((text("permits"), Reply::Int(value)));
        fields.push((text("acquired"), Reply::Array(acquired)));
        semaphore_waiters
    } else if semaphore_waiters > 0 {
        fields.push((text("type"), text("semaphore")));
        fields.push((text("ttl"), Reply::Int(ttl)));
        fields.push((text("permits"), Reply::Int(value)));
        semaphore_waiters
    } else {
        let latch_waiters = subscribers(ctx, &latch_channel(name));
        if latch_waiters == 0 {
            return None;
        }
        fields.push((text("type"), text("latch")));
        fields.push((text("ttl"), Reply::Int(ttl)));
        fields.push((text("count"), Reply::Int(value)));
        latch_waiters
    };
    fields.push((text("waiters"), Reply::Int(waiters as i64)));
    Some(Reply::Map(fields))
}
