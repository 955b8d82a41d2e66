//! Replication commands (Redis's replication.c): REPLICAOF / SLAVEOF,
//! REPLCONF, SYNC / PSYNC, FAILOVER.
//!
//! keylock serves replicas (SYNC, PSYNC: see `engine::replication`),
//! replicates a master (REPLICAOF: see `engine::replica`) and hands its
//! role to a replica (FAILOVER: see `engine::failover`); REPLCONF accepts
//! the options a replica sends (ACK and GETACK reply nothing; a replica's
//! ACK records how far it is).

use bytes::Bytes;

use super::args::parse_i64;
use super::table::{CommandSpec, cmd, flag::*};
use super::{CmdError, CmdResult, Ctx, Reply};

pub const COMMANDS: &[CommandSpec] = &[
    cmd("replicaof", 3, replicaof).flags(ADMIN | NOSCRIPT | STALE),
    cmd("slaveof", 3, replicaof).flags(ADMIN | NOSCRIPT | STALE),
    cmd("replconf", -1, replconf).flags(ADMIN | NOSCRIPT | LOADING | STALE | ALLOW_BUSY),
    cmd("sync", 1, sync).flags(ADMIN | NO_MULTI | NOSCRIPT),
    cmd("psync", -3, sync).flags(ADMIN | NO_MULTI | NOSCRIPT),
    cmd("failover", -1, failover).flags(ADMIN | NOSCRIPT | STALE),
];

/// REPLICAOF / SLAVEOF host port | NO ONE (see `engine::replica`).
fn replicaof(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if ctx.state.cluster_enabled() {
        return Err(CmdError::err("REPLICAOF not allowed in cluster mode."));
    }
    if ctx.state.failover.is_some() {
        return Err(CmdError::err("REPLICAOF not allowed while failing over."));
    }
    let by = ctx.client.info_line(ctx.state.clock.now_ms());
    if argv[1].eq_ignore_ascii_case(b"no") && argv[2].eq_ignore_ascii_case(b"one") {
        ctx.state.stop_replicating(&by);
        return Ok(Reply::OK);
    }
    if ctx.client.is_replica {
        // It would flush every replica, this client too.
        return Err(CmdError::err("Command is not valid when client is a replica."));
    }
    let port = match crate::numfmt::parse_i64(&argv[2]) {
        Some(port) if (0..=65535).contains(&port) => port as u16,
        _ => return Err(CmdError::err("Invalid master port")),
    };
    let host = String::from_utf8_lossy(&argv[1]).into_owned();
    if !ctx.state.replicate(&host, port, Some(&by)) {
        crate::log::notice(format_args!(
            "REPLICAOF would result into synchronization with the master we are already connected with. No operation performed."
        ));
        return Ok(Reply::Status(Bytes::from_static(b"OK Already connected to specified master")));
    }
    Ok(Reply::OK)
}

/// REPLCONF option value …: the handshake options a replica sends, checked
/// as Redis checks them and otherwise ignored.
fn replconf(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len().is_multiple_of(2) {
        return Err(CmdError::syntax());
    }
    for pair in argv[1..].chunks(2) {
        let (option, value) = (&pair[0], &pair[1]);
        let named = |name: &str| option.eq_ignore_ascii_case(name.as_bytes());
        if named("listening-port") {
            let port = parse_i64(value)?;
            ctx.state.replicas.announced.entry(ctx.client.id).or_default().port = port as u16;
        } else if named("ip-address") {
            // Redis's NET_HOST_STR_LEN.
            if value.len() >= 256 {
                return Err(CmdError::err(format!(
                    "REPLCONF ip-address provided by replica instance is too long: {} bytes",
                    value.len()
                )));
            }
            ctx.state.replicas.announced.entry(ctx.client.id).or_default().ip = Some(String::from_utf8_lossy(value).into_owned());
        } else if named("capa") {
            if value.eq_ignore_ascii_case(b"psync2") {
                ctx.state.replicas.announced.entry(ctx.client.id).or_default().psync2 = true;
            } else if value.eq_ignore_ascii_case(b"eof") {
                ctx.state.replicas.announced.entry(ctx.client.id).or_default().eof = true;
            }
        } else if named("ack") || named("getack") {
            // A replica's ACK records how far it is; no ACK or GETACK is
            // answered (a replica answers its master's GETACK on its link).
            if named("ack")
                && ctx.client.is_replica
                && let Some(offset) = crate::numfmt::parse_i64(value)
            {
                ctx.state.replica_acked(ctx.client.id, offset.max(0) as u64);
            }
            return Ok(Reply::Many(Vec::new()));
        } else if named("rdb-only") {
            match crate::numfmt::parse_i64(value) {
                Some(0 | 1) => {}
                Some(_) => return Err(CmdError::err("value is out of range, value must between 0 and 1")),
                None => return Err(CmdError::not_integer()),
            }
        } else if named("rdb-filter-only") {
            let Some(filters) = crate::request::split_args(value) else {
                return Err(CmdError::err("Missing rdb-filter-only values"));
            };
            if let Some(bad) = filters.iter().find(|f| !f.eq_ignore_ascii_case(b"functions")) {
                return Err(CmdError::err_bytes(
                    &[b"Unsupported rdb-filter-only option: ".as_slice(), crate::error::quoted(bad)].concat(),
                ));
            }
        } else {
            return Err(CmdError::err_bytes(
                &[b"Unrecognized REPLCONF option: ".as_slice(), crate::error::quoted(option)].concat(),
            ));
        }
    }
    Ok(Reply::OK)
}

/// SYNC / PSYNC replid offset: a replica's request for the dataset, answered
/// with the backlog after `+CONTINUE` when it can continue its history,
/// otherwise with the snapshot (after `+FULLRESYNC` for PSYNC), then every
/// write (see `engine::replication`).
fn sync(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let psync = argv[0].eq_ignore_ascii_case(b"psync");
    if ctx.state.replicas.ids.contains(&ctx.client.id) {
        // Redis ignores SYNC from a connection already a replica.
        return Ok(Reply::Many(Vec::new()));
    }
    if psync && argv.len() > 3 && argv[3].eq_ignore_ascii_case(b"failover") {
        // The master hands over (see `engine::failover`): this replica
        // becomes a master if the history asked for is its own.
        crate::log::warning(format_args!(
            "Failover request received for replid {}.",
            String::from_utf8_lossy(&argv[1])
        ));
        if ctx.state.master.is_none() {
            return Err(CmdError::err("PSYNC FAILOVER can't be sent to a master."));
        }
        if !argv[1].eq_ignore_ascii_case(ctx.state.master_replid().as_bytes()) {
            return Err(CmdError::err("PSYNC FAILOVER replid must match my replid."));
        }
        ctx.state.unset_master();
        let by = ctx.client.info_line(ctx.state.clock.now_ms());
        crate::log::notice(format_args!("MASTER MODE enabled (failover request from '{by}')"));
    }
    if ctx.state.failover.is_some() {
        return Err(CmdError::new("NOMASTERLINK Can't SYNC while failing over"));
    }
    if ctx
        .state
        .master
        .as_deref()
        .is_some_and(|m| m.link != crate::engine::replica::LinkState::Connected)
    {
        // Redis's answer while this replica has no data of its master's.
        return Err(CmdError::new("NOMASTERLINK Can't SYNC while not connected with my master"));
    }
    let name = ctx.state.replica_name(ctx.client);
    crate::log::notice(format_args!("Replica {name} asks for synchronization"));
    if psync {
        let Some(offset) = crate::numfmt::parse_i64(&argv[2]) else {
            crate::log::warning(format_args!("Replica {name} asks for synchronization but with a wrong offset"));
            return Err(CmdError::not_integer());
        };
        if let Some(reply) = ctx.state.try_partial_resync(ctx.client, &argv[1], offset) {
            ctx.client.is_replica = true;
            ctx.client.replica_online = true;
            ctx.client.outbox.set_class(ctx.client.output_class());
            return Ok(Reply::Raw(reply));
        }
    }
    let codes = ctx.scripts.as_deref().map(|s| s.library_codes()).unwrap_or_default();
    let reply = ctx
        .state
        .add_replica(ctx.client, &codes, psync)
        .map_err(|e| CmdError::err(format!("Can't send the snapshot: {}", crate::error::os_error_text(&e))))?;
    ctx.client.is_replica = true;
    Ok(Reply::Raw(reply))
}

/// FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms]: checked as Redis
/// checks it, then started (see `engine::failover`).
fn failover(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if ctx.state.cluster_enabled() {
        return Err(CmdError::err(
            "FAILOVER not allowed in cluster mode. Use CLUSTER FAILOVER command instead.",
        ));
    }
    if argv.len() == 2 && argv[1].eq_ignore_ascii_case(b"abort") {
        if ctx.state.failover.is_none() {
            return Err(CmdError::err("No failover in progress."));
        }
        ctx.state.abort_failover("Failover manually aborted");
        return Ok(Reply::OK);
    }
    let (mut timeout, mut force, mut target) = (0i64, false, None);
    let mut j = 1;
    while j < argv.len() {
        let a = &argv[j];
        if a.eq_ignore_ascii_case(b"timeout") && j + 1 < argv.len() && timeout == 0 {
            timeout = parse_i64(&argv[j + 1])?;
            if timeout <= 0 {
                return Err(CmdError::err("FAILOVER timeout must be greater than 0"));
            }
            j += 1;
        } else if a.eq_ignore_ascii_case(b"to") && j + 2 < argv.len() && target.is_none() {
            let port = parse_i64(&argv[j + 2])?;
            target = Some((String::from_utf8_lossy(&argv[j + 1]).into_owned(), port));
            j += 2;
        } else if a.eq_ignore_ascii_case(b"force") && !force {
            force = true;
        } else {
            return Err(CmdError::syntax());
        }
        j += 1;
    }
    if ctx.state.failover.is_some() {
        return Err(CmdError::err("FAILOVER already in progress."));
    }
    if ctx.state.is_replica() {
        return Err(CmdError::err("FAILOVER is not valid when server is a replica."));
    }
    if ctx.state.replicas.ids.is_empty() {
        return Err(CmdError::err("FAILOVER requires connected replicas."));
    }
    if force && (timeout == 0 || target.is_none()) {
        return Err(CmdError::err(
            "FAILOVER with force option requires both a timeout and target HOST and IP.",
        ));
    }
    let target = match target {
        None => None,
        Some((host, port)) => {
            // A port no replica listens on finds none, as in Redis.
            let found = u16::try_from(port).ok().and_then(|p| ctx.state.find_replica(&host, p));
            match found {
                None => return Err(CmdError::err("FAILOVER target HOST and PORT is not a replica.")),
                Some((false, _)) => return Err(CmdError::err("FAILOVER target replica is not online.")),
                Some((true, _)) => Some((host, port as u16)),
            }
        }
    };
    let end_ms = (timeout > 0).then(|| ctx.state.clock.now_ms() + timeout as u64);
    ctx.state.start_failover(crate::engine::failover::Failover {
        target,
        end_ms,
        force,
        in_progress: false,
    });
    Ok(Reply::OK)
}
