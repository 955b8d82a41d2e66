//! Transactions: MULTI / EXEC / DISCARD and optimistic locking with WATCH.
//!
//! Queueing happens in the engine's dispatch (commands that are not
//! transaction control are queued while `client.multi` is set); EXEC runs
//! the queue through the same `State::call` as any command, so statistics,
//! MONITOR and WATCH behave identically inside and outside a transaction.

use bytes::Bytes;

use super::table::{CommandSpec, cmd, flag::*};
use super::{CmdError, CmdResult, Ctx, Reply};
use crate::db::value::owned;
use crate::engine::client::Multi;
use crate::engine::{Client, State};

pub const COMMANDS: &[CommandSpec] = &[
    cmd("multi", 1, multi).flags(NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY | TX_CONTROL),
    cmd("exec", 1, exec).flags(NOSCRIPT | LOADING | STALE | SKIP_SLOWLOG | TX_CONTROL),
    cmd("discard", 1, discard).flags(NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY | TX_CONTROL),
    cmd("watch", -2, watch).flags(NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY | TX_CONTROL),
    cmd("unwatch", 1, unwatch).flags(NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY),
];

fn multi(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    if ctx.client.multi.is_some() {
        return Err(CmdError::multi_nested());
    }
    ctx.client.multi = Some(Multi::default());
    Ok(Reply::OK)
}

fn exec(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let Some(multi) = ctx.client.multi.take() else {
        return Err(CmdError::exec_without_multi());
    };
    if multi.aborted {
        unwatch_all(ctx.state, ctx.client);
        return Err(CmdError::new("EXECABORT Transaction discarded because of previous errors."));
    }
    // A watched key that expired since it was watched fails the
    // transaction even if nothing removed it yet (Redis's
    // `isWatchedKeyExpired`).
    let now = ctx.now_ms;
    let expired = ctx
        .client
        .watched
        .iter()
        .any(|(db, key)| ctx.state.dbs[*db].watched_key_expired(key, ctx.client.id, now));
    if ctx.client.watch_dirty || expired {
        unwatch_all(ctx.state, ctx.client);
        return Ok(Reply::NilArray);
    }
    // Keys watched must not change under the transaction's own writes.
    unwatch_all(ctx.state, ctx.client);
    let count = multi.queued.len();
    let mut replies = Vec::with_capacity(count);
    // What the client is sent while its transaction runs (messages to its
    // own channels, invalidations redirected to it): Redis writes each
    // where it arises, between the replies, after the array's header.
    let mut interleaved: Option<Vec<Reply>> = None;
    // Nothing blocks inside a transaction.
    ctx.state.deny_blocking = true;
    for argv in multi.queued {
        let reply = match crate::engine::exec::queued(ctx.state, ctx.client, &argv) {
            Ok(cmd) => ctx.state.call(ctx.scripts.as_deref_mut(), ctx.client, cmd, &argv),
            Err(e) => {
                ctx.state.stats.count_error(&e);
                Reply::from(e)
            }
        };
        if !ctx.client.inline_pushes.is_empty() && interleaved.is_none() {
            let mut sequence = vec![Reply::Raw(Bytes::from(format!("*{count}\r\n")))];
            sequence.append(&mut replies);
            interleaved = Some(sequence);
        }
        match interleaved.as_mut() {
            Some(sequence) => {
                sequence.append(&mut ctx.client.inline_pushes);
                sequence.push(reply);
            }
            None => replies.push(reply),
        }
    }
    ctx.state.deny_blocking = false;
    Ok(match interleaved {
        Some(sequence) => Reply::Many(sequence),
        None => Reply::Array(replies),
    })
}

fn discard(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    if ctx.client.multi.take().is_none() {
        return Err(CmdError::err("DISCARD without MULTI"));
    }
    unwatch_all(ctx.state, ctx.client);
    Ok(Reply::OK)
}

fn watch(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if ctx.client.multi.is_some() {
        return Err(CmdError::err("WATCH inside MULTI is not allowed"));
    }
    let db = ctx.client.db;
    for key in &argv[1..] {
        if ctx.client.watched.iter().any(|(d, k)| *d == db && k == key) {
            continue;
        }
        let now = ctx.now_ms;
        ctx.state.dbs[db].watch(owned(key), ctx.client.id, now);
        ctx.client.watched.push((db, owned(key)));
        ctx.state.watching += 1;
    }
    Ok(Reply::OK)
}

fn unwatch(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    unwatch_all(ctx.state, ctx.client);
    Ok(Reply::OK)
}

/// Forgets every key a client watches and clears its dirty flag.
pub fn unwatch_all(state: &mut State, client: &mut Client) {
    for (db, key) in client.watched.drain(..) {
        state.dbs[db].unwatch(&key, client.id);
        state.watching = state.watching.saturating_sub(1);
    }
    client.watch_dirty = false;
}

/// RESET's part: leave any transaction and forget watches.
pub fn discard_and_unwatch(ctx: &mut Ctx) {
    ctx.client.multi = None;
    unwatch_all(ctx.state, ctx.client);
}
