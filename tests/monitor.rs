//! MONITOR: every executed command as a `+ts [db addr] "arg"…` line.

mod common;
use common::*;

fn monitor_line_args(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(line);
    text.split_once("] ").map(|(_, a)| a.trim_end().to_string()).unwrap_or_default()
}

#[test]
fn monitor_shows_commands_of_other_clients_in_order() {
    let s = start();
    let mut mon = Raw::connect(s.addr());
    assert_eq!(mon.call(&["MONITOR"]), b"+OK\r\n");
    let mut c = Raw::connect(s.addr());
    c.send(b"SET a \"x y\"\r\nMULTI\r\nINCR n\r\nEXEC\r\nCONFIG GET port\r\nGET a\r\n");
    for _ in 0..6 {
        c.reply();
    }
    let lines: Vec<String> = (0..5).map(|_| monitor_line_args(&mon.reply())).collect();
    assert_eq!(
        lines,
        vec!["\"SET\" \"a\" \"x y\"", "\"MULTI\"", "\"INCR\" \"n\"", "\"EXEC\"", "\"GET\" \"a\""]
    );
}

#[test]
fn monitor_line_format_has_timestamp_db_and_address() {
    let s = start();
    let mut mon = Raw::connect(s.addr());
    mon.call(&["MONITOR"]);
    let mut c = Raw::connect(s.addr());
    c.call(&["SELECT", "3"]);
    c.call(&["SET", "bin", "a\"b\n\x01"]);
    mon.reply();
    let line = String::from_utf8(mon.reply()).unwrap();
    let local = c.writer.local_addr().unwrap();
    let (ts, rest) = line[1..].split_once(' ').unwrap();
    let (secs, micros) = ts.split_once('.').unwrap();
    assert!(secs.parse::<u64>().is_ok() && micros.len() == 6, "{line}");
    assert_eq!(rest, format!("[3 {local}] \"SET\" \"bin\" \"a\\\"b\\n\\x01\"\r\n"));
}

#[test]
fn monitor_connection_cannot_touch_the_keyspace() {
    let s = start();
    let mut mon = Raw::connect(s.addr());
    mon.call(&["MONITOR"]);
    assert_eq!(mon.call(&["GET", "a"]), b"-ERR Replica can't interact with the keyspace\r\n");
}

#[test]
fn monitor_redacts_passwords() {
    let s = start();
    let mut mon = Raw::connect(s.addr());
    mon.call(&["MONITOR"]);
    let mut c = Raw::connect(s.addr());
    c.call(&["AUTH", "user", "secret"]);
    c.call(&["HELLO", "2", "AUTH", "default", "secret"]);
    assert_eq!(monitor_line_args(&mon.reply()), "\"AUTH\" \"(redacted)\" \"(redacted)\"");
    assert_eq!(
        monitor_line_args(&mon.reply()),
        "\"HELLO\" \"2\" \"AUTH\" \"(redacted)\" \"(redacted)\""
    );
}
