//! LATENCY: the latency monitor's events (`engine::latency`) and the
//! per-command latency histograms (`engine::histogram`), as Redis 7.0's
//! latency.c answers them.

use bytes::Bytes;

use super::server::help_reply;
use super::table::{CommandSpec, Registry, cmd, container, flag::*};
use super::{CmdError, CmdResult, Ctx, Reply};
use crate::engine::latency::DoctorContext;
use crate::engine::stats::CommandStat;

pub const COMMANDS: &[CommandSpec] = &[container("latency", LATENCY)];

const LATENCY: &[CommandSpec] = &[
    cmd("doctor", 2, latency_doctor).flags(ADMIN | NOSCRIPT | LOADING | STALE),
    cmd("graph", 3, latency_graph).flags(ADMIN | NOSCRIPT | LOADING | STALE),
    cmd("history", 3, latency_history).flags(ADMIN | NOSCRIPT | LOADING | STALE),
    cmd("latest", 2, latency_latest).flags(ADMIN | NOSCRIPT | LOADING | STALE),
    cmd("reset", -2, latency_reset).flags(ADMIN | NOSCRIPT | LOADING | STALE),
    cmd("histogram", -2, latency_histogram).flags(ADMIN | NOSCRIPT | LOADING | STALE),
    cmd("help", 2, latency_help).flags(LOADING | STALE),
];

fn now_secs(ctx: &Ctx) -> i64 {
    (ctx.state.clock.now_ms() / 1000) as i64
}

fn latency_doctor(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let cx = DoctorContext {
        threshold_ms: ctx.state.runtime.latency_monitor_threshold,
        slowlog_log_slower_than: ctx.state.runtime.slowlog_log_slower_than,
        hz: ctx.state.runtime.hz,
        now_secs: now_secs(ctx),
    };
    Ok(Reply::verbatim_txt(ctx.state.latency.doctor(&cx)))
}

fn latency_graph(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    match ctx.state.latency.graph(&argv[2], now_secs(ctx)) {
        Some(graph) => Ok(Reply::verbatim_txt(graph)),
        None => Err(CmdError::err_bytes(
            &[b"No samples available for event '".as_slice(), crate::error::quoted(&argv[2]), b"'"].concat(),
        )),
    }
}

fn latency_history(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Ok(ctx.state.latency.history(&argv[2]))
}

fn latency_latest(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(ctx.state.latency.latest())
}

fn latency_reset(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let resets = if argv.len() == 2 {
        ctx.state.latency.reset(None)
    } else {
        argv[2..].iter().map(|e| ctx.state.latency.reset(Some(e))).sum()
    };
    Ok(Reply::Int(resets as i64))
}

/// One command's histogram as `fillCommandCDF` replies with it.
fn command_cdf(stat: &CommandStat) -> Option<Reply> {
    let h = stat.latency.as_ref()?;
    let points = h
        .cumulative_usec()
        .into_iter()
        .map(|(usec, count)| (Reply::Int(usec as i64), Reply::Int(count as i64)))
        .collect();
    Some(Reply::Map(vec![
        (Reply::bulk_static("calls"), Reply::Int(h.total_count() as i64)),
        (Reply::bulk_static("histogram_usec"), Reply::Map(points)),
    ]))
}

/// LATENCY HISTOGRAM [command …]: every command with recorded runs, or
/// those named (a container stands for its subcommands too; unknown
/// names are skipped).
fn latency_histogram(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let registry = Registry::get();
    let stats = &ctx.state.stats.cmd;
    let mut out = Vec::new();
    let mut add = |index: usize, name: &str| {
        if let Some(cdf) = command_cdf(&stats[index]) {
            out.push((Reply::Bulk(Bytes::copy_from_slice(name.as_bytes())), cdf));
        }
    };
    if argv.len() == 2 {
        for (index, (_, name)) in registry.all.iter().enumerate() {
            add(index, name);
        }
    } else {
        for name in &argv[2..] {
            let mut parts = name.splitn(2, |&b| b == b'|');
            let base = parts.next().unwrap_or_default();
            let Some(found) = registry.lookup(base) else { continue };
            let found = match parts.next() {
                None => found,
                Some(sub) => match found.subcommand(sub) {
                    Some(sub) => sub,
                    None => continue,
                },
            };
            add(found.stat_index, &found.full_name);
            let mut subs: Vec<_> = found.subcommands.values().collect();
            subs.sort_by_key(|c| c.stat_index);
            for sub in subs {
                add(sub.stat_index, &sub.full_name);
            }
        }
    }
    Ok(Reply::Map(out))
}

fn latency_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(help_reply(
        "LATENCY",
        &[
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
        ],
    ))
}
