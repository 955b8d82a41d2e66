//! ACL and its subcommands: users are edited and described here; what a
//! rule means and the permission check live in `crate::acl`.
//!
//! Each subcommand checks its own argument count as Redis 7.0's one
//! `aclCommand` does, so a wrong count answers `unknown subcommand or
//! wrong number of arguments`.

use bytes::Bytes;

use super::server::help_reply;
use super::table::{CommandSpec, cmd, container, flag::*};
use super::{CmdError, CmdResult, Ctx, Reply};
use crate::acl::{CATEGORIES, Catalog, Target};

pub const COMMANDS: &[CommandSpec] = &[container("acl", ACL).flags(SENTINEL)];

const ACL: &[CommandSpec] = &[
    cmd("cat", -2, cat).flags(NOSCRIPT | LOADING | STALE | SENTINEL),
    cmd("deluser", -3, deluser).flags(ADMIN | NOSCRIPT | LOADING | STALE | SENTINEL),
    cmd("dryrun", -4, dryrun).flags(ADMIN | NOSCRIPT | LOADING | STALE | SENTINEL),
    cmd("genpass", -2, genpass).flags(NOSCRIPT | LOADING | STALE | SENTINEL),
    cmd("getuser", 3, getuser).flags(ADMIN | NOSCRIPT | LOADING | STALE | SENTINEL),
    cmd("help", 2, help).flags(LOADING | STALE | SENTINEL),
    cmd("list", 2, list).flags(ADMIN | NOSCRIPT | LOADING | STALE | SENTINEL),
    cmd("load", 2, load).flags(ADMIN | NOSCRIPT | LOADING | STALE | SENTINEL),
    cmd("log", -2, log).flags(ADMIN | NOSCRIPT | LOADING | STALE | SENTINEL),
    cmd("save", 2, save).flags(ADMIN | NOSCRIPT | LOADING | STALE | SENTINEL),
    cmd("setuser", -3, setuser).flags(ADMIN | NOSCRIPT | LOADING | STALE | SENTINEL),
    cmd("users", 2, users).flags(ADMIN | NOSCRIPT | LOADING | STALE | SENTINEL),
    cmd("whoami", 2, whoami).flags(NOSCRIPT | LOADING | STALE | SENTINEL),
];

fn wrong_count(argv: &[Bytes]) -> CmdError {
    CmdError::subcommand_syntax(&argv[1], "acl")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn setuser(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let name = &argv[2];
    if name.iter().any(|&c| c.is_ascii_whitespace() || c == 0 || c == 0x0b) {
        return Err(CmdError::err("Usernames can't contain spaces or null characters"));
    }
    let evictions = ctx.state.acl.set_user(name, &argv[3..]).map_err(|e| CmdError::err(safe(&e)))?;
    if let Some((name, user)) = evictions.pubsub {
        ctx.state.disconnect_revoked_subscribers(ctx.client, &name, &user);
    }
    ctx.state.acl_changed();
    Ok(Reply::OK)
}

/// Redis's `addReplyErrorSdsSafe`: newlines in an error become spaces.
fn safe(text: &str) -> String {
    text.replace(['\r', '\n'], " ")
}

fn deluser(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv[2..].iter().any(|n| n.as_ref() == b"default") {
        return Err(CmdError::err("The 'default' user cannot be removed"));
    }
    let names = &argv[2..];
    let existing: Vec<Bytes> = names.iter().filter(|n| ctx.state.acl.user(n).is_some()).cloned().collect();
    let deleted = ctx.state.acl.delete_users(names);
    ctx.state.disconnect_users(ctx.client, &existing);
    ctx.state.acl_changed();
    Ok(Reply::Int(deleted as i64))
}

fn selector_fields(fields: [(&'static str, Vec<u8>); 3]) -> Vec<(Reply, Reply)> {
    fields
        .into_iter()
        .map(|(name, value)| (Reply::bulk_static(name), Reply::Bulk(Bytes::from(value))))
        .collect()
}

fn getuser(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let Some(user) = ctx.state.acl.user(&argv[2]) else {
        return Ok(Reply::Nil);
    };
    let mut map = vec![
        (
            Reply::bulk_static("flags"),
            Reply::Set(user.flag_names().into_iter().map(Reply::bulk_static).collect()),
        ),
        (
            Reply::bulk_static("passwords"),
            Reply::Array(user.passwords().iter().map(|p| Reply::Bulk(Bytes::from(p.clone()))).collect()),
        ),
    ];
    map.extend(selector_fields(user.root().fields()));
    let selectors = user
        .extra_selectors()
        .iter()
        .map(|s| Reply::Map(selector_fields(s.fields())))
        .collect();
    map.push((Reply::bulk_static("selectors"), Reply::Array(selectors)));
    Ok(Reply::Map(map))
}

fn list(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Reply::bulks(ctx.state.acl.users().map(|u| Bytes::from(u.config_line()))))
}

fn users(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Reply::bulks(ctx.state.acl.users().map(|u| u.name.clone())))
}

fn whoami(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Reply::Bulk(Bytes::copy_from_slice(ctx.client.user_name())))
}

/// The ACL file, or Redis's error when there is none.
fn acl_file(ctx: &Ctx) -> CmdResult<String> {
    ctx.state.params.value("aclfile").filter(|p| !p.is_empty()).map(str::to_string).ok_or_else(|| {
        CmdError::err(
            "This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.",
        )
    })
}

fn load(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let path = acl_file(ctx)?;
    let gone = ctx.state.acl.load_file(&path).map_err(|e| CmdError::err(safe(&e)))?;
    ctx.state.disconnect_users(ctx.client, &gone);
    ctx.state.acl_changed();
    Ok(Reply::OK)
}

fn save(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let path = acl_file(ctx)?;
    match ctx.state.acl.save_file(&path) {
        Ok(()) => Ok(Reply::OK),
        Err(e) => {
            tracing::warn!("Writing ACL file for ACL SAVE: {}", crate::error::os_error_text(&e));
            Err(CmdError::err(
                "There was an error trying to save the ACLs. Please check the server logs for more information",
            ))
        }
    }
}

fn cat(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    match argv.len() {
        2 => Ok(Reply::Array(CATEGORIES.iter().map(|c| Reply::bulk_static(c)).collect())),
        3 => {
            let Some(category) = crate::acl::category(&argv[2]) else {
                let name = &argv[2][..argv[2].len().min(128)];
                return Err(CmdError::err_bytes(&[b"Unknown category '", name, b"'"].concat()));
            };
            let names = Catalog::get().in_category(category);
            Ok(Reply::bulks(names.into_iter().map(|n| Bytes::from(n.to_string()))))
        }
        _ => Err(wrong_count(argv)),
    }
}

const GENPASS_MAX_BITS: i64 = 4096;

fn genpass(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let bits = match argv.len() {
        2 => 256,
        3 => crate::numfmt::parse_i64(&argv[2]).ok_or_else(CmdError::not_integer)?,
        _ => return Err(wrong_count(argv)),
    };
    if bits <= 0 || bits > GENPASS_MAX_BITS {
        return Err(CmdError::err(format!(
            "ACL GENPASS argument must be the number of bits for the output password, a positive number up to {GENPASS_MAX_BITS}"
        )));
    }
    Ok(Reply::Bulk(Bytes::from(crate::acl::generate_password(bits as usize))))
}

fn log(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut count = 10;
    match argv.len() {
        2 => {}
        3 if argv[2].eq_ignore_ascii_case(b"reset") => {
            ctx.state.acl.log.clear();
            return Ok(Reply::OK);
        }
        3 => count = crate::numfmt::parse_i64(&argv[2]).ok_or_else(CmdError::not_integer)?.max(0),
        _ => return Err(wrong_count(argv)),
    }
    let now = ctx.state.clock.now_ms();
    let entries = ctx
        .state
        .acl
        .log
        .iter()
        .take(count as usize)
        .map(|e| {
            let field = Reply::bulk_static;
            Reply::Map(vec![
                (field("count"), Reply::Int(e.count as i64)),
                (field("reason"), field(e.reason.name())),
                (field("context"), field(e.context.name())),
                (field("object"), Reply::Bulk(e.object.clone())),
                (field("username"), Reply::Bulk(e.username.clone())),
                (field("age-seconds"), Reply::Double(now.saturating_sub(e.ctime_ms) as f64 / 1000.0)),
                (field("client-info"), Reply::Bulk(Bytes::from(e.client_info.clone()))),
            ])
        })
        .collect();
    Ok(Reply::Array(entries))
}

fn dryrun(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let Some(user) = ctx.state.acl.user(&argv[2]) else {
        return Err(CmdError::err(format!("User '{}' not found", text(&argv[2]))));
    };
    let line = &argv[3..];
    let found = match crate::engine::exec::lookup(&ctx.state.renames, line) {
        crate::engine::exec::Lookup::Found(cmd) if cmd.spec.handler.is_some() || line.len() < 2 => Some(Target::of(cmd)),
        // Rules may name what Redis defines and keylock does not serve.
        _ => Catalog::get().redis_only(line),
    };
    let Some(cmd) = found else {
        return Err(CmdError::err(format!("Command '{}' not found", text(&argv[3]))));
    };
    if !cmd.arity_ok(line.len()) {
        return Err(CmdError::arity(cmd.name));
    }
    match user.check_target(&cmd, line) {
        Ok(()) => Ok(Reply::OK),
        Err(denial) => {
            let message = match denial {
                crate::acl::Denial::Command => format!("This user has no permissions to run the '{}' command", cmd.name),
                crate::acl::Denial::Key(at) => format!("This user has no permissions to access the '{}' key", text(&line[at])),
                crate::acl::Denial::Channel(at) => {
                    format!("This user has no permissions to access the '{}' channel", text(&line[at]))
                }
            };
            Ok(Reply::Bulk(Bytes::from(message)))
        }
    }
}

fn help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(help_reply(
        "ACL",
        &[
            "CAT [<category>]",
            "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]",
            "    Delete a list of users.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the command.",
            "GETUSER <username>",
            "    Get the user's details.",
            "GENPASS [<bits>]",
            "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST",
            "    Show users details in config file format.",
            "LOAD",
            "    Reload users from the ACL file.",
            "LOG [<count> | RESET]",
            "    Show the ACL log entries.",
            "SAVE",
            "    Save the current config to the ACL file.",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Create or modify a user with the specified attributes.",
            "USERS",
            "    List all the registered usernames.",
            "WHOAMI",
            "    Return the current connection username.",
        ],
    ))
}
