//! The wire protocol: malformed input, inline commands, pipelines, limits
//! and disconnects. Expected bytes are what redis-server 7.0 sends for the
//! same input.

mod common;
use common::*;

use std::io::Write;
use std::time::Duration;

/// Sends raw bytes and collects everything until the server closes or
/// goes quiet; returns the bytes and whether the connection was closed.
fn exchange(addr: std::net::SocketAddr, input: &[u8]) -> (Vec<u8>, bool) {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(input).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return (out, true),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => return (out, false),
        }
    }
}

#[test]
fn invalid_multibulk_length_runs_earlier_commands_then_closes() {
    let s = start();
    let (out, closed) = exchange(s.addr(), b"*1\r\n$4\r\nPING\r\n*x\r\n");
    assert_eq!(out, b"+PONG\r\n-ERR Protocol error: invalid multibulk length\r\n");
    assert!(closed);
}

#[test]
fn non_bulk_element_is_a_protocol_error() {
    let s = start();
    let (out, closed) = exchange(s.addr(), b"*1\r\n+foo\r\n");
    assert_eq!(out, b"-ERR Protocol error: expected '$', got '+'\r\n");
    assert!(closed);
}

#[test]
fn negative_bulk_length_is_a_protocol_error() {
    let s = start();
    let (out, closed) = exchange(s.addr(), b"*1\r\n$-3\r\n");
    assert_eq!(out, b"-ERR Protocol error: invalid bulk length\r\n");
    assert!(closed);
}

#[test]
fn bulk_length_over_the_limit_is_refused_before_its_data() {
    let s = start();
    let (out, closed) = exchange(s.addr(), b"*1\r\n$999999999999\r\n");
    assert_eq!(out, b"-ERR Protocol error: invalid bulk length\r\n");
    assert!(closed);
}

#[test]
fn proto_max_bulk_len_flag_lowers_the_limit() {
    let s = start_with(|c| c.set("proto-max-bulk-len", &["1048576"]).unwrap());
    let (out, closed) = exchange(s.addr(), b"*2\r\n$4\r\nECHO\r\n$2000000\r\n");
    assert_eq!(out, b"-ERR Protocol error: invalid bulk length\r\n");
    assert!(closed);
}

#[test]
fn unbalanced_quotes_in_inline_command_close_the_connection() {
    let s = start();
    let (out, closed) = exchange(s.addr(), b"set \"a\r\n");
    assert_eq!(out, b"-ERR Protocol error: unbalanced quotes in request\r\n");
    assert!(closed);
}

#[test]
fn inline_commands_work_as_telnet_sends_them() {
    let s = start();
    let (out, closed) = exchange(s.addr(), b"SET k \"hello world\"\r\nGET k\nPING\r\n");
    assert_eq!(out, b"+OK\r\n$11\r\nhello world\r\n+PONG\r\n");
    assert!(!closed);
}

#[test]
fn empty_lines_and_empty_multibulks_are_ignored() {
    let s = start();
    let (out, _) = exchange(s.addr(), b"\r\n\r\n*0\r\n*-5\r\nPING\r\n");
    assert_eq!(out, b"+PONG\r\n");
}

#[test]
fn bytes_after_bulk_data_are_skipped_unchecked_as_redis_does() {
    let s = start();
    let (out, closed) = exchange(s.addr(), b"*1\r\n$4\r\nPINGxx*1\r\n$4\r\nPING\r\n");
    assert_eq!(out, b"+PONG\r\n+PONG\r\n");
    assert!(!closed);
}

#[test]
fn a_pipeline_is_answered_in_order() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    let mut input = Vec::new();
    for _ in 0..1000 {
        input.extend(encode(&[b"APPEND".as_slice(), b"s", b"x"]));
        input.extend(encode(&[b"INCR".as_slice(), b"n"]));
    }
    raw.send(&input);
    for i in 0..1000 {
        let n = i + 1;
        assert_eq!(raw.reply(), format!(":{n}\r\n").into_bytes(), "APPEND #{n}");
        assert_eq!(raw.reply(), format!(":{n}\r\n").into_bytes(), "INCR #{n}");
    }
}

#[test]
fn a_command_split_across_many_writes_is_reassembled() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    let cmd = encode(&[b"SET".as_slice(), b"key", &vec![b'x'; 100_000]]);
    for chunk in cmd.chunks(777) {
        raw.send(chunk);
        std::thread::sleep(Duration::from_micros(50));
    }
    assert_eq!(raw.reply(), b"+OK\r\n");
    assert_eq!(raw.call(&["STRLEN", "key"]), b":100000\r\n");
}

#[test]
fn binary_arguments_round_trip() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    let value: Vec<u8> = (0..=255u8).collect();
    raw.send_cmd(&[b"SET", b"\x00\xff", &value]);
    assert_eq!(raw.reply(), b"+OK\r\n");
    raw.send_cmd(&[b"GET", b"\x00\xff"]);
    let mut want = b"$256\r\n".to_vec();
    want.extend(&value);
    want.extend(b"\r\n");
    assert_eq!(raw.reply(), want);
}

#[test]
fn a_client_disconnecting_mid_pipeline_does_not_affect_others() {
    let s = start();
    let mut steady = Raw::connect(s.addr());
    for _ in 0..20 {
        let mut rude = std::net::TcpStream::connect(s.addr()).unwrap();
        let mut input = Vec::new();
        for _ in 0..500 {
            input.extend(encode(&[b"INCR".as_slice(), b"shared"]));
        }
        // Half a command at the end, then hang up without reading.
        input.extend(b"*2\r\n$4\r\nINCR\r\n$6\r\nsha");
        rude.write_all(&input).unwrap();
        drop(rude);
        assert_eq!(steady.call(&["PING"]), b"+PONG\r\n");
    }
    std::thread::sleep(Duration::from_millis(100));
    let n: i64 = String::from_utf8(steady.call(&["GET", "shared"]))
        .unwrap()
        .lines()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert!(n <= 20 * 500 && n % 500 == 0, "whole batches only, got {n}");
}

#[test]
fn many_connections_at_once_are_served() {
    let s = start();
    let mut conns: Vec<Raw> = (0..200).map(|_| Raw::connect(s.addr())).collect();
    for (i, c) in conns.iter_mut().enumerate() {
        assert_eq!(
            c.call(&["ECHO", &i.to_string()]),
            format!("${}\r\n{i}\r\n", i.to_string().len()).into_bytes()
        );
    }
}

/// Protocol errors, then what INFO says about errors.
fn protocol_errors_then_info(addr: std::net::SocketAddr) -> Vec<u8> {
    exchange(addr, b"*x\r\n");
    exchange(addr, b"*1\r\n$3\r\nfoo\r\n*1\r\n+x\r\n");
    let mut c = Raw::connect(addr);
    let info = String::from_utf8(c.call(&["INFO", "errorstats"])).unwrap();
    let stats = String::from_utf8(c.call(&["INFO", "stats"])).unwrap();
    let total = stats.lines().find(|l| l.starts_with("total_error_replies:")).unwrap_or("");
    format!(
        "{}\n{total}",
        info.lines().filter(|l| l.starts_with("errorstat_")).collect::<Vec<_>>().join("\n")
    )
    .into_bytes()
}

#[test]
fn protocol_errors_count_in_errorstats() {
    let s = start();
    let ours = protocol_errors_then_info(s.addr());
    assert_eq!(String::from_utf8_lossy(&ours), "errorstat_ERR:count=3\ntotal_error_replies:3");
    if let Some(redis) = real_redis() {
        assert_eq!(protocol_errors_then_info(redis.addr), ours);
    }
}
