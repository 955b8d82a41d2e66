//! KEYLOCK: keylock's own admin surface. Because keylock knows the shape
//! of Redisson's lock keys, it can show who holds what.
//!
//! `KEYLOCK LOCKS [pattern]` lists the held locks of the current database
//! whose names match the pattern; `KEYLOCK LOCK name` shows one. A lock is
//! recognized from its hash: every field names a holder as Redisson does
//! (`<client-uuid>:<thread-id>`, `…:write` for a write holder) with a
//! positive hold count, plus `mode` for a read-write lock. A fair lock is a
//! lock with a `redisson_lock_queue:{name}` waiting list. Semaphores and
//! latches are plain integers that only their wake-up channels tell apart
//! from any other number, so they are listed while a client waits on
//! `redisson_sc:{name}` / `redisson_countdownlatch__channel__{name}`.
//!
//! Each entry is a map: `name`, `type` (lock, fairlock, rwlock, semaphore,
//! latch), `ttl` (ms, -1 for none), then `holders` (maps of `client`,
//! `thread`, `holds`, and `mode` for read-write locks), `mode`, `queue`
//! (fair locks: `client`, `thread`, `timeout`), `permits` or `count`, and
//! `waiters` — clients subscribed to the lock's wake-up channel.

use bytes::Bytes;

use super::table::{CommandSpec, Group, cmd, container, flag::*};
use super::{CmdError, CmdResult, Ctx, Reply};
use crate::db::Value;
use crate::glob;
use crate::pubsub::Kind;

const G: Group = Group::Server;

pub const COMMANDS: &[CommandSpec] = &[container("keylock", KEYLOCK).doc(G, "0.1.0", "keylock's own commands: lock introspection.")];

const KEYLOCK: &[CommandSpec] = &[
    cmd("locks", -2, locks)
        .flags(READONLY)
        .doc(G, "0.1.0", "Lists held Redisson locks, semaphores and latches."),
    cmd("lock", 3, lock)
        .flags(READONLY)
        .keys(2, 2, 1)
        .doc(G, "0.1.0", "Shows one Redisson lock."),
    cmd("help", 2, help)
        .flags(LOADING | STALE)
        .doc(G, "0.1.0", "Returns helpful text about the different subcommands."),
];

fn locks(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() > 3 {
        return Err(CmdError::subcommand_syntax(&argv[1], "keylock"));
    }
    let pattern = argv.get(2).cloned();
    let now = ctx.now_ms;
    let mut names: Vec<Bytes> = ctx
        .db()
        .keys(now)
        .filter(|k| pattern.as_ref().is_none_or(|p| glob::matches(p, k, false)))
        .map(Bytes::copy_from_slice)
        .collect();
    names.sort();
    Ok(Reply::Array(names.iter().filter_map(|name| describe(ctx, name)).collect()))
}

fn lock(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Ok(describe(ctx, &argv[2]).unwrap_or(Reply::Nil))
}

fn help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(super::server::help_reply(
        "KEYLOCK",
        &[
            "LOCKS [<pattern>]",
            "    List the held Redisson locks (and waited-on semaphores and latches) whose names match.",
            "LOCK <name>",
            "    Show one lock: holders, hold counts, mode, TTL, queue and waiters.",
        ],
    ))
}

fn text(k: &'static str) -> Reply {
    Reply::bulk_static(k)
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

fn subscribers(ctx: &Ctx, channel: String) -> usize {
    ctx.state.pubsub.subscribers(Kind::Channel, channel.as_bytes()).len()
}

fn describe(ctx: &mut Ctx, name: &Bytes) -> Option<Reply> {
    let now = ctx.now_ms;
    let shown = String::from_utf8_lossy(name).into_owned();
    let ttl = |ctx: &mut Ctx| super::keys::pttl_of(ctx, name);
    match ctx.db().get(name, now)? {
        Value::Hash(h) => {
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
            let queue_key = format!("redisson_lock_queue:{{{shown}}}");
            let queue = match ctx.db().get(queue_key.as_bytes(), now) {
                Some(Value::List(l)) => Some(l.iter().cloned().collect::<Vec<Bytes>>()),
                _ => None,
            };
            let ttl = ttl(ctx);
            let mut fields = vec![(text("name"), Reply::Bulk(name.clone()))];
            if let Some(mode) = &mode {
                fields.push((text("type"), text("rwlock")));
                fields.push((text("ttl"), Reply::Int(ttl)));
                fields.push((text("mode"), Reply::Bulk(mode.clone())));
                fields.push((text("holders"), Reply::Array(holders)));
                fields.push((
                    text("waiters"),
                    Reply::Int(subscribers(ctx, format!("redisson_rwlock:{{{shown}}}")) as i64),
                ));
            } else if let Some(queue) = queue {
                let timeout_key = format!("redisson_lock_timeout:{{{shown}}}");
                let waiting: Vec<Reply> = queue
                    .iter()
                    .map(|w| {
                        let (client, thread, _) = holder(w).unwrap_or((w, b"", false));
                        let timeout = match ctx.db().get(timeout_key.as_bytes(), now) {
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
                let waiters: usize = queue
                    .iter()
                    .map(|w| subscribers(ctx, format!("redisson_lock__channel:{{{shown}}}:{}", String::from_utf8_lossy(w))))
                    .sum();
                fields.push((text("type"), text("fairlock")));
                fields.push((text("ttl"), Reply::Int(ttl)));
                fields.push((text("holders"), Reply::Array(holders)));
                fields.push((text("queue"), Reply::Array(waiting)));
                fields.push((text("waiters"), Reply::Int(waiters as i64)));
            } else {
                fields.push((text("type"), text("lock")));
                fields.push((text("ttl"), Reply::Int(ttl)));
                fields.push((text("holders"), Reply::Array(holders)));
                fields.push((
                    text("waiters"),
                    Reply::Int(subscribers(ctx, format!("redisson_lock__channel:{{{shown}}}")) as i64),
                ));
            }
            Some(Reply::Map(fields))
        }
        Value::Str(s) => {
            let value = crate::numfmt::parse_i64(s)?;
            let semaphore_waiters = subscribers(ctx, format!("redisson_sc:{{{shown}}}"));
            let latch_waiters = subscribers(ctx, format!("redisson_countdownlatch__channel__{{{shown}}}"));
            let (kind, field, waiters) = if semaphore_waiters > 0 {
                ("semaphore", "permits", semaphore_waiters)
            } else if latch_waiters > 0 {
                ("latch", "count", latch_waiters)
            } else {
                return None;
            };
            let ttl = ttl(ctx);
            Some(Reply::Map(vec![
                (text("name"), Reply::Bulk(name.clone())),
                (text("type"), text(kind)),
                (text("ttl"), Reply::Int(ttl)),
                (text(field), Reply::Int(value)),
                (text("waiters"), Reply::Int(waiters as i64)),
            ]))
        }
        _ => None,
    }
}
