//! CLIENT PAUSE / UNPAUSE: which commands a pause holds, that they run
//! again (in order, with what the client sent after them) once it ends,
//! and that the dataset stands still meanwhile. Each scenario runs against
//! keylock and redis-server and what every connection receives must match.

mod common;
use common::*;

use std::time::{Duration, Instant};

const SETTLE: Duration = Duration::from_millis(100);

fn blocked_clients(admin: &mut Raw) -> Vec<u8> {
    let info = String::from_utf8(admin.call(&["INFO", "clients"])).unwrap();
    info.lines()
        .filter(|l| l.starts_with("blocked_clients"))
        .collect::<String>()
        .into_bytes()
}

#[test]
fn a_write_pause_holds_writes_and_lets_reads_through() {
    same_on_both_servers(|addr| {
        let mut out = Vec::new();
        let (mut admin, mut writer, mut reader) = (Raw::connect(addr), Raw::connect(addr), Raw::connect(addr));
        out.push(admin.call(&["SET", "k", "before"]));
        out.push(admin.call(&["CLIENT", "PAUSE", "60000", "WRITE"]));
        let mut pipeline = encode(&[b"SET", b"k", b"during"]);
        pipeline.extend(encode(&[b"GET", b"k"]));
        writer.send(&pipeline);
        std::thread::sleep(SETTLE);
        assert!(silent_for(&mut writer, SETTLE), "the write is held");
        out.push(reader.call(&["GET", "k"]));
        out.push(reader.call(&["PING"]));
        send_args(&mut reader, &["PUBLISH", "ch", "may-replicate"]);
        std::thread::sleep(SETTLE);
        out.push(blocked_clients(&mut admin));
        out
    });
}

#[test]
fn unpause_runs_the_held_commands_in_order() {
    same_on_both_servers(|addr| {
        let mut out = Vec::new();
        let (mut admin, mut writer) = (Raw::connect(addr), Raw::connect(addr));
        out.push(admin.call(&["CLIENT", "PAUSE", "60000", "WRITE"]));
        let mut pipeline = encode(&[b"SET", b"k", b"during"]);
        pipeline.extend(encode(&[b"GET", b"k"]));
        pipeline.extend(encode(&[b"INCR", b"n"]));
        writer.send(&pipeline);
        std::thread::sleep(SETTLE);
        out.push(blocked_clients(&mut admin));
        out.push(admin.call(&["CLIENT", "UNPAUSE"]));
        out.push(writer.reply());
        out.push(writer.reply());
        out.push(writer.reply());
        out.push(blocked_clients(&mut admin));
        out
    });
}

#[test]
fn transactions_and_scripts_are_held_by_what_they_write() {
    same_on_both_servers(|addr| {
        let mut out = Vec::new();
        let (mut admin, mut a, mut b) = (Raw::connect(addr), Raw::connect(addr), Raw::connect(addr));
        out.push(a.call(&["MULTI"]));
        out.push(a.call(&["SET", "k", "v"]));
        out.push(admin.call(&["CLIENT", "PAUSE", "60000", "WRITE"]));
        // A read-only transaction and read-only scripts run.
        out.push(b.call(&["MULTI"]));
        out.push(b.call(&["GET", "k"]));
        out.push(b.call(&["EXEC"]));
        out.push(b.call(&["EVAL_RO", "return 1", "0"]));
        out.push(b.call(&["EVAL", "#!lua flags=no-writes\nreturn 2", "0"]));
        // A transaction that writes is held at EXEC, a plain EVAL too.
        send_args(&mut a, &["EXEC"]);
        send_args(&mut b, &["EVAL", "return 3", "0"]);
        std::thread::sleep(SETTLE);
        out.push(blocked_clients(&mut admin));
        out.push(admin.call(&["CLIENT", "UNPAUSE"]));
        out.push(a.reply());
        out.push(b.reply());
        out
    });
}

#[test]
fn a_pause_for_all_holds_everything_until_its_time_is_up() {
    same_on_both_servers(|addr| {
        let mut out = Vec::new();
        let (mut admin, mut a) = (Raw::connect(addr), Raw::connect(addr));
        let started = Instant::now();
        out.push(admin.call(&["CLIENT", "PAUSE", "300"]));
        send_args(&mut a, &["PING"]);
        out.push(a.reply());
        assert!(started.elapsed() >= Duration::from_millis(290), "PING waited the pause");
        // Refusals are answered at once; a wrong arity among them.
        out.push(admin.call(&["CLIENT", "PAUSE", "300", "ALL"]));
        out.push(a.call(&["SET", "k"]));
        out
    });
}

#[test]
fn the_dataset_stands_still_during_a_pause() {
    same_on_both_servers(|addr| {
        let mut out = Vec::new();
        let mut c = Raw::connect(addr);
        let expired = |c: &mut Raw| {
            let info = String::from_utf8(c.call(&["INFO", "stats"])).unwrap();
            info.lines()
                .filter(|l| l.starts_with("expired_keys"))
                .collect::<String>()
                .into_bytes()
        };
        out.push(expired(&mut c));
        out.push(c.call(&["MULTI"]));
        out.push(c.call(&["SET", "foo", "bar", "PX", "10"]));
        out.push(c.call(&["SET", "bar", "foo", "PX", "10"]));
        out.push(c.call(&["CLIENT", "PAUSE", "50000", "WRITE"]));
        out.push(c.call(&["SET", "late", "v"]));
        out.push(c.call(&["EXEC"]));
        std::thread::sleep(Duration::from_millis(300));
        out.push(c.call(&["GET", "foo"]));
        out.push(c.call(&["GET", "bar"]));
        out.push(expired(&mut c));
        out.push(c.call(&["CLIENT", "UNPAUSE"]));
        out.push(c.call(&["GET", "foo"]));
        out.push(c.call(&["GET", "bar"]));
        out.push(expired(&mut c));
        out.push(c.call(&["GET", "late"]));
        out
    });
}

#[test]
fn bad_pause_arguments_are_refused_as_redis_refuses_them() {
    same_on_both_servers(|addr| {
        let mut c = Raw::connect(addr);
        [
            &["CLIENT", "PAUSE", "abc"][..],
            &["CLIENT", "PAUSE", "-1"],
            &["CLIENT", "PAUSE", "10", "MAYBE"],
            &["CLIENT", "PAUSE", "abc", "MAYBE"],
            &["CLIENT", "PAUSE"],
            &["CLIENT", "PAUSE", "10", "WRITE", "x"],
            &["CLIENT", "UNPAUSE", "x"],
            &["CLIENT", "UNPAUSE"],
            &["CLIENT", "PAUSE", "0"],
            &["SET", "k", "v"],
        ]
        .iter()
        .map(|cmd| c.call(cmd))
        .collect()
    });
}
