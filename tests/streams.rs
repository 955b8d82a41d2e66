//! Streams over TCP: what the differential corpus cannot show. XREAD and
//! XREADGROUP with BLOCK served by another client's XADD (in blocking
//! order, `$` resolved when blocking, timeouts), group waiters told when
//! their group or key goes, WATCH, the generic commands on a stream, idle
//! times on the test clock, and random command sequences whose replies
//! and XINFO STREAM (node counts) must be redis-server's.
//! Each scenario runs against keylock and a real redis-server, and the
//! bytes every connection receives must be the same.

mod common;
use common::*;

use std::time::{Duration, Instant};

/// Long enough for a blocking command sent on one connection to be parked
/// before another connection acts, on a loaded machine.
const SETTLE: Duration = Duration::from_millis(100);

fn info_line(c: &mut Raw, section: &str, field: &str) -> Vec<u8> {
    c.call(&["INFO", section])
        .split(|&b| b == b'\n')
        .filter(|l| l.starts_with(field.as_bytes()))
        .flatten()
        .copied()
        .filter(|&b| b != b'\r')
        .collect()
}

#[test]
fn xadd_serves_blocked_xread_clients_in_the_order_they_blocked() {
    same_on_both_servers(|addr| {
        let mut out = Vec::new();
        let (mut a, mut b, mut writer) = (Raw::connect(addr), Raw::connect(addr), Raw::connect(addr));
        writer.call(&["FLUSHALL"]);
        writer.call(&["XADD", "s", "1-0", "old", "1"]);
        send_args(&mut a, &["XREAD", "BLOCK", "0", "STREAMS", "other", "s", "0", "$"]);
        std::thread::sleep(SETTLE);
        send_args(&mut b, &["XREAD", "COUNT", "1", "BLOCK", "0", "STREAMS", "s", "$"]);
        std::thread::sleep(SETTLE);
        assert!(silent_for(&mut a, SETTLE), "a blocked client answers nothing");
        out.push(info_line(&mut writer, "clients", "blocked_clients"));
        out.push(writer.call(&["XADD", "s", "2-0", "new", "2"]));
        out.push(a.reply());
        out.push(b.reply());
        out.push(info_line(&mut writer, "clients", "blocked_clients"));
        out
    });
}

#[test]
fn a_blocked_xread_sees_every_entry_a_transaction_added() {
    same_on_both_servers(|addr| {
        let mut out = Vec::new();
        let (mut a, mut writer) = (Raw::connect(addr), Raw::connect(addr));
        writer.call(&["FLUSHALL"]);
        send_args(&mut a, &["XREAD", "BLOCK", "0", "STREAMS", "s", "0"]);
        std::thread::sleep(SETTLE);
        writer.call(&["MULTI"]);
        writer.call(&["XADD", "s", "1-0", "a", "1"]);
        writer.call(&["XADD", "s", "2-0", "b", "2"]);
        out.push(writer.call(&["EXEC"]));
        out.push(a.reply());
        out
    });
}

#[test]
fn xread_block_times_out_with_a_null_array() {
    same_on_both_servers(|addr| {
        let mut a = Raw::connect(addr);
        a.call(&["FLUSHALL"]);
        let started = Instant::now();
        let reply = a.call(&["XREAD", "BLOCK", "150", "STREAMS", "s", "$"]);
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(140), "waited {waited:?}");
        assert!(waited < Duration::from_secs(3), "waited {waited:?}");
        vec![
            reply,
            a.call(&["HELLO", "3"]).split_at(1).0.to_vec(),
            a.call(&["XREAD", "BLOCK", "50", "STREAMS", "s", "$"]),
        ]
    });
}

#[test]
fn a_write_of_another_type_does_not_serve_a_blocked_xread() {
    same_on_both_servers(|addr| {
        let mut out = Vec::new();
        let (mut a, mut writer) = (Raw::connect(addr), Raw::connect(addr));
        writer.call(&["FLUSHALL"]);
        send_args(&mut a, &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
        std::thread::sleep(SETTLE);
        out.push(writer.call(&["LPUSH", "s", "x"]));
        assert!(silent_for(&mut a, SETTLE), "a list does not serve XREAD");
        out.push(writer.call(&["DEL", "s"]));
        out.push(writer.call(&["XADD", "s", "5-0", "f", "v"]));
        out.push(a.reply());
        out
    });
}

#[test]
fn xreadgroup_block_is_served_new_entries_and_records_them_pending() {
    same_on_both_servers(|addr| {
        let mut out = Vec::new();
        let (mut a, mut b, mut writer) = (Raw::connect(addr), Raw::connect(addr), Raw::connect(addr));
        writer.call(&["FLUSHALL"]);
        writer.call(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
        send_args(&mut a, &["XREADGROUP", "GROUP", "g", "alice", "BLOCK", "0", "STREAMS", "s", ">"]);
        std::thread::sleep(SETTLE);
        send_args(&mut b, &["XREADGROUP", "GROUP", "g", "bob", "BLOCK", "0", "STREAMS", "s", ">"]);
        std::thread::sleep(SETTLE);
        out.push(writer.call(&["XADD", "s", "1-0", "f", "1"]));
        out.push(a.reply());
        assert!(silent_for(&mut b, SETTLE), "the group's entry went to alice");
        out.push(writer.call(&["XADD", "s", "2-0", "f", "2"]));
        out.push(b.reply());
        out.push(writer.call(&["XPENDING", "s", "g"]));
        out.push(writer.call(&["XINFO", "GROUPS", "s"]));
        out
    });
}

#[test]
fn xreadgroup_waiters_are_told_when_their_group_is_destroyed() {
    same_on_both_servers(|addr| {
        let mut out = Vec::new();
        let (mut a, mut x, mut writer) = (Raw::connect(addr), Raw::connect(addr), Raw::connect(addr));
        writer.call(&["FLUSHALL"]);
        writer.call(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
        send_args(&mut a, &["XREADGROUP", "GROUP", "g", "alice", "BLOCK", "0", "STREAMS", "s", ">"]);
        send_args(&mut x, &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
        std::thread::sleep(SETTLE);
        out.push(writer.call(&["XGROUP", "DESTROY", "s", "g"]));
        out.push(a.reply());
        assert!(silent_for(&mut x, SETTLE), "XREAD waits on");
        out.push(info_line(&mut writer, "stats", "total_error_replies"));
        out.push(info_line(&mut writer, "clients", "blocked_clients"));
        out
    });
}

#[test]
fn xreadgroup_waiters_are_told_when_their_key_is_deleted_or_replaced() {
    same_on_both_servers(|addr| {
        let mut out = Vec::new();
        let (mut a, mut b, mut x, mut writer) = (Raw::connect(addr), Raw::connect(addr), Raw::connect(addr), Raw::connect(addr));
        writer.call(&["FLUSHALL"]);
        writer.call(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
        writer.call(&["XGROUP", "CREATE", "t", "g", "$", "MKSTREAM"]);
        send_args(&mut a, &["XREADGROUP", "GROUP", "g", "alice", "BLOCK", "0", "STREAMS", "s", ">"]);
        send_args(&mut b, &["XREADGROUP", "GROUP", "g", "bob", "BLOCK", "0", "STREAMS", "t", ">"]);
        send_args(&mut x, &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
        std::thread::sleep(SETTLE);
        out.push(writer.call(&["DEL", "s"]));
        out.push(a.reply());
        assert!(silent_for(&mut x, SETTLE), "XREAD waits on");
        out.push(writer.call(&["SET", "t", "string"]));
        out.push(b.reply());
        out.push(writer.call(&["XADD", "s", "1-0", "f", "v"]));
        out.push(x.reply());
        out
    });
}

#[test]
fn xread_block_inside_multi_and_scripts_does_not_block() {
    same_on_both_servers(|addr| {
        let mut c = Raw::connect(addr);
        c.call(&["FLUSHALL"]);
        c.call(&["MULTI"]);
        c.call(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
        c.call(&["XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">"]);
        vec![
            c.call(&["EXEC"]),
            c.call(&["EVAL", "return redis.pcall('XREAD','BLOCK','0','STREAMS','s','$')", "0"]),
        ]
    });
}

#[test]
fn a_blocked_xread_shows_in_client_list_with_flag_b() {
    let keylock = start();
    let (mut a, mut b) = (Raw::connect(keylock.addr()), Raw::connect(keylock.addr()));
    send_args(&mut a, &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    std::thread::sleep(SETTLE);
    let list = String::from_utf8(b.call(&["CLIENT", "LIST"])).unwrap();
    let blocked = list.lines().find(|l| l.contains("cmd=xread")).expect("the XREAD client");
    assert!(blocked.contains(" flags=b "), "{blocked}");
    b.call(&["XADD", "s", "1-0", "f", "v"]);
    assert!(String::from_utf8_lossy(&a.reply()).contains("1-0"));
}

#[test]
fn xadd_xdel_and_xtrim_break_watch_but_group_commands_do_not() {
    same_on_both_servers(|addr| {
        let mut out = Vec::new();
        let (mut c, mut other) = (Raw::connect(addr), Raw::connect(addr));
        c.call(&["FLUSHALL"]);
        c.call(&["XADD", "s", "1-0", "f", "v"]);
        c.call(&["XGROUP", "CREATE", "s", "g", "0"]);
        for write in [
            &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"][..],
            &["XACK", "s", "g", "1-0"],
            &["XGROUP", "SETID", "s", "g", "0"],
            &["XGROUP", "CREATECONSUMER", "s", "g", "d"],
            &["XCLAIM", "s", "g", "d", "0", "1-0", "FORCE"],
            &["XSETID", "s", "5-0"],
            &["XDEL", "s", "9-0"],
            &["XADD", "s", "6-0", "f", "v"],
            &["XDEL", "s", "6-0"],
            &["XTRIM", "s", "MAXLEN", "0"],
            &["XGROUP", "DESTROY", "s", "g"],
        ] {
            c.call(&["WATCH", "s"]);
            out.push(other.call(write));
            c.call(&["MULTI"]);
            c.call(&["PING"]);
            out.push(c.call(&["EXEC"]));
        }
        out
    });
}

#[test]
fn generic_commands_work_on_streams() {
    same_on_both_servers(|addr| {
        let mut c = Raw::connect(addr);
        c.call(&["FLUSHALL"]);
        c.call(&["XADD", "s", "1-0", "f", "v"]);
        c.call(&["XGROUP", "CREATE", "s", "g", "0"]);
        c.call(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"]);
        vec![
            c.call(&["TYPE", "s"]),
            c.call(&["OBJECT", "ENCODING", "s"]),
            c.call(&["COPY", "s", "s2"]),
            c.call(&["XADD", "s2", "2-0", "f", "v"]),
            c.call(&["XLEN", "s"]),
            c.call(&["XPENDING", "s2", "g"]),
            c.call(&["RENAME", "s2", "s3"]),
            c.call(&["XRANGE", "s3", "-", "+"]),
            c.call(&["MOVE", "s3", "1"]),
            c.call(&["SELECT", "1"]),
            c.call(&["XLEN", "s3"]),
            c.call(&["SWAPDB", "0", "1"]),
            c.call(&["XLEN", "s3"]),
            c.call(&["PEXPIRE", "s3", "50"]),
            c.call(&["UNLINK", "s"]),
            c.call(&["SELECT", "0"]),
            c.call(&["EXISTS", "s"]),
            c.call(&["LPUSH", "s", "x"]),
            c.call(&["XLEN", "s"]),
            c.call(&["XADD", "s", "*", "f", "v"]).split_at(1).0.to_vec(),
        ]
    });
}

#[test]
fn xreadgroup_waiters_are_told_when_their_stream_expires() {
    same_on_both_servers(|addr| {
        let (mut a, mut writer) = (Raw::connect(addr), Raw::connect(addr));
        writer.call(&["FLUSHALL"]);
        writer.call(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
        send_args(&mut a, &["XREADGROUP", "GROUP", "g", "alice", "BLOCK", "0", "STREAMS", "s", ">"]);
        std::thread::sleep(SETTLE);
        vec![writer.call(&["PEXPIRE", "s", "20"]), a.reply(), writer.call(&["EXISTS", "s"])]
    });
}

#[test]
fn idle_times_follow_the_server_clock() {
    let keylock = start_with(|c| c.directives.push(("clock".into(), vec!["frozen".into()])));
    let mut c = conn(&keylock);
    let _: String = q(&mut c, &["XADD", "s", "1-0", "f", "v"]);
    let _: String = q(&mut c, &["XGROUP", "CREATE", "s", "g", "0"]);
    let _: redis::Value = q(&mut c, &["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"]);
    let _: u64 = q(&mut c, &["KEYLOCK", "CLOCK", "ADVANCE", "5000"]);
    let pending: Vec<(String, String, i64, i64)> = q(&mut c, &["XPENDING", "s", "g", "-", "+", "10"]);
    assert_eq!(pending, vec![("1-0".to_string(), "alice".to_string(), 5000, 1)]);
    let idle: Vec<(String, String, i64, i64)> = q(&mut c, &["XPENDING", "s", "g", "IDLE", "6000", "-", "+", "10"]);
    assert!(idle.is_empty());
    let consumers: Vec<std::collections::HashMap<String, redis::Value>> = q(&mut c, &["XINFO", "CONSUMERS", "s", "g"]);
    assert_eq!(consumers[0]["idle"], redis::Value::Int(5000));
    let claimed: Vec<String> = q(&mut c, &["XCLAIM", "s", "g", "bob", "5000", "1-0", "JUSTID"]);
    assert_eq!(claimed, vec!["1-0".to_string()]);
    let none: Vec<String> = q(&mut c, &["XCLAIM", "s", "g", "carol", "1", "1-0", "JUSTID"]);
    assert!(none.is_empty(), "just claimed: idle 0");
}

#[test]
fn a_blocked_xread_on_several_keys_is_served_by_the_one_written_in_its_protocol() {
    same_on_both_servers(|addr| {
        let mut out = Vec::new();
        let (mut a, mut b, mut writer) = (Raw::connect(addr), Raw::connect(addr), Raw::connect(addr));
        writer.call(&["FLUSHALL"]);
        b.call(&["HELLO", "3"]);
        send_args(&mut a, &["XREAD", "COUNT", "2", "BLOCK", "0", "STREAMS", "s1", "s2", "$", "$"]);
        send_args(&mut b, &["XREAD", "BLOCK", "0", "STREAMS", "s1", "s2", "$", "$"]);
        std::thread::sleep(SETTLE);
        writer.call(&["MULTI"]);
        writer.call(&["XADD", "s2", "1-0", "a", "1"]);
        writer.call(&["XADD", "s2", "2-0", "a", "2"]);
        writer.call(&["XADD", "s2", "3-0", "a", "3"]);
        writer.call(&["XADD", "s1", "1-0", "b", "1"]);
        out.push(writer.call(&["EXEC"]));
        out.push(a.reply());
        out.push(b.reply());
        out
    });
}

#[test]
fn client_unblock_ends_a_blocked_xread() {
    same_on_both_servers(|addr| {
        let mut out = Vec::new();
        let (mut a, mut admin) = (Raw::connect(addr), Raw::connect(addr));
        admin.call(&["FLUSHALL"]);
        let id = String::from_utf8(a.call(&["CLIENT", "ID"])).unwrap();
        let id = id.trim_start_matches(':').trim().to_string();
        send_args(&mut a, &["XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">"]);
        out.push(a.reply());
        admin.call(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
        send_args(&mut a, &["XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">"]);
        std::thread::sleep(SETTLE);
        out.push(admin.call(&["CLIENT", "UNBLOCK", &id]));
        out.push(a.reply());
        send_args(&mut a, &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
        std::thread::sleep(SETTLE);
        out.push(admin.call(&["CLIENT", "UNBLOCK", &id, "ERROR"]));
        out.push(a.reply());
        out
    });
}

#[test]
fn a_group_waiter_reads_after_the_groups_last_id_when_served() {
    same_on_both_servers(|addr| {
        let mut out = Vec::new();
        let (mut a, mut writer) = (Raw::connect(addr), Raw::connect(addr));
        writer.call(&["FLUSHALL"]);
        writer.call(&["XADD", "s", "1-0", "a", "1"]);
        writer.call(&["XADD", "s", "2-0", "a", "2"]);
        writer.call(&["XGROUP", "CREATE", "s", "g", "$"]);
        send_args(
            &mut a,
            &["XREADGROUP", "GROUP", "g", "c", "COUNT", "5", "BLOCK", "0", "STREAMS", "s", ">"],
        );
        std::thread::sleep(SETTLE);
        out.push(writer.call(&["XGROUP", "SETID", "s", "g", "0"]));
        assert!(silent_for(&mut a, SETTLE), "SETID does not serve");
        out.push(writer.call(&["XADD", "s", "3-0", "a", "3"]));
        out.push(a.reply());
        out.push(writer.call(&["XINFO", "GROUPS", "s"]));
        out
    });
}

/// One random stream command for [`random_stream_commands_answer_as_redis_does`]:
/// appends (some trimming on the way), deletions, trims exact and
/// approximate, and group commands whose replies carry no times.
fn random_command(rng: &mut fastrand::Rng, ms: &mut u64) -> Vec<String> {
    let id = |rng: &mut fastrand::Rng, ms: u64| format!("{}-{}", rng.u64(0..=ms), rng.u64(0..3));
    let group = ["g1", "g2"][rng.usize(0..2)].to_string();
    let consumer = ["a", "b", "c"][rng.usize(0..3)].to_string();
    let words: Vec<String> = match rng.u32(0..100) {
        0..=49 => {
            *ms += rng.u64(0..3);
            let mut cmd = vec!["XADD".to_string(), "s".to_string()];
            match rng.u32(0..20) {
                0 => cmd.extend(["MAXLEN".into(), "~".into(), rng.u64(0..30).to_string()]),
                1 => cmd.extend(["MINID".into(), "~".into(), rng.u64(0..=*ms).to_string()]),
                _ => {}
            }
            cmd.push(format!("{ms}-*"));
            for j in 0..rng.usize(1..4) {
                let field = ["f", "g", "123"][rng.usize(0..3)].to_string();
                let field = if rng.bool() { format!("h{j}") } else { field };
                let value = match rng.u32(0..3) {
                    0 => "v".to_string(),
                    1 => "x".repeat(rng.usize(0..120)),
                    _ => rng.i64(-1_000_000..1_000_000).to_string(),
                };
                cmd.extend([field, value]);
            }
            cmd
        }
        50..=64 => {
            let mut cmd = vec!["XDEL".to_string(), "s".to_string()];
            for _ in 0..rng.usize(1..4) {
                cmd.push(id(rng, *ms));
            }
            cmd
        }
        65..=72 => vec![
            "XTRIM".into(),
            "s".into(),
            ["MAXLEN", "MINID"][rng.usize(0..2)].into(),
            ["~", "="][rng.usize(0..2)].into(),
            rng.u64(0..=*ms).to_string(),
        ],
        73..=75 => vec![
            "XTRIM".into(),
            "s".into(),
            "MAXLEN".into(),
            "~".into(),
            rng.u64(0..40).to_string(),
            "LIMIT".into(),
            rng.u64(0..20).to_string(),
        ],
        76 => vec![
            "XGROUP".into(),
            "CREATE".into(),
            "s".into(),
            group,
            ["0", "$"][rng.usize(0..2)].into(),
        ],
        77..=80 => vec![
            "XREADGROUP".into(),
            "GROUP".into(),
            group,
            consumer,
            "COUNT".into(),
            rng.u32(0..4).to_string(),
            "STREAMS".into(),
            "s".into(),
            [">", "0"][rng.usize(0..2)].into(),
        ],
        81 => vec![
            "XREADGROUP".into(),
            "GROUP".into(),
            group,
            consumer,
            "NOACK".into(),
            "STREAMS".into(),
            "s".into(),
            ">".into(),
        ],
        82 => vec!["XACK".into(), "s".into(), group, id(rng, *ms), id(rng, *ms)],
        83 => vec![
            "XCLAIM".into(),
            "s".into(),
            group,
            consumer,
            "0".into(),
            id(rng, *ms),
            "JUSTID".into(),
        ],
        84 => vec![
            "XCLAIM".into(),
            "s".into(),
            group,
            consumer,
            "0".into(),
            id(rng, *ms),
            "FORCE".into(),
            "RETRYCOUNT".into(),
            "3".into(),
        ],
        85 => vec![
            "XAUTOCLAIM".into(),
            "s".into(),
            group,
            consumer,
            "0".into(),
            id(rng, *ms),
            "COUNT".into(),
            rng.u32(1..4).to_string(),
            "JUSTID".into(),
        ],
        86 => vec!["XPENDING".into(), "s".into(), group],
        87 => vec!["XGROUP".into(), "SETID".into(), "s".into(), group, id(rng, *ms)],
        88 => vec!["XGROUP".into(), "DELCONSUMER".into(), "s".into(), group, consumer],
        89 => vec!["XGROUP".into(), "DESTROY".into(), "s".into(), group],
        90..=94 => vec!["XINFO".into(), "GROUPS".into(), "s".into()],
        _ => vec!["XRANGE".into(), "s".into(), "-".into(), "+".into(), "COUNT".into(), "5".into()],
    };
    words
}

/// Random command sequences, with small node limits so nodes fill and
/// split often: every reply, and XINFO STREAM after every command (node
/// and radix tree counts, first and max deleted IDs, entries added), must
/// be what redis-server answers.
#[test]
fn random_stream_commands_answer_as_redis_does() {
    let Some(redis) = real_redis() else { return };
    let keylock = start();
    let (mut ours, mut theirs) = (Raw::connect(keylock.addr()), Raw::connect(redis.addr));
    for seed in 0..12u64 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let entries = ["3", "5", "10", "100"][rng.usize(0..4)];
        let bytes = ["0", "64", "200", "4096"][rng.usize(0..4)];
        for c in [&mut ours, &mut theirs] {
            c.call(&["FLUSHALL"]);
            c.call(&["CONFIG", "SET", "stream-node-max-entries", entries]);
            c.call(&["CONFIG", "SET", "stream-node-max-bytes", bytes]);
        }
        let mut ms = 1;
        for step in 0..300 {
            let words = random_command(&mut rng, &mut ms);
            let args: Vec<&str> = words.iter().map(String::as_str).collect();
            for check in [args.as_slice(), &["XINFO", "STREAM", "s"]] {
                let (got, want) = (ours.call(check), theirs.call(check));
                assert!(
                    got == want,
                    "seed {seed} (node entries {entries}, bytes {bytes}), step {step}: {check:?} after {args:?}\n keylock: {}\n redis:   {}",
                    String::from_utf8_lossy(&got),
                    String::from_utf8_lossy(&want)
                );
            }
        }
    }
}

#[test]
fn xreadgroup_waiters_are_told_when_swapdb_takes_their_stream_away() {
    same_on_both_servers(|addr| {
        let mut out = Vec::new();
        let (mut a, mut b, mut x, mut admin) = (Raw::connect(addr), Raw::connect(addr), Raw::connect(addr), Raw::connect(addr));
        admin.call(&["FLUSHALL"]);
        admin.call(&["SELECT", "4"]);
        admin.call(&["LPUSH", "t", "e1"]);
        admin.call(&["XADD", "u", "9-0", "f", "v"]);
        admin.call(&["SELECT", "9"]);
        for key in ["s", "t", "u"] {
            admin.call(&["XADD", key, "5-0", "f", "v"]);
            admin.call(&["XGROUP", "CREATE", key, "g", "$"]);
        }
        for (c, key) in [(&mut a, "s"), (&mut b, "t")] {
            c.call(&["SELECT", "9"]);
            send_args(c, &["XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", key, ">"]);
        }
        x.call(&["SELECT", "9"]);
        send_args(&mut x, &["XREAD", "BLOCK", "0", "STREAMS", "u", "$"]);
        std::thread::sleep(SETTLE);
        out.push(admin.call(&["SWAPDB", "4", "9"]));
        out.push(a.reply());
        out.push(b.reply());
        out.push(x.reply());
        out
    });
}
