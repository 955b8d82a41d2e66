//! Connection commands: PING, ECHO, QUIT, RESET, SELECT, AUTH, HELLO and the
//! CLIENT family. READONLY / READWRITE are cluster commands (see `cluster`).

use bytes::Bytes;

use super::table::{CommandSpec, Group, cmd, container, flag::*};
use super::{Args, CmdError, CmdResult, Ctx, Reply};
use crate::db::value::owned;
use crate::engine::Client;
use crate::error::quoted;

const G: Group = Group::Connection;

pub const COMMANDS: &[CommandSpec] = &[
    cmd("ping", -1, ping).flags(FAST | SENTINEL | SUBSCRIBED_OK),
    cmd("echo", 2, echo).flags(FAST | LOADING | STALE),
    cmd("quit", -1, quit).flags(ALLOW_BUSY | NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | SUBSCRIBED_OK | TX_CONTROL),
    cmd("reset", 1, reset).flags(NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY | SUBSCRIBED_OK | TX_CONTROL),
    cmd("select", 2, select).flags(LOADING | STALE | FAST),
    cmd("auth", -2, auth).flags(NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY | SENTINEL),
    cmd("hello", -1, hello).flags(NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY | SENTINEL),
    container("client", CLIENT),
];

const CLIENT: &[CommandSpec] = &[
    cmd("id", 2, client_id).flags(NOSCRIPT | LOADING | STALE),
    cmd("setname", 3, client_setname).flags(NOSCRIPT | LOADING | STALE),
    cmd("getname", 2, client_getname).flags(NOSCRIPT | LOADING | STALE),
    cmd("setinfo", 4, client_setinfo).flags(NOSCRIPT | LOADING | STALE).doc(
        G,
        "7.2.0",
        "Sets information specific to the client or connection.",
    ),
    cmd("capa", -3, client_capa)
        .flags(NOSCRIPT | LOADING | STALE)
        .doc(G, "8.0.0", "Declares the client's capabilities."),
    cmd("list", -2, client_list).flags(ADMIN | NOSCRIPT | LOADING | STALE),
    cmd("info", 2, client_info).flags(NOSCRIPT | LOADING | STALE),
    cmd("kill", -3, client_kill).flags(ADMIN | NOSCRIPT | LOADING | STALE),
    cmd("pause", -3, client_pause).flags(ADMIN | NOSCRIPT | LOADING | STALE),
    cmd("unpause", 2, client_unpause).flags(ADMIN | NOSCRIPT | LOADING | STALE),
    cmd("reply", 3, client_reply).flags(NOSCRIPT | LOADING | STALE),
    cmd("unblock", -3, client_unblock).flags(ADMIN | NOSCRIPT | LOADING | STALE),
    cmd("no-evict", 3, client_no_evict).flags(ADMIN | NOSCRIPT | LOADING | STALE),
    cmd("no-touch", 3, client_no_touch).flags(NOSCRIPT | LOADING | STALE).doc(
        G,
        "7.2.0",
        "Controls whether commands sent by the client affect the LRU/LFU of accessed keys.",
    ),
    cmd("getredir", 2, client_getredir).flags(NOSCRIPT | LOADING | STALE),
    cmd("tracking", -3, client_tracking).flags(NOSCRIPT | LOADING | STALE),
    cmd("caching", 3, client_caching).flags(NOSCRIPT | LOADING | STALE),
    cmd("trackinginfo", 2, client_trackinginfo).flags(NOSCRIPT | LOADING | STALE),
    cmd("help", 2, client_help).flags(LOADING | STALE),
];

/// CLIENT PAUSE timeout [WRITE|ALL]: holds every client's commands (ALL,
/// the default) or their writes and what may replicate (WRITE) for
/// `timeout` milliseconds of real time (see `engine::blocking`).
fn client_pause(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() > 4 {
        return Err(CmdError::subcommand_syntax(&argv[1], "client"));
    }
    let all = match argv.get(3) {
        None => true,
        Some(mode) if mode.eq_ignore_ascii_case(b"write") => false,
        Some(mode) if mode.eq_ignore_ascii_case(b"all") => true,
        Some(_) => return Err(CmdError::err("CLIENT PAUSE mode must be WRITE or ALL")),
    };
    let ms = crate::numfmt::parse_i64(&argv[2]).ok_or_else(|| CmdError::err("timeout is not an integer or out of range"))?;
    if ms < 0 {
        return Err(CmdError::err("timeout is negative"));
    }
    let end = std::time::Instant::now()
        .checked_add(std::time::Duration::from_millis(ms as u64))
        .unwrap_or_else(|| std::time::Instant::now() + std::time::Duration::from_secs(100 * 365 * 86400));
    ctx.state.pause_clients(all, end);
    Ok(Reply::OK)
}

/// CLIENT UNPAUSE: ends a pause; the clients it held run again.
fn client_unpause(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    ctx.state.unpause();
    Ok(Reply::OK)
}

/// CLIENT REPLY ON|OFF|SKIP: OFF drops every reply until ON (whose own
/// reply goes); SKIP drops the next command's reply. Neither OFF nor SKIP
/// is answered.
fn client_reply(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let client = &mut *ctx.client;
    match super::args::upper(&argv[2]).as_str() {
        "ON" => {
            client.reply_off = false;
            client.reply_skip = false;
            Ok(Reply::OK)
        }
        "OFF" => {
            client.reply_off = true;
            Ok(Reply::Many(Vec::new()))
        }
        "SKIP" => {
            if !client.reply_off {
                client.reply_skip_next = true;
            }
            Ok(Reply::Many(Vec::new()))
        }
        _ => Err(CmdError::syntax()),
    }
}

/// CLIENT UNBLOCK id [TIMEOUT|ERROR]: ends another client's blocking
/// command as its timeout would, or with `-UNBLOCKED`; 1 if it was
/// blocked. Redis counts either as a failed call of that command.
fn client_unblock(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() > 4 {
        return Err(CmdError::subcommand_syntax(&argv[1], "client"));
    }
    let error = match argv.get(3) {
        None => false,
        Some(reason) if reason.eq_ignore_ascii_case(b"timeout") => false,
        Some(reason) if reason.eq_ignore_ascii_case(b"error") => true,
        Some(_) => return Err(CmdError::err("CLIENT UNBLOCK reason should be TIMEOUT or ERROR")),
    };
    let id = crate::numfmt::parse_i64(&argv[2]).ok_or_else(CmdError::not_integer)?;
    let state = &mut *ctx.state;
    let Some(mut target) = u64::try_from(id).ok().and_then(|id| state.clients.remove(&id)) else {
        return Ok(Reply::Int(0));
    };
    let Some(stat_index) = target
        .blocked
        .as_ref()
        .filter(|b| !matches!(b.op, crate::engine::blocking::BlockOp::Admin))
        .map(|b| b.stat_index)
    else {
        state.clients.insert(target.id, target);
        return Ok(Reply::Int(0));
    };
    state.log_unblocked(&mut target, crate::clock::ticks::now());
    let timed_out = state.timed_out_reply(&target);
    state.unblock(&mut target);
    let reply = if error {
        let unblocked = CmdError::new("UNBLOCKED client unblocked via CLIENT UNBLOCK");
        state.stats.count_error(&unblocked);
        Reply::from(unblocked)
    } else {
        timed_out
    };
    state.stats.cmd[stat_index].failed_calls += 1;
    state.answer_unblocked(&target, reply);
    state.clients.insert(target.id, target);
    Ok(Reply::Int(1))
}

fn ping(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() > 2 {
        return Err(CmdError::arity("ping"));
    }
    if ctx.client.resp == 2 && ctx.client.in_pubsub_mode() {
        let payload = argv.get(1).cloned().unwrap_or_default();
        return Ok(Reply::Array(vec![Reply::bulk_static("pong"), Reply::Bulk(payload)]));
    }
    Ok(match argv.get(1) {
        Some(msg) => Reply::Bulk(msg.clone()),
        None => Reply::status("PONG"),
    })
}

fn echo(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Ok(Reply::Bulk(argv[1].clone()))
}

fn quit(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    ctx.client.close_after_reply = true;
    Ok(Reply::OK)
}

fn reset(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    if ctx.client.is_replica || ctx.client.is_master {
        return Err(CmdError::err("can only reset normal client connections"));
    }
    if ctx.client.monitor {
        ctx.client.monitor = false;
        let id = ctx.client.id;
        ctx.state.monitors.retain(|&m| m != id);
    }
    ctx.state.disable_tracking(ctx.client);
    super::transactions::discard_and_unwatch(ctx);
    super::pubsub::unsubscribe_everything(ctx);
    ctx.client.db = 0;
    ctx.client.resp = 2;
    ctx.client.name = None;
    ctx.client.no_evict = false;
    ctx.client.no_touch = false;
    ctx.client.user = None;
    ctx.client.authenticated = !auth_required(ctx);
    Ok(Reply::status("RESET"))
}

fn select(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if ctx.state.cluster_enabled() && super::args::parse_int(&argv[1])? != 0 {
        return Err(CmdError::err("SELECT is not allowed in cluster mode"));
    }
    ctx.client.db = super::keys::parse_db(ctx, &argv[1])?;
    Ok(Reply::OK)
}

/// Whether a new or reset connection must authenticate (Redis's
/// `authRequired`: the default user needs a password, or is off).
pub fn auth_required(ctx: &Ctx) -> bool {
    ctx.state.acl.auth_required()
}

/// Redis's `ACLAuthenticateUser`: the client runs as `user` from now on,
/// or the failure is logged (ACL LOG, reason `auth`).
fn check_password(ctx: &mut Ctx, user: &[u8], pass: &[u8], command: &Bytes) -> CmdResult<()> {
    if ctx.state.acl.authenticate(user, pass) {
        ctx.client.authenticated = true;
        ctx.client.user = (user != b"default").then(|| Bytes::copy_from_slice(user));
        Ok(())
    } else {
        // Queued in MULTI, or run by EXEC (the one time blocking is denied).
        let context = if ctx.client.multi.is_some() || ctx.state.deny_blocking {
            crate::acl::Context::Multi
        } else {
            crate::acl::Context::Toplevel
        };
        let denial = crate::engine::AclDenial {
            reason: crate::acl::Reason::Auth,
            context,
            object: command.clone(),
            username: Bytes::copy_from_slice(user),
        };
        ctx.state.log_acl_denial(ctx.client, denial);
        Err(CmdError::wrongpass())
    }
}

fn auth(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    match argv.len() {
        2 => {
            if ctx.state.acl.default_user().nopass() {
                return Err(CmdError::err(
                    "AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
                ));
            }
            check_password(ctx, b"default", &argv[1], &argv[0])?;
        }
        3 => check_password(ctx, &argv[1], &argv[2], &argv[0])?,
        _ => return Err(CmdError::syntax()),
    }
    Ok(Reply::OK)
}

fn hello(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut args = Args::new(argv);
    let mut proto = None;
    if let Some(v) = args.next() {
        let v = crate::numfmt::parse_i64(v).ok_or_else(|| CmdError::err("Protocol version is not an integer or out of range"))?;
        if !(2..=3).contains(&v) {
            return Err(CmdError::new("NOPROTO unsupported protocol version"));
        }
        proto = Some(v as u8);
    }
    let mut credentials = None;
    let mut name = None;
    while let Some(opt) = args.next() {
        let remaining = args.remaining();
        if opt.eq_ignore_ascii_case(b"auth") && remaining >= 2 {
            let user = args.req()?.clone();
            let pass = args.req()?.clone();
            credentials = Some((user, pass));
        } else if opt.eq_ignore_ascii_case(b"setname") && remaining >= 1 {
            name = Some(owned(args.req()?));
        } else {
            return Err(CmdError::err_bytes(
                &[b"Syntax error in HELLO option '", quoted(opt), b"'"].concat(),
            ));
        }
    }
    if let Some((user, pass)) = credentials {
        check_password(ctx, &user, &pass, &argv[0])?;
    }
    if !ctx.client.authenticated {
        return Err(CmdError::new(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time",
        ));
    }
    if let Some(name) = name {
        validate_name(&name)?;
        ctx.client.name = if name.is_empty() { None } else { Some(name) };
    }
    if let Some(p) = proto {
        ctx.client.resp = p;
    }
    Ok(Reply::Map(vec![
        (Reply::bulk_static("server"), Reply::bulk_static("redis")),
        (Reply::bulk_static("version"), Reply::bulk_static(crate::REDIS_VERSION)),
        (Reply::bulk_static("proto"), Reply::Int(ctx.client.resp as i64)),
        (Reply::bulk_static("id"), Reply::Int(ctx.client.id as i64)),
        (Reply::bulk_static("mode"), Reply::bulk_static("standalone")),
        (
            Reply::bulk_static("role"),
            Reply::bulk_static(if ctx.state.is_replica() { "replica" } else { "master" }),
        ),
        (Reply::bulk_static("modules"), Reply::Array(vec![])),
    ]))
}

fn client_id(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(ctx.client.id as i64))
}

fn validate_name(name: &[u8]) -> CmdResult<()> {
    if name.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
        return Err(CmdError::err("Client names cannot contain spaces, newlines or special characters."));
    }
    Ok(())
}

fn client_setname(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    validate_name(&argv[2])?;
    ctx.client.name = if argv[2].is_empty() { None } else { Some(owned(&argv[2])) };
    Ok(Reply::OK)
}

fn client_getname(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Reply::opt_bulk(ctx.client.name.clone()))
}

fn client_setinfo(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let attr = String::from_utf8_lossy(&argv[2]).to_ascii_lowercase();
    let value = &argv[3];
    let slot = match attr.as_str() {
        "lib-name" => &mut ctx.client.lib_name,
        "lib-ver" => &mut ctx.client.lib_ver,
        _ => {
            return Err(CmdError::err_bytes(&[b"Unrecognized option '", quoted(&argv[2]), b"'"].concat()));
        }
    };
    if value.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
        return Err(CmdError::err(format!(
            "{attr} cannot contain spaces, newlines or special characters."
        )));
    }
    *slot = if value.is_empty() { None } else { Some(value.clone()) };
    Ok(Reply::OK)
}

fn client_capa(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    for capa in &argv[2..] {
        if capa.eq_ignore_ascii_case(b"redirect") {
            ctx.client.capa_redirect = true;
        }
    }
    Ok(Reply::OK)
}

/// Which clients CLIENT LIST TYPE selects.
fn client_type_matches(c: &Client, kind: &str) -> bool {
    // Redis's `getClientType`.
    let replica = c.is_replica && !c.monitor;
    match kind {
        "master" => c.is_master,
        "replica" | "slave" => replica,
        "pubsub" => !c.is_master && !replica && c.in_pubsub_mode(),
        "normal" => !c.is_master && !replica && !c.in_pubsub_mode(),
        _ => false,
    }
}

fn all_clients<'a>(ctx: &'a Ctx) -> Vec<&'a Client> {
    let mut all: Vec<&Client> = ctx.state.clients.values().map(|c| &**c).collect();
    all.push(ctx.client);
    all.sort_by_key(|c| c.id);
    all
}

/// CLIENT LIST's and CLIENT KILL's refusal, quoting the type as given.
fn unknown_client_type(name: &[u8]) -> CmdError {
    CmdError::err_bytes(&[b"Unknown client type '", quoted(name), b"'"].concat())
}

fn client_list(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut args = Args::after_subcommand(argv);
    let mut kind: Option<String> = None;
    let mut ids: Option<Vec<u64>> = None;
    while let Some(opt) = args.next() {
        if opt.eq_ignore_ascii_case(b"type") && args.remaining() >= 1 {
            let raw = args.req()?;
            let k = String::from_utf8_lossy(raw).to_ascii_lowercase();
            if !matches!(k.as_str(), "normal" | "master" | "replica" | "slave" | "pubsub") {
                return Err(unknown_client_type(raw));
            }
            kind = Some(k);
        } else if opt.eq_ignore_ascii_case(b"id") && args.remaining() >= 1 {
            let mut list = Vec::new();
            for id in args.rest() {
                let n = crate::numfmt::parse_i64(id)
                    .filter(|&n| n > 0)
                    .ok_or_else(|| CmdError::err("Invalid client ID"))?;
                list.push(n as u64);
            }
            ids = Some(list);
            break;
        } else {
            return Err(CmdError::syntax());
        }
    }
    let now = ctx.now_ms;
    let mut text = String::new();
    for c in all_clients(ctx) {
        if kind.as_deref().is_some_and(|k| !client_type_matches(c, k)) {
            continue;
        }
        if ids.as_ref().is_some_and(|ids| !ids.contains(&c.id)) {
            continue;
        }
        if c.id == ctx.client.id {
            text.push_str(&c.info_line_running(now, argv));
        } else {
            text.push_str(&c.info_line(now));
        }
        text.push('\n');
    }
    Ok(Reply::verbatim_txt(text))
}

fn client_info(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut line = ctx.client.info_line_running(ctx.now_ms, argv);
    line.push('\n');
    Ok(Reply::verbatim_txt(line))
}

/// Filters of the CLIENT KILL filter form.
#[derive(Default)]
struct KillFilter {
    id: Option<u64>,
    addr: Option<Vec<u8>>,
    laddr: Option<Vec<u8>>,
    kind: Option<String>,
    user: Option<Vec<u8>>,
    skip_me: bool,
    max_age: Option<u64>,
}

fn client_kill(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() == 3 {
        // The old form: CLIENT KILL addr:port.
        let target = &argv[2];
        let victim = all_clients(ctx)
            .into_iter()
            .find(|c| c.peer.to_string().as_bytes() == &target[..])
            .map(|c| c.id);
        return match victim {
            Some(id) => {
                kill(ctx, id);
                Ok(Reply::OK)
            }
            None => Err(CmdError::err("No such client")),
        };
    }
    let mut f = KillFilter {
        skip_me: true,
        ..KillFilter::default()
    };
    let mut args = Args::after_subcommand(argv);
    while let Some(opt) = args.next() {
        let Some(val) = args.next() else { return Err(CmdError::syntax()) };
        match String::from_utf8_lossy(opt).to_ascii_lowercase().as_str() {
            "id" => {
                let n = crate::numfmt::parse_i64(val)
                    .filter(|&n| n > 0)
                    .ok_or_else(|| CmdError::err("client-id should be greater than 0"))?;
                f.id = Some(n as u64);
            }
            "addr" => f.addr = Some(val.to_vec()),
            "laddr" => f.laddr = Some(val.to_vec()),
            "type" => {
                let k = String::from_utf8_lossy(val).to_ascii_lowercase();
                if !matches!(k.as_str(), "normal" | "master" | "replica" | "slave" | "pubsub") {
                    return Err(unknown_client_type(val));
                }
                f.kind = Some(k);
            }
            "user" => {
                if ctx.state.acl.user(val).is_none() {
                    return Err(CmdError::err_bytes(&[b"No such user '", val.as_ref(), b"'"].concat()));
                }
                f.user = Some(val.to_vec());
            }
            "skipme" => {
                f.skip_me = if val.eq_ignore_ascii_case(b"yes") {
                    true
                } else if val.eq_ignore_ascii_case(b"no") {
                    false
                } else {
                    return Err(CmdError::syntax());
                }
            }
            "maxage" => {
                let n = crate::numfmt::parse_i64(val).ok_or_else(CmdError::syntax)?;
                f.max_age = Some(n.max(0) as u64);
            }
            _ => return Err(CmdError::syntax()),
        }
    }
    let now = ctx.now_ms;
    let me = ctx.client.id;
    let victims: Vec<u64> = all_clients(ctx)
        .into_iter()
        .filter(|c| {
            f.id.is_none_or(|id| c.id == id)
                && f.addr.as_ref().is_none_or(|a| c.peer.to_string().as_bytes() == a.as_slice())
                && f.laddr.as_ref().is_none_or(|a| c.local.to_string().as_bytes() == a.as_slice())
                && f.kind.as_deref().is_none_or(|k| client_type_matches(c, k))
                && f.user.as_ref().is_none_or(|u| u.as_slice() == c.user_name())
                && f.max_age.is_none_or(|age| now.saturating_sub(c.created_ms) / 1000 >= age)
                && !(f.skip_me && c.id == me)
        })
        .map(|c| c.id)
        .collect();
    for &id in &victims {
        kill(ctx, id);
    }
    Ok(Reply::Int(victims.len() as i64))
}

fn kill(ctx: &mut Ctx, id: u64) {
    if id == ctx.client.id {
        ctx.client.close_after_reply = true;
    } else {
        ctx.state.master_client_killed(id);
        ctx.state.kill_queue.push(id);
    }
}

fn on_off(v: &[u8]) -> CmdResult<bool> {
    if v.eq_ignore_ascii_case(b"on") {
        Ok(true)
    } else if v.eq_ignore_ascii_case(b"off") {
        Ok(false)
    } else {
        Err(CmdError::syntax())
    }
}

fn client_no_evict(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    ctx.client.no_evict = on_off(&argv[2])?;
    Ok(Reply::OK)
}

fn client_no_touch(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    ctx.client.no_touch = on_off(&argv[2])?;
    Ok(Reply::OK)
}

/// CLIENT GETREDIR: the client tracking messages go to (0: itself), or -1
/// when tracking is off.
fn client_getredir(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(ctx.client.tracking.as_deref().map_or(-1, |t| t.redirect as i64)))
}

/// CLIENT TRACKING on|off [REDIRECT id] [BCAST] [PREFIX p]... [OPTIN]
/// [OPTOUT] [NOLOOP], checked in Redis's order (options first, then on/off).
fn client_tracking(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    use crate::engine::tracking::ClientTracking;
    let mut mode = ClientTracking::default();
    let mut prefixes: Vec<Bytes> = Vec::new();
    let mut redirect: i64 = 0;
    let mut j = 3;
    while j < argv.len() {
        let more = j + 1 < argv.len();
        let opt = argv[j].to_ascii_lowercase();
        match opt.as_slice() {
            b"redirect" if more => {
                j += 1;
                if redirect != 0 {
                    return Err(CmdError::err("A client can only redirect to a single other client"));
                }
                redirect = crate::numfmt::parse_i64(&argv[j]).ok_or_else(CmdError::not_integer)?;
                let exists = redirect == ctx.client.id as i64 || (redirect > 0 && ctx.state.clients.contains_key(&(redirect as u64)));
                if !exists {
                    return Err(CmdError::err("The client ID you want redirect to does not exist"));
                }
            }
            b"bcast" => mode.bcast = true,
            b"optin" => mode.optin = true,
            b"optout" => mode.optout = true,
            b"noloop" => mode.noloop = true,
            b"prefix" if more => {
                j += 1;
                prefixes.push(argv[j].clone());
            }
            _ => return Err(CmdError::syntax()),
        }
        j += 1;
    }
    if argv[2].eq_ignore_ascii_case(b"on") {
        if !mode.bcast && !prefixes.is_empty() {
            return Err(CmdError::err("PREFIX option requires BCAST mode to be enabled"));
        }
        let current = ctx.client.tracking.as_deref();
        if let Some(current) = current
            && current.bcast != mode.bcast
        {
            return Err(CmdError::err(
                "You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.",
            ));
        }
        if mode.bcast && (mode.optin || mode.optout) {
            return Err(CmdError::err("OPTIN and OPTOUT are not compatible with BCAST"));
        }
        if mode.optin && mode.optout {
            return Err(CmdError::err("You can't specify both OPTIN mode and OPTOUT mode"));
        }
        if let Some(current) = current
            && ((mode.optin && current.optout) || (mode.optout && current.optin))
        {
            return Err(CmdError::err(
                "You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.",
            ));
        }
        let mut doubled = None;
        if mode.bcast {
            doubled = prefix_collision(current.map(|c| &c.prefixes), &prefixes)?;
        }
        mode.redirect = redirect as u64;
        ctx.state.enable_tracking(ctx.client, mode, prefixes);
        if let Some(error) = doubled {
            // Redis replies both: the error, then OK (its check returns the
            // index of the colliding prefix, taken for success past the first).
            return Ok(Reply::Many(vec![Reply::from(error), Reply::OK]));
        }
    } else if argv[2].eq_ignore_ascii_case(b"off") {
        ctx.state.disable_tracking(ctx.client);
    } else {
        return Err(CmdError::syntax());
    }
    Ok(Reply::OK)
}

/// Redis's `checkPrefixCollisionsOrReply`: no new prefix may be a prefix of
/// (or have as prefix) one the client has, or another new one. A
/// collision among the new ones past the first is Redis's quirk: the
/// error is sent and tracking enabled anyway (`Ok(Some(error))`).
fn prefix_collision(existing: Option<&std::collections::BTreeSet<Bytes>>, prefixes: &[Bytes]) -> CmdResult<Option<CmdError>> {
    let overlaps = |a: &[u8], b: &[u8]| {
        let n = a.len().min(b.len());
        a[..n] == b[..n]
    };
    // Redis formats them with %s: they end at a NUL.
    let text = |b: &[u8]| String::from_utf8_lossy(b.split(|&c| c == 0).next().unwrap_or_default()).into_owned();
    for (i, p) in prefixes.iter().enumerate() {
        if let Some(old) = existing.and_then(|e| e.iter().find(|old| overlaps(old, p))) {
            return Err(CmdError::err(format!(
                "Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                text(p),
                text(old)
            )));
        }
        if let Some(other) = prefixes[i + 1..].iter().find(|other| overlaps(p, other)) {
            let error = CmdError::err(format!(
                "Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                text(p),
                text(other)
            ));
            return if i == 0 { Err(error) } else { Ok(Some(error)) };
        }
    }
    Ok(None)
}

/// CLIENT CACHING yes|no: in OPTIN mode, cache the next command's keys;
/// in OPTOUT mode, do not.
fn client_caching(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let Some(mode) = ctx.client.tracking.as_deref_mut() else {
        return Err(CmdError::err(
            "CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled",
        ));
    };
    if argv[2].eq_ignore_ascii_case(b"yes") {
        if !mode.optin {
            return Err(CmdError::err(
                "CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            ));
        }
    } else if argv[2].eq_ignore_ascii_case(b"no") {
        if !mode.optout {
            return Err(CmdError::err(
                "CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            ));
        }
    } else {
        return Err(CmdError::syntax());
    }
    mode.caching = true;
    Ok(Reply::OK)
}

/// CLIENT TRACKINGINFO: flags, redirect and prefixes.
fn client_trackinginfo(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let mode = ctx.client.tracking.as_deref();
    let mut flags = vec![Reply::bulk_static(if mode.is_some() { "on" } else { "off" })];
    if let Some(m) = mode {
        let mut flag = |on: bool, name: &'static str| {
            if on {
                flags.push(Reply::bulk_static(name));
            }
        };
        flag(m.bcast, "bcast");
        flag(m.optin, "optin");
        flag(m.optin && m.caching, "caching-yes");
        flag(m.optout, "optout");
        flag(m.optout && m.caching, "caching-no");
        flag(m.noloop, "noloop");
        flag(m.broken_redirect, "broken_redirect");
    }
    let prefixes = mode.map_or_else(Vec::new, |m| m.prefixes.iter().cloned().map(Reply::Bulk).collect());
    Ok(Reply::Map(vec![
        (Reply::bulk_static("flags"), Reply::Set(flags)),
        (Reply::bulk_static("redirect"), Reply::Int(mode.map_or(-1, |m| m.redirect as i64))),
        (Reply::bulk_static("prefixes"), Reply::Array(prefixes)),
    ]))
}

fn client_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(super::server::help_reply(
        "CLIENT",
        &[
            "CACHING (YES|NO)",
            "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
            "GETREDIR",
            "    Return the client ID we are redirecting to when tracking is enabled.",
            "GETNAME",
            "    Return the name of the current connection.",
            "ID",
            "    Return the ID of the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "KILL <ip:port>",
            "    Kill connection made from <ip:port>.",
            "KILL <option> <value> [<option> <value> [...]]",
            "    Kill connections. Options are:",
            "    * ADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made from the specified address",
            "    * LADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made to specified local address",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Kill connections by type.",
            "    * USER <username>",
            "      Kill connections authenticated by <username>.",
            "    * SKIPME (YES|NO)",
            "      Skip killing current connection (default: yes).",
            "    * ID <client-id>",
            "      Kill connections by client id.",
            "    * MAXAGE <maxage>",
            "      Kill connections older than the specified age.",
            "LIST [options ...]",
            "    Return information about client connections. Options:",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Return clients of specified type.",
            "NO-EVICT (ON|OFF)",
            "    Protect current client connection from eviction.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            "UNPAUSE",
            "    Stop the current client pause, resuming traffic.",
            "PAUSE <timeout> [WRITE|ALL]",
            "    Suspend all, or just write, clients for <timeout> milliseconds.",
            "REPLY (ON|OFF|SKIP)",
            "    Control the replies sent to the current connection.",
            "UNBLOCK <clientid> [TIMEOUT|ERROR]",
            "    Unblock the specified blocked client.",
            "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
            "         [OPTIN] [OPTOUT] [NOLOOP]",
            "    Control server assisted client side caching.",
            "TRACKINGINFO",
            "    Report tracking status for the current connection.",
            "SETINFO <option> <value>",
            "    Set client meta attr. Options are:",
            "    * LIB-NAME: the client lib name.",
            "    * LIB-VER: the client lib version.",
        ],
    ))
}
