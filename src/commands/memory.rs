//! MEMORY: USAGE, STATS, DOCTOR, PURGE, MALLOC-STATS and HELP.
//!
//! The figures are keylock's: used memory is what its counting allocator
//! holds (`crate::memory`), a key's usage is estimated from keylock's own
//! layouts (`db::footprint`), and the breakdown of MEMORY STATS follows
//! Redis's `getMemoryOverheadData` field for field, with the parts keylock
//! does not have (replication backlog, AOF buffer, cluster links,
//! functions) at zero. MEMORY PURGE gives freed memory back to the OS at
//! once, as Redis's does with jemalloc; MEMORY DOCTOR applies Redis's
//! checks to these figures and answers with Redis's texts.

use bytes::Bytes;

use super::args::parse_i64;
use super::table::{CommandSpec, cmd, container, flag::*};
use super::{CmdError, CmdResult, Ctx, Reply};
use crate::memory;

pub const COMMANDS: &[CommandSpec] = &[container("memory", MEMORY)];

const MEMORY: &[CommandSpec] = &[
    cmd("doctor", 2, doctor),
    cmd("help", 2, help).flags(LOADING | STALE),
    cmd("malloc-stats", 2, malloc_stats),
    cmd("purge", 2, purge),
    cmd("stats", 2, stats),
    cmd("usage", -3, usage).flags(READONLY),
];

/// Redis's `OBJ_COMPUTE_SIZE_DEF_SAMPLES`.
const DEFAULT_SAMPLES: usize = 5;

fn usage(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut samples = DEFAULT_SAMPLES;
    let mut options = argv[3..].iter();
    while let Some(option) = options.next() {
        match options.next() {
            Some(count) if option.eq_ignore_ascii_case(b"samples") => {
                samples = match parse_i64(count)? {
                    n if n < 0 => return Err(CmdError::syntax()),
                    0 => usize::MAX,
                    n => n as usize,
                };
            }
            _ => return Err(CmdError::syntax()),
        }
    }
    // Redis finds the key in the dictionary: no lookup statistics, no
    // access time, no expiry (a key past its deadline still counts until
    // it is removed).
    let key = &argv[2];
    Ok(match ctx.db().stored(key) {
        Some(value) => Reply::Int(crate::db::footprint::usage(key, value, samples) as i64),
        None => Reply::Nil,
    })
}

/// Redis's `redisMemOverhead`, from keylock's figures.
pub(crate) struct Overhead {
    pub peak: u64,
    pub total: u64,
    pub startup: u64,
    pub clients_normal: u64,
    lua_caches: u64,
    functions_caches: u64,
    /// Per database with keys: (index, main table, expires table).
    dbs: Vec<(usize, u64, u64)>,
    pub overhead_total: u64,
    keys: u64,
    pub rss: u64,
}

impl Overhead {
    pub fn of(ctx: &Ctx) -> Overhead {
        let st = &*ctx.state;
        let total = memory::used_bytes();
        let startup = st.startup_allocated.min(total);
        let slot = std::mem::size_of::<usize>() as u64;
        let client = std::mem::size_of::<crate::engine::Client>() as u64;
        let clients_normal = st.clients.values().map(|c| client + c.outbox.obuf_bytes() as u64).sum::<u64>() + client;
        let lua_caches = ctx
            .scripts
            .as_deref()
            .and_then(|s| s.vm.as_deref())
            .map_or(0, |vm| vm.cache_memory() as u64);
        let entry = 4 * slot;
        let dbs: Vec<(usize, u64, u64)> = st
            .dbs
            .iter()
            .enumerate()
            .filter(|(_, db)| !db.is_empty())
            .map(|(index, db)| {
                let (keys, volatile) = (db.len() as u64, db.expires_len() as u64);
                let main = keys * (entry + std::mem::size_of::<crate::db::Value>() as u64) + keys.next_power_of_two() * slot;
                let expires = volatile * entry + if volatile > 0 { volatile.next_power_of_two() * slot } else { 0 };
                (index, main, expires)
            })
            .collect();
        let functions_caches = ctx
            .scripts
            .as_deref()
            .and_then(|s| s.functions.as_deref())
            .map_or(0, |f| f.overhead_memory() as u64);
        let overhead_total =
            startup + clients_normal + lua_caches + functions_caches + dbs.iter().map(|(_, main, expires)| main + expires).sum::<u64>();
        Overhead {
            peak: memory::peak_bytes().max(total),
            total,
            startup,
            clients_normal,
            lua_caches,
            functions_caches,
            keys: st.dbs.iter().map(|db| db.len() as u64).sum(),
            dbs,
            overhead_total,
            rss: memory::rss_bytes(),
        }
    }

    pub fn net_usage(&self) -> u64 {
        if self.total > self.startup { self.total - self.startup } else { 1 }
    }

    pub fn dataset(&self) -> u64 {
        self.total.saturating_sub(self.overhead_total)
    }

    /// RSS over what is allocated (Redis's `total_frag`).
    fn fragmentation(&self) -> f64 {
        self.rss as f64 / self.total.max(1) as f64
    }

    pub fn fragmentation_bytes(&self) -> i64 {
        self.rss as i64 - self.total as i64
    }
}

fn stats(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let mh = Overhead::of(ctx);
    let int = |n: u64| Reply::Int(n as i64);
    let mut fields: Vec<(&'static str, Reply)> = vec![
        ("peak.allocated", int(mh.peak)),
        ("total.allocated", int(mh.total)),
        ("startup.allocated", int(mh.startup)),
        ("replication.backlog", int(0)),
        ("clients.slaves", int(0)),
        ("clients.normal", int(mh.clients_normal)),
        ("cluster.links", int(0)),
        ("aof.buffer", int(0)),
        ("lua.caches", int(mh.lua_caches)),
        ("functions.caches", int(mh.functions_caches)),
    ];
    let mut reply: Vec<(Reply, Reply)> = fields.drain(..).map(|(k, v)| (Reply::bulk_static(k), v)).collect();
    for (index, main, expires) in &mh.dbs {
        reply.push((
            Reply::Bulk(Bytes::from(format!("db.{index}"))),
            Reply::Map(vec![
                (Reply::bulk_static("overhead.hashtable.main"), int(*main)),
                (Reply::bulk_static("overhead.hashtable.expires"), int(*expires)),
                (Reply::bulk_static("overhead.hashtable.slot-to-keys"), int(0)),
            ]),
        ));
    }
    let net = mh.net_usage();
    let allocator: [(&'static str, Reply); 17] = [
        ("overhead.total", int(mh.overhead_total)),
        ("keys.count", int(mh.keys)),
        ("keys.bytes-per-key", int(net.checked_div(mh.keys).unwrap_or(0))),
        ("dataset.bytes", int(mh.dataset())),
        (
            "dataset.percentage",
            Reply::Double((mh.dataset() as f32 * 100.0 / net as f32) as f64),
        ),
        (
            "peak.percentage",
            Reply::Double((mh.total as f32 * 100.0 / mh.peak.max(1) as f32) as f64),
        ),
        // mimalloc's own pages are not told apart from what is allocated:
        // its fragmentation shows as RSS overhead.
        ("allocator.allocated", int(mh.total)),
        ("allocator.active", int(mh.total)),
        ("allocator.resident", int(mh.rss)),
        ("allocator-fragmentation.ratio", Reply::Double(1.0)),
        ("allocator-fragmentation.bytes", int(0)),
        ("allocator-rss.ratio", Reply::Double(mh.fragmentation() as f32 as f64)),
        ("allocator-rss.bytes", Reply::Int(mh.fragmentation_bytes())),
        ("rss-overhead.ratio", Reply::Double(1.0)),
        ("rss-overhead.bytes", int(0)),
        ("fragmentation", Reply::Double(mh.fragmentation() as f32 as f64)),
        ("fragmentation.bytes", Reply::Int(mh.fragmentation_bytes())),
    ];
    reply.extend(allocator.into_iter().map(|(k, v)| (Reply::bulk_static(k), v)));
    Ok(Reply::Map(reply))
}

/// Redis's `getMemoryDoctorReport`, its checks applied to keylock's
/// figures (allocator fragmentation is not told apart: see `stats`).
fn doctor(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let mh = Overhead::of(ctx);
    let scripts = ctx
        .scripts
        .as_deref()
        .and_then(|s| s.vm.as_deref())
        .map_or(0, |vm| vm.cached_count());
    let clients = ctx.state.clients.len() as u64 + 1;
    let report = if mh.total < 5 << 20 {
        "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I will be back to our programming as soon as I finished rebooting.\n".to_string()
    } else {
        let mut issues = String::new();
        if mh.peak as f32 / mh.total as f32 > 1.5 {
            issues.push_str(" * Peak memory: In the past this instance used more than 150% the memory that is currently using. The allocator is normally not able to release memory after a peak, so you can expect to see a big fragmentation ratio, however this is actually harmless and is only due to the memory peak, and if the Redis instance Resident Set Size (RSS) is currently bigger than expected, the memory will be used as soon as you fill the Redis instance with more data. If the memory peak was only occasional and you want to try to reclaim memory, please try the MEMORY PURGE command, otherwise the only other option is to shutdown and restart the instance.\n\n");
        }
        if mh.fragmentation() > 1.4 && mh.fragmentation_bytes() > 10 << 20 {
            issues.push_str(" * High total RSS: This instance has a memory fragmentation and RSS overhead greater than 1.4 (this means that the Resident Set Size of the Redis process is much larger than the sum of the logical allocations Redis performed). This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. If the problem is a large peak memory, then there is no issue. Otherwise, make sure you are using the Jemalloc allocator and not the default libc malloc. Note: The currently used allocator is \"mimalloc\".\n\n");
        }
        if mh.fragmentation() > 1.1 && mh.fragmentation_bytes() > 10 << 20 {
            issues.push_str(" * High allocator RSS overhead: This instance has an RSS memory overhead is greater than 1.1 (this means that the Resident Set Size of the allocator is much larger than the sum what the allocator actually holds). This problem is usually due to a large peak memory (check if there is a peak memory entry above in the report), you can try the MEMORY PURGE command to reclaim it.\n\n");
        }
        if mh.clients_normal / clients > 200 * 1024 {
            issues.push_str(" * Big client buffers: The clients output buffers in this instance are greater than 200K per client (on average). This may result from different causes, like Pub/Sub clients subscribed to channels bot not receiving data fast enough, so that data piles on the Redis instance output buffer, or clients sending commands with large replies or very large sequences of commands in the same pipeline. Please use the CLIENT LIST command in order to investigate the issue if it causes problems in your instance, or to understand better why certain clients are using a big amount of memory.\n\n");
        }
        if scripts > 1000 {
            issues.push_str(" * Many scripts: There seem to be many cached scripts in this instance (more than 1000). This may be because scripts are generated and `EVAL`ed, instead of being parameterized (with KEYS and ARGV), `SCRIPT LOAD`ed and `EVALSHA`ed. Unless `SCRIPT FLUSH` is called periodically, the scripts' caches may end up consuming most of your memory.\n\n");
        }
        if issues.is_empty() {
            "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.\n".to_string()
        } else {
            format!(
                "Sam, I detected a few issues in this Redis instance memory implants:\n\n{issues}I'm here to keep you safe, Sam. I want to help you.\n"
            )
        }
    };
    Ok(Reply::verbatim_txt(report))
}

/// Gives every freed page back to the OS now (Redis purges jemalloc's
/// dirty pages).
fn purge(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    memory::purge();
    Ok(Reply::OK)
}

/// Redis answers this without jemalloc; keylock's allocator is mimalloc.
fn malloc_stats(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Reply::bulk_static("Stats not supported for the current allocator"))
}

fn help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(super::server::help_reply(
        "MEMORY",
        &[
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
        ],
    ))
}
