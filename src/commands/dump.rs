//! DUMP and RESTORE (and RESTORE-ASKING, RESTORE under its cluster name):
//! a key's value as Redis 7.0's serialized form, and back.
//!
//! The serialization is [`crate::rdb`]'s; this module only reads the
//! parameters that shape it and applies RESTORE's options in Redis's
//! order (`restoreCommand` in `src/cluster.c`): options, then BUSYKEY, then
//! the TTL, then the payload's footer, then its contents.

use bytes::Bytes;

use super::args::{parse_i64, upper};
use super::table::{CommandSpec, cmd, flag::*};
use super::{Args, CmdError, CmdResult, Ctx, Reply};
use crate::db::NOTIFY_GENERIC;
use crate::db::zset::ListpackLimits;
use crate::rdb::{self, DecodeOptions, EncodeOptions, RestoreError};

pub const COMMANDS: &[CommandSpec] = &[
    cmd("dump", 2, dump).flags(READONLY),
    cmd("restore", -4, restore).flags(WRITE | DENYOOM),
    cmd("restore-asking", -4, restore).flags(WRITE | DENYOOM | ASKING),
];

fn param_usize(ctx: &Ctx, name: &str, default: usize) -> usize {
    ctx.state
        .params
        .int(name)
        .map_or(default, |v| usize::try_from(v).unwrap_or(usize::MAX))
}

pub(super) fn encode_options(ctx: &Ctx) -> EncodeOptions {
    let d = EncodeOptions::default();
    EncodeOptions {
        compression: ctx.state.params.value("rdbcompression") != Some("no"),
        list_max_listpack_size: ctx.state.params.int("list-max-listpack-size").unwrap_or(d.list_max_listpack_size),
        set_max_intset_entries: param_usize(ctx, "set-max-intset-entries", d.set_max_intset_entries),
        key_save_delay: 0,
    }
}

fn decode_options(ctx: &Ctx) -> DecodeOptions {
    let d = DecodeOptions::default();
    DecodeOptions {
        zset_limits: ListpackLimits {
            max_entries: param_usize(ctx, "zset-max-listpack-entries", d.zset_limits.max_entries),
            max_value: param_usize(ctx, "zset-max-listpack-value", d.zset_limits.max_value),
        },
        hash_limits: ctx.state.runtime.hash_limits,
        max_string: param_usize(ctx, "proto-max-bulk-len", d.max_string),
        set_max_intset_entries: ctx.state.runtime.set_max_intset_entries,
    }
}

/// DUMP key: a counted read that marks the key accessed
/// (`lookupKeyRead`); nil for a missing key.
fn dump(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let options = encode_options(ctx);
    let Some(value) = ctx.read(&argv[1]) else {
        return Ok(Reply::Nil);
    };
    let payload = rdb::dump(value, &options);
    Ok(Reply::Bulk(Bytes::from(payload)))
}

/// The idle time OBJECT IDLETIME shows after RESTORE … IDLETIME `idle`:
/// Redis stores `now - idle` in its 24-bit LRU clock (`objectSetLRUOrLFU`)
/// and reads it back with `estimateObjectIdleTime`, so very long idle
/// times wrap as they do there.
fn restored_idle_secs(now_ms: u64, idle: i64) -> u32 {
    const LRU_CLOCK_MAX: i64 = (1 << 24) - 1;
    let clock = ((now_ms / 1000) as i64) & LRU_CLOCK_MAX;
    let mut lru = clock.wrapping_sub(idle);
    if lru < 0 {
        lru = lru.wrapping_add(LRU_CLOCK_MAX);
    }
    let lru = lru & LRU_CLOCK_MAX;
    let shown = if clock >= lru { clock - lru } else { clock + (LRU_CLOCK_MAX - lru) };
    shown as u32
}

/// RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds]
/// [FREQ frequency].
fn restore(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    // Args::new starts after its first element: the options follow the
    // serialized value, argv[3].
    let mut args = Args::new(&argv[3..]);
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq): (Option<i64>, Option<i64>) = (None, None);
    while let Some(opt) = args.next() {
        let has_value = args.remaining() >= 1;
        match upper(opt).as_str() {
            "REPLACE" => replace = true,
            "ABSTTL" => absttl = true,
            "IDLETIME" if has_value && freq.is_none() => {
                let v = parse_i64(args.req()?)?;
                if v < 0 {
                    return Err(CmdError::err("Invalid IDLETIME value, must be >= 0"));
                }
                idle = Some(v);
            }
            "FREQ" if has_value && idle.is_none() => {
                let v = parse_i64(args.req()?)?;
                if !(0..=255).contains(&v) {
                    return Err(CmdError::err("Invalid FREQ value, must be >= 0 and <= 255"));
                }
                freq = Some(v);
            }
            _ => return Err(CmdError::syntax()),
        }
    }
    let key = &argv[1];
    let now = ctx.now_ms;
    if !replace && ctx.db().contains(key, now) {
        return Err(CmdError::busy_key());
    }
    let mut ttl = parse_i64(&argv[2])?;
    if ttl < 0 {
        return Err(CmdError::err("Invalid TTL value, must be >= 0"));
    }
    let options = decode_options(ctx);
    let verify = !ctx.state.debug.skip_checksum_validation;
    let value = rdb::restore(&argv[3], &options, verify).map_err(|e| match e {
        RestoreError::VersionOrChecksum => CmdError::dump_payload_footer(),
        RestoreError::BadFormat => CmdError::bad_data_format(),
    })?;
    if ttl != 0 && !absttl {
        ttl = ttl.wrapping_add(now as i64);
    }
    let expired = ttl != 0 && ctx.already_expired(ttl);
    let db = ctx.db();
    let deleted = replace && db.remove(key).is_some();
    if expired {
        if deleted {
            db.notify(NOTIFY_GENERIC, "del", key);
            // Replayed as what it did: the key is gone.
            ctx.propagate_as_words(&[b"DEL", key]);
        }
        return Ok(Reply::OK);
    }
    let lfu = ctx.state.runtime.maxmemory_policy.is_lfu();
    let db = ctx.db();
    let position = db.insert_absent(key, value);
    if ttl != 0 {
        db.set_expire_at_position(position, key, ttl as u64);
    }
    // Redis's `objectSetLRUOrLFU`: FREQ under an LFU policy, IDLETIME
    // under any other.
    match (lfu, freq, idle) {
        (true, Some(freq), _) => db.set_lfu_freq_at(position, freq as u32),
        (false, _, Some(idle)) => db.set_idle_secs_at(position, restored_idle_secs(now, idle)),
        _ => {}
    }
    db.notify(NOTIFY_GENERIC, "restore", key);
    if ttl != 0 && !absttl && ctx.propagating() {
        // Replayed with its deadline: the TTL made absolute, ABSTTL added.
        let mut effect = argv.to_vec();
        effect[2] = Bytes::copy_from_slice(itoa::Buffer::new().format(ttl).as_bytes());
        effect.push(Bytes::from_static(b"ABSTTL"));
        ctx.propagate_as(effect);
    }
    Ok(Reply::OK)
}

#[cfg(test)]
mod tests {
    use super::restored_idle_secs;

    #[test]
    fn idle_times_read_back_as_given_while_they_fit_the_lru_clock() {
        let now_ms = 1_700_000_000_000;
        assert_eq!(restored_idle_secs(now_ms, 0), 0);
        assert_eq!(restored_idle_secs(now_ms, 1000), 1000);
    }
}
