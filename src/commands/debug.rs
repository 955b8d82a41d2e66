//! DEBUG: the subcommands of Redis 7.0.15's `debugCommand` that mean
//! something for a memory-only server, with Redis's replies and errors.
//!
//! DEBUG is protected by `enable-debug-command` (the check is the
//! engine's, `engine::exec::for_client`). DIGEST and DIGEST-VALUE compute
//! Redis's own SHA1 mix (`xorDigest` / `mixDigest`), so a dataset digests
//! to the same 40 hex digits in keylock and in redis-server. OBJECT's
//! `serializedlength` is the length of the value's RDB encoding
//! (`rdb::encode`), its list fields describe the quicklist Redis would
//! hold.
//!
//! RELOAD round-trips the dataset through the snapshot file, as Redis's
//! does, and LOADAOF through the append-only file. What keylock does not
//! do on request, it says so with an error rather than a fake OK: SEGFAULT, PANIC, ASSERT and OOM (which crash Redis
//! on purpose) do not crash keylock. LISTPACK and QUICKLIST log a short description where
//! Redis prints its structures.

use bytes::Bytes;
use sha1_smol::Sha1;

use super::table::{CommandSpec, cmd, flag::*};
use super::{CmdError, CmdResult, Ctx, Reply};
use crate::db::Value;
use crate::memory::allocation_size;
use crate::numfmt::{atoi, parse_i64};

pub const COMMANDS: &[CommandSpec] = &[cmd("debug", -2, debug).flags(ADMIN | NOSCRIPT | LOADING | STALE | PROTECTED)];

/// Redis's `LRU_CLOCK_MAX`: the access clock an object records is 24 bits.
const LRU_CLOCK_MAX: u64 = (1 << 24) - 1;

fn debug(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let sub = argv[1].to_ascii_lowercase();
    let argc = argv.len();
    match (sub.as_slice(), argc) {
        (b"help", 2) => Ok(help()),
        (b"segfault" | b"panic" | b"assert" | b"oom", _) => Err(CmdError::err(format!(
            "DEBUG {} would crash the server: keylock does not crash on request",
            String::from_utf8_lossy(&sub).to_ascii_uppercase()
        ))),
        (b"restart" | b"crash-and-recover", _) => Err(CmdError::err("failed to restart the server. Check server logs.")),
        (b"log", 3) => {
            crate::log::warning(format_args!("DEBUG LOG: {}", String::from_utf8_lossy(&argv[2])));
            Ok(Reply::OK)
        }
        (b"leak", 3) => Ok(Reply::OK),
        (b"config-rewrite-force-all", 2) => match super::server::rewrite_config_file(ctx, true) {
            Ok(()) => Ok(Reply::OK),
            Err(None) => Err(CmdError::err("The server is running without a config file")),
            Err(Some(e)) => Err(CmdError::err(format!(
                "CONFIG-REWRITE-FORCE-ALL failed: {}",
                crate::error::os_error_text(&e)
            ))),
        },
        // A dataset is loading already (at start, or a master's snapshot):
        // another load would end the first's state.
        (b"reload" | b"loadaof", _) if ctx.state.loading.is_some() => Err(CmdError::new(crate::engine::exec::LOADING)),
        (b"reload", _) => reload(ctx, argv),
        (b"loadaof", _) => {
            ctx.prevent_propagation();
            let scripts = crate::engine::Scripts::lent(&mut ctx.scripts)?;
            crate::engine::aof::debug_loadaof(ctx.state, scripts).map_err(|e| {
                crate::log::warning(format_args!("{e}"));
                CmdError::err("Error loading the append only file, check server logs.")
            })?;
            // Redis's `server.dirty = 0`: what was loaded is no change.
            ctx.state.dirty_at_save = ctx.state.dirty;
            ctx.dirty(0);
            Ok(Reply::OK)
        }
        (b"drop-cluster-packet-filter", 3) => {
            let kind = parse_i64(&argv[2]).ok_or_else(CmdError::not_integer)?;
            if let Some(c) = ctx.state.cluster.as_deref_mut() {
                c.drop_packet_filter = kind;
            }
            Ok(Reply::OK)
        }
        (b"object", 3) => object(ctx, &argv[2]),
        (b"htstats", 3) => htstats(ctx, &argv[2]),
        (b"htstats-key", 3) => htstats_key(ctx, &argv[2]),
        (b"sdslen", 3) => sdslen(ctx, &argv[2]),
        (b"structsize", 2) => Ok(Reply::Bulk(Bytes::from_static(STRUCT_SIZES.as_bytes()))),
        (b"listpack", 3) => described(ctx, &argv[2], "listpack", "Not a listpack encoded object.", "Listpack"),
        (b"quicklist", 3 | 4) => described(ctx, &argv[2], "quicklist", "Not a quicklist encoded object.", "Quicklist"),
        (b"populate", 3..=5) => populate(ctx, argv),
        (b"digest", 2) => Ok(Reply::Status(hex(&dataset_digest(ctx)))),
        (b"digest-value", _) => Ok(digest_values(ctx, &argv[2..])),
        (b"protocol", 3) => protocol(ctx, &argv[2]),
        (b"sleep", 3) => {
            let seconds = strtod(&argv[2]);
            let micros = (seconds * 1_000_000.0) as i64;
            if micros > 0 {
                std::thread::sleep(std::time::Duration::from_micros(micros as u64));
            }
            Ok(Reply::OK)
        }
        (b"clusterlink", 5) if argv[2].eq_ignore_ascii_case(b"kill") => clusterlink_kill(ctx, argv),
        (b"set-active-expire", 3) => {
            ctx.state.debug.active_expire = atoi(&argv[2]) != 0;
            Ok(Reply::OK)
        }
        (b"quicklist-packed-threshold", 3) => match crate::config_params::memtoull(&String::from_utf8_lossy(&argv[2])) {
            Some(size) if size <= (1 << 32) - (1 << 20) => Ok(Reply::OK),
            _ => Err(CmdError::err("argument must be a memory value bigger than 1 and smaller than 4gb")),
        },
        (b"set-skip-checksum-validation", 3) => {
            ctx.state.debug.skip_checksum_validation = atoi(&argv[2]) != 0;
            Ok(Reply::OK)
        }
        (b"aof-flush-sleep", 3) => Ok(Reply::OK),
        (b"set-disable-deny-scripts", 3) => {
            // Scripts may then run what is flagged `noscript` (Redis's
            // `script_disable_deny_script`, for its tests).
            ctx.state.debug.allow_noscript = atoi(&argv[2]) != 0;
            Ok(Reply::OK)
        }
        (b"replicate", 3..) => {
            // The words go to the replicas as a command of the stream
            // (Redis's `alsoPropagate` with PROPAGATE_REPL), whatever they
            // are: a test of how replicas take a command they refuse. No
            // SELECT comes before them: they go in the database the stream
            // is in.
            let state = &ctx.state;
            let selected = state.replicas.tap.and_then(|tap| state.effects.selected(tap));
            let db = selected.unwrap_or(ctx.client.db);
            ctx.state.effects.push(db, &argv[2..], crate::engine::effects::REPL);
            Ok(Reply::OK)
        }
        (b"error", 3) => {
            let text: Vec<u8> = argv[2].iter().map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }).collect();
            Ok(Reply::Error(Bytes::from(text)))
        }
        (b"change-repl-id", 2) => {
            crate::log::warning(format_args!("Changing replication IDs after receiving DEBUG change-repl-id"));
            ctx.state.repl_id = crate::engine::new_run_id();
            Ok(Reply::OK)
        }
        (b"stringmatch-test", 2) => {
            stringmatch_fuzz();
            Ok(Reply::status("Apparently Redis did not crash: test passed"))
        }
        (b"pause-cron", 3) => {
            ctx.state.debug.pause_cron = atoi(&argv[2]) != 0;
            Ok(Reply::OK)
        }
        (b"replybuffer", 4) => replybuffer(ctx, argv),
        _ => Err(CmdError::subcommand_syntax(&argv[1], "debug")),
    }
}

/// Redis's `dictGetStats` text for a table of `len` entries. keylock's
/// tables are open-addressed (no chains: every entry has a slot of its
/// own); the table size shown is the one Redis's dict would have for
/// that many entries (the next power of two, 4 at least, as its
/// expansion rule gives).
fn table_stats(len: usize) -> String {
    if len == 0 {
        return "Hash table 0 stats (main hash table):\nNo stats available for empty dictionaries\n".to_string();
    }
    let size = len.max(4).next_power_of_two();
    let percent = |n: usize| n as f64 / size as f64 * 100.0;
    let mut text = format!(
        "Hash table 0 stats (main hash table):\n table size: {size}\n number of elements: {len}\n different slots: {len}\n max chain length: 1\n avg chain length (counted): 1.00\n avg chain length (computed): 1.00\n Chain length distribution:\n"
    );
    if size > len {
        text.push_str(&format!("   0: {} ({:.2}%)\n", size - len, percent(size - len)));
    }
    text.push_str(&format!("   1: {len} ({:.2}%)\n", percent(len)));
    text
}

/// DEBUG HTSTATS <dbid>: the key and expiry tables of a database.
fn htstats(ctx: &mut Ctx, dbid: &[u8]) -> CmdResult {
    let dbid = crate::numfmt::parse_i64(dbid).ok_or_else(CmdError::not_integer)?;
    let db = usize::try_from(dbid)
        .ok()
        .and_then(|d| ctx.state.dbs.get(d))
        .ok_or_else(|| CmdError::err("Out of range database"))?;
    let text = format!(
        "[Dictionary HT]\n{}[Expires HT]\n{}",
        table_stats(db.len()),
        table_stats(db.expires_len())
    );
    Ok(Reply::verbatim_txt(text))
}

/// DEBUG HTSTATS-KEY <key>: the table of a hash, set or sorted set Redis
/// would hold as a hash table.
fn htstats_key(ctx: &mut Ctx, key: &[u8]) -> CmdResult {
    let db = ctx.db();
    let Some(position) = db.stored_position(key) else {
        return Err(CmdError::no_such_key());
    };
    let value = db.value_at(position);
    let len = match (value, super::keys::encoding_name(value, false)) {
        (Value::Hash(h), "hashtable") => h.len(),
        (Value::Set(s), "hashtable") => s.len(),
        (Value::ZSet(z), "skiplist") => z.len(),
        _ => {
            return Err(CmdError::err(
                "The value stored at the specified key is not represented using an hash table",
            ));
        }
    };
    Ok(Reply::verbatim_txt(table_stats(len)))
}

/// DEBUG SDSLEN <key>: a string's key and value lengths, with the room
/// and allocation Redis would give them (its sds headers, embstr objects
/// and jemalloc's size classes).
fn sdslen(ctx: &mut Ctx, key: &[u8]) -> CmdResult {
    let db = ctx.db();
    let Some(position) = db.stored_position(key) else {
        return Err(CmdError::no_such_key());
    };
    let raw = db.is_raw_at(position);
    let value = db.value_at(position);
    let Value::Str(s) = value else {
        return Err(CmdError::err("Not an sds encoded string."));
    };
    let allocation = |len: usize| allocation_size(sds_header(len) + len + 1);
    // An embstr lives in its object's allocation, with no room to spare;
    // a raw string has the rest of its allocation free.
    const ROBJ: usize = 16;
    let (value_avail, value_alloc) = match super::keys::encoding_name(value, raw) {
        "int" => return Err(CmdError::err("Not an sds encoded string.")),
        "embstr" => (0, allocation_size(ROBJ + sds_header(s.len()) + s.len() + 1) - ROBJ),
        // Grown in place (APPEND, SETRANGE…): sdsMakeRoomFor's greedy
        // growth, to twice the length (1 MB more past 1 MB).
        _ if raw => {
            const GREEDY_MAX: usize = 1024 * 1024;
            let room = if s.len() < GREEDY_MAX { 2 * s.len() } else { s.len() + GREEDY_MAX };
            let alloc = allocation(room);
            (alloc - sds_header(room) - s.len() - 1, alloc)
        }
        // Stored from an argument: its allocation's room, trimmed away
        // when over a tenth of the length (trimStringObjectIfNeeded).
        _ => {
            let alloc = allocation(s.len());
            let avail = alloc - sds_header(s.len()) - s.len() - 1;
            (if avail > s.len() / 10 { 0 } else { avail }, alloc)
        }
    };
    Ok(Reply::Status(Bytes::from(format!(
        "key_sds_len:{}, key_sds_avail:0, key_zmalloc: {}, val_sds_len:{}, val_sds_avail:{value_avail}, val_zmalloc: {value_alloc}",
        key.len(),
        allocation(key.len()),
        s.len(),
    ))))
}

/// The size of the sds header Redis gives a string of `len` bytes
/// (`sdsReqType`: sdshdr8 below 256 bytes, then 16, 32 and 64 bits).
fn sds_header(len: usize) -> usize {
    match len {
        0..256 => 3,
        256..65536 => 5,
        _ if len as u64 <= u64::from(u32::MAX) => 9,
        _ => 17,
    }
}

/// DEBUG STRUCTSIZE: the sizes of Redis's structures on a 64-bit build.
const STRUCT_SIZES: &str = "bits:64 robj:16 dictentry:24 sdshdr5:1 sdshdr8:3 sdshdr16:5 sdshdr32:9 sdshdr64:17 ";

/// Redis's `stringmatchlen_fuzz_test`: ten million random patterns
/// matched against random strings (ASCII, up to 31 bytes), which must not
/// crash; the matches are counted so the work is not optimised away.
fn stringmatch_fuzz() {
    let mut rng = fastrand::Rng::new();
    let mut random = |buf: &mut [u8; 32]| {
        let len = rng.usize(0..32);
        buf[..len].iter_mut().for_each(|b| *b = rng.u8(0..128));
        len
    };
    let (mut string, mut pattern) = ([0u8; 32], [0u8; 32]);
    let mut total = 0usize;
    for _ in 0..10_000_000 {
        let string_len = random(&mut string);
        let pattern_len = random(&mut pattern);
        total += crate::glob::matches(&pattern[..pattern_len], &string[..string_len], false) as usize;
    }
    crate::log::verbose(format_args!("DEBUG STRINGMATCH-TEST: {total} matches"));
}

/// C's `strtod` without its end pointer: the longest number at the start,
/// 0 when there is none.
fn strtod(s: &[u8]) -> f64 {
    let text = String::from_utf8_lossy(s);
    let t = text.trim_start();
    (1..=t.len())
        .rev()
        .filter(|&end| t.is_char_boundary(end))
        .find_map(|end| t[..end].parse::<f64>().ok())
        .unwrap_or(0.0)
}

/// DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE]: the snapshot saved (unless
/// NOSAVE), the dataset and functions emptied (unless NOFLUSH), and the
/// snapshot loaded back (MERGE: a library it holds replaces one loaded).
fn reload(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let has = |name: &str| argv[2..].iter().any(|o| o.eq_ignore_ascii_case(name.as_bytes()));
    let known = |o: &Bytes| ["merge", "noflush", "nosave"].iter().any(|k| o.eq_ignore_ascii_case(k.as_bytes()));
    if !argv[2..].iter().all(known) {
        return Err(CmdError::err("DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options."));
    }
    let scripts = crate::engine::Scripts::lent(&mut ctx.scripts)?;
    if !has("nosave") {
        ctx.state.save(&scripts.library_codes()).map_err(|_| CmdError::new("ERR"))?;
    }
    if !has("noflush") {
        for db in &mut ctx.state.dbs {
            db.clear();
        }
        let limit = ctx.state.runtime.lua_memory_limit;
        scripts.reset_functions(limit)?;
    }
    // As Redis's load: the libraries first (with NOFLUSH, one already
    // loaded stops it unless MERGE), then the keys.
    let failed = |e: String| {
        crate::log::warning(format_args!("Failed loading the RDB: {e}"));
        CmdError::err("Error trying to load the RDB dump")
    };
    let loaded = ctx.state.read_snapshot().map_err(failed)?;
    scripts.merge_libraries(&loaded.libraries, has("merge")).map_err(failed)?;
    ctx.state.install(loaded);
    crate::log::warning(format_args!("DB reloaded by DEBUG RELOAD"));
    Ok(Reply::OK)
}

/// DEBUG REPLYBUFFER PEAK-RESET-TIME <never|reset|ms> and RESIZING <0|1>:
/// how the cron sizes clients' reply buffers (`output::ReplyBuffer`).
fn replybuffer(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let debug = &mut ctx.state.debug;
    if argv[2].eq_ignore_ascii_case(b"peak-reset-time") {
        debug.reply_buffer_peak_reset_ms = if argv[3].eq_ignore_ascii_case(b"never") {
            None
        } else if argv[3].eq_ignore_ascii_case(b"reset") {
            Some(crate::engine::output::REPLY_BUFFER_PEAK_RESET_MS)
        } else {
            // Redis's `reply_buffer_peak_reset_time >= 0` test: a
            // negative time means never.
            let ms = parse_i64(&argv[3]).ok_or_else(CmdError::not_integer)?;
            u64::try_from(ms).ok()
        };
    } else if argv[2].eq_ignore_ascii_case(b"resizing") {
        // Redis's atoi: anything not starting with a non-zero number is 0.
        debug.reply_buffer_resizing = atoi(&argv[3]) != 0;
    } else {
        return Err(CmdError::subcommand_syntax(&argv[1], "debug"));
    }
    Ok(Reply::OK)
}

/// DEBUG OBJECT key: Redis's line about the value, found without lookup
/// effects (a key past its deadline is still shown, as Redis's `dictFind`).
fn object(ctx: &mut Ctx, key: &[u8]) -> CmdResult {
    let list_fill = ctx.state.params.int("list-max-listpack-size").unwrap_or(-2);
    let compressed = ctx.state.params.int("list-compress-depth").unwrap_or(0) != 0;
    let options = super::dump::encode_options(ctx);
    let now_secs = ctx.now_ms / 1000;
    let shareable = super::keys::shares_integers(ctx);
    let db = ctx.db();
    let Some(position) = db.stored_position(key) else {
        return Err(CmdError::no_such_key());
    };
    let idle = db.idle_secs_at(position);
    let raw = db.is_raw_at(position);
    let value = db.value_at(position);
    // The DUMP payload less its type byte and its footer (version, CRC):
    // Redis's `rdbSavedObjectLen`.
    // The object's encoding alone: without the type byte and the footer.
    let serialized = crate::rdb::dump(value, &options).len() - 11;
    let mut extra = String::new();
    if let Value::List(l) = value {
        let (nodes, bytes) = crate::rdb::encode::quicklist_shape(l, list_fill);
        let avg = l.len() as f64 / nodes as f64;
        extra = format!(
            " ql_nodes:{nodes} ql_avg_node:{avg:.2} ql_listpack_max:{list_fill} ql_compressed:{} ql_uncompressed_size:{bytes}",
            compressed as u8
        );
    }
    let lru = now_secs.saturating_sub(idle) & LRU_CLOCK_MAX;
    Ok(Reply::Status(Bytes::from(format!(
        "Value at:{:p} refcount:{} encoding:{} serializedlength:{serialized} lru:{lru} lru_seconds_idle:{idle}{extra}",
        value as *const Value,
        if raw { 1 } else { super::keys::refcount(value, shareable) },
        super::keys::encoding_name(value, raw),
    ))))
}

/// DEBUG LISTPACK / QUICKLIST key: Redis prints the structure on its
/// standard output; keylock logs a line about it.
fn described(ctx: &mut Ctx, key: &[u8], encoding: &str, mismatch: &'static str, name: &str) -> CmdResult {
    let now = ctx.now_ms;
    let Some(value) = ctx.db().get_no_touch(key, now) else {
        return Err(CmdError::no_such_key());
    };
    if super::keys::encoding_name(value, false) != encoding {
        return Err(CmdError::err(mismatch));
    }
    crate::log::notice(format_args!(
        "DEBUG {}: {} of {} elements at key '{}'",
        encoding.to_ascii_uppercase(),
        encoding,
        element_count(value),
        String::from_utf8_lossy(key)
    ));
    Ok(Reply::Status(Bytes::from(format!("{name} structure printed on stdout"))))
}

fn element_count(value: &Value) -> usize {
    match value {
        Value::Str(s) => s.len(),
        Value::Hash(h) => h.len(),
        Value::List(l) => l.len(),
        Value::Set(s) => s.len(),
        Value::ZSet(z) => z.len(),
        Value::Stream(s) => s.len(),
    }
}

/// DEBUG POPULATE count [prefix] [size]: keys `prefix:N` holding
/// `value:N` (cut or zero-padded to `size`), skipping keys that exist.
fn populate(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let positive = |arg: &Bytes| match parse_i64(arg) {
        Some(n) if n >= 0 => Ok(n as u64),
        _ => Err(CmdError::out_of_range_positive("value")),
    };
    let count = positive(&argv[2])?;
    let size = if argv.len() == 5 { positive(&argv[4])? as usize } else { 0 };
    let prefix: &[u8] = argv.get(3).map_or(b"key", |p| p);
    // Redis's DEBUG POPULATE adds its keys here only: replicas and the
    // append-only file are not told, and they count as no change.
    ctx.prevent_propagation();
    ctx.dirty(0);
    let now = ctx.now_ms;
    let db = ctx.db();
    for j in 0..count {
        let mut key = prefix.to_vec();
        key.extend_from_slice(format!(":{j}").as_bytes());
        if db.contains(&key, now) {
            continue;
        }
        let text = format!("value:{j}");
        let value = if size == 0 {
            Bytes::from(text)
        } else {
            let mut v = vec![0u8; size];
            let n = size.min(text.len());
            v[..n].copy_from_slice(&text.as_bytes()[..n]);
            Bytes::from(v)
        };
        db.insert_absent(&key, Value::Str(value));
    }
    Ok(Reply::OK)
}

fn hex(digest: &[u8; 20]) -> Bytes {
    Bytes::from(digest.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// Redis's `xorDigest`: XORs SHA1(data) into `digest` (order-free).
fn xor_digest(digest: &mut [u8; 20], data: &[u8]) {
    let hash = Sha1::from(data).digest().bytes();
    digest.iter_mut().zip(hash).for_each(|(d, h)| *d ^= h);
}

/// Redis's `mixDigest`: digest = SHA1(digest XOR SHA1(data)) (ordered).
fn mix_digest(digest: &mut [u8; 20], data: &[u8]) {
    xor_digest(digest, data);
    *digest = Sha1::from(&digest[..]).digest().bytes();
}

/// Redis's `xorObjectDigest`: the value's type and contents mixed into
/// `digest`, and whether it has a deadline.
fn object_digest(digest: &mut [u8; 20], value: &Value, has_deadline: bool) {
    let type_code: u32 = match value {
        Value::Str(_) => 0,
        Value::List(_) => 1,
        Value::Set(_) => 2,
        Value::ZSet(_) => 3,
        Value::Hash(_) => 4,
        Value::Stream(_) => 6,
    };
    mix_digest(digest, &type_code.to_be_bytes());
    match value {
        Value::Str(s) => mix_digest(digest, s),
        Value::List(l) => l.iter().for_each(|item| mix_digest(digest, item)),
        Value::Set(s) => s.iter().for_each(|m| xor_digest(digest, m)),
        Value::ZSet(z) => {
            for (member, score) in z.iter() {
                let mut element = [0u8; 20];
                mix_digest(&mut element, member);
                mix_digest(&mut element, crate::numfmt::printf_g17(score).as_bytes());
                xor_digest(digest, &element);
            }
        }
        Value::Hash(h) => {
            for (field, v) in h.iter() {
                let mut element = [0u8; 20];
                mix_digest(&mut element, field);
                mix_digest(&mut element, v);
                xor_digest(digest, &element);
            }
        }
        Value::Stream(s) => {
            let all = s.range(
                crate::db::stream::StreamId { ms: 0, seq: 0 },
                crate::db::stream::StreamId {
                    ms: u64::MAX,
                    seq: u64::MAX,
                },
                false,
            );
            for (id, fields) in all {
                mix_digest(digest, format!("{}.{}", id.ms, id.seq).as_bytes());
                fields.iter().for_each(|f| mix_digest(digest, f));
            }
        }
    }
    if has_deadline {
        xor_digest(digest, b"!!expire!!");
    }
}

/// Redis's `computeDatasetDigest`: every database with keys mixes its
/// index in, then each key-value digest is XORed in (order-free).
fn dataset_digest(ctx: &Ctx) -> [u8; 20] {
    let mut total = [0u8; 20];
    for (index, db) in ctx.state.dbs.iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        mix_digest(&mut total, &(index as u32).to_be_bytes());
        for (key, value, deadline) in db.entries() {
            let mut digest = [0u8; 20];
            mix_digest(&mut digest, key);
            object_digest(&mut digest, value, deadline.is_some());
            xor_digest(&mut total, &digest);
        }
    }
    total
}

/// DEBUG DIGEST-VALUE key…: each value's digest, zeros for a missing key
/// (keys past their deadline count, as Redis's `dictFind` finds them).
fn digest_values(ctx: &mut Ctx, keys: &[Bytes]) -> Reply {
    let db = ctx.db();
    Reply::Array(
        keys.iter()
            .map(|key| {
                let mut digest = [0u8; 20];
                if let Some(value) = db.stored(key) {
                    object_digest(&mut digest, value, db.expire_at(key).is_some());
                }
                Reply::Status(hex(&digest))
            })
            .collect(),
    )
}

/// DEBUG PROTOCOL type: a sample of each reply type, in the client's
/// protocol.
fn protocol(ctx: &mut Ctx, name: &[u8]) -> CmdResult {
    let resp3 = ctx.client.resp >= 3;
    let ints = || (0..3).map(Reply::Int).collect::<Vec<_>>();
    Ok(match name.to_ascii_lowercase().as_slice() {
        b"string" => Reply::bulk_static("Hello World"),
        b"integer" => Reply::Int(12345),
        // Redis's sample double, not an approximation of pi.
        #[allow(clippy::approx_constant)]
        b"double" => Reply::Double(3.141),
        b"bignum" => Reply::BigNumber(Bytes::from_static(b"1234567999999999999999999999999999999")),
        b"null" => Reply::Nil,
        b"array" => Reply::Array(ints()),
        b"set" => Reply::Set(ints()),
        b"map" => Reply::Map((0..3).map(|j| (Reply::Int(j), Reply::Bool(j == 1))).collect()),
        b"attrib" => {
            let real = Reply::bulk_static("Some real reply following the attribute");
            if resp3 {
                // An attribute precedes the reply it annotates: a map type
                // of its own (`|`), which no other reply uses.
                let attribute = Bytes::from_static(b"|1\r\n$14\r\nkey-popularity\r\n*2\r\n$7\r\nkey:123\r\n:90\r\n");
                Reply::Many(vec![Reply::Raw(attribute), real])
            } else {
                real
            }
        }
        b"push" => {
            if !resp3 {
                return Err(CmdError::err("RESP2 is not supported by this command"));
            }
            Reply::Many(vec![
                Reply::Push(vec![Reply::bulk_static("server-cpu-usage"), Reply::Int(42)]),
                Reply::bulk_static("Some real reply following the push reply"),
            ])
        }
        b"true" => Reply::Bool(true),
        b"false" => Reply::Bool(false),
        b"verbatim" => Reply::Verbatim(*b"txt", Bytes::from_static(b"This is a verbatim\nstring")),
        _ => {
            return Err(CmdError::err(
                "Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
            ));
        }
    })
}

fn help() -> Reply {
    super::server::help_reply(
        "DEBUG",
        &[
            "AOF-FLUSH-SLEEP <microsec>",
            "    Server will sleep before flushing the AOF, this is used for testing.",
            "ASSERT",
            "    Crash by assertion failed.",
            "CHANGE-REPL-ID",
            "    Change the replication IDs of the instance.",
            "    Dangerous: should be used only for testing the replication subsystem.",
            "CONFIG-REWRITE-FORCE-ALL",
            "    Like CONFIG REWRITE but writes all configuration options, including",
            "    keywords not listed in original configuration file or default values.",
            "CRASH-AND-RECOVER [<milliseconds>]",
            "    Hard crash and restart after a <milliseconds> delay (default 0).",
            "DIGEST",
            "    Output a hex signature representing the current DB content.",
            "DIGEST-VALUE <key> [<key> ...]",
            "    Output a hex signature of the values of all the specified keys.",
            "ERROR <string>",
            "    Return a Redis protocol error with <string> as message. Useful for clients",
            "    unit tests to simulate Redis errors.",
            "LEAK <string>",
            "    Create a memory leak of the input string.",
            "LOG <message>",
            "    Write <message> to the server log.",
            "HTSTATS <dbid>",
            "    Return hash table statistics of the specified Redis database.",
            "HTSTATS-KEY <key>",
            "    Like HTSTATS but for the hash table stored at <key>'s value.",
            "LOADAOF",
            "    Flush the AOF buffers on disk and reload the AOF in memory.",
            "REPLICATE <string>",
            "    Replicates the provided string to replicas, allowing data divergence.",
            "OBJECT <key>",
            "    Show low level info about `key` and associated value.",
            "DROP-CLUSTER-PACKET-FILTER <packet-type>",
            "    Drop all packets that match the filtered type. Set to -1 allow all packets.",
            "OOM",
            "    Crash the server simulating an out-of-memory error.",
            "PANIC",
            "    Crash the server simulating a panic.",
            "POPULATE <count> [<prefix>] [<size>]",
            "    Create <count> string keys named key:<num>. If <prefix> is specified then",
            "    it is used instead of the 'key' prefix. These are not propagated to",
            "    replicas. Cluster slots are not respected so keys not belonging to the",
            "    current node can be created in cluster mode.",
            "PROTOCOL <type>",
            "    Reply with a test value of the specified type. <type> can be: string,",
            "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
            "    true, false.",
            "RELOAD [option ...]",
            "    Save the RDB on disk and reload it back to memory. Valid <option> values:",
            "    * MERGE: conflicting keys will be loaded from RDB.",
            "    * NOFLUSH: the existing database will not be removed before load, but",
            "      conflicting keys will generate an exception and kill the server.",
            "    * NOSAVE: the database will be loaded from an existing RDB file.",
            "    Examples:",
            "    * DEBUG RELOAD: verify that the server is able to persist, flush and reload",
            "      the database.",
            "    * DEBUG RELOAD NOSAVE: replace the current database with the contents of an",
            "      existing RDB file.",
            "    * DEBUG RELOAD NOSAVE NOFLUSH MERGE: add the contents of an existing RDB",
            "      file to the database.",
            "RESTART [<milliseconds>]",
            "    Graceful restart: save config, db, restart after a <milliseconds> delay (default 0).",
            "SDSLEN <key>",
            "    Show low level SDS string info representing `key` and value.",
            "SEGFAULT",
            "    Crash the server with sigsegv.",
            "SET-ACTIVE-EXPIRE <0|1>",
            "    Setting it to 0 disables expiring keys in background when they are not",
            "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
            "    default.",
            "QUICKLIST-PACKED-THRESHOLD <size>",
            "    Sets the threshold for elements to be inserted as plain vs packed nodes",
            "    Default value is 1GB, allows values up to 4GB. Setting to 0 restores to default.",
            "SET-SKIP-CHECKSUM-VALIDATION <0|1>",
            "    Enables or disables checksum checks for RDB files and RESTORE's payload.",
            "SLEEP <seconds>",
            "    Stop the server for <seconds>. Decimals allowed.",
            "STRINGMATCH-TEST",
            "    Run a fuzz tester against the stringmatchlen() function.",
            "STRUCTSIZE",
            "    Return the size of different Redis core C structures.",
            "LISTPACK <key>",
            "    Show low level info about the listpack encoding of <key>.",
            "QUICKLIST <key> [<0|1>]",
            "    Show low level info about the quicklist encoding of <key>.",
            "    The optional argument (0 by default) sets the level of detail",
            "CLIENT-EVICTION",
            "    Show low level client eviction pools info (maxmemory-clients).",
            "PAUSE-CRON <0|1>",
            "    Stop periodic cron job processing.",
            "REPLYBUFFER PEAK-RESET-TIME <NEVER||RESET|time>",
            "    Sets the time (in milliseconds) to wait between client reply buffer peak resets.",
            "    In case NEVER is provided the last observed peak will never be reset",
            "    In case RESET is provided the peak reset time will be restored to the default value",
            "REPLYBUFFER RESIZING <0|1>",
            "    Enable or disable the reply buffer resize cron job",
            "CLUSTERLINK KILL <to|from|all> <node-id>",
            "    Kills the link based on the direction to/from (both) with the provided node.",
        ],
    )
}

/// DEBUG CLUSTERLINK KILL to|from|all node-id: ends this node's bus links
/// with that node (they connect again), as Redis's `freeClusterLink`.
fn clusterlink_kill(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let Some(c) = ctx.state.cluster.as_deref_mut() else {
        return Err(CmdError::err("Debug option only available for cluster mode enabled setup!"));
    };
    let Some(index) = c.index_of(&argv[4]) else {
        return Err(CmdError::err_bytes(&[b"Unknown node ".as_slice(), &argv[4]].concat()));
    };
    let direction = argv[3].to_ascii_lowercase();
    let (to, from) = match direction.as_slice() {
        b"to" => (true, false),
        b"from" => (false, true),
        b"all" => (true, true),
        _ => return Err(CmdError::err_bytes(&[b"Unknown direction ".as_slice(), &argv[3]].concat())),
    };
    // This node has no link with itself.
    if index != 0 {
        c.kill_links(index, to, from);
    }
    Ok(Reply::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex_of(digest: [u8; 20]) -> String {
        String::from_utf8(hex(&digest).to_vec()).unwrap()
    }

    #[test]
    fn a_string_digests_as_in_redis() {
        // redis-server 7.0.15: SET s hello; DEBUG DIGEST-VALUE s.
        let mut digest = [0u8; 20];
        object_digest(&mut digest, &Value::Str(Bytes::from_static(b"hello")), false);
        assert_eq!(hex_of(digest), "36b23a1456b2dce2c3ed252c456761301dba8060");
    }

    #[test]
    fn a_sorted_set_digests_its_scores_as_g17() {
        // redis-server 7.0.15: ZADD z 1.5 a; DEBUG DIGEST-VALUE z.
        let mut z = crate::db::zset::ZSet::new_skiplist();
        z.insert(Bytes::from_static(b"a"), 1.5);
        let mut digest = [0u8; 20];
        object_digest(&mut digest, &Value::ZSet(Box::new(z)), false);
        assert_eq!(hex_of(digest), "4abede9eeefb1bae2bf5394291a39b9e34b5b2b6");
    }

    #[test]
    fn atoi_and_strtod_read_a_prefix_as_c_does() {
        assert_eq!(atoi(b" 12abc"), 12);
        assert_eq!(atoi(b"-3"), -3);
        assert_eq!(atoi(b"x"), 0);
        assert_eq!(strtod(b"0.25s"), 0.25);
        assert_eq!(strtod(b"abc"), 0.0);
    }
}
