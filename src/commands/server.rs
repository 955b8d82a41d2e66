//! Server commands: INFO, CONFIG, COMMAND, DBSIZE, FLUSHDB/FLUSHALL, TIME,
//! MONITOR, SHUTDOWN, SWAPDB, and the persistence commands a memory-only
//! server can answer.

use bytes::Bytes;

use super::args::upper;
use super::table::{
    Arg, ArgKind, BeginSearch, CommandSpec, FindKeys, KeySpec, Registry, arg_flag, cmd, container, flag, flag::*, key_flag,
};
use super::{CmdError, CmdResult, Ctx, Reply};

pub const COMMANDS: &[CommandSpec] = &[
    cmd("info", -1, info).flags(LOADING | STALE | SENTINEL),
    cmd("dbsize", 1, dbsize).flags(READONLY | FAST),
    cmd("flushdb", -1, flushdb).flags(WRITE),
    cmd("flushall", -1, flushall).flags(WRITE),
    cmd("swapdb", 3, swapdb).flags(WRITE | FAST),
    cmd("time", 1, time).flags(LOADING | STALE | FAST),
    cmd("lastsave", 1, lastsave).flags(LOADING | STALE | FAST),
    cmd("role", 1, role).flags(NOSCRIPT | LOADING | STALE | FAST),
    cmd("save", 1, save).flags(ADMIN | NOSCRIPT | NO_MULTI),
    cmd("bgsave", -1, bgsave).flags(ADMIN | NOSCRIPT),
    cmd("bgrewriteaof", 1, bgrewriteaof).flags(ADMIN | NOSCRIPT),
    cmd("monitor", 1, monitor).flags(ADMIN | NOSCRIPT | LOADING | STALE),
    cmd("shutdown", -1, shutdown).flags(ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI | SENTINEL | ALLOW_BUSY),
    container("config", CONFIG),
    container("slowlog", SLOWLOG),
    container("module", MODULE),
    cmd("command", -1, command)
        .flags(LOADING | STALE | SENTINEL)
        .with_subcommands(COMMAND),
];

/// keylock loads no modules: LIST is empty, and LOAD fails as Redis's
/// does for a module it cannot load.
const MODULE: &[CommandSpec] = &[
    cmd("list", 2, module_list).flags(ADMIN | NOSCRIPT),
    cmd("load", -3, module_load).flags(ADMIN | NOSCRIPT | PROTECTED),
    cmd("loadex", -3, module_load).flags(ADMIN | NOSCRIPT | PROTECTED),
    cmd("unload", 3, module_unload).flags(ADMIN | NOSCRIPT | PROTECTED),
    cmd("help", 2, module_help).flags(LOADING | STALE),
];

const SLOWLOG: &[CommandSpec] = &[
    cmd("get", -2, slowlog_get).flags(ADMIN | LOADING | STALE),
    cmd("len", 2, slowlog_len).flags(ADMIN | LOADING | STALE),
    cmd("reset", 2, slowlog_reset).flags(ADMIN | LOADING | STALE),
    cmd("help", 2, slowlog_help).flags(LOADING | STALE),
];

const CONFIG: &[CommandSpec] = &[
    cmd("get", -3, config_get).flags(ADMIN | NOSCRIPT | LOADING | STALE),
    cmd("set", -4, config_set).flags(ADMIN | NOSCRIPT | LOADING | STALE),
    cmd("resetstat", 2, config_resetstat).flags(ADMIN | NOSCRIPT | LOADING | STALE),
    cmd("rewrite", 2, config_rewrite).flags(ADMIN | NOSCRIPT | LOADING | STALE),
    cmd("help", 2, config_help).flags(LOADING | STALE),
];

/// COMMAND's subcommands, all served by [`command`] (named alone,
/// COMMAND lists every command, as Redis's container does).
const COMMAND: &[CommandSpec] = &[
    cmd("count", 2, command).flags(LOADING | STALE | SENTINEL),
    cmd("docs", -2, command).flags(LOADING | STALE | SENTINEL),
    cmd("getkeys", -4, command).flags(LOADING | STALE | SENTINEL),
    cmd("getkeysandflags", -4, command).flags(LOADING | STALE | SENTINEL),
    cmd("help", 2, command).flags(LOADING | STALE | SENTINEL),
    cmd("info", -2, command).flags(LOADING | STALE | SENTINEL),
    cmd("list", -2, command).flags(LOADING | STALE | SENTINEL),
];

/// Redis's `addReplyHelp`: the usage lines of a container command.
pub fn help_reply(command: &str, lines: &[&str]) -> Reply {
    let mut out = vec![Reply::Status(Bytes::from(format!(
        "{command} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    )))];
    out.extend(lines.iter().map(|l| Reply::Status(Bytes::copy_from_slice(l.as_bytes()))));
    out.push(Reply::status("HELP"));
    out.push(Reply::status("    Prints this help."));
    Reply::Array(out)
}

/// Every stored key, as Redis's `dictSize`: a key past its deadline
/// counts until an access or active expiry reclaims it (which DEBUG
/// SET-ACTIVE-EXPIRE 0 puts off).
fn dbsize(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(ctx.db().len() as i64))
}

/// FLUSHDB / FLUSHALL accept ASYNC or SYNC and nothing else.
fn flush_mode(argv: &[Bytes]) -> CmdResult<()> {
    match argv.len() {
        1 => Ok(()),
        2 if argv[1].eq_ignore_ascii_case(b"async") || argv[1].eq_ignore_ascii_case(b"sync") => Ok(()),
        _ => Err(CmdError::syntax()),
    }
}

fn flushdb(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    flush_mode(argv)?;
    let removed = ctx.db().len() as u64;
    ctx.db().clear();
    ctx.dirty(removed);
    // Replayed even when there was nothing to remove.
    ctx.force_propagation(crate::engine::effects::ALL);
    ctx.state.invalidate_on_flush(ctx.client);
    Ok(Reply::OK)
}

fn flushall(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    flush_mode(argv)?;
    ctx.state.kill_bgsave();
    let mut removed = 0;
    for db in &mut ctx.state.dbs {
        removed += db.len() as u64;
        db.clear();
    }
    ctx.state.replica_expires.clear();
    ctx.dirty(removed);
    if !ctx.state.save_points().is_empty() {
        // Redis saves the emptied dataset at once: no change is left to save.
        let codes = library_codes(ctx);
        let _ = ctx.state.save(&codes);
    }
    ctx.force_propagation(crate::engine::effects::ALL);
    ctx.state.invalidate_on_flush(ctx.client);
    Ok(Reply::OK)
}

/// Whether this server is a member of a Raft shard.
pub(super) fn raft_member(ctx: &Ctx) -> bool {
    #[cfg(feature = "raft")]
    return ctx.state.raft.is_some();
    #[cfg(not(feature = "raft"))]
    {
        let _ = ctx;
        false
    }
}

fn swapdb(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if ctx.state.cluster_enabled() {
        return Err(CmdError::err("SWAPDB is not allowed in cluster mode"));
    }
    // getIntFromObjectOrReply with a message: it covers both a bad integer
    // and one outside C's int.
    let index = |raw: &[u8], which: &'static str| {
        crate::numfmt::parse_i64(raw)
            .filter(|n| i32::try_from(*n).is_ok())
            .ok_or_else(|| CmdError::err(which))
    };
    let a = index(&argv[1], "invalid first DB index")?;
    let b = index(&argv[2], "invalid second DB index")?;
    let n = ctx.state.dbs.len() as i64;
    if a < 0 || a >= n || b < 0 || b >= n {
        return Err(CmdError::db_index_out_of_range());
    }
    let (a, b) = (a as usize, b as usize);
    if a != b {
        let (low, high) = (a.min(b), a.max(b));
        let (left, right) = ctx.state.dbs.split_at_mut(high);
        crate::db::Db::swap_data(&mut left[low], &mut right[0], ctx.now_ms);
    }
    ctx.dirty(1);
    Ok(Reply::OK)
}

fn time(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let us = ctx.state.clock.now_us();
    Ok(Reply::Array(vec![
        Reply::Bulk(Bytes::from((us / 1_000_000).to_string())),
        Reply::Bulk(Bytes::from((us % 1_000_000).to_string())),
    ]))
}

fn lastsave(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(ctx.state.persistence.lastsave as i64))
}

/// The function libraries' code, for a snapshot.
fn library_codes(ctx: &Ctx) -> Vec<Bytes> {
    ctx.scripts.as_deref().map(|s| s.library_codes()).unwrap_or_default()
}

/// SAVE: the snapshot written now (see `engine::persistence`).
fn save(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    if ctx.state.rdb_child_active() {
        return Err(CmdError::err("Background save already in progress"));
    }
    let codes = library_codes(ctx);
    // Counted when tried, as Redis's `stat_rdb_saves`.
    ctx.state.persistence.saves += 1;
    ctx.state.save(&codes).map_err(|_| CmdError::new("ERR"))?;
    Ok(Reply::OK)
}

/// BGSAVE [SCHEDULE]: a child process writes the snapshot.
fn bgsave(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let schedule = match argv.len() {
        1 => false,
        2 if argv[1].eq_ignore_ascii_case(b"schedule") => true,
        _ => return Err(CmdError::syntax()),
    };
    if ctx.state.rdb_child_active() {
        return Err(CmdError::err("Background save already in progress"));
    }
    if ctx.state.aof_rewrites.running.is_some() || ctx.client.multi.is_some() {
        if schedule || ctx.client.multi.is_some() {
            ctx.state.persistence.scheduled = true;
            return Ok(Reply::status("Background saving scheduled"));
        }
        return Err(CmdError::err(
            "Another child process is active (AOF?): can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.",
        ));
    }
    let codes = library_codes(ctx);
    ctx.state.bgsave(&codes).map_err(|_| CmdError::new("ERR"))?;
    Ok(Reply::status("Background saving started"))
}

fn monitor(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    // Redis ignores it, with no reply, from a replica or a monitor.
    if ctx.client.monitor || ctx.client.is_replica {
        return Ok(Reply::Many(Vec::new()));
    }
    ctx.client.monitor = true;
    ctx.state.monitors.push(ctx.client.id);
    Ok(Reply::OK)
}

fn shutdown(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (mut nosave, mut save, mut force, mut now, mut abort) = (false, false, false, false, false);
    for opt in &argv[1..] {
        match upper(opt).as_str() {
            "NOSAVE" => nosave = true,
            "SAVE" => save = true,
            "FORCE" => force = true,
            "NOW" => now = true,
            "ABORT" => abort = true,
            _ => return Err(CmdError::syntax()),
        }
    }
    if (nosave && save) || (abort && (nosave || save || force || now)) {
        return Err(CmdError::syntax());
    }
    if abort {
        // A shutdown waiting for its replicas is given up.
        if !ctx.state.cancel_shutdown() {
            return Err(CmdError::err("No shutdown in progress."));
        }
        crate::log::notice(format_args!("Shutdown manually aborted."));
        return Ok(Reply::OK);
    }
    if !now && ctx.state.deny_blocking {
        return Err(CmdError::err(
            "SHUTDOWN without NOW or ABORT isn't allowed for DENY BLOCKING client",
        ));
    }
    if ctx.state.loading.is_some() || ctx.state.async_loading() {
        // Half a dataset is never saved over the file it comes from (nor
        // one a master's snapshot is replacing, as Redis's).
        (nosave, save) = (true, false);
    }
    if let Some(busy) = ctx.state.busy.as_mut() {
        // During a busy script only SHUTDOWN NOSAVE goes ahead, ending the
        // script whatever it did (Redis answers any other SHUTDOWN with
        // its BUSY error).
        if !argv[1..].iter().any(|a| a.eq_ignore_ascii_case(b"nosave")) {
            return Err(CmdError::new(busy.busy_error()));
        }
        busy.action = Some(crate::scripting::BusyAction::Shutdown);
        ctx.client.close_after_reply = true;
        return Ok(Reply::Many(Vec::new()));
    }
    // Redis's prepareForShutdown: the replicas first get the time to catch
    // up (unless NOW), this client waiting; then the final snapshot, with
    // `save` points or SAVE, unless NOSAVE; a failed one stops the
    // shutdown unless FORCE.
    if ctx.state.shutdown_wait.is_none() {
        crate::log::warning(format_args!("User requested shutdown..."));
    }
    // One already waiting is joined, NOW or not (Redis's
    // `isShutdownInitiated`).
    if ctx.state.shutdown_wait.is_some() || (!now && ctx.state.begin_shutdown_wait(nosave, save, force)) {
        if let Some(wait) = ctx.state.shutdown_wait.as_mut() {
            wait.clients.push(ctx.client.id);
        }
        return super::blocking::block(ctx, &[], crate::engine::blocking::BlockOp::Admin, 0);
    }
    ctx.state.kill_bgsave();
    if !nosave && (save || !ctx.state.save_points().is_empty()) {
        crate::log::notice(format_args!("Saving the final RDB snapshot before exiting."));
        let codes = library_codes(ctx);
        if ctx.state.save(&codes).is_err() && !force {
            crate::log::warning(format_args!("Error trying to save the DB, can't exit."));
            return Err(CmdError::err("Errors trying to SHUTDOWN. Check logs."));
        }
    }
    ctx.state.shutdown_save_done = true;
    ctx.state.shutdown = true;
    ctx.client.close_after_reply = true;
    Ok(Reply::OK)
}

fn config_get(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let patterns: Vec<&[u8]> = argv[2..].iter().map(|b| b.as_ref()).collect();
    let pairs = ctx.state.params.get(&patterns);
    Ok(Reply::Map(
        pairs
            .into_iter()
            .map(|(k, v)| (Reply::Bulk(Bytes::from(k)), Reply::Bulk(Bytes::from(v))))
            .collect(),
    ))
}

fn config_set(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if !argv.len().is_multiple_of(2) {
        return Err(CmdError::syntax());
    }
    let pairs: Vec<(&[u8], &[u8])> = argv[2..].chunks(2).map(|p| (p[0].as_ref(), p[1].as_ref())).collect();
    // The values before, should a new TLS setting not load or a new port
    // not bind (Redis then restores every parameter of the command).
    let touches_network = pairs
        .iter()
        .any(|(name, _)| (name.len() > 4 && name[..4].eq_ignore_ascii_case(b"tls-")) || name.eq_ignore_ascii_case(b"port"));
    let before: Vec<(&[u8], String)> = pairs
        .iter()
        .filter(|_| touches_network)
        .filter_map(|&(name, _)| Some((name, ctx.state.params.value(&String::from_utf8_lossy(name))?.to_string())))
        .collect();
    let port_before = ctx.state.params.int("port");
    // `enable-protected-configs local` lets local clients (Unix socket,
    // loopback) set the protected parameters, as Redis's islocalClient.
    let changed = ctx.state.params.set_from(
        &pairs,
        ctx.client.peer.is_local(),
        ctx.state.loading.is_some() || ctx.state.async_loading(),
    )?;
    // `tls-auth-clients` alone needs no new context: Redis reads it per
    // connection (see `crate::tls`).
    let restore = |ctx: &mut Ctx| {
        let old: Vec<(&[u8], &[u8])> = before.iter().map(|(n, v)| (*n, v.as_bytes())).collect();
        let _ = ctx.state.params.set_from(&old, true, false);
    };
    // A move an earlier command of the batch asked for, from the port
    // still served.
    let prior = ctx.state.port_rebound.take();
    let from = prior.as_ref().map_or(port_before.unwrap_or(0) as u16, |(from, _)| *from);
    if changed.contains(&"port")
        && ctx.state.params.int("port") != port_before
        && let Err(problem) = apply_port(ctx, from)
    {
        ctx.state.port_rebound = prior;
        restore(ctx);
        return Err(crate::config_params::set_failed("port", problem));
    }
    if let Some(&name) = changed.iter().find(|name| name.starts_with("tls-") && **name != "tls-auth-clients")
        && let Err(problem) = apply_tls(ctx, &changed)
    {
        ctx.state.port_rebound = prior;
        restore(ctx);
        return Err(crate::config_params::set_failed(name, problem));
    }
    if ctx.state.port_rebound.is_none() {
        ctx.state.port_rebound = prior;
    } else {
        // INFO's tcp_port, and the port a cluster node announces (unless
        // `cluster-announce-port` names another).
        ctx.state.port = ctx.state.params.int("port").unwrap_or(0) as u16;
        ctx.state.cluster_announce_myself();
    }
    if changed.iter().any(|name| {
        matches!(
            *name,
            "cluster-announce-port" | "cluster-announce-bus-port" | "cluster-announce-hostname"
        )
    }) {
        ctx.state.cluster_announce_myself();
    }
    if changed.contains(&"cluster-preferred-endpoint-type")
        && let Some(c) = ctx.state.cluster.as_deref_mut()
    {
        let name = ctx.state.params.value("cluster-preferred-endpoint-type").unwrap_or("ip");
        c.endpoint_type = crate::cluster::EndpointType::from_name(name);
    }
    if changed.contains(&"loglevel")
        && let Some(level) = ctx.state.params.value("loglevel").and_then(crate::log::Level::from_name)
    {
        crate::log::set_level(level);
    }
    let notify = changed
        .contains(&"notify-keyspace-events")
        .then(|| {
            pairs
                .iter()
                .rev()
                .find(|(name, _)| name.eq_ignore_ascii_case(b"notify-keyspace-events"))
        })
        .flatten()
        .map(|(_, value)| *value);
    if changed.contains(&"requirepass") {
        // Redis's `ACLUpdateDefaultUserPassword`.
        let pass = ctx
            .state
            .params
            .value("requirepass")
            .filter(|p| !p.is_empty())
            .map(|p| p.as_bytes().to_vec());
        ctx.state.acl.set_default_password(pass.as_deref());
    }
    ctx.state.apply_runtime(notify);
    if changed.contains(&"maxmemory") && ctx.state.runtime.maxmemory > 0 {
        // Redis's updateMaxmemory: a limit under what is used evicts once
        // the command is over (Redis's eviction timer starts at once),
        // not at the next write.
        let used = crate::memory::used_bytes().saturating_sub(ctx.state.not_counted_memory());
        if ctx.state.runtime.maxmemory < used {
            crate::log::warning(format_args!(
                "WARNING: the new maxmemory value set via CONFIG SET ({}) is smaller than the current memory usage ({used}). This will result in key eviction and/or the inability to accept new write commands depending on the maxmemory-policy.",
                ctx.state.runtime.maxmemory
            ));
        }
        ctx.state.eviction.due = true;
    }
    if (changed.contains(&"maxmemory-clients") || changed.contains(&"maxmemory")) && ctx.state.client_eviction_limit() > 0 {
        // Redis's applyClientMaxMemoryUsage: a lower limit evicts at once.
        ctx.state.evict_clients(Some(&mut *ctx.client));
    }
    ctx.state.watchdog.threshold_ms.set(ctx.state.runtime.busy_reply_threshold_ms);
    if let Some(scripts) = ctx.scripts.as_deref() {
        scripts.set_memory_limit(ctx.state.runtime.lua_memory_limit);
    }
    if changed.contains(&"appendonly") {
        let on = ctx.state.params.value("appendonly") == Some("yes");
        if on && !ctx.state.aof_on() {
            // Redis's startAppendOnly: the dataset becomes the new base.
            // A Raft shard member's record is its Raft log.
            let codes = library_codes(ctx);
            let started = if raft_member(ctx) {
                Err("The append-only file cannot be turned on for a member of a Raft shard: its Raft log is its record".to_string())
            } else {
                ctx.state.start_aof(&codes, true)
            };
            if let Err(e) = started {
                crate::log::warning(format_args!("{e}"));
                let _ = ctx
                    .state
                    .params
                    .set_from(&[(b"appendonly".as_slice(), b"no".as_slice())], true, false);
                return Err(CmdError::err(
                    "CONFIG SET failed (possibly related to argument 'appendonly') - Unable to turn on AOF. Check server logs.",
                ));
            }
        } else if !on {
            ctx.state.stop_aof();
        }
    }
    ctx.state.aof_settings_changed();
    Ok(Reply::OK)
}

/// Redis's `updatePort`: the plain port is bound anew on the `bind`
/// addresses (0: none) for the network side to move to from `old_port`
/// once this command is done; open connections stay. Err is the reason CONFIG SET
/// gives; nothing has changed then.
fn apply_port(ctx: &mut Ctx, old_port: u16) -> Result<(), &'static str> {
    let listeners = bind_param_port(ctx, "port")?;
    ctx.state.port_rebound = Some((old_port, listeners));
    Ok(())
}

/// Binds the port parameter `name` (`port` or `tls-port`) holds now on
/// the `bind` addresses; none for 0. Err is CONFIG SET's reason, the
/// cause logged.
fn bind_param_port(ctx: &Ctx, name: &str) -> Result<Vec<std::net::TcpListener>, &'static str> {
    let port = ctx.state.params.int(name).unwrap_or(0) as u16;
    if port == 0 {
        return Ok(Vec::new());
    }
    crate::server::bind_port(&ctx.state.config, port, name == "tls-port").map_err(|e| {
        crate::log::warning(format_args!("{e}"));
        "Unable to listen on this port. Check server logs."
    })
}

/// Redis's `applyTlsCfg` and `applyTLSPort` after CONFIG SET changed a
/// `tls-*` parameter: with TLS wanted, the context is rebuilt from the new
/// values, and a new `tls-port` is bound on the `bind` addresses (0: none)
/// for the network side to move to once this command is done; connections
/// accepted from then on use them, open ones are kept. Err is the reason
/// CONFIG SET gives; nothing has changed then.
fn apply_tls(ctx: &mut Ctx, changed: &[&str]) -> Result<(), &'static str> {
    const UNABLE: &str = "Unable to update TLS configuration. Check server logs.";
    let context = if crate::tls::wanted(&ctx.state.params) {
        Some(std::sync::Arc::new(
            crate::tls::TlsContext::configure(&ctx.state.params).ok_or(UNABLE)?,
        ))
    } else {
        None
    };
    if changed.contains(&"tls-port") {
        ctx.state.tls_rebound = Some(bind_param_port(ctx, "tls-port")?);
    }
    if context.is_some() {
        ctx.state.tls = context;
    }
    Ok(())
}

/// BGREWRITEAOF: the append-only file rewritten from the dataset by a
/// child (see `engine::aof`), with `appendonly no` too, as Redis: the
/// manifest then names the new base alone.
fn bgrewriteaof(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    if ctx.state.aof_rewrites.running.is_some() {
        return Err(CmdError::err("Background append only file rewriting already in progress"));
    }
    // Redis forks neither beside another child nor inside a transaction
    // (where `deny_blocking` is set): the cron starts it later.
    if ctx.state.rdb_child_active() || ctx.state.deny_blocking {
        ctx.state.aof_rewrites.scheduled = true;
        ctx.state.aof_rewrites.failures = 0;
        return Ok(Reply::status("Background append only file rewriting scheduled"));
    }
    let codes = library_codes(ctx);
    ctx.state
        .bgrewriteaof(&codes)
        .map_err(|_| CmdError::err("Can't execute an AOF background rewriting. Please check the server logs for more information."))?;
    Ok(Reply::status("Background append only file rewriting started"))
}

fn config_resetstat(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    // Redis's `resetServerStats`.
    let st = &mut *ctx.state;
    st.stats.reset();
    for db in &mut st.dbs {
        db.expired_keys = 0;
    }
    st.eviction.evicted = 0;
    st.client_memory.evicted = 0;
    st.net.reset();
    st.persistence.latest_fork_usec = 0;
    st.persistence.forks = 0;
    st.persistence.saves = 0;
    st.replicas.reset_stats();
    st.aof_rewrites.done = 0;
    st.aof_rewrites.failures = 0;
    Ok(Reply::OK)
}

/// CONFIG REWRITE: the config file the server started from, rewritten
/// with the running configuration (see `config_rewrite`).
fn config_rewrite(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    match rewrite_config_file(ctx, false) {
        Ok(()) => {
            crate::log::warning(format_args!("CONFIG REWRITE executed with success."));
            Ok(Reply::OK)
        }
        Err(None) => Err(CmdError::err("The server is running without a config file")),
        Err(Some(e)) => {
            let text = crate::error::os_error_text(&e);
            crate::log::warning(format_args!("CONFIG REWRITE failed: {text}"));
            Err(CmdError::err(format!("Rewriting config file: {text}")))
        }
    }
}

/// Rewrites the config file (CONFIG REWRITE, and DEBUG
/// CONFIG-REWRITE-FORCE-ALL with `force_all`). `Err(None)`: the server
/// started without one.
pub(crate) fn rewrite_config_file(ctx: &mut Ctx, force_all: bool) -> Result<(), Option<std::io::Error>> {
    let st = &*ctx.state;
    let path = st.config.config_file.clone().ok_or(None)?;
    let users = st.params.value("aclfile").is_none_or(str::is_empty).then(|| {
        st.acl
            .users()
            .map(|u| String::from_utf8_lossy(&u.config_line()).into_owned())
            .collect()
    });
    crate::config_rewrite::rewrite(&path, &st.params, users, force_all).map_err(Some)
}

fn config_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(help_reply(
        "CONFIG",
        &[
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
        ],
    ))
}

/// COMMAND and its subcommands, all generated from the command table.
fn command(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let registry = Registry::get();
    let Some(sub) = argv.get(1) else {
        let mut all: Vec<&super::table::Command> = registry.commands.values().collect();
        all.sort_by_key(|c| c.stat_index);
        return Ok(Reply::Array(all.into_iter().map(command_info).collect()));
    };
    match upper(sub).as_str() {
        "COUNT" if argv.len() == 2 => Ok(Reply::Int(registry.commands.len() as i64)),
        "INFO" => {
            if argv.len() == 2 {
                let mut all: Vec<&super::table::Command> = registry.commands.values().collect();
                all.sort_by_key(|c| c.stat_index);
                return Ok(Reply::Array(all.into_iter().map(command_info).collect()));
            }
            Ok(Reply::Array(
                argv[2..]
                    .iter()
                    .map(|name| lookup_full(name).map_or(Reply::Nil, command_info))
                    .collect(),
            ))
        }
        "DOCS" => {
            let mut out = Vec::new();
            let names: Vec<&super::table::Command> = if argv.len() == 2 {
                let mut all: Vec<_> = registry.commands.values().collect();
                all.sort_by_key(|c| c.stat_index);
                all
            } else {
                // Redis sends this map's length last.
                ctx.defer_reply_len();
                argv[2..].iter().filter_map(|n| lookup_full(n)).collect()
            };
            for c in names {
                out.push((Reply::Bulk(Bytes::from(c.full_name.clone())), command_docs(c)));
            }
            Ok(Reply::Map(out))
        }
        "LIST" => {
            // Redis sends the list's length last.
            ctx.defer_reply_len();
            command_list(argv)
        }
        "GETKEYS" if argv.len() >= 3 => command_getkeys(&argv[2..], false),
        "GETKEYSANDFLAGS" if argv.len() >= 3 => command_getkeys(&argv[2..], true),
        "HELP" if argv.len() == 2 => Ok(help_reply(
            "COMMAND",
            &[
                "(no subcommand)",
                "    Return details about all Redis commands.",
                "COUNT",
                "    Return the total number of commands in this Redis server.",
                "LIST",
                "    Return a list of all commands in this Redis server.",
                "INFO [<command-name> ...]",
                "    Return details about multiple Redis commands.",
                "    If no command names are given, documentation details for all",
                "    commands are returned.",
                "DOCS [<command-name> ...]",
                "    Return documentation details about multiple Redis commands.",
                "    If no command names are given, documentation details for all",
                "    commands are returned.",
                "GETKEYS <full-command>",
                "    Return the keys from a full Redis command.",
                "GETKEYSANDFLAGS <full-command>",
                "    Return the keys and the access flags from a full Redis command.",
            ],
        )),
        "COUNT" | "HELP" | "GETKEYS" | "GETKEYSANDFLAGS" => Err(CmdError::arity(&format!(
            "command|{}",
            String::from_utf8_lossy(sub).to_ascii_lowercase()
        ))),
        _ => {
            let _ = ctx;
            Err(CmdError::unknown_subcommand(sub, "command"))
        }
    }
}

/// COMMAND GETKEYS (and GETKEYSANDFLAGS, `with_flags`): the keys of the
/// command line `line`, found as Redis's `getKeysSubcommandImpl` finds
/// them (by Redis's key specs for the commands it defines, by the row's
/// key positions for keylock's own).
fn command_getkeys(line: &[Bytes], with_flags: bool) -> CmdResult {
    let registry = Registry::get();
    let base = registry.lookup(&line[0]);
    let cmd = match base {
        Some(base) if line.len() > 1 && !base.subcommands.is_empty() => base.subcommand(&line[1]),
        base => base,
    }
    .ok_or_else(|| CmdError::err("Invalid command specified"))?;
    let has_keys = cmd.def.map_or(cmd.spec.first_key > 0, |d| d.has_keys());
    if !has_keys {
        return Err(CmdError::err("The command has no key arguments"));
    }
    if !cmd.spec.arity_ok(line.len()) {
        return Err(CmdError::err("Invalid number of arguments specified for command"));
    }
    let keys = match cmd.def {
        Some(def) => def.keys_in(line),
        None => {
            let flags = if cmd.spec.has(WRITE) { key_flag::RW } else { key_flag::RO };
            cmd.spec.key_positions(line.len()).into_iter().map(|at| (at, flags)).collect()
        }
    };
    if keys.is_empty() {
        return if cmd.info_flags() & NO_MANDATORY_KEYS != 0 {
            Ok(Reply::Array(vec![]))
        } else {
            Err(CmdError::err("Invalid arguments specified for command"))
        };
    }
    if !with_flags {
        return Ok(Reply::bulks(keys.into_iter().map(|(at, _)| line[at].clone())));
    }
    Ok(Reply::Array(
        keys.into_iter()
            .map(|(at, flags)| {
                let flags = key_flag::NAMES
                    .iter()
                    .filter(|(f, _)| flags & f != 0)
                    .map(|(_, n)| Reply::status(n))
                    .collect();
                Reply::Array(vec![Reply::Bulk(line[at].clone()), Reply::Set(flags)])
            })
            .collect(),
    ))
}

/// Finds `name` or `container|sub`.
fn lookup_full(name: &[u8]) -> Option<&'static super::table::Command> {
    let registry = Registry::get();
    let text = String::from_utf8_lossy(name).to_ascii_lowercase();
    match text.split_once('|') {
        Some((parent, sub)) => registry.lookup(parent.as_bytes())?.subcommand(sub.as_bytes()),
        None => registry.lookup(text.as_bytes()),
    }
}

fn command_list(argv: &[Bytes]) -> CmdResult {
    let registry = Registry::get();
    let filter = match argv.len() {
        2 => None,
        5 if argv[2].eq_ignore_ascii_case(b"filterby") => Some((upper(&argv[3]), argv[4].clone())),
        _ => return Err(CmdError::syntax()),
    };
    let mut out = Vec::new();
    for (_, name) in &registry.all {
        let keep = match &filter {
            None => true,
            Some((kind, value)) => match kind.as_str() {
                "MODULE" => false,
                "ACLCAT" => {
                    let cat = format!("@{}", String::from_utf8_lossy(value).to_ascii_lowercase());
                    lookup_full(name.as_bytes()).is_some_and(|c| c.acl_categories().contains(&cat.as_str()))
                }
                "PATTERN" => crate::glob::matches(value, name.as_bytes(), true),
                _ => return Err(CmdError::syntax()),
            },
        };
        if keep {
            out.push(Bytes::from(name.clone()));
        }
    }
    Ok(Reply::bulks(out))
}

/// One COMMAND INFO entry, in Redis 7.0's ten-field shape: from Redis's
/// definition of the command when it has one, from the row otherwise.
fn command_info(c: &super::table::Command) -> Reply {
    let spec = c.spec;
    let flags = c.info_flags();
    let own: &[(u32, &str)] = if c.def.is_none() { flag::OWN_NAMES } else { &[] };
    let flags: Vec<Reply> = flag::NAMES
        .iter()
        .chain(own)
        .filter(|(f, _)| flags & f != 0)
        .map(|(_, n)| Reply::Status(Bytes::from_static(n.as_bytes())))
        .collect();
    let cats: Vec<Reply> = c
        .acl_categories()
        .into_iter()
        .map(|c| Reply::Status(Bytes::from_static(c.as_bytes())))
        .collect();
    let (legacy_keys, tips, key_specs) = match c.def {
        Some(def) => (def.legacy_keys, def.tips, def.key_specs.iter().map(key_spec_reply).collect()),
        None => {
            let legacy = (spec.first_key, spec.last_key, spec.key_step);
            let key_specs = if !spec.key_specs.is_empty() {
                spec.key_specs.iter().map(key_spec_reply).collect()
            } else if spec.first_key > 0 {
                let derived = KeySpec {
                    notes: "",
                    flags: if spec.has(WRITE) { key_flag::RW } else { key_flag::RO },
                    begin_search: BeginSearch::Index(spec.first_key),
                    find_keys: FindKeys::Range {
                        lastkey: if spec.last_key < 0 {
                            spec.last_key
                        } else {
                            spec.last_key - spec.first_key
                        },
                        keystep: spec.key_step,
                        limit: 0,
                    },
                };
                vec![key_spec_reply(&derived)]
            } else {
                vec![]
            };
            (legacy, &[][..], key_specs)
        }
    };
    // Redis answers a set when there are no subcommands, an array of them
    // otherwise.
    let subs = if c.subcommands.is_empty() {
        Reply::Set(vec![])
    } else {
        let mut subs: Vec<&super::table::Command> = c.subcommands.values().collect();
        subs.sort_by_key(|s| s.stat_index);
        Reply::Array(subs.into_iter().map(command_info).collect())
    };
    Reply::Array(vec![
        Reply::Bulk(Bytes::from(c.full_name.clone())),
        Reply::Int(spec.arity as i64),
        Reply::Set(flags),
        Reply::Int(legacy_keys.0 as i64),
        Reply::Int(legacy_keys.1 as i64),
        Reply::Int(legacy_keys.2 as i64),
        Reply::Set(cats),
        Reply::Set(tips.iter().map(|t| Reply::bulk_static(t)).collect()),
        Reply::Set(key_specs),
        subs,
    ])
}

/// A `{type, spec}` map of COMMAND INFO's key specs.
fn search_reply(kind: &'static str, spec: Vec<(&'static str, Reply)>) -> Reply {
    Reply::Map(vec![
        (Reply::bulk_static("type"), Reply::bulk_static(kind)),
        (
            Reply::bulk_static("spec"),
            Reply::Map(spec.into_iter().map(|(k, v)| (Reply::bulk_static(k), v)).collect()),
        ),
    ])
}

/// One key spec as COMMAND INFO describes it (`addReplyCommandKeySpecs`).
fn key_spec_reply(k: &KeySpec) -> Reply {
    let flags = key_flag::NAMES
        .iter()
        .filter(|(f, _)| k.flags & f != 0)
        .map(|(_, n)| Reply::status(n))
        .collect();
    let begin_search = match k.begin_search {
        BeginSearch::Unknown => search_reply("unknown", vec![]),
        BeginSearch::Index(index) => search_reply("index", vec![("index", Reply::Int(index as i64))]),
        BeginSearch::Keyword { keyword, startfrom } => search_reply(
            "keyword",
            vec![
                ("keyword", Reply::bulk_static(keyword)),
                ("startfrom", Reply::Int(startfrom as i64)),
            ],
        ),
    };
    let find_keys = match k.find_keys {
        FindKeys::Unknown => search_reply("unknown", vec![]),
        FindKeys::Range { lastkey, keystep, limit } => search_reply(
            "range",
            vec![
                ("lastkey", Reply::Int(lastkey as i64)),
                ("keystep", Reply::Int(keystep as i64)),
                ("limit", Reply::Int(limit as i64)),
            ],
        ),
        FindKeys::Keynum {
            keynumidx,
            firstkey,
            keystep,
        } => search_reply(
            "keynum",
            vec![
                ("keynumidx", Reply::Int(keynumidx as i64)),
                ("firstkey", Reply::Int(firstkey as i64)),
                ("keystep", Reply::Int(keystep as i64)),
            ],
        ),
    };
    let mut fields = Vec::with_capacity(4);
    if !k.notes.is_empty() {
        fields.push((Reply::bulk_static("notes"), Reply::bulk_static(k.notes)));
    }
    fields.extend([
        (Reply::bulk_static("flags"), Reply::Set(flags)),
        (Reply::bulk_static("begin_search"), begin_search),
        (Reply::bulk_static("find_keys"), find_keys),
    ]);
    Reply::Map(fields)
}

/// One COMMAND DOCS entry, in the field order of Redis's
/// `addReplyCommandDocs`: from Redis's definition of the command when it
/// has one, from the row otherwise.
fn command_docs(c: &super::table::Command) -> Reply {
    let spec = c.spec;
    let text = |name: &'static str, value: &'static str| (!value.is_empty()).then(|| (Reply::bulk_static(name), Reply::bulk_static(value)));
    let syscmd: &[&str] = if spec.syscmd { &["syscmd"] } else { &[] };
    let (summary, since, group, complexity, doc_flags, deprecated_since, replaced_by, history, arguments) = match c.def {
        Some(d) => (
            d.summary,
            d.since,
            d.group,
            d.complexity,
            d.doc_flags,
            d.deprecated_since,
            d.replaced_by,
            d.history,
            d.arguments,
        ),
        None => (
            spec.summary,
            spec.since,
            spec.group.doc_name(),
            spec.complexity,
            syscmd,
            "",
            "",
            spec.history,
            spec.arguments,
        ),
    };
    let mut fields: Vec<(Reply, Reply)> = [text("summary", summary), text("since", since)].into_iter().flatten().collect();
    fields.push((Reply::bulk_static("group"), Reply::bulk_static(group)));
    fields.extend(text("complexity", complexity));
    if !doc_flags.is_empty() {
        fields.push((
            Reply::bulk_static("doc_flags"),
            Reply::Set(doc_flags.iter().map(|f| Reply::status(f)).collect()),
        ));
    }
    fields.extend(text("deprecated_since", deprecated_since));
    fields.extend(text("replaced_by", replaced_by));
    if !history.is_empty() {
        let history = history
            .iter()
            .map(|(since, change)| Reply::Array(vec![Reply::bulk_static(since), Reply::bulk_static(change)]))
            .collect();
        fields.push((Reply::bulk_static("history"), Reply::Set(history)));
    }
    if !arguments.is_empty() {
        fields.push((Reply::bulk_static("arguments"), arguments_reply(arguments)));
    }
    if !c.subcommands.is_empty() {
        let mut subs: Vec<&super::table::Command> = c.subcommands.values().collect();
        subs.sort_by_key(|s| s.stat_index);
        fields.push((
            Reply::bulk_static("subcommands"),
            Reply::Map(
                subs.into_iter()
                    .map(|s| (Reply::Bulk(Bytes::from(s.full_name.clone())), command_docs(s)))
                    .collect(),
            ),
        ));
    }
    Reply::Map(fields)
}

/// COMMAND DOCS' argument list, in the field order of Redis's
/// `addReplyCommandArgList`.
fn arguments_reply(args: &[Arg]) -> Reply {
    Reply::Array(
        args.iter()
            .map(|a| {
                let mut fields = vec![
                    (Reply::bulk_static("name"), Reply::bulk_static(a.name)),
                    (Reply::bulk_static("type"), Reply::bulk_static(a.kind.doc_name())),
                ];
                if a.key_spec_index >= 0 {
                    fields.push((Reply::bulk_static("key_spec_index"), Reply::Int(a.key_spec_index as i64)));
                }
                if !a.token.is_empty() {
                    // MIGRATE's token is `"\"\""` in Redis's JSON, which its
                    // code generator writes as the C literal `""""`: an
                    // empty token, still listed.
                    let token = if a.token == "\"\"" { "" } else { a.token };
                    fields.push((Reply::bulk_static("token"), Reply::bulk_static(token)));
                }
                if !a.since.is_empty() {
                    fields.push((Reply::bulk_static("since"), Reply::bulk_static(a.since)));
                }
                if !a.deprecated_since.is_empty() {
                    fields.push((Reply::bulk_static("deprecated_since"), Reply::bulk_static(a.deprecated_since)));
                }
                if a.flags != 0 {
                    let flags = arg_flag::NAMES
                        .iter()
                        .filter(|(f, _)| a.flags & f != 0)
                        .map(|(_, n)| Reply::status(n))
                        .collect();
                    fields.push((Reply::bulk_static("flags"), Reply::Set(flags)));
                }
                if matches!(a.kind, ArgKind::OneOf | ArgKind::Block) {
                    fields.push((Reply::bulk_static("arguments"), arguments_reply(a.args)));
                }
                Reply::Map(fields)
            })
            .collect(),
    )
}

fn info(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let requested: Vec<String> = argv[1..].iter().map(|a| String::from_utf8_lossy(a).to_ascii_lowercase()).collect();
    let text = super::info::render(ctx, &requested);
    Ok(Reply::verbatim_txt(text))
}

/// SLOWLOG GET [count]: the newest `count` entries (10 by default, -1 for
/// all).
fn slowlog_get(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() > 3 {
        return Err(CmdError::subcommand_syntax(&argv[1], "slowlog"));
    }
    let count = match argv.get(2) {
        None => 10,
        Some(raw) => match crate::numfmt::parse_i64(raw) {
            Some(-1) => usize::MAX,
            Some(n) if n >= 0 => n as usize,
            _ => return Err(CmdError::err("count should be greater than or equal to -1")),
        },
    };
    Ok(ctx.state.slowlog.newest(count))
}

fn slowlog_len(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(ctx.state.slowlog.len() as i64))
}

fn slowlog_reset(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    ctx.state.slowlog.reset();
    Ok(Reply::OK)
}

fn slowlog_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(help_reply(
        "SLOWLOG",
        &[
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
        ],
    ))
}

/// ROLE: keylock is a master with no replicas (replication offset 0, as
/// INFO replication says).
fn role(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    #[cfg(feature = "raft")]
    if let Some(r) = ctx.state.raft.as_deref() {
        // On its sentinel port, a shard member is a sentinel of its shard.
        let sentinel_port = ctx.state.params.int("raft-sentinel-port").unwrap_or(0);
        if sentinel_port != 0
            && let crate::engine::ClientAddr::Tcp(local) = &ctx.client.local
            && i64::from(local.port()) == sentinel_port
        {
            let name = crate::commands::sentinel::shard_name(ctx.state).to_string();
            return Ok(Reply::Array(vec![
                Reply::bulk_static("sentinel"),
                Reply::Array(vec![Reply::Bulk(Bytes::from(name))]),
            ]));
        }
        // A shard member answers as a Redis master or replica would: the
        // leader is the master, the others its replicas.
        let offset = r.last_applied.map_or(0, |l| l.index) as i64;
        let split = |addr: &str| -> (String, String) {
            addr.rsplit_once(':')
                .map_or((addr.to_string(), "0".into()), |(h, p)| (h.to_string(), p.to_string()))
        };
        if r.is_leader() {
            let replicas = r
                .members
                .iter()
                .filter(|(id, _)| **id != r.id)
                .map(|(_, m)| {
                    let (ip, port) = split(&m.client_addr);
                    Reply::Array(vec![
                        Reply::Bulk(Bytes::from(ip)),
                        Reply::Bulk(Bytes::from(port)),
                        Reply::Bulk(Bytes::from(offset.to_string())),
                    ])
                })
                .collect();
            return Ok(Reply::Array(vec![
                Reply::bulk_static("master"),
                Reply::Int(offset),
                Reply::Array(replicas),
            ]));
        }
        let (ip, port, state) = match &r.leader {
            Some((_, m)) => {
                let (ip, port) = split(&m.client_addr);
                (ip, port.parse::<i64>().unwrap_or(0), "connected")
            }
            None => ("?".to_string(), 0, "connect"),
        };
        return Ok(Reply::Array(vec![
            Reply::bulk_static("slave"),
            Reply::Bulk(Bytes::from(ip)),
            Reply::Int(port),
            Reply::bulk_static(state),
            Reply::Int(offset),
        ]));
    }
    let st = &*ctx.state;
    if let Some(m) = st.master.as_deref() {
        return Ok(Reply::Array(vec![
            Reply::bulk_static("slave"),
            Reply::Bulk(Bytes::from(m.host.clone())),
            Reply::Int(i64::from(m.port)),
            Reply::bulk_static(m.link.name()),
            Reply::Int(if m.client.is_some() { st.replicas.offset as i64 } else { -1 }),
        ]));
    }
    let replicas = st
        .replicas
        .ids
        .iter()
        .filter_map(|id| {
            let c = st.clients.get(id).filter(|c| c.replica_online)?;
            let announced = st.replicas.announced.get(id).cloned().unwrap_or_default();
            let ip = crate::engine::replication::replica_ip(Some(&announced), &c.peer)?;
            Some(Reply::Array(vec![
                Reply::Bulk(Bytes::from(ip)),
                Reply::Bulk(Bytes::from(announced.port.to_string())),
                Reply::Bulk(Bytes::from(announced.ack_offset.to_string())),
            ]))
        })
        .collect();
    Ok(Reply::Array(vec![
        Reply::bulk_static("master"),
        Reply::Int(st.replicas.offset as i64),
        Reply::Array(replicas),
    ]))
}

fn module_list(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Reply::Array(Vec::new()))
}

/// MODULE LOAD / LOADEX: keylock runs no Redis modules (they are C
/// libraries for Redis's own API), so every load fails as Redis's does
/// for a module it cannot load.
fn module_load(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    crate::log::warning(format_args!(
        "Module {} failed to load: keylock does not run Redis modules",
        String::from_utf8_lossy(&argv[2])
    ));
    Err(CmdError::err("Error loading the extension. Please check the server logs."))
}

fn module_unload(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Err(CmdError::err("Error unloading module: no such module with that name"))
}

fn module_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(help_reply(
        "MODULE",
        &[
            "LIST",
            "    Return a list of loaded modules.",
            "LOAD <path> [<arg> ...]",
            "    Load a module library from <path>, passing to it any optional arguments.",
            "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
            "    Load a module library from <path>, while passing it module configurations and optional arguments.",
            "UNLOAD <name>",
            "    Unload a module.",
        ],
    ))
}
