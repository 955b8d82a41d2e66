//! INFO: the server's state in Redis's `# Section` / `field:value` format.
//!
//! Fields clients and monitoring tools parse are reported with Redis's
//! names; `redis_version` says 7.0.15 (the Redis keylock answers as) and
//! `keylock_version` says what is really running.

use std::fmt::Write;

use super::Ctx;
use super::table::Registry;

const DEFAULT: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "errorstats",
    "cluster",
    "keyspace",
    "keylock",
];
const ALL_EXTRA: &[&str] = &["commandstats", "latencystats"];

/// Renders the sections asked for (`default` when none).
pub fn render(ctx: &mut Ctx, requested: &[String]) -> String {
    let mut sections: Vec<&str> = Vec::new();
    let add = |s: &'static str, sections: &mut Vec<&'static str>| {
        if !sections.contains(&s) {
            sections.push(s);
        }
    };
    if requested.is_empty() {
        for s in DEFAULT {
            add(s, &mut sections);
        }
    }
    let mut sections_owned: Vec<&'static str> = sections.clone();
    for r in requested {
        match r.as_str() {
            "default" => DEFAULT.iter().for_each(|s| add(s, &mut sections_owned)),
            "all" | "everything" => {
                DEFAULT.iter().for_each(|s| add(s, &mut sections_owned));
                ALL_EXTRA.iter().for_each(|s| add(s, &mut sections_owned));
            }
            other => {
                if let Some(s) = DEFAULT.iter().chain(ALL_EXTRA).find(|s| **s == other) {
                    add(s, &mut sections_owned);
                }
            }
        }
    }
    let mut out = String::new();
    for s in sections_owned {
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        section(ctx, s, &mut out);
    }
    out
}

fn section(ctx: &mut Ctx, name: &str, out: &mut String) {
    let st = &*ctx.state;
    let now_us = st.clock.now_us();
    let uptime = st.started.elapsed().as_secs();
    macro_rules! line {
        ($($arg:tt)*) => {{ let _ = write!(out, $($arg)*); out.push_str("\r\n"); }};
    }
    match name {
        "server" => {
            line!("# Server");
            line!("redis_version:{}", crate::REDIS_VERSION);
            line!("keylock_version:{}", crate::VERSION);
            line!("redis_git_sha1:00000000");
            line!("redis_git_dirty:0");
            line!("redis_build_id:0");
            line!("redis_mode:{}", if st.cluster_enabled() { "cluster" } else { "standalone" });
            line!("os:{} {}", std::env::consts::OS, std::env::consts::ARCH);
            line!("arch_bits:64");
            line!("multiplexing_api:epoll");
            line!("process_id:{}", std::process::id());
            line!("process_supervised:no");
            line!("run_id:{}", st.run_id);
            // Redis shows the TLS port when there is no plain one.
            let tcp_port = if st.port != 0 {
                i64::from(st.port)
            } else {
                st.params.int("tls-port").unwrap_or(0)
            };
            line!("tcp_port:{}", tcp_port);
            line!("server_time_usec:{}", now_us);
            line!("uptime_in_seconds:{}", uptime);
            line!("uptime_in_days:{}", uptime / 86400);
            line!("hz:{}", st.runtime.hz);
            line!("configured_hz:{}", st.runtime.hz);
            line!("lru_clock:{}", (now_us / 1_000_000) & ((1 << 24) - 1));
            line!(
                "executable:{}",
                std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default()
            );
            line!(
                "config_file:{}",
                st.config.config_file.as_ref().map(|p| p.display().to_string()).unwrap_or_default()
            );
            line!("io_threads_active:0");
            if let Some(wait) = &st.shutdown_wait {
                line!("shutdown_in_milliseconds:{}", wait.deadline_ms.saturating_sub(st.clock.now_ms()));
            }
        }
        "clients" => {
            let pubsub_clients = st.clients.values().filter(|c| c.in_pubsub_mode()).count() + ctx.client.in_pubsub_mode() as usize;
            line!("# Clients");
            // Replicas are not counted (Redis's `listLength(server.clients)
            // - listLength(server.slaves)`): `connected_slaves` counts them.
            line!("connected_clients:{}", st.total_clients() - st.replicas.ids.len());
            line!("cluster_connections:0");
            line!("maxclients:{}", st.runtime.maxclients);
            line!("client_recent_max_input_buffer:0");
            line!("client_recent_max_output_buffer:{}", st.output_peaks.max());
            line!("blocked_clients:{}", st.blocked_clients);
            line!("tracking_clients:{}", st.tracking.clients);
            line!("pubsub_clients:{}", pubsub_clients);
            let in_timeout_table = st
                .clients
                .values()
                .filter(|c| c.blocked.as_ref().is_some_and(|b| b.deadline.is_some()))
                .count();
            line!("clients_in_timeout_table:{}", in_timeout_table);
        }
        "memory" => {
            let o = super::memory::Overhead::of(ctx);
            let st = &*ctx.state;
            let (used, rss, peak) = (o.total, o.rss, o.peak);
            let maxmemory = st.params.int("maxmemory").unwrap_or(0);
            line!("# Memory");
            line!("used_memory:{}", used);
            line!("used_memory_human:{}", human_bytes(used));
            line!("used_memory_rss:{}", rss);
            line!("used_memory_rss_human:{}", human_bytes(rss));
            line!("used_memory_peak:{}", peak);
            line!("used_memory_peak_human:{}", human_bytes(peak));
            line!("used_memory_peak_perc:{:.2}%", used as f64 * 100.0 / peak.max(1) as f64);
            line!("used_memory_overhead:{}", o.overhead_total);
            line!("used_memory_startup:{}", o.startup);
            line!("used_memory_dataset:{}", o.dataset());
            line!("used_memory_dataset_perc:{:.2}%", o.dataset() as f64 * 100.0 / o.net_usage() as f64);
            // keylock's allocator counts what it hands out; what is
            // active and resident is the process's RSS.
            line!("allocator_allocated:{}", used);
            line!("allocator_active:{}", rss);
            line!("allocator_resident:{}", rss);
            let system = crate::memory::total_system_memory();
            line!("total_system_memory:{}", system);
            line!("total_system_memory_human:{}", human_bytes(system));
            // Scripts: the EVAL VM and its cache, the functions' VM and libraries.
            let (vm, cache, cached) = ctx
                .scripts
                .as_deref()
                .and_then(|s| s.vm.as_deref())
                .map_or((0, 0, 0), |s| (s.used_memory(), s.cache_memory(), s.cached_count()));
            line!("used_memory_lua:{}", vm);
            line!("used_memory_vm_eval:{}", vm);
            line!("used_memory_lua_human:{}", human_bytes(vm as u64));
            line!("used_memory_scripts_eval:{}", cache);
            line!("number_of_cached_scripts:{}", cached);
            let (functions, libraries, functions_vm, functions_cache) = ctx
                .scripts
                .as_deref()
                .and_then(|s| s.functions.as_deref())
                .map_or((0, 0, 0, 0), |f| {
                    (f.callable_count(), f.library_count(), f.vm_memory(), f.overhead_memory())
                });
            line!("number_of_functions:{}", functions);
            line!("number_of_libraries:{}", libraries);
            line!("used_memory_vm_functions:{}", functions_vm);
            line!("used_memory_vm_total:{}", vm + functions_vm);
            line!("used_memory_vm_total_human:{}", human_bytes((vm + functions_vm) as u64));
            line!("used_memory_functions:{}", functions_cache);
            line!("used_memory_scripts:{}", cache + functions_cache);
            line!("used_memory_scripts_human:{}", human_bytes((cache + functions_cache) as u64));
            line!("maxmemory:{}", maxmemory);
            line!("maxmemory_human:{}", human_bytes(maxmemory.max(0) as u64));
            line!("maxmemory_policy:{}", st.params.value("maxmemory-policy").unwrap_or("noeviction"));
            let ratio = rss as f64 / used.max(1) as f64;
            line!("allocator_frag_ratio:1.00");
            line!("allocator_frag_bytes:0");
            line!("allocator_rss_ratio:{ratio:.2}");
            line!("allocator_rss_bytes:{}", o.fragmentation_bytes());
            line!("rss_overhead_ratio:1.00");
            line!("rss_overhead_bytes:0");
            line!("mem_fragmentation_ratio:{ratio:.2}");
            line!("mem_fragmentation_bytes:{}", o.fragmentation_bytes());
            let aof_buffer = st.aof.as_ref().map_or(0, |a| a.buffer_length()) as u64;
            let replica_buffers = st.replica_buffers();
            line!("mem_not_counted_for_evict:{}", st.not_counted_memory());
            line!(
                "mem_replication_backlog:{}",
                st.replicas.backlog.as_ref().map_or(0, |b| b.allocated())
            );
            line!("mem_total_replication_buffers:{}", replica_buffers);
            line!("mem_clients_slaves:{}", replica_buffers);
            line!("mem_clients_normal:{}", o.clients_normal.saturating_sub(replica_buffers));
            line!("mem_cluster_links:0");
            line!("mem_aof_buffer:{}", aof_buffer);
            line!("mem_allocator:libc");
            line!("active_defrag_running:0");
            line!("lazyfree_pending_objects:0");
            line!("lazyfreed_objects:0");
        }
        "persistence" => {
            line!("# Persistence");
            line!("loading:{}", u8::from(st.loading.is_some()));
            line!("async_loading:{}", u8::from(st.async_loading()));
            let p = &st.persistence;
            line!("current_cow_peak:0");
            line!("current_cow_size:0");
            line!("current_cow_size_age:0");
            line!("current_fork_perc:0.00");
            line!("current_save_keys_processed:0");
            line!("current_save_keys_total:0");
            line!("rdb_changes_since_last_save:{}", st.dirty - st.dirty_at_save);
            line!("rdb_bgsave_in_progress:{}", u8::from(st.rdb_child_active()));
            line!("rdb_last_save_time:{}", p.lastsave);
            line!("rdb_last_bgsave_status:{}", if p.last_bgsave_ok { "ok" } else { "err" });
            line!("rdb_last_bgsave_time_sec:{}", p.last_bgsave_secs);
            line!(
                "rdb_current_bgsave_time_sec:{}",
                p.child.as_ref().map_or(-1, |c| c.started.elapsed().as_secs() as i64)
            );
            line!("rdb_saves:{}", p.saves);
            line!("rdb_last_cow_size:0");
            line!("rdb_last_load_keys_expired:{}", p.last_load_keys_expired);
            line!("rdb_last_load_keys_loaded:{}", p.last_load_keys_loaded);
            let aof = st.aof.as_ref();
            line!("aof_enabled:{}", u8::from(aof.is_some()));
            let rewrites = &st.aof_rewrites;
            line!("aof_rewrite_in_progress:{}", u8::from(rewrites.running.is_some()));
            line!("aof_rewrite_scheduled:{}", u8::from(st.aof_rewrites.scheduled));
            line!("aof_last_rewrite_time_sec:{}", rewrites.last_secs);
            line!(
                "aof_current_rewrite_time_sec:{}",
                rewrites.running.as_ref().map_or(-1, |r| r.started.elapsed().as_secs() as i64)
            );
            line!("aof_last_bgrewrite_status:{}", if rewrites.last_ok { "ok" } else { "err" });
            line!("aof_rewrites:{}", rewrites.done);
            line!("aof_rewrites_consecutive_failures:{}", rewrites.failures);
            let write_ok = aof.is_none_or(|a| a.write_error.is_none()) && st.durability.sync_error().is_none();
            line!("aof_last_write_status:{}", if write_ok { "ok" } else { "err" });
            line!("aof_last_cow_size:0");
            line!("module_fork_in_progress:0");
            line!("module_fork_last_cow_size:0");
            if let Some(a) = aof {
                line!("aof_current_size:{}", a.current_size + a.base_size);
                line!("aof_base_size:{}", a.rewrite_base_size);
                line!("aof_pending_rewrite:0");
                line!("aof_buffer_length:{}", a.buffer_length());
                line!("aof_pending_bio_fsync:{}", a.pending_syncs(&st.durability));
                // The engine never waits for a sync in progress, so no
                // write is ever postponed for one.
                line!("aof_delayed_fsync:0");
            }
            if let Some(l) = &st.loading {
                // Redis's figures: the share of the file loaded, and the
                // time left at the pace so far.
                let perc = if l.total_bytes > 0 {
                    l.loaded_bytes as f64 * 100.0 / l.total_bytes as f64
                } else {
                    0.0
                };
                let remaining = l.total_bytes.saturating_sub(l.loaded_bytes).max(u64::from(l.total_bytes == 0));
                let elapsed = (st.clock.now_ms() / 1000).saturating_sub(l.start_secs);
                let eta = if elapsed == 0 {
                    1
                } else {
                    elapsed * remaining / (l.loaded_bytes + 1)
                };
                line!("loading_start_time:{}", l.start_secs);
                line!("loading_total_bytes:{}", l.total_bytes);
                line!("loading_rdb_used_mem:0");
                line!("loading_loaded_bytes:{}", l.loaded_bytes);
                line!("loading_loaded_perc:{perc:.2}");
                line!("loading_eta_seconds:{eta}");
            }
        }
        "stats" => {
            let s = &st.stats;
            let expired: u64 = st.dbs.iter().map(|d| d.expired_keys).sum();
            line!("# Stats");
            let (net_in, net_out, reads, writes) = st.net.totals();
            line!("total_connections_received:{}", s.total_connections_received);
            line!("total_commands_processed:{}", s.total_commands_processed);
            line!("instantaneous_ops_per_sec:0");
            line!("total_net_input_bytes:{net_in}");
            line!("total_net_output_bytes:{net_out}");
            line!("total_net_repl_input_bytes:0");
            line!("total_net_repl_output_bytes:0");
            line!("instantaneous_input_kbps:0.00");
            line!("instantaneous_output_kbps:0.00");
            line!("instantaneous_input_repl_kbps:0.00");
            line!("instantaneous_output_repl_kbps:0.00");
            line!("rejected_connections:{}", s.rejected_connections);
            line!("sync_full:{}", st.replicas.full_syncs);
            line!("sync_partial_ok:{}", st.replicas.partial_syncs);
            line!("sync_partial_err:{}", st.replicas.partial_refused);
            line!("expired_keys:{}", expired);
            line!("expired_stale_perc:0.00");
            line!("expired_time_cap_reached_count:0");
            line!("expire_cycle_cpu_milliseconds:0");
            line!("evicted_keys:{}", st.eviction.evicted);
            line!("evicted_clients:{}", st.client_memory.evicted);
            line!("total_eviction_exceeded_time:0");
            line!("current_eviction_exceeded_time:0");
            line!("keyspace_hits:{}", s.keyspace_hits);
            line!("keyspace_misses:{}", s.keyspace_misses);
            line!("pubsub_channels:{}", st.pubsub.channel_count());
            line!("pubsub_patterns:{}", st.pubsub.pattern_count());
            line!("pubsubshard_channels:{}", st.pubsub.shard_channel_count());
            line!("latest_fork_usec:{}", st.persistence.latest_fork_usec);
            line!("total_forks:{}", st.persistence.forks);
            line!("migrate_cached_sockets:{}", st.migrate_sockets.len());
            line!("slave_expires_tracked_keys:0");
            line!("active_defrag_hits:0");
            line!("active_defrag_misses:0");
            line!("active_defrag_key_hits:0");
            line!("active_defrag_key_misses:0");
            line!("total_active_defrag_time:0");
            line!("current_active_defrag_time:0");
            line!("tracking_total_keys:{}", st.tracking.total_keys());
            line!("tracking_total_items:{}", st.tracking.total_items());
            line!("tracking_total_prefixes:{}", st.tracking.total_prefixes());
            line!("unexpected_error_replies:{}", s.unexpected_error_replies);
            line!("total_error_replies:{}", s.total_error_replies);
            line!("dump_payload_sanitizations:0");
            line!("total_reads_processed:{reads}");
            line!("total_writes_processed:{writes}");
            line!("io_threaded_reads_processed:0");
            line!("io_threaded_writes_processed:0");
            line!("reply_buffer_shrinks:{}", s.reply_buffer_shrinks);
            line!("reply_buffer_expands:{}", s.reply_buffer_expands);
        }
        "replication" => {
            line!("# Replication");
            line!(
                "role:{}",
                if st.raft_accepts_writes() && !st.is_replica() {
                    "master"
                } else {
                    "slave"
                }
            );
            if let Some(m) = st.master.as_deref() {
                let now_secs = st.clock.now_ms() / 1000;
                let connected = m.link == crate::engine::replica::LinkState::Connected;
                line!("master_host:{}", m.host);
                line!("master_port:{}", m.port);
                line!("master_link_status:{}", if connected { "up" } else { "down" });
                let last_io = if m.client.is_some() {
                    now_secs.saturating_sub(m.last_io_ms / 1000) as i64
                } else {
                    -1
                };
                line!("master_last_io_seconds_ago:{last_io}");
                line!("master_sync_in_progress:{}", u8::from(m.transfer.is_some()));
                let (read, applied) = if m.client.is_some() {
                    (m.read_offset, st.replicas.offset)
                } else {
                    // Without a link, the offset this replica would continue from.
                    (st.replicas.offset, st.replicas.offset)
                };
                line!("slave_read_repl_offset:{read}");
                line!("slave_repl_offset:{applied}");
                if let Some((total, read)) = m.transfer {
                    let perc = if total > 0 { read as f64 / total as f64 * 100.0 } else { 0.0 };
                    line!("master_sync_total_bytes:{total}");
                    line!("master_sync_read_bytes:{read}");
                    line!("master_sync_left_bytes:{}", total - read as i64);
                    line!("master_sync_perc:{perc:.2}");
                    line!("master_sync_last_io_seconds_ago:{}", now_secs.saturating_sub(m.last_io_ms / 1000));
                }
                if !connected {
                    let down = m.down_since_ms.map_or(-1, |at| now_secs.saturating_sub(at / 1000) as i64);
                    line!("master_link_down_since_seconds:{down}");
                }
                line!("slave_priority:{}", st.params.int("replica-priority").unwrap_or(100));
                line!("slave_read_only:{}", u8::from(st.params.value("replica-read-only") != Some("no")));
                line!("replica_announced:{}", u8::from(st.params.value("replica-announced") != Some("no")));
            }
            line!("connected_slaves:{}", st.replicas.ids.len());
            if st.runtime.min_replicas_to_write > 0 && st.runtime.min_replicas_max_lag > 0 {
                line!("min_slaves_good_slaves:{}", st.good_replicas());
            }
            let now_secs = st.clock.now_ms() / 1000;
            for (i, id) in st.replicas.ids.iter().enumerate() {
                if let Some(replica) = st.clients.get(id) {
                    let announced = st.replicas.announced.get(id);
                    let ip = crate::engine::replication::replica_ip(announced, &replica.peer).unwrap_or_default();
                    let (port, offset, acked) = announced.map_or((0, 0, 0), |a| (a.port, a.ack_offset, a.ack_secs));
                    let state = announced.map_or("send_bulk", |a| a.info_state());
                    let lag = if state == "online" { now_secs.saturating_sub(acked) } else { 0 };
                    line!("slave{i}:ip={ip},port={port},state={state},offset={offset},lag={lag}");
                }
            }
            line!("master_failover_state:{}", st.failover_state());
            line!("master_replid:{}", st.master_replid());
            let replid2 = if st.repl_id2.is_empty() {
                "0000000000000000000000000000000000000000"
            } else {
                &st.repl_id2
            };
            line!("master_replid2:{replid2}");
            line!("master_repl_offset:{}", st.replicas.offset);
            line!("second_repl_offset:{}", st.second_repl_offset);
            let backlog = st.replicas.backlog.as_ref();
            line!("repl_backlog_active:{}", u8::from(backlog.is_some()));
            line!("repl_backlog_size:{}", st.params.int("repl-backlog-size").unwrap_or(1 << 20));
            line!("repl_backlog_first_byte_offset:{}", backlog.map_or(0, |b| b.first_byte_offset()));
            line!("repl_backlog_histlen:{}", backlog.map_or(0, |b| b.histlen()));
            #[cfg(feature = "raft")]
            st.raft_info(out);
        }
        "cpu" => {
            let (user, sys) = crate::memory::cpu_times();
            line!("# CPU");
            line!("used_cpu_sys:{:.6}", sys);
            line!("used_cpu_user:{:.6}", user);
        }
        "modules" => {
            line!("# Modules");
        }
        "errorstats" => {
            line!("# Errorstats");
            for (prefix, count) in &st.stats.errors {
                line!("errorstat_{}:count={}", prefix, count);
            }
        }
        "cluster" => {
            line!("# Cluster");
            line!("cluster_enabled:{}", u8::from(st.cluster_enabled()));
        }
        "keyspace" => {
            line!("# Keyspace");
            for (i, db) in st.dbs.iter().enumerate() {
                if !db.is_empty() {
                    line!("db{}:keys={},expires={},avg_ttl=0", i, db.len(), db.expires_len());
                }
            }
        }
        "commandstats" => {
            line!("# Commandstats");
            for (i, (_, name)) in Registry::get().all.iter().enumerate() {
                let c = &st.stats.cmd[i];
                if c.calls == 0 && c.rejected_calls == 0 && c.failed_calls == 0 {
                    continue;
                }
                let usec = crate::clock::ticks::to_us(c.ticks);
                let per = if c.calls > 0 { usec as f64 / c.calls as f64 } else { 0.0 };
                line!(
                    "cmdstat_{}:calls={},usec={},usec_per_call={:.2},rejected_calls={},failed_calls={}",
                    name,
                    c.calls,
                    usec,
                    per,
                    c.rejected_calls,
                    c.failed_calls
                );
            }
        }
        "latencystats" => {
            line!("# Latencystats");
            if st.runtime.latency_tracking {
                let percentiles: Vec<f64> = st
                    .params
                    .value("latency-tracking-info-percentiles")
                    .unwrap_or("")
                    .split_whitespace()
                    .filter_map(|w| w.parse().ok())
                    .collect();
                for (i, (_, name)) in Registry::get().all.iter().enumerate() {
                    let Some(h) = &st.stats.cmd[i].latency else { continue };
                    let shown: Vec<String> = percentiles
                        .iter()
                        .map(|&p| format!("p{}={:.3}", percentile_name(p), h.value_at_percentile(p) as f64 / 1000.0))
                        .collect();
                    line!("latency_percentiles_usec_{}:{}", name, shown.join(","));
                }
            }
        }
        "keylock" => {
            // keylock's own section: recognized Redisson scripts and how
            // they ran (natively, or in the Lua VM), listed once they ran.
            let table = crate::scripting::native::NativeTable::get();
            let runs = &st.stats.recognized;
            line!("# Keylock");
            line!("native_scripts:{}", if st.runtime.native_scripts { "yes" } else { "no" });
            line!("command_panics:{}", st.command_panics);
            line!("aof_syncs:{}", st.durability.syncs());
            line!("recognized_scripts:{}", table.scripts.len());
            line!(
                "native_implementations:{}",
                table.scripts.iter().filter(|s| s.native.is_some()).count()
            );
            line!("recognized_runs_native:{}", runs.iter().map(|r| r.native).sum::<u64>());
            line!("recognized_runs_lua:{}", runs.iter().map(|r| r.lua).sum::<u64>());
            for (script, r) in table.scripts.iter().zip(runs) {
                if r.native + r.lua > 0 {
                    line!("script_{}:native={},lua={}", script.name, r.native, r.lua);
                }
            }
        }
        _ => {}
    }
}

/// Redis's `bytesToHuman`.
pub fn human_bytes(n: u64) -> String {
    let n = n as f64;
    if n < 1024.0 {
        format!("{}B", n as u64)
    } else if n < 1024.0 * 1024.0 {
        format!("{:.2}K", n / 1024.0)
    } else if n < 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2}M", n / (1024.0 * 1024.0))
    } else {
        format!("{:.2}G", n / (1024.0 * 1024.0 * 1024.0))
    }
}

/// A percentile as Redis names it in INFO latencystats: `%f`, then
/// `trimDoubleString` (no trailing zeros, no bare point).
fn percentile_name(p: f64) -> String {
    let mut text = format!("{p:.6}");
    if text.contains('.') {
        while text.ends_with('0') {
            text.pop();
        }
        if text.ends_with('.') {
            text.pop();
        }
    }
    text
}
