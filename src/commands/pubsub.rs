//! Pub/sub commands: (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE, PUBLISH, SPUBLISH
//! and PUBSUB introspection.
//!
//! Subscription confirmations are one reply per channel (a `Reply::Many`);
//! they are arrays in RESP2 and pushes in RESP3, as in Redis.

use bytes::Bytes;

use super::table::{CommandSpec, cmd, container, flag::*};
use super::{CmdError, CmdResult, Ctx, Reply};
use crate::db::value::owned;
use crate::pubsub::Kind;

const SUB: u32 = PUBSUB | NOSCRIPT | LOADING | STALE | SUBSCRIBED_OK;

pub const COMMANDS: &[CommandSpec] = &[
    cmd("subscribe", -2, subscribe).flags(SUB),
    cmd("unsubscribe", -1, unsubscribe).flags(SUB),
    cmd("psubscribe", -2, psubscribe).flags(SUB),
    cmd("punsubscribe", -1, punsubscribe).flags(SUB),
    cmd("ssubscribe", -2, ssubscribe).flags(SUB),
    cmd("sunsubscribe", -1, sunsubscribe).flags(SUB),
    cmd("publish", 3, publish).flags(PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE),
    cmd("spublish", 3, spublish).flags(PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE),
    container("pubsub", PUBSUB_SUBCOMMANDS),
];

const PUBSUB_SUBCOMMANDS: &[CommandSpec] = &[
    cmd("channels", -2, pubsub_channels).flags(PUBSUB | LOADING | STALE),
    cmd("numsub", -2, pubsub_numsub).flags(PUBSUB | LOADING | STALE),
    cmd("numpat", 2, pubsub_numpat).flags(PUBSUB | LOADING | STALE),
    cmd("shardchannels", -2, pubsub_shardchannels).flags(PUBSUB | LOADING | STALE),
    cmd("shardnumsub", -2, pubsub_shardnumsub).flags(PUBSUB | LOADING | STALE),
    cmd("help", 2, pubsub_help).flags(LOADING | STALE),
];

fn confirmation(kind: &'static str, channel: Option<Bytes>, count: usize) -> Reply {
    Reply::Push(vec![Reply::bulk_static(kind), Reply::opt_bulk(channel), Reply::Int(count as i64)])
}

fn subscribe(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut out = Vec::new();
    for ch in &argv[1..] {
        if ctx.client.channels.insert(owned(ch)) {
            ctx.state.pubsub.subscribe(Kind::Channel, owned(ch), ctx.client.id);
        }
        out.push(confirmation("subscribe", Some(ch.clone()), ctx.client.subscription_count()));
    }
    Ok(Reply::Many(out))
}

fn ssubscribe(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut out = Vec::new();
    for ch in &argv[1..] {
        if ctx.client.shard_channels.insert(owned(ch)) {
            ctx.state.pubsub.subscribe(Kind::Shard, owned(ch), ctx.client.id);
        }
        out.push(confirmation("ssubscribe", Some(ch.clone()), ctx.client.shard_channels.len()));
    }
    Ok(Reply::Many(out))
}

fn psubscribe(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut out = Vec::new();
    for p in &argv[1..] {
        if ctx.client.patterns.insert(owned(p)) {
            ctx.state.pubsub.psubscribe(owned(p), ctx.client.id);
        }
        out.push(confirmation("psubscribe", Some(p.clone()), ctx.client.subscription_count()));
    }
    Ok(Reply::Many(out))
}

fn unsubscribe(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let targets: Vec<Bytes> = if argv.len() > 1 {
        argv[1..].to_vec()
    } else {
        ctx.client.channels.iter().cloned().collect()
    };
    if targets.is_empty() {
        return Ok(Reply::Many(vec![confirmation(
            "unsubscribe",
            None,
            ctx.client.subscription_count(),
        )]));
    }
    let mut out = Vec::new();
    for ch in targets {
        if ctx.client.channels.remove(&ch) {
            ctx.state.pubsub.unsubscribe(Kind::Channel, &ch, ctx.client.id);
        }
        out.push(confirmation("unsubscribe", Some(ch), ctx.client.subscription_count()));
    }
    Ok(Reply::Many(out))
}

fn sunsubscribe(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let targets: Vec<Bytes> = if argv.len() > 1 {
        argv[1..].to_vec()
    } else {
        ctx.client.shard_channels.iter().cloned().collect()
    };
    if targets.is_empty() {
        return Ok(Reply::Many(vec![confirmation(
            "sunsubscribe",
            None,
            ctx.client.shard_channels.len(),
        )]));
    }
    let mut out = Vec::new();
    for ch in targets {
        if ctx.client.shard_channels.remove(&ch) {
            ctx.state.pubsub.unsubscribe(Kind::Shard, &ch, ctx.client.id);
        }
        out.push(confirmation("sunsubscribe", Some(ch), ctx.client.shard_channels.len()));
    }
    Ok(Reply::Many(out))
}

fn punsubscribe(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let targets: Vec<Bytes> = if argv.len() > 1 {
        argv[1..].to_vec()
    } else {
        ctx.client.patterns.iter().cloned().collect()
    };
    if targets.is_empty() {
        return Ok(Reply::Many(vec![confirmation(
            "punsubscribe",
            None,
            ctx.client.subscription_count(),
        )]));
    }
    let mut out = Vec::new();
    for p in targets {
        if ctx.client.patterns.remove(&p) {
            ctx.state.pubsub.punsubscribe(&p, ctx.client.id);
        }
        out.push(confirmation("punsubscribe", Some(p), ctx.client.subscription_count()));
    }
    Ok(Reply::Many(out))
}

/// Drops every subscription of the calling client (RESET).
pub fn unsubscribe_everything(ctx: &mut Ctx) {
    let id = ctx.client.id;
    for ch in ctx.client.channels.drain() {
        ctx.state.pubsub.unsubscribe(Kind::Channel, &ch, id);
    }
    for ch in ctx.client.shard_channels.drain() {
        ctx.state.pubsub.unsubscribe(Kind::Shard, &ch, id);
    }
    for p in ctx.client.patterns.drain() {
        ctx.state.pubsub.punsubscribe(&p, id);
    }
}

fn publish(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let n = ctx.state.publish(ctx.client, Kind::Channel, &argv[1], &argv[2]);
    match ctx.state.cluster.as_deref_mut() {
        // Every other node's subscribers get it too, over the bus.
        Some(c) => c.propagate_publish(&argv[1], &argv[2]),
        // Replicas get every message; an append-only file none.
        None => ctx.force_propagation(crate::engine::effects::REPL),
    }
    Ok(Reply::Int(n as i64))
}

fn spublish(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let n = ctx.state.publish(ctx.client, Kind::Shard, &argv[1], &argv[2]);
    match ctx.state.cluster.as_deref_mut() {
        // The other nodes of the shard get it, over the bus.
        Some(c) => c.propagate_publish_shard(&argv[1], &argv[2]),
        None => ctx.force_propagation(crate::engine::effects::REPL),
    }
    Ok(Reply::Int(n as i64))
}

fn pubsub_channels(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() > 3 {
        return Err(CmdError::subcommand_syntax(&argv[1], "pubsub"));
    }
    // Redis's channelList sends the length last.
    ctx.defer_reply_len();
    Ok(Reply::bulks(
        ctx.state.pubsub.channel_names(Kind::Channel, argv.get(2).map(|b| b.as_ref())),
    ))
}

fn pubsub_shardchannels(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() > 3 {
        return Err(CmdError::subcommand_syntax(&argv[1], "pubsub"));
    }
    // Redis's channelList sends the length last.
    ctx.defer_reply_len();
    Ok(Reply::bulks(
        ctx.state.pubsub.channel_names(Kind::Shard, argv.get(2).map(|b| b.as_ref())),
    ))
}

fn numsub(ctx: &mut Ctx, argv: &[Bytes], kind: Kind) -> Reply {
    let mut out = Vec::new();
    for ch in &argv[2..] {
        out.push(Reply::Bulk(ch.clone()));
        out.push(Reply::Int(ctx.state.pubsub.subscribers(kind, ch).len() as i64));
    }
    Reply::Array(out)
}

fn pubsub_numsub(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Ok(numsub(ctx, argv, Kind::Channel))
}

fn pubsub_shardnumsub(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Ok(numsub(ctx, argv, Kind::Shard))
}

fn pubsub_numpat(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(ctx.state.pubsub.pattern_count() as i64))
}

fn pubsub_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(super::server::help_reply(
        "PUBSUB",
        &[
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "SHARDCHANNELS [<pattern>]",
            "    Return the currently active shard level channels matching a <pattern> (default: '*').",
            "SHARDNUMSUB [<shardchannel> ...]",
            "    Return the number of subscribers for the specified shard level channel(s)",
        ],
    ))
}
